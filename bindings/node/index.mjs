// ES module entry of sqlite-idempotency: the same objects as index.js. Node
// finds the names of index.js's `module.exports = { ... }`, so nothing is
// listed twice.
export * from './index.js';
export { default } from './index.js';

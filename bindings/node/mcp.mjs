// ES module entry of sqlite-idempotency/mcp: the same objects as mcp.js.
export * from './mcp.js';
export { default } from './mcp.js';

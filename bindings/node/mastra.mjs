// ES module entry of sqlite-idempotency/mastra: the same objects as mastra.js.
export * from './mastra.js';

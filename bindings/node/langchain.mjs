// ES module entry of sqlite-idempotency/langchain: the same objects as langchain.js.
export * from './langchain.js';

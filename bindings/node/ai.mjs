// ES module entry of sqlite-idempotency/ai: the same objects as ai.js.
export * from './ai.js';

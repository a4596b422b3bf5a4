// ES module entry of sqlite-idempotency/runners: the same objects as runners.js.
export * from './runners.js';

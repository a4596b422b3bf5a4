// ES module entry of sqlite-idempotency/openai-agents: the same objects as openai-agents.js.
export * from './openai-agents.js';

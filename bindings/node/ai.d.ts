// TypeScript declarations of sqlite-idempotency/ai (ai.js).
import type { Tool, ToolExecutionOptions } from 'ai';
import type { Ledger } from './index.js';
import type { CallOptions, KeyPartResult } from './agent-tools.js';

export { currentAttempt, ToolCallError } from './agent-tools.js';
export type { CallOptions, KeyPart, KeyPartResult, ToolCallDecision } from './agent-tools.js';

/**
 * What idempotentTool needs besides the tool: the key's who and conversation,
 * from each call. CONTEXT is the tool's (its contextSchema types
 * `options.context`). A function that throws (reading a toolsContext that
 * was not given) refuses the call as no tenant / no conversation.
 */
export interface IdempotentToolOptions<INPUT, CONTEXT> extends CallOptions {
  /** the tenant of the call (from the application's authentication, e.g. `options.context`), never from the model */
  tenant: (input: INPUT, options: ToolExecutionOptions<CONTEXT>) => KeyPartResult;
  /** the conversation of the call (e.g. the chat id in `options.context`); never the toolCallId, which the SDK mints anew on re-plan */
  conversation: (input: INPUT, options: ToolExecutionOptions<CONTEXT>) => KeyPartResult;
}

/**
 * The tool, with an execute that runs at most once per tenant +
 * conversation + name + canonical input, and a toModelOutput that marks a
 * replay for the model. Refusals and recorded failures are thrown as
 * ToolCallError (the model reads a tool error).
 */
export function idempotentTool<INPUT, OUTPUT, CONTEXT>(
  ledger: Ledger,
  name: string,
  options: IdempotentToolOptions<NoInfer<INPUT>, NoInfer<CONTEXT>>,
  tool: Tool<INPUT, OUTPUT, CONTEXT>,
): Tool<INPUT, OUTPUT, CONTEXT>;

// TypeScript declarations of sqlite-idempotency/ai (ai.js).
import type { Tool, ToolExecutionOptions } from 'ai';
import type { Ledger } from './index.js';
import type { AllowedByResult, CallOptions, KeyPartResult, TargetsResult } from './agent-tools.js';

export { currentAttempt, ToolCallError } from './agent-tools.js';
export type { AllowedByResult, CallOptions, KeyPart, KeyPartResult, TargetsResult, ToolCallDecision } from './agent-tools.js';

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
  /** what the call's write touches, from the input's identifying fields (never its wording): a target another call of the tenant holds refuses the call as a conflict */
  targets?: (input: INPUT) => TargetsResult;
  /** who allows a deliberate second write to a held target (the application's, never the model's), or nothing */
  allowedBy?: (input: INPUT, options: ToolExecutionOptions<CONTEXT>) => AllowedByResult;
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

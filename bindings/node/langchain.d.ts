// TypeScript declarations of sqlite-idempotency/langchain (langchain.js).
import type { Ledger } from './index.js';
import type { AllowedByResult, CallOptions, KeyPartResult, TargetsResult } from './agent-tools.js';

export { currentAttempt, ToolCallError } from './agent-tools.js';
export type { AllowedByResult, CallOptions, KeyPart, KeyPartResult, TargetsResult, ToolCallDecision } from './agent-tools.js';

/**
 * The parts of a LangChain RunnableConfig the key's functions read (this
 * file names no @langchain/core type, so that it fits both of that
 * package's builds, CommonJS and ES module). Configurable is what the
 * application passes as `config.configurable` (LangChain's own type is
 * `Record<string, any>`); reading a field of one that was not given throws,
 * which refuses the call as no tenant / no conversation.
 */
export interface ToolCallConfig<Configurable = Record<string, any>> {
  configurable: Configurable;
  metadata?: Record<string, unknown>;
  signal?: AbortSignal;
  toolCall?: { id?: string; name: string; args: Record<string, unknown> };
  [field: string]: unknown;
}

/** A @langchain/core tool: tool(func, { name, schema }), a StructuredTool or a DynamicTool. */
export interface LangChainTool {
  name: string;
  invoke(input: any, config?: any): Promise<any>;
}

/**
 * What idempotentTool needs besides the tool: the key's who and conversation,
 * from each call. A call that finds an identical one in progress (after
 * waitMs) waits until the holder's lease ends, then answers the decision
 * of that moment.
 */
export interface IdempotentToolOptions<Configurable = Record<string, any>> extends CallOptions {
  /** the tenant of the call (e.g. `config.configurable.user_id`, set by the application), never from the model */
  tenant: (input: unknown, config: ToolCallConfig<Configurable>) => KeyPartResult;
  /** the conversation of the call (default: `config.configurable.thread_id`, LangGraph's thread) */
  conversation?: (input: unknown, config: ToolCallConfig<Configurable>) => KeyPartResult;
  /** what the call's write touches, from the input's identifying fields (never its wording): a target another call of the tenant holds refuses the call as a conflict */
  targets?: (input: any) => TargetsResult;
  /** who allows a deliberate second write to a held target (the application's, never the model's), or nothing */
  allowedBy?: (input: unknown, config: ToolCallConfig<Configurable>) => AllowedByResult;
}

/**
 * A copy of the tool (same class, name, schema) that runs at most once per
 * tenant + conversation + name + canonical input. Called with a tool call,
 * a replay is a ToolMessage whose content notes the replay and whose
 * `response_metadata.idempotency` is `{ decision: 'replay', key }`;
 * refusals and recorded failures are ToolMessages with status 'error',
 * returned, not thrown (the tool-retry middleware does not retry them).
 */
export function idempotentTool<T extends LangChainTool, Configurable = Record<string, any>>(
  ledger: Ledger,
  name: string,
  options: IdempotentToolOptions<Configurable>,
  tool: T,
): T;

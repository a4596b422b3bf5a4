// TypeScript declarations of sqlite-idempotency/mastra (mastra.js).
import type { ToolExecutionContext } from '@mastra/core/tools';
import type { Ledger } from './index.js';
import type { AllowedByResult, CallOptions, KeyPartResult, TargetsResult } from './agent-tools.js';

export { currentAttempt, ToolCallError } from './agent-tools.js';
export type { AllowedByResult, CallOptions, KeyPart, KeyPartResult, TargetsResult, ToolCallDecision } from './agent-tools.js';

/** The window's default length in seconds (600), as the MCP adapter's. */
export const WINDOW_SECONDS: number;

/**
 * What idempotentTool needs besides the tool config: the key's who, and how
 * to find the conversation. Each function gets the tool's input and the
 * execute context Mastra hands the tool (`context.requestContext`, set by
 * the application on agent.generate; `context.agent.threadId` with memory).
 */
export interface IdempotentToolOptions<INPUT> extends CallOptions {
  /** the tenant of the call (from the request context your server sets), never from the model */
  tenant: (input: INPUT, context: ToolExecutionContext) => KeyPartResult;
  /** the conversation (default: the memory thread, context.agent.threadId; else the window); never the toolCallId */
  conversation?: (input: INPUT, context: ToolExecutionContext) => KeyPartResult;
  /** refuse a call with no conversation (no memory thread, none given) instead of using the window */
  strict?: boolean;
  /** the window's length in seconds, 1 to 86400 (default 600); not with strict */
  windowSeconds?: number;
  /** what the call's write touches, from the input's identifying fields (never its wording) */
  targets?: (input: INPUT) => TargetsResult;
  /** who allows a deliberate second write to a held target (the application's, never the model's), or nothing */
  allowedBy?: (input: INPUT, context: ToolExecutionContext) => AllowedByResult;
}

/** What createTool takes, as far as idempotentTool reads it. */
interface ToolConfig {
  id?: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  execute: (input: any, context: any) => Promise<unknown>;
}

/** The input an execute function takes. */
type InputOf<T extends ToolConfig> = Parameters<T['execute']>[0];

/**
 * The config of createTool, with an execute that runs at most once per
 * tenant + conversation + name + canonical input, and no outputSchema (a
 * replay's output is text: the replay's words, then the first output). A
 * refusal or recorded failure is thrown as ToolCallError (the model reads
 * its words as the tool's error).
 */
export function idempotentTool<T extends ToolConfig>(
  ledger: Ledger,
  name: string,
  options: IdempotentToolOptions<InputOf<T>>,
  toolConfig: T,
): Omit<T, 'outputSchema'> & { id: string };

// TypeScript declarations of what sqlite-idempotency/ai, /openai-agents and
// /langchain share (agent-tools.js).
import type { Attempt, IdempotencyError, Json } from './index.js';

/** What a tenant or conversation function gives: a non-empty string; anything else refuses the call, naming the part. */
export type KeyPart = string | null | undefined;
export type KeyPartResult = KeyPart | PromiseLike<KeyPart>;

/** The decision of a tool call that gave the model no result. */
export type ToolCallDecision = 'in_progress' | 'unknown' | 'mismatch' | 'failed' | 'no_tenant' | 'no_conversation';

/**
 * A tool call that gives the model no result, only `message` to read (it
 * says not to call again, and why): refused by the ledger, or a known
 * failure (`decision` 'failed', with the recorded `error`).
 */
export class ToolCallError extends IdempotencyError {
  readonly decision: ToolCallDecision;
  /** the call's key; absent for 'no_tenant' and 'no_conversation' */
  readonly key?: string;
  /** true when this is a replay of the first call's failure */
  readonly replay: boolean;
  /** the recorded error, for 'failed' */
  readonly error?: Json;
}

/**
 * The Attempt of the wrapped tool call running in this async context (its
 * `headers` carry the Idempotency-Key to send). Throws IdempotencyError
 * outside one.
 */
export function currentAttempt(): Attempt;

/** The sentence every unknown outcome carries. */
export const UNKNOWN: string;

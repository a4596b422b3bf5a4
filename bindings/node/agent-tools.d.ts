// TypeScript declarations of what sqlite-idempotency/ai, /openai-agents and
// /langchain share (agent-tools.js).
import type { Attempt, IdempotencyError, Json } from './index.js';

/** What a tenant or conversation function gives: a non-empty string; anything else refuses the call, naming the part. */
export type KeyPart = string | null | undefined;
export type KeyPartResult = KeyPart | PromiseLike<KeyPart>;

/** The decision of a tool call that gave the model no result. */
export type ToolCallDecision = 'in_progress' | 'unknown' | 'mismatch' | 'conflict' | 'not_sent' | 'failed' | 'no_tenant' | 'no_conversation' | 'no_targets';

/** What a targets function gives: what the call's write touches (docs/ledger.md, "Targets"), up to 16 strings. */
export type TargetsResult = string[] | PromiseLike<string[]>;
/** What an allowedBy function gives: who allows a deliberate second write to a held target, or nothing. */
export type AllowedByResult = string | null | undefined | PromiseLike<string | null | undefined>;

/** What every adapter's options share besides the tenant and conversation functions. */
export interface CallOptions {
  /** wait up to this long while another caller holds the key (default 0) */
  waitMs?: number;
  /** Ledger.call's renewSeconds: the lease the tool starts with */
  renewSeconds?: number;
  /** Ledger.call's heartbeatSeconds: how often the lease is renewed while the tool runs */
  heartbeatSeconds?: number;
}

/**
 * A tool call that gives the model no result, only `message` to read (the
 * words of sqlite-idempotency/words: what is known, and whether to call
 * again): refused by the ledger, nothing sent ('not_sent'), or a known
 * failure (`decision` 'failed', with the recorded `error`). toString() is
 * the message alone.
 */
export class ToolCallError extends IdempotencyError {
  readonly decision: ToolCallDecision;
  /** the call's key; absent for 'no_tenant', 'no_conversation' and 'no_targets' */
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

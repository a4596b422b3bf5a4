// TypeScript declarations of sqlite-idempotency/words (words.js): the words
// the model reads on each decision of a guarded tool call (words.json).

/** The decisions words.json has words for. */
export type WordsKind =
  | 'admitted' | 'replay' | 'failed' | 'failed_replay' | 'in_progress' | 'unknown' | 'outcome_unknown'
  | 'mismatch' | 'conflict_succeeded' | 'conflict_claimed' | 'conflict_unknown' | 'not_sent' | 'no_tenant'
  | 'no_conversation' | 'no_targets';

/**
 * The fields a text names. at and renewed_at are milliseconds since the
 * epoch (written as ISO 8601 UTC, and as whole seconds before now); now
 * defaults to Date.now(). A field the text does not name is ignored.
 */
export interface WordsFields {
  tool?: string;
  key?: string;
  attempt?: number;
  at?: number;
  renewed_at?: number;
  now?: number;
  differs?: string;
  reason?: string;
  target?: string;
  held_tool?: string;
  held_key?: string;
  [field: string]: unknown;
}

/** The text of kind for fields; throws TypeError for an unknown kind or a field the text needs that is missing. */
export function say(kind: WordsKind, fields?: WordsFields): string;

/** The words of a reason every adapter shares (words.json's reasons: 'cancelled', 'not_committed', 'lease_lost' with message), for a text's reason field. */
export function because(name: 'cancelled' | 'not_committed' | 'lease_lost', fields?: WordsFields): string;

/**
 * The words of a conflict decision (idem_claim's answer, or TargetConflict's
 * decision) for the tool name: its held_by status picks the kind; result,
 * when the holder succeeded, is its result (what the model reads after the
 * words).
 */
export function sayConflict(tool: string, decision: { key: string; target: string; held_by: { key: string; tool: string; status: string; updated_at: number; result?: unknown } }):
  { kind: 'conflict_succeeded' | 'conflict_claimed' | 'conflict_unknown'; text: string; result?: unknown };

/** words.json, as read. */
export const words: {
  about: string;
  constants: Record<string, string>;
  reasons: Record<string, string>;
  formats: Record<string, 'iso8601' | 'seconds_ago'>;
  kinds: Record<WordsKind, { decision: string; when: string; text: string; optional?: Record<string, string>; then?: string }>;
};

/** The sentence every unknown outcome carries (the extension's own words). */
export const UNKNOWN: string;

// TypeScript declarations of sqlite-idempotency (index.js).

/** The package version; equals `SELECT idem_version()` of the extension it carries. */
export const VERSION: string;

/**
 * The path of the extension for the running platform, without its suffix
 * (SQLite adds `.so`), in the platform's package
 * (`sqlite-idempotency-linux-x64` or `sqlite-idempotency-linux-arm64`, an
 * optional dependency npm installs where its os and cpu match). Throws
 * IdempotencyError naming the package when it is not installed (or is
 * another version), and naming the packaged platforms on any other.
 */
export function getLoadablePath(): string;

/** A statement of better-sqlite3, libsql or node:sqlite. */
export interface LoadableStatement {
  get(...params: unknown[]): Record<string, unknown> | undefined;
}

/** A connection of better-sqlite3, libsql or node:sqlite (`DatabaseSync` opened with `{ allowExtension: true }`). */
export interface LoadableDatabase {
  loadExtension(path: string, ...rest: unknown[]): unknown;
  enableLoadExtension?(allow: boolean): unknown;
  prepare(sql: string): LoadableStatement;
  exec(sql: string): unknown;
  close(): unknown;
}

/** Loads the extension into the connection (node:sqlite: extension loading is turned off again after). */
export function load(db: LoadableDatabase): void;

/** The `Idempotency-Key` header value of a key: an RFC 8941 sf-string, `"idem1-…"`. RangeError for a non-key. */
export function headerValue(key: string): string;

/**
 * A JSON value (what args, results and errors must be). A bigint is written
 * as its digits (in args, one beyond +-(2^53-1) is refused by the extension,
 * as that integer is from any language); an integer beyond
 * Number.MAX_SAFE_INTEGER in a stored result, error or member is read back
 * as a bigint holding its digits.
 */
export type Json = null | boolean | number | bigint | string | Json[] | { [member: string]: Json };

/** JSON text written as it is (rawJson). */
export class RawJson {
  readonly text: string;
  /** TypeError unless text is one JSON value. */
  constructor(text: string);
}

/**
 * JSON text to be written as it is, e.g. a target's response body, so
 * that every number in it keeps its digits: `rawJson(await res.text())`.
 * TypeError unless text is one JSON value.
 */
export function rawJson(text: string): RawJson;

/** What the package writes: JSON, where any value may also be a RawJson. */
export type JsonInput = Json | RawJson | JsonInput[] | { [member: string]: JsonInput };

export type Effect = 'external' | 'local';
export type SettleStatus = 'succeeded' | 'failed' | 'released' | 'unknown';
export type ResolveStatus = 'succeeded' | 'failed' | 'released';

/** A guarded row written by a local claim. */
export interface Member {
  table: string;
  /** a bigint beyond Number.MAX_SAFE_INTEGER */
  rowid: number | bigint;
}

/** This call owns the execution. `note` is present for external claims only. */
export interface Admitted {
  decision: 'admitted';
  key: string;
  token: string;
  attempt: number;
  effect: Effect;
  committed: boolean;
  durable: boolean;
  lease_until: number;
  note?: string;
}

/** Already settled: the first outcome. */
export interface Replay {
  decision: 'replay';
  idempotent: true;
  key: string;
  status: 'succeeded' | 'failed';
  attempt: number;
  /** when the outcome was recorded (the settle or resolve, the row's updated_at, Unix ms) */
  settled_at: number;
  result?: Json;
  error?: Json;
  members: Member[];
}

/** Someone holds a live claim: do not run. */
export interface InProgress {
  decision: 'in_progress';
  key: string;
  attempt: number;
  lease_until: number;
  /** when the holder claimed or last renewed it (the row's updated_at, Unix ms) */
  renewed_at: number;
}

/** An earlier attempt may have reached the target; nothing is retried here. */
export interface Unknown {
  decision: 'unknown';
  key: string;
  attempt: number;
  message: string;
}

/** The key is bound to another request. */
export interface Mismatch {
  decision: 'mismatch';
  key: string;
  differs: string;
  message: string;
}

/** One of the claim's targets is held by another call of the tenant (docs/ledger.md, "Targets"); nothing was admitted. */
export interface Conflict {
  decision: 'conflict';
  key: string;
  /** the target that is held */
  target: string;
  /** the call that holds it: its key, tool, effective status, attempt, when it last changed, and its result when it succeeded */
  held_by: { key: string; tool: string; status: 'claimed' | 'unknown' | 'succeeded'; attempt: number; updated_at: number; result?: Json };
  /** the top-level argument names whose values differ from the holder's (empty unless both are objects) */
  differs: string[];
  message: string;
}

export type Decision = Admitted | Replay | InProgress | Unknown | Mismatch | Conflict;

/** What idem_settle and idem_resolve return. */
export interface Settled {
  key: string;
  status: SettleStatus;
  attempt: number;
  /** the write was synced when the call returned, or the caller's COMMIT syncs it (docs/reference.md) */
  durable: boolean;
  /** when the outcome was recorded: the row's updated_at, a later replay's settled_at (Unix ms) */
  settled_at: number;
  members: Member[];
}

/** What Ledger.call resolves to: the same shape on a first call and on a replay. */
export interface Outcome<R extends Json = Json> {
  key: string;
  status: 'succeeded' | 'failed';
  attempt: number;
  /** present when status is 'succeeded' */
  result?: R;
  /** present when status is 'failed' */
  error?: Json;
  members: Member[];
  /** false for the call that ran, true for a replay of it */
  idempotent: boolean;
  /** when the outcome was recorded (Unix ms): the settle's settled_at on the call that ran, the replay's on a replay (the same time) */
  settled_at: number;
}

/** The admitted claim, handed to the action of Ledger.call. */
export class Attempt {
  readonly ledger: Ledger;
  readonly decision: Admitted;
  readonly key: string;
  readonly token: string;
  readonly attempt: number;
  /** `{ 'Idempotency-Key': '"idem1-…"' }`: send them with the request. */
  readonly headers: { 'Idempotency-Key': string };
  /** The claim's lease_until as this process last set it: the claim, a renewal, a heartbeat's beat (Unix ms). */
  leaseUntil: number;
  /** The LeaseLost a heartbeat's beat met (the claim is no longer this token's), else undefined. */
  leaseLost: LeaseLost | undefined;
  /** Extends the lease (idem_renew); throws LeaseLost when it is gone. */
  renew(seconds?: number): number;
}

export interface OpenOptions {
  /** the ledger table's name (default 'ledger') */
  name?: string;
  /** CREATE VIRTUAL TABLE IF NOT EXISTS (default true) */
  create?: boolean;
  /** PRAGMA busy_timeout (default 10000) */
  busyTimeoutMs?: number;
  /** the ledger's options, e.g. { lease_seconds: 60 }; a ledger created in a file with the heartbeat on gets lease_seconds = 3 × heartbeatSeconds unless they name it */
  options?: Record<string, number>;
  /** Ledger.call's heartbeat (default 5 s; 0 or null: none) */
  heartbeatSeconds?: number | null;
}

/** What a write touches (docs/ledger.md, "Targets"). */
export interface TargetOptions {
  /** up to 16 strings (1 to 256 bytes of UTF-8 each) derived from the arguments that identify the effect, e.g. 'mailto:bob@example.com/invoice-42' */
  targets?: string[];
  /** hold a succeeded call's targets this long for this claim (at most the ledger's target_window_seconds) */
  targetWindowSeconds?: number;
  /** the application's (never the model's) name for who allows a deliberate second write to a held target; recorded with it */
  allowedBy?: string;
}

export interface ClaimOptions extends TargetOptions {
  effect?: Effect;
  operationId?: string;
}

export interface CallOptions extends TargetOptions {
  operationId?: string;
  /** wait up to this long while another caller holds the key (default 0: do not wait) */
  waitMs?: number;
  /** the lease the action starts with at least, less the margin; renewed (a write) right before the action only when less is left (default: the claim's lease, lease_seconds) */
  renewSeconds?: number;
  /** while the action runs, renew its claim every this many seconds to 3 beats from then, so that a holder that died is seen once that lease passes (default: the ledger's heartbeatSeconds; 0 or null: no heartbeat) */
  heartbeatSeconds?: number | null;
}

export class Ledger {
  readonly db: LoadableDatabase;
  readonly name: string;
  /** Ledger.call's heartbeat in seconds when the call does not give one (0: none). */
  readonly heartbeatSeconds: number;
  /** Wraps a connection that already has the extension loaded. */
  constructor(db: LoadableDatabase, options?: { name?: string; heartbeatSeconds?: number | null });
  /** Loads the extension, sets WAL (on a file), synchronous=FULL and busy_timeout, creates the ledger. */
  static open(db: LoadableDatabase, options?: OpenOptions): Ledger;
  create(options?: Record<string, number>): void;
  close(): void;
  /** Whether a transaction is open on the connection (undefined when the driver does not say). */
  inTransaction(): boolean | undefined;
  /** idem_claim: takes or reports the claim of this call. */
  claim(tenant: string, conversation: string, tool: string, args: JsonInput, options?: ClaimOptions): Decision;
  /** idem_settle: records the outcome of the claim the token holds. */
  settle(token: string, status: SettleStatus, detail?: JsonInput): Settled;
  /** idem_resolve: settles an unknown key after reconciliation with the target. */
  resolve(tenant: string, key: string, status: ResolveStatus, detail?: JsonInput): Settled;
  /** idem_renew: extends a live claim; returns the new lease_until. Throws LeaseLost when the token no longer holds a live claim. */
  renew(token: string, seconds?: number): number;
  /** The check Ledger.call makes right before the action: a read while the claim has more than max(1 s, 10% of the lease) left, idem_renew (returning its lease_until) only when less is left or seconds asks for a longer lease; undefined when it only read. Throws LeaseLost as renew does. */
  leaseBeforeSend(token: string, seconds?: number): number | undefined;
  /** The ledger row of a key (effective status, JSON columns parsed), or null. */
  row(tenant: string, key: string): Record<string, unknown> | null;
  /** Claims, and claims again with backoff while in_progress, up to timeoutMs; returns the last decision. */
  wait(tenant: string, conversation: string, tool: string, args: JsonInput,
       options: { timeoutMs: number } & ClaimOptions): Promise<Decision>;
  /**
   * Runs one external tool call at most once.
   *
   * A replay resolves to the first outcome (idempotent: true); in_progress
   * (after waitMs) throws ClaimInProgress; unknown throws OutcomeUnknown;
   * mismatch throws ClaimMismatch; conflict (a target held by another
   * call of the tenant) throws TargetConflict. An admitted claim that is not committed
   * is released and NotCommitted thrown. The lease is renewed right before
   * the action (LeaseLost: nothing sent), and while the action runs a
   * heartbeat renews it (heartbeatSeconds), stopped as the action ends.
   * Then: the action's value → succeeded (undefined is stored as null); ToolFailed → failed, resolved as an Outcome; NotSent →
   * released with {"sent": false}, thrown again; anything else → unknown,
   * thrown as OutcomeUnknown (never retried here). The outcome's result is
   * the stored JSON read back (a big integer as a bigint); an action that
   * returns rawJson(text) gets that text's value.
   */
  call<R extends Json = Json>(tenant: string, conversation: string, tool: string, args: JsonInput,
                              action: (attempt: Attempt) => R | RawJson | void | Promise<R | RawJson | void>,
                              options?: CallOptions): Promise<Outcome<R>>;
  /** Resolves the unknown rows (expired external claims included) with what each tool's reconciler learns from the target (docs/operating.md). */
  reconcile(reconcilers: Record<string, (call: ReconcileCall) => ReconcileAnswer | Promise<ReconcileAnswer>>,
            options?: { batchSize?: number; limit?: number; by?: string; tenant?: string; /** called after each call is examined, with the report so far */ onProgress?: (report: ReconcileReport) => void }): Promise<ReconcileReport>;
}

/** One unknown call, as a reconciler sees it. */
export interface ReconcileCall {
  tenant: string; key: string; conversation: string; tool: string; args: Json; effect: Effect; attempt: number;
  detail: Json | null; createdAt: number; updatedAt: number; leaseUntil: number; argsText: string;
  detailText: string | null; headers: { 'Idempotency-Key': string };
}
export type ReconcileAnswer =
  | { status: 'succeeded'; result: Json } | { status: 'failed'; error: Json }
  | { status: 'not_sent'; reason: string | null } | { status: 'unknown'; reason: string | null };
/** What a reconciler answers. */
export const Answer: {
  succeeded(result?: Json): ReconcileAnswer; failed(error: Json): ReconcileAnswer;
  notSent(reason?: string): ReconcileAnswer; unknown(reason?: string): ReconcileAnswer;
};
export interface ReconcileEntry { tenant: string; key: string; tool: string; attempt: number; [more: string]: unknown }
export interface ReconcileReport {
  examined: number; resolved: ReconcileEntry[]; unknown: ReconcileEntry[]; errors: ReconcileEntry[];
  raced: ReconcileEntry[]; needsPerson: ReconcileEntry[];
}
/** Counters and histograms (prom-client) and spans (@opentelemetry/api), each used only if installed. */
export class Metrics {
  constructor(options?: { register?: unknown; promClient?: unknown; otel?: unknown; tracer?: unknown; buckets?: number[] });
  /** Wraps this ledger's claim, settle and call; returns it. */
  instrument<L extends Ledger>(ledger: L): L;
  /** Gauges of the ledger's own state, read with SQL at each scrape (a better-sqlite3 connection or a file path). */
  ledgerState(db: LoadableDatabase | string, name?: string): unknown[];
}

export class IdempotencyError extends Error {}

/** An error of the extension or SQLite; message unchanged. */
export class LedgerError extends IdempotencyError {
  /** the driver's code: 'SQLITE_CONSTRAINT' (better-sqlite3, libsql) or 'ERR_SQLITE_ERROR' (node:sqlite) */
  code?: string;
  /** SQLite's error code number, when the driver gives it */
  sqliteCode?: number;
}

/** idem_renew refused: the token no longer holds a live claim; nothing was sent. */
export class LeaseLost extends LedgerError {}

export class NotCommitted extends IdempotencyError {
  key: string;
  constructor(key: string);
}

export class ClaimInProgress extends IdempotencyError {
  key: string;
  /** when the holder claimed or last renewed it (decision.renewed_at, Unix ms) */
  renewedAt: number;
  decision: InProgress;
  constructor(decision: InProgress);
}

export class ClaimMismatch extends IdempotencyError {
  key: string;
  decision: Mismatch;
  constructor(decision: Mismatch);
}

/** Another call of the tenant already touched one of this call's targets; nothing was run. */
export class TargetConflict extends IdempotencyError {
  key: string;
  decision: Conflict;
  constructor(decision: Conflict);
}

/** The request may have reached the target; never resent here. An action may throw it to choose the stored detail. */
export class OutcomeUnknown extends IdempotencyError {
  reason: string;
  key?: string;
  detail: Json;
  decision?: Unknown;
  constructor(reason: string, options?: { key?: string; detail?: Json; decision?: Unknown; cause?: unknown });
}

/** Known that nothing was sent: the action throws it; the claim is released. */
export class NotSent extends IdempotencyError {
  reason: string;
  key?: string;
  detail: { [member: string]: Json };
  constructor(reason: string, options?: { key?: string; detail?: { [member: string]: Json } });
}

/** The target answered and refused: settled failed, resolved as an Outcome. */
export class ToolFailed extends IdempotencyError {
  error: JsonInput;
  constructor(error: JsonInput);
}

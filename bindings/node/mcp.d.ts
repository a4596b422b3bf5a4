// TypeScript declarations of sqlite-idempotency/mcp (mcp.js). The types are
// structural, so that this module needs no MCP SDK to type-check: the SDK's
// McpServer, RequestHandlerExtra and CallToolResult fit them.
import type { Attempt, Ledger } from './index.js';

/** What the transport's verifier put on the request (the SDK's AuthInfo). */
export interface AuthInfoLike {
  token?: string;
  clientId?: string;
  scopes?: string[];
  extra?: Record<string, unknown>;
}

/**
 * The request context a tool callback receives: `extra` of
 * @modelcontextprotocol/sdk 1.x (`signal`, `_meta`, `authInfo`), or `ctx`
 * of @modelcontextprotocol/server 2.x (`mcpReq.signal`, `mcpReq._meta`,
 * `http.authInfo`).
 */
export interface ToolExtraLike {
  signal?: AbortSignal;
  _meta?: { [key: string]: unknown };
  authInfo?: AuthInfoLike;
  mcpReq?: { signal?: AbortSignal; _meta?: { [key: string]: unknown } };
  http?: { authInfo?: AuthInfoLike };
}

/** A CallToolResult: the tool's answer, stored and replayed as it is. */
export interface CallToolResultLike {
  content?: unknown[];
  structuredContent?: unknown;
  isError?: boolean;
  _meta?: { [key: string]: unknown };
}

export interface McpIdempotencyOptions {
  /**
   * Who is calling: the key's tenant. Default: `authInfo.clientId` of the
   * request (set by the transport's bearer-token verifier); a request
   * without it is refused with a tool error naming what is missing.
   */
  tenant?: (extra: any) => string | undefined | Promise<string | undefined>;
  /**
   * The conversation the call belongs to. Default, in this order: the
   * request's `_meta` key `"io.github.sqlite-idempotency/conversation"`;
   * the host keys that name one (`"openai/session"`,
   * `"vscode.conversationId"`, see `HOSTS`); else the tenant's
   * deduplication window (`windowSeconds`), or with `strict` a refusal.
   * A function given here is the only source: a call it gives no string
   * for is refused. Never a request or session id: a retry has a new
   * request id.
   */
  conversation?: (args: any, extra: any) => string | undefined | Promise<string | undefined>;
  /**
   * Refuse a call whose request names no conversation, instead of scoping
   * it by the window (default false; true for a tool whose annotations say
   * `destructiveHint: true`, unless given as false).
   */
  strict?: boolean;
  /**
   * The deduplication window of a call that names no conversation, in
   * seconds (1 to 86400; default `WINDOW_SECONDS`, 600): an identical call
   * of the same tenant less than this after the first is that call (a
   * replay), a later one is a new call.
   */
  windowSeconds?: number;
  /** Wait up to this long while an identical call is running, then answer its result (default 0). */
  waitMs?: number;
  /** The lease given right before the tool runs (default: the ledger's lease_seconds). */
  renewSeconds?: number;
  /** Passed to `Ledger.call`: how often the claim's lease is renewed while the tool runs. */
  heartbeatSeconds?: number;
  /**
   * What each call's write touches (docs/ledger.md, "Targets"), from the
   * arguments that identify the effect, never its wording: for
   * withIdempotency an object of functions by tool name, for idempotentTool
   * one function. A target another call of the tenant holds answers the
   * call as a conflict (isError).
   */
  targets?: { [tool: string]: (args: any) => string[] | PromiseLike<string[]> } | ((args: any) => string[] | PromiseLike<string[]>);
  /** Who allows a deliberate second write to a held target (the application's, never the model's), or undefined. */
  allowedBy?: (args: any, extra: any) => string | null | undefined | PromiseLike<string | null | undefined>;
  /**
   * withIdempotency only: on a conflict with a call that succeeded, ask the
   * person through the client (MCP elicitation) whether to do it a second
   * time; an accept with confirm checked runs it (default false).
   */
  askSecondWrite?: boolean;
  /**
   * The argument of the tool's own schema that a deliberate repeat sets to a
   * value not used before ("send Bob another $5": `repeat: 2`), named in its
   * replay's words so the model knows the way; a retry sends the same
   * arguments, so it cannot take it by accident. withIdempotency: an object
   * of argument names by tool name; idempotentTool: the name.
   */
  repeatArgument?: string | { [tool: string]: string };
}

/** The `_meta` keys hosts send that name a conversation, and the tag each gets in the key. */
export const HOSTS: ReadonlyArray<{ readonly key: string; readonly tag: string }>;

/** The default deduplication window, in seconds: 600. */
export const WINDOW_SECONDS: number;

/** The `_meta` keys this module reads and writes. */
export const META: {
  readonly conversation: 'io.github.sqlite-idempotency/conversation';
  readonly replay: 'io.github.sqlite-idempotency/replay';
  readonly decision: 'io.github.sqlite-idempotency/decision';
  readonly key: 'io.github.sqlite-idempotency/key';
};

/** `'io.github.sqlite-idempotency/'`, the prefix of every `_meta` key of this module. */
export const PREFIX: 'io.github.sqlite-idempotency/';

/** An MCP server whose tools can be wrapped: @modelcontextprotocol/sdk's McpServer. */
export interface McpServerLike {
  registerTool(...params: any[]): unknown;
}

/**
 * Guards every tool registered on `server` (with `registerTool`, or the
 * older `tool`) after this call; a tool whose annotations say
 * `readOnlyHint: true` runs unguarded, one that says `destructiveHint: true`
 * is strict unless `options.strict` is false, and `idempotentHint: true` is
 * removed from every wrapped tool (one process warning per tool). Returns
 * `server`.
 */
export function withIdempotency<S extends McpServerLike>(server: S, ledger: Ledger, options?: McpIdempotencyOptions): S;

/**
 * Guards one tool callback, `(args, extra)` or `(extra)` as the SDK calls
 * it. `name` is the tool's name in the key. A replay resolves to the first
 * result after a text block saying it already ran (when, which attempt),
 * with `_meta["io.github.sqlite-idempotency/replay"]: true`; a call
 * that is in progress, unknown or a mismatch resolves to a result with
 * `isError: true` saying why it was not run (`R` is the callback's result
 * type, which these results also fit when it is CallToolResult).
 */
export function idempotentTool<P extends unknown[], R extends CallToolResultLike>(
  ledger: Ledger, name: string, options: McpIdempotencyOptions | undefined,
  callback: (...params: P) => R | Promise<R>): (...params: P) => Promise<R>;

/** The admitted claim of the guarded call a callback runs in: `headers` carries the Idempotency-Key. */
export function attemptOf(extra: object): Attempt;

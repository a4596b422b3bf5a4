// A typed user of sqlite-idempotency/mcp against the SDK's own types
// (tsc --strict must accept it; tests/suites/55-integrations-mcp.sh).
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, ServerNotification, ServerRequest } from '@modelcontextprotocol/sdk/types.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { Ledger, type LoadableDatabase } from 'sqlite-idempotency';
import { withIdempotency, idempotentTool, attemptOf, META, HOSTS, WINDOW_SECONDS, type McpIdempotencyOptions } from 'sqlite-idempotency/mcp';

declare const db: LoadableDatabase; // a better-sqlite3 connection
const ledger = Ledger.open(db);
const options: McpIdempotencyOptions = {
  tenant: (extra) => extra.authInfo?.clientId,
  conversation: (args, extra) => extra._meta?.[META.conversation] as string | undefined,
  waitMs: 1000,
};
const server: McpServer = withIdempotency(new McpServer({ name: 'x', version: '1' }), ledger, options);
server.registerTool('send', { inputSchema: { to: z.string() } }, async ({ to }, extra): Promise<CallToolResult> => {
  const headers: { 'Idempotency-Key': string } = attemptOf(extra).headers;
  // @ts-expect-error: an Attempt, not any (the declarations resolve)
  attemptOf(extra).noSuchMember;
  return { content: [{ type: 'text', text: `${to} ${headers['Idempotency-Key']}` }] };
});
server.registerTool('one', { inputSchema: { n: z.number() } },
  idempotentTool(ledger, 'one', { tenant: () => 'tenant-a' }, async ({ n }: { n: number }, extra): Promise<CallToolResult> => {
    const key: string = attemptOf(extra).key;
    return { content: [{ type: 'text', text: `${n + 1} ${key}` }] };
  }));
server.registerTool('bare', {}, idempotentTool(ledger, 'bare', undefined, async (extra: RequestHandlerExtra<ServerRequest, ServerNotification>): Promise<CallToolResult> => ({
  content: [{ type: 'text', text: String(extra.signal.aborted) }],
})));
const replayKey: 'io.github.sqlite-idempotency/replay' = META.replay;
void replayKey;
// the conversation's options: strict, the window, functions that may be async
const strict: McpIdempotencyOptions = { tenant: async (extra) => extra.authInfo?.clientId, strict: true };
const windowed: McpIdempotencyOptions = { windowSeconds: 120, heartbeatSeconds: 5, conversation: async (args) => args.thread_id };
withIdempotency(new McpServer({ name: 'y', version: '1' }), ledger, strict);
withIdempotency(new McpServer({ name: 'z', version: '1' }), ledger, windowed);
const hostKeys: string[] = HOSTS.map((h) => `${h.tag}:${h.key}`);
const window: number = WINDOW_SECONDS;
void hostKeys;
void window;

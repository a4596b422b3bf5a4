// tsc --strict over sqlite-idempotency/ai's declarations: a typed user, and
// misuse the declarations refuse (each @ts-expect-error must be an error).
import Database from 'better-sqlite3';
import { tool } from 'ai';
import { z } from 'zod';
import { Ledger } from 'sqlite-idempotency';
import { idempotentTool, currentAttempt, ToolCallError, type ToolCallDecision } from 'sqlite-idempotency/ai';

const ledger = Ledger.open(new Database(':memory:'));
const sendEmail = idempotentTool(ledger, 'send_email', {
  tenant: (input, options) => (options.context as { userId?: string }).userId,
  conversation: async (input) => `chat-${input.to}`,
  waitMs: 2000,
}, tool({
  inputSchema: z.object({ to: z.string() }),
  execute: async ({ to }) => ({ to, key: currentAttempt().key, header: currentAttempt().headers['Idempotency-Key'] }),
}));
const out: Promise<{ to: string; key: string; header: string }> | unknown = sendEmail.execute;
const decisions: ToolCallDecision[] = ['in_progress', 'unknown', 'mismatch', 'not_sent', 'failed', 'no_tenant', 'no_conversation'];
function explain(e: unknown): string {
  return e instanceof ToolCallError ? `${e.decision} ${e.key ?? '-'} ${e.replay} ${e.message}` : String(e);
}
void out; void decisions; void explain;

// docs/integrations.md's form, as written: the tool's contextSchema types
// options.context, so the key's functions read it with no cast
const docsForm = idempotentTool(ledger, 'send_email', {
  tenant: (input, { context }) => context.userId,
  conversation: (input, { context }) => context.chatId,
  waitMs: 5000,
  heartbeatSeconds: 5,
}, tool({
  description: 'Send an email',
  inputSchema: z.object({ to: z.string(), subject: z.string() }),
  contextSchema: z.object({ userId: z.string(), chatId: z.string() }),
  execute: async ({ to, subject }) => ({ to, subject, headers: currentAttempt().headers }),
}));
void docsForm;
idempotentTool(ledger, 'send_email', {
  // @ts-expect-error: the context is the contextSchema's ({ userId, chatId })
  tenant: (input, { context }) => context.accountId,
  conversation: (input, { context }) => context.chatId,
}, tool({
  inputSchema: z.object({ to: z.string() }),
  contextSchema: z.object({ userId: z.string(), chatId: z.string() }),
  execute: async ({ to }) => to,
}));

// the SDK's own types reach the key's functions (tsc runs with skipLibCheck:
// a declaration that lost them would make these no error)
idempotentTool(ledger, 'send_email', {
  // @ts-expect-error: ToolExecutionOptions has no member nope
  tenant: (input, options) => options.nope,
  // @ts-expect-error: the input is the schema's ({ to: string })
  conversation: (input) => input.from,
}, sendEmail);
// @ts-expect-error: the ledger comes first
idempotentTool('send_email', ledger, { tenant: () => 't', conversation: () => 'c' }, sendEmail);
// @ts-expect-error: a tenant function is required
idempotentTool(ledger, 'send_email', { conversation: () => 'c' }, sendEmail);
// @ts-expect-error: a tenant is a string, not a number
idempotentTool(ledger, 'send_email', { tenant: () => 42, conversation: () => 'c' }, sendEmail);

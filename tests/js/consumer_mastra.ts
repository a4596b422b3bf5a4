// tsc --strict over sqlite-idempotency/mastra's declarations: a typed user,
// and misuse the declarations refuse (each @ts-expect-error must be an error).
import Database from 'better-sqlite3';
import { Agent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { z } from 'zod';
import { Ledger } from 'sqlite-idempotency';
import { idempotentTool, currentAttempt, ToolCallError, WINDOW_SECONDS } from 'sqlite-idempotency/mastra';

const ledger = Ledger.open(new Database(':memory:'));
const sendEmail = createTool(idempotentTool(ledger, 'send_email', {
  tenant: (input, context) => context.requestContext?.get('userId') as string | undefined,
  targets: (input) => [`mailto:${input.to}`],
  windowSeconds: WINDOW_SECONDS,
}, {
  id: 'send_email',
  description: 'Send an email',
  inputSchema: z.object({ to: z.string(), subject: z.string() }),
  execute: async ({ to, subject }: { to: string; subject: string }) => ({ to, subject, key: currentAttempt().key }),
}));
const id: string = sendEmail.id;
const isRefusal = (e: unknown): boolean => e instanceof ToolCallError && e.decision === 'unknown';
void id; void isRefusal;
void new Agent({ id: 'mailer', name: 'mailer', instructions: 'x', model: 'openai/gpt-5', tools: { sendEmail } });

const config = { id: 'x', description: 'x', inputSchema: z.object({ to: z.string() }), execute: async (input: { to: string }) => input.to };
// @ts-expect-error: the tenant is a function, not a string
idempotentTool(ledger, 'x', { tenant: 'tenant-a' }, config);
// @ts-expect-error: strict is a boolean
idempotentTool(ledger, 'x', { tenant: () => 't', strict: 'yes' }, config);
// @ts-expect-error: targets reads the input, which has no field nope
idempotentTool(ledger, 'x', { tenant: () => 't', targets: (input) => [input.nope] }, config);
// @ts-expect-error: the tool config needs an execute
idempotentTool(ledger, 'x', { tenant: () => 't' }, { id: 'x', description: 'x' });

// tsc --strict over sqlite-idempotency/openai-agents' declarations: a typed
// user, and misuse the declarations refuse (each @ts-expect-error must be an error).
import Database from 'better-sqlite3';
import { Agent, run, tool, type RunContext } from '@openai/agents';
import { z } from 'zod';
import { Ledger } from 'sqlite-idempotency';
import { idempotentTool, currentAttempt, ToolCallError } from 'sqlite-idempotency/openai-agents';

interface Who { userId: string; conversationId: string }
const ledger = Ledger.open(new Database(':memory:'));
const sendEmail = tool(idempotentTool(ledger, 'send_email', {
  tenant: (input, runContext: RunContext<Who>) => runContext.context.userId,
  conversation: (input, runContext) => runContext.context.conversationId,
}, {
  description: 'send an email',
  parameters: z.object({ to: z.string() }),
  execute: async ({ to }: { to: string }) => ({ to, key: currentAttempt().key }),
}));
const isRefusal = (e: unknown): boolean => e instanceof ToolCallError && e.decision === 'unknown';
const toolName: string = sendEmail.name;
void toolName; void isRefusal;
// an Agent<Who> takes the tool, and run() checks the context against Who
const agent = new Agent<Who>({ name: 'mailer', tools: [sendEmail] });
void (() => run(agent, 'Email Ann', { context: { userId: 'user-42', conversationId: 'conv-7' } }));

// docs/integrations.md's form, as written: an unnamed context is a record of any fields
const docsForm = tool(idempotentTool(ledger, 'send_email', {
  tenant: (input, runContext) => runContext.context.userId,
  conversation: (input, runContext) => runContext.context.conversationId,
  heartbeatSeconds: 5,
}, {
  description: 'Send an email',
  parameters: z.object({ to: z.string(), subject: z.string() }),
  execute: async ({ to, subject }) => ({ to, subject, headers: currentAttempt().headers }),
}));
void new Agent({ name: 'mailer', tools: [docsForm] });

// the SDK's own types reach the key's functions (tsc runs with skipLibCheck:
// a declaration that lost them would make these no error)
idempotentTool(ledger, 'x', {
  // @ts-expect-error: RunContext has no member nope
  tenant: (input, runContext) => runContext.nope,
  conversation: () => 'c',
}, { description: 'x', parameters: z.object({ to: z.string() }), execute: async () => 1 });
idempotentTool(ledger, 'x', {
  // @ts-expect-error: the context named Who has no accountId
  tenant: (input, runContext: RunContext<Who>) => runContext.context.accountId,
  conversation: () => 'c',
}, { description: 'x', parameters: z.object({ to: z.string() }), execute: async () => 1 });
// @ts-expect-error: the tool options come last, with an execute
idempotentTool(ledger, 'send_email', { tenant: () => 't', conversation: () => 'c' });
// @ts-expect-error: waitMs is a number
idempotentTool(ledger, 'x', { tenant: () => 't', conversation: () => 'c', waitMs: '1s' }, { description: 'x', parameters: z.object({}), execute: async () => 1 });

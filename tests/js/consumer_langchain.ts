// tsc --strict over sqlite-idempotency/langchain's declarations: a typed
// user, and misuse the declarations refuse (each @ts-expect-error must be an error).
import Database from 'better-sqlite3';
import { tool } from '@langchain/core/tools';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { z } from 'zod';
import { Ledger } from 'sqlite-idempotency';
import { idempotentTool, currentAttempt, ToolCallError, type ToolCallConfig } from 'sqlite-idempotency/langchain';

const ledger = Ledger.open(new Database(':memory:'));
const base = tool(async ({ to }: { to: string }) => ({ to, key: currentAttempt().key }), {
  name: 'send_email', description: 'send an email', schema: z.object({ to: z.string() }),
});
// docs/integrations.md's form, as written (configurable is LangChain's Record<string, any>)
const sendEmail: typeof base = idempotentTool(ledger, 'send_email', {
  tenant: (input, config) => config.configurable.user_id,
  heartbeatSeconds: 5,
}, base);
// a named configurable types the fields
interface Who { user_id: string; thread_id: string }
const typed: typeof base = idempotentTool(ledger, 'send_email', {
  tenant: (input, config: ToolCallConfig<Who>) => config.configurable.user_id,
  conversation: (input, config) => config.configurable.thread_id,
}, base);
void typed;
const node = new ToolNode([sendEmail]);
const isRefusal = (e: unknown): boolean => e instanceof ToolCallError && e.decision === 'in_progress';
void node; void isRefusal;

idempotentTool(ledger, 'send_email', {
  // @ts-expect-error: the configurable named Who has no account_id
  tenant: (input, config: ToolCallConfig<Who>) => config.configurable.account_id,
}, base);
// @ts-expect-error: a tenant function is required
idempotentTool(ledger, 'send_email', {}, base);
// @ts-expect-error: the tool must be a LangChain tool
idempotentTool(ledger, 'send_email', { tenant: () => 't' }, { name: 'send_email' });

// sqlite-idempotency/langchain end to end: a LangGraph graph whose tools
// node is a ToolNode, checkpointed by @langchain/langgraph-checkpoint-sqlite
// on the ledger's own better-sqlite3 connection, and whose agent node plays
// a model that emits the same send_email call again under a new tool call
// id; the conversation is LangGraph's thread_id (the adapter's default),
// the tenant config.configurable.user_id. The scenarios are
// tests/js/agent_harness.mjs's; here also:
//   resume       a graph interrupted (interrupt()) in the tools node after
//                the tool ran, in one process; resumed from its SQLite
//                checkpoint in another: LangGraph runs the node again, the
//                tool replays, the target saw one request
//   crash-in-progress  a graph whose process is killed while its tool is
//                sending, continued from its checkpoint in another process
//                at once: the holder's claim (renewSeconds 5) is still live (in_progress), so
//                the tool waits until its lease ends and the model reads the
//                final decision (unknown), not in_progress; the target saw one
//                request
//   retry-middleware  createAgent (langchain) with toolRetryMiddleware: a
//                timeout (unknown) comes back as a ToolMessage with status
//                error and is not retried (the tool was invoked once); a
//                refused connection (NotSent: nothing was sent) is thrown,
//                and retried, and the retry is admitted and sent once
import { AIMessage, HumanMessage, ToolMessage } from '@langchain/core/messages';
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { tool } from '@langchain/core/tools';
import { Command, END, MessagesAnnotation, START, StateGraph, interrupt } from '@langchain/langgraph';
import { ToolNode } from '@langchain/langgraph/prebuilt';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { createAgent, toolRetryMiddleware } from 'langchain';
import { z } from 'zod';
import { idempotentTool, currentAttempt } from 'sqlite-idempotency/langchain';
import { say } from 'sqlite-idempotency/words';
import { main, openLedger, postJson, sendBody, j, argsOf, targetsOf } from './agent_harness.mjs';

let turns = 0;

function sendTool(job, counter = {}) {
  return idempotentTool(job.ledger, 'send_email', {
    tenant: (input, config) => { counter.invoked = (counter.invoked || 0) + 1; return config.configurable.user_id; },
    waitMs: job.waitMs || 0,
    ...(job.renewSeconds !== undefined && { renewSeconds: job.renewSeconds }),
    ...targetsOf(job),
  }, tool(async (input) => sendBody(postJson, { ...job, args: input }, currentAttempt().headers), {
    name: 'send_email', description: 'send an email', schema: z.object({ to: z.string(), invoice: z.number().optional(), body: z.string().optional() }),
  }));
}

// agent (emits the call `calls` times, each under a new id) <-> tools; with
// pause, the tools node calls interrupt() after the ToolNode ran.
function graphOf(job, prefix, { pause = false } = {}) {
  const tools = new ToolNode([sendTool(job)]);
  return new StateGraph(MessagesAnnotation)
    .addNode('agent', async (state) => {
      const step = state.messages.filter((m) => m.tool_calls?.some((c) => c.id.startsWith(`${prefix}-`))).length + 1;
      if (step > job.calls) return { messages: [new AIMessage('done')] };
      return { messages: [new AIMessage({ content: '', tool_calls: [{ id: `${prefix}-${step}`, name: 'send_email', args: argsOf(job, step - 1) }] })] };
    })
    .addNode('tools', async (state, config) => {
      const out = await tools.invoke(state, config);
      if (pause) interrupt('send the next one?');
      return out;
    })
    .addEdge(START, 'agent')
    .addConditionalEdges('agent', (s) => (s.messages.at(-1).tool_calls?.length ? 'tools' : END))
    .addEdge('tools', 'agent')
    .compile({ checkpointer: new SqliteSaver(job.ledger.db) });
}

const config = (job) => ({ configurable: { thread_id: job.conversation, user_id: job.tenant } });
const readBack = (messages, prefix) => messages
  .filter((m) => ToolMessage.isInstance(m) && m.tool_call_id.startsWith(`${prefix}-`))
  .map((m) => (typeof m.content === 'string' ? m.content : j(m.content)));

async function turn(job) {
  turns += 1;
  const prefix = `tc-${process.pid}-${turns}`;
  const out = await graphOf(job, prefix).invoke({ messages: [new HumanMessage('send it')] }, config(job));
  return readBack(out.messages, prefix);
}

// The resume scenario's two processes: first (runs to the interrupt), resume.
if (process.argv[2] === 'graph') {
  const job = { ...JSON.parse(process.argv[5]), ledger: openLedger(process.argv[4]) };
  const mode = process.argv[3];
  const graph = graphOf(job, job.prefix || 'resume', { pause: mode === 'first' || mode === 'resume' });
  const input = { first: { messages: [new HumanMessage('send it')] }, run: { messages: [new HumanMessage('send it')] }, resume: new Command({ resume: 'yes' }), continue: null }[mode];
  const out = await graph.invoke(input, config(job));
  const last = out.messages.filter((m) => ToolMessage.isInstance(m)).at(-1);
  process.stdout.write(`${j({ interrupted: (out.__interrupt__ || []).length, content: last?.content, meta: last?.response_metadata })}\n`);
  process.exit(0);
}

// A chat model for createAgent: the call `calls` times, each under a new id, then text.
class ScriptedModel extends BaseChatModel {
  constructor(job) { super({}); this.job = job; this.step = 0; }
  _llmType() { return 'scripted'; }
  bindTools() { return this; }
  async _generate() {
    this.step += 1;
    const message = this.step > this.job.calls ? new AIMessage('done')
      : new AIMessage({ content: '', tool_calls: [{ id: `mw-${this.step}`, name: 'send_email', args: this.job.args, type: 'tool_call' }] });
    return { generations: [{ message, text: '' }] };
  }
}

await main({ prefix: 'integrations.langchain', turn }, async ({ ledger, dbFile, target, base, report, self, keyOf }) => {
  const { execFileSync } = await import('node:child_process');
  // resume: interrupted after the tool ran, resumed from the checkpoint in another process
  {
    const job = { ...base, conversation: 'resume-thread', args: { to: 'resume@example.com' } };
    const run = (mode) => JSON.parse(execFileSync(process.execPath, [self, 'graph', mode, dbFile, j(job)], { encoding: 'utf8' }));
    const first = run('first');
    const resumed = run('resume');
    const n = (await target.counts())[keyOf(job)];
    // interrupted in the tools node: the ToolNode's message is not in the checkpoint, the request was sent
    report(first.interrupted === 1 && first.content === undefined && n === 1 && resumed.interrupted === 0 &&
      resumed.content.startsWith(say('replay', { tool: 'send_email', key: keyOf(job), attempt: 1, at: ledger.row(job.tenant, keyOf(job))?.updated_at })) && resumed.content.endsWith(`"n":1,"path":"/send","received":"${keyOf(job)}"}`) &&
      resumed.meta?.idempotency?.decision === 'replay', 'resume',
    `the target saw ${n} (want 1); first ${j(first)}; resumed ${j(resumed)}`);
  }
  // crash-in-progress: killed mid-tool, continued from the checkpoint at once
  {
    const job = { ...base, conversation: 'crash-thread', args: { to: 'crash@example.com' }, delayMs: 8000, timeoutMs: 10000, prefix: 'crash', renewSeconds: 5 };
    const key = keyOf(job);
    const { spawn } = await import('node:child_process');
    const child = spawn(process.execPath, [self, 'graph', 'run', dbFile, j(job)], { stdio: ['ignore', 'pipe', 'pipe'] });
    const exited = new Promise((r) => child.once('exit', (code, signal) => r(signal)));
    for (let i = 0; i < 500 && !(await target.counts())[key]; i++) await new Promise((r) => setTimeout(r, 20));
    child.kill('SIGKILL');
    const signal = await exited;
    const held = ledger.row(job.tenant, key);
    const after = JSON.parse(execFileSync(process.execPath, [self, 'graph', 'continue', dbFile, j({ ...job, delayMs: 0 })], { encoding: 'utf8' }));
    const n = (await target.counts())[key];
    const want = say('unknown', { tool: 'send_email', key, attempt: 1 });
    report(signal === 'SIGKILL' && held?.status === 'claimed' && n === 1 && after.content === want && after.meta?.idempotency?.decision === 'unknown',
      'crash-in-progress', `killed by ${signal}, the row was ${held?.status} (want claimed); the target saw ${n} (want 1); continued, the model read ${j(after)}`);
  }
  // the tool-retry middleware does not retry a refusal; it retries NotSent
  {
    const job = { ...base, ledger, conversation: 'mw-thread', args: { to: 'middleware@example.com' }, calls: 1, delayMs: 1200, timeoutMs: 200 };
    const counter = {};
    const agent = createAgent({ model: new ScriptedModel(job), tools: [sendTool(job, counter)], middleware: [toolRetryMiddleware({ maxRetries: 3, initialDelayMs: 0 })] });
    const out = await agent.invoke({ messages: [new HumanMessage('send it')] }, config(job));
    const m = out.messages.find((x) => ToolMessage.isInstance(x));
    const n = (await target.counts())[keyOf(job)];
    report(counter.invoked === 1 && n === 1 && m?.status === 'error' && m.response_metadata?.idempotency?.decision === 'unknown', 'retry-middleware:unknown',
      `the tool was invoked ${counter.invoked} times (want 1), the target saw ${n}; the model read ${j(m)}`);

    const refused = { ...job, args: { to: 'refused@example.com' }, url: 'http://127.0.0.1:9/send', delayMs: 0 };
    const counter2 = {};
    const agent2 = createAgent({ model: new ScriptedModel(refused), tools: [sendTool(refused, counter2)], middleware: [toolRetryMiddleware({ maxRetries: 2, initialDelayMs: 0 })] });
    const out2 = await agent2.invoke({ messages: [new HumanMessage('send it')] }, config(refused));
    const m2 = out2.messages.find((x) => ToolMessage.isInstance(x));
    const row = ledger.row(refused.tenant, keyOf(refused));
    report(counter2.invoked === 3 && row?.status === 'released' && row?.attempt === 3, 'retry-middleware:not-sent',
      `the tool was invoked ${counter2.invoked} times (want 3: NotSent is retried), the row is ${row?.status} attempt ${row?.attempt}; the model read ${j(m2?.content)}`);
  }
});

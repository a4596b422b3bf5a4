// The words the model reads, the same in all six integrations: each real
// adapter driven to each decision on one ledger file, what its model reads
// compared with sqlite-idempotency/words' say() (words.json) and with the
// other adapters' (the key and the adapter's own reason taken out):
//
//   mcp        withIdempotency on an McpServer, the SDK's Client over its
//              in-memory transport: content[0].text (a replay's stored
//              content follows)
//   ai         generateText with MockLanguageModelV3: the tool result in the
//              model's next prompt
//   openai     run() with a scripted Model: the function_call_result's text
//   langchain  the tool invoked with a tool call, as a ToolNode does: the
//              ToolMessage's content (not_sent is thrown: its message)
//   mastra     a Mastra Agent with MockLanguageModelV3 (strict: a call with
//              no conversation is refused, not windowed): the tool result
//              in the model's next prompt
//   python     @ledger.tool in a Python process (tests/python/drive_words.py):
//              .text of the Outcome or of what is raised
//
// Decisions: replay, failed, failed_replay, in_progress (a claim another
// caller holds and renews), unknown (a claim settled unknown),
// outcome_unknown (the tool threw), mismatch (a local claim of the same
// key), not_sent (the tool threw NotSent), no_tenant, no_conversation,
// and conflict_succeeded, conflict_claimed, conflict_unknown (another call
// with other arguments that names the same target, settled succeeded,
// still claimed, or settled unknown: each adapter's targets option).
//
// argv: DB-DIR; env WORDS_PYTHONPATH: a copy of bindings/python with the
// extension and words.json (tests/suites/56-integrations-agents.sh makes it).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import Database from 'better-sqlite3';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js';
import { generateText, isStepCount, tool as aiTool } from 'ai';
import { MockLanguageModelV3 } from 'ai/test';
import { Agent, run, setTracingDisabled, tool as oaTool, Usage } from '@openai/agents-core';
import { tool as lcTool } from '@langchain/core/tools';
import { Ledger, NotSent, ToolFailed } from 'sqlite-idempotency';
import { withIdempotency } from 'sqlite-idempotency/mcp';
import * as ai from 'sqlite-idempotency/ai';
import * as oa from 'sqlite-idempotency/openai-agents';
import * as lc from 'sqlite-idempotency/langchain';
import * as ma from 'sqlite-idempotency/mastra';
import { Agent as MastraAgent } from '@mastra/core/agent';
import { createTool } from '@mastra/core/tools';
import { RequestContext } from '@mastra/core/request-context';
import { say } from 'sqlite-idempotency/words';
import { Checks } from './checks.mjs';

setTracingDisabled(true);
const checks = new Checks('integrations.words');
const { report } = checks;
const j = (v) => JSON.stringify(v);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const TOOL = 'send_email';
const TENANT = 'tenant-w';
const LEASE_SECONDS = 3; // the held claims' lease, renewed every RENEW_MS while the adapters run
const RENEW_MS = 300;

// TODO(h-mcp): mcp.js speaks words.json (say()) on the branch that rewrites
// it; until it is merged, the MCP comparisons report SKIP, naming this. Once
// mcp.js requires ./words.js they run, and must pass.
const require = createRequire(import.meta.url);
const mcpSpeaksWords = fs.readFileSync(require.resolve('sqlite-idempotency/mcp'), 'utf8').includes("require('./words.js')");

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-words-'));
const dbFile = path.join(dir, 'agent.db');
const ledger = Ledger.open(new Database(dbFile), { options: { lease_seconds: LEASE_SECONDS } });
const keyOf = (conversation, args) => ledger.db.prepare('SELECT idem_key(?, ?, ?, ?) AS k').get(TENANT, conversation, TOOL, j(args)).k;

// The tool's body in JavaScript, by mode (drive_words.py has the same in Python).
function act({ to, mode }) {
  if (mode === 'fail') throw new ToolFailed({ code: 'declined' });
  if (mode === 'throw') throw new Error('socket hang up');
  if (mode === 'notsent') throw new NotSent('connection refused');
  return { sent: to };
}
const schema = z.object({ to: z.string(), mode: z.string() });

// Each adapter: read(job) -> [what the model read, one per call]; job has
// tenant, conversation (undefined for a missing one), args, calls.
const usage = { inputTokens: { total: 1 }, outputTokens: { total: 1 } };
let ids = 0;
const adapters = {
  mcp: {
    async read(job) {
      const server = new McpServer({ name: 'words', version: '0' });
      withIdempotency(server, ledger, { tenant: (extra) => extra._meta.tenant, conversation: (args, extra) => extra._meta.conversation, targets: { [TOOL]: () => job.targets } });
      server.registerTool(TOOL, { inputSchema: { to: z.string(), mode: z.string() } }, async (args) => {
        if (args.mode === 'fail') return { content: [{ type: 'text', text: j({ code: 'declined' }) }], isError: true };
        return { content: [{ type: 'text', text: j(act(args)) }] };
      });
      const [a, b] = InMemoryTransport.createLinkedPair();
      await server.connect(a);
      const client = new Client({ name: 'words', version: '0' });
      await client.connect(b);
      const seen = [];
      for (let i = 0; i < job.calls; i++) {
        const r = await client.callTool({ name: TOOL, arguments: job.args, _meta: { tenant: job.tenant, conversation: job.conversation } });
        seen.push(r.content.map((c) => c.text).join('\n'));
      }
      await client.close();
      return seen;
    },
    reasons: { outcome_unknown: 'Error: socket hang up', no_tenant: 'options.tenant gave undefined', no_conversation: 'options.conversation gave undefined' },
  },
  ai: {
    async read(job) {
      const t = ai.idempotentTool(ledger, TOOL, {
        tenant: (input, { context }) => context.tenant,
        conversation: (input, { context }) => context.conversation,
        targets: () => job.targets,
      }, aiTool({ inputSchema: schema, execute: async (input) => act(input) }));
      const seen = [];
      for (let i = 0; i < job.calls; i++) {
        let step = 0;
        let last = [];
        const model = new MockLanguageModelV3({
          doGenerate: async ({ prompt }) => {
            step += 1;
            last = prompt;
            if (step === 1) {
              return { content: [{ type: 'tool-call', toolCallId: `ai-${++ids}`, toolName: TOOL, input: j(job.args) }], finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] };
            }
            return { content: [{ type: 'text', text: 'ok' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] };
          },
        });
        await generateText({ model, prompt: 'go', tools: { [TOOL]: t }, toolsContext: { [TOOL]: { tenant: job.tenant, conversation: job.conversation } }, stopWhen: isStepCount(2) });
        const part = last.filter((m) => m.role === 'tool').flatMap((m) => m.content).find((p) => p.type === 'tool-result');
        seen.push(part.output.type === 'json' ? j(part.output.value) : part.output.value);
      }
      return seen;
    },
  },
  openai: {
    async read(job) {
      const t = oaTool(oa.idempotentTool(ledger, TOOL, {
        tenant: (input, runContext) => runContext.context.tenant,
        conversation: (input, runContext) => runContext.context.conversation,
        targets: () => job.targets,
      }, { description: 'send', parameters: schema, execute: async (input) => act(input) }));
      const seen = [];
      for (let i = 0; i < job.calls; i++) {
        let step = 0;
        const model = {
          async getResponse({ input }) {
            step += 1;
            if (step === 1) return { usage: new Usage(), output: [{ type: 'function_call', callId: `oa-${++ids}`, name: TOOL, arguments: j(job.args), status: 'completed' }] };
            const r = input.find((x) => x.type === 'function_call_result');
            seen.push(r.output.type === 'text' ? r.output.text : j(r.output));
            return { usage: new Usage(), output: [{ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'ok' }] }] };
          },
          // eslint-disable-next-line require-yield
          async *getStreamedResponse() { throw new Error('not scripted'); },
        };
        await run(new Agent({ name: 'words', model, tools: [t] }), 'go', { context: { tenant: job.tenant, conversation: job.conversation } });
      }
      return seen;
    },
  },
  langchain: {
    async read(job) {
      const t = lc.idempotentTool(ledger, TOOL, {
        tenant: (input, config) => config.configurable.user_id,
        targets: () => job.targets,
      }, lcTool(async (input) => act(input), { name: TOOL, description: 'send', schema }));
      const seen = [];
      for (let i = 0; i < job.calls; i++) {
        try {
          const m = await t.invoke({ id: `lc-${++ids}`, name: TOOL, args: job.args, type: 'tool_call' },
            { configurable: { user_id: job.tenant, thread_id: job.conversation } });
          seen.push(typeof m.content === 'string' ? m.content : j(m.content));
        } catch (e) {
          seen.push(e instanceof lc.ToolCallError ? e.message : `threw ${e.name}: ${e.message}`);
        }
      }
      return seen;
    },
    reasons: {},
  },
  mastra: {
    async read(job) {
      const t = createTool(ma.idempotentTool(ledger, TOOL, {
        tenant: (input, context) => context.requestContext.get('tenant'),
        conversation: (input, context) => context.requestContext.get('conversation'),
        strict: true,
        targets: () => job.targets,
      }, { id: TOOL, description: 'send', inputSchema: schema, execute: async (input) => act(input) }));
      const seen = [];
      for (let i = 0; i < job.calls; i++) {
        let step = 0;
        let last = [];
        const model = new MockLanguageModelV3({
          doGenerate: async ({ prompt }) => {
            step += 1;
            last = prompt;
            if (step === 1) {
              return { content: [{ type: 'tool-call', toolCallId: `ma-${++ids}`, toolName: TOOL, input: j(job.args) }], finishReason: { unified: 'tool-calls', raw: undefined }, usage, warnings: [] };
            }
            return { content: [{ type: 'text', text: 'ok' }], finishReason: { unified: 'stop', raw: undefined }, usage, warnings: [] };
          },
        });
        const requestContext = new RequestContext();
        requestContext.set('tenant', job.tenant);
        if (job.conversation !== undefined) requestContext.set('conversation', job.conversation);
        await new MastraAgent({ id: 'words', name: 'words', instructions: 'go', model, tools: { [TOOL]: t } }).generate('go', { requestContext, maxSteps: 2 });
        const part = last.filter((m) => m.role === 'tool').flatMap((m) => m.content).find((p) => p.type === 'tool-result');
        seen.push(part.output.type === 'json' ? j(part.output.value) : part.output.value);
      }
      return seen;
    },
    reasons: { no_conversation: 'the run has no Mastra memory thread and strict is true; give options.conversation or run the agent with memory' },
  },
  python: {
    // all of python's jobs in one process, after their claims were set up
    async readAll(jobs) {
      const py = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
      const expanded = jobs.flatMap((job) => Array.from({ length: job.calls }, () => ({ tenant: job.tenant, conversation: job.conversation, args: job.args, targets: job.targets })));
      const { stdout } = await promisify(execFile)(py, [path.join(HERE, '../python/drive_words.py'), dbFile, j(expanded)],
        { env: { ...process.env, PYTHONPATH: process.env.WORDS_PYTHONPATH || '', PYTHONDONTWRITEBYTECODE: '1' } });
      const out = JSON.parse(stdout);
      return jobs.map((job) => out.splice(0, job.calls).map((o) => (o.payload === undefined ? o.text : `${o.text}\n${j(o.payload)}`)));
    },
    reasons: { outcome_unknown: 'RuntimeError: socket hang up', no_tenant: 'tenant gave None', no_conversation: 'conversation gave None' },
  },
};
const JS_REASONS = { outcome_unknown: 'Error: socket hang up', no_tenant: 'options.tenant returned undefined', no_conversation: 'options.conversation returned undefined' };
const reasonOf = (name, kind) => (adapters[name].reasons || {})[kind] ?? JS_REASONS[kind] ?? (kind === 'not_sent' ? 'connection refused' : undefined);

// The decisions: the job that reaches each, which call's reading counts, and what follows the words.
const CASES = [
  { kind: 'replay', mode: 'ok', calls: 2, payload: (to) => ({ sent: to }) },
  { kind: 'failed', mode: 'fail', calls: 1, payload: () => ({ code: 'declined' }) },
  { kind: 'failed_replay', mode: 'fail', calls: 2, payload: () => ({ code: 'declined' }) },
  { kind: 'in_progress', mode: 'ok', calls: 1, before: 'hold' },
  { kind: 'unknown', mode: 'ok', calls: 1, before: 'unknown' },
  { kind: 'outcome_unknown', mode: 'throw', calls: 1 },
  { kind: 'mismatch', mode: 'ok', calls: 1, before: 'local', fields: { differs: 'effect' } },
  { kind: 'not_sent', mode: 'notsent', calls: 1 },
  { kind: 'no_tenant', mode: 'ok', calls: 1, tenant: undefined },
  { kind: 'no_conversation', mode: 'ok', calls: 1, conversation: undefined },
  { kind: 'conflict_succeeded', mode: 'ok', calls: 1, before: 'held', status: 'succeeded', payload: () => ({ sent: 'earlier' }) },
  { kind: 'conflict_claimed', mode: 'ok', calls: 1, before: 'held', status: 'claimed' },
  { kind: 'conflict_unknown', mode: 'ok', calls: 1, before: 'held', status: 'unknown' },
  // a tool that names its targets: the in_progress and unknown words name them too
  { id: 'in_progress+targets', kind: 'in_progress', mode: 'ok', calls: 1, before: 'hold', touches: true },
  { id: 'unknown+targets', kind: 'unknown', mode: 'ok', calls: 1, before: 'unknown', touches: true },
  { id: 'outcome_unknown+targets', kind: 'outcome_unknown', mode: 'throw', calls: 1, touches: true },
];
const idOf = (c) => c.id ?? c.kind;

const held = new Set(); // tokens of claims another caller holds, renewed while the adapters run
const renewer = setInterval(() => { for (const t of held) ledger.renew(t, LEASE_SECONDS); }, RENEW_MS);

function jobOf(name, c) {
  const conversation = `conv-${name}`;
  const id = idOf(c).replace('+', '-');
  const args = { to: `${id}@example.com`, mode: c.mode };
  // the conflict cases and those that touch name a target of their own (per adapter: one tenant)
  const targets = c.before === 'held' || c.touches ? [`mailto:${id}@example.com/${name}`] : [];
  const job = { tenant: 'tenant' in c ? c.tenant : TENANT, conversation: 'conversation' in c ? c.conversation : conversation, args, calls: c.calls, targets };
  const key = keyOf(conversation, args);
  if (c.before === 'hold') held.add(ledger.claim(TENANT, conversation, TOOL, args).token);
  if (c.before === 'unknown') ledger.settle(ledger.claim(TENANT, conversation, TOOL, args).token, 'unknown', { reason: 'the holder died' });
  if (c.before === 'local') ledger.claim(TENANT, conversation, TOOL, args, { effect: 'local' });
  let holder;
  if (c.before === 'held') {
    // another call, other arguments, the same target: settled as the case says
    // (a local claim stays claimed once its lease passes, and is not renewed)
    const earlier = { to: `${id}@example.com`, mode: 'earlier' };
    const d = ledger.claim(TENANT, conversation, TOOL, earlier, { targets, effect: c.status === 'claimed' ? 'local' : 'external' });
    if (c.status === 'succeeded') ledger.settle(d.token, 'succeeded', { sent: 'earlier' });
    if (c.status === 'unknown') ledger.settle(d.token, 'unknown', { reason: 'the holder died' });
    holder = { key: d.key, target: targets[0] };
  }
  return { job, key, holder, touched: c.touches ? targets : undefined };
}

// What the model is to read for case c in adapter name: the words, then the payload.
function expected(name, c, key, to, holder, touched) {
  const fields = { tool: TOOL, key, attempt: 1, reason: reasonOf(name, c.kind), targets: touched, ...c.fields };
  if (holder) Object.assign(fields, { target: holder.target, held_tool: TOOL, held_key: holder.key, at: ledger.row(TENANT, holder.key).updated_at });
  if (c.kind === 'replay' || c.kind === 'failed_replay') fields.at = ledger.row(TENANT, key).updated_at;
  if (c.kind === 'in_progress') fields.renewed_at = ledger.claim(TENANT, `conv-${name}`, TOOL, { to, mode: c.mode }).renewed_at;
  const words = say(c.kind, fields);
  return c.payload ? `${words}\n${j(c.payload(to))}` : words;
}
// The row reads an adapter makes: none, for any decision. A replay's words
// say when the first call ran from the claim's answer (settled_at), which
// expected() checks against the row's updated_at, read here afterwards.
let rowReads = 0;
const readRow = ledger.row.bind(ledger);
ledger.row = (...a) => { rowReads += 1; return readRow(...a); };
// "renewed it N s ago" depends on when the adapter read the clock
const settled = (t) => (typeof t === 'string' ? t.replace(/ and renewed it \d+ s ago/, ' and renewed it N s ago') : t);

try {
  const names = Object.keys(adapters);
  const read = {}; // name -> kind -> { text, want, key }
  for (const name of names) {
    read[name] = {};
    const jobs = CASES.map((c) => ({ c, ...jobOf(name, c) }));
    rowReads = 0;
    const seen = adapters[name].readAll
      ? await adapters[name].readAll(jobs.map((x) => x.job))
      : await Promise.all(jobs.map((x) => adapters[name].read(x.job))); // at once: LangChain's in_progress waits out a lease
    // (python reads in its own process: tests/python/test_tools.py counts its reads)
    if (!adapters[name].readAll) report(rowReads === 0, `no-row-read:${name}`, `the adapter read the ledger's row ${rowReads} times over ${CASES.length} decisions`);
    jobs.forEach(({ c, job, key, holder, touched }, i) => {
      read[name][idOf(c)] = { text: settled(seen[i].at(-1)), want: settled(expected(name, c, key, job.args.to, holder, touched)), key, holder, touched };
    });
  }
  clearInterval(renewer);
  for (const c of CASES) {
    // each adapter against say()
    for (const name of names) {
      const r = read[name][idOf(c)];
      if (name === 'mcp' && !mcpSpeaksWords) {
        console.log(`SKIP integrations.words:${idOf(c)}:${name} (TODO(h-mcp): mcp.js does not speak words.json yet; it read ${j(r.text)})`);
        continue;
      }
      report(r.text === r.want && (!r.touched || r.text.includes(r.touched[0])), `${idOf(c)}:${name}`, `read ${j(r.text)}, want ${j(r.want)}`);
    }
    // the adapters against each other, the key, the time and each adapter's own reason taken out
    const same = names.filter((n) => n !== 'mcp' || mcpSpeaksWords).map((n) => {
      const { text, key, holder, touched } = read[n][idOf(c)];
      const reason = reasonOf(n, c.kind);
      // each adapter's call ran at its own time (and its holder, in the conflict cases, is its own)
      let t = String(text).split(key).join('KEY').replace(/ at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/, ' at TIME');
      if (holder) t = t.split(holder.key).join('HELD').split(holder.target).join('TARGET');
      if (touched) t = t.split(touched[0]).join('TARGET');
      if (reason !== undefined) t = t.split(reason).join('REASON');
      return [n, t];
    });
    const differ = same.filter(([, t]) => t !== same[0][1]);
    report(differ.length === 0, `${idOf(c)}:same`, `${same[0][0]} read ${j(same[0][1])}; ${differ.map(([n, t]) => `${n} read ${j(t)}`).join('; ')}`);
  }
  // say()'s targets: a list of strings joined by ", ", left out when empty, refused otherwise
  {
    const f = { tool: 't', key: 'k', attempt: 1 };
    let bad;
    try { say('unknown', { ...f, targets: 'mailto:a' }); } catch (e) { bad = e.message; }
    const got = [say('unknown', { ...f, targets: ['mailto:a', 'mailto:b'] }), say('unknown', { ...f, targets: [] }), bad];
    const want = [say('unknown', f).replace('again for this,', 'again for this or for mailto:a, mailto:b,'), say('unknown', f), 'sqlite-idempotency: say: targets must be a list of strings, got "mailto:a"'];
    report(j(got) === j(want) && got[0] !== got[1], 'say-targets', `got ${j(got)}, want ${j(want)}`);
  }
} catch (e) {
  report(false, 'run', e && e.stack ? e.stack : String(e));
} finally {
  clearInterval(renewer);
  ledger.close();
  fs.rmSync(dir, { recursive: true, force: true });
}
process.exit(checks.status());

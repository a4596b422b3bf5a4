// Vercel's Workflow DevKit (npm workflow) running guarded steps in its own
// local world, in this process, against the counting target
// (tests/js/target.mjs). The workflow module is wdk_send.mjs; the DevKit
// builds it as its own in-process test harness does (@workflow/vitest's
// buildWorkflowTests and setupWorkflowTests: the builder's workflow and step
// bundles, a local world whose queue calls them in process), and start()
// from workflow/api runs it. Cases:
//   retry-unguarded  the send throws after the request went out and the
//                    step lets the ledger's OutcomeUnknown escape: the
//                    runner retries it 3 times (its default), each retry
//                    reads unknown and sends nothing
//   retry-guarded    the same with nonRetryable(FatalError): one attempt,
//                    the run fails with the unknown text
//   retry-replay     the step throws after the call settled: the runner's
//                    retry (the same stepId) reads the replay and succeeds
//   re-plan          the workflow runs the same call as a second step (a new
//                    stepId): replay
//   re-run           the workflow is started again from the start (a new
//                    run, new stepIds): replay
//   dead-holder      a holder process took the call (a 4 s lease), sent,
//                    and was SIGKILLed; with nonRetryable's retry option the step's
//                    in_progress is a RetryableError to be retried after
//                    that lease, so the run ends on unknown (nothing sent
//                    here), not on a retry budget spent inside the lease
// and, given the docs (argv[2]), the Durable runners section's workflow
// module, built and run as written: docs-example.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { format } from 'node:util';
import Database from 'better-sqlite3';
import { applySwcTransform } from '@workflow/builders';
import { buildWorkflowTests, setupWorkflowTests, teardownWorkflowTests } from '@workflow/vitest';
import { start } from 'workflow/api';
import { Ledger } from 'sqlite-idempotency';
import { Checks } from './checks.mjs';
import { startTarget } from './target.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const checks = new Checks('runners.workflow');
const j = (v) => JSON.stringify(v);
// what a retry reads: Ledger.call's OutcomeUnknown for a claim that is unknown
const UNKNOWN = (key) => `outcome of ${key} is unknown (an earlier attempt may have reached the target); it will not be retried: reconcile with the target, then resolve`;

// The DevKit logs every failed step and run on the console; kept, and shown
// only when a check fails.
const logged = [];
for (const level of ['log', 'info', 'warn', 'error', 'debug']) {
  const print = console[level].bind(console);
  console[level] = (...args) => (typeof args[0] === 'string' && /^(PASS|FAIL|SKIP) /.test(args[0]) ? print(...args) : logged.push(format(...args)));
}

// A project directory of its own under the current one (so that the
// packages resolve from its node_modules), holding the workflow modules.
const dir = fs.mkdtempSync(path.join(process.cwd(), 'wdk-'));
fs.mkdirSync(path.join(dir, 'workflows'));
const modules = { 'workflows/send.mjs': fs.readFileSync(path.join(HERE, 'wdk_send.mjs'), 'utf8') };
const docs = process.argv[2];
if (docs) modules['workflows/email.mjs'] = docsExample(fs.readFileSync(docs, 'utf8'));
for (const [file, text] of Object.entries(modules)) fs.writeFileSync(path.join(dir, file), text);

// The js block of the Durable runners section that 58-runners.sh runs and
// that is a workflow module ("use workflow").
function docsExample(text) {
  const section = text.slice(text.indexOf('\n## Durable runners'));
  const blocks = [...section.matchAll(/<!-- run by tests\/suites\/58-runners\.sh -->\n```js\n([\s\S]*?)\n```/g)].map((m) => m[1]);
  const mine = blocks.filter((b) => b.includes("'use workflow'"));
  if (mine.length !== 1) throw new Error(`${docs}: want one js block with 'use workflow' marked <!-- run by tests/suites/58-runners.sh --> in its Durable runners section, found ${mine.length}`);
  return `${mine[0]}\n`;
}

// The workflowId of an exported workflow function, as the DevKit's client
// transform (what its bundler plugins apply to the caller's code) assigns it.
async function workflowOf(file, name) {
  const { workflowManifest } = await applySwcTransform(file, modules[file], 'client', path.join(dir, file), dir);
  const id = workflowManifest.workflows?.[file]?.[name]?.workflowId;
  if (!id) throw new Error(`the DevKit's client transform gives no workflowId for ${name} in ${file}: ${j(workflowManifest)}`);
  return { workflowId: id };
}

// Runs the workflow to its end: { value } or { error }.
async function run(workflow, args) {
  const r = await start(workflow, args);
  try {
    return { runId: r.runId, value: await r.returnValue };
  } catch (error) {
    return { runId: r.runId, error };
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// The dead holder's program (argv: DB JOB): the call with a 4 s lease,
// sending to job.url, where the target holds the request until the kill.
const HOLDER = `
import Database from 'better-sqlite3';
import { Ledger } from 'sqlite-idempotency';
const [db, text] = process.argv.slice(1);
const job = JSON.parse(text);
const ledger = Ledger.open(new Database(db));
await ledger.call(job.tenant, job.conversation, 'send_email', job.args, (a) => fetch(job.url, {
  method: 'POST', headers: { ...a.headers, 'content-type': 'application/json' }, body: JSON.stringify(job.args),
}), { renewSeconds: 4 });
`;
const target = await startTarget();
const db = path.join(dir, 'ledger.db');
const ledger = Ledger.open(new Database(db), { options: { lease_seconds: 1 } }); // as wdk_send.mjs opens it
const keyOf = (job) => ledger.db.prepare('SELECT idem_key(?, ?, ?, ?) AS k').get(job.tenant, job.conversation, 'send_email', j(job.args)).k;
let logs = 0;
function job(name, extra = {}) {
  logs += 1;
  return { db, log: path.join(dir, `attempts-${logs}.jsonl`), url: `${target.url}/send`, tenant: 'tenant-a', conversation: `chat-${name}`, args: { to: `${name}@example.com`, subject: 'Report' }, ...extra };
}
const attempts = (jb) => (fs.existsSync(jb.log) ? fs.readFileSync(jb.log, 'utf8').trim().split('\n').map((l) => JSON.parse(l)) : []);
const stepIds = (list) => [...new Set(list.map((a) => a.stepId))];

try {
  await buildWorkflowTests({ cwd: dir });
  await setupWorkflowTests({ cwd: dir });
  const email = await workflowOf('workflows/send.mjs', 'emailWorkflow');

  // retry-unguarded: the runner's own retries, each refused by the ledger
  {
    const jb = job('unguarded', { fail: 'inside' });
    const out = await run(email, [jb]);
    const seen = attempts(jb);
    const status = ledger.row(jb.tenant, keyOf(jb))?.status;
    checks.report(target.count(keyOf(jb)) === 1 && seen.length === 4 && stepIds(seen).length === 1 && status === 'unknown'
      && out.error?.message === `Workflow run "${out.runId}" failed: Step "step//./workflows/send//sendEmail" failed after 3 retries: ${UNKNOWN(keyOf(jb))}`,
    'retry-unguarded', `the target saw ${target.count(keyOf(jb))} (want 1); attempts ${j(seen)} (want 4 of one stepId: the runner's default 3 retries); the row is ${status}; the run ${out.error ? `failed: ${out.error.message}` : `returned ${j(out.value)}`} (want it failed after 3 retries: ${UNKNOWN(keyOf(jb))})`);
  }
  // retry-guarded: the ledger's unknown is the runner's FatalError
  {
    const jb = job('guarded', { fail: 'inside', guard: true });
    const out = await run(email, [jb]);
    const seen = attempts(jb);
    const key = keyOf(jb);
    const want = `outcome of ${key} is unknown (Error: the connection reset after the request was sent); it will not be retried: reconcile with the target, then resolve`;
    checks.report(target.count(key) === 1 && seen.length === 1 && out.error?.message === `Workflow run "${out.runId}" failed: ${want}`,
      'retry-guarded', `the target saw ${target.count(key)} (want 1); attempts ${j(seen)} (want 1); the run ${out.error ? `failed: ${out.error.message}` : `returned ${j(out.value)}`} (want it failed: ${want})`);
  }
  // retry-replay: the step fails after the call settled; the runner's retry replays
  {
    const jb = job('after', { fail: 'after' });
    const out = await run(email, [jb]);
    const seen = attempts(jb);
    checks.report(target.count(keyOf(jb)) === 1 && seen.length === 2 && stepIds(seen).length === 1 && j(out.value) === j([{ idempotent: true, key: keyOf(jb), n: 1 }]),
      'retry-replay', `the target saw ${target.count(keyOf(jb))} (want 1); attempts ${j(seen)} (want 2 of one stepId); the run ${out.error ? `failed: ${out.error.message}` : `returned ${j(out.value)}`} (want one replay)`);
  }
  // re-plan: the same call as a second step, a new stepId
  {
    const jb = job('replan', { steps: 2 });
    const out = await run(email, [jb]);
    const seen = attempts(jb);
    const key = keyOf(jb);
    checks.report(target.count(key) === 1 && stepIds(seen).length === 2 && j(out.value) === j([{ idempotent: false, key, n: 1 }, { idempotent: true, key, n: 1 }]),
      're-plan', `the target saw ${target.count(key)} (want 1); attempts ${j(seen)} (want two stepIds); the run ${out.error ? `failed: ${out.error.message}` : `returned ${j(out.value)}`} (want the first call, then its replay)`);
  }
  // re-run: the whole workflow again, a new run
  {
    const jb = job('rerun');
    const first = await run(email, [jb]);
    const second = await run(email, [jb]);
    const seen = attempts(jb);
    const key = keyOf(jb);
    checks.report(target.count(key) === 1 && first.runId !== second.runId && stepIds(seen).length === 2
      && j(first.value) === j([{ idempotent: false, key, n: 1 }]) && j(second.value) === j([{ idempotent: true, key, n: 1 }]),
    're-run', `the target saw ${target.count(key)} (want 1); runs ${first.runId} and ${second.runId}; attempts ${j(seen)} (want two stepIds); the runs returned ${j(first.value ?? first.error?.message)} and ${j(second.value ?? second.error?.message)}`);
  }
  // dead-holder: a process takes the call with a 4 s lease, sends, and is
  // SIGKILLed while the target holds its request; the run's step (the
  // DevKit's default retries) waits out that lease, then reads unknown
  {
    const jb = job('deadholder', { guard: true, waitOut: true });
    const key = keyOf(jb);
    const holder = spawn(process.execPath, ['--input-type=module', '-e', HOLDER, db, j({ ...jb, url: `${jb.url}?delay_ms=10000` })], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    holder.stderr.on('data', (d) => { err += d; });
    const exited = new Promise((r) => holder.once('exit', (code, signal) => r(signal || code)));
    for (let waited = 0; waited < 30000 && target.count(key) === 0 && holder.exitCode === null; waited += 50) await sleep(50);
    holder.kill('SIGKILL');
    const how = await exited;
    const row = ledger.row(jb.tenant, key);
    const t0 = Date.now();
    const out = await run(email, [jb]);
    const took = Date.now() - t0;
    const seen = attempts(jb);
    const want = `outcome of ${key} is unknown (an earlier attempt may have reached the target); it will not be retried: reconcile with the target, then resolve`;
    const left = row ? row.lease_until - t0 : undefined;
    checks.report(how === 'SIGKILL' && row?.status === 'claimed' && left > 1000 && target.count(key) === 1 && seen.length === 2 && stepIds(seen).length === 1 && took >= left
      && ledger.row(jb.tenant, key)?.status === 'unknown' && out.error?.message === `Workflow run "${out.runId}" failed: ${want}`,
    'dead-holder', `the holder ended by ${how} (${err.trim().slice(0, 300)}), its row ${row?.status} (want claimed) with ${left} ms of lease left at the run's start (want over 1000); the target saw ${target.count(key)} (want 1, the holder's); attempts ${j(seen)} (want 2 of one stepId); the row is ${ledger.row(jb.tenant, key)?.status} (want unknown); the run took ${took} ms (want at least the lease left) and ${out.error ? `failed: ${out.error.message}` : `returned ${j(out.value)}`} (want it failed: ${want})`);
  }
  if (docs) await docsCase();
} catch (e) {
  checks.report(false, 'harness', e.stack);
} finally {
  await teardownWorkflowTests();
  await target.close();
  ledger.close();
  if (checks.failures) process.stderr.write(`the DevKit logged:\n${logged.join('\n')}\n`);
  fs.rmSync(dir, { recursive: true, force: true });
}

// docs-example: the docs' workflow module, started twice and as a re-plan
// (two steps), each with its documented input; the mail target sees one
// request per call.
async function docsCase() {
  const mod = 'workflows/email.mjs';
  const wf = await workflowOf(mod, 'emailReport');
  process.env.MAIL_URL = `${target.url}/mail`;
  process.env.LEDGER_DB = path.join(dir, 'docs-ledger.db');
  const input = { userId: 'user-42', chatId: 'chat-7', to: 'ann@example.com', subject: 'Report' };
  const a = await run(wf, [input]);
  const b = await run(wf, [input]);
  const ok = (r, idempotent) => r.value?.idempotent === idempotent && r.value?.status === 'succeeded';
  checks.report(target.countPath('/mail') === 1 && ok(a, false) && ok(b, true), 'docs-example',
    `the mail target saw ${target.countPath('/mail')} (want 1); the runs returned ${j(a.value ?? a.error?.message)} and ${j(b.value ?? b.error?.message)} (want the call, then its replay)`);
}

process.exit(checks.status());

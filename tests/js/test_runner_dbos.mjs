// DBOS Transact (@dbos-inc/dbos-sdk) running a guarded step against the
// counting target (tests/js/target.mjs), its system database the
// PostgreSQL of $DBOS_SYSTEM_DATABASE_URL (tests/suites/58-runners.sh starts
// a private cluster). The step (DBOS.runStep, retries allowed as a user
// configures them) is one guarded send_email call (Ledger.call). Cases:
//   retry-unguarded  the send throws after the request went out; the step's
//                    retries (maxAttempts 3) each read unknown, send nothing
//   retry-guarded    the same with shouldRetry: !isFinalRefusal
//                    (sqlite-idempotency/runners): one attempt, the
//                    workflow fails with the unknown text
//   retry-replay     the step throws after the call settled: DBOS's retry
//                    (the same step) reads the replay and succeeds
//   re-plan          the workflow runs the same call as a second step: replay
//   re-run           a new workflow (a new workflow ID) with the same input:
//                    replay
//   killed           the process is SIGKILLed while the step is sending (the
//                    target holds the request); the next launch recovers
//                    the workflow and DBOS runs the step again (its steps
//                    are at least once): the ledger reads the call as
//                    unknown once the dead holder's lease is gone (in
//                    progress before that, which DBOS retries with the
//                    docs' retriesSpanning(lease) settings), and the
//                    recovered workflow fails with the unknown text
// and, given the docs (argv[2]), the Durable runners section's DBOS example,
// run as written and compared with the text block after it: docs-example.
//
// Usage: node test_runner_dbos.mjs [DOCS_MD]; as a worker (the killed
// case's processes): node test_runner_dbos.mjs worker start|recover JOB.
import { execFile, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { format, promisify } from 'node:util';
import Database from 'better-sqlite3';
import { DBOS } from '@dbos-inc/dbos-sdk';
import { Ledger } from 'sqlite-idempotency';
import { isFinalRefusal, retriesSpanning } from 'sqlite-idempotency/runners';
import { Checks } from './checks.mjs';
import { startTarget } from './target.mjs';

const SELF = fileURLToPath(import.meta.url);
const execFileAsync = promisify(execFile);
const LEASE_SECONDS = 1;
const KILLED_LEASE_SECONDS = 8; // the killed case's lease (renewSeconds)
// how long the killed case waits for its worker's step to reach the target
const START_MS = 60000;
const j = (v) => JSON.stringify(v);
// what a retry reads: Ledger.call's OutcomeUnknown for a claim that is unknown
const UNKNOWN = (key) => `outcome of ${key} is unknown (an earlier attempt may have reached the target); it will not be retried: reconcile with the target, then resolve`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// One attempt of the step: records { workflowID, stepID, attempt } in
// job.log, then the guarded call; see the cases above for job.fail.
async function sendEmail(job) {
  const { stepID, currentAttempt } = DBOS.stepStatus;
  fs.appendFileSync(job.log, `${j({ workflowID: DBOS.workflowID, stepID, attempt: currentAttempt, pid: process.pid })}\n`);
  const ledger = Ledger.open(new Database(job.db), { options: { lease_seconds: LEASE_SECONDS } });
  try {
    const out = await ledger.call(job.tenant, job.conversation, 'send_email', job.args, async (a) => {
      const res = await fetch(job.url, { method: 'POST', headers: { ...a.headers, 'content-type': 'application/json' }, body: j(job.args) });
      const body = await res.json();
      if (job.fail === 'inside') throw new Error('the connection reset after the request was sent');
      return body;
    }, job.leaseSeconds ? { renewSeconds: job.leaseSeconds } : {});
    if (job.fail === 'after' && currentAttempt === 1) throw new Error('writing the receipt failed after the email was sent');
    return { idempotent: out.idempotent, key: out.key, n: out.result.n };
  } finally {
    ledger.close();
  }
}

const emailWorkflow = DBOS.registerWorkflow(async (job) => {
  const results = [];
  for (let i = 0; i < (job.steps || 1); i += 1) {
    // job.leaseSeconds: the docs' settings, retries spanning the holder's lease
    const retries = job.leaseSeconds ? retriesSpanning(job.leaseSeconds) : { retriesAllowed: true, maxAttempts: 3, intervalSeconds: 0.2 };
    results.push(await DBOS.runStep(() => sendEmail(job), {
      name: 'send_email',
      ...retries,
      ...(job.guard ? { shouldRetry: (e) => !isFinalRefusal(e) } : {}),
    }));
  }
  return results;
}, { name: 'emailWorkflow' });

// DBOS logs each failed step and workflow: kept, shown when a check fails.
const logged = [];
const keep = (level) => (entry) => logged.push(`${level}: ${entry instanceof Error ? entry.stack : format(entry)}`);
const logger = { info: keep('info'), debug: keep('debug'), warn: keep('warn'), error: keep('error') };

async function launch() {
  DBOS.setConfig({ name: 'runners-test', systemDatabaseUrl: process.env.DBOS_SYSTEM_DATABASE_URL, logger });
  await DBOS.launch();
}

// Runs the workflow to its end: { value } or { error }.
async function run(job, workflowID) {
  const handle = await DBOS.startWorkflow(emailWorkflow, workflowID ? { workflowID } : {})(job);
  try {
    return { workflowID: handle.workflowID, value: await handle.getResult() };
  } catch (error) {
    return { workflowID: handle.workflowID, error };
  }
}

if (process.argv[2] === 'worker') {
  const [mode, text] = process.argv.slice(3);
  const job = JSON.parse(text);
  await launch();
  if (mode === 'start') {
    await DBOS.startWorkflow(emailWorkflow, { workflowID: job.workflowID })(job);
    await new Promise(() => {}); // killed while the step sends
  }
  // recover: DBOS.launch() has recovered the pending workflow; wait for it
  let out;
  try { out = { value: await DBOS.retrieveWorkflow(job.workflowID).getResult() }; } catch (e) { out = { error: e.message }; }
  console.log(j(out));
  await DBOS.shutdown();
  process.exit(0);
}

const checks = new Checks('runners.dbos');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'runners-dbos-'));
const target = await startTarget();
const db = path.join(dir, 'ledger.db');
const ledger = Ledger.open(new Database(db), { options: { lease_seconds: LEASE_SECONDS } });
const keyOf = (jb) => ledger.db.prepare('SELECT idem_key(?, ?, ?, ?) AS k').get(jb.tenant, jb.conversation, 'send_email', j(jb.args)).k;
let logs = 0;
function job(name, extra = {}) {
  logs += 1;
  return { db, log: path.join(dir, `attempts-${logs}.jsonl`), url: `${target.url}/send`, tenant: 'tenant-a', conversation: `chat-${name}`, args: { to: `${name}@example.com`, subject: 'Report' }, ...extra };
}
const attempts = (jb) => (fs.existsSync(jb.log) ? fs.readFileSync(jb.log, 'utf8').trim().split('\n').map((l) => JSON.parse(l)) : []);
const steps = (list) => [...new Set(list.map((a) => `${a.workflowID}/${a.stepID}`))];
const said = (out) => (out.error ? `failed: ${out.error.message ?? out.error}` : `returned ${j(out.value)}`);
const run_id = `${process.pid}-${Date.now()}`; // workflow IDs of this run of the test

try {
  await launch();
  {
    const jb = job('unguarded', { fail: 'inside' });
    const out = await run(jb);
    const seen = attempts(jb);
    const status = ledger.row(jb.tenant, keyOf(jb))?.status;
    const key = keyOf(jb);
    // DBOSMaxStepRetriesError: the first attempt's unknown, then what each retry read
    const want = `Step send_email has exceeded its maximum of 3 retries. Previous errors: Error 1: outcome of ${key} is unknown (Error: the connection reset after the request was sent); it will not be retried: reconcile with the target, then resolve. Error 2: ${UNKNOWN(key)}. Error 3: ${UNKNOWN(key)}`;
    checks.report(target.count(keyOf(jb)) === 1 && seen.length === 3 && steps(seen).length === 1 && status === 'unknown'
      && out.error?.message === want,
    'retry-unguarded', `the target saw ${target.count(keyOf(jb))} (want 1); attempts ${j(seen)} (want 3 of one step); the row is ${status}; the workflow ${said(out)} (want it failed: ${want})`);
  }
  {
    const jb = job('guarded', { fail: 'inside', guard: true });
    const out = await run(jb);
    const seen = attempts(jb);
    const want = `outcome of ${keyOf(jb)} is unknown (Error: the connection reset after the request was sent); it will not be retried: reconcile with the target, then resolve`;
    checks.report(target.count(keyOf(jb)) === 1 && seen.length === 1 && out.error?.message === want, 'retry-guarded',
      `the target saw ${target.count(keyOf(jb))} (want 1); attempts ${j(seen)} (want 1); the workflow ${said(out)} (want it failed: ${want})`);
  }
  {
    const jb = job('after', { fail: 'after', guard: true });
    const out = await run(jb);
    const seen = attempts(jb);
    checks.report(target.count(keyOf(jb)) === 1 && seen.length === 2 && steps(seen).length === 1 && j(out.value) === j([{ idempotent: true, key: keyOf(jb), n: 1 }]),
      'retry-replay', `the target saw ${target.count(keyOf(jb))} (want 1); attempts ${j(seen)} (want 2 of one step); the workflow ${said(out)} (want one replay)`);
  }
  {
    const jb = job('replan', { steps: 2, guard: true });
    const out = await run(jb);
    const seen = attempts(jb);
    const key = keyOf(jb);
    checks.report(target.count(key) === 1 && steps(seen).length === 2 && j(out.value) === j([{ idempotent: false, key, n: 1 }, { idempotent: true, key, n: 1 }]),
      're-plan', `the target saw ${target.count(key)} (want 1); attempts ${j(seen)} (want two steps); the workflow ${said(out)} (want the call, then its replay)`);
  }
  {
    const jb = job('rerun', { guard: true });
    const first = await run(jb);
    const second = await run(jb);
    // the same workflow ID again is DBOS's own: the recorded result, no step run
    const again = await run(jb, first.workflowID);
    const seen = attempts(jb);
    const key = keyOf(jb);
    checks.report(target.count(key) === 1 && first.workflowID !== second.workflowID && steps(seen).length === 2
      && j(first.value) === j([{ idempotent: false, key, n: 1 }]) && j(second.value) === j([{ idempotent: true, key, n: 1 }]) && j(again.value) === j(first.value),
    're-run', `the target saw ${target.count(key)} (want 1); workflows ${first.workflowID} and ${second.workflowID}; attempts ${j(seen)} (want two steps); they ${said(first)}, ${said(second)}; the first's ID again ${said(again)}`);
  }
  await DBOS.shutdown();
  await killed();
  if (process.argv[2]) await docsExample(process.argv[2]);
} catch (e) {
  checks.report(false, 'harness', e.stack);
} finally {
  await target.close();
  ledger.close();
  if (checks.failures) process.stderr.write(`DBOS logged:\n${logged.join('\n')}\n`);
  fs.rmSync(dir, { recursive: true, force: true });
}

// killed: a worker SIGKILLed while its step sends; the next launch recovers it.
// The step holds an 8 s lease (renewSeconds) and retries with the docs'
// settings, retriesSpanning(8) (1 s, doubling: 5 attempts), so the
// recovered step, which starts inside the dead holder's lease, reads in
// progress, then unknown once the lease is gone; DBOS's own defaults (3
// attempts, 1 s doubling: 3 s) would end on in progress.
async function killed() {
  const jb = job('killed', { guard: true, workflowID: `killed-${run_id}`, leaseSeconds: KILLED_LEASE_SECONDS });
  jb.url = `${target.url}/send?delay_ms=10000`;
  const key = keyOf(jb);
  const first = spawn(process.execPath, [SELF, 'worker', 'start', j(jb)], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  first.stderr.on('data', (d) => { err += d; });
  const exited = new Promise((r) => first.once('exit', (code, signal) => r(signal || code)));
  // until the step's request has reached the target (or the worker died)
  for (let waited = 0; waited < START_MS && target.count(key) === 0 && first.exitCode === null; waited += 50) await sleep(50);
  const sentBeforeKill = target.count(key);
  first.kill('SIGKILL');
  const how = await exited;
  const status = ledger.row(jb.tenant, key)?.status;
  let out;
  try {
    out = JSON.parse(execFileSync(process.execPath, [SELF, 'worker', 'recover', j(jb)], { encoding: 'utf8', timeout: 60000, stdio: ['ignore', 'pipe', 'pipe'] }).trim().split('\n').at(-1));
  } catch (e) {
    out = { error: `the recovering worker failed: ${e.message} ${e.stdout || ''} ${e.stderr || ''}` };
  }
  const seen = attempts(jb);
  const want = UNKNOWN(key);
  const pids = [...new Set(seen.map((a) => a.pid))];
  const recovered = seen.filter((a) => a.pid === pids[1]).length;
  checks.report(sentBeforeKill === 1 && how === 'SIGKILL' && status === 'claimed' && target.count(key) === 1 && pids.length === 2 && recovered >= 2 && steps(seen).length === 1 && out.error === want,
    'killed', `the target saw ${sentBeforeKill} before the kill (${how}; ${err.trim().slice(0, 500)}) and ${target.count(key)} in all (want 1); the row was ${status} at the kill (want claimed); attempts ${j(seen)} (want one step, in two processes, the recovering one retrying at least once past in progress); the recovered workflow ${said(out)} (want it failed: ${want})`);
}

// docs-example: the section's DBOS program as written, its output compared
// with the text block after it.
async function docsExample(docs) {
  const text = fs.readFileSync(docs, 'utf8');
  const section = text.slice(text.indexOf('\n## Durable runners'));
  const blocks = [...section.matchAll(/<!-- run by tests\/suites\/58-runners\.sh -->\n```js\n([\s\S]*?)\n```\n(?:\nIt prints:\n\n```text\n([\s\S]*?)\n```)?/g)];
  const mine = blocks.filter((b) => b[1].includes("'@dbos-inc/dbos-sdk'"));
  if (mine.length !== 1 || mine[0][2] === undefined) {
    checks.report(false, 'docs-example', `${docs}: want one js block importing @dbos-inc/dbos-sdk marked <!-- run by tests/suites/58-runners.sh --> in its Durable runners section, "It prints:" and a text block after it; found ${mine.length}`);
    return;
  }
  const m = mine[0];
  const here = fs.mkdtempSync(path.join(process.cwd(), 'dbos-example-'));
  fs.writeFileSync(path.join(here, 'example.mjs'), `${m[1]}\n`);
  // asynchronously: the target answering it runs in this process
  let got;
  try {
    got = (await execFileAsync(process.execPath, ['example.mjs'], { cwd: here, encoding: 'utf8', timeout: 60000, env: { ...process.env, MAIL_URL: `${target.url}/mail` } })).stdout;
  } catch (e) {
    got = `exit ${e.code}: ${e.stdout || ''}${e.stderr || ''}`;
  }
  fs.rmSync(here, { recursive: true, force: true });
  checks.report(got === `${m[2]}\n` && target.countPath('/mail') === 1, 'docs-example', `printed ${j(got)}, the docs say ${j(m[2])}; the mail target saw ${target.countPath('/mail')} (want 1)`);
}

process.exit(checks.status());

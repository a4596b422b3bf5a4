// tests/js/agent_harness.mjs: the scenarios every agent
// framework adapter (sqlite-idempotency/ai, /openai-agents, /langchain) is
// proven against, end to end, with the framework's own loop driving a tool
// that POSTs to the counting target (tests/python/test_server.py, started
// here with Python, on 127.0.0.1).
//
// A test program gives a driver:
//   driver.prefix           'integrations.ai'
//   driver.turn(job)        one agent run in this process: the framework's
//                           model emits the send tool call job.calls times,
//                           each under a new call id (job.ids, when given,
//                           are the ids), with job.args (call i with
//                           argsOf(job, i): job.argsList[i] when given); with
//                           job.targets the tool names its target
//                           (targetsOf); the tool POSTs to
//                           job.url + '?delay_ms=' + job.delayMs with
//                           currentAttempt().headers, timing out after
//                           job.timeoutMs; the tenant is job.tenant, the
//                           conversation job.conversation, waitMs job.waitMs.
//                           Resolves to the texts the model read back, one
//                           per call, in order.
// and calls main(driver, extras): as a worker (argv: worker DB JOB) it runs
// one turn and prints its texts as JSON; otherwise it runs the scenarios
// and then extras(ctx), and exits with the checks' status.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { Ledger } from 'sqlite-idempotency';
import { say, UNKNOWN } from 'sqlite-idempotency/words';
import { Checks } from './checks.mjs';

export { postJson } from './idem_adapter.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const SERVER = path.join(HERE, '../python/test_server.py');
export { UNKNOWN };
export const TOOL = 'send_email';
const LEASE_SECONDS = 1;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const j = (v) => JSON.stringify(v);

// The ledger of a test: a file, lease_seconds=1 (a killed holder's claim
// turns unknown a second later).
export function openLedger(file) {
  return Ledger.open(new Database(file), { options: { lease_seconds: LEASE_SECONDS } });
}

// The arguments of the i-th call (from 0) of a job's turn.
export const argsOf = (job, i) => (job.argsList ? job.argsList[Math.min(i, job.argsList.length - 1)] : job.args);
// The targets option of a job's tool (docs/ledger.md, "Targets"): an email
// names its recipient and invoice, never its body.
export const targetsOf = (job) => (job.targets ? { targets: (input) => [`mailto:${input.to}/invoice-${input.invoice}`] } : {});

export function keyOf(ledger, tenant, conversation, args) {
  return ledger.db.prepare('SELECT idem_key(?, ?, ?, ?) AS k').get(tenant, conversation, TOOL, j(args)).k;
}

// The counting target: { url, counts() -> {key: n}, stop() }.
export async function startTarget() {
  const python = fs.existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
  const child = spawn(python, [SERVER, '--max-seconds', '300'], { stdio: ['pipe', 'pipe', 'inherit'] });
  const port = await new Promise((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout });
    rl.once('line', (l) => { rl.close(); const m = /^PORT (\d+)$/.exec(l); if (m) resolve(+m[1]); else reject(new Error(`test_server said ${l}`)); });
    child.once('exit', (c) => reject(new Error(`test_server exited with ${c}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  return {
    url: `${url}/send`,
    async counts() { return (await (await fetch(`${url}/_counts`)).json()).keys; },
    stop() { child.stdin.end(); child.kill(); },
  };
}

// The tool body every driver wraps: POST args with the attempt's headers.
export function sendBody(postJson, job, headers) {
  return postJson(`${job.url}?delay_ms=${job.delayMs || 0}`, job.args, headers, job.timeoutMs || 5000);
}

function spawnWorker(self, dbFile, job) {
  const child = spawn(process.execPath, [self, 'worker', dbFile, j(job)], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { err += d; });
  const done = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal, out, err })));
  const ready = new Promise((resolve) => {
    const poll = setInterval(() => { if (out.includes('READY\n')) { clearInterval(poll); resolve(); } }, 10);
    done.then(() => { clearInterval(poll); resolve(); });
  });
  return { child, done, ready };
}

// a replay of the first call (attempt 1) of key: its words, then the first result
const replayOf = (ledger, tenant, text, first, key) => text === `${say('replay', { tool: TOOL, key, attempt: 1, at: ledger.row(tenant, key)?.updated_at })}\n${first}`;
const firstResult = (text) => { try { return JSON.parse(text).received !== undefined; } catch { return false; } };

export async function main(driver, extras = async () => {}) {
  const self = process.argv[1];
  if (process.argv[2] === 'worker') {
    const ledger = openLedger(process.argv[3]);
    const job = JSON.parse(process.argv[4]);
    process.stdout.write('READY\n');
    if (job.go) await new Promise((r) => process.stdin.once('data', r));
    const seen = await driver.turn({ ...job, ledger });
    process.stdout.write(`${j(seen)}\n`);
    process.exit(0);
  }
  const tally = new Checks(driver.prefix);
  const { report } = tally;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-agents-'));
  const dbFile = path.join(dir, 'agent.db');
  const ledger = openLedger(dbFile);
  const target = await startTarget();
  const base = { url: target.url, tenant: 'tenant-a', conversation: 'conv-1', calls: 1 };
  const ctx = { ledger, dbFile, target, base, report, self, keyOf: (job) => keyOf(ledger, job.tenant, job.conversation, job.args) };
  try {
    // the same call twice: the model re-plans with a new call id
    {
      const job = { ...base, args: { to: 'twice@example.com' }, calls: 2 };
      const seen = await driver.turn({ ...job, ledger });
      const n = (await target.counts())[ctx.keyOf(job)];
      report(n === 1 && firstResult(seen[0]) && replayOf(ledger, job.tenant, seen[1] || '', seen[0], ctx.keyOf(job)), 'twice',
        `the target saw ${n} requests (want 1); the model read ${j(seen)}`);
    }
    // four client processes at once, each waiting while another holds the key
    {
      const job = { ...base, args: { to: 'four@example.com' }, delayMs: 400, waitMs: 8000, go: true };
      const workers = [0, 1, 2, 3].map(() => spawnWorker(self, dbFile, job));
      await Promise.all(workers.map((w) => w.ready));
      for (const w of workers) w.child.stdin.write('GO\n');
      const ends = await Promise.all(workers.map((w) => w.done));
      const seen = ends.map((e) => { try { return JSON.parse(e.out.split('\n').filter(Boolean).pop())[0]; } catch { return `exit ${e.code}: ${e.err.slice(-300)}`; } });
      const firsts = seen.filter(firstResult);
      const n = (await target.counts())[ctx.keyOf(job)];
      report(n === 1 && firsts.length === 1 && seen.filter((t) => replayOf(ledger, job.tenant, t, firsts[0], ctx.keyOf(job))).length === 3, 'four-processes',
        `the target saw ${n} requests (want 1); the four models read ${j(seen)}`);
    }
    // a client-side timeout, then the model calls again (new call id)
    {
      const job = { ...base, args: { to: 'timeout@example.com' }, calls: 2, delayMs: 1200, timeoutMs: 200 };
      const seen = await driver.turn({ ...job, ledger });
      const key = ctx.keyOf(job);
      const n = (await target.counts())[key];
      const row = ledger.row(job.tenant, key);
      report(n === 1 && row?.status === 'unknown' && seen.length === 2 && seen.every((t) => t.includes(UNKNOWN)) &&
        seen[0].includes('timeout') && !seen[1].includes('timeout'), 'timeout-then-retry',
      `the target saw ${n} requests (want 1), the row is ${row?.status}; the model read ${j(seen)}`);
    }
    // a timeout, then the model re-plans and rewords the body: a new key,
    // but the tool names what the email touches, so the second email is
    // not sent and the model reads why (the first one's outcome is unknown)
    {
      const first = { to: 'reword@example.com', invoice: 42, body: 'Your invoice 42 is attached.' };
      const second = { to: 'reword@example.com', invoice: 42, body: 'Please find attached invoice 42.' };
      const job = { ...base, args: first, argsList: [first, second], calls: 2, delayMs: 1200, timeoutMs: 200, targets: true };
      const seen = await driver.turn({ ...job, ledger });
      const k1 = ctx.keyOf(job);
      const k2 = ctx.keyOf({ ...job, args: second });
      const counts = await target.counts();
      const row = ledger.row(job.tenant, k1);
      const want = say('conflict_unknown', { tool: TOOL, key: k2, target: 'mailto:reword@example.com/invoice-42', held_tool: TOOL, held_key: k1, at: row?.updated_at });
      report(k1 !== k2 && counts[k1] === 1 && counts[k2] === undefined && row?.status === 'unknown' && ledger.row(job.tenant, k2) === null &&
        seen.length === 2 && seen[0].includes(UNKNOWN) && seen[1] === want, 'reworded-after-timeout',
      `the target saw ${counts[k1]} first and ${counts[k2]} reworded requests (want 1 and none), the row is ${row?.status}; the model read ${j(seen)}, want second ${j(want)}`);
    }
    // the tool's process killed mid-call, then the call again from another
    {
      const job = { ...base, args: { to: 'killed@example.com' }, delayMs: 3000, timeoutMs: 8000 };
      const key = ctx.keyOf(job);
      const w = spawnWorker(self, dbFile, job);
      for (let i = 0; i < 300 && !(await target.counts())[key]; i++) await sleep(20);
      w.child.kill('SIGKILL');
      const end = await w.done;
      const inFlight = ledger.row(job.tenant, key)?.status;
      await sleep(LEASE_SECONDS * 1000 + 200); // the killed holder's lease runs out
      const seen = await driver.turn({ ...job, ledger, delayMs: 0 });
      const n = (await target.counts())[key];
      report(end.signal === 'SIGKILL' && inFlight === 'claimed' && n === 1 && seen.length === 1 && seen[0].includes(UNKNOWN) &&
        ledger.row(job.tenant, key)?.status === 'unknown', 'killed-then-retry',
      `killed by ${end.signal}, the row was ${inFlight} (want claimed); the target saw ${n} requests (want 1); the retry read ${j(seen)}`);
    }
    // two tenants and two conversations, the same arguments: four calls
    {
      const args = { to: 'shared@example.com' };
      const bad = [];
      const keys = new Set();
      for (const tenant of ['tenant-a', 'tenant-b']) {
        for (const conversation of ['conv-x', 'conv-y']) {
          const job = { ...base, tenant, conversation, args, calls: 2 };
          const seen = await driver.turn({ ...job, ledger });
          keys.add(ctx.keyOf(job));
          if (!(firstResult(seen[0]) && replayOf(ledger, tenant, seen[1] || '', seen[0], ctx.keyOf(job)))) bad.push(`${tenant}/${conversation} read ${j(seen)}`);
        }
      }
      const counts = await target.counts();
      const ns = [...keys].map((k) => counts[k]);
      report(keys.size === 4 && ns.every((n) => n === 1) && bad.length === 0, 'tenants-and-conversations',
        `${keys.size} keys (want 4), the target saw ${j(ns)} (want 1 each); ${bad.join('; ')}`);
    }
    await extras(ctx);
  } catch (e) {
    report(false, 'run', e && e.stack ? e.stack : String(e));
  } finally {
    target.stop();
    ledger.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  process.exit(tally.status());
}

// Type-checked (never run) against the installed package's index.d.ts by
// tests/suites/63-packages.sh: tsc --strict --noEmit must accept this file.
import {
  Ledger, load, getLoadablePath, headerValue, Attempt, Decision, Outcome, LoadableDatabase,
  LedgerError, LeaseLost, NotSent, OutcomeUnknown, ToolFailed, ClaimInProgress, VERSION,
  Json, RawJson, rawJson,
} from 'sqlite-idempotency';

declare const db: LoadableDatabase;

const path: string = getLoadablePath();
load(db);
const ledger: Ledger = Ledger.open(db, { name: 'ledger', busyTimeoutMs: 5000, options: { lease_seconds: 60 } });
const d: Decision = ledger.claim('t', 'c', 'send_email', { to: 'a@b.c', n: [1, 2] }, { effect: 'external' });
switch (d.decision) {
  case 'admitted': {
    const token: string = d.token;
    const until: number = ledger.renew(token, 30);
    const committed: boolean = d.committed;
    ledger.settle(token, 'succeeded', { message_id: 'm-1', until, committed });
    break;
  }
  case 'replay': {
    const idem: true = d.idempotent;
    const status: 'succeeded' | 'failed' = d.status;
    const settledAt: number = d.settled_at;
    console.log(idem, status, settledAt, d.result, d.members.map((m) => m.rowid));
    break;
  }
  case 'in_progress': console.log(d.lease_until); break;
  case 'unknown': console.log(d.message); break;
  case 'mismatch': console.log(d.differs); break;
}

async function send(attempt: Attempt): Promise<{ id: string }> {
  const h: string = attempt.headers['Idempotency-Key'];
  if (h === headerValue(attempt.key)) throw new NotSent('connect: refused', { detail: { host: 'x' } });
  if (attempt.attempt > 1) throw new ToolFailed({ status: 422 });
  if (h.length > 100) throw new OutcomeUnknown('timeout', { detail: { reason: 'timeout' } });
  attempt.renew();
  return { id: 'm-1' };
}

async function main(): Promise<void> {
  try {
    const o: Outcome<{ id: string }> = await ledger.call('t', 'c', 'send_email', {}, send, { waitMs: 1000 });
    const idempotent: boolean = o.idempotent;
    const settledAt: number = o.settled_at;
    const id: string | undefined = o.result?.id;
    console.log(idempotent, settledAt, id, VERSION);
  } catch (e) {
    if (e instanceof LeaseLost || e instanceof LedgerError) console.log(e.code, e.sqliteCode);
    if (e instanceof OutcomeUnknown) console.log(e.key, e.detail, e.decision?.message);
    if (e instanceof ClaimInProgress) console.log(e.decision.lease_until);
  }
  // a 64-bit id: a bigint, or the target's JSON text as it came
  const raw: RawJson = rawJson('{"id": 1234567890123456789}');
  ledger.settle('tok', 'succeeded', { id: 1234567890123456789n, body: raw, list: [raw, 1n] });
  const ob: Outcome = await ledger.call('t', 'c', 'create_order', {}, async () => rawJson('{"id":1}'));
  const ob2: Outcome<{ id: bigint }> = await ledger.call('t', 'c', 'create_order', {}, async () => ({ id: 1n }));
  const bigId: Json | undefined = ob.result;
  const id2: bigint | undefined = ob2.result?.id;
  if (ob.status === 'failed') throw new ToolFailed({ raw, id: 1n });
  console.log(bigId, id2, raw.text);
  const w: Decision = await ledger.wait('t', 'c', 'x', null, { timeoutMs: 100 });
  console.log(w.key, path);
}
void main();

// The cost of Ledger.call from the Node package, seen from outside: the
// same program as tests/python/syncs.py (read its header), with
// better-sqlite3. Usage: node syncs.mjs DIR (run by tests/suites/37-syncs.sh
// under strace, from a project whose node_modules holds the package).
import { createRequire } from 'node:module';
import path from 'node:path';
import process from 'node:process';
import { Ledger, LedgerError } from 'sqlite-idempotency';

const require = createRequire(path.join(process.cwd(), 'package.json'));
const Database = require('better-sqlite3');
let failed = false;
function check(name, ok, why = '') {
  console.log(ok ? `PASS syncs.node.${name}` : `FAIL syncs.node.${name}: ${why}`);
  if (!ok) failed = true;
}
function mark(name) {
  try { process.chdir(`/syncs-mark-${name}`); } catch { /* the marker is the failed chdir */ }
}
const send = async () => ({ sent: true });

const dir = process.argv[2];
for (const [db, options] of [['a', undefined], ['b', { lease_seconds: 1 }]]) {
  const ledger = Ledger.open(new Database(path.join(dir, `${db}.db`)), { options });
  await ledger.call('t1', 'c1', 'warm_up', { i: 0 }, send);
  mark(`${db}-first`);
  const first = await ledger.call('t1', 'c1', 'send_email', { to: 'a@example.com' }, send);
  mark(`${db}-replay`);
  const again = await ledger.call('t1', 'c1', 'send_email', { to: 'a@example.com' }, send);
  mark(`${db}-end`);
  check(`${db}.outcomes`, first.idempotent === false && again.idempotent === true && again.result.sent === true,
    `first ${JSON.stringify(first)}, replay ${JSON.stringify(again)}`);
  if (db === 'a') {
    const holder = new Database(path.join(dir, 'a.db'), { timeout: 0 });
    holder.exec('BEGIN IMMEDIATE');
    ledger.db.pragma('busy_timeout = 0');
    try {
      const r = await ledger.call('t1', 'c1', 'send_email', { to: 'a@example.com' }, send);
      check('replay_beside_writer', r.idempotent === true && r.result.sent === true, JSON.stringify(r));
    } catch (e) {
      check('replay_beside_writer', false, `${e.name}: ${e.message}`);
    }
    try {
      ledger.claim('t1', 'c1', 'send_email', { to: 'b@example.com' });
      check('control_claim_locked', false, 'a new key was claimed while another connection held the write lock');
    } catch (e) {
      check('control_claim_locked', e instanceof LedgerError && e.message === 'idem_claim: database is locked', `${e.name}: ${e.message}`);
    }
    holder.exec('ROLLBACK');
    holder.close();
  }
  ledger.close();
}
process.exit(failed ? 1 : 0);

// Ledger and guard operations wait for another process's write
// transaction, from better-sqlite3 (12, pinned in tests/js/package.json;
// its own SQLite 3.53) inside db.transaction(fn), which sends a plain
// (deferred) BEGIN.
//
// Usage: node test_wait_node.mjs EXTENSION_PATH
//        node test_wait_node.mjs EXTENSION_PATH --hold DATABASE   (the holder)
//
// For each case a holder process (this program run again) takes the write
// lock of the file (BEGIN IMMEDIATE and a marker row holding its pid), says
// so on its stdout, holds it ~300 ms and commits. Meanwhile a fresh
// connection (better-sqlite3's default timeout, 5 s) makes the call as the
// first statement of db.transaction(fn), the first use of the ledger on
// that connection: it must wait and succeed, the holder's row visible when
// it returns; never fail at once with "database is locked". Cases:
// idem_claim, INSERT INTO the ledger, idem_settle, idem_purge, idem_guard,
// idem_unguard and idem_upgrade. Then the documented limit: a transaction
// that read the file first cannot wait, and the claim says to use BEGIN
// IMMEDIATE.
//
// Prints PASS/FAIL lines; exit status 1 when a check failed.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { Checks } from './checks.mjs';

const require = createRequire(import.meta.url);
const Database = require('better-sqlite3');
const SELF = fileURLToPath(import.meta.url);
const READ_FIRST =
  'idem_claim: database is locked, and this transaction cannot wait for it: it read database main ' +
  'before this call, and SQLite does not upgrade a read transaction to a write through the busy ' +
  'handler; begin it with BEGIN IMMEDIATE';

function open(ext, file) {
  const db = new Database(file);
  db.loadExtension(ext);
  return db;
}

if (process.argv[3] === '--hold') {
  // the holder: the write lock for ~300 ms after saying "1"
  const db = new Database(process.argv[4]);
  db.exec('BEGIN IMMEDIATE');
  db.prepare('INSERT INTO marker VALUES (?)').run(process.pid);
  process.stdout.write('1\n');
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 300);
  db.exec('COMMIT');
  db.close();
  process.exit(0);
}

const ext = path.resolve(process.argv[2] || '');
if (!process.argv[2]) {
  console.error('usage: node test_wait_node.mjs EXTENSION_PATH');
  process.exit(2);
}
const checks = new Checks('wait.node');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-wait-'));
const file = path.join(tmp, 'wait.db');

// Run fn(db) inside db.transaction on a fresh connection while a holder
// holds the lock; wantError: the exact message it must fail with instead.
async function waitCase(name, fn, wantError) {
  const db = open(ext, file);
  const holder = spawn(process.execPath, [SELF, ext, '--hold', file], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise((resolve) => holder.on('exit', resolve));
  const ready = await new Promise((resolve) => {
    holder.stdout.once('data', (d) => resolve(String(d).trim() === '1'));
    holder.on('exit', () => resolve(false));
  });
  try {
    if (!ready) {
      checks.report(false, name, 'the holder could not take the write lock');
      return;
    }
    let err = null;
    let seen = -1;
    try {
      db.transaction(() => {
        fn(db);
        // the holder's row is visible before it is waited for: the call
        // completed after its commit
        seen = db.prepare('SELECT count(*) AS n FROM marker WHERE x = ?').get(holder.pid).n;
      })();
    } catch (e) {
      err = e;
    }
    if (wantError !== undefined) {
      checks.report(err && err.message === wantError, name, `got ${err ? err.message : 'no error'}, want ${wantError}`);
    } else if (err) {
      checks.report(false, name, `${err.code}: ${err.message}`);
    } else {
      checks.report(seen === 1, name, 'it completed before the other process committed');
    }
  } finally {
    if (db.inTransaction) db.exec('ROLLBACK');
    db.close();
    await exited;
  }
}

function expect(got, want, what) {
  if (got !== want) throw new Error(`${what}: got ${got}, want ${want}`);
}

{
  const db = open(ext, file);
  db.pragma('journal_mode = WAL');
  db.exec(`CREATE TABLE marker(x);
           CREATE VIRTUAL TABLE L USING idempotency;
           CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key);`);
  db.close();
}
const claimToken = (n) => {
  const db = open(ext, file);
  const t = db.prepare("SELECT json_extract(idem_claim('L', 't', 'c', 'x', ?), '$.token') AS t").get(`{"n":${n}}`).t;
  db.close();
  return t;
};

await waitCase('claim', (db) => {
  const r = db.prepare("SELECT json_extract(idem_claim('L', 't', 'c', 'x', '{\"n\":1}'), '$.decision') AS d").get();
  expect(r.d, 'admitted', 'decision');
});
await waitCase('insert', (db) => {
  const r = db.prepare("INSERT INTO L(tenant, conversation, tool, args) VALUES ('t', 'c', 'x', '{\"n\":2}')").run();
  expect(r.changes, 1, 'changes');
});
const token = claimToken(3);
await waitCase('settle', (db) => {
  const r = db.prepare("SELECT json_extract(idem_settle('L', ?, 'succeeded', '{}'), '$.status') AS s").get(token);
  expect(r.s, 'succeeded', 'status');
});
await waitCase('purge', (db) => {
  const r = db.prepare("SELECT typeof(idem_purge('L', 0)) AS t").get();
  expect(r.t, 'integer', 'purge');
});
await waitCase('guard', (db) => {
  const r = db.prepare("SELECT idem_guard('L', 'orders', 'op_key', 'tenant') AS g").get();
  expect(r.g, 1, 'guard');
});
await waitCase('unguard', (db) => {
  const r = db.prepare("SELECT idem_unguard('L', 'orders') AS g").get();
  expect(r.g, 1, 'unguard');
});
await waitCase('upgrade', (db) => {
  const r = db.prepare("SELECT json_extract(idem_upgrade('L'), '$.ledger') AS l").get();
  expect(r.l, 'L', 'upgrade');
});
await waitCase(
  'read-first-refused',
  (db) => {
    db.prepare('SELECT count(*) FROM marker').get();
    db.prepare("SELECT idem_claim('L', 't', 'c', 'x', '{\"n\":4}')").get();
  },
  READ_FIRST,
);
const db = new Database(':memory:');
console.log(`   wait.node: node ${process.version}, SQLite ${db.prepare('SELECT sqlite_version() AS v').get().v}`);
db.close();
fs.rmSync(tmp, { recursive: true, force: true });
process.exit(checks.status());

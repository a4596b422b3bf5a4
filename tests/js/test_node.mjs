// The extension from Node's better-sqlite3 (version 12, pinned in
// tests/js/package.json; it bundles its own SQLite), or from the npm
// package libsql (libSQL's prebuilt binary, its own SQLite fork, with the
// same API).
//
// Usage: node test_node.mjs EXTENSION_PATH [better-sqlite3|libsql]
//
// On a database file in a temporary directory: load the extension, create a
// ledger, claim (admitted, with a token), settle succeeded, claim again
// (replay, "idempotent": true, the recorded result), a NULL and a blank
// tenant refused as a SqliteError with code SQLITE_CONSTRAINT carrying the
// extension's exact message with nothing written, and the SQL-native claim
// (INSERT INTO ledger, idem_last_claim, a taken key refused).
//
// A claim inside BEGIN IMMEDIATE ... COMMIT (the way a libSQL replica
// routes a claim to its primary) is admitted uncommitted and lands with the
// COMMIT.
//
// Prints one line per check: PASS <name> / FAIL <name>: <why>, and one
// non-check line with the Node, driver and SQLite versions.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const DRIVER = process.argv[3] || 'better-sqlite3';
if (DRIVER !== 'better-sqlite3' && DRIVER !== 'libsql') {
  console.error(`test_node.mjs: driver must be better-sqlite3 or libsql, got ${DRIVER}`);
  process.exit(2);
}
const Database = require(DRIVER);
const PREFIX = DRIVER === 'libsql' ? 'bindings.libsql' : 'bindings.node';
let failures = 0;

function report(ok, name, why = '') {
  if (ok) {
    console.log(`PASS ${PREFIX}:${name}`);
  } else {
    failures++;
    console.log(`FAIL ${PREFIX}:${name}: ${String(why).replace(/\n/g, ' ')}`);
  }
}

// col0: the first column of a row from .pluck().get(): better-sqlite3
// returns the value itself, libsql ignores pluck() in get() and returns the
// row object (with its own _metadata member after the columns).
function col0(row) {
  return row !== null && typeof row === 'object' && !Buffer.isBuffer(row) ? row[Object.keys(row)[0]] : row;
}

function one(db, sql, ...args) {
  return col0(db.prepare(sql).pluck().get(...args));
}

function expectError(name, fn, message, code = 'SQLITE_CONSTRAINT') {
  let got;
  try {
    got = fn();
  } catch (e) {
    if (!(e instanceof Database.SqliteError)) {
      report(false, name, `threw ${e && e.constructor && e.constructor.name} (${e}), want SqliteError`);
    } else if (e.message !== message) {
      report(false, name, `message ${JSON.stringify(e.message)}, want ${JSON.stringify(message)}`);
    } else if (e.code !== code) {
      report(false, name, `code ${e.code}, want ${code}`);
    } else {
      report(true, name);
    }
    return;
  }
  report(false, name, `no error; returned ${JSON.stringify(got)}`);
}

function run(ext, file) {
  // libsql's "exports" hide package.json: read the file beside this test
  const pkg = JSON.parse(fs.readFileSync(new URL(`./node_modules/${DRIVER}/package.json`, import.meta.url), 'utf8'));
  const db = new Database(file);
  console.log(`   ${PREFIX}: Node ${process.version}, ${DRIVER} ${pkg.version} with its bundled SQLite ${one(db, 'SELECT sqlite_version()')}`);
  try {
    db.loadExtension(ext);
    const version = one(db, 'SELECT idem_version()');
    report(typeof version === 'string' && version !== '', 'load', `idem_version() = ${version}`);
  } catch (e) {
    report(false, 'load', `${e.name}: ${e.message}`);
    return;
  }
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('busy_timeout = 10000');
  db.exec('CREATE VIRTUAL TABLE ledger USING idempotency');

  // Prepared per call: libsql 0.5.29 does not reset a statement that
  // raised, so its next run fails again with the old error.
  const claim = { get: (...a) => one(db, "SELECT idem_claim('ledger', ?, ?, ?, ?)", ...a) };
  const args = JSON.stringify({ to: 'a@example.com', subject: 'hi' });
  const d = JSON.parse(claim.get('tenant-a', 'conv-1', 'send_email', args));
  report(d.decision === 'admitted' && /^[0-9a-f]{32}$/.test(d.token || '') && d.committed === true &&
         d.attempt === 1 && /^idem1-[0-9a-f]{32}$/.test(d.key || ''),
         'claim-admitted', `got ${JSON.stringify(d)}`);

  const result = { message_id: 'm-17' };
  const s = JSON.parse(one(db, "SELECT idem_settle('ledger', ?, 'succeeded', ?)", d.token, JSON.stringify(result)));
  report(s.status === 'succeeded' && s.key === d.key, 'settle-succeeded', `got ${JSON.stringify(s)}`);

  const args2 = JSON.stringify({ subject: 'hi', to: 'a@example.com' });
  const r = JSON.parse(claim.get('tenant-a', 'conv-1', 'send_email', args2));
  report(r.decision === 'replay' && r.idempotent === true && r.key === d.key && !('token' in r) &&
         JSON.stringify(r.result) === JSON.stringify(result),
         'claim-replay', `got ${JSON.stringify(r)}`);

  const before = one(db, 'SELECT count(*) FROM ledger');
  expectError('refused-null-tenant', () => claim.get(null, 'conv-1', 'send_email', args),
              'idem_claim: tenant is missing (NULL)');
  expectError('refused-blank-tenant', () => claim.get('', 'conv-1', 'send_email', args),
              'idem_claim: tenant is empty');
  expectError('refused-space-tenant', () => claim.get(' ', 'conv-1', 'send_email', args),
              'idem_claim: tenant " " has byte 0x20 at offset 0; only A-Z a-z 0-9 _ - are allowed');
  const after = one(db, 'SELECT count(*) FROM ledger');
  report(before === 1 && after === 1, 'refused-wrote-nothing', `rows before ${before}, after ${after}`);

  const ins = db.prepare('INSERT INTO ledger(tenant, conversation, tool, args) VALUES (?, ?, ?, ?)');
  ins.run('tenant-a', 'conv-1', 'migrate', '{"step":3}');
  const raw = one(db, "SELECT idem_last_claim('ledger')");
  const lc = raw ? JSON.parse(raw) : null;
  const wantKey = one(db, "SELECT idem_key('tenant-a', 'conv-1', 'migrate', '{\"step\":3}')");
  report(lc && lc.tenant === 'tenant-a' && lc.key === wantKey && /^[0-9a-f]{32}$/.test(lc.token || '') &&
         lc.committed === true, 'insert-last-claim', `got ${raw}`);
  try {
    ins.run('tenant-a', 'conv-1', 'migrate', '{"step":3}');
    report(false, 'insert-taken-refused', 'a second INSERT of the same key succeeded');
  } catch (e) {
    report(e instanceof Database.SqliteError && e.code === 'SQLITE_CONSTRAINT' &&
           e.message.startsWith(`idempotency: key "${wantKey}" of tenant "tenant-a" in ledger ledger is taken`) &&
           one(db, "SELECT idem_last_claim('ledger')") === null,
           'insert-taken-refused', `${e.code}: ${e.message}`);
  }
  const info = db.prepare('INSERT OR IGNORE INTO ledger(tenant, conversation, tool, args) VALUES (?, ?, ?, ?)')
    .run('tenant-a', 'conv-1', 'migrate', '{"step":3}');
  report(info.changes === 0 && one(db, 'SELECT count(*) FROM ledger') === 2,
         'insert-or-ignore-skips', `changes ${info.changes}`);

  db.exec('BEGIN IMMEDIATE');
  const t = JSON.parse(claim.get('tenant-a', 'conv-1', 'send_email', JSON.stringify({ to: 'b@example.com' })));
  db.exec('COMMIT');
  const landed = one(db, 'SELECT token FROM ledger WHERE tenant = ? AND key = ?', 'tenant-a', t.key || '');
  report(t.decision === 'admitted' && t.committed === false && landed === t.token,
         'claim-in-write-transaction', `got ${JSON.stringify(t)}, row token after COMMIT ${landed}`);
  const sqliteVersion = one(db, 'SELECT sqlite_version()');
  db.close();

  // A new connection on the existing file, loading the extension before the
  // schema is read. better-sqlite3 turns SQLITE_DBCONFIG_DEFENSIVE on for
  // every connection; unsafeMode(true) turns it off (libsql has the same
  // method).
  // libsql 0.5.29's unsafeMode() throws "not implemented": it reopens once,
  // with its defaults.
  const reopens = DRIVER === 'libsql' ? [['reopen', false]] : [['reopen-defensive', false], ['reopen-defensive-off', true]];
  for (const [name, unsafe] of reopens) {
    let db2;
    try {
      db2 = new Database(file);
      if (unsafe) db2.unsafeMode(true);
      db2.loadExtension(ext);
      const r2 = JSON.parse(one(db2, "SELECT idem_claim('ledger', ?, ?, ?, ?)", 'tenant-a', 'conv-1', 'send_email', args));
      report(r2.decision === 'replay' && JSON.stringify(r2.result) === JSON.stringify(result), name, `got ${JSON.stringify(r2)}`);
    } catch (e) {
      report(false, name, `${e.code}: ${e.message} (a fresh connection${unsafe ? ' in unsafe mode' : ` with ${DRIVER} defaults${DRIVER === 'better-sqlite3' ? ', defensive on' : ''}`}, ` +
             `extension loaded before the schema was read, SQLite ${sqliteVersion})`);
    } finally {
      if (db2) db2.close();
    }
  }
}

// The hole of the first format on a defensive connection with the
// extension loaded (SQLite 3.44+ does not declare the rows table a shadow
// table there): "reset stuck rows" by plain SQL must not release a live
// external claim. Format 4's triggers refuse every plain write.
function defensiveHoles(ext, file) {
  const db = new Database(file);
  try {
    db.loadExtension(ext);
    const c = JSON.parse(one(db, "SELECT idem_claim('ledger', 't', 'c', 'send', '{}', 'external', 'hole-ext')"));
    report(c.decision === 'admitted', 'defensive-hole-claim', `got ${JSON.stringify(c)}`);
    try {
      db.prepare("UPDATE ledger_rows SET status = 'released' WHERE status = 'claimed'").run();
      report(false, 'defensive-reset-stuck-refused', 'the UPDATE released live claims');
    } catch (e) {
      report(e instanceof Database.SqliteError && e.code === 'SQLITE_CONSTRAINT_TRIGGER' &&
             e.message.startsWith('idempotency: the rows of ledger ledger are written only by the extension'),
             'defensive-reset-stuck-refused', `${e.code}: ${e.message}`);
    }
    try {
      db.prepare("REPLACE INTO ledger_rows(tenant, \"key\", conversation, tool, args, effect, status, attempt, token, created_at, updated_at, lease_until) VALUES ('t', 'hole-ext', 'c', 'x', '{}', 'external', 'claimed', 1, random(), 0, 0, 0)").run();
      report(false, 'defensive-replace-refused', 'the REPLACE erased the live claim');
    } catch (e) {
      report(e instanceof Database.SqliteError && e.code === 'SQLITE_CONSTRAINT_TRIGGER' &&
             e.message.startsWith('idempotency: the rows of ledger ledger are written only by the extension'),
             'defensive-replace-refused', `${e.code}: ${e.message}`);
    }
    const again = JSON.parse(one(db, "SELECT idem_claim('ledger', 't', 'c', 'send', '{}', 'external', 'hole-ext')"));
    report(again.decision === 'in_progress', 'defensive-live-claim-kept', `got ${JSON.stringify(again)}`);
  } catch (e) {
    report(false, 'defensive-holes', `${e.code}: ${e.message}`);
  } finally {
    db.close();
  }
}

if (process.argv.length < 3 || process.argv.length > 4) {
  console.error('usage: node test_node.mjs EXTENSION_PATH [better-sqlite3|libsql]');
  process.exit(2);
}
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'idem-node-'));
try {
  run(path.resolve(process.argv[2]), path.join(tmp, 'ledger.db'));
  defensiveHoles(path.resolve(process.argv[2]), path.join(tmp, 'ledger.db'));
} catch (e) {
  report(false, 'unexpected', e && e.stack ? e.stack : e);
} finally {
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.exit(failures ? 1 : 0);

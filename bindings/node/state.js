'use strict';
// The ledger's own state, as the extension reports it: what the operator's
// command and the metrics show. readState(db, file, name) is the answer of
// the extension's idem_health(name) (docs/reference.md): the format, the
// problems that make the ledger broken (its refusal of operations, in its
// own words), its tables, its own and its guards' triggers by name, the options, the
// rows by effective status and tool, the live and expired claims and the
// oldest unknown row. Nothing here restates a rule of the ledger: the
// command only adds the file name and the age of the oldest unknown. The
// same code as the Python package's state.py (both print the same bytes).
// Works on a better-sqlite3 (or libsql) connection.
const fs = require('node:fs');
const path = require('node:path');

const STATUSES = ['claimed', 'unknown', 'succeeded', 'failed', 'released'];
// Unix ms from the statement's clock, exactly (julianday would round).
const NOW_SQL = "CAST(strftime('%s', 'now') AS INTEGER) * 1000 + CAST(substr(strftime('%f', 'now'), 4) AS INTEGER)";
const USING = /\busing\s+idempotency\b/i;
const NOW_ENV = 'SQLITE_IDEMPOTENCY_NOW_MS';

// An error of the command: its message, and the exit status (2: broken or
// failed; 64: usage).
class CommandError extends Error {
  constructor(message, status = 2) {
    super(message);
    this.status = status;
  }
}

const q = (name) => `"${String(name).replace(/"/g, '""')}"`;
const plural = (n, word) => `${n} ${word}${n === 1 ? '' : 's'}`;

function driver() {
  try {
    return require('better-sqlite3');
  } catch (e) {
    throw new CommandError(`sqlite-idempotency: the command needs better-sqlite3 (npm install better-sqlite3): ${e.message.split('\n')[0]}`);
  }
}

// The database file, read-only unless write; the extension loaded. Never
// creates a file.
function openFile(file, write = false) {
  const { load } = require('./index.js');
  if (!fs.existsSync(file)) throw new CommandError(`sqlite-idempotency: no such file: ${file}`);
  if (fs.statSync(file).isDirectory()) throw new CommandError(`sqlite-idempotency: ${file} is a directory, not a database file`);
  const Database = driver();
  let db;
  try {
    db = new Database(path.resolve(file), { readonly: !write, fileMustExist: true });
    db.pragma('busy_timeout = 5000');
    db.prepare('SELECT count(*) FROM sqlite_schema').get();
  } catch (e) {
    if (db) db.close();
    if (/not a database/.test(e.message)) throw new CommandError(`sqlite-idempotency: ${file} is not a SQLite database (${e.message})`);
    throw new CommandError(`sqlite-idempotency: cannot open ${file}: ${e.message}`);
  }
  load(db);
  return db;
}

// The ledgers (tables USING idempotency) of the main schema, by name.
function ledgers(db) {
  const rows = db.prepare("SELECT name, sql FROM main.sqlite_schema WHERE type = 'table' AND sql IS NOT NULL ORDER BY name").raw().all();
  return rows.filter(([, sql]) => sql.toUpperCase().startsWith('CREATE VIRTUAL TABLE') && USING.test(sql)).map(([n]) => n);
}

// The ledger --ledger names, or the only ledger of the file.
function pick(db, file, name) {
  const have = ledgers(db);
  if (name !== undefined) {
    if (!have.includes(name)) {
      const its = have.length ? `its ledgers: ${have.join(', ')}` : 'it has none';
      throw new CommandError(`sqlite-idempotency: ${file} has no ledger "${name}" (${its})`);
    }
    return name;
  }
  if (!have.length) throw new CommandError(`sqlite-idempotency: ${file} has no ledger (no table USING idempotency)`);
  if (have.length > 1) throw new CommandError(`sqlite-idempotency: ${file} has ${have.length} ledgers (${have.join(', ')}): choose one with --ledger NAME`);
  return have[0];
}

// null when the ledger answers a read, else its error message (it refuses
// every operation then).
function probe(db, name) {
  try {
    db.prepare(`SELECT count(*) FROM ${q(name)} WHERE status = 'unknown'`).get();
    return null;
  } catch (e) {
    return e.message;
  }
}

const nowMs = (db) => Number(db.prepare(`SELECT ${NOW_SQL}`).pluck().get());

// The time ages are measured from: $SQLITE_IDEMPOTENCY_NOW_MS, else the
// database's clock.
function ageNow(connNow) {
  const v = process.env[NOW_ENV];
  if (v === undefined || v === '') return connNow;
  if (!/^[0-9]{1,15}$/.test(v)) throw new CommandError(`sqlite-idempotency: ${NOW_ENV} must be Unix milliseconds (digits), got "${v}"`, 64);
  return Number(v);
}

// idem_health(name) with the file's name first, and the oldest unknown's
// age instead of "now". When the extension cannot answer for the ledger at
// all (a format this build does not read, options out of range), its error
// is the one problem.
function readState(db, file, name) {
  let health;
  try {
    health = JSON.parse(db.prepare('SELECT idem_health(?)').pluck().get(name));
  } catch (e) {
    if (e instanceof SyntaxError) throw e;
    health = {
      ledger: name, schema: null, format: null, verdict: 'broken', problems: [e.message], attention: [], tables: [], triggers: [], guards: [], options: null, now: null, live_claims: 0, unknown: 0, expired_claims: 0, oldest_unknown: null, counts: [],
    };
  }
  // the ledger's clock decided what is expired; ages are measured from
  // $SQLITE_IDEMPOTENCY_NOW_MS when it is set, so the ledger's own time is
  // not shown
  const { now, ...rest } = health;
  const o = rest.oldest_unknown;
  if (o !== null) o.age_seconds = Math.max(0, Math.floor((ageNow(now) - o.created_at) / 1000));
  return { file, ...rest };
}

const exitStatus = (st) => ({ healthy: 0, 'needs attention': 1 }[st.verdict] ?? 2);

module.exports = {
  STATUSES, NOW_SQL, NOW_ENV, CommandError, q, plural, openFile, ledgers, pick, probe, nowMs, ageNow, readState,
  exitStatus,
};

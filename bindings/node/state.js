'use strict';
// The ledger's own state, read with SQL: what the operator's command and the
// metrics show. The same code as the Python package's state.py (both print
// the same bytes): open rows (claimed, unknown) are read through the ledger,
// whose status column is the effective status (an external claim whose
// lease ran out reads unknown); settled rows are counted on <name>_rows.
// When the ledger refuses reads (a dropped trigger, say), everything is read
// from <name>_rows and an expired external claim is counted unknown by the
// same rule. Works on a better-sqlite3 (or libsql) connection.
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

function meta(db, name) {
  try {
    return db.prepare(`SELECT k, v FROM ${q(`${name}_meta`)} ORDER BY k`).raw().all();
  } catch {
    return [];
  }
}

// The effective status of a row of <name>_rows, for a ledger that refuses reads.
const effectiveSql = (now) => `CASE WHEN status = 'claimed' AND lease_until <= ${Math.trunc(now)} AND effect = 'external' THEN 'unknown' ELSE status END`;

// Each guarded table and whether its insert and update triggers are in place.
function guards(db, name) {
  let rows;
  try {
    rows = db.prepare(`SELECT tbl, key_column, tenant_column, token_column FROM ${q(`${name}_guards`)} ORDER BY id`).raw().all();
  } catch {
    return [];
  }
  return rows.map(([tbl, keyCol, tenCol, tokCol]) => {
    const names = db.prepare("SELECT name FROM main.sqlite_schema WHERE type = 'trigger' AND tbl_name = ? COLLATE NOCASE ORDER BY name").pluck().all(tbl);
    const missing = ['insert', 'update'].filter((w) => !names.some((n) => n.endsWith(`_idem_${name}_${w}`)));
    return { table: tbl, key_column: keyCol, tenant_column: tenCol, token_column: tokCol, missing };
  });
}

function guardProblem(name, g) {
  const cols = [g.key_column, g.tenant_column, g.token_column].filter((c) => c !== null).map((c) => `'${c}'`).join(', ');
  return `guard of table ${g.table} is missing its ${g.missing.join(' and ')} trigger${g.missing.length > 1 ? 's' : ''}: writes to ${g.table} are not checked against claims; restore it with SELECT idem_unguard('${name}', '${g.table}'); SELECT idem_guard('${name}', '${g.table}', ${cols})`;
}

function readState(db, file, name) {
  const now = nowMs(db);
  const ages = ageNow(now);
  const m = meta(db, name);
  const fmtRow = m.find(([k]) => k === 'format');
  const fmt = fmtRow === undefined ? null : fmtRow[1];
  const refused = probe(db, name);
  const problems = [];
  if (refused !== null) problems.push(refused);
  const gs = guards(db, name);
  for (const g of gs) if (g.missing.length) problems.push(guardProblem(name, g));
  const counts = new Map();
  let oldest = null;
  let openClaims = 0;
  let expired = 0;
  const rowsTable = q(`${name}_rows`);
  let readFrom = refused === null ? name : `${name}_rows`;
  try {
    let r;
    if (refused === null) {
      for (const st of ['claimed', 'unknown']) {
        for (const [tool, n] of db.prepare(`SELECT tool, count(*) FROM ${q(name)} WHERE status = ? GROUP BY tool`).raw().all(st)) {
          counts.set(`${st}\0${tool}`, n);
        }
      }
      for (const [st, tool, n] of db.prepare(`SELECT status, tool, count(*) FROM ${rowsTable} WHERE status IN ('succeeded', 'failed', 'released') GROUP BY status, tool`).raw().all()) {
        counts.set(`${st}\0${tool}`, n);
      }
      openClaims = db.prepare(`SELECT count(*) FROM ${q(name)} WHERE status = 'claimed' AND lease_until > ?`).pluck().get(now);
      r = db.prepare(`SELECT tenant, key, tool, created_at FROM ${q(name)} WHERE status = 'unknown' ORDER BY created_at, rowid LIMIT 1`).raw().get();
    } else {
      const eff = effectiveSql(now);
      for (const [st, tool, n] of db.prepare(`SELECT ${eff}, tool, count(*) FROM ${rowsTable} GROUP BY 1, 2`).raw().all()) {
        counts.set(`${st}\0${tool}`, n);
      }
      openClaims = db.prepare(`SELECT count(*) FROM ${rowsTable} WHERE status = 'claimed' AND lease_until > ?`).pluck().get(now);
      r = db.prepare(`SELECT tenant, key, tool, created_at FROM ${rowsTable} WHERE ${eff} = 'unknown' ORDER BY created_at, id LIMIT 1`).raw().get();
    }
    expired = db.prepare(`SELECT count(*) FROM ${rowsTable} WHERE status = 'claimed' AND lease_until <= ?`).pluck().get(now);
    if (r !== undefined) {
      oldest = { tenant: r[0], key: r[1], tool: r[2], created_at: r[3], age_seconds: Math.max(0, Math.floor((ages - r[3]) / 1000)) };
    }
  } catch (e) {
    readFrom = null;
    problems.push(`${name}_rows cannot be read: ${e.message}`);
  }
  let unknown = 0;
  for (const [k, n] of counts) if (k.startsWith('unknown\0')) unknown += n;
  const attention = [];
  if (unknown) attention.push(`${plural(unknown, 'unknown row')}: reconcile with the targets, then resolve`);
  if (expired) attention.push(`${plural(expired, 'expired claim')}: their holders stopped before settling`);
  const order = (s) => { const i = STATUSES.indexOf(s); return i < 0 ? 9 : i; };
  const list = [...counts].map(([k, n]) => { const [status, tool] = k.split('\0'); return { status, tool, rows: n }; });
  list.sort((a, b) => order(a.status) - order(b.status) || (a.tool < b.tool ? -1 : a.tool > b.tool ? 1 : 0));
  const options = {};
  for (const [k, v] of m) if (k !== 'format' && k !== 'id') options[k] = v;
  return {
    file,
    ledger: name,
    format: fmt,
    verdict: problems.length ? 'broken' : attention.length ? 'needs attention' : 'healthy',
    problems,
    attention,
    read_from: readFrom,
    options,
    guards: gs.map((g) => ({ table: g.table, missing: g.missing })),
    open_claims: openClaims,
    unknown,
    expired_claims: expired,
    oldest_unknown: oldest,
    counts: list,
  };
}

const exitStatus = (st) => ({ healthy: 0, 'needs attention': 1 }[st.verdict] ?? 2);

module.exports = {
  STATUSES, NOW_SQL, NOW_ENV, CommandError, q, plural, openFile, ledgers, pick, probe, nowMs, ageNow, meta,
  effectiveSql, guards, readState, exitStatus,
};

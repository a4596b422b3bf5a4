#!/usr/bin/env node
'use strict';
// sqlite-idempotency: the operator's command (docs/operating.md).
//
//   npx sqlite-idempotency status agent.db
//   npx sqlite-idempotency list agent.db --status unknown --older-than 1h
//
// The Python package's cli.py is the same command: the same subcommands,
// options, output bytes and exit statuses (0 healthy, 1 needs attention,
// 2 broken or failed, 64 usage error). Every subcommand that only reads
// opens the file read-only. Needs better-sqlite3 beside this package.
const {
  STATUSES, CommandError, q, plural, openFile, pick, probe, nowMs, ageNow, readState, exitStatus,
} = require('./state.js');

const USAGE = `usage: sqlite-idempotency COMMAND FILE [ARGUMENTS] [--ledger NAME] [--json]

commands:
  status FILE          counts by status and tool, the oldest unknown, expired claims, health
  list FILE            rows: --status S (open, all, claimed, unknown, succeeded, failed,
                       released; default open), --tool T, --tenant T, --target T,
                       --older-than AGE, --text T (the key, or text in the arguments),
                       --limit N (default 100)
  show FILE KEY        one row and its targets (--tenant T when several tenants hold the key)
  resolve FILE KEY STATUS [--detail JSON] [--tenant T]
                       settles an unknown row: succeeded, failed or released
  resolve FILE --all STATUS [--tool T] [--tenant T] [--older-than AGE] [--detail JSON] [--dry-run]
                       settles every unknown row that matches, in one transaction
  purge FILE --older-than AGE
                       deletes settled rows not updated for AGE (ends their deduplication)
  check FILE           format, own and guard triggers, options, refusal, integrity_check, rows
  metrics FILE         the ledger's state in the Prometheus text format
  serve FILE [--port N] [--host H] [--token T]
                       a read-only page of the above on http://127.0.0.1:PORT/ (--port 0: any
                       free port); another --host needs --token, a bearer token

--ledger NAME picks the ledger when the file has several; --json prints JSON.
AGE is seconds, or a number and s, m, h or d (90s, 15m, 2h, 7d).
exit status: 0 healthy or done, 1 needs attention, 2 broken or failed, 64 usage error.
`;

// command: [positional arguments, options that take a value]
const COMMANDS = {
  status: [['FILE'], []],
  list: [['FILE'], ['--status', '--tool', '--tenant', '--target', '--older-than', '--text', '--limit']],
  show: [['FILE', 'KEY'], ['--tenant']],
  resolve: [['FILE', 'KEY', 'STATUS'], ['--detail', '--tenant', '--all', '--tool', '--older-than']],
  purge: [['FILE'], ['--older-than']],
  check: [['FILE'], []],
  metrics: [['FILE'], []],
  serve: [['FILE'], ['--port', '--host', '--token']],
};
// options that take no value, by command
const FLAGS = { resolve: ['--dry-run'] };
const AGE = /^([0-9]{1,12})([smhd]?)$/;
const UNIT = { '': 1, s: 1, m: 60, h: 3600, d: 86400 };
const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);

// The command line, or CommandError(64) saying what is wrong with it.
function parse(argv) {
  let command;
  const pos = [];
  const opts = {};
  let json = false;
  for (let i = 0; i < argv.length;) {
    const a = argv[i++];
    if (a === '--') {
      pos.push(...argv.slice(i));
      break;
    }
    if (a.startsWith('--') && a.length > 2) {
      const eqAt = a.indexOf('=');
      const name = eqAt < 0 ? a : a.slice(0, eqAt);
      let value = eqAt < 0 ? undefined : a.slice(eqAt + 1);
      if (name === '--json') {
        if (eqAt >= 0) throw new CommandError('sqlite-idempotency: --json takes no value', 64);
        json = true;
        continue;
      }
      if (has(FLAGS, command) && FLAGS[command].includes(name)) {
        if (eqAt >= 0) throw new CommandError(`sqlite-idempotency: ${name} takes no value`, 64);
        if (has(opts, name)) throw new CommandError(`sqlite-idempotency: option ${name} is given twice`, 64);
        opts[name] = '';
        continue;
      }
      const allowed = ['--ledger', ...(has(COMMANDS, command) ? COMMANDS[command][1] : [])];
      if (!allowed.includes(name)) {
        throw new CommandError(`sqlite-idempotency: unknown option ${name}${has(COMMANDS, command) ? ` for ${command}` : ''} (see --help)`, 64);
      }
      if (value === undefined) {
        if (i >= argv.length) throw new CommandError(`sqlite-idempotency: option ${name} needs a value`, 64);
        value = argv[i++];
      }
      if (has(opts, name)) throw new CommandError(`sqlite-idempotency: option ${name} is given twice`, 64);
      opts[name] = value;
      continue;
    }
    if (a.startsWith('-') && a !== '-') throw new CommandError(`sqlite-idempotency: unknown option ${a} (see --help)`, 64);
    if (command === undefined) {
      if (!has(COMMANDS, a)) throw new CommandError(`sqlite-idempotency: unknown command "${a}"; the commands are ${Object.keys(COMMANDS).join(', ')}`, 64);
      command = a;
    } else {
      pos.push(a);
    }
  }
  if (command === undefined) throw new CommandError('sqlite-idempotency: no command given (see --help)', 64);
  let need = COMMANDS[command][0];
  if (command === 'resolve' && has(opts, '--all')) {
    need = ['FILE'];
  } else if (command === 'resolve') {
    for (const name of ['--tool', '--older-than', '--dry-run']) {
      if (has(opts, name)) throw new CommandError(`sqlite-idempotency: ${name} applies to resolve --all only`, 64);
    }
  }
  if (pos.length < need.length) throw new CommandError(`sqlite-idempotency: ${command} needs ${need.join(' ')}`, 64);
  if (pos.length > need.length) throw new CommandError(`sqlite-idempotency: ${command} takes ${need.join(' ')}; unexpected argument "${pos[need.length]}"`, 64);
  if (command === 'metrics' && json) throw new CommandError('sqlite-idempotency: metrics prints the Prometheus text format; --json does not apply', 64);
  if (command === 'serve' && json) throw new CommandError('sqlite-idempotency: serve answers JSON on its own endpoints; --json does not apply', 64);
  if (command === 'purge' && !has(opts, '--older-than')) throw new CommandError('sqlite-idempotency: purge needs --older-than AGE', 64);
  return { command, pos, opts, json };
}

function ageSeconds(text, option) {
  const m = AGE.exec(text);
  if (!m) throw new CommandError(`sqlite-idempotency: ${option} must be seconds or a number and s, m, h or d (90s, 15m, 2h, 7d), got "${text}"`, 64);
  return Number(m[1]) * UNIT[m[2]];
}

// --- output -----------------------------------------------------------------------

// JSON text put into the output as it is (the ledger's canonical JSON, digits and all).
class Raw {
  constructor(text) {
    this.text = text;
  }
}

const ESC = { '\n': '\\n', '\r': '\\r', '\t': '\\t', '\b': '\\b', '\f': '\\f' };
function jstr(s) {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === '"') out += '\\"';
    else if (ch === '\\') out += '\\\\';
    else if (c < 0x20) out += ESC[ch] || `\\u${c.toString(16).padStart(4, '0')}`;
    else out += ch;
  }
  return `${out}"`;
}

// JSON with two-space indentation, as the Python command writes it.
function jdump(v, ind = '') {
  if (v === null || v === undefined) return 'null';
  if (v === true) return 'true';
  if (v === false) return 'false';
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (typeof v === 'string') return jstr(v);
  if (v instanceof Raw) return v.text === null || v.text === undefined ? 'null' : v.text;
  const inner = `${ind}  `;
  if (Array.isArray(v)) {
    if (!v.length) return '[]';
    return `[\n${v.map((x) => inner + jdump(x, inner)).join(',\n')}\n${ind}]`;
  }
  const keys = Object.keys(v);
  if (!keys.length) return '{}';
  return `{\n${keys.map((k) => `${inner}${jstr(k)}: ${jdump(v[k], inner)}`).join(',\n')}\n${ind}}`;
}

const iso = (ms) => (ms === null || ms === undefined ? '-' : new Date(Number(ms)).toISOString());

function table(headers, rows) {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => r[i].length)));
  return `${cells.map((r) => r.map((c, i) => (i < r.length - 1 ? c.padEnd(widths[i]) : c)).join('  ')).join('\n')}\n`;
}

function pairs(items) {
  const w = Math.max(...items.map(([k]) => k.length)) + 2;
  return items.map(([k, v]) => `${`${k}:`.padEnd(w)}${v}\n`).join('');
}

const optionsText = (options) => (options && Object.keys(options).length ? Object.entries(options).map(([k, v]) => `${k}=${v}`).join(' ') : '(none readable)');

// Progress of a long run, on a terminal only: "LABEL I of N" on stderr,
// rewritten in place at most every 100 ms and cleared at the end; nothing
// when stderr is not a TTY (a pipe, a file) or the output is JSON. The
// Python command's is the same. Neither language's standard library has a
// progress bar, and one line does not earn the package a dependency.
function progress(a, label, n) {
  const tty = !a.json && Boolean(process.stderr.isTTY) && n > 0;
  let last = 0;
  return {
    step(i) {
      if (!tty) return;
      const t = Date.now();
      if (i === n || t - last >= 100) {
        last = t;
        process.stderr.write(`\r${label} ${i} of ${n}`);
      }
    },
    end() {
      if (tty) process.stderr.write('\r\x1b[K');
    },
  };
}

// --- the commands -----------------------------------------------------------------

// A guard as status shows it: its table and its triggers that are not in place.
function guardText(g) {
  if (g.table_dropped) return `${g.table} (table dropped)`;
  const bad = g.triggers.filter((t) => t.state !== 'ok').map((t) => `${t.name} ${t.state}`);
  return `${g.table} (${bad.length ? bad.join(', ') : 'triggers ok'})`;
}

function cmdStatus(a, out) {
  const file = a.pos[0];
  const db = openFile(file);
  const st = readState(db, file, pick(db, file, a.opts['--ledger']));
  if (a.json) {
    out.push(`${jdump(st)}\n`);
    return exitStatus(st);
  }
  const items = [
    ['ledger', `${st.ledger} in ${file}`],
    ['format', st.format === null ? 'unreadable' : String(st.format)],
    ['verdict', st.verdict],
    ['options', optionsText(st.options)],
    ['guards', st.guards.map(guardText).join(', ') || 'none'],
    ['open claims', String(st.live_claims)],
    ['unknown', String(st.unknown)],
    ['expired claims', String(st.expired_claims)],
  ];
  const o = st.oldest_unknown;
  items.push(['oldest unknown', o === null ? 'none' : `${o.tenant} ${o.key} ${o.tool}, claimed ${iso(o.created_at)} (${o.age_seconds} s ago)`]);
  for (const p of st.problems) items.push(['problem', p]);
  for (const p of st.attention) items.push(['attention', p]);
  let text = `${pairs(items)}\n`;
  text += st.counts.length ? table(['status', 'tool', 'rows'], st.counts.map((c) => [c.status, c.tool, c.rows])) : '(no rows)\n';
  out.push(text);
  return exitStatus(st);
}

const storedNote = (name, refused) => `read from ${name}_rows, stored statuses (an expired claim shows claimed): the ledger refuses reads: ${refused}`;

const ROW_COLS = 'tenant, key, conversation, tool, effect, status, attempt, created_at, updated_at, lease_until';

// The WHERE terms and parameters of --tool, --tenant, --text (list: the
// key, or text inside the arguments) and --older-than (seconds, measured
// from now).
function rowFilters(a, older, now) {
  const where = [];
  const params = [];
  for (const [opt, col] of [['--tool', 'tool'], ['--tenant', 'tenant']]) {
    if (has(a.opts, opt)) {
      where.push(`${col} = ?`);
      params.push(a.opts[opt]);
    }
  }
  if (has(a.opts, '--text')) {
    where.push('(key = ? OR instr(args, ?) > 0)');
    params.push(a.opts['--text'], a.opts['--text']);
  }
  if (older !== null) {
    where.push('updated_at <= ?');
    params.push(ageNow(now) - older * 1000);
  }
  return { where, params };
}

function cmdList(a, out) {
  const file = a.pos[0];
  const status = has(a.opts, '--status') ? a.opts['--status'] : 'open';
  if (![...STATUSES, 'open', 'all'].includes(status)) {
    throw new CommandError(`sqlite-idempotency: --status must be one of open, all, ${STATUSES.join(', ')}; got "${status}"`, 64);
  }
  const limitText = has(a.opts, '--limit') ? a.opts['--limit'] : '100';
  if (!/^[0-9]{1,7}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 1000000) {
    throw new CommandError(`sqlite-idempotency: --limit must be an integer from 1 to 1000000, got "${limitText}"`, 64);
  }
  const limit = Number(limitText);
  const older = has(a.opts, '--older-than') ? ageSeconds(a.opts['--older-than'], '--older-than') : null;
  const db = openFile(file);
  const name = pick(db, file, a.opts['--ledger']);
  const refused = probe(db, name);
  const now = nowMs(db);
  const { where, params } = rowFilters(a, older, now);
  let targetsSql = null;
  if (has(a.opts, '--target')) {
    if (!targetsKept(db, name)) {
      throw new CommandError(`sqlite-idempotency: ledger ${name} keeps no targets (format 4); upgrade it once with SELECT idem_upgrade('${name}')`);
    }
    targetsSql = `SELECT claim FROM ${q(`${name}_targets`)} WHERE target = ?`;
    params.push(a.opts['--target']);
  }
  const statuses = status === 'all' ? [...STATUSES] : status === 'open' ? ['claimed', 'unknown'] : [status];
  let rows = [];
  try {
    if (refused === null) {
      for (const s of statuses) {
        // the status as a literal (one of STATUSES): the ledger then reads
        // claimed and unknown through its partial index of open rows, which a
        // bound parameter, unknown when the plan is made, would not let it
        const sql = `SELECT rowid, ${ROW_COLS} FROM ${q(name)} WHERE status = '${s}'${where.map((w) => ` AND ${w}`).join('')}${targetsSql ? ` AND rowid IN (${targetsSql})` : ''} ORDER BY rowid LIMIT ?`;
        rows.push(...db.prepare(sql).raw().all(...params, limit + 1));
      }
    } else {
      // the stored statuses: the ledger, which sees them at its clock, refuses
      const sql = `SELECT id, ${ROW_COLS} FROM ${q(`${name}_rows`)} WHERE status IN (${statuses.map(() => '?').join(', ')})${where.map((w) => ` AND ${w}`).join('')}${targetsSql ? ` AND id IN (${targetsSql})` : ''} ORDER BY id LIMIT ?`;
      rows = db.prepare(sql).raw().all(...statuses, ...params, limit + 1);
    }
  } catch (e) {
    throw new CommandError(`sqlite-idempotency: ${name} cannot be read: ${e.message}`);
  }
  rows.sort((x, y) => x[0] - y[0]);
  const more = rows.length > limit;
  rows = rows.slice(0, limit);
  const names = ROW_COLS.split(', ');
  const code = refused !== null ? 2 : 0;
  if (a.json) {
    out.push(`${jdump(rows.map((r) => Object.fromEntries(names.map((n, i) => [n, r[i + 1]]))))}\n`);
    if (refused !== null) out.push(`[${storedNote(name, refused)}]\n`);
    return code;
  }
  let text = rows.length ? table(['tenant', 'key', 'tool', 'status', 'attempt', 'updated'], rows.map((r) => [r[1], r[2], r[4], r[6], r[7], iso(r[9])])) : '';
  text += more ? `first ${limit} rows (--limit N shows more)\n` : `${plural(rows.length, 'row')}\n`;
  if (refused !== null) text += `${storedNote(name, refused)}\n`;
  out.push(text);
  return code;
}

// Whether the ledger keeps targets (format 5 on).
function targetsKept(db, name) {
  try {
    return db.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?").pluck().get(`${name}_targets`) !== undefined;
  } catch (e) {
    throw new CommandError(`sqlite-idempotency: ${name} cannot be read: ${e.message}`);
  }
}

// A row's targets (docs/ledger.md, "Targets"), by target; none on a ledger that keeps none.
function targetsOf(db, name, tenant, key) {
  if (!targetsKept(db, name)) return [];
  try {
    return db.prepare(`SELECT target, allowed_by, allowed_at, overrode FROM ${q(`${name}_targets`)} WHERE claim = (SELECT id FROM ${q(`${name}_rows`)} WHERE tenant = ? AND key = ?) ORDER BY target`)
      .all(tenant, key).map((r) => ({ target: r.target, allowed_by: r.allowed_by, allowed_at: r.allowed_at, overrode: r.overrode }));
  } catch (e) {
    throw new CommandError(`sqlite-idempotency: ${name}_targets cannot be read: ${e.message}`);
  }
}

function targetsText(targets) {
  if (!targets.length) return 'none';
  return targets.map((t) => (t.allowed_by === null ? t.target
    : `${t.target} (allowed by ${t.allowed_by} at ${iso(t.allowed_at)}, over ${t.overrode})`)).join(', ');
}

function tenantOf(db, name, key, tenant) {
  if (tenant !== undefined) return tenant;
  let tenants;
  try {
    tenants = db.prepare(`SELECT tenant FROM ${q(`${name}_rows`)} WHERE key = ? ORDER BY tenant`).pluck().all(key);
  } catch (e) {
    throw new CommandError(`sqlite-idempotency: ${name}_rows cannot be read: ${e.message}`);
  }
  if (!tenants.length) throw new CommandError(`sqlite-idempotency: ledger ${name} has no key "${key}"`);
  if (tenants.length > 1) throw new CommandError(`sqlite-idempotency: key "${key}" is held by ${tenants.length} tenants (${tenants.join(', ')}): choose one with --tenant`);
  return tenants[0];
}

const SHOW = ['tenant', 'key', 'conversation', 'tool', 'effect', 'status', 'attempt', 'created_at', 'updated_at', 'lease_until', 'args', 'result', 'error', 'members'];
const JSON_COLS = ['args', 'result', 'error', 'members'];

function cmdShow(a, out) {
  const [file, key] = a.pos;
  const db = openFile(file);
  const name = pick(db, file, a.opts['--ledger']);
  const tenant = tenantOf(db, name, key, a.opts['--tenant']);
  const refused = probe(db, name);
  const cols = SHOW.join(', ');
  let r;
  try {
    if (refused === null) {
      r = db.prepare(`SELECT ${cols} FROM ${q(name)} WHERE tenant = ? AND key = ?`).raw().get(tenant, key);
    } else {
      r = db.prepare(`SELECT ${cols} FROM ${q(`${name}_rows`)} WHERE tenant = ? AND key = ?`).raw().get(tenant, key);
    }
  } catch (e) {
    throw new CommandError(`sqlite-idempotency: ${name} cannot be read: ${e.message}`);
  }
  if (r === undefined) throw new CommandError(`sqlite-idempotency: ledger ${name} has no key "${key}" of tenant "${tenant}"`);
  const d = Object.fromEntries(SHOW.map((k, i) => [k, r[i]]));
  const targets = targetsOf(db, name, tenant, key);
  const code = refused !== null ? 2 : 0;
  if (a.json) {
    out.push(`${jdump({ ...Object.fromEntries(SHOW.map((k) => [k, JSON_COLS.includes(k) ? new Raw(d[k]) : d[k]])), targets })}\n`);
    if (refused !== null) out.push(`[${storedNote(name, refused)}]\n`);
    return code;
  }
  const items = SHOW.map((k) => {
    const v = d[k];
    if (['created_at', 'updated_at', 'lease_until'].includes(k)) return [k, `${iso(v)} (${v})`];
    if (JSON_COLS.includes(k)) return [k, v === null ? 'null' : v];
    return [k, String(v)];
  });
  items.push(['targets', targetsText(targets)]);
  if (refused !== null) items.push(['read from', storedNote(name, refused)]);
  out.push(pairs(items));
  return code;
}

function cmdResolve(a, out) {
  if (has(a.opts, '--all')) return cmdResolveAll(a, out);
  const [file, key, status] = a.pos;
  if (!['succeeded', 'failed', 'released'].includes(status)) {
    throw new CommandError(`sqlite-idempotency: resolve STATUS must be succeeded, failed or released; got "${status}"`, 64);
  }
  const db = openFile(file, true);
  const name = pick(db, file, a.opts['--ledger']);
  const tenant = tenantOf(db, name, key, a.opts['--tenant']);
  let answer;
  try {
    answer = db.prepare('SELECT idem_resolve(?, ?, ?, ?, ?)').pluck().get(name, tenant, key, status, has(a.opts, '--detail') ? a.opts['--detail'] : null);
  } catch (e) {
    throw new CommandError(`sqlite-idempotency: ${e.message}`);
  }
  out.push(a.json ? `${answer}\n` : `resolved ${tenant} ${key}: ${status}\n`);
  return 0;
}

// resolve --all: every unknown row that matches, resolved in one write
// transaction (cli.py's cmd_resolve_all says why: chosen inside BEGIN
// IMMEDIATE, no row is resolved twice; a refusal rolls every row back).
function cmdResolveAll(a, out) {
  const file = a.pos[0];
  const status = a.opts['--all'];
  if (!['succeeded', 'failed', 'released'].includes(status)) {
    throw new CommandError(`sqlite-idempotency: resolve --all STATUS must be succeeded, failed or released; got "${status}"`, 64);
  }
  const older = has(a.opts, '--older-than') ? ageSeconds(a.opts['--older-than'], '--older-than') : null;
  const dry = has(a.opts, '--dry-run');
  const db = openFile(file, !dry);
  const name = pick(db, file, a.opts['--ledger']);
  const detail = has(a.opts, '--detail') ? a.opts['--detail'] : null;
  const done = [];
  try {
    if (!dry) db.exec('BEGIN IMMEDIATE');
    const { where, params } = rowFilters(a, older, nowMs(db)); // the clock read inside the transaction
    where.unshift("status = 'unknown'");
    const rows = db.prepare(`SELECT tenant, key, tool, updated_at FROM ${q(name)} WHERE ${where.join(' AND ')} ORDER BY rowid`).raw().all(...params);
    const resolve = db.prepare('SELECT idem_resolve(?, ?, ?, ?, ?)').pluck();
    const shown = progress(a, dry ? 'listing' : 'resolving', rows.length);
    for (const [tenant, key, tool, updated] of rows) {
      shown.step(done.length + 1);
      if (!dry) {
        try {
          resolve.get(name, tenant, key, status, detail);
        } catch (e) {
          if (e instanceof CommandError) throw e;
          throw new CommandError(`sqlite-idempotency: ${e.message} (tenant ${tenant}, tool ${tool}); nothing was resolved`);
        }
      }
      done.push({ tenant, key, tool, updated_at: updated });
    }
    shown.end();
    if (!dry) db.exec('COMMIT');
  } catch (e) {
    if (e instanceof CommandError) throw e;
    throw new CommandError(`sqlite-idempotency: ${e.message}; nothing was resolved`);
  } finally {
    if (db.inTransaction) db.exec('ROLLBACK');
  }
  if (a.json) {
    out.push(`${jdump({ status, dry_run: dry, count: done.length, rows: done })}\n`);
    return 0;
  }
  const verb = dry ? 'would resolve' : 'resolved';
  for (const r of done) out.push(`${verb} ${r.tenant} ${r.key} (${r.tool}, updated ${iso(r.updated_at)}): ${status}\n`);
  out.push(dry ? `${plural(done.length, 'unknown row')} would be resolved ${status}; nothing was changed\n` : `resolved ${plural(done.length, 'row')} ${status}\n`);
  return 0;
}

function cmdPurge(a, out) {
  const file = a.pos[0];
  const secs = ageSeconds(a.opts['--older-than'], '--older-than');
  const db = openFile(file, true);
  const name = pick(db, file, a.opts['--ledger']);
  let n;
  try {
    n = Number(db.prepare('SELECT idem_purge(?, ?)').pluck().get(name, BigInt(secs)));
  } catch (e) {
    throw new CommandError(`sqlite-idempotency: ${e.message}`);
  }
  out.push(a.json ? `${jdump({ purged: n })}\n` : `purged ${plural(n, 'row')}\n`);
  return 0;
}

// The checks of idem_health's answer, one row each, as check prints them.
function checkRows(st) {
  const checks = [];
  const add = (check, result, detail) => checks.push({ check, result, detail });
  const notOk = (triggers) => triggers.filter((t) => t.state !== 'ok').map((t) => `${t.state} ${t.name}`).join(', ');
  add('format', st.format === null ? 'broken' : 'ok', st.format === null ? 'unreadable' : String(st.format));
  let bad = notOk(st.triggers);
  if (st.triggers.length) add('triggers', bad ? 'broken' : 'ok', bad || `${plural(st.triggers.length, 'own trigger')} in place`);
  else add('triggers', 'broken', 'unreadable');
  add('options', st.options ? 'ok' : 'broken', optionsText(st.options));
  if (!st.guards.length) add('guards', 'ok', 'none');
  for (const g of st.guards) {
    bad = notOk(g.triggers);
    if (g.table_dropped) add('guards', 'ok', `${g.table}: the table was dropped, its triggers with it`);
    else add('guards', bad ? 'broken' : 'ok', `${g.table}: ${bad || `${plural(g.triggers.length, 'trigger')} in place`}`);
  }
  if (!st.problems.length) add('ledger', 'ok', 'it answers operations');
  for (const p of st.problems) add('ledger', 'broken', p);
  return checks;
}

function cmdCheck(a, out) {
  const file = a.pos[0];
  const db = openFile(file);
  const name = pick(db, file, a.opts['--ledger']);
  const st = readState(db, file, name);
  const checks = checkRows(st);
  // on a connection without the extension, as any tool would run it (a newer
  // SQLite would otherwise ask the ledger too, which refuses when broken)
  let res;
  try {
    const Database = require('better-sqlite3');
    const plain = new Database(require('node:path').resolve(file), { readonly: true, fileMustExist: true });
    try {
      res = plain.prepare('PRAGMA integrity_check').pluck().all();
    } finally {
      plain.close();
    }
  } catch (e) {
    res = [e.message];
  }
  const intact = res.length === 1 && res[0] === 'ok';
  checks.push({ check: 'integrity_check', result: intact ? 'ok' : 'broken', detail: res.join('; ') });
  for (const p of st.attention) checks.push({ check: 'rows', result: 'attention', detail: p });
  if (!st.attention.length) checks.push({ check: 'rows', result: 'ok', detail: 'no unknown rows, no expired claims' });
  const verdict = intact ? st.verdict : 'broken';
  if (a.json) out.push(`${jdump({ file, ledger: name, checks, verdict })}\n`);
  else out.push(`${table(['result', 'check', 'detail'], checks.map((c) => [c.result, c.check, c.detail]))}verdict: ${verdict}\n`);
  return { healthy: 0, 'needs attention': 1 }[verdict] ?? 2;
}

const METRICS = [
  ['idempotency_ledger_up', '1 when the ledger answers reads and its guards have their triggers, else 0.'],
  ['idempotency_ledger_format', "The format version in the ledger's _meta table."],
  ['idempotency_ledger_open_claims', 'Live claims: calls running now.'],
  ['idempotency_ledger_unknown', 'Rows whose outcome is unknown (settled unknown, or an external claim whose lease ran out): reconcile them.'],
  ['idempotency_ledger_expired_claims', 'Claims whose lease ran out before their holder settled them.'],
  ['idempotency_ledger_oldest_unknown_age_seconds', 'Seconds since the oldest unknown row was claimed; 0 when there is none.'],
];

function metricValues(st) {
  const o = st.oldest_unknown;
  return [st.problems.length ? 0 : 1, Number.isInteger(st.format) ? st.format : 0, st.live_claims, st.unknown, st.expired_claims, o === null ? 0 : o.age_seconds];
}

const labelValue = (v) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');

function cmdMetrics(a, out) {
  const file = a.pos[0];
  const db = openFile(file);
  const st = readState(db, file, pick(db, file, a.opts['--ledger']));
  const label = `{ledger="${labelValue(st.ledger)}"}`;
  const values = metricValues(st);
  out.push(METRICS.map(([metric, help], i) => `# HELP ${metric} ${help}\n# TYPE ${metric} gauge\n${metric}${label} ${values[i]}\n`).join(''));
  return 0;
}

const RUN = { status: cmdStatus, list: cmdList, show: cmdShow, resolve: cmdResolve, purge: cmdPurge, check: cmdCheck, metrics: cmdMetrics };

// Runs the command; returns its exit status.
function main(argv = process.argv.slice(2), stdout = process.stdout, stderr = process.stderr) {
  if (!argv.length || argv.some((x) => x === '-h' || x === '--help')) {
    (argv.length ? stdout : stderr).write(USAGE);
    return argv.length ? 0 : 64;
  }
  if (argv.length === 1 && argv[0] === '--version') {
    stdout.write(`sqlite-idempotency ${require('./package.json').version}\n`);
    return 0;
  }
  const out = [];
  let code;
  try {
    const a = parse(argv);
    if (a.command === 'serve') return require('./serve.js').serve(a, { stdout, stderr, run: runJson });
    code = RUN[a.command](a, out);
  } catch (e) {
    stdout.write(out.join(''));
    stderr.write(e instanceof CommandError ? `${e.message}\n` : `sqlite-idempotency: ${e.message}\n`);
    return e instanceof CommandError ? e.status : 2;
  }
  stdout.write(out.join(''));
  return code;
}

// What serve answers for a read: the command's --json output for argv, and
// its exit status, or a CommandError.
function runJson(argv) {
  const a = parse([...argv, '--json']);
  const out = [];
  const code = RUN[a.command](a, out);
  return { text: out.join(''), code };
}

module.exports = { main, parse, jdump, Raw, METRICS, metricValues, runJson };

if (require.main === module) {
  const code = main();
  if (typeof code === 'number') process.exitCode = code; // serve: runs until it is stopped
}

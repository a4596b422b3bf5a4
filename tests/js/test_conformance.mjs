// The Node runner of tests/conformance/ (its README.md is the format).
//
//   node tests/js/test_conformance.mjs [--project P] --clock build/testclock.so --dir DIR FILE...
//
// sqlite-idempotency and better-sqlite3 are required from P's node_modules
// (default: the current directory), as an application in P would.
//
// Every step goes through the package as a user calls it: Ledger.open on a
// better-sqlite3 connection (WAL, synchronous=FULL; busyTimeoutMs 0 here),
// claim with the arguments as JavaScript values (the package writes their
// JSON), settle, resolve, renew, row. What the package does not offer
// (idem_purge, key derivation, plain SQL such as a guard or a guarded
// insert) runs as SQL on the package's connection (ledger.db).
//
// CLOCK is the test clock (tests/c/testclock.c), loaded before any database
// is opened. Prints "PASS conformance.node:FILE" per file or "FAIL
// conformance.node:FILE: step N (OP): FIELD: expected E, got G" at the first
// step that differs; exit 1 on a failure. Values compare as the package
// reads JSON: member order does not count, an integer beyond 2^53-1 is a
// BigInt of its digits, every other number a Number (so 1.0 is 1 here).
import { createRequire } from 'node:module';
import fs from 'node:fs';
import path from 'node:path';

const projectAt = process.argv.indexOf('--project');
const require = createRequire(path.join(path.resolve(projectAt > 0 ? process.argv[projectAt + 1] : '.'), 'x.js'));
const Database = require('better-sqlite3');
const idem = require('sqlite-idempotency');

const PREFIX = 'conformance.node';

// JSON as the package reads it: an integer literal beyond
// Number.MAX_SAFE_INTEGER is a BigInt with exactly its digits.
function parse(src) {
  let i = 0;
  const ws = () => { while (i < src.length && ' \t\n\r'.includes(src[i])) i++; };
  const fail = () => { throw new SyntaxError(`not JSON at position ${i}: ${src.slice(i, i + 20)}`); };
  const NUMBER = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/y;
  const STRING = /"(?:[^"\\]|\\.)*"/y;
  const value = () => {
    ws();
    const c = src[i];
    if (c === '{') {
      const o = {};
      i++;
      ws();
      if (src[i] === '}') { i++; return o; }
      for (;;) {
        ws();
        STRING.lastIndex = i;
        const m = STRING.exec(src);
        if (!m) fail();
        i = STRING.lastIndex;
        ws();
        if (src[i++] !== ':') fail();
        o[JSON.parse(m[0])] = value();
        ws();
        if (src[i] === ',') { i++; continue; }
        if (src[i++] === '}') return o;
        fail();
      }
    }
    if (c === '[') {
      const a = [];
      i++;
      ws();
      if (src[i] === ']') { i++; return a; }
      for (;;) {
        a.push(value());
        ws();
        if (src[i] === ',') { i++; continue; }
        if (src[i++] === ']') return a;
        fail();
      }
    }
    if (c === '"') {
      STRING.lastIndex = i;
      const m = STRING.exec(src);
      if (!m) fail();
      i = STRING.lastIndex;
      return JSON.parse(m[0]);
    }
    for (const [lit, v] of [['true', true], ['false', false], ['null', null]]) {
      if (src.startsWith(lit, i)) { i += lit.length; return v; }
    }
    NUMBER.lastIndex = i;
    const m = NUMBER.exec(src);
    if (!m) fail();
    i = NUMBER.lastIndex;
    const n = Number(m[0]);
    return !m[1] && !m[2] && !Number.isSafeInteger(n) ? BigInt(m[0]) : n;
  };
  const v = value();
  ws();
  if (i !== src.length) fail();
  return v;
}

function text(v) {
  return JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? `${x}n` : x));
}

function same(a, b) {
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((x, i) => same(x, b[i]));
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a), kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && same(a[k], b[k]));
}

function compare(expect, got) {
  if (expect !== null && typeof expect === 'object' && !Array.isArray(expect)) {
    for (const [k, v] of Object.entries(expect)) {
      if (got === null || typeof got !== 'object' || !Object.hasOwn(got, k)) return `${k}: expected ${text(v)}, got (absent)`;
      if (!same(v, got[k])) return `${k}: expected ${text(v)}, got ${text(got[k])}`;
    }
    return null;
  }
  return same(expect, got) ? null : `the answer: expected ${text(expect)}, got ${text(got)}`;
}

// A value bound as SQL: an integral Number as INTEGER (better-sqlite3 would bind REAL).
const sqlValue = (v) => (typeof v === 'number' && Number.isInteger(v) ? BigInt(v) : v);

class Failed extends Error {}

class Sequence {
  constructor(clock, file, spec) {
    this.clock = clock;
    this.file = file;
    this.spec = spec;
    this.ledgers = [null, null];
    this.saved = new Map();
    this.now = spec.clock;
  }

  setClock(ms) {
    this.now = ms;
    this.clock.prepare('SELECT testclock_set(?)').get(BigInt(ms));
  }

  ledger(i) {
    if (!this.ledgers[i]) {
      const db = new Database(this.file);
      this.ledgers[i] = i === 0
        ? idem.Ledger.open(db, { busyTimeoutMs: 0, options: numbers(this.spec.ledger || {}) })
        : idem.Ledger.open(db, { busyTimeoutMs: 0, create: false });
    }
    return this.ledgers[i];
  }

  close() {
    for (const l of this.ledgers) if (l) l.close();
  }

  token(step) {
    if (step.token !== undefined) {
      if (!this.saved.has(step.token)) throw new Failed(`cannot run the step: no earlier claim saved a token as "${step.token}"`);
      return this.saved.get(step.token);
    }
    if (step.token_text !== undefined) return step.token_text;
    throw new Failed('cannot run the step: the step names no token');
  }

  run(step) {
    const led = this.ledger(step.conn ?? 0);
    switch (step.step) {
      case 'clock':
        this.setClock(step.set !== undefined ? step.set : this.now + step.advance);
        return null;
      case 'claim': {
        const d = led.claim(step.tenant, step.conversation, step.tool, step.args, { effect: step.effect, operationId: step.operation_id,
          targets: step.targets, targetWindowSeconds: step.target_window_seconds, allowedBy: step.allowed_by });
        if (step.as !== undefined && d.token !== undefined) this.saved.set(step.as, d.token);
        return d;
      }
      case 'settle':
        return led.settle(this.token(step), step.status, step.detail === undefined ? null : step.detail);
      case 'resolve':
        return led.resolve(step.tenant, step.key, step.status, step.detail === undefined ? null : step.detail);
      case 'renew':
        return { lease_until: led.renew(this.token(step), step.seconds) };
      case 'purge':
        return { purged: Number(led.db.prepare("SELECT idem_purge('ledger', ?)").pluck().get(sqlValue(step.older_than))) };
      case 'row':
        return led.row(step.tenant, step.key);
      case 'sql': {
        const binds = (step.bind || []).map((b) => (b !== null && typeof b === 'object' ? this.saved.get(b.token) : sqlValue(b)));
        const stmt = led.db.prepare(step.sql);
        if (!stmt.reader) {
          stmt.run(...binds);
          return { rows: [] };
        }
        return { rows: stmt.raw().all(...binds) };
      }
      default:
        throw new Failed(`cannot run the step: unknown step ${JSON.stringify(step.step)}`);
    }
  }
}

// Ledger options as the package takes them: Numbers.
function numbers(o) {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, Number(v)]));
}

function check(step, seq) {
  let got;
  try {
    got = seq.run(step);
  } catch (e) {
    if (e instanceof Failed) throw e;
    if (!(e instanceof idem.LedgerError) && e.code === undefined) throw e; // not an error of SQLite or the ledger
    if (step.error === undefined) return `expected an answer, got the error "${e.message}"`;
    for (const part of Array.isArray(step.error) ? step.error : [step.error]) {
      if (!e.message.includes(part)) return `expected an error containing ${text(part)}, got "${e.message}"`;
    }
    return null;
  }
  if (step.error !== undefined) return `expected the error ${text(step.error)}, got the answer ${text(got)}`;
  let why = step.expect !== undefined ? compare(step.expect, got) : null;
  for (const name of step.absent || []) {
    if (why === null && got !== null && typeof got === 'object' && Object.hasOwn(got, name)) why = `${name}: expected it absent, got ${text(got[name])}`;
  }
  return why;
}

function runSequence(clock, name, spec, file) {
  for (const s of ['', '-wal', '-shm', '-journal']) fs.rmSync(file + s, { force: true });
  const seq = new Sequence(clock, file, spec);
  try {
    seq.setClock(spec.clock);
    const led = seq.ledger(0);
    for (const sql of spec.setup || []) led.db.exec(sql);
    for (let i = 0; i < spec.steps.length; i++) {
      const step = spec.steps[i];
      let why;
      try {
        why = check(step, seq);
      } catch (e) {
        if (!(e instanceof Failed)) throw e;
        why = e.message;
      }
      if (why !== null) {
        console.log(`FAIL ${PREFIX}:${name}: step ${i + 1} (${step.step}): ${why}`);
        return false;
      }
    }
  } finally {
    seq.close();
  }
  console.log(`PASS ${PREFIX}:${name} (${spec.steps.length} steps)`);
  return true;
}

function runKeys(name, spec) {
  const db = new Database(':memory:');
  idem.load(db);
  const fails = [];
  const vectors = [];
  if (spec.vectors_file !== undefined) {
    const where = path.join(path.dirname(name), spec.vectors_file);
    parse(fs.readFileSync(where, 'utf8')).forEach((v, i) => vectors.push([where, i + 1, v]));
  }
  (spec.vectors || []).forEach((v, i) => vectors.push(['"vectors"', i + 1, v]));
  const keyOf = db.prepare('SELECT idem_canonical(?) AS canonical, idem_key(?, ?, ?, ?) AS key');
  for (const [where, i, v] of vectors) {
    let r;
    try {
      r = keyOf.get(...[v.args, v.tenant, v.conversation, v.tool, v.args].map(sqlValue));
    } catch (e) {
      fails.push(`vector ${i} of ${where}: refused: ${e.message}`);
      continue;
    }
    if (r.canonical !== v.canonical) fails.push(`vector ${i} of ${where}: canonical: expected ${v.canonical}, got ${r.canonical}`);
    else if (r.key !== v.key) fails.push(`vector ${i} of ${where}: key: expected ${v.key}, got ${r.key}`);
  }
  const key = db.prepare('SELECT idem_key(?, ?, ?, ?)').pluck();
  for (const r of spec.refusals || []) {
    try {
      const k = key.get(...[r.tenant, r.conversation, r.tool, r.args].map(sqlValue));
      fails.push(`refusal ${r.name}: expected the error "${r.error}", got the key ${k}`);
    } catch (e) {
      if (!e.message.includes(r.error)) fails.push(`refusal ${r.name}: expected an error containing "${r.error}", got "${e.message}"`);
    }
  }
  db.close();
  for (const f of fails) console.log(`FAIL ${PREFIX}:${name}: ${f}`);
  if (!fails.length) console.log(`PASS ${PREFIX}:${name} (${vectors.length} vectors, ${(spec.refusals || []).length} refusals)`);
  return !fails.length;
}

function main(argv) {
  const opts = {};
  const files = [];
  for (let i = 0; i < argv.length; i++) {
    if (['--clock', '--dir', '--project'].includes(argv[i]) && i + 1 < argv.length) opts[argv[i]] = argv[++i];
    else files.push(argv[i]);
  }
  if (!opts['--clock'] || !opts['--dir'] || !files.length) {
    console.error('usage: test_conformance.mjs [--project DIR] --clock CLOCK --dir DIR FILE...');
    return 2;
  }
  const clock = new Database(':memory:');
  clock.loadExtension(path.resolve(opts['--clock'])); // the clock VFS is the default from here on
  let ok = true;
  files.forEach((name, n) => {
    let spec;
    try {
      spec = parse(fs.readFileSync(name, 'utf8'));
    } catch (e) {
      console.log(`FAIL ${PREFIX}:${name}: cannot read the file: ${e.message}`);
      ok = false;
      return;
    }
    if (spec.kind === 'sequence') ok = runSequence(clock, name, spec, path.join(opts['--dir'], `conformance-node-${n + 1}.db`)) && ok;
    else if (spec.kind === 'keys') ok = runKeys(name, spec) && ok;
    else {
      console.log(`FAIL ${PREFIX}:${name}: "kind" is neither "sequence" nor "keys"`);
      ok = false;
    }
  });
  clock.close();
  return ok ? 0 : 1;
}

process.exitCode = main(process.argv.slice(2));

#!/usr/bin/env node
// vectors.cjs: the key vectors of sqlite-idempotency, made and checked
// without the extension.
//
//   node vectors.cjs make           print keys.json (needs xxhsum on PATH)
//   node vectors.cjs check FILE     consistency of FILE, one PASS/FAIL line each
//   node vectors.cjs sql FILE       SQL checks for the runner (idem_canonical, idem_key)
//   node vectors.cjs tsv FILE       index, tenant, conversation, tool, canonical, key
//
// The canonical form is computed here (RFC 8785 in a few lines of
// JavaScript: JSON.stringify already prints strings and numbers the way JCS
// wants, and the default sort compares UTF-16 code units); the key is
// 'idem1-' + `xxhsum -H2` over tenant ':' conversation ':' tool ':' canonical.
// Neither step uses the extension, so the SQL suite checks the extension
// against an independent result.
'use strict';
const fs = require('fs');
const { spawnSync } = require('child_process');

// RFC 8785 canonical text of a parsed JSON value.
function jcs(v) {
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  if (Array.isArray(v)) return '[' + v.map(jcs).join(',') + ']';
  return '{' + Object.keys(v).sort().map((k) => JSON.stringify(k) + ':' + jcs(v[k])).join(',') + '}';
}

const long128 = 'T'.repeat(64) + '_'.repeat(32) + '-'.repeat(31) + '9';
const many = '{' + Array.from({ length: 50 }, (_, i) => `"k${49 - i}":${i}`).join(', ') + '}';
const deep = '['.repeat(40) + '{"z":1,"a":[0.5]}' + ']'.repeat(40);

// [tenant, conversation, tool, args as the caller wrote them]
const CASES = [
  ['acme', 'conv-1', 'create_invoice', '{"amount":100,"currency":"EUR"}'],
  ['acme', 'conv-1', 'create_invoice', '{ "currency" : "EUR", "amount" : 100.0 }'],
  ['umbrella', 'conv-1', 'create_invoice', '{"amount":100,"currency":"EUR"}'],
  ['acme', 'conv-2', 'create_invoice', '{"amount":100,"currency":"EUR"}'],
  ['acme', 'conv-1', 'refund_invoice', '{"amount":100,"currency":"EUR"}'],
  ['a', 'b', 'c', '{}'],
  ['a', 'b', 'c', '[]'],
  ['a', 'b', 'c', 'null'],
  ['a', 'b', 'c', 'true'],
  ['a', 'b', 'c', '"just a string"'],
  ['a', 'b', 'c', '42'],
  ['t1', 'c1', 'send_email', '{"to":["bob@example.com","eve@example.com"],"subject":"Hi","body":{"text":"hello","html":null},"cc":[]}'],
  ['t1', 'c1', 'send_email', '{\n\t"b" : [ true , null ] ,\r\n "a" : 1\n}'],
  ['tenant_42', 'Conv_ABC-9', 'translate', '{"text":"caf\\u00e9 \\u20ac5","lang":"fr"}'],
  ['tenant_42', 'Conv_ABC-9', 'translate', '{"text":"café €5","lang":"fr"}'],
  ['u', 'v', 'emoji', '{"smile":"\\ud83d\\ude00","raw":"😀","cjk":"日本語","rtl":"שלום"}'],
  ['u', 'v', 'sort_utf16', '{"\\ufb33":3,"😀":2,"\\u20ac":1,"e":0,"é":4,"E":5,"":6}'],
  ['n', 'm', 'numbers', '{"a":1E30,"b":4.50,"c":2e-3,"d":1e-7,"e":-0,"f":0.1,"g":333333333.33333329,"h":5e-324,"i":1.7976931348623157e308,"j":9007199254740991,"k":-9007199254740991,"l":1e21,"m":1e20,"n":0.000001,"o":123456789.125,"p":1.0}'],
  ['n', 'm', 'numbers2', '[0, -0.0, 0e10, 100, 1e2, 12e-1, 0.30000000000000004, 1e23, -1.5e-10]'],
  ['s', 'x', 'escapes', '["\\u0000\\u0001\\u001f","\\b\\t\\n\\f\\r","\\"\\\\\\/","\\u007f\\u2028\\u2029","\\uFEFF"]'],
  ['s', 'x', 'rfc8785', '{"numbers":[333333333.33333329,1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/","literals":[null,true,false]}'],
  ['k', 'k', 'numeric_names', '{"10":"a","9":"b","1":"c","01":"d","-1":"e"}'],
  ['k', 'k', 'nested', deep],
  ['k', 'k', 'many_members', many],
  ['k', 'k', 'long_string', JSON.stringify('x'.repeat(1000) + 'é')],
  [long128, long128, long128, '{"max":"components of 128 characters"}'],
  ['0', '_', '-', '{"shortest":"components"}'],
  ['a-b', 'c', 'd', '{}'],
  ['a', 'b-c', 'd', '{}'],
];

function hashKey(tenant, conversation, tool, canonical) {
  const r = spawnSync('xxhsum', ['-H2'], {
    input: Buffer.from(`${tenant}:${conversation}:${tool}:${canonical}`, 'utf8'),
  });
  if (r.error || r.status !== 0) throw new Error('xxhsum -H2 failed: ' + (r.error || r.stderr));
  const hex = r.stdout.toString().split(/\s+/)[0];
  if (!/^[0-9a-f]{32}$/.test(hex)) throw new Error('unexpected xxhsum output: ' + r.stdout);
  return 'idem1-' + hex;
}

function make() {
  const out = CASES.map(([tenant, conversation, tool, args]) => {
    const canonical = jcs(JSON.parse(args));
    return { tenant, conversation, tool, args, canonical, key: hashKey(tenant, conversation, tool, canonical) };
  });
  return '[\n' + out.map((v) => '  ' + JSON.stringify(v)).join(',\n') + '\n]\n';
}

const GRAMMAR = /^[A-Za-z0-9_-]{1,128}$/;
const FIELDS = ['tenant', 'conversation', 'tool', 'args', 'canonical', 'key'];

// One line per check; returns the number of failures.
function check(file) {
  let fails = 0;
  const say = (ok, name, why) => {
    console.log(ok ? `PASS vectors:${name}` : `FAIL vectors:${name}: ${why}`);
    if (!ok) fails++;
  };
  let list;
  try {
    list = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    say(false, 'file-parses', e.message);
    return 1;
  }
  say(Array.isArray(list) && list.length >= 20, 'at-least-20', `found ${Array.isArray(list) ? list.length : 'no list'}`);
  if (!Array.isArray(list)) return fails + 1;
  const byCall = new Map();
  const byKey = new Map();
  list.forEach((v, i) => {
    const name = 'file:' + String(i).padStart(2, '0');
    const why = [];
    const keys = v && typeof v === 'object' ? Object.keys(v).sort().join(',') : '';
    if (keys !== [...FIELDS].sort().join(',')) why.push(`fields are {${keys}}`);
    else {
      for (const f of FIELDS) if (typeof v[f] !== 'string') why.push(`${f} is not a string`);
    }
    if (!why.length) {
      for (const f of ['tenant', 'conversation', 'tool']) if (!GRAMMAR.test(v[f])) why.push(`${f} breaks the key grammar`);
      if (!/^idem1-[0-9a-f]{32}$/.test(v.key)) why.push('key is not idem1- and 32 lowercase hex digits');
      let c = null;
      try {
        c = jcs(JSON.parse(v.args));
      } catch (e) {
        why.push('args is not JSON: ' + e.message);
      }
      if (c !== null && c !== v.canonical) why.push(`canonical is not jcs(args): expected ${JSON.stringify(c)}`);
      if (jcs(JSON.parse(v.canonical)) !== v.canonical) why.push('canonical is not a fixpoint');
      const call = [v.tenant, v.conversation, v.tool, v.canonical].join('\u0001');
      if (byCall.has(call) && byCall.get(call) !== v.key) why.push(`same call as vector ${byCall.get(call)} but another key`);
      if (byKey.has(v.key) && byKey.get(v.key) !== call) why.push('same key as a different call');
      byCall.set(call, v.key);
      byKey.set(v.key, call);
    }
    say(why.length === 0, name, why.join('; '));
  });
  // the file shows the properties it is meant to show
  const spellings = list.filter((v, i) => list.some((w, j) => j !== i && w.args !== v.args && w.key === v.key));
  say(spellings.length >= 2, 'two-spellings-one-key', 'no two vectors with different args text and one key');
  const keys = new Set(list.map((v) => v.key));
  const calls = new Set(list.map((v) => [v.tenant, v.conversation, v.tool, v.canonical].join('\u0001')));
  say(keys.size === calls.size && calls.size >= 20, 'distinct-calls-distinct-keys', `${calls.size} distinct calls, ${keys.size} distinct keys`);
  return fails;
}

// Does v hold a number that JCS prints as an integer literal beyond 2^53-1?
function hasBigInteger(v) {
  if (typeof v === 'number') return Number.isInteger(v) && Math.abs(v) > Number.MAX_SAFE_INTEGER && Math.abs(v) < 1e21;
  if (v === null || typeof v !== 'object') return false;
  return Object.values(v).some(hasBigInteger);
}

const sqlText = (s) => "'" + s.replace(/'/g, "''") + "'";

function sql(file) {
  const list = JSON.parse(fs.readFileSync(file, 'utf8'));
  const lines = ['-- generated by tests/js/vectors.cjs from keys.json'];
  list.forEach((v, i) => {
    const n = String(i).padStart(2, '0');
    lines.push(`SELECT 'sql:${n}:canonical', idem_canonical(${sqlText(v.args)}) = ${sqlText(v.canonical)};`);
    // A number like 1e20 canonicalises to the integer literal
    // 100000000000000000000, which the strict reader refuses as input
    // (beyond 2^53-1): the fixpoint check is left out for those.
    if (!hasBigInteger(JSON.parse(v.canonical))) {
      lines.push(`SELECT 'sql:${n}:canonical-fixpoint', idem_canonical(${sqlText(v.canonical)}) = ${sqlText(v.canonical)};`);
    }
    lines.push(
      `SELECT 'sql:${n}:key', idem_key(${[v.tenant, v.conversation, v.tool, v.args].map(sqlText).join(', ')}) = ${sqlText(v.key)};`
    );
  });
  return lines.join('\n') + '\n';
}

function tsv(file) {
  const list = JSON.parse(fs.readFileSync(file, 'utf8'));
  return list
    .map((v, i) => {
      const row = [String(i).padStart(2, '0'), v.tenant, v.conversation, v.tool, v.canonical, v.key];
      if (row.some((f) => /[\t\n\r]/.test(f))) throw new Error(`vector ${i} holds a tab or newline`);
      return row.join('\t');
    })
    .join('\n') + '\n';
}

const [cmd, file] = process.argv.slice(2);
if (cmd === 'make') process.stdout.write(make());
else if (cmd === 'check' && file) process.exitCode = check(file) ? 1 : 0;
else if (cmd === 'sql' && file) process.stdout.write(sql(file));
else if (cmd === 'tsv' && file) process.stdout.write(tsv(file));
else {
  process.stderr.write('usage: node vectors.cjs make | check FILE | sql FILE | tsv FILE\n');
  process.exitCode = 2;
}

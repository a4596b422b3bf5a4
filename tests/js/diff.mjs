// diff.mjs: differential test of ext/canonical.c against the npm package
// `canonicalize` (pinned in package.json).
//
// Usage: node diff.mjs JCS_CLI   (TEST_WRAP, if set, is put in front of it,
//        e.g. a valgrind command line; DIFF_SEED and DIFF_DOCS override the
//        seed and the number of documents)
//
// Generates DIFF_DOCS (default 10000) JSON texts deterministically from the
// seed: nested objects and arrays, strings with controls, U+0000, quotes,
// astral characters and U+E000-U+FFFF (raw or escaped), member names with
// tricky orders, doubles from random bit patterns in several spellings, safe
// integers. Each text goes through canonicalize(JSON.parse(text)) and,
// all in one process, through jcs_cli (our canonicaliser); wherever both
// accept, the outputs must be identical bytes.
//
// A small share of "strict" documents carries what only we refuse by design
// (duplicate member names, integer literals beyond 2^53-1, numbers that
// underflow to zero, lone surrogates); they are counted apart and each must
// be refused by us with the matching message.
//
// Prints one "PASS name" / "FAIL name: why" line per check.
import { runCli, report, fail, pass } from './run_cli.mjs';
import canonicalize from 'canonicalize';

const cli = process.argv[2];
if (!cli) {
  console.error('usage: node diff.mjs JCS_CLI');
  process.exit(2);
}
const SEED = BigInt(process.env.DIFF_SEED || '20240611');
const NDOCS = Number(process.env.DIFF_DOCS || '10000');
const STRICT_EVERY = 50; // one document in 50 is a strict-refusal case

// ---------------------------------------------------------------- PRNG
// splitmix64 over BigInt: deterministic on every platform.
let state = SEED;
const M64 = (1n << 64n) - 1n;
function next64 () {
  state = (state + 0x9e3779b97f4a7c15n) & M64;
  let z = state;
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & M64;
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & M64;
  return z ^ (z >> 31n);
}
function rnd (n) { return Number(next64() % BigInt(n)); } // 0..n-1
function chance (p) { return rnd(1000000) < p * 1000000; }
function pick (a) { return a[rnd(a.length)]; }

// ---------------------------------------------------------------- text
function ws () {
  if (!chance(0.3)) return '';
  let s = '';
  for (let k = 1 + rnd(3); k > 0; k--) s += pick([' ', '\t', '\n', '\r', ' ']);
  return s;
}

const hex4 = (c) => {
  const h = c.toString(16).padStart(4, '0');
  return chance(0.5) ? h : h.toUpperCase();
};

// One code point from a mix of ranges that matter to JCS.
function codePoint () {
  switch (rnd(12)) {
    case 0: return rnd(0x20); // controls, U+0000 included
    case 1: return pick([0x22, 0x5c, 0x2f, 0x7f, 0x00, 0x08, 0x09, 0x0a, 0x0c, 0x0d]);
    case 2: return 0x80 + rnd(0x780); // two-byte UTF-8
    case 3: return 0x800 + rnd(0xd800 - 0x800); // BMP below the surrogates
    case 4: return 0xe000 + rnd(0x2000); // U+E000..U+FFFF (private use, FFFx)
    case 5: return 0xf000 + rnd(0x1000); // up to U+FFFF
    case 6: return 0x10000 + rnd(0x100000); // astral
    case 7: return pick([0x1f600, 0x1f602, 0xfb33, 0x20ac, 0xfeff, 0x2028, 0x2029, 0xfffd, 0x10ffff]);
    default: return 0x20 + rnd(0x5f); // printable ASCII
  }
}

// JSON spelling of one code point: raw where JSON allows, or escaped.
function spell (c) {
  const short = { 0x22: '\\"', 0x5c: '\\\\', 0x08: '\\b', 0x09: '\\t', 0x0a: '\\n', 0x0c: '\\f', 0x0d: '\\r' };
  const mustEscape = c < 0x20 || c === 0x22 || c === 0x5c;
  if (c === 0x2f && chance(0.3)) return '\\/';
  if (!mustEscape && chance(0.75)) return String.fromCodePoint(c);
  if (short[c] && chance(0.6)) return short[c];
  if (c < 0x10000) return '\\u' + hex4(c);
  const v = c - 0x10000;
  return '\\u' + hex4(0xd800 + (v >> 10)) + '\\u' + hex4(0xdc00 + (v & 0x3ff));
}

// A string: returns [json text, decoded value].
function str (maxLen) {
  const n = rnd(maxLen + 1);
  let text = '"';
  let val = '';
  for (let k = 0; k < n; k++) {
    const c = codePoint();
    text += spell(c);
    val += String.fromCodePoint(c);
  }
  return [text + '"', val];
}

// Names that stress the ordering: shared prefixes, the astral vs
// U+E000-U+FFFF boundary, NUL, the empty name, digit strings, case.
function name () {
  switch (rnd(8)) {
    case 0: {
      const base = pick(['', 'a', 'k', '\u0000', '\ud83d\ude00', '\ue000', '\uffff', '\u00e9']);
      const tail = pick(['', 'a', 'A', '\u0000', '\ud800\udc00', '\uefff', '\uff61', '1', '10', '\u007f']);
      const v = base + tail;
      let text = '"';
      for (const ch of v) text += spell(ch.codePointAt(0));
      return [text + '"', v];
    }
    case 1: {
      const v = String(rnd(200));
      return ['"' + v + '"', v];
    }
    default: return str(6);
  }
}

const SAFE = 9007199254740991;
const dv = new DataView(new ArrayBuffer(8));

function bitsDouble () {
  for (;;) {
    dv.setBigUint64(0, next64());
    const v = dv.getFloat64(0);
    if (Number.isFinite(v)) return v;
  }
}

// Spell a finite double so that JSON.parse gives it back exactly and it is
// never an integer literal beyond 2^53-1 (which we refuse by design).
function spellDouble (v) {
  let s;
  switch (rnd(6)) {
    case 0: s = v.toExponential(); break;
    case 1: s = v.toPrecision(17); break;
    case 2: s = v.toExponential().replace('e', 'E').replace('E+', pick(['E+', 'E', 'E+0'])); break;
    case 3: s = Object.is(v, -0) ? '-0.0' : String(v); break;
    default: s = String(v); break;
  }
  if (Object.is(v, -0) && s === '0') s = '-0';
  if (!/[.eE]/.test(s) && Math.abs(v) > SAFE) s += pick(['.0', '.000', 'e0']);
  // toPrecision can give "1.0000000000000000" style trailing zeros: fine.
  return s;
}

function number () {
  switch (rnd(10)) {
    case 0: return String(rnd(1000) - 500);
    case 1: { // any safe integer, boundaries included
      const v = pick([SAFE, -SAFE, 0, 2 ** 52, -(2 ** 31), Number(next64() >> 11n) * pick([1, -1])]);
      return String(Math.abs(v) > SAFE ? Math.sign(v) * SAFE : v);
    }
    case 2: return pick(['-0', '0', '-0.0', '0e10', '0.000E-3']);
    case 3: { // a decimal literal in ordinary ranges, odd spellings
      const ip = String(rnd(100000));
      const fp = chance(0.7) ? '.' + String(rnd(1000000)).padStart(rnd(8) + 1, '0') : '';
      const ex = chance(0.5) ? pick(['e', 'E']) + pick(['', '+', '-']) + String(rnd(40)) : '';
      return (chance(0.2) ? '-' : '') + ip + (fp || (ex ? '' : '.5')) + ex;
    }
    case 4: { // near the plain/exponent switches of Number::toString
      const b = pick([1e21, 1e-6, 1e-7, 2 ** 53, 1e20, 9.999999999999997e-7, 999999999999999900000]);
      return spellDouble(b * pick([1, -1, 1 + Number.EPSILON, 1 - Number.EPSILON / 2]));
    }
    case 5: { // many digits: the slow path of the parser
      let d = String(1 + rnd(9));
      for (let k = 20 + rnd(60); k > 0; k--) d += String(rnd(10));
      return d.slice(0, 1) + '.' + d.slice(1) + 'e' + String(rnd(400) - 200);
    }
    default: return spellDouble(bitsDouble());
  }
}

function value (depth) {
  const r = rnd(depth >= 6 ? 6 : 10);
  switch (r) {
    case 0: return pick(['true', 'false', 'null']);
    case 1: case 2: return number();
    case 3: case 4: case 5: return str(12)[0];
    case 6: case 7: return object(depth + 1);
    default: return array(depth + 1);
  }
}

function array (depth) {
  const n = rnd(6);
  const parts = [];
  for (let k = 0; k < n; k++) parts.push(ws() + value(depth) + ws());
  return '[' + (n ? parts.join(',') : ws()) + ']';
}

function object (depth) {
  const n = rnd(depth <= 1 ? 10 : 6);
  const seen = new Set();
  const parts = [];
  for (let k = 0; k < n; k++) {
    const [text, v] = name();
    if (seen.has(v)) continue; // duplicates belong to the strict set only
    seen.add(v);
    parts.push(ws() + text + ws() + ':' + ws() + value(depth) + ws());
  }
  return '{' + (parts.length ? parts.join(',') : ws()) + '}';
}

// Documents only we refuse, with the message each must get.
function strict () {
  switch (rnd(5)) {
    case 0: return ['{"a":1,"\\u0061":2}', 'duplicate member name'];
    case 1: {
      const [text, v] = name();
      let alt = '"';
      for (const ch of v) alt += spell(ch.codePointAt(0));
      return ['{' + text + ':1,' + alt + '"' + ':2}', 'duplicate member name'];
    }
    case 2: return ['[' + String(BigInt(SAFE) + 1n + BigInt(rnd(1000000))) + ']', 'is beyond 2^53-1'];
    case 3: return ['{"x":' + pick(['1e-400', '-2e-999', '2.4703282292062327e-324']) + '}', 'underflows to zero'];
    default: return ['["' + pick(['\\ud800', '\\udfff', '\\ud83dx', '\\ude00\\ud83d']) + '"]', 'lone surrogate'];
  }
}

// ---------------------------------------------------------------- run
const docs = [];
for (let i = 0; i < NDOCS; i++) {
  if (i % STRICT_EVERY === STRICT_EVERY - 1) {
    const [text, why] = strict();
    docs.push({ text, strict: why });
  } else {
    const top = rnd(10);
    const text = ws() + (top < 6 ? object(0) : top < 9 ? array(0) : value(0)) + ws();
    docs.push({ text, strict: null });
  }
}

const frames = [];
for (const d of docs) {
  const b = Buffer.from(d.text, 'utf8');
  frames.push(Buffer.from(b.length + '\n'), b);
}
const run = runCli(cli, Buffer.concat(frames), 'diff.jcs_cli');

// Parse the answer frames.
const out = run.stdout;
const answers = [];
for (let p = 0; p < out.length;) {
  const nl = out.indexOf(0x0a, p);
  const m = /^([OEN]) (\d+)$/.exec(out.subarray(p, nl).toString('latin1'));
  if (nl < 0 || !m) break;
  const n = Number(m[2]);
  answers.push({ status: m[1], bytes: out.subarray(nl + 1, nl + 1 + n) });
  p = nl + 1 + n;
}
if (answers.length !== docs.length) {
  fail('diff.frames', `${answers.length} answers for ${docs.length} documents`);
  process.exit(1);
}

const show = (s) => JSON.stringify(s.length > 300 ? s.slice(0, 300) + '...' : s);
let nBoth = 0; let nSame = 0; let nOursRefused = 0; let nTheirsRefused = 0;
let nStrict = 0; let nStrictOk = 0;
const mismatches = []; const oursRefused = []; const theirsRefused = []; const strictBad = [];
docs.forEach((d, i) => {
  const a = answers[i];
  if (d.strict) {
    nStrict++;
    if (a.status === 'E' && a.bytes.toString('utf8').includes(d.strict)) nStrictOk++;
    else strictBad.push(`#${i} ${show(d.text)}: ${a.status} ${show(a.bytes.toString('utf8'))}, want a refusal with "${d.strict}"`);
    return;
  }
  let theirs = null;
  try {
    theirs = Buffer.from(canonicalize(JSON.parse(d.text)), 'utf8');
  } catch (e) {
    nTheirsRefused++;
    if (theirsRefused.length < 3) theirsRefused.push(`#${i} ${show(d.text)}: ${e.message}`);
  }
  if (a.status !== 'O') {
    nOursRefused++;
    if (oursRefused.length < 3) oursRefused.push(`#${i} ${show(d.text)}: ${a.status} ${a.bytes.toString('utf8')}`);
  }
  if (theirs && a.status === 'O') {
    nBoth++;
    if (Buffer.compare(theirs, a.bytes) === 0) nSame++;
    else if (mismatches.length < 5) {
      mismatches.push(`#${i} ${show(d.text)}: ours ${show(a.bytes.toString('utf8'))}, canonicalize ${show(theirs.toString('utf8'))}`);
    }
  }
});

console.log(`   ${docs.length} documents (seed ${SEED}): both accepted ${nBoth}, identical ${nSame}; ` +
  `refused by ours ${nOursRefused}, by canonicalize ${nTheirsRefused}; strict cases ${nStrict}, refused as designed ${nStrictOk}`);

if (docs.length >= 10000 || process.env.DIFF_DOCS) pass('diff.generated');
else fail('diff.generated', `only ${docs.length} documents`);

if (nBoth === nSame && nBoth > 0) pass('diff.identical');
else fail('diff.identical', `${nBoth - nSame} of ${nBoth} differ: ${mismatches.join(' | ')}`);

// Outside the strict set the generator writes only what both must accept.
if (nOursRefused === 0) pass('diff.ours-accepts');
else fail('diff.ours-accepts', `${nOursRefused} generated documents refused: ${oursRefused.join(' | ')}`);
if (nTheirsRefused === 0) pass('diff.canonicalize-accepts');
else fail('diff.canonicalize-accepts', `${nTheirsRefused} generated documents refused: ${theirsRefused.join(' | ')}`);

if (nStrict > 0 && nStrictOk === nStrict) pass('diff.strict-refusals');
else fail('diff.strict-refusals', `${nStrict - nStrictOk} of ${nStrict} not refused as designed: ${strictBad.slice(0, 3).join(' | ')}`);

process.exit(report.ok ? 0 : 1);

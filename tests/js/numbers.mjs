// numbers.mjs: differential test of the number conversions (ext/shortest.c
// through ext/canonical.c) against Node's own Number::toString, which is
// what JSON.stringify and RFC 8785 print.
//
// Usage: node numbers.mjs NUM_CLI   (TEST_WRAP, if set, is put in front of
//        it; NUM_SEED and NUM_RANDOM override the seed and the number of
//        random doubles, 1,000,000 by default)
//
// Doubles checked, each printed from its bits (idem_jcs_number) and, where
// the canonicaliser accepts the literal, parsed back from two spellings
// (its 17-significant-digit exponent form and Node's own text, which must
// be a fixed point):
//   - every power of two from 2^-1074 to 2^1023 and its two neighbours;
//   - NUM_RANDOM doubles from random 64-bit patterns (finite ones, both
//     signs, subnormals included).
// Decimal texts checked through the parser (Node's JSON.parse rounds
// correctly; the canonical text must equal JSON.stringify of its result):
//   - literals of 16 and 17 digits at and around a double's own digits
//     (NUM_RANDOM / 10 random doubles, every power of ten, neighbours);
//   - the exact decimal halfway between two neighbouring doubles (a tie,
//     which rounds to the even one), and the same a hair above and below;
//   - random decimals of 1 to 40 significant digits and any exponent, the
//     ones Node turns into 0 or Infinity being refusals we must give.
// Integer literals beyond 2^53-1 are refused by design and never sent.
//
// Prints one "PASS name" / "FAIL name: why" line per check.
import { runCli, report, fail, pass } from './run_cli.mjs';

const cli = process.argv[2];
if (!cli) {
  console.error('usage: node numbers.mjs NUM_CLI');
  process.exit(2);
}
const SEED = Number(process.env.NUM_SEED || '20261130') >>> 0;
const NRANDOM = Number(process.env.NUM_RANDOM || '1000000');

// ---------------------------------------------------------------- PRNG
// mulberry32: deterministic, fast, 32 bits a call.
let st = SEED;
function next32 () {
  st = (st + 0x6d2b79f5) >>> 0;
  let t = st;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return (t ^ (t >>> 14)) >>> 0;
}
const rnd = (n) => next32() % n;

// ---------------------------------------------------------------- doubles
const dv = new DataView(new ArrayBuffer(8));
const hex = (v) => { dv.setFloat64(0, v); return dv.getBigUint64(0).toString(16).padStart(16, '0'); };
const fromBits = (b) => { dv.setBigUint64(0, b); return dv.getFloat64(0); };
const bitsOf = (v) => { dv.setFloat64(0, v); return dv.getBigUint64(0); };
function nextUp (v) { return v < 0 ? -nextDown(-v) : (v === 0 ? fromBits(1n) : fromBits(bitsOf(v) + 1n)); }
function nextDown (v) { return v <= 0 ? -nextUp(-v) : fromBits(bitsOf(v) - 1n); }

const SAFE = 9007199254740991;
// Node's text is an integer literal (no '.', no exponent) beyond 2^53-1:
// refused by design, so not sent to the parser.
const bigIntegerText = (s) => !/[.e]/.test(s) && Math.abs(Number(s)) > SAFE;

// ---------------------------------------------------------------- requests
const req = []; // request lines
const want = []; // {kind, text}: 'O' with the text, or 'E' with a phrase

function addDouble (group, v) {
  const text = JSON.stringify(v);
  req.push('b ' + hex(v));
  want.push({ group, kind: 'O', text, what: 'bits ' + hex(v) });
  if (!bigIntegerText(text)) {
    req.push('t ' + text);
    want.push({ group: group + '.reparse', kind: 'O', text, what: 'literal ' + text });
  }
  const e17 = v.toExponential(16); // nearest 17-digit decimal: reads back as v
  req.push('t ' + e17);
  want.push({ group: group + '.17-digits', kind: 'O', text, what: 'literal ' + e17 });
}

// Every power of two and its neighbours.
for (let e = -1074; e <= 1023; e++) {
  const v = e < -1022 ? fromBits(1n << BigInt(e + 1074)) : fromBits(BigInt(e + 1023) << 52n);
  addDouble('numbers.powers-of-two', v);
  addDouble('numbers.neighbours', nextUp(v));
  if (e > -1074) addDouble('numbers.neighbours', nextDown(v));
}

// Random bit patterns.
let nRandom = 0;
while (nRandom < NRANDOM) {
  dv.setUint32(0, next32());
  dv.setUint32(4, next32());
  const v = dv.getFloat64(0);
  if (!Number.isFinite(v) || v === 0) continue;
  addDouble('numbers.random-bits', v);
  nRandom++;
}

// The exact decimal text of (n / 2^d), n and d >= 0 BigInts.
function exactDecimal (n, d) {
  if (d === 0n) return n.toString() + '.0';
  const digits = (n * 5n ** d).toString().padStart(Number(d) + 1, '0');
  const cut = digits.length - Number(d);
  return digits.slice(0, cut) + '.' + digits.slice(cut);
}

// Ties: the midpoint between a positive double and the next one up.
function addTie (v) {
  dv.setFloat64(0, v);
  const b = dv.getBigUint64(0);
  const be = (b >> 52n) & 0x7ffn;
  const frac = b & ((1n << 52n) - 1n);
  const c = be === 0n ? frac : frac | (1n << 52n);
  const q = be === 0n ? -1074n : be - 1075n;
  // midpoint = (2c + 1) 2^(q-1)
  const n = 2n * c + 1n;
  let mid, above, below;
  if (q - 1n >= 0n) { // an integer
    const m = n << (q - 1n);
    mid = m.toString() + '.0';
    above = m.toString() + '.000000000000000000001';
    below = (m - 1n).toString() + '.99999999999999999999';
  } else { // its exact decimal text ends in 5
    mid = exactDecimal(n, 1n - q);
    above = mid + '000000000000000000001';
    below = mid.slice(0, -1) + '499999999999999999999';
  }
  for (const s of [mid, above, below]) {
    const got = JSON.parse(s);
    if (!Number.isFinite(got)) continue;
    req.push('t ' + s);
    if (got === 0) want.push({ group: 'numbers.ties', kind: 'E', text: 'underflows to zero', what: 'literal ' + s.slice(0, 60) });
    else want.push({ group: 'numbers.ties', kind: 'O', text: JSON.stringify(got), what: 'literal ' + s.slice(0, 60) });
  }
}
for (let i = 0; i < 4000; i++) {
  let v;
  do {
    dv.setUint32(0, next32() & 0x7fffffff);
    dv.setUint32(4, next32());
    v = dv.getFloat64(0);
  } while (!Number.isFinite(v) || v === Number.MAX_VALUE);
  addTie(v);
}
for (const v of [fromBits(1n), fromBits(2n), 2 ** 53, 2 ** 54, 1, 0.5, 2 ** -1022, 2 ** 1000]) addTie(v);

// Random decimal texts of 1 to 40 significant digits.
for (let i = 0; i < 100000; i++) {
  const nd = 1 + rnd(40);
  let d = String(1 + rnd(9));
  for (let k = 1; k < nd; k++) d += String(rnd(10));
  const point = rnd(nd + 1);
  const exp = rnd(720) - 360;
  let s = (rnd(4) === 0 ? '-' : '') + d.slice(0, point || 1) + '.' + (d.slice(point || 1) || '0') + 'e' + exp;
  if (rnd(3) === 0) s = s.replace('e', 'E');
  const got = JSON.parse(s);
  req.push('t ' + s);
  if (got === 0) want.push({ group: 'numbers.random-decimals', kind: 'E', text: 'underflows to zero', what: 'literal ' + s });
  else if (!Number.isFinite(got)) want.push({ group: 'numbers.random-decimals', kind: 'E', text: 'overflows a double', what: 'literal ' + s });
  else want.push({ group: 'numbers.random-decimals', kind: 'O', text: JSON.stringify(got), what: 'literal ' + s });
}

// Literals of 16 and 17 significant digits at and around a double's own
// (its 17-digit nearest and its 16-digit nearest, each moved by -2..+2 in
// the last digit), spelled as D.DDDe+X, D.DDDe-0X / D.DDDe0X, D.DDDEX and,
// where the point falls inside the digits, as a fixed point: the parser
// proves most such literals to be the printed digits without the shortest
// search (and keeps or copies their mantissa), and must fall back to it
// everywhere else (a shorter decimal rounds to the same double, a
// nearer one exists, or the literal is another double's). Doubles from
// random bits, every power of ten and both neighbours of each.
function digitsOf (text) { // "d.ddde[+-]x" -> [BigInt digits, x]
  const [m, x] = text.split('e');
  return [BigInt(m.replace('.', '').replace('-', '')), Number(x)];
}
function spellingsOf (W, x, neg) {
  const ds = W.toString();
  const sign = neg ? '-' : '';
  const m = sign + (ds.length > 1 ? ds[0] + '.' + ds.slice(1) : ds);
  const out = [m + 'e' + (x < 0 ? '-' : '+') + Math.abs(x)];
  // as C's printf and Python's repr spell it (two exponent digits at
  // least, no '+' or an explicit one), and with 'E'
  out.push(m + (x < 0 ? 'e-' : 'e') + String(Math.abs(x)).padStart(2, '0'));
  out.push(m + 'E' + x);
  if (x >= 0 && x + 1 < ds.length) out.push(sign + ds.slice(0, x + 1) + '.' + ds.slice(x + 1));
  else if (x < 0 && x > -12) out.push(sign + '0.' + '0'.repeat(-x - 1) + ds);
  return out;
}
function addNearShortest (v) {
  for (const p of [16, 17]) {
    const [W, x] = digitsOf(Math.abs(v).toExponential(p - 1));
    for (let delta = -2n; delta <= 2n; delta++) {
      let W2 = W + delta;
      let x2 = x;
      if (W2.toString().length > p) { W2 /= 10n; x2++; }
      if (W2.toString().length < p) { W2 = W2 * 10n + 9n; x2--; }
      for (const s of spellingsOf(W2, x2, v < 0)) {
        const got = JSON.parse(s);
        req.push('t ' + s);
        if (got === 0) want.push({ group: 'numbers.near-shortest', kind: 'E', text: 'underflows to zero', what: 'literal ' + s });
        else if (!Number.isFinite(got)) want.push({ group: 'numbers.near-shortest', kind: 'E', text: 'overflows a double', what: 'literal ' + s });
        else want.push({ group: 'numbers.near-shortest', kind: 'O', text: JSON.stringify(got), what: 'literal ' + s });
      }
    }
  }
}
for (let k = -323; k <= 308; k++) {
  const v = Number('1e' + k);
  addNearShortest(v);
  addNearShortest(nextUp(v));
  if (v > Number.MIN_VALUE) addNearShortest(nextDown(v));
}
for (let i = 0; i < Math.max(1000, NRANDOM / 10); i++) {
  let v;
  do {
    dv.setUint32(0, next32());
    dv.setUint32(4, next32());
    v = dv.getFloat64(0);
  } while (!Number.isFinite(v) || v === 0);
  addNearShortest(v);
}

// ---------------------------------------------------------------- run
const run = runCli(cli, req.join('\n') + '\n', 'numbers.num_cli');

const answers = run.stdout.toString('latin1').split('\n');
answers.pop(); // after the last newline
if (answers.length !== req.length) {
  fail('numbers.answers', `${answers.length} answers for ${req.length} requests`);
  process.exit(1);
}

const groups = new Map();
want.forEach((w, i) => {
  if (!groups.has(w.group)) groups.set(w.group, { n: 0, bad: 0, first: [] });
  const g = groups.get(w.group);
  const a = answers[i];
  g.n++;
  const good = w.kind === 'O' ? a === 'O ' + w.text : a.startsWith('E ') && a.includes(w.text);
  if (!good) {
    g.bad++;
    if (g.first.length < 3) g.first.push(`${w.what}: got ${JSON.stringify(a.slice(0, 120))}, want ${w.kind === 'O' ? w.text : 'a refusal with "' + w.text + '"'}`);
  }
});
for (const [name, g] of groups) {
  console.log(`   ${name}: ${g.n} cases, ${g.bad} differ`);
  if (g.bad === 0 && g.n > 0) pass(name);
  else fail(name, `${g.bad} of ${g.n} differ from Node: ${g.first.join(' | ')}`);
}
process.exit(report.ok ? 0 : 1);

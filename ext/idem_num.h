/*
** idem_num.h: the exact double <-> decimal conversion of shortest.c, and
** the inline 128-bit arithmetic that canonical.c runs for every number
** with 16 or 17 significant digits. Only those two files (and the unit
** tests of the numbers) include it; nothing here uses SQLite.
*/
#ifndef IDEM_NUM_H
#define IDEM_NUM_H

#include <stdint.h>

/* ------------------------------------------------------------------ */
/* Interface to code in shortest.c: exact double <-> decimal          */
/* ------------------------------------------------------------------ */

/*
** The shortest decimal s x 10^(*pE10) that reads back as the finite,
** positive double v, nearest to v when several are shortest, even on a
** tie: the digits ECMAScript Number::toString prints. Returns s (at most
** 17 digits; it may end in zeros, which the caller strips).
*/
uint64_t idem_shortest(double v, int *pE10);

/*
** The double nearest to the decimal w x 10^e, ties to even, into *pV; w
** (non-zero) holds the first 19 significant digits, and bMore says that
** non-zero digits follow them (then the value is above w x 10^e). Returns
** 1, or 0 when w and e cannot decide (rare: within 2^-72 of a tie, a
** subnormal result, e outside the table, or digits beyond the 19th that
** matter); then call idem_strtod on the whole literal. May give an
** infinity.
*/
int idem_decimal_to_double(uint64_t w, int e, int bMore, double *pV);

/*
** Both directions at once for the decimal w x 10^e, w (non-zero) being
** all its significant digits: the shortest digits of the double nearest
** to it, as idem_shortest gives them, into *pS and *pE10. Returns 1; 2
** when the double overflows; 0 when w and e cannot decide the double
** (idem_decimal_to_double's rare cases: call idem_strtod).
*/
int idem_decimal_shortest(uint64_t w, int e, uint64_t *pS, int *pE10);

/*
** strtod_l in the "C" locale (correctly rounded in glibc, musl and the
** BSDs; no setlocale() of the host changes it): zLit is a NUL-terminated
** JSON number. Returns IDEM_JCS_OK, or IDEM_JCS_NOMEM (idem_internal.h) when the locale
** object cannot be made.
*/
int idem_strtod(const char *zLit, double *pV);

/* For the unit tests: the table of powers of ten and the fixed-point
** logarithms behind both conversions. */
#define IDEM_POW10_MIN (-342)
#define IDEM_POW10_MAX 324
extern const uint64_t idem_pow10_128[IDEM_POW10_MAX - IDEM_POW10_MIN + 1][2];
int idem_flog10_pow2(int e);                /* floor(e log10 2), |e| <= 1100 */
int idem_flog10_three_quarters_pow2(int e); /* floor(log10(3/4 2^e)) */
int idem_flog2_pow10(int e);                /* floor(e log2 10), |e| <= 400 */

/*
** The parts of shortest.c that canonical.c runs inline for every number
** with 16 or 17 significant digits (see shortest.c's header): the parse
** by one 128-bit product, and the proof that the literal is already the
** shortest. idem_schubfach is the shortest search for c 2^q itself.
*/
uint64_t idem_schubfach(uint64_t c, int q, int *pE10);

/* The 128-bit product of a and b: returns the low half, *pHi the high. */
static inline uint64_t idem_umul128(uint64_t a, uint64_t b, uint64_t *pHi) {
#if defined(__SIZEOF_INT128__)
  unsigned __int128 p = (unsigned __int128)a * b;
  *pHi = (uint64_t)(p >> 64);
  return (uint64_t)p;
#else
  uint64_t a0 = (uint32_t)a, a1 = a >> 32, b0 = (uint32_t)b, b1 = b >> 32;
  uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  uint64_t mid = (p00 >> 32) + (uint32_t)p01 + (uint32_t)p10;
  *pHi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
  return (mid << 32) | (uint32_t)p00;
#endif
}

/* floor(x g / 2^64) for a 128-bit g = {hi, lo}: the high half into *pHi,
** the low half returned (x g < 2^192, so the result fits 128 bits). */
static inline uint64_t idem_mul_shift64(uint64_t x, const uint64_t *g, uint64_t *pHi) {
  uint64_t tHi, bHi, bLo;
  idem_umul128(x, g[1], &tHi);
  bLo = idem_umul128(x, g[0], &bHi);
  bLo += tHi;
  *pHi = bHi + (bLo < tHi);
  return bLo;
}

/* What idem_parse_mant learns, for idem_parse_exp and idem_literal_is_shortest. */
typedef struct IdemParseInfo IdemParseInfo;
struct IdemParseInfo {
  const uint64_t *g; /* the table entry for 10^e */
  uint64_t mHi, mLo; /* m = floor((w << lz) g / 2^64) */
  uint64_t mant;     /* m's top 53 bits rounded: 2^52..2^53 inclusive */
  int lz, sh;        /* w's shift; the bits of m below the significand */
  int up;            /* m was rounded up to the double */
};

/*
** The significand of the double nearest to w 10^e (w > 0, -342 <= e <=
** 324) into pI: returns 1, or 0 when the product cannot decide it (see
** shortest.c's header). With w shifted left until its top bit is set,
** and g the table entry for 10^e, m = floor(w g / 2^64) is a 128-bit
** number in [2^126, 2^128), and the exact w 10^e / 2^(r+64) lies in
** (m - 1, m + 1). The significand is m's top 53 bits, rounded to nearest
** by the sh = 74 or 75 bits below them (frac), ties to even; it may carry
** out to 2^53 (idem_parse_exp renormalises).
*/
static inline int idem_parse_mant(uint64_t w, int e, IdemParseInfo *pI) {
  const uint64_t *g;
  uint64_t mHi, mLo, fracHi, halfHi;
  int lz, sh;
  if (e < IDEM_POW10_MIN || e > IDEM_POW10_MAX) return 0;
  g = idem_pow10_128[e - IDEM_POW10_MIN];
  lz = __builtin_clzll(w);
  w <<= lz;
  mLo = idem_mul_shift64(w, g, &mHi);
  sh = (int)(mHi >> 63) + 74;
  /* frac against half a unit: fracHi:mLo vs halfHi:0 */
  fracHi = mHi & ((((uint64_t)1) << (sh - 64)) - 1);
  halfHi = (uint64_t)1 << (sh - 65);
  if ((fracHi == halfHi && mLo <= 1) || (fracHi == halfHi - 1 && mLo == ~(uint64_t)0)) {
    return 0; /* frac is within one unit of half: too near a tie */
  }
  pI->up = fracHi >= halfHi; /* frac > half + 1, else frac < half - 1 */
  pI->mant = (mHi >> (sh - 64)) + (uint64_t)pI->up;
  pI->g = g;
  pI->mHi = mHi;
  pI->mLo = mLo;
  pI->lz = lz;
  pI->sh = sh;
  return 1;
}

/* After idem_parse_mant(w, e, pI): the double as c 2^q (2^52 <= c <
** 2^53, or q > 971 for an overflow, q < -1074 for a result that is
** subnormal or zero, which this path does not round). */
static inline void idem_parse_exp(const IdemParseInfo *pI, int e, uint64_t *pC, int *pQ) {
  int e2 = pI->sh + 64 - pI->lz + (int)(((int64_t)e * 913124641741LL) >> 38) - 127;
  uint64_t mant = pI->mant; /* floor(e log2 10) above, as flog2_pow10 */
  if (mant == ((uint64_t)1 << 53)) {
    mant >>= 1;
    e2++;
  }
  *pC = mant;
  *pQ = e2;
}

/* Both: the double nearest to w 10^e as c 2^q (see idem_parse_exp);
** returns 1, or 0 when the product cannot decide it or the result is
** subnormal or zero. */
static inline int idem_parse_bits(uint64_t w, int e, uint64_t *pC, int *pQ, IdemParseInfo *pI) {
  if (!idem_parse_mant(w, e, pI)) return 0;
  idem_parse_exp(pI, e, pC, pQ);
  return *pQ >= -1074;
}

/*
** Whether w 10^e, the exact value of a literal of 16 or 17 significant
** digits that idem_parse_mant read as the double v = c 2^q (normal and
** finite; 2^52 < c < 2^53 before any renormalisation, pI->mant strictly
** between), is the decimal ECMAScript prints for v: then the shortest
** search is not needed. Returns 1 only when that is proven below; 0 says
** nothing (the caller runs Schubfach).
**
** Work in the units of m (idem_parse_mant): the exact decimal D = w 10^e is
** X, with m - 1 < X < m + 1; one unit of w (u = 10^e) is
** U = 2^lz G / 2^64 for the exact G = 10^e / 2^r, g - 1 <= G < g; v is
** V = c 2^sh, its ulp 2^sh, half a ulp H = 2^(sh-1). With f = m mod
** 2^sh, v is below D by about a = f (rounded down: X - V in (a-1, a+1))
** or above it by about a = 2^sh - f (rounded up: V - X in (a-1, a+1)).
**
** ECMAScript prints the fewest digits whose decimal rounds to v, and of
** those the nearest to v (ties even). The decimals that round to v lie
** in [V - H, V + H] (ends included or not with the parity of c: every
** test below is strict with a margin, so that does not matter). D rounds
** to v, so it is a candidate, and it is the one printed if:
**  (1) no decimal with fewer digits rounds to v. Let N = 10^(nd-1) <= w
**      (nd = 16 or 17). A decimal y >= N u with k < nd significant
**      digits is s' 10^t with 10^(k+t) > y >= 10^(nd-1) u, so t > e: a
**      multiple of 10u. The nearest multiples of 10u around D are
**      D - d u and D + (10 - d) u, d being the last digit of w (d > 0);
**      both are outside [V - H, V + H] when d U > (X - V) + H and
**      (10 - d) U > H - (X - V). Nothing below N u rounds to v: since
**      |D - v| <= H, v - H >= D - 2H, and 2H = ulp(v) <= 2^-52 v <
**      2^-52 10^17 u (1 + 2^-53) < 23 u, so with w >= N + 32 the interval
**      stays above (N + 9) u.
**  (2) D is strictly the nearest to v of the decimals with nd digits:
**      those at or above N u have unit u (D + j u, the nearest being D
**      when |X - V| < U / 2) or are multiples of 10u (excluded by (1)).
**
** The tests run on 64-bit values in units of 2^s, s = sh - 56 (18 or
** 19): F = floor(f / 2^s), A from F as a from f, H' = 2^55, and
** UG = floor(g.hi 2^lz / 2^(64+s)) (lz <= 14 < s). Each is within 3
** units of its exact counterpart (m against X: 1 unit of m; g against
** G: below 2^lz units of m; the dropped bits: below 1 unit of 2^s), so
** d UG is within 30 of d U / 2^s, and a margin of 64 units in each test
** makes a pass imply the exact inequality. U / 2^s <= 2^56 c / w < 2^56
** 2^53 / 10^15 < 10 2^56, so 10 UG, A + H' and the margins fit 64 bits.
** At c = 2^52 the gap below v is half as wide and the tests do not
** apply (the caller excludes it).
*/
static inline int idem_literal_is_shortest(uint64_t w, const IdemParseInfo *pI) {
  const uint64_t N16 = 1000000000000000u, N17 = 10000000000000000u;
  const uint64_t H = (uint64_t)1 << 55, M = 64;
  uint64_t d, F, A, UG, lo, hi;
  int s;
  if (w - (N16 + 32) >= 10 * N17 - (N16 + 32) || w - N17 < 32) return 0;
  d = w % 10;
  if (d == 0) return 0;
  s = pI->sh - 56;
  F = ((pI->mHi & ((((uint64_t)1) << (pI->sh - 64)) - 1)) << (64 - s)) | (pI->mLo >> s);
  A = pI->up ? ((uint64_t)1 << 56) - F : F;
  UG = pI->g[0] >> (s - pI->lz);
  if (2 * A + M >= UG) return 0; /* (2) */
  lo = d * UG;                   /* (1): the multiples of 10u below and above */
  hi = (10 - d) * UG;
  if (pI->up) return lo + A > H + M && hi > H + A + M;
  return lo > A + H + M && hi + A > H + M;
}

#endif /* IDEM_NUM_H */

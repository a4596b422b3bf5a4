/*
** canonical.c: RFC 8785 (JSON Canonicalization Scheme) for tool arguments.
**
** A purpose-built strict I-JSON parser and JCS printer. It does not
** include SQLite: the SQL functions idem_canonical(), idem_fingerprint()
** and idem_key() (keyfuncs.c, over grammar.c) sit on top of it, and the C
** unit tests and the fuzz target link it alone.
**
** How it works: the input is parsed once into a flat array of nodes.
** Strings without escapes and numbers whose canonical text equals their
** literal point into the input; everything else is decoded into one
** auxiliary buffer. When an object closes, its members are sorted by the
** UTF-16 code units of their decoded names and a duplicate name is an
** error. The tree is then printed through a small staging buffer into a
** sink (a growable buffer, or an XXH3 state that never holds the whole
** text). A number is read into a double and printed back in its shortest
** ECMAScript form by shortest.c, exactly, without the C library's
** formatting or the locale.
**
** Input rules (each refusal names the rule and the byte offset):
** no leading BOM; RFC 8259 grammar; no trailing bytes; valid UTF-8 and no
** lone surrogate; no duplicate member names (compared decoded); numbers
** that are finite doubles, not underflowing to zero; integer literals
** (no fraction, no exponent) within +-(2^53-1); at most IDEM_JCS_MAX_DEPTH
** nested containers; at most IDEM_JCS_MAX_BYTES of input. U+0000 inside a
** string is kept and printed as \u0000, never truncated.
**
** Stored JSON (a ledger's result, error, members; idem_jcs_stored_form and
** idem_jcs_check_stored) follows the same rules and is printed the same
** way, except for numbers: any RFC 8259 number is valid and is kept
** exactly as written (1.0, -0, 1234567890123456789, 1e400), since a result
** is not a key and a target's 64-bit id must come back digit for digit.
*/
#include "idem_internal.h"
#include "idem_num.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *libc_malloc(size_t n) { return malloc(n); }
static void *libc_realloc(void *p, size_t n) { return realloc(p, n); }
static void libc_free(void *p) { free(p); }
const IdemMem idem_libc_mem = {libc_malloc, libc_realloc, libc_free};

/* ------------------------------------------------------------------ */
/* Growable buffer                                                     */
/* ------------------------------------------------------------------ */

static int buf_reserve(IdemBuf *b, size_t extra) {
  size_t need, nNew;
  char *z;
  if (extra <= b->nAlloc - b->n) return IDEM_JCS_OK;
  need = b->n + extra;
  if (need < b->n) return IDEM_JCS_NOMEM;
  nNew = b->nAlloc ? b->nAlloc : 256;
  while (nNew < need) {
    if (nNew > ((size_t)-1) / 2) return IDEM_JCS_NOMEM;
    nNew *= 2;
  }
  if (b->z != 0 && b->z == b->zStatic) {
    z = b->pMem->xMalloc(nNew);
    if (z == 0) return IDEM_JCS_NOMEM;
    memcpy(z, b->z, b->n);
  } else {
    z = b->pMem->xRealloc(b->z, nNew);
    if (z == 0) return IDEM_JCS_NOMEM;
  }
  b->z = z;
  b->nAlloc = nNew;
  return IDEM_JCS_OK;
}

int idem_buf_sink(void *pBuf, const char *p, size_t n) {
  IdemBuf *b = (IdemBuf *)pBuf;
  int rc;
  if (n == 0) return IDEM_JCS_OK; /* b->z may still be NULL: no NULL+0 */
  rc = buf_reserve(b, n);
  if (rc) return rc;
  memcpy(b->z + b->n, p, n);
  b->n += n;
  return IDEM_JCS_OK;
}

void idem_buf_free(IdemBuf *b) {
  if (b->z && b->z != b->zStatic) b->pMem->xFree(b->z);
  b->z = 0;
  b->n = b->nAlloc = 0;
}

/* ------------------------------------------------------------------ */
/* Number formatting (ECMAScript Number::toString, ES2019 7.1.12.1)    */
/* ------------------------------------------------------------------ */

static const uint64_t aPow10u64[20] = {1u,
                                       10u,
                                       100u,
                                       1000u,
                                       10000u,
                                       100000u,
                                       1000000u,
                                       10000000u,
                                       100000000u,
                                       1000000000u,
                                       10000000000u,
                                       100000000000u,
                                       1000000000000u,
                                       10000000000000u,
                                       100000000000000u,
                                       1000000000000000u,
                                       10000000000000000u,
                                       100000000000000000u,
                                       1000000000000000000u,
                                       10000000000000000000u};

/* The eight decimal digits of v (< 10^8, leading zeros kept) at z.
** Little-endian hosts split v into two 4-digit lanes of one word, each
** lane into two 2-digit lanes (x 5243 >> 19 is / 100 below 43699), each
** of those into tens and ones (x 103 >> 10 is / 10 below 179), and add
** '0' to every byte. Both bounds are exact (the first x where either
** product is off is 43699, resp. 179), and every lane stays below them:
** a 4-digit lane is below 10^4 < 43699, a 2-digit lane below 100 < 179. */
static inline void put8(uint32_t v, char *z) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t y = (v / 10000) | ((uint64_t)(v % 10000) << 32);
  uint64_t q = ((y * 5243) >> 19) & 0x0000007F0000007Fu;
  uint64_t t = q | ((y - 100 * q) << 16);
  uint64_t tens = ((t * 103) >> 10) & 0x000F000F000F000Fu;
  uint64_t d = (tens | ((t - 10 * tens) << 8)) + 0x3030303030303030u;
  memcpy(z, &d, 8);
#else
  static const char aDigitPairs[201] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
      "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
      "8081828384858687888990919293949596979899";
  uint32_t hi = v / 10000, lo = v % 10000;
  memcpy(z, aDigitPairs + 2 * (hi / 100), 2);
  memcpy(z + 2, aDigitPairs + 2 * (hi % 100), 2);
  memcpy(z + 4, aDigitPairs + 2 * (lo / 100), 2);
  memcpy(z + 6, aDigitPairs + 2 * (lo % 100), 2);
#endif
}

/* Room es_format may write into: the text (at most 27 bytes) plus the
** tail of fixed-size copies. */
#define ES_ROOM 64

/*
** Format s x 10^e (s > 0, at most 19 digits), negated if neg, the way
** ECMAScript prints the double whose shortest digits those are, into
** zOut, which must have ES_ROOM bytes: every copy below is of a fixed 24
** bytes (no library call) and may write past the text. Returns the length
** of the text (at most 27; not NUL-terminated).
*/
static int es_format(int neg, uint64_t s, int e, char *zOut) {
  char a[64], *zDig, *z = zOut;
  int k, n;
  /* k = the number of digits of s: about bits x log10(2), then one
  ** comparison to settle it */
  k = ((64 - __builtin_clzll(s)) * 1233) >> 12;
  k += k < 19 && s >= aPow10u64[k];
  /* the digits of s right-aligned in a[8..32), 8 at a time, then zeros */
  put8((uint32_t)(s % 100000000), a + 24);
  if (k > 8) put8((uint32_t)(s / 100000000 % 100000000), a + 16);
  if (k > 16) put8((uint32_t)(s / 10000000000000000u), a + 8);
  memset(a + 32, '0', 32);
  zDig = a + 32 - k;
  while (zDig[k - 1] == '0') { /* trailing zeros go to the exponent */
    k--;
    e++;
  }
  n = k + e; /* the value is 0.zDig x 10^n */
  if (neg) *z++ = '-';
  if (k <= n && n <= 21) {
    memcpy(z, zDig, 24); /* k digits, then the zeros after a[32] */
    z += n;
  } else if (0 < n && n <= 21) {
    memcpy(z, zDig, 24);
    z[n] = '.';
    memcpy(z + n + 1, zDig + n, 24);
    z += k + 1;
  } else if (-6 < n && n <= 0) {
    memcpy(z, "0.000000", 8);
    memcpy(z + 2 - n, zDig, 24);
    z += 2 - n + k;
  } else {
    int x = n - 1;
    z[0] = zDig[0];
    if (k > 1) {
      z[1] = '.';
      memcpy(z + 2, zDig + 1, 24);
      z += k + 1;
    } else {
      z++;
    }
    *z++ = 'e';
    *z++ = x < 0 ? '-' : '+';
    if (x < 0) x = -x;
    if (x >= 100) *z++ = (char)('0' + x / 100);
    if (x >= 10) *z++ = (char)('0' + x / 10 % 10);
    *z++ = (char)('0' + x % 10);
  }
  return (int)(z - zOut);
}

int idem_jcs_number(double v, char *zOut) {
  char zBuf[ES_ROOM];
  int e, n;
  uint64_t s;
  if (v == 0.0) {
    zOut[0] = '0';
    zOut[1] = 0;
    return 1;
  }
  s = idem_shortest(fabs(v), &e);
  n = es_format(v < 0, s, e, zBuf);
  memcpy(zOut, zBuf, (size_t)n);
  zOut[n] = 0;
  return n;
}

/* ------------------------------------------------------------------ */
/* Parser                                                              */
/* ------------------------------------------------------------------ */

enum { N_NULL, N_TRUE, N_FALSE, N_NUM, N_STR, N_ARR, N_OBJ };

/* One parsed value. For N_STR/N_NUM the text is z[off..off+n) of the
** input (inAux==0) or of the aux buffer (inAux==1); for containers
** kids[off..off+n) are the children (object: the member-name nodes, in
** canonical order, each with val = its value node). */
typedef struct Node Node;
struct Node {
  unsigned char type;
  unsigned char inAux;
  uint32_t n;
  uint32_t off;
  uint32_t val;
};

typedef struct Parser Parser;
struct Parser {
  const unsigned char *z; /* input */
  size_t nIn;
  size_t i; /* cursor */
  const IdemMem *pMem;
  Node *aNode;
  uint32_t nNode, nNodeAlloc;
  uint32_t *aKid; /* finished children lists, then a scratch area */
  uint32_t nKid, nKidAlloc;
  uint32_t *aStk; /* children of open containers */
  uint32_t nStk, nStkAlloc;
  IdemBuf aux;
  int depth;
  IdemJcsError *pErr;
  int bStored; /* stored JSON: every number kept as written, no range rule */
  /* first storage of the three arrays: small documents allocate nothing */
  Node aNodeInit[48];
  uint32_t aKidInit[96];
  uint32_t aStkInit[48];
  char auxInit[512];
};

#define IDEM_INLINE static inline __attribute__((always_inline))

/* Copy n <= 32 bytes with fixed-size moves (two overlapping ones of the
** largest size that fits), reading and writing only [0, n). */
IDEM_INLINE void copy_small(char *zTo, const char *zFrom, size_t n) {
  uint64_t a, b, c, d;
  uint32_t e, f;
  if (n >= 16) {
    memcpy(&a, zFrom, 8);
    memcpy(&b, zFrom + 8, 8);
    memcpy(&c, zFrom + n - 16, 8);
    memcpy(&d, zFrom + n - 8, 8);
    memcpy(zTo, &a, 8);
    memcpy(zTo + 8, &b, 8);
    memcpy(zTo + n - 16, &c, 8);
    memcpy(zTo + n - 8, &d, 8);
  } else if (n >= 8) {
    memcpy(&a, zFrom, 8);
    memcpy(&b, zFrom + n - 8, 8);
    memcpy(zTo, &a, 8);
    memcpy(zTo + n - 8, &b, 8);
  } else if (n >= 4) {
    memcpy(&e, zFrom, 4);
    memcpy(&f, zFrom + n - 4, 4);
    memcpy(zTo, &e, 4);
    memcpy(zTo + n - 4, &f, 4);
  } else {
    while (n--) *zTo++ = *zFrom++;
  }
}

static int fail(Parser *p, size_t off, const char *zFmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(Parser *p, size_t off, const char *zFmt, ...) {
  va_list ap;
  if (p->pErr) {
    p->pErr->offset = off;
    va_start(ap, zFmt);
    vsnprintf(p->pErr->msg, sizeof(p->pErr->msg), zFmt, ap);
    va_end(ap);
  }
  return IDEM_JCS_INVALID;
}

/* Grow array *pa (of nAlloc elements of sz bytes, first stored in
** aInit) to hold at least need elements. */
static int grow_array(Parser *p, void **pa, uint32_t *pnAlloc, uint32_t need, size_t sz,
                      const void *aInit) {
  uint32_t nNew = *pnAlloc;
  void *a;
  while (nNew < need) {
    if (nNew > 0x40000000u) return IDEM_JCS_NOMEM;
    nNew *= 2;
  }
  if (*pa == aInit) {
    a = p->pMem->xMalloc((size_t)nNew * sz);
    if (a == 0) return IDEM_JCS_NOMEM;
    memcpy(a, aInit, (size_t)*pnAlloc * sz);
  } else {
    a = p->pMem->xRealloc(*pa, (size_t)nNew * sz);
    if (a == 0) return IDEM_JCS_NOMEM;
  }
  *pa = a;
  *pnAlloc = nNew;
  return IDEM_JCS_OK;
}

IDEM_INLINE int grow_u32(Parser *p, uint32_t **pa, uint32_t *pnAlloc, uint32_t need,
                         const uint32_t *aInit) {
  if (need <= *pnAlloc) return IDEM_JCS_OK;
  return grow_array(p, (void **)pa, pnAlloc, need, sizeof(uint32_t), aInit);
}

IDEM_INLINE int new_node(Parser *p, int type, uint32_t *piNode) {
  if (p->nNode >= p->nNodeAlloc) {
    int rc =
        grow_array(p, (void **)&p->aNode, &p->nNodeAlloc, p->nNode + 1, sizeof(Node), p->aNodeInit);
    if (rc) return rc;
  }
  *piNode = p->nNode;
  memset(&p->aNode[p->nNode], 0, sizeof(Node));
  p->aNode[p->nNode].type = (unsigned char)type;
  p->nNode++;
  return IDEM_JCS_OK;
}

IDEM_INLINE void skip_ws(Parser *p) {
  while (p->i < p->nIn) {
    unsigned char c = p->z[p->i];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
    p->i++;
  }
}

static int unexpected(Parser *p, const char *zWhat) {
  if (p->i >= p->nIn) {
    return fail(p, p->i, "not valid JSON: unexpected end of input at byte %zu, expected %s", p->i,
                zWhat);
  }
  return fail(p, p->i, "not valid JSON: unexpected byte 0x%02x at byte %zu, expected %s",
              p->z[p->i], p->i, zWhat);
}

/* Decode one UTF-8 sequence at z[i..n); returns its length (1-4) and
** the code point, or 0 if the bytes there are not valid UTF-8 (overlong,
** a surrogate, beyond U+10FFFF, truncated, or a stray continuation). */
IDEM_INLINE int utf8_decode(const unsigned char *z, size_t i, size_t n, uint32_t *pCp) {
  unsigned char c = z[i];
  uint32_t cp;
  int len, k;
  if (c < 0x80) {
    *pCp = c;
    return 1;
  } else if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    cp = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    cp = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > n) return 0;
  for (k = 1; k < len; k++) {
    unsigned char d = z[i + k];
    if ((d & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (d & 0x3F);
  }
  if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
  if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
  *pCp = cp;
  return len;
}

static int hex4(const unsigned char *z, uint32_t *pV) {
  uint32_t v = 0;
  int k;
  for (k = 0; k < 4; k++) {
    unsigned char c = z[k];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= c - '0';
    else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
    else return 0;
  }
  *pV = v;
  return 1;
}

static int aux_put_utf8(Parser *p, uint32_t cp) {
  char a[4];
  size_t n;
  if (cp < 0x80) {
    a[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    a[0] = (char)(0xC0 | (cp >> 6));
    a[1] = (char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    a[0] = (char)(0xE0 | (cp >> 12));
    a[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    a[2] = (char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    a[0] = (char)(0xF0 | (cp >> 18));
    a[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    a[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    a[3] = (char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  return idem_buf_sink(&p->aux, a, n);
}

/* aPlainAscii[c]: c is printable ASCII other than '"' and '\\' (a
** string byte that needs no decoding). aPlainOut[c]: c is printed as it
** is in canonical output (not a control, '"' or '\\'). */
#define R16(x) x, x, x, x, x, x, x, x, x, x, x, x, x, x, x, x
static const unsigned char aPlainAscii[256] = {
    R16(0), R16(0), 1,      1,      0,      1,      1,      1,      1,      1,
    1,      1,      1,      1,      1,      1,      1,      1, /* 0x20: '"' at 0x22 */
    R16(1), R16(1), 1,      1,      1,      1,      1,      1,      1,      1,
    1,      1,      1,      1,      0,      1,      1,      1, /* 0x50: '\\' at 0x5c */
    R16(1), R16(1), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0), R16(0)};
static const unsigned char aPlainOut[256] = {
    R16(0), R16(0), 1,      1,      0,      1,      1,      1,      1,      1,     1, 1,
    1,      1,      1,      1,      1,      1,      R16(1), R16(1), 1,      1,     1, 1,
    1,      1,      1,      1,      1,      1,      1,      1,      0,      1,     1, 1,
    R16(1), R16(1), R16(1), R16(1), R16(1), R16(1), R16(1), R16(1), R16(1), R16(1)};
#undef R16

/* Parse a string at p->i (the opening quote) into node iNode. */
static int parse_string(Parser *p, uint32_t iNode) {
  const unsigned char *z = p->z;
  size_t n = p->nIn, i = p->i + 1, start = i;
  int rc;
  uint32_t cp;
  /* Fast scan: printable ASCII with no escape stays in the input. */
  for (;;) {
    while (i < n && aPlainAscii[z[i]]) i++;
    if (i >= n) {
      p->i = i;
      return fail(p, i, "not valid JSON: unterminated string starting at byte %zu", start - 1);
    }
    if (z[i] == '"') {
      Node *pN = &p->aNode[iNode];
      pN->inAux = 0;
      pN->off = (uint32_t)start;
      pN->n = (uint32_t)(i - start);
      p->i = i + 1;
      return IDEM_JCS_OK;
    }
    if (z[i] < 0x20) {
      return fail(p, i, "control character 0x%02x in a string at byte %zu must be escaped", z[i],
                  i);
    }
    if (z[i] == '\\') break;
    {
      int len = utf8_decode(z, i, n, &cp);
      if (len == 0) return fail(p, i, "invalid UTF-8 byte 0x%02x at byte %zu", z[i], i);
      i += len;
    }
  }
  /* Slow path: decode escapes into the aux buffer. */
  {
    size_t auxStart = p->aux.n;
    rc = idem_buf_sink(&p->aux, (const char *)z + start, i - start);
    if (rc) return rc;
    for (;;) {
      size_t run = i;
      while (i < n && aPlainAscii[z[i]]) i++;
      if (i > run) {
        rc = idem_buf_sink(&p->aux, (const char *)z + run, i - run);
        if (rc) return rc;
      }
      if (i >= n) {
        return fail(p, i, "not valid JSON: unterminated string starting at byte %zu", start - 1);
      }
      if (z[i] == '"') break;
      if (z[i] < 0x20) {
        return fail(p, i, "control character 0x%02x in a string at byte %zu must be escaped", z[i],
                    i);
      }
      if (z[i] >= 0x80) {
        int len = utf8_decode(z, i, n, &cp);
        if (len == 0) return fail(p, i, "invalid UTF-8 byte 0x%02x at byte %zu", z[i], i);
        rc = idem_buf_sink(&p->aux, (const char *)z + i, len);
        if (rc) return rc;
        i += len;
        continue;
      }
      /* backslash */
      if (i + 1 >= n) {
        return fail(p, i + 1, "not valid JSON: unterminated string starting at byte %zu",
                    start - 1);
      }
      {
        char c = 0;
        switch (z[i + 1]) {
          case '"': c = '"'; break;
          case '\\': c = '\\'; break;
          case '/': c = '/'; break;
          case 'b': c = '\b'; break;
          case 'f': c = '\f'; break;
          case 'n': c = '\n'; break;
          case 'r': c = '\r'; break;
          case 't': c = '\t'; break;
          case 'u': break;
          default:
            if (z[i + 1] >= 0x20 && z[i + 1] < 0x7f) {
              return fail(p, i, "invalid escape \\%c at byte %zu", z[i + 1], i);
            }
            return fail(p, i, "invalid escape (backslash then byte 0x%02x) at byte %zu", z[i + 1],
                        i);
        }
        if (c) {
          rc = idem_buf_sink(&p->aux, &c, 1);
          if (rc) return rc;
          i += 2;
          continue;
        }
      }
      /* \uXXXX */
      if (i + 6 > n || !hex4(z + i + 2, &cp)) {
        return fail(p, i, "invalid \\u escape at byte %zu (four hex digits needed)", i);
      }
      if (cp >= 0xDC00 && cp <= 0xDFFF) {
        return fail(p, i, "lone surrogate \\u%04x at byte %zu", (unsigned)cp, i);
      }
      if (cp >= 0xD800 && cp <= 0xDBFF) {
        uint32_t lo;
        if (i + 12 > n || z[i + 6] != '\\' || z[i + 7] != 'u' || !hex4(z + i + 8, &lo) ||
            lo < 0xDC00 || lo > 0xDFFF) {
          return fail(p, i, "lone surrogate \\u%04x at byte %zu", (unsigned)cp, i);
        }
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        i += 6;
      }
      i += 6;
      rc = aux_put_utf8(p, cp);
      if (rc) return rc;
    }
    {
      Node *pN = &p->aNode[iNode];
      pN->inAux = 1;
      pN->off = (uint32_t)auxStart;
      pN->n = (uint32_t)(p->aux.n - auxStart);
    }
    p->i = i + 1;
    return IDEM_JCS_OK;
  }
}

/* Quote up to 40 bytes of a literal for a message (it is ASCII). */
static const char *clip(const unsigned char *z, size_t n, char *zOut) {
  if (n > 40) {
    memcpy(zOut, z, 37);
    memcpy(zOut + 37, "...", 4);
  } else {
    memcpy(zOut, z, n);
    zOut[n] = 0;
  }
  return zOut;
}

/* The number r (0..8) of ASCII digits z[0..8) starts with, their value
** into *pV. The caller guarantees eight readable bytes. Little-endian
** hosts read them as one word: x = word ^ '0' per byte holds each digit's
** value, and a byte is a digit exactly when x < 10 there, that is when
** neither x nor x + 0x76 reaches 0x80 (a carry out of a byte only starts
** at a byte that is itself not a digit, and only moves to later bytes, so
** the first non-digit is found exactly). Shifting the r digits to the top
** of the word drops the rest and puts zeros (leading zero digits) below;
** then pairs, quads and halves are combined (three multiplications). */
IDEM_INLINE int digits8(const unsigned char *z, uint32_t *pV) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t v, x, m;
  int r;
  memcpy(&v, z, 8);
  x = v ^ 0x3030303030303030u;
  m = ((x + 0x7676767676767676u) | x) & 0x8080808080808080u;
  r = m ? __builtin_ctzll(m) >> 3 : 8;
  if (r == 0) {
    *pV = 0;
    return 0;
  }
  x <<= 8 * (8 - r); /* digit d0 in byte 8 - r */
  /* each multiplication adds a lane times 10, 100 or 10000 to the lane
  ** above it; the shift brings the sums down to the lower lane, the mask
  ** drops the odd lanes (every sum fits its doubled lane: 99, 9999) */
  x = ((x * (10 * 256 + 1)) >> 8) & 0x00FF00FF00FF00FFu;           /* d0d1, d2d3, ... */
  x = ((x * (100 * 65536 + 1)) >> 16) & 0x0000FFFF0000FFFFu;       /* d0..d3, d4..d7 */
  *pV = (uint32_t)((x * (10000 * ((uint64_t)1 << 32) + 1)) >> 32); /* d0..d7 */
  return r;
#else
  uint32_t v = 0;
  int r = 0;
  while (r < 8 && z[r] >= '0' && z[r] <= '9') v = v * 10 + (uint32_t)(z[r++] - '0');
  *pV = v;
  return r;
#endif
}

/*
** Whether the literal z[start..end) is spelled the way es_format spells
** its own value, given that the caller has checked that its significant
** digits are all counted in w (no bMore), that w has no trailing zero
** (checked here through the literal's last digit), and that w x 10^dExp is
** the shortest-nearest decimal of the double (s == w, e10 == dExp). Then
** the value has k = nd digits, the first and the last non-zero, and its
** decimal point position is n = nd + dExp (the value is 0.D x 10^n). The
** literal has a fraction or an exponent (integer literals are handled
** before). es_format writes, for such a value:
**   fixed, -6 < n <= 21 and k > n: "D{n}.D{k-n}" when n >= 1, and
**     "0." then -n zeros then "D{k}" when n <= 0;
**   exponent, n <= -6 or n > 21: "D" then ".D{k-1}" if k > 1, then "e",
**     the sign of n-1 ('+' or '-'), and n-1 without leading zeros;
**   integer, k <= n <= 21: the digits and zeros, no point, which a literal
**     with a fraction whose last digit is non-zero, or with an exponent,
**     never is (so that shape is never accepted here).
** A JSON literal with a fraction and no exponent whose last byte is a
** non-zero digit is "I.F": if I starts with a non-zero digit, I has n
** digits (all significant) and F the remaining k - n >= 1, the first
** fixed shape (n <= k - 1 <= 18 <= 21). If I is "0", the zeros after the
** point are -n and the shape is the second one exactly when n > -6. A
** literal with an exponent has the exponent shape when its mantissa is
** one non-zero digit, optionally "." and digits ending in a non-zero one,
** its exponent is written 'e', an explicit sign and no leading zero, and
** n <= -6 or n > 21 (the exponent x then equals n - 1, since the mantissa
** is D.DDD). Anything else goes through es_format and a comparison.
*/
/* Whether the mantissa z[intStart..ePos) of a literal with an exponent
** is "D" or "D.D...D", its first and last digit non-zero. */
static int mantissa_in_es_shape(const unsigned char *z, size_t intStart, size_t ePos) {
  if (z[intStart] == '0' || z[ePos - 1] == '0') return 0;
  return ePos - intStart == 1 || z[intStart + 1] == '.';
}

static int literal_in_es_shape(const unsigned char *z, size_t intStart, size_t ePos, size_t end,
                               int nPoint) {
  if (ePos == 0) {
    if (z[end - 1] == '0') return 0;  /* a trailing zero, or no fraction */
    if (z[intStart] != '0') return 1; /* "D{n}.D{k-n}" */
    return nPoint > -6;               /* "0.000D{k}" */
  }
  if (!mantissa_in_es_shape(z, intStart, ePos)) return 0;
  if (z[ePos] != 'e' || (z[ePos + 1] != '+' && z[ePos + 1] != '-') || z[ePos + 2] == '0') {
    return 0;
  }
  return nPoint <= -6 || nPoint > 21;
}

/* Room es_from_mantissa may write into: a sign, the mantissa (at most
** 20 digits and a point, which the caller checks), 'e', a sign and three
** digits, and the tail of copy_small's moves (none past the text). */
#define ES_MANT_MAX 21

/*
** The canonical text of a literal with an exponent whose digits are the
** printed ones (the caller has checked what literal_in_es_shape assumes)
** and whose mantissa z[intStart..ePos) is "D" or "D.D...D", its first and
** last digit non-zero, for a value printed as "0.000D...D" (-6 < n <= 0)
** or as an exponent form (n <= -6 or n > 21): es_format would write the
** same digits, and in the exponent form the same mantissa, then "e", the
** sign and n - 1 without leading zeros. So the digits are copied from the
** literal ("7.5e-05" -> "0.000075", "1.5e-07" or "1.5E-7" -> "1.5e-7")
** and only the rest written. Returns the length.
*/
static int es_from_mantissa(const unsigned char *z, int neg, size_t intStart, size_t ePos,
                            int nPoint, char *zOut) {
  char *o = zOut;
  int x = nPoint - 1;
  size_t nMant = ePos - intStart;
  if (neg) *o++ = '-';
  if (nPoint > -6 && nPoint <= 0) {
    memcpy(o, "0.000000", 8);
    o += 2 - nPoint;
    *o++ = (char)z[intStart];
    if (nMant > 2) {
      copy_small(o, (const char *)z + intStart + 2, nMant - 2);
      o += nMant - 2;
    }
    return (int)(o - zOut);
  }
  copy_small(o, (const char *)z + intStart, nMant);
  o += nMant;
  *o++ = 'e';
  *o++ = x < 0 ? '-' : '+';
  if (x < 0) x = -x;
  if (x >= 100) *o++ = (char)('0' + x / 100);
  if (x >= 10) *o++ = (char)('0' + x / 10 % 10);
  *o++ = (char)('0' + x % 10);
  return (int)(o - zOut);
}

/*
** Read the run of digits at z[i..n) into w, which keeps the first 19
** significant digits of the number (nd counts them; the caller has put
** the digits before this run in already): returns the index after the
** run. *pnTaken gets how many digits of the run went into w, *pnDropped
** how many did not; *pbMore is set when one of those is not 0. Up to 8
** digits are taken a word at a time while 19 are not reached.
*/
IDEM_INLINE size_t read_digits(const unsigned char *z, size_t n, size_t i, uint64_t *pW, int *pNd,
                               int *pbMore, long *pnTaken, long *pnDropped) {
  uint64_t w = *pW;
  int nd = *pNd;
  long nTaken = 0, nDropped = 0;
  uint32_t d8;
  while (nd <= 11 && n - i >= 8) {
    int r = digits8(z + i, &d8);
    w = w * aPow10u64[r] + d8;
    nd += r;
    nTaken += r;
    i += r;
    if (r < 8) goto done; /* z[i] is not a digit */
  }
  while (i < n && z[i] >= '0' && z[i] <= '9') {
    unsigned d = z[i++] - '0';
    if (nd < 19) {
      w = w * 10 + d;
      nd++;
      nTaken++;
    } else {
      nDropped++;
      *pbMore |= d != 0;
    }
  }
done:
  *pW = w;
  *pNd = nd;
  *pnTaken = nTaken;
  *pnDropped = nDropped;
  return i;
}

/* Parse a number at p->i into node iNode, computing its canonical text.
** One pass over the literal collects its value as w x 10^dExp, w being
** the first 19 significant digits (bMore: non-zero digits follow). */
static int parse_number(Parser *p, uint32_t iNode) {
  const unsigned char *z = p->z;
  size_t n = p->nIn, i = p->i, start = i;
  size_t intStart, nInt, ePos = 0;
  int neg = 0, hasFrac = 0, hasExp = 0, nd = 0, bMore = 0, rc, len;
  long exp = 0, dExp = 0;
  uint64_t w = 0;
  char zClip[44], *zOut;
  uint64_t s, c;
  int e10, q;
  IdemParseInfo info;
  Node *pN;

  if (i < n && z[i] == '-') {
    neg = 1;
    i++;
  }
  intStart = i;
  if (i < n && z[i] == '0') {
    i++;
  } else if (i < n && z[i] >= '1' && z[i] <= '9') {
    long nTaken = 0, nDropped = 0;
    i = read_digits(z, n, i, &w, &nd, &bMore, &nTaken, &nDropped);
    dExp += nDropped; /* each digit past the 19th moves the point */
  } else {
    p->i = i;
    return unexpected(p, "a digit");
  }
  nInt = i - intStart;
  if (i < n && z[i] == '.') {
    size_t fracStart = ++i;
    if (w == 0) {
      while (i < n && z[i] == '0') i++; /* not significant: only move the point */
      dExp -= (long)(i - fracStart);
    }
    long nTaken = 0, nDropped = 0;
    i = read_digits(z, n, i, &w, &nd, &bMore, &nTaken, &nDropped);
    dExp -= nTaken; /* each digit kept after the point divides by 10 */
    if (i == fracStart) {
      p->i = i;
      return unexpected(p, "a digit after the decimal point");
    }
    hasFrac = 1;
  }
  if (i < n && (z[i] == 'e' || z[i] == 'E')) {
    int eneg = 0;
    size_t eStart;
    ePos = i;
    i++;
    if (i < n && (z[i] == '+' || z[i] == '-')) eneg = z[i++] == '-';
    eStart = i;
    while (i < n && z[i] >= '0' && z[i] <= '9') {
      if (exp < 100000000) exp = exp * 10 + (z[i] - '0');
      i++;
    }
    if (i == eStart) {
      p->i = i;
      return unexpected(p, "a digit in the exponent");
    }
    if (eneg) exp = -exp;
    hasExp = 1;
  }
  p->i = i;
  pN = &p->aNode[iNode];

  if (p->bStored) {
    /* stored JSON: the literal as written, whatever its value */
    pN->inAux = 0;
    pN->off = (uint32_t)start;
    pN->n = (uint32_t)(i - start);
    return IDEM_JCS_OK;
  }
  if (!hasFrac && !hasExp) {
    /* An integer literal: exact below 2^53, and printed as written. */
    if (nInt > 16 || (nInt == 16 && memcmp(z + intStart, IDEM_SAFE_INT_DIGITS, 16) > 0)) {
      return fail(p, start,
                  "integer %s at byte %zu is beyond 2^53-1 and would lose precision; "
                  "send it as a string",
                  clip(z + start, i - start, zClip), start);
    }
    if (!neg || w != 0) {
      pN->inAux = 0;
      pN->off = (uint32_t)start;
      pN->n = (uint32_t)(i - start);
      return IDEM_JCS_OK;
    }
    /* -0 is printed 0, below */
  }

  if (w == 0) {
    /* every digit is zero (bMore cannot be set before a non-zero digit) */
    rc = idem_buf_sink(&p->aux, "0", 1);
    if (rc) return rc;
    pN->inAux = 1;
    pN->off = (uint32_t)(p->aux.n - 1);
    pN->n = 1;
    return IDEM_JCS_OK;
  }
  dExp += exp;
  if (!bMore && (unsigned long)(nd + dExp + 289) < 579 && /* -290 < nd + dExp < 290 */
      (w < 1000000000000000u || idem_parse_mant(w, (int)dExp, &info))) {
    /* At most 15 significant digits in the normal range: the double's
    ** shortest round-trip digits are exactly these (DBL_DIG). Else the
    ** double's significand (10^290 is far from overflowing and from
    ** subnormals), and the literal is its printed digits when shortest.c
    ** can prove it (significand strictly between 2^52 and 2^53), or
    ** Schubfach finds them. */
    if (w < 1000000000000000u || (info.mant - ((uint64_t)1 << 52) - 1 < ((uint64_t)1 << 52) - 1 &&
                                  idem_literal_is_shortest(w, &info))) {
      s = w;
      e10 = (int)dExp;
    } else {
      idem_parse_exp(&info, (int)dExp, &c, &q);
      s = idem_schubfach(c, q, &e10);
    }
  } else {
    size_t nLit = i - start;
    double v;
    int bDone = 0;
    /* the value is below 10^(nd + dExp): exponents this far out overflow
    ** or underflow whatever the digits */
    if (nd + dExp > 400) {
      v = INFINITY;
    } else if (nd + dExp < -400) {
      v = 0.0;
    } else if (!bMore && (bDone = idem_decimal_shortest(w, (int)dExp, &s, &e10)) != 0) {
      /* both directions at once (s, e10 are set): only an overflow is left */
      v = bDone == 2 ? INFINITY : 1.0;
    } else if (bMore ? !idem_decimal_to_double(w, (int)dExp, bMore, &v) : 1) {
      /* the product could not decide: the C library reads the literal */
      char zLit[64], *zBuf = zLit;
      if (nLit >= sizeof(zLit)) {
        zBuf = p->pMem->xMalloc(nLit + 1);
        if (zBuf == 0) return IDEM_JCS_NOMEM;
      }
      memcpy(zBuf, z + start, nLit);
      zBuf[nLit] = 0;
      rc = idem_strtod(zBuf, &v);
      if (zBuf != zLit) p->pMem->xFree(zBuf);
      if (rc) return rc;
    }
    if (isinf(v)) {
      return fail(p, start, "number %s at byte %zu overflows a double",
                  clip(z + start, nLit, zClip), start);
    }
    if (v == 0.0) {
      return fail(p, start, "number %s at byte %zu underflows to zero",
                  clip(z + start, nLit, zClip), start);
    }
    if (!bDone) s = idem_shortest(fabs(v), &e10);
  }
  if (s == w && e10 == dExp && !bMore &&
      literal_in_es_shape(z, intStart, ePos, i, nd + (int)dExp)) {
    pN->inAux = 0;
    pN->off = (uint32_t)start;
    pN->n = (uint32_t)(i - start);
    return IDEM_JCS_OK;
  }
  /* the canonical text goes straight to the end of aux, and stays there
  ** only if it differs from the literal */
  if (p->aux.nAlloc - p->aux.n < ES_ROOM) {
    rc = buf_reserve(&p->aux, ES_ROOM);
    if (rc) return rc;
  }
  zOut = p->aux.z + p->aux.n;
  if (s == w && e10 == dExp && !bMore && ePos && ePos - intStart <= ES_MANT_MAX &&
      (nd + dExp <= 0 || nd + dExp > 21) && mantissa_in_es_shape(z, intStart, ePos)) {
    len = es_from_mantissa(z, neg, intStart, ePos, nd + (int)dExp, zOut);
  } else {
    len = es_format(neg, s, e10, zOut);
  }
  if ((size_t)len == i - start && memcmp(zOut, z + start, len) == 0) {
    pN->inAux = 0;
    pN->off = (uint32_t)start;
  } else {
    pN->inAux = 1;
    pN->off = (uint32_t)p->aux.n;
    p->aux.n += len;
  }
  pN->n = (uint32_t)len;
  return IDEM_JCS_OK;
}

static const unsigned char *node_text(const Parser *p, const Node *pN) {
  return pN->inAux ? (const unsigned char *)p->aux.z + pN->off : p->z + pN->off;
}

/* Order UTF-8 strings by UTF-16 code units. UTF-8 byte order is code
** point order; the two differ only between U+E000..U+FFFF and the
** supplementary planes (surrogates sort below U+E000), so decode the
** code points at the first differing byte and map them. */
static int utf16_cmp(const unsigned char *a, size_t na, const unsigned char *b, size_t nb) {
  size_t n = na < nb ? na : nb, i = 0, s;
  uint32_t ca, cb;
  /* eight bytes at a time to the first difference */
  while (i + 8 <= n) {
    uint64_t x, y;
    memcpy(&x, a + i, 8);
    memcpy(&y, b + i, 8);
    if (x != y) break;
    i += 8;
  }
  while (i < n && a[i] == b[i]) i++;
  if (i == n) return na < nb ? -1 : (na > nb ? 1 : 0);
  if (a[i] < 0xEE || b[i] < 0xEE) return a[i] < b[i] ? -1 : 1; /* orders agree */
  s = i;
  while (s > 0 && (a[s] & 0xC0) == 0x80) s--;
  if (utf8_decode(a, s, na, &ca) == 0 || utf8_decode(b, s, nb, &cb) == 0) {
    return a[i] < b[i] ? -1 : 1; /* not reached for validated text */
  }
  if (ca >= 0xE000 && ca <= 0xFFFF) ca += 0x200000;
  if (cb >= 0xE000 && cb <= 0xFFFF) cb += 0x200000;
  return ca < cb ? -1 : 1;
}

static int key_cmp(const Parser *p, uint32_t x, uint32_t y) {
  const Node *a = &p->aNode[x], *b = &p->aNode[y];
  return utf16_cmp(node_text(p, a), a->n, node_text(p, b), b->n);
}

/* Sort a[0..n) of member-name nodes; tmp has room for n. Merge sort:
** stable and O(n log n) on adversarial input. */
static void sort_members(const Parser *p, uint32_t *a, uint32_t *tmp, uint32_t n) {
  uint32_t w, i;
  if (n < 2) return;
  if (n <= 12) {
    for (i = 1; i < n; i++) {
      uint32_t x = a[i], j = i;
      while (j > 0 && key_cmp(p, a[j - 1], x) > 0) {
        a[j] = a[j - 1];
        j--;
      }
      a[j] = x;
    }
    return;
  }
  for (w = 1; w < n; w *= 2) {
    for (i = 0; i < n; i += 2 * w) {
      uint32_t lo = i, mid = i + w < n ? i + w : n, hi = i + 2 * w < n ? i + 2 * w : n;
      uint32_t l = lo, r = mid, o = lo;
      while (l < mid && r < hi) tmp[o++] = key_cmp(p, a[l], a[r]) <= 0 ? a[l++] : a[r++];
      while (l < mid) tmp[o++] = a[l++];
      while (r < hi) tmp[o++] = a[r++];
    }
    memcpy(a, tmp, (size_t)n * sizeof(uint32_t));
  }
}

/* Describe a member name for a message: JSON-quoted, clipped. */
static void describe_name(const unsigned char *z, size_t n, char *zOut, size_t nOut) {
  size_t o = 0, i = 0;
  zOut[o++] = '"';
  while (i < n && o + 12 < nOut) {
    unsigned char c = z[i];
    if (c < 0x20 || c == '"' || c == '\\') {
      o += (size_t)snprintf(zOut + o, nOut - o, "\\u%04x", c);
      i++;
    } else if (c < 0x80) {
      zOut[o++] = (char)c;
      i++;
    } else {
      uint32_t cp;
      int len = utf8_decode(z, i, n, &cp);
      if (len == 0 || o + len + 8 >= nOut) break;
      memcpy(zOut + o, z + i, len);
      o += len;
      i += len;
    }
  }
  if (i < n) {
    memcpy(zOut + o, "...", 3);
    o += 3;
  }
  zOut[o++] = '"';
  zOut[o] = 0;
}

static int parse_value(Parser *p, uint32_t *piNode);

/* Close the container iNode whose children are aStk[base..nStk). */
static int close_container(Parser *p, uint32_t iNode, uint32_t base, int isObj) {
  uint32_t cnt = p->nStk - base;
  int rc = grow_u32(p, &p->aKid, &p->nKidAlloc, p->nKid + cnt * (isObj ? 2 : 1), p->aKidInit);
  if (rc) return rc;
  if (cnt > 0) {
    /* skipped when empty: aKid and aStk may still be NULL (no NULL+0) */
    memcpy(p->aKid + p->nKid, p->aStk + base, (size_t)cnt * sizeof(uint32_t));
  }
  if (isObj && cnt > 1) {
    uint32_t *a = p->aKid + p->nKid, k;
    sort_members(p, a, a + cnt, cnt);
    for (k = 1; k < cnt; k++) {
      if (key_cmp(p, a[k - 1], a[k]) == 0) {
        const Node *pK = &p->aNode[a[k]];
        char zName[80];
        size_t at = p->aNode[iNode].val; /* the object's '{' */
        describe_name(node_text(p, pK), pK->n, zName, sizeof(zName));
        return fail(p, at, "duplicate member name %s in the object at byte %zu", zName, at);
      }
    }
  }
  p->aNode[iNode].off = p->nKid;
  p->aNode[iNode].n = cnt;
  p->nKid += cnt;
  p->nStk = base;
  return IDEM_JCS_OK;
}

static int push_kid(Parser *p, uint32_t iNode) {
  int rc = grow_u32(p, &p->aStk, &p->nStkAlloc, p->nStk + 1, p->aStkInit);
  if (rc) return rc;
  p->aStk[p->nStk++] = iNode;
  return IDEM_JCS_OK;
}

static int parse_container(Parser *p, uint32_t iNode, int isObj) {
  uint32_t base = p->nStk;
  size_t open = p->i;
  int rc;
  char close = isObj ? '}' : ']';
  if (++p->depth > IDEM_JCS_MAX_DEPTH) {
    return fail(p, p->i, "nesting deeper than %d levels at byte %zu", IDEM_JCS_MAX_DEPTH, p->i);
  }
  p->aNode[iNode].val = (uint32_t)open; /* kept for messages */
  p->i++;
  skip_ws(p);
  if (p->i < p->nIn && p->z[p->i] == close) {
    p->i++;
  } else {
    for (;;) {
      uint32_t iKid, iVal;
      skip_ws(p);
      if (isObj) {
        if (p->i >= p->nIn || p->z[p->i] != '"') return unexpected(p, "a member name");
        rc = new_node(p, N_STR, &iKid);
        if (rc) return rc;
        rc = parse_string(p, iKid);
        if (rc) return rc;
        skip_ws(p);
        if (p->i >= p->nIn || p->z[p->i] != ':') return unexpected(p, "':'");
        p->i++;
        skip_ws(p);
        rc = parse_value(p, &iVal);
        if (rc) return rc;
        p->aNode[iKid].val = iVal;
      } else {
        rc = parse_value(p, &iKid);
        if (rc) return rc;
      }
      rc = push_kid(p, iKid);
      if (rc) return rc;
      skip_ws(p);
      if (p->i < p->nIn && p->z[p->i] == ',') {
        p->i++;
        continue;
      }
      if (p->i < p->nIn && p->z[p->i] == close) {
        p->i++;
        break;
      }
      return unexpected(p, isObj ? "',' or '}'" : "',' or ']'");
    }
  }
  p->depth--;
  return close_container(p, iNode, base, isObj);
}

static int parse_value(Parser *p, uint32_t *piNode) {
  int rc;
  const unsigned char *z = p->z;
  size_t i = p->i, n = p->nIn;
  if (i >= n) return unexpected(p, "a JSON value");
  switch (z[i]) {
    case '{':
    case '[':
      rc = new_node(p, z[i] == '{' ? N_OBJ : N_ARR, piNode);
      if (rc) return rc;
      return parse_container(p, *piNode, z[i] == '{');
    case '"':
      rc = new_node(p, N_STR, piNode);
      if (rc) return rc;
      return parse_string(p, *piNode);
    case 't':
      if (n - i >= 4 && memcmp(z + i, "true", 4) == 0) {
        p->i += 4;
        return new_node(p, N_TRUE, piNode);
      }
      break;
    case 'f':
      if (n - i >= 5 && memcmp(z + i, "false", 5) == 0) {
        p->i += 5;
        return new_node(p, N_FALSE, piNode);
      }
      break;
    case 'n':
      if (n - i >= 4 && memcmp(z + i, "null", 4) == 0) {
        p->i += 4;
        return new_node(p, N_NULL, piNode);
      }
      break;
    default:
      if (z[i] == '-' || (z[i] >= '0' && z[i] <= '9')) {
        rc = new_node(p, N_NUM, piNode);
        if (rc) return rc;
        return parse_number(p, *piNode);
      }
      break;
  }
  return unexpected(p, "a JSON value");
}

/* ------------------------------------------------------------------ */
/* Printer                                                             */
/* ------------------------------------------------------------------ */

typedef struct Out Out;
struct Out {
  IdemSink xSink;
  void *pCtx;
  size_t n;
  char a[1024];
};

static int out_flush(Out *o) {
  int rc = IDEM_JCS_OK;
  if (o->n) rc = o->xSink(o->pCtx, o->a, o->n);
  o->n = 0;
  return rc;
}

IDEM_INLINE int out_put(Out *o, const char *z, size_t n) {
  int rc;
  if (n <= sizeof(o->a) - o->n) {
    if (n <= 32) {
      copy_small(o->a + o->n, z, n);
    } else {
      memcpy(o->a + o->n, z, n);
    }
    o->n += n;
    return IDEM_JCS_OK;
  }
  rc = out_flush(o);
  if (rc) return rc;
  if (n >= sizeof(o->a)) return o->xSink(o->pCtx, z, n);
  memcpy(o->a, z, n);
  o->n = n;
  return IDEM_JCS_OK;
}

IDEM_INLINE int out_byte(Out *o, char c) {
  if (o->n == sizeof(o->a)) {
    int rc = out_flush(o);
    if (rc) return rc;
  }
  o->a[o->n++] = c;
  return IDEM_JCS_OK;
}

/* Print decoded string text with JCS escaping. */
static int out_string(Out *o, const unsigned char *z, size_t n) {
  static const char hexd[] = "0123456789abcdef";
  size_t i = 0, run;
  int rc = out_byte(o, '"');
  while (rc == IDEM_JCS_OK && i < n) {
    run = i;
    while (i < n && aPlainOut[z[i]]) i++;
    if (i > run) rc = out_put(o, (const char *)z + run, i - run);
    if (rc || i >= n) break;
    {
      char e[6] = {'\\', 0, 0, 0, 0, 0};
      size_t ne = 2;
      switch (z[i]) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        default:
          e[1] = 'u';
          e[2] = '0';
          e[3] = '0';
          e[4] = hexd[z[i] >> 4];
          e[5] = hexd[z[i] & 15];
          ne = 6;
      }
      rc = out_put(o, e, ne);
      i++;
    }
  }
  if (rc == IDEM_JCS_OK) rc = out_byte(o, '"');
  return rc;
}

static int print_node(const Parser *p, Out *o, uint32_t iNode) {
  const Node *pN = &p->aNode[iNode];
  uint32_t k;
  int rc = IDEM_JCS_OK;
  switch (pN->type) {
    case N_NULL: return out_put(o, "null", 4);
    case N_TRUE: return out_put(o, "true", 4);
    case N_FALSE: return out_put(o, "false", 5);
    case N_NUM: return out_put(o, (const char *)node_text(p, pN), pN->n);
    case N_STR:
      if (!pN->inAux) {
        /* unescaped input: no quote, backslash or control inside */
        rc = out_byte(o, '"');
        if (rc == IDEM_JCS_OK) rc = out_put(o, (const char *)p->z + pN->off, pN->n);
        if (rc == IDEM_JCS_OK) rc = out_byte(o, '"');
        return rc;
      }
      return out_string(o, node_text(p, pN), pN->n);
    case N_ARR:
      rc = out_byte(o, '[');
      for (k = 0; rc == IDEM_JCS_OK && k < pN->n; k++) {
        uint32_t iKid = p->aKid[pN->off + k];
        const Node *pK = &p->aNode[iKid];
        if (k) rc = out_byte(o, ',');
        if (rc != IDEM_JCS_OK) break;
        if (pK->type == N_NUM) { /* arrays of numbers: no call per element */
          rc = out_put(o, (const char *)node_text(p, pK), pK->n);
        } else {
          rc = print_node(p, o, iKid);
        }
      }
      if (rc == IDEM_JCS_OK) rc = out_byte(o, ']');
      return rc;
    default: /* N_OBJ */
      rc = out_byte(o, '{');
      for (k = 0; rc == IDEM_JCS_OK && k < pN->n; k++) {
        uint32_t iKey = p->aKid[pN->off + k];
        if (k) rc = out_byte(o, ',');
        if (rc == IDEM_JCS_OK) rc = print_node(p, o, iKey);
        if (rc == IDEM_JCS_OK) rc = out_byte(o, ':');
        if (rc == IDEM_JCS_OK) rc = print_node(p, o, p->aNode[iKey].val);
      }
      if (rc == IDEM_JCS_OK) rc = out_byte(o, '}');
      return rc;
  }
}

static int jcs_run(const char *zIn, size_t nIn, const IdemMem *pMem, IdemSink xSink, void *pSinkCtx,
                   IdemJcsError *pErr, int bStored) {
  Parser p;
  Out o;
  uint32_t iRoot = 0;
  int rc;

  memset(&p, 0, offsetof(Parser, aNodeInit));
  p.aNode = p.aNodeInit;
  p.nNodeAlloc = sizeof(p.aNodeInit) / sizeof(p.aNodeInit[0]);
  p.aKid = p.aKidInit;
  p.nKidAlloc = sizeof(p.aKidInit) / sizeof(p.aKidInit[0]);
  p.aStk = p.aStkInit;
  p.nStkAlloc = sizeof(p.aStkInit) / sizeof(p.aStkInit[0]);
  p.z = (const unsigned char *)zIn;
  p.nIn = nIn;
  p.pMem = pMem ? pMem : &idem_libc_mem;
  p.aux.pMem = p.pMem;
  p.aux.z = p.aux.zStatic = p.auxInit;
  p.aux.nAlloc = sizeof(p.auxInit);
  p.pErr = pErr;
  p.bStored = bStored;

  if (nIn > IDEM_JCS_MAX_BYTES) {
    rc = fail(&p, 0, "input is %zu bytes, the limit is %u", nIn, IDEM_JCS_MAX_BYTES);
    goto done;
  }
  if (nIn >= 3 && memcmp(zIn, "\xEF\xBB\xBF", 3) == 0) {
    rc = fail(&p, 0, "a leading byte order mark (U+FEFF) at byte 0 is not allowed");
    goto done;
  }
  skip_ws(&p);
  rc = parse_value(&p, &iRoot);
  if (rc) goto done;
  skip_ws(&p);
  if (p.i < p.nIn) {
    rc = fail(&p, p.i, "trailing bytes after the JSON value at byte %zu", p.i);
    goto done;
  }
  if (xSink == 0) goto done; /* the stored-text check: parsed, nothing to print */
  o.xSink = xSink;
  o.pCtx = pSinkCtx;
  o.n = 0;
  rc = print_node(&p, &o, iRoot);
  if (rc == IDEM_JCS_OK) rc = out_flush(&o);

done:
  if (p.aNode != p.aNodeInit) p.pMem->xFree(p.aNode);
  if (p.aKid != p.aKidInit) p.pMem->xFree(p.aKid);
  if (p.aStk != p.aStkInit) p.pMem->xFree(p.aStk);
  idem_buf_free(&p.aux);
  return rc;
}

int idem_jcs_canonicalize(const char *zIn, size_t nIn, const IdemMem *pMem, IdemSink xSink,
                          void *pSinkCtx, IdemJcsError *pErr) {
  return jcs_run(zIn, nIn, pMem, xSink, pSinkCtx, pErr, 0);
}

int idem_jcs_stored_form(const char *zIn, size_t nIn, const IdemMem *pMem, IdemSink xSink,
                         void *pSinkCtx, IdemJcsError *pErr) {
  return jcs_run(zIn, nIn, pMem, xSink, pSinkCtx, pErr, 1);
}

int idem_jcs_check_stored(const char *zIn, size_t nIn, const IdemMem *pMem, IdemJcsError *pErr) {
  return jcs_run(zIn, nIn, pMem, 0, 0, pErr, 1);
}

int idem_jcs_canonicalize_stored(const char *zIn, size_t nIn, const IdemMem *pMem, IdemSink xSink,
                                 void *pSinkCtx, IdemJcsError *pErr) {
  return jcs_run(zIn, nIn, pMem, xSink, pSinkCtx, pErr, 1);
}

/* The end of the well-formed JSON value (or member name) at z[i]. */
size_t idem_jcs_value_end(const char *z, size_t n, size_t i) {
  int depth = 0, bStr = 0;
  for (; i < n; i++) {
    char c = z[i];
    if (bStr) {
      if (c == '\\') i++;
      else if (c == '"') {
        bStr = 0;
        if (depth == 0) return i + 1;
      }
    } else if (c == '"') {
      bStr = 1;
    } else if (c == '{' || c == '[') {
      depth++;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return i; /* the end of the enclosing object or array */
      if (--depth == 0) return i + 1;
    } else if (c == ',' && depth == 0) {
      return i;
    }
  }
  return n;
}

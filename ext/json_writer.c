/*
** json_writer.c: the one builder every JSON answer of the ledger goes
** through (idem_claim, idem_settle, idem_resolve, idem_last_claim).
**
** An answer is one JSON object. Text values are escaped here, and text
** that is not valid UTF-8 (a table or ledger name can hold any bytes) has
** each ill-formed sequence replaced by U+FFFD, so an answer is JSON
** whatever the names; JSON read
** back from the rows table (result, error, members) is parsed before it
** is written, so a row changed by hand can make an answer fail, never make
** it invalid JSON or give it a second "decision" member.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#include "idem_internal.h"

#include <string.h>

/* Record failure rc: later appends find no room and do nothing. */
static void fail(IdemJson *j, int rc) {
  j->rc = rc;
  j->nAlloc = j->n;
}

/* The slow path of put(): grow the buffer (doubling), then append. */
static void put_grow(IdemJson *j, const char *z, size_t n) {
  size_t nNew;
  char *zNew;
  if (j->rc) return;
  nNew = (j->nAlloc + n + 1) * 2;
  if (j->z == j->aInline) {
    zNew = sqlite3_malloc64(nNew);
    if (zNew) memcpy(zNew, j->z, j->n);
  } else {
    zNew = sqlite3_realloc64(j->z, nNew);
  }
  if (zNew == 0) {
    fail(j, SQLITE_NOMEM);
    return;
  }
  j->z = zNew;
  j->nAlloc = nNew;
  memcpy(j->z + j->n, z, n);
  j->n += n;
}

/* Append z[0..n) to j; on failure j->rc is set and nothing more is kept
** (a failed builder has no room left: nAlloc is 0). */
static inline void put(IdemJson *j, const char *z, size_t n) {
  if (n < j->nAlloc - j->n) {
    memcpy(j->z + j->n, z, n);
    j->n += n;
  } else {
    put_grow(j, z, n);
  }
}

/* Bytes of a JSON string that need a look: 1 an escape ('"', '\\' and
** the controls), 2 the lead or continuation of a multi-byte sequence,
** which is checked as UTF-8. */
static const unsigned char aEscape[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
};

/*
** The UTF-8 sequence at u (a lead byte >= 0x80, NUL-terminated text):
** its length (2-4) when it is well-formed (RFC 3629: no overlong form, no
** surrogate, nothing past U+10FFFF), else 0 with *pnBad the length of its
** maximal ill-formed subpart (Unicode's "U+FFFD substitution of maximal
** subparts", as WHATWG decoders do): the lead and the continuation bytes
** that could still have begun a well-formed sequence, at least 1.
*/
static int utf8_sequence(const unsigned char *u, int *pnBad) {
  unsigned char c = u[0], lo = 0x80, hi = 0xBF;
  int n, k;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0; /* overlong below U+0800 */
    if (c == 0xED) hi = 0x9F; /* surrogates */
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90; /* overlong below U+10000 */
    if (c == 0xF4) hi = 0x8F; /* past U+10FFFF */
  } else {
    *pnBad = 1; /* a stray continuation, C0, C1, F5-FF */
    return 0;
  }
  for (k = 1; k < n; k++) {
    if (u[k] < lo || u[k] > hi) {
      *pnBad = k;
      return 0;
    }
    lo = 0x80;
    hi = 0xBF;
  }
  return n;
}

int idem_utf8_invalid_at(const char *z) {
  const unsigned char *u = (const unsigned char *)z;
  int i = 0, nBad = 0;
  while (u[i]) {
    int n = u[i] < 0x80 ? 1 : utf8_sequence(u + i, &nBad);
    if (n == 0) return i;
    i += n;
  }
  return -1;
}

/* Append the JSON string literal of text z: valid JSON whatever its bytes.
** Well-formed UTF-8 is written as it is; each maximal ill-formed subpart
** (utf8_sequence) becomes U+FFFD, as its UTF-8 bytes. */
static void put_string(IdemJson *j, const char *z) {
  static const char hexd[] = "0123456789abcdef";
  const unsigned char *u = (const unsigned char *)z;
  const unsigned char *zRun = u; /* start of the run of bytes written as they are */
  put(j, "\"", 1);
  for (;;) {
    int nBad = 0, n;
    while (!aEscape[*u]) u++;
    if (*u == 0) break;
    if (aEscape[*u] == 2) {
      n = utf8_sequence(u, &nBad);
      if (n) {
        u += n; /* well-formed: part of the run */
        continue;
      }
      if (u > zRun) put(j, (const char *)zRun, (size_t)(u - zRun));
      put(j, "\xef\xbf\xbd", 3);
      u += nBad;
    } else {
      if (u > zRun) put(j, (const char *)zRun, (size_t)(u - zRun));
      if (*u < 0x20) {
        char e[6] = {'\\', 'u', '0', '0', hexd[*u >> 4], hexd[*u & 15]};
        put(j, e, 6);
      } else {
        char e[2] = {'\\', (char)*u};
        put(j, e, 2);
      }
      u++;
    }
    zRun = u;
  }
  if (u > zRun) put(j, (const char *)zRun, (size_t)(u - zRun));
  put(j, "\"", 1);
}

char *idem_json_string(const char *z) {
  IdemJson j;
  char *zOut = 0;
  idem_json_begin(&j);
  j.n = 0; /* a bare string: drop the brace */
  put_string(&j, z);
  if (j.rc == SQLITE_OK) {
    zOut = sqlite3_malloc64(j.n + 1);
    if (zOut) {
      memcpy(zOut, j.z, j.n);
      zOut[j.n] = 0;
    }
  }
  if (j.z != j.aInline) sqlite3_free(j.z);
  return zOut;
}

void idem_json_begin(IdemJson *j) {
  j->z = j->aInline;
  j->n = 0;
  j->nAlloc = sizeof(j->aInline);
  j->nMember = 0;
  j->iDepth = 0;
  j->zClose[0] = '}';
  j->rc = SQLITE_OK;
  j->zBad = 0;
  put(j, "{", 1);
}

void idem_json_begin_array(IdemJson *j) {
  idem_json_begin(j);
  j->z[0] = '[';
  j->zClose[0] = ']';
}

/* The member's name and colon (zName NULL: an array's element, only its
** comma); 0 when the builder has already failed. Names are constants of
** the source, plain ASCII: written as they are, with the comma and
** quotes, in one append. */
static int member(IdemJson *j, const char *zName) {
  size_t n;
  char *zOut;
  if (j->rc) return 0;
  if (zName == 0) {
    if (j->nMember++) put(j, ",", 1);
    return j->rc == SQLITE_OK;
  }
  n = strlen(zName);
  if (n + 4 >= j->nAlloc - j->n) {
    if (j->nMember++) put(j, ",", 1);
    put(j, "\"", 1);
    put(j, zName, n);
    put(j, "\":", 2);
    return j->rc == SQLITE_OK;
  }
  zOut = j->z + j->n;
  if (j->nMember++) *zOut++ = ',';
  *zOut++ = '"';
  memcpy(zOut, zName, n);
  zOut += n;
  *zOut++ = '"';
  *zOut++ = ':';
  j->n = (size_t)(zOut - j->z);
  return 1;
}

void idem_json_text(IdemJson *j, const char *zName, const char *zValue) {
  if (member(j, zName)) put_string(j, zValue);
}

void idem_json_int(IdemJson *j, const char *zName, sqlite3_int64 v) {
  if (member(j, zName)) {
    char z[24];
    int i = (int)sizeof(z);
    sqlite3_uint64 u = v < 0 ? 0 - (sqlite3_uint64)v : (sqlite3_uint64)v;
    do {
      z[--i] = (char)('0' + u % 10);
      u /= 10;
    } while (u);
    if (v < 0) z[--i] = '-';
    put(j, z + i, sizeof(z) - (size_t)i);
  }
}

void idem_json_bool(IdemJson *j, const char *zName, int b) {
  if (member(j, zName)) put(j, b ? "true" : "false", b ? 4 : 5);
}

void idem_json_literal(IdemJson *j, const char *zName, const char *zJsonLiteral) {
  if (member(j, zName)) put(j, zJsonLiteral, strlen(zJsonLiteral));
}

void idem_json_stored(IdemJson *j, const char *zName, const char *zJson, const char *zIfNull,
                      int eKind, IdemJsonSeen *pSeen) {
  IdemJcsError err;
  size_t n;
  int rc;
  if (j->rc) return;
  if (zJson == 0) {
    idem_json_literal(j, zName, zIfNull);
    return;
  }
  n = strlen(zJson);
  if (pSeen && pSeen->z && pSeen->n == n && memcmp(pSeen->z, zJson, n) == 0) {
    if (member(j, zName)) put(j, zJson, n); /* these bytes passed the check below */
    return;
  }
  rc = idem_jcs_check_stored(zJson, n, &idem_sqlite_mem, &err);
  if (rc == IDEM_JCS_OK && eKind == IDEM_JSON_ARRAY) {
    const char *z = zJson;
    while (*z == ' ' || *z == '\t' || *z == '\n' || *z == '\r') z++;
    if (*z != '[') rc = IDEM_JCS_INVALID;
  }
  if (rc == IDEM_JCS_NOMEM) {
    fail(j, SQLITE_NOMEM);
  } else if (rc != IDEM_JCS_OK) {
    fail(j, SQLITE_CORRUPT);
    j->zBad = zName;
  } else if (member(j, zName)) {
    put(j, zJson, n);
    if (pSeen && n <= IDEM_JSON_SEEN_MAX) {
      /* remember it; without room it is simply not remembered */
      if (pSeen->nAlloc < n) {
        char *zNew = sqlite3_malloc64(IDEM_JSON_SEEN_MAX);
        if (zNew) {
          sqlite3_free(pSeen->z);
          pSeen->z = zNew;
          pSeen->nAlloc = IDEM_JSON_SEEN_MAX;
        }
      }
      if (pSeen->nAlloc >= n) {
        memcpy(pSeen->z, zJson, n);
        pSeen->n = n;
      }
    }
  }
}

void idem_json_refuse(IdemJson *j, const char *zName) {
  if (j->rc) return;
  fail(j, SQLITE_CORRUPT);
  j->zBad = zName;
}

void idem_json_seen_free(IdemJsonSeen *pSeen) {
  sqlite3_free(pSeen->z);
  memset(pSeen, 0, sizeof(*pSeen));
}

void idem_json_open(IdemJson *j, const char *zName, char c) {
  if (!member(j, zName)) return;
  if (j->iDepth == IDEM_JSON_MAX_DEPTH) {
    fail(j, SQLITE_INTERNAL); /* deeper than any answer is built */
    return;
  }
  put(j, &c, 1);
  j->aMember[j->iDepth++] = j->nMember;
  j->zClose[j->iDepth] = c == '[' ? ']' : '}';
  j->nMember = 0;
}

void idem_json_close(IdemJson *j) {
  if (j->rc) return;
  if (j->iDepth == 0) {
    fail(j, SQLITE_INTERNAL); /* nothing is open */
    return;
  }
  put(j, &j->zClose[j->iDepth], 1);
  j->nMember = j->aMember[--j->iDepth];
}

char *idem_json_finish(IdemJson *j, int *pRc) {
  char *z = 0;
  if (j->rc == SQLITE_OK && j->iDepth != 0) fail(j, SQLITE_INTERNAL); /* left open */
  put(j, &j->zClose[0], 1);
  if (j->rc == SQLITE_OK) {
    j->z[j->n] = 0;
    if (j->z != j->aInline) {
      z = j->z;
    } else {
      z = sqlite3_malloc64(j->n + 1);
      if (z) memcpy(z, j->z, j->n + 1);
      else fail(j, SQLITE_NOMEM);
    }
  } else if (j->z != j->aInline) {
    sqlite3_free(j->z);
  }
  j->z = j->aInline;
  *pRc = j->rc;
  return z;
}

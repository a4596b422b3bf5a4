/*
** json_writer.c: the one builder every JSON answer of the ledger goes
** through (idem_claim, idem_settle, idem_resolve, idem_last_claim).
**
** An answer is one JSON object. Text values are escaped here; JSON read
** back from the rows table (result, error, members) is parsed before it
** is written, so a row changed by hand can make an answer fail, never make
** it invalid JSON or give it a second "decision" member.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#include "idem_internal.h"

#include <string.h>

/* Append z[0..n) to j; on failure j->rc is set and nothing more is kept. */
static void put(IdemJson *j, const char *z, size_t n) {
  if (j->rc) return;
  if (j->n + n + 1 > j->nAlloc) {
    size_t nNew = (j->nAlloc + n + 1) * 2;
    char *zNew;
    if (j->z == j->aInline) {
      zNew = sqlite3_malloc64(nNew);
      if (zNew) memcpy(zNew, j->z, j->n);
    } else {
      zNew = sqlite3_realloc64(j->z, nNew);
    }
    if (zNew == 0) {
      j->rc = SQLITE_NOMEM;
      return;
    }
    j->z = zNew;
    j->nAlloc = nNew;
  }
  memcpy(j->z + j->n, z, n);
  j->n += n;
}

/* Append the JSON string literal of UTF-8 text z. */
static void put_string(IdemJson *j, const char *z) {
  static const char hexd[] = "0123456789abcdef";
  const unsigned char *u = (const unsigned char *)z;
  const unsigned char *zRun = u; /* start of the run of bytes needing no escape */
  put(j, "\"", 1);
  for (; *u; u++) {
    if (*u == '"' || *u == '\\' || *u < 0x20) {
      if (u > zRun) put(j, (const char *)zRun, (size_t)(u - zRun));
      if (*u < 0x20) {
        char e[6] = {'\\', 'u', '0', '0', hexd[*u >> 4], hexd[*u & 15]};
        put(j, e, 6);
      } else {
        char e[2] = {'\\', (char)*u};
        put(j, e, 2);
      }
      zRun = u + 1;
    }
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
  j->rc = SQLITE_OK;
  j->zBad = 0;
  put(j, "{", 1);
}

/* The member's name and colon; 0 when the builder has already failed.
** Names are constants of the source, plain ASCII: written as they are. */
static int member(IdemJson *j, const char *zName) {
  size_t n = strlen(zName);
  if (j->rc) return 0;
  if (j->nMember++) put(j, ",\"", 2);
  else put(j, "\"", 1);
  put(j, zName, n);
  put(j, "\":", 2);
  return j->rc == SQLITE_OK;
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

void idem_json_null(IdemJson *j, const char *zName) {
  if (member(j, zName)) put(j, "null", 4);
}

void idem_json_literal(IdemJson *j, const char *zName, const char *zJsonLiteral) {
  if (member(j, zName)) put(j, zJsonLiteral, strlen(zJsonLiteral));
}

/* A sink that keeps nothing: the canonicaliser only checks. */
static int sink_discard(void *ctx, const char *p, size_t n) {
  (void)ctx;
  (void)p;
  (void)n;
  return 0;
}

void idem_json_stored(IdemJson *j, const char *zName, const char *zJson, const char *zIfNull,
                      int eKind) {
  IdemJcsError err;
  size_t n;
  int rc;
  if (j->rc) return;
  if (zJson == 0) {
    idem_json_literal(j, zName, zIfNull);
    return;
  }
  n = strlen(zJson);
  rc = idem_jcs_canonicalize(zJson, n, &idem_sqlite_mem, sink_discard, 0, &err);
  if (rc == IDEM_JCS_OK && eKind == IDEM_JSON_ARRAY) {
    const char *z = zJson;
    while (*z == ' ' || *z == '\t' || *z == '\n' || *z == '\r') z++;
    if (*z != '[') rc = IDEM_JCS_INVALID;
  }
  if (rc == IDEM_JCS_NOMEM) {
    j->rc = SQLITE_NOMEM;
  } else if (rc != IDEM_JCS_OK) {
    j->rc = SQLITE_CORRUPT;
    j->zBad = zName;
  } else if (member(j, zName)) {
    put(j, zJson, n);
  }
}

char *idem_json_finish(IdemJson *j, int *pRc) {
  char *z = 0;
  put(j, "}", 1);
  if (j->rc == SQLITE_OK) {
    j->z[j->n] = 0;
    if (j->z != j->aInline) {
      z = j->z;
    } else {
      z = sqlite3_malloc64(j->n + 1);
      if (z) memcpy(z, j->z, j->n + 1);
      else j->rc = SQLITE_NOMEM;
    }
  } else if (j->z != j->aInline) {
    sqlite3_free(j->z);
  }
  j->z = j->aInline;
  *pRc = j->rc;
  return z;
}

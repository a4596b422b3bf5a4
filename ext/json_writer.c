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

/* Append the JSON string literal of UTF-8 text z to s. */
static void append_string(sqlite3_str *s, const char *z) {
  static const char hexd[] = "0123456789abcdef";
  const unsigned char *u = (const unsigned char *)z;
  const unsigned char *zRun = u; /* start of the run of bytes needing no escape */
  sqlite3_str_appendchar(s, 1, '"');
  for (; *u; u++) {
    if (*u == '"' || *u == '\\' || *u < 0x20) {
      if (u > zRun) sqlite3_str_append(s, (const char *)zRun, (int)(u - zRun));
      if (*u < 0x20) {
        char e[7] = {'\\', 'u', '0', '0', hexd[*u >> 4], hexd[*u & 15], 0};
        sqlite3_str_append(s, e, 6);
      } else {
        char e[2] = {'\\', (char)*u};
        sqlite3_str_append(s, e, 2);
      }
      zRun = u + 1;
    }
  }
  if (u > zRun) sqlite3_str_append(s, (const char *)zRun, (int)(u - zRun));
  sqlite3_str_appendchar(s, 1, '"');
}

char *idem_json_string(const char *z) {
  sqlite3_str *s = sqlite3_str_new(0);
  append_string(s, z);
  return sqlite3_str_finish(s);
}

void idem_json_begin(IdemJson *j) {
  j->s = sqlite3_str_new(0);
  j->nMember = 0;
  j->rc = SQLITE_OK;
  j->zBad = 0;
  sqlite3_str_appendchar(j->s, 1, '{');
}

/* The member's name and colon; 0 when the builder has already failed. */
static int member(IdemJson *j, const char *zName) {
  if (j->rc) return 0;
  if (j->nMember++) sqlite3_str_appendchar(j->s, 1, ',');
  append_string(j->s, zName);
  sqlite3_str_appendchar(j->s, 1, ':');
  return 1;
}

void idem_json_text(IdemJson *j, const char *zName, const char *zValue) {
  if (member(j, zName)) append_string(j->s, zValue);
}

void idem_json_int(IdemJson *j, const char *zName, sqlite3_int64 v) {
  if (member(j, zName)) sqlite3_str_appendf(j->s, "%lld", v);
}

void idem_json_bool(IdemJson *j, const char *zName, int b) {
  if (member(j, zName)) sqlite3_str_appendall(j->s, b ? "true" : "false");
}

void idem_json_null(IdemJson *j, const char *zName) {
  if (member(j, zName)) sqlite3_str_appendall(j->s, "null");
}

void idem_json_literal(IdemJson *j, const char *zName, const char *zJsonLiteral) {
  if (member(j, zName)) sqlite3_str_appendall(j->s, zJsonLiteral);
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
    sqlite3_str_append(j->s, zJson, (int)n);
  }
}

char *idem_json_finish(IdemJson *j, int *pRc) {
  char *z;
  sqlite3_str_appendchar(j->s, 1, '}');
  if (j->rc == SQLITE_OK) j->rc = sqlite3_str_errcode(j->s);
  z = sqlite3_str_finish(j->s);
  j->s = 0;
  if (j->rc != SQLITE_OK) {
    sqlite3_free(z);
    z = 0;
  } else if (z == 0) {
    j->rc = SQLITE_NOMEM;
  }
  *pRc = j->rc;
  return z;
}

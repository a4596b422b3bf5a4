/*
** keyfuncs.c: the pure SQL functions of sqlite-idempotency.
**
**   idem_version()                           -> '0.1.0'
**   idem_valid_key(v)                        -> 1 or 0, never NULL, never an error
**   idem_check_key(v, label)                 -> v, or SQLITE_CONSTRAINT naming label
**   idem_canonical(json)                     -> RFC 8785 canonical text
**   idem_fingerprint(json)                   -> hex XXH3-128 of canonical(json)
**   idem_key(tenant, conversation, tool, args)
**        -> 'idem1-' || hex XXH3-128(tenant ':' conversation ':' tool ':' canonical(args))
**
** All are deterministic and innocuous: they read only their arguments, so
** they may sit in CHECK constraints, indexes and generated columns, also
** under PRAGMA trusted_schema=OFF.
**
** Error codes: a key component that breaks the grammar is
** SQLITE_CONSTRAINT; arguments that are not strict I-JSON are SQLITE_ERROR;
** input over the size cap is SQLITE_TOOBIG; an allocation failure is
** SQLITE_NOMEM.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#include "idem_internal.h"
#include "idempotency.h"

#include <string.h>

static void *sq_malloc(size_t n) { return sqlite3_malloc64(n); }
static void *sq_realloc(void *p, size_t n) { return sqlite3_realloc64(p, n); }
static void sq_free(void *p) { sqlite3_free(p); }
const IdemMem idem_sqlite_mem = {sq_malloc, sq_realloc, sq_free};

const char *idem_type_name(int t) {
  switch (t) {
    case SQLITE_INTEGER: return "INTEGER";
    case SQLITE_FLOAT: return "REAL";
    case SQLITE_BLOB: return "BLOB";
    case SQLITE_NULL: return "NULL";
    default: return "TEXT";
  }
}

void idem_result_error(sqlite3_context *ctx, int rc, char *zErr) {
  if (rc == SQLITE_NOMEM || zErr == 0) {
    sqlite3_result_error_nomem(ctx);
  } else {
    sqlite3_result_error(ctx, zErr, -1);
    sqlite3_result_error_code(ctx, rc);
  }
  sqlite3_free(zErr);
}

/* Render up to 40 bytes of z as a double-quoted, escaped literal. */
static char *quote_key(const unsigned char *z, size_t n) {
  sqlite3_str *s = sqlite3_str_new(0);
  size_t i, lim = n > 40 ? 40 : n;
  sqlite3_str_appendchar(s, 1, '"');
  for (i = 0; i < lim; i++) {
    unsigned char c = z[i];
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      sqlite3_str_appendchar(s, 1, (char)c);
    } else {
      sqlite3_str_appendf(s, "\\x%02x", c);
    }
  }
  if (lim < n) sqlite3_str_appendall(s, "...");
  sqlite3_str_appendchar(s, 1, '"');
  return sqlite3_str_finish(s);
}

int idem_key_error(const char *zFunc, const char *zLabel, sqlite3_value *v, char **pzErr) {
  int t = sqlite3_value_type(v);
  const unsigned char *z;
  size_t n, detail = 0;
  *pzErr = 0;
  if (t == SQLITE_NULL) {
    *pzErr = sqlite3_mprintf("%s: %s is missing (NULL)", zFunc, zLabel);
  } else if (t != SQLITE_TEXT) {
    *pzErr = sqlite3_mprintf("%s: %s must be TEXT, got %s", zFunc, zLabel, idem_type_name(t));
  } else {
    z = sqlite3_value_text(v);
    if (z == 0) return SQLITE_NOMEM;
    n = (size_t)sqlite3_value_bytes(v);
    switch (idem_grammar_check(z, n, &detail)) {
      case IDEM_KEY_OK: return SQLITE_OK;
      case IDEM_KEY_EMPTY: *pzErr = sqlite3_mprintf("%s: %s is empty", zFunc, zLabel); break;
      case IDEM_KEY_TOO_LONG:
        *pzErr = sqlite3_mprintf("%s: %s is %lld characters long, the limit is %d", zFunc, zLabel,
                                 (long long)detail, IDEM_KEY_MAX_CHARS);
        break;
      default: {
        char *zQ = quote_key(z, n);
        if (zQ) {
          *pzErr = sqlite3_mprintf(
              "%s: %s %s has byte 0x%02x at offset %lld; only A-Z a-z 0-9 _ - are allowed", zFunc,
              zLabel, zQ, z[detail], (long long)detail);
        }
        sqlite3_free(zQ);
      }
    }
  }
  return *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
}

int idem_canonical_value(const char *zFunc, const char *zLabel, sqlite3_value *v, IdemBuf *pBuf,
                         const char *zPrefix, size_t nPrefix, char *zHexOut, char **pzErr) {
  int t = sqlite3_value_type(v);
  const char *z;
  size_t n;
  int rc;
  IdemJcsError err;
  *pzErr = 0;
  if (t == SQLITE_NULL) {
    *pzErr = sqlite3_mprintf("%s: %s is NULL; a missing argument list is not {}", zFunc, zLabel);
    return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  if (t != SQLITE_TEXT) {
    *pzErr = sqlite3_mprintf("%s: %s must be TEXT holding JSON, got %s", zFunc, zLabel,
                             idem_type_name(t));
    return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  z = (const char *)sqlite3_value_text(v);
  if (z == 0) return SQLITE_NOMEM;
  n = (size_t)sqlite3_value_bytes(v);
  if (zHexOut) {
    rc = idem_digest(zPrefix, nPrefix, z, n, &idem_sqlite_mem, zHexOut, &err);
  } else {
    rc = idem_jcs_canonicalize(z, n, &idem_sqlite_mem, idem_buf_sink, pBuf, &err);
  }
  if (rc == IDEM_JCS_OK) return SQLITE_OK;
  if (rc == IDEM_JCS_NOMEM) return SQLITE_NOMEM;
  *pzErr = sqlite3_mprintf("%s: %s: %s", zFunc, zLabel, err.msg);
  if (*pzErr == 0) return SQLITE_NOMEM;
  return n > IDEM_JCS_MAX_BYTES ? SQLITE_TOOBIG : SQLITE_ERROR;
}

int idem_utf16_error(const char *zFunc, const char *zLabel, sqlite3_value *v, char **pzErr) {
  const uint16_t *z;
  int n, i;
  *pzErr = 0;
  if (sqlite3_value_type(v) != SQLITE_TEXT) return SQLITE_OK;
  z = (const uint16_t *)sqlite3_value_text16(v);
  if (z == 0) return SQLITE_NOMEM;
  n = sqlite3_value_bytes16(v) / 2;
  for (i = 0; i < n; i++) {
    unsigned c = z[i];
    if (c < 0xD800 || c > 0xDFFF) continue;
    if (c <= 0xDBFF && i + 1 < n && z[i + 1] >= 0xDC00 && z[i + 1] <= 0xDFFF) {
      i++; /* a pair */
      continue;
    }
    *pzErr = sqlite3_mprintf("%s: %s: lone surrogate U+%04X at UTF-16 code unit %d of the text",
                             zFunc, zLabel, c, i);
    return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  return SQLITE_OK;
}

/* The UTF-16 variant of a JSON function (see idempotency.c): refuse a lone
** surrogate in v before SQLite converts the text. 0 when the call may go
** on; otherwise the error has been set on ctx. */
static int utf16_refused(sqlite3_context *ctx, const char *zFunc, const char *zLabel,
                         sqlite3_value *v) {
  char *zErr = 0;
  int rc;
  if (sqlite3_user_data(ctx) == 0) return 0;
  rc = idem_utf16_error(zFunc, zLabel, v, &zErr);
  if (rc == SQLITE_OK) return 0;
  idem_result_error(ctx, rc, zErr);
  return 1;
}

void idem_version_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  sqlite3_result_text(ctx, IDEM_VERSION, -1, SQLITE_STATIC);
}

void idem_valid_key_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  size_t detail;
  const unsigned char *z;
  (void)argc;
  if (sqlite3_value_type(argv[0]) != SQLITE_TEXT) {
    sqlite3_result_int(ctx, 0);
    return;
  }
  z = sqlite3_value_text(argv[0]);
  if (z == 0) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  sqlite3_result_int(
      ctx, idem_grammar_check(z, (size_t)sqlite3_value_bytes(argv[0]), &detail) == IDEM_KEY_OK);
}

void idem_check_key_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *zLabel = "key";
  char *zErr = 0, *zLabelCopy = 0;
  int rc;
  (void)argc;
  if (sqlite3_value_type(argv[1]) == SQLITE_TEXT) {
    zLabel = (const char *)sqlite3_value_text(argv[1]);
    if (zLabel == 0) {
      sqlite3_result_error_nomem(ctx);
      return;
    }
    /* copy: converting argv[0] below may not, but could, invalidate it */
    zLabelCopy = sqlite3_mprintf("%s", zLabel);
    if (zLabelCopy == 0) {
      sqlite3_result_error_nomem(ctx);
      return;
    }
    zLabel = zLabelCopy;
  }
  rc = idem_key_error("idem_check_key", zLabel, argv[0], &zErr);
  sqlite3_free(zLabelCopy);
  if (rc) {
    idem_result_error(ctx, rc, zErr);
    return;
  }
  sqlite3_result_value(ctx, argv[0]);
}

void idem_canonical_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  IdemBuf buf = {&idem_sqlite_mem, 0, 0, 0, 0};
  char *zErr = 0;
  int rc;
  (void)argc;
  if (utf16_refused(ctx, "idem_canonical", "json", argv[0])) return;
  rc = idem_canonical_value("idem_canonical", "json", argv[0], &buf, 0, 0, 0, &zErr);
  if (rc) {
    idem_buf_free(&buf);
    idem_result_error(ctx, rc, zErr);
    return;
  }
  /* hand the buffer over: SQLite frees it with sqlite3_free */
  sqlite3_result_text64(ctx, buf.z ? buf.z : "", buf.n, buf.z ? sqlite3_free : SQLITE_STATIC,
                        SQLITE_UTF8);
}

void idem_fingerprint_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  char zHex[IDEM_DIGEST_HEX + 1];
  char *zErr = 0;
  int rc;
  (void)argc;
  if (utf16_refused(ctx, "idem_fingerprint", "json", argv[0])) return;
  rc = idem_canonical_value("idem_fingerprint", "json", argv[0], 0, 0, 0, zHex, &zErr);
  if (rc) {
    idem_result_error(ctx, rc, zErr);
    return;
  }
  sqlite3_result_text(ctx, zHex, IDEM_DIGEST_HEX, SQLITE_TRANSIENT);
}

void idem_key_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  static const char *azLabel[3] = {"tenant", "conversation", "tool"};
  char zPrefix[3 * (IDEM_KEY_MAX_CHARS + 1)];
  char zKey[IDEM_KEY_LEN + 1];
  size_t nPrefix = 0;
  char *zErr = 0;
  int i, rc;
  (void)argc;
  for (i = 0; i < 3; i++) {
    rc = idem_key_error("idem_key", azLabel[i], argv[i], &zErr);
    if (rc) {
      idem_result_error(ctx, rc, zErr);
      return;
    }
  }
  for (i = 0; i < 3; i++) {
    /* valid components are ASCII, at most 128 bytes each */
    const unsigned char *z = sqlite3_value_text(argv[i]);
    int n = sqlite3_value_bytes(argv[i]);
    memcpy(zPrefix + nPrefix, z, (size_t)n);
    nPrefix += (size_t)n;
    zPrefix[nPrefix++] = ':';
  }
  if (utf16_refused(ctx, "idem_key", "args", argv[3])) return;
  memcpy(zKey, IDEM_KEY_PREFIX, 6);
  rc = idem_canonical_value("idem_key", "args", argv[3], 0, zPrefix, nPrefix, zKey + 6, &zErr);
  if (rc) {
    idem_result_error(ctx, rc, zErr);
    return;
  }
  sqlite3_result_text(ctx, zKey, IDEM_KEY_LEN, SQLITE_TRANSIENT);
}

/* A message for an SQLite error rc met by zFunc: the connection's
** message when it describes rc, else SQLite's text for rc. */
char *idem_db_error(sqlite3 *db, const char *zFunc, int rc) {
  if ((sqlite3_errcode(db) & 0xff) == (rc & 0xff)) {
    return sqlite3_mprintf("%s: %s", zFunc, sqlite3_errmsg(db));
  }
  return sqlite3_mprintf("%s: %s", zFunc, sqlite3_errstr(rc));
}

/*
** ledger_config.c: a ledger's configuration and what every operation
** reads: the closed list of options (names, ranges, defaults), CREATE's
** arguments and <name>_meta (format, identity, options), the tokens' text
** form, the clock (the VFS's), the argument readers, whether a schema is
** served by dqlite, the accessors other files see, and running one
** statement of SQL text (ledger_exec_sql). The bottom of the ledger's
** files: it calls none of them.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <stdlib.h>
#include <string.h>

/* The closed list of options, in IDEM_OPT_* order. */
const LedgerOption ledger_options[IDEM_N_OPT] = {
    {"lease_seconds", 0, 31536000, 300, 0},
    {"max_attempts", 1, 1000, 5, 0},
    {"max_args_bytes", 2, IDEM_JCS_MAX_BYTES, 1048576, 0},
    {"single_tenant", 0, 1, 0, 0},
    {"retention_seconds", 0, 315360000, 0, 1},
    {"require_transaction", 0, 1, 0, 1},
    {"target_window_seconds", 0, 315360000, 86400, 1},
};

/*
** The option that "name=value" text z names, as an index into
** ledger_options: IDEM_N_OPT for an unknown name, -1 without '='. The name
** (leading and trailing blanks skipped) is *pzName, *pnName bytes.
*/
int ledger_option_index(const char *z, const char **pzName, size_t *pnName) {
  const char *zEq = strchr(z, '=');
  size_t n;
  int j;
  while (*z == ' ' || *z == '\t' || *z == '\n') z++;
  if (zEq == 0) return -1;
  n = (size_t)(zEq - z);
  while (n > 0 && (z[n - 1] == ' ' || z[n - 1] == '\t')) n--;
  if (pzName) *pzName = z;
  if (pnName) *pnName = n;
  for (j = 0; j < IDEM_N_OPT; j++) {
    if (strlen(ledger_options[j].zName) == n && strncmp(ledger_options[j].zName, z, n) == 0) break;
  }
  return j;
}

/* Parse "name=value" options (argv[3..]) into aVal. Under dqlite
** (bDqlite, see ledger_under_dqlite) require_transaction defaults to 1. */
int ledger_parse_options(int argc, const char *const *argv, int bDqlite, sqlite3_int64 *aVal,
                         char **pzErr) {
  int i, j, aSeen[IDEM_N_OPT] = {0};
  for (j = 0; j < IDEM_N_OPT; j++) aVal[j] = ledger_options[j].iDefault;
  if (bDqlite) aVal[IDEM_OPT_REQUIRE_TXN] = 1;
  for (i = 3; i < argc; i++) {
    const char *z = 0, *zV;
    size_t nName = 0;
    char *zEnd;
    sqlite3_int64 v;
    j = ledger_option_index(argv[i], &z, &nName);
    if (j < 0) {
      *pzErr = sqlite3_mprintf("idempotency: option \"%s\" needs the form name=value", argv[i]);
      return SQLITE_ERROR;
    }
    if (j == IDEM_N_OPT) {
      /* the list comes from the table, so a new option is named at once */
      sqlite3_str *pList = sqlite3_str_new(0);
      char *zList;
      for (j = 0; j < IDEM_N_OPT; j++) {
        sqlite3_str_appendf(pList, "%s%s", j ? ", " : "", ledger_options[j].zName);
      }
      zList = sqlite3_str_finish(pList);
      *pzErr = zList ? sqlite3_mprintf("idempotency: unknown option \"%.*s\"; the options are %s",
                                       (int)nName, z, zList)
                     : 0;
      sqlite3_free(zList);
      return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
    }
    if (aSeen[j]++) {
      *pzErr = sqlite3_mprintf("idempotency: option %s is given twice", ledger_options[j].zName);
      return SQLITE_ERROR;
    }
    zV = strchr(argv[i], '=') + 1;
    while (*zV == ' ' || *zV == '\t') zV++;
    v = strtoll(zV, &zEnd, 10);
    while (*zEnd == ' ' || *zEnd == '\t' || *zEnd == '\n') zEnd++;
    if (*zV < '0' || *zV > '9' || *zEnd != 0 || v < ledger_options[j].iMin ||
        v > ledger_options[j].iMax || strlen(zV) > 12) {
      *pzErr = sqlite3_mprintf("idempotency: %s must be an integer from %lld to %lld, got \"%s\"",
                               ledger_options[j].zName, ledger_options[j].iMin,
                               ledger_options[j].iMax, zV);
      return SQLITE_ERROR;
    }
    aVal[j] = v;
  }
  return SQLITE_OK;
}

/* Read the options and check the format from zName_meta. */
int ledger_read_meta(sqlite3 *db, const char *zDb, const char *zName, sqlite3_int64 *aVal,
                     char *zId, int *piFormat, char **pzErr) {
  sqlite3_stmt *pS = 0;
  int rc, j, aSeen[IDEM_N_OPT];
  sqlite3_int64 iFormat = -1;
  char *zSql = sqlite3_mprintf("SELECT k, v FROM \"%w\".\"%w_meta\"", zDb, zName);
  if (zSql == 0) return SQLITE_NOMEM;
  memset(aSeen, 0, sizeof(aSeen));
  rc = sqlite3_prepare_v2(db, zSql, -1, &pS, 0);
  sqlite3_free(zSql);
  if ((rc & 0xff) == SQLITE_NOMEM) return SQLITE_NOMEM;
  if (rc) {
    *pzErr =
        sqlite3_mprintf("idempotency: ledger %s is missing its shadow table %s_meta", zName, zName);
    return SQLITE_CORRUPT_VTAB;
  }
  zId[0] = 0;
  while ((rc = sqlite3_step(pS)) == SQLITE_ROW) {
    const char *k = (const char *)sqlite3_column_text(pS, 0);
    if (k == 0) continue;
    if (strcmp(k, "format") == 0 && sqlite3_column_type(pS, 1) == SQLITE_INTEGER) {
      iFormat = sqlite3_column_int64(pS, 1);
    }
    if (strcmp(k, "id") == 0 && sqlite3_column_bytes(pS, 1) == 16) {
      memcpy(zId, sqlite3_column_text(pS, 1), 17);
    }
    for (j = 0; j < IDEM_N_OPT; j++) {
      const LedgerOption *o = &ledger_options[j];
      sqlite3_int64 v;
      if (strcmp(k, o->zName) != 0) continue;
      v = sqlite3_column_int64(pS, 1);
      /* the same ranges as CREATE: a value edited into the file is never used */
      if (sqlite3_column_type(pS, 1) != SQLITE_INTEGER || v < o->iMin || v > o->iMax) {
        /* a value of another type says so: TEXT '300' is not the integer 300 */
        int eType = sqlite3_column_type(pS, 1);
        const char *zV = (const char *)sqlite3_column_text(pS, 1);
        char *zShown = eType == SQLITE_INTEGER ? sqlite3_mprintf("%s", zV)
                       : eType == SQLITE_TEXT  ? sqlite3_mprintf("'%q' (TEXT)", zV)
                       : eType == SQLITE_FLOAT ? sqlite3_mprintf("%s (REAL)", zV)
                       : eType == SQLITE_BLOB  ? sqlite3_mprintf("a BLOB")
                                               : sqlite3_mprintf("NULL");
        *pzErr = zShown ? sqlite3_mprintf(
                              "idempotency: ledger %s has %s = %s in %s_meta; it "
                              "must be an integer from %lld to %lld",
                              zName, o->zName, zShown, zName, o->iMin, o->iMax)
                        : 0;
        sqlite3_free(zShown);
        sqlite3_finalize(pS);
        return *pzErr ? SQLITE_CORRUPT_VTAB : SQLITE_NOMEM;
      }
      aVal[j] = v;
      aSeen[j] = 1;
    }
  }
  sqlite3_finalize(pS);
  if (rc != SQLITE_DONE) return rc;
  if (iFormat == -1) {
    *pzErr = sqlite3_mprintf(
        "idempotency: ledger %s has no integer format in %s_meta; this build reads format %d",
        zName, zName, LEDGER_FORMAT);
    return *pzErr ? SQLITE_CORRUPT_VTAB : SQLITE_NOMEM;
  }
  if (iFormat < 1 || iFormat > LEDGER_FORMAT) {
    *pzErr = sqlite3_mprintf("idempotency: ledger %s has format %lld; this build reads format %d",
                             zName, iFormat, LEDGER_FORMAT);
    return SQLITE_CORRUPT_VTAB;
  }
  *piFormat = (int)iFormat;
  for (j = 0; j < IDEM_N_OPT; j++) {
    /* an option added after the file was made takes its default */
    if (!aSeen[j] && !ledger_options[j].bOptional) break;
  }
  if (j < IDEM_N_OPT) {
    const LedgerOption *o = &ledger_options[j];
    *pzErr = sqlite3_mprintf(
        "idempotency: ledger %s has no %s in %s_meta; it must be an integer "
        "from %lld to %lld",
        zName, o->zName, zName, o->iMin, o->iMax);
    return *pzErr ? SQLITE_CORRUPT_VTAB : SQLITE_NOMEM;
  }
  if (zId[0] == 0) {
    *pzErr = sqlite3_mprintf(
        "idempotency: ledger %s has no id in %s_meta; it must be the ledger's 16-character "
        "identity",
        zName, zName);
    return *pzErr ? SQLITE_CORRUPT_VTAB : SQLITE_NOMEM;
  }
  return SQLITE_OK;
}

/*
** A token is shown as 32 lowercase hex digits: the row id (16 digits, its
** top bit clear) then 64 random bits (16 digits). The rows table keeps only
** the random part, in the INTEGER column token; a token is found through
** the row id, so it needs no index of its own. A format-1 row upgraded by
** idem_upgrade got the id its old token names (see ledger_upgrade), so the
** old token still finds it.
*/

void ledger_token_hex(sqlite3_int64 id, sqlite3_int64 rnd, char *zOut) {
  sqlite3_uint64 a = (sqlite3_uint64)id, b = (sqlite3_uint64)rnd;
  unsigned char aByte[16];
  int i;
  for (i = 7; i >= 0; i--, a >>= 8, b >>= 8) {
    aByte[i] = (unsigned char)(a & 0xff);
    aByte[i + 8] = (unsigned char)(b & 0xff);
  }
  idem_hex(aByte, 16, zOut); /* big-endian: the same digits as %016llx%016llx */
}

int ledger_token_parse(const char *zHex, sqlite3_int64 *pId, sqlite3_int64 *pRnd) {
  sqlite3_uint64 a = 0, b = 0;
  int i;
  if (zHex == 0) return 0;
  for (i = 0; i < 32; i++) {
    char c = zHex[i];
    int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (v < 0) return 0;
    if (i < 16) a = (a << 4) | (sqlite3_uint64)v;
    else b = (b << 4) | (sqlite3_uint64)v;
  }
  if (zHex[32] != 0) return 0;
  *pId = (sqlite3_int64)(a & TOKEN_ID_MASK);
  *pRnd = (sqlite3_int64)b;
  return 1;
}

/* (Comparisons are spelled as OR chains, not IN lists: SQLite builds an
** ephemeral table for an IN list each time the statement runs, which cost
** about 3,000 instructions per claim.) */

/* Run zSql (sqlite3_mprintf'd, freed here; NULL means out of memory). */
int ledger_exec_sql(sqlite3 *db, char *zSql, char **pzErr) {
  int rc;
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_exec(db, zSql, 0, 0, pzErr);
  sqlite3_free(zSql);
  return rc;
}

/*
** Whether database zDb of db is served by dqlite's VFS: libdqlite registers
** one per node, named "dqlite-<n>", and SQLite answers
** SQLITE_FCNTL_VFS_POINTER itself for every VFS. There the leader runs
** synchronous=OFF on an in-memory VFS, and a transaction is durable when
** COMMIT returns, once a Raft quorum has it in its log. Returns 1 or 0.
*/
int ledger_under_dqlite(sqlite3 *db, const char *zDb) {
  sqlite3_vfs *pVfs = 0;
  if (sqlite3_file_control(db, zDb, SQLITE_FCNTL_VFS_POINTER, &pVfs) != SQLITE_OK) return 0;
  return pVfs != 0 && pVfs->zName != 0 && strncmp(pVfs->zName, "dqlite-", 7) == 0;
}

/* Unix milliseconds from the VFS of the ledger's database: the clock
** behind SQL 'now'. No SQL function sets it; tests use a test VFS. */
sqlite3_int64 ledger_now(IdemLedger *p) {
  sqlite3_vfs *pVfs = p->pClockVfs;
  sqlite3_int64 t = 0;
  if (pVfs == 0) {
    /* a schema's VFS is fixed while it is attached, and so is the ledger */
    if (sqlite3_file_control(p->db, p->zDb, SQLITE_FCNTL_VFS_POINTER, &pVfs) != SQLITE_OK ||
        pVfs == 0) {
      pVfs = sqlite3_vfs_find(0);
    }
    p->pClockVfs = pVfs;
  }
  if (pVfs->iVersion >= 2 && pVfs->xCurrentTimeInt64) {
    pVfs->xCurrentTimeInt64(pVfs, &t);
  } else {
    double r = 0;
    pVfs->xCurrentTime(pVfs, &r);
    t = (sqlite3_int64)(r * 86400000.0);
  }
  return t - (sqlite3_int64)210866760000000LL;
}

/*
** How an argument that should have been an INTEGER is named in an error:
** the integer, the text in JSON quotes, or its type (REAL, BLOB, NULL).
** sqlite3_malloc; NULL on OOM.
*/
char *ledger_arg_got(sqlite3_value *v) {
  if (sqlite3_value_type(v) == SQLITE_INTEGER) {
    return sqlite3_mprintf("%lld", sqlite3_value_int64(v));
  } else if (sqlite3_value_type(v) == SQLITE_TEXT) {
    const char *z = (const char *)sqlite3_value_text(v);
    return z ? idem_json_string(z) : 0;
  }
  return sqlite3_mprintf("%s", idem_type_name(sqlite3_value_type(v)));
}

/*
** The token argument v of zFunc: SQLITE_OK with *pId and *pRnd set (and
** *pzToken, when given, its text); SQLITE_CONSTRAINT with *pzErr naming
** what was given (a text longer than a token by its length) when it is not
** 32 lowercase hex digits; SQLITE_NOMEM.
*/
int ledger_token_arg(const char *zFunc, sqlite3_value *v, sqlite3_int64 *pId, sqlite3_int64 *pRnd,
                     const char **pzToken, char **pzErr) {
  const char *zToken = 0;
  char *zGot;
  if (sqlite3_value_type(v) == SQLITE_TEXT) {
    zToken = (const char *)sqlite3_value_text(v);
    if (zToken == 0) return SQLITE_NOMEM;
  }
  if (pzToken) *pzToken = zToken;
  if (ledger_token_parse(zToken, pId, pRnd)) return SQLITE_OK;
  if (sqlite3_value_type(v) == SQLITE_TEXT && sqlite3_value_bytes(v) > 64) {
    zGot = sqlite3_mprintf("a TEXT of %d bytes", sqlite3_value_bytes(v));
  } else {
    zGot = ledger_arg_got(v);
  }
  if (zGot == 0) return SQLITE_NOMEM;
  *pzErr = sqlite3_mprintf(
      "%s: token must be the 32 lowercase hex digits idem_claim returned, got %s", zFunc, zGot);
  sqlite3_free(zGot);
  return *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
}

sqlite3 *ledger_db(const IdemLedger *p) { return p->db; }

const char *ledger_schema(const IdemLedger *p) { return p->zDb; }

const char *ledger_name(const IdemLedger *p) { return p->zName; }

const char *ledger_identity(const IdemLedger *p) { return p->zId; }

sqlite3_int64 ledger_option(const IdemLedger *p, int iOpt) { return p->aOpt[iOpt]; }

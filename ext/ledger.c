/*
** ledger.c: the "idempotency" virtual-table module and the functions that
** claim and settle through it.
**
**   CREATE VIRTUAL TABLE L USING idempotency[(lease_seconds=N, max_attempts=N,
**                                              max_args_bytes=N, single_tenant=0|1)]
**   idem_claim(ledger, tenant, conversation, tool, args [, effect [, operation_id]])
**   idem_settle(ledger, token, status, detail)
**   idem_resolve(ledger, tenant, key, status, detail)
**   idem_purge(ledger, older_than_seconds)
**   idem_last_claim(ledger)
**   INSERT INTO L(tenant, conversation, tool, args[, effect][, key])   -- a claim
**   SELECT ... FROM L [WHERE tenant=? AND key=?]                       -- effective state
**   DELETE FROM L WHERE ...                                            -- terminal rows only
**
** Shadow tables (created in xCreate only, format 1; see ledger_schema_sql):
**
**   L_rows    one row per (tenant, key): the request (conversation, tool,
**             canonical args, effect), its status, result/error, attempt,
**             fencing token, times in Unix ms, guard marks and members.
**             Plain-SQL CHECKs carry the key grammar, NOT NULL and the status
**             domain; UNIQUE(tenant,key) and UNIQUE(token); three BEFORE
**             triggers refuse an insert that is not a fresh claim, any change
**             of the request columns, an illegal status change, and the
**             deletion of a claimed or unknown row. None of them calls an
**             extension function, so the file stays readable and checkable
**             without the extension.
**   L_meta    (k, v): format version and the options the ledger was made with.
**   L_guards  one row per guarded table (guard.c).
**
** Every writing function is SQLITE_DIRECTONLY and the module sets
** SQLITE_VTAB_DIRECTONLY: a view or trigger planted in a file cannot claim,
** settle or purge.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#include "idem_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#define LEDGER_FORMAT 1

/* The boundary sentences. UNKNOWN_MSG is the behaviour, not a phrasing. */
#define EXTERNAL_NOTE                                                                \
  "we will not resend this call, but we cannot promise that the target receives it " \
  "once: send the key as its Idempotency-Key and let the target deduplicate"
#define UNKNOWN_MSG                                                         \
  "that request may have reached the target system, the outcome is theirs " \
  "to report, and nothing is retried here"

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

static const struct {
  const char *zName;
  sqlite3_int64 iMin, iMax, iDefault;
} aOpt[] = {
    {"lease_seconds", 0, 31536000, 300},
    {"max_attempts", 1, 1000, 5},
    {"max_args_bytes", 2, IDEM_JCS_MAX_BYTES, 1048576},
    {"single_tenant", 0, 1, 0},
};
#define OPT_LEASE 0
#define OPT_ATTEMPTS 1
#define OPT_ARGS_BYTES 2
#define OPT_SINGLE 3
#define N_OPT 4

/* ------------------------------------------------------------------ */
/* Connection registry                                                 */
/* ------------------------------------------------------------------ */

/* Prepared statements of a ledger, made on first use. */
enum {
  ST_INSERT,
  ST_GET,
  ST_BY_TOKEN,
  ST_RECLAIM,
  ST_SETTLE,
  ST_PURGE,
  ST_DELETE,
  ST_SCHEMA_VERSION,
  ST_TEMP_SCHEMA_VERSION,
  ST_GUARDS,
  ST_COUNT_LIVE,
  ST_GET_KEY,
  ST_SYNCHRONOUS,
  ST_SAVEPOINT,
  ST_RELEASE,
  ST_ROLLBACK_TO,
  ST_ROLLBACK,
  ST_CUR_ALL, /* cursor statements, one per xBestIndex plan (idxNum order) */
  ST_CUR_KEY,
  ST_CUR_TENANT,
  ST_CUR_TOKEN,
  N_STMT
};

/* Resolution cache: the last few ledger names a function was given, so
** the hot path does not resolve the name again. An entry holds a
** reference on its ledger. It is valid while the ledger is connected and,
** for a ledger in main, while temp's schema version is unchanged (only a
** temp table can shadow a main table); an attached ledger is resolved in
** full each time. */
#define N_CACHE 4
typedef struct ConnCache ConnCache;
struct ConnCache {
  char *zName; /* as given (sqlite3_malloc) */
  IdemLedger *p;
  int iTempVersion;
};

typedef struct IdemConn IdemConn;
struct IdemConn {
  IdemLedger *pList; /* connected ledgers */
  ConnCache aCache[N_CACHE];
  int iNext; /* next cache slot to replace */
};

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

/* Unix milliseconds from the VFS of the ledger's database: the clock
** behind SQL 'now'. No SQL function sets it; tests use a test VFS. */
static sqlite3_int64 ledger_now(IdemLedger *p) {
  sqlite3_vfs *pVfs = 0;
  sqlite3_int64 t = 0;
  if (sqlite3_file_control(p->db, p->zDb, SQLITE_FCNTL_VFS_POINTER, &pVfs) != SQLITE_OK ||
      pVfs == 0) {
    pVfs = sqlite3_vfs_find(0);
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

static void random_token(char *zOut) {
  unsigned char a[16];
  sqlite3_randomness(16, a);
  idem_hex(a, 16, zOut);
}

/* Tokens are stored as 16-byte BLOBs (a smaller unique index) and shown
** as 32 lowercase hex digits. Parse zHex into a[16]; 0 if malformed. */
static int token_parse(const char *zHex, unsigned char *a) {
  int i;
  if (zHex == 0) return 0;
  for (i = 0; i < 32; i++) {
    char c = zHex[i];
    int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (v < 0) return 0;
    if (i & 1) a[i / 2] = (unsigned char)(a[i / 2] | v);
    else a[i / 2] = (unsigned char)(v << 4);
  }
  return zHex[32] == 0;
}

/* Bind hex token zHex (already validated) as its 16-byte BLOB. */
static int bind_token(sqlite3_stmt *pS, int i, const char *zHex) {
  unsigned char a[16];
  if (!token_parse(zHex, a)) return sqlite3_bind_null(pS, i);
  return sqlite3_bind_blob(pS, i, a, 16, SQLITE_TRANSIENT);
}

/* The columns every row query selects, in Row order. */
#define ROW_COLUMNS                                                                 \
  "id,conversation,tool,args,effect,status,result,error,attempt,token,lease_until," \
  "members,marks,tenant,\"key\",updated_at,expirations"

static const char *const azStmtSql[N_STMT] = {
    /* ST_INSERT */
    "INSERT INTO \"%w\".\"%w_rows\"(tenant,\"key\",conversation,tool,args,effect,status,"
    "attempt,token,created_at,updated_at,lease_until,marks)"
    " VALUES(?1,?2,?3,?4,?5,?6,'claimed',1,?7,?8,?8,?9,?10)"
    " ON CONFLICT(tenant,\"key\") DO NOTHING",
    /* ST_GET */
    "SELECT " ROW_COLUMNS
    " FROM \"%w\".\"%w_rows\""
    " WHERE tenant=?1 AND \"key\"=?2",
    /* ST_BY_TOKEN */
    "SELECT " ROW_COLUMNS
    " FROM \"%w\".\"%w_rows\""
    " WHERE token=?1",
    /* ST_RECLAIM: take-over or re-claim, compare-and-set on status+token */
    "UPDATE \"%w\".\"%w_rows\" SET status='claimed',attempt=attempt+1,token=?1,"
    "updated_at=?2,lease_until=?3,marks=?4,result=NULL,error=NULL,members=NULL,"
    "expirations=expirations+?5 WHERE id=?6 AND status=?7 AND token=?8",
    /* ST_SETTLE: compare-and-set on status+token */
    "UPDATE \"%w\".\"%w_rows\" SET status=?1,result=?2,error=?3,members=?4,updated_at=?5"
    " WHERE id=?6 AND status=?7 AND token=?8",
    /* ST_PURGE */
    "DELETE FROM \"%w\".\"%w_rows\" WHERE status IN ('succeeded','failed','released')"
    " AND updated_at<?1",
    /* ST_DELETE */
    "DELETE FROM \"%w\".\"%w_rows\" WHERE id=?1 AND status IN "
    "('succeeded','failed','released')",
    /* ST_SCHEMA_VERSION */
    "PRAGMA \"%w\".schema_version",
    /* ST_TEMP_SCHEMA_VERSION */
    "PRAGMA temp.schema_version",
    /* ST_GUARDS */
    "SELECT g.id, g.tbl, g.key_column, g.tenant_column, t.tbl_name"
    " FROM \"%w\".\"%w_guards\" AS g LEFT JOIN \"%w\".sqlite_schema AS t"
    " ON t.type='trigger' AND t.name=g.tbl||'_idem_'||?1||'_insert' ORDER BY g.id",
    /* ST_COUNT_LIVE */
    "SELECT (SELECT count(*) FROM \"%w\".\"%w_guards\"),"
    " (SELECT count(*) FROM \"%w\".\"%w_rows\" WHERE status IN ('claimed','unknown'))",
    /* ST_GET_KEY (single_tenant ledgers: a key is unique across the ledger) */
    "SELECT " ROW_COLUMNS
    " FROM \"%w\".\"%w_rows\""
    " WHERE \"key\"=?1",
    /* ST_SYNCHRONOUS */
    "PRAGMA \"%w\".synchronous",
    /* ST_SAVEPOINT, ST_RELEASE, ST_ROLLBACK_TO (%.0s consumes the names) */
    "SAVEPOINT idem_claim%.0s%.0s",
    "RELEASE idem_claim%.0s%.0s",
    "ROLLBACK TO idem_claim%.0s%.0s",
    "ROLLBACK%.0s%.0s",
    /* ST_CUR_ALL, ST_CUR_KEY, ST_CUR_TENANT, ST_CUR_TOKEN */
    "SELECT " ROW_COLUMNS ",created_at FROM \"%w\".\"%w_rows\" ORDER BY id",
    "SELECT " ROW_COLUMNS
    ",created_at FROM \"%w\".\"%w_rows\""
    " WHERE tenant=?1 AND \"key\"=?2 ORDER BY id",
    "SELECT " ROW_COLUMNS ",created_at FROM \"%w\".\"%w_rows\" WHERE tenant=?1 ORDER BY id",
    "SELECT " ROW_COLUMNS ",created_at FROM \"%w\".\"%w_rows\" WHERE token=?1 ORDER BY id",
};

/* The statement i of ledger p, prepared on first use. */
static int ledger_stmt(IdemLedger *p, int i, sqlite3_stmt **ppStmt) {
  if (p->aStmt[i] == 0) {
    char *zSql = sqlite3_mprintf(azStmtSql[i], p->zDb, p->zName, p->zDb, p->zName);
    int rc;
    if (zSql == 0) return SQLITE_NOMEM;
    rc = sqlite3_prepare_v3(p->db, zSql, -1, SQLITE_PREPARE_PERSISTENT, &p->aStmt[i], 0);
    sqlite3_free(zSql);
    if (rc != SQLITE_OK) {
      p->aStmt[i] = 0;
      return rc;
    }
  }
  *ppStmt = p->aStmt[i];
  return SQLITE_OK;
}

typedef char
    assert_stmt_slots[(N_STMT <= (int)(sizeof(((IdemLedger *)0)->aStmt) / sizeof(sqlite3_stmt *)) &&
                       N_STMT <= 32)
                          ? 1
                          : -1];

/* Finalize the prepared statements; one lent to an open cursor is left to
** the cursor, which finalizes it when it finds its slot emptied. */
static void ledger_finalize_all(IdemLedger *p) {
  int i;
  for (i = 0; i < N_STMT; i++) {
    if ((p->mBusy & (1u << i)) == 0) sqlite3_finalize(p->aStmt[i]);
    p->aStmt[i] = 0;
  }
  p->mBusy = 0;
}

static void ledger_unref(IdemLedger *p) {
  if (--p->nRef == 0) {
    sqlite3_free(p); /* zDb and zName live in the same allocation */
  }
}

/* ------------------------------------------------------------------ */
/* Schema of the shadow tables (format 1)                              */
/* ------------------------------------------------------------------ */

#define GRAMMAR(c)                                                                             \
  "typeof(" c ")='text' AND length(" c ") BETWEEN 1 AND 128 AND instr(" c ",char(0))=0 AND " c \
  " NOT GLOB '*[^A-Za-z0-9_-]*'"

/* The shadow-table triggers, as SQLite stores them (no schema name). The
** extension compares every trigger on a shadow table against these. */
#define N_TRIGGER 2
static const char *const azTriggerFmt[N_TRIGGER] = {
    "CREATE TRIGGER \"%w_rows_update\" BEFORE UPDATE ON \"%w_rows\" WHEN NOT ("
    "NEW.id IS OLD.id AND NEW.tenant IS OLD.tenant AND NEW.\"key\" IS OLD.\"key\""
    " AND NEW.conversation IS OLD.conversation AND NEW.tool IS OLD.tool"
    " AND NEW.args IS OLD.args AND NEW.effect IS OLD.effect"
    " AND NEW.created_at IS OLD.created_at AND ("
    "(OLD.status='claimed' AND NEW.status<>'claimed'"
    " AND NEW.token IS OLD.token AND NEW.attempt IS OLD.attempt)"
    " OR ((OLD.status='claimed' OR OLD.status='released') AND NEW.status='claimed'"
    " AND NEW.attempt IS OLD.attempt+1 AND NEW.token IS NOT OLD.token)"
    " OR (OLD.status='unknown' AND NEW.status<>'unknown' AND NEW.status<>'claimed'"
    " AND NEW.token IS OLD.token AND NEW.attempt IS OLD.attempt)))"
    " BEGIN SELECT RAISE(ABORT,'idempotency: illegal change of a ledger row'); END",
    "CREATE TRIGGER \"%w_rows_delete\" BEFORE DELETE ON \"%w_rows\""
    " WHEN OLD.status='claimed' OR OLD.status='unknown'"
    " BEGIN SELECT RAISE(ABORT,'idempotency: a claimed or unknown ledger row cannot be "
    "deleted'); END",
};

static char *trigger_sql(int i, const char *zName) {
  return sqlite3_mprintf(azTriggerFmt[i], zName, zName);
}

/* Create the shadow-table triggers of ledger zName in schema zDb: the
** stored text of trigger_sql() with the schema put after "CREATE TRIGGER ". */
static int create_triggers(sqlite3 *db, const char *zDb, const char *zName, char **pzErr) {
  int rc = SQLITE_OK, i;
  for (i = 0; rc == SQLITE_OK && i < N_TRIGGER; i++) {
    char *zTrig = trigger_sql(i, zName), *zSql;
    if (zTrig == 0) return SQLITE_NOMEM;
    zSql = sqlite3_mprintf("CREATE TRIGGER \"%w\".%s", zDb, zTrig + 15);
    sqlite3_free(zTrig);
    if (zSql == 0) return SQLITE_NOMEM;
    rc = sqlite3_exec(db, zSql, 0, 0, pzErr);
    sqlite3_free(zSql);
  }
  return rc;
}

/* Create the shadow tables and triggers of ledger zName in schema zDb. */
static int ledger_create_schema(sqlite3 *db, const char *zDb, const char *zName,
                                const sqlite3_int64 *aVal, const char *zId, char **pzErr) {
  int rc;
  char *zSql = sqlite3_mprintf(
      "CREATE TABLE \"%w\".\"%w_rows\"("
      "id INTEGER PRIMARY KEY,"
      "tenant NOT NULL CHECK(" GRAMMAR("tenant") "),"
      "\"key\" NOT NULL CHECK(" GRAMMAR("\"key\"") "),"
      "conversation NOT NULL CHECK(" GRAMMAR("conversation") "),"
      "tool NOT NULL CHECK(" GRAMMAR("tool") "),"
      "args NOT NULL CHECK(typeof(args)='text' AND length(args)>=1),"
      "effect NOT NULL CHECK(effect='local' OR effect='external'),"
      "status NOT NULL CHECK(status='claimed' OR status='succeeded' OR status='failed'"
      " OR status='released' OR status='unknown'),"
      "result CHECK(result IS NULL OR typeof(result)='text'),"
      "error CHECK(error IS NULL OR typeof(error)='text'),"
      "attempt INTEGER NOT NULL CHECK(typeof(attempt)='integer' AND attempt>=1),"
      "token NOT NULL UNIQUE CHECK(typeof(token)='blob' AND length(token)=16),"
      "created_at INTEGER NOT NULL CHECK(typeof(created_at)='integer'),"
      "updated_at INTEGER NOT NULL CHECK(typeof(updated_at)='integer'),"
      "lease_until INTEGER NOT NULL CHECK(typeof(lease_until)='integer'),"
      "marks CHECK(marks IS NULL OR typeof(marks)='text'),"
      "members CHECK(members IS NULL OR typeof(members)='text'),"
      "expirations INTEGER NOT NULL DEFAULT 0 CHECK(typeof(expirations)='integer'"
      " AND expirations>=0),"
      "UNIQUE(tenant,\"key\"));"
      "CREATE TABLE \"%w\".\"%w_meta\"(k TEXT PRIMARY KEY NOT NULL, v NOT NULL) WITHOUT ROWID;"
      "INSERT INTO \"%w\".\"%w_meta\"(k,v) VALUES('format',%d),('id',%Q),('lease_seconds',%lld),"
      "('max_attempts',%lld),('max_args_bytes',%lld),('single_tenant',%lld);"
      "CREATE TABLE \"%w\".\"%w_guards\"(id INTEGER PRIMARY KEY, tbl TEXT NOT NULL UNIQUE,"
      " key_column TEXT NOT NULL, tenant_column TEXT, token_column TEXT);",
      zDb, zName,
      zDb, zName, zDb, zName, LEDGER_FORMAT, zId, aVal[OPT_LEASE],
      aVal[OPT_ATTEMPTS], aVal[OPT_ARGS_BYTES], aVal[OPT_SINGLE], zDb, zName);
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_exec(db, zSql, 0, 0, pzErr);
  sqlite3_free(zSql);
  if (rc == SQLITE_OK && aVal[OPT_SINGLE]) {
    /* one tenant's keys: a key is unique across the ledger */
    zSql = sqlite3_mprintf("CREATE UNIQUE INDEX \"%w\".\"%w_rows_key\" ON \"%w_rows\"(\"key\")",
                           zDb, zName, zName);
    if (zSql == 0) return SQLITE_NOMEM;
    rc = sqlite3_exec(db, zSql, 0, 0, pzErr);
    sqlite3_free(zSql);
  }
  if (rc == SQLITE_OK) rc = create_triggers(db, zDb, zName, pzErr);
  return rc;
}

/* Drop and recreate the shadow triggers under zNew (after a rename). */
static int ledger_rename_triggers(sqlite3 *db, const char *zDb, const char *zOld,
                                  const char *zNew) {
  static const char *azSuffix[N_TRIGGER] = {"update", "delete"};
  int rc = SQLITE_OK, i;
  for (i = 0; rc == SQLITE_OK && i < N_TRIGGER; i++) {
    char *zSql =
        sqlite3_mprintf("DROP TRIGGER IF EXISTS \"%w\".\"%w_rows_%s\"", zDb, zOld, azSuffix[i]);
    if (zSql == 0) return SQLITE_NOMEM;
    rc = sqlite3_exec(db, zSql, 0, 0, 0);
    sqlite3_free(zSql);
  }
  if (rc == SQLITE_OK) rc = create_triggers(db, zDb, zNew, 0);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Foreign triggers                                                    */
/* ------------------------------------------------------------------ */

/*
** Fail when a trigger on a shadow table is not one of the ledger's own
** (compared by name and stored SQL): such a trigger could suppress or
** rewrite a claim. Checked again only when a schema version changes.
** Returns SQLITE_OK, or an error with *pzErr set.
*/
static int ledger_check_triggers(IdemLedger *p, const char *zFunc, char **pzErr) {
  sqlite3_stmt *pV = 0, *pT = 0, *pQ = 0;
  int rc, v1 = 0, v2 = 0, i;
  char *zSql = 0, *azExpect[N_TRIGGER] = {0, 0};
  rc = ledger_stmt(p, ST_SCHEMA_VERSION, &pV);
  if (rc) return rc;
  if (sqlite3_step(pV) == SQLITE_ROW) v1 = sqlite3_column_int(pV, 0);
  rc = sqlite3_reset(pV);
  if (rc) return rc;
  rc = ledger_stmt(p, ST_TEMP_SCHEMA_VERSION, &pT);
  if (rc) return rc;
  if (sqlite3_step(pT) == SQLITE_ROW) v2 = sqlite3_column_int(pT, 0);
  rc = sqlite3_reset(pT);
  if (rc) return rc;
  if (p->bChecked && v1 == p->iSchemaVersion && v2 == p->iTempSchemaVersion) {
    if (p->zForeign == 0) return SQLITE_OK;
    *pzErr = sqlite3_mprintf("%s: %s", zFunc, p->zForeign);
    return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  sqlite3_free(p->zForeign);
  p->zForeign = 0;
  for (i = 0; i < N_TRIGGER; i++) {
    azExpect[i] = trigger_sql(i, p->zName);
    if (azExpect[i] == 0) {
      rc = SQLITE_NOMEM;
      goto done;
    }
  }
  zSql = sqlite3_mprintf(
      "SELECT name, sql, %Q FROM \"%w\".sqlite_schema WHERE type='trigger' AND tbl_name"
      " COLLATE NOCASE IN ('%q_rows','%q_meta','%q_guards')"
      " UNION ALL SELECT name, sql, 'temp' FROM temp.sqlite_schema WHERE type='trigger'"
      " AND %d AND tbl_name COLLATE NOCASE IN ('%q_rows','%q_meta','%q_guards')",
      p->zDb, p->zDb, p->zName, p->zName, p->zName, sqlite3_stricmp(p->zDb, "temp") != 0, p->zName,
      p->zName, p->zName);
  if (zSql == 0) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  rc = sqlite3_prepare_v2(p->db, zSql, -1, &pQ, 0);
  if (rc) goto done;
  while ((rc = sqlite3_step(pQ)) == SQLITE_ROW) {
    const char *zTrig = (const char *)sqlite3_column_text(pQ, 0);
    const char *zTSql = (const char *)sqlite3_column_text(pQ, 1);
    int ok = 0;
    for (i = 0; zTSql && i < N_TRIGGER; i++) ok |= strcmp(zTSql, azExpect[i]) == 0;
    if (!ok) {
      p->zForeign = sqlite3_mprintf(
          "ledger %s has a foreign trigger \"%s\" on its shadow tables; every ledger "
          "operation is refused until it is dropped",
          p->zName, zTrig ? zTrig : "?");
      if (p->zForeign == 0) {
        rc = SQLITE_NOMEM;
        goto done;
      }
      break;
    }
  }
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) rc = SQLITE_OK;
  if (rc == SQLITE_OK) {
    p->bChecked = 1;
    p->iSchemaVersion = v1;
    p->iTempSchemaVersion = v2;
    if (p->zForeign) rc = SQLITE_ERROR;
  }
done:
  sqlite3_finalize(pQ);
  sqlite3_free(zSql);
  for (i = 0; i < N_TRIGGER; i++) sqlite3_free(azExpect[i]);
  if (rc == SQLITE_ERROR && p->zForeign) {
    *pzErr = sqlite3_mprintf("%s: %s", zFunc, p->zForeign);
    if (*pzErr == 0) rc = SQLITE_NOMEM;
  }
  return rc;
}

/* ------------------------------------------------------------------ */
/* Rows                                                                */
/* ------------------------------------------------------------------ */

/* A ledger row, copied out of the statement that read it (row_load), so
** the statement can be reset before anything is written: a statement
** still stepping would hold a read transaction, and SQLite does not wait
** on the busy handler when a read transaction must become a write. */
typedef struct Row Row;
struct Row {
  sqlite3_int64 id, attempt, leaseUntil, updatedAt, expirations;
  const char *zConv, *zTool, *zArgs, *zEffect, *zStatus, *zResult, *zError;
  const char *zMembers, *zMarks, *zTenant, *zKey;
  int nArgs;
  char zToken[33]; /* hex */
  char *pBuf;      /* owns the text above (sqlite3_malloc) */
};

static void row_free(Row *r) {
  sqlite3_free(r->pBuf);
  r->pBuf = 0;
}

/* Copy the current row of pS (selected with ROW_COLUMNS) into r; the
** caller resets pS and calls row_free(). */
static int row_load(sqlite3_stmt *pS, Row *r) {
  static const int aText[11] = {1, 2, 3, 4, 5, 6, 7, 11, 12, 13, 14};
  const char **apDest[11];
  sqlite3_int64 nTotal = 0;
  int i;
  char *z;
  memset(r, 0, sizeof(*r));
  apDest[0] = &r->zConv;
  apDest[1] = &r->zTool;
  apDest[2] = &r->zArgs;
  apDest[3] = &r->zEffect;
  apDest[4] = &r->zStatus;
  apDest[5] = &r->zResult;
  apDest[6] = &r->zError;
  apDest[7] = &r->zMembers;
  apDest[8] = &r->zMarks;
  apDest[9] = &r->zTenant;
  apDest[10] = &r->zKey;
  for (i = 0; i < 11; i++) {
    if (sqlite3_column_type(pS, aText[i]) == SQLITE_NULL) continue;
    if (sqlite3_column_text(pS, aText[i]) == 0) return SQLITE_NOMEM;
    nTotal += sqlite3_column_bytes(pS, aText[i]) + 1;
  }
  z = r->pBuf = sqlite3_malloc64(nTotal + 1);
  if (z == 0) return SQLITE_NOMEM;
  for (i = 0; i < 11; i++) {
    int n;
    if (sqlite3_column_type(pS, aText[i]) == SQLITE_NULL) continue;
    n = sqlite3_column_bytes(pS, aText[i]);
    memcpy(z, sqlite3_column_text(pS, aText[i]), (size_t)n);
    z[n] = 0;
    *apDest[i] = z;
    if (i == 2) r->nArgs = n;
    z += n + 1;
  }
  r->id = sqlite3_column_int64(pS, 0);
  r->attempt = sqlite3_column_int64(pS, 8);
  if (sqlite3_column_bytes(pS, 9) == 16 && sqlite3_column_type(pS, 9) == SQLITE_BLOB) {
    idem_hex((const unsigned char *)sqlite3_column_blob(pS, 9), 16, r->zToken);
  }
  r->leaseUntil = sqlite3_column_int64(pS, 10);
  r->updatedAt = sqlite3_column_int64(pS, 15);
  r->expirations = sqlite3_column_int64(pS, 16);
  if (r->zConv == 0 || r->zTool == 0 || r->zArgs == 0 || r->zEffect == 0 || r->zStatus == 0 ||
      r->zTenant == 0 || r->zKey == 0) {
    row_free(r);
    return SQLITE_CORRUPT_VTAB;
  }
  return SQLITE_OK;
}

/*
** Run the row query pS (bound by the caller) and load its row into r.
** Returns SQLITE_OK with *pbFound set, or an error; pS is always reset
** and its bindings cleared.
*/
static int row_fetch(sqlite3_stmt *pS, Row *r, int *pbFound) {
  int rc = sqlite3_step(pS);
  *pbFound = 0;
  memset(r, 0, sizeof(*r));
  if (rc == SQLITE_ROW) {
    rc = row_load(pS, r);
    if (rc == SQLITE_OK) *pbFound = 1;
  } else if (rc == SQLITE_DONE) {
    rc = SQLITE_OK;
  } else {
    rc = sqlite3_reset(pS);
    if (rc == SQLITE_OK) rc = SQLITE_ERROR;
  }
  sqlite3_reset(pS);
  sqlite3_clear_bindings(pS);
  return rc;
}

static int row_is_local(const Row *r) { return r->zEffect && strcmp(r->zEffect, "local") == 0; }

/* ------------------------------------------------------------------ */
/* Guard marks and members (the guards themselves are in guard.c)      */
/* ------------------------------------------------------------------ */

/*
** Call xVisit for each guard of p whose table still exists, with the
** table's current name: a guard follows its table through ALTER TABLE
** RENAME (its insert trigger keeps its name and SQLite moves it), and a
** guard whose table was dropped (its trigger went with it) is skipped.
*/
static int guards_each(IdemLedger *p,
                       int (*xVisit)(IdemLedger *, sqlite3_int64, const char *, const char *,
                                     const char *, void *),
                       void *pArg) {
  sqlite3_stmt *pG = 0;
  int rc = ledger_stmt(p, ST_GUARDS, &pG);
  if (rc) return rc;
  sqlite3_bind_text(pG, 1, p->zName, -1, SQLITE_STATIC);
  while ((rc = sqlite3_step(pG)) == SQLITE_ROW) {
    const char *zTbl = (const char *)sqlite3_column_text(pG, 4);
    if (sqlite3_column_type(pG, 4) == SQLITE_NULL) continue; /* table dropped */
    if (zTbl == 0) {
      rc = SQLITE_NOMEM;
      break;
    }
    rc = xVisit(p, sqlite3_column_int64(pG, 0), zTbl, (const char *)sqlite3_column_text(pG, 2),
                (const char *)sqlite3_column_text(pG, 3), pArg);
    if (rc) break;
  }
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  if (rc == SQLITE_OK) rc = sqlite3_reset(pG);
  else sqlite3_reset(pG);
  return rc;
}

static int marks_visit(IdemLedger *p, sqlite3_int64 iGuard, const char *zTbl, const char *zKeyCol,
                       const char *zTenCol, void *pArg) {
  sqlite3_str *s = (sqlite3_str *)pArg;
  sqlite3_stmt *pM = 0;
  char *zSql = sqlite3_mprintf("SELECT max(rowid) FROM \"%w\".\"%w\"", p->zDb, zTbl);
  int rc;
  (void)zKeyCol;
  (void)zTenCol;
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_prepare_v2(p->db, zSql, -1, &pM, 0);
  sqlite3_free(zSql);
  if (rc) return rc;
  if (sqlite3_step(pM) == SQLITE_ROW) {
    sqlite3_str_appendf(s, "%lld:%lld;", iGuard, sqlite3_column_int64(pM, 0));
  }
  return sqlite3_finalize(pM);
}

/*
** The marks of a new local claim: for each guard, the guarded table's
** largest rowid now, as text "gid:rowid;gid:rowid;" (NULL when there are
** no guards). *pz is from sqlite3_malloc.
*/
static int ledger_marks(IdemLedger *p, char **pz) {
  sqlite3_str *s = sqlite3_str_new(p->db);
  int rc = guards_each(p, marks_visit, s);
  *pz = 0;
  if (rc == SQLITE_OK) rc = sqlite3_str_errcode(s);
  if (rc == SQLITE_OK && sqlite3_str_length(s) > 0) {
    *pz = sqlite3_str_finish(s);
    if (*pz == 0) rc = SQLITE_NOMEM;
  } else {
    sqlite3_free(sqlite3_str_finish(s));
  }
  return rc;
}

/* The mark of guard iGuard in zMarks, or -1 when the guard came later
** than the claim (then every row of the key counts). */
static sqlite3_int64 mark_of(const char *zMarks, sqlite3_int64 iGuard) {
  const char *z = zMarks;
  while (z && *z) {
    char *zEnd;
    sqlite3_int64 g = strtoll(z, &zEnd, 10), m;
    if (*zEnd != ':') break;
    m = strtoll(zEnd + 1, &zEnd, 10);
    if (g == iGuard) return m;
    if (*zEnd != ';') break;
    z = zEnd + 1;
  }
  return -1;
}

typedef struct MemberScan MemberScan;
struct MemberScan {
  const char *zTenant, *zKey, *zMarks;
  sqlite3_str *s;
  int n;
};

static int members_visit(IdemLedger *p, sqlite3_int64 iGuard, const char *zTbl, const char *zKeyCol,
                         const char *zTenCol, void *pArg) {
  MemberScan *m = (MemberScan *)pArg;
  sqlite3_stmt *pM = 0;
  char *zSql, *zQ;
  int rc;
  if (zTenCol) {
    zSql = sqlite3_mprintf(
        "SELECT rowid FROM \"%w\".\"%w\" WHERE \"%w\"=?1 AND \"%w\"=?2 AND rowid>?3"
        " ORDER BY rowid",
        p->zDb, zTbl, zKeyCol, zTenCol);
  } else {
    zSql = sqlite3_mprintf(
        "SELECT rowid FROM \"%w\".\"%w\" WHERE \"%w\"=?1 AND ?2 IS NOT NULL AND rowid>?3"
        " ORDER BY rowid",
        p->zDb, zTbl, zKeyCol);
  }
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_prepare_v2(p->db, zSql, -1, &pM, 0);
  sqlite3_free(zSql);
  if (rc) return rc;
  zQ = idem_json_string(zTbl);
  if (zQ == 0) {
    sqlite3_finalize(pM);
    return SQLITE_NOMEM;
  }
  sqlite3_bind_text(pM, 1, m->zKey, -1, SQLITE_STATIC);
  sqlite3_bind_text(pM, 2, m->zTenant, -1, SQLITE_STATIC);
  sqlite3_bind_int64(pM, 3, mark_of(m->zMarks, iGuard));
  while (sqlite3_step(pM) == SQLITE_ROW) {
    sqlite3_str_appendf(m->s, "%s{\"table\":%s,\"rowid\":%lld}", m->n ? "," : "", zQ,
                        sqlite3_column_int64(pM, 0));
    m->n++;
  }
  sqlite3_free(zQ);
  return sqlite3_finalize(pM);
}

/*
** The members of claim (zTenant, zKey, zMarks): the guarded rows of that
** tenant and key above the claim's marks, as a JSON array of
** {"table":..,"rowid":..} by guard then rowid, into *pz (sqlite3_malloc;
** "[]" when none); *pnMember = their count.
*/
static int ledger_members(IdemLedger *p, const char *zTenant, const char *zKey, const char *zMarks,
                          char **pz, int *pnMember) {
  MemberScan m;
  int rc;
  m.zTenant = zTenant;
  m.zKey = zKey;
  m.zMarks = zMarks;
  m.n = 0;
  m.s = sqlite3_str_new(p->db);
  *pz = 0;
  *pnMember = 0;
  sqlite3_str_appendchar(m.s, 1, '[');
  rc = guards_each(p, members_visit, &m);
  sqlite3_str_appendchar(m.s, 1, ']');
  if (rc == SQLITE_OK) rc = sqlite3_str_errcode(m.s);
  if (rc == SQLITE_OK) {
    *pz = sqlite3_str_finish(m.s);
    if (*pz == 0) rc = SQLITE_NOMEM;
    *pnMember = m.n;
  } else {
    sqlite3_free(sqlite3_str_finish(m.s));
  }
  return rc;
}

/* ------------------------------------------------------------------ */
/* JSON output                                                         */
/* ------------------------------------------------------------------ */

/* A JSON string literal for UTF-8 text z (sqlite3_malloc). */
char *idem_json_string(const char *z) {
  static const char hexd[] = "0123456789abcdef";
  sqlite3_str *s = sqlite3_str_new(0);
  const unsigned char *u = (const unsigned char *)z;
  sqlite3_str_appendchar(s, 1, '"');
  for (; *u; u++) {
    if (*u == '"' || *u == '\\') {
      sqlite3_str_appendchar(s, 1, '\\');
      sqlite3_str_appendchar(s, 1, (char)*u);
    } else if (*u < 0x20) {
      char e[7] = {'\\', 'u', '0', '0', hexd[*u >> 4], hexd[*u & 15], 0};
      sqlite3_str_appendall(s, e);
    } else {
      sqlite3_str_appendchar(s, 1, (char)*u);
    }
  }
  sqlite3_str_appendchar(s, 1, '"');
  return sqlite3_str_finish(s);
}

/* ------------------------------------------------------------------ */
/* The claim                                                           */
/* ------------------------------------------------------------------ */

/* A validated request. */
typedef struct Req Req;
struct Req {
  const char *zTenant, *zConv, *zTool, *zEffect;
  char zKey[IDEM_KEY_MAX_CHARS + 1];
  IdemBuf args; /* canonical */
  char *zMarks; /* marks read before the write pass, or NULL */
};

#define DEC_ADMITTED 1
#define DEC_REPLAY 2
#define DEC_IN_PROGRESS 3
#define DEC_UNKNOWN 4
#define DEC_MISMATCH 5

/* The outcome of one decision, built in full before anything commits. */
typedef struct Decision Decision;
struct Decision {
  int eDec;
  char *zJson;           /* the idem_claim result */
  char *zWhy;            /* for INSERT: why the key is taken */
  sqlite3_int64 id;      /* row id (admitted) */
  sqlite3_int64 attempt; /* admitted: the attempt */
  char zToken[33];       /* admitted: the token */
};

static const char *request_diff(const Row *r, const Req *q, int *pDiff) {
  *pDiff = 1;
  if (strcmp(r->zConv, q->zConv)) return "conversation";
  if (strcmp(r->zTool, q->zTool)) return "tool";
  if (strcmp(r->zEffect, q->zEffect)) return "effect";
  if ((size_t)r->nArgs != q->args.n || memcmp(r->zArgs, q->args.z, q->args.n)) return "args";
  *pDiff = 0;
  return 0;
}

/* synchronous >= FULL on the ledger's schema: a power loss keeps the claim */
static int ledger_durable(IdemLedger *p) {
  sqlite3_stmt *pS = 0;
  int durable = 0;
  if (ledger_stmt(p, ST_SYNCHRONOUS, &pS) == SQLITE_OK) {
    if (sqlite3_step(pS) == SQLITE_ROW) durable = sqlite3_column_int(pS, 0) >= 2;
    sqlite3_reset(pS);
  }
  if (durable) {
    const char *zFile = sqlite3_db_filename(p->db, p->zDb);
    if (zFile == 0 || zFile[0] == 0) durable = 0; /* memory or temp database */
  }
  return durable;
}

static int build_admitted(IdemLedger *p, const Req *q, const char *zToken, sqlite3_int64 attempt,
                          sqlite3_int64 lease, int committed, Decision *d) {
  d->eDec = DEC_ADMITTED;
  d->attempt = attempt;
  memcpy(d->zToken, zToken, 33);
  d->zJson = sqlite3_mprintf(
      "{\"decision\":\"admitted\",\"key\":\"%s\",\"token\":\"%s\",\"attempt\":%lld,"
      "\"effect\":\"%s\",\"committed\":%s,\"durable\":%s,\"lease_until\":%lld%s}",
      q->zKey, zToken, attempt, q->zEffect, committed ? "true" : "false",
      ledger_durable(p) ? "true" : "false", lease,
      strcmp(q->zEffect, "external") == 0 ? ",\"note\":\"" EXTERNAL_NOTE "\"" : "");
  return d->zJson ? SQLITE_OK : SQLITE_NOMEM;
}

/* Replay of a terminal row (succeeded or failed). */
static int build_replay(IdemLedger *p, const Row *r, Decision *d) {
  int ok = strcmp(r->zStatus, "succeeded") == 0;
  (void)p;
  d->eDec = DEC_REPLAY;
  d->zJson = sqlite3_mprintf(
      "{\"decision\":\"replay\",\"idempotent\":true,\"key\":\"%s\",\"status\":\"%s\","
      "\"attempt\":%lld,\"%s\":%s,\"members\":%s}",
      r->zKey, r->zStatus, r->attempt, ok ? "result" : "error",
      (ok ? r->zResult : r->zError) ? (ok ? r->zResult : r->zError) : "null",
      r->zMembers ? r->zMembers : "[]");
  d->zWhy = sqlite3_mprintf("it %s at attempt %lld", ok ? "succeeded" : "failed", r->attempt);
  return d->zJson && d->zWhy ? SQLITE_OK : SQLITE_NOMEM;
}

static int build_simple(const Row *r, int eDec, const char *zField, Decision *d) {
  d->eDec = eDec;
  if (eDec == DEC_IN_PROGRESS) {
    d->zJson = sqlite3_mprintf(
        "{\"decision\":\"in_progress\",\"key\":\"%s\",\"attempt\":%lld,\"lease_until\":%lld}",
        r->zKey, r->attempt, r->leaseUntil);
    d->zWhy = sqlite3_mprintf("it is claimed (attempt %lld) until %lld", r->attempt, r->leaseUntil);
  } else if (eDec == DEC_UNKNOWN) {
    d->zJson = sqlite3_mprintf(
        "{\"decision\":\"unknown\",\"key\":\"%s\",\"attempt\":%lld,\"message\":\"" UNKNOWN_MSG
        "\"}",
        r->zKey, r->attempt);
    d->zWhy = sqlite3_mprintf("its outcome is unknown: " UNKNOWN_MSG);
  } else {
    d->zJson = sqlite3_mprintf(
        "{\"decision\":\"mismatch\",\"key\":\"%s\",\"differs\":\"%s\",\"message\":\"this key "
        "is bound to another request; nothing was admitted or replayed\"}",
        r->zKey, zField);
    d->zWhy = sqlite3_mprintf("it is bound to another request (the %s differs)", zField);
  }
  return d->zJson && d->zWhy ? SQLITE_OK : SQLITE_NOMEM;
}

/* Report a nested write that did not change exactly one row. */
static int write_check(IdemLedger *p, const char *zFunc, const char *zWhat, char **pzErr) {
  int n = sqlite3_changes(p->db);
  if (n == 1) return SQLITE_OK;
  *pzErr = sqlite3_mprintf(
      "%s: the ledger's %s of %s_rows changed %d rows, not 1; a trigger "
      "or another writer interfered, so nothing was decided",
      zFunc, zWhat, p->zName, n);
  return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
}

static int step_done(sqlite3_stmt *pS) {
  int rc = sqlite3_step(pS);
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) rc = SQLITE_OK;
  else rc = sqlite3_reset(pS);
  sqlite3_reset(pS);
  return rc;
}

/* A message for an SQLite error rc met by zFunc: the connection's
** message when it describes rc, else SQLite's text for rc. */
char *idem_db_error(sqlite3 *db, const char *zFunc, int rc) {
  if ((sqlite3_errcode(db) & 0xff) == (rc & 0xff)) {
    return sqlite3_mprintf("%s: %s", zFunc, sqlite3_errmsg(db));
  }
  return sqlite3_mprintf("%s: %s", zFunc, sqlite3_errstr(rc));
}

static const char *value_type_name(sqlite3_value *v) {
  switch (sqlite3_value_type(v)) {
    case SQLITE_NULL: return "NULL";
    case SQLITE_INTEGER: return "INTEGER";
    case SQLITE_FLOAT: return "REAL";
    case SQLITE_BLOB: return "BLOB";
    default: return "TEXT";
  }
}

/* Bind the same-row compare-and-set arguments. */
static void bind_cas(sqlite3_stmt *pS, int i, const Row *r) {
  sqlite3_bind_int64(pS, i, r->id);
  sqlite3_bind_text(pS, i + 1, r->zStatus, -1, SQLITE_TRANSIENT);
  bind_token(pS, i + 2, r->zToken);
}

/*
** Decide a claim for request q, writing what the decision needs. bWrite=0
** is the read-only pass: it returns DEC_ADMITTED with zJson NULL when a
** write is needed (the caller then runs the write pass). In the write pass
** the first statement is the conditional insert, so the write lock is taken
** through the busy handler before anything is read, and every result is
** built before the one write that makes it true, so nothing can fail
** after the write.
*/
static int claim_decide(IdemLedger *p, const char *zFunc, const Req *q, int bWrite, int bCommitted,
                        Decision *d, char **pzErr) {
  sqlite3_stmt *pIns = 0, *pGet = 0, *pUpd = 0;
  sqlite3_int64 now = ledger_now(p);
  sqlite3_int64 lease = now + p->aOpt[OPT_LEASE] * 1000;
  char zToken[33];
  char *zMarks = 0, *zMembers = 0;
  int rc, nMember = 0, bFound = 0, bLocal = strcmp(q->zEffect, "local") == 0;
  Row r;

  memset(d, 0, sizeof(*d));
  memset(&r, 0, sizeof(r));
  random_token(zToken);
  if (bWrite) {
    if (bLocal) {
      if (q->zMarks) {
        zMarks = sqlite3_mprintf("%s", q->zMarks);
        if (zMarks == 0) {
          rc = SQLITE_NOMEM;
          goto done;
        }
      } else {
        /* inside the caller's transaction or the INSERT's: reading is safe */
        rc = ledger_marks(p, &zMarks);
        if (rc) goto done;
      }
    }
    rc = build_admitted(p, q, zToken, 1, lease, bCommitted, d);
    if (rc) goto done;
    rc = ledger_stmt(p, ST_INSERT, &pIns);
    if (rc) goto done;
    sqlite3_bind_text(pIns, 1, q->zTenant, -1, SQLITE_STATIC);
    sqlite3_bind_text(pIns, 2, q->zKey, -1, SQLITE_STATIC);
    sqlite3_bind_text(pIns, 3, q->zConv, -1, SQLITE_STATIC);
    sqlite3_bind_text(pIns, 4, q->zTool, -1, SQLITE_STATIC);
    sqlite3_bind_text(pIns, 5, q->args.z, (int)q->args.n, SQLITE_STATIC);
    sqlite3_bind_text(pIns, 6, q->zEffect, -1, SQLITE_STATIC);
    bind_token(pIns, 7, zToken);
    sqlite3_bind_int64(pIns, 8, now);
    sqlite3_bind_int64(pIns, 9, lease);
    if (zMarks) sqlite3_bind_text(pIns, 10, zMarks, -1, SQLITE_STATIC);
    else sqlite3_bind_null(pIns, 10);
    rc = step_done(pIns);
    sqlite3_clear_bindings(pIns);
    if (rc) goto done;
    if (sqlite3_changes(p->db) == 1) {
      d->id = sqlite3_last_insert_rowid(p->db);
      goto done; /* admitted, attempt 1: the result was built above */
    }
    sqlite3_free(d->zJson);
    d->zJson = 0;
  }

  rc = ledger_stmt(p, ST_GET, &pGet);
  if (rc) goto done;
  sqlite3_bind_text(pGet, 1, q->zTenant, -1, SQLITE_STATIC);
  sqlite3_bind_text(pGet, 2, q->zKey, -1, SQLITE_STATIC);
  rc = row_fetch(pGet, &r, &bFound);
  if (rc) goto done;
  if (!bFound && p->aOpt[OPT_SINGLE]) {
    /* single_tenant: the key may be held under another tenant */
    rc = ledger_stmt(p, ST_GET_KEY, &pGet);
    if (rc) goto done;
    sqlite3_bind_text(pGet, 1, q->zKey, -1, SQLITE_STATIC);
    rc = row_fetch(pGet, &r, &bFound);
    if (rc) goto done;
    if (bFound) {
      rc = build_simple(&r, DEC_MISMATCH, "tenant", d);
      goto done;
    }
  }
  if (!bFound) {
    if (bWrite) {
      /* the insert did nothing, yet no row holds the key */
      rc = write_check(p, zFunc, "claim insert", pzErr);
      if (rc == SQLITE_OK) rc = SQLITE_ERROR;
    } else {
      d->eDec = DEC_ADMITTED; /* needs the write pass */
    }
    goto done;
  }
  {
    int bDiff;
    const char *zField = request_diff(&r, q, &bDiff);
    if (bDiff) {
      rc = build_simple(&r, DEC_MISMATCH, zField, d);
      goto done;
    }
  }
  if (strcmp(r.zStatus, "succeeded") == 0 || strcmp(r.zStatus, "failed") == 0) {
    rc = build_replay(p, &r, d);
    goto done;
  }
  if (strcmp(r.zStatus, "unknown") == 0) {
    rc = build_simple(&r, DEC_UNKNOWN, 0, d);
    goto done;
  }
  if (strcmp(r.zStatus, "claimed") == 0 && now < r.leaseUntil) {
    rc = build_simple(&r, DEC_IN_PROGRESS, 0, d);
    goto done;
  }
  if (strcmp(r.zStatus, "claimed") == 0 && !row_is_local(&r)) {
    /* an external claim whose lease ran out: it may have reached the target */
    rc = build_simple(&r, DEC_UNKNOWN, 0, d);
    goto done;
  }
  if (strcmp(r.zStatus, "claimed") == 0) {
    /* an expired local claim: rows that landed without a settle make it unknown */
    rc = ledger_members(p, r.zTenant, r.zKey, r.zMarks, &zMembers, &nMember);
    if (rc) goto done;
    if (nMember > 0) {
      rc = build_simple(&r, DEC_UNKNOWN, 0, d);
      goto done;
    }
  }
  /* released, or an expired local claim with no rows: claim it again */
  if (!bWrite) {
    d->eDec = DEC_ADMITTED; /* needs the write pass */
    goto done;
  }
  if (strcmp(r.zStatus, "claimed") == 0 && r.expirations + 1 >= p->aOpt[OPT_ATTEMPTS]) {
    /* a poison call: this expiry is its max_attempts-th; stop retrying it */
    char zErr[200];
    sqlite3_snprintf(sizeof(zErr), zErr,
                     "{\"reason\":\"max_attempts\",\"attempts\":%lld,\"message\":\"%lld "
                     "attempts expired without a settle; the call is not retried\"}",
                     r.attempt, r.expirations + 1);
    r.zStatus = "failed";
    r.zError = zErr;
    r.zMembers = "[]";
    rc = build_replay(p, &r, d);
    r.zStatus = "claimed";
    if (rc) goto done;
    rc = ledger_stmt(p, ST_SETTLE, &pUpd);
    if (rc) goto done;
    sqlite3_bind_text(pUpd, 1, "failed", -1, SQLITE_STATIC);
    sqlite3_bind_null(pUpd, 2);
    sqlite3_bind_text(pUpd, 3, zErr, -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(pUpd, 4, "[]", -1, SQLITE_STATIC);
    sqlite3_bind_int64(pUpd, 5, now);
    bind_cas(pUpd, 6, &r);
    rc = step_done(pUpd);
    sqlite3_clear_bindings(pUpd);
    if (rc == SQLITE_OK) rc = write_check(p, zFunc, "poison update", pzErr);
    goto done;
  }
  if (bLocal && zMarks == 0) {
    rc = ledger_marks(p, &zMarks);
    if (rc) goto done;
  }
  rc = build_admitted(p, q, zToken, r.attempt + 1, lease, bCommitted, d);
  if (rc) goto done;
  rc = ledger_stmt(p, ST_RECLAIM, &pUpd);
  if (rc) goto done;
  bind_token(pUpd, 1, zToken);
  sqlite3_bind_int64(pUpd, 2, now);
  sqlite3_bind_int64(pUpd, 3, lease);
  if (zMarks) sqlite3_bind_text(pUpd, 4, zMarks, -1, SQLITE_STATIC);
  else sqlite3_bind_null(pUpd, 4);
  /* a take-over counts an expiry; a re-claim after a release does not */
  sqlite3_bind_int(pUpd, 5, strcmp(r.zStatus, "claimed") == 0);
  bind_cas(pUpd, 6, &r);
  rc = step_done(pUpd);
  sqlite3_clear_bindings(pUpd);
  if (rc == SQLITE_OK) rc = write_check(p, zFunc, "re-claim update", pzErr);
  if (rc == SQLITE_OK) d->id = r.id;

done:
  row_free(&r);
  sqlite3_free(zMarks);
  sqlite3_free(zMembers);
  if (rc != SQLITE_OK) {
    sqlite3_free(d->zJson);
    sqlite3_free(d->zWhy);
    d->zJson = d->zWhy = 0;
  }
  return rc;
}

static void req_free(Req *q) {
  idem_buf_free(&q->args);
  sqlite3_free(q->zMarks);
  q->zMarks = 0;
}

/*
** Validate a request: tenant, conversation, tool, args, effect and the
** optional operation id; fill q (args canonical; key derived unless the
** operation id is given). pEffect NULL means the default (external);
** pOpId NULL means none given (an SQL NULL given is an error, bOpIdNull
** lets the INSERT path treat its NULL key column as not given). On error
** returns the code with *pzErr set.
*/
static int req_parse(IdemLedger *p, const char *zFunc, sqlite3_value *pTenant, sqlite3_value *pConv,
                     sqlite3_value *pTool, sqlite3_value *pArgs, sqlite3_value *pEffect,
                     sqlite3_value *pOpId, Req *q, char **pzErr) {
  static const char *azLabel[3] = {"tenant", "conversation", "tool"};
  sqlite3_value *apV[3];
  int rc, i;
  memset(q, 0, sizeof(*q));
  q->args.pMem = &idem_sqlite_mem;
  apV[0] = pTenant;
  apV[1] = pConv;
  apV[2] = pTool;
  for (i = 0; i < 3; i++) {
    rc = idem_key_error(zFunc, azLabel[i], apV[i], pzErr);
    if (rc) return rc;
  }
  q->zTenant = (const char *)sqlite3_value_text(pTenant);
  q->zConv = (const char *)sqlite3_value_text(pConv);
  q->zTool = (const char *)sqlite3_value_text(pTool);
  if (pEffect == 0) {
    q->zEffect = "external";
  } else {
    /* the type first: reading a BLOB as text would make it TEXT */
    int bText = sqlite3_value_type(pEffect) == SQLITE_TEXT;
    const char *z = bText ? (const char *)sqlite3_value_text(pEffect) : 0;
    if (bText && z == 0) return SQLITE_NOMEM;
    if (!bText || (strcmp(z, "local") != 0 && strcmp(z, "external") != 0)) {
      char *zQ = bText ? idem_json_string(z) : 0;
      if (bText && zQ == 0) return SQLITE_NOMEM;
      *pzErr = sqlite3_mprintf("%s: effect must be 'local' or 'external', got %s", zFunc,
                               zQ ? zQ : value_type_name(pEffect));
      sqlite3_free(zQ);
      return *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    }
    q->zEffect = strcmp(z, "local") == 0 ? "local" : "external";
  }
  if (pOpId) {
    const char *z;
    rc = idem_key_error(zFunc, "operation_id", pOpId, pzErr);
    if (rc) return rc;
    z = (const char *)sqlite3_value_text(pOpId);
    if (strncmp(z, "idem", 4) == 0 && z[4] >= '0' && z[4] <= '9' && z[5] == '-') {
      *pzErr = sqlite3_mprintf(
          "%s: operation_id \"%s\" looks like a derived key "
          "(idem<digit>-...); omit it to derive the key",
          zFunc, z);
      return *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    }
    sqlite3_snprintf(sizeof(q->zKey), q->zKey, "%s", z);
  }
  if (sqlite3_value_type(pArgs) == SQLITE_TEXT &&
      sqlite3_value_bytes(pArgs) > p->aOpt[OPT_ARGS_BYTES]) {
    *pzErr = sqlite3_mprintf("%s: args is %d bytes, over the ledger's max_args_bytes of %lld",
                             zFunc, sqlite3_value_bytes(pArgs), p->aOpt[OPT_ARGS_BYTES]);
    return *pzErr ? SQLITE_TOOBIG : SQLITE_NOMEM;
  }
  rc = idem_canonical_value(zFunc, "args", pArgs, &q->args, 0, 0, 0, pzErr);
  if (rc) return rc;
  if (pOpId == 0) {
    char zPrefix[3 * (IDEM_KEY_MAX_CHARS + 1) + 1];
    sqlite3_snprintf(sizeof(zPrefix), zPrefix, "%s:%s:%s:", q->zTenant, q->zConv, q->zTool);
    memcpy(q->zKey, IDEM_KEY_PREFIX, 6);
    idem_digest_bytes(zPrefix, strlen(zPrefix), q->args.z, q->args.n, q->zKey + 6);
  }
  return SQLITE_OK;
}

/* ------------------------------------------------------------------ */
/* Savepoints                                                          */
/* ------------------------------------------------------------------ */

/* Run prepared statement i of p (a savepoint command) to completion. */
static int ledger_exec(IdemLedger *p, int i) {
  sqlite3_stmt *pS = 0;
  int rc = ledger_stmt(p, i, &pS);
  if (rc) return rc;
  return step_done(pS);
}

/* ------------------------------------------------------------------ */
/* Ledger resolution for the functions                                 */
/* ------------------------------------------------------------------ */

typedef struct LedgerRef LedgerRef;
struct LedgerRef {
  IdemLedger *p;
  char zArg[1]; /* the name as given; allocated to fit */
};

static void ledger_ref_free(void *pArg) {
  LedgerRef *r = (LedgerRef *)pArg;
  ledger_unref(r->p);
  sqlite3_free(r);
}

static void cache_clear(ConnCache *c) {
  if (c->p) ledger_unref(c->p);
  sqlite3_free(c->zName);
  c->p = 0;
  c->zName = 0;
}

/* temp's schema version, through ledger p's statement */
static int ledger_temp_version(IdemLedger *p, int *pV) {
  sqlite3_stmt *pT = 0;
  int rc = ledger_stmt(p, ST_TEMP_SCHEMA_VERSION, &pT);
  if (rc) return rc;
  if (sqlite3_step(pT) == SQLITE_ROW) *pV = sqlite3_column_int(pT, 0);
  return sqlite3_reset(pT);
}

/*
** Does zDb.zName exist as a table (of any kind)? Preparing a statement
** over it also connects a virtual table. *pbFound is set; an error other
** than "no such table" (out of memory, a ledger that fails to connect) is
** returned.
*/
static int probe_table(sqlite3 *db, const char *zDb, const char *zName, int *pbFound) {
  sqlite3_stmt *pProbe = 0;
  char *zSql = sqlite3_mprintf("SELECT 1 FROM \"%w\".\"%w\" WHERE 0", zDb, zName);
  int rc;
  *pbFound = 0;
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_prepare_v2(db, zSql, -1, &pProbe, 0);
  sqlite3_free(zSql);
  sqlite3_finalize(pProbe);
  if (rc == SQLITE_OK) {
    *pbFound = 1;
  } else if ((rc & 0xff) == SQLITE_ERROR &&
             sqlite3_strglob("no such table: *", sqlite3_errmsg(db)) == 0) {
    rc = SQLITE_OK;
  }
  return rc;
}

static IdemLedger *registry_find(IdemConn *pConn, const char *zDb, const char *zName) {
  IdemLedger *p;
  for (p = pConn->pList; p; p = p->pNext) {
    if (sqlite3_stricmp(p->zDb, zDb) == 0 && sqlite3_stricmp(p->zName, zName) == 0) return p;
  }
  return 0;
}

/*
** Resolve argument iArg of a function call to a connected ledger, the way
** an unqualified table name resolves (temp, main, then attached in order).
** Cached per statement through auxdata. On failure reports the error on
** ctx and returns NULL.
*/
IdemLedger *idem_ledger_resolve(sqlite3_context *ctx, int iArg, sqlite3_value *pName,
                                const char *zFunc) {
  IdemConn *pConn = (IdemConn *)sqlite3_user_data(ctx);
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  LedgerRef *pRef = (LedgerRef *)sqlite3_get_auxdata(ctx, iArg);
  const char *zName;
  sqlite3_stmt *pList = 0;
  IdemLedger *p = 0;
  char *zErr = 0;
  int rc;

  if (sqlite3_value_type(pName) != SQLITE_TEXT) {
    zErr = sqlite3_mprintf("%s: ledger must be TEXT naming a table USING idempotency", zFunc);
    idem_result_error(ctx, SQLITE_ERROR, zErr);
    return 0;
  }
  zName = (const char *)sqlite3_value_text(pName);
  if (zName == 0) {
    sqlite3_result_error_nomem(ctx);
    return 0;
  }
  if (pRef && !pRef->p->bDead && strcmp(pRef->zArg, zName) == 0) return pRef->p;
  {
    int i;
    for (i = 0; i < N_CACHE; i++) {
      ConnCache *c = &pConn->aCache[i];
      if (c->p == 0 || c->p->bDead || strcmp(c->zName, zName) != 0) continue;
      if (sqlite3_stricmp(c->p->zDb, "temp") == 0) return c->p;
      if (sqlite3_stricmp(c->p->zDb, "main") == 0) {
        int v = -1;
        if (ledger_temp_version(c->p, &v) == SQLITE_OK && v == c->iTempVersion) return c->p;
      }
    }
  }

  /* schemas in resolution order: temp first, then main, then attached */
  rc = sqlite3_prepare_v2(db, "SELECT name FROM pragma_database_list ORDER BY seq<>1, seq", -1,
                          &pList, 0);
  while (rc == SQLITE_OK) {
    const char *zDb;
    int bFound = 0;
    rc = sqlite3_step(pList);
    if (rc == SQLITE_DONE) {
      rc = SQLITE_OK;
      break;
    }
    if (rc != SQLITE_ROW) break;
    zDb = (const char *)sqlite3_column_text(pList, 0);
    if (zDb == 0) {
      rc = SQLITE_NOMEM;
      break;
    }
    /* preparing connects the virtual table, which registers it */
    rc = probe_table(db, zDb, zName, &bFound);
    if (rc == SQLITE_OK && bFound) {
      p = registry_find(pConn, zDb, zName); /* NULL: a table, but not a ledger */
      break;
    }
  }
  if (rc) zErr = idem_db_error(db, zFunc, rc);
  sqlite3_finalize(pList);
  if (rc) {
    idem_result_error(ctx, rc, zErr);
    return 0;
  }
  if (p == 0) {
    char *zQ = idem_json_string(zName);
    zErr = zQ ? sqlite3_mprintf("%s: unknown ledger %s: no table USING idempotency by that name",
                                zFunc, zQ)
              : 0;
    sqlite3_free(zQ);
    idem_result_error(ctx, SQLITE_ERROR, zErr);
    return 0;
  }
  {
    size_t n = strlen(zName);
    pRef = sqlite3_malloc64(sizeof(LedgerRef) + n);
    if (pRef) {
      pRef->p = p;
      p->nRef++;
      memcpy(pRef->zArg, zName, n + 1);
      sqlite3_set_auxdata(ctx, iArg, pRef, ledger_ref_free);
    }
  }
  {
    /* remember it; a failure to cache only costs speed */
    ConnCache *c = &pConn->aCache[pConn->iNext];
    char *zCopy = sqlite3_mprintf("%s", zName);
    int v = -1;
    if (zCopy && ledger_temp_version(p, &v) == SQLITE_OK) {
      cache_clear(c);
      c->zName = zCopy;
      c->p = p;
      c->iTempVersion = v;
      p->nRef++;
      pConn->iNext = (pConn->iNext + 1) % N_CACHE;
    } else {
      sqlite3_free(zCopy);
    }
  }
  return p;
}

IdemLedger *idem_ledger_find_by_id(sqlite3_context *ctx, const char *zName, const char *zId,
                                   int *pRc) {
  IdemConn *pConn = (IdemConn *)sqlite3_user_data(ctx);
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  sqlite3_stmt *pList = 0;
  IdemLedger *p;
  int rc, iPass;
  for (iPass = 0; iPass < 2; iPass++) {
    for (p = pConn->pList; p; p = p->pNext) {
      if (!p->bDead && strcmp(p->zId, zId) == 0 && sqlite3_stricmp(p->zName, zName) == 0) {
        *pRc = SQLITE_OK;
        return p;
      }
    }
    if (iPass) break;
    /* not connected yet: connect every same-named table, then look again */
    rc = sqlite3_prepare_v2(db, "SELECT name FROM pragma_database_list", -1, &pList, 0);
    while (rc == SQLITE_OK) {
      const char *zDb;
      int bFound = 0;
      rc = sqlite3_step(pList);
      if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
        break;
      }
      if (rc != SQLITE_ROW) break;
      zDb = (const char *)sqlite3_column_text(pList, 0);
      rc = zDb ? probe_table(db, zDb, zName, &bFound) : SQLITE_NOMEM;
    }
    sqlite3_finalize(pList);
    if (rc) {
      *pRc = rc;
      return 0;
    }
  }
  *pRc = SQLITE_OK;
  return 0;
}

/* ------------------------------------------------------------------ */
/* idem_claim                                                          */
/* ------------------------------------------------------------------ */

/* Is a statement that writes running on db (other than nested ones)? */
static int writer_in_progress(sqlite3 *db) {
  sqlite3_stmt *pS = 0;
  while ((pS = sqlite3_next_stmt(db, pS)) != 0) {
    if (sqlite3_stmt_busy(pS) && !sqlite3_stmt_readonly(pS)) return 1;
  }
  return 0;
}

static void idem_claim_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  static const char *zFunc = "idem_claim";
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  IdemLedger *p;
  Req q;
  Decision d;
  char *zErr = 0;
  int rc, bAuto = 0, bSave = 0;

  memset(&d, 0, sizeof(d));
  memset(&q, 0, sizeof(q));
  q.args.pMem = &idem_sqlite_mem;
  p = idem_ledger_resolve(ctx, 0, argv[0], zFunc);
  if (p == 0) return;
  rc = req_parse(p, zFunc, argv[1], argv[2], argv[3], argv[4], argc > 5 ? argv[5] : 0,
                 argc > 6 ? argv[6] : 0, &q, &zErr);
  if (rc) goto done;
  rc = ledger_check_triggers(p, zFunc, &zErr);
  if (rc) goto done;

  bAuto = sqlite3_get_autocommit(db);
  if (writer_in_progress(db)) {
    zErr = sqlite3_mprintf(
        "%s: call it in a statement of its own (SELECT idem_claim(...)); "
        "a statement that writes is in progress",
        zFunc);
    rc = zErr ? SQLITE_MISUSE : SQLITE_NOMEM;
    goto done;
  }
  if (bAuto) {
    /* read pass without a write lock: settled, running, unknown and
    ** mismatched keys need no write */
    rc = claim_decide(p, zFunc, &q, 0, 0, &d, &zErr);
    if (rc || d.zJson) goto done;
    if (strcmp(q.zEffect, "local") == 0) {
      /* the guarded tables' marks, read now: inside the savepoint a read
      ** before the insert would hold a read transaction, and its upgrade
      ** to a write would not wait for the busy handler. Rows of this key
      ** can only land under a live claim of it, so an older mark loses
      ** none of this claim's members. */
      rc = ledger_marks(p, &q.zMarks);
      if (rc) goto done;
    }
  }
  {
    /* prepared before anything is written, so that undoing cannot fail
    ** for want of memory to prepare it */
    sqlite3_stmt *pX;
    int i;
    for (i = ST_SAVEPOINT; rc == SQLITE_OK && i <= ST_ROLLBACK; i++) rc = ledger_stmt(p, i, &pX);
    if (rc) goto done;
  }
  rc = ledger_exec(p, ST_SAVEPOINT);
  if (rc) goto done;
  bSave = 1;
  rc = claim_decide(p, zFunc, &q, 1, bAuto, &d, &zErr);
  if (rc == SQLITE_OK) {
    rc = ledger_exec(p, ST_RELEASE);
    if (rc == SQLITE_OK) bSave = 0;
  }

done:
  if (rc && zErr == 0 && rc != SQLITE_NOMEM) zErr = idem_db_error(db, zFunc, rc);
  if (bSave) {
    int rcU = ledger_exec(p, ST_ROLLBACK_TO);
    if (rcU == SQLITE_OK) rcU = ledger_exec(p, ST_RELEASE);
    if (rcU != SQLITE_OK && bAuto) ledger_exec(p, ST_ROLLBACK); /* the transaction is ours */
  }
  req_free(&q);
  if (rc) {
    sqlite3_free(d.zJson);
    sqlite3_free(d.zWhy);
    idem_result_error(ctx, rc, zErr);
    return;
  }
  sqlite3_free(d.zWhy);
  sqlite3_result_text(ctx, d.zJson, -1, sqlite3_free);
}

/* ------------------------------------------------------------------ */
/* idem_settle and idem_resolve                                        */
/* ------------------------------------------------------------------ */

static int is_status(const char *z, const char *const *az) {
  for (; *az; az++) {
    if (strcmp(z, *az) == 0) return 1;
  }
  return 0;
}

/* Is canonical JSON z an object whose member "sent" is false? */
static int detail_sent_false(const char *z, size_t n) {
  cJSON *pRoot = cJSON_ParseWithLength(z, n), *pSent;
  int ok;
  if (pRoot == 0) return -1; /* out of memory: the text is valid JSON */
  pSent = cJSON_IsObject(pRoot) ? cJSON_GetObjectItemCaseSensitive(pRoot, "sent") : 0;
  ok = pSent != 0 && cJSON_IsFalse(pSent);
  cJSON_Delete(pRoot);
  return ok;
}

/*
** Record outcome zStatus with detail (canonical, may be NULL) on row r,
** found by token (idem_settle) or by key (idem_resolve, bResolve=1).
** Checks the transition, the release rules and the members, then writes
** with a compare-and-set on the row's status and token.
*/
static int outcome_apply(IdemLedger *p, const char *zFunc, Row *r, const char *zStatus,
                         const IdemBuf *pDetail, int bResolve, char **pzJson, char **pzErr) {
  sqlite3_stmt *pUpd = 0;
  sqlite3_int64 now = ledger_now(p);
  const char *zEff = r->zStatus; /* effective status */
  char *zMembers = 0;
  int rc, nMember = 0, bLocal = row_is_local(r);

  *pzJson = 0;
  if (strcmp(r->zStatus, "claimed") == 0 && now >= r->leaseUntil) {
    if (!bLocal) {
      zEff = "unknown";
    } else {
      rc = ledger_members(p, r->zTenant, r->zKey, r->zMarks, &zMembers, &nMember);
      if (rc) goto done;
      if (nMember > 0) zEff = "unknown";
    }
  }
  if (bResolve && strcmp(zEff, "unknown") != 0) {
    if (strcmp(zEff, "claimed") == 0) {
      *pzErr = sqlite3_mprintf(
          "%s: key \"%s\" is claimed, not unknown; the claim's holder "
          "settles it with its token",
          zFunc, r->zKey);
    } else {
      *pzErr = sqlite3_mprintf("%s: illegal transition %s -> %s for key \"%s\"", zFunc, zEff,
                               zStatus, r->zKey);
    }
    rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    goto done;
  }
  if (!((strcmp(zEff, "claimed") == 0) ||
        (strcmp(zEff, "unknown") == 0 && strcmp(zStatus, "unknown") != 0))) {
    *pzErr = sqlite3_mprintf("%s: illegal transition %s -> %s for key \"%s\"", zFunc, zEff, zStatus,
                             r->zKey);
    rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    goto done;
  }
  if (bLocal && strcmp(zStatus, "unknown") == 0) {
    *pzErr = sqlite3_mprintf(
        "%s: status unknown is for external claims; the outcome of local "
        "key \"%s\" is known: settle succeeded, failed or released",
        zFunc, r->zKey);
    rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    goto done;
  }
  if (bLocal && zMembers == 0) {
    rc = ledger_members(p, r->zTenant, r->zKey, r->zMarks, &zMembers, &nMember);
    if (rc) goto done;
  }
  if (strcmp(zStatus, "released") == 0) {
    if (bLocal && nMember > 0) {
      *pzErr = sqlite3_mprintf(
          "%s: cannot release local key \"%s\": its attempt wrote %d "
          "guarded row%s; settle succeeded or failed",
          zFunc, r->zKey, nMember, nMember == 1 ? "" : "s");
      rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
      goto done;
    }
    if (!bLocal) {
      int ok = pDetail->z ? detail_sent_false(pDetail->z, pDetail->n) : 0;
      if (ok < 0) {
        rc = SQLITE_NOMEM;
        goto done;
      }
      if (!ok) {
        *pzErr = sqlite3_mprintf(
            "%s: releasing external key \"%s\" needs detail "
            "{\"sent\": false}: only a request known never to have been "
            "sent may be retried",
            zFunc, r->zKey);
        rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
        goto done;
      }
    }
  }
  rc = ledger_stmt(p, ST_SETTLE, &pUpd);
  if (rc) goto done;
  sqlite3_bind_text(pUpd, 1, zStatus, -1, SQLITE_STATIC);
  if (strcmp(zStatus, "succeeded") == 0) {
    if (pDetail->z) sqlite3_bind_text(pUpd, 2, pDetail->z, (int)pDetail->n, SQLITE_STATIC);
    sqlite3_bind_null(pUpd, 3);
  } else {
    sqlite3_bind_null(pUpd, 2);
    if (pDetail->z) sqlite3_bind_text(pUpd, 3, pDetail->z, (int)pDetail->n, SQLITE_STATIC);
  }
  if (zMembers) sqlite3_bind_text(pUpd, 4, zMembers, -1, SQLITE_STATIC);
  else sqlite3_bind_text(pUpd, 4, "[]", 2, SQLITE_STATIC);
  sqlite3_bind_int64(pUpd, 5, now);
  sqlite3_bind_int64(pUpd, 6, r->id);
  sqlite3_bind_text(pUpd, 7, r->zStatus, -1, SQLITE_TRANSIENT);
  bind_token(pUpd, 8, r->zToken);
  *pzJson = sqlite3_mprintf("{\"key\":\"%s\",\"status\":\"%s\",\"attempt\":%lld,\"members\":%s}",
                            r->zKey, zStatus, r->attempt, zMembers ? zMembers : "[]");
  if (*pzJson == 0) {
    rc = SQLITE_NOMEM;
    sqlite3_clear_bindings(pUpd);
    goto done;
  }
  rc = step_done(pUpd);
  sqlite3_clear_bindings(pUpd);
  if (rc == SQLITE_OK) rc = write_check(p, zFunc, "outcome update", pzErr);

done:
  sqlite3_free(zMembers);
  if (rc) {
    sqlite3_free(*pzJson);
    *pzJson = 0;
  }
  return rc;
}

static const char *const azOutcome[] = {"succeeded", "failed", "released", "unknown", 0};
static const char *const azResolve[] = {"succeeded", "failed", "released", 0};

/* Validate status (one of az) and detail (NULL or JSON, canonicalised). */
static int outcome_args(IdemLedger *p, const char *zFunc, sqlite3_value *pStatus,
                        const char *const *az, sqlite3_value *pDetail, IdemBuf *pBuf,
                        char **pzErr) {
  int bText = sqlite3_value_type(pStatus) == SQLITE_TEXT; /* before any conversion */
  const char *z = bText ? (const char *)sqlite3_value_text(pStatus) : 0;
  if (bText && z == 0) return SQLITE_NOMEM;
  if (!bText || !is_status(z, az)) {
    char *zQ = bText ? idem_json_string(z) : 0;
    if (bText && zQ == 0) return SQLITE_NOMEM;
    *pzErr = sqlite3_mprintf("%s: status must be one of %s%s%s%s%s; got %s", zFunc, az[0], ", ",
                             az[1], az[3] ? ", released or " : " or ", az[3] ? az[3] : az[2],
                             zQ ? zQ : value_type_name(pStatus));
    sqlite3_free(zQ);
    return *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
  }
  if (sqlite3_value_type(pDetail) == SQLITE_NULL) return SQLITE_OK;
  if (sqlite3_value_type(pDetail) == SQLITE_TEXT &&
      sqlite3_value_bytes(pDetail) > p->aOpt[OPT_ARGS_BYTES]) {
    *pzErr = sqlite3_mprintf("%s: detail is %d bytes, over the ledger's max_args_bytes of %lld",
                             zFunc, sqlite3_value_bytes(pDetail), p->aOpt[OPT_ARGS_BYTES]);
    return *pzErr ? SQLITE_TOOBIG : SQLITE_NOMEM;
  }
  return idem_canonical_value(zFunc, "detail", pDetail, pBuf, 0, 0, 0, pzErr);
}

/* Report the end of idem_settle / idem_resolve on ctx. */
static void outcome_result(sqlite3_context *ctx, const char *zFunc, int rc, char *zErr,
                           char *zJson) {
  if (rc) {
    if (zErr == 0 && rc != SQLITE_NOMEM) {
      zErr = idem_db_error(sqlite3_context_db_handle(ctx), zFunc, rc);
    }
    idem_result_error(ctx, rc, zErr);
    return;
  }
  sqlite3_result_text(ctx, zJson, -1, sqlite3_free);
}

static void idem_settle_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  static const char *zFunc = "idem_settle";
  IdemLedger *p;
  IdemBuf detail = {&idem_sqlite_mem, 0, 0, 0, 0};
  sqlite3_stmt *pGet = 0;
  char *zErr = 0, *zJson = 0;
  const char *zToken = 0;
  unsigned char aTok[16];
  int rc, bFound = 0;
  Row r;
  (void)argc;
  memset(&r, 0, sizeof(r));
  p = idem_ledger_resolve(ctx, 0, argv[0], zFunc);
  if (p == 0) return;
  if (sqlite3_value_type(argv[1]) == SQLITE_TEXT) {
    zToken = (const char *)sqlite3_value_text(argv[1]);
    if (zToken == 0) {
      rc = SQLITE_NOMEM;
      goto done;
    }
  }
  if (!token_parse(zToken, aTok)) {
    zErr =
        sqlite3_mprintf("%s: token must be the 32 lowercase hex digits idem_claim returned", zFunc);
    rc = zErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    goto done;
  }
  rc = outcome_args(p, zFunc, argv[2], azOutcome, argv[3], &detail, &zErr);
  if (rc) goto done;
  rc = ledger_check_triggers(p, zFunc, &zErr);
  if (rc) goto done;
  rc = ledger_stmt(p, ST_BY_TOKEN, &pGet);
  if (rc) goto done;
  bind_token(pGet, 1, zToken);
  rc = row_fetch(pGet, &r, &bFound);
  if (rc) goto done;
  if (!bFound) {
    zErr = sqlite3_mprintf(
        "%s: no claim of ledger %s holds token \"%s\" (a wrong token, or a "
        "claim that was taken over)",
        zFunc, p->zName, zToken);
    rc = zErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    goto done;
  }
  rc = outcome_apply(p, zFunc, &r, (const char *)sqlite3_value_text(argv[2]), &detail, 0, &zJson,
                     &zErr);
done:
  row_free(&r);
  idem_buf_free(&detail);
  outcome_result(ctx, zFunc, rc, zErr, zJson);
}

static void idem_resolve_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  static const char *zFunc = "idem_resolve";
  IdemLedger *p;
  IdemBuf detail = {&idem_sqlite_mem, 0, 0, 0, 0};
  sqlite3_stmt *pGet = 0;
  char *zErr = 0, *zJson = 0;
  int rc, bFound = 0;
  Row r;
  (void)argc;
  memset(&r, 0, sizeof(r));
  p = idem_ledger_resolve(ctx, 0, argv[0], zFunc);
  if (p == 0) return;
  rc = idem_key_error(zFunc, "tenant", argv[1], &zErr);
  if (rc == SQLITE_OK) rc = idem_key_error(zFunc, "key", argv[2], &zErr);
  if (rc == SQLITE_OK) rc = outcome_args(p, zFunc, argv[3], azResolve, argv[4], &detail, &zErr);
  if (rc == SQLITE_OK) rc = ledger_check_triggers(p, zFunc, &zErr);
  if (rc) goto done;
  rc = ledger_stmt(p, ST_GET, &pGet);
  if (rc) goto done;
  sqlite3_bind_value(pGet, 1, argv[1]);
  sqlite3_bind_value(pGet, 2, argv[2]);
  rc = row_fetch(pGet, &r, &bFound);
  if (rc) goto done;
  if (!bFound) {
    zErr = sqlite3_mprintf("%s: ledger %s has no key \"%s\" for tenant \"%s\"", zFunc, p->zName,
                           sqlite3_value_text(argv[2]), sqlite3_value_text(argv[1]));
    rc = zErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    goto done;
  }
  rc = outcome_apply(p, zFunc, &r, (const char *)sqlite3_value_text(argv[3]), &detail, 1, &zJson,
                     &zErr);
done:
  row_free(&r);
  idem_buf_free(&detail);
  outcome_result(ctx, zFunc, rc, zErr, zJson);
}

/*
** For guard.c: does (tenant, key) hold a live claimed claim of ledger p
** (with token pToken when not NULL)? SQLITE_OK with *pzWhy NULL when it
** does; SQLITE_OK with *pzWhy saying why not (sqlite3_malloc) otherwise.
*/
int idem_ledger_live_claim(IdemLedger *p, sqlite3_value *pTenant, sqlite3_value *pKey,
                           sqlite3_value *pToken, char **pzWhy) {
  sqlite3_stmt *pGet = 0;
  int rc, bFound = 0;
  Row r;
  *pzWhy = 0;
  if (p->aOpt[OPT_SINGLE] && sqlite3_value_type(pTenant) == SQLITE_NULL) {
    rc = ledger_stmt(p, ST_GET_KEY, &pGet);
    if (rc) return rc;
    sqlite3_bind_value(pGet, 1, pKey);
  } else {
    rc = ledger_stmt(p, ST_GET, &pGet);
    if (rc) return rc;
    sqlite3_bind_value(pGet, 1, pTenant);
    sqlite3_bind_value(pGet, 2, pKey);
  }
  rc = row_fetch(pGet, &r, &bFound);
  if (rc) return rc;
  if (!bFound) {
    *pzWhy = sqlite3_mprintf("there is no claim for it");
  } else if (strcmp(r.zStatus, "claimed") != 0) {
    *pzWhy = sqlite3_mprintf("it is %s", r.zStatus);
  } else if (ledger_now(p) >= r.leaseUntil) {
    *pzWhy = sqlite3_mprintf("its claim's lease has expired");
  } else if (pToken && (sqlite3_value_type(pToken) != SQLITE_TEXT ||
                        strcmp((const char *)sqlite3_value_text(pToken), r.zToken) != 0)) {
    *pzWhy = sqlite3_mprintf("the row's token is not the live claim's token (a stale holder?)");
  } else {
    row_free(&r);
    return SQLITE_OK;
  }
  row_free(&r);
  return *pzWhy ? SQLITE_OK : SQLITE_NOMEM;
}

/* ------------------------------------------------------------------ */
/* idem_purge and idem_last_claim                                      */
/* ------------------------------------------------------------------ */

static void idem_purge_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  static const char *zFunc = "idem_purge";
  IdemLedger *p;
  sqlite3_stmt *pDel = 0;
  char *zErr = 0;
  sqlite3_int64 n;
  int rc;
  (void)argc;
  p = idem_ledger_resolve(ctx, 0, argv[0], zFunc);
  if (p == 0) return;
  n = sqlite3_value_int64(argv[1]);
  if (sqlite3_value_type(argv[1]) != SQLITE_INTEGER || n < 0 || n > 315360000000LL) {
    zErr =
        sqlite3_mprintf("%s: older_than_seconds must be an INTEGER from 0 to 315360000000", zFunc);
    idem_result_error(ctx, zErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM, zErr);
    return;
  }
  rc = ledger_check_triggers(p, zFunc, &zErr);
  if (rc == SQLITE_OK) rc = ledger_stmt(p, ST_PURGE, &pDel);
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(pDel, 1, ledger_now(p) - n * 1000);
    rc = step_done(pDel);
  }
  if (rc) {
    if (zErr == 0 && rc != SQLITE_NOMEM) zErr = idem_db_error(p->db, zFunc, rc);
    idem_result_error(ctx, rc, zErr);
    return;
  }
  sqlite3_result_int64(ctx, sqlite3_changes(p->db));
}

static void idem_last_claim_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  IdemLedger *p;
  (void)argc;
  p = idem_ledger_resolve(ctx, 0, argv[0], "idem_last_claim");
  if (p == 0) return;
  if (p->zLastClaim) sqlite3_result_text(ctx, p->zLastClaim, -1, SQLITE_TRANSIENT);
  else sqlite3_result_null(ctx);
}

/* ------------------------------------------------------------------ */
/* The virtual table                                                   */
/* ------------------------------------------------------------------ */

#define COL_TENANT 0
#define COL_KEY 1
#define COL_CONV 2
#define COL_TOOL 3
#define COL_ARGS 4
#define COL_EFFECT 5
#define COL_STATUS 6
#define COL_TOKEN 10
#define N_COL 15

static const char zDeclare[] =
    "CREATE TABLE x(tenant, \"key\", conversation, tool, args, effect, status, result, error,"
    " attempt, token, created_at, updated_at, lease_until, members)";

static const char *const azCol[N_COL] = {"tenant",     "key",         "conversation", "tool",
                                         "args",       "effect",      "status",       "result",
                                         "error",      "attempt",     "token",        "created_at",
                                         "updated_at", "lease_until", "members"};

/* Parse "name=value" options (argv[3..]) into aVal. */
static int parse_options(int argc, const char *const *argv, sqlite3_int64 *aVal, char **pzErr) {
  int i, j, aSeen[N_OPT] = {0, 0, 0, 0};
  for (j = 0; j < N_OPT; j++) aVal[j] = aOpt[j].iDefault;
  for (i = 3; i < argc; i++) {
    const char *z = argv[i], *zEq = strchr(z, '=');
    size_t nName;
    const char *zV;
    char *zEnd;
    sqlite3_int64 v;
    while (*z == ' ' || *z == '\t' || *z == '\n') z++;
    if (zEq == 0) {
      *pzErr = sqlite3_mprintf("idempotency: option \"%s\" needs the form name=value", argv[i]);
      return SQLITE_ERROR;
    }
    nName = (size_t)(zEq - z);
    while (nName > 0 && (z[nName - 1] == ' ' || z[nName - 1] == '\t')) nName--;
    for (j = 0; j < N_OPT; j++) {
      if (strlen(aOpt[j].zName) == nName && strncmp(aOpt[j].zName, z, nName) == 0) break;
    }
    if (j == N_OPT) {
      *pzErr = sqlite3_mprintf(
          "idempotency: unknown option \"%.*s\"; the options are "
          "lease_seconds, max_attempts, max_args_bytes, single_tenant",
          (int)nName, z);
      return SQLITE_ERROR;
    }
    if (aSeen[j]++) {
      *pzErr = sqlite3_mprintf("idempotency: option %s is given twice", aOpt[j].zName);
      return SQLITE_ERROR;
    }
    zV = zEq + 1;
    while (*zV == ' ' || *zV == '\t') zV++;
    v = strtoll(zV, &zEnd, 10);
    while (*zEnd == ' ' || *zEnd == '\t' || *zEnd == '\n') zEnd++;
    if (*zV < '0' || *zV > '9' || *zEnd != 0 || v < aOpt[j].iMin || v > aOpt[j].iMax ||
        strlen(zV) > 12) {
      *pzErr = sqlite3_mprintf("idempotency: %s must be an integer from %lld to %lld, got \"%s\"",
                               aOpt[j].zName, aOpt[j].iMin, aOpt[j].iMax, zV);
      return SQLITE_ERROR;
    }
    aVal[j] = v;
  }
  return SQLITE_OK;
}

/* Read the options and check the format from zName_meta. */
static int read_meta(sqlite3 *db, const char *zDb, const char *zName, sqlite3_int64 *aVal,
                     char *zId, char **pzErr) {
  sqlite3_stmt *pS = 0;
  int rc, j, nFound = 0;
  sqlite3_int64 iFormat = -1;
  char *zSql = sqlite3_mprintf("SELECT k, v FROM \"%w\".\"%w_meta\"", zDb, zName);
  if (zSql == 0) return SQLITE_NOMEM;
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
    if (strcmp(k, "format") == 0) iFormat = sqlite3_column_int64(pS, 1);
    if (strcmp(k, "id") == 0 && sqlite3_column_bytes(pS, 1) == 16) {
      memcpy(zId, sqlite3_column_text(pS, 1), 17);
    }
    for (j = 0; j < N_OPT; j++) {
      if (strcmp(k, aOpt[j].zName) == 0) {
        aVal[j] = sqlite3_column_int64(pS, 1);
        nFound++;
      }
    }
  }
  sqlite3_finalize(pS);
  if (rc != SQLITE_DONE) return rc;
  if (iFormat != LEDGER_FORMAT) {
    *pzErr = sqlite3_mprintf("idempotency: ledger %s has format %lld; this build reads format %d",
                             zName, iFormat, LEDGER_FORMAT);
    return SQLITE_CORRUPT_VTAB;
  }
  if (nFound != N_OPT || zId[0] == 0) {
    *pzErr =
        sqlite3_mprintf("idempotency: ledger %s has incomplete options in %s_meta", zName, zName);
    return SQLITE_CORRUPT_VTAB;
  }
  return SQLITE_OK;
}

static int ledger_init(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                       sqlite3_vtab **ppVtab, char **pzErr, int bCreate) {
  IdemConn *pConn = (IdemConn *)pAux;
  IdemLedger *p;
  sqlite3_int64 aVal[N_OPT];
  size_t nDb = strlen(argv[1]), nName = strlen(argv[2]);
  char zId[17];
  int rc;

  *ppVtab = 0;
  rc = parse_options(argc, argv, aVal, pzErr);
  if (rc) return rc;
  if (bCreate) {
    unsigned char a[8];
    sqlite3_randomness(8, a);
    idem_hex(a, 8, zId);
    rc = ledger_create_schema(db, argv[1], argv[2], aVal, zId, pzErr);
    if (rc) return rc;
  } else {
    rc = read_meta(db, argv[1], argv[2], aVal, zId, pzErr);
    if (rc) return rc;
  }
  rc = sqlite3_declare_vtab(db, zDeclare);
  if (rc) return rc;
  /* a planted view or trigger must not reach the ledger */
  sqlite3_vtab_config(db, SQLITE_VTAB_DIRECTONLY);
  /* INSERT OR IGNORE skips a taken key */
  sqlite3_vtab_config(db, SQLITE_VTAB_CONSTRAINT_SUPPORT, 1);

  p = sqlite3_malloc64(sizeof(*p) + nDb + nName + 2);
  if (p == 0) return SQLITE_NOMEM;
  memset(p, 0, sizeof(*p));
  p->zDb = (char *)&p[1];
  memcpy(p->zDb, argv[1], nDb + 1);
  p->zName = p->zDb + nDb + 1;
  memcpy(p->zName, argv[2], nName + 1);
  p->db = db;
  p->pConn = pConn;
  p->nRef = 1;
  memcpy(p->aOpt, aVal, sizeof(aVal));
  memcpy(p->zId, zId, sizeof(zId));
  p->pNext = pConn->pList;
  pConn->pList = p;
  *ppVtab = &p->base;
  return SQLITE_OK;
}

static int xCreate(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                   sqlite3_vtab **ppVtab, char **pzErr) {
  return ledger_init(db, pAux, argc, argv, ppVtab, pzErr, 1);
}

static int xConnect(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                    sqlite3_vtab **ppVtab, char **pzErr) {
  return ledger_init(db, pAux, argc, argv, ppVtab, pzErr, 0);
}

static int xDisconnect(sqlite3_vtab *pVtab) {
  IdemLedger *p = (IdemLedger *)pVtab, **pp;
  IdemConn *pConn = (IdemConn *)p->pConn;
  for (pp = &pConn->pList; *pp; pp = &(*pp)->pNext) {
    if (*pp == p) {
      *pp = p->pNext;
      break;
    }
  }
  ledger_finalize_all(p);
  sqlite3_free(p->zForeign);
  p->zForeign = 0;
  sqlite3_free(pVtab->zErrMsg);
  pVtab->zErrMsg = 0;
  p->bDead = 1;
  ledger_unref(p);
  return SQLITE_OK;
}

static int xDestroy(sqlite3_vtab *pVtab) {
  IdemLedger *p = (IdemLedger *)pVtab;
  sqlite3_stmt *pS = 0;
  int rc;
  char *zSql;
  rc = ledger_stmt(p, ST_COUNT_LIVE, &pS);
  if (rc == SQLITE_OK && sqlite3_step(pS) == SQLITE_ROW) {
    sqlite3_int64 nGuard = sqlite3_column_int64(pS, 0), nLive = sqlite3_column_int64(pS, 1);
    sqlite3_reset(pS);
    /* SQLite shows no module message for a refused DROP TABLE (it reads
    ** "constraint failed"), so none is set: it would only leak */
    if (nGuard > 0 || nLive > 0) return SQLITE_CONSTRAINT;
  } else if (pS) {
    rc = sqlite3_reset(pS);
  }
  if (rc) return rc;
  zSql = sqlite3_mprintf(
      "DROP TABLE IF EXISTS \"%w\".\"%w_rows\";"
      "DROP TABLE IF EXISTS \"%w\".\"%w_meta\";"
      "DROP TABLE IF EXISTS \"%w\".\"%w_guards\";",
      p->zDb, p->zName, p->zDb, p->zName, p->zDb, p->zName);
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_exec(p->db, zSql, 0, 0, 0);
  sqlite3_free(zSql);
  if (rc) return rc;
  return xDisconnect(pVtab);
}

static int xRename(sqlite3_vtab *pVtab, const char *zNew) {
  IdemLedger *p = (IdemLedger *)pVtab;
  int rc;
  char *zSql;
  ledger_finalize_all(p);
  zSql = sqlite3_mprintf(
      "ALTER TABLE \"%w\".\"%w_rows\" RENAME TO \"%w_rows\";"
      "ALTER TABLE \"%w\".\"%w_meta\" RENAME TO \"%w_meta\";"
      "ALTER TABLE \"%w\".\"%w_guards\" RENAME TO \"%w_guards\";",
      p->zDb, p->zName, zNew, p->zDb, p->zName, zNew, p->zDb, p->zName, zNew);
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_exec(p->db, zSql, 0, 0, 0);
  sqlite3_free(zSql);
  if (rc == SQLITE_OK) rc = ledger_rename_triggers(p->db, p->zDb, p->zName, zNew);
  if (rc == SQLITE_OK) rc = idem_guard_rename(p->db, p->zDb, p->zName, zNew, p->zId);
  if (rc == SQLITE_OK && p->aOpt[OPT_SINGLE]) {
    zSql = sqlite3_mprintf(
        "DROP INDEX IF EXISTS \"%w\".\"%w_rows_key\";"
        "CREATE UNIQUE INDEX \"%w\".\"%w_rows_key\" ON \"%w_rows\"(\"key\");",
        p->zDb, p->zName, p->zDb, zNew, zNew);
    if (zSql == 0) return SQLITE_NOMEM;
    rc = sqlite3_exec(p->db, zSql, 0, 0, 0);
    sqlite3_free(zSql);
  }
  /* xRename does not change p->zName: SQLite reconnects under the new name */
  p->bChecked = 0;
  return rc;
}

/*
** The shadow tables. <name>_rows carries the plain-SQL triggers that refuse
** illegal changes (for a writer without the extension), and SQLite 3.44
** and later refuse, in defensive mode, any trigger on a shadow table, even
** one read from the schema: the file could not be opened by a defensive
** connection that loaded the extension (better-sqlite3 and Node's sqlite
** are defensive by default). There <name>_rows is not declared a shadow
** table, so defensive mode does not make it read-only; its CHECKs, unique
** indexes and triggers still refuse every illegal write, and the
** foreign-trigger check still guards it. Older SQLite gets both.
*/
#define IDEM_SHADOW_TRIGGERS_REFUSED 3044000
static int xShadowName(const char *zSuffix) {
  if (strcmp(zSuffix, "rows") == 0) {
    return sqlite3_libversion_number() < IDEM_SHADOW_TRIGGERS_REFUSED;
  }
  return strcmp(zSuffix, "meta") == 0 || strcmp(zSuffix, "guards") == 0;
}

/* Cursor: a statement over zName_rows. */
typedef struct LedgerCursor LedgerCursor;
struct LedgerCursor {
  sqlite3_vtab_cursor base;
  sqlite3_stmt *pStmt;
  int iSlot; /* the ledger's statement slot pStmt was borrowed from, or -1 */
  int bEof;
  sqlite3_int64 now;
};

/* Give the cursor's statement back to its slot (reset), or finalize it
** when it was its own or its slot was emptied meanwhile (rename). */
static void cursor_release(LedgerCursor *c) {
  IdemLedger *p = (IdemLedger *)c->base.pVtab;
  if (c->pStmt == 0) return;
  if (c->iSlot >= 0 && p->aStmt[c->iSlot] == c->pStmt) {
    sqlite3_reset(c->pStmt);
    sqlite3_clear_bindings(c->pStmt);
    p->mBusy &= ~(1u << c->iSlot);
  } else {
    sqlite3_finalize(c->pStmt);
  }
  c->pStmt = 0;
  c->iSlot = -1;
}

#define IDX_KEY 1    /* tenant = ? AND key = ? */
#define IDX_TENANT 2 /* tenant = ? */
#define IDX_TOKEN 3  /* token = ? */

/* Plan idxNum on constraints iFirst (argv 1) and iSecond (argv 2, or -1),
** which the shadow table's indexes answer exactly; nRows the estimate. */
static void use_plan(sqlite3_index_info *pInfo, int idxNum, int iFirst, int iSecond, int nRows) {
  pInfo->idxNum = idxNum;
  pInfo->aConstraintUsage[iFirst].argvIndex = 1;
  pInfo->aConstraintUsage[iFirst].omit = 1;
  if (iSecond >= 0) {
    pInfo->aConstraintUsage[iSecond].argvIndex = 2;
    pInfo->aConstraintUsage[iSecond].omit = 1;
  }
  pInfo->estimatedCost = nRows;
  pInfo->estimatedRows = nRows;
  if (nRows == 1) pInfo->idxFlags = SQLITE_INDEX_SCAN_UNIQUE;
}

static int xBestIndex(sqlite3_vtab *pVtab, sqlite3_index_info *pInfo) {
  int i, iTenant = -1, iKey = -1, iToken = -1;
  (void)pVtab;
  for (i = 0; i < pInfo->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &pInfo->aConstraint[i];
    if (!c->usable || c->op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
    if (c->iColumn == COL_TENANT) iTenant = i;
    if (c->iColumn == COL_KEY) iKey = i;
    if (c->iColumn == COL_TOKEN) iToken = i;
  }
  if (iTenant >= 0 && iKey >= 0) {
    use_plan(pInfo, IDX_KEY, iTenant, iKey, 1);
  } else if (iToken >= 0) {
    use_plan(pInfo, IDX_TOKEN, iToken, -1, 1);
  } else if (iTenant >= 0) {
    use_plan(pInfo, IDX_TENANT, iTenant, -1, 100);
  } else {
    pInfo->idxNum = 0;
    pInfo->estimatedCost = 1000000;
    pInfo->estimatedRows = 1000000;
  }
  return SQLITE_OK;
}

static int xOpen(sqlite3_vtab *pVtab, sqlite3_vtab_cursor **ppCur) {
  LedgerCursor *c = sqlite3_malloc64(sizeof(*c));
  (void)pVtab;
  if (c == 0) return SQLITE_NOMEM;
  memset(c, 0, sizeof(*c));
  c->iSlot = -1;
  *ppCur = &c->base;
  return SQLITE_OK;
}

static int xClose(sqlite3_vtab_cursor *pCur) {
  LedgerCursor *c = (LedgerCursor *)pCur;
  cursor_release(c);
  sqlite3_free(c);
  return SQLITE_OK;
}

static int xNext(sqlite3_vtab_cursor *pCur) {
  LedgerCursor *c = (LedgerCursor *)pCur;
  int rc = sqlite3_step(c->pStmt);
  if (rc == SQLITE_ROW) return SQLITE_OK;
  c->bEof = 1;
  return rc == SQLITE_DONE ? SQLITE_OK : sqlite3_reset(c->pStmt);
}

static int xFilter(sqlite3_vtab_cursor *pCur, int idxNum, const char *idxStr, int argc,
                   sqlite3_value **argv) {
  LedgerCursor *c = (LedgerCursor *)pCur;
  IdemLedger *p = (IdemLedger *)pCur->pVtab;
  int iSlot = ST_CUR_ALL + (idxNum >= IDX_KEY && idxNum <= IDX_TOKEN ? idxNum : 0);
  int rc, i;
  (void)idxStr;
  cursor_release(c);
  c->bEof = 0;
  c->now = ledger_now(p);
  {
    /* a foreign trigger on the shadow tables refuses reads too */
    char *zErr = 0;
    rc = ledger_check_triggers(p, "idempotency", &zErr);
    if (rc) {
      sqlite3_free(pCur->pVtab->zErrMsg);
      pCur->pVtab->zErrMsg = zErr;
      return rc;
    }
  }
  if ((p->mBusy & (1u << iSlot)) == 0) {
    /* the ledger's prepared statement for this plan, borrowed */
    rc = ledger_stmt(p, iSlot, &c->pStmt);
    if (rc == SQLITE_OK) {
      c->iSlot = iSlot;
      p->mBusy |= 1u << iSlot;
    }
  } else {
    /* another cursor of the same plan is open (a self-join): its own */
    char *zSql = sqlite3_mprintf(azStmtSql[iSlot], p->zDb, p->zName);
    rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &c->pStmt, 0) : SQLITE_NOMEM;
    sqlite3_free(zSql);
  }
  if (rc) {
    c->pStmt = 0;
    sqlite3_free(pCur->pVtab->zErrMsg);
    pCur->pVtab->zErrMsg = sqlite3_mprintf("%s", sqlite3_errmsg(p->db));
    return rc;
  }
  for (i = 0; i < argc; i++) {
    if (idxNum == IDX_TOKEN) {
      /* the column shows hex text; the shadow table holds the BLOB */
      rc = sqlite3_value_type(argv[i]) == SQLITE_TEXT
               ? bind_token(c->pStmt, i + 1, (const char *)sqlite3_value_text(argv[i]))
               : sqlite3_bind_null(c->pStmt, i + 1);
    } else {
      rc = sqlite3_bind_value(c->pStmt, i + 1, argv[i]);
    }
    if (rc) return rc;
  }
  return xNext(pCur);
}

static int xEof(sqlite3_vtab_cursor *pCur) { return ((LedgerCursor *)pCur)->bEof; }

static int xColumn(sqlite3_vtab_cursor *pCur, sqlite3_context *ctx, int iCol) {
  LedgerCursor *c = (LedgerCursor *)pCur;
  IdemLedger *p = (IdemLedger *)pCur->pVtab;
  sqlite3_stmt *pS = c->pStmt;
  /* map declared columns to the cursor statement's columns */
  static const int aMap[N_COL] = {13, 14, 1, 2, 3, 4, 5, 6, 7, 8, 9, 17, 15, 10, 11};
  if (iCol == COL_STATUS) {
    const char *zStatus = (const char *)sqlite3_column_text(pS, 5);
    const char *zEffect = (const char *)sqlite3_column_text(pS, 4);
    if (zStatus && strcmp(zStatus, "claimed") == 0 && c->now >= sqlite3_column_int64(pS, 10)) {
      int n = 0;
      if (zEffect && strcmp(zEffect, "local") == 0) {
        /* an expired local claim is unknown once rows of it landed */
        char *zM = 0;
        int rc = ledger_members(p, (const char *)sqlite3_column_text(pS, 13),
                                (const char *)sqlite3_column_text(pS, 14),
                                (const char *)sqlite3_column_text(pS, 12), &zM, &n);
        sqlite3_free(zM);
        if (rc) return rc;
      }
      if (n > 0 || !(zEffect && strcmp(zEffect, "local") == 0)) {
        sqlite3_result_text(ctx, "unknown", -1, SQLITE_STATIC);
        return SQLITE_OK;
      }
    }
  }
  if (iCol == COL_TOKEN) {
    char zHex[33];
    if (sqlite3_column_bytes(pS, 9) != 16) return SQLITE_CORRUPT_VTAB;
    idem_hex((const unsigned char *)sqlite3_column_blob(pS, 9), 16, zHex);
    sqlite3_result_text(ctx, zHex, 32, SQLITE_TRANSIENT);
    return SQLITE_OK;
  }
  sqlite3_result_value(ctx, sqlite3_column_value(pS, aMap[iCol]));
  return SQLITE_OK;
}

static int xRowid(sqlite3_vtab_cursor *pCur, sqlite3_int64 *pRowid) {
  *pRowid = sqlite3_column_int64(((LedgerCursor *)pCur)->pStmt, 0);
  return SQLITE_OK;
}

static int vtab_error(sqlite3_vtab *pVtab, int rc, char *zErr) {
  sqlite3_free(pVtab->zErrMsg);
  pVtab->zErrMsg = zErr;
  if (zErr == 0 && rc != SQLITE_NOMEM) return SQLITE_NOMEM;
  return rc;
}

static int xUpdate(sqlite3_vtab *pVtab, int argc, sqlite3_value **argv, sqlite3_int64 *pRowid) {
  IdemLedger *p = (IdemLedger *)pVtab;
  sqlite3 *db = p->db;
  char *zErr = 0;
  int rc, i;

  if (argc == 1) {
    /* DELETE: terminal rows only */
    sqlite3_stmt *pDel = 0;
    rc = ledger_check_triggers(p, "idempotency", &zErr);
    if (rc) return vtab_error(pVtab, rc, zErr);
    rc = ledger_stmt(p, ST_DELETE, &pDel);
    if (rc) return rc;
    sqlite3_bind_value(pDel, 1, argv[0]);
    rc = step_done(pDel);
    if (rc) return rc;
    if (sqlite3_changes(db) != 1) {
      zErr = sqlite3_mprintf(
          "idempotency: cannot delete a claimed or unknown row of ledger %s;"
          " only succeeded, failed or released rows are deleted",
          p->zName);
      return vtab_error(pVtab, SQLITE_CONSTRAINT, zErr);
    }
    return SQLITE_OK;
  }
  if (sqlite3_value_type(argv[0]) != SQLITE_NULL) {
    zErr = sqlite3_mprintf(
        "idempotency: UPDATE of ledger %s is refused; record outcomes with "
        "idem_settle or idem_resolve",
        p->zName);
    return vtab_error(pVtab, SQLITE_CONSTRAINT, zErr);
  }
  /* INSERT: a claim */
  p->zLastClaim = 0;
  if (sqlite3_vtab_on_conflict(db) == SQLITE_REPLACE) {
    zErr = sqlite3_mprintf(
        "idempotency: INSERT OR REPLACE into ledger %s is refused: it would "
        "erase the recorded request",
        p->zName);
    return vtab_error(pVtab, SQLITE_CONSTRAINT, zErr);
  }
  if (sqlite3_value_type(argv[1]) != SQLITE_NULL) {
    zErr = sqlite3_mprintf("idempotency: INSERT into ledger %s cannot set the rowid", p->zName);
    return vtab_error(pVtab, SQLITE_CONSTRAINT, zErr);
  }
  for (i = COL_STATUS; i < N_COL; i++) {
    if (sqlite3_value_type(argv[2 + i]) != SQLITE_NULL) {
      zErr = sqlite3_mprintf(
          "idempotency: INSERT into ledger %s cannot set %s; a claim starts "
          "claimed and its outcome is recorded by idem_settle",
          p->zName, azCol[i]);
      return vtab_error(pVtab, SQLITE_CONSTRAINT, zErr);
    }
  }
  {
    Req q;
    Decision d;
    sqlite3_value *pEffect = argv[2 + COL_EFFECT];
    memset(&d, 0, sizeof(d));
    rc = req_parse(p, "idempotency", argv[2 + COL_TENANT], argv[2 + COL_CONV], argv[2 + COL_TOOL],
                   argv[2 + COL_ARGS], sqlite3_value_type(pEffect) == SQLITE_NULL ? 0 : pEffect,
                   sqlite3_value_type(argv[2 + COL_KEY]) == SQLITE_NULL ? 0 : argv[2 + COL_KEY], &q,
                   &zErr);
    if (rc == SQLITE_OK) rc = ledger_check_triggers(p, "idempotency", &zErr);
    if (rc == SQLITE_OK) rc = claim_decide(p, "idempotency", &q, 1, 0, &d, &zErr);
    if (rc == SQLITE_OK && d.eDec == DEC_ADMITTED) {
      /* the row is written: nothing may fail from here on, so the
      ** fixed buffer (keys and tenants are at most 128 ASCII bytes) */
      sqlite3_snprintf(sizeof(p->zLastClaimBuf), p->zLastClaimBuf,
                       "{\"key\":\"%s\",\"tenant\":\"%s\",\"token\":\"%s\",\"attempt\":%lld,"
                       "\"effect\":\"%s\",\"committed\":%s}",
                       q.zKey, q.zTenant, d.zToken, d.attempt, q.zEffect,
                       sqlite3_get_autocommit(db) ? "true" : "false");
      p->zLastClaim = p->zLastClaimBuf;
      *pRowid = d.id;
    } else if (rc == SQLITE_OK) {
      zErr = sqlite3_mprintf("idempotency: key \"%s\" of tenant \"%s\" in ledger %s is taken: %s",
                             q.zKey, q.zTenant, p->zName, d.zWhy);
      rc = zErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    }
    sqlite3_free(d.zJson);
    sqlite3_free(d.zWhy);
    req_free(&q);
    if (rc) {
      if (zErr == 0 && rc != SQLITE_NOMEM) zErr = idem_db_error(db, "idempotency", rc);
      return vtab_error(pVtab, rc, zErr);
    }
  }
  return SQLITE_OK;
}

static sqlite3_module ledgerModule = {
    3, /* iVersion: xShadowName */
    xCreate,     xConnect, xBestIndex, xDisconnect, xDestroy, xOpen,   xClose,
    xFilter,     xNext,    xEof,       xColumn,     xRowid,   xUpdate, 0, /* xBegin */
    0,                                                                    /* xSync */
    0,                                                                    /* xCommit */
    0,                                                                    /* xRollback */
    0,                                                                    /* xFindFunction */
    xRename,     0,                                                       /* xSavepoint */
    0,                                                                    /* xRelease */
    0,                                                                    /* xRollbackTo */
    xShadowName,
#if SQLITE_VERSION_NUMBER >= 3044000
    0, /* xIntegrity: iVersion 3, never called */
#endif
};

static void conn_free(void *pArg) {
  IdemConn *pConn = (IdemConn *)pArg;
  int i;
  for (i = 0; i < N_CACHE; i++) cache_clear(&pConn->aCache[i]);
  sqlite3_free(pConn);
}

/* Functions that write are DIRECTONLY and not innocuous: a view or a
** trigger in a database file cannot reach them. idem_last_claim only reads
** connection state, but it names this connection's claims, so it is
** DIRECTONLY too. */
#define IDEM_WRITES (SQLITE_UTF8 | SQLITE_DIRECTONLY)

static const struct {
  const char *zName;
  int nArg;
  void (*xFunc)(sqlite3_context *, int, sqlite3_value **);
} aFn[] = {
    {"idem_claim", 5, idem_claim_func},           {"idem_claim", 6, idem_claim_func},
    {"idem_claim", 7, idem_claim_func},           {"idem_settle", 4, idem_settle_func},
    {"idem_resolve", 5, idem_resolve_func},       {"idem_purge", 2, idem_purge_func},
    {"idem_last_claim", 1, idem_last_claim_func},
};

void idem_unregister_ledger(sqlite3 *db) {
  size_t i;
  idem_unregister_guard(db);
  for (i = 0; i < sizeof(aFn) / sizeof(aFn[0]); i++) {
    sqlite3_create_function(db, aFn[i].zName, aFn[i].nArg, SQLITE_UTF8, 0, 0, 0, 0);
  }
  /* drops the module; its destructor frees the connection's registry */
  sqlite3_create_module_v2(db, "idempotency", 0, 0, 0);
}

int idem_register_ledger(sqlite3 *db, char **pzErr) {
  IdemConn *pConn = sqlite3_malloc64(sizeof(IdemConn));
  size_t i;
  int rc;
  if (pConn == 0) return SQLITE_NOMEM;
  memset(pConn, 0, sizeof(*pConn));
  /* the module owns pConn and frees it when the connection closes */
  rc = sqlite3_create_module_v2(db, "idempotency", &ledgerModule, pConn, conn_free);
  if (rc != SQLITE_OK) {
    if (pzErr) {
      *pzErr = sqlite3_mprintf("idempotency: cannot register module idempotency: %s",
                               sqlite3_errstr(rc));
    }
    return rc;
  }
  for (i = 0; i < sizeof(aFn) / sizeof(aFn[0]); i++) {
    rc = sqlite3_create_function(db, aFn[i].zName, aFn[i].nArg, IDEM_WRITES, pConn, aFn[i].xFunc, 0,
                                 0);
    if (rc != SQLITE_OK) {
      if (pzErr) {
        *pzErr = sqlite3_mprintf("idempotency: cannot register function %s/%d: %s", aFn[i].zName,
                                 aFn[i].nArg, sqlite3_errstr(rc));
      }
      return rc;
    }
  }
  return idem_register_guard(db, pConn, pzErr);
}

/*
** ledger_storage.c: the ledger's shadow-table format and the statements
** that read and write it. The format is written down once, here:
**
**   <name>_rows    one row per (tenant, key): the request (conversation,
**                  tool, canonical args, effect), its status, result/error,
**                  attempt, fencing token, times in Unix ms, guard marks
**                  and members. Plain-SQL CHECKs carry the key grammar,
**                  NOT NULL and the status domain; UNIQUE(tenant,key) and
**                  UNIQUE(token); BEFORE triggers refuse any change of the
**                  request columns, an illegal status change, and the
**                  deletion of a claimed or unknown row. None of them
**                  calls an extension function, so the file stays readable
**                  and checkable without the extension.
**   <name>_meta    (k, v): format version, identity and the options the
**                  ledger was made with.
**   <name>_guards  one row per guarded table (guard.c writes it).
**
** Also here: the options table (names, ranges, defaults), the prepared
** statements of a ledger, the check that the shadow tables carry exactly
** the ledger's own triggers, and loading a row into a LedgerRow.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Options                                                             */
/* ------------------------------------------------------------------ */

/* The closed list of options, in IDEM_OPT_* order. */
const LedgerOption ledger_options[IDEM_N_OPT] = {
    {"lease_seconds", 0, 31536000, 300},
    {"max_attempts", 1, 1000, 5},
    {"max_args_bytes", 2, IDEM_JCS_MAX_BYTES, 1048576},
    {"single_tenant", 0, 1, 0},
    {"retention_seconds", 0, 315360000, 0},
    {"require_transaction", 0, 1, 0},
};

/* Parse "name=value" options (argv[3..]) into aVal. Under dqlite
** (bDqlite, see ledger_under_dqlite) require_transaction defaults to 1. */
int ledger_parse_options(int argc, const char *const *argv, int bDqlite, sqlite3_int64 *aVal,
                         char **pzErr) {
  int i, j, aSeen[IDEM_N_OPT] = {0};
  for (j = 0; j < IDEM_N_OPT; j++) aVal[j] = ledger_options[j].iDefault;
  if (bDqlite) aVal[IDEM_OPT_REQUIRE_TXN] = 1;
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
    for (j = 0; j < IDEM_N_OPT; j++) {
      if (strlen(ledger_options[j].zName) == nName &&
          strncmp(ledger_options[j].zName, z, nName) == 0)
        break;
    }
    if (j == IDEM_N_OPT) {
      *pzErr = sqlite3_mprintf(
          "idempotency: unknown option \"%.*s\"; the options are "
          "lease_seconds, max_attempts, max_args_bytes, single_tenant, "
          "retention_seconds, require_transaction",
          (int)nName, z);
      return SQLITE_ERROR;
    }
    if (aSeen[j]++) {
      *pzErr = sqlite3_mprintf("idempotency: option %s is given twice", ledger_options[j].zName);
      return SQLITE_ERROR;
    }
    zV = zEq + 1;
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

/* Each option read from zName_meta within the range CREATE accepts: a
** value edited into the file is an error, never used. */
static int meta_check_ranges(const char *zName, const sqlite3_int64 *aVal, char **pzErr) {
  int j;
  for (j = 0; j < IDEM_N_OPT; j++) {
    const LedgerOption *o = &ledger_options[j];
    if (aVal[j] >= o->iMin && aVal[j] <= o->iMax) continue;
    *pzErr = sqlite3_mprintf(
        "idempotency: ledger %s has %s = %lld in %s_meta; it must be an integer from %lld to %lld",
        zName, o->zName, aVal[j], zName, o->iMin, o->iMax);
    return *pzErr ? SQLITE_CORRUPT_VTAB : SQLITE_NOMEM;
  }
  return SQLITE_OK;
}

/* Read the options and check the format from zName_meta. */
int ledger_read_meta(sqlite3 *db, const char *zDb, const char *zName, sqlite3_int64 *aVal,
                     char *zId, char **pzErr) {
  sqlite3_stmt *pS = 0;
  int rc, j, nFound = 0;
  sqlite3_int64 iFormat = -1;
  char *zSql = sqlite3_mprintf("SELECT k, v FROM \"%w\".\"%w_meta\"", zDb, zName);
  if (zSql == 0) return SQLITE_NOMEM;
  for (j = IDEM_N_OPT_FIRST; j < IDEM_N_OPT; j++) aVal[j] = ledger_options[j].iDefault;
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
    for (j = 0; j < IDEM_N_OPT; j++) {
      if (strcmp(k, ledger_options[j].zName) == 0) {
        aVal[j] = sqlite3_column_int64(pS, 1);
        if (j < IDEM_N_OPT_FIRST) nFound++;
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
  if (nFound != IDEM_N_OPT_FIRST || zId[0] == 0) {
    *pzErr =
        sqlite3_mprintf("idempotency: ledger %s has incomplete options in %s_meta", zName, zName);
    return SQLITE_CORRUPT_VTAB;
  }
  return meta_check_ranges(zName, aVal, pzErr);
}

/* Tokens are stored as 16-byte BLOBs (a smaller unique index) and shown
** as 32 lowercase hex digits. Parse zHex into a[16]; 0 if malformed. */
int ledger_token_parse(const char *zHex, unsigned char *a) {
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
int ledger_bind_token(sqlite3_stmt *pS, int i, const char *zHex) {
  unsigned char a[16];
  if (!ledger_token_parse(zHex, a)) return sqlite3_bind_null(pS, i);
  return sqlite3_bind_blob(pS, i, a, 16, SQLITE_TRANSIENT);
}

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
    /* ST_WRITE_LOCK: takes the write lock, writes nothing (no row matches) */
    "DELETE FROM \"%w\".\"%w_rows\" WHERE 0",
    /* ST_CUR_ALL, ST_CUR_KEY, ST_CUR_TENANT, ST_CUR_TOKEN */
    "SELECT " ROW_COLUMNS ",created_at FROM \"%w\".\"%w_rows\" ORDER BY id",
    "SELECT " ROW_COLUMNS
    ",created_at FROM \"%w\".\"%w_rows\""
    " WHERE tenant=?1 AND \"key\"=?2 ORDER BY id",
    "SELECT " ROW_COLUMNS ",created_at FROM \"%w\".\"%w_rows\" WHERE tenant=?1 ORDER BY id",
    "SELECT " ROW_COLUMNS ",created_at FROM \"%w\".\"%w_rows\" WHERE token=?1 ORDER BY id",
};

/* The statement i of ledger p, prepared on first use. */
int ledger_stmt(IdemLedger *p, int i, sqlite3_stmt **ppStmt) {
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

int ledger_stmt_new(IdemLedger *p, int i, sqlite3_stmt **ppStmt) {
  char *zSql = sqlite3_mprintf(azStmtSql[i], p->zDb, p->zName, p->zDb, p->zName);
  int rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, ppStmt, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  return rc;
}

typedef char
    assert_stmt_slots[(N_STMT <= (int)(sizeof(((IdemLedger *)0)->aStmt) / sizeof(sqlite3_stmt *)) &&
                       N_STMT <= 32)
                          ? 1
                          : -1];

/* Finalize the prepared statements; one lent to an open cursor is left to
** the cursor, which finalizes it when it finds its slot emptied. */
void ledger_finalize_all(IdemLedger *p) {
  int i;
  for (i = 0; i < N_STMT; i++) {
    if ((p->mBusy & (1u << i)) == 0) sqlite3_finalize(p->aStmt[i]);
    p->aStmt[i] = 0;
  }
  p->mBusy = 0;
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
int ledger_create_schema(sqlite3 *db, const char *zDb, const char *zName, const sqlite3_int64 *aVal,
                         const char *zId, char **pzErr) {
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
      "('max_attempts',%lld),('max_args_bytes',%lld),('single_tenant',%lld),"
      "('retention_seconds',%lld),('require_transaction',%lld);"
      "CREATE TABLE \"%w\".\"%w_guards\"(id INTEGER PRIMARY KEY, tbl TEXT NOT NULL UNIQUE,"
      " key_column TEXT NOT NULL, tenant_column TEXT, token_column TEXT);",
      zDb, zName,
      zDb, zName, zDb, zName, LEDGER_FORMAT, zId, aVal[IDEM_OPT_LEASE],
      aVal[IDEM_OPT_ATTEMPTS], aVal[IDEM_OPT_ARGS_BYTES], aVal[IDEM_OPT_SINGLE], aVal[IDEM_OPT_RETENTION],
      aVal[IDEM_OPT_REQUIRE_TXN], zDb, zName);
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_exec(db, zSql, 0, 0, pzErr);
  sqlite3_free(zSql);
  if (rc == SQLITE_OK && aVal[IDEM_OPT_SINGLE]) {
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

int ledger_rename_schema(IdemLedger *p, const char *zNew) {
  int rc;
  char *zSql = sqlite3_mprintf(
      "ALTER TABLE \"%w\".\"%w_rows\" RENAME TO \"%w_rows\";"
      "ALTER TABLE \"%w\".\"%w_meta\" RENAME TO \"%w_meta\";"
      "ALTER TABLE \"%w\".\"%w_guards\" RENAME TO \"%w_guards\";",
      p->zDb, p->zName, zNew, p->zDb, p->zName, zNew, p->zDb, p->zName, zNew);
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_exec(p->db, zSql, 0, 0, 0);
  sqlite3_free(zSql);
  if (rc == SQLITE_OK) rc = ledger_rename_triggers(p->db, p->zDb, p->zName, zNew);
  if (rc == SQLITE_OK && p->aOpt[IDEM_OPT_SINGLE]) {
    zSql = sqlite3_mprintf(
        "DROP INDEX IF EXISTS \"%w\".\"%w_rows_key\";"
        "CREATE UNIQUE INDEX \"%w\".\"%w_rows_key\" ON \"%w_rows\"(\"key\");",
        p->zDb, p->zName, p->zDb, zNew, zNew);
    if (zSql == 0) return SQLITE_NOMEM;
    rc = sqlite3_exec(p->db, zSql, 0, 0, 0);
    sqlite3_free(zSql);
  }
  return rc;
}

int ledger_drop_schema(IdemLedger *p) {
  int rc;
  char *zSql = sqlite3_mprintf(
      "DROP TABLE IF EXISTS \"%w\".\"%w_rows\";"
      "DROP TABLE IF EXISTS \"%w\".\"%w_meta\";"
      "DROP TABLE IF EXISTS \"%w\".\"%w_guards\";",
      p->zDb, p->zName, p->zDb, p->zName, p->zDb, p->zName);
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_exec(p->db, zSql, 0, 0, 0);
  sqlite3_free(zSql);
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
int ledger_check_triggers(IdemLedger *p, const char *zFunc, char **pzErr) {
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

/* ------------------------------------------------------------------ */
/* Rows                                                                */
/* ------------------------------------------------------------------ */

/* A row is copied out of the statement that read it (see LedgerRow): a
** statement still stepping would hold a read transaction, and SQLite does
** not wait on the busy handler when a read transaction must become a
** write. */
void ledger_row_free(LedgerRow *r) {
  sqlite3_free(r->pBuf);
  r->pBuf = 0;
}

/* Copy the current row of pS (selected with ROW_COLUMNS) into r; the
** caller resets pS and calls ledger_row_free(). */
static int row_load(sqlite3_stmt *pS, LedgerRow *r) {
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
    ledger_row_free(r);
    return SQLITE_CORRUPT_VTAB;
  }
  return SQLITE_OK;
}

/*
** Run the row query pS (bound by the caller) and load its row into r.
** Returns SQLITE_OK with *pbFound set, or an error; pS is always reset
** and its bindings cleared.
*/
int ledger_row_fetch(sqlite3_stmt *pS, LedgerRow *r, int *pbFound) {
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

/* synchronous >= FULL on the ledger's schema: a power loss keeps the claim */
int ledger_durable(IdemLedger *p) {
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
/* Report a nested write that did not change exactly one row. */
int ledger_write_check(IdemLedger *p, const char *zFunc, const char *zWhat, char **pzErr) {
  int n = sqlite3_changes(p->db);
  if (n == 1) return SQLITE_OK;
  *pzErr = sqlite3_mprintf(
      "%s: the ledger's %s of %s_rows changed %d rows, not 1; a trigger "
      "or another writer interfered, so nothing was decided",
      zFunc, zWhat, p->zName, n);
  return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
}

int ledger_step_done(sqlite3_stmt *pS) {
  int rc = sqlite3_step(pS);
  if (rc == SQLITE_DONE || rc == SQLITE_ROW) rc = SQLITE_OK;
  else rc = sqlite3_reset(pS);
  sqlite3_reset(pS);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Savepoints                                                          */
/* ------------------------------------------------------------------ */

/* Run prepared statement i of p (a savepoint command) to completion. */
int ledger_exec(IdemLedger *p, int i) {
  sqlite3_stmt *pS = 0;
  int rc = ledger_stmt(p, i, &pS);
  if (rc) return rc;
  return ledger_step_done(pS);
}

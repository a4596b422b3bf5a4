/*
** ledger_storage.c: the ledger's shadow-table format and the statements
** that read and write it. The format is written down in docs/design.md (format 2;
** the triggers' rules are spelled out above azTriggerFmt):
**
**   <name>_rows    one row per (tenant, key): the request (conversation,
**                  tool, canonical args, effect), its status, result/error,
**                  attempt, the random half of the fencing token (the row id
**                  is the other half), times in Unix ms, expiries, guard
**                  marks and members. Plain-SQL CHECKs carry the key grammar,
**                  NOT NULL and the domains; UNIQUE(tenant,key), no index on
**                  the token; three triggers keep every row of the states
**                  table (fresh claims only, the request fixed, only legal
**                  transitions, no deleting a claimed or unknown row). None
**                  of them calls an extension function, so the file stays
**                  readable and checkable without the extension.
**   <name>_meta    (k, v): format version, identity and the options the
**                  ledger was made with, checked on connect.
**   <name>_guards  one row per guarded table (guard.c writes it).
**
** Also here: the options table (names, ranges, defaults), the prepared
** statements of a ledger, the check that the shadow tables carry exactly
** the ledger's own triggers, loading a row into a LedgerRow, and
** idem_upgrade (format 1 to 2, and restoring the own triggers).
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
    {"lease_seconds", 0, 31536000, 300, 0},
    {"max_attempts", 1, 1000, 5, 0},
    {"max_args_bytes", 2, IDEM_JCS_MAX_BYTES, 1048576, 0},
    {"single_tenant", 0, 1, 0, 0},
    {"retention_seconds", 0, 315360000, 0, 1},
    {"require_transaction", 0, 1, 0, 1},
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
  if (iFormat != LEDGER_FORMAT && iFormat != 1) {
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

/* ------------------------------------------------------------------ */
/* Tokens                                                              */
/* ------------------------------------------------------------------ */

/*
** A token is shown as 32 lowercase hex digits: the row id (16 digits, its
** top bit clear) then 64 random bits (16 digits). The rows table keeps only
** the random part, in the INTEGER column token; a token is found through
** the row id, so it needs no index of its own. A format-1 row upgraded by
** idem_upgrade got the id its old token names (see ledger_upgrade), so the
** old token still finds it.
*/
#define TOKEN_ID_MASK 0x7fffffffffffffffULL

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

#define IDEM_STR_(x) #x
#define IDEM_STR(x) IDEM_STR_(x)

/* The columns every row query selects, in RC_* order. */
#define ROW_COLUMNS                                                                 \
  "id,conversation,tool,args,effect,status,result,error,attempt,token,lease_until," \
  "members,marks,tenant,\"key\",updated_at,expirations"

static const char *const azStmtSql[N_STMT] = {
    /* ST_INSERT */
    "INSERT INTO \"%w\".\"%w_rows\"(tenant,\"key\",conversation,tool,args,effect,status,"
    "attempt,token,created_at,updated_at,lease_until,marks)"
    " VALUES(?1,?2,?3,?4,?5,?6,'claimed',1,?7,?8,?8,?9,?10)",
    /* ST_GET */
    "SELECT " ROW_COLUMNS
    " FROM \"%w\".\"%w_rows\""
    " WHERE tenant=?1 AND \"key\"=?2",
    /* ST_BY_TOKEN */
    "SELECT " ROW_COLUMNS
    " FROM \"%w\".\"%w_rows\""
    " WHERE id=?1 AND token=?2",
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
    /* ST_RENEW: extends a claim whose lease has not passed, fenced by its
    ** token, and hands back the new lease */
    "UPDATE \"%w\".\"%w_rows\" SET lease_until=max(lease_until,?1),updated_at=?2"
    " WHERE id=?3 AND token=?4 AND status='claimed' AND lease_until>?2 RETURNING lease_until",
    /* ST_RET_SCAN (ledger_retention.c): ?1 the cursor, ?2 the cutoff (Unix
    ** ms): each row's id, whether it is due, and whether it was created
    ** after the cutoff. RETENTION_SCAN rows. */
    "SELECT id, (status='succeeded' OR status='failed' OR status='released') AND updated_at<?2,"
    " created_at>=?2 FROM \"%w\".\"%w_rows\" WHERE id>?1 ORDER BY id LIMIT " IDEM_STR(
        RETENTION_SCAN),
    /* ST_RET_DELETE: the same test again at the delete, so a row changed
    ** meanwhile stays. (OR chains rather than IN lists: no ephemeral table
    ** per run.) */
    "DELETE FROM \"%w\".\"%w_rows\" WHERE id=?1"
    " AND (status='succeeded' OR status='failed' OR status='released') AND updated_at<?2",
    /* ST_CUR_ALL, ST_CUR_KEY, ST_CUR_TENANT, ST_CUR_TOKEN */
    "SELECT " ROW_COLUMNS ",created_at FROM \"%w\".\"%w_rows\" ORDER BY id",
    "SELECT " ROW_COLUMNS
    ",created_at FROM \"%w\".\"%w_rows\""
    " WHERE tenant=?1 AND \"key\"=?2 ORDER BY id",
    "SELECT " ROW_COLUMNS ",created_at FROM \"%w\".\"%w_rows\" WHERE tenant=?1 ORDER BY id",
    "SELECT " ROW_COLUMNS ",created_at FROM \"%w\".\"%w_rows\" WHERE id=?1 AND token=?2",
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
/* Schema of the shadow tables (format 2)                              */
/* ------------------------------------------------------------------ */

/*
** The key grammar (docs/keys.md, "Key grammar") in plain SQL: TEXT of 1 to 128
** characters, each in A-Z a-z 0-9 _ -. GLOB stops at an embedded NUL, so
** instr() refuses one first. Measured against the other spellings of the
** same rule that SQLite 3.40 can evaluate (docs/benchmarks.md, "Where a claim's time goes"),
** this one is the cheapest on realistic values: rtrim() with the allowed
** set pays a fixed cost per call for parsing the set and scans it
** linearly, so it wins only on hex-heavy text.
*/
#define GRAMMAR(c)                                                                             \
  "typeof(" c ")='text' AND length(" c ") BETWEEN 1 AND 128 AND instr(" c ",char(0))=0 AND " c \
  " NOT GLOB '*[^A-Za-z0-9_-]*'"

/* The statement's clock in Unix ms, as the extension's (VFS) clock */
#define SQL_NOW "CAST(round((julianday('now')-2440587.5)*86400000) AS INTEGER)"

/* Messages of the shadow-table triggers (RAISE takes only a literal). */
#define MSG_INSERT                                                                  \
  "idempotency: only a fresh claim may be inserted into a ledger: status claimed, " \
  "attempt 1, no result, error or members, and no row with that id or that key"
#define MSG_UPDATE                                                                    \
  "idempotency: illegal change of a ledger row: the request never changes, a live "   \
  "claim is not taken over, unknown never becomes claimed, succeeded and failed are " \
  "final, and an external claim is released only with detail {\"sent\": false}"
#define MSG_DELETE "idempotency: a claimed or unknown ledger row cannot be deleted"

/*
** The shadow-table triggers of format 2, as SQLite stores them (no schema
** name; %1 and %2 are the ledger name). They enforce every row of the
** states table (docs/ledger.md, "States") without the extension:
**
**   insert  only a fresh claim: status claimed, attempt 1, no result, error
**           or members, no expiry counted, and no row with that id or that
**           (tenant, key) (on a single_tenant ledger: that key). A REPLACE
**           deletes without firing delete triggers, so the existence test
**           is what keeps REPLACE from erasing a row, by id or by key.
**   update  the request columns (id, tenant, key, conversation, tool, args,
**           effect, created_at) never change, and the change is one of:
**           an outcome (claimed -> succeeded|failed|released|unknown, unknown
**           -> succeeded|failed|released; token, attempt, lease, marks and
**           expiries kept; unknown only for external claims; an external
**           claim released only with a detail whose "sent" is false);
**           a renewal (a live claim keeps token and attempt, its lease only
**           grows); a take-over or re-claim (released, or claimed local
**           whose lease has passed at the statement's clock -> claimed,
**           attempt + 1, a new token, no result, error or members, one more
**           expiry for a take-over). Nothing else: unknown never becomes
**           claimed, succeeded and failed never change.
**   delete  never a claimed or unknown row.
**
** No extension function appears, and only innocuous built-ins (the JSON
** functions are not innocuous on SQLite 3.40, so a trigger using them fails
** under trusted_schema=OFF): a released external row's detail is stored
** with "sent":false as its first member (sent_first() in ledger_state.c),
** which the update trigger checks with GLOB. What plain SQL cannot see is left to the extension: whether a local
** claim's attempt wrote guarded rows (which forbids its release).
*/
#define N_TRIGGER 3
static const char *const azTriggerFmt[N_TRIGGER] = {
    "CREATE TRIGGER \"%w_rows_insert\" BEFORE INSERT ON \"%w_rows\" WHEN NOT coalesce("
    "NEW.status IS 'claimed' AND NEW.attempt IS 1 AND NEW.result IS NULL AND NEW.error IS NULL"
    " AND NEW.members IS NULL AND NEW.expirations IS 0,0)"
    " OR (NEW.id>0 AND EXISTS(SELECT 1 FROM \"%w_rows\" WHERE id=NEW.id))"
    " OR EXISTS(SELECT 1 FROM \"%w_rows\" WHERE %s)"
    " BEGIN SELECT RAISE(ABORT,'" MSG_INSERT "'); END",
    "CREATE TRIGGER \"%w_rows_update\" BEFORE UPDATE ON \"%w_rows\" WHEN NOT coalesce(("
    "NEW.id IS OLD.id AND NEW.tenant IS OLD.tenant AND NEW.\"key\" IS OLD.\"key\""
    " AND NEW.conversation IS OLD.conversation AND NEW.tool IS OLD.tool"
    " AND NEW.args IS OLD.args AND NEW.effect IS OLD.effect"
    " AND NEW.created_at IS OLD.created_at AND ("
    "((OLD.status IS 'claimed' AND (NEW.status IS 'succeeded' OR NEW.status IS 'failed'"
    " OR NEW.status IS 'released' OR NEW.status IS 'unknown')"
    " OR OLD.status IS 'unknown' AND (NEW.status IS 'succeeded' OR NEW.status IS 'failed'"
    " OR NEW.status IS 'released'))"
    " AND NEW.token IS OLD.token AND NEW.attempt IS OLD.attempt"
    " AND NEW.lease_until IS OLD.lease_until AND NEW.marks IS OLD.marks"
    " AND NEW.expirations IS OLD.expirations"
    " AND (NEW.status IS NOT 'unknown' OR OLD.effect IS 'external')"
    " AND (NEW.status IS NOT 'released' OR OLD.effect IS 'local'"
    " OR NEW.error IS '{\"sent\":false}'"
    " OR NEW.error IS NOT NULL AND NEW.error GLOB '{\"sent\":false,*}'))"
    " OR (OLD.status IS 'claimed' AND NEW.status IS 'claimed' AND NEW.token IS OLD.token"
    " AND NEW.attempt IS OLD.attempt AND NEW.marks IS OLD.marks"
    " AND NEW.expirations IS OLD.expirations AND NEW.result IS OLD.result"
    " AND NEW.error IS OLD.error AND NEW.members IS OLD.members"
    " AND OLD.lease_until>" SQL_NOW
    " AND NEW.lease_until>=OLD.lease_until)"
    " OR ((OLD.status IS 'released' OR OLD.status IS 'claimed' AND OLD.effect IS 'local'"
    " AND OLD.lease_until<=" SQL_NOW
    ")"
    " AND NEW.status IS 'claimed' AND NEW.attempt IS OLD.attempt+1 AND NEW.token IS NOT OLD.token"
    " AND NEW.result IS NULL AND NEW.error IS NULL AND NEW.members IS NULL"
    " AND NEW.expirations IS OLD.expirations+(OLD.status IS 'claimed')))),0)"
    " BEGIN SELECT RAISE(ABORT,'" MSG_UPDATE "'); END",
    "CREATE TRIGGER \"%w_rows_delete\" BEFORE DELETE ON \"%w_rows\""
    " WHEN OLD.status IS 'claimed' OR OLD.status IS 'unknown'"
    " BEGIN SELECT RAISE(ABORT,'" MSG_DELETE "'); END",
};

/* (Each WHEN is wrapped in coalesce(..., 0): a NULL anywhere in the
** rule, from a nullable column, refuses the change instead of skipping the
** trigger.) */

/* The triggers of format 1, for idem_upgrade: what such a file holds. */
#define N_TRIGGER_V1 2
static const char *const azTriggerFmtV1[N_TRIGGER_V1] = {
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

/* The stored SQL of trigger i of ledger zName (format iFormat). */
static char *trigger_sql(int iFormat, int i, const char *zName, int bSingle) {
  if (iFormat == 1) return sqlite3_mprintf(azTriggerFmtV1[i], zName, zName);
  return sqlite3_mprintf(
      azTriggerFmt[i], zName, zName, zName, zName,
      bSingle ? "\"key\"=NEW.\"key\"" : "tenant=NEW.tenant AND \"key\"=NEW.\"key\"");
}

/* (Comparisons are spelled as OR chains, not IN lists: SQLite builds an
** ephemeral table for an IN list each time the statement runs, which cost
** about 3,000 instructions per claim.) */

/* Create the format-2 triggers of ledger zName in schema zDb: the stored
** text of trigger_sql() with the schema put after "CREATE TRIGGER ". */
static int create_triggers(sqlite3 *db, const char *zDb, const char *zName, int bSingle,
                           char **pzErr) {
  int rc = SQLITE_OK, i;
  for (i = 0; rc == SQLITE_OK && i < N_TRIGGER; i++) {
    char *zTrig = trigger_sql(LEDGER_FORMAT, i, zName, bSingle), *zSql;
    if (zTrig == 0) return SQLITE_NOMEM;
    zSql = sqlite3_mprintf("CREATE TRIGGER \"%w\".%s", zDb, zTrig + 15);
    sqlite3_free(zTrig);
    if (zSql == 0) return SQLITE_NOMEM;
    rc = sqlite3_exec(db, zSql, 0, 0, pzErr);
    sqlite3_free(zSql);
  }
  return rc;
}

/* CREATE TABLE of a format-2 rows table named zTable in schema zDb. */
static char *rows_table_sql(const char *zDb, const char *zTable) {
  return sqlite3_mprintf(
      "CREATE TABLE \"%w\".\"%w\"("
      "id INTEGER PRIMARY KEY CHECK(id>0),"
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
      "token INTEGER NOT NULL CHECK(typeof(token)='integer'),"
      "created_at INTEGER NOT NULL CHECK(typeof(created_at)='integer'),"
      "updated_at INTEGER NOT NULL CHECK(typeof(updated_at)='integer'),"
      "lease_until INTEGER NOT NULL CHECK(typeof(lease_until)='integer'),"
      "marks CHECK(marks IS NULL OR typeof(marks)='text'),"
      "members CHECK(members IS NULL OR typeof(members)='text'),"
      "expirations INTEGER NOT NULL DEFAULT 0 CHECK(typeof(expirations)='integer'"
      " AND expirations>=0),"
      "UNIQUE(tenant,\"key\"))",
      zDb, zTable);
}

/* Run zSql (sqlite3_mprintf'd, freed here; NULL means out of memory). */
static int exec_free(sqlite3 *db, char *zSql, char **pzErr) {
  int rc;
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_exec(db, zSql, 0, 0, pzErr);
  sqlite3_free(zSql);
  return rc;
}

/* The single_tenant index: a key is unique across the ledger. */
static int create_key_index(sqlite3 *db, const char *zDb, const char *zName, char **pzErr) {
  return exec_free(
      db,
      sqlite3_mprintf("CREATE UNIQUE INDEX \"%w\".\"%w_rows_key\" ON \"%w_rows\"(\"key\")", zDb,
                      zName, zName),
      pzErr);
}

/* Create the shadow tables, meta rows, index and triggers of ledger zName. */
int ledger_create_schema(sqlite3 *db, const char *zDb, const char *zName, const sqlite3_int64 *aVal,
                         const char *zId, char **pzErr) {
  char *zTable = sqlite3_mprintf("%s_rows", zName);
  sqlite3_str *s;
  int rc, j;
  if (zTable == 0) return SQLITE_NOMEM;
  rc = exec_free(db, rows_table_sql(zDb, zTable), pzErr);
  sqlite3_free(zTable);
  if (rc) return rc;
  s = sqlite3_str_new(db);
  sqlite3_str_appendf(s,
                      "CREATE TABLE \"%w\".\"%w_meta\"(k TEXT PRIMARY KEY NOT NULL, v NOT NULL)"
                      " WITHOUT ROWID;"
                      "INSERT INTO \"%w\".\"%w_meta\"(k,v) VALUES('format',%d),('id',%Q)",
                      zDb, zName, zDb, zName, LEDGER_FORMAT, zId);
  for (j = 0; j < IDEM_N_OPT; j++) {
    sqlite3_str_appendf(s, ",(%Q,%lld)", ledger_options[j].zName, aVal[j]);
  }
  sqlite3_str_appendf(s,
                      ";CREATE TABLE \"%w\".\"%w_guards\"(id INTEGER PRIMARY KEY,"
                      " tbl TEXT NOT NULL UNIQUE, key_column TEXT NOT NULL, tenant_column TEXT,"
                      " token_column TEXT);",
                      zDb, zName);
  rc = exec_free(db, sqlite3_str_finish(s), pzErr);
  if (rc == SQLITE_OK && aVal[IDEM_OPT_SINGLE]) rc = create_key_index(db, zDb, zName, pzErr);
  if (rc == SQLITE_OK) rc = create_triggers(db, zDb, zName, (int)aVal[IDEM_OPT_SINGLE], pzErr);
  return rc;
}

/* Drop the triggers of ledger zOld and create them under zNew. */
static int ledger_rename_triggers(sqlite3 *db, const char *zDb, const char *zOld, const char *zNew,
                                  int bSingle) {
  static const char *azSuffix[N_TRIGGER] = {"insert", "update", "delete"};
  int rc = SQLITE_OK, i;
  for (i = 0; rc == SQLITE_OK && i < N_TRIGGER; i++) {
    rc = exec_free(
        db, sqlite3_mprintf("DROP TRIGGER IF EXISTS \"%w\".\"%w_rows_%s\"", zDb, zOld, azSuffix[i]),
        0);
  }
  if (rc == SQLITE_OK) rc = create_triggers(db, zDb, zNew, bSingle, 0);
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
  if (rc == SQLITE_OK) {
    rc = ledger_rename_triggers(p->db, p->zDb, p->zName, zNew, (int)p->aOpt[IDEM_OPT_SINGLE]);
  }
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
  static const char *azSuffix[N_TRIGGER] = {"insert", "update", "delete"};
  sqlite3_stmt *pV = 0, *pQ = 0;
  int rc, v1 = 0, v2 = 0, i, aSeen[N_TRIGGER] = {0, 0, 0};
  char *zSql = 0, *azExpect[N_TRIGGER] = {0, 0, 0}, *azName[N_TRIGGER] = {0, 0, 0};
  rc = ledger_stmt(p, ST_SCHEMA_VERSION, &pV);
  if (rc) return rc;
  if (sqlite3_step(pV) == SQLITE_ROW) v1 = sqlite3_column_int(pV, 0);
  rc = sqlite3_reset(pV);
  if (rc) return rc;
  rc = ledger_temp_version(p, &v2, 1);
  if (rc) return rc;
  if (p->zBroken || !p->bChecked || v1 != p->iSchemaVersion || v2 != p->iTempSchemaVersion) {
    /* a shadow table may have been dropped (ledger_lifecycle.c) */
    rc = ledger_usable(p, zFunc, pzErr);
    if (rc) return rc;
  }
  if (p->bChecked && v1 == p->iSchemaVersion && v2 == p->iTempSchemaVersion) {
    if (p->zForeign == 0) return SQLITE_OK;
    *pzErr = sqlite3_mprintf("%s: %s", zFunc, p->zForeign);
    return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  sqlite3_free(p->zForeign);
  p->zForeign = 0;
  if (p->iFormat != LEDGER_FORMAT) {
    p->zForeign = sqlite3_mprintf(
        "ledger %s has format %d, made by an earlier release; upgrade it once with "
        "SELECT idem_upgrade('%q')",
        p->zName, p->iFormat, p->zName);
    rc = p->zForeign ? SQLITE_ERROR : SQLITE_NOMEM;
    goto done;
  }
  for (i = 0; i < N_TRIGGER; i++) {
    azExpect[i] = trigger_sql(LEDGER_FORMAT, i, p->zName, (int)p->aOpt[IDEM_OPT_SINGLE]);
    azName[i] = sqlite3_mprintf("%s_rows_%s", p->zName, azSuffix[i]);
    if (azExpect[i] == 0 || azName[i] == 0) {
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
    const char *zIn = (const char *)sqlite3_column_text(pQ, 2);
    int iOwn = -1;
    /* an own trigger lives in the ledger's schema; one in temp is foreign */
    for (i = 0; zTrig && zIn && sqlite3_stricmp(zIn, p->zDb) == 0 && i < N_TRIGGER; i++) {
      if (strcmp(zTrig, azName[i]) == 0) iOwn = i;
    }
    if (iOwn >= 0 && zTSql && strcmp(zTSql, azExpect[iOwn]) == 0) {
      aSeen[iOwn] = 1;
      continue;
    }
    if (iOwn < 0 && zTSql) {
      /* a same-named TEMP ledger's own trigger (on temp's table, or a copy
      ** of ours on this one): the same text does the same checks */
      for (i = 0; i < N_TRIGGER && strcmp(zTSql, azExpect[i]) != 0; i++) {
      }
      if (i < N_TRIGGER) continue;
    }
    if (iOwn >= 0) {
      p->zForeign = sqlite3_mprintf(
          "ledger %s has its trigger \"%s\" altered; rows may have been changed without it: "
          "check them (SELECT * FROM %s) against what the application and the targets know, "
          "drop the trigger, then restore it with SELECT idem_upgrade('%q'); every ledger "
          "operation is refused until then",
          p->zName, zTrig, p->zName, p->zName);
    } else {
      p->zForeign = sqlite3_mprintf(
          "ledger %s has a foreign trigger \"%s\" on its shadow tables; every ledger "
          "operation is refused until it is dropped",
          p->zName, zTrig ? zTrig : "?");
    }
    rc = p->zForeign ? SQLITE_ROW : SQLITE_NOMEM;
    break;
  }
  if (rc == SQLITE_DONE) {
    rc = SQLITE_OK;
    for (i = 0; i < N_TRIGGER && p->zForeign == 0; i++) {
      if (aSeen[i]) continue;
      p->zForeign = sqlite3_mprintf(
          "ledger %s is missing its trigger \"%s\"; rows may have been changed without it: "
          "check them (SELECT * FROM %s) against what the application and the targets know, "
          "then restore it with SELECT idem_upgrade('%q'); every ledger operation is refused "
          "until then",
          p->zName, azName[i], p->zName, p->zName);
      if (p->zForeign == 0) rc = SQLITE_NOMEM;
    }
  } else if (rc == SQLITE_ROW) {
    rc = SQLITE_OK;
  }
  if (rc == SQLITE_OK && p->zForeign) rc = SQLITE_ERROR;
done:
  if (rc == SQLITE_OK || (rc == SQLITE_ERROR && p->zForeign)) {
    p->bChecked = 1;
    p->iSchemaVersion = v1;
    p->iTempSchemaVersion = v2;
    /* what ledger_check_after_read() compares with */
    p->pGetChecked = p->aStmt[ST_GET];
    p->nGetReprepare =
        p->pGetChecked ? sqlite3_stmt_status(p->pGetChecked, SQLITE_STMTSTATUS_REPREPARE, 0) : -1;
  }
  sqlite3_finalize(pQ);
  sqlite3_free(zSql);
  for (i = 0; i < N_TRIGGER; i++) {
    sqlite3_free(azExpect[i]);
    sqlite3_free(azName[i]);
  }
  if (rc == SQLITE_ERROR && p->zForeign) {
    *pzErr = sqlite3_mprintf("%s: %s", zFunc, p->zForeign);
    if (*pzErr == 0) rc = SQLITE_NOMEM;
  }
  return rc;
}

int ledger_temp_version(IdemLedger *p, int *pV, int bReuse) {
  sqlite3_stmt *pT = 0;
  unsigned iCall = idem_conn_call(p->pConn);
  int rc;
  if (bReuse && iCall != 0 && p->iTempStamp == iCall) {
    *pV = p->iTempNow;
    return SQLITE_OK;
  }
  p->iTempStamp = 0;
  rc = ledger_stmt(p, ST_TEMP_SCHEMA_VERSION, &pT);
  if (rc) return rc;
  if (sqlite3_step(pT) == SQLITE_ROW) *pV = sqlite3_column_int(pT, 0);
  rc = sqlite3_reset(pT);
  if (rc == SQLITE_OK) {
    p->iTempNow = *pV;
    p->iTempStamp = iCall; /* 0 outside a call: never reused */
  }
  return rc;
}

int ledger_check_after_read(IdemLedger *p, const char *zFunc, char **pzErr) {
  sqlite3_stmt *pG = p->aStmt[ST_GET];
  int rc, v2 = 0;
  if (!p->bChecked || pG == 0 || pG != p->pGetChecked ||
      sqlite3_stmt_status(pG, SQLITE_STMTSTATUS_REPREPARE, 0) != p->nGetReprepare) {
    return ledger_check_triggers(p, zFunc, pzErr);
  }
  /* main's schema is as it was checked (the lookup just ran on it without
  ** being prepared again); a TEMP trigger changes temp's version only */
  rc = ledger_temp_version(p, &v2, 1);
  if (rc) return rc;
  if (v2 != p->iTempSchemaVersion) return ledger_check_triggers(p, zFunc, pzErr);
  if (p->zForeign == 0) return SQLITE_OK;
  *pzErr = sqlite3_mprintf("%s: %s", zFunc, p->zForeign);
  return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
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
  const char **apDest[11], *az[11];
  int an[11];
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
  /* one pass over the columns: each API call takes the connection's mutex,
  ** so the text and its length are read once (text first, as SQLite asks) */
  for (i = 0; i < 11; i++) {
    az[i] = (const char *)sqlite3_column_text(pS, aText[i]);
    an[i] = -1;
    if (az[i] == 0) {
      if (sqlite3_column_type(pS, aText[i]) != SQLITE_NULL) return SQLITE_NOMEM;
      continue;
    }
    an[i] = sqlite3_column_bytes(pS, aText[i]);
    nTotal += an[i] + 1;
  }
  z = r->pBuf = sqlite3_malloc64(nTotal + 1);
  if (z == 0) return SQLITE_NOMEM;
  for (i = 0; i < 11; i++) {
    if (an[i] < 0) continue;
    memcpy(z, az[i], (size_t)an[i]);
    z[an[i]] = 0;
    *apDest[i] = z;
    if (i == 2) r->nArgs = an[i];
    if (i >= 5 && i <= 7 && memchr(az[i], 0, (size_t)an[i])) r->mNulJson |= 1 << (i - 5);
    z += an[i] + 1;
  }
  r->id = sqlite3_column_int64(pS, 0);
  r->attempt = sqlite3_column_int64(pS, 8);
  r->tokenRnd = sqlite3_column_int64(pS, RC_TOKEN);
  ledger_token_hex(r->id, r->tokenRnd, r->zToken);
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
  unsigned int uVersion = 0;
  /* Every run of a PRAGMA statement prepares it again (SQLite marks them
  ** run-once), about 8,000 instructions. Within one write transaction the
  ** value read by its first claim is kept: the transaction's claims are
  ** made durable (or not) by the same commit. The transaction is told by
  ** the pager's data version, which every commit changes, and a claim
  ** that starts outside a write transaction forgets the value
  ** (ledger_claim), so one read in an earlier transaction, before a
  ** PRAGMA synchronous changed it, is never reused. */
  sqlite3_file_control(p->db, p->zDb, SQLITE_FCNTL_DATA_VERSION, &uVersion);
  if (p->iDurable >= 0 && p->uDurableVersion == uVersion &&
      sqlite3_txn_state(p->db, p->zDb) == SQLITE_TXN_WRITE) {
    return p->iDurable;
  }
  if (ledger_stmt(p, ST_SYNCHRONOUS, &pS) == SQLITE_OK) {
    if (sqlite3_step(pS) == SQLITE_ROW) durable = sqlite3_column_int(pS, 0) >= 2;
    sqlite3_reset(pS);
  }
  if (durable) {
    const char *zFile = sqlite3_db_filename(p->db, p->zDb);
    if (zFile == 0 || zFile[0] == 0) durable = 0; /* memory or temp database */
  }
  p->iDurable = durable;
  p->uDurableVersion = uVersion;
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

/* ------------------------------------------------------------------ */
/* idem_upgrade: format 1 to format 2, and the repair of own triggers  */
/* ------------------------------------------------------------------ */

/* The first foreign trigger on the shadow tables of p (not named and
** written as one of format iFormat's own triggers), as a message, or NULL
** in *pzWhy; *pmSeen gets a bit per own trigger found intact. Triggers
** named as own ones but altered are dropped when bDropAltered. */
static int triggers_scan(IdemLedger *p, int iFormat, int bDropAltered, char **pzWhy,
                         unsigned *pmSeen) {
  static const char *azSuffix[N_TRIGGER] = {"insert", "update", "delete"};
  int nTrig = iFormat == 1 ? N_TRIGGER_V1 : N_TRIGGER, i, rc;
  int iFirst = iFormat == 1 ? 1 : 0; /* format 1 has no insert trigger */
  char *azExpect[N_TRIGGER] = {0, 0, 0}, *azName[N_TRIGGER] = {0, 0, 0};
  char *zSql;
  sqlite3_stmt *pQ = 0;
  *pzWhy = 0;
  *pmSeen = 0;
  for (i = 0; i < nTrig; i++) {
    azExpect[i] = trigger_sql(iFormat, i, p->zName, (int)p->aOpt[IDEM_OPT_SINGLE]);
    azName[i] = sqlite3_mprintf("%s_rows_%s", p->zName, azSuffix[i + iFirst]);
    if (azExpect[i] == 0 || azName[i] == 0) {
      rc = SQLITE_NOMEM;
      goto done;
    }
  }
  zSql = sqlite3_mprintf(
      "SELECT name, sql, 0 FROM \"%w\".sqlite_schema WHERE type='trigger' AND tbl_name"
      " COLLATE NOCASE IN ('%q_rows','%q_meta','%q_guards')"
      " UNION ALL SELECT name, sql, 1 FROM temp.sqlite_schema WHERE type='trigger'"
      " AND %d AND tbl_name COLLATE NOCASE IN ('%q_rows','%q_meta','%q_guards')",
      p->zDb, p->zName, p->zName, p->zName, sqlite3_stricmp(p->zDb, "temp") != 0, p->zName,
      p->zName, p->zName);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pQ, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  while (rc == SQLITE_OK && *pzWhy == 0 && sqlite3_step(pQ) == SQLITE_ROW) {
    const char *zTrig = (const char *)sqlite3_column_text(pQ, 0);
    const char *zTSql = (const char *)sqlite3_column_text(pQ, 1);
    int bTemp = sqlite3_column_int(pQ, 2), iOwn = -1;
    for (i = 0; zTrig && !bTemp && i < nTrig; i++) {
      if (strcmp(zTrig, azName[i]) == 0) iOwn = i;
    }
    if (iOwn >= 0 && zTSql && strcmp(zTSql, azExpect[iOwn]) == 0) {
      *pmSeen |= 1u << iOwn;
    } else if (iOwn >= 0 && bDropAltered) {
      rc = exec_free(p->db, sqlite3_mprintf("DROP TRIGGER \"%w\".\"%w\"", p->zDb, azName[iOwn]), 0);
      if (rc == SQLITE_OK) {
        /* the scan statement reads sqlite_schema: start it again */
        sqlite3_reset(pQ);
        *pmSeen = 0;
      }
    } else if (iOwn < 0 && bTemp && zTSql) {
      for (i = 0; i < nTrig && strcmp(zTSql, azExpect[i]) != 0; i++) {
      }
      if (i == nTrig) *pzWhy = sqlite3_mprintf("a foreign trigger \"%s\"", zTrig ? zTrig : "?");
    } else {
      *pzWhy = sqlite3_mprintf("%s trigger \"%s\"", iOwn >= 0 ? "an altered" : "a foreign",
                               zTrig ? zTrig : "?");
    }
  }
  if (rc == SQLITE_OK) rc = sqlite3_reset(pQ);
done:
  sqlite3_finalize(pQ);
  for (i = 0; i < N_TRIGGER; i++) {
    sqlite3_free(azExpect[i]);
    sqlite3_free(azName[i]);
  }
  return rc;
}

/* Big-endian 64 bits of a[0..8). */
static sqlite3_uint64 be64(const unsigned char *a) {
  sqlite3_uint64 v = 0;
  int i;
  for (i = 0; i < 8; i++) v = (v << 8) | a[i];
  return v;
}

/*
** Copy the rows of a format-1 table into the format-2 table zNew. A row
** whose token can still settle (claimed, unknown) gets the id its old
** token names (the token's first 8 bytes, top bit cleared), so the holder's
** token finds it; the column token keeps the old token's last 8 bytes.
** Other rows keep their ids. *pnRow counts the rows.
*/
static int upgrade_copy_rows(IdemLedger *p, const char *zNew, sqlite3_int64 *pnRow) {
  static const char zCols[] =
      "id,tenant,\"key\",conversation,tool,args,effect,status,result,error,attempt,token,"
      "created_at,updated_at,lease_until,marks,members,expirations";
  sqlite3_stmt *pR = 0, *pW = 0;
  char *zSql;
  int rc, i;
  *pnRow = 0;
  zSql = sqlite3_mprintf("SELECT %s FROM \"%w\".\"%w_rows\" ORDER BY id", zCols, p->zDb, p->zName);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pR, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  if (rc) return rc;
  zSql = sqlite3_mprintf(
      "INSERT INTO \"%w\".\"%w\"(%s) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,"
      "?16,?17,?18)",
      p->zDb, zNew, zCols);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pW, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  while (rc == SQLITE_OK && sqlite3_step(pR) == SQLITE_ROW) {
    const unsigned char *aTok = (const unsigned char *)sqlite3_column_blob(pR, 11);
    const char *zStatus = (const char *)sqlite3_column_text(pR, 7);
    sqlite3_int64 id = sqlite3_column_int64(pR, 0), rnd = 0;
    if (sqlite3_column_bytes(pR, 11) != 16 || aTok == 0 || zStatus == 0) {
      rc = SQLITE_CORRUPT_VTAB;
      break;
    }
    rnd = (sqlite3_int64)be64(aTok + 8);
    if (strcmp(zStatus, "claimed") == 0 || strcmp(zStatus, "unknown") == 0) {
      id = (sqlite3_int64)(be64(aTok) & TOKEN_ID_MASK);
      if (id == 0) id = 1; /* a token of 2^-63 odds: it then settles by key only */
    }
    for (i = 0; i < 18; i++) sqlite3_bind_value(pW, i + 1, sqlite3_column_value(pR, i));
    sqlite3_bind_int64(pW, 1, id);
    sqlite3_bind_int64(pW, 12, rnd);
    rc = ledger_step_done(pW);
    if (rc == SQLITE_OK) (*pnRow)++;
  }
  if (rc == SQLITE_OK) rc = sqlite3_reset(pR);
  sqlite3_finalize(pR);
  sqlite3_finalize(pW);
  return rc;
}

int ledger_upgrade(IdemLedger *p, const char *zFunc, char **pzJson, char **pzErr) {
  char *zWhy = 0, *zNew = 0;
  unsigned mSeen = 0;
  sqlite3_int64 nRow = 0;
  int rc = SQLITE_OK, iFrom = p->iFormat, nRestored = 0, i, bSave = 0;
  int bAuto = sqlite3_get_autocommit(p->db);
  /* prepared before anything is written, so that undoing cannot fail for
  ** want of memory to prepare it */
  static const char *const azTxn[4] = {"SAVEPOINT idem_upgrade", "RELEASE idem_upgrade",
                                       "ROLLBACK TO idem_upgrade", "ROLLBACK"};
  sqlite3_stmt *apTxn[4] = {0, 0, 0, 0};
  IdemJson j;

  *pzJson = 0;
  for (i = 0; rc == SQLITE_OK && i < 4; i++) {
    rc = sqlite3_prepare_v2(p->db, azTxn[i], -1, &apTxn[i], 0);
  }
  if (rc == SQLITE_OK) rc = ledger_step_done(apTxn[0]);
  if (rc) goto done;
  bSave = 1;
  rc = triggers_scan(p, iFrom, iFrom == LEDGER_FORMAT, &zWhy, &mSeen);
  if (rc) goto done;
  if (zWhy) {
    *pzErr = sqlite3_mprintf(
        "%s: ledger %s has %s on its shadow tables; drop it first (nothing was changed)", zFunc,
        p->zName, zWhy);
    rc = *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
    goto done;
  }
  if (iFrom == 1) {
    ledger_finalize_all(p);
    zNew = sqlite3_mprintf("%s_rows_format2", p->zName);
    rc = zNew ? exec_free(p->db, rows_table_sql(p->zDb, zNew), 0) : SQLITE_NOMEM;
    if (rc == SQLITE_OK) rc = upgrade_copy_rows(p, zNew, &nRow);
    if (rc == SQLITE_OK) {
      rc = exec_free(p->db,
                     sqlite3_mprintf("DROP TABLE \"%w\".\"%w_rows\";"
                                     "ALTER TABLE \"%w\".\"%w\" RENAME TO \"%w_rows\";"
                                     "UPDATE \"%w\".\"%w_meta\" SET v=%d WHERE k='format';",
                                     p->zDb, p->zName, p->zDb, zNew, p->zName, p->zDb, p->zName,
                                     LEDGER_FORMAT),
                     0);
    }
    if (rc == SQLITE_OK && p->aOpt[IDEM_OPT_SINGLE])
      rc = create_key_index(p->db, p->zDb, p->zName, 0);
    if (rc == SQLITE_OK)
      rc = create_triggers(p->db, p->zDb, p->zName, (int)p->aOpt[IDEM_OPT_SINGLE], 0);
    nRestored = N_TRIGGER;
  } else {
    /* format 2: create the own triggers that are missing (altered ones were dropped) */
    for (i = 0; rc == SQLITE_OK && i < N_TRIGGER; i++) {
      char *zTrig, *zSql;
      if (mSeen & (1u << i)) continue;
      zTrig = trigger_sql(LEDGER_FORMAT, i, p->zName, (int)p->aOpt[IDEM_OPT_SINGLE]);
      zSql = zTrig ? sqlite3_mprintf("CREATE TRIGGER \"%w\".%s", p->zDb, zTrig + 15) : 0;
      sqlite3_free(zTrig);
      rc = exec_free(p->db, zSql, 0);
      nRestored++;
    }
  }
  if (rc) goto done;
  /* the answer first: nothing may fail once the upgrade is released */
  idem_json_begin(&j);
  idem_json_text(&j, "ledger", p->zName);
  idem_json_int(&j, "from_format", iFrom);
  idem_json_int(&j, "format", LEDGER_FORMAT);
  idem_json_int(&j, "rows_copied", nRow);
  idem_json_int(&j, "triggers_created", nRestored);
  *pzJson = idem_json_finish(&j, &rc);
  if (rc) goto done;
  rc = ledger_step_done(apTxn[1]);
  if (rc) goto done;
  bSave = 0;
  p->iFormat = LEDGER_FORMAT;
  p->bChecked = 0;

done:
  if (rc && *pzErr == 0 && rc != SQLITE_NOMEM) *pzErr = idem_db_error(p->db, zFunc, rc);
  if (rc) {
    sqlite3_free(*pzJson);
    *pzJson = 0;
  }
  if (bSave) {
    int rcU = ledger_step_done(apTxn[2]);
    if (rcU == SQLITE_OK) rcU = ledger_step_done(apTxn[1]);
    if (rcU != SQLITE_OK && bAuto) ledger_step_done(apTxn[3]); /* the transaction is ours */
  }
  for (i = 0; i < 4; i++) sqlite3_finalize(apTxn[i]);
  sqlite3_free(zWhy);
  sqlite3_free(zNew);
  return rc;
}

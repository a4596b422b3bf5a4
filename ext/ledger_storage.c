/*
** ledger_storage.c: the ledger's tables and the statements that read and
** write them. The format (format 4: <name>_rows, _meta, _guards and
** _members, their indexes and triggers) is written down once, in
** docs/design.md, "Shadow-table format"; the triggers are listed again above
** aOwn, beside the SQL that is them.
**
** Also here: the options table (names, ranges, defaults), the prepared
** statements of a ledger and the one-writer bracket around those that
** write (own_begin), the guards' trigger text (the member trigger calls
** idem_guard_member, which writes <name>_members through
** storage_member_add), the check that the shadow and guarded tables carry
** exactly the ledger's own triggers, loading a row into a LedgerRow, and
** idem_upgrade (formats 1, 2 and 3 to 4, and restoring the own and guard
** triggers).
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

/* The name of guard trigger <kind> (ledger_guard_kind) of ledger <L> on a
** table guarded under the name <base>: <base>_idem_<L>_<kind>. Written
** once here: as a printf format (base, ledger, kind), and as an SQL
** expression of SQL texts base and ledger. */
#define GUARD_TRIGGER_INFIX "_idem_"
#define GUARD_TRIGGER_FMT "%s" GUARD_TRIGGER_INFIX "%s_%s"
#define GUARD_TRIGGER_SQL(base, ledger, kind) \
  base "||'" GUARD_TRIGGER_INFIX "'||" ledger "||'_" kind "'"

/* The WHERE of the partial index of open rows (create_indexes). */
#define OPEN_WHERE "status='claimed' OR status='unknown'"

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
  ST_WRITE_LOCK,
  ST_RENEW,
  ST_RET_SCAN,
  ST_RET_DELETE,
  ST_CUR_ALL, /* cursor statements, one per xBestIndex plan (idxNum order) */
  ST_CUR_KEY,
  ST_CUR_TENANT,
  ST_CUR_TOKEN,
  ST_CUR_OPEN,
  ST_MEMBERS,
  ST_GUARD_NAMES,
  ST_GUARD_TENANT,
  ST_QUERY_ONLY,
  ST_MEMBER_ADD,
  ST_MEMBER_ADD_KEY,
  ST_TGT_HOLDER, /* format 5: <name>_targets */
  ST_TGT_ADD,
  ST_TGT_CLEAR,
  N_STMT
};
/* The statements every ledger of format 4 prepares (the targets' need
** format 5). */
#define N_STMT_V4 ST_TGT_HOLDER
/* The columns every row query selects, in RC_* order. */
#define ROW_COLUMNS_WITH(zTenantKey)                                                \
  "id,conversation,tool,args,effect,status,result,error,attempt,token,lease_until," \
  "members," zTenantKey ",updated_at,expirations"
#define ROW_COLUMNS ROW_COLUMNS_WITH("tenant,\"key\"")

static const char *const azStmtSql[N_STMT] = {
    /* ST_INSERT */
    "INSERT INTO \"%w\".\"%w_rows\"(tenant,\"key\",conversation,tool,args,effect,status,"
    "attempt,token,created_at,updated_at,lease_until)"
    " VALUES(?1,?2,?3,?4,?5,?6,'claimed',1,?7,?8,?8,?9)",
    /* ST_GET: tenant and key are the values bound (the columns have no
    ** affinity, so only a value of the same type and bytes is equal),
    ** which SQLite need not copy out of the row */
    "SELECT " ROW_COLUMNS_WITH("?1,?2")
    " FROM \"%w\".\"%w_rows\""
    " WHERE tenant=?1 AND \"key\"=?2",
    /* ST_BY_TOKEN */
    "SELECT " ROW_COLUMNS
    " FROM \"%w\".\"%w_rows\""
    " WHERE id=?1 AND token=?2",
    /* ST_RECLAIM: take-over or re-claim, compare-and-set on status+token */
    "UPDATE \"%w\".\"%w_rows\" SET status='claimed',attempt=attempt+1,token=?1,"
    "updated_at=?2,lease_until=?3,result=NULL,error=NULL,members=NULL,"
    "expirations=expirations+?4 WHERE id=?5 AND status=?6 AND token=?7",
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
    " ON t.type='trigger' AND t.name=" GUARD_TRIGGER_SQL("g.tbl", "?1", "insert") " ORDER BY g.id",
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
    "UPDATE \"%w\".\"%w_rows\" SET lease_until=CASE WHEN lease_until>?1 THEN lease_until ELSE ?1 END,updated_at=?2"
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
    /* ST_CUR_OPEN: the open rows (stored claimed or unknown: every row
    ** whose effective status is claimed or unknown), through the partial
    ** index (its WHERE repeated, so the planner uses it) */
    "SELECT " ROW_COLUMNS ",created_at FROM \"%w\".\"%w_rows\" WHERE " OPEN_WHERE,
    /* ST_MEMBERS: the members of claim ?1's attempt ?2, by guard then rowid */
    "SELECT guard, rid FROM \"%w\".\"%w_members\" WHERE claim=?1 AND attempt=?2"
    " ORDER BY guard, rid",
    /* ST_GUARD_NAMES: each guard's id and base name */
    "SELECT id, tbl FROM \"%w\".\"%w_guards\" ORDER BY id",
    /* ST_GUARD_TENANT: the tenant column of the guard installed as ?1 */
    "SELECT tenant_column FROM \"%w\".\"%w_guards\" WHERE tbl=?1",
    /* ST_QUERY_ONLY (%.0s consumes the names) */
    "PRAGMA query_only%.0s%.0s",
    /* ST_MEMBER_ADD, ST_MEMBER_ADD_KEY (a guard without a tenant column):
    ** row ?4 of guard ?3 is a member of the claimed local claim of
    ** (?1, ?2), compared with BINARY as the ledger compares */
    "INSERT INTO \"%w\".\"%w_members\"(claim,attempt,guard,rid) SELECT id,attempt,?3,?4"
    " FROM \"%w\".\"%w_rows\" WHERE tenant=?1 AND \"key\"=?2 AND status='claimed'"
    " AND effect='local' ON CONFLICT DO NOTHING",
    "INSERT INTO \"%w\".\"%w_members\"(claim,attempt,guard,rid) SELECT id,attempt,?3,?4"
    " FROM \"%w\".\"%w_rows\" WHERE ?1 IS NULL AND \"key\"=?2 AND status='claimed'"
    " AND effect='local' ON CONFLICT DO NOTHING",
    /* ST_TGT_HOLDER: the calls of tenant ?1 other than row ?3 that hold
    ** target ?2: claimed or unknown whatever their age, or succeeded and
    ** updated after ?4 (storage_target_holder picks one: no ORDER BY, whose
    ** sorter cost a claim about 20,000 instructions when nothing matched) */
    "SELECT " ROW_COLUMNS_WITH("r.tenant,r.\"key\"") " FROM \"%w\".\"%w_targets\" AS t"
    " JOIN \"%w\".\"%w_rows\" AS r ON r.id=t.claim"
    " WHERE t.tenant=?1 AND t.target=?2 AND r.id<>?3"
    " AND (r.status='claimed' OR r.status='unknown' OR (r.status='succeeded' AND r.updated_at>?4))",
    /* ST_TGT_ADD */
    "INSERT INTO \"%w\".\"%w_targets\"(claim,target,tenant,allowed_by,allowed_at,overrode)"
    " VALUES(?1,?2,?3,?4,?5,?6)",
    /* ST_TGT_CLEAR */
    "DELETE FROM \"%w\".\"%w_targets\" WHERE claim=?1",
};

/* The statement i of ledger p, prepared on first use. */
int ledger_stmt(IdemLedger *p, int i, sqlite3_stmt **ppStmt) {
  if (p->aStmt[i] == 0) {
    char *zSql = sqlite3_mprintf(azStmtSql[i], p->zDb, p->zName, p->zDb, p->zName);
    int rc;
    if (zSql == 0) return SQLITE_NOMEM;
    rc = sqlite3_prepare_v3(p->db, zSql, -1, SQLITE_PREPARE_PERSISTENT, &p->aStmt[i], 0);
    if (rc != SQLITE_OK) {
      p->aStmt[i] = 0;
      rc = ledger_lifecycle_altered(p, rc, zSql); /* a shadow table altered? */
      sqlite3_free(zSql);
      return rc;
    }
    sqlite3_free(zSql);
  }
  *ppStmt = p->aStmt[i];
  return SQLITE_OK;
}

int ledger_stmt_new(IdemLedger *p, int i, sqlite3_stmt **ppStmt) {
  char *zSql = sqlite3_mprintf(azStmtSql[i], p->zDb, p->zName, p->zDb, p->zName);
  int rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, ppStmt, 0) : SQLITE_NOMEM;
  if (rc && zSql) rc = ledger_lifecycle_altered(p, rc, zSql);
  sqlite3_free(zSql);
  return rc;
}

int storage_prepare_all(IdemLedger *p, const char *zFunc, char **pzErr) {
  sqlite3_stmt *pS;
  int i, rc = SQLITE_OK;
  int n = p->iFormat == LEDGER_FORMAT ? N_STMT : N_STMT_V4;
  if (!LEDGER_FORMAT_WORKS(p->iFormat)) return SQLITE_OK; /* an earlier format's tables differ */
  for (i = 0; rc == SQLITE_OK && i < n; i++) rc = ledger_stmt(p, i, &pS);
  if (rc == SQLITE_OK || (rc & 0xff) == SQLITE_NOMEM) return rc;
  /* the refusal, when an altered table is why (ledger_lifecycle_altered) */
  *pzErr =
      p->zBroken ? sqlite3_mprintf("%s: %s", zFunc, p->zBroken) : idem_db_error(p->db, zFunc, rc);
  return *pzErr ? rc : SQLITE_NOMEM;
}

typedef char
    assert_stmt_slots[(N_STMT <= (int)(sizeof(((IdemLedger *)0)->aStmt) / sizeof(sqlite3_stmt *)) &&
                       ST_CUR_OPEN < 32)
                          ? 1
                          : -1];

/* Finalize the prepared statements; one lent to an open cursor is left to
** the cursor, which finalizes it when it finds its slot emptied. */
void ledger_finalize_all(IdemLedger *p) {
  int i;
  for (i = 0; i < N_STMT; i++) {
    if (i >= 32 || (p->mBusy & (1u << i)) == 0) sqlite3_finalize(p->aStmt[i]);
    p->aStmt[i] = 0;
  }
  p->mBusy = 0;
  sqlite3_finalize(p->pProbe);
  p->pProbe = 0;
  p->bQueryOnlyRead = 0;
  p->bTempRead = 0;
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
  "attempt 1, no result, error or members, well-formed key parts, and no row with " \
  "that id or that key"
#define MSG_ID "idempotency: a ledger row id must be a positive integer"
#define MSG_UPDATE                                                                    \
  "idempotency: illegal change of a ledger row: the request never changes, a live "   \
  "claim is not taken over, unknown never becomes claimed, succeeded and failed are " \
  "final, an external claim is released only with detail {\"sent\": false}, and a "   \
  "local claim that wrote guarded rows is neither released nor taken over"
#define MSG_DELETE "idempotency: a claimed or unknown ledger row cannot be deleted"
#define MSG_META                                                                    \
  "idempotency: the format, identity and options of a ledger are fixed when it is " \
  "created"
#define MSG_GUARDS \
  "idempotency: a guard is added only by idem_guard and removed only by idem_unguard"
#define MSG_MEMBERS                                                                   \
  "idempotency: a member is recorded only by a guard trigger, for the claimed local " \
  "claim that wrote it, and kept unchanged while that claim is claimed or unknown"

/* The key grammar of a NEW column, for the insert trigger (CHECKs can be
** turned off by PRAGMA ignore_check_constraints; triggers cannot). */
#define NEW_GRAMMAR(c) GRAMMAR("NEW." c)

/*
** The own triggers of format 3, as SQLite stores them (no schema name), for
** idem_upgrade from format 3: what such a file holds.
** In the text, $ stands for the ledger's name quoted as an identifier
** (inside "..."), @ for it quoted as a literal (inside '...'), and # for
** the rows table's uniqueness rule ((tenant, key), or key on a
** single_tenant ledger). Together they enforce every row of the states
** table (docs/design.md, "Format 3") without the extension:
**
**   rows insert    only a fresh claim: status claimed, attempt 1, no
**                  result, error or members, no expiry counted, the key
**                  grammar on tenant, key, conversation and tool, the
**                  domains of args, effect, token and times (CHECKs alone
**                  do not hold under PRAGMA ignore_check_constraints),
**                  and no row with that id or that key. A REPLACE deletes
**                  without firing delete triggers, so the existence test
**                  is what keeps REPLACE from erasing a row.
**   rows id        after the insert: the row id is positive (an id <= 0
**                  could not be told from an automatic one before it).
**   rows update    the request columns never change, every column keeps
**                  its type, and the change is one of: an outcome (claimed
**                  -> succeeded|failed|released|unknown, unknown ->
**                  succeeded|failed|released; token, attempt, lease and
**                  expiries kept; unknown only for external claims; an
**                  external claim released only with a detail whose "sent"
**                  is false; a local claim released only when it has no
**                  members); a renewal (a live claim keeps token and
**                  attempt, its lease only grows); a take-over or
**                  re-claim (released, or claimed local whose lease has
**                  passed at the statement's clock and that has no
**                  members, while its expiries stay below the ledger's
**                  max_attempts -> claimed, attempt + 1, a new token, no
**                  result, error or members). Nothing else.
**   rows delete    never a claimed or unknown row.
**   rows forget    after a local row is deleted (purge, retention), its
**                  members go with it.
**   meta *         no insert, update or delete: fixed at creation.
**   guards *       a guard row is added only when its three triggers exist
**                  (idem_guard creates them first), never updated, and
**                  removed only once they are gone and no claimed or
**                  unknown claim has members in it.
**   members *      a member is added only for a claimed local claim of
**                  that attempt and an existing guard, and never updated;
**                  it goes with its claim's row (purge, retention), never
**                  while its claim is claimed or unknown: a row written and
**                  deleted again still was written.
**
** No extension function appears, and only innocuous built-ins (the JSON
** functions are not innocuous on SQLite 3.40, so a trigger using them
** fails under trusted_schema=OFF): a released external row's detail is
** stored with "sent":false as its first member (sent_first() in
** ledger_state.c), which the update trigger checks with GLOB. Every WHEN
** that tests a rule is wrapped in coalesce(..., 0): a NULL anywhere in the
** rule refuses the change instead of skipping the trigger.
*/
typedef struct OwnTrigger OwnTrigger;
struct OwnTrigger {
  const char *zTable;  /* the shadow table it is on: "rows", "meta", ... */
  const char *zSuffix; /* its name is <ledger>_<zTable>_<zSuffix> */
  const char *zSql;    /* the stored text, with $ @ # as above */
};
/* The triggers formats 3 and 4 share: a deleted local row's members go
** with it, and the options are fixed. */
#define META_REFUSE(kind, when)                           \
  {                                                       \
    "meta", kind,                                         \
        "CREATE TRIGGER \"$_meta_" kind "\" BEFORE " when \
        " ON \"$_meta\" BEGIN SELECT "                    \
        "RAISE(ABORT,'" MSG_META "'); END"                \
  }
#define FORGET_AND_META                                                                     \
  {"rows", "forget",                                                                        \
   "CREATE TRIGGER \"$_rows_forget\" AFTER DELETE ON \"$_rows\" WHEN OLD.effect IS 'local'" \
   " BEGIN DELETE FROM \"$_members\" WHERE claim=OLD.id; END"},                             \
      META_REFUSE("insert", "INSERT"), META_REFUSE("update", "UPDATE"),                     \
      META_REFUSE("delete", "DELETE"),
#define NO_MEMBERS \
  " NOT EXISTS(SELECT 1 FROM \"$_members\" WHERE claim=OLD.id AND attempt=OLD.attempt)"
static const OwnTrigger aOwnV3[] = {
    {"rows", "insert",
     "CREATE TRIGGER \"$_rows_insert\" BEFORE INSERT ON \"$_rows\" WHEN NOT coalesce("
     "NEW.status IS 'claimed' AND NEW.attempt IS 1 AND NEW.result IS NULL AND NEW.error IS NULL"
     " AND NEW.members IS NULL AND NEW.expirations IS 0"
     " AND " NEW_GRAMMAR("tenant") " AND " NEW_GRAMMAR("\"key\"") " AND " NEW_GRAMMAR(
         "conversation") " AND " NEW_GRAMMAR("tool") " AND typeof(NEW.args)='text' AND "
                                                     "length(NEW.args)>=1"
                                                     " AND (NEW.effect IS 'local' OR NEW.effect IS "
                                                     "'external')"
                                                     " AND typeof(NEW.token)='integer' AND "
                                                     "typeof(NEW.created_at)='integer'"
                                                     " AND typeof(NEW.updated_at)='integer' AND "
                                                     "typeof(NEW.lease_until)='integer',0)"
                                                     " OR (NEW.id>0 AND EXISTS(SELECT 1 FROM "
                                                     "\"$_rows\" WHERE id=NEW.id))"
                                                     " OR EXISTS(SELECT 1 FROM \"$_rows\" WHERE #)"
                                                     " BEGIN SELECT RAISE(ABORT,'" MSG_INSERT
                                                     "'); END"},
    {"rows", "id",
     "CREATE TRIGGER \"$_rows_id\" AFTER INSERT ON \"$_rows\" WHEN NOT coalesce(NEW.id>0,0)"
     " BEGIN SELECT RAISE(ABORT,'" MSG_ID "'); END"},
    {"rows", "update",
     "CREATE TRIGGER \"$_rows_update\" BEFORE UPDATE ON \"$_rows\" WHEN NOT coalesce(("
     "NEW.id IS OLD.id AND NEW.tenant IS OLD.tenant AND NEW.\"key\" IS OLD.\"key\""
     " AND NEW.conversation IS OLD.conversation AND NEW.tool IS OLD.tool"
     " AND NEW.args IS OLD.args AND NEW.effect IS OLD.effect"
     " AND NEW.created_at IS OLD.created_at"
     " AND typeof(NEW.attempt)='integer' AND typeof(NEW.token)='integer'"
     " AND typeof(NEW.updated_at)='integer' AND typeof(NEW.lease_until)='integer'"
     " AND typeof(NEW.expirations)='integer'"
     " AND (NEW.result IS NULL OR typeof(NEW.result)='text')"
     " AND (NEW.error IS NULL OR typeof(NEW.error)='text')"
     " AND (NEW.members IS NULL OR typeof(NEW.members)='text') AND ("
     "((OLD.status IS 'claimed' AND (NEW.status IS 'succeeded' OR NEW.status IS 'failed'"
     " OR NEW.status IS 'released' OR NEW.status IS 'unknown')"
     " OR OLD.status IS 'unknown' AND (NEW.status IS 'succeeded' OR NEW.status IS 'failed'"
     " OR NEW.status IS 'released'))"
     " AND NEW.token IS OLD.token AND NEW.attempt IS OLD.attempt"
     " AND NEW.lease_until IS OLD.lease_until AND NEW.expirations IS OLD.expirations"
     " AND (NEW.status IS NOT 'unknown' OR OLD.effect IS 'external')"
     " AND (NEW.status IS NOT 'released' OR OLD.effect IS 'local' AND" NO_MEMBERS
     " OR OLD.effect IS 'external' AND (NEW.error IS '{\"sent\":false}'"
     " OR NEW.error IS NOT NULL AND NEW.error GLOB '{\"sent\":false,*}')))"
     " OR (OLD.status IS 'claimed' AND NEW.status IS 'claimed' AND NEW.token IS OLD.token"
     " AND NEW.attempt IS OLD.attempt AND NEW.expirations IS OLD.expirations"
     " AND NEW.result IS OLD.result AND NEW.error IS OLD.error AND NEW.members IS OLD.members"
     " AND OLD.lease_until>" SQL_NOW " AND NEW.lease_until>=OLD.lease_until)"
     " OR ((OLD.status IS 'released' OR OLD.status IS 'claimed' AND OLD.effect IS 'local'"
     " AND OLD.lease_until<=" SQL_NOW " AND" NO_MEMBERS
     " AND NEW.expirations<(SELECT v FROM \"$_meta\" WHERE k='max_attempts'))"
     " AND NEW.status IS 'claimed' AND NEW.attempt IS OLD.attempt+1 AND NEW.token IS NOT OLD.token"
     " AND NEW.result IS NULL AND NEW.error IS NULL AND NEW.members IS NULL"
     " AND NEW.expirations IS OLD.expirations+(OLD.status IS 'claimed')))),0)"
     " BEGIN SELECT RAISE(ABORT,'" MSG_UPDATE "'); END"},
    {"rows", "delete",
     "CREATE TRIGGER \"$_rows_delete\" BEFORE DELETE ON \"$_rows\""
     " WHEN OLD.status IS 'claimed' OR OLD.status IS 'unknown'"
     " BEGIN SELECT RAISE(ABORT,'" MSG_DELETE "'); END"},
    FORGET_AND_META{
        "guards", "insert",
        "CREATE TRIGGER \"$_guards_insert\" BEFORE INSERT ON \"$_guards\" WHEN NOT coalesce(("
        "SELECT count(*) FROM sqlite_schema WHERE type='trigger' AND "
        "(name=NEW.tbl||'" GUARD_TRIGGER_INFIX "@_insert'"
        " OR name=NEW.tbl||'" GUARD_TRIGGER_INFIX "@_member' OR name=NEW.tbl||'" GUARD_TRIGGER_INFIX
        "@_update'))=3,0)"
        " OR EXISTS(SELECT 1 FROM \"$_guards\" WHERE id=NEW.id OR tbl=NEW.tbl)"
        " BEGIN SELECT RAISE(ABORT,'" MSG_GUARDS "'); END"},
    {"guards", "update",
     "CREATE TRIGGER \"$_guards_update\" BEFORE UPDATE ON \"$_guards\""
     " BEGIN SELECT RAISE(ABORT,'" MSG_GUARDS "'); END"},
    {"guards", "delete",
     "CREATE TRIGGER \"$_guards_delete\" BEFORE DELETE ON \"$_guards\" WHEN coalesce("
     "EXISTS(SELECT 1 FROM sqlite_schema WHERE type='trigger' AND "
     "(name=OLD.tbl||'" GUARD_TRIGGER_INFIX "@_insert'"
     " OR name=OLD.tbl||'" GUARD_TRIGGER_INFIX "@_member' OR name=OLD.tbl||'" GUARD_TRIGGER_INFIX
     "@_update'))"
     " OR EXISTS(SELECT 1 FROM \"$_members\" AS m JOIN \"$_rows\" AS r ON r.id=m.claim"
     " WHERE m.guard=OLD.id AND (r.status IS 'claimed' OR r.status IS 'unknown')),1)"
     " BEGIN SELECT RAISE(ABORT,'" MSG_GUARDS "'); END"},
    {"members", "insert",
     "CREATE TRIGGER \"$_members_insert\" BEFORE INSERT ON \"$_members\" WHEN NOT coalesce("
     "EXISTS(SELECT 1 FROM \"$_rows\" WHERE id=NEW.claim AND attempt=NEW.attempt"
     " AND status IS 'claimed' AND effect IS 'local')"
     " AND EXISTS(SELECT 1 FROM \"$_guards\" WHERE id=NEW.guard) AND typeof(NEW.rid)='integer',0)"
     " BEGIN SELECT RAISE(ABORT,'" MSG_MEMBERS "'); END"},
    {"members", "update",
     "CREATE TRIGGER \"$_members_update\" BEFORE UPDATE ON \"$_members\""
     " BEGIN SELECT RAISE(ABORT,'" MSG_MEMBERS "'); END"},
    {"members", "delete",
     "CREATE TRIGGER \"$_members_delete\" BEFORE DELETE ON \"$_members\" WHEN coalesce("
     "EXISTS(SELECT 1 FROM \"$_rows\" WHERE id=OLD.claim AND (status IS 'claimed'"
     " OR status IS 'unknown')),1)"
     " BEGIN SELECT RAISE(ABORT,'" MSG_MEMBERS "'); END"},
};

/*
** The own triggers of format 4 ("One writer", docs/design.md): every
** insert, update and delete of a shadow table that is not one of the
** extension's own statements is refused. OWN_WRITE is true only while the
** storage layer steps its own statement on this connection (own_begin);
** without the extension the trigger fails ("no such function"), so plain
** SQL writes nothing in either case. The state machine is not repeated
** here: it is ledger_state.c's. The options in <name>_meta are refused to
** every writer (fixed at creation; idem_upgrade drops and recreates the
** triggers). The forget triggers are the cascades: a deleted local row's
** members go with it (purge, retention), inside the extension's delete,
** and so do a deleted row's targets (format 5).
**
** Format 5 adds the targets table and its four triggers, last in the list:
** the first N_OWN_V4 are format 4's, unchanged.
*/
#define OWN_WRITE "idem_own_write()"
#define MSG_ONE_WRITER(what, api)                                             \
  "idempotency: " what " of ledger @ are written only by the extension (" api \
  "); plain "                                                                 \
  "SQL may read them"
#define MSG_ROWS                                                       \
  MSG_ONE_WRITER("the rows",                                           \
                 "idem_claim, idem_settle, idem_resolve, idem_purge, " \
                 "or INSERT INTO and DELETE FROM the ledger table")
#define MSG_GUARDS4 MSG_ONE_WRITER("the guards", "idem_guard and idem_unguard")
#define MSG_MEMBERS4 MSG_ONE_WRITER("the members", "the triggers idem_guard installs")
#define MSG_TARGETS MSG_ONE_WRITER("the targets", "idem_claim")
#define REFUSE(tbl, kind, when, msg)                                         \
  {                                                                          \
    tbl, kind,                                                               \
        "CREATE TRIGGER \"$_" tbl "_" kind "\" BEFORE " when " ON \"$_" tbl  \
        "\" WHEN NOT " OWN_WRITE " BEGIN SELECT RAISE(ABORT,'" msg "'); END" \
  }
static const OwnTrigger aOwn[] = {
    REFUSE("rows", "insert", "INSERT", MSG_ROWS),
    REFUSE("rows", "update", "UPDATE", MSG_ROWS),
    REFUSE("rows", "delete", "DELETE", MSG_ROWS),
    FORGET_AND_META REFUSE("guards", "insert", "INSERT", MSG_GUARDS4),
    REFUSE("guards", "update", "UPDATE", MSG_GUARDS4),
    REFUSE("guards", "delete", "DELETE", MSG_GUARDS4),
    REFUSE("members", "insert", "INSERT", MSG_MEMBERS4),
    REFUSE("members", "update", "UPDATE", MSG_MEMBERS4),
    REFUSE("members", "delete", "DELETE", MSG_MEMBERS4),
    /* format 5 */
    {"rows", "targets",
     "CREATE TRIGGER \"$_rows_targets\" AFTER DELETE ON \"$_rows\""
     " BEGIN DELETE FROM \"$_targets\" WHERE claim=OLD.id; END"},
    REFUSE("targets", "insert", "INSERT", MSG_TARGETS),
    REFUSE("targets", "update", "UPDATE", MSG_TARGETS),
    REFUSE("targets", "delete", "DELETE", MSG_TARGETS),
};
#define N_OWN ((int)(sizeof(aOwn) / sizeof(aOwn[0])))
#define N_OWN_V4 (N_OWN - 4)

/* The triggers of format 2 and format 1, for idem_upgrade: what such a
** file holds ($ and # as above). */
static const OwnTrigger aOwnV2[] = {
    {"rows", "insert",
     "CREATE TRIGGER \"$_rows_insert\" BEFORE INSERT ON \"$_rows\" WHEN NOT coalesce("
     "NEW.status IS 'claimed' AND NEW.attempt IS 1 AND NEW.result IS NULL AND NEW.error IS NULL"
     " AND NEW.members IS NULL AND NEW.expirations IS 0,0)"
     " OR (NEW.id>0 AND EXISTS(SELECT 1 FROM \"$_rows\" WHERE id=NEW.id))"
     " OR EXISTS(SELECT 1 FROM \"$_rows\" WHERE #)"
     " BEGIN SELECT RAISE(ABORT,'idempotency: only a fresh claim may be inserted into a ledger: "
     "status claimed, attempt 1, no result, error or members, and no row with that id or that "
     "key'); END"},
    {"rows", "update",
     "CREATE TRIGGER \"$_rows_update\" BEFORE UPDATE ON \"$_rows\" WHEN NOT coalesce(("
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
     " AND OLD.lease_until>" SQL_NOW " AND NEW.lease_until>=OLD.lease_until)"
     " OR ((OLD.status IS 'released' OR OLD.status IS 'claimed' AND OLD.effect IS 'local'"
     " AND OLD.lease_until<=" SQL_NOW ")"
     " AND NEW.status IS 'claimed' AND NEW.attempt IS OLD.attempt+1 AND NEW.token IS NOT OLD.token"
     " AND NEW.result IS NULL AND NEW.error IS NULL AND NEW.members IS NULL"
     " AND NEW.expirations IS OLD.expirations+(OLD.status IS 'claimed')))),0)"
     " BEGIN SELECT RAISE(ABORT,'idempotency: illegal change of a ledger row: the request never "
     "changes, a live claim is not taken over, unknown never becomes claimed, succeeded and "
     "failed are final, and an external claim is released only with detail {\"sent\": false}'); "
     "END"},
    {"rows", "delete",
     "CREATE TRIGGER \"$_rows_delete\" BEFORE DELETE ON \"$_rows\""
     " WHEN OLD.status IS 'claimed' OR OLD.status IS 'unknown'"
     " BEGIN SELECT RAISE(ABORT,'" MSG_DELETE "'); END"},
};
static const OwnTrigger aOwnV1[] = {
    {"rows", "update",
     "CREATE TRIGGER \"$_rows_update\" BEFORE UPDATE ON \"$_rows\" WHEN NOT ("
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
     " BEGIN SELECT RAISE(ABORT,'idempotency: illegal change of a ledger row'); END"},
    {"rows", "delete",
     "CREATE TRIGGER \"$_rows_delete\" BEFORE DELETE ON \"$_rows\""
     " WHEN OLD.status='claimed' OR OLD.status='unknown'"
     " BEGIN SELECT RAISE(ABORT,'idempotency: a claimed or unknown ledger row cannot be "
     "deleted'); END"},
};

#define N_OWN_V3 ((int)(sizeof(aOwnV3) / sizeof(aOwnV3[0])))
/* the longest list (the scan's arrays), at most 32 (TriggerScan.mOwn) */
#define N_OWN_MAX (N_OWN > N_OWN_V3 ? N_OWN : N_OWN_V3)
typedef char assert_own_lists[N_OWN_MAX <= 32 ? 1 : -1];

int ledger_format_tables(int iFormat) { return iFormat >= 5 ? LEDGER_N_TABLE : LEDGER_N_TABLE - 1; }

/* The own triggers of format iFormat, and their count. */
static const OwnTrigger *own_triggers(int iFormat, int *pn) {
  if (iFormat == 1) {
    *pn = (int)(sizeof(aOwnV1) / sizeof(aOwnV1[0]));
    return aOwnV1;
  }
  if (iFormat == 2) {
    *pn = (int)(sizeof(aOwnV2) / sizeof(aOwnV2[0]));
    return aOwnV2;
  }
  if (iFormat == 3) {
    *pn = N_OWN_V3;
    return aOwnV3;
  }
  *pn = iFormat == 4 ? N_OWN_V4 : N_OWN;
  return aOwn;
}

/* The stored SQL of own trigger t of ledger zName: $ @ # filled in. */
static char *trigger_sql(const OwnTrigger *t, const char *zName, int bSingle) {
  sqlite3_str *s = sqlite3_str_new(0);
  const char *z;
  for (z = t->zSql; *z; z++) {
    if (*z == '$') sqlite3_str_appendf(s, "%w", zName);
    else if (*z == '@') sqlite3_str_appendf(s, "%q", zName);
    else if (*z == '#')
      sqlite3_str_appendall(
          s, bSingle ? "\"key\"=NEW.\"key\"" : "tenant=NEW.tenant AND \"key\"=NEW.\"key\"");
    else sqlite3_str_appendchar(s, 1, *z);
  }
  return sqlite3_str_finish(s);
}

/* The name of own trigger t of ledger zName (sqlite3_malloc). */
static char *trigger_name(const OwnTrigger *t, const char *zName) {
  return sqlite3_mprintf("%s_%s_%s", zName, t->zTable, t->zSuffix);
}

/* (Comparisons are spelled as OR chains, not IN lists: SQLite builds an
** ephemeral table for an IN list each time the statement runs, which cost
** about 3,000 instructions per claim.) */

/* Run zSql (sqlite3_mprintf'd, freed here; NULL means out of memory). */
static int exec_free(sqlite3 *db, char *zSql, char **pzErr) {
  int rc;
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_exec(db, zSql, 0, 0, pzErr);
  sqlite3_free(zSql);
  return rc;
}

/* Create own trigger i (format 4) of ledger zName in schema zDb: its stored
** text with the schema put after "CREATE TRIGGER ". */
static int create_trigger(sqlite3 *db, const char *zDb, const char *zName, int bSingle, int i,
                          char **pzErr) {
  char *zTrig = trigger_sql(&aOwn[i], zName, bSingle);
  int rc;
  if (zTrig == 0) return SQLITE_NOMEM;
  rc = exec_free(db, sqlite3_mprintf("CREATE TRIGGER \"%w\".%s", zDb, zTrig + 15), pzErr);
  sqlite3_free(zTrig);
  return rc;
}

/* Create every own trigger of format iFormat (4 or 5) whose bit is clear
** in mSkip. */
static int create_triggers(sqlite3 *db, const char *zDb, const char *zName, int bSingle,
                           int iFormat, unsigned mSkip, char **pzErr) {
  int rc = SQLITE_OK, i, n = iFormat == 4 ? N_OWN_V4 : N_OWN;
  for (i = 0; rc == SQLITE_OK && i < n; i++) {
    if ((mSkip & (1u << i)) == 0) rc = create_trigger(db, zDb, zName, bSingle, i, pzErr);
  }
  return rc;
}

/* Drop the own triggers of format iFormat of ledger zName in zDb. */
static int drop_triggers(sqlite3 *db, const char *zDb, const char *zName, int iFormat) {
  int n, i, rc = SQLITE_OK;
  const OwnTrigger *a = own_triggers(iFormat, &n);
  for (i = 0; rc == SQLITE_OK && i < n; i++) {
    char *zTrig = trigger_name(&a[i], zName);
    rc = zTrig
             ? exec_free(db, sqlite3_mprintf("DROP TRIGGER IF EXISTS \"%w\".\"%w\"", zDb, zTrig), 0)
             : SQLITE_NOMEM;
    sqlite3_free(zTrig);
  }
  return rc;
}

/*
** CREATE TABLE of each table of a format-4 ledger (LEDGER_TABLE_* order),
** with %s for the schema's prefix and %w for the table's name. The rows
** table is the extension's alone, so its CHECKs keep only what makes the
** file self-describing to a reader (NOT NULL, the effect and status
** domains); the key grammar, the types and the id's sign are the
** extension's, once, in C (format 3 repeated them here). idem_health
** compares each table's text with these.
*/
static const char *const azTableSql[LEDGER_N_TABLE] = {
    "CREATE TABLE %s\"%w\"("
    "id INTEGER PRIMARY KEY,"
    "tenant NOT NULL,"
    "\"key\" NOT NULL,"
    "conversation NOT NULL,"
    "tool NOT NULL,"
    "args NOT NULL,"
    "effect NOT NULL CHECK(effect='local' OR effect='external'),"
    "status NOT NULL CHECK(status='claimed' OR status='succeeded' OR status='failed'"
    " OR status='released' OR status='unknown'),"
    "result,"
    "error,"
    "attempt INTEGER NOT NULL,"
    "token INTEGER NOT NULL,"
    "created_at INTEGER NOT NULL,"
    "updated_at INTEGER NOT NULL,"
    "lease_until INTEGER NOT NULL,"
    "members,"
    "expirations INTEGER NOT NULL DEFAULT 0,"
    "UNIQUE(tenant,\"key\"))",
    "CREATE TABLE %s\"%w\"(k TEXT PRIMARY KEY NOT NULL, v NOT NULL) WITHOUT ROWID",
    "CREATE TABLE %s\"%w\"(id INTEGER PRIMARY KEY, tbl TEXT NOT NULL UNIQUE,"
    " key_column TEXT NOT NULL, tenant_column TEXT, token_column TEXT)",
    "CREATE TABLE %s\"%w\"(claim INTEGER NOT NULL, attempt INTEGER NOT NULL,"
    " guard INTEGER NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY(claim,attempt,guard,rid))"
    " WITHOUT ROWID",
    /* format 5: what each claim touches (docs/ledger.md, "Targets") */
    "CREATE TABLE %s\"%w\"(claim INTEGER NOT NULL, target TEXT NOT NULL, tenant NOT NULL,"
    " allowed_by TEXT, allowed_at INTEGER, overrode TEXT, PRIMARY KEY(claim,target)) WITHOUT ROWID",
};

/* CREATE TABLE of table iTable of a ledger, named zTable, in schema zDb
** (NULL: unqualified, as the schema keeps it). sqlite3_malloc; NULL on OOM. */
static char *table_sql(int iTable, const char *zDb, const char *zTable) {
  char *zPre, *z;
  if (zDb == 0) return sqlite3_mprintf(azTableSql[iTable], "", zTable);
  zPre = sqlite3_mprintf("\"%w\".", zDb);
  z = zPre ? sqlite3_mprintf(azTableSql[iTable], zPre, zTable) : 0;
  sqlite3_free(zPre);
  return z;
}

/*
** The indexes of a rows table: the single_tenant key index (a key
** is unique across the ledger) and the partial index of open rows, which
** answers WHERE status='claimed' / 'unknown' on a ledger of any size (its
** WHERE text is repeated by the statement that uses it, ST_CUR_OPEN).
** They are named after the ledger's identity, not its name: an index
** keeps its name when its table is renamed, and cannot be dropped while
** ALTER TABLE runs (xRename), so a name-based one would collide with a
** later ledger of the old name.
*/
static int create_indexes(sqlite3 *db, const char *zDb, const char *zName, const char *zId,
                          int bSingle, char **pzErr) {
  int rc = SQLITE_OK;
  if (bSingle) {
    rc = exec_free(
        db,
        sqlite3_mprintf("CREATE UNIQUE INDEX \"%w\".\"idem_%w_key\" ON \"%w_rows\"(\"key\")", zDb,
                        zId, zName),
        pzErr);
  }
  if (rc == SQLITE_OK) {
    rc = exec_free(db,
                   sqlite3_mprintf("CREATE INDEX \"%w\".\"idem_%w_open\" ON \"%w_rows\"(status,"
                                   "lease_until) WHERE " OPEN_WHERE,
                                   zDb, zId, zName),
                   pzErr);
  }
  return rc;
}

/* The members table: one row per guarded row written under a local claim. */
static int create_members(sqlite3 *db, const char *zDb, const char *zName, char **pzErr) {
  char *zTable = sqlite3_mprintf("%s_members", zName);
  int rc =
      zTable ? exec_free(db, table_sql(LEDGER_TABLE_MEMBERS, zDb, zTable), pzErr) : SQLITE_NOMEM;
  sqlite3_free(zTable);
  return rc;
}

/* The targets table (format 5) and its index by (tenant, target), named
** after the ledger's identity as the rows table's indexes are. */
static int create_targets(sqlite3 *db, const char *zDb, const char *zName, const char *zId,
                          char **pzErr) {
  char *zTable = sqlite3_mprintf("%s_targets", zName);
  int rc =
      zTable ? exec_free(db, table_sql(LEDGER_TABLE_TARGETS, zDb, zTable), pzErr) : SQLITE_NOMEM;
  sqlite3_free(zTable);
  if (rc == SQLITE_OK) {
    rc = exec_free(db,
                   sqlite3_mprintf("CREATE INDEX \"%w\".\"idem_%w_targets\" ON \"%w_targets\"("
                                   "tenant,target)",
                                   zDb, zId, zName),
                   pzErr);
  }
  return rc;
}

/* Create the shadow tables, meta rows, indexes and triggers of ledger zName. */
int ledger_create_schema(sqlite3 *db, const char *zDb, const char *zName, const sqlite3_int64 *aVal,
                         const char *zId, char **pzErr) {
  sqlite3_str *s;
  int rc = SQLITE_OK, i, j;
  for (i = LEDGER_TABLE_ROWS; rc == SQLITE_OK && i <= LEDGER_TABLE_GUARDS; i++) {
    char *zTable = sqlite3_mprintf("%s_%s", zName, ledger_shadow_suffix[i]);
    rc = zTable ? exec_free(db, table_sql(i, zDb, zTable), pzErr) : SQLITE_NOMEM;
    sqlite3_free(zTable);
  }
  if (rc) return rc;
  s = sqlite3_str_new(db);
  sqlite3_str_appendf(s, "INSERT INTO \"%w\".\"%w_meta\"(k,v) VALUES('format',%d),('id',%Q)", zDb,
                      zName, LEDGER_FORMAT, zId);
  for (j = 0; j < IDEM_N_OPT; j++) {
    sqlite3_str_appendf(s, ",(%Q,%lld)", ledger_options[j].zName, aVal[j]);
  }
  rc = exec_free(db, sqlite3_str_finish(s), pzErr);
  if (rc == SQLITE_OK) rc = create_members(db, zDb, zName, pzErr);
  if (rc == SQLITE_OK) rc = create_targets(db, zDb, zName, zId, pzErr);
  if (rc == SQLITE_OK) rc = create_indexes(db, zDb, zName, zId, (int)aVal[IDEM_OPT_SINGLE], pzErr);
  if (rc == SQLITE_OK) {
    rc = create_triggers(db, zDb, zName, (int)aVal[IDEM_OPT_SINGLE], LEDGER_FORMAT, 0, pzErr);
  }
  return rc;
}

static int guards_rebuild(sqlite3 *db, const char *zDb, const char *zOld, const char *zNew,
                          const char *zId, int *pn);

int ledger_rename_schema(IdemLedger *p, const char *zNew) {
  int rc, n = 0;
  int bSingle = (int)p->aOpt[IDEM_OPT_SINGLE];
  /* the own triggers name the ledger (in their names and in literals):
  ** dropped first, made again under the new name */
  /* (an earlier format's file is renamed as before format 5: format 4's
  ** triggers dropped and made) */
  int iFormat = p->iFormat >= 5 ? 5 : 4;
  rc = drop_triggers(p->db, p->zDb, p->zName, iFormat);
  if (rc == SQLITE_OK && iFormat >= 5) {
    rc = exec_free(p->db,
                   sqlite3_mprintf("ALTER TABLE \"%w\".\"%w_targets\" RENAME TO \"%w_targets\"",
                                   p->zDb, p->zName, zNew),
                   0);
  }
  if (rc == SQLITE_OK) {
    rc = exec_free(p->db,
                   sqlite3_mprintf("ALTER TABLE \"%w\".\"%w_rows\" RENAME TO \"%w_rows\";"
                                   "ALTER TABLE \"%w\".\"%w_meta\" RENAME TO \"%w_meta\";"
                                   "ALTER TABLE \"%w\".\"%w_guards\" RENAME TO \"%w_guards\";"
                                   "ALTER TABLE \"%w\".\"%w_members\" RENAME TO \"%w_members\";",
                                   p->zDb, p->zName, zNew, p->zDb, p->zName, zNew, p->zDb, p->zName,
                                   zNew, p->zDb, p->zName, zNew),
                   0);
  }
  if (rc == SQLITE_OK) rc = create_triggers(p->db, p->zDb, zNew, bSingle, iFormat, 0, 0);
  /* the guards' triggers name the ledger too */
  if (rc == SQLITE_OK) rc = guards_rebuild(p->db, p->zDb, p->zName, zNew, p->zId, &n);
  return rc;
}

int ledger_drop_schema(IdemLedger *p) {
  return exec_free(
      p->db,
      sqlite3_mprintf("DROP TABLE IF EXISTS \"%w\".\"%w_rows\";"
                      "DROP TABLE IF EXISTS \"%w\".\"%w_meta\";"
                      "DROP TABLE IF EXISTS \"%w\".\"%w_guards\";"
                      "DROP TABLE IF EXISTS \"%w\".\"%w_members\";"
                      "DROP TABLE IF EXISTS \"%w\".\"%w_targets\";",
                      p->zDb, p->zName, p->zDb, p->zName, p->zDb, p->zName, p->zDb, p->zName,
                      p->zDb, p->zName),
      0);
}

/* ------------------------------------------------------------------ */
/* Own and guard triggers                                              */
/* ------------------------------------------------------------------ */

/*
** What the triggers on the ledger's tables and its guarded tables say.
** triggers_scan() fills it: mOwn gets a bit per own trigger of the format
** found intact; zWhy (sqlite3_malloc) the first problem as a sentence
** without the ledger's name, or NULL; zAltered the name of an own trigger
** found altered (idem_upgrade drops it); bRepair that every problem found
** is one idem_upgrade repairs (a missing or altered own or guard trigger);
** bGuard that the problem is a guard's.
*/
typedef struct TriggerScan TriggerScan;
struct TriggerScan {
  unsigned mOwn;
  char *zWhy;
  int bRepair;
  int bGuard; /* zWhy is about a guard's triggers */
};

/* Record problem zWhy (sqlite3_mprintf'd) unless one is recorded. */
static int scan_note(TriggerScan *t, char *zWhy, int bRepair) {
  if (zWhy == 0) return SQLITE_NOMEM;
  if (t->zWhy) {
    sqlite3_free(zWhy);
    return SQLITE_OK;
  }
  t->zWhy = zWhy;
  t->bRepair = bRepair;
  return SQLITE_OK;
}

/* The guard trigger names end in _idem_<ledger>_<kind>; the kind's index
** (ledger_guard_kind) when zTrig is one of p's, else -1; *pnBase
** the length of the base before it. */
static int guard_trigger_kind(const IdemLedger *p, const char *zTrig, size_t *pnBase) {
  size_t n = strlen(zTrig), nL = strlen(p->zName);
  int k;
  for (k = 0; k < IDEM_GUARD_N_TRIGGER; k++) {
    const char *zKind = ledger_guard_kind[k];
    size_t nI = sizeof(GUARD_TRIGGER_INFIX) - 1;
    size_t nK = strlen(zKind), nTail = nI + nL + 1 + nK; /* _idem_ L _ kind */
    if (n <= nTail) continue;
    if (memcmp(zTrig + n - nTail, GUARD_TRIGGER_INFIX, nI) ||
        memcmp(zTrig + n - nTail + nI, p->zName, nL) || zTrig[n - nK - 1] != '_' ||
        strcmp(zTrig + n - nK, zKind)) {
      continue;
    }
    *pnBase = n - nTail;
    return k;
  }
  return -1;
}

/*
** The guards' triggers: each guard row of a table that still exists has
** its three triggers, as idem_guard writes them; each trigger named as a
** guard trigger of this ledger has its guard row.
*/
static int scan_guards(IdemLedger *p, TriggerScan *t) {
  sqlite3_stmt *pG = 0, *pT = 0;
  int rc;
  char *zSql = sqlite3_mprintf(
      "SELECT id, tbl, key_column, tenant_column, token_column FROM \"%w\".\"%w_guards\"", p->zDb,
      p->zName);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pG, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  if (rc) return rc;
  zSql = sqlite3_mprintf(
      "SELECT name, tbl_name, sql FROM \"%w\".sqlite_schema WHERE type='trigger' AND name=?1",
      p->zDb);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pT, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  while (rc == SQLITE_OK && sqlite3_step(pG) == SQLITE_ROW) {
    sqlite3_int64 gid = sqlite3_column_int64(pG, 0);
    const char *zBase = (const char *)sqlite3_column_text(pG, 1);
    char *azSql[IDEM_GUARD_N_TRIGGER] = {0}, *zTable = 0;
    int k, aHave[IDEM_GUARD_N_TRIGGER] = {0}, nHave = 0;
    if (zBase == 0) {
      rc = SQLITE_CORRUPT_VTAB;
      break;
    }
    for (k = 0; rc == SQLITE_OK && k < IDEM_GUARD_N_TRIGGER; k++) {
      char *zName = sqlite3_mprintf(GUARD_TRIGGER_FMT, zBase, p->zName, ledger_guard_kind[k]);
      if (zName == 0) {
        rc = SQLITE_NOMEM;
        break;
      }
      sqlite3_bind_text(pT, 1, zName, -1, sqlite3_free);
      if (sqlite3_step(pT) == SQLITE_ROW) {
        const char *zS = (const char *)sqlite3_column_text(pT, 2);
        aHave[k] = 1;
        nHave++;
        azSql[k] = sqlite3_mprintf("%s", zS ? zS : "");
        if (zTable == 0) zTable = sqlite3_mprintf("%s", sqlite3_column_text(pT, 1));
        if (azSql[k] == 0 || zTable == 0) rc = SQLITE_NOMEM;
      }
      if (rc == SQLITE_OK) rc = sqlite3_reset(pT);
    }
    if (rc == SQLITE_OK && nHave == 0) {
      /* no trigger: the table was dropped (its triggers with it), unless a
      ** table of the guard's name is still there */
      if (sqlite3_table_column_metadata(p->db, p->zDb, zBase, 0, 0, 0, 0, 0, 0) == SQLITE_OK) {
        rc = scan_note(t, sqlite3_mprintf("has lost the guard triggers of table \"%s\"", zBase), 1);
      }
    }
    for (k = 0; rc == SQLITE_OK && nHave > 0 && k < IDEM_GUARD_N_TRIGGER; k++) {
      char *zExpect;
      if (!aHave[k]) {
        rc = scan_note(
            t,
            sqlite3_mprintf("is missing its guard trigger \"" GUARD_TRIGGER_FMT "\" on table "
                            "\"%s\"",
                            zBase, p->zName, ledger_guard_kind[k], zTable),
            1);
        continue;
      }
      zExpect = ledger_guard_trigger_sql(
          k, 0, p->zName, p->zId, gid, zBase, zTable, (const char *)sqlite3_column_text(pG, 2),
          (const char *)sqlite3_column_text(pG, 3), (const char *)sqlite3_column_text(pG, 4));
      if (zExpect == 0) {
        rc = SQLITE_NOMEM;
      } else if (strcmp(zExpect, azSql[k]) != 0) {
        rc = scan_note(t,
                       sqlite3_mprintf("has its guard trigger \"" GUARD_TRIGGER_FMT "\" altered",
                                       zBase, p->zName, ledger_guard_kind[k]),
                       1);
      }
      sqlite3_free(zExpect);
    }
    for (k = 0; k < IDEM_GUARD_N_TRIGGER; k++) sqlite3_free(azSql[k]);
    sqlite3_free(zTable);
  }
  if (rc == SQLITE_OK) rc = sqlite3_reset(pG);
  sqlite3_finalize(pG);
  sqlite3_finalize(pT);
  pG = pT = 0;
  if (rc) return rc;
  /* a trigger named as one of this ledger's guard triggers needs its row
  ** (every trigger read, the names matched in C: no SQL function an
  ** application may register over is called, GLOB included) */
  zSql = sqlite3_mprintf("SELECT t.name FROM \"%w\".sqlite_schema AS t WHERE t.type='trigger'",
                         p->zDb);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pT, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  if (rc) return rc;
  zSql = sqlite3_mprintf("SELECT 1 FROM \"%w\".\"%w_guards\" WHERE tbl=?1", p->zDb, p->zName);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pG, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  while (rc == SQLITE_OK && t->zWhy == 0 && sqlite3_step(pT) == SQLITE_ROW) {
    const char *zTrig = (const char *)sqlite3_column_text(pT, 0);
    size_t nBase = 0;
    if (zTrig == 0 || guard_trigger_kind(p, zTrig, &nBase) < 0) continue;
    sqlite3_bind_text(pG, 1, zTrig, (int)nBase, SQLITE_TRANSIENT);
    if (sqlite3_step(pG) != SQLITE_ROW) {
      rc = scan_note(t,
                     sqlite3_mprintf("has a guard trigger \"%s\" that no guard of %s_guards "
                                     "lists",
                                     zTrig, p->zName),
                     0);
    }
    if (rc == SQLITE_OK) rc = sqlite3_reset(pG);
  }
  if (rc == SQLITE_OK) rc = sqlite3_reset(pT);
  sqlite3_finalize(pG);
  sqlite3_finalize(pT);
  return rc;
}

/*
** Scan the triggers on p's shadow tables (and, for format 4, its guards')
** against the own triggers of format iFormat. With bDrop, an own trigger
** found altered is dropped (idem_upgrade then creates it again).
*/
static int triggers_scan(IdemLedger *p, int iFormat, int bDrop, TriggerScan *t) {
  int nOwn, i, rc;
  const OwnTrigger *aT = own_triggers(iFormat, &nOwn);
  char *azExpect[N_OWN_MAX], *azName[N_OWN_MAX];
  char *zSql;
  sqlite3_stmt *pQ = 0;
  memset(t, 0, sizeof(*t));
  memset(azExpect, 0, sizeof(azExpect));
  memset(azName, 0, sizeof(azName));
  for (i = 0; i < nOwn; i++) {
    azExpect[i] = trigger_sql(&aT[i], p->zName, (int)p->aOpt[IDEM_OPT_SINGLE]);
    azName[i] = trigger_name(&aT[i], p->zName);
    if (azExpect[i] == 0 || azName[i] == 0) {
      rc = SQLITE_NOMEM;
      goto done;
    }
  }
  zSql = sqlite3_mprintf(
      "SELECT name, sql, 0 FROM \"%w\".sqlite_schema WHERE type='trigger' AND tbl_name"
      " COLLATE NOCASE IN ('%q_rows','%q_meta','%q_guards','%q_members','%q_targets')"
      " UNION ALL SELECT name, sql, 1 FROM temp.sqlite_schema WHERE type='trigger'"
      " AND %d AND tbl_name COLLATE NOCASE IN"
      " ('%q_rows','%q_meta','%q_guards','%q_members','%q_targets')",
      p->zDb, p->zName, p->zName, p->zName, p->zName, p->zName,
      sqlite3_stricmp(p->zDb, "temp") != 0, p->zName, p->zName, p->zName, p->zName, p->zName);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pQ, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  while (rc == SQLITE_OK && t->zWhy == 0 && sqlite3_step(pQ) == SQLITE_ROW) {
    const char *zTrig = (const char *)sqlite3_column_text(pQ, 0);
    const char *zTSql = (const char *)sqlite3_column_text(pQ, 1);
    int bTemp = sqlite3_column_int(pQ, 2), iOwn = -1;
    /* an own trigger lives in the ledger's schema; one in temp is foreign */
    for (i = 0; zTrig && !bTemp && i < nOwn; i++) {
      if (strcmp(zTrig, azName[i]) == 0) iOwn = i;
    }
    if (iOwn >= 0 && zTSql && strcmp(zTSql, azExpect[iOwn]) == 0) {
      t->mOwn |= 1u << iOwn;
    } else if (iOwn >= 0 && bDrop) {
      rc = exec_free(p->db, sqlite3_mprintf("DROP TRIGGER \"%w\".\"%w\"", p->zDb, azName[iOwn]), 0);
      if (rc == SQLITE_OK) {
        /* the scan statement reads sqlite_schema: start it again */
        sqlite3_reset(pQ);
        t->mOwn = 0;
      }
    } else if (iOwn >= 0) {
      rc = scan_note(t, sqlite3_mprintf("has its trigger \"%s\" altered", zTrig), 1);
    } else if (bTemp && zTSql) {
      /* a same-named TEMP ledger's own trigger (on temp's table, or a copy
      ** of ours on this one): the same text does the same checks */
      for (i = 0; i < nOwn && strcmp(zTSql, azExpect[i]) != 0; i++) {
      }
      if (i == nOwn) {
        rc = scan_note(
            t, sqlite3_mprintf("has a foreign trigger \"%s\" on its shadow tables", zTrig), 0);
      }
    } else {
      rc = scan_note(
          t,
          sqlite3_mprintf("has a foreign trigger \"%s\" on its shadow tables", zTrig ? zTrig : "?"),
          0);
    }
  }
  if (rc == SQLITE_OK) rc = sqlite3_reset(pQ);
  for (i = 0; rc == SQLITE_OK && !bDrop && t->zWhy == 0 && i < nOwn; i++) {
    if ((t->mOwn & (1u << i)) == 0) {
      rc = scan_note(t, sqlite3_mprintf("is missing its trigger \"%s\"", azName[i]), 1);
    }
  }
  if (rc == SQLITE_OK && LEDGER_FORMAT_WORKS(iFormat) && t->zWhy == 0) {
    rc = scan_guards(p, t);
    t->bGuard = t->zWhy != 0;
  }
done:
  sqlite3_finalize(pQ);
  for (i = 0; i < nOwn; i++) {
    sqlite3_free(azExpect[i]);
    sqlite3_free(azName[i]);
  }
  return rc;
}

/*
** Fail when the triggers on the shadow tables and the guarded tables are
** not exactly the ledger's own (by name and stored SQL): a foreign
** trigger could suppress or rewrite a claim, a missing one leaves a gap.
** Checked again only when a schema version changes. Returns SQLITE_OK, or
** an error with *pzErr set.
*/
static int own_refused(IdemLedger *p, const char *zFunc, char **pzErr);

int ledger_check_triggers(IdemLedger *p, const char *zFunc, char **pzErr) {
  sqlite3_stmt *pV = 0;
  int rc, v1 = 0, v2 = 0;
  TriggerScan t;
  memset(&t, 0, sizeof(t));
  rc = own_refused(p, zFunc, pzErr);
  if (rc) return rc;
  rc = ledger_stmt(p, ST_SCHEMA_VERSION, &pV);
  if (rc) return rc;
  if (sqlite3_step(pV) == SQLITE_ROW) v1 = sqlite3_column_int(pV, 0);
  rc = sqlite3_reset(pV);
  if (rc) return rc;
  rc = ledger_temp_version(p, &v2);
  if (rc) return rc;
  if (p->zBroken || !p->bChecked || v1 != p->iSchemaVersion || v2 != p->iTempSchemaVersion) {
    /* a shadow table may have been dropped, or altered (ledger_lifecycle.c) */
    rc = ledger_usable(p, zFunc, pzErr);
    if (rc == SQLITE_OK) rc = ledger_lifecycle_tables(p, zFunc, pzErr);
    if (rc) return rc;
  }
  if (p->bChecked && v1 == p->iSchemaVersion && v2 == p->iTempSchemaVersion) {
    if (p->zForeign == 0) return SQLITE_OK;
    *pzErr = sqlite3_mprintf("%s: %s", zFunc, p->zForeign);
    return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  sqlite3_free(p->zForeign);
  p->zForeign = 0;
  if (!LEDGER_FORMAT_WORKS(p->iFormat)) {
    p->zForeign = sqlite3_mprintf(
        "ledger %s has format %d, made by an earlier release; upgrade it once with "
        "SELECT idem_upgrade('%q')",
        p->zName, p->iFormat, p->zName);
    rc = p->zForeign ? SQLITE_ERROR : SQLITE_NOMEM;
  } else {
    /* the tables past the three every ledger needs: members (their loss
    ** cannot be undone by idem_upgrade, which cannot know them again) and,
    ** from format 5, targets */
    int iTable;
    rc = SQLITE_OK;
    for (iTable = LEDGER_TABLE_MEMBERS; rc == SQLITE_OK && p->zForeign == 0 &&
                                        iTable < ledger_format_tables(p->iFormat);
         iTable++) {
      char *zTable = sqlite3_mprintf("%s_%s", p->zName, ledger_shadow_suffix[iTable]);
      rc = zTable ? SQLITE_OK : SQLITE_NOMEM;
      if (rc == SQLITE_OK && sqlite3_table_column_metadata(p->db, p->zDb, zTable, "claim", 0, 0,
                                                           0, 0, 0) != SQLITE_OK) {
        p->zForeign = sqlite3_mprintf(
            "ledger %s is missing its table %s; restore it from a backup, or drop the ledger",
            p->zName, zTable);
        rc = p->zForeign ? SQLITE_ERROR : SQLITE_NOMEM;
      }
      sqlite3_free(zTable);
    }
    if (rc == SQLITE_OK) rc = triggers_scan(p, p->iFormat, 0, &t);
    if (rc == SQLITE_OK && t.zWhy) {
      /* the remedy must work in this state: the ledger refuses reads now,
      ** its rows table does not */
      if (t.bRepair && t.bGuard) {
        /* rows of a guarded table written meanwhile may lack their
        ** members: the message says which (docs/operating.md, "After a
        ** trigger was dropped", gives the query) */
        p->zForeign = sqlite3_mprintf(
            "ledger %s %s; rows may have been written to its guarded tables without being "
            "checked or recorded as members: find them (the rows whose key holds a claimed or "
            "unknown local claim in \"%w_rows\" and that have no row in \"%w_members\"), then "
            "restore it with SELECT idem_upgrade('%q'); every ledger operation is refused until "
            "then",
            p->zName, t.zWhy, p->zName, p->zName, p->zName);
      } else if (t.bRepair) {
        p->zForeign = sqlite3_mprintf(
            "ledger %s %s; rows may have been changed without it: check them (SELECT * FROM "
            "\"%w_rows\") against what the application and the targets know, then restore it "
            "with SELECT idem_upgrade('%q'); every ledger operation is refused until then",
            p->zName, t.zWhy, p->zName, p->zName);
      } else {
        p->zForeign =
            sqlite3_mprintf("ledger %s %s; every ledger operation is refused until it is dropped",
                            p->zName, t.zWhy);
      }
      rc = p->zForeign ? SQLITE_ERROR : SQLITE_NOMEM;
    }
  }
  if (rc == SQLITE_OK || (rc == SQLITE_ERROR && p->zForeign)) {
    p->bChecked = 1;
    p->iSchemaVersion = v1;
    p->iTempSchemaVersion = v2;
    /* what ledger_check_after_read() compares with */
    p->pGetChecked = p->aStmt[ST_GET];
    p->nGetReprepare =
        p->pGetChecked ? sqlite3_stmt_status(p->pGetChecked, SQLITE_STMTSTATUS_REPREPARE, 0) : -1;
  }
  sqlite3_free(t.zWhy);
  if (rc == SQLITE_ERROR && p->zForeign) {
    *pzErr = sqlite3_mprintf("%s: %s", zFunc, p->zForeign);
    if (*pzErr == 0) rc = SQLITE_NOMEM;
  }
  return rc;
}

/*
** The probe: SELECT 1, prepared once, stepped to learn whether the
** connection's statements were expired since a value was read (*pn, its
** SQLITE_STMTSTATUS_REPREPARE count; a few hundred instructions). SQLite
** expires every statement of a connection when a flag pragma such as
** query_only is set (OP_Expire) and when the TEMP schema changes
** (OP_SetCookie on temp), so a value of either read under the same count
** still holds. Reading them is a PRAGMA, which SQLite prepares again on
** every run (PRAGMAs are run-once): about 8,500 instructions for
** query_only, 1,800 for temp.schema_version. Within one call of the
** extension's functions (nothing of the application runs between its
** reads of the two) the probe is stepped once.
*/
static int storage_probe(IdemLedger *p, int *pn) {
  unsigned iCall = p->pCalls->nDepth > 0 ? p->pCalls->iCall : 0;
  int rc;
  if (iCall != 0 && p->iProbeStamp == iCall && p->pProbe != 0) {
    *pn = p->nProbeNow;
    return SQLITE_OK;
  }
  p->iProbeStamp = 0;
  if (p->pProbe == 0) {
    rc = sqlite3_prepare_v3(p->db, "SELECT 1", -1, SQLITE_PREPARE_PERSISTENT, &p->pProbe, 0);
    if (rc) return rc;
    p->bQueryOnlyRead = 0;
    p->bTempRead = 0;
  }
  if (sqlite3_step(p->pProbe) != SQLITE_ROW) {
    rc = sqlite3_reset(p->pProbe);
    return rc ? rc : SQLITE_ERROR;
  }
  sqlite3_reset(p->pProbe);
  *pn = p->nProbeNow = sqlite3_stmt_status(p->pProbe, SQLITE_STMTSTATUS_REPREPARE, 0);
  p->iProbeStamp = iCall; /* 0 outside a call: never reused */
  return SQLITE_OK;
}

int ledger_temp_version(IdemLedger *p, int *pV) {
  sqlite3_stmt *pT = 0;
  int rc, n = 0;
  /* unchanged while no statement was expired (storage_probe, stepped once
  ** a call) */
  rc = storage_probe(p, &n);
  if (rc) return rc;
  if (p->bTempRead && n == p->nTempProbe) {
    *pV = p->iTempNow;
    return SQLITE_OK;
  }
  rc = ledger_stmt(p, ST_TEMP_SCHEMA_VERSION, &pT);
  if (rc) return rc;
  if (sqlite3_step(pT) == SQLITE_ROW) *pV = sqlite3_column_int(pT, 0);
  rc = sqlite3_reset(pT);
  if (rc == SQLITE_OK) {
    p->iTempNow = *pV;
    p->nTempProbe = n;
    p->bTempRead = 1;
  }
  return rc;
}

int ledger_check_after_read(IdemLedger *p, const char *zFunc, char **pzErr) {
  sqlite3_stmt *pG = p->aStmt[ST_GET];
  int rc, v2 = 0;
  rc = own_refused(p, zFunc, pzErr);
  if (rc) return rc;
  if (!p->bChecked || pG == 0 || pG != p->pGetChecked ||
      sqlite3_stmt_status(pG, SQLITE_STMTSTATUS_REPREPARE, 0) != p->nGetReprepare) {
    return ledger_check_triggers(p, zFunc, pzErr);
  }
  /* main's schema is as it was checked (the lookup just ran on it without
  ** being prepared again); a TEMP trigger changes temp's version only */
  rc = ledger_temp_version(p, &v2);
  if (rc) return rc;
  if (v2 != p->iTempSchemaVersion) return ledger_check_triggers(p, zFunc, pzErr);
  if (p->zForeign == 0) return SQLITE_OK;
  *pzErr = sqlite3_mprintf("%s: %s", zFunc, p->zForeign);
  return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
}

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
  static const int aText[10] = {RC_CONV,   RC_TOOL,  RC_ARGS,    RC_EFFECT, RC_STATUS,
                                RC_RESULT, RC_ERROR, RC_MEMBERS, RC_TENANT, RC_KEY};
  const char **apDest[10], *az[10];
  int an[10];
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
  apDest[8] = &r->zTenant;
  apDest[9] = &r->zKey;
  /* one pass over the columns: each API call takes the connection's mutex,
  ** so the text and its length are read once (text first, as SQLite asks) */
  for (i = 0; i < 10; i++) {
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
  for (i = 0; i < 10; i++) {
    if (an[i] < 0) continue;
    memcpy(z, az[i], (size_t)an[i]);
    z[an[i]] = 0;
    *apDest[i] = z;
    if (i == 2) r->nArgs = an[i];
    if (i >= 5 && i <= 7 && memchr(az[i], 0, (size_t)an[i])) r->mNulJson |= 1 << (i - 5);
    z += an[i] + 1;
  }
  r->id = sqlite3_column_int64(pS, RC_ID);
  r->attempt = sqlite3_column_int64(pS, RC_ATTEMPT);
  r->tokenRnd = sqlite3_column_int64(pS, RC_TOKEN);
  ledger_token_hex(r->id, r->tokenRnd, r->zToken);
  r->leaseUntil = sqlite3_column_int64(pS, RC_LEASE);
  r->updatedAt = sqlite3_column_int64(pS, RC_UPDATED);
  r->expirations = sqlite3_column_int64(pS, RC_EXPIRATIONS);
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
  ** (ledger_durable_forget), so one read in an earlier transaction, before a
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

void ledger_durable_forget(IdemLedger *p) {
  if (sqlite3_txn_state(p->db, p->zDb) != SQLITE_TXN_WRITE) p->iDurable = -1;
}

/* PRAGMA synchronous takes effect when it is prepared (SQLite sets the
** pager's flags while it compiles it), so each change is a fresh one */
static int sync_set(IdemLedger *p, const char *zLevel) {
  char *zSql = sqlite3_mprintf("PRAGMA \"%w\".synchronous=%s", p->zDb, zLevel);
  int rc = zSql ? sqlite3_exec(p->db, zSql, 0, 0, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  return rc;
}

int storage_sync_lower(IdemLedger *p, int *pbLowered, int *pbSynced) {
  sqlite3_stmt *pS = 0;
  int rc, iLevel = -1, bLower = 0;
  const char *zFile = sqlite3_db_filename(p->db, p->zDb);
  char *zSql;
  *pbLowered = *pbSynced = 0;
  /* a file at exactly FULL (EXTRA is a choice this does not second-guess)
  ** in WAL mode; synchronous first, through the storage's own statement:
  ** below FULL that is the only read. A level that cannot be read is not
  ** reported synced (as ledger_durable) */
  if (zFile == 0 || zFile[0] == 0) return SQLITE_OK; /* memory or temp database */
  rc = ledger_stmt(p, ST_SYNCHRONOUS, &pS);
  if (rc == SQLITE_OK && sqlite3_step(pS) == SQLITE_ROW) iLevel = sqlite3_column_int(pS, 0);
  if (pS) rc = sqlite3_reset(pS);
  if (rc == SQLITE_OK) *pbSynced = iLevel >= 2;
  if (rc || iLevel != 2) return (rc & 0xff) == SQLITE_NOMEM ? SQLITE_NOMEM : SQLITE_OK;
  zSql = sqlite3_mprintf("PRAGMA \"%w\".journal_mode", p->zDb);
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_prepare_v2(p->db, zSql, -1, &pS, 0);
  sqlite3_free(zSql);
  if (rc == SQLITE_OK && sqlite3_step(pS) == SQLITE_ROW) {
    const char *zMode = (const char *)sqlite3_column_text(pS, 0);
    bLower = zMode && strcmp(zMode, "wal") == 0;
  }
  if (rc == SQLITE_OK) rc = sqlite3_finalize(pS);
  if (rc == SQLITE_OK && bLower) {
    rc = sync_set(p, "NORMAL");
    *pbLowered = rc == SQLITE_OK;
    *pbSynced = !*pbLowered;
  }
  /* a read or a change refused (an authorizer that denies the PRAGMA)
  ** leaves the settle synced, as it was: only memory is fatal */
  return (rc & 0xff) == SQLITE_NOMEM ? SQLITE_NOMEM : SQLITE_OK;
}

int storage_sync_restore(IdemLedger *p, int bLowered) {
  return bLowered ? sync_set(p, "FULL") : SQLITE_OK;
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
  int n = p->nOwnChanges;
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
/* One writer: the extension's own statements                          */
/* ------------------------------------------------------------------ */

/*
** Every own trigger fires WHEN NOT idem_own_write(), which is true only
** between own_begin and own_end, while one of these statements is stepped
** on this connection (ledger.c registers it: innocuous, not deterministic).
** A write that changed rows while idem_own_write() was not called was
** answered by another function of that name, registered over ours: the
** connection is marked (bForged) and every later operation refused
** (own_refused), since plain SQL could write the ledger through it.
*/
typedef struct OwnWrite OwnWrite;
struct OwnWrite {
  unsigned nAsked;
  int nChanges;
};

static void own_begin(IdemLedger *p, OwnWrite *w) {
  w->nAsked = p->pCalls->nAsked;
  w->nChanges = sqlite3_total_changes(p->db);
  p->pCalls->nOwnWrite++;
}

static void own_end(IdemLedger *p, const OwnWrite *w) {
  p->pCalls->nOwnWrite--;
  /* only where the own triggers are known to be there (a broken ledger
  ** may have lost them, or dropped one on purpose: storage_guard_open_key) */
  if (sqlite3_total_changes(p->db) != w->nChanges && p->pCalls->nAsked == w->nAsked &&
      p->bChecked && p->zForeign == 0 && p->zBroken == 0) {
    p->pCalls->bForged = 1;
  }
}

/*
** An own write never commits. A write statement run while no transaction
** is open commits as it ends, and a commit calls out to the application
** (its WAL hook, its commit hook) while idem_own_write() would still be
** true: a hook could then write the ledger as the extension. So an own
** write that would commit itself (no transaction open, and no statement
** of the connection writing: an INSERT INTO the ledger holds one) runs
** under the claim's savepoint, and commits at its release, after own_end.
** This is the one place that rule is kept: every own write is stepped
** here (own_step_done, own_exec_free); an entry point that makes several
** own writes opens its savepoint itself (the claim, the guards, the
** upgrade), and then this one is not needed.
*/
static int ledger_exec(IdemLedger *p, int i);
static int own_would_commit(IdemLedger *p) {
  return sqlite3_get_autocommit(p->db) && sqlite3_txn_state(p->db, 0) != SQLITE_TXN_WRITE;
}
static int own_save_begin(IdemLedger *p, int *pbSave) {
  int rc;
  *pbSave = own_would_commit(p);
  if (!*pbSave) return SQLITE_OK;
  /* every command prepared first: undoing cannot fail to prepare */
  rc = storage_savepoint_prepare(p);
  if (rc == SQLITE_OK) rc = ledger_exec(p, ST_SAVEPOINT);
  if (rc) *pbSave = 0;
  return rc;
}
static int own_save_end(IdemLedger *p, int bSave, int rc) {
  if (!bSave) return rc;
  if (rc == SQLITE_OK) rc = ledger_exec(p, ST_RELEASE); /* the commit, outside the own write */
  if (rc) storage_savepoint_abandon(p, 1);
  return rc;
}

/* Step own write pS to its end (ledger_step_done) as the extension. */
static int own_step_done(IdemLedger *p, sqlite3_stmt *pS) {
  OwnWrite w;
  int rc, bSave;
  rc = own_save_begin(p, &bSave);
  if (rc) {
    sqlite3_reset(pS);
    return rc;
  }
  own_begin(p, &w);
  rc = ledger_step_done(pS);
  p->nOwnChanges = sqlite3_changes(p->db);
  p->iOwnRowid = sqlite3_last_insert_rowid(p->db);
  own_end(p, &w);
  return own_save_end(p, bSave, rc);
}

int storage_own_changes(const IdemLedger *p) { return p->nOwnChanges; }
sqlite3_int64 storage_own_rowid(const IdemLedger *p) { return p->iOwnRowid; }

/* Run own write zSql (exec_free) as the extension. */
static int exec_free(sqlite3 *db, char *zSql, char **pzErr);
static int own_exec_free(IdemLedger *p, char *zSql) {
  OwnWrite w;
  int rc, bSave;
  rc = own_save_begin(p, &bSave);
  if (rc) {
    sqlite3_free(zSql);
    return rc;
  }
  own_begin(p, &w);
  rc = exec_free(p->db, zSql, 0);
  p->nOwnChanges = sqlite3_changes(p->db);
  p->iOwnRowid = sqlite3_last_insert_rowid(p->db);
  own_end(p, &w);
  return own_save_end(p, bSave, rc);
}

/* SQLITE_OK, or the refusal of a connection whose idem_own_write() is not
** the extension's. */
static int own_refused(IdemLedger *p, const char *zFunc, char **pzErr) {
  if (!p->pCalls->bForged) return SQLITE_OK;
  *pzErr = sqlite3_mprintf(
      "%s: the function idem_own_write() on this connection is not the extension's (another was "
      "registered over it, which would let plain SQL write the ledger's tables); every ledger "
      "operation on this connection is refused",
      zFunc);
  return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
}

/* ------------------------------------------------------------------ */
/* Savepoints                                                          */
/* ------------------------------------------------------------------ */

/* Run prepared statement i of p (a savepoint command) to completion. */
static int ledger_exec(IdemLedger *p, int i) {
  sqlite3_stmt *pS = 0;
  int rc = ledger_stmt(p, i, &pS);
  if (rc) return rc;
  return ledger_step_done(pS);
}

int storage_savepoint_prepare(IdemLedger *p) {
  sqlite3_stmt *pX;
  int i, rc = SQLITE_OK;
  for (i = ST_SAVEPOINT; rc == SQLITE_OK && i <= ST_ROLLBACK; i++) rc = ledger_stmt(p, i, &pX);
  return rc;
}
int storage_savepoint_begin(IdemLedger *p) { return ledger_exec(p, ST_SAVEPOINT); }
int storage_savepoint_release(IdemLedger *p) { return ledger_exec(p, ST_RELEASE); }
int storage_savepoint_undo(IdemLedger *p) { return ledger_exec(p, ST_ROLLBACK_TO); }
void storage_savepoint_abandon(IdemLedger *p, int bOwnTxn) {
  int rc = ledger_exec(p, ST_ROLLBACK_TO);
  if (rc == SQLITE_OK) rc = ledger_exec(p, ST_RELEASE);
  if (rc != SQLITE_OK && bOwnTxn) (void)ledger_exec(p, ST_ROLLBACK); /* the transaction is ours */
}

/* ------------------------------------------------------------------ */
/* Named operations on the rows                                        */
/* ------------------------------------------------------------------ */

int storage_cursor_slot(int iPlan) { return ST_CUR_ALL + iPlan; }

/* The row lookup statement: by (tenant, key), or bKeyOnly by the key. */
static int row_lookup(IdemLedger *p, int bKeyOnly, sqlite3_stmt **ppGet) {
  return ledger_stmt(p, bKeyOnly ? ST_GET_KEY : ST_GET, ppGet);
}

int storage_row_find(IdemLedger *p, sqlite3_value *pTenant, sqlite3_value *pKey, LedgerRow *r,
                     int *pbFound) {
  sqlite3_stmt *pGet = 0;
  int rc = row_lookup(p, pTenant == 0, &pGet);
  if (rc) return rc;
  if (pTenant) sqlite3_bind_value(pGet, 1, pTenant);
  sqlite3_bind_value(pGet, pTenant ? 2 : 1, pKey);
  return ledger_row_fetch(pGet, r, pbFound);
}

int storage_row_find_text(IdemLedger *p, const char *zTenant, const char *zKey, LedgerRow *r,
                          int *pbFound) {
  sqlite3_stmt *pGet = 0;
  int rc = row_lookup(p, zTenant == 0, &pGet);
  if (rc) return rc;
  if (zTenant) sqlite3_bind_text(pGet, 1, zTenant, -1, SQLITE_STATIC);
  sqlite3_bind_text(pGet, zTenant ? 2 : 1, zKey, -1, SQLITE_STATIC);
  return ledger_row_fetch(pGet, r, pbFound);
}

int storage_row_by_token(IdemLedger *p, sqlite3_int64 id, sqlite3_int64 rnd, LedgerRow *r,
                         int *pbFound) {
  sqlite3_stmt *pGet = 0;
  int rc = ledger_stmt(p, ST_BY_TOKEN, &pGet);
  if (rc) return rc;
  sqlite3_bind_int64(pGet, 1, id);
  sqlite3_bind_int64(pGet, 2, rnd);
  return ledger_row_fetch(pGet, r, pbFound);
}

int storage_row_insert(IdemLedger *p, const LedgerRow *r, char **pzTaken) {
  sqlite3_stmt *pIns = 0;
  int rc = ledger_stmt(p, ST_INSERT, &pIns);
  *pzTaken = 0;
  if (rc) return rc;
  sqlite3_bind_text(pIns, 1, r->zTenant, -1, SQLITE_STATIC);
  sqlite3_bind_text(pIns, 2, r->zKey, -1, SQLITE_STATIC);
  sqlite3_bind_text(pIns, 3, r->zConv, -1, SQLITE_STATIC);
  sqlite3_bind_text(pIns, 4, r->zTool, -1, SQLITE_STATIC);
  sqlite3_bind_text(pIns, 5, r->zArgs, r->nArgs, SQLITE_STATIC);
  sqlite3_bind_text(pIns, 6, r->zEffect, -1, SQLITE_STATIC);
  sqlite3_bind_int64(pIns, 7, r->tokenRnd);
  sqlite3_bind_int64(pIns, 8, r->updatedAt);
  sqlite3_bind_int64(pIns, 9, r->leaseUntil);
  rc = own_step_done(p, pIns);
  if ((rc & 0xff) == SQLITE_CONSTRAINT) {
    *pzTaken = sqlite3_mprintf("%s", sqlite3_errmsg(p->db));
    rc = *pzTaken ? SQLITE_OK : SQLITE_NOMEM;
  }
  sqlite3_clear_bindings(pIns);
  return rc;
}

/* Bind row r's compare-and-set (id, status, token) from parameter i on. */
static void bind_cas(sqlite3_stmt *pS, int i, const LedgerRow *r) {
  sqlite3_bind_int64(pS, i, r->id);
  sqlite3_bind_text(pS, i + 1, r->zStatus, -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(pS, i + 2, r->tokenRnd);
}

/* Run the bound write pS, then clear its bindings. */
static int write_done(IdemLedger *p, sqlite3_stmt *pS) {
  int rc = own_step_done(p, pS);
  sqlite3_clear_bindings(pS);
  return rc;
}

int storage_row_reclaim(IdemLedger *p, const LedgerRow *r, sqlite3_int64 rnd, sqlite3_int64 now,
                        sqlite3_int64 lease, int bTakeover) {
  sqlite3_stmt *pUpd = 0;
  int rc = ledger_stmt(p, ST_RECLAIM, &pUpd);
  if (rc) return rc;
  sqlite3_bind_int64(pUpd, 1, rnd);
  sqlite3_bind_int64(pUpd, 2, now);
  sqlite3_bind_int64(pUpd, 3, lease);
  sqlite3_bind_int(pUpd, 4, bTakeover);
  bind_cas(pUpd, 5, r);
  return write_done(p, pUpd);
}

int storage_row_settle(IdemLedger *p, const LedgerRow *r, const char *zStatus, const char *zResult,
                       const char *zError, int nDetail, const char *zMembers, sqlite3_int64 now) {
  sqlite3_stmt *pUpd = 0;
  int rc = ledger_stmt(p, ST_SETTLE, &pUpd);
  if (rc) return rc;
  sqlite3_bind_text(pUpd, 1, zStatus, -1, SQLITE_STATIC);
  if (zResult) sqlite3_bind_text(pUpd, 2, zResult, nDetail, SQLITE_STATIC);
  if (zError) sqlite3_bind_text(pUpd, 3, zError, nDetail, SQLITE_STATIC);
  sqlite3_bind_text(pUpd, 4, zMembers, -1, SQLITE_STATIC);
  sqlite3_bind_int64(pUpd, 5, now);
  bind_cas(pUpd, 6, r);
  return write_done(p, pUpd);
}

int storage_row_renew(IdemLedger *p, sqlite3_int64 id, sqlite3_int64 rnd, sqlite3_int64 until,
                      sqlite3_int64 now, sqlite3_int64 *pLease, int *pbRenewed) {
  sqlite3_stmt *pUpd = 0;
  OwnWrite w;
  int rc = ledger_stmt(p, ST_RENEW, &pUpd), rcR;
  *pbRenewed = 0;
  if (rc) return rc;
  sqlite3_bind_int64(pUpd, 1, until);
  sqlite3_bind_int64(pUpd, 2, now);
  sqlite3_bind_int64(pUpd, 3, id);
  sqlite3_bind_int64(pUpd, 4, rnd);
  own_begin(p, &w);
  rc = sqlite3_step(pUpd);
  if (rc == SQLITE_ROW) {
    *pLease = sqlite3_column_int64(pUpd, 0);
    *pbRenewed = 1;
    rc = sqlite3_step(pUpd);
  }
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  rcR = sqlite3_reset(pUpd);
  own_end(p, &w);
  return rc == SQLITE_OK ? rcR : rc;
}

int storage_row_delete_terminal(IdemLedger *p, sqlite3_value *pId) {
  sqlite3_stmt *pDel = 0;
  int rc = ledger_stmt(p, ST_DELETE, &pDel);
  if (rc) return rc;
  sqlite3_bind_value(pDel, 1, pId);
  return own_step_done(p, pDel);
}

int storage_purge_before(IdemLedger *p, sqlite3_int64 cutoff) {
  sqlite3_stmt *pDel = 0;
  int rc = ledger_stmt(p, ST_PURGE, &pDel);
  if (rc) return rc;
  sqlite3_bind_int64(pDel, 1, cutoff);
  return own_step_done(p, pDel);
}

int storage_retention_scan(IdemLedger *p, sqlite3_int64 iFrom, sqlite3_int64 cutoff,
                           sqlite3_int64 *aDue, int *pnDue, sqlite3_int64 *piNext) {
  sqlite3_int64 iLast = iFrom;
  sqlite3_stmt *pScan = 0, *pDel = 0;
  int nRead = 0, bWrap = 0, rc;
  *pnDue = 0;
  /* the delete is prepared before the first one is needed */
  rc = ledger_stmt(p, ST_RET_SCAN, &pScan);
  if (rc == SQLITE_OK) rc = ledger_stmt(p, ST_RET_DELETE, &pDel);
  if (rc) return rc;
  sqlite3_bind_int64(pScan, 1, iFrom);
  sqlite3_bind_int64(pScan, 2, cutoff);
  while ((rc = sqlite3_step(pScan)) == SQLITE_ROW) {
    nRead++;
    if (sqlite3_column_int(pScan, 2)) {
      bWrap = 1; /* this row and every later one are younger than the cutoff */
      break;
    }
    iLast = sqlite3_column_int64(pScan, 0);
    if (sqlite3_column_int(pScan, 1)) aDue[(*pnDue)++] = iLast;
  }
  if (rc == SQLITE_DONE && nRead < RETENTION_SCAN) bWrap = 1; /* the end of the table */
  if (rc == SQLITE_ROW || rc == SQLITE_DONE) rc = SQLITE_OK;
  else rc = sqlite3_reset(pScan);
  sqlite3_reset(pScan);
  if (rc == SQLITE_OK) *piNext = bWrap ? 0 : iLast;
  return rc;
}

int storage_retention_delete(IdemLedger *p, sqlite3_int64 id, sqlite3_int64 cutoff) {
  sqlite3_stmt *pDel = 0;
  int rc = ledger_stmt(p, ST_RET_DELETE, &pDel);
  if (rc) return rc;
  sqlite3_bind_int64(pDel, 1, id);
  sqlite3_bind_int64(pDel, 2, cutoff);
  return own_step_done(p, pDel);
}

int storage_count_held(IdemLedger *p, sqlite3_int64 *pn) {
  sqlite3_stmt *pS = 0;
  int rc = ledger_stmt(p, ST_COUNT_LIVE, &pS);
  if (rc) return rc;
  if (sqlite3_step(pS) == SQLITE_ROW) {
    *pn = sqlite3_column_int64(pS, 0) + sqlite3_column_int64(pS, 1);
  }
  return sqlite3_reset(pS);
}

int storage_write_lock(IdemLedger *p) {
  sqlite3_stmt *pS = 0;
  int rc = ledger_stmt(p, ST_WRITE_LOCK, &pS);
  if (rc) return (rc & 0xff) == SQLITE_NOMEM ? SQLITE_NOMEM : SQLITE_OK;
  return ledger_step_done(pS);
}

/* ------------------------------------------------------------------ */
/* Named operations on the members and guards                          */
/* ------------------------------------------------------------------ */

int storage_has_members(IdemLedger *p, sqlite3_int64 id, sqlite3_int64 attempt, int *pb) {
  sqlite3_stmt *pM = 0;
  int rc = ledger_stmt(p, ST_MEMBERS, &pM);
  *pb = 0;
  if (rc) return rc;
  sqlite3_bind_int64(pM, 1, id);
  sqlite3_bind_int64(pM, 2, attempt);
  rc = sqlite3_step(pM);
  *pb = rc == SQLITE_ROW;
  return sqlite3_reset(pM);
}

int storage_member_add(IdemLedger *p, sqlite3_int64 gid, sqlite3_value *pTenant,
                       sqlite3_value *pKey, sqlite3_int64 rid) {
  sqlite3_stmt *pS = 0;
  int bKey = sqlite3_value_type(pTenant) == SQLITE_NULL;
  int rc = ledger_stmt(p, bKey ? ST_MEMBER_ADD_KEY : ST_MEMBER_ADD, &pS);
  if (rc) return rc;
  sqlite3_bind_value(pS, 1, pTenant);
  sqlite3_bind_value(pS, 2, pKey);
  sqlite3_bind_int64(pS, 3, gid);
  sqlite3_bind_int64(pS, 4, rid);
  return write_done(p, pS);
}

int storage_members_scan(IdemLedger *p, sqlite3_int64 id, sqlite3_int64 attempt, sqlite3_stmt **ppM,
                         sqlite3_stmt **ppG) {
  int rc = ledger_stmt(p, ST_MEMBERS, ppM);
  if (rc == SQLITE_OK) rc = ledger_stmt(p, ST_GUARDS, ppG);
  if (rc) return rc;
  sqlite3_bind_int64(*ppM, 1, id);
  sqlite3_bind_int64(*ppM, 2, attempt);
  sqlite3_bind_text(*ppG, 1, p->zName, -1, SQLITE_STATIC);
  return SQLITE_OK;
}

/* ------------------------------------------------------------------ */
/* Targets (format 5)                                                  */
/* ------------------------------------------------------------------ */

int storage_target_holder(IdemLedger *p, const char *zTenant, const char *zTarget,
                          sqlite3_int64 selfId, sqlite3_int64 cutoff, LedgerRow *r, int *pbFound) {
  sqlite3_stmt *pS = 0;
  int rc = ledger_stmt(p, ST_TGT_HOLDER, &pS);
  if (rc) return rc;
  sqlite3_bind_text(pS, 1, zTenant, -1, SQLITE_STATIC);
  sqlite3_bind_text(pS, 2, zTarget, -1, SQLITE_STATIC);
  sqlite3_bind_int64(pS, 3, selfId);
  sqlite3_bind_int64(pS, 4, cutoff);
  /* the one a conflict names: an open call (claimed or unknown) before a
  ** succeeded one, then the one updated last, then the one made last */
  memset(r, 0, sizeof(*r));
  *pbFound = 0;
  while ((rc = sqlite3_step(pS)) == SQLITE_ROW) {
    const char *zSt = (const char *)sqlite3_column_text(pS, RC_STATUS);
    int bOpen = zSt && strcmp(zSt, "succeeded") != 0, bBetter;
    if (!*pbFound) {
      bBetter = 1;
    } else {
      int bOpenR = strcmp(r->zStatus, "succeeded") != 0;
      sqlite3_int64 u = sqlite3_column_int64(pS, RC_UPDATED), id = sqlite3_column_int64(pS, RC_ID);
      bBetter = bOpen != bOpenR      ? bOpen
                : u != r->updatedAt ? u > r->updatedAt
                                    : id > r->id;
    }
    if (!bBetter) continue;
    ledger_row_free(r);
    rc = row_load(pS, r);
    if (rc) break;
    *pbFound = 1;
  }
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  if (rc != SQLITE_OK) {
    ledger_row_free(r);
    *pbFound = 0;
  }
  sqlite3_reset(pS);
  sqlite3_clear_bindings(pS);
  return rc;
}

int storage_target_add(IdemLedger *p, sqlite3_int64 id, const char *zTenant, const char *zTarget,
                       const char *zAllowedBy, sqlite3_int64 allowedAt, const char *zOverrode) {
  sqlite3_stmt *pS = 0;
  int rc = ledger_stmt(p, ST_TGT_ADD, &pS);
  if (rc) return rc;
  sqlite3_bind_int64(pS, 1, id);
  sqlite3_bind_text(pS, 2, zTarget, -1, SQLITE_STATIC);
  sqlite3_bind_text(pS, 3, zTenant, -1, SQLITE_STATIC);
  if (zOverrode) {
    sqlite3_bind_text(pS, 4, zAllowedBy, -1, SQLITE_STATIC);
    sqlite3_bind_int64(pS, 5, allowedAt);
    sqlite3_bind_text(pS, 6, zOverrode, -1, SQLITE_STATIC);
  }
  rc = own_step_done(p, pS);
  sqlite3_clear_bindings(pS);
  return rc;
}

int storage_targets_clear(IdemLedger *p, sqlite3_int64 id) {
  sqlite3_stmt *pS = 0;
  int rc = ledger_stmt(p, ST_TGT_CLEAR, &pS);
  if (rc) return rc;
  sqlite3_bind_int64(pS, 1, id);
  return own_step_done(p, pS);
}

/* ------------------------------------------------------------------ */
/* Guard triggers                                                      */
/* ------------------------------------------------------------------ */

const char *const ledger_guard_kind[IDEM_GUARD_N_TRIGGER] = {"insert", "member", "update"};

/*
** The SQL of guard trigger k (0 insert, 1 member, 2 update) of
** gid of ledger zLedger (identity zLedgerId) on table zTable, named after
** zBase (the table's name when the guard was installed: a trigger keeps
** its name when SQLite moves it with a renamed table). With zDb NULL it is
** the text SQLite stores; else the schema is named after CREATE TRIGGER.
**
**   insert  BEFORE INSERT: the new row's (tenant, key) must hold a live
**           claimed claim of the ledger (with a token column, carrying its
**           token), else idem_guard_check raises SQLITE_CONSTRAINT naming
**           the table and the key. The function is DETERMINISTIC|INNOCUOUS,
**           so the trigger runs under trusted_schema=OFF and in defensive
**           mode, and fails closed when the extension is not loaded. A
**           function error is not a constraint conflict, so OR IGNORE / OR
**           REPLACE cannot turn it into a skip.
**   member  AFTER INSERT: idem_guard_member records the row (guard,
**           rowid) as a member of the claimed local claim of its (tenant,
**           key) and attempt, in <ledger>_members, through the storage's
**           own statement (storage_member_add: the members table takes no
**           other writer): membership is written when the row is, not
**           inferred later, whatever rowid the row got. Innocuous, so it
**           runs under trusted_schema=OFF.
**   update  BEFORE UPDATE: the rowid and the key, tenant and token
**           columns cannot change.
**
** Key and tenant are compared with BINARY, as the ledger compares them,
** whatever collation the guarded table declares. Identifiers are quoted
** with %w, literals with %Q. zTenCol and zTokCol may be NULL.
*/
char *ledger_guard_trigger_sql(int k, const char *zDb, const char *zLedger, const char *zLedgerId,
                               sqlite3_int64 gid, const char *zBase, const char *zTable,
                               const char *zKeyCol, const char *zTenCol, const char *zTokCol) {
  sqlite3_str *s = sqlite3_str_new(0);
  sqlite3_str_appendall(s, "CREATE TRIGGER ");
  if (zDb) sqlite3_str_appendf(s, "\"%w\".", zDb);
  sqlite3_str_appendf(s, "\"%w" GUARD_TRIGGER_INFIX "%w_%s\" ", zBase, zLedger,
                      ledger_guard_kind[k]);
  if (k == 0) {
    sqlite3_str_appendf(s, "BEFORE INSERT ON \"%w\" BEGIN SELECT idem_guard_check(%Q, %Q, %Q, ",
                        zTable, zLedger, zLedgerId, zBase);
    if (zTenCol) sqlite3_str_appendf(s, "NEW.\"%w\"", zTenCol);
    else sqlite3_str_appendall(s, "NULL");
    sqlite3_str_appendf(s, ", NEW.\"%w\"", zKeyCol);
    if (zTokCol) sqlite3_str_appendf(s, ", NEW.\"%w\"", zTokCol);
    sqlite3_str_appendall(s, "); END");
  } else if (k == 1) {
    sqlite3_str_appendf(s, "AFTER INSERT ON \"%w\" BEGIN SELECT idem_guard_member(%Q, %Q, %lld, ",
                        zTable, zLedger, zLedgerId, gid);
    if (zTenCol) sqlite3_str_appendf(s, "NEW.\"%w\"", zTenCol);
    else sqlite3_str_appendall(s, "NULL");
    sqlite3_str_appendf(s, ", NEW.\"%w\", NEW.rowid); END", zKeyCol);
  } else {
    sqlite3_str_appendf(s,
                        "BEFORE UPDATE ON \"%w\" WHEN NEW.rowid IS NOT OLD.rowid"
                        " OR NEW.\"%w\" IS NOT OLD.\"%w\" COLLATE BINARY",
                        zTable, zKeyCol, zKeyCol);
    if (zTenCol) {
      sqlite3_str_appendf(s, " OR NEW.\"%w\" IS NOT OLD.\"%w\" COLLATE BINARY", zTenCol, zTenCol);
    }
    if (zTokCol) {
      sqlite3_str_appendf(s, " OR NEW.\"%w\" IS NOT OLD.\"%w\" COLLATE BINARY", zTokCol, zTokCol);
    }
    sqlite3_str_appendall(s,
                          " BEGIN SELECT RAISE(ABORT, 'idem_guard: the rowid and the key, tenant "
                          "and token columns of a guarded table cannot be updated'); END");
  }
  return sqlite3_str_finish(s);
}

int ledger_guard_create(sqlite3 *db, const char *zDb, const char *zLedger, const char *zLedgerId,
                        sqlite3_int64 gid, const char *zBase, const char *zTable,
                        const char *zKeyCol, const char *zTenCol, const char *zTokCol,
                        char **pzErr) {
  int k, rc = SQLITE_OK;
  for (k = 0; rc == SQLITE_OK && k < IDEM_GUARD_N_TRIGGER; k++) {
    rc = exec_free(db,
                   ledger_guard_trigger_sql(k, zDb, zLedger, zLedgerId, gid, zBase, zTable, zKeyCol,
                                            zTenCol, zTokCol),
                   pzErr);
  }
  return rc;
}

int ledger_guard_drop(sqlite3 *db, const char *zDb, const char *zLedger, const char *zBase) {
  int k, rc = SQLITE_OK;
  for (k = 0; rc == SQLITE_OK && k < IDEM_GUARD_N_TRIGGER; k++) {
    rc = exec_free(
        db,
        sqlite3_mprintf("DROP TRIGGER IF EXISTS \"%w\".\"%w" GUARD_TRIGGER_INFIX "%w_%s\"", zDb,
                        zBase, zLedger, ledger_guard_kind[k]),
        0);
  }
  return rc;
}

/*
** The current name of the table guarded under the name zBase by ledger
** zLedger: the table a trigger of the guard is on (it moves with a renamed
** table), else zBase itself if such a table exists, else NULL in *pzTable
** (the table was dropped, its triggers with it). sqlite3_malloc.
*/
int ledger_guard_table(sqlite3 *db, const char *zDb, const char *zLedger, const char *zBase,
                       char **pzTable) {
  sqlite3_stmt *pS = 0;
  int rc;
  char *zSql = sqlite3_mprintf(
      "SELECT tbl_name FROM \"%w\".sqlite_schema WHERE type='trigger' AND name IN"
      " (" GUARD_TRIGGER_SQL("%Q", "%Q", "insert") ", " GUARD_TRIGGER_SQL("%Q", "%Q", "member") ", "
      GUARD_TRIGGER_SQL("%Q", "%Q", "update") ")"
      " UNION ALL SELECT name FROM \"%w\".sqlite_schema WHERE type='table' AND name=%Q",
      zDb, zBase, zLedger, zBase, zLedger, zBase, zLedger, zDb, zBase);
  *pzTable = 0;
  rc = zSql ? sqlite3_prepare_v2(db, zSql, -1, &pS, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  if (rc) return rc;
  if (sqlite3_step(pS) == SQLITE_ROW) {
    *pzTable = sqlite3_mprintf("%s", sqlite3_column_text(pS, 0));
    if (*pzTable == 0) rc = SQLITE_NOMEM;
  }
  if (rc == SQLITE_OK) rc = sqlite3_reset(pS);
  sqlite3_finalize(pS);
  return rc;
}

/* ------------------------------------------------------------------ */
/* Named operations on <name>_guards (idem_guard, idem_unguard)         */
/* ------------------------------------------------------------------ */

int storage_is_own_table(const char *zLedger, const char *zTable) {
  size_t nL = strlen(zLedger);
  int i;
  if (sqlite3_strnicmp(zTable, zLedger, (int)nL) != 0 || zTable[nL] != '_') return 0;
  for (i = 0; i < LEDGER_N_TABLE; i++) {
    if (sqlite3_stricmp(zTable + nL + 1, ledger_shadow_suffix[i]) == 0) return 1;
  }
  return 0;
}

int storage_table_exists(const IdemLedger *p, int iTable, int *pbExists) {
  char *zTable = sqlite3_mprintf("%s_%s", p->zName, ledger_shadow_suffix[iTable]);
  /* SQLITE_ERROR is "no such table"; any other code (SQLITE_NOMEM while
  ** reading the schema) is not an answer */
  int rc = zTable ? sqlite3_table_column_metadata(p->db, p->zDb, zTable, 0, 0, 0, 0, 0, 0)
                  : SQLITE_NOMEM;
  sqlite3_free(zTable);
  *pbExists = rc == SQLITE_OK;
  return rc == SQLITE_ERROR ? SQLITE_OK : rc;
}

int storage_guard_next(IdemLedger *p, const char *zTable, int *pbGuarded, sqlite3_int64 *pGid) {
  sqlite3_stmt *pS = 0;
  int rc;
  /* one guard per table, under its current name or the one it was
  ** guarded under */
  char *zSql = sqlite3_mprintf(
      "SELECT (SELECT count(*) FROM \"%w\".\"%w_guards\" AS g"
      " LEFT JOIN \"%w\".sqlite_schema AS t ON t.type='trigger'"
      " AND t.name=" GUARD_TRIGGER_SQL("g.tbl", "%Q", "insert")
      " WHERE g.tbl=%Q COLLATE NOCASE OR t.tbl_name=%Q COLLATE NOCASE),"
      " (SELECT coalesce(max(id),0)+1 FROM \"%w\".\"%w_guards\")",
      p->zDb, p->zName, p->zDb, p->zName, zTable, zTable, p->zDb, p->zName);
  *pbGuarded = 0;
  *pGid = 0;
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pS, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  if (rc) return rc;
  if (sqlite3_step(pS) == SQLITE_ROW) {
    if (sqlite3_column_int64(pS, 0) > 0) {
      *pbGuarded = 1;
      sqlite3_finalize(pS);
      return SQLITE_OK;
    }
    *pGid = sqlite3_column_int64(pS, 1);
  }
  return sqlite3_finalize(pS);
}

int storage_query_only(IdemLedger *p, int *pb) {
  sqlite3_stmt *pS = 0;
  int rc, n = 0;
  *pb = 0;
  rc = storage_probe(p, &n);
  if (rc) return rc;
  if (p->bQueryOnlyRead && n == p->nProbeReprepare) {
    *pb = p->bQueryOnly;
    return SQLITE_OK;
  }
  rc = ledger_stmt(p, ST_QUERY_ONLY, &pS);
  if (rc) return rc;
  if (sqlite3_step(pS) == SQLITE_ROW) *pb = sqlite3_column_int(pS, 0) != 0;
  rc = sqlite3_reset(pS);
  if (rc == SQLITE_OK) {
    p->bQueryOnly = *pb;
    p->nProbeReprepare = n;
    p->bQueryOnlyRead = 1;
  }
  return rc;
}

int storage_guard_tenant_column(IdemLedger *p, const char *zBase, char **pzCol) {
  sqlite3_stmt *pS = 0;
  int rc = ledger_stmt(p, ST_GUARD_TENANT, &pS);
  *pzCol = 0;
  if (rc) return rc;
  sqlite3_bind_text(pS, 1, zBase, -1, SQLITE_STATIC);
  if (sqlite3_step(pS) == SQLITE_ROW && sqlite3_column_type(pS, 0) == SQLITE_TEXT) {
    *pzCol = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(pS, 0));
    if (*pzCol == 0) {
      sqlite3_reset(pS);
      return SQLITE_NOMEM;
    }
  }
  rc = sqlite3_reset(pS);
  sqlite3_clear_bindings(pS);
  if (rc) {
    sqlite3_free(*pzCol);
    *pzCol = 0;
  }
  return rc;
}

int storage_guard_insert(IdemLedger *p, sqlite3_int64 gid, const char *zTable, const char *zKeyCol,
                         const char *zTenCol, const char *zTokCol) {
  return own_exec_free(p,
                       sqlite3_mprintf("INSERT INTO \"%w\".\"%w_guards\"(id,tbl,key_column,"
                                       "tenant_column,token_column) VALUES(%lld,%Q,%Q,%Q,%Q)",
                                       p->zDb, p->zName, gid, zTable, zKeyCol, zTenCol, zTokCol));
}

int storage_guard_find(IdemLedger *p, const char *zTable, sqlite3_int64 *pGid, char **pzBase) {
  sqlite3_stmt *pS = 0;
  int rc;
  /* by its table's current name (it may have been renamed since: its
  ** insert trigger moved with it) */
  char *zSql = sqlite3_mprintf(
      "SELECT g.id, g.tbl FROM \"%w\".\"%w_guards\" AS g"
      " LEFT JOIN \"%w\".sqlite_schema AS t ON t.type='trigger'"
      " AND t.name=" GUARD_TRIGGER_SQL(
          "g.tbl", "%Q", "insert") " WHERE coalesce(t.tbl_name, g.tbl)=%Q COLLATE NOCASE",
      p->zDb, p->zName, p->zDb, p->zName, zTable);
  *pzBase = 0;
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_prepare_v2(p->db, zSql, -1, &pS, 0);
  sqlite3_free(zSql);
  if (rc) return rc;
  if (sqlite3_step(pS) != SQLITE_ROW) {
    rc = sqlite3_reset(pS);
    sqlite3_finalize(pS);
    return rc;
  }
  *pzBase = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(pS, 1));
  *pGid = sqlite3_column_int64(pS, 0);
  sqlite3_finalize(pS);
  return *pzBase ? SQLITE_OK : SQLITE_NOMEM;
}

int storage_guard_open_key(IdemLedger *p, sqlite3_int64 gid, char **pzKey) {
  sqlite3_stmt *pS = 0;
  char *zSql;
  int rc, bRows = 0, bMembers = 0;
  *pzKey = 0;
  rc = storage_table_exists(p, LEDGER_TABLE_ROWS, &bRows);
  if (rc == SQLITE_OK) rc = storage_table_exists(p, LEDGER_TABLE_MEMBERS, &bMembers);
  if (rc) return rc;
  if (!bRows || !bMembers) {
    /* a broken ledger (ledger_lifecycle.c): no claim of it can go on, and
    ** the guards table's delete trigger, which reads both, cannot run;
    ** the guards go so that DROP TABLE can remove the ledger */
    rc = exec_free(
        p->db,
        sqlite3_mprintf("DROP TRIGGER IF EXISTS \"%w\".\"%w_guards_delete\"", p->zDb, p->zName), 0);
    zSql = sqlite3_mprintf("SELECT NULL WHERE 0");
  } else {
    /* rows written under a claim that is still open are its members */
    zSql = sqlite3_mprintf(
        "SELECT r.\"key\" FROM \"%w\".\"%w_members\" AS m JOIN \"%w\".\"%w_rows\" AS r"
        " ON r.id=m.claim WHERE m.guard=%lld AND (r.status='claimed' OR r.status='unknown')"
        " LIMIT 1",
        p->zDb, p->zName, p->zDb, p->zName, gid);
  }
  if (rc == SQLITE_OK) rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pS, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  if (rc) return rc;
  if (sqlite3_step(pS) == SQLITE_ROW) {
    *pzKey = sqlite3_mprintf("%s", sqlite3_column_text(pS, 0));
    sqlite3_finalize(pS);
    return *pzKey ? SQLITE_OK : SQLITE_NOMEM;
  }
  return sqlite3_finalize(pS);
}

int storage_guard_delete(IdemLedger *p, sqlite3_int64 gid) {
  return own_exec_free(
      p, sqlite3_mprintf("DELETE FROM \"%w\".\"%w_guards\" WHERE id=%lld", p->zDb, p->zName, gid));
}

/*
** Make every guard's triggers again: those named after ledger zOld are
** dropped, the three of format 4 made under ledger zNew (the guards are
** read from zNew_guards). A guard whose table is gone is left. *pn counts
** the triggers created.
*/
static int guards_rebuild(sqlite3 *db, const char *zDb, const char *zOld, const char *zNew,
                          const char *zId, int *pn) {
  sqlite3_stmt *pS = 0;
  int rc;
  char *zSql = sqlite3_mprintf(
      "SELECT id, tbl, key_column, tenant_column, token_column FROM \"%w\".\"%w_guards\"", zDb,
      zNew);
  rc = zSql ? sqlite3_prepare_v2(db, zSql, -1, &pS, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  while (rc == SQLITE_OK && sqlite3_step(pS) == SQLITE_ROW) {
    const char *zBase = (const char *)sqlite3_column_text(pS, 1);
    char *zTable = 0;
    if (zBase == 0) {
      rc = SQLITE_CORRUPT_VTAB;
      break;
    }
    rc = ledger_guard_table(db, zDb, zOld, zBase, &zTable);
    if (rc == SQLITE_OK && zTable) {
      /* the format-2 guard triggers have the same names */
      rc = ledger_guard_drop(db, zDb, zOld, zBase);
      if (rc == SQLITE_OK) {
        rc = ledger_guard_create(db, zDb, zNew, zId, sqlite3_column_int64(pS, 0), zBase, zTable,
                                 (const char *)sqlite3_column_text(pS, 2),
                                 (const char *)sqlite3_column_text(pS, 3),
                                 (const char *)sqlite3_column_text(pS, 4), 0);
      }
      if (rc == SQLITE_OK) *pn += IDEM_GUARD_N_TRIGGER;
    }
    sqlite3_free(zTable);
  }
  if (rc == SQLITE_OK) rc = sqlite3_reset(pS);
  sqlite3_finalize(pS);
  return rc;
}

/* ------------------------------------------------------------------ */
/* idem_upgrade: formats 1, 2 and 3 to format 4, and the repair of own */
/* and guard triggers                                                  */
/* ------------------------------------------------------------------ */

/* Big-endian 64 bits of a[0..8). */
static sqlite3_uint64 be64(const unsigned char *a) {
  sqlite3_uint64 v = 0;
  int i;
  for (i = 0; i < 8; i++) v = (v << 8) | a[i];
  return v;
}


/* upgrade_members: refuse (*pzErr) when table zTable has a row of claim
** pR's key whose tenant column zTen is not TEXT. */
static int upgrade_tenant_check(IdemLedger *p, sqlite3_stmt *pR, const char *zTable,
                                const char *zKeyCol, const char *zTen, char **pzErr) {
  sqlite3_stmt *pS = 0;
  const char *zKey = (const char *)sqlite3_column_text(pR, 3);
  char *zSql = sqlite3_mprintf(
      "SELECT rowid FROM \"%w\".\"%w\" WHERE \"%w\"=?1 COLLATE BINARY"
      " AND typeof(\"%w\")<>'text' ORDER BY rowid LIMIT 1",
      p->zDb, zTable, zKeyCol, zTen);
  int rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pS, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  if (rc) return rc;
  sqlite3_bind_text(pS, 1, zKey, -1, SQLITE_STATIC);
  if (sqlite3_step(pS) == SQLITE_ROW) {
    *pzErr = sqlite3_mprintf(
        "idem_upgrade: ledger %s has a row of \"%s\" (rowid %lld) of the open local claim of "
        "key \"%s\" whose tenant column \"%s\" is not TEXT: a guarded row's tenant is its "
        "claim's, so it cannot be recorded as a member and the claim's take-over would write it "
        "again; delete the row (the claim's next attempt writes it again, recorded), then "
        "upgrade (nothing was changed)",
        p->zName, zTable, sqlite3_column_int64(pS, 0), zKey, zTen);
    rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
  }
  if (rc == SQLITE_OK) rc = sqlite3_reset(pS);
  sqlite3_finalize(pS);
  return rc;
}

/*
** The members of the open local claims of a format-1/2 rows table zRows:
** every guarded row of the claim's (tenant, key), whatever its rowid,
** recorded now in <name>_members (from now on they are recorded as they
** are written). Those formats inferred members from rowid marks, counting
** the rows above them, and so missed a row given an explicit rowid below
** the table's largest: a key's guarded rows are all its claim's (a guard
** admits a row only under a live claim of its key, and a local claim that
** wrote rows is never released or taken over), so every one is counted.
** The tenant rule of idem_guard_check: where the guard names a tenant
** column, a row of the claim's key whose tenant there is not TEXT (an old
** guard took a NULL on a single_tenant=1 ledger) cannot be a member, and
** would be written again by a take-over: the upgrade is refused, naming
** it (*pzErr).
*/
static int upgrade_members(IdemLedger *p, const char *zRows, sqlite3_int64 *pn, char **pzErr) {
  sqlite3_stmt *pR = 0, *pG = 0;
  int rc;
  char *zSql = sqlite3_mprintf(
      "SELECT id, attempt, tenant, \"key\", marks FROM \"%w\".\"%w\""
      " WHERE status='claimed' AND effect='local'",
      p->zDb, zRows);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pR, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  if (rc) return rc;
  zSql = sqlite3_mprintf("SELECT id, tbl, key_column, tenant_column FROM \"%w\".\"%w_guards\"",
                         p->zDb, p->zName);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pG, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  while (rc == SQLITE_OK && sqlite3_step(pR) == SQLITE_ROW) {
    while (rc == SQLITE_OK && sqlite3_step(pG) == SQLITE_ROW) {
      char *zTable = 0;
      const char *zBase = (const char *)sqlite3_column_text(pG, 1);
      const char *zTen = (const char *)sqlite3_column_text(pG, 3);
      sqlite3_int64 gid = sqlite3_column_int64(pG, 0);
      if (zBase == 0) {
        rc = SQLITE_CORRUPT_VTAB;
        break;
      }
      rc = ledger_guard_table(p->db, p->zDb, p->zName, zBase, &zTable);
      if (rc == SQLITE_OK && zTable && zTen) {
        rc = upgrade_tenant_check(p, pR, zTable, (const char *)sqlite3_column_text(pG, 2), zTen,
                                  pzErr);
      }
      if (rc == SQLITE_OK && zTable) {
        char *zIns = sqlite3_mprintf(
            "INSERT OR IGNORE INTO \"%w\".\"%w_members\"(claim,attempt,guard,rid)"
            " SELECT %lld,%lld,%lld,rowid FROM \"%w\".\"%w\" WHERE \"%w\"=%Q COLLATE BINARY"
            " AND %s%w%s=%Q COLLATE BINARY",
            p->zDb, p->zName, sqlite3_column_int64(pR, 0), sqlite3_column_int64(pR, 1), gid, p->zDb,
            zTable, (const char *)sqlite3_column_text(pG, 2),
            (const char *)sqlite3_column_text(pR, 3), zTen ? "\"" : "", zTen ? zTen : "",
            zTen ? "\"" : "", zTen ? (const char *)sqlite3_column_text(pR, 2) : "");
        rc = exec_free(p->db, zIns, 0);
        if (rc == SQLITE_OK) *pn += sqlite3_changes(p->db);
      }
      sqlite3_free(zTable);
    }
    if (rc == SQLITE_OK) rc = sqlite3_reset(pG);
  }
  if (rc == SQLITE_OK) rc = sqlite3_reset(pR);
  sqlite3_finalize(pR);
  sqlite3_finalize(pG);
  return rc;
}

/* The columns of a rows table, formats 2 (without marks), 3 and 4. */
#define ROWS_COLUMNS                                                                   \
  "id,tenant,\"key\",conversation,tool,args,effect,status,result,error,attempt,token," \
  "created_at,updated_at,lease_until,members,expirations"

/*
** Copy the rows of a format-1 table into the rows table zNew. A row
** whose token can still settle (claimed, unknown) gets the id its old
** token names (the token's first 8 bytes, top bit cleared), so the holder's
** token finds it; the column token keeps the old token's last 8 bytes.
** Other rows keep their ids. *pnRow counts the rows. Members were read
** from the old table first (upgrade_members) under the old ids: the
** members table's claim ids are moved with the rows.
*/
static int upgrade_copy_rows(IdemLedger *p, const char *zNew, sqlite3_int64 *pnRow) {
  static const char zCols[] = ROWS_COLUMNS;
  sqlite3_stmt *pR = 0, *pW = 0, *pM = 0;
  char *zSql;
  int rc, i;
  *pnRow = 0;
  zSql = sqlite3_mprintf("SELECT %s FROM \"%w\".\"%w_rows\" ORDER BY id", zCols, p->zDb, p->zName);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pR, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  if (rc) return rc;
  zSql = sqlite3_mprintf(
      "INSERT INTO \"%w\".\"%w\"(%s) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,"
      "?16,?17)",
      p->zDb, zNew, zCols);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pW, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  if (rc == SQLITE_OK) {
    /* members are keyed by claim id; ids only change for open rows, and a
    ** new id is negated first so that it cannot meet an old one */
    zSql = sqlite3_mprintf("UPDATE \"%w\".\"%w_members\" SET claim=?1 WHERE claim=?2", p->zDb,
                           p->zName);
    rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pM, 0) : SQLITE_NOMEM;
    sqlite3_free(zSql);
  }
  while (rc == SQLITE_OK && sqlite3_step(pR) == SQLITE_ROW) {
    const unsigned char *aTok = (const unsigned char *)sqlite3_column_blob(pR, 11);
    const char *zStatus = (const char *)sqlite3_column_text(pR, 7);
    sqlite3_int64 id = sqlite3_column_int64(pR, 0), id0 = id, rnd = 0;
    if (sqlite3_column_bytes(pR, 11) != 16 || aTok == 0 || zStatus == 0) {
      rc = SQLITE_CORRUPT_VTAB;
      break;
    }
    rnd = (sqlite3_int64)be64(aTok + 8);
    if (strcmp(zStatus, "claimed") == 0 || strcmp(zStatus, "unknown") == 0) {
      id = (sqlite3_int64)(be64(aTok) & TOKEN_ID_MASK);
      if (id == 0) id = 1; /* a token of 2^-63 odds: it then settles by key only */
    }
    for (i = 0; i < 17; i++) sqlite3_bind_value(pW, i + 1, sqlite3_column_value(pR, i));
    sqlite3_bind_int64(pW, 1, id);
    sqlite3_bind_int64(pW, 12, rnd);
    rc = ledger_step_done(pW);
    if (rc == SQLITE_OK && id != id0) {
      sqlite3_bind_int64(pM, 1, -id);
      sqlite3_bind_int64(pM, 2, id0);
      rc = ledger_step_done(pM);
    }
    if (rc == SQLITE_OK) (*pnRow)++;
  }
  if (rc == SQLITE_OK) rc = sqlite3_reset(pR);
  if (rc == SQLITE_OK) {
    rc = exec_free(p->db,
                   sqlite3_mprintf("UPDATE \"%w\".\"%w_members\" SET claim=-claim WHERE claim<0",
                                   p->zDb, p->zName),
                   0);
  }
  sqlite3_finalize(pR);
  sqlite3_finalize(pW);
  sqlite3_finalize(pM);
  return rc;
}

/* Copy the rows of a format-2 (its marks dropped) or format-3 rows table
** into the format-4 table zNew as they are; *pnRow counts them. */
static int upgrade_same_rows(IdemLedger *p, const char *zNew, sqlite3_int64 *pnRow) {
  int rc =
      exec_free(p->db,
                sqlite3_mprintf("INSERT INTO \"%w\".\"%w\"(" ROWS_COLUMNS ") SELECT " ROWS_COLUMNS
                                " FROM \"%w\".\"%w_rows\" ORDER BY id",
                                p->zDb, zNew, p->zDb, p->zName),
                0);
  if (rc == SQLITE_OK) *pnRow = sqlite3_changes(p->db);
  return rc;
}

/* Format 1, 2 or 3 to format 4: (1 and 2) members from the old marks, the
** rows table without its marks column, the indexes; the own triggers and
** the guards' triggers of format 4. *pnRow counts rows copied (format 1), *pnMember
** the members found. */
static int upgrade_from(IdemLedger *p, IdemSave *pSave, int iFrom, sqlite3_int64 *pnRow,
                        sqlite3_int64 *pnMember, int *pnTrig, char **pzErr) {
  int bSingle = (int)p->aOpt[IDEM_OPT_SINGLE], n = 0, rc;
  char *zNew = 0;
  /* format 3 has its members table and no marks: its triggers go */
  rc = iFrom < 3 ? create_members(p->db, p->zDb, p->zName, 0) : SQLITE_OK;
  if (rc == SQLITE_OK) rc = drop_triggers(p->db, p->zDb, p->zName, iFrom);
  if (rc == SQLITE_OK && iFrom < 3) {
    zNew = sqlite3_mprintf("%s_rows", p->zName);
    rc = zNew ? upgrade_members(p, zNew, pnMember, pzErr) : SQLITE_NOMEM;
    sqlite3_free(zNew);
    zNew = 0;
  }
  /* the guards' triggers first: format 3's member trigger names the rows
  ** table, which the rebuild below drops and renames */
  if (rc == SQLITE_OK) rc = guards_rebuild(p->db, p->zDb, p->zName, p->zName, p->zId, &n);
  if (rc == SQLITE_OK) {
    /* format 1: the rows converted; formats 2 and 3: the same rows (not
    ** format 2's marks); in a table without the grammar CHECKs */
    zNew = sqlite3_mprintf("%s_rows_format4", p->zName);
    rc = zNew ? exec_free(p->db, table_sql(LEDGER_TABLE_ROWS, p->zDb, zNew), 0) : SQLITE_NOMEM;
    if (rc == SQLITE_OK) {
      rc = iFrom == 1 ? upgrade_copy_rows(p, zNew, pnRow) : upgrade_same_rows(p, zNew, pnRow);
    }
    if (rc == SQLITE_OK) {
      /* the savepoint's hold would make the DROPs fail */
      idem_save_pause(pSave);
      rc = exec_free(p->db,
                     sqlite3_mprintf("DROP TABLE \"%w\".\"%w_rows\";"
                                     "DROP INDEX IF EXISTS \"%w\".\"%w_rows_key\";",
                                     p->zDb, p->zName, p->zDb, p->zName),
                     0);
      if (rc == SQLITE_OK) rc = idem_save_hold(pSave, p->zDb);
    }
  }
  if (rc == SQLITE_OK) {
    rc = exec_free(p->db,
                   sqlite3_mprintf("ALTER TABLE \"%w\".\"%w\" RENAME TO \"%w_rows\";"
                                   "UPDATE \"%w\".\"%w_meta\" SET v=%d WHERE k='format';",
                                   p->zDb, zNew, p->zName, p->zDb, p->zName, LEDGER_FORMAT),
                   0);
  }
  if (rc == SQLITE_OK) rc = create_indexes(p->db, p->zDb, p->zName, p->zId, bSingle, 0);
  if (rc == SQLITE_OK) rc = create_targets(p->db, p->zDb, p->zName, p->zId, 0);
  if (rc == SQLITE_OK) rc = create_triggers(p->db, p->zDb, p->zName, bSingle, LEDGER_FORMAT, 0, 0);
  *pnTrig = N_OWN + n;
  sqlite3_free(zNew);
  return rc;
}

/* Format 4 to format 5: the targets table, its index and triggers (format
** 4's own triggers are dropped, the options' ones with them, so that the
** format can be written, and made again; those t found missing or
** altered count as created), and the guards' triggers again when t found
** one missing or altered. The rows are not touched. */
static int upgrade_from_4(IdemLedger *p, const TriggerScan *t, int *pnTrig) {
  int n = 0, i, rc;
  rc = drop_triggers(p->db, p->zDb, p->zName, 4);
  if (rc == SQLITE_OK) rc = create_targets(p->db, p->zDb, p->zName, p->zId, 0);
  if (rc == SQLITE_OK) {
    rc = exec_free(p->db,
                   sqlite3_mprintf("UPDATE \"%w\".\"%w_meta\" SET v=%d WHERE k='format'", p->zDb,
                                   p->zName, LEDGER_FORMAT),
                   0);
  }
  if (rc == SQLITE_OK) {
    rc = create_triggers(p->db, p->zDb, p->zName, (int)p->aOpt[IDEM_OPT_SINGLE], LEDGER_FORMAT, 0,
                         0);
  }
  if (rc == SQLITE_OK && t->zWhy) rc = guards_rebuild(p->db, p->zDb, p->zName, p->zName, p->zId, &n);
  *pnTrig = n;
  for (i = 0; i < N_OWN; i++) *pnTrig += i >= N_OWN_V4 || (t->mOwn & (1u << i)) == 0;
  return rc;
}

int ledger_upgrade(IdemLedger *p, const char *zFunc, char **pzJson, char **pzErr) {
  sqlite3_int64 nRow = 0, nMember = 0;
  int rc, rcBody, iFrom = p->iFormat, nCreated = 0, i;
  IdemSave sv;
  TriggerScan t;
  IdemJson j;

  memset(&t, 0, sizeof(t));
  *pzJson = 0;
  /* a shadow table altered so that the statements do not prepare is not
  ** repaired here: refused (ledger_lifecycle.c) */
  rc = ledger_lifecycle_tables(p, zFunc, pzErr);
  if (rc) return rc;
  rc = idem_save_begin(&sv, p->db, zFunc);
  /* the upgrade reads the schema before it writes: outside a transaction
  ** the savepoint's first statement takes the write lock (through the busy
  ** handler); inside one, resolving the ledger took it */
  if (rc == SQLITE_OK && sv.bOwn) rc = ledger_write_first(p, zFunc, pzErr);
  /* the undo must outlive the schema changes (savepoint.c) */
  if (rc == SQLITE_OK) rc = idem_save_hold(&sv, p->zDb);
  if (rc) goto done;
  /* altered own triggers of this format are dropped (made again below);
  ** an earlier format's altered trigger, or a foreign one, refuses */
  rc = triggers_scan(p, iFrom, LEDGER_FORMAT_WORKS(iFrom), &t);
  if (rc) goto done;
  if (t.zWhy && (!LEDGER_FORMAT_WORKS(iFrom) || !t.bRepair)) {
    *pzErr = sqlite3_mprintf("%s: ledger %s %s; drop it first (nothing was changed)", zFunc,
                             p->zName, t.zWhy);
    rc = *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
    goto done;
  }
  ledger_finalize_all(p);
  if (!LEDGER_FORMAT_WORKS(iFrom)) {
    rc = upgrade_from(p, &sv, iFrom, &nRow, &nMember, &nCreated, pzErr);
  } else if (iFrom == 4) {
    rc = upgrade_from_4(p, &t, &nCreated);
  } else {
    /* format 5: the own triggers missing (or dropped above as altered),
    ** and, when a guard trigger is missing or altered, every guard's
    ** triggers made again */
    int n = 0;
    rc = create_triggers(p->db, p->zDb, p->zName, (int)p->aOpt[IDEM_OPT_SINGLE], LEDGER_FORMAT,
                         t.mOwn, 0);
    for (i = 0; i < N_OWN; i++) nCreated += (t.mOwn & (1u << i)) == 0;
    if (rc == SQLITE_OK && t.zWhy) {
      rc = guards_rebuild(p->db, p->zDb, p->zName, p->zName, p->zId, &n);
    }
    nCreated += n;
  }
  if (rc) goto done;
  /* the answer first: nothing may fail once the upgrade is released */
  idem_json_begin(&j);
  idem_json_text(&j, "ledger", p->zName);
  idem_json_int(&j, "from_format", iFrom);
  idem_json_int(&j, "format", LEDGER_FORMAT);
  idem_json_int(&j, "rows_copied", nRow);
  idem_json_int(&j, "members_found", nMember);
  idem_json_int(&j, "triggers_created", nCreated);
  *pzJson = idem_json_finish(&j, &rc);

done:
  /* the message of the failing statement, before the undo replaces it */
  if (rc && *pzErr == 0 && rc != SQLITE_NOMEM) *pzErr = idem_db_error(p->db, zFunc, rc);
  rcBody = rc;
  rc = idem_save_end(&sv, rc);
  if (rcBody == SQLITE_OK && rc != SQLITE_OK && rc != SQLITE_NOMEM) {
    *pzErr = idem_db_error(p->db, zFunc, rc);
  }
  if (rc) {
    sqlite3_free(*pzJson);
    *pzJson = 0;
  } else {
    p->iFormat = LEDGER_FORMAT;
    p->bChecked = 0;
  }
  sqlite3_free(t.zWhy);
  return rc;
}

/* ------------------------------------------------------------------ */
/* The clock and the argument readers every operation uses             */
/* ------------------------------------------------------------------ */

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

/* ------------------------------------------------------------------ */
/* Which shadow tables exist                                           */
/* ------------------------------------------------------------------ */

/* The suffixes of a ledger's tables: first the shadow tables SQLite is
** told of (xShadowName) and that every ledger needs, in LEDGER_SHADOW_*
** bit order, then <name>_members. */
const char *const ledger_shadow_suffix[LEDGER_N_TABLE] = {"rows", "meta", "guards", "members",
                                                          "targets"};

int ledger_shadow_missing(sqlite3 *db, const char *zDb, const char *zName, int *pmMissing) {
  sqlite3_stmt *pS = 0;
  int rc, i;
  /* the tables' names compared in C, case-insensitively as SQLite names
  ** tables (no SQL function an application may register over is called) */
  size_t nName = strlen(zName);
  char *zSql = sqlite3_mprintf("SELECT name FROM \"%w\".sqlite_schema WHERE type='table'", zDb);
  *pmMissing = LEDGER_SHADOW_ALL;
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_prepare_v2(db, zSql, -1, &pS, 0);
  sqlite3_free(zSql);
  if (rc) return rc;
  while ((rc = sqlite3_step(pS)) == SQLITE_ROW) {
    const char *z = (const char *)sqlite3_column_text(pS, 0);
    size_t n = z ? strlen(z) : 0;
    if (n <= nName + 1 || sqlite3_strnicmp(z, zName, (int)nName) != 0 || z[nName] != '_') continue;
    for (i = 0; i < LEDGER_N_SHADOW; i++) {
      if (sqlite3_stricmp(z + nName + 1, ledger_shadow_suffix[i]) == 0) *pmMissing &= ~(1 << i);
    }
  }
  sqlite3_finalize(pS);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int ledger_shadow_list(sqlite3_str *s, const char *zName, int m) {
  int i, n = 0;
  sqlite3_str_appendall(s, (m & (m - 1)) ? " tables" : " table");
  for (i = 0; i < LEDGER_N_SHADOW; i++) {
    if ((m & (1 << i)) == 0) continue;
    sqlite3_str_appendf(s, "%s %s_%s", n++ ? "," : "", zName, ledger_shadow_suffix[i]);
  }
  return n;
}

char *ledger_shadow_message(const char *zName, int mMissing) {
  sqlite3_str *s = sqlite3_str_new(0);
  sqlite3_str_appendf(s, "ledger %s is missing its shadow", zName);
  ledger_shadow_list(s, zName, mMissing);
  sqlite3_str_appendall(s,
                        "; every operation on it is refused until that is restored from a "
                        "backup and the database reopened, or the ledger is dropped with DROP "
                        "TABLE");
  return sqlite3_str_finish(s);
}

int ledger_usable(IdemLedger *p, const char *zFunc, char **pzErr) {
  int mMissing = 0, rc;
  /* called when the schema changed or p is broken: a shadow table may have
  ** been dropped (or one more of them) */
  rc = ledger_shadow_missing(p->db, p->zDb, p->zName, &mMissing);
  if (rc) return rc;
  if (mMissing == 0 && p->zBroken == 0) return SQLITE_OK;
  if (mMissing) {
    /* the message names what is missing now; once broken, p stays refused
    ** until it is reconnected, as its options may not have been read */
    char *zNew = ledger_shadow_message(p->zName, mMissing);
    if (zNew == 0) return SQLITE_NOMEM;
    sqlite3_free(p->zBroken);
    p->zBroken = zNew;
    p->bAltered = 0;
  }
  *pzErr = sqlite3_mprintf("%s: %s", zFunc, p->zBroken);
  return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
}

/*
** Read what a connected ledger keeps in its file: which shadow tables
** exist, and the format, identity and options in <name>_meta (aOpt holds
** the options CREATE's arguments gave until then). A ledger missing a
** shadow table stays connected (so DROP TABLE works) but refuses every
** operation. Returns SQLITE_OK or an error with *pzErr.
*/
int ledger_read_file(IdemLedger *p, char **pzErr) {
  int rc, mMissing = 0;
  rc = ledger_shadow_missing(p->db, p->zDb, p->zName, &mMissing);
  if (rc) return rc;
  if (mMissing & 2) {
    p->zId[0] = 0; /* no identity: no guard can name it */
  } else {
    rc = ledger_read_meta(p->db, p->zDb, p->zName, p->aOpt, p->zId, &p->iFormat, pzErr);
    if (rc) return rc;
  }
  sqlite3_free(p->zBroken);
  p->zBroken = 0;
  p->bAltered = 0;
  if (mMissing) {
    p->zBroken = ledger_shadow_message(p->zName, mMissing);
    if (p->zBroken == 0) return SQLITE_NOMEM;
  }
  p->bUnread = 0;
  return SQLITE_OK;
}

/*
** A ledger connected inside a transaction that held no lock on its schema
** reads its file at its first use (ledger_read_file), not in xConnect: a
** read there would open a read transaction inside the caller's deferred
** BEGIN, and SQLite does not upgrade a read transaction to a write
** through the busy handler, so the statement's own write (an INSERT's, or
** a function's first write) would fail at once under contention instead
** of waiting for busy_timeout. At the first use the lock is there: the
** statement took it (xFilter, xUpdate, xRename, xDestroy run after its
** OP_Transaction), or the function took the write lock first
** (idem_ledger_resolve). Returns SQLITE_OK or an error with *pzErr.
*/
int ledger_ready(IdemLedger *p, char **pzErr) {
  return p->bUnread ? ledger_read_file(p, pzErr) : SQLITE_OK;
}

/* ------------------------------------------------------------------ */
/* What a ledger shows to the files outside the ledger                 */
/* ------------------------------------------------------------------ */

sqlite3 *ledger_db(const IdemLedger *p) { return p->db; }
const char *ledger_schema(const IdemLedger *p) { return p->zDb; }
const char *ledger_name(const IdemLedger *p) { return p->zName; }
const char *ledger_identity(const IdemLedger *p) { return p->zId; }
sqlite3_int64 ledger_option(const IdemLedger *p, int iOpt) { return p->aOpt[iOpt]; }

/* ------------------------------------------------------------------ */
/* What idem_health reads (ledger_health.c)                            */
/* ------------------------------------------------------------------ */

/* *peState (LEDGER_TRIGGER_*) of trigger zName in p's schema, whose text
** should be zSql (NULL: out of memory, SQLITE_NOMEM). */
static int trigger_state(const IdemLedger *p, const char *zName, const char *zSql, int *peState) {
  sqlite3_stmt *pS = 0;
  int rc;
  char *zQ;
  *peState = LEDGER_TRIGGER_MISSING;
  if (zName == 0 || zSql == 0) return SQLITE_NOMEM;
  zQ = sqlite3_mprintf("SELECT sql FROM \"%w\".sqlite_schema WHERE type='trigger' AND name=%Q",
                       p->zDb, zName);
  rc = zQ ? sqlite3_prepare_v2(p->db, zQ, -1, &pS, 0) : SQLITE_NOMEM;
  sqlite3_free(zQ);
  if (rc) return rc;
  if (sqlite3_step(pS) == SQLITE_ROW) {
    const char *z = (const char *)sqlite3_column_text(pS, 0);
    *peState = z && strcmp(z, zSql) == 0 ? LEDGER_TRIGGER_OK : LEDGER_TRIGGER_ALTERED;
  }
  return sqlite3_finalize(pS);
}

int storage_own_trigger(const IdemLedger *p, int i, char **pzName, int *peState) {
  int n, rc;
  const OwnTrigger *a = own_triggers(p->iFormat, &n);
  char *zSql;
  *pzName = 0;
  if (i >= n) return SQLITE_OK;
  *pzName = trigger_name(&a[i], p->zName);
  zSql = trigger_sql(&a[i], p->zName, (int)p->aOpt[IDEM_OPT_SINGLE]);
  rc = trigger_state(p, *pzName, zSql, peState);
  sqlite3_free(zSql);
  return rc;
}

int storage_own_table(const IdemLedger *p, int iTable, char **pzName, int *peState) {
  sqlite3_stmt *pS = 0;
  char *zSql = 0, *zQ = 0;
  int rc = SQLITE_NOMEM;
  *peState = LEDGER_TRIGGER_MISSING;
  *pzName = sqlite3_mprintf("%s_%s", p->zName, ledger_shadow_suffix[iTable]);
  /* the schema keeps the text as written but for the schema's name, and
  ** a rename of the ledger (xRename) writes the new name as it is here */
  if (*pzName) zSql = table_sql(iTable, 0, *pzName);
  if (zSql) {
    zQ = sqlite3_mprintf("SELECT sql FROM \"%w\".sqlite_schema WHERE type='table' AND name=%Q",
                         p->zDb, *pzName);
  }
  if (zQ) rc = sqlite3_prepare_v2(p->db, zQ, -1, &pS, 0);
  if (rc == SQLITE_OK && sqlite3_step(pS) == SQLITE_ROW) {
    const char *z = (const char *)sqlite3_column_text(pS, 0);
    *peState = z && strcmp(z, zSql) == 0 ? LEDGER_TRIGGER_OK : LEDGER_TRIGGER_ALTERED;
  }
  if (rc == SQLITE_OK) rc = sqlite3_finalize(pS);
  sqlite3_free(zSql);
  sqlite3_free(zQ);
  return rc;
}

int storage_altered_table(const IdemLedger *p, char **pzName) {
  sqlite3_stmt *pS = 0;
  char *azName[LEDGER_N_TABLE] = {0}, *zQ = 0;
  int i, rc = SQLITE_NOMEM, nTable = ledger_format_tables(p->iFormat);
  *pzName = 0;
  for (i = 0; i < LEDGER_N_TABLE; i++) {
    azName[i] = sqlite3_mprintf("%s_%s", p->zName, ledger_shadow_suffix[i]);
  }
  if (azName[0] && azName[1] && azName[2] && azName[3] && azName[4]) {
    /* one read of the schema for them all (storage_own_table reads one);
    ** format 4 has no targets table: its name stands for the members' */
    zQ = sqlite3_mprintf(
        "SELECT name, sql FROM \"%w\".sqlite_schema WHERE type='table'"
        " AND name IN (%Q,%Q,%Q,%Q,%Q)",
        p->zDb, azName[0], azName[1], azName[2], azName[3], azName[nTable - 1]);
  }
  if (zQ) rc = sqlite3_prepare_v2(p->db, zQ, -1, &pS, 0);
  while (rc == SQLITE_OK && *pzName == 0 && sqlite3_step(pS) == SQLITE_ROW) {
    const char *zName = (const char *)sqlite3_column_text(pS, 0);
    const char *z = (const char *)sqlite3_column_text(pS, 1);
    for (i = 0; i < nTable; i++) {
      if (zName && strcmp(zName, azName[i]) == 0) break;
    }
    if (i < nTable) {
      char *zSql = table_sql(i, 0, azName[i]);
      if (zSql == 0) {
        rc = SQLITE_NOMEM;
      } else if (z == 0 || strcmp(z, zSql) != 0) {
        *pzName = azName[i]; /* handed over */
        azName[i] = 0;
      }
      sqlite3_free(zSql);
    }
  }
  if (rc == SQLITE_OK) rc = sqlite3_finalize(pS);
  else sqlite3_finalize(pS);
  for (i = 0; i < LEDGER_N_TABLE; i++) sqlite3_free(azName[i]);
  sqlite3_free(zQ);
  return rc;
}

int storage_guard_triggers(const IdemLedger *p, sqlite3_int64 gid, const char *zBase,
                           const char *zKeyCol, const char *zTenCol, const char *zTokCol,
                           char **azName, int *aState, char **pzTable) {
  int k, rc;
  for (k = 0; k < IDEM_GUARD_N_TRIGGER; k++) {
    azName[k] = 0;
    aState[k] = LEDGER_TRIGGER_MISSING;
  }
  rc = ledger_guard_table(p->db, p->zDb, p->zName, zBase, pzTable);
  for (k = 0; rc == SQLITE_OK && k < IDEM_GUARD_N_TRIGGER; k++) {
    /* the text idem_guard writes for the table as it is named now */
    char *zSql = ledger_guard_trigger_sql(k, 0, p->zName, p->zId, gid, zBase,
                                          *pzTable ? *pzTable : zBase, zKeyCol, zTenCol, zTokCol);
    azName[k] = sqlite3_mprintf(GUARD_TRIGGER_FMT, zBase, p->zName, ledger_guard_kind[k]);
    rc = trigger_state(p, azName[k], zSql, &aState[k]);
    sqlite3_free(zSql);
  }
  return rc;
}

int storage_health_scan(const IdemLedger *p, int iScan, sqlite3_stmt **ppS) {
  static const char *const azScan[] = {
      /* HEALTH_SCAN_COUNTS */
      "SELECT tool, status, count(*) FROM \"%w\".\"%w_rows\" GROUP BY tool, status",
      /* HEALTH_SCAN_OPEN: through the partial index of open rows */
      "SELECT id, tenant, \"key\", tool, effect, status, attempt, lease_until, created_at"
      " FROM \"%w\".\"%w_rows\" WHERE " OPEN_WHERE,
      /* HEALTH_SCAN_GUARDS */
      "SELECT id, tbl, key_column, tenant_column, token_column FROM \"%w\".\"%w_guards\""
      " ORDER BY id",
      /* HEALTH_SCAN_TARGETS */
      "SELECT count(*), count(allowed_by) FROM \"%w\".\"%w_targets\"",
  };
  char *zSql = sqlite3_mprintf(azScan[iScan], p->zDb, p->zName);
  int rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, ppS, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  return rc;
}

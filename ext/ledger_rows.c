/*
** ledger_rows.c: the ledger's rows, members, targets and guards as the
** extension reads and writes them: the statuses a row holds (one table),
** the table of prepared statements (made
** on first use; a statement that does not prepare on an altered shadow
** table makes the ledger refused), loading a row into a LedgerRow, the
** named operations every other file goes through, the one-writer bracket
** around the extension's own writes (own_begin: an own write never
** commits, and calls no function an application can register over), the
** claim's savepoint, the durability reads (synchronous, and its lowering
** for a settle), and the write lock taken first. It calls
** ledger_config.c and ledger_schema.c.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <stdlib.h>
#include <string.h>

#define IDEM_STR_(x) #x

#define IDEM_STR(x) IDEM_STR_(x)

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

/* The statuses, once (idem_internal.h): in the order the docs list them. */
static const struct {
  const char *z;
  int eEff;
  unsigned f;
} aStatus[] = {
    {"succeeded", EFF_SUCCEEDED, STATUS_TERMINAL | STATUS_SETTLE | STATUS_RESOLVE},
    {"failed", EFF_FAILED, STATUS_TERMINAL | STATUS_SETTLE | STATUS_RESOLVE},
    {"released", EFF_RELEASED, STATUS_TERMINAL | STATUS_SETTLE | STATUS_RESOLVE},
    {"unknown", EFF_UNKNOWN, STATUS_OPEN | STATUS_SETTLE},
    {"claimed", EFF_CLAIMED, STATUS_OPEN},
};

#define N_STATUS (int)(sizeof(aStatus) / sizeof(aStatus[0]))

unsigned ledger_status(const char *z, int *peEff) {
  int i;
  if (peEff) *peEff = 0;
  for (i = 0; z && i < N_STATUS; i++) {
    if (strcmp(z, aStatus[i].z) == 0) {
      if (peEff) *peEff = aStatus[i].eEff;
      return aStatus[i].f;
    }
  }
  return 0;
}

char *ledger_status_list(unsigned mask) {
  sqlite3_str *pStr = sqlite3_str_new(0);
  int i, n = 0, nAll = 0;
  for (i = 0; i < N_STATUS; i++) nAll += (aStatus[i].f & mask) != 0;
  for (i = 0; i < N_STATUS; i++) {
    if ((aStatus[i].f & mask) == 0) continue;
    n++;
    sqlite3_str_appendf(pStr, "%s%s", n == 1 ? "" : n == nAll ? " or " : ", ", aStatus[i].z);
  }
  return sqlite3_str_finish(pStr);
}

const char *ledger_status_name(int eEff) {
  int i;
  if (eEff == EFF_EXPIRED) eEff = EFF_CLAIMED; /* a passed lease is still a claim */
  for (i = 0; i < N_STATUS; i++) {
    if (aStatus[i].eEff == eEff) return aStatus[i].z;
  }
  return "released";
}

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
    "DELETE FROM \"%w\".\"%w_rows\" WHERE " SQL_TERMINAL("status") " AND updated_at<?1",
    /* ST_DELETE */
    "DELETE FROM \"%w\".\"%w_rows\" WHERE id=?1 AND " SQL_TERMINAL("status"),
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
    " (SELECT count(*) FROM \"%w\".\"%w_rows\" WHERE " SQL_OPEN("status") ")",
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
    "SELECT id, " SQL_TERMINAL("status") " AND updated_at<?2,"
    " created_at>=?2 FROM \"%w\".\"%w_rows\" WHERE id>?1 ORDER BY id LIMIT " IDEM_STR(
        RETENTION_SCAN),
    /* ST_RET_DELETE: the same test again at the delete, so a row changed
    ** meanwhile stays. (OR chains rather than IN lists: no ephemeral table
    ** per run.) */
    "DELETE FROM \"%w\".\"%w_rows\" WHERE id=?1"
    " AND " SQL_TERMINAL("status") " AND updated_at<?2",
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
    " AND (" SQL_OPEN("r.status") " OR (r.status='succeeded' AND r.updated_at>?4))",
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
      rc = schema_altered_refusal(p, rc, zSql); /* a shadow table altered? */
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
  if (rc && zSql) rc = schema_altered_refusal(p, rc, zSql);
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
  /* the refusal, when an altered table is why (schema_altered_refusal) */
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

/*
** synchronous, read once: the level of the ledger's schema (0 OFF to 3
** EXTRA; 0 for a memory or temp database, where nothing is synced; -1 when
** it cannot be read), for both the answer ("durable", ledger_durable) and
** the decision to lower it for a settle (storage_sync_lower).
**
** Every run of a PRAGMA statement prepares it again (SQLite marks them
** run-once), about 8,000 instructions. Within one write transaction the
** level read by its first claim is kept: the transaction's claims are made
** durable (or not) by the same commit. The transaction is told by the
** pager's data version, which every commit changes, and a claim or settle
** that starts outside a write transaction forgets the level
** (ledger_durable_forget), as does every change of it here (sync_set), so
** one read in an earlier transaction, before a PRAGMA synchronous changed
** it, is never reused.
*/
static int sync_level(IdemLedger *p, int *pRc) {
  sqlite3_stmt *pS = 0;
  int iLevel = -1, rc;
  unsigned int uVersion = 0;
  const char *zFile = sqlite3_db_filename(p->db, p->zDb);
  if (zFile == 0 || zFile[0] == 0) return 0; /* memory or temp database */
  sqlite3_file_control(p->db, p->zDb, SQLITE_FCNTL_DATA_VERSION, &uVersion);
  if (p->iDurable >= 0 && p->uDurableVersion == uVersion &&
      sqlite3_txn_state(p->db, p->zDb) == SQLITE_TXN_WRITE) {
    return p->iDurable;
  }
  rc = ledger_stmt(p, ST_SYNCHRONOUS, &pS);
  if (rc == SQLITE_OK) {
    if (sqlite3_step(pS) == SQLITE_ROW) iLevel = sqlite3_column_int(pS, 0);
    rc = sqlite3_reset(pS);
    if (rc != SQLITE_OK) iLevel = -1;
  }
  if (pRc) *pRc = rc;
  p->iDurable = iLevel;
  p->uDurableVersion = uVersion;
  return iLevel;
}

/* synchronous >= FULL on a file: a power loss keeps the claim */
int ledger_durable(IdemLedger *p) { return sync_level(p, 0) >= 2; }

void ledger_durable_forget(IdemLedger *p) {
  if (sqlite3_txn_state(p->db, p->zDb) != SQLITE_TXN_WRITE) p->iDurable = -1;
}

/* PRAGMA synchronous takes effect when it is prepared (SQLite sets the
** pager's flags while it compiles it), so each change is a fresh one; the
** level kept by sync_level is forgotten */
static int sync_set(IdemLedger *p, const char *zLevel) {
  char *zSql = sqlite3_mprintf("PRAGMA \"%w\".synchronous=%s", p->zDb, zLevel);
  int rc = zSql ? sqlite3_exec(p->db, zSql, 0, 0, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  p->iDurable = -1;
  return rc;
}

int storage_sync_lower(IdemLedger *p, int *pbLowered, int *pbSynced) {
  sqlite3_stmt *pS = 0;
  int rc = SQLITE_OK, iLevel, bLower = 0;
  char *zSql;
  *pbLowered = *pbSynced = 0;
  /* a file at exactly FULL (EXTRA is a choice this does not second-guess)
  ** in WAL mode. A level that cannot be read is not reported synced (as
  ** ledger_durable), and is not lowered */
  iLevel = sync_level(p, &rc);
  *pbSynced = iLevel >= 2;
  if (iLevel != 2) return (rc & 0xff) == SQLITE_NOMEM ? SQLITE_NOMEM : SQLITE_OK;
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

/*
** Every own trigger fires WHEN NOT idem_own_write(), which is true only
** between own_begin and own_end, while one of these statements is stepped
** on this connection (ledger.c registers it: innocuous, not deterministic).
** A write that changed rows while idem_own_write() was not called was
** answered by another function of that name, registered over ours: the
** connection is marked (bForged) and every later operation refused
** (storage_own_refused), since plain SQL could write the ledger through it.
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

/* Run one own write as the extension: prepared statement pS stepped to its
** end (ledger_step_done), or SQL text zSql (sqlite3_malloc'd, freed) run by
** ledger_exec_sql; its changes and rowid kept as it ends. */
static int own_run(IdemLedger *p, sqlite3_stmt *pS, char *zSql) {
  OwnWrite w;
  int rc, bSave;
  rc = own_save_begin(p, &bSave);
  if (rc) {
    if (pS) sqlite3_reset(pS);
    sqlite3_free(zSql);
    return rc;
  }
  own_begin(p, &w);
  rc = pS ? ledger_step_done(pS) : ledger_exec_sql(p->db, zSql, 0);
  p->nOwnChanges = sqlite3_changes(p->db);
  p->iOwnRowid = sqlite3_last_insert_rowid(p->db);
  own_end(p, &w);
  return own_save_end(p, bSave, rc);
}

static int own_step_done(IdemLedger *p, sqlite3_stmt *pS) { return own_run(p, pS, 0); }

static int own_exec_free(IdemLedger *p, char *zSql) { return own_run(p, 0, zSql); }

int storage_own_changes(const IdemLedger *p) { return p->nOwnChanges; }

sqlite3_int64 storage_own_rowid(const IdemLedger *p) { return p->iOwnRowid; }

/*
** A function registered over idem_own_write() on this connection expires
** every prepared statement of it (SQLite does so for any function it
** registers), which the probe sees: then the function is asked once, and
** when the extension's count of calls does not move, it is not the
** extension's. So the replacement is found before the next own write, not
** after one (a write that changes rows without asking is also found, by
** own_end).
*/
static int own_write_verify(IdemLedger *p) {
  sqlite3_stmt *pS = 0;
  unsigned nAsked = p->pCalls->nAsked;
  int rc = sqlite3_prepare_v2(p->db, "SELECT idem_own_write()", -1, &pS, 0);
  if (rc == SQLITE_OK) {
    (void)sqlite3_step(pS);
    rc = sqlite3_finalize(pS);
  } else if ((rc & 0xff) != SQLITE_NOMEM) {
    rc = SQLITE_OK; /* no function of that name at all: the extension's is gone */
  }
  if (rc == SQLITE_OK && p->pCalls->nAsked == nAsked) p->pCalls->bForged = 1;
  return rc;
}

int storage_own_refused(IdemLedger *p, const char *zFunc, char **pzErr) {
  if (!p->pCalls->bForged) {
    int n = 0, rc = storage_probe(p, &n);
    if (rc) return rc;
    if (n != p->nOwnProbe || !p->bOwnProbed) {
      rc = own_write_verify(p);
      if (rc) return rc;
      p->nOwnProbe = n;
      p->bOwnProbed = 1;
    }
  }
  if (!p->pCalls->bForged) return SQLITE_OK;
  *pzErr = sqlite3_mprintf(
      "%s: the function idem_own_write() on this connection is not the extension's (another was "
      "registered over it, which would let plain SQL write the ledger's tables); every ledger "
      "operation on this connection is refused",
      zFunc);
  return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
}

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
    int bOpen = (ledger_status(zSt, 0) & STATUS_OPEN) != 0, bBetter;
    if (!*pbFound) {
      bBetter = 1;
    } else {
      int bOpenR = (ledger_status(r->zStatus, 0) & STATUS_OPEN) != 0;
      sqlite3_int64 u = sqlite3_column_int64(pS, RC_UPDATED), id = sqlite3_column_int64(pS, RC_ID);
      bBetter = bOpen != bOpenR ? bOpen : u != r->updatedAt ? u > r->updatedAt : id > r->id;
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
    rc = ledger_exec_sql(
        p->db,
        sqlite3_mprintf("DROP TRIGGER IF EXISTS \"%w\".\"%w_guards_delete\"", p->zDb, p->zName), 0);
    zSql = sqlite3_mprintf("SELECT NULL WHERE 0");
  } else {
    /* rows written under a claim that is still open are its members */
    zSql = sqlite3_mprintf(
        "SELECT r.\"key\" FROM \"%w\".\"%w_members\" AS m JOIN \"%w\".\"%w_rows\" AS r"
        " ON r.id=m.claim WHERE m.guard=%lld AND " SQL_OPEN("r.status") " LIMIT 1",
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

/*
** Take the write lock of p's schema first, through the busy handler, when
** the current transaction holds no lock on it yet: inside the caller's
** BEGIN (deferred), inside a savepoint the caller opened, or inside an
** INSERT INTO the ledger. Every ledger operation reads before it writes
** (the trigger check reads the schema version; a local claim reads the
** guarded tables' marks; a settle reads its row), and a read would open a
** read transaction that SQLite does not upgrade to a write through the
** busy handler: under contention the call would fail at once with
** "database is locked" instead of waiting for busy_timeout. The statement
** writes nothing. Outside a transaction (a bare SELECT in autocommit) each
** statement is its own transaction and the callers do not call it.
**
** When the transaction read the schema before this call (a SELECT of the
** application's in the same deferred BEGIN), the lock is tried at once:
** SQLite cannot wait for it, and the error (SQLITE_BUSY, *pzErr) says to
** begin with BEGIN IMMEDIATE. A ledger whose rows table is gone takes no
** lock here (SQLITE_OK): the operation's own checks say what is missing.
** Other errors come with *pzErr ("<zFunc>: ...") when there is a message.
*/
int ledger_write_first(IdemLedger *p, const char *zFunc, char **pzErr) {
  int eTxn = sqlite3_txn_state(p->db, p->zDb), rc;
  if (eTxn == SQLITE_TXN_WRITE) return SQLITE_OK;
  rc = storage_write_lock(p);
  if (rc == SQLITE_OK) return SQLITE_OK;
  if (eTxn == SQLITE_TXN_READ && (rc & 0xff) == SQLITE_BUSY) {
    *pzErr = sqlite3_mprintf(
        "%s: database is locked, and this transaction cannot wait for it: it read database %s "
        "before this call, and SQLite does not upgrade a read transaction to a write through "
        "the busy handler; begin it with BEGIN IMMEDIATE",
        zFunc, p->zDb);
  } else if ((rc & 0xff) != SQLITE_NOMEM) {
    *pzErr = idem_db_error(p->db, zFunc, rc);
  }
  return *pzErr || (rc & 0xff) == SQLITE_NOMEM ? rc : SQLITE_NOMEM;
}

int storage_schema_version(IdemLedger *p, int *pV) {
  sqlite3_stmt *pS = 0;
  int rc = ledger_stmt(p, ST_SCHEMA_VERSION, &pS);
  if (rc) return rc;
  *pV = 0;
  if (sqlite3_step(pS) == SQLITE_ROW) *pV = sqlite3_column_int(pS, 0);
  return sqlite3_reset(pS);
}

sqlite3_stmt *storage_lookup_stmt(const IdemLedger *p) { return p->aStmt[ST_GET]; }

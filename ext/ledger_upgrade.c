/*
** ledger_upgrade.c: idem_upgrade, frozen code for files of earlier
** formats: format 1, 2 or 3 to 5 (members from the old files' rows, the
** rows table without its marks column, format 1's rows converted), format
** 4 to 5 (the targets table), and the repair of a format-5 ledger's own
** and guard triggers. In one savepoint (savepoint.c) that outlives its
** own schema changes.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <stdlib.h>
#include <string.h>

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
        rc = ledger_exec_sql(p->db, zIns, 0);
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
    rc = ledger_exec_sql(
        p->db,
        sqlite3_mprintf("UPDATE \"%w\".\"%w_members\" SET claim=-claim WHERE claim<0", p->zDb,
                        p->zName),
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
  int rc = ledger_exec_sql(
      p->db,
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
  rc = iFrom < 3 ? schema_create_members(p->db, p->zDb, p->zName, 0) : SQLITE_OK;
  if (rc == SQLITE_OK) rc = schema_drop_triggers(p->db, p->zDb, p->zName, iFrom);
  if (rc == SQLITE_OK && iFrom < 3) {
    zNew = sqlite3_mprintf("%s_rows", p->zName);
    rc = zNew ? upgrade_members(p, zNew, pnMember, pzErr) : SQLITE_NOMEM;
    sqlite3_free(zNew);
    zNew = 0;
  }
  /* the guards' triggers first: format 3's member trigger names the rows
  ** table, which the rebuild below drops and renames */
  if (rc == SQLITE_OK) rc = ledger_guards_rebuild(p->db, p->zDb, p->zName, p->zName, p->zId, &n);
  if (rc == SQLITE_OK) {
    /* format 1: the rows converted; formats 2 and 3: the same rows (not
    ** format 2's marks); in a table without the grammar CHECKs */
    zNew = sqlite3_mprintf("%s_rows_format4", p->zName);
    rc = zNew ? ledger_exec_sql(p->db, schema_table_sql(LEDGER_TABLE_ROWS, p->zDb, zNew), 0)
              : SQLITE_NOMEM;
    if (rc == SQLITE_OK) {
      rc = iFrom == 1 ? upgrade_copy_rows(p, zNew, pnRow) : upgrade_same_rows(p, zNew, pnRow);
    }
    if (rc == SQLITE_OK) {
      /* the savepoint's hold would make the DROPs fail */
      idem_save_pause(pSave);
      rc = ledger_exec_sql(p->db,
                           sqlite3_mprintf("DROP TABLE \"%w\".\"%w_rows\";"
                                           "DROP INDEX IF EXISTS \"%w\".\"%w_rows_key\";",
                                           p->zDb, p->zName, p->zDb, p->zName),
                           0);
      if (rc == SQLITE_OK) rc = idem_save_hold(pSave, p->zDb);
    }
  }
  if (rc == SQLITE_OK) {
    rc = ledger_exec_sql(p->db,
                         sqlite3_mprintf("ALTER TABLE \"%w\".\"%w\" RENAME TO \"%w_rows\";"
                                         "UPDATE \"%w\".\"%w_meta\" SET v=%d WHERE k='format';",
                                         p->zDb, zNew, p->zName, p->zDb, p->zName, LEDGER_FORMAT),
                         0);
  }
  if (rc == SQLITE_OK) rc = schema_create_indexes(p->db, p->zDb, p->zName, p->zId, bSingle, 0);
  if (rc == SQLITE_OK) rc = schema_create_targets(p->db, p->zDb, p->zName, p->zId, 0);
  if (rc == SQLITE_OK)
    rc = schema_create_triggers(p->db, p->zDb, p->zName, bSingle, LEDGER_FORMAT, 0, 0);
  *pnTrig = schema_own_count(LEDGER_FORMAT) + n;
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
  rc = schema_drop_triggers(p->db, p->zDb, p->zName, 4);
  if (rc == SQLITE_OK) rc = schema_create_targets(p->db, p->zDb, p->zName, p->zId, 0);
  if (rc == SQLITE_OK) {
    rc = ledger_exec_sql(p->db,
                         sqlite3_mprintf("UPDATE \"%w\".\"%w_meta\" SET v=%d WHERE k='format'",
                                         p->zDb, p->zName, LEDGER_FORMAT),
                         0);
  }
  if (rc == SQLITE_OK) {
    rc = schema_create_triggers(p->db, p->zDb, p->zName, (int)p->aOpt[IDEM_OPT_SINGLE],
                                LEDGER_FORMAT, 0, 0);
  }
  if (rc == SQLITE_OK && t->zWhy)
    rc = ledger_guards_rebuild(p->db, p->zDb, p->zName, p->zName, p->zId, &n);
  *pnTrig = n;
  for (i = 0; i < schema_own_count(LEDGER_FORMAT); i++) {
    *pnTrig += i >= schema_own_count(4) || (t->mOwn & (1u << i)) == 0;
  }
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
  rc = schema_triggers_scan(p, iFrom, LEDGER_FORMAT_WORKS(iFrom), &t);
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
    rc = schema_create_triggers(p->db, p->zDb, p->zName, (int)p->aOpt[IDEM_OPT_SINGLE],
                                LEDGER_FORMAT, t.mOwn, 0);
    for (i = 0; i < schema_own_count(LEDGER_FORMAT); i++) nCreated += (t.mOwn & (1u << i)) == 0;
    if (rc == SQLITE_OK && t.zWhy) {
      rc = ledger_guards_rebuild(p->db, p->zDb, p->zName, p->zName, p->zId, &n);
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

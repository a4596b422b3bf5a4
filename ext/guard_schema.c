/*
** guard_schema.c: the guards' triggers as DDL: their names
** (<base>_idem_<L>_<kind>, GUARD_TRIGGER_* in idem_internal.h), their
** text (the insert trigger calls idem_guard_check, the member trigger
** idem_guard_member, the update trigger refuses a change of the key), and
** making, dropping and remaking them. guard.c's functions and the ledger's
** schema, rename and upgrade use it; it calls ledger_config.c only.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <stdlib.h>
#include <string.h>

/* The guard trigger names end in _idem_<ledger>_<kind>; the kind's index
** (ledger_guard_kind) when zTrig is one of p's, else -1; *pnBase
** the length of the base before it. */
int ledger_guard_trigger_kind(const IdemLedger *p, const char *zTrig, size_t *pnBase) {
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
    rc = ledger_exec_sql(db,
                         ledger_guard_trigger_sql(k, zDb, zLedger, zLedgerId, gid, zBase, zTable,
                                                  zKeyCol, zTenCol, zTokCol),
                         pzErr);
  }
  return rc;
}

int ledger_guard_drop(sqlite3 *db, const char *zDb, const char *zLedger, const char *zBase) {
  int k, rc = SQLITE_OK;
  for (k = 0; rc == SQLITE_OK && k < IDEM_GUARD_N_TRIGGER; k++) {
    rc = ledger_exec_sql(
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

/*
** Make every guard's triggers again: those named after ledger zOld are
** dropped, the three of format 4 made under ledger zNew (the guards are
** read from zNew_guards). A guard whose table is gone is left. *pn counts
** the triggers created.
*/
int ledger_guards_rebuild(sqlite3 *db, const char *zDb, const char *zOld, const char *zNew,
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

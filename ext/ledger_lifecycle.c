/*
** ledger_lifecycle.c: a ledger whose shadow tables and CREATE VIRTUAL
** TABLE row part ways, or whose shadow tables were altered by hand.
**
**   CREATE VIRTUAL TABLE L USING idempotency[(options)]  -- adopts L_rows,
**       L_meta and L_guards when all three exist already
**
** The sqlite3 shell's .clone copies the shadow tables but not the CREATE
** VIRTUAL TABLE row, and so does any copy made table by table: the ledger
** is orphaned, and creating it again used to fail because L_rows exists.
** CREATE VIRTUAL TABLE now adopts existing shadow tables instead of making
** new ones, when all three exist and L_meta passes the connect checks
** (format, identity, every option in range). The adopted ledger keeps its
** rows, its identity (so the guards' triggers, which name it, keep
** working) and its stored options; an option given to CREATE must equal
** the stored one, else CREATE fails and nothing changes. Some but not all
** shadow tables present is an error naming what is missing.
**
** A connected ledger missing a shadow table (dropped by hand, or a partial
** copy) is "broken": it connects, so that DROP TABLE can remove it, but
** every operation fails with a message naming the missing table. DROP
** TABLE keeps the rule of a healthy ledger (refused while the rows table
** that is left holds a claimed or unknown row, or the guards table that
** is left lists a guard) and drops whatever shadow tables remain.
**
** A shadow table altered by hand so that the ledger's statements no longer
** prepare on it (a column dropped or renamed) makes the ledger refused the
** same way, naming the table and the remedy, from the first operation
** after the schema changed (ledger_check_triggers compares the tables'
** text with what the ledger writes, in one read of the schema, and
** prepares the statements only when one differs) or from a statement that
** fails to prepare (ledger_stmt). idem_upgrade refuses it too: it cannot
** make the table again without losing its rows. A table with a column
** added keeps working (idem_health names it altered). The schema change
** that restores the table reconnects the ledger, which ends the refusal.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <string.h>

int ledger_lifecycle_adopt(sqlite3 *db, int argc, const char *const *argv, sqlite3_int64 *aVal,
                           char *zId, int *piFormat, int *pbAdopted, char **pzErr) {
  const char *zDb = argv[1], *zName = argv[2];
  sqlite3_int64 aStored[IDEM_N_OPT];
  int mMissing = 0, rc, i;
  *pbAdopted = 0;
  rc = ledger_shadow_missing(db, zDb, zName, &mMissing);
  if (rc) return rc;
  if (mMissing == LEDGER_SHADOW_ALL) return SQLITE_OK; /* a new ledger */
  if (mMissing) {
    /* some exist: adopting them, or writing over them, would lose something */
    sqlite3_str *s = sqlite3_str_new(0);
    int nLeft;
    sqlite3_str_appendf(s, "idempotency: cannot create ledger %s: its shadow", zName);
    nLeft = ledger_shadow_list(s, zName, LEDGER_SHADOW_ALL & ~mMissing);
    sqlite3_str_appendall(s, nLeft > 1 ? " exist but" : " exists but");
    sqlite3_str_appendall(
        s, ledger_shadow_list(s, zName, mMissing) > 1 ? " are missing" : " is missing");
    sqlite3_str_appendall(s,
                          "; restore what is missing from a backup, or drop what is left to "
                          "start an empty ledger");
    *pzErr = sqlite3_str_finish(s);
    return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  for (i = 0; i < IDEM_N_OPT; i++) aStored[i] = ledger_options[i].iDefault;
  rc = ledger_read_meta(db, zDb, zName, aStored, zId, piFormat, pzErr);
  if (rc) return rc;
  for (i = 3; i < argc; i++) {
    int j = ledger_option_index(argv[i], 0, 0);
    if (j >= 0 && j < IDEM_N_OPT && aVal[j] != aStored[j]) {
      *pzErr = sqlite3_mprintf(
          "idempotency: ledger %s would adopt its existing shadow tables, made with %s=%lld, "
          "but CREATE gives %s=%lld; give the stored value or omit the option",
          zName, ledger_options[j].zName, aStored[j], ledger_options[j].zName, aVal[j]);
      return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
    }
  }
  memcpy(aVal, aStored, sizeof(aStored));
  *pbAdopted = 1;
  return SQLITE_OK;
}

int ledger_lifecycle_held_count(IdemLedger *p, sqlite3_int64 *pn) {
  sqlite3_stmt *pS = 0;
  int mMissing = 0, rc;
  char *zSql;
  *pn = 0;
  rc = ledger_shadow_missing(p->db, p->zDb, p->zName, &mMissing);
  if (rc) return rc;
  if (mMissing == 0) return storage_count_held(p, pn);
  /* a broken ledger: count in what is left */
  {
    sqlite3_str *s = sqlite3_str_new(0);
    sqlite3_str_appendall(s, "SELECT 0");
    if ((mMissing & 4) == 0) {
      sqlite3_str_appendf(s, "+(SELECT count(*) FROM \"%w\".\"%w_%s\")", p->zDb, p->zName,
                          ledger_shadow_suffix[LEDGER_TABLE_GUARDS]);
    }
    if ((mMissing & 1) == 0) {
      sqlite3_str_appendf(s,
                          "+(SELECT count(*) FROM \"%w\".\"%w_%s\""
                          " WHERE " SQL_OPEN("status") ")",
                          p->zDb, p->zName, ledger_shadow_suffix[LEDGER_TABLE_ROWS]);
    }
    zSql = sqlite3_str_finish(s);
  }
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_prepare_v2(p->db, zSql, -1, &pS, 0);
  sqlite3_free(zSql);
  if (rc) return rc;
  if (sqlite3_step(pS) == SQLITE_ROW) *pn = sqlite3_column_int64(pS, 0);
  return sqlite3_finalize(pS);
}

int ledger_lifecycle_broken_why(IdemLedger *p, int rc, char **pzWhy) {
  int mMissing = 0;
  if (p->zBroken == 0) {
    /* an error reading the rows: a shadow table dropped since the last
    ** check would explain it */
    if (rc == SQLITE_OK || (rc & 0xff) == SQLITE_NOMEM) return rc;
    if (ledger_shadow_missing(p->db, p->zDb, p->zName, &mMissing) || mMissing == 0) return rc;
    p->zBroken = ledger_shadow_message(p->zName, mMissing);
    if (p->zBroken == 0) return SQLITE_NOMEM;
  }
  *pzWhy = sqlite3_mprintf("%s", p->zBroken);
  return *pzWhy ? SQLITE_OK : SQLITE_NOMEM;
}

int ledger_lifecycle_tables(IdemLedger *p, const char *zFunc, char **pzErr) {
  char *zTable = 0;
  int rc;
  if (p->zBroken && p->bAltered) {
    *pzErr = sqlite3_mprintf("%s: %s", zFunc, p->zBroken); /* found already */
    return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  if (p->zBroken || !LEDGER_FORMAT_WORKS(p->iFormat)) return SQLITE_OK;
  rc = storage_altered_table(p, &zTable);
  /* altered: a column added leaves every statement preparing, a column
  ** dropped or renamed does not (schema_altered_refusal) */
  if (rc == SQLITE_OK && zTable) rc = storage_prepare_all(p, zFunc, pzErr);
  sqlite3_free(zTable);
  return rc;
}

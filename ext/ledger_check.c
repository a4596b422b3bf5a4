/*
** ledger_check.c: the check every ledger operation makes before it reads
** or writes: the connection's idem_own_write() is the extension's, the
** ledger's shadow tables are there and as the extension made them, and
** the triggers on them and on its guarded tables are exactly its own
** (checked again only when a schema version changes; after a claim's read
** pass, temp's version only, ledger_check_after_read).
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <stdlib.h>
#include <string.h>

/*
** Fail when the triggers on the shadow tables and the guarded tables are
** not exactly the ledger's own (by name and stored SQL): a foreign
** trigger could suppress or rewrite a claim, a missing one leaves a gap.
** Checked again only when a schema version changes. Returns SQLITE_OK, or
** an error with *pzErr set.
*/
int ledger_check_triggers(IdemLedger *p, const char *zFunc, char **pzErr) {
  int rc, v1 = 0, v2 = 0;
  TriggerScan t;
  memset(&t, 0, sizeof(t));
  rc = storage_own_refused(p, zFunc, pzErr);
  if (rc) return rc;
  rc = storage_schema_version(p, &v1);
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
    for (iTable = LEDGER_TABLE_MEMBERS;
         rc == SQLITE_OK && p->zForeign == 0 && iTable < ledger_format_tables(p->iFormat);
         iTable++) {
      char *zTable = sqlite3_mprintf("%s_%s", p->zName, ledger_shadow_suffix[iTable]);
      rc = zTable ? SQLITE_OK : SQLITE_NOMEM;
      if (rc == SQLITE_OK && sqlite3_table_column_metadata(p->db, p->zDb, zTable, "claim", 0, 0, 0,
                                                           0, 0) != SQLITE_OK) {
        p->zForeign = sqlite3_mprintf(
            "ledger %s is missing its table %s; restore it from a backup, or drop the ledger",
            p->zName, zTable);
        rc = p->zForeign ? SQLITE_ERROR : SQLITE_NOMEM;
      }
      sqlite3_free(zTable);
    }
    if (rc == SQLITE_OK) rc = schema_triggers_scan(p, p->iFormat, 0, &t);
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
    p->pGetChecked = storage_lookup_stmt(p);
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

int ledger_check_after_read(IdemLedger *p, const char *zFunc, char **pzErr) {
  sqlite3_stmt *pG = storage_lookup_stmt(p);
  int rc, v2 = 0;
  rc = storage_own_refused(p, zFunc, pzErr);
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

/*
** savepoint.c: the savepoint under which idem_guard, idem_unguard and
** idem_upgrade write, and its undo under allocation failure.
**
** Every command of the savepoint is prepared before it is opened: once an
** allocation has failed inside a function, SQLite prepares nothing more on
** the connection until the calling statement ends (its out-of-memory state
** is cleared only then), so an undo left to be prepared at the end could
** not run. A prepared statement still runs, and reports SQLITE_NOMEM even
** when it did its work.
**
** On failure the writes are undone and the savepoint is gone: outside a
** transaction by ROLLBACK. Inside the caller's transaction by ROLLBACK TO
** and RELEASE, except after an allocation failure, which rolls the whole
** transaction back (as SQLite does for a statement it cannot undo alone;
** the caller sees it in sqlite3_get_autocommit): a ROLLBACK TO of a
** transaction that changed the schema expires every prepared statement,
** the RELEASE with them, and preparing it again needs the memory that ran
** out.
**
** A schema change can expire every prepared statement before the undo
** runs, the savepoint's own commands with them: CREATE INDEX does, and so
** does every reload of a schema that holds a virtual table (each ALTER
** TABLE, and each DDL statement whose reload failed for want of memory).
** A writer that changes a ledger's tables holds the savepoint
** (idem_save_hold): a statement that has started is not stopped by expiry,
** and SQLite rolls the whole transaction back when a reading statement is
** ended in its out-of-memory state. A started statement makes a DROP
** TABLE or DROP INDEX fail, so the hold is paused around them
** (idem_save_pause, then idem_save_hold again). docs/design.md, "Decisions
** taken where the contract was silent".
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#include "idem_internal.h"

#include <string.h>

#define SAVE_SAVEPOINT 0
#define SAVE_RELEASE 1
#define SAVE_ROLLBACK_TO 2
#define SAVE_ROLLBACK 3

/* Step savepoint command pS once; SQLITE_OK when it is done. */
static int save_step(sqlite3_stmt *pS) {
  int rc = sqlite3_step(pS);
  sqlite3_reset(pS);
  return rc == SQLITE_DONE ? SQLITE_OK : rc == SQLITE_ROW ? SQLITE_MISUSE : rc;
}

int idem_save_begin(IdemSave *s, sqlite3 *db, const char *zName) {
  static const char *const azCmd[4] = {"SAVEPOINT %s", "RELEASE %s", "ROLLBACK TO %s",
                                       "ROLLBACK%.0s"};
  int i, rc = SQLITE_OK;
  memset(s, 0, sizeof(*s));
  s->db = db;
  s->bOwn = sqlite3_get_autocommit(db);
  for (i = 0; rc == SQLITE_OK && i < 4; i++) {
    char *zSql = sqlite3_mprintf(azCmd[i], zName);
    rc = zSql ? sqlite3_prepare_v2(db, zSql, -1, &s->apCmd[i], 0) : SQLITE_NOMEM;
    sqlite3_free(zSql);
  }
  if (rc == SQLITE_OK) rc = save_step(s->apCmd[SAVE_SAVEPOINT]);
  /* open when it reports success, or when it left autocommit (it did its
  ** work, and then the out-of-memory state made it report SQLITE_NOMEM) */
  s->bOpen = rc == SQLITE_OK || (s->bOwn && !sqlite3_get_autocommit(db));
  return rc;
}

int idem_save_hold(IdemSave *s, const char *zDb) {
  int rc = SQLITE_OK;
  if (s->pHold == 0) {
    /* a reading statement that opens no cursor: no later write trips it */
    char *zSql = sqlite3_mprintf("PRAGMA \"%w\".schema_version", zDb);
    rc = zSql ? sqlite3_prepare_v2(s->db, zSql, -1, &s->pHold, 0) : SQLITE_NOMEM;
    sqlite3_free(zSql);
  }
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(s->pHold);
    rc = rc == SQLITE_ROW ? SQLITE_OK : rc == SQLITE_DONE ? SQLITE_MISUSE : sqlite3_reset(s->pHold);
  }
  return rc;
}

void idem_save_pause(IdemSave *s) {
  if (s->pHold) sqlite3_reset(s->pHold);
}

int idem_save_end(IdemSave *s, int rc) {
  int i;
  if (s->bOpen && rc == SQLITE_OK) {
    rc = save_step(s->apCmd[SAVE_RELEASE]);
    /* released, or the release's commit failed and rolled back */
    if (rc == SQLITE_OK || (s->bOwn && sqlite3_get_autocommit(s->db))) s->bOpen = 0;
  }
  if (s->pHold) {
    /* started and ended in the out-of-memory state, it rolls the
    ** transaction back */
    sqlite3_finalize(s->pHold);
    s->pHold = 0;
    if (sqlite3_get_autocommit(s->db)) {
      s->bOpen = 0;
      if (rc == SQLITE_OK && !s->bOwn) rc = SQLITE_NOMEM; /* the caller's transaction went */
    }
  }
  if (s->bOpen) {
    int rcU = SQLITE_NOMEM;
    if (!s->bOwn && rc != SQLITE_NOMEM) {
      rcU = save_step(s->apCmd[SAVE_ROLLBACK_TO]);
      if (rcU == SQLITE_OK) rcU = save_step(s->apCmd[SAVE_RELEASE]);
    }
    if (s->bOwn || rcU == SQLITE_NOMEM) (void)save_step(s->apCmd[SAVE_ROLLBACK]);
  }
  for (i = 0; i < 4; i++) sqlite3_finalize(s->apCmd[i]);
  return rc;
}

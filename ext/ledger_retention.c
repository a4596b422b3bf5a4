/*
** ledger_retention.c: retention_seconds, the ledger option that purges old
** outcomes as claims arrive, so no scheduled idem_purge is needed.
**
**   CREATE VIRTUAL TABLE L USING idempotency(retention_seconds=N)
**
** N = 0 (the default) keeps every row. With N > 0, every admitted claim
** (idem_claim or INSERT INTO L) then looks at a bounded batch of rows and
** deletes those that are succeeded, failed or released and whose
** updated_at is older than N seconds: exactly what idem_purge(L, N)
** deletes, a few rows at a time. A claimed or unknown row is never
** deleted (the rows table's delete trigger refuses it as well).
**
** Finding old rows without an index of their own: the rows table's
** INTEGER PRIMARY KEY grows with each new key (a new row takes the largest
** id + 1), so id order is creation order and the oldest rows come first.
** Each step reads at most RETENTION_SCAN rows in id order from a cursor
** kept in memory per connection, deletes the eligible ones, and moves the
** cursor past what it read. It goes back to the start when it reaches the
** end of the table or a row created less than N seconds ago (every later
** row is younger still, so none of them can be due). A claim therefore
** reads at most RETENTION_SCAN rows through the table's own b-tree and
** deletes at most as many; rows it must skip (claimed, unknown, or updated
** lately) are passed over and seen again on the next round. No index is
** added, so a claim or a settle writes nothing more than before.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

/* Rows read (and at most deleted) per admitted claim. */
#define RETENTION_SCAN 16

/* ?1 the cursor, ?2 the cutoff (Unix ms): each row's id, whether it is
** due, and whether it was created after the cutoff. */
static const char zScanSql[] =
    "SELECT id, (status='succeeded' OR status='failed' OR status='released') AND updated_at<?2,"
    " created_at>=?2 FROM \"%w\".\"%w_rows\" WHERE id>?1 ORDER BY id LIMIT %d";

/* The same test again at the delete, so a row changed meanwhile stays.
** (OR chains rather than IN lists: no ephemeral table per run.) */
static const char zDeleteSql[] =
    "DELETE FROM \"%w\".\"%w_rows\" WHERE id=?1"
    " AND (status='succeeded' OR status='failed' OR status='released') AND updated_at<?2";

void ledger_retention_finalize(IdemLedger *p) {
  sqlite3_finalize(p->pRetScan);
  sqlite3_finalize(p->pRetDelete);
  p->pRetScan = p->pRetDelete = 0;
}

static int retention_prepare(IdemLedger *p) {
  char *zSql;
  int rc = SQLITE_OK;
  if (p->pRetScan == 0) {
    zSql = sqlite3_mprintf(zScanSql, p->zDb, p->zName, RETENTION_SCAN);
    if (zSql == 0) return SQLITE_NOMEM;
    rc = sqlite3_prepare_v3(p->db, zSql, -1, SQLITE_PREPARE_PERSISTENT, &p->pRetScan, 0);
    sqlite3_free(zSql);
    if (rc) return rc;
  }
  if (p->pRetDelete == 0) {
    zSql = sqlite3_mprintf(zDeleteSql, p->zDb, p->zName);
    if (zSql == 0) return SQLITE_NOMEM;
    rc = sqlite3_prepare_v3(p->db, zSql, -1, SQLITE_PREPARE_PERSISTENT, &p->pRetDelete, 0);
    sqlite3_free(zSql);
  }
  return rc;
}

int ledger_retention_step(IdemLedger *p, const char *zFunc, char **pzErr) {
  sqlite3_int64 aDue[RETENTION_SCAN], iLast = p->iRetCursor, cutoff;
  int nDue = 0, nRead = 0, bWrap = 0, rc, i;
  if (p->aOpt[IDEM_OPT_RETENTION] <= 0) return SQLITE_OK;
  cutoff = ledger_now(p) - p->aOpt[IDEM_OPT_RETENTION] * 1000;
  rc = retention_prepare(p);
  if (rc) return rc;

  /* read the batch first: no statement of ours is stepping while we delete */
  sqlite3_bind_int64(p->pRetScan, 1, p->iRetCursor);
  sqlite3_bind_int64(p->pRetScan, 2, cutoff);
  while ((rc = sqlite3_step(p->pRetScan)) == SQLITE_ROW) {
    nRead++;
    if (sqlite3_column_int(p->pRetScan, 2)) {
      bWrap = 1; /* this row and every later one are younger than the cutoff */
      break;
    }
    iLast = sqlite3_column_int64(p->pRetScan, 0);
    if (sqlite3_column_int(p->pRetScan, 1)) aDue[nDue++] = iLast;
  }
  if (rc == SQLITE_DONE && nRead < RETENTION_SCAN) bWrap = 1; /* the end of the table */
  if (rc == SQLITE_ROW || rc == SQLITE_DONE) rc = SQLITE_OK;
  else rc = sqlite3_reset(p->pRetScan);
  sqlite3_reset(p->pRetScan);
  if (rc) return rc;
  p->iRetCursor = bWrap ? 0 : iLast;

  for (i = 0; rc == SQLITE_OK && i < nDue; i++) {
    sqlite3_bind_int64(p->pRetDelete, 1, aDue[i]);
    sqlite3_bind_int64(p->pRetDelete, 2, cutoff);
    rc = ledger_step_done(p->pRetDelete);
  }
  if (rc && rc != SQLITE_NOMEM) *pzErr = idem_db_error(p->db, zFunc, rc);
  return rc;
}

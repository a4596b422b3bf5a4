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
** id + 1), so id order is the order the rows were made in, and, while the
** clock does not go back, the order of created_at: the oldest rows come
** first. A row made after the clock went back carries an older created_at
** than rows before it; it is then reached later than it could be, never
** deleted early (the delete checks each row's updated_at itself).
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

int ledger_retention_step(IdemLedger *p, const char *zFunc, char **pzErr) {
  sqlite3_int64 aDue[RETENTION_SCAN], iLast = p->iRetCursor, cutoff;
  sqlite3_stmt *pScan = 0, *pDel = 0;
  int nDue = 0, nRead = 0, bWrap = 0, rc, i;
  if (p->aOpt[IDEM_OPT_RETENTION] <= 0) return SQLITE_OK;
  cutoff = ledger_now(p) - p->aOpt[IDEM_OPT_RETENTION] * 1000;
  rc = ledger_stmt(p, ST_RET_SCAN, &pScan);
  if (rc == SQLITE_OK) rc = ledger_stmt(p, ST_RET_DELETE, &pDel);
  if (rc) return rc;

  /* read the batch first: no statement of ours is stepping while we delete */
  sqlite3_bind_int64(pScan, 1, p->iRetCursor);
  sqlite3_bind_int64(pScan, 2, cutoff);
  while ((rc = sqlite3_step(pScan)) == SQLITE_ROW) {
    nRead++;
    if (sqlite3_column_int(pScan, 2)) {
      bWrap = 1; /* this row and every later one are younger than the cutoff */
      break;
    }
    iLast = sqlite3_column_int64(pScan, 0);
    if (sqlite3_column_int(pScan, 1)) aDue[nDue++] = iLast;
  }
  if (rc == SQLITE_DONE && nRead < RETENTION_SCAN) bWrap = 1; /* the end of the table */
  if (rc == SQLITE_ROW || rc == SQLITE_DONE) rc = SQLITE_OK;
  else rc = sqlite3_reset(pScan);
  sqlite3_reset(pScan);
  if (rc) return rc;
  p->iRetCursor = bWrap ? 0 : iLast;

  for (i = 0; rc == SQLITE_OK && i < nDue; i++) {
    sqlite3_bind_int64(pDel, 1, aDue[i]);
    sqlite3_bind_int64(pDel, 2, cutoff);
    rc = ledger_step_done(pDel);
  }
  if (rc && rc != SQLITE_NOMEM) *pzErr = idem_db_error(p->db, zFunc, rc);
  return rc;
}

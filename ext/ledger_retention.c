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
  sqlite3_int64 aDue[RETENTION_SCAN], cutoff;
  int nDue = 0, rc, i;
  if (p->aOpt[IDEM_OPT_RETENTION] <= 0) return SQLITE_OK;
  cutoff = ledger_now(p) - p->aOpt[IDEM_OPT_RETENTION] * 1000;
  /* read the batch first: no statement of ours is stepping while we delete */
  rc = storage_retention_scan(p, p->iRetCursor, cutoff, aDue, &nDue, &p->iRetCursor);
  if (rc) return rc;
  for (i = 0; rc == SQLITE_OK && i < nDue; i++) rc = storage_retention_delete(p, aDue[i], cutoff);
  if (rc && rc != SQLITE_NOMEM) *pzErr = idem_db_error(p->db, zFunc, rc);
  return rc;
}

/*
** ledger_renew.c: lease renewal.
**
**   idem_renew(ledger, token [, seconds])
**
** A holder extends its live claim's lease, and checks, right before it
** sends, that it still holds the claim: a holder that stalled past its
** lease learns it here, before acting, not from a refused settle after it
** has already sent. The new lease_until is max(lease_until, now + seconds)
** (seconds defaults to the ledger's lease_seconds; 0 only checks), so a
** renewal never shortens a lease. The write is fenced by the token like a
** settle: a compare-and-set on the row id and random part the token names,
** status 'claimed' and a lease that has not passed. The rows table's update
** trigger allows exactly this change in plain SQL too (same token and
** attempt, lease live at the statement's clock, never shortened).
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <string.h>

/*
** The seconds argument: an INTEGER in the lease_seconds range of CREATE.
** SQLITE_OK with *pSec set, or SQLITE_CONSTRAINT with *pzErr.
*/
int ledger_renew_seconds(const char *zFunc, sqlite3_value *v, sqlite3_int64 *pSec, char **pzErr) {
  const LedgerOption *o = &ledger_options[IDEM_OPT_LEASE];
  char *zGot;
  if (sqlite3_value_type(v) == SQLITE_INTEGER) {
    *pSec = sqlite3_value_int64(v);
    if (*pSec >= o->iMin && *pSec <= o->iMax) return SQLITE_OK;
  }
  zGot = ledger_arg_got(v);
  if (zGot == 0) return SQLITE_NOMEM;
  *pzErr = sqlite3_mprintf(
      "%s: seconds must be an INTEGER from %lld to %lld (the lease_seconds "
      "range), got %s",
      zFunc, o->iMin, o->iMax, zGot);
  sqlite3_free(zGot);
  return *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
}

/* Why row r (effective status eEff, not EFF_CLAIMED) is not a live claim
** (sqlite3_malloc; NULL on OOM). */
static char *renew_why_not(const LedgerRow *r, int eEff) {
  switch (eEff) {
    case EFF_EXPIRED: return sqlite3_mprintf("its lease expired at %lld", r->leaseUntil);
    case EFF_UNKNOWN:
      if (strcmp(r->zStatus, "unknown") == 0) return sqlite3_mprintf("it was settled unknown");
      return sqlite3_mprintf("its lease expired at %lld and its outcome is unknown", r->leaseUntil);
    default: return sqlite3_mprintf("it is %s", r->zStatus);
  }
}

/*
** Renew the claim that token pToken holds in ledger p by nSec seconds.
** The first statement is the write, so the write lock is taken through the
** busy handler; only when it changed nothing is the row read, to say why.
** SQLITE_OK with *pLease = the new lease_until, or an error with *pzErr.
*/
int ledger_renew(IdemLedger *p, const char *zFunc, sqlite3_value *pToken, sqlite3_int64 nSec,
                 sqlite3_int64 *pLease, char **pzErr) {
  const char *zToken = 0;
  sqlite3_int64 iId = 0, iRnd = 0;
  char *zWhy = 0;
  sqlite3_int64 now = ledger_now(p);
  int rc, bFound = 0, bRenewed = 0, eEff = 0, bSave = 0;
  LedgerRow r;

  memset(&r, 0, sizeof(r));
  rc = ledger_token_arg(zFunc, pToken, &iId, &iRnd, &zToken, pzErr);
  if (rc) return rc;
  if (!sqlite3_get_autocommit(p->db)) {
    rc = ledger_write_first(p, zFunc, pzErr);
    if (rc) goto done;
  }
  rc = ledger_check_triggers(p, zFunc, pzErr);
  if (rc) goto done;
  if (sqlite3_get_autocommit(p->db)) {
    /* the renewal would commit itself: under the savepoint the other
    ** writes use, its commit comes at the release, once the extension's
    ** own write is over (nothing an application hooks into a commit runs
    ** while idem_own_write() is true) */
    rc = storage_savepoint_prepare(p);
    if (rc == SQLITE_OK) rc = storage_savepoint_begin(p);
    if (rc) goto done;
    bSave = 1;
  }
  /* renewed: a lease is never shortened (max), so 0 seconds only checks */
  rc = storage_row_renew(p, iId, iRnd, now + nSec * 1000, now, pLease, &bRenewed);
  if (rc == SQLITE_OK && bRenewed && bSave) {
    rc = storage_savepoint_release(p);
    if (rc == SQLITE_OK) bSave = 0;
  }
  if (rc || bRenewed) goto done;

  /* nothing renewed: say why */
  rc = storage_row_by_token(p, iId, iRnd, &r, &bFound);
  if (rc) goto done;
  if (!bFound) {
    *pzErr = sqlite3_mprintf(
        "%s: no claim of ledger %s holds token \"%s\": it was taken over by a later attempt, "
        "or the token is wrong; do not act on this claim",
        zFunc, p->zName, zToken);
    rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    goto done;
  }
  rc = ledger_effective(p, r.zStatus, r.zEffect, r.leaseUntil, r.id, r.attempt, now, &eEff, 0, 0);
  if (rc) goto done;
  /* a live claim the write did not find: a trigger suppressed the update */
  zWhy = eEff == EFF_CLAIMED ? sqlite3_mprintf("the renewal was suppressed by a trigger")
                             : renew_why_not(&r, eEff);
  if (zWhy == 0) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  *pzErr = sqlite3_mprintf(
      "%s: token \"%s\" no longer holds a live claim of key \"%s\" in ledger %s: %s; do not act "
      "on this claim",
      zFunc, zToken, r.zKey, p->zName, zWhy);
  rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;

done:
  if (bSave) {
    /* the failing statement's message, before the rollback replaces it */
    if (rc && *pzErr == 0 && rc != SQLITE_NOMEM) *pzErr = idem_db_error(p->db, zFunc, rc);
    storage_savepoint_abandon(p, 1);
  }
  sqlite3_free(zWhy);
  ledger_row_free(&r);
  return rc;
}

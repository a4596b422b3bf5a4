/*
** ledger_last.c: what idem_last_claim(ledger) reports.
**
**   idem_last_claim(ledger)
**
** The claims admitted by this connection's last INSERT statement into the
** ledger, every row of it: a multi-row INSERT OR IGNORE that admits some
** rows and skips others keeps the token of each admitted row. The answer
** never names a claim that is not in the database: when asked, each
** remembered claim is looked up by its token, so a claim undone by
** ROLLBACK, ROLLBACK TO or a failed COMMIT (or taken over since) is
** forgotten. "committed" is true only when the claim is known committed:
** it was made outside a transaction, or the question is asked outside one.
**
** A new INSERT statement starts a new list. Rows of one statement reach
** xUpdate one after another with nothing of the connection in between;
** a statement's run counter (SQLITE_STMTSTATUS_RUN, incremented when a run
** starts) tells a new statement, or a new run of the same one, from the
** next row of the same run: at each INSERT row the counters of the busy
** writing statements are read and reset, and any non-zero one means a run
** started since the previous row.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <string.h>

/* One admitted INSERT row. */
struct LedgerLastClaim {
  char zLedgerId[17]; /* the ledger's identity (IdemLedger.zId) */
  sqlite3_int64 id, attempt;
  int bCommitted;      /* made outside a transaction */
  const char *zEffect; /* "local" or "external" (static) */
  char zToken[33];     /* hex */
  char zKey[IDEM_KEY_MAX_CHARS + 1];
  char zTenant[IDEM_KEY_MAX_CHARS + 1];
};

/* Did a writing statement of db start a run since the previous call? The
** run counters are reset, so the next call sees only newer runs. */
static int last_new_statement(sqlite3 *db) {
  sqlite3_stmt *pS = 0;
  int bNew = 0;
  while ((pS = sqlite3_next_stmt(db, pS)) != 0) {
    if (!sqlite3_stmt_busy(pS) || sqlite3_stmt_readonly(pS)) continue;
    if (sqlite3_stmt_status(pS, SQLITE_STMTSTATUS_RUN, 1) != 0) bNew = 1;
  }
  return bNew;
}

static int last_is_of(const LedgerLastClaim *c, const IdemLedger *p) {
  return strcmp(c->zLedgerId, p->zId) == 0;
}

int ledger_last_begin(LedgerLastList *l, IdemLedger *p) {
  if (last_new_statement(p->db)) {
    /* a new statement: forget this ledger's claims, keep the others' */
    int i, n = 0;
    for (i = 0; i < l->n; i++) {
      if (!last_is_of(&l->a[i], p)) l->a[n++] = l->a[i];
    }
    l->n = n;
  }
  if (l->n == l->nAlloc) {
    /* room for this row before anything is written: after the write
    ** nothing may fail, or the claim's token would be lost */
    int nNew = l->nAlloc ? 2 * l->nAlloc : 4;
    LedgerLastClaim *a = sqlite3_realloc64(l->a, (sqlite3_uint64)nNew * sizeof(*a));
    if (a == 0) return SQLITE_NOMEM;
    l->a = a;
    l->nAlloc = nNew;
  }
  return SQLITE_OK;
}

void ledger_last_add(LedgerLastList *l, IdemLedger *p, const char *zKey, const char *zTenant,
                     const char *zToken, sqlite3_int64 id, sqlite3_int64 attempt,
                     const char *zEffect) {
  LedgerLastClaim *c;
  if (l->n >= l->nAlloc) return; /* ledger_last_begin made room */
  c = &l->a[l->n++];
  memcpy(c->zLedgerId, p->zId, sizeof(c->zLedgerId));
  c->id = id;
  c->attempt = attempt;
  c->bCommitted = sqlite3_get_autocommit(p->db);
  c->zEffect = strcmp(zEffect, "local") == 0 ? "local" : "external";
  sqlite3_snprintf(sizeof(c->zToken), c->zToken, "%s", zToken);
  sqlite3_snprintf(sizeof(c->zKey), c->zKey, "%s", zKey);
  sqlite3_snprintf(sizeof(c->zTenant), c->zTenant, "%s", zTenant);
}

void ledger_last_free(LedgerLastList *l) {
  sqlite3_free(l->a);
  l->a = 0;
  l->n = l->nAlloc = 0;
}

/* Does claim c still hold its row (same row id and token)? */
static int last_exists(IdemLedger *p, const LedgerLastClaim *c, int *pbFound) {
  sqlite3_int64 iId = 0, iRnd = 0;
  LedgerRow r;
  int rc;
  *pbFound = 0;
  memset(&r, 0, sizeof(r));
  if (!ledger_token_parse(c->zToken, &iId, &iRnd)) return SQLITE_OK;
  rc = storage_row_by_token(p, iId, iRnd, &r, pbFound);
  ledger_row_free(&r);
  return rc;
}

static void last_member(IdemJson *j, const LedgerLastClaim *c) {
  idem_json_text(j, "key", c->zKey);
  idem_json_text(j, "tenant", c->zTenant);
  idem_json_text(j, "token", c->zToken);
  idem_json_int(j, "attempt", c->attempt);
  idem_json_text(j, "effect", c->zEffect);
}

/*
** The answer of idem_last_claim for ledger p into *pz (sqlite3_malloc), or
** NULL when no remembered claim is still in the database: the last
** admitted row's key, tenant, token, attempt, effect and committed, and
** "claims", every admitted row of that INSERT statement still in the
** database, in order.
*/
int ledger_last_answer(LedgerLastList *l, IdemLedger *p, char **pz) {
  int rc = SQLITE_OK, i, n = 0, bAuto = sqlite3_get_autocommit(p->db), bAll = 1;
  int aKeep[64], *pKeep = aKeep;
  const LedgerLastClaim *pLast = 0;
  IdemJson j;
  *pz = 0;
  if (l->n == 0) return SQLITE_OK;
  if (l->n > (int)(sizeof(aKeep) / sizeof(aKeep[0]))) {
    pKeep = sqlite3_malloc64(sizeof(int) * (sqlite3_uint64)l->n);
    if (pKeep == 0) return SQLITE_NOMEM;
  }
  for (i = 0; rc == SQLITE_OK && i < l->n; i++) {
    pKeep[i] = 0;
    if (last_is_of(&l->a[i], p)) rc = last_exists(p, &l->a[i], &pKeep[i]);
    if (rc == SQLITE_OK && pKeep[i]) {
      n++;
      pLast = &l->a[i];
      if (!pLast->bCommitted) bAll = 0;
    }
  }
  if (rc || n == 0) goto done;
  idem_json_begin(&j);
  last_member(&j, pLast);
  /* known committed: made outside a transaction, or asked outside one */
  idem_json_bool(&j, "committed", bAll || bAuto);
  idem_json_open(&j, "claims", '[');
  for (i = 0; i < l->n; i++) {
    if (!pKeep[i]) continue;
    idem_json_open(&j, 0, '{');
    last_member(&j, &l->a[i]);
    idem_json_close(&j);
  }
  idem_json_close(&j);
  *pz = idem_json_finish(&j, &rc);
done:
  if (pKeep != aKeep) sqlite3_free(pKeep);
  return rc;
}

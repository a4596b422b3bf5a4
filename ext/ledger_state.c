/*
** ledger_state.c: the ledger's state machine. A claim decides admitted,
** replay, in_progress, unknown or mismatch and writes what the decision
** needs; a settle or resolve records an outcome; a guard asks whether a
** key holds a live claim. Every one of them reads a row's status through
** ledger_effective(), the one place the expiry rule is written.
**
** Transitions (docs/ledger.md, "States"): (none) or released -> claimed;
** claimed -> succeeded | failed | released | unknown; unknown ->
** succeeded | failed | released; an expired local claim without guarded
** rows is taken over (claimed -> claimed, a new token), and after
** max_attempts expiries it fails; succeeded and failed are terminal.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <stdlib.h>
#include <string.h>

/* The boundary sentences. UNKNOWN_MSG is the behaviour, not a phrasing. */
#define EXTERNAL_NOTE                                                                \
  "we will not resend this call, but we cannot promise that the target receives it " \
  "once: send the key as its Idempotency-Key and let the target deduplicate"
#define UNKNOWN_MSG                                                         \
  "that request may have reached the target system, the outcome is theirs " \
  "to report, and nothing is retried here"
#define CONFLICT_MSG                                                                 \
  "another call of this tenant already touched this target (held_by says which and " \
  "what became of it); this call was not run"

/* ------------------------------------------------------------------ */
/* Members (recorded by the guards' triggers in <name>_members)         */
/* ------------------------------------------------------------------ */

/*
** The members of claim (id, attempt) of (zTenant, zKey): *pnMember = the
** guarded rows written under it, whatever rowid they got (recorded by the
** guards' member triggers; a row deleted since still was written), and
** *pz (sqlite3_malloc; "[]" when none) the JSON array a settle stores, of
** those that are still there with the claim's key and tenant,
** {"table":..,"rowid":..} by guard then rowid, the table by its current
** name: a replay never lists a row another key wrote on a reused rowid.
*/
static int ledger_members(IdemLedger *p, sqlite3_int64 id, sqlite3_int64 attempt,
                          const char *zTenant, const char *zKey, char **pz, int *pnMember) {
  sqlite3_stmt *pM = 0, *pG = 0, *pRow = 0;
  IdemJson j;
  sqlite3_int64 iGuard = -1;
  char *zTable = 0; /* the current guard's table; NULL: dropped */
  int rc, n = 0;
  *pz = 0;
  *pnMember = 0;
  rc = storage_members_scan(p, id, attempt, &pM, &pG);
  if (rc) return rc;
  p->bTempRead = 0; /* sqlite_schema is read: temp's version is read again */
  idem_json_begin_array(&j);
  while (rc == SQLITE_OK && sqlite3_step(pM) == SQLITE_ROW) {
    sqlite3_int64 g = sqlite3_column_int64(pM, 0);
    n++;
    if (g != iGuard) {
      /* the guard's table by its current name (the guards are in id order),
      ** and the lookup of a row of it with the claim's key and tenant */
      iGuard = g;
      sqlite3_free(zTable);
      zTable = 0;
      sqlite3_finalize(pRow);
      pRow = 0;
      while (rc == SQLITE_OK && sqlite3_step(pG) == SQLITE_ROW) {
        const char *zTbl = (const char *)sqlite3_column_text(pG, 4);
        const char *zKeyCol = (const char *)sqlite3_column_text(pG, 2);
        const char *zTenCol = (const char *)sqlite3_column_text(pG, 3);
        char *zSql;
        if (sqlite3_column_int64(pG, 0) != g) continue;
        if (zTbl == 0 || zKeyCol == 0) break; /* its table was dropped */
        zTable = sqlite3_mprintf("%s", zTbl);
        zSql = zTenCol ? sqlite3_mprintf(
                             "SELECT 1 FROM \"%w\".\"%w\" WHERE rowid=?1 AND \"%w\"=?2"
                             " COLLATE BINARY AND \"%w\"=?3 COLLATE BINARY",
                             p->zDb, zTbl, zKeyCol, zTenCol)
                       : sqlite3_mprintf(
                             "SELECT 1 FROM \"%w\".\"%w\" WHERE rowid=?1 AND \"%w\"=?2"
                             " COLLATE BINARY AND ?3 IS NOT NULL",
                             p->zDb, zTbl, zKeyCol);
        rc = zTable && zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pRow, 0) : SQLITE_NOMEM;
        sqlite3_free(zSql);
        if (rc == SQLITE_OK) {
          sqlite3_bind_text(pRow, 2, zKey, -1, SQLITE_STATIC);
          sqlite3_bind_text(pRow, 3, zTenant, -1, SQLITE_STATIC);
        }
        break;
      }
      if (rc == SQLITE_OK) rc = sqlite3_reset(pG);
      else sqlite3_reset(pG);
    }
    if (rc == SQLITE_OK && zTable && pRow) {
      sqlite3_int64 rid = sqlite3_column_int64(pM, 1);
      int bThere;
      sqlite3_bind_int64(pRow, 1, rid);
      bThere = sqlite3_step(pRow) == SQLITE_ROW;
      rc = sqlite3_reset(pRow);
      if (rc == SQLITE_OK && bThere) {
        idem_json_open(&j, 0, '{');
        idem_json_text(&j, "table", zTable);
        idem_json_int(&j, "rowid", rid);
        idem_json_close(&j);
      }
    }
  }
  if (rc == SQLITE_OK) rc = sqlite3_reset(pM);
  else sqlite3_reset(pM);
  sqlite3_finalize(pRow);
  sqlite3_free(zTable);
  if (rc == SQLITE_OK) {
    *pz = idem_json_finish(&j, &rc);
    if (rc == SQLITE_OK) *pnMember = n;
  } else {
    int rcJ;
    sqlite3_free(idem_json_finish(&j, &rcJ)); /* rc says what went wrong */
  }
  return rc;
}

/* ------------------------------------------------------------------ */
/* Stored args                                                         */
/* ------------------------------------------------------------------ */

/* A sink that compares the canonical form, as it streams, with the text
** it was made from. */
typedef struct SameSink SameSink;
struct SameSink {
  const char *z;
  size_t n, i;
};
static int same_sink(void *pCtx, const char *p, size_t n) {
  SameSink *c = (SameSink *)pCtx;
  if (n > c->n - c->i || memcmp(c->z + c->i, p, n) != 0) return IDEM_JCS_INVALID + 100;
  c->i += n;
  return IDEM_JCS_OK;
}

int ledger_args_check(IdemLedger *p, const char *zFunc, const char *zKey, const char *zArgs,
                      size_t nArgs, char **pzErr) {
  SameSink c;
  IdemJcsError e;
  int rc;
  c.z = zArgs;
  c.n = nArgs;
  c.i = 0;
  rc = idem_jcs_canonicalize_stored(zArgs, nArgs, &idem_sqlite_mem, same_sink, &c, &e);
  if (rc == IDEM_JCS_NOMEM) return SQLITE_NOMEM;
  if (rc == IDEM_JCS_OK && c.i == nArgs) return SQLITE_OK;
  /* the ledger writes only canonical args; CHECKs may have been off
  ** (PRAGMA ignore_check_constraints) for a writer without the extension */
  *pzErr = sqlite3_mprintf(
      "%s: the stored args of key \"%s\" in %s_rows are not canonical JSON; the row was "
      "changed outside the ledger, so nothing is done with it",
      zFunc, zKey, p->zName);
  return *pzErr ? SQLITE_CORRUPT_VTAB : SQLITE_NOMEM;
}

/* ------------------------------------------------------------------ */
/* Effective status                                                    */
/* ------------------------------------------------------------------ */

static int is_local(const char *zEffect) { return zEffect && strcmp(zEffect, "local") == 0; }

int ledger_effective(IdemLedger *p, const char *zStatus, const char *zEffect,
                     sqlite3_int64 leaseUntil, sqlite3_int64 id, sqlite3_int64 attempt,
                     sqlite3_int64 now, int *peEff, char **pzMembers, int *pnMember) {
  *peEff = 0;
  if (pzMembers) *pzMembers = 0;
  if (pnMember) *pnMember = 0;
  (void)ledger_status(zStatus, peEff);
  if (*peEff == 0) return SQLITE_CORRUPT_VTAB; /* the CHECK on status forbids it */
  if (*peEff != EFF_CLAIMED || now < leaseUntil) return SQLITE_OK;
  if (!is_local(zEffect)) {
    /* an external claim whose lease ran out: it may have reached the target */
    *peEff = EFF_UNKNOWN;
  } else {
    /* an expired local claim: rows that landed without a settle make it unknown */
    int n = 0, rc = storage_has_members(p, id, attempt, &n);
    (void)pzMembers; /* built by the settle, which knows the key (ledger_members) */
    if (rc) return rc;
    *peEff = n > 0 ? EFF_UNKNOWN : EFF_EXPIRED;
    if (pnMember) *pnMember = n;
  }
  return SQLITE_OK;
}

/* ------------------------------------------------------------------ */
/* The claim                                                           */
/* ------------------------------------------------------------------ */

static const char *request_diff(const LedgerRow *r, const LedgerReq *q, int *pDiff) {
  *pDiff = 1;
  if (strcmp(r->zConv, q->zConv)) return "conversation";
  if (strcmp(r->zTool, q->zTool)) return "tool";
  if (strcmp(r->zEffect, q->zEffect)) return "effect";
  if ((size_t)r->nArgs != q->args.n || memcmp(r->zArgs, q->args.z, q->args.n)) return "args";
  *pDiff = 0;
  return 0;
}

/*
** Finish answer j into *pz. Stored JSON that failed its check is reported
** as an error naming the ledger, the key and the column: the row was
** changed outside the ledger, and no answer is made from it.
*/
static int answer_finish(IdemJson *j, IdemLedger *p, const char *zFunc, const char *zKey, char **pz,
                         char **pzErr) {
  int rc;
  const char *zBad = j->zBad;
  *pz = idem_json_finish(j, &rc);
  if (rc == SQLITE_CORRUPT && pzErr) {
    *pzErr = sqlite3_mprintf(
        "%s: the stored %s of key \"%s\" in %s_rows is not valid JSON; the row was changed "
        "outside the ledger, so no answer is made from it",
        zFunc, zBad, zKey, p->zName);
    if (*pzErr == 0) rc = SQLITE_NOMEM;
  }
  return rc;
}

/*
** Append "durable" to answer j: whether the write this call makes is kept
** by a power loss once it is committed. bCommits: the call commits it
** itself (autocommit), else the caller's COMMIT does. bSynced: whether
** that commit syncs, when the caller has read synchronous for it
** (storage_sync_lower), or -1: ledger_durable reads it. Under dqlite a
** commit is durable once a Raft quorum holds it, which the extension sees
** only for the caller's COMMIT: outside a transaction the client's path
** decides (docs/replication.md), and "durability" says which.
*/
static void answer_durable(IdemJson *j, IdemLedger *p, int bCommits, int bSynced) {
  if (p->iDqlite < 0) p->iDqlite = ledger_under_dqlite(p->db, p->zDb);
  if (p->iDqlite) {
    idem_json_bool(j, "durable", !bCommits);
    idem_json_text(j, "durability", bCommits ? "unknown" : "raft-quorum");
  } else {
    idem_json_bool(j, "durable", bSynced >= 0 ? bSynced : ledger_durable(p));
  }
}

static int build_admitted(IdemLedger *p, const LedgerReq *q, const char *zToken,
                          sqlite3_int64 attempt, sqlite3_int64 lease, int committed,
                          LedgerDecision *d) {
  IdemJson j;
  d->eDec = DEC_ADMITTED;
  d->attempt = attempt;
  memcpy(d->zToken, zToken, 33);
  idem_json_begin(&j);
  idem_json_literal(&j, "decision", "\"admitted\"");
  idem_json_text(&j, "key", q->zKey);
  idem_json_text(&j, "token", zToken);
  idem_json_int(&j, "attempt", attempt);
  idem_json_text(&j, "effect", q->zEffect);
  idem_json_bool(&j, "committed", committed);
  answer_durable(&j, p, committed, -1);
  idem_json_int(&j, "lease_until", lease);
  /* the constant holds no character that JSON escapes */
  if (strcmp(q->zEffect, "external") == 0) idem_json_literal(&j, "note", "\"" EXTERNAL_NOTE "\"");
  return answer_finish(&j, p, "idem_claim", q->zKey, &d->zJson, 0);
}

/* Replay of a terminal row (succeeded or failed); settled_at is the row's
** updated_at, when its outcome was recorded. */
static int build_replay(IdemLedger *p, const char *zFunc, const LedgerRow *r, int bNoWhy,
                        LedgerDecision *d, char **pzErr) {
  int ok = strcmp(r->zStatus, "succeeded") == 0, rc;
  IdemJson j;
  d->eDec = DEC_REPLAY;
  idem_json_begin(&j);
  idem_json_literal(&j, "decision", "\"replay\"");
  idem_json_bool(&j, "idempotent", 1);
  idem_json_text(&j, "key", r->zKey);
  idem_json_text(&j, "status", r->zStatus);
  idem_json_int(&j, "attempt", r->attempt);
  idem_json_int(&j, "settled_at", r->updatedAt);
  if (r->mNulJson & (ok ? LEDGER_NUL_RESULT : LEDGER_NUL_ERROR)) {
    idem_json_refuse(&j, ok ? "result" : "error");
  }
  idem_json_stored(&j, ok ? "result" : "error", ok ? r->zResult : r->zError, "null", IDEM_JSON_ANY,
                   &p->aSeen[IDEM_JSON_ANY]);
  if (r->mNulJson & LEDGER_NUL_MEMBERS) idem_json_refuse(&j, "members");
  idem_json_stored(&j, "members", r->zMembers, "[]", IDEM_JSON_ARRAY, &p->aSeen[IDEM_JSON_ARRAY]);
  rc = answer_finish(&j, p, zFunc, r->zKey, &d->zJson, pzErr);
  if (rc || bNoWhy) return rc;
  d->zWhy = sqlite3_mprintf("it %s at attempt %lld", ok ? "succeeded" : "failed", r->attempt);
  return d->zWhy ? SQLITE_OK : SQLITE_NOMEM;
}

static int build_simple(IdemLedger *p, const LedgerRow *r, int eDec, const char *zField, int bNoWhy,
                        LedgerDecision *d) {
  IdemJson j;
  int rc;
  d->eDec = eDec;
  idem_json_begin(&j);
  if (eDec == DEC_IN_PROGRESS) {
    idem_json_text(&j, "decision", "in_progress");
    idem_json_text(&j, "key", r->zKey);
    idem_json_int(&j, "attempt", r->attempt);
    idem_json_int(&j, "lease_until", r->leaseUntil);
    /* when the holder last claimed or renewed it: a heartbeat's sign of life */
    idem_json_int(&j, "renewed_at", r->updatedAt);
    if (!bNoWhy) {
      d->zWhy =
          sqlite3_mprintf("it is claimed (attempt %lld) until %lld", r->attempt, r->leaseUntil);
    }
  } else if (eDec == DEC_UNKNOWN) {
    idem_json_text(&j, "decision", "unknown");
    idem_json_text(&j, "key", r->zKey);
    idem_json_int(&j, "attempt", r->attempt);
    idem_json_literal(&j, "message", "\"" UNKNOWN_MSG "\"");
    if (!bNoWhy) d->zWhy = sqlite3_mprintf("its outcome is unknown: " UNKNOWN_MSG);
  } else {
    idem_json_text(&j, "decision", "mismatch");
    idem_json_text(&j, "key", r->zKey);
    idem_json_text(&j, "differs", zField);
    idem_json_text(&j, "message",
                   "this key is bound to another request; nothing was admitted or replayed");
    if (!bNoWhy) {
      d->zWhy = sqlite3_mprintf("it is bound to another request (the %s differs)", zField);
    }
  }
  rc = answer_finish(&j, p, "idem_claim", r->zKey, &d->zJson, 0);
  if (rc == SQLITE_OK && !bNoWhy && d->zWhy == 0) rc = SQLITE_NOMEM;
  return rc;
}

/*
** conflict: target iTarget of q is held by call h (ledger_targets.c). The
** answer names h: key, tool, effective status, attempt, when it last
** changed, its result when it succeeded, and the top-level argument names
** whose values differ from q's. h's stored args are checked first, as a
** mismatch's are: a row changed outside the ledger is not compared.
*/
static int build_conflict(IdemLedger *p, const char *zFunc, const LedgerReq *q, int iTarget,
                          const LedgerRow *h, sqlite3_int64 now, LedgerDecision *d, char **pzErr) {
  IdemJson j;
  int rc, eEff = 0, ok, rcJ;
  rc = ledger_effective(p, h->zStatus, h->zEffect, h->leaseUntil, h->id, h->attempt, now, &eEff, 0,
                        0);
  if (rc == SQLITE_OK) rc = ledger_args_check(p, zFunc, h->zKey, h->zArgs, (size_t)h->nArgs, pzErr);
  if (rc) return rc;
  ok = eEff == EFF_SUCCEEDED;
  d->eDec = DEC_CONFLICT;
  idem_json_begin(&j);
  idem_json_literal(&j, "decision", "\"conflict\"");
  idem_json_text(&j, "key", q->zKey);
  idem_json_text(&j, "target", q->azTarget[iTarget]);
  idem_json_open(&j, "held_by", '{');
  idem_json_text(&j, "key", h->zKey);
  idem_json_text(&j, "tool", h->zTool);
  idem_json_text(&j, "status", ledger_status_name(eEff));
  idem_json_int(&j, "attempt", h->attempt);
  idem_json_int(&j, "updated_at", h->updatedAt);
  if (ok) {
    if (h->mNulJson & LEDGER_NUL_RESULT) idem_json_refuse(&j, "result");
    idem_json_stored(&j, "result", h->zResult, "null", IDEM_JSON_ANY, &p->aSeen[IDEM_JSON_ANY]);
  }
  idem_json_close(&j);
  idem_json_open(&j, "differs", '[');
  rc = ledger_args_differ(&j, q->args.z, q->args.n, h->zArgs, (size_t)h->nArgs);
  idem_json_close(&j);
  idem_json_literal(&j, "message", "\"" CONFLICT_MSG "\"");
  if (rc) {
    sqlite3_free(idem_json_finish(&j, &rcJ));
    return rc;
  }
  rc = answer_finish(&j, p, zFunc, h->zKey, &d->zJson, pzErr);
  if (rc == SQLITE_OK && !q->bNoWhy) {
    d->zWhy = sqlite3_mprintf("its target %s is held by key %s", q->azTarget[iTarget], h->zKey);
    if (d->zWhy == 0) rc = SQLITE_NOMEM;
  }
  return rc;
}

/* Bind the same-row compare-and-set arguments. */

/*
** The fresh-claim INSERT, one statement and atomic on its own. The answer
** is built first with the token's id part 0, and the new row id is written
** into it after the insert, so nothing can fail after the write. When the
** insert is refused because a row holds the key (the insert trigger or a
** unique index), *pzTaken gets the refusal (sqlite3_malloc) and d is
** cleared: the caller reads that row.
*/
static int claim_insert(IdemLedger *p, const LedgerReq *q, sqlite3_int64 now, sqlite3_int64 lease,
                        int bCommitted, LedgerDecision *d, char **pzTaken) {
  LedgerRow r;
  char zToken[33], *zAt;
  int rc;
  *pzTaken = 0;
  memset(&r, 0, sizeof(r));
  sqlite3_randomness(sizeof(r.tokenRnd), &r.tokenRnd);
  ledger_token_hex(0, r.tokenRnd, zToken);
  rc = build_admitted(p, q, zToken, 1, lease, bCommitted, d);
  if (rc) return rc;
  r.zTenant = q->zTenant;
  r.zKey = q->zKey;
  r.zConv = q->zConv;
  r.zTool = q->zTool;
  r.zArgs = q->args.z;
  r.nArgs = q->bArgsTerm ? -1 : (int)q->args.n;
  r.zEffect = q->zEffect;
  r.updatedAt = now;
  r.leaseUntil = lease;
  rc = storage_row_insert(p, &r, pzTaken);
  if (rc || *pzTaken) {
    sqlite3_free(d->zJson);
    memset(d, 0, sizeof(*d));
    return rc;
  }
  if (storage_own_changes(p) != 1) {
    sqlite3_free(d->zJson);
    memset(d, 0, sizeof(*d));
    return SQLITE_INTERNAL; /* an INSERT of one row that ran without error */
  }
  d->id = storage_own_rowid(p);
  ledger_token_hex(d->id, r.tokenRnd, d->zToken);
  zAt = strstr(d->zJson, "\"token\":\"");
  if (zAt) memcpy(zAt + 9, d->zToken, 16);
  return SQLITE_OK;
}

/*
** Decide a claim for request q, writing what the decision needs. bWrite=0
** is the read-only pass: it returns DEC_ADMITTED with zJson NULL when a
** write is needed (bFresh set when no row holds the key), and the caller
** then writes. In the write pass the first statement is the insert, so the
** write lock is taken through the busy handler before anything is read,
** and every result is built before the one write that makes it true, so
** nothing can fail after the write.
*/
/* Read the row that holds q's key into r (*pbFound): under (tenant, key),
** and with single_tenant under the key alone, where another tenant's row
** decides a mismatch (*pbDecided). */
static int claim_find_row(IdemLedger *p, const char *zFunc, const LedgerReq *q, LedgerRow *r,
                          int *pbFound, LedgerDecision *d, int *pbDecided, char **pzErr) {
  int rc = storage_row_find_text(p, q->zTenant, q->zKey, r, pbFound);
  *pbDecided = 0;
  if (rc || *pbFound || !p->aOpt[IDEM_OPT_SINGLE]) return rc;
  /* single_tenant: the key may be held under another tenant */
  rc = storage_row_find_text(p, 0, q->zKey, r, pbFound);
  if (rc || !*pbFound) return rc;
  *pbDecided = 1;
  rc = ledger_args_check(p, zFunc, r->zKey, r->zArgs, (size_t)r->nArgs, pzErr);
  return rc ? rc : build_simple(p, r, DEC_MISMATCH, "tenant", q->bNoWhy, d);
}

/* A poison call: this expiry of claimed row r is its max_attempts-th. The
** answer is a failed replay with the max_attempts error, and (but for an
** INSERT INTO the ledger, bWrite 3, which is refused) the row is settled
** failed with it. */
static int claim_poison(IdemLedger *p, const char *zFunc, const LedgerReq *q, int bWrite,
                        LedgerRow *r, sqlite3_int64 now, LedgerDecision *d, char **pzErr) {
  char zMsg[100];
  char *zErr;
  IdemJson jErr;
  int rc;
  sqlite3_snprintf(sizeof(zMsg), zMsg,
                   "%lld attempts expired without a settle; the call is not retried",
                   r->expirations + 1);
  idem_json_begin(&jErr);
  idem_json_text(&jErr, "reason", "max_attempts");
  idem_json_int(&jErr, "attempts", r->attempt);
  idem_json_text(&jErr, "message", zMsg);
  zErr = idem_json_finish(&jErr, &rc);
  if (rc) return rc;
  /* the row as this settle leaves it (the compare-and-set reads only its
  ** id, status and token, and the status is put back below) */
  r->zStatus = "failed";
  r->zError = zErr;
  r->zMembers = "[]";
  r->updatedAt = now;
  r->mNulJson = 0; /* the row's own error and members are not answered */
  rc = build_replay(p, zFunc, r, q->bNoWhy, d, pzErr);
  r->zStatus = "claimed";
  r->zError = 0;
  if (rc == SQLITE_OK && bWrite != 3) {
    rc = storage_row_settle(p, r, "failed", 0, zErr, -1, "[]", now);
    if (rc == SQLITE_OK) rc = ledger_write_check(p, zFunc, "poison update", pzErr);
  }
  sqlite3_free(zErr);
  return rc;
}

/* Claim row r again (released, or an expired local claim with no rows):
** a new token and attempt; a take-over counts an expiry. */
static int claim_again(IdemLedger *p, const char *zFunc, const LedgerReq *q, const LedgerRow *r,
                       sqlite3_int64 now, sqlite3_int64 lease, int bCommitted, LedgerDecision *d,
                       char **pzErr) {
  sqlite3_int64 rnd = 0;
  char zToken[33];
  int rc;
  sqlite3_randomness(sizeof(rnd), &rnd);
  ledger_token_hex(r->id, rnd, zToken);
  rc = build_admitted(p, q, zToken, r->attempt + 1, lease, bCommitted, d);
  if (rc) return rc;
  /* a take-over counts an expiry; a re-claim after a release does not */
  rc = storage_row_reclaim(p, r, rnd, now, lease, strcmp(r->zStatus, "claimed") == 0);
  if (rc == SQLITE_OK) rc = ledger_write_check(p, zFunc, "re-claim update", pzErr);
  if (rc == SQLITE_OK) d->id = r->id;
  return rc;
}

/*
** The targets of a claim in the write pass, inside the claim's savepoint.
** A new key (bFresh) was inserted just now as d's row (the insert decided
** the key, as without targets); row r is about to be claimed again. When
** one of q's targets is held by another call (ledger_targets_holder), the
** answer is conflict and nothing stays written: the fresh insert is undone
** (back to the savepoint), row r is not touched. Else r is claimed again,
** and q's targets are recorded (an earlier attempt's forgotten).
*/
static int claim_targets(IdemLedger *p, const char *zFunc, const LedgerReq *q, const LedgerRow *r,
                         int bFresh, sqlite3_int64 now, sqlite3_int64 lease, int bCommitted,
                         LedgerDecision *d, char **pzErr) {
  char *azOver[IDEM_TARGETS_MAX] = {0};
  LedgerRow h;
  int rc, iTarget = -1;
  sqlite3_int64 id = bFresh ? d->id : r->id;
  memset(&h, 0, sizeof(h));
  rc = ledger_targets_holder(p, q, id, now, &h, &iTarget, azOver);
  if (rc == SQLITE_OK && iTarget >= 0) {
    if (bFresh) {
      sqlite3_free(d->zJson);
      memset(d, 0, sizeof(*d));
      rc = storage_savepoint_undo(p);
    }
    if (rc == SQLITE_OK) rc = build_conflict(p, zFunc, q, iTarget, &h, now, d, pzErr);
  } else if (rc == SQLITE_OK) {
    if (!bFresh) rc = claim_again(p, zFunc, q, r, now, lease, bCommitted, d, pzErr);
    if (rc == SQLITE_OK) rc = ledger_targets_record(p, q, id, now, azOver, !bFresh);
  }
  ledger_row_free(&h);
  ledger_targets_free(azOver);
  return rc;
}

int ledger_claim_decide(IdemLedger *p, const char *zFunc, const LedgerReq *q, int bWrite,
                        int bCommitted, LedgerDecision *d, char **pzErr) {
  sqlite3_int64 now = ledger_now(p);
  sqlite3_int64 lease = now + p->aOpt[IDEM_OPT_LEASE] * 1000;
  char *zTaken = 0;
  int rc, bFound = 0, bDecided = 0, eEff = 0, bDiff = 0;
  const char *zField;
  LedgerRow r;

  memset(d, 0, sizeof(*d));
  memset(&r, 0, sizeof(r));
  /* 1. the write pass of a new key: the insert is the first statement
  ** (with targets, in the claim's savepoint: they decide next) */
  if (bWrite == 1 || bWrite == 3) {
    rc = claim_insert(p, q, now, lease, bCommitted, d, &zTaken);
    if (rc == SQLITE_OK && zTaken == 0 && q->nTarget) {
      rc = claim_targets(p, zFunc, q, 0, 1, now, lease, bCommitted, d, pzErr);
    }
    if (rc || zTaken == 0) goto done; /* admitted, attempt 1, a conflict, or an error */
  }
  /* 2. the row that holds the key */
  rc = claim_find_row(p, zFunc, q, &r, &bFound, d, &bDecided, pzErr);
  if (rc || bDecided) goto done;
  if (!bFound) {
    if (bWrite) {
      /* the insert was refused, yet no row holds the key */
      *pzErr = sqlite3_mprintf("%s: the ledger's claim insert into %s_rows was refused (%s)", zFunc,
                               p->zName,
                               zTaken      ? zTaken
                               : q->zTaken ? q->zTaken
                                           : "the row it had read is gone");
      rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    } else {
      d->eDec = DEC_ADMITTED; /* needs the write pass */
      d->bFresh = 1;
    }
    goto done;
  }
  /* 3. the same request? (a row whose args are not canonical JSON was
  ** changed outside the ledger: refused, not compared) */
  zField = request_diff(&r, q, &bDiff);
  if (bDiff) {
    rc = ledger_args_check(p, zFunc, r.zKey, r.zArgs, (size_t)r.nArgs, pzErr);
    if (rc == SQLITE_OK) rc = build_simple(p, &r, DEC_MISMATCH, zField, q->bNoWhy, d);
    goto done;
  }
  /* 4. what its effective status decides */
  rc = ledger_effective(p, r.zStatus, r.zEffect, r.leaseUntil, r.id, r.attempt, now, &eEff, 0, 0);
  if (rc) goto done;
  switch (eEff) {
    case EFF_SUCCEEDED:
    case EFF_FAILED: rc = build_replay(p, zFunc, &r, q->bNoWhy, d, pzErr); goto done;
    case EFF_UNKNOWN: rc = build_simple(p, &r, DEC_UNKNOWN, 0, q->bNoWhy, d); goto done;
    case EFF_CLAIMED: rc = build_simple(p, &r, DEC_IN_PROGRESS, 0, q->bNoWhy, d); goto done;
    default: break;
  }
  /* 5. released, or an expired local claim with no rows: claim it again */
  if (!bWrite) {
    d->eDec = DEC_ADMITTED; /* needs the write pass */
  } else if (strcmp(r.zStatus, "claimed") == 0 && r.expirations + 1 >= p->aOpt[IDEM_OPT_ATTEMPTS]) {
    rc = claim_poison(p, zFunc, q, bWrite, &r, now, d, pzErr); /* stop retrying it */
  } else if (q->nTarget || p->iFormat >= 5) {
    /* (an attempt's targets replace the earlier attempt's, none too) */
    rc = claim_targets(p, zFunc, q, &r, 0, now, lease, bCommitted, d, pzErr);
  } else {
    rc = claim_again(p, zFunc, q, &r, now, lease, bCommitted, d, pzErr);
  }

done:
  ledger_row_free(&r);
  sqlite3_free(zTaken);
  if (rc != SQLITE_OK) {
    sqlite3_free(d->zJson);
    sqlite3_free(d->zWhy);
    d->zJson = d->zWhy = 0;
  }
  return rc;
}

void ledger_req_free(LedgerReq *q) {
  idem_buf_free(&q->args);
  sqlite3_free(q->zTaken);
  q->zTaken = 0;
  sqlite3_free(q->pTargetBuf);
  q->pTargetBuf = 0;
  q->nTarget = 0;
}

/*
** max_args_bytes counts the canonical text, the bytes the ledger stores:
** two spellings of one call (whitespace, member order, escapes) are one
** size, so one is never refused while the other is admitted. The input
** itself is bounded by the canonicaliser's cap (IDEM_JCS_MAX_BYTES).
*/
static int args_bytes_check(IdemLedger *p, const char *zFunc, const char *zLabel,
                            const IdemBuf *pCanon, char **pzErr) {
  if ((sqlite3_int64)pCanon->n <= p->aOpt[IDEM_OPT_ARGS_BYTES]) return SQLITE_OK;
  *pzErr = sqlite3_mprintf(
      "%s: %s is %lld bytes in canonical form, over the ledger's max_args_bytes of %lld", zFunc,
      zLabel, (sqlite3_int64)pCanon->n, p->aOpt[IDEM_OPT_ARGS_BYTES]);
  return *pzErr ? SQLITE_TOOBIG : SQLITE_NOMEM;
}

/*
** Validate a request: tenant, conversation, tool, args, effect and the
** optional operation id; fill q (args canonical; key derived unless the
** operation id is given). pEffect NULL means the default (external);
** pOpId NULL means none given (an SQL NULL given is an error, bOpIdNull
** lets the INSERT path treat its NULL key column as not given). On error
** returns the code with *pzErr set.
*/
int ledger_req_parse(IdemLedger *p, const char *zFunc, sqlite3_value *pTenant, sqlite3_value *pConv,
                     sqlite3_value *pTool, sqlite3_value *pArgs, sqlite3_value *pEffect,
                     sqlite3_value *pOpId, LedgerReq *q, char **pzErr) {
  static const char *azLabel[3] = {"tenant", "conversation", "tool"};
  sqlite3_value *apV[3];
  int rc, i;
  memset(q, 0, sizeof(*q));
  q->args.pMem = &idem_sqlite_mem;
  apV[0] = pTenant;
  apV[1] = pConv;
  apV[2] = pTool;
  for (i = 0; i < 3; i++) {
    rc = idem_key_error(zFunc, azLabel[i], apV[i], pzErr);
    if (rc) return rc;
  }
  q->zTenant = (const char *)sqlite3_value_text(pTenant);
  q->zConv = (const char *)sqlite3_value_text(pConv);
  q->zTool = (const char *)sqlite3_value_text(pTool);
  if (pEffect == 0) {
    q->zEffect = "external";
  } else {
    /* the type first: reading a BLOB as text would make it TEXT */
    int bText = sqlite3_value_type(pEffect) == SQLITE_TEXT;
    const char *z = bText ? (const char *)sqlite3_value_text(pEffect) : 0;
    if (bText && z == 0) return SQLITE_NOMEM;
    if (!bText || (strcmp(z, "local") != 0 && strcmp(z, "external") != 0)) {
      char *zQ = bText ? idem_json_string(z) : 0;
      if (bText && zQ == 0) return SQLITE_NOMEM;
      *pzErr = sqlite3_mprintf("%s: effect must be 'local' or 'external', got %s", zFunc,
                               zQ ? zQ : idem_type_name(sqlite3_value_type(pEffect)));
      sqlite3_free(zQ);
      return *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    }
    q->zEffect = strcmp(z, "local") == 0 ? "local" : "external";
  }
  if (pOpId) {
    const char *z;
    rc = idem_key_error(zFunc, "operation_id", pOpId, pzErr);
    if (rc) return rc;
    z = (const char *)sqlite3_value_text(pOpId);
    if (strncmp(z, "idem", 4) == 0 && z[4] >= '0' && z[4] <= '9' && z[5] == '-') {
      *pzErr = sqlite3_mprintf(
          "%s: operation_id \"%s\" looks like a derived key "
          "(idem<digit>-...); omit it to derive the key",
          zFunc, z);
      return *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    }
    sqlite3_snprintf(sizeof(q->zKey), q->zKey, "%s", z);
  }
  rc = idem_canonical_value(zFunc, "args", pArgs, &q->args, 0, 0, 0, pzErr);
  if (rc) return rc;
  rc = args_bytes_check(p, zFunc, "args", &q->args, pzErr);
  if (rc) return rc;
  /* a NUL after the text (not counted): bound with length -1, SQLite marks
  ** the value NUL-terminated, and the rows table's CHECKs and triggers read
  ** it without copying it first (about 2,400 instructions a claim).
  ** Canonical JSON has no NUL of its own (it escapes U+0000). */
  if (idem_buf_sink(&q->args, "", 1) != IDEM_JCS_OK) return SQLITE_NOMEM;
  q->args.n--;
  q->bArgsTerm = memchr(q->args.z, 0, q->args.n) == 0;
  if (pOpId == 0) {
    /* tenant:conversation:tool: (each checked above: at most
    ** IDEM_KEY_MAX_CHARS bytes, no NUL) */
    char zPrefix[3 * (IDEM_KEY_MAX_CHARS + 1) + 1];
    const char *azPart[3];
    size_t nPrefix = 0;
    azPart[0] = q->zTenant;
    azPart[1] = q->zConv;
    azPart[2] = q->zTool;
    for (i = 0; i < 3; i++) {
      size_t nPart = strlen(azPart[i]);
      if (nPart > IDEM_KEY_MAX_CHARS) return SQLITE_INTERNAL; /* the checks above refuse it */
      memcpy(zPrefix + nPrefix, azPart[i], nPart);
      nPrefix += nPart;
      zPrefix[nPrefix++] = ':';
    }
    memcpy(q->zKey, IDEM_KEY_PREFIX, 6);
    idem_digest_bytes(zPrefix, nPrefix, q->args.z, q->args.n, q->zKey + 6);
  }
  return SQLITE_OK;
}

/* ------------------------------------------------------------------ */
/* idem_claim                                                          */
/* ------------------------------------------------------------------ */

/* Is a statement that writes running on db (other than nested ones)? */
static int writer_in_progress(sqlite3 *db) {
  sqlite3_stmt *pS = 0;
  /* outside a transaction a statement that writes holds a write
  ** transaction from its first step (OP_Transaction), so without one no
  ** such statement is in progress (the walk below costs about 2,000
  ** instructions a call) */
  if (sqlite3_get_autocommit(db) && sqlite3_txn_state(db, 0) != SQLITE_TXN_WRITE) return 0;
  while ((pS = sqlite3_next_stmt(db, pS)) != 0) {
    if (sqlite3_stmt_busy(pS) && !sqlite3_stmt_readonly(pS)) return 1;
  }
  return 0;
}

/*
** idem_claim's decision for the parsed request q (triggers already
** checked): a read pass without a write lock in autocommit, then the write
** pass inside a savepoint that any error rolls back. On success d holds
** the answer (the caller frees d->zJson and d->zWhy).
*/
int ledger_claim(IdemLedger *p, const char *zFunc, LedgerReq *q, LedgerDecision *d, char **pzErr) {
  sqlite3 *db = p->db;
  int rc = SQLITE_OK, bAuto = sqlite3_get_autocommit(db), bSave = 0;
  /* with retention_seconds a claim of a new key also purges, so it takes
  ** the savepoint pass: the purge commits, or is undone, with the claim */
  int bOneInsert = p->aOpt[IDEM_OPT_RETENTION] == 0 && q->nTarget == 0;

  memset(d, 0, sizeof(*d));
  ledger_durable_forget(p); /* a claim that starts a write transaction reads synchronous again */
  if (writer_in_progress(db)) {
    *pzErr = sqlite3_mprintf(
        "%s: call it in a statement of its own (SELECT idem_claim(...)); "
        "a statement that writes is in progress",
        zFunc);
    return *pzErr ? SQLITE_MISUSE : SQLITE_NOMEM;
  }
  if (!bAuto && bOneInsert) {
    /* inside the caller's transaction: the INSERT comes first (it takes
    ** the write lock through the busy handler) and, a fresh claim, is the
    ** whole decision: one statement, rolled back on its own if it fails,
    ** so no savepoint. Refused because the key is held, the savepoint
    ** pass below reads the row and decides. (A read pass first would make
    ** a replay in a transaction cheaper, 40,000 instructions instead of
    ** 64,000, and every fresh claim dearer by one more lookup, 7,000: fresh
    ** claims are the common case.) */
    sqlite3_int64 now = ledger_now(p);
    rc = claim_insert(p, q, now, now + p->aOpt[IDEM_OPT_LEASE] * 1000, 0, d, &q->zTaken);
    if (rc || q->zTaken == 0) goto done;
  } else if (bAuto) {
    /* read pass without a write lock: settled, running, unknown and
    ** mismatched keys need no write */
    int bFresh;
    char *zCheck = 0;
    int rcCheck;
    rc = ledger_claim_decide(p, zFunc, q, 0, 0, d, pzErr);
    /* the trigger check, before any answer or write, once the lookup it
    ** relies on has run; its refusal wins over what the read pass found */
    /* a failed lookup proves nothing about the schema (its statement may
    ** have failed to be prepared again after a shadow table was dropped):
    ** the full check then says why */
    rcCheck =
        rc ? ledger_check_triggers(p, zFunc, &zCheck) : ledger_check_after_read(p, zFunc, &zCheck);
    if (rcCheck) {
      sqlite3_free(*pzErr);
      *pzErr = zCheck;
      sqlite3_free(d->zJson);
      sqlite3_free(d->zWhy);
      memset(d, 0, sizeof(*d));
      rc = rcCheck;
    }
    if (rc || d->zJson) goto done;
    bFresh = d->bFresh;
    if (bFresh && bOneInsert) {
      /* no row holds the key: the INSERT alone decides. It runs under the
      ** savepoint the other writes use, so that its commit comes at the
      ** release, once the extension's own write is over (nothing an
      ** application hooks into a commit runs while idem_own_write() is
      ** true). Refused (a claimer came first), the savepoint pass below
      ** decides, in the same savepoint. */
      sqlite3_int64 now = ledger_now(p);
      rc = storage_savepoint_prepare(p);
      if (rc == SQLITE_OK) rc = storage_savepoint_begin(p);
      if (rc) goto done;
      bSave = 1;
      rc = claim_insert(p, q, now, now + p->aOpt[IDEM_OPT_LEASE] * 1000, bAuto, d, &q->zTaken);
      if (rc) goto done;
      if (q->zTaken == 0) {
        rc = storage_savepoint_release(p);
        if (rc == SQLITE_OK) bSave = 0;
        goto done;
      }
    }
  }
  if (!bSave) {
    /* prepared before anything is written, so that undoing cannot fail
    ** for want of memory to prepare it */
    rc = storage_savepoint_prepare(p);
    if (rc) goto done;
    rc = storage_savepoint_begin(p);
    if (rc) goto done;
    bSave = 1;
  }
  /* in a transaction the insert was refused just now: do not repeat it */
  rc = ledger_claim_decide(p, zFunc, q, bAuto || !bOneInsert ? 1 : 2, bAuto, d, pzErr);
  if (rc == SQLITE_OK && d->eDec == DEC_ADMITTED) rc = ledger_retention_step(p, zFunc, pzErr);
  if (rc == SQLITE_OK) {
    rc = storage_savepoint_release(p);
    if (rc == SQLITE_OK) bSave = 0;
  }

done:
  /* the message of the failing statement, before the rollback replaces it */
  if (rc && *pzErr == 0 && rc != SQLITE_NOMEM) *pzErr = idem_db_error(db, zFunc, rc);
  if (bSave) {
    storage_savepoint_abandon(p, bAuto);
  }
  if (rc) {
    sqlite3_free(d->zJson);
    sqlite3_free(d->zWhy);
    d->zJson = d->zWhy = 0;
  }
  return rc;
}

/* ------------------------------------------------------------------ */
/* idem_settle and idem_resolve                                        */
/* ------------------------------------------------------------------ */

/*
** Canonical JSON z[0..n): when it is an object whose member "sent" is
** false, write it to *pOut with that member first (the plain-SQL trigger
** checks the prefix {"sent":false) and return 1; else return 0 (-1 when
** out of memory). The other members keep their canonical order.
*/
static int sent_first(const char *z, size_t n, IdemBuf *pOut) {
  size_t i;
  int pass, bFound = 0;
  if (n < 2 || z[0] != '{') return 0;
  /* pass 0 finds the member, pass 1 writes the others after it */
  for (pass = 0; pass < 2; pass++) {
    for (i = 1; i < n && z[i] == '"';) {
      size_t iEnd = idem_jcs_value_end(z, n, i); /* the end of the key */
      size_t iNext = idem_jcs_value_end(z, n, iEnd + 1);
      int bSent = iEnd - i == 6 && memcmp(z + i, "\"sent\"", 6) == 0;
      if (pass == 0 && bSent) {
        if (iNext - iEnd - 1 != 5 || memcmp(z + iEnd + 1, "false", 5) != 0) return 0;
        bFound = 1;
      } else if (pass == 1 && !bSent) {
        if (idem_buf_sink(pOut, ",", 1) || idem_buf_sink(pOut, z + i, iNext - i)) return -1;
      }
      i = iNext + (iNext < n && z[iNext] == ',');
    }
    if (pass == 0) {
      if (!bFound) return 0;
      if (idem_buf_sink(pOut, "{\"sent\":false", 13)) return -1;
    }
  }
  return idem_buf_sink(pOut, "}", 1) ? -1 : 1;
}

/*
** Record outcome zStatus with detail (canonical, may be NULL) on row r,
** found by token (idem_settle) or by key (idem_resolve, bResolve=1).
** Checks the transition, the release rules and the members, then writes
** with a compare-and-set on the row's status and token. When pbStale is
** given and the write changed no row (another writer changed r since it
** was read), *pbStale is set and nothing is answered (SQLITE_OK, *pzJson
** 0); otherwise that is the "another writer interfered" error. A local
** claim's settle with pbStale given sets it before reading the members,
** which are read under the write lock only. bAuto: the call commits its
** write; bSynced: for an external claim's settle in autocommit, whether
** that commit syncs (storage_sync_lower), for the answer's "durable".
*/
static int outcome_apply(IdemLedger *p, const char *zFunc, LedgerRow *r, const char *zStatus,
                         const IdemBuf *pDetail, int bResolve, int bAuto, int bSynced, int *pbStale,
                         char **pzJson, char **pzErr) {
  sqlite3_int64 now = ledger_now(p);
  const char *zEff; /* effective status */
  char *zMembers = 0;
  IdemBuf sent = {&idem_sqlite_mem, 0, 0, 0, 0}; /* a release's detail, "sent" first */
  const char *zDet = pDetail->z;
  size_t nDet = pDetail->n;
  int rc, nMember = 0, eEff = 0, bLocal = is_local(r->zEffect), bSucceeded;

  *pzJson = 0;
  rc = ledger_args_check(p, zFunc, r->zKey, r->zArgs, (size_t)r->nArgs, pzErr);
  if (rc) goto done;
  rc = ledger_effective(p, r->zStatus, r->zEffect, r->leaseUntil, r->id, r->attempt, now, &eEff,
                        &zMembers, &nMember);
  if (rc) goto done;
  zEff = ledger_status_name(eEff);
  if (bResolve && strcmp(zEff, "unknown") != 0) {
    if (strcmp(zEff, "claimed") == 0) {
      *pzErr = sqlite3_mprintf(
          "%s: key \"%s\" is claimed, not unknown; the claim's holder "
          "settles it with its token",
          zFunc, r->zKey);
    } else {
      *pzErr = sqlite3_mprintf("%s: illegal transition %s -> %s for key \"%s\"", zFunc, zEff,
                               zStatus, r->zKey);
    }
    rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    goto done;
  }
  if (!((strcmp(zEff, "claimed") == 0) ||
        (strcmp(zEff, "unknown") == 0 && strcmp(zStatus, "unknown") != 0))) {
    *pzErr = sqlite3_mprintf("%s: illegal transition %s -> %s for key \"%s\"", zFunc, zEff, zStatus,
                             r->zKey);
    rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    goto done;
  }
  if (bLocal && strcmp(zStatus, "unknown") == 0) {
    *pzErr = sqlite3_mprintf(
        "%s: status unknown is for external claims; the outcome of local "
        "key \"%s\" is known: settle succeeded, failed or released",
        zFunc, r->zKey);
    rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    goto done;
  }
  if (bLocal && pbStale) {
    /* an autocommit settle of a local claim reads its members under the
    ** write lock (ledger_outcome's locked pass): a member another
    ** connection commits between an unlocked read and the write would be
    ** missing from the snapshot, and the compare-and-set on the row's
    ** status and token cannot see it */
    *pbStale = 1;
    goto done;
  }
  if (bLocal && zMembers == 0) {
    rc = ledger_members(p, r->id, r->attempt, r->zTenant, r->zKey, &zMembers, &nMember);
    if (rc) goto done;
  }
  if (strcmp(zStatus, "released") == 0) {
    if (bLocal && nMember > 0) {
      *pzErr = sqlite3_mprintf(
          "%s: cannot release local key \"%s\": its attempt wrote %d "
          "guarded row%s; settle succeeded or failed",
          zFunc, r->zKey, nMember, nMember == 1 ? "" : "s");
      rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
      goto done;
    }
    if (!bLocal) {
      int ok = pDetail->z ? sent_first(pDetail->z, pDetail->n, &sent) : 0;
      if (ok < 0) {
        rc = SQLITE_NOMEM;
        goto done;
      }
      if (!ok) {
        *pzErr = sqlite3_mprintf(
            "%s: releasing external key \"%s\" needs detail "
            "{\"sent\": false}: only a request known never to have been "
            "sent may be retried",
            zFunc, r->zKey);
        rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
        goto done;
      }
      zDet = sent.z;
      nDet = sent.n;
    }
  }
  {
    IdemJson j;
    idem_json_begin(&j);
    idem_json_text(&j, "key", r->zKey);
    idem_json_text(&j, "status", zStatus);
    idem_json_int(&j, "attempt", r->attempt);
    /* a local claim's settle is never lowered: synchronous as it is */
    answer_durable(&j, p, bAuto, bAuto && !bLocal ? bSynced : -1);
    /* the time the write below records as the row's updated_at: a later
    ** replay's settled_at */
    idem_json_int(&j, "settled_at", now);
    /* built just now from the guarded tables, not read back from a row */
    idem_json_literal(&j, "members", zMembers ? zMembers : "[]");
    *pzJson = idem_json_finish(&j, &rc);
  }
  if (*pzJson == 0) goto done;
  bSucceeded = strcmp(zStatus, "succeeded") == 0;
  rc = storage_row_settle(p, r, zStatus, bSucceeded ? zDet : 0, bSucceeded ? 0 : zDet, (int)nDet,
                          zMembers ? zMembers : "[]", now);
  if (rc == SQLITE_OK && pbStale && storage_own_changes(p) == 0) {
    *pbStale = 1;
    sqlite3_free(*pzJson);
    *pzJson = 0;
    goto done;
  }
  if (rc == SQLITE_OK) rc = ledger_write_check(p, zFunc, "outcome update", pzErr);

done:
  sqlite3_free(zMembers);
  idem_buf_free(&sent);
  if (rc) {
    sqlite3_free(*pzJson);
    *pzJson = 0;
  }
  return rc;
}

/*
** The stored form of detail pDetail (TEXT holding JSON) into pBuf:
** canonical structure with every number kept as written (docs/design.md,
** "Stored results and errors": results are not keys, so a 64-bit id is not
** refused).
*/
static int detail_stored_form(const char *zFunc, sqlite3_value *pDetail, IdemBuf *pBuf,
                              char **pzErr) {
  IdemJcsError err;
  const char *z;
  size_t n;
  int rc;
  if (sqlite3_value_type(pDetail) != SQLITE_TEXT) {
    *pzErr = sqlite3_mprintf("%s: detail must be TEXT holding JSON, got %s", zFunc,
                             idem_type_name(sqlite3_value_type(pDetail)));
    return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  z = (const char *)sqlite3_value_text(pDetail);
  if (z == 0) return SQLITE_NOMEM;
  n = (size_t)sqlite3_value_bytes(pDetail);
  rc = idem_jcs_stored_form(z, n, &idem_sqlite_mem, idem_buf_sink, pBuf, &err);
  if (rc == IDEM_JCS_OK) return SQLITE_OK;
  if (rc == IDEM_JCS_NOMEM) return SQLITE_NOMEM;
  *pzErr = sqlite3_mprintf("%s: detail: %s", zFunc, err.msg);
  if (*pzErr == 0) return SQLITE_NOMEM;
  return n > IDEM_JCS_MAX_BYTES ? SQLITE_TOOBIG : SQLITE_ERROR;
}

/* Validate status (one whose STATUS_* bits meet mAllowed) and detail (NULL or JSON, in stored form). */
static int outcome_args(IdemLedger *p, const char *zFunc, sqlite3_value *pStatus, unsigned mAllowed,
                        sqlite3_value *pDetail, IdemBuf *pBuf, char **pzErr) {
  int bText = sqlite3_value_type(pStatus) == SQLITE_TEXT; /* before any conversion */
  const char *z = bText ? (const char *)sqlite3_value_text(pStatus) : 0;
  if (bText && z == 0) return SQLITE_NOMEM;
  if (!bText || (ledger_status(z, 0) & mAllowed) == 0) {
    char *zQ = bText ? idem_json_string(z) : 0;
    char *zList = ledger_status_list(mAllowed);
    if (zList && (!bText || zQ)) {
      *pzErr = sqlite3_mprintf("%s: status must be one of %s; got %s", zFunc, zList,
                               zQ ? zQ : idem_type_name(sqlite3_value_type(pStatus)));
    }
    sqlite3_free(zQ);
    sqlite3_free(zList);
    return *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
  }
  if (sqlite3_value_type(pDetail) == SQLITE_NULL) return SQLITE_OK;
  {
    int rc = detail_stored_form(zFunc, pDetail, pBuf, pzErr);
    if (rc == SQLITE_OK) rc = args_bytes_check(p, zFunc, "detail", pBuf, pzErr);
    return rc;
  }
}

int ledger_outcome(IdemLedger *p, const char *zFunc, sqlite3_value *pToken, sqlite3_value *pTenant,
                   sqlite3_value *pKey, sqlite3_value *pStatus, sqlite3_value *pDetail,
                   char **pzJson, char **pzErr) {
  IdemBuf detail = {&idem_sqlite_mem, 0, 0, 0, 0};
  sqlite3_int64 iId = 0, iRnd = 0;
  int rc, rc2, bFound = 0, bResolve = pToken == 0, bSave = 0, bStale = 0;
  int bLowered = 0; /* synchronous set to NORMAL for this settle */
  int bSynced = 0;  /* its commit syncs (an external claim's, in autocommit) */
  /* in autocommit the read below and the write are two transactions */
  int bAuto = sqlite3_get_autocommit(p->db);
  LedgerRow r;
  memset(&r, 0, sizeof(r));
  *pzJson = 0;
  ledger_durable_forget(p); /* a settle that starts a write transaction reads synchronous again */
  if (bResolve) {
    rc = idem_key_error(zFunc, "tenant", pTenant, pzErr);
    if (rc == SQLITE_OK) rc = idem_key_error(zFunc, "key", pKey, pzErr);
    if (rc == SQLITE_OK)
      rc = outcome_args(p, zFunc, pStatus, STATUS_RESOLVE, pDetail, &detail, pzErr);
  } else {
    rc = ledger_token_arg(zFunc, pToken, &iId, &iRnd, 0, pzErr);
    if (rc == SQLITE_OK)
      rc = outcome_args(p, zFunc, pStatus, STATUS_SETTLE, pDetail, &detail, pzErr);
  }
  if (rc == SQLITE_OK) rc = ledger_check_triggers(p, zFunc, pzErr);
  if (rc) goto done;
again:
  if (bResolve) {
    rc = storage_row_find(p, pTenant, pKey, &r, &bFound);
  } else {
    rc = storage_row_by_token(p, iId, iRnd, &r, &bFound);
  }
  if (rc) goto done;
  if (!bFound && bResolve) {
    *pzErr = sqlite3_mprintf("%s: ledger %s has no key \"%s\" for tenant \"%s\"", zFunc, p->zName,
                             sqlite3_value_text(pKey), sqlite3_value_text(pTenant));
    rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    goto done;
  }
  if (!bFound) {
    *pzErr = sqlite3_mprintf(
        "%s: no claim of ledger %s holds token \"%s\" (a wrong token, or a "
        "claim that was taken over)",
        zFunc, p->zName, sqlite3_value_text(pToken));
    rc = *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    goto done;
  }
  if (bAuto && !is_local(r.zEffect) && !bLowered) {
    /* this call commits the settle of an external claim: it rides on the
    ** next synced commit (docs/design.md, "A settle rides on the next
    ** synced commit") */
    rc = storage_sync_lower(p, &bLowered, &bSynced);
  } else if (bLowered && is_local(r.zEffect)) {
    rc = storage_sync_restore(p, 1); /* the row read again is another claim's */
    bLowered = 0;
  }
  if (rc) goto done;
  rc = outcome_apply(p, zFunc, &r, (const char *)sqlite3_value_text(pStatus), &detail, bResolve,
                     bAuto, bSynced, bAuto && !bSave ? &bStale : 0, pzJson, pzErr);
  if (rc == SQLITE_OK && bStale) {
    /* another writer changed the row between this call's read and its
    ** write: decide again, as if this call had come after it, on the row
    ** read under the write lock (a savepoint whose first statement takes
    ** it, through the busy handler), so that nothing can change it between
    ** that read and the write. Only a write that still changes nothing is
    ** refused as interfered with. The common case reads once; a local
    ** claim's settle always takes this pass, its members read under the
    ** lock. */
    bStale = 0;
    ledger_row_free(&r);
    memset(&r, 0, sizeof(r));
    /* prepared before anything is written, so that undoing cannot fail
    ** for want of memory to prepare it */
    rc = storage_savepoint_prepare(p);
    if (rc == SQLITE_OK) rc = storage_savepoint_begin(p);
    if (rc) goto done;
    bSave = 1;
    rc = ledger_write_first(p, zFunc, pzErr);
    if (rc) goto done;
    goto again;
  }
  if (rc == SQLITE_OK && bSave) {
    rc = storage_savepoint_release(p);
    if (rc == SQLITE_OK) bSave = 0;
  }
done:
  if (bSave) {
    /* the message of the failing statement, before the rollback replaces it */
    if (rc && *pzErr == 0 && (rc & 0xff) != SQLITE_NOMEM) *pzErr = idem_db_error(p->db, zFunc, rc);
    storage_savepoint_abandon(p, 1); /* only taken in autocommit */
  }
  rc2 = storage_sync_restore(p, bLowered);
  if (rc == SQLITE_OK && rc2) {
    rc = rc2;
    *pzErr = idem_db_error(p->db, zFunc, rc);
  }
  if (rc) {
    sqlite3_free(*pzJson);
    *pzJson = 0;
  }
  ledger_row_free(&r);
  idem_buf_free(&detail);
  return rc;
}

/* Does value v (a token column of a guarded row) name row r's claim? */
static int token_names(sqlite3_value *v, const LedgerRow *r) {
  sqlite3_int64 iId = 0, iRnd = 0;
  if (sqlite3_value_type(v) != SQLITE_TEXT) return 0;
  if (!ledger_token_parse((const char *)sqlite3_value_text(v), &iId, &iRnd)) return 0;
  return iId == r->id && iRnd == r->tokenRnd;
}

/*
** For guard.c: does (tenant, key) hold a live claimed claim of ledger p
** (with token pToken when not NULL)? SQLITE_OK with *pzWhy NULL when it
** does; SQLITE_OK with *pzWhy saying why not (sqlite3_malloc) otherwise.
*/
int ledger_live_claim(IdemLedger *p, sqlite3_value *pTenant, sqlite3_value *pKey,
                      sqlite3_value *pToken, char **pzWhy) {
  int rc, bFound = 0, eEff = 0;
  LedgerRow r;
  *pzWhy = 0;
  /* a shadow table is missing: refused, saying so (ledger_lifecycle.c) */
  if (p->zBroken) return ledger_lifecycle_broken_why(p, SQLITE_OK, pzWhy);
  if (!LEDGER_FORMAT_WORKS(p->iFormat)) {
    /* an earlier format's guard triggers record no members */
    *pzWhy = sqlite3_mprintf(
        "ledger %s has format %d, made by an earlier release; upgrade it once with SELECT "
        "idem_upgrade('%q')",
        p->zName, p->iFormat, p->zName);
    return *pzWhy ? SQLITE_OK : SQLITE_NOMEM;
  }
  rc = storage_row_find(
      p, p->aOpt[IDEM_OPT_SINGLE] && sqlite3_value_type(pTenant) == SQLITE_NULL ? 0 : pTenant, pKey,
      &r, &bFound);
  if (rc) return ledger_lifecycle_broken_why(p, rc, pzWhy);
  if (!bFound) {
    *pzWhy = sqlite3_mprintf("there is no claim for it");
  } else if (strcmp(r.zStatus, "claimed") != 0) {
    *pzWhy = sqlite3_mprintf("it is %s", r.zStatus);
  } else if ((rc = ledger_effective(p, r.zStatus, r.zEffect, r.leaseUntil, r.id, r.attempt,
                                    ledger_now(p), &eEff, 0, 0)) != SQLITE_OK) {
    ledger_row_free(&r);
    return rc;
  } else if (eEff != EFF_CLAIMED) {
    *pzWhy = sqlite3_mprintf("its claim's lease has expired");
  } else if (pToken && !token_names(pToken, &r)) {
    *pzWhy = sqlite3_mprintf("the row's token is not the live claim's token (a stale holder?)");
  } else {
    ledger_row_free(&r);
    return SQLITE_OK;
  }
  ledger_row_free(&r);
  return *pzWhy ? SQLITE_OK : SQLITE_NOMEM;
}

/*
** ledger_health.c: a ledger's health, as one JSON object.
**
**   idem_health(ledger)   -- reads only; its wrapper is in ledger.c
**
** What an operator asks of a ledger, answered by the files that hold each
** rule, so that no caller (the operator's command of either package, a
** monitoring query) restates one: the format; whether the ledger refuses
** operations and why (the ledger's own refusal, ledger_check_triggers);
** each of its four tables, each own trigger and each guard's three
** triggers by name, ok, missing or altered against the text the ledger
** writes (ledger_schema.c), an altered table a problem;
** the options; the rows by effective status (ledger_effective) and tool;
** the live and expired claims and the oldest unknown row. The rows are
** read from <name>_rows (storage_health_scan), so the answer comes also
** while the ledger refuses every operation. The object's members are
** listed in docs/reference.md, "idem_health".
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <stdlib.h>
#include <string.h>

/* The names of the states LEDGER_TRIGGER_* as the answer shows them. */
static const char *const azTriggerState[] = {"missing", "ok", "altered"};

/* The rows of one effective status (EFF_*; EFF_EXPIRED counts as
** EFF_CLAIMED, as it shows) and tool. */
typedef struct HealthCount HealthCount;
struct HealthCount {
  int eEff;
  char *zTool;
  sqlite3_int64 n;
};

/* What the rows say, gathered before the answer is written. */
typedef struct Health Health;
struct Health {
  HealthCount *a;
  int n, nAlloc;
  sqlite3_int64 nLive, nUnknown, nExpired;
  /* the oldest unknown row (created_at, then id), when nUnknown > 0 */
  sqlite3_int64 oldCreated, oldId;
  char *zOldTenant, *zOldKey, *zOldTool;
};

static void health_free(Health *h) {
  int i;
  for (i = 0; i < h->n; i++) sqlite3_free(h->a[i].zTool);
  sqlite3_free(h->a);
  sqlite3_free(h->zOldTenant);
  sqlite3_free(h->zOldKey);
  sqlite3_free(h->zOldTool);
}

/* Add n to the count of (eEff, zTool); SQLITE_NOMEM when it cannot. */
static int health_add(Health *h, int eEff, const char *zTool, sqlite3_int64 n) {
  int i;
  if (eEff == EFF_EXPIRED) eEff = EFF_CLAIMED;
  for (i = 0; i < h->n; i++) {
    if (h->a[i].eEff == eEff && strcmp(h->a[i].zTool, zTool) == 0) {
      h->a[i].n += n;
      return SQLITE_OK;
    }
  }
  if (h->n == h->nAlloc) {
    int nNew = h->nAlloc ? h->nAlloc * 2 : 16;
    HealthCount *aNew = sqlite3_realloc64(h->a, (sqlite3_uint64)nNew * sizeof(HealthCount));
    if (aNew == 0) return SQLITE_NOMEM;
    h->a = aNew;
    h->nAlloc = nNew;
  }
  h->a[h->n].zTool = sqlite3_mprintf("%s", zTool);
  if (h->a[h->n].zTool == 0) return SQLITE_NOMEM;
  h->a[h->n].eEff = eEff;
  h->a[h->n++].n = n;
  return SQLITE_OK;
}

/* By status (claimed, unknown, succeeded, failed, released), then tool. */
static int health_order(const void *pA, const void *pB) {
  const HealthCount *a = (const HealthCount *)pA, *b = (const HealthCount *)pB;
  if (a->eEff != b->eEff) return a->eEff < b->eEff ? -1 : 1;
  return strcmp(a->zTool, b->zTool);
}

/* The stored status zStatus as an EFF_* code (a row that is not claimed,
** or a claim whose lease has not passed, is what it stores). */
static int stored_status(IdemLedger *p, const char *zStatus, int *peEff) {
  return ledger_effective(p, zStatus, 0, (sqlite3_int64)0x7fffffffffffffffLL, 0, 0, 0, peEff, 0, 0);
}

/* Copy column i of pS (text; "" for NULL) into *pz, freeing what was there. */
static int take_text(sqlite3_stmt *pS, int i, char **pz) {
  const char *z = (const char *)sqlite3_column_text(pS, i);
  sqlite3_free(*pz);
  *pz = sqlite3_mprintf("%s", z ? z : "");
  return *pz ? SQLITE_OK : SQLITE_NOMEM;
}

/*
** Read the rows of p at time now into h: every row counted by stored
** status and tool, then each open row (through the partial index of open
** rows) seen at now: a claim whose lease has passed is expired, and
** ledger_effective says whether it is unknown, so it moves there.
*/
static int health_rows(IdemLedger *p, sqlite3_int64 now, Health *h) {
  sqlite3_stmt *pS = 0;
  int rc, eEff, eStored;
  rc = storage_health_scan(p, HEALTH_SCAN_COUNTS, &pS);
  while (rc == SQLITE_OK && sqlite3_step(pS) == SQLITE_ROW) {
    const char *zTool = (const char *)sqlite3_column_text(pS, 0);
    rc = stored_status(p, (const char *)sqlite3_column_text(pS, 1), &eEff);
    if (rc == SQLITE_OK) rc = health_add(h, eEff, zTool ? zTool : "", sqlite3_column_int64(pS, 2));
  }
  if (rc == SQLITE_OK) rc = sqlite3_finalize(pS);
  else sqlite3_finalize(pS);
  pS = 0;
  if (rc) return rc;
  rc = storage_health_scan(p, HEALTH_SCAN_OPEN, &pS);
  while (rc == SQLITE_OK && sqlite3_step(pS) == SQLITE_ROW) {
    sqlite3_int64 id = sqlite3_column_int64(pS, 0), created = sqlite3_column_int64(pS, 8);
    const char *zTool = (const char *)sqlite3_column_text(pS, 3);
    const char *zStatus = (const char *)sqlite3_column_text(pS, 5);
    rc = stored_status(p, zStatus, &eStored);
    if (rc == SQLITE_OK) {
      rc = ledger_effective(p, zStatus, (const char *)sqlite3_column_text(pS, 4),
                            sqlite3_column_int64(pS, 7), id, sqlite3_column_int64(pS, 6), now,
                            &eEff, 0, 0);
    }
    if (rc) break;
    if (eEff == EFF_CLAIMED) h->nLive++;
    if (eStored == EFF_CLAIMED && eEff != EFF_CLAIMED) h->nExpired++;
    if (eEff != EFF_UNKNOWN) continue;
    if (eStored == EFF_CLAIMED) {
      /* the grouped count has it as claimed */
      rc = health_add(h, EFF_CLAIMED, zTool ? zTool : "", -1);
      if (rc == SQLITE_OK) rc = health_add(h, EFF_UNKNOWN, zTool ? zTool : "", 1);
    }
    if (rc == SQLITE_OK && (h->nUnknown++ == 0 || created < h->oldCreated ||
                            (created == h->oldCreated && id < h->oldId))) {
      h->oldCreated = created;
      h->oldId = id;
      rc = take_text(pS, 1, &h->zOldTenant);
      if (rc == SQLITE_OK) rc = take_text(pS, 2, &h->zOldKey);
      if (rc == SQLITE_OK) rc = take_text(pS, 3, &h->zOldTool);
    }
  }
  if (rc == SQLITE_OK) rc = sqlite3_finalize(pS);
  else sqlite3_finalize(pS);
  if (rc == SQLITE_OK && h->n > 1) qsort(h->a, (size_t)h->n, sizeof(HealthCount), health_order);
  return rc;
}

/* "N <zWord>s<zRest>" (one: no s) as an element of the open array. */
static void json_count_text(IdemJson *j, sqlite3_int64 n, const char *zWord, const char *zRest) {
  char *z = sqlite3_mprintf("%lld %s%s%s", n, zWord, n == 1 ? "" : "s", zRest);
  if (z == 0) {
    if (j->rc == SQLITE_OK) j->rc = SQLITE_NOMEM; /* idem_json_finish reports it */
    return;
  }
  idem_json_text(j, 0, z);
  sqlite3_free(z);
}

/* The member "triggers": each own trigger of p's format by name. */
static int health_own_triggers(IdemLedger *p, IdemJson *j) {
  int i, rc = SQLITE_OK;
  idem_json_open(j, "triggers", '[');
  for (i = 0; rc == SQLITE_OK; i++) {
    char *zName = 0;
    int eState = 0;
    rc = storage_own_trigger(p, i, &zName, &eState);
    if (rc == SQLITE_OK && zName == 0) break;
    if (rc == SQLITE_OK) {
      idem_json_open(j, 0, '{');
      idem_json_text(j, "name", zName);
      idem_json_text(j, "state", azTriggerState[eState]);
      idem_json_close(j);
    }
    sqlite3_free(zName);
  }
  idem_json_close(j);
  return rc;
}

/* The names and states of p's tables (LEDGER_TABLE_* order) into azName
** (sqlite3_malloc, the caller frees them, also on error) and aState, and
** a problem for each altered one into *pzAltered (sqlite3_malloc; NULL
** when none is). A missing table is the ledger's own refusal already. */
static int health_tables(IdemLedger *p, char **azName, int *aState, char **pzAltered) {
  int i, rc = SQLITE_OK;
  sqlite3_str *s = 0;
  *pzAltered = 0;
  for (i = 0; rc == SQLITE_OK && i < ledger_format_tables(p->iFormat); i++) {
    const char *zName;
    rc = storage_own_table(p, i, &azName[i], &aState[i]);
    zName = azName[i];
    if (rc == SQLITE_OK && aState[i] == LEDGER_TRIGGER_ALTERED) {
      if (s == 0) s = sqlite3_str_new(ledger_db(p));
      else sqlite3_str_appendall(s, "; ");
      sqlite3_str_appendf(s,
                          "table %s was altered: its definition is not the one ledger %s "
                          "creates, and operations on the ledger may fail on it; restore it "
                          "from a backup (idem_upgrade does not rebuild it)",
                          zName, p->zName);
    }
  }
  if (s) {
    *pzAltered = sqlite3_str_finish(s);
    if (rc == SQLITE_OK && *pzAltered == 0) rc = SQLITE_NOMEM;
  }
  return rc;
}

/* The member "guards": each guard (by id) and its three triggers. */
static int health_guards(IdemLedger *p, IdemJson *j) {
  sqlite3_stmt *pS = 0;
  int rc, k, bGuards = 0;
  idem_json_open(j, "guards", '[');
  rc = storage_table_exists(p, LEDGER_TABLE_GUARDS, &bGuards);
  if (rc == SQLITE_OK && bGuards) rc = storage_health_scan(p, HEALTH_SCAN_GUARDS, &pS);
  while (rc == SQLITE_OK && pS && sqlite3_step(pS) == SQLITE_ROW) {
    const char *zBase = (const char *)sqlite3_column_text(pS, 1);
    char *azName[IDEM_GUARD_N_TRIGGER], *zTable = 0;
    int aState[IDEM_GUARD_N_TRIGGER];
    rc = storage_guard_triggers(p, sqlite3_column_int64(pS, 0), zBase ? zBase : "",
                                (const char *)sqlite3_column_text(pS, 2),
                                (const char *)sqlite3_column_text(pS, 3),
                                (const char *)sqlite3_column_text(pS, 4), azName, aState, &zTable);
    if (rc == SQLITE_OK) {
      idem_json_open(j, 0, '{');
      idem_json_text(j, "table", zTable ? zTable : zBase ? zBase : "");
      idem_json_bool(j, "table_dropped", zTable == 0);
      idem_json_open(j, "triggers", '[');
      for (k = 0; k < IDEM_GUARD_N_TRIGGER; k++) {
        idem_json_open(j, 0, '{');
        idem_json_text(j, "name", azName[k]);
        idem_json_text(j, "state", azTriggerState[aState[k]]);
        idem_json_close(j);
      }
      idem_json_close(j);
      idem_json_close(j);
    }
    for (k = 0; k < IDEM_GUARD_N_TRIGGER; k++) sqlite3_free(azName[k]);
    sqlite3_free(zTable);
  }
  if (rc == SQLITE_OK) rc = sqlite3_finalize(pS);
  else sqlite3_finalize(pS);
  idem_json_close(j);
  return rc;
}

int ledger_health(IdemLedger *p, const char *zFunc, char **pzJson, char **pzErr) {
  sqlite3_int64 now = ledger_now(p);
  char *zProblem = 0, *zRowsError = 0, *zAltered = 0;
  int rc, rcRows = SQLITE_OK, i, bBroken, bMeta = 0, bRows = 0, bFinished = 0;
  char *azTable[LEDGER_N_TABLE] = {0};
  int aTable[LEDGER_N_TABLE];
  Health h;
  IdemJson j;
  memset(&h, 0, sizeof(h));
  idem_json_begin(&j);
  *pzJson = 0;
  /* the ledger's own verdict: what every operation on it is refused with */
  rc = ledger_check_triggers(p, zFunc, pzErr);
  if (rc == SQLITE_ERROR && (p->zBroken || p->zForeign)) {
    sqlite3_free(*pzErr);
    *pzErr = 0;
    zProblem = sqlite3_mprintf("%s", p->zBroken ? p->zBroken : p->zForeign);
    rc = zProblem ? SQLITE_OK : SQLITE_NOMEM;
  }
  if (rc == SQLITE_OK) rc = storage_table_exists(p, LEDGER_TABLE_META, &bMeta);
  if (rc == SQLITE_OK) rc = storage_table_exists(p, LEDGER_TABLE_ROWS, &bRows);
  /* the tables against this format's text (an earlier format's are made
  ** again by idem_upgrade) */
  if (rc == SQLITE_OK && LEDGER_FORMAT_WORKS(p->iFormat))
    rc = health_tables(p, azTable, aTable, &zAltered);
  if (zProblem && p->zBroken && p->bAltered) {
    /* the refusal names the altered table ("tables" names every one) */
    sqlite3_free(zAltered);
    zAltered = 0;
  }
  if (rc) goto done;
  if (bRows) {
    rcRows = health_rows(p, now, &h);
    if ((rcRows & 0xff) == SQLITE_NOMEM) {
      rc = SQLITE_NOMEM;
      goto done;
    }
    if (rcRows) {
      /* a rows table changed by hand (a column dropped, a status the
      ** CHECK forbids) is reported, not an error of the answer */
      zRowsError = sqlite3_mprintf("%s_rows cannot be read: %s", p->zName,
                                   rcRows == SQLITE_CORRUPT_VTAB ? "a row has a status no ledger "
                                                                   "writes"
                                                                 : sqlite3_errmsg(p->db));
      if (zRowsError == 0) {
        rc = SQLITE_NOMEM;
        goto done;
      }
    }
  }
  bBroken = zProblem || zRowsError || zAltered;
  idem_json_text(&j, "ledger", p->zName);
  idem_json_text(&j, "schema", p->zDb);
  if (bMeta) idem_json_int(&j, "format", p->iFormat);
  else idem_json_literal(&j, "format", "null");
  idem_json_text(&j, "verdict",
                 bBroken                        ? "broken"
                 : h.nUnknown > 0 || h.nExpired ? "needs attention"
                                                : "healthy");
  idem_json_open(&j, "problems", '[');
  if (zProblem) idem_json_text(&j, 0, zProblem);
  if (zAltered) idem_json_text(&j, 0, zAltered);
  if (zRowsError) idem_json_text(&j, 0, zRowsError);
  idem_json_close(&j);
  idem_json_open(&j, "attention", '[');
  if (h.nUnknown)
    json_count_text(&j, h.nUnknown, "unknown row", ": reconcile with the targets, then resolve");
  if (h.nExpired)
    json_count_text(&j, h.nExpired, "expired claim", ": their holders stopped before settling");
  idem_json_close(&j);
  if (LEDGER_FORMAT_WORKS(p->iFormat)) {
    idem_json_open(&j, "tables", '[');
    for (i = 0; i < ledger_format_tables(p->iFormat); i++) {
      idem_json_open(&j, 0, '{');
      idem_json_text(&j, "name", azTable[i]);
      idem_json_text(&j, "state", azTriggerState[aTable[i]]);
      idem_json_close(&j);
    }
    idem_json_close(&j);
  } else {
    idem_json_literal(&j, "tables", "null");
  }
  rc = health_own_triggers(p, &j);
  if (rc == SQLITE_OK) rc = health_guards(p, &j);
  if (rc) goto done;
  if (bMeta) {
    idem_json_open(&j, "options", '{');
    for (i = 0; i < IDEM_N_OPT; i++) idem_json_int(&j, ledger_options[i].zName, p->aOpt[i]);
    idem_json_close(&j);
  } else {
    idem_json_literal(&j, "options", "null");
  }
  idem_json_int(&j, "now", now);
  idem_json_int(&j, "live_claims", h.nLive);
  idem_json_int(&j, "unknown", h.nUnknown);
  idem_json_int(&j, "expired_claims", h.nExpired);
  if (h.nUnknown) {
    idem_json_open(&j, "oldest_unknown", '{');
    idem_json_text(&j, "tenant", h.zOldTenant);
    idem_json_text(&j, "key", h.zOldKey);
    idem_json_text(&j, "tool", h.zOldTool);
    idem_json_int(&j, "created_at", h.oldCreated);
    idem_json_close(&j);
  } else {
    idem_json_literal(&j, "oldest_unknown", "null");
  }
  /* what the calls' targets hold (format 5) */
  if (p->iFormat >= 5 && bRows) {
    sqlite3_stmt *pT = 0;
    int bTargets = 0;
    rc = storage_table_exists(p, LEDGER_TABLE_TARGETS, &bTargets);
    if (rc == SQLITE_OK && bTargets) rc = storage_health_scan(p, HEALTH_SCAN_TARGETS, &pT);
    if (rc == SQLITE_OK && pT && sqlite3_step(pT) == SQLITE_ROW) {
      idem_json_open(&j, "targets", '{');
      idem_json_int(&j, "recorded", sqlite3_column_int64(pT, 0));
      idem_json_int(&j, "allowed_over_another", sqlite3_column_int64(pT, 1));
      idem_json_close(&j);
    } else if (rc == SQLITE_OK) {
      idem_json_literal(&j, "targets", "null");
    }
    if (rc == SQLITE_OK) rc = sqlite3_finalize(pT);
    else sqlite3_finalize(pT);
    if (rc) goto done;
  } else {
    idem_json_literal(&j, "targets", "null");
  }
  idem_json_open(&j, "counts", '[');
  for (i = 0; i < h.n; i++) {
    if (h.a[i].n == 0) continue;
    idem_json_open(&j, 0, '{');
    idem_json_text(&j, "status", ledger_status_name(h.a[i].eEff));
    idem_json_text(&j, "tool", h.a[i].zTool);
    idem_json_int(&j, "rows", h.a[i].n);
    idem_json_close(&j);
  }
  idem_json_close(&j);
  *pzJson = idem_json_finish(&j, &rc);
  bFinished = 1;

done:
  if (!bFinished) {
    int rcJ;
    sqlite3_free(idem_json_finish(&j, &rcJ)); /* rc says what went wrong */
  }
  sqlite3_free(zProblem);
  sqlite3_free(zRowsError);
  sqlite3_free(zAltered);
  for (i = 0; i < LEDGER_N_TABLE; i++) sqlite3_free(azTable[i]);
  health_free(&h);
  return rc;
}

/*
** race.c: many processes claim the same keys of one ledger at once.
**
**   race [--ext PATH] --db FILE [--mode wal|delete] [--variant claim|insert|settle]
**        [--procs N] [--keys N] [--seed N] [--sync off|normal|full] [--busy-ms N]
**
** The parent creates FILE (journal mode --mode) with
** `CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=3600)`, forks
** --procs children, and releases them together. Each child opens its own
** connection (busy_timeout --busy-ms, default 30 s: in rollback-journal
** mode SQLite's sleeping busy handler can starve one writer of eight past
** 10 s), loads the extension and walks the --keys
** keys in its own random order; the args decide the key (item i), spelled
** differently by odd and even children so that canonicalisation is part of
** the race:
**
**   claim   SELECT idem_claim('L','t1','c1','send',?)    admitted | in_progress
**   insert  INSERT INTO L(tenant,conversation,tool,args) VALUES(...)
**           success = admitted (token from idem_last_claim), a taken key is
**           SQLITE_CONSTRAINT "... is taken: ..."
**   settle  claim; when admitted, idem_settle(token,'succeeded',{"by":p,"n":i})
**           right away, while the others keep claiming: admitted |
**           in_progress | replay (which must carry "idempotent":true and the
**           admitter's result)
**
** Every decision is written into a shared anonymous mapping, one slot per
** (child, key). The parent then checks and prints one line per check,
** "PASS race.<mode>.<variant>:<check>" or "FAIL ...: <why>":
**
**   children      every child exited 0 (no crash, no sanitizer report)
**   no-errors     no call failed (SQLITE_BUSY must be waited out)
**   decisions     only the decisions the variant allows
**   admitted-once every key admitted by exactly one child
**   same-key      all children derived the same key for item i
**   ledger        N rows, attempt 1, status and token of the admitter
**   replays       (settle) every replay carries the admitter's result
**   integrity     PRAGMA integrity_check is ok
**   schema-change-mid-call  (claim variant) a claim statement prepared
**                 before another connection changes the schema runs again:
**                 the ledger is disconnected while its own lookup is
**                 prepared again; the claim answers and sqlite3_close
**                 then succeeds (no statement of the old ledger is left)
*/
#define STRESS_CHECKS
#include "stress.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#define V_CLAIM 0
#define V_INSERT 1
#define V_SETTLE 2

/* One decision of one child about one key. */
typedef struct Slot Slot;
struct Slot {
  char settleErr;  /* settle variant: the settle of an admitted claim failed */
  char dec;        /* A admitted, P in_progress, R replay, T taken, E error,
                        U unknown, M mismatch, X anything else, 0 not reached */
  char key[48];    /* the key the decision names */
  char token[36];  /* admitted: the token */
  char extra[264]; /* replay: the whole JSON; error: the message */
};

static const char *azVariant[] = {"claim", "insert", "settle"};

static int nProc = 8, nKey = 1000, iVariant = V_CLAIM, msBusy = 30000;
static const char *zMode = "wal", *zSync = "normal", *zDb = 0, *zExt = 0;
static unsigned long long seed = 1;
static Slot *aSlot; /* nProc * nKey, shared */

static double now_s(void) {
  struct timeval tv;
  gettimeofday(&tv, 0);
  return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

/* The args of item i, spelled by child p (same canonical form for all). */
static void item_args(int p, int i, char *z, size_t n) {
  if (p % 2) {
    fmt_str(z, n, "{ \"kind\" : \"race\", \"item\" : %d }", i);
  } else {
    fmt_str(z, n, "{\"item\":%d.0,\"kind\":\"race\"}", i);
  }
}

static double tCall; /* when the current call started */

static void slot_error(Slot *s, sqlite3 *db, const char *zWhat) {
  s->dec = 'E';
  fmt_str(s->extra, sizeof(s->extra), "%s: %s (code %d, after %d ms)", zWhat, sqlite3_errmsg(db),
          sqlite3_extended_errcode(db), (int)((now_s() - tCall) * 1000));
}

/* Classify an idem_claim result into slot s. */
static void slot_decision(Slot *s, const char *zJson) {
  char zDec[32] = "";
  json_field(zJson, "decision", zDec, sizeof(zDec));
  json_field(zJson, "key", s->key, sizeof(s->key));
  if (strcmp(zDec, "admitted") == 0) {
    s->dec = 'A';
    json_field(zJson, "token", s->token, sizeof(s->token));
  } else if (strcmp(zDec, "in_progress") == 0) {
    s->dec = 'P';
  } else if (strcmp(zDec, "replay") == 0) {
    s->dec = 'R';
    fmt_str(s->extra, sizeof(s->extra), "%s", zJson);
  } else if (strcmp(zDec, "unknown") == 0) {
    s->dec = 'U';
    fmt_str(s->extra, sizeof(s->extra), "%s", zJson);
  } else if (strcmp(zDec, "mismatch") == 0) {
    s->dec = 'M';
    fmt_str(s->extra, sizeof(s->extra), "%s", zJson);
  } else {
    s->dec = 'X';
    fmt_str(s->extra, sizeof(s->extra), "%s", zJson ? zJson : "(null)");
  }
}

/* Run one step of pStmt that returns one text row; *pz is a copy
** (sqlite3_malloc) or NULL. Returns the step's final code. */
static int step_text(sqlite3_stmt *pStmt, char **pz) {
  int rc = sqlite3_step(pStmt);
  *pz = 0;
  if (rc == SQLITE_ROW) {
    const char *z = (const char *)sqlite3_column_text(pStmt, 0);
    *pz = sqlite3_mprintf("%s", z ? z : "");
    rc = sqlite3_step(pStmt);
  }
  if (rc == SQLITE_DONE) rc = SQLITE_OK;
  sqlite3_reset(pStmt);
  sqlite3_clear_bindings(pStmt);
  return rc;
}

/* The work of child p. Returns the exit status. */
static int child(int p, int fdGo) {
  sqlite3 *db;
  sqlite3_stmt *pClaim = 0, *pSettle = 0, *pLast = 0;
  char zWhy[512], zArgs[128], zDetail[64], c;
  int *aOrder, i, rc;
  unsigned long long s = seed * 1000003ULL + (unsigned long long)p;
  Slot *aMine = &aSlot[(size_t)p * nKey];

  /* wait until the parent has forked everyone */
  while (read(fdGo, &c, 1) < 0 && errno == EINTR) {
  }
  close(fdGo);

  db = stress_open(zDb, zExt, msBusy, zWhy, sizeof(zWhy));
  if (db == 0) {
    fmt_str(aMine[0].extra, sizeof(aMine[0].extra), "%s", zWhy);
    aMine[0].dec = 'E';
    return 3;
  }
  fmt_str(zArgs, sizeof(zArgs), "PRAGMA synchronous=%s", zSync);
  if (exec_ok(db, zArgs, zWhy, sizeof(zWhy))) {
    fmt_str(aMine[0].extra, sizeof(aMine[0].extra), "%s", zWhy);
    aMine[0].dec = 'E';
    sqlite3_close(db);
    return 3;
  }
  if (iVariant == V_INSERT) {
    rc = sqlite3_prepare_v2(
        db, "INSERT INTO L(tenant,conversation,tool,args) VALUES('t1','c1','send',?1)", -1, &pClaim,
        0);
    if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(db, "SELECT idem_last_claim('L')", -1, &pLast, 0);
  } else {
    rc = sqlite3_prepare_v2(db, "SELECT idem_claim('L','t1','c1','send',?1)", -1, &pClaim, 0);
    if (rc == SQLITE_OK && iVariant == V_SETTLE) {
      rc = sqlite3_prepare_v2(db, "SELECT idem_settle('L',?1,'succeeded',?2)", -1, &pSettle, 0);
    }
  }
  if (rc != SQLITE_OK) {
    slot_error(&aMine[0], db, "prepare");
    sqlite3_close(db);
    return 3;
  }

  /* a random order of the keys (Fisher-Yates) */
  aOrder = malloc(sizeof(int) * (size_t)nKey);
  if (aOrder == 0) return 4;
  for (i = 0; i < nKey; i++) aOrder[i] = i;
  for (i = nKey - 1; i > 0; i--) {
    int j = (int)(rnd(&s) % (unsigned long long)(i + 1)), t = aOrder[i];
    aOrder[i] = aOrder[j];
    aOrder[j] = t;
  }

  for (i = 0; i < nKey; i++) {
    int k = aOrder[i];
    Slot *pS = &aMine[k];
    char *zRes = 0;
    item_args(p, k, zArgs, sizeof(zArgs));
    tCall = now_s();
    sqlite3_bind_text(pClaim, 1, zArgs, -1, SQLITE_TRANSIENT);
    if (iVariant == V_INSERT) {
      rc = sqlite3_step(pClaim);
      if (rc == SQLITE_DONE) {
        sqlite3_reset(pClaim);
        rc = step_text(pLast, &zRes);
        if (rc != SQLITE_OK || zRes == 0) {
          slot_error(pS, db, "idem_last_claim");
        } else {
          pS->dec = 'A';
          json_field(zRes, "key", pS->key, sizeof(pS->key));
          json_field(zRes, "token", pS->token, sizeof(pS->token));
        }
      } else {
        const char *zMsg = sqlite3_errmsg(db);
        int ext = sqlite3_extended_errcode(db);
        rc = sqlite3_reset(pClaim);
        if ((rc & 0xff) == SQLITE_CONSTRAINT && strstr(zMsg, "is taken")) {
          pS->dec = 'T';
          fmt_str(pS->extra, sizeof(pS->extra), "%s", zMsg);
        } else {
          pS->dec = 'E';
          fmt_str(pS->extra, sizeof(pS->extra), "insert: %s (code %d)", zMsg, ext);
        }
      }
      sqlite3_clear_bindings(pClaim);
    } else {
      rc = step_text(pClaim, &zRes);
      if (rc != SQLITE_OK) {
        slot_error(pS, db, "idem_claim");
      } else {
        slot_decision(pS, zRes);
        if (pS->dec == 'A' && iVariant == V_SETTLE) {
          char *zSettled = 0;
          fmt_str(zDetail, sizeof(zDetail), "{\"n\":%d,\"by\":%d}", k, p);
          tCall = now_s();
          sqlite3_bind_text(pSettle, 1, pS->token, -1, SQLITE_TRANSIENT);
          sqlite3_bind_text(pSettle, 2, zDetail, -1, SQLITE_TRANSIENT);
          /* the admission stands whatever the settle does; a failed
          ** settle is counted by the "settled" check */
          if (step_text(pSettle, &zSettled) != SQLITE_OK) {
            pS->settleErr = 1;
            fmt_str(pS->extra, sizeof(pS->extra), "idem_settle: %s (code %d, after %d ms)",
                    sqlite3_errmsg(db), sqlite3_extended_errcode(db),
                    (int)((now_s() - tCall) * 1000));
          } else if (zSettled == 0 || strstr(zSettled, "\"status\":\"succeeded\"") == 0) {
            pS->settleErr = 1;
            fmt_str(pS->extra, sizeof(pS->extra), "idem_settle returned %s",
                    zSettled ? zSettled : "NULL");
          }
          sqlite3_free(zSettled);
        }
      }
    }
    sqlite3_free(zRes);
  }
  free(aOrder);
  sqlite3_finalize(pClaim);
  sqlite3_finalize(pSettle);
  sqlite3_finalize(pLast);
  rc = sqlite3_close(db);
  return rc == SQLITE_OK ? 0 : 5;
}

/* Create the database and the ledger. */
static int setup(void) {
  sqlite3 *db;
  char zWhy[512], zSql[128];
  remove(zDb);
  fmt_str(zSql, sizeof(zSql), "%s-wal", zDb);
  remove(zSql);
  fmt_str(zSql, sizeof(zSql), "%s-shm", zDb);
  remove(zSql);
  fmt_str(zSql, sizeof(zSql), "%s-journal", zDb);
  remove(zSql);
  db = stress_open(zDb, zExt, 10000, zWhy, sizeof(zWhy));
  if (db == 0) {
    check(0, "setup", "%s", zWhy);
    return 1;
  }
  fmt_str(zSql, sizeof(zSql), "PRAGMA journal_mode=%s", zMode);
  if (exec_ok(db, zSql, zWhy, sizeof(zWhy)) ||
      exec_ok(db, "CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=3600)", zWhy,
              sizeof(zWhy))) {
    check(0, "setup", "%s", zWhy);
    sqlite3_close(db);
    return 1;
  }
  sqlite3_close(db);
  return 0;
}

/* Check what the children decided and what the ledger holds. */
static void verify(void) {
  int i, p, nErr = 0, nBadDec = 0, nNotOnce = 0, nKeyDiff = 0, nBadReplay = 0, nReplay = 0;
  int aCount[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  char zFirstErr[600] = "", zFirstDec[600] = "", zFirstOnce[200] = "", zFirstKey[200] = "";
  char zFirstReplay[600] = "", zFirstSettle[600] = "";
  int nSettleErr = 0;
  int *aAdmitter = malloc(sizeof(int) * (size_t)nKey);
  const char *zAllowed = iVariant == V_CLAIM ? "AP" : iVariant == V_INSERT ? "AT" : "APR";
  sqlite3 *db = 0;
  sqlite3_stmt *pRow = 0;
  char zWhy[512];
  if (aAdmitter == 0) return;

  for (i = 0; i < nKey; i++) {
    int nAdm = 0;
    const char *zKey0 = 0;
    aAdmitter[i] = -1;
    for (p = 0; p < nProc; p++) {
      Slot *s = &aSlot[(size_t)p * nKey + i];
      const char *zDecs = "APRTEUMX";
      const char *zPos = s->dec ? strchr(zDecs, s->dec) : 0;
      if (zPos) aCount[zPos - zDecs]++;
      if (s->dec == 'E') {
        if (nErr++ == 0)
          fmt_str(zFirstErr, sizeof(zFirstErr), "child %d item %d: %s", p, i, s->extra);
        continue;
      }
      if (s->dec == 0 || strchr(zAllowed, s->dec) == 0) {
        if (nBadDec++ == 0) {
          fmt_str(zFirstDec, sizeof(zFirstDec), "child %d item %d: decision '%c' %s", p, i,
                  s->dec ? s->dec : '0', s->extra);
        }
        continue;
      }
      if (s->settleErr && nSettleErr++ == 0) {
        fmt_str(zFirstSettle, sizeof(zFirstSettle), "child %d item %d: %s", p, i, s->extra);
      }
      if (s->dec == 'A') {
        nAdm++;
        aAdmitter[i] = p;
      }
      if (s->key[0]) {
        if (zKey0 == 0) {
          zKey0 = s->key;
        } else if (strcmp(zKey0, s->key) != 0) {
          if (nKeyDiff++ == 0) {
            fmt_str(zFirstKey, sizeof(zFirstKey), "item %d: %s vs %s (child %d)", i, zKey0, s->key,
                    p);
          }
        }
      }
    }
    if (nAdm != 1) {
      if (nNotOnce++ == 0) {
        fmt_str(zFirstOnce, sizeof(zFirstOnce), "item %d admitted %d times", i, nAdm);
      }
      aAdmitter[i] = -1;
    }
  }
  /* replays carry the admitter's result */
  if (iVariant == V_SETTLE) {
    for (i = 0; i < nKey; i++) {
      for (p = 0; p < nProc; p++) {
        Slot *s = &aSlot[(size_t)p * nKey + i];
        char zRes[128] = "", zWant[128], zIdem[16] = "", zStatus[32] = "";
        if (s->dec != 'R') continue;
        nReplay++;
        json_field(s->extra, "result", zRes, sizeof(zRes));
        json_field(s->extra, "idempotent", zIdem, sizeof(zIdem));
        json_field(s->extra, "status", zStatus, sizeof(zStatus));
        fmt_str(zWant, sizeof(zWant), "{\"by\":%d,\"n\":%d}", aAdmitter[i], i);
        if (strcmp(zIdem, "true") || strcmp(zStatus, "succeeded") || strcmp(zRes, zWant)) {
          if (nBadReplay++ == 0) {
            fmt_str(zFirstReplay, sizeof(zFirstReplay), "child %d item %d: want result %s, got %s",
                    p, i, zWant, s->extra);
          }
        }
      }
    }
  }
  printf(
      "  %s: %d children x %d keys: %d admitted, %d in_progress, %d replay, %d taken, %d "
      "errors, %d other\n",
      zName, nProc, nKey, aCount[0], aCount[1], aCount[2], aCount[3], aCount[4],
      aCount[5] + aCount[6] + aCount[7]);
  check(nErr == 0, "no-errors", "%d calls failed; first: %s", nErr, zFirstErr);
  check(nBadDec == 0, "decisions", "%d unexpected decisions (allowed %s); first: %s", nBadDec,
        zAllowed, zFirstDec);
  check(nNotOnce == 0, "admitted-once", "%d keys not admitted exactly once; first: %s", nNotOnce,
        zFirstOnce);
  check(nKeyDiff == 0, "same-key", "%d keys differ between children; first: %s", nKeyDiff,
        zFirstKey);
  if (iVariant == V_SETTLE) {
    check(nSettleErr == 0, "settled", "%d settles of admitted claims failed; first: %s", nSettleErr,
          zFirstSettle);
    check(nReplay > 0 && nBadReplay == 0, "replays", "%d of %d replays wrong; first: %s",
          nBadReplay, nReplay, nReplay ? zFirstReplay : "(no replay seen)");
  }

  /* the ledger, read as plain SQL (shadow table) */
  db = stress_open(zDb, zExt, 10000, zWhy, sizeof(zWhy));
  if (db == 0) {
    check(0, "ledger", "%s", zWhy);
    free(aAdmitter);
    return;
  }
  {
    int nRows = -1, nBad = 0;
    char zFirst[400] = "";
    sqlite3_stmt *pCount = 0;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM L_rows", -1, &pCount, 0) == SQLITE_OK &&
        sqlite3_step(pCount) == SQLITE_ROW) {
      nRows = sqlite3_column_int(pCount, 0);
    }
    sqlite3_finalize(pCount);
    if (sqlite3_prepare_v2(db,
                           "SELECT attempt, status,"
                           " printf('%016x%016x', id, token),"
                           " result FROM L_rows"
                           " WHERE tenant='t1' AND \"key\"=?1",
                           -1, &pRow, 0) != SQLITE_OK) {
      check(0, "ledger", "prepare: %s", sqlite3_errmsg(db));
    } else {
      for (i = 0; i < nKey; i++) {
        Slot *s;
        char zWant[64];
        const char *zWantStatus = iVariant == V_SETTLE ? "succeeded" : "claimed";
        if (aAdmitter[i] < 0) continue;
        s = &aSlot[(size_t)aAdmitter[i] * nKey + i];
        fmt_str(zWant, sizeof(zWant), "{\"by\":%d,\"n\":%d}", aAdmitter[i], i);
        sqlite3_bind_text(pRow, 1, s->key, -1, SQLITE_STATIC);
        if (sqlite3_step(pRow) != SQLITE_ROW) {
          if (nBad++ == 0) fmt_str(zFirst, sizeof(zFirst), "item %d key %s: no row", i, s->key);
        } else {
          const char *zSt = (const char *)sqlite3_column_text(pRow, 1);
          const char *zTok = (const char *)sqlite3_column_text(pRow, 2);
          const char *zRes = (const char *)sqlite3_column_text(pRow, 3);
          int att = sqlite3_column_int(pRow, 0);
          if (att != 1 || !zSt || strcmp(zSt, zWantStatus) || !zTok || strcmp(zTok, s->token) ||
              (iVariant == V_SETTLE && (!zRes || strcmp(zRes, zWant)))) {
            if (nBad++ == 0) {
              fmt_str(zFirst, sizeof(zFirst),
                      "item %d key %s: attempt %d status %s token %s result %s; admitter %d "
                      "got token %s",
                      i, s->key, att, zSt ? zSt : "NULL", zTok ? zTok : "NULL",
                      zRes ? zRes : "NULL", aAdmitter[i], s->token);
            }
          }
        }
        sqlite3_reset(pRow);
      }
      sqlite3_finalize(pRow);
      check(nRows == nKey && nBad == 0, "ledger", "%d rows (want %d), %d rows wrong; first: %s",
            nRows, nKey, nBad, zFirst);
    }
  }
  {
    sqlite3_stmt *pI = 0;
    const char *z = 0;
    char zRes[300] = "?";
    if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &pI, 0) == SQLITE_OK &&
        sqlite3_step(pI) == SQLITE_ROW) {
      z = (const char *)sqlite3_column_text(pI, 0);
      fmt_str(zRes, sizeof(zRes), "%s", z ? z : "NULL");
    } else {
      fmt_str(zRes, sizeof(zRes), "%s", sqlite3_errmsg(db));
    }
    sqlite3_finalize(pI);
    check(strcmp(zRes, "ok") == 0, "integrity", "%s", zRes);
  }
  sqlite3_close(db);
  free(aAdmitter);
}

/* The schema-change-mid-call check (see the header). */
static void schema_change_mid_call(void) {
  sqlite3 *a = 0, *b = 0;
  sqlite3_stmt *pC = 0;
  char *zErr = 0, zGot[300] = "";
  int rc, rcClose = -1, nOk = 0, i;
  rc = sqlite3_open(zDb, &a);
  if (rc == SQLITE_OK) rc = stress_load(a, stress_ext_path(zExt), &zErr);
  sqlite3_free(zErr);
  if (rc == SQLITE_OK) {
    rc = sqlite3_prepare_v2(a, "SELECT idem_claim('L','t1','c1','send','{\"mid\":1}')", -1, &pC, 0);
  }
  for (i = 0; rc == SQLITE_OK && i < 2; i++) {
    if (i == 1) {
      /* another connection changes the schema between the two runs */
      rc = sqlite3_open(zDb, &b);
      if (rc == SQLITE_OK) rc = sqlite3_exec(b, "CREATE TABLE mid_call(x)", 0, 0, 0);
      sqlite3_close(b);
      if (rc) break;
    }
    if (sqlite3_step(pC) == SQLITE_ROW) {
      const char *z = (const char *)sqlite3_column_text(pC, 0);
      fmt_str(zGot, sizeof(zGot), "%s", z ? z : "NULL");
      if (z && strstr(z, i == 0 ? "\"admitted\"" : "\"in_progress\"")) nOk++;
    } else {
      fmt_str(zGot, sizeof(zGot), "%s", sqlite3_errmsg(a));
    }
    sqlite3_reset(pC);
  }
  sqlite3_finalize(pC);
  if (a) rcClose = sqlite3_close(a);
  check(rc == SQLITE_OK && nOk == 2 && rcClose == SQLITE_OK, "schema-change-mid-call",
        "rc %d, %d of 2 answers right (last: %s), sqlite3_close %d", rc, nOk, zGot, rcClose);
}

static int usage(void) {
  fprintf(stderr,
          "usage: race [--ext PATH] --db FILE [--mode wal|delete] [--variant claim|insert|settle]"
          " [--procs N] [--keys N] [--seed N] [--sync off|normal|full] [--busy-ms N]\n");
  return 2;
}

int main(int argc, char **argv) {
  int i, p, aFd[2], nBadChild = 0;
  pid_t *aPid;
  char zFirstChild[200] = "";
  double t0;
  size_t nMap;

  for (i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : 0;
    if (v == 0) return usage();
    if (strcmp(a, "--ext") == 0) zExt = v;
    else if (strcmp(a, "--db") == 0) zDb = v;
    else if (strcmp(a, "--mode") == 0) zMode = v;
    else if (strcmp(a, "--sync") == 0) zSync = v;
    else if (strcmp(a, "--procs") == 0) nProc = atoi(v);
    else if (strcmp(a, "--keys") == 0) nKey = atoi(v);
    else if (strcmp(a, "--busy-ms") == 0) msBusy = atoi(v);
    else if (strcmp(a, "--seed") == 0) seed = strtoull(v, 0, 10);
    else if (strcmp(a, "--variant") == 0) {
      for (iVariant = 0; iVariant < 3 && strcmp(v, azVariant[iVariant]); iVariant++) {
      }
      if (iVariant == 3) return usage();
    } else return usage();
    i++;
  }
  if (zDb == 0 || nProc < 2 || nKey < 1 ||
      (strcmp(zMode, "wal") != 0 && strcmp(zMode, "delete") != 0)) {
    return usage();
  }
  zExt = stress_ext_path(zExt);
  fmt_str(zName, sizeof(zName), "race.%s.%s", zMode, azVariant[iVariant]);

  nMap = sizeof(Slot) * (size_t)nProc * (size_t)nKey;
  aSlot = mmap(0, nMap, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (aSlot == MAP_FAILED) {
    check(0, "setup", "mmap: %s", strerror(errno));
    return 1;
  }
  memset(aSlot, 0, nMap);
  if (setup()) return 1;
  if (pipe(aFd)) {
    check(0, "setup", "pipe: %s", strerror(errno));
    return 1;
  }
  aPid = calloc((size_t)nProc, sizeof(pid_t));
  if (aPid == 0) return 1;
  fflush(stdout);
  fflush(stderr);
  for (p = 0; p < nProc; p++) {
    aPid[p] = fork();
    if (aPid[p] < 0) {
      check(0, "children", "fork: %s", strerror(errno));
      return 1;
    }
    if (aPid[p] == 0) {
      int st;
      close(aFd[1]);
      free(aPid); /* the parent's; a leak in the child otherwise */
      st = child(p, aFd[0]);
      _exit(st);
    }
  }
  close(aFd[0]);
  t0 = now_s();
  close(aFd[1]); /* go */
  for (p = 0; p < nProc; p++) {
    int st = 0;
    while (waitpid(aPid[p], &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      if (nBadChild++ == 0) {
        Slot *s = &aSlot[(size_t)p * nKey];
        if (WIFSIGNALED(st)) {
          fmt_str(zFirstChild, sizeof(zFirstChild), "child %d killed by signal %d", p,
                  WTERMSIG(st));
        } else {
          fmt_str(zFirstChild, sizeof(zFirstChild), "child %d exited %d%s%s", p, WEXITSTATUS(st),
                  s->dec == 'E' ? ": " : "", s->dec == 'E' ? s->extra : "");
        }
      }
    }
  }
  printf("  %s: %.2f s\n", zName, now_s() - t0);
  check(nBadChild == 0, "children", "%d children failed; first: %s", nBadChild, zFirstChild);
  verify();
  if (iVariant == V_CLAIM) schema_change_mid_call();
  free(aPid);
  munmap(aSlot, nMap);
  return nFail ? 1 : 0;
}

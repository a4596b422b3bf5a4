/*
** crash.c: a claiming process is killed with SIGKILL at random moments;
** no committed claim may be lost and no live claim admitted twice.
**
**   crash [--ext PATH] --db FILE [--mode wal|delete] [--rounds N] [--keys N]
**         [--seed N] [--delay-ms MIN:MAX]
**
** The parent creates FILE (journal mode --mode) with
** `CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=3600)` and keeps
** one connection with the extension loaded (so a child's load is only a
** reference to the mapped library). Each round it forks a child that opens
** its own connection (synchronous=FULL, busy_timeout 10 s) and claims the
** --keys items in a random order, round after round over the same items,
** so a restarted child meets keys claimed before the crash (it walks its
** order again and again until it is killed). Every fourth
** claim runs inside BEGIN IMMEDIATE ... COMMIT. After each call returns
** (after COMMIT for those), the child writes one line to a pipe with
** write(2) (atomic, unbuffered):
**
**   A <item> <token> <committed>    admitted (committed: 1 when the JSON said
**                                   so, or 2 after its COMMIT returned)
**   P <item>                        in_progress
**   X <item> <json-or-message>      anything else
**
** The parent kills the child with SIGKILL after a random delay, drains the
** pipe, and checks, printing "PASS crash.<mode>:<check>" or "FAIL ...":
**
**   integrity     PRAGMA integrity_check = ok after every round
**   no-loss       every reported admission is in the ledger with its token,
**                 status claimed, attempt 1 (checked after every round)
**   admitted-once no item is admitted whose key the ledger already held
**                 when the round began (nor twice in one round)
**   decisions     the child only saw admitted / in_progress, and every
**                 admission outside a transaction said committed:true
**   repeats       restarted children met earlier keys (in_progress seen)
**   kills         at least 20 children were killed while running
**   fresh-claims  after the last round, a fresh claim of every key in the
**                 ledger is in_progress, never admitted
*/
#define STRESS_CHECKS
#include "stress.h"

#include <errno.h>
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *zMode = "wal", *zDb = 0, *zExt = 0;
static int nRound = 40, nKey = 1000, msMin = 1, msMax = 30;
static unsigned long long seed = 1;

typedef struct Item Item;
struct Item {
  char zKey[48];   /* idem_key of the item */
  char zToken[36]; /* the token of its admission ("" when none reported) */
  int iRound;      /* the round of that admission */
  int bPresent;    /* in the ledger when the current round began */
};
static Item *aItem;

static void item_args(int i, char *z, size_t n) {
  fmt_str(z, n, "{\"kind\":\"crash\",\"item\":%d}", i);
}

/* write(2) all of z */
static void put(int fd, const char *z) {
  size_t n = strlen(z);
  while (n > 0) {
    ssize_t w = write(fd, z, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      _exit(7);
    }
    z += w;
    n -= (size_t)w;
  }
}

/* The child: claim items in a random order until killed. */
static int child(int iRound, int fd) {
  sqlite3 *db;
  sqlite3_stmt *pClaim = 0;
  char zWhy[512], zArgs[96], zLine[600];
  unsigned long long s = seed * 7919ULL + (unsigned long long)iRound;
  int *aOrder = malloc(sizeof(int) * (size_t)nKey), i, rc;
  if (aOrder == 0) return 4;
  db = stress_open(zDb, zExt, 10000, zWhy, sizeof(zWhy));
  if (db == 0 || exec_ok(db, "PRAGMA synchronous=FULL", zWhy, sizeof(zWhy)) ||
      sqlite3_prepare_v2(db, "SELECT idem_claim('L','t1','c1','send',?1)", -1, &pClaim, 0)) {
    fmt_str(zLine, sizeof(zLine), "X -1 setup: %s\n", db ? sqlite3_errmsg(db) : zWhy);
    put(fd, zLine);
    return 3;
  }
  for (i = 0; i < nKey; i++) aOrder[i] = i;
  for (i = nKey - 1; i > 0; i--) {
    int j = (int)(rnd(&s) % (unsigned long long)(i + 1)), t = aOrder[i];
    aOrder[i] = aOrder[j];
    aOrder[j] = t;
  }
  /* walk the order again and again until killed: a child that ran out of
  ** keys would not be killed running */
  for (i = 0;; i = i + 1 < nKey ? i + 1 : 0) {
    int k = aOrder[i], bTxn = i % 4 == 3;
    char zDec[32] = "", zTok[40] = "", zCom[8] = "";
    const char *zRes;
    if (bTxn && exec_ok(db, "BEGIN IMMEDIATE", zWhy, sizeof(zWhy))) {
      fmt_str(zLine, sizeof(zLine), "X %d %s\n", k, zWhy);
      put(fd, zLine);
      continue;
    }
    item_args(k, zArgs, sizeof(zArgs));
    sqlite3_bind_text(pClaim, 1, zArgs, -1, SQLITE_TRANSIENT);
    rc = sqlite3_step(pClaim);
    zRes = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(pClaim, 0) : 0;
    if (zRes == 0) {
      fmt_str(zLine, sizeof(zLine), "X %d idem_claim: %s (code %d)\n", k, sqlite3_errmsg(db),
              sqlite3_extended_errcode(db));
    } else {
      json_field(zRes, "decision", zDec, sizeof(zDec));
      json_field(zRes, "token", zTok, sizeof(zTok));
      json_field(zRes, "committed", zCom, sizeof(zCom));
      if (strcmp(zDec, "admitted") == 0) {
        fmt_str(zLine, sizeof(zLine), "A %d %s %d\n", k, zTok, strcmp(zCom, "true") == 0 ? 1 : 0);
      } else if (strcmp(zDec, "in_progress") == 0) {
        fmt_str(zLine, sizeof(zLine), "P %d\n", k);
      } else {
        fmt_str(zLine, sizeof(zLine), "X %d %s\n", k, zRes);
      }
    }
    sqlite3_reset(pClaim);
    if (bTxn) {
      if (exec_ok(db, "COMMIT", zWhy, sizeof(zWhy))) {
        fmt_str(zLine, sizeof(zLine), "X %d %s\n", k, zWhy);
        sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
      } else if (zLine[0] == 'A') {
        /* the claim is committed only now */
        fmt_str(zLine, sizeof(zLine), "A %d %s 2\n", k, zTok);
      }
    }
    put(fd, zLine);
  }
}

static int setup(sqlite3 **pDb) {
  sqlite3 *db;
  sqlite3_stmt *pKey = 0;
  char zWhy[512], zSql[160];
  int i;
  static const char *azSuffix[] = {"", "-wal", "-shm", "-journal"};
  for (i = 0; i < 4; i++) {
    fmt_str(zSql, sizeof(zSql), "%s%s", zDb, azSuffix[i]);
    remove(zSql);
  }
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
  if (sqlite3_prepare_v2(db, "SELECT idem_key('t1','c1','send',?1)", -1, &pKey, 0)) {
    check(0, "setup", "idem_key: %s", sqlite3_errmsg(db));
    sqlite3_close(db);
    return 1;
  }
  for (i = 0; i < nKey; i++) {
    char zArgs[96];
    item_args(i, zArgs, sizeof(zArgs));
    sqlite3_bind_text(pKey, 1, zArgs, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(pKey) != SQLITE_ROW) {
      check(0, "setup", "idem_key: %s", sqlite3_errmsg(db));
      sqlite3_finalize(pKey);
      sqlite3_close(db);
      return 1;
    }
    fmt_str(aItem[i].zKey, sizeof(aItem[i].zKey), "%s", sqlite3_column_text(pKey, 0));
    sqlite3_reset(pKey);
  }
  sqlite3_finalize(pKey);
  *pDb = db;
  return 0;
}

/* State of the ledger, read with plain SQL on a fresh connection. */
typedef struct Check Check;
struct Check {
  int nIntegrity, nLost, nTwice, nBadDec, nNotCommitted;
  char zIntegrity[300], zLost[300], zTwice[300], zBadDec[600], zNotCommitted[200];
};

/* Mark which items the ledger holds; check the reported admissions are
** there; integrity_check. iRound: the round just finished (-1: before). */
static void ledger_scan(int iRound, Check *c) {
  sqlite3 *db = 0;
  sqlite3_stmt *pRow = 0, *pI = 0;
  int i;
  if (sqlite3_open_v2(zDb, &db, SQLITE_OPEN_READWRITE, 0) != SQLITE_OK) {
    if (c->nIntegrity++ == 0) {
      fmt_str(c->zIntegrity, sizeof(c->zIntegrity), "round %d: open: %s", iRound,
              sqlite3_errmsg(db));
    }
    sqlite3_close(db);
    return;
  }
  sqlite3_busy_timeout(db, 10000);
  if (sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &pI, 0) == SQLITE_OK &&
      sqlite3_step(pI) == SQLITE_ROW) {
    const char *z = (const char *)sqlite3_column_text(pI, 0);
    if (z == 0 || strcmp(z, "ok") != 0) {
      if (c->nIntegrity++ == 0) {
        fmt_str(c->zIntegrity, sizeof(c->zIntegrity), "round %d: %s", iRound, z ? z : "NULL");
      }
    }
  } else if (c->nIntegrity++ == 0) {
    fmt_str(c->zIntegrity, sizeof(c->zIntegrity), "round %d: %s", iRound, sqlite3_errmsg(db));
  }
  sqlite3_finalize(pI);
  if (sqlite3_prepare_v2(db,
                         "SELECT printf('%016x%016x', id, token),"
                         " status, attempt FROM L_rows WHERE tenant='t1' AND "
                         "\"key\"=?1",
                         -1, &pRow, 0) != SQLITE_OK) {
    if (c->nLost++ == 0) {
      fmt_str(c->zLost, sizeof(c->zLost), "round %d: %s", iRound, sqlite3_errmsg(db));
    }
    sqlite3_close(db);
    return;
  }
  for (i = 0; i < nKey; i++) {
    Item *it = &aItem[i];
    sqlite3_bind_text(pRow, 1, it->zKey, -1, SQLITE_STATIC);
    if (sqlite3_step(pRow) == SQLITE_ROW) {
      const char *zTok = (const char *)sqlite3_column_text(pRow, 0);
      const char *zSt = (const char *)sqlite3_column_text(pRow, 1);
      int att = sqlite3_column_int(pRow, 2);
      it->bPresent = 1;
      if (it->zToken[0] &&
          (zTok == 0 || strcmp(zTok, it->zToken) || !zSt || strcmp(zSt, "claimed") || att != 1)) {
        if (c->nLost++ == 0) {
          fmt_str(c->zLost, sizeof(c->zLost),
                  "after round %d: item %d admitted in round %d with token %s; ledger has token "
                  "%s status %s attempt %d",
                  iRound, i, it->iRound, it->zToken, zTok ? zTok : "NULL", zSt ? zSt : "NULL", att);
        }
      }
    } else {
      it->bPresent = 0;
      if (it->zToken[0] && c->nLost++ == 0) {
        fmt_str(c->zLost, sizeof(c->zLost),
                "after round %d: item %d (key %s) admitted in round %d with token %s is not in "
                "the ledger",
                iRound, i, it->zKey, it->iRound, it->zToken);
      }
    }
    sqlite3_reset(pRow);
  }
  sqlite3_finalize(pRow);
  sqlite3_close(db);
}

/* Apply one line the child reported in round iRound. */
static void apply_line(int iRound, char *zLine, Check *c, int *pnRepeat, int *pnAdmit) {
  int k = -1;
  char zTok[64] = "";
  int committed = 0;
  if (zLine[0] == 'A' && sscanf(zLine + 1, "%d %40s %d", &k, zTok, &committed) == 3 && k >= 0 &&
      k < nKey) {
    Item *it = &aItem[k];
    (*pnAdmit)++;
    if (committed == 0 && c->nNotCommitted++ == 0) {
      fmt_str(c->zNotCommitted, sizeof(c->zNotCommitted),
              "round %d item %d: admitted outside a transaction with committed:false", iRound, k);
    }
    if (it->bPresent || it->zToken[0]) {
      if (c->nTwice++ == 0) {
        fmt_str(c->zTwice, sizeof(c->zTwice),
                "round %d: item %d admitted (token %s) though the ledger held its key%s%s", iRound,
                k, zTok, it->zToken[0] ? " from an admission with token " : "", it->zToken);
      }
    }
    fmt_str(it->zToken, sizeof(it->zToken), "%s", zTok);
    it->iRound = iRound;
  } else if (zLine[0] == 'P' && sscanf(zLine + 1, "%d", &k) == 1) {
    if (k >= 0 && k < nKey && aItem[k].bPresent) (*pnRepeat)++;
  } else if (zLine[0]) {
    if (c->nBadDec++ == 0) fmt_str(c->zBadDec, sizeof(c->zBadDec), "round %d: %s", iRound, zLine);
  }
}

static double now_ms(void) {
  struct timeval tv;
  gettimeofday(&tv, 0);
  return tv.tv_sec * 1000.0 + tv.tv_usec / 1000.0;
}

static int usage(void) {
  fprintf(stderr,
          "usage: crash [--ext PATH] --db FILE [--mode wal|delete] [--rounds N] [--keys N]"
          " [--seed N] [--delay-ms MIN:MAX]\n");
  return 2;
}

int main(int argc, char **argv) {
  sqlite3 *dbKeep = 0;
  Check c;
  int i, r, nHot = 0, nKilled = 0, nDone = 0, nRepeat = 0, nAdmit = 0, nBadChild = 0;
  char zBadChild[200] = "";
  unsigned long long s;
  double t0 = now_ms();

  for (i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : 0;
    if (v == 0) return usage();
    if (strcmp(a, "--ext") == 0) zExt = v;
    else if (strcmp(a, "--db") == 0) zDb = v;
    else if (strcmp(a, "--mode") == 0) zMode = v;
    else if (strcmp(a, "--rounds") == 0) nRound = atoi(v);
    else if (strcmp(a, "--keys") == 0) nKey = atoi(v);
    else if (strcmp(a, "--seed") == 0) seed = strtoull(v, 0, 10);
    else if (strcmp(a, "--delay-ms") == 0) {
      if (sscanf(v, "%d:%d", &msMin, &msMax) != 2 || msMin < 0 || msMax < msMin) return usage();
    } else return usage();
    i++;
  }
  if (zDb == 0 || nRound < 1 || nKey < 1 ||
      (strcmp(zMode, "wal") != 0 && strcmp(zMode, "delete") != 0)) {
    return usage();
  }
  zExt = stress_ext_path(zExt);
  fmt_str(zName, sizeof(zName), "crash.%s", zMode);
  signal(SIGPIPE, SIG_IGN);
  memset(&c, 0, sizeof(c));
  aItem = calloc((size_t)nKey, sizeof(Item));
  if (aItem == 0) return 1;
  if (setup(&dbKeep)) return 1;
  s = seed;

  for (r = 0; r < nRound; r++) {
    int aFd[2], st = 0;
    pid_t pid;
    char zBuf[65536];
    size_t nBuf = 0;
    struct timespec ts;
    int ms = msMin + (int)(rnd(&s) % (unsigned long long)(msMax - msMin + 1));

    ledger_scan(r - 1, &c);
    if (pipe(aFd)) {
      check(0, "setup", "pipe: %s", strerror(errno));
      return 1;
    }
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
      check(0, "setup", "fork: %s", strerror(errno));
      return 1;
    }
    if (pid == 0) {
      close(aFd[0]);
      _exit(child(r, aFd[1]));
    }
    close(aFd[1]);
    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
    kill(pid, SIGKILL);
    /* drain the pipe to EOF, applying whole lines */
    for (;;) {
      ssize_t n = read(aFd[0], zBuf + nBuf, sizeof(zBuf) - 1 - nBuf);
      char *z, *zNl;
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      nBuf += (size_t)n;
      zBuf[nBuf] = 0;
      z = zBuf;
      while ((zNl = strchr(z, '\n')) != 0) {
        *zNl = 0;
        apply_line(r, z, &c, &nRepeat, &nAdmit);
        z = zNl + 1;
      }
      nBuf = strlen(z);
      memmove(zBuf, z, nBuf + 1);
    }
    close(aFd[0]);
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    {
      /* a journal left behind: the kill landed inside a write */
      char zJ[300];
      FILE *f;
      fmt_str(zJ, sizeof(zJ), "%s-journal", zDb);
      f = fopen(zJ, "rb");
      if (f) {
        if (fgetc(f) != EOF) nHot++;
        fclose(f);
      }
    }
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
      nKilled++;
    } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
      nDone++;
    } else if (nBadChild++ == 0) {
      fmt_str(zBadChild, sizeof(zBadChild), "round %d: child %s %d", r,
              WIFSIGNALED(st) ? "died of signal" : "exited",
              WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
  }
  ledger_scan(nRound - 1, &c);

  printf(
      "  %s: %d rounds (%d killed, %d ran to the end, %d left a hot journal), %d "
      "admissions, %d in_progress on earlier keys, %.1f s\n",
      zName, nRound, nKilled, nDone, nHot, nAdmit, nRepeat, (now_ms() - t0) / 1000);
  check(nBadChild == 0, "children", "%s", zBadChild);
  check(c.nIntegrity == 0, "integrity", "%d failures; first: %s", c.nIntegrity, c.zIntegrity);
  check(c.nLost == 0, "no-loss", "%d reported admissions lost or changed; first: %s", c.nLost,
        c.zLost);
  check(c.nTwice == 0, "admitted-once", "%d admissions of keys already held; first: %s", c.nTwice,
        c.zTwice);
  check(c.nBadDec == 0 && c.nNotCommitted == 0, "decisions",
        "%d unexpected lines, %d admissions not committed; first: %s%s", c.nBadDec, c.nNotCommitted,
        c.zBadDec, c.zNotCommitted);
  check(nRepeat > 0, "repeats", "no restarted child met a key claimed before (raise --keys?)");
  check(nKilled >= 20 || nKilled == nRound, "kills", "only %d of %d children were killed running",
        nKilled, nRound);

  /* a fresh claim of every key the ledger holds: in_progress, never admitted */
  {
    sqlite3 *db;
    sqlite3_stmt *pClaim = 0;
    char zWhy[512];
    int nHeld = 0, nBad = 0;
    char zBad[600] = "";
    db = stress_open(zDb, zExt, 10000, zWhy, sizeof(zWhy));
    if (db == 0 ||
        sqlite3_prepare_v2(db, "SELECT idem_claim('L','t1','c1','send',?1)", -1, &pClaim, 0)) {
      check(0, "fresh-claims", "%s", db ? sqlite3_errmsg(db) : zWhy);
    } else {
      for (i = 0; i < nKey; i++) {
        char zArgs[96], zDec[32] = "";
        const char *zRes;
        if (!aItem[i].bPresent) continue;
        nHeld++;
        item_args(i, zArgs, sizeof(zArgs));
        sqlite3_bind_text(pClaim, 1, zArgs, -1, SQLITE_TRANSIENT);
        zRes =
            sqlite3_step(pClaim) == SQLITE_ROW ? (const char *)sqlite3_column_text(pClaim, 0) : 0;
        json_field(zRes, "decision", zDec, sizeof(zDec));
        if (strcmp(zDec, "in_progress") != 0 && nBad++ == 0) {
          fmt_str(zBad, sizeof(zBad), "item %d: %s", i, zRes ? zRes : sqlite3_errmsg(db));
        }
        sqlite3_reset(pClaim);
      }
      check(nHeld > 0 && nBad == 0, "fresh-claims", "%d of %d held keys not in_progress; first: %s",
            nBad, nHeld, nHeld ? zBad : "(the ledger holds no key)");
    }
    sqlite3_finalize(pClaim);
    sqlite3_close(db);
  }
  sqlite3_close(dbKeep);
  free(aItem);
  return nFail ? 1 : 0;
}

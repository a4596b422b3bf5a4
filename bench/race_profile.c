/*
** race_profile.c: the program behind docs/benchmarks.md, "Under contention:
** what the write lock holds". NPROC processes claim and settle the same
** NKEYS keys, each in its own shuffled order, each claim and each settle
** in autocommit (WAL, synchronous=NORMAL), on a ledger (MODE ledger) or on
** a bare table (MODE bare: INSERT ... ON CONFLICT DO NOTHING, then an
** UPDATE when changes() is 1), as section 5 of bench.c does. Each process
** waits through a busy handler that sleeps exactly as SQLite's default one
** (1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms, up to 10 s) and counts
** its calls and the time slept; with PROF=1 each process also prints every
** statement it ran (nested ones included), how often, and its mean time.
**
**   cc -O2 -g -o race_profile bench/race_profile.c -lsqlite3
**   ./race_profile build/idempotency.so ledger 4 3000 DIR
**   valgrind --tool=callgrind --trace-children=yes ./race_profile ... 1 1000 DIR
**
** DIR (default ".") holds the scratch database race.db. Prints keys settled
** per second and, per process, its time, busy-handler calls and sleep, and
** the time in its admitted keys' claims and settles. Exits 1 on any error.
*/
#include <sqlite3.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct Stat Stat;
struct Stat {
  long nBusy, nAdmitted;
  double usBusy, usWrite, usOther, usTotal;
};
static Stat *aStat; /* shared with the children (MAP_SHARED) */
static int iMe;

#define N_PROF 32
static char azProf[N_PROF][48];
static long anProf[N_PROF];
static double adProf[N_PROF];
static int nProf;

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void fail(const char *zWhat, const char *zDetail) {
  fprintf(stderr, "race_profile: %s: %s\n", zWhat, zDetail);
  exit(1);
}

/* SQLite's default busy handler (sqliteDefaultBusyCallback), counted */
static int busy(void *pArg, int nCount) {
  static const unsigned char aDelay[] = {1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100};
  static const unsigned char aTotal[] = {0, 1, 3, 8, 18, 33, 53, 78, 103, 128, 178, 228};
  int nTimeout = 10000, nDelay, nPrior;
  double t0 = now_us();
  (void)pArg;
  if (nCount < 12) {
    nDelay = aDelay[nCount];
    nPrior = aTotal[nCount];
  } else {
    nDelay = aDelay[11];
    nPrior = aTotal[11] + nDelay * (nCount - 11);
  }
  if (nPrior + nDelay > nTimeout) {
    nDelay = nTimeout - nPrior;
    if (nDelay <= 0) return 0;
  }
  sqlite3_sleep(nDelay);
  aStat[iMe].nBusy++;
  aStat[iMe].usBusy += now_us() - t0;
  return 1;
}

static int profile(unsigned eType, void *pCtx, void *pStmt, void *pNs) {
  const char *z = sqlite3_sql((sqlite3_stmt *)pStmt);
  char zKey[48];
  int i;
  (void)eType;
  (void)pCtx;
  snprintf(zKey, sizeof(zKey), "%.47s", z ? z : "?");
  for (i = 0; i < nProf && strcmp(azProf[i], zKey) != 0; i++) {
  }
  if (i == nProf) {
    if (nProf == N_PROF) return 0;
    memcpy(azProf[nProf++], zKey, sizeof(zKey));
  }
  anProf[i]++;
  adProf[i] += (double)*(sqlite3_int64 *)pNs / 1e3;
  return 0;
}

static void exec_db(sqlite3 *db, const char *zSql) {
  char *zErr = 0;
  if (sqlite3_exec(db, zSql, 0, 0, &zErr) != SQLITE_OK) fail(zSql, zErr ? zErr : "out of memory");
}

static sqlite3 *open_db(const char *zPath, const char *zExt) {
  sqlite3 *db = 0;
  char *zErr = 0;
  if (sqlite3_open(zPath, &db) != SQLITE_OK) fail(zPath, db ? sqlite3_errmsg(db) : "open");
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 1, (int *)0);
  if (sqlite3_load_extension(db, zExt, 0, &zErr) != SQLITE_OK) fail(zExt, zErr ? zErr : "load");
  exec_db(db, "PRAGMA busy_timeout=10000");
  return db;
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *zSql) {
  sqlite3_stmt *p = 0;
  if (sqlite3_prepare_v2(db, zSql, -1, &p, 0) != SQLITE_OK) fail(zSql, sqlite3_errmsg(db));
  return p;
}

static void child(const char *zPath, const char *zExt, int bLedger, int nKeys, int fdGo) {
  sqlite3 *db = open_db(zPath, zExt);
  sqlite3_stmt *pClaim, *pSettle;
  int *aOrder = malloc(sizeof(int) * (size_t)nKeys), k, j;
  double t0;
  char c;
  if (aOrder == 0) fail("race", "out of memory");
  exec_db(db, "PRAGMA synchronous=NORMAL");
  sqlite3_busy_handler(db, busy, 0);
  if (getenv("PROF")) sqlite3_trace_v2(db, SQLITE_TRACE_PROFILE, profile, 0);
  srand((unsigned)iMe * 7 + 1);
  for (k = 0; k < nKeys; k++) aOrder[k] = k;
  for (k = nKeys - 1; k > 0; k--) {
    int t;
    j = rand() % (k + 1);
    t = aOrder[k];
    aOrder[k] = aOrder[j];
    aOrder[j] = t;
  }
  if (bLedger) {
    pClaim = prepare(db, "SELECT idem_claim('L','t',?1,'tool','{\"a\":1}')");
    pSettle = prepare(db, "SELECT idem_settle('L',?1,'succeeded','{\"ok\":true}')");
  } else {
    pClaim = prepare(db,
                     "INSERT INTO bare(tenant,key,conversation,tool,args,effect,status,attempt,"
                     "token,created_at,updated_at,lease_until) VALUES('t',?1,?1,'tool','{\"a\":1}',"
                     "'external','claimed',1,randomblob(16),1,1,2) ON CONFLICT DO NOTHING");
    pSettle = prepare(db,
                      "UPDATE bare SET status='succeeded',result='{\"ok\":true}',updated_at=2"
                      " WHERE tenant='t' AND key=?1");
  }
  if (read(fdGo, &c, 1) != 1) fail("race", "no start signal");
  t0 = now_us();
  for (k = 0; k < nKeys; k++) {
    char zConv[32], zToken[64];
    double a, b;
    int rc, bAdmitted = 0;
    snprintf(zConv, sizeof(zConv), "c%d", aOrder[k]);
    sqlite3_bind_text(pClaim, 1, zConv, -1, SQLITE_TRANSIENT);
    a = now_us();
    rc = sqlite3_step(pClaim);
    b = now_us();
    if (bLedger) {
      const char *z = (const char *)sqlite3_column_text(pClaim, 0), *t;
      if (rc != SQLITE_ROW || z == 0) fail("claim", sqlite3_errmsg(db));
      if (strstr(z, "\"decision\":\"admitted\"")) {
        size_t n;
        t = strstr(z, "\"token\":\"");
        if (t == 0) fail("claim", "admitted without a token");
        t += 9;
        n = strcspn(t, "\"");
        if (n >= sizeof(zToken)) fail("claim", "token too long");
        memcpy(zToken, t, n);
        zToken[n] = 0;
        bAdmitted = 1;
      }
    } else {
      if (rc != SQLITE_DONE) fail("insert", sqlite3_errmsg(db));
      bAdmitted = sqlite3_changes(db) == 1;
    }
    sqlite3_reset(pClaim);
    if (!bAdmitted) {
      aStat[iMe].usOther += b - a;
      continue;
    }
    aStat[iMe].usWrite += b - a;
    sqlite3_bind_text(pSettle, 1, bLedger ? zToken : zConv, -1, SQLITE_TRANSIENT);
    a = now_us();
    rc = sqlite3_step(pSettle);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail("settle", sqlite3_errmsg(db));
    sqlite3_reset(pSettle);
    aStat[iMe].usWrite += now_us() - a;
    aStat[iMe].nAdmitted++;
  }
  aStat[iMe].usTotal = now_us() - t0;
  for (j = 0; j < nProf; j++) {
    printf("   p%d %-48s %6ld %9.1f us each\n", iMe, azProf[j], anProf[j], adProf[j] / anProf[j]);
  }
  fflush(stdout);
  sqlite3_finalize(pClaim);
  sqlite3_finalize(pSettle);
  sqlite3_close(db);
  free(aOrder);
}

int main(int argc, char **argv) {
  const char *zExt, *zDir = argc > 5 ? argv[5] : ".";
  int bLedger, nProc, nKeys, aGo[2], i, st, bFailed = 0, nAdmitted = 0;
  char zPath[600];
  double t0, t;
  sqlite3 *db;
  if (argc < 5) {
    fprintf(stderr, "usage: race_profile EXTENSION ledger|bare NPROC NKEYS [DIR]\n");
    return 2;
  }
  zExt = argv[1];
  bLedger = strcmp(argv[2], "ledger") == 0;
  nProc = atoi(argv[3]);
  nKeys = atoi(argv[4]);
  if (nProc < 1 || nProc > 16 || nKeys < 1) fail("usage", "NPROC is 1 to 16, NKEYS at least 1");
  aStat = mmap(0, sizeof(Stat) * 16, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (aStat == MAP_FAILED) fail("mmap", "failed");
  memset(aStat, 0, sizeof(Stat) * 16);
  snprintf(zPath, sizeof(zPath), "%s/race.db", zDir);
  for (i = 0; i < 3; i++) {
    static const char *azSuffix[3] = {"", "-wal", "-shm"};
    char z[620];
    snprintf(z, sizeof(z), "%s%s", zPath, azSuffix[i]);
    remove(z);
  }
  /* the file, its journal mode and its table before any racer opens it */
  db = open_db(zPath, zExt);
  exec_db(db, "PRAGMA journal_mode=WAL");
  exec_db(db, bLedger ? "CREATE VIRTUAL TABLE L USING idempotency"
                      : "CREATE TABLE bare(id INTEGER PRIMARY KEY, tenant TEXT, key TEXT,"
                        " conversation TEXT, tool TEXT, args TEXT, effect TEXT, status TEXT,"
                        " result TEXT, attempt INT, token BLOB, created_at INT, updated_at INT,"
                        " lease_until INT, UNIQUE(tenant,key))");
  sqlite3_close(db);
  if (pipe(aGo)) fail("pipe", "failed");
  fflush(stdout);
  for (i = 0; i < nProc; i++) {
    pid_t pid = fork();
    if (pid < 0) fail("fork", "failed");
    if (pid == 0) {
      iMe = i;
      close(aGo[1]);
      child(zPath, zExt, bLedger, nKeys, aGo[0]);
      _exit(0);
    }
  }
  close(aGo[0]);
  usleep(200000); /* the racers prepare their statements */
  t0 = now_us();
  for (i = 0; i < nProc; i++) {
    if (write(aGo[1], "g", 1) != 1) fail("pipe", "start signal");
  }
  while (wait(&st) > 0) {
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) bFailed = 1;
  }
  t = now_us() - t0;
  for (i = 0; i < nProc; i++) nAdmitted += (int)aStat[i].nAdmitted;
  printf("%s processes=%d keys/s=%.0f admitted=%d of %d\n", argv[2], nProc, nKeys / (t / 1e6),
         nAdmitted, nKeys);
  for (i = 0; i < nProc; i++) {
    const Stat *p = &aStat[i];
    printf(
        "  p%d %.0f ms: busy handler %ld calls, %.0f ms asleep; %ld admitted (claims and settles"
        " %.0f ms); other claims %.0f ms\n",
        i, p->usTotal / 1e3, p->nBusy, p->usBusy / 1e3, p->nAdmitted, p->usWrite / 1e3,
        p->usOther / 1e3);
  }
  return bFailed || nAdmitted != nKeys ? 1 : 0;
}

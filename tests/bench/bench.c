/*
** bench.c: `make bench`, the cost of the extension next to plain SQLite.
**
**   bench EXT FIXTURE_DIR
**
** Loads the extension EXT into an in-memory database of the system
** libsqlite3 and measures, in one run, on each fixture FIXTURE_DIR/NAME.json
** (small, medium, large), the median time per call of every case in aCase[]
** below. The table prints absolute microseconds, then the ratios listed in
** aRatio[] (each measured case against its baseline from the same run), with
** the targets from the issue where there is one.
**
** Method: for each fixture, every case is first calibrated to an iteration
** count that takes about BENCH_ROUND_MS (default 20) milliseconds; then
** BENCH_ROUNDS (default 31) rounds run every case once in turn (so drift of
** the machine hits all cases alike), and a case's figure is the median over
** its rounds of time/iterations.
**
** Adding a case: one row in aCase[] ({name, setup SQL, statement SQL,
** teardown SQL} or a C function), and a row in aRatio[] pairing it with its
** baseline. In a statement, ?1 is bound to the fixture's text and ?2 (if
** present) to a counter that is unique across the whole run, so a case that
** inserts can make a fresh key per call. Setup runs once per fixture before
** calibration, teardown once after the rounds.
**
** Exit status: 0 after printing the table (a missed target is printed as
** such, not an error; BENCH_STRICT=1 makes it exit 3), 2 if a fixture is
** missing, 1 on any SQLite or extension error.
*/
#include <sqlite3.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

/* ------------------------------------------------------------------ */
/* Cases                                                               */
/* ------------------------------------------------------------------ */

typedef struct Fixture Fixture;
struct Fixture {
  const char *zName;
  char *z;      /* file contents (sqlite3_malloc64) */
  int n;        /* bytes */
  char *zCanon; /* idem_canonical() of z, for the C cases */
  int nCanon;
};

/* A C case: run the operation nIter times on pFix. */
typedef void (*BenchFunc)(const Fixture *pFix, int64_t nIter);

typedef struct BenchCase BenchCase;
struct BenchCase {
  const char *zName;     /* short label in the table */
  const char *zSetup;    /* SQL run once per fixture before timing, or NULL */
  const char *zSql;      /* statement timed per call, or NULL for xFunc */
  const char *zTeardown; /* SQL run once per fixture after timing, or NULL */
  BenchFunc xFunc;       /* C operation, when zSql is NULL */
};

/* Keeps the compiler from dropping the hash computation. */
static volatile uint64_t sink;

static void xxh3_canonical(const Fixture *pFix, int64_t nIter) {
  int64_t i;
  for (i = 0; i < nIter; i++) {
    XXH128_hash_t h = XXH3_128bits(pFix->zCanon, (size_t)pFix->nCanon);
    sink ^= h.low64 ^ h.high64;
  }
}

static const BenchCase aCase[] = {
    /* baseline: SQLite's own JSON parse and minify of the same text */
    {"json(?)", 0, "SELECT json(?1)", 0, 0},
    {"idem_canonical(?)", 0, "SELECT idem_canonical(?1)", 0, 0},
    {"idem_key('t','c','tool',?)", 0, "SELECT idem_key('t','c','tool',?1)", 0, 0},
    /* the hash alone, in C, over the already canonical bytes: what is left
    ** of idem_key's cost once parsing and printing are taken out */
    {"XXH3-128 of canonical (C)", 0, 0, 0, xxh3_canonical},
    /* the ledger cases run in their own phase: see bench_ledger() */
};
#define N_CASE ((int)(sizeof(aCase) / sizeof(aCase[0])))

typedef struct BenchRatio BenchRatio;
struct BenchRatio {
  const char *zCase;     /* numerator: a case name */
  const char *zBaseline; /* denominator: a case name */
  const char *zLabel;    /* row label */
  double aTarget[3];     /* upper bound per fixture (small, medium, large), 0 = none */
};

static const BenchRatio aRatio[] = {
    {"idem_key('t','c','tool',?)", "json(?)", "idem_key / json()", {1.5, 2.5, 0}},
    {"idem_canonical(?)", "json(?)", "idem_canonical / json()", {0, 0, 0}},
    {"idem_key('t','c','tool',?)", "XXH3-128 of canonical (C)", "idem_key / XXH3-128", {0, 0, 0}},
};
#define N_RATIO ((int)(sizeof(aRatio) / sizeof(aRatio[0])))

static const char *azFixture[] = {"small", "medium", "large"};
#define N_FIXTURE 3

/* ------------------------------------------------------------------ */
/* Running                                                             */
/* ------------------------------------------------------------------ */

static sqlite3 *db;
static int64_t iCounter; /* value of ?2, unique across the run */

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void die(const char *zWhat, const char *zDetail) __attribute__((noreturn));
static void die(const char *zWhat, const char *zDetail) {
  fprintf(stderr, "bench: %s: %s\n", zWhat, zDetail);
  exit(1);
}

static void exec_db(sqlite3 *pDb, const char *zSql) {
  char *zErr = 0;
  if (zSql && sqlite3_exec(pDb, zSql, 0, 0, &zErr) != SQLITE_OK) {
    fprintf(stderr, "bench: %s\n  in: %s\n", zErr ? zErr : "out of memory", zSql);
    exit(1);
  }
}

static void exec_or_die(const char *zSql) {
  char *zErr = 0;
  if (zSql && sqlite3_exec(db, zSql, 0, 0, &zErr) != SQLITE_OK) {
    fprintf(stderr, "bench: %s\n  in: %s\n", zErr ? zErr : "out of memory", zSql);
    exit(1);
  }
}

/* Read zDir/zName.json into pFix; returns 0, or 2 if the file is missing. */
static int read_fixture(const char *zDir, const char *zName, Fixture *pFix) {
  char zPath[4096];
  FILE *f;
  long n = -1;
  snprintf(zPath, sizeof(zPath), "%s/%s.json", zDir, zName);
  f = fopen(zPath, "rb");
  if (f == 0) {
    fprintf(stderr, "bench: fixture %s is missing (looked for %s)\n", zName, zPath);
    return 2;
  }
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    die("cannot read", zPath);
  }
  pFix->zName = zName;
  pFix->z = sqlite3_malloc64((sqlite3_uint64)n + 1);
  if (pFix->z == 0) die("out of memory reading", zPath);
  if (fread(pFix->z, 1, (size_t)n, f) != (size_t)n) die("cannot read", zPath);
  pFix->z[n] = 0;
  pFix->n = (int)n;
  fclose(f);
  return 0;
}

/* Canonical form of the fixture, through the extension, for the C cases. */
static void canonicalize_fixture(Fixture *pFix) {
  sqlite3_stmt *pStmt = 0;
  if (sqlite3_prepare_v2(db, "SELECT idem_canonical(?1)", -1, &pStmt, 0) != SQLITE_OK) {
    die("prepare idem_canonical", sqlite3_errmsg(db));
  }
  sqlite3_bind_text(pStmt, 1, pFix->z, pFix->n, SQLITE_STATIC);
  if (sqlite3_step(pStmt) != SQLITE_ROW) die(pFix->zName, sqlite3_errmsg(db));
  pFix->nCanon = sqlite3_column_bytes(pStmt, 0);
  pFix->zCanon = sqlite3_malloc64((sqlite3_uint64)pFix->nCanon + 1);
  if (pFix->zCanon == 0) die("out of memory", pFix->zName);
  memcpy(pFix->zCanon, sqlite3_column_text(pStmt, 0), (size_t)pFix->nCanon);
  pFix->zCanon[pFix->nCanon] = 0;
  sqlite3_finalize(pStmt);
}

/* One case prepared for one fixture. */
typedef struct Runner Runner;
struct Runner {
  const BenchCase *pCase;
  const Fixture *pFix;
  sqlite3_stmt *pStmt;
  int bCounter; /* statement has ?2 */
  int64_t nIter;
  double *aRound; /* us per call, one per round */
};

/* Run the case nIter times; returns the elapsed microseconds. */
static double run(Runner *p, int64_t nIter) {
  double t0 = now_us();
  int64_t i;
  if (p->pStmt == 0) {
    p->pCase->xFunc(p->pFix, nIter);
    return now_us() - t0;
  }
  for (i = 0; i < nIter; i++) {
    int rc;
    if (p->bCounter) sqlite3_bind_int64(p->pStmt, 2, ++iCounter);
    while ((rc = sqlite3_step(p->pStmt)) == SQLITE_ROW) {
    }
    if (rc != SQLITE_DONE) die(p->pCase->zName, sqlite3_errmsg(db));
    sqlite3_reset(p->pStmt);
  }
  return now_us() - t0;
}

static void prepare_runner(Runner *p, const BenchCase *pCase, const Fixture *pFix, int nRound) {
  memset(p, 0, sizeof(*p));
  p->pCase = pCase;
  p->pFix = pFix;
  p->aRound = calloc((size_t)nRound, sizeof(double));
  if (p->aRound == 0) die("out of memory", pCase->zName);
  exec_or_die(pCase->zSetup);
  if (pCase->zSql) {
    if (sqlite3_prepare_v2(db, pCase->zSql, -1, &p->pStmt, 0) != SQLITE_OK) {
      die(pCase->zName, sqlite3_errmsg(db));
    }
    sqlite3_bind_text(p->pStmt, 1, pFix->z, pFix->n, SQLITE_STATIC);
    p->bCounter = sqlite3_bind_parameter_count(p->pStmt) >= 2;
  }
}

/* Smallest iteration count whose run takes at least msRound milliseconds. */
static void calibrate(Runner *p, double msRound) {
  int64_t n = 1;
  double t;
  run(p, 1); /* warm up, and surface an error before timing */
  for (;;) {
    t = run(p, n);
    if (t >= msRound * 1000.0 / 4 || n >= ((int64_t)1 << 40)) break;
    n *= 2;
  }
  n = (int64_t)((double)n * (msRound * 1000.0) / (t > 0 ? t : 1));
  p->nIter = n < 1 ? 1 : n;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *a, int n) {
  qsort(a, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? a[n / 2] : (a[n / 2 - 1] + a[n / 2]) / 2;
}

static int env_int(const char *zName, int iDefault, int iMin, int iMax) {
  const char *z = getenv(zName);
  int v = z && *z ? atoi(z) : iDefault;
  return v < iMin ? iMin : v > iMax ? iMax : v;
}

static int find_case(const char *zName) {
  int i;
  for (i = 0; i < N_CASE; i++) {
    if (strcmp(aCase[i].zName, zName) == 0) return i;
  }
  die("no such case in aRatio[]", zName);
}

/* ------------------------------------------------------------------ */
/* The ledger phase                                                    */
/* ------------------------------------------------------------------ */

/* A ledger row's columns in a plain table with a UNIQUE key: the nearest
** plain-SQLite equivalent of a claim is an INSERT ... ON CONFLICT DO
** NOTHING of the same row, checked with changes(). */
static const char zPlainSchema[] =
    "CREATE TABLE plain(id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, key TEXT NOT NULL,"
    " conversation TEXT NOT NULL, tool TEXT NOT NULL, args TEXT NOT NULL, effect TEXT NOT NULL,"
    " status TEXT NOT NULL, attempt INTEGER NOT NULL, token TEXT NOT NULL,"
    " created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, lease_until INTEGER NOT NULL,"
    " UNIQUE(tenant, key));"
    "CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=3600);";

/* ?1 args, ?2 a fresh counter */
static const char zPlainInsert[] =
    "INSERT INTO plain(tenant,key,conversation,tool,args,effect,status,attempt,token,"
    "created_at,updated_at,lease_until) VALUES('t',lower(hex(randomblob(16))),'c'||?2,'tool',?1,"
    "'external','claimed',1,lower(hex(randomblob(16))),?2,?2,?2) ON CONFLICT DO NOTHING";
/* the same row into a copy of the ledger's rows table, with its CHECKs,
** unique indexes and triggers: what the plain-SQL defence itself costs */
static const char zCopyInsert[] =
    "INSERT INTO rowscopy(tenant,\"key\",conversation,tool,args,effect,status,attempt,token,"
    "created_at,updated_at,lease_until) VALUES('t','idem1-'||lower(hex(randomblob(16))),"
    "'c'||?2,'tool',?1,'external','claimed',1,randomblob(16),?2,?2,?2)"
    " ON CONFLICT(tenant,\"key\") DO NOTHING";
static const char zClaim[] = "SELECT idem_claim('L','t','c'||?2,'tool',?1)";
static const char zInsertClaim[] =
    "INSERT INTO L(tenant,conversation,tool,args) VALUES('t','i'||?2,'tool',?1)";

typedef struct Timed Timed;
struct Timed {
  const char *zName;
  const char *zSql;
  sqlite3_stmt *pStmt;
  int bChanges; /* check sqlite3_changes()==1 after each call */
  double aRound[64];
};

static sqlite3_stmt *prepare_or_die(sqlite3 *pDb, const char *zSql) {
  sqlite3_stmt *p = 0;
  if (sqlite3_prepare_v2(pDb, zSql, -1, &p, 0) != SQLITE_OK) die(zSql, sqlite3_errmsg(pDb));
  return p;
}

/* Run t->pStmt n times with ?2 from *piKey (incremented, or cycled over
** [0, nCycle) when nCycle > 0); returns microseconds per call. */
static double timed_run(sqlite3 *pDb, Timed *t, int n, int64_t *piKey, int64_t nCycle, int bTxn) {
  double t0 = now_us();
  int i, rc;
  if (bTxn) sqlite3_exec(pDb, "BEGIN", 0, 0, 0);
  for (i = 0; i < n; i++) {
    int64_t k = nCycle > 0 ? (*piKey)++ % nCycle : ++*piKey;
    if (sqlite3_bind_parameter_count(t->pStmt) >= 2) sqlite3_bind_int64(t->pStmt, 2, k);
    while ((rc = sqlite3_step(t->pStmt)) == SQLITE_ROW) {
    }
    if (rc != SQLITE_DONE) die(t->zName, sqlite3_errmsg(pDb));
    if (t->bChanges && sqlite3_changes(pDb) != 1) die(t->zName, "changes() is not 1");
    sqlite3_reset(t->pStmt);
  }
  if (bTxn && sqlite3_exec(pDb, "COMMIT", 0, 0, 0) != SQLITE_OK) die("COMMIT", sqlite3_errmsg(pDb));
  return (now_us() - t0) / n;
}

static sqlite3 *open_bench_db(const char *zPath, const char *zExt) {
  sqlite3 *pDb = 0;
  char *zErr = 0;
  if (sqlite3_open(zPath, &pDb) != SQLITE_OK) die("open", sqlite3_errmsg(pDb));
  sqlite3_db_config(pDb, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 1, (int *)0);
  if (sqlite3_load_extension(pDb, zExt, 0, &zErr) != SQLITE_OK) {
    die(zExt, zErr ? zErr : sqlite3_errmsg(pDb));
  }
  if (sqlite3_exec(pDb, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", 0, 0, 0)) {
    die("pragma", sqlite3_errmsg(pDb));
  }
  exec_db(pDb, zPlainSchema);
  return pDb;
}

/*
** Claims against the plain equivalent, on a WAL file database with
** synchronous=FULL: in one transaction and in autocommit (one commit per
** claim); then replay (a claim of a settled key) and a lookup through the
** ledger table against a primary-key SELECT.
*/
static int bench_ledger(const char *zExt, const Fixture *aFixIn, const char *zTmp) {
  int j, r, nMissed = 0;
  int nRound = env_int("BENCH_LEDGER_ROUNDS", 9, 3, 63);
  printf("\nledger (WAL file, synchronous=FULL), median of %d rounds, us per call\n", nRound);
  printf("%-34s %10s %10s %10s\n", "", "small", "medium", "large");
  {
    double aRes[9][N_FIXTURE];
    static const char *azRow[9] = {
        "claim, one transaction: idem_claim", "  INSERT INTO ledger",
        "  plain INSERT ON CONFLICT",         "claim, autocommit: idem_claim",
        "  plain INSERT ON CONFLICT",         "replay: idem_claim (settled)",
        "  SELECT FROM ledger WHERE t,k",     "  plain SELECT by primary key",
        "  INSERT into a copy of _rows"};
    for (j = 0; j < N_FIXTURE; j++) {
      char zPath[4200];
      sqlite3 *pDb;
      int64_t iKey = 0, iCyc = 0;
      Timed a[9];
      int i, nTxn = 500, nAuto = 60;
      snprintf(zPath, sizeof(zPath), "%s/ledger-%d.db", zTmp, j);
      remove(zPath);
      pDb = open_bench_db(zPath, zExt);
      memset(a, 0, sizeof(a));
      a[0].zSql = zClaim;
      a[1].zSql = zInsertClaim;
      a[1].bChanges = 1;
      a[2].zSql = zPlainInsert;
      a[2].bChanges = 1;
      a[3].zSql = zClaim;
      a[4].zSql = zPlainInsert;
      a[4].bChanges = 1;
      a[5].zSql = "SELECT idem_claim('L','t','s'||?2,'tool',?1)";
      a[6].zSql = "SELECT * FROM L WHERE tenant='t' AND key=(SELECT k FROM skeys WHERE i=?2)";
      a[7].zSql = "SELECT * FROM plain WHERE tenant='t' AND key=(SELECT k FROM skeys WHERE i=?2)";
      a[8].zSql = zCopyInsert;
      a[8].bChanges = 1;
      {
        /* a copy of the rows table, made from its own CREATE statement */
        sqlite3_stmt *pC =
            prepare_or_die(pDb,
                           "SELECT replace(sql, 'CREATE TABLE \"L_rows\"', 'CREATE TABLE rowscopy')"
                           " FROM sqlite_schema WHERE name='L_rows'");
        if (sqlite3_step(pC) != SQLITE_ROW) die("rows table", sqlite3_errmsg(pDb));
        exec_db(pDb, (const char *)sqlite3_column_text(pC, 0));
        sqlite3_finalize(pC);
        exec_db(pDb, "CREATE TABLE skeys(i INTEGER PRIMARY KEY, k TEXT NOT NULL)");
      }
      for (i = 0; i < 9; i++) {
        a[i].zName = azRow[i];
        a[i].pStmt = prepare_or_die(pDb, a[i].zSql);
        sqlite3_bind_text(a[i].pStmt, 1, aFixIn[j].z, aFixIn[j].n, SQLITE_STATIC);
      }
      /* settled keys for the replay rows: s0..s999, settled succeeded */
      exec_db(pDb, "BEGIN");
      {
        /* ...and the same keys as rows of the plain table, for its lookups */
        sqlite3_stmt *pS = prepare_or_die(
            pDb,
            "SELECT json_extract(idem_settle('L', json_extract(idem_claim('L','t','s'||?2,'tool',"
            "?1),'$.token'), 'succeeded', '{\"ok\":true}'), '$.key')");
        sqlite3_stmt *pK = prepare_or_die(pDb, "INSERT INTO skeys(i,k) VALUES(?1,?2)");
        sqlite3_stmt *pP = prepare_or_die(
            pDb,
            "INSERT INTO plain(tenant,key,conversation,tool,args,effect,status,attempt,token,"
            "created_at,updated_at,lease_until) VALUES('t',?1,'s','tool',?2,'external',"
            "'succeeded',1,lower(hex(randomblob(16))),0,0,0)");
        sqlite3_bind_text(pS, 1, aFixIn[j].z, aFixIn[j].n, SQLITE_STATIC);
        for (i = 0; i < 1000; i++) {
          sqlite3_bind_int64(pS, 2, i);
          if (sqlite3_step(pS) != SQLITE_ROW) die("settle", sqlite3_errmsg(pDb));
          sqlite3_bind_int(pK, 1, i);
          sqlite3_bind_value(pK, 2, sqlite3_column_value(pS, 0));
          sqlite3_bind_value(pP, 1, sqlite3_column_value(pS, 0));
          sqlite3_bind_text(pP, 2, aFixIn[j].z, aFixIn[j].n, SQLITE_STATIC);
          if (sqlite3_step(pK) != SQLITE_DONE || sqlite3_step(pP) != SQLITE_DONE) {
            die("lookup rows", sqlite3_errmsg(pDb));
          }
          sqlite3_reset(pK);
          sqlite3_reset(pP);
          sqlite3_reset(pS);
        }
        sqlite3_finalize(pS);
        sqlite3_finalize(pK);
        sqlite3_finalize(pP);
      }
      exec_db(pDb, "COMMIT");
      for (r = 0; r < nRound; r++) {
        a[0].aRound[r] = timed_run(pDb, &a[0], nTxn, &iKey, 0, 1);
        a[1].aRound[r] = timed_run(pDb, &a[1], nTxn, &iKey, 0, 1);
        a[2].aRound[r] = timed_run(pDb, &a[2], nTxn, &iKey, 0, 1);
        a[3].aRound[r] = timed_run(pDb, &a[3], nAuto, &iKey, 0, 0);
        a[4].aRound[r] = timed_run(pDb, &a[4], nAuto, &iKey, 0, 0);
        a[5].aRound[r] = timed_run(pDb, &a[5], nTxn, &iCyc, 1000, 0);
        a[6].aRound[r] = timed_run(pDb, &a[6], nTxn, &iCyc, 1000, 0);
        a[7].aRound[r] = timed_run(pDb, &a[7], nTxn, &iCyc, 1000, 0);
        a[8].aRound[r] = timed_run(pDb, &a[8], nTxn, &iKey, 0, 1);
      }
      for (i = 0; i < 9; i++) {
        aRes[i][j] = median(a[i].aRound, nRound);
        sqlite3_finalize(a[i].pStmt);
      }
      sqlite3_close(pDb);
      remove(zPath);
    }
    for (r = 0; r < 9; r++) {
      printf("%-34s", azRow[r]);
      for (j = 0; j < N_FIXTURE; j++) printf(" %10.3f", aRes[r][j]);
      printf("\n");
    }
    {
      static const struct {
        int iNum, iDen;
        const char *zLabel;
        double target;
      } aR[] = {
          {0, 2, "idem_claim / plain, one transaction", 1.3},
          {0, 8, "idem_claim / copy of _rows, one txn", 0},
          {1, 2, "INSERT claim / plain, one transaction", 1.3},
          {3, 4, "idem_claim / plain, autocommit", 1.05},
          {5, 7, "replay idem_claim / primary-key SELECT", 1.2},
          {6, 7, "ledger SELECT / primary-key SELECT", 1.2},
      };
      printf("\n%-40s %8s %8s %8s   target\n", "ratio (same run)", "small", "medium", "large");
      for (r = 0; r < (int)(sizeof(aR) / sizeof(aR[0])); r++) {
        double x0 = aRes[aR[r].iNum][0] / aRes[aR[r].iDen][0];
        printf("%-40s", aR[r].zLabel);
        for (j = 0; j < N_FIXTURE; j++)
          printf(" %7.2fx", aRes[aR[r].iNum][j] / aRes[aR[r].iDen][j]);
        if (aR[r].target > 0) {
          printf("   <= %.2fx on small: %s\n", aR[r].target, x0 <= aR[r].target ? "met" : "MISSED");
          if (x0 > aR[r].target) nMissed++;
        } else {
          printf("   (the extension's own cost over its schema)\n");
        }
      }
    }
  }
  return nMissed;
}

/*
** Claim cost as the ledger grows (10k, 100k, 1M, 5M rows by default;
** BENCH_SCALE_MAX lowers the top), at SQLite's default cache_size, against
** the plain table grown alike; and bytes per claim on disk.
*/
static void bench_scale(const char *zExt, const Fixture *pSmall, const char *zTmp) {
  static const int64_t aSize[] = {10000, 100000, 1000000, 5000000};
  int64_t nMax = (int64_t)env_int("BENCH_SCALE_MAX", 5000000, 10000, 50000000);
  char zPath[2][4200];
  sqlite3 *apDb[2];
  int k, w;
  double aBase[2] = {0, 0};
  printf(
      "\nclaim cost as the table grows (small args, default cache_size, WAL, one transaction"
      " per 10k rows)\n%-12s %14s %14s %10s %10s %14s %14s\n",
      "rows", "idem_claim us", "plain us", "ledger x", "plain x", "ledger B/row", "plain B/row");
  for (w = 0; w < 2; w++) {
    snprintf(zPath[w], sizeof(zPath[w]), "%s/scale-%d.db", zTmp, w);
    remove(zPath[w]);
    apDb[w] = open_bench_db(zPath[w], zExt);
    exec_db(apDb[w], "PRAGMA synchronous=NORMAL");
  }
  {
    int64_t nRows[2] = {0, 0};
    Timed t[2];
    memset(t, 0, sizeof(t));
    t[0].zName = "scale claim";
    t[0].zSql = zClaim;
    t[1].zName = "scale plain";
    t[1].zSql = zPlainInsert;
    t[1].bChanges = 1;
    for (w = 0; w < 2; w++) {
      t[w].pStmt = prepare_or_die(apDb[w], t[w].zSql);
      sqlite3_bind_text(t[w].pStmt, 1, pSmall->z, pSmall->n, SQLITE_STATIC);
    }
    for (k = 0; k < 4 && aSize[k] <= nMax; k++) {
      double us[2];
      int64_t aBytes[2];
      for (w = 0; w < 2; w++) {
        /* grow to the size, 10k rows per transaction */
        while (nRows[w] < aSize[k]) {
          int64_t n = aSize[k] - nRows[w] > 10000 ? 10000 : aSize[k] - nRows[w];
          int64_t iKey = 1000000000 + nRows[w];
          timed_run(apDb[w], &t[w], (int)n, &iKey, 0, 1);
          nRows[w] += n;
        }
        {
          /* measure 2000 fresh claims, keys beyond the grown range */
          int64_t iKey = 9000000000LL + aSize[k] * 10;
          us[w] = timed_run(apDb[w], &t[w], 2000, &iKey, 0, 1);
          nRows[w] += 2000;
        }
        {
          sqlite3_stmt *pS = prepare_or_die(
              apDb[w], "SELECT page_count*page_size FROM pragma_page_count, pragma_page_size");
          sqlite3_step(pS);
          aBytes[w] = sqlite3_column_int64(pS, 0);
          sqlite3_finalize(pS);
        }
      }
      if (k == 0) {
        aBase[0] = us[0];
        aBase[1] = us[1];
      }
      printf("%-12lld %14.3f %14.3f %9.2fx %9.2fx %14.0f %14.0f\n", (long long)aSize[k], us[0],
             us[1], us[0] / aBase[0], us[1] / aBase[1], (double)aBytes[0] / (double)nRows[0],
             (double)aBytes[1] / (double)nRows[1]);
      fflush(stdout);
    }
    for (w = 0; w < 2; w++) sqlite3_finalize(t[w].pStmt);
  }
  for (w = 0; w < 2; w++) {
    sqlite3_close(apDb[w]);
    remove(zPath[w]);
  }
}

int main(int argc, char **argv) {
  const char *zExt, *zDir;
  Fixture aFix[N_FIXTURE];
  double aUs[N_CASE][N_FIXTURE];
  Runner aRun[N_CASE];
  char *zErr = 0;
  int nRound = env_int("BENCH_ROUNDS", 31, 3, 1001);
  int msRound = env_int("BENCH_ROUND_MS", 20, 1, 10000);
  int bStrict = env_int("BENCH_STRICT", 0, 0, 1);
  int i, j, r, rc = 0, nMissed = 0;
  double t0 = now_us();

  if (argc != 3) {
    fprintf(stderr, "usage: %s EXTENSION FIXTURE_DIR\n", argv[0]);
    return 1;
  }
  zExt = argv[1];
  zDir = argv[2];
  memset(aFix, 0, sizeof(aFix));
  for (j = 0; j < N_FIXTURE; j++) {
    if (read_fixture(zDir, azFixture[j], &aFix[j])) rc = 2;
  }
  if (rc) {
    fprintf(stderr,
            "bench: the fixtures are the shared bench-fixtures (small, medium, large); "
            "set SHARED to the directory that holds bench-fixtures/\n");
    return rc;
  }

  if (sqlite3_open(":memory:", &db) != SQLITE_OK) die("open", sqlite3_errmsg(db));
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 1, (int *)0);
  if (sqlite3_load_extension(db, zExt, 0, &zErr) != SQLITE_OK) {
    die(zExt, zErr ? zErr : sqlite3_errmsg(db));
  }

  for (j = 0; j < N_FIXTURE; j++) {
    canonicalize_fixture(&aFix[j]);
    for (i = 0; i < N_CASE; i++) {
      prepare_runner(&aRun[i], &aCase[i], &aFix[j], nRound);
      calibrate(&aRun[i], msRound);
    }
    for (r = 0; r < nRound; r++) {
      for (i = 0; i < N_CASE; i++) {
        aRun[i].aRound[r] = run(&aRun[i], aRun[i].nIter) / (double)aRun[i].nIter;
      }
    }
    for (i = 0; i < N_CASE; i++) {
      aUs[i][j] = median(aRun[i].aRound, nRound);
      sqlite3_finalize(aRun[i].pStmt);
      free(aRun[i].aRound);
      exec_or_die(aCase[i].zTeardown);
    }
  }

  printf("sqlite-idempotency bench: SQLite %s, extension %s\n", sqlite3_libversion(), zExt);
  printf("median of %d rounds of ~%d ms each per case, all measured in this run\n\n", nRound,
         msRound);
  printf("%-30s", "microseconds per call");
  for (j = 0; j < N_FIXTURE; j++) printf(" %10s", azFixture[j]);
  printf("\n%-30s", "  (fixture bytes)");
  for (j = 0; j < N_FIXTURE; j++) printf(" %10d", aFix[j].n);
  printf("\n");
  for (i = 0; i < N_CASE; i++) {
    printf("%-30s", aCase[i].zName);
    for (j = 0; j < N_FIXTURE; j++) printf(" %10.3f", aUs[i][j]);
    printf("\n");
  }

  printf("\n%-30s", "ratio (same run)");
  for (j = 0; j < N_FIXTURE; j++) printf(" %10s", azFixture[j]);
  printf("   target\n");
  for (i = 0; i < N_RATIO; i++) {
    int iNum = find_case(aRatio[i].zCase), iDen = find_case(aRatio[i].zBaseline);
    int nTarget = 0;
    printf("%-30s", aRatio[i].zLabel);
    for (j = 0; j < N_FIXTURE; j++) printf(" %9.2fx", aUs[iNum][j] / aUs[iDen][j]);
    for (j = 0; j < N_FIXTURE; j++) {
      double x = aUs[iNum][j] / aUs[iDen][j], t = aRatio[i].aTarget[j];
      if (t <= 0) continue;
      printf("%s <= %.1fx %s: %s", nTarget++ ? "," : "  ", t, azFixture[j],
             x <= t ? "met" : "MISSED");
      if (x > t) nMissed++;
    }
    printf("\n");
  }
  printf("\n%d case(s) x %d fixtures in %.1f s; %s\n", N_CASE, N_FIXTURE, (now_us() - t0) / 1e6,
         nMissed ? "some targets MISSED" : "all targets met");

  {
    const char *zTmp = getenv("TMPDIR");
    char zTmpDir[4096];
    snprintf(zTmpDir, sizeof(zTmpDir), "%s/idem-bench-XXXXXX", zTmp && *zTmp ? zTmp : "/tmp");
    if (mkdtemp(zTmpDir) == 0) die("mkdtemp", zTmpDir);
    if (env_int("BENCH_LEDGER", 1, 0, 1)) nMissed += bench_ledger(zExt, aFix, zTmpDir);
    if (env_int("BENCH_SCALE", 1, 0, 1)) bench_scale(zExt, &aFix[0], zTmpDir);
    rmdir(zTmpDir);
  }

  for (j = 0; j < N_FIXTURE; j++) {
    sqlite3_free(aFix[j].z);
    sqlite3_free(aFix[j].zCanon);
  }
  sqlite3_close(db);
  return bStrict && nMissed ? 3 : 0;
}

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
    /* ledger cases (claim vs INSERT ... ON CONFLICT DO NOTHING, replay
    ** lookup vs primary-key SELECT) go here */
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

  for (j = 0; j < N_FIXTURE; j++) {
    sqlite3_free(aFix[j].z);
    sqlite3_free(aFix[j].zCanon);
  }
  sqlite3_close(db);
  return bStrict && nMissed ? 3 : 0;
}

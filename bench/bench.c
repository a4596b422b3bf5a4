/*
** bench.c: `make bench`, the cost of the extension next to plain SQLite.
**
**   bench EXT FIXTURE_DIR [GRAMMAR_CASES_SQL]
**
** Loads the extension EXT into the system libsqlite3 and measures, in one
** run, every figure below as a ratio to plain SQLite doing the nearest
** equivalent. FIXTURE_DIR holds small.json, medium.json and large.json; a
** fourth document, "floats" (an array of 16- and 17-digit doubles), is
** generated from a fixed seed. GRAMMAR_CASES_SQL is the file of key-grammar
** cases (tests/sql/03-plain-grammar-cases.sql): every plain-SQL spelling of
** the grammar is checked against idem_valid_key on those cases, in UTF-8,
** UTF-16le and UTF-16be, before it is timed; without the file the check is
** skipped and says so.
**
** Sections, in the order they run:
**
**   1. calls      idem_key, idem_canonical and json() on the same text, per
**                 document; an empty statement shows what the harness adds
**   2. grammar    each spelling of the key grammar: equivalence, cost
**   3. claim      a claim (small arguments) against the same row inserted
**                 into a careful plain table (the grammar CHECKs on tenant,
**                 conversation, tool and key, NOT NULL, UNIQUE(tenant,key))
**                 and into a bare one (UNIQUE(tenant,key) only), each
**                 INSERT ... ON CONFLICT DO NOTHING checked with changes();
**                 in one transaction and in autocommit (WAL,
**                 synchronous=FULL), one database file per table
**   3b. targets   a claim naming one target (fresh each call: admitted)
**                 against the same claim naming none, in one transaction
**                 and in autocommit (WAL, synchronous=FULL), one file each
**   4. replay     a claim of a settled key against idem_key plus a
**                 primary-key SELECT of the stored row
**   4b. settle    an autocommit claim + settle against a bare insert +
**                 update (WAL, synchronous=NORMAL), and the synced commits
**                 of a durable call and of a replay at synchronous=FULL,
**                 counted by a shim VFS over the default one
**   5. race       1, 2 and 4 processes claiming (and settling) the same
**                 keys, keys settled per second, ledger vs bare (WAL,
**                 synchronous=NORMAL, busy_timeout). The parent makes the
**                 file, its journal mode and its table before forking, so
**                 no racer changes the file's setup; a racer that fails
**                 ends the section with its error (the parent stops the
**                 others), and every wait is bounded: BENCH_RACE_TIMEOUT
**                 (300) seconds a run, busy_timeout, and an alarm() in each
**                 racer. BENCH_RACE_FAIL=setup (or claim) makes the last
**                 racer of the first 2-process run fail before the start
**                 signal (or after half its claims), to show exactly that
**   6. retention  claims on a ledger with retention_seconds and many expired
**                 terminal rows vs one without; skipped, with the reason,
**                 when the extension refuses the option
**   7. growth     claim cost from 10k rows up to BENCH_MAX_ROWS (default
**                 1,000,000; 5000000 adds the 5M step) vs the careful
**                 table, and bytes per row
**   8. attention  100 unknown rows listed through the partial index of open
**                 rows in a ledger of BENCH_ATTENTION_ROWS (5,000,000)
**                 settled rows vs the same query as a scan, and a claim
**                 with its settle on a ledger with that index vs without
**   9. memory     what a connection with one ledger costs by SQLite's own
**                 accounting (sqlite3_memory_used, and sqlite3_db_status
**                 CACHE_USED, SCHEMA_USED, STMT_USED): open, after CREATE,
**                 after the first claim, then every tenth of
**                 BENCH_MEMORY_CLAIMS (1,000,000) claims, each settled, in
**                 transactions of 10,000; the heap outside the page cache
**                 must not grow, and the page cache stays within
**                 cache_size (targets)
**
** A summary lists every target with its measured ratio and met / MISSED.
**
** Method: the calls of sections 1 and 2 are calibrated to about BENCH_ROUND_MS
** (20) ms per round, then BENCH_ROUNDS (31) rounds run every case in turn;
** sections 3, 4 and 6 run BENCH_LEDGER_ROUNDS (15) rounds of fixed batches,
** the compared operations alternating within each round, so drift of the
** machine hits them alike. Each figure is the median over its rounds.
** Times are CPU time of the process (user and system), which leaves out
** the time a shared machine gives to other processes; the autocommit
** claims and the races, whose point is waiting for the disk and for each
** other, are timed by the wall clock.
**
** Environment: BENCH_ROUNDS, BENCH_ROUND_MS, BENCH_LEDGER_ROUNDS,
** BENCH_AUTOCOMMIT_CALLS (200 per round), BENCH_RACE_KEYS (3000),
** BENCH_RACE_ROUNDS (5), BENCH_RACE_TIMEOUT (300), BENCH_RACE_FAIL,
** BENCH_RETENTION_ROWS (100000), BENCH_MAX_ROWS,
** BENCH_ATTENTION_ROWS (5000000), BENCH_MEMORY_CLAIMS (1000000),
** BENCH_SECTIONS (a list of section names; default all), BENCH_STRICT=1
** (exit 3 when a target is missed), TMPDIR (where the database files go).
**
** Exit status: 0 after printing the tables (a missed target is printed as
** such, not an error), 3 with BENCH_STRICT=1 and a missed target, 2 if a
** fixture is missing, 1 on any SQLite or extension error or wrong answer.
*/
#include <sqlite3.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "../tests/c/faultvfs.h" /* counts xSync (section 4b) */

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

#define MAX_ROUND 64

static const char *zExtPath;   /* the extension */
static char zTmpDir[4096];     /* this run's directory of database files */
static volatile uint64_t sink; /* keeps the compiler from dropping work */
/* The shape of the token a claim stores (a BLOB, TEXT or INTEGER of some
** length), so the plain tables store a random token of the same shape. */
static int eTokenType = SQLITE_BLOB;
static int nTokenLen = 16;

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* CPU time of this (single-threaded) process, user and system, in
** microseconds: what the work itself costs, without the time the machine
** gave to other processes. The figures that are about waiting (autocommit,
** races) use now_us() instead. */
static double cpu_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int64_t wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void die(const char *zWhat, const char *zDetail) __attribute__((noreturn));
static void die(const char *zWhat, const char *zDetail) {
  fprintf(stderr, "bench: %s: %s\n", zWhat, zDetail);
  exit(1);
}

static void exec_db(sqlite3 *db, const char *zSql) {
  char *zErr = 0;
  if (zSql && sqlite3_exec(db, zSql, 0, 0, &zErr) != SQLITE_OK) {
    fprintf(stderr, "bench: %s\n  in: %s\n", zErr ? zErr : "out of memory", zSql);
    exit(1);
  }
}

static sqlite3_stmt *prepare_db(sqlite3 *db, const char *zSql) {
  sqlite3_stmt *p = 0;
  if (sqlite3_prepare_v2(db, zSql, -1, &p, 0) != SQLITE_OK) die(zSql, sqlite3_errmsg(db));
  return p;
}

/* The first column of the first row of zSql, as an integer. */
static int64_t query_int(sqlite3 *db, const char *zSql) {
  sqlite3_stmt *p = prepare_db(db, zSql);
  int64_t v;
  if (sqlite3_step(p) != SQLITE_ROW) die(zSql, sqlite3_errmsg(db));
  v = sqlite3_column_int64(p, 0);
  sqlite3_finalize(p);
  return v;
}

static int env_int(const char *zName, int iDefault, int iMin, int iMax) {
  const char *z = getenv(zName);
  int v = z && *z ? atoi(z) : iDefault;
  return v < iMin ? iMin : v > iMax ? iMax : v;
}

/* Is section zName selected by BENCH_SECTIONS (default: all)? */
static int section_on(const char *zName) {
  const char *z = getenv("BENCH_SECTIONS");
  const char *p;
  size_t n = strlen(zName);
  if (z == 0 || *z == 0) return 1;
  for (p = strstr(z, zName); p; p = strstr(p + 1, zName)) {
    if ((p == z || p[-1] == ',' || p[-1] == ' ') && (p[n] == 0 || p[n] == ',' || p[n] == ' ')) {
      return 1;
    }
  }
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(const double *aIn, int n) {
  double a[MAX_ROUND * 4];
  if (n > (int)(sizeof(a) / sizeof(a[0]))) n = (int)(sizeof(a) / sizeof(a[0]));
  memcpy(a, aIn, (size_t)n * sizeof(double));
  qsort(a, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? a[n / 2] : (a[n / 2 - 1] + a[n / 2]) / 2;
}

/* splitmix64: the run's deterministic pseudo-random numbers */
static uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
static uint64_t prngState = 20261130;
static uint64_t prng(void) { return mix64(prngState++); }

static void hex64(uint64_t v, char *z) {
  static const char azHex[] = "0123456789abcdef";
  int i;
  for (i = 15; i >= 0; i--, v >>= 4) z[i] = azHex[v & 15];
}

/* A derived-looking key, "idem1-" and 32 hex digits, from two 64-bit
** values: the shape and randomness of the ledger's keys. z gets 39 bytes. */
static void make_key(uint64_t a, uint64_t b, char *z) {
  memcpy(z, "idem1-", 6);
  hex64(a, z + 6);
  hex64(b, z + 22);
  z[38] = 0;
}

static sqlite3 *open_db(const char *zName, const char *zVfs, const char *zPragmas) {
  char zPath[4200];
  sqlite3 *db = 0;
  char *zErr = 0;
  if (zName) {
    snprintf(zPath, sizeof(zPath), "%s/%s.db", zTmpDir, zName);
  } else {
    snprintf(zPath, sizeof(zPath), ":memory:");
  }
  if (sqlite3_open_v2(zPath, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, zVfs) != SQLITE_OK) {
    die("open", db ? sqlite3_errmsg(db) : zPath);
  }
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 1, (int *)0);
  if (sqlite3_load_extension(db, zExtPath, 0, &zErr) != SQLITE_OK) {
    die(zExtPath, zErr ? zErr : sqlite3_errmsg(db));
  }
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, (int *)0);
  exec_db(db, zPragmas);
  return db;
}

static void remove_db(const char *zName) {
  static const char *azSuffix[] = {"", "-wal", "-shm", "-journal"};
  char zPath[4300];
  int i;
  for (i = 0; i < 4; i++) {
    snprintf(zPath, sizeof(zPath), "%s/%s.db%s", zTmpDir, zName, azSuffix[i]);
    remove(zPath);
  }
}

static const char zWalFull[] = "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;";
/* busy_timeout first: a journal-mode change takes locks, and without a
** busy handler a second connection's open would fail at once */
static const char zWalNormal[] =
    "PRAGMA busy_timeout=10000; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;";
/* A racing process's open: the parent made the file and set WAL (a
** persistent mode) before forking, so a racer changes no journal mode */
static const char zRacer[] = "PRAGMA busy_timeout=10000; PRAGMA synchronous=NORMAL;";

/* ------------------------------------------------------------------ */
/* Fixtures                                                            */
/* ------------------------------------------------------------------ */

typedef struct Fixture Fixture;
struct Fixture {
  const char *zName;
  char *z; /* the document (sqlite3_malloc64) */
  int n;
  char *zCanon; /* idem_canonical() of z */
  int nCanon;
};

#define N_FIXTURE 4
static const char *azFixture[N_FIXTURE] = {"small", "medium", "large", "floats"};
static Fixture aFix[N_FIXTURE];
#define FIX_SMALL 0
#define FIX_FLOATS 3

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

static double pow10_table(int e) {
  double d = 1;
  int i;
  for (i = 0; i < (e < 0 ? -e : e); i++) d *= 10;
  return e < 0 ? 1 / d : d;
}

/* "floats": {"points":[...]} with 96 doubles of 16 or 17 significant
** digits (the fewest of the two that reads back to the same double),
** signs and exponents from e-12 to e+12 mixed, from a fixed seed. */
static void make_floats(Fixture *pFix) {
  char *z = sqlite3_malloc64(96 * 32 + 64);
  int n = 0, i;
  uint64_t s = 0x5eed;
  if (z == 0) die("out of memory", "floats");
  n += sprintf(z + n, "{\"points\":[");
  for (i = 0; i < 96; i++) {
    uint64_t u = mix64(s++);
    double m = (double)(u >> 11) / 9007199254740992.0; /* [0,1), 53 bits */
    int e = (int)((u >> 3) % 25) - 12;
    double d = (m + 0.1) * pow10_table(e);
    char zNum[40];
    if (u & 1) d = -d;
    snprintf(zNum, sizeof(zNum), "%.16g", d);
    if (strtod(zNum, 0) != d) snprintf(zNum, sizeof(zNum), "%.17g", d);
    n += sprintf(z + n, "%s%s", i ? "," : "", zNum);
  }
  n += sprintf(z + n, "]}");
  pFix->zName = "floats";
  pFix->z = z;
  pFix->n = n;
}

/* Canonical form of the document, through the extension, for the C case. */
static void canonicalize_fixture(sqlite3 *db, Fixture *pFix) {
  sqlite3_stmt *p = prepare_db(db, "SELECT idem_canonical(?1)");
  sqlite3_bind_text(p, 1, pFix->z, pFix->n, SQLITE_STATIC);
  if (sqlite3_step(p) != SQLITE_ROW) die(pFix->zName, sqlite3_errmsg(db));
  pFix->nCanon = sqlite3_column_bytes(p, 0);
  pFix->zCanon = sqlite3_malloc64((sqlite3_uint64)pFix->nCanon + 1);
  if (pFix->zCanon == 0) die("out of memory", pFix->zName);
  memcpy(pFix->zCanon, sqlite3_column_text(p, 0), (size_t)pFix->nCanon);
  pFix->zCanon[pFix->nCanon] = 0;
  sqlite3_finalize(p);
}

/* ------------------------------------------------------------------ */
/* Targets                                                             */
/* ------------------------------------------------------------------ */

typedef struct Target Target;
struct Target {
  char zLabel[96];
  double x;      /* measured ratio */
  double target; /* bound */
  int bAtLeast;  /* 1: x >= target is met; 0: x <= target is met */
};
static Target aTarget[32];
static int nTarget;

/* Record a target; returns the " <= 1.30x: met" text to print beside it. */
static const char *target(const char *zLabel, double x, double t, int bAtLeast) {
  static char z[64];
  int bMet = bAtLeast ? x >= t : x <= t;
  if (nTarget < (int)(sizeof(aTarget) / sizeof(aTarget[0]))) {
    Target *p = &aTarget[nTarget++];
    snprintf(p->zLabel, sizeof(p->zLabel), "%s", zLabel);
    p->x = x;
    p->target = t;
    p->bAtLeast = bAtLeast;
  }
  snprintf(z, sizeof(z), "%s %.2fx: %s", bAtLeast ? ">=" : "<=", t, bMet ? "met" : "MISSED");
  return z;
}

/* ------------------------------------------------------------------ */
/* Calibrated statements (sections 1 and 2)                            */
/* ------------------------------------------------------------------ */

typedef void (*BenchFunc)(const Fixture *pFix, int64_t nIter);

/* One statement (or C function) timed by calls of about msRound ms. */
typedef struct Runner Runner;
struct Runner {
  sqlite3 *db;
  sqlite3_stmt *pStmt; /* stepped to completion per call, or 0 */
  BenchFunc xFunc;     /* when pStmt is 0 */
  const Fixture *pFix;
  int64_t nIter;
  double aRound[MAX_ROUND * 4];
};

static double runner_run(Runner *p, int64_t nIter) {
  double t0 = cpu_us();
  int64_t i;
  if (p->pStmt == 0) {
    p->xFunc(p->pFix, nIter);
    return cpu_us() - t0;
  }
  for (i = 0; i < nIter; i++) {
    int rc;
    while ((rc = sqlite3_step(p->pStmt)) == SQLITE_ROW) {
    }
    if (rc != SQLITE_DONE) die(sqlite3_sql(p->pStmt), sqlite3_errmsg(p->db));
    sqlite3_reset(p->pStmt);
  }
  return cpu_us() - t0;
}

/* Calibrate each runner, then nRound rounds of every runner in turn;
** aOut[i] is runner i's median microseconds per call. */
static void runners_time(Runner *a, int n, int nRound, double msRound, double *aOut) {
  int i, r;
  for (i = 0; i < n; i++) {
    int64_t k = 1;
    double t;
    runner_run(&a[i], 1); /* warm up, and surface an error before timing */
    for (;;) {
      t = runner_run(&a[i], k);
      if (t >= msRound * 1000.0 / 4 || k >= ((int64_t)1 << 40)) break;
      k *= 2;
    }
    k = (int64_t)((double)k * (msRound * 1000.0) / (t > 0 ? t : 1));
    a[i].nIter = k < 1 ? 1 : k;
  }
  for (r = 0; r < nRound; r++) {
    for (i = 0; i < n; i++) a[i].aRound[r] = runner_run(&a[i], a[i].nIter) / (double)a[i].nIter;
  }
  for (i = 0; i < n; i++) aOut[i] = median(a[i].aRound, nRound);
}

/* ------------------------------------------------------------------ */
/* 1. calls                                                            */
/* ------------------------------------------------------------------ */

static void xxh3_canonical(const Fixture *pFix, int64_t nIter) {
  int64_t i;
  for (i = 0; i < nIter; i++) {
    XXH128_hash_t h = XXH3_128bits(pFix->zCanon, (size_t)pFix->nCanon);
    sink ^= h.low64 ^ h.high64;
  }
}

typedef struct CallCase CallCase;
struct CallCase {
  const char *zName;
  const char *zSql; /* ?1 is the document; 0 for xFunc */
  BenchFunc xFunc;
};
static const CallCase aCall[] = {
    /* what the harness itself adds per call: bind, step, reset */
    {"empty statement (SELECT ?1)", "SELECT ?1", 0},
    /* baseline: SQLite's own JSON parse and minify of the same text */
    {"json(?)", "SELECT json(?1)", 0},
    {"idem_canonical(?)", "SELECT idem_canonical(?1)", 0},
    {"idem_key('t','c','tool',?)", "SELECT idem_key('t','c','tool',?1)", 0},
    /* the hash alone over the canonical bytes, in C */
    {"XXH3-128 of canonical (C)", 0, xxh3_canonical},
};
#define N_CALL ((int)(sizeof(aCall) / sizeof(aCall[0])))
#define CALL_EMPTY 0
#define CALL_JSON 1
#define CALL_CANON 2
#define CALL_KEY 3
#define CALL_XXH 4

static double aHarnessUs[2] = {-1, -1}; /* empty call, sections 1 and 3; -1: not run */

static void bench_calls(sqlite3 *db) {
  int nRound = env_int("BENCH_ROUNDS", 31, 3, MAX_ROUND * 4);
  int msRound = env_int("BENCH_ROUND_MS", 20, 1, 10000);
  double aUs[N_CALL][N_FIXTURE], aOut[N_CALL];
  Runner aRun[N_CALL];
  int i, j;
  static const double aKeyTarget[N_FIXTURE] = {1.5, 2.5, 0, 1.5};

  printf("\n1. calls: microseconds per call, median of %d rounds of ~%d ms\n", nRound, msRound);
  for (j = 0; j < N_FIXTURE; j++) {
    memset(aRun, 0, sizeof(aRun));
    for (i = 0; i < N_CALL; i++) {
      aRun[i].db = db;
      aRun[i].pFix = &aFix[j];
      aRun[i].xFunc = aCall[i].xFunc;
      if (aCall[i].zSql) {
        aRun[i].pStmt = prepare_db(db, aCall[i].zSql);
        sqlite3_bind_text(aRun[i].pStmt, 1, aFix[j].z, aFix[j].n, SQLITE_STATIC);
      }
    }
    runners_time(aRun, N_CALL, nRound, msRound, aOut);
    for (i = 0; i < N_CALL; i++) {
      aUs[i][j] = aOut[i];
      sqlite3_finalize(aRun[i].pStmt);
    }
  }
  printf("%-34s", "");
  for (j = 0; j < N_FIXTURE; j++) printf(" %10s", azFixture[j]);
  printf("\n%-34s", "  (document bytes)");
  for (j = 0; j < N_FIXTURE; j++) printf(" %10d", aFix[j].n);
  printf("\n");
  for (i = 0; i < N_CALL; i++) {
    printf("%-34s", aCall[i].zName);
    for (j = 0; j < N_FIXTURE; j++) printf(" %10.3f", aUs[i][j]);
    printf("\n");
  }
  printf("ratios\n");
  printf("%-34s", "  idem_key / json()");
  for (j = 0; j < N_FIXTURE; j++) printf(" %9.2fx", aUs[CALL_KEY][j] / aUs[CALL_JSON][j]);
  printf("\n");
  for (j = 0; j < N_FIXTURE; j++) {
    char zLabel[96];
    if (aKeyTarget[j] <= 0) continue;
    snprintf(zLabel, sizeof(zLabel), "idem_key / json(), %s", azFixture[j]);
    printf("    %-30s %s\n", azFixture[j],
           target(zLabel, aUs[CALL_KEY][j] / aUs[CALL_JSON][j], aKeyTarget[j], 0));
  }
  printf("%-34s", "  idem_canonical / json()");
  for (j = 0; j < N_FIXTURE; j++) printf(" %9.2fx", aUs[CALL_CANON][j] / aUs[CALL_JSON][j]);
  printf("\n%-34s", "  XXH3-128 share of idem_key");
  for (j = 0; j < N_FIXTURE; j++) {
    printf(" %9.1f%%", 100.0 * aUs[CALL_XXH][j] / aUs[CALL_KEY][j]);
  }
  printf("\n");
  aHarnessUs[0] = aUs[CALL_EMPTY][0];
  for (j = 1; j < N_FIXTURE; j++) {
    if (aUs[CALL_EMPTY][j] > aHarnessUs[0]) aHarnessUs[0] = aUs[CALL_EMPTY][j];
  }
}

/* ------------------------------------------------------------------ */
/* 2. grammar: spellings of the key rule                               */
/* ------------------------------------------------------------------ */

/* A plain-SQL spelling of the key grammar of docs/keys.md, with $ for
** the value. The careful tables of sections 3, 4 and 7 use the spellings
** found equivalent. */
typedef struct Spelling Spelling;
struct Spelling {
  char zName[48];
  char zRule[400];
  int eSame;      /* 1 same rule on every case, 0 not, -1 not checked */
  char zWhy[160]; /* when eSame is 0: the first case that differs */
  double us;      /* one evaluation on a 38-character key */
  int bLedger;    /* the ledger's rows table uses it */
};
#define MAX_SPELL 8
static Spelling aSpell[MAX_SPELL];
static int nSpell;
static int iLedgerSpell = -1; /* the spelling of the ledger's rows table */

/* Characters of keys most frequent first (derived keys are hex) */
#define SET_FREQ "0123456789abcdef-_ghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
#define SET_ASCII "-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz"
static const char *azCandidate[][2] = {
    {"GLOB (docs/keys.md)",
     "typeof($)='text' AND length($) BETWEEN 1 AND 128 AND instr($,char(0))=0"
     " AND $ NOT GLOB '*[^A-Za-z0-9_-]*'"},
    {"ltrim, frequent characters first",
     "typeof($)='text' AND length($) BETWEEN 1 AND 128 AND ltrim($,'" SET_FREQ "')=''"},
    {"ltrim, ASCII order",
     "typeof($)='text' AND length($) BETWEEN 1 AND 128 AND ltrim($,'" SET_ASCII "')=''"},
    {"trim, frequent characters first",
     "typeof($)='text' AND length($) BETWEEN 1 AND 128 AND trim($,'" SET_FREQ "')=''"},
};

/* zRule with every $ replaced by zWith; sqlite3_free() the result. */
static char *expand_rule(const char *zRule, const char *zWith) {
  sqlite3_str *p = sqlite3_str_new(0);
  const char *z;
  for (z = zRule; *z; z++) {
    if (*z == '$') {
      sqlite3_str_appendall(p, zWith);
    } else {
      sqlite3_str_appendchar(p, 1, *z);
    }
  }
  return sqlite3_str_finish(p);
}

/* Text without blanks, for comparing two spellings of one expression. */
static void squeeze(const char *zIn, char *zOut, size_t nOut) {
  size_t n = 0;
  for (; *zIn && n + 1 < nOut; zIn++) {
    if (*zIn != ' ' && *zIn != '\n' && *zIn != '\t') zOut[n++] = *zIn;
  }
  zOut[n] = 0;
}

/* The grammar CHECK of the tenant column in the ledger's rows table, with
** $ for the column, into zOut; 0 if not found. */
static int ledger_rule(sqlite3 *db, char *zOut, size_t nOut) {
  sqlite3_stmt *p;
  const char *zSql, *z;
  int bFound = 0;
  exec_db(db, "CREATE VIRTUAL TABLE spell_probe USING idempotency");
  p = prepare_db(db, "SELECT sql FROM sqlite_schema WHERE name='spell_probe_rows'");
  if (sqlite3_step(p) != SQLITE_ROW) die("rows table", "spell_probe_rows is not in sqlite_schema");
  zSql = (const char *)sqlite3_column_text(p, 0);
  for (z = strstr(zSql, "CHECK("); z && !bFound; z = strstr(z + 1, "CHECK(")) {
    const char *zStart = z + 6, *e;
    int depth = 1;
    char q = 0;
    for (e = zStart; *e && depth > 0; e++) {
      if (q) {
        if (*e == q) q = 0;
      } else if (*e == '\'' || *e == '"') {
        q = *e;
      } else if (*e == '(') {
        depth++;
      } else if (*e == ')') {
        depth--;
      }
    }
    if (depth == 0 && (size_t)(e - zStart) < nOut) {
      size_t n = 0;
      const char *s;
      for (s = zStart; s < e - 1 && n + 1 < nOut;) {
        if (strncmp(s, "\"tenant\"", 8) == 0) {
          zOut[n++] = '$';
          s += 8;
        } else if (strncmp(s, "tenant", 6) == 0) {
          zOut[n++] = '$';
          s += 6;
        } else {
          zOut[n++] = *s++;
        }
      }
      zOut[n] = 0;
      bFound = strchr(zOut, '$') != 0 && strstr(zOut, "typeof") != 0;
    }
  }
  sqlite3_finalize(p);
  exec_db(db, "DROP TABLE spell_probe");
  return bFound;
}

/* Load the CREATE TABLE cases and INSERT INTO cases statements of the
** grammar-cases file into db; 0 if the file cannot be read. */
static int load_cases(sqlite3 *db, const char *zFile) {
  FILE *f = zFile ? fopen(zFile, "rb") : 0;
  char *zAll;
  const char *zTail;
  long n;
  int nRun = 0;
  if (f == 0) return 0;
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    die("cannot read", zFile);
  }
  zAll = malloc((size_t)n + 1);
  if (zAll == 0 || fread(zAll, 1, (size_t)n, f) != (size_t)n) die("cannot read", zFile);
  zAll[n] = 0;
  fclose(f);
  zTail = zAll;
  while (zTail && *zTail) {
    sqlite3_stmt *p = 0;
    const char *zSql;
    if (sqlite3_prepare_v2(db, zTail, -1, &p, &zTail) != SQLITE_OK) die(zFile, sqlite3_errmsg(db));
    if (p == 0) break;
    zSql = sqlite3_sql(p);
    if (strstr(zSql, "CREATE TABLE cases") || strstr(zSql, "INSERT INTO cases")) {
      while (sqlite3_step(p) == SQLITE_ROW) {
      }
      if (sqlite3_finalize(p) != SQLITE_OK) die(zFile, sqlite3_errmsg(db));
      nRun++;
    } else {
      sqlite3_finalize(p);
      if (nRun) break;
    }
  }
  free(zAll);
  return nRun >= 2;
}

/* Check every spelling against idem_valid_key and the expected answers in
** the three text encodings: the file's cases, then every character from
** U+0000 to U+02FF and a few beyond, alone and between two letters. */
static void check_spellings(const char *zCasesFile) {
  static const char *azEnc[] = {"UTF-8", "UTF-16le", "UTF-16be"};
  int e, i, bFile = 1;
  for (i = 0; i < nSpell; i++) aSpell[i].eSame = 1;
  for (e = 0; e < 3; e++) {
    sqlite3 *db = open_db(0, 0, 0);
    char zPragma[64];
    snprintf(zPragma, sizeof(zPragma), "PRAGMA encoding='%s'", azEnc[e]);
    exec_db(db, zPragma);
    if (!load_cases(db, zCasesFile)) {
      bFile = 0;
      exec_db(db, "CREATE TABLE cases(id TEXT PRIMARY KEY, v, expect INTEGER NOT NULL)");
    }
    exec_db(db,
            "WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x+1 FROM c WHERE x<767)"
            " INSERT INTO cases SELECT 'char-'||x, char(x), idem_valid_key(char(x)) FROM c"
            " UNION ALL SELECT 'between-'||x, 'a'||char(x)||'b', idem_valid_key('a'||char(x)||'b')"
            " FROM c"
            " UNION ALL SELECT 'high-'||x, 'q'||char(x), idem_valid_key('q'||char(x))"
            " FROM (SELECT column1 AS x FROM (VALUES(0x3000),(0xfeff),(0xff21),(0xffff),"
            "(0x10000),(0x1f600),(0x10ffff)))");
    if (query_int(db, "SELECT count(*) FROM cases WHERE idem_valid_key(v) IS NOT expect")) {
      die("grammar cases", "idem_valid_key disagrees with the expected answers");
    }
    for (i = 0; i < nSpell; i++) {
      char *zRule = expand_rule(aSpell[i].zRule, "v");
      char *zSql = sqlite3_mprintf("SELECT id FROM cases WHERE (%s) IS NOT expect", zRule);
      sqlite3_stmt *p = 0;
      if (sqlite3_prepare_v2(db, zSql, -1, &p, 0) != SQLITE_OK) {
        if (aSpell[i].eSame) {
          snprintf(aSpell[i].zWhy, sizeof(aSpell[i].zWhy), "does not compile: %s",
                   sqlite3_errmsg(db));
        }
        aSpell[i].eSame = 0;
      } else if (sqlite3_step(p) == SQLITE_ROW) {
        if (aSpell[i].eSame) {
          snprintf(aSpell[i].zWhy, sizeof(aSpell[i].zWhy), "differs on case %s in %s",
                   (const char *)sqlite3_column_text(p, 0), azEnc[e]);
        }
        aSpell[i].eSame = 0;
      }
      sqlite3_finalize(p);
      sqlite3_free(zSql);
      sqlite3_free(zRule);
    }
    sqlite3_close(db);
  }
  if (!bFile) {
    printf(
        "  (the grammar-cases file was not given or unreadable: checked on the character"
        " sweep only)\n");
  }
}

static void bench_grammar(sqlite3 *db, const char *zCasesFile) {
  char zLedger[400], zA[400], zB[400];
  int i, nRound = env_int("BENCH_ROUNDS", 31, 3, MAX_ROUND * 4);
  int msRound = env_int("BENCH_ROUND_MS", 20, 1, 10000);
  Runner aRun[MAX_SPELL + 1];
  double aOut[MAX_SPELL + 1];
  static const char zKey[] = "idem1-a60019a0fd995630ac51badc4d3a952b";

  nSpell = 0;
  for (i = 0; i < (int)(sizeof(azCandidate) / sizeof(azCandidate[0])); i++) {
    snprintf(aSpell[nSpell].zName, sizeof(aSpell[nSpell].zName), "%s", azCandidate[i][0]);
    snprintf(aSpell[nSpell].zRule, sizeof(aSpell[nSpell].zRule), "%s", azCandidate[i][1]);
    nSpell++;
  }
  if (ledger_rule(db, zLedger, sizeof(zLedger))) {
    squeeze(zLedger, zA, sizeof(zA));
    for (i = 0; i < nSpell; i++) {
      squeeze(aSpell[i].zRule, zB, sizeof(zB));
      if (strcmp(zA, zB) == 0) iLedgerSpell = i;
    }
    if (iLedgerSpell < 0) {
      iLedgerSpell = nSpell++;
      snprintf(aSpell[iLedgerSpell].zName, sizeof(aSpell[0].zName), "the ledger's own");
      snprintf(aSpell[iLedgerSpell].zRule, sizeof(aSpell[0].zRule), "%s", zLedger);
    }
    aSpell[iLedgerSpell].bLedger = 1;
  }
  check_spellings(zCasesFile);

  memset(aRun, 0, sizeof(aRun));
  for (i = 0; i < nSpell; i++) {
    char *zRule = expand_rule(aSpell[i].zRule, "?1");
    char *zSql = sqlite3_mprintf("SELECT %s", zRule);
    aRun[i].db = db;
    aRun[i].pStmt = prepare_db(db, zSql);
    sqlite3_bind_text(aRun[i].pStmt, 1, zKey, -1, SQLITE_STATIC);
    sqlite3_free(zSql);
    sqlite3_free(zRule);
  }
  /* the last runner is the empty statement, subtracted from the others */
  aRun[nSpell].db = db;
  aRun[nSpell].pStmt = prepare_db(db, "SELECT ?1");
  sqlite3_bind_text(aRun[nSpell].pStmt, 1, zKey, -1, SQLITE_STATIC);
  runners_time(aRun, nSpell + 1, nRound, msRound, aOut);
  sqlite3_finalize(aRun[nSpell].pStmt);
  printf("\n2. grammar: plain-SQL spellings of the key rule (docs/keys.md)\n");
  printf("%-36s %-44s %10s\n", "spelling", "same rule as idem_valid_key (3 encodings)",
         "us per key");
  for (i = 0; i < nSpell; i++) {
    aSpell[i].us = aOut[i] - aOut[nSpell];
    sqlite3_finalize(aRun[i].pStmt);
    printf("%-36s %-44s %10.3f%s\n", aSpell[i].zName,
           aSpell[i].eSame > 0    ? "yes"
           : aSpell[i].eSame == 0 ? aSpell[i].zWhy
                                  : "not checked",
           aSpell[i].us, aSpell[i].bLedger ? "   <- the ledger's rows table" : "");
  }
  printf(
      "  (on a 38-character derived key, the empty statement's time subtracted;"
      " a row has four such columns)\n");
  if (iLedgerSpell < 0) printf("  the ledger's rows table has no grammar CHECK that was found\n");
  if (iLedgerSpell >= 0 && aSpell[iLedgerSpell].bLedger && aSpell[iLedgerSpell].eSame == 0) {
    printf("  NOTE: the ledger's own spelling is not the same rule (%s)\n",
           aSpell[iLedgerSpell].zWhy);
  }
}

/* ------------------------------------------------------------------ */
/* Timed operations on file databases (sections 3, 4, 6, 7)            */
/* ------------------------------------------------------------------ */

enum { CHECK_NONE, CHECK_CHANGES, CHECK_ADMITTED, CHECK_REPLAY, CHECK_ROW };

/* One statement called with per-call values bound by name: :args (the
** document), :conv (a fresh conversation, or "s0".."s<nCycle-1>" in turn),
** :key (a fresh random derived-looking key), :token (16 random bytes),
** :now (Unix milliseconds). Each call's answer is checked per eCheck. */
typedef struct Op Op;
struct Op {
  const char *zName;
  sqlite3 *db;
  sqlite3_stmt *pStmt;
  int iArgs, iConv, iKey, iToken, iNow;
  int eCheck;
  int nCycle;
  int64_t iNext;
  double aTxn[MAX_ROUND], aAuto[MAX_ROUND];
  int bWall;       /* time by the wall clock, not by CPU time */
  double *aCallUs; /* when set, each call's own time is appended here */
  int nCallUs, nCallMax;
};

static int64_t iConvCounter; /* fresh conversations, unique across the run */

static void op_init(Op *p, const char *zName, sqlite3 *db, const char *zSql, const Fixture *pFix,
                    int eCheck) {
  memset(p, 0, sizeof(*p));
  p->zName = zName;
  p->db = db;
  p->pStmt = prepare_db(db, zSql);
  p->iArgs = sqlite3_bind_parameter_index(p->pStmt, ":args");
  p->iConv = sqlite3_bind_parameter_index(p->pStmt, ":conv");
  p->iKey = sqlite3_bind_parameter_index(p->pStmt, ":key");
  p->iToken = sqlite3_bind_parameter_index(p->pStmt, ":token");
  p->iNow = sqlite3_bind_parameter_index(p->pStmt, ":now");
  p->eCheck = eCheck;
  if (p->iArgs) sqlite3_bind_text(p->pStmt, p->iArgs, pFix->z, pFix->n, SQLITE_STATIC);
}

static void op_free(Op *p) {
  sqlite3_finalize(p->pStmt);
  p->pStmt = 0;
}

/* "c123": a prefix letter and a decimal number, into z (24 bytes). */
static int fmt_conv(char c, int64_t v, char *z) {
  char a[24];
  int n = 0, m = 0;
  do {
    a[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v > 0);
  z[m++] = c;
  while (n > 0) z[m++] = a[--n];
  z[m] = 0;
  return m;
}

/* Bind a random token of the ledger's token shape; z holds 72 bytes. */
static void bind_token(sqlite3_stmt *pStmt, int i, char *z) {
  int k;
  if (eTokenType == SQLITE_INTEGER) {
    sqlite3_bind_int64(pStmt, i, (sqlite3_int64)(prng() >> 2));
    return;
  }
  for (k = 0; k < nTokenLen; k += 16) hex64(prng(), z + k);
  if (eTokenType == SQLITE_TEXT) {
    sqlite3_bind_text(pStmt, i, z, nTokenLen, SQLITE_STATIC);
  } else {
    sqlite3_bind_blob(pStmt, i, z, nTokenLen, SQLITE_STATIC);
  }
}

static const char zAdmitted[] = "{\"decision\":\"admitted\"";
static const char zReplay[] = "{\"decision\":\"replay\"";

/* n calls, in one transaction (BEGIN..COMMIT timed) or each in autocommit;
** returns microseconds per call, of CPU time (or wall-clock time when
** p->bWall is set). */
static double op_batch(Op *p, int n, int bTxn) {
  char zConv[24], zKey[40], aToken[72];
  double t0 = p->bWall ? now_us() : cpu_us(), tCall = 0;
  int i, rc;
  if (bTxn) exec_db(p->db, "BEGIN");
  for (i = 0; i < n; i++) {
    int nRow = 0, bOk = 1;
    if (p->iConv) {
      int m = p->nCycle > 0 ? fmt_conv('s', p->iNext++ % p->nCycle, zConv)
                            : fmt_conv('c', ++iConvCounter, zConv);
      sqlite3_bind_text(p->pStmt, p->iConv, zConv, m, SQLITE_STATIC);
    }
    if (p->iKey) {
      make_key(prng(), prng(), zKey);
      sqlite3_bind_text(p->pStmt, p->iKey, zKey, 38, SQLITE_STATIC);
    }
    if (p->iToken) bind_token(p->pStmt, p->iToken, aToken);
    if (p->iNow) sqlite3_bind_int64(p->pStmt, p->iNow, wall_ms());
    if (p->aCallUs) tCall = p->bWall ? now_us() : cpu_us();
    while ((rc = sqlite3_step(p->pStmt)) == SQLITE_ROW) {
      const char *z;
      nRow++;
      switch (p->eCheck) {
        case CHECK_ADMITTED:
          z = (const char *)sqlite3_column_text(p->pStmt, 0);
          bOk = z && memcmp(z, zAdmitted, sizeof(zAdmitted) - 1) == 0;
          break;
        case CHECK_REPLAY:
          z = (const char *)sqlite3_column_text(p->pStmt, 0);
          bOk = z && memcmp(z, zReplay, sizeof(zReplay) - 1) == 0;
          break;
        default: break;
      }
      if (!bOk) {
        fprintf(stderr, "bench: %s: unexpected answer %s\n", p->zName,
                (const char *)sqlite3_column_text(p->pStmt, 0));
        exit(1);
      }
    }
    if (rc != SQLITE_DONE) die(p->zName, sqlite3_errmsg(p->db));
    if (p->eCheck == CHECK_CHANGES && sqlite3_changes(p->db) != 1) {
      die(p->zName, "changes() is not 1");
    }
    if ((p->eCheck == CHECK_ROW || p->eCheck == CHECK_ADMITTED || p->eCheck == CHECK_REPLAY) &&
        nRow != 1) {
      die(p->zName, "no row");
    }
    sqlite3_reset(p->pStmt);
    if (p->aCallUs && p->nCallUs < p->nCallMax)
      p->aCallUs[p->nCallUs++] = (p->bWall ? now_us() : cpu_us()) - tCall;
  }
  if (bTxn) exec_db(p->db, "COMMIT");
  return ((p->bWall ? now_us() : cpu_us()) - t0) / n;
}

/* The plain tables hold the same row as the ledger's rows table: its
** columns, declared types and defaults, read from a ledger made here. */
typedef struct RowCol RowCol;
struct RowCol {
  char zName[64];
  char zType[32];
  char zDflt[64];
  int bNotNull;
};
static RowCol aRowCol[40];
static int nRowCol;

static void read_row_format(void) {
  sqlite3 *db = open_db(0, 0, "CREATE VIRTUAL TABLE probe USING idempotency");
  sqlite3_stmt *p = prepare_db(db,
                               "SELECT name, type, \"notnull\", dflt_value, pk"
                               " FROM pragma_table_info('probe_rows') ORDER BY cid");
  nRowCol = 0;
  while (sqlite3_step(p) == SQLITE_ROW) {
    RowCol *c;
    if (sqlite3_column_int(p, 4)) continue; /* id INTEGER PRIMARY KEY: stated once below */
    if (nRowCol >= (int)(sizeof(aRowCol) / sizeof(aRowCol[0])))
      die("rows table", "too many columns");
    c = &aRowCol[nRowCol++];
    snprintf(c->zName, sizeof(c->zName), "%s", (const char *)sqlite3_column_text(p, 0));
    snprintf(c->zType, sizeof(c->zType), "%s", (const char *)sqlite3_column_text(p, 1));
    c->bNotNull = sqlite3_column_int(p, 2);
    snprintf(
        c->zDflt, sizeof(c->zDflt), "%s",
        sqlite3_column_type(p, 3) == SQLITE_NULL ? "" : (const char *)sqlite3_column_text(p, 3));
  }
  sqlite3_finalize(p);
  if (nRowCol == 0) die("rows table", "probe_rows has no columns");
  exec_db(db, "SELECT idem_claim('probe','t','c','tool','{}')");
  p = prepare_db(db, "SELECT typeof(token), length(token) FROM probe_rows");
  if (sqlite3_step(p) == SQLITE_ROW) {
    const char *zType = (const char *)sqlite3_column_text(p, 0);
    eTokenType = strcmp(zType, "integer") == 0 ? SQLITE_INTEGER
                 : strcmp(zType, "text") == 0  ? SQLITE_TEXT
                                               : SQLITE_BLOB;
    nTokenLen = sqlite3_column_int(p, 1);
    if (nTokenLen < 1 || nTokenLen > 64) nTokenLen = 16;
  }
  sqlite3_finalize(p);
  sqlite3_close(db);
}

static int is_key_column(const char *z) {
  return strcmp(z, "tenant") == 0 || strcmp(z, "key") == 0 || strcmp(z, "conversation") == 0 ||
         strcmp(z, "tool") == 0;
}

/* CREATE TABLE zTable: careful (iSpell >= 0: NOT NULL and the grammar CHECK
** in that spelling on the four key columns) or bare (iSpell < 0: neither);
** both UNIQUE(tenant,key) and nothing else. sqlite3_free() the result. */
static char *plain_ddl(const char *zTable, int iSpell) {
  sqlite3_str *s = sqlite3_str_new(0);
  int i;
  sqlite3_str_appendf(s, "CREATE TABLE \"%w\"(id INTEGER PRIMARY KEY", zTable);
  for (i = 0; i < nRowCol; i++) {
    const RowCol *c = &aRowCol[i];
    sqlite3_str_appendf(s, ", \"%w\"%s%s", c->zName, c->zType[0] ? " " : "", c->zType);
    if (iSpell >= 0 && c->bNotNull) sqlite3_str_appendall(s, " NOT NULL");
    if (c->zDflt[0]) sqlite3_str_appendf(s, " DEFAULT %s", c->zDflt);
    if (iSpell >= 0 && is_key_column(c->zName)) {
      char *zCol = sqlite3_mprintf("\"%w\"", c->zName);
      char *zRule = expand_rule(aSpell[iSpell].zRule, zCol);
      sqlite3_str_appendf(s, " CHECK(%s)", zRule);
      sqlite3_free(zRule);
      sqlite3_free(zCol);
    }
  }
  sqlite3_str_appendall(s, ", UNIQUE(tenant, \"key\"))");
  return sqlite3_str_finish(s);
}

/* INSERT of the row a claim writes (bSettled: the row once settled) into
** zTable, ON CONFLICT DO NOTHING; zKeyExpr gives the key. */
static char *plain_insert(const char *zTable, const char *zKeyExpr, int bSettled) {
  sqlite3_str *s = sqlite3_str_new(0);
  sqlite3_str *v = sqlite3_str_new(0);
  char *zV;
  int i, n = 0;
  sqlite3_str_appendf(s, "INSERT INTO \"%w\"(", zTable);
  for (i = 0; i < nRowCol; i++) {
    const char *z = aRowCol[i].zName, *zVal = 0;
    if (strcmp(z, "tenant") == 0) zVal = "'t'";
    if (strcmp(z, "key") == 0) zVal = zKeyExpr;
    if (strcmp(z, "conversation") == 0) zVal = ":conv";
    if (strcmp(z, "tool") == 0) zVal = "'tool'";
    if (strcmp(z, "args") == 0) zVal = ":args";
    if (strcmp(z, "effect") == 0) zVal = "'external'";
    if (strcmp(z, "status") == 0) zVal = bSettled ? "'succeeded'" : "'claimed'";
    if (strcmp(z, "result") == 0 && bSettled) zVal = "'{\"ok\":true}'";
    if (strcmp(z, "attempt") == 0) zVal = "1";
    if (strcmp(z, "token") == 0) zVal = ":token";
    if (strcmp(z, "created_at") == 0 || strcmp(z, "updated_at") == 0) zVal = ":now";
    if (strcmp(z, "lease_until") == 0) zVal = ":now+300000";
    if (zVal == 0) {
      if (aRowCol[i].bNotNull && aRowCol[i].zDflt[0] == 0) {
        die("the rows table has a NOT NULL column the bench cannot fill (add it to plain_insert)",
            z);
      }
      continue;
    }
    sqlite3_str_appendf(s, "%s\"%w\"", n ? "," : "", z);
    sqlite3_str_appendf(v, "%s%s", n ? "," : "", zVal);
    n++;
  }
  zV = sqlite3_str_finish(v);
  sqlite3_str_appendf(s, ") VALUES(%s) ON CONFLICT DO NOTHING", zV);
  sqlite3_free(zV);
  return sqlite3_str_finish(s);
}

/* ------------------------------------------------------------------ */
/* 3. claim                                                            */
/* ------------------------------------------------------------------ */

static const char zClaimSql[] = "SELECT idem_claim('L','t',:conv,'tool',:args)";
static const char zLedgerInsertSql[] =
    "INSERT INTO L(tenant,conversation,tool,args) VALUES('t',:conv,'tool',:args)";
static const char zEmptySql[] = "SELECT :args, :conv, :key, :token, :now";

static void bench_claim(void) {
  int nRound = env_int("BENCH_LEDGER_ROUNDS", 15, 3, MAX_ROUND);
  int nTxn = 500, nAuto = env_int("BENCH_AUTOCOMMIT_CALLS", 200, 10, 100000);
  Op aOp[MAX_SPELL + 4];
  sqlite3 *aDb[MAX_SPELL + 4];
  char azName[MAX_SPELL + 4][80];
  int iClaim, iInsert, iBare, iEmpty, aCareful[MAX_SPELL], nOp = 0, nDb = 0, i, r;
  int iRef = -1; /* the careful table with the ledger's spelling */
  const Fixture *pFix = &aFix[FIX_SMALL];
  double aTxn[MAX_SPELL + 4], aAuto[MAX_SPELL + 4];

  /* one file per table, so each pays its own checkpoints */
  aDb[nDb] = open_db("claim-ledger", 0, zWalFull);
  exec_db(aDb[nDb], "CREATE VIRTUAL TABLE L USING idempotency");
  iClaim = nOp;
  op_init(&aOp[nOp++], "idem_claim", aDb[nDb++], zClaimSql, pFix, CHECK_ADMITTED);
  aDb[nDb] = open_db("claim-insert", 0, zWalFull);
  exec_db(aDb[nDb], "CREATE VIRTUAL TABLE L USING idempotency");
  iInsert = nOp;
  op_init(&aOp[nOp++], "INSERT INTO ledger", aDb[nDb++], zLedgerInsertSql, pFix, CHECK_CHANGES);
  for (i = 0; i < nSpell; i++) {
    char zFile[32];
    char *zDdl, *zIns;
    aCareful[i] = -1;
    if (aSpell[i].eSame == 0) continue;
    snprintf(zFile, sizeof(zFile), "claim-careful-%d", i);
    aDb[nDb] = open_db(zFile, 0, zWalFull);
    zDdl = plain_ddl("careful", i);
    zIns = plain_insert("careful", ":key", 0);
    exec_db(aDb[nDb], zDdl);
    snprintf(azName[nOp], sizeof(azName[nOp]), "careful, %.40s", aSpell[i].zName);
    if (aSpell[i].bLedger) iRef = nOp;
    aCareful[i] = nOp;
    op_init(&aOp[nOp], azName[nOp], aDb[nDb++], zIns, pFix, CHECK_CHANGES);
    nOp++;
    sqlite3_free(zDdl);
    sqlite3_free(zIns);
  }
  {
    char *zDdl = plain_ddl("bare", -1), *zIns = plain_insert("bare", ":key", 0);
    aDb[nDb] = open_db("claim-bare", 0, zWalFull);
    exec_db(aDb[nDb], zDdl);
    iBare = nOp;
    op_init(&aOp[nOp++], "bare", aDb[nDb], zIns, pFix, CHECK_CHANGES);
    iEmpty = nOp;
    op_init(&aOp[nOp++], "empty call (binds, step, check)", aDb[nDb++], zEmptySql, pFix, CHECK_ROW);
    sqlite3_free(zDdl);
    sqlite3_free(zIns);
  }
  if (iRef < 0) iRef = aCareful[0];

  /* a round to warm up, then the measured rounds, operations in turn */
  for (i = 0; i < nOp; i++) op_batch(&aOp[i], 100, 1);
  for (r = 0; r < nRound; r++) {
    int k;
    for (i = 0; i < nOp; i++) aOp[i].aTxn[r] = op_batch(&aOp[i], nTxn, 1);
    /* autocommit: the operations take turns call by call, so a slow
    ** stretch of the disk's flushes falls on all of them alike */
    for (i = 0; i < nOp; i++) aOp[i].aAuto[r] = 0;
    for (k = 0; k < nAuto; k++) {
      for (i = 0; i < nOp; i++) {
        if (i == iEmpty) continue;
        aOp[i].bWall = 1;
        aOp[i].aAuto[r] += op_batch(&aOp[i], 1, 0) / nAuto;
        aOp[i].bWall = 0;
      }
    }
  }
  for (i = 0; i < nOp; i++) {
    aTxn[i] = median(aOp[i].aTxn, nRound);
    aAuto[i] = i == iEmpty ? 0 : median(aOp[i].aAuto, nRound);
  }
  aHarnessUs[1] = aTxn[iEmpty];

  printf(
      "\n3. claim, small arguments (WAL, synchronous=FULL), median of %d rounds,"
      " us per call\n",
      nRound);
  printf("%-60s %12s %12s\n", "", "one txn", "autocommit");
  for (i = 0; i < nOp; i++) {
    printf("%-60s %12.3f", aOp[i].zName, aTxn[i]);
    if (i == iEmpty) {
      printf(" %12s\n", "");
    } else {
      printf(" %12.3f\n", aAuto[i]);
    }
  }
  printf(
      "  (one txn: %d calls between BEGIN and COMMIT, COMMIT included; autocommit: %d calls,"
      " the operations taking turns call by call)\n",
      nTxn, nAuto);
  printf("ratios%54s %12s %12s\n", "", "one txn", "autocommit");
  for (i = 0; i < nOp; i++) {
    char zLabel[120];
    if (i == iClaim || i == iInsert || i == iEmpty) continue;
    snprintf(zLabel, sizeof(zLabel), "  idem_claim / %s", aOp[i].zName);
    printf("%-60s %11.2fx %11.2fx\n", zLabel, aTxn[iClaim] / aTxn[i], aAuto[iClaim] / aAuto[i]);
  }
  for (i = 0; i < nOp; i++) {
    char zLabel[120];
    if (i != iRef && i != iBare) continue;
    snprintf(zLabel, sizeof(zLabel), "  INSERT INTO ledger / %s", aOp[i].zName);
    printf("%-60s %11.2fx %11.2fx\n", zLabel, aTxn[iInsert] / aTxn[i], aAuto[iInsert] / aAuto[i]);
  }
  for (i = 0; i < nSpell; i++) {
    char zLabel[120];
    if (aCareful[i] < 0) continue;
    snprintf(zLabel, sizeof(zLabel), "  careful, %.40s / bare", aSpell[i].zName);
    printf("%-60s %11.2fx %11.2fx\n", zLabel, aTxn[aCareful[i]] / aTxn[iBare],
           aAuto[aCareful[i]] / aAuto[iBare]);
  }
  printf("targets (careful = the careful table with the ledger's own spelling)\n");
  printf("  claim, one txn / careful      %6.2fx  %s\n", aTxn[iClaim] / aTxn[iRef],
         target("claim, one txn / careful", aTxn[iClaim] / aTxn[iRef], 1.3, 0));
  printf("  claim, one txn / bare         %6.2fx  %s\n", aTxn[iClaim] / aTxn[iBare],
         target("claim, one txn / bare", aTxn[iClaim] / aTxn[iBare], 2.0, 0));
  printf("  claim, autocommit / bare      %6.2fx  %s\n", aAuto[iClaim] / aAuto[iBare],
         target("claim, autocommit / bare", aAuto[iClaim] / aAuto[iBare], 1.1, 0));
  for (i = 0; i < nOp; i++) op_free(&aOp[i]);
  for (i = 0; i < nDb; i++) sqlite3_close(aDb[i]);
  remove_db("claim-ledger");
  remove_db("claim-insert");
  remove_db("claim-bare");
  for (i = 0; i < nSpell; i++) {
    char zFile[32];
    snprintf(zFile, sizeof(zFile), "claim-careful-%d", i);
    remove_db(zFile);
  }
}

/* ------------------------------------------------------------------ */
/* 4b. settle                                                          */
/* ------------------------------------------------------------------ */

static const char zSettleSql[] = "SELECT idem_settle('L', ?1, 'succeeded', '{\"ok\":true}')";

/* Step claim pC (bound by the caller), check it admitted, settle its token
** with pS. */
static void step_claim_settle(sqlite3 *db, sqlite3_stmt *pC, sqlite3_stmt *pS) {
  char zTok[40];
  const char *z, *zT;
  if (sqlite3_step(pC) != SQLITE_ROW) die("claim", sqlite3_errmsg(db));
  z = (const char *)sqlite3_column_text(pC, 0);
  zT = z ? strstr(z, "\"token\":\"") : 0;
  if (z == 0 || memcmp(z, zAdmitted, sizeof(zAdmitted) - 1) != 0 || zT == 0)
    die("claim", z ? z : "no answer");
  memcpy(zTok, zT + 9, 32);
  zTok[32] = 0;
  sqlite3_reset(pC);
  sqlite3_bind_text(pS, 1, zTok, 32, SQLITE_TRANSIENT);
  if (sqlite3_step(pS) != SQLITE_ROW) die("settle", sqlite3_errmsg(db));
  sqlite3_reset(pS);
}

/* One autocommit claim (pC) of a new conversation and its settle (pS). */
static void claim_settle(sqlite3 *db, sqlite3_stmt *pC, sqlite3_stmt *pS) {
  char zConv[24];
  sqlite3_bind_text(pC, 1, zConv, fmt_conv('c', ++iConvCounter, zConv), SQLITE_TRANSIENT);
  step_claim_settle(db, pC, pS);
}

static void bench_settle(void) {
  static FaultVfs counter;
  int nRound = env_int("BENCH_LEDGER_ROUNDS", 15, 3, MAX_ROUND);
  int nAuto = env_int("BENCH_AUTOCOMMIT_CALLS", 200, 10, 100000), r, k;
  const Fixture *pFix = &aFix[FIX_SMALL];
  sqlite3 *dbL = open_db("settle-ledger", 0, zWalNormal),
          *dbB = open_db("settle-bare", 0, zWalNormal);
  sqlite3 *dbC;
  char *zDdl = plain_ddl("bare", -1), *zIns = plain_insert("bare", ":key", 0);
  sqlite3_stmt *pC, *pS, *pI, *pU, *pR;
  double aL[MAX_ROUND], aB[MAX_ROUND], l, b, perCall, perReplay;
  char zKey[40], aToken[72];
  exec_db(dbL, "CREATE VIRTUAL TABLE L USING idempotency");
  exec_db(dbB, zDdl);
  pC = prepare_db(dbL, "SELECT idem_claim('L','t',?1,'tool',?2)");
  sqlite3_bind_text(pC, 2, pFix->z, pFix->n, SQLITE_STATIC);
  pS = prepare_db(dbL, zSettleSql);
  pI = prepare_db(dbB, zIns);
  pU = prepare_db(dbB,
                  "UPDATE bare SET status='succeeded', result='{\"ok\":true}', updated_at=?2"
                  " WHERE tenant='t' AND \"key\"=?1");
  for (r = -1; r < nRound; r++) {
    double tL = 0, tB = 0, t;
    for (k = 0; k < nAuto; k++) {
      char zConv[24];
      t = cpu_us();
      claim_settle(dbL, pC, pS);
      tL += cpu_us() - t;
      make_key(prng(), prng(), zKey);
      sqlite3_bind_text(pI, sqlite3_bind_parameter_index(pI, ":key"), zKey, 38, SQLITE_STATIC);
      sqlite3_bind_text(pI, sqlite3_bind_parameter_index(pI, ":conv"), zConv,
                        fmt_conv('c', ++iConvCounter, zConv), SQLITE_STATIC);
      sqlite3_bind_text(pI, sqlite3_bind_parameter_index(pI, ":args"), pFix->z, pFix->n,
                        SQLITE_STATIC);
      bind_token(pI, sqlite3_bind_parameter_index(pI, ":token"), aToken);
      sqlite3_bind_int64(pI, sqlite3_bind_parameter_index(pI, ":now"), wall_ms());
      sqlite3_bind_text(pU, 1, zKey, 38, SQLITE_STATIC);
      sqlite3_bind_int64(pU, 2, wall_ms());
      t = cpu_us();
      if (sqlite3_step(pI) != SQLITE_DONE) die("bare insert", sqlite3_errmsg(dbB));
      sqlite3_reset(pI);
      if (sqlite3_step(pU) != SQLITE_DONE || sqlite3_changes(dbB) != 1)
        die("bare update", sqlite3_errmsg(dbB));
      sqlite3_reset(pU);
      tB += cpu_us() - t;
    }
    if (r >= 0) {
      aL[r] = tL / nAuto;
      aB[r] = tB / nAuto;
    }
  }
  l = median(aL, nRound);
  b = median(aB, nRound);
  sqlite3_finalize(pC);
  sqlite3_finalize(pS);
  sqlite3_finalize(pI);
  sqlite3_finalize(pU);
  sqlite3_close(dbL);
  sqlite3_close(dbB);
  sqlite3_free(zDdl);
  sqlite3_free(zIns);

  /* the synced commits, counted: checkpoints off, so only commits sync */
  if (fvfs_register(&counter, "bench-count") != SQLITE_OK) die("settle", "cannot register the VFS");
  dbC = open_db("settle-count", "bench-count",
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA wal_autocheckpoint=0;");
  exec_db(dbC, "CREATE VIRTUAL TABLE L USING idempotency");
  pC = prepare_db(dbC, "SELECT idem_claim('L','t',?1,'tool',?2)");
  sqlite3_bind_text(pC, 2, pFix->z, pFix->n, SQLITE_STATIC);
  pS = prepare_db(dbC, zSettleSql);
  claim_settle(dbC, pC, pS); /* the WAL holds frames, as in service */
  fvfs_arm(&counter, FVFS_NONE, 0, 0);
  for (k = 0; k < nAuto; k++) claim_settle(dbC, pC, pS);
  perCall = (double)counter.nSync / nAuto;
  pR = prepare_db(dbC, "SELECT idem_claim('L','t','c1','tool',?1)");
  sqlite3_bind_text(pR, 1, pFix->z, pFix->n, SQLITE_STATIC);
  step_claim_settle(dbC, pR, pS); /* the first call of c1, replayed below */
  fvfs_arm(&counter, FVFS_NONE, 0, 0);
  for (k = 0; k < nAuto; k++) {
    const char *z;
    if (sqlite3_step(pR) != SQLITE_ROW) die("replay", sqlite3_errmsg(dbC));
    z = (const char *)sqlite3_column_text(pR, 0);
    if (z == 0 || memcmp(z, zReplay, sizeof(zReplay) - 1) != 0) die("replay", z ? z : "no answer");
    sqlite3_reset(pR);
  }
  perReplay = (double)counter.nSync / nAuto;
  sqlite3_finalize(pR);
  sqlite3_finalize(pC);
  sqlite3_finalize(pS);
  sqlite3_close(dbC);
  sqlite3_vfs_unregister(&counter.base);
  remove_db("settle-ledger");
  remove_db("settle-bare");
  remove_db("settle-count");

  printf(
      "\n4b. settle: autocommit claim + settle (WAL, synchronous=NORMAL), median of %d rounds"
      " of %d, us per call (CPU time: at NORMAL no commit waits for the disk)\n",
      nRound, nAuto);
  printf("%-60s %12.3f\n", "idem_claim + idem_settle", l);
  printf("%-60s %12.3f\n", "bare INSERT + UPDATE", b);
  printf("synced commits (synchronous=FULL, checkpoints off; %d calls each)\n", nAuto);
  printf("%-60s %12.2f\n", "  per durable call (claim + settle)", perCall);
  printf("%-60s %12.2f\n", "  per replay", perReplay);
  printf("targets\n");
  printf("  claim + settle / bare, NORMAL %6.2fx  %s\n", l / b,
         target("claim + settle / bare, NORMAL", l / b, 1.5, 0));
  printf("  syncs per durable call        %6.2f   %s\n", perCall,
         target("syncs per durable call", perCall, 1.0, 0));
  printf("  syncs per replay              %6.2f   %s\n", perReplay,
         target("syncs per replay", perReplay, 0.0, 0));
}

/* ------------------------------------------------------------------ */
/* 3b. targets                                                         */
/* ------------------------------------------------------------------ */

static void bench_targets(void) {
  int nRound = env_int("BENCH_LEDGER_ROUNDS", 15, 3, MAX_ROUND);
  int nTxn = 500, nAuto = env_int("BENCH_AUTOCOMMIT_CALLS", 200, 10, 100000);
  static const char *const azSql[2] = {
      zClaimSql,
      "SELECT idem_claim('L','t',:conv,'tool',:args,'external',NULL,"
      "'{\"targets\":[\"mailto:' || :conv || '\"]}')"};
  static const char *const azName[2] = {"claim naming no target", "claim naming one target"};
  Op aOp[2];
  sqlite3 *aDb[2];
  double aTxn[2], aAuto[2];
  int i, r, k;
  for (i = 0; i < 2; i++) {
    char zFile[32];
    snprintf(zFile, sizeof(zFile), "targets-%d", i);
    aDb[i] = open_db(zFile, 0, zWalFull);
    exec_db(aDb[i], "CREATE VIRTUAL TABLE L USING idempotency");
    op_init(&aOp[i], azName[i], aDb[i], azSql[i], &aFix[FIX_SMALL], CHECK_ADMITTED);
    op_batch(&aOp[i], 100, 1);
  }
  for (r = 0; r < nRound; r++) {
    for (i = 0; i < 2; i++) aOp[i].aTxn[r] = op_batch(&aOp[i], nTxn, 1);
    for (i = 0; i < 2; i++) aOp[i].aAuto[r] = 0;
    for (k = 0; k < nAuto; k++) {
      for (i = 0; i < 2; i++) {
        aOp[i].bWall = 1;
        aOp[i].aAuto[r] += op_batch(&aOp[i], 1, 0) / nAuto;
        aOp[i].bWall = 0;
      }
    }
  }
  for (i = 0; i < 2; i++) {
    aTxn[i] = median(aOp[i].aTxn, nRound);
    aAuto[i] = median(aOp[i].aAuto, nRound);
  }
  printf(
      "\n3b. targets, small arguments (WAL, synchronous=FULL), median of %d rounds, us per call\n",
      nRound);
  printf("%-60s %12s %12s\n", "", "one txn", "autocommit");
  for (i = 0; i < 2; i++) printf("%-60s %12.3f %12.3f\n", aOp[i].zName, aTxn[i], aAuto[i]);
  printf("targets\n");
  printf("  one target / none, one txn     %6.2fx  %s\n", aTxn[1] / aTxn[0],
         target("claim with one target / none, one txn", aTxn[1] / aTxn[0], 1.3, 0));
  printf("  one target / none, autocommit  %6.2fx  %s\n", aAuto[1] / aAuto[0],
         target("claim with one target / none, autocommit", aAuto[1] / aAuto[0], 1.3, 0));
  for (i = 0; i < 2; i++) {
    char zFile[32];
    op_free(&aOp[i]);
    sqlite3_close(aDb[i]);
    snprintf(zFile, sizeof(zFile), "targets-%d", i);
    remove_db(zFile);
  }
}

/* ------------------------------------------------------------------ */
/* 4. replay                                                           */
/* ------------------------------------------------------------------ */

#define N_SETTLED 1000

static void bench_replay(void) {
  int nRound = env_int("BENCH_LEDGER_ROUNDS", 15, 3, MAX_ROUND);
  int nCall = 500, j, r;
  int iSpell = iLedgerSpell >= 0 && aSpell[iLedgerSpell].eSame != 0 ? iLedgerSpell : 0;
  sqlite3 *dbL = open_db("replay-ledger", 0, zWalFull);
  sqlite3 *dbP = open_db("replay-careful", 0, zWalFull);
  char *zDdl = plain_ddl("careful", iSpell);
  char *zIns = plain_insert("careful", "idem_key('t',:conv,'tool',:args)", 1);
  Op aL[N_FIXTURE], aP[N_FIXTURE];
  double aUsL[N_FIXTURE], aUsP[N_FIXTURE];

  exec_db(dbL, "CREATE VIRTUAL TABLE L USING idempotency");
  exec_db(dbP, zDdl);
  for (j = 0; j < N_FIXTURE; j++) {
    Op fill;
    /* N_SETTLED keys settled per document, the same rows in the careful table */
    op_init(&fill, "settle", dbL,
            "SELECT idem_settle('L', json_extract(idem_claim('L','t',:conv,'tool',:args),"
            "'$.token'), 'succeeded', '{\"ok\":true}')",
            &aFix[j], CHECK_ROW);
    fill.nCycle = N_SETTLED;
    op_batch(&fill, N_SETTLED, 1);
    op_free(&fill);
    op_init(&fill, "careful rows", dbP, zIns, &aFix[j], CHECK_CHANGES);
    fill.nCycle = N_SETTLED;
    op_batch(&fill, N_SETTLED, 1);
    op_free(&fill);
    op_init(&aL[j], "replay", dbL, zClaimSql, &aFix[j], CHECK_REPLAY);
    aL[j].nCycle = N_SETTLED;
    op_init(&aP[j], "idem_key + primary-key SELECT", dbP,
            "SELECT status, result FROM careful WHERE tenant='t'"
            " AND \"key\"=idem_key('t',:conv,'tool',:args)",
            &aFix[j], CHECK_ROW);
    aP[j].nCycle = N_SETTLED;
  }
  for (j = 0; j < N_FIXTURE; j++) {
    op_batch(&aL[j], 100, 0);
    op_batch(&aP[j], 100, 0);
  }
  for (r = 0; r < nRound; r++) {
    for (j = 0; j < N_FIXTURE; j++) {
      aL[j].aAuto[r] = op_batch(&aL[j], nCall, 0);
      aP[j].aAuto[r] = op_batch(&aP[j], nCall, 0);
    }
  }
  printf("\n4. replay: a claim of a settled key (autocommit), median of %d rounds, us per call\n",
         nRound);
  printf("%-40s", "");
  for (j = 0; j < N_FIXTURE; j++) printf(" %10s", azFixture[j]);
  printf("\n%-40s", "idem_claim, settled key (replay)");
  for (j = 0; j < N_FIXTURE; j++) {
    aUsL[j] = median(aL[j].aAuto, nRound);
    aUsP[j] = median(aP[j].aAuto, nRound);
    printf(" %10.3f", aUsL[j]);
  }
  printf("\n%-40s", "idem_key + primary-key SELECT");
  for (j = 0; j < N_FIXTURE; j++) printf(" %10.3f", aUsP[j]);
  printf("\n%-40s", "ratio");
  for (j = 0; j < N_FIXTURE; j++) printf(" %9.2fx", aUsL[j] / aUsP[j]);
  printf(
      "\n  (the SELECT reads status and result of the careful table by UNIQUE(tenant,key),"
      " the key computed by idem_key in the same statement)\n");
  printf("target\n  replay / idem_key + SELECT, small %6.2fx  %s\n", aUsL[0] / aUsP[0],
         target("replay / idem_key + primary-key SELECT", aUsL[0] / aUsP[0], 1.5, 0));
  for (j = 0; j < N_FIXTURE; j++) {
    op_free(&aL[j]);
    op_free(&aP[j]);
  }
  sqlite3_free(zDdl);
  sqlite3_free(zIns);
  sqlite3_close(dbL);
  sqlite3_close(dbP);
  remove_db("replay-ledger");
  remove_db("replay-careful");
}

/* ------------------------------------------------------------------ */
/* 5. race                                                             */
/* ------------------------------------------------------------------ */

/* BENCH_RACE_FAIL: which racer fails on purpose, to show that a failed
** racer ends the section (with its error) instead of leaving the others
** waiting: the last process of the first run of 2 or more processes,
** before the start signal (setup) or after half its claims (claim) */
#define RACE_FAIL_SETUP 1
#define RACE_FAIL_CLAIM 2
static int race_fail_mode(void) {
  const char *z = getenv("BENCH_RACE_FAIL");
  if (z == 0 || *z == 0) return 0;
  if (strcmp(z, "setup") == 0) return RACE_FAIL_SETUP;
  if (strcmp(z, "claim") == 0) return RACE_FAIL_CLAIM;
  die("BENCH_RACE_FAIL must be 'setup' or 'claim', got", z);
}

/* One racing process: claims every key of [0,nKeys) in its own shuffled
** order, each claim in autocommit, and settles what it was admitted to.
** Reports the number of keys it was admitted to on fdOut. */
static void race_child(int bLedger, int iChild, int nKeys, int iRun, int eFail, int fdReady,
                       int fdGo, int fdOut) {
  char zName[64], zConv[24], zKey[40], zToken[80], aToken[72];
  sqlite3 *db;
  sqlite3_stmt *pClaim, *pSettle;
  int *aOrder = malloc(sizeof(int) * (size_t)nKeys);
  int i, nAdmitted = 0;
  char c = 0;
  const Fixture *pFix = &aFix[FIX_SMALL];
  if (aOrder == 0) die("race", "out of memory");
  prngState = mix64((uint64_t)iRun * 1000 + (uint64_t)iChild + 77);
  for (i = 0; i < nKeys; i++) aOrder[i] = i;
  for (i = nKeys - 1; i > 0; i--) {
    int k = (int)(prng() % (uint64_t)(i + 1)), t = aOrder[i];
    aOrder[i] = aOrder[k];
    aOrder[k] = t;
  }
  snprintf(zName, sizeof(zName), "race-%d", iRun);
  if (eFail == RACE_FAIL_SETUP)
    die("race setup", "BENCH_RACE_FAIL=setup: this racer fails on purpose");
  db = open_db(zName, 0, zRacer);
  if (bLedger) {
    pClaim = prepare_db(db, "SELECT idem_claim('L','t',?1,'tool',?2)");
    pSettle = prepare_db(db, "SELECT idem_settle('L',?1,'succeeded','{\"ok\":true}')");
  } else {
    char *zIns = plain_insert("bare", ":key", 0);
    pClaim = prepare_db(db, zIns);
    sqlite3_free(zIns);
    pSettle = prepare_db(db,
                         "UPDATE bare SET status='succeeded', result='{\"ok\":true}',"
                         " updated_at=?2 WHERE tenant='t' AND \"key\"=?1");
  }
  if (write(fdReady, &c, 1) != 1) die("race", "pipe");
  /* one byte is the start; end of file is a parent that is gone */
  if (read(fdGo, &c, 1) != 1) die("race", "no start signal (the parent is gone)");
  for (i = 0; i < nKeys; i++) {
    int k = aOrder[i], m = fmt_conv('r', k, zConv), rc, bAdmitted = 0;
    if (eFail == RACE_FAIL_CLAIM && i == nKeys / 2) {
      die("race claim", "BENCH_RACE_FAIL=claim: this racer fails on purpose");
    }
    if (bLedger) {
      sqlite3_bind_text(pClaim, 1, zConv, m, SQLITE_STATIC);
      sqlite3_bind_text(pClaim, 2, pFix->z, pFix->n, SQLITE_STATIC);
      rc = sqlite3_step(pClaim);
      if (rc != SQLITE_ROW) die("race claim", sqlite3_errmsg(db));
      {
        const char *z = (const char *)sqlite3_column_text(pClaim, 0);
        const char *t = z ? strstr(z, "\"token\":\"") : 0;
        if (z && memcmp(z, zAdmitted, sizeof(zAdmitted) - 1) == 0) {
          size_t n;
          if (t == 0) die("race claim", "admitted without a token");
          t += 9;
          n = strcspn(t, "\"");
          if (n >= sizeof(zToken)) die("race claim", "token too long");
          memcpy(zToken, t, n);
          zToken[n] = 0;
          bAdmitted = 1;
        }
      }
      sqlite3_reset(pClaim);
      if (bAdmitted) {
        sqlite3_bind_text(pSettle, 1, zToken, -1, SQLITE_STATIC);
        if (sqlite3_step(pSettle) != SQLITE_ROW) die("race settle", sqlite3_errmsg(db));
        sqlite3_reset(pSettle);
      }
    } else {
      make_key(mix64((uint64_t)k * 2 + 1000003), mix64((uint64_t)k * 2 + 1000004), zKey);
      sqlite3_bind_text(pClaim, sqlite3_bind_parameter_index(pClaim, ":conv"), zConv, m,
                        SQLITE_STATIC);
      sqlite3_bind_text(pClaim, sqlite3_bind_parameter_index(pClaim, ":args"), pFix->z, pFix->n,
                        SQLITE_STATIC);
      sqlite3_bind_text(pClaim, sqlite3_bind_parameter_index(pClaim, ":key"), zKey, 38,
                        SQLITE_STATIC);
      bind_token(pClaim, sqlite3_bind_parameter_index(pClaim, ":token"), aToken);
      sqlite3_bind_int64(pClaim, sqlite3_bind_parameter_index(pClaim, ":now"), wall_ms());
      rc = sqlite3_step(pClaim);
      if (rc != SQLITE_DONE) die("race insert", sqlite3_errmsg(db));
      bAdmitted = sqlite3_changes(db) == 1;
      sqlite3_reset(pClaim);
      if (bAdmitted) {
        sqlite3_bind_text(pSettle, 1, zKey, 38, SQLITE_STATIC);
        sqlite3_bind_int64(pSettle, 2, wall_ms());
        if (sqlite3_step(pSettle) != SQLITE_DONE || sqlite3_changes(db) != 1) {
          die("race settle", sqlite3_errmsg(db));
        }
        sqlite3_reset(pSettle);
      }
    }
    nAdmitted += bAdmitted;
  }
  sqlite3_finalize(pClaim);
  sqlite3_finalize(pSettle);
  sqlite3_close(db);
  free(aOrder);
  if (write(fdOut, &nAdmitted, sizeof(nAdmitted)) != (ssize_t)sizeof(nAdmitted)) {
    die("race", "pipe");
  }
}

/* How a racer ended, for the message of a failed run. */
static void race_status(int st, char *z, size_t n) {
  if (WIFEXITED(st)) snprintf(z, n, "exited with status %d", WEXITSTATUS(st));
  else if (WIFSIGNALED(st)) snprintf(z, n, "was killed by signal %d", WTERMSIG(st));
  else snprintf(z, n, "stopped (status %d)", st);
}

/* A racer failed, or the run passed its deadline: stop the racers still
** running, reap them, and end the bench with zWhy. */
static void race_abort(const pid_t *aPid, const int *aDone, int nProc, const char *zWhy) {
  int i, st;
  for (i = 0; i < nProc; i++) {
    if (!aDone[i]) kill(aPid[i], SIGKILL);
  }
  for (i = 0; i < nProc; i++) {
    if (!aDone[i]) waitpid(aPid[i], &st, 0); /* killed: returns at once */
  }
  die("race", zWhy);
}

/* Reap the racers that have ended, without waiting; a racer that ended
** before the start (bStarted 0) or with an error ends the run. Returns
** the number still running. */
static int race_reap(const pid_t *aPid, int *aDone, int nProc, int bStarted, const char *zWhat,
                     int iRun) {
  int i, st, nLive = 0;
  pid_t pid;
  char zHow[64], zWhy[256];
  while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
    for (i = 0; i < nProc && aPid[i] != pid; i++) {
    }
    if (i == nProc) continue; /* not a racer */
    aDone[i] = 1;
    if (!bStarted || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      race_status(st, zHow, sizeof(zHow));
      snprintf(zWhy, sizeof(zWhy),
               "racing process %d of %d (%s, run %d) %s%s; the other racers were stopped", i + 1,
               nProc, zWhat, iRun, zHow, bStarted ? "" : " before the start");
      race_abort(aPid, aDone, nProc, zWhy);
    }
  }
  if (pid < 0 && errno != ECHILD && errno != EINTR) die("race: waitpid", strerror(errno));
  for (i = 0; i < nProc; i++) nLive += !aDone[i];
  return nLive;
}

/* nProc processes race over nKeys keys; returns keys settled per second.
** Every wait is bounded: the run's deadline (BENCH_RACE_TIMEOUT seconds),
** busy_timeout in each racer, and an alarm() that ends a racer left behind. */
static double race_run(int bLedger, int nProc, int nKeys, int iRun, int eFail) {
  int aReady[2], aGo[2], aOut[2], i, nAdmitted = 0, nReady = 0, aDone[16];
  int nTimeout = env_int("BENCH_RACE_TIMEOUT", 300, 1, 86400);
  const char *zWhat = bLedger ? "ledger" : "bare";
  pid_t aPid[16];
  double t0, t1, tEnd;
  char zName[64], zGo[16], zWhy[256];
  sqlite3 *db;
  sigset_t chld, old;
  snprintf(zName, sizeof(zName), "race-%d", iRun);
  remove_db(zName);
  /* the file, its journal mode (persistent) and its tables exist before
  ** any racer opens it: no two processes set up the same fresh file */
  db = open_db(zName, 0, zWalNormal);
  {
    sqlite3_stmt *p = prepare_db(db, "PRAGMA journal_mode");
    if (sqlite3_step(p) != SQLITE_ROW || strcmp((const char *)sqlite3_column_text(p, 0), "wal")) {
      die("race", "the race file is not in WAL mode");
    }
    sqlite3_finalize(p);
  }
  if (bLedger) {
    exec_db(db, "CREATE VIRTUAL TABLE L USING idempotency");
  } else {
    char *zDdl = plain_ddl("bare", -1);
    exec_db(db, zDdl);
    sqlite3_free(zDdl);
  }
  sqlite3_close(db);
  if (pipe(aReady) || pipe(aGo) || pipe(aOut)) die("race", strerror(errno));
  /* SIGCHLD is blocked so that the parent can wait for it with a bound */
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  if (sigprocmask(SIG_BLOCK, &chld, &old)) die("race: sigprocmask", strerror(errno));
  fflush(stdout);
  fflush(stderr);
  for (i = 0; i < nProc; i++) {
    aDone[i] = 0;
    aPid[i] = fork();
    if (aPid[i] < 0) die("fork", strerror(errno));
    if (aPid[i] == 0) {
      sigprocmask(SIG_SETMASK, &old, 0);
      alarm((unsigned)nTimeout + 10); /* left behind by a parent that is gone */
      close(aReady[0]);
      close(aGo[1]);
      close(aOut[0]);
      race_child(bLedger, i, nKeys, iRun, i == nProc - 1 ? eFail : 0, aReady[1], aGo[0], aOut[1]);
      _exit(0);
    }
  }
  close(aReady[1]);
  close(aGo[0]);
  close(aOut[1]);
  tEnd = now_us() + nTimeout * 1e6;
  while (nReady < nProc) {
    struct pollfd pfd;
    char ac[16];
    ssize_t n;
    race_reap(aPid, aDone, nProc, 0, zWhat, iRun);
    if (now_us() > tEnd) {
      snprintf(zWhy, sizeof(zWhy), "%d of %d racers (%s, run %d) not ready after %d s",
               nProc - nReady, nProc, zWhat, iRun, nTimeout);
      race_abort(aPid, aDone, nProc, zWhy);
    }
    pfd.fd = aReady[0];
    pfd.events = POLLIN;
    pfd.revents = 0;
    if (poll(&pfd, 1, 20) <= 0) continue;
    n = read(aReady[0], ac,
             sizeof(ac) < (size_t)(nProc - nReady) ? sizeof(ac) : (size_t)(nProc - nReady));
    if (n > 0) nReady += (int)n;
  }
  memset(zGo, 'g', sizeof(zGo));
  t0 = now_us();
  /* one byte to each racer: go */
  if (write(aGo[1], zGo, (size_t)nProc) != (ssize_t)nProc) {
    race_abort(aPid, aDone, nProc, "the start signal could not be written");
  }
  while (race_reap(aPid, aDone, nProc, 1, zWhat, iRun) > 0) {
    struct timespec ts;
    double tLeft = tEnd - now_us();
    if (tLeft <= 0) {
      snprintf(zWhy, sizeof(zWhy), "racers (%s, run %d) still running after %d s", zWhat, iRun,
               nTimeout);
      race_abort(aPid, aDone, nProc, zWhy);
    }
    if (tLeft > 1e6) tLeft = 1e6;
    ts.tv_sec = (time_t)(tLeft / 1e6);
    ts.tv_nsec = (long)((tLeft - (double)ts.tv_sec * 1e6) * 1e3);
    if (sigtimedwait(&chld, 0, &ts) < 0 && errno != EAGAIN && errno != EINTR) {
      die("race: sigtimedwait", strerror(errno));
    }
  }
  t1 = now_us();
  sigprocmask(SIG_SETMASK, &old, 0);
  close(aGo[1]);
  for (i = 0; i < nProc; i++) {
    int n = 0;
    if (read(aOut[0], &n, sizeof(n)) != (ssize_t)sizeof(n)) die("race", "missing report");
    nAdmitted += n;
  }
  close(aReady[0]);
  close(aOut[0]);
  db = open_db(zName, 0, zWalNormal);
  if (nAdmitted != nKeys ||
      query_int(db, bLedger ? "SELECT count(*) FROM L WHERE status='succeeded'"
                            : "SELECT count(*) FROM bare WHERE status='succeeded'") != nKeys) {
    char z[120];
    snprintf(z, sizeof(z), "%s: %d admissions for %d keys", bLedger ? "ledger" : "bare", nAdmitted,
             nKeys);
    die("race", z);
  }
  sqlite3_close(db);
  remove_db(zName);
  return nKeys / ((t1 - t0) / 1e6);
}

static void bench_race(void) {
  static const int aProc[3] = {1, 2, 4};
  int nKeys = env_int("BENCH_RACE_KEYS", 3000, 100, 1000000);
  int nRound = env_int("BENCH_RACE_ROUNDS", 5, 1, MAX_ROUND);
  double aL[3][MAX_ROUND], aB[3][MAX_ROUND];
  int p, r, iRun = 0, eFail = race_fail_mode();
  for (r = 0; r < nRound; r++) {
    for (p = 0; p < 3; p++) {
      /* the failure asked for, in the first run of 2 or more processes */
      int f = r == 0 && aProc[p] == 2 ? eFail : 0;
      /* alternate which goes first */
      if (r % 2 == 0) {
        aL[p][r] = race_run(1, aProc[p], nKeys, iRun++, f);
        aB[p][r] = race_run(0, aProc[p], nKeys, iRun++, 0);
      } else {
        aB[p][r] = race_run(0, aProc[p], nKeys, iRun++, f);
        aL[p][r] = race_run(1, aProc[p], nKeys, iRun++, 0);
      }
    }
  }
  printf(
      "\n5. race: processes claiming the same %d keys in their own orders, each claim"
      " and settle in autocommit\n   (WAL, synchronous=NORMAL, busy_timeout=10000),"
      " keys settled per second, median of %d runs\n",
      nKeys, nRound);
  printf("%-12s %14s %14s %10s\n", "processes", "ledger", "bare", "ratio");
  for (p = 0; p < 3; p++) {
    double l = median(aL[p], nRound), b = median(aB[p], nRound);
    printf("%-12d %14.0f %14.0f %9.2fx", aProc[p], l, b, l / b);
    if (aProc[p] == 4)
      printf("  %s", target("4 racing processes, ledger / bare keys/s", l / b, 0.8, 1));
    printf("\n");
  }
  printf(
      "  (every key admitted exactly once and settled, checked after each run; bare: INSERT"
      " ON CONFLICT DO NOTHING, then UPDATE to succeeded when changes() is 1)\n");
}

/* ------------------------------------------------------------------ */
/* 6. retention                                                        */
/* ------------------------------------------------------------------ */

/* A copy of the default VFS whose clock runs iClockShiftMs ahead: the
** ledger's only time source, so rows expire without sleeping. */
static sqlite3_vfs clockVfs;
static sqlite3_vfs *pRealVfs;
static int64_t iClockShiftMs;

static int clock_time64(sqlite3_vfs *pVfs, sqlite3_int64 *pOut) {
  int rc = pRealVfs->xCurrentTimeInt64(pRealVfs, pOut);
  (void)pVfs;
  *pOut += iClockShiftMs;
  return rc;
}

static int clock_time(sqlite3_vfs *pVfs, double *pOut) {
  sqlite3_int64 t = 0;
  int rc = clock_time64(pVfs, &t);
  *pOut = (double)t / 86400000.0;
  return rc;
}

static void clock_register(void) {
  if (pRealVfs) return;
  pRealVfs = sqlite3_vfs_find(0);
  if (pRealVfs == 0 || pRealVfs->iVersion < 2 || pRealVfs->xCurrentTimeInt64 == 0) {
    die("retention", "the default VFS has no xCurrentTimeInt64");
  }
  clockVfs = *pRealVfs;
  clockVfs.zName = "bench-clock";
  clockVfs.pNext = 0;
  clockVfs.xCurrentTime = clock_time;
  clockVfs.xCurrentTimeInt64 = clock_time64;
  if (sqlite3_vfs_register(&clockVfs, 0) != SQLITE_OK) die("retention", "vfs register");
}

static void bench_retention(void) {
  int nRound = env_int("BENCH_LEDGER_ROUNDS", 15, 3, MAX_ROUND);
  int nRows = env_int("BENCH_RETENTION_ROWS", 100000, 1000, 10000000);
  int nCall = 200, r, w;
  int nRetention = 3600;
  sqlite3 *aDb[2];
  Op aOp[2];
  int64_t nBefore, nAfter, nExpiredLeft;
  double aUs[2], aP50[2], aP99[2];
  char *zErr = 0, zCreate[128];

  printf("\n6. retention: claims on a ledger with %d expired terminal rows\n", nRows);
  clock_register();
  remove_db("retention-on");
  remove_db("retention-off");
  aDb[0] = open_db("retention-on", "bench-clock", zWalFull);
  snprintf(zCreate, sizeof(zCreate),
           "CREATE VIRTUAL TABLE L USING idempotency(retention_seconds=%d)", nRetention);
  if (sqlite3_exec(aDb[0], zCreate, 0, 0, &zErr) != SQLITE_OK) {
    printf("SKIP retention: the loaded extension refuses the option (%s)\n",
           zErr ? zErr : sqlite3_errmsg(aDb[0]));
    sqlite3_free(zErr);
    sqlite3_close(aDb[0]);
    remove_db("retention-on");
    return;
  }
  aDb[1] = open_db("retention-off", "bench-clock", zWalFull);
  exec_db(aDb[1], "CREATE VIRTUAL TABLE L USING idempotency");
  for (w = 0; w < 2; w++) {
    Op fill;
    int i;
    op_init(&fill, "settle", aDb[w],
            "SELECT idem_settle('L', json_extract(idem_claim('L','t',:conv,'tool',:args),"
            "'$.token'), 'succeeded', '{\"ok\":true}')",
            &aFix[FIX_SMALL], CHECK_ROW);
    for (i = 0; i < nRows; i += 5000) op_batch(&fill, nRows - i < 5000 ? nRows - i : 5000, 1);
    op_free(&fill);
    op_init(&aOp[w], w ? "idem_claim, no retention" : "idem_claim, retention", aDb[w], zClaimSql,
            &aFix[FIX_SMALL], CHECK_ADMITTED);
    aOp[w].nCallMax = nRound * nCall;
    aOp[w].aCallUs = malloc(sizeof(double) * (size_t)aOp[w].nCallMax);
    if (aOp[w].aCallUs == 0) die("retention", "out of memory");
  }
  /* every settled row is now older than the retention window */
  iClockShiftMs += ((int64_t)nRetention + 60) * 1000;
  nBefore = query_int(aDb[0], "SELECT count(*) FROM L");
  for (r = 0; r < nRound; r++) {
    for (w = 0; w < 2; w++) aOp[w].aTxn[r] = op_batch(&aOp[w], nCall, 1);
  }
  nAfter = query_int(aDb[0], "SELECT count(*) FROM L");
  nExpiredLeft = query_int(aDb[0], "SELECT count(*) FROM L WHERE status='succeeded'");
  for (w = 0; w < 2; w++) {
    aUs[w] = median(aOp[w].aTxn, nRound);
    /* the spread of single claims: purging must stay a bounded batch */
    qsort(aOp[w].aCallUs, (size_t)aOp[w].nCallUs, sizeof(double), cmp_double);
    aP50[w] = aOp[w].aCallUs[aOp[w].nCallUs / 2];
    aP99[w] = aOp[w].aCallUs[(aOp[w].nCallUs * 99) / 100];
  }
  printf("%-40s %12s %12s %12s\n", "(transactions of 200 claims, small)", "us per claim",
         "p50 single", "p99 single");
  printf("%-40s %12.3f %12.3f %12.3f\n", "idem_claim, retention_seconds=3600", aUs[0], aP50[0],
         aP99[0]);
  printf("%-40s %12.3f %12.3f %12.3f\n", "idem_claim, no retention", aUs[1], aP50[1], aP99[1]);
  printf("%-40s %11.2fx %11.2fx %11.2fx\n", "ratio", aUs[0] / aUs[1], aP50[0] / aP50[1],
         aP99[0] / aP99[1]);
  printf("  (us per claim includes the COMMIT; single claims are timed alone, without it)\n");
  printf(
      "rows purged per claim: %.2f (%lld claims, %lld rows before, %lld after;"
      " %lld expired rows left)\n",
      (double)(nBefore + (int64_t)nRound * nCall - nAfter) / ((double)nRound * nCall),
      (long long)nRound * nCall, (long long)nBefore, (long long)nAfter, (long long)nExpiredLeft);
  if (nBefore + (int64_t)nRound * nCall - nAfter == 0) {
    printf(
        "  NOTE: no row was purged: the extension accepts retention_seconds but its claims"
        " purge nothing\n");
  }
  if (nExpiredLeft == 0) {
    printf(
        "  NOTE: every expired row was purged before the last round: raise"
        " BENCH_RETENTION_ROWS\n");
  }
  for (w = 0; w < 2; w++) {
    free(aOp[w].aCallUs);
    op_free(&aOp[w]);
    sqlite3_close(aDb[w]);
  }
  remove_db("retention-on");
  remove_db("retention-off");
}

/* ------------------------------------------------------------------ */
/* 7. growth                                                           */
/* ------------------------------------------------------------------ */

static int64_t db_bytes(sqlite3 *db) {
  return query_int(db, "SELECT page_count*page_size FROM pragma_page_count, pragma_page_size");
}

static void bench_growth(void) {
  static const int64_t aSize[] = {10000, 100000, 1000000, 5000000};
  int64_t nMax = (int64_t)env_int("BENCH_MAX_ROWS", 1000000, 10000, 50000000);
  int iSpell = iLedgerSpell >= 0 && aSpell[iLedgerSpell].eSame != 0 ? iLedgerSpell : 0;
  int nRound = 7, nCall = 400, k, w, r, kLast = 0;
  sqlite3 *aDb[2];
  Op aOp[2];
  int64_t aRows[2] = {0, 0};
  double aUs[4][2], aBpr[4][2];
  char *zDdl = plain_ddl("careful", iSpell), *zIns = plain_insert("careful", ":key", 0);

  remove_db("growth-ledger");
  remove_db("growth-careful");
  aDb[0] = open_db("growth-ledger", 0, zWalNormal);
  exec_db(aDb[0], "CREATE VIRTUAL TABLE L USING idempotency");
  aDb[1] = open_db("growth-careful", 0, zWalNormal);
  exec_db(aDb[1], zDdl);
  op_init(&aOp[0], "idem_claim", aDb[0], zClaimSql, &aFix[FIX_SMALL], CHECK_ADMITTED);
  op_init(&aOp[1], "careful", aDb[1], zIns, &aFix[FIX_SMALL], CHECK_CHANGES);
  printf(
      "\n7. growth: claim cost as the table grows (small arguments, WAL, synchronous=NORMAL,"
      " default cache_size;\n   filled 10,000 claims per transaction, then %d rounds of %d"
      " claims in one transaction, each followed by a checkpoint)\n",
      nRound, nCall);
  printf("%-10s %11s %8s %11s %8s %10s %10s %8s %8s\n", "rows", "ledger us", "growth", "careful us",
         "growth", "ledger B", "careful B", "B ratio", "seconds");
  for (k = 0; k < 4 && aSize[k] <= nMax; k++) {
    double t0 = now_us();
    for (w = 0; w < 2; w++) {
      while (aRows[w] < aSize[k]) {
        int n = aSize[k] - aRows[w] > 10000 ? 10000 : (int)(aSize[k] - aRows[w]);
        op_batch(&aOp[w], n, 1);
        aRows[w] += n;
      }
    }
    /* start from an empty WAL; each measured round then pays for writing
    ** back the pages it dirtied (a checkpoint after its commit), so the
    ** figure does not depend on where the automatic checkpoints fall */
    for (w = 0; w < 2; w++) exec_db(aDb[w], "PRAGMA wal_checkpoint(TRUNCATE)");
    for (r = 0; r < nRound; r++) {
      for (w = 0; w < 2; w++) {
        double t1 = cpu_us();
        op_batch(&aOp[w], nCall, 1);
        exec_db(aDb[w], "PRAGMA wal_checkpoint(PASSIVE)");
        aOp[w].aTxn[r] = (cpu_us() - t1) / nCall;
        aRows[w] += nCall;
      }
    }
    for (w = 0; w < 2; w++) {
      aUs[k][w] = median(aOp[w].aTxn, nRound);
      aBpr[k][w] = (double)db_bytes(aDb[w]) / (double)aRows[w];
    }
    printf("%-10lld %11.3f %7.2fx %11.3f %7.2fx %10.1f %10.1f %7.2fx %8.0f\n", (long long)aSize[k],
           aUs[k][0], aUs[k][0] / aUs[0][0], aUs[k][1], aUs[k][1] / aUs[0][1], aBpr[k][0],
           aBpr[k][1], aBpr[k][0] / aBpr[k][1], (now_us() - t0) / 1e6);
    fflush(stdout);
    kLast = k;
  }
  if (aSize[kLast] < 5000000) {
    printf("  (BENCH_MAX_ROWS=5000000 adds the 5M step)\n");
  }
  if (kLast > 0) {
    char zLabel[96];
    double g0 = aUs[kLast][0] / aUs[0][0], g1 = aUs[kLast][1] / aUs[0][1];
    printf("targets at %lld rows\n", (long long)aSize[kLast]);
    snprintf(zLabel, sizeof(zLabel), "growth 10k to %lldk, ledger / careful",
             (long long)aSize[kLast] / 1000);
    printf("  growth, ledger / careful      %6.2fx  %s\n", g0 / g1,
           target(zLabel, g0 / g1, 1.0, 0));
    snprintf(zLabel, sizeof(zLabel), "bytes per row at %lldk, ledger / careful",
             (long long)aSize[kLast] / 1000);
    printf("  bytes per row, ledger / careful %4.2fx  %s\n", aBpr[kLast][0] / aBpr[kLast][1],
           target(zLabel, aBpr[kLast][0] / aBpr[kLast][1], 1.15, 0));
  }
  for (w = 0; w < 2; w++) {
    op_free(&aOp[w]);
    sqlite3_close(aDb[w]);
  }
  sqlite3_free(zDdl);
  sqlite3_free(zIns);
  remove_db("growth-ledger");
  remove_db("growth-careful");
}

/*
** 8. attention: what needs attention (unknown rows, claims) found through
** the partial index of open rows, in a ledger of many settled rows, against
** the same query made to scan; and what the index costs a claim and its
** settle (the same ledger with the index dropped).
*/
static void bench_attention(void) {
  int nRows = env_int("BENCH_ATTENTION_ROWS", 5000000, 10000, 50000000);
  int nRound = env_int("BENCH_LEDGER_ROUNDS", 15, 3, MAX_ROUND), nCall = 400, r, w, i;
  sqlite3 *aDb[2];
  Op aOp[2];
  double aList[MAX_ROUND][2], aListUs[2], aUs[2];
  char zDrop[160];
  printf(
      "\n8. attention: 100 unknown rows in a ledger of %d settled rows (WAL, synchronous=NORMAL)\n",
      nRows);
  remove_db("attention-index");
  remove_db("attention-noindex");
  aDb[0] = open_db("attention-index", 0, zWalNormal);
  aDb[1] = open_db("attention-noindex", 0, zWalNormal);
  for (w = 0; w < 2; w++) {
    Op fill;
    exec_db(aDb[w], "CREATE VIRTUAL TABLE L USING idempotency");
    op_init(&fill, "settle", aDb[w],
            "SELECT idem_settle('L', json_extract(idem_claim('L','t',:conv,'tool',:args),"
            "'$.token'), 'succeeded', '{\"ok\":true}')",
            &aFix[FIX_SMALL], CHECK_ROW);
    for (i = 0; i < nRows; i += 10000) op_batch(&fill, nRows - i < 10000 ? nRows - i : 10000, 1);
    op_free(&fill);
    op_init(&fill, "unknown", aDb[w],
            "SELECT idem_settle('L', json_extract(idem_claim('L','t',:conv,'tool',:args),"
            "'$.token'), 'unknown', NULL)",
            &aFix[FIX_SMALL], CHECK_ROW);
    op_batch(&fill, 100, 1);
    op_free(&fill);
  }
  {
    /* the second ledger without the partial index: its claims pay no index write */
    sqlite3_stmt *q = prepare_db(aDb[1], "SELECT v FROM L_meta WHERE k = 'id'");
    if (sqlite3_step(q) != SQLITE_ROW) die("attention", "no ledger identity");
    snprintf(zDrop, sizeof(zDrop), "DROP INDEX \"idem_%s_open\"",
             (const char *)sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    exec_db(aDb[1], zDrop);
  }
  if (query_int(aDb[0], "SELECT count(*) FROM L WHERE status = 'unknown'") != 100 ||
      query_int(aDb[0], "SELECT count(*) FROM L WHERE status || '' = 'unknown'") != 100) {
    die("attention", "the index and the scan do not both find the 100 unknown rows");
  }
  for (r = 0; r < nRound; r++) {
    double t = cpu_us();
    sink += (uint64_t)query_int(aDb[0], "SELECT count(*) FROM L WHERE status = 'unknown'");
    aList[r][0] = cpu_us() - t;
    t = cpu_us();
    sink += (uint64_t)query_int(aDb[0], "SELECT count(*) FROM L WHERE status || '' = 'unknown'");
    aList[r][1] = cpu_us() - t;
  }
  for (w = 0; w < 2; w++) {
    double a[MAX_ROUND];
    for (r = 0; r < nRound; r++) a[r] = aList[r][w];
    aListUs[w] = median(a, nRound);
  }
  printf("%-52s %12s\n", "listing the unknown rows", "us");
  printf("%-52s %12.1f\n", "  WHERE status = 'unknown' (the partial index)", aListUs[0]);
  printf("%-52s %12.1f\n", "  WHERE status || '' = 'unknown' (a scan)", aListUs[1]);
  printf("  scan / index %.0fx  %s\n", aListUs[1] / aListUs[0],
         target("listing unknown rows, scan / index", aListUs[1] / aListUs[0], 100.0, 1));
  for (w = 0; w < 2; w++) {
    op_init(&aOp[w], w ? "claim+settle, no index" : "claim+settle, index", aDb[w],
            "SELECT idem_settle('L', json_extract(idem_claim('L','t',:conv,'tool',:args),"
            "'$.token'), 'succeeded', '{\"ok\":true}')",
            &aFix[FIX_SMALL], CHECK_ROW);
  }
  for (r = 0; r < nRound; r++) {
    for (w = 0; w < 2; w++) {
      double t = cpu_us();
      op_batch(&aOp[w], nCall, 1);
      aOp[w].aTxn[r] = (cpu_us() - t) / nCall;
    }
  }
  for (w = 0; w < 2; w++) aUs[w] = median(aOp[w].aTxn, nRound);
  printf("%-52s %12s\n", "a claim and its settle (one statement, one transaction of 400)", "us");
  printf("%-52s %12.3f\n", "  with the partial index", aUs[0]);
  printf("%-52s %12.3f\n", "  without it", aUs[1]);
  printf("  index / none %.2fx  %s\n", aUs[0] / aUs[1],
         target("claim+settle, open-rows index / none", aUs[0] / aUs[1], 1.10, 0));
  for (w = 0; w < 2; w++) {
    op_free(&aOp[w]);
    sqlite3_close(aDb[w]);
  }
  remove_db("attention-index");
  remove_db("attention-noindex");
}

/* ------------------------------------------------------------------ */
/* 9. memory                                                           */
/* ------------------------------------------------------------------ */

/* SQLite's own accounting at one moment: the process's heap through
** SQLite (sqlite3_status64 MEMORY_USED, the figure sqlite3_memory_used
** returns) and the connection's page cache, schema and statements. */
typedef struct MemPoint MemPoint;
struct MemPoint {
  sqlite3_int64 heap, cache, schema, stmt;
};

static void mem_point(sqlite3 *db, MemPoint *m) {
  sqlite3_int64 hi = 0;
  int v = 0, vhi = 0;
  if (sqlite3_status64(SQLITE_STATUS_MEMORY_USED, &m->heap, &hi, 0) != SQLITE_OK) {
    die("memory", "sqlite3_status64 failed");
  }
  if (m->heap != sqlite3_memory_used()) die("memory", "sqlite3_memory_used disagrees");
  m->cache = m->schema = m->stmt = 0;
  if (db == 0) return;
  if (sqlite3_db_status(db, SQLITE_DBSTATUS_CACHE_USED, &v, &vhi, 0)) die("memory", "db_status");
  m->cache = v;
  if (sqlite3_db_status(db, SQLITE_DBSTATUS_SCHEMA_USED, &v, &vhi, 0)) die("memory", "db_status");
  m->schema = v;
  if (sqlite3_db_status(db, SQLITE_DBSTATUS_STMT_USED, &v, &vhi, 0)) die("memory", "db_status");
  m->stmt = v;
}

static void mem_row(const char *zWhen, const MemPoint *m, const MemPoint *pBase) {
  printf("%-34s %10.1f %10.1f %10.1f %10.1f %12.1f\n", zWhen, (m->heap - pBase->heap) / 1024.0,
         m->cache / 1024.0, m->schema / 1024.0, m->stmt / 1024.0,
         (m->heap - pBase->heap - m->cache) / 1024.0);
}

/* What a connection with one ledger costs, and that it does not grow over
** BENCH_MEMORY_CLAIMS (1,000,000) claims, each settled, in transactions of
** 10,000 (WAL, synchronous=NORMAL, default cache_size). */
static void bench_memory(void) {
  int nClaims = env_int("BENCH_MEMORY_CLAIMS", 1000000, 1000, 100000000);
  int nStep = nClaims / 10, nBatch = 10000, i;
  sqlite3 *db;
  Op op;
  MemPoint base, mOpen, mLedger, mFirst, m, mMax;
  sqlite3_int64 nCacheBound, nGrowth;
  double t0 = now_us();

  remove_db("memory");
  mem_point(0, &base);
  db = open_db("memory", 0, zWalNormal);
  mem_point(db, &mOpen);
  exec_db(db, "CREATE VIRTUAL TABLE L USING idempotency");
  mem_point(db, &mLedger);
  {
    int64_t nPages = query_int(db, "PRAGMA cache_size");
    int64_t nPage = query_int(db, "PRAGMA page_size");
    /* what the cache may hold: cache_size pages, or -cache_size KiB */
    nCacheBound = nPages < 0 ? -nPages * 1024 : nPages * nPage;
  }
  /* a claim and its settle in one statement: both functions' statements */
  op_init(&op, "memory claim+settle", db,
          "SELECT idem_settle('L', idem_claim('L','t',:conv,'tool',:args) ->> '$.token',"
          " 'succeeded', '{\"ok\":true}')",
          &aFix[FIX_SMALL], CHECK_ROW);
  op_batch(&op, 1, 0);
  mem_point(db, &mFirst);
  printf(
      "\n9. memory: a connection with one ledger, by SQLite's own accounting (KiB; heap is"
      " sqlite3_memory_used\n   less its value before the open), then %d claims, each"
      " settled, in transactions of %d\n",
      nClaims, nBatch);
  printf("%-34s %10s %10s %10s %10s %12s\n", "", "heap", "cache", "schema", "stmt", "heap - cache");
  mem_row("connection open, extension loaded", &mOpen, &base);
  mem_row("CREATE VIRTUAL TABLE", &mLedger, &base);
  mem_row("after the first claim", &mFirst, &base);
  mMax = mFirst;
  for (i = 1; i < nClaims;) {
    /* a batch ends at each tenth of nClaims, which is a sample */
    int n = nBatch, nNext = (i / nStep + 1) * nStep - i;
    char zWhen[48];
    if (n > nNext) n = nNext;
    if (n > nClaims - i) n = nClaims - i;
    op_batch(&op, n, 1);
    i += n;
    mem_point(db, &m);
    if (m.heap - m.cache > mMax.heap - mMax.cache) mMax = m;
    if (i % nStep == 0 || i == nClaims) {
      snprintf(zWhen, sizeof(zWhen), "after %d claims", i);
      mem_row(zWhen, &m, &base);
    }
  }
  op_free(&op);
  nGrowth = (mMax.heap - mMax.cache) - (mFirst.heap - mFirst.cache);
  printf(
      "  (page cache bound %.0f KiB; the largest heap outside the page cache came %+.1f KiB"
      " from the first claim's;\n   statements %+.1f KiB, schema %+.1f KiB at the end)\n",
      nCacheBound / 1024.0, nGrowth / 1024.0, (m.stmt - mFirst.stmt) / 1024.0,
      (m.schema - mFirst.schema) / 1024.0);
  printf("  memory, at the end / after the first claim, outside the page cache: %.3fx  %s\n",
         (double)(m.heap - m.cache) / (double)(mFirst.heap - mFirst.cache),
         target("memory outside the page cache, end / 1st claim",
                (double)(mMax.heap - mMax.cache) / (double)(mFirst.heap - mFirst.cache), 1.02, 0));
  printf("  page cache at the end / its bound: %.3fx  %s\n", (double)m.cache / (double)nCacheBound,
         target("page cache / its bound (cache_size)", (double)m.cache / (double)nCacheBound, 1.10,
                0));
  sqlite3_close(db);
  remove_db("memory");
  printf("  (%.1f s)\n", (now_us() - t0) / 1e6);
}

/* ------------------------------------------------------------------ */
/* main                                                                */
/* ------------------------------------------------------------------ */

/* Print how long the section that just ended took (wall clock). */
static void section_done(const char *zName) {
  static double tLast = -1;
  double t = now_us();
  if (tLast >= 0 && t - tLast >= 1e5) printf("[%s: %.1f s]\n", zName, (t - tLast) / 1e6);
  tLast = t;
}

static void print_load(const char *zWhen) {
  FILE *f = fopen("/proc/loadavg", "r");
  char z[128];
  if (f == 0) return;
  if (fgets(z, sizeof(z), f)) printf("load average %s: %s", zWhen, z);
  fclose(f);
}

int main(int argc, char **argv) {
  const char *zDir, *zCases = argc > 3 ? argv[3] : 0, *zTmp = getenv("TMPDIR");
  sqlite3 *db;
  int bStrict = env_int("BENCH_STRICT", 0, 0, 1);
  int j, i, rc = 0, nMissed = 0;
  double t0 = now_us();

  if (argc < 3 || argc > 4) {
    fprintf(stderr, "usage: %s EXTENSION FIXTURE_DIR [GRAMMAR_CASES_SQL]\n", argv[0]);
    return 1;
  }
  zExtPath = argv[1];
  zDir = argv[2];
  memset(aFix, 0, sizeof(aFix));
  for (j = 0; j < FIX_FLOATS; j++) {
    if (read_fixture(zDir, azFixture[j], &aFix[j])) rc = 2;
  }
  if (rc) {
    fprintf(stderr,
            "bench: the fixtures are the shared bench-fixtures (small, medium, large); "
            "set SHARED to the directory that holds bench-fixtures/\n");
    return rc;
  }
  make_floats(&aFix[FIX_FLOATS]);
  snprintf(zTmpDir, sizeof(zTmpDir), "%s/idem-bench-XXXXXX", zTmp && *zTmp ? zTmp : "/tmp");
  if (mkdtemp(zTmpDir) == 0) die("mkdtemp", zTmpDir);

  db = open_db(0, 0, 0);
  for (j = 0; j < N_FIXTURE; j++) canonicalize_fixture(db, &aFix[j]);
  {
    sqlite3_stmt *p = prepare_db(db, "SELECT idem_version()");
    if (sqlite3_step(p) != SQLITE_ROW) die("idem_version", sqlite3_errmsg(db));
    printf("sqlite-idempotency bench: SQLite %s, extension %s (idem_version %s)\n",
           sqlite3_libversion(), zExtPath, (const char *)sqlite3_column_text(p, 0));
    sqlite3_finalize(p);
  }
  print_load("at start");
  read_row_format();
  section_done("start");

  if (section_on("calls")) bench_calls(db);
  section_done("calls");
  if (section_on("grammar") || section_on("claim") || section_on("replay") ||
      section_on("growth")) {
    bench_grammar(db, zCases);
  }
  section_done("grammar");
  if (section_on("claim")) bench_claim();
  if (section_on("targets")) bench_targets();
  section_done("claim");
  if (section_on("replay")) bench_replay();
  section_done("replay");
  if (section_on("settle")) bench_settle();
  section_done("settle");
  if (section_on("race")) bench_race();
  section_done("race");
  if (section_on("retention")) bench_retention();
  section_done("retention");
  if (section_on("growth")) bench_growth();
  section_done("growth");
  if (section_on("attention")) bench_attention();
  section_done("attention");
  if (section_on("memory")) bench_memory();
  section_done("memory");

  if (aHarnessUs[0] >= 0 || aHarnessUs[1] >= 0) printf("\nharness: an empty call costs");
  if (aHarnessUs[0] >= 0) {
    printf(" %.3f us in section 1 (bind, step, reset of SELECT ?1)", aHarnessUs[0]);
  }
  if (aHarnessUs[1] >= 0) {
    printf("%s %.3f us in section 3 (the plain row's values made and bound, step, check)",
           aHarnessUs[0] >= 0 ? " and" : "", aHarnessUs[1]);
  }
  if (aHarnessUs[0] >= 0 || aHarnessUs[1] >= 0) printf("\n");
  printf("\nsummary (small arguments unless named)\n");
  printf("%-48s %9s %10s  %s\n", "target", "measured", "bound", "");
  for (i = 0; i < nTarget; i++) {
    const Target *p = &aTarget[i];
    int bMet = p->bAtLeast ? p->x >= p->target : p->x <= p->target;
    printf("%-48s %8.2fx %s %6.2fx  %s\n", p->zLabel, p->x, p->bAtLeast ? ">=" : "<=", p->target,
           bMet ? "met" : "MISSED");
    if (!bMet) nMissed++;
  }
  if (aHarnessUs[0] >= 0 || aHarnessUs[1] >= 0) {
    double h = aHarnessUs[0] > aHarnessUs[1] ? aHarnessUs[0] : aHarnessUs[1];
    printf("%-48s %7.3fus %s %6.2fus  %s\n", "harness overhead per call (the larger)", h, "< ", 1.0,
           h < 1.0 ? "met" : "MISSED");
    if (h >= 1.0) nMissed++;
  }
  print_load("at end");
  printf("%d target(s) missed; %.0f s in all\n", nMissed, (now_us() - t0) / 1e6);

  for (j = 0; j < N_FIXTURE; j++) {
    sqlite3_free(aFix[j].z);
    sqlite3_free(aFix[j].zCanon);
  }
  sqlite3_close(db);
  rmdir(zTmpDir);
  return bStrict && nMissed ? 3 : 0;
}

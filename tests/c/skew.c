/*
** skew.c: what a lease promises when clocks disagree (docs/leases.md).
**
**   skew [--ext PATH] --db FILE [--lease-ms N]
**
** Two connections to one ledger file, each through its own VFS whose
** xCurrentTimeInt64 is the same true time T plus its own skew: the holder's
** clock runs `a` ms behind, the taker's `b` ms ahead, so they disagree by
** D = a + b. The holder claims a local call (lease_until = its clock +
** lease); the taker claims the same call at every true millisecond around
** the end of the lease. Checks, for D in 0, 1, 250 and 2000 ms:
**
**   never-early   while the holder's clock reads less than lease_until - D,
**                 the taker's claim is in_progress (no take-over)
**   bound         the take-over happens exactly when the taker's clock
**                 reaches lease_until: D early by the holder's clock, not
**                 more (the bound the docs state is the one that holds)
**   renew-catches after the take-over, the holder, whose clock still shows
**                 D ms of lease, renews before sending (idem_renew(L,
**                 token, 0)) and is refused: it learns before acting
**   renew-extends a holder that renews while more than D is left moves
**                 lease_until, and the taker stays out until the new
**                 lease_until - D
**   late-taker    a taker whose clock is behind takes over late, never early
**   external      an external claim is never taken over under skew: the
**                 taker gets unknown, and the holder's late settle records
**                 the outcome
*/
#include "stress.h"
#include "faultvfs.h"

#include <unistd.h>

static const char *zExt = 0, *zDb = 0;
static FaultVfs vHolder, vTaker;
static int nFail = 0;
static sqlite3_int64 leaseMs = 5000;
static const sqlite3_int64 T0 = 1800000000000LL;

static void check(int ok, const char *zName, const char *zFmt, ...)
    __attribute__((format(printf, 3, 4)));
static void check(int ok, const char *zName, const char *zFmt, ...) {
  char z[1024];
  va_list ap;
  va_start(ap, zFmt);
  sqlite3_vsnprintf((int)sizeof(z), z, zFmt, ap);
  va_end(ap);
  if (ok) {
    printf("PASS skew:%s\n", zName);
  } else {
    printf("FAIL skew:%s: %s\n", zName, z);
    nFail++;
  }
}

static int one(sqlite3 *db, const char *zSql, char *zOut, size_t nOut, char *zErr, size_t nErr) {
  sqlite3_stmt *st = 0;
  int rc = sqlite3_prepare_v2(db, zSql, -1, &st, 0);
  zOut[0] = zErr[0] = 0;
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      const char *z = (const char *)sqlite3_column_text(st, 0);
      fmt_str(zOut, nOut, "%s", z ? z : "");
      rc = sqlite3_step(st);
    }
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
  }
  if (rc != SQLITE_OK) fmt_str(zErr, nErr, "%s", sqlite3_errmsg(db));
  sqlite3_finalize(st);
  return rc;
}

static sqlite3 *open_as(const char *zVfs) {
  sqlite3 *db = 0;
  char *zErr = 0;
  if (sqlite3_open_v2(zDb, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, zVfs) != SQLITE_OK ||
      stress_load(db, stress_ext_path(zExt), &zErr) != SQLITE_OK) {
    printf("FAIL skew:setup: open/load through %s: %s\n", zVfs, zErr ? zErr : sqlite3_errmsg(db));
    sqlite3_free(zErr);
    sqlite3_close(db);
    return 0;
  }
  sqlite3_busy_timeout(db, 5000);
  return db;
}

static void set_true_time(sqlite3_int64 t) { vHolder.clockMs = vTaker.clockMs = t; }

/* One run: the holder `a` ms behind, the taker `b` ms ahead (negative: the
** other way). Returns 0 when every check held. */
static void run_skew(sqlite3_int64 a, sqlite3_int64 b, const char *zKey, int bRenew) {
  sqlite3 *h = open_as("holder"), *t = open_as("taker");
  char zOut[1024], zErr[512], zSql[512], zTok[40], zLease[32], zName[80];
  sqlite3_int64 lease, T, firstTake = -1, lastInProgress = -1, D = a + b;
  int okNever = 1;
  if (h == 0 || t == 0) {
    nFail++;
    sqlite3_close(h);
    sqlite3_close(t);
    return;
  }
  vHolder.skewMs = -a;
  vTaker.skewMs = b;
  set_true_time(T0);
  fmt_str(zSql, sizeof(zSql), "SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'local', '%s')",
          zKey);
  one(h, zSql, zOut, sizeof(zOut), zErr, sizeof(zErr));
  if (!json_field(zOut, "token", zTok, sizeof(zTok)) ||
      !json_field(zOut, "lease_until", zLease, sizeof(zLease))) {
    check(0, "setup", "holder claim: %s%s", zOut, zErr);
    goto done;
  }
  lease = strtoll(zLease, 0, 10);
  fmt_str(zName, sizeof(zName), "%s.lease", zKey);
  check(lease == T0 - a + leaseMs, zName,
        "lease_until %lld, expected the holder's clock %lld + %lld", lease, T0 - a, leaseMs);
  if (bRenew) {
    /* the holder renews while more than D is left (its clock at
    ** lease - D - 100): lease_until moves to its clock + lease */
    sqlite3_int64 tr = lease + a - D - 100;
    char zNew[32];
    set_true_time(tr);
    fmt_str(zSql, sizeof(zSql), "SELECT idem_renew('L', '%s')", zTok);
    one(h, zSql, zNew, sizeof(zNew), zErr, sizeof(zErr));
    fmt_str(zName, sizeof(zName), "%s.renew-extends", zKey);
    check(strtoll(zNew, 0, 10) == tr - a + leaseMs, zName, "renewal answered %s%s, expected %lld",
          zNew, zErr, tr - a + leaseMs);
    lease = tr - a + leaseMs;
  }
  /* the taker claims at every true ms from lease - D - 50 (true) on */
  for (T = lease + a - D - 50 - (b < 0 ? 0 : 0); T <= lease + a - D + 50 + (D < 0 ? -D : 0); T++) {
    sqlite3_int64 holderClock = T - a;
    set_true_time(T);
    fmt_str(zSql, sizeof(zSql), "SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'local', '%s')",
            zKey);
    one(t, zSql, zOut, sizeof(zOut), zErr, sizeof(zErr));
    if (strstr(zOut, "\"decision\":\"admitted\"")) {
      firstTake = T;
      if (holderClock < lease - (D > 0 ? D : 0)) okNever = 0;
      break;
    }
    if (!strstr(zOut, "\"decision\":\"in_progress\"")) {
      check(0, "setup", "taker claim at %lld: %s%s", T, zOut, zErr);
      goto done;
    }
    lastInProgress = T;
  }
  fmt_str(zName, sizeof(zName), "%s.never-early", zKey);
  check(okNever && firstTake >= 0, zName,
        "take-over at true %lld, holder clock %lld, lease_until %lld, skew %lld", firstTake,
        firstTake - a, lease, D);
  fmt_str(zName, sizeof(zName), "%s.bound", zKey);
  check(firstTake + b == lease && lastInProgress == firstTake - 1, zName,
        "the take-over came at the taker's clock %lld, lease_until %lld", firstTake + b, lease);
  /* the holder's clock still shows lease left; it renews before sending */
  fmt_str(zSql, sizeof(zSql), "SELECT idem_renew('L', '%s', 0)", zTok);
  one(h, zSql, zOut, sizeof(zOut), zErr, sizeof(zErr));
  fmt_str(zName, sizeof(zName), "%s.renew-catches", zKey);
  check(zErr[0] && strstr(zErr, "do not act on this claim") != 0, zName,
        "the holder's renewal after the take-over answered %s%s (its clock %lld, lease_until %lld)",
        zOut, zErr, firstTake - a, lease);
done:
  sqlite3_close(h);
  sqlite3_close(t);
}

/* An external claim under skew: the taker gets unknown, never admitted,
** and the holder's late settle records the outcome. */
static void run_external(sqlite3_int64 a, sqlite3_int64 b) {
  sqlite3 *h = open_as("holder"), *t = open_as("taker");
  char zOut[1024], zErr[512], zSql[512], zTok[40];
  int sawAdmit = 0, sawUnknown = 0;
  sqlite3_int64 T;
  if (h == 0 || t == 0) {
    nFail++;
    sqlite3_close(h);
    sqlite3_close(t);
    return;
  }
  vHolder.skewMs = -a;
  vTaker.skewMs = b;
  set_true_time(T0);
  one(h, "SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'ext-1')", zOut, sizeof(zOut),
      zErr, sizeof(zErr));
  json_field(zOut, "token", zTok, sizeof(zTok));
  for (T = T0; T <= T0 + leaseMs + a + 100; T += 25) {
    set_true_time(T);
    one(t, "SELECT idem_claim('L', 't', 'c', 'tool', '{}', 'external', 'ext-1')", zOut,
        sizeof(zOut), zErr, sizeof(zErr));
    if (strstr(zOut, "\"admitted\"")) sawAdmit = 1;
    if (strstr(zOut, "\"unknown\"")) sawUnknown = 1;
  }
  fmt_str(zSql, sizeof(zSql), "SELECT idem_settle('L', '%s', 'succeeded', '{\"sent\":1}')", zTok);
  one(h, zSql, zOut, sizeof(zOut), zErr, sizeof(zErr));
  check(!sawAdmit && sawUnknown && strstr(zOut, "\"succeeded\"") != 0, "external",
        "admitted=%d unknown=%d late settle: %s%s", sawAdmit, sawUnknown, zOut, zErr);
  sqlite3_close(h);
  sqlite3_close(t);
}

int main(int argc, char **argv) {
  static const sqlite3_int64 aSkew[][2] = {{0, 0}, {1, 0}, {100, 150}, {1000, 1000}};
  sqlite3 *db;
  char zWhy[512], zSql[256], zKey[32];
  int i;
  for (i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--ext") && i + 1 < argc) zExt = argv[++i];
    else if (!strcmp(argv[i], "--db") && i + 1 < argc) zDb = argv[++i];
    else if (!strcmp(argv[i], "--lease-ms") && i + 1 < argc) leaseMs = strtoll(argv[++i], 0, 10);
    else {
      fprintf(stderr, "usage: skew [--ext PATH] --db FILE [--lease-ms N]\n");
      return 2;
    }
  }
  if (zDb == 0 || leaseMs < 1000 || leaseMs % 1000) {
    fprintf(stderr, "skew: --db FILE is required; --lease-ms is a whole number of seconds in ms\n");
    return 2;
  }
  if (fvfs_register(&vHolder, "holder") != SQLITE_OK ||
      fvfs_register(&vTaker, "taker") != SQLITE_OK) {
    printf("FAIL skew:setup: cannot register the VFS\n");
    return 1;
  }
  unlink(zDb);
  set_true_time(T0);
  db = open_as("holder");
  if (db == 0) return 1;
  fmt_str(zSql, sizeof(zSql), "CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=%lld)",
          leaseMs / 1000);
  if (exec_ok(db, zSql, zWhy, sizeof(zWhy))) {
    printf("FAIL skew:setup: %s\n", zWhy);
    sqlite3_close(db);
    return 1;
  }
  sqlite3_close(db);
  for (i = 0; i < (int)(sizeof(aSkew) / sizeof(aSkew[0])); i++) {
    fmt_str(zKey, sizeof(zKey), "d%lld", aSkew[i][0] + aSkew[i][1]);
    run_skew(aSkew[i][0], aSkew[i][1], zKey, 0);
    fmt_str(zKey, sizeof(zKey), "d%lld-renewed", aSkew[i][0] + aSkew[i][1]);
    run_skew(aSkew[i][0], aSkew[i][1], zKey, 1);
  }
  /* a taker whose clock is behind the holder's: late, never early */
  run_skew(-300, 100, "late-taker", 0);
  run_external(1000, 1000);
  return nFail ? 1 : 0;
}

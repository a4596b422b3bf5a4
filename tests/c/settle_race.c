/*
** settle_race.c: an autocommit idem_settle or idem_resolve whose row
** another writer changes between the call's read and its write answers
** what the sequential order (the other writer first) answers.
**
**   settle_race [--ext PATH] [--mode wal|delete] --db FILE
**
** Two connections to one ledger file. For each case, B opens BEGIN
** IMMEDIATE and changes the row (settles it, resolves it, takes the claim
** over) or writes a guarded row of a local claim (a member the settle's
** snapshot must list), uncommitted. Then A makes its autocommit call: its read sees the
** row as committed before B, and its write meets B's write lock, so SQLite
** calls A's busy handler, which commits B and lets A retry. A's read thus
** precedes B's commit and A's write follows it, every time, without a
** sleep. A's answer (its JSON's status, or its exact error message) must
** be the one it gets when called after B's commit, the handler must have
** run exactly once (the interleaving happened), and the row must hold what
** the sequential order leaves. Both journal modes, or the one --mode names.
** Prints PASS/FAIL lines.
*/
#include "stress.h"

#include <unistd.h>

static int nFail = 0;

static void report(int ok, const char *zName, const char *zWhy) {
  if (ok) printf("PASS settle-race:%s\n", zName);
  else {
    printf("FAIL settle-race:%s: %s\n", zName, zWhy);
    nFail++;
  }
  fflush(stdout);
}

/* A's busy handler: the first call commits B (the other writer). */
typedef struct Other {
  sqlite3 *db;
  int nCall;
  int rcCommit;
} Other;

static int commit_other(void *pArg, int nPrior) {
  Other *o = (Other *)pArg;
  (void)nPrior;
  o->nCall++;
  if (o->nCall > 1) return 0; /* B committed: another wait is a failure */
  o->rcCommit = sqlite3_exec(o->db, "COMMIT", 0, 0, 0);
  return o->rcCommit == SQLITE_OK;
}

/* The first column of zSql's first row on db into zOut, or "error: <msg>". */
static int rcLast = SQLITE_OK; /* the error code of one_value's last error */
static void one_value(sqlite3 *db, const char *zSql, char *zOut, size_t nOut) {
  sqlite3_stmt *pS = 0;
  int rc = sqlite3_prepare_v2(db, zSql, -1, &pS, 0);
  rcLast = SQLITE_OK;
  if (rc == SQLITE_OK) rc = sqlite3_step(pS);
  if (rc == SQLITE_ROW) {
    const unsigned char *z = sqlite3_column_text(pS, 0);
    fmt_str(zOut, nOut, "%s", z ? (const char *)z : "NULL");
  } else {
    fmt_str(zOut, nOut, "error: %s", sqlite3_errmsg(db));
    rcLast = sqlite3_extended_errcode(db);
  }
  sqlite3_finalize(pS);
}

/*
** One case: zSetup runs on A (committed), zOther on B inside BEGIN
** IMMEDIATE (left open), then zCall on A in autocommit with the handler
** that commits B; "@tok" in zCall stands for the token zTokSql selects
** before B runs. zCall's value must be zExpect ("error: <message>" for an
** error); then zState on A must give zStateExpect.
*/
static void one_case(sqlite3 *dbA, sqlite3 *dbB, const char *zName, const char *zSetup,
                     const char *zTokSql, const char *zOther, const char *zCall,
                     const char *zExpect, const char *zState, const char *zStateExpect) {
  char zWhy[1200], zGot[600], zSql[600];
  Other o = {dbB, 0, SQLITE_OK};
  if (zSetup && exec_ok(dbA, zSetup, zWhy, sizeof(zWhy))) {
    report(0, zName, zWhy);
    return;
  }
  if (exec_ok(dbA, zTokSql, zWhy, sizeof(zWhy))) {
    report(0, zName, zWhy);
    return;
  }
  fmt_str(zSql, sizeof(zSql), "BEGIN IMMEDIATE; %s", zOther);
  if (exec_ok(dbB, zSql, zWhy, sizeof(zWhy))) {
    report(0, zName, zWhy);
    sqlite3_exec(dbB, "ROLLBACK", 0, 0, 0);
    return;
  }
  {
    /* A names the token as a literal: a subquery reading the ledger would
    ** hold a read transaction across the write, which SQLite cannot wait
    ** to upgrade */
    const char *zAt = strstr(zCall, "@tok");
    if (zAt) {
      char zTok[40];
      one_value(dbA, zTokSql, zTok, sizeof(zTok));
      fmt_str(zSql, sizeof(zSql), "%.*s'%s'%s", (int)(zAt - zCall), zCall, zTok, zAt + 4);
      zCall = zSql;
    }
  }
  sqlite3_busy_handler(dbA, commit_other, &o);
  one_value(dbA, zCall, zGot, sizeof(zGot));
  sqlite3_busy_timeout(dbA, 5000); /* replaces the handler */
  if (o.nCall != 1 || o.rcCommit != SQLITE_OK) {
    fmt_str(zWhy, sizeof(zWhy),
            "the busy handler ran %d times (commit code %d), not once: the call did not meet "
            "the other writer between its read and its write; it answered %s",
            o.nCall, o.rcCommit, zGot);
    report(0, zName, zWhy);
    if (!sqlite3_get_autocommit(dbB)) sqlite3_exec(dbB, "ROLLBACK", 0, 0, 0);
    return;
  }
  if (strcmp(zGot, zExpect) != 0) {
    fmt_str(zWhy, sizeof(zWhy), "got [%s], want [%s]", zGot, zExpect);
    report(0, zName, zWhy);
    return;
  }
  /* every refusal here is the decision's own (SQLITE_CONSTRAINT) */
  if (strncmp(zExpect, "error: ", 7) == 0 && rcLast != SQLITE_CONSTRAINT) {
    fmt_str(zWhy, sizeof(zWhy), "error code %d, want SQLITE_CONSTRAINT (%d)", rcLast,
            SQLITE_CONSTRAINT);
    report(0, zName, zWhy);
    return;
  }
  one_value(dbA, zState, zGot, sizeof(zGot));
  if (strcmp(zGot, zStateExpect) != 0) {
    fmt_str(zWhy, sizeof(zWhy), "the row after: got [%s], want [%s]", zGot, zStateExpect);
    report(0, zName, zWhy);
    return;
  }
  report(1, zName, 0);
}

static int usage(void) {
  fprintf(stderr, "usage: settle_race [--ext PATH] [--mode wal|delete] --db FILE\n");
  return 2;
}

/* the token of op key zOp's row of ledger zL, as an SQL subquery */
#define TOK(zL, zOp) "(SELECT token FROM " zL " WHERE key = '" zOp "')"
#define CLAIM(zL, zOp, zEffect) \
  "SELECT idem_claim('" zL "', 't', 'c', 'x', '{\"op\":\"" zOp "\"}', '" zEffect "', '" zOp "');"
#define SETTLE(zL, zOp, zStatus, zDetail) \
  "SELECT idem_settle('" zL "', " TOK(zL, zOp) ", '" zStatus "', '" zDetail "')"
/* A's settle: the token as a literal, read before B runs */
#define A_SETTLE(zL, zStatus, zDetail) \
  "SELECT idem_settle('" zL "', @tok, '" zStatus "', '" zDetail "')"
#define RESOLVE(zOp, zStatus, zDetail) \
  "SELECT idem_resolve('L', 't', '" zOp "', '" zStatus "', '" zDetail "')"
#define STATUS(zCall) "SELECT json_extract((" zCall "), '$.status')"
/* what the row holds after the case */
#define ROW(zL, zOp)                                                                   \
  "SELECT status || ' ' || attempt || ' ' || coalesce(result, error, 'null') FROM " zL \
  "_rows"                                                                              \
  " WHERE key = '" zOp "'"

int main(int argc, char **argv) {
  const char *zExt = 0, *zBase = 0, *zMode = 0;
  static const char *azMode[] = {"wal", "delete"};
  int i, m;
  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--ext") == 0) zExt = argv[i + 1];
    else if (strcmp(argv[i], "--db") == 0) zBase = argv[i + 1];
    else if (strcmp(argv[i], "--mode") == 0) zMode = argv[i + 1];
    else return usage();
  }
  if (i != argc || zBase == 0) return usage();
  if (zMode && strcmp(zMode, "wal") != 0 && strcmp(zMode, "delete") != 0) return usage();
  zExt = stress_ext_path(zExt);
  for (m = 0; m < 2; m++) {
    char zDb[512], zWhy[400], zSetup[300], zName[120];
    sqlite3 *dbA = 0, *dbB = 0;
    if (zMode && strcmp(zMode, azMode[m]) != 0) continue;
    fmt_str(zDb, sizeof(zDb), "%s-%s", zBase, azMode[m]);
    unlink(zDb);
    fmt_str(zSetup, sizeof(zSetup),
            "PRAGMA journal_mode=%s;"
            " CREATE VIRTUAL TABLE L USING idempotency;"
            " CREATE VIRTUAL TABLE Z USING idempotency(lease_seconds=0);",
            azMode[m]);
    dbA = stress_open(zDb, zExt, 5000, zWhy, sizeof(zWhy));
    if (dbA && exec_ok(dbA, zSetup, zWhy, sizeof(zWhy)) == SQLITE_OK) {
      dbB = stress_open(zDb, zExt, 5000, zWhy, sizeof(zWhy));
    }
    if (dbB == 0) {
      fmt_str(zName, sizeof(zName), "%s:setup", azMode[m]);
      report(0, zName, zWhy);
      sqlite3_close(dbA);
      continue;
    }
#define CASE(zN, zSetupSql, zTokSql, zOther, zCall, zExpect, zState, zStateExpect) \
  fmt_str(zName, sizeof(zName), "%s:%s", azMode[m], zN);                           \
  one_case(dbA, dbB, zName, zSetupSql, zTokSql, zOther, zCall, zExpect, zState, zStateExpect)

    /* idem_settle: the same token settled by another process first */
    CASE("settle-after-same-outcome", CLAIM("L", "s1", "external"), "SELECT " TOK("L", "s1"),
         SETTLE("L", "s1", "succeeded", "{\"by\":\"b\"}"),
         STATUS(A_SETTLE("L", "succeeded", "{\"by\":\"a\"}")),
         "error: idem_settle: illegal transition succeeded -> succeeded for key \"s1\"",
         ROW("L", "s1"), "succeeded 1 {\"by\":\"b\"}");
    CASE("settle-after-other-outcome", CLAIM("L", "s2", "external"), "SELECT " TOK("L", "s2"),
         SETTLE("L", "s2", "failed", "{\"by\":\"b\"}"),
         STATUS(A_SETTLE("L", "succeeded", "{\"by\":\"a\"}")),
         "error: idem_settle: illegal transition failed -> succeeded for key \"s2\"",
         ROW("L", "s2"), "failed 1 {\"by\":\"b\"}");
    /* settled unknown first: the holder may still record the outcome */
    CASE("settle-after-unknown", CLAIM("L", "s3", "external"), "SELECT " TOK("L", "s3"),
         SETTLE("L", "s3", "unknown", "{\"by\":\"b\"}"),
         STATUS(A_SETTLE("L", "succeeded", "{\"by\":\"a\"}")), "succeeded", ROW("L", "s3"),
         "succeeded 1 {\"by\":\"a\"}");
    /* the holder's late settle meets the reconciler's resolve */
    CASE("settle-after-resolve",
         CLAIM("L", "s4", "external") SETTLE("L", "s4", "unknown", "{}") ";",
         "SELECT " TOK("L", "s4"), RESOLVE("s4", "released", "{\"sent\":false}"),
         STATUS(A_SETTLE("L", "succeeded", "{\"by\":\"a\"}")),
         "error: idem_settle: illegal transition released -> succeeded for key \"s4\"",
         ROW("L", "s4"), "released 1 {\"sent\":false}");
    /* the claim's lease ran out (lease_seconds=0) and another took it over */
    {
      char zTok[40], zExpect[300];
      if (exec_ok(dbA, CLAIM("Z", "s5", "local"), zWhy, sizeof(zWhy))) {
        fmt_str(zName, sizeof(zName), "%s:settle-after-takeover", azMode[m]);
        report(0, zName, zWhy);
      } else {
        one_value(dbA, "SELECT " TOK("Z", "s5"), zTok, sizeof(zTok));
        fmt_str(zExpect, sizeof(zExpect),
                "error: idem_settle: no claim of ledger Z holds token \"%s\" (a wrong token, "
                "or a claim that was taken over)",
                zTok);
        CASE("settle-after-takeover", 0, "SELECT " TOK("Z", "s5"), CLAIM("Z", "s5", "local"),
             STATUS(A_SETTLE("Z", "succeeded", "{}")), zExpect, ROW("Z", "s5"), "claimed 2 null");
      }
    }

    /* a local claim's member committed by another connection between the
    ** settle's read and its write is in the snapshot the settle stores
    ** (the members are read under the write lock), as it is when the
    ** settle comes after that commit */
    CASE("settle-local-member-meanwhile",
         "CREATE TABLE g(id INTEGER PRIMARY KEY, tenant, k, tok);"
         " SELECT idem_guard('L', 'g', 'k', 'tenant', 'tok');"
         " " CLAIM("L", "m1", "local") " INSERT INTO g(tenant, k, tok) VALUES ('t', 'm1', " TOK(
             "L", "m1") ");",
         "SELECT " TOK("L", "m1"),
         "INSERT INTO g(tenant, k, tok) VALUES ('t', 'm1', " TOK("L", "m1") ")",
         "SELECT json_extract((" A_SETTLE("L", "succeeded", "{}") "), '$.members')",
         "[{\"table\":\"g\",\"rowid\":1},{\"table\":\"g\",\"rowid\":2}]",
         "SELECT members FROM L_rows WHERE key = 'm1'",
         "[{\"table\":\"g\",\"rowid\":1},{\"table\":\"g\",\"rowid\":2}]");

    /* idem_resolve: resolved by another process first */
    CASE("resolve-after-same-outcome",
         CLAIM("L", "r1", "external") SETTLE("L", "r1", "unknown", "{}") ";", "SELECT 1",
         RESOLVE("r1", "succeeded", "{\"by\":\"b\"}"),
         STATUS(RESOLVE("r1", "succeeded", "{\"by\":\"a\"}")),
         "error: idem_resolve: illegal transition succeeded -> succeeded for key \"r1\"",
         ROW("L", "r1"), "succeeded 1 {\"by\":\"b\"}");
    CASE("resolve-after-other-outcome",
         CLAIM("L", "r2", "external") SETTLE("L", "r2", "unknown", "{}") ";", "SELECT 1",
         RESOLVE("r2", "failed", "{\"by\":\"b\"}"),
         STATUS(RESOLVE("r2", "succeeded", "{\"by\":\"a\"}")),
         "error: idem_resolve: illegal transition failed -> succeeded for key \"r2\"",
         ROW("L", "r2"), "failed 1 {\"by\":\"b\"}");
    /* the holder recorded the outcome first */
    CASE("resolve-after-holder-settle",
         CLAIM("L", "r3", "external") SETTLE("L", "r3", "unknown", "{}") ";", "SELECT 1",
         SETTLE("L", "r3", "succeeded", "{\"by\":\"b\"}"),
         STATUS(RESOLVE("r3", "released", "{\"sent\":false}")),
         "error: idem_resolve: illegal transition succeeded -> released for key \"r3\"",
         ROW("L", "r3"), "succeeded 1 {\"by\":\"b\"}");
#undef CASE
    sqlite3_close(dbB);
    sqlite3_close(dbA);
  }
  return nFail ? 1 : 0;
}

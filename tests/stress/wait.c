/*
** wait.c: a claim waits for another connection's write transaction.
**
**   wait [--ext PATH] --db FILE
**   wait [--ext PATH] --hold FILE --fd N     (the child, run by the above)
**
** For each case a child process opens the ledger file, takes the write
** lock (BEGIN IMMEDIATE and a write), tells the parent, holds it briefly
** and commits. Meanwhile the parent, with busy_timeout=5000, makes the
** call under test. It must wait (through the busy handler) and succeed
** after the child's commit, never fail at once with "database is locked":
** the first statement of every claim is its write (a read first would
** open a read transaction, which SQLite does not upgrade through the busy
** handler). Cases: local and external claims in autocommit, on a ledger
** without guards and on one with a guard; a local claim inside a deferred
** BEGIN; INSERT INTO the ledger; idem_renew. Both journal modes. Prints
** PASS/FAIL lines; no timing is asserted beyond "succeeded after the other
** connection committed".
*/
#include "stress.h"

#include <sys/wait.h>
#include <unistd.h>

static int nFail = 0;

static void report(int ok, const char *zName, const char *zWhy) {
  if (ok) printf("PASS wait:%s\n", zName);
  else {
    printf("FAIL wait:%s: %s\n", zName, zWhy);
    nFail++;
  }
  fflush(stdout);
}

static const char *zSelf; /* argv[0]: the child is this program run again */

/* The child (--hold): hold the write lock of zDb until ~300 ms after it
** signalled on fd, then commit. Exit status 0 when the commit succeeded.
** It is a program of its own (fork and exec), so it shares nothing with
** the parent's connection. */
static int child_hold(const char *zDb, const char *zExt, int fd) {
  char zWhy[300];
  sqlite3 *db = stress_open(zDb, zExt, 5000, zWhy, sizeof(zWhy));
  int ok =
      db && exec_ok(db, "BEGIN IMMEDIATE; INSERT INTO marker VALUES(1)", zWhy, sizeof(zWhy)) == 0;
  if (!ok) fprintf(stderr, "wait child: %s\n", zWhy);
  if (write(fd, ok ? "1" : "0", 1) != 1) ok = 0;
  close(fd);
  usleep(300000);
  if (ok) ok = exec_ok(db, "COMMIT", zWhy, sizeof(zWhy)) == 0;
  if (!ok) fprintf(stderr, "wait child: %s\n", zWhy);
  sqlite3_close(db);
  return ok ? 0 : 1;
}

/*
** Run zSql on db (the parent) while a child holds the write lock; zSql's
** first column of its first row must equal zExpect. zBefore runs first
** (not timed against the child), zAfter after.
*/
static void one_case(sqlite3 *db, const char *zDb, const char *zExt, const char *zName,
                     const char *zBefore, const char *zSql, const char *zExpect,
                     const char *zAfter) {
  char zWhy[400], c = 0;
  int aFd[2], status = 0, rc;
  pid_t pid;
  sqlite3_stmt *pS = 0;
  if (zBefore && exec_ok(db, zBefore, zWhy, sizeof(zWhy))) {
    report(0, zName, zWhy);
    return;
  }
  if (pipe(aFd) != 0) {
    report(0, zName, "pipe failed");
    return;
  }
  fflush(stdout);
  pid = fork();
  if (pid == 0) {
    char zFd[16];
    close(aFd[0]);
    fmt_str(zFd, sizeof(zFd), "%d", aFd[1]);
    execl(zSelf, zSelf, "--ext", zExt, "--hold", zDb, "--fd", zFd, (char *)0);
    _exit(127);
  }
  close(aFd[1]);
  if (pid < 0 || read(aFd[0], &c, 1) != 1 || c != '1') {
    close(aFd[0]);
    if (pid > 0) waitpid(pid, &status, 0);
    report(0, zName, "the child could not take the write lock");
    return;
  }
  close(aFd[0]);
  /* the child holds the write lock now */
  rc = sqlite3_prepare_v2(db, zSql, -1, &pS, 0);
  if (rc == SQLITE_OK) rc = sqlite3_step(pS);
  if (rc == SQLITE_ROW) {
    const char *z = (const char *)sqlite3_column_text(pS, 0);
    if (z && strcmp(z, zExpect) == 0) rc = SQLITE_OK;
    else fmt_str(zWhy, sizeof(zWhy), "got %s, expected %s", z ? z : "NULL", zExpect);
  } else if (rc == SQLITE_DONE) {
    fmt_str(zWhy, sizeof(zWhy), "no row");
  } else {
    fmt_str(zWhy, sizeof(zWhy), "%s", sqlite3_errmsg(db));
  }
  sqlite3_finalize(pS);
  waitpid(pid, &status, 0);
  if (rc == SQLITE_OK && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    fmt_str(zWhy, sizeof(zWhy), "the child's commit failed");
    rc = SQLITE_ERROR;
  }
  if (rc == SQLITE_OK) {
    /* the child's row is there: the call completed after its commit */
    sqlite3_stmt *pM = 0;
    int n = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM marker", -1, &pM, 0) == SQLITE_OK &&
        sqlite3_step(pM) == SQLITE_ROW) {
      n = sqlite3_column_int(pM, 0);
    }
    sqlite3_finalize(pM);
    if (n < 1) {
      fmt_str(zWhy, sizeof(zWhy), "the child's committed row is missing");
      rc = SQLITE_ERROR;
    }
  }
  if (rc == SQLITE_OK && zAfter && exec_ok(db, zAfter, zWhy, sizeof(zWhy))) rc = SQLITE_ERROR;
  if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", 0, 0, 0); /* after a failure */
  report(rc == SQLITE_OK, zName, zWhy);
}

/* Claim args zArgs on ledger L in autocommit and return the token as a
** quoted SQL literal in zOut (bound into the statement under test as text:
** a subquery reading a table would make the outer statement hold a read
** transaction, the SELECT f(x) FROM t case docs/ledger.md warns about). */
static void claim_token(sqlite3 *db, const char *zArgs, char *zOut, size_t nOut) {
  sqlite3_stmt *pS = 0;
  fmt_str(zOut, nOut, "NULL");
  if (sqlite3_prepare_v2(db, "SELECT json_extract(idem_claim('L', 't', 'c', 'x', ?1), '$.token')",
                         -1, &pS, 0) == SQLITE_OK) {
    sqlite3_bind_text(pS, 1, zArgs, -1, SQLITE_STATIC);
    if (sqlite3_step(pS) == SQLITE_ROW && sqlite3_column_text(pS, 0)) {
      fmt_str(zOut, nOut, "'%s'", (const char *)sqlite3_column_text(pS, 0));
    }
  }
  sqlite3_finalize(pS);
}

static int usage(void) {
  fprintf(stderr, "usage: wait [--ext PATH] --db FILE\n");
  fprintf(stderr, "       wait [--ext PATH] --hold FILE --fd N\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *zExt = 0, *zBase = 0, *zHold = 0;
  static const char *azMode[] = {"wal", "delete"};
  int i, m, fd = -1;
  zSelf = argv[0];
  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--ext") == 0) zExt = argv[i + 1];
    else if (strcmp(argv[i], "--db") == 0) zBase = argv[i + 1];
    else if (strcmp(argv[i], "--hold") == 0) zHold = argv[i + 1];
    else if (strcmp(argv[i], "--fd") == 0) fd = atoi(argv[i + 1]);
    else return usage();
  }
  if (i != argc || (zBase == 0) == (zHold == 0) || (zHold && fd < 0)) return usage();
  zExt = stress_ext_path(zExt);
  if (zHold) return child_hold(zHold, zExt, fd);
  for (m = 0; m < 2; m++) {
    char zDb[512], zWhy[400], zSetup[200], zName[80], zTok[40], zSql[200];
    sqlite3 *db;
    fmt_str(zDb, sizeof(zDb), "%s-%s", zBase, azMode[m]);
    unlink(zDb);
    db = stress_open(zDb, zExt, 5000, zWhy, sizeof(zWhy));
    fmt_str(zSetup, sizeof(zSetup),
            "PRAGMA journal_mode=%s; CREATE TABLE marker(x);"
            " CREATE VIRTUAL TABLE L USING idempotency;"
            " CREATE VIRTUAL TABLE G USING idempotency;"
            " CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key);",
            azMode[m]);
    if (db == 0 || exec_ok(db, zSetup, zWhy, sizeof(zWhy)) ||
        exec_ok(db, "SELECT idem_guard('G', 'orders', 'op_key', 'tenant')", zWhy, sizeof(zWhy))) {
      fmt_str(zName, sizeof(zName), "%s:setup", azMode[m]);
      report(0, zName, zWhy);
      sqlite3_close(db);
      continue;
    }
#define CASE(zN, zBefore, zSql, zExpect, zAfter)         \
  fmt_str(zName, sizeof(zName), "%s:%s", azMode[m], zN); \
  one_case(db, zDb, zExt, zName, zBefore, zSql, zExpect, zAfter)

    CASE("local-no-guards", 0,
         "SELECT json_extract(idem_claim('L', 't', 'c', 'x', '{\"n\":1}', 'local'), '$.decision')",
         "admitted", 0);
    CASE("external-no-guards", 0,
         "SELECT json_extract(idem_claim('L', 't', 'c', 'x', '{\"n\":2}', 'external'), "
         "'$.decision')",
         "admitted", 0);
    CASE("local-guarded", 0,
         "SELECT json_extract(idem_claim('G', 't', 'c', 'x', '{\"n\":3}', 'local'), '$.decision')",
         "admitted", 0);
    CASE("local-in-deferred-begin", "BEGIN",
         "SELECT json_extract(idem_claim('G', 't', 'c', 'x', '{\"n\":4}', 'local'), '$.decision')",
         "admitted", "COMMIT");
    CASE("local-no-guards-in-deferred-begin", "BEGIN",
         "SELECT json_extract(idem_claim('L', 't', 'c', 'x', '{\"n\":5}', 'local'), '$.decision')",
         "admitted", "COMMIT");
    CASE("external-in-deferred-begin", "BEGIN",
         "SELECT json_extract(idem_claim('L', 't', 'c', 'x', '{\"n\":8}'), '$.decision')",
         "admitted", "COMMIT");
    CASE("insert-external", 0,
         "INSERT INTO L(tenant, conversation, tool, args) VALUES "
         "('t', 'c', 'x', '{\"n\":9}') RETURNING 'inserted'",
         "inserted", 0);
    claim_token(db, "{\"n\":10}", zTok, sizeof(zTok));
    fmt_str(zSql, sizeof(zSql),
            "SELECT json_extract(idem_settle('L', %s, 'succeeded', '{}'), '$.status')", zTok);
    CASE("settle-in-deferred-begin", "BEGIN", zSql, "succeeded", "COMMIT");
    CASE("purge-in-deferred-begin", "BEGIN", "SELECT typeof(idem_purge('L', 0))", "integer",
         "COMMIT");
    CASE("insert-local", 0,
         "INSERT INTO G(tenant, conversation, tool, args, effect) VALUES "
         "('t', 'c', 'x', '{\"n\":6}', 'local') RETURNING 'inserted'",
         "inserted", 0);
    claim_token(db, "{\"n\":7}", zTok, sizeof(zTok));
    fmt_str(zSql, sizeof(zSql), "SELECT typeof(idem_renew('L', %s))", zTok);
    CASE("renew", 0, zSql, "integer", 0);
    claim_token(db, "{\"n\":11}", zTok, sizeof(zTok));
    fmt_str(zSql, sizeof(zSql), "SELECT typeof(idem_renew('L', %s))", zTok);
    CASE("renew-in-deferred-begin", "BEGIN", zSql, "integer", "COMMIT");
#undef CASE
    sqlite3_close(db);
  }
  return nFail ? 1 : 0;
}

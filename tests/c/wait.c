/*
** wait.c: every ledger and guard operation waits for another connection's
** write transaction.
**
**   wait [--ext PATH] [--mode wal|delete] --db FILE
**   wait [--ext PATH] --hold FILE --fd N     (the child, run by the above)
**
** For each case a child process opens the ledger file, takes the write
** lock (BEGIN IMMEDIATE and a write), tells the parent, holds it ~300 ms
** and commits. Meanwhile the parent, with busy_timeout=5000, makes the
** call under test. It must wait (through the busy handler) and succeed
** after the child's commit, never fail at once with "database is locked":
** the first statement of every operation that takes a lock is its write (a
** read first would open a read transaction, which SQLite does not upgrade
** through the busy handler).
**
** The call runs on one of three connections: the parent's warm connection
** (its ledgers connected and cached); a fresh connection opened for the
** case, so that resolving the ledger connects it (xConnect) inside the
** caller's transaction; or the warm connection after another connection
** changed the schema and the warm one noticed (its ledgers disconnected,
** so they connect again). Operations: idem_claim (local, external,
** guarded), INSERT INTO the ledger, idem_settle, idem_resolve, idem_renew,
** idem_purge, idem_guard, idem_unguard and idem_upgrade, each in autocommit
** and as the first statement of a deferred BEGIN. One case reads a table
** in the deferred BEGIN first: then SQLite cannot wait, and the claim must
** fail at once with the message that says to use BEGIN IMMEDIATE. Both
** journal modes, or the one --mode names (33-wait.sh runs the two at
** once: the cases mostly wait). Prints PASS/FAIL lines; no timing is asserted beyond
** "succeeded after the other connection committed".
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

/* The child (--hold): hold the write lock of zDb (its write: a marker row
** holding its pid) until ~300 ms after it signalled on fd, then commit. Exit status 0 when the commit succeeded.
** It is a program of its own (fork and exec), so it shares nothing with
** the parent's connection. */
static int child_hold(const char *zDb, const char *zExt, int fd) {
  char zWhy[300], zSql[80];
  sqlite3 *db = stress_open(zDb, zExt, 5000, zWhy, sizeof(zWhy));
  int ok;
  fmt_str(zSql, sizeof(zSql), "BEGIN IMMEDIATE; INSERT INTO marker VALUES(%d)", (int)getpid());
  ok = db && exec_ok(db, zSql, zWhy, sizeof(zWhy)) == 0;
  if (!ok) fprintf(stderr, "wait child: %s\n", zWhy);
  if (write(fd, ok ? "1" : "0", 1) != 1) ok = 0;
  close(fd);
  usleep(300000);
  if (ok) ok = exec_ok(db, "COMMIT", zWhy, sizeof(zWhy)) == 0;
  if (!ok) fprintf(stderr, "wait child: %s\n", zWhy);
  sqlite3_close(db);
  return ok ? 0 : 1;
}

/* The connection a case runs on. */
#define CONN_WARM 0   /* the parent's connection: ledgers connected and cached */
#define CONN_FRESH 1  /* opened for the case: the call connects the ledger */
#define CONN_SCHEMA 2 /* the warm one, after another connection changed the schema */

/*
** Run zSql while a child holds the write lock; zSql's first column of its
** first row must equal zExpect, or, when zExpect starts with "error: ",
** zSql must fail with exactly that message. zBefore runs first on the
** case's connection (before the child takes the lock), zAfter after.
*/
static void one_case(sqlite3 *dbWarm, const char *zDb, const char *zExt, const char *zName,
                     int eConn, const char *zBefore, const char *zSql, const char *zExpect,
                     const char *zAfter) {
  static int iDdl = 0;
  char zWhy[600], c = 0;
  int aFd[2], status = 0, rc;
  pid_t pid;
  sqlite3_stmt *pS = 0;
  sqlite3 *db = dbWarm;
  const char *zErrWant = strncmp(zExpect, "error: ", 7) == 0 ? zExpect + 7 : 0;
  if (eConn == CONN_FRESH) {
    db = stress_open(zDb, zExt, 5000, zWhy, sizeof(zWhy));
    if (db == 0) {
      report(0, zName, zWhy);
      return;
    }
  } else if (eConn == CONN_SCHEMA) {
    /* another connection changes the schema; the warm one notices it at
    ** its next statement, which disconnects its ledgers */
    char zDdl[80];
    sqlite3 *dbOther = stress_open(zDb, zExt, 5000, zWhy, sizeof(zWhy));
    fmt_str(zDdl, sizeof(zDdl), "CREATE TABLE ddl_%d(x)", ++iDdl);
    rc = dbOther ? exec_ok(dbOther, zDdl, zWhy, sizeof(zWhy)) : SQLITE_ERROR;
    sqlite3_close(dbOther);
    if (rc == SQLITE_OK) rc = exec_ok(db, "SELECT count(*) FROM marker", zWhy, sizeof(zWhy));
    if (rc) {
      report(0, zName, zWhy);
      return;
    }
  }
  if (zBefore && exec_ok(db, zBefore, zWhy, sizeof(zWhy))) {
    report(0, zName, zWhy);
    if (db != dbWarm) sqlite3_close(db);
    return;
  }
  if (pipe(aFd) != 0) {
    report(0, zName, "pipe failed");
    if (db != dbWarm) sqlite3_close(db);
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
    if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
    if (db != dbWarm) sqlite3_close(db);
    return;
  }
  close(aFd[0]);
  /* the child holds the write lock now */
  rc = sqlite3_prepare_v2(db, zSql, -1, &pS, 0);
  if (rc == SQLITE_OK) rc = sqlite3_step(pS);
  if (zErrWant) {
    if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
      fmt_str(zWhy, sizeof(zWhy), "succeeded, expected the error %s", zErrWant);
      rc = SQLITE_ERROR;
    } else if (strcmp(sqlite3_errmsg(db), zErrWant) != 0) {
      fmt_str(zWhy, sizeof(zWhy), "error %s, expected %s", sqlite3_errmsg(db), zErrWant);
    } else {
      rc = SQLITE_OK;
    }
  } else if (rc == SQLITE_ROW) {
    const char *z = (const char *)sqlite3_column_text(pS, 0);
    if (z && strcmp(z, zExpect) == 0) rc = SQLITE_OK;
    else fmt_str(zWhy, sizeof(zWhy), "got %s, expected %s", z ? z : "NULL", zExpect);
  } else if (rc == SQLITE_DONE) {
    fmt_str(zWhy, sizeof(zWhy), "no row");
  } else {
    fmt_str(zWhy, sizeof(zWhy), "%s (code %d)", sqlite3_errmsg(db), sqlite3_extended_errcode(db));
  }
  sqlite3_finalize(pS);
  if (rc == SQLITE_OK && !zErrWant) {
    /* the child's row is there before the child is waited for: the call
    ** completed after its commit (it waited) */
    sqlite3_stmt *pM = 0;
    int n = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM marker WHERE x=?1", -1, &pM, 0) == SQLITE_OK) {
      sqlite3_bind_int(pM, 1, (int)pid);
      if (sqlite3_step(pM) == SQLITE_ROW) n = sqlite3_column_int(pM, 0);
    }
    sqlite3_finalize(pM);
    if (n != 1) {
      fmt_str(zWhy, sizeof(zWhy), "it completed before the other connection committed");
      rc = SQLITE_ERROR;
    }
  }
  if (rc != SQLITE_OK && !sqlite3_get_autocommit(db)) {
    /* a refused or failed transaction may hold a read lock: end it so the
    ** child can commit */
    sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
  }
  if (zErrWant && !sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
  waitpid(pid, &status, 0);
  if (rc == SQLITE_OK && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
    fmt_str(zWhy, sizeof(zWhy), "the child's commit failed");
    rc = SQLITE_ERROR;
  }
  if (rc == SQLITE_OK && zAfter && exec_ok(db, zAfter, zWhy, sizeof(zWhy))) rc = SQLITE_ERROR;
  if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", 0, 0, 0); /* after a failure */
  if (db != dbWarm) sqlite3_close(db);
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
  fprintf(stderr, "usage: wait [--ext PATH] [--mode wal|delete] --db FILE\n");
  fprintf(stderr, "       wait [--ext PATH] --hold FILE --fd N\n");
  return 2;
}

/* The message of an operation that meets a read lock its own transaction
** took before it (SQLite cannot wait to upgrade it). */
#define READ_FIRST_ERROR                                                                       \
  "idem_claim: database is locked, and this transaction cannot wait for it: it read database " \
  "main before this call, and SQLite does not upgrade a read transaction to a write through "  \
  "the busy handler; begin it with BEGIN IMMEDIATE"

int main(int argc, char **argv) {
  const char *zExt = 0, *zBase = 0, *zHold = 0, *zMode = 0;
  static const char *azMode[] = {"wal", "delete"};
  int i, m, fd = -1;
  zSelf = argv[0];
  for (i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--ext") == 0) zExt = argv[i + 1];
    else if (strcmp(argv[i], "--db") == 0) zBase = argv[i + 1];
    else if (strcmp(argv[i], "--hold") == 0) zHold = argv[i + 1];
    else if (strcmp(argv[i], "--fd") == 0) fd = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--mode") == 0) zMode = argv[i + 1];
    else return usage();
  }
  if (i != argc || (zBase == 0) == (zHold == 0) || (zHold && fd < 0)) return usage();
  if (zMode && strcmp(zMode, "wal") != 0 && strcmp(zMode, "delete") != 0) return usage();
  zExt = stress_ext_path(zExt);
  if (zHold) return child_hold(zHold, zExt, fd);
  for (m = 0; m < 2; m++) {
    char zDb[512], zWhy[400], zSetup[600], zName[80], zTok[40], zSql[300];
    sqlite3 *db;
    if (zMode && strcmp(zMode, azMode[m]) != 0) continue;
    fmt_str(zDb, sizeof(zDb), "%s-%s", zBase, azMode[m]);
    unlink(zDb);
    db = stress_open(zDb, zExt, 5000, zWhy, sizeof(zWhy));
    fmt_str(zSetup, sizeof(zSetup),
            "PRAGMA journal_mode=%s; CREATE TABLE marker(x);"
            " CREATE VIRTUAL TABLE L USING idempotency;"
            " CREATE VIRTUAL TABLE G USING idempotency;"
            " CREATE TABLE orders(id INTEGER PRIMARY KEY, tenant, op_key);"
            " CREATE TABLE g1(id INTEGER PRIMARY KEY, tenant, op_key);"
            " CREATE TABLE g2(id INTEGER PRIMARY KEY, tenant, op_key);"
            " CREATE TABLE g3(id INTEGER PRIMARY KEY, tenant, op_key);",
            azMode[m]);
    if (db == 0 || exec_ok(db, zSetup, zWhy, sizeof(zWhy)) ||
        exec_ok(db, "SELECT idem_guard('G', 'orders', 'op_key', 'tenant')", zWhy, sizeof(zWhy))) {
      fmt_str(zName, sizeof(zName), "%s:setup", azMode[m]);
      report(0, zName, zWhy);
      sqlite3_close(db);
      continue;
    }
#define CASE(zN, eConn, zBefore, zSql, zExpect, zAfter)  \
  fmt_str(zName, sizeof(zName), "%s:%s", azMode[m], zN); \
  one_case(db, zDb, zExt, zName, eConn, zBefore, zSql, zExpect, zAfter)
#define CLAIM(zL, n, zEffect)                                                           \
  "SELECT json_extract(idem_claim('" zL "', 't', 'c', 'x', '{\"n\":" #n "}', '" zEffect \
  "'), "                                                                                \
  "'$.decision')"
#define INSERT(zL, n, zEffect)                                         \
  "INSERT INTO " zL                                                    \
  "(tenant, conversation, tool, args, effect) VALUES ('t', 'c', 'x', " \
  "'{\"n\":" #n "}', '" zEffect "') RETURNING 'inserted'"

    /* the warm connection: its ledgers are connected and cached */
    CASE("local-no-guards", CONN_WARM, 0, CLAIM("L", 1, "local"), "admitted", 0);
    CASE("external-no-guards", CONN_WARM, 0, CLAIM("L", 2, "external"), "admitted", 0);
    CASE("local-guarded", CONN_WARM, 0, CLAIM("G", 3, "local"), "admitted", 0);
    CASE("local-in-deferred-begin", CONN_WARM, "BEGIN", CLAIM("G", 4, "local"), "admitted",
         "COMMIT");
    CASE("local-no-guards-in-deferred-begin", CONN_WARM, "BEGIN", CLAIM("L", 5, "local"),
         "admitted", "COMMIT");
    CASE("external-in-deferred-begin", CONN_WARM, "BEGIN", CLAIM("L", 8, "external"), "admitted",
         "COMMIT");
    CASE("insert-external", CONN_WARM, 0, INSERT("L", 9, "external"), "inserted", 0);
    claim_token(db, "{\"n\":10}", zTok, sizeof(zTok));
    fmt_str(zSql, sizeof(zSql),
            "SELECT json_extract(idem_settle('L', %s, 'succeeded', '{}'), '$.status')", zTok);
    CASE("settle-in-deferred-begin", CONN_WARM, "BEGIN", zSql, "succeeded", "COMMIT");
    CASE("purge-in-deferred-begin", CONN_WARM, "BEGIN", "SELECT typeof(idem_purge('L', 0))",
         "integer", "COMMIT");
    CASE("insert-local", CONN_WARM, 0, INSERT("G", 6, "local"), "inserted", 0);
    claim_token(db, "{\"n\":7}", zTok, sizeof(zTok));
    fmt_str(zSql, sizeof(zSql), "SELECT typeof(idem_renew('L', %s))", zTok);
    CASE("renew", CONN_WARM, 0, zSql, "integer", 0);
    claim_token(db, "{\"n\":11}", zTok, sizeof(zTok));
    fmt_str(zSql, sizeof(zSql), "SELECT typeof(idem_renew('L', %s))", zTok);
    CASE("renew-in-deferred-begin", CONN_WARM, "BEGIN", zSql, "integer", "COMMIT");
    claim_token(db, "{\"n\":12}", zTok, sizeof(zTok));
    fmt_str(zSql, sizeof(zSql),
            "SELECT json_extract(idem_settle('L', %s, 'succeeded', '{}'), '$.status')", zTok);
    CASE("settle", CONN_WARM, 0, zSql, "succeeded", 0);
    CASE("purge", CONN_WARM, 0, "SELECT typeof(idem_purge('L', 0))", "integer", 0);
    CASE("guard", CONN_WARM, 0, "SELECT idem_guard('G', 'g3', 'op_key', 'tenant')", "1", 0);
    CASE("unguard", CONN_WARM, 0, "SELECT idem_unguard('G', 'g3')", "1", 0);
    CASE("upgrade", CONN_WARM, 0, "SELECT json_extract(idem_upgrade('L'), '$.ledger')", "L", 0);

    /* a fresh connection: the call connects the ledger (reads its
    ** schema and options) inside the caller's transaction */
    CASE("fresh:external-in-deferred-begin", CONN_FRESH, "BEGIN", CLAIM("L", 20, "external"),
         "admitted", "COMMIT");
    CASE("fresh:local-guarded-in-deferred-begin", CONN_FRESH, "BEGIN", CLAIM("G", 21, "local"),
         "admitted", "COMMIT");
    CASE("fresh:local-guarded", CONN_FRESH, 0, CLAIM("G", 22, "local"), "admitted", 0);
    CASE("fresh:insert-external-in-deferred-begin", CONN_FRESH, "BEGIN",
         INSERT("L", 23, "external"), "inserted", "COMMIT");
    CASE("fresh:insert-local-in-deferred-begin", CONN_FRESH, "BEGIN", INSERT("G", 24, "local"),
         "inserted", "COMMIT");
    CASE("fresh:insert-local", CONN_FRESH, 0, INSERT("G", 25, "local"), "inserted", 0);
    claim_token(db, "{\"n\":26}", zTok, sizeof(zTok));
    fmt_str(zSql, sizeof(zSql),
            "SELECT json_extract(idem_settle('L', %s, 'succeeded', '{}'), '$.status')", zTok);
    CASE("fresh:settle-in-deferred-begin", CONN_FRESH, "BEGIN", zSql, "succeeded", "COMMIT");
    claim_token(db, "{\"n\":27}", zTok, sizeof(zTok));
    fmt_str(zSql, sizeof(zSql),
            "SELECT json_extract(idem_settle('L', %s, 'succeeded', '{}'), '$.status')", zTok);
    CASE("fresh:settle", CONN_FRESH, 0, zSql, "succeeded", 0);
    claim_token(db, "{\"n\":28}", zTok, sizeof(zTok));
    fmt_str(zSql, sizeof(zSql), "SELECT typeof(idem_renew('L', %s))", zTok);
    CASE("fresh:renew-in-deferred-begin", CONN_FRESH, "BEGIN", zSql, "integer", "COMMIT");
    CASE("fresh:purge-in-deferred-begin", CONN_FRESH, "BEGIN", "SELECT typeof(idem_purge('L', 0))",
         "integer", "COMMIT");
    if (exec_ok(db,
                "SELECT idem_settle('L', json_extract(idem_claim('L', 't', 'c', 'x', '{}', "
                "'external', 'op-r1'), '$.token'), 'unknown', '{}');"
                "SELECT idem_settle('L', json_extract(idem_claim('L', 't', 'c', 'x', '{}', "
                "'external', 'op-r2'), '$.token'), 'unknown', '{}')",
                zWhy, sizeof(zWhy))) {
      fmt_str(zName, sizeof(zName), "%s:resolve-setup", azMode[m]);
      report(0, zName, zWhy);
    }
    CASE("fresh:resolve-in-deferred-begin", CONN_FRESH, "BEGIN",
         "SELECT json_extract(idem_resolve('L', 't', 'op-r1', 'succeeded', '{}'), '$.status')",
         "succeeded", "COMMIT");
    CASE("fresh:resolve", CONN_FRESH, 0,
         "SELECT json_extract(idem_resolve('L', 't', 'op-r2', 'succeeded', '{}'), '$.status')",
         "succeeded", 0);
    CASE("fresh:guard-in-deferred-begin", CONN_FRESH, "BEGIN",
         "SELECT idem_guard('G', 'g1', 'op_key', 'tenant')", "1", "COMMIT");
    CASE("fresh:unguard-in-deferred-begin", CONN_FRESH, "BEGIN", "SELECT idem_unguard('G', 'g1')",
         "1", "COMMIT");
    CASE("fresh:guard", CONN_FRESH, 0, "SELECT idem_guard('G', 'g2', 'op_key', 'tenant')", "1", 0);
    CASE("fresh:unguard", CONN_FRESH, 0, "SELECT idem_unguard('G', 'g2')", "1", 0);
    CASE("fresh:upgrade-in-deferred-begin", CONN_FRESH, "BEGIN",
         "SELECT json_extract(idem_upgrade('G'), '$.ledger')", "G", "COMMIT");
    CASE("fresh:upgrade", CONN_FRESH, 0, "SELECT json_extract(idem_upgrade('G'), '$.ledger')", "G",
         0);
    /* a read of the application's own first: SQLite cannot wait */
    CASE("fresh:read-first-in-deferred-begin", CONN_FRESH, "BEGIN; SELECT count(*) FROM marker",
         CLAIM("L", 29, "external"), "error: " READ_FIRST_ERROR, 0);

    /* the warm connection after another one changed the schema */
    CASE("schema-changed:claim-in-deferred-begin", CONN_SCHEMA, "BEGIN", CLAIM("L", 30, "external"),
         "admitted", "COMMIT");
    CASE("schema-changed:insert-local-in-deferred-begin", CONN_SCHEMA, "BEGIN",
         INSERT("G", 31, "local"), "inserted", "COMMIT");
    claim_token(db, "{\"n\":32}", zTok, sizeof(zTok));
    fmt_str(zSql, sizeof(zSql),
            "SELECT json_extract(idem_settle('L', %s, 'succeeded', '{}'), '$.status')", zTok);
    CASE("schema-changed:settle-in-deferred-begin", CONN_SCHEMA, "BEGIN", zSql, "succeeded",
         "COMMIT");
#undef CASE
#undef CLAIM
#undef INSERT
    sqlite3_close(db);
  }
  return nFail ? 1 : 0;
}

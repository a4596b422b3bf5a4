/*
** minver_test.c: the refusal on a too old SQLite.
**
** Linked with ext/idempotency.c compiled with -DSQLITE_CORE and the
** test-only -DIDEM_MIN_SQLITE_VERSION_NUMBER=9999999, so that the SQLite
** it runs on (any real one) is "too old". Checks, printed as
** "PASS minver:<check>" / "FAIL minver:<check>: <why>":
**
**   direct     sqlite3_idempotency_init returns SQLITE_ERROR with exactly
**              "idempotency: SQLite <sqlite3_libversion()> is too old;
**              9.999.999 or newer is needed"
**   nothing    after the refusal no idem_ function and no module is registered
**   auto       registered with sqlite3_auto_extension, sqlite3_open fails
**              and its message carries the same text
**
** Exit status 1 when a check failed.
*/
#include <sqlite3.h>
#include "idempotency.h"

#include <stdio.h>
#include <string.h>

static int nFail = 0;

static void check(const char *zName, int ok, const char *zWhy) {
  if (ok) {
    printf("PASS minver:%s\n", zName);
  } else {
    nFail++;
    printf("FAIL minver:%s: %s\n", zName, zWhy ? zWhy : "(no detail)");
  }
}

static int count_of(sqlite3 *db, const char *zSql) {
  sqlite3_stmt *pStmt = 0;
  int n = -1;
  if (sqlite3_prepare_v2(db, zSql, -1, &pStmt, 0) == SQLITE_OK &&
      sqlite3_step(pStmt) == SQLITE_ROW) {
    n = sqlite3_column_int(pStmt, 0);
  }
  sqlite3_finalize(pStmt);
  return n;
}

int main(void) {
  sqlite3 *db = 0;
  char *zErr = 0, *zWant, *zWhy;
  int rc;

  zWant = sqlite3_mprintf("idempotency: SQLite %s is too old; 9.999.999 or newer is needed",
                          sqlite3_libversion());
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) {
    check("open", 0, sqlite3_errmsg(db));
    return 1;
  }
  rc = sqlite3_idempotency_init(db, &zErr, 0);
  zWhy = sqlite3_mprintf("rc=%d, message %s; want rc=%d, message %s", rc, zErr ? zErr : "NULL",
                         SQLITE_ERROR, zWant);
  check("direct", rc == SQLITE_ERROR && zErr && strcmp(zErr, zWant) == 0, zWhy);
  sqlite3_free(zWhy);
  sqlite3_free(zErr);
  check("nothing-registered",
        count_of(db, "SELECT count(*) FROM pragma_function_list WHERE name LIKE 'idem%'") == 0 &&
            count_of(db, "SELECT count(*) FROM pragma_module_list WHERE name='idempotency'") == 0,
        "an idem_ function or the idempotency module is registered after the refusal");
  sqlite3_close(db);

  db = 0;
  sqlite3_auto_extension((void (*)(void))sqlite3_idempotency_init);
  rc = sqlite3_open(":memory:", &db);
  zWhy = sqlite3_mprintf("rc=%d, message %s", rc, db ? sqlite3_errmsg(db) : "NULL");
  check("auto-extension", rc != SQLITE_OK && db && strstr(sqlite3_errmsg(db), zWant) != 0, zWhy);
  sqlite3_free(zWhy);
  sqlite3_close(db);
  sqlite3_reset_auto_extension();
  sqlite3_free(zWant);
  sqlite3_shutdown();
  return nFail ? 1 : 0;
}

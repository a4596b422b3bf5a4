/*
** static_test.c: the extension compiled into a program (the ext/ sources built with
** -DSQLITE_CORE into libidempotency.a), registered with
** sqlite3_auto_extension before any database is opened.
**
**   static_test [LABEL]     prints "PASS LABEL:<check>" / "FAIL LABEL:<check>: <why>"
**
** LABEL defaults to "static". The same file is compiled as C and as C++
** (with -DSTATIC_TEST_HEADER_FIRST, idempotency.h before sqlite3.h), so it
** also shows that the public header mixes with sqlite3.h in both languages.
** Exit status 1 when a check failed.
*/
#ifdef STATIC_TEST_HEADER_FIRST
#include "idempotency.h"
#include <sqlite3.h>
#else
#include <sqlite3.h>
#include "idempotency.h"
#endif

#include <stdio.h>
#include <string.h>

static const char *zLabel = "static";
static int nFail = 0;

static void check(const char *zName, int ok, const char *zWhy) {
  if (ok) {
    printf("PASS %s:%s\n", zLabel, zName);
  } else {
    nFail++;
    printf("FAIL %s:%s: %s\n", zLabel, zName, zWhy ? zWhy : "(no detail)");
  }
}

/* The first column of the first row of zSql as text, sqlite3_malloc'd
** (NULL for an SQL NULL); an error is returned as "error: <message>". */
static char *eval(sqlite3 *db, const char *zSql) {
  sqlite3_stmt *pStmt = 0;
  char *zOut = 0;
  int rc = sqlite3_prepare_v2(db, zSql, -1, &pStmt, 0);
  if (rc == SQLITE_OK) rc = sqlite3_step(pStmt);
  if (rc == SQLITE_ROW) {
    const char *z = (const char *)sqlite3_column_text(pStmt, 0);
    zOut = z ? sqlite3_mprintf("%s", z) : 0;
  } else if (rc != SQLITE_DONE) {
    zOut = sqlite3_mprintf("error: %s", sqlite3_errmsg(db));
  }
  sqlite3_finalize(pStmt);
  return zOut;
}

/* Check that zSql yields exactly zWant. */
static void expect(sqlite3 *db, const char *zName, const char *zSql, const char *zWant) {
  char *zGot = eval(db, zSql);
  char *zWhy = sqlite3_mprintf("got %s, want %s", zGot ? zGot : "NULL", zWant);
  check(zName, zGot != 0 && strcmp(zGot, zWant) == 0, zWhy);
  sqlite3_free(zWhy);
  sqlite3_free(zGot);
}

static sqlite3 *open_memory(const char *zName) {
  sqlite3 *db = 0;
  int rc = sqlite3_open(":memory:", &db);
  check(zName, rc == SQLITE_OK, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  if (rc != SQLITE_OK) {
    sqlite3_close(db);
    return 0;
  }
  return db;
}

int main(int argc, char **argv) {
  sqlite3 *db, *db2;
  char *zToken, *zSql, *zClaim;
  int rc;
  if (argc > 1) zLabel = argv[1];

  /* the cast is the documented way: sqlite3_auto_extension takes void(*)(void) */
  rc = sqlite3_auto_extension((void (*)(void))sqlite3_idempotency_init);
  check("auto-extension", rc == SQLITE_OK, sqlite3_errstr(rc));

  db = open_memory("open");
  if (db == 0) return 1;
  expect(db, "version", "SELECT idem_version()", IDEM_VERSION);
  /* tests/fixtures/keys.json, first vector */
  expect(
      db, "key-vector",
      "SELECT idem_key('acme','conv-1','create_invoice','{\"amount\":100,\"currency\":\"EUR\"}')",
      "idem1-4257073ab9902f2ce55b370ab3000e94");
  expect(db, "key-vector-spelling",
         "SELECT idem_key('acme','conv-1','create_invoice','{ \"currency\" : \"EUR\", \"amount\" : "
         "100.0 }')",
         "idem1-4257073ab9902f2ce55b370ab3000e94");
  expect(db, "canonical", "SELECT idem_canonical('{\"b\":1e30,\"a\":-0}')",
         "{\"a\":0,\"b\":1e+30}");
  expect(db, "check-key-error", "SELECT idem_check_key(NULL, 'tenant')",
         "error: idem_check_key: tenant is missing (NULL)");
  expect(db, "module", "SELECT count(*) FROM pragma_module_list WHERE name='idempotency'", "1");

  /* a ledger: claim, settle, replay */
  {
    char *z = eval(db, "CREATE VIRTUAL TABLE L USING idempotency");
    check("ledger-create", z == 0, z);
    sqlite3_free(z);
  }
  zClaim = eval(db, "SELECT idem_claim('L','acme','conv-1','create_invoice','{\"amount\":100}')");
  zSql = sqlite3_mprintf("SELECT json_extract(%Q,'$.decision')", zClaim ? zClaim : "{}");
  expect(db, "claim-admitted", zSql, "admitted");
  sqlite3_free(zSql);
  zSql = sqlite3_mprintf("SELECT json_extract(%Q,'$.token')", zClaim ? zClaim : "{}");
  zToken = eval(db, zSql);
  sqlite3_free(zSql);
  check("claim-token", zToken != 0 && strlen(zToken) == 32, zClaim);
  expect(db, "in-progress",
         "SELECT json_extract(idem_claim('L','acme','conv-1','create_invoice',"
         "'{\"amount\":100}'),'$.decision')",
         "in_progress");
  zSql = sqlite3_mprintf(
      "SELECT json_extract(idem_settle('L', %Q, 'succeeded', "
      "'{\"invoice\":\"inv-7\"}'), '$.status')",
      zToken ? zToken : "");
  expect(db, "settle", zSql, "succeeded");
  sqlite3_free(zSql);
  sqlite3_free(zToken);
  sqlite3_free(zClaim);

  /* a bare SELECT idem_claim(...), evaluated once, as docs/ledger.md says */
  zClaim = eval(db, "SELECT idem_claim('L','acme','conv-1','create_invoice','{\"amount\":100}')");
  zSql = sqlite3_mprintf(
      "SELECT json_extract(d,'$.decision')||' '||json_extract(d,'$.idempotent')"
      "||' '||json_extract(d,'$.result.invoice') FROM (SELECT %Q AS d)",
      zClaim ? zClaim : "{}");
  expect(db, "replay", zSql, "replay 1 inv-7");
  sqlite3_free(zSql);
  sqlite3_free(zClaim);
  expect(db, "rows", "SELECT count(*)||' '||status FROM L", "1 succeeded");

  /* every new connection gets it; cancelling stops that */
  db2 = open_memory("open-second");
  if (db2) {
    expect(db2, "second-connection", "SELECT idem_version()", IDEM_VERSION);
    sqlite3_close(db2);
  }
  rc = sqlite3_cancel_auto_extension((void (*)(void))sqlite3_idempotency_init);
  check("cancel", rc == 1, "sqlite3_cancel_auto_extension did not find the entry point");
  db2 = open_memory("open-after-cancel");
  if (db2) {
    expect(db2, "after-cancel", "SELECT idem_version()", "error: no such function: idem_version");
    sqlite3_close(db2);
  }
  check("close", sqlite3_close(db) == SQLITE_OK, "an unfinalized statement or blob");
  sqlite3_shutdown();
  return nFail ? 1 : 0;
}

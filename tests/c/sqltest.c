/*
** sqltest.c: runs the SQL test files of sqlite-idempotency.
**
**   sqltest [--ext PATH] FILE.sql...     run each file, print one line per check
**   sqltest [--ext PATH] --eval SQL      print the rows of SQL, tab-separated
**   sqltest --ext-late PATH FILE.sql...   the extension is not loaded when the
**                     connection opens: sqltest_load_again() loads it (after
**                     the file has read the schema, say)
**
** Each file gets a fresh connection: an in-memory database, or a temporary
** file when its first line is "-- sqltest: file". The extension named by
** --ext is loaded through the C API (entry point sqlite3_idempotency_init);
** SQL load_extension() stays disabled. Three helpers are registered:
**
**   errmsg(sql)       runs sql on the same connection (sqlite3_exec) and
**                     returns the error message, or NULL when it succeeded
**   errcode(sql)      the same, returning the extended error code (0 on
**                     success); both are neither deterministic nor innocuous
**   sqltest_clock(ms) sets the test clock to ms (Unix milliseconds) and
**                     returns it; sqltest_clock(NULL) returns to the real
**                     clock. The clock is the xCurrentTimeInt64 of the
**                     default VFS, which the runner replaces with a copy
**                     of the real one that reads this clock: the ledger's
**                     only time source, so leases expire without sleeping
**   sqltest_defensive(on)  turns SQLITE_DBCONFIG_DEFENSIVE on (1) or off
**                     (0) for this connection and returns the new setting
**   sqltest_forge(sql)  runs sql on a second connection to the file, without
**                     the extension but with a function idem_own_write()
**                     of its own that answers 1: a program forging rows
**                     (returns the error message, or NULL)
**   sqltest_load_again()  loads the extension into this connection a second
**                     time (from inside a statement, as SQL load_extension()
**                     does) and returns 1, or fails with the load's error
**   sqltest_risky(x)  returns x; DETERMINISTIC but not INNOCUOUS, so a schema
**                     may use it in CHECK, index and generated-column
**                     expressions, and under PRAGMA trusted_schema=OFF those
**                     are refused: the control that shows a test of the
**                     INNOCUOUS functions could fail
**
** The file is run statement by statement (sqlite3_prepare_v2 with its tail),
** so it may start with PRAGMA encoding='UTF-16le'. Every result row with
** exactly two columns (id, ok) is one check:
**
**   ok is the integer 1     -> "PASS <file>:<id>"
**   anything else           -> "FAIL <file>:<id>: got <value>"
**
** Rows of other shapes are ignored. A statement that fails is
** "FAIL <file>:line N: <message>" and the run goes on with the next
** statement. A check id used twice in one file, and a file with no check,
** are failures too. A line "-- sqltest: requires sqlite >= X.Y.Z" (or "<")
** skips the file on other SQLite versions, printing "SKIP <file>: ...". A
** line "-- sqltest: encodings UTF-8 UTF-16le UTF-16be" runs the file once
** per encoding ("PASS <file>[UTF-16le]:<id>"). A comment line
** "-- sqltest: forge-own-write" before a statement registers, first, a
** function idem_own_write() answering 1 over the extension's (forge_true);
** "-- sqltest: wal-hook SQL" a WAL hook that runs SQL after each commit
** (sqltest_wal_hook() says how its last run went); "-- sqltest:
** commit-hook SQL" the same from a commit hook (sqltest_commit_hook()).
** "-- expect-error: MESSAGE" before a
** statement makes that statement a check that must fail with exactly
** MESSAGE ("PASS <file>:expect-error line N"). The exit status is 1 when
** anything failed, 2 on a usage error.
*/
#include <sqlite3.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int nPass = 0, nFail = 0;

/* ------------------------------------------------------------------ */
/* The test clock: a copy of the default VFS whose clock can be set.    */
/* ------------------------------------------------------------------ */

static sqlite3_vfs clockVfs;
/* The same VFS under a dqlite-like name, for URIs "?vfs=dqlite-sqltest":
** the extension recognises dqlite by its VFS name ("dqlite-<n>"). */
static sqlite3_vfs dqliteNamedVfs;
static sqlite3_vfs *pRealVfs;
static sqlite3_int64 iClockMs; /* 0: the real clock */

static int clock_time64(sqlite3_vfs *pVfs, sqlite3_int64 *pOut) {
  (void)pVfs;
  if (iClockMs == 0) return pRealVfs->xCurrentTimeInt64(pRealVfs, pOut);
  *pOut = iClockMs + (sqlite3_int64)210866760000000LL; /* Julian day ms */
  return SQLITE_OK;
}

static int clock_time(sqlite3_vfs *pVfs, double *pOut) {
  sqlite3_int64 t = 0;
  int rc = clock_time64(pVfs, &t);
  *pOut = (double)t / 86400000.0;
  return rc;
}

/* Make the clock VFS the default. The copy keeps the real VFS's methods
** and pAppData, so files open exactly as before. */
static int clock_install(void) {
  pRealVfs = sqlite3_vfs_find(0);
  if (pRealVfs == 0 || pRealVfs->iVersion < 2 || pRealVfs->xCurrentTimeInt64 == 0) {
    return SQLITE_ERROR;
  }
  clockVfs = *pRealVfs;
  clockVfs.zName = "sqltest-clock";
  clockVfs.pNext = 0;
  clockVfs.xCurrentTime = clock_time;
  clockVfs.xCurrentTimeInt64 = clock_time64;
  dqliteNamedVfs = clockVfs;
  dqliteNamedVfs.zName = "dqlite-sqltest";
  if (sqlite3_vfs_register(&dqliteNamedVfs, 0) != SQLITE_OK) return SQLITE_ERROR;
  return sqlite3_vfs_register(&clockVfs, 1);
}

static void defensive_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  int on = -1;
  (void)argc;
  if (sqlite3_db_config(sqlite3_context_db_handle(ctx), SQLITE_DBCONFIG_DEFENSIVE,
                        sqlite3_value_int(argv[0]), &on) != SQLITE_OK) {
    sqlite3_result_error(ctx, "sqltest_defensive: sqlite3_db_config failed", -1);
    return;
  }
  sqlite3_result_int(ctx, on);
}

/* sqltest_forge(sql): what a program can do that SQL cannot: runs sql on
** a second connection to this connection's database file, without the
** extension, on which a function named idem_own_write() that answers 1 is
** registered (so the ledger's triggers let every write through). Returns
** the error message, or NULL when sql succeeded. Needs a file database. */
/* "-- sqltest: overload NAME,NAME,..." before a statement: each named SQL
** function (a built-in such as max or lower) is registered over on this
** connection, for any number of arguments, by one that records its name
** and fails ("overloaded NAME called"), as an application's function of
** that name would run in its place; sqltest_overloaded() returns the
** names called since it was last asked ('' for none), in call order. */
static char zOverCalled[1024];
static void overload_called(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *zName = (const char *)sqlite3_user_data(ctx);
  char zMsg[160];
  size_t n = strlen(zOverCalled);
  (void)argc;
  (void)argv;
  if (!strstr(zOverCalled, zName) && n + strlen(zName) + 2 < sizeof(zOverCalled)) {
    snprintf(zOverCalled + n, sizeof(zOverCalled) - n, "%s%s", n ? "," : "", zName);
  }
  snprintf(zMsg, sizeof(zMsg), "overloaded %s called", zName);
  sqlite3_result_error(ctx, zMsg, -1);
}
static void overloaded_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  sqlite3_result_text(ctx, zOverCalled, -1, SQLITE_TRANSIENT);
  zOverCalled[0] = 0;
}
static char zOverNames[1024];
static void overload_all(sqlite3 *db, const char *zList, size_t nList) {
  char *z;
  snprintf(zOverNames, sizeof(zOverNames), "%.*s", (int)nList, zList);
  for (z = strtok(zOverNames, ","); z; z = strtok(0, ",")) {
    sqlite3_create_function(db, z, -1, SQLITE_UTF8, z, overload_called, 0, 0);
  }
}

static void forge_true(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  sqlite3_result_int(ctx, 1);
}
static void forge_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *zFile = sqlite3_db_filename(sqlite3_context_db_handle(ctx), "main");
  const char *zSql = (const char *)sqlite3_value_text(argv[0]);
  sqlite3 *pOther = 0;
  char *zErr = 0;
  (void)argc;
  if (zFile == 0 || zFile[0] == 0 || zSql == 0) {
    sqlite3_result_error(ctx, "sqltest_forge: needs SQL and a file database (-- sqltest: file)",
                         -1);
    return;
  }
  if (sqlite3_open_v2(zFile, &pOther, SQLITE_OPEN_READWRITE, 0) != SQLITE_OK ||
      sqlite3_create_function(pOther, "idem_own_write", 0, SQLITE_UTF8 | SQLITE_INNOCUOUS, 0,
                              forge_true, 0, 0) != SQLITE_OK) {
    sqlite3_result_error(ctx, pOther ? sqlite3_errmsg(pOther) : "sqltest_forge: out of memory", -1);
    sqlite3_close(pOther);
    return;
  }
  sqlite3_busy_timeout(pOther, 5000);
  if (sqlite3_exec(pOther, zSql, 0, 0, &zErr) != SQLITE_OK) {
    sqlite3_result_text(ctx, zErr ? zErr : sqlite3_errmsg(pOther), -1, SQLITE_TRANSIENT);
  } else {
    sqlite3_result_null(ctx);
  }
  sqlite3_free(zErr);
  sqlite3_close(pOther);
}

/* "-- sqltest: wal-hook SQL" (to the end of its line): a WAL hook that runs
** SQL on the connection after each commit, as an application's hook could;
** sqltest_wal_hook() returns what its last run said (NULL: it succeeded;
** 'not run': no commit since). */
static char zWalSql[512], zWalResult[512] = "not run";
static int bInWalHook = 0;
static int wal_hook(void *pArg, sqlite3 *db, const char *zDb, int nPage) {
  char *zErr = 0;
  (void)pArg;
  (void)zDb;
  (void)nPage;
  if (bInWalHook || zWalSql[0] == 0) return SQLITE_OK;
  bInWalHook = 1;
  if (sqlite3_exec(db, zWalSql, 0, 0, &zErr) != SQLITE_OK) {
    snprintf(zWalResult, sizeof(zWalResult), "%s", zErr ? zErr : sqlite3_errmsg(db));
  } else {
    zWalResult[0] = 0;
  }
  sqlite3_free(zErr);
  bInWalHook = 0;
  return SQLITE_OK;
}
static void wal_hook_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  if (zWalResult[0] == 0) sqlite3_result_null(ctx);
  else sqlite3_result_text(ctx, zWalResult, -1, SQLITE_TRANSIENT);
  snprintf(zWalResult, sizeof(zWalResult), "not run");
}

/* "-- sqltest: commit-hook SQL": the same from a commit hook, which runs
** inside the commit (SQLite's contract asks a commit hook not to change the
** connection; an application's may all the same); sqltest_commit_hook()
** returns what its last run said. The hook lets the commit go on. */
static char zCommitSql[512], zCommitResult[512] = "not run";
static int bInCommitHook = 0;
static int commit_hook(void *pArg) {
  sqlite3 *db = (sqlite3 *)pArg;
  char *zErr = 0;
  if (bInCommitHook || zCommitSql[0] == 0) return 0;
  bInCommitHook = 1;
  if (sqlite3_exec(db, zCommitSql, 0, 0, &zErr) != SQLITE_OK) {
    snprintf(zCommitResult, sizeof(zCommitResult), "%s", zErr ? zErr : sqlite3_errmsg(db));
  } else {
    zCommitResult[0] = 0;
  }
  sqlite3_free(zErr);
  bInCommitHook = 0;
  return 0;
}
static void commit_hook_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  if (zCommitResult[0] == 0) sqlite3_result_null(ctx);
  else sqlite3_result_text(ctx, zCommitResult, -1, SQLITE_TRANSIENT);
  snprintf(zCommitResult, sizeof(zCommitResult), "not run");
}

/* sqltest_load_again(): loads the extension under test into this
** connection a second time, as SQL load_extension() would (from inside a
** statement); returns 1, or the error */
static const char *zLoadedExt = 0;
static void load_again_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  char *zErr = 0;
  int rc;
  (void)argc;
  (void)argv;
  if (zLoadedExt == 0) {
    sqlite3_result_error(ctx, "sqltest_load_again: no extension was named (--ext or --ext-late)",
                         -1);
    return;
  }
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 1, (int *)0);
  rc = sqlite3_load_extension(db, zLoadedExt, "sqlite3_idempotency_init", &zErr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, (int *)0);
  if (rc != SQLITE_OK) {
    sqlite3_result_error(ctx, zErr ? zErr : sqlite3_errstr(rc), -1);
  } else {
    sqlite3_result_int(ctx, 1);
  }
  sqlite3_free(zErr);
}

static void clock_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
    iClockMs = 0;
    sqlite3_result_null(ctx);
    return;
  }
  iClockMs = sqlite3_value_int64(argv[0]);
  sqlite3_result_int64(ctx, iClockMs);
}

/* ------------------------------------------------------------------ */
/* Helper SQL functions                                                */
/* ------------------------------------------------------------------ */

/* Run the SQL text argv[0] on this connection; returns the sqlite3_exec
** code and leaves the message (sqlite3_malloc'd, or NULL) in *pzErr. */
static int run_nested(sqlite3_context *ctx, sqlite3_value **argv, char **pzErr) {
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  const char *zSql = (const char *)sqlite3_value_text(argv[0]);
  int rc;
  *pzErr = 0;
  if (zSql == 0) {
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
      sqlite3_result_error(ctx, "errmsg/errcode: the SQL argument is NULL", -1);
    } else {
      sqlite3_result_error_nomem(ctx);
    }
    return -1;
  }
  rc = sqlite3_exec(db, zSql, 0, 0, pzErr);
  if (rc != SQLITE_OK) rc = sqlite3_extended_errcode(db);
  return rc;
}

static void errmsg_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  char *zErr = 0;
  int rc = run_nested(ctx, argv, &zErr);
  (void)argc;
  if (rc > 0) {
    const char *z = zErr ? zErr : sqlite3_errstr(rc);
    sqlite3_result_text(ctx, z, -1, SQLITE_TRANSIENT);
  } else if (rc == 0) {
    sqlite3_result_null(ctx);
  }
  sqlite3_free(zErr);
}

static void risky_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  sqlite3_result_value(ctx, argv[0]);
}

static void errcode_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  char *zErr = 0;
  int rc = run_nested(ctx, argv, &zErr);
  (void)argc;
  if (rc >= 0) sqlite3_result_int(ctx, rc);
  sqlite3_free(zErr);
}

/* ------------------------------------------------------------------ */
/* Output                                                              */
/* ------------------------------------------------------------------ */

/* Print z with control characters (newlines included) shown as '?', so
** that every check stays on one line. */
static void put_clean(const char *z) {
  for (; z && *z; z++) putchar((unsigned char)*z < 0x20 ? '?' : *z);
}

/* Render column i of pStmt as an SQL-ish literal: NULL, 5, 1.5, 'text',
** x'00ff'. Returns sqlite3_malloc'd text or NULL on OOM. */
static char *render_value(sqlite3_stmt *pStmt, int i) {
  switch (sqlite3_column_type(pStmt, i)) {
    case SQLITE_NULL: return sqlite3_mprintf("NULL");
    case SQLITE_INTEGER: return sqlite3_mprintf("%lld", sqlite3_column_int64(pStmt, i));
    case SQLITE_FLOAT: return sqlite3_mprintf("%!.17g", sqlite3_column_double(pStmt, i));
    case SQLITE_TEXT: return sqlite3_mprintf("%Q", (const char *)sqlite3_column_text(pStmt, i));
    default: {
      const unsigned char *a = sqlite3_column_blob(pStmt, i);
      int n = sqlite3_column_bytes(pStmt, i), k;
      sqlite3_str *s = sqlite3_str_new(0);
      sqlite3_str_appendall(s, "x'");
      for (k = 0; k < n && k < 64; k++) sqlite3_str_appendf(s, "%02x", a[k]);
      sqlite3_str_appendall(s, n > 64 ? "...'" : "'");
      return sqlite3_str_finish(s);
    }
  }
}

static void report_fail(const char *zFile, const char *zWhat, const char *zWhy) {
  nFail++;
  fputs("FAIL ", stdout);
  put_clean(zFile);
  putchar(':');
  put_clean(zWhat);
  fputs(": ", stdout);
  put_clean(zWhy);
  putchar('\n');
}

static void report_pass(const char *zFile, const char *zId) {
  nPass++;
  fputs("PASS ", stdout);
  put_clean(zFile);
  putchar(':');
  put_clean(zId);
  putchar('\n');
}

/* ------------------------------------------------------------------ */
/* Check ids seen in one file                                          */
/* ------------------------------------------------------------------ */

typedef struct IdSet IdSet;
struct IdSet {
  char **az;
  int n, nAlloc;
};

/* Add zId; returns 1 if it was new, 0 if seen before, -1 on OOM. */
static int idset_add(IdSet *p, const char *zId) {
  int i;
  for (i = 0; i < p->n; i++) {
    if (strcmp(p->az[i], zId) == 0) return 0;
  }
  if (p->n == p->nAlloc) {
    int nNew = p->nAlloc ? 2 * p->nAlloc : 64;
    char **az = sqlite3_realloc64(p->az, (sqlite3_uint64)nNew * sizeof(char *));
    if (az == 0) return -1;
    p->az = az;
    p->nAlloc = nNew;
  }
  p->az[p->n] = sqlite3_mprintf("%s", zId);
  if (p->az[p->n] == 0) return -1;
  p->n++;
  return 1;
}

static void idset_free(IdSet *p) {
  int i;
  for (i = 0; i < p->n; i++) sqlite3_free(p->az[i]);
  sqlite3_free(p->az);
  memset(p, 0, sizeof(*p));
}

/* ------------------------------------------------------------------ */
/* Connections                                                         */
/* ------------------------------------------------------------------ */

/* Open zPath (":memory:" or a file), load zExt (if any) and register the
** helpers. Returns the handle or NULL after printing why. */
static sqlite3 *open_db(const char *zPath, const char *zExt, const char *zName) {
  sqlite3 *db = 0;
  char *zErr = 0;
  int rc =
      sqlite3_open_v2(zPath, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, 0);
  if (rc != SQLITE_OK) {
    report_fail(zName, "open", db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return 0;
  }
  sqlite3_extended_result_codes(db, 1);
  if (zExt) {
    rc = sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 1, (int *)0);
    if (rc == SQLITE_OK) rc = sqlite3_load_extension(db, zExt, "sqlite3_idempotency_init", &zErr);
    if (rc != SQLITE_OK) {
      report_fail(zName, "load", zErr ? zErr : sqlite3_errmsg(db));
      sqlite3_free(zErr);
      sqlite3_close(db);
      return 0;
    }
    zLoadedExt = zExt;
    /* C API loading only: SQL load_extension() stays off */
    rc = sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, (int *)0);
  }
  if (rc == SQLITE_OK) {
    rc = sqlite3_create_function(db, "errmsg", 1, SQLITE_UTF8, 0, errmsg_func, 0, 0);
  }
  if (rc == SQLITE_OK) {
    rc = sqlite3_create_function(db, "errcode", 1, SQLITE_UTF8, 0, errcode_func, 0, 0);
  }
  if (rc == SQLITE_OK) {
    rc = sqlite3_create_function(db, "sqltest_clock", 1, SQLITE_UTF8, 0, clock_func, 0, 0);
  }
  if (rc == SQLITE_OK) {
    rc = sqlite3_create_function(db, "sqltest_defensive", 1, SQLITE_UTF8, 0, defensive_func, 0, 0);
  }
  if (rc == SQLITE_OK) {
    rc = sqlite3_create_function(db, "sqltest_forge", 1, SQLITE_UTF8, 0, forge_func, 0, 0);
  }
  if (rc == SQLITE_OK) {
    rc = sqlite3_create_function(db, "sqltest_wal_hook", 0, SQLITE_UTF8, 0, wal_hook_func, 0, 0);
  }
  if (rc == SQLITE_OK) {
    rc = sqlite3_create_function(db, "sqltest_commit_hook", 0, SQLITE_UTF8, 0, commit_hook_func, 0, 0);
  }
  if (rc == SQLITE_OK) {
    rc =
        sqlite3_create_function(db, "sqltest_overloaded", 0, SQLITE_UTF8, 0, overloaded_func, 0, 0);
  }
  if (rc == SQLITE_OK) {
    rc =
        sqlite3_create_function(db, "sqltest_load_again", 0, SQLITE_UTF8, 0, load_again_func, 0, 0);
  }
  if (rc == SQLITE_OK) {
    rc = sqlite3_create_function(db, "sqltest_risky", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, 0,
                                 risky_func, 0, 0);
  }
  if (rc != SQLITE_OK) {
    report_fail(zName, "helpers", sqlite3_errmsg(db));
    sqlite3_close(db);
    return 0;
  }
  return db;
}

/* Close db; a failure (an unfinalized statement) is reported. */
static void close_db(sqlite3 *db, const char *zName) {
  if (sqlite3_close(db) != SQLITE_OK) {
    report_fail(zName, "close", sqlite3_errmsg(db));
  }
}

/* ------------------------------------------------------------------ */
/* Running a file                                                      */
/* ------------------------------------------------------------------ */

/* Skip whitespace and SQL comments; returns the first byte of the next
** token (or the terminating NUL). */
static const char *skip_blank(const char *z) {
  for (;;) {
    while (*z == ' ' || *z == '\t' || *z == '\n' || *z == '\r' || *z == '\f') z++;
    if (z[0] == '-' && z[1] == '-') {
      while (*z && *z != '\n') z++;
    } else if (z[0] == '/' && z[1] == '*') {
      const char *e = strstr(z + 2, "*/");
      z = e ? e + 2 : z + strlen(z);
    } else {
      return z;
    }
  }
}

static int line_of(const char *zBase, const char *z) {
  int n = 1;
  for (; zBase < z; zBase++) n += *zBase == '\n';
  return n;
}

/* After a statement that did not prepare, find where the next one starts:
** the end of the shortest prefix that sqlite3_complete() accepts (so a
** CREATE TRIGGER body is skipped whole). Returns NULL when none does. */
static const char *next_statement(const char *z) {
  const char *p = z;
  while ((p = strchr(p, ';')) != 0) {
    size_t n = (size_t)(p - z) + 1;
    char *zPrefix = sqlite3_mprintf("%.*s", (int)n, z);
    int done;
    if (zPrefix == 0) return 0;
    done = sqlite3_complete(zPrefix);
    sqlite3_free(zPrefix);
    if (done) return p + 1;
    p++;
  }
  return 0;
}

/* Read a whole file into sqlite3_malloc'd memory, NUL-terminated. */
static char *read_file(const char *zPath) {
  FILE *f = fopen(zPath, "rb");
  char *z = 0;
  long n;
  if (f == 0) return 0;
  if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
    z = sqlite3_malloc64((sqlite3_uint64)n + 1);
    if (z && fread(z, 1, (size_t)n, f) != (size_t)n) {
      sqlite3_free(z);
      z = 0;
    }
    if (z) z[n] = 0;
  }
  fclose(f);
  return z;
}

/* Step pStmt to the end, reporting each (id, ok) row. Returns the final
** step code. */
static int run_statement(sqlite3_stmt *pStmt, const char *zName, IdSet *pIds) {
  int rc;
  while ((rc = sqlite3_step(pStmt)) == SQLITE_ROW) {
    const char *zId;
    int isNew;
    if (sqlite3_column_count(pStmt) != 2) continue;
    zId = (const char *)sqlite3_column_text(pStmt, 0);
    if (zId == 0) zId = "(null id)";
    isNew = idset_add(pIds, zId);
    if (isNew < 0) return SQLITE_NOMEM;
    if (isNew == 0) {
      report_fail(zName, zId, "this check id is used twice in the file");
    } else if (sqlite3_column_type(pStmt, 1) == SQLITE_INTEGER &&
               sqlite3_column_int64(pStmt, 1) == 1) {
      report_pass(zName, zId);
    } else {
      char *zVal = render_value(pStmt, 1);
      char *zWhy = sqlite3_mprintf("got %s", zVal ? zVal : "(out of memory)");
      report_fail(zName, zId, zWhy ? zWhy : "(out of memory)");
      sqlite3_free(zWhy);
      sqlite3_free(zVal);
    }
  }
  return rc;
}

/* The text after "-- expect-error: " in the comments of z[0..zEnd), up to
** the end of its line, or NULL (sqlite3_malloc). Such a comment makes the
** next statement a check that must fail at the top level (not nested in
** errmsg(): writes nested in a running statement bypass defensive mode)
** with exactly that message. */
static char *expected_error(const char *z, const char *zEnd) {
  static const char zTag[] = "-- expect-error: ";
  const char *p = z, *e;
  while (p < zEnd && (p = strstr(p, zTag)) != 0 && p < zEnd) {
    p += sizeof(zTag) - 1;
    e = strchr(p, '\n');
    if (e == 0 || e > zEnd) e = zEnd;
    return sqlite3_mprintf("%.*s", (int)(e - p), p);
  }
  return 0;
}

/* A statement failed with zGot: a check when an error was expected. */
static void check_error(const char *zName, const char *zWhere, const char *zExpect,
                        const char *zGot) {
  if (zExpect == 0) {
    report_fail(zName, zWhere, zGot);
  } else if (strcmp(zExpect, zGot) == 0) {
    report_pass(zName, zWhere);
  } else {
    char *zWhy = sqlite3_mprintf("expected error \"%s\", got \"%s\"", zExpect, zGot);
    report_fail(zName, zWhere, zWhy ? zWhy : zGot);
    sqlite3_free(zWhy);
  }
}

/* Run the text zSql (owned; freed here) of file zName on a fresh
** connection. */
static void run_text(const char *zName, char *zSql, const char *zExt) {
  char zTmp[512];
  const char *z;
  sqlite3 *db;
  IdSet ids = {0, 0, 0};
  int useFile, nFailBefore = nFail;

  errno = 0;
  zWalSql[0] = 0; /* a WAL hook is one file's (-- sqltest: wal-hook) */
  zCommitSql[0] = 0; /* as is a commit hook (-- sqltest: commit-hook) */
  useFile = strncmp(zSql, "-- sqltest: file", 16) == 0;
  {
    /* "-- sqltest: requires sqlite >= 3.44.0" (or "<"): a file for some
    ** SQLite versions only; on others it is skipped, saying why */
    const char *zReq = strstr(zSql, "-- sqltest: requires sqlite ");
    if (zReq) {
      int bGe = zReq[28] == '>', a = 0, b = 0, c = 0, v, ok;
      sscanf(zReq + 28 + (bGe ? 3 : 2), "%d.%d.%d", &a, &b, &c);
      v = a * 1000000 + b * 1000 + c;
      ok = bGe ? sqlite3_libversion_number() >= v : sqlite3_libversion_number() < v;
      if (!ok) {
        printf("SKIP %s: needs SQLite %s %d.%d.%d; this is %s\n", zName, bGe ? ">=" : "<", a, b, c,
               sqlite3_libversion());
        sqlite3_free(zSql);
        return;
      }
    }
  }
  zTmp[0] = 0;
  if (useFile) {
    const char *zDir = getenv("TMPDIR");
    int fd;
    snprintf(zTmp, sizeof(zTmp), "%s/sqltest-XXXXXX", zDir && *zDir ? zDir : "/tmp");
    fd = mkstemp(zTmp);
    if (fd < 0) {
      report_fail(zName, "tempfile", strerror(errno));
      sqlite3_free(zSql);
      return;
    }
    close(fd);
  }
  db = open_db(useFile ? zTmp : ":memory:", zExt, zName);
  z = zSql;
  while (db) {
    sqlite3_stmt *pStmt = 0;
    const char *zTail = 0, *zGap = z;
    char *zExpect = 0;
    int line, rc;
    char zWhere[48];
    if (*(z = skip_blank(z)) == 0) break;
    zExpect = expected_error(zGap, z);
    line = line_of(zSql, z);
    {
      /* "-- sqltest: forge-own-write" before a statement: a function named
      ** idem_own_write() that answers 1 is registered over the extension's
      ** on this connection first (no statement runs then), as a program
      ** could */
      const char *zF = strstr(zGap, "-- sqltest: forge-own-write");
      const char *zW = strstr(zGap, "-- sqltest: wal-hook ");
      const char *zC = strstr(zGap, "-- sqltest: commit-hook ");
      const char *zO = strstr(zGap, "-- sqltest: overload ");
      if (zO && zO < z) {
        const char *zE = strchr(zO, '\n');
        overload_all(db, zO + 21, (size_t)((zE && zE < z ? zE : z) - (zO + 21)));
      }
      if (zF && zF < z) {
        sqlite3_create_function(db, "idem_own_write", 0, SQLITE_UTF8 | SQLITE_INNOCUOUS, 0,
                                forge_true, 0, 0);
      }
      if (zW && zW < z) {
        const char *zE = strchr(zW, '\n');
        int n = (int)((zE && zE < z ? zE : z) - (zW + 21));
        snprintf(zWalSql, sizeof(zWalSql), "%.*s", n, zW + 21);
        sqlite3_wal_hook(db, wal_hook, 0);
      }
      if (zC && zC < z) {
        const char *zE = strchr(zC, '\n');
        int n = (int)((zE && zE < z ? zE : z) - (zC + 24));
        snprintf(zCommitSql, sizeof(zCommitSql), "%.*s", n, zC + 24);
        sqlite3_commit_hook(db, commit_hook, db);
      }
    }
    rc = sqlite3_prepare_v2(db, z, -1, &pStmt, &zTail);
    snprintf(zWhere, sizeof(zWhere), zExpect ? "expect-error line %d" : "line %d", line);
    if (rc != SQLITE_OK) {
      check_error(zName, zWhere, zExpect, sqlite3_errmsg(db));
      sqlite3_free(zExpect);
      z = next_statement(z);
      if (z == 0) break;
      continue;
    }
    if (pStmt) {
      rc = run_statement(pStmt, zName, &ids);
      if (rc != SQLITE_DONE) check_error(zName, zWhere, zExpect, sqlite3_errmsg(db));
      else if (zExpect)
        report_fail(zName, zWhere, "the statement succeeded; an error was expected");
      sqlite3_finalize(pStmt);
    }
    sqlite3_free(zExpect);
    if (zTail == 0 || zTail == z) break; /* cannot happen; never loop */
    z = zTail;
  }
  if (db) {
    if (ids.n == 0 && nFail == nFailBefore) report_fail(zName, "checks", "the file ran no check");
    close_db(db, zName);
  }
  if (useFile) {
    static const char *azSuffix[] = {"", "-journal", "-wal", "-shm"};
    size_t k;
    for (k = 0; k < sizeof(azSuffix) / sizeof(azSuffix[0]); k++) {
      char *zF = sqlite3_mprintf("%s%s", zTmp, azSuffix[k]);
      if (zF) unlink(zF);
      sqlite3_free(zF);
    }
  }
  idset_free(&ids);
  sqlite3_free(zSql);
}

/*
** Run file zPath. A line "-- sqltest: encodings E1 E2 ..." runs the file
** once per text encoding, each on a fresh database whose first statement
** is PRAGMA encoding (on the first line, so line numbers hold), reported
** as "<file>[E]".
*/
static void run_file(const char *zPath, const char *zExt) {
  static const char zTag[] = "-- sqltest: encodings ";
  const char *zName = strrchr(zPath, '/') ? strrchr(zPath, '/') + 1 : zPath;
  const char *zEnc;
  char *zSql;
  errno = 0;
  zSql = read_file(zPath);
  if (zSql == 0) {
    report_fail(zName, "read", strerror(errno ? errno : ENOMEM));
    return;
  }
  zEnc = strstr(zSql, zTag);
  if (zEnc == 0) {
    run_text(zName, zSql, zExt);
    return;
  }
  zEnc += sizeof(zTag) - 1;
  for (;;) {
    char zOne[32], zLabel[300];
    int n = 0;
    char *zText;
    while (*zEnc == ' ') zEnc++;
    while (zEnc[n] && zEnc[n] != ' ' && zEnc[n] != '\n' && n < (int)sizeof(zOne) - 1) n++;
    if (n == 0) break;
    memcpy(zOne, zEnc, (size_t)n);
    zOne[n] = 0;
    zEnc += n;
    snprintf(zLabel, sizeof(zLabel), "%s[%s]", zName, zOne);
    zText = sqlite3_mprintf("PRAGMA encoding='%q'; %s", zOne, zSql);
    if (zText == 0) {
      report_fail(zLabel, "memory", "out of memory");
      break;
    }
    run_text(zLabel, zText, zExt);
  }
  sqlite3_free(zSql);
}

/* --eval: print every row of zSql, columns separated by tabs (NULL as
** an empty field). Returns 0, or 1 after printing the error to stderr. */
static int run_eval(const char *zSql, const char *zExt) {
  sqlite3 *db = open_db(":memory:", zExt, "eval");
  const char *z = zSql;
  int bad = 0;
  if (db == 0) return 1;
  while (!bad && *(z = skip_blank(z))) {
    sqlite3_stmt *pStmt = 0;
    const char *zTail = 0;
    int rc = sqlite3_prepare_v2(db, z, -1, &pStmt, &zTail);
    if (rc == SQLITE_OK && pStmt) {
      while ((rc = sqlite3_step(pStmt)) == SQLITE_ROW) {
        int i, n = sqlite3_column_count(pStmt);
        for (i = 0; i < n; i++) {
          const char *zV = (const char *)sqlite3_column_text(pStmt, i);
          if (i) putchar('\t');
          fputs(zV ? zV : "", stdout);
        }
        putchar('\n');
      }
      if (rc == SQLITE_DONE) rc = SQLITE_OK;
    }
    if (rc != SQLITE_OK) {
      fprintf(stderr, "sqltest: %s\n", sqlite3_errmsg(db));
      bad = 1;
    }
    sqlite3_finalize(pStmt);
    if (zTail == 0 || zTail == z) break;
    z = zTail;
  }
  if (sqlite3_close(db) != SQLITE_OK) bad = 1;
  return bad;
}

static int usage(void) {
  fprintf(stderr,
          "usage: sqltest [--ext PATH] FILE.sql...\n"
          "       sqltest [--ext PATH] --eval SQL\n"
          "       sqltest --ext-late PATH FILE.sql...\n");
  return 2;
}

int main(int argc, char **argv) {
  const char *zExt = 0;
  int i = 1, nFile = 0;
  if (clock_install() != SQLITE_OK) {
    fprintf(stderr, "sqltest: cannot install the test clock VFS\n");
    return 2;
  }
  if (i + 1 < argc && strcmp(argv[i], "--ext") == 0) {
    zExt = argv[i + 1];
    i += 2;
  } else if (i + 1 < argc && strcmp(argv[i], "--ext-late") == 0) {
    zLoadedExt = argv[i + 1]; /* for sqltest_load_again() only */
    i += 2;
  }
  if (i < argc && strcmp(argv[i], "--eval") == 0) {
    int rc;
    if (i + 2 != argc) return usage();
    rc = run_eval(argv[i + 1], zExt);
    sqlite3_shutdown();
    return rc;
  }
  for (; i < argc; i++) {
    if (argv[i][0] == '-') return usage();
    iClockMs = 0; /* each file starts on the real clock */
    run_file(argv[i], zExt);
    fflush(stdout);
    nFile++;
  }
  if (nFile == 0) return usage();
  sqlite3_shutdown();
  return nFail ? 1 : 0;
}

/*
** testclock.c: a loadable test clock, so that every runner of
** tests/conformance/ (C, Python's sqlite3, Node's better-sqlite3) sets the
** ledger's clock the same way.
**
**   SELECT load_extension('build/testclock');   -- or the driver's loadExtension
**   SELECT testclock_set(1800000000000);        -- Unix ms; returns it
**   SELECT testclock_get();                     -- Unix ms, or NULL: real clock
**
** The ledger reads the time from its file's VFS (xCurrentTimeInt64, the
** source of SQL 'now'); no SQL function of the extension can set it. The
** first load registers "testclock", the FaultVfs of tests/c/faultvfs.h
** that the model, fault and skew tests run on (here with no fault armed:
** only its clock is used), as the new default VFS: a database opened after
** the load (sqlite3_open_v2 with no VFS named, as Python's and Node's
** drivers open files) keeps this clock for as long as it is open. Until
** testclock_set is called, and after testclock_set(NULL), the clock is
** the real one. The clock is one per process.
**
** The entry point answers SQLITE_OK_LOAD_PERMANENTLY: the library must
** stay mapped after the connection that loaded it closes, since the VFS
** (its methods and its struct) lives in it. Later loads only register
** the two functions on their connection.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1
/* after sqlite3ext.h, so that its sqlite3_* calls go through sqlite3_api */
#include "faultvfs.h"

static FaultVfs clockVfs;
static int bRegistered;

/* testclock_set(ms): an INTEGER of Unix ms, or NULL for the real clock. */
static void testclock_set(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  switch (sqlite3_value_type(argv[0])) {
    case SQLITE_NULL:
      clockVfs.clockMs = 0;
      sqlite3_result_null(ctx);
      return;
    case SQLITE_INTEGER:
      if (sqlite3_value_int64(argv[0]) > 0) {
        clockVfs.clockMs = sqlite3_value_int64(argv[0]);
        sqlite3_result_int64(ctx, clockVfs.clockMs);
        return;
      }
      break;
    default: break;
  }
  sqlite3_result_error(
      ctx, "testclock_set: the time must be an INTEGER of Unix ms above 0, or NULL", -1);
}

static void testclock_get(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  if (clockVfs.clockMs != 0) sqlite3_result_int64(ctx, clockVfs.clockMs);
  else sqlite3_result_null(ctx);
}

/* built with -fvisibility=hidden, as the extension is: the entry point is exported */
__attribute__((visibility("default"))) int sqlite3_testclock_init(
    sqlite3 *db, char **pzErr, const sqlite3_api_routines *pApi) {
  int rc;
  SQLITE_EXTENSION_INIT2(pApi);
  if (!bRegistered) {
    /* registered, then registered again as the default (FaultVfs is not) */
    rc = fvfs_register(&clockVfs, "testclock");
    if (rc == SQLITE_OK) rc = sqlite3_vfs_register(&clockVfs.base, 1);
    if (rc != SQLITE_OK) {
      *pzErr = sqlite3_mprintf("testclock: cannot register the VFS (%s)", sqlite3_errstr(rc));
      return rc;
    }
    bRegistered = 1;
  }
  rc = sqlite3_create_function(db, "testclock_set", 1, SQLITE_UTF8, 0, testclock_set, 0, 0);
  if (rc == SQLITE_OK) {
    rc = sqlite3_create_function(db, "testclock_get", 0, SQLITE_UTF8, 0, testclock_get, 0, 0);
  }
  if (rc != SQLITE_OK) {
    *pzErr = sqlite3_mprintf("testclock: cannot register its functions (%s)", sqlite3_errstr(rc));
    return rc;
  }
  return SQLITE_OK_LOAD_PERMANENTLY;
}

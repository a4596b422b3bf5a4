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
** first load registers "testclock", a copy of the default VFS whose clock
** is a number, as the new default: a database opened after the load
** (sqlite3_open_v2 with no VFS named, as Python's and Node's drivers open
** files) keeps this clock for as long as it is open. Until testclock_set
** is called, and after testclock_set(NULL), the clock is the real one. The
** clock is one per process, as tests/c/model.c's FaultVfs is one per run.
**
** The entry point answers SQLITE_OK_LOAD_PERMANENTLY: the library must
** stay mapped after the connection that loaded it closes, since the VFS
** (its methods and this struct) lives in it. Later loads only register
** the two functions on their connection.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1

/* Julian day of the Unix epoch, in ms (what xCurrentTimeInt64 counts from). */
#define TESTCLOCK_EPOCH_JDMS ((sqlite3_int64)210866760000000LL)

static sqlite3_vfs clockVfs;
static sqlite3_vfs *pRealVfs;
static sqlite3_int64 iClockMs;
static int bClockSet;

static int testclock_time64(sqlite3_vfs *pVfs, sqlite3_int64 *pOut) {
  (void)pVfs;
  if (!bClockSet) return pRealVfs->xCurrentTimeInt64(pRealVfs, pOut);
  *pOut = iClockMs + TESTCLOCK_EPOCH_JDMS;
  return SQLITE_OK;
}

static int testclock_time(sqlite3_vfs *pVfs, double *pOut) {
  sqlite3_int64 t = 0;
  int rc = testclock_time64(pVfs, &t);
  *pOut = (double)t / 86400000.0;
  return rc;
}

/* testclock_set(ms): an INTEGER of Unix ms, or NULL for the real clock. */
static void testclock_set(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  switch (sqlite3_value_type(argv[0])) {
    case SQLITE_NULL:
      bClockSet = 0;
      sqlite3_result_null(ctx);
      return;
    case SQLITE_INTEGER:
      if (sqlite3_value_int64(argv[0]) >= 0) {
        iClockMs = sqlite3_value_int64(argv[0]);
        bClockSet = 1;
        sqlite3_result_int64(ctx, iClockMs);
        return;
      }
      break;
    default: break;
  }
  sqlite3_result_error(ctx, "testclock_set: the time must be an INTEGER of Unix ms >= 0, or NULL",
                       -1);
}

static void testclock_get(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  if (bClockSet) sqlite3_result_int64(ctx, iClockMs);
  else sqlite3_result_null(ctx);
}

/* built with -fvisibility=hidden, as the extension is: the entry point is exported */
__attribute__((visibility("default"))) int sqlite3_testclock_init(
    sqlite3 *db, char **pzErr, const sqlite3_api_routines *pApi) {
  int rc;
  SQLITE_EXTENSION_INIT2(pApi);
  if (pRealVfs == 0) {
    sqlite3_vfs *pDefault = sqlite3_vfs_find(0);
    if (pDefault == 0 || pDefault->iVersion < 2 || pDefault->xCurrentTimeInt64 == 0) {
      *pzErr = sqlite3_mprintf("testclock: the default VFS has no xCurrentTimeInt64");
      return SQLITE_ERROR;
    }
    /* the copy keeps the real VFS's methods and pAppData: files open as before */
    clockVfs = *pDefault;
    clockVfs.zName = "testclock";
    clockVfs.pNext = 0;
    clockVfs.xCurrentTime = testclock_time;
    clockVfs.xCurrentTimeInt64 = testclock_time64;
    rc = sqlite3_vfs_register(&clockVfs, 1);
    if (rc != SQLITE_OK) {
      *pzErr = sqlite3_mprintf("testclock: cannot register the VFS (%s)", sqlite3_errstr(rc));
      return rc;
    }
    pRealVfs = pDefault;
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

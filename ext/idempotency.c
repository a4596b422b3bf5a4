/*
** idempotency.c: entry point of sqlite-idempotency.
**
** The only file with SQLITE_EXTENSION_INIT1 and sqlite3_idempotency_init.
** It checks the SQLite version, then registers every SQL function from one
** static table and the "idempotency" virtual-table module, stopping at the
** first failure with a message naming the object that failed.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT1

#include "idem_internal.h"
#include "idempotency.h"

/* Version rule: every SQLite API and SQL feature ext/ uses must exist in
** IDEM_MIN_SQLITE_VERSION_NUMBER, which the init checks at run time, so a
** library too old for any of them never gets past it. Built against a
** newer sqlite3ext.h, a newer routine called on an older library would
** read past the end of its API table: anything newer than the minimum is
** guarded by both SQLITE_VERSION_NUMBER (the headers built against) and
** sqlite3_libversion_number() (the library loaded into), or the minimum
** is raised. Headers older than 3.31.0 lack the flags used below. */
#if SQLITE_VERSION_NUMBER < 3031000
#error "sqlite-idempotency needs the sqlite3.h / sqlite3ext.h of SQLite 3.31.0 or newer"
#endif

/* Pure functions read only their arguments: deterministic and innocuous,
** so they are allowed in CHECK, index and generated-column expressions and
** in schemas under trusted_schema=OFF. */
#define IDEM_PURE (SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS)

/* The functions that read JSON (bUtf16) are registered a second and third
** time for UTF-16 databases (SQLite calls the variant of the database's
** encoding), marked by their user data. A UTF-8 function gets UTF-16 text
** converted by SQLite first, and that conversion merges a lone surrogate
** with the next code unit into one character; the UTF-16 variants look at
** the text before it is converted and refuse lone surrogates
** (keyfuncs.c). */
static char idem_utf16_variant; /* its address is the UTF-16 variants' user data */
static const int aEnc[] = {SQLITE_UTF8, SQLITE_UTF16LE, SQLITE_UTF16BE};

static const struct {
  const char *zName;
  int nArg;
  int flags; /* without the encoding, which aEnc gives */
  void (*xFunc)(sqlite3_context *, int, sqlite3_value **);
  int bUtf16; /* also registered for aEnc[1..2], user data = &idem_utf16_variant */
} aFunc[] = {
    {"idem_version", 0, IDEM_PURE, idem_version_func, 0},
    {"idem_valid_key", 1, IDEM_PURE, idem_valid_key_func, 0},
    {"idem_check_key", 2, IDEM_PURE, idem_check_key_func, 0},
    {"idem_canonical", 1, IDEM_PURE, idem_canonical_func, 1},
    {"idem_fingerprint", 1, IDEM_PURE, idem_fingerprint_func, 1},
    {"idem_key", 4, IDEM_PURE, idem_key_func, 1},
};

/* Register (xFunc set) or remove (xFunc 0) aFunc[i] for encoding aEnc[e]. */
static int idem_func_set(sqlite3 *db, size_t i, size_t e, int bRemove) {
  return sqlite3_create_function(db, aFunc[i].zName, aFunc[i].nArg, aFunc[i].flags | aEnc[e],
                                 e ? &idem_utf16_variant : 0, bRemove ? 0 : aFunc[i].xFunc, 0, 0);
}

/*
** Whether this connection has the extension already (SQL load_extension()
** run again, a binding's load() on a connection that loaded it). Loading
** it again would register the module and the ledger functions anew under
** the ledgers already connected: those would be unknown to the new
** functions, and the old registry freed under them (a crash at close).
** The probe is a prepare of idem_version(); its failure ("no such
** function") is cleared by a prepare that succeeds, so that a caller that
** reads the connection's error code after the init (sqlite3_open after an
** automatic extension) sees none.
*/
static int idem_loaded(sqlite3 *db) {
  sqlite3_stmt *pS = 0;
  int rc = sqlite3_prepare_v2(db, "SELECT idem_version()", -1, &pS, 0);
  sqlite3_finalize(pS);
  if (rc != SQLITE_OK) {
    pS = 0;
    sqlite3_prepare_v2(db, "SELECT 1", -1, &pS, 0);
    sqlite3_finalize(pS);
  }
  return rc == SQLITE_OK;
}

int sqlite3_idempotency_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
  size_t i, e;
  int rc = SQLITE_OK;
  void *pConn = 0; /* the ledger registry, shared with the guard functions */
  SQLITE_EXTENSION_INIT2(pApi);
  if (sqlite3_libversion_number() < IDEM_MIN_SQLITE_VERSION_NUMBER) {
    if (pzErrMsg) {
      *pzErrMsg = sqlite3_mprintf("idempotency: SQLite %s is too old; %d.%d.%d or newer is needed",
                                  sqlite3_libversion(), IDEM_MIN_SQLITE_VERSION_NUMBER / 1000000,
                                  IDEM_MIN_SQLITE_VERSION_NUMBER / 1000 % 1000,
                                  IDEM_MIN_SQLITE_VERSION_NUMBER % 1000);
    }
    return SQLITE_ERROR;
  }
  if (idem_loaded(db)) return SQLITE_OK; /* loaded again: everything is registered */
  for (i = 0; rc == SQLITE_OK && i < sizeof(aFunc) / sizeof(aFunc[0]); i++) {
    for (e = 0; rc == SQLITE_OK && e < (aFunc[i].bUtf16 ? 3u : 1u); e++)
      rc = idem_func_set(db, i, e, 0);
    if (rc != SQLITE_OK && pzErrMsg) {
      *pzErrMsg = sqlite3_mprintf("idempotency: cannot register function %s: %s", aFunc[i].zName,
                                  sqlite3_errstr(rc));
    }
  }
  if (rc == SQLITE_OK) rc = idem_register_ledger(db, &pConn, pzErrMsg);
  if (rc == SQLITE_OK) rc = idem_register_guard(db, pConn, pzErrMsg);
  if (rc != SQLITE_OK) {
    /* SQLite unloads the library after a failed init: leave nothing of it
    ** registered (a function or module pointing into unloaded code) */
    idem_unregister_guard(db);
    idem_unregister_ledger(db);
    for (i = 0; i < sizeof(aFunc) / sizeof(aFunc[0]); i++) {
      for (e = 0; e < (aFunc[i].bUtf16 ? 3u : 1u); e++) idem_func_set(db, i, e, 1);
    }
  }
  return rc;
}

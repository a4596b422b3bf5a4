/*
** idempotency.h: public header of sqlite-idempotency.
**
** A SQLite extension that makes a database refuse duplicated side effects
** from retried tool calls. Load it at run time (".load build/idempotency"
** or sqlite3_load_extension), or compile ext/ with -DSQLITE_CORE into a
** program and register sqlite3_idempotency_init with
** sqlite3_auto_extension().
*/
#ifndef IDEMPOTENCY_H
#define IDEMPOTENCY_H

#define IDEM_VERSION "0.1.0"
#define IDEM_VERSION_NUMBER 1000 /* major*1000000 + minor*1000 + patch */

/* The oldest SQLite the extension loads into: 3.40.0. sqlite_schema is
** 3.33; SQLITE_VTAB_DIRECTONLY (3.31) is enforced for writes made by
** triggers only from 3.40, and the ledger relies on it. On an older library
** sqlite3_idempotency_init refuses with SQLITE_ERROR and "idempotency:
** SQLite X is too old; 3.40.0 or newer is needed". The #ifndef lets a test
** raise it (-D) to see that refusal; do not lower it. */
#ifndef IDEM_MIN_SQLITE_VERSION_NUMBER
#define IDEM_MIN_SQLITE_VERSION_NUMBER 3040000
#endif

#ifndef IDEM_API
#if defined(_WIN32)
#define IDEM_API __declspec(dllexport)
#else
#define IDEM_API __attribute__((visibility("default")))
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

struct sqlite3;
struct sqlite3_api_routines;

/* Entry point: registers every function and the "idempotency" module on
** db. Returns SQLITE_OK, or an error code with *pzErrMsg set (to be freed
** with sqlite3_free) naming the object that could not be registered. */
IDEM_API int sqlite3_idempotency_init(struct sqlite3 *db, char **pzErrMsg,
                                      const struct sqlite3_api_routines *pApi);

#ifdef __cplusplus
}
#endif

#endif /* IDEMPOTENCY_H */

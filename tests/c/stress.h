/*
** stress.h: helpers shared by the race, crash and allocation-failure
** programs in tests/c/ (header-only; each program includes it once).
**
**   stress_open()      open a file database, busy_timeout, load the extension
**   stress_load()      load the extension through the C API
**   json_field()       copy a top-level string/literal member of a JSON object
**   exec_ok()          sqlite3_exec that reports the failure
**
** The extension path comes from the command line or $EXT (exported by make),
** default build/idempotency.so.
*/
#ifndef STRESS_H
#define STRESS_H

#include <sqlite3.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STRESS_ENTRY "sqlite3_idempotency_init"

/* Bounded formatting that always NUL-terminates and truncates silently
** (sqlite3_snprintf: no allocation, safe before sqlite3_initialize). */
#define fmt_str(z, n, ...) sqlite3_snprintf((int)(n), (z), __VA_ARGS__)

/* The extension to load: zArg when given, else $EXT, else the default. */
static inline const char *stress_ext_path(const char *zArg) {
  const char *z = zArg && zArg[0] ? zArg : getenv("EXT");
  return z && z[0] ? z : "build/idempotency.so";
}

/* Load the extension on db. Returns the sqlite3_load_extension code; the
** message (sqlite3_malloc'd, or NULL) goes to *pzErr. */
static inline int stress_load(sqlite3 *db, const char *zExt, char **pzErr) {
  int rc;
  *pzErr = 0;
  rc = sqlite3_enable_load_extension(db, 1);
  if (rc != SQLITE_OK) return rc;
  rc = sqlite3_load_extension(db, zExt, STRESS_ENTRY, pzErr);
  sqlite3_enable_load_extension(db, 0);
  return rc;
}

/* Print a failure message to stderr (the caller prints FAIL lines). */
static inline void stress_warn(const char *zFmt, ...) {
  va_list ap;
  va_start(ap, zFmt);
  vfprintf(stderr, zFmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

/* Open zPath read-write (creating it), set the busy timeout and load the
** extension. Returns NULL after writing why into zWhy[nWhy]. */
static inline sqlite3 *stress_open(const char *zPath, const char *zExt, int msBusy, char *zWhy,
                                   size_t nWhy) {
  sqlite3 *db = 0;
  char *zErr = 0;
  int rc = sqlite3_open_v2(zPath, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, 0);
  if (rc != SQLITE_OK) {
    fmt_str(zWhy, nWhy, "open %s: %s", zPath, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return 0;
  }
  sqlite3_busy_timeout(db, msBusy);
  rc = stress_load(db, zExt, &zErr);
  if (rc != SQLITE_OK) {
    fmt_str(zWhy, nWhy, "load %s: %s", zExt, zErr ? zErr : sqlite3_errstr(rc));
    sqlite3_free(zErr);
    sqlite3_close(db);
    return 0;
  }
  return db;
}

/* sqlite3_exec; on failure writes "<sql>: <message>" into zWhy. */
static inline int exec_ok(sqlite3 *db, const char *zSql, char *zWhy, size_t nWhy) {
  char *zErr = 0;
  int rc = sqlite3_exec(db, zSql, 0, 0, &zErr);
  if (rc != SQLITE_OK) {
    fmt_str(zWhy, nWhy, "%s: %s (code %d)", zSql, zErr ? zErr : sqlite3_errstr(rc),
            sqlite3_extended_errcode(db));
  }
  sqlite3_free(zErr);
  return rc;
}

/*
** Copy the value of top-level member zName of the JSON object zJson into
** zOut[nOut]: a string without its quotes (the ledger's strings need no
** unescaping: keys, tokens, decisions), or the raw text of a literal or
** number. Objects and arrays are copied whole (balanced braces, strings
** skipped). Returns 1 when found. Good enough for the ledger's output,
** which puts each name once at the top level.
*/
static inline int json_field(const char *zJson, const char *zName, char *zOut, size_t nOut) {
  char zPat[80];
  const char *z, *zEnd;
  size_t n;
  if (zJson == 0) return 0;
  fmt_str(zPat, sizeof(zPat), "\"%s\":", zName);
  z = strstr(zJson, zPat);
  if (z == 0) return 0;
  z += strlen(zPat);
  if (*z == '"') {
    z++;
    zEnd = z;
    while (*zEnd && *zEnd != '"') zEnd += (*zEnd == '\\' && zEnd[1]) ? 2 : 1;
  } else if (*z == '{' || *z == '[') {
    int depth = 0, inStr = 0;
    zEnd = z;
    for (; *zEnd; zEnd++) {
      if (inStr) {
        if (*zEnd == '\\' && zEnd[1]) zEnd++;
        else if (*zEnd == '"') inStr = 0;
      } else if (*zEnd == '"') {
        inStr = 1;
      } else if (*zEnd == '{' || *zEnd == '[') {
        depth++;
      } else if (*zEnd == '}' || *zEnd == ']') {
        if (--depth == 0) {
          zEnd++;
          break;
        }
      }
    }
  } else {
    zEnd = z;
    while (*zEnd && *zEnd != ',' && *zEnd != '}') zEnd++;
  }
  n = (size_t)(zEnd - z);
  if (n >= nOut) n = nOut - 1;
  memcpy(zOut, z, n);
  zOut[n] = 0;
  return 1;
}

#ifdef STRESS_CHECKS
/* The check report and the PRNG shared by race.c and crash.c (which define
** STRESS_CHECKS): one line per check, "PASS <zName>:<check>" or
** "FAIL <zName>:<check>: <why>". */
static char zName[64];
static int nFail = 0;

static inline void check(int ok, const char *zCheck, const char *zFmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void check(int ok, const char *zCheck, const char *zFmt, ...) {
  if (ok) {
    printf("PASS %s:%s\n", zName, zCheck);
  } else {
    va_list ap;
    printf("FAIL %s:%s: ", zName, zCheck);
    va_start(ap, zFmt);
    vprintf(zFmt, ap);
    va_end(ap);
    printf("\n");
    nFail++;
  }
  fflush(stdout);
}

/* splitmix64 */
static inline unsigned long long rnd(unsigned long long *s) {
  unsigned long long z = (*s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
#endif /* STRESS_CHECKS */

#endif /* STRESS_H */

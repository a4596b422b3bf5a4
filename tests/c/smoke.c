/* The release library's smoke test, for any machine: load, claim, settle,
 * replay.
 *
 *   smoke LIBSQLITE3 EXTENSION DATABASE
 *
 * LIBSQLITE3 is the SQLite library to dlopen (libsqlite3.so.0 of the
 * machine the program is built for: under qemu-user, an arm64 one), so the
 * program needs no SQLite headers or library to build; EXTENSION the
 * extension's path without suffix, as a user gives it; DATABASE a file to
 * create. Prints one line per step, which tests/suites/63-packages.sh
 * compares with what the x86_64 build prints natively; on an error prints
 * the step and SQLite's message and exits 1. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef struct sqlite3 sqlite3;
typedef struct sqlite3_stmt sqlite3_stmt;

#define SQLITE_OK 0
#define SQLITE_ROW 100
#define SQLITE_DONE 101
#define SQLITE_TRANSIENT ((void (*)(void *)) - 1)

static int (*p_open)(const char *, sqlite3 **);
static int (*p_close)(sqlite3 *);
static int (*p_enable_load_extension)(sqlite3 *, int);
static int (*p_load_extension)(sqlite3 *, const char *, const char *, char **);
static int (*p_exec)(sqlite3 *, const char *, void *, void *, char **);
static int (*p_prepare_v2)(sqlite3 *, const char *, int, sqlite3_stmt **, const char **);
static int (*p_bind_text)(sqlite3_stmt *, int, const char *, int, void (*)(void *));
static int (*p_step)(sqlite3_stmt *);
static const unsigned char *(*p_column_text)(sqlite3_stmt *, int);
static int (*p_column_count)(sqlite3_stmt *);
static int (*p_finalize)(sqlite3_stmt *);
static const char *(*p_errmsg)(sqlite3 *);
static void (*p_free)(void *);

/* One row of SQL with up to two text parameters, its columns joined by
 * spaces into out. 0 on success; on failure prints the step and the error. */
static int row(sqlite3 *db, const char *step, const char *sql, const char *a, const char *b,
               char *out, size_t size) {
  sqlite3_stmt *st = NULL;
  int rc = 1;
  size_t used = 0;
  out[0] = '\0';
  if (p_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) goto done;
  if (a && p_bind_text(st, 1, a, -1, SQLITE_TRANSIENT) != SQLITE_OK) goto done;
  if (b && p_bind_text(st, 2, b, -1, SQLITE_TRANSIENT) != SQLITE_OK) goto done;
  if (p_step(st) != SQLITE_ROW) goto done;
  for (int i = 0; i < p_column_count(st); i++) {
    const unsigned char *t = p_column_text(st, i);
    int n = snprintf(out + used, size - used, "%s%s", i ? " " : "", t ? (const char *)t : "NULL");
    if (n < 0 || (size_t)n >= size - used) {
      fprintf(stderr, "smoke: %s: the answer is longer than %zu bytes\n", step, size);
      rc = 2;
      goto done;
    }
    used += (size_t)n;
  }
  if (p_step(st) != SQLITE_DONE) goto done;
  rc = 0;
done:
  if (rc == 1) fprintf(stderr, "smoke: %s: %s\n", step, p_errmsg(db));
  if (st && p_finalize(st) != SQLITE_OK && rc == 0) {
    fprintf(stderr, "smoke: %s: %s\n", step, p_errmsg(db));
    rc = 1;
  }
  return rc ? 1 : 0;
}

#define SYM(name)                                                       \
  do {                                                                  \
    *(void **)(&p_##name) = dlsym(lib, "sqlite3_" #name);               \
    if (!p_##name) {                                                    \
      fprintf(stderr, "smoke: %s has no sqlite3_%s\n", argv[1], #name); \
      goto done;                                                        \
    }                                                                   \
  } while (0)

int main(int argc, char **argv) {
  static const char args[] = "{\"to\":\"a@b.c\",\"amount\":5}";
  static const char claim[] = "SELECT idem_claim('ledger', 'tenant-a', 'conv-1', 'send_email', ?1)";
  void *lib = NULL;
  sqlite3 *db = NULL;
  char *err = NULL;
  char out[2048], decision[2048], token[64];
  int rc = 1;

  if (argc != 4) {
    fprintf(stderr, "usage: smoke LIBSQLITE3 EXTENSION DATABASE\n");
    return 2;
  }
  lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "smoke: dlopen: %s\n", dlerror());
    return 1;
  }
  SYM(open);
  SYM(close);
  SYM(enable_load_extension);
  SYM(load_extension);
  SYM(exec);
  SYM(prepare_v2);
  SYM(bind_text);
  SYM(step);
  SYM(column_text);
  SYM(column_count);
  SYM(finalize);
  SYM(errmsg);
  SYM(free);

  if (p_open(argv[3], &db) != SQLITE_OK) {
    fprintf(stderr, "smoke: open %s: %s\n", argv[3], db ? p_errmsg(db) : "out of memory");
    goto done;
  }
  if (p_enable_load_extension(db, 1) != SQLITE_OK ||
      p_load_extension(db, argv[2], NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "smoke: load %s: %s\n", argv[2], err ? err : p_errmsg(db));
    goto done;
  }
  if (row(db, "version", "SELECT idem_version()", NULL, NULL, out, sizeof out)) goto done;
  printf("loaded: idem_version() %s\n", out);
  if (p_exec(db, "CREATE VIRTUAL TABLE ledger USING idempotency", NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "smoke: create: %s\n", err ? err : p_errmsg(db));
    goto done;
  }
  if (row(db, "key", "SELECT idem_key('tenant-a', 'conv-1', 'send_email', ?1)", args, NULL, out,
          sizeof out))
    goto done;
  printf("key: %s\n", out);

  /* the first arrival is admitted and holds the token */
  if (row(db, "claim", claim, args, NULL, decision, sizeof decision)) goto done;
  if (row(db, "claim", "SELECT json_extract(?1, '$.decision'), json_extract(?1, '$.attempt')",
          decision, NULL, out, sizeof out))
    goto done;
  printf("claim: %s\n", out);
  if (row(db, "claim", "SELECT json_extract(?1, '$.token')", decision, NULL, token, sizeof token))
    goto done;
  if (row(db, "settle",
          "SELECT json_extract(idem_settle('ledger', ?1, 'succeeded', "
          "'{\"message_id\":\"m-17\"}'), "
          "'$.status')",
          token, NULL, out, sizeof out))
    goto done;
  printf("settle: %s\n", out);

  /* the second arrival (the same call, other spelling) replays the outcome */
  if (row(db, "replay", claim, "{ \"amount\": 5.0, \"to\": \"a@b.c\" }", NULL, decision,
          sizeof decision))
    goto done;
  if (row(db, "replay",
          "SELECT json_extract(?1, '$.decision'), json_extract(?1, '$.idempotent'), "
          "json_extract(?1, '$.result')",
          decision, NULL, out, sizeof out))
    goto done;
  printf("replay: %s\n", out);
  rc = 0;
done:
  if (err) p_free(err);
  if (db && p_close(db) != SQLITE_OK) {
    fprintf(stderr, "smoke: close: %s\n", p_errmsg(db));
    rc = 1;
  }
  if (lib) dlclose(lib);
  return rc;
}

/*
** conformance.c: the C runner of tests/conformance/ (its README.md is the
** format). SQL through the extension: every step is the SQL function a
** caller would run, on a file database opened as the packages open one
** (WAL, synchronous=FULL, busy_timeout 0).
**
**   conformance --ext EXT --clock CLOCK --dir DIR FILE...
**
** EXT is the extension, CLOCK the test clock (tests/c/testclock.c, loaded
** before any database is opened, so every file database runs on it), DIR a
** directory for the databases. Each FILE is a key file ("kind": "keys") or a
** decision sequence ("kind": "sequence"). Prints "PASS conformance.c:FILE"
** per file, or "FAIL conformance.c:FILE: step N (OP): ..." at the first step
** whose answer differs (the field, expected and got); exit 1 on a failure.
**
** The files are read, and answers compared, with SQLite's JSON functions on
** a helper connection that does not load the extension: an expected value
** equals an answer's when both have the same json_tree (path, type, atom),
** so member order does not count and 1.0 (real) is not 1 (integer).
*/
#include "stress.h"

#include <unistd.h>

#define NCONN 2
#define NSAVED 32

static sqlite3 *js; /* the helper: JSON, comparisons, the clock */
static const char *zExt = 0, *zClock = 0, *zDir = 0;
static int nFail = 0;

/* ------------------------------------------------------------------ */
/* JSON through the helper connection                                   */
/* ------------------------------------------------------------------ */

/* A statement on the helper; exits on a prepare error (the runner's bug). */
static sqlite3_stmt *js_prep(const char *zSql) {
  sqlite3_stmt *p = 0;
  if (sqlite3_prepare_v2(js, zSql, -1, &p, 0) != SQLITE_OK) {
    fprintf(stderr, "conformance: %s: %s\n", zSql, sqlite3_errmsg(js));
    exit(2);
  }
  return p;
}

/* The first column of zSql with ?1 = zA, ?2 = zB (either may be NULL), as
** sqlite3_malloc'd text; NULL when the result is NULL. */
static char *js_text(const char *zSql, const char *zA, const char *zB) {
  sqlite3_stmt *p = js_prep(zSql);
  char *z = 0;
  sqlite3_bind_text(p, 1, zA, -1, SQLITE_STATIC);
  sqlite3_bind_text(p, 2, zB, -1, SQLITE_STATIC);
  if (sqlite3_step(p) == SQLITE_ROW && sqlite3_column_type(p, 0) != SQLITE_NULL) {
    z = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(p, 0));
  }
  sqlite3_finalize(p);
  return z;
}

/* Member zName of the object zJson as JSON text, or NULL when absent. */
static char *member_json(const char *zJson, const char *zName) {
  return js_text("SELECT ?1 -> ?2", zJson, zName);
}

/* Member zName as SQL text (a string without quotes), or NULL. */
static char *member_str(const char *zJson, const char *zName) {
  return js_text("SELECT ?1 ->> ?2", zJson, zName);
}

static int has_member(const char *zJson, const char *zName) {
  char *z = member_json(zJson, zName);
  int b = z != 0;
  sqlite3_free(z);
  return b;
}

/* Bind member zName of zJson to pStmt's parameter i as the SQL value JSON
** gives it (null NULL, integer INTEGER, real REAL, string TEXT). */
static void bind_member(sqlite3_stmt *pStmt, int i, const char *zJson, const char *zName) {
  sqlite3_stmt *p = js_prep("SELECT ?1 ->> ?2");
  sqlite3_bind_text(p, 1, zJson, -1, SQLITE_STATIC);
  sqlite3_bind_text(p, 2, zName, -1, SQLITE_STATIC);
  if (sqlite3_step(p) == SQLITE_ROW) sqlite3_bind_value(pStmt, i, sqlite3_column_value(p, 0));
  else sqlite3_bind_null(pStmt, i);
  sqlite3_finalize(p);
}

/* The elements of array zPath of zJson, one JSON text each. */
typedef struct JList JList;
struct JList {
  int n;
  char **az;
};

static JList list_of(const char *zJson, const char *zPath) {
  JList l = {0, 0};
  sqlite3_stmt *p = js_prep(
      "SELECT CASE WHEN type IN ('object','array') THEN value "
      "ELSE json_quote(value) END FROM json_each(?1, ?2) ORDER BY id");
  sqlite3_bind_text(p, 1, zJson, -1, SQLITE_STATIC);
  sqlite3_bind_text(p, 2, zPath, -1, SQLITE_STATIC);
  while (sqlite3_step(p) == SQLITE_ROW) {
    l.az = sqlite3_realloc64(l.az, sizeof(char *) * (size_t)(l.n + 1));
    if (l.az == 0) exit(2);
    l.az[l.n++] = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(p, 0));
  }
  sqlite3_finalize(p);
  return l;
}

static void list_free(JList *l) {
  int i;
  for (i = 0; i < l->n; i++) sqlite3_free(l->az[i]);
  sqlite3_free(l->az);
}

/* Compare an expected value with an answer. For an expected object, each of
** its members against the answer's member of that name (members the
** expectation does not name are ignored); otherwise the two values whole.
** Two values are equal when their json_trees hold the same (path, type,
** atom) rows. Returns NULL when they agree, else "FIELD: expected E, got G"
** (sqlite3_malloc'd). */
#define SAME_TREE(a, b)                                      \
  "NOT EXISTS (SELECT fullkey, type, atom FROM json_tree(" a \
  ") EXCEPT SELECT fullkey, "                                \
  "type, atom FROM json_tree(" b                             \
  ")) AND NOT EXISTS (SELECT fullkey, type, atom FROM "      \
  "json_tree(" b ") EXCEPT SELECT fullkey, type, atom FROM json_tree(" a "))"

static char *compare(const char *zExp, const char *zGot) {
  char *zWhy = 0, *zType = js_text("SELECT json_type(?1)", zExp, 0);
  sqlite3_stmt *p;
  if (zGot == 0) zGot = "null";
  if (zType && strcmp(zType, "object") == 0) {
    /* the first member of the expectation whose value differs */
    p = js_prep(
        "SELECT e.key, ?1 -> e.key, ?2 -> e.key FROM json_each(?1) e "
        "WHERE json_type(?2) IS NOT 'object' OR (?2 -> e.key) IS NULL "
        "OR NOT (" SAME_TREE("?1 -> e.key", "?2 -> e.key") ") ORDER BY e.id LIMIT 1");
  } else {
    p = js_prep("SELECT 'the answer', ?1, ?2 WHERE NOT (" SAME_TREE("?1", "?2") ")");
  }
  sqlite3_bind_text(p, 1, zExp, -1, SQLITE_STATIC);
  sqlite3_bind_text(p, 2, zGot, -1, SQLITE_STATIC);
  if (sqlite3_step(p) == SQLITE_ROW) {
    const char *zG = (const char *)sqlite3_column_text(p, 2);
    zWhy = sqlite3_mprintf("%s: expected %s, got %s", (const char *)sqlite3_column_text(p, 0),
                           (const char *)sqlite3_column_text(p, 1), zG ? zG : "(absent)");
  }
  sqlite3_finalize(p);
  sqlite3_free(zType);
  return zWhy;
}

/* ------------------------------------------------------------------ */
/* A sequence                                                            */
/* ------------------------------------------------------------------ */

typedef struct Saved Saved;
struct Saved {
  char *zName, *zToken, *zKey;
};

typedef struct Seq Seq;
struct Seq {
  const char *zFile;
  char zDb[512];
  sqlite3 *aDb[NCONN];
  Saved aSaved[NSAVED];
  int nSaved;
  sqlite3_int64 now;
};

/* An answer: zJson (the JSON the step answered) or zErr (its error). */
typedef struct Answer Answer;
struct Answer {
  char *zJson, *zErr;
};

static int set_clock(sqlite3_int64 ms) {
  sqlite3_stmt *p = js_prep("SELECT testclock_set(?1)");
  int rc;
  sqlite3_bind_int64(p, 1, ms);
  rc = sqlite3_step(p) == SQLITE_ROW ? SQLITE_OK : SQLITE_ERROR;
  sqlite3_finalize(p);
  return rc;
}

static sqlite3 *open_conn(Seq *s, char *zWhy, size_t nWhy) {
  sqlite3 *db = stress_open(s->zDb, zExt, 0, zWhy, nWhy);
  if (db == 0) return 0;
  if (exec_ok(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL", zWhy, nWhy) != SQLITE_OK) {
    sqlite3_close(db);
    return 0;
  }
  return db;
}

/* The value saved under zName (a later claim's "as" of that name replaces it). */
static const Saved *saved(Seq *s, const char *zName) {
  int i;
  for (i = 0; zName && i < s->nSaved; i++) {
    if (strcmp(s->aSaved[i].zName, zName) == 0) return &s->aSaved[i];
  }
  return 0;
}

/* The token a step names: "token" (a name given by an earlier claim's
** "as") or "token_text" (the text itself). sqlite3_malloc'd; NULL with
** *pzWhy set when the name is unknown. */
static char *step_token(Seq *s, const char *zStep, char **pzWhy) {
  char *zRef = member_str(zStep, "token");
  char *z = 0;
  if (zRef) {
    const Saved *v = saved(s, zRef);
    if (v && v->zToken) z = sqlite3_mprintf("%s", v->zToken);
    else *pzWhy = sqlite3_mprintf("no earlier claim saved a token as \"%s\"", zRef);
  } else {
    z = member_str(zStep, "token_text");
    if (z == 0) *pzWhy = sqlite3_mprintf("the step names no token");
  }
  sqlite3_free(zRef);
  return z;
}

/* Run pStmt to its end on db; the answer is the first column of its row
** (its text, or with zFmt that INTEGER formatted into zFmt), or the error.
** pStmt NULL (a failed prepare) answers the prepare's error. */
static void answer_of(sqlite3 *db, sqlite3_stmt *pStmt, const char *zFmt, Answer *a) {
  int rc;
  if (pStmt == 0) {
    a->zErr = sqlite3_mprintf("%s", sqlite3_errmsg(db));
    return;
  }
  rc = sqlite3_step(pStmt);
  if (rc == SQLITE_ROW) {
    if (zFmt) a->zJson = sqlite3_mprintf(zFmt, sqlite3_column_int64(pStmt, 0));
    else a->zJson = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(pStmt, 0));
    rc = sqlite3_step(pStmt);
  }
  if (rc != SQLITE_DONE) a->zErr = sqlite3_mprintf("%s", sqlite3_errmsg(db));
  if (rc != SQLITE_DONE && a->zJson) {
    sqlite3_free(a->zJson);
    a->zJson = 0;
  }
}

/* The JSON of one SQL value (json_quote on the helper). */
static char *value_json(sqlite3_value *v) {
  sqlite3_stmt *p = js_prep("SELECT json_quote(?1)");
  char *z;
  sqlite3_bind_value(p, 1, v);
  sqlite3_step(p);
  z = sqlite3_mprintf("%s", (const char *)sqlite3_column_text(p, 0));
  sqlite3_finalize(p);
  return z;
}

/* A "sql" step: its statements' rows as {"rows": [[...], ...]}. */
static void run_sql(Seq *s, sqlite3 *db, const char *zStep, Answer *a) {
  char *zSql = member_str(zStep, "sql");
  JList binds = list_of(zStep, "$.bind");
  sqlite3_stmt *p = 0;
  sqlite3_str *pOut = sqlite3_str_new(0);
  int i, rc, nRow = 0;
  if (sqlite3_prepare_v2(db, zSql ? zSql : "", -1, &p, 0) != SQLITE_OK) {
    a->zErr = sqlite3_mprintf("%s", sqlite3_errmsg(db));
    goto done;
  }
  for (i = 0; i < binds.n; i++) {
    char *zRef = member_str(binds.az[i], "token");
    if (zRef) {
      const Saved *v = saved(s, zRef);
      sqlite3_bind_text(p, i + 1, v ? v->zToken : 0, -1, SQLITE_TRANSIENT);
      sqlite3_free(zRef);
    } else {
      char *zWrap = sqlite3_mprintf("{\"v\":%s}", binds.az[i]);
      bind_member(p, i + 1, zWrap, "v");
      sqlite3_free(zWrap);
    }
  }
  sqlite3_str_appendall(pOut, "{\"rows\":[");
  while ((rc = sqlite3_step(p)) == SQLITE_ROW) {
    sqlite3_str_appendf(pOut, "%s[", nRow++ ? "," : "");
    for (i = 0; i < sqlite3_column_count(p); i++) {
      char *z = value_json(sqlite3_column_value(p, i));
      sqlite3_str_appendf(pOut, "%s%s", i ? "," : "", z);
      sqlite3_free(z);
    }
    sqlite3_str_appendall(pOut, "]");
  }
  sqlite3_str_appendall(pOut, "]}");
  if (rc != SQLITE_DONE) a->zErr = sqlite3_mprintf("%s", sqlite3_errmsg(db));
done:
  sqlite3_finalize(p);
  {
    char *z = sqlite3_str_finish(pOut);
    if (a->zErr == 0) a->zJson = z;
    else sqlite3_free(z);
  }
  sqlite3_free(zSql);
  list_free(&binds);
}

/* Run one step; the answer goes to *a. Returns NULL, or why the step could
** not be run (a malformed file). */
static char *run_step(Seq *s, const char *zStep, Answer *a) {
  char *zOp = member_str(zStep, "step");
  char *zConn = member_str(zStep, "conn");
  char *zWhy = 0, *zTok = 0;
  int iConn = zConn ? atoi(zConn) : 0;
  sqlite3 *db;
  sqlite3_stmt *p = 0;
  char zErr[512];
  if (iConn < 0 || iConn >= NCONN) {
    zWhy = sqlite3_mprintf("conn %d: there are connections 0 and 1", iConn);
    goto done;
  }
  if (s->aDb[iConn] == 0 && (s->aDb[iConn] = open_conn(s, zErr, sizeof(zErr))) == 0) {
    zWhy = sqlite3_mprintf("cannot open connection %d: %s", iConn, zErr);
    goto done;
  }
  db = s->aDb[iConn];
  if (zOp == 0) {
    zWhy = sqlite3_mprintf("the step has no \"step\"");
  } else if (strcmp(zOp, "clock") == 0) {
    char *zSet = member_str(zStep, "set"), *zAdv = member_str(zStep, "advance");
    if (zSet) s->now = atoll(zSet);
    else if (zAdv) s->now += atoll(zAdv);
    else zWhy = sqlite3_mprintf("a clock step has \"set\" or \"advance\"");
    sqlite3_free(zSet);
    sqlite3_free(zAdv);
    if (zWhy == 0 && set_clock(s->now) != SQLITE_OK) zWhy = sqlite3_mprintf("testclock_set failed");
    a->zJson = sqlite3_mprintf("null");
  } else if (strcmp(zOp, "claim") == 0) {
    int bOp = has_member(zStep, "operation_id"), bEff = has_member(zStep, "effect");
    /* the claim's options (targets, target_window_seconds, allowed_by):
    ** the eight-argument form, the options object made of those given */
    int bTgt = has_member(zStep, "targets") || has_member(zStep, "target_window_seconds") ||
               has_member(zStep, "allowed_by");
    char *zArgs = member_json(zStep, "args");
    sqlite3_prepare_v2(
        db,
        bTgt   ? "SELECT idem_claim('ledger', ?1, ?2, ?3, ?4, coalesce(?5, 'external'), ?6,"
                 " json_remove(json_object('targets', json(?7), 'target_window_seconds', ?8,"
                 " 'allowed_by', ?9), CASE WHEN ?7 IS NULL THEN '$.targets' ELSE '$.-' END,"
                 " CASE WHEN ?8 IS NULL THEN '$.target_window_seconds' ELSE '$.-' END,"
                 " CASE WHEN ?9 IS NULL THEN '$.allowed_by' ELSE '$.-' END))"
        : bOp  ? "SELECT idem_claim('ledger', ?1, ?2, ?3, ?4, coalesce(?5, 'external'), ?6)"
        : bEff ? "SELECT idem_claim('ledger', ?1, ?2, ?3, ?4, ?5)"
               : "SELECT idem_claim('ledger', ?1, ?2, ?3, ?4)",
        -1, &p, 0);
    if (bTgt) {
      char *zTargets = member_json(zStep, "targets");
      sqlite3_bind_text(p, 7, zTargets, -1, SQLITE_TRANSIENT);
      sqlite3_free(zTargets);
      bind_member(p, 8, zStep, "target_window_seconds");
      bind_member(p, 9, zStep, "allowed_by");
    }
    bind_member(p, 1, zStep, "tenant");
    bind_member(p, 2, zStep, "conversation");
    bind_member(p, 3, zStep, "tool");
    sqlite3_bind_text(p, 4, zArgs, -1, SQLITE_TRANSIENT);
    if (bOp || bEff || bTgt) bind_member(p, 5, zStep, "effect");
    if (bOp || bTgt) bind_member(p, 6, zStep, "operation_id");
    answer_of(db, p, 0, a);
    sqlite3_free(zArgs);
    if (a->zJson) {
      char *zAs = member_str(zStep, "as");
      Saved *v = (Saved *)saved(s, zAs);
      if (zAs && v == 0 && s->nSaved < NSAVED) v = &s->aSaved[s->nSaved++];
      if (zAs && v == 0) {
        zWhy = sqlite3_mprintf("more than %d names saved with \"as\"", NSAVED);
        sqlite3_free(zAs);
      } else if (zAs) {
        sqlite3_free(v->zName);
        sqlite3_free(v->zToken);
        sqlite3_free(v->zKey);
        v->zName = zAs;
        v->zToken = member_str(a->zJson, "token");
        v->zKey = member_str(a->zJson, "key");
      }
    }
  } else if (strcmp(zOp, "settle") == 0 || strcmp(zOp, "renew") == 0) {
    int bSettle = zOp[0] == 's';
    char *zDetail = bSettle ? member_json(zStep, "detail") : 0;
    zTok = step_token(s, zStep, &zWhy);
    if (zWhy) goto done;
    if (bSettle) {
      sqlite3_prepare_v2(db, "SELECT idem_settle('ledger', ?1, ?2, ?3)", -1, &p, 0);
      bind_member(p, 2, zStep, "status");
      sqlite3_bind_text(p, 3, zDetail, -1, SQLITE_TRANSIENT);
    } else if (has_member(zStep, "seconds")) {
      sqlite3_prepare_v2(db, "SELECT idem_renew('ledger', ?1, ?2)", -1, &p, 0);
      bind_member(p, 2, zStep, "seconds");
    } else {
      sqlite3_prepare_v2(db, "SELECT idem_renew('ledger', ?1)", -1, &p, 0);
    }
    sqlite3_bind_text(p, 1, zTok, -1, SQLITE_TRANSIENT);
    answer_of(db, p, bSettle ? 0 : "{\"lease_until\":%lld}", a);
    sqlite3_free(zDetail);
  } else if (strcmp(zOp, "resolve") == 0) {
    char *zDetail = member_json(zStep, "detail");
    sqlite3_prepare_v2(db, "SELECT idem_resolve('ledger', ?1, ?2, ?3, ?4)", -1, &p, 0);
    bind_member(p, 1, zStep, "tenant");
    bind_member(p, 2, zStep, "key");
    bind_member(p, 3, zStep, "status");
    sqlite3_bind_text(p, 4, zDetail, -1, SQLITE_TRANSIENT);
    answer_of(db, p, 0, a);
    sqlite3_free(zDetail);
  } else if (strcmp(zOp, "purge") == 0) {
    sqlite3_prepare_v2(db, "SELECT idem_purge('ledger', ?1)", -1, &p, 0);
    bind_member(p, 1, zStep, "older_than");
    answer_of(db, p, "{\"purged\":%lld}", a);
  } else if (strcmp(zOp, "row") == 0) {
    sqlite3_prepare_v2(
        db,
        "SELECT coalesce((SELECT json_object('tenant', tenant, 'key', key, 'conversation', "
        "conversation, 'tool', tool, 'args', json(args), 'effect', effect, 'status', status, "
        "'result', json(result), 'error', json(error), 'attempt', attempt, 'created_at', "
        "created_at, 'updated_at', updated_at, 'lease_until', lease_until, 'members', "
        "json(members)) FROM ledger WHERE tenant = ?1 AND key = ?2), 'null')",
        -1, &p, 0);
    bind_member(p, 1, zStep, "tenant");
    bind_member(p, 2, zStep, "key");
    answer_of(db, p, 0, a);
  } else if (strcmp(zOp, "sql") == 0) {
    run_sql(s, db, zStep, a);
  } else {
    zWhy = sqlite3_mprintf("unknown step \"%s\"", zOp);
  }
done:
  sqlite3_finalize(p);
  sqlite3_free(zOp);
  sqlite3_free(zConn);
  sqlite3_free(zTok);
  return zWhy;
}

static void report_fail(const char *zFile, int iStep, const char *zOp, const char *zFmt, ...)
    __attribute__((format(printf, 4, 5)));
static void report_fail(const char *zFile, int iStep, const char *zOp, const char *zFmt, ...) {
  va_list ap;
  if (iStep > 0) printf("FAIL conformance.c:%s: step %d (%s): ", zFile, iStep, zOp);
  else printf("FAIL conformance.c:%s: ", zFile);
  va_start(ap, zFmt);
  vprintf(zFmt, ap);
  va_end(ap);
  printf("\n");
  fflush(stdout);
  nFail++;
}

/* Check one answer against the step's "expect" (and "absent") or "error"
** (a text, or an array of texts, each a part the message holds); NULL when
** it agrees, else why (sqlite3_malloc'd). */
static char *check_answer(const char *zStep, const Answer *a) {
  char *zWant = member_json(zStep, "error");
  char *zExp = member_json(zStep, "expect");
  char *zWhy = 0;
  int i;
  if (zWant) {
    JList parts = list_of(zStep, "$.error");
    if (a->zErr == 0) {
      zWhy = sqlite3_mprintf("expected the error %s, got the answer %s", zWant, a->zJson);
    }
    for (i = 0; zWhy == 0 && i < parts.n; i++) {
      char *zPart = js_text("SELECT ?1 ->> '$'", parts.az[i], 0);
      if (zPart == 0 || strstr(a->zErr, zPart) == 0) {
        zWhy = sqlite3_mprintf("expected an error containing %s, got \"%s\"", parts.az[i], a->zErr);
      }
      sqlite3_free(zPart);
    }
    list_free(&parts);
  } else if (a->zErr) {
    zWhy = sqlite3_mprintf("expected an answer, got the error \"%s\"", a->zErr);
  } else {
    JList absent = list_of(zStep, "$.absent");
    if (zExp) zWhy = compare(zExp, a->zJson);
    for (i = 0; zWhy == 0 && i < absent.n; i++) {
      char *zField = js_text("SELECT ?1 ->> '$'", absent.az[i], 0);
      char *zGot = member_json(a->zJson, zField);
      if (zGot) zWhy = sqlite3_mprintf("%s: expected it absent, got %s", zField, zGot);
      sqlite3_free(zField);
      sqlite3_free(zGot);
    }
    list_free(&absent);
  }
  sqlite3_free(zWant);
  sqlite3_free(zExp);
  return zWhy;
}

static void close_seq(Seq *s) {
  int i;
  for (i = 0; i < NCONN; i++) sqlite3_close(s->aDb[i]);
  for (i = 0; i < s->nSaved; i++) {
    sqlite3_free(s->aSaved[i].zName);
    sqlite3_free(s->aSaved[i].zToken);
    sqlite3_free(s->aSaved[i].zKey);
  }
}

static void remove_db(const char *zDb) {
  static const char *azSuffix[] = {"", "-wal", "-shm", "-journal"};
  char z[600];
  size_t i;
  for (i = 0; i < sizeof(azSuffix) / sizeof(azSuffix[0]); i++) {
    fmt_str(z, sizeof(z), "%s%s", zDb, azSuffix[i]);
    unlink(z);
  }
}

static void run_sequence(const char *zFile, const char *zJson, int iFile) {
  Seq s;
  JList steps = list_of(zJson, "$.steps"), setup = list_of(zJson, "$.setup");
  char *zOpts = js_text(
      "SELECT group_concat(key || '=' || value, ', ') FROM json_each(?1, '$.ledger')", zJson, 0);
  char *zClockStart = member_str(zJson, "clock");
  char *zCreate = 0, zWhy[512];
  int i, bOk = 1;
  memset(&s, 0, sizeof(s));
  s.zFile = zFile;
  fmt_str(s.zDb, sizeof(s.zDb), "%s/conformance-%d.db", zDir, iFile);
  remove_db(s.zDb);
  s.now = zClockStart ? atoll(zClockStart) : 0;
  if (zClockStart == 0 || set_clock(s.now) != SQLITE_OK) {
    report_fail(zFile, 0, 0, "the file has no \"clock\" (Unix ms)");
    goto done;
  }
  if ((s.aDb[0] = open_conn(&s, zWhy, sizeof(zWhy))) == 0) {
    report_fail(zFile, 0, 0, "cannot open the database: %s", zWhy);
    goto done;
  }
  zCreate = sqlite3_mprintf("CREATE VIRTUAL TABLE ledger USING idempotency%s%s%s", zOpts ? "(" : "",
                            zOpts ? zOpts : "", zOpts ? ")" : "");
  if (exec_ok(s.aDb[0], zCreate, zWhy, sizeof(zWhy)) != SQLITE_OK) {
    report_fail(zFile, 0, 0, "cannot create the ledger: %s", zWhy);
    goto done;
  }
  for (i = 0; i < setup.n; i++) {
    char *zSql = js_text("SELECT ?1 ->> '$'", setup.az[i], 0);
    int rc = exec_ok(s.aDb[0], zSql, zWhy, sizeof(zWhy));
    sqlite3_free(zSql);
    if (rc != SQLITE_OK) {
      report_fail(zFile, 0, 0, "setup: %s", zWhy);
      goto done;
    }
  }
  for (i = 0; i < steps.n && bOk; i++) {
    Answer a = {0, 0};
    char *zOp = member_str(steps.az[i], "step");
    char *zBad = run_step(&s, steps.az[i], &a);
    if (zBad) {
      report_fail(zFile, i + 1, zOp ? zOp : "?", "cannot run the step: %s", zBad);
      bOk = 0;
    } else {
      char *zDiff = check_answer(steps.az[i], &a);
      if (zDiff) {
        report_fail(zFile, i + 1, zOp, "%s", zDiff);
        bOk = 0;
      }
      sqlite3_free(zDiff);
    }
    sqlite3_free(zBad);
    sqlite3_free(zOp);
    sqlite3_free(a.zJson);
    sqlite3_free(a.zErr);
  }
  if (bOk) {
    printf("PASS conformance.c:%s (%d steps)\n", zFile, steps.n);
  }
done:
  close_seq(&s);
  remove_db(s.zDb);
  list_free(&steps);
  list_free(&setup);
  sqlite3_free(zOpts);
  sqlite3_free(zClockStart);
  sqlite3_free(zCreate);
}

/* ------------------------------------------------------------------ */
/* Keys                                                                  */
/* ------------------------------------------------------------------ */

static char *read_file(const char *zPath) {
  FILE *f = fopen(zPath, "rb");
  sqlite3_str *p;
  char buf[8192];
  size_t n;
  if (f == 0) return 0;
  p = sqlite3_str_new(0);
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) sqlite3_str_append(p, buf, (int)n);
  fclose(f);
  return sqlite3_str_finish(p);
}

/* Key vectors: "vectors_file" names a file of {tenant, conversation, tool,
** args (text), canonical, key} (relative to this file), "vectors" holds
** more of them, "refusals" are {name, tenant, conversation, tool, args,
** rule, error}. */
static void check_vector(sqlite3 *db, const char *zFile, const char *zWhere, int iVec,
                         const char *v) {
  sqlite3_stmt *p = 0;
  sqlite3_prepare_v2(db, "SELECT idem_canonical(?4), idem_key(?1, ?2, ?3, ?4)", -1, &p, 0);
  bind_member(p, 1, v, "tenant");
  bind_member(p, 2, v, "conversation");
  bind_member(p, 3, v, "tool");
  bind_member(p, 4, v, "args");
  if (sqlite3_step(p) != SQLITE_ROW) {
    report_fail(zFile, 0, 0, "vector %d of %s: refused: %s", iVec, zWhere, sqlite3_errmsg(db));
  } else {
    char *zCan = member_str(v, "canonical"), *zKey = member_str(v, "key");
    const char *zGotCan = (const char *)sqlite3_column_text(p, 0);
    const char *zGotKey = (const char *)sqlite3_column_text(p, 1);
    if (zCan == 0 || strcmp(zCan, zGotCan) != 0) {
      report_fail(zFile, 0, 0, "vector %d of %s: canonical: expected %s, got %s", iVec, zWhere,
                  zCan, zGotCan);
    } else if (zKey == 0 || strcmp(zKey, zGotKey) != 0) {
      report_fail(zFile, 0, 0, "vector %d of %s: key: expected %s, got %s", iVec, zWhere, zKey,
                  zGotKey);
    }
    sqlite3_free(zCan);
    sqlite3_free(zKey);
  }
  sqlite3_finalize(p);
}

static void run_keys(const char *zFile, const char *zJson) {
  char *zRel = member_str(zJson, "vectors_file"), *zVec = 0, *zPath = 0;
  const char *zSlash = strrchr(zFile, '/');
  JList vec = {0, 0}, more = list_of(zJson, "$.vectors"), ref = list_of(zJson, "$.refusals");
  sqlite3 *db = 0;
  char *zErr = 0;
  int i, nBefore = nFail;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) exit(2);
  if (stress_load(db, zExt, &zErr) != SQLITE_OK) {
    report_fail(zFile, 0, 0, "cannot load %s: %s", zExt, zErr ? zErr : "?");
    goto done;
  }
  if (zRel) {
    zPath = sqlite3_mprintf("%.*s%s", zSlash ? (int)(zSlash - zFile + 1) : 0, zFile, zRel);
    zVec = read_file(zPath);
    if (zVec == 0) {
      report_fail(zFile, 0, 0, "cannot read the vectors %s", zPath);
      goto done;
    }
    vec = list_of(zVec, "$");
  }
  for (i = 0; i < vec.n; i++) check_vector(db, zFile, zPath, i + 1, vec.az[i]);
  for (i = 0; i < more.n; i++) check_vector(db, zFile, "\"vectors\"", i + 1, more.az[i]);
  for (i = 0; i < ref.n; i++) {
    sqlite3_stmt *p = 0;
    const char *v = ref.az[i];
    char *zRefusal = member_str(v, "name"), *zWant = member_str(v, "error");
    int rc;
    sqlite3_prepare_v2(db, "SELECT idem_key(?1, ?2, ?3, ?4)", -1, &p, 0);
    bind_member(p, 1, v, "tenant");
    bind_member(p, 2, v, "conversation");
    bind_member(p, 3, v, "tool");
    bind_member(p, 4, v, "args");
    rc = sqlite3_step(p);
    if (rc == SQLITE_ROW) {
      report_fail(zFile, 0, 0, "refusal %s: expected the error \"%s\", got the key %s", zRefusal,
                  zWant, (const char *)sqlite3_column_text(p, 0));
    } else if (zWant == 0 || strstr(sqlite3_errmsg(db), zWant) == 0) {
      report_fail(zFile, 0, 0, "refusal %s: expected an error containing \"%s\", got \"%s\"",
                  zRefusal, zWant, sqlite3_errmsg(db));
    }
    sqlite3_finalize(p);
    sqlite3_free(zRefusal);
    sqlite3_free(zWant);
  }
  if (nFail == nBefore) {
    printf("PASS conformance.c:%s (%d vectors, %d refusals)\n", zFile, vec.n + more.n, ref.n);
  }
done:
  sqlite3_free(zErr);
  sqlite3_close(db);
  list_free(&vec);
  list_free(&more);
  list_free(&ref);
  sqlite3_free(zRel);
  sqlite3_free(zVec);
  sqlite3_free(zPath);
}

int main(int argc, char **argv) {
  int i, nFile = 0;
  char *zErr = 0;
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--ext") == 0 && i + 1 < argc) zExt = argv[++i];
    else if (strcmp(argv[i], "--clock") == 0 && i + 1 < argc) zClock = argv[++i];
    else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) zDir = argv[++i];
    else if (argv[i][0] == '-') break;
    else break;
  }
  if (zExt == 0 || zClock == 0 || zDir == 0 || i >= argc) {
    fprintf(stderr, "usage: conformance --ext EXT --clock CLOCK --dir DIR FILE...\n");
    return 2;
  }
  if (sqlite3_open(":memory:", &js) != SQLITE_OK ||
      sqlite3_enable_load_extension(js, 1) != SQLITE_OK ||
      sqlite3_load_extension(js, zClock, "sqlite3_testclock_init", &zErr) != SQLITE_OK) {
    fprintf(stderr, "conformance: cannot load the test clock %s: %s\n", zClock,
            zErr ? zErr : sqlite3_errmsg(js));
    sqlite3_free(zErr);
    return 2;
  }
  for (; i < argc; i++) {
    char *zJson = read_file(argv[i]);
    char *zKind = zJson ? member_str(zJson, "kind") : 0;
    nFile++;
    if (zJson == 0) report_fail(argv[i], 0, 0, "cannot read the file");
    else if (zKind && strcmp(zKind, "sequence") == 0) run_sequence(argv[i], zJson, nFile);
    else if (zKind && strcmp(zKind, "keys") == 0) run_keys(argv[i], zJson);
    else report_fail(argv[i], 0, 0, "\"kind\" is neither \"sequence\" nor \"keys\"");
    sqlite3_free(zJson);
    sqlite3_free(zKind);
  }
  sqlite3_close(js);
  return nFail ? 1 : 0;
}

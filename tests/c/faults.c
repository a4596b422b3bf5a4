/*
** faults.c: I/O faults. Every write, every sync of an operation fails in
** turn, or the disk is full from that write on; the operation fails with a
** clear error or succeeds, nothing is half-written, no committed claim is
** lost, and the next operation works.
**
**   faults [--ext PATH] --dir DIR [--mode wal|delete] [--fixture FORMAT1.DB]
**          [--only SCENARIO] [--control]
**
** --control runs the claim scenario on a lying disk instead (the N-th
** write answers SQLITE_OK and is lost): the checks must catch it, which
** shows they can fail ("PASS faults.<mode>:control" when they do).
**
** Scenarios (each on a fresh file made through the same shim, unarmed):
**
**   claim     SELECT idem_claim(...) in autocommit (a new external key)
**   settle    idem_settle of a live claim, succeeded
**   recipe    BEGIN IMMEDIATE; claim local; INSERT a guarded row; settle;
**             COMMIT (ROLLBACK when a step fails)
**   retention a claim on a ledger with retention_seconds=1 that purges 16
**             settled rows
**   purge     idem_purge(L, 0) of 20 settled rows
**   upgrade   idem_upgrade('L') of a format-1 file (--fixture)
**
** For each scenario and each fault (the N-th xWrite fails with
** SQLITE_IOERR_WRITE; the N-th xSync fails with SQLITE_IOERR_FSYNC; from
** the N-th xWrite on the disk is full, SQLITE_FULL) N runs from 1 until
** the operation no longer reaches the N-th call. After each run:
**
**   answer    the operation succeeded, or failed with an I/O or full-disk
**             error code and a non-empty message
**   state     reopened with the default VFS and without the extension, the
**             file passes integrity_check and its ledger rows (tenant, key,
**             status, attempt, result, error) and guarded rows are exactly
**             the state before or the state after the operation (the state
**             after when it reported success: no committed claim is lost,
**             and a reported token is the row's token)
**   next      on the same connection, with the fault gone, the next
**             operation (a claim of a new key, then the operation's own
**             retry where it has one) works
**
** Then, in WAL mode, a power loss after settles (lost-settle): with the
** shim keeping a copy of each file as of its last sync (bKeepSynced), the
** disk a power loss leaves is read back at these points of one run on a
** synchronous=FULL connection:
**
**   settle    claim external A, settle it: the settle commits at
**             synchronous=NORMAL (docs/design.md, "A settle rides on the
**             next synced commit"), so the disk holds A claimed; once its
**             lease passed A reads unknown and is not admitted again; the
**             connection reads synchronous=FULL again, and after a
**             refused second settle of A too; on a connection whose
**             authorizer refuses to change synchronous, a settle of D
**             succeeds and is synced (denied)
**   carried   then claim B: its synced commit carries A's settle, so the
**             disk holds A succeeded (a replay) and B claimed
**   local     then BEGIN; claim local C; a guarded row; settle; COMMIT:
**             the disk holds C and its row together (the caller's commit
**             is synced at the caller's setting)
**
** Prints one PASS or FAIL line per scenario and fault kind; exit 1 on a
** failure.
*/
#include "stress.h"
#include "faultvfs.h"

#include <unistd.h>

static const char *zExt = 0, *zDir = 0, *zMode = "wal", *zFixture = 0, *zOnly = 0;
static FaultVfs vfs;
static int nFail = 0;
static const sqlite3_int64 CLOCK0 = 1800000000000LL;
static int bControl = 0;

/* printf for a sweep's FAIL lines; under --control a caught fault is the
** expected outcome and is printed as a note, not as a FAIL. */
static void report(const char *zFmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *zFmt, ...) {
  char z[8192];
  va_list ap;
  va_start(ap, zFmt);
  sqlite3_vsnprintf((int)sizeof(z), z, zFmt, ap);
  va_end(ap);
  if (bControl && !strncmp(z, "FAIL ", 5)) printf("  caught: %s", z + 5);
  else fputs(z, stdout);
}

typedef struct Res Res;
struct Res {
  int rc;
  char text[1024];
  char err[512];
};

static void run(sqlite3 *db, const char *zSql, Res *p) {
  sqlite3_stmt *st = 0;
  int rc;
  memset(p, 0, sizeof(*p));
  rc = sqlite3_prepare_v2(db, zSql, -1, &st, 0);
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      const char *z = (const char *)sqlite3_column_text(st, 0);
      fmt_str(p->text, sizeof(p->text), "%s", z ? z : "");
      while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
      }
    }
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
  }
  if (rc != SQLITE_OK) {
    p->rc = sqlite3_extended_errcode(db);
    if (p->rc == SQLITE_OK) p->rc = rc;
    fmt_str(p->err, sizeof(p->err), "%s", sqlite3_errmsg(db));
  }
  sqlite3_finalize(st);
}

static sqlite3 *open_db(const char *zPath, const char *zVfs, int bExt, char *zWhy, size_t nWhy) {
  sqlite3 *db = 0;
  char *zErr = 0;
  int rc = sqlite3_open_v2(zPath, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, zVfs);
  if (rc != SQLITE_OK) {
    fmt_str(zWhy, nWhy, "open %s: %s", zPath, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return 0;
  }
  sqlite3_busy_timeout(db, 2000);
  if (bExt && (rc = stress_load(db, stress_ext_path(zExt), &zErr)) != SQLITE_OK) {
    fmt_str(zWhy, nWhy, "load: %s", zErr ? zErr : sqlite3_errstr(rc));
    sqlite3_free(zErr);
    sqlite3_close(db);
    return 0;
  }
  return db;
}

static void remove_db(const char *zPath) {
  char z[600];
  unlink(zPath);
  fmt_str(z, sizeof(z), "%s-wal", zPath);
  unlink(z);
  fmt_str(z, sizeof(z), "%s-shm", zPath);
  unlink(z);
  fmt_str(z, sizeof(z), "%s-journal", zPath);
  unlink(z);
}

/* Copy file zFrom to zTo. */
static int copy_file(const char *zFrom, const char *zTo) {
  FILE *in = fopen(zFrom, "rb"), *out = 0;
  char buf[8192];
  size_t n;
  int rc = 1;
  if (in == 0) return 1;
  out = fopen(zTo, "wb");
  if (out == 0) goto done;
  while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
    if (fwrite(buf, 1, n, out) != n) goto done;
  }
  rc = 0;
done:
  if (out && fclose(out) != 0) rc = 1;
  fclose(in);
  return rc;
}

enum { SC_CLAIM, SC_SETTLE, SC_RECIPE, SC_RETENTION, SC_PURGE, SC_UPGRADE, SC_N };
static const char *azScenario[] = {"claim", "settle", "recipe", "retention", "purge", "upgrade"};
static const char *azFault[] = {"", "write", "sync", "full", "kill", "lost-write"};

/* Make the scenario's starting file at zPath; the live token (settle) goes
** to zTok. Returns 0 or writes why. */
static int prepare(int sc, const char *zPath, char *zTok, char *zWhy, size_t nWhy) {
  sqlite3 *db;
  Res r;
  char zSql[512];
  int i;
  remove_db(zPath);
  vfs.clockMs = CLOCK0;
  if (sc == SC_UPGRADE) {
    if (zFixture == 0 || copy_file(zFixture, zPath)) {
      fmt_str(zWhy, nWhy, "cannot copy the format-1 fixture %s", zFixture ? zFixture : "(none)");
      return 1;
    }
  }
  db = open_db(zPath, "faults", 1, zWhy, nWhy);
  if (db == 0) return 1;
  fmt_str(zSql, sizeof(zSql), "PRAGMA journal_mode=%s", zMode);
  if (exec_ok(db, zSql, zWhy, nWhy)) goto fail;
  if (sc == SC_UPGRADE) {
    sqlite3_close(db);
    return 0;
  }
  fmt_str(zSql, sizeof(zSql),
          "CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60%s);"
          "CREATE TABLE g1(tenant, k, tok, v);"
          "SELECT idem_guard('L', 'g1', 'k', 'tenant', 'tok');"
          "SELECT idem_claim('L', 't', 'c', 'tool', '{\"old\":1}', 'external', 'old-1');",
          sc == SC_RETENTION ? ", retention_seconds=1" : "");
  if (exec_ok(db, zSql, zWhy, nWhy)) goto fail;
  if (sc == SC_SETTLE) {
    run(db, "SELECT idem_claim('L', 't', 'c', 'tool', '{\"n\":1}', 'external', 'op-1')", &r);
    if (r.rc || !json_field(r.text, "token", zTok, 40)) {
      fmt_str(zWhy, nWhy, "claim: %s", r.err);
      goto fail;
    }
  }
  if (sc == SC_RETENTION || sc == SC_PURGE) {
    if (exec_ok(db, "BEGIN", zWhy, nWhy)) goto fail;
    for (i = 0; i < 20; i++) {
      char zT[40];
      fmt_str(zSql, sizeof(zSql),
              "SELECT idem_claim('L', 't', 'c', 'tool', '{\"n\":%d}', 'external', 'done-%d')", i,
              i);
      run(db, zSql, &r);
      if (r.rc || !json_field(r.text, "token", zT, sizeof(zT))) {
        fmt_str(zWhy, nWhy, "claim: %s", r.err);
        goto fail;
      }
      fmt_str(zSql, sizeof(zSql), "SELECT idem_settle('L', '%s', 'succeeded', '{\"i\":%d}')", zT,
              i);
      run(db, zSql, &r);
      if (r.rc) {
        fmt_str(zWhy, nWhy, "settle: %s", r.err);
        goto fail;
      }
    }
    if (exec_ok(db, "COMMIT", zWhy, nWhy)) goto fail;
  }
  sqlite3_close(db);
  /* the operation runs later: settled rows are then old enough */
  vfs.clockMs = CLOCK0 + 10000;
  return 0;
fail:
  sqlite3_close(db);
  return 1;
}

/* Run the scenario's operation on db; the answer to *pRes and a reported
** token (claim, recipe) to zTok. */
static void operate(int sc, sqlite3 *db, const char *zLive, Res *pRes, char *zTok) {
  char zSql[512];
  Res r;
  zTok[0] = 0;
  switch (sc) {
    case SC_CLAIM:
    case SC_RETENTION:
      run(db, "SELECT idem_claim('L', 't', 'c', 'tool', '{\"n\":1}', 'external', 'op-1')", pRes);
      if (pRes->rc == 0) json_field(pRes->text, "token", zTok, 40);
      break;
    case SC_SETTLE:
      fmt_str(zSql, sizeof(zSql), "SELECT idem_settle('L', '%s', 'succeeded', '{\"r\":1}')", zLive);
      run(db, zSql, pRes);
      break;
    case SC_RECIPE:
      run(db, "BEGIN IMMEDIATE", pRes);
      if (pRes->rc) break;
      run(db, "SELECT idem_claim('L', 't', 'c', 'tool', '{\"n\":2}', 'local', 'op-2')", pRes);
      if (pRes->rc == 0 && json_field(pRes->text, "token", zTok, 40)) {
        fmt_str(zSql, sizeof(zSql), "INSERT INTO g1 VALUES('t', 'op-2', '%s', 1)", zTok);
        run(db, zSql, pRes);
        if (pRes->rc == 0) {
          fmt_str(zSql, sizeof(zSql), "SELECT idem_settle('L', '%s', 'succeeded', '{\"o\":1}')",
                  zTok);
          run(db, zSql, pRes);
        }
        if (pRes->rc == 0) run(db, "COMMIT", pRes);
      } else if (pRes->rc == 0) {
        fmt_str(pRes->err, sizeof(pRes->err), "not admitted: %s", pRes->text);
        pRes->rc = -1;
      }
      if (pRes->rc && !sqlite3_get_autocommit(db)) run(db, "ROLLBACK", &r);
      if (pRes->rc) zTok[0] = 0;
      break;
    case SC_PURGE: run(db, "SELECT idem_purge('L', 0)", pRes); break;
    default: run(db, "SELECT idem_upgrade('L')", pRes); break;
  }
}

/* The state of the file as text, read without the extension: ledger rows,
** guarded rows, the format. Token of key zKey to zTok. */
static int state_of(const char *zPath, const char *zKey, char *zOut, size_t nOut, char *zTok,
                    char *zWhy, size_t nWhy) {
  sqlite3 *db = open_db(zPath, 0, 0, zWhy, nWhy);
  Res r;
  char zSql[400];
  if (db == 0) return 1;
  run(db, "PRAGMA integrity_check", &r);
  if (r.rc || strcmp(r.text, "ok")) {
    fmt_str(zWhy, nWhy, "integrity_check: %s%s", r.err, r.text);
    sqlite3_close(db);
    return 1;
  }
  run(db,
      "SELECT (SELECT v FROM L_meta WHERE k='format') || ' rows ' || (SELECT "
      "coalesce(group_concat(x, ';'), '') FROM (SELECT tenant || '|' || key || '|' || status || "
      "'|' || "
      "attempt || '|' || coalesce(result, '-') || '|' || coalesce(error, '-') AS x FROM L_rows "
      "WHERE "
      "key <> 'next-1' ORDER BY tenant, key)) || ' guarded ' || coalesce((SELECT group_concat(k || "
      "'|' || v, ';') FROM "
      "g1), '') || ' triggers ' || (SELECT count(*) FROM sqlite_master WHERE type='trigger' AND "
      "tbl_name='L_rows')",
      &r);
  if (r.rc) {
    /* the upgrade fixture has no g1 */
    run(db,
        "SELECT (SELECT v FROM L_meta WHERE k='format') || ' rows ' || (SELECT "
        "coalesce(group_concat(x, ';'), '') FROM (SELECT tenant || '|' || key || '|' || status || "
        "'|' || attempt || '|' || coalesce(result, '-') || '|' || coalesce(error, '-') AS x FROM "
        "L_rows ORDER BY tenant, key)) || ' triggers ' || (SELECT count(*) FROM sqlite_master "
        "WHERE "
        "type='trigger' AND tbl_name='L_rows')",
        &r);
  }
  if (r.rc) {
    fmt_str(zWhy, nWhy, "reading the ledger: %s", r.err);
    sqlite3_close(db);
    return 1;
  }
  fmt_str(zOut, nOut, "%s", r.text);
  zTok[0] = 0;
  if (zKey) {
    fmt_str(zSql, sizeof(zSql),
            "SELECT CASE typeof(token) WHEN 'integer' THEN printf('%%016x%%016x', id, token) ELSE "
            "lower(hex(token)) END FROM L_rows WHERE key=%s",
            zKey);
    run(db, zSql, &r);
    if (r.rc == 0) fmt_str(zTok, 40, "%s", r.text);
  }
  sqlite3_close(db);
  return 0;
}

/* One scenario under one fault kind, N = 1, 2, ... Returns 0 when it held. */
static int sweep(int sc, int kind) {
  char zPath[600], zWhy[1024], zLive[40], zTok[40], zRowTok[40];
  char zBefore[4096], zAfter[4096], zState[4096];
  const char *zKey = sc == SC_RECIPE                          ? "'op-2'"
                     : (sc == SC_CLAIM || sc == SC_RETENTION) ? "'op-1'"
                                                              : 0;
  int n, nBefore = 0, nAfter = 0, nFailedAfter = 0, ok = 1;
  sqlite3 *db;
  Res res, r2;
  fmt_str(zPath, sizeof(zPath), "%s/%s-%s-%s.db", zDir, azScenario[sc], azFault[kind], zMode);
  /* the states before and after, from a run without faults */
  if (prepare(sc, zPath, zLive, zWhy, sizeof(zWhy)) ||
      state_of(zPath, 0, zBefore, sizeof(zBefore), zRowTok, zWhy, sizeof(zWhy))) {
    report("FAIL faults.%s:%s.%s: setup: %s\n", zMode, azScenario[sc], azFault[kind], zWhy);
    return 1;
  }
  db = open_db(zPath, "faults", 1, zWhy, sizeof(zWhy));
  if (db == 0) {
    report("FAIL faults.%s:%s.%s: setup: %s\n", zMode, azScenario[sc], azFault[kind], zWhy);
    return 1;
  }
  exec_ok(db, "PRAGMA synchronous=FULL", zWhy, sizeof(zWhy));
  operate(sc, db, zLive, &res, zTok);
  sqlite3_close(db);
  if (res.rc || state_of(zPath, 0, zAfter, sizeof(zAfter), zRowTok, zWhy, sizeof(zWhy)) ||
      !strcmp(zBefore, zAfter)) {
    report("FAIL faults.%s:%s.%s: setup: the operation without faults: rc=%d %s; %s\n", zMode,
           azScenario[sc], azFault[kind], res.rc, res.err, zWhy);
    return 1;
  }
  for (n = 1; n < 400 && ok; n++) {
    int fired;
    if (prepare(sc, zPath, zLive, zWhy, sizeof(zWhy))) {
      report("FAIL faults.%s:%s.%s: N=%d: setup: %s\n", zMode, azScenario[sc], azFault[kind], n,
             zWhy);
      return 1;
    }
    db = open_db(zPath, "faults", 1, zWhy, sizeof(zWhy));
    if (db == 0) {
      report("FAIL faults.%s:%s.%s: N=%d: %s\n", zMode, azScenario[sc], azFault[kind], n, zWhy);
      return 1;
    }
    exec_ok(db, "PRAGMA synchronous=FULL", zWhy, sizeof(zWhy));
    fvfs_arm(&vfs, kind, n, kind == FVFS_FULL);
    operate(sc, db, zLive, &res, zTok);
    fired = vfs.nFired;
    fvfs_arm(&vfs, FVFS_NONE, 0, 0);
    /* answer: success, or an I/O / full-disk error with a message */
    if (res.rc) {
      int prim = res.rc & 0xff;
      if (!((prim == SQLITE_IOERR || prim == SQLITE_FULL) ||
            ((prim == SQLITE_ERROR || prim == SQLITE_CONSTRAINT) &&
             (strstr(res.err, "I/O") || strstr(res.err, "full")))) ||
          res.err[0] == 0) {
        report("FAIL faults.%s:%s.%s: N=%d: not an I/O error: rc=%d \"%s\"\n", zMode,
               azScenario[sc], azFault[kind], n, res.rc, res.err);
        ok = 0;
      }
    }
    if (!ok) {
      sqlite3_close(db);
      break;
    }
    /* state: before or after, after when it reported success (read by
    ** another connection while this one stays open) */
    if (state_of(zPath, zKey, zState, sizeof(zState), zRowTok, zWhy, sizeof(zWhy))) {
      report("FAIL faults.%s:%s.%s: N=%d: %s\n", zMode, azScenario[sc], azFault[kind], n, zWhy);
      sqlite3_close(db);
      ok = 0;
      break;
    }
    if (!strcmp(zState, zAfter)) {
      nAfter++;
      if (res.rc) nFailedAfter++;
      if (res.rc == 0 && zTok[0] && strcmp(zTok, zRowTok)) {
        report("FAIL faults.%s:%s.%s: N=%d: the reported token %s is not the row's %s\n", zMode,
               azScenario[sc], azFault[kind], n, zTok, zRowTok);
        ok = 0;
      }
    } else if (!strcmp(zState, zBefore) && res.rc) {
      nBefore++;
    } else {
      report(
          "FAIL faults.%s:%s.%s: N=%d: rc=%d %s; the file is %s\n      got    %s\n      before "
          "%s\n      after  %s\n",
          zMode, azScenario[sc], azFault[kind], n, res.rc, res.err,
          res.rc ? "neither the state before nor after" : "not the state after a success", zState,
          zBefore, zAfter);
      ok = 0;
    }
    /* next: the fault is gone; on the same connection a claim of a new
    ** key works at once (not on a format-1 file: every operation but the
    ** upgrade is refused there), and so does the retry of a failed one */
    if (ok && sc != SC_UPGRADE) {
      Res nx;
      run(db, "SELECT idem_claim('L', 't', 'c', 'tool', '{\"next\":1}', 'external', 'next-1')",
          &nx);
      if (nx.rc || !strstr(nx.text, "\"decision\":\"admitted\"")) {
        report("FAIL faults.%s:%s.%s: N=%d: the next claim after the fault: rc=%d %s%s\n", zMode,
               azScenario[sc], azFault[kind], n, nx.rc, nx.err, nx.text);
        ok = 0;
      }
    }
    if (ok && res.rc && !strcmp(zState, zBefore)) {
      operate(sc, db, zLive, &r2, zTok);
      if (r2.rc) {
        report("FAIL faults.%s:%s.%s: N=%d: the retry after the fault failed: rc=%d %s\n", zMode,
               azScenario[sc], azFault[kind], n, r2.rc, r2.err);
        ok = 0;
      }
    }
    sqlite3_close(db);
    if (!fired) break; /* the operation never reached the N-th call: done */
  }
  if (ok) {
    printf("PASS faults.%s:%s.%s (%d runs: %d failed cleanly, %d completed%s)\n", zMode,
           azScenario[sc], azFault[kind], n, nBefore, nAfter,
           nFailedAfter ? ", some after reporting an error" : "");
    if (nFailedAfter) {
      printf(
          "  faults.%s:%s.%s: %d runs reported an error although the operation was committed "
          "(a failed sync after the commit point)\n",
          zMode, azScenario[sc], azFault[kind], nFailedAfter);
    }
  }
  return ok ? 0 : 1;
}

/* What a power loss now would leave of zPath: the files as of their last
** sync, copied to zImg (and zImg-wal). Returns 0 or writes why. */
static int power_loss_image(const char *zPath, const char *zImg, char *zWhy, size_t nWhy) {
  char zFrom[700], zTo[700];
  remove_db(zImg);
  fmt_str(zFrom, sizeof(zFrom), "%s-synced", zPath);
  if (copy_file(zFrom, zImg)) {
    fmt_str(zWhy, nWhy, "no synced copy of %s", zPath);
    return 1;
  }
  fmt_str(zFrom, sizeof(zFrom), "%s-wal-synced", zPath);
  fmt_str(zTo, sizeof(zTo), "%s-wal", zImg);
  if (access(zFrom, F_OK) == 0 && copy_file(zFrom, zTo)) {
    fmt_str(zWhy, nWhy, "cannot copy %s", zFrom);
    return 1;
  }
  return 0;
}

/* The answer of zSql on the power-loss image of zPath (the extension
** loaded, the shim's clock at clockMs) to *pRes. Returns 0 or writes why. */
static int on_image(const char *zPath, sqlite3_int64 clockMs, const char *zSql, Res *pRes,
                    char *zWhy, size_t nWhy) {
  char zImg[700];
  sqlite3_int64 saved = vfs.clockMs;
  sqlite3 *db;
  fmt_str(zImg, sizeof(zImg), "%s-image", zPath);
  if (power_loss_image(zPath, zImg, zWhy, nWhy)) return 1;
  vfs.bKeepSynced = 0;
  vfs.clockMs = clockMs;
  db = open_db(zImg, "faults", 1, zWhy, nWhy);
  if (db) {
    run(db, zSql, pRes);
    sqlite3_close(db);
  }
  vfs.bKeepSynced = 1;
  vfs.clockMs = saved;
  return db == 0;
}

/* Check lost-settle's point zName: zSql on the image answers zWant. */
static int image_check(const char *zPath, const char *zName, sqlite3_int64 clockMs,
                       const char *zSql, const char *zWant) {
  char zWhy[1024];
  Res r;
  if (on_image(zPath, clockMs, zSql, &r, zWhy, sizeof(zWhy))) {
    report("FAIL faults.%s:lost-settle.%s: %s\n", zMode, zName, zWhy);
    return 1;
  }
  if (r.rc || strcmp(r.text, zWant)) {
    report("FAIL faults.%s:lost-settle.%s: got %s%s, want %s\n", zMode, zName, r.text, r.err,
           zWant);
    return 1;
  }
  report("PASS faults.%s:lost-settle.%s\n", zMode, zName);
  return 0;
}

/* lost-settle's point zName: db reads synchronous=FULL (2). */
static int sync_restored(sqlite3 *db, const char *zName) {
  Res r;
  run(db, "PRAGMA synchronous", &r);
  if (strcmp(r.text, "2")) {
    report("FAIL faults.%s:lost-settle.%s: synchronous reads %s%s, want 2\n", zMode, zName, r.text,
           r.err);
    return 1;
  }
  report("PASS faults.%s:lost-settle.%s\n", zMode, zName);
  return 0;
}

#define LS_STATUS(k)                                                                           \
  "SELECT group_concat(key || ':' || status || ':' || coalesce(result, '-'), ' ') FROM L_rows" \
  " WHERE key IN (" k ")"
#define LS_DECISION(k)                                                                         \
  "SELECT json_extract(idem_claim('L', 't', 'c', 'tool', '{\"k\":\"" k "\"}', 'external', '" k \
  "'), '$.decision')"

/* An authorizer that refuses to change synchronous. */
static int deny_pragma(void *pArg, int op, const char *z1, const char *z2, const char *zDb,
                       const char *zTrig) {
  (void)pArg;
  (void)zDb;
  (void)zTrig;
  if (op != SQLITE_PRAGMA) return SQLITE_OK;
  return z1 && !strcmp(z1, "synchronous") && z2 ? SQLITE_DENY : SQLITE_OK;
}

/* The lost-settle scenario (WAL only). Returns the number of failures. */
static int lost_settle(void) {
  char zPath[600], zWhy[1024], zTok[40], zSql[512];
  sqlite3_int64 past = CLOCK0 + 61000; /* after the 60 s lease */
  sqlite3 *db;
  Res r;
  int n = 0, i;
  const char *azSuffix[] = {"-synced", "-wal-synced", "-image-synced", "-image-wal-synced"};
  fmt_str(zPath, sizeof(zPath), "%s/lost-settle.db", zDir);
  remove_db(zPath);
  for (i = 0; i < 4; i++) {
    fmt_str(zSql, sizeof(zSql), "%s%s", zPath, azSuffix[i]);
    unlink(zSql);
  }
  vfs.clockMs = CLOCK0;
  vfs.bKeepSynced = 1;
  db = open_db(zPath, "faults", 1, zWhy, sizeof(zWhy));
  if (db == 0 || exec_ok(db,
                         "PRAGMA journal_mode=wal; PRAGMA synchronous=FULL;"
                         "CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=60);"
                         "CREATE TABLE g1(tenant, k, tok, v);"
                         "SELECT idem_guard('L', 'g1', 'k', 'tenant', 'tok');",
                         zWhy, sizeof(zWhy))) {
    report("FAIL faults.%s:lost-settle: setup: %s\n", zMode, zWhy);
    sqlite3_close(db);
    vfs.bKeepSynced = 0;
    return 1;
  }
  run(db, "SELECT idem_claim('L', 't', 'c', 'tool', '{\"k\":\"A\"}', 'external', 'A')", &r);
  if (r.rc == 0 && json_field(r.text, "token", zTok, sizeof(zTok))) {
    fmt_str(zSql, sizeof(zSql), "SELECT idem_settle('L', '%s', 'succeeded', '{\"r\":1}')", zTok);
    run(db, zSql, &r);
  }
  if (r.rc) {
    report("FAIL faults.%s:lost-settle: claim and settle A: %s\n", zMode, r.err);
    n++;
  } else {
    n += image_check(zPath, "settle", CLOCK0, LS_STATUS("'A'"), "A:claimed:-");
    n += image_check(zPath, "settle-unknown", past, LS_DECISION("A"), "unknown");
    n += sync_restored(db, "restored");
    /* a settle refused after synchronous was lowered sets it back too */
    run(db, zSql, &r);
    if (strcmp(r.err, "idem_settle: illegal transition succeeded -> succeeded for key \"A\"")) {
      report("FAIL faults.%s:lost-settle.refused: got %s%s\n", zMode, r.text, r.err);
      n++;
    }
    n += sync_restored(db, "refused-restored");
    /* a connection that may not change synchronous settles synced */
    sqlite3_set_authorizer(db, deny_pragma, 0);
    run(db, "SELECT idem_claim('L', 't', 'c', 'tool', '{\"k\":\"D\"}', 'external', 'D')", &r);
    if (r.rc == 0 && json_field(r.text, "token", zTok, sizeof(zTok))) {
      char zD[512];
      fmt_str(zD, sizeof(zD), "SELECT idem_settle('L', '%s', 'succeeded', '{\"d\":1}')", zTok);
      run(db, zD, &r);
    }
    sqlite3_set_authorizer(db, 0, 0);
    if (r.rc) {
      report("FAIL faults.%s:lost-settle.denied: claim and settle D: %s\n", zMode, r.err);
      n++;
    } else {
      n += image_check(zPath, "denied", CLOCK0, LS_STATUS("'D'"), "D:succeeded:{\"d\":1}");
    }
    run(db, "SELECT idem_claim('L', 't', 'c', 'tool', '{\"k\":\"B\"}', 'external', 'B')", &r);
    if (r.rc) {
      report("FAIL faults.%s:lost-settle: claim B: %s\n", zMode, r.err);
      n++;
    } else {
      n += image_check(zPath, "carried", CLOCK0, LS_STATUS("'A','B'"),
                       "A:succeeded:{\"r\":1} B:claimed:-");
      n += image_check(zPath, "carried-replay", past, LS_DECISION("A"), "replay");
    }
    run(db, "BEGIN IMMEDIATE", &r);
    if (r.rc == 0)
      run(db, "SELECT idem_claim('L', 't', 'c', 'tool', '{\"k\":\"C\"}', 'local', 'C')", &r);
    if (r.rc == 0 && json_field(r.text, "token", zTok, sizeof(zTok))) {
      fmt_str(zSql, sizeof(zSql), "INSERT INTO g1 VALUES('t', 'C', '%s', 1)", zTok);
      run(db, zSql, &r);
      fmt_str(zSql, sizeof(zSql), "SELECT idem_settle('L', '%s', 'succeeded', '{\"o\":1}')", zTok);
      if (r.rc == 0) run(db, zSql, &r);
      if (r.rc == 0) run(db, "COMMIT", &r);
    }
    if (r.rc) {
      report("FAIL faults.%s:lost-settle: local C: %s\n", zMode, r.err);
      n++;
    } else {
      n += image_check(zPath, "local", CLOCK0,
                       "SELECT (" LS_STATUS("'C'") ") || ' ' || (SELECT count(*) FROM g1 WHERE "
                       "k='C')",
                       "C:succeeded:{\"o\":1} 1");
    }
  }
  sqlite3_close(db);
  vfs.bKeepSynced = 0;
  return n;
}

int main(int argc, char **argv) {
  int i, sc, kind;
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--ext") && i + 1 < argc) zExt = argv[++i];
    else if (!strcmp(a, "--dir") && i + 1 < argc) zDir = argv[++i];
    else if (!strcmp(a, "--mode") && i + 1 < argc) zMode = argv[++i];
    else if (!strcmp(a, "--fixture") && i + 1 < argc) zFixture = argv[++i];
    else if (!strcmp(a, "--only") && i + 1 < argc) zOnly = argv[++i];
    else if (!strcmp(a, "--control")) bControl = 1;
    else {
      fprintf(stderr,
              "usage: faults [--ext PATH] --dir DIR [--mode wal|delete] [--fixture F] "
              "[--only SCENARIO]\n");
      return 2;
    }
  }
  if (zDir == 0 || (strcmp(zMode, "wal") && strcmp(zMode, "delete"))) {
    fprintf(stderr, "faults: --dir DIR is required; --mode is wal or delete\n");
    return 2;
  }
  if (fvfs_register(&vfs, "faults") != SQLITE_OK) {
    printf("FAIL faults.%s:setup: cannot register the shim VFS\n", zMode);
    return 1;
  }
  if (bControl) {
    /* a lost write must be caught by some N; the FAIL line it prints is
    ** the evidence, so it is renamed to a note */
    int caught;
    fflush(stdout);
    vfs.clockMs = CLOCK0;
    printf("  faults.%s:control: a lying disk (the N-th write is lost) and must be caught\n",
           zMode);
    caught = sweep(SC_RECIPE, FVFS_DROP);
    if (caught) printf("PASS faults.%s:control (a lost write was caught)\n", zMode);
    else
      printf("FAIL faults.%s:control: no lost write was caught: the checks cannot fail\n", zMode);
    return caught ? 0 : 1;
  }
  for (sc = 0; sc < SC_N; sc++) {
    if (zOnly && strcmp(zOnly, azScenario[sc])) continue;
    if (sc == SC_UPGRADE && zFixture == 0) continue;
    for (kind = FVFS_WRITE; kind <= FVFS_FULL; kind++) {
      vfs.clockMs = CLOCK0;
      nFail += sweep(sc, kind);
    }
  }
  if (!strcmp(zMode, "wal") && (zOnly == 0 || !strcmp(zOnly, "lost-settle")))
    nFail += lost_settle();
  return nFail ? 1 : 0;
}

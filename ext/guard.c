/*
** guard.c: claim-before-act for local writes.
**
**   idem_guard(ledger, table, key_column, tenant_column [, token_column])
**   idem_unguard(ledger, table)
**   idem_guard_check(ledger, ledger_id, table, tenant, key [, token])   -- the triggers' check
**   idem_guard_member(ledger, ledger_id, guard_id, tenant, key, rowid)  -- the member's record
**
** A guard is three triggers on a rowid table in the ledger's schema, whose
** text guard_schema.c writes (ledger_guard_trigger_sql: the member
** trigger calls idem_guard_member): "<table>_idem_<ledger>_insert"
** checks that the new row's (tenant, key) holds a live claimed claim (and
** its token), "..._member" records the row as a member of that claim, and
** "..._update" refuses a change of the rowid, key, tenant or token. The
** guard is recorded in <ledger>_guards after its triggers exist (that
** table's own trigger requires them). Rows already in the table when the
** guard is installed are left alone.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#include "idem_internal.h"

#include <string.h>

/* Does column zCol exist in zDb.zTable? */
static int column_exists(sqlite3 *db, const char *zDb, const char *zTable, const char *zCol) {
  return sqlite3_table_column_metadata(db, zDb, zTable, zCol, 0, 0, 0, 0, 0) == SQLITE_OK;
}

/* The end of idem_guard and idem_unguard: end the savepoint s (when
** given), then answer 1, or the error rc with zErr (the connection's
** message for rc when zErr is NULL), reported with the code rcShown. */
static void guard_answer(sqlite3_context *ctx, sqlite3 *db, const char *zFunc, IdemSave *s, int rc,
                         int rcShown, char *zErr) {
  /* the message of the failing statement, before the undo replaces it */
  if (rc && zErr == 0 && rc != SQLITE_NOMEM) {
    zErr = idem_db_error(db, zFunc, rc);
  }
  if (s) {
    int rcEnd = idem_save_end(s, rc);
    if (rc == SQLITE_OK && rcEnd != SQLITE_OK) {
      rc = rcShown = rcEnd;
      if (rc != SQLITE_NOMEM) zErr = idem_db_error(db, zFunc, rc);
    }
  }
  if (rc) {
    idem_result_error(ctx, rcShown, zErr);
    return;
  }
  sqlite3_result_int(ctx, 1);
}

static void idem_guard_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  static const char *zFunc = "idem_guard";
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  IdemLedger *p = idem_ledger_resolve(ctx, 0, argv[0], zFunc);
  const char *zTable, *zKeyCol, *zTenCol = 0, *zTokCol = 0;
  const char *azName[4] = {"table", "key_column", "tenant_column", "token_column"};
  char *zErr = 0, *zSql = 0;
  sqlite3_stmt *pS = 0;
  IdemSave sv, *pSave = 0;
  int rc = SQLITE_OK, i;

  if (p == 0) return;
  /* a ledger missing a shadow table takes no new guard */
  rc = ledger_usable(p, zFunc, &zErr);
  if (rc) goto done;
  for (i = 1; i < argc; i++) {
    int t = sqlite3_value_type(argv[i]);
    if (t == SQLITE_NULL && (i == 3 || i == 4)) continue;
    if (t != SQLITE_TEXT || sqlite3_value_bytes(argv[i]) == 0) {
      zErr = sqlite3_mprintf("%s: %s must be a non-empty TEXT name", zFunc, azName[i - 1]);
      rc = SQLITE_MISUSE;
      goto done;
    }
  }
  zTable = (const char *)sqlite3_value_text(argv[1]);
  zKeyCol = (const char *)sqlite3_value_text(argv[2]);
  if (sqlite3_value_type(argv[3]) == SQLITE_TEXT)
    zTenCol = (const char *)sqlite3_value_text(argv[3]);
  if (argc > 4 && sqlite3_value_type(argv[4]) == SQLITE_TEXT) {
    zTokCol = (const char *)sqlite3_value_text(argv[4]);
  }
  if (zTable == 0 || zKeyCol == 0) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  if (zTenCol == 0 && !ledger_option(p, IDEM_OPT_SINGLE)) {
    zErr = sqlite3_mprintf(
        "%s: tenant_column is NULL, but ledger %s was not created with "
        "single_tenant=1",
        zFunc, ledger_name(p));
    rc = SQLITE_MISUSE;
    goto done;
  }
  /* a rowid table of the ledger's schema, not a view, virtual or shadow table */
  zSql = sqlite3_mprintf(
      "SELECT type, sql FROM \"%w\".sqlite_schema WHERE name=%Q COLLATE "
      "NOCASE AND type IN ('table','view')",
      ledger_schema(p), zTable);
  if (zSql == 0) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  rc = sqlite3_prepare_v2(db, zSql, -1, &pS, 0);
  if (rc) goto done;
  rc = sqlite3_step(pS);
  if (rc != SQLITE_ROW) {
    rc = rc == SQLITE_DONE ? SQLITE_OK : sqlite3_errcode(db);
    if (rc == SQLITE_OK) {
      zErr = sqlite3_mprintf("%s: no table \"%s\" in schema %s, the schema of ledger %s", zFunc,
                             zTable, ledger_schema(p), ledger_name(p));
      rc = SQLITE_ERROR;
    }
    goto done;
  }
  {
    const char *zType = (const char *)sqlite3_column_text(pS, 0);
    const char *zTSql = (const char *)sqlite3_column_text(pS, 1);
    int bShadow = storage_is_own_table(ledger_name(p), zTable);
    int bVirtual = zTSql && sqlite3_strnicmp(zTSql, "CREATE VIRTUAL", 14) == 0;
    int bNoRowid = 0;
    if (zTSql) {
      /* WITHOUT ROWID appears only at the end of a CREATE TABLE statement */
      const char *z = strstr(zTSql, ")");
      while (z) {
        const char *zNext = strstr(z + 1, ")");
        if (zNext == 0) break;
        z = zNext;
      }
      if (z && sqlite3_strlike("%without%rowid%", z, 0) == 0) bNoRowid = 1;
    }
    if (zType == 0 || strcmp(zType, "table") != 0 || bShadow || bVirtual || bNoRowid) {
      zErr =
          sqlite3_mprintf("%s: \"%s\" is not a rowid table that can be guarded (%s)", zFunc, zTable,
                          zType && strcmp(zType, "view") == 0 ? "a view"
                          : bShadow                           ? "a shadow table of the ledger"
                          : bVirtual                          ? "a virtual table"
                                                              : "a WITHOUT ROWID table");
      rc = SQLITE_MISUSE;
      goto done;
    }
  }
  sqlite3_finalize(pS);
  pS = 0;
  for (i = 2; i < argc; i++) {
    const char *zCol = (const char *)sqlite3_value_text(argv[i]);
    if (zCol && !column_exists(db, ledger_schema(p), zTable, zCol)) {
      zErr = sqlite3_mprintf("%s: table \"%s\" has no column \"%s\" (%s)", zFunc, zTable, zCol,
                             azName[i - 1]);
      rc = SQLITE_ERROR;
      goto done;
    }
  }
  sqlite3_free(zSql);
  zSql = 0;
  pSave = &sv;
  rc = idem_save_begin(pSave, db, zFunc);
  if (rc) goto done;
  /* the write lock before the guards table is read: a read first would
  ** not wait for it (its upgrade to a write skips the busy handler) */
  rc = ledger_write_first(p, zFunc, &zErr);
  /* a ledger missing one of its own triggers (or a guard's) takes no new
  ** guard: its member trigger would write into tables no longer checked */
  if (rc == SQLITE_OK) rc = ledger_check_triggers(p, zFunc, &zErr);
  if (rc) goto done;
  {
    /* one guard per table; the new guard's id is known before its
    ** triggers, which name it */
    sqlite3_int64 gid = 0;
    int bGuarded = 0;
    rc = storage_guard_next(p, zTable, &bGuarded, &gid);
    if (rc) goto done;
    if (bGuarded) {
      zErr = sqlite3_mprintf("%s: table \"%s\" is already guarded by ledger %s", zFunc, zTable,
                             ledger_name(p));
      rc = SQLITE_CONSTRAINT;
      goto done;
    }
    rc = ledger_guard_create(db, ledger_schema(p), ledger_name(p), ledger_identity(p), gid, zTable,
                             zTable, zKeyCol, zTenCol, zTokCol, 0);
    if (rc) goto done;
    rc = storage_guard_insert(p, gid, zTable, zKeyCol, zTenCol, zTokCol);
    if (rc) goto done;
  }

done:
  sqlite3_finalize(pS);
  sqlite3_free(zSql);
  guard_answer(ctx, db, zFunc, pSave, rc, rc == SQLITE_MISUSE ? SQLITE_ERROR : rc, zErr);
}

static void idem_unguard_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  static const char *zFunc = "idem_unguard";
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  IdemLedger *p = idem_ledger_resolve(ctx, 0, argv[0], zFunc);
  const char *zTable = 0;
  char *zErr = 0, *zBase = 0, *zKey = 0;
  sqlite3_int64 iGuard = 0;
  IdemSave sv;
  int rc, bRows = 0;
  (void)argc;
  if (p == 0) return;
  if (sqlite3_value_type(argv[1]) == SQLITE_TEXT)
    zTable = (const char *)sqlite3_value_text(argv[1]);
  if (zTable == 0) {
    zErr = sqlite3_mprintf("%s: table must be TEXT", zFunc);
    idem_result_error(ctx, SQLITE_ERROR, zErr);
    return;
  }
  rc = idem_save_begin(&sv, db, zFunc);
  if (rc) goto done;
  /* it reads the guards before it writes: the write lock first (its
  ** statement writes the rows table, which a broken ledger may lack: then
  ** the lock comes with the first write below) */
  rc = storage_table_exists(p, LEDGER_TABLE_ROWS, &bRows);
  if (rc == SQLITE_OK && bRows) rc = ledger_write_first(p, zFunc, &zErr);
  if (rc) goto done;
  /* the guard of the table by its current name */
  rc = storage_guard_find(p, zTable, &iGuard, &zBase);
  if (rc) goto done;
  if (zBase == 0) {
    zErr = sqlite3_mprintf("%s: table \"%s\" is not guarded by ledger %s", zFunc, zTable,
                           ledger_name(p));
    rc = SQLITE_ERROR;
    goto done;
  }
  /* rows written under a claim that is still open are its members: the
  ** guard that records them stays until the claim is settled */
  rc = storage_guard_open_key(p, iGuard, &zKey);
  if (rc) goto done;
  if (zKey) {
    zErr = sqlite3_mprintf(
        "%s: table \"%s\" has rows written under the open claim of key \"%s\" of ledger %s; "
        "settle or resolve it first",
        zFunc, zTable, zKey, ledger_name(p));
    rc = SQLITE_ERROR;
    goto done;
  }
  /* the triggers first: the guards table's own trigger requires them gone */
  rc = ledger_guard_drop(db, ledger_schema(p), ledger_name(p), zBase);
  if (rc) goto done;
  rc = storage_guard_delete(p, iGuard);
  if (rc) goto done;
  if (storage_own_changes(p) != 1) {
    zErr = sqlite3_mprintf("%s: the guard of \"%s\" could not be removed", zFunc, zTable);
    rc = SQLITE_ERROR;
    goto done;
  }
done:
  sqlite3_free(zBase);
  sqlite3_free(zKey);
  guard_answer(ctx, db, zFunc, &sv, rc, rc, zErr);
}

/* The current name of the table guarded under the name zBase (a copy
** of zBase if it cannot be found). sqlite3_malloc; NULL on OOM. */
static char *current_table(IdemLedger *p, const char *zBase) {
  char *zOut = 0;
  if (ledger_guard_table(ledger_db(p), ledger_schema(p), ledger_name(p), zBase, &zOut) !=
          SQLITE_OK ||
      zOut == 0) {
    sqlite3_free(zOut);
    zOut = sqlite3_mprintf("%s", zBase);
  }
  return zOut;
}

/*
** The tenant rule of a guarded row, the one the member trigger, the
** settle's snapshot and idem_upgrade's inference also follow (they match a
** row to its claim by tenant where the guard names a tenant column): a
** guard with a tenant column needs a TEXT tenant in it, also on a
** single_tenant=1 ledger, whose claims are found by key alone; a NULL
** there would pass the check and never be recorded as a member. Only a
** guard without a tenant column (single_tenant=1 only) passes NULL, which
** the trigger writes as a literal. For a tenant pTenant that is not TEXT:
** SQLITE_OK when it is that literal NULL, else the refusal is reported
** on ctx and the error code returned.
*/
static int tenant_check(sqlite3_context *ctx, IdemLedger *p, const char *zTable,
                        sqlite3_value *pTenant) {
  char *zCol = 0, *zErr, *zCur;
  int bNull = sqlite3_value_type(pTenant) == SQLITE_NULL;
  int rc = storage_guard_tenant_column(p, zTable, &zCol);
  if (rc) {
    idem_result_error(ctx, rc,
                      rc == SQLITE_NOMEM ? 0 : idem_db_error(ledger_db(p), "idem_guard", rc));
    return rc;
  }
  if (zCol == 0 && bNull && ledger_option(p, IDEM_OPT_SINGLE)) return SQLITE_OK;
  zCur = current_table(p, zTable);
  if (zCur && zCol) {
    zErr = sqlite3_mprintf(
        "idem_guard: insert into \"%s\" needs a TEXT tenant in column \"%s\", which its guard "
        "names (a guarded row's tenant is its claim's); got %s",
        zCur, zCol, bNull ? "NULL" : "a non-text value");
  } else {
    /* no guard row names the table: the ledger's check names that gap */
    zErr = zCur ? sqlite3_mprintf("idem_guard: insert into \"%s\" needs a TEXT tenant; got %s",
                                  zCur, bNull ? "NULL" : "a non-text value")
                : 0;
  }
  sqlite3_free(zCol);
  sqlite3_free(zCur);
  idem_result_error(ctx, zErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM, zErr);
  return zErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
}

/*
** idem_guard_check(ledger, ledger_id, table, tenant, key [, token]): 1 when
** (tenant, key) holds a live claimed claim of the ledger with that name
** and identity (with that token, when given); otherwise SQLITE_CONSTRAINT
** naming the table and the key. Reads only; called by a guard's insert
** trigger.
*/
static void idem_guard_check_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  static const char *zFunc = "idem_guard";
  const char *zName = (const char *)sqlite3_value_text(argv[0]);
  const char *zId = (const char *)sqlite3_value_text(argv[1]);
  const char *zTable = (const char *)sqlite3_value_text(argv[2]);
  IdemLedger *p;
  char *zErr = 0, *zWhy = 0;
  int rc = SQLITE_OK;
  if (zName == 0 || zId == 0 || zTable == 0) {
    zErr = sqlite3_mprintf(
        "%s: idem_guard_check needs the ledger's name and identity and the "
        "table's name",
        zFunc);
    idem_result_error(ctx, zErr ? SQLITE_MISUSE : SQLITE_NOMEM, zErr);
    return;
  }
  p = idem_ledger_find_by_id(ctx, zName, zId, &rc);
  if (rc) {
    idem_result_error(ctx, rc, 0);
    return;
  }
  if (p == 0) {
    zErr = sqlite3_mprintf(
        "%s: insert into \"%s\" refused: its guard names ledger %s (%s), "
        "which is not attached",
        zFunc, zTable, zName, zId);
    idem_result_error(ctx, zErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM, zErr);
    return;
  }
  if (sqlite3_value_type(argv[3]) != SQLITE_TEXT) {
    rc = tenant_check(ctx, p, zTable, argv[3]);
    if (rc != SQLITE_OK) return;
  }
  if (sqlite3_value_type(argv[4]) != SQLITE_TEXT) {
    zErr =
        sqlite3_mprintf("%s: insert into \"%s\" needs a key; got %s", zFunc, zTable,
                        sqlite3_value_type(argv[4]) == SQLITE_NULL ? "NULL" : "a non-text value");
    idem_result_error(ctx, zErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM, zErr);
    return;
  }
  rc = ledger_live_claim(p, argv[3], argv[4], argc > 5 ? argv[5] : 0, &zWhy);
  if (rc == SQLITE_OK && zWhy == 0) {
    /* the row would be accepted: only while the guard is whole, so that
    ** its member trigger records it (checked again only when a schema
    ** version changed, as every ledger operation checks) */
    rc = ledger_check_triggers(p, zFunc, &zErr);
    if (rc == SQLITE_OK) {
      sqlite3_result_int(ctx, 1);
      return;
    }
    if (zErr) {
      /* "idem_guard: <why>" as "idem_guard: insert into ... refused: <why>" */
      size_t n = strlen(zFunc);
      const char *zWhyNot = strncmp(zErr, zFunc, n) == 0 && zErr[n] == ':' ? zErr + n + 2 : zErr;
      char *zCur = current_table(p, zTable);
      char *zMsg =
          zCur ? sqlite3_mprintf("%s: insert into \"%s\" refused: %s", zFunc, zCur, zWhyNot) : 0;
      sqlite3_free(zCur);
      sqlite3_free(zErr);
      zErr = zMsg;
      if (zErr == 0) rc = SQLITE_NOMEM;
    }
    idem_result_error(ctx, rc, zErr);
    return;
  }
  if (rc == SQLITE_OK) {
    char *zK = idem_json_string((const char *)sqlite3_value_text(argv[4]));
    char *zCur = current_table(p, zTable);
    zErr = zK && zCur ? sqlite3_mprintf(
                            "%s: insert into \"%s\" refused: key %s needs a live "
                            "claim of ledger %s; %s",
                            zFunc, zCur, zK, ledger_name(p), zWhy)
                      : 0;
    sqlite3_free(zK);
    sqlite3_free(zCur);
    rc = zErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
  }
  sqlite3_free(zWhy);
  if (zErr == 0 && rc != SQLITE_NOMEM)
    zErr = idem_db_error(sqlite3_context_db_handle(ctx), zFunc, rc);
  idem_result_error(ctx, rc, zErr);
}

/*
** idem_guard_member(ledger, ledger_id, guard_id, tenant, key, rowid): a
** guard's member trigger, after its insert trigger accepted the row (the
** rules of a guarded row are idem_guard_check's alone): records the row as
** a member of the claimed local claim of (tenant, key), through the
** ledger's own write (<name>_members takes no other). Answers NULL.
*/
static void idem_guard_member_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  static const char *zFunc = "idem_guard";
  const char *zName = (const char *)sqlite3_value_text(argv[0]);
  const char *zId = (const char *)sqlite3_value_text(argv[1]);
  IdemLedger *p;
  int rc = SQLITE_OK;
  (void)argc;
  if (zName == 0 || zId == 0 || sqlite3_value_type(argv[2]) != SQLITE_INTEGER ||
      sqlite3_value_type(argv[5]) != SQLITE_INTEGER) {
    idem_result_error(ctx, SQLITE_MISUSE,
                      sqlite3_mprintf("%s: idem_guard_member needs the ledger's name and "
                                      "identity, the guard's id and the row's rowid",
                                      zFunc));
    return;
  }
  p = idem_ledger_find_by_id(ctx, zName, zId, &rc);
  if (rc == SQLITE_OK && p == 0) {
    idem_result_error(ctx, SQLITE_CONSTRAINT,
                      sqlite3_mprintf("%s: its guard names ledger %s (%s), which is not attached",
                                      zFunc, zName, zId));
    return;
  }
  if (rc == SQLITE_OK) {
    rc = storage_member_add(p, sqlite3_value_int64(argv[2]), argv[3], argv[4],
                            sqlite3_value_int64(argv[5]));
  }
  if (rc) {
    idem_result_error(
        ctx, rc, rc == SQLITE_NOMEM ? 0 : idem_db_error(sqlite3_context_db_handle(ctx), zFunc, rc));
  }
}

IDEM_GUARDED(idem_guard_func)
IDEM_GUARDED(idem_unguard_func)
IDEM_GUARDED(idem_guard_check_func)
IDEM_GUARDED(idem_guard_member_func)

static const struct {
  const char *zName;
  int nArg, flags;
  void (*xFunc)(sqlite3_context *, int, sqlite3_value **);
} aFn[] = {
    /* they write the schema: DIRECTONLY, so a planted view or trigger
      ** cannot install or remove a guard */
    {"idem_guard", 4, SQLITE_UTF8 | SQLITE_DIRECTONLY, idem_guard_func_guarded},
    {"idem_guard", 5, SQLITE_UTF8 | SQLITE_DIRECTONLY, idem_guard_func_guarded},
    {"idem_unguard", 2, SQLITE_UTF8 | SQLITE_DIRECTONLY, idem_unguard_func_guarded},
    /* it only reads, and must run inside the guard's trigger, also
      ** under trusted_schema=OFF: innocuous */
    {"idem_guard_check", 5, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
     idem_guard_check_func_guarded},
    {"idem_guard_check", 6, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS,
     idem_guard_check_func_guarded},
    /* it writes the ledger's members, from the guard's trigger (also
      ** under trusted_schema=OFF); never folded: not deterministic */
    {"idem_guard_member", 6, SQLITE_UTF8 | SQLITE_INNOCUOUS, idem_guard_member_func_guarded},
};

void idem_unregister_guard(sqlite3 *db) {
  size_t i;
  for (i = 0; i < sizeof(aFn) / sizeof(aFn[0]); i++) {
    sqlite3_create_function(db, aFn[i].zName, aFn[i].nArg, SQLITE_UTF8, 0, 0, 0, 0);
  }
}

int idem_register_guard(sqlite3 *db, void *pConn, char **pzErr) {
  size_t i;
  int rc;
  for (i = 0; i < sizeof(aFn) / sizeof(aFn[0]); i++) {
    rc = sqlite3_create_function(db, aFn[i].zName, aFn[i].nArg, aFn[i].flags, pConn, aFn[i].xFunc,
                                 0, 0);
    if (rc != SQLITE_OK) {
      if (pzErr) {
        *pzErr = sqlite3_mprintf("idempotency: cannot register function %s/%d: %s", aFn[i].zName,
                                 aFn[i].nArg, sqlite3_errstr(rc));
      }
      return rc;
    }
  }
  return SQLITE_OK;
}

/*
** ledger.c: the "idempotency" virtual-table module and the SQL functions
** that claim and settle through it.
**
**   CREATE VIRTUAL TABLE L USING idempotency[(lease_seconds=N, max_attempts=N,
**                                              max_args_bytes=N, single_tenant=0|1,
**                                              retention_seconds=N, require_transaction=0|1)]
**   idem_claim(ledger, tenant, conversation, tool, args [, effect [, operation_id [, options]]])
**   idem_settle(ledger, token, status, detail)
**   idem_resolve(ledger, tenant, key, status, detail)
**   idem_purge(ledger, older_than_seconds)
**   idem_renew(ledger, token [, seconds])                (ledger_renew.c)
**   idem_last_claim(ledger)                              (ledger_last.c)
**   idem_health(ledger)                                  (ledger_health.c)
**   INSERT INTO L(tenant, conversation, tool, args[, effect][, key])   -- a claim
**   SELECT ... FROM L [WHERE tenant=? AND key=?]                       -- effective state
**   DELETE FROM L WHERE ...                                            -- terminal rows only
**
** This file holds the module's methods and every ledger SQL function's
** wrapper: it is the only file that sees sqlite3_vtab, and sqlite3_context
** for the ledger. The connection's registry and the resolution of a ledger
** name are in ledger_conn.c, the shadow tables in ledger_schema.c and ledger_rows.c, the
** claim/settle/resolve state machine in ledger_state.c, and every JSON
** answer is built by json_writer.c (docs/design.md, "The layers").
**
** Every writing function is SQLITE_DIRECTONLY and the module sets
** SQLITE_VTAB_DIRECTONLY: a view or trigger planted in a file cannot claim,
** settle or purge.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <string.h>

/* ------------------------------------------------------------------ */
/* Ledger resolution for the functions                                 */
/* ------------------------------------------------------------------ */

typedef struct LedgerRef LedgerRef;
struct LedgerRef {
  IdemLedger *p;
  char zArg[1]; /* the name as given; allocated to fit */
};

static void ledger_ref_free(void *pArg) {
  LedgerRef *r = (LedgerRef *)pArg;
  ledger_conn_unref(r->p);
  sqlite3_free(r);
}

/*
** Find the connected ledger argument iArg of a function call names
** (ledger_conn_lookup), cached per statement through auxdata. On failure
** reports the error on ctx and returns NULL.
*/
static IdemLedger *ledger_lookup(sqlite3_context *ctx, int iArg, sqlite3_value *pName,
                                 const char *zFunc) {
  IdemConn *pConn = (IdemConn *)sqlite3_user_data(ctx);
  LedgerRef *pRef = (LedgerRef *)sqlite3_get_auxdata(ctx, iArg);
  const char *zName;
  IdemLedger *p = 0;
  char *zErr = 0;
  int rc;

  if (sqlite3_value_type(pName) != SQLITE_TEXT) {
    zErr = sqlite3_mprintf("%s: ledger must be TEXT naming a table USING idempotency", zFunc);
    idem_result_error(ctx, SQLITE_ERROR, zErr);
    return 0;
  }
  zName = (const char *)sqlite3_value_text(pName);
  if (zName == 0) {
    sqlite3_result_error_nomem(ctx);
    return 0;
  }
  if (pRef && !pRef->p->bDead && strcmp(pRef->zArg, zName) == 0) return pRef->p;
  rc = ledger_conn_lookup(pConn, sqlite3_context_db_handle(ctx), zName, sqlite3_value_bytes(pName),
                          zFunc, &p, &zErr);
  if (rc) {
    idem_result_error(ctx, rc, zErr);
    return 0;
  }
  {
    size_t n = strlen(zName);
    pRef = sqlite3_malloc64(sizeof(LedgerRef) + n);
    if (pRef) {
      pRef->p = p;
      p->nRef++;
      memcpy(pRef->zArg, zName, n + 1);
      sqlite3_set_auxdata(ctx, iArg, pRef, ledger_ref_free);
    }
  }
  return p;
}

/*
** For a ledger ledger_lookup found: a function that writes (bWrite) is
** refused on a read-only connection (ledger_conn_writable) and, inside a
** transaction, takes the write lock on the ledger's schema (ledger_write_first)
** before anything of that schema is read, and the ledger's file read when
** connecting it could not (ledger_ready). Outside a transaction every
** statement a function runs is its own transaction, and the functions
** order their reads and writes themselves.
*/
static IdemLedger *ledger_use(sqlite3_context *ctx, IdemLedger *p, const char *zFunc, int bWrite) {
  char *zErr = 0;
  int rc = bWrite ? ledger_conn_writable(p, zFunc, &zErr) : SQLITE_OK;
  if (rc == SQLITE_OK && bWrite && !sqlite3_get_autocommit(p->db)) {
    rc = ledger_write_first(p, zFunc, &zErr);
  }
  if (rc == SQLITE_OK) rc = ledger_ready(p, &zErr);
  if (rc) {
    if (zErr == 0 && (rc & 0xff) != SQLITE_NOMEM) zErr = idem_db_error(p->db, zFunc, rc);
    idem_result_error(ctx, rc, zErr);
    return 0;
  }
  return p;
}

static IdemLedger *ledger_resolve(sqlite3_context *ctx, int iArg, sqlite3_value *pName,
                                  const char *zFunc, int bWrite) {
  IdemLedger *p = ledger_lookup(ctx, iArg, pName, zFunc);
  return p ? ledger_use(ctx, p, zFunc, bWrite) : 0;
}

IdemLedger *idem_ledger_resolve(sqlite3_context *ctx, int iArg, sqlite3_value *pName,
                                const char *zFunc) {
  return ledger_resolve(ctx, iArg, pName, zFunc, 1);
}

/* idem_ledger_resolve for a function that only reads (idem_last_claim):
** no write lock is taken. */
static IdemLedger *ledger_resolve_read(sqlite3_context *ctx, int iArg, sqlite3_value *pName,
                                       const char *zFunc) {
  return ledger_resolve(ctx, iArg, pName, zFunc, 0);
}

IdemLedger *idem_ledger_find_by_id(sqlite3_context *ctx, const char *zName, const char *zId,
                                   int *pRc) {
  return ledger_conn_find_by_id((IdemConn *)sqlite3_user_data(ctx), sqlite3_context_db_handle(ctx),
                                zName, zId, pRc);
}

/* ------------------------------------------------------------------ */
/* The functions' entry points                                         */
/* ------------------------------------------------------------------ */

/* idem_renew(ledger, token [, seconds]) (ledger_renew.c) */
static void idem_renew_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  static const char *zFunc = "idem_renew";
  IdemLedger *p;
  sqlite3_int64 nSec, lease = 0;
  char *zErr = 0;
  int rc = SQLITE_OK;
  p = idem_ledger_resolve(ctx, 0, argv[0], zFunc);
  if (p == 0) return;
  nSec = p->aOpt[IDEM_OPT_LEASE];
  if (argc > 2) rc = ledger_renew_seconds(zFunc, argv[2], &nSec, &zErr);
  if (rc == SQLITE_OK) rc = ledger_renew(p, zFunc, argv[1], nSec, &lease, &zErr);
  if (rc) {
    if (zErr == 0 && rc != SQLITE_NOMEM) zErr = idem_db_error(p->db, zFunc, rc);
    idem_result_error(ctx, rc, zErr);
    return;
  }
  sqlite3_result_int64(ctx, lease);
}

/* idem_health(ledger) (ledger_health.c): reads, so no write lock */
static void idem_health_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  static const char *zFunc = "idem_health";
  IdemLedger *p;
  char *zJson = 0, *zErr = 0;
  int rc;
  (void)argc;
  p = ledger_resolve_read(ctx, 0, argv[0], zFunc);
  if (p == 0) return;
  rc = ledger_health(p, zFunc, &zJson, &zErr);
  if (rc) {
    if (zErr == 0 && (rc & 0xff) != SQLITE_NOMEM) zErr = idem_db_error(p->db, zFunc, rc);
    idem_result_error(ctx, rc, zErr);
    return;
  }
  sqlite3_result_text(ctx, zJson, -1, sqlite3_free);
}

/* idem_last_claim(ledger) (ledger_last.c) */
static void idem_last_claim_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  IdemLedger *p;
  char *zJson = 0;
  int rc;
  (void)argc;
  p = ledger_resolve_read(ctx, 0, argv[0], "idem_last_claim");
  if (p == 0) return;
  rc = ledger_last_answer(ledger_conn_last(p), p, &zJson);
  if (rc) {
    idem_result_error(ctx, rc,
                      rc == SQLITE_NOMEM ? 0 : idem_db_error(p->db, "idem_last_claim", rc));
    return;
  }
  if (zJson) sqlite3_result_text(ctx, zJson, -1, sqlite3_free);
  else sqlite3_result_null(ctx);
}

/*
** require_transaction=1: refuse a claim made while no transaction is open.
** A replicated engine that routes a bare SELECT as a read (dqlite's query
** path, libSQL replicas) runs it where its write is not replicated, and
** the caller would be told "committed" of a claim the cluster never had.
** An INSERT INTO the ledger is a write statement, routed as a write, so
** the option does not apply to it (docs/ledger.md, "require_transaction").
** Returns SQLITE_OK, or SQLITE_MISUSE with *pzErr set; pName is the
** ledger argument as given, which the message names.
*/
static int claim_transaction_check(IdemLedger *p, sqlite3_value *pName, char **pzErr) {
  char *zQ;
  if (p->aOpt[IDEM_OPT_REQUIRE_TXN] == 0 || !sqlite3_get_autocommit(p->db)) return SQLITE_OK;
  zQ = idem_json_string((const char *)sqlite3_value_text(pName));
  if (zQ == 0) return SQLITE_NOMEM;
  *pzErr = sqlite3_mprintf(
      "idem_claim: ledger %s requires a transaction (require_transaction=1): a claim made "
      "outside BEGIN ... COMMIT can be routed as a read by a replicated engine and lost; open a "
      "transaction, claim, and commit before acting",
      zQ);
  sqlite3_free(zQ);
  return *pzErr ? SQLITE_MISUSE : SQLITE_NOMEM;
}

static void idem_claim_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  static const char *zFunc = "idem_claim";
  IdemLedger *p;
  LedgerReq q;
  LedgerDecision d;
  char *zErr = 0;
  int rc, bParseFirst;

  memset(&d, 0, sizeof(d));
  memset(&q, 0, sizeof(q));
  q.args.pMem = &idem_sqlite_mem;
  p = ledger_lookup(ctx, 0, argv[0], zFunc);
  if (p == 0) return;
  /* Inside a transaction the write lock is taken before anything of the
  ** ledger's schema is read (ledger_use). The request itself reads
  ** nothing: when the ledger's file is already read (its options known),
  ** the names are checked, the args made canonical and the key hashed
  ** first, and the lock is taken after, so a transaction's first claim
  ** does not hold it for that work (large args take long to
  ** canonicalise). A ledger not read yet takes the lock first, as every
  ** other function does. */
  bParseFirst = !sqlite3_get_autocommit(p->db) && !p->bUnread;
  if (!bParseFirst && ledger_use(ctx, p, zFunc, 1) == 0) return;
  /* a read-only connection is refused first (ledger_use checks it too) */
  if (bParseFirst && (rc = ledger_conn_writable(p, zFunc, &zErr)) != SQLITE_OK) {
    idem_result_error(ctx, rc, zErr);
    return;
  }
  rc = claim_transaction_check(p, argv[0], &zErr);
  if (rc == SQLITE_OK) {
    /* the eight-argument form (with options) takes NULL for an effect or
    ** operation id not given: its caller must spell every position */
    sqlite3_value *pEffect = argc > 5 ? argv[5] : 0, *pOpId = argc > 6 ? argv[6] : 0;
    if (argc > 7 && sqlite3_value_type(pEffect) == SQLITE_NULL) pEffect = 0;
    if (argc > 7 && sqlite3_value_type(pOpId) == SQLITE_NULL) pOpId = 0;
    rc = ledger_req_parse(p, zFunc, argv[1], argv[2], argv[3], argv[4], pEffect, pOpId, &q, &zErr);
    q.bNoWhy = 1; /* the answer says why; zWhy is for the INSERT path */
  }
  if (rc == SQLITE_OK) rc = ledger_claim_options(p, zFunc, argc > 7 ? argv[7] : 0, &q, &zErr);
  if (rc == SQLITE_OK && bParseFirst) rc = ledger_write_first(p, zFunc, &zErr);
  /* outside a transaction the claim checks the triggers after its read pass */
  if (rc == SQLITE_OK && !sqlite3_get_autocommit(p->db)) {
    rc = ledger_check_triggers(p, zFunc, &zErr);
  }
  if (rc == SQLITE_OK) rc = ledger_claim(p, zFunc, &q, &d, &zErr);
  ledger_req_free(&q);
  if (rc) {
    if (zErr == 0 && rc != SQLITE_NOMEM) zErr = idem_db_error(p->db, zFunc, rc);
    idem_result_error(ctx, rc, zErr);
    return;
  }
  sqlite3_free(d.zWhy);
  sqlite3_result_text(ctx, d.zJson, -1, sqlite3_free);
}

/* idem_settle(ledger, token, status, detail) and
** idem_resolve(ledger, tenant, key, status, detail) */
static void outcome_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *zFunc = argc == 4 ? "idem_settle" : "idem_resolve";
  IdemLedger *p;
  char *zErr = 0, *zJson = 0;
  int rc;
  /* inside a transaction resolving took the write lock first */
  p = idem_ledger_resolve(ctx, 0, argv[0], zFunc);
  if (p == 0) return;
  if (argc == 4) {
    rc = ledger_outcome(p, zFunc, argv[1], 0, 0, argv[2], argv[3], &zJson, &zErr);
  } else {
    rc = ledger_outcome(p, zFunc, 0, argv[1], argv[2], argv[3], argv[4], &zJson, &zErr);
  }
  if (rc) {
    if (zErr == 0 && rc != SQLITE_NOMEM) zErr = idem_db_error(p->db, zFunc, rc);
    idem_result_error(ctx, rc, zErr);
    return;
  }
  sqlite3_result_text(ctx, zJson, -1, sqlite3_free);
}

/* ------------------------------------------------------------------ */
/* idem_purge (idem_last_claim is in ledger_last.c)                   */
/* ------------------------------------------------------------------ */

static void idem_purge_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  static const char *zFunc = "idem_purge";
  IdemLedger *p;
  char *zErr = 0;
  sqlite3_int64 n;
  int rc;
  (void)argc;
  p = idem_ledger_resolve(ctx, 0, argv[0], zFunc);
  if (p == 0) return;
  n = sqlite3_value_int64(argv[1]);
  if (sqlite3_value_type(argv[1]) != SQLITE_INTEGER || n < 0 || n > 315360000000LL) {
    char *zGot = ledger_arg_got(argv[1]);
    zErr = zGot ? sqlite3_mprintf(
                      "%s: older_than_seconds must be an INTEGER from 0 to "
                      "315360000000, got %s",
                      zFunc, zGot)
                : 0;
    sqlite3_free(zGot);
    idem_result_error(ctx, zErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM, zErr);
    return;
  }
  /* inside a transaction resolving took the write lock first; outside,
  ** the trigger check reads on its own and the DELETE takes the lock */
  rc = ledger_check_triggers(p, zFunc, &zErr);
  if (rc == SQLITE_OK) rc = storage_purge_before(p, ledger_now(p) - n * 1000);
  if (rc) {
    if (zErr == 0 && rc != SQLITE_NOMEM) zErr = idem_db_error(p->db, zFunc, rc);
    idem_result_error(ctx, rc, zErr);
    return;
  }
  sqlite3_result_int64(ctx, storage_own_changes(p));
}

static void idem_upgrade_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  static const char *zFunc = "idem_upgrade";
  IdemLedger *p;
  char *zErr = 0, *zJson = 0;
  int rc;
  (void)argc;
  /* inside a transaction resolving took the write lock first */
  p = idem_ledger_resolve(ctx, 0, argv[0], zFunc);
  if (p == 0) return;
  rc = ledger_upgrade(p, zFunc, &zJson, &zErr);
  if (rc) {
    sqlite3_free(zJson);
    if (zErr == 0 && (rc & 0xff) != SQLITE_NOMEM) zErr = idem_db_error(p->db, zFunc, rc);
    idem_result_error(ctx, rc, zErr);
    return;
  }
  sqlite3_result_text(ctx, zJson, -1, sqlite3_free);
}

/* ------------------------------------------------------------------ */
/* The virtual table                                                   */
/* ------------------------------------------------------------------ */

#define COL_TENANT 0
#define COL_KEY 1
#define COL_CONV 2
#define COL_TOOL 3
#define COL_ARGS 4
#define COL_EFFECT 5
#define COL_STATUS 6
#define COL_TOKEN 10
#define N_COL 15

static const char zDeclare[] =
    "CREATE TABLE x(tenant, \"key\", conversation, tool, args, effect, status, result, error,"
    " attempt, token, created_at, updated_at, lease_until, members)";

static const char *const azCol[N_COL] = {"tenant",     "key",         "conversation", "tool",
                                         "args",       "effect",      "status",       "result",
                                         "error",      "attempt",     "token",        "created_at",
                                         "updated_at", "lease_until", "members"};

static int ledger_init(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                       sqlite3_vtab **ppVtab, char **pzErr, int bCreate) {
  IdemConn *pConn = (IdemConn *)pAux;
  IdemLedger *p;
  sqlite3_int64 aVal[IDEM_N_OPT];
  size_t nDb = strlen(argv[1]), nName = strlen(argv[2]);
  char zId[17];
  int rc, iFormat = LEDGER_FORMAT;

  *ppVtab = 0;
  zId[0] = 0;
  /* Under dqlite an autocommit claim can be lost (docs/replication.md, "Running
  ** replicated"): a ledger made there requires a transaction by default. */
  rc = ledger_parse_options(argc, argv, bCreate && ledger_under_dqlite(db, argv[1]), aVal, pzErr);
  if (rc) return rc;
  if (bCreate) {
    int bAdopted = 0;
    /* shadow tables left by a copy (.clone) are adopted, not recreated */
    rc = ledger_lifecycle_adopt(db, argc, argv, aVal, zId, &iFormat, &bAdopted, pzErr);
    if (rc) return rc;
    if (!bAdopted) {
      unsigned char a[8];
      sqlite3_randomness(8, a);
      idem_hex(a, 8, zId);
      rc = ledger_create_schema(db, argv[1], argv[2], aVal, zId, pzErr);
      if (rc) return rc;
    }
  }
  rc = sqlite3_declare_vtab(db, zDeclare);
  if (rc) return rc;
  /* a planted view or trigger must not reach the ledger */
  sqlite3_vtab_config(db, SQLITE_VTAB_DIRECTONLY);
  /* INSERT OR IGNORE skips a taken key */
  sqlite3_vtab_config(db, SQLITE_VTAB_CONSTRAINT_SUPPORT, 1);

  p = sqlite3_malloc64(sizeof(*p) + nDb + nName + 2);
  if (p == 0) return SQLITE_NOMEM;
  memset(p, 0, sizeof(*p));
  p->zDb = (char *)&p[1];
  memcpy(p->zDb, argv[1], nDb + 1);
  p->zName = p->zDb + nDb + 1;
  memcpy(p->zName, argv[2], nName + 1);
  p->db = db;
  p->nRef = 1;
  memcpy(p->aOpt, aVal, sizeof(aVal));
  memcpy(p->zId, zId, sizeof(zId));
  p->iFormat = iFormat;
  p->iDurable = -1;
  p->iDqlite = -1;
  if (!bCreate) {
    /* inside a transaction that holds no lock on the schema yet, the file
    ** is read at the first use (ledger_ready) */
    p->bUnread = 1;
    if (sqlite3_get_autocommit(db) || sqlite3_txn_state(db, p->zDb) != SQLITE_TXN_NONE) {
      rc = ledger_read_file(p, pzErr);
      if (rc) {
        sqlite3_free(p->zBroken);
        sqlite3_free(p);
        return rc;
      }
    }
  }
  ledger_conn_add(pConn, p);
  *ppVtab = &p->base;
  return SQLITE_OK;
}

static int vtab_error(sqlite3_vtab *pVtab, int rc, char *zErr) {
  sqlite3_free(pVtab->zErrMsg);
  pVtab->zErrMsg = zErr;
  if (zErr == 0 && rc != SQLITE_NOMEM) return SQLITE_NOMEM;
  return rc;
}

/* ledger_ready for a method of the virtual table: the error goes to the
** vtab's message. */
static int vtab_ready(IdemLedger *p) {
  char *zErr = 0;
  int rc = ledger_ready(p, &zErr);
  if (rc == SQLITE_OK) return SQLITE_OK;
  if (zErr == 0 && (rc & 0xff) != SQLITE_NOMEM) zErr = idem_db_error(p->db, "idempotency", rc);
  return vtab_error(&p->base, rc, zErr);
}

/*
** A ledger's name must be UTF-8 text: its functions are given the name as
** TEXT, and every answer and message names it. Returns SQLITE_OK, or
** SQLITE_ERROR with *pzErr "idempotency: cannot <zWhat>: ..." (its name
** shown as a JSON string, each ill-formed sequence as U+FFFD).
*/
static int name_check(const char *zName, const char *zWhat, char **pzErr) {
  int iBad = idem_utf8_invalid_at(zName);
  char *zQ;
  if (iBad < 0) return SQLITE_OK;
  zQ = idem_json_string(zName);
  *pzErr = zQ ? sqlite3_mprintf(
                    "idempotency: cannot %s %s: the name is not valid UTF-8 (byte 0x%02x at offset "
                    "%d); a ledger's name must be UTF-8 text",
                    zWhat, zQ, (unsigned char)zName[iBad], iBad)
              : 0;
  sqlite3_free(zQ);
  return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
}

static int xCreate(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                   sqlite3_vtab **ppVtab, char **pzErr) {
  int rc = name_check(argv[2], "create ledger", pzErr);
  if (rc) {
    *ppVtab = 0;
    return rc;
  }
  if (sqlite3_stricmp(argv[1], "temp") == 0) {
    /* another connection (a retry in a new process) would not see it */
    *pzErr = sqlite3_mprintf(
        "idempotency: ledger %s cannot be created in the temp schema: a TEMP ledger is seen by "
        "this connection only and would not deduplicate a retry made on another one; create it "
        "in main or an attached database",
        argv[2]);
    *ppVtab = 0;
    return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  return ledger_init(db, pAux, argc, argv, ppVtab, pzErr, 1);
}

static int xConnect(sqlite3 *db, void *pAux, int argc, const char *const *argv,
                    sqlite3_vtab **ppVtab, char **pzErr) {
  return ledger_init(db, pAux, argc, argv, ppVtab, pzErr, 0);
}

static int xDisconnect(sqlite3_vtab *pVtab) {
  IdemLedger *p = (IdemLedger *)pVtab;
  sqlite3_free(p->zForeign);
  p->zForeign = 0;
  sqlite3_free(p->zBroken);
  p->zBroken = 0;
  sqlite3_free(pVtab->zErrMsg);
  pVtab->zErrMsg = 0;
  ledger_conn_disconnect(p);
  return SQLITE_OK;
}

static int xDestroy(sqlite3_vtab *pVtab) {
  IdemLedger *p = (IdemLedger *)pVtab;
  sqlite3_int64 nHeld = 0;
  /* guards, and claimed or unknown rows, in the shadow tables that exist
  ** (DROP TABLE is a write statement: its lock is held) */
  int rc = vtab_ready(p);
  if (rc) return rc;
  rc = ledger_lifecycle_held_count(p, &nHeld);
  if (rc) return rc;
  /* SQLite shows no module message for a refused DROP TABLE (it reads
  ** "constraint failed"), so none is set: it would only leak */
  if (nHeld > 0) return SQLITE_CONSTRAINT;
  rc = ledger_drop_schema(p);
  if (rc) return rc;
  return xDisconnect(pVtab);
}

static int xRename(sqlite3_vtab *pVtab, const char *zNew) {
  IdemLedger *p = (IdemLedger *)pVtab;
  char *zErr = 0;
  int rc = vtab_ready(p); /* ALTER TABLE holds its write lock */
  if (rc) return rc;
  rc = name_check(zNew, "rename a ledger to", &zErr);
  if (rc) return vtab_error(pVtab, rc, zErr);
  ledger_finalize_all(p);
  rc = ledger_rename_schema(p, zNew);
  /* xRename does not change p->zName: SQLite reconnects under the new name */
  p->bChecked = 0;
  return rc;
}

/*
** The shadow tables SQLite is told of. Every shadow table carries
** one-writer triggers (docs/design.md, "Shadow-table format"), which are the
** protection on every version and for a writer without the extension.
** SQLite 3.44 and later refuse, in defensive mode, any trigger on a shadow
** table, even one read from the schema: the file could not be opened by a
** defensive connection that loaded the extension (better-sqlite3 and
** Node's sqlite are defensive by default). There no table is declared a
** shadow table. Older SQLite also makes <name>_rows, _meta and _guards
** read-only to plain SQL on a defensive connection, when the module was
** registered before that connection parsed the schema. <name>_members is
** never declared one: the guards' member triggers, plain SQL, write it.
*/
#define IDEM_SHADOW_TRIGGERS_REFUSED 3044000
static int xShadowName(const char *zSuffix) {
  int i;
  if (sqlite3_libversion_number() >= IDEM_SHADOW_TRIGGERS_REFUSED) return 0;
  for (i = 0; i < LEDGER_N_SHADOW; i++) {
    if (sqlite3_stricmp(zSuffix, ledger_shadow_suffix[i]) == 0) return 1;
  }
  return 0;
}

/* Cursor: a statement over zName_rows. */
typedef struct LedgerCursor LedgerCursor;
struct LedgerCursor {
  sqlite3_vtab_cursor base;
  sqlite3_stmt *pStmt;
  int iSlot; /* the ledger's statement slot pStmt was borrowed from, or -1 */
  int bEof;
  sqlite3_int64 now;
};

/* Give the cursor's statement back to its slot (reset), or finalize it
** when it was its own or its slot was emptied meanwhile (rename). */
static void cursor_release(LedgerCursor *c) {
  IdemLedger *p = (IdemLedger *)c->base.pVtab;
  if (c->pStmt == 0) return;
  if (c->iSlot >= 0 && p->aStmt[c->iSlot] == c->pStmt) {
    sqlite3_reset(c->pStmt);
    sqlite3_clear_bindings(c->pStmt);
    p->mBusy &= ~(1u << c->iSlot);
  } else {
    sqlite3_finalize(c->pStmt);
  }
  c->pStmt = 0;
  c->iSlot = -1;
}

#define IDX_KEY 1    /* tenant = ? AND key = ? */
#define IDX_TENANT 2 /* tenant = ? */
#define IDX_TOKEN 3  /* token = ? */
#define IDX_OPEN 4   /* status = 'claimed' or 'unknown': the open rows' index */

/*
** Plan idxNum on constraints iFirst (argv 1) and iSecond (argv 2, or -1);
** nRows the estimate. The constraints are not omitted: SQLite checks each
** row xFilter returns with its own comparison, so a ledger answers every
** WHERE exactly as a table holding the same rows would. The value reaches
** xFilter without the comparison's affinity (l.tenant = a.id, a.id an
** INTEGER column, compares '5' and 5 as numbers; tenant = 5 does not),
** and a token is looked up by its parts, which more than one text maps
** to: the lookup only narrows the rows (see filter_plan), SQLite decides.
*/
static void use_plan(sqlite3_index_info *pInfo, int idxNum, int iFirst, int iSecond, int nRows) {
  pInfo->idxNum = idxNum;
  pInfo->aConstraintUsage[iFirst].argvIndex = 1;
  if (iSecond >= 0) pInfo->aConstraintUsage[iSecond].argvIndex = 2;
  pInfo->estimatedCost = nRows;
  pInfo->estimatedRows = nRows;
  if (nRows == 1) pInfo->idxFlags = SQLITE_INDEX_SCAN_UNIQUE;
}

/* Does constraint i compare with BINARY, the collation of the shadow
** table's indexes? A constraint under another collation (tenant = 'T'
** COLLATE NOCASE) is left to SQLite: an index lookup, and omitting the
** check, would answer it as BINARY and miss rows. */
static int constraint_is_binary(sqlite3_index_info *pInfo, int i) {
  const char *zColl = sqlite3_vtab_collation(pInfo, i);
  return zColl == 0 || sqlite3_stricmp(zColl, "BINARY") == 0;
}

static int xBestIndex(sqlite3_vtab *pVtab, sqlite3_index_info *pInfo) {
  int i, iTenant = -1, iKey = -1, iToken = -1, iStatus = -1;
  (void)pVtab;
  for (i = 0; i < pInfo->nConstraint; i++) {
    const struct sqlite3_index_constraint *c = &pInfo->aConstraint[i];
    if (!c->usable || c->op != SQLITE_INDEX_CONSTRAINT_EQ) continue;
    if (!constraint_is_binary(pInfo, i)) continue;
    /* an IN is left to SQLite (see use_plan): it would call xFilter once
    ** per value and check each row against that value without the IN's
    ** affinity ('5' IN (SELECT id FROM t), id INTEGER, is true for a
    ** table); a constraint past the 32 that sqlite3_vtab_in can tell
    ** apart is left to it too */
    if (i >= 32 || sqlite3_vtab_in(pInfo, i, -1)) continue;
    if (c->iColumn == COL_TENANT) iTenant = i;
    if (c->iColumn == COL_KEY) iKey = i;
    if (c->iColumn == COL_TOKEN) iToken = i;
    if (c->iColumn == COL_STATUS && iStatus < 0) {
      sqlite3_value *pV = 0;
      const char *z;
      if (sqlite3_vtab_rhs_value(pInfo, i, &pV) == SQLITE_OK && pV &&
          sqlite3_value_type(pV) == SQLITE_TEXT && (z = (const char *)sqlite3_value_text(pV)) &&
          (ledger_status(z, 0) & STATUS_OPEN)) {
        iStatus = i;
      }
    }
  }
  if (iTenant >= 0 && iKey >= 0) {
    use_plan(pInfo, IDX_KEY, iTenant, iKey, 1);
  } else if (iToken >= 0) {
    use_plan(pInfo, IDX_TOKEN, iToken, -1, 1);
  } else if (iTenant >= 0) {
    use_plan(pInfo, IDX_TENANT, iTenant, -1, 100);
  } else if (iStatus >= 0) {
    /* the rows that need attention: an effective status of claimed or
    ** unknown comes only from a stored claimed or unknown row, all of which
    ** the partial index holds; SQLite still tests the status of each */
    pInfo->idxNum = IDX_OPEN;
    pInfo->estimatedCost = 1000;
    pInfo->estimatedRows = 100;
  } else {
    pInfo->idxNum = 0;
    pInfo->estimatedCost = 1000000;
    pInfo->estimatedRows = 1000000;
  }
  return SQLITE_OK;
}

static int xOpen(sqlite3_vtab *pVtab, sqlite3_vtab_cursor **ppCur) {
  LedgerCursor *c = sqlite3_malloc64(sizeof(*c));
  (void)pVtab;
  if (c == 0) return SQLITE_NOMEM;
  memset(c, 0, sizeof(*c));
  c->iSlot = -1;
  *ppCur = &c->base;
  return SQLITE_OK;
}

static int xClose(sqlite3_vtab_cursor *pCur) {
  LedgerCursor *c = (LedgerCursor *)pCur;
  cursor_release(c);
  sqlite3_free(c);
  return SQLITE_OK;
}

static int xNext(sqlite3_vtab_cursor *pCur) {
  LedgerCursor *c = (LedgerCursor *)pCur;
  int rc = sqlite3_step(c->pStmt);
  if (rc == SQLITE_ROW) return SQLITE_OK;
  c->bEof = 1;
  return rc == SQLITE_DONE ? SQLITE_OK : sqlite3_reset(c->pStmt);
}

/*
** The plan xFilter runs for plan idxNum given these values: a superset of
** the rows the constraints match, which SQLite then checks (use_plan).
** Every stored tenant, key and token is TEXT. A TEXT value matches only
** the same text under BINARY, whatever the comparison's affinity (a text
** that looks like a number cannot reach an equality with numeric affinity
** as TEXT: the affinity would have made it a number), so the index finds
** exactly its rows. A number may match many texts ('7', '007', '7e0'
** under numeric affinity) or none (no affinity): its constraint cannot
** narrow, and the plan drops it. NULL and a BLOB match no TEXT: *pbNone.
*/
static int filter_plan(int idxNum, int argc, sqlite3_value **argv, int *pbNone) {
  int i, mText = 0;
  *pbNone = 0;
  for (i = 0; i < argc && i < 2; i++) {
    int t = sqlite3_value_type(argv[i]);
    if (t == SQLITE_NULL || t == SQLITE_BLOB) *pbNone = 1;
    if (t == SQLITE_TEXT) mText |= 1 << i;
  }
  if (idxNum == IDX_KEY && mText != 3) return (mText & 1) ? IDX_TENANT : 0;
  if ((idxNum == IDX_TENANT || idxNum == IDX_TOKEN) && mText != 1) return 0;
  return idxNum >= IDX_KEY && idxNum <= IDX_OPEN ? idxNum : 0;
}

static int xFilter(sqlite3_vtab_cursor *pCur, int idxNum, const char *idxStr, int argc,
                   sqlite3_value **argv) {
  LedgerCursor *c = (LedgerCursor *)pCur;
  IdemLedger *p = (IdemLedger *)pCur->pVtab;
  int bNone = 0, iPlan = filter_plan(idxNum, argc, argv, &bNone);
  int iSlot = storage_cursor_slot(iPlan);
  int rc, i;
  (void)idxStr;
  cursor_release(c);
  c->bEof = 0;
  c->now = ledger_now(p);
  {
    /* a foreign trigger on the shadow tables refuses reads too; the
    ** statement holds its read lock: the file can be read */
    char *zErr = 0;
    rc = vtab_ready(p);
    if (rc) return rc;
    rc = ledger_check_triggers(p, "idempotency", &zErr);
    if (rc) {
      sqlite3_free(pCur->pVtab->zErrMsg);
      pCur->pVtab->zErrMsg = zErr;
      return rc;
    }
  }
  if (bNone) {
    c->bEof = 1; /* no stored text equals NULL or a BLOB */
    return SQLITE_OK;
  }
  if ((p->mBusy & (1u << iSlot)) == 0) {
    /* the ledger's prepared statement for this plan, borrowed */
    rc = ledger_stmt(p, iSlot, &c->pStmt);
    if (rc == SQLITE_OK) {
      c->iSlot = iSlot;
      p->mBusy |= 1u << iSlot;
    }
  } else {
    /* another cursor of the same plan is open (a self-join): its own */
    rc = ledger_stmt_new(p, iSlot, &c->pStmt);
  }
  if (rc) {
    c->pStmt = 0;
    sqlite3_free(pCur->pVtab->zErrMsg);
    pCur->pVtab->zErrMsg = sqlite3_mprintf("%s", sqlite3_errmsg(p->db));
    return rc;
  }
  for (i = 0; i < (iPlan == IDX_KEY ? 2 : iPlan == 0 || iPlan == IDX_OPEN ? 0 : 1); i++) {
    if (iPlan == IDX_TOKEN) {
      /* the column shows hex text: the row id and the random part the
      ** shadow table holds (a malformed token matches no row) */
      sqlite3_int64 iId = 0, iRnd = 0;
      if (sqlite3_value_type(argv[i]) == SQLITE_TEXT &&
          ledger_token_parse((const char *)sqlite3_value_text(argv[i]), &iId, &iRnd)) {
        rc = sqlite3_bind_int64(c->pStmt, 1, iId);
        if (rc == SQLITE_OK) rc = sqlite3_bind_int64(c->pStmt, 2, iRnd);
      } else {
        rc = sqlite3_bind_null(c->pStmt, 1);
      }
    } else {
      rc = sqlite3_bind_value(c->pStmt, i + 1, argv[i]);
    }
    if (rc) return rc;
  }
  return xNext(pCur);
}

static int xEof(sqlite3_vtab_cursor *pCur) { return ((LedgerCursor *)pCur)->bEof; }

static int xColumn(sqlite3_vtab_cursor *pCur, sqlite3_context *ctx, int iCol) {
  LedgerCursor *c = (LedgerCursor *)pCur;
  IdemLedger *p = (IdemLedger *)pCur->pVtab;
  sqlite3_stmt *pS = c->pStmt;
  /* map declared columns to the cursor statement's columns */
  static const int aMap[N_COL] = {RC_TENANT, RC_KEY,     RC_CONV,    RC_TOOL,  RC_ARGS,
                                  RC_EFFECT, RC_STATUS,  RC_RESULT,  RC_ERROR, RC_ATTEMPT,
                                  RC_TOKEN,  RC_CREATED, RC_UPDATED, RC_LEASE, RC_MEMBERS};
  if (iCol == COL_STATUS) {
    int eEff = 0;
    int rc = ledger_effective(p, (const char *)sqlite3_column_text(pS, RC_STATUS),
                              (const char *)sqlite3_column_text(pS, RC_EFFECT),
                              sqlite3_column_int64(pS, RC_LEASE), sqlite3_column_int64(pS, RC_ID),
                              sqlite3_column_int64(pS, RC_ATTEMPT), c->now, &eEff, 0, 0);
    if (rc) return rc;
    sqlite3_result_text(ctx, ledger_status_name(eEff), -1, SQLITE_STATIC);
    return SQLITE_OK;
  }
  if (iCol == COL_TOKEN) {
    char zHex[33];
    ledger_token_hex(sqlite3_column_int64(pS, RC_ID), sqlite3_column_int64(pS, RC_TOKEN), zHex);
    sqlite3_result_text(ctx, zHex, 32, SQLITE_TRANSIENT);
    return SQLITE_OK;
  }
  if (iCol == COL_ARGS) {
    /* args the ledger did not write (CHECKs off) are never shown as its own */
    const char *z = (const char *)sqlite3_column_text(pS, RC_ARGS);
    char *zErr = 0;
    int rc = z ? ledger_args_check(p, "idempotency", (const char *)sqlite3_column_text(pS, RC_KEY),
                                   z, (size_t)sqlite3_column_bytes(pS, RC_ARGS), &zErr)
               : SQLITE_CORRUPT_VTAB;
    if (rc) {
      sqlite3_free(p->base.zErrMsg);
      p->base.zErrMsg = zErr;
      return rc;
    }
  }
  sqlite3_result_value(ctx, sqlite3_column_value(pS, aMap[iCol]));
  return SQLITE_OK;
}

static int xRowid(sqlite3_vtab_cursor *pCur, sqlite3_int64 *pRowid) {
  *pRowid = sqlite3_column_int64(((LedgerCursor *)pCur)->pStmt, 0);
  return SQLITE_OK;
}

static int xUpdate(sqlite3_vtab *pVtab, int argc, sqlite3_value **argv, sqlite3_int64 *pRowid) {
  IdemLedger *p = (IdemLedger *)pVtab;
  sqlite3 *db = p->db;
  char *zErr = 0;
  int rc, i;

  if (argc == 1) {
    /* DELETE: terminal rows only */
    rc = vtab_ready(p);
    if (rc) return rc;
    rc = ledger_check_triggers(p, "idempotency", &zErr);
    if (rc) return vtab_error(pVtab, rc, zErr);
    rc = storage_row_delete_terminal(p, argv[0]);
    if (rc) return rc;
    if (storage_own_changes(p) != 1) {
      zErr = sqlite3_mprintf(
          "idempotency: cannot delete a claimed or unknown row of ledger %s;"
          " only succeeded, failed or released rows are deleted",
          p->zName);
      return vtab_error(pVtab, SQLITE_CONSTRAINT, zErr);
    }
    return SQLITE_OK;
  }
  if (sqlite3_value_type(argv[0]) != SQLITE_NULL) {
    zErr = sqlite3_mprintf(
        "idempotency: UPDATE of ledger %s is refused; record outcomes with "
        "idem_settle or idem_resolve",
        p->zName);
    return vtab_error(pVtab, SQLITE_CONSTRAINT, zErr);
  }
  /* INSERT: a claim. A new statement starts a new idem_last_claim list */
  rc = ledger_last_begin(ledger_conn_last(p), p);
  if (rc) return vtab_error(pVtab, rc, 0);
  /* the INSERT is a write statement: its write lock first, through the
  ** busy handler, before any read of the claim */
  rc = ledger_write_first(p, "idempotency", &zErr);
  if (rc) return vtab_error(pVtab, rc, zErr);
  rc = vtab_ready(p);
  if (rc) return rc;
  if (sqlite3_vtab_on_conflict(db) == SQLITE_REPLACE) {
    zErr = sqlite3_mprintf(
        "idempotency: INSERT OR REPLACE into ledger %s is refused: it would "
        "erase the recorded request",
        p->zName);
    return vtab_error(pVtab, SQLITE_CONSTRAINT, zErr);
  }
  if (sqlite3_value_type(argv[1]) != SQLITE_NULL) {
    zErr = sqlite3_mprintf("idempotency: INSERT into ledger %s cannot set the rowid", p->zName);
    return vtab_error(pVtab, SQLITE_CONSTRAINT, zErr);
  }
  for (i = COL_STATUS; i < N_COL; i++) {
    if (sqlite3_value_type(argv[2 + i]) != SQLITE_NULL) {
      zErr = sqlite3_mprintf(
          "idempotency: INSERT into ledger %s cannot set %s; a claim starts "
          "claimed and its outcome is recorded by idem_settle",
          p->zName, azCol[i]);
      return vtab_error(pVtab, SQLITE_CONSTRAINT, zErr);
    }
  }
  {
    LedgerReq q;
    LedgerDecision d;
    sqlite3_value *pEffect = argv[2 + COL_EFFECT];
    memset(&d, 0, sizeof(d));
    rc = ledger_req_parse(
        p, "idempotency", argv[2 + COL_TENANT], argv[2 + COL_CONV], argv[2 + COL_TOOL],
        argv[2 + COL_ARGS], sqlite3_value_type(pEffect) == SQLITE_NULL ? 0 : pEffect,
        sqlite3_value_type(argv[2 + COL_KEY]) == SQLITE_NULL ? 0 : argv[2 + COL_KEY], &q, &zErr);
    if (rc == SQLITE_OK) rc = ledger_check_triggers(p, "idempotency", &zErr);
    /* 3: a decision that is not admitted writes nothing (the poison call's
    ** failure is recorded by the next idem_claim): the INSERT is refused,
    ** and a refused statement inside a transaction must leave no change */
    if (rc == SQLITE_OK) rc = ledger_claim_decide(p, "idempotency", &q, 3, 0, &d, &zErr);
    if (rc == SQLITE_OK && d.eDec == DEC_ADMITTED) {
      rc = ledger_retention_step(p, "idempotency", &zErr);
    }
    if (rc == SQLITE_OK && d.eDec == DEC_ADMITTED) {
      /* the row is written: nothing may fail from here on (the room
      ** was made by ledger_last_begin) */
      ledger_last_add(ledger_conn_last(p), p, q.zKey, q.zTenant, d.zToken, d.id, d.attempt,
                      q.zEffect);
      *pRowid = d.id;
    } else if (rc == SQLITE_OK) {
      zErr = sqlite3_mprintf("idempotency: key \"%s\" of tenant \"%s\" in ledger %s is taken: %s",
                             q.zKey, q.zTenant, p->zName, d.zWhy);
      rc = zErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
    }
    sqlite3_free(d.zJson);
    sqlite3_free(d.zWhy);
    ledger_req_free(&q);
    if (rc) {
      if (zErr == 0 && rc != SQLITE_NOMEM) zErr = idem_db_error(db, "idempotency", rc);
      return vtab_error(pVtab, rc, zErr);
    }
  }
  return SQLITE_OK;
}

// clang-format off
static sqlite3_module ledgerModule = {
  /* iVersion      */ 3, /* xShadowName */
  /* xCreate       */ xCreate,
  /* xConnect      */ xConnect,
  /* xBestIndex    */ xBestIndex,
  /* xDisconnect   */ xDisconnect,
  /* xDestroy      */ xDestroy,
  /* xOpen         */ xOpen,
  /* xClose        */ xClose,
  /* xFilter       */ xFilter,
  /* xNext         */ xNext,
  /* xEof          */ xEof,
  /* xColumn       */ xColumn,
  /* xRowid        */ xRowid,
  /* xUpdate       */ xUpdate,
  /* xBegin        */ 0,
  /* xSync         */ 0,
  /* xCommit       */ 0,
  /* xRollback     */ 0,
  /* xFindFunction */ 0,
  /* xRename       */ xRename,
  /* xSavepoint    */ 0,
  /* xRelease      */ 0,
  /* xRollbackTo   */ 0,
  /* xShadowName   */ xShadowName,
#if SQLITE_VERSION_NUMBER >= 3044000
  /* xIntegrity    */ 0, /* iVersion 3: never called */
#endif
};
// clang-format on

/* Functions that write are DIRECTONLY and not innocuous: a view or a
** trigger in a database file cannot reach them. idem_last_claim only reads
** connection state, but it names this connection's claims, so it is
** DIRECTONLY too. */
#define IDEM_WRITES (SQLITE_UTF8 | SQLITE_DIRECTONLY)

IDEM_GUARDED(idem_claim_func)
IDEM_GUARDED(outcome_func)
IDEM_GUARDED(idem_purge_func)
IDEM_GUARDED(idem_renew_func)
IDEM_GUARDED(idem_last_claim_func)
IDEM_GUARDED(idem_upgrade_func)
IDEM_GUARDED(idem_health_func)

static const struct {
  const char *zName;
  int nArg;
  void (*xFunc)(sqlite3_context *, int, sqlite3_value **);
} aFn[] = {
    {"idem_claim", 5, idem_claim_func_guarded},
    {"idem_claim", 6, idem_claim_func_guarded},
    {"idem_claim", 7, idem_claim_func_guarded},
    {"idem_claim", 8, idem_claim_func_guarded},
    {"idem_settle", 4, outcome_func_guarded},
    {"idem_resolve", 5, outcome_func_guarded},
    {"idem_purge", 2, idem_purge_func_guarded},
    {"idem_renew", 2, idem_renew_func_guarded},
    {"idem_renew", 3, idem_renew_func_guarded},
    {"idem_last_claim", 1, idem_last_claim_func_guarded},
    {"idem_upgrade", 1, idem_upgrade_func_guarded},
    /* reads only, but answers from the whole ledger and the clock (neither
    ** deterministic nor innocuous) and names tenants and keys: DIRECTONLY
    ** like idem_last_claim, so a view or trigger planted in a file cannot
    ** make an ordinary read scan the ledger or show its rows */
    {"idem_health", 1, idem_health_func_guarded},
};

/*
** idem_own_write(): true only while the storage layer steps one of its own
** statements on this connection (ledger_rows.c, "One writer"): every
** trigger of the shadow tables fires WHEN NOT idem_own_write(), so only the
** extension writes them. Innocuous (the triggers run under
** trusted_schema=OFF), not deterministic (SQLite must ask it every time);
** every call is counted, so that a function registered over it is found
** out by the next write that changes rows without asking it.
*/
static void idem_own_write_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  LedgerCalls *c = (LedgerCalls *)sqlite3_user_data(ctx);
  (void)argc;
  (void)argv;
  c->nAsked++;
  sqlite3_result_int(ctx, c->nOwnWrite > 0);
}

void idem_unregister_ledger(sqlite3 *db) {
  size_t i;
  sqlite3_create_function(db, "idem_own_write", 0, SQLITE_UTF8, 0, 0, 0, 0);
  for (i = 0; i < sizeof(aFn) / sizeof(aFn[0]); i++) {
    sqlite3_create_function(db, aFn[i].zName, aFn[i].nArg, SQLITE_UTF8, 0, 0, 0, 0);
  }
  /* drops the module; its destructor frees the connection's registry */
  sqlite3_create_module_v2(db, "idempotency", 0, 0, 0);
}

int idem_register_ledger(sqlite3 *db, void **ppConn, char **pzErr) {
  IdemConn *pConn = ledger_conn_new();
  size_t i;
  int rc;
  *ppConn = 0;
  if (pConn == 0) return SQLITE_NOMEM;
  /* the module owns pConn and frees it when the connection closes */
  rc = sqlite3_create_module_v2(db, "idempotency", &ledgerModule, pConn, ledger_conn_free);
  if (rc != SQLITE_OK) {
    if (pzErr) {
      *pzErr = sqlite3_mprintf("idempotency: cannot register module idempotency: %s",
                               sqlite3_errstr(rc));
    }
    return rc;
  }
  for (i = 0; i < sizeof(aFn) / sizeof(aFn[0]); i++) {
    rc = sqlite3_create_function(db, aFn[i].zName, aFn[i].nArg, IDEM_WRITES, pConn, aFn[i].xFunc, 0,
                                 0);
    if (rc != SQLITE_OK) {
      if (pzErr) {
        *pzErr = sqlite3_mprintf("idempotency: cannot register function %s/%d: %s", aFn[i].zName,
                                 aFn[i].nArg, sqlite3_errstr(rc));
      }
      return rc;
    }
  }
  rc = sqlite3_create_function(db, "idem_own_write", 0, SQLITE_UTF8 | SQLITE_INNOCUOUS,
                               ledger_conn_calls(pConn), idem_own_write_func, 0, 0);
  if (rc != SQLITE_OK) {
    if (pzErr) {
      *pzErr = sqlite3_mprintf("idempotency: cannot register function idem_own_write/0: %s",
                               sqlite3_errstr(rc));
    }
    return rc;
  }
  *ppConn = pConn;
  return SQLITE_OK;
}

/*
** ledger_conn.c: the connection's registry of ledgers and the resolution
** of a ledger name given to a function.
**
** One IdemConn per connection (the module's client data, freed when the
** connection closes): the connected ledgers, a small cache of resolved
** names, the claims of the last INSERT into each ledger (ledger_last.c),
** and the count of ledger and guard functions running, so that a ledger
** disconnected while one runs is finished after it. Nothing here sees an
** sqlite3_context: the module (ledger.c) and guard.c wrap these for their
** functions.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <string.h>

/* Resolution cache: the last few ledger names a function was given, so
** the hot path does not resolve the name again. An entry holds a
** reference on its ledger. It is valid while the ledger is connected
** (DROP TABLE, DETACH and ALTER TABLE RENAME disconnect it) and, for an
** unqualified name that reached main, while temp's schema version is
** unchanged (only a temp table can shadow a main table). An unqualified
** name that reaches an attached schema is not cached. */
#define N_CACHE 4
typedef struct ConnCache ConnCache;
struct ConnCache {
  char *zName; /* as given (sqlite3_malloc) */
  IdemLedger *p;
  int iTempVersion; /* temp's schema version when an unqualified name was cached */
  int bQualified;   /* the name was schema.ledger */
};

typedef struct IdemConn IdemConn;
struct IdemConn {
  IdemLedger *pList; /* connected ledgers */
  ConnCache aCache[N_CACHE];
  int iNext;           /* next cache slot to replace */
  LedgerLastList last; /* idem_last_claim (ledger_last.c) */
  LedgerCalls calls;   /* ledger and guard functions running (nested) */
  IdemLedger *pDead;   /* disconnected while one ran: finalized after */
};

LedgerCalls *ledger_conn_calls(IdemConn *pConn) { return &pConn->calls; }

void ledger_conn_unref(IdemLedger *p) {
  if (--p->nRef == 0) {
    ledger_finalize_all(p);   /* statements prepared after a deferred disconnect */
    sqlite3_free(p->zBroken); /* and a refusal found after it (xDisconnect freed the one before) */
    sqlite3_free(p->zForeign);
    idem_json_seen_free(&p->aSeen[0]);
    idem_json_seen_free(&p->aSeen[1]);
    sqlite3_free(p); /* zDb and zName live in the same allocation */
  }
}

/*
** A ledger can be disconnected in the middle of one of our own calls: a
** schema change seen while one of its statements is stepped makes SQLite
** prepare that statement again, and the schema reload disconnects the
** virtual table, which must not finalize the statement SQLite is still
** preparing. So every ledger and guard function runs between enter and
** leave, and a disconnect while one runs is finished when the outermost
** one returns: its statements (also those prepared after the disconnect)
** are finalized then, before sqlite3_close could find them.
*/
void ledger_conn_enter(void *pConnArg) {
  LedgerCalls *c = &((IdemConn *)pConnArg)->calls;
  c->nDepth++;
  if (++c->iCall == 0) c->iCall = 1;
}

void ledger_conn_leave(void *pConnArg) {
  IdemConn *pConn = (IdemConn *)pConnArg;
  if (++pConn->calls.iCall == 0) pConn->calls.iCall = 1;
  if (--pConn->calls.nDepth > 0) return;
  while (pConn->pDead) {
    IdemLedger *p = pConn->pDead;
    pConn->pDead = p->pNext;
    ledger_finalize_all(p);
    ledger_conn_unref(p);
  }
}

static void cache_clear(ConnCache *c) {
  if (c->p) ledger_conn_unref(c->p);
  sqlite3_free(c->zName);
  c->p = 0;
  c->zName = 0;
}

/*
** Does zDb.zName exist as a table (of any kind)? Preparing a statement
** over it also connects a virtual table. *pbFound is set; an error other
** than "no such table" (out of memory, a ledger that fails to connect) is
** returned.
*/
static int probe_table(sqlite3 *db, const char *zDb, const char *zName, int *pbFound) {
  sqlite3_stmt *pProbe = 0;
  char *zSql = sqlite3_mprintf("SELECT 1 FROM \"%w\".\"%w\" WHERE 0", zDb, zName);
  int rc;
  *pbFound = 0;
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_prepare_v2(db, zSql, -1, &pProbe, 0);
  sqlite3_free(zSql);
  sqlite3_finalize(pProbe);
  if (rc == SQLITE_OK) {
    *pbFound = 1;
  } else if ((rc & 0xff) == SQLITE_ERROR &&
             sqlite3_strglob("no such table: *", sqlite3_errmsg(db)) == 0) {
    rc = SQLITE_OK;
  }
  return rc;
}

static IdemLedger *registry_find(IdemConn *pConn, const char *zDb, const char *zName) {
  IdemLedger *p;
  for (p = pConn->pList; p; p = p->pNext) {
    if (sqlite3_stricmp(p->zDb, zDb) == 0 && sqlite3_stricmp(p->zName, zName) == 0) return p;
  }
  return 0;
}

/*
** Probe table zName in every schema, in resolution order (temp, main,
** then attached). Preparing against a virtual table connects it, which
** registers it. With ppFound, stop at the first schema that has such a
** table and set *ppFound to its ledger (NULL: a table, but not a
** ledger); without it, probe every schema. On an error *pzErr (when
** given) is set to zFunc's message for it. The schemas are listed by
** sqlite3_db_name, which reads nothing: stepping pragma_database_list
** would open a read transaction on main inside the caller's deferred
** BEGIN, before the function could take the write lock.
*/
static int probe_schemas(IdemConn *pConn, sqlite3 *db, const char *zName, IdemLedger **ppFound,
                         const char *zFunc, char **pzErr) {
  int rc = SQLITE_OK, i;
  for (i = 0; rc == SQLITE_OK; i++) {
    /* temp (1) first, then main (0), then the attached ones in order */
    const char *zDb = sqlite3_db_name(db, i == 0 ? 1 : i == 1 ? 0 : i);
    int bFound = 0;
    if (zDb == 0) break;
    rc = probe_table(db, zDb, zName, &bFound);
    if (rc == SQLITE_OK && bFound && ppFound) {
      *ppFound = registry_find(pConn, zDb, zName);
      break;
    }
  }
  if (rc && pzErr) *pzErr = idem_db_error(db, zFunc, rc);
  return rc;
}

/*
** Split a ledger argument into its schema (NULL when unqualified) and its
** table name: "ledger", "schema.ledger", and either part in double quotes
** with a quote inside doubled ("a.b"."x""y"). An unquoted part is taken
** as written (spaces and quotes after its first character included), so
** only a name holding a '.' needs quotes. On success *pzDb and *pzName
** are set (one sqlite3_malloc allocation, freed through *pzName's owner
** *ppBuf). Returns SQLITE_OK, SQLITE_NOMEM, or SQLITE_ERROR with *pzWhy
** the rule the text broke.
*/
static int ledger_name_split(const char *zArg, int nArg, char **ppBuf, const char **pzDb,
                             const char **pzName, const char **pzWhy) {
  char *zBuf = sqlite3_malloc64((sqlite3_uint64)nArg + 2);
  char *zOut = zBuf, *azPart[2] = {0, 0};
  int i = 0, nPart = 0;
  *ppBuf = 0;
  *pzDb = *pzName = 0;
  if (zBuf == 0) return SQLITE_NOMEM;
  if ((int)strlen(zArg) != nArg) {
    *pzWhy = "it contains a NUL character";
    goto malformed;
  }
  for (;;) {
    char *zPart = zOut;
    if (nPart == 2) {
      *pzWhy = "it has more than two parts";
      goto malformed;
    }
    if (zArg[i] == '"') {
      for (i++;; i++) {
        if (zArg[i] == 0) {
          *pzWhy = "a quoted part has no closing quote";
          goto malformed;
        }
        if (zArg[i] == '"') {
          if (zArg[i + 1] != '"') break;
          i++;
        }
        *zOut++ = zArg[i];
      }
      i++; /* the closing quote */
      if (zArg[i] != 0 && zArg[i] != '.') {
        *pzWhy = "a closing quote is followed by something other than '.'";
        goto malformed;
      }
    } else {
      while (zArg[i] != 0 && zArg[i] != '.') *zOut++ = zArg[i++];
    }
    *zOut++ = 0;
    if (zPart[0] == 0) {
      *pzWhy = "a part is empty";
      goto malformed;
    }
    azPart[nPart++] = zPart;
    if (zArg[i] == 0) break;
    i++; /* the '.' */
  }
  *ppBuf = zBuf;
  if (nPart == 2) {
    *pzDb = azPart[0];
    *pzName = azPart[1];
  } else {
    *pzName = azPart[0];
  }
  return SQLITE_OK;

malformed:
  sqlite3_free(zBuf);
  return SQLITE_ERROR;
}

/*
** Find the connected ledger zName (nName bytes, as the function was given
** it) names, the way a table name resolves: "schema.ledger" in that
** schema only, an unqualified name in temp, main, then attached schemas in
** order. Cached per connection (ConnCache). Connecting it steps no query
** inside a transaction that holds no lock on its schema yet (see
** ledger_ready). SQLITE_OK with *pp set, or an error with *pzErr.
*/
int ledger_conn_lookup(IdemConn *pConn, sqlite3 *db, const char *zName, int nName,
                       const char *zFunc, IdemLedger **pp, char **pzErr) {
  const char *zDbPart = 0, *zTable = 0, *zWhy = 0;
  char *zBuf = 0;
  IdemLedger *p = 0;
  char *zErr = 0;
  int rc;

  *pp = 0;
  {
    int i;
    for (i = 0; i < N_CACHE; i++) {
      ConnCache *c = &pConn->aCache[i];
      if (c->p == 0 || c->p->bDead || strcmp(c->zName, zName) != 0) continue;
      /* a qualified name names one table: it holds while that ledger is
      ** connected (DROP, DETACH and RENAME disconnect it) */
      if (c->bQualified) {
        *pp = c->p;
        return SQLITE_OK;
      }
      if (sqlite3_stricmp(c->p->zDb, "main") == 0) {
        int v = -1;
        if (ledger_temp_version(c->p, &v) == SQLITE_OK && v == c->iTempVersion) {
          *pp = c->p;
          return SQLITE_OK;
        }
      }
    }
  }

  rc = ledger_name_split(zName, nName, &zBuf, &zDbPart, &zTable, &zWhy);
  if (rc == SQLITE_ERROR) {
    char *zQ = idem_json_string(zName);
    zErr = zQ ? sqlite3_mprintf(
                    "%s: malformed ledger name %s: %s; write ledger or schema.ledger,"
                    " a part in double quotes when it holds a '.' (\"a.b\".\"x\"\"y\")",
                    zFunc, zQ, zWhy)
              : 0;
    sqlite3_free(zQ);
    *pzErr = zErr;
    return zErr ? SQLITE_ERROR : SQLITE_NOMEM;
  }
  if (rc) return SQLITE_NOMEM;
  if (zDbPart) {
    /* qualified: that schema only; a schema that does not exist finds
    ** no table */
    int bFound = 0;
    rc = probe_table(db, zDbPart, zTable, &bFound);
    if (rc == SQLITE_OK && bFound) p = registry_find(pConn, zDbPart, zTable);
    if (rc) zErr = idem_db_error(db, zFunc, rc);
  } else {
    /* schemas in resolution order: temp first, then main, then attached */
    rc = probe_schemas(pConn, db, zTable, &p, zFunc, &zErr);
  }
  sqlite3_free(zBuf);
  if (rc) {
    *pzErr = zErr;
    return rc;
  }
  if (p == 0) {
    char *zQ = idem_json_string(zName);
    zErr = zQ ? sqlite3_mprintf("%s: unknown ledger %s: no table USING idempotency by that name",
                                zFunc, zQ)
              : 0;
    sqlite3_free(zQ);
    *pzErr = zErr;
    return SQLITE_ERROR;
  }
  if (zDbPart || sqlite3_stricmp(p->zDb, "main") == 0) {
    /* remember it; a failure to cache only costs speed. An unqualified
    ** name that reached an attached schema is resolved in full each time:
    ** a table of that name in main or an earlier schema would take it. */
    ConnCache *c = &pConn->aCache[pConn->iNext];
    char *zCopy = sqlite3_mprintf("%s", zName);
    int v = -1;
    if (zCopy && ledger_temp_version(p, &v) == SQLITE_OK) {
      cache_clear(c);
      c->zName = zCopy;
      c->p = p;
      c->iTempVersion = v;
      c->bQualified = zDbPart != 0;
      p->nRef++;
      pConn->iNext = (pConn->iNext + 1) % N_CACHE;
    } else {
      sqlite3_free(zCopy);
    }
  }
  *pp = p;
  return SQLITE_OK;
}

IdemLedger *ledger_conn_find_by_id(IdemConn *pConn, sqlite3 *db, const char *zName, const char *zId,
                                   int *pRc) {
  IdemLedger *p;
  int rc, iPass;
  for (iPass = 0; iPass < 2; iPass++) {
    for (p = pConn->pList; p; p = p->pNext) {
      if (!p->bDead && p->bUnread && sqlite3_stricmp(p->zName, zName) == 0) {
        /* its identity is in its file (a guard trigger runs inside the
        ** write statement that fired it: the lock is held) */
        char *zErr = 0;
        rc = ledger_ready(p, &zErr);
        sqlite3_free(zErr);
        if (rc) {
          *pRc = rc;
          return 0;
        }
      }
      if (!p->bDead && strcmp(p->zId, zId) == 0 && sqlite3_stricmp(p->zName, zName) == 0) {
        *pRc = SQLITE_OK;
        return p;
      }
    }
    if (iPass) break;
    /* not connected yet: connect every same-named table, then look again */
    rc = probe_schemas(pConn, db, zName, 0, 0, 0);
    if (rc) {
      *pRc = rc;
      return 0;
    }
  }
  *pRc = SQLITE_OK;
  return 0;
}

IdemConn *ledger_conn_new(void) {
  IdemConn *pConn = sqlite3_malloc64(sizeof(IdemConn));
  if (pConn) memset(pConn, 0, sizeof(*pConn));
  return pConn;
}

/* What a refusal on a read-only connection says after its first clause. */
#define READONLY_CAUSES                                                                       \
  "refused before anything was read or written; likely causes: an rqlite query path (send "   \
  "the call as an execute), a libSQL replica (write through the primary), a database opened " \
  "with mode=ro, SQLITE_OPEN_READONLY or without write permission, or PRAGMA query_only=1"

int ledger_conn_writable(IdemLedger *p, const char *zFunc, char **pzErr) {
  int bQuery = 0, rc;
  int bRo = sqlite3_db_readonly(p->db, p->zDb) == 1;
  if (!bRo) {
    rc = storage_query_only(p, &bQuery);
    if (rc) return rc;
    if (!bQuery) return SQLITE_OK;
  }
  /* a replicated engine's read path is a read-only connection too: the
  ** claim would otherwise fail later with a generic SQLite error, or
  ** answer from a replica that never sees its write */
  *pzErr = bRo ? sqlite3_mprintf(
                     "%s: ledger %s is on a read-only connection (its database \"%w\" is opened "
                     "read-only), and %s writes: " READONLY_CAUSES,
                     zFunc, p->zName, p->zDb, zFunc)
               : sqlite3_mprintf(
                     "%s: ledger %s is on a read-only connection (PRAGMA query_only is on), and "
                     "%s writes: " READONLY_CAUSES,
                     zFunc, p->zName, zFunc);
  return *pzErr ? SQLITE_READONLY : SQLITE_NOMEM;
}

void ledger_conn_add(IdemConn *pConn, IdemLedger *p) {
  p->pConn = pConn;
  p->pCalls = &pConn->calls;
  p->pNext = pConn->pList;
  pConn->pList = p;
}

void ledger_conn_disconnect(IdemLedger *p) {
  IdemConn *pConn = (IdemConn *)p->pConn;
  IdemLedger **pp;
  for (pp = &pConn->pList; *pp; pp = &(*pp)->pNext) {
    if (*pp == p) {
      *pp = p->pNext;
      break;
    }
  }
  p->bDead = 1;
  if (pConn->calls.nDepth > 0) {
    /* inside one of our calls (see ledger_conn_enter): finished by its leave */
    p->pNext = pConn->pDead;
    pConn->pDead = p;
    return;
  }
  ledger_finalize_all(p);
  ledger_conn_unref(p);
}

LedgerLastList *ledger_conn_last(IdemLedger *p) { return &((IdemConn *)p->pConn)->last; }

void ledger_conn_free(void *pArg) {
  IdemConn *pConn = (IdemConn *)pArg;
  int i;
  for (i = 0; i < N_CACHE; i++) cache_clear(&pConn->aCache[i]);
  ledger_last_free(&pConn->last);
  sqlite3_free(pConn);
}

/*
** oom.c: every allocation of every ledger path fails in turn.
**
**   oom [--ext PATH] [--dir DIR] [--only NAME] [--step K] [--dense N] [--budget M]
**       [--from N] [--persistent] [--verbose] [--list]
**
** Before sqlite3_initialize the program installs, with
** sqlite3_config(SQLITE_CONFIG_MALLOC), an allocator that wraps the default
** methods (SQLITE_CONFIG_GETMALLOC), counts live allocations and, once
** armed with N, fails the Nth allocation (with --persistent, the Nth and
** every later one until disarmed). Lookaside is off, so every allocation
** goes through it.
**
** For each operation and N = 1, 1+K, 1+2K, ... (every N up to --dense, 400;
** past it a stride that keeps the operation within --budget more runs, 200;
** --budget 0 tries every N) until the operation runs without reaching its
** Nth allocation: a fresh connection (":memory:", or a
** copy of a file database for the file operations, or of a committed file
** of an earlier format for the upgrades from it) is set up disarmed (load
** the extension, create L USING idempotency(lease_seconds=3600) but in an
** earlier format's file, the operation's setup SQL), the state is digested (every row of every real
** table and the schema), then armed the operation is prepared and stepped to
** the end, then disarmed it is checked:
**
**   - the result is SQLITE_NOMEM or the result of an unfaulted run (for the
**     load operation, SQLITE_ERROR "error during initialization" is how
**     sqlite3_load_extension reports any init failure); any other code or
**     message is a failure;
**   - on failure, the digest is unchanged and no transaction was left open
**     (or, inside an explicit transaction, either the transaction is intact
**     or SQLite rolled it all back): nothing is half-written; inside a
**     transaction, no savepoint of the extension was left open (after a
**     success too);
**   - on success, the decision and the row count match the unfaulted run
**     (F_DET: the whole result; F_READ, an operation that only reads: the
**     digest is unchanged too);
**   - the connection still works (SELECT count(*) FROM L), sqlite3_close
**     returns SQLITE_OK (no statement leaked), and the live allocation count
**     is back where it was before the connection was opened (no leak);
**   - at the end, after sqlite3_shutdown, no allocation is live.
**
** Prints "PASS oom.<op>" or "FAIL oom.<op>: N=<n>: <why> (and k more)".
*/
#include "stress.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* The failing allocator                                               */
/* ------------------------------------------------------------------ */

static sqlite3_mem_methods orig;
static int bArmed = 0, bPersistent = 0, bFired = 0;
static long long nCountdown = 0, nLive = 0, nCalls = 0;

static int should_fail(void) {
  if (!bArmed) return 0;
  nCalls++;
  if (bFired && bPersistent) return 1;
  if (!bFired && --nCountdown == 0) {
    bFired = 1;
    return 1;
  }
  return 0;
}
static void *mem_malloc(int n) {
  void *p;
  if (should_fail()) return 0;
  p = orig.xMalloc(n);
  if (p) nLive++;
  return p;
}
static void mem_free(void *p) {
  if (p) nLive--;
  orig.xFree(p);
}
static void *mem_realloc(void *p, int n) {
  if (should_fail()) return 0;
  return orig.xRealloc(p, n);
}
static int mem_size(void *p) { return orig.xSize(p); }
static int mem_roundup(int n) { return orig.xRoundup(n); }
static int mem_init(void *pApp) { return orig.xInit(orig.pAppData); }
static void mem_shutdown(void *pApp) { orig.xShutdown(orig.pAppData); }

static void arm(long long n) {
  bFired = 0;
  nCalls = 0;
  nCountdown = n; /* 0: count only (the countdown never reaches 0 again) */
  bArmed = 1;
}
static void disarm(void) { bArmed = 0; }

/* ------------------------------------------------------------------ */
/* Operations                                                          */
/* ------------------------------------------------------------------ */

#define K_SQL 0  /* :memory: database, setup, then the SQL */
#define K_LOAD 1 /* the armed operation is sqlite3_load_extension */
#define K_FILE 2 /* a copy of the file template; the SQL opens the schema */
#define K_OLDER \
  3               /* a copy of the file of an earlier format zSetup names up to its
                  ** first ';', then the rest of zSetup */
#define F_TXN 1   /* setup ends inside BEGIN ... (see zTxn) */
#define F_SLEEP 2 /* sleep 3 ms after setup (purge needs older rows) */
#define F_DET 4   /* compare the whole result with the unfaulted run */
#define F_READ 8  /* reads only: the digest is unchanged on success too */

typedef struct Op Op;
struct Op {
  const char *zName;
  int eKind, flags;
  const char *zSetup; /* statements; ?1 = last token seen, ?2 = last key */
  const char *zSql;   /* the operation (one statement; same parameters) */
};

#define CANON_DOC                                                                          \
  "'{\"b\":\"x\\n\\u00e9\\ud83d\\ude00\\t\\\"q\\\"\\\\\",\"a\":[1.5e300,-0,0.000001,1e21," \
  "12345678901234,1E-7,4.50,{\"z\":null,\"y\":true,\"x\":false}],\"\\u00fc\":\"\\u001f\"}'"

/* the claim most setups start with (token ?1 for a settle or renew) */
#define CLAIM1 "SELECT idem_claim('L','t1','c1','send','{\"n\":1}')"

/* idem_health(ledger) without its times ("now", the oldest unknown row's
** created_at: each run makes its rows at the clock's time), so that the
** whole answer can be compared with the unfaulted run's (F_DET) */
#define HEALTH(L) "SELECT json_remove(idem_health('" L "'),'$.now','$.oldest_unknown.created_at')"

/* idem_upgrade of the committed file of format N inside the caller's
** transaction, which wrote before it */
#define UPGRADE_IN_TXN(N)                                                 \
  {                                                                       \
    "upgrade-format" N "-in-txn", K_OLDER, F_TXN | F_DET,                 \
        "tests/fixtures/format" N                                         \
        ".db; CREATE TABLE other(x); BEGIN; INSERT INTO other VALUES(1)", \
        "SELECT idem_upgrade('L')"                                        \
  }

static const Op aOp[] = {
    {"load", K_LOAD, 0, "", ""},
    {"canonical", K_SQL, F_DET, "", "SELECT idem_canonical(" CANON_DOC ")"},
    {"fingerprint", K_SQL, F_DET, "", "SELECT idem_fingerprint(" CANON_DOC ")"},
    {"key", K_SQL, F_DET, "",
     "SELECT idem_key('t1','c1','send','{\"b\":[1,2.50,\"x\\ty\"],\"a\":{\"d\":1e2,\"c\":"
     "\"\\u00fc\"}}')"},
    {"check-key-error", K_SQL, F_DET, "", "SELECT idem_check_key('bad key!', 'tenant')"},
    {"create-vtab", K_SQL, 0, "",
     "CREATE VIRTUAL TABLE L2 USING idempotency(lease_seconds=3600, max_attempts=3)"},
    {"claim-new", K_SQL, 0, "",
     "SELECT idem_claim('L','t1','c1','send','{\"n\":1000,\"s\":\"caf\\u00e9\",\"x\":1.50}')"},
    {"claim-new-local", K_SQL, 0, "",
     "SELECT idem_claim('L','t1','c1','send','{\"n\":1001}','local')"},
    {"claim-new-opid", K_SQL, 0, "",
     "SELECT idem_claim('L','t1','c1','send','{\"n\":1002}','external','op-1002')"},
    {"claim-in-progress", K_SQL, 0, CLAIM1,
     "SELECT idem_claim('L','t1','c1','send','{ \"n\" : 1 }')"},
    {"claim-replay", K_SQL, 0,
     CLAIM1 ";SELECT idem_settle('L',?1,'succeeded','{\"id\":7,\"z\":[1,2]}')", CLAIM1},
    {"claim-replay-failed", K_SQL, 0,
     CLAIM1 ";SELECT idem_settle('L',?1,'failed','{\"why\":\"nope\"}')", CLAIM1},
    {"claim-mismatch", K_SQL, 0,
     "SELECT idem_claim('L','t1','c1','send','{\"n\":1}','external','op-1')",
     "SELECT idem_claim('L','t1','c1','send','{\"n\":2}','external','op-1')"},
    {"claim-unknown", K_SQL, 0, CLAIM1 ";SELECT idem_settle('L',?1,'unknown',NULL)", CLAIM1},
    {"claim-after-release", K_SQL, 0,
     CLAIM1 ";SELECT idem_settle('L',?1,'released','{\"sent\":false}')", CLAIM1},
    {"claim-takeover-local", K_SQL, 0,
     "CREATE VIRTUAL TABLE L0 USING idempotency(lease_seconds=0);"
     "SELECT idem_claim('L0','t1','c1','send','{\"n\":1}','local')",
     "SELECT idem_claim('L0','t1','c1','send','{\"n\":1}','local')"},
    {"claim-expired-external", K_SQL, 0,
     "CREATE VIRTUAL TABLE L0 USING idempotency(lease_seconds=0);"
     "SELECT idem_claim('L0','t1','c1','send','{\"n\":1}')",
     "SELECT idem_claim('L0','t1','c1','send','{\"n\":1}')"},
    {"claim-poison", K_SQL, 0,
     "CREATE VIRTUAL TABLE L0 USING idempotency(lease_seconds=0, max_attempts=1);"
     "SELECT idem_claim('L0','t1','c1','send','{\"n\":1}','local')",
     "SELECT idem_claim('L0','t1','c1','send','{\"n\":1}','local')"},
    {"claim-targets-new", K_SQL, 0, "",
     "SELECT idem_claim('L','t1','c1','send','{\"to\":\"bob\",\"body\":\"x\"}','external',NULL,"
     "'{\"targets\":[\"mailto:bob\",\"mailto:ann\"],\"target_window_seconds\":60}')"},
    {"claim-targets-conflict", K_SQL, F_DET,
     "SELECT idem_claim('L','t1','c1','send','{\"to\":\"bob\",\"body\":\"x\"}','external',NULL,"
     "'{\"targets\":[\"mailto:bob\"]}')",
     "SELECT "
     "json_remove(idem_claim('L','t1','c1','send','{\"to\":\"bob\",\"body\":\"y\",\"cc\":1}',"
     "'external',NULL,'{\"targets\":[\"mailto:ann\",\"mailto:bob\"]}'),'$.held_by.updated_at')"},
    {"claim-targets-allowed", K_SQL, 0,
     "SELECT idem_claim('L','t1','c1','send','{\"to\":\"bob\",\"body\":\"x\"}','external',NULL,"
     "'{\"targets\":[\"mailto:bob\"]}')",
     "SELECT idem_claim('L','t1','c1','send','{\"to\":\"bob\",\"body\":\"y\"}','external',NULL,"
     "'{\"targets\":[\"mailto:bob\"],\"allowed_by\":\"ops\"}')"},
    {"claim-targets-again", K_SQL, 0,
     "SELECT "
     "idem_settle('L',json_extract(idem_claim('L','t1','c1','send','{\"n\":1}','external',NULL,"
     "'{\"targets\":[\"a\"]}'),'$.token'),'released','{\"sent\":false}')",
     "SELECT idem_claim('L','t1','c1','send','{\"n\":1}','external',NULL,'{\"targets\":[\"b\"]}')"},
    {"claim-targets-refused", K_SQL, F_DET, "",
     "SELECT idem_claim('L','t1','c1','send','{}','external',NULL,'{\"targets\":[\"a\",\"a\"]}')"},
    {"claim-in-txn", K_SQL, F_TXN, "CREATE TABLE other(x); BEGIN; INSERT INTO other VALUES(1)",
     "SELECT idem_claim('L','t1','c1','send','{\"n\":3000}')"},
    {"insert-new", K_SQL, 0, "",
     "INSERT INTO L(tenant,conversation,tool,args) VALUES('t1','c1','send','{\"n\":2000}')"},
    {"insert-new-local-key", K_SQL, 0, "",
     "INSERT INTO L(tenant,conversation,tool,args,effect,\"key\") "
     "VALUES('t1','c1','send','{\"n\":2001}','local','op-2001')"},
    {"insert-taken", K_SQL, 0, CLAIM1,
     "INSERT INTO L(tenant,conversation,tool,args) VALUES('t1','c1','send','{\"n\":1}')"},
    {"insert-or-ignore", K_SQL, 0, CLAIM1,
     "INSERT OR IGNORE INTO L(tenant,conversation,tool,args) VALUES('t1','c1','send','{\"n\":1}')"},
    {"insert-in-txn", K_SQL, F_TXN, "CREATE TABLE other(x); BEGIN; INSERT INTO other VALUES(1)",
     "INSERT INTO L(tenant,conversation,tool,args) VALUES('t1','c1','send','{\"n\":2002}')"},
    {"last-claim", K_SQL, 0,
     "INSERT INTO L(tenant,conversation,tool,args) VALUES('t1','c1','send','{\"n\":2000}')",
     "SELECT idem_last_claim('L')"},
    {"insert-multi-row", K_SQL, 0, CLAIM1,
     "INSERT OR IGNORE INTO L(tenant,conversation,tool,args) VALUES('t1','c1','send','{\"n\":3}'),"
     "('t1','c1','send','{\"n\":1}'),('t1','c1','send','{\"n\":4}'),('t1','c1','send','{\"n\":5}'),"
     "('t1','c1','send','{\"n\":6}'),('t1','c1','send','{\"n\":7}')"},
    {"insert-deferred-txn", K_SQL, F_TXN, "CREATE TABLE other(x); BEGIN",
     "INSERT INTO L(tenant,conversation,tool,args,effect) VALUES('t1','c1','send','{\"n\":2003}',"
     "'local')"},
    {"settle-deferred-txn", K_SQL, F_TXN, CLAIM1 "; BEGIN",
     "SELECT idem_settle('L',?1,'succeeded','{\"ok\":1}')"},
    {"last-claim-multi", K_SQL, 0,
     "INSERT INTO L(tenant,conversation,tool,args) VALUES('t1','c1','send','{\"n\":2000}'),"
     "('t1','c1','send','{\"n\":2001}')",
     "SELECT idem_last_claim('L')"},
    {"last-claim-rolled-back", K_SQL, F_TXN,
     "CREATE TABLE other(x); BEGIN; SAVEPOINT s;"
     " INSERT INTO L(tenant,conversation,tool,args) VALUES('t1','c1','send','{\"n\":2000}');"
     " ROLLBACK TO s",
     "SELECT idem_last_claim('L')"},
    {"settle-succeeded", K_SQL, 0, CLAIM1,
     "SELECT "
     "idem_settle('L',?1,'succeeded','{\"id\":42,\"note\":\"caf\\u00e9\",\"v\":[1.0,2e3]}')"},
    {"settle-failed", K_SQL, 0, CLAIM1, "SELECT idem_settle('L',?1,'failed','{\"code\":503}')"},
    {"settle-released", K_SQL, 0, CLAIM1,
     "SELECT idem_settle('L',?1,'released','{\"sent\":false}')"},
    {"settle-unknown", K_SQL, 0, CLAIM1,
     "SELECT idem_settle('L',?1,'unknown','{\"timeout\":true}')"},
    {"settle-local", K_SQL, 0, "SELECT idem_claim('L','t1','c1','send','{\"n\":1}','local')",
     "SELECT idem_settle('L',?1,'succeeded','{\"rows\":0}')"},
    {"settle-local-released", K_SQL, 0,
     "SELECT idem_claim('L','t1','c1','send','{\"n\":1}','local')",
     "SELECT idem_settle('L',?1,'released',NULL)"},
    {"settle-in-txn", K_SQL, F_TXN,
     "CREATE TABLE other(x); " CLAIM1 "; BEGIN; INSERT INTO other VALUES(1)",
     "SELECT idem_settle('L',?1,'succeeded','{\"ok\":1}')"},
    {"resolve", K_SQL, 0, CLAIM1 ";SELECT idem_settle('L',?1,'unknown',NULL)",
     "SELECT idem_resolve('L','t1',?2,'succeeded','{\"ok\":true,\"ref\":\"r-1\"}')"},
    {"resolve-released", K_SQL, 0, CLAIM1 ";SELECT idem_settle('L',?1,'unknown',NULL)",
     "SELECT idem_resolve('L','t1',?2,'released','{\"sent\":false}')"},
    {"purge", K_SQL, F_SLEEP,
     CLAIM1 ";SELECT idem_settle('L',?1,'succeeded',NULL);"
            "SELECT idem_claim('L','t1','c1','send','{\"n\":2}');"
            "SELECT idem_settle('L',?1,'failed',NULL);"
            "SELECT idem_claim('L','t1','c1','send','{\"n\":3}')",
     "SELECT idem_purge('L', 0)"},
    {"select-all", K_SQL, 0,
     CLAIM1 ";SELECT idem_settle('L',?1,'succeeded','{\"a\":1}');"
            "SELECT idem_claim('L','t2','c1','send','{\"n\":2}','local')",
     "SELECT tenant,\"key\",conversation,tool,args,effect,status,result,error,attempt,token,"
     "created_at,updated_at,lease_until,members FROM L"},
    {"select-key", K_SQL, 0, CLAIM1,
     "SELECT status, token FROM L WHERE tenant='t1' AND \"key\"=?2"},
    {"select-expired", K_SQL, 0,
     "CREATE VIRTUAL TABLE L0 USING idempotency(lease_seconds=0);"
     "SELECT idem_claim('L0','t1','c1','send','{\"n\":1}','local');"
     "SELECT idem_claim('L0','t1','c1','send','{\"n\":2}')",
     "SELECT status FROM L0"},
    {"delete-terminal", K_SQL, 0, CLAIM1 ";SELECT idem_settle('L',?1,'succeeded',NULL)",
     "DELETE FROM L WHERE status='succeeded'"},
    {"drop-ledger", K_SQL, 0, "CREATE VIRTUAL TABLE L3 USING idempotency", "DROP TABLE L3"},
    {"upgrade-restore-trigger", K_SQL, 0, "DROP TRIGGER L_rows_delete", "SELECT idem_upgrade('L')"},
    {"release-external", K_SQL, 0, CLAIM1,
     "SELECT idem_settle('L',?1,'released','{\"why\":\"no route\",\"sent\":false}')"},
    {"rename-ledger", K_SQL, 0, CLAIM1, "ALTER TABLE L RENAME TO L9"},
    {"renew", K_SQL, 0, CLAIM1, "SELECT idem_renew('L',?1,600)"},
    {"renew-default", K_SQL, 0, "SELECT idem_claim('L','t1','c1','send','{\"n\":1}','local')",
     "SELECT idem_renew('L',?1)"},
    {"renew-settled", K_SQL, 0, CLAIM1 ";SELECT idem_settle('L',?1,'succeeded',NULL)",
     "SELECT idem_renew('L',?1)"},
    {"renew-expired", K_SQL, 0,
     "CREATE VIRTUAL TABLE L0 USING idempotency(lease_seconds=0);"
     "SELECT idem_claim('L0','t1','c1','send','{\"n\":1}')",
     "SELECT idem_renew('L0',?1)"},
    {"renew-in-txn", K_SQL, F_TXN, CLAIM1 "; BEGIN", "SELECT idem_renew('L',?1,60)"},
    {"claim-local-deferred-txn", K_SQL, F_TXN,
     "CREATE TABLE o(id INTEGER PRIMARY KEY, tenant, k);"
     "SELECT idem_guard('L','o','k','tenant'); BEGIN",
     "SELECT idem_claim('L','t1','c1','send','{\"n\":7}','local')"},
    {"claim-require-txn-refused", K_SQL, 0,
     "CREATE VIRTUAL TABLE R USING idempotency(require_transaction=1)",
     "SELECT idem_claim('R','t1','c1','send','{\"n\":1}')"},
    {"claim-require-txn-in-txn", K_SQL, F_TXN,
     "CREATE VIRTUAL TABLE R USING idempotency(require_transaction=1); BEGIN",
     "SELECT idem_claim('R','t1','c1','send','{\"n\":1}')"},
    {"claim-qualified", K_SQL, 0,
     "ATTACH ':memory:' AS aux; CREATE VIRTUAL TABLE aux.L USING idempotency",
     "SELECT idem_claim('\"aux\".L','t1','c1','send','{\"n\":1}')"},
    {"claim-retention", K_SQL, 0,
     /* two succeeded rows made (and settled) at Unix ms 1: due for purging
     ** (written with the rows table's triggers dropped, as only the
     ** extension writes it, and restored by idem_upgrade) */
     "CREATE VIRTUAL TABLE LR USING idempotency(retention_seconds=1);"
     "DROP TRIGGER LR_rows_insert; DROP TRIGGER LR_rows_update;"
     "INSERT INTO LR_rows(tenant,\"key\",conversation,tool,args,effect,status,attempt,token,"
     "created_at,updated_at,lease_until) VALUES"
     "('t1','old-1','c1','send','{}','external','claimed',1,7,1,1,1),"
     "('t1','old-2','c1','send','{}','external','claimed',1,8,1,1,1);"
     "UPDATE LR_rows SET status='succeeded'; SELECT idem_upgrade('LR')",
     "SELECT idem_claim('LR','t1','c1','send','{\"n\":3}')"},
    {"claim-missing-shadow", K_SQL, 0,
     "CREATE VIRTUAL TABLE LB USING idempotency; DROP TABLE LB_guards",
     "SELECT idem_claim('LB','t1','c1','send','{\"n\":1}')"},
    {"drop-missing-shadow", K_SQL, 0,
     "CREATE VIRTUAL TABLE LB USING idempotency; DROP TABLE LB_meta", "DROP TABLE LB"},
    {"health", K_SQL, F_DET | F_READ,
     "CREATE TABLE o(id INTEGER PRIMARY KEY, tenant, k);"
     "SELECT idem_guard('L','o','k','tenant');" CLAIM1
     ";SELECT idem_settle('L',?1,'succeeded','{\"a\":1}');"
     "SELECT idem_claim('L','t1','c1','send','{\"n\":2}');"
     "SELECT idem_settle('L',?1,'unknown',NULL);"
     "SELECT idem_claim('L','t2','c1','pay','{\"n\":3}','local');"
     "SELECT idem_claim('L','t2','c1','pay','{\"n\":4}')",
     HEALTH("L")},
    {"health-expired", K_SQL, F_DET | F_READ,
     "CREATE VIRTUAL TABLE L0 USING idempotency(lease_seconds=0);"
     "SELECT idem_claim('L0','t1','c1','send','{\"n\":1}');"
     "SELECT idem_claim('L0','t1','c1','send','{\"n\":2}','local');"
     "SELECT idem_claim('L0','t2','c1','pay','{\"n\":3}')",
     HEALTH("L0")},
    {"health-broken", K_SQL, F_DET | F_READ, CLAIM1 ";DROP TRIGGER L_rows_delete", HEALTH("L")},
    {"health-guard-broken", K_SQL, F_DET | F_READ,
     "CREATE TABLE o(id INTEGER PRIMARY KEY, tenant, k);"
     "SELECT idem_guard('L','o','k','tenant'); DROP TRIGGER o_idem_L_member",
     HEALTH("L")},
    {"health-rows-unreadable", K_SQL, F_DET | F_READ,
     CLAIM1 "; ALTER TABLE L_rows RENAME COLUMN tool TO tool_renamed", HEALTH("L")},
    {"health-table-altered", K_SQL, F_DET | F_READ, CLAIM1 "; ALTER TABLE L_rows ADD COLUMN note",
     HEALTH("L")},
    {"claim-table-altered", K_SQL, 0, CLAIM1 "; ALTER TABLE L_rows DROP COLUMN members",
     "SELECT idem_claim('L','t1','c1','send','{\"n\":9}')"},
    {"renew-table-altered", K_SQL, 0, CLAIM1 "; ALTER TABLE L_rows RENAME COLUMN members TO m2",
     "SELECT idem_renew('L',?1)"},
    {"upgrade-table-altered", K_SQL, 0, "ALTER TABLE L_rows DROP COLUMN members",
     "SELECT idem_upgrade('L')"},
    {"health-table-refused", K_SQL, F_DET | F_READ,
     CLAIM1 "; ALTER TABLE L_rows DROP COLUMN members", HEALTH("L")},
    {"health-missing-shadow", K_SQL, F_DET | F_READ,
     "CREATE VIRTUAL TABLE LB USING idempotency; DROP TABLE LB_guards", HEALTH("LB")},
    {"guard", K_SQL, F_DET, "CREATE TABLE o(id INTEGER PRIMARY KEY, tenant, k)",
     "SELECT idem_guard('L','o','k','tenant')"},
    {"unguard", K_SQL, F_DET,
     "CREATE TABLE o(id INTEGER PRIMARY KEY, tenant, k); SELECT idem_guard('L','o','k','tenant')",
     "SELECT idem_unguard('L','o')"},
    {"guard-in-txn", K_SQL, F_TXN | F_DET,
     "CREATE TABLE o(id INTEGER PRIMARY KEY, tenant, k); CREATE TABLE other(x);"
     " BEGIN; INSERT INTO other VALUES(1)",
     "SELECT idem_guard('L','o','k','tenant')"},
    {"guard-in-ddl-txn", K_SQL, F_TXN | F_DET,
     "BEGIN; CREATE TABLE o(id INTEGER PRIMARY KEY, tenant, k)",
     "SELECT idem_guard('L','o','k','tenant')"},
    {"unguard-in-txn", K_SQL, F_TXN | F_DET,
     "CREATE TABLE o(id INTEGER PRIMARY KEY, tenant, k); SELECT idem_guard('L','o','k','tenant');"
     " CREATE TABLE other(x); BEGIN; INSERT INTO other VALUES(1)",
     "SELECT idem_unguard('L','o')"},
    {"file-select", K_FILE, 0, "", "SELECT count(*) FROM L"},
    {"file-claim-new", K_FILE, 0, "", "SELECT idem_claim('L','t1','c1','send','{\"n\":5000}')"},
    {"file-claim-in-progress", K_FILE, 0, "", CLAIM1},
    {"file-insert", K_FILE, 0, "",
     "INSERT INTO L(tenant,conversation,tool,args) VALUES('t1','c1','send','{\"n\":5001}')"},
    {"file-health", K_FILE, F_DET | F_READ, "", HEALTH("L")},
    /* idem_upgrade of the committed files of earlier formats (the paths
    ** from the top of the tree, where tests/suites/32-oom.sh runs this) */
    {"upgrade-format1", K_OLDER, F_DET, "tests/fixtures/format1.db", "SELECT idem_upgrade('L')"},
    {"upgrade-format2", K_OLDER, F_DET, "tests/fixtures/format2.db", "SELECT idem_upgrade('L')"},
    {"upgrade-format3", K_OLDER, F_DET, "tests/fixtures/format3.db", "SELECT idem_upgrade('L')"},
    UPGRADE_IN_TXN("1"),
    UPGRADE_IN_TXN("2"),
    UPGRADE_IN_TXN("3"),
};
#define N_OP ((int)(sizeof(aOp) / sizeof(aOp[0])))

/* ------------------------------------------------------------------ */
/* One run                                                             */
/* ------------------------------------------------------------------ */

static const char *zExt = 0, *zDir = "/tmp";
static int bVerbose = 0;
static char zTemplate[512], zWork[512];

typedef struct Run Run;
struct Run {
  int rc;            /* primary result code of the operation */
  char zMsg[400];    /* its message */
  char zRes[4000];   /* first column of the first row (idem_health's answer fits) */
  int bFired;        /* the Nth allocation was reached */
  int nRows;         /* rows of L_rows after */
  char zWhy[600];    /* why the run failed a check ("" when fine) */
  long long nAllocs; /* allocation calls while armed */
};

static unsigned long long fnv(unsigned long long h, const void *p, size_t n) {
  const unsigned char *u = (const unsigned char *)p;
  size_t i;
  for (i = 0; i < n; i++) h = (h ^ u[i]) * 1099511628211ULL;
  return h;
}

/* A digest of the schema and every row of every real table; 0 on error. */
static unsigned long long digest(sqlite3 *db, int *pnRows) {
  unsigned long long h = 1469598103934665603ULL;
  sqlite3_stmt *pT = 0, *pR = 0;
  int rc;
  *pnRows = -1;
  rc = sqlite3_prepare_v2(db, "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY name",
                          -1, &pT, 0);
  if (rc) return 0;
  while (sqlite3_step(pT) == SQLITE_ROW) {
    int i;
    const char *zType = (const char *)sqlite3_column_text(pT, 0);
    const char *zTbl = (const char *)sqlite3_column_text(pT, 1);
    const char *zSql = (const char *)sqlite3_column_text(pT, 3);
    char zQ[300];
    for (i = 0; i < 4; i++) {
      const char *z = (const char *)sqlite3_column_text(pT, i);
      h = fnv(h, z ? z : "\1", z ? strlen(z) + 1 : 1);
    }
    if (!zType || strcmp(zType, "table") || !zSql ||
        sqlite3_strnicmp(zSql, "CREATE VIRTUAL", 14) == 0) {
      continue;
    }
    fmt_str(zQ, sizeof(zQ), "SELECT * FROM \"%w\" ORDER BY 1", zTbl);
    if (sqlite3_prepare_v2(db, zQ, -1, &pR, 0)) {
      sqlite3_finalize(pT);
      return 0;
    }
    while (sqlite3_step(pR) == SQLITE_ROW) {
      int n = sqlite3_column_count(pR);
      for (i = 0; i < n; i++) {
        int t = sqlite3_column_type(pR, i);
        const unsigned char *z = sqlite3_column_text(pR, i);
        h = fnv(h, &t, sizeof(t));
        if (z) h = fnv(h, z, (size_t)sqlite3_column_bytes(pR, i));
      }
      if (strcmp(zTbl, "L_rows") == 0) *pnRows = *pnRows < 0 ? 1 : *pnRows + 1;
    }
    if (sqlite3_finalize(pR)) {
      sqlite3_finalize(pT);
      return 0;
    }
    pR = 0;
  }
  if (sqlite3_finalize(pT)) return 0;
  if (*pnRows < 0) *pnRows = 0;
  return h ? h : 1;
}

/* Copy file zFrom to zTo; 0 on success. */
static int copy_file(const char *zFrom, const char *zTo) {
  FILE *in = fopen(zFrom, "rb"), *out;
  char buf[8192];
  size_t n;
  if (in == 0) return 1;
  out = fopen(zTo, "wb");
  if (out == 0) {
    fclose(in);
    return 1;
  }
  while ((n = fread(buf, 1, sizeof(buf), in)) > 0) {
    if (fwrite(buf, 1, n, out) != n) break;
  }
  fclose(in);
  return fclose(out) != 0;
}

/* Run zSql statement by statement, binding ?1/?2 from/into zTok/zKey.
** Returns the first error code (message into zErr). */
static int run_script(sqlite3 *db, const char *zSql, char *zTok, char *zKey, char *zErr,
                      size_t nErr) {
  const char *zTail = zSql;
  int rc = SQLITE_OK;
  while (rc == SQLITE_OK && zTail && *zTail) {
    sqlite3_stmt *pS = 0;
    rc = sqlite3_prepare_v2(db, zTail, -1, &pS, &zTail);
    if (rc) break;
    if (pS == 0) break;
    if (sqlite3_bind_parameter_count(pS) >= 1) sqlite3_bind_text(pS, 1, zTok, -1, SQLITE_TRANSIENT);
    if (sqlite3_bind_parameter_count(pS) >= 2) sqlite3_bind_text(pS, 2, zKey, -1, SQLITE_TRANSIENT);
    while ((rc = sqlite3_step(pS)) == SQLITE_ROW) {
      const char *z = (const char *)sqlite3_column_text(pS, 0);
      char zT[40] = "", zK[48] = "";
      if (z && json_field(z, "token", zT, sizeof(zT)) && zT[0]) fmt_str(zTok, 40, "%s", zT);
      if (z && json_field(z, "key", zK, sizeof(zK)) && zK[0] && strstr(z, "\"decision\"")) {
        fmt_str(zKey, 48, "%s", zK);
      }
    }
    if (rc == SQLITE_DONE) rc = SQLITE_OK;
    if (rc) fmt_str(zErr, nErr, "%s", sqlite3_errmsg(db));
    sqlite3_finalize(pS);
  }
  if (rc && zErr[0] == 0) fmt_str(zErr, nErr, "%s", sqlite3_errmsg(db));
  return rc;
}

static const char *const zLedger = "CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=3600)";

/* Create the file template used by the K_FILE operations. */
static int make_template(char *zErr, size_t nErr) {
  sqlite3 *db = 0;
  char zTok[40] = "", zKey[48] = "";
  int rc;
  remove(zTemplate);
  rc = sqlite3_open(zTemplate, &db);
  if (rc == SQLITE_OK) {
    char *zLoadErr = 0;
    rc = stress_load(db, zExt, &zLoadErr);
    if (rc) fmt_str(zErr, nErr, "load: %s", zLoadErr ? zLoadErr : "?");
    sqlite3_free(zLoadErr);
  }
  if (rc == SQLITE_OK) {
    rc = run_script(db,
                    "PRAGMA journal_mode=DELETE;"
                    "CREATE VIRTUAL TABLE L USING idempotency(lease_seconds=3600);" CLAIM1
                    ";"
                    "SELECT idem_claim('L','t1','c1','send','{\"n\":2}');"
                    "SELECT idem_settle('L',?1,'succeeded','{\"x\":1}')",
                    zTok, zKey, zErr, nErr);
  }
  if (rc && zErr[0] == 0) fmt_str(zErr, nErr, "%s", sqlite3_errmsg(db));
  sqlite3_close(db);
  return rc;
}

/*
** One run of operation op with the Nth allocation failing (N=0: none).
** Fills *r; r->zWhy is non-empty when a check failed.
*/
static void run_once(const Op *op, long long n, const Run *pRef, Run *r) {
  static const char *const azSavepoint[] = {"idem_claim", "idem_guard", "idem_unguard",
                                            "idem_upgrade", 0};
  sqlite3 *db = 0;
  sqlite3_stmt *pS = 0;
  char zTok[40] = "", zKey[48] = "", zErr[400] = "";
  long long nBase;
  unsigned long long h0 = 0, h1 = 0, h2;
  int rc, i, nRows0 = 0, nRows1 = 0, nRows2 = 0, bAuto1 = 1;
  const char *zSetup = op->zSetup;

  memset(r, 0, sizeof(*r));
  nBase = nLive;
  if (op->eKind == K_FILE || op->eKind == K_OLDER) {
    char zFrom[512];
    if (op->eKind == K_OLDER) {
      zSetup = strchr(op->zSetup, ';');
      zSetup = zSetup ? zSetup + 1 : "";
      fmt_str(zFrom, sizeof(zFrom), "%.*s", (int)strcspn(op->zSetup, ";"), op->zSetup);
    } else {
      fmt_str(zFrom, sizeof(zFrom), "%s", zTemplate);
    }
    if (copy_file(zFrom, zWork)) {
      fmt_str(r->zWhy, sizeof(r->zWhy), "cannot copy the database %s", zFrom);
      return;
    }
    rc = sqlite3_open(zWork, &db);
  } else {
    rc = sqlite3_open(":memory:", &db);
  }
  if (rc) {
    fmt_str(r->zWhy, sizeof(r->zWhy), "setup: open: %s", sqlite3_errstr(rc));
    sqlite3_close(db);
    return;
  }
  if (op->eKind != K_LOAD) {
    char *zLoadErr = 0;
    rc = stress_load(db, zExt, &zLoadErr);
    if (rc) fmt_str(zErr, sizeof(zErr), "load: %s", zLoadErr ? zLoadErr : "?");
    sqlite3_free(zLoadErr);
    if (rc == SQLITE_OK && op->eKind == K_SQL) {
      rc = run_script(db, zLedger, zTok, zKey, zErr, sizeof(zErr));
    }
    if (rc == SQLITE_OK && (op->flags & F_TXN)) {
      /* everything up to BEGIN, digest, then the rest */
      const char *zBegin = strstr(zSetup, "BEGIN");
      char zPre[600];
      fmt_str(zPre, sizeof(zPre), "%.*s", (int)(zBegin - zSetup), zSetup);
      rc = run_script(db, zPre, zTok, zKey, zErr, sizeof(zErr));
      if (rc == SQLITE_OK) h0 = digest(db, &nRows0);
      if (rc == SQLITE_OK) rc = run_script(db, zBegin, zTok, zKey, zErr, sizeof(zErr));
    } else if (rc == SQLITE_OK) {
      rc = run_script(db, zSetup, zTok, zKey, zErr, sizeof(zErr));
    }
    if (rc) {
      fmt_str(r->zWhy, sizeof(r->zWhy), "setup: %s", zErr);
      sqlite3_close(db);
      return;
    }
  }
  if (op->flags & F_SLEEP) usleep(3000);
  h1 = digest(db, &nRows1);
  bAuto1 = sqlite3_get_autocommit(db);

  /* the operation, armed */
  arm(n);
  if (op->eKind == K_LOAD) {
    char *zLoadErr = 0;
    rc = stress_load(db, zExt, &zLoadErr);
    disarm();
    fmt_str(r->zMsg, sizeof(r->zMsg), "%s", zLoadErr ? zLoadErr : "");
    sqlite3_free(zLoadErr);
  } else {
    rc = sqlite3_prepare_v2(db, op->zSql, -1, &pS, 0);
    if (rc == SQLITE_OK && sqlite3_bind_parameter_count(pS) >= 1) {
      rc = sqlite3_bind_text(pS, 1, zTok, -1, SQLITE_TRANSIENT);
    }
    if (rc == SQLITE_OK && sqlite3_bind_parameter_count(pS) >= 2) {
      rc = sqlite3_bind_text(pS, 2, zKey, -1, SQLITE_TRANSIENT);
    }
    if (rc == SQLITE_OK) {
      int nRow = 0;
      while ((rc = sqlite3_step(pS)) == SQLITE_ROW) {
        /* read without a conversion: converting an integer to text
        ** allocates, and that failure would be the harness's, not the op's */
        int t = sqlite3_column_type(pS, 0);
        if (nRow++ > 0) continue;
        if (t == SQLITE_TEXT) {
          const char *z = (const char *)sqlite3_column_text(pS, 0);
          fmt_str(r->zRes, sizeof(r->zRes), "%s", z ? z : "NULL");
        } else if (t == SQLITE_INTEGER) {
          fmt_str(r->zRes, sizeof(r->zRes), "%lld", sqlite3_column_int64(pS, 0));
        } else {
          fmt_str(r->zRes, sizeof(r->zRes), "%s", t == SQLITE_NULL ? "NULL" : "(other)");
        }
      }
      if (rc == SQLITE_DONE) rc = SQLITE_OK;
    }
    if (rc) fmt_str(r->zMsg, sizeof(r->zMsg), "%s", sqlite3_errmsg(db));
    {
      int rcF = sqlite3_finalize(pS);
      if (rc == SQLITE_OK && rcF) {
        rc = rcF;
        fmt_str(r->zMsg, sizeof(r->zMsg), "%s", sqlite3_errmsg(db));
      }
    }
    disarm();
  }
  r->rc = rc & 0xff;
  r->bFired = bFired;
  r->nAllocs = nCalls;

  /* checks, disarmed */
  if (pRef == 0) {
    /* the unfaulted run */
  } else if (r->rc == SQLITE_NOMEM || (op->eKind == K_LOAD && r->rc == SQLITE_ERROR &&
                                       strstr(r->zMsg, "error during initialization"))) {
    if (op->eKind != K_LOAD) {
      int bAuto2 = sqlite3_get_autocommit(db);
      h2 = digest(db, &nRows2);
      if (h2 == 0) {
        fmt_str(r->zWhy, sizeof(r->zWhy), "after NOMEM the database cannot be read: %s",
                sqlite3_errmsg(db));
      } else if (bAuto2 == bAuto1 && h2 != h1) {
        fmt_str(r->zWhy, sizeof(r->zWhy),
                "NOMEM (%s) but the database changed: L_rows %d -> %d rows", r->zMsg, nRows1,
                nRows2);
      } else if (bAuto2 != bAuto1 && !(bAuto1 == 0 && bAuto2 == 1 && h2 == h0)) {
        fmt_str(r->zWhy, sizeof(r->zWhy), "NOMEM (%s) left autocommit %d -> %d and %s the database",
                r->zMsg, bAuto1, bAuto2, h2 == h1 ? "kept" : "changed");
      }
    }
  } else if (r->rc != pRef->rc) {
    fmt_str(r->zWhy, sizeof(r->zWhy), "returned %s \"%s\" (an unfaulted run gives %s)",
            sqlite3_errstr(r->rc), r->zMsg, sqlite3_errstr(pRef->rc));
  } else {
    char zD1[40] = "", zD2[40] = "";
    json_field(pRef->zRes, "decision", zD1, sizeof(zD1));
    json_field(r->zRes, "decision", zD2, sizeof(zD2));
    if (strcmp(zD1, zD2) != 0 || ((op->flags & F_DET) && strcmp(pRef->zRes, r->zRes) != 0)) {
      /* from a little before the first difference: long answers differ late */
      size_t k = 0;
      while (r->zRes[k] && r->zRes[k] == pRef->zRes[k]) k++;
      k = k > 40 ? k - 40 : 0;
      fmt_str(r->zWhy, sizeof(r->zWhy),
              "succeeded with \"%s%.250s\", an unfaulted run gives \"%s%.250s\"", k ? "..." : "",
              r->zRes + k, k ? "..." : "", pRef->zRes + k);
    } else if (op->eKind != K_LOAD && r->rc == SQLITE_OK) {
      h2 = digest(db, &nRows2);
      if (nRows2 != pRef->nRows) {
        fmt_str(r->zWhy, sizeof(r->zWhy),
                "succeeded but L_rows has %d rows, an unfaulted run leaves %d", nRows2,
                pRef->nRows);
      } else if ((op->flags & F_READ) && h2 != h1) {
        fmt_str(r->zWhy, sizeof(r->zWhy), "succeeded but the database changed (it only reads)");
      }
    }
  }
  if (op->eKind != K_LOAD || r->rc == SQLITE_OK) {
    digest(db, &r->nRows);
    /* the connection still works and the ledger answers */
    if (r->zWhy[0] == 0 && sqlite3_exec(db, "SELECT count(*) FROM sqlite_schema", 0, 0, 0)) {
      fmt_str(r->zWhy, sizeof(r->zWhy), "the connection is unusable after the run: %s",
              sqlite3_errmsg(db));
    }
    /* no savepoint of the extension is left open in the caller's
    ** transaction (SQLite lists none: a ROLLBACK TO of each name must
    ** fail) */
    for (i = 0; r->zWhy[0] == 0 && !sqlite3_get_autocommit(db) && azSavepoint[i]; i++) {
      char zQ[80];
      fmt_str(zQ, sizeof(zQ), "ROLLBACK TO %s", azSavepoint[i]);
      if (sqlite3_exec(db, zQ, 0, 0, 0) == SQLITE_OK) {
        fmt_str(r->zWhy, sizeof(r->zWhy), "%s (%s \"%s\") left savepoint %s open",
                r->rc ? "failed" : "succeeded", sqlite3_errstr(r->rc), r->rc ? r->zMsg : r->zRes,
                azSavepoint[i]);
      }
    }
  }
  if (!sqlite3_get_autocommit(db)) sqlite3_exec(db, "ROLLBACK", 0, 0, 0);
  rc = sqlite3_close(db);
  if (rc != SQLITE_OK) {
    if (r->zWhy[0] == 0) {
      fmt_str(r->zWhy, sizeof(r->zWhy), "sqlite3_close: %s (a statement was leaked)",
              sqlite3_errstr(rc));
    }
    sqlite3_close_v2(db);
  } else if (nLive != nBase && r->zWhy[0] == 0) {
    fmt_str(r->zWhy, sizeof(r->zWhy), "%lld allocation%s leaked (result %s \"%s\")", nLive - nBase,
            nLive - nBase == 1 ? "" : "s", sqlite3_errstr(r->rc), r->rc ? r->zMsg : r->zRes);
  }
  if (op->eKind == K_FILE || op->eKind == K_OLDER) remove(zWork);
}

/*
** run_once in a child process, for the load operation: a failed load
** unmaps the library, and whatever it left registered is called later (at
** sqlite3_close at the latest); a crash there must be a FAIL line, not the
** end of the suite.
*/
static void run_forked(const Op *op, long long n, const Run *pRef, Run *r) {
  Run *pShared = mmap(0, sizeof(Run), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  pid_t pid;
  int st = 0;
  if (pShared == MAP_FAILED) {
    memset(r, 0, sizeof(*r));
    fmt_str(r->zWhy, sizeof(r->zWhy), "mmap failed");
    return;
  }
  memset(pShared, 0, sizeof(*pShared));
  fflush(stdout);
  pid = fork();
  if (pid == 0) {
    /* the crash is reported by the FAIL line; keep sanitizer noise out */
    if (n > 0 && freopen("/dev/null", "w", stderr) == 0) _exit(6);
    run_once(op, n, pRef, pShared);
    _exit(0);
  }
  while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  *r = *pShared;
  munmap(pShared, sizeof(Run));
  if (pid < 0) {
    fmt_str(r->zWhy, sizeof(r->zWhy), "fork failed");
  } else if (WIFSIGNALED(st)) {
    fmt_str(r->zWhy, sizeof(r->zWhy),
            "crashed with signal %d (result of the armed call: %s \"%s\")", WTERMSIG(st),
            sqlite3_errstr(r->rc), r->zMsg);
    r->bFired = 1;
  } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fmt_str(r->zWhy, sizeof(r->zWhy),
            "exited with status %d, a sanitizer's crash report (result of the armed call: %s "
            "\"%s\")",
            WEXITSTATUS(st), sqlite3_errstr(r->rc), r->zMsg);
    r->bFired = 1;
  }
}

static int usage(void) {
  fprintf(stderr,
          "usage: oom [--ext PATH] [--dir DIR] [--only NAME] [--step K] [--dense N] [--budget M]"
          " [--from N] [--persistent] [--verbose] [--list]\n");
  return 2;
}

int main(int argc, char **argv) {
  static sqlite3_mem_methods wrap = {mem_malloc,  mem_free, mem_realloc,  mem_size,
                                     mem_roundup, mem_init, mem_shutdown, 0};
  const char *zOnly = 0;
  long long nStep = 1, nFrom = 1, nDense = 400, nBudget = 200;
  int i, nFail = 0, nOps = 0;
  long long nRunsAll = 0;
  char zErr[400] = "";

  for (i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : 0;
    if (strcmp(a, "--persistent") == 0) {
      bPersistent = 1;
      continue;
    }
    if (strcmp(a, "--verbose") == 0) {
      bVerbose = 1;
      continue;
    }
    if (strcmp(a, "--list") == 0) {
      for (i = 0; i < N_OP; i++) printf("%s\n", aOp[i].zName);
      return 0;
    }
    if (v == 0) return usage();
    if (strcmp(a, "--ext") == 0) zExt = v;
    else if (strcmp(a, "--dir") == 0) zDir = v;
    else if (strcmp(a, "--only") == 0) zOnly = v;
    else if (strcmp(a, "--step") == 0) nStep = atoll(v);
    else if (strcmp(a, "--from") == 0) nFrom = atoll(v);
    else if (strcmp(a, "--dense") == 0) nDense = atoll(v);
    else if (strcmp(a, "--budget") == 0) nBudget = atoll(v);
    else return usage();
    i++;
  }
  if (nStep < 1) return usage();
  zExt = stress_ext_path(zExt);
  fmt_str(zTemplate, sizeof(zTemplate), "%s/oom-template.db", zDir);
  fmt_str(zWork, sizeof(zWork), "%s/oom-work.db", zDir);

  if (sqlite3_config(SQLITE_CONFIG_GETMALLOC, &orig) != SQLITE_OK ||
      sqlite3_config(SQLITE_CONFIG_MALLOC, &wrap) != SQLITE_OK ||
      sqlite3_config(SQLITE_CONFIG_LOOKASIDE, 0, 0) != SQLITE_OK ||
      sqlite3_initialize() != SQLITE_OK) {
    printf("FAIL oom:setup: cannot install the allocator before sqlite3_initialize\n");
    return 1;
  }
  if (make_template(zErr, sizeof(zErr))) {
    printf("FAIL oom:setup: template database: %s\n", zErr);
    return 1;
  }

  for (i = 0; i < N_OP; i++) {
    const Op *op = &aOp[i];
    Run ref, r;
    long long n, nMax;
    int nBad = 0, nNomem = 0, nOk = 0, bDone = 0;
    char zFirst[700] = "";
    long long nStride;
    if (zOnly && strcmp(zOnly, op->zName) != 0) continue;
    void (*xRun)(const Op *, long long, const Run *, Run *) =
        op->eKind == K_LOAD ? run_forked : run_once;
    xRun(op, 0, 0, &ref);
    if (ref.zWhy[0]) {
      printf("FAIL oom.%s: the unfaulted run fails: %s\n", op->zName, ref.zWhy);
      nFail++;
      continue;
    }
    nMax = ref.nAllocs * 4 + 200;
    /* past nDense, a stride that keeps the op within nBudget more runs; the
    ** stride is odd and prime-ish so it does not stay in step with loops */
    nStride = nStep;
    if (nBudget > 0 && ref.nAllocs > nDense && (ref.nAllocs - nDense) / nStep > nBudget) {
      nStride = (ref.nAllocs - nDense) / nBudget;
      nStride |= 1;
    }
    for (n = nFrom; n <= nMax; n += n < nDense ? nStep : nStride) {
      xRun(op, n, &ref, &r);
      if (r.zWhy[0]) {
        if (nBad++ == 0) fmt_str(zFirst, sizeof(zFirst), "N=%lld: %s", n, r.zWhy);
        if (bVerbose) printf("  oom.%s: N=%lld: %s\n", op->zName, n, r.zWhy);
      } else if (r.rc == SQLITE_NOMEM || r.rc == SQLITE_ERROR) {
        nNomem++;
      } else {
        nOk++;
      }
      if (!r.bFired) {
        bDone = 1;
        break;
      }
    }
    nRunsAll += nNomem + nOk + nBad;
    nOps++;
    if (nBad || bVerbose) {
      printf(
          "  oom.%s: %lld allocations unfaulted; N=%lld..%lld: %d out of memory, %d "
          "recovered, %d wrong\n",
          op->zName, ref.nAllocs, nFrom, n, nNomem, nOk, nBad);
    }
    if (!bDone && nBad == 0) {
      fmt_str(zFirst, sizeof(zFirst), "still failing at N=%lld", nMax);
      nBad = 1;
    }
    if (nBad) {
      printf("FAIL oom.%s: %s%s\n", op->zName, zFirst, nBad > 1 ? " (and more at other N)" : "");
      nFail++;
    } else {
      printf("PASS oom.%s\n", op->zName);
    }
    fflush(stdout);
  }
  remove(zTemplate);
  printf("  oom: %d operations, %lld faulted runs%s\n", nOps, nRunsAll,
         bPersistent ? " (persistent failures)" : "");
  if (sqlite3_shutdown() != SQLITE_OK || nLive != 0) {
    printf("FAIL oom:no-leak-at-shutdown: %lld allocations live after sqlite3_shutdown\n", nLive);
    nFail++;
  } else {
    printf("PASS oom:no-leak-at-shutdown\n");
  }
  return nFail ? 1 : 0;
}

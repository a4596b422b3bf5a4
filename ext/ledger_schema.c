/*
** ledger_schema.c: the shadow tables as the file holds them. The format
** (format 5: <name>_rows, _meta, _guards, _members and _targets, their
** indexes and triggers) is written down once, in docs/design.md,
** "Shadow-table format"; the triggers are listed again above aOwn, beside
** the SQL that is them. Here: the tables' and own triggers' text (written
** once, and compared by text), creating, renaming and dropping them,
** which of them exist, reading a ledger's file, the scan that checks the
** shadow and guarded tables carry exactly the ledger's own triggers, and
** what idem_health reads of them. It calls ledger_config.c and
** guard_schema.c.
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <stdlib.h>
#include <string.h>

/* The status sets of idem_internal.h in the forms the trigger texts use. */
#define NEW_TERMINAL SQL_TERMINAL_IS("NEW.status")
#define OLD_OPEN SQL_OPEN_IS("OLD.status")
#define R_OPEN SQL_OPEN_IS("r.status")
#define ROW_OPEN SQL_OPEN_IS("status")

/*
** The key grammar (docs/keys.md, "Key grammar") in plain SQL: TEXT of 1 to 128
** characters, each in A-Z a-z 0-9 _ -. GLOB stops at an embedded NUL, so
** instr() refuses one first. Measured against the other spellings of the
** same rule that SQLite 3.40 can evaluate (docs/benchmarks.md, "Where a claim's time goes"),
** this one is the cheapest on realistic values: rtrim() with the allowed
** set pays a fixed cost per call for parsing the set and scans it
** linearly, so it wins only on hex-heavy text.
*/
#define GRAMMAR(c)                                                                             \
  "typeof(" c ")='text' AND length(" c ") BETWEEN 1 AND 128 AND instr(" c ",char(0))=0 AND " c \
  " NOT GLOB '*[^A-Za-z0-9_-]*'"

/* The statement's clock in Unix ms, as the extension's (VFS) clock */
#define SQL_NOW "CAST(round((julianday('now')-2440587.5)*86400000) AS INTEGER)"

/* Messages of the shadow-table triggers (RAISE takes only a literal). */
#define MSG_INSERT                                                                  \
  "idempotency: only a fresh claim may be inserted into a ledger: status claimed, " \
  "attempt 1, no result, error or members, well-formed key parts, and no row with " \
  "that id or that key"

#define MSG_ID "idempotency: a ledger row id must be a positive integer"

#define MSG_UPDATE                                                                    \
  "idempotency: illegal change of a ledger row: the request never changes, a live "   \
  "claim is not taken over, unknown never becomes claimed, succeeded and failed are " \
  "final, an external claim is released only with detail {\"sent\": false}, and a "   \
  "local claim that wrote guarded rows is neither released nor taken over"

#define MSG_DELETE "idempotency: a claimed or unknown ledger row cannot be deleted"

#define MSG_META                                                                    \
  "idempotency: the format, identity and options of a ledger are fixed when it is " \
  "created"

#define MSG_GUARDS \
  "idempotency: a guard is added only by idem_guard and removed only by idem_unguard"

#define MSG_MEMBERS                                                                   \
  "idempotency: a member is recorded only by a guard trigger, for the claimed local " \
  "claim that wrote it, and kept unchanged while that claim is claimed or unknown"

/* The key grammar of a NEW column, for the insert trigger (CHECKs can be
** turned off by PRAGMA ignore_check_constraints; triggers cannot). */
#define NEW_GRAMMAR(c) GRAMMAR("NEW." c)

/*
** The own triggers of format 3, as SQLite stores them (no schema name), for
** idem_upgrade from format 3: what such a file holds.
** In the text, $ stands for the ledger's name quoted as an identifier
** (inside "..."), @ for it quoted as a literal (inside '...'), and # for
** the rows table's uniqueness rule ((tenant, key), or key on a
** single_tenant ledger). Together they enforce every row of the states
** table (docs/design.md, "Format 3") without the extension:
**
**   rows insert    only a fresh claim: status claimed, attempt 1, no
**                  result, error or members, no expiry counted, the key
**                  grammar on tenant, key, conversation and tool, the
**                  domains of args, effect, token and times (CHECKs alone
**                  do not hold under PRAGMA ignore_check_constraints),
**                  and no row with that id or that key. A REPLACE deletes
**                  without firing delete triggers, so the existence test
**                  is what keeps REPLACE from erasing a row.
**   rows id        after the insert: the row id is positive (an id <= 0
**                  could not be told from an automatic one before it).
**   rows update    the request columns never change, every column keeps
**                  its type, and the change is one of: an outcome (claimed
**                  -> succeeded|failed|released|unknown, unknown ->
**                  succeeded|failed|released; token, attempt, lease and
**                  expiries kept; unknown only for external claims; an
**                  external claim released only with a detail whose "sent"
**                  is false; a local claim released only when it has no
**                  members); a renewal (a live claim keeps token and
**                  attempt, its lease only grows); a take-over or
**                  re-claim (released, or claimed local whose lease has
**                  passed at the statement's clock and that has no
**                  members, while its expiries stay below the ledger's
**                  max_attempts -> claimed, attempt + 1, a new token, no
**                  result, error or members). Nothing else.
**   rows delete    never a claimed or unknown row.
**   rows forget    after a local row is deleted (purge, retention), its
**                  members go with it.
**   meta *         no insert, update or delete: fixed at creation.
**   guards *       a guard row is added only when its three triggers exist
**                  (idem_guard creates them first), never updated, and
**                  removed only once they are gone and no claimed or
**                  unknown claim has members in it.
**   members *      a member is added only for a claimed local claim of
**                  that attempt and an existing guard, and never updated;
**                  it goes with its claim's row (purge, retention), never
**                  while its claim is claimed or unknown: a row written and
**                  deleted again still was written.
**
** No extension function appears, and only innocuous built-ins (the JSON
** functions are not innocuous on SQLite 3.40, so a trigger using them
** fails under trusted_schema=OFF): a released external row's detail is
** stored with "sent":false as its first member (sent_first() in
** ledger_state.c), which the update trigger checks with GLOB. Every WHEN
** that tests a rule is wrapped in coalesce(..., 0): a NULL anywhere in the
** rule refuses the change instead of skipping the trigger.
*/
typedef struct OwnTrigger OwnTrigger;

struct OwnTrigger {
  const char *zTable;  /* the shadow table it is on: "rows", "meta", ... */
  const char *zSuffix; /* its name is <ledger>_<zTable>_<zSuffix> */
  const char *zSql;    /* the stored text, with $ @ # as above */
};

/* The triggers formats 3 and 4 share: a deleted local row's members go
** with it, and the options are fixed. */
#define META_REFUSE(kind, when)                           \
  {                                                       \
    "meta", kind,                                         \
        "CREATE TRIGGER \"$_meta_" kind "\" BEFORE " when \
        " ON \"$_meta\" BEGIN SELECT "                    \
        "RAISE(ABORT,'" MSG_META "'); END"                \
  }

#define FORGET_AND_META                                                                     \
  {"rows", "forget",                                                                        \
   "CREATE TRIGGER \"$_rows_forget\" AFTER DELETE ON \"$_rows\" WHEN OLD.effect IS 'local'" \
   " BEGIN DELETE FROM \"$_members\" WHERE claim=OLD.id; END"},                             \
      META_REFUSE("insert", "INSERT"), META_REFUSE("update", "UPDATE"),                     \
      META_REFUSE("delete", "DELETE"),

#define NO_MEMBERS \
  " NOT EXISTS(SELECT 1 FROM \"$_members\" WHERE claim=OLD.id AND attempt=OLD.attempt)"

static const OwnTrigger aOwnV3[] = {
    {"rows", "insert",
     "CREATE TRIGGER \"$_rows_insert\" BEFORE INSERT ON \"$_rows\" WHEN NOT coalesce("
     "NEW.status IS 'claimed' AND NEW.attempt IS 1 AND NEW.result IS NULL AND NEW.error IS NULL"
     " AND NEW.members IS NULL AND NEW.expirations IS 0"
     " AND " NEW_GRAMMAR("tenant") " AND " NEW_GRAMMAR("\"key\"") " AND " NEW_GRAMMAR(
         "conversation") " AND " NEW_GRAMMAR("tool") " AND typeof(NEW.args)='text' AND "
                                                     "length(NEW.args)>=1"
                                                     " AND (NEW.effect IS 'local' OR NEW.effect IS "
                                                     "'external')"
                                                     " AND typeof(NEW.token)='integer' AND "
                                                     "typeof(NEW.created_at)='integer'"
                                                     " AND typeof(NEW.updated_at)='integer' AND "
                                                     "typeof(NEW.lease_until)='integer',0)"
                                                     " OR (NEW.id>0 AND EXISTS(SELECT 1 FROM "
                                                     "\"$_rows\" WHERE id=NEW.id))"
                                                     " OR EXISTS(SELECT 1 FROM \"$_rows\" WHERE #)"
                                                     " BEGIN SELECT RAISE(ABORT,'" MSG_INSERT
                                                     "'); END"},
    {"rows", "id",
     "CREATE TRIGGER \"$_rows_id\" AFTER INSERT ON \"$_rows\" WHEN NOT coalesce(NEW.id>0,0)"
     " BEGIN SELECT RAISE(ABORT,'" MSG_ID "'); END"},
    {"rows", "update",
     "CREATE TRIGGER \"$_rows_update\" BEFORE UPDATE ON \"$_rows\" WHEN NOT coalesce(("
     "NEW.id IS OLD.id AND NEW.tenant IS OLD.tenant AND NEW.\"key\" IS OLD.\"key\""
     " AND NEW.conversation IS OLD.conversation AND NEW.tool IS OLD.tool"
     " AND NEW.args IS OLD.args AND NEW.effect IS OLD.effect"
     " AND NEW.created_at IS OLD.created_at"
     " AND typeof(NEW.attempt)='integer' AND typeof(NEW.token)='integer'"
     " AND typeof(NEW.updated_at)='integer' AND typeof(NEW.lease_until)='integer'"
     " AND typeof(NEW.expirations)='integer'"
     " AND (NEW.result IS NULL OR typeof(NEW.result)='text')"
     " AND (NEW.error IS NULL OR typeof(NEW.error)='text')"
     " AND (NEW.members IS NULL OR typeof(NEW.members)='text') AND ("
     "((OLD.status IS 'claimed' AND (" NEW_TERMINAL " OR NEW.status IS 'unknown')"
     " OR OLD.status IS 'unknown' AND (" NEW_TERMINAL "))"
     " AND NEW.token IS OLD.token AND NEW.attempt IS OLD.attempt"
     " AND NEW.lease_until IS OLD.lease_until AND NEW.expirations IS OLD.expirations"
     " AND (NEW.status IS NOT 'unknown' OR OLD.effect IS 'external')"
     " AND (NEW.status IS NOT 'released' OR OLD.effect IS 'local' AND" NO_MEMBERS
     " OR OLD.effect IS 'external' AND (NEW.error IS '{\"sent\":false}'"
     " OR NEW.error IS NOT NULL AND NEW.error GLOB '{\"sent\":false,*}')))"
     " OR (OLD.status IS 'claimed' AND NEW.status IS 'claimed' AND NEW.token IS OLD.token"
     " AND NEW.attempt IS OLD.attempt AND NEW.expirations IS OLD.expirations"
     " AND NEW.result IS OLD.result AND NEW.error IS OLD.error AND NEW.members IS OLD.members"
     " AND OLD.lease_until>" SQL_NOW " AND NEW.lease_until>=OLD.lease_until)"
     " OR ((OLD.status IS 'released' OR OLD.status IS 'claimed' AND OLD.effect IS 'local'"
     " AND OLD.lease_until<=" SQL_NOW " AND" NO_MEMBERS
     " AND NEW.expirations<(SELECT v FROM \"$_meta\" WHERE k='max_attempts'))"
     " AND NEW.status IS 'claimed' AND NEW.attempt IS OLD.attempt+1 AND NEW.token IS NOT OLD.token"
     " AND NEW.result IS NULL AND NEW.error IS NULL AND NEW.members IS NULL"
     " AND NEW.expirations IS OLD.expirations+(OLD.status IS 'claimed')))),0)"
     " BEGIN SELECT RAISE(ABORT,'" MSG_UPDATE "'); END"},
    {"rows", "delete",
     "CREATE TRIGGER \"$_rows_delete\" BEFORE DELETE ON \"$_rows\""
     " WHEN " OLD_OPEN " BEGIN SELECT RAISE(ABORT,'" MSG_DELETE "'); END"},
    FORGET_AND_META{
        "guards", "insert",
        "CREATE TRIGGER \"$_guards_insert\" BEFORE INSERT ON \"$_guards\" WHEN NOT coalesce(("
        "SELECT count(*) FROM sqlite_schema WHERE type='trigger' AND "
        "(name=NEW.tbl||'" GUARD_TRIGGER_INFIX "@_insert'"
        " OR name=NEW.tbl||'" GUARD_TRIGGER_INFIX "@_member' OR name=NEW.tbl||'" GUARD_TRIGGER_INFIX
        "@_update'))=3,0)"
        " OR EXISTS(SELECT 1 FROM \"$_guards\" WHERE id=NEW.id OR tbl=NEW.tbl)"
        " BEGIN SELECT RAISE(ABORT,'" MSG_GUARDS "'); END"},
    {"guards", "update",
     "CREATE TRIGGER \"$_guards_update\" BEFORE UPDATE ON \"$_guards\""
     " BEGIN SELECT RAISE(ABORT,'" MSG_GUARDS "'); END"},
    {"guards", "delete",
     "CREATE TRIGGER \"$_guards_delete\" BEFORE DELETE ON \"$_guards\" WHEN coalesce("
     "EXISTS(SELECT 1 FROM sqlite_schema WHERE type='trigger' AND "
     "(name=OLD.tbl||'" GUARD_TRIGGER_INFIX "@_insert'"
     " OR name=OLD.tbl||'" GUARD_TRIGGER_INFIX "@_member' OR name=OLD.tbl||'" GUARD_TRIGGER_INFIX
     "@_update'))"
     " OR EXISTS(SELECT 1 FROM \"$_members\" AS m JOIN \"$_rows\" AS r ON r.id=m.claim"
     " WHERE m.guard=OLD.id AND (" R_OPEN ")),1)"
     " BEGIN SELECT RAISE(ABORT,'" MSG_GUARDS "'); END"},
    {"members", "insert",
     "CREATE TRIGGER \"$_members_insert\" BEFORE INSERT ON \"$_members\" WHEN NOT coalesce("
     "EXISTS(SELECT 1 FROM \"$_rows\" WHERE id=NEW.claim AND attempt=NEW.attempt"
     " AND status IS 'claimed' AND effect IS 'local')"
     " AND EXISTS(SELECT 1 FROM \"$_guards\" WHERE id=NEW.guard) AND typeof(NEW.rid)='integer',0)"
     " BEGIN SELECT RAISE(ABORT,'" MSG_MEMBERS "'); END"},
    {"members", "update",
     "CREATE TRIGGER \"$_members_update\" BEFORE UPDATE ON \"$_members\""
     " BEGIN SELECT RAISE(ABORT,'" MSG_MEMBERS "'); END"},
    {"members", "delete",
     "CREATE TRIGGER \"$_members_delete\" BEFORE DELETE ON \"$_members\" WHEN coalesce("
     "EXISTS(SELECT 1 FROM \"$_rows\" WHERE id=OLD.claim AND (" ROW_OPEN ")),1)"
     " BEGIN SELECT RAISE(ABORT,'" MSG_MEMBERS "'); END"},
};

/*
** The own triggers of format 4 ("One writer", docs/design.md): every
** insert, update and delete of a shadow table that is not one of the
** extension's own statements is refused. OWN_WRITE is true only while the
** storage layer steps its own statement on this connection (own_begin);
** without the extension the trigger fails ("no such function"), so plain
** SQL writes nothing in either case. The state machine is not repeated
** here: it is ledger_state.c's. The options in <name>_meta are refused to
** every writer (fixed at creation; idem_upgrade drops and recreates the
** triggers). The forget triggers are the cascades: a deleted local row's
** members go with it (purge, retention), inside the extension's delete,
** and so do a deleted row's targets (format 5).
**
** Format 5 adds the targets table and its four triggers, last in the list:
** the first N_OWN_V4 are format 4's, unchanged.
*/
#define OWN_WRITE "idem_own_write()"

#define MSG_ONE_WRITER(what, api)                                             \
  "idempotency: " what " of ledger @ are written only by the extension (" api \
  "); plain "                                                                 \
  "SQL may read them"

#define MSG_ROWS                                                       \
  MSG_ONE_WRITER("the rows",                                           \
                 "idem_claim, idem_settle, idem_resolve, idem_purge, " \
                 "or INSERT INTO and DELETE FROM the ledger table")

#define MSG_GUARDS4 MSG_ONE_WRITER("the guards", "idem_guard and idem_unguard")

#define MSG_MEMBERS4 MSG_ONE_WRITER("the members", "the triggers idem_guard installs")

#define MSG_TARGETS MSG_ONE_WRITER("the targets", "idem_claim")

#define REFUSE(tbl, kind, when, msg)                                         \
  {                                                                          \
    tbl, kind,                                                               \
        "CREATE TRIGGER \"$_" tbl "_" kind "\" BEFORE " when " ON \"$_" tbl  \
        "\" WHEN NOT " OWN_WRITE " BEGIN SELECT RAISE(ABORT,'" msg "'); END" \
  }

static const OwnTrigger aOwn[] = {
    REFUSE("rows", "insert", "INSERT", MSG_ROWS),
    REFUSE("rows", "update", "UPDATE", MSG_ROWS),
    REFUSE("rows", "delete", "DELETE", MSG_ROWS),
    FORGET_AND_META REFUSE("guards", "insert", "INSERT", MSG_GUARDS4),
    REFUSE("guards", "update", "UPDATE", MSG_GUARDS4),
    REFUSE("guards", "delete", "DELETE", MSG_GUARDS4),
    REFUSE("members", "insert", "INSERT", MSG_MEMBERS4),
    REFUSE("members", "update", "UPDATE", MSG_MEMBERS4),
    REFUSE("members", "delete", "DELETE", MSG_MEMBERS4),
    /* format 5 */
    {"rows", "targets",
     "CREATE TRIGGER \"$_rows_targets\" AFTER DELETE ON \"$_rows\""
     " BEGIN DELETE FROM \"$_targets\" WHERE claim=OLD.id; END"},
    REFUSE("targets", "insert", "INSERT", MSG_TARGETS),
    REFUSE("targets", "update", "UPDATE", MSG_TARGETS),
    REFUSE("targets", "delete", "DELETE", MSG_TARGETS),
};

#define N_OWN ((int)(sizeof(aOwn) / sizeof(aOwn[0])))

#define N_OWN_V4 (N_OWN - 4)

/* The triggers of format 2 and format 1, for idem_upgrade: what such a
** file holds ($ and # as above). */
static const OwnTrigger aOwnV2[] = {
    {"rows", "insert",
     "CREATE TRIGGER \"$_rows_insert\" BEFORE INSERT ON \"$_rows\" WHEN NOT coalesce("
     "NEW.status IS 'claimed' AND NEW.attempt IS 1 AND NEW.result IS NULL AND NEW.error IS NULL"
     " AND NEW.members IS NULL AND NEW.expirations IS 0,0)"
     " OR (NEW.id>0 AND EXISTS(SELECT 1 FROM \"$_rows\" WHERE id=NEW.id))"
     " OR EXISTS(SELECT 1 FROM \"$_rows\" WHERE #)"
     " BEGIN SELECT RAISE(ABORT,'idempotency: only a fresh claim may be inserted into a ledger: "
     "status claimed, attempt 1, no result, error or members, and no row with that id or that "
     "key'); END"},
    {"rows", "update",
     "CREATE TRIGGER \"$_rows_update\" BEFORE UPDATE ON \"$_rows\" WHEN NOT coalesce(("
     "NEW.id IS OLD.id AND NEW.tenant IS OLD.tenant AND NEW.\"key\" IS OLD.\"key\""
     " AND NEW.conversation IS OLD.conversation AND NEW.tool IS OLD.tool"
     " AND NEW.args IS OLD.args AND NEW.effect IS OLD.effect"
     " AND NEW.created_at IS OLD.created_at AND ("
     "((OLD.status IS 'claimed' AND (NEW.status IS 'succeeded' OR NEW.status IS 'failed'"
     " OR NEW.status IS 'released' OR NEW.status IS 'unknown')"
     " OR OLD.status IS 'unknown' AND (NEW.status IS 'succeeded' OR NEW.status IS 'failed'"
     " OR NEW.status IS 'released'))"
     " AND NEW.token IS OLD.token AND NEW.attempt IS OLD.attempt"
     " AND NEW.lease_until IS OLD.lease_until AND NEW.marks IS OLD.marks"
     " AND NEW.expirations IS OLD.expirations"
     " AND (NEW.status IS NOT 'unknown' OR OLD.effect IS 'external')"
     " AND (NEW.status IS NOT 'released' OR OLD.effect IS 'local'"
     " OR NEW.error IS '{\"sent\":false}'"
     " OR NEW.error IS NOT NULL AND NEW.error GLOB '{\"sent\":false,*}'))"
     " OR (OLD.status IS 'claimed' AND NEW.status IS 'claimed' AND NEW.token IS OLD.token"
     " AND NEW.attempt IS OLD.attempt AND NEW.marks IS OLD.marks"
     " AND NEW.expirations IS OLD.expirations AND NEW.result IS OLD.result"
     " AND NEW.error IS OLD.error AND NEW.members IS OLD.members"
     " AND OLD.lease_until>" SQL_NOW " AND NEW.lease_until>=OLD.lease_until)"
     " OR ((OLD.status IS 'released' OR OLD.status IS 'claimed' AND OLD.effect IS 'local'"
     " AND OLD.lease_until<=" SQL_NOW ")"
     " AND NEW.status IS 'claimed' AND NEW.attempt IS OLD.attempt+1 AND NEW.token IS NOT OLD.token"
     " AND NEW.result IS NULL AND NEW.error IS NULL AND NEW.members IS NULL"
     " AND NEW.expirations IS OLD.expirations+(OLD.status IS 'claimed')))),0)"
     " BEGIN SELECT RAISE(ABORT,'idempotency: illegal change of a ledger row: the request never "
     "changes, a live claim is not taken over, unknown never becomes claimed, succeeded and "
     "failed are final, and an external claim is released only with detail {\"sent\": false}'); "
     "END"},
    {"rows", "delete",
     "CREATE TRIGGER \"$_rows_delete\" BEFORE DELETE ON \"$_rows\""
     " WHEN OLD.status IS 'claimed' OR OLD.status IS 'unknown'"
     " BEGIN SELECT RAISE(ABORT,'" MSG_DELETE "'); END"},
};

static const OwnTrigger aOwnV1[] = {
    {"rows", "update",
     "CREATE TRIGGER \"$_rows_update\" BEFORE UPDATE ON \"$_rows\" WHEN NOT ("
     "NEW.id IS OLD.id AND NEW.tenant IS OLD.tenant AND NEW.\"key\" IS OLD.\"key\""
     " AND NEW.conversation IS OLD.conversation AND NEW.tool IS OLD.tool"
     " AND NEW.args IS OLD.args AND NEW.effect IS OLD.effect"
     " AND NEW.created_at IS OLD.created_at AND ("
     "(OLD.status='claimed' AND NEW.status<>'claimed'"
     " AND NEW.token IS OLD.token AND NEW.attempt IS OLD.attempt)"
     " OR ((OLD.status='claimed' OR OLD.status='released') AND NEW.status='claimed'"
     " AND NEW.attempt IS OLD.attempt+1 AND NEW.token IS NOT OLD.token)"
     " OR (OLD.status='unknown' AND NEW.status<>'unknown' AND NEW.status<>'claimed'"
     " AND NEW.token IS OLD.token AND NEW.attempt IS OLD.attempt)))"
     " BEGIN SELECT RAISE(ABORT,'idempotency: illegal change of a ledger row'); END"},
    {"rows", "delete",
     "CREATE TRIGGER \"$_rows_delete\" BEFORE DELETE ON \"$_rows\""
     " WHEN OLD.status='claimed' OR OLD.status='unknown'"
     " BEGIN SELECT RAISE(ABORT,'idempotency: a claimed or unknown ledger row cannot be "
     "deleted'); END"},
};

#define N_OWN_V3 ((int)(sizeof(aOwnV3) / sizeof(aOwnV3[0])))

/* the longest list (the scan's arrays), at most 32 (TriggerScan.mOwn) */
#define N_OWN_MAX (N_OWN > N_OWN_V3 ? N_OWN : N_OWN_V3)

typedef char assert_own_lists[N_OWN_MAX <= 32 ? 1 : -1];

int ledger_format_tables(int iFormat) { return iFormat >= 5 ? LEDGER_N_TABLE : LEDGER_N_TABLE - 1; }

/* The own triggers of format iFormat, and their count. */
static const OwnTrigger *own_triggers(int iFormat, int *pn) {
  if (iFormat == 1) {
    *pn = (int)(sizeof(aOwnV1) / sizeof(aOwnV1[0]));
    return aOwnV1;
  }
  if (iFormat == 2) {
    *pn = (int)(sizeof(aOwnV2) / sizeof(aOwnV2[0]));
    return aOwnV2;
  }
  if (iFormat == 3) {
    *pn = N_OWN_V3;
    return aOwnV3;
  }
  *pn = iFormat == 4 ? N_OWN_V4 : N_OWN;
  return aOwn;
}

/* The stored SQL of own trigger t of ledger zName: $ @ # filled in. */
static char *trigger_sql(const OwnTrigger *t, const char *zName, int bSingle) {
  sqlite3_str *s = sqlite3_str_new(0);
  const char *z;
  for (z = t->zSql; *z; z++) {
    if (*z == '$') sqlite3_str_appendf(s, "%w", zName);
    else if (*z == '@') sqlite3_str_appendf(s, "%q", zName);
    else if (*z == '#')
      sqlite3_str_appendall(
          s, bSingle ? "\"key\"=NEW.\"key\"" : "tenant=NEW.tenant AND \"key\"=NEW.\"key\"");
    else sqlite3_str_appendchar(s, 1, *z);
  }
  return sqlite3_str_finish(s);
}

/* The name of own trigger t of ledger zName (sqlite3_malloc). */
static char *trigger_name(const OwnTrigger *t, const char *zName) {
  return sqlite3_mprintf("%s_%s_%s", zName, t->zTable, t->zSuffix);
}

/* Create own trigger i (format 4) of ledger zName in schema zDb: its stored
** text with the schema put after "CREATE TRIGGER ". */
static int create_trigger(sqlite3 *db, const char *zDb, const char *zName, int bSingle, int i,
                          char **pzErr) {
  char *zTrig = trigger_sql(&aOwn[i], zName, bSingle);
  int rc;
  if (zTrig == 0) return SQLITE_NOMEM;
  rc = ledger_exec_sql(db, sqlite3_mprintf("CREATE TRIGGER \"%w\".%s", zDb, zTrig + 15), pzErr);
  sqlite3_free(zTrig);
  return rc;
}

/* Create every own trigger of format iFormat (4 or 5) whose bit is clear
** in mSkip. */
int schema_create_triggers(sqlite3 *db, const char *zDb, const char *zName, int bSingle,
                           int iFormat, unsigned mSkip, char **pzErr) {
  int rc = SQLITE_OK, i, n = iFormat == 4 ? N_OWN_V4 : N_OWN;
  for (i = 0; rc == SQLITE_OK && i < n; i++) {
    if ((mSkip & (1u << i)) == 0) rc = create_trigger(db, zDb, zName, bSingle, i, pzErr);
  }
  return rc;
}

/* Drop the own triggers of format iFormat of ledger zName in zDb. */
int schema_drop_triggers(sqlite3 *db, const char *zDb, const char *zName, int iFormat) {
  int n, i, rc = SQLITE_OK;
  const OwnTrigger *a = own_triggers(iFormat, &n);
  for (i = 0; rc == SQLITE_OK && i < n; i++) {
    char *zTrig = trigger_name(&a[i], zName);
    rc = zTrig ? ledger_exec_sql(
                     db, sqlite3_mprintf("DROP TRIGGER IF EXISTS \"%w\".\"%w\"", zDb, zTrig), 0)
               : SQLITE_NOMEM;
    sqlite3_free(zTrig);
  }
  return rc;
}

/*
** CREATE TABLE of each table of a format-4 ledger (LEDGER_TABLE_* order),
** with %s for the schema's prefix and %w for the table's name. The rows
** table is the extension's alone, so its CHECKs keep only what makes the
** file self-describing to a reader (NOT NULL, the effect and status
** domains); the key grammar, the types and the id's sign are the
** extension's, once, in C (format 3 repeated them here). idem_health
** compares each table's text with these.
*/
static const char *const azTableSql[LEDGER_N_TABLE] = {
    "CREATE TABLE %s\"%w\"("
    "id INTEGER PRIMARY KEY,"
    "tenant NOT NULL,"
    "\"key\" NOT NULL,"
    "conversation NOT NULL,"
    "tool NOT NULL,"
    "args NOT NULL,"
    "effect NOT NULL CHECK(effect='local' OR effect='external'),"
    "status NOT NULL CHECK(status='claimed' OR status='succeeded' OR status='failed'"
    " OR status='released' OR status='unknown'),"
    "result,"
    "error,"
    "attempt INTEGER NOT NULL,"
    "token INTEGER NOT NULL,"
    "created_at INTEGER NOT NULL,"
    "updated_at INTEGER NOT NULL,"
    "lease_until INTEGER NOT NULL,"
    "members,"
    "expirations INTEGER NOT NULL DEFAULT 0,"
    "UNIQUE(tenant,\"key\"))",
    "CREATE TABLE %s\"%w\"(k TEXT PRIMARY KEY NOT NULL, v NOT NULL) WITHOUT ROWID",
    "CREATE TABLE %s\"%w\"(id INTEGER PRIMARY KEY, tbl TEXT NOT NULL UNIQUE,"
    " key_column TEXT NOT NULL, tenant_column TEXT, token_column TEXT)",
    "CREATE TABLE %s\"%w\"(claim INTEGER NOT NULL, attempt INTEGER NOT NULL,"
    " guard INTEGER NOT NULL, rid INTEGER NOT NULL, PRIMARY KEY(claim,attempt,guard,rid))"
    " WITHOUT ROWID",
    /* format 5: what each claim touches (docs/ledger.md, "Targets") */
    "CREATE TABLE %s\"%w\"(claim INTEGER NOT NULL, target TEXT NOT NULL, tenant NOT NULL,"
    " allowed_by TEXT, allowed_at INTEGER, overrode TEXT, PRIMARY KEY(claim,target)) WITHOUT ROWID",
};

/* CREATE TABLE of table iTable of a ledger, named zTable, in schema zDb
** (NULL: unqualified, as the schema keeps it). sqlite3_malloc; NULL on OOM. */
char *schema_table_sql(int iTable, const char *zDb, const char *zTable) {
  char *zPre, *z;
  if (zDb == 0) return sqlite3_mprintf(azTableSql[iTable], "", zTable);
  zPre = sqlite3_mprintf("\"%w\".", zDb);
  z = zPre ? sqlite3_mprintf(azTableSql[iTable], zPre, zTable) : 0;
  sqlite3_free(zPre);
  return z;
}

/*
** The indexes of a rows table: the single_tenant key index (a key
** is unique across the ledger) and the partial index of open rows, which
** answers WHERE status='claimed' / 'unknown' on a ledger of any size (its
** WHERE text is repeated by the statement that uses it, ST_CUR_OPEN).
** They are named after the ledger's identity, not its name: an index
** keeps its name when its table is renamed, and cannot be dropped while
** ALTER TABLE runs (xRename), so a name-based one would collide with a
** later ledger of the old name.
*/
int schema_create_indexes(sqlite3 *db, const char *zDb, const char *zName, const char *zId,
                          int bSingle, char **pzErr) {
  int rc = SQLITE_OK;
  if (bSingle) {
    rc = ledger_exec_sql(
        db,
        sqlite3_mprintf("CREATE UNIQUE INDEX \"%w\".\"idem_%w_key\" ON \"%w_rows\"(\"key\")", zDb,
                        zId, zName),
        pzErr);
  }
  if (rc == SQLITE_OK) {
    rc = ledger_exec_sql(
        db,
        sqlite3_mprintf("CREATE INDEX \"%w\".\"idem_%w_open\" ON \"%w_rows\"(status,"
                        "lease_until) WHERE " OPEN_WHERE,
                        zDb, zId, zName),
        pzErr);
  }
  return rc;
}

/* The members table: one row per guarded row written under a local claim. */
int schema_create_members(sqlite3 *db, const char *zDb, const char *zName, char **pzErr) {
  char *zTable = sqlite3_mprintf("%s_members", zName);
  int rc = zTable ? ledger_exec_sql(db, schema_table_sql(LEDGER_TABLE_MEMBERS, zDb, zTable), pzErr)
                  : SQLITE_NOMEM;
  sqlite3_free(zTable);
  return rc;
}

/* The targets table (format 5) and its index by (tenant, target), named
** after the ledger's identity as the rows table's indexes are. */
int schema_create_targets(sqlite3 *db, const char *zDb, const char *zName, const char *zId,
                          char **pzErr) {
  char *zTable = sqlite3_mprintf("%s_targets", zName);
  int rc = zTable ? ledger_exec_sql(db, schema_table_sql(LEDGER_TABLE_TARGETS, zDb, zTable), pzErr)
                  : SQLITE_NOMEM;
  sqlite3_free(zTable);
  if (rc == SQLITE_OK) {
    rc =
        ledger_exec_sql(db,
                        sqlite3_mprintf("CREATE INDEX \"%w\".\"idem_%w_targets\" ON \"%w_targets\"("
                                        "tenant,target)",
                                        zDb, zId, zName),
                        pzErr);
  }
  return rc;
}

/* Create the shadow tables, meta rows, indexes and triggers of ledger zName. */
int ledger_create_schema(sqlite3 *db, const char *zDb, const char *zName, const sqlite3_int64 *aVal,
                         const char *zId, char **pzErr) {
  sqlite3_str *s;
  int rc = SQLITE_OK, i, j;
  for (i = LEDGER_TABLE_ROWS; rc == SQLITE_OK && i <= LEDGER_TABLE_GUARDS; i++) {
    char *zTable = sqlite3_mprintf("%s_%s", zName, ledger_shadow_suffix[i]);
    rc = zTable ? ledger_exec_sql(db, schema_table_sql(i, zDb, zTable), pzErr) : SQLITE_NOMEM;
    sqlite3_free(zTable);
  }
  if (rc) return rc;
  s = sqlite3_str_new(db);
  sqlite3_str_appendf(s, "INSERT INTO \"%w\".\"%w_meta\"(k,v) VALUES('format',%d),('id',%Q)", zDb,
                      zName, LEDGER_FORMAT, zId);
  for (j = 0; j < IDEM_N_OPT; j++) {
    sqlite3_str_appendf(s, ",(%Q,%lld)", ledger_options[j].zName, aVal[j]);
  }
  rc = ledger_exec_sql(db, sqlite3_str_finish(s), pzErr);
  if (rc == SQLITE_OK) rc = schema_create_members(db, zDb, zName, pzErr);
  if (rc == SQLITE_OK) rc = schema_create_targets(db, zDb, zName, zId, pzErr);
  if (rc == SQLITE_OK)
    rc = schema_create_indexes(db, zDb, zName, zId, (int)aVal[IDEM_OPT_SINGLE], pzErr);
  if (rc == SQLITE_OK) {
    rc =
        schema_create_triggers(db, zDb, zName, (int)aVal[IDEM_OPT_SINGLE], LEDGER_FORMAT, 0, pzErr);
  }
  return rc;
}

int ledger_rename_schema(IdemLedger *p, const char *zNew) {
  int rc, n = 0;
  int bSingle = (int)p->aOpt[IDEM_OPT_SINGLE];
  /* the own triggers name the ledger (in their names and in literals):
  ** dropped first, made again under the new name */
  /* (an earlier format's file is renamed as before format 5: format 4's
  ** triggers dropped and made) */
  int iFormat = p->iFormat >= 5 ? 5 : 4;
  rc = schema_drop_triggers(p->db, p->zDb, p->zName, iFormat);
  if (rc == SQLITE_OK && iFormat >= 5) {
    rc = ledger_exec_sql(
        p->db,
        sqlite3_mprintf("ALTER TABLE \"%w\".\"%w_targets\" RENAME TO \"%w_targets\"", p->zDb,
                        p->zName, zNew),
        0);
  }
  if (rc == SQLITE_OK) {
    rc = ledger_exec_sql(
        p->db,
        sqlite3_mprintf("ALTER TABLE \"%w\".\"%w_rows\" RENAME TO \"%w_rows\";"
                        "ALTER TABLE \"%w\".\"%w_meta\" RENAME TO \"%w_meta\";"
                        "ALTER TABLE \"%w\".\"%w_guards\" RENAME TO \"%w_guards\";"
                        "ALTER TABLE \"%w\".\"%w_members\" RENAME TO \"%w_members\";",
                        p->zDb, p->zName, zNew, p->zDb, p->zName, zNew, p->zDb, p->zName, zNew,
                        p->zDb, p->zName, zNew),
        0);
  }
  if (rc == SQLITE_OK) rc = schema_create_triggers(p->db, p->zDb, zNew, bSingle, iFormat, 0, 0);
  /* the guards' triggers name the ledger too */
  if (rc == SQLITE_OK) rc = ledger_guards_rebuild(p->db, p->zDb, p->zName, zNew, p->zId, &n);
  return rc;
}

int ledger_drop_schema(IdemLedger *p) {
  return ledger_exec_sql(p->db,
                         sqlite3_mprintf("DROP TABLE IF EXISTS \"%w\".\"%w_rows\";"
                                         "DROP TABLE IF EXISTS \"%w\".\"%w_meta\";"
                                         "DROP TABLE IF EXISTS \"%w\".\"%w_guards\";"
                                         "DROP TABLE IF EXISTS \"%w\".\"%w_members\";"
                                         "DROP TABLE IF EXISTS \"%w\".\"%w_targets\";",
                                         p->zDb, p->zName, p->zDb, p->zName, p->zDb, p->zName,
                                         p->zDb, p->zName, p->zDb, p->zName),
                         0);
}

/* Record problem zWhy (sqlite3_mprintf'd) unless one is recorded. */
static int scan_note(TriggerScan *t, char *zWhy, int bRepair) {
  if (zWhy == 0) return SQLITE_NOMEM;
  if (t->zWhy) {
    sqlite3_free(zWhy);
    return SQLITE_OK;
  }
  t->zWhy = zWhy;
  t->bRepair = bRepair;
  return SQLITE_OK;
}

/*
** The guards' triggers: each guard row of a table that still exists has
** its three triggers, as idem_guard writes them; each trigger named as a
** guard trigger of this ledger has its guard row.
*/
static int scan_guards(IdemLedger *p, TriggerScan *t) {
  sqlite3_stmt *pG = 0, *pT = 0;
  int rc;
  char *zSql = sqlite3_mprintf(
      "SELECT id, tbl, key_column, tenant_column, token_column FROM \"%w\".\"%w_guards\"", p->zDb,
      p->zName);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pG, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  if (rc) return rc;
  zSql = sqlite3_mprintf(
      "SELECT name, tbl_name, sql FROM \"%w\".sqlite_schema WHERE type='trigger' AND name=?1",
      p->zDb);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pT, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  while (rc == SQLITE_OK && sqlite3_step(pG) == SQLITE_ROW) {
    sqlite3_int64 gid = sqlite3_column_int64(pG, 0);
    const char *zBase = (const char *)sqlite3_column_text(pG, 1);
    char *azSql[IDEM_GUARD_N_TRIGGER] = {0}, *zTable = 0;
    int k, aHave[IDEM_GUARD_N_TRIGGER] = {0}, nHave = 0;
    if (zBase == 0) {
      rc = SQLITE_CORRUPT_VTAB;
      break;
    }
    for (k = 0; rc == SQLITE_OK && k < IDEM_GUARD_N_TRIGGER; k++) {
      char *zName = sqlite3_mprintf(GUARD_TRIGGER_FMT, zBase, p->zName, ledger_guard_kind[k]);
      if (zName == 0) {
        rc = SQLITE_NOMEM;
        break;
      }
      sqlite3_bind_text(pT, 1, zName, -1, sqlite3_free);
      if (sqlite3_step(pT) == SQLITE_ROW) {
        const char *zS = (const char *)sqlite3_column_text(pT, 2);
        aHave[k] = 1;
        nHave++;
        azSql[k] = sqlite3_mprintf("%s", zS ? zS : "");
        if (zTable == 0) zTable = sqlite3_mprintf("%s", sqlite3_column_text(pT, 1));
        if (azSql[k] == 0 || zTable == 0) rc = SQLITE_NOMEM;
      }
      if (rc == SQLITE_OK) rc = sqlite3_reset(pT);
    }
    if (rc == SQLITE_OK && nHave == 0) {
      /* no trigger: the table was dropped (its triggers with it), unless a
      ** table of the guard's name is still there */
      if (sqlite3_table_column_metadata(p->db, p->zDb, zBase, 0, 0, 0, 0, 0, 0) == SQLITE_OK) {
        rc = scan_note(t, sqlite3_mprintf("has lost the guard triggers of table \"%s\"", zBase), 1);
      }
    }
    for (k = 0; rc == SQLITE_OK && nHave > 0 && k < IDEM_GUARD_N_TRIGGER; k++) {
      char *zExpect;
      if (!aHave[k]) {
        rc = scan_note(
            t,
            sqlite3_mprintf("is missing its guard trigger \"" GUARD_TRIGGER_FMT "\" on table "
                            "\"%s\"",
                            zBase, p->zName, ledger_guard_kind[k], zTable),
            1);
        continue;
      }
      zExpect = ledger_guard_trigger_sql(
          k, 0, p->zName, p->zId, gid, zBase, zTable, (const char *)sqlite3_column_text(pG, 2),
          (const char *)sqlite3_column_text(pG, 3), (const char *)sqlite3_column_text(pG, 4));
      if (zExpect == 0) {
        rc = SQLITE_NOMEM;
      } else if (strcmp(zExpect, azSql[k]) != 0) {
        rc = scan_note(t,
                       sqlite3_mprintf("has its guard trigger \"" GUARD_TRIGGER_FMT "\" altered",
                                       zBase, p->zName, ledger_guard_kind[k]),
                       1);
      }
      sqlite3_free(zExpect);
    }
    for (k = 0; k < IDEM_GUARD_N_TRIGGER; k++) sqlite3_free(azSql[k]);
    sqlite3_free(zTable);
  }
  if (rc == SQLITE_OK) rc = sqlite3_reset(pG);
  sqlite3_finalize(pG);
  sqlite3_finalize(pT);
  pG = pT = 0;
  if (rc) return rc;
  /* a trigger named as one of this ledger's guard triggers needs its row
  ** (every trigger read, the names matched in C: no SQL function an
  ** application may register over is called, GLOB included) */
  zSql = sqlite3_mprintf("SELECT t.name FROM \"%w\".sqlite_schema AS t WHERE t.type='trigger'",
                         p->zDb);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pT, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  if (rc) return rc;
  zSql = sqlite3_mprintf("SELECT 1 FROM \"%w\".\"%w_guards\" WHERE tbl=?1", p->zDb, p->zName);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pG, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  while (rc == SQLITE_OK && t->zWhy == 0 && sqlite3_step(pT) == SQLITE_ROW) {
    const char *zTrig = (const char *)sqlite3_column_text(pT, 0);
    size_t nBase = 0;
    if (zTrig == 0 || ledger_guard_trigger_kind(p, zTrig, &nBase) < 0) continue;
    sqlite3_bind_text(pG, 1, zTrig, (int)nBase, SQLITE_TRANSIENT);
    if (sqlite3_step(pG) != SQLITE_ROW) {
      rc = scan_note(t,
                     sqlite3_mprintf("has a guard trigger \"%s\" that no guard of %s_guards "
                                     "lists",
                                     zTrig, p->zName),
                     0);
    }
    if (rc == SQLITE_OK) rc = sqlite3_reset(pG);
  }
  if (rc == SQLITE_OK) rc = sqlite3_reset(pT);
  sqlite3_finalize(pG);
  sqlite3_finalize(pT);
  return rc;
}

/*
** Scan the triggers on p's shadow tables (and, for format 4, its guards')
** against the own triggers of format iFormat. With bDrop, an own trigger
** found altered is dropped (idem_upgrade then creates it again).
*/
int schema_triggers_scan(IdemLedger *p, int iFormat, int bDrop, TriggerScan *t) {
  int nOwn, i, rc;
  const OwnTrigger *aT = own_triggers(iFormat, &nOwn);
  char *azExpect[N_OWN_MAX], *azName[N_OWN_MAX];
  char *zSql;
  sqlite3_stmt *pQ = 0;
  memset(t, 0, sizeof(*t));
  memset(azExpect, 0, sizeof(azExpect));
  memset(azName, 0, sizeof(azName));
  for (i = 0; i < nOwn; i++) {
    azExpect[i] = trigger_sql(&aT[i], p->zName, (int)p->aOpt[IDEM_OPT_SINGLE]);
    azName[i] = trigger_name(&aT[i], p->zName);
    if (azExpect[i] == 0 || azName[i] == 0) {
      rc = SQLITE_NOMEM;
      goto done;
    }
  }
  zSql = sqlite3_mprintf(
      "SELECT name, sql, 0 FROM \"%w\".sqlite_schema WHERE type='trigger' AND tbl_name"
      " COLLATE NOCASE IN ('%q_rows','%q_meta','%q_guards','%q_members','%q_targets')"
      " UNION ALL SELECT name, sql, 1 FROM temp.sqlite_schema WHERE type='trigger'"
      " AND %d AND tbl_name COLLATE NOCASE IN"
      " ('%q_rows','%q_meta','%q_guards','%q_members','%q_targets')",
      p->zDb, p->zName, p->zName, p->zName, p->zName, p->zName,
      sqlite3_stricmp(p->zDb, "temp") != 0, p->zName, p->zName, p->zName, p->zName, p->zName);
  rc = zSql ? sqlite3_prepare_v2(p->db, zSql, -1, &pQ, 0) : SQLITE_NOMEM;
  sqlite3_free(zSql);
  while (rc == SQLITE_OK && t->zWhy == 0 && sqlite3_step(pQ) == SQLITE_ROW) {
    const char *zTrig = (const char *)sqlite3_column_text(pQ, 0);
    const char *zTSql = (const char *)sqlite3_column_text(pQ, 1);
    int bTemp = sqlite3_column_int(pQ, 2), iOwn = -1;
    /* an own trigger lives in the ledger's schema; one in temp is foreign */
    for (i = 0; zTrig && !bTemp && i < nOwn; i++) {
      if (strcmp(zTrig, azName[i]) == 0) iOwn = i;
    }
    if (iOwn >= 0 && zTSql && strcmp(zTSql, azExpect[iOwn]) == 0) {
      t->mOwn |= 1u << iOwn;
    } else if (iOwn >= 0 && bDrop) {
      rc = ledger_exec_sql(p->db,
                           sqlite3_mprintf("DROP TRIGGER \"%w\".\"%w\"", p->zDb, azName[iOwn]), 0);
      if (rc == SQLITE_OK) {
        /* the scan statement reads sqlite_schema: start it again */
        sqlite3_reset(pQ);
        t->mOwn = 0;
      }
    } else if (iOwn >= 0) {
      rc = scan_note(t, sqlite3_mprintf("has its trigger \"%s\" altered", zTrig), 1);
    } else if (bTemp && zTSql) {
      /* a same-named TEMP ledger's own trigger (on temp's table, or a copy
      ** of ours on this one): the same text does the same checks */
      for (i = 0; i < nOwn && strcmp(zTSql, azExpect[i]) != 0; i++) {
      }
      if (i == nOwn) {
        rc = scan_note(
            t, sqlite3_mprintf("has a foreign trigger \"%s\" on its shadow tables", zTrig), 0);
      }
    } else {
      rc = scan_note(
          t,
          sqlite3_mprintf("has a foreign trigger \"%s\" on its shadow tables", zTrig ? zTrig : "?"),
          0);
    }
  }
  if (rc == SQLITE_OK) rc = sqlite3_reset(pQ);
  for (i = 0; rc == SQLITE_OK && !bDrop && t->zWhy == 0 && i < nOwn; i++) {
    if ((t->mOwn & (1u << i)) == 0) {
      rc = scan_note(t, sqlite3_mprintf("is missing its trigger \"%s\"", azName[i]), 1);
    }
  }
  if (rc == SQLITE_OK && LEDGER_FORMAT_WORKS(iFormat) && t->zWhy == 0) {
    rc = scan_guards(p, t);
    t->bGuard = t->zWhy != 0;
  }
done:
  sqlite3_finalize(pQ);
  for (i = 0; i < nOwn; i++) {
    sqlite3_free(azExpect[i]);
    sqlite3_free(azName[i]);
  }
  return rc;
}

int storage_is_own_table(const char *zLedger, const char *zTable) {
  size_t nL = strlen(zLedger);
  int i;
  if (sqlite3_strnicmp(zTable, zLedger, (int)nL) != 0 || zTable[nL] != '_') return 0;
  for (i = 0; i < LEDGER_N_TABLE; i++) {
    if (sqlite3_stricmp(zTable + nL + 1, ledger_shadow_suffix[i]) == 0) return 1;
  }
  return 0;
}

int storage_table_exists(const IdemLedger *p, int iTable, int *pbExists) {
  char *zTable = sqlite3_mprintf("%s_%s", p->zName, ledger_shadow_suffix[iTable]);
  /* SQLITE_ERROR is "no such table"; any other code (SQLITE_NOMEM while
  ** reading the schema) is not an answer */
  int rc = zTable ? sqlite3_table_column_metadata(p->db, p->zDb, zTable, 0, 0, 0, 0, 0, 0)
                  : SQLITE_NOMEM;
  sqlite3_free(zTable);
  *pbExists = rc == SQLITE_OK;
  return rc == SQLITE_ERROR ? SQLITE_OK : rc;
}

/* The suffixes of a ledger's tables: first the shadow tables SQLite is
** told of (xShadowName) and that every ledger needs, in LEDGER_SHADOW_*
** bit order, then <name>_members. */
const char *const ledger_shadow_suffix[LEDGER_N_TABLE] = {"rows", "meta", "guards", "members",
                                                          "targets"};

int ledger_shadow_missing(sqlite3 *db, const char *zDb, const char *zName, int *pmMissing) {
  sqlite3_stmt *pS = 0;
  int rc, i;
  /* the tables' names compared in C, case-insensitively as SQLite names
  ** tables (no SQL function an application may register over is called) */
  size_t nName = strlen(zName);
  char *zSql = sqlite3_mprintf("SELECT name FROM \"%w\".sqlite_schema WHERE type='table'", zDb);
  *pmMissing = LEDGER_SHADOW_ALL;
  if (zSql == 0) return SQLITE_NOMEM;
  rc = sqlite3_prepare_v2(db, zSql, -1, &pS, 0);
  sqlite3_free(zSql);
  if (rc) return rc;
  while ((rc = sqlite3_step(pS)) == SQLITE_ROW) {
    const char *z = (const char *)sqlite3_column_text(pS, 0);
    size_t n = z ? strlen(z) : 0;
    if (n <= nName + 1 || sqlite3_strnicmp(z, zName, (int)nName) != 0 || z[nName] != '_') continue;
    for (i = 0; i < LEDGER_N_SHADOW; i++) {
      if (sqlite3_stricmp(z + nName + 1, ledger_shadow_suffix[i]) == 0) *pmMissing &= ~(1 << i);
    }
  }
  sqlite3_finalize(pS);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int ledger_shadow_list(sqlite3_str *s, const char *zName, int m) {
  int i, n = 0;
  sqlite3_str_appendall(s, (m & (m - 1)) ? " tables" : " table");
  for (i = 0; i < LEDGER_N_SHADOW; i++) {
    if ((m & (1 << i)) == 0) continue;
    sqlite3_str_appendf(s, "%s %s_%s", n++ ? "," : "", zName, ledger_shadow_suffix[i]);
  }
  return n;
}

char *ledger_shadow_message(const char *zName, int mMissing) {
  sqlite3_str *s = sqlite3_str_new(0);
  sqlite3_str_appendf(s, "ledger %s is missing its shadow", zName);
  ledger_shadow_list(s, zName, mMissing);
  sqlite3_str_appendall(s,
                        "; every operation on it is refused until that is restored from a "
                        "backup and the database reopened, or the ledger is dropped with DROP "
                        "TABLE");
  return sqlite3_str_finish(s);
}

int ledger_usable(IdemLedger *p, const char *zFunc, char **pzErr) {
  int mMissing = 0, rc;
  /* called when the schema changed or p is broken: a shadow table may have
  ** been dropped (or one more of them) */
  rc = ledger_shadow_missing(p->db, p->zDb, p->zName, &mMissing);
  if (rc) return rc;
  if (mMissing == 0 && p->zBroken == 0) return SQLITE_OK;
  if (mMissing) {
    /* the message names what is missing now; once broken, p stays refused
    ** until it is reconnected, as its options may not have been read */
    char *zNew = ledger_shadow_message(p->zName, mMissing);
    if (zNew == 0) return SQLITE_NOMEM;
    sqlite3_free(p->zBroken);
    p->zBroken = zNew;
    p->bAltered = 0;
  }
  *pzErr = sqlite3_mprintf("%s: %s", zFunc, p->zBroken);
  return *pzErr ? SQLITE_ERROR : SQLITE_NOMEM;
}

/*
** Read what a connected ledger keeps in its file: which shadow tables
** exist, and the format, identity and options in <name>_meta (aOpt holds
** the options CREATE's arguments gave until then). A ledger missing a
** shadow table stays connected (so DROP TABLE works) but refuses every
** operation. Returns SQLITE_OK or an error with *pzErr.
*/
int ledger_read_file(IdemLedger *p, char **pzErr) {
  int rc, mMissing = 0;
  rc = ledger_shadow_missing(p->db, p->zDb, p->zName, &mMissing);
  if (rc) return rc;
  if (mMissing & 2) {
    p->zId[0] = 0; /* no identity: no guard can name it */
  } else {
    rc = ledger_read_meta(p->db, p->zDb, p->zName, p->aOpt, p->zId, &p->iFormat, pzErr);
    if (rc) return rc;
  }
  sqlite3_free(p->zBroken);
  p->zBroken = 0;
  p->bAltered = 0;
  if (mMissing) {
    p->zBroken = ledger_shadow_message(p->zName, mMissing);
    if (p->zBroken == 0) return SQLITE_NOMEM;
  }
  p->bUnread = 0;
  return SQLITE_OK;
}

/*
** A ledger connected inside a transaction that held no lock on its schema
** reads its file at its first use (ledger_read_file), not in xConnect: a
** read there would open a read transaction inside the caller's deferred
** BEGIN, and SQLite does not upgrade a read transaction to a write
** through the busy handler, so the statement's own write (an INSERT's, or
** a function's first write) would fail at once under contention instead
** of waiting for busy_timeout. At the first use the lock is there: the
** statement took it (xFilter, xUpdate, xRename, xDestroy run after its
** OP_Transaction), or the function took the write lock first
** (idem_ledger_resolve). Returns SQLITE_OK or an error with *pzErr.
*/
int ledger_ready(IdemLedger *p, char **pzErr) {
  return p->bUnread ? ledger_read_file(p, pzErr) : SQLITE_OK;
}

/* *peState (LEDGER_TRIGGER_*) of trigger zName in p's schema, whose text
** should be zSql (NULL: out of memory, SQLITE_NOMEM). */
static int trigger_state(const IdemLedger *p, const char *zName, const char *zSql, int *peState) {
  sqlite3_stmt *pS = 0;
  int rc;
  char *zQ;
  *peState = LEDGER_TRIGGER_MISSING;
  if (zName == 0 || zSql == 0) return SQLITE_NOMEM;
  zQ = sqlite3_mprintf("SELECT sql FROM \"%w\".sqlite_schema WHERE type='trigger' AND name=%Q",
                       p->zDb, zName);
  rc = zQ ? sqlite3_prepare_v2(p->db, zQ, -1, &pS, 0) : SQLITE_NOMEM;
  sqlite3_free(zQ);
  if (rc) return rc;
  if (sqlite3_step(pS) == SQLITE_ROW) {
    const char *z = (const char *)sqlite3_column_text(pS, 0);
    *peState = z && strcmp(z, zSql) == 0 ? LEDGER_TRIGGER_OK : LEDGER_TRIGGER_ALTERED;
  }
  return sqlite3_finalize(pS);
}

int storage_own_trigger(const IdemLedger *p, int i, char **pzName, int *peState) {
  int n, rc;
  const OwnTrigger *a = own_triggers(p->iFormat, &n);
  char *zSql;
  *pzName = 0;
  if (i >= n) return SQLITE_OK;
  *pzName = trigger_name(&a[i], p->zName);
  zSql = trigger_sql(&a[i], p->zName, (int)p->aOpt[IDEM_OPT_SINGLE]);
  rc = trigger_state(p, *pzName, zSql, peState);
  sqlite3_free(zSql);
  return rc;
}

int storage_own_table(const IdemLedger *p, int iTable, char **pzName, int *peState) {
  sqlite3_stmt *pS = 0;
  char *zSql = 0, *zQ = 0;
  int rc = SQLITE_NOMEM;
  *peState = LEDGER_TRIGGER_MISSING;
  *pzName = sqlite3_mprintf("%s_%s", p->zName, ledger_shadow_suffix[iTable]);
  /* the schema keeps the text as written but for the schema's name, and
  ** a rename of the ledger (xRename) writes the new name as it is here */
  if (*pzName) zSql = schema_table_sql(iTable, 0, *pzName);
  if (zSql) {
    zQ = sqlite3_mprintf("SELECT sql FROM \"%w\".sqlite_schema WHERE type='table' AND name=%Q",
                         p->zDb, *pzName);
  }
  if (zQ) rc = sqlite3_prepare_v2(p->db, zQ, -1, &pS, 0);
  if (rc == SQLITE_OK && sqlite3_step(pS) == SQLITE_ROW) {
    const char *z = (const char *)sqlite3_column_text(pS, 0);
    *peState = z && strcmp(z, zSql) == 0 ? LEDGER_TRIGGER_OK : LEDGER_TRIGGER_ALTERED;
  }
  if (rc == SQLITE_OK) rc = sqlite3_finalize(pS);
  sqlite3_free(zSql);
  sqlite3_free(zQ);
  return rc;
}

int storage_altered_table(const IdemLedger *p, char **pzName) {
  sqlite3_stmt *pS = 0;
  char *azName[LEDGER_N_TABLE] = {0}, *zQ = 0;
  int i, rc = SQLITE_NOMEM, nTable = ledger_format_tables(p->iFormat);
  *pzName = 0;
  for (i = 0; i < LEDGER_N_TABLE; i++) {
    azName[i] = sqlite3_mprintf("%s_%s", p->zName, ledger_shadow_suffix[i]);
  }
  if (azName[0] && azName[1] && azName[2] && azName[3] && azName[4]) {
    /* one read of the schema for them all (storage_own_table reads one);
    ** format 4 has no targets table: its name stands for the members' */
    zQ = sqlite3_mprintf(
        "SELECT name, sql FROM \"%w\".sqlite_schema WHERE type='table'"
        " AND name IN (%Q,%Q,%Q,%Q,%Q)",
        p->zDb, azName[0], azName[1], azName[2], azName[3], azName[nTable - 1]);
  }
  if (zQ) rc = sqlite3_prepare_v2(p->db, zQ, -1, &pS, 0);
  while (rc == SQLITE_OK && *pzName == 0 && sqlite3_step(pS) == SQLITE_ROW) {
    const char *zName = (const char *)sqlite3_column_text(pS, 0);
    const char *z = (const char *)sqlite3_column_text(pS, 1);
    for (i = 0; i < nTable; i++) {
      if (zName && strcmp(zName, azName[i]) == 0) break;
    }
    if (i < nTable) {
      char *zSql = schema_table_sql(i, 0, azName[i]);
      if (zSql == 0) {
        rc = SQLITE_NOMEM;
      } else if (z == 0 || strcmp(z, zSql) != 0) {
        *pzName = azName[i]; /* handed over */
        azName[i] = 0;
      }
      sqlite3_free(zSql);
    }
  }
  if (rc == SQLITE_OK) rc = sqlite3_finalize(pS);
  else sqlite3_finalize(pS);
  for (i = 0; i < LEDGER_N_TABLE; i++) sqlite3_free(azName[i]);
  sqlite3_free(zQ);
  return rc;
}

int storage_guard_triggers(const IdemLedger *p, sqlite3_int64 gid, const char *zBase,
                           const char *zKeyCol, const char *zTenCol, const char *zTokCol,
                           char **azName, int *aState, char **pzTable) {
  int k, rc;
  for (k = 0; k < IDEM_GUARD_N_TRIGGER; k++) {
    azName[k] = 0;
    aState[k] = LEDGER_TRIGGER_MISSING;
  }
  rc = ledger_guard_table(p->db, p->zDb, p->zName, zBase, pzTable);
  for (k = 0; rc == SQLITE_OK && k < IDEM_GUARD_N_TRIGGER; k++) {
    /* the text idem_guard writes for the table as it is named now */
    char *zSql = ledger_guard_trigger_sql(k, 0, p->zName, p->zId, gid, zBase,
                                          *pzTable ? *pzTable : zBase, zKeyCol, zTenCol, zTokCol);
    azName[k] = sqlite3_mprintf(GUARD_TRIGGER_FMT, zBase, p->zName, ledger_guard_kind[k]);
    rc = trigger_state(p, azName[k], zSql, &aState[k]);
    sqlite3_free(zSql);
  }
  return rc;
}

/* A statement of p failed to prepare with rc: when a shadow table of p is
** altered (storage_altered_table), p is refused from now on (p->zBroken
** names the table and the remedy). */
int schema_altered_refusal(IdemLedger *p, int rc, const char *zSql) {
  char *zTable = 0;
  int rcT;
  /* an error naming what the statement reads, on a ledger not refused
  ** already (an earlier format's tables are not this format's) */
  if ((rc & 0xff) != SQLITE_ERROR || p->zBroken || !LEDGER_FORMAT_WORKS(p->iFormat)) return rc;
  rcT = storage_altered_table(p, &zTable);
  if (rcT == SQLITE_OK && zTable) {
    p->zBroken = sqlite3_mprintf(
        "ledger %s has its shadow table %s altered: it is not as the extension made it, and the "
        "ledger's statements no longer prepare on it; see what differs with SELECT "
        "idem_health('%q'), then restore the table from a backup (a dropped column's data is "
        "gone; a renamed column can be renamed back); every operation on it is refused until "
        "then",
        p->zName, zTable, p->zName);
    p->bAltered = 1;
    if (p->zBroken == 0) rcT = SQLITE_NOMEM;
  } else if (rcT == SQLITE_OK) {
    /* not altered: the statement's own error again, for the caller's
    ** message (the check's statement cleared it) */
    sqlite3_stmt *pS = 0;
    (void)sqlite3_prepare_v2(p->db, zSql, -1, &pS, 0);
    sqlite3_finalize(pS);
  }
  sqlite3_free(zTable);
  return rcT ? rcT : rc;
}

/* How many own triggers a ledger of format iFormat (4 or 5) has. */
int schema_own_count(int iFormat) { return iFormat == 4 ? N_OWN_V4 : N_OWN; }

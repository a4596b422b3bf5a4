/*
** idem_internal.h: the one internal header of sqlite-idempotency.
**
** One section per source file in ext/ (the numbers of shortest.c are in
** idem_num.h). The pure helpers (canonical.c,
** grammar.c) do not include SQLite, so C unit tests and fuzzers link them
** alone; their memory comes through an IdemMem table that the SQL layer
** points at sqlite3_malloc64/sqlite3_realloc64/sqlite3_free.
*/
#ifndef IDEM_INTERNAL_H
#define IDEM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ */
/* Shared by the pure helpers                                          */
/* ------------------------------------------------------------------ */

/* Allocator used by the pure helpers. Every function here frees what it
** allocates before it returns, on every path. */
typedef struct IdemMem IdemMem;
struct IdemMem {
  void *(*xMalloc)(size_t);
  void *(*xRealloc)(void *, size_t);
  void (*xFree)(void *);
};
extern const IdemMem idem_libc_mem; /* malloc/realloc/free */

/* A sink receives canonical output in pieces. It returns 0 on success or
** a non-zero IDEM_JCS_* code, which is passed back to the caller. */
typedef int (*IdemSink)(void *ctx, const char *p, size_t n);

/* Result codes of the canonicaliser. */
#define IDEM_JCS_OK 0
#define IDEM_JCS_INVALID 1 /* the input breaks a rule; see IdemJcsError */
#define IDEM_JCS_NOMEM 2   /* an allocation failed; nothing is half-done */

/* Documented limits (docs/ledger.md, "Limits"). */
#define IDEM_JCS_MAX_DEPTH 256                  /* arrays+objects nested */
#define IDEM_JCS_MAX_BYTES (16u << 20)          /* input size cap, bytes  */
#define IDEM_SAFE_INT_DIGITS "9007199254740991" /* 2^53-1 */
#define IDEM_TARGETS_MAX 16                     /* targets a claim may name */
#define IDEM_TARGET_MAX_BYTES 256               /* bytes of UTF-8 in one target */

/* Why the input was refused: a lowercase sentence that names what and
** where (byte offset into the input), without the function prefix. */
typedef struct IdemJcsError IdemJcsError;
struct IdemJcsError {
  size_t offset;
  char msg[200];
};

/* ------------------------------------------------------------------ */
/* Interface to code in canonical.c: RFC 8785, strict I-JSON          */
/* ------------------------------------------------------------------ */

/*
** Parse zIn[0..nIn) as strict I-JSON and stream its RFC 8785 canonical
** form to xSink. Returns IDEM_JCS_OK, IDEM_JCS_INVALID (pErr filled) or
** IDEM_JCS_NOMEM, or whatever non-zero code the sink returned. On any
** failure the sink may have received a prefix of the output, which the
** caller must discard. zIn need not be NUL-terminated.
*/
int idem_jcs_canonicalize(const char *zIn, size_t nIn, const IdemMem *pMem, IdemSink xSink,
                          void *pSinkCtx, IdemJcsError *pErr);

/*
** The stored form of JSON that is not a key (a ledger's result, error,
** members), streamed to xSink like idem_jcs_canonicalize: the same rules
** and printing (members sorted, no whitespace, strings escaped as JCS
** does), except that every RFC 8259 number is valid and is printed
** exactly as written (1.0, -0, 1234567890123456789, 1e400 stay so).
*/
int idem_jcs_stored_form(const char *zIn, size_t nIn, const IdemMem *pMem, IdemSink xSink,
                         void *pSinkCtx, IdemJcsError *pErr);

/*
** Check zIn[0..nIn) as stored JSON (the rules of idem_jcs_stored_form; the
** text itself need not be in stored form). Returns IDEM_JCS_OK,
** IDEM_JCS_INVALID (pErr filled) or IDEM_JCS_NOMEM.
*/
int idem_jcs_check_stored(const char *zIn, size_t nIn, const IdemMem *pMem, IdemJcsError *pErr);
/* The same rules, streaming the canonical form to xSink: stored args are
** canonical exactly when this reproduces them byte for byte. */
int idem_jcs_canonicalize_stored(const char *zIn, size_t nIn, const IdemMem *pMem, IdemSink xSink,
                                 void *pSinkCtx, IdemJcsError *pErr);

/*
** Write the ECMAScript Number::toString form of the finite double v into
** zOut (at least 32 bytes), NUL-terminated; returns its length. -0 gives
** "0". The caller must not pass NaN or an infinity.
*/
int idem_jcs_number(double v, char *zOut);

/*
** In well-formed JSON z[0..n) (the canonical or stored form the ledger
** writes), the end of the value that starts at z[i] (a member's name is a
** value too): the index after it, or the index of the comma or closing
** bracket that ends the enclosing object or array, or n.
*/
size_t idem_jcs_value_end(const char *z, size_t n, size_t i);

/* A growable byte buffer that is also a sink (ctx = IdemBuf*). */
typedef struct IdemBuf IdemBuf;
struct IdemBuf {
  const IdemMem *pMem;
  char *z;
  size_t n, nAlloc;
  char *zStatic; /* caller-owned first storage (z starts there), or NULL */
};
int idem_buf_sink(void *pBuf, const char *p, size_t n);
void idem_buf_free(IdemBuf *p);

/* ------------------------------------------------------------------ */
/* Interface to code in grammar.c: the key grammar and derivation     */
/* ------------------------------------------------------------------ */

#define IDEM_KEY_MAX_CHARS 128

/* Outcomes of idem_grammar_check(). */
#define IDEM_KEY_OK 0
#define IDEM_KEY_EMPTY 1
#define IDEM_KEY_TOO_LONG 2 /* *pDetail = the length in characters */
#define IDEM_KEY_BAD_BYTE 3 /* *pDetail = byte offset of the first bad byte */

/*
** Check text z[0..n) (UTF-8, may hold NUL bytes) against the key grammar:
** 1 to 128 characters, each in A-Z a-z 0-9 _ -. Length is counted in
** characters (UTF-8 lead bytes) and checked before the bytes, so that a
** long value is reported as too long whatever it holds.
*/
int idem_grammar_check(const unsigned char *z, size_t n, size_t *pDetail);

/* Lowercase hex of a[0..n) into zOut (2n+1 bytes, NUL-terminated). */
void idem_hex(const unsigned char *a, size_t n, char *zOut);

#define IDEM_DIGEST_HEX 32 /* XXH3-128 as lowercase hex     */
#define IDEM_KEY_PREFIX "idem1-"
#define IDEM_KEY_LEN (6 + IDEM_DIGEST_HEX) /* "idem1-" + 32 hex digits */

/*
** XXH3-128 of (zPrefix[0..nPrefix) || canonical(zArgs[0..nArgs))) as
** canonical (big-endian) lowercase hex into zHex (33 bytes). The prefix
** is hashed as given (the caller frames it); the canonical form is
** streamed into the hash state and never held whole. Returns an
** IDEM_JCS_* code; pErr is filled for IDEM_JCS_INVALID.
*/
int idem_digest(const char *zPrefix, size_t nPrefix, const char *zArgs, size_t nArgs,
                const IdemMem *pMem, char *zHex, IdemJcsError *pErr);

/* XXH3-128 of zPrefix||z as canonical lowercase hex into zHex (33 bytes). */
void idem_digest_bytes(const char *zPrefix, size_t nPrefix, const char *z, size_t n, char *zHex);

/* ------------------------------------------------------------------ */
/* SQL layer (files that include sqlite3ext.h first)                   */
/* ------------------------------------------------------------------ */
/* IDEM_GUARDED(f) defines f_guarded, which runs the SQL function f between
** ledger_conn_enter and ledger_conn_leave (its user data is the IdemConn), so a
** ledger disconnected while f runs is finished after it (ledger_conn.c). Only
** files of the SQL layer expand it; it stands outside the section below so
** that static analysis without sqlite3ext.h still knows the macro. */
#define IDEM_GUARDED(f)                                                           \
  static void f##_guarded(sqlite3_context *ctx, int argc, sqlite3_value **argv) { \
    void *pConn = sqlite3_user_data(ctx);                                         \
    ledger_conn_enter(pConn);                                                     \
    f(ctx, argc, argv);                                                           \
    ledger_conn_leave(pConn);                                                     \
  }

/*
** The statuses a row holds, stated once. Open rows (claimed, unknown) are
** held: never deleted, never taken over by another call's outcome. Terminal
** rows (succeeded, failed, released) are outcomes: a replay answers them,
** purge and retention delete them. In SQL the two sets are SQL_OPEN(c) and
** SQL_TERMINAL(c) for a status column c (SQL_OPEN_EQ without the
** parentheses, as the open rows' index states it), as OR chains (an IN list makes an
** ephemeral table per run); every statement of the extension and every
** trigger text spells them through these (the trigger texts with IS:
** SQL_OPEN_IS, SQL_TERMINAL_IS; those texts are frozen per format, and the
** macros keep them byte for byte). In C, ledger_status() reads a stored
** status through the one table in ledger_rows.c.
*/
#define SQL_OPEN_EQ(c) c "='claimed' OR " c "='unknown'"
#define SQL_OPEN(c) "(" SQL_OPEN_EQ(c) ")"
#define SQL_TERMINAL(c) "(" c "='succeeded' OR " c "='failed' OR " c "='released')"
#define SQL_OPEN_IS(c) c " IS 'claimed' OR " c " IS 'unknown'"
#define SQL_TERMINAL_IS(c) c " IS 'succeeded' OR " c " IS 'failed' OR " c " IS 'released'"

/* The name of guard trigger <kind> (ledger_guard_kind) of ledger <L> on a
** table guarded under the name <base>: <base>_idem_<L>_<kind> (guard_schema.c
** makes them). Written once here: as a printf format (base, ledger, kind),
** and as an SQL expression of SQL texts base and ledger. */
#define GUARD_TRIGGER_INFIX "_idem_"
#define GUARD_TRIGGER_FMT "%s" GUARD_TRIGGER_INFIX "%s_%s"
#define GUARD_TRIGGER_SQL(base, ledger, kind) \
  base "||'" GUARD_TRIGGER_INFIX "'||" ledger "||'_" kind "'"

#if defined(SQLITE3EXT_H)

/* idem_sqlite_mem: IdemMem over sqlite3_malloc64/realloc64/free. */
extern const IdemMem idem_sqlite_mem;

/* ------------------------------------------------------------------ */
/* Interface to code in keyfuncs.c: SQL functions and helpers         */
/* ------------------------------------------------------------------ */

void idem_version_func(sqlite3_context *, int, sqlite3_value **);
void idem_valid_key_func(sqlite3_context *, int, sqlite3_value **);
void idem_check_key_func(sqlite3_context *, int, sqlite3_value **);
void idem_canonical_func(sqlite3_context *, int, sqlite3_value **);
void idem_fingerprint_func(sqlite3_context *, int, sqlite3_value **);
void idem_key_func(sqlite3_context *, int, sqlite3_value **);

/*
** Check value v against the key grammar. Returns 0 when valid; otherwise
** returns the SQLite error code (SQLITE_CONSTRAINT) and sets *pzErr to a
** message "<zFunc>: <zLabel> ..." from sqlite3_mprintf (NULL on OOM, in
** which case the code is SQLITE_NOMEM).
*/
int idem_key_error(const char *zFunc, const char *zLabel, sqlite3_value *v, char **pzErr);

/*
** Canonicalise the TEXT value v into *pBuf (pBuf->pMem must be set), or
** hash it (zHexOut non-NULL: digest of zPrefix||canonical into zHexOut,
** nothing kept). Returns SQLITE_OK, or an error code with *pzErr set to
** "<zFunc>: <zLabel> ..." (sqlite3_mprintf; NULL with SQLITE_NOMEM).
*/
int idem_canonical_value(const char *zFunc, const char *zLabel, sqlite3_value *v, IdemBuf *pBuf,
                         const char *zPrefix, size_t nPrefix, char *zHexOut, char **pzErr);

/*
** For text that SQLite holds as UTF-16 (a UTF-16 database): returns
** SQLITE_OK when v is not TEXT or its UTF-16 form has no lone surrogate;
** else SQLITE_ERROR with *pzErr = "<zFunc>: <zLabel>: lone surrogate
** U+D800 at UTF-16 code unit N of the text" (sqlite3_mprintf; SQLITE_NOMEM
** and NULL when out of memory). Call it before anything reads v as UTF-8:
** SQLite's conversion merges a lone surrogate with the next unit.
** Reading a UTF-8 value this way converts it, so only UTF-16 variants do.
*/
int idem_utf16_error(const char *zFunc, const char *zLabel, sqlite3_value *v, char **pzErr);

/* The name of SQLite type t (SQLITE_INTEGER ...) as errors show it:
** INTEGER, REAL, TEXT, BLOB, NULL. */
const char *idem_type_name(int t);

/* "<zFunc>: <message>" for an SQLite error rc: the connection's message
** when it describes rc, else SQLite's text for rc (sqlite3_malloc). */
char *idem_db_error(sqlite3 *db, const char *zFunc, int rc);

/* Report rc/zErr on ctx and free zErr. */
void idem_result_error(sqlite3_context *ctx, int rc, char *zErr);

/* ------------------------------------------------------------------ */
/* Interface to code in json_writer.c: the one JSON builder           */
/* ------------------------------------------------------------------ */

/*
** An answer object under construction. Members are added in order; text
** values are escaped, stored JSON is checked before it is written (never
** pasted unchecked). The first failure sticks in rc and later calls do
** nothing, so a builder is used without checking each call; idem_json_finish
** says what happened.
*/
#define IDEM_JSON_MAX_DEPTH 4 /* levels inside the outermost value */
typedef struct IdemJson IdemJson;
struct IdemJson {
  char *z;                              /* aInline, or sqlite3_malloc'd once it outgrows it */
  size_t n, nAlloc;                     /* bytes written; room (one kept for the final NUL) */
  int nMember;                          /* members (or elements) of the open level written so far */
  int iDepth;                           /* levels opened by idem_json_open, not closed yet */
  int aMember[IDEM_JSON_MAX_DEPTH];     /* nMember of each enclosing level */
  char zClose[IDEM_JSON_MAX_DEPTH + 1]; /* what closes each level, outermost first */
  int rc;            /* SQLITE_OK, SQLITE_NOMEM, or SQLITE_CORRUPT for bad stored JSON */
  const char *zBad;  /* the member whose stored JSON was refused */
  char aInline[512]; /* most answers fit: no allocation until finish */
};
void idem_json_begin(IdemJson *j);
/* Begin an answer that is an array: its elements are added with zName NULL. */
void idem_json_begin_array(IdemJson *j);
/* Member zName (NULL: the next element of an array) opens an array (c '[')
** or an object (c '{'), closed by idem_json_close. */
void idem_json_open(IdemJson *j, const char *zName, char c);
void idem_json_close(IdemJson *j);
void idem_json_text(IdemJson *j, const char *zName, const char *zValue); /* escaped string */
void idem_json_int(IdemJson *j, const char *zName, sqlite3_int64 v);
void idem_json_bool(IdemJson *j, const char *zName, int b);
/* Stored JSON zJson (from the rows table) as a member value: NULL gives
** zIfNull (a JSON literal); text that is not one JSON value of the kind
** eKind (IDEM_JSON_ANY, IDEM_JSON_ARRAY) is refused (rc SQLITE_CORRUPT).
** pSeen (or NULL) is the last stored text that passed this check for one
** kind: the check is a function of the text and the kind alone, so the
** same bytes again pass without being parsed again. Zeroed to start;
** freed by idem_json_seen_free. */
#define IDEM_JSON_ANY 0
#define IDEM_JSON_ARRAY 1
typedef struct IdemJsonSeen IdemJsonSeen;
struct IdemJsonSeen {
  char *z;
  size_t n, nAlloc;
};
#define IDEM_JSON_SEEN_MAX 1024 /* longer texts are checked every time */
void idem_json_stored(IdemJson *j, const char *zName, const char *zJson, const char *zIfNull,
                      int eKind, IdemJsonSeen *pSeen);
void idem_json_seen_free(IdemJsonSeen *pSeen);
/* Refuse stored JSON member zName without reading it (rc SQLITE_CORRUPT),
** for a text known not to be JSON. */
void idem_json_refuse(IdemJson *j, const char *zName);
/* A literal the caller vouches for: a JSON text constant of the source. */
void idem_json_literal(IdemJson *j, const char *zName, const char *zJsonLiteral);
/* Close the object and hand it over (sqlite3_malloc); NULL with *pRc set
** on failure. */
char *idem_json_finish(IdemJson *j, int *pRc);

/* A JSON string literal for text z (sqlite3_malloc; NULL on OOM). Text
** values are written as they are when they are well-formed UTF-8; each
** maximal ill-formed subpart of one that is not becomes U+FFFD, so the
** literal is valid JSON whatever the bytes. */
char *idem_json_string(const char *z);
/* The byte offset of the first ill-formed UTF-8 sequence of z, or -1. */
int idem_utf8_invalid_at(const char *z);

/* ------------------------------------------------------------------ */
/* The ledger, as guard.c and the entry point see it                   */
/* ------------------------------------------------------------------ */

/* A ledger's options: one table in ledger_config.c (name, range,
** default); these are their indexes. A new option adds a row there and
** an index here. */
#define IDEM_OPT_LEASE 0
#define IDEM_OPT_ATTEMPTS 1
#define IDEM_OPT_ARGS_BYTES 2
#define IDEM_OPT_SINGLE 3
#define IDEM_OPT_RETENTION 4     /* retention_seconds (ledger_retention.c) */
#define IDEM_OPT_REQUIRE_TXN 5   /* require_transaction */
#define IDEM_OPT_TARGET_WINDOW 6 /* target_window_seconds (ledger_targets.c) */
#define IDEM_N_OPT 7

/* A ledger: opaque outside the ledger's files (IDEM_LEDGER_INTERNAL). */
typedef struct IdemLedger IdemLedger;

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_config.c: a ledger's configuration, tokens, the clock */
/* ------------------------------------------------------------------ */

/* What a ledger shows to guard.c. */
sqlite3 *ledger_db(const IdemLedger *p);
const char *ledger_schema(const IdemLedger *p);             /* its schema ("main", ...) */
const char *ledger_name(const IdemLedger *p);               /* its table name */
const char *ledger_identity(const IdemLedger *p);           /* the random id in <name>_meta */
sqlite3_int64 ledger_option(const IdemLedger *p, int iOpt); /* IDEM_OPT_* */

/* SQLITE_OK when p has all its shadow tables (checked
** again each call: call it when the schema changed); else an error
** "<zFunc>: ledger ... is missing ..." and p stays refused until it is
** reconnected. */
int ledger_usable(IdemLedger *p, const char *zFunc, char **pzErr);

/* ------------------------------------------------------------------ */
/* Interface to code in guard_schema.c: the guards' triggers as DDL   */
/* ------------------------------------------------------------------ */

/* The guards' triggers (they write the ledger's
** <name>_members, so the storage owns their text; guard.c installs them) */
#define IDEM_GUARD_N_TRIGGER 3
/* insert, member, update */
extern const char *const ledger_guard_kind[IDEM_GUARD_N_TRIGGER];
/* Trigger k of guard gid (zDb NULL: the text SQLite stores). sqlite3_malloc. */
char *ledger_guard_trigger_sql(int k, const char *zDb, const char *zLedger, const char *zLedgerId,
                               sqlite3_int64 gid, const char *zBase, const char *zTable,
                               const char *zKeyCol, const char *zTenCol, const char *zTokCol);
/* Create the three triggers of guard gid; drop those named after zBase. */
int ledger_guard_create(sqlite3 *db, const char *zDb, const char *zLedger, const char *zLedgerId,
                        sqlite3_int64 gid, const char *zBase, const char *zTable,
                        const char *zKeyCol, const char *zTenCol, const char *zTokCol,
                        char **pzErr);
int ledger_guard_drop(sqlite3 *db, const char *zDb, const char *zLedger, const char *zBase);
/* The current name of the table guarded under zBase (NULL: dropped). */
int ledger_guard_table(sqlite3 *db, const char *zDb, const char *zLedger, const char *zBase,
                       char **pzTable);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_schema.c: the shadow tables as the file holds them */
/* ------------------------------------------------------------------ */

/* A ledger's tables <name>_<ledger_shadow_suffix[i]>, by index. */
#define LEDGER_TABLE_ROWS 0
#define LEDGER_TABLE_META 1
#define LEDGER_TABLE_GUARDS 2
#define LEDGER_TABLE_MEMBERS 3
#define LEDGER_TABLE_TARGETS 4 /* format 5 on */
#define LEDGER_N_TABLE 5
/* How many of the tables above a ledger of format iFormat has (4 or 5). */
int ledger_format_tables(int iFormat);
/* Is zTable (any case) one of ledger zLedger's tables? */
int storage_is_own_table(const char *zLedger, const char *zTable);
/* Does table LEDGER_TABLE_<iTable> of p exist (*pbExists)? SQLITE_OK, or
** the error (SQLITE_NOMEM) that kept the schema from answering. */
int storage_table_exists(const IdemLedger *p, int iTable, int *pbExists);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_rows.c: rows, members, targets and guards as the extension reads and writes them */
/* ------------------------------------------------------------------ */

/* idem_guard: is zTable guarded already, under its current name or the
** one it was guarded under (*pbGuarded)? Else *pGid the new guard's id. */
int storage_guard_next(IdemLedger *p, const char *zTable, int *pbGuarded, sqlite3_int64 *pGid);
/* Prepare every statement of a ledger of this format (ledger_lifecycle_tables,
** when a shadow table is altered). SQLITE_OK, or the first error with
** *pzErr ("<zFunc>: ...", the refusal when a shadow table was altered). */
int storage_prepare_all(IdemLedger *p, const char *zFunc, char **pzErr);
/* Is PRAGMA query_only on for p's connection (*pb)? */
int storage_query_only(IdemLedger *p, int *pb);
/* A guard's member trigger: record the row rid of guard gid as a member
** of the claimed local claim of (pTenant, pKey) (pTenant NULL: by key
** alone), if there is one. */
int storage_member_add(IdemLedger *p, sqlite3_int64 gid, sqlite3_value *pTenant,
                       sqlite3_value *pKey, sqlite3_int64 rid);
/* idem_guard_check: *pzCol the tenant column of the guard installed
** under the name zBase (sqlite3_malloc), or NULL when it names none. */
int storage_guard_tenant_column(IdemLedger *p, const char *zBase, char **pzCol);
/* idem_guard: record guard gid (after its triggers exist). */
int storage_guard_insert(IdemLedger *p, sqlite3_int64 gid, const char *zTable, const char *zKeyCol,
                         const char *zTenCol, const char *zTokCol);
/* idem_unguard: the guard of table zTable by its current name: *pGid and
** *pzBase its base name (sqlite3_malloc), or *pzBase NULL when none. */
int storage_guard_find(IdemLedger *p, const char *zTable, sqlite3_int64 *pGid, char **pzBase);
/* idem_unguard: *pzKey the key of an open claim that wrote rows under
** guard gid (sqlite3_malloc), or NULL. A broken ledger has none, and
** loses the guards table's delete trigger, so its guards can go. */
int storage_guard_open_key(IdemLedger *p, sqlite3_int64 gid, char **pzKey);
/* The rows the last own write changed, read as it ended (a commit after
** it runs the application's hooks, which change sqlite3_changes()). */
int storage_own_changes(const IdemLedger *p);
/* idem_unguard: delete guard gid's row (after its triggers are dropped). */
int storage_guard_delete(IdemLedger *p, sqlite3_int64 gid);
/* Inside a transaction that holds no write lock on p's
** schema yet, take it first (a statement that writes nothing), through the
** busy handler; after a read of the same transaction SQLite cannot wait:
** SQLITE_BUSY and *pzErr says to use BEGIN IMMEDIATE. */
int ledger_write_first(IdemLedger *p, const char *zFunc, char **pzErr);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_check.c: the entry check of every operation */
/* ------------------------------------------------------------------ */

/*
** Fail when the triggers on the shadow tables and the guarded tables are
** not exactly the ledger's own (by name and stored SQL). Re-read only when
** a schema version changed. Returns SQLITE_OK, or an error with *pzErr
** ("<zFunc>: ...", sqlite3_malloc). guard.c asks it before a guarded row
** is accepted and before a guard is added.
*/
int ledger_check_triggers(IdemLedger *p, const char *zFunc, char **pzErr);

/* ------------------------------------------------------------------ */
/* Interface to code in savepoint.c                                   */
/* ------------------------------------------------------------------ */

/* The savepoint a function writes under (savepoint.c says how it is
** undone under allocation failure). */
typedef struct IdemSave IdemSave;
struct IdemSave {
  sqlite3 *db;
  int bOpen;              /* the savepoint is open */
  int bOwn;               /* the connection was in autocommit before it */
  sqlite3_stmt *apCmd[4]; /* SAVEPOINT, RELEASE, ROLLBACK TO, ROLLBACK */
  sqlite3_stmt *pHold;    /* idem_save_hold's started statement, or NULL */
};
/* Prepare the commands of savepoint zName and open it. SQLITE_OK, or the
** error (nothing was written). idem_save_end ends it in every case. */
int idem_save_begin(IdemSave *s, sqlite3 *db, const char *zName);
/* Start (again) a statement of schema zDb that is not stopped when a
** schema change expires the prepared ones, and that rolls the transaction
** back when it is ended in the out-of-memory state. SQLITE_OK or the
** error. A DROP fails while it is started: idem_save_pause first. */
int idem_save_hold(IdemSave *s, const char *zDb);
void idem_save_pause(IdemSave *s);
/* End the savepoint: released when rc is SQLITE_OK, else undone. Returns
** rc, or the release's error (SQLITE_NOMEM when a success lost the
** caller's transaction to the out-of-memory state). */
int idem_save_end(IdemSave *s, int rc);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_state.c                                */
/* ------------------------------------------------------------------ */

/* Does (tenant, key) hold a live claimed claim (with token, if not NULL)?
** SQLITE_OK with *pzWhy NULL if so, else *pzWhy says why not. */
int ledger_live_claim(IdemLedger *p, sqlite3_value *pTenant, sqlite3_value *pKey,
                      sqlite3_value *pToken, char **pzWhy);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_conn.c                                 */
/* ------------------------------------------------------------------ */

/* Bracket every ledger and guard function (user data pConn): a ledger
** disconnected meanwhile is finished when the outermost call leaves. */
void ledger_conn_enter(void *pConn);
void ledger_conn_leave(void *pConn);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger.c                                      */
/* ------------------------------------------------------------------ */

/* Register the module and the ledger functions; *ppConn receives the
** connection's registry, which guard functions take as user data. */
int idem_register_ledger(sqlite3 *db, void **ppConn, char **pzErr);

/* Remove what registration added (after a failed init: SQLite unloads the
** library, so nothing of it may stay registered). */
void idem_unregister_ledger(sqlite3 *db);

/*
** Resolve function argument iArg (a ledger name) like a table name:
** "schema.ledger" (either part may be double-quoted) in that schema, an
** unqualified name in temp, main, then attached schemas; it must be a
** table USING idempotency. Cached per statement and per connection.
** Inside a transaction it first takes the write lock on the ledger's
** schema through the busy handler (every caller writes), before anything
** of that schema is read. On failure the error is reported on ctx
** (messages start with zFunc) and NULL is returned.
*/
IdemLedger *idem_ledger_resolve(sqlite3_context *ctx, int iArg, sqlite3_value *pName,
                                const char *zFunc);

/* The ledger named zName whose identity is zId, searched in every schema
** (guards call it: a same-named ledger elsewhere must not answer for
** theirs). NULL with *pRc SQLITE_OK when there is none. */
IdemLedger *idem_ledger_find_by_id(sqlite3_context *ctx, const char *zName, const char *zId,
                                   int *pRc);

/* ------------------------------------------------------------------ */
/* Interface to code in guard.c                                       */
/* ------------------------------------------------------------------ */

/* Register the guard functions with user data pConn (the ledger registry). */
int idem_register_guard(sqlite3 *db, void *pConn, char **pzErr);

/* Remove what idem_register_guard added. */
void idem_unregister_guard(sqlite3 *db);

#if defined(IDEM_LEDGER_INTERNAL)

/* The ledger's fields, read and written only by the ledger's files. */
/* The calls of ledger and guard functions running on a connection (the
** registry keeps it, each ledger points at it): depth, and a number that
** changes on every ledger_conn_enter and ledger_conn_leave. Two reads under
** one number, with depth above 0, are in one call, with no other ledger
** or guard function between them. */
typedef struct LedgerCalls LedgerCalls;
struct LedgerCalls {
  int nDepth;
  unsigned iCall;
  /* One writer (ledger_rows.c, own_begin): the own statements being
  ** stepped, the calls of idem_own_write(), and whether a write changed
  ** rows without asking it (a function of that name registered over the
  ** extension's: every later operation is refused) */
  int nOwnWrite;
  unsigned nAsked;
  int bForged;
};

struct IdemLedger {
  sqlite3_vtab base;
  sqlite3 *db;
  void *pConn;                    /* the connection's registry (IdemConn) */
  LedgerCalls *pCalls;            /* the registry's calls (ledger_temp_version) */
  char *zDb, *zName;              /* one allocation: zName follows zDb */
  int nRef;                       /* 1 while connected, +1 per cached reference */
  int bDead;                      /* disconnected; statements finalized */
  IdemLedger *pNext;              /* registry list */
  sqlite3_int64 aOpt[IDEM_N_OPT]; /* IDEM_OPT_* */
  sqlite3_stmt *aStmt[40];
  unsigned mBusy; /* aStmt slots lent to an open cursor (the cursor slots are below 32) */
  int iFormat;    /* of the file: 1 until idem_upgrade, else LEDGER_FORMAT (or 4) */
  int iDurable;   /* synchronous as read in this write transaction (sync_level); -1 unread */
  int iDqlite;    /* ledger_under_dqlite() of its schema (fixed while attached); -1 unread */
  sqlite3_vfs *pClockVfs;       /* the VFS ledger_now() reads; NULL until first read */
  unsigned int uDurableVersion; /* the data version iDurable was read at */
  int bChecked, iSchemaVersion, iTempSchemaVersion;
  int bUnread;               /* connected, its file not read yet (ledger_ready) */
  int iTempNow;              /* temp's schema version as last read */
  sqlite3_stmt *pGetChecked; /* the row lookup when the triggers were last checked */
  int nGetReprepare;         /* and its SQLITE_STMTSTATUS_REPREPARE count then */
  char *zForeign;            /* why operations are refused, or NULL */
  char zId[17];              /* random identity, kept in <name>_meta: guards name it */
  /* retention_seconds (ledger_retention.c): where the next walk over old
  ** rows starts (storage_retention_scan) */
  sqlite3_int64 iRetCursor;
  char *zBroken;         /* a shadow table missing or altered: why operations are refused */
  int bAltered;          /* zBroken is an altered table's (schema_altered_refusal) */
  IdemJsonSeen aSeen[2]; /* stored JSON last checked, by IDEM_JSON_ANY / IDEM_JSON_ARRAY */
  /* PRAGMA query_only and temp's schema version as last read
  ** (storage_query_only, ledger_temp_version), each kept while the probe
  ** statement has not been prepared again since (storage_probe) */
  sqlite3_stmt *pProbe;
  int nProbeNow;        /* the probe's count as stepped ... */
  unsigned iProbeStamp; /* ... under this idem_conn_call() number; 0 none */
  int nProbeReprepare, bQueryOnly, bQueryOnlyRead;
  int nTempProbe, bTempRead;
  /* the rows the last own write changed, and the rowid it inserted, read
  ** as it ended (a commit after it runs the application's hooks, whose
  ** statements would change what sqlite3_changes() answers) */
  int nOwnChanges;
  sqlite3_int64 iOwnRowid;
  /* idem_own_write() was found the extension's under this probe count
  ** (storage_own_refused) */
  int nOwnProbe, bOwnProbed;
};

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_config.c: a ledger's configuration, tokens, the clock (the ledger's files) */
/* ------------------------------------------------------------------ */

/* Run SQL text zSql (sqlite3_mprintf'd, freed here; NULL means out of
** memory) on db: SQLITE_OK or the error (*pzErr when not NULL). */
int ledger_exec_sql(sqlite3 *db, char *zSql, char **pzErr);
/* The row id part of a token (its top bit is clear). */
#define TOKEN_ID_MASK 0x7fffffffffffffffULL

/* One option: its name, the range CREATE accepts (and connect checks),
** its default, and whether a file may lack it (an option added later:
** an older file then gets the default). */
typedef struct LedgerOption LedgerOption;
struct LedgerOption {
  const char *zName;
  sqlite3_int64 iMin, iMax, iDefault;
  int bOptional; /* added later: a file without it gets the default */
};
extern const LedgerOption ledger_options[IDEM_N_OPT];

/* Index into ledger_options of the option "name=value" text z names:
** IDEM_N_OPT when unknown, -1 without '='; *pzName, *pnName its name. */
int ledger_option_index(const char *z, const char **pzName, size_t *pnName);
/* Parse CREATE's "name=value" arguments (argv[3..]) into aVal; bDqlite
** makes require_transaction default to 1. */
int ledger_parse_options(int argc, const char *const *argv, int bDqlite, sqlite3_int64 *aVal,
                         char **pzErr);
/* Read and check the format, identity and options from zName_meta. */
int ledger_read_meta(sqlite3 *db, const char *zDb, const char *zName, sqlite3_int64 *aVal,
                     char *zId, int *piFormat, char **pzErr);
/* Unix milliseconds from the VFS clock of the ledger's database. */
sqlite3_int64 ledger_now(IdemLedger *p);
/* How a non-INTEGER argument is named in an error (sqlite3_malloc). */
char *ledger_arg_got(sqlite3_value *v);
/* Parse a token argument; SQLITE_CONSTRAINT with the error when malformed. */
int ledger_token_arg(const char *zFunc, sqlite3_value *v, sqlite3_int64 *pId, sqlite3_int64 *pRnd,
                     const char **pzToken, char **pzErr);
/* 1 when database zDb of db is served by dqlite's VFS ("dqlite-<n>"). */
int ledger_under_dqlite(sqlite3 *db, const char *zDb);

/* Tokens: 32 lowercase hex digits, the row id then the random part that
** the column token holds. Parse returns 0 when zHex is malformed. */
void ledger_token_hex(sqlite3_int64 id, sqlite3_int64 rnd, char *zOut);
int ledger_token_parse(const char *zHex, sqlite3_int64 *pId, sqlite3_int64 *pRnd);

/* ------------------------------------------------------------------ */
/* Interface to code in guard_schema.c: the guards' triggers as DDL (the ledger's files) */
/* ------------------------------------------------------------------ */

/* The guard trigger names (GUARD_TRIGGER_*) are above the SQLite section,
** with the other macros of pure SQL text. */
/* The guard trigger names end in _idem_<ledger>_<kind>; the kind's index
** (ledger_guard_kind) when zTrig is one of p's, else -1; *pnBase the
** length of the base before it. */
int ledger_guard_trigger_kind(const IdemLedger *p, const char *zTrig, size_t *pnBase);
/* Make every guard's triggers again: those named after ledger zOld are
** dropped, the three of the current format made under ledger zNew (the
** guards are read from zNew_guards). *pn counts the triggers created. */
int ledger_guards_rebuild(sqlite3 *db, const char *zDb, const char *zOld, const char *zNew,
                          const char *zId, int *pn);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_schema.c: the shadow tables as the file holds them (the ledger's files) */
/* ------------------------------------------------------------------ */

/* The WHERE of the partial index of open rows (schema_create_indexes),
** repeated by the statements that read it so the planner uses it. */
#define OPEN_WHERE SQL_OPEN_EQ("status")
/*
** What the triggers on the ledger's tables and its guarded tables say.
** schema_triggers_scan() fills it: mOwn gets a bit per own trigger of the
** format found intact; zWhy (sqlite3_malloc) the first problem as a
** sentence without the ledger's name, or NULL; bRepair that every problem
** found is one idem_upgrade repairs (a missing or altered own or guard
** trigger); bGuard that the problem is a guard's.
*/
typedef struct TriggerScan TriggerScan;
struct TriggerScan {
  unsigned mOwn;
  char *zWhy;
  int bRepair;
  int bGuard; /* zWhy is about a guard's triggers */
};
/* Scan the triggers on p's shadow tables (and, for formats 4 and 5, its
** guards') against the own triggers of format iFormat. With bDrop, an own
** trigger found altered is dropped (idem_upgrade then creates it again). */
int schema_triggers_scan(IdemLedger *p, int iFormat, int bDrop, TriggerScan *t);
/* How many own triggers a ledger of format iFormat (4 or 5) has. */
int schema_own_count(int iFormat);
/* For idem_upgrade: the DDL pieces. The own triggers of format iFormat
** (4 or 5) whose bit is clear in mSkip made, or all of format iFormat
** dropped; CREATE TABLE of table iTable named zTable (zDb NULL:
** unqualified, sqlite3_malloc); the rows table's indexes, the members
** table, the targets table and its index. */
int schema_create_triggers(sqlite3 *db, const char *zDb, const char *zName, int bSingle,
                           int iFormat, unsigned mSkip, char **pzErr);
int schema_drop_triggers(sqlite3 *db, const char *zDb, const char *zName, int iFormat);
char *schema_table_sql(int iTable, const char *zDb, const char *zTable);
int schema_create_indexes(sqlite3 *db, const char *zDb, const char *zName, const char *zId,
                          int bSingle, char **pzErr);
int schema_create_members(sqlite3 *db, const char *zDb, const char *zName, char **pzErr);
int schema_create_targets(sqlite3 *db, const char *zDb, const char *zName, const char *zId,
                          char **pzErr);
/* For ledger_stmt: statement zSql of p failed to prepare with rc. When a
** shadow table of p is altered (storage_altered_table), p is refused from
** now on (p->zBroken names the table and the remedy) and rc is returned;
** otherwise rc, with the connection's message for it again. An error of
** the check itself replaces rc. */
int schema_altered_refusal(IdemLedger *p, int rc, const char *zSql);

#define LEDGER_FORMAT 5
/* The formats every operation works on: format 4 lacks only the targets
** table (a claim that names targets is refused, naming idem_upgrade). */
#define LEDGER_FORMAT_WORKS(f) ((f) >= 4)
/* Create the shadow tables, meta rows, indexes and triggers. */
int ledger_create_schema(sqlite3 *db, const char *zDb, const char *zName, const sqlite3_int64 *aVal,
                         const char *zId, char **pzErr);
/* After xRename: move the shadow tables, triggers and indexes to zNew. */
int ledger_rename_schema(IdemLedger *p, const char *zNew);
/* Drop the shadow tables (xDestroy). */
int ledger_drop_schema(IdemLedger *p);

/* For idem_health (ledger_health.c). A trigger's state: what p's schema
** holds under its name, against the text the ledger writes. */
#define LEDGER_TRIGGER_MISSING 0
#define LEDGER_TRIGGER_OK 1
#define LEDGER_TRIGGER_ALTERED 2
/* Own trigger i of p's format: *pzName (sqlite3_malloc, the caller frees
** it) and *peState; *pzName NULL when i is past the last. */
int storage_own_trigger(const IdemLedger *p, int i, char **pzName, int *peState);
/* Table LEDGER_TABLE_<iTable> of p: *pzName (sqlite3_malloc, the caller
** frees it, also on error) and *peState, against the text the ledger
** writes (LEDGER_TRIGGER_*: its states are the same). Format 4 only. */
int storage_own_table(const IdemLedger *p, int iTable, char **pzName, int *peState);
/* The first of p's tables whose text is not the one the ledger writes
** (storage_own_table's "altered", all four in one read): *pzName
** (sqlite3_malloc, the caller frees it), NULL when none is. Format 4 only. */
int storage_altered_table(const IdemLedger *p, char **pzName);
/* The three triggers of guard gid, installed under zBase with these
** columns: names (azName, sqlite3_malloc, the caller frees them, also on
** error) and states (aState), in ledger_guard_kind order; *pzTable the
** table they are on now (NULL: dropped, its triggers with it). */
int storage_guard_triggers(const IdemLedger *p, sqlite3_int64 gid, const char *zBase,
                           const char *zKeyCol, const char *zTenCol, const char *zTokCol,
                           char **azName, int *aState, char **pzTable);

/* The suffixes of a ledger's tables (LEDGER_TABLE_* order); the first
** LEDGER_N_SHADOW, the shadow tables every ledger needs, in bit order. */
#define LEDGER_N_SHADOW 3
#define LEDGER_SHADOW_ALL 7 /* bit 0 <name>_rows, 1 <name>_meta, 2 <name>_guards */
extern const char *const ledger_shadow_suffix[LEDGER_N_TABLE];
/* Which shadow tables of zDb.zName are missing (*pmMissing, a mask). */
int ledger_shadow_missing(sqlite3 *db, const char *zDb, const char *zName, int *pmMissing);
/* "ledger <name> is missing its shadow table ..." (sqlite3_malloc; NULL on OOM). */
char *ledger_shadow_message(const char *zName, int mMissing);
/* Append " table <name>_rows" or " tables <name>_rows, <name>_meta" for
** the tables in mask m to s; returns how many. */
int ledger_shadow_list(sqlite3_str *s, const char *zName, int m);

/* Read what a connected ledger keeps in its file: which shadow tables
** exist, and the format, identity and options in <name>_meta. */
int ledger_read_file(IdemLedger *p, char **pzErr);
/* ledger_read_file at the first use of a ledger connected without
** reading its file (p->bUnread); else nothing. */
int ledger_ready(IdemLedger *p, char **pzErr);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_rows.c: rows, members, targets and guards as the extension reads and writes them (the ledger's files) */
/* ------------------------------------------------------------------ */

/* SQLITE_OK, or the refusal of a connection whose idem_own_write() is not
** the extension's (a function registered over it). */
int storage_own_refused(IdemLedger *p, const char *zFunc, char **pzErr);
/* PRAGMA schema_version of p's schema into *pV. */
int storage_schema_version(IdemLedger *p, int *pV);
/* The row lookup statement as prepared now (NULL before its first use):
** prepared again only when the schema it reads changed. */
sqlite3_stmt *storage_lookup_stmt(const IdemLedger *p);
/*
** temp's schema version into *pV, read again only when the connection's
** statements were expired since the last read (storage_probe; a TEMP
** schema change expires them) or a guarded table's read cleared
** bTempRead.
*/
int ledger_temp_version(IdemLedger *p, int *pV);

/* Column numbers of the row statements (the cursor statements add created_at). */
#define RC_ID 0
#define RC_CONV 1
#define RC_TOOL 2
#define RC_ARGS 3
#define RC_EFFECT 4
#define RC_STATUS 5
#define RC_RESULT 6
#define RC_ERROR 7
#define RC_ATTEMPT 8
#define RC_TOKEN 9
#define RC_LEASE 10
#define RC_MEMBERS 11
#define RC_TENANT 12
#define RC_KEY 13
#define RC_UPDATED 14
#define RC_EXPIRATIONS 15
#define RC_CREATED 16

/*
** The one set of statements storage exports, for stepping a result set:
** the cursor statements of the ledger's virtual table, one per xBestIndex
** plan (idxNum order: all, tenant and key, tenant, token, open rows),
** bound by the caller with the plan's values in order, read with the RC_*
** column numbers above. storage_cursor_slot is plan iPlan's statement
** slot (p->aStmt, p->mBusy); ledger_stmt lends the ledger's own (prepared
** on first use, owned by p), ledger_stmt_new makes a second one for a
** self-join (the caller finalizes). Every other statement is private to
** ledger_rows.c, behind the named operations below. A statement that
** does not prepare because a shadow table was altered makes p refused
** (schema_altered_refusal).
*/
int storage_cursor_slot(int iPlan);
int ledger_stmt(IdemLedger *p, int i, sqlite3_stmt **ppStmt);
int ledger_stmt_new(IdemLedger *p, int i, sqlite3_stmt **ppStmt);
/* Finalize p's statements, leaving one lent to a cursor to the cursor. */
void ledger_finalize_all(IdemLedger *p);
/* Step pS once, reset it; SQLITE_OK for a row or done. */
int ledger_step_done(sqlite3_stmt *pS);
/* synchronous >= FULL on a file database: a power loss keeps the claim
** (the value read is kept for the rest of the write transaction, and
** ledger_durable_forget, at the start of a call outside one, drops it). */
int ledger_durable(IdemLedger *p);
void ledger_durable_forget(IdemLedger *p);
/* A nested write that did not change exactly one row is an error. */
int ledger_write_check(IdemLedger *p, const char *zFunc, const char *zWhat, char **pzErr);

/* A ledger row, copied out of the statement that read it, so the
** statement can be reset before anything is written. */
typedef struct LedgerRow LedgerRow;
struct LedgerRow {
  sqlite3_int64 id, attempt, leaseUntil, updatedAt, expirations;
  const char *zConv, *zTool, *zArgs, *zEffect, *zStatus, *zResult, *zError;
  const char *zMembers, *zTenant, *zKey;
  int nArgs;
  /* the stored JSON columns holding a NUL before their end (never valid
  ** JSON; their C strings would end at it): LEDGER_NUL_RESULT, ... */
  int mNulJson;
  sqlite3_int64 tokenRnd; /* the column token */
  char zToken[33];        /* the token as shown (hex) */
  char *pBuf;             /* owns the text above (sqlite3_malloc) */
};
#define LEDGER_NUL_RESULT 1
#define LEDGER_NUL_ERROR 2
#define LEDGER_NUL_MEMBERS 4
void ledger_row_free(LedgerRow *r);
/* Run row query pS (bound by the caller), load its row; pS is reset. */
int ledger_row_fetch(sqlite3_stmt *pS, LedgerRow *r, int *pbFound);

/* Named operations on the shadow tables. Each binds and runs one of the
** ledger's cached statements; a row read is copied into *r (*pbFound). */
/* The row of (tenant, key); pTenant NULL: of the key alone (single_tenant). */
int storage_row_find(IdemLedger *p, sqlite3_value *pTenant, sqlite3_value *pKey, LedgerRow *r,
                     int *pbFound);
/* storage_row_find for C strings (zTenant NULL: the key alone). */
int storage_row_find_text(IdemLedger *p, const char *zTenant, const char *zKey, LedgerRow *r,
                          int *pbFound);
/* The row of token (id, rnd). */
int storage_row_by_token(IdemLedger *p, sqlite3_int64 id, sqlite3_int64 rnd, LedgerRow *r,
                         int *pbFound);
/* Insert fresh claim r (request columns, tokenRnd, updatedAt as created_at
** and updated_at, leaseUntil; nArgs -1 when zArgs is NUL-terminated). When
** a constraint refuses it (the key is held), *pzTaken gets SQLite's message
** and SQLITE_OK is returned. */
int storage_row_insert(IdemLedger *p, const LedgerRow *r, char **pzTaken);
/* Claim row r again, compare-and-set on its status and token: token rnd,
** lease until lease; bTakeover counts an expiry. */
int storage_row_reclaim(IdemLedger *p, const LedgerRow *r, sqlite3_int64 rnd, sqlite3_int64 now,
                        sqlite3_int64 lease, int bTakeover);
/* Record outcome zStatus of row r, compare-and-set on its status and token:
** the result or the error (nDetail bytes, -1 to its NUL; NULL stores NULL),
** the members (JSON array), updated_at now. */
int storage_row_settle(IdemLedger *p, const LedgerRow *r, const char *zStatus, const char *zResult,
                       const char *zError, int nDetail, const char *zMembers, sqlite3_int64 now);
/* Extend the live claim of token (id, rnd) to until (never shortened):
** *pbRenewed, and *pLease its lease_until when renewed. */
int storage_row_renew(IdemLedger *p, sqlite3_int64 id, sqlite3_int64 rnd, sqlite3_int64 until,
                      sqlite3_int64 now, sqlite3_int64 *pLease, int *pbRenewed);
/* Targets (format 5, <name>_targets): the row of a call of tenant zTenant,
** other than row selfId, that holds target zTarget: claimed or unknown
** (any age), or succeeded and updated after cutoff (*pbFound). */
int storage_target_holder(IdemLedger *p, const char *zTenant, const char *zTarget,
                          sqlite3_int64 selfId, sqlite3_int64 cutoff, LedgerRow *r, int *pbFound);
/* Record target zTarget of claim id (zAllowedBy, allowedAt and zOverrode
** when a second write to a held target was allowed, else NULL and 0). */
int storage_target_add(IdemLedger *p, sqlite3_int64 id, const char *zTenant, const char *zTarget,
                       const char *zAllowedBy, sqlite3_int64 allowedAt, const char *zOverrode);
/* Forget the targets of claim id (a new attempt names its own). */
int storage_targets_clear(IdemLedger *p, sqlite3_int64 id);
/* Delete row pId when terminal (the virtual table's DELETE). */
int storage_row_delete_terminal(IdemLedger *p, sqlite3_value *pId);
/* Delete the terminal rows updated before cutoff (idem_purge). */
int storage_purge_before(IdemLedger *p, sqlite3_int64 cutoff);
/* Retention: read up to RETENTION_SCAN rows after id iFrom; the ids of
** those due (terminal, updated before cutoff) into aDue[*pnDue]; *piNext
** where the next scan starts (0: from the beginning again). */
int storage_retention_scan(IdemLedger *p, sqlite3_int64 iFrom, sqlite3_int64 cutoff,
                           sqlite3_int64 *aDue, int *pnDue, sqlite3_int64 *piNext);
/* Retention: delete row id if it is still due. */
int storage_retention_delete(IdemLedger *p, sqlite3_int64 id, sqlite3_int64 cutoff);
/* Guards plus claimed and unknown rows (all shadow tables present). */
int storage_count_held(IdemLedger *p, sqlite3_int64 *pn);
/* Take the write lock, writing nothing. A failure to prepare is
** SQLITE_NOMEM when memory ran out, else SQLITE_OK (no rows table). */
int storage_write_lock(IdemLedger *p);
/* The claim's savepoint: prepare all its commands first (so that undoing
** cannot fail to prepare), then begin, release, roll back to, and roll
** back the whole transaction. */
int storage_savepoint_prepare(IdemLedger *p);
int storage_savepoint_begin(IdemLedger *p);
int storage_savepoint_release(IdemLedger *p);
/* Undo what was written since the savepoint began, keeping it open. */
int storage_savepoint_undo(IdemLedger *p);
/* The rowid the last own write inserted. */
sqlite3_int64 storage_own_rowid(const IdemLedger *p);
/* Undo and end the savepoint; when that fails and the transaction is the
** caller's own (autocommit before the savepoint), roll it back. */
void storage_savepoint_abandon(IdemLedger *p, int bOwnTxn);
/* One synced commit per durable call (docs/design.md, "A settle rides on
** the next synced commit"): when schema zDb is in WAL mode at
** synchronous=FULL, set it to NORMAL for the write that commits an
** external claim's settle or resolve (*pbLowered = 1); otherwise, or
** when a read or the change is refused (only SQLITE_NOMEM is returned),
** nothing changes. *pbSynced: that write's commit will sync (a file at
** FULL or above, not lowered), the answer's "durable" without a second
** read of synchronous. storage_sync_restore sets FULL again when bLowered. */
int storage_sync_lower(IdemLedger *p, int *pbLowered, int *pbSynced);
int storage_sync_restore(IdemLedger *p, int bLowered);
/* Does claim (id, attempt) have a member? */
int storage_has_members(IdemLedger *p, sqlite3_int64 id, sqlite3_int64 attempt, int *pb);
/* For stepping: *ppM the members of claim (id, attempt) (columns: guard,
** rid; by guard then rowid); *ppG the guards (columns: id, tbl,
** key_column, tenant_column, the insert trigger's table or NULL; by id),
** rewound by the caller after each walk. */
int storage_members_scan(IdemLedger *p, sqlite3_int64 id, sqlite3_int64 attempt, sqlite3_stmt **ppM,
                         sqlite3_stmt **ppG);
/* For stepping (the caller finalizes *ppS): HEALTH_SCAN_COUNTS, the rows
** by tool and stored status (tool, status, count); HEALTH_SCAN_OPEN, the
** open rows (id, tenant, key, tool, effect, status, attempt, lease_until,
** created_at); HEALTH_SCAN_GUARDS, the guards by id (id, tbl, key_column,
** tenant_column, token_column); HEALTH_SCAN_TARGETS (format 5), the
** targets (count, count of those allowed over another call). */
#define HEALTH_SCAN_COUNTS 0
#define HEALTH_SCAN_OPEN 1
#define HEALTH_SCAN_GUARDS 2
#define HEALTH_SCAN_TARGETS 3 /* the targets recorded, and those allowed over another call */
int storage_health_scan(const IdemLedger *p, int iScan, sqlite3_stmt **ppS);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_check.c: the entry check of every operation (the ledger's files) */
/* ------------------------------------------------------------------ */

/*
** The same check, for a claim outside a transaction once its read pass has
** run the row lookup (storage_row_find): SQLite prepares a statement again when the
** schema it reads has changed, so an unchanged lookup statement stands for
** an unchanged main schema and only temp's version is read. This spares
** the claim the read transaction that PRAGMA schema_version would open.
*/
int ledger_check_after_read(IdemLedger *p, const char *zFunc, char **pzErr);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_upgrade.c: idem_upgrade (the ledger's files) */
/* ------------------------------------------------------------------ */

/*
** idem_upgrade: a format-1 ledger is rebuilt as format 2 (rows copied;
** a live claim's old token still finds its row); a format-2 ledger gets
** its own triggers back where they are missing or altered. Refused while
** a foreign trigger is on the shadow tables. *pzJson: what was done.
*/
int ledger_upgrade(IdemLedger *p, const char *zFunc, char **pzJson, char **pzErr);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_lifecycle.c: adoption and missing shadow tables */
/* ------------------------------------------------------------------ */

/*
** xCreate: when all three shadow tables of argv[2] exist in argv[1], check
** L_meta and the options given (argv, parsed into aVal) against it and
** adopt them: *pbAdopted = 1, aVal, zId and *piFormat the stored ones. When none
** exists, *pbAdopted = 0 (create them). Anything else is an error.
*/
int ledger_lifecycle_adopt(sqlite3 *db, int argc, const char *const *argv, sqlite3_int64 *aVal,
                           char *zId, int *piFormat, int *pbAdopted, char **pzErr);
/* DROP TABLE's count: guards plus claimed and unknown rows, in the shadow
** tables that exist. */
int ledger_lifecycle_held_count(IdemLedger *p, sqlite3_int64 *pn);
/* For ledger_live_claim: when p is broken, or rc (an error reading
** the rows) comes from a shadow table dropped since, *pzWhy says so and
** SQLITE_OK is returned; otherwise rc. */
int ledger_lifecycle_broken_why(IdemLedger *p, int rc, char **pzWhy);
/* When a shadow table of p is altered (storage_altered_table), do the
** ledger's statements still prepare on it (storage_prepare_all)? SQLITE_OK,
** or the refusal with *pzErr ("<zFunc>: ..."). Run where the schema
** changed (ledger_check_triggers) and by idem_upgrade, which cannot repair
** such a table. */
int ledger_lifecycle_tables(IdemLedger *p, const char *zFunc, char **pzErr);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_retention.c: retention_seconds         */
/* ------------------------------------------------------------------ */

/*
** After an admitted claim (inside its savepoint or INSERT statement):
** purge a bounded batch of terminal rows whose updated_at is older than
** the ledger's retention_seconds (nothing when it is 0). Returns
** SQLITE_OK, or an error (with *pzErr when there is a message) that
** fails the claim.
*/
int ledger_retention_step(IdemLedger *p, const char *zFunc, char **pzErr);
/* Rows read (and at most deleted) per retention step: storage_retention_scan LIMIT. */
#define RETENTION_SCAN 16

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_state.c: the claim/settle/resolve state machine */
/* ------------------------------------------------------------------ */

/* A row's effective status (stored status seen at time now). */
#define EFF_CLAIMED 1 /* claimed, lease live */
#define EFF_EXPIRED 2 /* claimed, lease passed, local, no guarded rows: re-claimable */
#define EFF_UNKNOWN 3 /* unknown, or an expired claim that may have acted */
#define EFF_SUCCEEDED 4
#define EFF_FAILED 5
#define EFF_RELEASED 6

/* What a stored status is: STATUS_* bits (the statuses in SQL: SQL_OPEN and
** SQL_TERMINAL, above the SQLite section). */
#define STATUS_OPEN 1     /* claimed or unknown */
#define STATUS_TERMINAL 2 /* succeeded, failed or released */
#define STATUS_SETTLE 4   /* a status idem_settle may write */
#define STATUS_RESOLVE 8  /* a status idem_resolve may write */
/* The STATUS_* bits of stored status z, and its EFF_* code into *peEff
** (when not NULL); 0 (and *peEff 0) when z is not a status. */
unsigned ledger_status(const char *z, int *peEff);
/* "a, b, c or d": the statuses whose bits include mask, in the order the
** docs list them (sqlite3_malloc; NULL when out of memory). */
char *ledger_status_list(unsigned mask);
/* The name of effective status eEff ("claimed" for EFF_EXPIRED). */
const char *ledger_status_name(int eEff);
/*
** The one rule for a row's effective status: a claimed row whose lease
** has passed is unknown when external, or when local and its attempt has
** members (guarded rows written under it); else it stays claimed (expired). When
** pzMembers is not NULL and the members were read, *pzMembers gets them
** (JSON array, sqlite3_malloc) and *pnMember their count.
*/
int ledger_effective(IdemLedger *p, const char *zStatus, const char *zEffect,
                     sqlite3_int64 leaseUntil, sqlite3_int64 id, sqlite3_int64 attempt,
                     sqlite3_int64 now, int *peEff, char **pzMembers, int *pnMember);
/* SQLITE_OK when a row's stored args zArgs[0..nArgs) are canonical JSON,
** as the ledger writes them; else an error naming the key (the row was
** written outside the ledger, with its CHECKs off). */
int ledger_args_check(IdemLedger *p, const char *zFunc, const char *zKey, const char *zArgs,
                      size_t nArgs, char **pzErr);

/* A validated request. */
typedef struct LedgerReq LedgerReq;
struct LedgerReq {
  const char *zTenant, *zConv, *zTool, *zEffect;
  char zKey[IDEM_KEY_MAX_CHARS + 1];
  IdemBuf args;  /* canonical, with a NUL after its n bytes */
  int bArgsTerm; /* args holds no NUL of its own: it is bound as NUL-terminated */
  char *zTaken;  /* why a first INSERT was refused (the key is held), or NULL */
  int bNoWhy;    /* the caller does not use LedgerDecision.zWhy: it is not built */
  /* the claim's options (idem_claim's eighth argument, ledger_targets.c):
  ** its targets, each NUL-terminated, in the order given; the window a
  ** succeeded holder keeps them (ms); who allowed a second write to a
  ** held target (NULL: nobody) */
  int nTarget;
  const char *azTarget[IDEM_TARGETS_MAX];
  sqlite3_int64 targetWindowMs;
  const char *zAllowedBy;
  char *pTargetBuf; /* owns the text above (sqlite3_malloc) */
};
int ledger_req_parse(IdemLedger *p, const char *zFunc, sqlite3_value *pTenant, sqlite3_value *pConv,
                     sqlite3_value *pTool, sqlite3_value *pArgs, sqlite3_value *pEffect,
                     sqlite3_value *pOpId, LedgerReq *q, char **pzErr);
void ledger_req_free(LedgerReq *q);

#define DEC_ADMITTED 1
#define DEC_REPLAY 2
#define DEC_IN_PROGRESS 3
#define DEC_UNKNOWN 4
#define DEC_MISMATCH 5
#define DEC_CONFLICT 6

/* The outcome of one decision, built in full before anything commits. */
typedef struct LedgerDecision LedgerDecision;
struct LedgerDecision {
  int eDec;
  char *zJson;           /* the idem_claim result */
  char *zWhy;            /* for INSERT: why the key is taken */
  sqlite3_int64 id;      /* row id (admitted) */
  sqlite3_int64 attempt; /* admitted: the attempt */
  char zToken[33];       /* admitted: the token */
  int bFresh;            /* read pass: no row holds the key */
};

/* Decide (and write) a claim. bWrite: 0 the read pass, 1 insert first,
** 2 the insert was just refused (q->zTaken): read the row and decide. */
int ledger_claim_decide(IdemLedger *p, const char *zFunc, const LedgerReq *q, int bWrite,
                        int bCommitted, LedgerDecision *d, char **pzErr);
/* idem_claim: the read pass, the savepoint and the write pass. */
int ledger_claim(IdemLedger *p, const char *zFunc, LedgerReq *q, LedgerDecision *d, char **pzErr);
/* ------------------------------------------------------------------ */
/* Interface to code in ledger_targets.c: what a write touches         */
/* ------------------------------------------------------------------ */
/* idem_claim's options, its eighth argument v: a JSON object (targets,
** target_window_seconds, allowed_by) or NULL (none), into q; an error
** names the value and the rule. A claim with targets on a format-4
** ledger is refused, naming idem_upgrade. */
int ledger_claim_options(IdemLedger *p, const char *zFunc, sqlite3_value *v, LedgerReq *q,
                         char **pzErr);
/* Before q is admitted (a new key, or row selfId again; 0: none): the
** first of its targets held by another call of the tenant. Unless q says
** who allows a second write, *piTarget is its index and r the holder (the
** caller frees it); else *piTarget is -1, and with allowed_by azOver[i]
** gets the key of the call target i overrides (sqlite3_malloc; NULL when
** free), freed with ledger_targets_free. */
int ledger_targets_holder(IdemLedger *p, const LedgerReq *q, sqlite3_int64 selfId,
                          sqlite3_int64 now, LedgerRow *r, int *piTarget, char **azOver);
/* Append to the array open in j the top-level member names (JSON
** strings) whose values differ between canonical objects zA and zB (one
** only in either counts); nothing unless both are objects. */
int ledger_args_differ(IdemJson *j, const char *zA, size_t nA, const char *zB, size_t nB);
/* After q was admitted as row id: its targets recorded, those of an
** earlier attempt of the row (bAgain) forgotten first. */
int ledger_targets_record(IdemLedger *p, const LedgerReq *q, sqlite3_int64 id, sqlite3_int64 now,
                          char *const *azOver, int bAgain);
void ledger_targets_free(char **azOver);

/* idem_settle (pToken) or idem_resolve (pTenant, pKey): *pzJson answer. */
int ledger_outcome(IdemLedger *p, const char *zFunc, sqlite3_value *pToken, sqlite3_value *pTenant,
                   sqlite3_value *pKey, sqlite3_value *pStatus, sqlite3_value *pDetail,
                   char **pzJson, char **pzErr);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_renew.c: idem_renew(ledger, token [, seconds]) */
/* ------------------------------------------------------------------ */
/* The seconds argument v: an INTEGER in the lease_seconds range of CREATE
** into *pSec, or SQLITE_CONSTRAINT with *pzErr. */
int ledger_renew_seconds(const char *zFunc, sqlite3_value *v, sqlite3_int64 *pSec, char **pzErr);
/* Renew the claim token pToken holds by nSec seconds: SQLITE_OK with
** *pLease the new lease_until, or an error with *pzErr. */
int ledger_renew(IdemLedger *p, const char *zFunc, sqlite3_value *pToken, sqlite3_int64 nSec,
                 sqlite3_int64 *pLease, char **pzErr);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_last.c: idem_last_claim(ledger)        */
/* ------------------------------------------------------------------ */
/* The claims of the last INSERT statement into each ledger, kept by the
** connection (not the ledger object, which SQLite disconnects when a
** schema change is rolled back), each tagged with its ledger's identity. */
typedef struct LedgerLastClaim LedgerLastClaim;
typedef struct LedgerLastList LedgerLastList;
struct LedgerLastList {
  LedgerLastClaim *a;
  int n, nAlloc;
};
/* At each INSERT row: start a new list for p when a new statement runs,
** and make room for one more claim (so that adding it cannot fail). */
int ledger_last_begin(LedgerLastList *l, IdemLedger *p);
/* Remember an admitted INSERT row (after its write; never fails). */
void ledger_last_add(LedgerLastList *l, IdemLedger *p, const char *zKey, const char *zTenant,
                     const char *zToken, sqlite3_int64 id, sqlite3_int64 attempt,
                     const char *zEffect);
void ledger_last_free(LedgerLastList *pList);
/* The idem_last_claim answer (claims still in the database), or NULL. */
int ledger_last_answer(LedgerLastList *l, IdemLedger *p, char **pz);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_health.c: idem_health(ledger)          */
/* ------------------------------------------------------------------ */
/* The health of p as JSON in *pzJson (sqlite3_malloc): format, refusal,
** own and guard triggers, options, rows by status and tool, live and
** expired claims, the oldest unknown. Reads only. A ledger that refuses
** operations is an answer ("problems"), not an error; an error (*pzErr
** set when it has a message) is one of reading (busy, I/O, memory). */
int ledger_health(IdemLedger *p, const char *zFunc, char **pzJson, char **pzErr);

/* ------------------------------------------------------------------ */
/* Interface to code in ledger_conn.c: the connection's registry and name resolution */
/* ------------------------------------------------------------------ */

typedef struct IdemConn IdemConn;
/* A new, empty registry (sqlite3_malloc; NULL on OOM), and its destructor
** (the module's client-data destructor: the connection is closing). */
IdemConn *ledger_conn_new(void);
void ledger_conn_free(void *pConn);
/* Add connected ledger p to the registry; take it out at xDisconnect (it
** is finished now, or after the outermost running function returns). */
void ledger_conn_add(IdemConn *pConn, IdemLedger *p);
void ledger_conn_disconnect(IdemLedger *p);
/* Drop one reference to p; the last frees it. */
void ledger_conn_unref(IdemLedger *p);
/* The connection's last-claim list (ledger_last.c reads and writes it). */
LedgerLastList *ledger_conn_last(IdemLedger *p);
/* The connected ledger text zName (nName bytes) names, resolved like a
** table name: SQLITE_OK with *pp, or an error with *pzErr ("<zFunc>: ..."). */
int ledger_conn_lookup(IdemConn *pConn, sqlite3 *db, const char *zName, int nName,
                       const char *zFunc, IdemLedger **pp, char **pzErr);
/*
** Refuse a function that writes (zFunc) on a connection that cannot write
** ledger p: its database opened read-only (sqlite3_db_readonly) or PRAGMA
** query_only on. SQLITE_OK, or SQLITE_READONLY with *pzErr naming the
** likely causes. Called before anything of the ledger is read.
*/
int ledger_conn_writable(IdemLedger *p, const char *zFunc, char **pzErr);
/* idem_ledger_find_by_id over registry pConn of db. */
/* The calls of registry pConn (idem_own_write reads its flag there). */
LedgerCalls *ledger_conn_calls(IdemConn *pConn);
IdemLedger *ledger_conn_find_by_id(IdemConn *pConn, sqlite3 *db, const char *zName, const char *zId,
                                   int *pRc);

#endif /* IDEM_LEDGER_INTERNAL */

#endif /* SQLITE3EXT_H */

#endif /* IDEM_INTERNAL_H */

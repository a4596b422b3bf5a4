/*
** claim_profile.c: the program behind docs/benchmarks.md, "Where a claim's time goes".
** It runs N operations of one kind on a fresh file database (WAL,
** synchronous=FULL, or NORMAL with "normal") in one transaction, or in
** autocommit with "auto":
**
**   bare, careful   plain INSERTs: UNIQUE(tenant,key) only; plus the four
**                   grammar CHECKs (rtrim spelling: carefulglob for GLOB)
**   notrig          the same row (a derived-style key) into a copy of
**                   <ledger>_rows without its triggers or its index of
**                   open rows
**   openidx         the copy with the index of open rows
**   ledger          SELECT idem_claim(...) of fresh keys
**   replay, keysel  idem_claim of one settled key; idem_key + a SELECT
**   settle, bareset a claim of a fresh key then its settle, two statements
**                   (run with "auto": each its own commit); a bare INSERT
**                   then an UPDATE of its row to succeeded
**
** (<ledger>_rows itself, and a copy with its insert trigger, take no
** plain-SQL INSERT: format 4's triggers refuse every write but the
** extension's own.)
**
**   cc -O2 -g -o claim_profile bench/claim_profile.c -lsqlite3
**   valgrind --tool=callgrind ./claim_profile ledger 12000 build/idempotency.so DIR
**
** Instructions per operation: a 12,000 run minus a 2,000 run, over 10,000.
** DIR (default ".") holds the scratch database profile.db. A statement
** that fails stops the run with its message (status 1).
*/
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GRAMMAR(c)                                                        \
  "typeof(" c ")='text' AND length(" c ") BETWEEN 1 AND 128 AND rtrim(" c \
  ",'0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_-')=''"
#define GLOBG(c)                                                                               \
  "typeof(" c ")='text' AND length(" c ") BETWEEN 1 AND 128 AND instr(" c ",char(0))=0 AND " c \
  " NOT GLOB '*[^A-Za-z0-9_-]*'"

int main(int argc, char **argv) {
  const char *mode, *ext, *dir = ".";
  int n, i, autoc = 0, normal = 0;
  sqlite3 *db;
  sqlite3_stmt *p, *pU = 0;
  char *err = 0;
  char zPath[600];
  if (argc < 4) {
    fprintf(stderr, "usage: claim_profile MODE N EXTENSION [DIR] [auto]\n");
    return 2;
  }
  mode = argv[1];
  n = atoi(argv[2]);
  ext = argv[3];
  for (i = 4; i < argc; i++) {
    if (strcmp(argv[i], "auto") == 0) autoc = 1;
    else if (strcmp(argv[i], "normal") == 0) normal = 1;
    else dir = argv[i];
  }
  snprintf(zPath, sizeof zPath, "%s/profile.db", dir);
  remove(zPath);
  snprintf(zPath, sizeof zPath, "%s/profile.db-wal", dir);
  remove(zPath);
  snprintf(zPath, sizeof zPath, "%s/profile.db-shm", dir);
  remove(zPath);
  snprintf(zPath, sizeof zPath, "%s/profile.db", dir);
  sqlite3_open(zPath, &db);
  sqlite3_exec(db,
               normal ? "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                      : "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;",
               0, 0, 0);
  sqlite3_enable_load_extension(db, 1);
  if (sqlite3_load_extension(db, ext, 0, &err)) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  sqlite3_exec(db,
    "CREATE VIRTUAL TABLE L USING idempotency;"
    "CREATE TABLE careful(tenant NOT NULL CHECK(" GRAMMAR("tenant") "), key NOT NULL CHECK(" GRAMMAR("key") "),"
    " conversation NOT NULL CHECK(" GRAMMAR("conversation") "), tool NOT NULL CHECK(" GRAMMAR("tool") "), args NOT NULL, UNIQUE(tenant,key));"
    "CREATE TABLE carefulglob(tenant NOT NULL CHECK(" GLOBG("tenant") "), key NOT NULL CHECK(" GLOBG("key") "),"
    " conversation NOT NULL CHECK(" GLOBG("conversation") "), tool NOT NULL CHECK(" GLOBG("tool") "), args NOT NULL, UNIQUE(tenant,key));"
    "CREATE TABLE bare(tenant, key, conversation, tool, args, UNIQUE(tenant,key));", 0, 0, 0);
  {
    /* a copy of the rows table's DDL without its triggers, then (openidx)
    ** its index of open rows, renamed onto the copy */
    sqlite3_stmt *q;
    int nPart = strcmp(mode, "openidx") == 0 ? 2 : 1;
    sqlite3_prepare_v2(db,
                       "SELECT replace(replace(sql, '\"L_rows\"', 'notrig'),"
                       " 'CREATE INDEX \"', 'CREATE INDEX \"notrig_') FROM sqlite_schema"
                       " WHERE name='L_rows' OR (?1 >= 2 AND type='index' AND tbl_name='L_rows'"
                       " AND sql IS NOT NULL) ORDER BY type='index'",
                       -1, &q, 0);
    sqlite3_bind_int(q, 1, nPart);
    while (sqlite3_step(q) == SQLITE_ROW) {
      if (sqlite3_exec(db, (const char *)sqlite3_column_text(q, 0), 0, 0, &err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
      }
    }
    sqlite3_finalize(q);
  }
  if (strcmp(mode, "notrig") == 0 || strcmp(mode, "openidx") == 0) {
    char *z = sqlite3_mprintf(
        "INSERT INTO "
        "%s(tenant,\"key\",conversation,tool,args,effect,status,attempt,token,created_at,updated_"
        "at,lease_until) "
        "VALUES('tenant-a',?2,'conv-1','send_email',?1,'external','claimed',1,random(),1,1,1)",
        "notrig");
    sqlite3_prepare_v2(db, z, -1, &p, 0);
    sqlite3_free(z);
  } else if (strcmp(mode, "replay") == 0) {
    sqlite3_exec(
        db,
        "SELECT idem_settle('L', "
        "json_extract(idem_claim('L','tenant-a','conv-1','send_email','{\"to\":\"u@example.com\","
        "\"n\":1}'),'$.token'),'succeeded','{\"id\":\"msg-123\",\"status\":\"sent\"}')",
        0, 0, 0);
    sqlite3_prepare_v2(db,
                       "SELECT "
                       "idem_claim('L','tenant-a','conv-1','send_email','{\"to\":\"u@example.com\","
                       "\"n\":1}') WHERE ?1 IS NOT NULL",
                       -1, &p, 0);
  } else if (strcmp(mode, "keysel") == 0) {
    sqlite3_exec(db,
                 "INSERT INTO bare VALUES('tenant-a', "
                 "idem_key('tenant-a','conv-1','send_email','{\"to\":\"u@example.com\",\"n\":1}'), "
                 "'conv-1','send_email','{}')",
                 0, 0, 0);
    sqlite3_prepare_v2(db,
                       "SELECT args FROM bare WHERE tenant='tenant-a' AND "
                       "key=idem_key('tenant-a','conv-1','send_email','{\"to\":\"u@example.com\","
                       "\"n\":1}') AND ?1 IS NOT NULL",
                       -1, &p, 0);
  } else if (strcmp(mode, "settle") == 0) {
    sqlite3_prepare_v2(db,
                       "SELECT json_extract(idem_claim('L','tenant-a','conv-1','send_email',?1),"
                       "'$.token')",
                       -1, &p, 0);
    sqlite3_prepare_v2(db, "SELECT idem_settle('L',?1,'succeeded','{\"ok\":true}')", -1, &pU, 0);
  } else if (strcmp(mode, "bareset") == 0) {
    sqlite3_prepare_v2(db, "INSERT INTO bare VALUES('tenant-a', ?2, 'conv-1','send_email',?1)", -1,
                       &p, 0);
    sqlite3_prepare_v2(
        db, "UPDATE bare SET args='{\"ok\":true}' WHERE tenant='tenant-a' AND key=?1", -1, &pU, 0);
  } else if (strcmp(mode, "ledger") == 0)
    sqlite3_prepare_v2(db, "SELECT idem_claim('L','tenant-a','conv-1','send_email',?1)", -1, &p, 0);
  else if (strcmp(mode, "careful") == 0)
    sqlite3_prepare_v2(db, "INSERT INTO careful VALUES('tenant-a', ?2, 'conv-1','send_email',?1)",
                       -1, &p, 0);
  else if (strcmp(mode, "carefulglob") == 0)
    sqlite3_prepare_v2(
        db, "INSERT INTO carefulglob VALUES('tenant-a', ?2, 'conv-1','send_email',?1)", -1, &p, 0);
  else
    sqlite3_prepare_v2(db, "INSERT INTO bare VALUES('tenant-a', ?2, 'conv-1','send_email',?1)", -1,
                       &p, 0);
  if (!autoc) sqlite3_exec(db, "BEGIN", 0, 0, 0);
  for (i = 0; i < n; i++) {
    char a[64];
    snprintf(a, sizeof a, "{\"to\":\"u%d@example.com\",\"n\":%d}", i, i);
    sqlite3_bind_text(p, 1, a, -1, SQLITE_TRANSIENT);
    char k[40];
    k[0] = 0;
    if (strcmp(mode, "bare") == 0 || strcmp(mode, "careful") == 0 ||
        strcmp(mode, "carefulglob") == 0 || strcmp(mode, "notrig") == 0 ||
        strcmp(mode, "openidx") == 0 || strcmp(mode, "bareset") == 0) {
      unsigned long long x = 0x9e3779b97f4a7c15ULL * (unsigned long long)(i + 1);
      snprintf(k, sizeof k, "idem1-%016llx%016llx", x, x ^ 0xabcdef1234567ULL);
      sqlite3_bind_text(p, 2, k, -1, SQLITE_TRANSIENT);
    }
    {
      int rc = sqlite3_step(p);
      if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "%s\n", sqlite3_errmsg(db));
        return 1;
      }
      if (pU) {
        /* the second statement: the claim's token, or the bare row's key */
        if (k[0] == 0) {
          const char *zTok = (const char *)sqlite3_column_text(p, 0);
          if (zTok == 0) {
            fprintf(stderr, "the claim was not admitted\n");
            return 1;
          }
          snprintf(k, sizeof k, "%s", zTok);
        }
        sqlite3_bind_text(pU, 1, k, -1, SQLITE_TRANSIENT);
        sqlite3_reset(p);
        rc = sqlite3_step(pU);
        if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
          fprintf(stderr, "%s\n", sqlite3_errmsg(db));
          return 1;
        }
        sqlite3_reset(pU);
      }
    }
    sqlite3_reset(p);
  }
  if (!autoc) sqlite3_exec(db, "COMMIT", 0, 0, 0);
  sqlite3_finalize(p);
  sqlite3_finalize(pU);
  sqlite3_close(db);
  return 0;
}

/*
** ledger_targets.c: what a write touches (docs/ledger.md, "Targets").
**
**   idem_claim(ledger, tenant, conversation, tool, args, effect, operation_id,
**              '{"targets": ["mailto:bob@example.com/invoice-42"]}')
**
** The key answers "is this the same call"; targets answer "does this write
** touch what an earlier one touched". A claim may name up to
** IDEM_TARGETS_MAX targets, strings its tool's author derives from the
** arguments that identify the effect. Before a new key (or a released
** one) is admitted, each is looked up among the same tenant's other calls
** (<name>_targets, indexed by tenant and target): one held by a call that
** is claimed (live or expired) or unknown, whatever its age, or that
** succeeded within the target window, makes the decision "conflict"
** (ledger_state.c builds it). Failed and released calls, and older ones,
** hold nothing. The application (never the model's arguments) may allow
** a deliberate second write: "allowed_by" names who allowed it, and the
** targets it overrode record that, when, and which call they overrode.
**
** This file parses the options, finds a holder, lists the argument names
** whose values differ, and records an admitted claim's targets; the
** statements are ledger_rows.c's (the one-writer bracket).
*/
#include <sqlite3ext.h>
SQLITE_EXTENSION_INIT3

#define IDEM_LEDGER_INTERNAL
#include "idem_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* One member (or element) of a canonical object (or array): its name's
** span (with the quotes; 0 bytes for an element) and its value's. */
typedef struct Span Span;
struct Span {
  const char *zName, *zValue;
  size_t nName, nValue;
};

/*
** The members of canonical object z[0..n) (bObject) or the elements of
** canonical array z[0..n), into *paSpan (sqlite3_malloc, *pn of them).
** Returns SQLITE_OK, SQLITE_NOMEM, or SQLITE_MISMATCH when z is not one.
*/
static int spans(const char *z, size_t n, int bObject, Span **paSpan, int *pn) {
  Span *a = 0;
  int nA = 0, nAlloc = 0;
  size_t i = 1;
  *paSpan = 0;
  *pn = 0;
  if (n < 2 || z[0] != (bObject ? '{' : '[') || z[n - 1] != (bObject ? '}' : ']')) {
    return SQLITE_MISMATCH;
  }
  while (i < n - 1) {
    Span s;
    memset(&s, 0, sizeof(s));
    if (bObject) {
      if (z[i] != '"') break;
      s.zName = z + i;
      s.nName = idem_jcs_value_end(z, n, i) - i;
      i += s.nName;
      if (i >= n - 1 || z[i] != ':') break;
      i++;
    }
    s.zValue = z + i;
    s.nValue = idem_jcs_value_end(z, n - 1, i) - i;
    if (s.nValue == 0) break;
    i += s.nValue;
    if (nA == nAlloc) {
      Span *aNew;
      nAlloc = nAlloc ? nAlloc * 2 : 8;
      aNew = sqlite3_realloc64(a, sizeof(Span) * (sqlite3_uint64)nAlloc);
      if (aNew == 0) {
        sqlite3_free(a);
        return SQLITE_NOMEM;
      }
      a = aNew;
    }
    a[nA++] = s;
    if (i < n - 1 && z[i] == ',') i++;
  }
  if (i != n - 1) {
    sqlite3_free(a);
    return SQLITE_MISMATCH;
  }
  *paSpan = a;
  *pn = nA;
  return SQLITE_OK;
}

/*
** Canonical JSON string literal z[0..n) (with its quotes) as UTF-8 into
** zOut (room for n bytes), its length into *pnOut. Canonical form escapes
** only " \ and the control characters. Returns 0, or -1 when the text
** holds U+0000 (a NUL that no C string keeps).
*/
static int unescape(const char *z, size_t n, char *zOut, size_t *pnOut) {
  size_t i, o = 0;
  for (i = 1; i + 1 < n; i++) {
    char c = z[i];
    if (c != '\\') {
      zOut[o++] = c;
      continue;
    }
    c = z[++i];
    switch (c) {
      case 'b': zOut[o++] = '\b'; break;
      case 'f': zOut[o++] = '\f'; break;
      case 'n': zOut[o++] = '\n'; break;
      case 'r': zOut[o++] = '\r'; break;
      case 't': zOut[o++] = '\t'; break;
      case 'u': {
        /* \u00XX: a control character */
        unsigned v = 0;
        int k;
        for (k = 1; k <= 4 && i + k < n; k++) {
          char h = z[i + k];
          v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        i += 4;
        if (v == 0) return -1;
        zOut[o++] = (char)v;
        break;
      }
      default: zOut[o++] = c; break; /* " \ / */
    }
  }
  zOut[o] = 0;
  *pnOut = o;
  return 0;
}

/* *pzErr = "<zFunc>: <message>" (SQLITE_CONSTRAINT, or SQLITE_NOMEM). */
static int options_error(char **pzErr, const char *zFunc, const char *zFmt, ...) {
  va_list ap;
  char *zMsg;
  va_start(ap, zFmt);
  zMsg = sqlite3_vmprintf(zFmt, ap);
  va_end(ap);
  *pzErr = zMsg ? sqlite3_mprintf("%s: %s", zFunc, zMsg) : 0;
  sqlite3_free(zMsg);
  return *pzErr ? SQLITE_CONSTRAINT : SQLITE_NOMEM;
}

/* A value as an error shows it: its canonical text, the first 80 bytes of
** a longer one followed by "..." (at a character's start). */
#define SHOWN(z, n) (int)((n) <= 80 ? (n) : shown_len(z)), (z), ((n) <= 80 ? "" : "...")
static size_t shown_len(const char *z) {
  size_t k = 80;
  while (k > 0 && ((unsigned char)z[k] & 0xC0) == 0x80) k--;
  return k;
}

/*
** One string of the options (a target, or allowed_by), canonical literal
** z[0..n), into zOut: 1 to IDEM_TARGET_MAX_BYTES bytes of UTF-8, no NUL.
*/
static int option_string(const char *zFunc, const char *zWhat, const char *z, size_t n, char *zOut,
                         char **pzErr) {
  size_t nOut = 0;
  if (z[0] != '"') {
    return options_error(pzErr, zFunc, "%s must be a string, got %.*s%s", zWhat, SHOWN(z, n));
  }
  if (unescape(z, n, zOut, &nOut)) {
    return options_error(pzErr, zFunc, "%s %.*s%s holds U+0000; a target is text without NUL",
                         zWhat, SHOWN(z, n));
  }
  if (nOut == 0 || nOut > IDEM_TARGET_MAX_BYTES) {
    return options_error(pzErr, zFunc, "%s %.*s%s is %d bytes; it must be 1 to %d bytes of UTF-8",
                         zWhat, SHOWN(z, n), (int)nOut, IDEM_TARGET_MAX_BYTES);
  }
  return SQLITE_OK;
}

int ledger_claim_options(IdemLedger *p, const char *zFunc, sqlite3_value *v, LedgerReq *q,
                         char **pzErr) {
  static const char zNames[] = "the options are allowed_by, target_window_seconds and targets";
  IdemBuf b;
  Span *aM = 0, *aT = 0;
  int nM = 0, nT = 0, rc, i, k, bTargets = 0, iWindow = -1, iAllowed = -1;
  char *zOut;
  const char *z;

  q->targetWindowMs = p->aOpt[IDEM_OPT_TARGET_WINDOW] * 1000;
  if (v == 0 || sqlite3_value_type(v) == SQLITE_NULL) return SQLITE_OK;
  memset(&b, 0, sizeof(b));
  b.pMem = &idem_sqlite_mem;
  rc = idem_canonical_value(zFunc, "options", v, &b, 0, 0, 0, pzErr);
  if (rc) goto done;
  z = b.z;
  rc = spans(z, b.n, 1, &aM, &nM);
  if (rc == SQLITE_MISMATCH) {
    rc = options_error(pzErr, zFunc,
                       "options must be a JSON object such as {\"targets\": [\"...\"]}, got %.*s%s",
                       SHOWN(z, b.n));
  }
  if (rc) goto done;
  /* room for every string unescaped: never longer than the text */
  q->pTargetBuf = zOut = sqlite3_malloc64(b.n + 1);
  if (zOut == 0) {
    rc = SQLITE_NOMEM;
    goto done;
  }
  for (i = 0; i < nM; i++) {
    const char *zName = aM[i].zName, *zV = aM[i].zValue;
    size_t nName = aM[i].nName, nV = aM[i].nValue;
    if (nName == 9 && memcmp(zName, "\"targets\"", 9) == 0) {
      bTargets = 1;
      rc = spans(zV, nV, 0, &aT, &nT);
      if (rc == SQLITE_MISMATCH) {
        rc = options_error(pzErr, zFunc, "targets must be an array of strings, got %.*s%s",
                           SHOWN(zV, nV));
      }
      if (rc) goto done;
      if (nT > IDEM_TARGETS_MAX) {
        rc = options_error(pzErr, zFunc, "targets names %d targets; a claim may name at most %d",
                           nT, IDEM_TARGETS_MAX);
        goto done;
      }
      for (k = 0; k < nT; k++) {
        size_t nOut;
        int j;
        rc = option_string(zFunc, "a target", aT[k].zValue, aT[k].nValue, zOut, pzErr);
        if (rc) goto done;
        nOut = strlen(zOut);
        for (j = 0; j < k; j++) {
          if (strcmp(q->azTarget[j], zOut) == 0) {
            rc = options_error(pzErr, zFunc, "targets names %.*s%s twice; name each target once",
                               SHOWN(aT[k].zValue, aT[k].nValue));
            goto done;
          }
        }
        q->azTarget[k] = zOut;
        zOut += nOut + 1;
      }
      q->nTarget = nT;
    } else if (nName == 23 && memcmp(zName, "\"target_window_seconds\"", 23) == 0) {
      iWindow = i;
    } else if (nName == 12 && memcmp(zName, "\"allowed_by\"", 12) == 0) {
      iAllowed = i;
    } else {
      rc = options_error(pzErr, zFunc, "unknown option %.*s%s; %s", SHOWN(zName, nName), zNames);
      goto done;
    }
  }
  if ((iWindow >= 0 || iAllowed >= 0) && !bTargets) {
    rc = options_error(pzErr, zFunc, "%s applies to targets; name the claim's targets too",
                       iWindow >= 0 ? "target_window_seconds" : "allowed_by");
    goto done;
  }
  if (iWindow >= 0) {
    /* a whole number of seconds, at most the ledger's window */
    const char *zV = aM[iWindow].zValue;
    size_t nV = aM[iWindow].nValue, j;
    sqlite3_int64 w = 0, wMax = p->aOpt[IDEM_OPT_TARGET_WINDOW];
    int bDigits = nV > 0 && nV <= 12;
    for (j = 0; bDigits && j < nV; j++) {
      if (zV[j] < '0' || zV[j] > '9') bDigits = 0;
      else w = w * 10 + (zV[j] - '0');
    }
    if (!bDigits || w > wMax) {
      rc = options_error(pzErr, zFunc,
                         "target_window_seconds must be a whole number of seconds from 0 to the "
                         "ledger's target_window_seconds (%lld), got %.*s%s",
                         wMax, SHOWN(zV, nV));
      goto done;
    }
    q->targetWindowMs = w * 1000;
  }
  if (iAllowed >= 0) {
    rc = option_string(zFunc, "allowed_by", aM[iAllowed].zValue, aM[iAllowed].nValue, zOut, pzErr);
    if (rc) goto done;
    q->zAllowedBy = zOut;
  }
  if (q->nTarget > 0 && p->iFormat < 5) {
    rc = options_error(pzErr, zFunc,
                       "ledger %s has format %d, which keeps no targets; upgrade it once with "
                       "SELECT idem_upgrade('%q') to claim with targets",
                       p->zName, p->iFormat, p->zName);
  }

done:
  idem_buf_free(&b);
  sqlite3_free(aM);
  sqlite3_free(aT);
  return rc;
}

int ledger_targets_holder(IdemLedger *p, const LedgerReq *q, sqlite3_int64 selfId,
                          sqlite3_int64 now, LedgerRow *r, int *piTarget, char **azOver) {
  sqlite3_int64 cutoff = now - q->targetWindowMs;
  int i, rc = SQLITE_OK, bFound = 0;
  *piTarget = -1;
  for (i = 0; rc == SQLITE_OK && i < q->nTarget; i++) {
    rc = storage_target_holder(p, q->zTenant, q->azTarget[i], selfId, cutoff, r, &bFound);
    if (rc || !bFound) continue;
    if (q->zAllowedBy == 0) {
      *piTarget = i; /* r is the holder; the caller frees it */
      return SQLITE_OK;
    }
    azOver[i] = sqlite3_mprintf("%s", r->zKey);
    ledger_row_free(r);
    if (azOver[i] == 0) rc = SQLITE_NOMEM;
  }
  return rc;
}

int ledger_targets_record(IdemLedger *p, const LedgerReq *q, sqlite3_int64 id, sqlite3_int64 now,
                          char *const *azOver, int bAgain) {
  int i, rc = SQLITE_OK;
  if (bAgain && p->iFormat >= 5) rc = storage_targets_clear(p, id);
  for (i = 0; rc == SQLITE_OK && i < q->nTarget; i++) {
    rc = storage_target_add(p, id, q->zTenant, q->azTarget[i], q->zAllowedBy, now, azOver[i]);
  }
  return rc;
}

void ledger_targets_free(char **azOver) {
  int i;
  for (i = 0; i < IDEM_TARGETS_MAX; i++) {
    sqlite3_free(azOver[i]);
    azOver[i] = 0;
  }
}

/* Order spans by name bytes (two canonical names are equal exactly when
** their bytes are). */
static int name_cmp(const Span *x, const Span *y) {
  size_t n = x->nName < y->nName ? x->nName : y->nName;
  int c = memcmp(x->zName, y->zName, n);
  return c ? c : (x->nName < y->nName ? -1 : x->nName > y->nName);
}
static int span_cmp(const void *a, const void *b) { return name_cmp(a, b); }

/* Append name s (a canonical JSON string) to the array open in j. */
static int differ_add(IdemJson *j, const Span *s) {
  char *z = sqlite3_mprintf("%.*s", (int)s->nName, s->zName);
  if (z == 0) return SQLITE_NOMEM;
  idem_json_literal(j, 0, z);
  sqlite3_free(z);
  return SQLITE_OK;
}

int ledger_args_differ(IdemJson *j, const char *zA, size_t nA, const char *zB, size_t nB) {
  Span *aA = 0, *aB = 0;
  int nSA = 0, nSB = 0, rc, ia = 0, ib = 0, bBoth = 0;
  rc = spans(zA, nA, 1, &aA, &nSA);
  if (rc == SQLITE_OK) rc = spans(zB, nB, 1, &aB, &nSB);
  if (rc == SQLITE_OK) bBoth = 1;
  if (rc == SQLITE_MISMATCH) rc = SQLITE_OK; /* not two objects: no names to list */
  if (bBoth) {
    if (nSA > 1) qsort(aA, (size_t)nSA, sizeof(Span), span_cmp);
    if (nSB > 1) qsort(aB, (size_t)nSB, sizeof(Span), span_cmp);
    while (rc == SQLITE_OK && (ia < nSA || ib < nSB)) {
      int c = ia == nSA ? 1 : ib == nSB ? -1 : name_cmp(&aA[ia], &aB[ib]);
      if (c < 0) {
        rc = differ_add(j, &aA[ia++]);
      } else if (c > 0) {
        rc = differ_add(j, &aB[ib++]);
      } else {
        if (aA[ia].nValue != aB[ib].nValue || memcmp(aA[ia].zValue, aB[ib].zValue, aA[ia].nValue)) {
          rc = differ_add(j, &aA[ia]);
        }
        ia++;
        ib++;
      }
    }
  }
  sqlite3_free(aA);
  sqlite3_free(aB);
  return rc;
}

/*
** check.h: the tiny harness shared by the C test programs of the pure
** helpers (canonical.c, grammar.c).
**
** Each check prints one line, "PASS <name>" or "FAIL <name>: <why>", the
** format tests/run.sh counts. A program exits 1 when any check failed.
** Header-only on purpose: every test program is one translation unit
** plus the pure sources, so no test object files to keep in sync.
*/
#ifndef IDEM_TEST_CHECK_H
#define IDEM_TEST_CHECK_H

#include "idem_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_nfail = 0;
static int check_npass = 0;

static void check_fail(const char *zName, const char *zFmt, ...)
    __attribute__((format(printf, 2, 3)));
static void check_fail(const char *zName, const char *zFmt, ...) {
  va_list ap;
  printf("FAIL %s: ", zName);
  va_start(ap, zFmt);
  vprintf(zFmt, ap);
  va_end(ap);
  printf("\n");
  fflush(stdout);
  check_nfail++;
}

static void check_pass(const char *zName) {
  printf("PASS %s\n", zName);
  fflush(stdout);
  check_npass++;
}

/* Pass when ok, else fail with the formatted reason. */
static void check(int ok, const char *zName, const char *zFmt, ...)
    __attribute__((format(printf, 3, 4), unused));
static void check(int ok, const char *zName, const char *zFmt, ...) {
  va_list ap;
  if (ok) {
    check_pass(zName);
    return;
  }
  printf("FAIL %s: ", zName);
  va_start(ap, zFmt);
  vprintf(zFmt, ap);
  va_end(ap);
  printf("\n");
  fflush(stdout);
  check_nfail++;
}

/* Write z[0..n) as a C-escaped string into zOut (nOut bytes), clipped, for
** messages that must show NUL and control bytes. Returns zOut. */
static const char *check_show(const char *z, size_t n, char *zOut, size_t nOut)
    __attribute__((unused));
static const char *check_show(const char *z, size_t n, char *zOut, size_t nOut) {
  size_t i, o = 0;
  for (i = 0; i < n && o + 8 < nOut; i++) {
    unsigned char c = (unsigned char)z[i];
    if (c == '\\') {
      zOut[o++] = '\\';
      zOut[o++] = '\\';
    } else if (c >= 0x20 && c < 0x7f) {
      zOut[o++] = (char)c;
    } else {
      o += (size_t)snprintf(zOut + o, nOut - o, "\\x%02x", c);
    }
  }
  if (i < n) {
    memcpy(zOut + o, "...", 3);
    o += 3;
  }
  zOut[o] = 0;
  return zOut;
}

/* Canonicalise z[0..n) with libc memory. Returns the IDEM_JCS_* code; on
** success *pzOut is a malloc'd NUL-terminated copy of the output (length
** in *pnOut), which the caller frees. */
static int check_canon(const char *z, size_t n, char **pzOut, size_t *pnOut, IdemJcsError *pErr)
    __attribute__((unused));
static int check_canon(const char *z, size_t n, char **pzOut, size_t *pnOut, IdemJcsError *pErr) {
  IdemBuf b;
  int rc;
  memset(&b, 0, sizeof(b));
  b.pMem = &idem_libc_mem;
  memset(pErr, 0, sizeof(*pErr));
  *pzOut = 0;
  *pnOut = 0;
  rc = idem_jcs_canonicalize(z, n, &idem_libc_mem, idem_buf_sink, &b, pErr);
  if (rc == IDEM_JCS_OK) rc = idem_buf_sink(&b, "", 1); /* NUL, not counted */
  if (rc == IDEM_JCS_OK) {
    *pzOut = b.z;
    *pnOut = b.n - 1;
    return rc;
  }
  idem_buf_free(&b);
  return rc;
}

static int check_done(void) {
  fflush(stdout);
  return check_nfail ? 1 : 0;
}

#endif /* IDEM_TEST_CHECK_H */

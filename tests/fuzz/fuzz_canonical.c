/*
** fuzz_canonical.c: libFuzzer target for the canonicaliser (canonical.c).
**
** For any input: no crash, no leak, no undefined behaviour (ASan/UBSan);
** a refusal carries a message and an offset inside the input; an accepted
** input gives valid UTF-8 with no raw control byte, and that output
** canonicalises to itself (idempotence). The one documented exception: a
** double in [2^53, 1e21) is printed by JCS as an integer literal beyond
** 2^53-1, which the input rules refuse; the second pass must then refuse
** it for exactly that reason. idem_digest must agree with the
** canonicaliser on acceptance. The stored form (results, errors) accepts
** every input the canonicaliser accepts, agrees with the stored check, and
** its output is valid UTF-8 without a raw control byte, is its own stored
** form, and passes the stored check.
**
** Build: clang -fsanitize=fuzzer,address,undefined (tests/suites/13-fuzz.sh).
*/
#include "idem_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(c)                                                                \
  do {                                                                               \
    if (!(c)) {                                                                      \
      fprintf(stderr, "fuzz_canonical: check failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                                       \
    }                                                                                \
  } while (0)

/* Strict UTF-8: no overlong form, no surrogate, nothing above U+10FFFF. */
static int valid_utf8(const unsigned char *z, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned char c = z[i];
    size_t len, k;
    uint32_t cp;
    if (c < 0x80) {
      i++;
      continue;
    }
    if (c >= 0xC2 && c <= 0xDF) len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, cp = c & 0x07;
    else return 0;
    if (i + len > n) return 0;
    for (k = 1; k < len; k++) {
      if ((z[i + k] & 0xC0) != 0x80) return 0;
      cp = (cp << 6) | (z[i + k] & 0x3F);
    }
    if (len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) return 0;
    if (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) return 0;
    i += len;
  }
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *aData, size_t nData) {
  IdemBuf b1, b2;
  IdemJcsError e1, e2;
  char zHex[IDEM_DIGEST_HEX + 1];
  int rc1, rc2, rcD;
  size_t i;

  memset(&b1, 0, sizeof(b1));
  memset(&b2, 0, sizeof(b2));
  b1.pMem = b2.pMem = &idem_libc_mem;
  memset(&e1, 0, sizeof(e1));
  rc1 = idem_jcs_canonicalize((const char *)aData, nData, &idem_libc_mem, idem_buf_sink, &b1, &e1);
  FUZZ_CHECK(rc1 == IDEM_JCS_OK || rc1 == IDEM_JCS_INVALID);
  if (rc1 == IDEM_JCS_INVALID) {
    FUZZ_CHECK(e1.msg[0] >= 'a' && e1.msg[0] <= 'z');
    FUZZ_CHECK(memchr(e1.msg, 0, sizeof(e1.msg)) != 0);
    FUZZ_CHECK(e1.offset <= nData);
  } else {
    FUZZ_CHECK(b1.n > 0);
    FUZZ_CHECK(valid_utf8((const unsigned char *)b1.z, b1.n));
    for (i = 0; i < b1.n; i++) FUZZ_CHECK((unsigned char)b1.z[i] >= 0x20);
    memset(&e2, 0, sizeof(e2));
    rc2 = idem_jcs_canonicalize(b1.z, b1.n, &idem_libc_mem, idem_buf_sink, &b2, &e2);
    if (rc2 == IDEM_JCS_OK) {
      FUZZ_CHECK(b2.n == b1.n && memcmp(b1.z, b2.z, b1.n) == 0);
    } else {
      /* the documented exception, and only it */
      FUZZ_CHECK(rc2 == IDEM_JCS_INVALID);
      FUZZ_CHECK(strstr(e2.msg, "is beyond 2^53-1") != 0);
    }
  }
  {
    IdemBuf s1, s2;
    int rcS, rcS2;
    memset(&s1, 0, sizeof(s1));
    memset(&s2, 0, sizeof(s2));
    s1.pMem = s2.pMem = &idem_libc_mem;
    memset(&e2, 0, sizeof(e2));
    rcS = idem_jcs_stored_form((const char *)aData, nData, &idem_libc_mem, idem_buf_sink, &s1, &e2);
    FUZZ_CHECK(rcS == IDEM_JCS_OK || rcS == IDEM_JCS_INVALID);
    FUZZ_CHECK(rc1 != IDEM_JCS_OK || rcS == IDEM_JCS_OK);
    FUZZ_CHECK(idem_jcs_check_stored((const char *)aData, nData, &idem_libc_mem, &e2) == rcS);
    if (rcS == IDEM_JCS_OK) {
      FUZZ_CHECK(s1.n > 0);
      FUZZ_CHECK(valid_utf8((const unsigned char *)s1.z, s1.n));
      for (i = 0; i < s1.n; i++) FUZZ_CHECK((unsigned char)s1.z[i] >= 0x20);
      rcS2 = idem_jcs_stored_form(s1.z, s1.n, &idem_libc_mem, idem_buf_sink, &s2, &e2);
      FUZZ_CHECK(rcS2 == IDEM_JCS_OK && s2.n == s1.n && memcmp(s1.z, s2.z, s1.n) == 0);
      FUZZ_CHECK(idem_jcs_check_stored(s1.z, s1.n, &idem_libc_mem, &e2) == IDEM_JCS_OK);
    } else {
      FUZZ_CHECK(e2.msg[0] >= 'a' && e2.msg[0] <= 'z');
    }
    idem_buf_free(&s1);
    idem_buf_free(&s2);
  }
  rcD = idem_digest("t:c:x:", 6, (const char *)aData, nData, &idem_libc_mem, zHex, &e2);
  FUZZ_CHECK(rcD == rc1);
  if (rcD == IDEM_JCS_OK) FUZZ_CHECK(strlen(zHex) == IDEM_DIGEST_HEX);
  idem_buf_free(&b1);
  idem_buf_free(&b2);
  return 0;
}

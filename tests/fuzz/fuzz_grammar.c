/*
** fuzz_grammar.c: libFuzzer target for the key grammar (grammar.c).
**
** idem_grammar_check must agree with a plain reference reading of the
** rule (1 to 128 characters counted as UTF-8 lead bytes, length checked
** before bytes, every byte in A-Z a-z 0-9 _ -) on outcome and detail, and
** idem_hex must print two lowercase hex digits per byte.
**
** Build: clang -fsanitize=fuzzer,address,undefined (tests/suites/13-fuzz.sh).
*/
#include "idem_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_CHECK(c)                                                              \
  do {                                                                             \
    if (!(c)) {                                                                    \
      fprintf(stderr, "fuzz_grammar: check failed: %s (line %d)\n", #c, __LINE__); \
      abort();                                                                     \
    }                                                                              \
  } while (0)

static int ref_check(const unsigned char *z, size_t n, size_t *pDetail) {
  size_t i, nChar = 0;
  if (n == 0) return IDEM_KEY_EMPTY;
  for (i = 0; i < n; i++) nChar += (z[i] & 0xC0) != 0x80;
  if (nChar > IDEM_KEY_MAX_CHARS) {
    *pDetail = nChar;
    return IDEM_KEY_TOO_LONG;
  }
  for (i = 0; i < n; i++) {
    unsigned char c = z[i];
    int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
             c == '_' || c == '-';
    if (!ok) {
      *pDetail = i;
      return IDEM_KEY_BAD_BYTE;
    }
  }
  return IDEM_KEY_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *aData, size_t nData) {
  size_t d1 = (size_t)-1, d2 = (size_t)-1, i;
  int r1 = idem_grammar_check(aData, nData, &d1);
  int r2 = ref_check(aData, nData, &d2);
  FUZZ_CHECK(r1 == r2);
  if (r1 == IDEM_KEY_TOO_LONG || r1 == IDEM_KEY_BAD_BYTE) FUZZ_CHECK(d1 == d2);
  if (r1 == IDEM_KEY_BAD_BYTE) FUZZ_CHECK(d1 < nData);
  if (r1 == IDEM_KEY_OK) FUZZ_CHECK(nData >= 1 && nData <= IDEM_KEY_MAX_CHARS);
  if (nData <= 64) {
    char zHex[129];
    static const char hexd[] = "0123456789abcdef";
    idem_hex(aData, nData, zHex);
    FUZZ_CHECK(strlen(zHex) == 2 * nData);
    for (i = 0; i < nData; i++) {
      FUZZ_CHECK(zHex[2 * i] == hexd[aData[i] >> 4] && zHex[2 * i + 1] == hexd[aData[i] & 15]);
    }
  }
  return 0;
}

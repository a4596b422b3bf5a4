/*
** test_grammar.c: unit tests of the key grammar, idem_hex and idem_digest
** (grammar.c) linked with canonical.c alone, without SQLite.
**
** Every case gives the outcome and its detail (length in characters, or
** the byte offset of the first bad byte). Prints one PASS/FAIL line per
** check.
*/
#include "check.h"

static const char *outcome_name(int rc) {
  switch (rc) {
    case IDEM_KEY_OK: return "ok";
    case IDEM_KEY_EMPTY: return "empty";
    case IDEM_KEY_TOO_LONG: return "too long";
    case IDEM_KEY_BAD_BYTE: return "bad byte";
    default: return "?";
  }
}

/* detail is checked only for TOO_LONG and BAD_BYTE. */
static void key_case(const char *zName, const char *z, size_t n, int want, size_t wantDetail) {
  size_t detail = (size_t)-1;
  char zShow[400];
  int rc = idem_grammar_check((const unsigned char *)z, n, &detail);
  if (rc != want) {
    check_fail(zName, "\"%s\": %s (detail %zu), want %s", check_show(z, n, zShow, sizeof(zShow)),
               outcome_name(rc), detail, outcome_name(want));
  } else if ((want == IDEM_KEY_TOO_LONG || want == IDEM_KEY_BAD_BYTE) && detail != wantDetail) {
    check_fail(zName, "\"%s\": %s with detail %zu, want %zu",
               check_show(z, n, zShow, sizeof(zShow)), outcome_name(rc), detail, wantDetail);
  } else {
    check_pass(zName);
  }
}

#define KEY(name, s, want, detail) key_case("grammar." name, s, sizeof(s) - 1, want, detail)

/* A key of n copies of the UTF-8 sequence zChar, then zTail. */
static void repeat_case(const char *zName, const char *zChar, int n, const char *zTail, int want,
                        size_t detail) {
  char z[1200];
  size_t m = 0, k = strlen(zChar);
  int i;
  for (i = 0; i < n; i++) {
    memcpy(z + m, zChar, k);
    m += k;
  }
  memcpy(z + m, zTail, strlen(zTail));
  m += strlen(zTail);
  key_case(zName, z, m, want, detail);
}

static void test_grammar(void) {
  KEY("ok.letters", "abcXYZ", IDEM_KEY_OK, 0);
  KEY("ok.all-classes", "Az09_-", IDEM_KEY_OK, 0);
  KEY("ok.one-char", "a", IDEM_KEY_OK, 0);
  KEY("ok.dash-only", "-", IDEM_KEY_OK, 0);
  KEY("ok.underscore-only", "_", IDEM_KEY_OK, 0);
  KEY("ok.digits", "0123456789", IDEM_KEY_OK, 0);
  KEY("ok.derived-key-shape", "idem1-0ed2ecef8a228ea2e98d5c926784a7f1", IDEM_KEY_OK, 0);
  KEY("empty", "", IDEM_KEY_EMPTY, 0);
  KEY("bad.nul-first", "\0", IDEM_KEY_BAD_BYTE, 0);
  KEY("bad.nul-inside", "ab\0cd", IDEM_KEY_BAD_BYTE, 2);
  KEY("bad.nul-last", "abc\0", IDEM_KEY_BAD_BYTE, 3);
  KEY("bad.tab", "a\tb", IDEM_KEY_BAD_BYTE, 1);
  KEY("bad.newline", "ab\n", IDEM_KEY_BAD_BYTE, 2);
  KEY("bad.space-leading", " abc", IDEM_KEY_BAD_BYTE, 0);
  KEY("bad.space-trailing", "abc ", IDEM_KEY_BAD_BYTE, 3);
  KEY("bad.space-inside", "a b", IDEM_KEY_BAD_BYTE, 1);
  KEY("bad.colon", "tenant:1", IDEM_KEY_BAD_BYTE, 6);
  KEY("bad.dot", "a.b", IDEM_KEY_BAD_BYTE, 1);
  KEY("bad.slash", "a/b", IDEM_KEY_BAD_BYTE, 1);
  KEY("bad.plus", "a+b", IDEM_KEY_BAD_BYTE, 1);
  KEY("bad.quote", "a'b", IDEM_KEY_BAD_BYTE, 1);
  KEY("bad.del", "ab\x7f", IDEM_KEY_BAD_BYTE, 2);
  KEY("bad.nbsp", "ab\xc2\xa0", IDEM_KEY_BAD_BYTE, 2);
  KEY("bad.nbsp-first", "\xc2\xa0x", IDEM_KEY_BAD_BYTE, 0);
  KEY("bad.ideographic-space", "a\xe3\x80\x80z", IDEM_KEY_BAD_BYTE, 1);
  KEY("bad.bom", "\xef\xbb\xbfkey", IDEM_KEY_BAD_BYTE, 0);
  KEY("bad.e-acute", "caf\xc3\xa9", IDEM_KEY_BAD_BYTE, 3);
  KEY("bad.fullwidth-a", "\xef\xbc\xa1", IDEM_KEY_BAD_BYTE, 0);
  KEY("bad.astral", "x\xf0\x9f\x98\x80", IDEM_KEY_BAD_BYTE, 1);
  KEY("bad.invalid-utf8", "ab\xff", IDEM_KEY_BAD_BYTE, 2);
  KEY("bad.stray-continuation", "\x80", IDEM_KEY_BAD_BYTE, 0);
  KEY("bad.high-bit-ascii-lookalike", "a\xc1", IDEM_KEY_BAD_BYTE, 1);

  repeat_case("grammar.length.128", "a", 128, "", IDEM_KEY_OK, 0);
  repeat_case("grammar.length.129", "a", 129, "", IDEM_KEY_TOO_LONG, 129);
  repeat_case("grammar.length.127-plus-dash", "Z", 127, "-", IDEM_KEY_OK, 0);
  repeat_case("grammar.length.1000", "9", 1000, "", IDEM_KEY_TOO_LONG, 1000);
  /* too long wins over a bad byte, whatever the value holds */
  repeat_case("grammar.length.129-with-space", "a", 128, " ", IDEM_KEY_TOO_LONG, 129);
  {
    char z[129];
    memset(z, 0, sizeof(z));
    key_case("grammar.length.129-nuls", z, sizeof(z), IDEM_KEY_TOO_LONG, 129);
    key_case("grammar.length.128-nuls", z, 128, IDEM_KEY_BAD_BYTE, 0);
  }
  /* length counts characters, not bytes */
  repeat_case("grammar.chars.128-two-byte", "\xc3\xa9", 128, "", IDEM_KEY_BAD_BYTE, 0);
  repeat_case("grammar.chars.129-two-byte", "\xc3\xa9", 129, "", IDEM_KEY_TOO_LONG, 129);
  repeat_case("grammar.chars.64-three-byte", "\xe3\x80\x80", 64, "", IDEM_KEY_BAD_BYTE, 0);
  repeat_case("grammar.chars.129-three-byte", "\xe3\x80\x80", 129, "", IDEM_KEY_TOO_LONG, 129);
  repeat_case("grammar.chars.129-four-byte", "\xf0\x9f\x98\x80", 129, "", IDEM_KEY_TOO_LONG, 129);
  repeat_case("grammar.chars.127-ascii-then-nbsp", "a", 127, "\xc2\xa0", IDEM_KEY_BAD_BYTE, 127);
  repeat_case("grammar.chars.128-ascii-then-nbsp", "a", 128, "\xc2\xa0", IDEM_KEY_TOO_LONG, 129);
  repeat_case("grammar.chars.126-ascii-then-astral", "b", 126, "\xf0\x9f\x98\x80",
              IDEM_KEY_BAD_BYTE, 126);
}

static void test_hex(void) {
  static const unsigned char a[] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xcd, 0xef, 0xff};
  char z[2 * sizeof(a) + 1];
  memset(z, 'x', sizeof(z));
  idem_hex(a, sizeof(a), z);
  check(strcmp(z, "00017f80abcdefff") == 0, "grammar.hex.lowercase", "got %s", z);
  memset(z, 'x', sizeof(z));
  idem_hex(a, 0, z);
  check(z[0] == 0, "grammar.hex.empty", "not NUL-terminated");
}

static void digest_case(const char *zName, const char *zPrefix, const char *zArgs,
                        const char *zWant) {
  char zHex[IDEM_DIGEST_HEX + 1];
  IdemJcsError e;
  int rc;
  memset(zHex, 'x', sizeof(zHex));
  rc = idem_digest(zPrefix, strlen(zPrefix), zArgs, strlen(zArgs), 0, zHex, &e);
  if (rc != IDEM_JCS_OK) {
    check_fail(zName, "rc=%d %s", rc, e.msg);
  } else {
    check(strcmp(zHex, zWant) == 0 && strlen(zHex) == IDEM_DIGEST_HEX, zName, "got %s, want %s",
          zHex, zWant);
  }
}

static void test_digest(void) {
  /* printf 't:c:tool:{"a":1,"b":2}' | xxhsum -H2 */
  static const char zVec[] = "0ed2ecef8a228ea2e98d5c926784a7f1";
  digest_case("grammar.digest.xxhsum-vector", "t:c:tool:", "{ \"b\":2, \"a\":1 }", zVec);
  digest_case("grammar.digest.canonical-spelling", "t:c:tool:", "{\"a\":1,\"b\":2}", zVec);
  digest_case("grammar.digest.escaped-spelling", "t:c:tool:", "\n{\"\\u0062\" : 2.0 , \"a\":1e0}\n",
              zVec);
  {
    /* the prefix is part of the hash: another tenant, another digest */
    char z1[IDEM_DIGEST_HEX + 1], z2[IDEM_DIGEST_HEX + 1];
    IdemJcsError e;
    int rc1 = idem_digest("t:c:tool:", 9, "{}", 2, 0, z1, &e);
    int rc2 = idem_digest("u:c:tool:", 9, "{}", 2, 0, z2, &e);
    check(rc1 == 0 && rc2 == 0 && strcmp(z1, z2) != 0, "grammar.digest.prefix-matters",
          "rc %d/%d, %s vs %s", rc1, rc2, z1, z2);
    rc1 = idem_digest("", 0, "{}", 2, 0, z1, &e);
    rc2 = idem_digest("{", 1, "}", 1, 0, z2, &e);
    check(rc1 == 0 && rc2 == IDEM_JCS_INVALID, "grammar.digest.empty-prefix", "rc %d/%d", rc1, rc2);
    /* printf '{}' | xxhsum -H2 */
    check(strcmp(z1, "dc7048f8f8747f561349cde127705c16") == 0, "grammar.digest.no-prefix-vector",
          "got %s", z1);
  }
  {
    /* an invalid document: its message comes back, no digest written */
    char zHex[IDEM_DIGEST_HEX + 1];
    IdemJcsError e;
    int rc;
    memset(zHex, 'x', sizeof(zHex));
    zHex[IDEM_DIGEST_HEX] = 0;
    memset(&e, 0, sizeof(e));
    rc = idem_digest("t:c:tool:", 9, "{\"a\":1,\"a\":2}", 13, 0, zHex, &e);
    check(rc == IDEM_JCS_INVALID &&
              strcmp(e.msg, "duplicate member name \"a\" in the object at byte 0") == 0 &&
              zHex[0] == 'x',
          "grammar.digest.invalid", "rc=%d msg=%s", rc, e.msg);
  }
}

int main(void) {
  test_grammar();
  test_hex();
  test_digest();
  return check_done();
}

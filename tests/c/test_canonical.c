/*
** test_canonical.c: unit tests of the RFC 8785 canonicaliser (canonical.c)
** linked alone, without SQLite.
**
** Covers every refusal with its exact message and byte offset, the JCS
** output rules (escapes, U+0000, UTF-16 member order, numbers), the
** documented limits (depth, size, safe integers), allocation failure at
** every allocation of several documents (no leak, clean NOMEM), and a
** sink that fails. Prints one PASS/FAIL line per check.
*/
#include "check.h"
#include "idem_num.h"

#include <float.h>
#include <locale.h>
#include <math.h>

/* Every accepted output must also re-canonicalise to itself, except
** (once == 1) an output that holds a double in [2^53, 1e21): JCS prints it
** as an integer literal beyond 2^53-1, which the input rules refuse. */
static void ok_case_x(const char *zName, const char *zIn, size_t nIn, const char *zWant,
                      size_t nWant, int once) {
  char *zOut = 0, *zOut2 = 0;
  size_t nOut = 0, nOut2 = 0;
  IdemJcsError e;
  char a[300], b[300];
  int rc = check_canon(zIn, nIn, &zOut, &nOut, &e);
  if (rc != IDEM_JCS_OK) {
    check_fail(zName, "rc=%d (%s) for input \"%s\"", rc, e.msg, check_show(zIn, nIn, a, sizeof(a)));
  } else if (nOut != nWant || memcmp(zOut, zWant, nWant) != 0) {
    check_fail(zName, "got \"%s\", want \"%s\"", check_show(zOut, nOut, a, sizeof(a)),
               check_show(zWant, nWant, b, sizeof(b)));
  } else if (once) {
    check_pass(zName);
  } else if (check_canon(zOut, nOut, &zOut2, &nOut2, &e) != IDEM_JCS_OK) {
    check_fail(zName, "output refused on a second pass: %s", e.msg);
  } else if (nOut2 != nOut || memcmp(zOut, zOut2, nOut) != 0) {
    check_fail(zName, "not idempotent: \"%s\" then \"%s\"", check_show(zOut, nOut, a, sizeof(a)),
               check_show(zOut2, nOut2, b, sizeof(b)));
  } else {
    check_pass(zName);
  }
  free(zOut);
  free(zOut2);
}

static void ok_case(const char *zName, const char *zIn, size_t nIn, const char *zWant,
                    size_t nWant) {
  ok_case_x(zName, zIn, nIn, zWant, nWant, 0);
}

static void err_case(const char *zName, const char *zIn, size_t nIn, const char *zMsg, size_t off) {
  char *zOut = 0;
  size_t nOut = 0;
  IdemJcsError e;
  char a[300];
  int rc = check_canon(zIn, nIn, &zOut, &nOut, &e);
  if (rc != IDEM_JCS_INVALID) {
    check_fail(zName, "rc=%d, want IDEM_JCS_INVALID, output \"%s\"", rc,
               zOut ? check_show(zOut, nOut, a, sizeof(a)) : "");
  } else if (strcmp(e.msg, zMsg) != 0) {
    check_fail(zName, "message \"%s\", want \"%s\"", e.msg, zMsg);
  } else if (e.offset != off) {
    check_fail(zName, "offset %zu, want %zu", e.offset, off);
  } else {
    check_pass(zName);
  }
  free(zOut);
}

/* String literals may hold NUL bytes: take their size, not strlen. */
#define OK(name, in, want) ok_case("canonical." name, in, sizeof(in) - 1, want, sizeof(want) - 1)
#define OK_ONCE(name, in, want) \
  ok_case_x("canonical." name, in, sizeof(in) - 1, want, sizeof(want) - 1, 1)
#define ERR(name, in, msg, off) err_case("canonical." name, in, sizeof(in) - 1, msg, off)

static void test_structure(void) {
  OK("ws.all-four", " \t\r\n{ \"b\" : [ 1 , 2 ] ,\n\t\"a\" : null }\r\n ",
     "{\"a\":null,\"b\":[1,2]}");
  OK("literals", "[true,false,null]", "[true,false,null]");
  OK("scalar.string", "\"x\"", "\"x\"");
  OK("scalar.number", " 7 ", "7");
  OK("empty.object", "{ }", "{}");
  OK("empty.array", "[ ]", "[]");
  OK("empty.nested", "[{},[],{\"\":[]}]", "[{},[],{\"\":[]}]");
  OK("array.order-kept", "[3,1,2,{\"b\":1,\"a\":2}]", "[3,1,2,{\"a\":2,\"b\":1}]");
  OK("object.nested-sorted", "{\"z\":{\"y\":1,\"x\":2},\"a\":[{\"d\":1,\"c\":2}]}",
     "{\"a\":[{\"c\":2,\"d\":1}],\"z\":{\"x\":2,\"y\":1}}");
  OK("object.prefix-first", "{\"ab\":1,\"a\":2,\"\":3}", "{\"\":3,\"a\":2,\"ab\":1}");
  OK("object.case", "{\"b\":1,\"B\":2,\"a\":3,\"A\":4}", "{\"A\":4,\"B\":2,\"a\":3,\"b\":1}");
  OK("object.numeric-names", "{\"10\":1,\"111\":2,\"1\":3}", "{\"1\":3,\"10\":1,\"111\":2}");
}

static void test_escapes(void) {
  OK("escape.short", "\"\\b\\t\\n\\f\\r\\\"\\\\\"", "\"\\b\\t\\n\\f\\r\\\"\\\\\"");
  OK("escape.short-from-u", "\"\\u0008\\u0009\\u000A\\u000c\\u000D\\u0022\\u005C\"",
     "\"\\b\\t\\n\\f\\r\\\"\\\\\"");
  OK("escape.controls-lowercase", "\"\\u0001\\u001F\\u000B\\u000e\\u001b\"",
     "\"\\u0001\\u001f\\u000b\\u000e\\u001b\"");
  OK("escape.del-raw", "\"\\u007F\"", "\"\x7f\"");
  OK("escape.del-raw-input", "\"a\x7f\"", "\"a\x7f\"");
  OK("escape.solidus", "\"\\/a\\/\"", "\"/a/\"");
  OK("escape.solidus-raw", "\"/\"", "\"/\"");
  OK("escape.non-ascii-raw", "\"\\u00e9\\u20AC\\u2028\\uFFFF\"",
     "\"\xc3\xa9\xe2\x82\xac\xe2\x80\xa8\xef\xbf\xbf\"");
  OK("escape.pair-raw", "\"\\ud83d\\ude00\\uDBFF\\uDFFF\"", "\"\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\"");
  OK("escape.raw-utf8-kept", "\"\xc3\xa9\xf0\x9f\x98\x80\"", "\"\xc3\xa9\xf0\x9f\x98\x80\"");
  OK("escape.mixed-fast-then-slow", "\"\xc3\xa9x\\n\xe2\x82\xac\"", "\"\xc3\xa9x\\n\xe2\x82\xac\"");
  OK("escape.in-member-name", "{\"\\n\\u0041\\/\":1}", "{\"\\nA/\":1}");
  OK("nul.in-string", "\"a\\u0000b\"", "\"a\\u0000b\"");
  OK("nul.only", "[\"\\u0000\",\"\\u0000\\u0000\"]", "[\"\\u0000\",\"\\u0000\\u0000\"]");
  OK("nul.in-name", "{\"\\u0000\":1}", "{\"\\u0000\":1}");
  OK("nul.name-sorting",
     "{\"a\\u0000\":1,\"\\u0001\":2,\"a\":3,\"\\u0000\\u0000\":4,\"\\u0000\":5,\"\":6}",
     "{\"\":6,\"\\u0000\":5,\"\\u0000\\u0000\":4,\"\\u0001\":2,\"a\":3,\"a\\u0000\":1}");
  OK("nul.names-differ-after-nul", "{\"a\\u0000c\":1,\"a\\u0000b\":2}",
     "{\"a\\u0000b\":2,\"a\\u0000c\":1}");
}

static void test_utf16_order(void) {
  /* U+E000 and U+FFFF sort after an astral character (its lead surrogate,
  ** D800-DBFF, is below E000), although UTF-8 byte order says otherwise. */
  OK("order.astral-before-e000", "{\"\xee\x80\x80\":1,\"\xf0\x9f\x98\x80\":2}",
     "{\"\xf0\x9f\x98\x80\":2,\"\xee\x80\x80\":1}");
  OK("order.astral-before-ffff", "{\"\xef\xbf\xbf\":1,\"\xf0\x90\x80\x80\":2}",
     "{\"\xf0\x90\x80\x80\":2,\"\xef\xbf\xbf\":1}");
  OK("order.d7ff-before-astral", "{\"\xf4\x8f\xbf\xbf\":1,\"\xed\x9f\xbf\":2}",
     "{\"\xed\x9f\xbf\":2,\"\xf4\x8f\xbf\xbf\":1}");
  OK("order.fb33-after-astral", "{\"\xef\xac\xb3\":1,\"\\ud83d\\ude02\":2}",
     "{\"\xf0\x9f\x98\x82\":2,\"\xef\xac\xb3\":1}");
  OK("order.bmp-ascending", "{\"\xe2\x82\xac\":1,\"\xc3\xb6\":2,\"\xc2\x80\":3,\"~\":4}",
     "{\"~\":4,\"\xc2\x80\":3,\"\xc3\xb6\":2,\"\xe2\x82\xac\":1}");
  OK("order.after-common-prefix", "{\"x\xee\x80\x80\":1,\"x\xf0\x9f\x98\x80\":2,\"x\":3}",
     "{\"x\":3,\"x\xf0\x9f\x98\x80\":2,\"x\xee\x80\x80\":1}");
  OK("order.escaped-vs-raw", "{\"\\ue000\":1,\"\\ud800\\udc00\":2}",
     "{\"\xf0\x90\x80\x80\":2,\"\xee\x80\x80\":1}");
}

static void test_numbers(void) {
  OK("number.minus-zero", "-0", "0");
  OK("number.minus-zero-forms", "[-0,-0.0,0e5,-0E-5,0.000]", "[0,0,0,0,0]");
  OK("number.integers-as-written", "[0,-1,10,123456789]", "[0,-1,10,123456789]");
  OK("number.safe-max", "[9007199254740991,-9007199254740991]",
     "[9007199254740991,-9007199254740991]");
  OK("number.fraction-zero", "[1.0,56.0,4.50,-2.500]", "[1,56,4.5,-2.5]");
  OK("number.exponents", "[1E30,1e+2,1E-2,2e-3,1e-27,1e21]", "[1e+30,100,0.01,0.002,1e-27,1e+21]");
  OK_ONCE("number.1e20-printed-as-integer", "1e20", "100000000000000000000");
  OK("number.plain-exp-switch", "[0.000001,0.0000001,1e-6,1e-7,9.999999999999997e-7]",
     "[0.000001,1e-7,0.000001,1e-7,9.999999999999997e-7]");
  OK_ONCE("number.big-not-integer-literal", "[999999999999999900000.0,1e22,9007199254740993.0]",
          "[999999999999999900000,1e+22,9007199254740992]");
  /* Known limit of idempotence: that canonical text is refused as input. */
  ERR("number.canonical-big-integer-refused-again", "[999999999999999900000,1e+22]",
      "integer 999999999999999900000 at byte 1 is beyond 2^53-1 and would lose precision; send it "
      "as a string",
      1);
  OK("number.rounding", "[333333333.33333329,0.30000000000000004,4.35]",
     "[333333333.3333333,0.30000000000000004,4.35]");
  OK("number.slow-path-many-digits", "123456789012345678901234567890.5", "1.2345678901234568e+29");
  OK("number.slow-path-long-literal",
     "0.1000000000000000000000000000000000000000000000000000000000000000000000001", "0.1");
  OK("number.trailing-zeros-past-17", "1.00000000000000000000000000", "1");
  OK("number.extremes", "[1.7976931348623157e308,-5e-324,2.2250738585072014E-308]",
     "[1.7976931348623157e+308,-5e-324,2.2250738585072014e-308]");
  OK("number.subnormal-rounds-up", "2.4703282292062328e-324", "5e-324");
  OK("number.zero-with-huge-exponent", "[0e-400,0.0e999]", "[0,0]");
  OK("number.huge-exponent-digits", "1e00000000000000000000000000000000000000002", "100");
  /* shortest digits where the nearest 16-digit decimal does not read back */
  OK("number.shortest-2^-24", "5.9604644775390625e-8", "5.960464477539063e-8");
  OK("number.shortest-2^-44", "5.684341886080802e-14", "5.684341886080802e-14");
  /* one digit when one is enough, also in the subnormals */
  OK("number.one-digit-subnormal", "[8.893e-323,4.9406564584124654e-324,1e23]",
     "[9e-323,5e-324,1e+23]");
  /* the parser: ties go to even, a digit far past the 19th decides */
  OK_ONCE("number.tie-2^53+1", "9007199254740993.0", "9007199254740992");
  OK("number.tie-past-19-digits",
     "[1.00000000000000011102230246251565404236316680908203125,"
     "1.00000000000000011102230246251565404236316680908203126,"
     "1.00000000000000011102230246251565404236316680908203124]",
     "[1,1.0000000000000002,1]");
  OK("number.tie-odd-rounds-up", "1.00000000000000033306690738754696212708950042724609375",
     "1.0000000000000004");
  OK("number.famous-slow-strtod", "[2.2250738585072011e-308,2.2250738585072012e-308]",
     "[2.225073858507201e-308,2.2250738585072014e-308]");
  OK("number.subnormal-parse", "[2.4703282292062328e-324,7.4109846876186982e-324,1e-320]",
     "[5e-324,1e-323,1e-320]");
  OK("number.max-rounds-down", "1.797693134862315708e308", "1.7976931348623157e+308");
  /* a literal already spelled canonically is kept; one with the printed
  ** digits but another spelling keeps its digits (mantissa copied) */
  OK("number.kept-as-written", "[7.956664371524663,-0.009425017643751196,1.5e-7,-2.5e+25]",
     "[7.956664371524663,-0.009425017643751196,1.5e-7,-2.5e+25]");
  OK("number.exponent-respelled",
     "[1.3884873469718519e-07,1.5E-7,1.5e-0007,-9.4710762054721414e+024,5e21,5E+21,1e-7]",
     "[1.3884873469718519e-7,1.5e-7,1.5e-7,-9.471076205472142e+24,5e+21,5e+21,1e-7]");
  OK("number.exponent-to-fixed",
     "[7.682441873718716e-05,7.5E-5,-1.2e-6,1e-6,1.2e-1,1.25e0,1.5e3,-3.25e+2]",
     "[0.00007682441873718716,0.000075,-0.0000012,0.000001,0.12,1.25,1500,-325]");
  OK("number.fixed-to-exponent", "[0.00000012,0.0000001234567890123456,0.000001]",
     "[1.2e-7,1.234567890123456e-7,0.000001]");
  /* 16- and 17-digit literals: kept when they are the printed digits,
  ** else the shortest (a shorter one reads back, or a nearer one exists) */
  OK("number.17-digits-kept", "[0.30000000000000004,1.0000000000000002,-1.7976931348623157e+308]",
     "[0.30000000000000004,1.0000000000000002,-1.7976931348623157e+308]");
  OK("number.17-digits-shorter", "[0.30000000000000001,0.10000000000000001,1.0000000000000001]",
     "[0.3,0.1,1]");
  OK("number.17-digits-nearer", "[0.30000000000000003,1.0000000000000003,1.0000000000000001e-5]",
     "[0.30000000000000004,1.0000000000000002,0.00001]");
  OK("number.16-digits-near-power-of-ten",
     "[1000000000000000.1,1.000000000000001,9.999999999999998]",
     "[1000000000000000.1,1.000000000000001,9.999999999999998]");
  /* digits read a word at a time: every length of the last partial word,
  ** ended by each byte that may follow a number */
  OK("number.digit-runs", "[1.2,12.34,123.456,1234.5678,12345.67891,123456.789123,1234567.8912345]",
     "[1.2,12.34,123.456,1234.5678,12345.67891,123456.789123,1234567.8912345]");
  OK("number.digit-runs-ends",
     "{\"a\":0.12345678,\"b\":[0.123456789 ,0.1234567891\t,0.12345678912\n],\"c\":1.5}",
     "{\"a\":0.12345678,\"b\":[0.123456789,0.1234567891,0.12345678912],\"c\":1.5}");
}

static void test_errors(void) {
  ERR("bom", "\xEF\xBB\xBF{}", "a leading byte order mark (U+FEFF) at byte 0 is not allowed", 0);
  ERR("bom.after-ws", " \xEF\xBB\xBF{}",
      "not valid JSON: unexpected byte 0xef at byte 1, expected a JSON value", 1);
  ERR("trailing.value", "{} {}", "trailing bytes after the JSON value at byte 3", 3);
  ERR("trailing.nul", "{}\0", "trailing bytes after the JSON value at byte 2", 2);
  ERR("trailing.leading-zero", "01", "trailing bytes after the JSON value at byte 1", 1);
  ERR("invalid.empty", "",
      "not valid JSON: unexpected end of input at byte 0, expected a JSON value", 0);
  ERR("invalid.ws-only", " \n",
      "not valid JSON: unexpected end of input at byte 2, expected a JSON value", 2);
  ERR("invalid.open-object", "{",
      "not valid JSON: unexpected end of input at byte 1, expected a member name", 1);
  ERR("invalid.array-comma", "[1,]",
      "not valid JSON: unexpected byte 0x5d at byte 3, expected a JSON value", 3);
  ERR("invalid.object-comma", "{\"a\":1,}",
      "not valid JSON: unexpected byte 0x7d at byte 7, expected a member name", 7);
  ERR("invalid.no-colon", "{\"a\" 1}",
      "not valid JSON: unexpected byte 0x31 at byte 5, expected ':'", 5);
  ERR("invalid.missing-comma", "[1 2]",
      "not valid JSON: unexpected byte 0x32 at byte 3, expected ',' or ']'", 3);
  ERR("invalid.unclosed-object", "{\"a\":1",
      "not valid JSON: unexpected end of input at byte 6, expected ',' or '}'", 6);
  ERR("invalid.name-not-string", "{a:1}",
      "not valid JSON: unexpected byte 0x61 at byte 1, expected a member name", 1);
  ERR("invalid.literal", "tru",
      "not valid JSON: unexpected byte 0x74 at byte 0, expected a JSON value", 0);
  ERR("invalid.nan", "NaN", "not valid JSON: unexpected byte 0x4e at byte 0, expected a JSON value",
      0);
  ERR("invalid.plus", "+1", "not valid JSON: unexpected byte 0x2b at byte 0, expected a JSON value",
      0);
  ERR("invalid.minus-alone", "-",
      "not valid JSON: unexpected end of input at byte 1, expected a digit", 1);
  ERR("invalid.dot", "1.",
      "not valid JSON: unexpected end of input at byte 2, expected a digit after "
      "the decimal point",
      2);
  ERR("invalid.exponent", "1e+",
      "not valid JSON: unexpected end of input at byte 3, expected a digit in the exponent", 3);
  ERR("invalid.nul-outside-string", "[\0]",
      "not valid JSON: unexpected byte 0x00 at byte 1, expected a JSON value", 1);
  ERR("invalid.nbsp-as-ws",
      "[\xc2\xa0"
      "1]",
      "not valid JSON: unexpected byte 0xc2 at byte 1, expected a JSON value", 1);
  ERR("string.unterminated", "\"abc", "not valid JSON: unterminated string starting at byte 0", 4);
  ERR("string.unterminated-slow", "[\"a\\n",
      "not valid JSON: unterminated string starting at byte 1", 5);
  ERR("string.unterminated-backslash", "\"a\\",
      "not valid JSON: unterminated string starting at byte 0", 3);
  ERR("string.raw-tab", "\"a\tb\"", "control character 0x09 in a string at byte 2 must be escaped",
      2);
  ERR("string.raw-nul", "\"a\0b\"", "control character 0x00 in a string at byte 2 must be escaped",
      2);
  ERR("string.raw-newline-slow", "\"\\n\n\"",
      "control character 0x0a in a string at byte 3 must be escaped", 3);
  ERR("string.bad-escape", "\"\\x\"", "invalid escape \\x at byte 1", 1);
  ERR("string.bad-escape-byte", "\"\\\x01\"", "invalid escape (backslash then byte 0x01) at byte 1",
      1);
  ERR("string.bad-u-escape", "\"\\u12g4\"", "invalid \\u escape at byte 1 (four hex digits needed)",
      1);
  ERR("string.short-u-escape", "\"\\u12\"", "invalid \\u escape at byte 1 (four hex digits needed)",
      1);

  ERR("utf8.overlong-2", "[\"\xc0\xaf\"]", "invalid UTF-8 byte 0xc0 at byte 2", 2);
  ERR("utf8.overlong-3", "\"\xe0\x80\xaf\"", "invalid UTF-8 byte 0xe0 at byte 1", 1);
  ERR("utf8.overlong-4", "\"\xf0\x80\x80\xaf\"", "invalid UTF-8 byte 0xf0 at byte 1", 1);
  ERR("utf8.surrogate-encoded", "\"ab\xed\xa0\x80\"", "invalid UTF-8 byte 0xed at byte 3", 3);
  ERR("utf8.low-surrogate-encoded", "\"\xed\xbf\xbf\"", "invalid UTF-8 byte 0xed at byte 1", 1);
  ERR("utf8.beyond-10ffff", "\"\xf4\x90\x80\x80\"", "invalid UTF-8 byte 0xf4 at byte 1", 1);
  ERR("utf8.f5-lead", "\"\xf5\x80\x80\x80\"", "invalid UTF-8 byte 0xf5 at byte 1", 1);
  ERR("utf8.truncated", "\"\xe2\x82\"", "invalid UTF-8 byte 0xe2 at byte 1", 1);
  ERR("utf8.truncated-at-end", "\"\xf0\x9f\x98", "invalid UTF-8 byte 0xf0 at byte 1", 1);
  ERR("utf8.stray-continuation", "\"a\x80\"", "invalid UTF-8 byte 0x80 at byte 2", 2);
  ERR("utf8.ff", "\"\xff\"", "invalid UTF-8 byte 0xff at byte 1", 1);
  ERR("utf8.after-escape", "\"\\n\xc0\xaf\"", "invalid UTF-8 byte 0xc0 at byte 3", 3);
  ERR("utf8.in-member-name", "{\"k\xc3\":1}", "invalid UTF-8 byte 0xc3 at byte 3", 3);

  ERR("surrogate.lone-high", "[\"\\ud800\"]", "lone surrogate \\ud800 at byte 2", 2);
  ERR("surrogate.high-at-end", "\"x\\uDBFF\"", "lone surrogate \\udbff at byte 2", 2);
  ERR("surrogate.high-then-bmp", "\"\\ud800\\u0041\"", "lone surrogate \\ud800 at byte 1", 1);
  ERR("surrogate.high-then-high", "\"\\ud800\\ud800\"", "lone surrogate \\ud800 at byte 1", 1);
  ERR("surrogate.high-then-text", "\"\\ud83dabcdefg\"", "lone surrogate \\ud83d at byte 1", 1);
  ERR("surrogate.lone-low", "[\"\\udc00\"]", "lone surrogate \\udc00 at byte 2", 2);
  ERR("surrogate.reversed", "\"\\udc00\\ud800\"", "lone surrogate \\udc00 at byte 1", 1);
  ERR("surrogate.in-name", "{\"\\udfff\":1}", "lone surrogate \\udfff at byte 2", 2);

  ERR("number.overflow", "[1e400]", "number 1e400 at byte 1 overflows a double", 1);
  ERR("number.overflow-negative", "-1e400", "number -1e400 at byte 0 overflows a double", 0);
  ERR("number.overflow-just-above-max", "1.7976931348623159e308",
      "number 1.7976931348623159e308 at byte 0 overflows a double", 0);
  ERR("number.overflow-huge-exponent", "1e999999999999999999",
      "number 1e999999999999999999 at byte 0 overflows a double", 0);
  ERR("number.underflow", "[1e-400]", "number 1e-400 at byte 1 underflows to zero", 1);
  ERR("number.underflow-negative", "-1e-400", "number -1e-400 at byte 0 underflows to zero", 0);
  ERR("number.underflow-below-half-min", "2.4703282292062327e-324",
      "number 2.4703282292062327e-324 at byte 0 underflows to zero", 0);
  ERR("number.underflow-long-clipped",
      "0.00000000000000000000000000000000000000000000000000000001e-400",
      "number 0.00000000000000000000000000000000000... at byte 0 underflows to zero", 0);
  ERR("number.integer-2^53", "[9007199254740992]",
      "integer 9007199254740992 at byte 1 is beyond 2^53-1 and would lose precision; send it as a "
      "string",
      1);
  ERR("number.integer-minus-2^53", "[-9007199254740992]",
      "integer -9007199254740992 at byte 1 is beyond 2^53-1 and would lose precision; send it as a "
      "string",
      1);
  ERR("number.integer-17-digits", "{\"id\":12345678901234567}",
      "integer 12345678901234567 at byte 6 is beyond 2^53-1 and would lose precision; send it as a "
      "string",
      6);
  ERR("number.integer-1e21-spelled", "100000000000000000000",
      "integer 100000000000000000000 at byte 0 is beyond 2^53-1 and would lose precision; send it "
      "as "
      "a string",
      0);
  ERR("number.integer-99999", "-99999999999999999",
      "integer -99999999999999999 at byte 0 is beyond 2^53-1 and would lose precision; send it as "
      "a "
      "string",
      0);

  ERR("duplicate.plain", "{\"a\":1,\"a\":2}", "duplicate member name \"a\" in the object at byte 0",
      0);
  ERR("duplicate.decoded", "{\"a\":1,\"\\u0061\":2}",
      "duplicate member name \"a\" in the object at byte 0", 0);
  ERR("duplicate.decoded-both", "{\"\\u0061\":1,\"\\u0061\":2}",
      "duplicate member name \"a\" in the object at byte 0", 0);
  ERR("duplicate.solidus", "{\"/\":1,\"\\/\":2}",
      "duplicate member name \"/\" in the object at byte 0", 0);
  ERR("duplicate.non-ascii", "{\"\xc3\xa9\":1,\"\\u00E9\":2}",
      "duplicate member name \"\xc3\xa9\" in the object at byte 0", 0);
  ERR("duplicate.astral", "{\"\xf0\x9f\x98\x80\":1,\"\\ud83d\\ude00\":2}",
      "duplicate member name \"\xf0\x9f\x98\x80\" in the object at byte 0", 0);
  ERR("duplicate.nul", "{\"\\u0000\":1,\"\\u0000\":2}",
      "duplicate member name \"\\u0000\" in the object at byte 0", 0);
  ERR("duplicate.quote-named", "{\"a\\\"\":1,\"a\\u0022\":2}",
      "duplicate member name \"a\\u0022\" in the object at byte 0", 0);
  ERR("duplicate.empty", "{\"\":1,\"b\":2,\"\":3}",
      "duplicate member name \"\" in the object at byte 0", 0);
  ERR("duplicate.nested-offset", "[1, {\"x\":{}, \"x\":2}]",
      "duplicate member name \"x\" in the object at byte 4", 4);
  ERR("duplicate.long-name-clipped",
      "{\"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghij"
      "\":1,"
      "\"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghij\""
      ":2}",
      "duplicate member name "
      "\"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmno...\" "
      "in the object at byte 0",
      0);
}

/* Objects past the insertion-sort size go through the merge sort. */
static void test_big_objects(void) {
  char z[20000], w[20000];
  size_t n = 0, m = 0;
  int i;
  /* 300 names in descending order, each "k" + 3 digits; one escaped. */
  n += (size_t)sprintf(z + n, "{");
  for (i = 299; i >= 0; i--) {
    if (i == 150) n += (size_t)sprintf(z + n, ",\"\\u006b%03d\":%d", i, i);
    else n += (size_t)sprintf(z + n, "%s\"k%03d\":%d", i == 299 ? "" : ",", i, i);
  }
  n += (size_t)sprintf(z + n, "}");
  m += (size_t)sprintf(w + m, "{");
  for (i = 0; i < 300; i++) m += (size_t)sprintf(w + m, "%s\"k%03d\":%d", i ? "," : "", i, i);
  m += (size_t)sprintf(w + m, "}");
  ok_case("canonical.big-object.sorted", z, n, w, m);

  /* The same with one decoded duplicate in the middle. */
  n = 0;
  n += (size_t)sprintf(z + n, "{");
  for (i = 0; i < 40; i++) n += (size_t)sprintf(z + n, "\"k%02d\":%d,", (i * 7) % 40, i);
  n += (size_t)sprintf(z + n, "\"k\\u00317\":0}");
  err_case("canonical.big-object.duplicate", z, n,
           "duplicate member name \"k17\" in the object at byte 0", 0);
}

/* Depth limit: 256 nested containers accepted, 257 refused. */
static void test_depth(void) {
  char z[2 * 300 + 8];
  size_t n;
  int d;
  char zMsg[100];
  for (d = 255; d <= 257; d++) {
    char zName[64];
    n = 0;
    for (int i = 0; i < d; i++) z[n++] = '[';
    for (int i = 0; i < d; i++) z[n++] = ']';
    snprintf(zName, sizeof(zName), "canonical.depth.arrays-%d", d);
    if (d <= IDEM_JCS_MAX_DEPTH) ok_case(zName, z, n, z, n);
    else {
      snprintf(zMsg, sizeof(zMsg), "nesting deeper than 256 levels at byte %d", d - 1);
      err_case(zName, z, n, zMsg, (size_t)d - 1);
    }
  }
  {
    /* objects and arrays mixed: {"a":[{"a":[ ... ]}]} */
    static char zo[257 * 6 + 8], zw[257 * 6 + 8];
    for (d = 256; d <= 257; d++) {
      size_t no = 0;
      int i;
      char zName[64];
      for (i = 0; i < d; i++) {
        if (i % 2 == 0) {
          memcpy(zo + no, "{\"a\" : ", 7);
          no += 7;
        } else {
          zo[no++] = '[';
        }
      }
      zo[no++] = '1';
      for (i = d - 1; i >= 0; i--) zo[no++] = i % 2 == 0 ? '}' : ']';
      {
        size_t nw = 0;
        for (i = 0; i < d; i++) {
          if (i % 2 == 0) {
            memcpy(zw + nw, "{\"a\":", 5);
            nw += 5;
          } else {
            zw[nw++] = '[';
          }
        }
        zw[nw++] = '1';
        for (i = d - 1; i >= 0; i--) zw[nw++] = i % 2 == 0 ? '}' : ']';
        snprintf(zName, sizeof(zName), "canonical.depth.mixed-%d", d);
        if (d == 256) ok_case(zName, zo, no, zw, nw);
        else {
          /* container 257 (index 256, even) opens at 128*7+128*1 */
          size_t at = 128 * 7 + 128;
          snprintf(zMsg, sizeof(zMsg), "nesting deeper than 256 levels at byte %zu", at);
          err_case(zName, zo, no, zMsg, at);
        }
      }
    }
  }
  {
    /* deep but closed and reopened: depth counts open containers only */
    char zs[300 * 4 + 8];
    n = 0;
    zs[n++] = '[';
    for (d = 0; d < 300; d++) {
      if (d) zs[n++] = ',';
      zs[n++] = '[';
      zs[n++] = ']';
    }
    zs[n++] = ']';
    ok_case("canonical.depth.siblings-not-depth", zs, n, zs, n);
  }
}

/* The size cap: exactly IDEM_JCS_MAX_BYTES accepted, one more refused. */
static void test_size_cap(void) {
  size_t n = IDEM_JCS_MAX_BYTES;
  char *z = malloc(n + 1);
  char zMsg[100];
  char *zOut = 0;
  size_t nOut = 0;
  IdemJcsError e;
  int rc;
  if (z == 0) {
    check_fail("canonical.size-cap.at-limit", "out of memory in the test");
    return;
  }
  z[0] = '"';
  memset(z + 1, 'a', n - 2);
  z[n - 1] = '"';
  rc = check_canon(z, n, &zOut, &nOut, &e);
  check(rc == IDEM_JCS_OK && nOut == n && memcmp(zOut, z, n) == 0, "canonical.size-cap.at-limit",
        "rc=%d (%s), %zu bytes out", rc, e.msg, nOut);
  free(zOut);
  z[n - 1] = 'a';
  z[n] = '"';
  snprintf(zMsg, sizeof(zMsg), "input is %zu bytes, the limit is %u", n + 1, IDEM_JCS_MAX_BYTES);
  err_case("canonical.size-cap.over-limit", z, n + 1, zMsg, 0);
  free(z);
}

/* ------------------------------------------------------------------ */
/* idem_jcs_number                                                     */
/* ------------------------------------------------------------------ */

static double from_bits(uint64_t u) {
  double v;
  memcpy(&v, &u, sizeof(v));
  return v;
}

static void num_case(const char *zName, double v, const char *zWant) {
  char z[40];
  int n;
  memset(z, 'x', sizeof(z));
  n = idem_jcs_number(v, z);
  if (strcmp(z, zWant) != 0 || n != (int)strlen(zWant)) {
    check_fail(zName, "got \"%s\" (length %d), want \"%s\"", z, n, zWant);
  } else {
    check_pass(zName);
  }
}

static void test_number_format(void) {
  num_case("number-format.zero", 0.0, "0");
  num_case("number-format.minus-zero", -0.0, "0");
  num_case("number-format.one", 1.0, "1");
  num_case("number-format.minus-one", -1.0, "-1");
  num_case("number-format.tenth", 0.1, "0.1");
  num_case("number-format.0.1+0.2", 0.1 + 0.2, "0.30000000000000004");
  num_case("number-format.third", 1.0 / 3.0, "0.3333333333333333");
  num_case("number-format.4.35", 4.35, "4.35");
  num_case("number-format.2^53", 9007199254740992.0, "9007199254740992");
  num_case("number-format.1e21", 1e21, "1e+21");
  num_case("number-format.below-1e21", 999999999999999900000.0, "999999999999999900000");
  num_case("number-format.1e20", 1e20, "100000000000000000000");
  num_case("number-format.2^68", 295147905179352830000.0, "295147905179352830000");
  num_case("number-format.1e22", 1e22, "1e+22");
  num_case("number-format.1e23", 1e23, "1e+23");
  num_case("number-format.1e-6", 1e-6, "0.000001");
  num_case("number-format.1e-7", 1e-7, "1e-7");
  num_case("number-format.below-1e-6", 9.999999999999997e-7, "9.999999999999997e-7");
  num_case("number-format.1.234e-6", 0.000001234, "0.000001234");
  num_case("number-format.1.23e-18", 123e-20, "1.23e-18");
  num_case("number-format.-1.2345e-10", -1.2345e-10, "-1.2345e-10");
  num_case("number-format.1.5e300", 1.5e300, "1.5e+300");
  num_case("number-format.dbl-max", DBL_MAX, "1.7976931348623157e+308");
  num_case("number-format.minus-dbl-max", -DBL_MAX, "-1.7976931348623157e+308");
  num_case("number-format.dbl-min", DBL_MIN, "2.2250738585072014e-308");
  num_case("number-format.largest-subnormal", from_bits(0x000fffffffffffffull),
           "2.225073858507201e-308");
  num_case("number-format.half-dbl-min", from_bits(0x0008000000000000ull),
           "1.1125369292536007e-308");
  num_case("number-format.min-subnormal", from_bits(1), "5e-324");
  num_case("number-format.minus-min-subnormal", from_bits(0x8000000000000001ull), "-5e-324");
  num_case("number-format.3-min-subnormal", from_bits(3), "1.5e-323");
  num_case("number-format.long-negative-exponent", -from_bits(0x0010000000000001ull),
           "-2.225073858507202e-308");
  num_case("number-format.2^-1074*12345", from_bits(12345), "6.099e-320");
  num_case("number-format.333333333.3333333", 333333333.33333329, "333333333.3333333");
  num_case("number-format.1.2345678901234568e+29", 123456789012345678901234567890.5,
           "1.2345678901234568e+29");
  num_case("number-format.123456789012345680000", 123456789012345678901.0, "123456789012345680000");
  num_case("number-format.2^-24", 5.9604644775390625e-8, "5.960464477539063e-8");
  num_case("number-format.2^-1074*18", from_bits(18), "9e-323");
  num_case("number-format.2^-1074*2", from_bits(2), "1e-323");
  num_case("number-format.2^1023", 8.98846567431158e307, "8.98846567431158e+307");
  num_case("number-format.2^-1022-neighbour-up", from_bits(0x0010000000000001ull),
           "2.225073858507202e-308");
  num_case("number-format.5e-324*3", from_bits(3), "1.5e-323");
  {
    /* the longest forms fit the documented 32 bytes */
    char z[40];
    int n = idem_jcs_number(-1.2345678901234567e-300, z);
    check(n <= 31 && (size_t)n == strlen(z), "number-format.fits-32", "length %d: %s", n, z);
  }
}

/* ------------------------------------------------------------------ */
/* shortest.c: its table and logarithms, checked with exact arithmetic  */
/* ------------------------------------------------------------------ */

/* Non-negative integers of up to 64 x 32 bits, little-endian limbs. */
typedef struct Big Big;
struct Big {
  uint32_t a[64];
  int n;
};

static void big_set(Big *b, uint64_t hi, uint64_t lo) {
  int i;
  memset(b, 0, sizeof(*b));
  for (i = 0; i < 2; i++) {
    b->a[i] = (uint32_t)(lo >> (32 * i));
    b->a[i + 2] = (uint32_t)(hi >> (32 * i));
  }
  b->n = 4;
  while (b->n > 0 && b->a[b->n - 1] == 0) b->n--;
}

static void big_mul(Big *b, uint32_t m) {
  uint64_t carry = 0;
  int i;
  for (i = 0; i < b->n; i++) {
    uint64_t x = (uint64_t)b->a[i] * m + carry;
    b->a[i] = (uint32_t)x;
    carry = x >> 32;
  }
  if (carry) {
    if (b->n == 64) {
      fprintf(stderr, "test_canonical: Big overflows 2048 bits\n");
      abort();
    }
    b->a[b->n++] = (uint32_t)carry;
  }
}

static void big_pow(Big *b, int base, int e) {
  while (e-- > 0) big_mul(b, (uint32_t)base);
}

static int big_cmp(const Big *x, const Big *y) {
  int i;
  if (x->n != y->n) return x->n < y->n ? -1 : 1;
  for (i = x->n - 1; i >= 0; i--) {
    if (x->a[i] != y->a[i]) return x->a[i] < y->a[i] ? -1 : 1;
  }
  return 0;
}

/* Compare (hi:lo) 2^p2 10^p10 with 2^q2 10^q10 exactly. */
static int cmp_scaled(uint64_t hi, uint64_t lo, int p2, int p10, int q2, int q10) {
  Big x, y;
  int m2 = p2 < q2 ? p2 : q2, m10 = p10 < q10 ? p10 : q10;
  big_set(&x, hi, lo);
  big_set(&y, 0, 1);
  big_pow(&x, 2, p2 - m2);
  big_pow(&x, 10, p10 - m10);
  big_pow(&y, 2, q2 - m2);
  big_pow(&y, 10, q10 - m10);
  return big_cmp(&x, &y);
}

static void test_shortest_table(void) {
  int e, nBad = 0;
  char zFirst[200] = "";
  /* g(e) - 1 <= 10^e / 2^r < g(e), r = floor(log2 10^e) - 127, g in (2^127, 2^128) */
  for (e = IDEM_POW10_MIN; e <= IDEM_POW10_MAX; e++) {
    const uint64_t *g = idem_pow10_128[e - IDEM_POW10_MIN];
    int r = idem_flog2_pow10(e) - 127;
    uint64_t lo1 = g[1] - 1, hi1 = g[0] - (g[1] == 0);
    int ok = (g[0] >> 63) == 1 && cmp_scaled(hi1, lo1, r, 0, 0, e) <= 0 &&
             cmp_scaled(g[0], g[1], r, 0, 0, e) > 0;
    if (!ok && nBad++ == 0) snprintf(zFirst, sizeof(zFirst), "entry 1e%d", e);
  }
  check(nBad == 0, "shortest.pow10-table", "%d entries wrong, first %s", nBad, zFirst);

  /* the fixed-point logarithms over the ranges the code uses */
  nBad = 0;
  for (e = -1100; e <= 1100; e++) {
    int k = idem_flog10_pow2(e), k3 = idem_flog10_three_quarters_pow2(e);
    /* 10^k <= 2^e < 10^(k+1); 10^k3 <= 3 2^(e-2) < 10^(k3+1) */
    if (cmp_scaled(0, 1, 0, k, e, 0) > 0 || cmp_scaled(0, 1, 0, k + 1, e, 0) <= 0 ||
        cmp_scaled(0, 3, e - 2, 0, 0, k3) < 0 || cmp_scaled(0, 3, e - 2, 0, 0, k3 + 1) >= 0) {
      if (nBad++ == 0) snprintf(zFirst, sizeof(zFirst), "e=%d: %d %d", e, k, k3);
    }
  }
  check(nBad == 0, "shortest.flog10", "%d exponents wrong, first %s", nBad, zFirst);
  nBad = 0;
  for (e = -400; e <= 400; e++) {
    int k = idem_flog2_pow10(e);
    /* 2^k <= 10^e < 2^(k+1) */
    if (cmp_scaled(0, 1, k, 0, 0, e) > 0 || cmp_scaled(0, 1, k + 1, 0, 0, e) <= 0) {
      if (nBad++ == 0) snprintf(zFirst, sizeof(zFirst), "e=%d: %d", e, k);
    }
  }
  check(nBad == 0, "shortest.flog2", "%d exponents wrong, first %s", nBad, zFirst);
}

/* No locale of the host changes the numbers: with a decimal comma in
** LC_NUMERIC, both the fast paths and the strtod_l fallback (ties, digits
** past the 19th, subnormals) give the same text. */
static void test_locale(void) {
  static const char *azLoc[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", 0};
  int i;
  for (i = 0; azLoc[i]; i++) {
    if (setlocale(LC_ALL, azLoc[i])) break;
  }
  if (azLoc[i] == 0) {
    printf(
        "SKIP canonical.locale: no locale with a decimal comma (de_DE.UTF-8, fr_FR.UTF-8) is "
        "installed or made by localedef (tests/suites/10-unit.sh)\n");
    return;
  }
  check(strcmp(localeconv()->decimal_point, ",") == 0, "canonical.locale.decimal-comma",
        "%s has decimal point \"%s\"", azLoc[i], localeconv()->decimal_point);
  OK("locale.numbers",
     "[0.5,-1.5e-7,5.9604644775390625e-8,333333333.33333329,"
     "1.00000000000000011102230246251565404236316680908203126,4.9406564584124654e-324,"
     "2.2250738585072011e-308,123456789012345678901234567890.5]",
     "[0.5,-1.5e-7,5.960464477539063e-8,333333333.3333333,1.0000000000000002,5e-324,"
     "2.225073858507201e-308,1.2345678901234568e+29]");
  num_case("locale.number-format", 1.0 / 3.0, "0.3333333333333333");
  setlocale(LC_ALL, "C");
}

/* ------------------------------------------------------------------ */
/* Allocation failure                                                  */
/* ------------------------------------------------------------------ */

/* An IdemMem that fails allocation number failAt (1-based; 0 = never)
** and counts what is live. */
static struct {
  long nCalls; /* allocations attempted (malloc, realloc of NULL or not) */
  long failAt;
  long nFailed;
  long nLive; /* blocks handed out and not freed */
} oom;

static void *oom_malloc(size_t n) {
  if (++oom.nCalls == oom.failAt) {
    oom.nFailed++;
    return 0;
  }
  {
    void *p = malloc(n);
    if (p) oom.nLive++;
    return p;
  }
}
static void *oom_realloc(void *p, size_t n) {
  void *q;
  if (++oom.nCalls == oom.failAt) {
    oom.nFailed++;
    return 0;
  }
  q = realloc(p, n);
  if (q && p == 0) oom.nLive++;
  return q;
}
static void oom_free(void *p) {
  if (p) oom.nLive--;
  free(p);
}
static const IdemMem oom_mem = {oom_malloc, oom_realloc, oom_free};

static void oom_case(const char *zName, const char *zIn, size_t nIn) {
  char *zWant = 0;
  size_t nWant = 0;
  IdemJcsError e;
  long failAt;
  int rc = check_canon(zIn, nIn, &zWant, &nWant, &e);
  int nNomem = 0;
  if (rc != IDEM_JCS_OK) {
    check_fail(zName, "reference run failed: rc=%d %s", rc, e.msg);
    return;
  }
  for (failAt = 1; failAt < 100000; failAt++) {
    IdemBuf b;
    memset(&b, 0, sizeof(b));
    memset(&oom, 0, sizeof(oom));
    b.pMem = &oom_mem;
    oom.failAt = failAt;
    rc = idem_jcs_canonicalize(zIn, nIn, &oom_mem, idem_buf_sink, &b, &e);
    if (rc == IDEM_JCS_OK && (b.n != nWant || memcmp(b.z, zWant, nWant) != 0)) {
      idem_buf_free(&b);
      check_fail(zName, "failing allocation %ld: wrong output after success", failAt);
      break;
    }
    idem_buf_free(&b);
    if (oom.nLive != 0) {
      check_fail(zName, "failing allocation %ld: %ld blocks leaked (rc=%d)", failAt, oom.nLive, rc);
      break;
    }
    if (rc == IDEM_JCS_OK) {
      if (oom.nFailed) {
        check_fail(zName, "failing allocation %ld was ignored and the call succeeded", failAt);
      } else if (nNomem == 0) {
        check_fail(zName, "no allocation was ever made");
      } else {
        check_pass(zName);
      }
      break;
    }
    if (rc != IDEM_JCS_NOMEM) {
      check_fail(zName, "failing allocation %ld gave rc=%d (%s), want IDEM_JCS_NOMEM", failAt, rc,
                 rc == IDEM_JCS_INVALID ? e.msg : "");
      break;
    }
    nNomem++;
  }
  free(zWant);
}

#define OOM(name, in) oom_case("canonical.oom." name, in, sizeof(in) - 1)

static void test_oom(void) {
  char *z;
  size_t n = 0;
  int i;
  OOM("small", "{\"b\":[1,2,{\"c\":\"x\\ny\"}],\"a\":\"\\u00e9\\ud83d\\ude00\"}");
  OOM("escapes", "[\"\\b\\t\\n\\f\\r\\\"\\\\\\/\\u0000\\u001f\",{\"\\u0061\":\"\\ud83d\\ude00\"}]");
  OOM("slow-numbers",
      "[0.1000000000000000000000000000000000000000000000000000000000000000000000001,1e-7,"
      "123456789012345678901234567890.5,-0,1E30,5e-324,4.50,-0.0]");
  OOM("scalar", "-0");
  /* a larger document: nodes, children lists and aux all grow several times */
  z = malloc(200000);
  if (z == 0) return;
  n += (size_t)sprintf(z + n, "{");
  for (i = 0; i < 400; i++) {
    n += (size_t)sprintf(z + n, "%s\"k\\u00%02x%d\":[%d.50,\"v\\t%d\",{\"x%d\":[[[]]]},1e%d]",
                         i ? "," : "", 0x41 + i % 26, 400 - i, i, i, i, i % 30);
  }
  n += (size_t)sprintf(z + n, "}");
  oom_case("canonical.oom.large", z, n);
  /* a long string with escapes: output leaves the staging buffer directly */
  n = 0;
  z[n++] = '[';
  z[n++] = '"';
  for (i = 0; i < 3000; i++) {
    memcpy(z + n, i % 100 ? "ab" : "\\n", 2);
    n += 2;
  }
  z[n++] = '"';
  z[n++] = ']';
  oom_case("canonical.oom.long-string", z, n);
  free(z);
}

/* idem_digest under allocation failure: same contract. */
static void test_oom_digest(void) {
  /* an escaped string longer than the parser's inline buffer, so that the
  ** digest has allocations to fail (a small document needs none) */
  static char zArgs[1200];
  char zWant[IDEM_DIGEST_HEX + 1], zHex[IDEM_DIGEST_HEX + 1];
  {
    size_t i, n = 0;
    n += (size_t)snprintf(zArgs + n, sizeof(zArgs) - n, "{\"z\":[1.50,\"\\u00e9\"],\"s\":\"");
    for (i = 0; i < 300; i++) n += (size_t)snprintf(zArgs + n, sizeof(zArgs) - n, "a\\n");
    snprintf(zArgs + n, sizeof(zArgs) - n, "\",\"a\":{\"y\":1,\"x\":2}}");
  }
  IdemJcsError e;
  long failAt;
  int rc = idem_digest("t:c:x:", 6, zArgs, strlen(zArgs), 0, zWant, &e);
  if (rc) {
    check_fail("canonical.oom.digest", "reference run failed: rc=%d", rc);
    return;
  }
  for (failAt = 1; failAt < 1000; failAt++) {
    memset(&oom, 0, sizeof(oom));
    oom.failAt = failAt;
    rc = idem_digest("t:c:x:", 6, zArgs, strlen(zArgs), &oom_mem, zHex, &e);
    if (oom.nLive) {
      check_fail("canonical.oom.digest", "failing allocation %ld leaked %ld blocks", failAt,
                 oom.nLive);
      return;
    }
    if (rc == IDEM_JCS_OK) {
      check(failAt > 1 && oom.nFailed == 0 && strcmp(zHex, zWant) == 0, "canonical.oom.digest",
            "at allocation %ld: digest %s, want %s", failAt, zHex, zWant);
      return;
    }
    if (rc != IDEM_JCS_NOMEM) {
      check_fail("canonical.oom.digest", "failing allocation %ld gave rc=%d", failAt, rc);
      return;
    }
  }
  check_fail("canonical.oom.digest", "never succeeded");
}

/* ------------------------------------------------------------------ */
/* Sinks                                                               */
/* ------------------------------------------------------------------ */

typedef struct FailSink FailSink;
struct FailSink {
  size_t nSeen;  /* bytes accepted so far */
  size_t nLimit; /* fail the call that would pass this many bytes */
  int nCalls;
  int rc;
};

static int fail_sink(void *pCtx, const char *p, size_t n) {
  FailSink *s = (FailSink *)pCtx;
  (void)p;
  s->nCalls++;
  if (s->nSeen + n > s->nLimit) return s->rc;
  s->nSeen += n;
  return IDEM_JCS_OK;
}

static void test_sink(void) {
  FailSink s;
  IdemJcsError e;
  int rc, i;
  char *z = malloc(20000);
  size_t n = 0;
  if (z == 0) return;

  memset(&s, 0, sizeof(s));
  s.nLimit = 0;
  s.rc = 42;
  rc = idem_jcs_canonicalize("{\"a\":1}", 7, 0, fail_sink, &s, &e);
  check(rc == 42 && s.nCalls == 1, "canonical.sink.error-small", "rc=%d after %d calls", rc,
        s.nCalls);

  /* 5000-byte output: the sink sees staging-buffer flushes; fail the 3rd */
  z[n++] = '[';
  for (i = 0; i < 1000; i++) n += (size_t)sprintf(z + n, "%s\"%03d\"", i ? "," : "", i % 1000);
  z[n++] = ']';
  memset(&s, 0, sizeof(s));
  s.nLimit = 2500;
  s.rc = 7;
  rc = idem_jcs_canonicalize(z, n, 0, fail_sink, &s, &e);
  check(rc == 7 && s.nSeen <= 2500 && s.nSeen > 0, "canonical.sink.error-midway",
        "rc=%d with %zu bytes accepted", rc, s.nSeen);

  /* a string longer than the staging buffer goes straight to the sink */
  n = 0;
  z[n++] = '"';
  memset(z + n, 'q', 5000);
  n += 5000;
  z[n++] = '"';
  memset(&s, 0, sizeof(s));
  s.nLimit = 4000;
  s.rc = 9;
  rc = idem_jcs_canonicalize(z, n, 0, fail_sink, &s, &e);
  check(rc == 9, "canonical.sink.error-direct", "rc=%d", rc);

  /* the last flush can fail too */
  memset(&s, 0, sizeof(s));
  s.nLimit = n - 1;
  s.rc = 11;
  rc = idem_jcs_canonicalize(z, n, 0, fail_sink, &s, &e);
  check(rc == 11, "canonical.sink.error-last-flush", "rc=%d", rc);

  /* and a working sink sees every byte exactly once */
  memset(&s, 0, sizeof(s));
  s.nLimit = (size_t)-1;
  rc = idem_jcs_canonicalize(z, n, 0, fail_sink, &s, &e);
  check(rc == 0 && s.nSeen == n, "canonical.sink.all-bytes", "rc=%d, %zu of %zu bytes", rc, s.nSeen,
        n);

  /* with the input rejected, pErr may be NULL */
  memset(&s, 0, sizeof(s));
  s.nLimit = (size_t)-1;
  rc = idem_jcs_canonicalize("{\"a\":1,\"a\":1}", 13, 0, fail_sink, &s, 0);
  check(rc == IDEM_JCS_INVALID && s.nSeen == 0, "canonical.sink.no-error-struct",
        "rc=%d, %zu bytes out", rc, s.nSeen);

  /* the input need not be NUL-terminated: only nIn bytes are read */
  {
    char *zx = malloc(4);
    char *zOut = 0;
    size_t nOut;
    memcpy(zx, "[12]", 4);
    rc = check_canon(zx, 3, &zOut, &nOut, &e);
    check(rc == IDEM_JCS_INVALID &&
              strcmp(e.msg,
                     "not valid JSON: unexpected end of input at byte 3, expected ',' or ']'") == 0,
          "canonical.input-length-respected", "rc=%d %s", rc, e.msg);
    free(zOut);
    free(zx);
  }
  free(z);
}

/* ------------------------------------------------------------------ */
/* The stored form (results, errors): numbers kept as written          */
/* ------------------------------------------------------------------ */

/* idem_jcs_stored_form of z[0..n), libc memory; as check_canon. */
static int stored_form(const char *z, size_t n, char **pzOut, size_t *pnOut, IdemJcsError *pErr) {
  IdemBuf b;
  int rc;
  memset(&b, 0, sizeof(b));
  b.pMem = &idem_libc_mem;
  memset(pErr, 0, sizeof(*pErr));
  *pzOut = 0;
  *pnOut = 0;
  rc = idem_jcs_stored_form(z, n, &idem_libc_mem, idem_buf_sink, &b, pErr);
  if (rc == IDEM_JCS_OK) rc = idem_buf_sink(&b, "", 1);
  if (rc == IDEM_JCS_OK) {
    *pzOut = b.z;
    *pnOut = b.n - 1;
    return rc;
  }
  idem_buf_free(&b);
  return rc;
}

/* zIn's stored form is zWant; zWant is its own stored form and passes
** idem_jcs_check_stored, as a replay checks it. */
static void stored_ok(const char *zName, const char *zIn, const char *zWant) {
  char *zOut = 0, *zOut2 = 0;
  size_t nOut = 0, nOut2 = 0;
  IdemJcsError e;
  char a[300], b[300];
  int rc = stored_form(zIn, strlen(zIn), &zOut, &nOut, &e);
  if (rc != IDEM_JCS_OK) {
    check_fail(zName, "rc=%d (%s) for \"%s\"", rc, e.msg,
               check_show(zIn, strlen(zIn), a, sizeof(a)));
  } else if (nOut != strlen(zWant) || memcmp(zOut, zWant, nOut) != 0) {
    check_fail(zName, "got \"%s\", want \"%s\"", check_show(zOut, nOut, a, sizeof(a)),
               check_show(zWant, strlen(zWant), b, sizeof(b)));
  } else if (stored_form(zOut, nOut, &zOut2, &nOut2, &e) != IDEM_JCS_OK || nOut2 != nOut ||
             memcmp(zOut, zOut2, nOut) != 0) {
    check_fail(zName, "the stored form is not its own stored form");
  } else if (idem_jcs_check_stored(zOut, nOut, &idem_libc_mem, &e) != IDEM_JCS_OK) {
    check_fail(zName, "the stored form fails the stored check: %s", e.msg);
  } else {
    check_pass(zName);
  }
  free(zOut);
  free(zOut2);
}

/* Both the stored form and the stored check refuse zIn with zMsg at off. */
static void stored_err(const char *zName, const char *zIn, size_t nIn, const char *zMsg,
                       size_t off) {
  char *zOut = 0;
  size_t nOut = 0;
  IdemJcsError e, e2;
  int rc = stored_form(zIn, nIn, &zOut, &nOut, &e);
  int rc2;
  memset(&e2, 0, sizeof(e2));
  rc2 = idem_jcs_check_stored(zIn, nIn, &idem_libc_mem, &e2);
  if (rc != IDEM_JCS_INVALID || rc2 != IDEM_JCS_INVALID) {
    check_fail(zName, "rc=%d, check rc=%d, want IDEM_JCS_INVALID for both", rc, rc2);
  } else if (strcmp(e.msg, zMsg) != 0 || strcmp(e2.msg, zMsg) != 0) {
    check_fail(zName, "messages \"%s\" / \"%s\", want \"%s\"", e.msg, e2.msg, zMsg);
  } else if (e.offset != off || e2.offset != off) {
    check_fail(zName, "offsets %zu / %zu, want %zu", e.offset, e2.offset, off);
  } else {
    check_pass(zName);
  }
  free(zOut);
}

#define STORED_ERR(name, in, msg, off) stored_err("stored." name, in, sizeof(in) - 1, msg, off)

static void test_stored(void) {
  stored_ok("stored.int64-id", "{\"id\": 1234567890123456789}", "{\"id\":1234567890123456789}");
  stored_ok("stored.int64-range", "[9223372036854775807, -9223372036854775808]",
            "[9223372036854775807,-9223372036854775808]");
  stored_ok("stored.beyond-int64", "[18446744073709551616,123456789012345678901234567890]",
            "[18446744073709551616,123456789012345678901234567890]");
  stored_ok("stored.one-point-zero", "[1.0,1,1.50,1E2,1e+2,2.5E-3]",
            "[1.0,1,1.50,1E2,1e+2,2.5E-3]");
  stored_ok("stored.tenth-digits", "[0.1,0.1000000000000000055511151231257827]",
            "[0.1,0.1000000000000000055511151231257827]");
  stored_ok("stored.minus-zero", "[-0,-0.0,0e0,-0E-0]", "[-0,-0.0,0e0,-0E-0]");
  stored_ok("stored.overflow-kept", "{\"big\":1e400,\"tiny\":1e-400}",
            "{\"big\":1e400,\"tiny\":1e-400}");
  stored_ok("stored.scalar", " -12345678901234567890 ", "-12345678901234567890");
  stored_ok("stored.structure",
            " { \"b\" : \"\\u0041\\/\" , \"a\" : [ 1.50 , {\"z\":null,\"y\":true} ] } ",
            "{\"a\":[1.50,{\"y\":true,\"z\":null}],\"b\":\"A/\"}");
  stored_ok("stored.utf16-order", "{\"\\ud83d\\ude00\":1.0,\"\\ufb01\":2.0}",
            "{\"\xf0\x9f\x98\x80\":1.0,\"\xef\xac\x81\":2.0}");
  /* arguments keep the I-JSON rules */
  ERR("args-keep-safe-integers", "{\"id\":1234567890123456789}",
      "integer 1234567890123456789 at byte 6 is beyond 2^53-1 and would lose precision; send it as "
      "a string",
      6);
  ERR("args-keep-overflow", "[1e400]", "number 1e400 at byte 1 overflows a double", 1);
  STORED_ERR("leading-zero", "[01]",
             "not valid JSON: unexpected byte 0x31 at byte 2, expected ',' or ']'", 2);
  STORED_ERR("no-integer-part", ".5",
             "not valid JSON: unexpected byte 0x2e at byte 0, expected a JSON value", 0);
  STORED_ERR(
      "no-fraction-digit", "1.",
      "not valid JSON: unexpected end of input at byte 2, expected a digit after the decimal point",
      2);
  STORED_ERR("no-exponent-digit", "1e+",
             "not valid JSON: unexpected end of input at byte 3, expected a digit in the exponent",
             3);
  STORED_ERR("minus-alone", "-",
             "not valid JSON: unexpected end of input at byte 1, expected a digit", 1);
  STORED_ERR("nan", "NaN", "not valid JSON: unexpected byte 0x4e at byte 0, expected a JSON value",
             0);
  STORED_ERR("duplicate", "{\"id\":1,\"id\":1.0}",
             "duplicate member name \"id\" in the object at byte 0", 0);
  STORED_ERR("lone-surrogate", "[\"\\ud800\"]", "lone surrogate \\ud800 at byte 2", 2);
  STORED_ERR("bad-utf8", "[\"\xff\"]", "invalid UTF-8 byte 0xff at byte 2", 2);
  STORED_ERR("bom",
             "\xef\xbb\xbf"
             "1",
             "a leading byte order mark (U+FEFF) at byte 0 is not allowed", 0);
}

int main(void) {
  test_structure();
  test_escapes();
  test_utf16_order();
  test_numbers();
  test_errors();
  test_big_objects();
  test_depth();
  test_size_cap();
  test_number_format();
  test_shortest_table();
  test_locale();
  test_oom();
  test_oom_digest();
  test_sink();
  test_stored();
  return check_done();
}

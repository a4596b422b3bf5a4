/*
** test_jcs.c: the RFC 8785 conformance vectors against canonical.c.
**
** Usage: test_jcs DIR, where DIR is the JCS vector directory
** ($SHARED/conformance/jcs; its README.md describes the layout):
**
**   input/X.json -> output/X.json   canonicalised byte for byte, one check
**                                   per document (outhex/X.txt must agree
**                                   with output/X.json too)
**   es6numbers/es6testfile10k.txt   "HEX,EXPECTED" lines: every double
**                                   through idem_jcs_number, then through
**                                   the canonicaliser as a JSON literal
**
** The vectors are read where they are and never copied into the project.
** When DIR is absent the program prints SKIP with the reason.
*/
#include "check.h"

#include <errno.h>
#include <sys/stat.h>

static const char *azDoc[] = {"arrays", "french", "structures", "unicode", "values", "weird"};

/* Read a whole file; returns a malloc'd buffer (NUL-terminated, length in
** *pn) or NULL with errno set. */
static char *read_file(const char *zPath, size_t *pn) {
  FILE *f = fopen(zPath, "rb");
  char *z = 0;
  size_t n = 0, nAlloc = 0, got;
  if (f == 0) return 0;
  for (;;) {
    if (nAlloc - n < 65536) {
      char *zNew = realloc(z, nAlloc + 65536 + 1);
      if (zNew == 0) {
        free(z);
        fclose(f);
        errno = ENOMEM;
        return 0;
      }
      z = zNew;
      nAlloc += 65536;
    }
    got = fread(z + n, 1, nAlloc - n, f);
    n += got;
    if (got == 0) break;
  }
  if (ferror(f)) {
    free(z);
    fclose(f);
    errno = EIO;
    return 0;
  }
  fclose(f);
  z[n] = 0;
  *pn = n;
  return z;
}

/* Decode "aa bb cc\n..." hex pairs; returns the byte count or -1. */
static long decode_hex(const char *z, size_t n, unsigned char *aOut, size_t nOut) {
  size_t i = 0, o = 0;
  while (i < n) {
    unsigned v = 0;
    int k;
    if (z[i] == ' ' || z[i] == '\n' || z[i] == '\r') {
      i++;
      continue;
    }
    for (k = 0; k < 2; k++, i++) {
      char c = i < n ? z[i] : 0;
      v <<= 4;
      if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
      else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
      else return -1;
    }
    if (o >= nOut) return -1;
    aOut[o++] = (unsigned char)v;
  }
  return (long)o;
}

/* The first byte where two buffers differ. */
static size_t first_diff(const char *a, size_t na, const char *b, size_t nb) {
  size_t i = 0;
  while (i < na && i < nb && a[i] == b[i]) i++;
  return i;
}

static void test_document(const char *zDir, const char *zDoc) {
  char zPath[4096], zName[100], zA[200], zB[200];
  char *zIn = 0, *zWant = 0, *zHex = 0, *zOut = 0;
  unsigned char *aHex = 0;
  size_t nIn = 0, nWant = 0, nHex = 0, nOut = 0, d;
  long nHexBytes;
  IdemJcsError e;
  int rc;

  snprintf(zName, sizeof(zName), "jcs.vector.%s", zDoc);
  snprintf(zPath, sizeof(zPath), "%s/input/%s.json", zDir, zDoc);
  zIn = read_file(zPath, &nIn);
  if (zIn == 0) {
    check_fail(zName, "cannot read %s: %s", zPath, strerror(errno));
    goto done;
  }
  snprintf(zPath, sizeof(zPath), "%s/output/%s.json", zDir, zDoc);
  zWant = read_file(zPath, &nWant);
  if (zWant == 0) {
    check_fail(zName, "cannot read %s: %s", zPath, strerror(errno));
    goto done;
  }
  snprintf(zPath, sizeof(zPath), "%s/outhex/%s.txt", zDir, zDoc);
  zHex = read_file(zPath, &nHex);
  if (zHex == 0) {
    check_fail(zName, "cannot read %s: %s", zPath, strerror(errno));
    goto done;
  }
  aHex = malloc(nHex + 1);
  nHexBytes = aHex ? decode_hex(zHex, nHex, aHex, nHex) : -1;
  if (nHexBytes != (long)nWant || memcmp(aHex, zWant, nWant) != 0) {
    check_fail(zName, "outhex/%s.txt does not hold the bytes of output/%s.json", zDoc, zDoc);
    goto done;
  }
  rc = check_canon(zIn, nIn, &zOut, &nOut, &e);
  if (rc != IDEM_JCS_OK) {
    check_fail(zName, "refused (rc=%d): %s", rc, e.msg);
    goto done;
  }
  if (nOut != nWant || memcmp(zOut, zWant, nWant) != 0) {
    d = first_diff(zOut, nOut, zWant, nWant);
    check_fail(zName, "differs at byte %zu of %zu: got \"%s\", want \"%s\"", d, nWant,
               check_show(zOut + d, nOut - d < 40 ? nOut - d : 40, zA, sizeof(zA)),
               check_show(zWant + d, nWant - d < 40 ? nWant - d : 40, zB, sizeof(zB)));
    goto done;
  }
  check_pass(zName);
done:
  free(zIn);
  free(zWant);
  free(zHex);
  free(aHex);
  free(zOut);
}

/* An integer literal (no '.', 'e', 'E') whose magnitude exceeds 2^53-1. */
static int is_big_integer_literal(const char *z) {
  const char *zDigits = z[0] == '-' ? z + 1 : z;
  size_t nd = strlen(zDigits);
  if (strpbrk(z, ".eE")) return 0;
  return nd > 16 || (nd == 16 && strcmp(zDigits, IDEM_SAFE_INT_DIGITS) > 0);
}

static void test_es6numbers(const char *zDir) {
  char zPath[4096];
  char *zFile, *zLine, *zNext;
  size_t nFile = 0;
  long nLine = 0, nFmtBad = 0, nLitBad = 0, nLitRefused = 0, nRtBad = 0, nBadLine = 0;
  char zFmtFirst[3][160], zLitFirst[3][300], zRtFirst[3][300];

  snprintf(zPath, sizeof(zPath), "%s/es6numbers/es6testfile10k.txt", zDir);
  zFile = read_file(zPath, &nFile);
  if (zFile == 0) {
    check_fail("jcs.es6numbers.format", "cannot read %s: %s", zPath, strerror(errno));
    return;
  }
  for (zLine = zFile; zLine < zFile + nFile && *zLine; zLine = zNext) {
    char *zEnd = strchr(zLine, '\n'), *zComma, *zWant;
    uint64_t bits;
    double v;
    char zGot[40], zLit[40];
    char *zOut = 0;
    size_t nOut = 0;
    IdemJcsError e;
    int rc;

    if (zEnd) *zEnd = 0;
    zNext = zEnd ? zEnd + 1 : zFile + nFile;
    if (*zLine == 0) continue;
    nLine++;
    zComma = strchr(zLine, ',');
    if (zComma == 0 || zComma == zLine || zComma - zLine > 16) {
      nBadLine++;
      continue;
    }
    *zComma = 0;
    zWant = zComma + 1;
    bits = strtoull(zLine, 0, 16);
    memcpy(&v, &bits, sizeof(v));

    /* 1. the formatter */
    idem_jcs_number(v, zGot);
    if (strcmp(zGot, zWant) != 0) {
      if (nFmtBad < 3) {
        snprintf(zFmtFirst[nFmtBad], sizeof(zFmtFirst[0]), "line %ld %s: got %s, want %s", nLine,
                 zLine, zGot, zWant);
      }
      nFmtBad++;
    }

    /* 2. the expected text as a JSON literal: canonical text is a fixed point */
    rc = check_canon(zWant, strlen(zWant), &zOut, &nOut, &e);
    if (is_big_integer_literal(zWant)) {
      /* refused by design: such an integer literal could stand for several IDs */
      if (rc == IDEM_JCS_INVALID && strstr(e.msg, "is beyond 2^53-1")) {
        nLitRefused++;
      } else {
        if (nLitBad < 3) {
          snprintf(zLitFirst[nLitBad], sizeof(zLitFirst[0]), "line %ld %s: rc=%d, want a refusal",
                   nLine, zWant, rc);
        }
        nLitBad++;
      }
    } else if (rc != IDEM_JCS_OK || nOut != strlen(zWant) || memcmp(zOut, zWant, nOut) != 0) {
      if (nLitBad < 3) {
        snprintf(zLitFirst[nLitBad], sizeof(zLitFirst[0]), "line %ld %s: rc=%d %s got %.40s", nLine,
                 zWant, rc, rc ? e.msg : "", zOut ? zOut : "");
      }
      nLitBad++;
    }
    free(zOut);
    zOut = 0;

    /* 3. 17 significant digits of the double (always with an exponent, so
    ** never an integer literal): the parser must round to the same double */
    snprintf(zLit, sizeof(zLit), "%.16e", v);
    rc = check_canon(zLit, strlen(zLit), &zOut, &nOut, &e);
    if (rc != IDEM_JCS_OK || nOut != strlen(zWant) || memcmp(zOut, zWant, nOut) != 0) {
      if (nRtBad < 3) {
        snprintf(zRtFirst[nRtBad], sizeof(zRtFirst[0]), "line %ld %s: rc=%d %s got %.40s, want %s",
                 nLine, zLit, rc, rc ? e.msg : "", zOut ? zOut : "", zWant);
      }
      nRtBad++;
    }
    free(zOut);
  }
  free(zFile);

  if (nBadLine || nLine != 10000) {
    check_fail("jcs.es6numbers.file", "%ld lines, %ld malformed; want 10000 well-formed lines",
               nLine, nBadLine);
  } else {
    check_pass("jcs.es6numbers.file");
  }
  if (nFmtBad) {
    check_fail("jcs.es6numbers.format", "%ld of %ld lines differ; first: %s%s%s%s%s", nFmtBad,
               nLine, zFmtFirst[0], nFmtBad > 1 ? "; " : "", nFmtBad > 1 ? zFmtFirst[1] : "",
               nFmtBad > 2 ? "; " : "", nFmtBad > 2 ? zFmtFirst[2] : "");
  } else {
    check_pass("jcs.es6numbers.format");
  }
  if (nLitBad) {
    check_fail("jcs.es6numbers.canonical-literal", "%ld of %ld lines differ; first: %s%s%s",
               nLitBad, nLine, zLitFirst[0], nLitBad > 1 ? "; " : "",
               nLitBad > 1 ? zLitFirst[1] : "");
  } else {
    check_pass("jcs.es6numbers.canonical-literal");
  }
  printf(
      "   es6numbers: %ld expected texts are integer literals beyond 2^53-1, refused by design\n",
      nLitRefused);
  if (nRtBad) {
    check_fail("jcs.es6numbers.canonical-17-digits", "%ld of %ld lines differ; first: %s%s%s",
               nRtBad, nLine, zRtFirst[0], nRtBad > 1 ? "; " : "", nRtBad > 1 ? zRtFirst[1] : "");
  } else {
    check_pass("jcs.es6numbers.canonical-17-digits");
  }
}

int main(int argc, char **argv) {
  struct stat st;
  size_t i;
  if (argc != 2) {
    fprintf(stderr, "usage: %s JCS-VECTOR-DIR\n", argv[0]);
    return 2;
  }
  if (stat(argv[1], &st) != 0 || !S_ISDIR(st.st_mode)) {
    printf(
        "SKIP jcs: vector directory %s is absent (set SHARED to the folder that holds "
        "conformance/jcs)\n",
        argv[1]);
    return 0;
  }
  for (i = 0; i < sizeof(azDoc) / sizeof(azDoc[0]); i++) test_document(argv[1], azDoc[i]);
  test_es6numbers(argv[1]);
  return check_done();
}

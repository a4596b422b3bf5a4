/*
** jcs_cli.c: canonicalise many framed documents in one process, for the
** differential test against the npm package canonicalize (diff.mjs).
**
** stdin:  a sequence of frames  "<byte count>\n<bytes>"
** stdout: one frame per input   "<status> <byte count>\n<bytes>"
**         status O: the bytes are the canonical text
**                E: the bytes are the refusal message ("<offset>: <msg>")
**                N: out of memory (no bytes)
** Exit status 0 when every frame was read and answered, 2 on a framing
** or I/O error. Linked with the pure sources only (no SQLite).
*/
#include "idem_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Read "<digits>\n"; 1 with *pn set, 0 at a clean end of input, -1 on a
** malformed header. */
static int read_header(FILE *f, size_t *pn) {
  int c, nDigit = 0;
  size_t n = 0;
  while ((c = getc(f)) != EOF && c >= '0' && c <= '9') {
    if (n > ((size_t)-1 - 9) / 10) return -1;
    n = n * 10 + (size_t)(c - '0');
    nDigit++;
  }
  if (c == EOF && nDigit == 0) return 0;
  if (c != '\n' || nDigit == 0) return -1;
  *pn = n;
  return 1;
}

static int write_frame(char cStatus, const char *z, size_t n) {
  if (printf("%c %zu\n", cStatus, n) < 0) return -1;
  if (n && fwrite(z, 1, n, stdout) != n) return -1;
  return 0;
}

int main(void) {
  char *zIn = 0;
  size_t nAlloc = 0, n = 0;
  long nDoc = 0;
  int rc = 0, h;
  while ((h = read_header(stdin, &n)) == 1) {
    IdemBuf out;
    IdemJcsError e;
    int jrc;
    if (n + 1 > nAlloc) {
      char *zNew = realloc(zIn, n + 1);
      if (zNew == 0) {
        fprintf(stderr, "jcs_cli: out of memory for a %zu-byte document\n", n);
        rc = 2;
        break;
      }
      zIn = zNew;
      nAlloc = n + 1;
    }
    if (n && fread(zIn, 1, n, stdin) != n) {
      fprintf(stderr, "jcs_cli: document %ld is truncated\n", nDoc);
      rc = 2;
      break;
    }
    memset(&out, 0, sizeof(out));
    out.pMem = &idem_libc_mem;
    memset(&e, 0, sizeof(e));
    jrc = idem_jcs_canonicalize(zIn, n, &idem_libc_mem, idem_buf_sink, &out, &e);
    if (jrc == IDEM_JCS_OK) {
      if (write_frame('O', out.z, out.n)) rc = 2;
    } else if (jrc == IDEM_JCS_INVALID) {
      char zMsg[260];
      int m = snprintf(zMsg, sizeof(zMsg), "%zu: %s", e.offset, e.msg);
      if (write_frame('E', zMsg, (size_t)m)) rc = 2;
    } else {
      if (write_frame('N', "", 0)) rc = 2;
    }
    idem_buf_free(&out);
    nDoc++;
    if (rc) break;
  }
  if (h < 0) {
    fprintf(stderr, "jcs_cli: malformed frame header after document %ld\n", nDoc);
    rc = 2;
  }
  if (fflush(stdout) != 0) rc = 2;
  free(zIn);
  return rc;
}

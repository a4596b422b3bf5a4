/*
** num_cli.c: the number conversions, line by line, for the differential
** test against Node's JSON.stringify (numbers.mjs, tests/suites/14-numbers.sh).
**
** stdin, one request a line:
**   b HHHHHHHHHHHHHHHH   the double with these 64 bits (hex), printed by
**                        idem_jcs_number
**   t LITERAL            the JSON text LITERAL through the canonicaliser
** stdout, one answer a line: "O <text>" or "E <offset>: <refusal message>"
** ("N" when out of memory). Exit status 0 when every line was answered,
** 2 on a malformed request or an I/O error. Linked with the pure sources
** only (no SQLite).
*/
#include "idem_internal.h"
#include "idem_num.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  char *zLine = 0;
  size_t nAlloc = 0;
  ssize_t nLine;
  long iLine = 0;
  int rc = 0;
  static char aOut[1 << 16];
  setvbuf(stdout, aOut, _IOFBF, sizeof(aOut));
  while ((nLine = getline(&zLine, &nAlloc, stdin)) > 0) {
    iLine++;
    if (zLine[nLine - 1] == '\n') zLine[--nLine] = 0;
    if (nLine == 18 && zLine[0] == 'b' && zLine[1] == ' ') {
      char zNum[40], *zEnd;
      unsigned long long u = strtoull(zLine + 2, &zEnd, 16);
      double v;
      if (*zEnd != 0) {
        rc = 2;
        break;
      }
      memcpy(&v, &u, sizeof(v));
      idem_jcs_number(v, zNum);
      printf("O %s\n", zNum);
    } else if (nLine >= 2 && zLine[0] == 't' && zLine[1] == ' ') {
      IdemBuf out;
      IdemJcsError e;
      int jrc;
      memset(&out, 0, sizeof(out));
      out.pMem = &idem_libc_mem;
      memset(&e, 0, sizeof(e));
      jrc = idem_jcs_canonicalize(zLine + 2, (size_t)nLine - 2, &idem_libc_mem, idem_buf_sink, &out,
                                  &e);
      if (jrc == IDEM_JCS_OK) {
        printf("O %.*s\n", (int)out.n, out.z);
      } else if (jrc == IDEM_JCS_INVALID) {
        printf("E %zu: %s\n", e.offset, e.msg);
      } else {
        printf("N\n");
      }
      idem_buf_free(&out);
    } else {
      rc = 2;
      break;
    }
  }
  if (rc) fprintf(stderr, "num_cli: malformed request on line %ld\n", iLine);
  if (fflush(stdout) != 0) rc = 2;
  free(zLine);
  return rc;
}

/*
** grammar.c: the key grammar and key derivation, without SQLite.
**
** A key component (tenant, conversation, tool, operation id) is 1 to 128
** characters from A-Z a-z 0-9 _ -, taken exactly as given. A derived key
** is "idem1-" followed by the lowercase hex of XXH3-128 over
** tenant ':' conversation ':' tool ':' canonical(args), printed in XXH3's
** canonical (big-endian) byte order, as `xxhsum -H2` prints it. The colon
** framing is unambiguous because no component may contain ':'.
**
** The SQL functions that use these (idem_valid_key, idem_check_key,
** idem_key, idem_fingerprint) live in keyfuncs.c.
*/
#include "idem_internal.h"

#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

static const unsigned char key_byte_ok[256] = {
    ['-'] = 1, ['_'] = 1, ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1,
    ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1, ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1,
    ['E'] = 1, ['F'] = 1, ['G'] = 1, ['H'] = 1, ['I'] = 1, ['J'] = 1, ['K'] = 1, ['L'] = 1,
    ['M'] = 1, ['N'] = 1, ['O'] = 1, ['P'] = 1, ['Q'] = 1, ['R'] = 1, ['S'] = 1, ['T'] = 1,
    ['U'] = 1, ['V'] = 1, ['W'] = 1, ['X'] = 1, ['Y'] = 1, ['Z'] = 1, ['a'] = 1, ['b'] = 1,
    ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1, ['g'] = 1, ['h'] = 1, ['i'] = 1, ['j'] = 1,
    ['k'] = 1, ['l'] = 1, ['m'] = 1, ['n'] = 1, ['o'] = 1, ['p'] = 1, ['q'] = 1, ['r'] = 1,
    ['s'] = 1, ['t'] = 1, ['u'] = 1, ['v'] = 1, ['w'] = 1, ['x'] = 1, ['y'] = 1, ['z'] = 1,
};

int idem_grammar_check(const unsigned char *z, size_t n, size_t *pDetail) {
  size_t i, nChar = 0;
  if (n == 0) return IDEM_KEY_EMPTY;
  if (n > IDEM_KEY_MAX_CHARS) {
    /* count characters: every byte that is not a UTF-8 continuation */
    for (i = 0; i < n; i++) nChar += (z[i] & 0xC0) != 0x80;
    if (nChar > IDEM_KEY_MAX_CHARS) {
      *pDetail = nChar;
      return IDEM_KEY_TOO_LONG;
    }
  }
  for (i = 0; i < n; i++) {
    if (!key_byte_ok[z[i]]) {
      *pDetail = i;
      return IDEM_KEY_BAD_BYTE;
    }
  }
  return IDEM_KEY_OK;
}

void idem_hex(const unsigned char *a, size_t n, char *zOut) {
  static const char hexd[] = "0123456789abcdef";
  size_t i;
  for (i = 0; i < n; i++) {
    zOut[2 * i] = hexd[a[i] >> 4];
    zOut[2 * i + 1] = hexd[a[i] & 15];
  }
  zOut[2 * n] = 0;
}

/* The digest's sink: the canonical text is gathered in a small buffer
** after the prefix and hashed in one call when it fits (most tool
** arguments); a longer text switches to the streaming state. */
typedef struct DigestSink DigestSink;
struct DigestSink {
  int bStreaming;
  size_t n;
  char a[1536];
  XXH3_state_t state;
};

static int digest_sink(void *pCtx, const char *p, size_t n) {
  DigestSink *d = (DigestSink *)pCtx;
  if (!d->bStreaming) {
    if (n <= sizeof(d->a) - d->n) {
      memcpy(d->a + d->n, p, n);
      d->n += n;
      return IDEM_JCS_OK;
    }
    XXH3_INITSTATE(&d->state);
    XXH3_128bits_reset(&d->state);
    XXH3_128bits_update(&d->state, d->a, d->n);
    d->bStreaming = 1;
  }
  XXH3_128bits_update(&d->state, p, n);
  return IDEM_JCS_OK;
}

/* Start d with the key prefix (hashed first, as if sunk). */
static void digest_begin(DigestSink *d, const char *zPrefix, size_t nPrefix) {
  d->bStreaming = 0;
  d->n = 0;
  if (nPrefix) digest_sink(d, zPrefix, nPrefix); /* zPrefix may be 0 then */
}

/* The hash of everything sunk into d, as 32 hex digits into zHex. */
static void digest_end(DigestSink *d, char *zHex) {
  XXH128_canonical_t canon;
  XXH128_hash_t h = d->bStreaming ? XXH3_128bits_digest(&d->state) : XXH3_128bits(d->a, d->n);
  XXH128_canonicalFromHash(&canon, h);
  idem_hex(canon.digest, sizeof(canon.digest), zHex);
}

int idem_digest(const char *zPrefix, size_t nPrefix, const char *zArgs, size_t nArgs,
                const IdemMem *pMem, char *zHex, IdemJcsError *pErr) {
  DigestSink d;
  int rc;
  if (pMem == 0) pMem = &idem_libc_mem;
  digest_begin(&d, zPrefix, nPrefix);
  rc = idem_jcs_canonicalize(zArgs, nArgs, pMem, digest_sink, &d, pErr);
  if (rc == IDEM_JCS_OK) digest_end(&d, zHex);
  return rc;
}

void idem_digest_bytes(const char *zPrefix, size_t nPrefix, const char *z, size_t n, char *zHex) {
  DigestSink d;
  digest_begin(&d, zPrefix, nPrefix);
  if (n) digest_sink(&d, z, n); /* z may be 0 then */
  digest_end(&d, zHex);
}

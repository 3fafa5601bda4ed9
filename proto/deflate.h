/*
 * deflate.h: answers compressed as the client asks (HTTP's Accept-Encoding:
 * gzip or deflate), by zlib (docs/HTTP.md "Compressed requests and answers").
 * The other direction, bodies that come compressed, is inflate.h.
 */
#ifndef RNND_PROTO_DEFLATE_H
#define RNND_PROTO_DEFLATE_H

#include <stdbool.h>
#include <stddef.h>

#include "inflate.h"

/*
 * The encoding an Accept-Encoding header value asks for (RFC 9110 §12.5.3):
 * gzip (or x-gzip) or deflate, whichever has the higher q-value above 0, or
 * `*`'s for one not named; gzip on a tie.  RNND_ENCODING_IDENTITY when
 * neither is acceptable, when identity is named with a higher q-value than
 * both, or for NULL.  Elements it cannot read are skipped.  Thread-safe.
 */
enum rnnd_encoding rnnd_accept_encoding(const char *header);

/*
 * Compresses in[0..len) as enc (gzip, or deflate in zlib's format as HTTP
 * names it) at zlib's fastest level, with Huffman coding alone for tensors
 * (numbers as text or floats: as small, in half the time or less, as with
 * zlib's string matching, which pays for text that repeats), into a new
 * buffer of at most
 * deflateBound(len) bytes, which the caller frees with rnnd_free().  Returns
 * 0, or RNND_ENOMEM (or RNND_EINTERNAL should zlib fail): the caller then
 * sends in as it is.  Thread-safe.
 */
int rnnd_deflate(enum rnnd_encoding enc, bool tensors, const void *in, size_t len, char **ret,
                 size_t *ret_len);

#endif

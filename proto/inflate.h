/*
 * inflate.h: bodies and gRPC messages that come compressed (HTTP's
 * Content-Encoding, gRPC's grpc-encoding: gzip or deflate), decompressed by
 * zlib into a buffer no larger than the limit the caller names
 * (docs/HTTP.md "Compressed requests and answers").  Answers compressed as
 * Accept-Encoding asks are deflate.h.
 */
#ifndef RNND_PROTO_INFLATE_H
#define RNND_PROTO_INFLATE_H

#include <stddef.h>

#include "error.h"

enum rnnd_encoding {
        RNND_ENCODING_IDENTITY,
        RNND_ENCODING_GZIP,
        RNND_ENCODING_DEFLATE,
        RNND_ENCODING_OTHER, /* one rnnd does not take */
};

/* What the value name[0..len) of a content or message encoding header names
 * (case-insensitive; NULL, empty and "identity" are identity).  Thread-safe. */
enum rnnd_encoding rnnd_encoding_of(const char *name, size_t len);

/* The encodings rnnd takes, for grpc-accept-encoding and messages.  Static. */
#define RNND_ENCODINGS_ACCEPTED "identity,deflate,gzip"

/*
 * Decompresses in[0..len), gzip (one member or several) or deflate (zlib's
 * format, which is what HTTP and gRPC call deflate), into a new buffer of at
 * most max bytes, NUL-terminated after *ret_len, which the caller frees with
 * rnnd_free().  Returns 0; RNND_EINVAL when the data is not whole, valid
 * compressed data; RNND_ETOOBIG when it decompresses to more than max bytes
 * (limit_name, the setting, is named in the message); RNND_ENOMEM.  Never
 * holds more than max + 2 bytes for the output, so a small message that
 * inflates to gigabytes costs no more than one at the limit.  Thread-safe.
 */
int rnnd_inflate(enum rnnd_encoding enc, const void *in, size_t len, size_t max,
                 const char *limit_name, char **ret, size_t *ret_len, rnnd_error_t *reterr);

#endif

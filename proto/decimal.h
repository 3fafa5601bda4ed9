/*
 * decimal.h: plain decimal numbers, as Content-Length, the Inference-Header-
 * Content-Length, a model version in a path and the settings write them.
 */
#ifndef RNND_PROTO_DECIMAL_H
#define RNND_PROTO_DECIMAL_H

#include <stdint.h>

/*
 * Parses s, decimal digits only ("0", "42"; no sign, space or prefix), into
 * *ret.  Returns 0, RNND_EINVAL for an empty s or any other byte, or
 * RNND_ELIMIT when the number does not fit uint64_t; *ret is unchanged on
 * failure.  Thread-safe.
 */
int rnnd_decimal_parse(const char *s, uint64_t *ret);

#endif

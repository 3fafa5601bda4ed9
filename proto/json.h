/*
 * json.h: jansson helpers shared by the parsers of proto/ and clients/ (the
 * folders that read JSON with jansson, DESIGN.md §1).
 */
#ifndef RNND_PROTO_JSON_H
#define RNND_PROTO_JSON_H

#include <jansson.h>
#include <stddef.h>

/*
 * Describes v for an error message ("8.5", "8.0", "\"abc\"", "true", "an
 * object", "an array of 3") into buf[n]; returns buf.  Reals always show a
 * fraction, so 8.0 does not read as the integer 8.  Thread-safe.
 */
const char *rnnd_json_describe(const json_t *v, char *buf, size_t n);

#endif

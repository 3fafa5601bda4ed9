/*
 * options-int.h: the value parsers behind options.c's table, for its unit
 * tests.  Each returns 0 and *ret, RNND_EINVAL for text that is not a value
 * of the type, or RNND_ELIMIT when the number does not fit uint64_t; *ret is
 * unchanged on failure.  Thread-safe.
 */
#ifndef RNND_DAEMON_OPTIONS_INT_H
#define RNND_DAEMON_OPTIONS_INT_H

#include <stdbool.h>
#include <stdint.h>

/* Decimal with an optional K, M, G or T suffix, also spelled KiB, MiB, ... (powers of 1024). */
int rnnd__opt_parse_bytes(const char *s, uint64_t *ret);

/* Seconds, with an optional s, m or h suffix ("30", "30s", "5m", "1h"). */
int rnnd__opt_parse_duration(const char *s, uint64_t *ret);

/* yes/no, true/false, on/off, 1/0 (any case). */
int rnnd__opt_parse_bool(const char *s, bool *ret);

#endif

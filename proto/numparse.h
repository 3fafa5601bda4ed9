/*
 * numparse.h: a JSON number read into a double, fast, for the tensor data
 * of requests (DESIGN.md §5).
 *
 * The value is exactly what strtod() gives for the same text (the correctly
 * rounded double), so (float) of rnnd_numparse()'s value is what the jansson
 * path gives today, double rounding included.  Numbers whose significant
 * digits make an integer up to 2^53, with a power of ten in 10^-22..10^22
 * (what JSON writers mostly send), take Clinger's fast path (one exact multiplication or division);
 * the rest go to strtod() on a normalised copy of at most 800 significant digits and a sticky
 * digit, which rounds the same, so no allocation and no NUL terminator are needed. No state: any
 * thread.
 */
#ifndef RNND_PROTO_NUMPARSE_H
#define RNND_PROTO_NUMPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rnnd_number {
        double d;     /* the value, as strtod() reads it */
        int64_t i;    /* the value when is_int */
        bool is_int;  /* no fraction or exponent, and in int64's range: jansson's integer */
        bool big_int; /* no fraction or exponent, beyond int64's range: jansson refuses
                       * the document ("too big integer"), so the caller must too */
        size_t len;   /* bytes the number took */
};

/*
 * Reads the JSON number (RFC 8259 §6: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?)
 * at the start of p[0..n) into *ret.  Returns 0, or RNND_EINVAL when p does
 * not start with one (a sign alone, a leading zero followed by a digit, a
 * point or exponent without digits, NaN, Infinity, hex); what follows the
 * number is the caller's to check.  A number too large for a double reads
 * as +-HUGE_VAL, as strtod() gives.
 */
int rnnd_numparse(const char *p, size_t n, struct rnnd_number *ret);

/* 10^0 .. 10^22, each exact in a double (the fast path's divisors). */
extern const double rnnd__pow10[23];

#endif

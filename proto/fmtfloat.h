/*
 * fmtfloat.h: float32 to the shortest decimal that reads back as the same
 * float, written as a JSON number (DESIGN.md §5: responses render outputs as
 * JSON).
 *
 * The digits are Schubfach's (R. Giulietti, "The Schubfach way to render
 * doubles", 2020), specialised to binary32: the shortest decimal in the
 * rounding interval of x, and of those the closest to x (ties to an even
 * digit), so that strtof(text) == x for every finite x.  It costs a few
 * 64-bit multiplications and no division; there is no state, so it is
 * thread-safe.
 */
#ifndef RNND_PROTO_FMTFLOAT_H
#define RNND_PROTO_FMTFLOAT_H

#include <stddef.h>

/* Room for the longest text rnnd_fmtfloat() writes ("-0.0000123456789": 16), NUL included. */
#define RNND_FMTFLOAT_LEN 24

/*
 * Writes x to buf as a JSON number and a NUL, and returns its length
 * (without the NUL).  The form is like %g's, with the fewest digits: plain
 * ("0.1", "-3", "123456.7") when the decimal exponent X is in -5 <= X < 9,
 * else "d.ddde+XX"/"d.ddde-XX" (two exponent digits at least).  Negative zero
 * is "-0.0", since a JSON reader takes "-0" for the integer 0.
 *
 * JSON has no NaN or infinity.  Given one, it writes "null" (returns 4), as
 * JavaScript's JSON.stringify does, so that the document stays valid and the
 * client sees which element it was; the response renderer is to write
 * these (today it writes NaN and Infinity, which JSON readers refuse).
 * Any thread.
 */
size_t rnnd_fmtfloat(float x, char buf[RNND_FMTFLOAT_LEN]);

#endif

/*
 * numscan.h: a request's "data" array read from the JSON text straight into
 * a tensor buffer, without a jansson node per number (DESIGN.md §5).
 *
 * The fast path only: it reads a well-formed array whose nesting, counts and
 * numbers are all what the tensor wants, and gives up (returns 0) on
 * anything else, so that the caller parses that input the jansson way and
 * reports the error exactly as before (a bad number, NaN or Infinity, a
 * wrong count, nesting that does not match the shape, a value out of the
 * dtype's range).  Numbers are read by rnnd_numparse(), or, in the short
 * form most writers send (-?D+(.D+)?, 19 digits at most), inline by the same
 * arithmetic, so each FP32 value is (float)strtod(), as the jansson path
 * gives.  No allocation, no state: any thread.
 */
#ifndef RNND_PROTO_NUMSCAN_H
#define RNND_PROTO_NUMSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

/*
 * Reads the array at the start of p[0..n) (after JSON whitespace): nested
 * arrays of exactly shape[0..ndim), or with flat set one array of
 * numel = product(shape) numbers, into dst (numel elements of dt, which is
 * RNND_DT_F32 or RNND_DT_I64; INT64 takes JSON integers only).  The caller
 * has checked the shape against its limits (ndim <= RNND_MAX_DIMS, numel
 * bounded), so dst holds numel elements.  Returns the
 * bytes read, through the closing ']', or 0 when it gives up (dst may then
 * be partly written).
 */
size_t rnnd_numscan(const char *p, size_t n, const uint64_t *shape, unsigned ndim, bool flat,
                    rnnd_dtype_t dt, void *dst);

#endif

/*
 * stfile.h: a safetensors file, read with pread() (never mapped, so a file
 * truncated underneath cannot raise SIGBUS).  Opening checks the header
 * length against the file size and every tensor entry against the data
 * buffer (proto/safetensors.h) before any data byte is used.
 */
#ifndef RNND_ENGINE_STFILE_H
#define RNND_ENGINE_STFILE_H

#include <stdint.h>

#include "error.h"
#include "safetensors.h"

typedef struct rnnd_stfile rnnd_stfile_t;

/*
 * Opens the file at path (without blocking: a FIFO or device is refused as
 * not a regular file) and parses its header.  On success *ret is a new
 * reference (rnnd_stfile_close() frees it) holding the file open.  Errors:
 * RNND_EIO (cannot open or read, not a regular file), RNND_EMODEL (too
 * short, header length past the file or over RNND_ST_MAX_HEADER, bad
 * header).  Messages start with path.
 * Never writes *ret on failure.  Thread-safe.
 */
int rnnd_stfile_open(const char *path, rnnd_stfile_t **ret, rnnd_error_t *reterr);

/* Closes and frees f; accepts NULL; returns NULL. */
rnnd_stfile_t *rnnd_stfile_close(rnnd_stfile_t *f);

/* The parsed header.  Borrowed until rnnd_stfile_close(). */
const struct rnnd_st_header *rnnd_stfile_header(const rnnd_stfile_t *f);

/* The tensor called name, or NULL.  Borrowed until rnnd_stfile_close(). */
const struct rnnd_st_tensor *rnnd_stfile_find(const rnnd_stfile_t *f, const char *name);

/*
 * Copies tensor name into dst as float32, converting from F32, F16, BF16 or
 * F64.  Its shape must equal shape[0..ndim).  Errors (RNND_EMODEL, message
 * naming the tensor and what was expected): missing, wrong dtype, wrong shape;
 * RNND_EIO when the file shrank or changed (size, mtime, ctime) since open,
 * in which case dst may be partly written.  Thread-safe.
 */
int rnnd_stfile_read_f32(const rnnd_stfile_t *f, const char *name, unsigned ndim,
                         const uint64_t *shape, float *dst, rnnd_error_t *reterr);

/*
 * Copies tensor name into dst as int64, converting from I64, I32, I16, I8 or
 * U8, with the same checks as rnnd_stfile_read_f32().  Thread-safe.
 */
int rnnd_stfile_read_i64(const rnnd_stfile_t *f, const char *name, unsigned ndim,
                         const uint64_t *shape, int64_t *dst, rnnd_error_t *reterr);

#endif

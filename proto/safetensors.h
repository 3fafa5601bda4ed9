/*
 * safetensors.h: the safetensors header, parsed and checked into native
 * structs.  A file is: u64 little-endian header length N, N bytes of JSON,
 * then the data buffer.  This module sees only the JSON and the data length;
 * engine/stfile.c maps the file and reads the bytes.
 */
#ifndef RNND_PROTO_SAFETENSORS_H
#define RNND_PROTO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "tensor.h"

#define RNND_ST_MAX_HEADER  (100u << 20) /* as the reference implementation */
#define RNND_ST_MAX_TENSORS 65536u
#define RNND_ST_MAX_NAME    1024u

struct rnnd_st_tensor {
        char *name;         /* owned by the header */
        rnnd_dtype_t dtype; /* F32, F16, BF16, F64, I64, I32, ... */
        unsigned ndim;      /* 0..RNND_MAX_DIMS */
        uint64_t shape[RNND_MAX_DIMS];
        uint64_t numel;      /* product of shape */
        uint64_t begin, end; /* byte range within the data buffer */
};

struct rnnd_st_meta {
        char *key, *value; /* owned by the header */
};

struct rnnd_st_header {
        struct rnnd_st_tensor *tensors; /* sorted by name */
        size_t n_tensors;
        struct rnnd_st_meta *meta; /* "__metadata__" string map */
        size_t n_meta;
};

/*
 * Parses the header JSON buf[0..len) of a file whose data buffer has
 * data_len bytes, into *ret.  Checks: a JSON object with no duplicate keys;
 * each entry has exactly dtype, shape and data_offsets; a known dtype; at most
 * RNND_MAX_DIMS non-negative dims whose product does not overflow; offsets
 * with begin <= end <= data_len and end - begin == numel * dtype size; no two
 * tensors overlap and together they cover the whole buffer with no hole;
 * __metadata__ is a map of strings.  Returns 0, or RNND_EMODEL with a message
 * naming the tensor.  Never writes *ret on failure.  Thread-safe.
 */
int rnnd_st_header_parse(const char *buf, size_t len, uint64_t data_len, struct rnnd_st_header *ret,
                         rnnd_error_t *reterr);

/* Frees what *h owns and zeroes it.  Accepts a zeroed header. */
void rnnd_st_header_done(struct rnnd_st_header *h);

/* The tensor called name, or NULL.  Borrowed until rnnd_st_header_done(). */
const struct rnnd_st_tensor *rnnd_st_header_find(const struct rnnd_st_header *h, const char *name);

/* The metadata value for key, or NULL.  Borrowed until rnnd_st_header_done(). */
const char *rnnd_st_header_meta(const struct rnnd_st_header *h, const char *key);

#endif

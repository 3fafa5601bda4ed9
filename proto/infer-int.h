/*
 * infer-int.h: what the parts of the inference wire formats share
 * (module-private): infer.c's field paths and messages, JSON helpers, the
 * one typed-number converter and walker over nested lists, and the tensor
 * buffers, used by infer-kserve.c, infer-tfs.c and infer-bind.c.
 *
 * Messages have one style: "<path>: <problem>" while parsing
 * ("inputs[0].shape[1]: ...", "instances[2][3]: ..."), "input '<name>':
 * <problem>" or "output '<name>': <problem>" while binding.  Every function
 * here is thread-safe; err may be NULL.
 */
#ifndef RNND_PROTO_INFER_INT_H
#define RNND_PROTO_INFER_INT_H

#include <assert.h>
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "infer.h"
#include "tensor.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "tensors are little-endian on the wire and used in place");

#define PATH_LEN  160 /* a field path; longer ones are truncated */
#define SHAPE_LEN 200 /* "[a, b, ...]" of RNND_MAX_DIMS dims */

/* Sets "<path>: <message>" (or just the message when path is "") and returns code. */
int rnnd__infer_path_error(rnnd_error_t *e, int code, const char *path, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* Formats a field path into dst[PATH_LEN], truncating a long one. */
void rnnd__infer_pathf(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Sets RNND_ENOMEM, "out of memory for <what>", and returns it. */
int rnnd__infer_nomem(rnnd_error_t *e, const char *what);

/* l, or the defaults written into *buf when l is NULL. */
const struct rnnd_infer_limits *rnnd__infer_limits(const struct rnnd_infer_limits *l,
                                                   struct rnnd_infer_limits *buf);

/*
 * Fails with RNND_ELIMIT when text[0..n) nests [ and { deeper than
 * lim->max_depth, or its jansson tree would take more than lim->max_tree.
 */
int rnnd__infer_check_text(const char *s, size_t n, const struct rnnd_infer_limits *lim,
                           rnnd_error_t *err);

/* rnnd_kserve_parse() without the fast path: jansson reads every number (tests compare). */
int rnnd__kserve_parse_jansson(const void *body, size_t len, size_t json_len,
                               const struct rnnd_infer_limits *limits,
                               struct rnnd_infer_request *ret, rnnd_error_t *reterr);

/*
 * rnnd_kserve_parse()'s plain path alone (infer-kserve.c), for tests: 0 with
 * *ret, or 1 when it leaves the request to jansson (never an error of its own).
 */
int rnnd__kserve_parse_plain(const void *body, size_t len, size_t json_len,
                             const struct rnnd_infer_limits *limits,
                             struct rnnd_infer_request *ret);

/* Where a data array lies in a request's text; len 0: none found. */
struct rnnd__infer_span {
        size_t off, len;
        unsigned depth; /* the array's own nesting: 1 for a flat list */
};

/* Where the data arrays stand in a KServe request: root { inputs [ { data. */
#define RNND__INFER_SPAN_BASE_DEPTH 3u

/*
 * Writes to skel (room for n bytes) the KServe request text[0..n) with the
 * "data" array of each "inputs" element cut out ("[]" in its place), and
 * spans[i] where input i's array was; returns the skeleton's length, or 0
 * when the text is not a shape the walk knows or has no data array, and the
 * caller parses the whole text (infer-skel.c).
 */
size_t rnnd__infer_skeleton(const char *text, size_t n, char *skel,
                            struct rnnd__infer_span spans[RNND_INFER_MAX_TENSORS]);

/*
 * Parses text[0..n) into a new object in *ret, after a scan that bounds the
 * nesting and the tree's size (rnnd__infer_check_text) before any tree is
 * built.
 */
int rnnd__infer_load_object(const char *text, size_t n, const struct rnnd_infer_limits *lim,
                            json_t **ret, rnnd_error_t *err);

/* Fails on the first key of obj not in the NULL-terminated keys. */
int rnnd__infer_check_keys(json_t *obj, const char *const *keys, const char *path,
                           rnnd_error_t *err);

/* Copies a string value of at most cap - 1 bytes (non-empty when nonempty). */
int rnnd__infer_get_string(json_t *v, char *dst, size_t cap, bool nonempty, const char *path,
                           rnnd_error_t *err);
int rnnd__infer_get_bool(json_t *v, bool *dst, const char *path, rnnd_error_t *err);
int rnnd__infer_get_uint(json_t *v, uint64_t *dst, const char *path, rnnd_error_t *err);

/*
 * Converts nested lists of shape[0..ndim) (rectangular, each number fit for
 * dt) into dst, row-major.
 */
int rnnd__infer_fill_nested(const json_t *v, const uint64_t *shape, unsigned ndim, rnnd_dtype_t dt,
                            void *dst, const char *path, rnnd_error_t *err);

/* A flat list of exactly numel elements into dst. */
int rnnd__infer_fill_flat(const json_t *v, uint64_t numel, rnnd_dtype_t dt, void *dst,
                          const char *path, rnnd_error_t *err);

/*
 * The shape of nested lists, read down their first elements (TF Serving
 * carries no shape).  rnnd__infer_fill_nested() then checks that they are
 * rectangular.
 */
int rnnd__infer_nested_shape(const json_t *v, uint64_t *shape, unsigned *ndim, const char *path,
                             rnnd_error_t *err);

/*
 * Sets t's shape and dtype and checks the element count against the limit,
 * before anything is allocated for it.
 */
int rnnd__infer_set_shape(struct rnnd_tensor *t, rnnd_dtype_t dt, const uint64_t *shape,
                          unsigned ndim, const struct rnnd_infer_limits *lim, const char *path,
                          rnnd_error_t *err);

/* Gives t a new zeroed buffer of t->nbytes (none when 0). */
int rnnd__infer_alloc_data(struct rnnd_tensor *t, rnnd_error_t *err);

/*
 * Ends a parse: on success (r >= 0) *ret takes req, else req is freed; root
 * (may be NULL) is released either way.  Returns r.
 */
int rnnd__infer_parsed(int r, struct rnnd_infer_request *req, json_t *root,
                       struct rnnd_infer_request *ret);

/*
 * The shared memory parameters of a tensor (Triton's names), whatever the
 * wire: SHM_REGION etc. bits say which were given.  rnnd__infer_shm_key()
 * tells which one key is (0: not a shared_memory_ key; -1: one rnnd does not
 * know).  rnnd__infer_shm_done() checks that region and byte_size came
 * together (path is the tensor's parameters).  rnnd__infer_shm_input() then
 * checks that input t has no other data and byte_size is its size, and gives
 * it a buffer for the daemon to fill.
 */
#define RNND__SHM_REGION    1u
#define RNND__SHM_BYTE_SIZE 2u
#define RNND__SHM_OFFSET    4u
int rnnd__infer_shm_key(const char *key);
int rnnd__infer_shm_done(unsigned seen, const char *path, rnnd_error_t *err);
int rnnd__infer_shm_input(struct rnnd_tensor *t, const struct rnnd_shm_ref *ref, bool has_data,
                          const char *path, rnnd_error_t *err);

/* Frees t's buffer if it owns one. */
void rnnd__infer_tensor_done(struct rnnd_tensor *t);

#endif

/*
 * infer.c: the inference wire formats (DESIGN.md §5): KServe v2 requests
 * (JSON and the binary tensor extension) and TF Serving :predict requests
 * parsed into struct rnnd_infer_request; a request bound to a model's
 * config; the output tensors; and the responses rendered back.
 *
 * Parsing uses jansson, after a quick scan (check_depth) that bounds the
 * nesting before any tree is built, and after the element count of every
 * tensor is checked from its shape before its buffer is allocated.  All
 * formats share one typed-number converter (put_number), one walker over
 * nested lists (fill_nested) and one shape checker (check_shape).
 *
 * Rendering is hand-written into one growing buffer (struct jbuf): a jansson
 * tree costs a malloc and ~40 bytes per float, so float arrays are printed
 * straight with %.9g, which round-trips float32.
 *
 * Messages have one style: "<path>: <problem>" while parsing
 * ("inputs[0].shape[1]: ...", "instances[2][3]: ..."), "input '<name>':
 * <problem>" or "output '<name>': <problem>" while binding.
 */
#include <assert.h>
#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "infer.h"
#include "json-int.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "tensors are little-endian on the wire and used in place");

#define PATH_LEN  160 /* a field path; longer ones are truncated */
#define SHAPE_LEN 200 /* "[a, b, ...]" of RNND_MAX_DIMS dims */

/* Doubles from here up round to infinity as float: FLT_MAX plus half an ulp. */
#define F32_OVERFLOW 0x1.ffffffp127

static const char *const out_names[RNND_OUT_COUNT] = {"output", "h_n", "c_n", "scores"};

/* The model's inputs, as bind knows them. */
enum in_kind { IN_INPUT, IN_TOKENS, IN_LENGTHS, IN_H0, IN_C0, IN_COUNT };
static const char *const in_names[IN_COUNT] = {"input", "tokens", "lengths", "h0", "c0"};

/*
 * Errors
 */

/* Sets "<path>: <message>" (or just the message when path is "") and returns code. */
static int __attribute__((format(printf, 4, 5)))
path_error(rnnd_error_t *e, int code, const char *path, const char *fmt, ...)
{
        char msg[sizeof(e->msg)];
        va_list ap;

        if (e == NULL)
                return code;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (path[0] == '\0')
                return rnnd_error_set(e, code, "%s", msg);
        return rnnd_error_set(e, code, "%s: %s", path, msg);
}

/* Formats a field path into dst[PATH_LEN], truncating a long one. */
static void __attribute__((format(printf, 2, 3))) pathf(char *dst, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(dst, PATH_LEN, fmt, ap);
        va_end(ap);
}

static int nomem(rnnd_error_t *e, const char *what)
{
        return rnnd_error_set(e, RNND_ENOMEM, "out of memory for %s", what);
}

/* "[2, 5, 7]". */
static const char *format_shape(const uint64_t *shape, unsigned n, char *buf)
{
        size_t off = 0;

        buf[off++] = '[';
        for (unsigned i = 0; i < n && off < SHAPE_LEN - 24; i++)
                off += (size_t)snprintf(buf + off, SHAPE_LEN - off, "%s%" PRIu64, i ? ", " : "",
                                        shape[i]);
        snprintf(buf + off, SHAPE_LEN - off, "]");
        return buf;
}

/*
 * JSON text
 */

/*
 * Fails with RNND_ELIMIT when the text nests [ and { deeper than max, before
 * jansson builds a tree of it.  Brackets inside strings do not count.
 */
static int check_depth(const char *s, size_t n, unsigned max, rnnd_error_t *err)
{
        unsigned depth = 0;
        bool in_str = false;

        for (size_t i = 0; i < n; i++) {
                char c = s[i];

                if (in_str) {
                        if (c == '\\')
                                i++;
                        else if (c == '"')
                                in_str = false;
                        continue;
                }
                if (c == '"') {
                        in_str = true;
                } else if (c == '[' || c == '{') {
                        if (++depth > max)
                                return rnnd_error_set(err, RNND_ELIMIT,
                                                      "JSON nested deeper than %u levels", max);
                } else if ((c == ']' || c == '}') && depth > 0) {
                        depth--;
                }
        }
        return 0;
}

/*
 * jansson's allocator (rnnd_infer_global_init): rnnd_malloc, noting a failure
 * in this thread, because jansson reports some failures (a string while
 * lexing) as syntax errors.
 */
static _Thread_local bool json_alloc_failed;

static void *json_alloc(size_t n)
{
        void *p = rnnd_malloc(n);

        if (p == NULL)
                json_alloc_failed = true;
        return p;
}

/* Parses text[0..n) into a new object in *ret, after the depth check. */
static int load_object(const char *text, size_t n, unsigned max_depth, json_t **ret,
                       rnnd_error_t *err)
{
        json_error_t jerr;
        json_t *root;
        int r;

        r = check_depth(text, n, max_depth, err);
        if (r < 0)
                return r;
        json_alloc_failed = false;
        root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
        if (root == NULL) {
                /* jansson leaves the text empty when it could not even start. */
                if (json_alloc_failed || json_error_code(&jerr) == json_error_out_of_memory ||
                    jerr.text[0] == '\0')
                        return nomem(err, "the JSON tree");
                return rnnd_error_set(err, RNND_EINVAL, "invalid JSON at byte %d: %s",
                                      jerr.position, jerr.text);
        }
        if (!json_is_object(root)) {
                json_decref(root);
                return rnnd_error_set(err, RNND_EINVAL, "the request must be a JSON object");
        }
        *ret = root;
        return 0;
}

/* Fails on the first key of obj not in the NULL-terminated keys. */
static int check_keys(json_t *obj, const char *const *keys, const char *path, rnnd_error_t *err)
{
        const char *key;
        json_t *v;

        json_object_foreach(obj, key, v)
        {
                size_t i = 0;

                while (keys[i] != NULL && strcmp(keys[i], key) != 0)
                        i++;
                if (keys[i] == NULL)
                        return path_error(err, RNND_EINVAL, path, "unknown field '%.64s'", key);
        }
        return 0;
}

/* Copies a string value of at most cap - 1 bytes (non-empty when nonempty). */
static int get_string(json_t *v, char *dst, size_t cap, bool nonempty, const char *path,
                      rnnd_error_t *err)
{
        char got[64];

        if (!json_is_string(v))
                return path_error(err, RNND_EINVAL, path, "must be a string, got %s",
                                  rnnd__json_describe(v, got, sizeof(got)));
        if (json_string_length(v) >= cap)
                return path_error(err, RNND_EINVAL, path, "longer than %zu bytes", cap - 1);
        if (nonempty && json_string_length(v) == 0)
                return path_error(err, RNND_EINVAL, path, "must not be empty");
        memcpy(dst, json_string_value(v), json_string_length(v) + 1);
        return 0;
}

static int get_bool(json_t *v, bool *dst, const char *path, rnnd_error_t *err)
{
        char got[64];

        if (!json_is_boolean(v))
                return path_error(err, RNND_EINVAL, path, "must be true or false, got %s",
                                  rnnd__json_describe(v, got, sizeof(got)));
        *dst = json_is_true(v);
        return 0;
}

static int get_uint(json_t *v, uint64_t *dst, const char *path, rnnd_error_t *err)
{
        char got[64];

        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return path_error(err, RNND_EINVAL, path, "must be a non-negative integer, got %s",
                                  rnnd__json_describe(v, got, sizeof(got)));
        *dst = (uint64_t)json_integer_value(v);
        return 0;
}

/*
 * Numbers into tensors
 */

/* Where a value sits, for messages: path, then [ix[0]][ix[1]]... */
struct where {
        const char *path;
        const uint64_t *ix;
        unsigned nix;
        rnnd_error_t *err;
};

static int __attribute__((format(printf, 2, 3)))
where_error(const struct where *w, const char *fmt, ...)
{
        char path[PATH_LEN + RNND_MAX_DIMS * 22], msg[256];
        size_t off;
        va_list ap;

        if (w->err == NULL)
                return RNND_EINVAL;
        off = strlen(w->path) < PATH_LEN ? strlen(w->path) : PATH_LEN - 1;
        memcpy(path, w->path, off);
        path[off] = '\0';
        for (unsigned i = 0; i < w->nix && off < sizeof(path); i++)
                off += (size_t)snprintf(path + off, sizeof(path) - off, "[%" PRIu64 "]", w->ix[i]);
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return rnnd_error_set(w->err, RNND_EINVAL, "%s: %s", path, msg);
}

static bool dtype_is_float(rnnd_dtype_t dt)
{
        return dt == RNND_DT_F16 || dt == RNND_DT_BF16 || dt == RNND_DT_F32 || dt == RNND_DT_F64;
}

static bool dtype_is_signed(rnnd_dtype_t dt)
{
        return dt == RNND_DT_I8 || dt == RNND_DT_I16 || dt == RNND_DT_I32 || dt == RNND_DT_I64;
}

/* A finite double into a float dtype, or an error when it does not fit. */
static int put_float(const struct where *w, double d, rnnd_dtype_t dt, void *dst)
{
        uint16_t h;
        float f;

        if (dt == RNND_DT_F64) {
                memcpy(dst, &d, sizeof(d));
                return 0;
        }
        if (fabs(d) >= F32_OVERFLOW)
                return where_error(w, "%.9g is not finite in %s", d, rnnd_dtype_name(dt));
        f = (float)d;
        if (dt == RNND_DT_F32) {
                memcpy(dst, &f, sizeof(f));
                return 0;
        }
        if (dt == RNND_DT_F16) {
                h = rnnd_f32_to_f16(f);
                if ((h & 0x7c00) == 0x7c00)
                        return where_error(w, "%.9g is not finite in FP16", d);
        } else {
                h = rnnd_f32_to_bf16(f);
                if ((h & 0x7f80) == 0x7f80)
                        return where_error(w, "%.9g is not finite in BF16", d);
        }
        memcpy(dst, &h, sizeof(h));
        return 0;
}

/* A JSON integer, or a real with an integral value, into an integer dtype. */
static int put_int(const struct where *w, const json_t *v, rnnd_dtype_t dt, void *dst)
{
        unsigned bits = (unsigned)rnnd_dtype_size(dt) * 8;
        bool sgn = dtype_is_signed(dt);
        uint64_t umax = sgn ? (UINT64_MAX >> (65 - bits)) : (UINT64_MAX >> (64 - bits));
        char got[64];
        uint64_t u;

        if (json_is_integer(v)) {
                json_int_t x = json_integer_value(v);

                if (x < 0 && (!sgn || (bits < 64 && x < -(json_int_t)(umax + 1))))
                        goto range;
                if (x >= 0 && (uint64_t)x > umax)
                        goto range;
                u = (uint64_t)x;
        } else {
                double d = json_real_value(v);

                if (d != trunc(d))
                        return where_error(w, "%s is not an integer (%s)",
                                           rnnd__json_describe(v, got, sizeof(got)),
                                           rnnd_dtype_name(dt));
                if (d < 0) {
                        if (!sgn || d < -ldexp(1, (int)bits - 1))
                                goto range;
                        u = (uint64_t)(int64_t)d;
                } else {
                        if (d >= ldexp(1, sgn ? (int)bits - 1 : (int)bits))
                                goto range;
                        u = (uint64_t)d;
                }
        }
        memcpy(dst, &u, bits / 8); /* the low bytes, on a little-endian host */
        return 0;
range:
        return where_error(w, "%s is out of range for %s", rnnd__json_describe(v, got, sizeof(got)),
                           rnnd_dtype_name(dt));
}

/* The one typed-number converter: v into element dst of type dt. */
static int put_number(const struct where *w, const json_t *v, rnnd_dtype_t dt, void *dst)
{
        char got[64];

        if (dt == RNND_DT_BOOL) {
                if (!json_is_boolean(v))
                        return where_error(w, "expected true or false, got %s",
                                           rnnd__json_describe(v, got, sizeof(got)));
                *(uint8_t *)dst = json_is_true(v);
                return 0;
        }
        if (!json_is_number(v))
                return where_error(w, "expected a number, got %s",
                                   rnnd__json_describe(v, got, sizeof(got)));
        if (dtype_is_float(dt))
                return put_float(w, json_number_value(v), dt, dst);
        return put_int(w, v, dt, dst);
}

/* Walks nested lists that must have exactly shape[0..ndim), writing elements in order. */
struct filler {
        const uint64_t *shape;
        unsigned ndim;
        rnnd_dtype_t dt;
        size_t esize;
        char *dst; /* the next element */
        uint64_t ix[RNND_MAX_DIMS];
        const char *path;
        rnnd_error_t *err;
};

static int fill_rec(struct filler *f, const json_t *v, unsigned d)
{
        struct where w = {f->path, f->ix, d, f->err};
        char got[64];
        int r;

        if (d == f->ndim) {
                r = put_number(&w, v, f->dt, f->dst);
                f->dst += f->esize;
                return r;
        }
        if (!json_is_array(v))
                return where_error(&w, "expected an array of %" PRIu64 ", got %s", f->shape[d],
                                   rnnd__json_describe(v, got, sizeof(got)));
        if (json_array_size(v) != f->shape[d])
                return where_error(&w, "expected %" PRIu64 " elements, got %zu", f->shape[d],
                                   json_array_size(v));
        for (size_t i = 0; i < f->shape[d]; i++) {
                f->ix[d] = i;
                r = fill_rec(f, json_array_get(v, i), d + 1);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int fill_nested(const json_t *v, const uint64_t *shape, unsigned ndim, rnnd_dtype_t dt,
                       void *dst, const char *path, rnnd_error_t *err)
{
        struct filler f = {.shape = shape,
                           .ndim = ndim,
                           .dt = dt,
                           .esize = rnnd_dtype_size(dt),
                           .dst = dst,
                           .path = path,
                           .err = err};

        return fill_rec(&f, v, 0);
}

/* A flat list of exactly numel elements. */
static int fill_flat(const json_t *v, uint64_t numel, rnnd_dtype_t dt, void *dst, const char *path,
                     rnnd_error_t *err)
{
        size_t esize = rnnd_dtype_size(dt);
        uint64_t i = 0;
        struct where w = {path, &i, 1, err};
        int r;

        if (json_array_size(v) != numel)
                return path_error(err, RNND_EINVAL, path, "expected %" PRIu64 " elements, got %zu",
                                  numel, json_array_size(v));
        for (i = 0; i < numel; i++) {
                r = put_number(&w, json_array_get(v, i), dt, (char *)dst + i * esize);
                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * The shape of nested lists, read down their first elements (TF Serving
 * carries no shape).  fill_nested() then checks that they are rectangular.
 */
static int infer_shape(const json_t *v, uint64_t *shape, unsigned *ndim, const char *path,
                       rnnd_error_t *err)
{
        unsigned n = 0;

        while (json_is_array(v)) {
                if (n == RNND_MAX_DIMS)
                        return path_error(err, RNND_EINVAL, path,
                                          "lists nested more than %d levels", RNND_MAX_DIMS);
                shape[n++] = json_array_size(v);
                if (json_array_size(v) == 0)
                        break;
                v = json_array_get(v, 0);
        }
        *ndim = n;
        return 0;
}

/*
 * Sets t's shape and dtype and checks the element count against the limit,
 * before anything is allocated for it.
 */
static int set_shape(struct rnnd_tensor *t, rnnd_dtype_t dt, const uint64_t *shape, unsigned ndim,
                     const struct rnnd_infer_limits *lim, const char *path, rnnd_error_t *err)
{
        char s[SHAPE_LEN];

        if (rnnd_shape_numel(shape, ndim, lim->max_elements, &t->numel) < 0 ||
            t->numel > SIZE_MAX / rnnd_dtype_size(dt))
                return path_error(err, RNND_ELIMIT, path,
                                  "%s has more than %" PRIu64 " elements (the limit)",
                                  format_shape(shape, ndim, s), lim->max_elements);
        t->dtype = dt;
        t->ndim = ndim;
        memcpy(t->shape, shape, ndim * sizeof(shape[0]));
        t->nbytes = (size_t)t->numel * rnnd_dtype_size(dt);
        return 0;
}

/* Gives t a new zeroed buffer of t->nbytes (none when 0). */
static int alloc_data(struct rnnd_tensor *t, rnnd_error_t *err)
{
        if (t->nbytes == 0)
                return 0;
        t->data = rnnd_calloc(1, t->nbytes);
        if (t->data == NULL)
                return nomem(err, "a tensor");
        t->owned = true;
        return 0;
}

static void tensor_done(struct rnnd_tensor *t)
{
        if (t->owned)
                rnnd_free(t->data);
        t->data = NULL;
        t->owned = false;
}

/*
 * KServe v2
 */

/* One KServe parse: where errors go and the binary section being consumed. */
struct kctx {
        const struct rnnd_infer_limits *lim;
        rnnd_error_t *err;
        const char *bin;  /* body + json_len */
        size_t bin_len;   /* len - json_len */
        size_t bin_off;   /* consumed so far, in tensor order */
        const char *list; /* "inputs" or "outputs" */
};

static int parse_tensor_params(struct kctx *c, json_t *p, const char *path, bool *has_bds,
                               uint64_t *bds)
{
        char sub[PATH_LEN], got[64];
        const char *key;
        json_t *v;
        int r;

        if (!json_is_object(p))
                return path_error(c->err, RNND_EINVAL, path, "must be an object, got %s",
                                  rnnd__json_describe(p, got, sizeof(got)));
        json_object_foreach(p, key, v)
        {
                pathf(sub, "%s.%.64s", path, key);
                if (strcmp(key, "binary_data_size") == 0) {
                        r = get_uint(v, bds, sub, c->err);
                        if (r < 0)
                                return r;
                        *has_bds = true;
                } else if (strncmp(key, "shared_memory_", 14) == 0) {
                        return path_error(c->err, RNND_EINVAL, sub,
                                          "shared memory is not supported");
                }
                /* Other parameters are not ours to judge; ignore them. */
        }
        return 0;
}

/* Takes t's bytes from the binary section: borrowed when aligned, else copied. */
static int take_binary(struct kctx *c, struct rnnd_tensor *t, uint64_t bds, const char *path)
{
        char s[SHAPE_LEN];
        const char *p;
        int r;

        if (bds != t->nbytes)
                return path_error(
                        c->err, RNND_EINVAL, path, "%" PRIu64 " bytes, but %s %s takes %zu", bds,
                        rnnd_dtype_name(t->dtype), format_shape(t->shape, t->ndim, s), t->nbytes);
        if (bds > c->bin_len - c->bin_off)
                return path_error(c->err, RNND_EINVAL, path,
                                  "%" PRIu64 " bytes, but only %zu remain after the JSON "
                                  "(Inference-Header-Content-Length)",
                                  bds, c->bin_len - c->bin_off);
        p = c->bin + c->bin_off;
        c->bin_off += bds;
        if (bds == 0)
                return 0;
        if ((uintptr_t)p % rnnd_dtype_size(t->dtype) == 0) {
                t->data = (void *)(uintptr_t)p;
                return 0;
        }
        r = alloc_data(t, c->err);
        if (r < 0)
                return r;
        memcpy(t->data, p, bds);
        return 0;
}

/*
 * Checks that obj, found at path, is an object with only the given keys and a
 * non-empty string "name", copied into name[cap].  Fills sub with
 * "<path>.name" for the caller's later messages.
 */
static int named_object(json_t *obj, const char *const *keys, const char *path, char *name,
                        size_t cap, char *sub, rnnd_error_t *err)
{
        char got[64];
        json_t *v;
        int r;

        if (!json_is_object(obj))
                return path_error(err, RNND_EINVAL, path, "must be an object, got %s",
                                  rnnd__json_describe(obj, got, sizeof(got)));
        r = check_keys(obj, keys, path, err);
        if (r < 0)
                return r;
        pathf(sub, "%s.name", path);
        v = json_object_get(obj, "name");
        if (v == NULL)
                return path_error(err, RNND_EINVAL, sub, "missing");
        return get_string(v, name, cap, true, sub, err);
}

/* inputs[i] (or outputs[i] of a response) into t. */
static int parse_tensor(struct kctx *c, json_t *obj, unsigned i, struct rnnd_tensor *t)
{
        static const char *const keys[] = {"name", "shape", "datatype", "parameters", "data", NULL};
        char path[PATH_LEN], sub[PATH_LEN], got[64];
        uint64_t shape[RNND_MAX_DIMS], bds = 0;
        bool has_bds = false;
        json_t *v, *data;
        rnnd_dtype_t dt;
        size_t ndim;
        int r;

        pathf(path, "%s[%u]", c->list, i);
        r = named_object(obj, keys, path, t->name, sizeof(t->name), sub, c->err);
        if (r < 0)
                return r;

        pathf(sub, "%s.datatype", path);
        v = json_object_get(obj, "datatype");
        if (v == NULL)
                return path_error(c->err, RNND_EINVAL, sub, "missing");
        if (!json_is_string(v))
                return path_error(c->err, RNND_EINVAL, sub, "must be a string, got %s",
                                  rnnd__json_describe(v, got, sizeof(got)));
        dt = rnnd_dtype_from_name(json_string_value(v));
        if (dt == RNND_DT_INVALID)
                return path_error(c->err, RNND_EINVAL, sub, "unknown datatype %s",
                                  rnnd__json_describe(v, got, sizeof(got)));
        if (dt == RNND_DT_BYTES)
                return path_error(c->err, RNND_EINVAL, sub, "BYTES is not supported");

        pathf(sub, "%s.shape", path);
        v = json_object_get(obj, "shape");
        if (v == NULL)
                return path_error(c->err, RNND_EINVAL, sub, "missing");
        if (!json_is_array(v))
                return path_error(c->err, RNND_EINVAL, sub, "must be a list, got %s",
                                  rnnd__json_describe(v, got, sizeof(got)));
        ndim = json_array_size(v);
        if (ndim > RNND_MAX_DIMS)
                return path_error(c->err, RNND_EINVAL, sub, "more than %d dimensions",
                                  RNND_MAX_DIMS);
        for (size_t d = 0; d < ndim; d++) {
                char dpath[PATH_LEN];

                pathf(dpath, "%s[%zu]", sub, d);
                r = get_uint(json_array_get(v, d), &shape[d], dpath, c->err);
                if (r < 0)
                        return r;
        }
        r = set_shape(t, dt, shape, (unsigned)ndim, c->lim, sub, c->err);
        if (r < 0)
                return r;

        v = json_object_get(obj, "parameters");
        if (v != NULL) {
                pathf(sub, "%s.parameters", path);
                r = parse_tensor_params(c, v, sub, &has_bds, &bds);
                if (r < 0)
                        return r;
        }

        data = json_object_get(obj, "data");
        if (has_bds) {
                if (data != NULL)
                        return path_error(c->err, RNND_EINVAL, path,
                                          "has both data and parameters.binary_data_size");
                pathf(sub, "%s.parameters.binary_data_size", path);
                return take_binary(c, t, bds, sub);
        }
        pathf(sub, "%s.data", path);
        if (data == NULL)
                return path_error(c->err, RNND_EINVAL, path,
                                  "missing data (or parameters.binary_data_size)");
        if (!json_is_array(data))
                return path_error(c->err, RNND_EINVAL, sub, "must be a list, got %s",
                                  rnnd__json_describe(data, got, sizeof(got)));
        r = alloc_data(t, c->err);
        if (r < 0)
                return r;
        /* Nested when the shape has 2+ dims and the first element is a list. */
        if (t->ndim >= 2 && json_is_array(json_array_get(data, 0)))
                return fill_nested(data, t->shape, t->ndim, dt, t->data, sub, c->err);
        return fill_flat(data, t->numel, dt, t->data, sub, c->err);
}

/* A list of tensors ("inputs" of a request or "outputs" of a response). */
static int parse_tensor_list(struct kctx *c, json_t *list, struct rnnd_tensor *ts, unsigned *n)
{
        char got[64];
        size_t i;
        int r;

        if (list == NULL)
                return path_error(c->err, RNND_EINVAL, c->list, "missing");
        if (!json_is_array(list))
                return path_error(c->err, RNND_EINVAL, c->list, "must be a list, got %s",
                                  rnnd__json_describe(list, got, sizeof(got)));
        if (json_array_size(list) > RNND_INFER_MAX_TENSORS)
                return path_error(c->err, RNND_EINVAL, c->list, "more than %d tensors",
                                  RNND_INFER_MAX_TENSORS);
        for (i = 0; i < json_array_size(list); i++) {
                /* Count it first, so that what it allocated is freed on failure too. */
                *n = (unsigned)i + 1;
                r = parse_tensor(c, json_array_get(list, i), (unsigned)i, &ts[i]);
                if (r < 0)
                        return r;
        }
        if (c->bin_off != c->bin_len)
                return rnnd_error_set(c->err, RNND_EINVAL,
                                      "%zu bytes follow the JSON (Inference-Header-Content-Length)"
                                      ", but the binary_data_size of the %s add up to %zu",
                                      c->bin_len, c->list, c->bin_off);
        return 0;
}

static int parse_id(struct kctx *c, json_t *v, char *id, bool *has_id)
{
        int r;

        if (v == NULL)
                return 0;
        r = get_string(v, id, RNND_INFER_ID_MAX, false, "id", c->err);
        if (r < 0)
                return r;
        *has_id = true;
        return 0;
}

static int parse_params(struct kctx *c, json_t *p, struct rnnd_infer_request *req)
{
        struct rnnd_infer_params *q = &req->params;
        char sub[PATH_LEN], got[64];
        const char *key;
        json_t *v;
        int r = 0;

        if (!json_is_object(p))
                return path_error(c->err, RNND_EINVAL, "parameters", "must be an object, got %s",
                                  rnnd__json_describe(p, got, sizeof(got)));
        json_object_foreach(p, key, v)
        {
                pathf(sub, "parameters.%.64s", key);
                if (strcmp(key, "sequence_id") == 0) {
                        if (json_is_string(v))
                                r = get_string(v, q->sequence_id_str, sizeof(q->sequence_id_str),
                                               false, sub, c->err);
                        else if (json_is_integer(v) && json_integer_value(v) >= 0)
                                q->sequence_id = (uint64_t)json_integer_value(v);
                        else
                                r = path_error(c->err, RNND_EINVAL, sub,
                                               "must be an unsigned integer or a string, got %s",
                                               rnnd__json_describe(v, got, sizeof(got)));
                } else if (strcmp(key, "sequence_start") == 0) {
                        r = get_bool(v, &q->sequence_start, sub, c->err);
                } else if (strcmp(key, "sequence_end") == 0) {
                        r = get_bool(v, &q->sequence_end, sub, c->err);
                } else if (strcmp(key, "binary_data_output") == 0) {
                        r = get_bool(v, &req->binary_data_output, sub, c->err);
                } else if (strcmp(key, "priority") == 0) {
                        if (!json_is_integer(v))
                                r = path_error(c->err, RNND_EINVAL, sub,
                                               "must be an integer, got %s",
                                               rnnd__json_describe(v, got, sizeof(got)));
                        else
                                q->priority = json_integer_value(v);
                } else if (strcmp(key, "timeout") == 0) {
                        r = get_uint(v, &q->timeout_us, sub, c->err);
                } else if (strcmp(key, "headers") == 0 || strncmp(key, "triton_", 7) == 0) {
                        r = path_error(c->err, RNND_EINVAL, sub, "reserved parameter name");
                }
                /* Other parameters are accepted and ignored. */
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_outputs(struct kctx *c, json_t *list, struct rnnd_infer_request *req)
{
        static const char *const keys[] = {"name", "parameters", NULL};
        char path[PATH_LEN], sub[PATH_LEN], got[64];
        const char *key;
        json_t *o, *v, *p;
        size_t i;
        int r;

        if (!json_is_array(list))
                return path_error(c->err, RNND_EINVAL, "outputs", "must be a list, got %s",
                                  rnnd__json_describe(list, got, sizeof(got)));
        if (json_array_size(list) > RNND_INFER_MAX_TENSORS)
                return path_error(c->err, RNND_EINVAL, "outputs", "more than %d outputs",
                                  RNND_INFER_MAX_TENSORS);
        req->outputs_given = true;
        json_array_foreach(list, i, o)
        {
                struct rnnd_requested_output *ro = &req->outputs[i];

                pathf(path, "outputs[%zu]", i);
                r = named_object(o, keys, path, ro->name, sizeof(ro->name), sub, c->err);
                if (r < 0)
                        return r;
                for (size_t j = 0; j < i; j++)
                        if (strcmp(req->outputs[j].name, ro->name) == 0)
                                return path_error(c->err, RNND_EINVAL, sub,
                                                  "'%s' is requested twice", ro->name);
                ro->binary = req->binary_data_output;
                p = json_object_get(o, "parameters");
                if (p == NULL)
                        continue;
                pathf(sub, "%s.parameters", path);
                if (!json_is_object(p))
                        return path_error(c->err, RNND_EINVAL, sub, "must be an object, got %s",
                                          rnnd__json_describe(p, got, sizeof(got)));
                json_object_foreach(p, key, v)
                {
                        pathf(sub, "%s.parameters.%.64s", path, key);
                        if (strcmp(key, "binary_data") == 0) {
                                r = get_bool(v, &ro->binary, sub, c->err);
                                if (r < 0)
                                        return r;
                        } else if (strcmp(key, "classification") == 0 ||
                                   strncmp(key, "shared_memory_", 14) == 0) {
                                return path_error(c->err, RNND_EINVAL, sub, "not supported");
                        }
                }
        }
        req->n_outputs = (unsigned)json_array_size(list);
        return 0;
}

/* Checks the body and header lengths, and sets up c's binary section. */
static int split_body(struct kctx *c, size_t len, size_t json_len, const void *body)
{
        if (len == 0)
                return rnnd_error_set(c->err, RNND_EINVAL, "the body is empty");
        if (json_len > len)
                return rnnd_error_set(c->err, RNND_EINVAL,
                                      "Inference-Header-Content-Length %zu is larger than the "
                                      "body (%zu bytes)",
                                      json_len, len);
        if (json_len == 0)
                return rnnd_error_set(c->err, RNND_EINVAL,
                                      "Inference-Header-Content-Length 0 (a raw binary request) "
                                      "is not supported");
        c->bin = (const char *)body + json_len;
        c->bin_len = len - json_len;
        return 0;
}

/*
 * Splits a KServe body (split_body()), parses its JSON header into *root and
 * checks its keys against keys.  On failure *root is NULL.
 */
static int open_body(struct kctx *c, const void *body, size_t len, size_t json_len,
                     const char *const *keys, json_t **root)
{
        int r;

        *root = NULL;
        r = split_body(c, len, json_len, body);
        if (r < 0)
                return r;
        r = load_object(body, json_len, c->lim->max_depth, root, c->err);
        if (r < 0)
                return r;
        r = check_keys(*root, keys, "", c->err);
        if (r < 0) {
                json_decref(*root);
                *root = NULL;
        }
        return r;
}

void rnnd_infer_global_init(void)
{
        json_object_seed(0);
        json_set_alloc_funcs(json_alloc, rnnd_free);
}

void rnnd_infer_limits_default(struct rnnd_infer_limits *l)
{
        l->max_elements = RNND_INFER_DEFAULT_MAX_ELEMENTS;
        l->max_depth = RNND_INFER_DEFAULT_MAX_DEPTH;
}

const char *rnnd_infer_output_name(rnnd_infer_output_t k)
{
        return (unsigned)k < RNND_OUT_COUNT ? out_names[k] : "?";
}

static const struct rnnd_infer_limits *limits_or_default(const struct rnnd_infer_limits *l,
                                                         struct rnnd_infer_limits *buf)
{
        if (l != NULL)
                return l;
        rnnd_infer_limits_default(buf);
        return buf;
}

int rnnd_kserve_parse(const void *body, size_t len, size_t json_len,
                      const struct rnnd_infer_limits *limits, struct rnnd_infer_request *ret,
                      rnnd_error_t *reterr)
{
        static const char *const keys[] = {"id", "parameters", "inputs", "outputs", NULL};
        struct rnnd_infer_limits lbuf;
        struct kctx c = {.lim = limits_or_default(limits, &lbuf), .err = reterr, .list = "inputs"};
        struct rnnd_infer_request req = {.format = RNND_FMT_KSERVE};
        json_t *root = NULL, *v;
        int r;

        r = open_body(&c, body, len, json_len, keys, &root);
        if (r < 0)
                return r;
        r = parse_id(&c, json_object_get(root, "id"), req.id, &req.has_id);
        if (r < 0)
                goto out;
        v = json_object_get(root, "parameters");
        if (v != NULL) {
                r = parse_params(&c, v, &req);
                if (r < 0)
                        goto out;
        }
        r = parse_tensor_list(&c, json_object_get(root, "inputs"), req.inputs, &req.n_inputs);
        if (r < 0)
                goto out;
        v = json_object_get(root, "outputs");
        if (v != NULL) {
                r = parse_outputs(&c, v, &req);
                if (r < 0)
                        goto out;
        }
        *ret = req;
out:
        if (r < 0)
                rnnd_infer_request_done(&req);
        json_decref(root);
        return r;
}

int rnnd_kserve_parse_response(const void *body, size_t len, size_t json_len,
                               const struct rnnd_infer_limits *limits,
                               struct rnnd_infer_response *ret, rnnd_error_t *reterr)
{
        static const char *const keys[] = {"model_name", "model_version", "id",
                                           "parameters", "outputs",       NULL};
        struct rnnd_infer_limits lbuf;
        struct kctx c = {.lim = limits_or_default(limits, &lbuf), .err = reterr, .list = "outputs"};
        struct rnnd_infer_response resp = {0};
        json_t *root = NULL, *v;
        int r;

        r = open_body(&c, body, len, json_len, keys, &root);
        if (r < 0)
                return r;
        v = json_object_get(root, "model_name");
        r = v == NULL ? path_error(reterr, RNND_EINVAL, "model_name", "missing")
                      : get_string(v, resp.model_name, sizeof(resp.model_name), false, "model_name",
                                   reterr);
        if (r < 0)
                goto out;
        v = json_object_get(root, "model_version");
        if (v != NULL) {
                r = get_string(v, resp.model_version, sizeof(resp.model_version), false,
                               "model_version", reterr);
                if (r < 0)
                        goto out;
        }
        r = parse_id(&c, json_object_get(root, "id"), resp.id, &resp.has_id);
        if (r < 0)
                goto out;
        r = parse_tensor_list(&c, json_object_get(root, "outputs"), resp.outputs, &resp.n_outputs);
        if (r < 0)
                goto out;
        *ret = resp;
out:
        if (r < 0)
                rnnd_infer_response_done(&resp);
        json_decref(root);
        return r;
}

void rnnd_infer_request_done(struct rnnd_infer_request *req)
{
        if (req == NULL)
                return;
        for (unsigned i = 0; i < req->n_inputs; i++)
                tensor_done(&req->inputs[i]);
        memset(req, 0, sizeof(*req));
}

void rnnd_infer_response_done(struct rnnd_infer_response *r)
{
        if (r == NULL)
                return;
        for (unsigned i = 0; i < r->n_outputs; i++)
                tensor_done(&r->outputs[i]);
        memset(r, 0, sizeof(*r));
}

/*
 * TF Serving
 */

/*
 * The dtype TF Serving's untyped JSON gets for a tensor name.  Not inlined:
 * where a caller passes a literal, GCC's -Wstring-compare flags the
 * comparison that is constant there.
 */
static __attribute__((noinline)) rnnd_dtype_t tfs_dtype(const char *name)
{
        return strcmp(name, "tokens") == 0 || strcmp(name, "lengths") == 0 ? RNND_DT_I64
                                                                           : RNND_DT_F32;
}

/* The model's main input: a bare value in a TF Serving request is this. */
static const char *main_input(const struct rnnd_model_config *cfg)
{
        return cfg->embedding.present ? "tokens" : "input";
}

/* A new tensor of req, named, shaped and zero-filled. */
static int add_tensor(struct rnnd_infer_request *req, const char *name, rnnd_dtype_t dt,
                      const uint64_t *shape, unsigned ndim, const struct rnnd_infer_limits *lim,
                      const char *path, struct rnnd_tensor **ret, rnnd_error_t *err)
{
        struct rnnd_tensor *t;
        int r;

        if (req->n_inputs == RNND_INFER_MAX_TENSORS)
                return path_error(err, RNND_EINVAL, path, "more than %d tensors",
                                  RNND_INFER_MAX_TENSORS);
        if (strlen(name) >= RNND_INFER_NAME_MAX)
                return path_error(err, RNND_EINVAL, path, "a name is longer than %d bytes",
                                  RNND_INFER_NAME_MAX - 1);
        t = &req->inputs[req->n_inputs];
        r = set_shape(t, dt, shape, ndim, lim, path, err);
        if (r < 0)
                return r;
        r = alloc_data(t, err);
        if (r < 0)
                return r;
        snprintf(t->name, sizeof(t->name), "%s", name);
        req->n_inputs++;
        *ret = t;
        return 0;
}

/* Columnar: {"inputs": {"name": nested lists, ...}} or {"inputs": nested lists}. */
static int tfs_columns(json_t *inputs, const struct rnnd_model_config *cfg,
                       const struct rnnd_infer_limits *lim, struct rnnd_infer_request *req,
                       rnnd_error_t *err)
{
        char path[PATH_LEN];
        uint64_t shape[RNND_MAX_DIMS];
        struct rnnd_tensor *t;
        const char *name;
        unsigned ndim = 0;
        json_t *v;
        int r;

        req->format = RNND_FMT_TFS_COLUMNAR;
        if (!json_is_object(inputs)) {
                name = main_input(cfg);
                r = infer_shape(inputs, shape, &ndim, "inputs", err);
                if (r < 0)
                        return r;
                r = add_tensor(req, name, tfs_dtype(name), shape, ndim, lim, "inputs", &t, err);
                if (r < 0)
                        return r;
                return fill_nested(inputs, t->shape, t->ndim, t->dtype, t->data, "inputs", err);
        }
        json_object_foreach(inputs, name, v)
        {
                pathf(path, "inputs.%.64s", name);
                r = infer_shape(v, shape, &ndim, path, err);
                if (r < 0)
                        return r;
                r = add_tensor(req, name, tfs_dtype(name), shape, ndim, lim, path, &t, err);
                if (r < 0)
                        return r;
                r = fill_nested(v, t->shape, t->ndim, t->dtype, t->data, path, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* What the row format knows of each tensor it may assemble. */
enum { ROW_INPUT, ROW_TOKENS, ROW_H0, ROW_C0, ROW_COUNT };
static const struct {
        const char *name;
        unsigned ndim; /* per instance */
        bool seq;      /* its first dim is the instance's length */
} row_tensors[ROW_COUNT] = {
        {"input", 2, true},
        {"tokens", 1, true},
        {"h0", 2, false},
        {"c0", 2, false},
};

/* Row format: one tensor's value in each instance, and their common shape. */
struct row_col {
        bool any;                      /* some instance has it */
        int first;                     /* the first instance that has it */
        uint64_t shape[RNND_MAX_DIMS]; /* per instance; shape[0] of a seq tensor is the max */
};

/* The instance value of row tensor k in instance i, or NULL. */
static json_t *row_value(json_t *inst, unsigned k, const struct rnnd_model_config *cfg)
{
        if (!json_is_object(inst))
                return strcmp(row_tensors[k].name, main_input(cfg)) == 0 ? inst : NULL;
        return json_object_get(inst, row_tensors[k].name);
}

/* "instances[i]" or "instances[i].name", for the value of row tensor k. */
static void row_path(char *path, json_t *inst, size_t i, unsigned k)
{
        if (json_is_object(inst))
                pathf(path, "instances[%zu].%s", i, row_tensors[k].name);
        else
                pathf(path, "instances[%zu]", i);
}

/*
 * Row format: {"instances": [seq, ...]}, each instance one sequence of its own
 * length.  Pass 1 checks each instance's shapes and finds the longest; pass 2
 * fills the padded [B, T, ...] tensors, with zeros for missing states.
 */
static int tfs_rows(json_t *list, const struct rnnd_model_config *cfg,
                    const struct rnnd_infer_limits *lim, struct rnnd_infer_request *req,
                    rnnd_error_t *err)
{
        static const char *const keys[] = {"input", "tokens", "h0", "c0", NULL};
        struct row_col cols[ROW_COUNT] = {0};
        struct rnnd_tensor *ts[ROW_COUNT] = {0}, *lt;
        char path[PATH_LEN], vpath[PATH_LEN], got[64], s1[SHAPE_LEN], s2[SHAPE_LEN];
        uint64_t shape[RNND_MAX_DIMS], B = json_array_size(list);
        unsigned ndim = 0;
        json_t *inst, *v;
        size_t i;
        int r;

        req->format = RNND_FMT_TFS_ROW;
        if (!json_is_array(list))
                return path_error(err, RNND_EINVAL, "instances", "must be a list, got %s",
                                  rnnd__json_describe(list, got, sizeof(got)));
        if (B == 0)
                return path_error(err, RNND_EINVAL, "instances", "must not be empty");

        json_array_foreach(list, i, inst)
        {
                uint64_t len = 0;
                int len_from = -1;

                pathf(path, "instances[%zu]", i);
                if (json_is_object(inst)) {
                        if (json_object_get(inst, "lengths") != NULL)
                                return path_error(err, RNND_EINVAL, path,
                                                  "'lengths' is not accepted in row format: "
                                                  "each instance has its own length");
                        r = check_keys(inst, keys, path, err);
                        if (r < 0)
                                return r;
                } else if (!json_is_array(inst)) {
                        return path_error(err, RNND_EINVAL, path,
                                          "must be a list or an object, got %s",
                                          rnnd__json_describe(inst, got, sizeof(got)));
                }
                for (unsigned k = 0; k < ROW_COUNT; k++) {
                        struct row_col *col = &cols[k];

                        v = row_value(inst, k, cfg);
                        if (v == NULL) {
                                if (row_tensors[k].seq && col->any)
                                        return path_error(err, RNND_EINVAL, path,
                                                          "missing '%s' (instances[%d] has it)",
                                                          row_tensors[k].name, col->first);
                                continue;
                        }
                        if (row_tensors[k].seq && !col->any && i > 0)
                                return path_error(err, RNND_EINVAL, "instances[0]",
                                                  "missing '%s' (instances[%zu] has it)",
                                                  row_tensors[k].name, i);
                        row_path(vpath, inst, i, k);
                        r = infer_shape(v, shape, &ndim, vpath, err);
                        if (r < 0)
                                return r;
                        if (row_tensors[k].seq && ndim >= 1 && shape[0] == 0)
                                return path_error(err, RNND_EINVAL, vpath, "empty sequence");
                        if (ndim != row_tensors[k].ndim)
                                return path_error(err, RNND_EINVAL, vpath,
                                                  "shape %s, but '%s' takes %u level%s of lists "
                                                  "per instance",
                                                  format_shape(shape, ndim, s1),
                                                  row_tensors[k].name, row_tensors[k].ndim,
                                                  row_tensors[k].ndim == 1 ? "" : "s");
                        if (row_tensors[k].seq) {
                                if (len_from >= 0 && shape[0] != len)
                                        return path_error(
                                                err, RNND_EINVAL, vpath,
                                                "%" PRIu64 " steps, but '%s' has %" PRIu64,
                                                shape[0], row_tensors[len_from].name, len);
                                len = shape[0];
                                len_from = (int)k;
                        }
                        if (!col->any) {
                                col->any = true;
                                col->first = (int)i;
                                memcpy(col->shape, shape, sizeof(shape));
                        } else if (memcmp(col->shape + row_tensors[k].seq,
                                          shape + row_tensors[k].seq,
                                          (ndim - row_tensors[k].seq) * sizeof(shape[0])) != 0) {
                                return path_error(err, RNND_EINVAL, vpath,
                                                  "shape %s does not match instances[%d]'s %s",
                                                  format_shape(shape, ndim, s1), col->first,
                                                  format_shape(col->shape, ndim, s2));
                        }
                        if (row_tensors[k].seq && shape[0] > col->shape[0])
                                col->shape[0] = shape[0];
                }
                if (len_from < 0)
                        return path_error(err, RNND_EINVAL, path, "missing '%s'", main_input(cfg));
        }

        /* Pass 2: allocate [B, per-instance shape] and fill each instance's part. */
        for (unsigned k = 0; k < ROW_COUNT; k++) {
                const char *name = row_tensors[k].name;
                size_t per;

                if (!cols[k].any)
                        continue;
                shape[0] = B;
                memcpy(shape + 1, cols[k].shape, row_tensors[k].ndim * sizeof(shape[0]));
                r = add_tensor(req, name, tfs_dtype(name), shape, row_tensors[k].ndim + 1, lim,
                               "instances", &ts[k], err);
                if (r < 0)
                        return r;
                per = ts[k]->nbytes / B;
                json_array_foreach(list, i, inst)
                {
                        v = row_value(inst, k, cfg);
                        if (v == NULL)
                                continue;
                        row_path(vpath, inst, i, k);
                        r = infer_shape(v, shape, &ndim, vpath, err);
                        if (r < 0)
                                return r;
                        r = fill_nested(v, shape, ndim, ts[k]->dtype, (char *)ts[k]->data + i * per,
                                        vpath, err);
                        if (r < 0)
                                return r;
                }
        }

        /* The lengths, from each instance's sequence tensor. */
        r = add_tensor(req, "lengths", RNND_DT_I64, &B, 1, lim, "instances", &lt, err);
        if (r < 0)
                return r;
        json_array_foreach(list, i, inst)
        {
                for (unsigned k = 0; k < ROW_COUNT; k++) {
                        v = row_value(inst, k, cfg);
                        if (row_tensors[k].seq && v != NULL) {
                                ((int64_t *)lt->data)[i] = (int64_t)json_array_size(v);
                                break;
                        }
                }
        }
        return 0;
}

int rnnd_tfs_parse(const void *body, size_t len, const struct rnnd_model_config *cfg,
                   const struct rnnd_infer_limits *limits, struct rnnd_infer_request *ret,
                   rnnd_error_t *reterr)
{
        static const char *const keys[] = {"signature_name", "instances", "inputs", NULL};
        struct rnnd_infer_limits lbuf;
        const struct rnnd_infer_limits *lim = limits_or_default(limits, &lbuf);
        struct rnnd_infer_request req = {.format = RNND_FMT_TFS_ROW};
        json_t *root = NULL, *v, *instances, *inputs;
        char got[64];
        int r;

        if (len == 0)
                return rnnd_error_set(reterr, RNND_EINVAL, "the body is empty");
        r = load_object(body, len, lim->max_depth, &root, reterr);
        if (r < 0)
                return r;
        r = check_keys(root, keys, "", reterr);
        if (r < 0)
                goto out;
        v = json_object_get(root, "signature_name");
        if (v != NULL && (!json_is_string(v) || strcmp(json_string_value(v), "serving_default"))) {
                r = path_error(reterr, RNND_EINVAL, "signature_name",
                               "%s is not a signature of this model (serving_default)",
                               rnnd__json_describe(v, got, sizeof(got)));
                goto out;
        }
        instances = json_object_get(root, "instances");
        inputs = json_object_get(root, "inputs");
        if ((instances == NULL) == (inputs == NULL)) {
                r = rnnd_error_set(reterr, RNND_EINVAL,
                                   "the request must have exactly one of 'instances' and "
                                   "'inputs'");
                goto out;
        }
        if (instances != NULL)
                r = tfs_rows(instances, cfg, lim, &req, reterr);
        else
                r = tfs_columns(inputs, cfg, lim, &req, reterr);
        if (r < 0)
                goto out;
        *ret = req;
out:
        if (r < 0)
                rnnd_infer_request_done(&req);
        json_decref(root);
        return r;
}

/*
 * Binding a request to a model
 */

#define DIM_B UINT64_MAX       /* in a wanted shape: any B (printed "B") */
#define DIM_T (UINT64_MAX - 1) /* any T (printed "T") */

/* The one shape checker: t against want, where DIM_B / DIM_T match anything. */
static int check_shape(const struct rnnd_tensor *t, const uint64_t *want, unsigned n,
                       rnnd_error_t *err)
{
        char got[SHAPE_LEN], exp[SHAPE_LEN];
        size_t off = 0;
        bool ok = t->ndim == n;

        for (unsigned i = 0; ok && i < n; i++)
                ok = want[i] >= DIM_T || t->shape[i] == want[i];
        if (ok)
                return 0;
        exp[off++] = '[';
        for (unsigned i = 0; i < n; i++) {
                const char *sep = i ? ", " : "";

                if (want[i] == DIM_B)
                        off += (size_t)snprintf(exp + off, sizeof(exp) - off, "%sB", sep);
                else if (want[i] == DIM_T)
                        off += (size_t)snprintf(exp + off, sizeof(exp) - off, "%sT", sep);
                else
                        off += (size_t)snprintf(exp + off, sizeof(exp) - off, "%s%" PRIu64, sep,
                                                want[i]);
        }
        snprintf(exp + off, sizeof(exp) - off, "]");
        return rnnd_error_set(err, RNND_EINVAL, "input '%s': shape %s does not match %s", t->name,
                              format_shape(t->shape, t->ndim, got), exp);
}

static int check_dtype(const struct rnnd_tensor *t, rnnd_dtype_t a, rnnd_dtype_t b,
                       rnnd_error_t *err)
{
        if (t->dtype == a || t->dtype == b)
                return 0;
        return rnnd_error_set(err, RNND_EINVAL, "input '%s': datatype %s not accepted (%s or %s)",
                              t->name, rnnd_dtype_name(t->dtype), rnnd_dtype_name(a),
                              rnnd_dtype_name(b));
}

/* Element i of an INT32 or INT64 tensor. */
static int64_t int_at(const struct rnnd_tensor *t, size_t i)
{
        if (t->dtype == RNND_DT_I32) {
                int32_t v;

                memcpy(&v, (const char *)t->data + i * 4, 4);
                return v;
        }
        return ((const int64_t *)t->data)[i];
}

/* t (FP32 or FP16) as float32: in place, or converted into a new buffer kept in *owned. */
static int as_f32(const struct rnnd_tensor *t, void **owned, const float **ret, rnnd_error_t *err)
{
        const float *x = t->data;

        if (t->dtype == RNND_DT_F16) {
                const uint16_t *h = t->data;
                float *f = rnnd_mallocarray(t->numel, sizeof(float));

                if (f == NULL)
                        return nomem(err, "an FP16 input");
                for (size_t i = 0; i < t->numel; i++)
                        f[i] = rnnd_f16_to_f32(h[i]);
                *owned = f;
                x = f;
        }
        for (size_t i = 0; i < t->numel; i++)
                if (!isfinite(x[i]))
                        return rnnd_error_set(err, RNND_EINVAL,
                                              "input '%s': element %zu is not finite", t->name, i);
        *ret = x;
        return 0;
}

/* B or T from the main input's shape, checked against 1..max. */
static int check_dim(const struct rnnd_tensor *t, uint64_t v, uint32_t max, const char *what,
                     const char *field, uint32_t *ret, rnnd_error_t *err)
{
        if (v == 0 || v > max)
                return rnnd_error_set(err, v == 0 ? RNND_EINVAL : RNND_ELIMIT,
                                      "input '%s': %s %" PRIu64 " is outside 1..%" PRIu32 " (%s)",
                                      t->name, what, v, max, field);
        *ret = (uint32_t)v;
        return 0;
}

static int bind_outputs(const struct rnnd_infer_request *req, const struct rnnd_model_config *cfg,
                        struct rnnd_infer_bound *b, rnnd_error_t *err)
{
        bool has[RNND_OUT_COUNT] = {true, true, cfg->cell == RNND_CELL_LSTM, cfg->head.present};

        if (!req->outputs_given || req->n_outputs == 0) {
                for (unsigned k = 0; k < RNND_OUT_COUNT; k++) {
                        if (!has[k])
                                continue;
                        b->out[b->n_out++] = (rnnd_infer_output_t)k;
                        b->want[k] = true;
                        b->binary[k] = req->binary_data_output;
                }
                return 0;
        }
        for (unsigned i = 0; i < req->n_outputs; i++) {
                const struct rnnd_requested_output *ro = &req->outputs[i];
                unsigned k = 0;

                while (k < RNND_OUT_COUNT && strcmp(out_names[k], ro->name) != 0)
                        k++;
                if (k == RNND_OUT_COUNT)
                        return rnnd_error_set(err, RNND_EINVAL,
                                              "output '%s' is not an output of this model "
                                              "(output, h_n%s%s)",
                                              ro->name, has[RNND_OUT_C_N] ? ", c_n" : "",
                                              has[RNND_OUT_SCORES] ? ", scores" : "");
                if (k == RNND_OUT_C_N && !has[k])
                        return rnnd_error_set(err, RNND_EINVAL,
                                              "output 'c_n': only LSTM models have c_n (this "
                                              "model is %s)",
                                              rnnd_cell_name(cfg->cell));
                if (k == RNND_OUT_SCORES && !has[k])
                        return rnnd_error_set(err, RNND_EINVAL,
                                              "output 'scores': this model has no head");
                if (b->want[k])
                        return rnnd_error_set(err, RNND_EINVAL, "output '%s' is requested twice",
                                              ro->name);
                b->out[b->n_out++] = (rnnd_infer_output_t)k;
                b->want[k] = true;
                b->binary[k] = ro->binary;
        }
        return 0;
}

/*
 * The sequence extension's parameters.  No model keeps state between requests
 * yet, so a request that names a sequence is refused rather than answered as
 * a stateless one (docs/HTTP.md): this is the one place that decides it.
 */
static int check_sequence_params(const struct rnnd_infer_params *q, rnnd_error_t *err)
{
        const char *name = q->sequence_id != 0 || q->sequence_id_str[0] != '\0' ? "sequence_id"
                           : q->sequence_start                                  ? "sequence_start"
                           : q->sequence_end                                    ? "sequence_end"
                                                                                : NULL;

        if (name == NULL)
                return 0;
        return rnnd_error_set(err, RNND_EINVAL,
                              "parameters.%s: this model does not support sequences (every "
                              "request is stateless: send each sequence whole, with h0/c0 to "
                              "carry state)",
                              name);
}

int rnnd_infer_bind(const struct rnnd_infer_request *req, const struct rnnd_model_config *cfg,
                    struct rnnd_infer_bound *ret, rnnd_error_t *reterr)
{
        const struct rnnd_tensor *in[IN_COUNT] = {0}, *x;
        struct rnnd_infer_bound b = {.format = req->format};
        uint64_t ld = (uint64_t)cfg->num_layers * rnnd_model_config_dirs(cfg);
        uint64_t want[3];
        bool emb = cfg->embedding.present;
        int r;

        r = check_sequence_params(&req->params, reterr);
        if (r < 0)
                goto out;

        /* Names: each known, each once, and the right main input for the model. */
        for (unsigned i = 0; i < req->n_inputs; i++) {
                const struct rnnd_tensor *t = &req->inputs[i];
                unsigned k = 0;

                while (k < IN_COUNT && strcmp(in_names[k], t->name) != 0)
                        k++;
                if (k == IN_COUNT) {
                        r = rnnd_error_set(reterr, RNND_EINVAL,
                                           "input '%s' is not an input of this model (%s, "
                                           "lengths, h0%s)",
                                           t->name, emb ? "tokens" : "input",
                                           cfg->cell == RNND_CELL_LSTM ? ", c0" : "");
                        goto out;
                }
                if (in[k] != NULL) {
                        r = rnnd_error_set(reterr, RNND_EINVAL, "input '%s' is given twice",
                                           t->name);
                        goto out;
                }
                in[k] = t;
        }
        if (emb && in[IN_INPUT] != NULL) {
                r = rnnd_error_set(reterr, RNND_EINVAL,
                                   "input 'input': this model has an embedding; send token ids "
                                   "in 'tokens'");
                goto out;
        }
        if (!emb && in[IN_TOKENS] != NULL) {
                r = rnnd_error_set(reterr, RNND_EINVAL,
                                   "input 'tokens': this model has no embedding; send 'input'");
                goto out;
        }
        if (in[IN_C0] != NULL && cfg->cell != RNND_CELL_LSTM) {
                r = rnnd_error_set(reterr, RNND_EINVAL,
                                   "input 'c0': only LSTM models take c0 (this model is %s)",
                                   rnnd_cell_name(cfg->cell));
                goto out;
        }
        x = in[emb ? IN_TOKENS : IN_INPUT];
        if (x == NULL) {
                r = emb ? rnnd_error_set(reterr, RNND_EINVAL,
                                         "missing input 'tokens' (INT32 or INT64 [B, T])")
                        : rnnd_error_set(reterr, RNND_EINVAL,
                                         "missing input 'input' (FP32 or FP16 [B, T, %" PRIu32 "])",
                                         cfg->input_size);
                goto out;
        }

        /* Datatypes, then the main input's shape, which sets B and T. */
        r = emb ? check_dtype(x, RNND_DT_I32, RNND_DT_I64, reterr)
                : check_dtype(x, RNND_DT_F32, RNND_DT_F16, reterr);
        for (unsigned k = IN_LENGTHS; r == 0 && k < IN_COUNT; k++)
                if (in[k] != NULL)
                        r = k == IN_LENGTHS ? check_dtype(in[k], RNND_DT_I32, RNND_DT_I64, reterr)
                                            : check_dtype(in[k], RNND_DT_F32, RNND_DT_F16, reterr);
        if (r < 0)
                goto out;
        want[0] = DIM_B;
        want[1] = DIM_T;
        want[2] = cfg->input_size;
        r = check_shape(x, want, emb ? 2 : 3, reterr);
        if (r < 0)
                goto out;
        r = check_dim(x, x->shape[0], cfg->batching.max_batch_size, "batch size", "max_batch_size",
                      &b.B, reterr);
        if (r < 0)
                goto out;
        r = check_dim(x, x->shape[1], cfg->max_sequence_length, "sequence length",
                      "max_sequence_length", &b.T, reterr);
        if (r < 0)
                goto out;

        /* Lengths, given or all T. */
        b.lengths = rnnd_mallocarray(b.B, sizeof(uint32_t));
        if (b.lengths == NULL) {
                r = nomem(reterr, "lengths");
                goto out;
        }
        for (uint32_t i = 0; i < b.B; i++)
                b.lengths[i] = b.T;
        if (in[IN_LENGTHS] != NULL) {
                const struct rnnd_tensor *t = in[IN_LENGTHS];

                /* [B], or [B, 1] as /config's dims [1] with reshape [] give it. */
                want[0] = b.B;
                want[1] = 1;
                r = check_shape(t, want, t->ndim == 2 ? 2 : 1, reterr);
                if (r < 0)
                        goto out;
                for (uint32_t i = 0; i < b.B; i++) {
                        int64_t v = int_at(t, i);

                        if (v < 1 || v > b.T) {
                                r = rnnd_error_set(reterr, RNND_EINVAL,
                                                   "input 'lengths'[%" PRIu32 "]: %" PRId64
                                                   " is outside 1..%" PRIu32,
                                                   i, v, b.T);
                                goto out;
                        }
                        b.lengths[i] = (uint32_t)v;
                }
        }

        /* The main input, as float32 or int64. */
        if (emb) {
                b.tokens_stride = b.T;
                if (x->dtype == RNND_DT_I64) {
                        b.tokens = x->data;
                } else {
                        int64_t *tk = rnnd_mallocarray(x->numel, sizeof(int64_t));

                        if (tk == NULL) {
                                r = nomem(reterr, "tokens");
                                goto out;
                        }
                        for (size_t i = 0; i < x->numel; i++)
                                tk[i] = int_at(x, i);
                        b.owned[0] = tk;
                        b.tokens = tk;
                }
                for (size_t i = 0; i < x->numel; i++) {
                        if (b.tokens[i] < 0 || b.tokens[i] >= cfg->embedding.num_embeddings) {
                                r = rnnd_error_set(reterr, RNND_EINVAL,
                                                   "input 'tokens'[%zu][%zu]: %" PRId64
                                                   " is outside 0..%" PRIu32,
                                                   i / b.T, i % b.T, b.tokens[i],
                                                   cfg->embedding.num_embeddings - 1);
                                goto out;
                        }
                }
        } else {
                b.input_stride = (size_t)b.T * cfg->input_size;
                r = as_f32(x, &b.owned[0], &b.input, reterr);
                if (r < 0)
                        goto out;
        }

        /* Initial states. */
        want[0] = b.B;
        want[1] = ld;
        if (in[IN_H0] != NULL) {
                want[2] = rnnd_model_config_out_size(cfg);
                r = check_shape(in[IN_H0], want, 3, reterr);
                if (r == 0)
                        r = as_f32(in[IN_H0], &b.owned[1], &b.h0, reterr);
                if (r < 0)
                        goto out;
                b.h0_stride = ld * want[2];
        }
        if (in[IN_C0] != NULL) {
                want[2] = cfg->hidden_size;
                r = check_shape(in[IN_C0], want, 3, reterr);
                if (r == 0)
                        r = as_f32(in[IN_C0], &b.owned[2], &b.c0, reterr);
                if (r < 0)
                        goto out;
                b.c0_stride = ld * want[2];
        }

        r = bind_outputs(req, cfg, &b, reterr);
        if (r < 0)
                goto out;
        *ret = b;
out:
        if (r < 0)
                rnnd_infer_bound_done(&b);
        return r;
}

void rnnd_infer_bound_done(struct rnnd_infer_bound *b)
{
        if (b == NULL)
                return;
        rnnd_free(b->lengths);
        for (size_t i = 0; i < RNND_ELEMENTSOF(b->owned); i++)
                rnnd_free(b->owned[i]);
        memset(b, 0, sizeof(*b));
}

/*
 * Outputs
 */

int rnnd_infer_outputs_alloc(const struct rnnd_infer_bound *b, const struct rnnd_model_config *cfg,
                             struct rnnd_infer_outputs *ret, rnnd_error_t *reterr)
{
        struct rnnd_infer_outputs o = {.format = b->format, .B = b->B, .T = b->T};
        uint64_t ld = (uint64_t)cfg->num_layers * rnnd_model_config_dirs(cfg);
        uint64_t hp = rnnd_model_config_out_size(cfg);
        uint64_t shapes[RNND_OUT_COUNT][3] = {
                {b->B, b->T, rnnd_model_config_dirs(cfg) * hp},
                {b->B, ld, hp},
                {b->B, ld, cfg->hidden_size},
                {b->B, b->T, cfg->head.units},
        };
        unsigned ndims[RNND_OUT_COUNT] = {3, 3, 3, 3};
        struct rnnd_infer_limits nolimit = {.max_elements = UINT64_MAX};
        int r = 0;

        if (cfg->head.apply == RNND_HEAD_LAST) {
                shapes[RNND_OUT_SCORES][1] = cfg->head.units;
                ndims[RNND_OUT_SCORES] = 2;
        }
        o.lengths = rnnd_mallocarray(b->B, sizeof(uint32_t));
        if (o.lengths == NULL) {
                r = nomem(reterr, "lengths");
                goto out;
        }
        memcpy(o.lengths, b->lengths, b->B * sizeof(uint32_t));
        for (unsigned i = 0; i < b->n_out; i++) {
                rnnd_infer_output_t k = b->out[i];
                struct rnnd_tensor *t = &o.t[i];

                r = set_shape(t, RNND_DT_F32, shapes[k], ndims[k], &nolimit, out_names[k], reterr);
                if (r < 0)
                        goto out;
                snprintf(t->name, sizeof(t->name), "%s", out_names[k]);
                r = alloc_data(t, reterr);
                if (r < 0)
                        goto out;
                o.n = i + 1;
                o.kind[i] = k;
                o.binary[i] = b->binary[k];
                o.by_kind[k] = t->data;
                o.stride[k] = (size_t)(t->numel / b->B);
        }
        *ret = o;
out:
        if (r < 0)
                rnnd_infer_outputs_done(&o);
        return r;
}

void rnnd_infer_outputs_done(struct rnnd_infer_outputs *o)
{
        if (o == NULL)
                return;
        for (unsigned i = 0; i < o->n; i++)
                tensor_done(&o->t[i]);
        rnnd_free(o->lengths);
        memset(o, 0, sizeof(*o));
}

/*
 * Rendering
 */

/* A growing output buffer; after the first failed allocation every append is a no-op. */
struct jbuf {
        char *p;
        size_t len, cap; /* cap leaves room for a NUL after len */
        bool oom;
};

static bool jb_reserve(struct jbuf *b, size_t more)
{
        size_t want;
        char *np;

        if (b->oom)
                return false;
        if (more < b->cap - b->len)
                return true;
        want = b->cap ? b->cap : 256;
        while (want - b->len <= more) {
                if (want > SIZE_MAX / 2) {
                        b->oom = true;
                        return false;
                }
                want *= 2;
        }
        np = rnnd_realloc(b->p, want);
        if (np == NULL) {
                b->oom = true;
                return false;
        }
        b->p = np;
        b->cap = want;
        return true;
}

static void jb_put(struct jbuf *b, const void *s, size_t n)
{
        if (!jb_reserve(b, n))
                return;
        memcpy(b->p + b->len, s, n);
        b->len += n;
}

static void jb_puts(struct jbuf *b, const char *s)
{
        jb_put(b, s, strlen(s));
}

static void __attribute__((format(printf, 2, 3))) jb_printf(struct jbuf *b, const char *fmt, ...)
{
        char tmp[128];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
        va_end(ap);
        jb_put(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* Length of the valid UTF-8 sequence at p (2..4), or 0. */
static size_t utf8_len(const unsigned char *p)
{
        unsigned c = p[0];
        unsigned lo = 0x80, hi = 0xbf;
        size_t n;

        if (c >= 0xc2 && c <= 0xdf)
                n = 2;
        else if (c >= 0xe0 && c <= 0xef)
                n = 3;
        else if (c >= 0xf0 && c <= 0xf4)
                n = 4;
        else
                return 0;
        if (c == 0xe0)
                lo = 0xa0;
        else if (c == 0xed)
                hi = 0x9f;
        else if (c == 0xf0)
                lo = 0x90;
        else if (c == 0xf4)
                hi = 0x8f;
        if (p[1] < lo || p[1] > hi)
                return 0;
        for (size_t i = 2; i < n; i++)
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
        return n;
}

/* s as a JSON string: escaped, with invalid UTF-8 replaced by U+FFFD. */
static void jb_string(struct jbuf *b, const char *s)
{
        const unsigned char *p = (const unsigned char *)s;

        jb_put(b, "\"", 1);
        while (*p != '\0') {
                unsigned c = *p;
                size_t n;

                if (c == '"' || c == '\\') {
                        jb_put(b, "\\", 1);
                        jb_put(b, p++, 1);
                } else if (c == '\n') {
                        jb_puts(b, "\\n");
                        p++;
                } else if (c == '\t') {
                        jb_puts(b, "\\t");
                        p++;
                } else if (c < 0x20) {
                        jb_printf(b, "\\u%04x", c);
                        p++;
                } else if (c < 0x80) {
                        jb_put(b, p++, 1);
                } else if ((n = utf8_len(p)) != 0) {
                        jb_put(b, p, n);
                        p += n;
                } else {
                        jb_puts(b, "\\ufffd");
                        p++;
                }
        }
        jb_put(b, "\"", 1);
}

static void jb_float(struct jbuf *b, float f)
{
        if (!isfinite(f)) {
                jb_puts(b, isnan(f) ? "NaN" : f > 0 ? "Infinity" : "-Infinity");
                return;
        }
        if (!jb_reserve(b, 32))
                return;
        /* Nine significant digits read back as the same float32. */
        if (f == 0 && signbit(f))
                jb_puts(b, "-0.0"); /* "-0" would read back as the integer 0 */
        else
                b->len += (size_t)snprintf(b->p + b->len, 32, "%.9g", (double)f);
}

/* x as nested lists of shape[0..ndim) (a bare number when ndim is 0). */
static void jb_floats(struct jbuf *b, const float *x, const uint64_t *shape, unsigned ndim)
{
        uint64_t inner = 1;

        if (ndim == 0) {
                jb_float(b, x[0]);
                return;
        }
        for (unsigned d = 1; d < ndim; d++)
                inner *= shape[d];
        jb_put(b, "[", 1);
        for (uint64_t i = 0; i < shape[0] && !b->oom; i++) {
                if (i > 0)
                        jb_put(b, ",", 1);
                if (ndim == 1)
                        jb_float(b, x[i]);
                else
                        jb_floats(b, x + i * inner, shape + 1, ndim - 1);
        }
        jb_put(b, "]", 1);
}

static void jb_shape(struct jbuf *b, const uint64_t *shape, unsigned ndim)
{
        jb_put(b, "[", 1);
        for (unsigned d = 0; d < ndim; d++)
                jb_printf(b, "%s%" PRIu64, d ? "," : "", shape[d]);
        jb_put(b, "]", 1);
}

/* Hands b over as a NUL-terminated body, or frees it and fails. */
static int jb_finish(struct jbuf *b, char **body, size_t *len, rnnd_error_t *err)
{
        if (jb_reserve(b, 1))
                b->p[b->len] = '\0';
        if (b->oom) {
                rnnd_free(b->p);
                return nomem(err, "the response");
        }
        *body = b->p;
        *len = b->len;
        return 0;
}

int rnnd_kserve_render(const char *model_name, uint64_t version, const char *id,
                       const struct rnnd_infer_outputs *o, char **body, size_t *body_len,
                       size_t *json_len, rnnd_error_t *reterr)
{
        struct jbuf b = {0};
        size_t est = 256 + 6 * (strlen(model_name) + (id ? strlen(id) : 0)), jl;
        int r;

        for (unsigned i = 0; i < o->n; i++)
                est += o->binary[i] ? o->t[i].nbytes + 128 : o->t[i].numel * 16 + 128;
        jb_reserve(&b, est);
        jb_puts(&b, "{\"model_name\":");
        jb_string(&b, model_name);
        if (version != 0)
                jb_printf(&b, ",\"model_version\":\"%" PRIu64 "\"", version);
        if (id != NULL && id[0] != '\0') {
                jb_puts(&b, ",\"id\":");
                jb_string(&b, id);
        }
        jb_puts(&b, ",\"outputs\":[");
        for (unsigned i = 0; i < o->n; i++) {
                const struct rnnd_tensor *t = &o->t[i];

                jb_puts(&b, i ? ",{\"name\":" : "{\"name\":");
                jb_string(&b, t->name);
                jb_puts(&b, ",\"datatype\":\"FP32\",\"shape\":");
                jb_shape(&b, t->shape, t->ndim);
                if (o->binary[i]) {
                        jb_printf(&b, ",\"parameters\":{\"binary_data_size\":%zu}}", t->nbytes);
                } else {
                        jb_puts(&b, ",\"data\":");
                        jb_floats(&b, t->data, &t->numel, 1);
                        jb_puts(&b, "}");
                }
        }
        jb_puts(&b, "]}");
        jl = b.len;
        for (unsigned i = 0; i < o->n; i++)
                if (o->binary[i])
                        jb_put(&b, o->t[i].data, o->t[i].nbytes);
        r = jb_finish(&b, body, body_len, reterr);
        if (r < 0)
                return r;
        *json_len = jl;
        return 0;
}

int rnnd_tfs_render(const struct rnnd_infer_outputs *o, char **body, size_t *len,
                    rnnd_error_t *reterr)
{
        struct jbuf b = {0};
        size_t est = 64;

        for (unsigned i = 0; i < o->n; i++)
                est += o->t[i].numel * 16 + 64;
        jb_reserve(&b, est);
        if (o->format != RNND_FMT_TFS_ROW) {
                jb_puts(&b, "{\"outputs\":{");
                for (unsigned i = 0; i < o->n; i++) {
                        jb_puts(&b, i ? "," : "");
                        jb_string(&b, o->t[i].name);
                        jb_puts(&b, ":");
                        jb_floats(&b, o->t[i].data, o->t[i].shape, o->t[i].ndim);
                }
                jb_puts(&b, "}}");
                return jb_finish(&b, body, len, reterr);
        }
        jb_puts(&b, "{\"predictions\":[");
        for (uint32_t s = 0; s < o->B && !b.oom; s++) {
                jb_puts(&b, s ? ",{" : "{");
                for (unsigned i = 0; i < o->n; i++) {
                        const struct rnnd_tensor *t = &o->t[i];
                        uint64_t shape[RNND_MAX_DIMS];

                        /* One instance's part; per-step outputs cut to its own length. */
                        memcpy(shape, t->shape + 1, (t->ndim - 1) * sizeof(shape[0]));
                        if (t->ndim == 3 &&
                            (o->kind[i] == RNND_OUT_OUTPUT || o->kind[i] == RNND_OUT_SCORES))
                                shape[0] = o->lengths[s];
                        jb_puts(&b, i ? "," : "");
                        jb_string(&b, t->name);
                        jb_puts(&b, ":");
                        jb_floats(&b, (const float *)t->data + s * o->stride[o->kind[i]], shape,
                                  t->ndim - 1);
                }
                jb_puts(&b, "}");
        }
        jb_puts(&b, "]}");
        return jb_finish(&b, body, len, reterr);
}

int rnnd_error_render(int code, const char *msg, char **body, size_t *len)
{
        struct jbuf b = {0};

        jb_puts(&b, "{\"error\":");
        jb_string(&b, msg != NULL && msg[0] != '\0' ? msg : rnnd_strerror(code));
        jb_puts(&b, "}");
        return jb_finish(&b, body, len, NULL);
}

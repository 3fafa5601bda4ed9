/*
 * infer.c: the inference wire formats (DESIGN.md §5), the parts every
 * format shares (infer-int.h): field paths and messages, jansson loading
 * with its nesting bound, the one typed-number converter (put_number), the
 * one walker over nested lists (rnnd__infer_fill_nested), tensor buffers and
 * the request's lifetime.  The formats themselves are infer-kserve.c (KServe
 * v2 requests, JSON and binary), infer-tfs.c (TF Serving :predict),
 * infer-bind.c (a request bound to a model's config, and the outputs) and
 * infer-render.c (the responses).
 *
 * Parsing uses jansson, after a quick scan (check_text) that bounds the
 * nesting and the tree's size before any tree is built, and after the element
 * count of every tensor is checked from its shape before its buffer is
 * allocated.
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
#include "infer-int.h"
#include "json.h"
#include "strbuf.h"

/* Doubles from here up round to infinity as float: FLT_MAX plus half an ulp. */
#define F32_OVERFLOW 0x1.ffffffp127

static const char *const out_names[RNND_OUT_COUNT] = {"output", "h_n", "c_n", "scores"};

/*
 * Errors
 */

/* Sets "<path>: <message>" (or just the message when path is "") and returns code. */
int rnnd__infer_path_error(rnnd_error_t *e, int code, const char *path, const char *fmt, ...)
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

/*
 * Formats a field path into dst[PATH_LEN], truncating a long one.  Every
 * field a request has is named before it is read (the error needs the name),
 * so this runs a dozen times a request: the conversions paths use (%s, %.Ns,
 * %u, %zu) are done here without vsnprintf, whose set-up costs more than the
 * path (docs/BENCHMARKS.md, issue 16); any other one falls back to it.
 */
void rnnd__infer_pathf(char *dst, const char *fmt, ...)
{
        struct rnnd_strbuf b;
        const char *f, *s;
        va_list ap, again;

        rnnd_strbuf_init_fixed(&b, dst, PATH_LEN); /* truncates as snprintf does */
        va_start(ap, fmt);
        va_copy(again, ap);
        for (f = fmt; *f != '\0'; f++) {
                size_t prec = SIZE_MAX;

                if (*f != '%') {
                        size_t lit = strcspn(f, "%");

                        rnnd_strbuf_putn(&b, f, lit);
                        f += lit - 1;
                        continue;
                }
                if (*++f == '.')
                        for (prec = 0, f++; *f >= '0' && *f <= '9'; f++)
                                prec = prec * 10 + (size_t)(*f - '0');
                if (*f == 's') {
                        s = va_arg(ap, const char *);
                        rnnd_strbuf_putn(&b, s, strnlen(s, prec));
                } else if (prec == SIZE_MAX && *f == 'u') {
                        rnnd_strbuf_put_u64(&b, va_arg(ap, unsigned));
                } else if (prec == SIZE_MAX && f[0] == 'z' && f[1] == 'u') {
                        rnnd_strbuf_put_u64(&b, va_arg(ap, size_t));
                        f++;
                } else {
                        vsnprintf(dst, PATH_LEN, fmt, again);
                        break;
                }
        }
        va_end(again);
        va_end(ap);
}

int rnnd__infer_nomem(rnnd_error_t *e, const char *what)
{
        return rnnd_error_set(e, RNND_ENOMEM, "out of memory for %s", what);
}

/*
 * JSON text
 */

/*
 * What jansson 2.14's tree of a JSON text takes, at most, in bytes (glibc's
 * malloc, 64-bit; tests/unit/test_infer.c measures it): a value after a
 * comma or a bracket (a number's node and its slot; a string's is more, and
 * its bytes are in the text), an array, an object (its hash table), and an
 * object's member (its key and entry), a string's copy (besides its bytes).
 * A body of 2 bytes a value ("0,") made 20 times its size in tree, of "{},"
 * 77 times.
 */
#define TREE_VALUE  48u
#define TREE_ARRAY  144u
#define TREE_OBJECT 240u
#define TREE_MEMBER 80u
#define TREE_STRING 48u

/*
 * Fails with RNND_ELIMIT when the text nests [ and { deeper than
 * lim->max_depth, or when jansson's tree of it would take more than
 * lim->max_tree bytes, before jansson builds it.  What is inside strings does
 * not count, but their bytes, which jansson copies (all of the text's, at
 * most).
 */
int rnnd__infer_check_text(const char *s, size_t n, const struct rnnd_infer_limits *lim,
                           rnnd_error_t *err)
{
        uint64_t tree = TREE_VALUE, str = 0;
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
                switch (c) {
                case '"':
                        in_str = true;
                        str++;
                        break;
                case '[':
                case '{':
                        if (++depth > lim->max_depth)
                                return rnnd_error_set(err, RNND_ELIMIT,
                                                      "JSON nested deeper than %u levels",
                                                      lim->max_depth);
                        tree += (c == '[' ? TREE_ARRAY : TREE_OBJECT) + TREE_VALUE;
                        break;
                case ']':
                case '}':
                        depth -= depth > 0;
                        break;
                case ',':
                        tree += TREE_VALUE;
                        break;
                case ':':
                        tree += TREE_MEMBER;
                        break;
                default:
                        break;
                }
        }
        tree += str > 0 ? str * TREE_STRING + n : 0;
        if (tree > lim->max_tree)
                return rnnd_error_set(err, RNND_ELIMIT,
                                      "the request's JSON would take about %" PRIu64
                                      " MiB to parse, more than max_json_memory (%" PRIu64
                                      " MiB): send fewer values in one request, or binary "
                                      "tensors",
                                      (tree + (1u << 20) - 1) >> 20, lim->max_tree >> 20);
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
int rnnd__infer_load_object(const char *text, size_t n, const struct rnnd_infer_limits *lim,
                            json_t **ret, rnnd_error_t *err)
{
        json_error_t jerr;
        json_t *root;
        int r;

        r = rnnd__infer_check_text(text, n, lim, err);
        if (r < 0)
                return r;
        json_alloc_failed = false;
        root = json_loadb(text, n, JSON_REJECT_DUPLICATES, &jerr);
        if (root == NULL) {
                /* jansson leaves the text empty when it could not even start. */
                if (json_alloc_failed || json_error_code(&jerr) == json_error_out_of_memory ||
                    jerr.text[0] == '\0')
                        return rnnd__infer_nomem(err, "the JSON tree");
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
int rnnd__infer_check_keys(json_t *obj, const char *const *keys, const char *path,
                           rnnd_error_t *err)
{
        const char *key;
        json_t *v;

        json_object_foreach(obj, key, v)
        {
                size_t i = 0;

                while (keys[i] != NULL && strcmp(keys[i], key) != 0)
                        i++;
                if (keys[i] == NULL)
                        return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                                      "unknown field '%.64s'", key);
        }
        return 0;
}

/* Copies a string value of at most cap - 1 bytes (non-empty when nonempty). */
int rnnd__infer_get_string(json_t *v, char *dst, size_t cap, bool nonempty, const char *path,
                           rnnd_error_t *err)
{
        char got[64];

        if (!json_is_string(v))
                return rnnd__infer_path_error(err, RNND_EINVAL, path, "must be a string, got %s",
                                              rnnd_json_describe(v, got, sizeof(got)));
        if (json_string_length(v) >= cap)
                return rnnd__infer_path_error(err, RNND_EINVAL, path, "longer than %zu bytes",
                                              cap - 1);
        if (nonempty && json_string_length(v) == 0)
                return rnnd__infer_path_error(err, RNND_EINVAL, path, "must not be empty");
        memcpy(dst, json_string_value(v), json_string_length(v) + 1);
        return 0;
}

int rnnd__infer_get_bool(json_t *v, bool *dst, const char *path, rnnd_error_t *err)
{
        char got[64];

        if (!json_is_boolean(v))
                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                              "must be true or false, got %s",
                                              rnnd_json_describe(v, got, sizeof(got)));
        *dst = json_is_true(v);
        return 0;
}

int rnnd__infer_get_uint(json_t *v, uint64_t *dst, const char *path, rnnd_error_t *err)
{
        char got[64];

        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                              "must be a non-negative integer, got %s",
                                              rnnd_json_describe(v, got, sizeof(got)));
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
                                           rnnd_json_describe(v, got, sizeof(got)),
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
        return where_error(w, "%s is out of range for %s", rnnd_json_describe(v, got, sizeof(got)),
                           rnnd_dtype_name(dt));
}

/* The one typed-number converter: v into element dst of type dt. */
static int put_number(const struct where *w, const json_t *v, rnnd_dtype_t dt, void *dst)
{
        char got[64];

        if (dt == RNND_DT_BOOL) {
                if (!json_is_boolean(v))
                        return where_error(w, "expected true or false, got %s",
                                           rnnd_json_describe(v, got, sizeof(got)));
                *(uint8_t *)dst = json_is_true(v);
                return 0;
        }
        if (!json_is_number(v))
                return where_error(w, "expected a number, got %s",
                                   rnnd_json_describe(v, got, sizeof(got)));
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
                                   rnnd_json_describe(v, got, sizeof(got)));
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

int rnnd__infer_fill_nested(const json_t *v, const uint64_t *shape, unsigned ndim, rnnd_dtype_t dt,
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
int rnnd__infer_fill_flat(const json_t *v, uint64_t numel, rnnd_dtype_t dt, void *dst,
                          const char *path, rnnd_error_t *err)
{
        size_t esize = rnnd_dtype_size(dt);
        uint64_t i = 0;
        struct where w = {path, &i, 1, err};
        int r;

        if (json_array_size(v) != numel)
                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                              "expected %" PRIu64 " elements, got %zu", numel,
                                              json_array_size(v));
        for (i = 0; i < numel; i++) {
                r = put_number(&w, json_array_get(v, i), dt, (char *)dst + i * esize);
                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * The shape of nested lists, read down their first elements (TF Serving
 * carries no shape).  rnnd__infer_fill_nested() then checks that they are rectangular.
 */
int rnnd__infer_nested_shape(const json_t *v, uint64_t *shape, unsigned *ndim, const char *path,
                             rnnd_error_t *err)
{
        unsigned n = 0;

        while (json_is_array(v)) {
                if (n == RNND_MAX_DIMS)
                        return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                                      "lists nested more than %d levels",
                                                      RNND_MAX_DIMS);
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
int rnnd__infer_set_shape(struct rnnd_tensor *t, rnnd_dtype_t dt, const uint64_t *shape,
                          unsigned ndim, const struct rnnd_infer_limits *lim, const char *path,
                          rnnd_error_t *err)
{
        char s[SHAPE_LEN];

        if (rnnd_shape_numel(shape, ndim, lim->max_elements, &t->numel) < 0 ||
            t->numel > SIZE_MAX / rnnd_dtype_size(dt))
                return rnnd__infer_path_error(
                        err, RNND_ELIMIT, path, "%s has more than %" PRIu64 " elements (the limit)",
                        rnnd_shape_format(s, SHAPE_LEN, shape, ndim), lim->max_elements);
        t->dtype = dt;
        t->ndim = ndim;
        memcpy(t->shape, shape, ndim * sizeof(shape[0]));
        t->nbytes = (size_t)t->numel * rnnd_dtype_size(dt);
        return 0;
}

/* Gives t a new zeroed buffer of t->nbytes (none when 0). */
int rnnd__infer_alloc_data(struct rnnd_tensor *t, rnnd_error_t *err)
{
        if (t->nbytes == 0)
                return 0;
        t->data = rnnd_calloc(1, t->nbytes);
        if (t->data == NULL)
                return rnnd__infer_nomem(err, "a tensor");
        t->owned = true;
        return 0;
}

int rnnd__infer_shm_key(const char *key)
{
        if (strncmp(key, "shared_memory_", 14) != 0)
                return 0;
        if (strcmp(key + 14, "region") == 0)
                return RNND__SHM_REGION;
        if (strcmp(key + 14, "byte_size") == 0)
                return RNND__SHM_BYTE_SIZE;
        if (strcmp(key + 14, "offset") == 0)
                return RNND__SHM_OFFSET;
        return -1;
}

int rnnd__infer_shm_done(unsigned seen, const char *path, rnnd_error_t *err)
{
        if (seen != 0 && !(seen & RNND__SHM_REGION))
                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                              "shared_memory_%s without shared_memory_region",
                                              seen & RNND__SHM_BYTE_SIZE ? "byte_size" : "offset");
        if (seen != 0 && !(seen & RNND__SHM_BYTE_SIZE))
                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                              "shared_memory_region without "
                                              "shared_memory_byte_size");
        return 0;
}

int rnnd__infer_shm_input(struct rnnd_tensor *t, const struct rnnd_shm_ref *ref, bool has_data,
                          const char *path, rnnd_error_t *err)
{
        char s[SHAPE_LEN];

        if (has_data)
                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                              "has both data and "
                                              "parameters.shared_memory_region");
        if (ref->byte_size != t->nbytes)
                return rnnd__infer_path_error(
                        err, RNND_EINVAL, path,
                        "parameters.shared_memory_byte_size is %" PRIu64 ", but %s %s takes %zu",
                        ref->byte_size, rnnd_dtype_name(t->dtype),
                        rnnd_shape_format(s, SHAPE_LEN, t->shape, t->ndim), t->nbytes);
        return rnnd__infer_alloc_data(t, err);
}

void rnnd__infer_tensor_done(struct rnnd_tensor *t)
{
        if (t->owned)
                rnnd_free(t->data);
        t->data = NULL;
        t->owned = false;
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
        l->max_tree = RNND_INFER_DEFAULT_MAX_TREE;
}

const char *rnnd_infer_output_name(rnnd_infer_output_t k)
{
        return (unsigned)k < RNND_OUT_COUNT ? out_names[k] : "?";
}

const struct rnnd_infer_limits *rnnd__infer_limits(const struct rnnd_infer_limits *l,
                                                   struct rnnd_infer_limits *buf)
{
        if (l != NULL)
                return l;
        rnnd_infer_limits_default(buf);
        return buf;
}

int rnnd__infer_parsed(int r, struct rnnd_infer_request *req, json_t *root,
                       struct rnnd_infer_request *ret)
{
        if (r < 0)
                rnnd_infer_request_done(req);
        else
                *ret = *req;
        json_decref(root);
        return r;
}

void rnnd_infer_request_done(struct rnnd_infer_request *req)
{
        if (req == NULL)
                return;
        for (unsigned i = 0; i < req->n_inputs; i++)
                rnnd__infer_tensor_done(&req->inputs[i]);
        memset(req, 0, sizeof(*req));
}

void rnnd_infer_response_done(struct rnnd_infer_response *r)
{
        if (r == NULL)
                return;
        for (unsigned i = 0; i < r->n_outputs; i++)
                rnnd__infer_tensor_done(&r->outputs[i]);
        memset(r, 0, sizeof(*r));
}

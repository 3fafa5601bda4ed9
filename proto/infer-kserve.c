/*
 * infer-kserve.c: KServe v2 / Open Inference Protocol requests and responses
 * parsed into struct rnnd_infer_request (infer.h): the JSON header, its
 * tensors, parameters and requested outputs, and the binary tensor extension
 * (tensors after the JSON, sized by binary_data_size).
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
#include "numscan.h"
#include "json.h"

/* One KServe parse: where errors go and the binary section being consumed. */
struct kctx {
        const struct rnnd_infer_limits *lim;
        rnnd_error_t *err;
        const char *bin;  /* body + json_len */
        size_t bin_len;   /* len - json_len */
        size_t bin_off;   /* consumed so far, in tensor order */
        const char *list; /* "inputs" or "outputs" */
        /* The fast path (infer-skel.c): the whole text and where its data arrays were. */
        const char *text;                     /* the body */
        const struct rnnd__infer_span *spans; /* NULL: not on the fast path */
        const char *skel;                     /* the skeleton jansson parses */
        size_t skel_len;
        uint64_t big_sequence_id; /* parameters.sequence_id past int64 (load_root), or 0 */
};

/*
 * One shared_memory_* parameter (sub its path) into ref, its bit added to
 * *seen; 0 when key is not one.  ref NULL: a response's outputs, which
 * carry none.
 */
static int shm_param(struct kctx *c, const char *key, json_t *v, struct rnnd_shm_ref *ref,
                     unsigned *seen, const char *sub)
{
        int k = rnnd__infer_shm_key(key);

        if (k == 0)
                return 0;
        if (k < 0 || ref == NULL)
                return rnnd__infer_path_error(c->err, RNND_EINVAL, sub,
                                              k < 0 ? "unknown shared memory parameter"
                                                    : "not supported here");
        *seen |= (unsigned)k;
        if (k == RNND__SHM_REGION)
                return rnnd__infer_get_string(v, ref->region, sizeof(ref->region), true, sub,
                                              c->err);
        return rnnd__infer_get_uint(v, k == RNND__SHM_OFFSET ? &ref->offset : &ref->byte_size, sub,
                                    c->err);
}

static int parse_tensor_params(struct kctx *c, json_t *p, const char *path, bool *has_bds,
                               uint64_t *bds, struct rnnd_shm_ref *ref)
{
        char sub[PATH_LEN], got[64];
        unsigned seen = 0;
        const char *key;
        json_t *v;
        int r;

        if (!json_is_object(p))
                return rnnd__infer_path_error(c->err, RNND_EINVAL, path,
                                              "must be an object, got %s",
                                              rnnd_json_describe(p, got, sizeof(got)));
        json_object_foreach(p, key, v)
        {
                rnnd__infer_pathf(sub, "%s.%.64s", path, key);
                if (strcmp(key, "binary_data_size") == 0) {
                        r = rnnd__infer_get_uint(v, bds, sub, c->err);
                        if (r < 0)
                                return r;
                        *has_bds = true;
                } else if ((r = shm_param(c, key, v, ref, &seen, sub)) < 0) {
                        return r;
                }
                /* Other parameters are not ours to judge; ignore them. */
        }
        return rnnd__infer_shm_done(seen, path, c->err);
}

/* Takes t's bytes from the binary section: borrowed when aligned, else copied. */
static int take_binary(struct kctx *c, struct rnnd_tensor *t, uint64_t bds, const char *path)
{
        char s[SHAPE_LEN];
        const char *p;
        int r;

        if (bds != t->nbytes)
                return rnnd__infer_path_error(
                        c->err, RNND_EINVAL, path, "%" PRIu64 " bytes, but %s %s takes %zu", bds,
                        rnnd_dtype_name(t->dtype),
                        rnnd_shape_format(s, SHAPE_LEN, t->shape, t->ndim), t->nbytes);
        if (bds > c->bin_len - c->bin_off)
                return rnnd__infer_path_error(c->err, RNND_EINVAL, path,
                                              "%" PRIu64
                                              " bytes, but only %zu remain after the JSON "
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
        r = rnnd__infer_alloc_data(t, c->err);
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
                return rnnd__infer_path_error(err, RNND_EINVAL, path, "must be an object, got %s",
                                              rnnd_json_describe(obj, got, sizeof(got)));
        r = rnnd__infer_check_keys(obj, keys, path, err);
        if (r < 0)
                return r;
        rnnd__infer_pathf(sub, "%s.name", path);
        v = json_object_get(obj, "name");
        if (v == NULL)
                return rnnd__infer_path_error(err, RNND_EINVAL, sub, "missing");
        return rnnd__infer_get_string(v, name, cap, true, sub, err);
}

/*
 * The fast path: input t's data array, cut out of the skeleton, read from
 * the text straight into t->data (numscan.h).  Any failure makes the caller
 * parse the whole request again the jansson way, for the error it reports.
 */
static int fill_span(struct kctx *c, const struct rnnd__infer_span *s, struct rnnd_tensor *t,
                     rnnd_dtype_t dt, const char *sub)
{
        const char *p = c->text + s->off;
        bool flat = true;
        size_t k;

        for (k = 1; k < s->len && strchr(" \t\n\r", p[k]) != NULL; k++)
                ;
        if (k < s->len && p[k] == '[')
                flat = false;
        if ((dt == RNND_DT_F32 || dt == RNND_DT_I64) && (flat || t->ndim >= 2) &&
            rnnd_numscan(p, s->len, t->shape, t->ndim, flat, dt, t->data) == s->len)
                return 0;
        return rnnd__infer_path_error(c->err, RNND_EINVAL, sub, "not on the fast path");
}

/* inputs[i] (or outputs[i] of a response: ref NULL) into t. */
static int parse_tensor(struct kctx *c, json_t *obj, unsigned i, struct rnnd_tensor *t,
                        struct rnnd_shm_ref *ref)
{
        static const char *const keys[] = {"name", "shape", "datatype", "parameters", "data", NULL};
        char path[PATH_LEN], sub[PATH_LEN], got[64];
        uint64_t shape[RNND_MAX_DIMS], bds = 0;
        bool has_bds = false;
        json_t *v, *data;
        rnnd_dtype_t dt;
        size_t ndim;
        int r;

        rnnd__infer_pathf(path, "%s[%u]", c->list, i);
        r = named_object(obj, keys, path, t->name, sizeof(t->name), sub, c->err);
        if (r < 0)
                return r;

        rnnd__infer_pathf(sub, "%s.datatype", path);
        v = json_object_get(obj, "datatype");
        if (v == NULL)
                return rnnd__infer_path_error(c->err, RNND_EINVAL, sub, "missing");
        if (!json_is_string(v))
                return rnnd__infer_path_error(c->err, RNND_EINVAL, sub, "must be a string, got %s",
                                              rnnd_json_describe(v, got, sizeof(got)));
        dt = rnnd_dtype_from_name(json_string_value(v));
        if (dt == RNND_DT_INVALID)
                return rnnd__infer_path_error(c->err, RNND_EINVAL, sub, "unknown datatype %s",
                                              rnnd_json_describe(v, got, sizeof(got)));
        if (dt == RNND_DT_BYTES)
                return rnnd__infer_path_error(c->err, RNND_EINVAL, sub, "BYTES is not supported");

        rnnd__infer_pathf(sub, "%s.shape", path);
        v = json_object_get(obj, "shape");
        if (v == NULL)
                return rnnd__infer_path_error(c->err, RNND_EINVAL, sub, "missing");
        if (!json_is_array(v))
                return rnnd__infer_path_error(c->err, RNND_EINVAL, sub, "must be a list, got %s",
                                              rnnd_json_describe(v, got, sizeof(got)));
        ndim = json_array_size(v);
        if (ndim > RNND_MAX_DIMS)
                return rnnd__infer_path_error(c->err, RNND_EINVAL, sub, "more than %d dimensions",
                                              RNND_MAX_DIMS);
        for (size_t d = 0; d < ndim; d++) {
                char dpath[PATH_LEN];

                rnnd__infer_pathf(dpath, "%s[%zu]", sub, d);
                r = rnnd__infer_get_uint(json_array_get(v, d), &shape[d], dpath, c->err);
                if (r < 0)
                        return r;
        }
        r = rnnd__infer_set_shape(t, dt, shape, (unsigned)ndim, c->lim, sub, c->err);
        if (r < 0)
                return r;

        v = json_object_get(obj, "parameters");
        if (v != NULL) {
                rnnd__infer_pathf(sub, "%s.parameters", path);
                r = parse_tensor_params(c, v, sub, &has_bds, &bds, ref);
                if (r < 0)
                        return r;
        }

        data = json_object_get(obj, "data");
        if (ref != NULL && ref->region[0] != '\0')
                return rnnd__infer_shm_input(t, ref, data != NULL || has_bds, path, c->err);
        if (has_bds) {
                if (data != NULL)
                        return rnnd__infer_path_error(
                                c->err, RNND_EINVAL, path,
                                "has both data and parameters.binary_data_size");
                rnnd__infer_pathf(sub, "%s.parameters.binary_data_size", path);
                return take_binary(c, t, bds, sub);
        }
        rnnd__infer_pathf(sub, "%s.data", path);
        if (data == NULL)
                return rnnd__infer_path_error(c->err, RNND_EINVAL, path,
                                              "missing data (or parameters.binary_data_size)");
        if (!json_is_array(data))
                return rnnd__infer_path_error(c->err, RNND_EINVAL, sub, "must be a list, got %s",
                                              rnnd_json_describe(data, got, sizeof(got)));
        r = rnnd__infer_alloc_data(t, c->err);
        if (r < 0)
                return r;
        if (c->spans != NULL && c->spans[i].len > 0)
                return fill_span(c, &c->spans[i], t, dt, sub);
        /* Nested when the shape has 2+ dims and the first element is a list. */
        if (t->ndim >= 2 && json_is_array(json_array_get(data, 0)))
                return rnnd__infer_fill_nested(data, t->shape, t->ndim, dt, t->data, sub, c->err);
        return rnnd__infer_fill_flat(data, t->numel, dt, t->data, sub, c->err);
}

/* A list of tensors ("inputs" of a request or "outputs" of a response). */
static int parse_tensor_list(struct kctx *c, json_t *list, struct rnnd_tensor *ts,
                             struct rnnd_shm_ref *refs, unsigned *n)
{
        char got[64];
        size_t i;
        int r;

        if (list == NULL)
                return rnnd__infer_path_error(c->err, RNND_EINVAL, c->list, "missing");
        if (!json_is_array(list))
                return rnnd__infer_path_error(c->err, RNND_EINVAL, c->list,
                                              "must be a list, got %s",
                                              rnnd_json_describe(list, got, sizeof(got)));
        if (json_array_size(list) > RNND_INFER_MAX_TENSORS)
                return rnnd__infer_path_error(c->err, RNND_EINVAL, c->list, "more than %d tensors",
                                              RNND_INFER_MAX_TENSORS);
        for (i = 0; i < json_array_size(list); i++) {
                /* Count it first, so that what it allocated is freed on failure too. */
                *n = (unsigned)i + 1;
                r = parse_tensor(c, json_array_get(list, i), (unsigned)i, &ts[i],
                                 refs != NULL ? &refs[i] : NULL);
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
        r = rnnd__infer_get_string(v, id, RNND_INFER_ID_MAX, false, "id", c->err);
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
                return rnnd__infer_path_error(c->err, RNND_EINVAL, "parameters",
                                              "must be an object, got %s",
                                              rnnd_json_describe(p, got, sizeof(got)));
        json_object_foreach(p, key, v)
        {
                rnnd__infer_pathf(sub, "parameters.%.64s", key);
                if (strcmp(key, "sequence_id") == 0) {
                        if (json_is_string(v))
                                r = rnnd__infer_get_string(v, q->sequence_id_str,
                                                           sizeof(q->sequence_id_str), false, sub,
                                                           c->err);
                        else if (json_is_integer(v) && json_integer_value(v) >= 0)
                                q->sequence_id = c->big_sequence_id != 0
                                                         ? c->big_sequence_id
                                                         : (uint64_t)json_integer_value(v);
                        else
                                r = rnnd__infer_path_error(
                                        c->err, RNND_EINVAL, sub,
                                        "must be an unsigned integer or a string, got %s",
                                        rnnd_json_describe(v, got, sizeof(got)));
                } else if (strcmp(key, "sequence_start") == 0) {
                        r = rnnd__infer_get_bool(v, &q->sequence_start, sub, c->err);
                } else if (strcmp(key, "sequence_end") == 0) {
                        r = rnnd__infer_get_bool(v, &q->sequence_end, sub, c->err);
                } else if (strcmp(key, "binary_data_output") == 0) {
                        r = rnnd__infer_get_bool(v, &req->binary_data_output, sub, c->err);
                } else if (strcmp(key, "priority") == 0) {
                        if (!json_is_integer(v))
                                r = rnnd__infer_path_error(c->err, RNND_EINVAL, sub,
                                                           "must be an integer, got %s",
                                                           rnnd_json_describe(v, got, sizeof(got)));
                        else
                                q->priority = json_integer_value(v);
                } else if (strcmp(key, "timeout") == 0) {
                        r = rnnd__infer_get_uint(v, &q->timeout_us, sub, c->err);
                } else if (strcmp(key, "headers") == 0 || strncmp(key, "triton_", 7) == 0) {
                        r = rnnd__infer_path_error(c->err, RNND_EINVAL, sub,
                                                   "reserved parameter name");
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
        unsigned seen;
        size_t i;
        int r;

        if (!json_is_array(list))
                return rnnd__infer_path_error(c->err, RNND_EINVAL, "outputs",
                                              "must be a list, got %s",
                                              rnnd_json_describe(list, got, sizeof(got)));
        if (json_array_size(list) > RNND_INFER_MAX_TENSORS)
                return rnnd__infer_path_error(c->err, RNND_EINVAL, "outputs",
                                              "more than %d outputs", RNND_INFER_MAX_TENSORS);
        req->outputs_given = true;
        json_array_foreach(list, i, o)
        {
                struct rnnd_requested_output *ro = &req->outputs[i];

                rnnd__infer_pathf(path, "outputs[%zu]", i);
                r = named_object(o, keys, path, ro->name, sizeof(ro->name), sub, c->err);
                if (r < 0)
                        return r;
                for (size_t j = 0; j < i; j++)
                        if (strcmp(req->outputs[j].name, ro->name) == 0)
                                return rnnd__infer_path_error(c->err, RNND_EINVAL, sub,
                                                              "'%s' is requested twice", ro->name);
                ro->binary = req->binary_data_output;
                seen = 0;
                p = json_object_get(o, "parameters");
                if (p == NULL)
                        continue;
                rnnd__infer_pathf(sub, "%s.parameters", path);
                if (!json_is_object(p))
                        return rnnd__infer_path_error(c->err, RNND_EINVAL, sub,
                                                      "must be an object, got %s",
                                                      rnnd_json_describe(p, got, sizeof(got)));
                json_object_foreach(p, key, v)
                {
                        rnnd__infer_pathf(sub, "%s.parameters.%.64s", path, key);
                        if (strcmp(key, "binary_data") == 0) {
                                r = rnnd__infer_get_bool(v, &ro->binary, sub, c->err);
                                if (r < 0)
                                        return r;
                        } else if (strcmp(key, "classification") == 0) {
                                return rnnd__infer_path_error(c->err, RNND_EINVAL, sub,
                                                              "not supported");
                        } else if ((r = shm_param(c, key, v, &ro->shm, &seen, sub)) < 0) {
                                return r;
                        }
                }
                rnnd__infer_pathf(sub, "%s.parameters", path);
                r = rnnd__infer_shm_done(seen, sub, c->err);
                if (r < 0)
                        return r;
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
 * parameters.sequence_id is an unsigned 64-bit integer (docs/HTTP.md), and
 * jansson refuses integer text past int64 ("too big integer") for the whole
 * document.  Where text[0..n) has such a literal in that one place (the
 * root object's "parameters" object's "sequence_id"), big_sequence_id()
 * finds it: *off and *len, and its value (0 past uint64_t).  A walk of the JSON text that
 * follows the nesting and keys of the first two levels only.
 */
struct walk_level {
        char type;     /* '{' or '[' */
        bool key_next; /* an object's next string is a key */
};

/* The end of the string literal at t[i] (past its closing quote), or n if it is not closed:
 * text ending in a backslash inside a string went past n, and key_is() read beyond it. */
static size_t skip_string(const char *t, size_t n, size_t i)
{
        for (i++; i < n && t[i] != '"'; i++)
                if (t[i] == '\\')
                        i++;
        return i < n ? i + 1 : n;
}

static bool key_is(const char *t, size_t i, size_t end, const char *key)
{
        size_t k = strlen(key);

        return end - i == k + 2 && memcmp(t + i + 1, key, k) == 0;
}

/*
 * Whether the literal t[i..end) is JSON integer text past INT64_MAX: its
 * value in *ret, or 0 when it does not fit uint64_t either.
 */
static bool big_u64(const char *t, size_t i, size_t end, uint64_t *ret)
{
        uint64_t v = 0;
        bool over = false;

        if (t[i] == '0')
                return false;
        for (size_t k = i; k < end; k++) {
                unsigned d = (unsigned)(t[k] - '0');

                if (d > 9)
                        return false;
                if (v > (UINT64_MAX - d) / 10)
                        over = true;
                v = v * 10 + d;
        }
        *ret = over ? 0 : v;
        return over || v > (uint64_t)INT64_MAX;
}

static bool big_sequence_id(const char *t, size_t n, size_t *off, size_t *len, uint64_t *ret)
{
        struct walk_level lv[2] = {{0, false}, {0, false}};
        bool params = false, seq = false; /* the keys at depth 1 and 2 */
        unsigned depth = 0;

        for (size_t i = 0, end; i < n; i = end) {
                char ch = t[i];
                struct walk_level *l = depth >= 1 && depth <= 2 ? &lv[depth - 1] : NULL;

                end = i + 1;
                if (ch == '{' || ch == '[') {
                        if (++depth <= 2)
                                lv[depth - 1] = (struct walk_level){ch, ch == '{'};
                } else if (ch == '}' || ch == ']') {
                        depth -= depth > 0;
                } else if (ch == ',') {
                        if (l != NULL)
                                l->key_next = l->type == '{';
                } else if (ch == '"') {
                        end = skip_string(t, n, i);
                        if (l != NULL && l->key_next) {
                                l->key_next = false;
                                if (depth == 1)
                                        params = key_is(t, i, end, "parameters");
                                else
                                        seq = key_is(t, i, end, "sequence_id");
                        }
                } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
                        while (end < n && strchr("0123456789.eE+-", t[end]) != NULL)
                                end++;
                        if (depth == 2 && lv[0].type == '{' && lv[1].type == '{' && params && seq &&
                            big_u64(t, i, end, ret)) {
                                *off = i;
                                *len = end - i;
                                return true;
                        }
                }
        }
        return false;
}

/*
 * rnnd__infer_load_object(), and again with a big parameters.sequence_id
 * (big_sequence_id()) written as 0 in a copy, its value kept in c.
 */
static int load_root(struct kctx *c, const char *text, size_t n, json_t **root)
{
        int r = rnnd__infer_load_object(text, n, c->lim, root, c->err);
        size_t off, len;
        uint64_t v;
        char *copy;

        if (r != RNND_EINVAL || !big_sequence_id(text, n, &off, &len, &v))
                return r;
        if (v == 0)
                return rnnd__infer_path_error(c->err, RNND_EINVAL, "parameters.sequence_id",
                                              "%.*s is past 18446744073709551615, the largest id",
                                              (int)(len < 40 ? len : 40), text + off);
        copy = rnnd_malloc(n);
        if (copy == NULL)
                return r;
        memcpy(copy, text, n);
        copy[off] = '0';
        memset(copy + off + 1, ' ', len - 1);
        r = rnnd__infer_load_object(copy, n, c->lim, root, c->err);
        rnnd_free(copy);
        if (r == 0)
                c->big_sequence_id = v;
        return r;
}

/*
 * Splits a KServe body (split_body()), parses its JSON header into *root and
 * checks its keys against keys.  With c->text set (the fast path), the JSON
 * parsed is text[0..text_len), the skeleton, instead of the body's header.
 * On failure *root is NULL.
 */
static int open_body(struct kctx *c, const void *body, size_t len, size_t json_len,
                     const char *const *keys, json_t **root)
{
        const char *text = body;
        size_t text_len = json_len;
        int r;

        *root = NULL;
        r = split_body(c, len, json_len, body);
        if (r < 0)
                return r;
        if (c->spans != NULL) {
                /* The data arrays count towards the depth the skeleton no longer has. */
                for (unsigned i = 0; i < RNND_INFER_MAX_TENSORS; i++)
                        if (c->spans[i].len > 0 &&
                            RNND__INFER_SPAN_BASE_DEPTH + c->spans[i].depth > c->lim->max_depth)
                                return rnnd_error_set(c->err, RNND_ELIMIT, "too deep");
                text = c->skel;
                text_len = c->skel_len;
        }
        r = load_root(c, text, text_len, root);
        if (r < 0)
                return r;
        r = rnnd__infer_check_keys(*root, keys, "", c->err);
        if (r < 0) {
                json_decref(*root);
                *root = NULL;
        }
        return r;
}

static int parse_request(struct kctx *c, const void *body, size_t len, size_t json_len,
                         struct rnnd_infer_request *ret)
{
        static const char *const keys[] = {"id", "parameters", "inputs", "outputs", NULL};
        struct rnnd_infer_request req = {.format = RNND_FMT_KSERVE};
        json_t *root = NULL, *v;
        int r;

        r = open_body(c, body, len, json_len, keys, &root);
        if (r < 0)
                return r;
        r = parse_id(c, json_object_get(root, "id"), req.id, &req.has_id);
        if (r < 0)
                goto out;
        v = json_object_get(root, "parameters");
        if (v != NULL) {
                r = parse_params(c, v, &req);
                if (r < 0)
                        goto out;
        }
        r = parse_tensor_list(c, json_object_get(root, "inputs"), req.inputs, req.input_shm,
                              &req.n_inputs);
        if (r < 0)
                goto out;
        v = json_object_get(root, "outputs");
        if (v != NULL) {
                r = parse_outputs(c, v, &req);
                if (r < 0)
                        goto out;
        }
out:
        return rnnd__infer_parsed(r, &req, root, ret);
}

/*
 * The plain skeleton without jansson.  Building jansson's tree of even a
 * 110-byte skeleton (its lexer and some 25 allocations) was the largest part
 * of a small request's parse (docs/BENCHMARKS.md, issue 16), so the common
 * form is read here directly: "id", "inputs" of objects with exactly "name",
 * "datatype", "shape" and "data" (cut out to "[]"), and "outputs" of objects
 * with "name" and at most {"binary_data": true|false}.  Strings are printable
 * ASCII without escapes, shape entries plain non-negative integers.  What it
 * accepts, jansson's path accepts with the same result (tests/unit/test_infer.c
 * compares them on thousands of damaged requests); anything else -- other
 * keys or parameters, escapes, duplicates, any error at all -- returns
 * PLAIN_NO and the jansson path decides, with its messages.
 */
#define PLAIN_NO 1

struct plain {
        const char *p, *end;
};

static void plain_ws(struct plain *s)
{
        while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
                s->p++;
}

/* The next token is the character ch (taken). */
static bool plain_is(struct plain *s, char ch)
{
        plain_ws(s);
        if (s->p < s->end && *s->p == ch) {
                s->p++;
                return true;
        }
        return false;
}

/* A string of printable ASCII without escapes; *v points into the text. */
static bool plain_str(struct plain *s, const char **v, size_t *n)
{
        const char *q;

        if (!plain_is(s, '"'))
                return false;
        for (q = s->p; q < s->end && *q != '"'; q++)
                if (*q < 0x20 || *q > 0x7e || *q == '\\')
                        return false;
        if (q >= s->end)
                return false;
        *v = s->p;
        *n = (size_t)(q - s->p);
        s->p = q + 1;
        return true;
}

/* The string into dst[cap] (non-empty when nonempty). */
static bool plain_copy(struct plain *s, char *dst, size_t cap, bool nonempty)
{
        const char *v;
        size_t n;

        if (!plain_str(s, &v, &n) || n >= cap || (nonempty && n == 0))
                return false;
        memcpy(dst, v, n);
        dst[n] = '\0';
        return true;
}

/* A non-negative integer as JSON writes one (no sign, no leading zero), < 10^18. */
static bool plain_uint(struct plain *s, uint64_t *v)
{
        const char *q;

        plain_ws(s);
        q = s->p;
        *v = 0;
        while (q < s->end && *q >= '0' && *q <= '9' && q - s->p < 18)
                *v = *v * 10 + (uint64_t)(*q++ - '0');
        if (q == s->p || (*s->p == '0' && q - s->p > 1) ||
            (q < s->end && ((*q >= '0' && *q <= '9') || *q == '.' || *q == 'e' || *q == 'E')))
                return false;
        s->p = q;
        return true;
}

/* A key of the object (the ':' taken): its index in keys, each at most once. */
static int plain_key(struct plain *s, const char *const *keys, unsigned *seen)
{
        const char *v;
        size_t n;

        if (!plain_str(s, &v, &n))
                return -1;
        for (int i = 0; keys[i] != NULL; i++)
                if (strlen(keys[i]) == n && memcmp(keys[i], v, n) == 0) {
                        if ((*seen & 1u << i) != 0 || !plain_is(s, ':'))
                                return -1;
                        *seen |= 1u << i;
                        return i;
                }
        return -1;
}

/* After a member or element: true at the closing bracket, false after ','; *bad otherwise. */
static bool plain_next(struct plain *s, char close, bool *bad)
{
        if (plain_is(s, close))
                return true;
        *bad = !plain_is(s, ',');
        return *bad;
}

/*
 * inputs[i]: {"name", "datatype", "shape", and "data": [] (cut out) or
 * "parameters": {"binary_data_size": N}} in any order.
 */
static int plain_tensor(struct kctx *c, struct plain *s, unsigned i, struct rnnd_tensor *t)
{
        static const char *const keys[] = {"name", "datatype", "shape", "data", "parameters", NULL};
        static const char *const pkeys[] = {"binary_data_size", NULL};
        uint64_t shape[RNND_MAX_DIMS], bds = 0;
        unsigned seen = 0, pseen = 0, ndim = 0;
        rnnd_dtype_t dt = RNND_DT_INVALID;
        char dtname[16];
        bool bad = false;

        if (!plain_is(s, '{'))
                return PLAIN_NO;
        do {
                switch (plain_key(s, keys, &seen)) {
                case 0:
                        if (!plain_copy(s, t->name, sizeof(t->name), true))
                                return PLAIN_NO;
                        break;
                case 1:
                        if (!plain_copy(s, dtname, sizeof(dtname), false))
                                return PLAIN_NO;
                        dt = rnnd_dtype_from_name(dtname);
                        break;
                case 2:
                        if (!plain_is(s, '['))
                                return PLAIN_NO;
                        if (!plain_is(s, ']'))
                                do
                                        if (ndim == RNND_MAX_DIMS || !plain_uint(s, &shape[ndim++]))
                                                return PLAIN_NO;
                                while (!plain_next(s, ']', &bad) && !bad);
                        break;
                case 3:
                        if (c->spans == NULL || !plain_is(s, '[') || !plain_is(s, ']'))
                                return PLAIN_NO;
                        break;
                case 4:
                        if (!plain_is(s, '{') || plain_key(s, pkeys, &pseen) != 0 ||
                            !plain_uint(s, &bds) || !plain_is(s, '}'))
                                return PLAIN_NO;
                        break;
                default:
                        return PLAIN_NO;
                }
        } while (!bad && !plain_next(s, '}', &bad) && !bad);
        /* name, datatype, shape, and data or binary_data_size. */
        if (bad || (seen != 15 && seen != 23) || dt == RNND_DT_INVALID || dt == RNND_DT_BYTES ||
            rnnd__infer_set_shape(t, dt, shape, ndim, c->lim, "", NULL) < 0)
                return PLAIN_NO;
        if (seen == 23)
                return take_binary(c, t, bds, "") < 0 ? PLAIN_NO : 0;
        if (c->spans[i].len == 0 || rnnd__infer_alloc_data(t, NULL) < 0 ||
            fill_span(c, &c->spans[i], t, dt, "") < 0)
                return PLAIN_NO;
        return 0;
}

/* outputs[i]: {"name"} or {"name", "parameters": {"binary_data": bool}}. */
static int plain_output(struct plain *s, struct rnnd_requested_output *ro)
{
        static const char *const keys[] = {"name", "parameters", NULL};
        static const char *const pkeys[] = {"binary_data", NULL};
        unsigned seen = 0, pseen = 0;
        bool bad = false;

        ro->binary = false; /* the request's binary_data_output: no parameters here */
        if (!plain_is(s, '{'))
                return PLAIN_NO;
        do {
                switch (plain_key(s, keys, &seen)) {
                case 0:
                        if (!plain_copy(s, ro->name, sizeof(ro->name), true))
                                return PLAIN_NO;
                        break;
                case 1:
                        if (!plain_is(s, '{') || plain_key(s, pkeys, &pseen) != 0)
                                return PLAIN_NO;
                        plain_ws(s);
                        if ((size_t)(s->end - s->p) >= 4 && memcmp(s->p, "true", 4) == 0)
                                ro->binary = true, s->p += 4;
                        else if ((size_t)(s->end - s->p) >= 5 && memcmp(s->p, "false", 5) == 0)
                                s->p += 5;
                        else
                                return PLAIN_NO;
                        if (!plain_is(s, '}'))
                                return PLAIN_NO;
                        break;
                default:
                        return PLAIN_NO;
                }
        } while (!bad && !plain_next(s, '}', &bad) && !bad);
        return bad || (seen & 1u) == 0 ? PLAIN_NO : 0;
}

static int plain_request(struct kctx *c, struct rnnd_infer_request *req)
{
        static const char *const keys[] = {"id", "inputs", "outputs", NULL};
        struct plain s = {c->skel, c->skel + c->skel_len};
        unsigned seen = 0, n;
        bool bad = false;

        /* Every request nests 4 deep (root, inputs, an input, its shape). */
        if (c->lim->max_depth < 4)
                return PLAIN_NO;
        for (unsigned i = 0; c->spans != NULL && i < RNND_INFER_MAX_TENSORS; i++)
                if (c->spans[i].len > 0 &&
                    RNND__INFER_SPAN_BASE_DEPTH + c->spans[i].depth > c->lim->max_depth)
                        return PLAIN_NO;
        if (!plain_is(&s, '{'))
                return PLAIN_NO;
        do {
                switch (plain_key(&s, keys, &seen)) {
                case 0:
                        if (!plain_copy(&s, req->id, sizeof(req->id), false))
                                return PLAIN_NO;
                        req->has_id = true;
                        break;
                case 1:
                        if (!plain_is(&s, '['))
                                return PLAIN_NO;
                        if (!plain_is(&s, ']'))
                                do {
                                        if (req->n_inputs == RNND_INFER_MAX_TENSORS)
                                                return PLAIN_NO;
                                        /* Counted first, so that its data is freed on failure. */
                                        n = req->n_inputs++;
                                        if (plain_tensor(c, &s, n, &req->inputs[n]) != 0)
                                                return PLAIN_NO;
                                } while (!plain_next(&s, ']', &bad) && !bad);
                        break;
                case 2:
                        if (!plain_is(&s, '['))
                                return PLAIN_NO;
                        req->outputs_given = true;
                        if (!plain_is(&s, ']'))
                                do {
                                        if (req->n_outputs == RNND_INFER_MAX_TENSORS)
                                                return PLAIN_NO;
                                        n = req->n_outputs++;
                                        if (plain_output(&s, &req->outputs[n]) != 0)
                                                return PLAIN_NO;
                                        for (unsigned j = 0; j < n; j++)
                                                if (strcmp(req->outputs[j].name,
                                                           req->outputs[n].name) == 0)
                                                        return PLAIN_NO;
                                } while (!plain_next(&s, ']', &bad) && !bad);
                        break;
                default:
                        return PLAIN_NO;
                }
        } while (!bad && !plain_next(&s, '}', &bad) && !bad);
        plain_ws(&s);
        return bad || s.p != s.end || (seen & 2u) == 0 || c->bin_off != c->bin_len ? PLAIN_NO : 0;
}

/*
 * plain_request() of c->skel (a skeleton with c->spans, or the JSON header
 * itself without) into *ret, or PLAIN_NO with nothing kept; c is not changed.
 */
static int parse_plain(const struct kctx *c0, const void *body, size_t len, size_t json_len,
                       struct rnnd_infer_request *ret)
{
        struct rnnd_infer_request req = {.format = RNND_FMT_KSERVE};
        struct kctx copy = *c0, *c = &copy;
        int r = split_body(c, len, json_len, body) < 0 ? PLAIN_NO : plain_request(c, &req);

        if (r != 0) {
                rnnd_infer_request_done(&req);
                return PLAIN_NO;
        }
        *ret = req;
        return 0;
}

/* Below this many bytes of JSON the skeleton saves less than it costs. */
#define FAST_PATH_MIN 128

/*
 * The fast paths (DESIGN.md §5): 0 with *ret, or nonzero when the full
 * jansson parse must decide.  With data arrays (a skeleton, made for JSON of
 * skel_min bytes or more): the skeleton read by hand, or else, when
 * skel_jansson, by jansson; numscan.h reads the arrays.  Without (binary
 * tensors): the JSON header itself read by hand.  They never report errors.
 */
static int parse_fast(const struct kctx *c, const void *body, size_t len, size_t json_len,
                      size_t skel_min, bool skel_jansson, struct rnnd_infer_request *ret)
{
        struct rnnd__infer_span spans[RNND_INFER_MAX_TENSORS];
        rnnd_error_t scratch = {0};
        struct kctx f = *c;
        char *skel;
        int r;

        if (json_len > len)
                return PLAIN_NO;
        f.err = &scratch;
        f.text = body;
        if (json_len >= skel_min && (skel = rnnd_malloc(json_len + 1)) != NULL) {
                f.skel = skel;
                f.skel_len = rnnd__infer_skeleton(body, json_len, skel, spans);
                f.spans = spans;
                if (f.skel_len > 0) {
                        r = parse_plain(&f, body, len, json_len, ret);
                        if (r != 0 && skel_jansson)
                                r = parse_request(&f, body, len, json_len, ret);
                        rnnd_free(skel);
                        return r == 0 ? 0 : PLAIN_NO;
                }
                rnnd_free(skel);
        }
        f.skel = body;
        f.skel_len = json_len;
        f.spans = NULL;
        return parse_plain(&f, body, len, json_len, ret);
}

int rnnd_kserve_parse(const void *body, size_t len, size_t json_len,
                      const struct rnnd_infer_limits *limits, struct rnnd_infer_request *ret,
                      rnnd_error_t *reterr)
{
        struct rnnd_infer_limits lbuf;
        struct kctx c = {.lim = rnnd__infer_limits(limits, &lbuf), .err = reterr, .list = "inputs"};

        if (parse_fast(&c, body, len, json_len, FAST_PATH_MIN, true, ret) == 0)
                return 0;
        return parse_request(&c, body, len, json_len, ret);
}

int rnnd__kserve_parse_plain(const void *body, size_t len, size_t json_len,
                             const struct rnnd_infer_limits *limits, struct rnnd_infer_request *ret)
{
        struct rnnd_infer_limits lbuf;
        struct kctx c = {.lim = rnnd__infer_limits(limits, &lbuf), .list = "inputs"};

        return parse_fast(&c, body, len, json_len, 0, false, ret);
}

int rnnd__kserve_parse_jansson(const void *body, size_t len, size_t json_len,
                               const struct rnnd_infer_limits *limits,
                               struct rnnd_infer_request *ret, rnnd_error_t *reterr)
{
        struct rnnd_infer_limits lbuf;
        struct kctx c = {.lim = rnnd__infer_limits(limits, &lbuf), .err = reterr, .list = "inputs"};

        return parse_request(&c, body, len, json_len, ret);
}

int rnnd_kserve_parse_response(const void *body, size_t len, size_t json_len,
                               const struct rnnd_infer_limits *limits,
                               struct rnnd_infer_response *ret, rnnd_error_t *reterr)
{
        static const char *const keys[] = {"model_name", "model_version", "id",
                                           "parameters", "outputs",       NULL};
        struct rnnd_infer_limits lbuf;
        struct kctx c = {
                .lim = rnnd__infer_limits(limits, &lbuf), .err = reterr, .list = "outputs"};
        struct rnnd_infer_response resp = {0};
        json_t *root = NULL, *v;
        int r;

        r = open_body(&c, body, len, json_len, keys, &root);
        if (r < 0)
                return r;
        v = json_object_get(root, "model_name");
        r = v == NULL ? rnnd__infer_path_error(reterr, RNND_EINVAL, "model_name", "missing")
                      : rnnd__infer_get_string(v, resp.model_name, sizeof(resp.model_name), false,
                                               "model_name", reterr);
        if (r < 0)
                goto out;
        v = json_object_get(root, "model_version");
        if (v != NULL) {
                r = rnnd__infer_get_string(v, resp.model_version, sizeof(resp.model_version), false,
                                           "model_version", reterr);
                if (r < 0)
                        goto out;
        }
        r = parse_id(&c, json_object_get(root, "id"), resp.id, &resp.has_id);
        if (r < 0)
                goto out;
        r = parse_tensor_list(&c, json_object_get(root, "outputs"), resp.outputs, NULL,
                              &resp.n_outputs);
        if (r < 0)
                goto out;
        *ret = resp;
out:
        if (r < 0)
                rnnd_infer_response_done(&resp);
        json_decref(root);
        return r;
}

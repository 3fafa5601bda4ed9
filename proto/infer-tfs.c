/*
 * infer-tfs.c: TF Serving :predict requests, in columns ({"inputs": ...})
 * and rows ({"instances": [...]}), parsed into struct rnnd_infer_request
 * (infer.h).  TF Serving's JSON is untyped and carries no shapes: the dtype
 * comes from the tensor's name, the shape from the nested lists.
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
                return rnnd__infer_path_error(err, RNND_EINVAL, path, "more than %d tensors",
                                              RNND_INFER_MAX_TENSORS);
        if (strlen(name) >= RNND_INFER_NAME_MAX)
                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                              "a name is longer than %d bytes",
                                              RNND_INFER_NAME_MAX - 1);
        t = &req->inputs[req->n_inputs];
        r = rnnd__infer_set_shape(t, dt, shape, ndim, lim, path, err);
        if (r < 0)
                return r;
        r = rnnd__infer_alloc_data(t, err);
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
                r = rnnd__infer_nested_shape(inputs, shape, &ndim, "inputs", err);
                if (r < 0)
                        return r;
                r = add_tensor(req, name, tfs_dtype(name), shape, ndim, lim, "inputs", &t, err);
                if (r < 0)
                        return r;
                return rnnd__infer_fill_nested(inputs, t->shape, t->ndim, t->dtype, t->data,
                                               "inputs", err);
        }
        json_object_foreach(inputs, name, v)
        {
                rnnd__infer_pathf(path, "inputs.%.64s", name);
                r = rnnd__infer_nested_shape(v, shape, &ndim, path, err);
                if (r < 0)
                        return r;
                r = add_tensor(req, name, tfs_dtype(name), shape, ndim, lim, path, &t, err);
                if (r < 0)
                        return r;
                r = rnnd__infer_fill_nested(v, t->shape, t->ndim, t->dtype, t->data, path, err);
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

/*
 * Levels of lists of row tensor k in an instance: a chain's states are one
 * flat row a sequence (infer-bind.c state_shape(); docs/HTTP.md).
 */
static unsigned row_ndim(unsigned k, const struct rnnd_model_config *cfg)
{
        return (k == ROW_H0 || k == ROW_C0) && cfg->n_blocks > 1 ? 1 : row_tensors[k].ndim;
}

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
                rnnd__infer_pathf(path, "instances[%zu].%s", i, row_tensors[k].name);
        else
                rnnd__infer_pathf(path, "instances[%zu]", i);
}

/*
 * Pass 1 of the row format, for instance i: its keys, and each tensor's shape
 * against the instance's own length and against the other instances' (cols,
 * where the longest sequence is kept).
 */
static int row_scan(json_t *inst, size_t i, const struct rnnd_model_config *cfg,
                    struct row_col *cols, rnnd_error_t *err)
{
        static const char *const keys[] = {"input", "tokens", "h0", "c0", NULL};
        char path[PATH_LEN], vpath[PATH_LEN], got[64], s1[SHAPE_LEN], s2[SHAPE_LEN];
        uint64_t shape[RNND_MAX_DIMS], len = 0;
        unsigned ndim = 0;
        int len_from = -1, r;
        json_t *v;

        rnnd__infer_pathf(path, "instances[%zu]", i);
        if (json_is_object(inst)) {
                if (json_object_get(inst, "lengths") != NULL)
                        return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                                      "'lengths' is not accepted in row format: "
                                                      "each instance has its own length");
                r = rnnd__infer_check_keys(inst, keys, path, err);
                if (r < 0)
                        return r;
        } else if (!json_is_array(inst)) {
                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                              "must be a list or an object, got %s",
                                              rnnd_json_describe(inst, got, sizeof(got)));
        }
        for (unsigned k = 0; k < ROW_COUNT; k++) {
                struct row_col *col = &cols[k];

                v = row_value(inst, k, cfg);
                if (v == NULL) {
                        if (row_tensors[k].seq && col->any)
                                return rnnd__infer_path_error(err, RNND_EINVAL, path,
                                                              "missing '%s' (instances[%d] has it)",
                                                              row_tensors[k].name, col->first);
                        continue;
                }
                if (row_tensors[k].seq && !col->any && i > 0)
                        return rnnd__infer_path_error(err, RNND_EINVAL, "instances[0]",
                                                      "missing '%s' (instances[%zu] has it)",
                                                      row_tensors[k].name, i);
                row_path(vpath, inst, i, k);
                r = rnnd__infer_nested_shape(v, shape, &ndim, vpath, err);
                if (r < 0)
                        return r;
                if (row_tensors[k].seq && ndim >= 1 && shape[0] == 0)
                        return rnnd__infer_path_error(err, RNND_EINVAL, vpath, "empty sequence");
                if (ndim != row_ndim(k, cfg))
                        return rnnd__infer_path_error(
                                err, RNND_EINVAL, vpath,
                                "shape %s, but '%s' takes %u level%s of lists per instance",
                                rnnd_shape_format(s1, SHAPE_LEN, shape, ndim), row_tensors[k].name,
                                row_ndim(k, cfg), row_ndim(k, cfg) == 1 ? "" : "s");
                if (row_tensors[k].seq) {
                        if (len_from >= 0 && shape[0] != len)
                                return rnnd__infer_path_error(
                                        err, RNND_EINVAL, vpath,
                                        "%" PRIu64 " steps, but '%s' has %" PRIu64, shape[0],
                                        row_tensors[len_from].name, len);
                        len = shape[0];
                        len_from = (int)k;
                }
                if (!col->any) {
                        col->any = true;
                        col->first = (int)i;
                        memcpy(col->shape, shape, sizeof(shape));
                } else if (memcmp(col->shape + row_tensors[k].seq, shape + row_tensors[k].seq,
                                  (ndim - row_tensors[k].seq) * sizeof(shape[0])) != 0) {
                        return rnnd__infer_path_error(
                                err, RNND_EINVAL, vpath,
                                "shape %s does not match instances[%d]'s %s",
                                rnnd_shape_format(s1, SHAPE_LEN, shape, ndim), col->first,
                                rnnd_shape_format(s2, SHAPE_LEN, col->shape, ndim));
                }
                if (row_tensors[k].seq && shape[0] > col->shape[0])
                        col->shape[0] = shape[0];
        }
        if (len_from < 0)
                return rnnd__infer_path_error(err, RNND_EINVAL, path, "missing '%s'",
                                              main_input(cfg));
        return 0;
}

/* Pass 2: allocates each tensor [B, per-instance shape] and fills each instance's part. */
static int row_fill(json_t *list, const struct rnnd_model_config *cfg,
                    const struct rnnd_infer_limits *lim, const struct row_col *cols,
                    struct rnnd_infer_request *req, rnnd_error_t *err)
{
        char vpath[PATH_LEN];
        uint64_t shape[RNND_MAX_DIMS], B = json_array_size(list);
        unsigned ndim = 0;
        json_t *inst, *v;
        size_t i;
        int r;

        for (unsigned k = 0; k < ROW_COUNT; k++) {
                const char *name = row_tensors[k].name;
                struct rnnd_tensor *t;
                size_t per;

                if (!cols[k].any)
                        continue;
                shape[0] = B;
                memcpy(shape + 1, cols[k].shape, row_ndim(k, cfg) * sizeof(shape[0]));
                r = add_tensor(req, name, tfs_dtype(name), shape, row_ndim(k, cfg) + 1, lim,
                               "instances", &t, err);
                if (r < 0)
                        return r;
                per = t->nbytes / B;
                json_array_foreach(list, i, inst)
                {
                        v = row_value(inst, k, cfg);
                        if (v == NULL)
                                continue;
                        row_path(vpath, inst, i, k);
                        r = rnnd__infer_nested_shape(v, shape, &ndim, vpath, err);
                        if (r < 0)
                                return r;
                        /* An empty tensor may have no data: NULL + 0 is undefined. */
                        r = rnnd__infer_fill_nested(v, shape, ndim, t->dtype,
                                                    per ? (char *)t->data + i * per : t->data,
                                                    vpath, err);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

/* The lengths, from each instance's sequence tensor. */
static int row_lengths(json_t *list, const struct rnnd_model_config *cfg,
                       const struct rnnd_infer_limits *lim, struct rnnd_infer_request *req,
                       rnnd_error_t *err)
{
        uint64_t B = json_array_size(list);
        struct rnnd_tensor *lt;
        json_t *inst, *v;
        size_t i;
        int r;

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

/*
 * Row format: {"instances": [seq, ...]}, each instance one sequence of its own
 * length.  Pass 1 checks each instance's shapes and finds the longest; pass 2
 * fills the padded [B, T, ...] tensors, with zeros for missing states.
 */
static int tfs_rows(json_t *list, const struct rnnd_model_config *cfg,
                    const struct rnnd_infer_limits *lim, struct rnnd_infer_request *req,
                    rnnd_error_t *err)
{
        struct row_col cols[ROW_COUNT] = {0};
        char got[64];
        json_t *inst;
        size_t i;
        int r;

        req->format = RNND_FMT_TFS_ROW;
        if (!json_is_array(list))
                return rnnd__infer_path_error(err, RNND_EINVAL, "instances",
                                              "must be a list, got %s",
                                              rnnd_json_describe(list, got, sizeof(got)));
        if (json_array_size(list) == 0)
                return rnnd__infer_path_error(err, RNND_EINVAL, "instances", "must not be empty");
        json_array_foreach(list, i, inst)
        {
                r = row_scan(inst, i, cfg, cols, err);
                if (r < 0)
                        return r;
        }
        r = row_fill(list, cfg, lim, cols, req, err);
        if (r < 0)
                return r;
        return row_lengths(list, cfg, lim, req, err);
}

int rnnd_tfs_parse(const void *body, size_t len, const struct rnnd_model_config *cfg,
                   const struct rnnd_infer_limits *limits, struct rnnd_infer_request *ret,
                   rnnd_error_t *reterr)
{
        static const char *const keys[] = {"signature_name", "instances", "inputs", NULL};
        struct rnnd_infer_limits lbuf;
        const struct rnnd_infer_limits *lim = rnnd__infer_limits(limits, &lbuf);
        struct rnnd_infer_request req = {.format = RNND_FMT_TFS_ROW};
        json_t *root = NULL, *v, *instances, *inputs;
        char got[64];
        int r;

        if (len == 0)
                return rnnd_error_set(reterr, RNND_EINVAL, "the body is empty");
        r = rnnd__infer_load_object(body, len, lim, &root, reterr);
        if (r < 0)
                return r;
        r = rnnd__infer_check_keys(root, keys, "", reterr);
        if (r < 0)
                goto out;
        v = json_object_get(root, "signature_name");
        if (v != NULL && (!json_is_string(v) || strcmp(json_string_value(v), "serving_default"))) {
                r = rnnd__infer_path_error(reterr, RNND_EINVAL, "signature_name",
                                           "%s is not a signature of this model (serving_default)",
                                           rnnd_json_describe(v, got, sizeof(got)));
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
out:
        return rnnd__infer_parsed(r, &req, root, ret);
}

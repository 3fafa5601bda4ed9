/*
 * safetensors.c: parses and checks the JSON header of a safetensors file.
 *
 * The header is loaded with jansson, rejecting duplicate keys, and turned into
 * a struct rnnd_st_header before anyone reads a data byte.  Every entry is
 * checked on its own (keys, dtype, shape, offsets and their size), then all
 * entries together: sorted by offset, they must tile the data buffer exactly,
 * as the safetensors specification and its reference implementation require.
 * The tensors are then kept sorted by name for rnnd_st_header_find().
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "alloc.h"
#include "safetensors.h"

#define METADATA_KEY "__metadata__"

/* Room for "[d0, d1, ...]" with RNND_MAX_DIMS 20-digit dims. */
#define SHAPE_STR_MAX (RNND_MAX_DIMS * 22 + 3)

static const char *json_kind(const json_t *v)
{
        switch (json_typeof(v)) {
        case JSON_OBJECT:
                return "an object";
        case JSON_ARRAY:
                return "an array";
        case JSON_STRING:
                return "a string";
        case JSON_INTEGER:
                return "an integer";
        case JSON_REAL:
                return "a real number";
        case JSON_TRUE:
                return "true";
        case JSON_FALSE:
                return "false";
        case JSON_NULL:
                return "null";
        }
        return "an unknown JSON value";
}

/* Reads element i of the array field as a non-negative JSON integer. */
static int get_uint(const char *name, const char *field, size_t i, const json_t *v, uint64_t *ret,
                    rnnd_error_t *reterr)
{
        json_int_t n;

        if (!json_is_integer(v))
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      "tensor '%s': %s[%zu] is %s, expected a non-negative integer",
                                      name, field, i, json_kind(v));
        n = json_integer_value(v);
        if (n < 0)
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      "tensor '%s': %s[%zu] is %" JSON_INTEGER_FORMAT
                                      ", expected a non-negative integer",
                                      name, field, i, n);
        *ret = (uint64_t)n;
        return 0;
}

/* The dtype: a safetensors name with a fixed element size, into t->dtype. */
static int parse_dtype(const char *name, json_t *dtype, struct rnnd_st_tensor *t,
                       rnnd_error_t *reterr)
{
        if (!json_is_string(dtype))
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      "tensor '%s': dtype is %s, expected a string", name,
                                      json_kind(dtype));
        t->dtype = rnnd_dtype_from_st_name(json_string_value(dtype));
        if (rnnd_dtype_size(t->dtype) == 0)
                return rnnd_error_set(reterr, RNND_EMODEL, "tensor '%s': unknown dtype '%s'", name,
                                      json_string_value(dtype));
        return 0;
}

/* The shape: at most RNND_MAX_DIMS dims whose byte count fits in 64 bits, into t. */
static int parse_shape(const char *name, json_t *shape, struct rnnd_st_tensor *t,
                       rnnd_error_t *reterr)
{
        char shape_str[SHAPE_STR_MAX];
        int r;

        if (!json_is_array(shape))
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      "tensor '%s': shape is %s, expected an array", name,
                                      json_kind(shape));
        if (json_array_size(shape) > RNND_MAX_DIMS)
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      "tensor '%s': shape has %zu dims, more than %d", name,
                                      json_array_size(shape), RNND_MAX_DIMS);
        t->ndim = (unsigned)json_array_size(shape);
        for (unsigned i = 0; i < t->ndim; i++) {
                r = get_uint(name, "shape", i, json_array_get(shape, i), &t->shape[i], reterr);
                if (r < 0)
                        return r;
        }
        if (rnnd_shape_numel(t->shape, t->ndim, UINT64_MAX / rnnd_dtype_size(t->dtype), &t->numel) <
            0)
                return rnnd_error_set(
                        reterr, RNND_EMODEL, "tensor '%s': shape %s has too many elements for %s",
                        name, rnnd_shape_format(shape_str, sizeof(shape_str), t->shape, t->ndim),
                        rnnd_dtype_st_name(t->dtype));
        return 0;
}

/*
 * The offsets: [begin, end] inside the data buffer of data_len bytes, as long
 * as the tensor of t's dtype and shape, into t.
 */
static int parse_offsets(const char *name, json_t *offsets, uint64_t data_len,
                         struct rnnd_st_tensor *t, rnnd_error_t *reterr)
{
        char shape_str[SHAPE_STR_MAX];
        uint64_t nbytes = t->numel * rnnd_dtype_size(t->dtype);
        int r;

        if (!json_is_array(offsets))
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      "tensor '%s': data_offsets is %s, expected an array", name,
                                      json_kind(offsets));
        if (json_array_size(offsets) != 2)
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      "tensor '%s': data_offsets has length %zu, expected 2", name,
                                      json_array_size(offsets));
        r = get_uint(name, "data_offsets", 0, json_array_get(offsets, 0), &t->begin, reterr);
        if (r < 0)
                return r;
        r = get_uint(name, "data_offsets", 1, json_array_get(offsets, 1), &t->end, reterr);
        if (r < 0)
                return r;
        if (t->begin > t->end)
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                                      "] begin after they end",
                                      name, t->begin, t->end);
        if (t->end > data_len)
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                                      "] pass the end of the data buffer (%" PRIu64 " bytes)",
                                      name, t->begin, t->end, data_len);
        if (t->end - t->begin != nbytes)
                return rnnd_error_set(
                        reterr, RNND_EMODEL,
                        "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                        " bytes, but %s %s needs %" PRIu64,
                        name, t->begin, t->end, t->end - t->begin, rnnd_dtype_st_name(t->dtype),
                        rnnd_shape_format(shape_str, sizeof(shape_str), t->shape, t->ndim), nbytes);
        return 0;
}

/*
 * Checks the entry of tensor name against a data buffer of data_len bytes and
 * fills *ret, whose name is then a new string.  Writes nothing on failure.
 */
static int parse_tensor(const char *name, json_t *entry, uint64_t data_len,
                        struct rnnd_st_tensor *ret, rnnd_error_t *reterr)
{
        struct rnnd_st_tensor t = {0};
        json_t *dtype = NULL, *shape = NULL, *offsets = NULL, *v;
        const char *key;
        size_t len = strlen(name);
        int r;

        if (len == 0)
                return rnnd_error_set(reterr, RNND_EMODEL, "tensor name is empty");
        if (len > RNND_ST_MAX_NAME)
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      "tensor name '%.32s...' is %zu bytes long, more than %u",
                                      name, len, RNND_ST_MAX_NAME);
        if (!json_is_object(entry))
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      "tensor '%s': entry is %s, expected an object with dtype, "
                                      "shape and data_offsets",
                                      name, json_kind(entry));
        json_object_foreach(entry, key, v)
        {
                if (strcmp(key, "dtype") == 0)
                        dtype = v;
                else if (strcmp(key, "shape") == 0)
                        shape = v;
                else if (strcmp(key, "data_offsets") == 0)
                        offsets = v;
                else
                        return rnnd_error_set(reterr, RNND_EMODEL,
                                              "tensor '%s': unknown key '%s' (expected dtype, "
                                              "shape and data_offsets)",
                                              name, key);
        }
        if (dtype == NULL || shape == NULL || offsets == NULL)
                return rnnd_error_set(reterr, RNND_EMODEL, "tensor '%s': missing '%s'", name,
                                      dtype == NULL   ? "dtype"
                                      : shape == NULL ? "shape"
                                                      : "data_offsets");
        r = parse_dtype(name, dtype, &t, reterr);
        if (r == 0)
                r = parse_shape(name, shape, &t, reterr);
        if (r == 0)
                r = parse_offsets(name, offsets, data_len, &t, reterr);
        if (r < 0)
                return r;
        t.name = rnnd_strdup(name);
        if (t.name == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "tensor '%s': out of memory", name);
        *ret = t;
        return 0;
}

static int parse_metadata(json_t *meta, struct rnnd_st_header *h, rnnd_error_t *reterr)
{
        const char *key;
        json_t *v;

        if (!json_is_object(meta))
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      METADATA_KEY " is %s, expected an object", json_kind(meta));
        if (json_object_size(meta) == 0)
                return 0;
        h->meta = rnnd_calloc(json_object_size(meta), sizeof(*h->meta));
        if (h->meta == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, METADATA_KEY ": out of memory");
        json_object_foreach(meta, key, v)
        {
                struct rnnd_st_meta *m = &h->meta[h->n_meta];

                if (!json_is_string(v))
                        return rnnd_error_set(reterr, RNND_EMODEL,
                                              METADATA_KEY " '%s': value is %s, expected a string",
                                              key, json_kind(v));
                m->key = rnnd_strdup(key);
                m->value = rnnd_strdup(json_string_value(v));
                if (m->key == NULL || m->value == NULL) {
                        m->key = (rnnd_free(m->key), NULL);
                        m->value = (rnnd_free(m->value), NULL);
                        return rnnd_error_set(reterr, RNND_ENOMEM,
                                              METADATA_KEY " '%s': out of memory", key);
                }
                h->n_meta++;
        }
        return 0;
}

static int cmp_offsets(const void *a, const void *b)
{
        const struct rnnd_st_tensor *x = a, *y = b;

        if (x->begin != y->begin)
                return x->begin < y->begin ? -1 : 1;
        if (x->end != y->end)
                return x->end < y->end ? -1 : 1;
        return strcmp(x->name, y->name);
}

static int cmp_names(const void *a, const void *b)
{
        const struct rnnd_st_tensor *x = a, *y = b;

        return strcmp(x->name, y->name);
}

static int cmp_meta(const void *a, const void *b)
{
        const struct rnnd_st_meta *x = a, *y = b;

        return strcmp(x->key, y->key);
}

/*
 * Checks that the tensors, sorted by offset, tile [0, data_len) exactly: each
 * begins where the one before it ends.  A zero-size tensor may sit at any
 * boundary, but not inside another tensor.
 */
static int check_coverage(const struct rnnd_st_header *h, uint64_t data_len, rnnd_error_t *reterr)
{
        const struct rnnd_st_tensor *last = NULL;
        uint64_t pos = 0;

        for (size_t i = 0; i < h->n_tensors; i++) {
                const struct rnnd_st_tensor *t = &h->tensors[i];

                if (t->begin < pos)
                        return rnnd_error_set(reterr, RNND_EMODEL,
                                              "tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64
                                              "] overlap tensor '%s' [%" PRIu64 ", %" PRIu64 "]",
                                              t->name, t->begin, t->end, last->name, last->begin,
                                              last->end);
                if (t->begin > pos) {
                        if (last == NULL)
                                return rnnd_error_set(reterr, RNND_EMODEL,
                                                      "data bytes [0, %" PRIu64
                                                      ") before tensor '%s' are not used by any "
                                                      "tensor",
                                                      t->begin, t->name);
                        return rnnd_error_set(reterr, RNND_EMODEL,
                                              "data bytes [%" PRIu64 ", %" PRIu64
                                              ") between tensor '%s' and tensor '%s' are not used "
                                              "by any tensor",
                                              pos, t->begin, last->name, t->name);
                }
                pos = t->end;
                last = t;
        }
        if (pos != data_len) {
                if (last == NULL)
                        return rnnd_error_set(reterr, RNND_EMODEL,
                                              "data bytes [0, %" PRIu64
                                              ") are not used by any tensor (the header has none)",
                                              data_len);
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      "data bytes [%" PRIu64 ", %" PRIu64
                                      ") after tensor '%s' are not used by any tensor",
                                      pos, data_len, last->name);
        }
        return 0;
}

int rnnd_st_header_parse(const char *buf, size_t len, uint64_t data_len, struct rnnd_st_header *ret,
                         rnnd_error_t *reterr)
{
        struct rnnd_st_header h = {0};
        json_t *root, *meta, *v;
        json_error_t jerr;
        const char *key;
        size_t n;
        int r;

        root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
        if (root == NULL)
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      "header is not valid JSON: %s (line %d, column %d)",
                                      jerr.text, jerr.line, jerr.column);
        if (!json_is_object(root)) {
                r = rnnd_error_set(reterr, RNND_EMODEL, "header is %s, expected a JSON object",
                                   json_kind(root));
                goto out;
        }

        meta = json_object_get(root, METADATA_KEY);
        if (meta != NULL) {
                r = parse_metadata(meta, &h, reterr);
                if (r < 0)
                        goto out;
        }

        n = json_object_size(root) - (meta != NULL);
        if (n > RNND_ST_MAX_TENSORS) {
                r = rnnd_error_set(reterr, RNND_EMODEL, "header has %zu tensors, more than %u", n,
                                   RNND_ST_MAX_TENSORS);
                goto out;
        }
        if (n > 0) {
                h.tensors = rnnd_calloc(n, sizeof(*h.tensors));
                if (h.tensors == NULL) {
                        r = rnnd_error_set(reterr, RNND_ENOMEM,
                                           "out of memory for %zu tensor entries", n);
                        goto out;
                }
        }
        json_object_foreach(root, key, v)
        {
                if (v == meta)
                        continue;
                r = parse_tensor(key, v, data_len, &h.tensors[h.n_tensors], reterr);
                if (r < 0)
                        goto out;
                h.n_tensors++;
        }

        if (h.n_tensors > 0)
                qsort(h.tensors, h.n_tensors, sizeof(*h.tensors), cmp_offsets);
        r = check_coverage(&h, data_len, reterr);
        if (r < 0)
                goto out;
        if (h.n_tensors > 0)
                qsort(h.tensors, h.n_tensors, sizeof(*h.tensors), cmp_names);
        if (h.n_meta > 0)
                qsort(h.meta, h.n_meta, sizeof(*h.meta), cmp_meta);

        *ret = h;
        h = (struct rnnd_st_header){0};
        r = 0;
out:
        rnnd_st_header_done(&h);
        json_decref(root);
        return r;
}

void rnnd_st_header_done(struct rnnd_st_header *h)
{
        for (size_t i = 0; i < h->n_tensors; i++)
                rnnd_free(h->tensors[i].name);
        rnnd_free(h->tensors);
        for (size_t i = 0; i < h->n_meta; i++) {
                rnnd_free(h->meta[i].key);
                rnnd_free(h->meta[i].value);
        }
        rnnd_free(h->meta);
        *h = (struct rnnd_st_header){0};
}

const struct rnnd_st_tensor *rnnd_st_header_find(const struct rnnd_st_header *h, const char *name)
{
        struct rnnd_st_tensor key = {.name = (char *)name};

        if (h->n_tensors == 0)
                return NULL;
        return bsearch(&key, h->tensors, h->n_tensors, sizeof(*h->tensors), cmp_names);
}

const char *rnnd_st_header_meta(const struct rnnd_st_header *h, const char *key)
{
        struct rnnd_st_meta k = {.key = (char *)key};
        const struct rnnd_st_meta *m;

        if (h->n_meta == 0)
                return NULL;
        m = bsearch(&k, h->meta, h->n_meta, sizeof(*h->meta), cmp_meta);
        return m != NULL ? m->value : NULL;
}

/*
 * pbjson.c: JSON to a protobuf message by its descriptor (pbjson.h), with
 * jansson and protobuf-c's descriptors.  Every allocation is the arena's.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pbjson.h"

/* Nesting the bodies never reach; deeper is refused rather than recursed into. */
#define MAX_DEPTH 32

struct conv {
        struct rnnd_pbarena *a;
        rnnd_error_t *err;
};

static int build(struct conv *cv, const ProtobufCMessageDescriptor *d, const json_t *obj,
                 unsigned depth, ProtobufCMessage **ret);

static int oom(struct conv *cv)
{
        return rnnd_error_set(cv->err, RNND_ENOMEM, "out of memory building a message");
}

static int bad(struct conv *cv, const ProtobufCFieldDescriptor *f, const char *what)
{
        return rnnd_error_set(cv->err, RNND_EINVAL, "field %s: %s", f->name, what);
}

/* An integer from a JSON integer, an integral real, or a decimal string; false if none. */
static bool json_int(const json_t *v, bool is_signed, int64_t *si, uint64_t *ui)
{
        const char *s;
        char *end;

        if (json_is_integer(v)) {
                *si = json_integer_value(v);
                *ui = (uint64_t)*si;
                return is_signed || *si >= 0;
        }
        if (json_is_real(v)) {
                double x = json_real_value(v);

                if (x != floor(x))
                        return false;
                if (is_signed && x >= -9.2e18 && x <= 9.2e18)
                        *si = (int64_t)x;
                else if (!is_signed && x >= 0 && x <= 1.8e19)
                        *ui = (uint64_t)x;
                else
                        return false;
                return true;
        }
        if (!json_is_string(v) || (s = json_string_value(v))[0] == '\0' ||
            (!is_signed && s[0] == '-'))
                return false;
        errno = 0;
        if (is_signed)
                *si = strtoll(s, &end, 10);
        else
                *ui = strtoull(s, &end, 10);
        return errno == 0 && *end == '\0';
}

/* An integer field's value into dst. */
static int set_int(struct conv *cv, const ProtobufCFieldDescriptor *f, void *dst, const json_t *v)
{
        int64_t si = 0;
        uint64_t ui = 0;

        switch (f->type) {
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SFIXED32:
                if (!json_int(v, true, &si, &ui) || si < INT32_MIN || si > INT32_MAX)
                        return bad(cv, f, "not a 32-bit integer");
                *(int32_t *)dst = (int32_t)si;
                return 0;
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_FIXED32:
                if (!json_int(v, false, &si, &ui) || ui > UINT32_MAX)
                        return bad(cv, f, "not an unsigned 32-bit integer");
                *(uint32_t *)dst = (uint32_t)ui;
                return 0;
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
                if (!json_int(v, true, &si, &ui))
                        return bad(cv, f, "not a 64-bit integer");
                *(int64_t *)dst = si;
                return 0;
        default: /* UINT64, FIXED64 */
                if (!json_int(v, false, &si, &ui))
                        return bad(cv, f, "not an unsigned 64-bit integer");
                *(uint64_t *)dst = ui;
                return 0;
        }
}

/* One value of field f (an element, for a repeated field) into dst. */
static int set_value(struct conv *cv, const ProtobufCFieldDescriptor *f, void *dst, const json_t *v,
                     unsigned depth)
{
        const ProtobufCEnumValue *ev;

        switch (f->type) {
        case PROTOBUF_C_TYPE_BOOL:
                if (!json_is_boolean(v))
                        return bad(cv, f, "not a boolean");
                *(protobuf_c_boolean *)dst = json_is_true(v);
                return 0;
        case PROTOBUF_C_TYPE_FLOAT:
        case PROTOBUF_C_TYPE_DOUBLE:
                if (!json_is_number(v))
                        return bad(cv, f, "not a number");
                if (f->type == PROTOBUF_C_TYPE_FLOAT)
                        *(float *)dst = (float)json_number_value(v);
                else
                        *(double *)dst = json_number_value(v);
                return 0;
        case PROTOBUF_C_TYPE_ENUM:
                if (json_is_integer(v)) {
                        *(int *)dst = (int)json_integer_value(v);
                        return 0;
                }
                ev = json_is_string(v) ? protobuf_c_enum_descriptor_get_value_by_name(
                                                 f->descriptor, json_string_value(v))
                                       : NULL;
                if (ev == NULL)
                        return bad(cv, f, "not a value of its enum");
                *(int *)dst = ev->value;
                return 0;
        case PROTOBUF_C_TYPE_STRING:
                if (!json_is_string(v))
                        return bad(cv, f, "not a string");
                *(char **)dst =
                        rnnd_pbarena_strndup(cv->a, json_string_value(v), json_string_length(v));
                return *(char **)dst != NULL ? 0 : oom(cv);
        case PROTOBUF_C_TYPE_MESSAGE:
                if (!json_is_object(v))
                        return bad(cv, f, "not an object");
                return build(cv, f->descriptor, v, depth + 1, dst);
        case PROTOBUF_C_TYPE_BYTES:
                return bad(cv, f, "bytes are not read from JSON");
        default:
                return set_int(cv, f, dst, v);
        }
}

/* The size of one element of a repeated field of f's type. */
static size_t elt_size(const ProtobufCFieldDescriptor *f)
{
        switch (f->type) {
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
                return 8;
        case PROTOBUF_C_TYPE_DOUBLE:
                return sizeof(double);
        case PROTOBUF_C_TYPE_BOOL:
                return sizeof(protobuf_c_boolean);
        case PROTOBUF_C_TYPE_ENUM:
                return sizeof(int);
        case PROTOBUF_C_TYPE_STRING:
        case PROTOBUF_C_TYPE_MESSAGE:
                return sizeof(void *);
        case PROTOBUF_C_TYPE_BYTES:
                return sizeof(ProtobufCBinaryData);
        default:
                return 4;
        }
}

/* Whether f is a map: a repeated message of two fields, key (1) and value (2). */
static bool is_map(const ProtobufCFieldDescriptor *f)
{
        const ProtobufCMessageDescriptor *d = f->descriptor;

        return f->type == PROTOBUF_C_TYPE_MESSAGE && d->n_fields == 2 &&
               strcmp(d->fields[0].name, "key") == 0 && d->fields[0].id == 1 &&
               strcmp(d->fields[1].name, "value") == 0 && d->fields[1].id == 2;
}

/* One map entry: key (a JSON object's key, read as the key field's type) and value. */
static int map_entry(struct conv *cv, const ProtobufCFieldDescriptor *f, const char *key,
                     const json_t *v, unsigned depth, ProtobufCMessage **ret)
{
        const ProtobufCMessageDescriptor *d = f->descriptor;
        const ProtobufCFieldDescriptor *kf = &d->fields[0], *vf = &d->fields[1];
        ProtobufCMessage *e = rnnd_pbarena_alloc(cv->a, d->sizeof_message);
        json_t *k;
        int r;

        if (e == NULL)
                return oom(cv);
        d->message_init(e);
        k = json_string(key);
        if (k == NULL)
                return oom(cv);
        r = set_value(cv, kf, (char *)e + kf->offset, k, depth);
        json_decref(k);
        if (r == 0)
                r = set_value(cv, vf, (char *)e + vf->offset, v, depth);
        if (r == 0)
                *ret = e;
        return r;
}

/* A repeated field from an array, or a map from an object. */
static int set_repeated(struct conv *cv, const ProtobufCFieldDescriptor *f, ProtobufCMessage *m,
                        const json_t *v, unsigned depth)
{
        bool map = is_map(f) && json_is_object(v);
        size_t n = map ? json_object_size(v) : json_array_size(v), i = 0, es = elt_size(f);
        unsigned char *arr;
        const char *key;
        json_t *val;
        int r = 0;

        if (!map && !json_is_array(v))
                return bad(cv, f, is_map(f) ? "not an object" : "not an array");
        arr = rnnd_pbarena_alloc(cv->a, n * es);
        if (arr == NULL && n > 0)
                return oom(cv);
        if (map) {
                json_object_foreach((json_t *)v, key, val)
                {
                        r = map_entry(cv, f, key, val, depth,
                                      (ProtobufCMessage **)(arr + i++ * es));
                        if (r < 0)
                                return r;
                }
        } else {
                json_array_foreach(v, i, val)
                {
                        r = set_value(cv, f, arr + i * es, val, depth);
                        if (r < 0)
                                return r;
                }
        }
        *(size_t *)((char *)m + f->quantifier_offset) = n;
        *(void **)((char *)m + f->offset) = arr;
        return 0;
}

static int build(struct conv *cv, const ProtobufCMessageDescriptor *d, const json_t *obj,
                 unsigned depth, ProtobufCMessage **ret)
{
        ProtobufCMessage *m;
        const char *key;
        json_t *v;
        int r;

        if (depth > MAX_DEPTH)
                return rnnd_error_set(cv->err, RNND_EINVAL, "%s: nested too deep", d->name);
        m = rnnd_pbarena_alloc(cv->a, d->sizeof_message);
        if (m == NULL)
                return oom(cv);
        d->message_init(m);
        json_object_foreach((json_t *)obj, key, v)
        {
                const ProtobufCFieldDescriptor *f =
                        protobuf_c_message_descriptor_get_field_by_name(d, key);

                if (f == NULL || json_is_null(v))
                        continue;
                if (f->label == PROTOBUF_C_LABEL_REPEATED)
                        r = set_repeated(cv, f, m, v, depth);
                else
                        r = set_value(cv, f, (char *)m + f->offset, v, depth);
                if (r < 0)
                        return r;
                if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
                        *(uint32_t *)((char *)m + f->quantifier_offset) = f->id;
                else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset != 0)
                        *(protobuf_c_boolean *)((char *)m + f->quantifier_offset) = 1;
        }
        *ret = m;
        return 0;
}

int rnnd_pbjson_message(struct rnnd_pbarena *a, const ProtobufCMessageDescriptor *d,
                        const char *json, size_t len, const char *const *path,
                        ProtobufCMessage **ret, rnnd_error_t *reterr)
{
        struct conv cv = {a, reterr};
        json_error_t je;
        json_t *root = json_loadb(json, len, 0, &je), *v = root;
        int r;

        if (root == NULL)
                return rnnd_error_set(reterr, RNND_EINVAL, "%s: not JSON: %s", d->name, je.text);
        for (; path != NULL && *path != NULL && v != NULL; path++)
                v = json_object_get(v, *path);
        if (!json_is_object(v))
                r = rnnd_error_set(reterr, RNND_EINVAL, "%s: no object at its place in the JSON",
                                   d->name);
        else
                r = build(&cv, d, v, 0, ret);
        json_decref(root);
        return r;
}

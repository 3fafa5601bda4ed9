/*
 * shmreq.c: the system shared memory register request (shmreq.h).
 */
#include <jansson.h>
#include <stdbool.h>
#include <string.h>

#include "json.h"
#include "shmreq.h"

int rnnd_shmreq_check(const char *name, size_t name_max, const struct rnnd_shmreq *q,
                      rnnd_error_t *reterr)
{
        size_t n = strlen(q->key);

        if (name[0] == '\0' || strlen(name) >= name_max)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "the region's name must be 1 to %zu bytes", name_max - 1);
        if (n < 2 || n >= RNND_SHMREQ_KEY_MAX || q->key[0] != '/' ||
            strchr(q->key + 1, '/') != NULL || strcmp(q->key, "/.") == 0 ||
            strcmp(q->key, "/..") == 0)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "key: '%.64s' is not a shared memory object's name: \"/\" "
                                      "and 1 to 255 bytes without another \"/\", as shm_open(3) "
                                      "takes it",
                                      q->key);
        if (q->byte_size == 0)
                return rnnd_error_set(reterr, RNND_EINVAL, "byte_size: must be at least 1");
        if (q->offset > UINT64_MAX - q->byte_size)
                return rnnd_error_set(reterr, RNND_EINVAL, "offset + byte_size: past 2^64 bytes");
        return 0;
}

/* A non-negative integer at key into *dst. */
static int get_uint(json_t *v, const char *key, uint64_t *dst, rnnd_error_t *reterr)
{
        char d[64];

        if (!json_is_integer(v) || json_integer_value(v) < 0)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "%s: must be an integer of at least 0, not %s", key,
                                      rnnd_json_describe(v, d, sizeof(d)));
        *dst = (uint64_t)json_integer_value(v);
        return 0;
}

static int parse_root(json_t *root, struct rnnd_shmreq *out, rnnd_error_t *reterr)
{
        bool has_key = false, has_size = false;
        const char *key;
        json_t *v;
        char d[64];
        int r = 0;

        if (!json_is_object(root))
                return rnnd_error_set(reterr, RNND_EINVAL, "the body must be an object, not %s",
                                      rnnd_json_describe(root, d, sizeof(d)));
        json_object_foreach(root, key, v)
        {
                if (strcmp(key, "key") == 0) {
                        if (!json_is_string(v) || json_string_length(v) >= sizeof(out->key) ||
                            strlen(json_string_value(v)) != json_string_length(v))
                                return rnnd_error_set(reterr, RNND_EINVAL,
                                                      "key: must be a string of at most %u "
                                                      "bytes, not %s",
                                                      RNND_SHMREQ_KEY_MAX - 1,
                                                      rnnd_json_describe(v, d, sizeof(d)));
                        memcpy(out->key, json_string_value(v), json_string_length(v) + 1);
                        has_key = true;
                } else if (strcmp(key, "offset") == 0) {
                        r = get_uint(v, key, &out->offset, reterr);
                } else if (strcmp(key, "byte_size") == 0) {
                        r = get_uint(v, key, &out->byte_size, reterr);
                        has_size = true;
                } else {
                        r = rnnd_error_set(reterr, RNND_EINVAL,
                                           "unknown key '%.64s' (a register request has key, "
                                           "offset and byte_size)",
                                           key);
                }
                if (r < 0)
                        return r;
        }
        if (!has_key || !has_size)
                return rnnd_error_set(reterr, RNND_EINVAL, "%s: missing",
                                      !has_key ? "key" : "byte_size");
        return 0;
}

int rnnd_shmreq_parse(const char *body, size_t len, struct rnnd_shmreq *ret, rnnd_error_t *reterr)
{
        struct rnnd_shmreq out = {{0}, 0, 0};
        json_error_t jerr;
        json_t *root;
        int r;

        if (len > RNND_SHMREQ_MAX_BODY)
                return rnnd_error_set(reterr, RNND_ETOOBIG,
                                      "a register request's body is at most %u bytes",
                                      RNND_SHMREQ_MAX_BODY);
        root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        if (root == NULL)
                return rnnd_error_set(reterr, RNND_EINVAL, "the body is not JSON: %s (column %d)",
                                      jerr.text, jerr.column);
        r = parse_root(root, &out, reterr);
        json_decref(root);
        if (r == 0)
                *ret = out;
        return r;
}

/*
 * reporeq.c: parses the repository extension's request bodies (reporeq.h).
 */
#include <jansson.h>
#include <string.h>

#include "json.h"
#include "reporeq.h"

int rnnd_reporeq_check_param(enum rnnd_reporeq_call call, const char *key, bool is_bool,
                             const char *got, rnnd_error_t *reterr)
{
        if (call == RNND_REPOREQ_UNLOAD && strcmp(key, "unload_dependents") == 0) {
                if (!is_bool)
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "parameters.unload_dependents: must be a "
                                              "boolean, not %s",
                                              got);
                return 0; /* rnnd models have no dependents */
        }
        if (call == RNND_REPOREQ_LOAD &&
            (strcmp(key, "config") == 0 || strncmp(key, "file:", 5) == 0))
                return rnnd_error_set(reterr, RNND_EUNSUPPORTED,
                                      "parameters.%.64s: not supported; rnnd loads the "
                                      "model's directory in the repository as it is",
                                      key);
        return rnnd_error_set(reterr, RNND_EINVAL, "parameters: unknown key '%.64s'", key);
}

/* Checks parameters (an object) of load or unload. */
static int check_parameters(enum rnnd_reporeq_call call, json_t *params, rnnd_error_t *reterr)
{
        const char *key;
        json_t *v;
        char d[64];
        int r;

        if (!json_is_object(params))
                return rnnd_error_set(reterr, RNND_EINVAL, "parameters: must be an object, not %s",
                                      rnnd_json_describe(params, d, sizeof(d)));
        json_object_foreach(params, key, v)
        {
                r = rnnd_reporeq_check_param(call, key, json_is_boolean(v),
                                             rnnd_json_describe(v, d, sizeof(d)), reterr);
                if (r < 0)
                        return r;
        }
        return 0;
}

int rnnd_reporeq_parse(enum rnnd_reporeq_call call, const char *body, size_t len,
                       struct rnnd_reporeq *ret, rnnd_error_t *reterr)
{
        struct rnnd_reporeq out = {.ready = false};
        json_error_t jerr;
        const char *key;
        json_t *root, *v;
        char d[64];
        int r = 0;

        if (len > RNND_REPOREQ_MAX_BODY)
                return rnnd_error_set(reterr, RNND_ETOOBIG,
                                      "a repository request's body is at most %u bytes",
                                      RNND_REPOREQ_MAX_BODY);
        if (len == 0) {
                *ret = out;
                return 0;
        }
        root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        if (root == NULL)
                return rnnd_error_set(reterr, RNND_EINVAL, "the body is not JSON: %s (column %d)",
                                      jerr.text, jerr.column);
        if (!json_is_object(root)) {
                r = rnnd_error_set(reterr, RNND_EINVAL, "the body must be an object, not %s",
                                   rnnd_json_describe(root, d, sizeof(d)));
                goto out;
        }
        json_object_foreach(root, key, v)
        {
                if (call == RNND_REPOREQ_INDEX && strcmp(key, "ready") == 0) {
                        if (!json_is_boolean(v)) {
                                r = rnnd_error_set(reterr, RNND_EINVAL,
                                                   "ready: must be a boolean, not %s",
                                                   rnnd_json_describe(v, d, sizeof(d)));
                                goto out;
                        }
                        out.ready = json_is_true(v);
                } else if (call != RNND_REPOREQ_INDEX && strcmp(key, "parameters") == 0) {
                        r = check_parameters(call, v, reterr);
                        if (r < 0)
                                goto out;
                } else {
                        r = rnnd_error_set(reterr, RNND_EINVAL, "unknown key '%.64s'", key);
                        goto out;
                }
        }
        *ret = out;
out:
        json_decref(root);
        return r;
}

/*
 * loadspec.c: the load client's spec (flags, JSON file, --help from one
 * table), its lengths files and the model metadata it reads.
 *
 * Each key of the table has a type that says how its text is read and where
 * it goes in struct rnnd_loadspec (like modelcfg.c's field tables).  A JSON
 * spec is turned into the same texts the command line would give, so the
 * two are read by one function and cannot drift apart.
 */
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "json.h"
#include "loadspec.h"

enum ktype {
        K_STR,     /* string of fewer than size bytes */
        K_ENUM,    /* one of names, stored as int */
        K_U32,     /* integer in lo..hi */
        K_U64,     /* integer in lo..hi */
        K_SECONDS, /* seconds (a number, or with an ms, s or m suffix) in lo..hi */
        K_DOUBLE,  /* number in lo..hi */
        K_BOOL,    /* true or false */
        K_CUSTOM,  /* handed to set */
};

struct key {
        struct rnnd_loadspec_key pub;
        enum ktype type;
        size_t off;  /* into struct rnnd_loadspec */
        size_t size; /* K_STR: buffer bytes */
        double lo, hi;
        const char *const *names; /* K_ENUM, NULL-terminated */
        int (*set)(struct rnnd_loadspec *s, const char *v, rnnd_error_t *err); /* K_CUSTOM */
};

static_assert(sizeof(rnnd_load_api_t) == sizeof(int), "enum size");
static_assert(sizeof(rnnd_load_mode_t) == sizeof(int), "enum size");
static_assert(sizeof(rnnd_load_arrival_t) == sizeof(int), "enum size");
static_assert(sizeof(rnnd_load_format_t) == sizeof(int), "enum size");

static const char *const api_names[] = {"v2", "predict", "get", NULL};
static const char *const format_names[] = {"json", "binary", NULL};
static const char *const mode_names[] = {"closed", "open", NULL};
static const char *const arrival_names[] = {"fixed", "poisson", NULL};

static int set_length(struct rnnd_loadspec *s, const char *v, rnnd_error_t *err);
static int set_input(struct rnnd_loadspec *s, const char *v, rnnd_error_t *err);
static int set_outputs(struct rnnd_loadspec *s, const char *v, rnnd_error_t *err);

#define OFF(m) offsetof(struct rnnd_loadspec, m)

static const struct key keys[] = {
        {{"url", "URL", "Server base URL."},
         K_STR,
         OFF(url),
         sizeof(((struct rnnd_loadspec *)0)->url),
         0,
         0,
         NULL,
         NULL},
        {{"api", "v2|predict|get",
          "v2: POST /v2/models/{m}[/versions/{v}]/infer (KServe v2). predict: POST "
          "/v1/models/{m}[/versions/{v}]:predict with one instance per sequence (TF Serving). "
          "get: GET --path, for health checks and comparisons with wrk."},
         K_ENUM,
         OFF(api),
         0,
         0,
         0,
         api_names,
         NULL},
        {{"model", "NAME", "Model to send to (v2 and predict)."},
         K_STR,
         OFF(model),
         RNND_LOAD_STR_MAX,
         0,
         0,
         NULL,
         NULL},
        {{"model-version", "N", "Model version; empty for the server's latest."},
         K_STR,
         OFF(version),
         sizeof(((struct rnnd_loadspec *)0)->version),
         0,
         0,
         NULL,
         NULL},
        {{"path", "PATH", "Path for --api=get, e.g. /v2/health/ready."},
         K_STR,
         OFF(path),
         RNND_LOAD_STR_MAX,
         0,
         0,
         NULL,
         NULL},
        {{"format", "json|binary",
          "Tensors as JSON \"data\" lists, or as raw bytes after the JSON header (KServe "
          "binary tensor extension, Inference-Header-Content-Length; v2 only)."},
         K_ENUM,
         OFF(format),
         0,
         0,
         0,
         format_names,
         NULL},
        {{"mode", "closed|open",
          "closed: --concurrency requests in flight, each sent when one returns; latency "
          "from its send. open: sent on a schedule of --rate per second whatever the "
          "server does, at most --concurrency in flight (later ones wait their turn); "
          "latency from the scheduled send time, so stalls are not hidden (no coordinated "
          "omission)."},
         K_ENUM,
         OFF(mode),
         0,
         0,
         0,
         mode_names,
         NULL},
        {{"concurrency", "N",
          "Requests in flight (closed), or at most (open); one connection each."},
         K_U32,
         OFF(concurrency),
         0,
         1,
         RNND_LOAD_MAX_INFLIGHT,
         NULL,
         NULL},
        {{"rate", "PER_SECOND", "Open loop: requests per second."},
         K_DOUBLE,
         OFF(rate),
         0,
         0.001,
         1e7,
         NULL,
         NULL},
        {{"arrival", "fixed|poisson",
          "Open loop: fixed gaps of 1/rate, or Poisson arrivals (exponential gaps)."},
         K_ENUM,
         OFF(arrival),
         0,
         0,
         0,
         arrival_names,
         NULL},
        {{"warmup", "SECONDS", "Send for this long first and forget the results."},
         K_SECONDS,
         OFF(warmup_s),
         0,
         0,
         86400,
         NULL,
         NULL},
        {{"duration", "SECONDS", "Measure for this long (unless --requests); 10s, 500ms or 2m."},
         K_SECONDS,
         OFF(duration_s),
         0,
         0.001,
         7 * 86400,
         NULL,
         NULL},
        {{"requests", "N", "Measure this many requests instead of a duration (0: use --duration)."},
         K_U64,
         OFF(requests),
         0,
         0,
         1e12,
         NULL,
         NULL},
        {{"sequences", "N", "Sequences per request (the batch dimension B)."},
         K_U32,
         OFF(sequences),
         0,
         1,
         RNND_LOAD_MAX_SEQS,
         NULL,
         NULL},
        {{"streams", "N",
          "Streaming (stateful sequences, as KServe v2 and Triton clients send them): keep N "
          "sequences live, each sent in chunks of --chunk-length steps with sequence_id, "
          "sequence_start and sequence_end, the next chunk when the last is answered; a "
          "sequence's length is "
          "drawn as --length says, and a new one starts when one ends. Closed loop with N "
          "in flight; the model needs a sequence block. 0: off."},
         K_U32,
         OFF(streams),
         0,
         0,
         RNND_LOAD_MAX_STREAMS,
         NULL,
         NULL},
        {{"chunk-length", "L", "Steps per chunk with --streams (the last chunk may be shorter)."},
         K_U32,
         OFF(chunk_length),
         0,
         1,
         RNND_LOAD_MAX_LENGTH,
         NULL,
         NULL},
        {{"length", "L|MIN..MAX|@FILE",
          "Sequence lengths: fixed, uniform in MIN..MAX, or drawn uniformly from the "
          "lengths in FILE (whitespace- or comma-separated, # comments). T of a request "
          "is its longest sequence; the others are sent with a lengths tensor."},
         K_CUSTOM,
         0,
         0,
         0,
         0,
         NULL,
         set_length},
        {{"seed", "N",
          "Seed of the inputs, lengths and Poisson arrivals: the same seed sends the same "
          "requests."},
         K_U64,
         OFF(seed),
         0,
         0,
         1.8e19,
         NULL,
         NULL},
        {{"max-token", "N", "Token ids of an embedding model are drawn from 0..N."},
         K_U64,
         OFF(max_token),
         0,
         0,
         1 << 24,
         NULL,
         NULL},
        {{"input", "NAME:DATATYPE:SHAPE",
          "The input tensor, e.g. input:FP32:-1,-1,8 or tokens:INT64:-1,-1; without it "
          "the client reads it from GET /v2/models/{m}."},
         K_CUSTOM,
         0,
         0,
         0,
         0,
         NULL,
         set_input},
        {{"outputs", "NAME[,NAME...]",
          "Outputs to ask for (v2); default scores when the model has a head, else h_n."},
         K_CUSTOM,
         0,
         0,
         0,
         0,
         NULL,
         set_outputs},
        {{"max-error-rate", "FRACTION",
          "Exit 1 when errors / requests is above this (0: any error)."},
         K_DOUBLE,
         OFF(max_error_rate),
         0,
         0,
         1,
         NULL,
         NULL},
        {{"timeout", "SECONDS", "Give up on a request after this long (counted as an error)."},
         K_SECONDS,
         OFF(timeout_s),
         0,
         0.001,
         3600,
         NULL,
         NULL},
        {{"json", NULL, "Print the report as one JSON object on stdout."},
         K_BOOL,
         OFF(json),
         0,
         0,
         0,
         NULL,
         NULL},
        {{"progress", NULL,
          "Show a live progress line when stderr is a terminal (--progress=false: never)."},
         K_BOOL,
         OFF(progress),
         0,
         0,
         0,
         NULL,
         NULL},
};

void rnnd_loadspec_init(struct rnnd_loadspec *s)
{
        memset(s, 0, sizeof(*s));
        snprintf(s->url, sizeof(s->url), "http://127.0.0.1:8000");
        s->api = RNND_API_V2;
        s->format = RNND_TENSORS_JSON;
        s->mode = RNND_LOAD_CLOSED;
        s->concurrency = 16;
        s->arrival = RNND_ARRIVAL_FIXED;
        s->duration_s = 10;
        s->sequences = 1;
        s->chunk_length = 8;
        s->len_dist = RNND_LEN_FIXED;
        s->len_min = s->len_max = 8;
        s->seed = 1;
        s->timeout_s = 30;
        s->progress = true;
}

size_t rnnd_loadspec_n_keys(void)
{
        return RNND_ELEMENTSOF(keys);
}

const struct rnnd_loadspec_key *rnnd_loadspec_key(size_t i)
{
        return i < RNND_ELEMENTSOF(keys) ? &keys[i].pub : NULL;
}

void rnnd_loadspec_format(const struct rnnd_loadspec *s, size_t i, char *buf, size_t n)
{
        const struct key *k = i < RNND_ELEMENTSOF(keys) ? &keys[i] : NULL;
        const void *src = k != NULL ? (const char *)s + k->off : NULL;

        buf[0] = '\0';
        if (k == NULL)
                return;
        switch (k->type) {
        case K_STR:
                snprintf(buf, n, "%s", (const char *)src);
                break;
        case K_ENUM:
                snprintf(buf, n, "%s", k->names[*(const int *)src]);
                break;
        case K_U32:
                snprintf(buf, n, "%" PRIu32, *(const uint32_t *)src);
                break;
        case K_U64:
                snprintf(buf, n, "%" PRIu64, *(const uint64_t *)src);
                break;
        case K_SECONDS:
        case K_DOUBLE:
                if (*(const double *)src >= k->lo) /* below: unset (--rate) */
                        snprintf(buf, n, "%g%s", *(const double *)src,
                                 k->type == K_SECONDS ? "s" : "");
                break;
        case K_BOOL:
                snprintf(buf, n, "%s", *(const bool *)src ? "true" : "false");
                break;
        case K_CUSTOM:
                if (k->set == set_length && s->len_dist == RNND_LEN_FILE)
                        snprintf(buf, n, "@%s", s->len_file);
                else if (k->set == set_length && s->len_min == s->len_max)
                        snprintf(buf, n, "%" PRIu32, s->len_min);
                else if (k->set == set_length)
                        snprintf(buf, n, "%" PRIu32 "..%" PRIu32, s->len_min, s->len_max);
                break;
        }
}

/* The key named name, with '-' and '_' the same; NULL when there is none. */
static const struct key *find_key(const char *name)
{
        for (size_t i = 0; i < RNND_ELEMENTSOF(keys); i++) {
                const char *a = keys[i].pub.name, *b = name;

                while (*a != '\0' && (*a == *b || (*a == '-' && *b == '_'))) {
                        a++;
                        b++;
                }
                if (*a == '\0' && *b == '\0')
                        return &keys[i];
        }
        return NULL;
}

bool rnnd_loadspec_is_bool(const char *key)
{
        const struct key *k = find_key(key);

        return k != NULL && k->type == K_BOOL;
}

/* A whole decimal unsigned integer in lo..hi. */
static int read_uint(const char *v, uint64_t lo, uint64_t hi, uint64_t *ret)
{
        char *end;
        unsigned long long x;

        if (!isdigit((unsigned char)v[0]))
                return RNND_EINVAL;
        errno = 0;
        x = strtoull(v, &end, 10);
        if (errno != 0 || *end != '\0' || x < lo || x > hi)
                return RNND_EINVAL;
        *ret = x;
        return 0;
}

/* A finite number, times the scale of an optional ms/s/m suffix when seconds. */
static int read_number(const char *v, bool seconds, double *ret)
{
        char *end;
        double x, scale = 1;

        errno = 0;
        x = strtod(v, &end);
        if (end == v || errno != 0 || !isfinite(x))
                return RNND_EINVAL;
        if (seconds && strcmp(end, "ms") == 0)
                scale = 1e-3;
        else if (seconds && strcmp(end, "m") == 0)
                scale = 60;
        else if (!(seconds && strcmp(end, "s") == 0) && *end != '\0')
                return RNND_EINVAL;
        *ret = x * scale;
        return 0;
}

static int set_length(struct rnnd_loadspec *s, const char *v, rnnd_error_t *err)
{
        const char *dots = strstr(v, "..");
        uint64_t a, b;
        char lo[24];

        if (v[0] == '@') {
                if (v[1] == '\0' || strlen(v + 1) >= sizeof(s->len_file))
                        return rnnd_error_set(err, RNND_EINVAL, "a file name after @");
                snprintf(s->len_file, sizeof(s->len_file), "%s", v + 1);
                s->len_dist = RNND_LEN_FILE;
                return 0;
        }
        if (dots == NULL) {
                if (read_uint(v, 1, RNND_LOAD_MAX_LENGTH, &a) < 0)
                        goto bad;
                s->len_dist = RNND_LEN_FIXED;
                s->len_min = s->len_max = (uint32_t)a;
                return 0;
        }
        if ((size_t)(dots - v) >= sizeof(lo))
                goto bad;
        memcpy(lo, v, (size_t)(dots - v));
        lo[dots - v] = '\0';
        if (read_uint(lo, 1, RNND_LOAD_MAX_LENGTH, &a) < 0 ||
            read_uint(dots + 2, a, RNND_LOAD_MAX_LENGTH, &b) < 0)
                goto bad;
        s->len_dist = a == b ? RNND_LEN_FIXED : RNND_LEN_UNIFORM;
        s->len_min = (uint32_t)a;
        s->len_max = (uint32_t)b;
        return 0;
bad:
        return rnnd_error_set(err, RNND_EINVAL,
                              "want L, MIN..MAX (1 <= MIN <= MAX <= %u) or @FILE, got \"%s\"",
                              RNND_LOAD_MAX_LENGTH, v);
}

static int set_input(struct rnnd_loadspec *s, const char *v, rnnd_error_t *err)
{
        struct rnnd_load_input in = {0};
        const char *c1 = strchr(v, ':'), *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
        char dt[16];
        const char *p;

        if (c2 == NULL || c1 == v || (size_t)(c1 - v) >= sizeof(in.name) ||
            (size_t)(c2 - c1 - 1) >= sizeof(dt))
                goto bad;
        memcpy(in.name, v, (size_t)(c1 - v));
        memcpy(dt, c1 + 1, (size_t)(c2 - c1 - 1));
        dt[c2 - c1 - 1] = '\0';
        in.dtype = rnnd_dtype_from_name(dt);
        for (p = c2 + 1; *p != '\0'; p++) {
                char *end;
                long long d;

                if (in.ndim == RNND_MAX_DIMS)
                        goto bad;
                errno = 0;
                d = strtoll(p, &end, 10);
                if (end == p || errno != 0 || (d < 1 && d != -1) || d > (1 << 24))
                        goto bad;
                in.shape[in.ndim++] = d;
                p = end;
                if (*p == '\0')
                        break;
                if (*p != ',')
                        goto bad;
        }
        if (!((in.dtype == RNND_DT_F32 && in.ndim == 3 && in.shape[2] > 0) ||
              ((in.dtype == RNND_DT_I64 || in.dtype == RNND_DT_I32) && in.ndim == 2)))
                goto bad;
        s->input = in;
        s->input_given = true;
        return 0;
bad:
        return rnnd_error_set(err, RNND_EINVAL,
                              "want NAME:FP32:-1,-1,FEATURES or NAME:INT64:-1,-1 (or INT32), "
                              "got \"%s\"",
                              v);
}

static int set_outputs(struct rnnd_loadspec *s, const char *v, rnnd_error_t *err)
{
        char names[RNND_LOAD_MAX_OUTPUTS][RNND_LOAD_NAME_MAX];
        unsigned n = 0;
        const char *p = v;

        while (*p != '\0') {
                size_t len = strcspn(p, ",");

                if (len == 0 || len >= RNND_LOAD_NAME_MAX || n == RNND_LOAD_MAX_OUTPUTS)
                        return rnnd_error_set(err, RNND_EINVAL,
                                              "want 1 to %u names of 1 to %u bytes separated "
                                              "by commas, got \"%s\"",
                                              RNND_LOAD_MAX_OUTPUTS, RNND_LOAD_NAME_MAX - 1, v);
                memcpy(names[n], p, len);
                names[n++][len] = '\0';
                p += len;
                if (*p == ',')
                        p++;
        }
        memcpy(s->outputs, names, sizeof(names));
        s->n_outputs = n;
        return 0;
}

static int set_key(struct rnnd_loadspec *s, const struct key *k, const char *v, rnnd_error_t *err)
{
        void *dst = (char *)s + k->off;
        uint64_t u;
        double d;

        if (k->type == K_BOOL && v == NULL)
                v = "true";
        if (v == NULL)
                return rnnd_error_set(err, RNND_EINVAL, "needs a value (%s)", k->pub.arg);
        switch (k->type) {
        case K_STR:
                if (strlen(v) >= k->size)
                        return rnnd_error_set(err, RNND_EINVAL, "longer than %zu bytes",
                                              k->size - 1);
                memcpy(dst, v, strlen(v) + 1);
                return 0;
        case K_ENUM:
                for (int i = 0; k->names[i] != NULL; i++) {
                        if (strcmp(v, k->names[i]) == 0) {
                                *(int *)dst = i;
                                return 0;
                        }
                }
                return rnnd_error_set(err, RNND_EINVAL, "want %s, got \"%s\"", k->pub.arg, v);
        case K_U32:
        case K_U64:
                if (read_uint(v, (uint64_t)k->lo, (uint64_t)k->hi, &u) < 0)
                        return rnnd_error_set(err, RNND_EINVAL,
                                              "want an integer in %.0f..%.0f, got \"%s\"", k->lo,
                                              k->hi, v);
                if (k->type == K_U32)
                        *(uint32_t *)dst = (uint32_t)u;
                else
                        *(uint64_t *)dst = u;
                return 0;
        case K_SECONDS:
        case K_DOUBLE:
                if (read_number(v, k->type == K_SECONDS, &d) < 0 || d < k->lo || d > k->hi)
                        return rnnd_error_set(
                                err, RNND_EINVAL, "want a number%s in %g..%g, got \"%s\"",
                                k->type == K_SECONDS ? " of seconds" : "", k->lo, k->hi, v);
                *(double *)dst = d;
                return 0;
        case K_BOOL:
                if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0)
                        return rnnd_error_set(err, RNND_EINVAL, "want true or false, got \"%s\"",
                                              v);
                *(bool *)dst = strcmp(v, "true") == 0;
                return 0;
        case K_CUSTOM:
                return k->set(s, v, err);
        }
        return rnnd_error_set(err, RNND_EINTERNAL, "unknown key type");
}

int rnnd_loadspec_set(struct rnnd_loadspec *s, const char *key, const char *value,
                      rnnd_error_t *reterr)
{
        const struct key *k = find_key(key);
        int r;

        if (k == NULL)
                return rnnd_error_set(reterr, RNND_EINVAL, "unknown key '%s'", key);
        r = set_key(s, k, value, reterr);
        if (r < 0)
                rnnd_error_prefix(reterr, "%s", k->pub.name);
        return r;
}

/* The command-line text of a JSON value: strings as they are, numbers, booleans. */
static int json_text(const json_t *v, char *buf, size_t n)
{
        int w;

        switch (json_typeof(v)) {
        case JSON_STRING:
                w = snprintf(buf, n, "%s", json_string_value(v));
                break;
        case JSON_INTEGER:
                w = snprintf(buf, n, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                break;
        case JSON_REAL:
                w = snprintf(buf, n, "%.17g", json_real_value(v));
                break;
        case JSON_TRUE:
        case JSON_FALSE:
                w = snprintf(buf, n, "%s", json_is_true(v) ? "true" : "false");
                break;
        default:
                return RNND_EINVAL;
        }
        return w >= 0 && (size_t)w < n ? 0 : RNND_EINVAL;
}

int rnnd_loadspec_parse_json(struct rnnd_loadspec *s, const char *text, size_t len,
                             rnnd_error_t *reterr)
{
        json_error_t je;
        json_t *root, *v;
        const char *key;
        char buf[2 * RNND_LOAD_STR_MAX], desc[64];
        int r = 0;

        root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (root == NULL)
                return rnnd_error_set(reterr, RNND_EINVAL, "line %d: %s", je.line, je.text);
        if (!json_is_object(root)) {
                r = rnnd_error_set(reterr, RNND_EINVAL, "want an object, got %s",
                                   rnnd_json_describe(root, desc, sizeof(desc)));
                goto out;
        }
        json_object_foreach(root, key, v)
        {
                if (find_key(key) == NULL) {
                        r = rnnd_error_set(reterr, RNND_EINVAL, "unknown key '%s'", key);
                        goto out;
                }
                if (json_text(v, buf, sizeof(buf)) < 0) {
                        r = rnnd_error_set(reterr, RNND_EINVAL,
                                           "%s: want a string, number or boolean, got %s", key,
                                           rnnd_json_describe(v, desc, sizeof(desc)));
                        goto out;
                }
                r = rnnd_loadspec_set(s, key, buf, reterr);
                if (r < 0)
                        goto out;
        }
out:
        json_decref(root);
        return r;
}

int rnnd_loadspec_check(const struct rnnd_loadspec *s, rnnd_error_t *reterr)
{
        if (strncmp(s->url, "http://", 7) != 0 && strncmp(s->url, "https://", 8) != 0)
                return rnnd_error_set(reterr, RNND_EINVAL, "url: want http://HOST:PORT, got \"%s\"",
                                      s->url);
        if (s->api == RNND_API_GET && s->path[0] != '/')
                return rnnd_error_set(reterr, RNND_EINVAL, "api get needs a path starting with /");
        if (s->api != RNND_API_GET && s->model[0] == '\0')
                return rnnd_error_set(reterr, RNND_EINVAL, "api %s needs a model",
                                      api_names[s->api]);
        if (s->format == RNND_TENSORS_BINARY && s->api != RNND_API_V2)
                return rnnd_error_set(reterr, RNND_EINVAL, "format binary needs api v2");
        if (s->mode == RNND_LOAD_OPEN && s->rate <= 0)
                return rnnd_error_set(reterr, RNND_EINVAL, "mode open needs a rate");
        if (s->streams > 0 &&
            (s->api != RNND_API_V2 || s->mode != RNND_LOAD_CLOSED || s->sequences != 1))
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "streams needs api v2, mode closed and sequences 1");
        return 0;
}

int rnnd_loadspec_lengths_parse(const char *text, size_t len, uint32_t **ret, size_t *n,
                                rnnd_error_t *reterr)
{
        uint32_t *v = NULL, *nv;
        size_t count = 0, cap = 0, i = 0;
        unsigned line = 1;

        while (i < len) {
                char c = text[i];

                if (c == '\n') {
                        line++;
                        i++;
                } else if (c == '#') {
                        while (i < len && text[i] != '\n')
                                i++;
                } else if (isspace((unsigned char)c) || c == ',') {
                        i++;
                } else if (isdigit((unsigned char)c)) {
                        uint64_t x = 0;

                        while (i < len && isdigit((unsigned char)text[i]) &&
                               x <= RNND_LOAD_MAX_LENGTH)
                                x = x * 10 + (uint64_t)(text[i++] - '0');
                        if (x < 1 || x > RNND_LOAD_MAX_LENGTH ||
                            (i < len && isdigit((unsigned char)text[i])))
                                goto bad;
                        if (count == cap) {
                                cap = cap ? 2 * cap : 64;
                                nv = rnnd_realloc(v, cap * sizeof(*v));
                                if (nv == NULL) {
                                        rnnd_free(v);
                                        return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
                                }
                                v = nv;
                        }
                        v[count++] = (uint32_t)x;
                } else {
                        goto bad;
                }
        }
        if (count == 0) {
                rnnd_free(v);
                return rnnd_error_set(reterr, RNND_EINVAL, "no lengths");
        }
        *ret = v;
        *n = count;
        return 0;
bad:
        rnnd_free(v);
        return rnnd_error_set(reterr, RNND_EINVAL,
                              "line %u: want lengths in 1..%u separated by spaces or commas", line,
                              RNND_LOAD_MAX_LENGTH);
}

/* One {"name", "datatype", "shape"} of metadata into *in. */
static int read_tensor(json_t *t, struct rnnd_load_input *in)
{
        json_t *shape = json_object_get(t, "shape"), *d;
        const char *name = json_string_value(json_object_get(t, "name"));
        const char *dt = json_string_value(json_object_get(t, "datatype"));
        size_t i;

        if (name == NULL || dt == NULL || !json_is_array(shape) ||
            json_array_size(shape) > RNND_MAX_DIMS || strlen(name) >= sizeof(in->name))
                return RNND_EINVAL;
        memset(in, 0, sizeof(*in));
        snprintf(in->name, sizeof(in->name), "%s", name);
        in->dtype = rnnd_dtype_from_name(dt);
        json_array_foreach(shape, i, d)
        {
                if (!json_is_integer(d))
                        return RNND_EINVAL;
                in->shape[in->ndim++] = json_integer_value(d);
        }
        return 0;
}

int rnnd_loadspec_model_parse(const char *body, size_t len, struct rnnd_load_model *ret,
                              rnnd_error_t *reterr)
{
        struct rnnd_load_model m = {0};
        json_t *root = json_loadb(body, len, 0, NULL), *ins, *outs, *t;
        bool found = false;
        size_t i;
        int r = 0;

        ins = json_object_get(root, "inputs");
        outs = json_object_get(root, "outputs");
        if (!json_is_array(ins) || !json_is_array(outs)) {
                r = rnnd_error_set(reterr, RNND_EINVAL,
                                   "not KServe v2 model metadata (inputs and outputs lists)");
                goto out;
        }
        json_array_foreach(ins, i, t)
        {
                struct rnnd_load_input in;

                if (read_tensor(t, &in) < 0) {
                        r = rnnd_error_set(reterr, RNND_EINVAL, "inputs[%zu]: not a tensor", i);
                        goto out;
                }
                if (!found && (strcmp(in.name, "input") == 0 || strcmp(in.name, "tokens") == 0)) {
                        m.input = in;
                        found = true;
                }
        }
        json_array_foreach(outs, i, t)
        {
                const char *name = json_string_value(json_object_get(t, "name"));

                if (name == NULL || strlen(name) >= RNND_LOAD_NAME_MAX) {
                        r = rnnd_error_set(reterr, RNND_EINVAL, "outputs[%zu]: not a tensor", i);
                        goto out;
                }
                if (m.n_outputs < RNND_LOAD_MAX_OUTPUTS)
                        snprintf(m.outputs[m.n_outputs++], RNND_LOAD_NAME_MAX, "%s", name);
        }
        if (!found) {
                r = rnnd_error_set(reterr, RNND_EINVAL, "the model has no input or tokens input");
                goto out;
        }
        *ret = m;
out:
        json_decref(root);
        return r;
}

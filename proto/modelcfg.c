/*
 * modelcfg.c: parses a model's config.json (DESIGN.md §3) into struct
 * rnnd_model_config.
 *
 * Every JSON object of the schema is described by a table of fields (like
 * Redis's standardConfig): each entry names a key, its type, its range, and
 * where its value goes.  One walker checks an object against its table:
 * unknown keys first, so that a typo is reported as such, then each field in
 * table order, descending into nested objects.  The few shapes a table cannot
 * say (arrays, version_policy) are custom parsers called by the walker, and
 * the rules that span fields run once the walk is done.  Every message names
 * the file and the dotted path of the field, e.g. "instances[1].kind".
 */
#include <assert.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "json.h"
#include "modelcfg.h"

/* Room for a dotted field path; a longer one (only from unknown keys) is truncated. */
#define PATH_LEN 128

/* An F_OBJECT field with no "present" flag to set. */
#define NO_FLAG SIZE_MAX

/* Enum values are stored through an int. */
static_assert(sizeof(rnnd_cell_t) == sizeof(int), "enum size");
static_assert(sizeof(rnnd_act_t) == sizeof(int), "enum size");
static_assert(sizeof(rnnd_head_apply_t) == sizeof(int), "enum size");
static_assert(sizeof(rnnd_precision_t) == sizeof(int), "enum size");
static_assert(sizeof(rnnd_instance_kind_t) == sizeof(int), "enum size");

/* Names as config.json spells them, indexed by the enum, NULL-terminated. */
static const char *const cell_names[] = {"lstm", "gru", "rnn_tanh", "rnn_relu", NULL};
static const char *const act_names[] = {"none", "sigmoid", "tanh", "relu", "softmax", NULL};
static const char *const apply_names[] = {"last", "all", NULL};
static const char *const precision_names[] = {"fp32", "fp16", NULL};
static const char *const kind_names[] = {"auto", "gpu", "cpu", NULL};
static const char *const policy_names[] = {"latest", "all", "specific", NULL};

/* What one parse is reporting to. */
struct ctx {
        const char *file;  /* for messages */
        rnnd_error_t *err; /* may be NULL */
        json_t *root;      /* the whole document */
};

enum ftype {
        F_U32,    /* integer in lo..hi, stored as uint32_t */
        F_U64,    /* integer in lo..hi, stored as uint64_t */
        F_BOOL,   /* true or false, stored as bool */
        F_ENUM,   /* one of names, stored as int */
        F_NAME,   /* string of at most RNND_CFG_NAME_MAX - 1 bytes */
        F_OBJECT, /* nested object walked with sub, same base */
        F_CUSTOM, /* handed to parse */
};

struct field {
        const char *key;
        enum ftype type;
        bool required;
        size_t off;               /* into base; F_OBJECT: its bool "present" flag, or NO_FLAG */
        uint64_t lo, hi;          /* F_U32, F_U64 */
        const char *const *names; /* F_ENUM */
        const struct field *sub;  /* F_OBJECT, terminated by a NULL key */
        int (*parse)(struct ctx *c, json_t *v, const char *path, void *base); /* F_CUSTOM */
};

#define CFG(member) offsetof(struct rnnd_model_config, member)
#define GRP(member) offsetof(struct rnnd_instance_group, member)
#define BLK(member) offsetof(struct rnnd_block_config, member)
#define U32(k, req, o, l, h)                                                                       \
        {                                                                                          \
                .key = k, .type = F_U32, .required = req, .off = o, .lo = l, .hi = h               \
        }
#define U64(k, req, o, l, h)                                                                       \
        {                                                                                          \
                .key = k, .type = F_U64, .required = req, .off = o, .lo = l, .hi = h               \
        }
#define BOOL(k, o)                                                                                 \
        {                                                                                          \
                .key = k, .type = F_BOOL, .off = o                                                 \
        }
#define ENUM(k, req, o, n)                                                                         \
        {                                                                                          \
                .key = k, .type = F_ENUM, .required = req, .off = o, .names = n                    \
        }
#define NAME(k, o)                                                                                 \
        {                                                                                          \
                .key = k, .type = F_NAME, .off = o                                                 \
        }
#define OBJECT(k, flag, s)                                                                         \
        {                                                                                          \
                .key = k, .type = F_OBJECT, .off = flag, .sub = s                                  \
        }
#define CUSTOM(k, req, fn)                                                                         \
        {                                                                                          \
                .key = k, .type = F_CUSTOM, .required = req, .parse = fn                           \
        }
#define END                                                                                        \
        {                                                                                          \
                .key = NULL                                                                        \
        }

static int parse_gpus(struct ctx *c, json_t *v, const char *path, void *base);
static int parse_instances(struct ctx *c, json_t *v, const char *path, void *base);
static int parse_versions(struct ctx *c, json_t *v, const char *path, void *base);
static int parse_version_policy(struct ctx *c, json_t *v, const char *path, void *base);
static int parse_blocks(struct ctx *c, json_t *v, const char *path, void *base);

/* Relative to one struct rnnd_block_config. */
static const struct field block_fields[] = {
        ENUM("cell", true, BLK(cell), cell_names),
        U32("hidden_size", true, BLK(hidden_size), 1, RNND_CFG_MAX_SIZE),
        U32("num_layers", false, BLK(num_layers), 1, RNND_CFG_MAX_LAYERS),
        BOOL("bidirectional", BLK(bidirectional)),
        U32("proj_size", false, BLK(proj_size), 0, RNND_CFG_MAX_SIZE),
        BOOL("gru_linear_before_reset", BLK(gru_linear_before_reset)),
        NAME("prefix", BLK(prefix)),
        END,
};

/* The top-level fields of one block, which a config with "blocks" gives in each. */
static const char *const block_keys[] = {"cell",       "hidden_size",
                                         "num_layers", "bidirectional",
                                         "proj_size",  "gru_linear_before_reset",
                                         NULL};

static const struct field embedding_fields[] = {
        U32("num_embeddings", true, CFG(embedding.num_embeddings), 1, RNND_CFG_MAX_EMBEDDINGS),
        U32("dim", true, CFG(embedding.dim), 1, RNND_CFG_MAX_SIZE),
        END,
};

static const struct field head_fields[] = {
        U32("units", true, CFG(head.units), 1, RNND_CFG_MAX_UNITS),
        ENUM("activation", false, CFG(head.activation), act_names),
        ENUM("apply", false, CFG(head.apply), apply_names),
        END,
};

static const struct field weights_fields[] = {
        NAME("file", CFG(weights.file)),           NAME("prefix", CFG(weights.prefix)),
        NAME("embedding", CFG(weights.embedding)), NAME("head_weight", CFG(weights.head_weight)),
        NAME("head_bias", CFG(weights.head_bias)), END,
};

static const struct field batching_fields[] = {
        U32("max_batch_size", false, CFG(batching.max_batch_size), 1, RNND_CFG_MAX_BATCH),
        U32("max_queue_delay_us", false, CFG(batching.max_queue_delay_us), 0, 10000000),
        U32("max_queue_size", false, CFG(batching.max_queue_size), 1, 1000000),
        U32("queue_timeout_us", false, CFG(batching.queue_timeout_us), 0, 3600000000u),
        U64("max_batch_steps", false, CFG(batching.max_batch_steps), 1, UINT64_C(1) << 32),
        U32("priority_levels", false, CFG(batching.priority_levels), 1,
            RNND_CFG_MAX_PRIORITY_LEVELS),
        U32("default_priority_level", false, CFG(batching.default_priority_level), 1,
            RNND_CFG_MAX_PRIORITY_LEVELS),
        BOOL("adaptive_delay", CFG(batching.adaptive_delay)),
        END,
};

/* Relative to one struct rnnd_instance_group; gpus comes after kind, which it checks. */
static const struct field instance_fields[] = {
        ENUM("kind", false, GRP(kind), kind_names),
        U32("count", false, GRP(count), 1, RNND_CFG_MAX_INSTANCE_COUNT),
        CUSTOM("gpus", false, parse_gpus),
        END,
};

static const struct field sequence_fields[] = {
        U32("idle_timeout_ms", false, CFG(sequence.idle_timeout_ms), 1, 86400000),
        U32("max_sequences", false, CFG(sequence.max_sequences), 1, 10000000),
        END,
};

static const struct field latest_fields[] = {
        U32("num_versions", false, CFG(version_policy.num_versions), 1, RNND_CFG_MAX_VERSIONS),
        END,
};

static const struct field all_fields[] = {
        END,
};

static const struct field specific_fields[] = {
        CUSTOM("versions", true, parse_versions),
        END,
};

/* In the order of policy_names. */
static const struct field policy_fields[] = {
        OBJECT("latest", NO_FLAG, latest_fields),
        OBJECT("all", NO_FLAG, all_fields),
        OBJECT("specific", NO_FLAG, specific_fields),
        END,
};

/* cell and hidden_size are required without "blocks" (check_blocks()). */
static const struct field top_fields[] = {
        ENUM("cell", false, CFG(cell), cell_names),
        U32("input_size", true, CFG(input_size), 1, RNND_CFG_MAX_SIZE),
        U32("hidden_size", false, CFG(hidden_size), 1, RNND_CFG_MAX_SIZE),
        U32("num_layers", false, CFG(num_layers), 1, RNND_CFG_MAX_LAYERS),
        BOOL("bidirectional", CFG(bidirectional)),
        U32("proj_size", false, CFG(proj_size), 0, RNND_CFG_MAX_SIZE),
        BOOL("gru_linear_before_reset", CFG(gru_linear_before_reset)),
        CUSTOM("blocks", false, parse_blocks),
        OBJECT("embedding", CFG(embedding.present), embedding_fields),
        OBJECT("head", CFG(head.present), head_fields),
        OBJECT("weights", NO_FLAG, weights_fields),
        ENUM("precision", false, CFG(precision), precision_names),
        U32("max_sequence_length", false, CFG(max_sequence_length), 1, RNND_CFG_MAX_SEQ_LEN),
        OBJECT("batching", NO_FLAG, batching_fields),
        CUSTOM("instances", false, parse_instances),
        OBJECT("sequence", CFG(sequence.present), sequence_fields),
        CUSTOM("version_policy", false, parse_version_policy),
        END,
};

/* Sets "<file>: <message>" as an RNND_EMODEL and returns it. */
static int __attribute__((format(printf, 2, 3))) model_error(struct ctx *c, const char *fmt, ...)
{
        char msg[sizeof(c->err->msg)];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return rnnd_error_set(c->err, RNND_EMODEL, "%s: %s", c->file, msg);
}

/* Sets "<file>: field '<path>': <message>" as an RNND_EMODEL and returns it. */
static int __attribute__((format(printf, 3, 4)))
field_error(struct ctx *c, const char *path, const char *fmt, ...)
{
        char msg[sizeof(c->err->msg)];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return rnnd_error_set(c->err, RNND_EMODEL, "%s: field '%s': %s", c->file, path, msg);
}

/* "parent.key", or "key" at the top level. */
static void path_join(char *dst, const char *parent, const char *key)
{
        snprintf(dst, PATH_LEN, "%s%s%s", parent, parent[0] != '\0' ? "." : "", key);
}

/* "parent[i]". */
static void path_index(char *dst, const char *parent, size_t i)
{
        snprintf(dst, PATH_LEN, "%s[%zu]", parent, i);
}

/* "a, b, c" from a NULL-terminated name list. */
static const char *name_list(const char *const *names, char *buf, size_t n)
{
        buf[0] = '\0';
        for (size_t i = 0; names[i] != NULL; i++) {
                if (i > 0)
                        strncat(buf, ", ", n - strlen(buf) - 1);
                strncat(buf, names[i], n - strlen(buf) - 1);
        }
        return buf;
}

static int check_uint(struct ctx *c, json_t *v, const char *path, uint64_t lo, uint64_t hi,
                      uint64_t *out)
{
        char got[64];
        json_int_t i;

        if (json_is_integer(v)) {
                i = json_integer_value(v);
                if (i >= 0 && (uint64_t)i >= lo && (uint64_t)i <= hi) {
                        *out = (uint64_t)i;
                        return 0;
                }
        }
        return field_error(c, path, "must be an integer in %" PRIu64 "..%" PRIu64 ", got %s", lo,
                           hi, rnnd_json_describe(v, got, sizeof(got)));
}

static int check_enum(struct ctx *c, json_t *v, const char *path, const char *const *names,
                      int *out)
{
        char got[64], list[64];

        if (!json_is_string(v))
                return field_error(c, path, "must be a string (%s), got %s",
                                   name_list(names, list, sizeof(list)),
                                   rnnd_json_describe(v, got, sizeof(got)));
        for (int i = 0; names[i] != NULL; i++) {
                if (strcmp(json_string_value(v), names[i]) == 0) {
                        *out = i;
                        return 0;
                }
        }
        return field_error(c, path, "unknown value %s (%s)",
                           rnnd_json_describe(v, got, sizeof(got)),
                           name_list(names, list, sizeof(list)));
}

/* A string that fits char[RNND_CFG_NAME_MAX] and holds no NUL. */
static int check_name(struct ctx *c, json_t *v, const char *path, char *out)
{
        char got[64];
        size_t len;

        if (!json_is_string(v))
                return field_error(c, path, "must be a string, got %s",
                                   rnnd_json_describe(v, got, sizeof(got)));
        len = json_string_length(v);
        if (len > RNND_CFG_NAME_MAX - 1)
                return field_error(c, path, "must be at most %u bytes long, got %zu",
                                   RNND_CFG_NAME_MAX - 1, len);
        if (strlen(json_string_value(v)) != len)
                return field_error(c, path, "must not contain a NUL character");
        memcpy(out, json_string_value(v), len + 1);
        return 0;
}

static int walk(struct ctx *c, json_t *obj, const char *path, const struct field *fields,
                void *base);

/* Checks v against f and stores it at base + f->off. */
static int parse_field(struct ctx *c, const struct field *f, json_t *v, const char *path,
                       void *base)
{
        /* Not base + NO_FLAG: even unused, a pointer past the object is undefined. */
        char *dst = f->off == NO_FLAG ? NULL : (char *)base + f->off;
        char got[64];
        uint64_t u = 0;
        uint32_t u32;
        bool b;
        int r, e = 0;

        switch (f->type) {
        case F_U32:
        case F_U64:
                r = check_uint(c, v, path, f->lo, f->hi, &u);
                if (r < 0)
                        return r;
                if (f->type == F_U64) {
                        memcpy(dst, &u, sizeof(u));
                } else {
                        u32 = (uint32_t)u;
                        memcpy(dst, &u32, sizeof(u32));
                }
                return 0;
        case F_BOOL:
                if (!json_is_boolean(v))
                        return field_error(c, path, "must be true or false, got %s",
                                           rnnd_json_describe(v, got, sizeof(got)));
                b = json_is_true(v);
                memcpy(dst, &b, sizeof(b));
                return 0;
        case F_ENUM:
                r = check_enum(c, v, path, f->names, &e);
                if (r < 0)
                        return r;
                memcpy(dst, &e, sizeof(e));
                return 0;
        case F_NAME:
                return check_name(c, v, path, dst);
        case F_OBJECT:
                r = walk(c, v, path, f->sub, base);
                if (r < 0)
                        return r;
                if (f->off != NO_FLAG) {
                        b = true;
                        memcpy(dst, &b, sizeof(b));
                }
                return 0;
        case F_CUSTOM:
                return f->parse(c, v, path, base);
        }
        return rnnd_error_set(c->err, RNND_EINTERNAL, "%s: field '%s': bad field type", c->file,
                              path);
}

static const struct field *find_field(const struct field *fields, const char *key)
{
        for (; fields->key != NULL; fields++)
                if (strcmp(fields->key, key) == 0)
                        return fields;
        return NULL;
}

/*
 * The edit distance of a and b (insertions, deletions, substitutions and
 * swaps of neighbours), up to 3: 3 means "3 or more".
 */
static unsigned edit_distance(const char *a, const char *b)
{
        enum { CAP = 3, MAXLEN = 48 };
        unsigned d[MAXLEN + 1][MAXLEN + 1];
        size_t n = strlen(a), m = strlen(b);

        if (n > MAXLEN || m > MAXLEN || (n > m ? n - m : m - n) >= CAP)
                return CAP;
        for (size_t i = 0; i <= n; i++)
                for (size_t j = 0; j <= m; j++) {
                        unsigned v = (unsigned)(i > j ? i : j);

                        if (i > 0 && j > 0) {
                                v = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
                                v = d[i - 1][j] + 1 < v ? d[i - 1][j] + 1 : v;
                                v = d[i][j - 1] + 1 < v ? d[i][j - 1] + 1 : v;
                                if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                                        v = d[i - 2][j - 2] + 1 < v ? d[i - 2][j - 2] + 1 : v;
                        } else {
                                v = (unsigned)(i + j);
                        }
                        d[i][j] = v;
                }
        return d[n][m] < CAP ? d[n][m] : CAP;
}

/* The field a misspelt key most likely meant: one or two edits away, and
 * not short enough for that to be most of it ("ab" is not "units"). */
static const char *near_field(const struct field *fields, const char *key)
{
        const char *best = NULL;
        unsigned best_d = 3;

        for (; fields->key != NULL; fields++) {
                unsigned d = edit_distance(key, fields->key);

                if (d < best_d && 3 * d <= strlen(fields->key)) {
                        best = fields->key;
                        best_d = d;
                }
        }
        return best;
}

/*
 * Checks the object obj at path against fields, storing values relative to
 * base: unknown keys first, then each field in table order.  Absent optional
 * fields keep what base already holds (the defaults).
 */
static int walk(struct ctx *c, json_t *obj, const char *path, const struct field *fields,
                void *base)
{
        char sub[PATH_LEN], got[64];
        const char *key;
        json_t *v;
        int r;

        if (!json_is_object(obj))
                return field_error(c, path, "must be an object, got %s",
                                   rnnd_json_describe(obj, got, sizeof(got)));
        json_object_foreach(obj, key, v)
        {
                if (find_field(fields, key) == NULL) {
                        const char *near = near_field(fields, key);

                        path_join(sub, path, key);
                        if (near != NULL)
                                return model_error(c, "unknown field '%s' (did you mean '%s'?)",
                                                   sub, near);
                        return model_error(c, "unknown field '%s'", sub);
                }
        }
        for (const struct field *f = fields; f->key != NULL; f++) {
                path_join(sub, path, f->key);
                v = json_object_get(obj, f->key);
                if (v == NULL) {
                        if (f->required)
                                return model_error(c, "missing required field '%s'", sub);
                        continue;
                }
                r = parse_field(c, f, v, sub, base);
                if (r < 0)
                        return r;
        }
        return 0;
}

/*
 * Checks that v is an array of lo..hi elements of unsigned integers in
 * vlo..vhi with no duplicates, and stores them in out (room for hi).  what
 * names an element in messages.
 */
static int check_uint_set(struct ctx *c, json_t *v, const char *path, size_t lo, size_t hi,
                          uint64_t vlo, uint64_t vhi, const char *what, uint64_t *out, size_t *n)
{
        char sub[PATH_LEN], got[64];
        size_t i, j;
        json_t *e;
        int r;

        if (!json_is_array(v) || json_array_size(v) < lo || json_array_size(v) > hi)
                return field_error(c, path, "must be an array of %zu..%zu %ss, got %s", lo, hi,
                                   what, rnnd_json_describe(v, got, sizeof(got)));
        json_array_foreach(v, i, e)
        {
                path_index(sub, path, i);
                r = check_uint(c, e, sub, vlo, vhi, &out[i]);
                if (r < 0)
                        return r;
                for (j = 0; j < i; j++)
                        if (out[j] == out[i])
                                return field_error(c, sub, "duplicate %s %" PRIu64, what, out[i]);
        }
        *n = json_array_size(v);
        return 0;
}

static int parse_gpus(struct ctx *c, json_t *v, const char *path, void *base)
{
        struct rnnd_instance_group *g = base;
        uint64_t gpus[RNND_CFG_MAX_GPUS];
        size_t n = 0;
        int r;

        if (g->kind == RNND_INST_CPU)
                return field_error(c, path, "only allowed when kind is gpu or auto");
        r = check_uint_set(c, v, path, 0, RNND_CFG_MAX_GPUS, 0, 255, "GPU ordinal", gpus, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                g->gpus[i] = (uint32_t)gpus[i];
        g->n_gpus = (uint32_t)n;
        return 0;
}

static int parse_instances(struct ctx *c, json_t *v, const char *path, void *base)
{
        struct rnnd_model_config *cfg = base;
        struct rnnd_instance_group groups[RNND_CFG_MAX_INSTANCE_GROUPS];
        char sub[PATH_LEN], got[64];
        size_t i;
        json_t *e;
        int r;

        if (!json_is_array(v) || json_array_size(v) < 1 ||
            json_array_size(v) > RNND_CFG_MAX_INSTANCE_GROUPS)
                return field_error(c, path, "must be an array of 1..%u instance groups, got %s",
                                   RNND_CFG_MAX_INSTANCE_GROUPS,
                                   rnnd_json_describe(v, got, sizeof(got)));
        json_array_foreach(v, i, e)
        {
                groups[i] = (struct rnnd_instance_group){.kind = RNND_INST_AUTO, .count = 1};
                path_index(sub, path, i);
                r = walk(c, e, sub, instance_fields, &groups[i]);
                if (r < 0)
                        return r;
                groups[i].count_set = json_object_get(e, "count") != NULL;
        }
        memcpy(cfg->instances, groups, json_array_size(v) * sizeof(groups[0]));
        cfg->n_instances = (uint32_t)json_array_size(v);
        return 0;
}

static int parse_versions(struct ctx *c, json_t *v, const char *path, void *base)
{
        struct rnnd_model_config *cfg = base;
        uint64_t versions[RNND_CFG_MAX_VERSIONS];
        size_t n = 0;
        int r;

        r = check_uint_set(c, v, path, 1, RNND_CFG_MAX_VERSIONS, 1, INT64_MAX, "version", versions,
                           &n);
        if (r < 0)
                return r;
        memcpy(cfg->version_policy.versions, versions, n * sizeof(versions[0]));
        cfg->version_policy.n_versions = (uint32_t)n;
        return 0;
}

/* Exactly one of {"latest": {...}}, {"all": {}}, {"specific": {...}}, as Triton has it. */
static int parse_version_policy(struct ctx *c, json_t *v, const char *path, void *base)
{
        struct rnnd_model_config *cfg = base;
        char got[64];
        int r, kind;

        if (!json_is_object(v))
                return field_error(c, path, "must be an object, got %s",
                                   rnnd_json_describe(v, got, sizeof(got)));
        if (json_object_size(v) != 1)
                return field_error(c, path,
                                   "must have exactly one key (latest, all or specific), got %zu",
                                   json_object_size(v));
        r = walk(c, v, path, policy_fields, base);
        if (r < 0)
                return r;
        for (kind = 0; policy_names[kind] != NULL; kind++)
                if (json_object_get(v, policy_names[kind]) != NULL)
                        break;
        cfg->version_policy.kind = (rnnd_version_policy_kind_t)kind;
        return 0;
}

static int parse_blocks(struct ctx *c, json_t *v, const char *path, void *base)
{
        struct rnnd_model_config *cfg = base;
        char sub[PATH_LEN], got[64];
        size_t i;
        json_t *e;
        int r;

        if (!json_is_array(v) || json_array_size(v) < 1 || json_array_size(v) > RNND_CFG_MAX_BLOCKS)
                return field_error(c, path, "must be an array of 1..%u blocks, got %s",
                                   RNND_CFG_MAX_BLOCKS, rnnd_json_describe(v, got, sizeof(got)));
        json_array_foreach(v, i, e)
        {
                cfg->blocks[i] = (struct rnnd_block_config){.num_layers = 1,
                                                            .gru_linear_before_reset = true};
                path_index(sub, path, i);
                r = walk(c, e, sub, block_fields, &cfg->blocks[i]);
                if (r < 0)
                        return r;
        }
        cfg->n_blocks = (uint32_t)json_array_size(v);
        return 0;
}

static bool plain_file_name(const char *s)
{
        return s[0] != '\0' && strchr(s, '/') == NULL && strcmp(s, ".") != 0 &&
               strcmp(s, "..") != 0;
}

/* Whether the object at top-level key has the key sub. */
static bool has(json_t *root, const char *key, const char *sub)
{
        json_t *o = json_object_get(root, key);

        return o != NULL && (sub == NULL || json_object_get(o, sub) != NULL);
}

/* The one-block fields of cfg from block b (not input_size, not the prefix). */
static void top_from_block(struct rnnd_model_config *cfg, const struct rnnd_block_config *b)
{
        cfg->cell = b->cell;
        cfg->hidden_size = b->hidden_size;
        cfg->num_layers = b->num_layers;
        cfg->bidirectional = b->bidirectional;
        cfg->proj_size = b->proj_size;
        cfg->gru_linear_before_reset = b->gru_linear_before_reset;
}

/*
 * The rules of one block: at is "" for a config without "blocks" (the
 * fields are top-level) or "blocks[k]."; obj is the block's JSON object.
 */
static int check_block(struct ctx *c, const struct rnnd_block_config *b, json_t *obj,
                       const char *at)
{
        char path[PATH_LEN];

        snprintf(path, sizeof(path), "%sproj_size", at);
        if (b->proj_size != 0 && b->cell != RNND_CELL_LSTM)
                return field_error(c, path, "only allowed when cell is lstm, got %s",
                                   cell_names[b->cell]);
        if (b->proj_size >= b->hidden_size)
                return field_error(c, path,
                                   "must be less than hidden_size (%" PRIu32 "), got %" PRIu32,
                                   b->hidden_size, b->proj_size);
        snprintf(path, sizeof(path), "%sgru_linear_before_reset", at);
        if (json_object_get(obj, "gru_linear_before_reset") != NULL && b->cell != RNND_CELL_GRU)
                return field_error(c, path, "only allowed when cell is gru, got %s",
                                   cell_names[b->cell]);
        return 0;
}

/*
 * The blocks: a config without "blocks" is one, from the top-level fields
 * (cell and hidden_size required); with "blocks", those fields and
 * weights.prefix are each block's own, every block's weights need their own
 * prefix, and the top-level fields become the last block's.  Each block's
 * input is the output of the one before (DESIGN.md §3).
 */
static int check_blocks(struct ctx *c, struct rnnd_model_config *cfg)
{
        json_t *blocks = json_object_get(c->root, "blocks");
        char at[PATH_LEN];
        int r;

        if (blocks == NULL) {
                struct rnnd_block_config one;
                uint32_t n;

                if (!has(c->root, "hidden_size", NULL)) /* cell: before the walk */
                        return model_error(c, "missing required field 'hidden_size'");
                cfg->n_blocks = 0; /* the top-level fields are the one block */
                cfg->blocks[0] = *rnnd_modelcfg_blocks(cfg, &one, &n);
                cfg->n_blocks = 1;
        } else {
                for (size_t i = 0; block_keys[i] != NULL; i++)
                        if (has(c->root, block_keys[i], NULL))
                                return field_error(c, block_keys[i],
                                                   "not allowed beside 'blocks' (give it in "
                                                   "each block)");
                if (has(c->root, "weights", "prefix"))
                        return field_error(c, "weights.prefix",
                                           "not allowed beside 'blocks' (give each block's "
                                           "weight prefix as its 'prefix')");
        }
        for (uint32_t k = 0; k < cfg->n_blocks; k++) {
                struct rnnd_block_config *b = &cfg->blocks[k];

                if (blocks != NULL)
                        snprintf(at, sizeof(at), "blocks[%" PRIu32 "].", k);
                else
                        at[0] = '\0';
                r = check_block(c, b, blocks != NULL ? json_array_get(blocks, k) : c->root, at);
                if (r < 0)
                        return r;
                b->input_size = k == 0 ? cfg->input_size
                                       : rnnd_modelcfg_block_dirs(b - 1) *
                                                 rnnd_modelcfg_block_out_size(b - 1);
                for (uint32_t j = 0; j < k; j++)
                        if (strcmp(cfg->blocks[j].prefix, b->prefix) == 0)
                                return field_error(c, at[0] != '\0' ? "blocks" : "weights.prefix",
                                                   "blocks[%" PRIu32 "] and blocks[%" PRIu32
                                                   "] have the same prefix \"%s\": each "
                                                   "block's weights need names of their own",
                                                   j, k, b->prefix);
        }
        if (blocks != NULL)
                top_from_block(cfg, &cfg->blocks[cfg->n_blocks - 1]);
        return 0;
}

/* The rules that span fields, on a config whose fields are each valid. */
static int check_cross(struct ctx *c, struct rnnd_model_config *cfg)
{
        static const char *const head_names[] = {"head_weight", "head_bias"};
        int r = check_blocks(c, cfg);

        if (r < 0)
                return r;
        if (cfg->embedding.present && cfg->input_size != cfg->embedding.dim)
                return field_error(c, "input_size",
                                   "must equal embedding.dim (%" PRIu32 "), got %" PRIu32,
                                   cfg->embedding.dim, cfg->input_size);
        if (has(c->root, "weights", "embedding") && !cfg->embedding.present)
                return field_error(c, "weights.embedding",
                                   "only allowed when the model has an embedding");
        for (size_t i = 0; i < 2; i++)
                if (has(c->root, "weights", head_names[i]) && !cfg->head.present)
                        return field_error(c, i == 0 ? "weights.head_weight" : "weights.head_bias",
                                           "only allowed when the model has a head");
        if (!plain_file_name(cfg->weights.file))
                return field_error(c, "weights.file",
                                   "must be a plain file name (no '/', not \".\" or \"..\"), "
                                   "got \"%.40s\"",
                                   cfg->weights.file);
        if (cfg->batching.max_batch_steps < cfg->max_sequence_length)
                return field_error(c, "batching.max_batch_steps",
                                   "must be at least max_sequence_length (%" PRIu32
                                   "), got %" PRIu64 ", or a full-length sequence could never run",
                                   cfg->max_sequence_length, cfg->batching.max_batch_steps);
        if (cfg->sequence.present && rnnd_modelcfg_has_bidirectional(cfg))
                return field_error(c, "sequence",
                                   "only for unidirectional models: a bidirectional layer's "
                                   "backward direction needs the whole sequence, which a chunk "
                                   "is not; remove the block, and send each sequence whole");
        if (cfg->batching.default_priority_level > cfg->batching.priority_levels)
                return field_error(c, "batching.default_priority_level",
                                   "must be at most priority_levels (%" PRIu32 "), got %" PRIu32,
                                   cfg->batching.priority_levels,
                                   cfg->batching.default_priority_level);
        return 0;
}

void rnnd_modelcfg_defaults(struct rnnd_model_config *cfg)
{
        *cfg = (struct rnnd_model_config){
                .cell = RNND_CELL_LSTM,
                .num_layers = 1,
                .gru_linear_before_reset = true,
                .weights =
                        {
                                .file = "model.safetensors",
                                .embedding = "embedding.weight",
                                .head_weight = "head.weight",
                                .head_bias = "head.bias",
                        },
                .precision = RNND_PREC_FP32,
                .max_sequence_length = 4096,
                .batching =
                        {
                                .max_batch_size = 64,
                                .max_queue_delay_us = 200,
                                .adaptive_delay = true, /* docs/DESIGN.md §6 */
                                .max_queue_size = 4096,
                                .queue_timeout_us = 0,
                                .max_batch_steps = 262144,
                                .priority_levels = 2,
                                .default_priority_level = 2,
                        },
                .n_instances = 1,
                .instances = {{.kind = RNND_INST_AUTO, .count = 1}},
                .sequence = {.idle_timeout_ms = 60000, .max_sequences = 10000},
                .version_policy = {.kind = RNND_VP_LATEST, .num_versions = 1},
        };
}

int rnnd_modelcfg_parse(const char *json, size_t len, const char *filename,
                        struct rnnd_model_config *ret, rnnd_error_t *reterr)
{
        struct ctx c = {.file = filename != NULL ? filename : "config.json", .err = reterr};
        struct rnnd_model_config cfg;
        json_error_t jerr;
        char got[64];
        int r;

        if (len > RNND_CFG_MAX_FILE_BYTES)
                return rnnd_error_set(reterr, RNND_ELIMIT,
                                      "%s: %zu bytes, more than the %u allowed", c.file, len,
                                      RNND_CFG_MAX_FILE_BYTES);
        c.root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
        if (c.root == NULL)
                return rnnd_error_set(reterr, RNND_EMODEL, "%s:%d:%d: invalid JSON: %s", c.file,
                                      jerr.line, jerr.column, jerr.text);
        if (!json_is_object(c.root)) {
                r = model_error(&c, "must be a JSON object, got %s",
                                rnnd_json_describe(c.root, got, sizeof(got)));
                goto out;
        }
        rnnd_modelcfg_defaults(&cfg);
        /* In table order, as the walk reports a missing field; check_blocks() the rest. */
        if (!has(c.root, "blocks", NULL) && !has(c.root, "cell", NULL)) {
                r = model_error(&c, "missing required field 'cell'");
                goto out;
        }
        r = walk(&c, c.root, "", top_fields, &cfg);
        if (r < 0)
                goto out;
        if (!has(c.root, "batching", "default_priority_level"))
                cfg.batching.default_priority_level = cfg.batching.priority_levels;
        r = check_cross(&c, &cfg);
        if (r < 0)
                goto out;
        *ret = cfg;
out:
        json_decref(c.root);
        return r;
}

/* names[i], or "unknown" past the end. */
static const char *name_of(const char *const *names, unsigned i)
{
        for (unsigned j = 0; names[j] != NULL; j++)
                if (j == i)
                        return names[j];
        return "unknown";
}

const char *rnnd_cell_name(rnnd_cell_t c)
{
        return name_of(cell_names, (unsigned)c);
}

const char *rnnd_act_name(rnnd_act_t a)
{
        return name_of(act_names, (unsigned)a);
}

const char *rnnd_head_apply_name(rnnd_head_apply_t a)
{
        return name_of(apply_names, (unsigned)a);
}

const char *rnnd_precision_name(rnnd_precision_t p)
{
        return name_of(precision_names, (unsigned)p);
}

const char *rnnd_instance_kind_name(rnnd_instance_kind_t k)
{
        return name_of(kind_names, (unsigned)k);
}

unsigned rnnd_cell_gates(rnnd_cell_t c)
{
        switch (c) {
        case RNND_CELL_LSTM:
                return 4;
        case RNND_CELL_GRU:
                return 3;
        case RNND_CELL_RNN_TANH:
        case RNND_CELL_RNN_RELU:
                return 1;
        }
        return 1;
}

unsigned rnnd_modelcfg_dirs(const struct rnnd_model_config *cfg)
{
        return cfg->bidirectional ? 2 : 1;
}

unsigned rnnd_modelcfg_out_size(const struct rnnd_model_config *cfg)
{
        return cfg->proj_size != 0 ? cfg->proj_size : cfg->hidden_size;
}

unsigned rnnd_modelcfg_block_dirs(const struct rnnd_block_config *b)
{
        return b->bidirectional ? 2 : 1;
}

unsigned rnnd_modelcfg_block_out_size(const struct rnnd_block_config *b)
{
        return b->proj_size != 0 ? b->proj_size : b->hidden_size;
}

const struct rnnd_block_config *rnnd_modelcfg_blocks(const struct rnnd_model_config *cfg,
                                                     struct rnnd_block_config *one, uint32_t *n)
{
        if (cfg->n_blocks > 1) {
                *n = cfg->n_blocks;
                return cfg->blocks;
        }
        *one = (struct rnnd_block_config){
                .cell = cfg->cell,
                .input_size = cfg->input_size,
                .hidden_size = cfg->hidden_size,
                .num_layers = cfg->num_layers,
                .bidirectional = cfg->bidirectional,
                .proj_size = cfg->proj_size,
                .gru_linear_before_reset = cfg->gru_linear_before_reset,
        };
        memcpy(one->prefix, cfg->weights.prefix, sizeof(one->prefix));
        *n = 1;
        return one;
}

void rnnd_modelcfg_state_size(const struct rnnd_model_config *cfg, size_t *h_floats,
                              size_t *c_floats)
{
        struct rnnd_block_config one;
        uint32_t n;
        const struct rnnd_block_config *bl = rnnd_modelcfg_blocks(cfg, &one, &n);

        *h_floats = *c_floats = 0;
        for (uint32_t k = 0; k < n; k++) {
                const size_t ld = (size_t)bl[k].num_layers * rnnd_modelcfg_block_dirs(&bl[k]);

                *h_floats += ld * rnnd_modelcfg_block_out_size(&bl[k]);
                if (bl[k].cell == RNND_CELL_LSTM)
                        *c_floats += ld * bl[k].hidden_size;
        }
}

bool rnnd_modelcfg_has_lstm(const struct rnnd_model_config *cfg)
{
        struct rnnd_block_config one;
        uint32_t n;
        const struct rnnd_block_config *bl = rnnd_modelcfg_blocks(cfg, &one, &n);

        for (uint32_t k = 0; k < n; k++)
                if (bl[k].cell == RNND_CELL_LSTM)
                        return true;
        return false;
}

bool rnnd_modelcfg_has_bidirectional(const struct rnnd_model_config *cfg)
{
        struct rnnd_block_config one;
        uint32_t n;
        const struct rnnd_block_config *bl = rnnd_modelcfg_blocks(cfg, &one, &n);

        for (uint32_t k = 0; k < n; k++)
                if (bl[k].bidirectional)
                        return true;
        return false;
}

void rnnd_modelcfg_block(const struct rnnd_model_config *cfg, unsigned k,
                         struct rnnd_model_config *ret)
{
        const struct rnnd_block_config *b = &cfg->blocks[k];

        *ret = *cfg;
        if (cfg->n_blocks <= 1)
                return;
        top_from_block(ret, b);
        ret->input_size = b->input_size;
        memcpy(ret->weights.prefix, b->prefix, sizeof(ret->weights.prefix));
        ret->n_blocks = 1;
        ret->blocks[0] = *b;
        if (k > 0)
                ret->embedding.present = false;
        if (k + 1 < cfg->n_blocks)
                ret->head.present = false;
}

/*
 * loadspec.h: what a load client reads (DESIGN.md §1: clients/, which alone
 * among the other folders may read JSON with jansson).
 *
 * A load spec says what clients/rnnd-load sends, how often, for how long, and
 * when a run fails.  One table of keys drives the command line (--key=value),
 * the JSON spec file ({"key": value, ...}) and --help, so the three cannot
 * disagree; a key may be spelled with '-' or '_'.  JSON values may be
 * strings, numbers or booleans and are read exactly as the same text given
 * on the command line would be.
 *
 * Also here, because they are parses of bytes from outside: the list of
 * lengths a length file holds, and the input tensor a model's KServe v2
 * metadata (GET /v2/models/{m}) declares.
 *
 * Errors are RNND_EINVAL with a message naming the key (or the file's line),
 * or RNND_ENOMEM.  Every function is pure and thread-safe on distinct
 * arguments.
 */
#ifndef RNND_CLIENTS_LOADSPEC_H
#define RNND_CLIENTS_LOADSPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "tensor.h"

#define RNND_LOAD_STR_MAX      256u       /* url, path, model, file names, incl. NUL */
#define RNND_LOAD_NAME_MAX     64u        /* a tensor name, incl. NUL */
#define RNND_LOAD_MAX_OUTPUTS  8u         /* outputs asked for, or listed by metadata */
#define RNND_LOAD_MAX_LENGTH   (1u << 20) /* longest sequence a spec may ask for */
#define RNND_LOAD_MAX_SEQS     65536u     /* sequences per request */
#define RNND_LOAD_MAX_STREAMS  65536u     /* --streams */
#define RNND_LOAD_MAX_INFLIGHT 65536u     /* concurrency */
#define RNND_LOAD_SPEC_BYTES   (1u << 20) /* a spec file */

typedef enum rnnd_load_mode {
        RNND_LOAD_CLOSED = 0, /* concurrency requests in flight, each sent when one returns */
        RNND_LOAD_OPEN,       /* sent on a schedule of rate per second */
} rnnd_load_mode_t;

typedef enum rnnd_load_arrival {
        RNND_ARRIVAL_FIXED = 0, /* every 1/rate seconds */
        RNND_ARRIVAL_POISSON,   /* exponential gaps of mean 1/rate */
} rnnd_load_arrival_t;

typedef enum rnnd_load_api {
        RNND_API_V2 = 0,  /* POST /v2/models/{m}[/versions/{v}]/infer */
        RNND_API_PREDICT, /* POST /v1/models/{m}[/versions/{v}]:predict (instances) */
        RNND_API_GET,     /* GET path (health checks, metadata) */
} rnnd_load_api_t;

typedef enum rnnd_load_format {
        RNND_TENSORS_JSON = 0, /* "data" lists */
        RNND_TENSORS_BINARY,   /* the binary tensor extension (v2 only) */
} rnnd_load_format_t;

typedef enum rnnd_load_lengths {
        RNND_LEN_FIXED = 0, /* len_min (= len_max) */
        RNND_LEN_UNIFORM,   /* len_min..len_max */
        RNND_LEN_FILE,      /* drawn uniformly from the lengths in len_file */
} rnnd_load_lengths_t;

/* One input tensor as KServe v2 metadata gives it: -1 for a variable dimension. */
struct rnnd_load_input {
        char name[RNND_LOAD_NAME_MAX]; /* "input" or "tokens" */
        rnnd_dtype_t dtype;            /* FP32 for input; INT64 or INT32 for tokens */
        unsigned ndim;                 /* 3 for input [B, T, features], 2 for tokens [B, T] */
        int64_t shape[RNND_MAX_DIMS];
};

/* What a model's metadata says a load client needs. */
struct rnnd_load_model {
        struct rnnd_load_input input;
        unsigned n_outputs;
        char outputs[RNND_LOAD_MAX_OUTPUTS][RNND_LOAD_NAME_MAX];
};

struct rnnd_loadspec {
        char url[RNND_LOAD_STR_MAX];      /* server base URL (http://127.0.0.1:8000) */
        rnnd_load_api_t api;              /* v2 */
        char model[RNND_LOAD_STR_MAX];    /* required unless api is get */
        char version[32];                 /* "" = the server's latest */
        char path[RNND_LOAD_STR_MAX];     /* api get: the path (/v2/health/ready) */
        rnnd_load_format_t format;        /* json */
        rnnd_load_mode_t mode;            /* closed */
        uint32_t concurrency;             /* closed: in flight; open: at most in flight (16) */
        double rate;                      /* open: requests per second (0 = unset) */
        rnnd_load_arrival_t arrival;      /* fixed */
        double warmup_s;                  /* 0 */
        double duration_s;                /* 10, unless requests is set */
        uint64_t requests;                /* 0 = run for duration_s */
        uint32_t sequences;               /* per request (1) */
        uint32_t streams;                 /* stateful sequences kept live (0 = none) */
        uint32_t chunk_length;            /* steps per chunk of a stream (8) */
        rnnd_load_lengths_t len_dist;     /* fixed 8 */
        uint32_t len_min, len_max;        /* 8, 8 */
        char len_file[RNND_LOAD_STR_MAX]; /* RNND_LEN_FILE: one length per line */
        uint64_t seed;                    /* 1 */
        uint64_t max_token;               /* token ids drawn in 0..max_token (0) */
        bool input_given;                 /* input set by the spec; else from metadata */
        struct rnnd_load_input input;
        unsigned n_outputs; /* 0 = scores if the model has a head, else h_n */
        char outputs[RNND_LOAD_MAX_OUTPUTS][RNND_LOAD_NAME_MAX];
        double max_error_rate; /* fail when errors / requests is above (0) */
        double timeout_s;      /* per request (30) */
        bool json;             /* report as JSON on stdout */
        bool progress;         /* live line on a terminal (true) */
};

/* One key of the table, for --help.  Borrowed, static. */
struct rnnd_loadspec_key {
        const char *name; /* with '-': "max-error-rate" */
        const char *arg;  /* "RATE", or NULL for a boolean */
        const char *help; /* one or more sentences */
};

/* Fills *s with the defaults above.  Thread-safe. */
void rnnd_loadspec_init(struct rnnd_loadspec *s);

/* How many keys the table has.  Thread-safe. */
size_t rnnd_loadspec_n_keys(void);

/* Key i of the table, in help order, or NULL past the end.  Borrowed, static.  Thread-safe. */
const struct rnnd_loadspec_key *rnnd_loadspec_key(size_t i);

/*
 * Writes into buf[n] the command-line text of key i's value in s ("10s",
 * "closed", "8"); "" for an unset or empty value, and for --input and
 * --outputs, whose defaults come from the model.  Thread-safe.
 */
void rnnd_loadspec_format(const struct rnnd_loadspec *s, size_t i, char *buf, size_t n);

/*
 * Sets key (with '-' or '_') to value, read as the command line would: a
 * boolean key takes NULL (true), "true" or "false".  Errors: RNND_EINVAL
 * naming the key (unknown, missing value, out of range); s is unchanged on
 * failure.  Thread-safe.
 */
int rnnd_loadspec_set(struct rnnd_loadspec *s, const char *key, const char *value,
                      rnnd_error_t *reterr);

/* Whether key names a boolean (takes no value on the command line).  Thread-safe. */
bool rnnd_loadspec_is_bool(const char *key);

/*
 * Applies a JSON spec text[0..len): an object whose keys are the table's.
 * Keys are applied in the text's order; on failure the message names the key
 * and s may hold the keys before it.  Errors: RNND_EINVAL, RNND_ENOMEM.
 * Thread-safe.
 */
int rnnd_loadspec_parse_json(struct rnnd_loadspec *s, const char *text, size_t len,
                             rnnd_error_t *reterr);

/*
 * Checks the rules across keys: a model unless api is get, a path with get,
 * a rate with open, binary with v2 only.  Errors: RNND_EINVAL.  Thread-safe.
 */
int rnnd_loadspec_check(const struct rnnd_loadspec *s, rnnd_error_t *reterr);

/*
 * Reads a lengths file text[0..len): positive integers up to
 * RNND_LOAD_MAX_LENGTH separated by white space or commas; '#' starts a
 * comment to the end of the line.  *ret is new (rnnd_free) with *n >= 1
 * entries.  Errors: RNND_EINVAL naming the line, RNND_ENOMEM; writes nothing
 * on failure.  Thread-safe.
 */
int rnnd_loadspec_lengths_parse(const char *text, size_t len, uint32_t **ret, size_t *n,
                                rnnd_error_t *reterr);

/*
 * Reads a model's KServe v2 metadata body[0..len) ({"inputs": [{"name",
 * "datatype", "shape"}], "outputs": [...]}) into *ret: the input named
 * "input" or "tokens", and the output names.  Errors: RNND_EINVAL when the
 * body is not such metadata or has neither input; writes nothing on failure.
 * Thread-safe.
 */
int rnnd_loadspec_model_parse(const char *body, size_t len, struct rnnd_load_model *ret,
                              rnnd_error_t *reterr);

#endif

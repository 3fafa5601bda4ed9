/*
 * infer.h: the inference wire formats (DESIGN.md §5).
 *
 * Requests come in as KServe v2 JSON (optionally with the binary tensor
 * extension) or as TF Serving :predict JSON (row "instances" or columnar
 * "inputs"); both parse into one native struct rnnd_infer_request.  Binding a
 * request to a model's config checks every tensor against the model and gives
 * the engine what it runs on (struct rnnd_infer_bound): B, T, per-sequence
 * lengths and float32 / int64 buffers.  The engine writes into zeroed output
 * tensors (struct rnnd_infer_outputs), which render back as KServe v2 or TF
 * Serving JSON (KServe: optionally binary).
 *
 *   parse -> request -> bind -> bound -> outputs_alloc -> outputs -> render
 *
 * Lifetimes: the request may borrow from the body; the bound borrows from the
 * request; the outputs own their data.  So keep body, request and bound alive,
 * in that order, until the engine is done with the bound.
 *
 * Errors are RNND_EINVAL with a message naming the field ("inputs[0].shape[1]:
 * ...", "input 'lengths'[2]: 9 is outside 1..5"), RNND_ELIMIT where a limit of
 * rnnd_infer_limits or of the model's config is passed (also HTTP 400), or
 * RNND_ENOMEM.  Every function here is pure: no globals, no locks, so every
 * one is thread-safe on distinct arguments, except rnnd_infer_global_init().
 */
#ifndef RNND_PROTO_INFER_H
#define RNND_PROTO_INFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "modelcfg.h"
#include "tensor.h"

#define RNND_INFER_MAX_TENSORS 8   /* inputs, and requested outputs, per request */
#define RNND_INFER_NAME_MAX    64  /* a tensor name, incl. NUL */
#define RNND_INFER_ID_MAX      129 /* id, string sequence_id, model name: 128 bytes + NUL */

/* Defaults of struct rnnd_infer_limits. */
#define RNND_INFER_DEFAULT_MAX_ELEMENTS (UINT64_C(1) << 24)
#define RNND_INFER_DEFAULT_MAX_DEPTH    32u
#define RNND_INFER_DEFAULT_MAX_TREE     (UINT64_C(64) << 20)

/* Which wire format a request came in, and so how to answer it. */
typedef enum rnnd_infer_format {
        RNND_FMT_KSERVE = 0,   /* KServe v2 / Open Inference Protocol */
        RNND_FMT_TFS_ROW,      /* TF Serving {"instances": [...]} */
        RNND_FMT_TFS_COLUMNAR, /* TF Serving {"inputs": ...} */
} rnnd_infer_format_t;

/* The model's outputs (DESIGN.md §5), in their canonical order. */
typedef enum rnnd_infer_output {
        RNND_OUT_OUTPUT = 0, /* "output" [B, T, dirs*H'] */
        RNND_OUT_H_N,        /* "h_n"    [B, L*dirs, H'] */
        RNND_OUT_C_N,        /* "c_n"    [B, L*dirs, H], LSTM only */
        RNND_OUT_SCORES,     /* "scores" [B, units] or [B, T, units], with a head */
        RNND_OUT_COUNT,
} rnnd_infer_output_t;

/*
 * What a parse may accept.  The body size is the daemon's limit; these bound
 * what the parse builds from it.  Both give HTTP 400 (RNND_ELIMIT).
 */
struct rnnd_infer_limits {
        uint64_t max_elements; /* per tensor, checked from the shape before allocating */
        unsigned max_depth;    /* JSON nesting ([ and {), checked before building a tree */
        uint64_t max_tree;     /* bytes of the JSON tree, estimated before building it */
};

/* One tensor: little-endian, row-major. */
struct rnnd_tensor {
        char name[RNND_INFER_NAME_MAX];
        rnnd_dtype_t dtype;
        unsigned ndim;                 /* 0..RNND_MAX_DIMS */
        uint64_t shape[RNND_MAX_DIMS]; /* the first ndim are used */
        uint64_t numel;                /* product of the shape */
        void *data;                    /* numel elements, aligned to the element size; NULL if 0 */
        size_t nbytes;                 /* numel * rnnd_dtype_size(dtype) */
        bool owned; /* data is ours (freed by _done); else borrowed from the body */
};

/*
 * Where a tensor's bytes are in a registered system shared memory region
 * (Triton's shared memory extension, docs/HTTP.md): the parameters
 * shared_memory_region, shared_memory_offset (0) and shared_memory_byte_size.
 * region[0] == '\0': the tensor is not in shared memory.
 */
#define RNND_SHM_NAME_MAX RNND_CFG_NAME_MAX /* a region's name, incl. NUL */
struct rnnd_shm_ref {
        char region[RNND_SHM_NAME_MAX];
        uint64_t offset;
        uint64_t byte_size;
};

/* An entry of a KServe request's "outputs" list. */
struct rnnd_requested_output {
        char name[RNND_INFER_NAME_MAX];
        bool binary;             /* parameters.binary_data, else the request's binary_data_output */
        struct rnnd_shm_ref shm; /* written to a region instead of the answer */
};

/* The request's "parameters" (the sequence and schedule-policy extensions). */
struct rnnd_infer_params {
        uint64_t sequence_id;                    /* 0 = none (or see sequence_id_str) */
        char sequence_id_str[RNND_INFER_ID_MAX]; /* "" = none; set when the id was a string */
        bool sequence_start;                     /* false */
        bool sequence_end;                       /* false */
        int64_t priority;                        /* 0 = the model's default */
        uint64_t timeout_us;                     /* 0 = none */
};

struct rnnd_infer_request {
        rnnd_infer_format_t format;
        bool has_id;                /* "id" was given (maybe as "") */
        char id[RNND_INFER_ID_MAX]; /* "" when not given */
        unsigned n_inputs;
        struct rnnd_tensor inputs[RNND_INFER_MAX_TENSORS];
        /*
         * inputs[i] read from a region: its data is allocated (owned) by the
         * parse and filled by the daemon, which holds the regions, before bind.
         */
        struct rnnd_shm_ref input_shm[RNND_INFER_MAX_TENSORS];
        bool outputs_given; /* an "outputs" list was given; empty means all */
        unsigned n_outputs;
        struct rnnd_requested_output outputs[RNND_INFER_MAX_TENSORS];
        bool binary_data_output; /* parameters.binary_data_output (false) */
        struct rnnd_infer_params params;
};

/*
 * A request checked against a model: what the engine runs.  Sequence b's
 * input is input + b * input_stride (the same for tokens, h0, c0); it is
 * padded past lengths[b] up to T.
 */
struct rnnd_infer_bound {
        rnnd_infer_format_t format;
        uint32_t B, T;         /* batch and longest sequence, both >= 1 */
        uint32_t *lengths;     /* [B], each 1..T; owned */
        const float *input;    /* [B, T, input_size], or NULL with an embedding */
        const int64_t *tokens; /* [B, T], each 0..num_embeddings-1, or NULL */
        const float *h0;       /* [B, L*dirs, H'], or NULL for zeros */
        const float *c0;       /* [B, L*dirs, H], or NULL for zeros (LSTM only) */
        size_t input_stride;   /* elements per sequence of each buffer above */
        size_t tokens_stride;
        size_t h0_stride;
        size_t c0_stride;
        unsigned n_out;                          /* outputs to answer with, 1..RNND_OUT_COUNT */
        rnnd_infer_output_t out[RNND_OUT_COUNT]; /* in response order */
        bool want[RNND_OUT_COUNT];               /* by kind */
        bool binary[RNND_OUT_COUNT];             /* by kind: render as binary (KServe only) */
        void *owned[5];                          /* private: buffers converted by bind */
};

/*
 * Output tensors, FP32, zeroed, owned.  The engine writes sequence b's part of
 * output kind k at by_kind[k] + b * stride[k]; padding stays 0.
 */
struct rnnd_infer_outputs {
        rnnd_infer_format_t format;
        uint32_t B, T;
        uint32_t *lengths; /* [B]; owned copy of the bound's */
        unsigned n;        /* tensors, in response order */
        struct rnnd_tensor t[RNND_OUT_COUNT];
        rnnd_infer_output_t kind[RNND_OUT_COUNT]; /* kind of t[i] */
        bool binary[RNND_OUT_COUNT];              /* of t[i] */
        float *by_kind[RNND_OUT_COUNT];           /* t[i].data by kind; NULL if not wanted */
        size_t stride[RNND_OUT_COUNT];            /* elements per sequence, by kind */
        /* t[i] went to this region (set by the daemon; borrowed from the request), or NULL. */
        const struct rnnd_shm_ref *shm[RNND_OUT_COUNT];
};

/* A parsed KServe v2 response (for clients and tests). */
struct rnnd_infer_response {
        char model_name[RNND_INFER_ID_MAX];
        char model_version[RNND_INFER_ID_MAX]; /* "" when absent */
        bool has_id;
        char id[RNND_INFER_ID_MAX];
        unsigned n_outputs;
        struct rnnd_tensor outputs[RNND_INFER_MAX_TENSORS];
};

/*
 * Seeds jansson's hash (json_object_seed(0)) and routes jansson's allocations
 * through rnnd_malloc, so that limits and failure injection cover them.  Call
 * once at startup, before any thread starts and before any other jansson use;
 * proto/ is the only place that can.  Not thread-safe.
 */
void rnnd_infer_global_init(void);

/* Fills *l with the defaults above.  Thread-safe. */
void rnnd_infer_limits_default(struct rnnd_infer_limits *l);

/* "output", "h_n", "c_n", "scores" (or "?").  Borrowed, static.  Thread-safe. */
const char *rnnd_infer_output_name(rnnd_infer_output_t k);

/*
 * Parses a KServe v2 infer request.  body[0..len) is the whole HTTP body;
 * json_len is the Inference-Header-Content-Length value, or len when the
 * header is absent: the JSON is body[0..json_len) and inputs with
 * parameters.binary_data_size take their bytes from body[json_len..len) in
 * input order, which they must use up exactly.  limits may be NULL (defaults).
 * Binary inputs that are aligned in the body borrow from it, so body must
 * outlive *ret; everything else in *ret is new.  On success fills *ret, which
 * the caller releases with rnnd_infer_request_done().  Errors: RNND_EINVAL,
 * RNND_ELIMIT (both HTTP 400), RNND_ENOMEM; never writes *ret on failure.
 * Thread-safe.
 */
int rnnd_kserve_parse(const void *body, size_t len, size_t json_len,
                      const struct rnnd_infer_limits *limits, struct rnnd_infer_request *ret,
                      rnnd_error_t *reterr);

/*
 * Parses a TF Serving REST :predict request: {"signature_name"?, "instances"}
 * (row format: each instance is one sequence with its own length, as a bare
 * nested list for the model's input/tokens or an object of input/tokens, h0,
 * c0; they are padded to the longest and a "lengths" tensor is added) or
 * {"signature_name"?, "inputs"} (columnar: an object of named tensors, or a
 * bare value for input/tokens).  TF Serving carries no dtypes: cfg decides them
 * ("tokens" and "lengths" INT64, the rest FP32) and whether a bare value is
 * "input" or "tokens".  signature_name, if given, must be "serving_default".
 * *ret is all new and borrows nothing; same contract as rnnd_kserve_parse().
 * Thread-safe.
 */
int rnnd_tfs_parse(const void *body, size_t len, const struct rnnd_model_config *cfg,
                   const struct rnnd_infer_limits *limits, struct rnnd_infer_request *ret,
                   rnnd_error_t *reterr);

/* Frees what a parse allocated in *req and zeroes it; accepts NULL.  Thread-safe. */
void rnnd_infer_request_done(struct rnnd_infer_request *req);

/*
 * Checks req against the model cfg (names, dtypes, shapes, B and T against
 * batching.max_batch_size and max_sequence_length, lengths, token ids, finite
 * floats, requested outputs) and fills *ret.  *ret borrows from req (FP32
 * and INT64 buffers are used in place), so req must outlive it; buffers it
 * converts (FP16 -> FP32, INT32 -> INT64, lengths) are new and freed by
 * rnnd_infer_bound_done().  Errors: RNND_EINVAL, RNND_ELIMIT (B or T over the
 * model's limits), RNND_ENOMEM, with a message naming the input or output;
 * never writes *ret on failure.  Thread-safe.
 */
int rnnd_infer_bind(const struct rnnd_infer_request *req, const struct rnnd_model_config *cfg,
                    struct rnnd_infer_bound *ret, rnnd_error_t *reterr);

/* Whether the request names a sequence (the sequence extension's parameters). */
bool rnnd_infer_is_sequence(const struct rnnd_infer_params *q);

/* Frees what bind allocated in *b and zeroes it; accepts NULL.  Thread-safe. */
void rnnd_infer_bound_done(struct rnnd_infer_bound *b);

/*
 * Fails with RNND_ELIMIT (HTTP 400), naming max_response_bytes, when the
 * outputs b wants could make a response longer than max_bytes (JSON
 * floats counted at their longest), before anything is allocated for them
 * (docs/HTTP.md "Limits").  Else *ret_held (may be NULL) is the most the
 * answer holds at once: that response and the FP32 tensors it is rendered
 * from (max_response_memory's count).  Thread-safe.
 */
int rnnd_infer_outputs_check(const struct rnnd_infer_bound *b, const struct rnnd_model_config *cfg,
                             uint64_t max_bytes, uint64_t *ret_held, rnnd_error_t *reterr);

/*
 * Allocates zeroed FP32 tensors for the outputs b wants, shaped for cfg (the
 * config b was bound with), into *ret (all new; release with
 * rnnd_infer_outputs_done()).  Errors: RNND_ENOMEM; never writes *ret on
 * failure.  Thread-safe.
 */
int rnnd_infer_outputs_alloc(const struct rnnd_infer_bound *b, const struct rnnd_model_config *cfg,
                             struct rnnd_infer_outputs *ret, rnnd_error_t *reterr);

/* Frees *o's tensors and zeroes it; accepts NULL.  Thread-safe. */
void rnnd_infer_outputs_done(struct rnnd_infer_outputs *o);

/*
 * Renders a KServe v2 response {"model_name" (non-NULL), "model_version" (omitted when
 * version is 0), "id" (omitted when NULL or ""), "outputs": [...]}.  JSON
 * outputs carry a flat "data" array (floats with 9 significant digits, which
 * round-trip float32; non-finite values as NaN / Infinity / -Infinity); binary
 * outputs carry parameters.binary_data_size and their raw little-endian bytes
 * follow the JSON in output order.  *body is new (rnnd_free), *body_len bytes
 * plus a NUL; *json_len is the JSON's length: when it is less than *body_len,
 * send it as Inference-Header-Content-Length (and application/octet-stream).
 * Errors: RNND_ENOMEM; writes nothing on failure.  Thread-safe.
 */
int rnnd_kserve_render(const char *model_name, uint64_t version, const char *id,
                       const struct rnnd_infer_outputs *o, char **body, size_t *body_len,
                       size_t *json_len, rnnd_error_t *reterr);

/*
 * Renders a TF Serving response for o->format: row format gives
 * {"predictions": [{"output": [len_i][dirs*H'], "h_n": ..., ...}, ...]}, each
 * instance cut to its own length; columnar gives {"outputs": {"output":
 * [B][T][..], ...}} with the padding.  Floats as in rnnd_kserve_render().
 * *body is new (rnnd_free), *len bytes plus a NUL.  Errors: RNND_ENOMEM;
 * writes nothing on failure.  Thread-safe.
 */
int rnnd_tfs_render(const struct rnnd_infer_outputs *o, char **body, size_t *len,
                    rnnd_error_t *reterr);

/*
 * Renders {"error": msg} (JSON-escaped; invalid UTF-8 becomes U+FFFD), or
 * rnnd_strerror(code) when msg is NULL or "".  *body is new (rnnd_free), *len
 * bytes plus a NUL.  Returns 0 or RNND_ENOMEM; writes nothing on failure.
 * Thread-safe.
 */
int rnnd_error_render(int code, const char *msg, char **body, size_t *len);

/*
 * Parses a KServe v2 response, as rnnd_kserve_render() writes it, for
 * clients: body, len and json_len as in rnnd_kserve_parse(), and the same
 * borrowing.  Release *ret with rnnd_infer_response_done().  Same errors;
 * never writes *ret on failure.  Thread-safe.
 */
int rnnd_kserve_parse_response(const void *body, size_t len, size_t json_len,
                               const struct rnnd_infer_limits *limits,
                               struct rnnd_infer_response *ret, rnnd_error_t *reterr);

/* Frees what rnnd_kserve_parse_response() allocated; accepts NULL.  Thread-safe. */
void rnnd_infer_response_done(struct rnnd_infer_response *r);

#endif

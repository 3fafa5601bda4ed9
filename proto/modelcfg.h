/*
 * modelcfg.h: a model's config.json, parsed and validated into native structs
 * (DESIGN.md §3).  Every field is checked; an unknown field is an error that
 * names it and the file.
 */
#ifndef RNND_PROTO_MODELCFG_H
#define RNND_PROTO_MODELCFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Limits on what a config.json may ask for (each bounds an allocation). */
#define RNND_CFG_MAX_SIZE            65536u /* input_size, hidden_size, proj_size, embedding dim */
#define RNND_CFG_MAX_LAYERS          64u
#define RNND_CFG_MAX_EMBEDDINGS      (1u << 24)
#define RNND_CFG_MAX_UNITS           65536u
#define RNND_CFG_MAX_SEQ_LEN         (1u << 20)
#define RNND_CFG_MAX_PRIORITY_LEVELS 8
#define RNND_CFG_MAX_BATCH           65536u
#define RNND_CFG_MAX_INSTANCE_GROUPS 8u
#define RNND_CFG_MAX_INSTANCE_COUNT  256u
#define RNND_CFG_MAX_GPUS            16u
#define RNND_CFG_MAX_VERSIONS        64u
#define RNND_CFG_MAX_FILE_BYTES      (1u << 20) /* config.json itself */
#define RNND_CFG_NAME_MAX            128u       /* tensor names, prefix, file name, incl. NUL */
#define RNND_CFG_MAX_BLOCKS          16u        /* recurrent blocks in a chain */

typedef enum rnnd_cell {
        RNND_CELL_LSTM = 0,
        RNND_CELL_GRU,
        RNND_CELL_RNN_TANH,
        RNND_CELL_RNN_RELU,
} rnnd_cell_t;

typedef enum rnnd_act {
        RNND_ACT_NONE = 0,
        RNND_ACT_SIGMOID,
        RNND_ACT_TANH,
        RNND_ACT_RELU,
        RNND_ACT_SOFTMAX,
} rnnd_act_t;

typedef enum rnnd_head_apply {
        RNND_HEAD_LAST = 0,
        RNND_HEAD_ALL,
} rnnd_head_apply_t;

typedef enum rnnd_precision {
        RNND_PREC_FP32 = 0,
        RNND_PREC_FP16,
} rnnd_precision_t;

typedef enum rnnd_instance_kind {
        RNND_INST_AUTO = 0,
        RNND_INST_GPU,
        RNND_INST_CPU,
} rnnd_instance_kind_t;

typedef enum rnnd_version_policy_kind {
        RNND_VP_LATEST = 0,
        RNND_VP_ALL,
        RNND_VP_SPECIFIC,
} rnnd_version_policy_kind_t;

struct rnnd_instance_group {
        rnnd_instance_kind_t kind;
        uint32_t count;                   /* instances (per GPU for gpu); 1 */
        bool count_set;                   /* count was given (placement's default differs) */
        uint32_t n_gpus;                  /* 0 = every visible GPU */
        uint32_t gpus[RNND_CFG_MAX_GPUS]; /* device ordinals */
};

/*
 * One block of a chain of recurrent layers (DESIGN.md §3): layers of one
 * cell, size and direction count, as one nn.LSTM/nn.GRU/nn.RNN, its weights
 * under its own prefix.
 */
struct rnnd_block_config {
        rnnd_cell_t cell;
        uint32_t input_size; /* derived: the chain's input, or the output of the block before */
        uint32_t hidden_size;
        uint32_t num_layers;          /* 1 */
        bool bidirectional;           /* false */
        uint32_t proj_size;           /* LSTM only; 0 = none */
        bool gru_linear_before_reset; /* true */
        char prefix[RNND_CFG_NAME_MAX];
};

struct rnnd_model_config {
        /*
         * The recurrent layers: cell to gru_linear_before_reset describe one
         * block (a config without "blocks"), or, for a chain, its last block,
         * whose output is the model's y and the head's input.  input_size is
         * the model's input either way.  blocks[] holds every block, input
         * first; a config without "blocks" is blocks[0] alone, with
         * weights.prefix as its prefix.  A config made in code may set the
         * top-level fields alone: read the blocks through
         * rnnd_modelcfg_blocks().
         */
        rnnd_cell_t cell;
        uint32_t input_size;          /* required; equals embedding.dim with an embedding */
        uint32_t hidden_size;         /* required */
        uint32_t num_layers;          /* 1 */
        bool bidirectional;           /* false */
        uint32_t proj_size;           /* LSTM only; 0 = none, else < hidden_size */
        bool gru_linear_before_reset; /* true; false is CPU only */
        uint32_t n_blocks;            /* 1..RNND_CFG_MAX_BLOCKS; 0 or 1: the fields above */
        struct rnnd_block_config blocks[RNND_CFG_MAX_BLOCKS];

        struct {
                bool present;
                uint32_t num_embeddings;
                uint32_t dim;
        } embedding;

        struct {
                bool present;
                uint32_t units;
                rnnd_act_t activation;   /* none */
                rnnd_head_apply_t apply; /* last */
        } head;

        struct {
                char file[RNND_CFG_NAME_MAX];        /* "model.safetensors"; a plain name */
                char prefix[RNND_CFG_NAME_MAX];      /* "" */
                char embedding[RNND_CFG_NAME_MAX];   /* "embedding.weight" */
                char head_weight[RNND_CFG_NAME_MAX]; /* "head.weight" */
                char head_bias[RNND_CFG_NAME_MAX];   /* "head.bias" */
        } weights;

        rnnd_precision_t precision;   /* fp32 */
        uint32_t max_sequence_length; /* 4096 */

        struct {
                uint32_t max_batch_size;         /* 64 */
                uint32_t max_queue_delay_us;     /* 200 */
                uint32_t max_queue_size;         /* 4096 sequences */
                uint32_t queue_timeout_us;       /* 0 = none */
                uint64_t max_batch_steps;        /* 262144 = B x longest */
                uint32_t priority_levels;        /* 2; a request's priority 1 is the highest */
                uint32_t default_priority_level; /* priority_levels: for priority 0 */
                bool adaptive_delay; /* default true; false: the oldest waits out the delay
                                        (DESIGN.md §6) */
        } batching;

        uint32_t n_instances;                                               /* 1 */
        struct rnnd_instance_group instances[RNND_CFG_MAX_INSTANCE_GROUPS]; /* [{auto}] */

        struct {
                bool present;             /* the block is there: the model serves sequences */
                uint32_t idle_timeout_ms; /* 60000 */
                uint32_t max_sequences;   /* 10000 */
        } sequence;

        struct {
                rnnd_version_policy_kind_t kind; /* latest */
                uint32_t num_versions;           /* latest: 1 */
                uint32_t n_versions;             /* specific: how many */
                uint64_t versions[RNND_CFG_MAX_VERSIONS];
        } version_policy;
};

/* Fills *cfg with every default; the required fields are left 0.  Thread-safe. */
void rnnd_modelcfg_defaults(struct rnnd_model_config *cfg);

/*
 * Parses and validates the config.json text json[0..len) into *ret.  filename
 * is only used in messages ("models/x/config.json: field 'head.units': ...").
 * Every field is checked for type and range, unknown fields are rejected, and
 * cross-field rules are enforced (proj_size only on LSTM and < hidden_size;
 * input_size == embedding.dim; gru_linear_before_reset only on GRU; ...).
 * Returns 0, or RNND_EMODEL (RNND_ELIMIT for an oversized text) with a message
 * naming the field and the file.  Never writes *ret on failure.  Thread-safe.
 */
int rnnd_modelcfg_parse(const char *json, size_t len, const char *filename,
                        struct rnnd_model_config *ret, rnnd_error_t *reterr);

/* Names for the enums, as config.json spells them.  Borrowed, static. */
const char *rnnd_cell_name(rnnd_cell_t c);
const char *rnnd_act_name(rnnd_act_t a);
const char *rnnd_head_apply_name(rnnd_head_apply_t a);
const char *rnnd_precision_name(rnnd_precision_t p);
const char *rnnd_instance_kind_name(rnnd_instance_kind_t k);

/*
 * Derived shapes.  Gates per cell (4, 3, 1, 1), directions (1, 2), and H'
 * (proj or hidden), of the model's last block: those of its y.
 */
unsigned rnnd_cell_gates(rnnd_cell_t c);
unsigned rnnd_modelcfg_dirs(const struct rnnd_model_config *cfg);
unsigned rnnd_modelcfg_out_size(const struct rnnd_model_config *cfg);

/* The same of one block. */
unsigned rnnd_modelcfg_block_dirs(const struct rnnd_block_config *b);
unsigned rnnd_modelcfg_block_out_size(const struct rnnd_block_config *b);

/*
 * The model's blocks and their count: cfg->blocks for a chain; for one
 * block, *one filled from the top-level fields (which a config built in
 * code sets without blocks[]).  Thread-safe.
 */
const struct rnnd_block_config *rnnd_modelcfg_blocks(const struct rnnd_model_config *cfg,
                                                     struct rnnd_block_config *one, uint32_t *n);

/*
 * The recurrent state of one sequence (DESIGN.md §4): h holds every layer
 * and direction of every block, block by block, each [num_layers * dirs,
 * H'] row-major; c the same of the LSTM blocks only, [num_layers * dirs,
 * H].  *h_floats and *c_floats are their sizes (c 0 without an LSTM block).
 */
void rnnd_modelcfg_state_size(const struct rnnd_model_config *cfg, size_t *h_floats,
                              size_t *c_floats);

/* Whether any block is an LSTM (the model has c0/c_n), or bidirectional. */
bool rnnd_modelcfg_has_lstm(const struct rnnd_model_config *cfg);
bool rnnd_modelcfg_has_bidirectional(const struct rnnd_model_config *cfg);

/*
 * The config of block k alone, as a model of its own: its cell and sizes,
 * its input size, its prefix as weights.prefix, the embedding only for
 * block 0 and the head only for the last; the rest as cfg.  Thread-safe.
 */
void rnnd_modelcfg_block(const struct rnnd_model_config *cfg, unsigned k,
                         struct rnnd_model_config *ret);

#endif

/*
 * backend.h: the ops table every compute backend implements (DESIGN.md §7),
 * and the batch it runs.
 *
 * A batch is a list of sequences, each with its own length and its own input
 * and output buffers, so that sequences from different requests run together
 * without a gather.  Layouts are row-major and batch-first per sequence:
 *   x       [len, input_size]            float32 (or tokens [len] int64)
 *   h0, h_n [num_layers * dirs, H']      index layer * dirs + dir
 *   c0, c_n [num_layers * dirs, H]       LSTM only
 * (a chain: every block's, block by block; c of its LSTM blocks only:
 * rnnd_modelcfg_state_size())
 *   y       [len, dirs * H']             top layer, both directions
 *   scores  [units] (head apply last) or [len, units] (apply all)
 * The backend writes only the first len steps of y and scores; the caller
 * zeroes padding it exposes.  Any output pointer may be NULL (not wanted).
 */
#ifndef RNND_ENGINE_BACKEND_H
#define RNND_ENGINE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "model.h"

struct rnnd_seq {
        uint32_t len;          /* 1..max_sequence_length */
        const float *x;        /* input, or NULL when the model has an embedding */
        const int64_t *tokens; /* token ids, in range; with an embedding */
        const float *h0;       /* or NULL for zeros */
        const float *c0;       /* or NULL for zeros */
        float *y;              /* outputs, each NULL when not wanted */
        float *h_n;
        float *c_n;
        float *scores;
};

struct rnnd_batch {
        struct rnnd_seq *seqs; /* borrowed by run() until it returns */
        uint32_t n;            /* 1..max_batch_size */
};

/*
 * What every backend needs of a batch for m: a sequence at least, each of
 * 1..max_sequence_length steps, with its input (tokens within the embedding
 * for a model with one).  Returns 0 with the sum and the longest of the
 * lengths, or RNND_EINVAL naming the first bad sequence.
 */
int rnnd_batch_check(const rnnd_model_t *m, const struct rnnd_batch *b, uint64_t *steps,
                     uint32_t *longest, rnnd_error_t *reterr);

struct rnnd_backend_desc {
        char backend[16];  /* "cpu", "cudnn" */
        char device[64];   /* "cpu", "GPU 0 (NVIDIA H100 ...)" */
        char algo[256];    /* "packed-gemm", "fused-lstm-step (AVX2)", "STANDARD", a chain's each */
        char math[32];     /* "fp32", "FMA", "TENSOR_OP" */
        char versions[96]; /* library versions */
        char why_not_cudnn[256]; /* "" when on cuDNN */
        char threading[384];     /* CPU: how batches use the plan's threads, by size; or "" */
};

/*
 * Appends "SEP TEXT" (no SEP when buf is empty) to a description field of cap
 * bytes; a text that does not fit ends the field with "..." instead.
 */
void rnnd_backend_desc_append(char *buf, size_t cap, const char *sep, const char *text);

struct rnnd_instance_opts {
        int device;       /* GPU ordinal, or -1 for the CPU */
        unsigned threads; /* CPU: BLAS threads for this instance (0 = library default) */
};

struct rnnd_backend_ops {
        const char *name;

        /*
         * Builds a plan for model m on one instance, kept for the instance's
         * life.  The plan takes a reference on m.  Returns 0 and *ret, or a
         * negative RNND_E*.  Called on the instance's worker thread.
         */
        int (*open)(rnnd_model_t *m, const struct rnnd_instance_opts *opts, void **ret,
                    rnnd_error_t *reterr);

        /*
         * Runs batch b (valid: lengths in range, tokens in range, at most
         * max_batch_size sequences and max_batch_steps B x longest).  Reads the
         * inputs and writes the outputs of every sequence before returning.
         * Worker thread only; one call at a time per plan.  Returns 0, or
         * a negative RNND_E* that fails the batch's requests; RNND_EDEVLOST
         * means the plan can run nothing more (its device failed): the pool
         * takes the instance out of service and gives the batch to another.
         */
        int (*run)(void *plan, const struct rnnd_batch *b, rnnd_error_t *reterr);

        /* Frees the plan and drops its model reference.  Accepts NULL. */
        void (*close)(void *plan);

        /* Describes the plan (which engine, device, algorithm, and why). */
        void (*describe)(const void *plan, struct rnnd_backend_desc *ret);

        /*
         * Optional (NULL: every model): whether this backend computes model
         * config cfg exactly and within its argument types; false with a
         * reason naming the config field in why[0..cap) when not.  Pure;
         * thread-safe.  Placement asks it; the backend's open() refuses what
         * it refuses.
         */
        bool (*qualifies)(const struct rnnd_model_config *cfg, char *why, size_t cap);
};

/* The CPU engine (engine/cpu/). */
extern const struct rnnd_backend_ops rnnd_cpu_backend;

#endif

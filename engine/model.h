/*
 * model.h: a loaded model version: its config and its weights in rnnd's one
 * canonical layout, which every backend reads.
 *
 * The canonical layout is PyTorch's, which is also cuDNN's gate order:
 * for layer l and direction d (index l * dirs + d),
 *   w_ih [G*H, in_l]   gates i,f,g,o (LSTM), r,z,n (GRU), one (RNN)
 *   w_hh [G*H, H']     H' = proj_size if set, else H
 *   b_ih [G*H], b_hh [G*H]   zeros when the model has no bias
 *   w_hr [H', H]       LSTM projection only
 * where in_0 = input_size and in_l = dirs * H' above.  Row-major float32.
 * The embedding is [num_embeddings, dim]; the head is w [units, dirs * H'],
 * b [units].  A GRU with gru_linear_before_reset = false keeps the same
 * layout; its n gate applies R_n to (r * h) (DESIGN.md §4).
 *
 * A chain of blocks (config "blocks", DESIGN.md §3) holds every block's
 * layers in layers[], block by block, each block's in_0 the output width of
 * the one before; and each block as a model of its own in blocks[k], a view
 * that shares the chain's weights (the embedding in block 0, the head in the
 * last), so that a backend runs a chain as its blocks one after another.
 */
#ifndef RNND_ENGINE_MODEL_H
#define RNND_ENGINE_MODEL_H

#include <stdatomic.h>
#include <stdint.h>

#include "error.h"
#include "modelcfg.h"

struct rnnd_layer_weights {
        const float *w_ih; /* [G*H, in] */
        const float *w_hh; /* [G*H, H'] */
        const float *b_ih; /* [G*H] */
        const float *b_hh; /* [G*H] */
        const float *w_hr; /* [H', H] or NULL */
        uint32_t in;       /* input width of this layer */
};

typedef struct rnnd_model {
        struct rnnd_model_config cfg;      /* immutable after load */
        char name[RNND_CFG_NAME_MAX];      /* immutable after load */
        uint64_t version;                  /* immutable after load */
        unsigned gates;                    /* G: 4, 3 or 1; immutable */
        unsigned dirs;                     /* 1 or 2; immutable */
        unsigned out_size;                 /* H'; immutable */
        struct rnnd_layer_weights *layers; /* [num_layers * dirs]; immutable */
        const float *embedding;            /* [num_embeddings, dim] or NULL; immutable */
        const float *head_w;               /* [units, dirs * H'] or NULL; immutable */
        const float *head_b;               /* [units] or NULL; immutable */
        float *wbuf;                       /* owns every weight above (a view: its chain's) */
        size_t wlen;                       /* floats in wbuf */
        atomic_int refs;                   /* atomic */
        uint32_t n_blocks;                 /* 1, or the chain's blocks; immutable */
        struct rnnd_model **blocks;        /* [n_blocks] views, a chain only; immutable */
        const struct rnnd_model *chain;    /* a view: its chain, which owns its weights */
} rnnd_model_t;

/*
 * Reads <model_dir>/<version>/<cfg->weights.file>, checks every tensor the
 * config needs (name, dtype, shape) and converts them once into the canonical
 * layout.  name is the model's name.  On success *ret is a new reference.
 * Errors: RNND_EIO, RNND_EMODEL (the message names the file and the tensor),
 * RNND_ENOMEM.  Never writes *ret on failure.  Thread-safe.
 */
int rnnd_model_load(const char *model_dir, const char *name, uint64_t version,
                    const struct rnnd_model_config *cfg, rnnd_model_t **ret, rnnd_error_t *reterr);

/*
 * Builds a model from an open safetensors file, reading the tensors under the
 * config's weight names.  Used by rnnd_model_load() and by tests that keep
 * weights and data in one file.  Same contract as rnnd_model_load().
 */
struct rnnd_stfile;
int rnnd_model_from_stfile(const struct rnnd_stfile *f, const char *name, uint64_t version,
                           const struct rnnd_model_config *cfg, rnnd_model_t **ret,
                           rnnd_error_t *reterr);

/* Takes a reference.  Thread-safe. */
rnnd_model_t *rnnd_model_ref(rnnd_model_t *m);

/* Drops a reference, freeing the model with the last; accepts NULL; returns NULL.  Thread-safe. */
rnnd_model_t *rnnd_model_unref(rnnd_model_t *m);

#endif

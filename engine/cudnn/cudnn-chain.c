/*
 * cudnn-chain.c: the cuDNN backend's ops table, and a chain of blocks
 * (config "blocks", DESIGN.md §3) on one GPU.  A model of one block is one
 * plan (cudnn.c); a chain is a plan per block, each over the block's view
 * of the model, so that each block is one cuDNN RNN descriptor, as Keras
 * and TensorFlow run such a model on a GPU.  The plans of a block on one GPU share its weights and
 * its algorithm choice as any model's do (cudnn-cache.c, keyed by the view).
 *
 * A batch runs block by block.  Block k's plan stages only what is its own
 * (lengths, indexes, its part of each sequence's h0/c0), copies block k -
 * 1's y, still on the device in cuDNN's [T, n, D*H'] layout, into its x of
 * the same layout, and brings back only its part of the states; the last
 * block brings back y and the head's scores.  So activations never leave
 * the GPU between blocks.  Each block's run ends synchronized on its own
 * stream (it copies its states back), so the next block reads a finished y.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "cudnn/cudnn-int.h"
#include "cudnn/cudnn.h"

struct chain {
        uint32_t n;            /* blocks; immutable */
        struct plan **plans;   /* [n]: plans[0] is the plan holding this; immutable */
        size_t *h_off, *c_off; /* [n] each block's floats into h and c states; immutable */
        struct rnnd_seq *seqs; /* [max_batch_size] a block's batch; worker thread only */
};

bool rnnd__cudnn_chain_qualifies(const struct rnnd_model_config *cfg, char *why, size_t cap)
{
        struct rnnd_model_config b;
        char inner[224];

        for (uint32_t k = 0; k < cfg->n_blocks; k++) {
                rnnd_modelcfg_block(cfg, k, &b);
                if (!rnnd__cudnn_plan_qualifies(&b, inner, sizeof(inner))) {
                        snprintf(why, cap, "blocks[%u]: %s", (unsigned)k, inner);
                        return false;
                }
        }
        if (cap > 0)
                why[0] = '\0';
        return true;
}

static void chain_free(struct chain *c)
{
        if (c == NULL)
                return;
        for (uint32_t k = 1; c->plans != NULL && k < c->n; k++)
                rnnd__cudnn_plan_close(c->plans[k]);
        rnnd_free(c->plans);
        rnnd_free(c->h_off);
        rnnd_free(c->c_off);
        rnnd_free(c->seqs);
        rnnd_free(c);
}

void rnnd__cudnn_chain_close(struct plan *p)
{
        if (p == NULL)
                return;
        chain_free(p->chain);
        p->chain = NULL;
        rnnd__cudnn_plan_close(p);
}

int rnnd__cudnn_chain_open(rnnd_model_t *m, const struct rnnd_instance_opts *opts,
                           struct plan **ret, rnnd_error_t *reterr)
{
        struct chain *c = rnnd_calloc(1, sizeof(*c));
        size_t h = 0, cs = 0;
        int r = 0;

        if (c == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a cuDNN chain");
        c->n = m->n_blocks;
        c->plans = rnnd_calloc(c->n, sizeof(*c->plans));
        c->h_off = rnnd_calloc(c->n, sizeof(*c->h_off));
        c->c_off = rnnd_calloc(c->n, sizeof(*c->c_off));
        c->seqs = rnnd_calloc(m->cfg.batching.max_batch_size, sizeof(*c->seqs));
        if (c->plans == NULL || c->h_off == NULL || c->c_off == NULL || c->seqs == NULL) {
                chain_free(c);
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a cuDNN chain");
        }
        for (uint32_t k = 0; k < c->n; k++) {
                const rnnd_model_t *b = m->blocks[k];
                const size_t ld = (size_t)b->cfg.num_layers * b->dirs;

                r = rnnd__cudnn_plan_open(m->blocks[k], opts, &c->plans[k], reterr);
                if (r < 0) {
                        rnnd_error_prefix(reterr, "blocks[%u]", (unsigned)k);
                        break;
                }
                c->h_off[k] = h;
                c->c_off[k] = cs;
                h += ld * b->out_size;
                cs += b->cfg.cell == RNND_CELL_LSTM ? ld * b->cfg.hidden_size : 0;
        }
        if (r < 0) {
                rnnd__cudnn_plan_close(c->plans[0]);
                chain_free(c);
                return r;
        }
        c->plans[0]->chain = c;
        *ret = c->plans[0];
        return 0;
}

/*
 * The batch block k runs: each sequence's length and its part of the
 * states; x the request's for block 0 (block k > 0 reads the block before's
 * y on the device); y and scores the request's for the last block only.
 */
static void block_batch(const struct chain *c, const struct rnnd_batch *b, uint32_t k)
{
        const bool last = k + 1 == c->n;
        const bool lstm = c->plans[k]->m->cfg.cell == RNND_CELL_LSTM;

        for (uint32_t i = 0; i < b->n; i++) {
                const struct rnnd_seq *q = &b->seqs[i];

                c->seqs[i] = (struct rnnd_seq){
                        .len = q->len,
                        .x = k == 0 ? q->x : NULL,
                        .tokens = k == 0 ? q->tokens : NULL,
                        .h0 = q->h0 != NULL ? q->h0 + c->h_off[k] : NULL,
                        .c0 = q->c0 != NULL && lstm ? q->c0 + c->c_off[k] : NULL,
                        .y = last ? q->y : NULL,
                        .h_n = q->h_n != NULL ? q->h_n + c->h_off[k] : NULL,
                        .c_n = q->c_n != NULL && lstm ? q->c_n + c->c_off[k] : NULL,
                        .scores = last ? q->scores : NULL,
                };
        }
}

int rnnd__cudnn_chain_run(struct plan *p, const struct rnnd_batch *b, rnnd_error_t *reterr)
{
        struct chain *c = p->chain;
        int r = 0;

        if (b->n > p->max_n) /* seqs holds a batch the plans take */
                return rnnd_error_set(reterr, RNND_EINVAL, "batch of %u sequences > max %u", b->n,
                                      p->max_n);
        for (uint32_t k = 0; r == 0 && k < c->n; k++) {
                const struct rnnd_batch kb = {c->seqs, b->n};

                block_batch(c, b, k);
                r = rnnd__cudnn_plan_run(c->plans[k], &kb, k > 0 ? c->plans[k - 1] : NULL, reterr);
                if (r < 0 && c->n > 1)
                        rnnd_error_prefix(reterr, "blocks[%u]", (unsigned)k);
        }
        return r;
}

/* The first block's words, with every block's algorithm in algo. */
void rnnd__cudnn_chain_describe(const struct plan *p, struct rnnd_backend_desc *d)
{
        const struct chain *c = p->chain;
        struct rnnd_backend_desc bd;

        rnnd__cudnn_plan_describe(p, d);
        d->algo[0] = '\0';
        for (uint32_t k = 0; k < c->n; k++) {
                rnnd__cudnn_plan_describe(c->plans[k], &bd);
                rnnd_backend_desc_append(d->algo, sizeof(d->algo), ", ", bd.algo);
        }
}

/* The ops: a plan of one block, or a chain's first block holding the others. */

static int cudnn_open(rnnd_model_t *m, const struct rnnd_instance_opts *opts, void **ret,
                      rnnd_error_t *reterr)
{
        return m->n_blocks > 1 ? rnnd__cudnn_chain_open(m, opts, (struct plan **)ret, reterr)
                               : rnnd__cudnn_plan_open(m, opts, (struct plan **)ret, reterr);
}

static int cudnn_run(void *plan, const struct rnnd_batch *b, rnnd_error_t *reterr)
{
        struct plan *p = plan;

        return p->chain != NULL ? rnnd__cudnn_chain_run(p, b, reterr)
                                : rnnd__cudnn_plan_run(p, b, NULL, reterr);
}

static void cudnn_close(void *plan)
{
        struct plan *p = plan;

        if (p != NULL && p->chain != NULL)
                rnnd__cudnn_chain_close(p);
        else
                rnnd__cudnn_plan_close(p);
}

static void cudnn_describe(const void *plan, struct rnnd_backend_desc *d)
{
        const struct plan *p = plan;

        if (p != NULL && p->chain != NULL)
                rnnd__cudnn_chain_describe(p, d);
        else
                rnnd__cudnn_plan_describe(p, d);
}

static bool cudnn_qualifies(const struct rnnd_model_config *cfg, char *why, size_t cap)
{
        return cfg->n_blocks > 1 ? rnnd__cudnn_chain_qualifies(cfg, why, cap)
                                 : rnnd__cudnn_plan_qualifies(cfg, why, cap);
}

const struct rnnd_backend_ops rnnd_cudnn_backend = {
        .name = "cudnn",
        .open = cudnn_open,
        .run = cudnn_run,
        .close = cudnn_close,
        .describe = cudnn_describe,
        .qualifies = cudnn_qualifies,
};

/*
 * chain.c: the CPU engine's ops table (rnnd_cpu_backend).  A model of one
 * block runs on the block engine of cpu.c as it is; a chain of blocks
 * (config "blocks", DESIGN.md §3) runs its blocks one after another, each on
 * a plan of its own over the block's view of the model (model.h), block k's
 * y the input of block k + 1.
 *
 * Each sequence keeps its own buffers through the chain, as a request's
 * do: an intermediate block writes its y into the plan's scratch (the
 * sequences one after another, lengths as they are), which the next block
 * reads as its x.  The state tensors h0, c0, h_n and c_n hold every block's
 * state, block by block (modelcfg.h); each block reads and writes its own
 * part of them.  So a chain costs its blocks run alone and nothing more but
 * the copy of no data: the intermediate y is the block's own output buffer.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "cpu/cpu-int.h"

struct chain_plan {
        rnnd_model_t *m;       /* a reference; immutable after open */
        uint32_t n;            /* blocks; immutable */
        void **plans;          /* [n] block plans; immutable after open */
        size_t *h_off, *c_off; /* [n] each block's floats into h and c states; immutable */
        struct rnnd_seq *seqs; /* [cap] the batch one block runs; worker thread only */
        size_t cap;
        float *y[2]; /* intermediate outputs, ping-pong; worker thread only */
        size_t ycap[2];
};

static void chain_close(void *plan);

/* Block k's model: the chain's view of it, or the model itself. */
static rnnd_model_t *block_model(const struct chain_plan *p, uint32_t k)
{
        return p->m->n_blocks > 1 ? p->m->blocks[k] : p->m;
}

static int chain_open(rnnd_model_t *m, const struct rnnd_instance_opts *opts, void **ret,
                      rnnd_error_t *reterr)
{
        struct chain_plan *p = rnnd_calloc(1, sizeof(*p));
        size_t h = 0, c = 0;
        int r;

        if (p == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a CPU plan");
        p->m = rnnd_model_ref(m);
        p->n = m->n_blocks > 1 ? m->n_blocks : 1;
        p->plans = rnnd_calloc(p->n, sizeof(*p->plans));
        p->h_off = rnnd_calloc(p->n, sizeof(*p->h_off));
        p->c_off = rnnd_calloc(p->n, sizeof(*p->c_off));
        if (p->plans == NULL || p->h_off == NULL || p->c_off == NULL) {
                chain_close(p);
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a CPU plan");
        }
        for (uint32_t k = 0; k < p->n; k++) {
                const rnnd_model_t *b = block_model(p, k);
                const size_t ld = (size_t)b->cfg.num_layers * b->dirs;

                r = rnnd__cpu_block_backend.open(block_model(p, k), opts, &p->plans[k], reterr);
                if (r < 0) {
                        if (p->n > 1)
                                rnnd_error_prefix(reterr, "blocks[%u]", (unsigned)k);
                        chain_close(p);
                        return r;
                }
                p->h_off[k] = h;
                p->c_off[k] = c;
                h += ld * b->out_size;
                c += b->cfg.cell == RNND_CELL_LSTM ? ld * b->cfg.hidden_size : 0;
        }
        *ret = p;
        return 0;
}

static void chain_close(void *plan)
{
        struct chain_plan *p = plan;

        if (p == NULL)
                return;
        for (uint32_t k = 0; p->plans != NULL && k < p->n; k++)
                rnnd__cpu_block_backend.close(p->plans[k]);
        rnnd_free(p->plans);
        rnnd_free(p->h_off);
        rnnd_free(p->c_off);
        rnnd_free(p->seqs);
        rnnd_free(p->y[0]);
        rnnd_free(p->y[1]);
        rnnd_model_unref(p->m);
        rnnd_free(p);
}

/* Grows the plan's batch and intermediate outputs for b (steps in all). */
static int reserve(struct chain_plan *p, const struct rnnd_batch *b, uint64_t steps,
                   rnnd_error_t *reterr)
{
        size_t widest = 0;

        for (uint32_t k = 0; k + 1 < p->n; k++) {
                const rnnd_model_t *bm = block_model(p, k);
                size_t w = (size_t)bm->dirs * bm->out_size;

                widest = w > widest ? w : widest;
        }
        if (b->n > p->cap) {
                struct rnnd_seq *s = rnnd_realloc(p->seqs, (size_t)b->n * sizeof(*s));

                if (s == NULL)
                        return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for a batch");
                p->seqs = s;
                p->cap = b->n;
        }
        for (int i = 0; i < 2 && p->n > 1 + (unsigned)i; i++) {
                size_t need = (size_t)steps * widest;

                if (need > p->ycap[i]) {
                        float *y = rnnd_realloc(p->y[i], need * sizeof(float));

                        if (y == NULL)
                                return rnnd_error_set(reterr, RNND_ENOMEM,
                                                      "out of memory for %zu floats between "
                                                      "blocks",
                                                      need);
                        p->y[i] = y;
                        p->ycap[i] = need;
                }
        }
        return 0;
}

/*
 * The batch block k runs: each sequence's own length and state parts; its
 * input the request's (k = 0) or block k - 1's y; its y the request's (the
 * last block) or scratch; scores from the last block only.
 */
static void block_batch(struct chain_plan *p, const struct rnnd_batch *b, uint32_t k)
{
        const bool last = k + 1 == p->n, lstm = block_model(p, k)->cfg.cell == RNND_CELL_LSTM;
        const size_t in_w =
                k > 0 ? (size_t)block_model(p, k - 1)->dirs * block_model(p, k - 1)->out_size : 0;
        const size_t out_w = (size_t)block_model(p, k)->dirs * block_model(p, k)->out_size;
        const float *in = k > 0 ? p->y[(k - 1) & 1] : NULL;
        float *out = last ? NULL : p->y[k & 1];

        for (uint32_t i = 0; i < b->n; i++) {
                const struct rnnd_seq *q = &b->seqs[i];
                struct rnnd_seq *s = &p->seqs[i];

                *s = (struct rnnd_seq){
                        .len = q->len,
                        .x = k == 0 ? q->x : in,
                        .tokens = k == 0 ? q->tokens : NULL,
                        .h0 = q->h0 != NULL ? q->h0 + p->h_off[k] : NULL,
                        .c0 = q->c0 != NULL && lstm ? q->c0 + p->c_off[k] : NULL,
                        .y = last ? q->y : out,
                        .h_n = q->h_n != NULL ? q->h_n + p->h_off[k] : NULL,
                        .c_n = q->c_n != NULL && lstm ? q->c_n + p->c_off[k] : NULL,
                        .scores = last ? q->scores : NULL,
                };
                if (k > 0)
                        in += (size_t)q->len * in_w;
                if (!last)
                        out += (size_t)q->len * out_w;
        }
}

static int chain_run(void *plan, const struct rnnd_batch *b, rnnd_error_t *reterr)
{
        struct chain_plan *p = plan;
        uint64_t steps = 0;
        uint32_t longest;
        int r;

        if (p->n == 1)
                return rnnd__cpu_block_backend.run(p->plans[0], b, reterr);
        r = rnnd_batch_check(p->m, b, &steps, &longest, reterr);
        if (r == 0)
                r = reserve(p, b, steps, reterr);
        for (uint32_t k = 0; r == 0 && k < p->n; k++) {
                const struct rnnd_batch kb = {p->seqs, b->n};

                block_batch(p, b, k);
                r = rnnd__cpu_block_backend.run(p->plans[k], &kb, reterr);
                if (r < 0)
                        rnnd_error_prefix(reterr, "blocks[%u]", (unsigned)k);
        }
        return r;
}

/*
 * Each block decides its threads for its own sizes (docs/OPERATIONS.md,
 * "Sizing the CPU engine"): one text when they agree, else each block's.
 */
static void chain_threading(const struct chain_plan *p, struct rnnd_backend_desc *d)
{
        struct rnnd_backend_desc bd;
        char item[sizeof(bd.threading) + 24];
        bool same = true;

        for (uint32_t k = 1; k < p->n && same; k++) {
                rnnd__cpu_block_backend.describe(p->plans[k], &bd);
                same = strcmp(bd.threading, d->threading) == 0;
        }
        if (same)
                return;
        d->threading[0] = '\0';
        for (uint32_t k = 0; k < p->n; k++) {
                rnnd__cpu_block_backend.describe(p->plans[k], &bd);
                snprintf(item, sizeof(item), "blocks[%u]: %s", (unsigned)k, bd.threading);
                rnnd_backend_desc_append(d->threading, sizeof(d->threading), "; ", item);
        }
}

/*
 * One block: the block engine's words.  A chain: the first block's, with
 * every block's kernel in algo ("fused-lstm-step (AVX-512), packed-gemm").
 */
static void chain_describe(const void *plan, struct rnnd_backend_desc *d)
{
        const struct chain_plan *p = plan;
        struct rnnd_backend_desc bd;

        rnnd__cpu_block_backend.describe(p != NULL ? p->plans[0] : NULL, d);
        if (p == NULL || p->n == 1)
                return;
        d->why_not_cudnn[0] = '\0'; /* each block's below, named */
        d->algo[0] = '\0';
        for (uint32_t k = 0; k < p->n; k++) {
                rnnd__cpu_block_backend.describe(p->plans[k], &bd);
                rnnd_backend_desc_append(d->algo, sizeof(d->algo), ", ", bd.algo);
                if (bd.why_not_cudnn[0] != '\0' && d->why_not_cudnn[0] == '\0')
                        snprintf(d->why_not_cudnn, sizeof(d->why_not_cudnn), "blocks[%u]: %.200s",
                                 (unsigned)k, bd.why_not_cudnn);
        }
        chain_threading(p, d);
}

const struct rnnd_backend_ops rnnd_cpu_backend = {
        .name = "cpu",
        .open = chain_open,
        .run = chain_run,
        .close = chain_close,
        .describe = chain_describe,
};

/*
 * random-model.h: random models and batches for comparing backends: a
 * config drawn from a seed, weights written as a safetensors file into a
 * temporary repository entry and loaded the way the daemon loads them, and
 * ragged batches with inputs, states and output buffers.
 */
#ifndef RNND_TESTS_RANDOM_MODEL_H
#define RNND_TESTS_RANDOM_MODEL_H

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend.h"
#include "model.h"

static inline unsigned rm_next(unsigned *s)
{
        *s = *s * 1103515245u + 12345u;
        return (*s >> 8) & 0xffffff;
}

/* Uniform in [lo, hi]. */
static inline unsigned rm_int(unsigned *s, unsigned lo, unsigned hi)
{
        return lo + rm_next(s) % (hi - lo + 1);
}

/* Uniform in [-a, a). */
static inline float rm_float(unsigned *s, float a)
{
        return ((float)rm_next(s) / 8388608.0f - 1.0f) * a;
}

/* One tensor of the file being written. */
struct rm_tensor {
        char name[128];
        uint64_t shape[2];
        unsigned ndim;
        float *data;
};

static inline void rm_add(struct rm_tensor *t, unsigned *n, const char *name, uint64_t a,
                          uint64_t b, unsigned *seed, float scale)
{
        struct rm_tensor *x = &t[(*n)++];
        uint64_t numel = a * (b ? b : 1);

        snprintf(x->name, sizeof(x->name), "%s", name);
        x->shape[0] = a;
        x->shape[1] = b;
        x->ndim = b ? 2 : 1;
        x->data = malloc(numel * sizeof(float));
        for (uint64_t i = 0; i < numel; i++)
                x->data[i] = rm_float(seed, scale);
}

/* Writes tensors t[0..n) as a safetensors file at path. */
static inline void rm_write(const char *path, struct rm_tensor *t, unsigned n)
{
        char hdr[16384];
        size_t len = 0;
        uint64_t off = 0, hlen;
        FILE *f;

        len += (size_t)snprintf(hdr + len, sizeof(hdr) - len, "{");
        for (unsigned i = 0; i < n; i++) {
                uint64_t bytes = t[i].shape[0] * (t[i].ndim == 2 ? t[i].shape[1] : 1) * 4;

                if (t[i].ndim == 2)
                        len += (size_t)snprintf(
                                hdr + len, sizeof(hdr) - len,
                                "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%llu,%llu],"
                                "\"data_offsets\":[%llu,%llu]}",
                                i ? "," : "", t[i].name, (unsigned long long)t[i].shape[0],
                                (unsigned long long)t[i].shape[1], (unsigned long long)off,
                                (unsigned long long)(off + bytes));
                else
                        len += (size_t)snprintf(
                                hdr + len, sizeof(hdr) - len,
                                "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%llu],"
                                "\"data_offsets\":[%llu,%llu]}",
                                i ? "," : "", t[i].name, (unsigned long long)t[i].shape[0],
                                (unsigned long long)off, (unsigned long long)(off + bytes));
                off += bytes;
        }
        len += (size_t)snprintf(hdr + len, sizeof(hdr) - len, "}");
        while (len % 8 != 0)
                hdr[len++] = ' ';
        ck_assert_uint_lt(len, sizeof(hdr));
        f = fopen(path, "wb");
        ck_assert_ptr_nonnull(f);
        hlen = len;
        fwrite(&hlen, 8, 1, f); /* little-endian on every machine we build for */
        fwrite(hdr, 1, len, f);
        for (unsigned i = 0; i < n; i++)
                fwrite(t[i].data, 4, t[i].shape[0] * (t[i].ndim == 2 ? t[i].shape[1] : 1), f);
        fclose(f);
}

/* Block b's tensors under its prefix, drawn in layer, direction, kind order. */
static inline void rm_block_tensors(struct rm_tensor *t, unsigned *n,
                                    const struct rnnd_block_config *b, unsigned *s, float scale)
{
        static const char *const kinds[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh",
                                            "weight_hr"};
        const unsigned dirs = b->bidirectional ? 2 : 1, G = rnnd_cell_gates(b->cell);
        const unsigned P = b->proj_size ? b->proj_size : b->hidden_size;
        char name[RNND_CFG_NAME_MAX];

        for (unsigned l = 0; l < b->num_layers; l++)
                for (unsigned d = 0; d < dirs; d++)
                        for (unsigned k = 0; k < (b->proj_size ? 5u : 4u); k++) {
                                const uint64_t in = l == 0 ? b->input_size : dirs * P;
                                const uint64_t rows[] = {G * b->hidden_size, G * b->hidden_size,
                                                         G * b->hidden_size, G * b->hidden_size, P};
                                const uint64_t cols[] = {in, P, 0, 0, b->hidden_size};

                                snprintf(name, sizeof(name), "%.80s%s_l%u%s", b->prefix, kinds[k],
                                         l, d ? "_reverse" : "");
                                rm_add(t, n, name, rows[k], cols[k], s, scale);
                        }
}

/* One random block of input in: any cell (GRU reset-after), odd sizes, maybe a projection. */
static inline void rm_block(struct rnnd_block_config *b, unsigned in, unsigned *s,
                            unsigned max_hidden, unsigned max_layers)
{
        memset(b, 0, sizeof(*b));
        b->cell = (rnnd_cell_t)rm_int(s, 0, 3);
        b->hidden_size = rm_int(s, 1, max_hidden);
        b->input_size = in;
        b->num_layers = rm_int(s, 1, max_layers);
        b->bidirectional = rm_int(s, 0, 1);
        b->gru_linear_before_reset = true;
        if (b->cell == RNND_CELL_LSTM && b->hidden_size > 1 && rm_int(s, 0, 3) == 0)
                b->proj_size = rm_int(s, 1, b->hidden_size - 1);
}

/* The embedding, the head and the batching of a random model; its tensors after the blocks'. */
static inline void rm_ends(struct rnnd_model_config *cfg, unsigned *s)
{
        if (rm_int(s, 0, 3) == 0) {
                cfg->embedding.present = true;
                cfg->embedding.num_embeddings = rm_int(s, 1, 50);
                cfg->embedding.dim = cfg->input_size;
        }
        if (rm_int(s, 0, 2) == 0) {
                cfg->head.present = true;
                cfg->head.units = rm_int(s, 1, 12);
                cfg->head.activation = (rnnd_act_t)rm_int(s, 0, 4);
                cfg->head.apply = (rnnd_head_apply_t)rm_int(s, 0, 1);
        }
        cfg->max_sequence_length = rm_int(s, 1, 40);
        cfg->batching.max_batch_size = rm_int(s, 1, 16);
        cfg->batching.max_batch_steps =
                (uint64_t)cfg->max_sequence_length * cfg->batching.max_batch_size;
}

/* Writes the blocks', embedding's and head's tensors, loads the model (a new reference). */
static inline rnnd_model_t *rm_load(const struct rnnd_model_config *cfg, unsigned seed, unsigned *s)
{
        struct rm_tensor t[96];
        struct rnnd_block_config one;
        const struct rnnd_block_config *bl;
        unsigned n = 0;
        uint32_t nb;
        char dir[] = "/tmp/rnnd-rm-XXXXXX", path[256], name[64];
        rnnd_error_t err = {0};
        rnnd_model_t *m = NULL;
        const unsigned dirs = cfg->bidirectional ? 2 : 1;
        const unsigned P = cfg->proj_size ? cfg->proj_size : cfg->hidden_size;

        bl = rnnd_modelcfg_blocks(cfg, &one, &nb);
        for (uint32_t k = 0; k < nb; k++)
                rm_block_tensors(t, &n, &bl[k], s, 1.0f / sqrtf((float)bl[k].hidden_size));
        if (cfg->embedding.present)
                rm_add(t, &n, cfg->weights.embedding, cfg->embedding.num_embeddings,
                       cfg->embedding.dim, s, 1.0f);
        if (cfg->head.present) {
                rm_add(t, &n, cfg->weights.head_weight, cfg->head.units, dirs * P, s, 1.0f);
                rm_add(t, &n, cfg->weights.head_bias, cfg->head.units, 0, s, 1.0f);
        }
        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/1", dir);
        ck_assert_int_eq(mkdir(path, 0700), 0);
        snprintf(path, sizeof(path), "%s/1/%s", dir, cfg->weights.file);
        rm_write(path, t, n);
        for (unsigned i = 0; i < n; i++)
                free(t[i].data);
        snprintf(name, sizeof(name), "random%u", seed);
        ck_assert_msg(rnnd_model_load(dir, name, 1, cfg, &m, &err) == 0, "seed %u: %s", seed,
                      err.msg);
        unlink(path);
        snprintf(path, sizeof(path), "%s/1", dir);
        rmdir(path);
        rmdir(dir);
        return m;
}

/*
 * A random model from seed: any cell (GRU reset-after only, which both
 * backends compute), 1-3 layers, either direction, odd sizes, sometimes a
 * projection (LSTM), an embedding, a head.  A new reference.
 */
static inline rnnd_model_t *rm_model(unsigned seed)
{
        struct rnnd_model_config cfg;
        struct rnnd_block_config b;
        unsigned s = seed * 7919u + 1;

        rnnd_modelcfg_defaults(&cfg);
        b.cell = (rnnd_cell_t)rm_int(&s, 0, 3);
        b.hidden_size = rm_int(&s, 1, 64);
        cfg.input_size = rm_int(&s, 1, 40);
        cfg.cell = b.cell;
        cfg.hidden_size = b.hidden_size;
        cfg.num_layers = rm_int(&s, 1, 3);
        cfg.bidirectional = rm_int(&s, 0, 1);
        cfg.gru_linear_before_reset = true;
        if (cfg.cell == RNND_CELL_LSTM && cfg.hidden_size > 1 && rm_int(&s, 0, 3) == 0)
                cfg.proj_size = rm_int(&s, 1, cfg.hidden_size - 1);
        rm_ends(&cfg, &s);
        return rm_load(&cfg, seed, &s);
}

/*
 * A random chain of 2 or 3 blocks (config "blocks"), each drawn as rm_block
 * draws, each block's input the one before's output, with an embedding and
 * a head as rm_model has them.  A new reference.
 */
static inline rnnd_model_t *rm_chain(unsigned seed)
{
        struct rnnd_model_config cfg;
        unsigned s = seed * 104729u + 3, in;

        rnnd_modelcfg_defaults(&cfg);
        cfg.input_size = in = rm_int(&s, 1, 40);
        cfg.n_blocks = rm_int(&s, 2, 3);
        for (uint32_t k = 0; k < cfg.n_blocks; k++) {
                struct rnnd_block_config *b = &cfg.blocks[k];

                rm_block(b, in, &s, 48, 2);
                snprintf(b->prefix, sizeof(b->prefix), "b%u.", (unsigned)k);
                in = (b->bidirectional ? 2 : 1) * (b->proj_size ? b->proj_size : b->hidden_size);
        }
        /* The one-block fields are the last block's (modelcfg.h). */
        cfg.cell = cfg.blocks[cfg.n_blocks - 1].cell;
        cfg.hidden_size = cfg.blocks[cfg.n_blocks - 1].hidden_size;
        cfg.num_layers = cfg.blocks[cfg.n_blocks - 1].num_layers;
        cfg.bidirectional = cfg.blocks[cfg.n_blocks - 1].bidirectional;
        cfg.proj_size = cfg.blocks[cfg.n_blocks - 1].proj_size;
        rm_ends(&cfg, &s);
        return rm_load(&cfg, seed, &s);
}

/* A batch for model m and the buffers behind it; out[k] are the outputs of one backend. */
struct rm_batch {
        struct rnnd_batch b;
        struct rnnd_seq *seqs;
        float *x, *h0, *c0;
        int64_t *tokens;
        float *out[2];  /* two sets of outputs (y, h_n, c_n, scores per sequence) */
        size_t per_seq; /* floats of outputs per sequence */
        size_t off[4];  /* y, h_n, c_n, scores within a sequence's outputs */
};

/*
 * n sequences with lengths from lens (or random in 1..max_sequence_length
 * when lens is NULL), random inputs, h0/c0 on about half of them.
 */
static inline void rm_batch_init(struct rm_batch *rb, const rnnd_model_t *m, uint32_t n,
                                 const uint32_t *lens, unsigned seed)
{
        const struct rnnd_model_config *cfg = &m->cfg;
        const uint32_t in = cfg->input_size;
        uint32_t Tm = cfg->max_sequence_length;
        const size_t DP = m->dirs * m->out_size;
        const size_t U = cfg->head.present ? cfg->head.units : 0;
        size_t hs, cs; /* a sequence's state: every block's (modelcfg.h) */
        unsigned s = seed * 31u + 7;

        rnnd_modelcfg_state_size(cfg, &hs, &cs);
        memset(rb, 0, sizeof(*rb));
        if (lens != NULL) { /* buffers for the longest given length only */
                Tm = 1;
                for (uint32_t i = 0; i < n; i++)
                        Tm = lens[i] > Tm ? lens[i] : Tm;
        }
        rb->seqs = calloc(n, sizeof(*rb->seqs));
        rb->x = malloc((size_t)n * Tm * in * sizeof(float));
        rb->tokens = malloc((size_t)n * Tm * sizeof(int64_t));
        rb->h0 = malloc((size_t)n * hs * sizeof(float));
        rb->c0 = malloc(((size_t)n * cs + 1) * sizeof(float));
        rb->off[0] = 0;
        rb->off[1] = Tm * DP;
        rb->off[2] = rb->off[1] + hs;
        rb->off[3] = rb->off[2] + cs;
        rb->per_seq = rb->off[3] + (cfg->head.apply == RNND_HEAD_ALL ? Tm : 1) * U;
        for (int k = 0; k < 2; k++)
                rb->out[k] = calloc((size_t)n * rb->per_seq, sizeof(float));
        for (size_t i = 0; i < (size_t)n * Tm * in; i++)
                rb->x[i] = rm_float(&s, 1.0f);
        for (size_t i = 0; i < (size_t)n * Tm; i++)
                rb->tokens[i] = cfg->embedding.present
                                        ? rm_int(&s, 0, cfg->embedding.num_embeddings - 1)
                                        : 0;
        for (size_t i = 0; i < (size_t)n * hs; i++)
                rb->h0[i] = rm_float(&s, 0.5f);
        for (size_t i = 0; i < (size_t)n * cs; i++)
                rb->c0[i] = rm_float(&s, 0.5f);
        for (uint32_t i = 0; i < n; i++) {
                struct rnnd_seq *q = &rb->seqs[i];
                bool states = rm_int(&s, 0, 1);

                q->len = lens != NULL ? lens[i] : rm_int(&s, 1, Tm);
                q->x = cfg->embedding.present ? NULL : rb->x + (size_t)i * Tm * in;
                q->tokens = cfg->embedding.present ? rb->tokens + (size_t)i * Tm : NULL;
                q->h0 = states ? rb->h0 + (size_t)i * hs : NULL;
                q->c0 = states && cs > 0 ? rb->c0 + (size_t)i * cs : NULL;
        }
        rb->b.seqs = rb->seqs;
        rb->b.n = n;
}

/* Points every sequence's outputs at set k. */
static inline void rm_batch_target(struct rm_batch *rb, const rnnd_model_t *m, int k)
{
        for (uint32_t i = 0; i < rb->b.n; i++) {
                float *o = rb->out[k] + (size_t)i * rb->per_seq;
                struct rnnd_seq *q = &rb->seqs[i];

                q->y = o + rb->off[0];
                q->h_n = o + rb->off[1];
                q->c_n = rnnd_modelcfg_has_lstm(&m->cfg) ? o + rb->off[2] : NULL;
                q->scores = m->cfg.head.present ? o + rb->off[3] : NULL;
        }
}

/* Max abs difference between the two output sets, relative to 1 + |out[0]|. */
static inline double rm_batch_diff(const struct rm_batch *rb)
{
        double worst = 0;

        for (size_t i = 0; i < (size_t)rb->b.n * rb->per_seq; i++) {
                double d = fabs((double)rb->out[0][i] - rb->out[1][i]) /
                           (1.0 + fabs((double)rb->out[0][i]));

                if (isnan(d) || d > worst)
                        worst = isnan(d) ? INFINITY : d;
        }
        return worst;
}

static inline void rm_batch_done(struct rm_batch *rb)
{
        free(rb->seqs);
        free(rb->x);
        free(rb->tokens);
        free(rb->h0);
        free(rb->c0);
        free(rb->out[0]);
        free(rb->out[1]);
}

#endif

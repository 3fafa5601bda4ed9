/*
 * model.c: loads a model version's weights into the canonical layout of
 * model.h.  Every tensor the config needs is located and its shape checked
 * before anything is allocated, so the allocation is bounded by what the file
 * really holds; then each tensor is converted to float32 once, and refused
 * if any element is NaN or infinite.
 */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "model.h"
#include "stfile.h"

/* One tensor the config asks for: its name, shape, and where it goes. */
struct want {
        char name[RNND_CFG_NAME_MAX * 2];
        unsigned ndim;
        uint64_t shape[2];
        size_t off;         /* offset in wbuf, in floats */
        const float **dst;  /* where the pointer is stored */
        bool optional_bias; /* a bias that may be absent (bias=False models) */
        bool zero;          /* a bias of a block without biases: zeros */
};

static void want_set(struct want *w, unsigned ndim, uint64_t d0, uint64_t d1, const float **dst)
{
        w->ndim = ndim;
        w->shape[0] = d0;
        w->shape[1] = d1;
        w->dst = dst;
}

static uint64_t want_numel(const struct want *w)
{
        return w->ndim == 1 ? w->shape[0] : w->shape[0] * w->shape[1];
}

/*
 * Lists the tensors of block b, whose layers start at lws: per layer and
 * direction w_ih, w_hh, b_ih, b_hh (and w_hr).  Returns the count written to
 * ws (which has room for max), or a negative error.
 */
static int list_block(const struct rnnd_block_config *b, struct rnnd_layer_weights *lws,
                      struct want *ws, size_t max, rnnd_error_t *reterr)
{
        const unsigned dirs = rnnd_modelcfg_block_dirs(b);
        const uint64_t gh = (uint64_t)rnnd_cell_gates(b->cell) * b->hidden_size;
        const uint64_t P = rnnd_modelcfg_block_out_size(b), H = b->hidden_size;
        static const char *const kinds[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh",
                                            "weight_hr"};
        size_t n = 0;

        for (unsigned l = 0; l < b->num_layers; l++) {
                for (unsigned d = 0; d < dirs; d++) {
                        struct rnnd_layer_weights *lw = &lws[l * dirs + d];
                        unsigned nk = b->proj_size ? 5 : 4;

                        lw->in = l == 0 ? b->input_size : (uint32_t)(dirs * P);
                        for (unsigned k = 0; k < nk; k++) {
                                struct want *w = &ws[n++];

                                if (n > max)
                                        return rnnd_error_set(reterr, RNND_EINTERNAL,
                                                              "too many tensors");
                                snprintf(w->name, sizeof(w->name), "%s%s_l%u%s", b->prefix,
                                         kinds[k], l, d ? "_reverse" : "");
                                w->optional_bias = k == 2 || k == 3;
                                switch (k) {
                                case 0:
                                        want_set(w, 2, gh, lw->in, &lw->w_ih);
                                        break;
                                case 1:
                                        want_set(w, 2, gh, P, &lw->w_hh);
                                        break;
                                case 2:
                                        want_set(w, 1, gh, 0, &lw->b_ih);
                                        break;
                                case 3:
                                        want_set(w, 1, gh, 0, &lw->b_hh);
                                        break;
                                default:
                                        want_set(w, 2, P, H, &lw->w_hr);
                                        break;
                                }
                        }
                }
        }
        return (int)n;
}

/* The embedding and the head: their tensors into ws[0..), the count returned. */
static int list_ends(const struct rnnd_model_config *cfg, rnnd_model_t *m, struct want *ws)
{
        int n = 0;

        if (cfg->embedding.present) {
                struct want *w = &ws[n++];

                snprintf(w->name, sizeof(w->name), "%s", cfg->weights.embedding);
                want_set(w, 2, cfg->embedding.num_embeddings, cfg->embedding.dim, &m->embedding);
        }
        if (cfg->head.present) {
                struct want *w = &ws[n++];

                snprintf(w->name, sizeof(w->name), "%s", cfg->weights.head_weight);
                want_set(w, 2, cfg->head.units, m->dirs * m->out_size, &m->head_w);
                w = &ws[n++];
                snprintf(w->name, sizeof(w->name), "%s", cfg->weights.head_bias);
                want_set(w, 1, cfg->head.units, 0, &m->head_b);
        }
        return n;
}

/* Formats shape as "[a, b]" into buf. */
static const char *shape_str(const uint64_t *s, unsigned n, char *buf, size_t len)
{
        size_t o = 0;

        o += (size_t)snprintf(buf + o, len - o, "[");
        for (unsigned i = 0; i < n && o < len; i++)
                o += (size_t)snprintf(buf + o, len - o, "%s%llu", i ? ", " : "",
                                      (unsigned long long)s[i]);
        if (o < len)
                snprintf(buf + o, len - o, "]");
        return buf;
}

/*
 * What layer 0's tensors in f say of the network, when it is not what cfg
 * says: "; the file holds an lstm of hidden_size 64, input_size 8;
 * config.json says hidden_size 65, input_size 8" into buf, else "".  The
 * hidden size is weight_hh_l0's columns (weight_hr_l0's with a projection),
 * the cell its rows over that, the input size weight_ih_l0's columns.
 */
static void file_holds(const rnnd_stfile_t *f, const struct rnnd_model_config *cfg, char *buf,
                       size_t len)
{
        const struct rnnd_st_tensor *ih, *hh, *hr;
        char name[RNND_CFG_NAME_MAX * 2];
        uint64_t H, G, in;

        buf[0] = '\0';
        snprintf(name, sizeof(name), "%sweight_ih_l0", cfg->weights.prefix);
        ih = rnnd_stfile_find(f, name);
        snprintf(name, sizeof(name), "%sweight_hh_l0", cfg->weights.prefix);
        hh = rnnd_stfile_find(f, name);
        snprintf(name, sizeof(name), "%sweight_hr_l0", cfg->weights.prefix);
        hr = rnnd_stfile_find(f, name);
        if (ih == NULL || hh == NULL || ih->ndim != 2 || hh->ndim != 2 ||
            (hr != NULL && hr->ndim != 2))
                return;
        H = hr != NULL ? hr->shape[1] : hh->shape[1];
        G = H > 0 && hh->shape[0] % H == 0 ? hh->shape[0] / H : 0;
        in = ih->shape[1];
        if (G != 4 && G != 3 && G != 1)
                return;
        if (H == cfg->hidden_size && in == cfg->input_size && G == rnnd_cell_gates(cfg->cell))
                return;
        snprintf(buf, len,
                 "; the file holds %s of hidden_size %" PRIu64 ", input_size %" PRIu64
                 "; config.json says %s, hidden_size %u, input_size %u",
                 G == 4   ? "an lstm"
                 : G == 3 ? "a gru"
                          : "an rnn",
                 H, in, rnnd_cell_name(cfg->cell), cfg->hidden_size, cfg->input_size);
}

/*
 * Checks that every wanted tensor of ws[0..n) is present with its shape,
 * and that they hold either all of their biases or none: a block's (an
 * nn.LSTM's) biases are all there or it has bias=False.  Sets *has_bias.
 */
static int check_tensors(const rnnd_stfile_t *f, const struct rnnd_model_config *cfg,
                         struct want *ws, size_t n, bool *has_bias, rnnd_error_t *reterr)
{
        size_t biases = 0, present = 0;
        const char *missing_bias = NULL, *present_bias = NULL;
        char got[96], want[96], holds[160];

        for (size_t i = 0; i < n; i++) {
                const struct rnnd_st_tensor *t = rnnd_stfile_find(f, ws[i].name);
                bool same;

                if (ws[i].optional_bias) {
                        biases++;
                        if (t == NULL) {
                                missing_bias = ws[i].name;
                                continue;
                        }
                        present++;
                        present_bias = ws[i].name;
                }
                if (t == NULL)
                        return rnnd_error_set(reterr, RNND_EMODEL, "tensor '%s' not found",
                                              ws[i].name);
                same = t->ndim == ws[i].ndim;
                for (unsigned k = 0; same && k < t->ndim; k++)
                        same = t->shape[k] == ws[i].shape[k];
                if (!same) {
                        file_holds(f, cfg, holds, sizeof(holds));
                        return rnnd_error_set(reterr, RNND_EMODEL,
                                              "tensor '%s' has shape %s, the config needs %s%s",
                                              ws[i].name, shape_str(t->shape, t->ndim, got, 96),
                                              shape_str(ws[i].shape, ws[i].ndim, want, 96), holds);
                }
        }
        if (present != 0 && present != biases)
                return rnnd_error_set(reterr, RNND_EMODEL,
                                      "tensor '%s' not found, but '%s' is: a model has all of its "
                                      "biases or none",
                                      missing_bias, present_bias);
        *has_bias = present != 0;
        return 0;
}

/*
 * RNND_EMODEL naming the tensor and the first element that is NaN or
 * infinite (after conversion to float32: an F64 past FLT_MAX is infinite).
 * A model holding one answers NaN for every input it reaches, and JSON has
 * no way to write NaN.
 */
static int check_finite(const struct want *w, const float *v, rnnd_error_t *reterr)
{
        uint64_t n = want_numel(w);

        for (uint64_t i = 0; i < n; i++)
                if (!isfinite(v[i]))
                        return rnnd_error_set(reterr, RNND_EMODEL,
                                              "tensor '%s' element %" PRIu64 " (of %" PRIu64
                                              ") is %s; weights must be finite",
                                              w->name, i, n,
                                              isnan(v[i]) ? "NaN"
                                              : v[i] > 0  ? "+Inf"
                                                          : "-Inf");
        return 0;
}

/*
 * Lists and checks every tensor of the model into ws (room for max): each
 * block's, then the embedding and the head.  Marks the biases of a block
 * without them (has_bias false) so that they are zeroed.  Returns the
 * count, or a negative error naming the tensor (and, in a chain, the block).
 */
static int list_and_check(const rnnd_stfile_t *f, const struct rnnd_model_config *cfg,
                          rnnd_model_t *m, struct want *ws, size_t max, rnnd_error_t *reterr)
{
        struct rnnd_block_config one;
        struct rnnd_model_config bcfg;
        uint32_t nb;
        const struct rnnd_block_config *bl = rnnd_modelcfg_blocks(cfg, &one, &nb);
        size_t n = 0, ld = 0;
        bool has_bias = false;
        int k, r;

        for (uint32_t b = 0; b < nb; b++) {
                k = list_block(&bl[b], &m->layers[ld], ws + n, max - n, reterr);
                if (k < 0)
                        return k;
                rnnd_modelcfg_block(cfg, b, &bcfg); /* what the file holds, of this block */
                r = check_tensors(f, &bcfg, ws + n, (size_t)k, &has_bias, reterr);
                if (r < 0) {
                        if (nb > 1)
                                rnnd_error_prefix(reterr,
                                                  "blocks[%" PRIu32 "] (%s, input %" PRIu32
                                                  ", hidden %" PRIu32 ")",
                                                  b, rnnd_cell_name(bl[b].cell), bl[b].input_size,
                                                  bl[b].hidden_size);
                        return r;
                }
                for (int i = 0; i < k; i++)
                        ws[n + (size_t)i].zero = ws[n + (size_t)i].optional_bias && !has_bias;
                n += (size_t)k;
                ld += (size_t)bl[b].num_layers * rnnd_modelcfg_block_dirs(&bl[b]);
        }
        k = list_ends(cfg, m, ws + n);
        r = check_tensors(f, cfg, ws + n, (size_t)k, &has_bias, reterr);
        return r < 0 ? r : (int)(n + (size_t)k);
}

/* Block b of chain m as a model of its own, sharing m's weights. */
static rnnd_model_t *block_view(const rnnd_model_t *m, uint32_t b, size_t first_layer)
{
        rnnd_model_t *v = rnnd_calloc(1, sizeof(*v));

        if (v == NULL)
                return NULL;
        rnnd_modelcfg_block(&m->cfg, b, &v->cfg);
        memcpy(v->name, m->name, sizeof(v->name));
        v->version = m->version;
        v->gates = rnnd_cell_gates(v->cfg.cell);
        v->dirs = rnnd_modelcfg_dirs(&v->cfg);
        v->out_size = rnnd_modelcfg_out_size(&v->cfg);
        v->layers = &m->layers[first_layer];
        v->embedding = b == 0 ? m->embedding : NULL;
        v->head_w = b + 1 == m->n_blocks ? m->head_w : NULL;
        v->head_b = b + 1 == m->n_blocks ? m->head_b : NULL;
        v->wbuf = m->wbuf; /* not owned: a backend finds the view's weights in it */
        v->wlen = m->wlen;
        v->n_blocks = 1;
        v->chain = m;
        atomic_init(&v->refs, 1);
        return v;
}

static int make_views(rnnd_model_t *m, rnnd_error_t *reterr)
{
        size_t ld = 0;

        m->blocks = rnnd_calloc(m->n_blocks, sizeof(*m->blocks));
        if (m->blocks == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory loading model");
        for (uint32_t b = 0; b < m->n_blocks; b++) {
                m->blocks[b] = block_view(m, b, ld);
                if (m->blocks[b] == NULL)
                        return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory loading model");
                ld += (size_t)m->cfg.blocks[b].num_layers *
                      rnnd_modelcfg_block_dirs(&m->cfg.blocks[b]);
        }
        return 0;
}

int rnnd_model_from_stfile(const rnnd_stfile_t *f, const char *name, uint64_t version,
                           const struct rnnd_model_config *cfg, rnnd_model_t **ret,
                           rnnd_error_t *reterr)
{
        struct rnnd_block_config one;
        uint32_t nb;
        const struct rnnd_block_config *bl = rnnd_modelcfg_blocks(cfg, &one, &nb);
        size_t max_want = 3, n_ld = 0;
        struct want *ws = NULL;
        rnnd_model_t *m;
        size_t total = 0;
        int n, r;

        for (uint32_t b = 0; b < nb; b++) {
                n_ld += (size_t)bl[b].num_layers * rnnd_modelcfg_block_dirs(&bl[b]);
                max_want += (size_t)bl[b].num_layers * 2 * 5;
        }
        m = rnnd_calloc(1, sizeof(*m));
        if (m == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory loading model");
        m->cfg = *cfg;
        snprintf(m->name, sizeof(m->name), "%s", name);
        m->version = version;
        m->gates = rnnd_cell_gates(cfg->cell);
        m->dirs = rnnd_modelcfg_dirs(cfg);
        m->out_size = rnnd_modelcfg_out_size(cfg);
        m->n_blocks = nb;
        atomic_init(&m->refs, 1);

        m->layers = rnnd_calloc(n_ld, sizeof(*m->layers));
        ws = rnnd_calloc(max_want, sizeof(*ws));
        if (m->layers == NULL || ws == NULL) {
                r = rnnd_error_set(reterr, RNND_ENOMEM, "out of memory loading model");
                goto out;
        }
        n = list_and_check(f, cfg, m, ws, max_want, reterr);
        if (n < 0) {
                r = n;
                goto out;
        }

        /* Every size is now backed by the file, so the sum cannot overflow. */
        for (int i = 0; i < n; i++) {
                ws[i].off = total;
                total += want_numel(&ws[i]);
        }
        m->wbuf = rnnd_mallocarray(total ? total : 1, sizeof(float));
        if (m->wbuf == NULL) {
                r = rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for %zu weights", total);
                goto out;
        }
        m->wlen = total;
        for (int i = 0; i < n; i++) {
                float *dst = m->wbuf + ws[i].off;

                *ws[i].dst = dst;
                if (ws[i].zero) {
                        memset(dst, 0, want_numel(&ws[i]) * sizeof(float));
                        continue;
                }
                r = rnnd_stfile_read_f32(f, ws[i].name, ws[i].ndim, ws[i].shape, dst, reterr);
                if (r < 0)
                        goto out;
                r = check_finite(&ws[i], dst, reterr);
                if (r < 0)
                        goto out;
        }
        if (nb > 1) {
                r = make_views(m, reterr);
                if (r < 0)
                        goto out;
        }
        rnnd_free(ws);
        *ret = m;
        return 0;
out:
        rnnd_free(ws);
        rnnd_model_unref(m);
        return r;
}

int rnnd_model_load(const char *model_dir, const char *name, uint64_t version,
                    const struct rnnd_model_config *cfg, rnnd_model_t **ret, rnnd_error_t *reterr)
{
        char path[PATH_MAX];
        rnnd_stfile_t *f = NULL;
        int r;

        if ((size_t)snprintf(path, sizeof(path), "%s/%llu/%s", model_dir,
                             (unsigned long long)version, cfg->weights.file) >= sizeof(path))
                return rnnd_error_set(reterr, RNND_ELIMIT, "%s: path too long", model_dir);
        r = rnnd_stfile_open(path, &f, reterr);
        if (r < 0)
                return r;
        r = rnnd_model_from_stfile(f, name, version, cfg, ret, reterr);
        if (r < 0)
                rnnd_error_prefix(reterr, "%s", path);
        rnnd_stfile_close(f);
        return r;
}

rnnd_model_t *rnnd_model_ref(rnnd_model_t *m)
{
        if (m != NULL)
                atomic_fetch_add(&m->refs, 1);
        return m;
}

rnnd_model_t *rnnd_model_unref(rnnd_model_t *m)
{
        if (m == NULL || atomic_fetch_sub(&m->refs, 1) != 1)
                return NULL;
        if (m->chain == NULL) { /* a view owns nothing but itself */
                for (uint32_t b = 0; m->blocks != NULL && b < m->n_blocks; b++)
                        rnnd_model_unref(m->blocks[b]);
                rnnd_free(m->blocks);
                rnnd_free(m->wbuf);
                rnnd_free(m->layers);
        }
        rnnd_free(m);
        return NULL;
}

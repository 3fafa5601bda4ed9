/*
 * backend.c: what every backend shares of a batch (backend.h): the check of
 * its sequences against the model before a backend runs it.
 */
#include "backend.h"

int rnnd_batch_check(const rnnd_model_t *m, const struct rnnd_batch *b, uint64_t *steps,
                     uint32_t *longest, rnnd_error_t *reterr)
{
        const struct rnnd_model_config *cfg = &m->cfg;
        uint64_t s = 0;
        uint32_t l = 0;

        if (b->n == 0 || b->seqs == NULL)
                return rnnd_error_set(reterr, RNND_EINVAL, "empty batch");
        for (uint32_t i = 0; i < b->n; i++) {
                const struct rnnd_seq *q = &b->seqs[i];

                if (q->len == 0 || q->len > cfg->max_sequence_length)
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "sequence %u: length %u is outside 1..%u", i, q->len,
                                              cfg->max_sequence_length);
                if (cfg->embedding.present) {
                        if (q->tokens == NULL)
                                return rnnd_error_set(reterr, RNND_EINVAL, "sequence %u: no tokens",
                                                      i);
                        for (uint32_t t = 0; t < q->len; t++)
                                if (q->tokens[t] < 0 ||
                                    q->tokens[t] >= (int64_t)cfg->embedding.num_embeddings)
                                        return rnnd_error_set(
                                                reterr, RNND_EINVAL,
                                                "sequence %u: token %lld at step %u is outside "
                                                "0..%u",
                                                i, (long long)q->tokens[t], t,
                                                cfg->embedding.num_embeddings - 1);
                } else if (q->x == NULL) {
                        return rnnd_error_set(reterr, RNND_EINVAL, "sequence %u: no input", i);
                }
                s += q->len;
                if (q->len > l)
                        l = q->len;
        }
        *steps = s;
        *longest = l;
        return 0;
}

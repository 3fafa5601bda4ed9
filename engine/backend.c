/*
 * backend.c: what every backend shares (backend.h): the check of a batch's
 * sequences against the model before a backend runs it, and the appending of
 * a chain's blocks to a description.
 */
#include <stdio.h>
#include <string.h>

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

void rnnd_backend_desc_append(char *buf, size_t cap, const char *sep, const char *text)
{
        size_t at = strnlen(buf, cap);
        int n;

        if (cap < 4 || at >= cap - 1)
                return; /* full (a cut text fills it) */
        n = snprintf(buf + at, cap - at, "%s%s", at > 0 ? sep : "", text);
        if (n < 0 || (size_t)n >= cap - at)
                memcpy(buf + cap - 4, "...", 4);
}

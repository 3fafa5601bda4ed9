/*
 * hist.c: the log-bucketed histogram.  Bucket i < 2 x SUB holds the value i.
 * Above, a value v with its highest set bit at b (b > SUB_BITS) is shifted
 * right by s = b - SUB_BITS into SUB..2 x SUB - 1, and lands in bucket
 * (s + 1) x SUB + (v >> s) - SUB: each power of two gets SUB buckets of width
 * 2^s.
 */
#include <math.h>
#include <string.h>

#include "hist.h"

void rnnd_hist_init(struct rnnd_hist *h)
{
        memset(h, 0, sizeof(*h));
        h->min = UINT64_MAX;
}

unsigned rnnd_hist_index(uint64_t v)
{
        unsigned b, s;

        if (v > RNND_HIST_MAX)
                v = RNND_HIST_MAX;
        if (v < 2 * RNND_HIST_SUB)
                return (unsigned)v;
        b = 63u - (unsigned)__builtin_clzll(v);
        s = b - RNND_HIST_SUB_BITS;
        return (s + 1) * RNND_HIST_SUB + (unsigned)(v >> s) - RNND_HIST_SUB;
}

uint64_t rnnd_hist_bucket_low(unsigned i)
{
        unsigned s;

        if (i < 2 * RNND_HIST_SUB)
                return i;
        s = i / RNND_HIST_SUB - 1;
        return (uint64_t)(i % RNND_HIST_SUB + RNND_HIST_SUB) << s;
}

uint64_t rnnd_hist_bucket_high(unsigned i)
{
        if (i < 2 * RNND_HIST_SUB)
                return i;
        return rnnd_hist_bucket_low(i) + (UINT64_C(1) << (i / RNND_HIST_SUB - 1)) - 1;
}

void rnnd_hist_record(struct rnnd_hist *h, uint64_t v)
{
        h->buckets[rnnd_hist_index(v)]++;
        h->count++;
        h->sum += (double)v;
        if (v < h->min)
                h->min = v;
        if (v > h->max)
                h->max = v;
}

void rnnd_hist_add(struct rnnd_hist *dst, const struct rnnd_hist *src)
{
        for (unsigned i = 0; i < RNND_HIST_BUCKETS; i++)
                dst->buckets[i] += src->buckets[i];
        dst->count += src->count;
        dst->sum += src->sum;
        if (src->min < dst->min)
                dst->min = src->min;
        if (src->max > dst->max)
                dst->max = src->max;
}

uint64_t rnnd_hist_percentile(const struct rnnd_hist *h, double p)
{
        uint64_t rank, seen = 0;

        if (h->count == 0)
                return 0;
        if (p <= 0)
                return h->min;
        rank = (uint64_t)ceil(p / 100.0 * (double)h->count);
        if (rank < 1)
                rank = 1;
        if (rank > h->count)
                rank = h->count;
        for (unsigned i = 0; i < RNND_HIST_BUCKETS; i++) {
                seen += h->buckets[i];
                if (seen >= rank) {
                        uint64_t hi = rnnd_hist_bucket_high(i);

                        return hi < h->max ? hi : h->max;
                }
        }
        return h->max;
}

double rnnd_hist_mean(const struct rnnd_hist *h)
{
        return h->count > 0 ? h->sum / (double)h->count : 0;
}

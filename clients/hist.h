/*
 * hist.h: a log-bucketed latency histogram, like HdrHistogram (Debian has no
 * C HdrHistogram; BENCHMARKS.md has the figures it makes).
 *
 * Values are unsigned integers (rnnd-load records nanoseconds).  Values below
 * 2 x RNND_HIST_SUB are counted exactly; above, each power of two is split
 * into RNND_HIST_SUB equal buckets, so a percentile read back is at most
 * 1/RNND_HIST_SUB (0.8%) above the true value, never below it.  Values above
 * RNND_HIST_MAX count in the top bucket (and in max).  The storage is fixed
 * (about 37 KB), however many values are recorded: a run of any length keeps
 * bounded memory.
 */
#ifndef RNND_CLIENTS_HIST_H
#define RNND_CLIENTS_HIST_H

#include <stdint.h>

#define RNND_HIST_SUB_BITS 7
#define RNND_HIST_SUB      (1u << RNND_HIST_SUB_BITS) /* buckets per power of two */
#define RNND_HIST_TOP_BIT  41                         /* RNND_HIST_MAX = 2^42 - 1 */
#define RNND_HIST_MAX      ((UINT64_C(1) << (RNND_HIST_TOP_BIT + 1)) - 1)
#define RNND_HIST_BUCKETS  ((RNND_HIST_TOP_BIT - RNND_HIST_SUB_BITS + 2) * RNND_HIST_SUB)

struct rnnd_hist {
        uint64_t count;                      /* values recorded */
        uint64_t min, max;                   /* exact; min is UINT64_MAX when empty */
        double sum;                          /* for the mean */
        uint64_t buckets[RNND_HIST_BUCKETS]; /* counts by rnnd_hist_index() */
};

/* Empties *h (caller-provided storage; nothing to free).  Not thread-safe. */
void rnnd_hist_init(struct rnnd_hist *h);

/* Counts one value v.  Not thread-safe. */
void rnnd_hist_record(struct rnnd_hist *h, uint64_t v);

/* Adds every value of src into dst.  Not thread-safe. */
void rnnd_hist_add(struct rnnd_hist *dst, const struct rnnd_hist *src);

/*
 * The value at percentile p (0..100): the highest value of the bucket that
 * holds the ceil(p/100 x count)-th smallest value, but never above max
 * (HdrHistogram's "highest equivalent value").  0 when empty.  Thread-safe
 * on a histogram nobody writes.
 */
uint64_t rnnd_hist_percentile(const struct rnnd_hist *h, double p);

/* The mean, or 0 when empty.  Thread-safe on a histogram nobody writes. */
double rnnd_hist_mean(const struct rnnd_hist *h);

/* The bucket of v, and the lowest and highest value of bucket i.  Thread-safe. */
unsigned rnnd_hist_index(uint64_t v);
uint64_t rnnd_hist_bucket_low(unsigned i);
uint64_t rnnd_hist_bucket_high(unsigned i);

#endif

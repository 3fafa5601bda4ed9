/* test_hist.c: the load client's log-bucketed histogram (clients/hist.h). */
#include <math.h>
#include <stdlib.h>

#include "check-main.h"
#include "hist.h"
#include "tensor.h"

/* Relative width of a bucket above the exact range. */
#define BUCKET_ERR (1.0 / RNND_HIST_SUB)

START_TEST(test_buckets)
{
        /* Every bucket's range maps back to it, and the ranges tile the values. */
        for (unsigned i = 0; i < RNND_HIST_BUCKETS; i++) {
                uint64_t lo = rnnd_hist_bucket_low(i), hi = rnnd_hist_bucket_high(i);

                ck_assert_uint_le(lo, hi);
                ck_assert_uint_eq(rnnd_hist_index(lo), i);
                ck_assert_uint_eq(rnnd_hist_index(hi), i);
                if (i + 1 < RNND_HIST_BUCKETS)
                        ck_assert_uint_eq(rnnd_hist_bucket_low(i + 1), hi + 1);
                if (lo >= 2 * RNND_HIST_SUB)
                        ck_assert((double)(hi - lo + 1) / (double)lo <= BUCKET_ERR + 1e-12);
        }
        ck_assert_uint_eq(rnnd_hist_bucket_high(RNND_HIST_BUCKETS - 1), RNND_HIST_MAX);
        ck_assert_uint_eq(rnnd_hist_index(UINT64_MAX), RNND_HIST_BUCKETS - 1);
        ck_assert_uint_eq(rnnd_hist_index(0), 0);
        ck_assert_uint_eq(rnnd_hist_index(2 * RNND_HIST_SUB - 1), 2 * RNND_HIST_SUB - 1);
}
END_TEST

/* The exact p-th percentile of sorted v[0..n): the ceil(p/100 n)-th value. */
static uint64_t exact(const uint64_t *v, size_t n, double p)
{
        size_t rank = (size_t)ceil(p / 100.0 * (double)n);

        return v[rank < 1 ? 0 : rank - 1];
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

/* Known data: 1..100000 ns, and a log-uniform spread of latencies from 10 us to 10 s. */
static const struct {
        const char *name;
        int kind;
} datasets[] = {{"linear", 0}, {"log-uniform", 1}};

START_TEST(test_percentiles)
{
        static uint64_t v[100000];
        static struct rnnd_hist h;
        const double ps[] = {0, 1, 25, 50, 90, 99, 99.9, 99.99, 100};
        size_t n = RNND_ELEMENTSOF(v);
        uint64_t seed = 12345;
        double sum = 0;

        rnnd_hist_init(&h);
        for (size_t i = 0; i < n; i++) {
                if (datasets[_i].kind == 0) {
                        v[i] = i + 1;
                } else {
                        seed = seed * 6364136223846793005u + 1442695040888963407u;
                        v[i] = (uint64_t)(1e4 * pow(1e6, (double)(seed >> 11) * 0x1.0p-53));
                }
                rnnd_hist_record(&h, v[i]);
                sum += (double)v[i];
        }
        qsort(v, n, sizeof(v[0]), cmp_u64);
        ck_assert_uint_eq(h.count, n);
        ck_assert_uint_eq(h.min, v[0]);
        ck_assert_uint_eq(h.max, v[n - 1]);
        ck_assert(fabs(rnnd_hist_mean(&h) - sum / (double)n) < 1e-6 * sum / (double)n);
        for (size_t k = 0; k < RNND_ELEMENTSOF(ps); k++) {
                uint64_t want = exact(v, n, ps[k]), got = rnnd_hist_percentile(&h, ps[k]);

                /* Never below the true value, and within one bucket above it. */
                ck_assert_msg(got >= want && (double)(got - want) <= BUCKET_ERR * (double)want,
                              "%s p%g: got %llu, want %llu", datasets[_i].name, ps[k],
                              (unsigned long long)got, (unsigned long long)want);
        }
        ck_assert_uint_eq(rnnd_hist_percentile(&h, 100), v[n - 1]);
}
END_TEST

START_TEST(test_small_exact)
{
        struct rnnd_hist h;

        rnnd_hist_init(&h);
        ck_assert_uint_eq(rnnd_hist_percentile(&h, 50), 0);
        ck_assert(rnnd_hist_mean(&h) == 0);
        /* Values under 2 x SUB are exact: 1, 2, 3, 4 -> p50 is 2, p75 is 3. */
        for (uint64_t x = 1; x <= 4; x++)
                rnnd_hist_record(&h, x);
        ck_assert_uint_eq(rnnd_hist_percentile(&h, 50), 2);
        ck_assert_uint_eq(rnnd_hist_percentile(&h, 75), 3);
        ck_assert_uint_eq(rnnd_hist_percentile(&h, 75.1), 4);
        ck_assert_uint_eq(rnnd_hist_percentile(&h, 0), 1);
}
END_TEST

START_TEST(test_add_and_clamp)
{
        static struct rnnd_hist a, b;

        rnnd_hist_init(&a);
        rnnd_hist_init(&b);
        rnnd_hist_record(&a, 1000);
        rnnd_hist_record(&b, 3000);
        rnnd_hist_record(&b, UINT64_MAX); /* past the top: counted, max stays exact */
        rnnd_hist_add(&a, &b);
        ck_assert_uint_eq(a.count, 3);
        ck_assert_uint_eq(a.min, 1000);
        ck_assert_uint_eq(a.max, UINT64_MAX);
        ck_assert_uint_eq(a.buckets[RNND_HIST_BUCKETS - 1], 1);
        ck_assert_uint_le(rnnd_hist_percentile(&a, 50), 3000 + 3000 / RNND_HIST_SUB);
        ck_assert_uint_ge(rnnd_hist_percentile(&a, 50), 3000);
}
END_TEST

static Suite *hist_suite(void)
{
        Suite *s = suite_create("hist");
        TCase *tc;

        tc = tcase_create("buckets");
        tcase_add_test(tc, test_buckets);
        suite_add_tcase(s, tc);
        tc = tcase_create("percentiles");
        tcase_add_loop_test(tc, test_percentiles, 0, RNND_ELEMENTSOF(datasets));
        tcase_add_test(tc, test_small_exact);
        tcase_add_test(tc, test_add_and_clamp);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(hist_suite)

/* test_metrics.c: the daemon's counters, histograms and Prometheus page (daemon/metrics.h). */
#include <string.h>

#include "alloc.h"
#include "check-main.h"
#include "metrics.h"

START_TEST(test_code_slots)
{
        ck_assert_str_eq(rnnd_metrics_code_label(rnnd_metrics_code_slot(200)), "200");
        ck_assert_str_eq(rnnd_metrics_code_label(rnnd_metrics_code_slot(503)), "503");
        ck_assert_str_eq(rnnd_metrics_code_label(rnnd_metrics_code_slot(418)), "other");
        ck_assert_uint_eq(rnnd_metrics_code_slot(418), RNND_CODE_SLOTS - 1);
}
END_TEST

START_TEST(test_hist_buckets)
{
        static struct rnnd_metrics_hist h;
        static struct rnnd_metrics_stat s;

        rnnd_metrics_hist_add(&h, 100000);       /* 0.1 ms: the first bucket, inclusive */
        rnnd_metrics_hist_add(&h, 100001);       /* just above: the second */
        rnnd_metrics_hist_add(&h, 60000000000u); /* 60 s: +Inf */
        ck_assert_uint_eq(h.b[0], 1);
        ck_assert_uint_eq(h.b[1], 1);
        ck_assert_uint_eq(h.b[RNND_METRICS_HIST_BUCKETS - 1], 1);
        ck_assert_uint_eq(h.sum_ns, 60000200001u);
        rnnd_metrics_stat_add(&s, 5);
        rnnd_metrics_stat_add(&s, 7);
        ck_assert_uint_eq(s.count, 2);
        ck_assert_uint_eq(s.ns, 12);
}
END_TEST

/* A table of one model "m" with versions 1 (not loaded) and 2 (not loaded either). */
static struct rnnd_metrics_counters other, model_c, v_c[2];
static struct rnnd_version_stats v_stats[2];

static void fake_model(void *cls, size_t i, const char **name,
                       const struct rnnd_metrics_counters **requests, size_t *n_versions,
                       bool *load_failed)
{
        (void)cls;
        ck_assert_uint_eq(i, 0);
        *name = "m";
        *requests = &model_c;
        *n_versions = 2;
        *load_failed = true; /* neither version loaded */
}

static void fake_version(void *cls, size_t i, size_t j, struct rnnd_metrics_version *ret)
{
        (void)cls;
        ck_assert_uint_eq(i, 0);
        memset(ret, 0, sizeof(*ret));
        ret->version = j + 1;
        ret->requests = &v_c[j];
        ret->stats = &v_stats[j];
}

START_TEST(test_page)
{
        struct rnnd_metrics_source src = {
                .models_loaded = 1,
                .inflight = 3,
                .answer_bytes = 4096,
                .shm_regions = 2,
                .other_requests = &other,
                .n_models = 1,
                .model = fake_model,
                .version = fake_version,
        };
        struct rnnd_strbuf b;
        char *page;

        rnnd_metrics_count(&other, 404);
        rnnd_metrics_count(&model_c, 404);
        rnnd_metrics_count(&v_c[1], 200);
        rnnd_metrics_count(&v_c[1], 200);
        rnnd_metrics_count(&v_c[1], 418);
        rnnd_strbuf_init(&b);
        rnnd_metrics_page(&b, &src);
        page = rnnd_strbuf_steal(&b, NULL);
        ck_assert_ptr_nonnull(page);
        ck_assert_ptr_nonnull(strstr(page, "\nrnnd_up 1\n"));
        ck_assert_ptr_nonnull(strstr(page, "\nrnnd_models_loaded 1\n"));
        /* The process's start, before this test ran. */
        ck_assert_ptr_nonnull(strstr(page, "\nrnnd_start_time_seconds 1"));
        ck_assert_ptr_nonnull(strstr(page, "\nrnnd_http_requests_in_flight 3\n"));
        ck_assert_ptr_nonnull(strstr(page, "\nrnnd_response_memory_bytes 4096\n"));
        ck_assert_ptr_nonnull(strstr(page, "\nrnnd_shm_regions 2\n"));
        ck_assert_ptr_nonnull(
                strstr(page, "\nrnnd_requests_total{model=\"\",version=\"\",code=\"404\"} 1\n"));
        ck_assert_ptr_nonnull(
                strstr(page, "\nrnnd_requests_total{model=\"m\",version=\"\",code=\"404\"} 1\n"));
        ck_assert_ptr_nonnull(
                strstr(page, "\nrnnd_requests_total{model=\"m\",version=\"2\",code=\"200\"} 2\n"));
        ck_assert_ptr_nonnull(strstr(
                page, "\nrnnd_requests_total{model=\"m\",version=\"2\",code=\"other\"} 1\n"));
        /* Version 1 answered nothing: no zero samples. */
        ck_assert_ptr_null(strstr(page, "version=\"1\",code="));
        /* Versions without a pool have no per-version samples, but every family is announced. */
        ck_assert_ptr_nonnull(strstr(page, "# TYPE rnnd_request_duration_seconds histogram\n"));
        ck_assert_ptr_null(strstr(page, "rnnd_request_duration_seconds_bucket"));
        /* Every model says whether its last load failed. */
        ck_assert_ptr_nonnull(strstr(page, "# TYPE rnnd_model_load_failed gauge\n"
                                           "rnnd_model_load_failed{model=\"m\"} 1\n"));
        rnnd_free(page);
}
END_TEST

static Suite *metrics_suite(void)
{
        Suite *s = suite_create("metrics");
        TCase *tc = tcase_create("metrics");

        tcase_add_test(tc, test_code_slots);
        tcase_add_test(tc, test_hist_buckets);
        tcase_add_test(tc, test_page);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(metrics_suite)

/*
 * test_cudnn_build.c: the cuDNN backend was built against a real toolkit: the
 * library reports cuDNN 9, with or without a GPU on this machine.
 */
#include "check-main.h"
#include "cudnn/cudnn.h"

START_TEST(test_versions)
{
        struct rnnd_cudnn_info info;

        rnnd_cudnn_info(&info);
        ck_assert_int_ge(info.cudnn_version, 90000);
        ck_assert_int_lt(info.cudnn_version, 100000);
        ck_assert_int_ge(info.cudart_version, 11000);
        if (info.device_count == 0)
                ck_assert_str_ne(info.why_no_gpu, "");
}
END_TEST

static Suite *cudnn_build_suite(void)
{
        Suite *s = suite_create("cudnn_build");
        TCase *tc = tcase_create("versions");

        tcase_add_test(tc, test_versions);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(cudnn_build_suite)

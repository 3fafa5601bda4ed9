/* test_error.c: the error table, rnnd_error_t helpers, dtypes and half floats. */
#include <math.h>
#include <string.h>

#include "alloc.h"
#include "check-main.h"
#include "error.h"
#include "tensor.h"

/* Each code's HTTP status and gRPC status code (gRPC's numbers: docs/DESIGN.md §11). */
static const struct {
        int code;
        int status;
        int grpc;
        const char *name;
} statuses[] = {
        {RNND_EINVAL, 400, 3, "EINVAL"},          {RNND_ENOTFOUND, 404, 5, "ENOTFOUND"},
        {RNND_EMETHOD, 405, 12, "EMETHOD"},       {RNND_ELENGTHREQ, 411, 3, "ELENGTHREQ"},
        {RNND_ETOOBIG, 413, 8, "ETOOBIG"},        {RNND_EUNAVAIL, 503, 14, "EUNAVAIL"},
        {RNND_ETIMEDOUT, 503, 4, "ETIMEDOUT"},    {RNND_EINTERNAL, 500, 13, "EINTERNAL"},
        {RNND_ENOMEM, 500, 8, "ENOMEM"},          {RNND_EAUTH, 401, 16, "EAUTH"},
        {RNND_ECANCELED, 499, 1, "ECANCELED"},    {RNND_ELIMIT, 400, 3, "ELIMIT"},
        {RNND_EMEDIATYPE, 415, 12, "EMEDIATYPE"}, {-9999, 500, 13, "EUNKNOWN"},
};

START_TEST(test_http_status)
{
        ck_assert_int_eq(rnnd_error_http_status(statuses[_i].code), statuses[_i].status);
        ck_assert_int_eq(rnnd_error_grpc_status(statuses[_i].code), statuses[_i].grpc);
        ck_assert_str_eq(rnnd_strerror_name(statuses[_i].code), statuses[_i].name);
        ck_assert_int_eq(rnnd_error_grpc_status(0), 0);
}
END_TEST

START_TEST(test_set_and_prefix)
{
        rnnd_error_t e = {0};
        char longarg[600];

        ck_assert_int_eq(rnnd_error_set(&e, RNND_EINVAL, "batch %u > max %u", 9u, 8u), RNND_EINVAL);
        ck_assert_str_eq(e.msg, "batch 9 > max 8");
        rnnd_error_prefix(&e, "input '%s'", "x");
        ck_assert_int_eq(e.code, RNND_EINVAL);
        ck_assert_str_eq(e.msg, "input 'x': batch 9 > max 8");
        ck_assert_int_eq(rnnd_error_set(NULL, RNND_ENOMEM, "ignored"), RNND_ENOMEM);
        rnnd_error_prefix(NULL, "ignored");
        memset(longarg, 'a', sizeof(longarg) - 1);
        longarg[sizeof(longarg) - 1] = '\0';
        rnnd_error_set(&e, RNND_EINVAL, "%s", longarg);
        ck_assert_uint_eq(strlen(e.msg), sizeof(e.msg) - 1);
}
END_TEST

START_TEST(test_dtypes)
{
        ck_assert_int_eq(rnnd_dtype_from_name("FP32"), RNND_DT_F32);
        ck_assert_int_eq(rnnd_dtype_from_st_name("BF16"), RNND_DT_BF16);
        ck_assert_int_eq(rnnd_dtype_from_name("F32"), RNND_DT_INVALID);
        ck_assert_uint_eq(rnnd_dtype_size(RNND_DT_I64), 8);
        ck_assert_str_eq(rnnd_dtype_name(RNND_DT_I32), "INT32");
        ck_assert_str_eq(rnnd_dtype_st_name(RNND_DT_F16), "F16");
}
END_TEST

START_TEST(test_half)
{
        /* Every finite half round-trips through float exactly. */
        for (uint32_t h = 0; h < 0x10000; h++) {
                if ((h & 0x7c00) == 0x7c00)
                        continue;
                ck_assert_uint_eq(rnnd_f32_to_f16(rnnd_f16_to_f32((uint16_t)h)), h);
        }
        ck_assert_float_eq(rnnd_f16_to_f32(0x3c00), 1.0f);
        ck_assert_float_eq(rnnd_f16_to_f32(0xc000), -2.0f);
        ck_assert_uint_eq(rnnd_f32_to_f16(1e6f), 0x7c00);               /* overflow -> Inf */
        ck_assert_uint_eq(rnnd_f32_to_f16(1.0f + 1.0f / 4096), 0x3c00); /* tie -> even */
        ck_assert(isnan(rnnd_f16_to_f32(rnnd_f32_to_f16(NAN))));
        ck_assert_float_eq(rnnd_bf16_to_f32(rnnd_f32_to_bf16(1.5f)), 1.5f);
        ck_assert_uint_eq(rnnd_f32_to_bf16(1.0f + 1.0f / 256), 0x3f80); /* tie -> even */
}
END_TEST

START_TEST(test_numel)
{
        uint64_t s[3] = {1000, 1000, 1000}, n = 7;

        ck_assert_int_eq(rnnd_shape_numel(s, 3, UINT64_MAX, &n), 0);
        ck_assert_uint_eq(n, 1000000000u);
        ck_assert_int_eq(rnnd_shape_numel(s, 3, 999999999u, &n), RNND_ELIMIT);
        s[0] = UINT64_MAX / 2;
        ck_assert_int_eq(rnnd_shape_numel(s, 3, UINT64_MAX, &n), RNND_ELIMIT);
}
END_TEST

START_TEST(test_shape_format)
{
        uint64_t s[3] = {2, 5, 70000};
        char buf[32], small[8];

        ck_assert_str_eq(rnnd_shape_format(buf, sizeof(buf), s, 3), "[2, 5, 70000]");
        ck_assert_str_eq(rnnd_shape_format(buf, sizeof(buf), s, 0), "[]");
        /* Cut short, never past the buffer. */
        ck_assert_str_eq(rnnd_shape_format(small, sizeof(small), s, 3), "[2, 5, ");
}
END_TEST

START_TEST(test_alloc_fail)
{
        void *p;

        rnnd_alloc_fail_after(1);
        p = rnnd_malloc(8);
        ck_assert_ptr_nonnull(p);
        ck_assert_ptr_null(rnnd_malloc(8));
        rnnd_alloc_fail_after(-1);
        rnnd_free(p);
        ck_assert_ptr_null(rnnd_mallocarray(SIZE_MAX / 2, 4));
}
END_TEST

static Suite *error_suite(void)
{
        Suite *s = suite_create("error");
        TCase *tc;

        tc = tcase_create("http_status");
        tcase_add_loop_test(tc, test_http_status, 0, RNND_ELEMENTSOF(statuses));
        suite_add_tcase(s, tc);
        tc = tcase_create("messages");
        tcase_add_test(tc, test_set_and_prefix);
        suite_add_tcase(s, tc);
        tc = tcase_create("dtypes");
        tcase_add_test(tc, test_dtypes);
        tcase_add_test(tc, test_half);
        tcase_add_test(tc, test_numel);
        tcase_add_test(tc, test_shape_format);
        suite_add_tcase(s, tc);
        tc = tcase_create("alloc");
        tcase_add_test(tc, test_alloc_fail);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(error_suite)

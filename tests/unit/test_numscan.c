/*
 * test_numscan.c: tensor data read from JSON text, the fast path: exact
 * values and byte counts where everything matches, and a 0 (the caller's
 * jansson path then reports the error) for every kind of mismatch.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-main.h"
#include "numscan.h"

static const struct {
        const char *text;
        uint64_t shape[3];
        unsigned ndim;
        bool flat;
        rnnd_dtype_t dt;
        size_t want; /* bytes read, 0: gives up */
} cases[] = {
        {"[[1,2],[3,4]]", {2, 2}, 2, false, RNND_DT_F32, 13},
        {" [ [ 1 , 2 ] ,\n[3,\t4]\r]  ,", {2, 2}, 2, false, RNND_DT_F32, 23},
        {"[1,2,3,4]}", {2, 2}, 2, true, RNND_DT_F32, 9},
        {"[[[0.5],[-2.5e-3]]]", {1, 2, 1}, 3, false, RNND_DT_F32, 19},
        {"[9223372036854775807,-9223372036854775808]", {2}, 1, false, RNND_DT_I64, 42},
        /* gives up: the jansson path has the message */
        {"[[1,2],[3]]", {2, 2}, 2, false, RNND_DT_F32, 0},     /* a wrong count */
        {"[[1,2],[3,4,5]]", {2, 2}, 2, false, RNND_DT_F32, 0}, /* one too many */
        {"[[1,2],[3,4],[5,6]]", {2, 2}, 2, false, RNND_DT_F32, 0},
        {"[1,2,3,4]", {2, 2}, 2, false, RNND_DT_F32, 0}, /* nesting */
        {"[[1,2],[3,[4]]]", {2, 2}, 2, false, RNND_DT_F32, 0},
        {"[[1,2],[3,4]]", {2, 2}, 2, true, RNND_DT_F32, 0}, /* flat wanted */
        {"[1,NaN]", {2}, 1, false, RNND_DT_F32, 0},
        {"[1,Infinity]", {2}, 1, false, RNND_DT_F32, 0},
        {"[1,-Infinity]", {2}, 1, false, RNND_DT_F32, 0},
        {"[1,01]", {2}, 1, false, RNND_DT_F32, 0},
        {"[1,1.]", {2}, 1, false, RNND_DT_F32, 0},
        {"[1,\"2\"]", {2}, 1, false, RNND_DT_F32, 0},
        {"[1,null]", {2}, 1, false, RNND_DT_F32, 0},
        {"[1,true]", {2}, 1, false, RNND_DT_F32, 0},
        {"[1,{}]", {2}, 1, false, RNND_DT_F32, 0},
        {"[1,2,]", {2}, 1, false, RNND_DT_F32, 0},
        {"[1 2]", {2}, 1, false, RNND_DT_F32, 0},
        {"[1,2", {2}, 1, false, RNND_DT_F32, 0},
        {"[1,3.5e38]", {2}, 1, false, RNND_DT_F32, 0},        /* not finite in FP32 */
        {"[1,3.4028235e38]", {2}, 1, false, RNND_DT_F32, 16}, /* FLT_MAX is */
        {"[1,1.5]", {2}, 1, false, RNND_DT_I64, 0},           /* INT64: integers only */
        {"[1,1e2]", {2}, 1, false, RNND_DT_I64, 0},
        {"[1,9223372036854775808]", {2}, 1, false, RNND_DT_I64, 0},
        /* integer text beyond int64 in FP32: jansson refuses it ("too big integer") */
        {"[1,9223372036854775808]", {2}, 1, false, RNND_DT_F32, 0},
        {"[1,-9223372036854775809]", {2}, 1, false, RNND_DT_F32, 0},
        {"[1,9223372036854775807]", {2}, 1, false, RNND_DT_F32, 23},
        {"[1,9223372036854775808.0]", {2}, 1, false, RNND_DT_F32, 25}, /* a real is read */
        {"[1,92233720368547758080e0]", {2}, 1, false, RNND_DT_F32, 26},
        {"[1,2]", {2}, 1, false, RNND_DT_F16, 0}, /* other dtypes: jansson */
        {"[]", {0}, 1, false, RNND_DT_F32, 0},
};

START_TEST(test_cases)
{
        union {
                float f[8];
                int64_t i[8];
        } dst;
        size_t got = rnnd_numscan(cases[_i].text, strlen(cases[_i].text), cases[_i].shape,
                                  cases[_i].ndim, cases[_i].flat, cases[_i].dt, &dst);

        ck_assert_msg(got == cases[_i].want, "%s: read %zu, want %zu", cases[_i].text, got,
                      cases[_i].want);
        if (got == 0)
                return;
        if (_i == 0 || _i == 2)
                for (int k = 0; k < 4; k++)
                        ck_assert(dst.f[k] == (float)(k + 1));
        if (_i == 3)
                ck_assert(dst.f[0] == 0.5f && dst.f[1] == (float)-2.5e-3);
        if (_i == 4)
                ck_assert(dst.i[0] == INT64_MAX && dst.i[1] == INT64_MIN);
}
END_TEST

/* Random [B][T][F] tensors as %.9g and %.17g text: each value is (float)strtod of its text. */
START_TEST(test_random)
{
        enum { B = 3, T = 7, F = 5, N = B * T * F };
        static char text[N * 32 + 64];
        float got[N], want[N];
        uint64_t shape[3] = {B, T, F}, st = 0x1234567887654321u;

        for (int round = 0; round < 2000; round++) {
                size_t k = 0;

                k += (size_t)snprintf(text + k, sizeof(text) - k, "[");
                for (int b = 0; b < B; b++) {
                        k += (size_t)snprintf(text + k, sizeof(text) - k, "%s[", b ? "," : "");
                        for (int t = 0; t < T; t++) {
                                k += (size_t)snprintf(text + k, sizeof(text) - k, "%s[",
                                                      t ? ", " : "");
                                for (int f = 0; f < F; f++) {
                                        int i = (b * T + t) * F + f;
                                        double x;
                                        char num[32];

                                        st ^= st << 13;
                                        st ^= st >> 7;
                                        st ^= st << 17;
                                        x = ldexp((double)(st >> 11) / 9007199254740992.0 - 0.5,
                                                  (int)(st % 40) - 20);
                                        snprintf(num, sizeof(num), round % 2 ? "%.17g" : "%.9g", x);
                                        want[i] = (float)strtod(num, NULL);
                                        k += (size_t)snprintf(text + k, sizeof(text) - k, "%s%s",
                                                              f ? "," : "", num);
                                }
                                k += (size_t)snprintf(text + k, sizeof(text) - k, "]");
                        }
                        k += (size_t)snprintf(text + k, sizeof(text) - k, "]");
                }
                k += (size_t)snprintf(text + k, sizeof(text) - k, "]");
                if (rnnd_numscan(text, k, shape, 3, false, RNND_DT_F32, got) != k)
                        ck_abort_msg("round %d gave up: %.200s", round, text);
                if (memcmp(got, want, sizeof(got)) != 0)
                        ck_abort_msg("round %d: a value differs from (float)strtod", round);
        }
}
END_TEST

static Suite *numscan_suite(void)
{
        Suite *s = suite_create("numscan");
        TCase *tc = tcase_create("core");

        tcase_add_loop_test(tc, test_cases, 0, sizeof(cases) / sizeof(cases[0]));
        tcase_add_test(tc, test_random);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(numscan_suite)

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

/*
 * 10^6 decimals of the short form numscan.c reads inline (-?D+(.D+)?, no
 * exponent), 1 to 21 digits with the point anywhere, leading zeros and -0
 * among them, so that both the inline reader and its fallback (more than 19
 * digits, a mantissa past 2^53) are taken, and a third of them 14 to 16
 * digits next to a midpoint between two floats, where only the correctly
 * rounded double gives the right float: each value is (float)strtod of its
 * text, bit for bit, and the inline reader gives the same bytes read.
 */
START_TEST(test_short_forms)
{
        enum { N = 1000, ROUNDS = 1000 };
        static char text[N * 32 + 8];
        static float got[N], want[N];
        uint64_t shape[1] = {N}, st = 0x9e3779b97f4a7c15u;

        for (int round = 0; round < ROUNDS; round++) {
                size_t k = 0;

                text[k++] = '[';
                for (int i = 0; i < N; i++) {
                        char num[32];
                        size_t n = 0;
                        unsigned digits, point;

                        st ^= st << 13;
                        st ^= st >> 7;
                        st ^= st << 17;
                        if (round % 3 == 2) {
                                /* near the midpoint of two floats in [2^-10, 2^10): where a
                                 * double off by one ulp rounds to the other float */
                                float f = ldexpf(1.0f + (float)(st >> 41) / 8388608.0f,
                                                 (int)(st % 20) - 10);
                                double mid = ((double)f + (double)nextafterf(f, 2e10f)) / 2;

                                n = (size_t)snprintf(num, sizeof(num), "%.*g",
                                                     14 + (int)((st >> 32) % 3), mid);
                                goto done;
                        }
                        digits = 1 + (unsigned)(st % 21);
                        point = (unsigned)((st >> 8) % (digits + 1)); /* digits before the point */
                        if (point == digits && digits > 18)
                                point--; /* integer text past int64 is refused (jansson's rule) */
                        if ((st >> 16) & 1)
                                num[n++] = '-';
                        if (point == 0)
                                num[n++] = '0'; /* 0.xxx */
                        for (unsigned d = 0; d < digits; d++) {
                                unsigned digit = (unsigned)((st >> (20 + 2 * (d % 20))) % 10);

                                if (d == point && d > 0)
                                        num[n++] = '.';
                                if (d == 0 && point == 0)
                                        num[n++] = '.';
                                /* no leading zero before the point but a lone "0" */
                                if (d == 0 && point > 1 && digit == 0)
                                        digit = 1 + (unsigned)(st % 9);
                                if (round % 4 == 0 && d > 0)
                                        digit = (unsigned)(st >> 60) % 2 ? 0 : 9; /* runs */
                                num[n++] = (char)('0' + digit);
                        }
                        num[n] = '\0';
                done:
                        want[i] = (float)strtod(num, NULL);
                        if (i > 0)
                                text[k++] = ',';
                        memcpy(text + k, num, n);
                        k += n;
                }
                text[k++] = ']';
                if (rnnd_numscan(text, k, shape, 1, false, RNND_DT_F32, got) != k)
                        ck_abort_msg("round %d gave up: %.200s", round, text);
                for (int i = 0; i < N; i++)
                        if (memcmp(&got[i], &want[i], sizeof(float)) != 0)
                                ck_abort_msg("round %d value %d: %a, want %a", round, i, got[i],
                                             want[i]);
        }
}
END_TEST

static Suite *numscan_suite(void)
{
        Suite *s = suite_create("numscan");
        TCase *tc = tcase_create("core");

        tcase_add_loop_test(tc, test_cases, 0, sizeof(cases) / sizeof(cases[0]));
        tcase_add_test(tc, test_random);
        tcase_add_test(tc, test_short_forms);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(numscan_suite)

/* test_fmtfloat.c: the shortest round-trip float32 printer against strtof and %.*e. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-main.h"
#include "fmtfloat.h"

static float from_bits(uint32_t u)
{
        float x;

        memcpy(&x, &u, sizeof(x));
        return x;
}

static const struct {
        uint32_t bits;
        const char *text;
} cases[] = {
        {0x00000000, "0"},
        {0x80000000, "-0.0"},
        {0x3f800000, "1"},
        {0xc0200000, "-2.5"},
        {0x3dcccccd, "0.1"},
        {0x42c80000, "100"},
        {0x4b800000, "16777216"},
        {0x4cbebc20, "100000000"},
        {0x4e6e6b28, "1e+09"},
        {0x501502f9, "1e+10"},
        {0x3727c5ac, "0.00001"},
        {0x358637bd, "1e-06"},
        {0x374f204a, "0.000012345679"},
        {0x4ceb79a3, "123456790"},
        {0x47f12065, "123456.79"},
        {0x7f7fffff, "3.4028235e+38"},
        {0xff7fffff, "-3.4028235e+38"},
        {0x00800000, "1.1754944e-38"},
        {0x007fffff, "1.1754942e-38"},
        {0x00000001, "1e-45"},
        {0x00000002, "3e-45"},
        {0x00000007, "1e-44"},
        {0x00000008, "1.1e-44"},
        {0x80000001, "-1e-45"},
        {0x7f800000, "null"},
        {0xff800000, "null"},
        {0x7fc00000, "null"},
};

START_TEST(test_cases)
{
        char buf[RNND_FMTFLOAT_LEN];
        size_t n = rnnd_fmtfloat(from_bits(cases[_i].bits), buf);

        ck_assert_str_eq(buf, cases[_i].text);
        ck_assert_uint_eq(n, strlen(cases[_i].text));
}
END_TEST

/*
 * x's text reads back as x (the sign of zero included), has no more
 * significant digits than the fewest that do, and of those it is the
 * closest to x (what %.*e gives, bar ties of the decimal rounding).
 * Returns NULL or what is wrong.
 */
static const char *check_one(uint32_t u, bool shortest, char *buf)
{
        float x = from_bits(u), y;
        char ref[40], dg[16], *s = buf;
        int nd = 0, p;

        if (!isfinite(x))
                return NULL;
        if (rnnd_fmtfloat(x, buf) >= RNND_FMTFLOAT_LEN)
                return "too long";
        y = strtof(buf, NULL);
        if (memcmp(&x, &y, sizeof(x)) != 0)
                return "does not read back";
        if (!shortest || x == 0)
                return NULL;
        for (p = 1; p <= 9; p++) {
                snprintf(ref, sizeof(ref), "%.*e", p - 1, (double)x);
                if (strtof(ref, NULL) == x)
                        break;
        }
        /* buf's significant digits, leading and trailing zeros dropped */
        for (; *s != '\0' && *s != 'e'; s++)
                if (*s >= '1' && *s <= '9' ? true : *s == '0' && nd > 0)
                        dg[nd++] = *s;
        while (nd > 0 && dg[nd - 1] == '0')
                nd--;
        if (nd > p)
                return "not the shortest";
        if (nd < p)
                return NULL; /* below a power of two, where %.*e's nearest is outside the gap */
        /* ref's digits, without the point, trailing zeros dropped */
        {
                char rd[16];
                int rn = 0;

                for (s = ref; *s != '\0' && *s != 'e'; s++)
                        if (*s >= '0' && *s <= '9')
                                rd[rn++] = *s;
                while (rn > 0 && rd[rn - 1] == '0')
                        rn--;
                if (rn != nd || memcmp(rd, dg, (size_t)nd) != 0)
                        return "not the closest";
        }
        return NULL;
}

/* Every subnormal below 2^-140 and every float near the powers of ten and two. */
START_TEST(test_edges)
{
        char buf[RNND_FMTFLOAT_LEN];
        const char *why;

        for (uint32_t u = 0; u < 0x00001000; u++) {
                why = check_one(u, true, buf);
                if (why != NULL)
                        ck_abort_msg("%08x -> %s: %s", u, buf, why);
        }
        for (int k = -45; k <= 38; k++) {
                char dec[16];
                float p10;
                uint32_t u;

                snprintf(dec, sizeof(dec), "1e%d", k);
                p10 = strtof(dec, NULL);
                memcpy(&u, &p10, sizeof(u));
                for (uint32_t v = u - 2; v <= u + 2; v++) {
                        why = check_one(v, true, buf);
                        if (why != NULL)
                                ck_abort_msg("%08x -> %s: %s", v, buf, why);
                        why = check_one(v | 0x80000000u, true, buf);
                        if (why != NULL)
                                ck_abort_msg("-%08x -> %s: %s", v, buf, why);
                }
        }
        for (uint32_t e = 1; e < 255; e++)
                for (uint32_t d = 0; d < 3; d++) {
                        uint32_t u = (e << 23) - 1 + d;

                        why = check_one(u, true, buf);
                        if (why != NULL)
                                ck_abort_msg("%08x -> %s: %s", u, buf, why);
                }
}
END_TEST

/*
 * Loops fail with ck_abort_msg() under an if: every ck_assert writes its
 * location to Check's pipe, a system call per element.
 *
 * 10^7 random bit patterns read back (tests/bench/numbers_bench.c checks all
 * 2^32); one in 64 is also checked for the shortest, closest digits.
 */
START_TEST(test_random)
{
        char buf[RNND_FMTFLOAT_LEN];
        uint64_t state = 0x9e3779b97f4a7c15u;

        for (uint32_t i = 0; i < 10000000; i++) {
                uint32_t u;
                const char *why;

                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                u = (uint32_t)(state >> 16);
                why = check_one(u, i % 64 == 0, buf);
                if (why != NULL)
                        ck_abort_msg("%08x -> %s: %s", u, buf, why);
        }
}
END_TEST

static Suite *fmtfloat_suite(void)
{
        Suite *s = suite_create("fmtfloat");
        TCase *tc = tcase_create("core");

        tcase_set_timeout(tc, 120);
        tcase_add_loop_test(tc, test_cases, 0, sizeof(cases) / sizeof(cases[0]));
        tcase_add_test(tc, test_edges);
        tcase_add_test(tc, test_random);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(fmtfloat_suite)

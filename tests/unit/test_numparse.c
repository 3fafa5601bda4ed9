/*
 * test_numparse.c: JSON numbers read as strtod() reads them, on a generated
 * corpus of 10^6 decimals (long mantissas, exponents at the limits,
 * subnormals, halfway points between doubles and between floats, and their
 * neighbours), and the grammar's refusals.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-main.h"
#include "error.h"
#include "numparse.h"

static uint64_t rng = 0x853c49e6748fea9bu;

static uint64_t next(void)
{
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        return rng;
}

/* NULL when text reads as strtod() reads it (the float too), else what differs. */
static const char *check_text(const char *text)
{
        struct rnnd_number v;
        double want = strtod(text, NULL);
        float wf = (float)want, gf;

        if (rnnd_numparse(text, strlen(text), &v) != 0)
                return "refused";
        if (v.len != strlen(text))
                return "stopped early";
        if (memcmp(&v.d, &want, sizeof(want)) != 0)
                return "double differs";
        gf = (float)v.d;
        if (memcmp(&gf, &wf, sizeof(wf)) != 0)
                return "float differs";
        return NULL;
}

/* A decimal of nd random digits, a point after ip of them, and exponent e (none when 0). */
static void random_decimal(char *buf, size_t cap, int nd, int ip, int e)
{
        size_t k = 0;

        if (next() & 1)
                buf[k++] = '-';
        for (int i = 0; i < nd && k + 16 < cap; i++) {
                if (i == ip)
                        buf[k++] = '.';
                buf[k++] = (char)('0' + (i == 0 && ip > 1 ? 1 + next() % 9 : next() % 10));
        }
        if (e != 0)
                k += (size_t)snprintf(buf + k, cap - k, "e%d", e);
        buf[k] = '\0';
}

/* Writes the exact decimal of a long double (a halfway point) and its neighbours' tweaks. */
static const char *check_halfway(long double mid)
{
        char buf[1200];
        const char *why;
        int n = snprintf(buf, sizeof(buf), "%.780Le", mid);
        char *e = strchr(buf, 'e');
        char *last;

        if (n <= 0 || e == NULL)
                return "snprintf";
        /* trim trailing zeros of the mantissa, keeping the exponent */
        last = e - 1;
        while (*last == '0')
                last--;
        memmove(last + 1, e, strlen(e) + 1);
        if ((why = check_text(buf)) != NULL)
                return why;
        /* one more digit 1 (just above), or the last digit less one (just below) */
        e = strchr(buf, 'e');
        {
                char up[1200], down[1200];
                size_t m = (size_t)(e - buf);

                memcpy(up, buf, m);
                up[m] = '1';
                strcpy(up + m + 1, e);
                if ((why = check_text(up)) != NULL)
                        return why;
                /* and a 1 far past the 800 digits read: only the sticky digit sees it */
                if (m < 790) {
                        memcpy(up, buf, m);
                        memset(up + m, '0', 860 - m);
                        up[860] = '1';
                        strcpy(up + 861, e);
                        if ((why = check_text(up)) != NULL)
                                return why;
                }
                strcpy(down, buf);
                if (down[m - 1] > '0' && down[m - 1] <= '9') {
                        down[m - 1]--;
                        if ((why = check_text(down)) != NULL)
                                return why;
                }
        }
        return NULL;
}

START_TEST(test_corpus)
{
        char buf[1200];
        const char *why;
        int count = 0;

        for (int i = 0; i < 700000; i++, count++) {
                int kind = (int)(next() % 6), nd, ip, e;

                switch (kind) {
                case 0: /* short, as JSON writers send: the fast path */
                        nd = 1 + (int)(next() % 9);
                        random_decimal(buf, sizeof(buf), nd, (int)(next() % (unsigned)nd) + 1,
                                       (int)(next() % 3) == 0 ? (int)(next() % 41) - 20 : 0);
                        break;
                case 1: /* 17 digits: Python's repr of a double */
                        random_decimal(buf, sizeof(buf), 17, 1, (int)(next() % 80) - 40);
                        break;
                case 2: /* long mantissas */
                        nd = 20 + (int)(next() % 900);
                        ip = 1 + (int)(next() % (unsigned)nd);
                        random_decimal(buf, sizeof(buf), nd, ip, (int)(next() % 700) - 350);
                        break;
                case 3: /* exponents at the limits of double and float */
                        nd = 1 + (int)(next() % 20);
                        e = (int)(next() % 2) ? 300 + (int)(next() % 30)
                                              : -300 - (int)(next() % 50);
                        if (next() % 2)
                                e = (int)(next() % 2) ? 36 + (int)(next() % 5)
                                                      : -36 - (int)(next() % 12);
                        random_decimal(buf, sizeof(buf), nd, 1, e);
                        break;
                case 4: { /* a random double's shortest and 17-digit forms */
                        uint64_t u = next();
                        double d;

                        memcpy(&d, &u, sizeof(d));
                        if (!isfinite(d))
                                d = 1.5;
                        snprintf(buf, sizeof(buf), (next() & 1) ? "%.17g" : "%.9g", d);
                        if (strchr(buf, 'n') != NULL) /* inf, nan */
                                strcpy(buf, "1");
                        break;
                }
                default: { /* subnormal doubles */
                        uint64_t u = next() >> (12 + next() % 52);
                        double d;

                        memcpy(&d, &u, sizeof(d));
                        snprintf(buf, sizeof(buf), "%.*e", (int)(next() % 20), d);
                        break;
                }
                }
                why = check_text(buf);
                if (why != NULL)
                        ck_abort_msg("%s: %s", buf, why);
        }
        /* Halfway points between neighbouring doubles, and between floats (doubles themselves). */
        for (int i = 0; i < 110000; i++, count += 3) {
                uint64_t u = next() >> (next() % 4 == 0 ? 12 : 1);
                double d, d2;
                long double mid;

                memcpy(&d, &u, sizeof(d));
                if (!isfinite(d))
                        continue;
                d2 = nextafter(d, INFINITY);
                mid = ((long double)d + (long double)d2) / 2;
                if ((why = check_halfway(mid)) != NULL)
                        ck_abort_msg("between doubles %a and %a: %s", d, d2, why);
        }
        for (int i = 0; i < 110000; i++, count += 3) {
                uint32_t u = (uint32_t)next() & 0x7fffffffu;
                float f, f2;

                memcpy(&f, &u, sizeof(f));
                if (!isfinite(f) || f == FLT_MAX)
                        continue;
                f2 = nextafterf(f, INFINITY);
                if ((why = check_halfway(((long double)f + (long double)f2) / 2)) != NULL)
                        ck_abort_msg("between floats %a and %a: %s", (double)f, (double)f2, why);
        }
        ck_assert_int_ge(count, 1000000);
}
END_TEST

static const struct {
        const char *text;
        size_t len; /* what it reads; 0: refused */
        double d;
        int is_int;
        int64_t i;
} cases[] = {
        {"0", 1, 0, 1, 0},
        {"-0", 2, -0.0, 1, 0},
        {"12,", 2, 12, 1, 12},
        {"-7]", 2, -7, 1, -7},
        {"1.5", 3, 1.5, 0, 0},
        {"1e2", 3, 100, 0, 0},
        {"1E+2", 4, 100, 0, 0},
        {"25e-1 ", 5, 2.5, 0, 0},
        {"0.000001", 8, 1e-6, 0, 0},
        {"9223372036854775807", 19, 9223372036854775807.0, 1, INT64_MAX},
        {"-9223372036854775808", 20, -9223372036854775808.0, 1, INT64_MIN},
        {"9223372036854775808", 19, 9223372036854775808.0, 0, 0},
        {"123456789012345678901234567890", 30, 1.2345678901234568e29, 0, 0},
        {"1e400", 5, HUGE_VAL, 0, 0},
        {"-1e400", 6, -HUGE_VAL, 0, 0},
        {"1e-400", 6, 0, 0, 0},
        {"0e99999999999", 13, 0, 0, 0},
        {"0.0000000000000000000000000000000000000000000000001e49", 54, 1, 0, 0},
        {"", 0, 0, 0, 0},
        {"-", 0, 0, 0, 0},
        {"+1", 0, 0, 0, 0},
        {"01", 0, 0, 0, 0},
        {"-01", 0, 0, 0, 0},
        {".5", 0, 0, 0, 0},
        {"1.", 0, 0, 0, 0},
        {"1.e3", 0, 0, 0, 0},
        {"1e", 0, 0, 0, 0},
        {"1e+", 0, 0, 0, 0},
        {"NaN", 0, 0, 0, 0},
        {"Infinity", 0, 0, 0, 0},
        {"-Infinity", 0, 0, 0, 0},
        {"0x10", 1, 0, 1, 0}, /* reads the 0: the caller refuses the x */
        {"--1", 0, 0, 0, 0},
};

START_TEST(test_cases)
{
        struct rnnd_number v;
        int r = rnnd_numparse(cases[_i].text, strlen(cases[_i].text), &v);

        if (cases[_i].len == 0) {
                ck_assert_int_eq(r, RNND_EINVAL);
                return;
        }
        ck_assert_int_eq(r, 0);
        ck_assert_uint_eq(v.len, cases[_i].len);
        ck_assert_msg(memcmp(&v.d, &cases[_i].d, sizeof(double)) == 0, "%s: %.17g", cases[_i].text,
                      v.d);
        ck_assert_int_eq(v.is_int, cases[_i].is_int);
        if (v.is_int)
                ck_assert_int_eq(v.i, cases[_i].i);
}
END_TEST

/* The text need not end in a NUL: a number cut by n reads only what n allows. */
START_TEST(test_bounded)
{
        struct rnnd_number v;

        ck_assert_int_eq(rnnd_numparse("12345", 3, &v), 0);
        ck_assert_uint_eq(v.len, 3);
        ck_assert(v.d == 123);
        ck_assert_int_eq(rnnd_numparse("1.5", 2, &v), RNND_EINVAL);
        ck_assert_int_eq(rnnd_numparse("1e5", 2, &v), RNND_EINVAL);
}
END_TEST

static Suite *numparse_suite(void)
{
        Suite *s = suite_create("numparse");
        TCase *tc = tcase_create("core");

        tcase_set_timeout(tc, 240);
        tcase_add_loop_test(tc, test_cases, 0, sizeof(cases) / sizeof(cases[0]));
        tcase_add_test(tc, test_bounded);
        tcase_add_test(tc, test_corpus);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(numparse_suite)

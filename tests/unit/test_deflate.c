/*
 * test_deflate.c: answers compressed as Accept-Encoding asks (proto/deflate.c):
 * the header's lists, q-values, `*`, identity, case and junk; and gzip and
 * deflate output, text and tensors, that proto/inflate.c (and so zlib) reads
 * back byte for byte, empty, small, incompressible and large.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "check-main.h"
#include "deflate.h"
#include "tensor.h"

#define G RNND_ENCODING_GZIP
#define D RNND_ENCODING_DEFLATE
#define I RNND_ENCODING_IDENTITY

static const struct {
        const char *header;
        enum rnnd_encoding want;
} cases[] = {
        {NULL, I},
        {"", I},
        {"gzip", G},
        {"GZip", G},
        {"x-gzip", G},
        {"deflate", D},
        {"gzip, deflate, br, zstd", G}, /* curl --compressed */
        {"deflate, gzip", G},           /* a tie goes to gzip */
        {"deflate;q=1, gzip;q=0.5", D},
        {"gzip;q=0.5, deflate;q=0.8", D},
        {"gzip ; q=0.5 ,deflate ;Q=0.25", G},
        {"gzip;q=0", I},
        {"gzip;q=0.000", I},
        {"gzip;q=0, deflate", D},
        {"br", I},
        {"identity", I},
        {"*", G},
        {"*;q=0", I},
        {"*;q=0.5, gzip;q=0", D},
        {"gzip;q=0.5, identity", I}, /* identity preferred */
        {"gzip, identity;q=0.5", G},
        {"gzip;q=1.5", I}, /* not a qvalue: the element is skipped */
        {"gzip;q=0.1234", I},
        {"gzip;q=", I},
        {"gzip;q=abc, deflate", D},
        {"gzip;level=9", G}, /* other parameters are no matter */
        {"gzip deflate", I}, /* not a list */
        {",,, ,gzip,,", G},
        {"gzipx, xgzip, gzi", I},
        {"  \t gzip \t ", G},
};

START_TEST(test_accept)
{
        ck_assert_msg(rnnd_accept_encoding(cases[_i].header) == cases[_i].want,
                      "Accept-Encoding '%s': got %d, want %d",
                      cases[_i].header ? cases[_i].header : "(none)",
                      (int)rnnd_accept_encoding(cases[_i].header), (int)cases[_i].want);
}
END_TEST

/* n bytes: JSON-like text (compressible) or xorshift bytes (not). */
static char *sample(size_t n, bool noise)
{
        char *s = malloc(n + 1);
        uint32_t x = 2463534242u;

        ck_assert_ptr_nonnull(s);
        for (size_t i = 0; i < n; i++) {
                x ^= x << 13, x ^= x >> 17, x ^= x << 5;
                s[i] = noise ? (char)x : "[0.25, -1.5, 3e-07],"[i % 20];
        }
        return s;
}

static const size_t sizes[] = {0, 1, 100, 4096, 3 << 20};

START_TEST(test_round_trip)
{
        for (size_t k = 0; k < RNND_ELEMENTSOF(sizes); k++)
                for (int noise = 0; noise < 2; noise++) {
                        enum rnnd_encoding enc = _i % 2 == 0 ? G : D;
                        size_t n = sizes[k], zn, back_n;
                        char *in = sample(n, noise), *z, *back;
                        rnnd_error_t err = {0};

                        ck_assert_int_eq(rnnd_deflate(enc, _i >= 2, in, n, &z, &zn), 0);
                        if (!noise && n >= 4096) /* matching finds the repeats: far smaller */
                                ck_assert_uint_lt(zn, _i >= 2 ? n * 3 / 4 : n / 4);
                        ck_assert_int_eq(rnnd_inflate(enc, z, zn, n, "limit", &back, &back_n, &err),
                                         0);
                        ck_assert_uint_eq(back_n, n);
                        ck_assert_int_eq(memcmp(back, in, n), 0);
                        /* The other format does not read it: the wrapper is the one asked for. */
                        rnnd_free(back);
                        if (n > 0)
                                ck_assert_int_lt(rnnd_inflate(enc == G ? D : G, z, zn, n, "limit",
                                                              &back, &back_n, &err),
                                                 0);
                        rnnd_free(z);
                        free(in);
                }
}
END_TEST

static Suite *deflate_suite(void)
{
        Suite *s = suite_create("deflate");
        TCase *tc = tcase_create("deflate");

        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, test_accept, 0, (int)RNND_ELEMENTSOF(cases));
        tcase_add_loop_test(tc, test_round_trip, 0, 4); /* gzip, deflate; tensors or not */
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(deflate_suite)

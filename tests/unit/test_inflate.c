/*
 * test_inflate.c: compressed bodies and gRPC messages (proto/inflate.c)
 * against zlib's own compressor: gzip and deflate whole, gzip members one
 * after another, output exactly at and one past the limit, a bomb of zeros,
 * and data that is cut short, corrupt, followed by bytes, or the other format.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "alloc.h"
#include "check-main.h"
#include "inflate.h"
#include "tensor.h"

/* in[0..len) compressed as gzip (wbits 31) or zlib's deflate (15); the caller frees it. */
static uint8_t *compress_as(int wbits, const void *in, size_t len, size_t *ret_len)
{
        z_stream z;
        uLong cap;
        uint8_t *out;

        memset(&z, 0, sizeof(z));
        ck_assert_int_eq(deflateInit2(&z, 6, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY), Z_OK);
        cap = deflateBound(&z, (uLong)len) + 64;
        out = malloc(cap);
        ck_assert_ptr_nonnull(out);
        z.next_in = (Bytef *)(uintptr_t)in;
        z.avail_in = (uInt)len;
        z.next_out = out;
        z.avail_out = (uInt)cap;
        ck_assert_int_eq(deflate(&z, Z_FINISH), Z_STREAM_END);
        *ret_len = z.total_out;
        deflateEnd(&z);
        return out;
}

/* Text that compresses well, with some noise. */
static char *sample(size_t n)
{
        char *s = malloc(n);
        uint32_t x = 12345;

        ck_assert_ptr_nonnull(s);
        for (size_t i = 0; i < n; i++) {
                x = x * 1103515245u + 12345u;
                s[i] = i % 7 == 0 ? (char)('a' + (x >> 16) % 26) : "[0.25, -1.5],"[i % 13];
        }
        return s;
}

static const struct {
        enum rnnd_encoding enc;
        int wbits;
} formats[] = {{RNND_ENCODING_GZIP, 31}, {RNND_ENCODING_DEFLATE, 15}};

/* n bytes of sample() and them compressed in format i. */
struct sample_z {
        char *s;
        uint8_t *z;
        size_t zlen;
};

static struct sample_z sample_in(int i, size_t n)
{
        struct sample_z c = {.s = sample(n)};

        c.z = compress_as(formats[i].wbits, c.s, n, &c.zlen);
        return c;
}

static void sample_free(struct sample_z *c)
{
        free(c->z);
        free(c->s);
}

START_TEST(test_whole)
{
        size_t sizes[] = {0, 1, 4095, 4096, 300000};

        for (size_t k = 0; k < RNND_ELEMENTSOF(sizes); k++) {
                char *s = sample(sizes[k] + 1), *out;
                size_t zlen, n;
                uint8_t *z = compress_as(formats[_i].wbits, s, sizes[k], &zlen);
                rnnd_error_t e = {0};

                ck_assert_int_eq(rnnd_inflate(formats[_i].enc, z, zlen, sizes[k] + 10,
                                              "max_body_bytes", &out, &n, &e),
                                 0);
                ck_assert_uint_eq(n, sizes[k]);
                ck_assert_int_eq(memcmp(out, s, n), 0);
                ck_assert_int_eq(out[n], '\0');
                rnnd_free(out);
                free(z);
                free(s);
        }
}
END_TEST

/* The limit is on the output: exactly max passes, max + 1 names the setting. */
START_TEST(test_limit)
{
        struct sample_z c = sample_in(_i, 10000);
        char *out;
        size_t n;
        rnnd_error_t e = {0};

        ck_assert_int_eq(
                rnnd_inflate(formats[_i].enc, c.z, c.zlen, 10000, "max_body_bytes", &out, &n, &e),
                0);
        ck_assert_uint_eq(n, 10000);
        ck_assert_int_eq(memcmp(out, c.s, n), 0);
        rnnd_free(out);
        ck_assert_int_eq(
                rnnd_inflate(formats[_i].enc, c.z, c.zlen, 9999, "max_body_bytes", &out, &n, &e),
                RNND_ETOOBIG);
        ck_assert_ptr_null(out);
        ck_assert_str_eq(e.msg, "it decompresses to more than max_body_bytes (9999 bytes)");
        sample_free(&c);
}
END_TEST

/* 256 MiB of zeros in about 256 KB: refused at the limit, not inflated whole. */
START_TEST(test_bomb)
{
        size_t big = (size_t)256 << 20, zlen, n;
        char *zeros = calloc(1, big), *out;
        uint8_t *z;
        rnnd_error_t e = {0};

        ck_assert_ptr_nonnull(zeros);
        z = compress_as(31, zeros, big, &zlen);
        free(zeros);
        ck_assert_uint_lt(zlen, (size_t)1 << 20);
        ck_assert_int_eq(rnnd_inflate(RNND_ENCODING_GZIP, z, zlen, (size_t)1 << 20,
                                      "grpc_max_message_bytes", &out, &n, &e),
                         RNND_ETOOBIG);
        ck_assert_ptr_nonnull(strstr(e.msg, "grpc_max_message_bytes (1048576 bytes)"));
        free(z);
}
END_TEST

/* gzip allows members one after another (RFC 1952 §2.2); deflate is one stream. */
START_TEST(test_members)
{
        size_t l1, l2, n;
        uint8_t *a = compress_as(31, "[1.0, ", 6, &l1), *b = compress_as(31, "2.0]", 4, &l2);
        uint8_t *both = malloc(l1 + l2);
        char *out;
        rnnd_error_t e = {0};

        memcpy(both, a, l1);
        memcpy(both + l1, b, l2);
        ck_assert_int_eq(rnnd_inflate(RNND_ENCODING_GZIP, both, l1 + l2, 100, "m", &out, &n, &e),
                         0);
        ck_assert_str_eq(out, "[1.0, 2.0]");
        rnnd_free(out);
        free(a), free(b), free(both);
        a = compress_as(15, "[1.0, ", 6, &l1);
        b = compress_as(15, "2.0]", 4, &l2);
        both = malloc(l1 + l2);
        memcpy(both, a, l1);
        memcpy(both + l1, b, l2);
        ck_assert_int_eq(rnnd_inflate(RNND_ENCODING_DEFLATE, both, l1 + l2, 100, "m", &out, &n, &e),
                         RNND_EINVAL);
        ck_assert_msg(strstr(e.msg, "bytes follow the compressed data") != NULL, "%s", e.msg);
        free(a), free(b), free(both);
}
END_TEST

/* Cut short, corrupt, the other format, nothing: 400s saying what is wrong. */
START_TEST(test_refused)
{
        struct sample_z c = sample_in(_i, 5000);
        enum rnnd_encoding enc = formats[_i].enc, other = formats[1 - _i].enc;
        char *out;
        size_t n;
        rnnd_error_t e = {0};

        ck_assert_int_eq(rnnd_inflate(enc, c.z, c.zlen / 2, 1 << 20, "m", &out, &n, &e),
                         RNND_EINVAL);
        ck_assert_str_eq(e.msg, "the compressed data ends early");
        ck_assert_int_eq(rnnd_inflate(enc, c.z, 0, 1 << 20, "m", &out, &n, &e), RNND_EINVAL);
        ck_assert_int_eq(rnnd_inflate(enc, c.s, 5000, 1 << 20, "m", &out, &n, &e), RNND_EINVAL);
        ck_assert_msg(strstr(e.msg, "not valid ") != NULL, "%s", e.msg);
        ck_assert_ptr_null(out);
        /* gzip sent as deflate, and deflate as gzip */
        ck_assert_int_eq(rnnd_inflate(other, c.z, c.zlen, 1 << 20, "m", &out, &n, &e), RNND_EINVAL);
        sample_free(&c);
}
END_TEST

START_TEST(test_names)
{
        ck_assert_int_eq(rnnd_encoding_of(NULL, 0), RNND_ENCODING_IDENTITY);
        ck_assert_int_eq(rnnd_encoding_of("", 0), RNND_ENCODING_IDENTITY);
        ck_assert_int_eq(rnnd_encoding_of("Identity", 8), RNND_ENCODING_IDENTITY);
        ck_assert_int_eq(rnnd_encoding_of("GZIP", 4), RNND_ENCODING_GZIP);
        ck_assert_int_eq(rnnd_encoding_of("x-gzip", 6), RNND_ENCODING_GZIP);
        ck_assert_int_eq(rnnd_encoding_of("deflate", 7), RNND_ENCODING_DEFLATE);
        ck_assert_int_eq(rnnd_encoding_of("gzipx", 4), RNND_ENCODING_GZIP);
        ck_assert_int_eq(rnnd_encoding_of("gzipx", 5), RNND_ENCODING_OTHER);
        ck_assert_int_eq(rnnd_encoding_of("br", 2), RNND_ENCODING_OTHER);
        ck_assert_int_eq(rnnd_encoding_of("gzip, br", 8), RNND_ENCODING_OTHER);
}
END_TEST

static Suite *inflate_suite(void)
{
        Suite *s = suite_create("inflate");
        TCase *tc = tcase_create("inflate");

        tcase_set_timeout(tc, 60);
        tcase_add_loop_test(tc, test_whole, 0, 2);
        tcase_add_loop_test(tc, test_limit, 0, 2);
        tcase_add_test(tc, test_bomb);
        tcase_add_test(tc, test_members);
        tcase_add_loop_test(tc, test_refused, 0, 2);
        tcase_add_test(tc, test_names);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(inflate_suite)

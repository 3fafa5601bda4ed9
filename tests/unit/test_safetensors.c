/*
 * test_safetensors.c: the safetensors header parser (proto/safetensors.c) and
 * the mapped file reader (engine/stfile.c): good headers of every dtype, every
 * kind of bad header, bad files, conversions on read, and allocation failure.
 */
#include <dirent.h>
#include <fcntl.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "check-main.h"
#include "safetensors.h"
#include "stfile.h"

/* One tensor entry of a header, as JSON text. */
#define T(name, dtype, shape, offsets)                                                             \
        "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":" offsets "}"

static int parse_str(const char *json, uint64_t data_len, struct rnnd_st_header *h, rnnd_error_t *e)
{
        return rnnd_st_header_parse(json, strlen(json), data_len, h, e);
}

static uint32_t f32_bits(float f)
{
        uint32_t u;

        memcpy(&u, &f, sizeof(u));
        return u;
}

/* Good headers: one tensor of each dtype. */

static const struct {
        const char *st;
        rnnd_dtype_t dt;
        size_t size;
} good_dtypes[] = {
        {"BOOL", RNND_DT_BOOL, 1}, {"U8", RNND_DT_U8, 1},     {"U16", RNND_DT_U16, 2},
        {"U32", RNND_DT_U32, 4},   {"U64", RNND_DT_U64, 8},   {"I8", RNND_DT_I8, 1},
        {"I16", RNND_DT_I16, 2},   {"I32", RNND_DT_I32, 4},   {"I64", RNND_DT_I64, 8},
        {"F16", RNND_DT_F16, 2},   {"BF16", RNND_DT_BF16, 2}, {"F32", RNND_DT_F32, 4},
        {"F64", RNND_DT_F64, 8},
};

START_TEST(test_parse_dtype)
{
        struct rnnd_st_header h = {0};
        rnnd_error_t e = {0};
        const struct rnnd_st_tensor *t;
        size_t n = 6 * good_dtypes[_i].size;
        char json[256];

        snprintf(json, sizeof(json),
                 "{\"w\":{\"dtype\":\"%s\",\"shape\":[2,3],\"data_offsets\":[0,%zu]}}",
                 good_dtypes[_i].st, n);
        ck_assert_msg(parse_str(json, n, &h, &e) == 0, "%s: %s", json, e.msg);
        ck_assert_uint_eq(h.n_tensors, 1);
        t = rnnd_st_header_find(&h, "w");
        ck_assert_ptr_nonnull(t);
        ck_assert_str_eq(t->name, "w");
        ck_assert_int_eq(t->dtype, good_dtypes[_i].dt);
        ck_assert_uint_eq(t->ndim, 2);
        ck_assert_uint_eq(t->shape[0], 2);
        ck_assert_uint_eq(t->shape[1], 3);
        ck_assert_uint_eq(t->numel, 6);
        ck_assert_uint_eq(t->begin, 0);
        ck_assert_uint_eq(t->end, n);
        rnnd_st_header_done(&h);
        ck_assert_ptr_null(h.tensors);
        ck_assert_uint_eq(h.n_tensors, 0);
}
END_TEST

/* Good headers of other shapes: empty, scalars, zero-size tensors, padding. */

static const struct {
        const char *json;
        uint64_t data_len;
        size_t n_tensors;
} good_headers[] = {
        {"{}", 0, 0},
        {"{\"__metadata__\":{}}", 0, 0},
        {"{" T("s", "F32", "[]", "[0,4]") "}", 4, 1},
        {"{" T("z", "F32", "[0,3]", "[0,0]") "}", 0, 1},
        /* clang-format off */
        {"{" T("a", "F32", "[1]", "[0,4]") ","
             T("z", "I8", "[0]", "[4,4]") ","
             T("b", "F32", "[1]", "[4,8]") "}", 8, 3},
        /* clang-format on */
        {"{" T("a", "F32", "[2]", "[0,8]") "," T("z", "I8", "[0]", "[8,8]") "}", 8, 2},
        {"{" T("y", "F32", "[0]", "[0,0]") "," T("z", "F16", "[3,0]", "[0,0]") "}", 0, 2},
        {"{" T("a", "F32", "[1]", "[0,4]") "}        ", 4, 1},
        {"{" T("big", "U8", "[65536]", "[0,65536]") "}", 65536, 1},
};

START_TEST(test_parse_good)
{
        struct rnnd_st_header h = {0};
        rnnd_error_t e = {0};

        ck_assert_msg(parse_str(good_headers[_i].json, good_headers[_i].data_len, &h, &e) == 0,
                      "%s: %s", good_headers[_i].json, e.msg);
        ck_assert_uint_eq(h.n_tensors, good_headers[_i].n_tensors);
        for (size_t i = 0; i < h.n_tensors; i++)
                ck_assert_ptr_eq(rnnd_st_header_find(&h, h.tensors[i].name), &h.tensors[i]);
        rnnd_st_header_done(&h);
        rnnd_st_header_done(&h); /* a zeroed header is fine too */
}
END_TEST

/* Tensors come back sorted by name; metadata is a string map. */
START_TEST(test_parse_sorted)
{
        /* clang-format off */
        static const char json[] = "{"
                T("rnn.c", "F32", "[1]", "[8,12]") ","
                "\"__metadata__\":{\"format\":\"pt\",\"by\":\"rnnd\"},"
                T("rnn.a", "F16", "[2,2]", "[0,8]") ","
                T("rnn.b", "I64", "[1]", "[12,20]") "}";
        /* clang-format on */
        struct rnnd_st_header h = {0};
        rnnd_error_t e = {0};
        const struct rnnd_st_tensor *t;

        ck_assert_msg(parse_str(json, 20, &h, &e) == 0, "%s", e.msg);
        ck_assert_uint_eq(h.n_tensors, 3);
        ck_assert_str_eq(h.tensors[0].name, "rnn.a");
        ck_assert_str_eq(h.tensors[1].name, "rnn.b");
        ck_assert_str_eq(h.tensors[2].name, "rnn.c");
        t = rnnd_st_header_find(&h, "rnn.b");
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->dtype, RNND_DT_I64);
        ck_assert_uint_eq(t->begin, 12);
        ck_assert_uint_eq(t->end, 20);
        ck_assert_ptr_null(rnnd_st_header_find(&h, "rnn.d"));
        ck_assert_ptr_null(rnnd_st_header_find(&h, ""));
        ck_assert_ptr_null(rnnd_st_header_find(&h, "__metadata__"));
        ck_assert_uint_eq(h.n_meta, 2);
        ck_assert_str_eq(rnnd_st_header_meta(&h, "format"), "pt");
        ck_assert_str_eq(rnnd_st_header_meta(&h, "by"), "rnnd");
        ck_assert_ptr_null(rnnd_st_header_meta(&h, "other"));
        rnnd_st_header_done(&h);
        ck_assert_ptr_null(rnnd_st_header_find(&h, "rnn.a"));
        ck_assert_ptr_null(rnnd_st_header_meta(&h, "format"));
}
END_TEST

/* Bad headers: each fails with its code and a message naming what is wrong. */

static const struct {
        const char *json;
        uint64_t data_len;
        int code;
        const char *msg; /* a substring of the message */
} bad_headers[] = {
        /* Not JSON, or not an object. */
        {"{\"w\":", 0, RNND_EMODEL, "header is not valid JSON"},
        {"", 0, RNND_EMODEL, "header is not valid JSON"},
        {"{} x", 0, RNND_EMODEL, "header is not valid JSON"},
        {"[1,2]", 0, RNND_EMODEL, "header is an array, expected a JSON object"},
        {"{" T("w", "F32", "[1]", "[0, 99999999999999999999]") "}", 4, RNND_EMODEL,
         "header is not valid JSON"},
        {"{" T("w", "F32", "[1]", "[0,4]") "," T("w", "F32", "[1]", "[4,8]") "}", 8, RNND_EMODEL,
         "duplicate object key near '\"w\"'"},
        /* The entry and its keys. */
        {"{\"w\":[1]}", 0, RNND_EMODEL, "tensor 'w': entry is an array, expected an object"},
        {"{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, RNND_EMODEL,
         "tensor 'w': missing 'dtype'"},
        {"{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, RNND_EMODEL,
         "tensor 'w': missing 'shape'"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, RNND_EMODEL,
         "tensor 'w': missing 'data_offsets'"},
        {"{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"foo\":1}}", 4,
         RNND_EMODEL, "tensor 'w': unknown key 'foo'"},
        {"{" T("", "F32", "[1]", "[0,4]") "}", 4, RNND_EMODEL, "tensor name is empty"},
        /* The dtype. */
        {"{" T("w", "F8_E4M3", "[1]", "[0,1]") "}", 1, RNND_EMODEL,
         "tensor 'w': unknown dtype 'F8_E4M3'"},
        {"{" T("w", "BYTES", "[1]", "[0,1]") "}", 1, RNND_EMODEL,
         "tensor 'w': unknown dtype 'BYTES'"},
        {"{" T("w", "f32", "[1]", "[0,4]") "}", 4, RNND_EMODEL, "tensor 'w': unknown dtype 'f32'"},
        {"{\"w\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, RNND_EMODEL,
         "tensor 'w': dtype is an integer, expected a string"},
        /* The shape. */
        {"{" T("w", "F32", "[2,-3]", "[0,0]") "}", 0, RNND_EMODEL,
         "tensor 'w': shape[1] is -3, expected a non-negative integer"},
        {"{" T("w", "F32", "[2.0]", "[0,8]") "}", 8, RNND_EMODEL,
         "tensor 'w': shape[0] is a real number, expected a non-negative integer"},
        {"{" T("w", "F32", "[\"2\"]", "[0,8]") "}", 8, RNND_EMODEL,
         "tensor 'w': shape[0] is a string"},
        {"{" T("w", "F32", "null", "[0,4]") "}", 4, RNND_EMODEL,
         "tensor 'w': shape is null, expected an array"},
        {"{" T("w", "F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]") "}", 4, RNND_EMODEL,
         "tensor 'w': shape has 9 dims, more than 8"},
        {"{" T("w", "U8", "[4294967296,4294967296]", "[0,0]") "}", 0, RNND_EMODEL,
         "tensor 'w': shape [4294967296, 4294967296] has too many elements for U8"},
        {"{" T("w", "F32", "[4611686018427387904]", "[0,0]") "}", 0, RNND_EMODEL,
         "tensor 'w': shape [4611686018427387904] has too many elements for F32"},
        /* The offsets. */
        {"{" T("w", "F32", "[2]", "[8,0]") "}", 8, RNND_EMODEL,
         "tensor 'w': data_offsets [8, 0] begin after they end"},
        {"{" T("w", "F32", "[4]", "[0,16]") "}", 8, RNND_EMODEL,
         "tensor 'w': data_offsets [0, 16] pass the end of the data buffer (8 bytes)"},
        {"{" T("rnn.weight_ih_l0", "F32", "[4,5]", "[0,96]") "}", 96, RNND_EMODEL,
         "tensor 'rnn.weight_ih_l0': data_offsets [0, 96] hold 96 bytes, but F32 [4, 5] needs "
         "80"},
        {"{" T("w", "F32", "[1]", "[0]") "}", 4, RNND_EMODEL,
         "tensor 'w': data_offsets has length 1, expected 2"},
        {"{" T("w", "F32", "[1]", "[0,4,8]") "}", 8, RNND_EMODEL,
         "tensor 'w': data_offsets has length 3, expected 2"},
        {"{" T("w", "F32", "[1]", "[-1,4]") "}", 4, RNND_EMODEL,
         "tensor 'w': data_offsets[0] is -1, expected a non-negative integer"},
        {"{" T("w", "F32", "[1]", "[0,4.0]") "}", 4, RNND_EMODEL,
         "tensor 'w': data_offsets[1] is a real number"},
        {"{" T("w", "F32", "[1]", "\"0-4\"") "}", 4, RNND_EMODEL,
         "tensor 'w': data_offsets is a string, expected an array"},
        /* The tensors together: overlaps and holes. */
        {"{" T("a", "F32", "[2]", "[0,8]") "," T("b", "F32", "[2]", "[4,12]") "}", 12, RNND_EMODEL,
         "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]"},
        {"{" T("b", "F32", "[2]", "[0,8]") "," T("a", "F32", "[2]", "[0,8]") "}", 8, RNND_EMODEL,
         "tensor 'b': data_offsets [0, 8] overlap tensor 'a' [0, 8]"},
        {"{" T("a", "F32", "[2]", "[0,8]") "," T("z", "F32", "[0]", "[4,4]") "}", 8, RNND_EMODEL,
         "tensor 'z': data_offsets [4, 4] overlap tensor 'a' [0, 8]"},
        {"{" T("a", "F32", "[2]", "[0,8]") "," T("b", "F32", "[2]", "[12,20]") "}", 20, RNND_EMODEL,
         "data bytes [8, 12) between tensor 'a' and tensor 'b' are not used"},
        {"{" T("a", "F32", "[2]", "[4,12]") "}", 12, RNND_EMODEL,
         "data bytes [0, 4) before tensor 'a' are not used"},
        {"{" T("a", "F32", "[2]", "[0,8]") "}", 12, RNND_EMODEL,
         "data bytes [8, 12) after tensor 'a' are not used"},
        {"{}", 4, RNND_EMODEL, "data bytes [0, 4) are not used by any tensor"},
        /* The metadata. */
        {"{\"__metadata__\":{\"format\":1}}", 0, RNND_EMODEL,
         "__metadata__ 'format': value is an integer, expected a string"},
        {"{\"__metadata__\":[\"pt\"]}", 0, RNND_EMODEL,
         "__metadata__ is an array, expected an object"},
};

START_TEST(test_parse_bad)
{
        struct rnnd_st_header h, before;
        rnnd_error_t e = {0};
        int r;

        memset(&h, 0xa5, sizeof(h));
        before = h;
        r = parse_str(bad_headers[_i].json, bad_headers[_i].data_len, &h, &e);
        ck_assert_msg(r == bad_headers[_i].code, "%s: got %d (%s)", bad_headers[_i].json, r, e.msg);
        ck_assert_int_eq(e.code, r);
        ck_assert_msg(strstr(e.msg, bad_headers[_i].msg) != NULL, "message '%s' lacks '%s'", e.msg,
                      bad_headers[_i].msg);
        ck_assert_msg(memcmp(&h, &before, sizeof(h)) == 0, "*ret was written on failure");
        /* Without an error struct the code is the same. */
        ck_assert_int_eq(parse_str(bad_headers[_i].json, bad_headers[_i].data_len, &h, NULL), r);
}
END_TEST

/* Limits: the name length and the tensor count, at and one past the limit. */

static char *many_tensors(size_t n)
{
        size_t cap = 64 + n * 64, len = 0;
        char *s = malloc(cap);

        ck_assert_ptr_nonnull(s);
        len += (size_t)snprintf(s + len, cap - len, "{");
        for (size_t i = 0; i < n; i++)
                len += (size_t)snprintf(s + len, cap - len, "%s" T("t%zu", "F32", "[0]", "[0,0]"),
                                        i ? "," : "", i);
        snprintf(s + len, cap - len, "}");
        return s;
}

START_TEST(test_limit_count)
{
        struct rnnd_st_header h = {0};
        rnnd_error_t e = {0};
        char *json;

        json = many_tensors(RNND_ST_MAX_TENSORS);
        ck_assert_msg(parse_str(json, 0, &h, &e) == 0, "%s", e.msg);
        ck_assert_uint_eq(h.n_tensors, RNND_ST_MAX_TENSORS);
        ck_assert_ptr_nonnull(rnnd_st_header_find(&h, "t65535"));
        rnnd_st_header_done(&h);
        free(json);

        json = many_tensors(RNND_ST_MAX_TENSORS + 1);
        ck_assert_int_eq(parse_str(json, 0, &h, &e), RNND_EMODEL);
        ck_assert_str_eq(e.msg, "header has 65537 tensors, more than 65536");
        free(json);
}
END_TEST

START_TEST(test_limit_name)
{
        struct rnnd_st_header h = {0};
        rnnd_error_t e = {0};
        char name[RNND_ST_MAX_NAME + 2], json[RNND_ST_MAX_NAME + 128];

        memset(name, 'n', RNND_ST_MAX_NAME);
        name[RNND_ST_MAX_NAME] = '\0';
        snprintf(json, sizeof(json), "{" T("%s", "F32", "[1]", "[0,4]") "}", name);
        ck_assert_msg(parse_str(json, 4, &h, &e) == 0, "%s", e.msg);
        ck_assert_ptr_nonnull(rnnd_st_header_find(&h, name));
        rnnd_st_header_done(&h);

        strcat(name, "n");
        snprintf(json, sizeof(json), "{" T("%s", "F32", "[1]", "[0,4]") "}", name);
        ck_assert_int_eq(parse_str(json, 4, &h, &e), RNND_EMODEL);
        ck_assert_msg(strstr(e.msg, "is 1025 bytes long, more than 1024") != NULL, "%s", e.msg);
        ck_assert_msg(strncmp(e.msg, "tensor name 'nnnn", 17) == 0, "%s", e.msg);
}
END_TEST

/*
 * Files.  An unchecked fixture (run in the parent process) makes a fresh
 * directory per TCase and removes it, and whatever the tests left in it, even
 * when a test fails.
 */

static char tmpdir[256];

static void tmpdir_setup(void)
{
        const char *base = getenv("TMPDIR");

        snprintf(tmpdir, sizeof(tmpdir), "%s/rnnd-st-XXXXXX",
                 base != NULL && *base != '\0' ? base : "/tmp");
        if (mkdtemp(tmpdir) == NULL) {
                perror("mkdtemp");
                abort();
        }
}

static void tmpdir_teardown(void)
{
        DIR *d = opendir(tmpdir);
        struct dirent *de;
        char path[512];

        if (d == NULL)
                return;
        while ((de = readdir(d)) != NULL) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                snprintf(path, sizeof(path), "%s/%s", tmpdir, de->d_name);
                if (rmdir(path) < 0)
                        unlink(path);
        }
        closedir(d);
        rmdir(tmpdir);
}

/* Writes n raw bytes to tmpdir/name; path gets the file's path. */
static void write_raw(char *path, size_t cap, const char *name, const void *bytes, size_t n)
{
        FILE *fp;

        snprintf(path, cap, "%s/%s", tmpdir, name);
        fp = fopen(path, "wb");
        ck_assert_ptr_nonnull(fp);
        ck_assert_uint_eq(fwrite(bytes, 1, n, fp), n);
        ck_assert_int_eq(fclose(fp), 0);
}

/*
 * Writes a safetensors file: the header length hlen (little-endian u64), the
 * header text hdr and dn data bytes.  hlen need not be the header's length.
 */
static void write_st(char *path, size_t cap, const char *name, uint64_t hlen, const char *hdr,
                     const void *data, size_t dn)
{
        size_t hn = strlen(hdr), n = 8 + hn + dn;
        unsigned char *buf = malloc(n);

        ck_assert_ptr_nonnull(buf);
        for (int i = 0; i < 8; i++)
                buf[i] = (unsigned char)(hlen >> (8 * i));
        memcpy(buf + 8, hdr, hn);
        if (dn > 0)
                memcpy(buf + 8 + hn, data, dn);
        write_raw(path, cap, name, buf, n);
        free(buf);
}

#define HLEN_AUTO UINT64_MAX

static const struct {
        const char *what;
        long raw;      /* >= 0: a file of this many raw bytes instead */
        uint64_t hlen; /* the header length written, or HLEN_AUTO for hdr's length */
        const char *hdr;
        size_t data_len; /* zero bytes after the header */
        int code;
        const char *msg; /* a substring of the message */
} bad_files[] = {
        {"empty", 0, 0, "", 0, RNND_EMODEL, "file is 0 bytes, too short"},
        {"seven", 7, 0, "", 0, RNND_EMODEL, "file is 7 bytes, too short"},
        {"past_end", -1, 1000, "{}", 0, RNND_EMODEL,
         "header length 1000 is past the end of the file (2 bytes after the length)"},
        {"two63", -1, UINT64_C(1) << 63, "{}", 0, RNND_EMODEL,
         "header length 9223372036854775808 is over the limit of 104857600 bytes"},
        {"over_limit", -1, (UINT64_C(100) << 20) + 1, "{}", 0, RNND_EMODEL,
         "header length 104857601 is over the limit of 104857600 bytes"},
        {"truncated", -1, HLEN_AUTO, "{" T("w", "F32", "[4]", "[0,16]") "}", 8, RNND_EMODEL,
         "tensor 'w': data_offsets [0, 16] pass the end of the data buffer (8 bytes)"},
        {"trailing", -1, HLEN_AUTO, "{" T("w", "F32", "[2]", "[0,8]") "}", 12, RNND_EMODEL,
         "data bytes [8, 12) after tensor 'w' are not used"},
        {"array", -1, HLEN_AUTO, "[]", 0, RNND_EMODEL, "header does not start with '{'"},
        {"space", -1, HLEN_AUTO, " {}", 0, RNND_EMODEL, "header does not start with '{'"},
        {"zero_hlen", -1, 0, "", 0, RNND_EMODEL, "header does not start with '{'"},
        {"bad_entry", -1, HLEN_AUTO, "{\"w\":1}", 0, RNND_EMODEL,
         "tensor 'w': entry is an integer"},
        {"not_json", -1, HLEN_AUTO, "{\"w\"", 0, RNND_EMODEL, "header is not valid JSON"},
};

START_TEST(test_open_bad)
{
        static const unsigned char zeros[64];
        rnnd_stfile_t *f = (rnnd_stfile_t *)&f;
        rnnd_error_t e = {0};
        char path[512];
        int r;

        if (bad_files[_i].raw >= 0) {
                write_raw(path, sizeof(path), bad_files[_i].what, "\x02\0\0\0\0\0\0",
                          (size_t)bad_files[_i].raw);
        } else {
                uint64_t hlen = bad_files[_i].hlen;

                if (hlen == HLEN_AUTO)
                        hlen = strlen(bad_files[_i].hdr);
                ck_assert_uint_le(bad_files[_i].data_len, sizeof(zeros));
                write_st(path, sizeof(path), bad_files[_i].what, hlen, bad_files[_i].hdr, zeros,
                         bad_files[_i].data_len);
        }
        r = rnnd_stfile_open(path, &f, &e);
        ck_assert_msg(r == bad_files[_i].code, "%s: got %d (%s)", bad_files[_i].what, r, e.msg);
        ck_assert_ptr_eq(f, (rnnd_stfile_t *)&f);
        ck_assert_msg(strncmp(e.msg, path, strlen(path)) == 0, "message '%s' lacks the path",
                      e.msg);
        ck_assert_msg(strstr(e.msg, bad_files[_i].msg) != NULL, "message '%s' lacks '%s'", e.msg,
                      bad_files[_i].msg);
        /* Without an error struct the code is the same. */
        ck_assert_int_eq(rnnd_stfile_open(path, &f, NULL), r);
        unlink(path);
}
END_TEST

START_TEST(test_open_missing)
{
        rnnd_stfile_t *f = (rnnd_stfile_t *)&f;
        rnnd_error_t e = {0};
        char path[512];

        snprintf(path, sizeof(path), "%s/missing.safetensors", tmpdir);
        ck_assert_int_eq(rnnd_stfile_open(path, &f, &e), RNND_EIO);
        ck_assert_ptr_eq(f, (rnnd_stfile_t *)&f);
        ck_assert_msg(strncmp(e.msg, path, strlen(path)) == 0, "%s", e.msg);
        ck_assert_msg(strstr(e.msg, "No such file") != NULL, "%s", e.msg);

        /* A directory opens but is not a file. */
        ck_assert_int_eq(rnnd_stfile_open(tmpdir, &f, &e), RNND_EIO);
        ck_assert_msg(strncmp(e.msg, tmpdir, strlen(tmpdir)) == 0, "%s", e.msg);
        ck_assert_ptr_eq(f, (rnnd_stfile_t *)&f);

        /* A FIFO is refused at once; opening it used to wait for a writer, for ever. */
        snprintf(path, sizeof(path), "%s/fifo.safetensors", tmpdir);
        ck_assert_int_eq(mkfifo(path, 0600), 0);
        ck_assert_int_eq(rnnd_stfile_open(path, &f, &e), RNND_EIO);
        ck_assert_msg(strstr(e.msg, "not a regular file") != NULL, "%s", e.msg);
        ck_assert_ptr_eq(f, (rnnd_stfile_t *)&f);
        unlink(path);
}
END_TEST

/* A good file with one tensor per readable dtype, its data deliberately unaligned. */

struct builder {
        char hdr[2048];
        size_t hn;
        unsigned char data[512];
        size_t dn;
};

/* Adds tensor name with n elements of width bytes each, given as bit patterns. */
static void add(struct builder *b, const char *name, const char *dtype, const char *shape,
                unsigned width, const uint64_t *bits, size_t n)
{
        size_t begin = b->dn;

        for (size_t i = 0; i < n; i++)
                for (unsigned k = 0; k < width; k++)
                        b->data[b->dn++] = (unsigned char)(bits[i] >> (8 * k));
        b->hn += (size_t)snprintf(b->hdr + b->hn, sizeof(b->hdr) - b->hn,
                                  "%s\"%s\":{\"dtype\":\"%s\",\"shape\":%s,"
                                  "\"data_offsets\":[%zu,%zu]}",
                                  b->hn == 0 ? "{" : ",", name, dtype, shape, begin, b->dn);
}

#define ADD(b, name, dtype, shape, width, ...)                                                     \
        do {                                                                                       \
                static const uint64_t bits_[] = {__VA_ARGS__};                                     \
                add(b, name, dtype, shape, width, bits_, RNND_ELEMENTSOF(bits_));                  \
        } while (0)

static void write_good(char *path, size_t cap)
{
        struct builder b = {0};

        ADD(&b, "f32", "F32", "[2,3]", 4, 0x3fc00000, 0xc0100000, 0x00000000, 0x80000000,
            0x7f7fffff, 0x00000001);
        ADD(&b, "f16", "F16", "[2,3]", 2, 0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x8000);
        ADD(&b, "bf16", "BF16", "[2,3]", 2, 0x3f80, 0xc000, 0x3f00, 0x7f7f, 0x0001, 0xff80);
        ADD(&b, "f64", "F64", "[2,3]", 8, 0x3fe0000000000000, 0xbff4000000000000,
            0x3fb999999999999a, 0x47efffffe8000000, 0x47effffff0000000, 0xfe37e43c8800759c);
        ADD(&b, "i32", "I32", "[4]", 4, 0, 0xffffffff, 0x7fffffff, 0x80000000);
        ADD(&b, "i64", "I64", "[2]", 8, 0x8000000000000000, 1234567890123);
        ADD(&b, "i16", "I16", "[2]", 2, 0x8000, 7);
        ADD(&b, "i8", "I8", "[1,2]", 1, 0x80, 0x7f);
        ADD(&b, "u8", "U8", "[2]", 1, 0xff, 0);
        add(&b, "empty", "F32", "[0,4]", 4, NULL, 0);
        b.hn += (size_t)snprintf(b.hdr + b.hn, sizeof(b.hdr) - b.hn,
                                 ",\"__metadata__\":{\"format\":\"pt\"}}");
        /* Pad with spaces so that the data starts at an odd offset. */
        while ((8 + b.hn) % 2 == 0)
                b.hdr[b.hn++] = ' ';
        ck_assert_uint_lt(b.hn, sizeof(b.hdr));
        write_st(path, cap, "good.safetensors", b.hn, b.hdr, b.data, b.dn);
}

static const struct {
        const char *name;
        uint32_t want[6]; /* float bit patterns */
} f32_reads[] = {
        {"f32", {0x3fc00000, 0xc0100000, 0x00000000, 0x80000000, 0x7f7fffff, 0x00000001}},
        /* 1, -2, 0.5, 65504, 2^-24 (subnormal), -0. */
        {"f16", {0x3f800000, 0xc0000000, 0x3f000000, 0x477fe000, 0x33800000, 0x80000000}},
        /* 1, -2, 0.5, the largest bfloat16, a subnormal, -Inf. */
        {"bf16", {0x3f800000, 0xc0000000, 0x3f000000, 0x7f7f0000, 0x00010000, 0xff800000}},
        /*
         * 0.5, -1.25, 0.1 rounded, FLT_MAX + 2^102 (rounds down to FLT_MAX),
         * FLT_MAX + 2^103 (the tie, rounds to Inf), -1e300 (to -Inf).
         */
        {"f64", {0x3f000000, 0xbfa00000, 0x3dcccccd, 0x7f7fffff, 0x7f800000, 0xff800000}},
};

START_TEST(test_read_f32)
{
        static const uint64_t shape[] = {2, 3};
        rnnd_stfile_t *f = NULL;
        rnnd_error_t e = {0};
        char path[512];
        float dst[6];

        write_good(path, sizeof(path));
        ck_assert_msg(rnnd_stfile_open(path, &f, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(rnnd_stfile_read_f32(f, f32_reads[_i].name, 2, shape, dst, &e), 0);
        for (int i = 0; i < 6; i++)
                ck_assert_msg(f32_bits(dst[i]) == f32_reads[_i].want[i],
                              "%s[%d] = %a (bits %08x), want bits %08x", f32_reads[_i].name, i,
                              (double)dst[i], f32_bits(dst[i]), f32_reads[_i].want[i]);
        f = rnnd_stfile_close(f);
        ck_assert_ptr_null(f);
}
END_TEST

static const struct {
        const char *name;
        unsigned ndim;
        uint64_t shape[2];
        size_t n;
        int64_t want[4];
} i64_reads[] = {
        {"i32", 1, {4}, 4, {0, -1, INT32_MAX, INT32_MIN}},
        {"i64", 1, {2}, 2, {INT64_MIN, 1234567890123}},
        {"i16", 1, {2}, 2, {-32768, 7}},
        {"i8", 2, {1, 2}, 2, {-128, 127}},
        {"u8", 1, {2}, 2, {255, 0}},
};

START_TEST(test_read_i64)
{
        rnnd_stfile_t *f = NULL;
        rnnd_error_t e = {0};
        char path[512];
        int64_t dst[4];

        write_good(path, sizeof(path));
        ck_assert_msg(rnnd_stfile_open(path, &f, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(rnnd_stfile_read_i64(f, i64_reads[_i].name, i64_reads[_i].ndim,
                                              i64_reads[_i].shape, dst, &e),
                         0);
        for (size_t i = 0; i < i64_reads[_i].n; i++)
                ck_assert_int_eq(dst[i], i64_reads[_i].want[i]);
        rnnd_stfile_close(f);
}
END_TEST

/* The parsed header, lookups and a zero-size tensor through the file API. */
START_TEST(test_read_header)
{
        static const uint64_t shape[] = {0, 4};
        const struct rnnd_st_header *h;
        const struct rnnd_st_tensor *t;
        rnnd_stfile_t *f = NULL;
        rnnd_error_t e = {0};
        char path[512];
        float dst[1] = {42.0f};

        write_good(path, sizeof(path));
        ck_assert_msg(rnnd_stfile_open(path, &f, &e) == 0, "%s", e.msg);
        h = rnnd_stfile_header(f);
        ck_assert_uint_eq(h->n_tensors, 10);
        ck_assert_str_eq(rnnd_st_header_meta(h, "format"), "pt");
        t = rnnd_stfile_find(f, "bf16");
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->dtype, RNND_DT_BF16);
        ck_assert_uint_eq(t->numel, 6);
        ck_assert_ptr_null(rnnd_stfile_find(f, "nope"));
        ck_assert_int_eq(rnnd_stfile_read_f32(f, "empty", 2, shape, dst, &e), 0);
        ck_assert_float_eq(dst[0], 42.0f);
        ck_assert_ptr_null(rnnd_stfile_close(f));
        ck_assert_ptr_null(rnnd_stfile_close(NULL));
}
END_TEST

/* Reads that fail: wrong shape, wrong rank, missing, wrong dtype. */

static const struct {
        int as_i64;
        const char *name;
        unsigned ndim;
        uint64_t shape[3];
        const char *msg;
} bad_reads[] = {
        {0, "f32", 2, {3, 2}, "tensor 'f32' has shape [2, 3], expected [3, 2] in "},
        {0, "f16", 1, {6}, "tensor 'f16' has shape [2, 3], expected [6] in "},
        {0, "bf16", 3, {2, 3, 1}, "tensor 'bf16' has shape [2, 3], expected [2, 3, 1] in "},
        {0, "f64", 0, {0}, "tensor 'f64' has shape [2, 3], expected [] in "},
        {0, "nope", 2, {2, 3}, "tensor 'nope' not found in "},
        {0, "i64", 1, {2}, "tensor 'i64' is I64, expected F32, F16, BF16 or F64 in "},
        {0, "u8", 1, {2}, "tensor 'u8' is U8, expected F32, F16, BF16 or F64 in "},
        {1, "f32", 2, {2, 3}, "tensor 'f32' is F32, expected I64, I32, I16, I8 or U8 in "},
        {1, "i32", 1, {5}, "tensor 'i32' has shape [4], expected [5] in "},
        {1, "i8", 1, {2}, "tensor 'i8' has shape [1, 2], expected [2] in "},
        {1, "NOPE", 1, {2}, "tensor 'NOPE' not found in "},
};

START_TEST(test_read_bad)
{
        union {
                float f[8];
                int64_t i[8];
        } dst, before;
        rnnd_stfile_t *f = NULL;
        rnnd_error_t e = {0};
        char path[512];
        int r;

        memset(&dst, 0x5a, sizeof(dst));
        before = dst;
        write_good(path, sizeof(path));
        ck_assert_msg(rnnd_stfile_open(path, &f, &e) == 0, "%s", e.msg);
        if (bad_reads[_i].as_i64)
                r = rnnd_stfile_read_i64(f, bad_reads[_i].name, bad_reads[_i].ndim,
                                         bad_reads[_i].shape, dst.i, &e);
        else
                r = rnnd_stfile_read_f32(f, bad_reads[_i].name, bad_reads[_i].ndim,
                                         bad_reads[_i].shape, dst.f, &e);
        ck_assert_int_eq(r, RNND_EMODEL);
        ck_assert_msg(strstr(e.msg, bad_reads[_i].msg) != NULL, "message '%s' lacks '%s'", e.msg,
                      bad_reads[_i].msg);
        ck_assert_msg(strstr(e.msg, path) != NULL, "message '%s' lacks the path", e.msg);
        ck_assert_msg(memcmp(&dst, &before, sizeof(dst)) == 0, "dst was written on failure");
        rnnd_stfile_close(f);
}
END_TEST

/*
 * A file changed underneath after open (an operator's cp over it during a
 * load).  Rewritten in place with its size unchanged, the read notices the new
 * mtime rather than mixing two files' weights; truncated, the read fails
 * with RNND_EIO, where a mapped file raised SIGBUS and killed the process.
 */
START_TEST(test_read_changed)
{
        static const uint64_t shape[] = {2, 3};
        struct timespec later[2] = {{.tv_nsec = UTIME_OMIT}, {0}};
        rnnd_stfile_t *f = NULL;
        rnnd_error_t e = {0};
        struct stat st;
        char path[512];
        float dst[6];

        write_good(path, sizeof(path));
        ck_assert_msg(rnnd_stfile_open(path, &f, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(stat(path, &st), 0);
        later[1].tv_sec = st.st_mtim.tv_sec + 1;
        ck_assert_int_eq(utimensat(AT_FDCWD, path, later, 0), 0);
        ck_assert_int_eq(rnnd_stfile_read_f32(f, "f32", 2, shape, dst, &e), RNND_EIO);
        ck_assert_msg(strstr(e.msg, "file changed while being read") != NULL, "%s", e.msg);
        rnnd_stfile_close(f);

        /* Opened again, the file reads; then it is truncated. */
        ck_assert_msg(rnnd_stfile_open(path, &f, &e) == 0, "%s", e.msg);
        ck_assert_int_eq(rnnd_stfile_read_f32(f, "f32", 2, shape, dst, &e), 0);
        /* The data buffer is 136 bytes; f64 is bytes [48, 96) of it. */
        ck_assert_int_eq(truncate(path, st.st_size - 100), 0);
        ck_assert_int_eq(rnnd_stfile_read_f32(f, "f64", 2, shape, dst, &e), RNND_EIO);
        ck_assert_msg(strstr(e.msg, "file shrank while being read (tensor 'f64': ") != NULL, "%s",
                      e.msg);
        ck_assert_msg(strncmp(e.msg, path, strlen(path)) == 0, "%s", e.msg);
        /* To nothing at all: past the mapped page, this was the SIGBUS. */
        ck_assert_int_eq(truncate(path, 0), 0);
        ck_assert_int_eq(rnnd_stfile_read_f32(f, "f32", 2, shape, dst, &e), RNND_EIO);
        rnnd_stfile_close(f);
}
END_TEST

/* A tensor over several read chunks (16 KiB) converts every element. */
START_TEST(test_read_chunks)
{
        enum { N = 3 * 16384 / 2 + 7 };
        static uint16_t bits[N];
        static float dst[N];
        const uint64_t shape[] = {N};
        rnnd_stfile_t *f = NULL;
        rnnd_error_t e = {0};
        char path[512], hdr[128];
        unsigned char *data = (unsigned char *)bits;

        for (int i = 0; i < N; i++) {
                uint16_t h =
                        (uint16_t)(i % 2048); /* a finite half, distinct per element mod 2048 */

                data[2 * i] = (unsigned char)h;
                data[2 * i + 1] = (unsigned char)(h >> 8);
        }
        snprintf(hdr, sizeof(hdr), "{" T("w", "F16", "[%d]", "[0,%d]") "}", N, 2 * N);
        write_st(path, sizeof(path), "chunks.safetensors", strlen(hdr), hdr, bits, sizeof(bits));
        ck_assert_msg(rnnd_stfile_open(path, &f, &e) == 0, "%s", e.msg);
        ck_assert_msg(rnnd_stfile_read_f32(f, "w", 1, shape, dst, &e) == 0, "%s", e.msg);
        for (int i = 0; i < N; i++)
                ck_assert_msg(dst[i] == rnnd_f16_to_f32((uint16_t)(i % 2048)), "element %d", i);
        rnnd_stfile_close(f);
}
END_TEST

/* Allocation failure: every failing allocation gives RNND_ENOMEM, never a crash or leak. */

START_TEST(test_oom_parse)
{
        /* clang-format off */
        static const char json[] = "{"
                "\"__metadata__\":{\"format\":\"pt\",\"by\":\"rnnd\"},"
                T("c", "F32", "[2]", "[8,16]") ","
                T("a", "F32", "[2]", "[0,8]") ","
                T("b", "I8", "[0]", "[16,16]") "}";
        /* clang-format on */
        struct rnnd_st_header h, before;
        rnnd_error_t e = {0};
        long n;
        int r;

        for (n = 0;; n++) {
                memset(&h, 0xa5, sizeof(h));
                before = h;
                rnnd_alloc_fail_after(n);
                r = parse_str(json, 16, &h, &e);
                rnnd_alloc_fail_after(-1);
                if (r == 0)
                        break;
                ck_assert_msg(r == RNND_ENOMEM, "fail after %ld: got %d (%s)", n, r, e.msg);
                ck_assert_msg(memcmp(&h, &before, sizeof(h)) == 0, "*ret written on failure");
                ck_assert_uint_gt(strlen(e.msg), 0);
        }
        /* Two meta arrays' worth of strings, the arrays, three names. */
        ck_assert_int_eq(n, 9);
        ck_assert_uint_eq(h.n_tensors, 3);
        ck_assert_str_eq(h.tensors[0].name, "a");
        ck_assert_str_eq(rnnd_st_header_meta(&h, "by"), "rnnd");
        rnnd_st_header_done(&h);
}
END_TEST

START_TEST(test_oom_open)
{
        rnnd_stfile_t *f = NULL;
        rnnd_error_t e = {0};
        char path[512];
        long n;
        int r;

        write_good(path, sizeof(path));
        for (n = 0;; n++) {
                f = (rnnd_stfile_t *)&f;
                rnnd_alloc_fail_after(n);
                r = rnnd_stfile_open(path, &f, &e);
                rnnd_alloc_fail_after(-1);
                if (r == 0)
                        break;
                ck_assert_msg(r == RNND_ENOMEM, "fail after %ld: got %d (%s)", n, r, e.msg);
                ck_assert_ptr_eq(f, (rnnd_stfile_t *)&f);
                ck_assert_msg(strncmp(e.msg, path, strlen(path)) == 0, "%s", e.msg);
        }
        ck_assert_int_gt(n, 2);
        ck_assert_uint_eq(rnnd_stfile_header(f)->n_tensors, 10);
        rnnd_stfile_close(f);
}
END_TEST

static Suite *safetensors_suite(void)
{
        Suite *s = suite_create("safetensors");
        TCase *tc;

        tc = tcase_create("parse_dtype");
        tcase_add_loop_test(tc, test_parse_dtype, 0, RNND_ELEMENTSOF(good_dtypes));
        suite_add_tcase(s, tc);
        tc = tcase_create("parse_good");
        tcase_add_loop_test(tc, test_parse_good, 0, RNND_ELEMENTSOF(good_headers));
        tcase_add_test(tc, test_parse_sorted);
        suite_add_tcase(s, tc);
        tc = tcase_create("parse_bad");
        tcase_add_loop_test(tc, test_parse_bad, 0, RNND_ELEMENTSOF(bad_headers));
        suite_add_tcase(s, tc);
        tc = tcase_create("parse_limits");
        tcase_add_test(tc, test_limit_count);
        tcase_add_test(tc, test_limit_name);
        suite_add_tcase(s, tc);
        tc = tcase_create("open_bad");
        tcase_add_unchecked_fixture(tc, tmpdir_setup, tmpdir_teardown);
        tcase_add_loop_test(tc, test_open_bad, 0, RNND_ELEMENTSOF(bad_files));
        tcase_add_test(tc, test_open_missing);
        suite_add_tcase(s, tc);
        tc = tcase_create("read");
        tcase_add_unchecked_fixture(tc, tmpdir_setup, tmpdir_teardown);
        tcase_add_loop_test(tc, test_read_f32, 0, RNND_ELEMENTSOF(f32_reads));
        tcase_add_loop_test(tc, test_read_i64, 0, RNND_ELEMENTSOF(i64_reads));
        tcase_add_test(tc, test_read_header);
        suite_add_tcase(s, tc);
        tc = tcase_create("read_bad");
        tcase_add_unchecked_fixture(tc, tmpdir_setup, tmpdir_teardown);
        tcase_add_loop_test(tc, test_read_bad, 0, RNND_ELEMENTSOF(bad_reads));
        tcase_add_test(tc, test_read_changed);
        tcase_add_test(tc, test_read_chunks);
        suite_add_tcase(s, tc);
        tc = tcase_create("oom");
        tcase_add_unchecked_fixture(tc, tmpdir_setup, tmpdir_teardown);
        tcase_add_test(tc, test_oom_parse);
        tcase_add_test(tc, test_oom_open);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(safetensors_suite)

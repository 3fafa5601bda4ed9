/* deflate.c: answers compressed as Accept-Encoding asks (deflate.h). */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <zlib.h>

#include "alloc.h"
#include "deflate.h"
#include "error.h"

#define OWS " \t"

/* A qvalue (RFC 9110 §12.4.2: "0" to "1" with up to three decimals) in thousandths, or -1. */
static int qvalue(const char *s, size_t n)
{
        int q = 0, digits = 0;

        if (n == 0 || (s[0] != '0' && s[0] != '1') || (n > 1 && s[1] != '.') || n > 5)
                return -1;
        for (size_t i = 2; i < n; i++, digits++) {
                if (s[i] < '0' || s[i] > '9')
                        return -1;
                q = q * 10 + (s[i] - '0');
        }
        while (digits++ < 3)
                q *= 10;
        q += (s[0] - '0') * 1000;
        return q <= 1000 ? q : -1;
}

/* The q of one element's parameters p[0..n) (";q=0.5;x=y"): 1000 when none, -1 when unreadable. */
static int element_q(const char *p, size_t n)
{
        int q = 1000;

        while (n > 0) {
                size_t k, v;

                p++, n--; /* the ';' */
                k = strspn(p, OWS);
                p += k < n ? k : n, n -= k < n ? k : n;
                for (v = 0; v < n && p[v] != ';'; v++)
                        ;
                if (v >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
                        size_t e = v;

                        while (e > 2 && (p[e - 1] == ' ' || p[e - 1] == '\t'))
                                e--;
                        q = qvalue(p + 2, e - 2);
                        if (q < 0)
                                return -1;
                }
                p += v, n -= v;
        }
        return q;
}

/* q[] is indexed by enum rnnd_encoding, and STAR for `*`. */
#define STAR (RNND_ENCODING_OTHER + 1)

/* Reads one list element e[0..n) into q[] (the highest q a coding is named with). */
static void element(const char *e, size_t n, int q[STAR + 1])
{
        size_t t = strcspn(e, ";" OWS), k;
        int v, c;

        if (t > n)
                t = n;
        for (k = t; k < n && (e[k] == ' ' || e[k] == '\t'); k++)
                ;
        if (t == 0 || (k < n && e[k] != ';'))
                return;
        v = element_q(e + k, n - k);
        c = t == 1 && e[0] == '*' ? STAR : (int)rnnd_encoding_of(e, t);
        if (v >= 0 && c != RNND_ENCODING_OTHER && v > q[c])
                q[c] = v;
}

enum rnnd_encoding rnnd_accept_encoding(const char *header)
{
        int q[STAR + 1] = {-1, -1, -1, -1, -1}, gz, df, best;

        for (const char *p = header; p != NULL && *p != '\0';) {
                size_t n;

                p += strspn(p, OWS ",");
                n = strcspn(p, ",");
                while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
                        n--;
                if (n > 0)
                        element(p, n, q);
                p += strcspn(p, ",");
        }
        gz = q[RNND_ENCODING_GZIP] >= 0 ? q[RNND_ENCODING_GZIP] : q[STAR];
        df = q[RNND_ENCODING_DEFLATE] >= 0 ? q[RNND_ENCODING_DEFLATE] : q[STAR];
        best = gz >= df ? gz : df;
        if (best <= 0 || q[RNND_ENCODING_IDENTITY] > best)
                return RNND_ENCODING_IDENTITY;
        return gz >= df ? RNND_ENCODING_GZIP : RNND_ENCODING_DEFLATE;
}

int rnnd_deflate(enum rnnd_encoding enc, bool tensors, const void *in, size_t len, char **ret,
                 size_t *ret_len)
{
        z_stream z = {0};
        const uint8_t *p = in;
        size_t left = len, cap;
        char *out;
        int zret;

        /* windowBits 15 + 16: a gzip wrapper; 15 alone: zlib's, which HTTP calls deflate. */
        if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, enc == RNND_ENCODING_GZIP ? 31 : 15, 8,
                         tensors ? Z_HUFFMAN_ONLY : Z_DEFAULT_STRATEGY) != Z_OK)
                return RNND_ENOMEM;
        cap = deflateBound(&z, len);
        out = rnnd_malloc(cap);
        if (out == NULL) {
                deflateEnd(&z);
                return RNND_ENOMEM;
        }
        z.next_out = (Bytef *)out;
        do { /* in and out in pieces of at most UINT_MAX bytes, zlib's counts */
                size_t room = cap - z.total_out;

                if (z.avail_in == 0 && left > 0) {
                        z.next_in = (Bytef *)(uintptr_t)p;
                        z.avail_in = left > UINT_MAX ? UINT_MAX : (uInt)left;
                        p += z.avail_in;
                        left -= z.avail_in;
                }
                z.avail_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
                zret = deflate(&z, left == 0 ? Z_FINISH : Z_NO_FLUSH);
        } while (zret == Z_OK);
        *ret_len = z.total_out;
        deflateEnd(&z);
        if (zret != Z_STREAM_END) {
                rnnd_free(out);
                return RNND_EINTERNAL;
        }
        *ret = out;
        return 0;
}

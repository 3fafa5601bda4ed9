/* inflate.c: compressed request bodies and gRPC messages, bounded (inflate.h). */
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "alloc.h"
#include "inflate.h"
#include "tensor.h"

enum rnnd_encoding rnnd_encoding_of(const char *name, size_t len)
{
        static const struct {
                const char *name;
                enum rnnd_encoding enc;
        } names[] = {{"identity", RNND_ENCODING_IDENTITY},
                     {"gzip", RNND_ENCODING_GZIP},
                     {"x-gzip", RNND_ENCODING_GZIP},
                     {"deflate", RNND_ENCODING_DEFLATE}};

        if (name == NULL || len == 0)
                return RNND_ENCODING_IDENTITY;
        for (size_t i = 0; i < RNND_ELEMENTSOF(names); i++)
                if (strlen(names[i].name) == len && strncasecmp(name, names[i].name, len) == 0)
                        return names[i].enc;
        return RNND_ENCODING_OTHER;
}

struct out {
        char *data;
        size_t len, cap, max; /* cap: bytes allocated; up to max + 2 */
};

/* Room for more output, up to max + 1 bytes (one past the limit shows it was passed). */
static int grow(struct out *o)
{
        size_t cap = o->cap * 2;
        char *p;

        if (cap > o->max + 2)
                cap = o->max + 2;
        p = rnnd_realloc(o->data, cap);
        if (p == NULL)
                return RNND_ENOMEM;
        o->data = p;
        o->cap = cap;
        return 0;
}

/* Feeds the rest of the input and lets zlib write into o's room.  Returns zlib's result. */
static int step(z_stream *z, struct out *o, const uint8_t **in, size_t *left)
{
        size_t room = o->cap - 1 - o->len; /* one kept for the NUL */
        int zret;

        if (z->avail_in == 0 && *left > 0) {
                z->next_in = (Bytef *)(uintptr_t)*in;
                z->avail_in = *left > UINT_MAX ? UINT_MAX : (uInt)*left;
                *in += z->avail_in;
                *left -= z->avail_in;
        }
        z->next_out = (Bytef *)o->data + o->len;
        z->avail_out = room > UINT_MAX ? UINT_MAX : (uInt)room;
        zret = inflate(z, Z_NO_FLUSH);
        o->len += (size_t)((char *)z->next_out - (o->data + o->len));
        return zret;
}

/* After a stream's end: more input is another gzip member, or bytes that do not belong. */
static int stream_end(z_stream *z, enum rnnd_encoding enc, size_t left, bool *done,
                      rnnd_error_t *reterr)
{
        if (z->avail_in == 0 && left == 0) {
                *done = true;
                return 0;
        }
        if (enc == RNND_ENCODING_GZIP && inflateReset(z) == Z_OK)
                return 0;
        return rnnd_error_set(reterr, RNND_EINVAL, "%zu bytes follow the compressed data",
                              (size_t)z->avail_in + left);
}

static int run(z_stream *z, enum rnnd_encoding enc, const uint8_t *in, size_t left, struct out *o,
               const char *limit_name, rnnd_error_t *reterr)
{
        bool done = false;
        int ret = 0;

        while (!done && ret == 0) {
                int zret;

                if (o->len + 1 == o->cap && (ret = grow(o)) < 0)
                        return rnnd_error_set(reterr, ret, "out of memory decompressing");
                zret = step(z, o, &in, &left);
                if (o->len > o->max)
                        return rnnd_error_set(reterr, RNND_ETOOBIG,
                                              "it decompresses to more than %s (%zu bytes)",
                                              limit_name, o->max);
                if (zret == Z_STREAM_END)
                        ret = stream_end(z, enc, left, &done, reterr);
                else if (zret == Z_MEM_ERROR)
                        ret = rnnd_error_set(reterr, RNND_ENOMEM, "out of memory decompressing");
                else if (zret == Z_BUF_ERROR && z->avail_in == 0 && left == 0)
                        ret = rnnd_error_set(reterr, RNND_EINVAL, "the compressed data ends early");
                else if (zret != Z_OK && zret != Z_BUF_ERROR)
                        ret = rnnd_error_set(reterr, RNND_EINVAL, "not valid %s data: %.120s",
                                             enc == RNND_ENCODING_GZIP ? "gzip" : "deflate",
                                             z->msg != NULL ? z->msg : "zlib refused it");
        }
        return ret;
}

int rnnd_inflate(enum rnnd_encoding enc, const void *in, size_t len, size_t max,
                 const char *limit_name, char **ret, size_t *ret_len, rnnd_error_t *reterr)
{
        struct out o = {.max = max};
        z_stream z;
        int r;

        *ret = NULL;
        *ret_len = 0;
        if (max > SIZE_MAX - 2)
                o.max = SIZE_MAX - 2;
        memset(&z, 0, sizeof(z));
        /* gzip: 16 + 15 (gzip's header); deflate: 15 (zlib's header). */
        if (inflateInit2(&z, enc == RNND_ENCODING_GZIP ? 31 : 15) != Z_OK)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory decompressing");
        o.cap = len < 4096 ? 4096 : len > o.max / 4 ? o.max + 2 : 4 * len;
        if (o.cap > o.max + 2)
                o.cap = o.max + 2;
        o.data = rnnd_malloc(o.cap);
        r = o.data == NULL ? rnnd_error_set(reterr, RNND_ENOMEM, "out of memory decompressing")
                           : run(&z, enc, in, len, &o, limit_name, reterr);
        inflateEnd(&z);
        if (r < 0) {
                rnnd_free(o.data);
                return r;
        }
        o.data[o.len] = '\0';
        *ret = o.data;
        *ret_len = o.len;
        return 0;
}

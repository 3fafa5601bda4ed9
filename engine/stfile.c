/*
 * stfile.c: a safetensors file, mapped read-only and checked before use.
 *
 * Opening maps the whole file, reads the little-endian header length, checks
 * it against the file size and RNND_ST_MAX_HEADER, and lets proto/ parse and
 * check the header against the data buffer that follows it.  Only then do the
 * readers touch data bytes, converting them element by element with byte-wise
 * little-endian loads, since the data buffer need not be aligned.
 *
 * An open file is immutable, so its readers may run on any thread at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "stfile.h"

/* Room for "[d0, d1, ...]" with RNND_MAX_DIMS 20-digit dims. */
#define SHAPE_STR_MAX (RNND_MAX_DIMS * 22 + 3)

struct rnnd_stfile {
        char *path;                /* owned; for messages; immutable after open */
        const unsigned char *map;  /* the whole file, mapped; immutable after open */
        size_t map_len;            /* bytes mapped; immutable after open */
        const unsigned char *data; /* the data buffer inside map; immutable after open */
        uint64_t data_len;         /* bytes in the data buffer; immutable after open */
        struct rnnd_st_header hdr; /* the parsed header; immutable after open */
};

static uint16_t load_le16(const unsigned char *p)
{
        return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

static uint32_t load_le32(const unsigned char *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t load_le64(const unsigned char *p)
{
        return (uint64_t)load_le32(p) | (uint64_t)load_le32(p + 4) << 32;
}

static double f64_from_bits(uint64_t u)
{
        double d;

        memcpy(&d, &u, sizeof(d));
        return d;
}

/*
 * Rounds a double to the nearest float.  A finite double at or past
 * FLT_MAX + half an ulp becomes an infinity explicitly, because C leaves the
 * conversion of an out-of-range value undefined.
 */
static float f64_to_f32(double d)
{
        if (d >= 0x1.ffffffp127)
                return INFINITY;
        if (d <= -0x1.ffffffp127)
                return -INFINITY;
        return (float)d;
}

int rnnd_stfile_open(const char *path, rnnd_stfile_t **ret, rnnd_error_t *reterr)
{
        rnnd_stfile_t *f = NULL;
        void *map = MAP_FAILED;
        size_t size = 0;
        uint64_t hlen;
        struct stat st;
        char ebuf[128];
        int fd, r;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return rnnd_error_set(reterr, RNND_EIO, "%s: cannot open: %s", path,
                                      strerror_r(errno, ebuf, sizeof(ebuf)));
        if (fstat(fd, &st) < 0) {
                r = rnnd_error_set(reterr, RNND_EIO, "%s: cannot stat: %s", path,
                                   strerror_r(errno, ebuf, sizeof(ebuf)));
                goto out;
        }
        if (!S_ISREG(st.st_mode)) {
                r = rnnd_error_set(reterr, RNND_EIO, "%s: not a regular file", path);
                goto out;
        }
        /* A 0-byte file cannot be mapped, so check the size first. */
        if (st.st_size < 8) {
                r = rnnd_error_set(reterr, RNND_EMODEL,
                                   "%s: file is %jd bytes, too short for a safetensors file "
                                   "(at least 8)",
                                   path, (intmax_t)st.st_size);
                goto out;
        }
        if ((uintmax_t)st.st_size > SIZE_MAX) {
                r = rnnd_error_set(reterr, RNND_EMODEL, "%s: file is %jd bytes, too big to map",
                                   path, (intmax_t)st.st_size);
                goto out;
        }
        size = (size_t)st.st_size;
        map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
                r = rnnd_error_set(reterr, RNND_EIO, "%s: cannot map %zu bytes: %s", path, size,
                                   strerror_r(errno, ebuf, sizeof(ebuf)));
                goto out;
        }

        hlen = load_le64(map);
        if (hlen > RNND_ST_MAX_HEADER) {
                r = rnnd_error_set(reterr, RNND_EMODEL,
                                   "%s: header length %" PRIu64 " is over the limit of %u bytes",
                                   path, hlen, RNND_ST_MAX_HEADER);
                goto out;
        }
        if (hlen > size - 8) {
                r = rnnd_error_set(reterr, RNND_EMODEL,
                                   "%s: header length %" PRIu64
                                   " is past the end of the file (%zu bytes after the length)",
                                   path, hlen, size - 8);
                goto out;
        }
        if (hlen == 0 || ((const unsigned char *)map)[8] != '{') {
                r = rnnd_error_set(reterr, RNND_EMODEL, "%s: header does not start with '{'", path);
                goto out;
        }

        f = rnnd_calloc(1, sizeof(*f));
        if (f == NULL) {
                r = rnnd_error_set(reterr, RNND_ENOMEM, "%s: out of memory", path);
                goto out;
        }
        f->path = rnnd_strdup(path);
        if (f->path == NULL) {
                r = rnnd_error_set(reterr, RNND_ENOMEM, "%s: out of memory", path);
                goto out;
        }
        f->map = map;
        f->map_len = size;
        f->data = f->map + 8 + hlen;
        f->data_len = size - 8 - hlen;
        map = MAP_FAILED; /* f owns it now */
        r = rnnd_st_header_parse((const char *)f->map + 8, (size_t)hlen, f->data_len, &f->hdr,
                                 reterr);
        if (r < 0) {
                rnnd_error_prefix(reterr, "%s", path);
                goto out;
        }

        *ret = f;
        f = NULL;
        r = 0;
out:
        rnnd_stfile_close(f);
        if (map != MAP_FAILED)
                munmap(map, size);
        close(fd);
        return r;
}

rnnd_stfile_t *rnnd_stfile_close(rnnd_stfile_t *f)
{
        if (f == NULL)
                return NULL;
        rnnd_st_header_done(&f->hdr);
        if (f->map != NULL)
                munmap((void *)f->map, f->map_len);
        rnnd_free(f->path);
        rnnd_free(f);
        return NULL;
}

const struct rnnd_st_header *rnnd_stfile_header(const rnnd_stfile_t *f)
{
        return &f->hdr;
}

const struct rnnd_st_tensor *rnnd_stfile_find(const rnnd_stfile_t *f, const char *name)
{
        return rnnd_st_header_find(&f->hdr, name);
}

/*
 * Finds tensor name and checks its shape against shape[0..ndim).  Returns it
 * (borrowed), or NULL with the error set; *err gets the code.
 */
static const struct rnnd_st_tensor *lookup(const rnnd_stfile_t *f, const char *name, unsigned ndim,
                                           const uint64_t *shape, int *err, rnnd_error_t *reterr)
{
        const struct rnnd_st_tensor *t = rnnd_st_header_find(&f->hdr, name);
        char have[SHAPE_STR_MAX], want[SHAPE_STR_MAX];
        int same;

        if (t == NULL) {
                *err = rnnd_error_set(reterr, RNND_EMODEL, "tensor '%s' not found in %s", name,
                                      f->path);
                return NULL;
        }
        same = t->ndim == ndim;
        for (unsigned i = 0; same && i < ndim; i++)
                same = t->shape[i] == shape[i];
        if (!same) {
                *err = rnnd_error_set(reterr, RNND_EMODEL,
                                      "tensor '%s' has shape %s, expected %s in %s", name,
                                      rnnd_shape_format(have, sizeof(have), t->shape, t->ndim),
                                      rnnd_shape_format(want, sizeof(want), shape, ndim), f->path);
                return NULL;
        }
        return t;
}

/* Converts n elements of type dt at p into dst's type; false for a dtype it does not take. */
typedef bool (*convert_fn)(rnnd_dtype_t dt, const unsigned char *p, uint64_t n, void *dst);

static bool to_f32(rnnd_dtype_t dt, const unsigned char *p, uint64_t n, void *out)
{
        float *dst = out;

        switch (dt) {
        case RNND_DT_F32:
                for (uint64_t i = 0; i < n; i++)
                        dst[i] = rnnd_f32_from_bits(load_le32(p + 4 * i));
                return true;
        case RNND_DT_F16:
                for (uint64_t i = 0; i < n; i++)
                        dst[i] = rnnd_f16_to_f32(load_le16(p + 2 * i));
                return true;
        case RNND_DT_BF16:
                for (uint64_t i = 0; i < n; i++)
                        dst[i] = rnnd_bf16_to_f32(load_le16(p + 2 * i));
                return true;
        case RNND_DT_F64:
                for (uint64_t i = 0; i < n; i++)
                        dst[i] = f64_to_f32(f64_from_bits(load_le64(p + 8 * i)));
                return true;
        default:
                return false;
        }
}

static bool to_i64(rnnd_dtype_t dt, const unsigned char *p, uint64_t n, void *out)
{
        int64_t *dst = out;

        switch (dt) {
        case RNND_DT_I64:
                for (uint64_t i = 0; i < n; i++)
                        dst[i] = (int64_t)load_le64(p + 8 * i);
                return true;
        case RNND_DT_I32:
                for (uint64_t i = 0; i < n; i++)
                        dst[i] = (int32_t)load_le32(p + 4 * i);
                return true;
        case RNND_DT_I16:
                for (uint64_t i = 0; i < n; i++)
                        dst[i] = (int16_t)load_le16(p + 2 * i);
                return true;
        case RNND_DT_I8:
                for (uint64_t i = 0; i < n; i++)
                        dst[i] = (int8_t)p[i];
                return true;
        case RNND_DT_U8:
                for (uint64_t i = 0; i < n; i++)
                        dst[i] = p[i];
                return true;
        default:
                return false;
        }
}

/* Finds and checks tensor name, then converts it into dst; expected names the dtypes taken. */
static int read_as(const rnnd_stfile_t *f, const char *name, unsigned ndim, const uint64_t *shape,
                   convert_fn convert, const char *expected, void *dst, rnnd_error_t *reterr)
{
        const struct rnnd_st_tensor *t;
        int r = 0;

        t = lookup(f, name, ndim, shape, &r, reterr);
        if (t == NULL)
                return r;
        if (!convert(t->dtype, f->data + t->begin, t->numel, dst))
                return rnnd_error_set(reterr, RNND_EMODEL, "tensor '%s' is %s, expected %s in %s",
                                      name, rnnd_dtype_st_name(t->dtype), expected, f->path);
        return 0;
}

int rnnd_stfile_read_f32(const rnnd_stfile_t *f, const char *name, unsigned ndim,
                         const uint64_t *shape, float *dst, rnnd_error_t *reterr)
{
        return read_as(f, name, ndim, shape, to_f32, "F32, F16, BF16 or F64", dst, reterr);
}

int rnnd_stfile_read_i64(const rnnd_stfile_t *f, const char *name, unsigned ndim,
                         const uint64_t *shape, int64_t *dst, rnnd_error_t *reterr)
{
        return read_as(f, name, ndim, shape, to_i64, "I64, I32, I16, I8 or U8", dst, reterr);
}

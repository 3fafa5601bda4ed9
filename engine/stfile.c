/*
 * stfile.c: a safetensors file, read with pread() into owned memory and
 * checked before use.
 *
 * Opening reads the little-endian header length, checks it against the file
 * size and RNND_ST_MAX_HEADER, reads the header and lets proto/ parse and
 * check it against the data buffer that follows.  The readers then read each
 * tensor's bytes in small chunks and convert them element by element with
 * byte-wise little-endian loads, since the data buffer need not be aligned.
 *
 * The file is not mapped: a file mapped and then truncated underneath (an
 * operator's cp over it during a load) raises SIGBUS on the next read past
 * its new end, which would kill the daemon.  pread() instead returns short,
 * and a file that shrank or was rewritten in place since open (its size,
 * mtime or ctime differ) is refused with RNND_EIO.  The descriptor stays open
 * until close, so a file replaced by rename is read whole, as it was opened.
 * The open uses O_NONBLOCK so that a FIFO in the repository cannot block the
 * loader before the regular-file check (docs/OPERATIONS.md).
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
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "stfile.h"
#include "tensor.h"

/* Room for "[d0, d1, ...]" with RNND_MAX_DIMS 20-digit dims. */
#define SHAPE_STR_MAX (RNND_MAX_DIMS * 22 + 3)

/* Bytes of tensor data read and converted at a time (a multiple of every dtype size). */
#define CHUNK 16384

struct rnnd_stfile {
        char *path;                /* owned; for messages; immutable after open */
        int fd;                    /* owned; read with pread() only */
        struct stat st;            /* the file at open, to notice it changing */
        uint64_t data_off;         /* the data buffer's offset in the file; immutable */
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

/*
 * Reads n bytes at off into buf, retrying after EINTR and short reads.
 * Returns the bytes read (fewer than n at the end of the file), or -1 with
 * errno set.
 */
static ssize_t pread_full(int fd, void *buf, size_t n, uint64_t off)
{
        size_t got = 0;
        ssize_t k;

        while (got < n) {
                k = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -1;
                if (k == 0)
                        break;
                got += (size_t)k;
        }
        return (ssize_t)got;
}

/*
 * Reads n bytes at off of f's file into buf; a short read (the file shrank)
 * or an error is RNND_EIO naming what was read.
 */
static int read_at(const char *path, int fd, void *buf, size_t n, uint64_t off, const char *what,
                   rnnd_error_t *reterr)
{
        char ebuf[128];
        ssize_t k = pread_full(fd, buf, n, off);

        if (k < 0)
                return rnnd_error_set(reterr, RNND_EIO, "%s: cannot read %s: %s", path, what,
                                      strerror_r(errno, ebuf, sizeof(ebuf)));
        if ((size_t)k < n)
                return rnnd_error_set(reterr, RNND_EIO,
                                      "%s: file shrank while being read (%s: %zd of %zu bytes at "
                                      "offset %" PRIu64 ")",
                                      path, what, k, n, off);
        return 0;
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
        return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* RNND_EIO when f's file is no longer the one opened: its size, mtime or ctime changed. */
static int check_unchanged(const rnnd_stfile_t *f, rnnd_error_t *reterr)
{
        struct stat now;
        char ebuf[128];

        if (fstat(f->fd, &now) < 0)
                return rnnd_error_set(reterr, RNND_EIO, "%s: cannot stat: %s", f->path,
                                      strerror_r(errno, ebuf, sizeof(ebuf)));
        if (now.st_size != f->st.st_size || !same_time(&now.st_mtim, &f->st.st_mtim) ||
            !same_time(&now.st_ctim, &f->st.st_ctim))
                return rnnd_error_set(reterr, RNND_EIO,
                                      "%s: file changed while being read (%jd bytes at open, "
                                      "%jd now); replace weights by rename, not in place",
                                      f->path, (intmax_t)f->st.st_size, (intmax_t)now.st_size);
        return 0;
}

int rnnd_stfile_open(const char *path, rnnd_stfile_t **ret, rnnd_error_t *reterr)
{
        rnnd_stfile_t *f = NULL;
        unsigned char len8[8];
        char *hbuf = NULL;
        uint64_t size, hlen;
        struct stat st;
        char ebuf[128];
        int fd, r;

        /* O_NONBLOCK: a FIFO opens at once (and is refused below) instead of waiting for a writer.
         */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
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
        if (st.st_size < 8) {
                r = rnnd_error_set(reterr, RNND_EMODEL,
                                   "%s: file is %jd bytes, too short for a safetensors file "
                                   "(at least 8)",
                                   path, (intmax_t)st.st_size);
                goto out;
        }
        size = (uint64_t)st.st_size;
        r = read_at(path, fd, len8, sizeof(len8), 0, "the header length", reterr);
        if (r < 0)
                goto out;
        hlen = 0;
        for (int i = 7; i >= 0; i--)
                hlen = hlen << 8 | len8[i];
        if (hlen > RNND_ST_MAX_HEADER) {
                r = rnnd_error_set(reterr, RNND_EMODEL,
                                   "%s: header length %" PRIu64 " is over the limit of %u bytes",
                                   path, hlen, RNND_ST_MAX_HEADER);
                goto out;
        }
        if (hlen > size - 8) {
                r = rnnd_error_set(reterr, RNND_EMODEL,
                                   "%s: header length %" PRIu64
                                   " is past the end of the file (%" PRIu64
                                   " bytes after the length)",
                                   path, hlen, size - 8);
                goto out;
        }
        /* hlen is now at most RNND_ST_MAX_HEADER and backed by the file. */
        hbuf = rnnd_malloc(hlen ? (size_t)hlen : 1);
        if (hbuf == NULL) {
                r = rnnd_error_set(reterr, RNND_ENOMEM, "%s: out of memory", path);
                goto out;
        }
        r = read_at(path, fd, hbuf, (size_t)hlen, 8, "the header", reterr);
        if (r < 0)
                goto out;
        if (hlen == 0 || hbuf[0] != '{') {
                r = rnnd_error_set(reterr, RNND_EMODEL, "%s: header does not start with '{'", path);
                goto out;
        }

        f = rnnd_calloc(1, sizeof(*f));
        if (f == NULL) {
                r = rnnd_error_set(reterr, RNND_ENOMEM, "%s: out of memory", path);
                goto out;
        }
        f->fd = -1;
        f->path = rnnd_strdup(path);
        if (f->path == NULL) {
                r = rnnd_error_set(reterr, RNND_ENOMEM, "%s: out of memory", path);
                goto out;
        }
        f->st = st;
        f->data_off = 8 + hlen;
        f->data_len = size - 8 - hlen;
        r = rnnd_st_header_parse(hbuf, (size_t)hlen, f->data_len, &f->hdr, reterr);
        if (r < 0) {
                rnnd_error_prefix(reterr, "%s", path);
                goto out;
        }
        f->fd = fd;
        fd = -1; /* f owns it now */

        *ret = f;
        f = NULL;
        r = 0;
out:
        rnnd_free(hbuf);
        rnnd_stfile_close(f);
        if (fd >= 0)
                close(fd);
        return r;
}

rnnd_stfile_t *rnnd_stfile_close(rnnd_stfile_t *f)
{
        if (f == NULL)
                return NULL;
        rnnd_st_header_done(&f->hdr);
        if (f->fd >= 0)
                close(f->fd);
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

/* Converts n elements of dtype dt at p into dst[0..n) as float32. */
static void convert_f32(rnnd_dtype_t dt, const unsigned char *p, size_t n, float *dst)
{
        switch (dt) {
        case RNND_DT_F32:
                for (size_t i = 0; i < n; i++)
                        dst[i] = rnnd_f32_from_bits(load_le32(p + 4 * i));
                break;
        case RNND_DT_F16:
                for (size_t i = 0; i < n; i++)
                        dst[i] = rnnd_f16_to_f32(load_le16(p + 2 * i));
                break;
        case RNND_DT_BF16:
                for (size_t i = 0; i < n; i++)
                        dst[i] = rnnd_bf16_to_f32(load_le16(p + 2 * i));
                break;
        default: /* RNND_DT_F64; the caller checked */
                for (size_t i = 0; i < n; i++)
                        dst[i] = f64_to_f32(f64_from_bits(load_le64(p + 8 * i)));
                break;
        }
}

/* Converts n elements of dtype dt at p into dst[0..n) as int64. */
static void convert_i64(rnnd_dtype_t dt, const unsigned char *p, size_t n, int64_t *dst)
{
        switch (dt) {
        case RNND_DT_I64:
                for (size_t i = 0; i < n; i++)
                        dst[i] = (int64_t)load_le64(p + 8 * i);
                break;
        case RNND_DT_I32:
                for (size_t i = 0; i < n; i++)
                        dst[i] = (int32_t)load_le32(p + 4 * i);
                break;
        case RNND_DT_I16:
                for (size_t i = 0; i < n; i++)
                        dst[i] = (int16_t)load_le16(p + 2 * i);
                break;
        case RNND_DT_I8:
                for (size_t i = 0; i < n; i++)
                        dst[i] = (int8_t)p[i];
                break;
        default: /* RNND_DT_U8; the caller checked */
                for (size_t i = 0; i < n; i++)
                        dst[i] = p[i];
                break;
        }
}

/*
 * Reads tensor t CHUNK bytes at a time and converts it into dst, as float32
 * (as_f32) or int64.  Then checks that the file did not change meanwhile.
 * On failure (RNND_EIO) dst may be partly written.
 */
static int read_tensor(const rnnd_stfile_t *f, const struct rnnd_st_tensor *t, bool as_f32,
                       void *dst, rnnd_error_t *reterr)
{
        unsigned char buf[CHUNK];
        size_t width = rnnd_dtype_size(t->dtype), per = CHUNK / width;
        char what[RNND_ST_MAX_NAME + 16];
        int r;

        snprintf(what, sizeof(what), "tensor '%s'", t->name);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* F32 into float32 on a little-endian host: the bytes are the floats, read in place. */
        if (as_f32 && t->dtype == RNND_DT_F32) {
                r = read_at(f->path, f->fd, dst, (size_t)(t->end - t->begin),
                            f->data_off + t->begin, what, reterr);
                return r < 0 ? r : check_unchanged(f, reterr);
        }
#endif
        for (uint64_t done = 0; done < t->numel;) {
                size_t n = t->numel - done < per ? (size_t)(t->numel - done) : per;

                r = read_at(f->path, f->fd, buf, n * width, f->data_off + t->begin + done * width,
                            what, reterr);
                if (r < 0)
                        return r;
                if (as_f32)
                        convert_f32(t->dtype, buf, n, (float *)dst + done);
                else
                        convert_i64(t->dtype, buf, n, (int64_t *)dst + done);
                done += n;
        }
        return check_unchanged(f, reterr);
}

/* Finds and checks tensor name, then reads it as float32 (as_f32) or int64, if its dtype is one
 * of those the caller takes (taken, named by expected). */
static int read_as(const rnnd_stfile_t *f, const char *name, unsigned ndim, const uint64_t *shape,
                   bool as_f32, bool (*taken)(rnnd_dtype_t), const char *expected, void *dst,
                   rnnd_error_t *reterr)
{
        const struct rnnd_st_tensor *t;
        int r = 0;

        t = lookup(f, name, ndim, shape, &r, reterr);
        if (t == NULL)
                return r;
        if (!taken(t->dtype))
                return rnnd_error_set(reterr, RNND_EMODEL, "tensor '%s' is %s, expected %s in %s",
                                      name, rnnd_dtype_st_name(t->dtype), expected, f->path);
        return read_tensor(f, t, as_f32, dst, reterr);
}

static bool is_float(rnnd_dtype_t dt)
{
        return dt == RNND_DT_F32 || dt == RNND_DT_F16 || dt == RNND_DT_BF16 || dt == RNND_DT_F64;
}

static bool is_int(rnnd_dtype_t dt)
{
        return dt == RNND_DT_I64 || dt == RNND_DT_I32 || dt == RNND_DT_I16 || dt == RNND_DT_I8 ||
               dt == RNND_DT_U8;
}

int rnnd_stfile_read_f32(const rnnd_stfile_t *f, const char *name, unsigned ndim,
                         const uint64_t *shape, float *dst, rnnd_error_t *reterr)
{
        return read_as(f, name, ndim, shape, true, is_float, "F32, F16, BF16 or F64", dst, reterr);
}

int rnnd_stfile_read_i64(const rnnd_stfile_t *f, const char *name, unsigned ndim,
                         const uint64_t *shape, int64_t *dst, rnnd_error_t *reterr)
{
        return read_as(f, name, ndim, shape, false, is_int, "I64, I32, I16, I8 or U8", dst, reterr);
}

/*
 * numscan.c: the fast path for tensor data in JSON (see numscan.h).
 *
 * A recursive descent over the shape: at depth d it expects '[', then
 * shape[d] values separated by ',', then ']'; at the last depth the values
 * are numbers.  Anything unexpected returns 0 at once.
 */
#include <math.h>
#include <stdbool.h>

#include "numparse.h"
#include "numscan.h"

#define F32_OVERFLOW 0x1.ffffffp127 /* the least double that rounds to infinity in float */

struct scan {
        const char *p, *end;
        rnnd_dtype_t dt;
        char *dst;
};

static void skip_ws(struct scan *s)
{
        while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
                s->p++;
}

static bool expect(struct scan *s, char c)
{
        skip_ws(s);
        if (s->p == s->end || *s->p != c)
                return false;
        s->p++;
        return true;
}

/*
 * The form most JSON writers send for tensor data, read inline: -?D+(.D+)?
 * with at most 19 digits in all, a mantissa up to 2^53 and no exponent.  The
 * value is rnnd_numparse()'s Clinger fast path, the same division, so the
 * same double.  False, having read nothing, for anything else (numparse.c
 * then reads it, or refuses it).
 */
static bool short_number(struct scan *s, double *d)
{
        const char *q = s->p, *end = s->end;
        bool neg = q < end && *q == '-';
        uint64_t m = 0;
        unsigned nd = 0, scale = 0;

        q += neg;
        if (q == end || (unsigned)(*q - '0') > 9 ||
            (*q == '0' && q + 1 < end && (unsigned)(q[1] - '0') <= 9))
                return false;
        for (; q < end && (unsigned)(*q - '0') <= 9 && nd < 19; q++, nd++)
                m = m * 10 + (uint64_t)(*q - '0');
        if (q < end && *q == '.') {
                q++;
                if (q == end || (unsigned)(*q - '0') > 9)
                        return false;
                for (; q < end && (unsigned)(*q - '0') <= 9 && nd < 19; q++, nd++, scale++)
                        m = m * 10 + (uint64_t)(*q - '0');
        }
        if (q < end && ((unsigned)(*q - '0') <= 9 || *q == 'e' || *q == 'E' || *q == '.'))
                return false; /* more digits than 19, an exponent */
        if (m > (UINT64_C(1) << 53))
                return false;
        *d = (double)m / rnnd__pow10[scale];
        if (neg)
                *d = -*d;
        s->p = q;
        return true;
}

static bool number(struct scan *s)
{
        struct rnnd_number v;
        float f;

        skip_ws(s);
        if (s->dt != RNND_DT_F32 || !short_number(s, &v.d)) {
                /* jansson refuses integer text past int64 ("too big integer"): its path
                 * reports it */
                if (rnnd_numparse(s->p, (size_t)(s->end - s->p), &v) < 0 || v.big_int)
                        return false;
                s->p += v.len;
                if (s->dt != RNND_DT_F32) {
                        if (!v.is_int)
                                return false;
                        __builtin_memcpy(s->dst, &v.i, sizeof(v.i));
                        s->dst += sizeof(v.i);
                        return true;
                }
                if (fabs(v.d) >= F32_OVERFLOW)
                        return false;
        }
        f = (float)v.d;
        __builtin_memcpy(s->dst, &f, sizeof(f));
        s->dst += sizeof(f);
        return true;
}

/* count values at depth d of ndim (d == ndim - 1: numbers). */
static bool level(struct scan *s, const uint64_t *shape, unsigned ndim, unsigned d)
{
        if (!expect(s, '['))
                return false;
        for (uint64_t i = 0; i < shape[d]; i++) {
                if (i > 0 && !expect(s, ','))
                        return false;
                if (d + 1 == ndim ? !number(s) : !level(s, shape, ndim, d + 1))
                        return false;
        }
        return expect(s, ']');
}

size_t rnnd_numscan(const char *p, size_t n, const uint64_t *shape, unsigned ndim, bool flat,
                    rnnd_dtype_t dt, void *dst)
{
        struct scan s = {p, p + n, dt, dst};
        uint64_t numel = 1;

        if (dt != RNND_DT_F32 && dt != RNND_DT_I64)
                return 0;
        for (unsigned d = 0; d < ndim; d++)
                numel *= shape[d];
        if (ndim == 0 || numel == 0)
                return 0; /* a scalar or an empty tensor: rare, the jansson path has them */
        if (flat ? !level(&s, &numel, 1, 0) : !level(&s, shape, ndim, 0))
                return 0;
        return (size_t)(s.p - p);
}

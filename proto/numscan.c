/*
 * numscan.c: the fast path for tensor data in JSON (see numscan.h).
 *
 * A recursive descent over the shape: at depth d it expects '[', then
 * shape[d] values separated by ',', then ']'; at the last depth the values
 * are numbers.  Anything unexpected returns 0 at once.
 */
#include <math.h>
#include <stdbool.h>
#include <string.h>

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

static bool number(struct scan *s)
{
        struct rnnd_number v;

        skip_ws(s);
        if (rnnd_numparse(s->p, (size_t)(s->end - s->p), &v) < 0)
                return false;
        /* Integer text beyond int64: jansson refuses the document ("too big
         * integer"), so its path reports it (numparse.h). */
        if (!v.is_int && memchr(s->p, '.', v.len) == NULL && memchr(s->p, 'e', v.len) == NULL &&
            memchr(s->p, 'E', v.len) == NULL)
                return false;
        s->p += v.len;
        if (s->dt == RNND_DT_F32) {
                float f;

                if (fabs(v.d) >= F32_OVERFLOW)
                        return false;
                f = (float)v.d;
                __builtin_memcpy(s->dst, &f, sizeof(f));
                s->dst += sizeof(f);
        } else {
                if (!v.is_int)
                        return false;
                __builtin_memcpy(s->dst, &v.i, sizeof(v.i));
                s->dst += sizeof(v.i);
        }
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

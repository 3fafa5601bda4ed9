/* tensor.c: dtype names and sizes, half/bfloat16 conversion, shape products and text. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "tensor.h"

static const struct {
        const char *kname, *stname;
        size_t size;
} dtypes[RNND_DT_COUNT] = {[RNND_DT_INVALID] = {"INVALID", "INVALID", 0},
#define RNND_DTYPE_ROW(e, kn, sn, sz) [RNND_DT_##e] = {kn, sn, sz},
                           RNND_DTYPE_MAP(RNND_DTYPE_ROW)
#undef RNND_DTYPE_ROW
};

const char *rnnd_dtype_name(rnnd_dtype_t dt)
{
        return (unsigned)dt < RNND_DT_COUNT ? dtypes[dt].kname : "INVALID";
}

const char *rnnd_dtype_st_name(rnnd_dtype_t dt)
{
        return (unsigned)dt < RNND_DT_COUNT ? dtypes[dt].stname : "INVALID";
}

rnnd_dtype_t rnnd_dtype_from_name(const char *s)
{
        for (int i = 1; i < RNND_DT_COUNT; i++)
                if (strcmp(s, dtypes[i].kname) == 0)
                        return (rnnd_dtype_t)i;
        return RNND_DT_INVALID;
}

rnnd_dtype_t rnnd_dtype_from_st_name(const char *s)
{
        for (int i = 1; i < RNND_DT_COUNT; i++)
                if (strcmp(s, dtypes[i].stname) == 0)
                        return (rnnd_dtype_t)i;
        return RNND_DT_INVALID;
}

size_t rnnd_dtype_size(rnnd_dtype_t dt)
{
        return (unsigned)dt < RNND_DT_COUNT ? dtypes[dt].size : 0;
}

uint32_t rnnd_f32_bits(float f)
{
        uint32_t u;

        memcpy(&u, &f, sizeof(u));
        return u;
}

float rnnd_f32_from_bits(uint32_t u)
{
        float f;

        memcpy(&f, &u, sizeof(f));
        return f;
}

float rnnd_f16_to_f32(uint16_t h)
{
        uint32_t sign = (uint32_t)(h & 0x8000) << 16;
        uint32_t exp = (h >> 10) & 0x1f;
        uint32_t man = h & 0x3ff;

        if (exp == 0x1f) /* Inf or NaN */
                return rnnd_f32_from_bits(sign | 0x7f800000u | (man << 13));
        if (exp == 0) {
                /* Zero or subnormal: man * 2^-24, exact in float. */
                float v = (float)man * 5.9604644775390625e-8f;
                return sign ? -v : v;
        }
        return rnnd_f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t rnnd_f32_to_f16(float f)
{
        uint32_t u = rnnd_f32_bits(f);
        uint32_t sign = (u >> 16) & 0x8000;
        uint32_t absu = u & 0x7fffffff;

        if (absu >= 0x7f800000) /* Inf or NaN (keep NaN quiet) */
                return (uint16_t)(sign | 0x7c00 | (absu > 0x7f800000 ? 0x200 : 0));
        if (absu >= 0x477ff000) /* rounds to >= 65520: overflow to Inf */
                return (uint16_t)(sign | 0x7c00);
        if (absu < 0x38800000) {
                /* Subnormal half or zero: round absu as float to a multiple of 2^-24. */
                float v = rnnd_f32_from_bits(absu) * 16777216.0f; /* 2^24 */
                uint32_t m = (uint32_t)v;
                float rem = v - (float)m;

                if (rem > 0.5f || (rem == 0.5f && (m & 1)))
                        m++;
                return (uint16_t)(sign | m);
        }
        /* Normal: rebias the exponent and round the mantissa to 10 bits, ties to even. */
        uint32_t r = absu - 0x38000000;
        uint32_t lsb = (r >> 13) & 1;

        r += 0xfff + lsb;
        return (uint16_t)(sign | (r >> 13));
}

float rnnd_bf16_to_f32(uint16_t b)
{
        return rnnd_f32_from_bits((uint32_t)b << 16);
}

uint16_t rnnd_f32_to_bf16(float f)
{
        uint32_t u = rnnd_f32_bits(f);

        if ((u & 0x7fffffff) > 0x7f800000) /* NaN stays NaN */
                return (uint16_t)((u >> 16) | 0x40);
        u += 0x7fff + ((u >> 16) & 1);
        return (uint16_t)(u >> 16);
}

int rnnd_shape_numel(const uint64_t *shape, unsigned n, uint64_t max, uint64_t *ret)
{
        uint64_t p = 1;

        for (unsigned i = 0; i < n; i++) {
                if (shape[i] != 0 && p > max / shape[i])
                        return RNND_ELIMIT;
                p *= shape[i];
        }
        if (p > max)
                return RNND_ELIMIT;
        *ret = p;
        return 0;
}

const char *rnnd_shape_format(char *buf, size_t cap, const uint64_t *shape, unsigned ndim)
{
        size_t n = 0;

        n += (size_t)snprintf(buf + n, cap - n, "[");
        for (unsigned i = 0; i < ndim && n < cap; i++)
                n += (size_t)snprintf(buf + n, cap - n, "%s%" PRIu64, i ? ", " : "", shape[i]);
        if (n < cap)
                snprintf(buf + n, cap - n, "]");
        return buf;
}

/*
 * fmtfloat.c: shortest round-trip float32 printing (see fmtfloat.h).
 *
 * Schubfach, as in Giulietti's paper, for binary32.  x = c 2^q with an
 * integer c; its rounding interval is [cbl, cbr] 2^(q-2) in quarter units
 * (ends included when c is even, as round-to-nearest-even reads them back).
 * With k = floor(log10 of the interval's width), the interval scaled by
 * 10^-k holds one or two integers s, and perhaps a multiple of ten, which
 * has a shorter form.  vb, vbl and vbr are 4x, cbl and cbr times 2^q 10^-k,
 * computed as one 64x64-bit product with a 63-bit upper approximation g of
 * 10^-k, then rounded to odd: the paper proves that this keeps every
 * comparison below exact for binary32.  The seven subnormals too small
 * for that (c < 8) come from a table.
 */
#include <stdint.h>
#include <string.h>

#include "fmtfloat.h"

#define P      24     /* significand bits */
#define Q_MIN  (-149) /* the exponent of the least subnormal */
#define C_MIN  (UINT32_C(1) << (P - 1))
#define C_TINY 8 /* below this a subnormal's c is scaled by ten */
#define K_MIN  (-31)

/*
 * G[i] = floor(10^(i + K_MIN) 2^(62 - floor(log2 10^(i + K_MIN)))), in
 * [2^62, 2^63), for the powers 10^-31..10^45 that -k takes.  Generated with
 * exact integers: for k in range(-31, 46): r = (k * 913124641741) >> 38;
 * g = 10**k * 2**(62 - r) rounded down.
 */
static const uint64_t G[] = {
        UINT64_C(0x40e7599625a1fe7a), /* 10^-31 */
        UINT64_C(0x51212ffbaf0a7e18), /* 10^-30 */
        UINT64_C(0x65697bfa9acd1d9f), /* 10^-29 */
        UINT64_C(0x7ec3daf941806506), /* 10^-28 */
        UINT64_C(0x4f3a68dbc8f03f24), /* 10^-27 */
        UINT64_C(0x63090312bb2c4eed), /* 10^-26 */
        UINT64_C(0x7bcb43d769f762a8), /* 10^-25 */
        UINT64_C(0x4d5f0a66a23a9da9), /* 10^-24 */
        UINT64_C(0x60b6cd004ac94513), /* 10^-23 */
        UINT64_C(0x78e480405d7b9658), /* 10^-22 */
        UINT64_C(0x4b8ed0283a6d3df7), /* 10^-21 */
        UINT64_C(0x5e72843249088d75), /* 10^-20 */
        UINT64_C(0x760f253edb4ab0d2), /* 10^-19 */
        UINT64_C(0x49c97747490eae83), /* 10^-18 */
        UINT64_C(0x5c3bd5191b525a24), /* 10^-17 */
        UINT64_C(0x734aca5f6226f0ad), /* 10^-16 */
        UINT64_C(0x480ebe7b9d58566c), /* 10^-15 */
        UINT64_C(0x5a126e1a84ae6c07), /* 10^-14 */
        UINT64_C(0x709709a125da0709), /* 10^-13 */
        UINT64_C(0x465e6604b7a84465), /* 10^-12 */
        UINT64_C(0x57f5ff85e592557f), /* 10^-11 */
        UINT64_C(0x6df37f675ef6eadf), /* 10^-10 */
        UINT64_C(0x44b82fa09b5a52cb), /* 10^-9 */
        UINT64_C(0x55e63b88c230e77e), /* 10^-8 */
        UINT64_C(0x6b5fca6af2bd215e), /* 10^-7 */
        UINT64_C(0x431bde82d7b634da), /* 10^-6 */
        UINT64_C(0x53e2d6238da3c211), /* 10^-5 */
        UINT64_C(0x68db8bac710cb295), /* 10^-4 */
        UINT64_C(0x4189374bc6a7ef9d), /* 10^-3 */
        UINT64_C(0x51eb851eb851eb85), /* 10^-2 */
        UINT64_C(0x6666666666666666), /* 10^-1 */
        UINT64_C(0x4000000000000000), /* 10^0 */
        UINT64_C(0x5000000000000000), /* 10^1 */
        UINT64_C(0x6400000000000000), /* 10^2 */
        UINT64_C(0x7d00000000000000), /* 10^3 */
        UINT64_C(0x4e20000000000000), /* 10^4 */
        UINT64_C(0x61a8000000000000), /* 10^5 */
        UINT64_C(0x7a12000000000000), /* 10^6 */
        UINT64_C(0x4c4b400000000000), /* 10^7 */
        UINT64_C(0x5f5e100000000000), /* 10^8 */
        UINT64_C(0x7735940000000000), /* 10^9 */
        UINT64_C(0x4a817c8000000000), /* 10^10 */
        UINT64_C(0x5d21dba000000000), /* 10^11 */
        UINT64_C(0x746a528800000000), /* 10^12 */
        UINT64_C(0x48c2739500000000), /* 10^13 */
        UINT64_C(0x5af3107a40000000), /* 10^14 */
        UINT64_C(0x71afd498d0000000), /* 10^15 */
        UINT64_C(0x470de4df82000000), /* 10^16 */
        UINT64_C(0x58d15e1762800000), /* 10^17 */
        UINT64_C(0x6f05b59d3b200000), /* 10^18 */
        UINT64_C(0x4563918244f40000), /* 10^19 */
        UINT64_C(0x56bc75e2d6310000), /* 10^20 */
        UINT64_C(0x6c6b935b8bbd4000), /* 10^21 */
        UINT64_C(0x43c33c1937564800), /* 10^22 */
        UINT64_C(0x54b40b1f852bda00), /* 10^23 */
        UINT64_C(0x69e10de76676d080), /* 10^24 */
        UINT64_C(0x422ca8b0a00a4250), /* 10^25 */
        UINT64_C(0x52b7d2dcc80cd2e4), /* 10^26 */
        UINT64_C(0x6765c793fa10079d), /* 10^27 */
        UINT64_C(0x409f9cbc7c4a04c2), /* 10^28 */
        UINT64_C(0x50c783eb9b5c85f2), /* 10^29 */
        UINT64_C(0x64f964e68233a76f), /* 10^30 */
        UINT64_C(0x7e37be2022c0914b), /* 10^31 */
        UINT64_C(0x4ee2d6d415b85ace), /* 10^32 */
        UINT64_C(0x629b8c891b267182), /* 10^33 */
        UINT64_C(0x7b426fab61f00de3), /* 10^34 */
        UINT64_C(0x4d0985cb1d3608ae), /* 10^35 */
        UINT64_C(0x604be73de4838ad9), /* 10^36 */
        UINT64_C(0x785ee10d5da46d90), /* 10^37 */
        UINT64_C(0x4b3b4ca85a86c47a), /* 10^38 */
        UINT64_C(0x5e0a1fd271287598), /* 10^39 */
        UINT64_C(0x758ca7c70d7292fe), /* 10^40 */
        UINT64_C(0x4977e8dc68679bdf), /* 10^41 */
        UINT64_C(0x5bd5e313828182d6), /* 10^42 */
        UINT64_C(0x72cb5bd86321e38c), /* 10^43 */
        UINT64_C(0x47bf19673df52e37), /* 10^44 */
        UINT64_C(0x59aedfc10d7279c5), /* 10^45 */
};

/* floor(q log10 2), floor(log10(3/4 2^q)) and floor(k log2 10), exact over the ranges used. */
static int flog10pow2(int q)
{
        return (int)(((int64_t)q * INT64_C(661971961083)) >> 41);
}

static int flog10three_quarters_pow2(int q)
{
        return (int)(((int64_t)q * INT64_C(661971961083) - INT64_C(274743187321)) >> 41);
}

static int flog2pow10(int k)
{
        return (int)(((int64_t)k * INT64_C(913124641741)) >> 38);
}

/* The high 64 bits of g cp, shifted right 31 more and rounded to odd. */
static uint32_t rop(uint64_t g, uint64_t cp)
{
        uint64_t x1 = (uint64_t)(((unsigned __int128)g * cp) >> 64);

        return (uint32_t)((x1 >> 31) | (((x1 & 0xffffffffu) + 0xffffffffu) >> 32));
}

/* The decimal f 10^e closest to c 2^q among the shortest in its interval. */
static void to_decimal(int q, uint32_t c, int dk, uint32_t *f, int *e)
{
        uint32_t out = c & 1;
        uint64_t cb = (uint64_t)c << 2, cbr = cb + 2, cbl;
        int k, h;
        uint64_t g;
        uint32_t vb, vbl, vbr, s, t;

        if (c != C_MIN || q == Q_MIN) {
                cbl = cb - 2;
                k = flog10pow2(q);
        } else {
                cbl = cb - 1; /* the gap below a power of two is half the one above */
                k = flog10three_quarters_pow2(q);
        }
        h = q + flog2pow10(-k) + 33;
        g = G[-k - K_MIN] + 1;
        vb = rop(g, cb << h);
        vbl = rop(g, cbl << h);
        vbr = rop(g, cbr << h);
        s = vb >> 2;
        if (s >= 10) {
                /* A multiple of ten in the interval has one digit less (the
                 * paper tests s >= 100, as Java wants two digits at least). */
                uint32_t sp10 = 10 * (uint32_t)(((uint64_t)s * 1717986919u) >> 34);
                uint32_t tp10 = sp10 + 10;
                int upin = vbl + out <= sp10 << 2;
                int wpin = (tp10 << 2) + out <= vbr;

                if (upin != wpin) {
                        *f = upin ? sp10 : tp10;
                        *e = k;
                        return;
                }
        }
        t = s + 1;
        {
                int uin = vbl + out <= s << 2;
                int win = (t << 2) + out <= vbr;
                int64_t cmp;

                *e = k + dk;
                if (uin != win) {
                        *f = uin ? s : t;
                        return;
                }
                /* Both or neither: the closer one, the even one at a tie. */
                cmp = (int64_t)vb - (int64_t)((uint64_t)(s + t) << 1);
                *f = cmp < 0 || (cmp == 0 && (s & 1) == 0) ? s : t;
        }
}

static const char DIGITS2[] =
        "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
        "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
        "8081828384858687888990919293949596979899";

/* Writes the n decimal digits of f (n its exact length) to p. */
static void put_digits(char *p, uint32_t f, int n)
{
        while (n >= 2) {
                n -= 2;
                memcpy(p + n, DIGITS2 + 2 * (f % 100), 2);
                f /= 100;
        }
        if (n == 1)
                p[0] = (char)('0' + f);
}

static int count_digits(uint32_t f)
{
        int n = 1;

        while (f >= 10) {
                f /= 10;
                n++;
        }
        return n;
}

size_t rnnd_fmtfloat(float x, char buf[RNND_FMTFLOAT_LEN])
{
        uint32_t bits, t, bq, f;
        int e, n, X;
        char digits[12], *p = buf;

        memcpy(&bits, &x, sizeof(bits));
        t = bits & (C_MIN - 1);
        bq = (bits >> (P - 1)) & 0xff;
        if (bq == 0xff) {
                memcpy(buf, "null", 5);
                return 4;
        }
        if (bits >> 31)
                *p++ = '-';
        if (bq != 0) {
                int mq = -Q_MIN + 1 - (int)bq; /* -q */
                uint32_t c = C_MIN | t;

                if (mq > 0 && mq < P && ((c >> mq) << mq) == c) {
                        f = c >> mq; /* an integer below 2^24: exact as it is */
                        e = 0;
                } else {
                        to_decimal(-mq, c, 0, &f, &e);
                }
        } else if (t >= C_TINY) {
                to_decimal(Q_MIN, t, 0, &f, &e);
        } else if (t != 0) {
                /*
                 * t 2^-149, t < 8: the paper scales c by ten, which gives two
                 * digits; one is enough for each of these seven, and these are
                 * the closest one-digit decimals (checked in test_fmtfloat).
                 */
                static const uint8_t tiny[C_TINY] = {0, 1, 3, 4, 6, 7, 8, 10};

                f = tiny[t];
                e = -45;
        } else {
                memcpy(p, "0.0", 4);
                p += bits >> 31 ? 3 : 1;
                *p = '\0';
                return (size_t)(p - buf);
        }
        while (f % 10 == 0) {
                f /= 10;
                e++;
        }
        n = count_digits(f);
        put_digits(digits, f, n);
        X = e + n - 1; /* x = d.ddd 10^X */
        if (X >= -5 && X < 9) {
                if (X < 0) {
                        memcpy(p, "0.000000", (size_t)(1 - X));
                        p += 1 - X;
                        memcpy(p, digits, (size_t)n);
                        p += n;
                } else if (X + 1 >= n) {
                        memcpy(p, digits, (size_t)n);
                        p += n;
                        memset(p, '0', (size_t)(X + 1 - n));
                        p += X + 1 - n;
                } else {
                        memcpy(p, digits, (size_t)X + 1);
                        p += X + 1;
                        *p++ = '.';
                        memcpy(p, digits + X + 1, (size_t)(n - X - 1));
                        p += n - X - 1;
                }
        } else {
                *p++ = digits[0];
                if (n > 1) {
                        *p++ = '.';
                        memcpy(p, digits + 1, (size_t)n - 1);
                        p += n - 1;
                }
                *p++ = 'e';
                *p++ = X < 0 ? '-' : '+';
                if (X < 0)
                        X = -X;
                memcpy(p, DIGITS2 + 2 * X, 2);
                p += 2;
        }
        *p = '\0';
        return (size_t)(p - buf);
}

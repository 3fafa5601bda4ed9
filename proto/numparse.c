/*
 * numparse.c: JSON numbers into doubles (see numparse.h).
 *
 * One pass reads the grammar and, on the way, the first 19 significant
 * digits into a uint64_t and the decimal exponent.  Clinger's fast path: a
 * mantissa below 2^53 and a power of ten up to 10^22 are both exact doubles,
 * so one IEEE multiplication or division is the correctly rounded result.
 * Anything else is rewritten as "DDD...De-XXX" with its significant digits
 * (at most MAX_DIGITS, then a 1 if any later digit is non-zero: a halfway
 * point between two doubles has at most 767 significant digits, so the
 * rounding cannot change) and handed to strtod().
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "numparse.h"

#define MAX_DIGITS 800
#define EXP_CAP    100000 /* |exponent| beyond this is 0 or infinity either way */

const double rnnd__pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

/*
 * The slow path: the text's digits from p (a number's first digit) to end,
 * times 10^e (the exponent as written, saturated), through strtod().
 */
static double slow(const char *p, const char *end, bool neg, long e)
{
        char buf[MAX_DIGITS + 32];
        size_t k = 0;
        long fraction = 0, dropped = 0;
        bool point = false, sticky = false;

        if (neg)
                buf[k++] = '-';
        for (; p < end; p++) {
                if (*p == '.') {
                        point = true;
                        continue;
                }
                if (!is_digit(*p))
                        break;
                fraction += point;
                if (k == (size_t)neg && *p == '0')
                        continue; /* leading zeros */
                if (k - neg < MAX_DIGITS) {
                        buf[k++] = *p;
                } else {
                        dropped++;
                        sticky |= *p != '0';
                }
        }
        if (k == (size_t)neg)
                return neg ? -0.0 : 0.0;
        e += dropped - fraction;
        if (sticky) {
                buf[k++] = '1';
                e--;
        }
        snprintf(buf + k, sizeof(buf) - k, "e%ld", e);
        return strtod(buf, NULL);
}

int rnnd_numparse(const char *p, size_t n, struct rnnd_number *ret)
{
        const char *s = p, *end = p + n, *digits;
        bool neg = false, frac_or_exp = false;
        uint64_t m = 0;
        int nd = 0;       /* significant digits read into m */
        long dropped = 0; /* integer-part digits not in m */
        long scale = 0;   /* fraction digits in m */
        long e = 0, ewritten;
        bool exact = true; /* m holds every significant digit */

        if (s < end && *s == '-') {
                neg = true;
                s++;
        }
        if (s == end || !is_digit(*s))
                return RNND_EINVAL;
        digits = s;
        if (*s == '0') {
                s++;
                if (s < end && is_digit(*s))
                        return RNND_EINVAL;
        } else {
                for (; s < end && is_digit(*s); s++) {
                        if (nd < 19) {
                                m = m * 10 + (uint64_t)(*s - '0');
                                nd++;
                        } else {
                                dropped++;
                                if (*s != '0')
                                        exact = false;
                        }
                }
        }
        if (s < end && *s == '.') {
                s++;
                frac_or_exp = true;
                if (s == end || !is_digit(*s))
                        return RNND_EINVAL;
                for (; s < end && is_digit(*s); s++) {
                        if (nd < 19) {
                                if (nd > 0 || *s != '0') {
                                        m = m * 10 + (uint64_t)(*s - '0');
                                        nd++;
                                }
                                scale++;
                        } else if (*s != '0') {
                                exact = false;
                        }
                }
        }
        if (s < end && (*s == 'e' || *s == 'E')) {
                bool eneg = false;

                s++;
                frac_or_exp = true;
                if (s < end && (*s == '+' || *s == '-'))
                        eneg = *s++ == '-';
                if (s == end || !is_digit(*s))
                        return RNND_EINVAL;
                for (; s < end && is_digit(*s); s++)
                        if (e < EXP_CAP)
                                e = e * 10 + (*s - '0');
                if (eneg)
                        e = -e;
        }
        ewritten = e;
        ret->len = (size_t)(s - p);
        ret->is_int = false;
        ret->big_int = false;
        e += dropped - scale; /* the value is m 10^e when exact */
        if (m == 0 && exact) {
                ret->d = neg ? -0.0 : 0.0;
        } else if (exact && m <= (UINT64_C(1) << 53) && e >= -22 && e <= 22) {
                double d = (double)m;

                d = e < 0 ? d / rnnd__pow10[-e] : d * rnnd__pow10[e];
                ret->d = neg ? -d : d;
        } else {
                ret->d = slow(digits, s, neg, ewritten);
        }
        if (!frac_or_exp && dropped == 0 && nd <= 18) {
                ret->is_int = true;
                ret->i = neg ? -(int64_t)m : (int64_t)m;
        } else if (!frac_or_exp && dropped == 0 && nd == 19) {
                /* 19 digits: int64's range is -9223372036854775808..9223372036854775807 */
                if (m <= (uint64_t)INT64_MAX || (neg && m == (uint64_t)INT64_MAX + 1)) {
                        ret->is_int = true;
                        ret->i = neg ? (int64_t)(0 - m) : (int64_t)m;
                }
        }
        ret->big_int = !frac_or_exp && !ret->is_int;
        return 0;
}

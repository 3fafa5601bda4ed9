/* decimal.c: the one parser of plain decimal numbers (decimal.h). */
#include "decimal.h"
#include "error.h"

int rnnd_decimal_parse(const char *s, uint64_t *ret)
{
        uint64_t v = 0;

        if (*s == '\0')
                return RNND_EINVAL;
        for (; *s != '\0'; s++) {
                unsigned d;

                if (*s < '0' || *s > '9')
                        return RNND_EINVAL;
                d = (unsigned)(*s - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return RNND_ELIMIT;
                v = v * 10 + d;
        }
        *ret = v;
        return 0;
}

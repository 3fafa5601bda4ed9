/*
 * numbers_bench.c: rnnd-numbers-bench, the JSON number printer checked on
 * every float32 and timed against snprintf (not a test: it takes minutes).
 *
 *   rnnd-numbers-bench [--all] [--from HEX --to HEX]
 *
 * Without --all it only times: ns per float of rnnd_fmtfloat() and of
 * snprintf("%.9g"), the renderer's old way, and ns per number of
 * rnnd_numparse() and strtod() on the same "%.9g" texts.  With --all it also checks that
 * strtof(rnnd_fmtfloat(x)) == x for every finite bit pattern in
 * [from, to) (all 2^32 by default), prints the failures (at most 20) and
 * exits 1 if there were any.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fmtfloat.h"
#include "numparse.h"

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The same n pseudo-random finite floats for both printers. */
static float *sample(size_t n)
{
        float *x = malloc(n * sizeof(*x));
        uint64_t st = 0x2545f4914f6cdd1du;

        for (size_t i = 0; x != NULL && i < n;) {
                uint32_t u;

                st ^= st << 13;
                st ^= st >> 7;
                st ^= st << 17;
                u = (uint32_t)(st >> 11);
                memcpy(&x[i], &u, sizeof(u));
                if (isfinite(x[i]))
                        i++;
        }
        return x;
}

static void time_printers(void)
{
        size_t n = 4000000, total = 0;
        float *x = sample(n);
        char buf[32];
        double t0, t1, t2;

        if (x == NULL)
                exit(2);
        t0 = now_s();
        for (size_t i = 0; i < n; i++)
                total += rnnd_fmtfloat(x[i], buf);
        t1 = now_s();
        for (size_t i = 0; i < n; i++)
                total += (size_t)snprintf(buf, sizeof(buf), "%.9g", (double)x[i]);
        t2 = now_s();
        printf("rnnd_fmtfloat: %.1f ns/float; snprintf %%.9g: %.1f ns/float (%zu bytes)\n",
               (t1 - t0) * 1e9 / (double)n, (t2 - t1) * 1e9 / (double)n, total);
        free(x);
}

static void time_parsers(void)
{
        size_t n = 1000000;
        float *x = sample(n);
        char *text = malloc(n * 16);
        double sum = 0, t0, t1, t2;
        struct rnnd_number v;

        if (x == NULL || text == NULL)
                exit(2);
        /* Values as model inputs are: within +-4, nine significant digits. */
        for (size_t i = 0; i < n; i++)
                snprintf(text + i * 16, 16, "%.9g",
                         (double)ldexpf(x[i], -ilogbf(x[i]) + (int)(i % 4) - 2));
        t0 = now_s();
        for (size_t i = 0; i < n; i++)
                if (rnnd_numparse(text + i * 16, strlen(text + i * 16), &v) == 0)
                        sum += (float)v.d;
        t1 = now_s();
        for (size_t i = 0; i < n; i++)
                sum -= (float)strtod(text + i * 16, NULL);
        t2 = now_s();
        printf("rnnd_numparse: %.1f ns/number; strtod: %.1f ns/number (%%.9g texts within +-4; "
               "%g)\n",
               (t1 - t0) * 1e9 / (double)n, (t2 - t1) * 1e9 / (double)n, sum);
        free(text);
        free(x);
}

int main(int argc, char **argv)
{
        uint64_t from = 0, to = UINT64_C(1) << 32, bad = 0, finite = 0;
        int all = 0;
        double t0;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--all") == 0)
                        all = 1;
                else if (strcmp(argv[i], "--from") == 0 && i + 1 < argc)
                        from = strtoull(argv[++i], NULL, 16);
                else if (strcmp(argv[i], "--to") == 0 && i + 1 < argc)
                        to = strtoull(argv[++i], NULL, 16);
                else {
                        fprintf(stderr, "usage: %s [--all] [--from HEX --to HEX]\n", argv[0]);
                        return 2;
                }
        }
        time_printers();
        time_parsers();
        if (!all)
                return 0;
        t0 = now_s();
        for (uint64_t i = from; i < to; i++) {
                uint32_t u = (uint32_t)i, v;
                char buf[RNND_FMTFLOAT_LEN];
                float x, y;

                memcpy(&x, &u, sizeof(x));
                if (!isfinite(x))
                        continue;
                finite++;
                rnnd_fmtfloat(x, buf);
                y = strtof(buf, NULL);
                memcpy(&v, &y, sizeof(v));
                if (v != u && bad++ < 20)
                        printf("%08x -> %s reads back as %08x\n", u, buf, v);
        }
        printf("%llu finite floats in [%llx, %llx): %llu do not read back (%.0f s)\n",
               (unsigned long long)finite, (unsigned long long)from, (unsigned long long)to,
               (unsigned long long)bad, now_s() - t0);
        return bad != 0;
}

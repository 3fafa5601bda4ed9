/*
 * load_bench.c: rnnd-load-bench, how long loading a model version takes
 * (config.json already read): rnnd_model_load() N times, the median and the
 * fastest.  Weights are read with pread into the model's buffer
 * (engine/stfile.c); docs/BENCHMARKS.md has the figures.
 *
 *   rnnd-load-bench DIR [N]      (version 1, N = 100)
 *
 * Errors print the rnnd error message to stderr and exit 1.  Not a test.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model.h"
#include "repository.h"

static double now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
        struct rnnd_model_config cfg;
        rnnd_error_t e = {0};
        const char *dir, *name;
        double *t;
        int n;

        if (argc < 2 || argc > 3) {
                fputs("usage: rnnd-load-bench DIR [N]\n", stderr);
                return 1;
        }
        dir = argv[1];
        n = argc == 3 ? atoi(argv[2]) : 100;
        name = strrchr(dir, '/') != NULL ? strrchr(dir, '/') + 1 : dir;
        t = calloc(n > 0 ? (size_t)n : 1, sizeof(*t));
        if (n < 1 || t == NULL || rnnd_repository_read_config(dir, &cfg, &e) < 0) {
                fprintf(stderr, "rnnd-load-bench: %s\n", e.msg[0] ? e.msg : "bad N");
                return 1;
        }
        for (int i = 0; i < n; i++) {
                rnnd_model_t *m = NULL;
                double t0 = now();

                if (rnnd_model_load(dir, name, 1, &cfg, &m, &e) < 0) {
                        fprintf(stderr, "rnnd-load-bench: %s\n", e.msg);
                        return 1;
                }
                t[i] = now() - t0;
                rnnd_model_unref(m);
        }
        qsort(t, (size_t)n, sizeof(*t), cmp);
        printf("%s: median %.3f ms, fastest %.3f ms, %d loads\n", name, t[n / 2] * 1e3, t[0] * 1e3,
               n);
        free(t);
        return 0;
}

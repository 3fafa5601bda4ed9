/*
 * fma_peak.c: rnnd-fma-peak, this machine's fp32 multiply-add peak (DESIGN.md
 * §9), the yardstick of tests/bench/engine_vs_ort.py's "share of peak".
 *
 *   rnnd-fma-peak [--threads N] [--seconds S] [--json]
 *
 * Each of N threads runs a loop of independent vector multiply-adds on
 * registers only (24 accumulators: more than the FMA units' latency times
 * their count on any x86-64 part), on the widest vectors the CPU has among
 * AVX-512 (16 floats), AVX2 with FMA (8) and SSE2 (4, multiply then add).
 * It runs for S seconds (0.5 by default) after a warm-up of a tenth of that,
 * takes the best of 5 such windows, and prints GFLOP/s (2 per multiply-add
 * per lane) summed over the threads, the vector unit used and the threads, as
 * text or as one JSON line.  Exits 1 on a bad argument.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fma_kernel.h"

#define WINDOWS 5

struct worker {
        pthread_t thread;
        double seconds;
        double flops; /* out */
        float sink;   /* out: keeps the sums alive */
};

static double now(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *worker_main(void *arg)
{
        struct worker *w = arg;
        const char *name;
        float (*fn)(float);
        const double per_call = (double)ITERS * ACCS * 2 * fma_width(&name, &fn);
        double best = 0, t0 = now();

        while (now() - t0 < w->seconds / 10) /* warm-up: clocks and licences settle */
                w->sink = fn(w->sink) * 1e-9f;
        for (int win = 0; win < WINDOWS; win++) {
                double calls = 0, t;

                t0 = now();
                do {
                        w->sink = fn(w->sink) * 1e-9f;
                        calls++;
                        t = now() - t0;
                } while (t < w->seconds);
                if (calls * per_call / t > best)
                        best = calls * per_call / t;
        }
        w->flops = best;
        return NULL;
}

int main(int argc, char **argv)
{
        unsigned threads = 1;
        double seconds = 0.5, total = 0;
        bool json = false;
        struct worker *ws;
        const char *name;
        float (*fn)(float);
        int lanes = fma_width(&name, &fn);
        float sink = 0;

        for (int i = 1; i < argc; i++) {
                char *end = NULL;

                if (strcmp(argv[i], "--json") == 0) {
                        json = true;
                } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
                        unsigned long v = strtoul(argv[++i], &end, 10);

                        if (*end != '\0' || v < 1 || v > 1024)
                                goto usage;
                        threads = (unsigned)v;
                } else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
                        seconds = strtod(argv[++i], &end);
                        if (*end != '\0' || !(seconds > 0 && seconds <= 60))
                                goto usage;
                } else {
                        goto usage;
                }
        }
        ws = calloc(threads, sizeof(*ws));
        if (ws == NULL)
                return 1;
        for (unsigned i = 0; i < threads; i++) {
                ws[i].seconds = seconds;
                ws[i].sink = (float)i * 1e-3f;
                if (pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]) != 0) {
                        fprintf(stderr, "rnnd-fma-peak: cannot start thread %u\n", i);
                        return 1;
                }
        }
        for (unsigned i = 0; i < threads; i++) {
                pthread_join(ws[i].thread, NULL);
                total += ws[i].flops;
                sink += ws[i].sink;
        }
        free(ws);
        if (sink != sink) /* never: the sums are finite; keeps them computed */
                fputs("rnnd-fma-peak: NaN\n", stderr);
        if (json)
                printf("{\"gflops\": %.2f, \"threads\": %u, \"unit\": \"%s\", \"lanes\": %d}\n",
                       total * 1e-9, threads, name, lanes);
        else
                printf("%.2f GFLOP/s fp32 on %u thread%s (%s, %d lanes)\n", total * 1e-9, threads,
                       threads > 1 ? "s" : "", name, lanes);
        return 0;
usage:
        fputs("usage: rnnd-fma-peak [--threads N] [--seconds S] [--json]\n", stderr);
        return 1;
}

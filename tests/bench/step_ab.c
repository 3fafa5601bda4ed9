/*
 * step_ab.c: the fused step kernel (engine/cpu/step.c) of two builds in one
 * process, on one shape, alternated round by round with an FMA loop.
 *
 * tests/bench/step_ab.py compiles step.c twice, from two revisions, with
 * its public symbols renamed (rnnd__cpu_step -> a_step and b_step, and so on)
 * and links them with this file.  On a shared host the speed of a step moves
 * by tens of per cent with the neighbours' load, while two builds run in turn
 * inside one process, each timed on its CPU time, see the same host: a
 * difference of 2-3% reads the same way in run after run, where two
 * processes of rnnd-engine-bench cannot show it (docs/BENCHMARKS.md).
 *
 * Usage: rnnd-step-ab KIND H KX M T ROUNDS LU YS
 *   KIND lstm, gru, tanh or relu; H hidden units; KX x's width; M rows;
 *   T steps a run; ROUNDS rounds of 3 runs of each build; LU 16 (AVX-512)
 *   or 8 (AVX2 and FMA panels); YS 1: each row's y in its own buffer (as a
 *   batch's top layer writes each sequence's), 0: one [T, M, H] buffer.
 * Prints one JSON object: the shape, the best GFLOP/s of each build and of
 * the FMA loop, and every run's GFLOP/s.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu-int.h"
#include "fma_kernel.h"

typedef void step_fn(const struct rnnd__cpu_step *, uint32_t, uint32_t);
typedef void pack_fn(enum rnnd__cpu_kind, uint32_t, uint32_t, uint32_t, const float *, uint32_t,
                     const float *, const float *, const float *, float *);
typedef size_t size_fn(enum rnnd__cpu_kind, uint32_t, uint32_t, uint32_t, uint32_t);

step_fn a_step, b_step;
pack_fn a_pack, b_pack;
size_fn a_size, b_size;

static const struct build {
        const char *name;
        step_fn *step;
        pack_fn *pack;
        size_fn *size;
} builds[2] = {{"a", a_step, a_pack, a_size}, {"b", b_step, b_pack, b_size}};

#define RUNS_MAX 4096

/* The shape and the buffers of one run. */
struct shape {
        enum rnnd__cpu_kind kind;
        uint32_t H, KX, M, T, lu;
        int ys;
        float *P[2], *X, *h[2], *c, *z, *Y, **yrows;
};

static double cpu_now(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* n floats on a cache line, filled with small values that differ. */
static float *floats(size_t n)
{
        float *p = aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64);

        if (p == NULL) {
                fprintf(stderr, "step_ab: out of memory for %zu floats\n", n);
                exit(1);
        }
        for (size_t i = 0; i < n; i++)
                p[i] = (float)((i * 7919) % 1000) * 1e-4f - 0.05f;
        return p;
}

/* The best GFLOP/s of 50 calls of fma_kernel.h's loop (rnnd-fma-peak's, on CPU time). */
static double fma_peak(void)
{
        const char *name;
        float (*fn)(float);
        const double flops = (double)ITERS * ACCS * 2 * fma_width(&name, &fn);
        double best = 0;

        for (int r = 0; r < 50; r++) {
                double t = cpu_now(), g;
                volatile float x = fn(1e-3f);

                (void)x;
                g = flops / (cpu_now() - t) / 1e9;
                best = g > best ? g : best;
        }
        return best;
}

static uint32_t gates_of(enum rnnd__cpu_kind kind)
{
        return kind == RNND_CPU_LSTM ? 4 : kind == RNND_CPU_GRU ? 3 : 1;
}

static void setup(struct shape *s)
{
        const size_t G = gates_of(s->kind), H = s->H, KX = s->KX, M = s->M;
        float *w_ih = floats(G * H * KX), *w_hh = floats(G * H * H);
        float *b_ih = floats(G * H), *b_hh = floats(G * H);

        for (int b = 0; b < 2; b++) {
                s->P[b] = floats(builds[b].size(s->kind, s->lu, s->H, s->KX, s->H));
                builds[b].pack(s->kind, s->lu, s->H, s->KX, w_ih, s->H, w_hh, b_ih, b_hh, s->P[b]);
        }
        s->X = floats((size_t)s->T * M * KX);
        s->h[0] = floats(M * H);
        s->h[1] = floats(M * H);
        s->c = floats(M * H);
        s->z = floats(M * H);
        s->Y = floats((size_t)s->T * M * H);
        s->yrows = malloc(M * sizeof(*s->yrows));
        if (s->yrows == NULL)
                exit(1);
        for (size_t r = 0; r < M; r++)
                s->yrows[r] = s->ys ? floats((size_t)s->T * H) : NULL;
        free(w_ih);
        free(w_hh);
        free(b_ih);
        free(b_hh);
}

/* T steps of build b; its GFLOP/s on the process's CPU time. */
static double run(const struct shape *s, int b)
{
        const double flops = 2.0 * s->M * gates_of(s->kind) * s->H * (s->KX + s->H) * s->T;
        double t = cpu_now();

        for (uint32_t k = 0; k < s->T; k++) {
                float *hc = s->h[k & 1], *hn = s->h[(k + 1) & 1];
                struct rnnd__cpu_step st = {
                        .kind = s->kind,
                        .lu = s->lu,
                        .M = s->M,
                        .H = s->H,
                        .KX = s->KX,
                        .K = s->H,
                        .P = s->P[b],
                        .X = s->X + (size_t)k * s->M * s->KX,
                        .ldxin = s->KX,
                        .A = hc,
                        .lda = s->H,
                        .hold = hc,
                        .ldo = s->H,
                        .c = s->c,
                        .z = s->z,
                        .h = hn,
                        .ldh = s->H,
                        .y = s->ys ? NULL : s->Y + (size_t)k * s->M * s->H,
                        .ldy = s->H,
                        .ys = s->ys ? s->yrows : NULL,
                        .yoff = (size_t)k * s->H,
                };

                builds[b].step(&st, 0, s->H);
        }
        return flops / (cpu_now() - t) / 1e9;
}

static int parse_kind(const char *name, enum rnnd__cpu_kind *kind)
{
        static const struct {
                const char *name;
                enum rnnd__cpu_kind kind;
        } kinds[] = {{"lstm", RNND_CPU_LSTM},
                     {"gru", RNND_CPU_GRU},
                     {"tanh", RNND_CPU_TANH},
                     {"relu", RNND_CPU_RELU}};

        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
                if (strcmp(name, kinds[i].name) == 0) {
                        *kind = kinds[i].kind;
                        return 0;
                }
        return -1;
}

static void print_runs(const char *name, const double *g, size_t n)
{
        printf(", \"%s_runs\": [", name);
        for (size_t i = 0; i < n; i++)
                printf("%s%.2f", i ? ", " : "", g[i]);
        printf("]");
}

int main(int argc, char **argv)
{
        struct shape s = {0};
        unsigned rounds;
        double best[3] = {0}, *g[2];
        size_t n = 0;

        if (argc != 9 || parse_kind(argv[1], &s.kind) < 0) {
                fprintf(stderr, "usage: %s lstm|gru|tanh|relu H KX M T ROUNDS LU YS\n", argv[0]);
                return 2;
        }
        s.H = (uint32_t)atoi(argv[2]);
        s.KX = (uint32_t)atoi(argv[3]);
        s.M = (uint32_t)atoi(argv[4]);
        s.T = (uint32_t)atoi(argv[5]);
        rounds = (unsigned)atoi(argv[6]);
        s.lu = (uint32_t)atoi(argv[7]);
        s.ys = atoi(argv[8]) != 0;
        if (s.H == 0 || s.H > 8192 || s.KX == 0 || s.KX > 8192 || s.M == 0 || s.M > 1024 ||
            s.T == 0 || s.T > 1000 || rounds == 0 || rounds * 3 > RUNS_MAX ||
            (s.lu != 16 && s.lu != 8)) {
                fprintf(stderr, "step_ab: a size out of range (H, KX <= 8192, M <= 1024, "
                                "T <= 1000, LU 16 or 8)\n");
                return 2;
        }
        setup(&s);
        g[0] = calloc(RUNS_MAX, sizeof(double));
        g[1] = calloc(RUNS_MAX, sizeof(double));
        if (g[0] == NULL || g[1] == NULL)
                return 1;
        for (unsigned r = 0; r < rounds; r++) {
                double p = fma_peak();

                best[2] = p > best[2] ? p : best[2];
                for (int rep = 0; rep < 3; rep++, n++)
                        for (int i = 0; i < 2; i++) { /* a first, then b first */
                                const int b = (rep & 1) ? 1 - i : i;

                                g[b][n] = run(&s, b);
                                best[b] = g[b][n] > best[b] ? g[b][n] : best[b];
                        }
        }
        printf("{\"kind\": \"%s\", \"H\": %u, \"KX\": %u, \"M\": %u, \"T\": %u, \"lu\": %u, "
               "\"ys\": %d, \"peak\": %.2f, \"a\": %.2f, \"b\": %.2f",
               argv[1], s.H, s.KX, s.M, s.T, s.lu, s.ys, best[2], best[0], best[1]);
        print_runs("a", g[0], n);
        print_runs("b", g[1], n);
        printf("}\n");
        return 0;
}

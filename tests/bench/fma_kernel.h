/*
 * fma_kernel.h: the multiply-add loop of this machine's FMA peak, shared by
 * rnnd-fma-peak (fma_peak.c) and rnnd-step-ab (step_ab.c): ACCS independent
 * vector multiply-adds on registers only, ITERS rounds a call, on the widest
 * vectors the CPU has (fma_width()).
 */
#ifndef RNND_BENCH_FMA_KERNEL_H
#define RNND_BENCH_FMA_KERNEL_H

#define ACCS  24
#define ITERS 4096 /* multiply-adds per accumulator per call */

/*
 * KERNEL(name, width, attribute): ITERS rounds of ACCS independent
 * multiply-adds on vectors of width floats; returns their lanes' sum.
 */
#define KERNEL(NAME, W, ATTR)                                                                      \
        typedef float NAME##_v __attribute__((vector_size(W * 4)));                                \
        static ATTR __attribute__((noinline)) float NAME(float seed)                               \
        {                                                                                          \
                NAME##_v acc[ACCS], m = (NAME##_v){0} + 0.999999f, a = (NAME##_v){0} + 1e-7f;      \
                float s = 0;                                                                       \
                                                                                                   \
                for (int i = 0; i < ACCS; i++)                                                     \
                        acc[i] = (NAME##_v){0} + seed * (float)i;                                  \
                for (int k = 0; k < ITERS; k++) {                                                  \
                        _Pragma("GCC unroll 24") for (int i = 0; i < ACCS; i++) acc[i] =           \
                                acc[i] * m + a;                                                    \
                        __asm__("" : "+v"(m));                                                     \
                }                                                                                  \
                for (int i = 0; i < ACCS; i++)                                                     \
                        for (int j = 0; j < W; j++)                                                \
                                s += acc[i][j];                                                    \
                return s;                                                                          \
        }

#if defined(__x86_64__) && defined(__GNUC__)
KERNEL(fma16, 16, __attribute__((target("arch=x86-64-v4"))))
KERNEL(fma8, 8, __attribute__((target("arch=x86-64-v3"))))
#endif
KERNEL(madd4, 4, )

/* The widest vector unit here: lanes per multiply-add, its name and its kernel. */
static inline int fma_width(const char **name, float (**fn)(float))
{
#if defined(__x86_64__) && defined(__GNUC__)
        if (__builtin_cpu_supports("avx512f")) {
                *name = "AVX-512";
                *fn = fma16;
                return 16;
        }
        if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
                *name = "AVX2+FMA";
                *fn = fma8;
                return 8;
        }
#endif
        *name = "SSE2 (multiply, add)";
        *fn = madd4;
        return 4;
}

#endif

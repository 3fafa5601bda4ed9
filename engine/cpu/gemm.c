/*
 * gemm.c: the CPU engine's per-step recurrent product over pre-packed
 * weights (cpu-int.h).  A register-blocked kernel: 6 (or 4) rows x 16
 * columns of accumulators, one broadcast of A and two vector loads of the
 * packed panel per k, so each weight panel (K x 16 floats, 16 KiB for K = 256) stays in
 * L1 while every row block streams over it.  Built with the gate kernels
 * (-O3, one clone per x86-64 feature level).
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu-int.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define KERNEL __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KERNEL
#endif

/*
 * Eight floats; may be unaligned in memory.  The helpers below are always
 * inlined so that each clone of rnnd__cpu_gemm_packed() compiles them for its
 * own feature level (a call would run them at the baseline, where 32-byte
 * vectors are emulated piecewise: 20x slower).
 */
typedef float v8 __attribute__((vector_size(32), aligned(4)));

#define MR 4u

size_t rnnd__cpu_packed_size(uint32_t N, uint32_t K)
{
        size_t panels = ((size_t)N + RNND_CPU_NR - 1) / RNND_CPU_NR;

        return panels * K * RNND_CPU_NR;
}

void rnnd__cpu_pack(uint32_t N, uint32_t K, const float *W, uint32_t ldw, float *P)
{
        for (size_t n0 = 0; n0 < N; n0 += RNND_CPU_NR) {
                float *panel = P + (n0 / RNND_CPU_NR) * K * RNND_CPU_NR;

                for (size_t k = 0; k < K; k++)
                        for (size_t c = 0; c < RNND_CPU_NR; c++)
                                panel[k * RNND_CPU_NR + c] =
                                        n0 + c < N ? W[(n0 + c) * ldw + k] : 0.0f;
        }
}

/* Writes the 16 columns of acc to row c, or only ncols of them. */
static inline __attribute__((always_inline)) void store_row(float *c, v8 lo, v8 hi, size_t ncols)
{
        float tmp[RNND_CPU_NR];

        if (ncols == RNND_CPU_NR) {
                *(v8 *)c = lo;
                *(v8 *)(c + 8) = hi;
                return;
        }
        *(v8 *)tmp = lo;
        *(v8 *)(tmp + 8) = hi;
        memcpy(c, tmp, ncols * sizeof(float));
}

/* Four rows of A against one panel. */
static inline __attribute__((always_inline)) void
block_4(size_t K, const float *a, size_t lda, const float *p, float *c, size_t ldc, size_t ncols)
{
        v8 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
        const float *a0 = a, *a1 = a + lda, *a2 = a + 2 * lda, *a3 = a + 3 * lda;

        for (size_t k = 0; k < K; k++) {
                v8 w0 = *(const v8 *)(p + k * RNND_CPU_NR);
                v8 w1 = *(const v8 *)(p + k * RNND_CPU_NR + 8);

                c00 += w0 * a0[k];
                c01 += w1 * a0[k];
                c10 += w0 * a1[k];
                c11 += w1 * a1[k];
                c20 += w0 * a2[k];
                c21 += w1 * a2[k];
                c30 += w0 * a3[k];
                c31 += w1 * a3[k];
        }
        store_row(c, c00, c01, ncols);
        store_row(c + ldc, c10, c11, ncols);
        store_row(c + 2 * ldc, c20, c21, ncols);
        store_row(c + 3 * ldc, c30, c31, ncols);
}

/* Six rows of A against one panel: 12 accumulators hide the FMA latency. */
static inline __attribute__((always_inline)) void
block_6(size_t K, const float *a, size_t lda, const float *p, float *c, size_t ldc, size_t ncols)
{
        v8 acc[6][2] = {{{0}}};

        for (size_t k = 0; k < K; k++) {
                v8 w0 = *(const v8 *)(p + k * RNND_CPU_NR);
                v8 w1 = *(const v8 *)(p + k * RNND_CPU_NR + 8);

                for (size_t r = 0; r < 6; r++) {
                        float ar = a[r * lda + k];

                        acc[r][0] += w0 * ar;
                        acc[r][1] += w1 * ar;
                }
        }
        for (size_t r = 0; r < 6; r++)
                store_row(c + r * ldc, acc[r][0], acc[r][1], ncols);
}

/* One row of A against one panel. */
static inline __attribute__((always_inline)) void block_1(size_t K, const float *a, const float *p,
                                                          float *c, size_t ncols)
{
        v8 c0 = {0}, c1 = {0};

        for (size_t k = 0; k < K; k++) {
                c0 += *(const v8 *)(p + k * RNND_CPU_NR) * a[k];
                c1 += *(const v8 *)(p + k * RNND_CPU_NR + 8) * a[k];
        }
        store_row(c, c0, c1, ncols);
}

/*
 * One row of A against four whole panels: eight independent sums where
 * block_1 has two, so that the FMAs' latency is hidden (a lone row is what
 * a one-sequence batch's recurrence is, every step).  Each sum adds in
 * block_1's order, so the result is the same to the bit.
 */
static inline __attribute__((always_inline)) void
block_1x4(size_t K, const float *a, const float *p, size_t pstride, float *c)
{
        v8 s00 = {0}, s01 = {0}, s10 = {0}, s11 = {0}, s20 = {0}, s21 = {0}, s30 = {0}, s31 = {0};
        const float *p0 = p, *p1 = p + pstride, *p2 = p + 2 * pstride, *p3 = p + 3 * pstride;

        for (size_t k = 0; k < K; k++) {
                size_t o = k * RNND_CPU_NR;

                s00 += *(const v8 *)(p0 + o) * a[k];
                s01 += *(const v8 *)(p0 + o + 8) * a[k];
                s10 += *(const v8 *)(p1 + o) * a[k];
                s11 += *(const v8 *)(p1 + o + 8) * a[k];
                s20 += *(const v8 *)(p2 + o) * a[k];
                s21 += *(const v8 *)(p2 + o + 8) * a[k];
                s30 += *(const v8 *)(p3 + o) * a[k];
                s31 += *(const v8 *)(p3 + o + 8) * a[k];
        }
        store_row(c, s00, s01, RNND_CPU_NR);
        store_row(c + RNND_CPU_NR, s10, s11, RNND_CPU_NR);
        store_row(c + 2 * RNND_CPU_NR, s20, s21, RNND_CPU_NR);
        store_row(c + 3 * RNND_CPU_NR, s30, s31, RNND_CPU_NR);
}

/* The first row that the blocks of 6 and 4 leave to block_1, for M rows. */
static size_t single_rows_from(size_t M)
{
        size_t m = 0;

        for (; M - m >= 6 && M - m != 8 && M - m != 9; m += 6)
                ;
        for (; m + MR <= M; m += MR)
                ;
        return m;
}

KERNEL void rnnd__cpu_gemm_packed(uint32_t M, uint32_t N, uint32_t K, const float *A, uint32_t lda,
                                  const float *P, float *C, uint32_t ldc)
{
        for (size_t n0 = 0; n0 < N; n0 += RNND_CPU_NR) {
                const float *panel = P + (n0 / RNND_CPU_NR) * (size_t)K * RNND_CPU_NR;
                size_t ncols = N - n0 < RNND_CPU_NR ? N - n0 : RNND_CPU_NR;
                size_t m = 0;

                /* Blocks of 6 rows, then 4; 8 and 9 rows go as 4 + 4 (+ 1). */
                for (; M - m >= 6 && M - m != 8 && M - m != 9; m += 6)
                        block_6(K, A + m * lda, lda, panel, C + m * ldc + n0, ldc, ncols);
                for (; m + MR <= M; m += MR)
                        block_4(K, A + m * lda, lda, panel, C + m * ldc + n0, ldc, ncols);
        }
        /* The rows left over, four whole panels at a time where there are four. */
        for (size_t m = single_rows_from(M); m < M; m++) {
                const size_t pstride = (size_t)K * RNND_CPU_NR;
                size_t n0 = 0;

                for (; n0 + 4 * RNND_CPU_NR <= N; n0 += 4 * RNND_CPU_NR)
                        block_1x4(K, A + m * lda, P + (n0 / RNND_CPU_NR) * pstride, pstride,
                                  C + m * ldc + n0);
                for (; n0 < N; n0 += RNND_CPU_NR)
                        block_1(K, A + m * lda, P + (n0 / RNND_CPU_NR) * pstride, C + m * ldc + n0,
                                N - n0 < RNND_CPU_NR ? N - n0 : RNND_CPU_NR);
        }
}

/*
 * step.c: the fused GRU and RNN steps (cpu-int.h; DESIGN.md §7), built as
 * the LSTM's in gates.c: a register block of rows x panels of lu units sums
 * the biases, x W_ih^T (when X is given) and A W_hh^T, and the gate math runs
 * on the block, so that no gate pre-activation goes through memory.
 *
 * A block holds mr rows x np panels x the kind's slots (GRU 4: r, z,
 * W_n x + b_in, R_n h + b_hn; GRU_RZ 2; the others 1) in accumulators:
 * at most 24 (of AVX-512's 32 registers) with panels of 16 units, 8 (of
 * AVX2's 16, the weight vectors held too) with panels of 8.  Blocks sweep the
 * rows for one group of panels before the next, so a group's weights are
 * read from memory once per step and from cache by every further block.  A
 * lone row (a one-sequence batch) takes groups of more panels, so that its
 * sums are independent enough to hide the multiply-adds' latency.
 */
#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu-int.h"
#include "cpu/vec-int.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#define ALWAYS_INLINE inline __attribute__((always_inline))
#define SLOTS_MAX     4u
#define BLOCK_MAX     24u /* row x panel pairs of a block at most: 6 x 4 */

/*
 * A sweep's partial sums (rows x panels x slots x units, 24 KiB), and the
 * weights of one chunk of k: 256 KiB, which every block of rows reads from
 * the L2 cache (1 or 2 MiB a core on AVX-512 servers) while the next group's
 * are fetched into it.  Chunks that stayed in L1 (20 KiB) ran the step of
 * the GRU of hidden 512 at batch 64 at 122 GFLOP/s, these at 129, on a core
 * of 172 (docs/BENCHMARKS.md): a block's 8 streams of h from L2 restarted
 * every 106 k, and its partial sums went through memory 6 times.
 */
#define PART_FLOATS 6144u
#define L2_WEIGHTS  262144u

/* Weights larger than this are read from L3 each step: prefetch the next group's. */
#define L3_WEIGHTS  1048576u
#define LINE_FLOATS 16u

/*
 * Lines of weights that a block prefetches into the L2 cache as it sums: the
 * next group of panels, lines of them from at (none: lines 0).
 */
struct ahead {
        const float *at;
        size_t lines;
};

#define NO_AHEAD ((struct ahead){NULL, 0})

/*
 * Rows [m, m + mr) of M's share of the lines of the group after this one
 * (from at, lines in all), one line a sum of the block's K: with fewer than
 * about 8 blocks of rows, only the first part of each share.
 */
static inline struct ahead ahead_share(const float *at, size_t lines, size_t m, size_t mr, size_t M,
                                       size_t K)
{
        const size_t a = m * lines / M, e = (m + mr) * lines / M;

        return (struct ahead){at + a * LINE_FLOATS, e - a < K ? e - a : K};
}

/* In sweep: a block's share, in the range where h starts (the weights of x are few). */
#define AHEAD(mr)                                                                                  \
        (c0 <= st->KX && st->KX < c1 ? ahead_share(nxt, nlines, m, mr, M, c1 - st->KX) : NO_AHEAD)

#if defined(__x86_64__) && defined(__GNUC__)
#define AVX512_ONLY __attribute__((target("arch=x86-64-v4")))
#else
#define AVX512_ONLY
#endif

/*
 * 1/x for the gate math's sigmoid and tanh, x >= 1: the CPU's estimate
 * (12 bits with AVX2, 14 with AVX-512) and one Newton step, within 2 ulp.
 * A division takes the one divider of the core for 10 to 16 cycles a vector,
 * and a GRU block's 8 rows divide 24 times; the estimate and the step take
 * three instructions of the two vector ports.
 */
#if defined(__x86_64__) && defined(__GNUC__)
static ALWAYS_INLINE AVX2_ONLY v8 recip8(v8 x)
{
        v8 r = (v8)_mm256_rcp_ps((__m256)x);

        return r + r * (1.0f - x * r);
}

static ALWAYS_INLINE AVX512_ONLY v16 recip16(v16 x)
{
        v16 r = (v16)_mm512_rcp14_ps((__m512)x);

        return r + r * (1.0f - x * r);
}
#else
#define recip8(x)  (1.0f / (x))
#define recip16(x) (1.0f / (x))
#endif

/*
 * sigmoid and tanh as vec-int.h's, on recip: for the GRU and RNN kinds, whose
 * batches and lone rows both run here.  The LSTM's lone row keeps
 * vec-int.h's division, as gates.c's kernel of its batches does, so that a
 * sequence's answer does not depend on the batch it ran in, to the bit
 * (tests/hostile/test_grpc.py's load client compares them exactly).
 */
#define GATE_MATH(V, VI, W, ATTR)                                                                  \
        static ALWAYS_INLINE ATTR V sig##W(V x)                                                    \
        {                                                                                          \
                return recip##W(1.0f + exp_##W(-x));                                               \
        }                                                                                          \
        static ALWAYS_INLINE ATTR V tnh##W(V x)                                                    \
        {                                                                                          \
                VI sign = (VI)x & (int32_t)0x80000000;                                             \
                V e = exp_##W(-2.0f * (V)((VI)x & 0x7fffffff));                                    \
                                                                                                   \
                return (V)((VI)((1.0f - e) * recip##W(1.0f + e)) | sign);                          \
        }

GATE_MATH(v8, v8i, 8, AVX2_ONLY)
GATE_MATH(v16, v16i, 16, AVX512_ONLY)

/* Gate rows of a kind in the packed weights. */
static ALWAYS_INLINE size_t kind_gates(enum rnnd__cpu_kind k)
{
        return k == RNND_CPU_LSTM ? 4 : k == RNND_CPU_GRU ? 3 : k == RNND_CPU_GRU_RZ ? 2 : 1;
}

/* Accumulators per row and panel; also the bias vectors per panel. */
static ALWAYS_INLINE size_t kind_slots(enum rnnd__cpu_kind k)
{
        return k == RNND_CPU_LSTM || k == RNND_CPU_GRU ? 4 : k == RNND_CPU_GRU_RZ ? 2 : 1;
}

/* The slot that gate g of W_ih (hpart false) or W_hh (true) adds into. */
static ALWAYS_INLINE size_t slot_of(enum rnnd__cpu_kind k, bool hpart, size_t g)
{
        return k == RNND_CPU_GRU && hpart && g == 2 ? 3 : g;
}

/*
 * Panels per group of a block of mr rows: as many as the registers allow (a
 * power of two, 8 at most), each panel taking mr x gates accumulators and a
 * register per gate for its weights, and one more for the row's x or h:
 * 32 with AVX-512, 16 with AVX2.  A lone row reads each weight once, from
 * memory into its multiply-add, and takes up to 28 (or 14) accumulators.
 */
static ALWAYS_INLINE size_t group_of(enum rnnd__cpu_kind k, size_t mr, size_t lu)
{
        size_t v = mr == 1 ? (lu == 16 ? 28 : 14) / kind_gates(k)
                           : (lu == 16 ? 31 : 15) / (mr * kind_gates(k) + kind_gates(k));

        return v >= 8 ? 8 : v >= 4 ? 4 : v >= 2 ? 2 : 1;
}

/* Rows of the largest block: 24 (or 8) accumulators over the top group. */
static ALWAYS_INLINE size_t top_rows(enum rnnd__cpu_kind k, size_t lu)
{
        return lu == 8 ? 2 : k == RNND_CPU_GRU ? 8 : 6;
}

static size_t panel_stride(enum rnnd__cpu_kind k, size_t lu, size_t KX, size_t K)
{
        return (kind_slots(k) + kind_gates(k) * (KX + K)) * lu;
}

size_t rnnd__cpu_step_packed_size(enum rnnd__cpu_kind kind, uint32_t lu, uint32_t H, uint32_t KX,
                                  uint32_t K)
{
        return ((size_t)H + lu - 1) / lu * panel_stride(kind, lu, KX, K);
}

/* Gates [0, G) of W (row stride K) at a panel's offset at, zeros past H. */
static void pack_rows(size_t G, size_t lu, size_t H, size_t u0, size_t K, const float *W, float *at)
{
        for (size_t k = 0; k < K; k++)
                for (size_t g = 0; g < G; g++)
                        for (size_t c = 0; c < lu; c++)
                                at[(k * G + g) * lu + c] =
                                        u0 + c < H ? W[(g * H + u0 + c) * K + k] : 0.0f;
}

/* Slot j's bias of unit o (gate and unit): b_ih + b_hh, but the GRU keeps n's apart. */
static float bias_of(enum rnnd__cpu_kind kind, size_t j, size_t H, size_t o, const float *b_ih,
                     const float *b_hh)
{
        if (kind == RNND_CPU_GRU && j == 2)
                return b_ih[2 * H + o];
        if (kind == RNND_CPU_GRU && j == 3)
                return b_hh[2 * H + o];
        return b_ih[j * H + o] + b_hh[j * H + o];
}

void rnnd__cpu_step_pack(enum rnnd__cpu_kind kind, uint32_t lu, uint32_t H, uint32_t KX,
                         const float *W_ih, uint32_t K, const float *W_hh, const float *b_ih,
                         const float *b_hh, float *P)
{
        const size_t G = kind_gates(kind), S = kind_slots(kind);
        const size_t stride = panel_stride(kind, lu, KX, K);

        for (size_t u0 = 0; u0 < H; u0 += lu) {
                float *panel = P + u0 / lu * stride;

                for (size_t j = 0; j < S; j++)
                        for (size_t c = 0; c < lu; c++)
                                panel[j * lu + c] =
                                        u0 + c < H ? bias_of(kind, j, H, u0 + c, b_ih, b_hh) : 0.0f;
                pack_rows(G, lu, H, u0, KX, W_ih, panel + S * lu);
                pack_rows(G, lu, H, u0, K, W_hh, panel + (S + G * (size_t)KX) * lu);
        }
}

/*
 * HOLD keeps a weight vector in a register: without it GCC folds each load
 * into every row's multiply-add, and the AVX2 kernel is bound by loads.  KEEP
 * says that a vector is still needed, so that GCC writes each multiply-add
 * into its accumulator and not over the broadcast or the weights it read: it
 * otherwise did so in blocks of AVX-512's 24 accumulators, and then copied
 * the result back, two register moves per multiply-add.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#define HOLD_REGS(a) __asm__("" : "+x"(a))
#define KEEP_X(a)    __asm__("" ::"x"(a))
#define KEEP_V(a)    __asm__("" ::"v"(a))
#else
#define HOLD_REGS(a) (void)(a)
#define KEEP_X(a)    (void)(a)
#define KEEP_V(a)    (void)(a)
#endif

/*
 * STEP_KERNEL(LU, V, VI, KEEP, ATTR) stamps the kernel for panels of LU units
 * held in vectors V of LU floats:
 * ld/st: n <= LU floats into or out of a vector (zeros past n);
 * sum: s[r np + q][gate] += a[r, 0..K) x panel q's rows of W_ih or W_hh;
 * cells: the gate math of a block from its sums, and its stores;
 * block: rows [m, m + mr) x panels from unit u, n units in all (more than
 *   (np - 1) LU);
 * run: a kind's step over units [j0, j1).
 */
#define STEP_KERNEL(LU, V, VI, KEEP, ATTR)                                                         \
        static ALWAYS_INLINE ATTR V ld##LU(const float *p, size_t n)                               \
        {                                                                                          \
                V v = {0};                                                                         \
                                                                                                   \
                memcpy(&v, p, (n == LU ? LU : n) * sizeof(float));                                 \
                return v;                                                                          \
        }                                                                                          \
        static ALWAYS_INLINE ATTR void st##LU(float *p, V v, size_t n)                             \
        {                                                                                          \
                memcpy(p, &v, (n == LU ? LU : n) * sizeof(float));                                 \
        }                                                                                          \
        static ALWAYS_INLINE ATTR void sum##LU(                                                    \
                enum rnnd__cpu_kind kind, size_t mr, size_t np, size_t K, const float *a,          \
                size_t lda, const float *p, size_t ps, V(*s)[SLOTS_MAX], struct ahead pf)          \
        {                                                                                          \
                const size_t G = kind_gates(kind);                                                 \
                for (size_t k = 0; k < K; k++) {                                                   \
                        V w[8][SLOTS_MAX];                                                         \
                                                                                                   \
                        if (k < pf.lines)                                                          \
                                __builtin_prefetch(pf.at + k * LINE_FLOATS, 0, 2);                 \
                                                                                                   \
                        for (size_t q = 0; q < np; q++)                                            \
                                for (size_t g = 0; g < G; g++) {                                   \
                                        w[q][g] = ((const V *)(p + q * ps + k * G * LU))[g];       \
                                        if (mr > 1)                                                \
                                                HOLD_REGS(w[q][g]);                                \
                                }                                                                  \
                        for (size_t r = 0; r < mr; r++) {                                          \
                                V ar = a[r * lda + k] - (V){0};                                    \
                                                                                                   \
                                for (size_t q = 0; q < np; q++)                                    \
                                        for (size_t g = 0; g < G; g++)                             \
                                                s[r * np + q][g] += w[q][g] * ar;                  \
                                KEEP(ar);                                                          \
                        }                                                                          \
                        for (size_t q = 0; mr > 1 && q < np; q++)                                  \
                                for (size_t g = 0; g < G; g++)                                     \
                                        KEEP(w[q][g]);                                             \
                }                                                                                  \
        }                                                                                          \
        static ALWAYS_INLINE ATTR void cells##LU(const struct rnnd__cpu_step *st, size_t mr,       \
                                                 size_t np, size_t m, size_t u, size_t n,          \
                                                 const float *acc)                                 \
        {                                                                                          \
                const enum rnnd__cpu_kind kind = st->kind;                                         \
                const size_t B = mr * np;                                                          \
                V o[BLOCK_MAX], t[BLOCK_MAX];                                                      \
                                                                                                   \
                /*                                                                                 \
                 * A GRU's cells go stage by stage over the block's B vectors, as gates.c's        \
                 * LSTM cells do: B independent chains of exp and reciprocal at a time, where      \
                 * each vector's three waited on each other in turn (the step alone, alternated:   \
                 * +2-6% at hidden 512 and 64 rows, +8-12% at hidden 96 and 256).  The other       \
                 * kinds stay vector by vector: staged too, or given kind as a constant here,      \
                 * GCC's register allocation spilled accumulators in the GRU's 8-row sum loop.     \
                 */                                                                                \
                if (kind == RNND_CPU_GRU) {                                                        \
                        const V *g = (const V *)acc; /* slot j of vector i: g[i S + j] */          \
                        const size_t S = kind_slots(RNND_CPU_GRU);                                 \
                                                                                                   \
                        for (size_t i = 0; i < B; i++)                                             \
                                t[i] = sig##LU(g[i * S]);                                          \
                        for (size_t i = 0; i < B; i++)                                             \
                                o[i] = tnh##LU(g[i * S + 2] + t[i] * g[i * S + 3]);                \
                        for (size_t i = 0; i < B; i++)                                             \
                                t[i] = sig##LU(g[i * S + 1]);                                      \
                }                                                                                  \
                for (size_t i = 0; kind != RNND_CPU_GRU && i < B; i++) {                           \
                        const size_t r = m + i / np, uq = u + i % np * LU;                         \
                        const size_t nq = n - i % np * LU < LU ? n - i % np * LU : LU;             \
                        V ov = {0}, tv = {0}, g[SLOTS_MAX] = {{0}};                                \
                                                                                                   \
                        memcpy(g, acc + i * kind_slots(kind) * LU, kind_slots(kind) * sizeof(V));  \
                                                                                                   \
                        switch (kind) {                                                            \
                        case RNND_CPU_LSTM: /* t: the new cell, o: h; gates.c's division */        \
                                tv = sigmoid_##LU(g[1]) * ld##LU(st->c + r * st->H + uq, nq) +     \
                                     sigmoid_##LU(g[0]) * tanh_##LU(g[2]);                         \
                                ov = sigmoid_##LU(g[3]) * tanh_##LU(tv);                           \
                                break;                                                             \
                        case RNND_CPU_GRU: /* above */                                             \
                                break;                                                             \
                        case RNND_CPU_GRU_RZ:                                                      \
                                ov = sig##LU(g[0]) * ld##LU(st->hold + r * st->ldo + uq, nq);      \
                                tv = sig##LU(g[1]);                                                \
                                break;                                                             \
                        case RNND_CPU_GRU_N:                                                       \
                                ov = tnh##LU(g[0]);                                                \
                                tv = ld##LU(st->z + r * st->H + uq, nq);                           \
                                break;                                                             \
                        case RNND_CPU_TANH:                                                        \
                                ov = tnh##LU(g[0]);                                                \
                                break;                                                             \
                        case RNND_CPU_RELU:                                                        \
                                ov = (V)((VI)g[0] & (g[0] > 0.0f));                                \
                                break;                                                             \
                        }                                                                          \
                        o[i] = ov;                                                                 \
                        t[i] = tv;                                                                 \
                }                                                                                  \
                for (size_t i = 0; i < B; i++) {                                                   \
                        const size_t r = m + i / np, uq = u + i % np * LU;                         \
                        const size_t nq = n - i % np * LU < LU ? n - i % np * LU : LU;             \
                                                                                                   \
                        if (kind == RNND_CPU_GRU || kind == RNND_CPU_GRU_N)                        \
                                o[i] += t[i] * (ld##LU(st->hold + r * st->ldo + uq, nq) - o[i]);   \
                        if (kind == RNND_CPU_GRU_RZ)                                               \
                                st##LU(st->z + r * st->H + uq, t[i], nq);                          \
                        if (kind == RNND_CPU_LSTM)                                                 \
                                st##LU(st->c + r * st->H + uq, t[i], nq);                          \
                        st##LU(st->h + r * st->ldh + uq, o[i], nq);                                \
                        if (st->y != NULL || st->ys != NULL)                                       \
                                st##LU(rnnd__cpu_yrow(st, r) + uq, o[i], nq);                      \
                }                                                                                  \
        }                                                                                          \
        /*                                                                                         \
         * The sums of k in [c0, c1) of the concatenated x and A (x's KX first, when X is          \
         * given), added to the partial sums of the slots its gates feed: in registers from the    \
         * biases (the first range) or from part, and stored to part; after the last k, W x too    \
         * when it is given, and the gate math.  Only the gates being summed take registers (a     \
         * GRU's 3 of its 4 slots, so a GRU block has 8 rows): where a range goes from x on to     \
         * h, a GRU's W_n x goes to part and R_n h takes its register.  One range from x to h      \
         * keeps the sums in registers where a range each stored and reloaded them (and every      \
         * bias went through part): +3-4% a step at hidden 96 and 128 (panels of 8: +24-27%, and   \
         * +9% at 512), but the hidden-512 GRU at 64 rows with panels of 16 ran 1-5% slower end to \
         * end (unchanged alone; docs/BENCHMARKS.md).  proj: x alone, no bias, and the sums stored \
         * to xg (rnnd__cpu_project()).                                                            \
         */                                                                                        \
        static ALWAYS_INLINE ATTR void block##LU(                                                  \
                const struct rnnd__cpu_step *st, enum rnnd__cpu_kind kind, bool proj, size_t mr,   \
                size_t np, size_t m, size_t u, size_t n, size_t c0, size_t c1, float *part,        \
                struct ahead pf)                                                                   \
        {                                                                                          \
                const size_t S = kind_slots(kind), G = kind_gates(kind), KX = st->KX;              \
                const size_t ps = panel_stride(kind, LU, KX, st->K);                               \
                const float *p = st->P + u / LU * ps;                                              \
                const bool hpart = c0 >= KX, hend = c1 > KX,                                       \
                           first = c0 == (st->X != NULL ? 0 : KX);                                 \
                const bool last = c1 == KX + (proj ? 0 : st->K);                                   \
                const size_t kh = hpart ? c0 : KX; /* where the range's part of A starts */        \
                V s[BLOCK_MAX][SLOTS_MAX];                                                         \
                                                                                                   \
                /* Without X, a GRU's W_n x + b_in starts in part (W x is added below). */         \
                for (size_t i = 0; i < mr * np; i++) {                                             \
                        const V *bias = (const V *)(p + i % np * ps);                              \
                                                                                                   \
                        for (size_t g = 0; g < SLOTS_MAX; g++) {                                   \
                                const size_t j = slot_of(kind, hpart, g);                          \
                                                                                                   \
                                s[i][g] = g >= G || (first && proj) ? (V){0}                       \
                                          : first                   ? bias[j]                      \
                                                  : ld##LU(part + (i * S + j) * LU, LU);           \
                        }                                                                          \
                        if (first && !proj && hpart && slot_of(kind, true, 2) != 2)                \
                                st##LU(part + (i * S + 2) * LU, bias[2], LU);                      \
                }                                                                                  \
                if (!hpart)                                                                        \
                        sum##LU(kind, mr, np, (hend ? KX : c1) - c0, st->X + m * st->ldxin + c0,   \
                                st->ldxin, p + (S + G * c0) * LU, ps, s, NO_AHEAD);                \
                for (size_t i = 0; !hpart && hend && slot_of(kind, true, 2) != 2 && i < mr * np;   \
                     i++) {                                                                        \
                        /* a GRU's W_n x done; R_n h from b_hn */                                  \
                        st##LU(part + (i * S + 2) * LU, s[i][2], LU);                              \
                        s[i][2] = ((const V *)(p + i % np * ps))[3];                               \
                }                                                                                  \
                if (last && !proj)                                                                 \
                        rnnd__cpu_fetch_y(st, mr, np *LU, m, u);                                   \
                if (hend)                                                                          \
                        sum##LU(kind, mr, np, c1 - kh, st->A + m * st->lda + (kh - KX), st->lda,   \
                                p + (S + G * kh) * LU, ps, s, pf);                                 \
                for (size_t i = 0; i < mr * np; i++) {                                             \
                        const size_t q = i % np, uq = u + q * LU;                                  \
                        const size_t nq = n - q * LU < LU ? n - q * LU : LU;                       \
                        float *xo = (float *)st->xg + (m + i / np) * st->ldx + uq;                 \
                                                                                                   \
                        for (size_t g = 0; g < G; g++) {                                           \
                                float *at = part + (i * S + slot_of(kind, hend, g)) * LU;          \
                                                                                                   \
                                if (last && proj)                                                  \
                                        st##LU(xo + g * st->H, s[i][g], nq);                       \
                                else                                                               \
                                        st##LU(at, s[i][g], LU);                                   \
                        }                                                                          \
                }                                                                                  \
                if (!last || proj)                                                                 \
                        return;                                                                    \
                if (st->X == NULL) /* W x, given, into the x slots */                              \
                        for (size_t i = 0; i < mr * np; i++) {                                     \
                                const size_t q = i % np, uq = u + q * LU;                          \
                                const size_t nq = n - q * LU < LU ? n - q * LU : LU;               \
                                const float *x = st->xg + (m + i / np) * st->ldx + uq;             \
                                                                                                   \
                                for (size_t g = 0; g < G; g++) {                                   \
                                        float *at = part + (i * S + g) * LU;                       \
                                                                                                   \
                                        st##LU(at, ld##LU(at, LU) + ld##LU(x + g * st->H, nq),     \
                                               LU);                                                \
                                }                                                                  \
                        }                                                                          \
                cells##LU(st, mr, np, m, u, n, part);                                              \
        }                                                                                          \
        /* The next range of k from c0: a chunk of at most kc (x and A as one). */                 \
        static ALWAYS_INLINE size_t chunk_end##LU(const struct rnnd__cpu_step *st, bool proj,      \
                                                  size_t c0, size_t kc)                            \
        {                                                                                          \
                const size_t lim = st->KX + (proj ? 0 : st->K);                                    \
                                                                                                   \
                return lim - c0 < kc ? lim : c0 + kc;                                              \
        }                                                                                          \
        /* Rows [m, m + mr) over units [u, j1): groups of np panels, then single ones. */          \
        static ALWAYS_INLINE ATTR void rows##LU(const struct rnnd__cpu_step *st,                   \
                                                enum rnnd__cpu_kind kind, bool proj, size_t mr,    \
                                                size_t np, size_t m, size_t u, size_t j1)          \
        {                                                                                          \
                const size_t kb = st->X != NULL ? 0 : st->KX;                                      \
                const size_t ke = st->KX + (proj ? 0 : st->K);                                     \
                float part[BLOCK_MAX * SLOTS_MAX * LU];                                            \
                                                                                                   \
                while (u < j1) {                                                                   \
                        const size_t g = j1 - u >= np * LU ? np : 1;                               \
                        const size_t n = g > 1 ? g * LU : j1 - u < LU ? j1 - u : LU;               \
                                                                                                   \
                        for (size_t c0 = kb, c1; c0 < ke; c0 = c1) {                               \
                                c1 = chunk_end##LU(st, proj, c0, SIZE_MAX);                        \
                                if (g > 1)                                                         \
                                        block##LU(st, kind, proj, mr, np, m, u, n, c0, c1, part,   \
                                                  NO_AHEAD);                                       \
                                else                                                               \
                                        block##LU(st, kind, proj, mr, 1, m, u, n, c0, c1, part,    \
                                                  NO_AHEAD);                                       \
                        }                                                                          \
                        u += g * LU;                                                               \
                }                                                                                  \
        }                                                                                          \
        /*                                                                                         \
         * Every row over g panels from unit u, n units in all: by groups of rows whose partial    \
         * sums fit PART_FLOATS, each by chunks of k whose weights fit L2_WEIGHTS (a panel of 3    \
         * gates x 16 units is 192 bytes a k: 106 KB for x of 40 and h of 512), every block of     \
         * the group's rows adding one chunk before the next, and prefetching its share of the     \
         * next group's weights into L2 as it goes.                                                \
         */                                                                                        \
        static ALWAYS_INLINE ATTR void sweep##LU(const struct rnnd__cpu_step *st,                  \
                                                 enum rnnd__cpu_kind kind, bool proj, size_t g,    \
                                                 size_t u, size_t n)                               \
        {                                                                                          \
                const size_t M = st->M, S = kind_slots(kind), rows = PART_FLOATS / (g * S * LU);   \
                const size_t kb = st->X != NULL ? 0 : st->KX;                                      \
                const size_t ke = st->KX + (proj ? 0 : st->K);                                     \
                const size_t kc = L2_WEIGHTS / (g * kind_gates(kind) * LU * sizeof(float));        \
                const size_t top = top_rows(kind, LU);                                             \
                const size_t ps = panel_stride(kind, LU, st->KX, st->K);                           \
                const size_t all = (st->H + LU - 1) / LU, nq = u / LU + g < all ? u / LU + g : 0;  \
                const float *nxt = st->P + nq * ps; /* after the last group, the first */          \
                const size_t nlines = all * ps * sizeof(float) <= L3_WEIGHTS                       \
                                              ? 0 /* the weights stay in L2 */                     \
                                              : (all - nq < g ? all - nq : g) * ps / LINE_FLOATS;  \
                float part[PART_FLOATS];                                                           \
                                                                                                   \
                for (size_t m0 = 0; m0 < M; m0 += rows) {                                          \
                        const size_t m1 = M - m0 < rows ? M : m0 + rows;                           \
                                                                                                   \
                        for (size_t c0 = kb, c1; c0 < ke; c0 = c1) {                               \
                                size_t m = m0;                                                     \
                                float *pt = part;                                                  \
                                                                                                   \
                                c1 = chunk_end##LU(st, proj, c0, kc);                              \
                                /* Blocks of 8 or 6 rows (AVX-512), then 4, 2 and 1; */            \
                                /* 8 and 9 as 4 + 4 (+ 1) where 6 is the largest. */               \
                                for (; top == 8 && m1 - m >= 8; m += 8, pt += 8 * g * S * LU)      \
                                        block##LU(st, kind, proj, 8, g, m, u, n, c0, c1, pt,       \
                                                  AHEAD(8));                                       \
                                for (; top == 6 && m1 - m >= 6 && m1 - m != 8 && m1 - m != 9;      \
                                     m += 6, pt += 6 * g * S * LU)                                 \
                                        block##LU(st, kind, proj, 6, g, m, u, n, c0, c1, pt,       \
                                                  AHEAD(6));                                       \
                                for (; LU == 16 && m1 - m >= 4; m += 4, pt += 4 * g * S * LU)      \
                                        block##LU(st, kind, proj, 4, g, m, u, n, c0, c1, pt,       \
                                                  AHEAD(4));                                       \
                                for (; m1 - m >= 2; m += 2, pt += 2 * g * S * LU)                  \
                                        block##LU(st, kind, proj, 2, g, m, u, n, c0, c1, pt,       \
                                                  AHEAD(2));                                       \
                                for (; m < m1; m++, pt += g * S * LU)                              \
                                        block##LU(st, kind, proj, 1, g, m, u, n, c0, c1, pt,       \
                                                  AHEAD(1));                                       \
                        }                                                                          \
                }                                                                                  \
        }                                                                                          \
        static ALWAYS_INLINE ATTR void run##LU(const struct rnnd__cpu_step *st,                    \
                                               enum rnnd__cpu_kind kind, bool proj, size_t j0,     \
                                               size_t j1)                                          \
        {                                                                                          \
                const size_t np = group_of(kind, top_rows(kind, LU), LU);                          \
                size_t u = j0;                                                                     \
                                                                                                   \
                if (st->M == 1) {                                                                  \
                        rows##LU(st, kind, proj, 1, group_of(kind, 1, LU), 0, j0, j1);             \
                        return;                                                                    \
                }                                                                                  \
                for (; u + np * LU <= j1; u += np * LU)                                            \
                        sweep##LU(st, kind, proj, np, u, np *LU);                                  \
                for (; u < j1; u += LU)                                                            \
                        sweep##LU(st, kind, proj, 1, u, j1 - u < LU ? j1 - u : LU);                \
        }                                                                                          \
        static ALWAYS_INLINE ATTR void step##LU(const struct rnnd__cpu_step *st, bool proj,        \
                                                size_t j0, size_t j1)                              \
        {                                                                                          \
                switch (st->kind) {                                                                \
                case RNND_CPU_LSTM:                                                                \
                        run##LU(st, RNND_CPU_LSTM, proj, j0, j1);                                  \
                        break;                                                                     \
                case RNND_CPU_GRU:                                                                 \
                        run##LU(st, RNND_CPU_GRU, proj, j0, j1);                                   \
                        break;                                                                     \
                case RNND_CPU_GRU_RZ:                                                              \
                        run##LU(st, RNND_CPU_GRU_RZ, proj, j0, j1);                                \
                        break;                                                                     \
                case RNND_CPU_GRU_N:                                                               \
                        run##LU(st, RNND_CPU_GRU_N, proj, j0, j1);                                 \
                        break;                                                                     \
                case RNND_CPU_TANH:                                                                \
                        run##LU(st, RNND_CPU_TANH, proj, j0, j1);                                  \
                        break;                                                                     \
                case RNND_CPU_RELU:                                                                \
                        run##LU(st, RNND_CPU_RELU, proj, j0, j1);                                  \
                        break;                                                                     \
                }                                                                                  \
        }

/*
 * Each width is built for its own feature level alone (cpu.c chooses panels
 * of 16 only where the CPU has AVX-512, of 8 only where it has AVX2 and FMA),
 * not as clones for every level: the plain vectors of a baseline build of the
 * 16-float kernel would be a large object that nothing runs.
 */

STEP_KERNEL(8, v8, v8i, KEEP_X, AVX2_ONLY)
STEP_KERNEL(16, v16, v16i, KEEP_V, AVX512_ONLY)

static AVX2_ONLY __attribute__((noinline)) void step_avx2(const struct rnnd__cpu_step *s, bool proj,
                                                          uint32_t j0, uint32_t j1)
{
        step8(s, proj, j0, j1);
}

static AVX512_ONLY __attribute__((noinline)) void step_avx512(const struct rnnd__cpu_step *s,
                                                              bool proj, uint32_t j0, uint32_t j1)
{
        step16(s, proj, j0, j1);
}

void rnnd__cpu_step(const struct rnnd__cpu_step *s, uint32_t j0, uint32_t j1)
{
        assert((uintptr_t)s->P % (s->lu * sizeof(float)) == 0);
        if (s->lu == 8)
                step_avx2(s, false, j0, j1);
        else
                step_avx512(s, false, j0, j1);
}

void rnnd__cpu_project(const struct rnnd__cpu_step *s)
{
        assert((uintptr_t)s->P % (s->lu * sizeof(float)) == 0);
        if (s->lu == 8)
                step_avx2(s, true, 0, s->H);
        else
                step_avx512(s, true, 0, s->H);
}

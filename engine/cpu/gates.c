/*
 * gates.c: the fused gate math of the CPU engine (DESIGN.md §4).  One call
 * per row per step; the loops are written so that the compiler vectorises
 * them, and the exponential is a branch-free polynomial for that reason.
 */
#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu-int.h"
#include "cpu/vec-int.h"

static inline __attribute__((always_inline)) float exp_ps(float x)
{
        float k, r, p;
        uint32_t bits;
        float scale;

        x = x > EXP_HI ? EXP_HI : x;
        x = x < EXP_LO ? EXP_LO : x;
        EXP_POLY(x, k, r, p);
        bits = (uint32_t)((int32_t)k + 127) << 23;
        memcpy(&scale, &bits, sizeof(scale));
        return p * scale;
}

static inline __attribute__((always_inline)) float sigmoid1(float x)
{
        return 1.0f / (1.0f + exp_ps(-x));
}

/*
 * tanh(x) = sign(x) (1 - e) / (1 + e) with e = exp(-2|x|): no cancellation
 * for large |x|, and for small |x| an absolute error near 1e-7.
 */
static inline __attribute__((always_inline)) float tanh1(float x)
{
        uint32_t xb, tb;
        float a, e, t;

        memcpy(&xb, &x, sizeof(xb));
        tb = xb & 0x7fffffffu; /* |x| */
        memcpy(&a, &tb, sizeof(a));
        e = exp_ps(-2.0f * a);
        t = (1.0f - e) / (1.0f + e);
        memcpy(&tb, &t, sizeof(tb));
        tb |= xb & 0x80000000u; /* the sign of x, without a branch */
        memcpy(&t, &tb, sizeof(t));
        return t;
}

/*
 * The LSTM kernels' cell update on W-float vectors (vec-int.h), one text per
 * width.
 */
#define VEC_CELLS(V, VI, W, ATTR)                                                                  \
        /*                                                                                         \
         * The cell update of rows [m, m + mr) over units [u, u + W) from their                    \
         * gate sums acc[r rs + gate W + unit] (the input projection in them):                     \
         * each step applied to every row before the next.                                         \
         */                                                                                        \
        static inline ATTR __attribute__((always_inline)) void cells_##W(                          \
                const struct rnnd__cpu_step *s, size_t mr, size_t m, size_t u, const float *acc,   \
                size_t rs)                                                                         \
        {                                                                                          \
                V g[4][6], t[6], c[6];                                                             \
                                                                                                   \
                for (size_t i = 0; i < mr; i++) {                                                  \
                        memcpy(&c[i], s->c + (m + i) * s->H + u, sizeof(c[i]));                    \
                        for (size_t k = 0; k < 4; k++)                                             \
                                memcpy(&g[k][i], acc + i * rs + k * W, sizeof(g[k][i]));           \
                }                                                                                  \
                for (size_t i = 0; i < mr; i++)                                                    \
                        t[i] = sigmoid_##W(g[0][i]);                                               \
                for (size_t i = 0; i < mr; i++)                                                    \
                        t[i] *= tanh_##W(g[2][i]);                                                 \
                for (size_t i = 0; i < mr; i++)                                                    \
                        c[i] = sigmoid_##W(g[1][i]) * c[i] + t[i];                                 \
                for (size_t i = 0; i < mr; i++)                                                    \
                        t[i] = sigmoid_##W(g[3][i]) * tanh_##W(c[i]);                              \
                for (size_t i = 0; i < mr; i++) {                                                  \
                        memcpy(s->c + (m + i) * s->H + u, &c[i], sizeof(c[i]));                    \
                        memcpy(s->h + (m + i) * s->ldh + u, &t[i], sizeof(t[i]));                  \
                        memcpy(rnnd__cpu_yrow(s, m + i) + u, &t[i], sizeof(t[i]));                 \
                }                                                                                  \
        }

VEC_CELLS(v8, v8i, 8, AVX2_ONLY)
VEC_CELLS(v16, v16i, 16, )

KERNEL void rnnd__cpu_sigmoid(uint32_t n, const float *x, float *y)
{
        for (size_t j = 0; j < n; j++)
                y[j] = sigmoid1(x[j]);
}

KERNEL void rnnd__cpu_tanh(uint32_t n, const float *x, float *y)
{
        for (size_t j = 0; j < n; j++)
                y[j] = tanh1(x[j]);
}

KERNEL void rnnd__cpu_lstm_row(uint32_t n, uint32_t stride, const float *restrict xg,
                               const float *restrict hg, const float *restrict bi,
                               const float *restrict bh, float *restrict c, float *restrict h)
{
        const size_t s = stride;

        for (size_t j = 0; j < n; j++) {
                float gi = sigmoid1(xg[j] + bi[j] + hg[j] + bh[j]);
                float gf = sigmoid1(xg[s + j] + bi[s + j] + hg[s + j] + bh[s + j]);
                float gg = tanh1(xg[2 * s + j] + bi[2 * s + j] + hg[2 * s + j] + bh[2 * s + j]);
                float go = sigmoid1(xg[3 * s + j] + bi[3 * s + j] + hg[3 * s + j] + bh[3 * s + j]);
                float cn = gf * c[j] + gi * gg;

                c[j] = cn;
                h[j] = go * tanh1(cn);
        }
}

KERNEL void rnnd__cpu_gru_row(uint32_t n, uint32_t stride, const float *restrict xg,
                              const float *restrict hg, const float *restrict bi,
                              const float *restrict bh, const float *restrict h_in,
                              float *restrict h_out)
{
        const size_t s = stride;

        for (size_t j = 0; j < n; j++) {
                float r = sigmoid1(xg[j] + bi[j] + hg[j] + bh[j]);
                float z = sigmoid1(xg[s + j] + bi[s + j] + hg[s + j] + bh[s + j]);
                float nn =
                        tanh1(xg[2 * s + j] + bi[2 * s + j] + r * (hg[2 * s + j] + bh[2 * s + j]));

                h_out[j] = (1.0f - z) * nn + z * h_in[j];
        }
}

KERNEL void rnnd__cpu_gru_rz_row(uint32_t H, const float *restrict xg, float *restrict hg,
                                 const float *restrict bi, const float *restrict bh,
                                 const float *restrict h, float *restrict rh)
{
        for (size_t j = 0; j < H; j++) {
                float r = sigmoid1(xg[j] + bi[j] + hg[j] + bh[j]);
                float z = sigmoid1(xg[H + j] + bi[H + j] + hg[H + j] + bh[H + j]);

                hg[H + j] = z;
                rh[j] = r * h[j];
        }
}

KERNEL void rnnd__cpu_gru_n_row(uint32_t H, const float *restrict xg, const float *restrict hg,
                                const float *restrict bi, const float *restrict bh,
                                float *restrict h)
{
        for (size_t j = 0; j < H; j++) {
                float z = hg[H + j];
                float n = tanh1(xg[2 * H + j] + bi[2 * H + j] + hg[2 * H + j] + bh[2 * H + j]);

                h[j] = (1.0f - z) * n + z * h[j];
        }
}

KERNEL void rnnd__cpu_rnn_row(uint32_t H, bool relu, const float *restrict xg,
                              const float *restrict hg, const float *restrict bi,
                              const float *restrict bh, float *restrict h)
{
        if (relu) {
                for (size_t j = 0; j < H; j++) {
                        float v = xg[j] + bi[j] + hg[j] + bh[j];

                        h[j] = v > 0.0f ? v : 0.0f;
                }
                return;
        }
        for (size_t j = 0; j < H; j++)
                h[j] = tanh1(xg[j] + bi[j] + hg[j] + bh[j]);
}

void rnnd__cpu_activate(rnnd_act_t act, uint32_t n, float *v)
{
        float mx, sum;

        switch (act) {
        case RNND_ACT_NONE:
                break;
        case RNND_ACT_SIGMOID:
                for (uint32_t j = 0; j < n; j++)
                        v[j] = 1.0f / (1.0f + expf(-v[j]));
                break;
        case RNND_ACT_TANH:
                for (uint32_t j = 0; j < n; j++)
                        v[j] = tanhf(v[j]);
                break;
        case RNND_ACT_RELU:
                for (uint32_t j = 0; j < n; j++)
                        v[j] = v[j] > 0.0f ? v[j] : 0.0f;
                break;
        case RNND_ACT_SOFTMAX:
                mx = v[0];
                for (uint32_t j = 1; j < n; j++)
                        mx = v[j] > mx ? v[j] : mx;
                sum = 0.0f;
                for (uint32_t j = 0; j < n; j++) {
                        v[j] = expf(v[j] - mx);
                        sum += v[j];
                }
                for (uint32_t j = 0; j < n; j++)
                        v[j] /= sum;
                break;
        }
}

/*
 * The fused LSTM step (cpu-int.h).  A panel holds the four gates of lu hidden
 * units (16 with AVX-512, 8 with AVX2), so one register block of r rows x 4lu
 * columns ends with i, f, g and o of the same units and the cell update runs
 * on it directly: the gate pre-activations never go through memory.
 */
#define LU_MAX 16u /* the widest panel */

size_t rnnd__cpu_lstm_packed_size(uint32_t lu, uint32_t H, uint32_t KX, uint32_t K)
{
        return ((size_t)H + lu - 1) / lu * (1 + (size_t)KX + K) * 4 * lu;
}

/* Gate g's row j of W (row stride K) into a panel's row k, or zeros past H. */
static void pack_rows(size_t lu, size_t H, size_t u0, size_t K, const float *W, size_t k0,
                      float *panel)
{
        for (size_t k = 0; k < K; k++)
                for (size_t g = 0; g < 4; g++)
                        for (size_t c = 0; c < lu; c++)
                                panel[((k0 + k) * 4 + g) * lu + c] =
                                        u0 + c < H ? W[(g * H + u0 + c) * K + k] : 0.0f;
}

void rnnd__cpu_lstm_pack(uint32_t lu, uint32_t H, uint32_t KX, const float *W_ih, uint32_t K,
                         const float *W_hh, const float *b_ih, const float *b_hh, float *P)
{
        const size_t stride = (1 + (size_t)KX + K) * 4 * lu;

        for (size_t u0 = 0; u0 < H; u0 += lu) {
                float *panel = P + u0 / lu * stride;

                for (size_t g = 0; g < 4; g++)
                        for (size_t c = 0; c < lu; c++)
                                panel[g * lu + c] =
                                        u0 + c < H ? b_ih[g * H + u0 + c] + b_hh[g * H + u0 + c]
                                                   : 0.0f;
                pack_rows(lu, H, u0, KX, W_ih, 1, panel);
                pack_rows(lu, H, u0, K, W_hh, 1 + (size_t)KX, panel);
        }
}

/*
 * For panels of LU units held in vectors V of LU floats, rows r < mr against
 * panels q < np (np panels ps floats apart; two for a lone row, whose four
 * sums alone would wait on the FMA latency):
 * lstm_sumLU: s[r np + q] += A[r, 0..K) x panel q's rows 0..K).  mr and np
 * are constants after inlining, so the accumulators stay in registers: 24 of
 * the 32 for six rows of 16 with AVX-512, 8 of the 16 for two rows of 8 with
 * AVX2 (the four weight vectors take four more).
 * lstm_blockLU: the bias, plus x W_ih^T when st->X is set, plus h W_hh^T,
 * for rows [m, m + mr), into acc[(r np + q) rs + gate gs + unit].
 */
#define LSTM_BLOCK(LU, V, HOLD)                                                                    \
        static inline __attribute__((always_inline)) void lstm_sum##LU(                            \
                size_t mr, size_t np, size_t K, const float *a, size_t lda, const float *p,        \
                size_t ps, V(*s)[4])                                                               \
        {                                                                                          \
                for (size_t k = 0; k < K; k++)                                                     \
                        for (size_t q = 0; q < np; q++) {                                          \
                                const V *w = (const V *)(p + q * ps + k * 4 * LU);                 \
                                V w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];                      \
                                                                                                   \
                                HOLD(w0, w1, w2, w3);                                              \
                                for (size_t r = 0; r < mr; r++) {                                  \
                                        float ar = a[r * lda + k];                                 \
                                                                                                   \
                                        s[r * np + q][0] += w0 * ar;                               \
                                        s[r * np + q][1] += w1 * ar;                               \
                                        s[r * np + q][2] += w2 * ar;                               \
                                        s[r * np + q][3] += w3 * ar;                               \
                                }                                                                  \
                        }                                                                          \
        }                                                                                          \
        static inline __attribute__((always_inline)) void lstm_block##LU(                          \
                size_t mr, size_t np, const struct rnnd__cpu_step *st, size_t m, const float *p,   \
                size_t ps, float *acc, size_t rs, size_t gs)                                       \
        {                                                                                          \
                V s[6][4];                                                                         \
                                                                                                   \
                for (size_t r = 0; r < mr; r++)                                                    \
                        for (size_t q = 0; q < np; q++)                                            \
                                for (size_t g = 0; g < 4; g++)                                     \
                                        s[r * np + q][g] = ((const V *)(p + q * ps))[g];           \
                if (st->X != NULL)                                                                 \
                        lstm_sum##LU(mr, np, st->KX, st->X + m * st->ldxin, st->ldxin, p + 4 * LU, \
                                     ps, s);                                                       \
                lstm_sum##LU(mr, np, st->K, st->A + m * st->lda, st->lda,                          \
                             p + (1 + (size_t)st->KX) * 4 * LU, ps, s);                            \
                for (size_t r = 0; r < mr * np; r++)                                               \
                        for (size_t g = 0; g < 4; g++)                                             \
                                *(V *)(acc + r * rs + g * gs) = s[r][g];                           \
        }

/*
 * Keeps the four weight vectors of a k in registers: without it GCC folds
 * each load into every row's FMA, loading each weight once per row, and the
 * AVX2 kernel is bound by loads instead of by FMAs.
 */
#define HOLD_NONE(a, b, c, d)
#if defined(__x86_64__) && defined(__GNUC__)
#define HOLD_REGS(a, b, c, d) __asm__("" : "+x"(a), "+x"(b), "+x"(c), "+x"(d))
#else
#define HOLD_REGS HOLD_NONE
#endif

LSTM_BLOCK(16, v16, HOLD_NONE)
LSTM_BLOCK(8, v8, HOLD_REGS)

/* One unit's cell update from its four gate sums. */
static inline __attribute__((always_inline)) void lstm_unit(float si, float sf, float sg, float so,
                                                            float *c, float *h, float *y)
{
        float gi = sigmoid1(si), gf = sigmoid1(sf), gg = tanh1(sg), go = sigmoid1(so);
        float cn = gf * *c + gi * gg;
        float hv = go * tanh1(cn);

        *c = cn;
        *h = hv;
        *y = hv;
}

/*
 * The cell update of one row over n <= lu units: rp holds the gates' sums
 * (gate stride lu), xg W x (gate stride H) or is NULL.
 */
static inline __attribute__((always_inline)) void
lstm_cell(size_t lu, size_t n, size_t H, const float *restrict rp, const float *restrict xg,
          float *restrict c, float *restrict h, float *restrict y)
{
        if (xg == NULL)
                for (size_t j = 0; j < n; j++)
                        lstm_unit(rp[j], rp[lu + j], rp[2 * lu + j], rp[3 * lu + j], c + j, h + j,
                                  y + j);
        else
                for (size_t j = 0; j < n; j++)
                        lstm_unit(rp[j] + xg[j], rp[lu + j] + xg[H + j],
                                  rp[2 * lu + j] + xg[2 * H + j], rp[3 * lu + j] + xg[3 * H + j],
                                  c + j, h + j, y + j);
}

/*
 * Rows [m, m + mr) of the step over np panels from unit u, n units in all
 * (more than (np - 1) lu, at most np lu).
 */
static inline __attribute__((always_inline)) void lstm_rows(size_t lu, size_t mr, size_t np,
                                                            const struct rnnd__cpu_step *s,
                                                            size_t m, size_t u, size_t n)
{
        const size_t H = s->H, stride = (1 + (size_t)s->KX + s->K) * 4 * lu;
        const float *panel = s->P + u / lu * stride;
        float acc[6][4 * LU_MAX];

        rnnd__cpu_fetch_y(s, mr, n, m, u);
        if (lu == 16)
                lstm_block16(mr, np, s, m, panel, stride, acc[0], 4 * LU_MAX, lu);
        else
                lstm_block8(mr, np, s, m, panel, stride, acc[0], 4 * LU_MAX, lu);
        if (lu == 16 && np == 1 && n == lu && s->xg == NULL) {
                cells_16(s, mr, m, u, acc[0], 4 * LU_MAX); /* the rows' cells together */
                return;
        }
        for (size_t r = 0; r < mr; r++)
                for (size_t q = 0; q < np; q++) {
                        const size_t uq = u + q * lu, nq = n - q * lu < lu ? n - q * lu : lu;
                        const float *xg = s->xg != NULL ? s->xg + (m + r) * s->ldx + uq : NULL;
                        float *c = s->c + (m + r) * H + uq, *h = s->h + (m + r) * s->ldh + uq;
                        float *y = rnnd__cpu_yrow(s, m + r) + uq;

                        if (nq == lu)
                                lstm_cell(lu, lu, H, acc[r * np + q], xg, c, h, y);
                        else
                                lstm_cell(lu, nq, H, acc[r * np + q], xg, c, h, y);
                }
}

/*
 * Rows [m, m + CELLS) of the panel of units [u, u + 8), x W_ih^T summed here
 * (s->xg NULL, as from 4 rows up: cpu.c): the sums by blocks of two rows,
 * then the cells of all four together.
 */
#define CELLS 4u

static inline AVX2_ONLY __attribute__((always_inline)) void
lstm_cells8(const struct rnnd__cpu_step *s, size_t m, size_t u)
{
        const size_t stride = (1 + (size_t)s->KX + s->K) * 4 * 8;
        float acc[CELLS][4 * LU_MAX];

        rnnd__cpu_fetch_y(s, CELLS, 8, m, u);
        for (size_t i = 0; i < CELLS; i += 2)
                lstm_block8(2, 1, s, m + i, s->P + u / 8 * stride, stride, acc[i], 4 * LU_MAX, 8);
        cells_8(s, CELLS, m, u, acc[0], 4 * LU_MAX);
}

/*
 * Panels of 8 units (AVX2 and FMA, cpu.c chooses them only there): blocks of
 * two rows, 8 accumulators and the 4 weight vectors in registers, their cells
 * four rows at a time.  Built for x86-64-v3 alone, as the register hold above
 * cannot be built for the baseline.
 */
static AVX2_ONLY __attribute__((noinline)) void lstm_step8(const struct rnnd__cpu_step *s,
                                                           uint32_t j0, uint32_t j1)
{
        const size_t M = s->M;

        for (size_t u = j0; u < j1; u += 8) {
                size_t m = 0;

                if (j1 - u >= 8 && s->xg == NULL)
                        for (; M - m >= CELLS; m += CELLS)
                                lstm_cells8(s, m, u);
                for (; M - m >= 2; m += 2)
                        lstm_rows(8, 2, 1, s, m, u, j1 - u < 8 ? j1 - u : 8);
        }
        if (M % 2 == 1) /* a lone row, two panels at a time */
                for (size_t u = j0; u < j1; u += 16) {
                        if (j1 - u > 8)
                                lstm_rows(8, 1, 2, s, M - 1, u, j1 - u < 16 ? j1 - u : 16);
                        else
                                lstm_rows(8, 1, 1, s, M - 1, u, j1 - u);
                }
}

KERNEL void rnnd__cpu_lstm_step(const struct rnnd__cpu_step *s, uint32_t j0, uint32_t j1)
{
        const size_t M = s->M;

        assert((uintptr_t)s->P % (s->lu * sizeof(float)) == 0);
#if defined(__x86_64__) && defined(__GNUC__)
        /*
         * A lone row of 16-unit panels (a one-sequence batch) runs step.c's
         * kernel, whose groups of 4 panels keep 16 sums in flight where a
         * block below keeps 4 (issue 28: 10% at hidden 256).
         */
        if (s->lu == 16 && M == 1 && __builtin_cpu_supports("avx512f")) {
                rnnd__cpu_step(s, j0, j1);
                return;
        }
#endif
        if (s->lu == 8) {
                lstm_step8(s, j0, j1);
                return;
        }
        /* Six rows of 16 need 24 accumulators: only AVX-512 has the registers. */
        for (size_t u = j0; u < j1; u += 16) {
                size_t n = j1 - u < 16 ? j1 - u : 16, m = 0;

                /* 8 rows go as 4 + 4, 9 as 4 + 4 + 1. */
                for (; M - m >= 6 && M - m != 8 && M - m != 9; m += 6)
                        lstm_rows(16, 6, 1, s, m, u, n);
                for (; M - m >= 4; m += 4)
                        lstm_rows(16, 4, 1, s, m, u, n);
                for (; M - m >= 2; m += 2)
                        lstm_rows(16, 2, 1, s, m, u, n);
                for (; m < M; m++)
                        lstm_rows(16, 1, 1, s, m, u, n);
        }
}

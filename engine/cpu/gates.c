/*
 * gates.c: the fused gate math of the CPU engine (DESIGN.md §4).  One call
 * per row per step; the loops are written so that the compiler vectorises
 * them, and the exponential is a branch-free polynomial for that reason.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu-int.h"

/*
 * Each exported kernel is compiled for the x86-64 feature levels v4
 * (AVX-512), v3 (AVX2 + FMA) and the baseline, and the loader picks one per
 * machine by its features (an ifunc).  ("arch=haswell" would select by CPU
 * model, and so never on AMD or on newer Intel parts.)
 * This file is built with -O3 -fno-trapping-math (engine/meson.build): the
 * compare-and-clamp in exp_ps may then be vectorised, and we never read the
 * floating-point exception flags.
 */
#if defined(__x86_64__) && defined(__GNUC__)
#define KERNEL __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define KERNEL
#endif

/*
 * exp(x) for x in [-87.3, 88.7] after clamping, by range reduction
 * x = k ln2 + r with |r| <= ln2/2 and a degree-6 polynomial for e^r (Cephes
 * coefficients); relative error below 2 ulp.  Branch-free so loops vectorise.
 */
static inline float exp_ps(float x)
{
        const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
        float k, r, p;
        int32_t ki;
        uint32_t bits;
        float scale;

        x = x > 88.3762626647949f ? 88.3762626647949f : x;
        x = x < -87.3365447504019f ? -87.3365447504019f : x;
        /* Round to nearest with the 1.5 * 2^23 trick: vectorises on any SSE2. */
        k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
        r = x - k * ln2_hi;
        r = r - k * ln2_lo;
        p = 1.9875691500e-4f;
        p = p * r + 1.3981999507e-3f;
        p = p * r + 8.3334519073e-3f;
        p = p * r + 4.1665795894e-2f;
        p = p * r + 1.6666665459e-1f;
        p = p * r + 5.0000001201e-1f;
        p = p * r * r + r + 1.0f;
        ki = (int32_t)k;
        bits = (uint32_t)(ki + 127) << 23;
        memcpy(&scale, &bits, sizeof(scale));
        return p * scale;
}

static inline float sigmoid1(float x)
{
        return 1.0f / (1.0f + exp_ps(-x));
}

/*
 * tanh(x) = sign(x) (1 - e) / (1 + e) with e = exp(-2|x|): no cancellation
 * for large |x|, and for small |x| an absolute error near 1e-7.
 */
static inline float tanh1(float x)
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

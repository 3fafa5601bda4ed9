/*
 * vec-int.h: what the CPU engine's kernel files share (gates.c, step.c): the
 * per-feature-level clones, the exponential's polynomial, and exp, sigmoid
 * and tanh on 8- and 16-float vectors.  Included by kernel files only, which
 * are built with -O3 -fno-trapping-math (engine/meson.build).
 */
#ifndef RNND_ENGINE_CPU_VEC_INT_H
#define RNND_ENGINE_CPU_VEC_INT_H

#include <stdint.h>

/*
 * Each exported kernel is compiled for the x86-64 feature levels v4
 * (AVX-512), v3 (AVX2 + FMA) and the baseline, and the loader picks one per
 * machine by its features (an ifunc).  ("arch=haswell" would select by CPU
 * model, and so never on AMD or on newer Intel parts.)
 * The kernel files are built with -O3 -fno-trapping-math (engine/meson.build):
 * the compare-and-clamp of the exponential may then be vectorised, and we
 * never read the floating-point exception flags.
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
 * EXP_POLY is the reduction and the polynomial, one text for gates.c's scalar
 * exp_ps() and the vector exp_W() below: x in, k (as a float) and p = e^r out.
 * The rounding to nearest uses the 1.5 * 2^23 trick: it vectorises on any SSE2.
 */
#define EXP_HI 88.3762626647949f
#define EXP_LO -87.3365447504019f
#define EXP_POLY(x, k, r, p)                                                                       \
        do {                                                                                       \
                k = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;                        \
                r = x - k * 0.693359375f;                                                          \
                r = r - k * -2.12194440e-4f;                                                       \
                p = r * 1.9875691500e-4f + 1.3981999507e-3f;                                       \
                p = p * r + 8.3334519073e-3f;                                                      \
                p = p * r + 4.1665795894e-2f;                                                      \
                p = p * r + 1.6666665459e-1f;                                                      \
                p = p * r + 5.0000001201e-1f;                                                      \
                p = p * r * r + r + 1.0f;                                                          \
        } while (0)

/*
 * exp, sigmoid and tanh on vectors of 8 floats (AVX2) and 16 (AVX-512), for
 * the fused step kernels' cell updates, which apply each to several rows'
 * vectors in turn, so that their chains of exp and division overlap (one
 * row's alone waits on their latency).  VEC_MATH stamps one text per width.
 * (A vector wider than the machine's would do several rows in one text, but
 * GCC turns its comparisons into scalar code.)
 */
typedef float v8 __attribute__((vector_size(32), aligned(4)));
typedef int32_t v8i __attribute__((vector_size(32), aligned(4)));
typedef float v16 __attribute__((vector_size(64), aligned(4)));
typedef int32_t v16i __attribute__((vector_size(64), aligned(4)));

/* Built for AVX2 alone: only the AVX2 kernels (panels of 8 units) call them. */
#if defined(__x86_64__) && defined(__GNUC__)
#define AVX2_ONLY __attribute__((target("arch=x86-64-v3")))
#else
#define AVX2_ONLY
#endif

#define VEC_MATH(V, VI, W, ATTR)                                                                   \
        static inline ATTR __attribute__((always_inline)) V exp_##W(V x)                           \
        {                                                                                          \
                const V vhi = (V){0} + EXP_HI, vlo = (V){0} + EXP_LO;                              \
                VI hi = x > vhi, lo = x < vlo;                                                     \
                V k, r, p;                                                                         \
                                                                                                   \
                x = (V)(((VI)x & ~hi) | ((VI)vhi & hi));                                           \
                x = (V)(((VI)x & ~lo) | ((VI)vlo & lo));                                           \
                EXP_POLY(x, k, r, p);                                                              \
                return p * (V)((__builtin_convertvector(k, VI) + 127) << 23);                      \
        }                                                                                          \
        static inline ATTR __attribute__((always_inline)) V sigmoid_##W(V x)                       \
        {                                                                                          \
                return 1.0f / (1.0f + exp_##W(-x));                                                \
        }                                                                                          \
        static inline ATTR __attribute__((always_inline)) V tanh_##W(V x)                          \
        {                                                                                          \
                VI sign = (VI)x & (int32_t)0x80000000;                                             \
                V e = exp_##W(-2.0f * (V)((VI)x & 0x7fffffff));                                    \
                V t = (1.0f - e) / (1.0f + e);                                                     \
                                                                                                   \
                return (V)((VI)t | sign);                                                          \
        }

VEC_MATH(v8, v8i, 8, AVX2_ONLY)
VEC_MATH(v16, v16i, 16, ) /* no ABI: always inlined (engine/meson.build) */

#endif

/*
 * kernels.cu: the cuDNN backend's own CUDA kernels, compiled by nvcc only when
 * the backend is built.  cuDNN and cuBLAS do the heavy work; these move rows:
 *   - gather: dst row r = src row idx[r] (or zeros), converting between
 *     float32 and float16.  One kernel serves the embedding lookup, the
 *     batch-major to sequence-major transposes of x and y, and the state
 *     layouts (the caller's [B, LD, H] against cuDNN's [LD, B, H]);
 *   - head_finish: the head's bias and activation after the cuBLAS GEMM;
 *   - fault: a write through a bad address, so tests can see a lost device.
 */
#include <cuda_fp16.h>
#include <stdint.h>

#include "cudnn-int.h"

/*
 * RNND_LAUNCH(grid, block, smem, stream, kernel)(args...) is the launch
 * <<<grid, block, smem, stream>>> under nvcc; the CPU stand-in
 * (tests/cudasim, -Dcuda=sim) compiles this file as host C++ and defines it
 * as its own launcher.
 */
#ifdef __CUDACC__
#define RNND_LAUNCH(grid, block, smem, stream, ...) __VA_ARGS__<<<grid, block, smem, stream>>>
#endif

namespace
{

__device__ inline float load(const float *p, size_t i)
{
        return p[i];
}

__device__ inline float load(const __half *p, size_t i)
{
        return __half2float(p[i]);
}

__device__ inline void store(float *p, size_t i, float v)
{
        p[i] = v;
}

__device__ inline void store(__half *p, size_t i, float v)
{
        p[i] = __float2half_rn(v);
}

template <typename S, typename D>
__global__ void gather(const S *src, const int32_t *idx, uint32_t rows, uint32_t width, D *dst)
{
        const size_t total = (size_t)rows * width;

        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total;
             i += (size_t)gridDim.x * blockDim.x) {
                const size_t r = i / width, j = i % width;
                const int64_t s = idx != nullptr ? (int64_t)idx[r] : (int64_t)r;

                store(dst, i, s < 0 ? 0.0f : load(src, (size_t)s * width + j));
        }
}

template <typename S, typename D>
cudaError_t launch_gather(const void *src, const int32_t *idx, uint32_t rows, uint32_t width,
                          void *dst, cudaStream_t s)
{
        const size_t total = (size_t)rows * width;
        const unsigned threads = 256;
        size_t blocks = (total + threads - 1) / threads;

        if (total == 0)
                return cudaSuccess;
        if (blocks > 65535u * 16u)
                blocks = 65535u * 16u; /* the loop strides over the rest */
        RNND_LAUNCH((unsigned)blocks, threads, 0, s, gather<S, D>)
        (static_cast<const S *>(src), idx, rows, width, static_cast<D *>(dst));
        return cudaGetLastError();
}

/* The rnnd_act_t values (proto/modelcfg.h), which this file cannot include. */
enum { ACT_NONE = 0, ACT_SIGMOID, ACT_TANH, ACT_RELU, ACT_SOFTMAX };

/* One block per row; blockDim.x is a power of two. */
__global__ void head_finish(float *v, const float *bias, uint32_t units, int act)
{
        __shared__ float red[256];
        float *row = v + (size_t)blockIdx.x * units;
        float mx = -INFINITY, sum = 0.0f;

        for (uint32_t j = threadIdx.x; j < units; j += blockDim.x) {
                float x = row[j] + (bias != nullptr ? bias[j] : 0.0f);

                if (act == ACT_SIGMOID)
                        x = 1.0f / (1.0f + expf(-x));
                else if (act == ACT_TANH)
                        x = tanhf(x);
                else if (act == ACT_RELU)
                        x = x > 0.0f ? x : 0.0f;
                row[j] = x;
                mx = fmaxf(mx, x);
        }
        if (act != ACT_SOFTMAX)
                return;
        red[threadIdx.x] = mx;
        __syncthreads();
        for (unsigned k = blockDim.x / 2; k > 0; k /= 2) {
                if (threadIdx.x < k)
                        red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + k]);
                __syncthreads();
        }
        mx = red[0];
        __syncthreads();
        for (uint32_t j = threadIdx.x; j < units; j += blockDim.x) {
                float e = expf(row[j] - mx);

                row[j] = e;
                sum += e;
        }
        red[threadIdx.x] = sum;
        __syncthreads();
        for (unsigned k = blockDim.x / 2; k > 0; k /= 2) {
                if (threadIdx.x < k)
                        red[threadIdx.x] += red[threadIdx.x + k];
                __syncthreads();
        }
        sum = red[0];
        for (uint32_t j = threadIdx.x; j < units; j += blockDim.x)
                row[j] /= sum;
}

__global__ void fault(void)
{
        *(volatile int *)(uintptr_t)0x10 = 1;
}

} /* namespace */

extern "C" cudaError_t rnnd__cuda_gather(const void *src, int src_t, const int32_t *idx,
                                         uint32_t rows, uint32_t width, void *dst, int dst_t,
                                         cudaStream_t s)
{
        if (src_t == RNND__F32 && dst_t == RNND__F32)
                return launch_gather<float, float>(src, idx, rows, width, dst, s);
        if (src_t == RNND__F32 && dst_t == RNND__F16)
                return launch_gather<float, __half>(src, idx, rows, width, dst, s);
        if (src_t == RNND__F16 && dst_t == RNND__F32)
                return launch_gather<__half, float>(src, idx, rows, width, dst, s);
        return launch_gather<__half, __half>(src, idx, rows, width, dst, s);
}

extern "C" cudaError_t rnnd__cuda_head_finish(float *v, const float *bias, uint32_t rows,
                                              uint32_t units, int act, cudaStream_t s)
{
        unsigned threads = 32;

        if (rows == 0)
                return cudaSuccess;
        while (threads < 256 && threads < units)
                threads *= 2;
        RNND_LAUNCH(rows, threads, 0, s, head_finish)(v, bias, units, act);
        return cudaGetLastError();
}

extern "C" cudaError_t rnnd__cuda_fault(cudaStream_t s)
{
        RNND_LAUNCH(1, 1, 0, s, fault)();
        return cudaGetLastError();
}

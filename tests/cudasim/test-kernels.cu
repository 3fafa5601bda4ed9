/*
 * test-kernels.cu: kernels for test_cudasim.c, compiled like the backend's
 * kernels.cu (as host C++ with kernel-host.h): a block reduction through
 * __syncthreads, a barrier only some threads reach, a __trap, and a write
 * past the end of an allocation.
 */
#include <stdint.h>

extern "C" {
cudaError_t t_block_sum(const float *in, float *out, unsigned n, unsigned threads,
                        cudaStream_t s);
cudaError_t t_divergent(float *out, cudaStream_t s);
cudaError_t t_trap(cudaStream_t s);
cudaError_t t_overrun(float *p, size_t n, cudaStream_t s);
cudaError_t t_launch(unsigned grid, unsigned block, cudaStream_t s);
}

namespace
{

/* out[blockIdx.x] = the sum of in[blockIdx.x * n .. + n], by a tree in shared memory. */
__global__ void block_sum(const float *in, float *out, unsigned n)
{
        __shared__ float red[1024];
        float s = 0.0f;

        for (unsigned i = threadIdx.x; i < n; i += blockDim.x)
                s += in[(size_t)blockIdx.x * n + i];
        red[threadIdx.x] = s;
        __syncthreads();
        for (unsigned k = blockDim.x / 2; k > 0; k /= 2) {
                if (threadIdx.x < k)
                        red[threadIdx.x] += red[threadIdx.x + k];
                __syncthreads();
        }
        if (threadIdx.x == 0)
                out[blockIdx.x] = red[0];
}

__global__ void divergent(float *out)
{
        if (threadIdx.x % 2 == 0)
                __syncthreads();
        out[threadIdx.x] = 1.0f;
}

__global__ void trap(void)
{
        __trap();
}

__global__ void overrun(float *p, size_t n)
{
        p[n + threadIdx.x] = 1.0f; /* the guard page after the allocation */
}

__global__ void nothing(void)
{
}

} /* namespace */

cudaError_t t_block_sum(const float *in, float *out, unsigned n, unsigned threads, cudaStream_t s)
{
        RNND_LAUNCH(2, threads, 0, s, block_sum)(in, out, n);
        return cudaGetLastError();
}

cudaError_t t_divergent(float *out, cudaStream_t s)
{
        RNND_LAUNCH(1, 32, 0, s, divergent)(out);
        return cudaGetLastError();
}

cudaError_t t_trap(cudaStream_t s)
{
        RNND_LAUNCH(1, 1, 0, s, trap)();
        return cudaGetLastError();
}

cudaError_t t_overrun(float *p, size_t n, cudaStream_t s)
{
        RNND_LAUNCH(1, 1, 0, s, overrun)(p, n);
        return cudaGetLastError();
}

cudaError_t t_launch(unsigned grid, unsigned block, cudaStream_t s)
{
        RNND_LAUNCH(grid, block, 0, s, nothing)();
        return cudaGetLastError();
}

/*
 * kernel-host.h: what g++ needs to compile engine/cudnn/kernels.cu as host
 * C++ for the stand-in (tests/cudasim/README.md), forced in with -include.
 * __global__ and __device__ functions become plain functions (the CUDA
 * headers' own host definitions), __shared__ memory is per stream thread
 * (a block runs on one thread), the built-in indices are that thread's
 * current fibre's (launch.c), and RNND_LAUNCH(grid, block, smem, stream,
 * kernel)(args...) queues the kernel through cudasim_launch().
 */
#ifndef RNND_CUDASIM_KERNEL_HOST_H
#define RNND_CUDASIM_KERNEL_HOST_H

#define __shared__ static thread_local

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>

#include <new>
#include <tuple>

extern "C" {
#define CUDASIM_TLS __thread __attribute__((tls_model("initial-exec")))
extern CUDASIM_TLS uint3 cudasim_threadIdx, cudasim_blockIdx, cudasim_blockDim, cudasim_gridDim;
void cudasim_syncthreads(void);
void cudasim_trap(void) __attribute__((noreturn));
cudaError_t cudasim_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                           void (*thread_fn)(void *), void *args, const char *name);
}

#define threadIdx       cudasim_threadIdx
#define blockIdx        cudasim_blockIdx
#define blockDim        cudasim_blockDim
#define gridDim         cudasim_gridDim
#define __syncthreads() cudasim_syncthreads()
#define __trap()        cudasim_trap()

template <typename... P> struct cudasim_launcher {
        void (*kernel)(P...);
        dim3 grid, block;
        size_t smem;
        cudaStream_t stream;
        const char *name;

        struct pack {
                void (*kernel)(P...);
                std::tuple<P...> args;
        };

        /* One thread of the kernel: the fibre's indices are already set. */
        static void run(void *p)
        {
                pack *k = static_cast<pack *>(p);

                std::apply(k->kernel, k->args);
        }

        template <typename... A> void operator()(A... a) const
        {
                void *mem = malloc(sizeof(pack));

                if (mem == nullptr) {
                        cudasim_launch(dim3(0), block, smem, stream, run, nullptr, name);
                        return;
                }
                new (mem) pack{kernel, std::tuple<P...>(a...)};
                cudasim_launch(grid, block, smem, stream, run, mem, name);
        }
};

template <typename... P>
cudasim_launcher<P...> cudasim_kernel(void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                                      cudaStream_t stream, const char *name)
{
        return cudasim_launcher<P...>{kernel, grid, block, smem, stream, name};
}

#define RNND_LAUNCH(grid, block, smem, stream, ...)                                                \
        cudasim_kernel(__VA_ARGS__, grid, block, smem, stream, "kernel " #__VA_ARGS__)

#endif

/*
 * cudnn-info.c: what the build and the machine have (cudnn.h:
 * rnnd_cudnn_info, for --backends and placement), and a GPU's free memory.
 */
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "alloc.h"
#include "backend.h"
#include "cudnn/cudnn-int.h"
#include "cudnn/cudnn.h"

void rnnd_cudnn_info(struct rnnd_cudnn_info *ret)
{
        cudaError_t e;
        int n = 0;

        memset(ret, 0, sizeof(*ret));
        ret->cudnn_version = (int)cudnnGetVersion();
        cudaRuntimeGetVersion(&ret->cudart_version);
        if (cudaDriverGetVersion(&ret->driver_version) != cudaSuccess)
                ret->driver_version = 0;
        e = cudaGetDeviceCount(&n);
        if (e != cudaSuccess || n <= 0) {
                /*
                 * Without a driver the runtime says "CUDA driver version is
                 * insufficient", which sends an operator of a CPU-only host
                 * after an upgrade: say what is missing instead.
                 */
                const int dv = ret->driver_version, rv = ret->cudart_version;

                if (e != cudaSuccess && dv == 0)
                        snprintf(ret->why_no_gpu, sizeof(ret->why_no_gpu),
                                 "no NVIDIA driver is installed (%s)", cudaGetErrorName(e));
                else if (e == cudaErrorInsufficientDriver)
                        snprintf(ret->why_no_gpu, sizeof(ret->why_no_gpu),
                                 "the NVIDIA driver supports CUDA %d.%d, older than this build's "
                                 "runtime, %d.%d",
                                 dv / 1000, dv % 1000 / 10, rv / 1000, rv % 1000 / 10);
                else
                        snprintf(ret->why_no_gpu, sizeof(ret->why_no_gpu), "%s",
                                 e != cudaSuccess ? cudaGetErrorString(e)
                                                  : "no CUDA device is visible");
                (void)cudaGetLastError();
                n = 0;
        }
        ret->device_count = n;
        for (int d = 0; d < n && d < RNND_CUDNN_MAX_DEVICES; d++) {
                struct cudaDeviceProp prop;

                if (cudaGetDeviceProperties(&prop, d) != cudaSuccess)
                        continue;
                snprintf(ret->devices[d].name, sizeof(ret->devices[d].name), "%.95s", prop.name);
                ret->devices[d].total_mem = prop.totalGlobalMem;
                ret->devices[d].cc_major = prop.major;
                ret->devices[d].cc_minor = prop.minor;
        }
}

int rnnd_cudnn_device_memory(int device, size_t *free_b, size_t *total_b, rnnd_error_t *reterr)
{
        struct plan tmp = {.device = device}, *p = &tmp;
        int r = 0;

        GPU_CK(cudaSetDevice(device));
        GPU_CK(cudaMemGetInfo(free_b, total_b));
out:
        return r;
}

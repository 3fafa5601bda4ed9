/*
 * cudnn.c: what the cuDNN backend was built with and what the machine has.
 * The backend itself (plans, data descriptors, algorithms) lands with the
 * cuDNN issue; this translation unit proves the toolkit builds and links.
 */
#include <stdio.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <cudnn.h>

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
                snprintf(ret->why_no_gpu, sizeof(ret->why_no_gpu), "%s",
                         e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device is visible");
                n = 0;
        }
        ret->device_count = n;
}

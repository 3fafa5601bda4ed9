/*
 * cudnn.h: the cuDNN backend's public face.  No CUDA or cuDNN type appears
 * here (DESIGN.md §1); those stay inside engine/cudnn/.
 */
#ifndef RNND_ENGINE_CUDNN_H
#define RNND_ENGINE_CUDNN_H

#include <stddef.h>

#include "backend.h"

#define RNND_CUDNN_MAX_DEVICES 16

struct rnnd_cudnn_device {
        char name[96];          /* "NVIDIA H100 80GB HBM3" */
        size_t total_mem;       /* bytes */
        int cc_major, cc_minor; /* compute capability */
};

struct rnnd_cudnn_info {
        int cudnn_version;    /* cudnnGetVersion(), e.g. 91900 */
        int cudart_version;   /* cudaRuntimeGetVersion(), e.g. 13000 */
        int driver_version;   /* cudaDriverGetVersion(), 0 without a driver */
        int device_count;     /* visible GPUs, 0 when none can be used */
        char why_no_gpu[128]; /* "" when device_count > 0 */
        struct rnnd_cudnn_device devices[RNND_CUDNN_MAX_DEVICES]; /* the first ones */
};

/*
 * Fills *ret with what was built in and what the machine has.  Never fails:
 * a machine without a driver or GPU gives device_count 0 and a reason.
 * Thread-safe.
 */
void rnnd_cudnn_info(struct rnnd_cudnn_info *ret);

/*
 * Free and total memory of GPU device, in bytes (cudaMemGetInfo).  Makes
 * device the calling thread's current device.  Returns 0, or RNND_EGPU with
 * the CUDA message.  Thread-safe.
 */
int rnnd_cudnn_device_memory(int device, size_t *free_b, size_t *total_b, rnnd_error_t *reterr);

/*
 * The cuDNN backend (DESIGN.md §7).  open() builds a plan for one GPU
 * (opts->device) on the calling worker thread: its own stream, cuDNN and
 * cuBLAS handles, weights, workspace and pinned staging sized for the
 * model's largest batch, and the algorithm for equal-length batches chosen
 * by timing.  run() returns RNND_EGPU for a failing CUDA, cuDNN or cuBLAS
 * call, and RNND_EDEVLOST from the moment the device failed (a sticky
 * error).
 */
extern const struct rnnd_backend_ops rnnd_cudnn_backend;

#endif

/*
 * cudnn.h: the cuDNN backend's public face.  No CUDA or cuDNN type appears
 * here (STYLE.md §1); those stay inside engine/cudnn/.
 */
#ifndef RNND_ENGINE_CUDNN_H
#define RNND_ENGINE_CUDNN_H

struct rnnd_cudnn_info {
        int cudnn_version;    /* cudnnGetVersion(), e.g. 91900 */
        int cudart_version;   /* cudaRuntimeGetVersion(), e.g. 13000 */
        int driver_version;   /* cudaDriverGetVersion(), 0 without a driver */
        int device_count;     /* visible GPUs, 0 when none can be used */
        char why_no_gpu[128]; /* "" when device_count > 0 */
};

/*
 * Fills *ret with what was built in and what the machine has.  Never fails:
 * a machine without a driver or GPU gives device_count 0 and a reason.
 * Thread-safe.
 */
void rnnd_cudnn_info(struct rnnd_cudnn_info *ret);

#endif

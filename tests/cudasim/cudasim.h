/*
 * cudasim.h: the test API of the CPU stand-in for the CUDA runtime, cuBLAS
 * and cuDNN (tests/cudasim/README.md).  A test linked against the stand-in
 * (meson -Dcuda=sim) includes it to arm faults in its own process and to
 * read counters; the environment variables below do the same for a process
 * a test starts (the daemon).
 *
 *   RNND_CUDASIM_DEVICES     "4G,1G,512M": one fake GPU per entry with that
 *                            much memory (K, M, G suffixes; bytes without);
 *                            a bare count "2" gives that many of 80 GiB.
 *                            Default: one GPU of 80 GiB.  CUDA_VISIBLE_DEVICES
 *                            then picks among them as it does on real GPUs.
 *   RNND_CUDASIM_OOM         "D:N": the Nth cudaMalloc (1-based, counted
 *                            from the start of the process) on device D
 *                            fails with cudaErrorMemoryAllocation.
 *   RNND_CUDASIM_FAULT       "N": the Nth launch (any kernel, cuBLAS GEMM or
 *                            cuDNN RNN forward, on any device) faults on the
 *                            device: a sticky cudaErrorIllegalAddress.
 *   RNND_CUDASIM_LAUNCH_FAIL "N": the Nth launch fails to launch (not
 *                            sticky): cudaErrorLaunchOutOfResources from a
 *                            kernel launch, CUBLAS_STATUS_EXECUTION_FAILED
 *                            from a GEMM, CUDNN_STATUS_EXECUTION_FAILED_CUDART
 *                            from an RNN forward.
 *   RNND_CUDASIM_DELAY_US    how long queued work waits for a synchronisation
 *                            before it runs anyway (default 20000).
 *   RNND_CUDASIM_SEED        the seed of the weight-space layouts (default:
 *                            random per process; printed on stderr).
 */
#ifndef RNND_CUDASIM_H
#define RNND_CUDASIM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Device dev's (visible index) n-th allocation from now (1 = the next) fails. */
void cudasim_arm_oom(int dev, unsigned n);
/* The n-th launch from now (1 = the next) faults on the device (sticky). */
void cudasim_arm_fault(unsigned n);
/* The n-th launch from now fails to launch (not sticky). */
void cudasim_arm_launch_fail(unsigned n);
/* Successful cudaMalloc calls so far on device dev, and cudaFree calls. */
uint64_t cudasim_malloc_count(int dev);
uint64_t cudasim_free_count(int dev);
/* Launches so far (kernels, GEMMs, RNN forwards), all devices. */
uint64_t cudasim_launch_count(void);
/* Bytes allocated on device dev now. */
size_t cudasim_device_used(int dev);
/*
 * Whether a host read of device memory faults: the stand-in fences device
 * memory with memory protection keys, which some CPUs and VMs lack.
 */
int cudasim_host_reads_fault(void);

#ifdef __cplusplus
}
#endif

#endif

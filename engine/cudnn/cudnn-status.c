/*
 * cudnn-status.c: the cuDNN backend's errors (cudnn-int.h): every CUDA,
 * cuDNN and cuBLAS status that GPU_CK checks becomes RNND_EGPU with the
 * library's words, or RNND_EDEVLOST when it leaves the device unusable, which
 * marks the plan lost and the process faulted (docs/DESIGN.md §7).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "alloc.h"
#include "backend.h"
#include "cudnn/cudnn-int.h"

/*
 * CUDA errors after which the context is unusable: every later call fails
 * the same way until the process ends.
 */
bool rnnd__cudnn_sticky(cudaError_t e)
{
        switch (e) {
        case cudaErrorIllegalAddress:
        case cudaErrorLaunchFailure:
        case cudaErrorHardwareStackError:
        case cudaErrorIllegalInstruction:
        case cudaErrorMisalignedAddress:
        case cudaErrorInvalidAddressSpace:
        case cudaErrorInvalidPc:
        case cudaErrorLaunchTimeout:
        case cudaErrorECCUncorrectable:
        case cudaErrorAssert:
        case cudaErrorNvlinkUncorrectable:
        case cudaErrorContextIsDestroyed:
        case cudaErrorDevicesUnavailable:
        case cudaErrorNoDevice:
        case cudaErrorCudartUnloading:
        case cudaErrorUnknown:
                return true;
        default:
                return false;
        }
}

/* The called function's name: the text of the call up to its '('. */
static void call_name(const char *call, char *buf, size_t cap)
{
        size_t n = strcspn(call, "(");

        snprintf(buf, cap, "%.*s", (int)n, call);
}

/*
 * A device fault is process-wide: a sticky error leaves the process's CUDA
 * context unusable (cuda_runtime_api.h: the process must be restarted), so
 * the first plan that sees one marks every plan of the process, on every
 * GPU, out of service.  fault_msg is written once, before fault is set.
 */
static atomic_bool fault;
static atomic_flag fault_claimed = ATOMIC_FLAG_INIT;
static char fault_msg[256];

const char *rnnd__cudnn_device_fault(void)
{
        return atomic_load(&fault) ? fault_msg : NULL;
}

static void process_fault(int device, const char *fn, const char *what)
{
        if (atomic_flag_test_and_set(&fault_claimed))
                return;
        snprintf(fault_msg, sizeof(fault_msg), "GPU %d: %s: %.100s", device, fn, what);
        atomic_store(&fault, true);
}

static int fail(struct plan *p, bool dead, const char *call, const char *what, rnnd_error_t *reterr)
{
        char fn[64];

        call_name(call, fn, sizeof(fn));
        if (dead && p != NULL && !p->lost) {
                p->lost = true;
                snprintf(p->lost_msg, sizeof(p->lost_msg), "%s: %.90s", fn, what);
        }
        if (dead)
                process_fault(p != NULL ? p->device : -1, fn, what);
        return rnnd_error_set(reterr, dead ? RNND_EDEVLOST : RNND_EGPU, "GPU %d: %s: %s",
                              p != NULL ? p->device : -1, fn, what);
}

int rnnd__cudnn_check_cuda(struct plan *p, cudaError_t e, const char *call, rnnd_error_t *reterr)
{
        if (e == cudaSuccess)
                return 0;
        (void)cudaGetLastError(); /* clears a non-sticky error */
        return fail(p, rnnd__cudnn_sticky(e), call, cudaGetErrorString(e), reterr);
}

/*
 * Whether a failed cuDNN or cuBLAS call left the device faulted.  Those
 * libraries carry their own CUDA runtime, so their errors never reach this
 * runtime's cudaPeekAtLastError(); a fault on the device does show in the
 * plan's stream, which they run on.
 */
static bool lib_fault(const struct plan *p)
{
        return p != NULL && p->stream != NULL && rnnd__cudnn_sticky(cudaStreamQuery(p->stream));
}

int rnnd__cudnn_check_cudnn(struct plan *p, cudnnStatus_t s, const char *call, rnnd_error_t *reterr)
{
        char detail[128] = "", what[200];

        if (s == CUDNN_STATUS_SUCCESS)
                return 0;
        cudnnGetLastErrorString(detail, sizeof(detail));
        snprintf(what, sizeof(what), "%s%s%s%s", cudnnGetErrorString(s),
                 detail[0] != '\0' ? " (" : "", detail, detail[0] != '\0' ? ")" : "");
        return fail(p, lib_fault(p), call, what, reterr);
}

int rnnd__cudnn_check_cublas(struct plan *p, cublasStatus_t s, const char *call,
                             rnnd_error_t *reterr)
{
        if (s == CUBLAS_STATUS_SUCCESS)
                return 0;
        return fail(p, lib_fault(p), call, cublasGetStatusString(s), reterr);
}

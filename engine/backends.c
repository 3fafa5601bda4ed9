/*
 * backends.c: the placement env of this build and machine (backends.h).
 */
#include <stdio.h>
#include <string.h>

#include "backends.h"
#include "rnnd-config.h"
#if RNND_HAVE_CUDA
#include "cudnn/cudnn.h"
#endif

void rnnd_backends_env(struct rnnd_placement_env *env, bool backend_cpu, const char *backend_from,
                       unsigned cpu_threads)
{
        memset(env, 0, sizeof(*env));
        env->cpu_ops = &rnnd_cpu_backend;
        env->backend_cpu = backend_cpu;
        env->backend_from = backend_from;
        env->cpu_threads = cpu_threads;
#if RNND_HAVE_CUDA
        {
                struct rnnd_cudnn_info info;

                rnnd_cudnn_info(&info);
                env->gpu_ops = &rnnd_cudnn_backend;
                env->device_count = info.device_count;
                snprintf(env->why_no_gpu, sizeof(env->why_no_gpu), "%s", info.why_no_gpu);
        }
#endif
}

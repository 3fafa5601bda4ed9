/*
 * backends.h: what this build and this machine offer placement (DESIGN.md
 * §7): the one place that knows both the placement policy (placement.h) and
 * the backends, so that neither calls the other.
 */
#ifndef RNND_ENGINE_BACKENDS_H
#define RNND_ENGINE_BACKENDS_H

#include <stdbool.h>

#include "placement.h"

/*
 * Fills *env from this build and machine: the CPU ops, the cuDNN ops when
 * built, the visible GPUs and why there are none.  backend_from is borrowed
 * and must outlive env.  Initializes CUDA when built with it.  Thread-safe.
 */
void rnnd_backends_env(struct rnnd_placement_env *env, bool backend_cpu, const char *backend_from,
                       unsigned cpu_threads);

#endif

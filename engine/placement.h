/*
 * placement.h: where a model's instances run (DESIGN.md §7, placement auto).
 *
 * A pure decision: given a model's config, the backend setting and what the
 * machine has (passed in, so it is tested without a GPU), it lists the pool
 * instances (backend and device of each) and says why any is not on cuDNN.
 *
 * Rules, per instance group of the config:
 *   - kind cpu: count CPU instances;
 *   - kind auto or gpu: when cuDNN is usable for the model (built in, not
 *     switched off by backend = cpu, a GPU visible, the model qualifies:
 *     gpu_ops->qualifies()), count instances on each GPU of the
 *     group's gpus (every visible GPU when none is listed), 2 per GPU when the
 *     group gives no count, so that one worker's copy-in overlaps the other's
 *     compute; otherwise count CPU instances, and the reason is kept.
 * A group's GPU ordinals past the visible ones are left out; a group left
 * with none runs on the CPU, with a reason.
 */
#ifndef RNND_ENGINE_PLACEMENT_H
#define RNND_ENGINE_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>

#include "backend.h"
#include "error.h"
#include "modelcfg.h"
#include "pool.h"

/* Instances per GPU when a group gives no count. */
#define RNND_PLACEMENT_PER_GPU_DEFAULT 2u

/* What placement depends on besides the model. */
struct rnnd_placement_env {
        const struct rnnd_backend_ops *cpu_ops; /* &rnnd_cpu_backend */
        const struct rnnd_backend_ops *gpu_ops; /* the cuDNN backend, NULL when not built */
        bool backend_cpu;                       /* backend = cpu: cuDNN switched off */
        const char *backend_from;               /* where that was set ("rnnd.conf", ...) */
        int device_count;                       /* visible GPUs */
        char why_no_gpu[128];                   /* when device_count is 0 */
        unsigned cpu_threads;                   /* threads of each CPU instance */
};

struct rnnd_placement {
        struct rnnd_pool_instance *inst; /* [n], owned (rnnd_placement_done) */
        unsigned n;                      /* instances, >= 1 */
        unsigned n_gpu;                  /* of which on cuDNN */
        /* Group g's instances are inst[group_end[g - 1] .. group_end[g]), from 0 for g = 0. */
        unsigned group_end[RNND_CFG_MAX_INSTANCE_GROUPS];
        unsigned n_groups;
        char why_not_cudnn[256]; /* "" when every instance is on cuDNN */
};

/*
 * Decides the instances of model config cfg under env (rules above) into
 * *ret, whose inst is new (free it with rnnd_placement_done()).  Errors:
 * RNND_ENOMEM.  Never writes *ret on failure.  Pure; thread-safe.
 */
int rnnd_placement_resolve(const struct rnnd_model_config *cfg,
                           const struct rnnd_placement_env *env, struct rnnd_placement *ret,
                           rnnd_error_t *reterr);

/* Frees what rnnd_placement_resolve() allocated; accepts a zeroed struct. */
void rnnd_placement_done(struct rnnd_placement *p);

#endif

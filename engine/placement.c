/*
 * placement.c: the placement decision of placement.h.  Pure: what the
 * machine has and which models a backend takes come in through the env
 * (engine/backends.c fills it), so the policy never reaches into a backend.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "placement.h"

/* Why cuDNN cannot be used for this model at all, or "" when it can. */
static bool cudnn_usable(const struct rnnd_model_config *cfg, const struct rnnd_placement_env *env,
                         char *why, size_t cap)
{
        if (env->backend_cpu) {
                snprintf(why, cap, "backend = cpu (set by %s)",
                         env->backend_from != NULL ? env->backend_from : "the configuration");
                return false;
        }
        if (env->gpu_ops == NULL) {
                snprintf(why, cap, "the cuDNN backend is not built in (rnnd --backends)");
                return false;
        }
        if (env->device_count <= 0) {
                snprintf(why, cap, "no GPU: %s",
                         env->why_no_gpu[0] != '\0' ? env->why_no_gpu : "none is visible");
                return false;
        }
        if (env->gpu_ops->qualifies != NULL && !env->gpu_ops->qualifies(cfg, why, cap))
                return false;
        if (cap > 0)
                why[0] = '\0';
        return true;
}

/* The visible GPUs group g runs on, into gpus; returns how many. */
static unsigned group_gpus(const struct rnnd_instance_group *g, int device_count, uint32_t *gpus)
{
        unsigned n = 0;

        if (g->n_gpus == 0) {
                for (int d = 0; d < device_count && n < RNND_CFG_MAX_GPUS; d++)
                        gpus[n++] = (uint32_t)d;
                return n;
        }
        for (uint32_t i = 0; i < g->n_gpus; i++)
                if (g->gpus[i] < (uint32_t)device_count)
                        gpus[n++] = g->gpus[i];
        return n;
}

/* The first reason wins: it names what the operator should look at first. */
static void note(struct rnnd_placement *p, const char *why)
{
        if (p->why_not_cudnn[0] == '\0')
                snprintf(p->why_not_cudnn, sizeof(p->why_not_cudnn), "%s", why);
}

int rnnd_placement_resolve(const struct rnnd_model_config *cfg,
                           const struct rnnd_placement_env *env, struct rnnd_placement *ret,
                           rnnd_error_t *reterr)
{
        struct rnnd_placement p = {0};
        uint32_t gpus[RNND_CFG_MAX_INSTANCE_GROUPS][RNND_CFG_MAX_GPUS];
        unsigned n_gpus[RNND_CFG_MAX_INSTANCE_GROUPS] = {0};
        const uint32_t n_groups = cfg->n_instances > 0 ? cfg->n_instances : 1;
        static const struct rnnd_instance_group auto_group = {.kind = RNND_INST_AUTO, .count = 1};
        char why[256] = "";
        bool usable = cudnn_usable(cfg, env, why, sizeof(why));
        size_t total = 0, at = 0;

        /* First pass: what each group becomes, and how many instances in all. */
        for (uint32_t gi = 0; gi < n_groups; gi++) {
                const struct rnnd_instance_group *g =
                        cfg->n_instances > 0 ? &cfg->instances[gi] : &auto_group;
                const uint32_t count = g->count > 0 ? g->count : 1;

                if (g->kind == RNND_INST_CPU) {
                        char w[64];

                        snprintf(w, sizeof(w), "instance group %u is kind cpu", gi);
                        note(&p, w);
                } else if (!usable) {
                        note(&p, why);
                } else {
                        n_gpus[gi] = group_gpus(g, env->device_count, gpus[gi]);
                        if (n_gpus[gi] == 0) {
                                char w[128];

                                snprintf(w, sizeof(w),
                                         "instance group %u lists no visible GPU (%d visible)", gi,
                                         env->device_count);
                                note(&p, w);
                        }
                }
                if (n_gpus[gi] > 0)
                        total += (size_t)n_gpus[gi] *
                                 (g->count_set ? count : RNND_PLACEMENT_PER_GPU_DEFAULT);
                else
                        total += count;
        }
        p.inst = rnnd_mallocarray(total, sizeof(*p.inst));
        if (p.inst == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for %zu instances",
                                      total);
        for (uint32_t gi = 0; gi < n_groups; gi++) {
                const struct rnnd_instance_group *g =
                        cfg->n_instances > 0 ? &cfg->instances[gi] : &auto_group;
                const uint32_t count = g->count > 0 ? g->count : 1;
                const uint32_t per_gpu = g->count_set ? count : RNND_PLACEMENT_PER_GPU_DEFAULT;

                for (unsigned k = 0; k < n_gpus[gi]; k++)
                        for (uint32_t c = 0; c < per_gpu; c++)
                                p.inst[at++] = (struct rnnd_pool_instance){
                                        .ops = env->gpu_ops,
                                        .opts = {.device = (int)gpus[gi][k], .threads = 0},
                                };
                for (uint32_t c = 0; n_gpus[gi] == 0 && c < count; c++)
                        p.inst[at++] = (struct rnnd_pool_instance){
                                .ops = env->cpu_ops,
                                .opts = {.device = -1, .threads = env->cpu_threads},
                        };
                p.group_end[gi] = (unsigned)at;
        }
        p.n_groups = n_groups;
        p.n = (unsigned)at;
        for (unsigned i = 0; i < p.n; i++)
                p.n_gpu += p.inst[i].opts.device >= 0;
        *ret = p;
        return 0;
}

void rnnd_placement_done(struct rnnd_placement *p)
{
        rnnd_free(p->inst);
        p->inst = NULL;
        p->n = p->n_gpu = 0;
}

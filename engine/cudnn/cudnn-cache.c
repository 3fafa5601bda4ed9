/*
 * cudnn-cache.c: what the plans of one model on one GPU share (cudnn-int.h),
 * built by the first plan there and taken by the others.
 */
#include <pthread.h>
#include <stdbool.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "alloc.h"
#include "backend.h"
#include "cudnn/cudnn-int.h"

/*
 * What the plans of one model on one GPU share: the immutable weights (the
 * fp32 copy that the embedding and head read, the fp16 head, the RNN
 * descriptors with their weight spaces) and the algorithm choice.  The
 * first plan to open there builds them and times the algorithms; the others
 * take them, so the weights are on each GPU once and the timing is done
 * once per model and GPU.  Builds on one GPU take turns (probe_mu), so that
 * no timing runs beside another plan's probe.  An entry lives while a plan
 * holds it (refs); each plan holds its model, so the model pointer names
 * one model.
 */
struct shared {
        const rnnd_model_t *m; /* immutable */
        int device;            /* immutable */
        unsigned refs;         /* guarded by shared_mu */
        cudnnDropoutDescriptor_t dropout;
        struct rnn std, fast; /* fast.desc NULL: no persistent algorithm won */
        float *d_w;
        void *d_head_w16;
        struct shared *next; /* guarded by shared_mu */
};

static pthread_mutex_t probe_mu[RNND__CUDNN_GPUS] = {[0 ... RNND__CUDNN_GPUS - 1] =
                                                             PTHREAD_MUTEX_INITIALIZER};
static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shared *shareds; /* guarded by shared_mu */

static struct shared *shared_find(const rnnd_model_t *m, int device)
{
        struct shared *sh;

        pthread_mutex_lock(&shared_mu);
        for (sh = shareds; sh != NULL && (sh->m != m || sh->device != device); sh = sh->next)
                ;
        if (sh != NULL)
                sh->refs++;
        pthread_mutex_unlock(&shared_mu);
        return sh;
}

/* Frees what a plan built and did not hand over, or what the last plan left. */
void rnnd__cudnn_weights_free(cudnnDropoutDescriptor_t dropout, struct rnn *std, struct rnn *fast,
                              float *d_w, void *d_head_w16)
{
        rnnd__cudnn_rnn_free(std);
        rnnd__cudnn_rnn_free(fast);
        if (dropout != NULL)
                cudnnDestroyDropoutDescriptor(dropout);
        if (d_w != NULL)
                cudaFree(d_w);
        if (d_head_w16 != NULL)
                cudaFree(d_head_w16);
}

/* Drops a reference; the last frees the weights (its GPU is the current device). */
void rnnd__cudnn_shared_drop(struct shared *sh)
{
        struct shared **at;
        bool last;

        if (sh == NULL)
                return;
        pthread_mutex_lock(&shared_mu);
        last = --sh->refs == 0;
        if (last) {
                for (at = &shareds; *at != sh; at = &(*at)->next)
                        ;
                *at = sh->next;
        }
        pthread_mutex_unlock(&shared_mu);
        if (last) {
                rnnd__cudnn_weights_free(sh->dropout, &sh->std, &sh->fast, sh->d_w, sh->d_head_w16);
                rnnd_free(sh);
        }
}

/* The plan's own build of what plans share: weights, STANDARD, the probe. */
static int weights_build(struct plan *p, rnnd_error_t *reterr)
{
        int r = 0;

        /* No dropout: what PyTorch passes for inference (p = 0, no states). */
        GPU_CK(cudnnCreateDropoutDescriptor(&p->dropout));
        GPU_CK(cudnnSetDropoutDescriptor(p->dropout, p->handle, 0.0f, NULL, 0, 0));
        r = rnnd__cudnn_upload_weights(p, reterr);
        if (r == 0)
                r = rnnd__cudnn_rnn_init(p, &p->std, CUDNN_RNN_ALGO_STANDARD, reterr);
        if (r == 0)
                r = rnnd__cudnn_probe_algos(p, reterr);
out:
        return r;
}

/*
 * Takes the weights and algorithm of p's model on p's GPU (p->sh), building
 * them first when no plan has; then sizes p's own workspace for them.
 */
int rnnd__cudnn_shared_take(struct plan *p, rnnd_error_t *reterr)
{
        pthread_mutex_t *mu = &probe_mu[p->device % RNND__CUDNN_GPUS];
        struct shared *sh;
        int r = 0;

        pthread_mutex_lock(mu);
        sh = shared_find(p->m, p->device);
        if (sh == NULL) {
                r = weights_build(p, reterr);
                sh = r == 0 ? rnnd_calloc(1, sizeof(*sh)) : NULL;
                if (r == 0 && sh == NULL)
                        r = rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
                if (sh != NULL) {
                        *sh = (struct shared){.m = p->m,
                                              .device = p->device,
                                              .refs = 1,
                                              .dropout = p->dropout,
                                              .std = p->std,
                                              .fast = p->fast,
                                              .d_w = p->d_w,
                                              .d_head_w16 = p->d_head_w16};
                        pthread_mutex_lock(&shared_mu);
                        sh->next = shareds;
                        shareds = sh;
                        pthread_mutex_unlock(&shared_mu);
                }
        }
        pthread_mutex_unlock(mu);
        if (sh == NULL)
                return r; /* the plan frees its partial build */
        p->sh = sh;
        p->dropout = NULL;
        p->std = sh->std;
        p->fast = sh->fast;
        p->d_w = sh->d_w;
        p->d_head_w16 = sh->d_head_w16;
        r = rnnd__cudnn_size_workspace(p, &p->std, reterr);
        if (r == 0 && p->fast.desc != NULL)
                r = rnnd__cudnn_size_workspace(p, &p->fast, reterr);
        return r;
}

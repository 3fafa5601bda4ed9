/*
 * cudnn-probe.c: choosing the algorithm (cudnn-int.h): STANDARD runs every
 * batch; a persistent algorithm may run equal-length batches when, timed on
 * the largest such batch at open, it beats STANDARD by PROBE_GAIN and agrees
 * with it.  Timing runs once per model and GPU (cudnn-cache.c).
 */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include "alloc.h"
#include "backend.h"
#include "cudnn/cudnn-int.h"

/* Timed forward calls per algorithm at open, after one untimed call. */
#define PROBE_RUNS 5
/* A persistent algorithm is kept when at least this much faster than STANDARD. */
#define PROBE_GAIN 0.9

/* Max abs difference between two fp32 arrays, relative to 1 + |b|. */
static double max_rel_diff(const float *a, const float *b, size_t n)
{
        double worst = 0;

        for (size_t i = 0; i < n; i++) {
                double d = fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i]));

                worst = d > worst || isnan(d) ? (isnan(d) ? INFINITY : d) : worst;
        }
        return worst;
}

/*
 * Runs rn on the probe batch (shapes already set): once untimed, then
 * PROBE_RUNS times between two events; y ends in out (fp32, rows x DP).
 */
static int probe_run(struct plan *p, struct rnn *rn, const int32_t *d_lens, size_t rows, float *out,
                     rnnd_error_t *reterr)
{
        const uint32_t DP = p->m->dirs * p->m->out_size;
        cudaEvent_t e0 = NULL, e1 = NULL;
        float ms = 0;
        int r = 0;

        r = rnnd__cudnn_forward(p, rn, d_lens, NULL, NULL, reterr);
        if (r < 0)
                return r;
        GPU_CK(rnnd__cuda_gather(p->d_y, p->dt, NULL, (uint32_t)rows, DP, p->d_out, RNND__F32,
                                 p->stream));
        GPU_CK(cudaMemcpyAsync(out, p->d_out, rows * DP * sizeof(float), cudaMemcpyDeviceToHost,
                               p->stream));
        GPU_CK(cudaEventCreate(&e0));
        GPU_CK(cudaEventCreate(&e1));
        GPU_CK(cudaEventRecord(e0, p->stream));
        for (int i = 0; i < PROBE_RUNS && r == 0; i++)
                r = rnnd__cudnn_forward(p, rn, d_lens, NULL, NULL, reterr);
        if (r < 0)
                goto out;
        GPU_CK(cudaEventRecord(e1, p->stream));
        GPU_CK(cudaEventSynchronize(e1));
        GPU_CK(cudaEventElapsedTime(&ms, e0, e1));
        rn->ms = ms / PROBE_RUNS;
out:
        if (e0 != NULL)
                cudaEventDestroy(e0);
        if (e1 != NULL)
                cudaEventDestroy(e1);
        return r;
}

/*
 * The persistent algorithms the model may use, fastest first to try.  None
 * supports a projection or half math, all need compute capability 6.0 and
 * DOUBLE_BIAS (which every plan uses), and run equal lengths only (run()
 * uses them for those alone); SMALL_H has hidden-size guards.
 */
static unsigned persist_candidates(const struct plan *p, cudnnRNNAlgo_t *out)
{
        const struct rnnd_model_config *cfg = &p->m->cfg;
        const bool rnn = cfg->cell == RNND_CELL_RNN_TANH || cfg->cell == RNND_CELL_RNN_RELU;
        unsigned n = 0;

        /* Nor half math: fp16 data runs on tensor ops, which they do not take. */
        if (cfg->proj_size != 0 || p->cc < 60 || p->half)
                return 0;
        if (cfg->hidden_size <= (rnn ? 384u : 192u))
                out[n++] = CUDNN_RNN_ALGO_PERSIST_STATIC_SMALL_H;
        out[n++] = CUDNN_RNN_ALGO_PERSIST_STATIC;
        out[n++] = CUDNN_RNN_ALGO_PERSIST_DYNAMIC;
        return n;
}

/*
 * Creates rn with persistent algorithm algo; PERSIST_DYNAMIC is built for
 * batches of n sequences (cudnnBuildRNNDynamic, which compiles per batch
 * size), so run() uses it for those only.
 */
static int fast_init(struct plan *p, struct rnn *rn, cudnnRNNAlgo_t algo, int n,
                     rnnd_error_t *reterr)
{
        int r = rnnd__cudnn_rnn_init(p, rn, algo, reterr);

        if (r == 0 && algo == CUDNN_RNN_ALGO_PERSIST_DYNAMIC) {
                r = rnnd__cudnn_check_cudnn(p, cudnnBuildRNNDynamic(p->handle, rn->desc, n),
                                            "cudnnBuildRNNDynamic", reterr);
                rn->dyn_batch = n;
                if (r == 0)
                        r = rnnd__cudnn_size_workspace(p, rn, reterr);
        }
        if (r < 0)
                rnnd__cudnn_rnn_free(rn);
        return r;
}

/*
 * Times STANDARD and each persistent candidate on an equal-length batch of
 * the largest size, and keeps the fastest candidate in p->fast when it beats
 * STANDARD by PROBE_GAIN and agrees with it (PERSIST_DYNAMIC thus only when
 * it pays, at the one batch size it is built for).  A candidate cuDNN
 * refuses is skipped; only a lost device fails the open.
 */
static atomic_uint probes, probing[RNND__CUDNN_GPUS], probing_most;

void rnnd__cudnn_probe_stats(unsigned *n, unsigned *most_at_once)
{
        *n = atomic_load(&probes);
        *most_at_once = atomic_load(&probing_most);
}

static int probe_algos_timed(struct plan *p, rnnd_error_t *reterr);

/* probe_algos_timed, counted for the test hook. */
int rnnd__cudnn_probe_algos(struct plan *p, rnnd_error_t *reterr)
{
        atomic_uint *now = &probing[p->device % RNND__CUDNN_GPUS];
        unsigned at_once = atomic_fetch_add(now, 1) + 1, most = atomic_load(&probing_most);
        int r;

        while (at_once > most && !atomic_compare_exchange_weak(&probing_most, &most, at_once))
                ;
        atomic_fetch_add(&probes, 1);
        r = probe_algos_timed(p, reterr);
        atomic_fetch_sub(now, 1);
        return r;
}

static int probe_algos_timed(struct plan *p, rnnd_error_t *reterr)
{
        const rnnd_model_t *m = p->m;
        const uint32_t in = m->cfg.input_size, DP = m->dirs * m->out_size;
        cudnnRNNAlgo_t cand[3];
        unsigned nc = persist_candidates(p, cand);
        uint32_t n = p->max_n, T;
        int32_t *lens = p->h_in, *d_lens = p->d_in;
        float *x, *ref = NULL, *got = NULL;
        size_t rows;
        unsigned seed = 12345;
        int r = 0;

        if (nc == 0)
                return 0;
        T = (uint32_t)(p->max_rows / n);
        if (T == 0) {
                n = (uint32_t)p->max_rows;
                T = 1;
        }
        T = T < PROBE_STEPS ? T : PROBE_STEPS;
        T = T < m->cfg.max_sequence_length ? T : m->cfg.max_sequence_length;
        rows = (size_t)n * T;
        /* The probe input, uniform in [-1, 1), after the lengths in the input region. */
        x = (float *)p->h_in + ((n + 15) & ~15u);
        for (uint32_t i = 0; i < n; i++)
                lens[i] = (int32_t)T;
        for (size_t i = 0; i < rows * in; i++) {
                seed = seed * 1103515245u + 12345u;
                x[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
        }
        ref = rnnd_mallocarray(rows * DP, sizeof(float));
        got = rnnd_mallocarray(rows * DP, sizeof(float));
        if (ref == NULL || got == NULL) {
                r = rnnd_error_set(reterr, RNND_ENOMEM, "out of memory probing algorithms");
                goto out;
        }
        GPU_CK(cudaMemcpyAsync(p->d_in, p->h_in, (((n + 15) & ~15u) + rows * in) * 4,
                               cudaMemcpyHostToDevice, p->stream));
        GPU_CK(rnnd__cuda_gather((const float *)p->d_in + ((n + 15) & ~15u), RNND__F32, NULL,
                                 (uint32_t)rows, in, p->d_x, p->dt, p->stream));
        r = rnnd__cudnn_set_shapes(p, n, T, lens, reterr);
        if (r == 0)
                r = probe_run(p, &p->std, d_lens, rows, ref, reterr);
        if (r < 0)
                goto out;
        p->std_ms = p->std.ms;
        for (unsigned i = 0; i < nc; i++) {
                struct rnn c;
                rnnd_error_t ignored;
                int rc = fast_init(p, &c, cand[i], (int)n, &ignored);

                if (rc == 0)
                        rc = probe_run(p, &c, d_lens, rows, got, &ignored);
                if (rc == 0 && max_rel_diff(got, ref, rows * DP) > (p->half ? 1e-2 : 1e-4))
                        rc = RNND_EGPU; /* disagrees with STANDARD: not used */
                if (rc == 0 && c.ms < PROBE_GAIN * p->std_ms &&
                    (p->fast.desc == NULL || c.ms < p->fast.ms)) {
                        rnnd__cudnn_rnn_free(&p->fast);
                        p->fast = c;
                } else {
                        rnnd__cudnn_rnn_free(&c);
                }
                if (p->lost) {
                        r = rnnd_error_set(reterr, RNND_EDEVLOST, "GPU %d: %s", p->device,
                                           p->lost_msg);
                        goto out;
                }
        }
out:
        rnnd_free(ref);
        rnnd_free(got);
        return r;
}

/*
 * engine_bench.c: rnnd-engine-bench, the CPU engine's throughput on one
 * model and one batch shape (DESIGN.md §9).
 *
 *   rnnd-engine-bench --model DIR --batch B --steps T --threads N
 *                     [--seconds S] [--version V] [--input FILE] [--dump FILE]
 *                     [--json] [--backend cpu|cudnn] [--device N]
 *
 * It loads <DIR>/config.json and <DIR>/<V>/<weights file> as the daemon
 * would, builds B sequences of length T with deterministic pseudo-random
 * inputs (or reads them from FILE, raw float32 [B, T, input_size]), gives
 * every sequence its own output buffers (y, h_n, c_n for an LSTM, scores with
 * a head) as a request would, and runs the batch through rnnd_cpu_backend
 * (or, with --backend cudnn, the cuDNN backend on GPU --device, 0 by default):
 * at least WARMUP_RUNS untimed runs, then timed runs until at least S seconds
 * (2 by default) and MIN_RUNS runs have passed.  It reports the median time
 * per batch, sequences/s (B / median) and steps/s (B x T / median), as text
 * or as one JSON line.  With --backend cudnn it also reports what opening
 * costs (open_costs): the first plan's time (weights, workspace, the
 * algorithm timing) and the GPU memory it took, then a second plan's of the
 * same model on the same GPU, which shares the weights and the choice, as the
 * daemon's second instance does.  --dump writes every sequence's y after the first run,
 * raw float32 [B, T, dirs x H'], so a script can check the answer against a
 * framework before trusting the timings (tests/bench/engine_vs_torch.py).
 *
 * Errors print the rnnd error message to stderr and exit 1.  Not a test: it
 * is built by default and run by `make bench`.
 */
#include <cblas.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "backend.h"
#include "error.h"
#include "model.h"
#include "repository.h"
#include "rnnd-config.h"
#if RNND_HAVE_CUDA
#include "cudnn/cudnn.h"
#endif

#define WARMUP_RUNS 3u
#define MIN_RUNS    5u

struct args {
        const char *model;                  /* model directory */
        const char *input;                  /* raw float32 [B, T, input_size], or NULL */
        const char *dump;                   /* where to write y, or NULL */
        uint32_t batch;                     /* B */
        uint32_t steps;                     /* T, the longest */
        uint32_t min_steps;                 /* the shortest: lengths spread to T; T when 0 */
        unsigned threads;                   /* BLAS threads */
        const struct rnnd_backend_ops *ops; /* rnnd_cpu_backend unless --backend */
        int device;                         /* --device, for cudnn */
        uint64_t version;                   /* 1 */
        double seconds;                     /* minimum timed seconds; 2 */
        bool json;                          /* one JSON line instead of text */
};

/* What opening the model cost (--backend cudnn only; zero otherwise). */
struct open_costs {
        bool measured;
        double first_s, second_s;         /* open() of the first and of a second plan */
        size_t first_bytes, second_bytes; /* GPU memory each took (cudaMemGetInfo) */
};

/* The buffers of one batch: every sequence owns its own, as a request does. */
struct bench {
        struct rnnd_seq *seqs; /* [B] */
        struct rnnd_batch batch;
        size_t y_len; /* floats per sequence: T x dirs x H' */
};

static const char usage[] =
        "usage: rnnd-engine-bench --model DIR --batch B --steps T --threads N\n"
        "                         [--seconds S] [--version V] [--input FILE] [--dump FILE]\n"
        "                         [--json] [--backend cpu|cudnn] [--device N]\n"
        "                         [--min-steps M]   (ragged: lengths spread evenly from M to T)\n";

static int fail(const char *what, const rnnd_error_t *err)
{
        fprintf(stderr, "rnnd-engine-bench: %s: %s (%s)\n", what, err->msg,
                rnnd_strerror_name(err->code));
        return 1;
}

static bool parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *ret)
{
        char *end;
        unsigned long long v;

        if (s == NULL || *s < '0' || *s > '9')
                return false;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || *end != '\0' || v < min || v > max)
                return false;
        *ret = v;
        return true;
}

static int parse_args(int argc, char **argv, struct args *a, rnnd_error_t *reterr)
{
        bool have_threads = false;
        uint64_t v;

        *a = (struct args){.version = 1, .seconds = 2.0, .ops = &rnnd_cpu_backend};

        for (int i = 1; i < argc; i++) {
                const char *o = argv[i];
                const char *val = i + 1 < argc ? argv[i + 1] : NULL;

                if (strcmp(o, "--json") == 0) {
                        a->json = true;
                        continue;
                }
                if (strcmp(o, "--help") == 0 || strcmp(o, "-h") == 0) {
                        fputs(usage, stdout);
                        exit(0);
                }
                if (val == NULL)
                        return rnnd_error_set(reterr, RNND_EINVAL, "%s needs a value", o);
                i++;
                if (strcmp(o, "--model") == 0) {
                        a->model = val;
                } else if (strcmp(o, "--input") == 0) {
                        a->input = val;
                } else if (strcmp(o, "--dump") == 0) {
                        a->dump = val;
                } else if (strcmp(o, "--batch") == 0) {
                        if (!parse_u64(val, 1, RNND_CFG_MAX_BATCH, &v))
                                return rnnd_error_set(reterr, RNND_EINVAL,
                                                      "--batch '%s' is not in 1..%u", val,
                                                      RNND_CFG_MAX_BATCH);
                        a->batch = (uint32_t)v;
                } else if (strcmp(o, "--steps") == 0) {
                        if (!parse_u64(val, 1, RNND_CFG_MAX_SEQ_LEN, &v))
                                return rnnd_error_set(reterr, RNND_EINVAL,
                                                      "--steps '%s' is not in 1..%u", val,
                                                      RNND_CFG_MAX_SEQ_LEN);
                        a->steps = (uint32_t)v;
                } else if (strcmp(o, "--min-steps") == 0) {
                        if (!parse_u64(val, 1, RNND_CFG_MAX_SEQ_LEN, &v))
                                return rnnd_error_set(reterr, RNND_EINVAL,
                                                      "--min-steps '%s' is not in 1..%u", val,
                                                      RNND_CFG_MAX_SEQ_LEN);
                        a->min_steps = (uint32_t)v;
                } else if (strcmp(o, "--threads") == 0) {
                        if (!parse_u64(val, 1, 1024, &v))
                                return rnnd_error_set(reterr, RNND_EINVAL,
                                                      "--threads '%s' is not in 1..1024", val);
                        a->threads = (unsigned)v;
                        have_threads = true;
                } else if (strcmp(o, "--backend") == 0) {
                        if (strcmp(val, "cpu") == 0) {
                                a->ops = &rnnd_cpu_backend;
                        } else if (strcmp(val, "cudnn") == 0) {
#if RNND_HAVE_CUDA
                                a->ops = &rnnd_cudnn_backend;
#else
                                return rnnd_error_set(reterr, RNND_EUNSUPPORTED,
                                                      "--backend cudnn: not built in");
#endif
                        } else {
                                return rnnd_error_set(reterr, RNND_EINVAL,
                                                      "--backend '%s' is not cpu or cudnn", val);
                        }
                } else if (strcmp(o, "--device") == 0) {
                        if (!parse_u64(val, 0, 255, &v))
                                return rnnd_error_set(reterr, RNND_EINVAL,
                                                      "--device '%s' is not in 0..255", val);
                        a->device = (int)v;
                } else if (strcmp(o, "--version") == 0) {
                        if (!parse_u64(val, 1, UINT64_MAX, &v))
                                return rnnd_error_set(reterr, RNND_EINVAL,
                                                      "--version '%s' is not a positive integer",
                                                      val);
                        a->version = v;
                } else if (strcmp(o, "--seconds") == 0) {
                        char *end;

                        errno = 0;
                        a->seconds = strtod(val, &end);
                        if (errno != 0 || *end != '\0' || end == val || !(a->seconds >= 0.0) ||
                            a->seconds > 86400.0)
                                return rnnd_error_set(reterr, RNND_EINVAL,
                                                      "--seconds '%s' is not in 0..86400", val);
                } else {
                        return rnnd_error_set(reterr, RNND_EINVAL, "unknown option '%s'", o);
                }
        }
        if (a->model == NULL || a->batch == 0 || a->steps == 0 || !have_threads)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "--model, --batch, --steps and --threads are required");
        return 0;
}

/* The model's name: the last component of its directory, as the repository names it. */
static const char *model_name(const char *dir, char *buf, size_t size)
{
        size_t n = strlen(dir);
        const char *s;

        while (n > 1 && dir[n - 1] == '/')
                n--;
        s = dir + n;
        while (s > dir && s[-1] != '/')
                s--;
        snprintf(buf, size, "%.*s", (int)(dir + n - s), s);
        return buf;
}

/* splitmix64: a deterministic stream, so every run sees the same inputs. */
static uint64_t next_u64(uint64_t *s)
{
        uint64_t z = (*s += UINT64_C(0x9e3779b97f4a7c15));

        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float next_float(uint64_t *s)
{
        return (float)(next_u64(s) >> 40) / (float)(1u << 23) - 1.0f;
}

/* Reads exactly n floats from path into dst. */
static int read_input(const char *path, float *dst, size_t n, rnnd_error_t *reterr)
{
        FILE *f = fopen(path, "rb");
        size_t got;
        int extra;

        if (f == NULL)
                return rnnd_error_set(reterr, RNND_EIO, "%s: %s", path, strerror(errno));
        got = fread(dst, sizeof(float), n, f);
        extra = fgetc(f);
        fclose(f);
        if (got != n || extra != EOF)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "%s: expected exactly %zu float32 values (B x T x input)",
                                      path, n);
        return 0;
}

static int write_dump(const char *path, const struct bench *b, rnnd_error_t *reterr)
{
        FILE *f = fopen(path, "wb");
        bool ok = f != NULL;

        for (uint32_t i = 0; ok && i < b->batch.n; i++)
                ok = fwrite(b->seqs[i].y, sizeof(float), b->y_len, f) == b->y_len;
        if (f != NULL && fclose(f) != 0)
                ok = false;
        if (!ok)
                return rnnd_error_set(reterr, RNND_EIO, "%s: cannot write: %s", path,
                                      strerror(errno));
        return 0;
}

/* Sequence i's length: a->steps, or spread evenly from a->min_steps up to it. */
static uint32_t seq_len(const struct args *a, uint32_t i)
{
        if (a->min_steps == 0 || a->min_steps >= a->steps || a->batch == 1)
                return a->steps;
        return a->min_steps + (uint32_t)((uint64_t)(a->steps - a->min_steps) * i / (a->batch - 1));
}

/* The steps one batch runs: the sum of its lengths. */
static uint64_t batch_steps(const struct args *a)
{
        uint64_t n = 0;

        for (uint32_t i = 0; i < a->batch; i++)
                n += seq_len(a, i);
        return n;
}

/*
 * Builds the batch: B sequences of a->steps steps, each with its own input
 * (or tokens) and output buffers.  Checks the shape against the model's
 * batching limits, which run() assumes were enforced by its caller.
 */
static int bench_init(struct bench *b, const rnnd_model_t *m, const struct args *a,
                      rnnd_error_t *reterr)
{
        const struct rnnd_model_config *cfg = &m->cfg;
        const uint32_t B = a->batch, T = a->steps, in = cfg->input_size;
        const size_t units = cfg->head.present ? cfg->head.units : 0;
        size_t h_floats, c_floats; /* a sequence's state: every block's of a chain */
        const size_t scores_len = cfg->head.apply == RNND_HEAD_ALL ? (size_t)T * units : units;
        float *all_x = NULL;
        uint64_t seed = UINT64_C(0x726e6e64); /* "rnnd" */
        int r = 0;

        memset(b, 0, sizeof(*b));
        rnnd_modelcfg_state_size(cfg, &h_floats, &c_floats);
        if (B > cfg->batching.max_batch_size)
                return rnnd_error_set(reterr, RNND_ELIMIT, "batch %u > max_batch_size %u", B,
                                      cfg->batching.max_batch_size);
        if (T > cfg->max_sequence_length)
                return rnnd_error_set(reterr, RNND_ELIMIT, "steps %u > max_sequence_length %u", T,
                                      cfg->max_sequence_length);
        if ((uint64_t)B * T > cfg->batching.max_batch_steps)
                return rnnd_error_set(reterr, RNND_ELIMIT,
                                      "batch x steps %llu > max_batch_steps %llu",
                                      (unsigned long long)B * T,
                                      (unsigned long long)cfg->batching.max_batch_steps);
        if (a->input != NULL && cfg->embedding.present)
                return rnnd_error_set(reterr, RNND_EUNSUPPORTED,
                                      "--input gives float inputs, but the model takes tokens");

        b->seqs = rnnd_calloc(B, sizeof(*b->seqs));
        if (b->seqs == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
        b->batch.seqs = b->seqs;
        b->batch.n = B;
        b->y_len = (size_t)T * m->dirs * m->out_size;
        if (a->input != NULL) {
                all_x = rnnd_mallocarray((size_t)B * T * in, sizeof(float));
                if (all_x == NULL) {
                        r = rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for the input");
                        goto out;
                }
                r = read_input(a->input, all_x, (size_t)B * T * in, reterr);
                if (r < 0)
                        goto out;
        }
        for (uint32_t i = 0; i < B; i++) {
                struct rnnd_seq *q = &b->seqs[i];

                q->len = seq_len(a, i);
                if (cfg->embedding.present) {
                        int64_t *tok = rnnd_mallocarray(T, sizeof(*tok));

                        if (tok == NULL)
                                goto oom;
                        for (uint32_t t = 0; t < T; t++)
                                tok[t] = (int64_t)(next_u64(&seed) % cfg->embedding.num_embeddings);
                        q->tokens = tok;
                } else {
                        float *x = rnnd_mallocarray((size_t)T * in, sizeof(*x));

                        if (x == NULL)
                                goto oom;
                        if (all_x != NULL)
                                memcpy(x, all_x + (size_t)i * T * in, (size_t)T * in * sizeof(*x));
                        else
                                for (size_t k = 0; k < (size_t)T * in; k++)
                                        x[k] = next_float(&seed);
                        q->x = x;
                }
                q->y = rnnd_mallocarray(b->y_len, sizeof(float));
                q->h_n = rnnd_mallocarray(h_floats, sizeof(float));
                if (q->y == NULL || q->h_n == NULL)
                        goto oom;
                if (c_floats > 0) {
                        q->c_n = rnnd_mallocarray(c_floats, sizeof(float));
                        if (q->c_n == NULL)
                                goto oom;
                }
                if (units > 0) {
                        q->scores = rnnd_mallocarray(scores_len, sizeof(float));
                        if (q->scores == NULL)
                                goto oom;
                }
        }
        goto out;
oom:
        r = rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for the batch buffers");
out:
        rnnd_free(all_x);
        return r;
}

static void bench_done(struct bench *b)
{
        for (uint32_t i = 0; b->seqs != NULL && i < b->batch.n; i++) {
                struct rnnd_seq *q = &b->seqs[i];

                rnnd_free((void *)q->x);
                rnnd_free((void *)q->tokens);
                rnnd_free(q->y);
                rnnd_free(q->h_n);
                rnnd_free(q->c_n);
                rnnd_free(q->scores);
        }
        rnnd_free(b->seqs);
        memset(b, 0, sizeof(*b));
}

static double now(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The CPU time of every thread of this process: what a run cost, however often it was preempted. */
static double cpu_now(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *pa, const void *pb)
{
        double a = *(const double *)pa, b = *(const double *)pb;

        return (a > b) - (a < b);
}

/* Writes s as a JSON string body (quotes excluded), escaping what JSON requires. */
static void json_str(const char *s)
{
        for (; *s != '\0'; s++) {
                unsigned char c = (unsigned char)*s;

                if (c == '"' || c == '\\')
                        printf("\\%c", c);
                else if (c < 0x20)
                        printf("\\u%04x", c);
                else
                        putchar(c);
        }
}

/* Free GPU memory on opts->device, or 0 where it cannot be read. */
static size_t gpu_free(const struct rnnd_instance_opts *opts)
{
#if RNND_HAVE_CUDA
        size_t free_b = 0, total_b = 0;
        rnnd_error_t err = {0};

        if (rnnd_cudnn_device_memory(opts->device, &free_b, &total_b, &err) == 0)
                return free_b;
#else
        (void)opts;
#endif
        return 0;
}

/*
 * Opens the plan the bench times.  On a GPU it first reads the free memory
 * (which makes the CUDA context, so that is not counted), then opens the
 * plan and a second one of the same model beside it, timing each and
 * reading what each took, and closes the second.
 */
static int open_measured(const struct args *a, rnnd_model_t *m,
                         const struct rnnd_instance_opts *opts, void **plan, struct open_costs *c,
                         rnnd_error_t *reterr)
{
        size_t free0, free1, free2;
        double t0, t1, t2;
        void *second = NULL;

        memset(c, 0, sizeof(*c));
        if (a->ops == &rnnd_cpu_backend)
                return a->ops->open(m, opts, plan, reterr);
        free0 = gpu_free(opts);
        t0 = now();
        if (a->ops->open(m, opts, plan, reterr) < 0)
                return -1;
        t1 = now();
        free1 = gpu_free(opts);
        t2 = now();
        if (a->ops->open(m, opts, &second, reterr) < 0)
                return -1;
        c->second_s = now() - t2;
        free2 = gpu_free(opts);
        a->ops->close(second);
        c->first_s = t1 - t0;
        c->first_bytes = free0 > free1 ? free0 - free1 : 0;
        c->second_bytes = free1 > free2 ? free1 - free2 : 0;
        c->measured = true;
        return 0;
}

/*
 * The median, fastest and mean of the timed runs; and the median CPU time of
 * a run (every thread's), which a busy machine's preemptions do not inflate.
 */
struct timing {
        double median, best, mean, median_cpu;
        size_t runs;
};

static double median_of(double *v, size_t n)
{
        qsort(v, n, sizeof(*v), cmp_double);
        return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

/*
 * Runs the batch WARMUP_RUNS times untimed (the first dumped when asked),
 * then timed until a->seconds and MIN_RUNS have passed.  0, or -1 with the
 * failure printed.
 */
/* Room for one more run's two timings in *wall and *cpu; false when out of memory. */
static bool grow_timings(double **wall, double **cpu, size_t n, size_t *cap)
{
        size_t want = *cap == 0 ? 64 : *cap * 2;
        double *w, *c;

        if (n < *cap)
                return true;
        w = rnnd_realloc(*wall, want * sizeof(**wall));
        if (w == NULL)
                return false;
        *wall = w;
        c = rnnd_realloc(*cpu, want * sizeof(**cpu));
        if (c == NULL)
                return false;
        *cpu = c;
        *cap = want;
        return true;
}

static int time_runs(const struct args *a, void *plan, struct bench *b, struct timing *t)
{
        double *times = NULL, *cpus = NULL, t_start, total = 0;
        size_t n = 0, cap = 0;
        rnnd_error_t err = {0};
        int r = -1;

        for (unsigned i = 0; i < WARMUP_RUNS; i++) {
                if (a->ops->run(plan, &b->batch, &err) < 0)
                        goto fail_run;
                if (i == 0 && a->dump != NULL && write_dump(a->dump, b, &err) < 0) {
                        fail("dump", &err);
                        goto out;
                }
        }
        t_start = now();
        while (n < MIN_RUNS || now() - t_start < a->seconds) {
                double t0, c0;

                if (!grow_timings(&times, &cpus, n, &cap)) {
                        rnnd_error_set(&err, RNND_ENOMEM, "out of memory for timings");
                        fail("timing", &err);
                        goto out;
                }
                c0 = cpu_now();
                t0 = now();
                if (a->ops->run(plan, &b->batch, &err) < 0)
                        goto fail_run;
                times[n] = now() - t0;
                cpus[n] = cpu_now() - c0;
                total += times[n++];
        }
        t->median_cpu = median_of(cpus, n);
        t->median = median_of(times, n);
        t->best = times[0];
        t->mean = total / n;
        t->runs = n;
        r = 0;
        goto out;
fail_run:
        fail("run", &err);
out:
        rnnd_free(times);
        rnnd_free(cpus);
        return r;
}

/* One JSON line of what was measured. */
static void report_json(const struct args *a, const char *name, const rnnd_model_t *m,
                        const struct rnnd_backend_desc *desc, const struct timing *t,
                        const struct open_costs *costs)
{
        const struct rnnd_model_config *cfg = &m->cfg;

        printf("{\"model\": \"");
        json_str(name);
        printf("\", \"cell\": \"%s\", \"input_size\": %u, \"hidden_size\": %u, "
               "\"num_layers\": %u, \"dirs\": %u, \"batch\": %u, \"steps\": %u, "
               "\"min_steps\": %u, "
               "\"threads\": %u, \"openblas_threads\": %d, \"runs\": %zu, "
               "\"median_s\": %.9f, \"min_s\": %.9f, \"mean_s\": %.9f, \"median_cpu_s\": %.9f, "
               "\"seq_per_s\": %.3f, \"steps_per_s\": %.1f, \"backend\": \"",
               rnnd_cell_name(cfg->cell), cfg->input_size, cfg->hidden_size, cfg->num_layers,
               m->dirs, a->batch, a->steps, seq_len(a, 0), a->threads, openblas_get_num_threads(),
               t->runs, t->median, t->best, t->mean, t->median_cpu, a->batch / t->median,
               (double)batch_steps(a) / t->median);
        json_str(desc->backend);
        printf("\", \"algo\": \"");
        json_str(desc->algo);
        printf("\", \"math\": \"");
        json_str(desc->math);
        printf("\", \"openblas_config\": \"");
        json_str(openblas_get_config());
        printf("\"");
        if (costs->measured)
                printf(", \"open_s\": %.6f, \"open_second_s\": %.6f, \"gpu_bytes_first\": %zu, "
                       "\"gpu_bytes_second\": %zu",
                       costs->first_s, costs->second_s, costs->first_bytes, costs->second_bytes);
        printf("}\n");
}

/* The same as text. */
static void report_text(const struct args *a, const char *name, const rnnd_model_t *m,
                        const struct rnnd_backend_desc *desc, const struct timing *t,
                        const struct open_costs *costs)
{
        const struct rnnd_model_config *cfg = &m->cfg;

        printf("model      %s (%s, input %u, hidden %u, layers %u, dirs %u)\n", name,
               rnnd_cell_name(cfg->cell), cfg->input_size, cfg->hidden_size, cfg->num_layers,
               m->dirs);
        printf("engine     %s %s %s; %s; %d BLAS threads\n", desc->backend, desc->algo, desc->math,
               openblas_get_config(), openblas_get_num_threads());
        printf("shape      batch %u x steps %u (%" PRIu64 " steps in all)\n", a->batch, a->steps,
               batch_steps(a));
        printf("runs       %zu timed (after %u warm-up)\n", t->runs, WARMUP_RUNS);
        printf("median     %.3f ms per batch (min %.3f, mean %.3f); CPU time %.3f ms\n",
               t->median * 1e3, t->best * 1e3, t->mean * 1e3, t->median_cpu * 1e3);
        printf("throughput %.1f sequences/s, %.0f steps/s\n", a->batch / t->median,
               (double)batch_steps(a) / t->median);
        if (costs->measured)
                printf("open       first plan %.3f s, %.1f MiB of GPU memory; a second plan "
                       "%.3f s, %.1f MiB\n",
                       costs->first_s, (double)costs->first_bytes / 1048576.0, costs->second_s,
                       (double)costs->second_bytes / 1048576.0);
}

int main(int argc, char **argv)
{
        struct args a;
        struct rnnd_model_config cfg;
        struct rnnd_instance_opts opts = {.device = -1};
        struct rnnd_backend_desc desc;
        struct bench b = {0};
        struct open_costs costs = {0};
        struct timing t;
        rnnd_error_t err = {0};
        rnnd_model_t *m = NULL;
        void *plan = NULL;
        char name[RNND_CFG_NAME_MAX];
        int rc = 1;

        if (parse_args(argc, argv, &a, &err) < 0) {
                fputs(usage, stderr);
                return fail("arguments", &err);
        }
        opts.threads = a.threads;
        opts.device = a.ops == &rnnd_cpu_backend ? -1 : a.device;
        if (rnnd_repository_read_config(a.model, &cfg, &err) < 0)
                return fail("config", &err);
        if (rnnd_model_load(a.model, model_name(a.model, name, sizeof(name)), a.version, &cfg, &m,
                            &err) < 0)
                return fail("model", &err);
        if (open_measured(&a, m, &opts, &plan, &costs, &err) < 0) {
                fail("open", &err);
                goto out;
        }
        a.ops->describe(plan, &desc);
        if (bench_init(&b, m, &a, &err) < 0) {
                fail("batch", &err);
                goto out;
        }
        if (time_runs(&a, plan, &b, &t) < 0)
                goto out;
        if (a.json)
                report_json(&a, name, m, &desc, &t, &costs);
        else
                report_text(&a, name, m, &desc, &t, &costs);
        rc = fflush(stdout) == 0 ? 0 : 1;
out:
        bench_done(&b);
        a.ops->close(plan);
        rnnd_model_unref(m);
        return rc;
}

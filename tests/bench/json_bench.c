/*
 * json_bench.c: rnnd-json-bench [REPO [MODEL]]: what a KServe request's JSON
 * costs the daemon (docs/BENCHMARKS.md, DESIGN.md §5), on a model's real
 * inputs: the first 1 and 8 sequences of REPO/MODEL/test_set.json
 * (config/models, digits_lstm).  For each, the parse with the data-array
 * fast path (rnnd_kserve_parse) against jansson reading every number
 * (rnnd__kserve_parse_jansson), and rendering every output as JSON
 * (rnnd_kserve_render, floats by fmtfloat.h) against the same floats
 * through snprintf("%.9g"), the renderer before; and the parse of the
 * one-sequence request with its input as a binary tensor (JSON header only).
 * Best of 5 rounds of 20,000 calls each; prints a markdown table.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "infer-int.h"
#include "infer.h"
#include "modelcfg.h"
#include "strbuf.h"

#define ROUNDS 5
#define ITERS  20000

static double now(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static char *slurp(const char *path, size_t *n)
{
        FILE *f = fopen(path, "rb");
        char *b;

        if (f == NULL || fseek(f, 0, SEEK_END) != 0)
                return NULL;
        *n = (size_t)ftell(f);
        rewind(f);
        b = malloc(*n + 1);
        if (b == NULL || fread(b, 1, *n, f) != *n) {
                fclose(f);
                free(b);
                return NULL;
        }
        fclose(f);
        b[*n] = '\0';
        return b;
}

/* The KServe body of the first n sequences of test_set.json's "x", shaped [n, T, input]. */
static char *make_body(json_t *x, size_t n, const struct rnnd_model_config *cfg)
{
        json_t *data = json_array(), *body;
        char *s;

        for (size_t i = 0; i < n; i++)
                json_array_append(data, json_array_get(x, i));
        body = json_pack("{s:[{s:s,s:s,s:[I,I,I],s:o}]}", "inputs", "name", "input", "datatype",
                         "FP32", "shape", (json_int_t)n,
                         (json_int_t)json_array_size(json_array_get(x, 0)),
                         (json_int_t)cfg->input_size, "data", data);
        s = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        return s;
}

typedef int (*parse_fn)(const void *, size_t, size_t, const struct rnnd_infer_limits *,
                        struct rnnd_infer_request *, rnnd_error_t *);

static double time_parse(parse_fn f, const char *body, size_t n, size_t json_len)
{
        double best = 1e9;

        for (int r = 0; r < ROUNDS; r++) {
                double t0 = now(), dt;

                for (int i = 0; i < ITERS; i++) {
                        struct rnnd_infer_request q;
                        rnnd_error_t e = {0};

                        if (f(body, n, json_len, NULL, &q, &e) < 0) {
                                fprintf(stderr, "parse: %s\n", e.msg);
                                exit(1);
                        }
                        rnnd_infer_request_done(&q);
                }
                dt = (now() - t0) / ITERS * 1e6;
                best = dt < best ? dt : best;
        }
        return best;
}

static double time_render(const struct rnnd_infer_outputs *o)
{
        double best = 1e9;

        for (int r = 0; r < ROUNDS; r++) {
                double t0 = now(), dt;

                for (int i = 0; i < ITERS; i++) {
                        rnnd_error_t e = {0};
                        size_t len, jl;
                        char *out;

                        if (rnnd_kserve_render("m", 1, NULL, o, &out, &len, &jl, &e) < 0) {
                                fprintf(stderr, "render: %s\n", e.msg);
                                exit(1);
                        }
                        rnnd_free(out);
                }
                dt = (now() - t0) / ITERS * 1e6;
                best = dt < best ? dt : best;
        }
        return best;
}

/* The same floats through snprintf("%.9g"), comma-separated: the renderer before fmtfloat. */
static double time_snprintf(const struct rnnd_infer_outputs *o)
{
        static char buf[1 << 20];
        double best = 1e9;
        volatile size_t sink = 0;

        for (int r = 0; r < ROUNDS; r++) {
                double t0 = now(), dt;

                for (int i = 0; i < ITERS / 10; i++) {
                        size_t at = 0;

                        for (unsigned k = 0; k < o->n; k++)
                                for (size_t j = 0; j < o->t[k].numel && at + 32 < sizeof(buf); j++)
                                        at += (size_t)snprintf(buf + at, 32, "%.9g,",
                                                               (double)((float *)o->t[k].data)[j]);
                        sink += at;
                }
                dt = (now() - t0) / (ITERS / 10) * 1e6;
                best = dt < best ? dt : best;
        }
        (void)sink;
        return best;
}

/*
 * The same one-sequence request as tritonclient sends it by default: the
 * input as a binary tensor after a JSON header, scores asked for as binary.
 * Only the header is JSON, so only the parse is timed.
 */
static void binary_row(const char *model, const struct rnnd_model_config *cfg, size_t T)
{
        size_t nbytes = T * cfg->input_size * sizeof(float), jl, len;
        char *body = malloc(512 + nbytes);
        double slow, fast;

        if (body == NULL)
                exit(1);
        jl = (size_t)snprintf(body, 512,
                              "{\"inputs\":[{\"name\":\"input\",\"shape\":[1,%zu,%u],"
                              "\"datatype\":\"FP32\",\"parameters\":{\"binary_data_size\":%zu}}],"
                              "\"outputs\":[{\"name\":\"scores\",\"parameters\":"
                              "{\"binary_data\":true}}]}",
                              T, (unsigned)cfg->input_size, nbytes);
        memset(body + jl, 0, nbytes);
        len = jl + nbytes;
        slow = time_parse(rnnd__kserve_parse_jansson, body, len, jl);
        fast = time_parse(rnnd_kserve_parse, body, len, jl);
        printf("| %s, 1 sequence, binary tensor | %zu | %.1f | %.1f | %.1fx | — | — |\n", model, jl,
               slow, fast, slow / fast);
        free(body);
}

int main(int argc, char **argv)
{
        const char *repo = argc > 1 ? argv[1] : "config/models";
        const char *model = argc > 2 ? argv[2] : "digits_lstm";
        struct rnnd_model_config cfg;
        rnnd_error_t e = {0};
        char path[4096], *text;
        json_t *set, *x;
        size_t n;

        snprintf(path, sizeof(path), "%s/%s/config.json", repo, model);
        text = slurp(path, &n);
        if (text == NULL || rnnd_modelcfg_parse(text, n, path, &cfg, &e) < 0) {
                fprintf(stderr, "%s: %s\n", path, text == NULL ? "cannot read" : e.msg);
                return 1;
        }
        free(text);
        snprintf(path, sizeof(path), "%s/%s/test_set.json", repo, model);
        set = json_load_file(path, 0, NULL);
        x = json_object_get(set, "x");
        if (!json_is_array(x) || json_array_size(x) < 8) {
                fprintf(stderr, "%s: no \"x\" of 8 sequences or more\n", path);
                return 1;
        }
        printf("| request | JSON bytes | parse, jansson only (us) | parse, fast path (us) | "
               "ratio | render every output (us) | same floats by snprintf %%.9g (us) |\n");
        printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
        for (size_t b = 1; b <= 8; b += 7) {
                char *body = make_body(x, b, &cfg);
                size_t len = strlen(body);
                double slow = time_parse(rnnd__kserve_parse_jansson, body, len, len);
                double fast = time_parse(rnnd_kserve_parse, body, len, len);
                struct rnnd_infer_request q;
                struct rnnd_infer_bound bd;
                struct rnnd_infer_outputs o;

                if (rnnd_kserve_parse(body, len, len, NULL, &q, &e) < 0 ||
                    rnnd_infer_bind(&q, &cfg, &bd, &e) < 0 ||
                    rnnd_infer_outputs_alloc(&bd, &cfg, &o, &e) < 0) {
                        fprintf(stderr, "%s\n", e.msg);
                        return 1;
                }
                srand(1);
                for (unsigned k = 0; k < o.n; k++)
                        for (size_t j = 0; j < o.t[k].numel; j++)
                                ((float *)o.t[k].data)[j] = (float)rand() / (float)RAND_MAX - 0.5f;
                printf("| %s, %zu sequence%s | %zu | %.1f | %.1f | %.1fx | %.1f | %.1f |\n", model,
                       b, b == 1 ? "" : "s", len, slow, fast, slow / fast, time_render(&o),
                       time_snprintf(&o));
                rnnd_infer_outputs_done(&o);
                rnnd_infer_bound_done(&bd);
                rnnd_infer_request_done(&q);
                free(body);
        }
        binary_row(model, &cfg, json_array_size(json_array_get(x, 0)));
        json_decref(set);
        return 0;
}

/*
 * fuzz-common.h: what the libFuzzer harnesses of tests/fuzz share: the model
 * configs requests are bound to, and the bind -> outputs -> render tail that
 * every parsed request goes through (docs/TESTING.md).
 *
 * Each harness is one translation unit built by tests/fuzz/run.sh with
 * clang -fsanitize=fuzzer,address,undefined against proto/ (and engine/'s
 * safetensors reader); a crash, a sanitizer report or a leak is a finding.
 */
#ifndef RNND_TESTS_FUZZ_COMMON_H
#define RNND_TESTS_FUZZ_COMMON_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "infer.h"
#include "infer-int.h"
#include "modelcfg.h"

/*
 * The configs a request is bound to, small so that every output stays small:
 * a head over every step, an embedding with two directions, a projection, a
 * plain Elman RNN.
 */
static const char *const fuzz_cfg_text[] __attribute__((unused)) = {
        "{\"cell\":\"lstm\",\"input_size\":3,\"hidden_size\":4,\"max_sequence_length\":16,"
        "\"head\":{\"units\":3,\"activation\":\"softmax\",\"apply\":\"all\"},"
        "\"batching\":{\"max_batch_size\":8}}",
        "{\"cell\":\"gru\",\"input_size\":2,\"hidden_size\":3,\"num_layers\":2,"
        "\"bidirectional\":true,\"embedding\":{\"num_embeddings\":10,\"dim\":2},"
        "\"max_sequence_length\":8,\"batching\":{\"max_batch_size\":4}}",
        "{\"cell\":\"lstm\",\"input_size\":2,\"hidden_size\":4,\"proj_size\":2,"
        "\"max_sequence_length\":8,\"head\":{\"units\":2,\"apply\":\"last\"},"
        "\"batching\":{\"max_batch_size\":4}}",
        ("{\"cell\":\"rnn_relu\",\"input_size\":1,\"hidden_size\":2,\"max_sequence_length\":32,"
         "\"batching\":{\"max_batch_size\":16}}"),
};
#define FUZZ_N_CFG (sizeof(fuzz_cfg_text) / sizeof(fuzz_cfg_text[0]))

static struct rnnd_model_config fuzz_cfg[FUZZ_N_CFG] __attribute__((unused));

/* Parses the configs once; a config that does not parse is a bug in this file. */
static inline void fuzz_init_configs(void)
{
        rnnd_error_t e = {0};

        rnnd_infer_global_init();
        for (size_t i = 0; i < FUZZ_N_CFG; i++)
                if (rnnd_modelcfg_parse(fuzz_cfg_text[i], strlen(fuzz_cfg_text[i]), "fuzz",
                                        &fuzz_cfg[i], &e) != 0) {
                        fprintf(stderr, "fuzz config %zu: %s\n", i, e.msg);
                        abort();
                }
}

/*
 * Limits smaller than the defaults, so that an input cannot ask for much
 * memory; the tree's, far above what an input of libFuzzer's lengths can
 * parse into, so that the fast path and jansson's agree.
 */
static const struct rnnd_infer_limits fuzz_limits
        __attribute__((unused)) = {.max_elements = 1u << 16, .max_depth = 32, .max_tree = 1u << 26};

/*
 * The same tensor bytes, but for the sign of a zero: jansson reads "-0" as the
 * integer 0, numscan.h as strtod does (-0.0).  (Binary tensors may hold any
 * bits, NaN included: compared as bits.)
 */
static inline int fuzz_same_data(const struct rnnd_tensor *a, const struct rnnd_tensor *b)
{
        if (a->dtype != RNND_DT_F32)
                return memcmp(a->data, b->data, a->nbytes) == 0;
        for (size_t k = 0; k < a->numel; k++) {
                float x = ((const float *)a->data)[k], y = ((const float *)b->data)[k];

                if (memcmp(&x, &y, sizeof(x)) != 0 && !(x == 0.0f && y == 0.0f))
                        return 0;
        }
        return 1;
}

/*
 * rnnd_kserve_parse()'s answer r (req a, error ea) against jansson reading
 * every number: a difference aborts.
 */
static inline void fuzz_same_as_jansson(const uint8_t *data, size_t size, size_t json_len, int r,
                                        const struct rnnd_infer_request *a, const rnnd_error_t *ea)
{
        struct rnnd_infer_request b;
        rnnd_error_t eb = {0};

        if (rnnd__kserve_parse_jansson(data, size, json_len, &fuzz_limits, &b, &eb) != r)
                abort();
        if (r < 0) {
                if (strcmp(ea->msg, eb.msg) != 0)
                        abort();
                return;
        }
        if (a->n_inputs != b.n_inputs || a->n_outputs != b.n_outputs || a->has_id != b.has_id ||
            strcmp(a->id, b.id) != 0)
                abort();
        for (unsigned i = 0; i < a->n_inputs; i++)
                if (strcmp(a->inputs[i].name, b.inputs[i].name) != 0 ||
                    a->inputs[i].dtype != b.inputs[i].dtype ||
                    a->inputs[i].ndim != b.inputs[i].ndim ||
                    a->inputs[i].nbytes != b.inputs[i].nbytes ||
                    (a->inputs[i].nbytes > 0 && !fuzz_same_data(&a->inputs[i], &b.inputs[i])))
                        abort();
        for (unsigned i = 0; i < a->n_outputs; i++)
                if (strcmp(a->outputs[i].name, b.outputs[i].name) != 0 ||
                    a->outputs[i].binary != b.outputs[i].binary)
                        abort();
        rnnd_infer_request_done(&b);
}

/*
 * Binds req to cfg, allocates its outputs, fills them with a pattern holding
 * NaN and Inf, and renders them as req's format asks; every step's result is
 * checked against its contract.
 */
static inline void fuzz_bind_render(const struct rnnd_infer_request *req,
                                    const struct rnnd_model_config *cfg)
{
        struct rnnd_infer_bound b;
        struct rnnd_infer_outputs o;
        rnnd_error_t e = {0};
        size_t len = 0, json_len = 0;
        char *body = NULL;
        int r;

        if (rnnd_infer_bind(req, cfg, &b, &e) != 0)
                return;
        if (b.B == 0 || b.T == 0)
                abort();
        for (uint32_t i = 0; i < b.B; i++)
                if (b.lengths[i] == 0 || b.lengths[i] > b.T)
                        abort();
        if (rnnd_infer_outputs_alloc(&b, cfg, &o, &e) == 0) {
                for (unsigned i = 0; i < o.n; i++) {
                        float *v = o.t[i].data;

                        for (uint64_t k = 0; k < o.t[i].numel; k++)
                                v[k] = k % 7 == 3 ? NAN : k % 11 == 5 ? -INFINITY : (float)k;
                }
                if (o.format == RNND_FMT_KSERVE)
                        r = rnnd_kserve_render("m", 1, req->has_id ? req->id : NULL, &o, &body,
                                               &len, &json_len, &e);
                else
                        r = rnnd_tfs_render(&o, &body, &len, &e);
                if (r == 0 && (body == NULL || body[len] != '\0'))
                        abort();
                rnnd_free(body);
                rnnd_infer_outputs_done(&o);
        }
        rnnd_infer_bound_done(&b);
}

/* Defines libFuzzer's start-up hook as a call of init(void). */
#define FUZZ_INITIALIZE(init)                                                                      \
        int LLVMFuzzerInitialize(int *argc, char ***argv)                                          \
        {                                                                                          \
                (void)argc;                                                                        \
                (void)argv;                                                                        \
                init();                                                                            \
                return 0;                                                                          \
        }

#endif

/*
 * fuzz_kserve.c: a KServe v2 infer request body, as JSON alone, through
 * parse, bind (to each fuzz config), outputs and render; and the same bytes
 * through the response parser the clients use.  The parse is also checked
 * against jansson reading every number (its fast paths must give the same
 * answer, or the same message): a difference aborts.
 */
#include "fuzz-common.h"
#include "infer-int.h"

FUZZ_INITIALIZE(fuzz_init_configs)

/*
 * The same tensor bytes, but for the sign of a zero: jansson reads "-0" as the
 * integer 0, numscan.h as strtod does (-0.0).  (NaN and Inf are refused.)
 */
static int same_data(const struct rnnd_tensor *a, const struct rnnd_tensor *b)
{
        if (a->dtype != RNND_DT_F32)
                return memcmp(a->data, b->data, a->nbytes) == 0;
        for (size_t k = 0; k < a->numel; k++)
                if (((const float *)a->data)[k] != ((const float *)b->data)[k])
                        return 0;
        return 1;
}

static void same_as_jansson(const uint8_t *data, size_t size, int r,
                            const struct rnnd_infer_request *a, const rnnd_error_t *ea)
{
        struct rnnd_infer_request b;
        rnnd_error_t eb = {0};

        if (rnnd__kserve_parse_jansson(data, size, size, &fuzz_limits, &b, &eb) != r)
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
                    (a->inputs[i].nbytes > 0 && !same_data(&a->inputs[i], &b.inputs[i])))
                        abort();
        for (unsigned i = 0; i < a->n_outputs; i++)
                if (strcmp(a->outputs[i].name, b.outputs[i].name) != 0 ||
                    a->outputs[i].binary != b.outputs[i].binary)
                        abort();
        rnnd_infer_request_done(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct rnnd_infer_request req;
        struct rnnd_infer_response resp;
        rnnd_error_t e = {0};
        int r = rnnd_kserve_parse(data, size, size, &fuzz_limits, &req, &e);

        same_as_jansson(data, size, r, &req, &e);
        if (r == 0) {
                for (size_t i = 0; i < FUZZ_N_CFG; i++)
                        fuzz_bind_render(&req, &fuzz_cfg[i]);
                rnnd_infer_request_done(&req);
        }
        if (rnnd_kserve_parse_response(data, size, size, &fuzz_limits, &resp, &e) == 0)
                rnnd_infer_response_done(&resp);
        return 0;
}

/*
 * fuzz_tfs.c: a TF Serving :predict body (row "instances" or columnar
 * "inputs").  TF Serving carries no dtypes, so the config decides them: the
 * first byte picks the config, the rest is the body.  Parse, bind, outputs and
 * render.
 */
#include "fuzz-common.h"

FUZZ_INITIALIZE(fuzz_init_configs)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const struct rnnd_model_config *cfg;
        struct rnnd_infer_request req;
        rnnd_error_t e = {0};

        if (size < 1)
                return 0;
        cfg = &fuzz_cfg[data[0] % FUZZ_N_CFG];
        if (rnnd_tfs_parse(data + 1, size - 1, cfg, &fuzz_limits, &req, &e) == 0) {
                fuzz_bind_render(&req, cfg);
                rnnd_infer_request_done(&req);
        }
        return 0;
}

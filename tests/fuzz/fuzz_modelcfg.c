/* fuzz_modelcfg.c: a model's config.json, through the parser and its cross-field checks. */
#include "fuzz-common.h"

FUZZ_INITIALIZE(rnnd_infer_global_init)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct rnnd_model_config cfg;
        rnnd_error_t e = {0};

        if (rnnd_modelcfg_parse((const char *)data, size, "config.json", &cfg, &e) == 0) {
                /* What the loader derives from a config it accepted must hold. */
                if (rnnd_modelcfg_out_size(&cfg) == 0 || rnnd_modelcfg_dirs(&cfg) == 0 ||
                    cfg.batching.max_batch_size == 0 || cfg.max_sequence_length == 0)
                        abort();
        } else if (e.code == 0 || e.msg[0] == '\0') {
                abort(); /* a refusal always says why */
        }
        return 0;
}

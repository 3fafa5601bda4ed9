/*
 * fuzz_repo.c: the repository API's bodies (index, load, unload); the first
 * byte picks the call.
 */
#include "fuzz-common.h"
#include "reporeq.h"

FUZZ_INITIALIZE(rnnd_infer_global_init)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct rnnd_reporeq req;
        rnnd_error_t e = {0};

        if (size < 1)
                return 0;
        if (rnnd_reporeq_parse((enum rnnd_reporeq_call)(data[0] % 3), (const char *)data + 1,
                               size - 1, &req, &e) != 0 &&
            (e.code == 0 || e.msg[0] == '\0'))
                abort();
        return 0;
}

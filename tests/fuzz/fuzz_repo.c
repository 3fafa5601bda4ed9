/*
 * fuzz_repo.c: the bodies of the repository API (index, load, unload) and of
 * the shared memory register request, with its checks; the first byte picks
 * which (its value mod 4: the three calls, then register).
 */
#include "fuzz-common.h"
#include "reporeq.h"
#include "shmreq.h"

FUZZ_INITIALIZE(rnnd_infer_global_init)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct rnnd_reporeq req;
        struct rnnd_shmreq shm;
        rnnd_error_t e = {0};
        int r;

        if (size < 1)
                return 0;
        if (data[0] % 4 == 3) {
                r = rnnd_shmreq_parse((const char *)data + 1, size - 1, &shm, &e);
                if (r == 0)
                        r = rnnd_shmreq_check("r", 128, &shm, &e);
        } else {
                r = rnnd_reporeq_parse((enum rnnd_reporeq_call)(data[0] % 4),
                                       (const char *)data + 1, size - 1, &req, &e);
        }
        if (r != 0 && (e.code == 0 || e.msg[0] == '\0'))
                abort();
        return 0;
}

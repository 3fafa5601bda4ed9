/*
 * fuzz_kserve.c: a KServe v2 infer request body, as JSON alone, through
 * parse, bind (to each fuzz config), outputs and render; and the same bytes
 * through the response parser the clients use.  The parse is also checked
 * against jansson reading every number (its fast paths must give the same
 * answer, or the same message): a difference aborts.
 */
#include "fuzz-common.h"

FUZZ_INITIALIZE(fuzz_init_configs)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct rnnd_infer_request req;
        struct rnnd_infer_response resp;
        rnnd_error_t e = {0};
        int r = rnnd_kserve_parse(data, size, size, &fuzz_limits, &req, &e);

        fuzz_same_as_jansson(data, size, size, r, &req, &e);
        if (r == 0) {
                for (size_t i = 0; i < FUZZ_N_CFG; i++)
                        fuzz_bind_render(&req, &fuzz_cfg[i]);
                rnnd_infer_request_done(&req);
        }
        if (rnnd_kserve_parse_response(data, size, size, &fuzz_limits, &resp, &e) == 0)
                rnnd_infer_response_done(&resp);
        return 0;
}

/*
 * fuzz_kserve_binary.c: the binary tensor extension's framing.  The first two
 * bytes (little-endian) are the Inference-Header-Content-Length, the rest is
 * the body: JSON, then the raw tensors it announces with binary_data_size.
 * Parse, bind, outputs and render (binary outputs too), and the response
 * parser on the same framing.  The parse is checked against jansson reading
 * every number, as in fuzz_kserve.c.
 */
#include "fuzz-common.h"

FUZZ_INITIALIZE(fuzz_init_configs)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct rnnd_infer_request req;
        struct rnnd_infer_response resp;
        rnnd_error_t e = {0};
        size_t json_len;
        int r;

        if (size < 2)
                return 0;
        json_len = (size_t)data[0] | (size_t)data[1] << 8;
        data += 2;
        size -= 2;
        /* The daemon refuses a header past the body before it parses. */
        if (json_len > size)
                return 0;
        r = rnnd_kserve_parse(data, size, json_len, &fuzz_limits, &req, &e);
        fuzz_same_as_jansson(data, size, json_len, r, &req, &e);
        if (r == 0) {
                for (size_t i = 0; i < FUZZ_N_CFG; i++)
                        fuzz_bind_render(&req, &fuzz_cfg[i]);
                rnnd_infer_request_done(&req);
        }
        if (rnnd_kserve_parse_response(data, size, json_len, &fuzz_limits, &resp, &e) == 0)
                rnnd_infer_response_done(&resp);
        return 0;
}

/*
 * fuzz_grpc.c: the gRPC front end's message handling (docs/DESIGN.md §11),
 * what daemon/grpcinfer.c and grpcsvc.c do with a request message's bytes.
 * The first byte picks the message: ModelInferRequest (unpacked in a
 * bounded arena, converted to a request, bound to each fuzz config,
 * rendered as JSON and as a ModelInferResponse, packed and read back),
 * PredictRequest (the same through TF Serving's conversion), or the bytes
 * as a JSON body turned into a ModelConfigResponse (pbjson.c); a first byte
 * of 0xfe or 0xff: a ModelInferRequest compressed (gzip, deflate) as
 * grpc-encoding sends it, decompressed by proto/inflate.c within a 1 MiB
 * limit first.  Every step is held to its contract; the arena's cap must hold.
 */
#include "fuzz-common.h"
#include "infer-grpc.h"
#include "inflate.h"
#include "pbjson.h"

FUZZ_INITIALIZE(fuzz_init_configs)

/* The outputs of req bound to cfg, as a ModelInferResponse: packed and unpacked again. */
static void response(const struct rnnd_infer_request *req, const struct rnnd_model_config *cfg)
{
        Inference__ModelInferResponse *m, *back;
        struct rnnd_infer_bound b;
        struct rnnd_infer_outputs o;
        struct rnnd_pbarena a;
        size_t len;
        void *buf;

        if (rnnd_infer_bind(req, cfg, &b, NULL) != 0)
                return;
        if (rnnd_infer_outputs_alloc(&b, cfg, &o, NULL) == 0) {
                rnnd_pbarena_init(&a, SIZE_MAX);
                if (rnnd_grpc_kserve_render(&a, "m", 1, req->has_id ? req->id : NULL, &o, &m,
                                            NULL) == 0) {
                        if (m->n_raw_output_contents != o.n)
                                abort();
                        buf = rnnd_pb_pack(&m->base, 5, &len);
                        back = buf != NULL ? inference__model_infer_response__unpack(
                                                     NULL, len, (uint8_t *)buf + 5)
                                           : NULL;
                        if (buf != NULL && (back == NULL || back->n_outputs != o.n))
                                abort();
                        if (back != NULL)
                                inference__model_infer_response__free_unpacked(back, NULL);
                        rnnd_free(buf);
                }
                rnnd_pbarena_done(&a);
                rnnd_infer_outputs_done(&o);
        }
        rnnd_infer_bound_done(&b);
}

static void infer(const uint8_t *data, size_t size, bool tfs)
{
        const ProtobufCMessageDescriptor *d =
                tfs ? &tensorflow__serving__predict_request__descriptor
                    : &inference__model_infer_request__descriptor;
        struct rnnd_infer_request req;
        struct rnnd_pbarena a;
        void *m;
        int r;

        rnnd_pbarena_init(&a, 8 * size + (1u << 20)); /* grpcsvc.c's bound */
        m = rnnd_pbarena_unpack(&a, d, data, size);
        if (a.used > a.cap)
                abort();
        if (m != NULL) {
                r = tfs ? rnnd_grpc_tfs_parse(m, &fuzz_limits, &req, NULL)
                        : rnnd_grpc_kserve_parse(m, &fuzz_limits, &req, NULL);
                if (r == 0) {
                        for (size_t i = 0; i < FUZZ_N_CFG; i++) {
                                fuzz_bind_render(&req, &fuzz_cfg[i]);
                                if (!tfs)
                                        response(&req, &fuzz_cfg[i]);
                        }
                        rnnd_infer_request_done(&req);
                } else if (r != RNND_EINVAL && r != RNND_ELIMIT && r != RNND_ENOMEM) {
                        abort();
                }
        }
        rnnd_pbarena_done(&a);
}

/* A compressed message: its output within the limit and NUL-terminated, or a refusal. */
static void compressed(const uint8_t *data, size_t size, enum rnnd_encoding enc)
{
        const size_t max = 1u << 20;
        rnnd_error_t e = {0};
        char *out;
        size_t len;
        int r = rnnd_inflate(enc, data, size, max, "the limit", &out, &len, &e);

        if (r == 0) {
                if (out == NULL || len > max || out[len] != '\0')
                        abort();
                infer((const uint8_t *)out, len, false);
                rnnd_free(out);
        } else if (out != NULL || (r != RNND_EINVAL && r != RNND_ETOOBIG && r != RNND_ENOMEM)) {
                abort();
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct rnnd_pbarena a;
        ProtobufCMessage *m;
        rnnd_error_t e = {0};

        if (size < 1)
                return 0;
        if (data[0] >= 0xfe) {
                compressed(data + 1, size - 1,
                           data[0] == 0xfe ? RNND_ENCODING_GZIP : RNND_ENCODING_DEFLATE);
                return 0;
        }
        switch (data[0] % 3) {
        case 0:
                infer(data + 1, size - 1, false);
                break;
        case 1:
                infer(data + 1, size - 1, true);
                break;
        default:
                rnnd_pbarena_init(&a, 1u << 24);
                if (rnnd_pbjson_message(&a, &inference__model_config_response__descriptor,
                                        (const char *)data + 1, size - 1, NULL, &m, &e) == 0) {
                        size_t len;
                        void *buf = rnnd_pb_pack(m, 0, &len);

                        rnnd_free(buf);
                } else if (e.code != RNND_EINVAL && e.code != RNND_ENOMEM) {
                        abort();
                }
                rnnd_pbarena_done(&a);
        }
        return 0;
}

/*
 * grpc_body.c: rnnd-grpc-body MODEL INPUT D0,D1,... [OUTPUT...] < DATA > BODY
 *
 * Writes the body of one gRPC ModelInfer call (docs/HTTP.md, "gRPC"): a
 * KServe v2 ModelInferRequest for MODEL whose input INPUT is FP32 of shape
 * D0 x D1 x ... with DATA (raw little-endian floats on stdin, exactly the
 * shape's bytes) in raw_input_contents, asking for the OUTPUTs (none: all),
 * packed by protobuf-c from proto/pb/kserve.proto and framed as gRPC frames
 * a message (flag 0, a big-endian length).  tests/bench/grpc_bench.py sends
 * it with h2load, a client that knows HTTP/2 but not protobuf.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kserve.pb-c.h"

#define MAX_DIMS    8
#define MAX_OUTPUTS 8
#define MAX_BYTES   (64u << 20)

typedef Inference__ModelInferRequest__InferRequestedOutputTensor output_t;

static int usage(void)
{
        fprintf(stderr, "usage: rnnd-grpc-body MODEL INPUT D0,D1,... [OUTPUT...] < DATA > BODY\n");
        return 2;
}

/* "1,8,8" into dims; returns their count, or 0 for a bad list. */
static size_t parse_shape(const char *s, int64_t *dims, uint64_t *elems)
{
        size_t n = 0;
        char *end;

        *elems = 1;
        while (n < MAX_DIMS) {
                long long d = strtoll(s, &end, 10);

                if (end == s || d < 1 || d > (1 << 24) || (*end != ',' && *end != '\0'))
                        return 0;
                dims[n++] = d;
                *elems *= (uint64_t)d;
                if (*elems > MAX_BYTES / 4)
                        return 0;
                if (*end == '\0')
                        return n;
                s = end + 1;
        }
        return 0;
}

int main(int argc, char **argv)
{
        Inference__ModelInferRequest m = INFERENCE__MODEL_INFER_REQUEST__INIT;
        Inference__ModelInferRequest__InferInputTensor
                t = INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT,
                *tp = &t;
        output_t o[MAX_OUTPUTS], *op[MAX_OUTPUTS];
        ProtobufCBinaryData raw;
        int64_t dims[MAX_DIMS];
        uint64_t elems;
        unsigned char *data, *out;
        size_t n, got, size;
        int i;

        if (argc < 4 || argc - 4 > MAX_OUTPUTS || (n = parse_shape(argv[3], dims, &elems)) == 0)
                return usage();
        data = malloc(elems * 4 + 1);
        if (data == NULL)
                return 1;
        got = fread(data, 1, elems * 4 + 1, stdin);
        if (got != elems * 4) {
                fprintf(stderr, "rnnd-grpc-body: %zu bytes on stdin, the shape wants %llu\n", got,
                        (unsigned long long)(elems * 4));
                return 2;
        }
        m.model_name = argv[1];
        t.name = argv[2];
        t.datatype = "FP32";
        t.n_shape = n;
        t.shape = dims;
        m.n_inputs = 1;
        m.inputs = &tp;
        raw = (ProtobufCBinaryData){elems * 4, data};
        m.n_raw_input_contents = 1;
        m.raw_input_contents = &raw;
        for (i = 4; i < argc; i++) {
                o[i - 4] = (output_t)
                        INFERENCE__MODEL_INFER_REQUEST__INFER_REQUESTED_OUTPUT_TENSOR__INIT;
                o[i - 4].name = argv[i];
                op[i - 4] = &o[i - 4];
        }
        m.n_outputs = (size_t)(argc - 4);
        m.outputs = op;
        size = protobuf_c_message_get_packed_size(&m.base);
        out = malloc(5 + size);
        if (out == NULL)
                return 1;
        out[0] = 0;
        out[1] = (unsigned char)(size >> 24);
        out[2] = (unsigned char)(size >> 16);
        out[3] = (unsigned char)(size >> 8);
        out[4] = (unsigned char)size;
        protobuf_c_message_pack(&m.base, out + 5);
        if (fwrite(out, 1, 5 + size, stdout) != 5 + size || fflush(stdout) != 0)
                return 1;
        free(out);
        free(data);
        return 0;
}

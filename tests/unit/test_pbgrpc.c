/*
 * test_pbgrpc.c: the gRPC front end's messages in proto/ (docs/DESIGN.md
 * §11): the bounded arena (pbarena.h), JSON bodies turned into messages
 * (pbjson.h), and KServe's and TF Serving's inference messages to and from
 * infer.h's structs (infer-grpc.h), each field's error named.
 */
#include <math.h>
#include <string.h>

#include "alloc.h"
#include "check-main.h"
#include "infer-grpc.h"
#include "model_config.pb-c.h"
#include "pbjson.h"

/* The arena. */

START_TEST(test_arena_cap)
{
        struct rnnd_pbarena a;
        void *p, *q;

        rnnd_pbarena_init(&a, 100);
        p = rnnd_pbarena_alloc(&a, 10);
        ck_assert_ptr_nonnull(p);
        ck_assert_uint_eq((uintptr_t)p % 16, 0);
        q = rnnd_pbarena_alloc(&a, 0); /* an empty array still gets a slot */
        ck_assert_ptr_nonnull(q);
        ck_assert_ptr_ne(p, q);
        ck_assert_ptr_null(rnnd_pbarena_alloc(&a, 90)); /* 16 + 16 + 96 > 100 */
        ck_assert_int_eq(a.failed, 1);
        rnnd_pbarena_done(&a);
        ck_assert_ptr_nonnull(rnnd_pbarena_alloc(&a, 90));
        ck_assert_ptr_null(rnnd_pbarena_alloc(&a, SIZE_MAX));
        rnnd_pbarena_done(&a);
}
END_TEST

/*
 * A message whose unpacked form passes the cap fails to unpack: a few
 * bytes on the wire per entry of a repeated message, a struct each in
 * memory.
 */
START_TEST(test_arena_unpack_bounded)
{
        Inference__ModelInferRequest m = INFERENCE__MODEL_INFER_REQUEST__INIT;
        Inference__ModelInferRequest__InferRequestedOutputTensor outs[1000], *outp[1000];
        struct rnnd_pbarena a;
        size_t len;
        void *buf;

        for (int i = 0; i < 1000; i++) {
                inference__model_infer_request__infer_requested_output_tensor__init(&outs[i]);
                outp[i] = &outs[i];
        }
        m.n_outputs = 1000;
        m.outputs = outp;
        buf = rnnd_pb_pack(&m.base, 5, &len);
        ck_assert_ptr_nonnull(buf);
        ck_assert_uint_eq(len, 2000); /* tag and a zero length per entry */
        rnnd_pbarena_init(&a, 16 * len);
        ck_assert_ptr_null(rnnd_pbarena_unpack(&a, &inference__model_infer_request__descriptor,
                                               (char *)buf + 5, len));
        ck_assert_int_eq(a.failed, 1);
        rnnd_pbarena_done(&a);
        rnnd_pbarena_init(&a, 1u << 20);
        ck_assert_ptr_nonnull(rnnd_pbarena_unpack(&a, &inference__model_infer_request__descriptor,
                                                  (char *)buf + 5, len));
        rnnd_pbarena_done(&a);
        rnnd_free(buf);
}
END_TEST

/*
 * A string field holding a NUL or bytes that are not UTF-8, nested too, is
 * named (and which); valid UTF-8 of every length passes.
 */
START_TEST(test_bad_strings)
{
        static const struct {
                const char *id, *param; /* the request's id, its one string parameter */
                size_t id_len;
                const char *field; /* NULL: fine */
                bool nul;
        } cases[] = {
                {"plain \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "x", 15, NULL, false},
                {"a\0b", "x", 3, "id", true},
                {"a\xff"
                 "b",
                 "x", 3, "id", false},
                {"\xc3", "x", 1, "id", false},                        /* cut short */
                {"\xe0\x80\x80", "x", 3, "id", false},                /* overlong */
                {"\xed\xa0\x80", "x", 3, "id", false},                /* a surrogate */
                {"ok", "\xf4\x90\x80\x80", 2, "string_param", false}, /* past U+10FFFF */
        };

        for (size_t k = 0; k < RNND_ELEMENTSOF(cases); k++) {
                Inference__ModelInferRequest m = INFERENCE__MODEL_INFER_REQUEST__INIT;
                Inference__InferParameter p = INFERENCE__INFER_PARAMETER__INIT;
                Inference__ModelInferRequest__ParametersEntry
                        e = INFERENCE__MODEL_INFER_REQUEST__PARAMETERS_ENTRY__INIT,
                        *ep = &e;
                char id[32];
                const char *field;
                size_t len;
                bool nul = !cases[k].nul;
                uint8_t *buf;

                m.model_name = "m";
                m.id = "QQQQQQQQQQQQQQQQQQQQ";
                p.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
                p.string_param = (char *)cases[k].param;
                e.key = "sequence_id";
                e.value = &p;
                m.n_parameters = 1;
                m.parameters = &ep;
                buf = rnnd_pb_pack(&m.base, 0, &len);
                ck_assert_ptr_nonnull(buf);
                /* The id's bytes, a NUL among them, written over the placeholder: its length too.
                 */
                memset(id, 0, sizeof(id));
                memcpy(id, cases[k].id, cases[k].id_len);
                for (size_t i = 0; i + 20 <= len; i++)
                        if (memcmp(buf + i, "QQQQQQQQQQQQQQQQQQQQ", 20) == 0) {
                                buf[i - 1] = (uint8_t)cases[k].id_len;
                                memmove(buf + i + cases[k].id_len, buf + i + 20, len - i - 20);
                                memcpy(buf + i, id, cases[k].id_len);
                                len -= 20 - cases[k].id_len;
                                break;
                        }
                field = rnnd_pb_bad_string(&inference__model_infer_request__descriptor, buf, len, 0,
                                           &nul);
                if (cases[k].field == NULL) {
                        ck_assert_ptr_null(field);
                } else {
                        ck_assert_ptr_nonnull(field);
                        ck_assert_str_eq(field, cases[k].field);
                        ck_assert_int_eq(nul, cases[k].nul);
                }
                rnnd_free(buf);
        }
}
END_TEST

/* JSON bodies. */

START_TEST(test_json_metadata)
{
        static const char json[] =
                "{\"name\":\"m\",\"versions\":[\"1\",\"2\"],\"platform\":\"rnnd_cpu\","
                "\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[-1,-1,5]}],"
                "\"outputs\":[],\"extra\":{\"ignored\":true}}";
        Inference__ModelMetadataResponse *m;
        struct rnnd_pbarena a;
        rnnd_error_t err = {0};

        rnnd_pbarena_init(&a, 1u << 20);
        ck_assert_int_eq(rnnd_pbjson_message(&a, &inference__model_metadata_response__descriptor,
                                             json, strlen(json), NULL, (ProtobufCMessage **)&m,
                                             &err),
                         0);
        ck_assert_str_eq(m->name, "m");
        ck_assert_uint_eq(m->n_versions, 2);
        ck_assert_str_eq(m->versions[1], "2");
        ck_assert_uint_eq(m->n_inputs, 1);
        ck_assert_str_eq(m->inputs[0]->datatype, "FP32");
        ck_assert_uint_eq(m->inputs[0]->n_shape, 3);
        ck_assert_int_eq(m->inputs[0]->shape[0], -1);
        ck_assert_int_eq(m->inputs[0]->shape[2], 5);
        ck_assert_uint_eq(m->n_outputs, 0);
        rnnd_pbarena_done(&a);
}
END_TEST

/* Enums by name, maps, a oneof (the later of two members wins), 64-bit strings. */
START_TEST(test_json_config)
{
        static const char json[] =
                "{\"config\":{\"name\":\"m\",\"max_batch_size\":8,"
                "\"version_policy\":{\"latest\":{\"num_versions\":1}},"
                "\"input\":[{\"name\":\"input\",\"data_type\":\"TYPE_FP32\",\"dims\":[-1,5]}],"
                "\"dynamic_batching\":{\"max_queue_delay_microseconds\":100,"
                "\"default_queue_policy\":{\"timeout_action\":\"REJECT\",\"max_queue_size\":9}},"
                "\"sequence_batching\":{\"max_sequence_idle_microseconds\":\"60000000\","
                "\"direct\":{}},"
                "\"instance_group\":[{\"name\":\"m_0\",\"kind\":\"KIND_CPU\",\"count\":2,"
                "\"instances\":[{\"backend\":\"cpu\"}]}],"
                "\"parameters\":{\"cell\":{\"string_value\":\"lstm\"}}}}";
        Inference__ModelConfigResponse *r;
        Inference__ModelConfig *c;
        struct rnnd_pbarena a;
        rnnd_error_t err = {0};

        rnnd_pbarena_init(&a, 1u << 20);
        ck_assert_int_eq(rnnd_pbjson_message(&a, &inference__model_config_response__descriptor,
                                             json, strlen(json), NULL, (ProtobufCMessage **)&r,
                                             &err),
                         0);
        c = r->config;
        ck_assert_int_eq(c->max_batch_size, 8);
        ck_assert_int_eq(c->version_policy->policy_choice_case,
                         INFERENCE__MODEL_VERSION_POLICY__POLICY_CHOICE_LATEST);
        ck_assert_uint_eq(c->version_policy->latest->num_versions, 1);
        ck_assert_int_eq(c->input[0]->data_type, INFERENCE__DATA_TYPE__TYPE_FP32);
        ck_assert_int_eq(c->scheduling_choice_case,
                         INFERENCE__MODEL_CONFIG__SCHEDULING_CHOICE_SEQUENCE_BATCHING);
        ck_assert_uint_eq(c->sequence_batching->max_sequence_idle_microseconds, 60000000u);
        ck_assert_int_eq(c->instance_group[0]->kind,
                         INFERENCE__MODEL_INSTANCE_GROUP__KIND__KIND_CPU);
        ck_assert_int_eq(c->instance_group[0]->count, 2);
        ck_assert_uint_eq(c->n_parameters, 1);
        ck_assert_str_eq(c->parameters[0]->key, "cell");
        ck_assert_str_eq(c->parameters[0]->value->string_value, "lstm");
        rnnd_pbarena_done(&a);
}
END_TEST

static const struct {
        const char *json;
        const char *path0;
        int code;
        const char *msg;
} bad_json[] = {
        {"{\"name\":5}", NULL, RNND_EINVAL, "field name: not a string"},
        {"{\"inputs\":{}}", NULL, RNND_EINVAL, "field inputs: not an array"},
        {"{\"inputs\":[{\"shape\":[1.5]}]}", NULL, RNND_EINVAL,
         "field shape: not a 64-bit integer"},
        {"[1]", NULL, RNND_EINVAL, "no object at its place"},
        {"{\"a\":{}}", "b", RNND_EINVAL, "no object at its place"},
        {"{", NULL, RNND_EINVAL, "not JSON"},
};

START_TEST(test_json_errors)
{
        const char *path[] = {bad_json[_i].path0, NULL};
        struct rnnd_pbarena a;
        rnnd_error_t err = {0};
        ProtobufCMessage *m;

        rnnd_pbarena_init(&a, 1u << 20);
        ck_assert_int_eq(rnnd_pbjson_message(&a, &inference__model_metadata_response__descriptor,
                                             bad_json[_i].json, strlen(bad_json[_i].json),
                                             bad_json[_i].path0 != NULL ? path : NULL, &m, &err),
                         bad_json[_i].code);
        ck_assert_msg(strstr(err.msg, bad_json[_i].msg) != NULL, "%s", err.msg);
        rnnd_pbarena_done(&a);
}
END_TEST

/* Inference messages: a request with typed contents, one with raw bytes. */

struct req {
        Inference__ModelInferRequest m;
        Inference__ModelInferRequest__InferInputTensor in[2], *inp[2];
        Inference__InferTensorContents c[2];
        Inference__ModelInferRequest__ParametersEntry pe[3], *pep[3];
        Inference__InferParameter pv[3];
        Inference__ModelInferRequest__InferRequestedOutputTensor out, *outp;
        ProtobufCBinaryData raw[2];
        int64_t shape0[3], shape1[1];
        float x[6];
        int64_t len[2];
};

/* input [2, 3, 1] FP32 and lengths [2] INT64, typed; sequence parameters; output h_n. */
static void make_req(struct req *r)
{
        memset(r, 0, sizeof(*r));
        inference__model_infer_request__init(&r->m);
        for (int i = 0; i < 2; i++) {
                inference__model_infer_request__infer_input_tensor__init(&r->in[i]);
                inference__infer_tensor_contents__init(&r->c[i]);
                r->inp[i] = &r->in[i];
                r->in[i].contents = &r->c[i];
        }
        for (int i = 0; i < 6; i++)
                r->x[i] = (float)i * 0.5f;
        r->len[0] = 3;
        r->len[1] = 2;
        r->shape0[0] = 2, r->shape0[1] = 3, r->shape0[2] = 1;
        r->shape1[0] = 2;
        r->in[0].name = "input", r->in[0].datatype = "FP32";
        r->in[0].n_shape = 3, r->in[0].shape = r->shape0;
        r->c[0].n_fp32_contents = 6, r->c[0].fp32_contents = r->x;
        r->in[1].name = "lengths", r->in[1].datatype = "INT64";
        r->in[1].n_shape = 1, r->in[1].shape = r->shape1;
        r->c[1].n_int64_contents = 2, r->c[1].int64_contents = r->len;
        r->m.n_inputs = 2, r->m.inputs = r->inp;
        r->m.id = "req-1";
        for (int i = 0; i < 3; i++) {
                inference__model_infer_request__parameters_entry__init(&r->pe[i]);
                inference__infer_parameter__init(&r->pv[i]);
                r->pe[i].value = &r->pv[i];
                r->pep[i] = &r->pe[i];
        }
        r->pe[0].key = "sequence_id";
        r->pv[0].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
        r->pv[0].int64_param = 42;
        r->pe[1].key = "sequence_start";
        r->pv[1].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
        r->pv[1].bool_param = 1;
        r->pe[2].key = "priority";
        r->pv[2].parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM;
        r->pv[2].uint64_param = 2;
        r->m.n_parameters = 3, r->m.parameters = r->pep;
        inference__model_infer_request__infer_requested_output_tensor__init(&r->out);
        r->out.name = "h_n";
        r->outp = &r->out;
        r->m.n_outputs = 1, r->m.outputs = &r->outp;
}

START_TEST(test_kserve_typed)
{
        struct rnnd_infer_request q;
        rnnd_error_t err = {0};
        struct req r;

        make_req(&r);
        ck_assert_int_eq(rnnd_grpc_kserve_parse(&r.m, NULL, &q, &err), 0);
        ck_assert_str_eq(q.id, "req-1");
        ck_assert(q.has_id);
        ck_assert_uint_eq(q.n_inputs, 2);
        ck_assert_int_eq(q.inputs[0].dtype, RNND_DT_F32);
        ck_assert_uint_eq(q.inputs[0].numel, 6);
        ck_assert_ptr_eq(q.inputs[0].data, r.x); /* used in place */
        ck_assert_uint_eq(q.inputs[1].shape[0], 2);
        ck_assert_uint_eq(q.params.sequence_id, 42);
        ck_assert(q.params.sequence_start);
        ck_assert_int_eq(q.params.priority, 2);
        ck_assert(q.outputs_given);
        ck_assert_str_eq(q.outputs[0].name, "h_n");
        rnnd_infer_request_done(&q);
}
END_TEST

START_TEST(test_kserve_raw)
{
        struct rnnd_infer_request q;
        rnnd_error_t err = {0};
        struct req r;
        char *bytes = rnnd_malloc(24 + 16 + 1); /* misaligned by one: copied */

        make_req(&r);
        memcpy(bytes + 1, r.x, 24);
        memcpy(bytes + 25, r.len, 16);
        r.c[0].n_fp32_contents = 0;
        r.c[1].n_int64_contents = 0;
        r.raw[0] = (ProtobufCBinaryData){24, (uint8_t *)bytes + 1};
        r.raw[1] = (ProtobufCBinaryData){16, (uint8_t *)bytes + 25};
        r.m.n_raw_input_contents = 2, r.m.raw_input_contents = r.raw;
        ck_assert_int_eq(rnnd_grpc_kserve_parse(&r.m, NULL, &q, &err), 0);
        ck_assert(q.inputs[0].owned);
        ck_assert_float_eq(((float *)q.inputs[0].data)[5], 2.5f);
        ck_assert_int_eq(((int64_t *)q.inputs[1].data)[1], 2);
        rnnd_infer_request_done(&q);
        rnnd_free(bytes);
}
END_TEST

/* What each broken request says (the field named). */
static void break_req(struct req *r, int k)
{
        static int64_t neg[3] = {2, -3, 1}, big[3] = {1 << 20, 1 << 20, 1 << 20};
        static ProtobufCBinaryData one_raw = {24, NULL};
        static Inference__InferParameter k3 = {
                .parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM,
                .int64_param = 3};
        static Inference__ModelInferRequest__InferRequestedOutputTensor__ParametersEntry
                classify = {.key = "classification", .value = &k3},
                *out_param = &classify;
        static Inference__ModelInferRequest__InferInputTensor__ParametersEntry
                shm = {.key = "shared_memory_region", .value = &k3},
                *in_param = &shm;

        switch (k) {
        case 0:
                r->c[0].n_fp32_contents = 5;
                break;
        case 1:
                r->in[0].shape = neg;
                break;
        case 2:
                r->in[1].datatype = "FP99";
                break;
        case 3:
                r->pv[1].parameter_choice_case =
                        INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
                break;
        case 4:
                r->pv[0].int64_param = -1;
                break;
        case 5:
                r->pe[2].key = "triton_x";
                break;
        case 6:
                r->m.n_raw_input_contents = 1, r->m.raw_input_contents = &one_raw;
                break;
        case 7:
                r->in[0].shape = big;
                break;
        case 8:
                r->in[0].name = "";
                break;
        case 9:
                r->in[0].datatype = "FP16";
                break;
        case 10: /* tritonclient's class_count: refused, not ignored */
                r->out.n_parameters = 1, r->out.parameters = &out_param;
                break;
        case 11: /* tritonclient's set_shared_memory */
                r->in[1].n_parameters = 1, r->in[1].parameters = &in_param;
                break;
        default:
                r->out.name = "";
                break;
        }
}

static const struct {
        int code;
        const char *msg;
} broken[] = {
        {RNND_EINVAL, "inputs[0].contents.fp32_contents: 5 values, but the shape holds 6"},
        {RNND_EINVAL, "inputs[0].shape: dimension 1 is -3, below 0"},
        {RNND_EINVAL, "inputs[1].datatype: unknown datatype \"FP99\""},
        {RNND_EINVAL, "parameters.sequence_start: must be a bool_param"},
        {RNND_EINVAL, "parameters.sequence_id: must be an int64_param of at least 0"},
        {RNND_EINVAL, "parameters.triton_x: reserved parameter name"},
        {RNND_EINVAL, "raw_input_contents: 1 entries for 2 inputs"},
        {RNND_ELIMIT, "inputs[0].shape: [1048576, 1048576, 1048576] has more than"},
        {RNND_EINVAL, "inputs[0].name: missing"},
        {RNND_EINVAL, "FP16 has no typed contents rnnd reads"},
        {RNND_EINVAL, "outputs[0].parameters.classification: not supported"},
        {RNND_EINVAL,
         "inputs[1].parameters.shared_memory_region: must be a non-empty string_param"},
        {RNND_EINVAL, "outputs[0].name: missing"},
};

START_TEST(test_kserve_errors)
{
        struct rnnd_infer_request q;
        rnnd_error_t err = {0};
        struct req r;

        make_req(&r);
        break_req(&r, _i);
        ck_assert_int_eq(rnnd_grpc_kserve_parse(&r.m, NULL, &q, &err), broken[_i].code);
        ck_assert_msg(strstr(err.msg, broken[_i].msg) != NULL, "%s", err.msg);
}
END_TEST

/* No inputs is HTTP's "inputs": [], which binding answers naming the missing one. */
START_TEST(test_kserve_no_inputs)
{
        struct rnnd_infer_request q;
        rnnd_error_t err = {0};
        struct req r;

        make_req(&r);
        r.m.n_inputs = 0;
        ck_assert_int_eq(rnnd_grpc_kserve_parse(&r.m, NULL, &q, &err), 0);
        ck_assert_uint_eq(q.n_inputs, 0);
        rnnd_infer_request_done(&q);
}
END_TEST

/* A response: names, shapes and the output bytes in place, packed and read back. */
START_TEST(test_kserve_render)
{
        float data[4] = {1, 2, 3, 4};
        struct rnnd_infer_outputs o = {.n = 1};
        Inference__ModelInferResponse *m, *back;
        struct rnnd_pbarena a;
        rnnd_error_t err = {0};
        size_t len;
        char *buf;

        strcpy(o.t[0].name, "h_n");
        o.t[0].dtype = RNND_DT_F32;
        o.t[0].ndim = 3;
        o.t[0].shape[0] = 1, o.t[0].shape[1] = 2, o.t[0].shape[2] = 2;
        o.t[0].data = data;
        o.t[0].nbytes = sizeof(data);
        rnnd_pbarena_init(&a, 1u << 20);
        ck_assert_int_eq(rnnd_grpc_kserve_render(&a, "m", 3, "id7", &o, &m, &err), 0);
        ck_assert_ptr_eq(m->raw_output_contents[0].data, (uint8_t *)data);
        buf = rnnd_pb_pack(&m->base, 5, &len);
        rnnd_pbarena_done(&a);
        back = inference__model_infer_response__unpack(NULL, len, (uint8_t *)buf + 5);
        ck_assert_ptr_nonnull(back);
        ck_assert_str_eq(back->model_version, "3");
        ck_assert_str_eq(back->id, "id7");
        ck_assert_str_eq(back->outputs[0]->datatype, "FP32");
        ck_assert_uint_eq(back->outputs[0]->n_shape, 3);
        ck_assert_uint_eq(back->raw_output_contents[0].len, 16);
        ck_assert_mem_eq(back->raw_output_contents[0].data, data, 16);
        inference__model_infer_response__free_unpacked(back, NULL);
        rnnd_free(buf);
}
END_TEST

/* TF Serving: float_val, tensor_content, half_val; the signature name. */
START_TEST(test_tfs_predict)
{
        Tensorflow__Serving__PredictRequest m = TENSORFLOW__SERVING__PREDICT_REQUEST__INIT;
        Tensorflow__Serving__PredictRequest__InputsEntry e[2], *ep[2];
        Tensorflow__TensorProto p[2];
        Tensorflow__TensorShapeProto s[2];
        Tensorflow__TensorShapeProto__Dim d[3], *dp0[2], *dp1[1];
        Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
        int32_t halves[2] = {0x3c00, 0xc000}; /* 1.0, -2.0 */
        float x[2] = {0.25f, 0.5f};
        struct rnnd_infer_request q;
        rnnd_error_t err = {0};

        for (int i = 0; i < 2; i++) {
                tensorflow__serving__predict_request__inputs_entry__init(&e[i]);
                tensorflow__tensor_proto__init(&p[i]);
                tensorflow__tensor_shape_proto__init(&s[i]);
                e[i].value = &p[i];
                p[i].tensor_shape = &s[i];
                ep[i] = &e[i];
        }
        for (int i = 0; i < 3; i++)
                tensorflow__tensor_shape_proto__dim__init(&d[i]);
        d[0].size = 1, d[1].size = 2, d[2].size = 2;
        dp0[0] = &d[0], dp0[1] = &d[1], dp1[0] = &d[2];
        e[0].key = "input", p[0].dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
        s[0].n_dim = 2, s[0].dim = dp0;
        p[0].n_float_val = 2, p[0].float_val = x;
        e[1].key = "h0", p[1].dtype = TENSORFLOW__DATA_TYPE__DT_HALF;
        s[1].n_dim = 1, s[1].dim = dp1;
        p[1].n_half_val = 2, p[1].half_val = halves;
        m.n_inputs = 2, m.inputs = ep;
        m.model_spec = &spec;
        spec.signature_name = "serving_default";
        ck_assert_int_eq(rnnd_grpc_tfs_parse(&m, NULL, &q, &err), 0);
        ck_assert_int_eq(q.format, RNND_FMT_TFS_COLUMNAR);
        ck_assert_ptr_eq(q.inputs[0].data, x);
        ck_assert_int_eq(q.inputs[1].dtype, RNND_DT_F16);
        ck_assert_float_eq(rnnd_f16_to_f32(((uint16_t *)q.inputs[1].data)[1]), -2.0f);
        rnnd_infer_request_done(&q);
        spec.signature_name = "other";
        ck_assert_int_eq(rnnd_grpc_tfs_parse(&m, NULL, &q, &err), RNND_EINVAL);
        ck_assert_msg(strstr(err.msg, "model_spec.signature_name") != NULL, "%s", err.msg);
        spec.signature_name = "";
        p[0].n_float_val = 1;
        ck_assert_int_eq(rnnd_grpc_tfs_parse(&m, NULL, &q, &err), RNND_EINVAL);
        ck_assert_msg(strstr(err.msg, "inputs[\"input\"].float_val: 1 values") != NULL, "%s",
                      err.msg);
        /* numpy's default float64 through tf.make_tensor_proto: named, not a bare 2. */
        p[0].n_float_val = 2, p[0].dtype = TENSORFLOW__DATA_TYPE__DT_DOUBLE;
        ck_assert_int_eq(rnnd_grpc_tfs_parse(&m, NULL, &q, &err), RNND_EINVAL);
        ck_assert_msg(strstr(err.msg, "inputs[\"input\"].dtype: DT_DOUBLE (2) is not DT_FLOAT, "
                                      "DT_HALF, DT_INT32 or DT_INT64") != NULL,
                      "%s", err.msg);
}
END_TEST

static Suite *pbgrpc_suite(void)
{
        Suite *s = suite_create("pbgrpc");
        TCase *tc;

        tc = tcase_create("arena");
        tcase_add_test(tc, test_arena_cap);
        tcase_add_test(tc, test_arena_unpack_bounded);
        tcase_add_test(tc, test_bad_strings);
        suite_add_tcase(s, tc);
        tc = tcase_create("json");
        tcase_add_test(tc, test_json_metadata);
        tcase_add_test(tc, test_json_config);
        tcase_add_loop_test(tc, test_json_errors, 0, (int)RNND_ELEMENTSOF(bad_json));
        suite_add_tcase(s, tc);
        tc = tcase_create("infer");
        tcase_add_test(tc, test_kserve_typed);
        tcase_add_test(tc, test_kserve_raw);
        tcase_add_loop_test(tc, test_kserve_errors, 0, (int)RNND_ELEMENTSOF(broken));
        tcase_add_test(tc, test_kserve_no_inputs);
        tcase_add_test(tc, test_kserve_render);
        tcase_add_test(tc, test_tfs_predict);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(pbgrpc_suite)

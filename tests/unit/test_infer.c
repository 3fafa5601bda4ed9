/*
 * test_infer.c: the inference wire formats (proto/infer.h): KServe v2 and TF
 * Serving requests parsed and bound to a model, bad requests rejected with
 * the right code, status and message, responses rendered and read back, and
 * every allocation failure surfacing as RNND_ENOMEM without a leak.
 */
#include <float.h>
#include <inttypes.h>
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "check-main.h"
#include "error.h"
#include "infer.h"
#include "infer-int.h"
#include "modelcfg.h"
#include "numscan.h"
#include "strbuf.h"
#include "tensor.h"

/*
 * The models
 *   LSTM: input 3, hidden 4, 1 layer, head of 2 (last); B <= 4, T <= 6.
 *   GRU:  input 2, hidden 3, 2 layers, bidirectional, no head.
 *   EMB:  LSTM with an embedding of 20 x 4, hidden 3, proj 2, head of 5 (all).
 */
enum { M_LSTM, M_GRU, M_EMB };

static void make_cfg(int m, struct rnnd_model_config *c)
{
        rnnd_modelcfg_defaults(c);
        switch (m) {
        case M_LSTM:
                c->cell = RNND_CELL_LSTM;
                c->input_size = 3;
                c->hidden_size = 4;
                c->head.present = true;
                c->head.units = 2;
                c->head.activation = RNND_ACT_SOFTMAX;
                c->batching.max_batch_size = 4;
                c->max_sequence_length = 6;
                break;
        case M_GRU:
                c->cell = RNND_CELL_GRU;
                c->input_size = 2;
                c->hidden_size = 3;
                c->num_layers = 2;
                c->bidirectional = true;
                break;
        case M_EMB:
                c->cell = RNND_CELL_LSTM;
                c->input_size = 4;
                c->hidden_size = 3;
                c->proj_size = 2;
                c->embedding.present = true;
                c->embedding.num_embeddings = 20;
                c->embedding.dim = 4;
                c->head.present = true;
                c->head.units = 5;
                c->head.apply = RNND_HEAD_ALL;
                break;
        }
}

static void setup(void)
{
        rnnd_infer_global_init();
}

/* Parses a KServe body (json_len = len) and binds it to model m; asserts success. */
static void kserve_ok(const char *body, int m, struct rnnd_infer_request *req,
                      struct rnnd_infer_bound *b)
{
        struct rnnd_model_config cfg;
        rnnd_error_t e = {0};
        int r;

        make_cfg(m, &cfg);
        r = rnnd_kserve_parse(body, strlen(body), strlen(body), NULL, req, &e);
        ck_assert_msg(r == 0, "parse: %s", e.msg);
        r = rnnd_infer_bind(req, &cfg, b, &e);
        ck_assert_msg(r == 0, "bind: %s", e.msg);
}

static void tfs_ok(const char *body, int m, struct rnnd_infer_request *req,
                   struct rnnd_infer_bound *b)
{
        struct rnnd_model_config cfg;
        rnnd_error_t e = {0};
        int r;

        make_cfg(m, &cfg);
        r = rnnd_tfs_parse(body, strlen(body), &cfg, NULL, req, &e);
        ck_assert_msg(r == 0, "parse: %s", e.msg);
        r = rnnd_infer_bind(req, &cfg, b, &e);
        ck_assert_msg(r == 0, "bind: %s", e.msg);
}

static void release(struct rnnd_infer_request *req, struct rnnd_infer_bound *b)
{
        rnnd_infer_bound_done(b);
        rnnd_infer_request_done(req);
}

/*
 * Good KServe requests: flat and nested data give the same bound request.
 */
#define FLAT_LSTM                                                                                  \
        "{\"id\":\"r1\",\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[2,3,3],"  \
        "\"data\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18]},"                                \
        "{\"name\":\"lengths\",\"datatype\":\"INT32\",\"shape\":[2],\"data\":[3,1]}]}"
#define NESTED_LSTM                                                                                \
        "{\"id\":\"r1\",\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[2,3,3],"  \
        "\"data\":[[[1,2,3],[4,5,6],[7,8,9]],[[10,11,12],[13,14,15],[16,17,18]]]},"                \
        "{\"name\":\"lengths\",\"datatype\":\"INT64\",\"shape\":[2],\"data\":[3,1]}]}"

static const char *const flat_nested[] = {FLAT_LSTM, NESTED_LSTM};

START_TEST(test_kserve_data)
{
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;

        kserve_ok(flat_nested[_i], M_LSTM, &req, &b);
        ck_assert_int_eq(req.format, RNND_FMT_KSERVE);
        ck_assert(req.has_id);
        ck_assert_str_eq(req.id, "r1");
        ck_assert_uint_eq(req.n_inputs, 2);
        ck_assert_uint_eq(b.B, 2);
        ck_assert_uint_eq(b.T, 3);
        ck_assert_uint_eq(b.lengths[0], 3);
        ck_assert_uint_eq(b.lengths[1], 1);
        ck_assert_uint_eq(b.input_stride, 9);
        for (int i = 0; i < 18; i++)
                ck_assert_float_eq(b.input[i], (float)(i + 1));
        ck_assert_ptr_eq(b.input, req.inputs[0].data); /* FP32 in place */
        ck_assert_ptr_null(b.tokens);
        ck_assert_ptr_null(b.h0);
        ck_assert_uint_eq(b.n_out, 4);
        for (unsigned k = 0; k < 4; k++) {
                ck_assert_int_eq(b.out[k], (int)k);
                ck_assert(b.want[k]);
                ck_assert(!b.binary[k]);
        }
        release(&req, &b);
}
END_TEST

/*
 * The fast path (infer-skel.c, numscan.h) against jansson reading every
 * number: for good requests and for thousands of damaged ones, the same
 * result, the same tensors byte for byte, or the same error message.
 */
/* Two parses of one request gave the same request, field by field and byte by byte. */
static void same_request(const struct rnnd_infer_request *a, const struct rnnd_infer_request *b)
{
        ck_assert_int_eq(a->format, b->format);
        ck_assert_int_eq(a->has_id, b->has_id);
        ck_assert_str_eq(a->id, b->id);
        ck_assert_int_eq(a->outputs_given, b->outputs_given);
        ck_assert_uint_eq(a->n_outputs, b->n_outputs);
        for (unsigned i = 0; i < a->n_outputs; i++) {
                ck_assert_str_eq(a->outputs[i].name, b->outputs[i].name);
                ck_assert_int_eq(a->outputs[i].binary, b->outputs[i].binary);
        }
        ck_assert_int_eq(a->binary_data_output, b->binary_data_output);
        ck_assert_uint_eq(a->params.sequence_id, b->params.sequence_id);
        ck_assert_str_eq(a->params.sequence_id_str, b->params.sequence_id_str);
        ck_assert_int_eq(a->params.sequence_start, b->params.sequence_start);
        ck_assert_int_eq(a->params.sequence_end, b->params.sequence_end);
        ck_assert_int_eq(a->params.priority, b->params.priority);
        ck_assert_uint_eq(a->params.timeout_us, b->params.timeout_us);
        ck_assert_uint_eq(a->n_inputs, b->n_inputs);
        for (unsigned i = 0; i < a->n_inputs; i++) {
                ck_assert_str_eq(a->inputs[i].name, b->inputs[i].name);
                ck_assert_int_eq(a->inputs[i].dtype, b->inputs[i].dtype);
                ck_assert_uint_eq(a->inputs[i].ndim, b->inputs[i].ndim);
                for (unsigned d = 0; d < a->inputs[i].ndim; d++)
                        ck_assert_uint_eq(a->inputs[i].shape[d], b->inputs[i].shape[d]);
                ck_assert_uint_eq(a->inputs[i].numel, b->inputs[i].numel);
                ck_assert_uint_eq(a->inputs[i].nbytes, b->inputs[i].nbytes);
                ck_assert(a->inputs[i].nbytes == 0 ||
                          memcmp(a->inputs[i].data, b->inputs[i].data, a->inputs[i].nbytes) == 0);
        }
}

/*
 * The fast paths against jansson reading every number: the same result, the
 * same request, or the same error message.  Returns whether the plain path
 * (no jansson at all) took the request; when it did, jansson accepted it too.
 */
static bool same_as_jansson_bin(const char *body, size_t len, size_t json_len,
                                const struct rnnd_infer_limits *lim)
{
        struct rnnd_infer_request a, b, c;
        rnnd_error_t ea = {0}, eb = {0};
        int ra = rnnd_kserve_parse(body, len, json_len, lim, &a, &ea);
        int rb = rnnd__kserve_parse_jansson(body, len, json_len, lim, &b, &eb);
        int rc = rnnd__kserve_parse_plain(body, len, json_len, lim, &c);

        ck_assert_msg(ra == rb, "%d vs %d (%s / %s) for %.*s", ra, rb, ea.msg, eb.msg, (int)len,
                      body);
        ck_assert_msg(rc == 0 || rc == 1, "plain: %d", rc);
        ck_assert_msg(rc == 1 || rb == 0, "plain took what jansson refuses (%s): %.*s", eb.msg,
                      (int)len, body);
        if (ra < 0) {
                ck_assert_str_eq(ea.msg, eb.msg);
                return false;
        }
        same_request(&a, &b);
        if (rc == 0) {
                same_request(&c, &b);
                rnnd_infer_request_done(&c);
        }
        rnnd_infer_request_done(&a);
        rnnd_infer_request_done(&b);
        return rc == 0;
}

static bool same_as_jansson_lim(const char *body, size_t len, const struct rnnd_infer_limits *lim)
{
        return same_as_jansson_bin(body, len, len, lim);
}

static bool same_as_jansson(const char *body, size_t len)
{
        return same_as_jansson_lim(body, len, NULL);
}

/*
 * A request long enough for the fast path: [2,8,5] FP32, tokens, h0, padded
 * with an id of 128 bytes (the longest accepted) or, long_id, 256 (refused).
 */
static size_t fast_body(char *buf, size_t cap, bool nested, bool long_id)
{
        struct rnnd_strbuf s;
        size_t n;

        rnnd_strbuf_init_fixed(&s, buf, cap);
        rnnd_strbuf_puts(&s, "{\"id\":\"");
        for (int i = 0; i < (long_id ? 64 : 32); i++)
                rnnd_strbuf_puts(&s, "pad-");
        rnnd_strbuf_puts(&s, "\", \"inputs\" : [ {\"name\":\"input\",\"datatype\":\"FP32\","
                             "\"shape\":[2,8,5],\"data\": [");
        for (int i = 0; i < 80; i++) {
                if (nested && i % 40 == 0)
                        rnnd_strbuf_puts(&s, i ? "]],[[" : "[[");
                else if (nested && i % 5 == 0)
                        rnnd_strbuf_puts(&s, "],[");
                else if (i > 0)
                        rnnd_strbuf_putc(&s, ',');
                rnnd_strbuf_printf(&s, "%s%d.%de%d", i % 3 ? "" : "-", i, i * 7 % 10, i % 9 - 4);
        }
        rnnd_strbuf_puts(&s, nested ? "]]]}, " : "]}, ");
        rnnd_strbuf_puts(&s, "{\"name\":\"lengths\",\"datatype\":\"INT64\",\"shape\":[2],"
                             "\"data\":[8, 3]},{\"name\":\"h0\",\"datatype\":\"FP32\","
                             "\"shape\":[2,1,3],\"data\":[0.1,0.2,0.3,1e-45,3.4028235e38,-0.0]}],"
                             "\"outputs\":[{\"name\":\"output\"}, {\"parameters\": "
                             "{\"binary_data\" :false}, \"name\":\"h_n\"}]}");
        n = s.len;
        ck_assert(!s.oom);
        return n;
}

START_TEST(test_kserve_fast_path)
{
        static const char noise[] = "[]{},:\"0123456789.-+eE \tntfx\\\x01\xff";
        char good[4096], buf[4096];
        size_t n = fast_body(good, sizeof(good), _i & 1, _i & 2);
        unsigned seed = 12345u + (unsigned)_i, plain = 0;

        struct rnnd__infer_span spans[RNND_INFER_MAX_TENSORS];
        uint64_t shape[3] = {2, 8, 5};
        float x[80];

        ck_assert_uint_ge(n, 512);
        /* The good body is on the fast path: its three data arrays are cut out and read. */
        ck_assert_uint_gt(rnnd__infer_skeleton(good, n, buf, spans), 0);
        ck_assert(spans[0].len > 0 && spans[1].len > 0 && spans[2].len > 0 && spans[3].len == 0);
        ck_assert_uint_eq(rnnd_numscan(good + spans[0].off, spans[0].len, shape, 3, !(_i & 1),
                                       RNND_DT_F32, x),
                          spans[0].len);
        /* With a valid id the plain path (no jansson tree) takes it. */
        ck_assert_int_eq(same_as_jansson(good, n), !(_i & 2));
        for (int k = 0; k < 6000; k++) {
                size_t m = n;

                memcpy(buf, good, n);
                for (int e = 0; e <= k % 3; e++) {
                        size_t at = (size_t)rand_r(&seed) % m;
                        int op = rand_r(&seed) % 3;

                        if (op == 0) /* replace a byte */
                                buf[at] = noise[rand_r(&seed) % (sizeof(noise) - 1)];
                        else if (op == 1) { /* delete one */
                                memmove(buf + at, buf + at + 1, m - at - 1);
                                m--;
                        } else if (m + 1 < sizeof(buf)) { /* insert one */
                                memmove(buf + at + 1, buf + at, m - at);
                                buf[at] = noise[rand_r(&seed) % (sizeof(noise) - 1)];
                                m++;
                        }
                }
                plain += same_as_jansson(buf, m);
        }
        /* It takes damaged bodies that stay valid (spaces, digits in the data), never the long id.
         */
        if (_i & 2)
                ck_assert_uint_eq(plain, 0);
        else
                ck_assert_uint_gt(plain, 100);
}
END_TEST

/*
 * The plain path (no jansson tree) on requests it must take and ones it must
 * leave to jansson; either way the result is jansson's (same_as_jansson).
 */
#define PX(before, after)                                                                          \
        "{" before "\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,2,2],"      \
        "\"data\":[1,2,3,4]}]" after "}"
static const struct {
        const char *body;
        bool plain;
} plain_cases[] = {
        {PX("", ""), true},
        {PX("\"id\":\"\",", ""), true},
        {PX("\"id\":\"a b:c\",", ",\"outputs\":[]"), true},
        {PX("", ",\"outputs\":[{\"name\":\"scores\"},{\"name\":\"h_n\",\"parameters\":{\"binary_"
                "data\":true}}]"),
         true},
        {" \t\r\n{ \"inputs\" : [ { \"data\" : [ 1 , 2 , 3 , 4 ] , \"shape\" : [ 1 , 2 , 2 ] , "
         "\"datatype\" : \"FP32\" , \"name\" : \"input\" } ] } \n",
         true},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"INT64\",\"shape\":[4],\"data\":[1,2,3,4]},"
         "{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[5]}]}",
         true},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2,2],\"data\":[[1,2],[3,4]]"
         "}]}",
         true},
        /* Left to jansson: other keys, escapes, non-ASCII, duplicates, odd numbers, errors. */
        {"{\"inputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[0],\"data\":[]}]}", false},
        {PX("\"parameters\":{\"sequence_id\":3},", ""), false},
        {PX("\"id\":\"a\\\"b\",", ""), false},
        {PX("\"id\":\"\xc3\xa9\",", ""), false},
        {PX("\"id\":\"a\",\"id\":\"b\",", ""), false},
        {PX("\"id\":7,", ""), false},
        {PX("", ",\"outputs\":[{\"name\":\"a\"},{\"name\":\"a\"}]"), false},
        {PX("", ",\"outputs\":[{\"name\":\"a\",\"parameters\":{\"binary_data\":1}}]"), false},
        {PX("", ",\"outputs\":[{\"name\":\"a\",\"parameters\":{\"classification\":2}}]"), false},
        {PX("", ",\"outputs\":[{\"name\":\"\"}]"), false},
        {PX("", ",\"outputs\":[{\"name\":\"a\"},]"), false},
        {PX("", ",\"extra\":1"), false},
        {PX("", "}"), false},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[01],\"data\":[1]}]}",
         false},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[-0],\"data\":[]}]}", false},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1.0],\"data\":[1]}]}",
         false},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1e0],\"data\":[1]}]}",
         false},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1000000000000000000],"
         "\"data\":[1]}]}",
         false},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[2],\"data\":[1]}]}", false},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP33\",\"shape\":[1],\"data\":[1]}]}", false},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"BYTES\",\"shape\":[1],\"data\":[1]}]}",
         false},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1],"
         "\"parameters\":{}}]}",
         false},
        {"{\"inputs\":[{\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}", false},
        {"{\"inputs\":[{\"name\":\"x\",\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":"
         "[1]}]}",
         false},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1,1,1,1,1,1,1,1,1],"
         "\"data\":[1]}]}",
         false},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}],"
         "\"inputs\":[]}",
         false},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]}x",
         false},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}]", false},
        {"{\"inputs\":[{\"name\":\"x\",\"datatype\":\"FP32\",\"shape\":[1],\"data\":[\"1\"]}]}",
         false},
};
#undef PX

/*
 * Binary tensors on the plain path: the JSON header read by hand, the bytes
 * after it taken as jansson's path takes them; any mismatch left to jansson.
 */
static const struct {
        const char *json;
        size_t bin; /* bytes of binary section after the JSON */
        bool plain;
} plain_bin_cases[] = {
        {"{\"inputs\":[{\"name\":\"input\",\"shape\":[1,2,2],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":16}}],\"outputs\":[{\"name\":\"scores\","
         "\"parameters\":{\"binary_data\":true}}]}",
         16, true},
        {"{\"inputs\":[{\"name\":\"a\",\"shape\":[2],\"datatype\":\"INT64\",\"parameters\":"
         "{\"binary_data_size\":16}},{\"name\":\"b\",\"shape\":[1],\"datatype\":\"FP32\","
         "\"parameters\":{\"binary_data_size\":4}}]}",
         20, true},
        {"{\"inputs\":[{\"name\":\"a\",\"shape\":[0],\"datatype\":\"FP32\",\"parameters\":"
         "{\"binary_data_size\":0}}]}",
         0, true},
        /* Left to jansson: sizes that do not add up, both data and size, other parameters. */
        {"{\"inputs\":[{\"name\":\"a\",\"shape\":[2],\"datatype\":\"FP32\",\"parameters\":"
         "{\"binary_data_size\":8}}]}",
         12, false},
        {"{\"inputs\":[{\"name\":\"a\",\"shape\":[2],\"datatype\":\"FP32\",\"parameters\":"
         "{\"binary_data_size\":12}}]}",
         12, false},
        {"{\"inputs\":[{\"name\":\"a\",\"shape\":[2],\"datatype\":\"FP32\",\"parameters\":"
         "{\"binary_data_size\":8}}]}",
         4, false},
        {"{\"inputs\":[{\"name\":\"a\",\"shape\":[2],\"datatype\":\"FP32\",\"data\":[1,2],"
         "\"parameters\":{\"binary_data_size\":8}}]}",
         8, false},
        {"{\"inputs\":[{\"name\":\"a\",\"shape\":[2],\"datatype\":\"FP32\",\"parameters\":"
         "{\"binary_data_size\":8,\"x\":1}}]}",
         8, false},
        {"{\"inputs\":[{\"name\":\"a\",\"shape\":[2],\"datatype\":\"FP32\",\"parameters\":"
         "{\"shared_memory_region\":\"r\"}}]}",
         0, false},
        {"{\"inputs\":[{\"name\":\"a\",\"shape\":[2],\"datatype\":\"FP32\",\"data\":[1,2]}]}", 4,
         false}, /* data, and bytes nobody takes */
};

START_TEST(test_kserve_plain_binary)
{
        char body[1024];
        size_t jl = strlen(plain_bin_cases[_i].json), n = jl + plain_bin_cases[_i].bin;

        memcpy(body, plain_bin_cases[_i].json, jl);
        for (size_t k = jl; k < n; k++)
                body[k] = (char)(k * 37 % 64); /* small floats' bytes, and odd offsets */
        ck_assert_msg(same_as_jansson_bin(body, n, jl, NULL) == plain_bin_cases[_i].plain, "%s",
                      plain_bin_cases[_i].json);
}
END_TEST

START_TEST(test_kserve_plain)
{
        const char *b = plain_cases[_i].body;

        ck_assert_msg(same_as_jansson(b, strlen(b)) == plain_cases[_i].plain, "%s", b);
}
END_TEST

START_TEST(test_kserve_nested)
{
        static const char body[] =
                "{\"parameters\":{\"binary_data_output\":true},\"outputs\":[],"
                "\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[2,3,3],"
                "\"data\":[[[1,2,3],[4,5,6],[7,8,9]],[[10,11,12],[13,14,15],[16,17,18]]]}]}";
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;

        kserve_ok(body, M_LSTM, &req, &b);
        ck_assert(!req.has_id);
        for (int i = 0; i < 18; i++)
                ck_assert_float_eq(b.input[i], (float)(i + 1));
        ck_assert_uint_eq(b.lengths[0], 3); /* no lengths: all T */
        ck_assert_uint_eq(b.lengths[1], 3);
        /* An empty outputs list means all, each binary by binary_data_output. */
        ck_assert(req.outputs_given);
        ck_assert_uint_eq(b.n_out, 4);
        for (unsigned k = 0; k < 4; k++)
                ck_assert(b.binary[k]);
        release(&req, &b);
}
END_TEST

/* INT32 tokens, INT64 lengths, h0 and c0, an outputs list, the parameters. */
START_TEST(test_kserve_tokens_states)
{
        static const char body[] =
                "{\"id\":\"\",\"parameters\":{\"sequence_id\":0,\"sequence_start\":false,"
                "\"sequence_end\":false,\"priority\":-3,\"timeout\":5000,\"custom\":[1]},"
                "\"inputs\":[{\"name\":\"tokens\",\"datatype\":\"INT32\",\"shape\":[2,3],"
                "\"data\":[[1,2,3],[19,0,0]]},"
                "{\"name\":\"lengths\",\"datatype\":\"INT64\",\"shape\":[2],\"data\":[3,1]},"
                "{\"name\":\"h0\",\"datatype\":\"FP32\",\"shape\":[2,1,2],\"data\":[0.5,-0.5,1,2]},"
                "{\"name\":\"c0\",\"datatype\":\"FP16\",\"shape\":[2,1,3],\"data\":[1,2,3,4,5,6],"
                "\"parameters\":{\"whatever\":1}}],"
                "\"outputs\":[{\"name\":\"scores\"},{\"name\":\"h_n\",\"parameters\":"
                "{\"binary_data\":true}}]}";
        static const int64_t tokens[] = {1, 2, 3, 19, 0, 0};
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;

        kserve_ok(body, M_EMB, &req, &b);
        ck_assert(req.has_id);
        ck_assert_str_eq(req.id, "");
        ck_assert_uint_eq(req.params.sequence_id, 0);
        ck_assert_str_eq(req.params.sequence_id_str, "");
        ck_assert(!req.params.sequence_start);
        ck_assert(!req.params.sequence_end);
        ck_assert_int_eq(req.params.priority, -3);
        ck_assert_uint_eq(req.params.timeout_us, 5000);
        ck_assert_ptr_null(b.input);
        ck_assert_uint_eq(b.tokens_stride, 3);
        for (int i = 0; i < 6; i++)
                ck_assert_int_eq(b.tokens[i], tokens[i]);
        ck_assert_uint_eq(b.lengths[1], 1);
        ck_assert_uint_eq(b.h0_stride, 2);
        ck_assert_float_eq(b.h0[1], -0.5f);
        ck_assert_float_eq(b.h0[3], 2.0f);
        ck_assert_uint_eq(b.c0_stride, 3);
        ck_assert_float_eq(b.c0[5], 6.0f);
        ck_assert_uint_eq(b.n_out, 2);
        ck_assert_int_eq(b.out[0], RNND_OUT_SCORES);
        ck_assert_int_eq(b.out[1], RNND_OUT_H_N);
        ck_assert(!b.want[RNND_OUT_OUTPUT] && !b.want[RNND_OUT_C_N]);
        ck_assert(b.binary[RNND_OUT_H_N] && !b.binary[RNND_OUT_SCORES]);
        release(&req, &b);
}
END_TEST

/*
 * sequence_id is an unsigned 64-bit integer (docs/HTTP.md): ids past int64,
 * which jansson refuses as "too big integer", parse on every path, long
 * (the skeleton) or short, and the rest of the request with them.
 */
START_TEST(test_kserve_sequence_id_u64)
{
        static const struct {
                const char *id;
                uint64_t want;
        } ids[] = {
                {"18446744073709551615", UINT64_MAX},
                {"9223372036854775808", UINT64_C(9223372036854775808)},
                {"9223372036854775807", INT64_MAX},
        };
        char body[512], longer[160] = ",\"custom\":\"";
        const char *pad[] = {"", longer};

        /* 128 bytes more: the fast path's skeleton, where the short one goes to jansson. */
        memset(longer + strlen(longer), 'a', 128);
        strcat(longer, "\"");

        for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
                for (size_t k = 0; k < 2; k++) {
                        struct rnnd_infer_request a, b;
                        rnnd_error_t e = {0};
                        int n = snprintf(body, sizeof(body),
                                         "{\"parameters\":{\"sequence_start\":true,"
                                         "\"sequence_id\":%s%s},\"inputs\":[{\"name\":\"input\","
                                         "\"datatype\":\"FP32\",\"shape\":[1,1,2],"
                                         "\"data\":[1,2]}]}",
                                         ids[i].id, pad[k]);

                        ck_assert_int_eq(
                                rnnd_kserve_parse(body, (size_t)n, (size_t)n, NULL, &a, &e), 0);
                        ck_assert_int_eq(rnnd__kserve_parse_jansson(body, (size_t)n, (size_t)n,
                                                                    NULL, &b, &e),
                                         0);
                        ck_assert_uint_eq(a.params.sequence_id, ids[i].want);
                        ck_assert_uint_eq(b.params.sequence_id, ids[i].want);
                        ck_assert(a.params.sequence_start && b.params.sequence_start);
                        ck_assert_uint_eq(a.n_inputs, 1);
                        rnnd_infer_request_done(&a);
                        rnnd_infer_request_done(&b);
                }
}
END_TEST

/* The sequence parameters parse; bind says why a model does not take them (yet). */
START_TEST(test_kserve_sequence_params)
{
        static const char body[] =
                "{\"parameters\":{\"sequence_id\":\"abc\",\"sequence_start\":true,"
                "\"sequence_end\":true},\"inputs\":[{\"name\":\"input\","
                "\"datatype\":\"FP32\",\"shape\":[1,1,2],\"data\":[1,2]}]}";
        struct rnnd_model_config cfg;
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;
        rnnd_error_t e = {0};

        make_cfg(M_GRU, &cfg);
        ck_assert_int_eq(rnnd_kserve_parse(body, strlen(body), strlen(body), NULL, &req, &e), 0);
        ck_assert_str_eq(req.params.sequence_id_str, "abc");
        ck_assert_uint_eq(req.params.sequence_id, 0);
        ck_assert(req.params.sequence_start && req.params.sequence_end);
        ck_assert_int_eq(rnnd_infer_bind(&req, &cfg, &b, &e), RNND_EINVAL);
        ck_assert_str_eq(e.msg, "parameters.sequence_id: this model does not support sequences "
                                "(its config.json has no \"sequence\" block; every request is "
                                "stateless: send each sequence whole, with h0/c0 to carry state)");
        /* With a sequence block: a bidirectional model cannot stream. */
        cfg.sequence.present = true;
        cfg.bidirectional = true;
        ck_assert_int_eq(rnnd_infer_bind(&req, &cfg, &b, &e), RNND_EINVAL);
        ck_assert_ptr_nonnull(strstr(e.msg, "bidirectional model cannot take a sequence"));
        /* A unidirectional one binds it: the daemon keeps the state. */
        cfg.bidirectional = false;
        ck_assert_int_eq(rnnd_infer_bind(&req, &cfg, &b, &e), 0);
        ck_assert(rnnd_infer_is_sequence(&req.params));
        rnnd_infer_bound_done(&b);
        rnnd_infer_request_done(&req);
}
END_TEST

START_TEST(test_kserve_binary_output)
{
        static const char body[] =
                "{\"parameters\":{\"binary_data_output\":true},"
                "\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,1,2],"
                "\"data\":[1,2]}],\"outputs\":[{\"name\":\"output\"},{\"name\":\"h_n\","
                "\"parameters\":{\"binary_data\":false}}]}";
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;

        kserve_ok(body, M_GRU, &req, &b);
        ck_assert(req.binary_data_output);
        ck_assert(b.binary[RNND_OUT_OUTPUT]);
        ck_assert(!b.binary[RNND_OUT_H_N]);
        release(&req, &b);
}
END_TEST

/* Copies json then raw into an aligned buffer at offset off; returns the body. */
static char *make_body(char *buf, size_t off, const char *json, const void *raw, size_t rawlen,
                       size_t *len)
{
        size_t jl = strlen(json);

        memcpy(buf + off, json, jl);
        memcpy(buf + off + jl, raw, rawlen);
        *len = jl + rawlen;
        return buf + off;
}

/*
 * Binary FP32 input: borrowed from the body when aligned (_i = 0), copied
 * when not (_i = 1); FP16 h0 converted.
 */
START_TEST(test_kserve_binary)
{
        static const char json[] =
                "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,2,3],"
                "\"parameters\":{\"binary_data_size\":24}},{\"name\":\"h0\",\"datatype\":"
                "\"FP16\",\"shape\":[1,1,4],\"parameters\":{\"binary_data_size\":8}}]}";
        static _Alignas(16) char buf[512];
        struct rnnd_model_config cfg;
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;
        unsigned char raw[32];
        float x[6] = {1.5f, -2.0f, 0.1f, 3e-39f, 65504.0f, -0.0f};
        uint16_t h[4] = {0x3c00, 0xc000, 0x3800, 0x0001};
        rnnd_error_t e = {0};
        size_t len, jl = strlen(json);
        /* Choose the offset so that the binary part is 4-aligned, or not. */
        size_t off = (4 - jl % 4) % 4 + (size_t)_i;
        char *body;

        memcpy(raw, x, 24);
        memcpy(raw + 24, h, 8);
        body = make_body(buf, off, json, raw, sizeof(raw), &len);
        make_cfg(M_LSTM, &cfg);
        ck_assert_int_eq(rnnd_kserve_parse(body, len, jl, NULL, &req, &e), 0);
        ck_assert_int_eq(req.inputs[0].owned, _i == 1);
        if (_i == 0)
                ck_assert_ptr_eq(req.inputs[0].data, body + jl);
        ck_assert_int_eq(rnnd_infer_bind(&req, &cfg, &b, &e), 0);
        for (int i = 0; i < 6; i++)
                ck_assert_mem_eq(&b.input[i], &x[i], 4);
        ck_assert_float_eq(b.h0[0], 1.0f);
        ck_assert_float_eq(b.h0[1], -2.0f);
        ck_assert_float_eq(b.h0[2], 0.5f);
        ck_assert_float_eq(b.h0[3], 5.9604644775390625e-8f);
        release(&req, &b);
}
END_TEST

/*
 * Good TF Serving requests
 */

START_TEST(test_tfs_rows)
{
        static const char body[] =
                "{\"instances\":[[[1,2,3],[4,5,6]],[[7,8,9]],[[1,1,1],[2,2,2],[3,3,3]]]}";
        static const float want[] = {1, 2, 3, 4, 5, 6, 0, 0, 0, 7, 8, 9, 0, 0,
                                     0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3};
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;

        tfs_ok(body, M_LSTM, &req, &b);
        ck_assert_int_eq(req.format, RNND_FMT_TFS_ROW);
        ck_assert_int_eq(b.format, RNND_FMT_TFS_ROW);
        ck_assert_uint_eq(b.B, 3);
        ck_assert_uint_eq(b.T, 3);
        ck_assert_uint_eq(b.lengths[0], 2);
        ck_assert_uint_eq(b.lengths[1], 1);
        ck_assert_uint_eq(b.lengths[2], 3);
        for (int i = 0; i < 27; i++)
                ck_assert_float_eq(b.input[i], want[i]);
        ck_assert_uint_eq(b.n_out, 4);
        release(&req, &b);
}
END_TEST

START_TEST(test_tfs_objects)
{
        static const char body[] =
                "{\"signature_name\":\"serving_default\",\"instances\":["
                "{\"input\":[[1,2,3]],\"h0\":[[1,2,3,4]],\"c0\":[[0,0,0,1]]},"
                "{\"input\":[[4,5,6],[7,8,9]]},{\"input\":[[0,0,1]],\"h0\":[[5,6,7,8]]}]}";
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;

        tfs_ok(body, M_LSTM, &req, &b);
        ck_assert_uint_eq(b.B, 3);
        ck_assert_uint_eq(b.T, 2);
        ck_assert_uint_eq(b.lengths[0], 1);
        ck_assert_uint_eq(b.lengths[1], 2);
        ck_assert_uint_eq(b.lengths[2], 1);
        ck_assert_uint_eq(b.h0_stride, 4);
        ck_assert_float_eq(b.h0[3], 4.0f);
        ck_assert_float_eq(b.h0[4], 0.0f); /* instance 1 has no h0: zeros */
        ck_assert_float_eq(b.h0[8], 5.0f);
        ck_assert_float_eq(b.c0[3], 1.0f);
        ck_assert_float_eq(b.c0[11], 0.0f);
        ck_assert_float_eq(b.input[6], 4.0f);
        release(&req, &b);
}
END_TEST

START_TEST(test_tfs_tokens)
{
        static const char body[] = "{\"instances\":[[1,2,3],[4],{\"tokens\":[19,18]}]}";
        static const int64_t want[] = {1, 2, 3, 4, 0, 0, 19, 18, 0};
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;

        tfs_ok(body, M_EMB, &req, &b);
        ck_assert_uint_eq(b.B, 3);
        ck_assert_uint_eq(b.T, 3);
        for (int i = 0; i < 9; i++)
                ck_assert_int_eq(b.tokens[i], want[i]);
        ck_assert_uint_eq(b.lengths[2], 2);
        release(&req, &b);
}
END_TEST

static const char *const columnar[] = {
        "{\"inputs\":{\"input\":[[[1,2],[3,4]],[[5,6],[7,8]]],\"lengths\":[1,2],"
        "\"h0\":[[[1,1,1],[2,2,2],[3,3,3],[4,4,4]],[[0,0,0],[0,0,0],[0,0,0],[0,0,9]]]}}",
        "{\"signature_name\":\"serving_default\",\"inputs\":[[[1,2],[3,4]],[[5,6],[7,8]]]}",
};

START_TEST(test_tfs_columnar)
{
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;

        tfs_ok(columnar[_i], M_GRU, &req, &b);
        ck_assert_int_eq(req.format, RNND_FMT_TFS_COLUMNAR);
        ck_assert_uint_eq(b.B, 2);
        ck_assert_uint_eq(b.T, 2);
        ck_assert_uint_eq(b.lengths[0], _i == 0 ? 1 : 2);
        ck_assert_uint_eq(b.lengths[1], 2);
        ck_assert_float_eq(b.input[7], 8.0f);
        if (_i == 0) {
                ck_assert_uint_eq(b.h0_stride, 12);
                ck_assert_float_eq(b.h0[23], 9.0f);
        } else {
                ck_assert_ptr_null(b.h0);
        }
        ck_assert_uint_eq(b.n_out, 2); /* GRU, no head: output, h_n */
        release(&req, &b);
}
END_TEST

/*
 * Bad requests: {format, model, body, len (0: strlen), json_len (-1: len), code, status,
 * message substring}.
 */
enum { KS, TF };
struct bad {
        int fmt;
        int model;
        const char *body;
        size_t len;
        long json_len;
        int code;
        int status;
        const char *msg;
};

#define EINVAL_400 RNND_EINVAL, 400
#define ELIMIT_400 RNND_ELIMIT, 400

/* A good "input" of the LSTM model, and a request of inputs. */
#define X3      "{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,2,3],\"data\":[1,2,3,4,5,6]}"
#define REQ(in) "{\"inputs\":[" in "]}"
#define T(name, dt, shape, data)                                                                   \
        "{\"name\":\"" name "\",\"datatype\":\"" dt "\",\"shape\":" shape ",\"data\":" data "}"
/* A KServe body of JSON then raw bytes: body, len, json_len. */
#define BIN(j, raw) j raw, sizeof(j raw) - 1, sizeof(j) - 1
#define BIN_IN(dt, shape, size)                                                                    \
        "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"" dt "\",\"shape\":" shape                \
        ",\"parameters\":{\"binary_data_size\":" size "}}]}"
#define D10  "[[[[[[[[[["
#define C10  "]]]]]]]]]]"
#define A16  "aaaaaaaaaaaaaaaa"
#define A128 A16 A16 A16 A16 A16 A16 A16 A16
#define NINE_OUT                                                                                   \
        "[{\"name\":\"a\"},{\"name\":\"b\"},{\"name\":\"c\"},{\"name\":\"d\"},{\"name\":\"e\"},"   \
        "{\"name\":\"f\"},{\"name\":\"g\"},{\"name\":\"h\"},{\"name\":\"i\"}]"

static const struct bad bad[] = {
        /* Body and JSON. */
        {KS, M_LSTM, "", 0, -1, EINVAL_400, "the body is empty"},
        {KS, M_LSTM, "{\"inputs\": [", 0, -1, EINVAL_400, "invalid JSON at byte"},
        {KS, M_LSTM, "[1]", 0, -1, EINVAL_400, "the request must be a JSON object"},
        {KS, M_LSTM, "{\"inputs\":" D10 D10 D10 D10 "}", 0, -1, ELIMIT_400,
         "JSON nested deeper than 32 levels"},
        {KS, M_LSTM, "{\"id\":\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\\"[[[[\",\"inputs\":5}",
         0, -1, EINVAL_400, "inputs: must be a list, got 5"},
        {KS, M_LSTM, "{\"inputs\":[],\"inputs\":[]}", 0, -1, EINVAL_400, "duplicate"},
        {KS, M_LSTM, REQ(X3) "x", 0, -1, EINVAL_400, "invalid JSON"},
        /* Top level. */
        {KS, M_LSTM, "{\"inputs\":[" X3 "],\"foo\":1}", 0, -1, EINVAL_400, "unknown field 'foo'"},
        {KS, M_LSTM, "{\"model_name\":\"m\",\"inputs\":[" X3 "]}", 0, -1, EINVAL_400,
         "unknown field 'model_name'"},
        {KS, M_LSTM, "{\"id\":5,\"inputs\":[" X3 "]}", 0, -1, EINVAL_400,
         "id: must be a string, got 5"},
        {KS, M_LSTM, "{\"id\":\"" A128 "a\",\"inputs\":[" X3 "]}", 0, -1, EINVAL_400,
         "id: longer than 128 bytes"},
        {KS, M_LSTM, "{}", 0, -1, EINVAL_400, "inputs: missing"},
        {KS, M_LSTM, "{\"inputs\":{}}", 0, -1, EINVAL_400, "inputs: must be a list, got an object"},
        {KS, M_LSTM, REQ(X3 "," X3 "," X3 "," X3 "," X3 "," X3 "," X3 "," X3 "," X3), 0, -1,
         EINVAL_400, "inputs: more than 8 tensors"},
        {KS, M_LSTM, REQ("1"), 0, -1, EINVAL_400, "inputs[0]: must be an object, got 1"},
        {KS, M_LSTM, REQ(X3 ",{\"name\":\"h0\",\"foo\":1}"), 0, -1, EINVAL_400,
         "inputs[1]: unknown field 'foo'"},
        /* Input fields. */
        {KS, M_LSTM, REQ("{\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}"), 0, -1, EINVAL_400,
         "inputs[0].name: missing"},
        {KS, M_LSTM, REQ(T("", "FP32", "[1]", "[1]")), 0, -1, EINVAL_400,
         "inputs[0].name: must not be empty"},
        {KS, M_LSTM, REQ("{\"name\":7,\"datatype\":\"FP32\",\"shape\":[1],\"data\":[1]}"), 0, -1,
         EINVAL_400, "inputs[0].name: must be a string, got 7"},
        {KS, M_LSTM, REQ(T(A16 A16 A16 A16, "FP32", "[1]", "[1]")), 0, -1, EINVAL_400,
         "inputs[0].name: longer than 63 bytes"},
        {KS, M_LSTM, REQ("{\"name\":\"input\",\"shape\":[1],\"data\":[1]}"), 0, -1, EINVAL_400,
         "inputs[0].datatype: missing"},
        {KS, M_LSTM, REQ("{\"name\":\"input\",\"datatype\":32,\"shape\":[1],\"data\":[1]}"), 0, -1,
         EINVAL_400, "inputs[0].datatype: must be a string, got 32"},
        {KS, M_LSTM, REQ(T("input", "FP8", "[1]", "[1]")), 0, -1, EINVAL_400,
         "inputs[0].datatype: unknown datatype \"FP8\""},
        {KS, M_LSTM, REQ(T("input", "BYTES", "[1]", "[\"a\"]")), 0, -1, EINVAL_400,
         "inputs[0].datatype: BYTES is not supported"},
        {KS, M_LSTM, REQ("{\"name\":\"input\",\"datatype\":\"FP32\",\"data\":[1]}"), 0, -1,
         EINVAL_400, "inputs[0].shape: missing"},
        {KS, M_LSTM, REQ(T("input", "FP32", "3", "[1]")), 0, -1, EINVAL_400,
         "inputs[0].shape: must be a list, got 3"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,-3,3]", "[1]")), 0, -1, EINVAL_400,
         "inputs[0].shape[1]: must be a non-negative integer, got -3"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,2.5,3]", "[1]")), 0, -1, EINVAL_400,
         "inputs[0].shape[1]: must be a non-negative integer, got 2.5"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,\"2\",3]", "[1]")), 0, -1, EINVAL_400,
         "inputs[0].shape[1]: must be a non-negative integer, got \"2\""},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,1,1,1,1,1,1,1,1]", "[1]")), 0, -1, EINVAL_400,
         "inputs[0].shape: more than 8 dimensions"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[100000,100000,3]", "[1]")), 0, -1, ELIMIT_400,
         "inputs[0].shape: [100000, 100000, 3] has more than 16777216 elements"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[9223372036854775807,2,3]", "[1]")), 0, -1, ELIMIT_400,
         "has more than 16777216 elements"},
        /* Data. */
        {KS, M_LSTM, REQ("{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,2,3]}"), 0, -1,
         EINVAL_400, "inputs[0]: missing data (or parameters.binary_data_size)"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,2,3]", "{}")), 0, -1, EINVAL_400,
         "inputs[0].data: must be a list, got an object"},
        {KS, M_LSTM, REQ(X3 "," T("h0", "FP32", "[1,1,4]", "1")), 0, -1, EINVAL_400,
         "inputs[1].data: must be a list, got 1"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,4,3]", "[1,2,3,4,5,6,7,8,9,10,11]")), 0, -1,
         EINVAL_400, "inputs[0].data: expected 12 elements, got 11"},
        {KS, M_LSTM, REQ(X3 "," T("input", "FP32", "[1,4,3]", "[1,2,3,4,5,6,7,8,9,10,11,12,13]")),
         0, -1, EINVAL_400, "inputs[1].data: expected 12 elements, got 13"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,2,3]", "[[[1,2,3],[4,5]]]")), 0, -1, EINVAL_400,
         "inputs[0].data[0][1]: expected 3 elements, got 2"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,2,3]", "[[[1,2,3],[4,5,6]],[[1,2,3],[4,5,6]]]")), 0,
         -1, EINVAL_400, "inputs[0].data: expected 1 elements, got 2"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,2,3]", "[[[1,2,3],4]]")), 0, -1, EINVAL_400,
         "inputs[0].data[0][1]: expected an array of 3, got 4"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,2,3]", "[[[1,2,3],[4,5,[6]]]]")), 0, -1, EINVAL_400,
         "inputs[0].data[0][1][2]: expected a number, got an array of 1"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "INT32", "[1]", "[[2]]")), 0, -1, EINVAL_400,
         "inputs[1].data[0]: expected a number, got an array of 1"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,2,3]", "[1,2,\"x\",4,5,6]")), 0, -1, EINVAL_400,
         "inputs[0].data[2]: expected a number, got \"x\""},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,2,3]", "[1,2,true,4,5,6]")), 0, -1, EINVAL_400,
         "inputs[0].data[2]: expected a number, got true"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,2,3]", "[1,2,null,4,5,6]")), 0, -1, EINVAL_400,
         "inputs[0].data[2]: expected a number, got null"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,2,3]", "[1,2,3,4,5,1e39]")), 0, -1, EINVAL_400,
         "inputs[0].data[5]: 1e+39 is not finite in FP32"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,2,3]", "[1,2,3,4,5,-3.5e38]")), 0, -1, EINVAL_400,
         "inputs[0].data[5]: -3.5e+38 is not finite in FP32"},
        /* Integer text beyond int64 is jansson's error, on every path (numparse.h);
         * 128 bytes or more, so that the fast paths see it. */
        {KS, M_LSTM,
         REQ(T("input", "FP32", "[1,8,3]",
               "[[[1,2,3],[4,5,6],[7,8,9],[1,2,3],[4,5,6],[7,8,9],[1,2,3],"
               "[4,5,92233720368547758080]]]")),
         0, -1, EINVAL_400, "too big integer"},
        {KS, M_LSTM, REQ(T("input", "FP16", "[1,2,3]", "[1,2,3,4,5,70000]")), 0, -1, EINVAL_400,
         "inputs[0].data[5]: 70000 is not finite in FP16"},
        {KS, M_LSTM, REQ(T("input", "BF16", "[1,2,3]", "[1,2,3,4,5,3.4e38]")), 0, -1, EINVAL_400,
         "inputs[0].data[5]: 3.4e+38 is not finite in BF16"},
        {KS, M_LSTM, REQ(T("input", "FP64", "[1,2,3]", "[1,2,3,4,5,1e300]")), 0, -1, EINVAL_400,
         "input 'input': datatype FP64 not accepted (FP32 or FP16)"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "INT32", "[1]", "[3000000000]")), 0, -1, EINVAL_400,
         "inputs[1].data[0]: 3000000000 is out of range for INT32"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "INT32", "[1]", "[3e9]")), 0, -1, EINVAL_400,
         "inputs[1].data[0]: 3000000000.0 is out of range for INT32"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "INT64", "[1]", "[2.5]")), 0, -1, EINVAL_400,
         "inputs[1].data[0]: 2.5 is not an integer (INT64)"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "UINT8", "[1]", "[-1]")), 0, -1, EINVAL_400,
         "inputs[1].data[0]: -1 is out of range for UINT8"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "INT8", "[1]", "[128]")), 0, -1, EINVAL_400,
         "inputs[1].data[0]: 128 is out of range for INT8"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "INT64", "[1]", "[1e19]")), 0, -1, EINVAL_400,
         "out of range for INT64"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "INT64", "[1]", "[99999999999999999999]")), 0, -1,
         EINVAL_400, "invalid JSON"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "BOOL", "[1]", "[1]")), 0, -1, EINVAL_400,
         "inputs[1].data[0]: expected true or false, got 1"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "BOOL", "[1]", "[true]")), 0, -1, EINVAL_400,
         "input 'lengths': datatype BOOL not accepted (INT32 or INT64)"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "INT8", "[1]", "[2]")), 0, -1, EINVAL_400,
         "input 'lengths': datatype INT8 not accepted (INT32 or INT64)"},
        /* Input parameters and the binary extension. */
        {KS, M_LSTM,
         REQ("{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,1,3],"
             "\"parameters\":[1],\"data\":[1,2,3]}"),
         0, -1, EINVAL_400, "inputs[0].parameters: must be an object, got an array of 1"},
        /* The shared memory extension's parameters: both or none, and nothing else. */
        {KS, M_LSTM,
         REQ("{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,1,3],"
             "\"parameters\":{\"shared_memory_region\":\"r\"}}"),
         0, -1, EINVAL_400,
         "inputs[0].parameters: shared_memory_region without shared_memory_byte_size"},
        {KS, M_LSTM,
         REQ("{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,1,3],"
             "\"parameters\":{\"shared_memory_offset\":8}}"),
         0, -1, EINVAL_400,
         "inputs[0].parameters: shared_memory_offset without shared_memory_region"},
        {KS, M_LSTM,
         REQ("{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,1,3],"
             "\"parameters\":{\"shared_memory_region\":\"r\",\"shared_memory_byte_size\":8}}"),
         0, -1, EINVAL_400,
         "inputs[0]: parameters.shared_memory_byte_size is 8, but FP32 [1, 1, 3] takes 12"},
        {KS, M_LSTM,
         REQ("{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,1,3],\"data\":[1,2,3],"
             "\"parameters\":{\"shared_memory_region\":\"r\",\"shared_memory_byte_size\":12}}"),
         0, -1, EINVAL_400, "inputs[0]: has both data and parameters.shared_memory_region"},
        {KS, M_LSTM,
         REQ("{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,1,3],"
             "\"parameters\":{\"shared_memory_region\":\"\",\"shared_memory_byte_size\":12}}"),
         0, -1, EINVAL_400, "inputs[0].parameters.shared_memory_region: "},
        {KS, M_LSTM,
         REQ("{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,1,3],"
             "\"parameters\":{\"shared_memory_region\":\"r\",\"shared_memory_byte_size\":-1}}"),
         0, -1, EINVAL_400, "inputs[0].parameters.shared_memory_byte_size: "},
        {KS, M_LSTM,
         REQ("{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,1,3],\"data\":[1,2,3],"
             "\"parameters\":{\"shared_memory_handle\":1}}"),
         0, -1, EINVAL_400,
         "inputs[0].parameters.shared_memory_handle: unknown shared memory parameter"},
        {KS, M_LSTM,
         REQ("{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,1,3],"
             "\"parameters\":{\"binary_data_size\":-12}}"),
         0, -1, EINVAL_400,
         "inputs[0].parameters.binary_data_size: must be a non-negative integer, got -12"},
        {KS, M_LSTM,
         REQ("{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,1,3],"
             "\"parameters\":{\"binary_data_size\":\"12\"}}"),
         0, -1, EINVAL_400, "binary_data_size: must be a non-negative integer, got \"12\""},
        {KS, M_LSTM,
         BIN("{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,1,1],"
             "\"data\":[1],\"parameters\":{\"binary_data_size\":4}}]}",
             "\0\0\0\0"),
         EINVAL_400, "inputs[0]: has both data and parameters.binary_data_size"},
        {KS, M_LSTM, BIN(BIN_IN("FP32", "[1,1,3]", "8"), "\0\0\0\0\0\0\0\0"), EINVAL_400,
         "inputs[0].parameters.binary_data_size: 8 bytes, but FP32 [1, 1, 3] takes 12"},
        {KS, M_LSTM, BIN(BIN_IN("FP32", "[1,1,3]", "12"), "\0\0\x80\x3f\0\0\x80\x3f"), EINVAL_400,
         "inputs[0].parameters.binary_data_size: 12 bytes, but only 8 remain after the JSON"},
        {KS, M_LSTM,
         REQ("{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,1,3],"
             "\"parameters\":{\"binary_data_size\":12}}"),
         0, -1, EINVAL_400, "12 bytes, but only 0 remain after the JSON"},
        {KS, M_LSTM,
         BIN(BIN_IN("FP32", "[1,1,3]", "12"), "\0\0\x80\x3f\0\0\x80\x3f\0\0\x80\x3f\0\0\0\0"),
         EINVAL_400,
         "16 bytes follow the JSON (Inference-Header-Content-Length), but the "
         "binary_data_size of the inputs add up to 12"},
        {KS, M_LSTM, BIN(REQ(X3), "\0\0\0\0"), EINVAL_400,
         "4 bytes follow the JSON (Inference-Header-Content-Length)"},
        {KS, M_LSTM, REQ(X3), 0, 1000, EINVAL_400,
         "Inference-Header-Content-Length 1000 is larger than the body"},
        {KS, M_LSTM, REQ(X3), 0, 0, EINVAL_400,
         "Inference-Header-Content-Length 0 (a raw binary request) is not supported"},
        {KS, M_LSTM, REQ(X3), 0, 10, EINVAL_400, "invalid JSON"},
        {KS, M_LSTM, BIN(BIN_IN("FP32", "[1,1,3]", "12"), "\0\0\x80\x3f\0\0\xc0\x7f\0\0\x80\x3f"),
         EINVAL_400, "input 'input': element 1 is not finite"},
        {KS, M_LSTM, BIN(BIN_IN("FP32", "[1,1,3]", "12"), "\0\0\x80\x3f\0\0\x80\x3f\0\0\x80\xff"),
         EINVAL_400, "input 'input': element 2 is not finite"},
        {KS, M_LSTM, BIN(BIN_IN("FP16", "[1,1,3]", "6"), "\0\x3c\0\x7c\0\x3c"), EINVAL_400,
         "input 'input': element 1 is not finite"},
        /* Request parameters. */
        {KS, M_LSTM, "{\"parameters\":[],\"inputs\":[" X3 "]}", 0, -1, EINVAL_400,
         "parameters: must be an object, got an array of 0"},
        {KS, M_LSTM, "{\"parameters\":{\"sequence_id\":-1},\"inputs\":[" X3 "]}", 0, -1, EINVAL_400,
         "parameters.sequence_id: must be an unsigned integer or a string, got -1"},
        /* Ids are unsigned 64-bit (docs/HTTP.md): past that, or anywhere else, too big. */
        {KS, M_LSTM, "{\"parameters\":{\"sequence_id\":18446744073709551616},\"inputs\":[" X3 "]}",
         0, -1, EINVAL_400,
         "parameters.sequence_id: 18446744073709551616 is past 18446744073709551615, the largest "
         "id"},
        {KS, M_LSTM, "{\"parameters\":{\"sequence_id\":-9223372036854775809},\"inputs\":[" X3 "]}",
         0, -1, EINVAL_400, "too big negative integer"},
        {KS, M_LSTM,
         "{\"parameters\":{\"x\":{\"sequence_id\":18446744073709551615}},\"inputs\":[" X3 "]}", 0,
         -1, EINVAL_400, "too big integer"},
        {KS, M_LSTM,
         "{\"parameters\":{\"priority\":18446744073709551615,\"sequence_id\":1},\"inputs\":[" X3
         "]}",
         0, -1, EINVAL_400, "too big integer"},
        {KS, M_LSTM, "{\"parameters\":{\"sequence_id\":true},\"inputs\":[" X3 "]}", 0, -1,
         EINVAL_400, "parameters.sequence_id: must be an unsigned integer or a string, got true"},
        {KS, M_LSTM, "{\"parameters\":{\"sequence_id\":1.5},\"inputs\":[" X3 "]}", 0, -1,
         EINVAL_400, "parameters.sequence_id: must be an unsigned integer or a string, got 1.5"},
        {KS, M_LSTM, "{\"parameters\":{\"sequence_id\":\"" A128 "b\"},\"inputs\":[" X3 "]}", 0, -1,
         EINVAL_400, "parameters.sequence_id: longer than 128 bytes"},
        {KS, M_LSTM, "{\"parameters\":{\"sequence_id\":42},\"inputs\":[" X3 "]}", 0, -1, EINVAL_400,
         "parameters.sequence_id: this model does not support sequences"},
        {KS, M_LSTM, "{\"parameters\":{\"sequence_start\":true},\"inputs\":[" X3 "]}", 0, -1,
         EINVAL_400, "parameters.sequence_start: this model does not support sequences"},
        {KS, M_LSTM, "{\"parameters\":{\"sequence_end\":true},\"inputs\":[" X3 "]}", 0, -1,
         EINVAL_400, "parameters.sequence_end: this model does not support sequences"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "INT64", "[1,2]", "[1,1]")), 0, -1, EINVAL_400,
         "input 'lengths': shape [1, 2] does not match [1, 1]"},
        {KS, M_LSTM, "{\"parameters\":{\"sequence_start\":1},\"inputs\":[" X3 "]}", 0, -1,
         EINVAL_400, "parameters.sequence_start: must be true or false, got 1"},
        {KS, M_LSTM, "{\"parameters\":{\"sequence_end\":\"true\"},\"inputs\":[" X3 "]}", 0, -1,
         EINVAL_400, "parameters.sequence_end: must be true or false, got \"true\""},
        {KS, M_LSTM, "{\"parameters\":{\"priority\":\"high\"},\"inputs\":[" X3 "]}", 0, -1,
         EINVAL_400, "parameters.priority: must be an integer, got \"high\""},
        {KS, M_LSTM, "{\"parameters\":{\"timeout\":-5},\"inputs\":[" X3 "]}", 0, -1, EINVAL_400,
         "parameters.timeout: must be a non-negative integer, got -5"},
        {KS, M_LSTM, "{\"parameters\":{\"binary_data_output\":\"yes\"},\"inputs\":[" X3 "]}", 0, -1,
         EINVAL_400, "parameters.binary_data_output: must be true or false, got \"yes\""},
        {KS, M_LSTM, "{\"parameters\":{\"headers\":{}},\"inputs\":[" X3 "]}", 0, -1, EINVAL_400,
         "parameters.headers: reserved parameter name"},
        {KS, M_LSTM, "{\"parameters\":{\"triton_enable_x\":true},\"inputs\":[" X3 "]}", 0, -1,
         EINVAL_400, "parameters.triton_enable_x: reserved parameter name"},
        /* Outputs list. */
        {KS, M_LSTM, "{\"inputs\":[" X3 "],\"outputs\":{}}", 0, -1, EINVAL_400,
         "outputs: must be a list, got an object"},
        {KS, M_LSTM, "{\"inputs\":[" X3 "],\"outputs\":[\"h_n\"]}", 0, -1, EINVAL_400,
         "outputs[0]: must be an object, got \"h_n\""},
        {KS, M_LSTM, "{\"inputs\":[" X3 "],\"outputs\":[{\"name\":\"h_n\",\"x\":1}]}", 0, -1,
         EINVAL_400, "outputs[0]: unknown field 'x'"},
        {KS, M_LSTM, "{\"inputs\":[" X3 "],\"outputs\":[{\"parameters\":{}}]}", 0, -1, EINVAL_400,
         "outputs[0].name: missing"},
        {KS, M_LSTM, "{\"inputs\":[" X3 "],\"outputs\":[{\"name\":[]}]}", 0, -1, EINVAL_400,
         "outputs[0].name: must be a string, got an array of 0"},
        {KS, M_LSTM, "{\"inputs\":[" X3 "],\"outputs\":[{\"name\":\"h_n\"},{\"name\":\"h_n\"}]}", 0,
         -1, EINVAL_400, "outputs[1].name: 'h_n' is requested twice"},
        {KS, M_LSTM, "{\"inputs\":[" X3 "],\"outputs\":" NINE_OUT "}", 0, -1, EINVAL_400,
         "outputs: more than 8 outputs"},
        {KS, M_LSTM,
         "{\"inputs\":[" X3 "],\"outputs\":[{\"name\":\"h_n\",\"parameters\":"
         "{\"binary_data\":1}}]}",
         0, -1, EINVAL_400, "outputs[0].parameters.binary_data: must be true or false, got 1"},
        {KS, M_LSTM,
         "{\"inputs\":[" X3 "],\"outputs\":[{\"name\":\"scores\",\"parameters\":"
         "{\"classification\":2}}]}",
         0, -1, EINVAL_400, "outputs[0].parameters.classification: not supported"},
        {KS, M_LSTM,
         "{\"inputs\":[" X3 "],\"outputs\":[{\"name\":\"h_n\",\"parameters\":"
         "{\"shared_memory_byte_size\":8}}]}",
         0, -1, EINVAL_400,
         "outputs[0].parameters: shared_memory_byte_size without shared_memory_region"},
        {KS, M_LSTM, "{\"inputs\":[" X3 "],\"outputs\":[{\"name\":\"h_n\",\"parameters\":5}]}", 0,
         -1, EINVAL_400, "outputs[0].parameters: must be an object, got 5"},
        /* Binding: names. */
        {KS, M_LSTM, REQ(X3 "," T("foo", "FP32", "[1]", "[1]")), 0, -1, EINVAL_400,
         "input 'foo' is not an input of this model (input, lengths, h0, c0)"},
        {KS, M_GRU, REQ(T("foo", "FP32", "[1]", "[1]")), 0, -1, EINVAL_400,
         "input 'foo' is not an input of this model (input, lengths, h0)"},
        {KS, M_LSTM, REQ(T("lengths", "INT32", "[1]", "[1]")), 0, -1, EINVAL_400,
         "missing input 'input' (FP32 or FP16 [B, T, 3])"},
        {KS, M_LSTM, REQ(""), 0, -1, EINVAL_400, "missing input 'input'"},
        {KS, M_EMB, REQ(T("lengths", "INT32", "[1]", "[1]")), 0, -1, EINVAL_400,
         "missing input 'tokens' (INT32 or INT64 [B, T])"},
        {KS, M_EMB, REQ(T("input", "FP32", "[1,1,4]", "[1,2,3,4]")), 0, -1, EINVAL_400,
         "input 'input': this model has an embedding; send token ids in 'tokens'"},
        {KS, M_LSTM, REQ(X3 "," T("tokens", "INT32", "[1,2]", "[1,2]")), 0, -1, EINVAL_400,
         "input 'tokens': this model has no embedding; send 'input'"},
        {KS, M_LSTM, REQ(X3 "," X3), 0, -1, EINVAL_400, "input 'input' is given twice"},
        {KS, M_GRU,
         REQ(T("input", "FP32", "[1,1,2]", "[1,2]") "," T("c0", "FP32", "[1,4,3]",
                                                          "[0,0,0,0,0,0,0,0,0,0,0,0]")),
         0, -1, EINVAL_400, "input 'c0': only LSTM models take c0 (this model is gru)"},
        /* Binding: dtypes and shapes. */
        {KS, M_LSTM, REQ(T("input", "INT32", "[1,1,3]", "[1,2,3]")), 0, -1, EINVAL_400,
         "input 'input': datatype INT32 not accepted (FP32 or FP16)"},
        {KS, M_EMB, REQ(T("tokens", "FP32", "[1,2]", "[1,2]")), 0, -1, EINVAL_400,
         "input 'tokens': datatype FP32 not accepted (INT32 or INT64)"},
        {KS, M_LSTM, REQ(X3 "," T("h0", "INT64", "[1,1,4]", "[1,2,3,4]")), 0, -1, EINVAL_400,
         "input 'h0': datatype INT64 not accepted (FP32 or FP16)"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,2,7]", "[1,2,3,4,5,6,7,8,9,10,11,12,13,14]")), 0,
         -1, EINVAL_400, "input 'input': shape [1, 2, 7] does not match [B, T, 3]"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[2,3]", "[1,2,3,4,5,6]")), 0, -1, EINVAL_400,
         "input 'input': shape [2, 3] does not match [B, T, 3]"},
        {KS, M_EMB, REQ(T("tokens", "INT64", "[1,2,1]", "[1,2]")), 0, -1, EINVAL_400,
         "input 'tokens': shape [1, 2, 1] does not match [B, T]"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[0,2,3]", "[]")), 0, -1, EINVAL_400,
         "input 'input': batch size 0 is outside 1..4 (max_batch_size)"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[5,1,3]", "[1,2,3,1,2,3,1,2,3,1,2,3,1,2,3]")), 0, -1,
         ELIMIT_400, "input 'input': batch size 5 is outside 1..4 (max_batch_size)"},
        {KS, M_LSTM, REQ(T("input", "FP32", "[1,0,3]", "[]")), 0, -1, EINVAL_400,
         "input 'input': sequence length 0 is outside 1..6 (max_sequence_length)"},
        {KS, M_LSTM,
         REQ(T("input", "FP32", "[1,7,3]", "[1,2,3,1,2,3,1,2,3,1,2,3,1,2,3,1,2,3,1,2,3]")), 0, -1,
         ELIMIT_400, "input 'input': sequence length 7 is outside 1..6 (max_sequence_length)"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "INT32", "[2]", "[1,2]")), 0, -1, EINVAL_400,
         "input 'lengths': shape [2] does not match [1]"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "INT32", "[1]", "[0]")), 0, -1, EINVAL_400,
         "input 'lengths'[0]: 0 is outside 1..2"},
        {KS, M_LSTM,
         REQ(T("input", "FP32", "[3,2,3]", "[1,2,3,4,5,6,1,2,3,4,5,6,1,2,3,4,5,6]") "," T(
                 "lengths", "INT64", "[3]", "[1,2,9]")),
         0, -1, EINVAL_400, "input 'lengths'[2]: 9 is outside 1..2"},
        {KS, M_LSTM, REQ(X3 "," T("lengths", "INT32", "[1]", "[-1]")), 0, -1, EINVAL_400,
         "input 'lengths'[0]: -1 is outside 1..2"},
        {KS, M_EMB, REQ(T("tokens", "INT32", "[2,4]", "[1,2,3,4,5,6,7,40]")), 0, -1, EINVAL_400,
         "input 'tokens'[1][3]: 40 is outside 0..19"},
        {KS, M_EMB, REQ(T("tokens", "INT64", "[1,2]", "[-1,2]")), 0, -1, EINVAL_400,
         "input 'tokens'[0][0]: -1 is outside 0..19"},
        {KS, M_LSTM, REQ(X3 "," T("h0", "FP32", "[1,2,4]", "[1,2,3,4,5,6,7,8]")), 0, -1, EINVAL_400,
         "input 'h0': shape [1, 2, 4] does not match [1, 1, 4]"},
        {KS, M_EMB,
         REQ(T("tokens", "INT64", "[1,2]", "[1,2]") "," T("c0", "FP32", "[1,1,2]", "[1,2]")), 0, -1,
         EINVAL_400, "input 'c0': shape [1, 1, 2] does not match [1, 1, 3]"},
        {KS, M_GRU,
         REQ(T("input", "FP32", "[1,1,2]", "[1,2]") "," T("h0", "FP32", "[1,4,2]",
                                                          "[1,2,3,4,5,6,7,8]")),
         0, -1, EINVAL_400, "input 'h0': shape [1, 4, 2] does not match [1, 4, 3]"},
        /* Binding: outputs. */
        {KS, M_LSTM, "{\"inputs\":[" X3 "],\"outputs\":[{\"name\":\"foo\"}]}", 0, -1, EINVAL_400,
         "output 'foo' is not an output of this model (output, h_n, c_n, scores)"},
        {KS, M_GRU,
         "{\"inputs\":[" T("input", "FP32", "[1,1,2]", "[1,2]") "],\"outputs\":[{\"name\":"
                                                                "\"c_n\"}]}",
         0, -1, EINVAL_400, "output 'c_n': only LSTM models have c_n (this model is gru)"},
        {KS, M_GRU,
         "{\"inputs\":[" T("input", "FP32", "[1,1,2]", "[1,2]") "],\"outputs\":[{\"name\":"
                                                                "\"scores\"}]}",
         0, -1, EINVAL_400, "output 'scores': this model has no head"},
        /* TF Serving. */
        {TF, M_LSTM, "", 0, -1, EINVAL_400, "the body is empty"},
        {TF, M_LSTM, "{\"instances\":", 0, -1, EINVAL_400, "invalid JSON"},
        {TF, M_LSTM, "[[[1,2,3]]]", 0, -1, EINVAL_400, "the request must be a JSON object"},
        {TF, M_LSTM, "{\"instances\":" D10 D10 D10 D10 "}", 0, -1, ELIMIT_400, "deeper than 32"},
        {TF, M_LSTM, "{}", 0, -1, EINVAL_400, "exactly one of 'instances' and 'inputs'"},
        {TF, M_LSTM, "{\"instances\":[],\"inputs\":[]}", 0, -1, EINVAL_400, "exactly one of"},
        {TF, M_LSTM, "{\"instances\":[[[1,2,3]]],\"foo\":1}", 0, -1, EINVAL_400,
         "unknown field 'foo'"},
        {TF, M_LSTM, "{\"signature_name\":\"other\",\"instances\":[[[1,2,3]]]}", 0, -1, EINVAL_400,
         "signature_name: \"other\" is not a signature of this model"},
        {TF, M_LSTM, "{\"signature_name\":5,\"instances\":[[[1,2,3]]]}", 0, -1, EINVAL_400,
         "signature_name: 5 is not a signature"},
        {TF, M_LSTM, "{\"instances\":{}}", 0, -1, EINVAL_400,
         "instances: must be a list, got an object"},
        {TF, M_LSTM, "{\"instances\":[]}", 0, -1, EINVAL_400, "instances: must not be empty"},
        {TF, M_LSTM, "{\"instances\":[[[1,2,3]],[]]}", 0, -1, EINVAL_400,
         "instances[1]: empty sequence"},
        {TF, M_LSTM, "{\"instances\":[5]}", 0, -1, EINVAL_400,
         "instances[0]: must be a list or an object, got 5"},
        {TF, M_LSTM, "{\"instances\":[[1,2,3]]}", 0, -1, EINVAL_400,
         "instances[0]: shape [3], but 'input' takes 2 levels of lists per instance"},
        {TF, M_LSTM, "{\"instances\":[[[1,2,3],[4,5]]]}", 0, -1, EINVAL_400,
         "instances[0][1]: expected 3 elements, got 2"},
        {TF, M_LSTM, "{\"instances\":[[[1,2,3]],[[1,2],[3,4]]]}", 0, -1, EINVAL_400,
         "instances[1]: shape [2, 2] does not match instances[0]'s [1, 3]"},
        {TF, M_LSTM, "{\"instances\":[[[1,\"a\",3]]]}", 0, -1, EINVAL_400,
         "instances[0][0][1]: expected a number, got \"a\""},
        {TF, M_LSTM, "{\"instances\":[{\"input\":[[1,2,3]],\"foo\":1}]}", 0, -1, EINVAL_400,
         "instances[0]: unknown field 'foo'"},
        {TF, M_LSTM, "{\"instances\":[{\"input\":[[1,2,3]],\"lengths\":1}]}", 0, -1, EINVAL_400,
         "instances[0]: 'lengths' is not accepted in row format"},
        {TF, M_LSTM, "{\"instances\":[{\"h0\":[[1,2,3,4]]}]}", 0, -1, EINVAL_400,
         "instances[0]: missing 'input'"},
        {TF, M_LSTM, "{\"instances\":[[[1,2,3]],{\"h0\":[[1,2,3,4]]}]}", 0, -1, EINVAL_400,
         "instances[1]: missing 'input' (instances[0] has it)"},
        {TF, M_LSTM, "{\"instances\":[{\"input\":[[1,2,3]],\"h0\":[1,2,3,4]}]}", 0, -1, EINVAL_400,
         "instances[0].h0: shape [4], but 'h0' takes 2 levels of lists per instance"},
        {TF, M_LSTM, "{\"instances\":[{\"input\":[[1,2,3]],\"h0\":[[1,2,3]]}]}", 0, -1, EINVAL_400,
         "input 'h0': shape [1, 1, 3] does not match [1, 1, 4]"},
        {TF, M_LSTM,
         "{\"instances\":[{\"input\":[[1,2,3]],\"h0\":[[1,2,3,4]]},{\"input\":"
         "[[1,2,3]],\"h0\":[[1,2,3,4],[1,2,3,4]]}]}",
         0, -1, EINVAL_400, "instances[1].h0: shape [2, 4] does not match instances[0]'s [1, 4]"},
        {TF, M_LSTM, "{\"instances\":[{\"input\":[[1,2,3]],\"tokens\":[1,2]}]}", 0, -1, EINVAL_400,
         "instances[0].tokens: 2 steps, but 'input' has 1"},
        {TF, M_LSTM, "{\"instances\":[[[1,2,3]],[[1,2,3]],[[1,2,3]],[[1,2,3]],[[1,2,3]]]}", 0, -1,
         ELIMIT_400, "input 'input': batch size 5 is outside 1..4"},
        {TF, M_LSTM, "{\"instances\":[[[1,2,3],[1,2,3],[1,2,3],[1,2,3],[1,2,3],[1,2,3],[1,2,3]]]}",
         0, -1, ELIMIT_400, "sequence length 7 is outside 1..6"},
        {TF, M_GRU,
         "{\"instances\":[{\"input\":[[1,2]],\"c0\":[[1,2,3],[1,2,3],[1,2,3],[1,2,3]]}]}", 0, -1,
         EINVAL_400, "input 'c0': only LSTM models take c0"},
        {TF, M_EMB, "{\"instances\":[[1,2.5]]}", 0, -1, EINVAL_400,
         "instances[0][1]: 2.5 is not an integer (INT64)"},
        {TF, M_EMB, "{\"instances\":[[1,40]]}", 0, -1, EINVAL_400,
         "input 'tokens'[0][1]: 40 is outside 0..19"},
        {TF, M_EMB, "{\"instances\":[[[1],[2]]]}", 0, -1, EINVAL_400,
         "instances[0]: shape [2, 1], but 'tokens' takes 1 level of lists per instance"},
        {TF, M_EMB, "{\"instances\":[{\"input\":[[1,2,3,4]]}]}", 0, -1, EINVAL_400,
         "input 'input': this model has an embedding"},
        {TF, M_LSTM, "{\"inputs\":{\"input\":[[[1,2,3],[4,5,6]],[[1,2,3]]]}}", 0, -1, EINVAL_400,
         "inputs.input[1]: expected 2 elements, got 1"},
        {TF, M_LSTM, "{\"inputs\":{\"input\":[[[1,2,3]]],\"foo\":[1]}}", 0, -1, EINVAL_400,
         "input 'foo' is not an input of this model"},
        {TF, M_LSTM, "{\"inputs\":[[1,2,3]]}", 0, -1, EINVAL_400,
         "input 'input': shape [1, 3] does not match [B, T, 3]"},
        {TF, M_LSTM, "{\"inputs\":{\"input\":[[[1,2,3]]],\"lengths\":[0]}}", 0, -1, EINVAL_400,
         "input 'lengths'[0]: 0 is outside 1..1"},
        {TF, M_LSTM, "{\"inputs\":{\"input\":[[[1,2,3]]],\"lengths\":[1.5]}}", 0, -1, EINVAL_400,
         "inputs.lengths[0]: 1.5 is not an integer (INT64)"},
        {TF, M_LSTM, "{\"inputs\":{\"input\":[[[1,2,3]]],\"lengths\":1}}", 0, -1, EINVAL_400,
         "input 'lengths': shape [] does not match [1]"},
        {TF, M_LSTM, "{\"inputs\":{\"input\":[[[1,2,1e39]]]}}", 0, -1, EINVAL_400,
         "inputs.input[0][0][2]: 1e+39 is not finite in FP32"},
        {TF, M_LSTM, "{\"inputs\":" D10 D10 D10 "1" C10 C10 C10 "}", 0, -1, EINVAL_400,
         "inputs: lists nested more than 8 levels"},
        {TF, M_LSTM,
         "{\"inputs\":{\"a\":1,\"b\":1,\"c\":1,\"d\":1,\"e\":1,\"f\":1,\"g\":1,\"h\":1,"
         "\"i\":1}}",
         0, -1, EINVAL_400, "inputs.i: more than 8 tensors"},
};

START_TEST(test_bad)
{
        const struct bad *c = &bad[_i];
        struct rnnd_model_config cfg;
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;
        rnnd_error_t e = {0};
        size_t len = c->len ? c->len : strlen(c->body);
        size_t jl = c->json_len < 0 ? len : (size_t)c->json_len;
        int r;

        make_cfg(c->model, &cfg);
        if (c->fmt == KS)
                r = rnnd_kserve_parse(c->body, len, jl, NULL, &req, &e);
        else
                r = rnnd_tfs_parse(c->body, len, &cfg, NULL, &req, &e);
        if (r == 0) {
                r = rnnd_infer_bind(&req, &cfg, &b, &e);
                if (r == 0)
                        rnnd_infer_bound_done(&b);
                rnnd_infer_request_done(&req);
        }
        ck_assert_msg(r == c->code, "row %d: got %d (%s), want %d", _i, r, e.msg, c->code);
        ck_assert_int_eq(e.code, c->code);
        ck_assert_int_eq(rnnd_error_http_status(r), c->status);
        ck_assert_msg(strstr(e.msg, c->msg) != NULL, "row %d: \"%s\" lacks \"%s\"", _i, e.msg,
                      c->msg);
}
END_TEST

/*
 * Bodies read only within len (the fuzzer's finding, kept): JSON that ends
 * inside a string on a backslash made the big-sequence_id walk read past it.
 * Each body is in a heap block of exactly its length, so the address
 * sanitizer builds of this suite see any read past it.
 */
START_TEST(test_unclosed_string)
{
        static const char *const bodies[] = {"{\"XXN\x01\\\x01\x01;\\", "{\"parameters\\",
                                             "{\"parameters\":{\"sequence_id\\",
                                             "{\"parameters\":{\"a\":1,\"\\"};
        struct rnnd_infer_request req;
        rnnd_error_t e = {0};

        for (size_t k = 0; k < RNND_ELEMENTSOF(bodies); k++) {
                size_t n = strlen(bodies[k]);
                char *b = malloc(n);

                ck_assert_ptr_nonnull(b);
                memcpy(b, bodies[k], n);
                ck_assert_int_eq(rnnd_kserve_parse(b, n, n, NULL, &req, &e), RNND_EINVAL);
                free(b);
        }
}
END_TEST

/* A smaller element limit is enforced from the shape, as ELIMIT (400). */
START_TEST(test_limits)
{
        static const char body[] = REQ(X3);
        struct rnnd_infer_limits lim;
        struct rnnd_infer_request req;
        rnnd_error_t e = {0};

        rnnd_infer_limits_default(&lim);
        ck_assert_uint_eq(lim.max_elements, RNND_INFER_DEFAULT_MAX_ELEMENTS);
        ck_assert_uint_eq(lim.max_depth, 32);
        lim.max_elements = 5;
        ck_assert_int_eq(rnnd_kserve_parse(body, strlen(body), strlen(body), &lim, &req, &e),
                         RNND_ELIMIT);
        ck_assert_str_eq(e.msg, "inputs[0].shape: [1, 2, 3] has more than 5 elements (the limit)");
        lim.max_elements = 6;
        lim.max_depth = 3;
        ck_assert_int_eq(rnnd_kserve_parse(body, strlen(body), strlen(body), &lim, &req, &e),
                         RNND_ELIMIT);
        ck_assert_str_eq(e.msg, "JSON nested deeper than 3 levels");
        lim.max_depth = 4;
        ck_assert_int_eq(rnnd_kserve_parse(body, strlen(body), strlen(body), &lim, &req, &e), 0);
        rnnd_infer_request_done(&req);
}
END_TEST

/* Bytes malloc hands out now (glibc's count; 0 under a sanitizer's allocator). */
static size_t heap_used(void)
{
        struct mallinfo2 m = mallinfo2();

        return m.uordblks + m.hblkhd;
}

/*
 * max_json_memory: the scan's estimate of jansson's tree is at least what
 * jansson takes, and not far above, for the shapes of JSON that cost most a
 * byte; a text past the limit fails before any tree is built.
 */
START_TEST(test_tree_bound)
{
        static const char *const items[] = {
                "0",     "0.5",       "[]",         "{}",
                "\"a\"", "{\"a\":1}", "[0.25,0.5]", "\"abcdefghijklmnopqrstuvwxyz0123456789\""};
        const size_t n = 20000;

        for (size_t k = 0; k < sizeof(items) / sizeof(items[0]); k++) {
                struct rnnd_infer_limits lim;
                struct rnnd_strbuf b;
                rnnd_error_t e = {0};
                json_t *root = NULL;
                size_t before, took;

                rnnd_strbuf_init(&b);
                rnnd_strbuf_puts(&b, "{\"x\":[");
                for (size_t i = 0; i < n; i++) {
                        rnnd_strbuf_puts(&b, i > 0 ? "," : "");
                        rnnd_strbuf_puts(&b, items[k]);
                }
                rnnd_strbuf_puts(&b, "]}");
                rnnd_infer_limits_default(&lim);
                lim.max_tree = UINT64_MAX;
                before = heap_used();
                ck_assert_int_eq(rnnd__infer_load_object(b.data, b.len, &lim, &root, &e), 0);
                took = heap_used() - before;
                json_decref(root);
                if (took == 0) { /* a sanitizer's allocator: nothing to compare */
                        rnnd_strbuf_done(&b);
                        continue;
                }
                lim.max_tree = took - 1;
                ck_assert_msg(rnnd__infer_check_text(b.data, b.len, &lim, &e) == RNND_ELIMIT,
                              "%s: the estimate is below jansson's %zu bytes", items[k], took);
                ck_assert_ptr_nonnull(strstr(e.msg, "max_json_memory"));
                lim.max_tree = 2 * took;
                ck_assert_msg(rnnd__infer_check_text(b.data, b.len, &lim, &e) == 0,
                              "%s: the estimate is over twice jansson's %zu bytes (%s)", items[k],
                              took, e.msg);
                rnnd_strbuf_done(&b);
        }
}
END_TEST

/*
 * Rendering and reading back
 */

/* xorshift32: reproducible bits. */
static uint32_t rnd(uint32_t *s)
{
        *s ^= *s << 13;
        *s ^= *s >> 17;
        *s ^= *s << 5;
        return *s;
}

/* Bound and outputs of model m for B x T, each output filled with finite random floats. */
static void make_outputs(int m, uint32_t B, uint32_t T, bool binary, struct rnnd_infer_bound *b,
                         struct rnnd_infer_outputs *o)
{
        static const float special[] = {0.0f,      -0.0f,       1.0f,    0.1f,
                                        -1.0f / 3, 1e-45f,      FLT_MIN, FLT_MAX,
                                        -FLT_MAX,  16777217.0f, 1e-10f,  123456.789f};
        struct rnnd_model_config cfg;
        uint32_t seed = 12345;
        rnnd_error_t e = {0};

        make_cfg(m, &cfg);
        memset(b, 0, sizeof(*b));
        b->B = B;
        b->T = T;
        b->lengths = rnnd_mallocarray(B, sizeof(uint32_t));
        ck_assert_ptr_nonnull(b->lengths);
        for (uint32_t i = 0; i < B; i++)
                b->lengths[i] = T - i % T;
        for (unsigned k = 0; k < RNND_OUT_COUNT; k++) {
                if ((k == RNND_OUT_C_N && cfg.cell != RNND_CELL_LSTM) ||
                    (k == RNND_OUT_SCORES && !cfg.head.present))
                        continue;
                b->out[b->n_out++] = (rnnd_infer_output_t)k;
                b->want[k] = true;
                b->binary[k] = binary && k % 2 == 0;
        }
        ck_assert_int_eq(rnnd_infer_outputs_alloc(b, &cfg, o, &e), 0);
        for (unsigned i = 0; i < o->n; i++) {
                float *x = o->t[i].data;

                for (size_t j = 0; j < o->t[i].numel; j++) {
                        uint32_t u;

                        if (j < RNND_ELEMENTSOF(special)) {
                                x[j] = special[j];
                                continue;
                        }
                        do
                                u = rnd(&seed);
                        while ((u & 0x7f800000) == 0x7f800000);
                        memcpy(&x[j], &u, 4);
                }
        }
}

START_TEST(test_outputs_alloc)
{
        struct rnnd_infer_bound b;
        struct rnnd_infer_outputs o;

        make_outputs(M_EMB, 3, 4, false, &b, &o);
        ck_assert_uint_eq(o.n, 4);
        /* output [3, 4, 2] */
        ck_assert_uint_eq(o.t[0].ndim, 3);
        ck_assert_uint_eq(o.t[0].shape[2], 2);
        ck_assert_uint_eq(o.stride[RNND_OUT_OUTPUT], 8);
        /* h_n [3, 1, 2], c_n [3, 1, 3], scores (all) [3, 4, 5] */
        ck_assert_uint_eq(o.t[1].numel, 6);
        ck_assert_uint_eq(o.t[2].shape[2], 3);
        ck_assert_uint_eq(o.t[3].numel, 60);
        ck_assert_uint_eq(o.stride[RNND_OUT_SCORES], 20);
        ck_assert_ptr_eq(o.by_kind[RNND_OUT_SCORES], o.t[3].data);
        ck_assert_str_eq(o.t[3].name, "scores");
        ck_assert_uint_eq(o.lengths[1], 3);
        rnnd_infer_outputs_done(&o);
        rnnd_infer_bound_done(&b);

        make_outputs(M_LSTM, 2, 3, false, &b, &o);
        ck_assert_uint_eq(o.t[3].ndim, 2); /* scores (last) [2, 2] */
        ck_assert_uint_eq(o.t[3].numel, 4);
        rnnd_infer_outputs_done(&o);
        rnnd_infer_bound_done(&b);

        make_outputs(M_GRU, 1, 2, false, &b, &o);
        ck_assert_uint_eq(o.n, 2);
        ck_assert_uint_eq(o.t[0].shape[2], 6); /* dirs * H */
        ck_assert_uint_eq(o.t[1].shape[1], 4); /* layers * dirs */
        ck_assert_ptr_null(o.by_kind[RNND_OUT_C_N]);
        rnnd_infer_outputs_done(&o);
        rnnd_infer_bound_done(&b);
}
END_TEST

/* parse_response(render(x)) == x, bit for bit: _i = 0 JSON, 1 mixed binary. */
START_TEST(test_render_roundtrip)
{
        struct rnnd_infer_bound b;
        struct rnnd_infer_outputs o;
        struct rnnd_infer_response resp;
        rnnd_error_t e = {0};
        size_t len, jl;
        char *body;

        make_outputs(M_EMB, 7, 50, _i == 1, &b, &o);
        ck_assert_int_eq(rnnd_kserve_render("tagger \"x\"", 3, "req-1", &o, &body, &len, &jl, &e),
                         0);
        if (_i == 0)
                ck_assert_uint_eq(jl, len);
        else
                ck_assert_uint_lt(jl, len);
        ck_assert_int_eq(body[len], '\0');
        ck_assert_int_eq(rnnd_kserve_parse_response(body, len, jl, NULL, &resp, &e), 0);
        ck_assert_str_eq(resp.model_name, "tagger \"x\"");
        ck_assert_str_eq(resp.model_version, "3");
        ck_assert_str_eq(resp.id, "req-1");
        ck_assert_uint_eq(resp.n_outputs, o.n);
        for (unsigned i = 0; i < o.n; i++) {
                const struct rnnd_tensor *t = &resp.outputs[i];

                ck_assert_str_eq(t->name, o.t[i].name);
                ck_assert_int_eq(t->dtype, RNND_DT_F32);
                ck_assert_uint_eq(t->ndim, o.t[i].ndim);
                ck_assert_mem_eq(t->shape, o.t[i].shape, t->ndim * sizeof(uint64_t));
                ck_assert_uint_eq(t->nbytes, o.t[i].nbytes);
                ck_assert_mem_eq(t->data, o.t[i].data, t->nbytes);
        }
        rnnd_infer_response_done(&resp);
        rnnd_free(body);
        rnnd_infer_outputs_done(&o);
        rnnd_infer_bound_done(&b);
}
END_TEST

/*
 * max_response_bytes: the bound counts each wanted output at 17 bytes a JSON
 * float or 4 a binary one, plus 256 a tensor and 64 a sequence; one byte
 * under it is a 400 naming the limit.
 */
START_TEST(test_outputs_check)
{
        static const char body[] = "{\"inputs\":[" T(
                "input", "FP32", "[1,1,2]",
                "[1,2]") "],\"outputs\":[{\"name\":"
                         "\"h_n\"},{\"name\":\"output\",\"parameters\":{\"binary_data\":true}}]}";
        struct rnnd_model_config cfg;
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;
        struct rnnd_infer_outputs o;
        rnnd_error_t e = {0};
        uint64_t want = 0, floats = 0, held = 0;

        make_cfg(M_GRU, &cfg);
        kserve_ok(body, M_GRU, &req, &b);
        ck_assert_int_eq(rnnd_infer_outputs_alloc(&b, &cfg, &o, &e), 0);
        for (unsigned i = 0; i < o.n; i++) {
                want += o.t[i].numel * (o.binary[i] ? 4 : 17) + 256 + 64 * b.B;
                floats += o.t[i].numel;
        }
        ck_assert_int_eq(rnnd_infer_outputs_check(&b, &cfg, want, &held, &e), 0);
        ck_assert_uint_eq(held, want + 4 * floats); /* max_response_memory's count */
        ck_assert_int_eq(rnnd_infer_outputs_check(&b, &cfg, want - 1, NULL, &e), RNND_ELIMIT);
        ck_assert_ptr_nonnull(strstr(e.msg, "max_response_bytes"));
        rnnd_infer_outputs_done(&o);
        release(&req, &b);
}
END_TEST

/* The exact text, for a small model: id and version omitted, outputs in request order. */
START_TEST(test_render_text)
{
        static const char body[] = "{\"inputs\":[" T(
                "input", "FP32", "[1,1,2]",
                "[1,2]") "],\"outputs\":[{\"name\":"
                         "\"h_n\"},{\"name\":\"output\",\"parameters\":{\"binary_data\":true}}]}";
        static const char want[] =
                "{\"model_name\":\"g\",\"outputs\":[{\"name\":\"h_n\",\"datatype\":\"FP32\","
                "\"shape\":[1,4,3],\"data\":[0,0.1,-2.5,0.25,0,0,0,0,0,0,0,-0.0]},"
                "{\"name\":\"output\",\"datatype\":\"FP32\",\"shape\":[1,1,6],\"parameters\":"
                "{\"binary_data_size\":24}}]}";
        struct rnnd_model_config cfg;
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;
        struct rnnd_infer_outputs o;
        rnnd_error_t e = {0};
        size_t len, jl;
        char *out;
        float *h;

        make_cfg(M_GRU, &cfg);
        kserve_ok(body, M_GRU, &req, &b);
        ck_assert_int_eq(rnnd_infer_outputs_alloc(&b, &cfg, &o, &e), 0);
        h = o.by_kind[RNND_OUT_H_N];
        h[1] = 0.1f;
        h[2] = -2.5f;
        h[3] = 0.25f;
        h[11] = -0.0f;
        o.by_kind[RNND_OUT_OUTPUT][5] = 1.0f;
        ck_assert_int_eq(rnnd_kserve_render("g", 0, NULL, &o, &out, &len, &jl, &e), 0);
        ck_assert_uint_eq(jl, strlen(want));
        ck_assert_uint_eq(len, jl + 24);
        ck_assert_mem_eq(out, want, jl);
        ck_assert_mem_eq(out + jl + 20, "\0\0\x80\x3f", 4);
        rnnd_free(out);
        rnnd_infer_outputs_done(&o);
        release(&req, &b);
}
END_TEST

/*
 * The shared memory extension: the parse notes where an input's bytes are
 * and gives it a buffer (the daemon fills it); an output written to a
 * region is answered with its name, datatype and shape only, and its bytes
 * stay out of the body.
 */
START_TEST(test_render_shm)
{
        static const char body[] =
                "{\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[1,1,2],"
                "\"parameters\":{\"shared_memory_region\":\"in\",\"shared_memory_offset\":16,"
                "\"shared_memory_byte_size\":8}}],\"outputs\":[{\"name\":\"h_n\",\"parameters\":"
                "{\"shared_memory_region\":\"out\",\"shared_memory_byte_size\":64}},"
                "{\"name\":\"output\",\"parameters\":{\"binary_data\":true}}]}";
        static const char want[] =
                "{\"model_name\":\"g\",\"outputs\":[{\"name\":\"h_n\",\"datatype\":\"FP32\","
                "\"shape\":[1,4,3]},{\"name\":\"output\",\"datatype\":\"FP32\",\"shape\":[1,1,6],"
                "\"parameters\":{\"binary_data_size\":24}}]}";
        struct rnnd_model_config cfg;
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;
        struct rnnd_infer_outputs o;
        rnnd_error_t e = {0};
        size_t len, jl;
        char *out;

        make_cfg(M_GRU, &cfg);
        kserve_ok(body, M_GRU, &req, &b);
        ck_assert_str_eq(req.input_shm[0].region, "in");
        ck_assert_uint_eq(req.input_shm[0].offset, 16);
        ck_assert_uint_eq(req.input_shm[0].byte_size, 8);
        ck_assert(req.inputs[0].owned && req.inputs[0].data != NULL);
        ck_assert_str_eq(req.outputs[0].shm.region, "out");
        ck_assert_uint_eq(req.outputs[0].shm.byte_size, 64);
        ck_assert_str_eq(req.outputs[1].shm.region, "");
        ck_assert(b.binary[RNND_OUT_H_N]); /* counted at 4 bytes a float (max_response_bytes) */
        ck_assert_int_eq(rnnd_infer_outputs_alloc(&b, &cfg, &o, &e), 0);
        ck_assert_str_eq(o.t[0].name, "h_n");
        o.shm[0] = &req.outputs[0].shm; /* the daemon's part (inference.c) */
        o.by_kind[RNND_OUT_OUTPUT][5] = 1.0f;
        ck_assert_int_eq(rnnd_kserve_render("g", 0, NULL, &o, &out, &len, &jl, &e), 0);
        ck_assert_uint_eq(jl, strlen(want));
        ck_assert_mem_eq(out, want, jl);
        ck_assert_uint_eq(len, jl + 24); /* the binary output only */
        rnnd_free(out);
        rnnd_infer_outputs_done(&o);
        release(&req, &b);
}
END_TEST

/* TF Serving: rows cut to their own lengths; columnar keeps the padding. */
START_TEST(test_tfs_render)
{
        static const char rows[] = "{\"instances\":[[[1,2],[3,4]],[[5,6]]]}";
        static const char cols[] = "{\"inputs\":{\"input\":[[[1,2],[3,4]],[[5,6],[0,0]]],"
                                   "\"lengths\":[2,1]}}";
        static const char want_rows[] =
                "{\"predictions\":[{\"output\":[[0,1,2,3,4,5],[6,7,8,9,10,11]],"
                "\"h_n\":[[0,1,2],[3,4,5],[6,7,8],[9,10,11]]},"
                "{\"output\":[[12,13,14,15,16,17]],"
                "\"h_n\":[[12,13,14],[15,16,17],[18,19,20],[21,22,23]]}]}";
        static const char want_cols[] = "{\"outputs\":{\"output\":[[[0,1,2,3,4,5],[6,7,8,9,10,11]],"
                                        "[[12,13,14,15,16,17],[18,19,20,21,22,23]]],"
                                        "\"h_n\":[[[0,1,2],[3,4,5],[6,7,8],[9,10,11]],"
                                        "[[12,13,14],[15,16,17],[18,19,20],[21,22,23]]]}}";
        const char *bodies[] = {rows, cols}, *wants[] = {want_rows, want_cols};
        struct rnnd_model_config cfg;
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;
        struct rnnd_infer_outputs o;
        rnnd_error_t e = {0};
        size_t len;
        char *out;

        for (int c = 0; c < 2; c++) {
                make_cfg(M_GRU, &cfg);
                tfs_ok(bodies[c], M_GRU, &req, &b);
                ck_assert_int_eq(rnnd_infer_outputs_alloc(&b, &cfg, &o, &e), 0);
                for (unsigned i = 0; i < o.n; i++)
                        for (size_t j = 0; j < o.t[i].numel; j++)
                                ((float *)o.t[i].data)[j] = (float)j;
                ck_assert_int_eq(rnnd_tfs_render(&o, &out, &len, &e), 0);
                ck_assert_str_eq(out, wants[c]);
                ck_assert_uint_eq(len, strlen(wants[c]));
                rnnd_free(out);
                rnnd_infer_outputs_done(&o);
                release(&req, &b);
        }
}
END_TEST

/*
 * Non-finite outputs: JSON has no NaN or infinity, so they are written as
 * null (as JavaScript's JSON.stringify does) and the body stays valid JSON.
 */
START_TEST(test_render_nonfinite)
{
        struct rnnd_infer_bound b;
        struct rnnd_infer_outputs o;
        rnnd_error_t e = {0};
        size_t len, jl;
        char *out;
        float *x;

        make_outputs(M_GRU, 1, 1, false, &b, &o);
        x = o.by_kind[RNND_OUT_OUTPUT];
        x[0] = NAN;
        x[1] = INFINITY;
        x[2] = -INFINITY;
        ck_assert_int_eq(rnnd_kserve_render("m", 1, "", &o, &out, &len, &jl, &e), 0);
        ck_assert_msg(strstr(out, "\"data\":[null,null,null,") != NULL, "%s", out);
        ck_assert_ptr_null(strstr(out, "NaN"));
        ck_assert_ptr_null(strstr(out, "Infinity"));
        ck_assert_ptr_null(strstr(out, "\"id\""));
        rnnd_free(out);
        rnnd_infer_outputs_done(&o);
        rnnd_infer_bound_done(&b);
}
END_TEST

static const struct {
        int code;
        const char *msg;
        const char *want;
} errors[] = {
        {RNND_EINVAL, "inputs[0].name: missing", "{\"error\":\"inputs[0].name: missing\"}"},
        {RNND_EINVAL, "a \"q\" \\ b\nc\td\x01",
         "{\"error\":\"a \\\"q\\\" \\\\ b\\nc\\td\\u0001\"}"},
        {RNND_EINVAL, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
         "{\"error\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}"},
        {RNND_EINVAL, "cut \xe2\x82", "{\"error\":\"cut \\ufffd\\ufffd\"}"},
        {RNND_EINVAL, "bad \xc0\xaf \xed\xa0\x80 \xff",
         "{\"error\":\"bad \\ufffd\\ufffd \\ufffd\\ufffd\\ufffd \\ufffd\"}"},
        {RNND_EUNAVAIL, NULL, "{\"error\":\"unavailable\"}"},
        {RNND_ENOTFOUND, "", "{\"error\":\"not found\"}"},
};

START_TEST(test_error_render)
{
        size_t len;
        char *body;

        ck_assert_int_eq(rnnd_error_render(errors[_i].code, errors[_i].msg, &body, &len), 0);
        ck_assert_str_eq(body, errors[_i].want);
        ck_assert_uint_eq(len, strlen(errors[_i].want));
        rnnd_free(body);
}
END_TEST

START_TEST(test_output_names)
{
        ck_assert_str_eq(rnnd_infer_output_name(RNND_OUT_OUTPUT), "output");
        ck_assert_str_eq(rnnd_infer_output_name(RNND_OUT_C_N), "c_n");
        ck_assert_str_eq(rnnd_infer_output_name(RNND_OUT_COUNT), "?");
        rnnd_infer_request_done(NULL);
        rnnd_infer_bound_done(NULL);
        rnnd_infer_outputs_done(NULL);
        rnnd_infer_response_done(NULL);
}
END_TEST

/*
 * Allocation failures: fail the Nth allocation for N = 0, 1, ... until the
 * whole path succeeds; each failure must be RNND_ENOMEM and leak nothing.
 */

/* The last failure of a path, for the assertion message. */
static rnnd_error_t last_err;

/* KServe binary: FP16 input (converted), unaligned INT32 lengths (copied), mixed outputs. */
static int kserve_path(void)
{
        static const char json[] =
                "{\"id\":\"x\",\"inputs\":[{\"name\":\"input\",\"datatype\":\"FP16\","
                "\"shape\":[2,2,3],\"parameters\":{\"binary_data_size\":24}},"
                "{\"name\":\"lengths\",\"datatype\":\"INT32\",\"shape\":[2],"
                "\"parameters\":{\"binary_data_size\":8}},"
                "{\"name\":\"h0\",\"datatype\":\"FP32\",\"shape\":[2,1,4],\"data\":"
                "[[[1,2,3,4]],[[5,6,7,8]]]}],\"outputs\":[{\"name\":\"output\",\"parameters\":"
                "{\"binary_data\":true}},{\"name\":\"scores\"},{\"name\":\"c_n\"}]}";
        static _Alignas(16) char buf[1024];
        struct rnnd_model_config cfg;
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;
        struct rnnd_infer_outputs o;
        struct rnnd_infer_response resp;
        unsigned char raw[32] = {0};
        int32_t lens[2] = {2, 1};
        size_t len, blen, jl, jl0 = strlen(json);
        char *body, *out;
        int r;

        for (int i = 0; i < 12; i++) {
                uint16_t h = rnnd_f32_to_f16((float)i / 4);

                memcpy(raw + 2 * i, &h, 2);
        }
        memcpy(raw + 24, lens, 8);
        /* Offset so that the INT32 lengths (at json_len + 24) are not 4-aligned. */
        body = make_body(buf, (4 - jl0 % 4) % 4 + 2, json, raw, sizeof(raw), &len);
        make_cfg(M_LSTM, &cfg);
        r = rnnd_kserve_parse(body, len, jl0, NULL, &req, &last_err);
        if (r < 0)
                return r;
        ck_assert(req.inputs[1].owned);
        r = rnnd_infer_bind(&req, &cfg, &b, &last_err);
        if (r < 0)
                goto out_req;
        r = rnnd_infer_outputs_alloc(&b, &cfg, &o, &last_err);
        if (r < 0)
                goto out_bound;
        r = rnnd_kserve_render("m", 1, req.id, &o, &out, &blen, &jl, &last_err);
        if (r < 0)
                goto out_outputs;
        r = rnnd_kserve_parse_response(out, blen, jl, NULL, &resp, &last_err);
        if (r == 0) {
                ck_assert_uint_eq(resp.n_outputs, 3);
                rnnd_infer_response_done(&resp);
        }
        rnnd_free(out);
out_outputs:
        rnnd_infer_outputs_done(&o);
out_bound:
        rnnd_infer_bound_done(&b);
out_req:
        rnnd_infer_request_done(&req);
        return r;
}

/* TF Serving rows: INT64 tokens, h0/c0, padded, rendered. */
static int tfs_path(void)
{
        static const char body[] = "{\"instances\":[{\"tokens\":[1,2,3],\"h0\":[[1,2]]},"
                                   "{\"tokens\":[4],\"c0\":[[1,2,3]]}]}";
        struct rnnd_model_config cfg;
        struct rnnd_infer_request req;
        struct rnnd_infer_bound b;
        struct rnnd_infer_outputs o;
        size_t len;
        char *out;
        int r;

        make_cfg(M_EMB, &cfg);
        r = rnnd_tfs_parse(body, strlen(body), &cfg, NULL, &req, &last_err);
        if (r < 0)
                return r;
        r = rnnd_infer_bind(&req, &cfg, &b, &last_err);
        if (r < 0)
                goto out_req;
        r = rnnd_infer_outputs_alloc(&b, &cfg, &o, &last_err);
        if (r < 0)
                goto out_bound;
        r = rnnd_tfs_render(&o, &out, &len, &last_err);
        if (r == 0)
                rnnd_free(out);
        rnnd_infer_outputs_done(&o);
out_bound:
        rnnd_infer_bound_done(&b);
out_req:
        rnnd_infer_request_done(&req);
        return r;
}

static int error_path(void)
{
        size_t len;
        char *body;
        int r = rnnd_error_render(RNND_EINVAL, "a long message about an input", &body, &len);

        if (r == 0)
                rnnd_free(body);
        return r;
}

static int (*const oom_paths[])(void) = {kserve_path, tfs_path, error_path};

START_TEST(test_alloc_failures)
{
        long n, failures = 0;
        int r;

        for (n = 0;; n++) {
                rnnd_alloc_fail_after(n);
                r = oom_paths[_i]();
                rnnd_alloc_fail_after(-1);
                if (r == 0)
                        break;
                ck_assert_msg(r == RNND_ENOMEM, "failing allocation %ld: got %d (%s)", n, r,
                              last_err.msg);
                failures++;
                ck_assert_msg(n < 10000, "never succeeds");
        }
        ck_assert_int_gt(failures, 0);
}
END_TEST

/* rnnd__infer_pathf's own conversions print what snprintf prints, truncated alike. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-truncation" /* truncating is the point */
#endif
START_TEST(test_pathf)
{
        char longname[400], got[PATH_LEN], want[PATH_LEN];

        memset(longname, 'n', sizeof(longname) - 1);
        longname[sizeof(longname) - 1] = '\0';
#define SAME(...)                                                                                  \
        do {                                                                                       \
                memset(got, 'x', sizeof(got));                                                     \
                rnnd__infer_pathf(got, __VA_ARGS__);                                               \
                snprintf(want, sizeof(want), __VA_ARGS__);                                         \
                ck_assert_str_eq(got, want);                                                       \
        } while (0)
        SAME("%s[%u]", "inputs", 0u);
        SAME("%s[%u]", "inputs", 4294967295u);
        SAME("%s[%zu]", "inputs[3].shape", (size_t)18446744073709551615u);
        SAME("%s.datatype", "outputs[12]");
        SAME("%s.%.64s", "inputs[0].parameters", longname);
        SAME("parameters.%.64s", "");
        SAME("%s.%.0s|", "a", "b");
        SAME("%s.name", longname);
        SAME("%s[%zu]", longname + 250, (size_t)123456);
        SAME("%s[%zu]", longname + 242, (size_t)123456);
        SAME("instances[%zu].%s", (size_t)7, "x");
        SAME("%x and %d%%", 255u, -3); /* not its own: vsnprintf's */
#undef SAME
}
END_TEST
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* The integers of responses, written without printf, read as printf writes them. */
START_TEST(test_strbuf_ints)
{
        static const int64_t v[] = {0, 1, -1, 9, 10, 4294967295, INT64_MAX, INT64_MIN};
        char got[64], want[64];
        struct rnnd_strbuf b;

        for (size_t i = 0; i < RNND_ELEMENTSOF(v); i++) {
                rnnd_strbuf_init_fixed(&b, got, sizeof(got));
                rnnd_strbuf_json_kv_i64(&b, "k", v[i]);
                rnnd_strbuf_put_u64(&b, (uint64_t)v[i]);
                snprintf(want, sizeof(want), "\"k\":%" PRId64 "%" PRIu64, v[i], (uint64_t)v[i]);
                ck_assert_str_eq(got, want);
        }
}
END_TEST

static Suite *infer_suite(void)
{
        Suite *s = suite_create("infer");
        TCase *tc;

        tc = tcase_create("kserve");
        tcase_add_unchecked_fixture(tc, setup, NULL);
        tcase_add_loop_test(tc, test_kserve_data, 0, RNND_ELEMENTSOF(flat_nested));
        tcase_add_test(tc, test_kserve_nested);
        tcase_add_loop_test(tc, test_kserve_fast_path, 0, 4);
        tcase_add_loop_test(tc, test_kserve_plain, 0, RNND_ELEMENTSOF(plain_cases));
        tcase_add_loop_test(tc, test_kserve_plain_binary, 0, RNND_ELEMENTSOF(plain_bin_cases));
        tcase_add_test(tc, test_outputs_check);
        tcase_add_test(tc, test_kserve_tokens_states);
        tcase_add_test(tc, test_kserve_sequence_params);
        tcase_add_test(tc, test_kserve_sequence_id_u64);
        tcase_add_test(tc, test_kserve_binary_output);
        tcase_add_loop_test(tc, test_kserve_binary, 0, 2);
        tcase_add_test(tc, test_limits);
        tcase_add_test(tc, test_unclosed_string);
        tcase_add_test(tc, test_tree_bound);
        tcase_add_test(tc, test_pathf);
        tcase_add_test(tc, test_strbuf_ints);
        suite_add_tcase(s, tc);

        tc = tcase_create("tfserving");
        tcase_add_unchecked_fixture(tc, setup, NULL);
        tcase_add_test(tc, test_tfs_rows);
        tcase_add_test(tc, test_tfs_objects);
        tcase_add_test(tc, test_tfs_tokens);
        tcase_add_loop_test(tc, test_tfs_columnar, 0, RNND_ELEMENTSOF(columnar));
        suite_add_tcase(s, tc);

        tc = tcase_create("bad");
        tcase_add_unchecked_fixture(tc, setup, NULL);
        tcase_add_loop_test(tc, test_bad, 0, RNND_ELEMENTSOF(bad));
        suite_add_tcase(s, tc);

        tc = tcase_create("render");
        tcase_add_unchecked_fixture(tc, setup, NULL);
        tcase_add_test(tc, test_outputs_alloc);
        tcase_add_loop_test(tc, test_render_roundtrip, 0, 2);
        tcase_add_test(tc, test_render_text);
        tcase_add_test(tc, test_render_shm);
        tcase_add_test(tc, test_tfs_render);
        tcase_add_test(tc, test_render_nonfinite);
        tcase_add_loop_test(tc, test_error_render, 0, RNND_ELEMENTSOF(errors));
        tcase_add_test(tc, test_output_names);
        suite_add_tcase(s, tc);

        tc = tcase_create("alloc");
        tcase_add_unchecked_fixture(tc, setup, NULL);
        tcase_add_loop_test(tc, test_alloc_failures, 0, RNND_ELEMENTSOF(oom_paths));
        tcase_set_timeout(tc, 60);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(infer_suite)

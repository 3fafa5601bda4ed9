/* test_modelcfg.c: config.json parsing: defaults, every field, every rejection. */
#include <stdlib.h>
#include <string.h>

#include "check-main.h"
#include "modelcfg.h"
#include "tensor.h"

#define FILE_NAME "models/x/config.json"

/* A chain: the top-level fields given (with a trailing comma) and the blocks. */
#define CHAIN(top, blocks) "{\"input_size\":8," top "\"blocks\":[" blocks "]}"
#define B0                 "{\"cell\":\"lstm\",\"hidden_size\":16,\"bidirectional\":true,\"prefix\":\"a.\"}"
#define B1                 "{\"cell\":\"gru\",\"hidden_size\":4,\"prefix\":\"b.\"}"

/* The required fields, for configs that test something else. */
#define BASE      "\"cell\":\"lstm\",\"input_size\":8,\"hidden_size\":16"
#define CFG(rest) "{" BASE rest "}"

#define GROUPS8 "{},{},{},{},{},{},{},{}"
#define ONES8   "1,1,1,1,1,1,1,1"
#define S16     "0123456789abcdef"
#define S127    S16 S16 S16 S16 S16 S16 S16 "0123456789abcde"
#define S128    S127 "f"
#define ONES64  ONES8 "," ONES8 "," ONES8 "," ONES8 "," ONES8 "," ONES8 "," ONES8 "," ONES8

/* Parses text, expecting success. */
static struct rnnd_model_config parse_ok(const char *text)
{
        struct rnnd_model_config cfg;
        rnnd_error_t e = {0};
        int r;

        memset(&cfg, 0xab, sizeof(cfg));
        r = rnnd_modelcfg_parse(text, strlen(text), FILE_NAME, &cfg, &e);
        ck_assert_msg(r == 0, "%s: %s", text, e.msg);
        return cfg;
}

START_TEST(test_defaults)
{
        struct rnnd_model_config c = parse_ok(CFG(""));

        ck_assert_int_eq(c.cell, RNND_CELL_LSTM);
        ck_assert_uint_eq(c.input_size, 8);
        ck_assert_uint_eq(c.hidden_size, 16);
        ck_assert_uint_eq(c.num_layers, 1);
        ck_assert(!c.bidirectional);
        ck_assert_uint_eq(c.proj_size, 0);
        ck_assert(c.gru_linear_before_reset);
        ck_assert(!c.embedding.present);
        ck_assert(!c.head.present);
        ck_assert_int_eq(c.head.activation, RNND_ACT_NONE);
        ck_assert_int_eq(c.head.apply, RNND_HEAD_LAST);
        ck_assert_str_eq(c.weights.file, "model.safetensors");
        ck_assert_str_eq(c.weights.prefix, "");
        ck_assert_str_eq(c.weights.embedding, "embedding.weight");
        ck_assert_str_eq(c.weights.head_weight, "head.weight");
        ck_assert_str_eq(c.weights.head_bias, "head.bias");
        ck_assert_int_eq(c.precision, RNND_PREC_FP32);
        ck_assert_uint_eq(c.max_sequence_length, 4096);
        ck_assert_uint_eq(c.batching.max_batch_size, 64);
        ck_assert_uint_eq(c.batching.max_queue_delay_us, 200);
        ck_assert_uint_eq(c.batching.max_queue_size, 4096);
        ck_assert_uint_eq(c.batching.queue_timeout_us, 0);
        ck_assert_uint_eq(c.batching.max_batch_steps, 262144);
        ck_assert_uint_eq(c.batching.priority_levels, 2);
        ck_assert_uint_eq(c.batching.default_priority_level, 2);
        ck_assert_uint_eq(c.n_instances, 1);
        ck_assert_int_eq(c.instances[0].kind, RNND_INST_AUTO);
        ck_assert_uint_eq(c.instances[0].count, 1);
        ck_assert_uint_eq(c.instances[0].n_gpus, 0);
        ck_assert_uint_eq(c.sequence.idle_timeout_ms, 60000);
        ck_assert_uint_eq(c.sequence.max_sequences, 10000);
        ck_assert(!c.sequence.present); /* no block: the model serves no sequences */
        ck_assert(c.batching.adaptive_delay);
        ck_assert_int_eq(c.version_policy.kind, RNND_VP_LATEST);
        ck_assert_uint_eq(c.version_policy.num_versions, 1);
        ck_assert_uint_eq(c.version_policy.n_versions, 0);
}
END_TEST

/* A chain's blocks, their derived input sizes, and the top-level fields as the last block's. */
START_TEST(test_chain)
{
        struct rnnd_model_config c = parse_ok(
                CHAIN("\"head\":{\"units\":3},",
                      B0 ",{\"cell\":\"lstm\",\"hidden_size\":12,\"proj_size\":6,\"num_layers\":2,"
                         "\"prefix\":\"c.\"}," B1));
        struct rnnd_model_config b;
        struct rnnd_block_config one;
        const struct rnnd_block_config *bl;
        size_t h, cs;
        uint32_t n;

        ck_assert_uint_eq(c.n_blocks, 3);
        ck_assert_int_eq(c.blocks[0].cell, RNND_CELL_LSTM);
        ck_assert_uint_eq(c.blocks[0].input_size, 8);
        ck_assert(c.blocks[0].bidirectional);
        ck_assert_str_eq(c.blocks[0].prefix, "a.");
        ck_assert_uint_eq(c.blocks[1].input_size, 32); /* 2 directions x 16 */
        ck_assert_uint_eq(c.blocks[1].num_layers, 2);
        ck_assert_uint_eq(c.blocks[1].proj_size, 6);
        ck_assert_uint_eq(c.blocks[2].input_size, 6); /* the projection */
        ck_assert(c.blocks[2].gru_linear_before_reset);
        ck_assert_uint_eq(c.blocks[2].num_layers, 1);
        /* The top level is the last block's, input_size the chain's. */
        ck_assert_int_eq(c.cell, RNND_CELL_GRU);
        ck_assert_uint_eq(c.hidden_size, 4);
        ck_assert_uint_eq(c.input_size, 8);
        ck_assert_uint_eq(rnnd_modelcfg_dirs(&c) * rnnd_modelcfg_out_size(&c), 4);
        /* h: 2x16 + 2x6 + 1x4; c: the LSTM blocks, 2x16 + 2x12. */
        rnnd_modelcfg_state_size(&c, &h, &cs);
        ck_assert_uint_eq(h, 48);
        ck_assert_uint_eq(cs, 56);
        ck_assert(rnnd_modelcfg_has_lstm(&c));
        ck_assert(rnnd_modelcfg_has_bidirectional(&c));
        bl = rnnd_modelcfg_blocks(&c, &one, &n);
        ck_assert_uint_eq(n, 3);
        ck_assert_ptr_eq(bl, c.blocks);
        /* Each block as a model of its own. */
        rnnd_modelcfg_block(&c, 1, &b);
        ck_assert_uint_eq(b.n_blocks, 1);
        ck_assert_int_eq(b.cell, RNND_CELL_LSTM);
        ck_assert_uint_eq(b.input_size, 32);
        ck_assert_uint_eq(b.proj_size, 6);
        ck_assert_str_eq(b.weights.prefix, "c.");
        ck_assert(!b.head.present);
        rnnd_modelcfg_block(&c, 2, &b);
        ck_assert(b.head.present);
        ck_assert_uint_eq(b.input_size, 6);
}
END_TEST

/* A config without blocks is one block, also when made in code. */
START_TEST(test_one_block)
{
        struct rnnd_model_config c =
                parse_ok(CFG(",\"num_layers\":3,\"weights\":{\"prefix\":\"m.\"}"));
        struct rnnd_block_config one;
        const struct rnnd_block_config *bl;
        size_t h, cs;
        uint32_t n;

        ck_assert_uint_eq(c.n_blocks, 1);
        ck_assert_str_eq(c.blocks[0].prefix, "m.");
        ck_assert_uint_eq(c.blocks[0].num_layers, 3);
        ck_assert_uint_eq(c.blocks[0].input_size, 8);
        rnnd_modelcfg_defaults(&c);
        c.cell = RNND_CELL_GRU;
        c.input_size = 5;
        c.hidden_size = 7;
        c.num_layers = 2;
        c.bidirectional = true;
        bl = rnnd_modelcfg_blocks(&c, &one, &n);
        ck_assert_uint_eq(n, 1);
        ck_assert_ptr_eq(bl, &one);
        ck_assert_int_eq(bl->cell, RNND_CELL_GRU);
        ck_assert_uint_eq(bl->input_size, 5);
        rnnd_modelcfg_state_size(&c, &h, &cs);
        ck_assert_uint_eq(h, 28);
        ck_assert_uint_eq(cs, 0);
        ck_assert(!rnnd_modelcfg_has_lstm(&c));
}
END_TEST

START_TEST(test_defaults_only)
{
        struct rnnd_model_config c;

        memset(&c, 0xab, sizeof(c));
        rnnd_modelcfg_defaults(&c);
        ck_assert_uint_eq(c.input_size, 0);
        ck_assert_uint_eq(c.hidden_size, 0);
        ck_assert_uint_eq(c.num_layers, 1);
        ck_assert_uint_eq(c.batching.max_batch_steps, 262144);
        ck_assert_str_eq(c.weights.file, "model.safetensors");
        ck_assert_uint_eq(c.n_instances, 1);
        ck_assert_uint_eq(c.instances[0].count, 1);
}
END_TEST

static const char full_lstm[] =
        "{\"cell\":\"lstm\",\"input_size\":32,\"hidden_size\":64,\"num_layers\":3,"
        "\"bidirectional\":false,\"proj_size\":16,"
        "\"embedding\":{\"num_embeddings\":1000,\"dim\":32},"
        "\"head\":{\"units\":10,\"activation\":\"softmax\",\"apply\":\"all\"},"
        "\"weights\":{\"file\":\"w.safetensors\",\"prefix\":\"rnn.\",\"embedding\":\"emb.w\","
        "\"head_weight\":\"fc.weight\",\"head_bias\":\"fc.bias\"},"
        "\"precision\":\"fp16\",\"max_sequence_length\":512,"
        "\"batching\":{\"max_batch_size\":32,\"max_queue_delay_us\":1000,\"max_queue_size\":100,"
        "\"queue_timeout_us\":5000,\"max_batch_steps\":8192,\"priority_levels\":4,"
        "\"default_priority_level\":3},"
        "\"instances\":[{\"kind\":\"gpu\",\"count\":2,\"gpus\":[1,0]},{\"kind\":\"cpu\","
        "\"count\":4},{}],"
        "\"sequence\":{\"idle_timeout_ms\":1000,\"max_sequences\":50},"
        "\"version_policy\":{\"specific\":{\"versions\":[3,1]}}}";

START_TEST(test_full)
{
        struct rnnd_model_config c = parse_ok(full_lstm);

        ck_assert_int_eq(c.cell, RNND_CELL_LSTM);
        ck_assert_uint_eq(c.input_size, 32);
        ck_assert_uint_eq(c.hidden_size, 64);
        ck_assert_uint_eq(c.num_layers, 3);
        ck_assert(!c.bidirectional); /* given: a sequence block needs it */
        ck_assert_uint_eq(c.proj_size, 16);
        ck_assert(c.gru_linear_before_reset);
        ck_assert(c.embedding.present);
        ck_assert_uint_eq(c.embedding.num_embeddings, 1000);
        ck_assert_uint_eq(c.embedding.dim, 32);
        ck_assert(c.head.present);
        ck_assert_uint_eq(c.head.units, 10);
        ck_assert_int_eq(c.head.activation, RNND_ACT_SOFTMAX);
        ck_assert_int_eq(c.head.apply, RNND_HEAD_ALL);
        ck_assert_str_eq(c.weights.file, "w.safetensors");
        ck_assert_str_eq(c.weights.prefix, "rnn.");
        ck_assert_str_eq(c.weights.embedding, "emb.w");
        ck_assert_str_eq(c.weights.head_weight, "fc.weight");
        ck_assert_str_eq(c.weights.head_bias, "fc.bias");
        ck_assert_int_eq(c.precision, RNND_PREC_FP16);
        ck_assert_uint_eq(c.max_sequence_length, 512);
        ck_assert_uint_eq(c.batching.max_batch_size, 32);
        ck_assert_uint_eq(c.batching.max_queue_delay_us, 1000);
        ck_assert_uint_eq(c.batching.max_queue_size, 100);
        ck_assert_uint_eq(c.batching.queue_timeout_us, 5000);
        ck_assert_uint_eq(c.batching.max_batch_steps, 8192);
        ck_assert_uint_eq(c.batching.priority_levels, 4);
        ck_assert_uint_eq(c.batching.default_priority_level, 3);
        ck_assert_uint_eq(c.n_instances, 3);
        ck_assert_int_eq(c.instances[0].kind, RNND_INST_GPU);
        ck_assert_uint_eq(c.instances[0].count, 2);
        ck_assert(c.instances[0].count_set);
        ck_assert_uint_eq(c.instances[0].n_gpus, 2);
        ck_assert_uint_eq(c.instances[0].gpus[0], 1);
        ck_assert_uint_eq(c.instances[0].gpus[1], 0);
        ck_assert_int_eq(c.instances[1].kind, RNND_INST_CPU);
        ck_assert_uint_eq(c.instances[1].count, 4);
        ck_assert_uint_eq(c.instances[1].n_gpus, 0);
        ck_assert_int_eq(c.instances[2].kind, RNND_INST_AUTO);
        ck_assert_uint_eq(c.instances[2].count, 1);
        ck_assert(!c.instances[2].count_set);
        ck_assert_uint_eq(c.sequence.idle_timeout_ms, 1000);
        ck_assert_uint_eq(c.sequence.max_sequences, 50);
        ck_assert(c.sequence.present);
        ck_assert_int_eq(c.version_policy.kind, RNND_VP_SPECIFIC);
        ck_assert_uint_eq(c.version_policy.n_versions, 2);
        ck_assert_uint_eq(c.version_policy.versions[0], 3);
        ck_assert_uint_eq(c.version_policy.versions[1], 1);
        ck_assert_uint_eq(rnnd_cell_gates(c.cell), 4);
        ck_assert_uint_eq(rnnd_modelcfg_dirs(&c), 1);
        ck_assert_uint_eq(rnnd_modelcfg_out_size(&c), 16);
}
END_TEST

START_TEST(test_full_gru)
{
        struct rnnd_model_config c =
                parse_ok("{\"cell\":\"gru\",\"input_size\":4,\"hidden_size\":7,"
                         "\"gru_linear_before_reset\":false,\"proj_size\":0,"
                         "\"head\":{\"units\":1,\"activation\":\"sigmoid\"},"
                         "\"version_policy\":{\"latest\":{\"num_versions\":3}}}");

        ck_assert_int_eq(c.cell, RNND_CELL_GRU);
        ck_assert(!c.gru_linear_before_reset);
        ck_assert(c.head.present);
        ck_assert_uint_eq(c.head.units, 1);
        ck_assert_int_eq(c.head.activation, RNND_ACT_SIGMOID);
        ck_assert_int_eq(c.head.apply, RNND_HEAD_LAST);
        ck_assert_int_eq(c.version_policy.kind, RNND_VP_LATEST);
        ck_assert_uint_eq(c.version_policy.num_versions, 3);
        ck_assert_uint_eq(rnnd_cell_gates(c.cell), 3);
        ck_assert_uint_eq(rnnd_modelcfg_dirs(&c), 1);
        ck_assert_uint_eq(rnnd_modelcfg_out_size(&c), 7);
}
END_TEST

/* Configs that must parse: edges of every range and the less common shapes. */
static const char *const good[] = {
        CFG(",\"num_layers\":64,\"proj_size\":15"),
        "{\"cell\":\"rnn_tanh\",\"input_size\":65536,\"hidden_size\":65536}",
        CFG(",\"max_sequence_length\":1048576,\"batching\":{\"max_batch_steps\":4294967296}"),
        CFG(",\"max_sequence_length\":100,\"batching\":{\"max_batch_steps\":100}"),
        CFG(",\"batching\":{\"priority_levels\":8,\"default_priority_level\":1}"),
        CFG(",\"batching\":{\"priority_levels\":1}"),
        CFG(",\"batching\":{\"max_batch_size\":65536,\"max_queue_delay_us\":0,"
            "\"max_queue_size\":1000000,\"queue_timeout_us\":3600000000}"),
        CFG(",\"batching\":{\"max_batch_size\":1,\"max_queue_delay_us\":10000000,"
            "\"max_queue_size\":1}"),
        CFG(",\"instances\":[" GROUPS8 "]"),
        CFG(",\"instances\":[{\"kind\":\"auto\",\"count\":256,\"gpus\":[255,0]}]"),
        CFG(",\"instances\":[{\"kind\":\"gpu\",\"gpus\":[]}]"),
        CFG(",\"instances\":[{\"kind\":\"gpu\",\"gpus\":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}]"),
        CFG(",\"sequence\":{\"idle_timeout_ms\":86400000,\"max_sequences\":10000000}"),
        CFG(",\"sequence\":{\"idle_timeout_ms\":1,\"max_sequences\":1}"),
        CFG(",\"version_policy\":{\"latest\":{}}"),
        CFG(",\"version_policy\":{\"latest\":{\"num_versions\":64}}"),
        CFG(",\"version_policy\":{\"all\":{}}"),
        CFG(",\"version_policy\":{\"specific\":{\"versions\":[9223372036854775807]}}"),
        CFG(",\"embedding\":{\"num_embeddings\":16777216,\"dim\":8}"),
        CFG(",\"head\":{\"units\":65536,\"activation\":\"none\"},\"weights\":{\"head_bias\":\"\"}"),
        CFG(",\"head\":{\"units\":1,\"activation\":\"tanh\"}"),
        CFG(",\"head\":{\"units\":1,\"activation\":\"relu\"}"),
        CFG(",\"weights\":{\"file\":\"...\",\"prefix\":\"a/b.\"}"),
        CFG(",\"weights\":{\"file\":\"" S127 "\",\"prefix\":\"" S127 "\"}"),
        CFG(",\"precision\":\"fp32\",\"bidirectional\":false"),
        "{\"cell\":\"rnn_relu\",\"input_size\":1,\"hidden_size\":1,\"precision\":\"fp16\"}",
        "  {\"hidden_size\":2,\"input_size\":3,\"cell\":\"gru\"}\n\n",
};

START_TEST(test_good)
{
        parse_ok(good[_i]);
}
END_TEST

/* A config that must be rejected: the code and a substring of the message. */
static const struct {
        const char *json;
        int code;
        const char *want;
} bad[] = {
        /* Not a JSON object. */
        {"{", RNND_EMODEL, FILE_NAME ":1:1: invalid JSON"},
        {"", RNND_EMODEL, "invalid JSON"},
        {"cell: lstm", RNND_EMODEL, FILE_NAME ":1:4: invalid JSON"},
        {CFG("") " x", RNND_EMODEL, "invalid JSON"},
        {"{\"cell\":\"lstm\",\n  \"input_size\":8,\n  \"cell\":\"gru\"}", RNND_EMODEL,
         FILE_NAME ":3:"},
        {CFG(",\"cell\":\"gru\""), RNND_EMODEL, "duplicate object key"},
        {CFG(",\"head\":{\"units\":1,\"units\":2}"), RNND_EMODEL, "duplicate object key"},
        {"[1,2]", RNND_EMODEL, FILE_NAME ": must be a JSON object, got an array of 2"},
        {"\"lstm\"", RNND_EMODEL, "invalid JSON"},
        {CFG(",\"weights\":{\"prefix\":\"a\\u0000b\"}"), RNND_EMODEL, "invalid JSON"},
        {CFG(",\"num_layers\":99999999999999999999"), RNND_EMODEL, "invalid JSON"},

        /* Unknown keys, at every level. */
        {CFG(",\"hiden_size\":16"), RNND_EMODEL,
         FILE_NAME ": unknown field 'hiden_size' (did you mean 'hidden_size'?)"},
        {CFG(",\"head\":{\"unit\":10}"), RNND_EMODEL,
         FILE_NAME ": unknown field 'head.unit' (did you mean 'units'?)"},
        {CFG(",\"nmu_layers\":2"), RNND_EMODEL,
         "unknown field 'nmu_layers' (did you mean 'num_layers'?)"},
        {CFG(",\"xyz\":2"), RNND_EMODEL, FILE_NAME ": unknown field 'xyz'"},
        {CFG(",\"embedding\":{\"num_embeddings\":4,\"dim\":8,\"size\":1}"), RNND_EMODEL,
         "unknown field 'embedding.size'"},
        {CFG(",\"weights\":{\"bias\":\"b\"}"), RNND_EMODEL, "unknown field 'weights.bias'"},
        {CFG(",\"batching\":{\"max_batch\":8}"), RNND_EMODEL, "unknown field 'batching.max_batch'"},
        {CFG(",\"instances\":[{},{\"gpu\":[0]}]"), RNND_EMODEL, "unknown field 'instances[1].gpu'"},
        {CFG(",\"sequence\":{\"timeout\":1}"), RNND_EMODEL, "unknown field 'sequence.timeout'"},
        {CFG(",\"version_policy\":{\"newest\":{}}"), RNND_EMODEL,
         "unknown field 'version_policy.newest'"},
        {CFG(",\"version_policy\":{\"all\":{\"n\":1}}"), RNND_EMODEL,
         "unknown field 'version_policy.all.n'"},
        {CFG(",\"version_policy\":{\"latest\":{\"versions\":1}}"), RNND_EMODEL,
         "unknown field 'version_policy.latest.versions'"},

        /* Missing required fields. */
        {"{\"input_size\":8,\"hidden_size\":16}", RNND_EMODEL,
         FILE_NAME ": missing required field 'cell'"},
        {"{\"cell\":\"gru\",\"hidden_size\":16}", RNND_EMODEL,
         "missing required field 'input_size'"},
        {"{\"cell\":\"gru\",\"input_size\":16}", RNND_EMODEL,
         "missing required field 'hidden_size'"},
        {"{}", RNND_EMODEL, "missing required field 'cell'"},
        {CFG(",\"embedding\":{\"dim\":8}"), RNND_EMODEL,
         "missing required field 'embedding.num_embeddings'"},
        {CFG(",\"embedding\":{\"num_embeddings\":8}"), RNND_EMODEL,
         "missing required field 'embedding.dim'"},
        {CFG(",\"head\":{\"activation\":\"relu\"}"), RNND_EMODEL,
         "missing required field 'head.units'"},
        {CFG(",\"version_policy\":{\"specific\":{}}"), RNND_EMODEL,
         "missing required field 'version_policy.specific.versions'"},

        /* cell. */
        {"{\"cell\":5,\"input_size\":8,\"hidden_size\":16}", RNND_EMODEL,
         "field 'cell': must be a string (lstm, gru, rnn_tanh, rnn_relu), got 5"},
        {"{\"cell\":\"LSTM\",\"input_size\":8,\"hidden_size\":16}", RNND_EMODEL,
         "field 'cell': unknown value \"LSTM\" (lstm, gru, rnn_tanh, rnn_relu)"},
        {"{\"cell\":null,\"input_size\":8,\"hidden_size\":16}", RNND_EMODEL,
         "field 'cell': must be a string (lstm, gru, rnn_tanh, rnn_relu), got null"},

        /* Sizes. */
        {"{\"cell\":\"lstm\",\"input_size\":\"8\",\"hidden_size\":16}", RNND_EMODEL,
         "field 'input_size': must be an integer in 1..65536, got \"8\""},
        {"{\"cell\":\"lstm\",\"input_size\":0,\"hidden_size\":16}", RNND_EMODEL,
         "field 'input_size': must be an integer in 1..65536, got 0"},
        {"{\"cell\":\"lstm\",\"input_size\":65537,\"hidden_size\":16}", RNND_EMODEL,
         "field 'input_size': must be an integer in 1..65536, got 65537"},
        {"{\"cell\":\"lstm\",\"input_size\":8.5,\"hidden_size\":16}", RNND_EMODEL,
         "field 'input_size': must be an integer in 1..65536, got 8.5"},
        {"{\"cell\":\"lstm\",\"input_size\":8.0,\"hidden_size\":16}", RNND_EMODEL,
         "field 'input_size': must be an integer in 1..65536, got 8.0"},
        {"{\"cell\":\"lstm\",\"input_size\":1e3,\"hidden_size\":16}", RNND_EMODEL,
         "field 'input_size': must be an integer"},
        {"{\"cell\":\"lstm\",\"input_size\":-1,\"hidden_size\":16}", RNND_EMODEL,
         "field 'input_size': must be an integer in 1..65536, got -1"},
        {"{\"cell\":\"lstm\",\"input_size\":true,\"hidden_size\":16}", RNND_EMODEL,
         "field 'input_size': must be an integer in 1..65536, got true"},
        {"{\"cell\":\"lstm\",\"input_size\":[8],\"hidden_size\":16}", RNND_EMODEL,
         "field 'input_size': must be an integer in 1..65536, got an array of 1"},
        {"{\"cell\":\"lstm\",\"input_size\":8,\"hidden_size\":0}", RNND_EMODEL,
         "field 'hidden_size': must be an integer in 1..65536, got 0"},
        {"{\"cell\":\"lstm\",\"input_size\":8,\"hidden_size\":70000}", RNND_EMODEL,
         "field 'hidden_size': must be an integer in 1..65536, got 70000"},
        {"{\"cell\":\"lstm\",\"input_size\":8,\"hidden_size\":{}}", RNND_EMODEL,
         "field 'hidden_size': must be an integer in 1..65536, got an object"},
        {CFG(",\"num_layers\":0"), RNND_EMODEL,
         "field 'num_layers': must be an integer in 1..64, got 0"},
        {CFG(",\"num_layers\":65"), RNND_EMODEL,
         "field 'num_layers': must be an integer in 1..64, got 65"},
        {CFG(",\"num_layers\":2.5"), RNND_EMODEL, "field 'num_layers': must be an integer"},
        {CFG(",\"num_layers\":\"2\""), RNND_EMODEL, "field 'num_layers': must be an integer"},

        /* bidirectional, gru_linear_before_reset. */
        {CFG(",\"bidirectional\":1"), RNND_EMODEL,
         "field 'bidirectional': must be true or false, got 1"},
        {CFG(",\"bidirectional\":\"true\""), RNND_EMODEL,
         "field 'bidirectional': must be true or false, got \"true\""},
        {CFG(",\"gru_linear_before_reset\":true"), RNND_EMODEL,
         "field 'gru_linear_before_reset': only allowed when cell is gru, got lstm"},
        {"{\"cell\":\"rnn_tanh\",\"input_size\":8,\"hidden_size\":16,"
         "\"gru_linear_before_reset\":false}",
         RNND_EMODEL, "field 'gru_linear_before_reset': only allowed when cell is gru"},
        {"{\"cell\":\"gru\",\"input_size\":8,\"hidden_size\":16,\"gru_linear_before_reset\":0}",
         RNND_EMODEL, "field 'gru_linear_before_reset': must be true or false, got 0"},

        /* proj_size. */
        {CFG(",\"proj_size\":-1"), RNND_EMODEL,
         "field 'proj_size': must be an integer in 0..65536, got -1"},
        {CFG(",\"proj_size\":65537"), RNND_EMODEL,
         "field 'proj_size': must be an integer in 0..65536, got 65537"},
        {CFG(",\"proj_size\":1.5"), RNND_EMODEL, "field 'proj_size': must be an integer"},
        {CFG(",\"proj_size\":16"), RNND_EMODEL,
         "field 'proj_size': must be less than hidden_size (16), got 16"},
        {CFG(",\"proj_size\":20"), RNND_EMODEL,
         "field 'proj_size': must be less than hidden_size (16), got 20"},
        {"{\"cell\":\"gru\",\"input_size\":8,\"hidden_size\":16,\"proj_size\":4}", RNND_EMODEL,
         "field 'proj_size': only allowed when cell is lstm, got gru"},
        {"{\"cell\":\"rnn_relu\",\"input_size\":8,\"hidden_size\":16,\"proj_size\":4}", RNND_EMODEL,
         "field 'proj_size': only allowed when cell is lstm, got rnn_relu"},

        /* embedding. */
        {CFG(",\"embedding\":5"), RNND_EMODEL, "field 'embedding': must be an object, got 5"},
        {CFG(",\"embedding\":{\"num_embeddings\":0,\"dim\":8}"), RNND_EMODEL,
         "field 'embedding.num_embeddings': must be an integer in 1..16777216, got 0"},
        {CFG(",\"embedding\":{\"num_embeddings\":16777217,\"dim\":8}"), RNND_EMODEL,
         "field 'embedding.num_embeddings': must be an integer in 1..16777216, got 16777217"},
        {CFG(",\"embedding\":{\"num_embeddings\":4,\"dim\":0}"), RNND_EMODEL,
         "field 'embedding.dim': must be an integer in 1..65536, got 0"},
        {CFG(",\"embedding\":{\"num_embeddings\":4,\"dim\":3.5}"), RNND_EMODEL,
         "field 'embedding.dim': must be an integer in 1..65536, got 3.5"},
        {CFG(",\"embedding\":{\"num_embeddings\":4,\"dim\":4}"), RNND_EMODEL,
         "field 'input_size': must equal embedding.dim (4), got 8"},

        /* head. */
        {CFG(",\"head\":[]"), RNND_EMODEL, "field 'head': must be an object, got an array of 0"},
        {CFG(",\"head\":{\"units\":0}"), RNND_EMODEL,
         "field 'head.units': must be an integer in 1..65536, got 0"},
        {CFG(",\"head\":{\"units\":65537}"), RNND_EMODEL,
         "field 'head.units': must be an integer in 1..65536, got 65537"},
        {CFG(",\"head\":{\"units\":\"10\"}"), RNND_EMODEL,
         "field 'head.units': must be an integer"},
        {CFG(",\"head\":{\"units\":10,\"activation\":\"gelu\"}"), RNND_EMODEL,
         "field 'head.activation': unknown value \"gelu\" (none, sigmoid, tanh, relu, softmax)"},
        {CFG(",\"head\":{\"units\":10,\"activation\":1}"), RNND_EMODEL,
         "field 'head.activation': must be a string (none, sigmoid, tanh, relu, softmax), got 1"},
        {CFG(",\"head\":{\"units\":10,\"apply\":\"first\"}"), RNND_EMODEL,
         "field 'head.apply': unknown value \"first\" (last, all)"},
        {CFG(",\"head\":{\"units\":10,\"apply\":true}"), RNND_EMODEL,
         "field 'head.apply': must be a string (last, all), got true"},

        /* weights. */
        {CFG(",\"weights\":\"model.safetensors\""), RNND_EMODEL,
         "field 'weights': must be an object, got \"model.safetensors\""},
        {CFG(",\"weights\":{\"file\":5}"), RNND_EMODEL,
         "field 'weights.file': must be a string, got 5"},
        {CFG(",\"weights\":{\"file\":\"a/b\"}"), RNND_EMODEL,
         "field 'weights.file': must be a plain file name"},
        {CFG(",\"weights\":{\"file\":\"/etc/passwd\"}"), RNND_EMODEL,
         "field 'weights.file': must be a plain file name"},
        {CFG(",\"weights\":{\"file\":\"\"}"), RNND_EMODEL,
         "field 'weights.file': must be a plain file name"},
        {CFG(",\"weights\":{\"file\":\".\"}"), RNND_EMODEL,
         "field 'weights.file': must be a plain file name"},
        {CFG(",\"weights\":{\"file\":\"..\"}"), RNND_EMODEL,
         "field 'weights.file': must be a plain file name"},
        {CFG(",\"weights\":{\"prefix\":\"" S128 "\"}"), RNND_EMODEL,
         "field 'weights.prefix': must be at most 127 bytes long, got 128"},
        {CFG(",\"weights\":{\"prefix\":null}"), RNND_EMODEL,
         "field 'weights.prefix': must be a string, got null"},
        {CFG(",\"weights\":{\"embedding\":\"emb\"}"), RNND_EMODEL,
         "field 'weights.embedding': only allowed when the model has an embedding"},
        {CFG(",\"weights\":{\"head_weight\":\"fc.weight\"}"), RNND_EMODEL,
         "field 'weights.head_weight': only allowed when the model has a head"},
        {CFG(",\"weights\":{\"head_bias\":\"fc.bias\"}"), RNND_EMODEL,
         "field 'weights.head_bias': only allowed when the model has a head"},
        {CFG(",\"head\":{\"units\":1},\"weights\":{\"head_bias\":[]}"), RNND_EMODEL,
         "field 'weights.head_bias': must be a string, got an array of 0"},

        /* precision, max_sequence_length. */
        {CFG(",\"precision\":\"bf16\""), RNND_EMODEL,
         "field 'precision': unknown value \"bf16\" (fp32, fp16)"},
        {CFG(",\"precision\":16"), RNND_EMODEL,
         "field 'precision': must be a string (fp32, fp16), got 16"},
        {CFG(",\"max_sequence_length\":0"), RNND_EMODEL,
         "field 'max_sequence_length': must be an integer in 1..1048576, got 0"},
        {CFG(",\"max_sequence_length\":1048577"), RNND_EMODEL,
         "field 'max_sequence_length': must be an integer in 1..1048576, got 1048577"},
        {CFG(",\"max_sequence_length\":\"x\""), RNND_EMODEL,
         "field 'max_sequence_length': must be an integer"},

        /* batching. */
        {CFG(",\"batching\":true"), RNND_EMODEL, "field 'batching': must be an object, got true"},
        {CFG(",\"batching\":{\"max_batch_size\":0}"), RNND_EMODEL,
         FILE_NAME ": field 'batching.max_batch_size': must be an integer in 1..65536, got 0"},
        {CFG(",\"batching\":{\"max_batch_size\":65537}"), RNND_EMODEL,
         "field 'batching.max_batch_size': must be an integer in 1..65536, got 65537"},
        {CFG(",\"batching\":{\"max_batch_size\":1.0}"), RNND_EMODEL,
         "field 'batching.max_batch_size': must be an integer in 1..65536, got 1.0"},
        {CFG(",\"batching\":{\"max_queue_delay_us\":-1}"), RNND_EMODEL,
         "field 'batching.max_queue_delay_us': must be an integer in 0..10000000, got -1"},
        {CFG(",\"batching\":{\"max_queue_delay_us\":10000001}"), RNND_EMODEL,
         "field 'batching.max_queue_delay_us': must be an integer in 0..10000000, got 10000001"},
        {CFG(",\"batching\":{\"max_queue_size\":0}"), RNND_EMODEL,
         "field 'batching.max_queue_size': must be an integer in 1..1000000, got 0"},
        {CFG(",\"batching\":{\"max_queue_size\":1000001}"), RNND_EMODEL,
         "field 'batching.max_queue_size': must be an integer in 1..1000000, got 1000001"},
        {CFG(",\"batching\":{\"queue_timeout_us\":3600000001}"), RNND_EMODEL,
         "field 'batching.queue_timeout_us': must be an integer in 0..3600000000, got 3600000001"},
        {CFG(",\"batching\":{\"queue_timeout_us\":false}"), RNND_EMODEL,
         "field 'batching.queue_timeout_us': must be an integer in 0..3600000000, got false"},
        {CFG(",\"batching\":{\"priority_levels\":0}"), RNND_EMODEL,
         "field 'batching.priority_levels': must be an integer in 1..8, got 0"},
        {CFG(",\"batching\":{\"priority_levels\":9}"), RNND_EMODEL,
         "field 'batching.priority_levels': must be an integer in 1..8, got 9"},
        {CFG(",\"batching\":{\"priority_levels\":3,\"default_priority_level\":4}"), RNND_EMODEL,
         "field 'batching.default_priority_level': must be at most priority_levels (3), got 4"},
        {CFG(",\"batching\":{\"default_priority_level\":3}"), RNND_EMODEL,
         "field 'batching.default_priority_level': must be at most priority_levels (2), got 3"},
        {CFG(",\"batching\":{\"max_batch_steps\":0}"), RNND_EMODEL,
         "field 'batching.max_batch_steps': must be an integer in 1..4294967296, got 0"},
        {CFG(",\"batching\":{\"max_batch_steps\":4294967297}"), RNND_EMODEL,
         "field 'batching.max_batch_steps': must be an integer in 1..4294967296, got 4294967297"},
        {CFG(",\"batching\":{\"max_batch_steps\":4095}"), RNND_EMODEL,
         "field 'batching.max_batch_steps': must be at least max_sequence_length (4096), got "
         "4095, or a full-length sequence could never run"},
        {CFG(",\"max_sequence_length\":1048576"), RNND_EMODEL,
         "field 'batching.max_batch_steps': must be at least max_sequence_length (1048576), got "
         "262144"},

        /* instances. */
        {CFG(",\"instances\":{}"), RNND_EMODEL,
         "field 'instances': must be an array of 1..8 instance groups, got an object"},
        {CFG(",\"instances\":[]"), RNND_EMODEL,
         "field 'instances': must be an array of 1..8 instance groups, got an array of 0"},
        {CFG(",\"instances\":[" GROUPS8 ",{}]"), RNND_EMODEL,
         "field 'instances': must be an array of 1..8 instance groups, got an array of 9"},
        {CFG(",\"instances\":[5]"), RNND_EMODEL, "field 'instances[0]': must be an object, got 5"},
        {CFG(",\"instances\":[{},{\"kind\":\"tpu\"}]"), RNND_EMODEL,
         FILE_NAME ": field 'instances[1].kind': unknown value \"tpu\" (auto, gpu, cpu)"},
        {CFG(",\"instances\":[{\"kind\":0}]"), RNND_EMODEL,
         "field 'instances[0].kind': must be a string (auto, gpu, cpu), got 0"},
        {CFG(",\"instances\":[{\"count\":0}]"), RNND_EMODEL,
         "field 'instances[0].count': must be an integer in 1..256, got 0"},
        {CFG(",\"instances\":[{\"count\":257}]"), RNND_EMODEL,
         "field 'instances[0].count': must be an integer in 1..256, got 257"},
        {CFG(",\"instances\":[{\"kind\":\"cpu\",\"gpus\":[0]}]"), RNND_EMODEL,
         "field 'instances[0].gpus': only allowed when kind is gpu or auto"},
        {CFG(",\"instances\":[{\"gpus\":[3,1,3]}]"), RNND_EMODEL,
         "field 'instances[0].gpus[2]': duplicate GPU ordinal 3"},
        {CFG(",\"instances\":[{\"gpus\":[256]}]"), RNND_EMODEL,
         "field 'instances[0].gpus[0]': must be an integer in 0..255, got 256"},
        {CFG(",\"instances\":[{\"gpus\":[-1]}]"), RNND_EMODEL,
         "field 'instances[0].gpus[0]': must be an integer in 0..255, got -1"},
        {CFG(",\"instances\":[{\"gpus\":[0.5]}]"), RNND_EMODEL,
         "field 'instances[0].gpus[0]': must be an integer in 0..255, got 0.5"},
        {CFG(",\"instances\":[{\"gpus\":\"0\"}]"), RNND_EMODEL,
         "field 'instances[0].gpus': must be an array of 0..16 GPU ordinals, got \"0\""},
        {CFG(",\"instances\":[{\"gpus\":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]}]"), RNND_EMODEL,
         "field 'instances[0].gpus': must be an array of 0..16 GPU ordinals, got an array of 17"},

        /* sequence. */
        {CFG(",\"sequence\":[]"), RNND_EMODEL, "field 'sequence': must be an object"},
        {CFG(",\"sequence\":{\"idle_timeout_ms\":0}"), RNND_EMODEL,
         "field 'sequence.idle_timeout_ms': must be an integer in 1..86400000, got 0"},
        {CFG(",\"sequence\":{\"idle_timeout_ms\":86400001}"), RNND_EMODEL,
         "field 'sequence.idle_timeout_ms': must be an integer in 1..86400000, got 86400001"},
        {CFG(",\"sequence\":{\"max_sequences\":0}"), RNND_EMODEL,
         "field 'sequence.max_sequences': must be an integer in 1..10000000, got 0"},
        {CFG(",\"sequence\":{\"max_sequences\":10000001}"), RNND_EMODEL,
         "field 'sequence.max_sequences': must be an integer in 1..10000000, got 10000001"},
        {CFG(",\"bidirectional\":true,\"sequence\":{}"), RNND_EMODEL,
         "field 'sequence': only for unidirectional models: a bidirectional layer's backward "
         "direction needs the whole sequence, which a chunk is not; remove the block, and send "
         "each sequence whole"},
        {CHAIN("\"sequence\":{},", B0 "," B1), RNND_EMODEL,
         "field 'sequence': only for unidirectional models: a bidirectional layer's backward "
         "direction needs the whole sequence, which a chunk is not; remove the block, and send "
         "each sequence whole"},

        /* version_policy. */
        {CFG(",\"version_policy\":\"latest\""), RNND_EMODEL,
         "field 'version_policy': must be an object, got \"latest\""},
        {CFG(",\"version_policy\":{}"), RNND_EMODEL,
         "field 'version_policy': must have exactly one key (latest, all or specific), got 0"},
        {CFG(",\"version_policy\":{\"latest\":{},\"all\":{}}"), RNND_EMODEL,
         "field 'version_policy': must have exactly one key (latest, all or specific), got 2"},
        {CFG(",\"version_policy\":{\"latest\":1}"), RNND_EMODEL,
         "field 'version_policy.latest': must be an object, got 1"},
        {CFG(",\"version_policy\":{\"all\":null}"), RNND_EMODEL,
         "field 'version_policy.all': must be an object, got null"},
        {CFG(",\"version_policy\":{\"latest\":{\"num_versions\":0}}"), RNND_EMODEL,
         "field 'version_policy.latest.num_versions': must be an integer in 1..64, got 0"},
        {CFG(",\"version_policy\":{\"latest\":{\"num_versions\":65}}"), RNND_EMODEL,
         "field 'version_policy.latest.num_versions': must be an integer in 1..64, got 65"},
        {CFG(",\"version_policy\":{\"specific\":{\"versions\":[]}}"), RNND_EMODEL,
         "field 'version_policy.specific.versions': must be an array of 1..64 versions, got an "
         "array of 0"},
        {CFG(",\"version_policy\":{\"specific\":{\"versions\":3}}"), RNND_EMODEL,
         "field 'version_policy.specific.versions': must be an array of 1..64 versions, got 3"},
        {CFG(",\"version_policy\":{\"specific\":{\"versions\":[" ONES64 ",1]}}"), RNND_EMODEL,
         "field 'version_policy.specific.versions': must be an array of 1..64 versions, got an "
         "array of 65"},
        {CFG(",\"version_policy\":{\"specific\":{\"versions\":[1,3,1]}}"), RNND_EMODEL,
         "field 'version_policy.specific.versions[2]': duplicate version 1"},
        {CFG(",\"version_policy\":{\"specific\":{\"versions\":[0]}}"), RNND_EMODEL,
         "field 'version_policy.specific.versions[0]': must be an integer in "
         "1..9223372036854775807, got 0"},
        {CFG(",\"version_policy\":{\"specific\":{\"versions\":[2,-3]}}"), RNND_EMODEL,
         "field 'version_policy.specific.versions[1]': must be an integer"},
        {CFG(",\"version_policy\":{\"specific\":{\"versions\":[\"2\"]}}"), RNND_EMODEL,
         "field 'version_policy.specific.versions[0]': must be an integer"},
        {CFG(",\"version_policy\":{\"specific\":{\"versions\":[1.5]}}"), RNND_EMODEL,
         "field 'version_policy.specific.versions[0]': must be an integer"},
        /* Chains: "blocks" (docs/MODELS.md). */
        {CHAIN("\"cell\":\"lstm\",", B0 "," B1), RNND_EMODEL,
         "field 'cell': not allowed beside 'blocks' (give it in each block)"},
        {CHAIN("\"num_layers\":2,", B0 "," B1), RNND_EMODEL,
         "field 'num_layers': not allowed beside 'blocks'"},
        {CHAIN("\"bidirectional\":false,", B0 "," B1), RNND_EMODEL,
         "field 'bidirectional': not allowed beside 'blocks'"},
        {CHAIN("\"weights\":{\"prefix\":\"a.\"},", B0 "," B1), RNND_EMODEL,
         "field 'weights.prefix': not allowed beside 'blocks' (give each block's weight prefix "
         "as its 'prefix')"},
        {CHAIN("", ""), RNND_EMODEL,
         "field 'blocks': must be an array of 1..16 blocks, got an array of 0"},
        {"{\"input_size\":8,\"blocks\":{}}", RNND_EMODEL,
         "field 'blocks': must be an array of 1..16 blocks, got an object"},
        {CHAIN("", B0 "," B1 "," B1 "," B1 "," B1 "," B1 "," B1 "," B1 "," B1 "," B1 "," B1 "," B1
                      "," B1 "," B1 "," B1 "," B1 "," B1),
         RNND_EMODEL, "field 'blocks': must be an array of 1..16 blocks, got an array of 17"},
        {CHAIN("", B0 ",{\"hidden_size\":4,\"prefix\":\"b.\"}"), RNND_EMODEL,
         "missing required field 'blocks[1].cell'"},
        {CHAIN("", B0 ",{\"cell\":\"gru\",\"prefix\":\"b.\"}"), RNND_EMODEL,
         "missing required field 'blocks[1].hidden_size'"},
        {CHAIN("", B0 ",{\"cell\":\"gru\",\"hidden_size\":4,\"units\":3}"), RNND_EMODEL,
         "unknown field 'blocks[1].units'"},
        {CHAIN("", B0 ",{\"cell\":\"gru\",\"hidden_size\":4,\"proj_size\":2,\"prefix\":\"b.\"}"),
         RNND_EMODEL, "field 'blocks[1].proj_size': only allowed when cell is lstm, got gru"},
        {CHAIN("", B0 ",{\"cell\":\"lstm\",\"hidden_size\":4,\"proj_size\":4,\"prefix\":\"b.\"}"),
         RNND_EMODEL, "field 'blocks[1].proj_size': must be less than hidden_size (4), got 4"},
        {CHAIN("", "{\"cell\":\"lstm\",\"hidden_size\":4,\"gru_linear_before_reset\":false,"
                   "\"prefix\":\"a.\"}," B1),
         RNND_EMODEL,
         "field 'blocks[0].gru_linear_before_reset': only allowed when cell is gru, "
         "got lstm"},
        {CHAIN("", B0 ",{\"cell\":\"gru\",\"hidden_size\":4,\"prefix\":\"a.\"}"), RNND_EMODEL,
         "field 'blocks': blocks[0] and blocks[1] have the same prefix \"a.\": each block's "
         "weights need names of their own"},
        {CHAIN("", B0 ",{\"cell\":\"gru\",\"hidden_size\":0,\"prefix\":\"b.\"}"), RNND_EMODEL,
         "field 'blocks[1].hidden_size': must be an integer in 1..65536, got 0"},
        {CHAIN("", B0 ",{\"cell\":\"gru\",\"hidden_size\":4,\"num_layers\":65,\"prefix\":"
                      "\"b.\"}"),
         RNND_EMODEL, "field 'blocks[1].num_layers': must be an integer in 1..64, got 65"},
        {CHAIN("", B0 ",{\"cell\":\"peephole\",\"hidden_size\":4,\"prefix\":\"b.\"}"), RNND_EMODEL,
         "field 'blocks[1].cell': unknown value \"peephole\""},
};

START_TEST(test_bad)
{
        struct rnnd_model_config cfg, before;
        rnnd_error_t e = {0};
        int r;

        memset(&cfg, 0x5a, sizeof(cfg));
        memcpy(&before, &cfg, sizeof(cfg));
        r = rnnd_modelcfg_parse(bad[_i].json, strlen(bad[_i].json), FILE_NAME, &cfg, &e);
        ck_assert_msg(r == bad[_i].code, "%s: got %d (%s)", bad[_i].json, r, e.msg);
        ck_assert_int_eq(e.code, bad[_i].code);
        ck_assert_msg(strncmp(e.msg, FILE_NAME ":", strlen(FILE_NAME ":")) == 0,
                      "message does not name the file: %s", e.msg);
        ck_assert_msg(strstr(e.msg, bad[_i].want) != NULL, "%s:\n  got  %s\n  want %s",
                      bad[_i].json, e.msg, bad[_i].want);
        ck_assert_msg(memcmp(&cfg, &before, sizeof(cfg)) == 0, "*ret written on failure");
        /* A NULL reterr is allowed. */
        ck_assert_int_eq(
                rnnd_modelcfg_parse(bad[_i].json, strlen(bad[_i].json), FILE_NAME, &cfg, NULL),
                bad[_i].code);
}
END_TEST

/* The size limit: exactly RNND_CFG_MAX_FILE_BYTES parses, one byte more is RNND_ELIMIT. */
START_TEST(test_oversized)
{
        static const char text[] = CFG("");
        struct rnnd_model_config cfg;
        rnnd_error_t e = {0};
        size_t n = RNND_CFG_MAX_FILE_BYTES + 1;
        char *buf = malloc(n);

        ck_assert_ptr_nonnull(buf);
        memset(buf, ' ', n);
        memcpy(buf, text, strlen(text));
        ck_assert_int_eq(rnnd_modelcfg_parse(buf, n - 1, FILE_NAME, &cfg, &e), 0);
        memset(&cfg, 0x5a, sizeof(cfg));
        ck_assert_int_eq(rnnd_modelcfg_parse(buf, n, FILE_NAME, &cfg, &e), RNND_ELIMIT);
        ck_assert_int_eq(e.code, RNND_ELIMIT);
        ck_assert_ptr_nonnull(strstr(e.msg, FILE_NAME ": 1048577 bytes, more than"));
        ck_assert_uint_eq(cfg.input_size, 0x5a5a5a5au);
        free(buf);
}
END_TEST

/* The text need not be NUL-terminated: only json[0..len) is read. */
START_TEST(test_not_terminated)
{
        static const char text[] = CFG("") "garbage";
        struct rnnd_model_config cfg;
        rnnd_error_t e = {0};

        ck_assert_int_eq(rnnd_modelcfg_parse(text, strlen(CFG("")), FILE_NAME, &cfg, &e), 0);
        ck_assert_uint_eq(cfg.hidden_size, 16);
}
END_TEST

START_TEST(test_names)
{
        ck_assert_str_eq(rnnd_cell_name(RNND_CELL_LSTM), "lstm");
        ck_assert_str_eq(rnnd_cell_name(RNND_CELL_GRU), "gru");
        ck_assert_str_eq(rnnd_cell_name(RNND_CELL_RNN_TANH), "rnn_tanh");
        ck_assert_str_eq(rnnd_cell_name(RNND_CELL_RNN_RELU), "rnn_relu");
        ck_assert_str_eq(rnnd_act_name(RNND_ACT_NONE), "none");
        ck_assert_str_eq(rnnd_act_name(RNND_ACT_SOFTMAX), "softmax");
        ck_assert_str_eq(rnnd_head_apply_name(RNND_HEAD_LAST), "last");
        ck_assert_str_eq(rnnd_head_apply_name(RNND_HEAD_ALL), "all");
        ck_assert_str_eq(rnnd_precision_name(RNND_PREC_FP32), "fp32");
        ck_assert_str_eq(rnnd_precision_name(RNND_PREC_FP16), "fp16");
        ck_assert_str_eq(rnnd_instance_kind_name(RNND_INST_AUTO), "auto");
        ck_assert_str_eq(rnnd_instance_kind_name(RNND_INST_GPU), "gpu");
        ck_assert_str_eq(rnnd_instance_kind_name(RNND_INST_CPU), "cpu");
        ck_assert_str_eq(rnnd_cell_name((rnnd_cell_t)99), "unknown");
        ck_assert_str_eq(rnnd_act_name((rnnd_act_t)-1), "unknown");
}
END_TEST

START_TEST(test_shapes)
{
        struct rnnd_model_config c;

        ck_assert_uint_eq(rnnd_cell_gates(RNND_CELL_LSTM), 4);
        ck_assert_uint_eq(rnnd_cell_gates(RNND_CELL_GRU), 3);
        ck_assert_uint_eq(rnnd_cell_gates(RNND_CELL_RNN_TANH), 1);
        ck_assert_uint_eq(rnnd_cell_gates(RNND_CELL_RNN_RELU), 1);
        rnnd_modelcfg_defaults(&c);
        c.hidden_size = 32;
        ck_assert_uint_eq(rnnd_modelcfg_dirs(&c), 1);
        ck_assert_uint_eq(rnnd_modelcfg_out_size(&c), 32);
        c.bidirectional = true;
        c.proj_size = 8;
        ck_assert_uint_eq(rnnd_modelcfg_dirs(&c), 2);
        ck_assert_uint_eq(rnnd_modelcfg_out_size(&c), 8);
}
END_TEST

static Suite *modelcfg_suite(void)
{
        Suite *s = suite_create("modelcfg");
        TCase *tc;

        tc = tcase_create("defaults");
        tcase_add_test(tc, test_defaults);
        tcase_add_test(tc, test_chain);
        tcase_add_test(tc, test_one_block);
        tcase_add_test(tc, test_defaults_only);
        suite_add_tcase(s, tc);
        tc = tcase_create("full");
        tcase_add_test(tc, test_full);
        tcase_add_test(tc, test_full_gru);
        suite_add_tcase(s, tc);
        tc = tcase_create("good");
        tcase_add_loop_test(tc, test_good, 0, RNND_ELEMENTSOF(good));
        suite_add_tcase(s, tc);
        tc = tcase_create("bad");
        tcase_add_loop_test(tc, test_bad, 0, RNND_ELEMENTSOF(bad));
        suite_add_tcase(s, tc);
        tc = tcase_create("limits");
        tcase_add_test(tc, test_oversized);
        tcase_add_test(tc, test_not_terminated);
        suite_add_tcase(s, tc);
        tc = tcase_create("names");
        tcase_add_test(tc, test_names);
        tcase_add_test(tc, test_shapes);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(modelcfg_suite)

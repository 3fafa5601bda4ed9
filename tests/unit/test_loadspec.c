/*
 * test_loadspec.c: the load client's spec (proto/loadspec.h): defaults, each
 * key from the command line and from JSON, every rejection, the rules across
 * keys, lengths files and model metadata.
 */
#include <string.h>

#include "alloc.h"
#include "check-main.h"
#include "loadspec.h"

static struct rnnd_loadspec fresh(void)
{
        struct rnnd_loadspec s;

        memset(&s, 0xab, sizeof(s));
        rnnd_loadspec_init(&s);
        return s;
}

START_TEST(test_defaults)
{
        struct rnnd_loadspec s = fresh();

        ck_assert_str_eq(s.url, "http://127.0.0.1:8000");
        ck_assert_int_eq(s.api, RNND_API_V2);
        ck_assert_int_eq(s.format, RNND_TENSORS_JSON);
        ck_assert_int_eq(s.mode, RNND_LOAD_CLOSED);
        ck_assert_uint_eq(s.concurrency, 16);
        ck_assert(s.duration_s == 10 && s.warmup_s == 0 && s.requests == 0);
        ck_assert_uint_eq(s.sequences, 1);
        ck_assert_int_eq(s.len_dist, RNND_LEN_FIXED);
        ck_assert_uint_eq(s.len_min, 8);
        ck_assert_uint_eq(s.len_max, 8);
        ck_assert_uint_eq(s.seed, 1);
        ck_assert(!s.input_given && s.n_outputs == 0 && s.max_error_rate == 0);
        ck_assert(s.timeout_s == 30 && !s.json && s.progress);
        ck_assert_str_eq(s.model, "");
}
END_TEST

START_TEST(test_set_each)
{
        struct rnnd_loadspec s = fresh();
        rnnd_error_t e = {0};

#define SET(k, v) ck_assert_msg(rnnd_loadspec_set(&s, k, v, &e) == 0, "%s: %s", k, e.msg)
        SET("url", "http://10.0.0.1:9000");
        SET("api", "predict");
        SET("model", "digits_lstm");
        SET("model-version", "3");
        SET("format", "binary");
        SET("mode", "open");
        SET("concurrency", "64");
        SET("rate", "250.5");
        SET("arrival", "poisson");
        SET("warmup", "500ms");
        SET("duration", "2m");
        SET("requests", "1000");
        SET("sequences", "4");
        SET("length", "1..512");
        SET("seed", "42");
        SET("max_token", "99"); /* '_' as in JSON */
        SET("input", "tokens:INT64:-1,-1");
        SET("outputs", "h_n,c_n");
        SET("max-error-rate", "0.01");
        SET("timeout", "2.5s");
        SET("json", NULL);
        SET("progress", "false");
#undef SET
        ck_assert_str_eq(s.url, "http://10.0.0.1:9000");
        ck_assert_int_eq(s.api, RNND_API_PREDICT);
        ck_assert_str_eq(s.model, "digits_lstm");
        ck_assert_str_eq(s.version, "3");
        ck_assert_int_eq(s.format, RNND_TENSORS_BINARY);
        ck_assert_int_eq(s.mode, RNND_LOAD_OPEN);
        ck_assert_uint_eq(s.concurrency, 64);
        ck_assert(s.rate == 250.5);
        ck_assert_int_eq(s.arrival, RNND_ARRIVAL_POISSON);
        ck_assert(s.warmup_s == 0.5 && s.duration_s == 120 && s.timeout_s == 2.5);
        ck_assert_uint_eq(s.requests, 1000);
        ck_assert_uint_eq(s.sequences, 4);
        ck_assert_int_eq(s.len_dist, RNND_LEN_UNIFORM);
        ck_assert_uint_eq(s.len_min, 1);
        ck_assert_uint_eq(s.len_max, 512);
        ck_assert_uint_eq(s.seed, 42);
        ck_assert_uint_eq(s.max_token, 99);
        ck_assert(s.input_given);
        ck_assert_str_eq(s.input.name, "tokens");
        ck_assert_int_eq(s.input.dtype, RNND_DT_I64);
        ck_assert_uint_eq(s.input.ndim, 2);
        ck_assert_int_eq(s.input.shape[0], -1);
        ck_assert_uint_eq(s.n_outputs, 2);
        ck_assert_str_eq(s.outputs[1], "c_n");
        ck_assert(s.max_error_rate == 0.01 && s.json && !s.progress);

        ck_assert_int_eq(rnnd_loadspec_set(&s, "length", "@lens.txt", &e), 0);
        ck_assert_int_eq(s.len_dist, RNND_LEN_FILE);
        ck_assert_str_eq(s.len_file, "lens.txt");
        ck_assert_int_eq(rnnd_loadspec_set(&s, "length", "7..7", &e), 0);
        ck_assert_int_eq(s.len_dist, RNND_LEN_FIXED);
        ck_assert_int_eq(rnnd_loadspec_set(&s, "input", "input:FP32:-1,-1,8", &e), 0);
        ck_assert_int_eq(s.input.shape[2], 8);
}
END_TEST

/* Every rejection names the key, and leaves the spec as it was. */
static const struct {
        const char *key, *value, *want;
} bad[] = {
        {"nope", "1", "unknown key 'nope'"},
        {"api", "grpc", "api: want v2|predict|get"},
        {"concurrency", "0", "concurrency: want an integer in 1..65536"},
        {"concurrency", "65537", "concurrency: want an integer"},
        {"concurrency", "-3", "concurrency: want an integer"},
        {"concurrency", "8x", "concurrency: want an integer"},
        {"concurrency", NULL, "concurrency: needs a value"},
        {"rate", "0", "rate: want a number in"},
        {"rate", "nan", "rate: want a number"},
        {"duration", "10h", "duration: want a number of seconds"},
        {"duration", "0", "duration: want a number of seconds"},
        {"length", "0", "length: want L, MIN..MAX"},
        {"length", "9..3", "length: want L, MIN..MAX"},
        {"length", "1..", "length: want L, MIN..MAX"},
        {"length", "2000000", "length: want L, MIN..MAX"},
        {"length", "@", "length: a file name after @"},
        {"input", "input:FP32:-1,-1", "input: want NAME:FP32"},
        {"input", "input:FP64:-1,-1,8", "input: want NAME:FP32"},
        {"input", "tokens:INT64:-1,x", "input: want NAME:FP32"},
        {"input", "nocolons", "input: want NAME:FP32"},
        {"outputs", "a,,b", "outputs: want 1 to 8 names"},
        {"outputs", "a,b,c,d,e,f,g,h,i", "outputs: want 1 to 8 names"},
        {"max-error-rate", "1.5", "max-error-rate: want a number in 0..1"},
        {"json", "yes", "json: want true or false"},
        {"sequences", "0", "sequences: want an integer in 1..65536"},
};

START_TEST(test_set_bad)
{
        struct rnnd_loadspec s = fresh(), before = s;
        rnnd_error_t e = {0};

        ck_assert_int_eq(rnnd_loadspec_set(&s, bad[_i].key, bad[_i].value, &e), RNND_EINVAL);
        ck_assert_int_eq(e.code, RNND_EINVAL);
        ck_assert_msg(strstr(e.msg, bad[_i].want) != NULL, "%s: %s", bad[_i].key, e.msg);
        ck_assert(memcmp(&s, &before, sizeof(s)) == 0);
}
END_TEST

START_TEST(test_json)
{
        struct rnnd_loadspec s = fresh();
        rnnd_error_t e = {0};
        const char *text = "{\"model\": \"m\", \"mode\": \"open\", \"rate\": 200, \"duration\": 5,"
                           " \"length\": \"1..64\", \"sequences\": 2, \"json\": true,"
                           " \"max_error_rate\": 0.5, \"concurrency\": 8, \"max-token\": 3}";

        ck_assert_msg(rnnd_loadspec_parse_json(&s, text, strlen(text), &e) == 0, "%s", e.msg);
        ck_assert_str_eq(s.model, "m");
        ck_assert_int_eq(s.mode, RNND_LOAD_OPEN);
        ck_assert(s.rate == 200 && s.duration_s == 5 && s.max_error_rate == 0.5 && s.json);
        ck_assert_uint_eq(s.len_max, 64);
        ck_assert_uint_eq(s.sequences, 2);
        ck_assert_uint_eq(s.concurrency, 8);
        ck_assert_uint_eq(s.max_token, 3);
        ck_assert_int_eq(rnnd_loadspec_check(&s, &e), 0);
}
END_TEST

static const struct {
        const char *text, *want;
} bad_json[] = {
        {"[1]", "want an object, got an array of 1"},
        {"{\"model\": \"m\",}", "line 1"},
        {"{\"modle\": \"m\"}", "unknown key 'modle'"},
        {"{\"rate\": [1]}", "rate: want a string, number or boolean, got an array of 1"},
        {"{\"rate\": null}", "rate: want a string, number or boolean, got null"},
        {"{\"concurrency\": 2.5}", "concurrency: want an integer in 1..65536, got \"2.5\""},
        {"{\"json\": 1}", "json: want true or false, got \"1\""},
        {"{\"model\": \"a\", \"model\": \"b\"}", "duplicate"},
};

START_TEST(test_json_bad)
{
        struct rnnd_loadspec s = fresh();
        rnnd_error_t e = {0};
        const char *t = bad_json[_i].text;

        ck_assert_int_eq(rnnd_loadspec_parse_json(&s, t, strlen(t), &e), RNND_EINVAL);
        ck_assert_msg(strstr(e.msg, bad_json[_i].want) != NULL, "%s: %s", t, e.msg);
}
END_TEST

static const struct {
        const char *keys[3][2]; /* key, value */
        const char *want;       /* NULL: valid */
} rules[] = {
        {{{"model", "m"}}, NULL},
        {{{"api", "get"}, {"path", "/v2/health/ready"}}, NULL},
        {{{"api", "get"}}, "api get needs a path"},
        {{{"mode", "closed"}}, "api v2 needs a model"},
        {{{"model", "m"}, {"api", "predict"}, {"format", "binary"}}, "format binary needs api v2"},
        {{{"model", "m"}, {"mode", "open"}}, "mode open needs a rate"},
        {{{"model", "m"}, {"url", "localhost:8000"}}, "url: want http://"},
};

START_TEST(test_check)
{
        struct rnnd_loadspec s = fresh();
        rnnd_error_t e = {0};

        for (int k = 0; k < 3 && rules[_i].keys[k][0] != NULL; k++)
                ck_assert_int_eq(
                        rnnd_loadspec_set(&s, rules[_i].keys[k][0], rules[_i].keys[k][1], &e), 0);
        if (rules[_i].want == NULL) {
                ck_assert_msg(rnnd_loadspec_check(&s, &e) == 0, "%s", e.msg);
        } else {
                ck_assert_int_eq(rnnd_loadspec_check(&s, &e), RNND_EINVAL);
                ck_assert_msg(strstr(e.msg, rules[_i].want) != NULL, "%s", e.msg);
        }
}
END_TEST

START_TEST(test_keys_help)
{
        size_t n = rnnd_loadspec_n_keys();

        ck_assert_uint_ge(n, 20);
        ck_assert_ptr_null(rnnd_loadspec_key(n));
        for (size_t i = 0; i < n; i++) {
                const struct rnnd_loadspec_key *k = rnnd_loadspec_key(i);

                ck_assert(k->name != NULL && k->help != NULL && strlen(k->help) > 10);
                /* Booleans take no argument, the rest say what they take. */
                ck_assert_int_eq(rnnd_loadspec_is_bool(k->name), k->arg == NULL);
        }
}
END_TEST

/* Each key's value as the command line writes it, for --help's defaults: read back, the same. */
START_TEST(test_format)
{
        struct rnnd_loadspec s, t;
        rnnd_error_t e = {0};
        char buf[RNND_LOAD_STR_MAX];
        static const struct {
                const char *key, *text;
        } want[] = {
                {"url", "http://127.0.0.1:8000"},
                {"api", "v2"},
                {"model", ""},
                {"mode", "closed"},
                {"concurrency", "16"},
                {"rate", ""},
                {"warmup", "0s"},
                {"duration", "10s"},
                {"requests", "0"},
                {"length", "8"},
                {"input", ""},
                {"max-error-rate", "0"},
                {"timeout", "30s"},
                {"json", "false"},
                {"progress", "true"},
        };

        rnnd_loadspec_init(&s);
        for (size_t i = 0; i < RNND_ELEMENTSOF(want); i++) {
                size_t k = 0;

                while (strcmp(rnnd_loadspec_key(k)->name, want[i].key) != 0)
                        k++;
                rnnd_loadspec_format(&s, k, buf, sizeof(buf));
                ck_assert_msg(strcmp(buf, want[i].text) == 0, "%s: '%s', want '%s'", want[i].key,
                              buf, want[i].text);
        }
        ck_assert_int_eq(rnnd_loadspec_set(&s, "length", "3..9", &e), 0);
        ck_assert_int_eq(rnnd_loadspec_set(&s, "rate", "2.5", &e), 0);
        ck_assert_int_eq(rnnd_loadspec_set(&s, "timeout", "250ms", &e), 0);
        /* Every key's text reads back as the value it came from. */
        rnnd_loadspec_init(&t);
        for (size_t k = 0; k < rnnd_loadspec_n_keys(); k++) {
                rnnd_loadspec_format(&s, k, buf, sizeof(buf));
                if (buf[0] != '\0')
                        ck_assert_int_eq(rnnd_loadspec_set(&t, rnnd_loadspec_key(k)->name, buf, &e),
                                         0);
        }
        ck_assert_uint_eq(t.len_min, 3);
        ck_assert_uint_eq(t.len_max, 9);
        ck_assert(t.rate == 2.5 && t.timeout_s == 0.25);
        rnnd_loadspec_format(&s, rnnd_loadspec_n_keys(), buf, sizeof(buf));
        ck_assert_str_eq(buf, "");
}
END_TEST

START_TEST(test_lengths)
{
        const char *text = "# lengths of a day\n3 5,7\n\n  512 # the longest\n1";
        uint32_t *v = NULL;
        size_t n = 0;
        rnnd_error_t e = {0};

        ck_assert_msg(rnnd_loadspec_lengths_parse(text, strlen(text), &v, &n, &e) == 0, "%s",
                      e.msg);
        ck_assert_uint_eq(n, 5);
        ck_assert_uint_eq(v[0], 3);
        ck_assert_uint_eq(v[3], 512);
        ck_assert_uint_eq(v[4], 1);
        rnnd_free(v);

        ck_assert_int_eq(rnnd_loadspec_lengths_parse("1\n2\nx", 5, &v, &n, &e), RNND_EINVAL);
        ck_assert_msg(strstr(e.msg, "line 3") != NULL, "%s", e.msg);
        ck_assert_int_eq(rnnd_loadspec_lengths_parse("4 0", 3, &v, &n, &e), RNND_EINVAL);
        ck_assert_int_eq(rnnd_loadspec_lengths_parse("99999999999999999999", 20, &v, &n, &e),
                         RNND_EINVAL);
        ck_assert_int_eq(rnnd_loadspec_lengths_parse("# none\n", 7, &v, &n, &e), RNND_EINVAL);
        ck_assert_msg(strstr(e.msg, "no lengths") != NULL, "%s", e.msg);
}
END_TEST

START_TEST(test_model_metadata)
{
        /* What rnnd answers for GET /v2/models/{m} (tests/integration/test_http.py). */
        const char *lstm =
                "{\"name\":\"m\",\"versions\":[\"1\"],\"platform\":\"rnnd_cpu\",\"inputs\":["
                "{\"name\":\"input\",\"datatype\":\"FP32\",\"shape\":[-1,-1,5]},"
                "{\"name\":\"lengths\",\"datatype\":\"INT64\",\"shape\":[-1]}],"
                "\"outputs\":[{\"name\":\"output\",\"datatype\":\"FP32\",\"shape\":[-1,-1,6]},"
                "{\"name\":\"h_n\",\"datatype\":\"FP32\",\"shape\":[-1,1,6]}]}";
        const char *emb =
                "{\"inputs\":[{\"name\":\"lengths\",\"datatype\":\"INT64\",\"shape\":[-1]},"
                "{\"name\":\"tokens\",\"datatype\":\"INT64\",\"shape\":[-1,-1]}],"
                "\"outputs\":[{\"name\":\"scores\"}]}";
        struct rnnd_load_model m;
        rnnd_error_t e = {0};

        ck_assert_msg(rnnd_loadspec_model_parse(lstm, strlen(lstm), &m, &e) == 0, "%s", e.msg);
        ck_assert_str_eq(m.input.name, "input");
        ck_assert_int_eq(m.input.dtype, RNND_DT_F32);
        ck_assert_uint_eq(m.input.ndim, 3);
        ck_assert_int_eq(m.input.shape[2], 5);
        ck_assert_uint_eq(m.n_outputs, 2);
        ck_assert_str_eq(m.outputs[1], "h_n");
        ck_assert_msg(rnnd_loadspec_model_parse(emb, strlen(emb), &m, &e) == 0, "%s", e.msg);
        ck_assert_str_eq(m.input.name, "tokens");
        ck_assert_int_eq(m.input.dtype, RNND_DT_I64);
        ck_assert_uint_eq(m.input.ndim, 2);
        ck_assert_str_eq(m.outputs[0], "scores");

        ck_assert_int_eq(rnnd_loadspec_model_parse("{\"error\":\"x\"}", 13, &m, &e), RNND_EINVAL);
        ck_assert_int_eq(rnnd_loadspec_model_parse("not json", 8, &m, &e), RNND_EINVAL);
        ck_assert_int_eq(rnnd_loadspec_model_parse("{\"inputs\":[],\"outputs\":[]}", 26, &m, &e),
                         RNND_EINVAL);
        ck_assert_msg(strstr(e.msg, "no input or tokens") != NULL, "%s", e.msg);
}
END_TEST

static Suite *loadspec_suite(void)
{
        Suite *s = suite_create("loadspec");
        TCase *tc;

        tc = tcase_create("set");
        tcase_add_test(tc, test_defaults);
        tcase_add_test(tc, test_set_each);
        tcase_add_loop_test(tc, test_set_bad, 0, RNND_ELEMENTSOF(bad));
        tcase_add_test(tc, test_keys_help);
        tcase_add_test(tc, test_format);
        suite_add_tcase(s, tc);
        tc = tcase_create("json");
        tcase_add_test(tc, test_json);
        tcase_add_loop_test(tc, test_json_bad, 0, RNND_ELEMENTSOF(bad_json));
        suite_add_tcase(s, tc);
        tc = tcase_create("check");
        tcase_add_loop_test(tc, test_check, 0, RNND_ELEMENTSOF(rules));
        suite_add_tcase(s, tc);
        tc = tcase_create("files");
        tcase_add_test(tc, test_lengths);
        tcase_add_test(tc, test_model_metadata);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(loadspec_suite)

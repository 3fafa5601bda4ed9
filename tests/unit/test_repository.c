/* test_repository.c: scanning a model repository on disk, built in a temporary directory. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "check-main.h"
#include "model.h"
#include "repository.h"
#include "stfile.h"
#include "tensor.h"

#define MIN_CFG "{\"cell\":\"gru\",\"input_size\":4,\"hidden_size\":8"

/* The temporary repository of the current TCase. */
static char root[64];

/* Creates root/rel, and its parent directories, holding text (a directory when text is NULL). */
static void put(const char *rel, const char *text)
{
        char path[PATH_MAX];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        for (char *p = path + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
                *p = '\0';
                ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s", path);
                *p = '/';
        }
        if (text == NULL) {
                ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s", path);
                return;
        }
        f = fopen(path, "w");
        ck_assert_msg(f != NULL, "fopen %s", path);
        fputs(text, f);
        fclose(f);
}

/* A model directory with config text (none when NULL) and versions 1, 2, 10, plus decoys. */
static void put_model(const char *name, const char *config)
{
        static const char *const dirs[] = {"1", "2", "10", "abc", "007", "0", "-3", "+4", "2x"};
        char rel[256];

        put(name, NULL);
        if (config != NULL) {
                snprintf(rel, sizeof(rel), "%s/config.json", name);
                put(rel, config);
        }
        for (size_t i = 0; i < RNND_ELEMENTSOF(dirs); i++) {
                snprintf(rel, sizeof(rel), "%s/%s", name, dirs[i]);
                put(rel, NULL);
        }
        /* A numeric plain file is not a version. */
        snprintf(rel, sizeof(rel), "%s/5", name);
        put(rel, "not a version");
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st;
        (void)flag;
        (void)ftw;
        return remove(path);
}

static void make_root(void)
{
        snprintf(root, sizeof(root), "/tmp/rnnd-repo-XXXXXX");
        ck_assert_ptr_nonnull(mkdtemp(root));
}

static void remove_root(void)
{
        if (root[0] != '\0')
                nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        root[0] = '\0';
}

/* The shared repository: every kind of model, once per TCase. */
static void setup_repo(void)
{
        make_root();
        put_model("good", MIN_CFG "}");
        put_model("latest2", MIN_CFG ",\"version_policy\":{\"latest\":{\"num_versions\":2}}}");
        put_model("all", MIN_CFG ",\"version_policy\":{\"all\":{}}}");
        put_model("specific", MIN_CFG ",\"version_policy\":{\"specific\":{\"versions\":[1,3]}}}");
        put_model("Specific-ok.v2",
                  MIN_CFG ",\"version_policy\":{\"specific\":{\"versions\":[10,1]}}}");
        put_model("bad_cfg", "{\"cell\":\"gru\",\"input_size\":4,\"hidden_size\":0}");
        put_model("no_cfg", NULL);
        put("no_versions/config.json", MIN_CFG "}");
        put("no_versions/v1", NULL);
        put("no_versions/0", NULL);
        /* Skipped: hidden, badly named, and plain files. */
        put(".hidden/config.json", MIN_CFG "}");
        put(".hidden/1", NULL);
        put("bad name/config.json", MIN_CFG "}");
        put("bad name/1", NULL);
        put("README.md", "not a model");
}

/* The models the scan must list, in order. */
static const struct {
        const char *name;
        int status;
        const char *reason;
        uint32_t n_versions;
        uint64_t versions[3];
} models[] = {
        {"Specific-ok.v2", 0, "", 2, {1, 10}},
        {"all", 0, "", 3, {1, 2, 10}},
        {"bad_cfg",
         RNND_EMODEL,
         "bad_cfg/config.json: field 'hidden_size': must be an integer",
         0,
         {0}},
        {"good", 0, "", 1, {10}},
        {"latest2", 0, "", 2, {2, 10}},
        {"no_cfg", RNND_EIO, "no_cfg/config.json: cannot open", 0, {0}},
        {"no_versions",
         RNND_EMODEL,
         "no version directory: no_versions/ holds no directory named by a version number (a "
         "positive integer without leading zeros), such as no_versions/1/ with model.safetensors "
         "in it; not versions: ",
         0,
         {0}},
        {"specific", RNND_EMODEL, "version 3 requested by version_policy is missing", 0, {0}},
};

START_TEST(test_scan_model)
{
        struct rnnd_repository_index idx = {0};
        const struct rnnd_repository_model *m;
        rnnd_error_t e = {0};

        ck_assert_int_eq(rnnd_repository_scan(root, &idx, &e), 0);
        ck_assert_uint_eq(idx.n_models, RNND_ELEMENTSOF(models));
        m = &idx.models[_i];
        ck_assert_str_eq(m->name, models[_i].name);
        ck_assert_ptr_eq(rnnd_repository_find(&idx, models[_i].name), m);
        ck_assert_msg(m->status == models[_i].status, "%s: status %d (%s)", m->name, m->status,
                      m->reason);
        ck_assert_msg(strstr(m->reason, models[_i].reason) != NULL, "%s: reason '%s'", m->name,
                      m->reason);
        /* Clients see reasons: no path of the server's (the repository root) in them. */
        ck_assert_msg(strstr(m->reason, root) == NULL, "%s: reason '%s'", m->name, m->reason);
        ck_assert_uint_eq(m->n_versions, models[_i].n_versions);
        for (uint32_t v = 0; v < m->n_versions; v++)
                ck_assert_uint_eq(m->versions[v], models[_i].versions[v]);
        if (m->status == 0) {
                ck_assert_int_eq(m->cfg.cell, RNND_CELL_GRU);
                ck_assert_uint_eq(m->cfg.hidden_size, 8);
        }
        rnnd_repository_index_done(&idx);
        ck_assert_ptr_null(idx.models);
        ck_assert_uint_eq(idx.n_models, 0);
}
END_TEST

START_TEST(test_find)
{
        struct rnnd_repository_index idx = {0};

        ck_assert_ptr_null(rnnd_repository_find(&idx, "good"));
        rnnd_repository_index_done(&idx);
        ck_assert_int_eq(rnnd_repository_scan(root, &idx, NULL), 0);
        ck_assert_ptr_null(rnnd_repository_find(&idx, ".hidden"));
        ck_assert_ptr_null(rnnd_repository_find(&idx, "bad name"));
        ck_assert_ptr_null(rnnd_repository_find(&idx, "README.md"));
        ck_assert_ptr_null(rnnd_repository_find(&idx, "goo"));
        ck_assert_ptr_null(rnnd_repository_find(&idx, ""));
        ck_assert_ptr_null(rnnd_repository_find(&idx, "zzz"));
        ck_assert_ptr_nonnull(rnnd_repository_find(&idx, "good"));
        for (size_t i = 1; i < idx.n_models; i++)
                ck_assert_int_lt(strcmp(idx.models[i - 1].name, idx.models[i].name), 0);
        rnnd_repository_index_done(&idx);
        rnnd_repository_index_done(&idx);
}
END_TEST

/*
 * What the scan passes over is listed with the reason, for the daemon's log:
 * badly named model directories, files at the root, and a model's
 * directories that are no version ("007": a leading zero); not hidden ones.
 */
START_TEST(test_skipped)
{
        static const struct {
                const char *name;
                bool is_dir;
                const char *reason;
        } want[] = {
                {"bad name", true, "not a valid model name"},
                {"README.md", false, "not a directory"},
                {"good/007", true, "not a version number (a positive integer without leading"},
                {"good/abc", true, "not a version number"},
                {"good/0", true, "not a version number"},
                {"no_versions/v1", true, "not a version number"},
        };
        struct rnnd_repository_index idx = {0};
        const struct rnnd_repository_model *m;
        rnnd_error_t e = {0};

        ck_assert_int_eq(rnnd_repository_scan(root, &idx, &e), 0);
        ck_assert_uint_eq(idx.n_skipped_more, 0);
        for (size_t i = 0; i < RNND_ELEMENTSOF(want); i++) {
                size_t j = 0;

                while (j < idx.n_skipped && strcmp(idx.skipped[j].name, want[i].name) != 0)
                        j++;
                ck_assert_msg(j < idx.n_skipped, "%s is not listed as skipped", want[i].name);
                ck_assert_int_eq(idx.skipped[j].is_dir, want[i].is_dir);
                ck_assert_msg(strstr(idx.skipped[j].reason, want[i].reason) != NULL, "%s: '%s'",
                              want[i].name, idx.skipped[j].reason);
        }
        for (size_t j = 0; j < idx.n_skipped; j++) {
                ck_assert_msg(strstr(idx.skipped[j].name, "hidden") == NULL, "%s",
                              idx.skipped[j].name);
                /* A model's files (config.json, the numeric file 5) are no news. */
                ck_assert_msg(strstr(idx.skipped[j].name, "/config.json") == NULL &&
                                      strcmp(idx.skipped[j].name, "good/5") != 0,
                              "%s", idx.skipped[j].name);
        }
        /* A model without a version names the directories it rejected. */
        m = rnnd_repository_find(&idx, "no_versions");
        ck_assert_ptr_nonnull(m);
        ck_assert_msg(strstr(m->reason, "v1/") != NULL && strstr(m->reason, "0/") != NULL, "%s",
                      m->reason);
        rnnd_repository_index_done(&idx);
        ck_assert_ptr_null(idx.skipped);
        ck_assert_uint_eq(idx.n_skipped, 0);
}
END_TEST

START_TEST(test_read_config)
{
        struct rnnd_model_config cfg;
        char dir[PATH_MAX];
        rnnd_error_t e = {0};

        snprintf(dir, sizeof(dir), "%s/latest2", root);
        ck_assert_int_eq(rnnd_repository_read_config(dir, &cfg, &e), 0);
        ck_assert_uint_eq(cfg.version_policy.num_versions, 2);
        snprintf(dir, sizeof(dir), "%s/bad_cfg", root);
        memset(&cfg, 0x5a, sizeof(cfg));
        ck_assert_int_eq(rnnd_repository_read_config(dir, &cfg, &e), RNND_EMODEL);
        ck_assert_msg(strncmp(e.msg, dir, strlen(dir)) == 0, "%s", e.msg);
        ck_assert_ptr_nonnull(strstr(e.msg, "/config.json: field 'hidden_size'"));
        ck_assert_uint_eq(cfg.hidden_size, 0x5a5a5a5au);
        snprintf(dir, sizeof(dir), "%s/no_cfg", root);
        ck_assert_int_eq(rnnd_repository_read_config(dir, &cfg, &e), RNND_EIO);
}
END_TEST

/* Roots that cannot be scanned; *ret is left alone. */
START_TEST(test_bad_root)
{
        struct rnnd_repository_index idx = {.models = (void *)&idx, .n_models = 7};
        char path[PATH_MAX];
        rnnd_error_t e = {0};

        snprintf(path, sizeof(path), "%s/does-not-exist", root);
        ck_assert_int_eq(rnnd_repository_scan(path, &idx, &e), RNND_EIO);
        ck_assert_ptr_nonnull(strstr(e.msg, "does-not-exist"));
        snprintf(path, sizeof(path), "%s/README.md", root);
        ck_assert_int_eq(rnnd_repository_scan(path, &idx, &e), RNND_EIO);
        ck_assert_ptr_eq(idx.models, (void *)&idx);
        ck_assert_uint_eq(idx.n_models, 7);
}
END_TEST

/* Every allocation failing in turn gives RNND_ENOMEM and leaks nothing. */
START_TEST(test_oom)
{
        struct rnnd_repository_index idx = {0};
        rnnd_error_t e = {0};
        int r;

        for (long n = 0;; n++) {
                rnnd_alloc_fail_after(n);
                r = rnnd_repository_scan(root, &idx, &e);
                rnnd_alloc_fail_after(-1);
                if (r == 0)
                        break;
                ck_assert_int_eq(r, RNND_ENOMEM);
                ck_assert_ptr_null(idx.models);
        }
        ck_assert_uint_eq(idx.n_models, RNND_ELEMENTSOF(models));
        rnnd_repository_index_done(&idx);
}
END_TEST

/* Limits, each in a fresh tree: too many models, an oversized config, an overlong path. */
START_TEST(test_too_many_models)
{
        struct rnnd_repository_index idx = {0};
        rnnd_error_t e = {0};
        char name[32];

        for (unsigned i = 0; i < RNND_REPOSITORY_MAX_MODELS; i++) {
                snprintf(name, sizeof(name), "m%u", i);
                put(name, NULL);
        }
        ck_assert_int_eq(rnnd_repository_scan(root, &idx, &e), 0);
        ck_assert_uint_eq(idx.n_models, RNND_REPOSITORY_MAX_MODELS);
        ck_assert_int_eq(idx.models[0].status, RNND_EIO); /* no config.json */
        rnnd_repository_index_done(&idx);
        put("one-too-many", NULL);
        ck_assert_int_eq(rnnd_repository_scan(root, &idx, &e), RNND_ELIMIT);
        ck_assert_ptr_nonnull(strstr(e.msg, "more than 4096 models"));
        ck_assert_ptr_null(idx.models);
}
END_TEST

START_TEST(test_oversized_config)
{
        struct rnnd_repository_index idx = {0};
        struct rnnd_model_config cfg;
        rnnd_error_t e = {0};
        char path[PATH_MAX];
        int fd;

        put("big/1", NULL);
        snprintf(path, sizeof(path), "%s/big/config.json", root);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, RNND_CFG_MAX_FILE_BYTES + 1), 0);
        close(fd);
        snprintf(path, sizeof(path), "%s/big", root);
        ck_assert_int_eq(rnnd_repository_read_config(path, &cfg, &e), RNND_ELIMIT);
        ck_assert_int_eq(rnnd_repository_scan(root, &idx, &e), 0);
        ck_assert_uint_eq(idx.n_models, 1);
        ck_assert_int_eq(idx.models[0].status, RNND_ELIMIT);
        rnnd_repository_index_done(&idx);
}
END_TEST

/*
 * A FIFO as config.json is refused at once, by the scan too; opening it used
 * to wait for a writer, hanging the load and every reload behind it.
 */
START_TEST(test_fifo_config)
{
        struct rnnd_repository_index idx = {0};
        struct rnnd_model_config cfg;
        rnnd_error_t e = {0};
        char path[PATH_MAX];

        put("fifo/1", NULL);
        snprintf(path, sizeof(path), "%s/fifo/config.json", root);
        ck_assert_int_eq(mkfifo(path, 0600), 0);
        snprintf(path, sizeof(path), "%s/fifo", root);
        ck_assert_int_eq(rnnd_repository_read_config(path, &cfg, &e), RNND_EIO);
        ck_assert_msg(strstr(e.msg, "/fifo/config.json: not a regular file") != NULL, "%s", e.msg);
        ck_assert_int_eq(rnnd_repository_scan(root, &idx, &e), 0);
        ck_assert_uint_eq(idx.n_models, 1);
        ck_assert_int_eq(idx.models[0].status, RNND_EIO);
        rnnd_repository_index_done(&idx);
}
END_TEST

/* Copies file src to dst. */
static void copy_file(const char *src, const char *dst)
{
        char buf[4096];
        FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
        size_t n;

        ck_assert_ptr_nonnull(in);
        ck_assert_ptr_nonnull(out);
        while ((n = fread(buf, 1, sizeof(buf), in)) > 0)
                ck_assert_uint_eq(fwrite(buf, 1, n, out), n);
        fclose(in);
        ck_assert_int_eq(fclose(out), 0);
}

static const struct {
        uint32_t bits; /* the float written */
        const char *what;
} nonfinite[] = {
        {0x7fc00000, "NaN"},
        {0x7f800000, "+Inf"},
        {0xff800000, "-Inf"},
};

/*
 * Weights holding NaN or Inf are refused at load, naming the tensor and the
 * element; they used to load and answer NaN, which JSON cannot carry.
 */
START_TEST(test_load_nonfinite)
{
        static const char model[] = "rnn_tanh_l3_uni_ragged_noh0", tensor[] = "rnn.weight_ih_l0";
        const struct rnnd_st_tensor *t;
        struct rnnd_model_config cfg;
        rnnd_model_t *m = NULL;
        rnnd_stfile_t *f = NULL;
        char src[PATH_MAX], dst[PATH_MAX], dir[PATH_MAX / 2], want[128];
        unsigned char len8[8], b[4];
        rnnd_error_t e = {0};
        uint64_t off = 0;
        FILE *fp;

        snprintf(dir, sizeof(dir), "%s/%s", root, model);
        put(model, NULL);
        put("rnn_tanh_l3_uni_ragged_noh0/1", NULL);
        snprintf(src, sizeof(src), "%s/golden/models/%s/config.json", rnnd_test_dir(), model);
        snprintf(dst, sizeof(dst), "%s/config.json", dir);
        copy_file(src, dst);
        snprintf(src, sizeof(src), "%s/golden/models/%s/1/model.safetensors", rnnd_test_dir(),
                 model);
        snprintf(dst, sizeof(dst), "%s/1/model.safetensors", dir);
        copy_file(src, dst);
        ck_assert_int_eq(rnnd_repository_read_config(dir, &cfg, &e), 0);
        /* As copied, it loads. */
        ck_assert_msg(rnnd_model_load(dir, model, 1, &cfg, &m, &e) == 0, "%s", e.msg);
        rnnd_model_unref(m);

        /* Element 7 of weight_ih_l0 becomes the non-finite value. */
        ck_assert_msg(rnnd_stfile_open(dst, &f, &e) == 0, "%s", e.msg);
        t = rnnd_stfile_find(f, tensor);
        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(t->dtype, RNND_DT_F32);
        off = t->begin + 7 * 4;
        rnnd_stfile_close(f);
        fp = fopen(dst, "r+b");
        ck_assert_ptr_nonnull(fp);
        ck_assert_uint_eq(fread(len8, 1, 8, fp), 8);
        for (int i = 7; i >= 0; i--)
                off += (uint64_t)len8[i] << (8 * i);
        off += 8;
        for (int i = 0; i < 4; i++)
                b[i] = (unsigned char)(nonfinite[_i].bits >> (8 * i));
        ck_assert_int_eq(fseek(fp, (long)off, SEEK_SET), 0);
        ck_assert_uint_eq(fwrite(b, 1, 4, fp), 4);
        ck_assert_int_eq(fclose(fp), 0);

        m = NULL;
        ck_assert_int_eq(rnnd_model_load(dir, model, 1, &cfg, &m, &e), RNND_EMODEL);
        ck_assert_ptr_null(m);
        snprintf(want, sizeof(want), "tensor '%s' element 7 (of 30) is %s; weights must be finite",
                 tensor, nonfinite[_i].what);
        ck_assert_msg(strstr(e.msg, want) != NULL, "'%s' lacks '%s'", e.msg, want);
        ck_assert_msg(strncmp(e.msg, dst, strlen(dst)) == 0, "%s", e.msg);
}
END_TEST

/*
 * A config.json whose sizes are not the file's: the message names the tensor, both shapes
 * and what the file holds, with the path relative to the repository.
 */
START_TEST(test_load_wrong_size)
{
        static const struct {
                const char *config, *want;
        } cases[] = {
                {"{\"cell\":\"rnn_tanh\",\"input_size\":5,\"hidden_size\":7,\"num_layers\":3,"
                 "\"weights\":{\"prefix\":\"rnn.\"}}",
                 "m/1/model.safetensors: tensor 'rnn.weight_ih_l0' has shape [6, 5], the config "
                 "needs [7, 5]; the file holds an rnn of hidden_size 6, input_size 5; config.json "
                 "says rnn_tanh, hidden_size 7, input_size 5"},
                {"{\"cell\":\"gru\",\"input_size\":5,\"hidden_size\":2,\"num_layers\":3,"
                 "\"weights\":{\"prefix\":\"rnn.\"}}",
                 /* A GRU of 2 has weight_ih [6, 5] too: the recurrent weights tell. */
                 "m/1/model.safetensors: tensor 'rnn.weight_hh_l0' has shape [6, 6], the config "
                 "needs [6, 2]; the file holds an rnn of hidden_size 6, input_size 5; config.json "
                 "says gru, hidden_size 2, input_size 5"},
                {"{\"cell\":\"rnn_tanh\",\"input_size\":4,\"hidden_size\":6,\"num_layers\":3,"
                 "\"weights\":{\"prefix\":\"rnn.\"}}",
                 "m/1/model.safetensors: tensor 'rnn.weight_ih_l0' has shape [6, 5], the config "
                 "needs [6, 4]; the file holds an rnn of hidden_size 6, input_size 5; config.json "
                 "says rnn_tanh, hidden_size 6, input_size 4"},
        };
        struct rnnd_repository_index idx = {0};
        char src[PATH_MAX], dst[PATH_MAX];
        rnnd_model_t *m = NULL;
        rnnd_error_t e = {0};

        put("m/config.json", cases[_i].config);
        put("m/1", NULL);
        snprintf(src, sizeof(src),
                 "%s/golden/models/rnn_tanh_l3_uni_ragged_noh0/1/model.safetensors",
                 rnnd_test_dir());
        snprintf(dst, sizeof(dst), "%s/m/1/model.safetensors", root);
        copy_file(src, dst);
        ck_assert_int_eq(rnnd_repository_scan(root, &idx, &e), 0);
        ck_assert_int_eq(idx.models[0].status, 0);
        ck_assert_int_eq(rnnd_repository_load(root, &idx.models[0], 1, &m, &e), RNND_EMODEL);
        ck_assert_ptr_null(m);
        ck_assert_msg(strcmp(e.msg, cases[_i].want) == 0, "'%s', want '%s'", e.msg, cases[_i].want);
        rnnd_repository_index_done(&idx);
}
END_TEST

/* More version directories than a policy can list: latest keeps the highest, all is refused. */
START_TEST(test_many_versions)
{
        struct rnnd_repository_index idx = {0};
        const struct rnnd_repository_model *m;
        rnnd_error_t e = {0};
        char rel[64];

        put("latest/config.json",
            MIN_CFG ",\"version_policy\":{\"latest\":{\"num_versions\":64}}}");
        put("all/config.json", MIN_CFG ",\"version_policy\":{\"all\":{}}}");
        /* Created in a shuffled order: 1..70 as (i * 37) % 70 + 1. */
        for (unsigned i = 0; i < 70; i++) {
                snprintf(rel, sizeof(rel), "latest/%u", (i * 37) % 70 + 1);
                put(rel, NULL);
                snprintf(rel, sizeof(rel), "all/%u", (i * 37) % 70 + 1);
                put(rel, NULL);
        }
        put("latest/18446744073709551616", NULL); /* 2^64 does not fit */
        ck_assert_int_eq(rnnd_repository_scan(root, &idx, &e), 0);
        m = rnnd_repository_find(&idx, "latest");
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(m->status, 0);
        ck_assert_uint_eq(m->n_versions, 64);
        for (uint32_t i = 0; i < 64; i++)
                ck_assert_uint_eq(m->versions[i], 7 + i);
        m = rnnd_repository_find(&idx, "all");
        ck_assert_ptr_nonnull(m);
        ck_assert_int_eq(m->status, RNND_ELIMIT);
        ck_assert_ptr_nonnull(strstr(m->reason, "70 version directories"));
        rnnd_repository_index_done(&idx);
}
END_TEST

START_TEST(test_long_path)
{
        struct rnnd_model_config cfg;
        rnnd_error_t e = {0};
        char *dir = malloc(PATH_MAX + 16);

        ck_assert_ptr_nonnull(dir);
        memset(dir, 'a', PATH_MAX + 15);
        dir[PATH_MAX + 15] = '\0';
        ck_assert_int_eq(rnnd_repository_read_config(dir, &cfg, &e), RNND_ELIMIT);
        free(dir);
}
END_TEST

static Suite *repository_suite(void)
{
        Suite *s = suite_create("repository");
        TCase *tc;

        tc = tcase_create("scan");
        tcase_add_unchecked_fixture(tc, setup_repo, remove_root);
        tcase_add_loop_test(tc, test_scan_model, 0, RNND_ELEMENTSOF(models));
        tcase_add_test(tc, test_find);
        tcase_add_test(tc, test_skipped);
        tcase_add_test(tc, test_read_config);
        tcase_add_test(tc, test_bad_root);
        tcase_add_test(tc, test_oom);
        suite_add_tcase(s, tc);
        tc = tcase_create("limits");
        tcase_add_checked_fixture(tc, make_root, remove_root);
        tcase_add_test(tc, test_too_many_models);
        tcase_add_test(tc, test_oversized_config);
        tcase_add_test(tc, test_many_versions);
        tcase_add_test(tc, test_long_path);
        tcase_add_test(tc, test_fifo_config);
        tcase_add_loop_test(tc, test_load_nonfinite, 0, RNND_ELEMENTSOF(nonfinite));
        tcase_add_loop_test(tc, test_load_wrong_size, 0, 3);
        tcase_set_timeout(tc, 30);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(repository_suite)

/*
 * test_options.c: daemon/options.c: the settings table, the value parsers,
 * the config file and the command line, and that config/rnnd.conf is exactly
 * what `rnnd --dump-config` prints.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check-main.h"
#include "decimal.h"
#include "log.h"
#include "options-int.h"
#include "options.h"

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))

/* The source tree's root, from the environment meson sets. */
static const char *src_root(void)
{
        const char *s = getenv("RNND_SRC");

        return s != NULL ? s : ".";
}

/* What f printed, as a new string. */
static char *capture(void (*fn)(FILE *, const struct rnnd_options *), const struct rnnd_options *o)
{
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);

        ck_assert_ptr_nonnull(f);
        fn(f, o);
        fclose(f);
        return buf;
}

static void help_adapter(FILE *f, const struct rnnd_options *o)
{
        (void)o;
        rnnd_options_help(f);
}

static char *read_file(const char *path)
{
        FILE *f = fopen(path, "rb");
        char *buf;
        long n;

        if (f == NULL)
                return NULL;
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        fseek(f, 0, SEEK_SET);
        buf = malloc((size_t)n + 1);
        ck_assert_ptr_nonnull(buf);
        ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

/* Writes text to a new temporary file; returns its path (static buffer per slot). */
static const char *temp_file(const char *text, mode_t mode)
{
        static char paths[4][64];
        static unsigned slot;
        char *p = paths[slot++ % 4];
        int fd;

        snprintf(p, 64, "/tmp/rnnd-test-XXXXXX");
        fd = mkstemp(p);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        fchmod(fd, mode);
        close(fd);
        return p;
}

/* The table. */

START_TEST(test_table_rows)
{
        size_t n, i, j;
        const struct rnnd_option *t = rnnd_options_table(&n);
        static const char *const keys[] = {
                "listen",
                "grpc_listen",
                "model_repository",
                "repository_poll_interval",
                "threads",
                "connection_limit",
                "connection_timeout",
                "header_timeout",
                "per_address_limit",
                "max_body_bytes",
                "grpc_max_message_bytes",
                "grpc_max_streams",
                "grpc_threads",
                "grpc_max_header_bytes",
                "max_tensor_elements",
                "max_response_bytes",
                "max_response_memory",
                "max_shm_regions",
                "max_json_depth",
                "max_json_memory",
                "per_connection_memory",
                "log_level",
                "access_log",
                "log_format",
                "backend",
                "cpu_threads",
                "shutdown_timeout",
                "worker_stall_timeout",
                "auth_token_file",
        };

        ck_assert_uint_eq(n, ELEMENTSOF(keys));
        for (i = 0; i < ELEMENTSOF(keys); i++) {
                const struct rnnd_option *o = rnnd_options_find(keys[i]);

                ck_assert_msg(o != NULL, "no row for %s", keys[i]);
                ck_assert_str_eq(o->name, keys[i]);
                ck_assert_msg(o->help != NULL && strlen(o->help) > 20, "%s: no help", keys[i]);
                ck_assert_ptr_nonnull(o->def);
                ck_assert_ptr_nonnull(o->metavar);
        }
        for (i = 0; i < n; i++)
                for (j = i + 1; j < n; j++)
                        ck_assert_str_ne(t[i].name, t[j].name);
        /* Dashes and underscores are the same in names. */
        ck_assert_ptr_eq(rnnd_options_find("model-repository"),
                         rnnd_options_find("model_repository"));
        ck_assert_ptr_null(rnnd_options_find("bogus"));
        ck_assert_ptr_null(rnnd_options_find("listen_"));
}
END_TEST

START_TEST(test_defaults)
{
        struct rnnd_options o;

        ck_assert_int_eq(rnnd_options_init(&o), 0);
        ck_assert_str_eq(o.listen, "127.0.0.1:8000");
        ck_assert_str_eq(o.model_repository, "config/models");
        ck_assert_uint_eq(o.repository_poll_interval, 0); /* off */
        ck_assert_uint_eq(o.threads, 0);                  /* auto */
        ck_assert_uint_eq(o.connection_limit, 1024);
        ck_assert_uint_eq(o.connection_timeout, 30);
        ck_assert_uint_eq(o.header_timeout, 10);
        ck_assert_uint_eq(o.per_address_limit, 0);
        ck_assert_uint_eq(rnnd_options_per_address_limit(&o), 768);
        ck_assert_uint_eq(o.max_body_bytes, 64u << 20);
        ck_assert_uint_eq(o.max_tensor_elements, 16777216);
        ck_assert_uint_eq(o.max_response_bytes, 64u << 20);
        ck_assert_uint_eq(o.max_json_depth, 32);
        ck_assert_uint_eq(o.per_connection_memory, 16u << 10);
        ck_assert_int_eq(o.log_level, RNND_LOG_INFO);
        ck_assert_int_eq(o.log_format, RNND_LOG_TEXT);
        ck_assert_int_eq(o.backend, RNND_BACKEND_AUTO);
        ck_assert_uint_eq(o.cpu_threads, 1);
        ck_assert_uint_eq(o.shutdown_timeout, 30);
        ck_assert_str_eq(o.auth_token_file, "");
        ck_assert_str_eq(o.backend_from, "default");
        ck_assert_ptr_null(o.config_file);
        ck_assert_uint_ge(rnnd_options_threads(&o), 1);
        ck_assert_uint_eq(o.grpc_threads, 0); /* auto */
        ck_assert_uint_ge(rnnd_options_grpc_threads(&o), 1);
        ck_assert_int_eq(rnnd_options_check(&o, NULL), 0);
        rnnd_options_done(&o);
        rnnd_options_done(&o); /* Twice is harmless. */
}
END_TEST

/* The value parsers. */

static const struct {
        const char *text;
        int want_r;
        uint64_t uint, bytes, duration;
} numbers[] = {
        {"0", 0, 0, 0, 0},
        {"42", 0, 42, 42, 42},
        {"18446744073709551615", 0, UINT64_MAX, UINT64_MAX, UINT64_MAX},
        {"18446744073709551616", RNND_ELIMIT, 0, 0, 0},
        {"", RNND_EINVAL, 0, 0, 0},
        {"-1", RNND_EINVAL, 0, 0, 0},
        {" 1", RNND_EINVAL, 0, 0, 0},
        {"1 ", RNND_EINVAL, 0, 0, 0},
        {"0x10", RNND_EINVAL, 0, 0, 0},
        {"1.5", RNND_EINVAL, 0, 0, 0},
};

START_TEST(test_parse_numbers)
{
        uint64_t v = 7;

        ck_assert_int_eq(rnnd_decimal_parse(numbers[_i].text, &v), numbers[_i].want_r);
        if (numbers[_i].want_r == 0)
                ck_assert_uint_eq(v, numbers[_i].uint);
        else
                ck_assert_uint_eq(v, 7); /* untouched */
        ck_assert_int_eq(rnnd__opt_parse_bytes(numbers[_i].text, &v), numbers[_i].want_r);
        ck_assert_int_eq(rnnd__opt_parse_duration(numbers[_i].text, &v), numbers[_i].want_r);
}
END_TEST

static const struct {
        const char *text;
        int want_r;
        uint64_t want;
} sizes[] = {
        {"1K", 0, 1024},
        {"1k", 0, 1024},
        {"64M", 0, 64u << 20},
        {"64MiB", 0, 64u << 20},
        {"2G", 0, UINT64_C(2) << 30},
        {"1T", 0, UINT64_C(1) << 40},
        {"100B", 0, 100},
        {"10X", RNND_EINVAL, 0},
        {"M", RNND_EINVAL, 0},
        {"17179869184G", RNND_ELIMIT, 0},
};

START_TEST(test_parse_bytes)
{
        uint64_t v = 0;

        ck_assert_int_eq(rnnd__opt_parse_bytes(sizes[_i].text, &v), sizes[_i].want_r);
        if (sizes[_i].want_r == 0)
                ck_assert_uint_eq(v, sizes[_i].want);
}
END_TEST

static const struct {
        const char *text;
        int want_r;
        uint64_t want;
} durations[] = {
        {"30", 0, 30},   {"30s", 0, 30},          {"5m", 0, 300},         {"2min", 0, 120},
        {"1h", 0, 3600}, {"1ms", RNND_EINVAL, 0}, {"1d", RNND_EINVAL, 0}, {"h", RNND_EINVAL, 0},
};

START_TEST(test_parse_duration)
{
        uint64_t v = 0;

        ck_assert_int_eq(rnnd__opt_parse_duration(durations[_i].text, &v), durations[_i].want_r);
        if (durations[_i].want_r == 0)
                ck_assert_uint_eq(v, durations[_i].want);
}
END_TEST

START_TEST(test_parse_bool)
{
        static const char *const yes[] = {"yes", "TRUE", "on", "1"};
        static const char *const no[] = {"no", "False", "OFF", "0"};
        bool b;
        size_t i;

        for (i = 0; i < ELEMENTSOF(yes); i++) {
                b = false;
                ck_assert_int_eq(rnnd__opt_parse_bool(yes[i], &b), 0);
                ck_assert(b);
                ck_assert_int_eq(rnnd__opt_parse_bool(no[i], &b), 0);
                ck_assert(!b);
        }
        ck_assert_int_eq(rnnd__opt_parse_bool("maybe", &b), RNND_EINVAL);
        ck_assert_int_eq(rnnd__opt_parse_bool("", &b), RNND_EINVAL);
}
END_TEST

static const struct {
        const char *text;
        bool ok;
        const char *host;
        unsigned port;
} listens[] = {
        {"127.0.0.1:8000", true, "127.0.0.1", 8000},
        {"0.0.0.0:0", true, "0.0.0.0", 0},
        {"localhost:65535", true, "localhost", 65535},
        {"[::1]:8000", true, "::1", 8000},
        {"[::]:80", true, "::", 80},
        {"127.0.0.1", false, NULL, 0},
        {":8000", false, NULL, 0},
        {"::1:8000", false, NULL, 0},
        {"[::1]8000", false, NULL, 0},
        {"[]:8000", false, NULL, 0},
        {"host:65536", false, NULL, 0},
        {"host:http", false, NULL, 0},
        {"host:", false, NULL, 0},
        {"ho st:80", false, NULL, 0},
        {"[::1]:", false, NULL, 0},
};

START_TEST(test_split_listen)
{
        char host[64] = "";
        unsigned port = 12345;
        rnnd_error_t e = {0};
        int r = rnnd_options_split_listen(listens[_i].text, host, sizeof(host), &port, &e);

        if (listens[_i].ok) {
                ck_assert_msg(r == 0, "%s: %s", listens[_i].text, e.msg);
                ck_assert_str_eq(host, listens[_i].host);
                ck_assert_uint_eq(port, listens[_i].port);
        } else {
                ck_assert_msg(r == RNND_EINVAL, "%s accepted", listens[_i].text);
                ck_assert_str_ne(e.msg, "");
        }
}
END_TEST

/* Setting values: limits and messages. */

static const struct {
        const char *key, *value;
        int want_r;
        const char *msg; /* a substring of the message, or NULL */
} sets[] = {
        {"threads", "8", 0, NULL},
        {"threads", "auto", 0, NULL},
        {"grpc_threads", "3", 0, NULL},
        {"grpc_threads", "0", RNND_ELIMIT, "grpc_threads: '0' is out of range 1..1024"},
        {"threads", "0", RNND_ELIMIT, "threads: '0' is out of range 1..1024"},
        {"threads", "1025", RNND_ELIMIT, "out of range"},
        {"threads", "many", RNND_EINVAL, "threads: 'many' is not an unsigned integer or auto"},
        {"connection_limit", "auto", RNND_EINVAL, "is not an unsigned integer"},
        {"connection_timeout", "0", RNND_ELIMIT, "out of range 1s..24h"},
        {"connection_timeout", "2m", 0, NULL},
        {"max_body_bytes", "1023", RNND_ELIMIT, "out of range 1K..4G"},
        {"max_body_bytes", "5G", RNND_ELIMIT, NULL},
        {"max_body_bytes", "1M", 0, NULL},
        {"max_json_depth", "1", RNND_ELIMIT, NULL},
        {"per_connection_memory", "4K", RNND_ELIMIT, NULL},
        {"log_level", "warning", 0, NULL},
        {"log_level", "warn", RNND_EINVAL, "'warn' is not one of err|warning|notice|info|debug"},
        {"log_format", "xml", RNND_EINVAL, "text|json"},
        {"backend", "gpu", RNND_EINVAL, "auto|cpu"},
        {"listen", "nowhere", RNND_EINVAL, "listen: 'nowhere' has no port"},
        {"model_repository", "", RNND_EINVAL, "must not be empty"},
        {"auth_token_file", "/nonexistent/token", RNND_EINVAL, "cannot open"},
        {"auth_token_file", "", 0, NULL},
        {"shutdown_timeout", "0", 0, NULL},
};

START_TEST(test_set)
{
        struct rnnd_options o;
        rnnd_error_t e = {0};
        const struct rnnd_option *row = rnnd_options_find(sets[_i].key);
        char before[256], after[256];

        ck_assert_int_eq(rnnd_options_init(&o), 0);
        ck_assert_ptr_nonnull(row);
        rnnd_options_format(&o, row, before, sizeof(before));
        ck_assert_int_eq(rnnd_options_set(&o, row, sets[_i].value, row->name, &e), sets[_i].want_r);
        rnnd_options_format(&o, row, after, sizeof(after));
        if (sets[_i].want_r < 0) {
                ck_assert_str_eq(before, after); /* unchanged on failure */
                ck_assert_int_eq(e.code, sets[_i].want_r);
        }
        if (sets[_i].msg != NULL)
                ck_assert_msg(strstr(e.msg, sets[_i].msg) != NULL, "'%s' lacks '%s'", e.msg,
                              sets[_i].msg);
        rnnd_options_done(&o);
}
END_TEST

START_TEST(test_format)
{
        struct rnnd_options o;
        char buf[64];

        ck_assert_int_eq(rnnd_options_init(&o), 0);
        rnnd_options_format(&o, rnnd_options_find("max_body_bytes"), buf, sizeof(buf));
        ck_assert_str_eq(buf, "64M");
        rnnd_options_format(&o, rnnd_options_find("connection_timeout"), buf, sizeof(buf));
        ck_assert_str_eq(buf, "30s");
        rnnd_options_format(&o, rnnd_options_find("threads"), buf, sizeof(buf));
        ck_assert_str_eq(buf, "auto");
        rnnd_options_format(&o, rnnd_options_find("auth_token_file"), buf, sizeof(buf));
        ck_assert_str_eq(buf, "\"\"");
        rnnd_options_format(&o, rnnd_options_find("log_level"), buf, sizeof(buf));
        ck_assert_str_eq(buf, "info");
        ck_assert_int_eq(
                rnnd_options_set(&o, rnnd_options_find("shutdown_timeout"), "90", "x", NULL), 0);
        rnnd_options_format(&o, rnnd_options_find("shutdown_timeout"), buf, sizeof(buf));
        ck_assert_str_eq(buf, "90s");
        ck_assert_int_eq(
                rnnd_options_set(&o, rnnd_options_find("shutdown_timeout"), "120", "x", NULL), 0);
        rnnd_options_format(&o, rnnd_options_find("shutdown_timeout"), buf, sizeof(buf));
        ck_assert_str_eq(buf, "2m");
        ck_assert_int_eq(
                rnnd_options_set(&o, rnnd_options_find("model_repository"), "a #b", "x", NULL), 0);
        rnnd_options_format(&o, rnnd_options_find("model_repository"), buf, sizeof(buf));
        ck_assert_str_eq(buf, "\"a #b\"");
        rnnd_options_done(&o);
}
END_TEST

/* The config file. */

START_TEST(test_file_good)
{
        static const char text[] = "# a comment\n"
                                   "\n"
                                   "   # an indented comment\n"
                                   "listen = [::1]:9000\n"
                                   "threads=4\r\n"
                                   "\tlog_level =  debug   # trailing comment\n"
                                   "model_repository = \"/srv/my models #1\"  # quoted\n"
                                   "max_body_bytes = 1M\n"
                                   "connection_timeout = 2m\n"
                                   "backend = cpu\n"
                                   "log-format = json"; /* no final newline, dashed key */
        struct rnnd_options o;
        rnnd_error_t e = {0};

        ck_assert_int_eq(rnnd_options_init(&o), 0);
        ck_assert_msg(rnnd_options_parse_text(&o, text, strlen(text), "t.conf", &e) == 0, "%s",
                      e.msg);
        ck_assert_str_eq(o.listen, "[::1]:9000");
        ck_assert_uint_eq(o.threads, 4);
        ck_assert_int_eq(o.log_level, RNND_LOG_DEBUG);
        ck_assert_str_eq(o.model_repository, "/srv/my models #1");
        ck_assert_uint_eq(o.max_body_bytes, 1u << 20);
        ck_assert_uint_eq(o.connection_timeout, 120);
        ck_assert_int_eq(o.backend, RNND_BACKEND_CPU);
        ck_assert_str_eq(o.backend_from, "t.conf:10");
        ck_assert_int_eq(o.log_format, RNND_LOG_JSON);
        rnnd_options_done(&o);
}
END_TEST

static const struct {
        const char *text;
        const char *msg;
} bad_files[] = {
        {"threads = 4\nbogus = 1\n", "bad.conf:2: unknown key 'bogus' (rnnd --help lists them)"},
        {"modle_repository = x\n",
         "bad.conf:1: unknown key 'modle_repository'; did you mean model_repository? (rnnd --help "
         "lists them)"},
        {"\n\nthreads 4\n", "bad.conf:3: expected 'key = value'"},
        {"= 4\n", "bad.conf:1: expected 'key = value'"},
        {"threads = 4\nthreads = 5\n", "bad.conf:2: threads: already set on line 1"},
        {"# ok\nthreads = four\n", "bad.conf:2: threads: 'four' is not an unsigned integer"},
        {"max_body_bytes = 1\n", "bad.conf:1: max_body_bytes: '1' is out of range"},
        {"listen = \"127.0.0.1:80\n", "bad.conf:1: listen: missing closing '\"'"},
        {"listen = \"127.0.0.1:80\" x\n", "bad.conf:1: listen: text after the closing '\"'"},
        {"log_level = loud\n", "bad.conf:1: log_level: 'loud' is not one of"},
        {"threads = 4 # four\nlisten = 1.2.3.4\n", "bad.conf:2: listen: '1.2.3.4' has no port"},
        {"model_repository =\n", "bad.conf:1: model_repository: must not be empty"},
};

START_TEST(test_file_bad)
{
        struct rnnd_options o;
        rnnd_error_t e = {0};
        const char *t = bad_files[_i].text;

        ck_assert_int_eq(rnnd_options_init(&o), 0);
        ck_assert_int_lt(rnnd_options_parse_text(&o, t, strlen(t), "bad.conf", &e), 0);
        ck_assert_msg(strstr(e.msg, bad_files[_i].msg) == e.msg, "'%s' does not start with '%s'",
                      e.msg, bad_files[_i].msg);
        rnnd_options_done(&o);
}
END_TEST

START_TEST(test_file_nul_and_missing)
{
        struct rnnd_options o;
        rnnd_error_t e = {0};
        static const char text[] = "threads = 4\0\n";

        ck_assert_int_eq(rnnd_options_init(&o), 0);
        ck_assert_int_eq(rnnd_options_parse_text(&o, text, sizeof(text) - 1, "n.conf", &e),
                         RNND_EINVAL);
        ck_assert_ptr_nonnull(strstr(e.msg, "NUL"));
        ck_assert_int_eq(rnnd_options_load_file(&o, "/nonexistent/rnnd.conf", &e), RNND_EIO);
        ck_assert_ptr_nonnull(strstr(e.msg, "/nonexistent/rnnd.conf"));
        ck_assert_int_eq(rnnd_options_load_file(&o, "/tmp", &e), RNND_EIO);
        rnnd_options_done(&o);
}
END_TEST

/*
 * A FIFO as rnnd.conf or as auth_token_file is refused at once: opened
 * without O_NONBLOCK it waited for a writer, and start-up (or a SIGHUP) with
 * it.  The Check fork's timeout catches a hang; alarm() makes it quick.
 */
START_TEST(test_fifo_refused)
{
        char dir[] = "/tmp/rnnd-opt-XXXXXX", path[64];
        struct rnnd_options o;
        rnnd_error_t e = {0};
        char token[65];
        size_t len;

        ck_assert_ptr_nonnull(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/fifo", dir);
        ck_assert_int_eq(mkfifo(path, 0600), 0);
        alarm(5);
        ck_assert_int_eq(rnnd_options_init(&o), 0);
        ck_assert_int_eq(rnnd_options_load_file(&o, path, &e), RNND_EIO);
        ck_assert_ptr_nonnull(strstr(e.msg, "not a regular file"));
        /* `--config <(...)` is a FIFO: the message says what to do instead. */
        ck_assert_ptr_nonnull(strstr(e.msg, "write it to a file"));
        ck_assert_int_eq(rnnd_options_read_token(path, token, sizeof(token), &len, &e),
                         RNND_EINVAL);
        ck_assert_ptr_nonnull(strstr(e.msg, "not a regular file"));
        alarm(0);
        rnnd_options_done(&o);
        unlink(path);
        rmdir(dir);
}
END_TEST

/* The command line. */

static int parse(struct rnnd_options *o, enum rnnd_command *cmd, rnnd_error_t *e, ...)
{
        char *argv[32];
        int argc = 0;
        va_list ap;
        char *a;

        argv[argc++] = "rnnd";
        va_start(ap, e);
        while ((a = va_arg(ap, char *)) != NULL && argc < 31)
                argv[argc++] = a;
        va_end(ap);
        argv[argc] = NULL;
        ck_assert_int_eq(rnnd_options_init(o), 0);
        return rnnd_options_parse_args(o, argc, argv, cmd, e);
}

START_TEST(test_args_flags)
{
        struct rnnd_options o;
        enum rnnd_command cmd = RNND_CMD_HELP;
        rnnd_error_t e = {0};

        unsetenv("RNND_BACKEND");
        ck_assert_msg(parse(&o, &cmd, &e, "--threads=3", "--listen", "[::1]:1", "--log-level=debug",
                            "--model_repository", "tests/golden/models", NULL) == 0,
                      "%s", e.msg);
        ck_assert_int_eq(cmd, RNND_CMD_RUN);
        ck_assert_uint_eq(o.threads, 3);
        ck_assert_str_eq(o.listen, "[::1]:1");
        ck_assert_int_eq(o.log_level, RNND_LOG_DEBUG);
        ck_assert_str_eq(o.model_repository, "tests/golden/models");
        rnnd_options_done(&o);
}
END_TEST

START_TEST(test_args_file_then_flags)
{
        struct rnnd_options o;
        enum rnnd_command cmd;
        rnnd_error_t e = {0};
        const char *path = temp_file("threads = 2\nlog_level = err\nbackend = cpu\n", 0600);
        char flag[128];

        unsetenv("RNND_BACKEND");
        snprintf(flag, sizeof(flag), "--config=%s", path);
        ck_assert_msg(parse(&o, &cmd, &e, "--threads=6", flag, NULL) == 0, "%s", e.msg);
        ck_assert_uint_eq(o.threads, 6);             /* the flag wins, wherever it is */
        ck_assert_int_eq(o.log_level, RNND_LOG_ERR); /* from the file */
        ck_assert_int_eq(o.backend, RNND_BACKEND_CPU);
        ck_assert_str_eq(o.config_file, path);
        rnnd_options_done(&o);

        ck_assert_int_eq(parse(&o, &cmd, &e, "--config", path, "--backend=auto", NULL), 0);
        ck_assert_int_eq(o.backend, RNND_BACKEND_AUTO);
        ck_assert_str_eq(o.backend_from, "--backend");
        rnnd_options_done(&o);
        unlink(path);
}
END_TEST

START_TEST(test_args_env)
{
        struct rnnd_options o;
        enum rnnd_command cmd;
        rnnd_error_t e = {0};

        setenv("RNND_BACKEND", "cpu", 1);
        ck_assert_int_eq(parse(&o, &cmd, &e, "--backend=auto", NULL), 0);
        ck_assert_int_eq(o.backend, RNND_BACKEND_CPU); /* the environment overrides */
        ck_assert_str_eq(o.backend_from, "RNND_BACKEND");
        rnnd_options_done(&o);

        setenv("RNND_BACKEND", "tpu", 1);
        ck_assert_int_eq(parse(&o, &cmd, &e, NULL), RNND_EINVAL);
        ck_assert_msg(strstr(e.msg, "RNND_BACKEND: 'tpu' is not one of auto|cpu") == e.msg, "%s",
                      e.msg);
        rnnd_options_done(&o);
        unsetenv("RNND_BACKEND");
}
END_TEST

static const struct {
        const char *args[4];
        const char *msg;
} bad_args[] = {
        {{"--bogus=1"}, "unknown option '--bogus' (rnnd --help lists them)"},
        /* The nearest setting or command, by prefix or by a few edits. */
        {{"--model_repo=x"},
         "unknown option '--model_repo'; did you mean --model_repository? (rnnd --help lists "
         "them)"},
        {{"--model-repositroy", "x"},
         "unknown option '--model-repositroy'; did you mean "
         "--model_repository?"},
        {{"--thread=2"}, "unknown option '--thread'; did you mean --threads?"},
        {{"--dump_config"}, "unknown option '--dump_config'; did you mean --dump-config?"},
        {{"--repository_poll=5"},
         "unknown option '--repository_poll'; did you mean "
         "--repository_poll_interval?"},
        {{"--threads"}, "--threads: needs a value"},
        {{"--threads=x"}, "--threads: 'x' is not an unsigned integer"},
        {{"serve"}, "unexpected argument 'serve'"},
        {{"--config"}, "--config: needs a file name"},
        {{"--config=/nonexistent/x.conf"}, "--config: /nonexistent/x.conf: No such file"},
        {{"--config=a", "--config=b"}, "--config: given twice"},
        {{"--threads=64", "--connection_limit=8"}, "connection_limit (8) must be at least threads"},
        {{"--backends", "--dump-config"}, "--dump-config: only one of"},
        {{"--", "x"}, "unexpected argument 'x'"},
};

START_TEST(test_args_bad)
{
        struct rnnd_options o;
        enum rnnd_command cmd;
        rnnd_error_t e = {0};
        const char *const *a = bad_args[_i].args;

        unsetenv("RNND_BACKEND");
        ck_assert_int_lt(parse(&o, &cmd, &e, a[0], a[1], a[2], a[3], NULL), 0);
        ck_assert_msg(strstr(e.msg, bad_args[_i].msg) == e.msg, "'%s' does not start with '%s'",
                      e.msg, bad_args[_i].msg);
        rnnd_options_done(&o);
}
END_TEST

START_TEST(test_args_commands)
{
        struct rnnd_options o;
        enum rnnd_command cmd;
        rnnd_error_t e = {0};

        unsetenv("RNND_BACKEND");
        /* --help and --version win, even over bad flags. */
        ck_assert_int_eq(parse(&o, &cmd, &e, "--bogus", "--help", NULL), 0);
        ck_assert_int_eq(cmd, RNND_CMD_HELP);
        rnnd_options_done(&o);
        ck_assert_int_eq(parse(&o, &cmd, &e, "-V", NULL), 0);
        ck_assert_int_eq(cmd, RNND_CMD_VERSION);
        rnnd_options_done(&o);
        ck_assert_int_eq(parse(&o, &cmd, &e, "--backends", "--backend=cpu", NULL), 0);
        ck_assert_int_eq(cmd, RNND_CMD_BACKENDS);
        ck_assert_int_eq(o.backend, RNND_BACKEND_CPU);
        rnnd_options_done(&o);
        ck_assert_int_eq(parse(&o, &cmd, &e, "--dump-config", "--threads=2", NULL), 0);
        ck_assert_int_eq(cmd, RNND_CMD_DUMP_CONFIG);
        rnnd_options_done(&o);
}
END_TEST

START_TEST(test_token_file)
{
        struct rnnd_options o;
        rnnd_error_t e = {0};
        const struct rnnd_option *row = rnnd_options_find("auth_token_file");
        const char *good = temp_file("s3cr3t-token\n", 0600);
        const char *open_to_all = temp_file("s3cr3t-token\n", 0644);
        const char *empty = temp_file("\n", 0600);
        const char *spaces = temp_file("two words\n", 0640);

        ck_assert_int_eq(rnnd_options_init(&o), 0);
        ck_assert_msg(rnnd_options_set(&o, row, good, row->name, &e) == 0, "%s", e.msg);
        ck_assert_str_eq(o.auth_token_file, good);
        ck_assert_int_eq(rnnd_options_set(&o, row, open_to_all, row->name, &e), RNND_EINVAL);
        ck_assert_ptr_nonnull(strstr(e.msg, "readable by others"));
        ck_assert_ptr_null(strstr(e.msg, "s3cr3t")); /* never the token */
        ck_assert_int_eq(rnnd_options_set(&o, row, empty, row->name, &e), RNND_EINVAL);
        ck_assert_ptr_nonnull(strstr(e.msg, "holds no token"));
        ck_assert_int_eq(rnnd_options_set(&o, row, spaces, row->name, &e), RNND_EINVAL);
        ck_assert_int_eq(rnnd_options_set(&o, row, "/tmp", row->name, &e), RNND_EINVAL);
        ck_assert_ptr_nonnull(strstr(e.msg, "not a regular file"));
        rnnd_options_done(&o);
        unlink(good);
        unlink(open_to_all);
        unlink(empty);
        unlink(spaces);
}
END_TEST

/* --help and --dump-config. */

START_TEST(test_help_lists_every_key)
{
        size_t n, i;
        const struct rnnd_option *t = rnnd_options_table(&n);
        char *help = capture(help_adapter, NULL);
        char needle[80];

        for (i = 0; i < n; i++) {
                snprintf(needle, sizeof(needle), "  --%s=", t[i].name);
                ck_assert_msg(strstr(help, needle) != NULL, "--help lacks %s", needle);
        }
        ck_assert_ptr_nonnull(strstr(help, "Default: 127.0.0.1:8000"));
        ck_assert_ptr_nonnull(strstr(help, "--dump-config"));
        ck_assert_ptr_nonnull(strstr(help, "RNND_BACKEND"));
        free(help);
}
END_TEST

/* s with each line break and the indent or "# " after it made one blank, in place. */
static char *unwrap(char *s)
{
        char *w = s;

        ck_assert_ptr_nonnull(s);
        for (const char *r = s; *r != '\0';) {
                if (*r != '\n') {
                        *w++ = *r++;
                        continue;
                }
                for (r++; *r == ' ' || *r == '#'; r++)
                        ;
                *w++ = ' ';
        }
        *w = '\0';
        return s;
}

/* The text of row name's entry in out (--help's "  --name=" or rnnd.conf's "name = "), copied. */
static char *entry_of(const char *out, const char *name, bool help)
{
        char start[80];
        const char *b, *e;

        if (help) {
                snprintf(start, sizeof(start), "\n  --%s=", name);
                b = strstr(out, start);
                ck_assert_msg(b != NULL, "--help lacks %s", name);
                e = strstr(b + 1, "\n  --");
                if (e == NULL)
                        e = b + strlen(b);
        } else {
                /* rnnd.conf: the comment block before "name = ". */
                snprintf(start, sizeof(start), "\n%s = ", name);
                e = strstr(out, start);
                ck_assert_msg(e != NULL, "the dump lacks %s", name);
                for (b = e; b > out && !(b[-1] == '\n' && b[0] == '\n'); b--)
                        ;
        }
        return unwrap(strndup(b, (size_t)(e - b)));
}

/*
 * Every numeric setting shows its range in --help and rnnd.conf, spelled as
 * its values are ("1K..4G", "1s..24h"), and both ends are accepted; a byte
 * or duration setting says which suffixes it takes; the settings a reload
 * keeps say so.
 */
START_TEST(test_help_ranges)
{
        static const struct {
                const char *name, *range;
        } known[] = {
                {"threads", "Range: 1..1024, or auto"},
                {"connection_limit", "Range: 1..1048576"},
                {"connection_timeout", "Range: 1s..24h"},
                {"max_body_bytes", "Range: 1K..4G"},
                {"per_connection_memory", "Range: 8K..64M"},
                {"max_json_depth", "Range: 2..2048"},
                {"shutdown_timeout", "Range: 0..1h"},
                {"grpc_max_message_bytes", "Range: 1K..2147483642"},
                {"grpc_max_header_bytes", "Range: 1K..1M"},
        };
        static const char *const fixed[] = {
                "listen",
                "grpc_listen",
                "grpc_max_message_bytes",
                "grpc_max_streams",
                "grpc_max_header_bytes",
                "grpc_threads",
                "threads",
                "connection_limit",
                "connection_timeout",
                "per_connection_memory",
                "per_address_limit",
                "log_format",
                "max_shm_regions",
        };
        struct rnnd_options o;
        size_t n, i, n_fixed = 0;
        const struct rnnd_option *t = rnnd_options_table(&n);
        char *help = capture(help_adapter, NULL), *dump;

        ck_assert_int_eq(rnnd_options_init(&o), 0);
        dump = capture(rnnd_options_dump, &o);
        for (i = 0; i < n; i++) {
                bool numeric = t[i].type == RNND_OPT_UINT || t[i].type == RNND_OPT_BYTES ||
                               t[i].type == RNND_OPT_DURATION;

                for (int h = 0; h < 2; h++) {
                        char *text = entry_of(h ? help : dump, t[i].name, h);
                        const char *r = strstr(text, "Range: ");

                        ck_assert_msg((r != NULL) == numeric, "%s: range '%s'", t[i].name, text);
                        if (t[i].type == RNND_OPT_BYTES)
                                ck_assert_msg(strstr(text, "Bytes, or with a K") != NULL, "%s",
                                              text);
                        if (t[i].type == RNND_OPT_DURATION)
                                ck_assert_msg(strstr(text, "Seconds, or with an s, m or h") != NULL,
                                              "%s", text);
                        ck_assert_msg((strstr(text, "Fixed: a reload") != NULL) ==
                                              ((t[i].flags & RNND_OPT_FIXED) != 0),
                                      "%s", text);
                        if (r != NULL && h) {
                                char lo[64], hi[64];
                                rnnd_error_t e = {0};

                                /* "Range: LO..HI Default: ..." or "Range: LO..HI, or auto". */
                                ck_assert_int_eq(sscanf(r, "Range: %63[^.].%*[.]%63[^, ]", lo, hi),
                                                 2);
                                ck_assert_msg(rnnd_options_set(&o, &t[i], lo, "lo", &e) == 0,
                                              "%s: %s", t[i].name, e.msg);
                                ck_assert_msg(rnnd_options_set(&o, &t[i], hi, "hi", &e) == 0,
                                              "%s: %s", t[i].name, e.msg);
                        }
                        for (size_t k = 0; k < ELEMENTSOF(known); k++)
                                if (strcmp(known[k].name, t[i].name) == 0)
                                        ck_assert_msg(strstr(text, known[k].range) != NULL,
                                                      "%s lacks '%s': %s", t[i].name,
                                                      known[k].range, text);
                        free(text);
                }
                n_fixed += (t[i].flags & RNND_OPT_FIXED) != 0;
        }
        /* What daemon/reload.c keeps on SIGHUP, as docs/OPERATIONS.md lists it. */
        ck_assert_uint_eq(n_fixed, ELEMENTSOF(fixed));
        for (i = 0; i < ELEMENTSOF(fixed); i++)
                ck_assert_msg(rnnd_options_find(fixed[i])->flags & RNND_OPT_FIXED, "%s", fixed[i]);
        free(help);
        free(dump);
        rnnd_options_done(&o);
}
END_TEST

START_TEST(test_dump_round_trip)
{
        struct rnnd_options a, b;
        rnnd_error_t e = {0};
        size_t n, i;
        const struct rnnd_option *t = rnnd_options_table(&n);
        char *text;

        /* Non-default values, including ones that need quoting, read back the same. */
        ck_assert_int_eq(rnnd_options_init(&a), 0);
        ck_assert_int_eq(rnnd_options_set(&a, rnnd_options_find("model_repository"),
                                          " dir with \"quotes\" # and hash ", "x", &e),
                         0);
        ck_assert_int_eq(rnnd_options_set(&a, rnnd_options_find("threads"), "3", "x", &e), 0);
        ck_assert_int_eq(rnnd_options_set(&a, rnnd_options_find("log_format"), "json", "x", &e), 0);
        ck_assert_int_eq(
                rnnd_options_set(&a, rnnd_options_find("max_body_bytes"), "1000000", "x", &e), 0);
        text = capture(rnnd_options_dump, &a);
        ck_assert_int_eq(rnnd_options_init(&b), 0);
        ck_assert_msg(rnnd_options_parse_text(&b, text, strlen(text), "dump", &e) == 0, "%s",
                      e.msg);
        for (i = 0; i < n; i++) {
                char va[256], vb[256];

                rnnd_options_format(&a, &t[i], va, sizeof(va));
                rnnd_options_format(&b, &t[i], vb, sizeof(vb));
                ck_assert_str_eq(va, vb);
        }
        ck_assert_str_eq(b.model_repository, " dir with \"quotes\" # and hash ");
        free(text);
        rnnd_options_done(&a);
        rnnd_options_done(&b);
}
END_TEST

START_TEST(test_committed_conf_is_dump)
{
        struct rnnd_options o;
        rnnd_error_t e = {0};
        char path[4096], *want, *got;

        snprintf(path, sizeof(path), "%s/config/rnnd.conf", src_root());
        unsetenv("RNND_BACKEND");
        ck_assert_int_eq(rnnd_options_init(&o), 0);
        want = capture(rnnd_options_dump, &o);
        got = read_file(path);
        ck_assert_msg(got != NULL, "cannot read %s", path);
        ck_assert_msg(strcmp(got, want) == 0,
                      "%s differs from `rnnd --dump-config`; regenerate it with "
                      "build/daemon/rnnd --dump-config > config/rnnd.conf",
                      path);
        /* And it parses back to the defaults. */
        rnnd_options_done(&o);
        ck_assert_int_eq(rnnd_options_init(&o), 0);
        ck_assert_msg(rnnd_options_load_file(&o, path, &e) == 0, "%s", e.msg);
        free(got);
        got = capture(rnnd_options_dump, &o);
        ck_assert_str_eq(got, want);
        free(got);
        free(want);
        rnnd_options_done(&o);
}
END_TEST

static Suite *options_suite(void)
{
        Suite *s = suite_create("options");
        TCase *tc;

        tc = tcase_create("table");
        tcase_add_test(tc, test_table_rows);
        tcase_add_test(tc, test_defaults);
        tcase_add_test(tc, test_format);
        suite_add_tcase(s, tc);

        tc = tcase_create("values");
        tcase_add_loop_test(tc, test_parse_numbers, 0, ELEMENTSOF(numbers));
        tcase_add_loop_test(tc, test_parse_bytes, 0, ELEMENTSOF(sizes));
        tcase_add_loop_test(tc, test_parse_duration, 0, ELEMENTSOF(durations));
        tcase_add_test(tc, test_parse_bool);
        tcase_add_loop_test(tc, test_split_listen, 0, ELEMENTSOF(listens));
        tcase_add_loop_test(tc, test_set, 0, ELEMENTSOF(sets));
        tcase_add_test(tc, test_token_file);
        suite_add_tcase(s, tc);

        tc = tcase_create("file");
        tcase_add_test(tc, test_file_good);
        tcase_add_loop_test(tc, test_file_bad, 0, ELEMENTSOF(bad_files));
        tcase_add_test(tc, test_file_nul_and_missing);
        suite_add_tcase(s, tc);

        tc = tcase_create("args");
        tcase_add_test(tc, test_args_flags);
        tcase_add_test(tc, test_args_file_then_flags);
        tcase_add_test(tc, test_args_env);
        tcase_add_loop_test(tc, test_args_bad, 0, ELEMENTSOF(bad_args));
        tcase_add_test(tc, test_args_commands);
        suite_add_tcase(s, tc);

        tc = tcase_create("generated");
        tcase_add_test(tc, test_help_lists_every_key);
        tcase_add_test(tc, test_help_ranges);
        tcase_add_test(tc, test_dump_round_trip);
        tcase_add_test(tc, test_committed_conf_is_dump);
        tcase_add_test(tc, test_fifo_refused);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(options_suite)

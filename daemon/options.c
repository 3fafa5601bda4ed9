/*
 * options.c: the settings table and everything generated from it: the config
 * file parser, the command line, --help and --dump-config.
 *
 * Each row's default is text parsed by the same code as the file and the
 * flags, so what --help and rnnd.conf show is exactly what the daemon uses.
 * Nothing here keeps global state; a struct rnnd_options is used by one thread
 * at a time (the main thread, before the daemon starts).
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "decimal.h"
#include "log.h"
#include "options-int.h"
#include "options.h"

#define OFF(field) offsetof(struct rnnd_options, field)

#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define TIB (UINT64_C(1) << 40)

static const struct rnnd_opt_enum_value log_levels[] = {
        {"err", RNND_LOG_ERR},   {"warning", RNND_LOG_WARNING}, {"notice", RNND_LOG_NOTICE},
        {"info", RNND_LOG_INFO}, {"debug", RNND_LOG_DEBUG},     {NULL, 0},
};

static const struct rnnd_opt_enum_value log_formats[] = {
        {"text", RNND_LOG_TEXT},
        {"json", RNND_LOG_JSON},
        {NULL, 0},
};

static const struct rnnd_opt_enum_value access_logs[] = {
        {"off", RNND_ACCESS_LOG_OFF},
        {"errors", RNND_ACCESS_LOG_ERRORS},
        {"all", RNND_ACCESS_LOG_ALL},
        {NULL, 0},
};

static const struct rnnd_opt_enum_value backends[] = {
        {"auto", RNND_BACKEND_AUTO},
        {"cpu", RNND_BACKEND_CPU},
        {NULL, 0},
};

static int check_listen(const char *value, rnnd_error_t *reterr);
static int check_grpc_listen(const char *value, rnnd_error_t *reterr);
static int check_nonempty(const char *value, rnnd_error_t *reterr);
static int check_token_file(const char *value, rnnd_error_t *reterr);

/* Every setting.  Keep this in the order rnnd.conf and --help list them. */
static const struct rnnd_option options[] = {
        {
                .name = "listen",
                .type = RNND_OPT_STRING,
                .offset = OFF(listen),
                .def = "127.0.0.1:8000",
                .check = check_listen,
                .flags = RNND_OPT_FIXED,
                .metavar = "HOST:PORT",
                .help = "Address and port to listen on: an IPv4 address or host name and a port "
                        "(127.0.0.1:8000, 0.0.0.0:8000), or an IPv6 address in brackets "
                        "([::1]:8000). Port 0 picks a free port, which is logged. Ignored when "
                        "systemd passes a listening socket (socket activation).",
        },
        {
                .name = "grpc_listen",
                .type = RNND_OPT_STRING,
                .offset = OFF(grpc_listen),
                .def = "127.0.0.1:8001",
                .check = check_grpc_listen,
                .flags = RNND_OPT_FIXED,
                .metavar = "HOST:PORT",
                .help = "Address and port of the gRPC front end (KServe v2's "
                        "GRPCInferenceService, TF Serving's PredictionService and ModelService, "
                        "grpc.health.v1), as listen's; empty: no gRPC. Ignored when systemd "
                        "passes a second listening socket, which is then gRPC's.",
        },
        {
                .name = "model_repository",
                .type = RNND_OPT_STRING,
                .offset = OFF(model_repository),
                .def = "config/models",
                .check = check_nonempty,
                .metavar = "DIR",
                .help = "Directory of models: <model>/config.json and <model>/<version>/ "
                        "holding the weights. Every version a model's version policy selects "
                        "is loaded at start; a model that fails is logged with the reason and "
                        "the others are served.",
        },
        {
                .name = "repository_poll_interval",
                .type = RNND_OPT_DURATION,
                .offset = OFF(repository_poll_interval),
                .def = "0",
                .min = 0,
                .max = 86400,
                .metavar = "SECONDS",
                .help = "Scan model_repository this often, as SIGHUP does but without reading "
                        "the settings again: new models and versions are loaded, changed ones "
                        "rebuilt, removed ones leave. A model is built only once its config.json "
                        "and selected weights files are unchanged across two scans, so a copy "
                        "still being written is not loaded. 0: off (SIGHUP and the repository "
                        "API only).",
        },
        {
                .name = "threads",
                .type = RNND_OPT_UINT,
                .offset = OFF(threads),
                .def = "auto",
                .min = 1,
                .max = 1024,
                .flags = RNND_OPT_AUTO | RNND_OPT_FIXED,
                .metavar = "N",
                .help = "HTTP threads (the libmicrohttpd thread pool) that read requests and "
                        "write responses; they never wait for a model. auto is the number of "
                        "CPUs this process may use (its affinity mask).",
        },
        {
                .name = "connection_limit",
                .type = RNND_OPT_UINT,
                .offset = OFF(connection_limit),
                .def = "1024",
                .min = 1,
                .max = 1048576,
                .flags = RNND_OPT_FIXED,
                .metavar = "N",
                .help = "Most concurrent client connections on each listener (HTTP, gRPC); "
                        "more are refused. HTTP's is split evenly across its threads, so it "
                        "must be at least threads.",
        },
        {
                .name = "connection_timeout",
                .type = RNND_OPT_DURATION,
                .offset = OFF(connection_timeout),
                .def = "30s",
                .min = 1,
                .max = 86400,
                .flags = RNND_OPT_FIXED,
                .metavar = "SECONDS",
                .help = "Close a connection that has been idle this long.",
        },
        {
                .name = "header_timeout",
                .type = RNND_OPT_DURATION,
                .offset = OFF(header_timeout),
                .def = "10s",
                .min = 0,
                .max = 3600,
                .metavar = "SECONDS",
                .help = "Close a connection that has not sent a whole request head this long "
                        "after it opened or after its last response: a client trickling header "
                        "bytes, half a request line, or a keep-alive connection idle that long. "
                        "Connections their clients closed are closed at once, and near "
                        "connection_limit the longest idle ones make room for new clients. "
                        "0 turns the deadline off.",
        },
        {
                .name = "per_address_limit",
                .type = RNND_OPT_UINT,
                .offset = OFF(per_address_limit),
                .def = "0",
                .min = 0,
                .max = 1048576,
                .flags = RNND_OPT_FIXED,
                .metavar = "N",
                .help = "Most concurrent connections from one client address on each "
                        "listener (HTTP, gRPC); more are refused. 0 is three quarters of "
                        "connection_limit. Behind a proxy, where every connection comes from "
                        "its address, set it to connection_limit.",
        },
        {
                .name = "max_body_bytes",
                .type = RNND_OPT_BYTES,
                .offset = OFF(max_body_bytes),
                .def = "64M",
                .min = 1024,
                .max = 4 * GIB,
                .metavar = "BYTES",
                .help = "Largest request body. A request declaring a longer Content-Length is "
                        "answered 413 at once; a chunked body that grows past it is answered "
                        "413 when it ends. A compressed body (Content-Encoding gzip or deflate) "
                        "is held to it twice: as sent, and decompressed.",
        },
        {
                .name = "grpc_max_message_bytes",
                .type = RNND_OPT_BYTES,
                .offset = OFF(grpc_max_message_bytes),
                .def = "64M",
                .min = 1024,
                .max = 2 * GIB - 6,
                .flags = RNND_OPT_FIXED,
                .metavar = "BYTES",
                .help = "Largest gRPC request message: a longer one ends its call "
                        "RESOURCE_EXHAUSTED when its length prefix arrives. Also each gRPC "
                        "stream's receive window; a connection holding more than twice this of "
                        "bytes not yet handled over its streams fails the stream that passes it "
                        "(RESOURCE_EXHAUSTED). A compressed message (grpc-encoding gzip or "
                        "deflate) is held to it twice: as sent, and decompressed.",
        },
        {
                .name = "grpc_max_streams",
                .type = RNND_OPT_UINT,
                .offset = OFF(grpc_max_streams),
                .def = "100",
                .min = 1,
                .max = 65536,
                .flags = RNND_OPT_FIXED,
                .metavar = "N",
                .help = "Most concurrent calls (HTTP/2 streams) on one gRPC connection "
                        "(SETTINGS_MAX_CONCURRENT_STREAMS). Calls a client reset whose "
                        "inference is still queued count too, up to twice this, past which new "
                        "streams are refused.",
        },
        {
                .name = "grpc_threads",
                .type = RNND_OPT_UINT,
                .offset = OFF(grpc_threads),
                .def = "auto",
                .min = 1,
                .max = 1024,
                .flags = RNND_OPT_AUTO | RNND_OPT_FIXED,
                .metavar = "N",
                .help = "gRPC loop threads, the daemon's own loop among them: each carries its "
                        "share of the gRPC connections (HTTP/2 framing, unpacking, answers), "
                        "a new connection going to the one with fewest. auto is the number of "
                        "CPUs this process may use (its affinity mask).",
        },
        {
                .name = "grpc_max_header_bytes",
                .type = RNND_OPT_BYTES,
                .offset = OFF(grpc_max_header_bytes),
                .def = "16K",
                .min = 1 * KIB,
                .max = 1 * MIB,
                .flags = RNND_OPT_FIXED,
                .metavar = "BYTES",
                .help = "Largest header list of a gRPC call, decompressed (names and values "
                        "plus 32 bytes each, as SETTINGS_MAX_HEADER_LIST_SIZE counts it); a "
                        "larger one resets its stream.",
        },
        {
                .name = "max_tensor_elements",
                .type = RNND_OPT_UINT,
                .offset = OFF(max_tensor_elements),
                .def = "16777216",
                .min = 1,
                .max = UINT64_C(1) << 32,
                .metavar = "N",
                .help = "Most elements in one tensor of a request, such as B x T x input_size "
                        "for `input`. Larger tensors are answered 400.",
        },
        {
                .name = "max_response_bytes",
                .type = RNND_OPT_BYTES,
                .offset = OFF(max_response_bytes),
                .def = "64M",
                .min = 4 * KIB,
                .max = 4 * GIB,
                .metavar = "BYTES",
                .help = "Largest response one inference request may ask for, counting each JSON "
                        "float at its longest (17 bytes) and each binary one at 4. A request "
                        "whose outputs could be larger is answered 400 before anything is "
                        "allocated for them.",
        },
        {
                .name = "max_response_memory",
                .type = RNND_OPT_BYTES,
                .offset = OFF(max_response_memory),
                .def = "1G",
                .min = 1024 * KIB,
                .max = UINT64_C(1) << 40,
                .metavar = "BYTES",
                .help = "Most memory the answers of all inference requests may hold at once, "
                        "from a request's start until its client has read the answer, each "
                        "counted as max_response_bytes counts it plus its tensors. A request "
                        "that would go past it is answered 503 at once (gRPC: UNAVAILABLE), "
                        "so that clients that do not read their answers cannot hold more; "
                        "one request is always let in when nothing else is held.",
        },
        {
                .name = "max_shm_regions",
                .type = RNND_OPT_UINT,
                .offset = OFF(max_shm_regions),
                .def = "0",
                .min = 0,
                .max = 4096,
                .flags = RNND_OPT_FIXED,
                .metavar = "N",
                .help = "Most system shared memory regions clients may register at once "
                        "(Triton's shared memory extension: tensors read from and written to "
                        "a client's POSIX shared memory object instead of the request and "
                        "answer). 0, the default, turns the extension off (403). Any client "
                        "that reaches rnnd may then read and write every shared memory object "
                        "rnnd's user can open: turn it on only where the clients are that "
                        "user's own (docs/OPERATIONS.md).",
        },
        {
                .name = "max_json_depth",
                .type = RNND_OPT_UINT,
                .offset = OFF(max_json_depth),
                .def = "32",
                .min = 2,
                .max = 2048,
                .metavar = "N",
                .help = "Deepest nesting of arrays and objects accepted in a request's JSON.",
        },
        {
                .name = "max_json_memory",
                .type = RNND_OPT_BYTES,
                .offset = OFF(max_json_memory),
                .def = "64M",
                .min = 64 * KIB,
                .max = 4 * GIB,
                .metavar = "BYTES",
                .help = "Most memory the parsed JSON of one request may take, estimated from "
                        "its text before it is parsed (a JSON value takes 40 to 240 bytes "
                        "parsed: up to 80 times its text). KServe's data arrays are read "
                        "straight into tensors and do not count; TF Serving's :predict "
                        "bodies count whole. A request past it is answered 400.",
        },
        {
                .name = "per_connection_memory",
                .type = RNND_OPT_BYTES,
                .offset = OFF(per_connection_memory),
                .def = "16K",
                .min = 8 * KIB,
                .max = 64 * MIB,
                .flags = RNND_OPT_FIXED,
                .metavar = "BYTES",
                .help = "Memory pool of each connection for its headers and I/O buffers "
                        "(libmicrohttpd); request bodies are kept outside it. A request's "
                        "headers must fit (at 16K, about 14K of them; more gets 431). "
                        "libmicrohttpd clears the whole pool between requests, so a larger "
                        "one costs CPU on every request.",
        },
        {
                .name = "log_level",
                .type = RNND_OPT_ENUM,
                .offset = OFF(log_level),
                .def = "info",
                .values = log_levels,
                .metavar = "LEVEL",
                .help = "Least severe messages logged, by syslog name: err, warning, notice, "
                        "info or debug (adds more detail, and with access_log all the health "
                        "checks and metrics scrapes).",
        },
        {
                .name = "access_log",
                .type = RNND_OPT_ENUM,
                .offset = OFF(access_log),
                .def = "off",
                .values = access_logs,
                .metavar = "WHICH",
                .help = "Which requests get a line of their own in the log: off (none; the "
                        "metrics count them), errors (4xx at notice, 5xx at warning, each with "
                        "its reason) or all (the rest at info; health checks and metrics "
                        "scrapes at debug). A line has the method, path, status, duration, the "
                        "response's bytes and the model and version; in json format each of "
                        "them is a field.",
        },
        {
                .name = "log_format",
                .type = RNND_OPT_ENUM,
                .offset = OFF(log_format),
                .def = "text",
                .values = log_formats,
                .flags = RNND_OPT_FIXED,
                .metavar = "FORMAT",
                .help = "text: lines with a syslog priority prefix such as <6>, as journald "
                        "reads them from stderr. json: one JSON object per line with time, "
                        "level, message and request_id.",
        },
        {
                .name = "backend",
                .type = RNND_OPT_ENUM,
                .offset = OFF(backend),
                .def = "auto",
                .values = backends,
                .metavar = "BACKEND",
                .help = "Where models run. auto: cuDNN where it is built, a GPU is visible and "
                        "the model qualifies, else the CPU engine, with the reason logged and "
                        "shown in the model's config. cpu: the CPU engine only. RNND_BACKEND=cpu "
                        "in the environment overrides this setting.",
        },
        {
                .name = "cpu_threads",
                .type = RNND_OPT_UINT,
                .offset = OFF(cpu_threads),
                .def = "1",
                .min = 1,
                .max = 1024,
                .flags = RNND_OPT_AUTO,
                .metavar = "N",
                .help = "Threads of each CPU-engine instance. A batch of at least 16 "
                        "sequences per thread is dealt out by sequence, each thread running "
                        "its share alone. A smaller one has each step split across them by "
                        "hidden unit where the hidden size is a multiple of 16 and the cell "
                        "allows it (not an LSTM with proj_size, nor a GRU with "
                        "gru_linear_before_reset false), and else runs on one. OpenBLAS "
                        "itself runs one thread per call. auto is the number of CPUs this "
                        "process may use.",
        },
        {
                .name = "shutdown_timeout",
                .type = RNND_OPT_DURATION,
                .offset = OFF(shutdown_timeout),
                .def = "30s",
                .min = 0,
                .max = 3600,
                .metavar = "SECONDS",
                .help = "On SIGTERM or SIGINT the daemon stops accepting connections and gives "
                        "in-flight requests (queued and running) this long to finish; the "
                        "queued rest are answered 503 and it exits 0.",
        },
        {
                .name = "worker_stall_timeout",
                .type = RNND_OPT_DURATION,
                .offset = OFF(worker_stall_timeout),
                .def = "60s",
                .min = 1,
                .max = 86400,
                .metavar = "SECONDS",
                .help = "Under systemd's watchdog (WatchdogSec=), the daemon stops sending "
                        "WATCHDOG=1 when a model version has work queued or running and has "
                        "completed no batch for this long, so that systemd restarts it. An "
                        "idle daemon keeps pinging.",
        },
        {
                .name = "auth_token_file",
                .type = RNND_OPT_STRING,
                .offset = OFF(auth_token_file),
                .def = "",
                .check = check_token_file,
                .metavar = "FILE",
                .help = "File holding the bearer token that the repository API "
                        "(/v2/repository/...) requires as `Authorization: Bearer TOKEN`; "
                        "other requests get 401. The file must be a regular file not "
                        "readable by others, holding one token line. It is read again on "
                        "SIGHUP. Empty: the repository API is open to every client.",
        },
};

const struct rnnd_option *rnnd_options_table(size_t *n)
{
        *n = sizeof(options) / sizeof(options[0]);
        return options;
}

/* Compares a key or flag name with a row name, '-' and '_' being the same. */
static bool name_eq(const char *key, size_t keylen, const char *name)
{
        size_t i;

        for (i = 0; i < keylen; i++) {
                char k = key[i] == '-' ? '_' : key[i];

                if (name[i] == '\0' || k != name[i])
                        return false;
        }
        return name[i] == '\0';
}

static const struct rnnd_option *find_n(const char *key, size_t keylen)
{
        size_t i;

        for (i = 0; i < sizeof(options) / sizeof(options[0]); i++)
                if (name_eq(key, keylen, options[i].name))
                        return &options[i];
        return NULL;
}

const struct rnnd_option *rnnd_options_find(const char *name)
{
        return find_n(name, strlen(name));
}

/* The commands, as flags: --help, --version, --backends, --dump-config, --config. */
static const char *const command_names[] = {"help", "version", "backends", "dump-config", "config"};

/* Edit distance between a[0..n) and b, with '-' and '_' the same; n, strlen(b) < 64. */
static size_t distance(const char *a, size_t n, const char *b)
{
        size_t m = strlen(b), row[64], i, j;

        for (j = 0; j <= m; j++)
                row[j] = j;
        for (i = 1; i <= n; i++) {
                size_t diag = row[0], up;

                row[0] = i;
                for (j = 1; j <= m; j++) {
                        char x = a[i - 1] == '-' ? '_' : a[i - 1],
                             y = b[j - 1] == '-' ? '_' : b[j - 1];

                        up = row[j];
                        row[j] = diag + (x != y);
                        if (up + 1 < row[j])
                                row[j] = up + 1;
                        if (row[j - 1] + 1 < row[j])
                                row[j] = row[j - 1] + 1;
                        diag = up;
                }
        }
        return row[m];
}

/* Whether key[0..keylen) begins name, '-' and '_' being the same. */
static bool begins(const char *key, size_t keylen, const char *name)
{
        for (size_t i = 0; i < keylen; i++)
                if (name[i] == '\0' ||
                    (key[i] == '-' ? '_' : key[i]) != (name[i] == '-' ? '_' : name[i]))
                        return false;
        return true;
}

/*
 * The setting (or, with commands, the command) nearest to key[0..keylen):
 * one it begins (4 characters at least), or one within a third of its length
 * in edits (at least 2); NULL when none is that near.
 */
static const char *nearest(const char *key, size_t keylen, bool commands)
{
        size_t n = sizeof(options) / sizeof(options[0]);
        size_t all = n + (commands ? sizeof(command_names) / sizeof(command_names[0]) : 0);
        size_t best_d = keylen / 3 > 2 ? keylen / 3 : 2;
        const char *best = NULL;

        if (keylen == 0 || keylen >= 64)
                return NULL;
        for (size_t i = 0; i < all; i++) {
                const char *name = i < n ? options[i].name : command_names[i - n];
                size_t d =
                        keylen >= 4 && begins(key, keylen, name) ? 1 : distance(key, keylen, name);

                if (d <= best_d && (best == NULL || d < best_d)) {
                        best = name;
                        best_d = d;
                }
        }
        return best;
}

/* Value parsers. */

/* Splits s into its leading digits (parsed) and the suffix after them. */
static int parse_with_suffix(const char *s, uint64_t *num, const char **suffix)
{
        char digits[32];
        size_t n = strspn(s, "0123456789");
        int r;

        if (n == 0)
                return RNND_EINVAL;
        if (n >= sizeof(digits))
                return RNND_ELIMIT;
        memcpy(digits, s, n);
        digits[n] = '\0';
        r = rnnd_decimal_parse(digits, num);
        if (r < 0)
                return r;
        *suffix = s + n;
        return 0;
}

static int scale(uint64_t v, uint64_t unit, uint64_t *ret)
{
        if (unit != 0 && v > UINT64_MAX / unit)
                return RNND_ELIMIT;
        *ret = v * unit;
        return 0;
}

int rnnd__opt_parse_bytes(const char *s, uint64_t *ret)
{
        static const struct {
                const char *suffix;
                uint64_t unit;
        } units[] = {
                {"", 1},      {"B", 1},    {"K", KIB},   {"KB", KIB},  {"KiB", KIB},
                {"M", MIB},   {"MB", MIB}, {"MiB", MIB}, {"G", GIB},   {"GB", GIB},
                {"GiB", GIB}, {"T", TIB},  {"TB", TIB},  {"TiB", TIB},
        };
        const char *suffix;
        uint64_t v;
        size_t i;
        int r = parse_with_suffix(s, &v, &suffix);

        if (r < 0)
                return r;
        for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
                if (strcasecmp(suffix, units[i].suffix) == 0)
                        return scale(v, units[i].unit, ret);
        return RNND_EINVAL;
}

int rnnd__opt_parse_duration(const char *s, uint64_t *ret)
{
        const char *suffix;
        uint64_t v;
        int r = parse_with_suffix(s, &v, &suffix);

        if (r < 0)
                return r;
        if (strcmp(suffix, "") == 0 || strcmp(suffix, "s") == 0)
                return scale(v, 1, ret);
        if (strcmp(suffix, "m") == 0 || strcmp(suffix, "min") == 0)
                return scale(v, 60, ret);
        if (strcmp(suffix, "h") == 0)
                return scale(v, 3600, ret);
        return RNND_EINVAL;
}

int rnnd__opt_parse_bool(const char *s, bool *ret)
{
        static const char *const yes[] = {"yes", "true", "on", "1"};
        static const char *const no[] = {"no", "false", "off", "0"};
        size_t i;

        for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
                if (strcasecmp(s, yes[i]) == 0) {
                        *ret = true;
                        return 0;
                }
                if (strcasecmp(s, no[i]) == 0) {
                        *ret = false;
                        return 0;
                }
        }
        return RNND_EINVAL;
}

/* String checks. */

int rnnd_options_bind(const struct addrinfo *ai, int flags)
{
        int one = 1, e, fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);

        if (fd < 0)
                return -1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (ai->ai_family == AF_INET6)
                (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
                e = errno;
                close(fd);
                errno = e;
                return -1;
        }
        return fd;
}

int rnnd_options_resolve_listen(const char *setting, const char *host, unsigned port,
                                struct addrinfo **ret, rnnd_error_t *reterr)
{
        struct addrinfo hints = {.ai_family = AF_UNSPEC,
                                 .ai_socktype = SOCK_STREAM,
                                 .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
        char portstr[8];
        int r;

        snprintf(portstr, sizeof(portstr), "%u", port);
        *ret = NULL;
        r = getaddrinfo(host[0] != '\0' ? host : NULL, portstr, &hints, ret);
        if (r != 0)
                return rnnd_error_set(reterr, RNND_EINVAL, "%s%scannot resolve '%s': %s",
                                      setting != NULL ? setting : "", setting != NULL ? ": " : "",
                                      host, gai_strerror(r));
        return 0;
}

int rnnd_options_split_listen(const char *s, char *host, size_t cap, unsigned *port,
                              rnnd_error_t *reterr)
{
        const char *colon, *h = s;
        size_t hlen;
        uint64_t p;

        if (s[0] == '[') {
                const char *close = strchr(s, ']');

                if (close == NULL || close[1] != ':')
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "'%s' is not [IPv6 address]:port", s);
                h = s + 1;
                hlen = (size_t)(close - h);
                colon = close + 1;
                if (hlen == 0 || strspn(h, "0123456789abcdefABCDEF:.%") < hlen)
                        return rnnd_error_set(reterr, RNND_EINVAL, "'%.*s' is not an IPv6 address",
                                              (int)hlen, h);
        } else {
                colon = strrchr(s, ':');
                if (colon == NULL)
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "'%s' has no port: use host:port", s);
                hlen = (size_t)(colon - s);
                if (memchr(s, ':', hlen) != NULL)
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "'%s': put an IPv6 address in brackets, "
                                              "[addr]:port",
                                              s);
                if (hlen == 0)
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "'%s' has no host: use 0.0.0.0:port for every "
                                              "IPv4 address",
                                              s);
                if (strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                              "0123456789.-_") < hlen)
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "'%.*s' is not a host name or IPv4 address",
                                              (int)hlen, s);
        }
        if (rnnd_decimal_parse(colon + 1, &p) < 0 || strlen(colon + 1) > 5 || p > 65535)
                return rnnd_error_set(reterr, RNND_EINVAL, "'%s' is not a port (0..65535)",
                                      colon + 1);
        if (hlen >= cap)
                return rnnd_error_set(reterr, RNND_EINVAL, "host '%.*s' is too long", (int)hlen, h);
        memcpy(host, h, hlen);
        host[hlen] = '\0';
        *port = (unsigned)p;
        return 0;
}

static int check_listen(const char *value, rnnd_error_t *reterr)
{
        char host[256];
        unsigned port;

        return rnnd_options_split_listen(value, host, sizeof(host), &port, reterr);
}

static int check_grpc_listen(const char *value, rnnd_error_t *reterr)
{
        return value[0] == '\0' ? 0 : check_listen(value, reterr);
}

static int check_nonempty(const char *value, rnnd_error_t *reterr)
{
        if (value[0] == '\0')
                return rnnd_error_set(reterr, RNND_EINVAL, "must not be empty");
        return 0;
}

/*
 * The token file must be a regular file that others cannot read, holding one
 * line of visible ASCII.  The token itself is never stored or printed.
 */
int rnnd_options_read_token(const char *path, char *buf, size_t cap, size_t *ret_len,
                            rnnd_error_t *reterr)
{
        struct stat st;
        ssize_t n;
        size_t len, i;
        int fd, r = 0;

        /* O_NONBLOCK: a FIFO here must be refused below, not wait for a writer. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return rnnd_error_set(reterr, RNND_EINVAL, "cannot open '%s': %s", path,
                                      strerror(errno));
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                r = rnnd_error_set(reterr, RNND_EINVAL, "'%s' is not a regular file", path);
                goto out;
        }
        if (st.st_mode & S_IROTH) {
                r = rnnd_error_set(reterr, RNND_EINVAL, "'%s' is readable by others; chmod o-r it",
                                   path);
                goto out;
        }
        n = read(fd, buf, cap);
        if (n < 0) {
                r = rnnd_error_set(reterr, RNND_EINVAL, "cannot read '%s': %s", path,
                                   strerror(errno));
                goto out;
        }
        len = (size_t)n;
        if (len == cap) {
                r = rnnd_error_set(reterr, RNND_EINVAL, "'%s' is longer than %zu bytes", path,
                                   cap - 1);
                goto out;
        }
        while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r'))
                len--;
        if (len == 0) {
                r = rnnd_error_set(reterr, RNND_EINVAL, "'%s' holds no token", path);
                goto out;
        }
        for (i = 0; i < len; i++) {
                if (buf[i] <= ' ' || buf[i] > '~') {
                        r = rnnd_error_set(reterr, RNND_EINVAL,
                                           "'%s': the token must be one line of visible ASCII "
                                           "without spaces",
                                           path);
                        goto out;
                }
        }
        buf[len] = '\0';
        *ret_len = len;
out:
        if (r < 0)
                explicit_bzero(buf, cap);
        close(fd);
        return r;
}

static int check_token_file(const char *value, rnnd_error_t *reterr)
{
        char buf[RNND_OPT_TOKEN_MAX + 1];
        size_t len;
        int r;

        if (value[0] == '\0')
                return 0;
        r = rnnd_options_read_token(value, buf, sizeof(buf), &len, reterr);
        explicit_bzero(buf, sizeof(buf));
        return r;
}

/* Setting and formatting one value. */

static void *field(struct rnnd_options *o, const struct rnnd_option *opt)
{
        return (char *)o + opt->offset;
}

static const void *cfield(const struct rnnd_options *o, const struct rnnd_option *opt)
{
        return (const char *)o + opt->offset;
}

static const char *type_noun(enum rnnd_opt_type t)
{
        switch (t) {
        case RNND_OPT_UINT:
                return "an unsigned integer";
        case RNND_OPT_BYTES:
                return "a size (bytes, or with a K, M, G or T suffix)";
        case RNND_OPT_DURATION:
                return "a duration (seconds, or with an s, m or h suffix)";
        case RNND_OPT_BOOL:
                return "a boolean (yes/no, true/false, on/off, 1/0)";
        default:
                return "a valid value";
        }
}

/* "a|b|c" for an enum row, into buf[cap]. */
static void enum_choices(const struct rnnd_option *opt, char *buf, size_t cap)
{
        const struct rnnd_opt_enum_value *v;
        size_t n = 0;

        buf[0] = '\0';
        for (v = opt->values; v->name != NULL && n < cap; v++)
                n += (size_t)snprintf(buf + n, cap - n, "%s%s", n > 0 ? "|" : "", v->name);
}

static void format_bytes(uint64_t v, char *buf, size_t cap)
{
        if (v != 0 && v % TIB == 0)
                snprintf(buf, cap, "%" PRIu64 "T", v / TIB);
        else if (v != 0 && v % GIB == 0)
                snprintf(buf, cap, "%" PRIu64 "G", v / GIB);
        else if (v != 0 && v % MIB == 0)
                snprintf(buf, cap, "%" PRIu64 "M", v / MIB);
        else if (v != 0 && v % KIB == 0)
                snprintf(buf, cap, "%" PRIu64 "K", v / KIB);
        else
                snprintf(buf, cap, "%" PRIu64, v);
}

static void format_duration(uint64_t v, char *buf, size_t cap)
{
        if (v != 0 && v % 3600 == 0)
                snprintf(buf, cap, "%" PRIu64 "h", v / 3600);
        else if (v != 0 && v % 60 == 0)
                snprintf(buf, cap, "%" PRIu64 "m", v / 60);
        else
                snprintf(buf, cap, "%" PRIu64 "s", v);
}

/* A number of a numeric row as rnnd.conf spells it: "64M", "30s", "1024". */
static void format_number(enum rnnd_opt_type type, uint64_t v, char *buf, size_t cap)
{
        if (type == RNND_OPT_BYTES)
                format_bytes(v, buf, cap);
        else if (type == RNND_OPT_DURATION)
                format_duration(v, buf, cap);
        else
                snprintf(buf, cap, "%" PRIu64, v);
}

/* A limit of a numeric row the way the user writes it ("1K", "1h"), 0 as "0". */
static void format_limit(const struct rnnd_option *opt, uint64_t v, char *buf, size_t cap)
{
        if (v == 0)
                snprintf(buf, cap, "0");
        else
                format_number(opt->type, v, buf, cap);
}

/* "Range: 1K..4G" (", or auto" where auto is a value) for a numeric row; "" for others. */
static void range_text(const struct rnnd_option *opt, char *buf, size_t cap)
{
        char lo[32], hi[32];

        buf[0] = '\0';
        if (opt->type != RNND_OPT_UINT && opt->type != RNND_OPT_BYTES &&
            opt->type != RNND_OPT_DURATION)
                return;
        format_limit(opt, opt->min, lo, sizeof(lo));
        format_limit(opt, opt->max, hi, sizeof(hi));
        snprintf(buf, cap, "Range: %s..%s%s", lo, hi,
                 (opt->flags & RNND_OPT_AUTO) ? ", or auto" : "");
}

/*
 * How a value of a bytes or duration row is written, from what the parsers
 * take (rnnd__opt_parse_bytes(), rnnd__opt_parse_duration()), naming the
 * suffixes up to the row's max: "Bytes, or with a K or M suffix (powers of
 * 1024)."; "" for other rows.
 */
static void units_text(const struct rnnd_option *opt, char *buf, size_t cap)
{
        static const struct {
                const char *name;
                uint64_t unit;
        } bytes[] = {{"K", KIB}, {"M", MIB}, {"G", GIB}, {"T", TIB}},
          secs[] = {{"s", 1}, {"m", 60}, {"h", 3600}};
        const bool is_bytes = opt->type == RNND_OPT_BYTES;
        size_t n = 0, k, all = is_bytes ? 4 : 3, len = 0;
        char list[32] = "";

        buf[0] = '\0';
        if (opt->type != RNND_OPT_BYTES && opt->type != RNND_OPT_DURATION)
                return;
        while (n < all && (is_bytes ? bytes[n].unit : secs[n].unit) <= opt->max)
                n++;
        for (k = 0; k < n && len < sizeof(list); k++)
                len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
                                        k == 0       ? ""
                                        : k + 1 == n ? " or "
                                                     : ", ",
                                        is_bytes ? bytes[k].name : secs[k].name);
        if (is_bytes)
                snprintf(buf, cap, "Bytes, or with a %s suffix (powers of 1024).", list);
        else
                snprintf(buf, cap, "Seconds, or with a%s %s suffix (30s%s%s).", n > 1 ? "n" : "",
                         list, n > 1 ? ", 5m" : "", n > 2 ? ", 1h" : "");
}

/* The row's help with how its values are written, into buf[cap]. */
static void describe(const struct rnnd_option *opt, char *buf, size_t cap)
{
        char units[128];

        units_text(opt, units, sizeof(units));
        snprintf(buf, cap, "%s%s%s", opt->help, units[0] != '\0' ? " " : "", units);
}

/* What --help, rnnd.conf and rnnd.conf(5) say of a row a reload keeps. */
#define FIXED_TEXT "Fixed: a reload (SIGHUP) keeps the running value until a restart."

/* Whether a string value must be quoted to read back the same from rnnd.conf. */
static bool needs_quotes(const char *s)
{
        size_t n = strlen(s);

        return n == 0 || isspace((unsigned char)s[0]) || isspace((unsigned char)s[n - 1]) ||
               s[0] == '"' || strchr(s, '#') != NULL;
}

void rnnd_options_format(const struct rnnd_options *o, const struct rnnd_option *opt, char *buf,
                         size_t cap)
{
        const void *f = cfield(o, opt);
        uint64_t u;

        switch (opt->type) {
        case RNND_OPT_STRING: {
                const char *s = *(char *const *)f;
                size_t n = 0;

                if (s == NULL)
                        s = "";
                if (!needs_quotes(s)) {
                        snprintf(buf, cap, "%s", s);
                        break;
                }
                buf[n++] = '"';
                for (; *s != '\0' && n + 3 < cap; s++) {
                        if (*s == '"' || *s == '\\')
                                buf[n++] = '\\';
                        buf[n++] = *s;
                }
                buf[n++] = '"';
                buf[n] = '\0';
                break;
        }
        case RNND_OPT_BOOL:
                snprintf(buf, cap, "%s", *(const bool *)f ? "yes" : "no");
                break;
        case RNND_OPT_ENUM: {
                const struct rnnd_opt_enum_value *v;

                snprintf(buf, cap, "%d", *(const int *)f);
                for (v = opt->values; v->name != NULL; v++)
                        if (v->value == *(const int *)f)
                                snprintf(buf, cap, "%s", v->name);
                break;
        }
        case RNND_OPT_UINT:
        case RNND_OPT_BYTES:
        case RNND_OPT_DURATION:
                u = *(const uint64_t *)f;
                if ((opt->flags & RNND_OPT_AUTO) && u == 0)
                        snprintf(buf, cap, "auto");
                else
                        format_number(opt->type, u, buf, cap);
                break;
        }
}

int rnnd_options_set(struct rnnd_options *o, const struct rnnd_option *opt, const char *value,
                     const char *label, rnnd_error_t *reterr)
{
        void *f = field(o, opt);
        uint64_t u = 0;
        int r = 0;

        if (strlen(value) >= RNND_OPT_VALUE_MAX)
                return rnnd_error_set(reterr, RNND_ELIMIT, "%s: value longer than %u bytes", label,
                                      RNND_OPT_VALUE_MAX - 1);
        switch (opt->type) {
        case RNND_OPT_STRING: {
                rnnd_error_t e = {0};
                char *copy;

                if (opt->check != NULL && opt->check(value, &e) < 0)
                        return rnnd_error_set(reterr, e.code, "%s: %s", label, e.msg);
                copy = rnnd_strdup(value);
                if (copy == NULL)
                        return rnnd_error_set(reterr, RNND_ENOMEM, "%s: out of memory", label);
                rnnd_free(*(char **)f);
                *(char **)f = copy;
                return 0;
        }
        case RNND_OPT_BOOL: {
                bool b;

                if (rnnd__opt_parse_bool(value, &b) < 0)
                        return rnnd_error_set(reterr, RNND_EINVAL, "%s: '%s' is not %s", label,
                                              value, type_noun(opt->type));
                *(bool *)f = b;
                return 0;
        }
        case RNND_OPT_ENUM: {
                const struct rnnd_opt_enum_value *v;
                char choices[256];

                for (v = opt->values; v->name != NULL; v++) {
                        if (strcmp(v->name, value) == 0) {
                                *(int *)f = v->value;
                                return 0;
                        }
                }
                enum_choices(opt, choices, sizeof(choices));
                return rnnd_error_set(reterr, RNND_EINVAL, "%s: '%s' is not one of %s", label,
                                      value, choices);
        }
        case RNND_OPT_UINT:
        case RNND_OPT_BYTES:
        case RNND_OPT_DURATION:
                if ((opt->flags & RNND_OPT_AUTO) && strcmp(value, "auto") == 0) {
                        *(uint64_t *)f = 0;
                        return 0;
                }
                if (opt->type == RNND_OPT_UINT)
                        r = rnnd_decimal_parse(value, &u);
                else if (opt->type == RNND_OPT_BYTES)
                        r = rnnd__opt_parse_bytes(value, &u);
                else
                        r = rnnd__opt_parse_duration(value, &u);
                if (r == RNND_EINVAL)
                        return rnnd_error_set(reterr, RNND_EINVAL, "%s: '%s' is not %s%s", label,
                                              value, type_noun(opt->type),
                                              (opt->flags & RNND_OPT_AUTO) ? " or auto" : "");
                if (r < 0 || u < opt->min || u > opt->max) {
                        char lo[32], hi[32];

                        /* The limits the way the user writes them ("1K", "1h"), as --help's. */
                        format_limit(opt, opt->min, lo, sizeof(lo));
                        format_limit(opt, opt->max, hi, sizeof(hi));
                        return rnnd_error_set(reterr, RNND_ELIMIT,
                                              "%s: '%s' is out of range %s..%s", label, value, lo,
                                              hi);
                }
                *(uint64_t *)f = u;
                return 0;
        }
        return rnnd_error_set(reterr, RNND_EINTERNAL, "%s: unknown option type", label);
}

int rnnd_options_init(struct rnnd_options *o)
{
        size_t i;
        int r = 0;

        memset(o, 0, sizeof(*o));
        snprintf(o->backend_from, sizeof(o->backend_from), "default");
        for (i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
                /* Defaults are ours: only running out of memory can fail here (the unit tests
                 * parse every default), and then a string stays NULL. */
                int k = rnnd_options_set(o, &options[i], options[i].def, options[i].name, NULL);

                if (k < 0 && r == 0)
                        r = k;
        }
        return r;
}

void rnnd_options_done(struct rnnd_options *o)
{
        size_t i;

        for (i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
                if (options[i].type == RNND_OPT_STRING) {
                        char **s = field(o, &options[i]);

                        rnnd_free(*s);
                        *s = NULL;
                }
        }
        rnnd_free(o->config_file);
        o->config_file = NULL;
}

/* The config file. */

static bool is_blank(char c)
{
        return c == ' ' || c == '\t';
}

/*
 * Parses one value starting at p (after the '=' and blanks) up to end into
 * out[cap]: a "quoted" value with \" and \\ escapes, or the text up to a
 * blank followed by '#', without trailing blanks.
 */
static int parse_value(const char *p, const char *end, char *out, size_t cap, const char **err)
{
        size_t n = 0;

        if (p < end && *p == '"') {
                for (p++; p < end && *p != '"'; p++) {
                        if (*p == '\\' && p + 1 < end && (p[1] == '"' || p[1] == '\\'))
                                p++;
                        if (n + 1 >= cap) {
                                *err = "value too long";
                                return RNND_ELIMIT;
                        }
                        out[n++] = *p;
                }
                if (p >= end) {
                        *err = "missing closing '\"'";
                        return RNND_EINVAL;
                }
                for (p++; p < end && is_blank(*p); p++)
                        ;
                if (p < end && *p != '#') {
                        *err = "text after the closing '\"'";
                        return RNND_EINVAL;
                }
                out[n] = '\0';
                return 0;
        }
        for (; p < end; p++) {
                if (*p == '#' && (n == 0 || is_blank(out[n - 1])))
                        break;
                if (n + 1 >= cap) {
                        *err = "value too long";
                        return RNND_ELIMIT;
                }
                out[n++] = *p;
        }
        while (n > 0 && is_blank(out[n - 1]))
                n--;
        out[n] = '\0';
        return 0;
}

int rnnd_options_parse_text(struct rnnd_options *o, const char *text, size_t len,
                            const char *filename, rnnd_error_t *reterr)
{
        unsigned set_at[sizeof(options) / sizeof(options[0])] = {0};
        const char *p = text, *end = text + len;
        char *value = NULL;
        unsigned line = 0;
        int r = 0;

        if (memchr(text, '\0', len) != NULL)
                return rnnd_error_set(reterr, RNND_EINVAL, "%s: contains a NUL byte", filename);
        value = rnnd_malloc(RNND_OPT_VALUE_MAX);
        if (value == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "%s: out of memory", filename);

        while (p < end) {
                const char *eol = memchr(p, '\n', (size_t)(end - p));
                const char *next, *key, *q;
                const struct rnnd_option *opt;
                const char *err = NULL;
                rnnd_error_t e = {0};
                size_t keylen;

                if (eol == NULL)
                        eol = end;
                next = eol < end ? eol + 1 : end;
                line++;
                if (eol > p && eol[-1] == '\r')
                        eol--;
                for (q = p; q < eol && is_blank(*q); q++)
                        ;
                p = next;
                if (q == eol || *q == '#')
                        continue;

                key = q;
                while (q < eol && (isalnum((unsigned char)*q) || *q == '_' || *q == '-'))
                        q++;
                keylen = (size_t)(q - key);
                while (q < eol && is_blank(*q))
                        q++;
                if (keylen == 0 || q == eol || *q != '=') {
                        r = rnnd_error_set(reterr, RNND_EINVAL,
                                           "%s:%u: expected 'key = value', got '%.*s'", filename,
                                           line, (int)(eol - key > 60 ? 60 : eol - key), key);
                        goto out;
                }
                opt = find_n(key, keylen);
                if (opt == NULL) {
                        const char *near = nearest(key, keylen, false);

                        r = rnnd_error_set(reterr, RNND_EINVAL,
                                           "%s:%u: unknown key '%.*s'%s%s%s (rnnd --help lists "
                                           "them)",
                                           filename, line, (int)(keylen > 60 ? 60 : keylen), key,
                                           near != NULL ? "; did you mean " : "",
                                           near != NULL ? near : "", near != NULL ? "?" : "");
                        goto out;
                }
                if (set_at[opt - options] != 0) {
                        r = rnnd_error_set(reterr, RNND_EINVAL, "%s:%u: %s: already set on line %u",
                                           filename, line, opt->name, set_at[opt - options]);
                        goto out;
                }
                for (q++; q < eol && is_blank(*q); q++)
                        ;
                r = parse_value(q, eol, value, RNND_OPT_VALUE_MAX, &err);
                if (r < 0) {
                        r = rnnd_error_set(reterr, r, "%s:%u: %s: %s", filename, line, opt->name,
                                           err);
                        goto out;
                }
                r = rnnd_options_set(o, opt, value, opt->name, &e);
                if (r < 0) {
                        rnnd_error_set(reterr, r, "%s:%u: %s", filename, line, e.msg);
                        goto out;
                }
                if (opt->offset == OFF(backend))
                        snprintf(o->backend_from, sizeof(o->backend_from), "%.40s:%u", filename,
                                 line);
                set_at[opt - options] = line;
        }
out:
        rnnd_free(value);
        return r;
}

int rnnd_options_load_file(struct rnnd_options *o, const char *path, rnnd_error_t *reterr)
{
        struct stat st;
        char *text = NULL;
        size_t len = 0;
        int fd, r;

        /* O_NONBLOCK: a FIFO here must be refused below, not wait for a writer. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return rnnd_error_set(reterr, RNND_EIO, "%s: %s", path, strerror(errno));
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                r = rnnd_error_set(reterr, RNND_EIO,
                                   "%s: not a regular file (the config is read again on SIGHUP: "
                                   "write it to a file, e.g. rnnd --dump-config > rnnd.conf)",
                                   path);
                goto out;
        }
        if ((uint64_t)st.st_size > RNND_OPT_FILE_MAX) {
                r = rnnd_error_set(reterr, RNND_ELIMIT, "%s: larger than %u bytes", path,
                                   RNND_OPT_FILE_MAX);
                goto out;
        }
        text = rnnd_malloc((size_t)st.st_size + 1);
        if (text == NULL) {
                r = rnnd_error_set(reterr, RNND_ENOMEM, "%s: out of memory", path);
                goto out;
        }
        while (len < (size_t)st.st_size) {
                ssize_t n = read(fd, text + len, (size_t)st.st_size - len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        r = rnnd_error_set(reterr, RNND_EIO, "%s: %s", path, strerror(errno));
                        goto out;
                }
                if (n == 0)
                        break;
                len += (size_t)n;
        }
        r = rnnd_options_parse_text(o, text, len, path, reterr);
out:
        rnnd_free(text);
        close(fd);
        return r;
}

int rnnd_options_apply_env(struct rnnd_options *o, rnnd_error_t *reterr)
{
        const char *v = getenv("RNND_BACKEND");
        int r;

        if (v == NULL || v[0] == '\0')
                return 0;
        r = rnnd_options_set(o, rnnd_options_find("backend"), v, "RNND_BACKEND", reterr);
        if (r < 0)
                return r;
        snprintf(o->backend_from, sizeof(o->backend_from), "RNND_BACKEND");
        return 0;
}

/* The command line. */

static const struct {
        const char *flag;
        enum rnnd_command cmd;
} commands[] = {
        {"--help", RNND_CMD_HELP},         {"-h", RNND_CMD_HELP},
        {"--version", RNND_CMD_VERSION},   {"-V", RNND_CMD_VERSION},
        {"--backends", RNND_CMD_BACKENDS}, {"--dump-config", RNND_CMD_DUMP_CONFIG},
};

static int command_of(const char *arg)
{
        size_t i;

        for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
                if (strcmp(arg, commands[i].flag) == 0)
                        return (int)commands[i].cmd;
        return -1;
}

/* Whether arg is --config FILE or --config=FILE. */
static bool is_config_flag(const char *arg)
{
        return strcmp(arg, "--config") == 0 || strncmp(arg, "--config=", 9) == 0;
}

/*
 * Pass 1 of rnnd_options_parse_args(): checks every argument before anything
 * is applied, and finds the command and the --config file.
 */
static int scan_args(int argc, char *const *argv, enum rnnd_command *ret_cmd,
                     const char **ret_config, rnnd_error_t *reterr)
{
        enum rnnd_command cmd = RNND_CMD_RUN;
        const char *config = NULL;
        int i;

        for (i = 1; i < argc; i++) {
                const char *a = argv[i];
                int c = command_of(a);

                if (c >= 0) {
                        if (cmd != RNND_CMD_RUN && cmd != (enum rnnd_command)c)
                                return rnnd_error_set(reterr, RNND_EINVAL,
                                                      "%s: only one of --backends and "
                                                      "--dump-config at a time",
                                                      a);
                        cmd = (enum rnnd_command)c;
                        continue;
                }
                if (strcmp(a, "--") == 0) {
                        if (i + 1 < argc)
                                return rnnd_error_set(reterr, RNND_EINVAL,
                                                      "unexpected argument '%s'", argv[i + 1]);
                        break;
                }
                if (is_config_flag(a)) {
                        const char *v = a[8] == '=' ? a + 9 : (i + 1 < argc ? argv[++i] : NULL);

                        if (v == NULL || v[0] == '\0')
                                return rnnd_error_set(reterr, RNND_EINVAL,
                                                      "--config: needs a file name");
                        if (config != NULL)
                                return rnnd_error_set(reterr, RNND_EINVAL,
                                                      "--config: given twice ('%s', '%s')", config,
                                                      v);
                        config = v;
                        continue;
                }
                if (strncmp(a, "--", 2) != 0)
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "unexpected argument '%s' (settings are "
                                              "--key=value; see --help)",
                                              a);
                {
                        const char *eq = strchr(a + 2, '=');
                        size_t keylen = eq != NULL ? (size_t)(eq - a - 2) : strlen(a + 2);
                        const struct rnnd_option *opt = find_n(a + 2, keylen);

                        if (opt == NULL) {
                                const char *near = nearest(a + 2, keylen, true);

                                return rnnd_error_set(reterr, RNND_EINVAL,
                                                      "unknown option '%.*s'%s%s%s (rnnd --help "
                                                      "lists them)",
                                                      (int)(keylen + 2 > 80 ? 80 : keylen + 2), a,
                                                      near != NULL ? "; did you mean --" : "",
                                                      near != NULL ? near : "",
                                                      near != NULL ? "?" : "");
                        }
                        if (eq == NULL && opt->type != RNND_OPT_BOOL) {
                                if (i + 1 >= argc)
                                        return rnnd_error_set(reterr, RNND_EINVAL,
                                                              "--%s: needs a value", opt->name);
                                i++; /* --key value: the value is applied in pass 2. */
                        }
                }
        }
        *ret_cmd = cmd;
        *ret_config = config;
        return 0;
}

/* Pass 2's flags: applies each --key=value in order; scan_args() checked them. */
static int apply_args(struct rnnd_options *o, int argc, char *const *argv, rnnd_error_t *reterr)
{
        int i, r;

        for (i = 1; i < argc; i++) {
                const char *a = argv[i], *eq, *value;
                const struct rnnd_option *opt;
                char label[96];
                size_t keylen;

                if (command_of(a) >= 0)
                        continue;
                if (strcmp(a, "--") == 0)
                        break;
                if (is_config_flag(a)) {
                        if (a[8] != '=')
                                i++;
                        continue;
                }
                eq = strchr(a + 2, '=');
                keylen = eq != NULL ? (size_t)(eq - a - 2) : strlen(a + 2);
                opt = find_n(a + 2, keylen);
                if (eq != NULL)
                        value = eq + 1;
                else if (opt->type == RNND_OPT_BOOL)
                        value = "yes";
                else
                        value = argv[++i];
                snprintf(label, sizeof(label), "--%s", opt->name);
                r = rnnd_options_set(o, opt, value, label, reterr);
                if (r < 0)
                        return r;
                if (opt->offset == OFF(backend))
                        snprintf(o->backend_from, sizeof(o->backend_from), "--backend");
        }
        return 0;
}

int rnnd_options_parse_args(struct rnnd_options *o, int argc, char *const *argv,
                            enum rnnd_command *ret_cmd, rnnd_error_t *reterr)
{
        enum rnnd_command cmd = RNND_CMD_RUN;
        const char *config = NULL;
        int i, r;

        /* Pass 1: commands and --config.  --help and --version win over everything. */
        for (i = 1; i < argc; i++) {
                int c = command_of(argv[i]);

                if (c == RNND_CMD_HELP || c == RNND_CMD_VERSION) {
                        *ret_cmd = (enum rnnd_command)c;
                        return 0;
                }
        }
        r = scan_args(argc, argv, &cmd, &config, reterr);
        if (r < 0)
                return r;

        /* Pass 2: the file, then the flags in order, then the environment. */
        if (config != NULL) {
                r = rnnd_options_load_file(o, config, reterr);
                if (r < 0) {
                        rnnd_error_prefix(reterr, "--config");
                        return r;
                }
                o->config_file = rnnd_strdup(config);
                if (o->config_file == NULL)
                        return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
        }
        r = apply_args(o, argc, argv, reterr);
        if (r < 0)
                return r;
        r = rnnd_options_apply_env(o, reterr);
        if (r < 0)
                return r;
        r = rnnd_options_check(o, reterr);
        if (r < 0)
                return r;
        *ret_cmd = cmd;
        return 0;
}

/*
 * The CPUs this process may run on (its affinity mask: taskset, cgroup
 * cpusets), 1..1024; the CPUs online when the mask cannot be read.
 */
static unsigned cpu_count(void)
{
        cpu_set_t set;
        long n;

        if (sched_getaffinity(0, sizeof(set), &set) == 0)
                n = CPU_COUNT(&set);
        else
                n = sysconf(_SC_NPROCESSORS_ONLN);
        if (n < 1)
                n = 1;
        return n > 1024 ? 1024u : (unsigned)n;
}

unsigned rnnd_options_threads(const struct rnnd_options *o)
{
        return o->threads > 0 ? (unsigned)o->threads : cpu_count();
}

unsigned rnnd_options_per_address_limit(const struct rnnd_options *o)
{
        uint64_t n = o->per_address_limit > 0 ? o->per_address_limit : o->connection_limit * 3 / 4;

        return n < 1 ? 1u : n > UINT32_MAX ? UINT32_MAX : (unsigned)n;
}

unsigned rnnd_options_grpc_threads(const struct rnnd_options *o)
{
        return o->grpc_threads > 0 ? (unsigned)o->grpc_threads : cpu_count();
}

unsigned rnnd_options_cpu_threads(const struct rnnd_options *o)
{
        return o->cpu_threads > 0 ? (unsigned)o->cpu_threads : cpu_count();
}

int rnnd_options_check(const struct rnnd_options *o, rnnd_error_t *reterr)
{
        unsigned threads = rnnd_options_threads(o);

        if (o->connection_limit < threads)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "connection_limit (%" PRIu64 ") must be at least threads "
                                      "(%u): each HTTP thread gets its share",
                                      o->connection_limit, threads);
        return 0;
}

/* --help and --dump-config. */

/* Writes text word-wrapped to width columns, each line starting with prefix. */
static void wrap(FILE *f, const char *prefix, const char *text, size_t width)
{
        size_t plen = strlen(prefix), col = 0;
        const char *p = text;

        while (*p != '\0') {
                size_t wlen = strcspn(p, " ");

                if (col > 0 && col + 1 + wlen > width) {
                        fputc('\n', f);
                        col = 0;
                }
                if (col == 0) {
                        fputs(prefix, f);
                        col = plen;
                } else {
                        fputc(' ', f);
                        col++;
                }
                fwrite(p, 1, wlen, f);
                col += wlen;
                p += wlen;
                while (*p == ' ')
                        p++;
        }
        if (col > 0)
                fputc('\n', f);
}

void rnnd_options_help(FILE *f)
{
        struct rnnd_options defaults;
        size_t i;

        (void)rnnd_options_init(&defaults); /* Out of memory: a default shows as "". */
        fputs("Usage: rnnd [--config FILE] [--KEY=VALUE | --KEY VALUE ...]\n"
              "       rnnd --help | --version | --backends | --dump-config\n\n",
              f);
        wrap(f, "",
             "rnnd serves recurrent networks (LSTM, GRU, RNN) over HTTP and gRPC with the "
             "KServe v2 (Open Inference Protocol) and TensorFlow Serving APIs (REST on `listen`, "
             "gRPC on `grpc_listen`). Settings come from "
             "their defaults, then the --config file, then the command line; RNND_BACKEND=cpu "
             "in the environment overrides `backend`.",
             78);
        fputs("\nCommands:\n"
              "  --config FILE   Read settings from FILE: `key = value` lines, # comments.\n"
              "                  None is read without it; the installed one is\n"
              "                  " RNND_CONFIG_FILE "\n"
              "  --dump-config   Print the settings in effect as a commented rnnd.conf, exit.\n"
              "  --backends      Print the compute backends built in and what this machine\n"
              "                  has (CUDA driver, GPUs), exit.\n"
              "  -V, --version   Print the version, exit.\n"
              "  -h, --help      Print this help, exit.\n"
              "\nSettings (also `key = value` in the config file; - and _ are the same in\n"
              "names, so --model-repository is --model_repository):\n",
              f);
        for (i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
                const struct rnnd_option *opt = &options[i];
                char def[256], meta[256], text[2048], range[96];

                rnnd_options_format(&defaults, opt, def, sizeof(def));
                if (opt->type == RNND_OPT_ENUM)
                        enum_choices(opt, meta, sizeof(meta));
                else
                        snprintf(meta, sizeof(meta), "%s%s", opt->metavar,
                                 (opt->flags & RNND_OPT_AUTO) ? "|auto" : "");
                fprintf(f, "  --%s=%s\n", opt->name, meta);
                describe(opt, text, sizeof(text));
                wrap(f, "        ", text, 78);
                range_text(opt, range, sizeof(range));
                if (range[0] != '\0')
                        fprintf(f, "        %s\n", range);
                fprintf(f, "        Default: %s\n", def);
                if (opt->flags & RNND_OPT_FIXED)
                        wrap(f, "        ", FIXED_TEXT, 78);
        }
        fputs("\nEnvironment:\n"
              "  RNND_BACKEND=auto|cpu   Overrides `backend` (cpu switches cuDNN off).\n"
              "  NOTIFY_SOCKET, LISTEN_FDS, WATCHDOG_USEC   Set by systemd (Type=notify,\n"
              "                          socket activation, WatchdogSec=).\n",
              f);
        rnnd_options_done(&defaults);
}

void rnnd_options_dump(FILE *f, const struct rnnd_options *o)
{
        struct rnnd_options defaults;
        size_t i;

        (void)rnnd_options_init(&defaults); /* Out of memory: a default shows as "". */
        fputs("# rnnd.conf: settings of the rnnd daemon.\n"
              "#\n",
              f);
        wrap(f, "# ",
             "Generated by `rnnd --dump-config` from the daemon's settings table; do not edit "
             "the comments by hand. Lines are `key = value`; # starts a comment at the start of "
             "a line or after a blank; a value may be \"double quoted\". Every key is also a "
             "command line flag, --key=value, which wins over this file. RNND_BACKEND=cpu in "
             "the environment overrides `backend`.",
             78);
        for (i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
                const struct rnnd_option *opt = &options[i];
                char def[RNND_OPT_VALUE_MAX + 8], val[RNND_OPT_VALUE_MAX + 8];
                char text[2048], range[96];

                rnnd_options_format(&defaults, opt, def, sizeof(def));
                rnnd_options_format(o, opt, val, sizeof(val));
                fputc('\n', f);
                describe(opt, text, sizeof(text));
                wrap(f, "# ", text, 78);
                range_text(opt, range, sizeof(range));
                if (opt->type == RNND_OPT_ENUM) {
                        char choices[256];

                        enum_choices(opt, choices, sizeof(choices));
                        fprintf(f, "# One of: %s. Default: %s.\n", choices, def);
                } else if (range[0] != '\0') {
                        fprintf(f, "# %s. Default: %s.\n", range, def);
                } else {
                        fprintf(f, "# Default: %s.\n", def);
                }
                if (opt->flags & RNND_OPT_FIXED)
                        fprintf(f, "# %s\n", FIXED_TEXT);
                fprintf(f, "%s = %s\n", opt->name, val);
        }
        rnnd_options_done(&defaults);
}

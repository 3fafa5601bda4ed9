/*
 * options.h: every setting of the daemon, in one table (Redis standardConfig).
 *
 * A setting has a name, a type, a default, limits and a help text, and lives
 * at an offset in struct rnnd_options.  The same row drives the config file
 * parser ("key = value" lines, # comments), the --key=value flags, --help and
 * --dump-config, so the documentation cannot drift from the code.
 * Precedence: defaults, then the --config file, then flags; RNND_BACKEND in
 * the environment overrides `backend` last (DESIGN.md §7).
 */
#ifndef RNND_DAEMON_OPTIONS_H
#define RNND_DAEMON_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"

/* Longest accepted value, line of the config file, and config file. */
#define RNND_OPT_VALUE_MAX 4096u
#define RNND_OPT_FILE_MAX  (1u << 20)
/* Longest bearer token in auth_token_file. */
#define RNND_OPT_TOKEN_MAX 4096u

enum rnnd_opt_type {
        RNND_OPT_STRING = 0, /* char * */
        RNND_OPT_UINT,       /* uint64_t, decimal */
        RNND_OPT_BYTES,      /* uint64_t, with an optional K, M, G or T suffix (powers of 1024) */
        RNND_OPT_BOOL,       /* bool: yes/no, true/false, on/off, 1/0 */
        RNND_OPT_ENUM,       /* int, one of the row's names */
        RNND_OPT_DURATION,   /* uint64_t seconds, with an optional s, m or h suffix */
};

/* Row flags. */
#define RNND_OPT_AUTO  0x1u /* numeric: the value "auto" means 0, resolved at start */
#define RNND_OPT_FIXED 0x2u /* a reload (SIGHUP) keeps the running value (reload.c) */

enum rnnd_backend_choice {
        RNND_BACKEND_AUTO = 0, /* cuDNN where built and usable, else the CPU engine */
        RNND_BACKEND_CPU,      /* the CPU engine only */
};

/* Which requests get an access line (option access_log). */
enum rnnd_access_log {
        RNND_ACCESS_LOG_OFF = 0,
        RNND_ACCESS_LOG_ERRORS,
        RNND_ACCESS_LOG_ALL,
};

struct rnnd_options {
        char *listen;                    /* "host:port" or "[v6]:port" */
        char *grpc_listen;               /* the same for gRPC; "" = none */
        char *model_repository;          /* directory */
        uint64_t threads;                /* MHD thread pool; 0 = number of CPUs */
        uint64_t connection_limit;       /* concurrent connections */
        uint64_t connection_timeout;     /* seconds of inactivity */
        uint64_t header_timeout;         /* seconds outside a request before closing; 0 = off */
        uint64_t per_address_limit;      /* connections from one address; 0 = 3/4 of the limit */
        uint64_t max_body_bytes;         /* request body cap */
        uint64_t grpc_max_message_bytes; /* a gRPC request message's cap */
        uint64_t grpc_max_streams;       /* concurrent streams per gRPC connection */
        uint64_t grpc_max_header_bytes;  /* a gRPC call's header list */
        uint64_t grpc_threads;           /* gRPC loops, the daemon's among them; 0 = CPUs */
        uint64_t max_tensor_elements;    /* per tensor in a request */
        uint64_t max_response_bytes;     /* the outputs one request may ask for */
        uint64_t max_response_memory;    /* what all answers not yet read may hold */
        uint64_t max_shm_regions;        /* system shared memory regions; 0 = off */
        uint64_t max_json_depth;         /* nesting of a request's JSON */
        uint64_t max_json_memory;        /* a request's JSON tree, estimated */
        uint64_t per_connection_memory;  /* MHD memory pool per connection */
        int log_level;                   /* RNND_LOG_ERR..RNND_LOG_DEBUG */
        int log_format;                  /* enum rnnd_log_format */
        int access_log;                  /* enum rnnd_access_log */
        int backend;                     /* enum rnnd_backend_choice */
        uint64_t cpu_threads;            /* BLAS threads per CPU instance; 0 = library default */
        uint64_t shutdown_timeout;       /* seconds to finish in-flight work on SIGTERM */
        uint64_t worker_stall_timeout;   /* seconds a busy pool may complete nothing (watchdog) */
        char *auth_token_file;           /* "" = none; else the repository API needs its token */

        uint64_t repository_poll_interval; /* seconds between repository scans; 0 = off */

        char *config_file;     /* the --config file read, or NULL */
        char backend_from[64]; /* where backend's value came from ("default", "RNND_BACKEND", ...)
                                */
};

struct rnnd_opt_enum_value {
        const char *name;
        int value;
};

struct rnnd_option {
        const char *name;                         /* key and flag (--name) */
        enum rnnd_opt_type type;                  /* how the value is parsed and stored */
        size_t offset;                            /* into struct rnnd_options */
        const char *def;                          /* default, spelled as in rnnd.conf */
        uint64_t min, max;                        /* numeric types: inclusive range */
        const struct rnnd_opt_enum_value *values; /* enum: the names, NULL-terminated */
        int (*check)(const char *value, rnnd_error_t *reterr); /* string: more checks, or NULL */
        unsigned flags;                                        /* RNND_OPT_* */
        const char *metavar;                                   /* for --help: "HOST:PORT" */
        const char *help;                                      /* one or more sentences */
};

/* What the command line asks for. */
enum rnnd_command {
        RNND_CMD_RUN = 0,
        RNND_CMD_HELP,
        RNND_CMD_VERSION,
        RNND_CMD_BACKENDS,
        RNND_CMD_DUMP_CONFIG,
};

/* The table and its length.  Borrowed, static.  Thread-safe. */
const struct rnnd_option *rnnd_options_table(size_t *n);

/* The row called name ('-' and '_' are the same), or NULL.  Borrowed, static.  Thread-safe. */
const struct rnnd_option *rnnd_options_find(const char *name);

/*
 * Fills *o with every default.  Returns 0, or RNND_ENOMEM (a string setting
 * is then NULL); either way rnnd_options_done() frees it.
 */
int rnnd_options_init(struct rnnd_options *o);

/* Frees what *o owns; accepts an initialized or zeroed struct. */
void rnnd_options_done(struct rnnd_options *o);

/*
 * Parses value for row opt and stores it in *o.  label names the source in
 * messages ("threads", "--threads", "RNND_BACKEND").  Returns 0, or RNND_EINVAL
 * (not a value of the type, not a choice, a check failed) or RNND_ELIMIT
 * (out of range) with "label: problem".  *o is unchanged on failure.
 */
int rnnd_options_set(struct rnnd_options *o, const struct rnnd_option *opt, const char *value,
                     const char *label, rnnd_error_t *reterr);

/*
 * Parses config file text[0..len) ("key = value" lines, # comments, blank
 * lines; a value may be "double quoted"; " #" after a value starts a comment).
 * filename is used in messages only: every error reads "filename:line: ...".
 * Unknown and repeated keys are errors.  Returns 0 or RNND_EINVAL/RNND_ELIMIT.
 * Settings before the bad line stay applied.
 */
int rnnd_options_parse_text(struct rnnd_options *o, const char *text, size_t len,
                            const char *filename, rnnd_error_t *reterr);

/* Reads the file at path (RNND_OPT_FILE_MAX bytes at most) and parses it.  RNND_EIO if unreadable.
 */
int rnnd_options_load_file(struct rnnd_options *o, const char *path, rnnd_error_t *reterr);

/* Applies RNND_BACKEND from the environment, if set.  Errors as rnnd_options_set(). */
int rnnd_options_apply_env(struct rnnd_options *o, rnnd_error_t *reterr);

/*
 * The whole command line: finds --help, --version, --backends, --dump-config
 * and --config FILE, reads the file, applies --key=value and --key value
 * flags, then the environment, then checks the result.  *o must be
 * initialized.  *ret_cmd says what to do; with RNND_CMD_HELP or
 * RNND_CMD_VERSION nothing else is read or checked.  Errors name the flag, or
 * the file and line.  Not thread-safe (reads the environment).
 */
int rnnd_options_parse_args(struct rnnd_options *o, int argc, char *const *argv,
                            enum rnnd_command *ret_cmd, rnnd_error_t *reterr);

/*
 * Reads the bearer token of path into buf[cap] (NUL-terminated, without the
 * line end) and its length into *ret_len.  The file must be a regular file
 * not readable by others, holding one line of visible ASCII shorter than cap.
 * Errors: RNND_EINVAL, naming the file but never showing its content; buf is
 * zeroed on failure.  Thread-safe.
 */
int rnnd_options_read_token(const char *path, char *buf, size_t cap, size_t *ret_len,
                            rnnd_error_t *reterr);

/* Checks rules between settings.  Returns 0 or RNND_EINVAL. */
int rnnd_options_check(const struct rnnd_options *o, rnnd_error_t *reterr);

/*
 * Writes opt's value in *o as rnnd.conf spells it ("64M", "30s", "auto",
 * "\"\"" for an empty string) into buf[cap], cutting it to fit.
 */
void rnnd_options_format(const struct rnnd_options *o, const struct rnnd_option *opt, char *buf,
                         size_t cap);

/* Writes the --help text, generated from the table. */
void rnnd_options_help(FILE *f);

/* Writes *o as a commented rnnd.conf: for every key its help, default and value. */
void rnnd_options_dump(FILE *f, const struct rnnd_options *o);

/*
 * Splits a listen address: "host:port" or "[v6addr]:port" (port 0..65535)
 * into host[cap] (without brackets) and *port.  Returns 0 or RNND_EINVAL.
 */
int rnnd_options_split_listen(const char *s, char *host, size_t cap, unsigned *port,
                              rnnd_error_t *reterr);

struct addrinfo;

/*
 * The address to bind for host and port (as split by
 * rnnd_options_split_listen(); "" is every address): getaddrinfo()'s
 * answers, passive, the port numeric, into *ret for freeaddrinfo().  Returns
 * 0, or RNND_EINVAL saying why (after "setting: " unless it is NULL).
 */
int rnnd_options_resolve_listen(const char *setting, const char *host, unsigned port,
                                struct addrinfo **ret, rnnd_error_t *reterr);

/*
 * A TCP socket (flags: SOCK_NONBLOCK and the like, beside SOCK_CLOEXEC) bound
 * to ai as rnnd listens: SO_REUSEADDR, and IPV6_V6ONLY for IPv6.  Returns the
 * descriptor, or -1 with errno set.  Thread-safe.
 */
int rnnd_options_bind(const struct addrinfo *ai, int flags);

/* threads with "auto" resolved to the number of online CPUs. */
unsigned rnnd_options_threads(const struct rnnd_options *o);

/* grpc_threads with "auto" resolved to the number of online CPUs. */
unsigned rnnd_options_grpc_threads(const struct rnnd_options *o);

/* per_address_limit with 0 resolved to 3/4 of connection_limit (at least 1). */
unsigned rnnd_options_per_address_limit(const struct rnnd_options *o);

/* The CPU engine's threads per instance: cpu_threads, or the CPU count for auto.  Thread-safe. */
unsigned rnnd_options_cpu_threads(const struct rnnd_options *o);

#endif

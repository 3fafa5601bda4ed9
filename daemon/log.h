/*
 * log.h: the daemon's log (DESIGN.md §8).  Only daemon/ logs; proto/ and
 * engine/ return errors.
 *
 * Lines go to stderr, one write(2) each, so lines from different threads
 * never interleave.  In text format a line is "<N>message" where N is the
 * syslog priority (sd-daemon's SD_ERR..SD_DEBUG), which journald turns into
 * the entry's priority; outside journald a UTC timestamp follows the prefix.
 * In json format a line is one JSON object:
 *   {"time":"2024-05-01T12:00:00.123Z","level":"info","message":"...","request_id":"..."}
 */
#ifndef RNND_DAEMON_LOG_H
#define RNND_DAEMON_LOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Levels are syslog's priorities. */
#define RNND_LOG_ERR     3
#define RNND_LOG_WARNING 4
#define RNND_LOG_NOTICE  5
#define RNND_LOG_INFO    6
#define RNND_LOG_DEBUG   7

enum rnnd_log_format {
        RNND_LOG_TEXT = 0,
        RNND_LOG_JSON,
};

/* The most verbose level written; atomic.  Set it with rnnd_log_setup(). */
extern atomic_int rnnd_log_max_level;

/*
 * rnnd_log(RNND_LOG_INFO, "loaded %s", name) writes one line when level is
 * enabled.  The level is checked before any argument is evaluated (Redis
 * serverLog), so a disabled debug line costs one load.  Thread-safe.
 */
#define rnnd_log(level, ...)                                                                       \
        do {                                                                                       \
                if ((level) > atomic_load_explicit(&rnnd_log_max_level, memory_order_relaxed))     \
                        break;                                                                     \
                rnnd_log_write((level), NULL, __VA_ARGS__);                                        \
        } while (0)

/* Like rnnd_log(), for a line about a request: req_id (may be NULL) goes with it.  Thread-safe. */
#define rnnd_log_req(level, req_id, ...)                                                           \
        do {                                                                                       \
                if ((level) > atomic_load_explicit(&rnnd_log_max_level, memory_order_relaxed))     \
                        break;                                                                     \
                rnnd_log_write((level), (req_id), __VA_ARGS__);                                    \
        } while (0)

/* Whether a line at level would be written.  Thread-safe. */
#define rnnd_log_enabled(level)                                                                    \
        ((level) <= atomic_load_explicit(&rnnd_log_max_level, memory_order_relaxed))

/*
 * Sets the level and the format, and where lines go (fd, normally 2).
 * Call before starting threads; the level may change later.
 */
void rnnd_log_setup(int max_level, enum rnnd_log_format format, int fd);

/* Writes one line unconditionally; use the macros.  Thread-safe. */
void rnnd_log_write(int level, const char *req_id, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
void rnnd_log_writev(int level, const char *req_id, const char *fmt, va_list ap)
        __attribute__((format(printf, 3, 0)));

/*
 * One request's access line (option access_log), unconditionally: in text
 * format "[id] GET /path 400 1.234ms 52B model=m version=1: reason", in json
 * format message "GET /path 400" and each part a field (method, path,
 * status, duration_ms, bytes, model, version, reason, request_id).  A NULL
 * or empty string and version 0 are left out.  Thread-safe.
 */
struct rnnd_log_access {
        const char *req_id, *method, *path;
        unsigned status;
        double duration_ms;
        size_t bytes; /* of the response's body */
        const char *model;
        uint64_t version;
        const char *reason; /* a 4xx/5xx's error, or how the connection ended */
};
void rnnd_log_access(int level, const struct rnnd_log_access *a);

/* "err", "warning", ... for a level.  Borrowed, static.  Thread-safe. */
const char *rnnd_log_level_name(int level);

#endif

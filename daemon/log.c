/*
 * log.c: formats log lines and writes each with one write(2).
 *
 * DESIGN
 * Any thread may log.  A line is formatted on the caller's stack (the message
 * is cut at MSG_MAX bytes) and written with a single write(2) to a descriptor
 * opened in O_APPEND or a pipe, which the kernel does not interleave for
 * lines up to PIPE_BUF and in practice does not for regular files either, so
 * there is no lock.  The settings are written once by rnnd_log_setup() before
 * threads start; only the level is read concurrently, and it is atomic.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "strbuf.h"

#define MSG_MAX 2048
#define LOG_LINE_MAX                                                                               \
        (MSG_MAX * 6 + 1024) /* every message byte escaped as \u00XX, plus the rest                \
                              */

atomic_int rnnd_log_max_level = RNND_LOG_INFO;

static enum rnnd_log_format log_format = RNND_LOG_TEXT; /* immutable after setup */
static int log_fd = 2;                                  /* immutable after setup */
static int log_stamp = 1; /* text: add a timestamp (not under journald); immutable after setup */

/* Whether fd is the stream journald gave us: $JOURNAL_STREAM is "dev:ino" of it. */
static int fd_is_journal(int fd)
{
        const char *js = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (js == NULL || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(fd, &st) < 0)
                return 0;
        return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void rnnd_log_setup(int max_level, enum rnnd_log_format format, int fd)
{
        atomic_store(&rnnd_log_max_level, max_level);
        log_format = format;
        log_fd = fd;
        log_stamp = !fd_is_journal(fd);
}

const char *rnnd_log_level_name(int level)
{
        static const char *const names[] = {"emerg",   "alert",  "crit", "err",
                                            "warning", "notice", "info", "debug"};

        return level >= 0 && level <= 7 ? names[level] : "debug";
}

/* "2024-05-01T12:00:00.123Z" into buf[32]. */
static void format_time(char *buf, size_t cap)
{
        struct timespec ts;
        struct tm tm;
        size_t n;

        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        n = strftime(buf, cap, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(buf + n, cap - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

static void write_all(int fd, const char *p, size_t n)
{
        while (n > 0) {
                ssize_t w = write(fd, p, n);

                if (w < 0) {
                        if (errno == EINTR)
                                continue;
                        return; /* Nowhere left to report it. */
                }
                p += w;
                n -= (size_t)w;
        }
}

static bool present(const char *s)
{
        return s != NULL && s[0] != '\0';
}

/* An access line's fields after the message (json format). */
static void access_fields(struct rnnd_strbuf *b, const struct rnnd_log_access *a)
{
        rnnd_strbuf_json_kv_str(b, "method", a->method);
        rnnd_strbuf_json_kv_str(b, "path", a->path);
        rnnd_strbuf_json_kv_u64(b, "status", a->status);
        rnnd_strbuf_json_key(b, "duration_ms");
        rnnd_strbuf_printf(b, "%.3f", a->duration_ms);
        rnnd_strbuf_json_kv_u64(b, "bytes", a->bytes);
        if (present(a->model))
                rnnd_strbuf_json_kv_str(b, "model", a->model);
        if (a->version != 0)
                rnnd_strbuf_json_kv_u64(b, "version", a->version);
        if (present(a->reason))
                rnnd_strbuf_json_kv_str(b, "reason", a->reason);
}

/*
 * s for a text line: a control byte (most of them client-sent: a URL, a
 * method, a tensor's name quoted in a message) as \n, \r or \xHH, so that a
 * line is one line whatever a client sent; "x\n<2>..." would otherwise be
 * a second line that journald reads at priority 2 (crit).  The JSON format
 * escapes them as JSON does.
 */
static void put_escaped(struct rnnd_strbuf *b, const char *s)
{
        for (; *s != '\0'; s++) {
                unsigned char c = (unsigned char)*s;

                if (c >= 0x20 && c != 0x7f)
                        rnnd_strbuf_putc(b, (char)c);
                else if (c == '\n')
                        rnnd_strbuf_puts(b, "\\n");
                else if (c == '\r')
                        rnnd_strbuf_puts(b, "\\r");
                else
                        rnnd_strbuf_printf(b, "\\x%02x", c);
        }
}

/* Writes msg as one line at level (a is an access line's fields, or NULL). */
static void write_line(int level, const char *req_id, const char *msg,
                       const struct rnnd_log_access *a)
{
        char line[LOG_LINE_MAX], stamp[40];
        struct rnnd_strbuf b;

        if (level < 0)
                level = 0;
        if (level > 7)
                level = 7;
        rnnd_strbuf_init_fixed(&b, line, sizeof(line));
        if (log_format == RNND_LOG_JSON) {
                format_time(stamp, sizeof(stamp));
                rnnd_strbuf_putc(&b, '{');
                rnnd_strbuf_json_kv_str(&b, "time", stamp);
                rnnd_strbuf_json_kv_str(&b, "level", rnnd_log_level_name(level));
                rnnd_strbuf_json_kv_str(&b, "message", msg);
                if (present(req_id))
                        rnnd_strbuf_json_kv_str(&b, "request_id", req_id);
                if (a != NULL)
                        access_fields(&b, a);
                rnnd_strbuf_putc(&b, '}');
        } else {
                rnnd_strbuf_printf(&b, "<%d>", level);
                if (log_stamp) {
                        format_time(stamp, sizeof(stamp));
                        rnnd_strbuf_puts(&b, stamp);
                        rnnd_strbuf_putc(&b, ' ');
                }
                if (present(req_id)) {
                        rnnd_strbuf_putc(&b, '[');
                        put_escaped(&b, req_id);
                        rnnd_strbuf_puts(&b, "] ");
                }
                put_escaped(&b, msg);
        }
        /* The buffer is sized so that nothing above is cut; keep the newline regardless. */
        if (b.len + 1 >= sizeof(line))
                b.len = sizeof(line) - 2;
        line[b.len++] = '\n';
        write_all(log_fd, line, b.len);
}

void rnnd_log_writev(int level, const char *req_id, const char *fmt, va_list ap)
{
        char msg[MSG_MAX];
        int saved_errno = errno;
        int n;

        n = vsnprintf(msg, sizeof(msg), fmt, ap);
        if (n < 0)
                snprintf(msg, sizeof(msg), "(unformattable log message: %s)", fmt);
        else if ((size_t)n >= sizeof(msg))
                memcpy(msg + sizeof(msg) - 4, "...", 4);
        n = (int)strlen(msg);
        while (n > 0 && msg[n - 1] == '\n')
                msg[--n] = '\0';
        write_line(level, req_id, msg, NULL);
        errno = saved_errno;
}

void rnnd_log_access(int level, const struct rnnd_log_access *a)
{
        char msg[MSG_MAX];
        struct rnnd_strbuf b;
        int saved_errno = errno;

        rnnd_strbuf_init_fixed(&b, msg, sizeof(msg));
        rnnd_strbuf_printf(&b, "%s %s %u", a->method, a->path, a->status);
        if (log_format != RNND_LOG_JSON) {
                rnnd_strbuf_printf(&b, " %.3fms %zuB", a->duration_ms, a->bytes);
                if (present(a->model))
                        rnnd_strbuf_printf(&b, " model=%s", a->model);
                if (a->version != 0)
                        rnnd_strbuf_printf(&b, " version=%" PRIu64, a->version);
                if (present(a->reason))
                        rnnd_strbuf_printf(&b, ": %s", a->reason);
        }
        write_line(level, a->req_id, msg, log_format == RNND_LOG_JSON ? a : NULL);
        errno = saved_errno;
}

void rnnd_log_write(int level, const char *req_id, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        rnnd_log_writev(level, req_id, fmt, ap);
        va_end(ap);
}

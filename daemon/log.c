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

void rnnd_log_writev(int level, const char *req_id, const char *fmt, va_list ap)
{
        char msg[MSG_MAX], line[LOG_LINE_MAX], stamp[40];
        struct rnnd_strbuf b;
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
                if (req_id != NULL && req_id[0] != '\0')
                        rnnd_strbuf_json_kv_str(&b, "request_id", req_id);
                rnnd_strbuf_putc(&b, '}');
        } else {
                rnnd_strbuf_printf(&b, "<%d>", level);
                if (log_stamp) {
                        format_time(stamp, sizeof(stamp));
                        rnnd_strbuf_puts(&b, stamp);
                        rnnd_strbuf_putc(&b, ' ');
                }
                if (req_id != NULL && req_id[0] != '\0')
                        rnnd_strbuf_printf(&b, "[%s] ", req_id);
                rnnd_strbuf_puts(&b, msg);
        }
        /* The buffer is sized so that nothing above is cut; keep the newline regardless. */
        if (b.len + 1 >= sizeof(line))
                b.len = sizeof(line) - 2;
        line[b.len++] = '\n';
        write_all(log_fd, line, b.len);
        errno = saved_errno;
}

void rnnd_log_write(int level, const char *req_id, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        rnnd_log_writev(level, req_id, fmt, ap);
        va_end(ap);
}

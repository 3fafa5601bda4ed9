/* strbuf.c: a growable or fixed byte buffer and a hand-written JSON writer. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "strbuf.h"

void rnnd_strbuf_init(struct rnnd_strbuf *b)
{
        memset(b, 0, sizeof(*b));
}

void rnnd_strbuf_init_fixed(struct rnnd_strbuf *b, char *mem, size_t cap)
{
        memset(b, 0, sizeof(*b));
        b->data = mem;
        b->cap = cap;
        b->fixed = true;
        if (cap > 0)
                mem[0] = '\0';
}

void rnnd_strbuf_reset(struct rnnd_strbuf *b)
{
        b->len = 0;
        b->oom = false;
        b->truncated = false;
        if (b->data != NULL && b->cap > 0)
                b->data[0] = '\0';
}

void rnnd_strbuf_done(struct rnnd_strbuf *b)
{
        if (b->fixed)
                return;
        rnnd_free(b->data);
        rnnd_strbuf_init(b);
}

char *rnnd_strbuf_steal(struct rnnd_strbuf *b, size_t *len)
{
        char *p;

        if (b->fixed || b->oom) {
                rnnd_strbuf_done(b);
                return NULL;
        }
        if (b->data == NULL) {
                /* An empty buffer still gives a string the caller can free. */
                rnnd_strbuf_putn(b, "", 0);
                if (b->oom)
                        return NULL;
        }
        p = b->data;
        if (len != NULL)
                *len = b->len;
        rnnd_strbuf_init(b);
        return p;
}

/* Makes room for n more bytes plus the NUL; returns how many of them fit. */
static size_t reserve(struct rnnd_strbuf *b, size_t n)
{
        size_t want, cap;
        char *p;

        if (b->oom)
                return 0;
        if (b->fixed) {
                size_t room = b->cap > b->len + 1 ? b->cap - b->len - 1 : 0;

                if (room < n)
                        b->truncated = true;
                return room < n ? room : n;
        }
        if (n > SIZE_MAX - b->len - 1) {
                b->oom = true;
                return 0;
        }
        want = b->len + n + 1;
        if (want <= b->cap)
                return n;
        cap = b->cap > 0 ? b->cap : 64;
        while (cap < want)
                cap = cap > SIZE_MAX / 2 ? want : cap * 2;
        p = rnnd_realloc(b->data, cap);
        if (p == NULL) {
                b->oom = true;
                return 0;
        }
        b->data = p;
        b->cap = cap;
        return n;
}

size_t rnnd_strbuf_reserve(struct rnnd_strbuf *b, size_t n)
{
        return reserve(b, n);
}

void rnnd_strbuf_putn(struct rnnd_strbuf *b, const char *s, size_t n)
{
        n = reserve(b, n);
        if (b->data == NULL || b->cap == 0)
                return;
        memcpy(b->data + b->len, s, n);
        b->len += n;
        b->data[b->len] = '\0';
}

void rnnd_strbuf_puts(struct rnnd_strbuf *b, const char *s)
{
        rnnd_strbuf_putn(b, s, strlen(s));
}

void rnnd_strbuf_putc(struct rnnd_strbuf *b, char c)
{
        rnnd_strbuf_putn(b, &c, 1);
}

void rnnd_strbuf_printf(struct rnnd_strbuf *b, const char *fmt, ...)
{
        char small[256];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(small, sizeof(small), fmt, ap);
        va_end(ap);
        if (n < 0)
                return;
        if ((size_t)n < sizeof(small)) {
                rnnd_strbuf_putn(b, small, (size_t)n);
                return;
        }
        /* Too long for the stack: format straight into the buffer. */
        {
                size_t fit = reserve(b, (size_t)n);

                if (b->data == NULL || b->cap == 0)
                        return;
                va_start(ap, fmt);
                vsnprintf(b->data + b->len, fit + 1, fmt, ap);
                va_end(ap);
                b->len += fit;
        }
}

/*
 * Length of the valid UTF-8 sequence at s (1..4), or 0 when it is invalid or
 * longer than the avail bytes there (a NUL-terminated string passes
 * SIZE_MAX: a NUL is no continuation byte, so the look stops at it).
 */
static size_t utf8_len(const unsigned char *s, size_t avail)
{
        unsigned char c = s[0];
        size_t need = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;

        if (need > avail)
                return 0;
        if (c < 0x80)
                return 1;
        if (c >= 0xc2 && c <= 0xdf)
                return (s[1] & 0xc0) == 0x80 ? 2 : 0;
        if (c >= 0xe0 && c <= 0xef) {
                if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80)
                        return 0;
                if (c == 0xe0 && s[1] < 0xa0)
                        return 0; /* overlong */
                if (c == 0xed && s[1] >= 0xa0)
                        return 0; /* surrogate */
                return 3;
        }
        if (c >= 0xf0 && c <= 0xf4) {
                if ((s[1] & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80)
                        return 0;
                if ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))
                        return 0;
                return 4;
        }
        return 0;
}

bool rnnd_utf8_valid(const void *s, size_t n)
{
        const unsigned char *p = s, *end = p + n;

        while (p < end) {
                size_t k = utf8_len(p, (size_t)(end - p));

                if (k == 0)
                        return false;
                p += k;
        }
        return true;
}

void rnnd_strbuf_json_str(struct rnnd_strbuf *b, const char *s)
{
        const unsigned char *p = (const unsigned char *)s;
        const unsigned char *run = p;

        rnnd_strbuf_putc(b, '"');
        while (*p != '\0') {
                size_t n = *p >= 0x20 && *p != '"' && *p != '\\' ? utf8_len(p, SIZE_MAX) : 0;
                char esc[8];

                if (n > 0) {
                        p += n;
                        continue;
                }
                rnnd_strbuf_putn(b, (const char *)run, (size_t)(p - run));
                switch (*p) {
                case '"':
                        rnnd_strbuf_puts(b, "\\\"");
                        break;
                case '\\':
                        rnnd_strbuf_puts(b, "\\\\");
                        break;
                case '\n':
                        rnnd_strbuf_puts(b, "\\n");
                        break;
                case '\r':
                        rnnd_strbuf_puts(b, "\\r");
                        break;
                case '\t':
                        rnnd_strbuf_puts(b, "\\t");
                        break;
                default:
                        if (*p < 0x20) {
                                snprintf(esc, sizeof(esc), "\\u%04x", *p);
                                rnnd_strbuf_puts(b, esc);
                        } else {
                                rnnd_strbuf_puts(b, "\\ufffd");
                        }
                        break;
                }
                p++;
                run = p;
        }
        rnnd_strbuf_putn(b, (const char *)run, (size_t)(p - run));
        rnnd_strbuf_putc(b, '"');
}

void rnnd_strbuf_json_sep(struct rnnd_strbuf *b)
{
        char last;

        if (b->len == 0 || b->data == NULL)
                return;
        last = b->data[b->len - 1];
        if (last != '{' && last != '[' && last != ':')
                rnnd_strbuf_putc(b, ',');
}

void rnnd_strbuf_json_key(struct rnnd_strbuf *b, const char *key)
{
        rnnd_strbuf_json_sep(b);
        rnnd_strbuf_json_str(b, key);
        rnnd_strbuf_putc(b, ':');
}

void rnnd_strbuf_json_kv_str(struct rnnd_strbuf *b, const char *key, const char *v)
{
        rnnd_strbuf_json_key(b, key);
        rnnd_strbuf_json_str(b, v);
}

void rnnd_strbuf_put_u64(struct rnnd_strbuf *b, uint64_t v)
{
        char num[20], *n = num + sizeof(num);

        do
                *--n = (char)('0' + v % 10);
        while ((v /= 10) != 0);
        rnnd_strbuf_putn(b, n, (size_t)(num + sizeof(num) - n));
}

void rnnd_strbuf_json_kv_u64(struct rnnd_strbuf *b, const char *key, uint64_t v)
{
        rnnd_strbuf_json_key(b, key);
        rnnd_strbuf_put_u64(b, v);
}

void rnnd_strbuf_json_kv_i64(struct rnnd_strbuf *b, const char *key, int64_t v)
{
        rnnd_strbuf_json_key(b, key);
        if (v < 0)
                rnnd_strbuf_putc(b, '-');
        rnnd_strbuf_put_u64(b, v < 0 ? -(uint64_t)v : (uint64_t)v);
}

void rnnd_strbuf_json_kv_bool(struct rnnd_strbuf *b, const char *key, bool v)
{
        rnnd_strbuf_json_key(b, key);
        rnnd_strbuf_puts(b, v ? "true" : "false");
}

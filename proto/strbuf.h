/*
 * strbuf.h: a byte buffer that grows (or truncates, over caller memory) and
 * the small JSON writer the daemon builds its responses and log lines with,
 * and the load client its requests.
 *
 * Only proto/ may include jansson.h (DESIGN.md §1), and the JSON written is
 * small and flat, so it is written by hand here.  Appends never fail: running
 * out of memory sets b->oom, and the caller checks it once at the end, the
 * way a stdio stream keeps its error flag.  A buffer belongs to one thread at
 * a time; the functions keep no other state, so they are thread-safe.
 */
#ifndef RNND_PROTO_STRBUF_H
#define RNND_PROTO_STRBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rnnd_strbuf {
        char *data;     /* NUL-terminated while len < cap; may be NULL before the first append */
        size_t len;     /* bytes written, without the NUL */
        size_t cap;     /* bytes allocated (or given) */
        bool fixed;     /* caller memory: truncate instead of growing */
        bool truncated; /* fixed: something did not fit */
        bool oom;       /* growable: an allocation failed; contents are incomplete */
};

/* Initializes an empty growable buffer (no allocation yet). */
void rnnd_strbuf_init(struct rnnd_strbuf *b);

/*
 * Initializes a buffer over mem[0..cap) that never grows: appends that do not
 * fit are cut and set b->truncated; data stays NUL-terminated.  cap >= 1.
 */
void rnnd_strbuf_init_fixed(struct rnnd_strbuf *b, char *mem, size_t cap);

/* Empties b, keeping its memory for the next appends (and clearing oom, truncated). */
void rnnd_strbuf_reset(struct rnnd_strbuf *b);

/* Frees a growable buffer's memory and empties it.  Accepts a fixed one (no-op). */
void rnnd_strbuf_done(struct rnnd_strbuf *b);

/*
 * Returns the growable buffer's memory, a new string the caller frees with
 * rnnd_free(), and leaves b empty; *len (if non-NULL) gets its length.
 * Returns NULL when b->oom is set (and frees what there was).
 */
char *rnnd_strbuf_steal(struct rnnd_strbuf *b, size_t *len);

/*
 * Makes room for n more bytes (and the NUL) at b->data + b->len, so that a
 * caller may format into it and advance b->len itself; returns how many of
 * the n fit (0 after oom; fewer in a fixed buffer, which then is truncated).
 * Also a size hint before a long run of appends.
 */
size_t rnnd_strbuf_reserve(struct rnnd_strbuf *b, size_t n);

void rnnd_strbuf_putn(struct rnnd_strbuf *b, const char *s, size_t n);
void rnnd_strbuf_puts(struct rnnd_strbuf *b, const char *s);
void rnnd_strbuf_putc(struct rnnd_strbuf *b, char c);
void rnnd_strbuf_printf(struct rnnd_strbuf *b, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* Appends v in decimal, as "%" PRIu64 would, without printf's set-up. */
void rnnd_strbuf_put_u64(struct rnnd_strbuf *b, uint64_t v);

/* Whether s[0..n) is valid UTF-8 (no overlong forms, no surrogates). */
bool rnnd_utf8_valid(const void *s, size_t n);

/*
 * Appends s as a JSON string literal, quotes included: '"', '\\' and control
 * characters are escaped, bytes >= 0x80 are copied (the caller passes UTF-8;
 * invalid sequences become U+FFFD so the output is always valid JSON).
 */
void rnnd_strbuf_json_str(struct rnnd_strbuf *b, const char *s);

/* Appends "\"key\":" (the key escaped), preceded by ',' unless the last byte is '{' or '['. */
void rnnd_strbuf_json_key(struct rnnd_strbuf *b, const char *key);

/* Appends ',' unless b is empty or its last byte is '{', '[' or ':'. */
void rnnd_strbuf_json_sep(struct rnnd_strbuf *b);

/* Shorthands for "key":value members (with the separating comma). */
void rnnd_strbuf_json_kv_str(struct rnnd_strbuf *b, const char *key, const char *v);
void rnnd_strbuf_json_kv_u64(struct rnnd_strbuf *b, const char *key, uint64_t v);
void rnnd_strbuf_json_kv_i64(struct rnnd_strbuf *b, const char *key, int64_t v);
void rnnd_strbuf_json_kv_bool(struct rnnd_strbuf *b, const char *key, bool v);

#endif

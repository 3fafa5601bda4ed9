/*
 * infer-skel.c: a KServe request's JSON without its data arrays (infer-int.h;
 * docs/DESIGN.md §5).
 *
 * jansson makes a node (a malloc and a strtod) for every number, which was
 * half the daemon's CPU for an eight-image request.  So the text is first
 * walked once, structurally: the top-level object's "inputs" list, each of
 * its objects' "data" value.  Each such array is cut out (its place in the
 * skeleton is "[]") and its span kept, so that jansson parses only the
 * document's structure and numscan.h reads the numbers straight into the
 * tensor.  The walk checks only what it needs to find the spans (matched
 * brackets, strings, the keys it looks for); everything else it copies
 * for jansson to judge.  Anything it does not expect makes it give up, and
 * the caller parses the whole text as before, so that every error and its
 * message stay as they were.
 */
#include <string.h>

#include "infer-int.h"

struct walk {
        const char *p, *end;
};

static void ws(struct walk *w)
{
        while (w->p < w->end && (*w->p == ' ' || *w->p == '\t' || *w->p == '\n' || *w->p == '\r'))
                w->p++;
}

/* Skips a string at w->p (the opening quote); false when it does not end. */
static bool skip_string(struct walk *w)
{
        for (w->p++; w->p < w->end; w->p++) {
                if (*w->p == '\\') {
                        w->p++;
                        continue;
                }
                if (*w->p == '"') {
                        w->p++;
                        return true;
                }
        }
        return false;
}

/*
 * Skips one value: a string, or anything up to its matching bracket, or a
 * literal or number up to the next delimiter.  Depth is bounded: past
 * RNND__SKEL_MAX_DEPTH the walk gives up (jansson's max_depth judges it).
 */
#define RNND__SKEL_MAX_DEPTH 64

/* The bytes skip_value() stops at inside brackets. */
static const bool structural[256] = {
        ['"'] = true, ['['] = true, [']'] = true, ['{'] = true, ['}'] = true};

static bool skip_value(struct walk *w, unsigned *deepest)
{
        unsigned depth = 0;

        *deepest = 0;
        ws(w);
        if (w->p >= w->end)
                return false;
        do {
                if (w->p >= w->end)
                        return false;
                switch (*w->p) {
                case '"':
                        if (!skip_string(w))
                                return false;
                        break;
                case '[':
                case '{':
                        if (++depth > RNND__SKEL_MAX_DEPTH)
                                return false;
                        if (depth > *deepest)
                                *deepest = depth;
                        w->p++;
                        break;
                case ']':
                case '}':
                        if (depth == 0)
                                return false;
                        depth--;
                        w->p++;
                        break;
                default:
                        if (depth == 0) {
                                /* A literal or a number: up to a delimiter. */
                                while (w->p < w->end && strchr(",]} \t\n\r", *w->p) == NULL)
                                        w->p++;
                                return true;
                        }
                        /* Inside brackets, straight to the next quote or bracket:
                         * a data array is mostly digits and commas. */
                        do
                                w->p++;
                        while (w->p < w->end && !structural[(unsigned char)*w->p]);
                        break;
                }
        } while (depth > 0);
        return true;
}

/* Whether the key string at w->p is exactly key; skips it and the ':' after. */
static bool key_is(struct walk *w, const char *key, bool *ok)
{
        const char *k = w->p + 1;
        size_t n = strlen(key);
        bool is;

        *ok = false;
        if (w->p >= w->end || *w->p != '"' || !skip_string(w))
                return false;
        is = (size_t)(w->p - k) == n + 1 && memcmp(k, key, n) == 0;
        ws(w);
        if (w->p >= w->end || *w->p != ':')
                return false;
        w->p++;
        ws(w);
        *ok = true;
        return is;
}

/* Walks an object at w->p, calling on_key for each key; false when it gives up. */
static bool each_member(struct walk *w, bool (*on_key)(struct walk *w, void *arg), void *arg)
{
        ws(w);
        if (w->p >= w->end || *w->p != '{')
                return false;
        w->p++;
        ws(w);
        if (w->p < w->end && *w->p == '}') {
                w->p++;
                return true;
        }
        for (;;) {
                ws(w);
                if (!on_key(w, arg))
                        return false;
                ws(w);
                if (w->p >= w->end)
                        return false;
                if (*w->p == '}') {
                        w->p++;
                        return true;
                }
                if (*w->p != ',')
                        return false;
                w->p++;
        }
}

struct input_ctx {
        struct rnnd__infer_span *span;
        const char *text;
};

static bool input_key(struct walk *w, void *arg)
{
        struct input_ctx *c = arg;
        const char *start;
        bool ok, is = key_is(w, "data", &ok);
        unsigned deepest;

        if (!ok)
                return false;
        start = w->p;
        if (!skip_value(w, &deepest))
                return false;
        if (is && *start == '[' && c->span->len == 0) {
                c->span->off = (size_t)(start - c->text);
                c->span->len = (size_t)(w->p - start);
                c->span->depth = deepest;
        }
        return true;
}

struct root_ctx {
        struct rnnd__infer_span *spans;
        const char *text;
        bool seen_inputs;
};

static bool root_key(struct walk *w, void *arg)
{
        struct root_ctx *c = arg;
        bool ok, is = key_is(w, "inputs", &ok);
        unsigned i = 0, deepest;

        if (!ok)
                return false;
        if (!is || c->seen_inputs || w->p >= w->end || *w->p != '[')
                return skip_value(w, &deepest);
        c->seen_inputs = true;
        w->p++;
        ws(w);
        if (w->p < w->end && *w->p == ']') {
                w->p++;
                return true;
        }
        for (;; i++) {
                struct input_ctx ic = {.span = &c->spans[i], .text = c->text};

                if (i >= RNND_INFER_MAX_TENSORS || !each_member(w, input_key, &ic))
                        return false;
                ws(w);
                if (w->p >= w->end)
                        return false;
                if (*w->p == ']') {
                        w->p++;
                        return true;
                }
                if (*w->p != ',')
                        return false;
                w->p++;
                ws(w);
        }
}

size_t rnnd__infer_skeleton(const char *text, size_t n, char *skel,
                            struct rnnd__infer_span spans[RNND_INFER_MAX_TENSORS])
{
        struct walk w = {.p = text, .end = text + n};
        struct root_ctx c = {.spans = spans, .text = text};
        size_t at = 0, len = 0, cut = 0;

        memset(spans, 0, RNND_INFER_MAX_TENSORS * sizeof(spans[0]));
        if (!each_member(&w, root_key, &c))
                return 0;
        ws(&w);
        if (w.p != w.end)
                return 0;
        /* The spans are in text order: copy around them. */
        for (unsigned i = 0; i < RNND_INFER_MAX_TENSORS; i++) {
                if (spans[i].len == 0)
                        continue;
                memcpy(skel + len, text + at, spans[i].off - at);
                len += spans[i].off - at;
                memcpy(skel + len, "[]", 2);
                len += 2;
                at = spans[i].off + spans[i].len;
                cut += spans[i].len;
        }
        if (cut == 0)
                return 0; /* nothing to gain */
        memcpy(skel + len, text + at, n - at);
        return len + (n - at);
}

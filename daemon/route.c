/*
 * route.c: matching a request's path against the route table (route.h).
 * Pure: the path is split into segments in the caller's buffer, and each
 * row's pattern is walked segment by segment against them, {model} trying
 * "m/versions/v" before "m".
 */
#include <string.h>

#include "route.h"

#define MAX_SEGMENTS 8

/* One capture: a segment, or its head before a ":verb". */
struct cap {
        char *s; /* NULL: none */
        size_t len;
};

/*
 * Splits path ("/v2/models/m") into its segments, in buf[RNND_ROUTE_PATH_MAX
 * + 1]; false for a path that is empty, too long, has too many segments or
 * an empty one ("//", a trailing '/').
 */
static bool split_path(const char *path, char *buf, char **seg, size_t *ret_n)
{
        size_t n = 0, len = strlen(path);
        char *p;

        if (len == 0 || path[0] != '/' || len > RNND_ROUTE_PATH_MAX)
                return false;
        memcpy(buf, path + 1, len);
        for (p = buf; n < MAX_SEGMENTS;) {
                char *slash = strchr(p, '/');

                seg[n++] = p;
                if (slash == NULL)
                        break;
                *slash = '\0';
                p = slash + 1;
                if (n == MAX_SEGMENTS)
                        return false;
        }
        for (size_t i = 0; i < n; i++)
                if (seg[i][0] == '\0')
                        return false;
        *ret_n = n;
        return true;
}

/* Whether p[0..len) is the whole of s. */
static bool same(const char *s, const char *p, size_t len)
{
        return strlen(s) == len && memcmp(s, p, len) == 0;
}

/*
 * Takes segment s into *c; with verb[0..vlen) (":predict"), only when s ends
 * with it after at least one byte, which the capture leaves out.
 */
static bool take(char *s, const char *verb, size_t vlen, struct cap *c)
{
        size_t n = strlen(s);

        if (verb == NULL) {
                *c = (struct cap){s, n};
                return true;
        }
        if (n <= vlen || memcmp(s + n - vlen, verb, vlen) != 0)
                return false;
        *c = (struct cap){s, n - vlen};
        return true;
}

/* Whether pattern p (from a '/' on) matches seg[i..n), filling caps[0] (name) and caps[1]. */
static bool match_from(const char *p, char **seg, size_t n, size_t i, struct cap caps[2])
{
        const char *end, *verb;
        size_t len, vlen = 0;

        if (*p == '\0')
                return i == n;
        if (*p != '/' || i == n)
                return false;
        p++;
        end = p + strcspn(p, "/");
        verb = memchr(p, ':', (size_t)(end - p));
        len = (size_t)((verb != NULL ? verb : end) - p);
        if (verb != NULL)
                vlen = (size_t)(end - verb);
        if (len == 7 && memcmp(p, "{model}", 7) == 0) {
                if (i + 2 < n && strcmp(seg[i + 1], "versions") == 0 &&
                    take(seg[i], NULL, 0, &caps[0]) && take(seg[i + 2], verb, vlen, &caps[1]) &&
                    match_from(end, seg, n, i + 3, caps))
                        return true;
                caps[1] = (struct cap){NULL, 0};
                return take(seg[i], verb, vlen, &caps[0]) && match_from(end, seg, n, i + 1, caps);
        }
        if (len == 6 && memcmp(p, "{name}", 6) == 0)
                return take(seg[i], NULL, 0, &caps[0]) && match_from(end, seg, n, i + 1, caps);
        return verb == NULL && same(seg[i], p, len) && match_from(end, seg, n, i + 1, caps);
}

/* The capture as a string: the segment ends where the capture does. */
static const char *finish(struct cap *c)
{
        if (c->s == NULL)
                return NULL;
        c->s[c->len] = '\0';
        return c->s;
}

void rnnd_route_match(const struct rnnd_route *table, size_t n, const char *path,
                      const char *method, char *buf, struct rnnd_route_match *ret)
{
        char *seg[MAX_SEGMENTS];
        size_t nseg = 0;

        memset(ret, 0, sizeof(*ret));
        if (!split_path(path, buf, seg, &nseg))
                return;
        for (size_t k = 0; k < n; k++) {
                struct cap caps[2] = {{NULL, 0}, {NULL, 0}};

                if (!match_from(table[k].pattern, seg, nseg, 0, caps))
                        continue;
                ret->route = &table[k];
                ret->name = finish(&caps[0]);
                ret->version = finish(&caps[1]);
                if (table[k].flags & RNND_ROUTE_POST)
                        ret->method_ok = strcmp(method, "POST") == 0;
                else
                        ret->method_ok = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
                return;
        }
}

const char *rnnd_route_allow(const struct rnnd_route *rt)
{
        return rt->flags & RNND_ROUTE_POST ? "POST" : "GET, HEAD";
}

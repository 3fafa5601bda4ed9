/*
 * route.h: what a route of the HTTP API is (docs/DESIGN.md §5): a row of
 * routes.c's table, and what its handler is handed, the request as the
 * routes resolved it.  rnnd_route_match() is the pure function that finds
 * a path's row, tested table by table (tests/unit/test_route.c).
 */
#ifndef RNND_DAEMON_ROUTE_H
#define RNND_DAEMON_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

#include "modelcfg.h"

/* The longest path a route can match; longer paths are no route (404). */
#define RNND_ROUTE_PATH_MAX 1024

/* What a row says of its requests. */
enum {
        RNND_ROUTE_POST = 1u << 0,  /* POST, with a body; else GET and HEAD */
        RNND_ROUTE_MODEL = 1u << 1, /* {model} is pinned and its version resolved at match */
        RNND_ROUTE_INFER = 1u << 2, /* inference: the model's pool hears of the body coming */
        RNND_ROUTE_QUIET = 1u << 3, /* health checks and scrapes: logged at debug */
        RNND_ROUTE_REPO = 1u << 4,  /* repository API: the bearer token and its body cap first */
};

struct rnnd_http_request;
struct rnnd_route_req;

/*
 * One row: a path pattern, its flags and the handler that serves it at the
 * request's final call.  The pattern is literal segments and, as one
 * segment each, {model} (a model's name, optionally followed by
 * /versions/{v}) or {name} (any one segment, checked by the handler); a
 * ":verb" after the last segment (TF Serving's ":predict") must end the
 * path's last segment.  The first row whose pattern matches names the
 * route.
 */
struct rnnd_route {
        const char *pattern; /* "/v2/models/{model}/infer" */
        unsigned flags;      /* RNND_ROUTE_* */
        void (*serve)(struct rnnd_http_request *r, struct rnnd_route_req *q);
};

/*
 * A request as the routes resolved it at its first call: routes.c's own
 * per-request context (the HTTP layer holds it for them, http.h), handed to
 * the row's handler.  Owned by the request's current owner (http.h).
 */
struct rnnd_route_req {
        const struct rnnd_route *route;      /* the row; immutable after match */
        struct rnnd_server *srv;             /* immutable */
        struct rnnd_served_model *model;     /* pinned until done, or NULL */
        struct rnnd_served_version *version; /* resolved in model, or NULL */
        bool version_given;                  /* the path named a version */
        char name[RNND_CFG_NAME_MAX];        /* {model} or {name} as the path gave it, or "" */
        struct rnnd_pool *expecting;         /* told of this request's body, or NULL */
};

/* A path's row and what its pattern captured. */
struct rnnd_route_match {
        const struct rnnd_route *route; /* NULL: no row matches the path */
        bool method_ok;                 /* the method is the row's */
        const char *name;               /* {model} or {name}, in the caller's buf; or NULL */
        const char *version;            /* {model}'s version, in buf; or NULL */
};

/*
 * Matches path (without the query) and method against table[0..n): the
 * first row whose pattern matches, and whether method is one it takes.
 * Captures point into buf[RNND_ROUTE_PATH_MAX + 1].  A path that is empty,
 * longer than RNND_ROUTE_PATH_MAX, or has an empty segment matches no row.
 * Pure: no state, no allocation.  Thread-safe.
 */
void rnnd_route_match(const struct rnnd_route *table, size_t n, const char *path,
                      const char *method, char *buf, struct rnnd_route_match *ret);

/* What the row takes, as an Allow header says it: "POST" or "GET, HEAD".  Static. */
const char *rnnd_route_allow(const struct rnnd_route *rt);

#endif

/*
 * error.h: rnnd's error codes and the one table that maps them to HTTP.
 *
 * A function that can fail returns int: 0 (or a count) on success, a negative
 * RNND_E* on failure.  When the caller needs a message, the last parameter is
 * an rnnd_error_t *reterr, which may be NULL; the caller owns the struct and the
 * error path never allocates (like jansson's json_error_t).
 */
#ifndef RNND_PROTO_ERROR_H
#define RNND_PROTO_ERROR_H

#include <stddef.h>

/*
 * The error table: XX(name, value, http status, gRPC status, short message).
 * This is the only place that maps an error code to an HTTP status (DESIGN.md
 * §5) or to a gRPC status code (§11; gRPC's own numbers: 1 CANCELLED, 3
 * INVALID_ARGUMENT, 4 DEADLINE_EXCEEDED, 5 NOT_FOUND, 8 RESOURCE_EXHAUSTED,
 * 12 UNIMPLEMENTED, 13 INTERNAL, 14 UNAVAILABLE, 16 UNAUTHENTICATED).
 */
#define RNND_ERRNO_MAP(XX)                                                                         \
        XX(EINVAL, -1, 400, 3, "invalid argument")                                                 \
        XX(ENOMEM, -2, 500, 8, "out of memory")                                                    \
        XX(ENOTFOUND, -3, 404, 5, "not found")                                                     \
        XX(EMETHOD, -4, 405, 12, "method not allowed")                                             \
        XX(ELENGTHREQ, -5, 411, 3, "length required")                                              \
        XX(ETOOBIG, -6, 413, 8, "payload too large")                                               \
        XX(EUNAVAIL, -7, 503, 14, "unavailable")                                                   \
        XX(ETIMEDOUT, -8, 503, 4, "timed out")                                                     \
        XX(EIO, -9, 500, 13, "input/output error")                                                 \
        XX(EMODEL, -10, 400, 3, "invalid model")                                                   \
        XX(EUNSUPPORTED, -11, 400, 3, "unsupported")                                               \
        XX(EGPU, -12, 500, 13, "GPU error")                                                        \
        XX(EINTERNAL, -13, 500, 13, "internal error")                                              \
        XX(ECANCELED, -14, 499, 1, "canceled")                                                     \
        XX(ELIMIT, -15, 400, 3, "limit exceeded")                                                  \
        XX(EMEDIATYPE, -16, 415, 12, "unsupported media type")                                     \
        XX(EDEVLOST, -17, 503, 14, "device unavailable")                                           \
        XX(EAUTH, -18, 401, 16, "unauthorized")                                                    \
        XX(ENOTIMPL, -19, 501, 12, "not implemented")                                              \
        XX(EFORBIDDEN, -20, 403, 7, "forbidden")

enum rnnd_errno {
#define RNND_ERRNO_ENUM(name, val, status, grpc, msg) RNND_##name = (val),
        RNND_ERRNO_MAP(RNND_ERRNO_ENUM)
#undef RNND_ERRNO_ENUM
};

typedef struct rnnd_error {
        int code;      /* negative RNND_E*, 0 when no error was set */
        char msg[256]; /* for humans; never secrets */
} rnnd_error_t;

/*
 * Fills *e (if non-NULL) with code and the formatted message, truncating it
 * to fit.  Returns code, so callers can write
 *   return rnnd_error_set(reterr, RNND_EINVAL, "batch %u > max %u", n, max);
 * Never allocates.  Thread-safe.
 */
int rnnd_error_set(rnnd_error_t *e, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/*
 * Prepends "prefix: " to the message already in *e (if non-NULL), keeping its
 * code.  For adding context while propagating: the caller returns the code it
 * already holds, since e may be NULL.  Never allocates.  Thread-safe.
 */
void rnnd_error_prefix(rnnd_error_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The error's name ("EINVAL"), or "EUNKNOWN".  Borrowed, static.  Thread-safe. */
const char *rnnd_strerror_name(int code);

/* A short message for code ("invalid argument").  Borrowed, static.  Thread-safe. */
const char *rnnd_strerror(int code);

/* The HTTP status for code (500 for an unknown code).  Thread-safe. */
int rnnd_error_http_status(int code);

/* The gRPC status code for code (0 OK for 0, 13 INTERNAL for an unknown code).  Thread-safe. */
int rnnd_error_grpc_status(int code);

#endif

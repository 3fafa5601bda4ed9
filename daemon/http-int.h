/*
 * http-int.h: what the HTTP layer's files (http.c, http-conns.c) share: the
 * request's struct and the connection table.  Private to them: the routes
 * and the hook see a request through http.h.
 */
#ifndef RNND_DAEMON_HTTP_INT_H
#define RNND_DAEMON_HTTP_INT_H

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "http.h"
#include "inflate.h"

#if MHD_VERSION < 0x00097002
#error "libmicrohttpd 0.9.71 or later is needed (enum MHD_Result)"
#endif

/* The connection table (http-conns.c): set up by rnnd_http_start, freed by rnnd_http_stop. */
int rnnd__http_conns_init(struct rnnd_http *h, size_t cap);
void rnnd__http_conns_done(struct rnnd_http *h);
/*
 * Connections MHD holds (notified open, not yet closed), and those the
 * accept thread handed it that it has not yet notified.  Thread-safe.
 */
size_t rnnd__http_conns_open(struct rnnd_http *h);
/* The accept thread handed MHD a connection (MHD_add_connection() took it).  Thread-safe. */
void rnnd__http_conns_handed(struct rnnd_http *h);
/*
 * The listening socket (http-listen.c): open takes systemd's fd (>= 0) or
 * binds host:port itself, and sets h->listen_fd; start begins accepting on
 * a thread of its own, handing connections to h->mhd; stop ends that
 * thread (the socket stays open); close stops and closes.  Errors:
 * RNND_EINVAL, RNND_EIO, RNND_ENOMEM.  Loop or main thread.
 */
int rnnd__http_listen_open(struct rnnd_http *h, int fd, const char *host, unsigned port,
                           rnnd_error_t *reterr);
int rnnd__http_listen_start(struct rnnd_http *h, rnnd_error_t *reterr);
void rnnd__http_listen_stop(struct rnnd_http *h);
void rnnd__http_listen_close(struct rnnd_http *h);
/* The port the socket is bound to, or 0.  Thread-safe. */
unsigned rnnd__http_listen_port(const struct rnnd_http *h);

/* MHD_OPTION_NOTIFY_CONNECTION's callback; cls is the struct rnnd_http. */
void rnnd__http_conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                            enum MHD_ConnectionNotificationCode toe);
/*
 * r's connection enters (true, at the first handler call: its body, if any,
 * arriving) or leaves a request.
 */
void rnnd__http_conn_busy(struct rnnd_http_request *r, bool busy);
/*
 * MHD_OPTION_URI_LOG_CALLBACK's part: remembers the URI of the request line
 * conn's MHD thread just read, before libmicrohttpd unescapes it in place,
 * and its length then; rnnd__http_conn_uri_of() gives them back for r at its
 * first handler call (NULL when unknown).  The connection's MHD thread.
 */
void rnnd__http_conn_uri(struct rnnd_http *h, struct MHD_Connection *conn, const char *uri);
const char *rnnd__http_conn_uri_of(struct rnnd_http_request *r, size_t *len);
/*
 * A request head libmicrohttpd refuses itself before the handler sees it,
 * answered by rnnd instead (issue 29: 0.9.75 writes its own answer's
 * header block twice).  Among the connections of the calling MHD thread
 * whose request line was read and whose handler was not yet called, finds
 * those is_it(conn, cls) names; when it is exactly one, answer(fd, uri,
 * cls) writes to its socket (uri: the request line's, NULL if not seen),
 * which is then shut down (MHD's own answer fails to go out, and MHD closes
 * it), and returns true.  The MHD thread, from MHD's error log callback,
 * while MHD handles that connection.
 */
bool rnnd__http_conn_refuse_head(struct rnnd_http *h,
                                 bool (*is_it)(struct MHD_Connection *conn, void *cls),
                                 void (*answer)(int fd, const char *uri, void *cls), void *cls);
/* r's body is in (the final handler call): the request no longer waits on its client. */
void rnnd__http_conn_received(struct rnnd_http_request *r);

struct rnnd_http_request {
        struct rnnd_http *http;       /* immutable */
        struct rnnd_server *srv;      /* = http->app; immutable */
        struct MHD_Connection *conn;  /* immutable; not used after completion */
        atomic_int refs;              /* atomic */
        char id[RNND_REQ_ID_MAX + 1]; /* immutable after the first call */
        char method[16];              /* immutable after the first call */
        char *path;                   /* owned; immutable after the first call */
        uint64_t t0_ns;               /* CLOCK_MONOTONIC at the first call; immutable */
        enum rnnd_encoding accept;    /* Accept-Encoding's choice; immutable after the first call */

        /* The body: MHD thread only, until dispatched. */
        char *body;    /* NUL-terminated after len */
        size_t len;    /* bytes received */
        size_t cap;    /* bytes allocated */
        bool too_big;  /* the body passed max_body_bytes (or memory); answered 413 at the end */
        bool body_oom; /* too_big because memory ran out */

        /* Answering: owned by whoever owns the request (see http.h). */
        struct MHD_Response *resp; /* prepared, not yet queued */
        unsigned resp_status;      /* of resp */
        unsigned status;           /* what was queued; 0 before */
        bool early;                /* answered at the first call (404, 405, 413) */
        bool dispatched;           /* the final call ran (route served or hook called) */
        bool suspended;            /* suspended by the hook and not yet handled again */
        bool dropped;              /* a 499: the connection closed instead (http.c queue()) */
        size_t resp_bytes;         /* of resp's body, for the access line */
        char reason[200];          /* a 4xx/5xx's error message, for the access line */
        char log_model[128];       /* the model it reached (a name of 1..127 bytes), or "" */
        uint64_t log_version;      /* and its version, or 0 */
        void (*prepare)(struct rnnd_http_request *r); /* set by rnnd_http_resume_to_prepare() */

        void *data;                /* the hook's state */
        void (*data_free)(void *); /* frees data */

        /* The route handler's own context, ctx_size bytes (http.h); owned by the routes. */
        _Alignas(max_align_t) unsigned char route_ctx[];
};

#endif

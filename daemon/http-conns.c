/*
 * http-conns.c: the connections libmicrohttpd holds, and closing the ones a
 * client should no longer hold (http-int.h; docs/OPERATIONS.md "Limits").
 *
 * libmicrohttpd 0.9.75 closes a connection only after connection_timeout
 * without a byte, so a client that trickles header bytes keeps one for
 * ever, idle keep-alive sockets shut new clients out until they time out,
 * and in its epoll mode a connection whose client closed it before sending a
 * whole request stays in CLOSE-WAIT until the timeout too (issue 18 items 4
 * and 5).  So rnnd keeps its own table of the connections (MHD's
 * connection-notify callback) and of whether each is inside a request (from
 * the first handler call to completion), and the loop thread looks at it
 * every RNND_HTTP_REAP_MS (rnnd_http_reap) and shuts down, which makes MHD
 * close them:
 *   - a connection not inside a request for header_timeout: a request head
 *     that does not complete in time (slowloris, half a request line), or a
 *     keep-alive connection idle that long;
 *   - one its client has closed (a read would see the end of the stream);
 *   - one inside a request whose body is still arriving when its client
 *     has closed: libmicrohttpd 0.9.75 never looks at the end of the
 *     stream in that state, so the request stayed in flight (and the
 *     socket in CLOSE-WAIT) until connection_timeout (issue 29).  Seen on
 *     two passes in a row, so that a body whose last bytes MHD has read
 *     but not yet handed over is not taken for half of one;
 *   - when the table is 7/8 full, the longest idle ones down to 3/4, so
 *     that new clients find room.
 * A slot's fd is only shut down under the table's lock, and MHD reports a
 * connection closed (taking the lock) before it closes its fd, so a shut
 * down fd is never one MHD reused.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "alloc.h"
#include "clock.h"
#include "http-int.h"
#include "log.h"

struct rnnd_conn {
        unsigned char addr[16];  /* the client's address: 4 bytes (IPv4) or 16; guarded by mu */
        unsigned char alen;      /* 0: unknown (a Unix socket); guarded by mu */
        int fd;                  /* -1: a free slot; guarded by mu */
        bool doomed;             /* shut down, waiting for MHD to close it; guarded by mu */
        atomic_bool busy;        /* inside a request */
        atomic_bool receiving;   /* inside a request whose body is still arriving */
        unsigned char gone_seen; /* reaps that saw a receiving one's client gone; guarded by mu */
        struct MHD_Connection *conn; /* immutable while fd >= 0 */
        pthread_t thread;            /* the MHD thread that read its request line; guarded by mu */
        atomic_bool head_pending;    /* a request line read, the handler not yet called */
        const char *uri; /* its request line's URI as MHD logged it; its MHD thread, under mu */
        size_t uri_len;  /* its strlen() then; the same */
        _Atomic uint64_t since; /* rnnd_now_ns() when it opened or its last request ended */
};

struct rnnd_conns {
        pthread_mutex_t mu;
        struct rnnd_conn *slot; /* [cap] */
        size_t cap;
        size_t open;          /* slots in use; guarded by mu */
        size_t next;          /* where the next free slot is looked for first; guarded by mu */
        atomic_size_t handed; /* handed to MHD by the accept thread, not yet notified open */
        unsigned refused;     /* past per_address_limit since the last reap; guarded by mu */
};

int rnnd__http_conns_init(struct rnnd_http *h, size_t cap)
{
        struct rnnd_conns *c = rnnd_calloc(1, sizeof(*c));

        if (c == NULL)
                return RNND_ENOMEM;
        c->slot = rnnd_calloc(cap, sizeof(c->slot[0]));
        if (c->slot == NULL) {
                rnnd_free(c);
                return RNND_ENOMEM;
        }
        for (size_t i = 0; i < cap; i++)
                c->slot[i].fd = -1;
        c->cap = cap;
        pthread_mutex_init(&c->mu, NULL);
        h->conns = c;
        return 0;
}

size_t rnnd__http_conns_open(struct rnnd_http *h)
{
        struct rnnd_conns *c = h->conns;
        size_t n;

        if (c == NULL)
                return 0;
        pthread_mutex_lock(&c->mu);
        n = c->open;
        pthread_mutex_unlock(&c->mu);
        return n + atomic_load(&c->handed);
}

void rnnd__http_conns_handed(struct rnnd_http *h)
{
        if (h->conns != NULL)
                atomic_fetch_add(&h->conns->handed, 1);
}

void rnnd__http_conns_done(struct rnnd_http *h)
{
        struct rnnd_conns *c = h->conns;

        if (c == NULL)
                return;
        pthread_mutex_destroy(&c->mu);
        rnnd_free(c->slot);
        rnnd_free(c);
        h->conns = NULL;
}

/* The client address of conn into s. */
static void take_address(struct MHD_Connection *conn, struct rnnd_conn *s)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci != NULL ? ci->client_addr : NULL;

        s->alen = 0;
        if (sa != NULL && sa->sa_family == AF_INET) {
                memcpy(s->addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
                s->alen = 4;
        } else if (sa != NULL && sa->sa_family == AF_INET6) {
                memcpy(s->addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
                s->alen = 16;
        }
}

/* Whether the client closed its side: no byte waits and the stream has ended. */
static bool client_gone(int fd)
{
        char b;
        ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/*
 * Whether s's address holds more than per_address_limit connections with s:
 * libmicrohttpd's own per-IP limit is kept per thread of its pool, so it
 * lets through up to threads times the limit.  Under mu.
 */
static bool over_address_limit(struct rnnd_conns *c, const struct rnnd_conn *s, unsigned limit)
{
        unsigned n = 0;

        if (s->alen == 0)
                return false;
        for (size_t i = 0; i < c->cap; i++) {
                struct rnnd_conn *o = &c->slot[i];

                if (o->fd < 0 || o->doomed || o->alen != s->alen ||
                    memcmp(o->addr, s->addr, s->alen) != 0)
                        continue;
                /* One its client closed, which MHD has not reaped yet, does not count. */
                if (o != s && !atomic_load(&o->busy) && client_gone(o->fd)) {
                        shutdown(o->fd, SHUT_RDWR);
                        o->doomed = true;
                        continue;
                }
                if (++n > limit)
                        return true;
        }
        return false;
}

void rnnd__http_conn_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                            enum MHD_ConnectionNotificationCode toe)
{
        struct rnnd_http *h = cls;
        struct rnnd_conns *c = h->conns;
        struct rnnd_conn *s = *socket_context;
        const union MHD_ConnectionInfo *ci;

        if (c == NULL)
                return;
        pthread_mutex_lock(&c->mu);
        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                size_t n = atomic_load(&c->handed);

                /* The accept thread's count of those on their way to MHD (at least 0). */
                while (n > 0 && !atomic_compare_exchange_weak(&c->handed, &n, n - 1))
                        ;
        }
        if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
                if (s != NULL) {
                        s->fd = -1;
                        s->doomed = false;
                        c->open--;
                }
        } else if ((ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD)) !=
                   NULL) {
                for (size_t k = 0; k < c->cap && s == NULL; k++) {
                        size_t i = (c->next + k) % c->cap;

                        if (c->slot[i].fd < 0)
                                s = &c->slot[i];
                }
                if (s != NULL) {
                        s->fd = ci->connect_fd;
                        s->conn = conn;
                        atomic_store(&s->head_pending, false);
                        s->uri = NULL;
                        s->doomed = false;
                        s->gone_seen = 0;
                        atomic_store(&s->busy, false);
                        atomic_store(&s->receiving, false);
                        atomic_store(&s->since, rnnd_now_ns());
                        c->next = (size_t)(s - c->slot) + 1;
                        c->open++;
                        take_address(conn, s);
                        if (over_address_limit(c, s, rnnd_options_per_address_limit(*h->opts))) {
                                shutdown(s->fd, SHUT_RDWR); /* MHD closes it at once */
                                s->doomed = true;
                                c->refused++;
                        }
                }
        }
        pthread_mutex_unlock(&c->mu);
        *socket_context = toe == MHD_CONNECTION_NOTIFY_CLOSED ? NULL : s;
}

/* The slot of r's connection, or NULL (a table full, which MHD's own limit prevents). */
static struct rnnd_conn *slot_of(struct rnnd_http_request *r)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return ci != NULL ? ci->socket_context : NULL;
}

void rnnd__http_conn_busy(struct rnnd_http_request *r, bool busy)
{
        struct rnnd_conn *s = slot_of(r);

        if (s == NULL)
                return;
        if (!busy)
                atomic_store(&s->since, rnnd_now_ns());
        else
                atomic_store(&s->head_pending, false);
        atomic_store(&s->receiving, busy);
        atomic_store(&s->busy, busy);
}

void rnnd__http_conn_received(struct rnnd_http_request *r)
{
        struct rnnd_conn *s = slot_of(r);

        if (s != NULL)
                atomic_store(&s->receiving, false);
}

void rnnd__http_conn_uri(struct rnnd_http *h, struct MHD_Connection *conn, const char *uri)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        struct rnnd_conn *s = ci != NULL ? ci->socket_context : NULL;

        if (s == NULL || h->conns == NULL)
                return;
        pthread_mutex_lock(&h->conns->mu);
        s->uri = uri;
        s->uri_len = uri != NULL ? strlen(uri) : 0;
        s->thread = pthread_self();
        atomic_store(&s->head_pending, true);
        pthread_mutex_unlock(&h->conns->mu);
}

bool rnnd__http_conn_refuse_head(struct rnnd_http *h,
                                 bool (*is_it)(struct MHD_Connection *conn, void *cls),
                                 void (*answer)(int fd, const char *uri, void *cls), void *cls)
{
        struct rnnd_conns *c = h->conns;
        struct rnnd_conn *found = NULL;
        unsigned n = 0;

        if (c == NULL)
                return false;
        pthread_mutex_lock(&c->mu);
        for (size_t i = 0; i < c->cap; i++) {
                struct rnnd_conn *s = &c->slot[i];

                if (s->fd >= 0 && !s->doomed && atomic_load(&s->head_pending) &&
                    pthread_equal(s->thread, pthread_self()) && is_it(s->conn, cls)) {
                        found = s;
                        n++;
                }
        }
        if (n == 1) {
                answer(found->fd, found->uri, cls);
                shutdown(found->fd, SHUT_RDWR); /* what MHD would send next fails: it closes */
                found->doomed = true;
        }
        pthread_mutex_unlock(&c->mu);
        return n == 1;
}

const char *rnnd__http_conn_uri_of(struct rnnd_http_request *r, size_t *len)
{
        struct rnnd_conn *s = slot_of(r);

        if (s == NULL || s->uri == NULL)
                return NULL;
        *len = s->uri_len;
        return s->uri;
}

/*
 * How long s has been outside a request at now; 0 when its time is later
 * than now (set by another thread after now was read).
 */
static uint64_t idle_ns(const struct rnnd_conn *s, uint64_t now)
{
        uint64_t since = atomic_load(&s->since);

        return since < now ? now - since : 0;
}

static void doom(struct rnnd_conn *s, unsigned *count)
{
        shutdown(s->fd, SHUT_RDWR);
        s->doomed = true;
        (*count)++;
}

static int older(const void *a, const void *b)
{
        const struct rnnd_conn *x = *(struct rnnd_conn *const *)a;
        const struct rnnd_conn *y = *(struct rnnd_conn *const *)b;
        uint64_t sx = atomic_load(&x->since), sy = atomic_load(&y->since);

        return sx < sy ? -1 : sx > sy;
}

/* A connection idle for less than this is not taken to make room: its request may be on the way. */
#define ROOM_MIN_IDLE_NS UINT64_C(1000000000)

/* When the table is 7/8 full, shuts down the longest idle connections down to 3/4. */
static void make_room(struct rnnd_conns *c, size_t limit, uint64_t now,
                      struct rnnd_http_reaped *ret)
{
        size_t live = c->open - ret->slow - ret->gone, n = 0, want;
        struct rnnd_conn **idle;

        if (live * 8 < limit * 7)
                return;
        idle = rnnd_mallocarray(c->cap, sizeof(idle[0]));
        if (idle == NULL)
                return;
        for (size_t i = 0; i < c->cap; i++)
                if (c->slot[i].fd >= 0 && !c->slot[i].doomed && !atomic_load(&c->slot[i].busy) &&
                    idle_ns(&c->slot[i], now) >= ROOM_MIN_IDLE_NS)
                        idle[n++] = &c->slot[i];
        qsort(idle, n, sizeof(idle[0]), older);
        want = live - limit * 3 / 4;
        for (size_t i = 0; i < n && i < want; i++)
                doom(idle[i], &ret->idle);
        rnnd_free(idle);
}

void rnnd_http_reap(struct rnnd_http *h, struct rnnd_http_reaped *ret)
{
        const struct rnnd_options *o = *h->opts;
        struct rnnd_conns *c = h->conns;
        uint64_t now = rnnd_now_ns(), deadline = o->header_timeout * UINT64_C(1000000000);

        memset(ret, 0, sizeof(*ret));
        if (c == NULL)
                return;
        pthread_mutex_lock(&c->mu);
        for (size_t i = 0; i < c->cap; i++) {
                struct rnnd_conn *s = &c->slot[i];

                if (s->fd < 0 || s->doomed)
                        continue;
                if (atomic_load(&s->busy)) {
                        /* Half a body, then the end of the stream: the request cannot finish. */
                        s->gone_seen = atomic_load(&s->receiving) && client_gone(s->fd)
                                               ? s->gone_seen + 1
                                               : 0;
                        if (s->gone_seen >= 2)
                                doom(s, &ret->gone);
                        continue;
                }
                if (deadline > 0 && idle_ns(s, now) > deadline)
                        doom(s, &ret->slow);
                else if (client_gone(s->fd))
                        doom(s, &ret->gone);
        }
        make_room(c, (size_t)o->connection_limit, now, ret);
        ret->refused = c->refused;
        c->refused = 0;
        ret->open = c->open;
        pthread_mutex_unlock(&c->mu);
}

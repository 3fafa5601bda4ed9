/*
 * grpc.c: the gRPC front end's transport (grpc.h): HTTP/2 by nghttp2 on
 * libuv loops, gRPC's message framing, deadlines and limits.
 *
 * DESIGN (docs/DESIGN.md §11)
 * There are grpc_threads loops (struct rnnd_grpc_loop): the daemon's, which
 * also accepts, and one of its own for each further thread.  The daemon's
 * loop checks a new connection against the limits over every loop's (one
 * list under conns_mu) and hands its socket to the loop with the fewest;
 * that loop's thread does everything else for the connection and its calls
 * ("the loop thread" below).  A connection is a uv_tcp_t and
 * an nghttp2 server session: what the socket reads goes to
 * nghttp2_session_mem_recv(), whose callbacks make calls (one per stream),
 * gather each call's DATA into its input buffer and cut gRPC messages out
 * of it (5-byte prefix: a compressed flag and a big-endian length), handing
 * each whole one to the method (decompressed first when its flag says so,
 * by the call's grpc-encoding, gzip or deflate, within
 * grpc_max_message_bytes).  Answers are queued on the call as slots,
 * in request order; nghttp2 pulls them through the call's data source
 * (NGHTTP2_DATA_FLAG_NO_COPY: send_data() copies a message's bytes straight
 * into the connection's write buffer), then the trailers (grpc-status,
 * grpc-message).  nghttp2_session_send() must not run inside nghttp2's own
 * callbacks, so sends made there only mark the connection, which is flushed
 * when mem_recv() returns; the answers posted from the workers (below) are
 * written likewise, each connection once after the last of a wake's posts.
 *
 * Flow control: windows are not updated automatically.  The connection's
 * is credited as bytes arrive; a stream's only when the message they belong
 * to is handed on, so a stream holds at most one window of unhandled bytes
 * (grpc_max_message_bytes) and a streaming call whose answers lag (64 wait)
 * stops its client.  A connection holding more than two windows of
 * unhandled bytes over its streams fails the stream that passes it.
 *
 * Other threads (pool workers, the daemon's loop) reach a call only through
 * post(): a node on its loop's list under mu and its loop's uv_async_t,
 * whose callback runs the function there.  Calls are freed on their loop
 * thread (their last reference goes there), except after stop, when posts
 * run on the posting thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <netdb.h>
#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "grpc.h"
#include "http.h"
#include "inflate.h"
#include "log.h"
#include "strbuf.h"

/* Answers of one streaming call that may wait to be sent before its client must wait. */
#define STREAM_MAX_WAITING 64
/* The write buffer's size past which nghttp2 is told to wait, and reading stops. */
#define WBUF_MAX (256u * 1024u)
/* PING and SETTINGS frames a connection may send in a second without DATA. */
#define CTRL_FRAMES_PER_S 1000u
/* How often connections are looked at (idle, stalled, half-open). */
#define SWEEP_MS 250
/* How often deadlines are looked at while a call has one. */
#define DEADLINE_MS 5

struct rnnd_grpc_slot {
        struct rnnd_grpc_slot *next;
        uint8_t *buf; /* 5-byte prefix then the message; owned; NULL for nothing */
        size_t len;   /* with the prefix */
        bool filled;
};

struct buf {
        uint8_t *data;
        size_t len, cap;
};

/*
 * A loop that carries connections: loops[0] is the daemon's, the others a
 * thread's own.  Everything here is its thread's but what mu guards and
 * n_conns.
 */
struct rnnd_grpc_loop {
        struct rnnd_grpc *g;
        uv_loop_t *loop; /* g->loop for loops[0], else &own */
        uv_loop_t own;
        pthread_t thread; /* runs own, for index > 0 */
        unsigned index;
        uv_timer_t tick;                    /* deadlines, idle and stalled connections */
        uv_async_t wake;                    /* posts, connections handed over, quiesce and stop */
        pthread_mutex_t mu;                 /* guards the next five; wake is sent under it */
        struct rnnd_grpc_post *posts;       /* from other threads */
        struct rnnd_grpc_post **posts_tail; /* their end */
        struct rnnd_grpc_conn *incoming;    /* accepted on the daemon's loop, not yet started */
        bool closed;                        /* wake is closed: posts run where they are made */
        bool quiesce_asked, stop_asked;     /* by the daemon's loop */
        struct rnnd_grpc_conn *conns;       /* its open connections */
        struct rnnd_grpc_call *deadlines;   /* its calls with one (a reference each) */
        uint64_t swept_ms;                  /* uv_now of the last connection sweep */
        bool deferring;                     /* in run_posts() */
        struct rnnd_grpc_conn *pending;     /* the conns run_posts() touched */
        atomic_uint n_conns;                /* atomic: its connections, started or handed over */
};

/* The loop whose thread this is, or NULL: rnnd_grpc_call_here(). */
static _Thread_local const struct rnnd_grpc_loop *here;

struct rnnd_grpc_conn {
        uv_tcp_t tcp; /* first: the handle's data is the connection */
        struct rnnd_grpc *g;
        struct rnnd_grpc_loop *l;                   /* the loop that carries it */
        struct rnnd_grpc_conn *prev, *next;         /* in l->conns */
        struct rnnd_grpc_conn *all_prev, *all_next; /* in g->all (conns_mu) */
        struct rnnd_grpc_conn *in_next;             /* in l->incoming */
        int fd;                                     /* the socket until the loop opens it */
        nghttp2_session *s;
        struct rnnd_grpc_call *calls; /* its calls not yet freed, over or not */
        unsigned n_calls;             /* how many */
        uint8_t *rbuf;                /* what uv reads into */
        struct buf w;                 /* frames waiting to be written */
        uint8_t *wdata;               /* the buffer uv_write is writing; owned */
        uv_write_t wreq;
        bool writing, busy, dirty, closing;
        bool pending;                     /* on l->pending (run_posts() writes it) */
        struct rnnd_grpc_conn *pend_next; /* there */
        uint64_t last_read_ms, last_sent_ms;
        unsigned ctrl_frames;   /* PING and SETTINGS since ctrl_since_ms without DATA */
        uint64_t ctrl_since_ms; /* uv_now */
        size_t buffered;        /* bytes in its calls' input buffers */
        char peer[64];
        struct sockaddr_storage addr; /* the client's, for per_address_limit */
        int alen;                     /* 0: unknown */
};

struct rnnd_grpc_call {
        atomic_int refs;
        struct rnnd_grpc *g;
        struct rnnd_grpc_loop *l;           /* its connection's */
        struct rnnd_grpc_conn *conn;        /* NULL once the stream is over */
        struct rnnd_grpc_conn *counted;     /* the conn whose calls list holds it, or NULL */
        struct rnnd_grpc_call *prev, *next; /* in counted->calls */
        struct rnnd_grpc_call *dl_next;     /* in the deadline list */
        int32_t stream_id;
        const struct rnnd_grpc_method *method;
        char path[128];
        char id[RNND_REQ_ID_MAX + 1];
        char *auth;                  /* the authorization header, or NULL; owned */
        enum rnnd_encoding encoding; /* grpc-encoding: its compressed messages' */
        char encoding_name[24];      /* as sent (cut), for messages */
        bool post_method, grpc_type, bad_header, timeout_bad, started, ended_in, dropping;
        bool on_deadlines, expired, over, pumping;
        size_t header_bytes;
        struct buf in; /* request bytes not yet handed on */
        unsigned n_msgs;
        struct rnnd_grpc_slot *out_head, *out_tail;
        size_t out_off;      /* bytes of out_head already sent */
        unsigned n_unsent;   /* slots not yet sent */
        unsigned n_unfilled; /* slots whose answer is not in yet */
        bool any_slot, response_started, finished, trailers_sent;
        int status;
        char message[256];
        uint64_t t0_ns, deadline_ns, timeout_us;
        uint64_t last_in_ms;
        atomic_bool alive;
        void *data;
        void (*data_free)(void *data);
        char log_model[128];
        uint64_t log_version;
        size_t bytes_out;
};

static void conn_flush(struct rnnd_grpc_conn *conn);
static void conn_close(struct rnnd_grpc_conn *conn);
static void pump(struct rnnd_grpc_call *c);
static void check_ended(struct rnnd_grpc_call *c);
static void tick_cb(uv_timer_t *t);

/* Buffers. */

static bool buf_append(struct buf *b, const void *p, size_t n)
{
        if (n > b->cap - b->len) {
                size_t cap = b->cap > 0 ? b->cap : 4096;
                uint8_t *d;

                while (cap - b->len < n)
                        cap *= 2;
                d = rnnd_realloc(b->data, cap);
                if (d == NULL)
                        return false;
                b->data = d;
                b->cap = cap;
        }
        memcpy(b->data + b->len, p, n);
        b->len += n;
        return true;
}

/* Calls: references and accessors. */

/* An answer's bytes enter (add) or leave the server's count against max_response_memory. */
static void count_held(const struct rnnd_grpc_call *c, size_t n, bool add)
{
        if (c->g->answer_bytes == NULL || n == 0)
                return;
        if (add)
                atomic_fetch_add_explicit(c->g->answer_bytes, n, memory_order_relaxed);
        else
                atomic_fetch_sub_explicit(c->g->answer_bytes, n, memory_order_relaxed);
}

static void slots_free(struct rnnd_grpc_call *c)
{
        struct rnnd_grpc_slot *s, *next;

        for (s = c->out_head; s != NULL; s = next) {
                next = s->next;
                if (s->buf != NULL)
                        count_held(c, s->len, false);
                rnnd_free(s->buf);
                rnnd_free(s);
        }
        c->out_head = c->out_tail = NULL;
}

struct rnnd_grpc_call *rnnd_grpc_call_ref(struct rnnd_grpc_call *c)
{
        atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
        return c;
}

struct rnnd_grpc_call *rnnd_grpc_call_unref(struct rnnd_grpc_call *c)
{
        if (c == NULL || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1)
                return NULL;
        if (c->counted != NULL) { /* the loop thread: its connection is there */
                if (c->prev != NULL)
                        c->prev->next = c->next;
                else
                        c->counted->calls = c->next;
                if (c->next != NULL)
                        c->next->prev = c->prev;
                c->counted->n_calls--;
        }
        if (c->data_free != NULL)
                c->data_free(c->data);
        slots_free(c);
        rnnd_free(c->in.data);
        rnnd_free(c->auth);
        rnnd_free(c);
        return NULL;
}

struct rnnd_server *rnnd_grpc_call_server(const struct rnnd_grpc_call *c)
{
        return c->g->app;
}

const char *rnnd_grpc_call_id(const struct rnnd_grpc_call *c)
{
        return c->id;
}

const struct rnnd_grpc_method *rnnd_grpc_call_method(const struct rnnd_grpc_call *c)
{
        return c->method;
}

const char *rnnd_grpc_call_header(const struct rnnd_grpc_call *c, const char *name)
{
        return strcmp(name, "authorization") == 0 ? c->auth : NULL;
}

uint64_t rnnd_grpc_call_timeout_us(const struct rnnd_grpc_call *c)
{
        uint64_t now = rnnd_now_ns();

        if (c->deadline_ns == 0)
                return 0;
        return c->deadline_ns > now + 1000 ? (c->deadline_ns - now) / 1000 : 1;
}

bool rnnd_grpc_call_alive(const struct rnnd_grpc_call *c)
{
        return atomic_load_explicit(&c->alive, memory_order_relaxed);
}

bool rnnd_grpc_call_open(const struct rnnd_grpc_call *c)
{
        return c->conn != NULL && !c->finished;
}

bool rnnd_grpc_call_here(const struct rnnd_grpc_call *c)
{
        return c->l == here;
}

void rnnd_grpc_call_set_data(struct rnnd_grpc_call *c, void *data, void (*free_fn)(void *data))
{
        if (c->data_free != NULL && c->data != data)
                c->data_free(c->data);
        c->data = data;
        c->data_free = free_fn;
}

void *rnnd_grpc_call_data(const struct rnnd_grpc_call *c)
{
        return c->data;
}

/* s (NULL: "") into dst[n], cut to fit: snprintf("%s")'s result without its set-up, which a
 * call would pay several times (docs/DESIGN.md §11). */
static void copy_str(char *dst, size_t n, const char *s)
{
        size_t k = s != NULL ? strnlen(s, n - 1) : 0;

        memcpy(dst, s != NULL ? s : "", k);
        dst[k] = '\0';
}

void rnnd_grpc_call_log_model(struct rnnd_grpc_call *c, const char *model, uint64_t version)
{
        copy_str(c->log_model, sizeof(c->log_model), model);
        c->log_version = version;
}

/* Answers. */

/* Sends now, or once nghttp2's callbacks or run_posts() have returned. */
static void conn_touch(struct rnnd_grpc_conn *conn)
{
        if (conn == NULL)
                return;
        conn->dirty = true;
        if (conn->l->deferring && !conn->pending) {
                conn->pending = true;
                conn->pend_next = conn->l->pending;
                conn->l->pending = conn;
        } else if (!conn->busy && !conn->l->deferring) {
                conn_flush(conn);
        }
}

/* Bytes of filled slots at the head, not yet sent. */
static size_t ready_bytes(const struct rnnd_grpc_call *c)
{
        size_t n = 0;

        for (const struct rnnd_grpc_slot *s = c->out_head; s != NULL && s->filled; s = s->next)
                n += s->len;
        return n - c->out_off;
}

/* grpc-message: printable ASCII but '%' as is, the rest %XX (gRPC's encoding). */
static void percent_encode(const char *s, char *dst, size_t cap)
{
        static const char hex[] = "0123456789ABCDEF";
        size_t o = 0;

        for (; *s != '\0' && o + 4 < cap; s++) {
                unsigned char ch = (unsigned char)*s;

                if (ch >= 0x20 && ch <= 0x7e && ch != '%') {
                        dst[o++] = (char)ch;
                } else {
                        dst[o++] = '%';
                        dst[o++] = hex[ch >> 4];
                        dst[o++] = hex[ch & 15];
                }
        }
        dst[o] = '\0';
}

#define NV(n, v)                                                                                   \
        {                                                                                          \
                (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v),                          \
                        NGHTTP2_NV_FLAG_NO_COPY_NAME                                               \
        }

/* The trailers (or, with no answer sent, the trailers-only response). */
static int submit_trailers(struct rnnd_grpc_call *c, bool only)
{
        unsigned code = c->status >= 0 && c->status < 100 ? (unsigned)c->status : 2; /* UNKNOWN */
        char status[3] = {(char)('0' + code / 10), (char)('0' + code % 10), '\0'};
        size_t n = c->message[0] != '\0' ? 5 : 4;
        char msg[3 * sizeof(c->message)];

        if (code < 10)
                status[0] = status[1], status[1] = '\0';
        percent_encode(c->message, msg, sizeof(msg));
        c->trailers_sent = true;
        {
                nghttp2_nv nv[] = {NV(":status", "200"), NV("content-type", "application/grpc"),
                                   NV("grpc-accept-encoding", RNND_ENCODINGS_ACCEPTED),
                                   NV("grpc-status", status), NV("grpc-message", msg)};

                if (only)
                        return nghttp2_submit_response(c->conn->s, c->stream_id, nv, n, NULL);
                return nghttp2_submit_trailer(c->conn->s, c->stream_id, nv + 3, n - 3);
        }
}

static ssize_t data_read(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *user)
{
        struct rnnd_grpc_call *c = src->ptr;
        size_t n = ready_bytes(c);

        (void)s, (void)id, (void)buf, (void)user;
        if (n > 0) {
                *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
                return (ssize_t)(n < length ? n : length);
        }
        if (c->finished && c->n_unsent == 0) {
                *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
                return submit_trailers(c, false) < 0 ? NGHTTP2_ERR_CALLBACK_FAILURE : 0;
        }
        return NGHTTP2_ERR_DEFERRED;
}

/* HEADERS of the answer, its messages to come from data_read(). */
static void start_response(struct rnnd_grpc_call *c)
{
        nghttp2_nv nv[] = {NV(":status", "200"), NV("content-type", "application/grpc"),
                           NV("grpc-accept-encoding", RNND_ENCODINGS_ACCEPTED)};
        nghttp2_data_provider dp = {.source.ptr = c, .read_callback = data_read};

        if (c->response_started) {
                nghttp2_session_resume_data(c->conn->s, c->stream_id);
                return;
        }
        c->response_started = true;
        if (nghttp2_submit_response(c->conn->s, c->stream_id, nv, 3, &dp) != 0)
                nghttp2_submit_rst_stream(c->conn->s, NGHTTP2_FLAG_NONE, c->stream_id,
                                          NGHTTP2_INTERNAL_ERROR);
}

struct rnnd_grpc_slot *rnnd_grpc_reserve(struct rnnd_grpc_call *c)
{
        struct rnnd_grpc_slot *s;

        if (c->finished)
                return NULL;
        s = rnnd_calloc(1, sizeof(*s));
        if (s == NULL) {
                rnnd_grpc_finish(c, RNND_GRPC_INTERNAL, "out of memory");
                return NULL;
        }
        if (c->out_tail != NULL)
                c->out_tail->next = s;
        else
                c->out_head = s;
        c->out_tail = s;
        c->n_unsent++;
        c->n_unfilled++;
        c->any_slot = true;
        return s;
}

/* Drops the filled slots of nothing at the head (their place kept the order). */
static void skip_empty(struct rnnd_grpc_call *c)
{
        struct rnnd_grpc_slot *s;

        while ((s = c->out_head) != NULL && s->filled && s->len == 0) {
                c->out_head = s->next;
                if (c->out_head == NULL)
                        c->out_tail = NULL;
                c->n_unsent--;
                rnnd_free(s);
        }
}

void rnnd_grpc_fill(struct rnnd_grpc_call *c, struct rnnd_grpc_slot *slot, void *buf, size_t len)
{
        uint8_t *p = buf;

        if (slot == NULL) {
                rnnd_free(buf);
                return;
        }
        if (p != NULL) {
                p[0] = 0;
                p[1] = (uint8_t)(len >> 24), p[2] = (uint8_t)(len >> 16);
                p[3] = (uint8_t)(len >> 8), p[4] = (uint8_t)len;
                slot->len = len + 5;
                count_held(c, slot->len, true);
        }
        slot->buf = p;
        slot->filled = true;
        c->n_unfilled--;
        skip_empty(c);
        if (c->conn == NULL)
                return;
        if (ready_bytes(c) > 0 || (c->finished && c->n_unsent == 0))
                start_response(c);
        conn_touch(c->conn);
        if (!c->pumping) /* else pump() looks once it has handed its messages on */
                check_ended(c);
}

bool rnnd_grpc_send(struct rnnd_grpc_call *c, void *buf, size_t len)
{
        struct rnnd_grpc_slot *s = rnnd_grpc_reserve(c);

        rnnd_grpc_fill(c, s, buf, len);
        return s != NULL;
}

void rnnd_grpc_finish(struct rnnd_grpc_call *c, int status, const char *message)
{
        if (c->finished)
                return;
        c->finished = true;
        c->status = status;
        copy_str(c->message, sizeof(c->message), message);
        if (status != RNND_GRPC_OK)
                atomic_store(&c->alive, false);
        if (c->conn == NULL)
                return;
        if (!c->any_slot && !c->response_started) {
                if (submit_trailers(c, true) != 0)
                        nghttp2_submit_rst_stream(c->conn->s, NGHTTP2_FLAG_NONE, c->stream_id,
                                                  NGHTTP2_INTERNAL_ERROR);
        } else if (c->n_unsent == 0 || ready_bytes(c) > 0) {
                start_response(c);
        }
        conn_touch(c->conn);
}

void rnnd_grpc_fail(struct rnnd_grpc_call *c, int code, const rnnd_error_t *err)
{
        rnnd_grpc_finish(c, rnnd_error_grpc_status(code),
                         err != NULL && err->msg[0] != '\0' ? err->msg : rnnd_strerror(code));
}

/* Posts from other threads. */

void rnnd_grpc_call_post(struct rnnd_grpc_call *c, struct rnnd_grpc_post *p,
                         void (*fn)(struct rnnd_grpc_call *c, void *arg), void *arg)
{
        struct rnnd_grpc_loop *l = c->l;
        bool closed;

        *p = (struct rnnd_grpc_post){NULL, rnnd_grpc_call_ref(c), fn, arg};
        pthread_mutex_lock(&l->mu);
        closed = l->closed;
        if (!closed) { /* sent under mu: the loop cannot close wake meanwhile */
                *l->posts_tail = p;
                l->posts_tail = &p->next;
                uv_async_send(&l->wake);
        }
        pthread_mutex_unlock(&l->mu);
        if (!closed)
                return;
        fn(c, arg);
        rnnd_grpc_call_unref(c);
}

/*
 * Runs the posted functions (answers from the workers, a batch's often
 * together), then writes each connection they touched once: one write for
 * the answers of a batch on one connection, not one each.
 */
static void run_posts(struct rnnd_grpc_loop *l)
{
        struct rnnd_grpc_post *p, *next;
        struct rnnd_grpc_conn *conn, *cnext;

        pthread_mutex_lock(&l->mu);
        p = l->posts;
        l->posts = NULL;
        l->posts_tail = &l->posts;
        pthread_mutex_unlock(&l->mu);
        if (p == NULL)
                return;
        l->deferring = true;
        for (; p != NULL; p = next) {
                struct rnnd_grpc_call *c = p->call;

                next = p->next; /* p may go with fn */
                p->fn(c, p->arg);
                rnnd_grpc_call_unref(c);
        }
        l->deferring = false;
        /* A connection closed meanwhile is freed only by uv_close's callback, later. */
        for (conn = l->pending, l->pending = NULL; conn != NULL; conn = cnext) {
                cnext = conn->pend_next;
                conn->pending = false;
                if (!conn->closing && conn->dirty && !conn->busy)
                        conn_flush(conn);
        }
}

/* A call's input. */

/* Credits n handed-on bytes of c's stream to its client (WINDOW_UPDATE). */
static void credit(struct rnnd_grpc_call *c, size_t n)
{
        if (c->conn != NULL && n > 0)
                nghttp2_session_consume_stream(c->conn->s, c->stream_id, n);
}

/* Drops c's unhandled input, crediting it, and everything that comes after. */
static void drop_input(struct rnnd_grpc_call *c)
{
        if (c->conn != NULL)
                c->conn->buffered -= c->in.len;
        credit(c, c->in.len);
        c->in.len = 0;
        c->dropping = true;
}

static void finish_dropping(struct rnnd_grpc_call *c, int status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

static void finish_dropping(struct rnnd_grpc_call *c, int status, const char *fmt, ...)
{
        char msg[256];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        drop_input(c);
        rnnd_grpc_finish(c, status, msg);
}

/* Whether the method may take another message now. */
static bool may_take(const struct rnnd_grpc_call *c)
{
        if (c->finished || c->dropping)
                return false;
        if (!(c->method->flags & RNND_GRPC_CLIENT_STREAM))
                return c->n_msgs == 0;
        return c->n_unsent < STREAM_MAX_WAITING;
}

/* One message's 5-byte prefix at p: its length, or false after failing the call. */
static bool message_length(struct rnnd_grpc_call *c, const uint8_t *p, uint32_t *ret)
{
        uint64_t max = (*c->g->opts)->grpc_max_message_bytes;
        uint32_t len = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 8 | p[4];

        if (p[0] > 1) {
                finish_dropping(c, RNND_GRPC_INTERNAL,
                                "a message's compressed flag is %u, not 0 or 1", p[0]);
                return false;
        }
        if (p[0] == 1 && c->encoding == RNND_ENCODING_IDENTITY) {
                finish_dropping(c, RNND_GRPC_INTERNAL,
                                "a compressed message without grpc-encoding gzip or deflate");
                return false;
        }
        if (p[0] == 1 && c->encoding == RNND_ENCODING_OTHER) {
                finish_dropping(
                        c, RNND_GRPC_UNIMPLEMENTED,
                        "grpc-encoding '%s' is not supported: rnnd takes " RNND_ENCODINGS_ACCEPTED,
                        c->encoding_name);
                return false;
        }
        if (len > max) {
                finish_dropping(c, RNND_GRPC_RESOURCE_EXHAUSTED,
                                "a message of %" PRIu32 " bytes is over grpc_max_message_bytes "
                                "(%" PRIu64 ")",
                                len, max);
                return false;
        }
        *ret = len;
        return true;
}

/* A compressed message, decompressed for the method; false after failing the call (as gRPC's
 * core fails it: RESOURCE_EXHAUSTED past the limit, INTERNAL for data that does not inflate). */
static bool take_compressed(struct rnnd_grpc_call *c, const uint8_t *p, uint32_t len)
{
        rnnd_error_t err = {0};
        char *msg;
        size_t n;
        int ret = rnnd_inflate(c->encoding, p, len, (size_t)(*c->g->opts)->grpc_max_message_bytes,
                               "grpc_max_message_bytes", &msg, &n, &err);

        if (ret < 0) {
                finish_dropping(
                        c, ret == RNND_ETOOBIG ? RNND_GRPC_RESOURCE_EXHAUSTED : RNND_GRPC_INTERNAL,
                        "a message (grpc-encoding %s): %s", c->encoding_name, err.msg);
                return false;
        }
        c->method->message(c, (const uint8_t *)msg, n);
        rnnd_free(msg);
        return true;
}

/* Hands each whole message of c's input to its method, while it may take one. */
static void pump(struct rnnd_grpc_call *c)
{
        size_t off = 0;
        uint32_t len;

        c->pumping = true;
        while (c->in.len - off >= 5 && may_take(c)) {
                if (!message_length(c, c->in.data + off, &len))
                        break; /* and dropping */
                if (c->in.len - off - 5 < len)
                        break;
                c->n_msgs++;
                if (c->in.data[off] == 0)
                        c->method->message(c, c->in.data + off + 5, len);
                else if (!take_compressed(c, c->in.data + off + 5, len))
                        break; /* and dropping */
                off += 5 + (size_t)len;
        }
        c->pumping = false;
        if (c->dropping)
                return;
        if (off > 0) {
                credit(c, off);
                if (c->conn != NULL)
                        c->conn->buffered -= off;
                memmove(c->in.data, c->in.data + off, c->in.len - off);
                c->in.len -= off;
        }
        check_ended(c);
}

/*
 * After the client half-closed c, once every answer of a stream is in (each
 * answer and each pump looks again): what it sent must be whole, a unary
 * call had its message, and a stream (without its own half_closed) ends OK.
 * Ending at the half-close dropped the answers still running, and messages
 * taken after it (past STREAM_MAX_WAITING) left the call open for good.
 */
static void check_ended(struct rnnd_grpc_call *c)
{
        bool stream;

        if (!c->ended_in || c->finished || c->dropping)
                return;
        stream = c->method->flags & RNND_GRPC_CLIENT_STREAM;
        if (stream && c->n_unfilled > 0)
                return;
        if (c->in.len > 0 && may_take(c))
                finish_dropping(c, RNND_GRPC_INVALID_ARGUMENT,
                                "the stream ended inside a message (%zu bytes of it came)",
                                c->in.len);
        else if (!stream && c->n_msgs == 0)
                rnnd_grpc_finish(c, RNND_GRPC_INVALID_ARGUMENT,
                                 "the call carried no request message");
        else if (stream && c->in.len == 0 && c->method->half_closed == NULL)
                rnnd_grpc_finish(c, RNND_GRPC_OK, NULL);
}

/* The client closed its side: check_ended(), or the method's half_closed. */
static void input_ended(struct rnnd_grpc_call *c)
{
        c->ended_in = true;
        if (c->finished || c->dropping)
                return;
        pump(c); /* and check_ended() */
        if (!c->finished && !c->dropping && c->method->flags & RNND_GRPC_CLIENT_STREAM &&
            c->in.len == 0 && c->method->half_closed != NULL)
                c->method->half_closed(c);
}

/* grpc-timeout: 1 to 8 digits and a unit (H, M, S, m, u, n), as microseconds. */
static bool parse_timeout(const char *v, size_t n, uint64_t *ret)
{
        static const struct {
                char unit;
                uint64_t num, den; /* microseconds = value * num / den */
        } units[] = {{'H', 3600000000u, 1}, {'M', 60000000u, 1}, {'S', 1000000u, 1},
                     {'m', 1000u, 1},       {'u', 1u, 1},        {'n', 1u, 1000u}};
        uint64_t x = 0;

        if (n < 2 || n > 9)
                return false;
        for (size_t i = 0; i + 1 < n; i++) {
                if (v[i] < '0' || v[i] > '9')
                        return false;
                x = x * 10 + (uint64_t)(v[i] - '0');
        }
        for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++)
                if (v[n - 1] == units[u].unit) {
                        *ret = x * units[u].num / units[u].den;
                        if (*ret == 0)
                                *ret = 1;
                        return true;
                }
        return false;
}

/* A request id the client gave (x-request-id), if safe, as HTTP takes it. */
static void take_request_id(struct rnnd_grpc_call *c, const uint8_t *v, size_t n)
{
        if (n == 0 || n > RNND_REQ_ID_MAX)
                return;
        for (size_t i = 0; i < n; i++)
                if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= 'A' && v[i] <= 'Z') ||
                      (v[i] >= '0' && v[i] <= '9') || strchr("._:-", v[i]) != NULL))
                        return;
        memcpy(c->id, v, n);
        c->id[n] = '\0';
}

static bool header_is(const uint8_t *name, size_t n, const char *lit)
{
        return n == strlen(lit) && memcmp(name, lit, n) == 0;
}

/* application/grpc or application/grpc+proto, parameters allowed: protobuf is all rnnd reads
 * (application/grpc+json was read as protobuf, and failed as a malformed message). */
static bool grpc_content_type(const uint8_t *v, size_t n)
{
        size_t k = 16;

        if (n < k || memcmp(v, "application/grpc", k) != 0)
                return false;
        if (n - k >= 6 && memcmp(v + k, "+proto", 6) == 0)
                k += 6;
        return n == k || v[k] == ';';
}

/* One header of a call's request. */
static void take_header(struct rnnd_grpc_call *c, const uint8_t *name, size_t nlen,
                        const uint8_t *value, size_t vlen)
{
        if (header_is(name, nlen, ":method")) {
                c->post_method = vlen == 4 && memcmp(value, "POST", 4) == 0;
        } else if (header_is(name, nlen, ":path")) {
                if (vlen >= sizeof(c->path))
                        vlen = sizeof(c->path) - 1; /* no method is that long: UNIMPLEMENTED */
                memcpy(c->path, value, vlen);
                c->path[vlen] = '\0';
        } else if (header_is(name, nlen, "content-type")) {
                c->grpc_type = grpc_content_type(value, vlen);
        } else if (header_is(name, nlen, "grpc-timeout")) {
                c->timeout_bad = !parse_timeout((const char *)value, vlen, &c->timeout_us);
        } else if (header_is(name, nlen, "authorization")) {
                rnnd_free(c->auth);
                c->auth = rnnd_malloc(vlen + 1);
                if (c->auth != NULL) {
                        memcpy(c->auth, value, vlen);
                        c->auth[vlen] = '\0';
                }
        } else if (header_is(name, nlen, "grpc-encoding")) {
                c->encoding = rnnd_encoding_of((const char *)value, vlen);
                snprintf(c->encoding_name, sizeof(c->encoding_name), "%.*s",
                         (int)(vlen < sizeof(c->encoding_name) ? vlen
                                                               : sizeof(c->encoding_name) - 1),
                         (const char *)value);
        } else if (header_is(name, nlen, "x-request-id")) {
                take_request_id(c, value, vlen);
        }
}

/* Puts c on the deadline list (a reference) and makes the tick look often. */
static void arm_deadline(struct rnnd_grpc_call *c)
{
        struct rnnd_grpc_loop *l = c->l;
        uint64_t now = rnnd_now_ns();
        uint64_t ns = c->timeout_us > UINT64_MAX / 1000 ? UINT64_MAX : c->timeout_us * 1000;

        /* grpc-timeout takes up to 99999999H: centuries saturate rather than wrap (35868669H
         * wrapped to two minutes ago, and the call expired at once). */
        c->deadline_ns = ns < UINT64_MAX - now ? now + ns : UINT64_MAX;
        c->dl_next = l->deadlines;
        l->deadlines = rnnd_grpc_call_ref(c);
        c->on_deadlines = true;
        if (uv_timer_get_repeat(&l->tick) != DEADLINE_MS)
                uv_timer_start(&l->tick, tick_cb, DEADLINE_MS, DEADLINE_MS);
}

/* The request's headers are in: the call's method, or why it cannot be served. */
static void headers_done(struct rnnd_grpc_call *c)
{
        struct rnnd_grpc *g = c->g;

        c->started = true;
        c->last_in_ms = uv_now(c->l->loop);
        if (!c->post_method || !c->grpc_type) {
                rnnd_grpc_finish(c, RNND_GRPC_UNIMPLEMENTED,
                                 !c->post_method ? "gRPC calls are POST"
                                                 : "content-type must be application/grpc "
                                                   "(or application/grpc+proto): rnnd reads "
                                                   "protobuf messages only");
                return;
        }
        c->method = g->handler.find(c->path);
        if (c->method == NULL) {
                char msg[200];

                snprintf(msg, sizeof(msg), "unknown method %.150s", c->path);
                rnnd_grpc_finish(c, RNND_GRPC_UNIMPLEMENTED, msg);
        } else if (atomic_load(&g->stopping)) {
                rnnd_grpc_finish(c, RNND_GRPC_UNAVAILABLE, "the server is shutting down");
        } else if (c->timeout_bad) {
                rnnd_grpc_finish(c, RNND_GRPC_INVALID_ARGUMENT,
                                 "grpc-timeout: not 1 to 8 digits and a unit (H, M, S, m, u, n)");
        } else if (c->timeout_us > 0) {
                arm_deadline(c);
        }
}

/* nghttp2's callbacks: a connection's user data is the connection. */

static struct rnnd_grpc_call *call_of(struct rnnd_grpc_conn *conn, int32_t id)
{
        return nghttp2_session_get_stream_user_data(conn->s, id);
}

/* A new stream: a call, unless the connection holds too many (its resets' work included). */
/* The call's request id: the daemon's random prefix, then a counter. */
static void call_id(struct rnnd_grpc_call *c, struct rnnd_grpc *g)
{
        struct rnnd_strbuf b;

        rnnd_strbuf_init_fixed(&b, c->id, sizeof(c->id));
        rnnd_strbuf_puts(&b, g->id_prefix);
        rnnd_strbuf_put_u64(&b,
                            atomic_fetch_add_explicit(&g->id_counter, 1, memory_order_relaxed) + 1);
}

static int on_begin_headers(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
        struct rnnd_grpc_conn *conn = user;
        struct rnnd_grpc *g = conn->g;
        struct rnnd_grpc_call *c;

        if (f->hd.type != NGHTTP2_HEADERS || f->headers.cat != NGHTTP2_HCAT_REQUEST)
                return 0;
        if (conn->n_calls >= 2 * (*g->opts)->grpc_max_streams ||
            (c = rnnd_calloc(1, sizeof(*c))) == NULL) {
                nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id,
                                          NGHTTP2_REFUSED_STREAM);
                return 0;
        }
        atomic_init(&c->refs, 1);
        atomic_init(&c->alive, true);
        c->g = g;
        c->l = conn->l;
        c->conn = conn;
        c->counted = conn;
        c->stream_id = f->hd.stream_id;
        c->t0_ns = rnnd_now_ns();
        call_id(c, g);
        c->next = conn->calls;
        if (conn->calls != NULL)
                conn->calls->prev = c;
        conn->calls = c;
        conn->n_calls++;
        atomic_fetch_add(&g->inflight, 1);
        nghttp2_session_set_stream_user_data(s, f->hd.stream_id, c);
        return 0;
}

static int on_header(nghttp2_session *s, const nghttp2_frame *f, const uint8_t *name, size_t nlen,
                     const uint8_t *value, size_t vlen, uint8_t flags, void *user)
{
        struct rnnd_grpc_conn *conn = user;
        struct rnnd_grpc_call *c = call_of(conn, f->hd.stream_id);

        (void)s, (void)flags;
        if (c == NULL || f->hd.type != NGHTTP2_HEADERS || c->started)
                return 0; /* refused, or trailers from the client: nothing gRPC sends */
        c->header_bytes += nlen + vlen + 32;
        if (c->header_bytes > (*conn->g->opts)->grpc_max_header_bytes) {
                if (!c->bad_header)
                        rnnd_log_req(RNND_LOG_INFO, c->id,
                                     "gRPC headers over grpc_max_header_bytes (%" PRIu64
                                     "): resetting the stream",
                                     (*conn->g->opts)->grpc_max_header_bytes);
                c->bad_header = true;
                return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* RST_STREAM */
        }
        take_header(c, name, nlen, value, vlen);
        return 0;
}

/* A control frame: a connection sending many PINGs or SETTINGS and no DATA is told to stop. */
static int count_control(struct rnnd_grpc_conn *conn)
{
        uint64_t now = uv_now(conn->l->loop);

        if (now - conn->ctrl_since_ms >= 1000) {
                conn->ctrl_since_ms = now;
                conn->ctrl_frames = 0;
        }
        if (++conn->ctrl_frames <= CTRL_FRAMES_PER_S)
                return 0;
        rnnd_log(RNND_LOG_NOTICE,
                 "gRPC connection from %s: more than %u PING and SETTINGS frames in a second; "
                 "closing it (GOAWAY ENHANCE_YOUR_CALM)",
                 conn->peer, CTRL_FRAMES_PER_S);
        nghttp2_session_terminate_session(conn->s, NGHTTP2_ENHANCE_YOUR_CALM);
        return 0;
}

static int on_frame_recv(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
        struct rnnd_grpc_conn *conn = user;
        struct rnnd_grpc_call *c = call_of(conn, f->hd.stream_id);

        (void)s;
        switch (f->hd.type) {
        case NGHTTP2_PING:
        case NGHTTP2_SETTINGS:
                return f->hd.flags & NGHTTP2_FLAG_ACK ? 0 : count_control(conn);
        case NGHTTP2_DATA:
                conn->ctrl_frames = 0;
                break;
        case NGHTTP2_HEADERS:
                if (c != NULL && !c->started && (f->hd.flags & NGHTTP2_FLAG_END_HEADERS))
                        headers_done(c);
                break;
        default:
                return 0;
        }
        if (c != NULL && c->started && (f->hd.flags & NGHTTP2_FLAG_END_STREAM))
                input_ended(c);
        return 0;
}

static int on_data_chunk(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                         size_t len, void *user)
{
        struct rnnd_grpc_conn *conn = user;
        struct rnnd_grpc_call *c = call_of(conn, id);
        size_t budget = 2 * (size_t)(*conn->g->opts)->grpc_max_message_bytes + 10;

        (void)flags;
        nghttp2_session_consume_connection(s, len);
        conn->last_read_ms = uv_now(conn->l->loop);
        if (c == NULL || !c->started || c->finished || c->dropping) {
                nghttp2_session_consume_stream(s, id, len);
                return 0;
        }
        c->last_in_ms = conn->last_read_ms;
        if (conn->buffered + len > budget) {
                nghttp2_session_consume_stream(s, id, len);
                finish_dropping(c, RNND_GRPC_RESOURCE_EXHAUSTED,
                                "the connection holds %zu bytes of messages not yet whole or "
                                "handled (at most twice grpc_max_message_bytes)",
                                conn->buffered);
                return 0;
        }
        if (!buf_append(&c->in, data, len)) {
                nghttp2_session_consume_stream(s, id, len);
                finish_dropping(c, RNND_GRPC_RESOURCE_EXHAUSTED, "out of memory");
                return 0;
        }
        conn->buffered += len;
        pump(c);
        return 0;
}

/* The access line of a call that is over, as option access_log says (http.c's rules). */
static void access_line(struct rnnd_grpc_call *c, int status, int level)
{
        const int which = (*c->g->opts)->access_log;
        bool error = status != RNND_GRPC_OK;
        bool server = status == RNND_GRPC_INTERNAL || status == RNND_GRPC_UNAVAILABLE ||
                      status == 2 /* UNKNOWN */ || status == 15 /* DATA_LOSS */;

        level = server ? RNND_LOG_WARNING : error ? RNND_LOG_NOTICE : level;
        if (which == RNND_ACCESS_LOG_OFF || (which == RNND_ACCESS_LOG_ERRORS && !error) ||
            !rnnd_log_enabled(level))
                return;
        rnnd_log_access(level, &(struct rnnd_log_access){
                                       .req_id = c->id,
                                       .method = "GRPC",
                                       .path = c->path,
                                       .status = (unsigned)status,
                                       .duration_ms = (double)(rnnd_now_ns() - c->t0_ns) / 1e6,
                                       .bytes = c->bytes_out,
                                       .model = c->log_model,
                                       .version = c->log_version,
                                       .reason = error ? c->message : NULL,
                               });
}

/* The call's stream is over (closed, reset, or its connection gone): counted and logged. */
static void call_over(struct rnnd_grpc_call *c)
{
        int status = c->trailers_sent ? c->status : RNND_GRPC_CANCELLED;
        int level = RNND_LOG_INFO;

        c->over = true;
        atomic_store(&c->alive, false);
        if (!c->trailers_sent && c->message[0] == '\0')
                snprintf(c->message, sizeof(c->message), "the client left (stream reset)");
        if (c->conn != NULL)
                c->conn->buffered -= c->in.len;
        c->in.len = 0;
        c->conn = NULL;
        if (c->path[0] != '\0')
                level = c->g->handler.done(c, status);
        access_line(c, status, level);
        atomic_fetch_sub(&c->g->inflight, 1);
        rnnd_grpc_call_unref(c); /* the transport's */
}

static int on_stream_close(nghttp2_session *s, int32_t id, uint32_t error_code, void *user)
{
        struct rnnd_grpc_conn *conn = user;
        struct rnnd_grpc_call *c = call_of(conn, id);

        (void)error_code;
        if (c == NULL)
                return 0;
        nghttp2_session_set_stream_user_data(s, id, NULL);
        call_over(c);
        return 0;
}

/*
 * After the trailers went out to a client that has not closed its side, the
 * stream is reset with NO_ERROR (HTTP/2 §8.1), so that it does not hold its
 * place.
 */
static int on_frame_send(nghttp2_session *s, const nghttp2_frame *f, void *user)
{
        struct rnnd_grpc_call *c = call_of(user, f->hd.stream_id);

        if (c != NULL && f->hd.type == NGHTTP2_HEADERS && (f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
            !c->ended_in)
                nghttp2_submit_rst_stream(s, NGHTTP2_FLAG_NONE, f->hd.stream_id, NGHTTP2_NO_ERROR);
        return 0;
}

static ssize_t on_send(nghttp2_session *s, const uint8_t *data, size_t len, int flags, void *user)
{
        struct rnnd_grpc_conn *conn = user;

        (void)s, (void)flags;
        if (conn->w.len >= WBUF_MAX)
                return NGHTTP2_ERR_WOULDBLOCK;
        if (!buf_append(&conn->w, data, len))
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        return (ssize_t)len;
}

/* A DATA frame of c's answers: its header, then length bytes straight from the slots. */
static int on_send_data(nghttp2_session *s, nghttp2_frame *f, const uint8_t *framehd, size_t length,
                        nghttp2_data_source *src, void *user)
{
        struct rnnd_grpc_conn *conn = user;
        struct rnnd_grpc_call *c = src->ptr;

        (void)s, (void)f;
        if (conn->w.len >= WBUF_MAX)
                return NGHTTP2_ERR_WOULDBLOCK;
        if (!buf_append(&conn->w, framehd, 9))
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        while (length > 0) {
                struct rnnd_grpc_slot *sl = c->out_head;
                size_t n = sl->len - c->out_off;

                if (n > length)
                        n = length;
                if (!buf_append(&conn->w, sl->buf + c->out_off, n))
                        return NGHTTP2_ERR_CALLBACK_FAILURE;
                c->out_off += n;
                length -= n;
                c->bytes_out += n;
                if (c->out_off == sl->len) {
                        c->out_head = sl->next;
                        if (c->out_head == NULL)
                                c->out_tail = NULL;
                        c->out_off = 0;
                        c->n_unsent--;
                        count_held(c, sl->len, false);
                        rnnd_free(sl->buf);
                        rnnd_free(sl);
                        skip_empty(c);
                        conn->dirty = true; /* a held-back stream may take more */
                }
        }
        conn->last_sent_ms = uv_now(conn->l->loop);
        return 0;
}

/* Connections. */

static void write_cb(uv_write_t *req, int status)
{
        struct rnnd_grpc_conn *conn = req->data;

        rnnd_free(conn->wdata);
        conn->wdata = NULL;
        conn->writing = false;
        if (status < 0) {
                conn_close(conn);
                return;
        }
        conn->last_sent_ms = uv_now(conn->l->loop);
        conn_flush(conn);
}

/* Writes conn->w: at once as far as the socket takes it, the rest through uv_write. */
static bool write_out(struct rnnd_grpc_conn *conn)
{
        uv_buf_t b = uv_buf_init((char *)conn->w.data, (unsigned)conn->w.len);
        int n = uv_try_write((uv_stream_t *)&conn->tcp, &b, 1);

        if (n < 0 && n != UV_EAGAIN)
                return false;
        if (n == (int)conn->w.len) {
                conn->w.len = 0;
                return true;
        }
        n = n < 0 ? 0 : n;
        conn->wdata = conn->w.data;
        b = uv_buf_init((char *)conn->wdata + n, (unsigned)(conn->w.len - (size_t)n));
        conn->w = (struct buf){0};
        conn->wreq.data = conn;
        conn->writing = true;
        return uv_write(&conn->wreq, (uv_stream_t *)&conn->tcp, &b, 1, write_cb) == 0;
}

/* Streams that held their client back may take more now that answers went out. */
static void repump(struct rnnd_grpc_conn *conn)
{
        for (struct rnnd_grpc_call *c = conn->calls; c != NULL; c = c->next)
                if (!c->over && c->in.len > 0 && may_take(c))
                        pump(c); /* a rest under 5 bytes after the half-close is an error */
}

static void conn_flush(struct rnnd_grpc_conn *conn)
{
        int guard = 0;

        if (conn->closing || conn->writing || conn->busy)
                return;
        while (conn->dirty && guard++ < 16) {
                conn->dirty = false;
                conn->busy = true; /* a method answering inside repump only marks conn */
                repump(conn);
                conn->busy = false;
                if (nghttp2_session_send(conn->s) != 0) {
                        conn_close(conn);
                        return;
                }
                if (conn->w.len > 0 && !write_out(conn)) {
                        conn_close(conn);
                        return;
                }
                if (conn->writing)
                        return; /* write_cb flushes again */
                if (conn->w.len == 0 && nghttp2_session_want_write(conn->s))
                        conn->dirty = true;
        }
        if (!nghttp2_session_want_read(conn->s) && !nghttp2_session_want_write(conn->s))
                conn_close(conn);
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
        struct rnnd_grpc_conn *conn = h->data;

        (void)hint;
        *b = uv_buf_init((char *)conn->rbuf, 65536);
}

static void read_cb(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
        struct rnnd_grpc_conn *conn = st->data;
        ssize_t r;

        if (n < 0) {
                conn_close(conn);
                return;
        }
        conn->last_read_ms = uv_now(conn->l->loop);
        conn->busy = true;
        r = nghttp2_session_mem_recv(conn->s, (const uint8_t *)b->base, (size_t)n);
        conn->busy = false;
        if (r < 0) {
                rnnd_log(RNND_LOG_INFO, "gRPC connection from %s: %s; closing it", conn->peer,
                         nghttp2_strerror((int)r));
                /* nghttp2 queued a GOAWAY for a protocol error: try to send it first. */
                if (r != NGHTTP2_ERR_FLOODED && r != NGHTTP2_ERR_NOMEM)
                        (void)nghttp2_session_send(conn->s);
                if (conn->w.len > 0) {
                        uv_buf_t wb = uv_buf_init((char *)conn->w.data, (unsigned)conn->w.len);

                        (void)uv_try_write((uv_stream_t *)&conn->tcp, &wb, 1);
                }
                conn_close(conn);
                return;
        }
        conn->dirty = true;
        conn_flush(conn);
}

static void conn_free(uv_handle_t *h)
{
        struct rnnd_grpc_conn *conn = h->data;

        rnnd_free(conn->wdata);
        rnnd_free(conn->w.data);
        rnnd_free(conn->rbuf);
        rnnd_free(conn);
}

/* Takes conn off the front end's count (its loop's stays until it is freed). */
static void conn_unregister(struct rnnd_grpc_conn *conn)
{
        struct rnnd_grpc *g = conn->g;

        pthread_mutex_lock(&g->conns_mu);
        if (conn->all_prev != NULL)
                conn->all_prev->all_next = conn->all_next;
        else
                g->all = conn->all_next;
        if (conn->all_next != NULL)
                conn->all_next->all_prev = conn->all_prev;
        g->n_conns--;
        pthread_mutex_unlock(&g->conns_mu);
        atomic_fetch_sub(&conn->l->n_conns, 1);
}

/* Ends every call of conn and closes it; its memory goes when libuv lets go. */
static void conn_close(struct rnnd_grpc_conn *conn)
{
        struct rnnd_grpc_loop *l = conn->l;
        struct rnnd_grpc_call *c, *next;

        if (conn->closing)
                return;
        conn->closing = true;
        for (c = conn->calls; c != NULL; c = next) {
                next = c->next;
                c->counted = NULL; /* its count goes with the connection */
                c->prev = c->next = NULL;
                if (!c->over)
                        call_over(c);
        }
        conn->calls = NULL;
        conn->n_calls = 0;
        nghttp2_session_del(conn->s);
        conn->s = NULL;
        if (conn->prev != NULL)
                conn->prev->next = conn->next;
        else
                l->conns = conn->next;
        if (conn->next != NULL)
                conn->next->prev = conn->prev;
        conn_unregister(conn);
        uv_close((uv_handle_t *)&conn->tcp, conn_free);
}

/* A new connection's session: rnnd's settings and limits (docs/DESIGN.md §11). */
static int session_new(struct rnnd_grpc_conn *conn)
{
        const struct rnnd_options *o = *conn->g->opts;
        uint32_t window = (uint32_t)(o->grpc_max_message_bytes + 5);
        nghttp2_settings_entry iv[] = {
                {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, (uint32_t)o->grpc_max_streams},
                {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, window},
                {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, (uint32_t)o->grpc_max_header_bytes},
        };
        nghttp2_session_callbacks *cb;
        nghttp2_option *opt;
        int r;

        if (nghttp2_session_callbacks_new(&cb) != 0)
                return RNND_ENOMEM;
        if (nghttp2_option_new(&opt) != 0) {
                nghttp2_session_callbacks_del(cb);
                return RNND_ENOMEM;
        }
        nghttp2_session_callbacks_set_send_callback(cb, on_send);
        nghttp2_session_callbacks_set_send_data_callback(cb, on_send_data);
        nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
        nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
        nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
        nghttp2_option_set_no_auto_window_update(opt, 1);
        /* Debian's fixes (CVE-2023-44487, CVE-2024-28182), their limits said here. */
        nghttp2_option_set_stream_reset_rate_limit(opt, 1000, 33);
        nghttp2_option_set_max_continuations(opt, 8);
        nghttp2_option_set_max_outbound_ack(opt, 1000);
        nghttp2_option_set_max_settings(opt, 32);
        nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
        r = nghttp2_session_server_new2(&conn->s, cb, conn, opt);
        nghttp2_option_del(opt);
        nghttp2_session_callbacks_del(cb);
        if (r != 0)
                return RNND_ENOMEM;
        if (nghttp2_submit_settings(conn->s, NGHTTP2_FLAG_NONE, iv, 3) != 0 ||
            nghttp2_session_set_local_window_size(conn->s, NGHTTP2_FLAG_NONE, 0, (int32_t)window) !=
                    0)
                return RNND_ENOMEM;
        return 0;
}

/* The client's address on tcp into conn (addr, alen), and as text (peer). */
static void peer_name(struct rnnd_grpc_conn *conn, const uv_tcp_t *tcp)
{
        char host[48] = "?", port[8] = "?";

        conn->alen = sizeof(conn->addr);
        if (uv_tcp_getpeername(tcp, (struct sockaddr *)&conn->addr, &conn->alen) == 0)
                getnameinfo((struct sockaddr *)&conn->addr, (socklen_t)conn->alen, host,
                            sizeof(host), port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
        else
                conn->alen = 0;
        snprintf(conn->peer, sizeof(conn->peer), "%s:%s", host, port);
}

/* Whether a and b are the same host (the port aside). */
static bool same_host(const struct rnnd_grpc_conn *a, const struct rnnd_grpc_conn *b)
{
        const struct sockaddr *x = (const struct sockaddr *)&a->addr;
        const struct sockaddr *y = (const struct sockaddr *)&b->addr;

        if (a->alen == 0 || b->alen == 0 || x->sa_family != y->sa_family)
                return false;
        if (x->sa_family == AF_INET)
                return ((const struct sockaddr_in *)x)->sin_addr.s_addr ==
                       ((const struct sockaddr_in *)y)->sin_addr.s_addr;
        if (x->sa_family == AF_INET6)
                return memcmp(&((const struct sockaddr_in6 *)x)->sin6_addr,
                              &((const struct sockaddr_in6 *)y)->sin6_addr,
                              sizeof(struct in6_addr)) == 0;
        return false;
}

/*
 * Whether conn may not be served: connection_limit connections are open, or
 * per_address_limit from its address (docs/OPERATIONS.md), as HTTP counts
 * them (http-conns.c), over every loop.  Counts the refusal.  conns_mu held.
 */
static bool over_limits(struct rnnd_grpc *g, const struct rnnd_grpc_conn *conn)
{
        unsigned limit = rnnd_options_per_address_limit(*g->opts), n = 0;

        if (g->n_conns >= (*g->opts)->connection_limit) {
                g->refused_limit++;
                return true;
        }
        for (const struct rnnd_grpc_conn *o = g->all; o != NULL; o = o->all_next)
                if (same_host(o, conn) && ++n >= limit) {
                        g->refused_address++;
                        return true;
                }
        return false;
}

/* Counts conn in, unless it is over the limits. */
static bool conn_register(struct rnnd_grpc *g, struct rnnd_grpc_conn *conn)
{
        bool over;

        pthread_mutex_lock(&g->conns_mu);
        over = over_limits(g, conn);
        if (!over) {
                conn->all_next = g->all;
                if (g->all != NULL)
                        g->all->all_prev = conn;
                g->all = conn;
                g->n_conns++;
        }
        pthread_mutex_unlock(&g->conns_mu);
        return !over;
}

/* The loop with the fewest connections (the search starting past the last one chosen). */
static struct rnnd_grpc_loop *least_busy(struct rnnd_grpc *g)
{
        struct rnnd_grpc_loop *best = NULL;
        unsigned best_n = UINT_MAX;

        for (unsigned k = 0; k < g->n_loops; k++) {
                struct rnnd_grpc_loop *l = &g->loops[(g->next_loop + k) % g->n_loops];
                unsigned n = atomic_load(&l->n_conns);

                if (n < best_n)
                        best = l, best_n = n;
        }
        g->next_loop = (best->index + 1) % g->n_loops;
        atomic_fetch_add(&best->n_conns, 1);
        return best;
}

/* A connection its loop could not start: closed and forgotten. */
static void conn_drop(struct rnnd_grpc_conn *conn)
{
        if (conn->fd >= 0)
                close(conn->fd);
        conn_unregister(conn);
        rnnd_free(conn);
}

/* A connection handed to its loop: served from here on, on that loop's thread. */
static void conn_start(struct rnnd_grpc_conn *conn)
{
        struct rnnd_grpc_loop *l = conn->l;

        if (uv_tcp_init(l->loop, &conn->tcp) < 0) {
                conn_drop(conn);
                return;
        }
        conn->tcp.data = conn;
        if (uv_tcp_open(&conn->tcp, conn->fd) == 0)
                conn->fd = -1; /* the handle's now */
        if (conn->fd >= 0 || (conn->rbuf = rnnd_malloc(65536)) == NULL || session_new(conn) < 0) {
                if (conn->s != NULL)
                        nghttp2_session_del(conn->s);
                conn->s = NULL;
                if (conn->fd >= 0)
                        close(conn->fd);
                conn_unregister(conn);
                uv_close((uv_handle_t *)&conn->tcp, conn_free);
                return;
        }
        uv_tcp_nodelay(&conn->tcp, 1);
        conn->last_read_ms = conn->last_sent_ms = uv_now(l->loop);
        conn->next = l->conns;
        if (l->conns != NULL)
                l->conns->prev = conn;
        l->conns = conn;
        uv_read_start((uv_stream_t *)&conn->tcp, alloc_cb, read_cb);
        rnnd_log(RNND_LOG_DEBUG, "gRPC connection from %s on loop %u of %u", conn->peer, l->index,
                 conn->g->n_loops);
        if (atomic_load(&conn->g->stopping))
                nghttp2_submit_shutdown_notice(conn->s);
        conn->dirty = true;
        conn_flush(conn); /* the server's SETTINGS */
}

/* Hands conn to l's thread, or starts it here when l is this thread's. */
static void conn_hand_over(struct rnnd_grpc_loop *l, struct rnnd_grpc_conn *conn)
{
        bool closed;

        if (l == here) {
                conn_start(conn);
                return;
        }
        pthread_mutex_lock(&l->mu);
        closed = l->closed;
        if (!closed) {
                conn->in_next = l->incoming;
                l->incoming = conn;
                uv_async_send(&l->wake);
        }
        pthread_mutex_unlock(&l->mu);
        if (closed)
                conn_drop(conn);
}

static void accept_closed(uv_handle_t *h)
{
        rnnd_free(h);
}

/*
 * Accepts one connection on the daemon's loop: past the limits it is closed
 * at once; else its socket goes to the loop with the fewest connections.
 */
static void on_connection(uv_stream_t *server, int status)
{
        struct rnnd_grpc *g = server->data;
        struct rnnd_grpc_conn *conn;
        uv_os_fd_t fd;
        bool accepted;
        uv_tcp_t *t;

        if (status < 0)
                return;
        t = rnnd_malloc(sizeof(*t));
        if (t == NULL || uv_tcp_init(g->loop, t) < 0) {
                rnnd_free(t);
                return;
        }
        /* Accepted even when memory ran out, so that libuv goes on accepting. */
        accepted =
                uv_accept(server, (uv_stream_t *)t) == 0 && uv_fileno((uv_handle_t *)t, &fd) == 0;
        conn = rnnd_calloc(1, sizeof(*conn));
        if (conn != NULL) {
                conn->g = g;
                conn->fd = -1;
                if (accepted) {
                        peer_name(conn, t);
                        conn->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3); /* t's goes with t */
                }
        }
        uv_close((uv_handle_t *)t, accept_closed);
        if (conn == NULL || conn->fd < 0 || conn->alen == 0 || !conn_register(g, conn)) {
                if (conn != NULL && conn->fd >= 0)
                        close(conn->fd);
                rnnd_free(conn);
                return;
        }
        conn->l = least_busy(g);
        conn_hand_over(conn->l, conn);
}

/* The tick: deadlines (every DEADLINE_MS while any call has one), connections (SWEEP_MS). */

static void expire_deadlines(struct rnnd_grpc_loop *l, uint64_t now_ns)
{
        struct rnnd_grpc_call **pp = &l->deadlines, *c;

        while ((c = *pp) != NULL) {
                if (!c->over && !c->finished && now_ns < c->deadline_ns) {
                        pp = &c->dl_next;
                        continue;
                }
                *pp = c->dl_next;
                c->on_deadlines = false;
                if (!c->over && !c->finished) {
                        c->expired = true;
                        atomic_store(&c->alive, false);
                        finish_dropping(c, RNND_GRPC_DEADLINE_EXCEEDED,
                                        "the deadline passed (grpc-timeout %" PRIu64 " us)",
                                        c->timeout_us);
                }
                rnnd_grpc_call_unref(c);
        }
}

/* Whether conn has an answer ready that its client's flow control holds back. */
static bool conn_blocked(const struct rnnd_grpc_conn *conn)
{
        for (const struct rnnd_grpc_call *c = conn->calls; c != NULL; c = c->next)
                if (!c->over && c->response_started && ready_bytes(c) > 0)
                        return true;
        return false;
}

/* Whether conn has a call waiting on its client for part of a request message. */
static struct rnnd_grpc_call *conn_half_open(struct rnnd_grpc_conn *conn, uint64_t now,
                                             uint64_t limit_ms)
{
        for (struct rnnd_grpc_call *c = conn->calls; c != NULL; c = c->next)
                if (!c->over && c->started && !c->finished && !c->ended_in &&
                    (c->in.len > 0 || (c->n_msgs == 0 && c->method != NULL &&
                                       !(c->method->flags & RNND_GRPC_CLIENT_STREAM))) &&
                    now - c->last_in_ms >= limit_ms)
                        return c;
        return NULL;
}

static void sweep_conn(struct rnnd_grpc_conn *conn, uint64_t now, uint64_t limit_ms)
{
        struct rnnd_grpc_call *c;
        bool idle = true;

        while ((c = conn_half_open(conn, now, limit_ms)) != NULL)
                finish_dropping(c, RNND_GRPC_CANCELLED,
                                "the request message did not come within connection_timeout "
                                "(%" PRIu64 " s)",
                                limit_ms / 1000);
        if (conn->closing)
                return;
        for (c = conn->calls; c != NULL; c = c->next)
                idle &= c->over;
        if (conn_blocked(conn) && now - conn->last_sent_ms >= limit_ms) {
                rnnd_log(RNND_LOG_INFO,
                         "gRPC connection from %s: its flow control window stayed closed for "
                         "connection_timeout; closing it",
                         conn->peer);
                conn_close(conn);
        } else if (idle && now - conn->last_read_ms >= limit_ms &&
                   now - conn->last_sent_ms >= limit_ms) {
                nghttp2_session_terminate_session(conn->s, NGHTTP2_NO_ERROR);
                conn->dirty = true;
                conn_flush(conn);
        }
}

/* The refusals since the last such line, at most every 10 s.  The daemon's loop. */
static void log_refused(struct rnnd_grpc *g, uint64_t now)
{
        size_t open;

        if (g->refused_limit + g->refused_address == 0 || now - g->refused_logged_ms < 10000)
                return;
        pthread_mutex_lock(&g->conns_mu);
        open = g->n_conns;
        pthread_mutex_unlock(&g->conns_mu);
        rnnd_log(RNND_LOG_NOTICE,
                 "gRPC: refused %u connections past connection_limit, %u past "
                 "per_address_limit (%zu open)",
                 g->refused_limit, g->refused_address, open);
        g->refused_limit = g->refused_address = 0;
        g->refused_logged_ms = now;
}

static void tick_cb(uv_timer_t *t)
{
        struct rnnd_grpc_loop *l = t->data;
        struct rnnd_grpc *g = l->g;
        uint64_t now = uv_now(l->loop), limit_ms = (*g->opts)->connection_timeout * 1000;
        struct rnnd_grpc_conn *conn, *next;

        expire_deadlines(l, rnnd_now_ns());
        if (l->index == 0)
                log_refused(g, now);
        if (now - l->swept_ms >= SWEEP_MS) {
                l->swept_ms = now;
                for (conn = l->conns; conn != NULL; conn = next) {
                        next = conn->next;
                        sweep_conn(conn, now, limit_ms);
                }
                if (g->handler.tick != NULL)
                        g->handler.tick(g->app);
        }
        if (l->deadlines == NULL && uv_timer_get_repeat(t) != SWEEP_MS)
                uv_timer_start(t, tick_cb, SWEEP_MS, SWEEP_MS);
}

/* A loop's connections get GOAWAY: their calls in flight finish, new ones are refused. */
static void loop_quiesce(struct rnnd_grpc_loop *l)
{
        for (struct rnnd_grpc_conn *conn = l->conns; conn != NULL; conn = conn->next) {
                nghttp2_submit_shutdown_notice(conn->s);
                conn->dirty = true;
                conn_flush(conn);
        }
}

static void handle_closed(uv_handle_t *h)
{
        (void)h; /* embedded in struct rnnd_grpc or struct rnnd_grpc_loop */
}

/*
 * A loop's part of the stop: its connections closed (their calls end
 * CANCELLED), its posts run, then closed to further posts, its handles
 * closed (a thread's uv_run() then returns).  Its thread.
 */
static void loop_stop(struct rnnd_grpc_loop *l)
{
        struct rnnd_grpc *g = l->g;
        struct rnnd_grpc_conn *in, *in_next;
        struct rnnd_grpc_call *c, *next;

        while (l->conns != NULL)
                conn_close(l->conns);
        if (g->handler.tick != NULL)
                g->handler.tick(g->app); /* lets go of calls that wait on changes (Watch) */
        for (c = l->deadlines; c != NULL; c = next) {
                next = c->dl_next;
                rnnd_grpc_call_unref(c);
        }
        l->deadlines = NULL;
        run_posts(l);
        pthread_mutex_lock(&l->mu);
        l->closed = true;
        in = l->incoming;
        l->incoming = NULL;
        pthread_mutex_unlock(&l->mu);
        for (; in != NULL; in = in_next) {
                in_next = in->in_next;
                conn_drop(in);
        }
        run_posts(l);
        uv_close((uv_handle_t *)&l->wake, handle_closed);
        uv_close((uv_handle_t *)&l->tick, handle_closed);
}

/* Posts, connections handed over, and the daemon's loop's requests. */
static void wake_cb(uv_async_t *a)
{
        struct rnnd_grpc_loop *l = a->data;
        struct rnnd_grpc_conn *in, *in_next;
        bool quiesce, stop;

        pthread_mutex_lock(&l->mu);
        in = l->incoming;
        l->incoming = NULL;
        quiesce = l->quiesce_asked;
        stop = l->stop_asked;
        l->quiesce_asked = false;
        pthread_mutex_unlock(&l->mu);
        for (; in != NULL; in = in_next) {
                in_next = in->in_next;
                conn_start(in);
        }
        run_posts(l);
        if (quiesce)
                loop_quiesce(l);
        if (stop && !l->closed)
                loop_stop(l);
}

/* The front end's life. */

void rnnd_grpc_init(struct rnnd_grpc *g, struct rnnd_server *app,
                    const struct rnnd_options *_Atomic *opts)
{
        memset(g, 0, sizeof(*g));
        g->app = app;
        g->opts = opts;
        g->held_fd = -1;
        pthread_mutex_init(&g->conns_mu, NULL);
        if (getrandom(&g->id_seed, sizeof(g->id_seed), GRND_NONBLOCK) !=
            (ssize_t)sizeof(g->id_seed))
                g->id_seed = (uint32_t)getpid() ^ (uint32_t)time(NULL) ^ 0x9e3779b9u;
        snprintf(g->id_prefix, sizeof(g->id_prefix), "%08" PRIx32 "-", g->id_seed);
}

/* Binds the listener to host:port (getaddrinfo, numeric port). */
static int bind_listener(struct rnnd_grpc *g, const char *host, unsigned port, rnnd_error_t *reterr)
{
        struct addrinfo *ai = NULL;
        int r = rnnd_options_resolve_listen("grpc_listen", host, port, &ai, reterr);

        if (r < 0)
                return r;
        r = uv_tcp_bind(&g->listener, ai->ai_addr, ai->ai_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0);
        freeaddrinfo(ai);
        if (r < 0)
                return rnnd_error_set(reterr, RNND_EIO, "cannot listen on %s port %u (gRPC): %s",
                                      host, port, uv_strerror(r));
        return 0;
}

/* "127.0.0.1:8001" or "fd 4 from systemd, port 8001" into g->listen_name. */
static void name_listener(struct rnnd_grpc *g, int fd, const char *host)
{
        struct sockaddr_storage ss;
        int len = sizeof(ss);
        unsigned port = 0;

        if (uv_tcp_getsockname(&g->listener, (struct sockaddr *)&ss, &len) == 0)
                port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                                : ntohs(((struct sockaddr_in *)&ss)->sin_port);
        if (fd >= 0)
                snprintf(g->listen_name, sizeof(g->listen_name), "fd %d from systemd, port %u", fd,
                         port);
        else if (strchr(host, ':') != NULL)
                snprintf(g->listen_name, sizeof(g->listen_name), "[%s]:%u", host, port);
        else
                snprintf(g->listen_name, sizeof(g->listen_name), "%s:%u", host, port);
}

static int open_listener(struct rnnd_grpc *g, int fd, rnnd_error_t *reterr)
{
        const struct rnnd_options *o = *g->opts;
        char host[256] = "";
        unsigned port = 0;
        int r;

        uv_tcp_init(g->loop, &g->listener);
        g->listener.data = g;
        g->listening = true;
        if (fd >= 0) {
                r = uv_tcp_open(&g->listener, fd);
                if (r < 0)
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "the second socket systemd passed: %s",
                                              uv_strerror(r));
        } else {
                r = rnnd_options_split_listen(o->grpc_listen, host, sizeof(host), &port, reterr);
                if (r < 0) {
                        rnnd_error_prefix(reterr, "grpc_listen");
                        return r;
                }
                r = bind_listener(g, host, port, reterr);
                if (r < 0)
                        return r;
        }
        r = uv_listen((uv_stream_t *)&g->listener, SOMAXCONN, on_connection);
        if (r < 0)
                return rnnd_error_set(reterr, RNND_EIO, "cannot listen for gRPC on %s: %s",
                                      o->grpc_listen, uv_strerror(r));
        name_listener(g, fd, host);
        return 0;
}

static void *loop_main(void *arg)
{
        struct rnnd_grpc_loop *l = arg;

        here = l;
        pthread_setname_np(pthread_self(), "rnnd-grpc"); /* in top -H and perf */
        uv_run(l->loop, UV_RUN_DEFAULT);
        return NULL;
}

/*
 * Sets up g->loops[i]: on loop (the daemon's) for i 0, else on a loop of
 * its own, whose thread starts here with the daemon's signals blocked.
 */
static int loop_start(struct rnnd_grpc *g, unsigned i, uv_loop_t *loop, rnnd_error_t *reterr)
{
        struct rnnd_grpc_loop *l = &g->loops[i];
        sigset_t block, old;
        int r;

        l->g = g;
        l->index = i;
        l->posts_tail = &l->posts;
        pthread_mutex_init(&l->mu, NULL);
        l->loop = loop;
        if (i > 0) {
                r = uv_loop_init(&l->own);
                if (r < 0)
                        return rnnd_error_set(reterr, RNND_EINTERNAL, "uv_loop_init: %s",
                                              uv_strerror(r));
                l->loop = &l->own;
        }
        r = uv_async_init(l->loop, &l->wake, wake_cb);
        if (r < 0) {
                if (i > 0)
                        uv_loop_close(&l->own);
                return rnnd_error_set(reterr, RNND_EINTERNAL, "uv_async_init: %s", uv_strerror(r));
        }
        l->wake.data = l;
        uv_timer_init(l->loop, &l->tick);
        l->tick.data = l;
        uv_timer_start(&l->tick, tick_cb, SWEEP_MS, SWEEP_MS);
        if (i == 0) {
                here = l;
                return 0;
        }
        sigemptyset(&block);
        sigaddset(&block, SIGINT);
        sigaddset(&block, SIGTERM);
        sigaddset(&block, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &block, &old);
        r = pthread_create(&l->thread, NULL, loop_main, l);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r != 0) {
                uv_close((uv_handle_t *)&l->wake, handle_closed);
                uv_close((uv_handle_t *)&l->tick, handle_closed);
                uv_run(l->loop, UV_RUN_DEFAULT);
                uv_loop_close(l->loop);
                return rnnd_error_set(reterr, RNND_EINTERNAL, "cannot start a gRPC thread: %s",
                                      strerror(r));
        }
        return 0;
}

int rnnd_grpc_start(struct rnnd_grpc *g, uv_loop_t *loop, const struct rnnd_grpc_handler *h, int fd,
                    rnnd_error_t *reterr)
{
        const struct rnnd_options *o = *g->opts;
        unsigned n = rnnd_options_grpc_threads(o);
        char msg[32];
        int r;

        if (fd < 0 && o->grpc_listen[0] == '\0')
                return 0;
        g->loop = loop;
        g->handler = *h;
        g->loops = rnnd_calloc(n, sizeof(*g->loops));
        if (g->loops == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory for %u gRPC loops", n);
        g->started = true;
        for (unsigned i = 0; i < n; i++) {
                r = loop_start(g, i, loop, reterr);
                if (r < 0)
                        return r;
                g->n_loops = i + 1;
        }
        r = open_listener(g, fd, reterr);
        if (r < 0)
                return r;
        atomic_store(&g->accepting, true);
        /* The message limit as rnnd.conf spells it (64M), as the HTTP line's max_body_bytes. */
        rnnd_options_format(o, rnnd_options_find("grpc_max_message_bytes"), msg, sizeof(msg));
        rnnd_log(RNND_LOG_NOTICE,
                 "gRPC listening on %s (%u thread%s, %" PRIu64
                 " stream%s a connection, grpc_max_message_bytes %s)",
                 g->listen_name, n, n == 1 ? "" : "s", o->grpc_max_streams,
                 o->grpc_max_streams == 1 ? "" : "s", msg);
        return 0;
}

bool rnnd_grpc_listening(const struct rnnd_grpc *g)
{
        return atomic_load(&g->accepting);
}

/* Asks loop l (not the daemon's) to quiesce or to stop. */
static void loop_ask(struct rnnd_grpc_loop *l, bool stop)
{
        pthread_mutex_lock(&l->mu);
        if (stop)
                l->stop_asked = true;
        else
                l->quiesce_asked = true;
        if (!l->closed)
                uv_async_send(&l->wake);
        pthread_mutex_unlock(&l->mu);
}

void rnnd_grpc_quiesce(struct rnnd_grpc *g)
{
        uv_os_fd_t fd;

        atomic_store(&g->stopping, true);
        if (!g->listening)
                return;
        g->listening = false;
        /* The socket stays listening, new clients waiting in its backlog, until stop. */
        if (atomic_load(&g->accepting) && uv_fileno((uv_handle_t *)&g->listener, &fd) == 0)
                g->held_fd = dup(fd);
        atomic_store(&g->accepting, false);
        uv_close((uv_handle_t *)&g->listener, handle_closed);
        for (unsigned i = 0; i < g->n_loops; i++)
                if (i == 0)
                        loop_quiesce(&g->loops[0]);
                else
                        loop_ask(&g->loops[i], false);
}

unsigned rnnd_grpc_inflight(const struct rnnd_grpc *g)
{
        return atomic_load(&g->inflight);
}

void rnnd_grpc_stop(struct rnnd_grpc *g)
{
        if (!g->started)
                return;
        g->started = false;
        rnnd_grpc_quiesce(g);
        for (unsigned i = 1; i < g->n_loops; i++)
                loop_ask(&g->loops[i], true);
        if (g->n_loops > 0)
                loop_stop(&g->loops[0]);
        for (unsigned i = 1; i < g->n_loops; i++) {
                pthread_join(g->loops[i].thread, NULL);
                uv_loop_close(g->loops[i].loop);
        }
        if (g->held_fd >= 0)
                close(g->held_fd);
        g->held_fd = -1;
}

void rnnd_grpc_done(struct rnnd_grpc *g)
{
        for (unsigned i = 0; i < g->n_loops; i++)
                pthread_mutex_destroy(&g->loops[i].mu);
        rnnd_free(g->loops);
        g->loops = NULL;
        g->n_loops = 0;
        pthread_mutex_destroy(&g->conns_mu);
}

/*
 * http.c: the libmicrohttpd adapter: the access handler, request contexts,
 * responses, suspend and resume.
 *
 * DESIGN
 * MHD calls the access handler several times per request, on one of its pool
 * threads (DESIGN.md §2):
 *   1. first call (*req_cls == NULL, headers only): allocate the request,
 *      take its id, match the route (404/405 answered here), and check
 *      Content-Length against max_body_bytes (413 answered here, so MHD
 *      discards the body and closes);
 *   2. upload calls (*upload_size > 0): append to the body, capped; past the
 *      cap the data is dropped and too_big remembered, because no response
 *      may be queued while upload data is pending;
 *   3. final call (*upload_size == 0): 413 if too_big, else decompress a
 *      gzip or deflate body (Content-Encoding) within max_body_bytes, and
 *      serve the route.
 *      The inference hook may suspend the connection instead of answering;
 *   4. after rnnd_http_resume() MHD calls the handler once more and the
 *      prepared response is queued there, never from another thread; after
 *      rnnd_http_resume_to_prepare() the response is made there first.
 * MHD_OPTION_NOTIFY_COMPLETED then logs the request, counts it, and drops
 * the HTTP side's reference.  Handlers never block.
 */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "decimal.h"
#include "http-int.h"
#include "deflate.h"
#include "log.h"
#include "strbuf.h"

static const char oom_body[] = "{\"error\":\"out of memory\"}";

/* The request's own accessors. */

struct rnnd_http_request *rnnd_http_request_ref(struct rnnd_http_request *r)
{
        atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
        return r;
}

struct rnnd_http_request *rnnd_http_request_unref(struct rnnd_http_request *r)
{
        if (r == NULL || atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
                return NULL;
        if (r->data_free != NULL)
                r->data_free(r->data);
        if (r->resp != NULL)
                MHD_destroy_response(r->resp);
        rnnd_free(r->body);
        rnnd_free(r->path);
        rnnd_free(r);
        return NULL;
}

const char *rnnd_http_request_id(const struct rnnd_http_request *r)
{
        return r->id;
}

const char *rnnd_http_request_method(const struct rnnd_http_request *r)
{
        return r->method;
}

const char *rnnd_http_request_path(const struct rnnd_http_request *r)
{
        return r->path;
}

const char *rnnd_http_request_header(const struct rnnd_http_request *r, const char *name)
{
        return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *rnnd_http_request_body(const struct rnnd_http_request *r, size_t *len)
{
        *len = r->len;
        return r->len > 0 ? r->body : NULL;
}

struct rnnd_server *rnnd_http_request_server(const struct rnnd_http_request *r)
{
        return r->srv;
}

bool rnnd_http_request_suspended(const struct rnnd_http_request *r)
{
        return r->suspended;
}

void rnnd_http_request_set_data(struct rnnd_http_request *r, void *data,
                                void (*free_fn)(void *data))
{
        if (r->data_free != NULL && r->data != data)
                r->data_free(r->data);
        r->data = data;
        r->data_free = free_fn;
}

void *rnnd_http_request_data(const struct rnnd_http_request *r)
{
        return r->data;
}

/* Responses. */

/* Seconds a client is asked to wait before it tries a 503 again. */
#define RETRY_AFTER_S "1"

/* Adds the headers every response carries; false when MHD ran out of memory. */
static bool add_common_headers(struct rnnd_http_request *r, struct MHD_Response *resp,
                               const char *content_type)
{
        return MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type) ==
                       MHD_YES &&
               MHD_add_response_header(resp, "X-Request-Id", r->id) == MHD_YES;
}

/* The last-resort response when memory runs out: a static body. */
static void respond_oom(struct rnnd_http_request *r)
{
        struct MHD_Response *resp = MHD_create_response_from_buffer(
                sizeof(oom_body) - 1, (void *)oom_body, MHD_RESPMEM_PERSISTENT);

        if (r->resp != NULL)
                MHD_destroy_response(r->resp);
        r->resp = resp;
        r->resp_status = MHD_HTTP_INTERNAL_SERVER_ERROR;
        r->resp_bytes = sizeof(oom_body) - 1;
        snprintf(r->reason, sizeof(r->reason), "out of memory");
        if (resp != NULL)
                (void)add_common_headers(r, resp, "application/json");
}

/*
 * Bodies of at least this many bytes go out compressed where the request's
 * Accept-Encoding asks for gzip or deflate (docs/HTTP.md "Compressed requests
 * and answers"); below it the few bytes saved cost more than they save.
 */
#define COMPRESS_MIN 1024

/*
 * Compresses *body in place as the request asks, on the thread that made it
 * (the MHD thread, where inference answers are rendered too).  Returns the
 * encoding used: identity when not asked, too small, out of memory, or when
 * it would not be smaller.
 */
static enum rnnd_encoding compress_body(const struct rnnd_http_request *r, bool tensors,
                                        void **body, size_t *len)
{
        char *z;
        size_t zlen;

        if (r->accept == RNND_ENCODING_IDENTITY || *len < COMPRESS_MIN ||
            rnnd_deflate(r->accept, tensors, *body, *len, &z, &zlen) < 0)
                return RNND_ENCODING_IDENTITY;
        if (zlen >= *len) {
                rnnd_free(z);
                return RNND_ENCODING_IDENTITY;
        }
        rnnd_free(*body);
        *body = z;
        *len = zlen;
        return r->accept;
}

/* Content-Encoding, and Vary for a body of len bytes, one compress_body() could compress. */
static bool add_encoding_headers(struct MHD_Response *resp, size_t len, enum rnnd_encoding enc)
{
        if (enc != RNND_ENCODING_IDENTITY &&
            MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING,
                                    enc == RNND_ENCODING_GZIP ? "gzip" : "deflate") != MHD_YES)
                return false;
        return len < COMPRESS_MIN ||
               MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY,
                                       MHD_HTTP_HEADER_ACCEPT_ENCODING) == MHD_YES;
}

/* rnnd_http_respond(), the body compressed as tensors or not. */
static int respond_body(struct rnnd_http_request *r, unsigned status, const char *content_type,
                        bool tensors, void *body, size_t len)
{
        struct MHD_Response *resp;
        size_t plain = len;
        enum rnnd_encoding enc = compress_body(r, tensors, &body, &len);

        resp = MHD_create_response_from_buffer_with_free_callback(len, body, rnnd_free);
        if (resp == NULL) {
                rnnd_free(body);
                respond_oom(r);
                return RNND_ENOMEM;
        }
        if (!add_common_headers(r, resp, content_type) || !add_encoding_headers(resp, plain, enc)) {
                MHD_destroy_response(resp);
                respond_oom(r);
                return RNND_ENOMEM;
        }
        if (r->resp != NULL)
                MHD_destroy_response(r->resp);
        r->resp = resp;
        r->resp_status = status;
        r->resp_bytes = len;
        if (status < 400)
                r->reason[0] = '\0';
        /* Every 503 is a condition that passes: overload, a model not (yet) loaded, a drain. */
        if (status == MHD_HTTP_SERVICE_UNAVAILABLE)
                (void)rnnd_http_respond_header(r, MHD_HTTP_HEADER_RETRY_AFTER, RETRY_AFTER_S);
        return 0;
}

int rnnd_http_respond(struct rnnd_http_request *r, unsigned status, const char *content_type,
                      void *body, size_t len)
{
        return respond_body(r, status, content_type, false, body, len);
}

int rnnd_http_respond_tensors(struct rnnd_http_request *r, unsigned status,
                              const char *content_type, void *body, size_t len)
{
        return respond_body(r, status, content_type, true, body, len);
}

int rnnd_http_respond_header(struct rnnd_http_request *r, const char *name, const char *value)
{
        if (r->resp == NULL || MHD_add_response_header(r->resp, name, value) != MHD_YES)
                return RNND_ENOMEM;
        return 0;
}

/* Prepares {"error": msg} with status. */
static void respond_message(struct rnnd_http_request *r, unsigned status, const char *msg)
{
        struct rnnd_strbuf b;
        size_t len;
        char *body;

        rnnd_strbuf_init(&b);
        rnnd_strbuf_putc(&b, '{');
        rnnd_strbuf_json_kv_str(&b, "error", msg);
        rnnd_strbuf_putc(&b, '}');
        body = rnnd_strbuf_steal(&b, &len);
        if (body == NULL) {
                respond_oom(r);
                return;
        }
        if (rnnd_http_respond(r, status, "application/json", body, len) == 0)
                snprintf(r->reason, sizeof(r->reason), "%s", msg);
}

static void respond_vformat(struct rnnd_http_request *r, unsigned status, const char *fmt,
                            va_list ap)
{
        char msg[512];

        vsnprintf(msg, sizeof(msg), fmt, ap);
        respond_message(r, status, msg);
}

int rnnd_http_respond_error(struct rnnd_http_request *r, unsigned status, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        respond_vformat(r, status, fmt, ap);
        va_end(ap);
        return 0;
}

int rnnd_http_fail(struct rnnd_http_request *r, int code, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        respond_vformat(r, (unsigned)rnnd_error_http_status(code), fmt, ap);
        va_end(ap);
        return rnnd_error_http_status(code);
}

int rnnd_http_fail_err(struct rnnd_http_request *r, int code, const rnnd_error_t *err)
{
        respond_message(r, (unsigned)rnnd_error_http_status(code),
                        err != NULL && err->msg[0] != '\0' ? err->msg : rnnd_strerror(code));
        return rnnd_error_http_status(code);
}

/* Hands the prepared response to MHD.  MHD thread, inside the handler. */
static enum MHD_Result queue(struct rnnd_http_request *r)
{
        enum MHD_Result ret;

        if (r->resp == NULL) {
                rnnd_log_req(RNND_LOG_ERR, r->id, "%s %s: no response was prepared", r->method,
                             r->path);
                rnnd_http_fail(r, RNND_EINTERNAL, "internal error: no response");
                if (r->resp == NULL)
                        return MHD_NO;
        }
        /*
         * A request canceled because its client left (499, docs/HTTP.md) is
         * never answered: the client that only half-closed its side would read
         * a status no server sends.  The connection closes instead.
         */
        if (r->resp_status == (unsigned)rnnd_error_http_status(RNND_ECANCELED)) {
                MHD_destroy_response(r->resp);
                r->resp = NULL;
                r->status = r->resp_status;
                r->dropped = true;
                return MHD_NO;
        }
        /* While stopping, ask keep-alive clients to go away. */
        if (atomic_load(&r->http->stopping))
                (void)MHD_add_response_header(r->resp, MHD_HTTP_HEADER_CONNECTION, "close");
        ret = MHD_queue_response(r->conn, r->resp_status, r->resp);
        MHD_destroy_response(r->resp);
        r->resp = NULL;
        r->status = r->resp_status;
        return ret;
}

void rnnd_http_suspend(struct rnnd_http_request *r)
{
        r->suspended = true;
        atomic_fetch_add(&r->http->suspended, 1);
        MHD_suspend_connection(r->conn);
}

void rnnd_http_resume_to_prepare(struct rnnd_http_request *r,
                                 void (*prepare)(struct rnnd_http_request *r))
{
        r->prepare = prepare; /* published to the MHD thread by the resume's lock */
        rnnd_http_resume(r);
}

void rnnd_http_resume(struct rnnd_http_request *r)
{
        struct MHD_Connection *conn = r->conn;

        atomic_fetch_sub(&r->http->suspended, 1);
        MHD_resume_connection(conn);
}

bool rnnd_http_request_peer_gone(const struct rnnd_http_request *r)
{
        const union MHD_ConnectionInfo *ci =
                MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        char c;
        ssize_t n;

        if (ci == NULL)
                return false;
        n = recv(ci->connect_fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

/* A new request id, "%08x%08x" of the seed and the counter's low bits, by hand: once a request. */
static void new_request_id(struct rnnd_http *h, char id[RNND_REQ_ID_MAX + 1])
{
        uint64_t c = atomic_fetch_add_explicit(&h->id_counter, 1, memory_order_relaxed);

        c = (uint64_t)h->id_seed << 32 | (c & 0xffffffffu);
        for (int i = 15; i >= 0; i--, c >>= 4)
                id[i] = "0123456789abcdef"[c & 15];
        id[16] = '\0';
}

/* The request id: the client's X-Request-Id when it is safe to echo and log. */
static void take_request_id(struct rnnd_http_request *r)
{
        static const char ok[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                 "0123456789._:-";
        const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-Request-Id");
        size_t n = h != NULL ? strlen(h) : 0;

        if (n >= 1 && n <= RNND_REQ_ID_MAX && strspn(h, ok) == n) {
                memcpy(r->id, h, n + 1);
                return;
        }
        new_request_id(r->http, r->id);
}

/* Whether the request announced a body (a length other than 0, or chunked). */
static bool expects_body(struct rnnd_http_request *r)
{
        const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        const char *te = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_TRANSFER_ENCODING);

        return (cl != NULL && strcmp(cl, "0") != 0) || te != NULL;
}

/* The first call: returns the request, or NULL out of memory (MHD then closes). */
static struct rnnd_http_request *begin(struct rnnd_http *h, struct MHD_Connection *conn,
                                       const char *url, const char *method)
{
        struct rnnd_http_request *r = rnnd_calloc(1, sizeof(*r) + h->routes.ctx_size);

        if (r == NULL)
                return NULL;
        atomic_init(&r->refs, 1);
        r->http = h;
        r->srv = h->app;
        r->conn = conn;
        r->t0_ns = rnnd_now_ns();
        strncpy(r->method, method, sizeof(r->method) - 1); /* calloc'd: NUL-ended */
        r->path = rnnd_strdup(url);
        if (r->path == NULL) {
                rnnd_free(r);
                return NULL;
        }
        take_request_id(r);
        r->accept = rnnd_accept_encoding(MHD_lookup_connection_value(
                conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT_ENCODING));
        rnnd__http_conn_busy(r, true);
        atomic_fetch_add(&h->inflight, 1);
        return r;
}

/*
 * A NUL byte in the request line (issue 29).  libmicrohttpd 0.9.x parses
 * the line in place, in the connection's read buffer, and hands C strings
 * that end at the first NUL: "GET /v2/health/live\0x HTTP/1.1" reached the
 * routes as /v2/health/live and was served.  What it hands over still lies
 * in that one line, so the bytes it did not hand over can be measured: the
 * method ends at the first space, which MHD overwrote with a NUL, and only
 * spaces follow up to the URI; the URI ends at the NUL MHD wrote before the
 * version, which is always "HTTP/d.d" (MHD refuses anything else), and its
 * length before unescaping was taken when MHD logged it (uri_log_cb).  A
 * string shorter than its place held a NUL of the client's.  A line that
 * starts with a NUL never reaches rnnd: MHD takes it for an empty line
 * (docs/HTTP.md says what the client sees).  libmicrohttpd 1.0 refuses NULs
 * itself and may keep these strings elsewhere, so the check is for 0.9.x.
 */
static bool line_has_nul(struct rnnd_http_request *r, const char *method, const char *url,
                         const char *version)
{
#if MHD_VERSION < 0x01000000
        uintptr_t m = (uintptr_t)method, u = (uintptr_t)url, v = (uintptr_t)version;
        size_t len = 0, line_max = (size_t)(*r->http->opts)->per_connection_memory;
        const char *logged = rnnd__http_conn_uri_of(r, &len), *p;

        /* Only where the strings lie as 0.9.x leaves them: method, URI, version in one line. */
        if (logged != url || !(m < u && u < v && v - m <= line_max) || version[-1] != '\0')
                return false;
        for (p = method + strlen(method) + 1; p < url && *p == ' '; p++)
                ;
        return p != url || len < (size_t)(v - u) - 1;
#else
        (void)r;
        (void)method;
        (void)url;
        (void)version;
        return false;
#endif
}

/* MHD_OPTION_URI_LOG_CALLBACK: the request line's URI before it is unescaped.  cls: the http. */
static void *uri_log_cb(void *cls, const char *uri, struct MHD_Connection *conn)
{
        rnnd__http_conn_uri(cls, conn, uri);
        return NULL; /* no request context yet: access_cb makes it */
}

/* The lines of one header, by name (MHD_get_connection_values's walk). */
struct header_lines {
        const char *name;  /* the header counted */
        unsigned n;        /* lines seen */
        const char *first; /* the first one's value */
        bool differ;       /* a later one says something else */
};

static enum MHD_Result count_lines(void *cls, enum MHD_ValueKind kind, const char *key,
                                   const char *value)
{
        struct header_lines *c = cls;

        (void)kind;
        if (strcasecmp(key, c->name) != 0)
                return MHD_YES;
        if (c->n++ == 0)
                c->first = value;
        else if (value == NULL || c->first == NULL || strcmp(value, c->first) != 0)
                c->differ = true;
        return MHD_YES;
}

/*
 * What libmicrohttpd 0.9.75 lets through (issue 18, docs/HTTP.md): a NUL
 * in the URL (unescape_cb leaves %00 encoded), Content-Length headers that
 * disagree, a Transfer-Encoding beside a Content-Length (RFC 9112 §6.3: each a
 * message a proxy in front may frame otherwise than rnnd, the way requests
 * are smuggled; MHD framed such a body by one and served the rest as the next
 * request), and a Transfer-Encoding other than one chunked line (a second
 * line adds a coding: "chunked" then "gzip" is "chunked, gzip", which MHD
 * read as chunked), which MHD would also wait on until the connection timed
 * out.  Prepares the 400/501, with Connection: close, and returns its status,
 * or 0.
 */
static unsigned check_framing(struct rnnd_http_request *r, const char *method, const char *url,
                              const char *version)
{
        struct header_lines cl = {.name = MHD_HTTP_HEADER_CONTENT_LENGTH};
        struct header_lines te = {.name = MHD_HTTP_HEADER_TRANSFER_ENCODING};
        int status = 0;

        MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_lines, &cl);
        MHD_get_connection_values(r->conn, MHD_HEADER_KIND, count_lines, &te);
        if (line_has_nul(r, method, url, version))
                status = rnnd_http_fail(r, RNND_EINVAL, "the request line holds a NUL byte");
        else if (strstr(r->path, "%00") != NULL)
                status = rnnd_http_fail(r, RNND_EINVAL, "the URL holds %%00 (a NUL byte)");
        else if (cl.differ)
                status = rnnd_http_fail(r, RNND_EINVAL, "%u Content-Length headers that disagree",
                                        cl.n);
        else if (te.n > 0 && cl.n > 0)
                status = rnnd_http_fail(r, RNND_EINVAL,
                                        "both Transfer-Encoding and Content-Length (RFC 9112 "
                                        "§6.3): send one of them");
        else if (te.n > 1)
                status = rnnd_http_fail(r, RNND_ENOTIMPL,
                                        "%u Transfer-Encoding headers, the first '%.40s': only "
                                        "one, chunked, is supported",
                                        te.n, te.first != NULL ? te.first : "");
        else if (te.n == 1 && (te.first == NULL || strcasecmp(te.first, "chunked") != 0))
                status = rnnd_http_fail(r, RNND_ENOTIMPL,
                                        "Transfer-Encoding '%.40s' is not supported (only "
                                        "chunked, or a Content-Length)",
                                        te.first != NULL ? te.first : "");
        if (status == 0)
                return 0;
        rnnd_http_respond_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
        return (unsigned)status;
}

/*
 * libmicrohttpd's own unescaping, but %00 stays as it is: a decoded NUL
 * would end the C string MHD hands over, so that "/v2/models/m%00x" reached
 * the routes as "/v2/models/m".  check_framing() refuses what keeps it.
 */
static int hexval(char c)
{
        return c >= '0' && c <= '9'   ? c - '0'
               : c >= 'a' && c <= 'f' ? c - 'a' + 10
               : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                      : -1;
}

static size_t unescape_cb(void *cls, struct MHD_Connection *c, char *s)
{
        char *w = s;
        const char *p = s;

        (void)cls;
        (void)c;
        while (*p != '\0') {
                int hi = p[0] == '%' ? hexval(p[1]) : -1, lo = hi >= 0 ? hexval(p[2]) : -1;

                if (lo >= 0 && (hi | lo) != 0) {
                        *w++ = (char)(hi * 16 + lo);
                        p += 3;
                } else {
                        *w++ = *p++;
                }
        }
        *w = '\0';
        return (size_t)(w - s);
}

/* Checks the declared length; prepares 413/400 and returns its status, or 0. */
static unsigned check_length(struct rnnd_http_request *r)
{
        const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                     MHD_HTTP_HEADER_CONTENT_LENGTH);
        uint64_t n, max = (*r->http->opts)->max_body_bytes;

        if (cl == NULL)
                return 0;
        if (rnnd_decimal_parse(cl, &n) < 0)
                return (unsigned)rnnd_http_fail(r, RNND_EINVAL, "invalid Content-Length '%.40s'",
                                                cl);
        if (n > max)
                return (unsigned)rnnd_http_fail(r, RNND_ETOOBIG,
                                                "request body of %" PRIu64
                                                " bytes is larger than max_body_bytes (%" PRIu64
                                                ")",
                                                n, max);
        if (n > 0) {
                /* Declared and within the cap: allocate it once. */
                r->body = rnnd_malloc((size_t)n + 1);
                if (r->body != NULL)
                        r->cap = (size_t)n + 1;
        }
        return 0;
}

/* An upload call: appends, or drops the data once past the cap. */
static void append(struct rnnd_http_request *r, const char *data, size_t n)
{
        size_t max = (size_t)(*r->http->opts)->max_body_bytes;

        if (r->too_big)
                return;
        if (n > max - r->len) {
                r->too_big = true;
                rnnd_free(r->body);
                r->body = NULL;
                r->cap = 0;
                r->len = 0;
                return;
        }
        if (r->len + n + 1 > r->cap) {
                size_t cap = r->cap > 0 ? r->cap : 4096;
                char *p;

                while (cap < r->len + n + 1)
                        cap = cap > max / 2 ? max + 1 : cap * 2;
                p = rnnd_realloc(r->body, cap);
                if (p == NULL) {
                        /* Treated like an over-cap body, with its own message at the end. */
                        r->too_big = true;
                        r->body_oom = true;
                        rnnd_free(r->body);
                        r->body = NULL;
                        r->cap = 0;
                        r->len = 0;
                        return;
                }
                r->body = p;
                r->cap = cap;
        }
        memcpy(r->body + r->len, data, n);
        r->len += n;
        r->body[r->len] = '\0';
}

/*
 * A body sent with Content-Encoding gzip or deflate (tritonclient's
 * request_compression_algorithm), decompressed in its place within
 * max_body_bytes; false after preparing the error (docs/HTTP.md "Compressed
 * requests").  An empty body, with nothing to decode, is left alone.
 */
static bool decode_body(struct rnnd_http_request *r)
{
        const char *name = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
                                                       MHD_HTTP_HEADER_CONTENT_ENCODING);
        enum rnnd_encoding enc = rnnd_encoding_of(name, name != NULL ? strlen(name) : 0);
        rnnd_error_t err = {0};
        char *out;
        size_t n;
        int ret;

        if (enc == RNND_ENCODING_IDENTITY || r->len == 0)
                return true;
        if (enc == RNND_ENCODING_OTHER) {
                rnnd_http_fail(r, RNND_EMEDIATYPE,
                               "Content-Encoding '%.32s' is not supported: send gzip, deflate or "
                               "identity",
                               name);
                return false;
        }
        ret = rnnd_inflate(enc, r->body, r->len, (size_t)(*r->http->opts)->max_body_bytes,
                           "max_body_bytes", &out, &n, &err);
        if (ret < 0) {
                rnnd_http_fail(r, ret, "the body (Content-Encoding %.32s): %s", name, err.msg);
                return false;
        }
        rnnd_free(r->body);
        r->body = out;
        r->len = n;
        r->cap = n + 1;
        return true;
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload,
                                 size_t *upload_size, void **req_cls)
{
        struct rnnd_http *h = cls;
        struct rnnd_http_request *r = *req_cls;
        unsigned status;

        if (r == NULL) {
                r = begin(h, conn, url, method);
                if (r == NULL) {
                        rnnd_log(RNND_LOG_ERR, "%s %.200s: out of memory, closing the connection",
                                 method, url);
                        return MHD_NO;
                }
                *req_cls = r;
                status = check_framing(r, method, url, version);
                if (status == 0)
                        status = h->routes.match(r, r->route_ctx);
                if (status == 0)
                        status = check_length(r);
                if (status == 0)
                        return MHD_YES;
                /*
                 * Answered already.  With a body on its way, queue now so that MHD
                 * discards it (and closes); without one, wait for the final call,
                 * which keeps the connection alive.
                 */
                r->early = true;
                if (status == (unsigned)rnnd_error_http_status(RNND_ETOOBIG) || expects_body(r)) {
                        r->dispatched = true;
                        return queue(r);
                }
                return MHD_YES;
        }

        if (*upload_size > 0) {
                append(r, upload, *upload_size);
                *upload_size = 0;
                return MHD_YES;
        }

        if (r->dispatched) {
                /* Called again after rnnd_http_resume(): the response is ready, or made here. */
                r->suspended = false;
                if (r->prepare != NULL) {
                        void (*prepare)(struct rnnd_http_request *) = r->prepare;

                        r->prepare = NULL;
                        prepare(r);
                }
                return queue(r);
        }
        r->dispatched = true;
        rnnd__http_conn_received(r);
        if (r->early)
                return queue(r);
        if (r->too_big) {
                if (r->body_oom)
                        rnnd_http_fail(r, RNND_ENOMEM, "out of memory for the request body");
                else
                        rnnd_http_fail(r, RNND_ETOOBIG,
                                       "request body is larger than max_body_bytes "
                                       "(%" PRIu64 ")",
                                       (*h->opts)->max_body_bytes);
                return queue(r);
        }
        if (!decode_body(r))
                return queue(r);
        h->routes.serve(r, r->route_ctx);
        if (r->suspended)
                return MHD_YES; /* Never MHD_NO after a suspend (MHD bug #7196). */
        return queue(r);
}

/* Copies s into buf[cap] with control bytes replaced, for text log lines. */
static const char *printable(const char *s, char *buf, size_t cap)
{
        size_t i;

        for (i = 0; s[i] != '\0' && i + 1 < cap; i++)
                buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
        buf[i] = '\0';
        return buf;
}

/*
 * The request's access line, as option access_log says: errors (4xx at
 * notice, 5xx at warning) or all (the rest at the route's level: info, or
 * debug for health checks and scrapes).  toe_why says how the connection
 * ended when not normally.
 */
static int access_level(struct rnnd_http *h, unsigned status, int route_level)
{
        const int which = (*h->opts)->access_log;
        const int level = status >= 500   ? RNND_LOG_WARNING
                          : status >= 400 ? RNND_LOG_NOTICE
                                          : route_level;

        if (which == RNND_ACCESS_LOG_OFF || (which == RNND_ACCESS_LOG_ERRORS && status < 400) ||
            !rnnd_log_enabled(level))
                return -1;
        return level;
}

static void access_line(struct rnnd_http *h, struct rnnd_http_request *r, unsigned status,
                        int route_level, const char *toe_why)
{
        const int level = access_level(h, status, route_level);
        char path[256];

        if (level < 0)
                return;
        rnnd_log_access(level, &(struct rnnd_log_access){
                                       .req_id = r->id,
                                       .method = r->method,
                                       .path = printable(r->path, path, sizeof(path)),
                                       .status = status,
                                       .duration_ms = (double)(rnnd_now_ns() - r->t0_ns) / 1e6,
                                       .bytes = r->status != 0 && !r->dropped ? r->resp_bytes : 0,
                                       .model = r->log_model,
                                       .version = r->log_version,
                                       .reason = toe_why[0] != '\0' ? toe_why : r->reason,
                               });
}

/*
 * The status of a request rnnd did not answer: libmicrohttpd's own answer
 * (400 for a malformed chunked body, 413 for a chunk too large), or 499 when
 * nothing was sent (docs/HTTP.md: the client left).
 */
static unsigned mhd_status(struct MHD_Connection *conn)
{
        const union MHD_ConnectionInfo *ci =
                conn != NULL ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_HTTP_STATUS)
                             : NULL;

        return ci != NULL && ci->http_status >= 100 ? ci->http_status : 499;
}

static void completed_cb(void *cls, struct MHD_Connection *conn, void **req_cls,
                         enum MHD_RequestTerminationCode toe)
{
        static const char *const why[] = {
                [MHD_REQUEST_TERMINATED_COMPLETED_OK] = "",
                [MHD_REQUEST_TERMINATED_WITH_ERROR] = "connection error",
                [MHD_REQUEST_TERMINATED_TIMEOUT_REACHED] = "connection timed out",
                [MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN] = "server stopped",
                [MHD_REQUEST_TERMINATED_READ_ERROR] = "read error",
                [MHD_REQUEST_TERMINATED_CLIENT_ABORT] = "client closed the connection",
        };
        struct rnnd_http *h = cls;
        struct rnnd_http_request *r = *req_cls;
        unsigned status;
        int level;

        if (r == NULL)
                return;
        *req_cls = NULL;
        status = r->status != 0 ? r->status : mhd_status(conn);
        /* Counted, and the model let go: the response is out (or the client gone). */
        level = h->routes.done(r, r->route_ctx, status);
        if (r->dropped)
                toe = MHD_REQUEST_TERMINATED_COMPLETED_OK; /* closed by queue(), as it meant */
        access_line(h, r, status, level,
                    r->status == 0 && status != 499 ? "malformed request, answered by libmicrohttpd"
                    : (unsigned)toe < sizeof(why) / sizeof(why[0]) && why[toe] != NULL ? why[toe]
                                                                                       : "");
        rnnd__http_conn_busy(r, false);
        atomic_fetch_sub(&h->inflight, 1);
        rnnd_http_request_unref(r);
}

void rnnd_http_request_log_model(struct rnnd_http_request *r, const char *model, uint64_t version)
{
        snprintf(r->log_model, sizeof(r->log_model), "%s", model != NULL ? model : "");
        r->log_version = version;
}

/*
 * A Content-Length that libmicrohttpd cannot read ("-1", "abc", more than 64
 * bits) is refused by MHD itself before the handler sees the request, and
 * 0.9.75 writes that answer's header block twice (issue 29).  MHD logs why
 * first, on the connection's thread, so rnnd answers there instead: the same
 * 400 (413 for a number too large) as check_length(), and closes.
 */
/*
 * Counts a request answered before it had a context (answer_bad_length) and
 * writes its access line: uri is the request line's (the method is not known
 * yet: "-").
 */
static void refused_line(struct rnnd_http *h, const char *id, const char *uri, unsigned status,
                         size_t bytes, const char *why)
{
        const int level = access_level(h, status, RNND_LOG_INFO);
        char path[256];

        if (h->routes.refused != NULL)
                h->routes.refused(h->app, status);
        if (level < 0)
                return;
        rnnd_log_access(level,
                        &(struct rnnd_log_access){
                                .req_id = id,
                                .method = "-",
                                .path = printable(uri != NULL ? uri : "", path, sizeof(path)),
                                .status = status,
                                .bytes = bytes,
                                .reason = why,
                        });
}

struct bad_length {
        struct rnnd_http *h;
        char value[48]; /* the header's value, cut */
};

static bool has_bad_length(struct MHD_Connection *conn, void *cls)
{
        struct bad_length *b = cls;
        const char *cl =
                MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        uint64_t n;

        if (cl == NULL || rnnd_decimal_parse(cl, &n) == 0)
                return false;
        snprintf(b->value, sizeof(b->value), "%s", cl);
        return true;
}

static void answer_bad_length(int fd, const char *uri, void *cls)
{
        struct bad_length *b = cls;
        bool digits = b->value[0] != '\0' && strspn(b->value, "0123456789") == strlen(b->value);
        int code = digits ? RNND_ETOOBIG : RNND_EINVAL;
        char id[RNND_REQ_ID_MAX + 1], msg[128], json[192], date[64] = "", head[640];
        time_t now = time(NULL);
        struct rnnd_strbuf body;
        struct tm tm;
        int n;

        new_request_id(b->h, id);
        if (digits)
                snprintf(msg, sizeof(msg), "Content-Length %.40s is larger than max_body_bytes",
                         b->value);
        else
                snprintf(msg, sizeof(msg), "invalid Content-Length '%.40s'", b->value);
        if (gmtime_r(&now, &tm) != NULL)
                strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        rnnd_strbuf_init_fixed(&body, json, sizeof(json));
        rnnd_strbuf_putc(&body, '{');
        rnnd_strbuf_json_kv_str(&body, "error", msg);
        rnnd_strbuf_putc(&body, '}');
        n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nDate: %s\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nX-Request-Id: %s\r\n"
                     "Content-Length: %zu\r\n\r\n%s",
                     rnnd_error_http_status(code), digits ? "Content Too Large" : "Bad Request",
                     date, id, body.len, body.data);
        if (n > 0 && (size_t)n < sizeof(head))
                (void)send(fd, head, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
        refused_line(b->h, id, uri, (unsigned)rnnd_error_http_status(code),
                     n > 0 && (size_t)n < sizeof(head) ? (size_t)n : 0, msg);
}

/* MHD's error log, into rnnd_log at warning.  cls is the struct rnnd_http. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
        /*
         * What one client's connection did: a line per connection under a flood
         * of them (the daemon's own lines about reaped connections sum them up).
         */
        static const char *const per_connection[] = {
                "Connection socket is closed", "Server reached connection limit",
                "Server reached per-IP",       "Failed to receive data",
                "Failed to send data",         "Connection was closed by remote side",
        };
        int level = RNND_LOG_WARNING;
        static _Thread_local bool refused;

        if (strncmp(fmt, "Failed to parse `Content-Length'", 32) == 0 ||
            strncmp(fmt, "Too large value of 'Content-Length'", 35) == 0) {
                struct bad_length b = {.h = cls};

                refused = rnnd__http_conn_refuse_head(cls, has_bad_length, answer_bad_length, &b);
                if (refused)
                        level = RNND_LOG_DEBUG; /* answered, counted and logged by rnnd */
        } else if (refused && strncmp(fmt, "Error processing request", 24) == 0) {
                level = RNND_LOG_DEBUG; /* MHD's own answer to it, which goes nowhere: */
        } else if (refused && strncmp(fmt, "Failed to send the response headers", 35) == 0) {
                level = RNND_LOG_DEBUG; /* rnnd shut the socket */
                refused = false;
        }
        for (size_t i = 0; i < sizeof(per_connection) / sizeof(per_connection[0]); i++)
                if (strncmp(fmt, per_connection[i], strlen(per_connection[i])) == 0)
                        level = RNND_LOG_DEBUG;
        /* A client's malformed request, which MHD answered: at an access line's level. */
        if (strncmp(fmt, "Error processing request", 24) == 0 && level == RNND_LOG_WARNING)
                level = RNND_LOG_NOTICE;
        if (rnnd_log_enabled(level))
                rnnd_log_writev(level, NULL, fmt, ap);
}

/* The front end's life. */

void rnnd_http_init(struct rnnd_http *h, struct rnnd_server *app,
                    const struct rnnd_options *_Atomic *opts)
{
        memset(h, 0, sizeof(*h));
        h->app = app;
        h->opts = opts;
        h->listen_fd = -1;
        h->second_fd = -1;
        if (getrandom(&h->id_seed, sizeof(h->id_seed), GRND_NONBLOCK) !=
            (ssize_t)sizeof(h->id_seed))
                h->id_seed = (uint32_t)getpid() ^ (uint32_t)time(NULL);
}

/*
 * The socket systemd passed (socket activation), -1 for none, or a negative
 * RNND_E*.  A second one, in the order of rnnd.socket's ListenStream lines,
 * is the gRPC front end's (h->second_fd).
 */
static int activated_socket(struct rnnd_http *h, rnnd_error_t *reterr)
{
        int n = sd_listen_fds(1);

        if (n < 0)
                return rnnd_error_set(reterr, RNND_EIO, "sd_listen_fds: %s", strerror(-n));
        if (n == 0)
                return -1;
        if (n > 2)
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      "systemd passed %d sockets; rnnd listens on two at most "
                                      "(HTTP, then gRPC)",
                                      n);
        for (int i = 0; i < n; i++)
                if (sd_is_socket(SD_LISTEN_FDS_START + i, AF_UNSPEC, SOCK_STREAM, 1) <= 0)
                        return rnnd_error_set(reterr, RNND_EINVAL,
                                              "socket %d systemd passed is not a listening "
                                              "stream socket",
                                              i + 1);
        if (n == 2)
                h->second_fd = SD_LISTEN_FDS_START + 1;
        return SD_LISTEN_FDS_START;
}

/* Writes where h listens into h->listen_name: fd >= 0 is systemd's socket, else host:port. */
static void name_listener(struct rnnd_http *h, int fd, const char *host)
{
        unsigned bound = rnnd__http_listen_port(h);

        if (fd >= 0)
                snprintf(h->listen_name, sizeof(h->listen_name), "fd %d from systemd, port %u", fd,
                         bound);
        else if (strchr(host, ':') != NULL)
                snprintf(h->listen_name, sizeof(h->listen_name), "[%s]:%u", host, bound);
        else
                snprintf(h->listen_name, sizeof(h->listen_name), "%s:%u", host, bound);
}

/* The listening socket: systemd's, or host:port of opts->listen (http-listen.c). */
static int open_listener(struct rnnd_http *h, char *host, size_t cap, rnnd_error_t *reterr)
{
        unsigned port = 0;
        int fd = activated_socket(h, reterr), r;

        if (fd < -1)
                return fd;
        if (fd < 0) {
                r = rnnd_options_split_listen((*h->opts)->listen, host, cap, &port, reterr);
                if (r < 0) {
                        rnnd_error_prefix(reterr, "listen");
                        return r;
                }
        }
        r = rnnd__http_listen_open(h, fd, host, port, reterr);
        if (r < 0) {
                if (fd < 0)
                        rnnd_error_prefix(reterr, "listen %s", (*h->opts)->listen);
                return r;
        }
        name_listener(h, fd, host);
        return 0;
}

int rnnd_http_start(struct rnnd_http *h, rnnd_error_t *reterr)
{
        const struct rnnd_options *o = *h->opts;
        unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
                         MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
        unsigned threads = rnnd_options_threads(o);
        struct MHD_OptionItem pool[2] = {{MHD_OPTION_END, 0, NULL}, {MHD_OPTION_END, 0, NULL}};
        char host[256] = "", body[32];
        int r;

        /* MHD enforces connection_limit; the slack covers connections it is closing. */
        if (rnnd__http_conns_init(h, (size_t)o->connection_limit + 64) < 0)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
        r = open_listener(h, host, sizeof(host), reterr);
        if (r < 0)
                return r;
        /*
         * A pool of one is no pool: libmicrohttpd warns that the size is
         * ignored, so one thread (one CPU in the affinity mask) goes unsaid.
         */
        if (threads > 1)
                pool[0] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)threads,
                                                  NULL};
        /* The logger first, so that MHD reports problems with the rest through it. */
        h->mhd = MHD_start_daemon(
                flags, 0, NULL, NULL, access_cb, h, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,
                MHD_OPTION_ARRAY, pool, MHD_OPTION_CONNECTION_TIMEOUT,
                (unsigned int)o->connection_timeout, MHD_OPTION_CONNECTION_LIMIT,
                (unsigned int)o->connection_limit, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                (size_t)o->per_connection_memory, MHD_OPTION_NOTIFY_COMPLETED, completed_cb, h,
                MHD_OPTION_UNESCAPE_CALLBACK, unescape_cb, NULL, MHD_OPTION_URI_LOG_CALLBACK,
                uri_log_cb, h, MHD_OPTION_NOTIFY_CONNECTION, rnnd__http_conn_notify, h,
                MHD_OPTION_END);
        if (h->mhd == NULL)
                return rnnd_error_set(reterr, RNND_EIO, "cannot start the HTTP server (see above)");
        r = rnnd__http_listen_start(h, reterr);
        if (r < 0)
                return r;
        /* The body limit as rnnd.conf spells it (64M), not 67108864. */
        rnnd_options_format(o, rnnd_options_find("max_body_bytes"), body, sizeof(body));
        rnnd_log(RNND_LOG_NOTICE,
                 "listening on %s (%u HTTP thread%s, %" PRIu64 " connections, %" PRIu64
                 "s timeout, max_body_bytes %s)",
                 h->listen_name, threads, threads == 1 ? "" : "s", o->connection_limit,
                 o->connection_timeout, body);
        return 0;
}

void rnnd_http_quiesce(struct rnnd_http *h)
{
        atomic_store(&h->stopping, true);
        rnnd__http_listen_stop(h); /* not MHD_quiesce_daemon(): see http-listen.c */
}

void rnnd_http_stop(struct rnnd_http *h)
{
        rnnd__http_listen_stop(h); /* before MHD goes: it hands connections to MHD */
        if (h->mhd != NULL) {
                MHD_stop_daemon(h->mhd);
                h->mhd = NULL;
        }
        rnnd__http_conns_done(h);
        rnnd__http_listen_close(h);
}

bool rnnd_http_listening(const struct rnnd_http *h)
{
        return h->mhd != NULL;
}

bool rnnd_http_stopping(const struct rnnd_http *h)
{
        return atomic_load(&h->stopping);
}

unsigned rnnd_http_inflight(const struct rnnd_http *h)
{
        return atomic_load(&h->inflight);
}

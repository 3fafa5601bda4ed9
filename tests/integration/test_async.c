/*
 * test_async.c: the inference hook's asynchronous path, in process: a hook
 * that suspends every request and answers it from a worker thread, many
 * clients at once, and a SIGTERM drain that has the hook answer stalled
 * requests 503.  This is the contract daemon/server.h documents for the real
 * inference hook (DESIGN.md §2: suspend first, publish second, respond
 * then resume, queue only in the handler).
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "alloc.h"
#include "check-main.h"
#include "http.h"
#include "infer.h"
#include "log.h"
#include "options.h"
#include "routes.h"
#include "server.h"

#define MAX_PENDING 256

/* A bounded queue of suspended requests and the worker that answers them. */
struct fake_engine {
        pthread_mutex_t mu;
        pthread_cond_t cv;
        struct rnnd_http_request *items[MAX_PENDING]; /* guarded by mu */
        size_t n;                                     /* guarded by mu */
        bool quit;                                    /* guarded by mu */
        bool answer;        /* the worker answers (false: only drain() does); immutable */
        pthread_t worker;   /* the worker thread */
        int stopped;        /* stop() ran; loop thread only */
        int drained;        /* drain() ran; loop thread only */
        atomic_int freed;   /* per-request data freed; atomic */
        atomic_int handled; /* handle() calls; atomic */
};

static void free_data(void *data)
{
        struct fake_engine *e = data;

        atomic_fetch_add(&e->freed, 1);
}

static int fake_handle(void *cls, struct rnnd_http_request *req, struct rnnd_served_version *sv,
                       enum rnnd_server_protocol proto, rnnd_error_t *reterr)
{
        struct fake_engine *e = cls;

        (void)sv;
        (void)proto;
        atomic_fetch_add(&e->handled, 1);
        pthread_mutex_lock(&e->mu);
        if (e->n == MAX_PENDING) {
                pthread_mutex_unlock(&e->mu);
                return rnnd_error_set(reterr, RNND_EUNAVAIL, "queue full");
        }
        rnnd_http_request_set_data(req, e, free_data);
        /* Suspend first, then publish (the engine's reference goes with it). */
        rnnd_http_suspend(req);
        e->items[e->n++] = rnnd_http_request_ref(req);
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        return 0;
}

static void answer(struct rnnd_http_request *r, unsigned status)
{
        size_t len;
        const char *body = rnnd_http_request_body(r, &len);
        char *out = rnnd_malloc(128);
        int n;

        (void)body;
        if (out == NULL)
                abort(); /* Not a Check assertion: this runs on the worker thread. */
        n = snprintf(out, 128, "{\"echo\":%zu,\"id\":\"%s\"}", len, rnnd_http_request_id(r));
        rnnd_http_respond(r, status, "application/json", out, (size_t)n);
        rnnd_http_resume(r);
        rnnd_http_request_unref(r);
}

static void *worker_main(void *arg)
{
        struct fake_engine *e = arg;

        pthread_mutex_lock(&e->mu);
        for (;;) {
                while (!e->quit && (e->n == 0 || !e->answer))
                        pthread_cond_wait(&e->cv, &e->mu);
                if (e->quit)
                        break;
                while (e->n > 0) {
                        struct rnnd_http_request *r = e->items[--e->n];

                        pthread_mutex_unlock(&e->mu);
                        usleep(5000); /* "compute" */
                        answer(r, 200);
                        pthread_mutex_lock(&e->mu);
                }
        }
        pthread_mutex_unlock(&e->mu);
        return NULL;
}

static void fake_drain(void *cls)
{
        struct fake_engine *e = cls;

        e->drained++;
        pthread_mutex_lock(&e->mu);
        while (e->n > 0) {
                struct rnnd_http_request *r = e->items[--e->n];

                rnnd_http_respond_error(r, 503, "draining");
                rnnd_http_resume(r);
                rnnd_http_request_unref(r);
        }
        pthread_mutex_unlock(&e->mu);
}

static void fake_stop(void *cls)
{
        struct fake_engine *e = cls;

        e->stopped++;
        pthread_mutex_lock(&e->mu);
        e->quit = true;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->worker, NULL);
}

static const char *const fake_extensions[] = {"fake_async", NULL};

/* The daemon under test: built in the test's process, served from its main thread. */
static struct rnnd_options opts;
static struct rnnd_server *srv;
static struct fake_engine engine;
static int port;

static void start(bool answer_in_worker, const char *shutdown_timeout)
{
        struct rnnd_server_hook hook = {
                .handle = fake_handle,
                .drain = fake_drain,
                .stop = fake_stop,
                .extensions = fake_extensions,
                .cls = &engine,
        };
        char repo[4096];
        rnnd_error_t err = {0};
        const char *colon;

        rnnd_log_setup(RNND_LOG_WARNING, RNND_LOG_TEXT, 2);
        rnnd_infer_global_init();
        snprintf(repo, sizeof(repo), "%s/golden/models", rnnd_test_dir());
        ck_assert_int_eq(rnnd_options_init(&opts), 0);
        ck_assert_int_eq(
                rnnd_options_set(&opts, rnnd_options_find("model_repository"), repo, "t", &err), 0);
        ck_assert_int_eq(
                rnnd_options_set(&opts, rnnd_options_find("listen"), "127.0.0.1:0", "t", &err), 0);
        ck_assert_int_eq(rnnd_options_set(&opts, rnnd_options_find("threads"), "4", "t", &err), 0);
        ck_assert_int_eq(rnnd_options_set(&opts, rnnd_options_find("shutdown_timeout"),
                                          shutdown_timeout, "t", &err),
                         0);

        memset(&engine, 0, sizeof(engine));
        pthread_mutex_init(&engine.mu, NULL);
        pthread_cond_init(&engine.cv, NULL);
        engine.answer = answer_in_worker;
        ck_assert_int_eq(pthread_create(&engine.worker, NULL, worker_main, &engine), 0);

        ck_assert_msg(rnnd_server_new(&opts, &srv, &err) == 0, "%s", err.msg);
        rnnd_server_set_infer_hook(srv, &hook);
        rnnd_server_set_routes(srv, &rnnd_routes);
        ck_assert_msg(rnnd_server_start(srv, &err) == 0, "%s", err.msg);
        colon = strrchr(srv->http.listen_name, ':');
        ck_assert_ptr_nonnull(colon);
        port = atoi(colon + 1);
        ck_assert_int_gt(port, 0); /* port 0 was resolved and reported */
}

static void finish(void)
{
        srv = rnnd_server_free(srv);
        rnnd_options_done(&opts);
        pthread_cond_destroy(&engine.cv);
        pthread_mutex_destroy(&engine.mu);
}

/* One HTTP/1.1 exchange on a new connection: returns the status, body into out[cap]. */
static int http(const char *method, const char *path, const char *body, char *out, size_t cap)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        char req[1024], resp[8192];
        size_t got = 0;
        int fd, status = -1, n;
        const char *sep;

        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
                if (fd >= 0)
                        close(fd);
                return -1;
        }
        n = snprintf(
                req, sizeof(req),
                "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s",
                method, path, strlen(body), body);
        if (write(fd, req, (size_t)n) != n) {
                close(fd);
                return -1;
        }
        while (got + 1 < sizeof(resp)) {
                ssize_t r = read(fd, resp + got, sizeof(resp) - 1 - got);

                if (r <= 0)
                        break;
                got += (size_t)r;
        }
        resp[got] = '\0';
        close(fd);
        sscanf(resp, "HTTP/1.1 %d", &status);
        sep = strstr(resp, "\r\n\r\n");
        snprintf(out, cap, "%s", sep != NULL ? sep + 4 : "");
        return status;
}

#define CLIENTS    16
#define PER_CLIENT 8

static atomic_int ok_count;

static void *client_main(void *arg)
{
        char body[256], path[256];
        int i;

        (void)arg;
        snprintf(path, sizeof(path), "/v2/models/lstm_l1_uni_equal_h0/infer");
        for (i = 0; i < PER_CLIENT; i++) {
                int st = http("POST", path, "{\"inputs\":[]}", body, sizeof(body));

                if (st == 200 && strstr(body, "\"echo\":13") != NULL)
                        atomic_fetch_add(&ok_count, 1);
        }
        return NULL;
}

static void *many_then_term(void *arg)
{
        pthread_t t[CLIENTS];
        char body[256];
        int i;

        (void)arg;
        for (i = 0; i < CLIENTS; i++)
                pthread_create(&t[i], NULL, client_main, NULL);
        for (i = 0; i < CLIENTS; i++)
                pthread_join(t[i], NULL);
        /* The hook's extension shows in server metadata. */
        if (http("GET", "/v2", "", body, sizeof(body)) == 200 &&
            strstr(body, "\"fake_async\"") != NULL)
                atomic_fetch_add(&ok_count, 1000);
        kill(getpid(), SIGTERM);
        return NULL;
}

START_TEST(test_suspend_resume_many)
{
        rnnd_error_t err = {0};
        pthread_t client;

        start(true, "5");
        atomic_store(&ok_count, 0);
        pthread_create(&client, NULL, many_then_term, NULL);
        ck_assert_msg(rnnd_server_run(srv, &err) == 0, "%s", err.msg); /* returns after SIGTERM */
        pthread_join(client, NULL);
        ck_assert_int_eq(atomic_load(&ok_count), CLIENTS * PER_CLIENT + 1000);
        ck_assert_int_eq(atomic_load(&engine.handled), CLIENTS * PER_CLIENT);
        ck_assert_int_eq(engine.drained, 0); /* nothing was left to drain */
        ck_assert_int_eq(engine.stopped, 1);
        ck_assert_uint_eq(atomic_load(&srv->http.suspended), 0);
        ck_assert_uint_eq(atomic_load(&srv->http.inflight), 0);
        finish();
        /* Every request's data was freed with the request. */
        ck_assert_int_eq(atomic_load(&engine.freed), CLIENTS * PER_CLIENT);
}
END_TEST

static int stalled_status;
static char stalled_body[256];

static void *stalled_client(void *arg)
{
        (void)arg;
        stalled_status = http("POST", "/v2/models/lstm_l1_uni_equal_h0/versions/1/infer", "{}",
                              stalled_body, sizeof(stalled_body));
        return NULL;
}

static void *term_when_stalled(void *arg)
{
        pthread_t c;
        int i;

        (void)arg;
        pthread_create(&c, NULL, stalled_client, NULL);
        for (i = 0; i < 500 && atomic_load(&srv->http.suspended) == 0; i++)
                usleep(10000);
        kill(getpid(), SIGTERM);
        pthread_join(c, NULL);
        return NULL;
}

START_TEST(test_drain_on_sigterm)
{
        rnnd_error_t err = {0};
        struct timespec t0, t1;
        pthread_t client;
        double secs;

        start(false, "1"); /* the worker never answers: only drain() does */
        clock_gettime(CLOCK_MONOTONIC, &t0);
        pthread_create(&client, NULL, term_when_stalled, NULL);
        ck_assert_msg(rnnd_server_run(srv, &err) == 0, "%s", err.msg);
        pthread_join(client, NULL);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        ck_assert_int_eq(stalled_status, 503);
        ck_assert_msg(strstr(stalled_body, "draining") != NULL, "%s", stalled_body);
        ck_assert_int_eq(engine.drained, 1);
        ck_assert_int_eq(engine.stopped, 1);
        ck_assert_msg(secs >= 0.9 && secs < 10, "drain took %.2fs", secs);
        finish();
        ck_assert_int_eq(atomic_load(&engine.freed), 1);
}
END_TEST

/*
 * SIGTERM while a repository load is still running after shutdown_timeout:
 * the load's client is answered 503 and the daemon stops cleanly (it
 * aborted in libmicrohttpd: "MHD_stop_daemon() called while we have
 * suspended connections", issue 18 item 2).  libuv's one pool thread is
 * held by a 3 s job queued first, so the load cannot finish in time.
 */
static int load_status;
static char load_body[512];

static void hold_pool(uv_work_t *w)
{
        (void)w;
        sleep(3);
}

static void *load_client(void *arg)
{
        (void)arg;
        load_status = http("POST", "/v2/repository/models/lstm_l1_uni_equal_h0/load", "{}",
                           load_body, sizeof(load_body));
        return NULL;
}

static void *term_when_loading(void *arg)
{
        pthread_t c;
        int i;

        (void)arg;
        pthread_create(&c, NULL, load_client, NULL);
        for (i = 0; i < 500 && atomic_load(&srv->http.suspended) == 0; i++)
                usleep(10000);
        kill(getpid(), SIGTERM);
        pthread_join(c, NULL);
        return NULL;
}

START_TEST(test_drain_with_load_running)
{
        rnnd_error_t err = {0};
        uv_work_t hold;
        pthread_t client;

        setenv("UV_THREADPOOL_SIZE", "1", 1); /* this forked test's first libuv work */
        start(true, "0");
        ck_assert_int_eq(uv_queue_work(&srv->loop, &hold, hold_pool, NULL), 0);
        pthread_create(&client, NULL, term_when_loading, NULL);
        ck_assert_msg(rnnd_server_run(srv, &err) == 0, "%s", err.msg);
        pthread_join(client, NULL);
        ck_assert_int_eq(load_status, 503);
        ck_assert_msg(strstr(load_body, "shutting down") != NULL, "%s", load_body);
        ck_assert_uint_eq(atomic_load(&srv->http.suspended), 0);
        finish();
}
END_TEST

static Suite *async_suite(void)
{
        Suite *s = suite_create("async");
        TCase *tc = tcase_create("hook");

        tcase_set_timeout(tc, 60);
        tcase_add_test(tc, test_suspend_resume_many);
        tcase_add_test(tc, test_drain_on_sigterm);
        tcase_add_test(tc, test_drain_with_load_running);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(async_suite)

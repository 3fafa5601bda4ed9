/*
 * http-listen.c: the listening socket and the thread that accepts on it,
 * handing each connection to libmicrohttpd (http-int.h).
 *
 * DESIGN
 * libmicrohttpd 0.9.75's MHD_quiesce_daemon() races its own pool threads:
 * from the calling thread it removes the listening socket from each
 * worker's epoll set, while a worker that wakes and sees the daemon
 * quiesced removes it too; whichever comes second finds it gone and panics
 * (abort()).  That was the rare SIGTERM-time abort of a daemon under load
 * (issue 29: "SIGTERM exits 0: -6"; delaying the quiescing thread's
 * epoll_ctl by 100 ms makes it abort every time).  So MHD runs without a
 * listening socket (MHD_USE_NO_LISTEN_SOCKET) and this file's one thread
 * accepts and hands each connection over with MHD_add_connection(), which
 * gives it to a worker with room and enforces connection_limit and the
 * per-IP limit.  Quiescing is stopping that thread; the socket stays open,
 * for connections to wait in its backlog (systemd's socket keeps it for
 * the next instance), until rnnd_http_stop() closes it.  The thread waits
 * in poll() on the socket and an eventfd that stop writes to.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "http-int.h"
#include "log.h"

struct rnnd_listener {
        int fd;           /* the listening socket; owned */
        int wake;         /* eventfd: the thread stops when it is readable */
        pthread_t thread; /* the accept thread, while running */
        bool running;     /* loop thread only */
};

/* A new listening socket bound to host:port, or a negative RNND_E*. */
static int bind_socket(const char *host, unsigned port, rnnd_error_t *reterr)
{
        struct addrinfo *ai = NULL;
        int fd, r = rnnd_options_resolve_listen(NULL, host, port, &ai, reterr);

        if (r < 0)
                return r;
        fd = rnnd_options_bind(ai, SOCK_NONBLOCK);
        if (fd < 0 || listen(fd, SOMAXCONN) < 0) {
                r = rnnd_error_set(reterr, RNND_EIO, "cannot listen on %s port %u: %s", host, port,
                                   strerror(errno));
                if (fd >= 0)
                        close(fd);
        } else {
                r = fd;
        }
        freeaddrinfo(ai);
        return r;
}

int rnnd__http_listen_open(struct rnnd_http *h, int fd, const char *host, unsigned port,
                           rnnd_error_t *reterr)
{
        struct rnnd_listener *l;

        if (fd < 0) {
                fd = bind_socket(host, port, reterr);
                if (fd < 0)
                        return fd;
        } else if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) < 0) {
                return rnnd_error_set(reterr, RNND_EIO, "the socket systemd passed: %s",
                                      strerror(errno));
        }
        l = rnnd_calloc(1, sizeof(*l));
        if (l == NULL || (l->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
                rnnd_free(l);
                close(fd);
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
        }
        l->fd = fd;
        h->listener = l;
        h->listen_fd = fd;
        return 0;
}

unsigned rnnd__http_listen_port(const struct rnnd_http *h)
{
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);

        if (h->listener == NULL || getsockname(h->listener->fd, (struct sockaddr *)&ss, &len) < 0)
                return 0;
        if (ss.ss_family == AF_INET)
                return ntohs(((struct sockaddr_in *)&ss)->sin_port);
        if (ss.ss_family == AF_INET6)
                return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        return 0;
}

/* How often a full table is looked at again. */
#define FULL_POLL_MS 20

/* Accepts what waits and hands it to MHD; false when out of descriptors (back off). */
static bool accept_ready(struct rnnd_http *h, int fd)
{
        for (;;) {
                struct sockaddr_storage ss;
                socklen_t len = sizeof(ss);
                int c = accept4(fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);

                if (c < 0) {
                        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                            errno == ENOMEM) {
                                rnnd_log(RNND_LOG_WARNING, "accept: %s; waiting 100 ms",
                                         strerror(errno));
                                return false;
                        }
                        return true; /* EAGAIN, or the client already gone */
                }
                /* On failure (connection_limit, the per-IP limit) MHD closes it. */
                if (MHD_add_connection(h->mhd, c, (struct sockaddr *)&ss, len) == MHD_YES)
                        rnnd__http_conns_handed(h);
                if (rnnd__http_conns_open(h) >= (size_t)(*h->opts)->connection_limit)
                        return true;
        }
}

static void *accept_main(void *arg)
{
        struct rnnd_http *h = arg;
        struct rnnd_listener *l = h->listener;
        struct pollfd pfd[2] = {{.fd = l->fd, .events = POLLIN}, {.fd = l->wake, .events = POLLIN}};

        for (;;) {
                /*
                 * At connection_limit, new clients wait in the backlog, as
                 * MHD's own accept let them, until a connection closes (the
                 * reaper makes room near the limit: http-conns.c).
                 */
                bool full = rnnd__http_conns_open(h) >= (size_t)(*h->opts)->connection_limit;

                pfd[0].events = full ? 0 : POLLIN;
                if (poll(pfd, 2, full ? FULL_POLL_MS : -1) < 0 && errno != EINTR)
                        break;
                if (pfd[1].revents != 0)
                        break;
                if ((pfd[0].revents & POLLIN) && !accept_ready(h, l->fd))
                        nanosleep(&(struct timespec){0, 100000000}, NULL);
        }
        return NULL;
}

int rnnd__http_listen_start(struct rnnd_http *h, rnnd_error_t *reterr)
{
        struct rnnd_listener *l = h->listener;
        int r = pthread_create(&l->thread, NULL, accept_main, h);

        if (r != 0)
                return rnnd_error_set(reterr, RNND_EIO, "cannot start the accept thread: %s",
                                      strerror(r));
        l->running = true;
        return 0;
}

void rnnd__http_listen_stop(struct rnnd_http *h)
{
        struct rnnd_listener *l = h->listener;
        uint64_t one = 1;

        if (l == NULL || !l->running)
                return;
        if (write(l->wake, &one, sizeof(one)) != (ssize_t)sizeof(one))
                rnnd_log(RNND_LOG_ERR, "cannot wake the accept thread: %s", strerror(errno));
        pthread_join(l->thread, NULL);
        l->running = false;
}

void rnnd__http_listen_close(struct rnnd_http *h)
{
        struct rnnd_listener *l = h->listener;

        if (l == NULL)
                return;
        rnnd__http_listen_stop(h);
        close(l->wake);
        close(l->fd);
        rnnd_free(l);
        h->listener = NULL;
        h->listen_fd = -1;
}

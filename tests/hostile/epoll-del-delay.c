/*
 * epoll-del-delay.c: an LD_PRELOAD shim for tests/hostile/test_connections.py
 * (test_stop_under_load).  It delays every EPOLL_CTL_DEL the process's main
 * thread makes by 100 ms, which widens the window in which libmicrohttpd
 * 0.9.75's MHD_quiesce_daemon() races its pool threads (daemon/http-listen.c)
 * from microseconds to the whole delay: rnnd with MHD_quiesce_daemon()
 * aborts at SIGTERM every time under it.  Test code only; never installed.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
        static int (*real)(int, int, int, struct epoll_event *);

        if (real == NULL)
                real = (int (*)(int, int, int, struct epoll_event *))dlsym(RTLD_NEXT, "epoll_ctl");
        if (op == EPOLL_CTL_DEL && syscall(SYS_gettid) == getpid())
                nanosleep(&(struct timespec){0, 100000000}, NULL);
        return real(epfd, op, fd, ev);
}

/*
 * clock.h: the monotonic clock that every folder times requests, jobs and
 * batches with, so that times taken in daemon/ and engine/ compare.
 */
#ifndef RNND_PROTO_CLOCK_H
#define RNND_PROTO_CLOCK_H

#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC in nanoseconds.  Thread-safe. */
static inline uint64_t rnnd_now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif

/* alloc.c: the failure-injecting allocator wrappers. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

static atomic_long fail_countdown = -1; /* atomic; < 0 means never fail */
static atomic_long ok_count;            /* atomic */
static atomic_long failed_count;        /* atomic */

/*
 * Disarmed (every allocation of a running daemon) this is one relaxed load:
 * a shared counter bumped by every thread's every allocation cost the gRPC
 * loops and the workers a contended cache line a call.
 */
static int should_fail(void)
{
        long n = atomic_load_explicit(&fail_countdown, memory_order_relaxed);

        if (n < 0)
                return 0;
        while (n >= 0) {
                if (n == 0) {
                        atomic_fetch_add(&failed_count, 1);
                        return 1;
                }
                if (atomic_compare_exchange_weak(&fail_countdown, &n, n - 1))
                        break;
        }
        atomic_fetch_add(&ok_count, 1);
        return 0;
}

void *rnnd_malloc(size_t n)
{
        if (should_fail())
                return NULL;
        return malloc(n ? n : 1);
}

void *rnnd_calloc(size_t count, size_t size)
{
        if (should_fail())
                return NULL;
        if (count == 0 || size == 0)
                count = size = 1;
        return calloc(count, size);
}

void *rnnd_realloc(void *p, size_t n)
{
        if (should_fail())
                return NULL;
        return realloc(p, n ? n : 1);
}

void rnnd_free(void *p)
{
        free(p);
}

char *rnnd_strdup(const char *s)
{
        size_t n = strlen(s) + 1;
        char *d = rnnd_malloc(n);

        if (d != NULL)
                memcpy(d, s, n);
        return d;
}

void *rnnd_mallocarray(size_t count, size_t size)
{
        if (size != 0 && count > SIZE_MAX / size)
                return NULL;
        return rnnd_malloc(count * size);
}

long rnnd_alloc_fail_after(long n)
{
        atomic_store(&fail_countdown, n < 0 ? -1 : n);
        return atomic_exchange(&ok_count, 0);
}

long rnnd_alloc_failed_count(void)
{
        return atomic_load(&failed_count);
}

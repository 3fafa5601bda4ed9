/*
 * alloc.h: the allocator every rnnd module uses, so that tests can make the
 * Nth allocation fail (like libuv's uv__malloc and SQLite's faultsim).
 */
#ifndef RNND_PROTO_ALLOC_H
#define RNND_PROTO_ALLOC_H

#include <stddef.h>

/* Like malloc/calloc/realloc/free/strdup, but may be made to fail.  Thread-safe. */
void *rnnd_malloc(size_t n);
void *rnnd_calloc(size_t count, size_t size);
void *rnnd_realloc(void *p, size_t n);
void rnnd_free(void *p);
char *rnnd_strdup(const char *s);

/*
 * Returns a new array of count elements of size bytes, or NULL when the
 * product overflows or memory runs out.  Thread-safe.
 */
void *rnnd_mallocarray(size_t count, size_t size);

/*
 * Test hook: after n more successful allocations, every following one fails
 * until this is called again; n < 0 turns failures off.  Returns how many
 * allocations succeeded while failures were armed since the previous call.
 * Thread-safe.
 */
long rnnd_alloc_fail_after(long n);

/* Number of allocations that were made to fail so far.  Thread-safe. */
long rnnd_alloc_failed_count(void);

#endif

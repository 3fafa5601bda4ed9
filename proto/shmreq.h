/*
 * shmreq.h: the body of Triton's system shared memory register request
 * (docs/HTTP.md "Shared memory"): POST v2/systemsharedmemory/region/{name}/register
 * {"key": "/name", "offset": N, "byte_size": N}, and the checks both wires
 * (HTTP's JSON, gRPC's SystemSharedMemoryRegisterRequest) make of a region.
 */
#ifndef RNND_PROTO_SHMREQ_H
#define RNND_PROTO_SHMREQ_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* Largest body of a register request. */
#define RNND_SHMREQ_MAX_BODY 4096u
/* A key: "/" and a name of at most NAME_MAX (255) bytes, as shm_open(3) takes it; incl. NUL. */
#define RNND_SHMREQ_KEY_MAX 257u

struct rnnd_shmreq {
        char key[RNND_SHMREQ_KEY_MAX];
        uint64_t offset;
        uint64_t byte_size;
};

/*
 * Parses body[0..len) into *ret and checks it (rnnd_shmreq_check()).
 * Errors: RNND_ETOOBIG (over RNND_SHMREQ_MAX_BODY), RNND_EINVAL (not JSON,
 * an unknown key, a wrong type, a missing key or byte_size, a bad key),
 * naming the field.  Thread-safe.
 */
int rnnd_shmreq_parse(const char *body, size_t len, struct rnnd_shmreq *ret, rnnd_error_t *reterr);

/*
 * Checks a region to register: name (the region's, non-empty, shorter than
 * name_max), key ("/" and 1..255 bytes with no other "/", as shm_open(3)
 * names an object in /dev/shm: nothing else can be reached through it),
 * byte_size at least 1, offset + byte_size without overflow.  Thread-safe.
 */
int rnnd_shmreq_check(const char *name, size_t name_max, const struct rnnd_shmreq *q,
                      rnnd_error_t *reterr);

#endif

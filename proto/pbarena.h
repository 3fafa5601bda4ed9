/*
 * pbarena.h: the allocator protobuf messages are unpacked and built in
 * (docs/DESIGN.md §11): a bump allocator over chunks from rnnd_malloc, freed
 * all at once, with a cap on what it hands out.  protobuf-c's unpack
 * allocates from it (ProtobufCAllocator), so a message that would unpack to
 * more than the cap (a few bytes on the wire per element, many more in
 * memory) fails cleanly instead; a response built in it points at buffers
 * it does not own (the engine's outputs) and frees with it.
 */
#ifndef RNND_PROTO_PBARENA_H
#define RNND_PROTO_PBARENA_H

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

struct rnnd_pbarena_chunk;

struct rnnd_pbarena {
        ProtobufCAllocator pb;             /* for protobuf-c; allocator_data is the arena */
        struct rnnd_pbarena_chunk *chunks; /* newest first; owned */
        size_t used;                       /* bytes handed out, padding included */
        size_t cap;                        /* most bytes it hands out */
        int failed;                        /* an allocation was refused (cap or memory) */
};

/*
 * Sets a up empty, to hand out at most cap bytes.  Nothing is allocated
 * until the first request.  Thread-safe on distinct arenas.
 */
void rnnd_pbarena_init(struct rnnd_pbarena *a, size_t cap);

/*
 * n bytes aligned to 16, or NULL past the cap or out of memory (a->failed
 * set).  Valid until rnnd_pbarena_done().  Not thread-safe on one arena.
 */
void *rnnd_pbarena_alloc(struct rnnd_pbarena *a, size_t n);

/* A copy of s[0..n) with a NUL after it, in a; or NULL as rnnd_pbarena_alloc(). */
char *rnnd_pbarena_strndup(struct rnnd_pbarena *a, const char *s, size_t n);

/* Frees everything a handed out; a is empty again (same cap).  Accepts a zeroed arena. */
void rnnd_pbarena_done(struct rnnd_pbarena *a);

/*
 * Unpacks a message of type d from data[0..len) into a.  Returns it (valid
 * until rnnd_pbarena_done()), or NULL when the bytes are not such a message
 * or it would unpack to more than the arena's cap (a->failed then set).
 */
ProtobufCMessage *rnnd_pbarena_unpack(struct rnnd_pbarena *a, const ProtobufCMessageDescriptor *d,
                                      const void *data, size_t len);

/*
 * The name of a string field of the message of type d in data[0..len)
 * (nested messages and map entries too, `depth` levels deep already) that
 * holds a NUL byte (*nul set) or is not valid UTF-8 (*nul cleared), else
 * NULL.  protobuf-c unpacks strings NUL-terminated, so such a string would
 * be read cut short at its NUL: "a\0b" as "a"; and proto3 strings are
 * UTF-8, which a client's library checks when it parses what rnnd echoes
 * (a request's id) (docs/HTTP.md, gRPC).  For bytes that unpacked as d.
 * Thread-safe.
 */
const char *rnnd_pb_bad_string(const ProtobufCMessageDescriptor *d, const void *data, size_t len,
                               unsigned depth, bool *nul);

/*
 * Packs m into a new buffer of rnnd_malloc with `prefix` bytes left free in
 * front of it (gRPC's message header), *len the packed size without them.
 * NULL when memory runs out.  Thread-safe.
 */
void *rnnd_pb_pack(const ProtobufCMessage *m, size_t prefix, size_t *len);

#endif

/*
 * pbarena.c: the bounded bump allocator of protobuf messages (pbarena.h).
 * Chunks double from 4 KiB up to 1 MiB; a request larger than a chunk gets a
 * chunk of its own.  protobuf-c's free is a no-op: everything goes at once.
 */
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "pbarena.h"

#define ALIGN       16u
#define FIRST_CHUNK 4096u
#define MAX_CHUNK   (1u << 20)

struct rnnd_pbarena_chunk {
        struct rnnd_pbarena_chunk *next;
        size_t size, used; /* of data */
        _Alignas(16) unsigned char data[];
};

static void *pb_alloc(void *arena, size_t n)
{
        return rnnd_pbarena_alloc(arena, n);
}

static void pb_free(void *arena, void *p)
{
        (void)arena;
        (void)p;
}

void rnnd_pbarena_init(struct rnnd_pbarena *a, size_t cap)
{
        memset(a, 0, sizeof(*a));
        a->pb.alloc = pb_alloc;
        a->pb.free = pb_free;
        a->pb.allocator_data = a;
        a->cap = cap;
}

void *rnnd_pbarena_alloc(struct rnnd_pbarena *a, size_t n)
{
        struct rnnd_pbarena_chunk *c = a->chunks;
        /* protobuf-c asks for 0 bytes for empty arrays: they get a slot too. */
        size_t need = n == 0 ? ALIGN : (n + ALIGN - 1) & ~(size_t)(ALIGN - 1), size;
        void *p;

        if (need < n || need > a->cap - a->used) {
                a->failed = 1;
                return NULL;
        }
        if (c == NULL || c->size - c->used < need) {
                size = c == NULL ? FIRST_CHUNK : c->size * 2;
                if (size > MAX_CHUNK)
                        size = MAX_CHUNK;
                if (size < need)
                        size = need;
                c = rnnd_malloc(sizeof(*c) + size);
                if (c == NULL) {
                        a->failed = 1;
                        return NULL;
                }
                c->size = size;
                c->used = 0;
                c->next = a->chunks;
                a->chunks = c;
        }
        p = c->data + c->used;
        c->used += need;
        a->used += need;
        return p;
}

char *rnnd_pbarena_strndup(struct rnnd_pbarena *a, const char *s, size_t n)
{
        char *p = n < SIZE_MAX ? rnnd_pbarena_alloc(a, n + 1) : NULL;

        if (p == NULL)
                return NULL;
        memcpy(p, s, n);
        p[n] = '\0';
        return p;
}

void rnnd_pbarena_done(struct rnnd_pbarena *a)
{
        struct rnnd_pbarena_chunk *c = a->chunks, *next;

        for (; c != NULL; c = next) {
                next = c->next;
                rnnd_free(c);
        }
        a->chunks = NULL;
        a->used = 0;
        a->failed = 0;
}

ProtobufCMessage *rnnd_pbarena_unpack(struct rnnd_pbarena *a, const ProtobufCMessageDescriptor *d,
                                      const void *data, size_t len)
{
        return protobuf_c_message_unpack(d, &a->pb, len, data);
}

void *rnnd_pb_pack(const ProtobufCMessage *m, size_t prefix, size_t *len)
{
        size_t n = protobuf_c_message_get_packed_size(m);
        unsigned char *buf = n <= SIZE_MAX - prefix - 1 ? rnnd_malloc(prefix + n + 1) : NULL;

        if (buf == NULL)
                return NULL;
        *len = protobuf_c_message_pack(m, buf + prefix);
        return buf;
}

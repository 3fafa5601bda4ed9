/*
 * pbarena.c: the bounded bump allocator of protobuf messages (pbarena.h).
 * Chunks double from 4 KiB up to 1 MiB; a request larger than a chunk gets a
 * chunk of its own.  protobuf-c's free is a no-op: everything goes at once.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "pbarena.h"
#include "strbuf.h"

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

/* The varint at *p (before end), *p moved past it; false when it does not end there. */
static bool wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *ret)
{
        uint64_t v = 0;

        for (unsigned shift = 0; *p < end && shift < 64; shift += 7) {
                uint8_t b = *(*p)++;

                v |= (uint64_t)(b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        *ret = v;
                        return true;
                }
        }
        return false;
}

/* Skips a field's value of wire type wt at *p; false when malformed. */
static bool wire_skip(const uint8_t **p, const uint8_t *end, unsigned wt, uint64_t *len)
{
        size_t left = (size_t)(end - *p);

        *len = 0;
        if (wt == 0)
                return wire_varint(p, end, len);
        if (wt == 1 || wt == 5) {
                *len = wt == 1 ? 8 : 4;
                if (left < *len)
                        return false;
                *p += *len;
                return true;
        }
        return wt == 2 && wire_varint(p, end, len) && *len <= (uint64_t)(end - *p);
}

const char *rnnd_pb_bad_string(const ProtobufCMessageDescriptor *d, const void *data, size_t len,
                               unsigned depth, bool *nul)
{
        const uint8_t *p = data, *end = p + len;

        while (p < end) {
                const ProtobufCFieldDescriptor *f;
                const char *bad = NULL;
                uint64_t key, n;

                if (!wire_varint(&p, end, &key) || !wire_skip(&p, end, key & 7, &n))
                        return NULL; /* not this function's to say: unpack judged it */
                if ((key & 7) != 2 || key >> 3 > UINT32_MAX)
                        continue;
                f = protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3));
                if (f != NULL && f->type == PROTOBUF_C_TYPE_STRING &&
                    ((*nul = memchr(p, 0, n) != NULL) || !rnnd_utf8_valid(p, n)))
                        return f->name;
                if (f != NULL && f->type == PROTOBUF_C_TYPE_MESSAGE && depth < 16)
                        bad = rnnd_pb_bad_string(f->descriptor, p, n, depth + 1, nul);
                if (bad != NULL)
                        return bad;
                p += n;
        }
        return NULL;
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

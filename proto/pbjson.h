/*
 * pbjson.h: a JSON body turned into a protobuf message by the message's
 * descriptor (docs/DESIGN.md §11), so that the gRPC answers that describe
 * models are the very bodies the HTTP routes render (v2meta.c, tfsmeta.c,
 * repoapi.c).  proto3's JSON mapping by field name: an object is a message
 * (keys the message lacks are dropped), or a map (a repeated *Entry message
 * of key and value); an array a repeated field; a string an enum value's
 * name, a string field or a 64-bit integer written as a string; numbers and
 * booleans the scalars.  A member of a oneof sets its case; null is an unset
 * field.  bytes fields are not read.
 */
#ifndef RNND_PROTO_PBJSON_H
#define RNND_PROTO_PBJSON_H

#include <stddef.h>

#include "error.h"
#include "pbarena.h"

/*
 * Builds a message of type d in a from the JSON text json[0..len), or from
 * the value found by following path (a NULL-terminated list of object keys;
 * NULL or empty: the whole text).  *ret is valid until rnnd_pbarena_done(a).
 * Errors: RNND_EINVAL (not JSON, no value at path, a value of the wrong kind
 * for its field, naming it), RNND_ENOMEM (the arena refused); *ret is not
 * written on failure.  Thread-safe on distinct arenas.
 */
int rnnd_pbjson_message(struct rnnd_pbarena *a, const ProtobufCMessageDescriptor *d,
                        const char *json, size_t len, const char *const *path,
                        ProtobufCMessage **ret, rnnd_error_t *reterr);

#endif

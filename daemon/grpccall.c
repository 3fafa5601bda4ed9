/*
 * grpccall.c: what the gRPC methods' files share (grpccall.h): each call's
 * state and unpacking a request message.  Loop thread.
 */
#include <stdint.h>

#include "alloc.h"
#include "grpccall.h"

static void state_free(void *data)
{
        struct rnnd_grpccall *st = data;

        rnnd_models_unpin(st->model);
        rnnd_free(st);
}

struct rnnd_grpccall *rnnd_grpccall_state(struct rnnd_grpc_call *c)
{
        struct rnnd_grpccall *st = rnnd_grpc_call_data(c);

        if (st != NULL)
                return st;
        st = rnnd_calloc(1, sizeof(*st));
        if (st == NULL) {
                rnnd_grpc_finish(c, RNND_GRPC_INTERNAL, "out of memory");
                return NULL;
        }
        st->watched = -1;
        rnnd_grpc_call_set_data(c, st, state_free);
        return st;
}

int rnnd_grpccall_unpack(struct rnnd_pbarena *a, const ProtobufCMessageDescriptor *d,
                         const uint8_t *msg, size_t len, void **ret, rnnd_error_t *reterr)
{
        const char *field;
        bool nul = false;

        rnnd_pbarena_init(a, len <= SIZE_MAX / 8 - (1u << 20) ? 8 * len + (1u << 20) : SIZE_MAX);
        *ret = rnnd_pbarena_unpack(a, d, msg, len);
        field = *ret != NULL ? rnnd_pb_bad_string(d, msg, len, 0, &nul) : NULL;
        if (field != NULL) {
                *ret = NULL;
                return rnnd_error_set(reterr, RNND_EINVAL,
                                      nul ? "%s: a string holds a NUL byte, which would cut it "
                                            "short (\"a\\0b\" read as \"a\")"
                                          : "%s: a string that is not valid UTF-8 (protobuf "
                                            "strings are UTF-8)",
                                      field);
        }
        if (*ret != NULL)
                return 0;
        if (a->failed)
                return rnnd_error_set(reterr, RNND_ETOOBIG,
                                      "the %s message of %zu bytes unpacks to more than 8 times "
                                      "its size",
                                      d->name, len);
        return rnnd_error_set(reterr, RNND_EINVAL, "the request is not a %s message (protobuf)",
                              d->name);
}

/*
 * grpcsvc-int.h: what the gRPC methods' files share (grpcsvc.c, the control
 * methods and health; grpcinfer.c, inference): each call's own state, and
 * unpacking a request message.  Loop thread.
 */
#ifndef RNND_DAEMON_GRPCSVC_INT_H
#define RNND_DAEMON_GRPCSVC_INT_H

#include <stdbool.h>

#include "grpc.h"
#include "models.h"
#include "pbarena.h"

/* A call's state, the method table's (rnnd_grpc_call_data()). */
struct rnnd__grpcsvc_call {
        struct rnnd_served_model *model;       /* pinned until the call is over, or NULL */
        struct rnnd_served_version *version;   /* resolved in model, or NULL */
        bool counted;                          /* its requests were counted as they were answered */
        bool held;                             /* a repository load holds a reference */
        struct rnnd__grpcsvc_call *watch_next; /* health Watch calls (grpcsvc.c) */
        struct rnnd_grpc_call *call;           /* a Watch's, a reference while listed; or NULL */
        int watched;                           /* the status last sent to a Watch, or -1 */
        char service[128];                     /* what a Watch watches */
};

/* c's state, made at its first message; NULL when memory ran out (c then failed). */
struct rnnd__grpcsvc_call *rnnd__grpcsvc_state(struct rnnd_grpc_call *c);

/*
 * Unpacks msg[0..len) as a d into *ret, in a (set up here, bounded to 8
 * times the message and 1 MiB; the caller releases it with
 * rnnd_pbarena_done() either way).  Errors: RNND_EINVAL (not such a
 * message), RNND_ETOOBIG (past the bound: RESOURCE_EXHAUSTED).
 */
int rnnd__grpcsvc_unpack(struct rnnd_pbarena *a, const ProtobufCMessageDescriptor *d,
                         const uint8_t *msg, size_t len, void **ret, rnnd_error_t *reterr);

/* The HTTP status a gRPC status stands for, in rnnd_requests_total (docs/HTTP.md). */
unsigned rnnd__grpcsvc_http_status(int grpc_status);

/* ModelInfer, ModelStreamInfer (each message), Predict: grpcinfer.c. */
void rnnd__grpcinfer_model_infer(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len);
void rnnd__grpcinfer_stream_infer(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len);
void rnnd__grpcinfer_predict(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len);

#endif

/*
 * grpccall.h: what the gRPC methods' files share (grpcsvc.c, the control
 * methods and health; grpcinfer.c, inference; docs/DESIGN.md §11): each
 * call's own state, and unpacking a request message.  The call's loop thread.
 */
#ifndef RNND_DAEMON_GRPCCALL_H
#define RNND_DAEMON_GRPCCALL_H

#include <stdbool.h>

#include "grpc.h"
#include "models.h"
#include "pbarena.h"

/* A call's state, the method table's (rnnd_grpc_call_data()). */
struct rnnd_grpccall {
        struct rnnd_served_model *model;     /* pinned until the call is over, or NULL */
        struct rnnd_served_version *version; /* resolved in model, or NULL */
        bool counted;                        /* its requests were counted as they were answered */
        bool held;                           /* a repository load holds a reference */
        struct rnnd_grpccall *watch_next;    /* health Watch calls (grpcsvc.c) */
        struct rnnd_grpc_call *call;         /* a Watch's, a reference while listed; or NULL */
        int watched;                         /* the status last sent to a Watch, or -1 */
        char service[128];                   /* what a Watch watches */
        struct rnnd_grpc_post load_post;     /* a load's end, posted to the call's loop */
        unsigned load_status;                /* its HTTP status, 0 for done */
        char load_msg[256];                  /* and why not */
};

/* c's state, made at its first message; NULL when memory ran out (c then failed). */
struct rnnd_grpccall *rnnd_grpccall_state(struct rnnd_grpc_call *c);

/*
 * Unpacks msg[0..len) as a d into *ret, in a (set up here, bounded to 8
 * times the message and 1 MiB; the caller releases it with
 * rnnd_pbarena_done() either way).  Errors: RNND_EINVAL (not such a
 * message), RNND_ETOOBIG (past the bound: RESOURCE_EXHAUSTED).
 */
int rnnd_grpccall_unpack(struct rnnd_pbarena *a, const ProtobufCMessageDescriptor *d,
                         const uint8_t *msg, size_t len, void **ret, rnnd_error_t *reterr);

#endif

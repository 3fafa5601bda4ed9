/*
 * grpcsvc.h: the gRPC front end's methods (docs/DESIGN.md §11,
 * docs/HTTP.md "gRPC"): KServe v2's inference.GRPCInferenceService, TF
 * Serving's PredictionService and ModelService, and grpc.health.v1.Health,
 * as the method table main installs (rnnd_server_set_grpc()).
 */
#ifndef RNND_DAEMON_GRPCSVC_H
#define RNND_DAEMON_GRPCSVC_H

#include "grpc.h"

/* The table and its handler (grpc.h); immutable. */
extern const struct rnnd_grpc_method rnnd_grpcsvc_methods[];
extern const size_t rnnd_grpcsvc_methods_len;
extern const struct rnnd_grpc_handler rnnd_grpcsvc;

#endif

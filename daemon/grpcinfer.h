/*
 * grpcinfer.h: inference over gRPC (docs/HTTP.md "gRPC"), the methods
 * grpcsvc.c's table calls for ModelInfer, ModelStreamInfer (each message)
 * and Predict.  Loop thread.
 */
#ifndef RNND_DAEMON_GRPCINFER_H
#define RNND_DAEMON_GRPCINFER_H

#include <stddef.h>
#include <stdint.h>

#include "grpc.h"

void rnnd_grpcinfer_model_infer(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len);
void rnnd_grpcinfer_stream_infer(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len);
void rnnd_grpcinfer_predict(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len);

#endif

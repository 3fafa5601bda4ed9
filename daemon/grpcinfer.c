/*
 * grpcinfer.c: inference over gRPC (docs/HTTP.md "gRPC"): KServe v2's
 * ModelInfer and ModelStreamInfer, TF Serving's Predict.
 *
 * DESIGN (docs/DESIGN.md §11)
 * A request message is unpacked into an arena that lives as long as the
 * inference (its tensor bytes are used in place), converted into the
 * struct rnnd_infer_request HTTP's JSON also makes (proto/infer-grpc.c) and
 * run by inference.c's core on the model version's pool, with the call's
 * deadline (grpc-timeout) as the request's timeout.  The worker that ran it
 * builds the answer, pointing at the outputs, and packs it, then posts the
 * inference back to the call's loop (grpc.h), which sends it: packing is a
 * good part of a call's cost, and a loop carries many connections.  On a
 * ModelStreamInfer
 * stream each message is an inference of its own whose answer takes its
 * place in the stream when the message arrives (grpc.h's slots), so answers
 * go out in request order, each a ModelStreamInferResponse, errors in
 * error_message; a sequence's chunks keep their order in inference.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "grpccall.h"
#include "grpcinfer.h"
#include "inference.h"
#include "infer-grpc.h"
#include "log.h"
#include "server.h"

enum api { API_KSERVE, API_TFS };

/* One inference of a call: from its message to its answer. */
struct ginfer {
        struct rnnd_grpc_call *call;     /* a reference */
        struct rnnd_grpc_slot *slot;     /* its answer's place on a stream, or NULL (unary) */
        struct rnnd_pbarena arena;       /* the request message, and the answer built */
        struct rnnd_inference *inf;      /* or NULL before it was made */
        struct rnnd_served_model *model; /* pinned until answered */
        struct rnnd_served_version *sv;
        enum api api;
        int status; /* the job's, set by done() */
        rnnd_error_t err;
        void *buf;                  /* the answer done() packed (rnnd_grpc_fill's), or NULL */
        size_t len;                 /* its message's bytes */
        uint64_t render_ns;         /* what packing it took */
        struct rnnd_grpc_post post; /* done()'s way back to the loop */
};

static void ginfer_free(struct ginfer *gi)
{
        rnnd_free(gi->buf);
        rnnd_inference_free(gi->inf);
        rnnd_pbarena_done(&gi->arena);
        rnnd_models_unpin(gi->model);
        rnnd_grpc_call_unref(gi->call);
        rnnd_free(gi);
}

/* A stream's error: a ModelStreamInferResponse with error_message, in the request's place. */
static void stream_error(struct ginfer *gi, const char *msg)
{
        Inference__ModelStreamInferResponse r = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
        size_t len;
        void *buf;

        r.error_message = (char *)msg;
        buf = rnnd_pb_pack(&r.base, 5, &len);
        rnnd_grpc_fill(gi->call, gi->slot, buf, buf != NULL ? len : 0);
}

/* Counts the request under its model, with an HTTP status (docs/HTTP.md "gRPC"). */
static void count(struct ginfer *gi, unsigned status)
{
        rnnd_models_count(rnnd_server_models(rnnd_grpc_call_server(gi->call)), gi->model,
                          gi->model != NULL ? gi->sv : NULL, status);
}

/* Counts the request and answers code's error: the call's, or the stream's message's. */
static void answer_error(struct ginfer *gi, int code, const rnnd_error_t *err)
{
        const char *msg = err != NULL && err->msg[0] != '\0' ? err->msg : rnnd_strerror(code);

        count(gi, (unsigned)rnnd_error_http_status(code));
        if (gi->slot == NULL)
                rnnd_grpc_fail(gi->call, code, err);
        else
                stream_error(gi, msg);
}

/* The outputs as the API's response message, packed; NULL when memory ran out. */
static void *render(struct ginfer *gi, size_t *len)
{
        const struct rnnd_infer_outputs *o = rnnd_inference_outputs(gi->inf);
        const struct rnnd_infer_request *q = rnnd_inference_request(gi->inf);
        Inference__ModelStreamInferResponse s = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
        const char *name = gi->model->entry->name;
        Inference__ModelInferResponse *kr;
        Tensorflow__Serving__PredictResponse *tr;

        if (gi->api == API_TFS)
                return rnnd_grpc_tfs_render(&gi->arena, name, gi->sv->version, o, &tr, NULL) < 0
                               ? NULL
                               : rnnd_pb_pack(&tr->base, 5, len);
        if (rnnd_grpc_kserve_render(&gi->arena, name, gi->sv->version, q->has_id ? q->id : NULL, o,
                                    &kr, NULL) < 0)
                return NULL;
        if (gi->slot == NULL)
                return rnnd_pb_pack(&kr->base, 5, len);
        s.infer_response = kr;
        return rnnd_pb_pack(&s.base, 5, len);
}

/* Loop thread, posted by done(): the answer, or the error, and the statistics. */
static void answered(struct rnnd_grpc_call *c, void *arg)
{
        struct ginfer *gi = arg;
        uint64_t t = rnnd_now_ns();
        size_t len = 0;
        void *buf;

        (void)c;
        if (gi->status == 0 && gi->buf == NULL && rnnd_grpc_call_open(gi->call))
                gi->buf = render(gi, &gi->len); /* done() found the client gone, or ran out */
        else
                t -= gi->render_ns;
        if (gi->status < 0 || !rnnd_grpc_call_open(gi->call)) {
                int code = gi->status < 0 ? gi->status : RNND_ECANCELED;

                rnnd_inference_record(gi->inf, code, 0);
                if (rnnd_grpc_call_open(gi->call)) {
                        answer_error(gi, code, &gi->err);
                } else {
                        count(gi, 499);
                        rnnd_grpc_fill(gi->call, gi->slot, NULL, 0);
                }
                ginfer_free(gi);
                return;
        }
        buf = gi->buf;
        len = gi->len;
        gi->buf = NULL; /* the call's now */
        if (buf == NULL) {
                rnnd_error_t err = {0};

                rnnd_error_set(&err, RNND_ENOMEM, "out of memory for the answer");
                rnnd_inference_record(gi->inf, RNND_ENOMEM, 0);
                answer_error(gi, RNND_ENOMEM, &err);
                ginfer_free(gi);
                return;
        }
        rnnd_inference_record(gi->inf, 0, rnnd_now_ns() - t);
        count(gi, 200);
        if (gi->slot != NULL) {
                rnnd_grpc_fill(gi->call, gi->slot, buf, len);
        } else {
                rnnd_grpc_send(gi->call, buf, len);
                rnnd_grpc_finish(gi->call, RNND_GRPC_OK, NULL);
        }
        ginfer_free(gi);
}

/* The inference's owner (inference.h): the call's client, and the post back to the loop. */

static bool gi_alive(void *cls)
{
        return rnnd_grpc_call_alive(((struct ginfer *)cls)->call);
}

static void gi_done(void *cls, int status, const rnnd_error_t *err)
{
        struct ginfer *gi = cls;

        gi->status = status;
        if (status < 0 && err != NULL)
                gi->err = *err;
        if (status == 0) /* outputs asked for in shared memory go there first */
                gi->status = rnnd_inference_write_shm(gi->inf, &gi->err);
        if (gi->status == 0 && rnnd_grpc_call_alive(gi->call)) {
                uint64_t t = rnnd_now_ns();

                gi->buf = render(gi, &gi->len);
                gi->render_ns = rnnd_now_ns() - t;
        }
        rnnd_grpc_call_post(gi->call, &gi->post, answered, gi);
}

static const struct rnnd_inference_owner owner = {.alive = gi_alive, .done = gi_done};

/* Starting one. */

typedef int (*parse_fn)(const void *m, const struct rnnd_infer_limits *lim,
                        struct rnnd_infer_request *ret, rnnd_error_t *reterr);

/*
 * Pins name/version (version "" the latest), parses m into the inference's
 * request and starts it, the call's deadline its timeout; or answers why
 * not (and frees gi).
 */
static void begin(struct ginfer *gi, const char *name, const char *version, parse_fn parse,
                  const void *m)
{
        struct rnnd_server *srv = rnnd_grpc_call_server(gi->call);
        struct rnnd_infer_request *q;
        struct rnnd_infer_limits lim;
        rnnd_error_t err = {0};
        uint64_t timeout_us;
        int r;

        r = rnnd_models_pin_named(rnnd_server_models(srv), name, version, &gi->model, &gi->sv,
                                  &err);
        if (gi->model != NULL && gi->slot == NULL)
                rnnd_grpc_call_log_model(gi->call, name, gi->sv != NULL ? gi->sv->version : 0);
        if (r == 0)
                r = rnnd_models_check_loaded(gi->model, gi->sv, &err);
        if (r == 0 && rnnd_grpc_listening(rnnd_server_grpc(srv)) == false)
                r = rnnd_error_set(&err, RNND_EUNAVAIL, "the server is shutting down");
        if (r == 0)
                r = rnnd_inference_new(srv, gi->sv, &gi->inf) < 0
                            ? rnnd_error_set(&err, RNND_ENOMEM, "out of memory")
                            : 0;
        if (r < 0) {
                answer_error(gi, r, &err);
                ginfer_free(gi);
                return;
        }
        rnnd_inference_limits(srv, &lim);
        q = rnnd_inference_request(gi->inf);
        r = parse(m, &lim, q, &err);
        timeout_us = rnnd_grpc_call_timeout_us(gi->call);
        if (timeout_us > 0 && (q->params.timeout_us == 0 || timeout_us < q->params.timeout_us))
                q->params.timeout_us = timeout_us; /* grpc-timeout, honoured as timeout */
        if (r == 0) {
                rnnd_pool_expect(gi->sv->pool, +1); /* a request came: the batcher's outlook */
                r = rnnd_inference_start(gi->inf, &owner, gi, &err);
                rnnd_pool_expect(gi->sv->pool, -1);
        }
        if (r < 0) {
                answer_error(gi, r, &err);
                ginfer_free(gi);
        }
}

/* A new inference of c; stream: its answer takes its place now.  NULL after failing c. */
static struct ginfer *ginfer_new(struct rnnd_grpc_call *c, enum api api, bool stream)
{
        struct rnnd_grpccall *st = rnnd_grpccall_state(c);
        struct ginfer *gi;

        if (st == NULL)
                return NULL;
        st->counted = true; /* each request is counted as it is answered */
        gi = rnnd_calloc(1, sizeof(*gi));
        if (gi == NULL) {
                rnnd_grpc_finish(c, RNND_GRPC_INTERNAL, "out of memory");
                return NULL;
        }
        gi->call = rnnd_grpc_call_ref(c);
        gi->api = api;
        if (stream && (gi->slot = rnnd_grpc_reserve(c)) == NULL) {
                ginfer_free(gi);
                return NULL;
        }
        return gi;
}

/* The message unpacked into gi's arena, or its error answered (and gi freed). */
static void *unpack(struct ginfer *gi, const ProtobufCMessageDescriptor *d, const uint8_t *msg,
                    size_t len)
{
        rnnd_error_t err = {0};
        void *m;
        int r = rnnd_grpccall_unpack(&gi->arena, d, msg, len, &m, &err);

        if (r == 0)
                return m;
        answer_error(gi, r, &err);
        ginfer_free(gi);
        return NULL;
}

static int parse_kserve(const void *m, const struct rnnd_infer_limits *lim,
                        struct rnnd_infer_request *ret, rnnd_error_t *reterr)
{
        return rnnd_grpc_kserve_parse(m, lim, ret, reterr);
}

static int parse_tfs(const void *m, const struct rnnd_infer_limits *lim,
                     struct rnnd_infer_request *ret, rnnd_error_t *reterr)
{
        return rnnd_grpc_tfs_parse(m, lim, ret, reterr);
}

static void kserve(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len, bool stream)
{
        struct ginfer *gi = ginfer_new(c, API_KSERVE, stream);
        Inference__ModelInferRequest *m;

        if (gi == NULL ||
            (m = unpack(gi, &inference__model_infer_request__descriptor, msg, len)) == NULL)
                return;
        begin(gi, m->model_name, m->model_version, parse_kserve, m);
}

void rnnd_grpcinfer_model_infer(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        kserve(c, msg, len, false);
}

void rnnd_grpcinfer_stream_infer(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        kserve(c, msg, len, true);
}

void rnnd_grpcinfer_predict(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        struct ginfer *gi = ginfer_new(c, API_TFS, false);
        Tensorflow__Serving__PredictRequest *m;
        const Tensorflow__Serving__ModelSpec *spec;
        rnnd_error_t err = {0};
        char v[24] = "";

        if (gi == NULL ||
            (m = unpack(gi, &tensorflow__serving__predict_request__descriptor, msg, len)) == NULL)
                return;
        spec = m->model_spec;
        if (spec == NULL || spec->version_choice_case ==
                                    TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION_LABEL) {
                rnnd_error_set(&err, RNND_EINVAL,
                               spec == NULL ? "model_spec: missing"
                                            : "model_spec.version_label: rnnd has no version "
                                              "labels; give model_spec.version");
                answer_error(gi, RNND_EINVAL, &err);
                ginfer_free(gi);
                return;
        }
        if (spec->version_choice_case == TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION &&
            spec->version != NULL)
                snprintf(v, sizeof(v), "%" PRId64, spec->version->value);
        begin(gi, spec->name, v, parse_tfs, m);
}

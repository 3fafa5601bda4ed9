/*
 * grpcsvc.c: the gRPC front end's method table (grpcsvc.h), its control
 * methods and health checking (docs/HTTP.md "gRPC").
 *
 * Every control method answers with what the HTTP route of the same name
 * answers: the models are pinned and resolved, checked and described by the
 * same functions (models.h, v2meta.h, tfsmeta.h, repoapi.h), and the JSON
 * body a route would send becomes the response message through its
 * descriptor (pbjson.h).  Inference is grpcinfer.c's.  Everything here runs
 * on the thread of the call's loop (grpc.h), but load_done(), which the
 * daemon's loop calls and which posts the answer to the call's.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "grpccall.h"
#include "grpcinfer.h"
#include "grpcsvc.h"
#include "health.pb-c.h"
#include "kserve.pb-c.h"
#include "log.h"
#include "pbjson.h"
#include "reload.h"
#include "repoapi.h"
#include "reporeq.h"
#include "rnnd-config.h"
#include "server.h"
#include "strbuf.h"
#include "tfs_apis.pb-c.h"
#include "tfsmeta.h"
#include "v2meta.h"

/* Messages and answers. */

/* rnnd_grpccall_unpack(), or the call failed with its error and NULL. */
static void *unpack_or_fail(struct rnnd_grpc_call *c, struct rnnd_pbarena *a,
                            const ProtobufCMessageDescriptor *d, const uint8_t *msg, size_t len)
{
        rnnd_error_t err = {0};
        void *m;
        int r = rnnd_grpccall_unpack(a, d, msg, len, &m, &err);

        if (r == 0)
                return m;
        rnnd_grpc_fail(c, r, &err);
        rnnd_pbarena_done(a);
        return NULL;
}

/* The HTTP status a gRPC status stands for, in rnnd_requests_total (docs/HTTP.md). */
static unsigned http_status(int grpc_status)
{
        switch (grpc_status) {
        case RNND_GRPC_OK:
                return 200;
        case RNND_GRPC_CANCELLED:
                return 499;
        case RNND_GRPC_INVALID_ARGUMENT:
                return 400;
        case 5: /* NOT_FOUND */
                return 404;
        case RNND_GRPC_RESOURCE_EXHAUSTED:
                return 413;
        case RNND_GRPC_UNIMPLEMENTED:
                return 501;
        case 16: /* UNAUTHENTICATED */
                return 401;
        case RNND_GRPC_DEADLINE_EXCEEDED:
        case RNND_GRPC_UNAVAILABLE:
                return 503;
        default:
                return 500;
        }
}

/* Packs m and ends the call OK with it as the one answer. */
static void answer(struct rnnd_grpc_call *c, const ProtobufCMessage *m)
{
        size_t len;
        void *buf = rnnd_pb_pack(m, 5, &len);

        if (buf == NULL) {
                rnnd_grpc_finish(c, RNND_GRPC_INTERNAL, "out of memory");
                return;
        }
        rnnd_grpc_send(c, buf, len);
        rnnd_grpc_finish(c, RNND_GRPC_OK, NULL);
}

/* The JSON body b (done here) as a message of type d (at path in it), the answer. */
static void answer_json(struct rnnd_grpc_call *c, struct rnnd_strbuf *b,
                        const ProtobufCMessageDescriptor *d, const char *const *path)
{
        struct rnnd_pbarena a;
        rnnd_error_t err = {0};
        ProtobufCMessage *m;
        int r;

        rnnd_pbarena_init(&a, SIZE_MAX);
        r = b->oom ? rnnd_error_set(&err, RNND_ENOMEM, "out of memory")
                   : rnnd_pbjson_message(&a, d, b->data, b->len, path, &m, &err);
        if (r < 0) {
                rnnd_log_req(RNND_LOG_ERR, rnnd_grpc_call_id(c), "%s", err.msg);
                rnnd_grpc_fail(c, RNND_EINTERNAL, &err);
        } else {
                answer(c, m);
        }
        rnnd_strbuf_done(b);
        rnnd_pbarena_done(&a);
}

/*
 * Pins the model name/version (version "" the latest) for the call, as the
 * routes do; false after failing the call (NOT_FOUND).
 */
static bool pin(struct rnnd_grpc_call *c, const char *name, const char *version)
{
        struct rnnd_grpccall *st = rnnd_grpccall_state(c);
        rnnd_error_t err = {0};
        int r;

        if (st == NULL)
                return false;
        if (name[0] == '\0') {
                rnnd_grpc_finish(c, 5 /* NOT_FOUND */, "the request names no model");
                return false;
        }
        r = rnnd_models_pin_named(rnnd_server_models(rnnd_grpc_call_server(c)), name, version,
                                  &st->model, &st->version, &err);
        if (st->model != NULL)
                rnnd_grpc_call_log_model(c, st->model->entry->name,
                                         st->version != NULL ? st->version->version : 0);
        if (r < 0)
                rnnd_grpc_fail(c, r, &err);
        return r == 0;
}

/* pin(), and the version must serve; false after failing the call. */
static bool pin_loaded(struct rnnd_grpc_call *c, const char *name, const char *version)
{
        struct rnnd_grpccall *st;
        rnnd_error_t err = {0};
        int r;

        if (!pin(c, name, version))
                return false;
        st = rnnd_grpc_call_data(c);
        r = rnnd_models_check_loaded(st->model, st->version, &err);
        if (r < 0)
                rnnd_grpc_fail(c, r, &err);
        return r == 0;
}

#define UNPACK(c, a, type, desc, msg, len) ((type *)unpack_or_fail(c, a, &desc, msg, len))

/* KServe v2: health and metadata. */

static void m_server_live(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        Inference__ServerLiveResponse r = INFERENCE__SERVER_LIVE_RESPONSE__INIT;

        (void)msg, (void)len;
        r.live = 1;
        answer(c, &r.base);
}

static void m_server_ready(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        Inference__ServerReadyResponse r = INFERENCE__SERVER_READY_RESPONSE__INIT;
        char why[400];

        (void)msg, (void)len;
        r.ready = rnnd_server_ready_why(rnnd_grpc_call_server(c), why, sizeof(why));
        answer(c, &r.base);
}

/* As Triton: an unknown model is not ready, not an error. */
static void m_model_ready(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        Inference__ModelReadyResponse r = INFERENCE__MODEL_READY_RESPONSE__INIT;
        Inference__ModelReadyRequest *q;
        struct rnnd_grpccall *st = rnnd_grpccall_state(c);
        struct rnnd_pbarena a;

        if (st == NULL ||
            (q = UNPACK(c, &a, Inference__ModelReadyRequest,
                        inference__model_ready_request__descriptor, msg, len)) == NULL)
                return;
        if (rnnd_models_pin_named(rnnd_server_models(rnnd_grpc_call_server(c)), q->name, q->version,
                                  &st->model, &st->version, NULL) == 0)
                r.ready = rnnd_models_check_ready(st->model, st->version, NULL) == 0;
        rnnd_pbarena_done(&a);
        answer(c, &r.base);
}

static void m_server_metadata(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        struct rnnd_strbuf b;

        (void)msg, (void)len;
        rnnd_strbuf_init(&b);
        rnnd_v2meta_server(&b, rnnd_server_extensions(rnnd_grpc_call_server(c)),
                           rnnd_grpc_call_server(c)->shm.max > 0);
        answer_json(c, &b, &inference__server_metadata_response__descriptor, NULL);
}

/*
 * ModelMetadata and ModelConfig: a name and version, a v2meta.h body (the
 * config's inside {"config": ...}, as ModelConfigResponse holds it).
 */
static void describe(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len,
                     void (*render)(struct rnnd_strbuf *b, const struct rnnd_served_model *m,
                                    const struct rnnd_served_version *sv),
                     const ProtobufCMessageDescriptor *d)
{
        Inference__ModelMetadataRequest *q; /* ModelConfigRequest has the same fields */
        bool config = d == &inference__model_config_response__descriptor, ok;
        struct rnnd_grpccall *st;
        struct rnnd_pbarena a;
        struct rnnd_strbuf b;

        q = UNPACK(c, &a, Inference__ModelMetadataRequest,
                   inference__model_metadata_request__descriptor, msg, len);
        if (q == NULL)
                return;
        ok = pin_loaded(c, q->name, q->version);
        rnnd_pbarena_done(&a);
        if (!ok)
                return;
        st = rnnd_grpc_call_data(c);
        rnnd_strbuf_init(&b);
        if (config)
                rnnd_strbuf_puts(&b, "{\"config\":");
        render(&b, st->model, st->version);
        if (config)
                rnnd_strbuf_putc(&b, '}');
        answer_json(c, &b, d, NULL);
}

static void m_model_metadata(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        describe(c, msg, len, rnnd_v2meta_model, &inference__model_metadata_response__descriptor);
}

static void m_model_config(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        describe(c, msg, len, rnnd_v2meta_config, &inference__model_config_response__descriptor);
}

/* Every model's statistics for an empty name, else the named model's (and version's). */
static void m_model_statistics(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        struct rnnd_server *srv = rnnd_grpc_call_server(c);
        Inference__ModelStatisticsRequest *q;
        struct rnnd_grpccall *st;
        struct rnnd_pbarena a;
        struct rnnd_strbuf b;
        bool all, given, ok;

        q = UNPACK(c, &a, Inference__ModelStatisticsRequest,
                   inference__model_statistics_request__descriptor, msg, len);
        if (q == NULL)
                return;
        all = q->name[0] == '\0';
        given = q->version[0] != '\0';
        ok = all || pin(c, q->name, q->version);
        rnnd_pbarena_done(&a);
        if (!ok)
                return;
        st = rnnd_grpc_call_data(c);
        rnnd_strbuf_init(&b);
        rnnd_v2meta_stats(&b, rnnd_server_models(srv), all ? NULL : st->model,
                          all || !given ? NULL : st->version);
        answer_json(c, &b, &inference__model_statistics_response__descriptor, NULL);
}

/* KServe v2: the repository extension, with the bearer token of auth_token_file. */

/* false after failing the call UNAUTHENTICATED. */
static bool authorized(struct rnnd_grpc_call *c)
{
        struct rnnd_server *srv = rnnd_grpc_call_server(c);
        const char *auth = rnnd_grpc_call_header(c, "authorization");

        if (rnnd_reload_authorized(rnnd_server_reload(srv), auth))
                return true;
        rnnd_log_req(RNND_LOG_WARNING, rnnd_grpc_call_id(c),
                     "gRPC repository call: %s bearer token; answering UNAUTHENTICATED",
                     auth == NULL ? "no" : "a wrong");
        rnnd_grpc_finish(c, 16 /* UNAUTHENTICATED */,
                         "this method needs the bearer token of auth_token_file "
                         "(metadata authorization: Bearer TOKEN)");
        return false;
}

static void m_repository_index(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        Inference__RepositoryIndexRequest *q;
        struct rnnd_pbarena a;
        struct rnnd_strbuf b;
        bool ready;

        if (!authorized(c))
                return;
        q = UNPACK(c, &a, Inference__RepositoryIndexRequest,
                   inference__repository_index_request__descriptor, msg, len);
        if (q == NULL)
                return;
        ready = q->ready;
        rnnd_pbarena_done(&a);
        rnnd_strbuf_init(&b);
        rnnd_strbuf_puts(&b, "{\"models\":");
        rnnd_repoapi_index_json(rnnd_grpc_call_server(c), ready, &b);
        rnnd_strbuf_putc(&b, '}');
        answer_json(c, &b, &inference__repository_index_response__descriptor, NULL);
}

/* A load's or unload's end, on the call's loop: the empty answer, or the HTTP status's gRPC one. */
static void load_answer(struct rnnd_grpc_call *c, void *arg)
{
        static const Inference__RepositoryModelLoadResponse ok =
                INFERENCE__REPOSITORY_MODEL_LOAD_RESPONSE__INIT;
        struct rnnd_grpccall *st = arg;
        unsigned status = st->load_status;

        if (!rnnd_grpc_call_open(c))
                return;
        if (status == 0)
                answer(c, &ok.base); /* both answers are empty messages */
        else
                rnnd_grpc_finish(c,
                                 status == 404   ? 5
                                 : status == 503 ? RNND_GRPC_UNAVAILABLE
                                 : status >= 500 ? RNND_GRPC_INTERNAL
                                                 : RNND_GRPC_INVALID_ARGUMENT,
                                 st->load_msg);
}

/*
 * A load's or unload's end (reload.h), on the daemon's loop, which may not
 * be the call's (docs/DESIGN.md §11): what it says is kept and answered there.
 */
static void load_done(void *cls, unsigned status, const char *msg)
{
        struct rnnd_grpc_call *c = cls;
        struct rnnd_grpccall *st = rnnd_grpc_call_data(c);

        st->load_status = msg == NULL ? 0 : status != 0 ? status : 500;
        snprintf(st->load_msg, sizeof(st->load_msg), "%s", msg != NULL ? msg : "");
        rnnd_grpc_call_post(c, &st->load_post, load_answer, st);
        rnnd_grpc_call_unref(c);
}

/* The reload's reference on the call, once the load is past its checks. */
static void hold_call(void *cls)
{
        struct rnnd_grpccall *st = rnnd_grpc_call_data(cls);

        st->held = true;
        rnnd_grpc_call_ref(cls);
}

/* The parameters of a load or unload, checked as the HTTP body's (reporeq.h). */
static int check_params(enum rnnd_reporeq_call call,
                        Inference__RepositoryModelLoadRequest__ParametersEntry **ps, size_t n,
                        rnnd_error_t *err)
{
        for (size_t i = 0; i < n; i++) {
                const Inference__ModelRepositoryParameter *v = ps[i]->value;
                bool is_bool =
                        v != NULL &&
                        v->parameter_choice_case ==
                                INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
                int r = rnnd_reporeq_check_param(call, ps[i]->key, is_bool,
                                                 is_bool ? "a bool_param" : "another value", err);

                if (r < 0)
                        return r;
        }
        return 0;
}

/* RepositoryModelLoad and _Unload: their requests have the same fields. */
static void load_or_unload(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len, bool load)
{
        Inference__RepositoryModelLoadRequest *q;
        struct rnnd_pbarena a;
        rnnd_error_t err = {0};
        int r;

        if (!authorized(c) || rnnd_grpccall_state(c) == NULL)
                return;
        q = UNPACK(c, &a, Inference__RepositoryModelLoadRequest,
                   inference__repository_model_load_request__descriptor, msg, len);
        if (q == NULL)
                return;
        rnnd_grpc_call_log_model(c, q->model_name, 0);
        r = check_params(load ? RNND_REPOREQ_LOAD : RNND_REPOREQ_UNLOAD,
                         (Inference__RepositoryModelLoadRequest__ParametersEntry **)q->parameters,
                         q->n_parameters, &err);
        if (r == 0)
                r = rnnd_repoapi_submit(rnnd_grpc_call_server(c), load, q->model_name, load_done, c,
                                        hold_call, &err);
        rnnd_pbarena_done(&a);
        if (r < 0) {
                struct rnnd_grpccall *st = rnnd_grpc_call_data(c);

                rnnd_grpc_fail(c, r, &err);
                if (st->held) /* refused after its checks: nobody calls load_done */
                        rnnd_grpc_call_unref(c);
        }
}

static void m_repository_load(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        load_or_unload(c, msg, len, true);
}

static void m_repository_unload(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        load_or_unload(c, msg, len, false);
}

/*
 * The system shared memory extension (docs/HTTP.md "Shared memory"), as
 * HTTP's routes serve it (shm.h); the repository methods' token.
 */

static void m_shm_status(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        Inference__SystemSharedMemoryStatusRequest *q;
        struct rnnd_pbarena a;
        struct rnnd_strbuf b;
        rnnd_error_t err = {0};
        int r;

        if (!authorized(c))
                return;
        q = UNPACK(c, &a, Inference__SystemSharedMemoryStatusRequest,
                   inference__system_shared_memory_status_request__descriptor, msg, len);
        if (q == NULL)
                return;
        rnnd_strbuf_init(&b);
        r = rnnd_shm_status(&rnnd_grpc_call_server(c)->shm, q->name, true, &b, &err);
        rnnd_pbarena_done(&a);
        if (r < 0) {
                rnnd_strbuf_done(&b);
                rnnd_grpc_fail(c, r, &err);
                return;
        }
        answer_json(c, &b, &inference__system_shared_memory_status_response__descriptor, NULL);
}

static void m_shm_register(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        static const Inference__SystemSharedMemoryRegisterResponse ok =
                INFERENCE__SYSTEM_SHARED_MEMORY_REGISTER_RESPONSE__INIT;
        Inference__SystemSharedMemoryRegisterRequest *q;
        struct rnnd_shmreq rq = {{0}, 0, 0};
        struct rnnd_pbarena a;
        rnnd_error_t err = {0};
        int r;

        if (!authorized(c))
                return;
        q = UNPACK(c, &a, Inference__SystemSharedMemoryRegisterRequest,
                   inference__system_shared_memory_register_request__descriptor, msg, len);
        if (q == NULL)
                return;
        rq.offset = q->offset;
        rq.byte_size = q->byte_size;
        if (strlen(q->key) >= sizeof(rq.key)) {
                r = rnnd_error_set(&err, RNND_EINVAL, "key: longer than %zu bytes",
                                   sizeof(rq.key) - 1);
        } else {
                memcpy(rq.key, q->key, strlen(q->key) + 1);
                r = rnnd_shm_register(&rnnd_grpc_call_server(c)->shm, q->name, &rq, &err);
        }
        rnnd_pbarena_done(&a);
        if (r < 0)
                rnnd_grpc_fail(c, r, &err);
        else
                answer(c, &ok.base);
}

static void m_shm_unregister(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        static const Inference__SystemSharedMemoryUnregisterResponse ok =
                INFERENCE__SYSTEM_SHARED_MEMORY_UNREGISTER_RESPONSE__INIT;
        Inference__SystemSharedMemoryUnregisterRequest *q;
        struct rnnd_pbarena a;
        rnnd_error_t err = {0};
        int r;

        if (!authorized(c))
                return;
        q = UNPACK(c, &a, Inference__SystemSharedMemoryUnregisterRequest,
                   inference__system_shared_memory_unregister_request__descriptor, msg, len);
        if (q == NULL)
                return;
        r = rnnd_shm_unregister(&rnnd_grpc_call_server(c)->shm, q->name, &err);
        rnnd_pbarena_done(&a);
        if (r < 0)
                rnnd_grpc_fail(c, r, &err);
        else
                answer(c, &ok.base);
}

/* CUDA shared memory: none is ever registered (routes.c says why). */
static void m_cuda_shm_status(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        static const Inference__CudaSharedMemoryStatusResponse none =
                INFERENCE__CUDA_SHARED_MEMORY_STATUS_RESPONSE__INIT;
        Inference__CudaSharedMemoryStatusRequest *q;
        struct rnnd_pbarena a;
        bool named;

        if (!authorized(c))
                return;
        q = UNPACK(c, &a, Inference__CudaSharedMemoryStatusRequest,
                   inference__cuda_shared_memory_status_request__descriptor, msg, len);
        if (q == NULL)
                return;
        named = q->name[0] != '\0';
        rnnd_pbarena_done(&a);
        if (named)
                rnnd_grpc_finish(c, 5 /* NOT_FOUND */,
                                 "no CUDA shared memory region is registered (rnnd does not "
                                 "implement CUDA shared memory)");
        else
                answer(c, &none.base);
}

static void m_cuda_shm_unregister(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        static const Inference__CudaSharedMemoryUnregisterResponse ok =
                INFERENCE__CUDA_SHARED_MEMORY_UNREGISTER_RESPONSE__INIT;
        Inference__CudaSharedMemoryUnregisterRequest *q;
        struct rnnd_pbarena a;

        if (!authorized(c))
                return;
        q = UNPACK(c, &a, Inference__CudaSharedMemoryUnregisterRequest,
                   inference__cuda_shared_memory_unregister_request__descriptor, msg, len);
        if (q == NULL)
                return;
        rnnd_pbarena_done(&a);
        answer(c, &ok.base);
}

/* TF Serving: model status and metadata. */

/*
 * The model spec's version as text ("" for none), or false after failing
 * the call: rnnd has no version labels.
 */
static bool spec_version(struct rnnd_grpc_call *c, const Tensorflow__Serving__ModelSpec *spec,
                         char *buf, size_t cap)
{
        buf[0] = '\0';
        if (spec->version_choice_case ==
            TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION_LABEL) {
                rnnd_grpc_finish(c, RNND_GRPC_INVALID_ARGUMENT,
                                 "model_spec.version_label: rnnd has no version labels; give "
                                 "model_spec.version");
                return false;
        }
        if (spec->version_choice_case == TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION &&
            spec->version != NULL)
                snprintf(buf, cap, "%" PRId64, spec->version->value);
        return true;
}

/* Pins the model a TF Serving request's spec names; false after failing the call. */
static bool pin_spec(struct rnnd_grpc_call *c, const Tensorflow__Serving__ModelSpec *spec,
                     bool loaded, bool *given)
{
        char v[24];

        if (spec == NULL) {
                rnnd_grpc_finish(c, RNND_GRPC_INVALID_ARGUMENT, "model_spec: missing");
                return false;
        }
        if (!spec_version(c, spec, v, sizeof(v)))
                return false;
        *given = v[0] != '\0';
        return loaded ? pin_loaded(c, spec->name, v) : pin(c, spec->name, v);
}

/*
 * Classify and Regress: TF Serving's answer for a model whose signature is
 * predict's, as the REST :classify and :regress give it (routes.c).  Both
 * requests start with model_spec (field 1), read through the
 * classification one's descriptor.
 */
static void no_signature(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len, const char *what,
                         const char *verb)
{
        Tensorflow__Serving__ClassificationRequest *q;
        struct rnnd_pbarena a;
        char text[160];
        bool ok, given;

        q = UNPACK(c, &a, Tensorflow__Serving__ClassificationRequest,
                   tensorflow__serving__classification_request__descriptor, msg, len);
        if (q == NULL)
                return;
        ok = pin_spec(c, q->model_spec, true, &given);
        rnnd_pbarena_done(&a);
        if (!ok)
                return;
        snprintf(text, sizeof(text),
                 "Expected %s signature method_name to be tensorflow/serving/%s. Was: "
                 "tensorflow/serving/predict",
                 what, verb);
        rnnd_grpc_finish(c, RNND_GRPC_INVALID_ARGUMENT, text);
}

static void m_classify(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        no_signature(c, msg, len, "classification", "classify");
}

static void m_regress(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        no_signature(c, msg, len, "regression", "regress");
}

static void m_get_model_status(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        Tensorflow__Serving__GetModelStatusRequest *q;
        struct rnnd_grpccall *st;
        struct rnnd_pbarena a;
        rnnd_error_t err = {0};
        struct rnnd_strbuf b;
        bool ok, given = false;

        q = UNPACK(c, &a, Tensorflow__Serving__GetModelStatusRequest,
                   tensorflow__serving__get_model_status_request__descriptor, msg, len);
        if (q == NULL)
                return;
        ok = pin_spec(c, q->model_spec, false, &given);
        rnnd_pbarena_done(&a);
        if (!ok)
                return;
        st = rnnd_grpc_call_data(c);
        if (rnnd_models_check_model(st->model, &err) < 0) {
                rnnd_grpc_fail(c, RNND_EUNAVAIL, &err);
                return;
        }
        rnnd_strbuf_init(&b);
        rnnd_tfsmeta_status(&b, st->model, given ? st->version : NULL);
        answer_json(c, &b, &tensorflow__serving__get_model_status_response__descriptor, NULL);
}

/* metadata_field: empty or "signature_def", the one TF Serving knows; false after failing. */
static bool metadata_fields(struct rnnd_grpc_call *c,
                            const Tensorflow__Serving__GetModelMetadataRequest *q)
{
        char msg[200];

        for (size_t i = 0; i < q->n_metadata_field; i++)
                if (strcmp(q->metadata_field[i], "signature_def") != 0) {
                        snprintf(msg, sizeof(msg), "Metadata field %.64s is not supported",
                                 q->metadata_field[i]);
                        rnnd_grpc_finish(c, RNND_GRPC_INVALID_ARGUMENT, msg);
                        return false;
                }
        return true;
}

/*
 * GetModelMetadata: tfsmeta.h's body; its signature_def becomes a
 * SignatureDefMap packed into the google.protobuf.Any of metadata
 * ["signature_def"], as TF Serving answers.
 */
static void answer_metadata(struct rnnd_grpc_call *c, struct rnnd_grpccall *st,
                            struct rnnd_pbarena *a, struct rnnd_strbuf *b)
{
        static const char *const path[] = {"metadata", "signature_def", NULL};
        Tensorflow__Serving__GetModelMetadataResponse r =
                TENSORFLOW__SERVING__GET_MODEL_METADATA_RESPONSE__INIT;
        Tensorflow__Serving__GetModelMetadataResponse__MetadataEntry
                e = TENSORFLOW__SERVING__GET_MODEL_METADATA_RESPONSE__METADATA_ENTRY__INIT,
                *ep = &e;
        Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
        Google__Protobuf__Int64Value v = GOOGLE__PROTOBUF__INT64_VALUE__INIT;
        Google__Protobuf__Any any = GOOGLE__PROTOBUF__ANY__INIT;
        ProtobufCMessage *sigs;
        rnnd_error_t err = {0};

        if (rnnd_pbjson_message(a, &tensorflow__serving__signature_def_map__descriptor, b->data,
                                b->len, path, &sigs, &err) < 0) {
                rnnd_grpc_fail(c, RNND_EINTERNAL, &err);
                return;
        }
        any.type_url = "type.googleapis.com/tensorflow.serving.SignatureDefMap";
        any.value.data = rnnd_pb_pack(sigs, 0, &any.value.len);
        if (any.value.data == NULL) {
                rnnd_grpc_finish(c, RNND_GRPC_INTERNAL, "out of memory");
                return;
        }
        spec.name = (char *)st->model->entry->name; /* packed, never written */
        v.value = (int64_t)st->version->version;
        spec.version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION;
        spec.version = &v;
        e.key = "signature_def";
        e.value = &any;
        r.model_spec = &spec;
        r.n_metadata = 1;
        r.metadata = &ep;
        answer(c, &r.base);
        rnnd_free(any.value.data);
}

static void m_get_model_metadata(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        Tensorflow__Serving__GetModelMetadataRequest *q;
        struct rnnd_grpccall *st;
        struct rnnd_pbarena a;
        struct rnnd_strbuf b;
        bool ok, given;

        q = UNPACK(c, &a, Tensorflow__Serving__GetModelMetadataRequest,
                   tensorflow__serving__get_model_metadata_request__descriptor, msg, len);
        if (q == NULL)
                return;
        ok = metadata_fields(c, q) && pin_spec(c, q->model_spec, true, &given);
        rnnd_pbarena_done(&a);
        if (!ok)
                return;
        st = rnnd_grpc_call_data(c);
        rnnd_strbuf_init(&b);
        rnnd_tfsmeta_metadata(&b, st->model, st->version);
        rnnd_pbarena_init(&a, SIZE_MAX);
        if (b.oom)
                rnnd_grpc_finish(c, RNND_GRPC_INTERNAL, "out of memory");
        else
                answer_metadata(c, st, &a, &b);
        rnnd_pbarena_done(&a);
        rnnd_strbuf_done(&b);
}

/* grpc.health.v1: the server's readiness, by service name. */

/* The services rnnd answers for; "" is the server as a whole. */
static const char *const health_services[] = {
        "",
        "inference.GRPCInferenceService",
        "tensorflow.serving.PredictionService",
        "tensorflow.serving.ModelService",
        "live",
};

/* SERVING or NOT_SERVING for a known service, SERVICE_UNKNOWN else ("live": up, not ready). */
static int health_status(struct rnnd_server *srv, const char *service)
{
        char why[400];
        size_t i;

        for (i = 0; i < sizeof(health_services) / sizeof(health_services[0]); i++)
                if (strcmp(service, health_services[i]) == 0)
                        break;
        if (i == sizeof(health_services) / sizeof(health_services[0]))
                return GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN;
        if (strcmp(service, "live") == 0 ? rnnd_server_device_fault(srv) == NULL
                                         : rnnd_server_ready_why(srv, why, sizeof(why)))
                return GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
        return GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
}

/* One HealthCheckResponse of status; false when memory ran out. */
static bool send_health(struct rnnd_grpc_call *c, int status)
{
        Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
        size_t len;
        void *buf;

        r.status = status;
        buf = rnnd_pb_pack(&r.base, 5, &len);
        return buf != NULL && rnnd_grpc_send(c, buf, len);
}

static void m_health_check(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        Grpc__Health__V1__HealthCheckRequest *q;
        struct rnnd_pbarena a;
        int status;

        q = UNPACK(c, &a, Grpc__Health__V1__HealthCheckRequest,
                   grpc__health__v1__health_check_request__descriptor, msg, len);
        if (q == NULL)
                return;
        status = health_status(rnnd_grpc_call_server(c), q->service);
        if (status == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN) {
                char m[200];

                snprintf(m, sizeof(m), "unknown service \"%.100s\"", q->service);
                rnnd_grpc_finish(c, 5 /* NOT_FOUND, as gRPC's health servers answer */, m);
        } else if (send_health(c, status)) {
                rnnd_grpc_finish(c, RNND_GRPC_OK, NULL);
        }
        rnnd_pbarena_done(&a);
}

/*
 * Watch calls, one list for every loop (one server a process), under its
 * lock: each gets the status at once and again whenever it changes (each
 * loop's tick looks at its own calls).  When the server stops they get
 * NOT_SERVING and end UNAVAILABLE, so that the drain does not wait on them.
 */
static pthread_mutex_t watches_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rnnd_grpccall *watches; /* watches_mu */

static void m_health_watch(struct rnnd_grpc_call *c, const uint8_t *msg, size_t len)
{
        Grpc__Health__V1__HealthCheckRequest *q;
        struct rnnd_grpccall *st = rnnd_grpccall_state(c);
        struct rnnd_pbarena a;

        if (st == NULL ||
            (q = UNPACK(c, &a, Grpc__Health__V1__HealthCheckRequest,
                        grpc__health__v1__health_check_request__descriptor, msg, len)) == NULL)
                return;
        snprintf(st->service, sizeof(st->service), "%s", q->service);
        rnnd_pbarena_done(&a);
        st->watched = health_status(rnnd_grpc_call_server(c), st->service);
        if (!send_health(c, st->watched))
                return;
        st->call = rnnd_grpc_call_ref(c);
        pthread_mutex_lock(&watches_mu);
        st->watch_next = watches;
        watches = st;
        pthread_mutex_unlock(&watches_mu);
}

static void health_tick(struct rnnd_server *srv)
{
        struct rnnd_grpccall **pp = &watches, *st;
        bool stopping = rnnd_grpc_listening(rnnd_server_grpc(srv)) == false;

        pthread_mutex_lock(&watches_mu);
        while ((st = *pp) != NULL) {
                struct rnnd_grpc_call *c = st->call;
                int now;

                if (!rnnd_grpc_call_here(c)) { /* another loop's */
                        pp = &st->watch_next;
                        continue;
                }
                now = health_status(srv, st->service);
                if (rnnd_grpc_call_open(c) && now != st->watched && send_health(c, now))
                        st->watched = now;
                if (rnnd_grpc_call_open(c) && !stopping) {
                        pp = &st->watch_next;
                        continue;
                }
                if (rnnd_grpc_call_open(c))
                        rnnd_grpc_finish(c, RNND_GRPC_UNAVAILABLE, "the server is shutting down");
                *pp = st->watch_next;
                st->call = NULL;
                rnnd_grpc_call_unref(c);
        }
        pthread_mutex_unlock(&watches_mu);
}

/* The table. */

#define KSERVE(m) "/inference.GRPCInferenceService/" m
#define STREAM    RNND_GRPC_CLIENT_STREAM
#define QUIET     RNND_GRPC_QUIET

const struct rnnd_grpc_method rnnd_grpcsvc_methods[] = {
        {KSERVE("ServerLive"), QUIET, m_server_live, NULL},
        {KSERVE("ServerReady"), QUIET, m_server_ready, NULL},
        {KSERVE("ModelReady"), QUIET, m_model_ready, NULL},
        {KSERVE("ServerMetadata"), 0, m_server_metadata, NULL},
        {KSERVE("ModelMetadata"), 0, m_model_metadata, NULL},
        {KSERVE("ModelConfig"), 0, m_model_config, NULL},
        {KSERVE("ModelStatistics"), 0, m_model_statistics, NULL},
        {KSERVE("ModelInfer"), 0, rnnd_grpcinfer_model_infer, NULL},
        {KSERVE("ModelStreamInfer"), STREAM, rnnd_grpcinfer_stream_infer, NULL},
        {KSERVE("RepositoryIndex"), 0, m_repository_index, NULL},
        {KSERVE("RepositoryModelLoad"), 0, m_repository_load, NULL},
        {KSERVE("RepositoryModelUnload"), 0, m_repository_unload, NULL},
        {KSERVE("SystemSharedMemoryStatus"), 0, m_shm_status, NULL},
        {KSERVE("SystemSharedMemoryRegister"), 0, m_shm_register, NULL},
        {KSERVE("SystemSharedMemoryUnregister"), 0, m_shm_unregister, NULL},
        {KSERVE("CudaSharedMemoryStatus"), 0, m_cuda_shm_status, NULL},
        {KSERVE("CudaSharedMemoryUnregister"), 0, m_cuda_shm_unregister, NULL},
        {"/tensorflow.serving.PredictionService/Predict", 0, rnnd_grpcinfer_predict, NULL},
        {"/tensorflow.serving.PredictionService/Classify", 0, m_classify, NULL},
        {"/tensorflow.serving.PredictionService/Regress", 0, m_regress, NULL},
        {"/tensorflow.serving.PredictionService/GetModelMetadata", 0, m_get_model_metadata, NULL},
        {"/tensorflow.serving.ModelService/GetModelStatus", 0, m_get_model_status, NULL},
        {"/grpc.health.v1.Health/Check", QUIET, m_health_check, NULL},
        {"/grpc.health.v1.Health/Watch", QUIET, m_health_watch, NULL},
};

#undef KSERVE
#undef STREAM
#undef QUIET

const size_t rnnd_grpcsvc_methods_len =
        sizeof(rnnd_grpcsvc_methods) / sizeof(rnnd_grpcsvc_methods[0]);

static const struct rnnd_grpc_method *find(const char *path)
{
        for (size_t i = 0; i < rnnd_grpcsvc_methods_len; i++)
                if (strcmp(path, rnnd_grpcsvc_methods[i].path) == 0)
                        return &rnnd_grpcsvc_methods[i];
        return NULL;
}

/*
 * A call is over: counted under the model it pinned (or, for a stream and
 * inference, as each request was answered), with the HTTP status its gRPC
 * status stands for; its model let go.  Health checks log at debug.
 */
static int done(struct rnnd_grpc_call *c, int status)
{
        struct rnnd_grpccall *st = rnnd_grpc_call_data(c);
        const struct rnnd_grpc_method *m = rnnd_grpc_call_method(c);
        struct rnnd_models *t = rnnd_server_models(rnnd_grpc_call_server(c));

        if (st == NULL || !st->counted)
                rnnd_models_count(t, st != NULL ? st->model : NULL,
                                  st != NULL && st->model != NULL ? st->version : NULL,
                                  http_status(status));
        if (st != NULL)
                st->model = rnnd_models_unpin(st->model);
        return m != NULL && (m->flags & RNND_GRPC_QUIET) ? RNND_LOG_DEBUG : RNND_LOG_INFO;
}

const struct rnnd_grpc_handler rnnd_grpcsvc = {.find = find, .done = done, .tick = health_tick};

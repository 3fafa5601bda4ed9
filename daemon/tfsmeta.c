/*
 * tfsmeta.c: TF Serving's bodies that describe models (tfsmeta.h): model
 * status and metadata, rendered from the model a request pinned.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "tfsmeta.h"
#include "v2meta.h"

/* The TF Serving error code for a load failure. */
static const char *tfs_error_code(int code)
{
        switch (code) {
        case 0:
                return "OK";
        case RNND_ENOTFOUND:
                return "NOT_FOUND";
        case RNND_ENOMEM:
                return "RESOURCE_EXHAUSTED";
        case RNND_EINVAL:
        case RNND_EMODEL:
        case RNND_EUNSUPPORTED:
        case RNND_ELIMIT:
                return "INVALID_ARGUMENT";
        case RNND_EIO:
        case RNND_EGPU:
        case RNND_EINTERNAL:
                return "INTERNAL";
        default:
                return "UNKNOWN";
        }
}

static void put_tfs_version(struct rnnd_strbuf *b, const struct rnnd_served_version *v)
{
        rnnd_strbuf_json_sep(b);
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_key(b, "version");
        rnnd_strbuf_printf(b, "\"%" PRIu64 "\"", v->version);
        rnnd_strbuf_json_kv_str(b, "state", v->status == 0 ? "AVAILABLE" : "END");
        rnnd_strbuf_json_key(b, "status");
        rnnd_strbuf_putc(b, '{');
        rnnd_strbuf_json_kv_str(b, "error_code", tfs_error_code(v->status));
        rnnd_strbuf_json_kv_str(b, "error_message", v->status == 0 ? "" : v->reason);
        rnnd_strbuf_puts(b, "}}");
}

void rnnd_tfsmeta_status(struct rnnd_strbuf *b, const struct rnnd_served_model *m,
                         const struct rnnd_served_version *sv)
{
        rnnd_strbuf_puts(b, "{\"model_version_status\":[");
        if (sv != NULL) {
                put_tfs_version(b, sv);
        } else {
                /* TF Serving lists the newest first. */
                for (size_t i = m->n_versions; i-- > 0;)
                        put_tfs_version(b, &m->versions[i]);
        }
        rnnd_strbuf_puts(b, "]}");
}

/* A TF Serving dtype for a KServe datatype name. */
static const char *tfs_dtype(const char *datatype)
{
        return strcmp(datatype, "INT64") == 0 ? "DT_INT64" : "DT_FLOAT";
}

/* A signature_def's "inputs" or "outputs": {name: {dtype, tensor_shape, name}}. */
static void put_tfs_tensors(struct rnnd_strbuf *b, const struct rnnd_model_config *cfg, bool inputs)
{
        struct rnnd_v2meta_tensor io[RNND_V2META_MAX_TENSORS];
        unsigned n = rnnd_v2meta_tensors(cfg, inputs, io);

        rnnd_strbuf_json_key(b, inputs ? "inputs" : "outputs");
        rnnd_strbuf_putc(b, '{');
        for (unsigned i = 0; i < n; i++) {
                rnnd_strbuf_json_key(b, io[i].name);
                rnnd_strbuf_putc(b, '{');
                rnnd_strbuf_json_kv_str(b, "dtype", tfs_dtype(io[i].datatype));
                /* int64 sizes are strings in TF Serving's JSON (proto3). */
                rnnd_strbuf_puts(b, ",\"tensor_shape\":{\"dim\":[{\"size\":\"-1\",\"name\":\"\"}");
                for (unsigned d = 0; d < io[i].ndims; d++)
                        rnnd_strbuf_printf(b, ",{\"size\":\"%" PRId64 "\",\"name\":\"\"}",
                                           io[i].dims[d]);
                rnnd_strbuf_puts(b, "],\"unknown_rank\":false}");
                rnnd_strbuf_json_kv_str(b, "name", io[i].name);
                rnnd_strbuf_putc(b, '}');
        }
        rnnd_strbuf_putc(b, '}');
}

/*
 * TF Serving's GET .../metadata: the model's one signature, serving_default,
 * a predict signature with every input (the optional ones too: a TF Serving
 * client has no /config to read them from) and every output.
 */
void rnnd_tfsmeta_metadata(struct rnnd_strbuf *b, const struct rnnd_served_model *m,
                           const struct rnnd_served_version *sv)
{
        rnnd_strbuf_puts(b, "{\"model_spec\":{");
        rnnd_strbuf_json_kv_str(b, "name", m->entry->name);
        rnnd_strbuf_json_kv_str(b, "signature_name", "");
        rnnd_strbuf_json_key(b, "version");
        rnnd_strbuf_printf(b, "\"%" PRIu64 "\"", sv->version);
        rnnd_strbuf_puts(b, "},\"metadata\":{\"signature_def\":{\"signature_def\":{"
                            "\"serving_default\":{");
        put_tfs_tensors(b, &m->entry->cfg, true);
        put_tfs_tensors(b, &m->entry->cfg, false);
        rnnd_strbuf_json_kv_str(b, "method_name", "tensorflow/serving/predict");
        rnnd_strbuf_puts(b, "}}}}}");
}

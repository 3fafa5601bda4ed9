/*
 * rnnd-load: a load generator for rnnd (and any KServe v2 / TF Serving
 * server) on libcurl's multi interface.
 *
 * DESIGN.  One thread runs one curl multi handle with a fixed pool of slots,
 * each an easy handle reused request after request, so its connection stays
 * open (HTTP/1.1 keep-alive).  The loop waits in curl_multi_poll() until the
 * next scheduled send, a transfer's event or the next progress line.
 *
 * Closed loop: every slot sends again as soon as its answer arrives; latency
 * runs from the send.  Open loop: sends follow a fixed or Poisson schedule of
 * --rate per second, whatever the server does; a send that finds every slot
 * busy waits in a bounded backlog and goes out when one frees, and its
 * latency runs from the time it was scheduled, not from when it went out, so
 * a stall of the server shows in the percentiles instead of silencing the
 * client (coordinated omission, as wrk2 avoids it; BENCHMARKS.md).
 *
 * A request belongs to the warm-up or to the measurement by its scheduled
 * time; the warm-up's results are reported apart and not in the figures.
 * Request bodies are segments over one payload generated from the seed
 * (body.h); latencies go into fixed-size histograms (hist.h): memory does not
 * grow with the length of a run.
 */
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "body.h"
#include "hist.h"
#include "loadspec.h"
#include "rng.h"
#include "strbuf.h"

#include "rnnd-config.h"

#define BACKLOG_CAP (1u << 16)  /* open loop: sends waiting for a slot */
#define SNIPPET     1024        /* bytes of an error answer kept for the report */
#define ANSWER_MAX  (64u << 10) /* bytes of a metadata or probe answer read */
#define HTTP_CODES  600
#define NS          1000000000.0

/* One phase's results (the warm-up, or the measurement). */
struct tally {
        struct rnnd_hist latency;  /* successes, from the scheduled send (ns) */
        struct rnnd_hist service;  /* successes, from the actual send (ns) */
        uint64_t sent;             /* handed to curl */
        uint64_t sent_in_window;   /* of which before the phase's end */
        uint64_t done, ok, errors; /* answered (or failed); 200; the rest */
        uint64_t sequences_ok;
        uint64_t steps_ok;         /* --streams: the chunks' steps answered 200 */
        uint64_t http[HTTP_CODES]; /* errors by HTTP status */
        uint64_t curl[CURL_LAST];  /* errors by curl code */
        uint64_t overflow;         /* open loop: dropped, backlog full */
        uint64_t connects;         /* new connections */
        double bytes_out, bytes_in;
        uint64_t last_send, last_done; /* ns since start */
};

struct slot {
        CURL *easy;
        struct rnnd_load_body body;
        struct curl_slist *headers; /* binary: with this body's header length */
        uint32_t *lengths;          /* [sequences] */
        uint32_t n_seqs;
        uint64_t intended, started; /* ns since start */
        char snip[SNIPPET];         /* the answer's first bytes */
        uint64_t stream_id;         /* --streams: the sequence this slot sends, 0 = none */
        uint32_t stream_len;        /* its length */
        uint32_t stream_pos;        /* steps answered so far */
        uint32_t chunk;             /* steps in the chunk in flight */
        size_t snip_len;
        unsigned next_free;
};

struct run {
        struct rnnd_loadspec s;
        struct rnnd_load_payload payload;
        uint32_t *file_lengths;
        size_t n_file_lengths;
        uint32_t max_len;
        char url[4 * RNND_LOAD_STR_MAX];
        CURLM *multi;
        struct curl_slist *headers; /* JSON bodies and GET */
        struct slot *slots;
        unsigned n_slots, n_busy, free_head;
        uint64_t rng_len, rng_arr;
        uint64_t next_stream_id; /* --streams: ids are next_stream_id++ */
        struct timespec t0;
        uint64_t warm_end, end; /* ns since start; end is UINT64_MAX with --requests */
        bool issuing;
        uint64_t next_send; /* open: the next scheduled send */
        uint64_t scheduled; /* open: measured sends scheduled */
        uint64_t *backlog;  /* open: ring of scheduled times */
        size_t bl_head, bl_n;
        struct tally warm, meas;
        char *snippets[HTTP_CODES]; /* the first answer of each error status */
        uint64_t next_progress, prog_done;
        bool tty;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
        (void)sig;
        interrupted = 1;
}

static uint64_t now_ns(const struct run *r)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (uint64_t)(t.tv_sec - r->t0.tv_sec) * 1000000000u + (uint64_t)t.tv_nsec -
               (uint64_t)r->t0.tv_nsec;
}

/* --- Options ---------------------------------------------------------------------- */

static void print_wrapped(FILE *f, const char *text, unsigned indent, unsigned width)
{
        unsigned col = indent;
        const char *p = text;

        fprintf(f, "%*s", indent, "");
        while (*p != '\0') {
                size_t w = strcspn(p, " ");

                if (col > indent && col + 1 + w > width) {
                        fprintf(f, "\n%*s", indent, "");
                        col = indent;
                } else if (col > indent) {
                        fputc(' ', f);
                        col++;
                }
                fwrite(p, 1, w, f);
                col += (unsigned)w;
                p += w;
                while (*p == ' ')
                        p++;
        }
        fputc('\n', f);
}

static void usage(FILE *f)
{
        struct rnnd_loadspec defaults;

        fprintf(f, "Usage: rnnd-load [--spec FILE] [--KEY=VALUE | --KEY VALUE ...]\n"
                   "       rnnd-load --help | --version\n\n");
        print_wrapped(f,
                      "Sends inference requests (or GETs) to rnnd over HTTP with libcurl, in a "
                      "closed or an open loop, and reports throughput, latency percentiles "
                      "(successes only, from a log-bucketed histogram accurate to 1%) and errors "
                      "by status, each with the server's first answer. Before the run it reads "
                      "the model's metadata (GET /v2/models/{m}) and sends one request as the "
                      "run would (the shortest length; with --streams a whole one-chunk "
                      "sequence), reported as warm-up: when the server refuses it (4xx), no "
                      "request of the run can succeed, and rnnd-load prints the server's whole "
                      "answer and exits 2 without running. Exit status: 0; 1 when the errors "
                      "pass --max-error-rate or no request was answered; 2 for a bad option or "
                      "setup, or a refused first request.",
                      0, 80);
        fprintf(f, "\n  --spec FILE\n");
        print_wrapped(f,
                      "A JSON object of the keys below (with - or _), applied before the "
                      "command line's, which override it.",
                      8, 80);
        fprintf(f, "  -h, --help\n        Print this help, exit.\n"
                   "  -V, --version\n        Print the version, exit.\n\n");
        rnnd_loadspec_init(&defaults);
        for (size_t i = 0; i < rnnd_loadspec_n_keys(); i++) {
                const struct rnnd_loadspec_key *k = rnnd_loadspec_key(i);
                char def[RNND_LOAD_STR_MAX];

                fprintf(f, "  --%s%s%s\n", k->name, k->arg ? "=" : "", k->arg ? k->arg : "");
                print_wrapped(f, k->help, 8, 80);
                rnnd_loadspec_format(&defaults, i, def, sizeof(def));
                if (def[0] != '\0')
                        fprintf(f, "        Default: %s\n", def);
        }
}

static int read_file(const char *path, size_t max, char **ret, size_t *len, rnnd_error_t *err)
{
        FILE *f = fopen(path, "rb");
        struct rnnd_strbuf b;
        char buf[65536];
        size_t n;

        if (f == NULL)
                return rnnd_error_set(err, RNND_EIO, "%s: %s", path, strerror(errno));
        rnnd_strbuf_init(&b);
        while ((n = fread(buf, 1, sizeof(buf), f)) > 0 && b.len <= max)
                rnnd_strbuf_putn(&b, buf, n);
        fclose(f);
        if (b.len > max) {
                rnnd_strbuf_done(&b);
                return rnnd_error_set(err, RNND_ELIMIT, "%s: larger than %zu bytes", path, max);
        }
        *ret = rnnd_strbuf_steal(&b, len);
        return *ret != NULL ? 0 : rnnd_error_set(err, RNND_ENOMEM, "out of memory");
}

/* argv into r->s: --spec first, then every --key in order.  Returns 0, 1 (exit 0) or -2. */
static int parse_args(struct run *r, int argc, char **argv)
{
        rnnd_error_t e = {0};
        int pass, i;

        for (pass = 0; pass < 2; pass++) {
                for (i = 1; i < argc; i++) {
                        const char *a = argv[i], *eq, *val = NULL;
                        char key[64];

                        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
                                usage(stdout);
                                return 1;
                        }
                        if (strcmp(a, "-V") == 0 || strcmp(a, "--version") == 0) {
                                printf("rnnd-load %s (%s)\n", RNND_VERSION, curl_version());
                                return 1;
                        }
                        if (strncmp(a, "--", 2) != 0) {
                                fprintf(stderr, "rnnd-load: unexpected argument '%s' (--help)\n",
                                        a);
                                return -2;
                        }
                        a += 2;
                        eq = strchr(a, '=');
                        snprintf(key, sizeof(key), "%.*s", (int)(eq ? eq - a : (long)strlen(a)), a);
                        if (eq != NULL)
                                val = eq + 1;
                        else if (strcmp(key, "spec") == 0 || !rnnd_loadspec_is_bool(key))
                                val = i + 1 < argc ? argv[++i] : NULL;
                        if (strcmp(key, "spec") == 0) {
                                char *text = NULL;
                                size_t len;

                                if (pass == 1)
                                        continue;
                                if (val == NULL) {
                                        fprintf(stderr, "rnnd-load: --spec needs a file\n");
                                        return -2;
                                }
                                if (read_file(val, RNND_LOAD_SPEC_BYTES, &text, &len, &e) < 0 ||
                                    rnnd_loadspec_parse_json(&r->s, text, len, &e) < 0) {
                                        fprintf(stderr, "rnnd-load: %s: %s\n", val, e.msg);
                                        rnnd_free(text);
                                        return -2;
                                }
                                rnnd_free(text);
                                continue;
                        }
                        if (pass == 0)
                                continue;
                        if (rnnd_loadspec_set(&r->s, key, val, &e) < 0) {
                                fprintf(stderr, "rnnd-load: --%s\n", e.msg);
                                return -2;
                        }
                }
        }
        if (rnnd_loadspec_check(&r->s, &e) < 0) {
                fprintf(stderr, "rnnd-load: %s\n", e.msg);
                return -2;
        }
        return 0;
}

/* --- Setup ------------------------------------------------------------------------- */

/* Appends an answer's bytes to a strbuf, up to ANSWER_MAX of them. */
static size_t collect(char *p, size_t size, size_t n, void *userp)
{
        struct rnnd_strbuf *b = userp;

        if (b->len < ANSWER_MAX)
                rnnd_strbuf_putn(b, p,
                                 size * n < ANSWER_MAX - b->len ? size * n : ANSWER_MAX - b->len);
        return size * n;
}

/* "/models/{m}[/versions/{v}]" after prefix, into buf. */
static void model_path(const struct rnnd_loadspec *s, const char *prefix, char *buf, size_t n)
{
        snprintf(buf, n, "%s%s/models/%s%s%s", s->url, prefix, s->model,
                 s->version[0] ? "/versions/" : "", s->version);
}

/* GET /v2/models/{m}: answered 200, and when parse, the input tensor and the output names. */
static int fetch_model(struct run *r, struct rnnd_load_model *m, bool parse, rnnd_error_t *err)
{
        CURL *c = curl_easy_init();
        struct rnnd_strbuf b;
        char url[sizeof(r->url)];
        long code = 0;
        CURLcode cr;
        int ret;

        if (c == NULL)
                return rnnd_error_set(err, RNND_ENOMEM, "curl_easy_init failed");
        model_path(&r->s, "/v2", url, sizeof(url));
        rnnd_strbuf_init(&b);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(r->s.timeout_s * 1000));
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        cr = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(c);
        if (cr != CURLE_OK)
                ret = rnnd_error_set(err, RNND_EIO, "GET %s: %s", url, curl_easy_strerror(cr));
        else if (code != 200) {
                /* The server's whole answer: it says why (an unknown model, one that failed). */
                fprintf(stderr, "rnnd-load: GET %s: HTTP %ld: %s\n", url, code,
                        b.data ? b.data : "");
                ret = rnnd_error_set(err, RNND_EIO, "%s", ""); /* said above */
        } else if (parse && (ret = rnnd_loadspec_model_parse(b.data, b.len, m, err)) < 0)
                rnnd_error_prefix(err, "GET %s", url);
        else
                ret = 0;
        rnnd_strbuf_done(&b);
        return ret;
}

static bool has_output(const struct rnnd_load_model *m, const char *name)
{
        for (unsigned i = 0; i < m->n_outputs; i++)
                if (strcmp(m->outputs[i], name) == 0)
                        return true;
        return false;
}

static size_t read_body(char *dst, size_t size, size_t n, void *userp)
{
        return rnnd_load_body_read(&((struct slot *)userp)->body, dst, size * n);
}

static int seek_body(void *userp, curl_off_t off, int origin)
{
        if (origin != SEEK_SET || off < 0)
                return CURL_SEEKFUNC_CANTSEEK;
        return rnnd_load_body_seek(&((struct slot *)userp)->body, (size_t)off) == 0
                       ? CURL_SEEKFUNC_OK
                       : CURL_SEEKFUNC_FAIL;
}

static size_t keep_snippet(char *p, size_t size, size_t n, void *userp)
{
        struct slot *sl = userp;
        size_t k = size * n;

        if (sl->snip_len < SNIPPET - 1) {
                size_t c = k < SNIPPET - 1 - sl->snip_len ? k : SNIPPET - 1 - sl->snip_len;

                memcpy(sl->snip + sl->snip_len, p, c);
                sl->snip_len += c;
        }
        return k;
}

/* The lengths: a file's list, or the distribution's maximum, into r->max_len. */
static int setup_lengths(struct run *r, rnnd_error_t *err)
{
        struct rnnd_loadspec *s = &r->s;
        int ret;

        if (s->len_dist == RNND_LEN_FILE) {
                char *text;
                size_t len;

                ret = read_file(s->len_file, 64u << 20, &text, &len, err);
                if (ret < 0)
                        return ret;
                ret = rnnd_loadspec_lengths_parse(text, len, &r->file_lengths, &r->n_file_lengths,
                                                  err);
                rnnd_free(text);
                if (ret < 0) {
                        rnnd_error_prefix(err, "%s", s->len_file);
                        return ret;
                }
                r->max_len = 0;
                for (size_t i = 0; i < r->n_file_lengths; i++)
                        if (r->file_lengths[i] > r->max_len)
                                r->max_len = r->file_lengths[i];
        } else {
                r->max_len = s->len_max;
        }
        return 0;
}

/* The URL and the payload, asking the model's metadata for what the spec left out. */
static int setup_request(struct run *r, rnnd_error_t *err)
{
        struct rnnd_loadspec *s = &r->s;
        struct rnnd_load_model m;
        bool need;
        int ret;

        switch (s->api) {
        case RNND_API_GET:
                snprintf(r->url, sizeof(r->url), "%s%s", s->url, s->path);
                break;
        case RNND_API_V2:
        case RNND_API_PREDICT:
                /* v2: the metadata first, always: a model the server does not serve is a setup
                 * error with the server's answer, before any request is sent. */
                need = !s->input_given || (s->n_outputs == 0 && s->api == RNND_API_V2);
                ret = s->api == RNND_API_V2 || need ? fetch_model(r, &m, need, err) : 0;
                if (ret < 0)
                        return ret;
                if (need) {
                        if (!s->input_given)
                                s->input = m.input;
                        /* The default output: the head's scores, else the final state. */
                        if (s->n_outputs == 0 &&
                            (has_output(&m, "scores") || has_output(&m, "h_n"))) {
                                snprintf(s->outputs[0], sizeof(s->outputs[0]), "%s",
                                         has_output(&m, "scores") ? "scores" : "h_n");
                                s->n_outputs = 1;
                        }
                }
                if (s->api == RNND_API_V2) {
                        model_path(s, "/v2", r->url, sizeof(r->url));
                        strcat(r->url, "/infer");
                } else {
                        model_path(s, "/v1", r->url, sizeof(r->url));
                        strcat(r->url, ":predict");
                }
                ret = rnnd_load_payload_build(&r->payload, s->api, s->format, &s->input,
                                              s->sequences, r->max_len, s->max_token, s->seed,
                                              s->n_outputs,
                                              (const char(*)[RNND_LOAD_NAME_MAX])s->outputs, err);
                if (ret < 0)
                        return ret;
                break;
        }
        return 0;
}

/* The curl handles: one per slot of the concurrency, each with the request set. */
static int setup_slots(struct run *r, rnnd_error_t *err)
{
        struct rnnd_loadspec *s = &r->s;

        r->multi = curl_multi_init();
        r->n_slots = s->concurrency;
        r->slots = rnnd_calloc(r->n_slots, sizeof(*r->slots));
        r->backlog = rnnd_mallocarray(BACKLOG_CAP, sizeof(uint64_t));
        if (r->multi == NULL || r->slots == NULL || r->backlog == NULL)
                return rnnd_error_set(err, RNND_ENOMEM, "out of memory");
        curl_multi_setopt(r->multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long)r->n_slots);
        curl_multi_setopt(r->multi, CURLMOPT_MAXCONNECTS, (long)r->n_slots);
        r->headers = curl_slist_append(NULL, "Expect:");
        r->headers = curl_slist_append(r->headers, "Content-Type: application/json");
        for (unsigned i = 0; i < r->n_slots; i++) {
                struct slot *sl = &r->slots[i];

                sl->easy = curl_easy_init();
                sl->lengths = rnnd_calloc(s->sequences, sizeof(uint32_t));
                if (sl->easy == NULL || sl->lengths == NULL || r->headers == NULL)
                        return rnnd_error_set(err, RNND_ENOMEM, "out of memory");
                rnnd_load_body_init(&sl->body);
                sl->next_free = i + 1;
                curl_easy_setopt(sl->easy, CURLOPT_URL, r->url);
                curl_easy_setopt(sl->easy, CURLOPT_PRIVATE, sl);
                curl_easy_setopt(sl->easy, CURLOPT_NOSIGNAL, 1L);
                curl_easy_setopt(sl->easy, CURLOPT_TCP_NODELAY, 1L);
                curl_easy_setopt(sl->easy, CURLOPT_TIMEOUT_MS, (long)(s->timeout_s * 1000));
                curl_easy_setopt(sl->easy, CURLOPT_WRITEFUNCTION, keep_snippet);
                curl_easy_setopt(sl->easy, CURLOPT_WRITEDATA, sl);
                curl_easy_setopt(sl->easy, CURLOPT_HTTPHEADER, r->headers);
                if (s->api != RNND_API_GET) {
                        curl_easy_setopt(sl->easy, CURLOPT_POST, 1L);
                        curl_easy_setopt(sl->easy, CURLOPT_READFUNCTION, read_body);
                        curl_easy_setopt(sl->easy, CURLOPT_READDATA, sl);
                        curl_easy_setopt(sl->easy, CURLOPT_SEEKFUNCTION, seek_body);
                        curl_easy_setopt(sl->easy, CURLOPT_SEEKDATA, sl);
                }
        }
        r->free_head = 0;
        return 0;
}

static int setup(struct run *r, rnnd_error_t *err)
{
        struct rnnd_loadspec *s = &r->s;
        int ret;

        if (s->streams > 0)
                s->concurrency = s->streams; /* one chunk in flight per live sequence */
        r->next_stream_id = 1 + (s->seed << 32);
        ret = setup_lengths(r, err);
        if (ret == 0)
                ret = setup_request(r, err);
        if (ret == 0)
                ret = setup_slots(r, err);
        if (ret < 0)
                return ret;
        r->rng_len = rnnd_rng_init(s->seed, RNND_RNG_LENGTHS);
        r->rng_arr = rnnd_rng_init(s->seed, RNND_RNG_ARRIVALS);
        rnnd_hist_init(&r->warm.latency);
        rnnd_hist_init(&r->warm.service);
        rnnd_hist_init(&r->meas.latency);
        rnnd_hist_init(&r->meas.service);
        return 0;
}

static void teardown(struct run *r)
{
        for (unsigned i = 0; r->slots != NULL && i < r->n_slots; i++) {
                struct slot *sl = &r->slots[i];

                if (sl->easy != NULL) {
                        curl_multi_remove_handle(r->multi, sl->easy);
                        curl_easy_cleanup(sl->easy);
                }
                curl_slist_free_all(sl->headers);
                rnnd_load_body_done(&sl->body);
                rnnd_free(sl->lengths);
        }
        rnnd_free(r->slots);
        if (r->multi != NULL)
                curl_multi_cleanup(r->multi);
        curl_slist_free_all(r->headers);
        rnnd_load_payload_done(&r->payload);
        rnnd_free(r->file_lengths);
        rnnd_free(r->backlog);
        for (unsigned i = 0; i < HTTP_CODES; i++)
                rnnd_free(r->snippets[i]);
}

/* --- The loop ----------------------------------------------------------------------- */

static uint32_t draw_length(struct run *r)
{
        const struct rnnd_loadspec *s = &r->s;

        switch (s->len_dist) {
        case RNND_LEN_UNIFORM:
                return (uint32_t)rnnd_rng_range(&r->rng_len, s->len_min, s->len_max);
        case RNND_LEN_FILE:
                return r->file_lengths[rnnd_rng_range(&r->rng_len, 0, r->n_file_lengths - 1)];
        case RNND_LEN_FIXED:
                break;
        }
        return s->len_min;
}

static struct tally *tally_of(struct run *r, uint64_t intended)
{
        return intended < r->warm_end ? &r->warm : &r->meas;
}

/*
 * --streams: the slot's next chunk, of its sequence or of a new one when
 * that ended: its length into sl->lengths[0] and its sequence parameters.
 */
static void next_chunk(struct run *r, struct slot *sl)
{
        uint32_t left;

        if (sl->stream_id == 0 || sl->stream_pos >= sl->stream_len) {
                sl->stream_id = r->next_stream_id++;
                sl->stream_len = sl->lengths[0]; /* drawn as --length says */
                sl->stream_pos = 0;
        }
        left = sl->stream_len - sl->stream_pos;
        sl->chunk = left < r->s.chunk_length ? left : r->s.chunk_length;
        sl->lengths[0] = sl->chunk;
        snprintf(sl->body.params, sizeof(sl->body.params),
                 "{\"sequence_id\":%" PRIu64 ",\"sequence_start\":%s,\"sequence_end\":%s}",
                 sl->stream_id, sl->stream_pos == 0 ? "true" : "false",
                 sl->chunk == left ? "true" : "false");
}

/* The slot's body for its n_seqs sequences of lengths, set on its handle. */
static void make_body(struct run *r, struct slot *sl)
{
        rnnd_error_t e;

        if (rnnd_load_body_make(&sl->body, &r->payload, sl->n_seqs, sl->lengths, &e) < 0) {
                fprintf(stderr, "rnnd-load: %s\n", e.msg);
                exit(2);
        }
        curl_easy_setopt(sl->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)sl->body.size);
        if (r->s.format == RNND_TENSORS_BINARY) {
                char h[80];

                snprintf(h, sizeof(h), "Inference-Header-Content-Length: %zu", sl->body.json_len);
                curl_slist_free_all(sl->headers);
                sl->headers = curl_slist_append(NULL, "Expect:");
                sl->headers =
                        curl_slist_append(sl->headers, "Content-Type: application/octet-stream");
                sl->headers = curl_slist_append(sl->headers, h);
                curl_easy_setopt(sl->easy, CURLOPT_HTTPHEADER, sl->headers);
        }
}

/* Sends one request scheduled at intended on a free slot. */
static void start(struct run *r, uint64_t intended)
{
        struct slot *sl = &r->slots[r->free_head];
        struct tally *t = tally_of(r, intended);
        uint64_t now = now_ns(r);

        r->free_head = sl->next_free;
        r->n_busy++;
        sl->intended = intended;
        sl->started = now;
        sl->snip_len = 0;
        if (r->s.api != RNND_API_GET) {
                sl->n_seqs = r->s.sequences;
                for (uint32_t i = 0; i < sl->n_seqs; i++)
                        sl->lengths[i] = draw_length(r);
                if (r->s.streams > 0)
                        next_chunk(r, sl);
                make_body(r, sl);
        }
        t->sent++;
        if (now < (intended < r->warm_end ? r->warm_end : r->end))
                t->sent_in_window++;
        t->last_send = now;
        curl_multi_add_handle(r->multi, sl->easy);
}

/*
 * Before the run: one request as the run would send it, with the shortest
 * length (with --streams a whole sequence in one chunk, under an id of its
 * own), counted as warm-up.  A 4xx answer means no request of the run can
 * succeed (a model without a sequence block for --streams, an input it
 * lacks, a length past its limit): the server's whole answer goes to
 * stderr and the run is refused.  Anything else lets the run go on.
 */
static int probe(struct run *r, rnnd_error_t *err)
{
        struct slot *sl = &r->slots[0];
        const struct rnnd_loadspec *s = &r->s;
        uint32_t len = s->len_min;
        struct rnnd_strbuf b;
        long code = 0;
        CURLcode cr;

        if (s->api == RNND_API_GET)
                return 0;
        for (size_t i = 0; s->len_dist == RNND_LEN_FILE && i < r->n_file_lengths; i++)
                if (i == 0 || r->file_lengths[i] < len)
                        len = r->file_lengths[i];
        sl->n_seqs = s->sequences;
        for (uint32_t i = 0; i < sl->n_seqs; i++)
                sl->lengths[i] = len;
        if (s->streams > 0) {
                sl->lengths[0] = len < s->chunk_length ? len : s->chunk_length;
                snprintf(sl->body.params, sizeof(sl->body.params),
                         "{\"sequence_id\":%" PRIu64 ",\"sequence_start\":true,"
                         "\"sequence_end\":true}",
                         r->next_stream_id++);
        }
        make_body(r, sl);
        rnnd_strbuf_init(&b);
        curl_easy_setopt(sl->easy, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(sl->easy, CURLOPT_WRITEDATA, &b);
        cr = curl_easy_perform(sl->easy);
        curl_easy_getinfo(sl->easy, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_setopt(sl->easy, CURLOPT_WRITEFUNCTION, keep_snippet);
        curl_easy_setopt(sl->easy, CURLOPT_WRITEDATA, sl);
        sl->body.params[0] = '\0';
        r->warm.sent++;
        r->warm.done++;
        if (cr == CURLE_OK && code == 200)
                r->warm.ok++;
        else
                r->warm.errors++;
        if (cr == CURLE_OK && code >= 400 && code < 500) {
                fprintf(stderr,
                        "rnnd-load: the server refused the run's first request (HTTP %ld), so "
                        "none can succeed: %s\n",
                        code, b.data != NULL ? b.data : "");
                rnnd_strbuf_done(&b);
                return rnnd_error_set(err, RNND_EINVAL, "%s", ""); /* said above */
        }
        rnnd_strbuf_done(&b);
        return 0;
}

/* Whether a request scheduled at intended is still part of the run. */
static bool wanted(const struct run *r, uint64_t intended, uint64_t measured_so_far)
{
        if (interrupted)
                return false;
        if (intended < r->warm_end)
                return true;
        if (r->s.requests > 0)
                return measured_so_far < r->s.requests;
        return intended < r->end;
}

/* Open loop: one scheduled send, now or into the backlog. */
static void schedule(struct run *r, uint64_t intended)
{
        struct tally *t = tally_of(r, intended);

        if (r->n_busy < r->n_slots) {
                start(r, intended);
        } else if (r->bl_n < BACKLOG_CAP) {
                r->backlog[(r->bl_head + r->bl_n++) % BACKLOG_CAP] = intended;
        } else {
                t->overflow++;
                t->done++;
                t->errors++;
        }
}

static void next_arrival(struct run *r)
{
        double gap = 1.0 / r->s.rate;

        if (r->s.arrival == RNND_ARRIVAL_POISSON)
                gap = -log(1.0 - rnnd_rng_unit(&r->rng_arr)) / r->s.rate;
        r->next_send += (uint64_t)(gap * NS);
}

static void complete(struct run *r, struct slot *sl, CURLcode cr)
{
        uint64_t now = now_ns(r);
        struct tally *t = tally_of(r, sl->intended);
        long code = 0, connects = 0;
        curl_off_t up = 0, down = 0;

        curl_multi_remove_handle(r->multi, sl->easy);
        curl_easy_getinfo(sl->easy, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_getinfo(sl->easy, CURLINFO_NUM_CONNECTS, &connects);
        curl_easy_getinfo(sl->easy, CURLINFO_SIZE_UPLOAD_T, &up);
        curl_easy_getinfo(sl->easy, CURLINFO_SIZE_DOWNLOAD_T, &down);
        t->done++;
        t->connects += (uint64_t)connects;
        t->bytes_out += (double)up;
        t->bytes_in += (double)down;
        t->last_done = now;
        if (r->s.streams > 0 && (cr != CURLE_OK || code != 200))
                sl->stream_pos = sl->stream_len; /* a failed chunk ends its stream: start anew */
        if (cr != CURLE_OK) {
                t->errors++;
                t->curl[cr < CURL_LAST ? cr : CURLE_OK]++;
        } else if (code == 200) {
                t->ok++;
                t->sequences_ok += r->s.api == RNND_API_GET ? 0 : sl->n_seqs;
                if (r->s.streams > 0) {
                        t->steps_ok += sl->chunk;
                        sl->stream_pos += sl->chunk;
                }
                rnnd_hist_record(&t->latency, now - sl->intended);
                rnnd_hist_record(&t->service, now - sl->started);
        } else {
                code = code > 0 && code < HTTP_CODES ? code : 0;
                t->errors++;
                t->http[code]++;
                if (r->snippets[code] == NULL) {
                        sl->snip[sl->snip_len] = '\0';
                        r->snippets[code] = rnnd_strdup(sl->snip);
                }
        }
        sl->next_free = r->free_head;
        r->free_head = (unsigned)(sl - r->slots);
        r->n_busy--;

        if (r->s.mode == RNND_LOAD_CLOSED) {
                if (r->issuing && wanted(r, now, r->meas.sent))
                        start(r, now);
        } else if (r->bl_n > 0) {
                uint64_t intended = r->backlog[r->bl_head];

                r->bl_head = (r->bl_head + 1) % BACKLOG_CAP;
                r->bl_n--;
                start(r, intended);
        }
}

static double ms(uint64_t ns)
{
        return (double)ns / 1e6;
}

static void progress(struct run *r, uint64_t now)
{
        const struct tally *t = now < r->warm_end ? &r->warm : &r->meas;
        uint64_t done = r->warm.done + r->meas.done;

        if (!r->tty || now < r->next_progress)
                return;
        fprintf(stderr,
                "\r\033[K%s %6.1f s  %8.1f req/s  %" PRIu64 " done  %" PRIu64
                " errors  p50 %.3f ms  p99 %.3f ms",
                now < r->warm_end ? "warm-up" : "running", (double)now / NS,
                (double)(done - r->prog_done) / ((double)(now - r->next_progress) / NS + 1.0),
                t->done, t->errors, ms(rnnd_hist_percentile(&t->latency, 50)),
                ms(rnnd_hist_percentile(&t->latency, 99)));
        r->prog_done = done;
        r->next_progress = now + 1000000000u;
}

static void run_loop(struct run *r)
{
        const struct rnnd_loadspec *s = &r->s;

        clock_gettime(CLOCK_MONOTONIC, &r->t0);
        r->warm_end = (uint64_t)(s->warmup_s * NS);
        r->end = s->requests > 0 ? UINT64_MAX : r->warm_end + (uint64_t)(s->duration_s * NS);
        r->issuing = true;
        r->next_progress = 1000000000u;
        if (s->mode == RNND_LOAD_CLOSED) {
                for (unsigned i = 0; i < r->n_slots && wanted(r, 0, r->meas.sent); i++)
                        start(r, 0);
        }
        for (;;) {
                uint64_t now = now_ns(r), wait_ns = 250000000u;
                CURLMsg *msg;
                long ct = -1;
                int running, left;

                if (s->mode == RNND_LOAD_CLOSED && r->issuing && !wanted(r, now, r->meas.sent))
                        r->issuing = false;
                while (s->mode == RNND_LOAD_OPEN && r->issuing && r->next_send <= now) {
                        if (!wanted(r, r->next_send, r->scheduled)) {
                                r->issuing = false;
                                break;
                        }
                        if (r->next_send >= r->warm_end)
                                r->scheduled++;
                        schedule(r, r->next_send);
                        next_arrival(r);
                }
                curl_multi_perform(r->multi, &running);
                while ((msg = curl_multi_info_read(r->multi, &left)) != NULL) {
                        struct slot *sl;

                        if (msg->msg != CURLMSG_DONE)
                                continue;
                        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&sl);
                        complete(r, sl, msg->data.result);
                }
                if (interrupted)
                        r->issuing = false;
                if (!r->issuing && r->n_busy == 0 && r->bl_n == 0)
                        break;
                progress(r, now);
                if (s->mode == RNND_LOAD_OPEN && r->issuing)
                        wait_ns = r->next_send > now ? r->next_send - now : 0;
                else if (r->issuing && r->end != UINT64_MAX && r->end - now < wait_ns)
                        wait_ns = r->end > now ? r->end - now : 0;
                if (r->tty && r->next_progress > now && r->next_progress - now < wait_ns)
                        wait_ns = r->next_progress - now;
                curl_multi_timeout(r->multi, &ct);
                if (ct >= 0 && (uint64_t)ct * 1000000u < wait_ns)
                        wait_ns = (uint64_t)ct * 1000000u;
                /* Rounded up: a send goes out at most 1 ms late, and that counts in its latency. */
                curl_multi_poll(r->multi, NULL, 0, (int)((wait_ns + 999999) / 1000000), NULL);
        }
        if (r->tty)
                fprintf(stderr, "\r\033[K");
}

/* --- Report ------------------------------------------------------------------------- */

static const double pcts[] = {50, 90, 99, 99.9};
static const char *const pct_names[] = {"p50", "p90", "p99", "p99.9"};

static double elapsed_s(const struct run *r)
{
        const struct tally *t = &r->meas;
        uint64_t last = t->last_done > t->last_send ? t->last_done : t->last_send;

        if (r->end != UINT64_MAX && r->end > last)
                last = r->end;
        return last > r->warm_end ? (double)(last - r->warm_end) / NS : 0;
}

static double send_window_s(const struct run *r)
{
        if (r->end != UINT64_MAX)
                return (double)(r->end - r->warm_end) / NS;
        return r->meas.last_send > r->warm_end ? (double)(r->meas.last_send - r->warm_end) / NS : 0;
}

static void put_hist_json(struct rnnd_strbuf *b, const char *key, const struct rnnd_hist *h)
{
        rnnd_strbuf_json_key(b, key);
        rnnd_strbuf_printf(b, "{\"mean\":%.4f", rnnd_hist_mean(h) / 1e6);
        for (size_t i = 0; i < RNND_ELEMENTSOF(pcts); i++)
                rnnd_strbuf_printf(b, ",\"%s\":%.4f", pct_names[i],
                                   ms(rnnd_hist_percentile(h, pcts[i])));
        rnnd_strbuf_printf(b, ",\"max\":%.4f}", ms(h->count ? h->max : 0));
}

/* Calls fn(key, count, snippet) for every error kind with a count. */
static void each_error(const struct run *r, const struct tally *t,
                       void (*fn)(void *ctx, const char *key, uint64_t n, const char *snip),
                       void *ctx)
{
        char key[160];

        for (unsigned c = 0; c < HTTP_CODES; c++) {
                if (t->http[c] == 0)
                        continue;
                snprintf(key, sizeof(key), "%u", c);
                fn(ctx, key, t->http[c], r->snippets[c]);
        }
        for (unsigned c = 0; c < CURL_LAST; c++) {
                if (t->curl[c] == 0)
                        continue;
                snprintf(key, sizeof(key), "curl: %s", curl_easy_strerror((CURLcode)c));
                fn(ctx, key, t->curl[c], NULL);
        }
        if (t->overflow > 0)
                fn(ctx, "client: backlog full", t->overflow, NULL);
}

static void error_json(void *ctx, const char *key, uint64_t n, const char *snip)
{
        (void)snip;
        rnnd_strbuf_json_kv_u64(ctx, key, n);
}

static void error_text(void *ctx, const char *key, uint64_t n, const char *snip)
{
        (void)ctx;
        printf("    %-28s %" PRIu64 "%s%s%s\n", key, n, snip ? "  (" : "", snip ? snip : "",
               snip ? ")" : "");
}

static void describe(const struct run *r, char *buf, size_t n)
{
        const struct rnnd_loadspec *s = &r->s;

        if (s->mode == RNND_LOAD_CLOSED)
                snprintf(buf, n, "closed loop, %u in flight", s->concurrency);
        else
                snprintf(buf, n, "open loop, %g/s %s, at most %u in flight", s->rate,
                         s->arrival == RNND_ARRIVAL_POISSON ? "Poisson" : "fixed", s->concurrency);
}

static void lengths_text(const struct rnnd_loadspec *s, char *buf, size_t n)
{
        if (s->len_dist == RNND_LEN_FILE)
                snprintf(buf, n, "@%s", s->len_file);
        else if (s->len_dist == RNND_LEN_UNIFORM)
                snprintf(buf, n, "%" PRIu32 "..%" PRIu32, s->len_min, s->len_max);
        else
                snprintf(buf, n, "%" PRIu32, s->len_min);
}

static void report_json(const struct run *r, int exit_code)
{
        const struct rnnd_loadspec *s = &r->s;
        const struct tally *t = &r->meas;
        double el = elapsed_s(r), win = send_window_s(r);
        struct rnnd_strbuf b;
        char buf[300];

        rnnd_strbuf_init(&b);
        rnnd_strbuf_putc(&b, '{');
        rnnd_strbuf_json_kv_str(&b, "url", r->url);
        rnnd_strbuf_json_kv_str(&b, "api",
                                s->api == RNND_API_V2        ? "v2"
                                : s->api == RNND_API_PREDICT ? "predict"
                                                             : "get");
        rnnd_strbuf_json_kv_str(&b, "format", s->format == RNND_TENSORS_BINARY ? "binary" : "json");
        rnnd_strbuf_json_kv_str(&b, "mode", s->mode == RNND_LOAD_OPEN ? "open" : "closed");
        rnnd_strbuf_json_kv_u64(&b, "concurrency", s->concurrency);
        rnnd_strbuf_json_key(&b, "rate");
        rnnd_strbuf_printf(&b, "%g", s->mode == RNND_LOAD_OPEN ? s->rate : 0);
        rnnd_strbuf_json_kv_u64(&b, "sequences", s->sequences);
        lengths_text(s, buf, sizeof(buf));
        rnnd_strbuf_json_kv_str(&b, "lengths", buf);
        rnnd_strbuf_json_key(&b, "warmup");
        rnnd_strbuf_printf(&b,
                           "{\"seconds\":%g,\"sent\":%" PRIu64 ",\"completed\":%" PRIu64
                           ",\"ok\":%" PRIu64 ",\"errors\":%" PRIu64 "}",
                           s->warmup_s, r->warm.sent, r->warm.done, r->warm.ok, r->warm.errors);
        rnnd_strbuf_json_key(&b, "seconds");
        rnnd_strbuf_printf(&b, "%.4f", el);
        rnnd_strbuf_json_kv_u64(&b, "sent", t->sent);
        rnnd_strbuf_json_kv_u64(&b, "sent_in_window", t->sent_in_window);
        rnnd_strbuf_json_key(&b, "send_rate");
        rnnd_strbuf_printf(&b, "%.3f", win > 0 ? (double)t->sent_in_window / win : 0);
        rnnd_strbuf_json_kv_u64(&b, "completed", t->done);
        rnnd_strbuf_json_kv_u64(&b, "ok", t->ok);
        rnnd_strbuf_json_kv_u64(&b, "errors", t->errors);
        rnnd_strbuf_json_kv_u64(&b, "connections", t->connects);
        rnnd_strbuf_json_key(&b, "throughput");
        rnnd_strbuf_printf(&b, "%.3f", el > 0 ? (double)t->ok / el : 0);
        rnnd_strbuf_json_key(&b, "sequences_per_s");
        rnnd_strbuf_printf(&b, "%.3f", el > 0 ? (double)t->sequences_ok / el : 0);
        if (s->streams > 0) {
                rnnd_strbuf_json_kv_u64(&b, "streams", s->streams);
                rnnd_strbuf_json_kv_u64(&b, "chunk_length", s->chunk_length);
                rnnd_strbuf_json_key(&b, "useful_steps_per_s");
                rnnd_strbuf_printf(&b, "%.3f", el > 0 ? (double)t->steps_ok / el : 0);
        }
        rnnd_strbuf_json_key(&b, "bytes_out");
        rnnd_strbuf_printf(&b, "%.0f", t->bytes_out);
        rnnd_strbuf_json_key(&b, "bytes_in");
        rnnd_strbuf_printf(&b, "%.0f", t->bytes_in);
        put_hist_json(&b, "latency_ms", &t->latency);
        put_hist_json(&b, "service_ms", &t->service);
        rnnd_strbuf_json_key(&b, "errors_by_status");
        rnnd_strbuf_putc(&b, '{');
        each_error(r, t, error_json, &b);
        rnnd_strbuf_putc(&b, '}');
        rnnd_strbuf_json_kv_bool(&b, "interrupted", interrupted != 0);
        rnnd_strbuf_json_kv_u64(&b, "exit", (uint64_t)exit_code);
        rnnd_strbuf_puts(&b, "}\n");
        if (!b.oom)
                fwrite(b.data, 1, b.len, stdout);
        rnnd_strbuf_done(&b);
}

static void print_hist(const char *what, const struct rnnd_hist *h)
{
        printf("  %-34s mean %.3f", what, rnnd_hist_mean(h) / 1e6);
        for (size_t i = 0; i < RNND_ELEMENTSOF(pcts); i++)
                printf("  %s %.3f", pct_names[i], ms(rnnd_hist_percentile(h, pcts[i])));
        printf("  max %.3f\n", ms(h->count ? h->max : 0));
}

static void report_text(const struct run *r)
{
        const struct rnnd_loadspec *s = &r->s;
        const struct tally *t = &r->meas;
        double el = elapsed_s(r), win = send_window_s(r);
        char mode[128], lens[300];

        describe(r, mode, sizeof(mode));
        lengths_text(s, lens, sizeof(lens));
        printf("rnnd-load: %s: %s %s\n", mode, s->api == RNND_API_GET ? "GET" : "POST", r->url);
        if (s->api != RNND_API_GET)
                printf("  body: %s %s, %" PRIu32 " sequence(s) of length %s, input %s %s, "
                       "seed %" PRIu64 "\n",
                       s->api == RNND_API_V2 ? "v2" : "predict",
                       s->format == RNND_TENSORS_BINARY ? "binary" : "json", s->sequences, lens,
                       s->input.name, rnnd_dtype_name(s->input.dtype), s->seed);
        if (s->warmup_s > 0)
                printf("  warm-up %.1f s: %" PRIu64 " requests, %" PRIu64 " errors (not counted)\n",
                       s->warmup_s, r->warm.done, r->warm.errors);
        printf("  %.2f s: %" PRIu64 " sent (%.1f/s), %" PRIu64 " completed, %" PRIu64
               " ok, %" PRIu64 " errors, %" PRIu64 " new connections%s\n",
               el, t->sent, win > 0 ? (double)t->sent_in_window / win : 0, t->done, t->ok,
               t->errors, t->connects, interrupted ? " (interrupted)" : "");
        printf("  throughput %.1f requests/s", el > 0 ? (double)t->ok / el : 0);
        if (s->api != RNND_API_GET)
                printf(", %.1f sequences/s", el > 0 ? (double)t->sequences_ok / el : 0);
        printf("; %.2f MB/s out, %.2f MB/s in\n", el > 0 ? t->bytes_out / el / 1e6 : 0,
               el > 0 ? t->bytes_in / el / 1e6 : 0);
        if (s->streams > 0)
                printf("  streams: %" PRIu32 " live, chunks of %" PRIu32 " steps: %.1f useful "
                       "steps/s\n",
                       s->streams, s->chunk_length, el > 0 ? (double)t->steps_ok / el : 0);
        print_hist(s->streams > 0              ? "chunk latency (ms)"
                   : s->mode == RNND_LOAD_OPEN ? "latency (ms, from scheduled send)"
                                               : "latency (ms)",
                   &t->latency);
        if (s->mode == RNND_LOAD_OPEN)
                print_hist("service time (ms, from actual send)", &t->service);
        if (t->errors > 0) {
                printf("  errors by status:\n");
                each_error(r, t, error_text, NULL);
        }
}

int main(int argc, char **argv)
{
        struct run *r = rnnd_calloc(1, sizeof(*r));
        rnnd_error_t e = {0};
        double rate;
        int ret;

        if (r == NULL)
                return 2;
        rnnd_loadspec_init(&r->s);
        ret = parse_args(r, argc, argv);
        if (ret != 0) {
                rnnd_free(r);
                return ret > 0 ? 0 : 2;
        }
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                fprintf(stderr, "rnnd-load: curl_global_init failed\n");
                return 2;
        }
        signal(SIGPIPE, SIG_IGN);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        r->tty = r->s.progress && isatty(STDERR_FILENO);
        if (setup(r, &e) < 0 || probe(r, &e) < 0) {
                if (e.msg[0] != '\0')
                        fprintf(stderr, "rnnd-load: %s\n", e.msg);
                ret = 2;
                goto out;
        }
        run_loop(r);
        rate = r->meas.done > 0 ? (double)r->meas.errors / (double)r->meas.done : 1;
        ret = r->meas.done == 0 || rate > r->s.max_error_rate ? 1 : 0;
        if (r->s.json)
                report_json(r, ret);
        else
                report_text(r);
        if (ret != 0)
                fprintf(stderr,
                        "rnnd-load: %" PRIu64 " errors in %" PRIu64
                        " requests, above --max-error-rate=%g\n",
                        r->meas.errors, r->meas.done, r->s.max_error_rate);
out:
        teardown(r);
        rnnd_free(r);
        curl_global_cleanup();
        return ret;
}

/*
 * seqtab.c: the live stateful sequences of one model version (seqtab.h).
 *
 * Live sequences sit in a chained hash table that doubles as they grow
 * (from 64 buckets), each with its state in one allocation.  Ids no longer
 * live sit in a ring of at most RING_MAX entries, the oldest overwritten,
 * searched from the newest: it only answers "why not live" for a chunk that
 * came too late, which is an error path.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "seqtab.h"

#define RING_MAX 4096u

struct gone {
        struct rnnd_seq_id id;
        enum rnnd_seq_gone why;
};

struct rnnd_seqtab {
        struct rnnd_seqtab_params p;
        struct rnnd_stream **bucket; /* [n_buckets] */
        size_t n_buckets;            /* a power of two */
        struct gone *ring;           /* [ring_cap] */
        size_t ring_cap, ring_n, ring_at;
        struct rnnd_seqtab_counts counts;
};

static uint64_t id_hash(const struct rnnd_seq_id *id)
{
        uint64_t h = UINT64_C(0xcbf29ce484222325);

        if (id->str[0] == '\0')
                return (id->num * UINT64_C(0x9e3779b97f4a7c15)) ^ (id->num >> 29);
        for (const unsigned char *s = (const unsigned char *)id->str; *s != '\0'; s++)
                h = (h ^ *s) * UINT64_C(0x100000001b3);
        return h;
}

static bool id_eq(const struct rnnd_seq_id *a, const struct rnnd_seq_id *b)
{
        return a->str[0] == '\0' ? b->str[0] == '\0' && a->num == b->num
                                 : strcmp(a->str, b->str) == 0;
}

const char *rnnd_seq_id_format(const struct rnnd_seq_id *id, char *buf, size_t cap)
{
        if (id->str[0] == '\0')
                snprintf(buf, cap, "sequence_id %" PRIu64, id->num);
        else
                snprintf(buf, cap, "sequence_id \"%s\"", id->str);
        return buf;
}

int rnnd_seqtab_new(const struct rnnd_seqtab_params *p, rnnd_seqtab_t **ret, rnnd_error_t *reterr)
{
        rnnd_seqtab_t *t;

        if (p->max_sequences == 0 || p->state_floats == 0 || p->idle_timeout_ns == 0)
                return rnnd_error_set(reterr, RNND_EINVAL, "sequence table: a zero parameter");
        t = rnnd_calloc(1, sizeof(*t));
        if (t == NULL)
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
        t->p = *p;
        t->n_buckets = 64;
        t->bucket = rnnd_calloc(t->n_buckets, sizeof(t->bucket[0]));
        t->ring_cap = p->max_sequences < RING_MAX ? p->max_sequences : RING_MAX;
        t->ring = rnnd_calloc(t->ring_cap, sizeof(t->ring[0]));
        if (t->bucket == NULL || t->ring == NULL) {
                rnnd_seqtab_free(t);
                return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
        }
        *ret = t;
        return 0;
}

rnnd_seqtab_t *rnnd_seqtab_free(rnnd_seqtab_t *t)
{
        if (t == NULL)
                return NULL;
        for (size_t i = 0; t->bucket != NULL && i < t->n_buckets; i++) {
                struct rnnd_stream *s = t->bucket[i], *next;

                for (; s != NULL; s = next) {
                        next = s->next;
                        rnnd_free(s);
                }
        }
        rnnd_free(t->bucket);
        rnnd_free(t->ring);
        rnnd_free(t);
        return NULL;
}

static struct rnnd_stream **slot(rnnd_seqtab_t *t, const struct rnnd_seq_id *id)
{
        struct rnnd_stream **pp = &t->bucket[id_hash(id) & (t->n_buckets - 1)];

        while (*pp != NULL && !id_eq(&(*pp)->id, id))
                pp = &(*pp)->next;
        return pp;
}

/* Doubles the buckets when the live sequences outnumber them; keeps them on failure. */
static void grow(rnnd_seqtab_t *t)
{
        size_t n = t->n_buckets * 2;
        struct rnnd_stream **b;

        if (t->counts.live <= t->n_buckets || n > SIZE_MAX / sizeof(b[0]))
                return;
        b = rnnd_calloc(n, sizeof(b[0]));
        if (b == NULL)
                return;
        for (size_t i = 0; i < t->n_buckets; i++) {
                struct rnnd_stream *s = t->bucket[i], *next;

                for (; s != NULL; s = next) {
                        size_t k = id_hash(&s->id) & (n - 1);

                        next = s->next;
                        s->next = b[k];
                        b[k] = s;
                }
        }
        rnnd_free(t->bucket);
        t->bucket = b;
        t->n_buckets = n;
}

static void remember(rnnd_seqtab_t *t, const struct rnnd_seq_id *id, enum rnnd_seq_gone why)
{
        t->ring[t->ring_at] = (struct gone){.id = *id, .why = why};
        t->ring_at = (t->ring_at + 1) % t->ring_cap;
        if (t->ring_n < t->ring_cap)
                t->ring_n++;
}

/* Takes the sequence at *pp out of the table, remembering why. */
static void unlink_seq(rnnd_seqtab_t *t, struct rnnd_stream **pp, enum rnnd_seq_gone why)
{
        struct rnnd_stream *s = *pp;

        *pp = s->next;
        remember(t, &s->id, why);
        t->counts.live--;
        if (why == RNND_SEQ_ENDED)
                t->counts.ended++;
        else if (why == RNND_SEQ_EXPIRED)
                t->counts.expired++;
        rnnd_free(s);
}

static bool idle_past(const rnnd_seqtab_t *t, const struct rnnd_stream *s, uint64_t now)
{
        return !s->busy && now > s->last_ns && now - s->last_ns > t->p.idle_timeout_ns;
}

int rnnd_seqtab_start(rnnd_seqtab_t *t, const struct rnnd_seq_id *id, uint64_t now,
                      struct rnnd_stream **ret, rnnd_error_t *reterr)
{
        struct rnnd_stream **pp = slot(t, id), *s = *pp;
        char name[RNND_SEQ_ID_MAX + 32];

        if (s != NULL && s->busy)
                return rnnd_error_set(reterr, RNND_EUNAVAIL,
                                      "%s: a chunk of it is still running; restart it after",
                                      rnnd_seq_id_format(id, name, sizeof(name)));
        if (s == NULL) {
                if (t->counts.live >= t->p.max_sequences && rnnd_seqtab_expire(t, now) == 0) {
                        t->counts.refused++;
                        return rnnd_error_set(reterr, RNND_EUNAVAIL,
                                              "%" PRIu32 " sequences are live "
                                              "(sequence.max_sequences); end one or retry later",
                                              t->p.max_sequences);
                }
                s = rnnd_malloc(sizeof(*s) + t->p.state_floats * sizeof(float));
                if (s == NULL)
                        return rnnd_error_set(reterr, RNND_ENOMEM, "out of memory");
                s->id = *id;
                s->state = (float *)(s + 1);
                pp = slot(t, id); /* expiring may have moved the chain's end */
                s->next = NULL;
                *pp = s;
                t->counts.live++;
                grow(t);
        }
        memset(s->state, 0, t->p.state_floats * sizeof(float));
        s->waiting = NULL;
        s->n_waiting = 0;
        s->last_ns = now;
        s->busy = true;
        t->counts.started++;
        *ret = s;
        return 0;
}

struct rnnd_stream *rnnd_seqtab_find(rnnd_seqtab_t *t, const struct rnnd_seq_id *id, uint64_t now,
                                     bool *running, enum rnnd_seq_gone *why, rnnd_error_t *reterr)
{
        static const char *const said[] = {
                [RNND_SEQ_NEVER] = "was never started (send sequence_start first)",
                [RNND_SEQ_ENDED] = "has ended (a chunk with sequence_end ended it)",
                [RNND_SEQ_EXPIRED] = "expired (unused for sequence.idle_timeout_ms)",
                [RNND_SEQ_DROPPED] = "was dropped: the model was reloaded (a SIGHUP, a poll or a "
                                     "repository load rebuilt it)",
        };
        struct rnnd_stream **pp = slot(t, id), *s = *pp;
        char name[RNND_SEQ_ID_MAX + 32];

        *why = RNND_SEQ_NEVER;
        *running = false;
        if (s != NULL && idle_past(t, s, now)) {
                unlink_seq(t, pp, RNND_SEQ_EXPIRED);
                s = NULL;
        }
        if (s != NULL) {
                *running = s->busy;
                s->busy = true;
                return s;
        }
        for (size_t k = 0; k < t->ring_n; k++) {
                const struct gone *g = &t->ring[(t->ring_at + t->ring_cap - 1 - k) % t->ring_cap];

                if (id_eq(&g->id, id)) {
                        *why = g->why;
                        break;
                }
        }
        rnnd_error_set(reterr, RNND_EINVAL, "%s is not live: it %s",
                       rnnd_seq_id_format(id, name, sizeof(name)), said[*why]);
        return NULL;
}

struct rnnd_stream *rnnd_seqtab_peek(rnnd_seqtab_t *t, const struct rnnd_seq_id *id)
{
        return *slot(t, id);
}

void rnnd_seqtab_restart(rnnd_seqtab_t *t, struct rnnd_stream *s, bool ended, uint64_t now)
{
        if (ended)
                t->counts.ended++;
        t->counts.started++;
        memset(s->state, 0, t->p.state_floats * sizeof(float));
        s->last_ns = now;
}

void rnnd_seqtab_release(rnnd_seqtab_t *t, struct rnnd_stream *s, bool end, uint64_t now)
{
        s->busy = false;
        s->last_ns = now;
        if (end)
                unlink_seq(t, slot(t, &s->id), RNND_SEQ_ENDED);
}

/* Removes the sequences for which drop() says so, remembering why; returns how many. */
static size_t remove_if(rnnd_seqtab_t *t,
                        bool (*drop)(const rnnd_seqtab_t *t, const struct rnnd_stream *s,
                                     uint64_t now),
                        uint64_t now, enum rnnd_seq_gone why)
{
        size_t n = 0;

        for (size_t i = 0; i < t->n_buckets; i++) {
                struct rnnd_stream **pp = &t->bucket[i];

                while (*pp != NULL) {
                        if (drop(t, *pp, now)) {
                                unlink_seq(t, pp, why);
                                n++;
                        } else {
                                pp = &(*pp)->next;
                        }
                }
        }
        return n;
}

size_t rnnd_seqtab_expire(rnnd_seqtab_t *t, uint64_t now)
{
        return remove_if(t, idle_past, now, RNND_SEQ_EXPIRED);
}

static bool not_busy(const rnnd_seqtab_t *t, const struct rnnd_stream *s, uint64_t now)
{
        (void)t;
        (void)now;
        return !s->busy;
}

size_t rnnd_seqtab_drop_all(rnnd_seqtab_t *t)
{
        return remove_if(t, not_busy, 0, RNND_SEQ_DROPPED);
}

size_t rnnd_seqtab_note_dropped(const rnnd_seqtab_t *from, rnnd_seqtab_t *to)
{
        size_t n = 0;

        /* What from remembered goes first, oldest first: a second reload keeps the first's. */
        for (size_t k = from->ring_n; k > 0; k--) {
                const struct gone *g =
                        &from->ring[(from->ring_at + from->ring_cap - k) % from->ring_cap];

                remember(to, &g->id, g->why);
        }
        for (size_t i = 0; i < from->n_buckets; i++)
                for (const struct rnnd_stream *s = from->bucket[i]; s != NULL; s = s->next, n++)
                        remember(to, &s->id, RNND_SEQ_DROPPED);
        return n;
}

void rnnd_seqtab_counts(const rnnd_seqtab_t *t, struct rnnd_seqtab_counts *ret)
{
        *ret = t->counts;
        ret->max = t->p.max_sequences;
}

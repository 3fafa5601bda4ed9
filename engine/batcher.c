/*
 * batcher.c: the sequence batcher (see batcher.h).
 *
 * DESIGN
 * Each waiting sequence sits in three structures at once:
 *   - its level's FIFO, by arrival: the oldest starts the next batch;
 *   - its (level, length) bucket, also by arrival: filling walks outward from
 *     the anchor's length, and a bitmap per level of non-empty buckets lets
 *     it skip empty lengths a word at a time;
 *   - a binary min-heap on deadline, for the sequences that have one.
 * Every operation is O(1) or O(log n) but the fill, which is O(batch size +
 * max_len / 64) per level.  Pushes normally append; a sequence pushed back
 * after a failed run walks back from the tail to its arrival time.
 */
#include <string.h>

#include "alloc.h"
#include "batcher.h"
#include "error.h"

struct bucket {
        struct rnnd_bseq *head, *tail;
};

struct level {
        struct rnnd_bseq *head, *tail; /* FIFO by arrival */
        struct bucket *buckets;        /* [max_len + 1], by length */
        uint64_t *bits;                /* [words]: bit len set when buckets[len] is non-empty */
};

struct rnnd_batcher {
        struct rnnd_batcher_params p;
        uint32_t words; /* per level bitmap */
        uint32_t count;
        struct level levels[RNND_BATCHER_MAX_LEVELS];
        struct rnnd_bseq **heap; /* [capacity] */
        uint32_t heap_n;
};

int rnnd_batcher_new(const struct rnnd_batcher_params *params, rnnd_batcher_t **ret)
{
        rnnd_batcher_t *b;

        if (params->max_batch_size == 0 || params->max_len == 0 || params->capacity == 0 ||
            params->levels == 0 || params->levels > RNND_BATCHER_MAX_LEVELS ||
            params->max_batch_steps < params->max_len)
                return RNND_EINVAL;
        b = rnnd_calloc(1, sizeof(*b));
        if (b == NULL)
                return RNND_ENOMEM;
        b->p = *params;
        b->words = (params->max_len + 1 + 63) / 64;
        b->heap = rnnd_calloc(params->capacity, sizeof(*b->heap));
        if (b->heap == NULL)
                goto fail;
        for (uint32_t l = 0; l < params->levels; l++) {
                b->levels[l].buckets = rnnd_calloc(params->max_len + 1, sizeof(struct bucket));
                b->levels[l].bits = rnnd_calloc(b->words, sizeof(uint64_t));
                if (b->levels[l].buckets == NULL || b->levels[l].bits == NULL)
                        goto fail;
        }
        *ret = b;
        return 0;
fail:
        rnnd_batcher_free(b);
        return RNND_ENOMEM;
}

void rnnd_batcher_free(rnnd_batcher_t *b)
{
        if (b == NULL)
                return;
        for (uint32_t l = 0; l < RNND_BATCHER_MAX_LEVELS; l++) {
                rnnd_free(b->levels[l].buckets);
                rnnd_free(b->levels[l].bits);
        }
        rnnd_free(b->heap);
        rnnd_free(b);
}

uint32_t rnnd_batcher_count(const rnnd_batcher_t *b)
{
        return b->count;
}

/* The deadline heap. */

static void heap_set(rnnd_batcher_t *b, uint32_t i, struct rnnd_bseq *s)
{
        b->heap[i] = s;
        s->heap_idx = i;
}

static void heap_up(rnnd_batcher_t *b, uint32_t i)
{
        struct rnnd_bseq *s = b->heap[i];

        while (i > 0) {
                uint32_t parent = (i - 1) / 2;

                if (b->heap[parent]->deadline_ns <= s->deadline_ns)
                        break;
                heap_set(b, i, b->heap[parent]);
                i = parent;
        }
        heap_set(b, i, s);
}

static void heap_down(rnnd_batcher_t *b, uint32_t i)
{
        struct rnnd_bseq *s = b->heap[i];

        for (;;) {
                uint32_t c = 2 * i + 1;

                if (c >= b->heap_n)
                        break;
                if (c + 1 < b->heap_n && b->heap[c + 1]->deadline_ns < b->heap[c]->deadline_ns)
                        c++;
                if (s->deadline_ns <= b->heap[c]->deadline_ns)
                        break;
                heap_set(b, i, b->heap[c]);
                i = c;
        }
        heap_set(b, i, s);
}

static void heap_remove(rnnd_batcher_t *b, struct rnnd_bseq *s)
{
        uint32_t i = s->heap_idx;
        struct rnnd_bseq *last;

        s->heap_idx = UINT32_MAX;
        last = b->heap[--b->heap_n];
        if (last == s)
                return;
        heap_set(b, i, last);
        heap_up(b, i);
        heap_down(b, last->heap_idx);
}

/* Bitmap of non-empty buckets. */

static void bit_set(struct level *lv, uint32_t len, bool on)
{
        uint64_t m = UINT64_C(1) << (len % 64);

        if (on)
                lv->bits[len / 64] |= m;
        else
                lv->bits[len / 64] &= ~m;
}

/* The longest non-empty length <= len, or 0 when none. */
static uint32_t bit_prev(const struct level *lv, uint32_t len)
{
        uint32_t w = len / 64;
        uint64_t word =
                lv->bits[w] & (len % 64 == 63 ? ~UINT64_C(0) : (UINT64_C(1) << (len % 64 + 1)) - 1);

        for (;;) {
                if (word != 0)
                        return w * 64 + 63 - (uint32_t)__builtin_clzll(word);
                if (w == 0)
                        return 0;
                word = lv->bits[--w];
        }
}

/* The shortest non-empty length >= len, or 0 when none. */
static uint32_t bit_next(const rnnd_batcher_t *b, const struct level *lv, uint32_t len)
{
        uint32_t w;
        uint64_t word;

        if (len > b->p.max_len)
                return 0;
        w = len / 64;
        word = lv->bits[w] & ~((UINT64_C(1) << (len % 64)) - 1);
        for (;;) {
                if (word != 0)
                        return w * 64 + (uint32_t)__builtin_ctzll(word);
                if (++w == b->words)
                        return 0;
                word = lv->bits[w];
        }
}

/*
 * Links s into a list by arrival, walking back from the tail: O(1) for the
 * usual append.  prev/next are the offsets of s's links for this list.
 */
#define LINK_BY_ARRIVAL(headp, tailp, s, PREV, NEXT)                                               \
        do {                                                                                       \
                struct rnnd_bseq *at_ = *(tailp);                                                  \
                while (at_ != NULL && at_->arrival_ns > (s)->arrival_ns)                           \
                        at_ = at_->PREV;                                                           \
                (s)->PREV = at_;                                                                   \
                (s)->NEXT = at_ != NULL ? at_->NEXT : *(headp);                                    \
                if ((s)->NEXT != NULL)                                                             \
                        (s)->NEXT->PREV = (s);                                                     \
                else                                                                               \
                        *(tailp) = (s);                                                            \
                if (at_ != NULL)                                                                   \
                        at_->NEXT = (s);                                                           \
                else                                                                               \
                        *(headp) = (s);                                                            \
        } while (0)

#define UNLINK(headp, tailp, s, PREV, NEXT)                                                        \
        do {                                                                                       \
                if ((s)->PREV != NULL)                                                             \
                        (s)->PREV->NEXT = (s)->NEXT;                                               \
                else                                                                               \
                        *(headp) = (s)->NEXT;                                                      \
                if ((s)->NEXT != NULL)                                                             \
                        (s)->NEXT->PREV = (s)->PREV;                                               \
                else                                                                               \
                        *(tailp) = (s)->PREV;                                                      \
                (s)->PREV = (s)->NEXT = NULL;                                                      \
        } while (0)

void rnnd_batcher_push(rnnd_batcher_t *b, struct rnnd_bseq *s)
{
        struct level *lv = &b->levels[s->level];
        struct bucket *bk = &lv->buckets[s->len];

        LINK_BY_ARRIVAL(&lv->head, &lv->tail, s, fifo_prev, fifo_next);
        LINK_BY_ARRIVAL(&bk->head, &bk->tail, s, len_prev, len_next);
        bit_set(lv, s->len, true);
        s->heap_idx = UINT32_MAX;
        if (s->deadline_ns != 0) {
                b->heap_n++;
                heap_set(b, b->heap_n - 1, s);
                heap_up(b, b->heap_n - 1);
        }
        s->queued = true;
        b->count++;
}

void rnnd_batcher_remove(rnnd_batcher_t *b, struct rnnd_bseq *s)
{
        struct level *lv;
        struct bucket *bk;

        if (!s->queued)
                return;
        lv = &b->levels[s->level];
        bk = &lv->buckets[s->len];
        UNLINK(&lv->head, &lv->tail, s, fifo_prev, fifo_next);
        UNLINK(&bk->head, &bk->tail, s, len_prev, len_next);
        if (bk->head == NULL)
                bit_set(lv, s->len, false);
        if (s->heap_idx != UINT32_MAX)
                heap_remove(b, s);
        s->queued = false;
        b->count--;
}

struct rnnd_bseq *rnnd_batcher_oldest(const rnnd_batcher_t *b)
{
        struct rnnd_bseq *best = NULL;

        for (uint32_t l = 0; l < b->p.levels; l++) {
                struct rnnd_bseq *h = b->levels[l].head;

                if (h != NULL && (best == NULL || h->arrival_ns < best->arrival_ns))
                        best = h;
        }
        return best;
}

struct rnnd_bseq *rnnd_batcher_next(const rnnd_batcher_t *b, const struct rnnd_bseq *s)
{
        uint32_t l = 0;

        if (s != NULL) {
                if (s->fifo_next != NULL)
                        return s->fifo_next;
                l = s->level + 1;
        }
        for (; l < b->p.levels; l++)
                if (b->levels[l].head != NULL)
                        return b->levels[l].head;
        return NULL;
}

uint64_t rnnd_batcher_next_due(const rnnd_batcher_t *b)
{
        const struct rnnd_bseq *o = rnnd_batcher_oldest(b);

        if (o == NULL)
                return UINT64_MAX;
        if (b->count >= b->p.max_batch_size)
                return 0;
        if (o->arrival_ns > UINT64_MAX - b->p.delay_ns)
                return UINT64_MAX;
        return o->arrival_ns + b->p.delay_ns;
}

uint64_t rnnd_batcher_due(const rnnd_batcher_t *b, uint64_t now,
                          const struct rnnd_batcher_outlook *o)
{
        uint64_t due = rnnd_batcher_next_due(b), next;

        if (b->count == 0)
                return UINT64_MAX;
        if (due <= now || o->idle_others > 0)
                return due < now ? due : now;
        if (o->expected > 0 || o->backlog >= 512)
                return due;
        if (o->returning > 0 && o->returning_until > now)
                return o->returning_until < due ? o->returning_until : due;
        if (o->gap_ns != 0 && o->gap_ns <= o->run_ns && o->last_ns <= UINT64_MAX - o->gap_ns) {
                next = o->last_ns + o->gap_ns;
                if (next > now)
                        return next < due ? next : due;
        }
        return now;
}

uint64_t rnnd_batcher_next_deadline(const rnnd_batcher_t *b)
{
        return b->heap_n > 0 ? b->heap[0]->deadline_ns : UINT64_MAX;
}

uint32_t rnnd_batcher_pop_expired(rnnd_batcher_t *b, uint64_t now, struct rnnd_bseq **out,
                                  uint32_t cap)
{
        uint32_t n = 0;

        while (n < cap && b->heap_n > 0 && b->heap[0]->deadline_ns <= now) {
                out[n] = b->heap[0];
                rnnd_batcher_remove(b, out[n]);
                n++;
        }
        return n;
}

/* A batch being formed. */
struct fill {
        struct rnnd_bseq **out;
        uint32_t n;
        uint32_t longest;
        uint32_t anchor_len;
};

/* Whether one more sequence of length len fits the batch. */
static bool fits(const rnnd_batcher_t *b, const struct fill *f, uint32_t len)
{
        uint64_t longest = len > f->longest ? len : f->longest;

        return f->n < b->p.max_batch_size && (uint64_t)(f->n + 1) * longest <= b->p.max_batch_steps;
}

static void take(rnnd_batcher_t *b, struct fill *f, struct rnnd_bseq *s)
{
        rnnd_batcher_remove(b, s);
        f->out[f->n++] = s;
        if (s->len > f->longest)
                f->longest = s->len;
}

/*
 * Fills f from one level with the sequences closest in length to the anchor,
 * the oldest first within a length; at equal distance the shorter wins, as
 * it adds no padding.
 */
static void fill_level(rnnd_batcher_t *b, struct fill *f, struct level *lv)
{
        uint32_t lo = bit_prev(lv, f->anchor_len);
        uint32_t hi = bit_next(b, lv, f->anchor_len + 1);

        while (f->n < b->p.max_batch_size && (lo != 0 || hi != 0)) {
                bool use_lo = lo != 0 && (hi == 0 || f->anchor_len - lo <= hi - f->anchor_len);

                if (use_lo) {
                        /* Nothing shorter can fit if this one does not. */
                        if (!fits(b, f, lo))
                                return;
                        take(b, f, lv->buckets[lo].head);
                        if (lv->buckets[lo].head == NULL)
                                lo = bit_prev(lv, lo - 1);
                } else if (!fits(b, f, hi)) {
                        hi = 0; /* nor anything longer */
                } else {
                        take(b, f, lv->buckets[hi].head);
                        if (lv->buckets[hi].head == NULL)
                                hi = bit_next(b, lv, hi + 1);
                }
        }
}

uint32_t rnnd_batcher_pop(rnnd_batcher_t *b, uint64_t now, bool flush, struct rnnd_bseq **out)
{
        struct fill f = {.out = out};
        uint32_t first;
        struct rnnd_bseq *anchor;

        if (b->count == 0)
                return 0;
        if (!flush && rnnd_batcher_next_due(b) > now)
                return 0;
        for (first = 0; b->levels[first].head == NULL; first++)
                ;
        anchor = b->levels[first].head;
        f.anchor_len = anchor->len;
        take(b, &f, anchor);
        fill_level(b, &f, &b->levels[first]);
        for (uint32_t l = 0; l < b->p.levels; l++)
                if (l != first && b->levels[l].head != NULL)
                        fill_level(b, &f, &b->levels[l]);
        return f.n;
}

/*
 * batcher.h: the sequence batcher of DESIGN.md §6.
 *
 * Pure: no threads, no clock, no allocation after rnnd_batcher_new().  The
 * caller owns the nodes (struct rnnd_bseq, one per waiting sequence) and
 * passes the time in, so every decision can be tested table by table.
 *
 * The unit is the sequence.  A batch is due when max_batch_size sequences
 * wait or the oldest has waited delay_ns (or at once when the caller
 * flushes); rnnd_batcher_due() says when waiting that long does not pay.  It starts with the oldest
 * sequence of the highest priority level that has any, and fills with the waiting sequences closest
 * in length to it, first from that level and then from the others in priority order, bounded by
 * max_batch_size and by max_batch_steps (B x longest).  Starting from the oldest is what keeps a
 * long sequence from starving under a steady stream of shorter ones.  Sequences with a deadline
 * expire through rnnd_batcher_pop_expired().
 */
#ifndef RNND_ENGINE_BATCHER_H
#define RNND_ENGINE_BATCHER_H

#include <stdbool.h>
#include <stdint.h>

#define RNND_BATCHER_MAX_LEVELS 8

typedef struct rnnd_batcher rnnd_batcher_t;

struct rnnd_batcher_params {
        uint32_t max_batch_size;  /* sequences per batch, 1.. */
        uint64_t max_batch_steps; /* B x longest per batch, >= max_len */
        uint64_t delay_ns;        /* how long the oldest may wait for a fuller batch */
        uint32_t max_len;         /* longest sequence, 1.. */
        uint32_t levels;          /* priority levels, 1..RNND_BATCHER_MAX_LEVELS; 0 is highest */
        uint32_t capacity;        /* most sequences waiting at once, 1.. */
};

/* One waiting sequence.  The caller sets the first four fields before push. */
struct rnnd_bseq {
        uint32_t len;         /* 1..max_len */
        uint32_t level;       /* 0..levels-1 */
        uint64_t arrival_ns;  /* when it was queued: the order and the delay */
        uint64_t deadline_ns; /* expires at this time; 0 = never */

        /* Private to the batcher. */
        struct rnnd_bseq *fifo_prev, *fifo_next; /* its level, by arrival */
        struct rnnd_bseq *len_prev, *len_next;   /* its level and length, by arrival */
        uint32_t heap_idx;                       /* in the deadline heap, or UINT32_MAX */
        bool queued;
};

/*
 * Allocates a batcher for params (checked: RNND_EINVAL names the bad one).
 * Returns 0 and *ret, or a negative RNND_E*.
 */
int rnnd_batcher_new(const struct rnnd_batcher_params *params, rnnd_batcher_t **ret);

/* Frees b (which must hold no sequence the caller still needs).  Accepts NULL. */
void rnnd_batcher_free(rnnd_batcher_t *b);

/* Sequences waiting. */
uint32_t rnnd_batcher_count(const rnnd_batcher_t *b);

/*
 * Queues s.  The caller guarantees count < capacity and a valid len and
 * level.  Sequences are kept in arrival_ns order (ties in push order), so a
 * sequence pushed back after a failed run regains its place.
 */
void rnnd_batcher_push(rnnd_batcher_t *b, struct rnnd_bseq *s);

/* Removes a queued s (a canceled request).  No-op when s is not queued. */
void rnnd_batcher_remove(rnnd_batcher_t *b, struct rnnd_bseq *s);

/*
 * Forms the next batch at time now, if one is due (or any sequence waits and
 * flush is true): removes its sequences and writes them to out[0..n-1], the
 * oldest first.  Returns n, or 0 when no batch is due.  out has room for
 * max_batch_size entries.
 */
uint32_t rnnd_batcher_pop(rnnd_batcher_t *b, uint64_t now, bool flush, struct rnnd_bseq **out);

/*
 * Removes up to cap sequences whose deadline is at or before now, earliest
 * first, and writes them to out.  Returns how many.
 */
uint32_t rnnd_batcher_pop_expired(rnnd_batcher_t *b, uint64_t now, struct rnnd_bseq **out,
                                  uint32_t cap);

/* When rnnd_batcher_pop() without flush will next form a batch: 0 for now, UINT64_MAX never. */
uint64_t rnnd_batcher_next_due(const rnnd_batcher_t *b);

/*
 * What the caller knows of the work to come, for rnnd_batcher_due().  Zero
 * fields mean none known.
 */
struct rnnd_batcher_outlook {
        uint32_t idle_others;     /* instances idle besides the one that would run the batch */
        uint32_t expected;        /* requests on their way: bodies still arriving */
        uint64_t last_ns;         /* when the last sequences were queued */
        uint64_t gap_ns;          /* the mean time between submits; 0 unknown */
        uint64_t run_ns;          /* the mean time an instance takes for a batch; 0 unknown */
        uint32_t backlog;         /* 0..1024: how often a finished batch found more waiting */
        uint32_t returning;       /* requests answered lately whose clients have not come back */
        uint64_t returning_until; /* when the last of those stops being expected */
};

/*
 * When an idle instance should form the next batch, at time now, given o
 * (DESIGN.md §6): waiting for a fuller batch only pays while more work is
 * known to be coming and would find no instance free anyway.  A batch not
 * yet full waits, up to rnnd_batcher_next_due() and never past it,
 *   - when o->backlog >= 512: instances mostly finish a batch to find the
 *     next one waiting, so they are busy anyway and fuller batches pay;
 *   - while o->expected > 0 and no other instance is idle (a request's body
 *     is arriving, and would otherwise wait for this batch to finish),
 *   - until o->returning_until while o->returning > 0 and no other instance
 *     is idle: clients just answered usually send their next request within
 *     a round trip (a closed loop), and it would find the instance busy, or
 *   - until the next submit the arrival rate predicts, o->last_ns +
 *     o->gap_ns, when that is still to come, no other instance is idle and
 *     o->gap_ns <= o->run_ns (submits come faster than a batch runs, so the
 *     next one would find the instance busy);
 * otherwise it is due now: an idle instance with nothing else coming runs
 * what is there at once.  Returns UINT64_MAX when nothing waits, a time
 * <= now when a batch is due (pass flush = true to rnnd_batcher_pop()).
 */
uint64_t rnnd_batcher_due(const rnnd_batcher_t *b, uint64_t now,
                          const struct rnnd_batcher_outlook *o);

/* The earliest deadline of a waiting sequence, or UINT64_MAX. */
uint64_t rnnd_batcher_next_deadline(const rnnd_batcher_t *b);

/* The oldest waiting sequence of any level, or NULL. */
struct rnnd_bseq *rnnd_batcher_oldest(const rnnd_batcher_t *b);

/*
 * Walks the waiting sequences: the one after queued s (NULL: the first), by
 * level from the highest and by arrival within one; NULL after the last.
 * Removing s itself ends the walk; removing others keeps it valid.
 */
struct rnnd_bseq *rnnd_batcher_next(const rnnd_batcher_t *b, const struct rnnd_bseq *s);

#endif

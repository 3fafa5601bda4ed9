/*
 * seqtab.h: the live stateful sequences of one model version (issue 17,
 * docs/DESIGN.md §6): for each sequence id, its recurrent state between
 * chunks (h, then c for an LSTM), when it was last used, and whether a chunk
 * of it is running; and, for ids that are no longer live, why (ended,
 * expired, dropped by a reload), so that a late chunk is told which.
 *
 * Pure: no locks, no clock (the time is passed in), no threads; the caller
 * serializes calls.  Bounded: at most max_sequences live, and as many
 * remembered ids that are no longer live (the oldest forgotten first).
 * Ids are an unsigned 64-bit integer (not 0) or a string of 1..128 bytes,
 * as Triton's sequence extension sends them; 7 and "7" are different ids.
 */
#ifndef RNND_ENGINE_SEQTAB_H
#define RNND_ENGINE_SEQTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define RNND_SEQ_ID_MAX 128

typedef struct rnnd_seqtab rnnd_seqtab_t;

struct rnnd_seqtab_params {
        uint32_t max_sequences;   /* live at once, 1.. */
        uint64_t idle_timeout_ns; /* a live sequence unused this long expires */
        size_t state_floats;      /* h and c of one sequence, 1.. */
};

/* A sequence id: num when str is "", else str. */
struct rnnd_seq_id {
        uint64_t num;
        char str[RNND_SEQ_ID_MAX + 1];
};

/* A live sequence.  The caller reads and writes state; the rest is the table's. */
struct rnnd_stream {
        struct rnnd_seq_id id;
        float *state;             /* [state_floats]: zeros at start */
        uint64_t last_ns;         /* started, or its last chunk ended */
        bool busy;                /* a chunk is running: rnnd_seqtab_release() ends it */
        void *waiting;            /* the caller's: chunks queued behind the running one */
        unsigned n_waiting;       /* the caller's */
        struct rnnd_stream *next; /* the table's */
};

/* Why an id is not live. */
enum rnnd_seq_gone {
        RNND_SEQ_NEVER = 0, /* never started (or forgotten) */
        RNND_SEQ_ENDED,     /* a chunk with sequence_end ended it */
        RNND_SEQ_EXPIRED,   /* unused for idle_timeout */
        RNND_SEQ_DROPPED,   /* a reload rebuilt the model (docs/OPERATIONS.md, Reload) */
};

struct rnnd_seqtab_counts {
        uint64_t live, started, ended, expired;
        uint64_t max;     /* max_sequences, the most that may be live */
        uint64_t refused; /* starts refused because max were live */
};

/* A new empty table.  Errors: RNND_EINVAL (a parameter), RNND_ENOMEM. */
int rnnd_seqtab_new(const struct rnnd_seqtab_params *p, rnnd_seqtab_t **ret, rnnd_error_t *reterr);

/* Frees t and every sequence in it; accepts NULL; returns NULL. */
rnnd_seqtab_t *rnnd_seqtab_free(rnnd_seqtab_t *t);

/*
 * Starts sequence id at now: a new one, or a live one restarted (its state
 * zeroed; a restart of a busy sequence is refused, RNND_EUNAVAIL, since its
 * running chunk would write the old state back).  The sequence is returned
 * busy: the caller runs the chunk and then calls rnnd_seqtab_release().
 * Errors: RNND_EUNAVAIL when max_sequences are live (after expiring the
 * idle ones), with a message naming sequence.max_sequences; RNND_ENOMEM.
 */
int rnnd_seqtab_start(rnnd_seqtab_t *t, const struct rnnd_seq_id *id, uint64_t now,
                      struct rnnd_stream **ret, rnnd_error_t *reterr);

/*
 * The live sequence id, for its next chunk, marked busy; NULL when it is
 * not live, with *why saying why (an id that expired at now counts as
 * expired) and reterr set (RNND_EINVAL, naming the id and why).  *running
 * says whether a chunk of it was running already: the caller then queues
 * this one behind it (chunks of one sequence run one at a time, in order)
 * and starts it when rnnd_seqtab_release() would have been called.
 */
struct rnnd_stream *rnnd_seqtab_find(rnnd_seqtab_t *t, const struct rnnd_seq_id *id, uint64_t now,
                                     bool *running, enum rnnd_seq_gone *why, rnnd_error_t *reterr);

/*
 * A chunk of s ended at now: s is no longer busy; with end set, s is
 * removed (remembered as ended) and must not be used again.
 */
void rnnd_seqtab_release(rnnd_seqtab_t *t, struct rnnd_stream *s, bool end, uint64_t now);

/* The live sequence id, or NULL; nothing changes.  (For a start: is one running?) */
struct rnnd_stream *rnnd_seqtab_peek(rnnd_seqtab_t *t, const struct rnnd_seq_id *id);

/*
 * A start queued behind a running chunk of the same id gets its turn: s
 * (busy, held by the caller) starts again with its state zeroed; ended says
 * that the chunk before it ended the sequence (counted as ended).
 */
void rnnd_seqtab_restart(rnnd_seqtab_t *t, struct rnnd_stream *s, bool ended, uint64_t now);

/* Removes the live sequences idle (not busy) since before now - idle_timeout.  Returns how many. */
size_t rnnd_seqtab_expire(rnnd_seqtab_t *t, uint64_t now);

/*
 * Forgets every live sequence that is not busy, remembering it as dropped
 * (a reload replaced the model's weights).  Returns how many.
 */
size_t rnnd_seqtab_drop_all(rnnd_seqtab_t *t);

/*
 * A reload replaced the model of from with that of to: to remembers every
 * sequence live in from as dropped, so that its next chunk says so, and
 * what from remembered of the sequences gone before (ended, expired, dropped
 * by an earlier reload).  Returns how many were live.
 */
size_t rnnd_seqtab_note_dropped(const rnnd_seqtab_t *from, rnnd_seqtab_t *to);

/* Live sequences and what happened so far. */
void rnnd_seqtab_counts(const rnnd_seqtab_t *t, struct rnnd_seqtab_counts *ret);

/* "sequence_id 7" or "sequence_id \"abc\"" into buf[cap]. */
const char *rnnd_seq_id_format(const struct rnnd_seq_id *id, char *buf, size_t cap);

#endif

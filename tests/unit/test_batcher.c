/*
 * test_batcher.c: the sequence batcher (engine/batcher.h), table by table.
 *
 * Each case is a script over one batcher: push sequences (length, level,
 * arrival, deadline), pop a batch at a time (with or without flush), expire,
 * remove, and ask for the next due time; every pop and expiry names the
 * sequences it must return, in order.  The due time given what is coming
 * (rnnd_batcher_due) has its own table.  Then a steady-stream fairness run, and
 * a randomized run checked against the invariants every batch must keep.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batcher.h"
#include "check-main.h"
#include "error.h"

enum op_kind { PUSH, POP, FLUSH, EXPIRE, REMOVE, DUE, DEADLINE, COUNT, END };

struct op {
        enum op_kind kind;
        uint64_t a;       /* PUSH: len; POP/FLUSH/EXPIRE: now; REMOVE: id; DUE etc.: want */
        uint32_t level;   /* PUSH */
        uint64_t arrival; /* PUSH */
        uint64_t deadline;
        const char *want; /* POP/FLUSH/EXPIRE: ids in order, space separated ("" = none) */
};

#define P(len, level, t, dl)                                                                       \
        {                                                                                          \
                PUSH, len, level, t, dl, NULL                                                      \
        }
#define POP_AT(now, ids)                                                                           \
        {                                                                                          \
                POP, now, 0, 0, 0, ids                                                             \
        }
#define FLUSH_AT(now, ids)                                                                         \
        {                                                                                          \
                FLUSH, now, 0, 0, 0, ids                                                           \
        }
#define EXPIRE_AT(now, ids)                                                                        \
        {                                                                                          \
                EXPIRE, now, 0, 0, 0, ids                                                          \
        }

struct bcase {
        const char *name;
        struct rnnd_batcher_params params;
        struct op ops[24];
};

#define NOW_MAX UINT64_MAX

static const struct bcase cases[] = {
        {"fills to max_batch_size at once, the rest waits for the delay",
         {4, 4096, 100, 64, 1, 64},
         {P(10, 0, 0, 0),
          P(10, 0, 1, 0),
          P(10, 0, 2, 0),
          P(10, 0, 3, 0),
          P(10, 0, 4, 0),
          {DUE, 0, 0, 0, 0, NULL},
          POP_AT(5, "0 1 2 3"),
          POP_AT(6, ""),
          {DUE, 104, 0, 0, 0, NULL},
          POP_AT(103, ""),
          POP_AT(104, "4"),
          {COUNT, 0, 0, 0, 0, NULL},
          {DUE, NOW_MAX, 0, 0, 0, NULL},
          {END, 0, 0, 0, 0, NULL}}},
        {"the delay flush: a part batch goes when the oldest has waited",
         {8, 4096, 100, 64, 1, 64},
         {P(3, 0, 0, 0),
          P(5, 0, 50, 0),
          POP_AT(99, ""),
          POP_AT(100, "0 1"),
          {END, 0, 0, 0, 0, NULL}}},
        {"zero delay: any waiting sequence is due",
         {8, 4096, 0, 64, 1, 64},
         {P(3, 0, 7, 0), {DUE, 7, 0, 0, 0, NULL}, POP_AT(7, "0"), {END, 0, 0, 0, 0, NULL}}},
        {"flush forms a batch before it is due",
         {8, 4096, 1000000, 64, 1, 64},
         {P(3, 0, 0, 0),
          P(4, 0, 1, 0),
          POP_AT(2, ""),
          FLUSH_AT(2, "0 1"),
          {END, 0, 0, 0, 0, NULL}}},
        {"max_batch_steps bounds B x longest",
         {8, 100, 0, 50, 1, 64},
         {P(50, 0, 0, 0),
          P(50, 0, 1, 0),
          P(50, 0, 2, 0),
          P(10, 0, 3, 0),
          POP_AT(9, "0 1"),
          POP_AT(9, "2 3"),
          {END, 0, 0, 0, 0, NULL}}},
        {"max_batch_steps: a longer one does not fit, shorter ones still do",
         {8, 130, 0, 100, 1, 64},
         {P(40, 0, 0, 0),
          P(100, 0, 1, 0),
          P(30, 0, 2, 0),
          P(41, 0, 3, 0),
          POP_AT(9, "0 3 2"),
          POP_AT(9, "1"),
          {END, 0, 0, 0, 0, NULL}}},
        {"max_batch_steps: when the nearest shorter one does not fit, nothing shorter does",
         {8, 120, 0, 100, 1, 64},
         {P(40, 0, 0, 0),
          P(100, 0, 1, 0),
          P(30, 0, 2, 0),
          P(41, 0, 3, 0),
          POP_AT(9, "0 3"),
          POP_AT(9, "1"),
          POP_AT(9, "2"),
          {END, 0, 0, 0, 0, NULL}}},
        {"length grouping: closest lengths first, the shorter at a tie",
         {3, 4096, 0, 64, 1, 64},
         {P(20, 0, 0, 0),
          P(5, 0, 1, 0),
          P(21, 0, 2, 0),
          P(19, 0, 3, 0),
          P(40, 0, 4, 0),
          P(6, 0, 5, 0),
          P(22, 0, 6, 0),
          POP_AT(9, "0 3 2"),
          POP_AT(9, "1 5 6"),
          POP_AT(9, "4"),
          {END, 0, 0, 0, 0, NULL}}},
        {"within one length, the oldest first",
         {2, 4096, 0, 64, 1, 64},
         {P(8, 0, 0, 0),
          P(9, 0, 1, 0),
          P(9, 0, 2, 0),
          P(9, 0, 3, 0),
          POP_AT(9, "0 1"),
          POP_AT(9, "2 3"),
          {END, 0, 0, 0, 0, NULL}}},
        {"lengths far apart in the bitmap",
         {8, 1 << 20, 0, 4096, 1, 64},
         {P(1, 0, 0, 0),
          P(4096, 0, 1, 0),
          P(64, 0, 2, 0),
          P(63, 0, 3, 0),
          P(65, 0, 4, 0),
          POP_AT(9, "0 3 2 4 1"),
          {END, 0, 0, 0, 0, NULL}}},
        {"priority: the highest level starts the batch and fills it first",
         {2, 4096, 0, 64, 2, 64},
         {P(5, 1, 0, 0),
          P(5, 0, 1, 0),
          P(5, 1, 2, 0),
          POP_AT(9, "1 0"),
          POP_AT(9, "2"),
          {END, 0, 0, 0, 0, NULL}}},
        {"priority: the anchor's level fills before a closer length of another level",
         {2, 4096, 0, 64, 2, 64},
         {P(10, 0, 0, 0),
          P(30, 0, 1, 0),
          P(11, 1, 2, 0),
          POP_AT(9, "0 1"),
          POP_AT(9, "2"),
          {END, 0, 0, 0, 0, NULL}}},
        {"the delay counts from the oldest of any level",
         {8, 4096, 100, 64, 2, 64},
         {P(5, 1, 0, 0),
          P(5, 0, 90, 0),
          {DUE, 100, 0, 0, 0, NULL},
          POP_AT(100, "1 0"),
          {END, 0, 0, 0, 0, NULL}}},
        {"expiry: earliest deadline first, others stay",
         {8, 4096, 1000, 64, 1, 64},
         {P(4, 0, 0, 50),
          P(4, 0, 1, 0),
          P(4, 0, 2, 30),
          {DEADLINE, 30, 0, 0, 0, NULL},
          EXPIRE_AT(29, ""),
          EXPIRE_AT(60, "2 0"),
          {DEADLINE, NOW_MAX, 0, 0, 0, NULL},
          {COUNT, 1, 0, 0, 0, NULL},
          FLUSH_AT(61, "1"),
          {END, 0, 0, 0, 0, NULL}}},
        {"expiry after a pop: popped sequences have no deadline left",
         {1, 4096, 0, 64, 1, 64},
         {P(4, 0, 0, 50),
          P(4, 0, 1, 40),
          POP_AT(2, "0"),
          {DEADLINE, 40, 0, 0, 0, NULL},
          EXPIRE_AT(100, "1"),
          {END, 0, 0, 0, 0, NULL}}},
        {"remove takes a sequence out of every structure",
         {8, 4096, 0, 64, 1, 64},
         {P(4, 0, 0, 10),
          P(4, 0, 1, 5),
          P(6, 0, 2, 0),
          {REMOVE, 1, 0, 0, 0, NULL},
          {DEADLINE, 10, 0, 0, 0, NULL},
          {COUNT, 2, 0, 0, 0, NULL},
          {REMOVE, 1, 0, 0, 0, NULL},
          {COUNT, 2, 0, 0, 0, NULL},
          FLUSH_AT(3, "0 2"),
          {COUNT, 0, 0, 0, 0, NULL},
          EXPIRE_AT(100, ""),
          {END, 0, 0, 0, 0, NULL}}},
        {"a sequence pushed back regains its place by arrival",
         {1, 4096, 0, 64, 1, 64},
         {P(4, 0, 10, 0),
          P(4, 0, 20, 0),
          POP_AT(30, "0"),
          {PUSH, 0, 0, 0, 0, NULL},
          POP_AT(30, "0"),
          POP_AT(30, "1"),
          {END, 0, 0, 0, 0, NULL}}},
};

/* Parses "3 0 2" into ids; returns the count. */
static int parse_ids(const char *s, int *ids, int cap)
{
        int n = 0;
        char *end;

        while (*s != '\0' && n < cap) {
                ids[n++] = (int)strtol(s, &end, 10);
                s = end;
                while (*s == ' ')
                        s++;
        }
        return n;
}

static void check_out(const struct bcase *c, int step, struct rnnd_bseq *base,
                      struct rnnd_bseq **out, uint32_t n, const char *want)
{
        int ids[64];
        int k = parse_ids(want, ids, 64);
        char got[256] = "";

        for (uint32_t i = 0; i < n; i++)
                snprintf(got + strlen(got), sizeof(got) - strlen(got), "%s%d", i ? " " : "",
                         (int)(out[i] - base));
        ck_assert_msg((int)n == k, "%s, step %d: got \"%s\", want \"%s\"", c->name, step, got,
                      want);
        for (int i = 0; i < k; i++)
                ck_assert_msg(out[i] == &base[ids[i]], "%s, step %d: got \"%s\", want \"%s\"",
                              c->name, step, got, want);
}

START_TEST(test_cases)
{
        const struct bcase *c = &cases[_i];
        struct rnnd_bseq seqs[32];
        struct rnnd_bseq *out[64];
        rnnd_batcher_t *b;
        int pushed = 0;

        memset(seqs, 0, sizeof(seqs));
        ck_assert_int_eq(rnnd_batcher_new(&c->params, &b), 0);
        for (int s = 0; c->ops[s].kind != END; s++) {
                const struct op *o = &c->ops[s];
                uint32_t n;

                switch (o->kind) {
                case PUSH:
                        if (o->a == 0) { /* push back a popped one: keeps its fields */
                                rnnd_batcher_push(b, &seqs[o->level]);
                                break;
                        }
                        seqs[pushed] = (struct rnnd_bseq){.len = (uint32_t)o->a,
                                                          .level = o->level,
                                                          .arrival_ns = o->arrival,
                                                          .deadline_ns = o->deadline};
                        rnnd_batcher_push(b, &seqs[pushed++]);
                        break;
                case POP:
                case FLUSH:
                        n = rnnd_batcher_pop(b, o->a, o->kind == FLUSH, out);
                        check_out(c, s, seqs, out, n, o->want);
                        break;
                case EXPIRE:
                        n = rnnd_batcher_pop_expired(b, o->a, out, 64);
                        check_out(c, s, seqs, out, n, o->want);
                        break;
                case REMOVE:
                        rnnd_batcher_remove(b, &seqs[o->a]);
                        break;
                case DUE:
                        ck_assert_msg(rnnd_batcher_next_due(b) == o->a, "%s, step %d: due %llu",
                                      c->name, s, (unsigned long long)rnnd_batcher_next_due(b));
                        break;
                case DEADLINE:
                        ck_assert_msg(rnnd_batcher_next_deadline(b) == o->a,
                                      "%s, step %d: deadline %llu", c->name, s,
                                      (unsigned long long)rnnd_batcher_next_deadline(b));
                        break;
                case COUNT:
                        ck_assert_msg(rnnd_batcher_count(b) == o->a, "%s, step %d: count %u",
                                      c->name, s, rnnd_batcher_count(b));
                        break;
                case END:
                        break;
                }
        }
        rnnd_batcher_free(b);
}
END_TEST

/*
 * rnnd_batcher_due(): n sequences queued at time 100 (max_batch_size 4,
 * delay 1000, so the fixed rule says 1100), asked at now with an outlook.
 */
static const struct {
        const char *name;
        uint32_t n;
        uint64_t delay;
        uint64_t now;
        struct rnnd_batcher_outlook o; /* idle_others, expected, last, gap, run, backlog,
                                          returning, returning_until */
        uint64_t want;
} due_cases[] = {
        {"nothing waits", 0, 1000, 150, {0, 1, 0, 0, 0, 0, 0, 0}, UINT64_MAX},
        {"alone, nothing coming: at once", 1, 1000, 150, {0, 0, 0, 0, 0, 0, 0, 0}, 150},
        {"a full batch: due since it filled", 4, 1000, 150, {0, 3, 0, 0, 0, 0, 0, 0}, 0},
        {"a body arriving, no instance free: waits up to the delay",
         2,
         1000,
         150,
         {0, 1, 0, 0, 0, 0, 0, 0},
         1100},
        {"a body arriving, another instance idle: at once",
         1,
         1000,
         150,
         {1, 1, 0, 0, 0, 0, 0, 0},
         150},
        {"the delay is the bound: due however much is coming",
         1,
         1000,
         1200,
         {0, 5, 0, 0, 0, 0, 0, 0},
         1100},
        {"zero delay: at once, a body arriving or not", 1, 0, 100, {0, 1, 0, 0, 0, 0, 0, 0}, 100},
        {"submits come faster than a batch runs: waits for the next one",
         1,
         1000,
         120,
         {0, 0, 100, 50, 80, 0, 0, 0},
         150},
        {"the predicted submit is overdue: at once",
         1,
         1000,
         160,
         {0, 0, 100, 50, 80, 0, 0, 0},
         160},
        {"submits slower than a batch runs (one client, closed loop): at once",
         1,
         1000,
         120,
         {0, 0, 100, 200, 20, 0, 0, 0},
         120},
        {"a predicted submit past the delay: the delay bounds the wait",
         1,
         1000,
         120,
         {0, 0, 100, 2000, 5000, 0, 0, 0},
         1100},
        {"no rate measured yet: at once", 1, 1000, 120, {0, 0, 100, 0, 80, 0, 0, 0}, 120},
        {"a fast rate, but another instance idle: at once",
         1,
         1000,
         120,
         {2, 0, 100, 50, 80, 0, 0, 0},
         120},
        {"batches mostly find the next waiting: waits up to the delay",
         1,
         1000,
         120,
         {0, 0, 100, 200, 20, 600, 0, 0},
         1100},
        {"batches seldom find the next waiting: at once",
         1,
         1000,
         120,
         {0, 0, 100, 200, 20, 300, 0, 0},
         120},
        {"a backlog, but another instance idle: at once",
         1,
         1000,
         120,
         {1, 0, 0, 0, 0, 1024, 0, 0},
         120},
        {"clients answered lately, no instance free: waits until they stop being expected",
         1,
         1000,
         150,
         {0, 0, 0, 0, 0, 0, 2, 600},
         600},
        {"clients answered lately: the delay still bounds the wait",
         1,
         1000,
         150,
         {0, 0, 0, 0, 0, 0, 2, 1500},
         1100},
        {"clients answered lately, another instance idle: at once",
         1,
         1000,
         150,
         {1, 0, 0, 0, 0, 0, 2, 600},
         150},
        {"answers no longer expected back: at once", 1, 1000, 700, {0, 0, 0, 0, 0, 0, 2, 600}, 700},
};

START_TEST(test_due)
{
        struct rnnd_batcher_params bp = {4, 4096, due_cases[_i].delay, 64, 1, 64};
        struct rnnd_bseq seqs[4];
        rnnd_batcher_t *b;
        uint64_t got;

        memset(seqs, 0, sizeof(seqs));
        ck_assert_int_eq(rnnd_batcher_new(&bp, &b), 0);
        for (uint32_t i = 0; i < due_cases[_i].n; i++) {
                seqs[i].len = 5;
                seqs[i].arrival_ns = 100;
                rnnd_batcher_push(b, &seqs[i]);
        }
        got = rnnd_batcher_due(b, due_cases[_i].now, &due_cases[_i].o);
        ck_assert_msg(got == due_cases[_i].want, "%s: due %llu, want %llu", due_cases[_i].name,
                      (unsigned long long)got, (unsigned long long)due_cases[_i].want);
        rnnd_batcher_free(b);
}
END_TEST

START_TEST(test_bad_params)
{
        static const struct rnnd_batcher_params bad[] = {
                {0, 4096, 0, 64, 1, 64}, /* no batch */
                {8, 63, 0, 64, 1, 64},   /* steps below one full-length sequence */
                {8, 4096, 0, 0, 1, 64},  /* no length */
                {8, 4096, 0, 64, 0, 64}, /* no level */
                {8, 4096, 0, 64, RNND_BATCHER_MAX_LEVELS + 1, 64},
                {8, 4096, 0, 64, 1, 0}, /* no room */
        };
        rnnd_batcher_t *b = NULL;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_int_eq(rnnd_batcher_new(&bad[i], &b), RNND_EINVAL);
        ck_assert_ptr_null(b);
        rnnd_batcher_free(NULL);
}
END_TEST

/*
 * Fairness: a steady stream of short sequences that keeps every batch full
 * (a backlog of 8, then as many arrivals per round as one batch takes), with
 * a long one in every tenth round.  Every sequence, the long ones included,
 * leaves within 4 rounds of arriving (the backlog alone is 2 rounds).  A
 * batcher that started from the shortest would always find short ones closer
 * in length and leave each long one waiting until the backlog ran dry: with
 * that change, 80 rounds.
 */
START_TEST(test_fairness)
{
        enum { ROUNDS = 1000, BACKLOG = 8, N = BACKLOG + 4 * ROUNDS };
        static struct rnnd_bseq seqs[N];
        static const struct rnnd_batcher_params bp = {4, 400, 0, 100, 1, N};
        struct rnnd_bseq *out[4];
        uint64_t worst_long = 0, worst = 0;
        rnnd_batcher_t *b;
        int n = 0, longs = 0, served = 0;

        ck_assert_int_eq(rnnd_batcher_new(&bp, &b), 0);
        for (int k = 0; k < BACKLOG; k++) {
                seqs[n] = (struct rnnd_bseq){.len = 2 + (uint32_t)(k % 3), .arrival_ns = 0};
                rnnd_batcher_push(b, &seqs[n++]);
        }
        for (uint64_t t = 0; t < ROUNDS; t++) {
                for (int k = 0; k < 4; k++) {
                        bool is_long = t % 10 == 0 && k == 0;

                        seqs[n] = (struct rnnd_bseq){.len = is_long ? 90 : 2 + (uint32_t)(k % 3),
                                                     .arrival_ns = t};
                        longs += is_long;
                        rnnd_batcher_push(b, &seqs[n++]);
                }
                for (uint32_t i = 0, got = rnnd_batcher_pop(b, t, false, out); i < got; i++) {
                        uint64_t wait = t - out[i]->arrival_ns;

                        served++;
                        if (wait > worst)
                                worst = wait;
                        if (out[i]->len == 90 && wait > worst_long)
                                worst_long = wait;
                }
        }
        ck_assert_int_eq(longs, ROUNDS / 10);
        ck_assert_int_eq(served, 4 * ROUNDS); /* every batch was full */
        ck_assert_msg(worst_long <= 4, "a long sequence waited %llu rounds",
                      (unsigned long long)worst_long);
        ck_assert_msg(worst <= 4, "a sequence waited %llu rounds", (unsigned long long)worst);
        rnnd_batcher_free(b);
}
END_TEST

/*
 * rnnd_batcher_next() visits exactly the queued sequences among seqs[0..n),
 * each once, by level and then arrival.
 */
static void walk_matches(const rnnd_batcher_t *b, const struct rnnd_bseq *seqs, int n)
{
        const struct rnnd_bseq *s, *prev = NULL;
        uint32_t visited = 0;
        int queued = 0;

        for (s = rnnd_batcher_next(b, NULL); s != NULL; prev = s, s = rnnd_batcher_next(b, s)) {
                ck_assert(s >= seqs && s < seqs + n && s->queued);
                if (prev != NULL)
                        ck_assert(prev->level < s->level ||
                                  (prev->level == s->level && prev->arrival_ns <= s->arrival_ns));
                visited++;
        }
        for (int i = 0; i < n; i++)
                queued += seqs[i].queued;
        ck_assert_uint_eq(visited, rnnd_batcher_count(b));
        ck_assert_int_eq(queued, (int)visited);
}

/*
 * Random pushes, removals, expiries and pops against the invariants: every
 * batch is within max_batch_size and max_batch_steps, starts with the
 * oldest of the highest waiting level, holds only queued sequences, and in
 * the end every sequence left exactly once.  Walks of the queue between
 * them see every waiting sequence once.
 */
START_TEST(test_random_invariants)
{
        enum { N = 3000 };
        static struct rnnd_bseq seqs[N];
        static int left[N];
        static const struct rnnd_batcher_params bp = {16, 2000, 50, 300, 3, N};
        struct rnnd_bseq *out[N];
        rnnd_batcher_t *b;
        unsigned rnd = 12345;
        int pushed = 0, gone = 0;
        uint64_t t = 0;

        memset(left, 0, sizeof(left));
        ck_assert_int_eq(rnnd_batcher_new(&bp, &b), 0);
        while (gone < N) {
                unsigned r;

                rnd = rnd * 1103515245u + 12345u;
                r = (rnd >> 8) % 100;
                t += (rnd >> 4) % 7;
                if (r < 55 && pushed < N) {
                        seqs[pushed] = (struct rnnd_bseq){
                                .len = 1 + (rnd >> 12) % 300,
                                .level = (rnd >> 20) % 3,
                                .arrival_ns = t,
                                .deadline_ns = (rnd >> 24) % 4 == 0 ? t + 200 : 0};
                        rnnd_batcher_push(b, &seqs[pushed++]);
                } else if (r < 60 && pushed > 0) {
                        int i = (int)((rnd >> 10) % (unsigned)pushed);

                        if (seqs[i].queued) {
                                rnnd_batcher_remove(b, &seqs[i]);
                                left[i]++;
                                gone++;
                        }
                } else if (r < 62) {
                        walk_matches(b, seqs, pushed);
                } else if (r < 70) {
                        uint32_t n = rnnd_batcher_pop_expired(b, t, out, N);

                        for (uint32_t i = 0; i < n; i++) {
                                ck_assert_uint_le(out[i]->deadline_ns, t);
                                left[out[i] - seqs]++;
                        }
                        gone += (int)n;
                } else {
                        struct rnnd_bseq *oldest = NULL;
                        uint32_t n, longest = 0;

                        for (int i = 0; i < pushed; i++)
                                if (seqs[i].queued &&
                                    (oldest == NULL || seqs[i].level < oldest->level ||
                                     (seqs[i].level == oldest->level &&
                                      seqs[i].arrival_ns < oldest->arrival_ns)))
                                        oldest = &seqs[i];
                        n = rnnd_batcher_pop(b, t, pushed == N, out);
                        if (n == 0)
                                continue;
                        ck_assert_uint_le(n, bp.max_batch_size);
                        ck_assert_uint_eq(out[0]->level, oldest->level);
                        ck_assert_uint_eq(out[0]->arrival_ns, oldest->arrival_ns);
                        for (uint32_t i = 0; i < n; i++) {
                                ck_assert(!out[i]->queued);
                                if (out[i]->len > longest)
                                        longest = out[i]->len;
                                left[out[i] - seqs]++;
                        }
                        ck_assert_uint_le((uint64_t)n * longest, bp.max_batch_steps);
                        gone += (int)n;
                }
        }
        ck_assert_uint_eq(rnnd_batcher_count(b), 0);
        for (int i = 0; i < N; i++)
                ck_assert_msg(left[i] == 1, "sequence %d left %d times", i, left[i]);
        rnnd_batcher_free(b);
}
END_TEST

static Suite *batcher_suite(void)
{
        Suite *s = suite_create("batcher");
        TCase *tc = tcase_create("batcher");

        tcase_add_loop_test(tc, test_cases, 0, (int)(sizeof(cases) / sizeof(cases[0])));
        tcase_add_loop_test(tc, test_due, 0, (int)(sizeof(due_cases) / sizeof(due_cases[0])));
        tcase_add_test(tc, test_bad_params);
        tcase_add_test(tc, test_fairness);
        tcase_add_test(tc, test_random_invariants);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(batcher_suite)

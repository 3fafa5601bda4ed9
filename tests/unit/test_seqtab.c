/*
 * test_seqtab.c: the live stateful sequences (engine/seqtab.h), table by
 * table: each case is a script over one table with max_sequences 3 and an
 * idle timeout of 100: start, find (a next chunk), release (with or without
 * end), expire, drop, each with the status or the "why" it must give at the
 * time it runs.  Then states kept apart per id, integer and string ids kept
 * apart, and a large table that grows its buckets.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check-main.h"
#include "error.h"
#include "seqtab.h"

enum kind { START, FIND, RELEASE, END_, EXPIRE, DROP, LIVE, DONE };

struct op {
        enum kind k;
        const char *id; /* "7" is the integer 7, "s:abc" the string "abc" */
        uint64_t now;
        int want;        /* START: status; FIND: 1 found idle, 2 found running, -1 not live;
                            EXPIRE/DROP: how many; LIVE: live count */
        int why;         /* FIND not live: enum rnnd_seq_gone */
        const char *msg; /* a part of the error message, or NULL */
};

static struct rnnd_seq_id make_id(const char *s)
{
        struct rnnd_seq_id id = {0};

        if (strncmp(s, "s:", 2) == 0)
                snprintf(id.str, sizeof(id.str), "%s", s + 2);
        else
                id.num = strtoull(s, NULL, 10);
        return id;
}

#define S(id, now, want, msg)                                                                      \
        {                                                                                          \
                START, id, now, want, 0, msg                                                       \
        }
#define F(id, now, want, why, msg)                                                                 \
        {                                                                                          \
                FIND, id, now, want, why, msg                                                      \
        }
#define R(id, now)                                                                                 \
        {                                                                                          \
                RELEASE, id, now, 0, 0, NULL                                                       \
        }
#define E(id, now)                                                                                 \
        {                                                                                          \
                END_, id, now, 0, 0, NULL                                                          \
        }
#define X(now, n)                                                                                  \
        {                                                                                          \
                EXPIRE, NULL, now, n, 0, NULL                                                      \
        }
#define D(n)                                                                                       \
        {                                                                                          \
                DROP, NULL, 0, n, 0, NULL                                                          \
        }
#define L(n)                                                                                       \
        {                                                                                          \
                LIVE, NULL, 0, n, 0, NULL                                                          \
        }
#define Z                                                                                          \
        {                                                                                          \
                DONE, NULL, 0, 0, 0, NULL                                                          \
        }

static const struct op cases[][12] = {
        /* A sequence's life: start, two chunks, end; then it has ended. */
        {S("7", 0, 0, NULL), R("7", 10), F("7", 20, 1, 0, NULL), R("7", 30), F("7", 40, 1, 0, NULL),
         E("7", 50), F("7", 60, -1, RNND_SEQ_ENDED, "has ended"), L(0), Z},
        /* Never started. */
        {F("9", 0, -1, RNND_SEQ_NEVER, "never started"), Z},
        /* A chunk while one runs is queued (found running), not refused. */
        {S("1", 0, 0, NULL), F("1", 5, 2, 0, NULL), R("1", 10), Z},
        /* Idle past the timeout: expired, and a find says so. */
        {S("1", 0, 0, NULL), R("1", 0), F("1", 101, -1, RNND_SEQ_EXPIRED, "expired"), Z},
        /* A busy sequence never expires; an idle one does, at timeout + 1. */
        {S("1", 0, 0, NULL), S("2", 0, 0, NULL), R("2", 0), X(100, 0), X(101, 1), L(1), Z},
        /* max_sequences 3: a fourth start is 503 naming the setting, unless one expired. */
        {S("1", 0, 0, NULL), S("2", 0, 0, NULL), S("3", 0, 0, NULL),
         S("4", 0, RNND_EUNAVAIL, "sequence.max_sequences"), R("2", 0), S("4", 200, 0, NULL), L(3),
         F("2", 201, -1, RNND_SEQ_EXPIRED, NULL), Z},
        /* A restart of a live id zeroes it and counts; of a running one is refused. */
        {S("1", 0, 0, NULL), S("1", 1, RNND_EUNAVAIL, "still running"), R("1", 2),
         S("1", 3, 0, NULL), L(1), Z},
        /* A reload with new weights drops the idle sequences, and says so. */
        {S("1", 0, 0, NULL), R("1", 0), S("s:a", 0, 0, NULL), D(1),
         F("1", 1, -1, RNND_SEQ_DROPPED, "reloaded"), L(1), Z},
        /* 7 and "7" are different ids. */
        {S("7", 0, 0, NULL), F("s:7", 1, -1, RNND_SEQ_NEVER, "\"7\""), Z},
};

START_TEST(test_cases)
{
        struct rnnd_seqtab_params p = {
                .max_sequences = 3, .idle_timeout_ns = 100, .state_floats = 4};
        struct rnnd_seqtab_counts c;
        rnnd_seqtab_t *t;
        rnnd_error_t e = {0};

        ck_assert_int_eq(rnnd_seqtab_new(&p, &t, &e), 0);
        for (const struct op *op = cases[_i]; op->k != DONE; op++) {
                struct rnnd_seq_id id = op->id != NULL ? make_id(op->id) : (struct rnnd_seq_id){0};
                struct rnnd_stream *s = NULL;
                enum rnnd_seq_gone why;
                bool running;
                int r;

                memset(&e, 0, sizeof(e));
                switch (op->k) {
                case START:
                        r = rnnd_seqtab_start(t, &id, op->now, &s, &e);
                        ck_assert_msg(r == op->want, "case %d, start %s: %d (%s)", _i, op->id, r,
                                      e.msg);
                        if (r == 0)
                                for (int k = 0; k < 4; k++)
                                        ck_assert_float_eq(s->state[k], 0);
                        if (r == 0) /* dirty the state: a restart must zero it */
                                s->state[0] = 1;
                        break;
                case FIND:
                        s = rnnd_seqtab_find(t, &id, op->now, &running, &why, &e);
                        if (op->want < 0) {
                                ck_assert_msg(s == NULL, "case %d, find %s: live", _i, op->id);
                                ck_assert_int_eq(why, op->why);
                                ck_assert_int_eq(e.code, RNND_EINVAL);
                        } else {
                                ck_assert_msg(s != NULL, "case %d, find %s: %s", _i, op->id, e.msg);
                                ck_assert_int_eq(running, op->want == 2);
                        }
                        break;
                case RELEASE:
                case END_:
                        s = rnnd_seqtab_find(t, &id, op->now, &running, &why, &e);
                        ck_assert_msg(s != NULL && running, "case %d: release %s not running", _i,
                                      op->id);
                        rnnd_seqtab_release(t, s, op->k == END_, op->now);
                        break;
                case EXPIRE:
                        ck_assert_uint_eq(rnnd_seqtab_expire(t, op->now), (size_t)op->want);
                        break;
                case DROP:
                        ck_assert_uint_eq(rnnd_seqtab_drop_all(t), (size_t)op->want);
                        break;
                case LIVE:
                        rnnd_seqtab_counts(t, &c);
                        ck_assert_uint_eq(c.live, (uint64_t)op->want);
                        ck_assert_uint_eq(c.max, 3);
                        /* Only case 5 hits max_sequences, once. */
                        ck_assert_uint_eq(c.refused, _i == 5 ? 1 : 0);
                        break;
                case DONE:
                        break;
                }
                if (op->msg != NULL)
                        ck_assert_msg(strstr(e.msg, op->msg) != NULL, "case %d: '%s' lacks '%s'",
                                      _i, e.msg, op->msg);
        }
        rnnd_seqtab_free(t);
}
END_TEST

/* Many sequences: each keeps its own state, the buckets grow, the counts add up. */
START_TEST(test_many)
{
        struct rnnd_seqtab_params p = {
                .max_sequences = 5000, .idle_timeout_ns = 1000, .state_floats = 3};
        struct rnnd_seqtab_counts c;
        rnnd_seqtab_t *t;
        rnnd_error_t e = {0};

        ck_assert_int_eq(rnnd_seqtab_new(&p, &t, &e), 0);
        for (uint64_t i = 1; i <= 5000; i++) {
                struct rnnd_seq_id id = {.num = i};
                struct rnnd_stream *s;

                if (i % 2 == 0)
                        snprintf(id.str, sizeof(id.str), "stream-%llu", (unsigned long long)i);
                ck_assert_int_eq(rnnd_seqtab_start(t, &id, 0, &s, &e), 0);
                s->state[0] = (float)i;
                rnnd_seqtab_release(t, s, false, 0);
        }
        for (uint64_t i = 1; i <= 5000; i++) {
                struct rnnd_seq_id id = {.num = i};
                enum rnnd_seq_gone why;
                struct rnnd_stream *s;
                bool running;

                if (i % 2 == 0)
                        snprintf(id.str, sizeof(id.str), "stream-%llu", (unsigned long long)i);
                s = rnnd_seqtab_find(t, &id, 10, &running, &why, &e);
                ck_assert_ptr_nonnull(s);
                ck_assert_float_eq(s->state[0], (float)i);
                rnnd_seqtab_release(t, s, i % 3 == 0, 10);
        }
        rnnd_seqtab_counts(t, &c);
        ck_assert_uint_eq(c.started, 5000);
        ck_assert_uint_eq(c.ended, 1666);
        ck_assert_uint_eq(c.live, 5000 - 1666);
        ck_assert_uint_eq(rnnd_seqtab_expire(t, 2000), 5000 - 1666);
        rnnd_seqtab_counts(t, &c);
        ck_assert_uint_eq(c.expired, 5000 - 1666);
        ck_assert_uint_eq(c.live, 0);
        rnnd_seqtab_free(t);
}
END_TEST

/* A reload's new table remembers the old one's live ids as dropped. */
START_TEST(test_note_dropped)
{
        struct rnnd_seqtab_params p = {
                .max_sequences = 8, .idle_timeout_ns = 100, .state_floats = 2};
        struct rnnd_seq_id a = {.num = 5}, b = {.str = "five"};
        rnnd_seqtab_t *from, *to;
        struct rnnd_stream *s;
        enum rnnd_seq_gone why;
        rnnd_error_t e = {0};
        bool running;

        ck_assert_int_eq(rnnd_seqtab_new(&p, &from, &e), 0);
        ck_assert_int_eq(rnnd_seqtab_new(&p, &to, &e), 0);
        ck_assert_int_eq(rnnd_seqtab_start(from, &a, 0, &s, &e), 0);
        ck_assert_int_eq(rnnd_seqtab_start(from, &b, 0, &s, &e), 0);
        ck_assert_uint_eq(rnnd_seqtab_note_dropped(from, to), 2);
        ck_assert_ptr_null(rnnd_seqtab_find(to, &b, 1, &running, &why, &e));
        ck_assert_int_eq(why, RNND_SEQ_DROPPED);
        ck_assert_ptr_nonnull(strstr(e.msg, "reloaded"));
        rnnd_seqtab_free(from);
        rnnd_seqtab_free(to);
}
END_TEST

/* A second reload still knows the ids the first dropped, and the ones that ended. */
START_TEST(test_note_dropped_twice)
{
        struct rnnd_seqtab_params p = {
                .max_sequences = 8, .idle_timeout_ns = 100, .state_floats = 2};
        struct rnnd_seq_id a = {.num = 5}, b = {.num = 6}, c = {.str = "seven"};
        rnnd_seqtab_t *t1, *t2, *t3;
        struct rnnd_stream *s;
        enum rnnd_seq_gone why;
        rnnd_error_t e = {0};
        bool running;

        ck_assert_int_eq(rnnd_seqtab_new(&p, &t1, &e), 0);
        ck_assert_int_eq(rnnd_seqtab_new(&p, &t2, &e), 0);
        ck_assert_int_eq(rnnd_seqtab_new(&p, &t3, &e), 0);
        ck_assert_int_eq(rnnd_seqtab_start(t1, &a, 0, &s, &e), 0);
        ck_assert_int_eq(rnnd_seqtab_start(t1, &b, 0, &s, &e), 0);
        rnnd_seqtab_release(t1, s, true, 0);
        ck_assert_uint_eq(rnnd_seqtab_note_dropped(t1, t2), 1);
        ck_assert_int_eq(rnnd_seqtab_start(t2, &c, 0, &s, &e), 0);
        ck_assert_uint_eq(rnnd_seqtab_note_dropped(t2, t3), 1);
        ck_assert_ptr_null(rnnd_seqtab_find(t3, &a, 1, &running, &why, &e));
        ck_assert_int_eq(why, RNND_SEQ_DROPPED);
        ck_assert_ptr_null(rnnd_seqtab_find(t3, &b, 1, &running, &why, &e));
        ck_assert_int_eq(why, RNND_SEQ_ENDED);
        ck_assert_ptr_null(rnnd_seqtab_find(t3, &c, 1, &running, &why, &e));
        ck_assert_int_eq(why, RNND_SEQ_DROPPED);
        rnnd_seqtab_free(t1);
        rnnd_seqtab_free(t2);
        rnnd_seqtab_free(t3);
}
END_TEST

static Suite *seqtab_suite(void)
{
        Suite *s = suite_create("seqtab");
        TCase *tc = tcase_create("table");

        tcase_add_loop_test(tc, test_cases, 0, (int)(sizeof(cases) / sizeof(cases[0])));
        tcase_add_test(tc, test_many);
        tcase_add_test(tc, test_note_dropped);
        tcase_add_test(tc, test_note_dropped_twice);
        suite_add_tcase(s, tc);
        return s;
}

RNND_CHECK_MAIN(seqtab_suite)

/*
 * team.c: helper threads for the CPU engine's sliced recurrence.
 *
 * DESIGN
 * A task is handed over under a mutex with a generation counter and a
 * condition variable: helpers sleep between batches.  Inside a task the
 * participants meet once per time step, thousands of times a batch, so that
 * barrier spins (with a pause hint) for a while before yielding the CPU:
 * a futex round trip per step would cost more than the step on small
 * batches.  A helper takes the runner's floating-point mode with the task,
 * since the engine's is per thread (cpu-int.h).  Lock order: only t->mu.
 */
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>

#include "alloc.h"
#include "cpu/cpu-int.h"
#include "cpu/team.h"

#define SPINS_BEFORE_YIELD 4000

struct helper {
        rnnd_team_t *team; /* immutable */
        unsigned index;    /* immutable */
        pthread_t thread;  /* immutable after start */
};

struct rnnd_team {
        unsigned n;             /* participants; immutable */
        struct helper *helpers; /* [n - 1]; immutable */
        unsigned started;       /* helpers running; creator only */
        pthread_mutex_t mu;
        pthread_cond_t start;              /* a new generation, or quit */
        pthread_cond_t finish;             /* a helper finished its part */
        unsigned long gen;                 /* guarded by mu */
        unsigned finished;                 /* guarded by mu */
        bool quit;                         /* guarded by mu */
        void (*fn)(void *arg, unsigned i); /* guarded by mu */
        void *arg;                         /* guarded by mu */
        unsigned fp_mode;                  /* the runner's (cpu-int.h); guarded by mu */
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
}

void rnnd_barrier_init(struct rnnd_spin_barrier *b, unsigned n)
{
        b->n = n;
        atomic_init(&b->count, 0);
        atomic_init(&b->sense, 0);
}

void rnnd_barrier_wait(struct rnnd_spin_barrier *b, unsigned *local_sense)
{
        unsigned want = *local_sense ^ 1;
        unsigned spins = 0;

        *local_sense = want;
        if (atomic_fetch_add(&b->count, 1) == b->n - 1) {
                atomic_store(&b->count, 0);
                atomic_store(&b->sense, want); /* releases the others */
                return;
        }
        while (atomic_load(&b->sense) != want) {
                if (++spins < SPINS_BEFORE_YIELD)
                        cpu_relax();
                else
                        sched_yield();
        }
}

static void *helper_main(void *arg)
{
        struct helper *h = arg;
        rnnd_team_t *t = h->team;
        unsigned long seen = 0;

        for (;;) {
                void (*fn)(void *, unsigned);
                void *fa;

                pthread_mutex_lock(&t->mu);
                while (t->gen == seen && !t->quit)
                        pthread_cond_wait(&t->start, &t->mu);
                if (t->quit) {
                        pthread_mutex_unlock(&t->mu);
                        return NULL;
                }
                seen = t->gen;
                fn = t->fn;
                fa = t->arg;
                rnnd__cpu_fp_set(t->fp_mode);
                pthread_mutex_unlock(&t->mu);

                fn(fa, h->index);

                pthread_mutex_lock(&t->mu);
                t->finished++;
                pthread_cond_signal(&t->finish);
                pthread_mutex_unlock(&t->mu);
        }
}

rnnd_team_t *rnnd_team_new(unsigned n)
{
        rnnd_team_t *t = rnnd_calloc(1, sizeof(*t));

        if (t == NULL)
                return NULL;
        t->n = n;
        t->helpers = rnnd_calloc(n - 1, sizeof(*t->helpers));
        if (t->helpers == NULL) {
                rnnd_free(t);
                return NULL;
        }
        pthread_mutex_init(&t->mu, NULL);
        pthread_cond_init(&t->start, NULL);
        pthread_cond_init(&t->finish, NULL);
        for (unsigned i = 0; i + 1 < n; i++) {
                t->helpers[i].team = t;
                t->helpers[i].index = i + 1;
                if (pthread_create(&t->helpers[i].thread, NULL, helper_main, &t->helpers[i]) != 0)
                        return rnnd_team_free(t);
                t->started++;
        }
        return t;
}

void rnnd_team_run(rnnd_team_t *t, void (*fn)(void *arg, unsigned i), void *arg)
{
        pthread_mutex_lock(&t->mu);
        t->fn = fn;
        t->arg = arg;
        t->fp_mode = rnnd__cpu_fp_mode();
        t->finished = 0;
        t->gen++;
        pthread_cond_broadcast(&t->start);
        pthread_mutex_unlock(&t->mu);

        fn(arg, 0);

        pthread_mutex_lock(&t->mu);
        while (t->finished < t->n - 1)
                pthread_cond_wait(&t->finish, &t->mu);
        pthread_mutex_unlock(&t->mu);
}

rnnd_team_t *rnnd_team_free(rnnd_team_t *t)
{
        if (t == NULL)
                return NULL;
        pthread_mutex_lock(&t->mu);
        t->quit = true;
        pthread_cond_broadcast(&t->start);
        pthread_mutex_unlock(&t->mu);
        for (unsigned i = 0; i < t->started; i++)
                pthread_join(t->helpers[i].thread, NULL);
        pthread_cond_destroy(&t->finish);
        pthread_cond_destroy(&t->start);
        pthread_mutex_destroy(&t->mu);
        rnnd_free(t->helpers);
        rnnd_free(t);
        return NULL;
}

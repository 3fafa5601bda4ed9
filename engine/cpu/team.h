/*
 * team.h: a CPU plan's helper threads, which run one task together with the
 * calling worker thread, and a spin barrier for the steps inside that task.
 */
#ifndef RNND_ENGINE_CPU_TEAM_H
#define RNND_ENGINE_CPU_TEAM_H

#include <stdatomic.h>

typedef struct rnnd_team rnnd_team_t;

/* A sense-reversing barrier for n participants; spins, then yields. */
struct rnnd_spin_barrier {
        unsigned n;        /* immutable */
        atomic_uint count; /* atomic */
        atomic_uint sense; /* atomic */
};

/* Each participant keeps its own sense, starting at 0. */
void rnnd_barrier_init(struct rnnd_spin_barrier *b, unsigned n);
void rnnd_barrier_wait(struct rnnd_spin_barrier *b, unsigned *local_sense);

/*
 * Starts n - 1 helper threads (n >= 2).  Returns a new team, or NULL when a
 * thread or memory cannot be had.  Thread-safe.
 */
rnnd_team_t *rnnd_team_new(unsigned n);

/*
 * Runs fn(arg, i) for i = 0..n-1: i = 0 on the calling thread, the others on
 * the helpers, and returns when all have.  The helpers run in the calling
 * thread's floating-point mode (its MXCSR on x86-64: cpu-int.h).  One caller
 * at a time.
 */
void rnnd_team_run(rnnd_team_t *t, void (*fn)(void *arg, unsigned i), void *arg);

/* Joins the helpers and frees t; accepts NULL; returns NULL. */
rnnd_team_t *rnnd_team_free(rnnd_team_t *t);

#endif

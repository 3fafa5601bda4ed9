/*
 * rng.h: the load client's pseudo-random numbers: splitmix64 (Steele, Lea and
 * Flood), small, fast and the same on every machine, so a seed always sends
 * the same requests.  Each use (input data, lengths, arrivals) has its own
 * stream, so changing the rate does not change the inputs.
 */
#ifndef RNND_CLIENTS_RNG_H
#define RNND_CLIENTS_RNG_H

#include <stdint.h>

/* Stream numbers for rnnd_rng_init(). */
enum { RNND_RNG_DATA = 1, RNND_RNG_LENGTHS = 2, RNND_RNG_ARRIVALS = 3 };

static inline uint64_t rnnd_rng_next(uint64_t *state)
{
        uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));

        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        return z ^ (z >> 31);
}

/* The state of stream for seed. */
static inline uint64_t rnnd_rng_init(uint64_t seed, unsigned stream)
{
        uint64_t s = seed ^ ((uint64_t)stream << 56);

        rnnd_rng_next(&s);
        return s;
}

/* A double in [0, 1). */
static inline double rnnd_rng_unit(uint64_t *state)
{
        return (double)(rnnd_rng_next(state) >> 11) * 0x1.0p-53;
}

/* An integer in lo..hi (hi - lo < 2^32; the bias is below 2^-32). */
static inline uint64_t rnnd_rng_range(uint64_t *state, uint64_t lo, uint64_t hi)
{
        return lo + (uint64_t)(rnnd_rng_unit(state) * (double)(hi - lo + 1));
}

#endif

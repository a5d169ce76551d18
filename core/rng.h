/* rng.h — explicit-state pseudo-random numbers for moelab (header-only).
 *
 * Generator: xoshiro256** (Blackman & Vigna), 256-bit state seeded from one 64-bit seed through
 * splitmix64. Every consumer owns its own Rng and passes it explicitly; nothing here touches
 * global state and rand() is never used. The same seed always yields the same stream on every
 * platform (only integer arithmetic up to the float conversions).
 *
 * Layout: Rng is four 64-bit words; copy it to fork a stream, seed sibling streams with
 * different seeds (e.g. seed ^ 0x..., seed + stream_id), or key them with rng_seed_stream. */
#ifndef ML_RNG_H
#define ML_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct {
    uint64_t s[4]; // xoshiro256** state; never all zero
} Rng;

// splitmix64 step: advances *x and returns the next output (used for seeding).
static inline uint64_t rng_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Fills the state from `seed` with splitmix64 (any seed, including 0, is valid).
static inline void rng_seed(Rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix64(&x);
    if ((r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0) r->s[0] = 1; // cannot happen with splitmix64, kept as a guard
}

// Fills the state with an independent stream keyed by (seed, a, b): seed, then a and b, are mixed
// in through splitmix64 steps and the four words are the next four splitmix64 outputs. For
// generators that need one stream per item (e.g. per class and per sample in
// datasets/synthetic.c) so that the numbers do not depend on the order or the thread that draws
// them. The derivation is fixed: the synthetic datasets, and the checksums recorded from them in
// tests/bitident.txt, depend on it.
static inline void rng_seed_stream(Rng *r, uint64_t seed, uint64_t a, uint64_t b) {
    uint64_t x = seed;
    uint64_t h = rng_splitmix64(&x);
    x = h ^ (a * 0xd1b54a32d192ed03ULL);
    h = rng_splitmix64(&x);
    x = h ^ (b * 0xaef17502108ef2d9ULL);
    for (int i = 0; i < 4; i++) r->s[i] = rng_splitmix64(&x);
    if ((r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0) r->s[0] = 1; // as in rng_seed
}

static inline uint64_t rng_rotl_(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// Next 64 uniformly distributed bits.
static inline uint64_t rng_u64(Rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rng_rotl_(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rng_rotl_(s[3], 45);
    return result;
}

// Uniform double in the open interval (0, 1): 53 random bits, centred in their cell.
static inline double rng_uniform_double(Rng *r) {
    return ((double)(rng_u64(r) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Uniform float in the open interval (0, 1): 23 random bits, so the largest value is 1 - 2^-24
// (exactly representable) and the smallest 2^-24; never 0 or 1.
static inline float rng_uniform(Rng *r) { return ((float)(rng_u64(r) >> 41) + 0.5f) * (1.0f / 8388608.0f); }

// Standard normal N(0, 1) (Box-Muller in double; one value per call, the sine branch is
// discarded so that the state stays the four words of Rng).
static inline float rng_normal(Rng *r) {
    double u1 = rng_uniform_double(r);
    double u2 = rng_uniform_double(r);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

// Standard Gumbel sample -log(-log(u)), u uniform in (0, 1) (computed in double; always finite).
static inline float rng_gumbel(Rng *r) { return (float)(-log(-log(rng_uniform_double(r)))); }

// Unbiased uniform integer in [0, n) (Lemire's multiply-and-reject). Returns 0 when n == 0.
static inline uint32_t rng_below(Rng *r, uint32_t n) {
    if (n == 0) return 0;
    uint64_t m = (rng_u64(r) >> 32) * (uint64_t)n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n; // 2^32 mod n
        while (low < threshold) {
            m = (rng_u64(r) >> 32) * (uint64_t)n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

#endif

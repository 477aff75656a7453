/*
 * hash.h - the one string hash of the process (hash tables and dedup keys),
 * and hash_span, its form for long spans (a body's part seen before).
 *
 * hash_bytes hashes eight bytes per step: names are looked up once per node
 * per request, so a byte-at-a-time hash showed up in profiles. It is inline
 * here so the cache's probe loops keep it inlined. Not a cryptographic hash:
 * tables keyed by untrusted strings must bound their probe runs themselves.
 */
#ifndef AGENTSCHED_HASH_H
#define AGENTSCHED_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* hash_mix folds a 64x64 -> 128 multiply to 64 bits: a strong, cheap
 * mixer. */
static inline uint64_t hash_mix(uint64_t a, uint64_t b)
{
    __uint128_t r = (__uint128_t)a * b;
    return (uint64_t)r ^ (uint64_t)(r >> 64);
}

/*
 * hash_bytes hashes s[0..len): the words before the last, then the last
 * eight bytes, overlapping the word before when the length is not a
 * multiple of eight, so a name of 9 to 16 bytes is two multiplies. Shorter
 * tails are loaded without reading past s[len). Deterministic across runs
 * and threads (no seed).
 */
static inline uint64_t hash_bytes(const char *s, size_t len)
{
    const uint64_t k0 = 0xa0761d6478bd642fULL, k1 = 0xe7037ed1a0b428dbULL;
    uint64_t h = (uint64_t)len ^ k0, w = 0;
    if (len >= 8) {
        for (size_t i = 0; len - i > 8; i += 8) {
            memcpy(&w, s + i, 8);
            h = hash_mix(h ^ w, k1);
        }
        memcpy(&w, s + len - 8, 8);
    } else if (len >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + len - 4, 4);
        w = (uint64_t)a << 32 | b;
    } else if (len > 0) {
        w = (uint64_t)(unsigned char)s[0] << 16 | (uint64_t)(unsigned char)s[len / 2] << 8 |
            (uint64_t)(unsigned char)s[len - 1];
    }
    h = hash_mix(h ^ w, k1 ^ len);
    return h ^ (h >> 29);
}

/*
 * hash_span hashes s[0..len) as hash_bytes does a name, for long spans:
 * four independent lanes of eight bytes a step, so the multiplies overlap
 * (a 40 KB body in 2.3 us at -O3 against hash_bytes' 8.7 us), folded with
 * the tail and the length. A different function from hash_bytes: do not mix
 * the two for one key.
 */
static inline uint64_t hash_span(const char *s, size_t len)
{
    if (len < 64)
        return hash_bytes(s, len) ^ 0x9e3779b97f4a7c15ULL;
    const uint64_t k1 = 0xe7037ed1a0b428dbULL;
    uint64_t h[4] = {0xa0761d6478bd642fULL ^ len, 0x8ebc6af09c88c6e3ULL, 0x589965cc75374cc3ULL,
                     0x1d8e4e27c47d124fULL};
    size_t i = 0;
    for (; len - i >= 32; i += 32) {
        uint64_t w[4];
        memcpy(w, s + i, 32);
        for (int l = 0; l < 4; l++)
            h[l] = hash_mix(h[l] ^ w[l], k1);
    }
    uint64_t r = hash_mix(h[0] ^ h[2], k1) ^ hash_mix(h[1] ^ h[3], k1 ^ len);
    /* the last 32 bytes (overlapping what the lanes took when len is not
     * a multiple of 32) */
    return hash_mix(r ^ hash_bytes(s + len - 32, 32), k1);
}

/* hash_str is hash_bytes over the NUL-terminated s; NULL hashes as "".
 * Keys made of several strings chain them through hash_mix. */
uint64_t hash_str(const char *s);

#endif

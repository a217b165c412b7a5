/* philox.h -- the Philox4x32-10 counter-based generator (Salmon et al., "Parallel random
 * numbers: as easy as 1, 2, 3", SC'11) and the mapping from counters to numbers that every
 * backend shares, plus the generator's internal interface for kernels.
 *
 * Why counter-based: a block of four 32-bit words is a pure function of (key, counter), so
 * element i of a tensor can be computed by any thread (or CUDA thread) without touching a
 * shared state. The same seed then gives the same tensor whatever the thread count, and the
 * CUDA backend reproduces the CPU numbers by including this header.
 *
 * The stream layout (the contract the CUDA backend must follow):
 *   key     = (lo32(seed), hi32(seed))
 *   counter = (lo32(slot), hi32(slot), lo32(draw), hi32(draw))
 * A tensor op reserves `nslots` consecutive slots from the generator (tc_generator_reserve)
 * and element i uses slot base + i (normal: base + i/2, two elements per block); `draw`
 * numbers further blocks of one slot for samplers that need more than four words
 * (rejection loops). Scalar draws (tc_generator_uniform) consume slots one block at a time.
 * Plain C99 (no libc beyond math), so nvcc compiles it for the device as well.
 */
#ifndef TC_PHILOX_H
#define TC_PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define TC_HD __host__ __device__ __forceinline__
#else
#define TC_HD static inline
#endif

typedef struct tc_philox_block {
    uint32_t w[4];
} tc_philox_block;

/* One Philox4x32-10 block. Round: (hi, lo) = M * x over 32x32->64 bits; the key is bumped
 * by the Weyl constants between rounds. Checked against Random123's known answers. */
TC_HD tc_philox_block tc_philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                                       uint32_t k1)
{
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    tc_philox_block b = {{c0, c1, c2, c3}};
    return b;
}

/* Block `draw` of `slot` under `seed` (the stream layout above). */
TC_HD tc_philox_block tc_philox_at(uint64_t seed, uint64_t slot, uint64_t draw)
{
    return tc_philox4x32_10((uint32_t)slot, (uint32_t)(slot >> 32), (uint32_t)draw, (uint32_t)(draw >> 32),
                            (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* Two words -> a double in [0, 1) with 53 random bits (every multiple of 2^-53). */
TC_HD double tc_philox_u53(uint32_t lo, uint32_t hi)
{
    uint64_t x = ((uint64_t)hi << 32 | lo) >> 11;
    return (double)x * (1.0 / 9007199254740992.0);
}

TC_HD uint64_t tc_philox_u64(uint32_t lo, uint32_t hi) { return (uint64_t)hi << 32 | lo; }

#ifndef __CUDACC__
#include "tocha.h"
/* Reserves nslots counter slots of g (NULL: the process default, under its lock) and
 * returns the first one with the seed that keys them. A partly used scalar block is
 * dropped first, so a tensor op always starts on a fresh slot. Never fails. */
uint64_t tc_generator_reserve(tc_generator *g, uint64_t nslots, uint64_t *seed);
#endif

#endif /* TC_PHILOX_H */

// MD5 of up to 16 independent streams at once (AVX-512 or AVX2 lanes), for hashing many files per core.
#pragma once
#include <stddef.h>
#include <stdint.h>

enum { PL_MD5_SCALAR = 0, PL_MD5_AVX2 = 1, PL_MD5_AVX512 = 2 };

/// The chaining values of 16 streams, word by word (lane i is a[i], b[i], c[i], d[i]).
typedef struct pl_md5_lanes {
    uint32_t a[16], b[16], c[16], d[16];
} pl_md5_lanes;

/// The fastest level this CPU runs.
int pl_md5_lanes_best_level(void);

/// Starts lane `lane` over with MD5's initial values.
void pl_md5_lanes_reset(pl_md5_lanes *st, unsigned lane);

/// Feeds `nblocks` whole 64-byte blocks to every lane in `mask` (bit i = lane i); lane i
/// reads base + offsets[i] onwards. Lanes outside the mask are neither read nor changed.
/// Offsets are 32-bit so that one gather reaches all lanes: give every lane a slice of one buffer.
void pl_md5_lanes_blocks(int level, pl_md5_lanes *st, const uint8_t *base, const uint32_t offsets[16],
                         uint32_t mask, size_t nblocks);

/// Ends lane `lane`: the last `tail_len` (< 64) bytes, the stream's total length, the 16-byte digest.
void pl_md5_lanes_final(pl_md5_lanes *st, unsigned lane, const uint8_t *tail, size_t tail_len,
                        uint64_t total_len, uint8_t out[16]);

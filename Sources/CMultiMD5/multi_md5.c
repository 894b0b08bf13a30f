// MD5 of up to 16 independent streams at once, one per SIMD lane.
//
// MD5 is a chain of dependent 32-bit steps, so one stream cannot go faster than
// OpenSSL's assembly (about 4 cycles a byte). Many files can: the same steps on 16 lanes
// of an AVX-512 register (or 2 x 8 of AVX2) cost about what one lane does, so a queue
// of photos hashes several times faster per core. Each lane reads its block straight
// from the caller's buffers with a masked gather; lanes not in the mask are neither
// read nor changed. Machines with neither extension (and a lone stream) use OpenSSL.
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include "CMultiMD5.h"
#include <openssl/md5.h>
#include <string.h>
#if defined(__x86_64__) && !defined(PL_MD5_NO_SIMD)
#include <immintrin.h>
#define PL_MD5_X86 1
#endif

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "MD5 words are read as little-endian loads");

static const uint32_t K[64] = {
    0xd76aa478u, 0xe8c7b756u, 0x242070dbu, 0xc1bdceeeu, 0xf57c0fafu, 0x4787c62au, 0xa8304613u, 0xfd469501u,
    0x698098d8u, 0x8b44f7afu, 0xffff5bb1u, 0x895cd7beu, 0x6b901122u, 0xfd987193u, 0xa679438eu, 0x49b40821u,
    0xf61e2562u, 0xc040b340u, 0x265e5a51u, 0xe9b6c7aau, 0xd62f105du, 0x02441453u, 0xd8a1e681u, 0xe7d3fbc8u,
    0x21e1cde6u, 0xc33707d6u, 0xf4d50d87u, 0x455a14edu, 0xa9e3e905u, 0xfcefa3f8u, 0x676f02d9u, 0x8d2a4c8au,
    0xfffa3942u, 0x8771f681u, 0x6d9d6122u, 0xfde5380cu, 0xa4beea44u, 0x4bdecfa9u, 0xf6bb4b60u, 0xbebfbc70u,
    0x289b7ec6u, 0xeaa127fau, 0xd4ef3085u, 0x04881d05u, 0xd9d4d039u, 0xe6db99e5u, 0x1fa27cf8u, 0xc4ac5665u,
    0xf4292244u, 0x432aff97u, 0xab9423a7u, 0xfc93a039u, 0x655b59c3u, 0x8f0ccc92u, 0xffeff47du, 0x85845dd1u,
    0x6fa87e4fu, 0xfe2ce6e0u, 0xa3014314u, 0x4e0811a1u, 0xf7537e82u, 0xbd3af235u, 0x2ad7d2bbu, 0xeb86d391u
};
static const uint8_t S[64] = { 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21 };

static inline uint32_t rotl32(uint32_t x, unsigned s) { return (x << s) | (x >> (32 - s)); }

// One 64-byte block of one stream, plain C: the final (padding) blocks and the reference
// the level-0 path uses for lanes.
static void block_scalar(uint32_t h[4], const uint8_t *p) {
    uint32_t m[16];
    memcpy(m, p, 64);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3];
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        if (i < 16) { f = (b & c) | (~b & d); g = i; }
        else if (i < 32) { f = (d & b) | (~d & c); g = (5 * i + 1) & 15; }
        else if (i < 48) { f = b ^ c ^ d; g = (3 * i + 5) & 15; }
        else { f = c ^ (b | ~d); g = (7 * i) & 15; }
        uint32_t t = d;
        d = c;
        c = b;
        b = b + rotl32(a + f + K[i] + m[g], S[i]);
        a = t;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d;
}

#if PL_MD5_X86
// MD5's 64 steps with a vector width's STEP and round functions (P = V5 or V2): one list for both.
#define MD5_64_STEPS(P) \
    P##STEP(P##F, a, b, c, d, m[0], 0xd76aa478u, 7); \
    P##STEP(P##F, d, a, b, c, m[1], 0xe8c7b756u, 12); \
    P##STEP(P##F, c, d, a, b, m[2], 0x242070dbu, 17); \
    P##STEP(P##F, b, c, d, a, m[3], 0xc1bdceeeu, 22); \
    P##STEP(P##F, a, b, c, d, m[4], 0xf57c0fafu, 7); \
    P##STEP(P##F, d, a, b, c, m[5], 0x4787c62au, 12); \
    P##STEP(P##F, c, d, a, b, m[6], 0xa8304613u, 17); \
    P##STEP(P##F, b, c, d, a, m[7], 0xfd469501u, 22); \
    P##STEP(P##F, a, b, c, d, m[8], 0x698098d8u, 7); \
    P##STEP(P##F, d, a, b, c, m[9], 0x8b44f7afu, 12); \
    P##STEP(P##F, c, d, a, b, m[10], 0xffff5bb1u, 17); \
    P##STEP(P##F, b, c, d, a, m[11], 0x895cd7beu, 22); \
    P##STEP(P##F, a, b, c, d, m[12], 0x6b901122u, 7); \
    P##STEP(P##F, d, a, b, c, m[13], 0xfd987193u, 12); \
    P##STEP(P##F, c, d, a, b, m[14], 0xa679438eu, 17); \
    P##STEP(P##F, b, c, d, a, m[15], 0x49b40821u, 22); \
    P##STEP(P##G, a, b, c, d, m[1], 0xf61e2562u, 5); \
    P##STEP(P##G, d, a, b, c, m[6], 0xc040b340u, 9); \
    P##STEP(P##G, c, d, a, b, m[11], 0x265e5a51u, 14); \
    P##STEP(P##G, b, c, d, a, m[0], 0xe9b6c7aau, 20); \
    P##STEP(P##G, a, b, c, d, m[5], 0xd62f105du, 5); \
    P##STEP(P##G, d, a, b, c, m[10], 0x02441453u, 9); \
    P##STEP(P##G, c, d, a, b, m[15], 0xd8a1e681u, 14); \
    P##STEP(P##G, b, c, d, a, m[4], 0xe7d3fbc8u, 20); \
    P##STEP(P##G, a, b, c, d, m[9], 0x21e1cde6u, 5); \
    P##STEP(P##G, d, a, b, c, m[14], 0xc33707d6u, 9); \
    P##STEP(P##G, c, d, a, b, m[3], 0xf4d50d87u, 14); \
    P##STEP(P##G, b, c, d, a, m[8], 0x455a14edu, 20); \
    P##STEP(P##G, a, b, c, d, m[13], 0xa9e3e905u, 5); \
    P##STEP(P##G, d, a, b, c, m[2], 0xfcefa3f8u, 9); \
    P##STEP(P##G, c, d, a, b, m[7], 0x676f02d9u, 14); \
    P##STEP(P##G, b, c, d, a, m[12], 0x8d2a4c8au, 20); \
    P##STEP(P##H, a, b, c, d, m[5], 0xfffa3942u, 4); \
    P##STEP(P##H, d, a, b, c, m[8], 0x8771f681u, 11); \
    P##STEP(P##H, c, d, a, b, m[11], 0x6d9d6122u, 16); \
    P##STEP(P##H, b, c, d, a, m[14], 0xfde5380cu, 23); \
    P##STEP(P##H, a, b, c, d, m[1], 0xa4beea44u, 4); \
    P##STEP(P##H, d, a, b, c, m[4], 0x4bdecfa9u, 11); \
    P##STEP(P##H, c, d, a, b, m[7], 0xf6bb4b60u, 16); \
    P##STEP(P##H, b, c, d, a, m[10], 0xbebfbc70u, 23); \
    P##STEP(P##H, a, b, c, d, m[13], 0x289b7ec6u, 4); \
    P##STEP(P##H, d, a, b, c, m[0], 0xeaa127fau, 11); \
    P##STEP(P##H, c, d, a, b, m[3], 0xd4ef3085u, 16); \
    P##STEP(P##H, b, c, d, a, m[6], 0x04881d05u, 23); \
    P##STEP(P##H, a, b, c, d, m[9], 0xd9d4d039u, 4); \
    P##STEP(P##H, d, a, b, c, m[12], 0xe6db99e5u, 11); \
    P##STEP(P##H, c, d, a, b, m[15], 0x1fa27cf8u, 16); \
    P##STEP(P##H, b, c, d, a, m[2], 0xc4ac5665u, 23); \
    P##STEP(P##I, a, b, c, d, m[0], 0xf4292244u, 6); \
    P##STEP(P##I, d, a, b, c, m[7], 0x432aff97u, 10); \
    P##STEP(P##I, c, d, a, b, m[14], 0xab9423a7u, 15); \
    P##STEP(P##I, b, c, d, a, m[5], 0xfc93a039u, 21); \
    P##STEP(P##I, a, b, c, d, m[12], 0x655b59c3u, 6); \
    P##STEP(P##I, d, a, b, c, m[3], 0x8f0ccc92u, 10); \
    P##STEP(P##I, c, d, a, b, m[10], 0xffeff47du, 15); \
    P##STEP(P##I, b, c, d, a, m[1], 0x85845dd1u, 21); \
    P##STEP(P##I, a, b, c, d, m[8], 0x6fa87e4fu, 6); \
    P##STEP(P##I, d, a, b, c, m[15], 0xfe2ce6e0u, 10); \
    P##STEP(P##I, c, d, a, b, m[6], 0xa3014314u, 15); \
    P##STEP(P##I, b, c, d, a, m[13], 0x4e0811a1u, 21); \
    P##STEP(P##I, a, b, c, d, m[4], 0xf7537e82u, 6); \
    P##STEP(P##I, d, a, b, c, m[11], 0xbd3af235u, 10); \
    P##STEP(P##I, c, d, a, b, m[2], 0x2ad7d2bbu, 15); \
    P##STEP(P##I, b, c, d, a, m[9], 0xeb86d391u, 21);

// ---- AVX-512: 16 lanes -------------------------------------------------------------
#define V5F(b, c, d) _mm512_ternarylogic_epi32((b), (c), (d), 0xCA) /* b ? c : d */
#define V5G(b, c, d) _mm512_ternarylogic_epi32((d), (b), (c), 0xCA) /* d ? b : c */
#define V5H(b, c, d) _mm512_ternarylogic_epi32((b), (c), (d), 0x96) /* b ^ c ^ d */
#define V5I(b, c, d) _mm512_ternarylogic_epi32((b), (c), (d), 0x39) /* c ^ (b | ~d) */
#define V5STEP(FN, a, b, c, d, mw, k, s) \
    a = _mm512_add_epi32((b), _mm512_rol_epi32(_mm512_add_epi32(_mm512_add_epi32((a), FN(b, c, d)), \
                                                                  _mm512_add_epi32((mw), _mm512_set1_epi32((int)(k)))), (s)))

__attribute__((target("avx512f")))
static void blocks_avx512(pl_md5_lanes *st, const uint8_t *base, const uint32_t offsets[16], uint32_t mask, size_t nblocks) {
    const __mmask16 k = (__mmask16)mask;
    __m512i a = _mm512_loadu_si512(st->a), b = _mm512_loadu_si512(st->b);
    __m512i c = _mm512_loadu_si512(st->c), d = _mm512_loadu_si512(st->d);
    __m512i idx = _mm512_loadu_si512(offsets);
    const __m512i step = _mm512_set1_epi32(64);
    for (size_t n = 0; n < nblocks; n++) {
        __m512i m[16];
        for (int w = 0; w < 16; w++)
            m[w] = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, idx, base + 4 * w, 1);
        __m512i aa = a, bb = b, cc = c, dd = d;
        MD5_64_STEPS(V5);
        a = _mm512_add_epi32(a, aa); b = _mm512_add_epi32(b, bb);
        c = _mm512_add_epi32(c, cc); d = _mm512_add_epi32(d, dd);
        idx = _mm512_add_epi32(idx, step);
    }
    _mm512_mask_storeu_epi32(st->a, k, a); _mm512_mask_storeu_epi32(st->b, k, b);
    _mm512_mask_storeu_epi32(st->c, k, c); _mm512_mask_storeu_epi32(st->d, k, d);
}

// ---- AVX-512 on 256 bits: 8 lanes ---------------------------------------------------
// A masked whole register still pays for its idle lanes' gathers: on this AMD EPYC,
// 2 to 8 busy lanes took 124-131 ns a block on half a register against 176-200 ns on the
// whole one (scripts/bench_md5_lanes.py, 1 MB a lane). Lanes in both halves stay on the
// whole register. docs/benchmarks.md, "Half a register for eight lanes or fewer".
#define V8F(b, c, d) _mm256_ternarylogic_epi32((b), (c), (d), 0xCA)
#define V8G(b, c, d) _mm256_ternarylogic_epi32((d), (b), (c), 0xCA)
#define V8H(b, c, d) _mm256_ternarylogic_epi32((b), (c), (d), 0x96)
#define V8I(b, c, d) _mm256_ternarylogic_epi32((b), (c), (d), 0x39)
#define V8STEP(FN, a, b, c, d, mw, k, s) \
    a = _mm256_add_epi32((b), _mm256_rol_epi32(_mm256_add_epi32(_mm256_add_epi32((a), FN(b, c, d)), \
                                                                  _mm256_add_epi32((mw), _mm256_set1_epi32((int)(k)))), (s)))

__attribute__((target("avx512f,avx512vl")))
static void blocks_avx512_half(pl_md5_lanes *st, int half, const uint8_t *base, const uint32_t offsets[16], uint32_t mask, size_t nblocks) {
    const __mmask8 k = (__mmask8)((mask >> (8 * half)) & 0xffu);
    const int o = 8 * half;
    __m256i a = _mm256_loadu_si256((const __m256i *)(st->a + o)), b = _mm256_loadu_si256((const __m256i *)(st->b + o));
    __m256i c = _mm256_loadu_si256((const __m256i *)(st->c + o)), d = _mm256_loadu_si256((const __m256i *)(st->d + o));
    __m256i idx = _mm256_loadu_si256((const __m256i *)(offsets + o));
    const __m256i step = _mm256_set1_epi32(64);
    for (size_t n = 0; n < nblocks; n++) {
        __m256i m[16];
        for (int w = 0; w < 16; w++)
            m[w] = _mm256_mmask_i32gather_epi32(_mm256_setzero_si256(), k, idx, base + 4 * w, 1);
        __m256i aa = a, bb = b, cc = c, dd = d;
        MD5_64_STEPS(V8);
        a = _mm256_add_epi32(a, aa); b = _mm256_add_epi32(b, bb);
        c = _mm256_add_epi32(c, cc); d = _mm256_add_epi32(d, dd);
        idx = _mm256_add_epi32(idx, step);
    }
    _mm256_mask_storeu_epi32(st->a + o, k, a); _mm256_mask_storeu_epi32(st->b + o, k, b);
    _mm256_mask_storeu_epi32(st->c + o, k, c); _mm256_mask_storeu_epi32(st->d + o, k, d);
}

// ---- AVX2: 8 lanes at a time ---------------------------------------------------------
#define V2F(b, c, d) _mm256_xor_si256((d), _mm256_and_si256((b), _mm256_xor_si256((c), (d))))
#define V2G(b, c, d) _mm256_xor_si256((c), _mm256_and_si256((d), _mm256_xor_si256((b), (c))))
#define V2H(b, c, d) _mm256_xor_si256(_mm256_xor_si256((b), (c)), (d))
#define V2I(b, c, d) _mm256_xor_si256((c), _mm256_or_si256((b), _mm256_xor_si256((d), ones)))
#define V2ROL(x, s) _mm256_or_si256(_mm256_slli_epi32((x), (s)), _mm256_srli_epi32((x), 32 - (s)))
#define V2STEP(FN, a, b, c, d, mw, k, s) \
    a = _mm256_add_epi32((b), V2ROL(_mm256_add_epi32(_mm256_add_epi32((a), FN(b, c, d)), \
                                                     _mm256_add_epi32((mw), _mm256_set1_epi32((int)(k)))), (s)))

__attribute__((target("avx2")))
static void blocks_avx2_half(pl_md5_lanes *st, int half, const uint8_t *base, const uint32_t offsets[16], uint32_t mask, size_t nblocks) {
    const __m256i ones = _mm256_set1_epi32(-1);
    const __m256i bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256i sel = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)((mask >> (8 * half)) & 0xff)), bits), bits);
    const int o = 8 * half;
    __m256i a = _mm256_loadu_si256((const __m256i *)(st->a + o)), b = _mm256_loadu_si256((const __m256i *)(st->b + o));
    __m256i c = _mm256_loadu_si256((const __m256i *)(st->c + o)), d = _mm256_loadu_si256((const __m256i *)(st->d + o));
    __m256i idx = _mm256_loadu_si256((const __m256i *)(offsets + o));
    const __m256i step = _mm256_set1_epi32(64);
    for (size_t n = 0; n < nblocks; n++) {
        __m256i m[16];
        for (int w = 0; w < 16; w++)
            m[w] = _mm256_mask_i32gather_epi32(_mm256_setzero_si256(), (const int *)(base + 4 * w), idx, sel, 1);
        __m256i aa = a, bb = b, cc = c, dd = d;
        MD5_64_STEPS(V2);
        a = _mm256_add_epi32(a, aa); b = _mm256_add_epi32(b, bb);
        c = _mm256_add_epi32(c, cc); d = _mm256_add_epi32(d, dd);
        idx = _mm256_add_epi32(idx, step);
    }
    _mm256_maskstore_epi32((int *)(st->a + o), sel, a); _mm256_maskstore_epi32((int *)(st->b + o), sel, b);
    _mm256_maskstore_epi32((int *)(st->c + o), sel, c); _mm256_maskstore_epi32((int *)(st->d + o), sel, d);
}

#endif // PL_MD5_X86

// ---- one lane through OpenSSL ---------------------------------------------------------
// Its assembly is faster than a lone SIMD lane; the lane's state goes in and out of a
// legacy MD5_CTX (the chaining values are all MD5_Update uses for whole blocks).
static void blocks_openssl(pl_md5_lanes *st, unsigned lane, const uint8_t *p, size_t nblocks) {
    MD5_CTX ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.A = st->a[lane]; ctx.B = st->b[lane]; ctx.C = st->c[lane]; ctx.D = st->d[lane];
    MD5_Update(&ctx, p, nblocks * 64);
    st->a[lane] = ctx.A; st->b[lane] = ctx.B; st->c[lane] = ctx.C; st->d[lane] = ctx.D;
}

int pl_md5_lanes_best_level(void) {
#if PL_MD5_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return PL_MD5_AVX512;
    if (__builtin_cpu_supports("avx2")) return PL_MD5_AVX2;
#endif
    return PL_MD5_SCALAR;
}

void pl_md5_lanes_reset(pl_md5_lanes *st, unsigned lane) {
    st->a[lane] = 0x67452301u; st->b[lane] = 0xefcdab89u;
    st->c[lane] = 0x98badcfeu; st->d[lane] = 0x10325476u;
}

void pl_md5_lanes_blocks(int level, pl_md5_lanes *st, const uint8_t *base, const uint32_t offsets[16],
                         uint32_t mask, size_t nblocks) {
    mask &= 0xffffu;
    if (mask == 0 || nblocks == 0) return;
    if ((mask & (mask - 1)) == 0 && level != PL_MD5_SCALAR) {
        unsigned lane = (unsigned)__builtin_ctz(mask);
        blocks_openssl(st, lane, base + offsets[lane], nblocks);
        return;
    }
    switch (level) {
#if PL_MD5_X86
    case PL_MD5_AVX512:
        if (__builtin_cpu_supports("avx512vl") && ((mask & 0xff00u) == 0 || (mask & 0x00ffu) == 0)) {
            blocks_avx512_half(st, (mask & 0x00ffu) ? 0 : 1, base, offsets, mask, nblocks);
            return;
        }
        blocks_avx512(st, base, offsets, mask, nblocks);
        return;
    case PL_MD5_AVX2:
        if (mask & 0x00ffu) blocks_avx2_half(st, 0, base, offsets, mask, nblocks);
        if (mask & 0xff00u) blocks_avx2_half(st, 1, base, offsets, mask, nblocks);
        return;
#endif
    default:
        for (unsigned lane = 0; lane < 16; lane++) {
            if (!(mask & (1u << lane))) continue;
            uint32_t h[4] = { st->a[lane], st->b[lane], st->c[lane], st->d[lane] };
            for (size_t n = 0; n < nblocks; n++) block_scalar(h, base + offsets[lane] + 64 * n);
            st->a[lane] = h[0]; st->b[lane] = h[1]; st->c[lane] = h[2]; st->d[lane] = h[3];
        }
    }
}

void pl_md5_lanes_final(pl_md5_lanes *st, unsigned lane, const uint8_t *tail, size_t tail_len,
                        uint64_t total_len, uint8_t out[16]) {
    uint8_t pad[128];
    memset(pad, 0, sizeof pad);
    memcpy(pad, tail, tail_len);
    pad[tail_len] = 0x80;
    size_t blocks = tail_len < 56 ? 1 : 2;
    uint64_t bits = total_len * 8;
    memcpy(pad + 64 * blocks - 8, &bits, 8);
    uint32_t h[4] = { st->a[lane], st->b[lane], st->c[lane], st->d[lane] };
    for (size_t n = 0; n < blocks; n++) block_scalar(h, pad + 64 * n);
    memcpy(out, h, 16);
}

/* kern_panel_avx2.h — the 256-bit panel tile and its drivers over weights repacked at load (the
 * stored layout of kern_panel_layout.h, the one the AVX-512 tile reads), for CPUs with AVX2 but
 * no AVX-512. Compiled three times: kern_packed_avxvnni.c (P2_VNNI 1: the u8 x s8 4-byte dot is one
 * VEX-encoded vpdpbusd, AVX-VNNI), kern_packed_avx2.c (P2_VNNI 0: vpmaddubsw + vpmaddwd) and
 * kern_packed_ymm_avx512.c (P2_VNNI 2: the same with EVEX-encoded vpdpbusd, for AVX-512 CPUs, as a
 * candidate one-token tile there, kern_tune.h); kern_dispatch.c picks one at run time.
 *
 * Read first: kern_panel_avx512.c (what a panel is), kern_panel_layout.h ("stored layout") and
 * kern_packed_avx512.c (the AVX-512 drivers these follow).
 *
 * A stored panel is 16 rows, a 64-byte line one 4-byte group of them; a ymm holds half of it.
 * Two tiles:
 * - p2_tile16, both halves (16 rows) x up to P2_NT16 = 4 tokens: per group two 32-byte loads of
 *   the weights (nibbles unpacked once for all the tile's tokens) and per token one broadcast of
 *   its 4 activation bytes feeding two dots. With VNNI, eight independent dot chains: a ymm
 *   vpdpbusd has a latency of 4 cycles and issues 2 per cycle on this Zen 5 (6 chains reach 1.5
 *   per cycle, 8 chains 1.85), and 8 int32 sums + 2 weights + a broadcast leave no room for the
 *   8 float sums, which wait in memory between sub-blocks. It replaced an 8-row x 6-token tile
 *   (6 chains, a broadcast per dot): prefill 326 -> 385 GOP/s on Q8_0. Without VNNI the dots take
 *   2-4 instructions, so the tile is bound by the vector ALUs, not by loads; there too it
 *   replaced an 8-row tile of up to 6 tokens, which paid the broadcasts, the loop and the
 *   prefetch arithmetic once per half (Zen 3, 255 MB from DRAM, one thread, 2 tokens: Q8_0 19.7
 *   -> 14.1 ms, Q4_0 20.6 -> 17.2, Q5_0 20.0 -> 16.1, Q4_K 28.5 -> 21.1, Q6_K 30.0 -> 21.2; 4
 *   tokens 25 -> 20, 33 -> 30, 34 -> 26, 41.5 -> 32, 38 -> 30.5; prefill unchanged).
 * - p2_tile1, one token, both halves: four dependency chains of dots instead of two.
 * After a sub-block's groups each int32 lane is that row's exact sub-block dot, and the float
 * chain is the AVX-512 tile's, lane for lane:
 *     acc = fma((float)x_s, dw_s * da_s, acc)     [Q4_K, Q4_1: then acc = acc - dm_s * am_s]
 * so results are the AVX-512 panels' bits (test_batch_invariance holds them to memcmp), and the
 * same for every batch size on both variants (integer dots are exact whichever instructions sum
 * them).
 *
 * The two dots. VNNI: x = vpdpbusd(x, w, a) with x starting at -off * sum(a), as on AVX-512.
 * Without VNNI, vpmaddubsw sums pairs of u8 x s8 products into int16 with saturation:
 *   Q4_0, Q4_1, Q4_K  codes 0..15: a pair is at most 2 x 15 x 127 = 3810 in magnitude, so a
 *               sub-block's 8 groups add up in int16 (<= 30480) and one vpmaddwd with ones per sub-block and
 *               token widens them: 2 instructions per group and token instead of 1;
 *   Q8_0        codes w + 128 would saturate (255 x 127 x 2 > 32767), so the signed codes (the
 *               stored byte ^ 0x80) go through the sign trick, |w| x (a with w's sign), whose pairs
 *               are at most 2 x 128 x 127 = 32512, and every group is widened at once: 4
 *               instructions per group and token, and the dot starts at 0 (no offset to remove).
 * Activations are signed Q8_0 / Q8_1 / Q8_K bytes in -127..127 (kern_quantize_act), read in place. */
#ifndef TERN_KERN_PANEL_AVX2_H
#define TERN_KERN_PANEL_AVX2_H

#include <immintrin.h>
#include <stddef.h>
#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern_panel_act.h"
#include "kernels/kern_panel_layout.h"
#include "kernels/kern_panel_rows.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include "util/check.h"

#ifndef P2_VNNI
#error "define P2_VNNI (0, 1 or 2) before including kern_panel_avx2.h"
#endif
/* The 256-bit vpdpbusd: VEX-encoded (AVX-VNNI) in kern_packed_avxvnni.c, EVEX-encoded
 * (AVX512-VNNI + VL) in kern_packed_ymm_avx512.c (P2_VNNI 2), the same instruction for CPUs
 * that have AVX-512 but not AVX-VNNI (Zen 4) */
#if P2_VNNI == 2
#define P2_DPBUSD "%{evex%} vpdpbusd %2, %1, %0"
#else
#define P2_DPBUSD "%{vex%} vpdpbusd %2, %1, %0"
#endif

#define P2_ROWS 8 /* rows per ymm: half a stored panel */
#ifndef P2_NT16
#define P2_NT16 4 /* tokens per 16-row tile: with VNNI 8 int32 dots + two weights + a broadcast;
                   * the 8 float sums live in memory between sub-blocks. Without VNNI the int16
                   * sums come on top and 4 tokens spill a few of them, yet 4-token tiles
                   * measured faster than 3 + 1 or 2 + 2 (Zen 3, 4 tokens of Q5_0 over 255 MB:
                   * 26.4 ms; the 8-row tile had to split such calls for its spills) */
#endif
#define P2_FEW 16 /* up to this many tokens, the streaming driver */
/* tokens per prepared activation tile (struct pn_act): two 16-row tiles of P2_NT16 */
#define P2_TW (2 * P2_NT16)
_Static_assert(P2_NT16 <= 4 && P2_TW <= PN_NT, "P2_DEFINE_RUN16's switch covers tiles of up to 4 "
               "tokens, and struct pn_act holds PN_NT tokens");

/* ---------------------------------------------------------------- weights of a half panel */

/* the 8 rows' (half h) codes of sub-block s, group g: unsigned (Q8_0: w + 128; Q4: 0..15) */
PN_INLINE __m256i p2_w(int fmt, const uint8_t *src, int h, int s, int g)
{
    if (fmt == PN_Q8_0) return _mm256_load_si256((const __m256i *)(src + 64 * (8 * s + g) + 32 * h));
    /* the split formats as pn_w (kern_panel_avx512.h) reads them: nibbles | high bits at bit 4 */
    const struct pn_st_group L = pn_st_group(fmt, s, g);
    const __m256i raw = _mm256_load_si256((const __m256i *)(src + 64 * L.line + 32 * h));
    const __m256i nib = _mm256_and_si256(L.high ? _mm256_srli_epi16(raw, 4) : raw, _mm256_set1_epi8(0x0F));
    if (!PN_ST_HIGH_BITS(fmt)) return nib;
    const __m256i hb = _mm256_load_si256((const __m256i *)(src + 64 * L.hline + 32 * h));
    const __m256i hs = L.hshift > 0 ? _mm256_slli_epi16(hb, L.hshift) : L.hshift < 0 ? _mm256_srli_epi16(hb, -L.hshift) : hb;
    return _mm256_or_si256(nib, _mm256_and_si256(hs, _mm256_set1_epi8((char)L.hmask)));
}

/* 8 fp16 in the low 16 bits of each dword, as floats */
PN_INLINE __m256 p2_lo16_ps(__m256i v)
{
    const __m256i p = _mm256_packus_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0xffff)), _mm256_setzero_si256());
    return _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_permute4x64_epi64(p, _MM_SHUFFLE(3, 1, 2, 0))));
}

/* the half's 8 rows' scale (mins = 0) or min scale (mins = 1) of sub-block s of the stored chunk
 * src of nbc blocks: Q4_K's from xs, the chunk's scales already as floats (p2_st_scales), the
 * others' fp16 d straight from the chunk (xs NULL) */
PN_INLINE __m256 p2_ws(int fmt, const uint8_t *src, const float *xs, int nbc, int h, int s, int mins)
{
    if (fmt == PN_Q4_K) return _mm256_load_ps(xs + PN_ROWS * (s + (mins ? PN_ST_NS : 0)) + P2_ROWS * h);
    const uint8_t *sc = src + (size_t)nbc * PN_ST_CODES(fmt);
    if (fmt == PN_Q6_K) { /* d x int8 scale, the product pn_pack_q6_K makes */
        const __m256 d = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sc + pn_st_q6k_d_off(s) + 16 * h)));
        const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(sc + pn_st_q6k_scale_off(s) + 8 * h)));
        return _mm256_mul_ps(d, _mm256_cvtepi32_ps(v));
    }
    if (fmt == PN_Q4_1 && mins) { /* -m, as pn_ws (kern_panel_avx512.h) */
        const __m128i m = _mm_load_si128((const __m128i *)(sc + pn_st_d_off(fmt, s) + 32 + 16 * h));
        return _mm256_xor_ps(_mm256_cvtph_ps(m), _mm256_set1_ps(-0.0f));
    }
    return _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sc + pn_st_d_off(fmt, s) + 16 * h)));
}

/* The same two reads from src as a struct pn_panel (st = 0: packed per call by kern_panel_rows.h,
 * every panel format) or as a stored chunk (st = 1). */
PN_INLINE __m256i p2_wx(int fmt, int st, const uint8_t *src, int h, int s, int g)
{
    if (!st) return _mm256_load_si256((const __m256i *)(((const struct pn_panel *)src)->q[s * PN_GS(fmt) + g] + 32 * h));
    return p2_w(fmt, src, h, s, g);
}
PN_INLINE __m256 p2_wsx(int fmt, int st, const uint8_t *src, const float *xs, int nbc, int h, int s, int mins)
{
    if (!st) {
        const struct pn_panel *P = (const struct pn_panel *)src;
        return _mm256_load_ps((mins ? P->m[s] : P->d[s]) + P2_ROWS * h);
    }
    return p2_ws(fmt, src, xs, nbc, h, s, mins);
}

/* Q4_K: the scales and mins of every sub-block of a stored chunk, both halves, as floats into xs
 * (2 * PN_ST_NS * PN_ROWS floats, 32-byte aligned; the layout pn_st_scales fills), each the
 * product pn_k4_scale makes (kern_panel_avx512.h: d x six-bit scale, dmin x six-bit min), with
 * the header words read and split once per super-block and half: once per chunk for all the
 * token tiles and both halves. */
PN_INLINE void p2_st_scales(const uint8_t *src, int nbc, float *xs)
{
    const __m256i k3f = _mm256_set1_epi32(0x3f3f3f3f), k0f = _mm256_set1_epi32(0x0f0f0f0f);
    const __m256i k30 = _mm256_set1_epi32(0x30303030), kff = _mm256_set1_epi32(0xff);
    for (int b = 0; b < nbc; b++)
        for (int h = 0; h < 2; h++) {
            const uint8_t *hdr = src + (size_t)nbc * PN_ST_CODES(PN_Q4_K) + 256 * b + 32 * h;
            const __m256i h0 = _mm256_load_si256((const __m256i *)hdr);
            const __m256i h1 = _mm256_load_si256((const __m256i *)(hdr + 64));
            const __m256i h2 = _mm256_load_si256((const __m256i *)(hdr + 128));
            const __m256i h3 = _mm256_load_si256((const __m256i *)(hdr + 192));
            const __m256 d = p2_lo16_ps(h0), dmin = p2_lo16_ps(_mm256_srli_epi32(h0, 16));
            const __m256i v[2][2] = {
                {_mm256_and_si256(h1, k3f),
                 _mm256_or_si256(_mm256_and_si256(h3, k0f), _mm256_and_si256(_mm256_srli_epi32(h1, 2), k30))},
                {_mm256_and_si256(h2, k3f),
                 _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(h3, 4), k0f),
                                 _mm256_and_si256(_mm256_srli_epi32(h2, 2), k30))}};
            for (int j = 0; j < 8; j++)
                for (int mins = 0; mins < 2; mins++) {
                    const __m256i q = _mm256_and_si256(_mm256_srli_epi32(v[mins][j >> 2], 8 * (j & 3)), kff);
                    _mm256_store_ps(xs + PN_ROWS * (8 * b + j + (mins ? PN_ST_NS : 0)) + P2_ROWS * h,
                                    _mm256_mul_ps(mins ? dmin : d, _mm256_cvtepi32_ps(q)));
                }
        }
}

/* ---------------------------------------------------------------- the dots */

/* The 4 activation bytes at p as one int32: p is any byte offset into a row of quantized
 * activations, so the load goes through memcpy (one unaligned mov) rather than a cast. */
PN_INLINE int32_t p2_load4(const void *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* acc + 4-byte dots of the 8 rows' unsigned codes w with the 4 activation bytes at p (VNNI). */
PN_INLINE __m256i p2_dot_vnni(__m256i acc, __m256i w, const void *p)
{
#if P2_VNNI
    const __m256i a = _mm256_set1_epi32(p2_load4(p));
    /* inline asm, as on AVX-512: gcc 12 wraps the intrinsic in register copies */
    __asm__(P2_DPBUSD : "+x"(acc) : "x"(w), "x"(a));
    return acc;
#else
    (void)w, (void)p;
    return acc;
#endif
}

/* int16 pair sums of the 8 rows' unsigned codes u (up to 63: P2_GROUPS16 bounds how many groups
 * add up) with the 4 bytes at p, added into acc16 */
PN_INLINE __m256i p2_dot16(__m256i acc16, __m256i u, const void *p)
{
    return _mm256_add_epi16(acc16, _mm256_maddubs_epi16(u, _mm256_set1_epi32(p2_load4(p))));
}

/* acc + 4-byte dots of the signed codes w (|w| in aw) with the 4 bytes at p (Q8_0, no VNNI) */
PN_INLINE __m256i p2_dot_sign(__m256i acc, __m256i aw, __m256i w, const void *p)
{
    const __m256i s = _mm256_sign_epi8(_mm256_set1_epi32(p2_load4(p)), w);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(aw, s), _mm256_set1_epi16(1)));
}

/* ---------------------------------------------------------------- token tile */

/* a[j]: token j's first activation byte of block b0 (its row A + j * as) */
PN_INLINE void p2_act_rows(int fmt, const uint8_t *A, size_t as, int64_t b0, int nt, const uint8_t **a)
{
    for (int j = 0; j < nt; j++) a[j] = A + (size_t)j * as + (size_t)b0 * PN_ABYTES(fmt) + PN_AHDR(fmt);
}

/* How many groups' vpmaddubsw int16 pair sums add up before they are widened: sums of unsigned
 * codes up to cmax with bytes of -127..127 are at most 2 x cmax x 127 a pair, so Q4 (15) lets a
 * sub-block's 8 groups add up (30480), Q5 (31) 4 groups (31496), Q6_K (63) 2 (32004). */
#define P2_GROUPS16(fmt) ((fmt) == PN_Q4_0 || (fmt) == PN_Q4_1 || (fmt) == PN_Q4_K ? 8 : (fmt) == PN_Q6_K ? 2 : 4)

/* Both halves (16 rows) x up to P2_NT16 tokens j0.. of S: acc[h][j] (half h's 8 rows of token j)
 * += the chunk's dots over its nbc blocks; per group two weight loads, and one broadcast per token
 * feeds two dots. fmt and nt are constants after inlining. next: where the caller reads after
 * this chunk (a chunk two steps on, or with one segment the stream two full chunks ahead), this
 * chunk's length of it prefetched a sub-block's share at a time, or NULL (as pn_tile). */
PN_INLINE void p2_tile16(int fmt, int st, const uint8_t *src, const float *xs, const uint8_t *next, int nbc,
                         const uint8_t *A, size_t as, int64_t b0, const struct pn_act *S, int j0,
                         int nt, __m256 acc[2][P2_NT16])
{
    const int GS = PN_GS(fmt), SPB = PN_SPB(fmt);
    /* as many lines as this chunk has: the drivers' next chunk is mostly as long (p2_many: the
     * same chunk of a later panel), or (one segment of p2_few) the stream a fixed distance
     * ahead; a short last chunk before a full one, with k > 8192 only, fetches part of it */
    const int nl = st && next ? (int)(pn_st_chunk_bytes(fmt, nbc) / 64) : 0;
    const uint8_t *a[P2_NT16];
    p2_act_rows(fmt, A, as, b0, nt, a);
    for (int b = 0; b < nbc; b++) {
        for (int sb = 0; sb < SPB; sb++) {
            const int s = b * SPB + sb;
            pn_prefetch_share(next, nl, nbc * SPB, s, 0);
            const size_t ao = (size_t)b * PN_ABYTES(fmt) + 4 * (size_t)(sb * GS);
            __m256i x[2][P2_NT16];
            for (int j = 0; j < nt; j++)
                x[0][j] = x[1][j] = P2_VNNI || fmt != PN_Q8_0 ? _mm256_set1_epi32(S->init[j0 + j][s]) : _mm256_setzero_si256();
#if P2_VNNI
            for (int g = 0; g < GS; g++) {
                const __m256i w0 = p2_wx(fmt, st, src, 0, s, g), w1 = p2_wx(fmt, st, src, 1, s, g);
                for (int j = 0; j < nt; j++) {
                    const __m256i av = _mm256_set1_epi32(p2_load4(a[j] + ao + 4 * g));
                    __asm__(P2_DPBUSD : "+x"(x[0][j]) : "x"(w0), "x"(av));
                    __asm__(P2_DPBUSD : "+x"(x[1][j]) : "x"(w1), "x"(av));
                }
            }
#else /* vpmaddubsw: int16 sums of P2_GROUPS16 groups, then widened into the int32 dot */
            const int W = P2_GROUPS16(fmt);
            __m256i y[2][P2_NT16];
            for (int j = 0; j < nt; j++) y[0][j] = y[1][j] = _mm256_setzero_si256();
            /* unrolled, so that pn_st_group's line and nibble half are constants: rolled, two
             * tokens took 18.6 ms per 256 MB of Q4_0 in cache, unrolled 14.9 */
#pragma GCC unroll 8
            for (int g = 0; g < GS; g++) {
                const __m256i w0 = p2_wx(fmt, st, src, 0, s, g), w1 = p2_wx(fmt, st, src, 1, s, g);
                if (fmt == PN_Q8_0) {
                    const __m256i s0 = _mm256_xor_si256(w0, _mm256_set1_epi8((char)0x80));
                    const __m256i s1 = _mm256_xor_si256(w1, _mm256_set1_epi8((char)0x80));
                    const __m256i aw0 = _mm256_abs_epi8(s0), aw1 = _mm256_abs_epi8(s1);
                    for (int j = 0; j < nt; j++) {
                        x[0][j] = p2_dot_sign(x[0][j], aw0, s0, a[j] + ao + 4 * g);
                        x[1][j] = p2_dot_sign(x[1][j], aw1, s1, a[j] + ao + 4 * g);
                    }
                    continue;
                }
                for (int j = 0; j < nt; j++) {
                    y[0][j] = p2_dot16(y[0][j], w0, a[j] + ao + 4 * g);
                    y[1][j] = p2_dot16(y[1][j], w1, a[j] + ao + 4 * g);
                }
                if ((g + 1) % W == 0 || g == GS - 1)
                    for (int h = 0; h < 2; h++)
                        for (int j = 0; j < nt; j++) {
                            x[h][j] = _mm256_add_epi32(x[h][j], _mm256_madd_epi16(y[h][j], _mm256_set1_epi16(1)));
                            y[h][j] = _mm256_setzero_si256();
                        }
            }
#endif
            for (int h = 0; h < 2; h++) {
                const __m256 dw = p2_wsx(fmt, st, src, xs, nbc, h, s, 0);
                for (int j = 0; j < nt; j++)
                    acc[h][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(x[h][j]),
                                                _mm256_mul_ps(dw, _mm256_set1_ps(S->da[j0 + j][s])), acc[h][j]);
                if (PN_HAS_MIN(fmt)) {
                    const __m256 dm = p2_wsx(fmt, st, src, xs, nbc, h, s, 1);
                    for (int j = 0; j < nt; j++)
                        acc[h][j] = _mm256_fnmadd_ps(dm, _mm256_set1_ps(S->am[j0 + j][s]), acc[h][j]);
                }
            }
        }
    }
}

/* p2_tile1's sub-block s (of the chunk's blocks; ap: its first activation byte): acc[h] += half
 * h's dots of it. The npf lines at pf (the next chunk's share, or none) are prefetched spread over
 * the group pairs: for Q8_0, whose 8-9 lines a sub-block came at its start before, one token
 * over 255 MB on Zen 3 went 14.3-14.5 -> 13.4-13.6 ms; the same for Q5_0, Q4_K and Q6_K was
 * slower (15 -> 21, 16 -> 19.5, 15 -> 34 ms), so they prefetch before the sub-block. */
PN_INLINE void p2_tile1_sub(int fmt, const uint8_t *src, const float *xs, int nbc, const uint8_t *ap,
                            const struct pn_act *S, int s, __m256 acc[2], const uint8_t *pf, int npf)
{
    const int GS = PN_GS(fmt);
    __m256i x[2], y[2], z[2];
    for (int h = 0; h < 2; h++) {
        x[h] = _mm256_set1_epi32(P2_VNNI || fmt != PN_Q8_0 ? S->init[0][s] : 0);
        y[h] = z[h] = _mm256_setzero_si256();
    }
    for (int g = 0; g < GS; g += 2) {
        pn_prefetch_share(pf, npf, GS / 2, g / 2, 0);
        for (int h = 0; h < 2; h++) {
            const __m256i w0 = p2_w(fmt, src, h, s, g), w1 = p2_w(fmt, src, h, s, g + 1);
            if (P2_VNNI) {
                x[h] = p2_dot_vnni(x[h], w0, ap + 4 * g);
                y[h] = p2_dot_vnni(y[h], w1, ap + 4 * g + 4);
            } else if (fmt == PN_Q8_0) {
                const __m256i s0 = _mm256_xor_si256(w0, _mm256_set1_epi8((char)0x80));
                const __m256i s1 = _mm256_xor_si256(w1, _mm256_set1_epi8((char)0x80));
                x[h] = p2_dot_sign(x[h], _mm256_abs_epi8(s0), s0, ap + 4 * g);
                y[h] = p2_dot_sign(y[h], _mm256_abs_epi8(s1), s1, ap + 4 * g + 4);
            } else if (fmt == PN_Q5_0 || fmt == PN_Q6_K) { /* int16 sums of at most P2_GROUPS16 groups each, widened below */
                z[h] = p2_dot16(z[h], w0, ap + 4 * g);
                y[h] = p2_dot16(y[h], w1, ap + 4 * g + 4);
            } else {
                y[h] = p2_dot16(y[h], w0, ap + 4 * g); /* int16 sums, widened below */
                y[h] = p2_dot16(y[h], w1, ap + 4 * g + 4);
            }
        }
    }
    for (int h = 0; h < 2; h++) {
        __m256i xs32 = !P2_VNNI && fmt != PN_Q8_0
                           ? _mm256_add_epi32(x[h], _mm256_madd_epi16(y[h], _mm256_set1_epi16(1)))
                           : _mm256_add_epi32(x[h], y[h]);
        if (!P2_VNNI && (fmt == PN_Q5_0 || fmt == PN_Q6_K))
            xs32 = _mm256_add_epi32(xs32, _mm256_madd_epi16(z[h], _mm256_set1_epi16(1)));
        const __m256 dw = p2_ws(fmt, src, xs, nbc, h, s, 0);
        acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(xs32), _mm256_mul_ps(dw, _mm256_set1_ps(S->da[0][s])), acc[h]);
        if (PN_HAS_MIN(fmt))
            acc[h] = _mm256_fnmadd_ps(p2_ws(fmt, src, xs, nbc, h, s, 1), _mm256_set1_ps(S->am[0][s]), acc[h]);
    }
}

/* One token, both halves of the panel in one pass (decode: the chunk is read once, and four
 * dependency chains of dots run instead of two): acc[h] += half h's dots, each lane the same
 * float operations as p2_tile16's. Q6_K's 16 sub-blocks a block are unrolled: their weights'
 * line, shift and nibble half (pn_st_group) are then constants, where a loop computes and
 * branches on them per group (one token over 255 MB of Q6_K on Zen 3: 35 -> 24 ms). Q4_K's 8
 * are not: unrolled they ran slower (24 -> 26 ms). next: where to prefetch, nl lines of it
 * spread over the chunk's sub-blocks (how many and from where is p2_few's choice), or NULL. */
PN_INLINE void p2_tile1(int fmt, const uint8_t *src, const float *xs, const uint8_t *next, int nl,
                        int nbc, const uint8_t *A, int64_t b0, const struct pn_act *S, __m256 acc[2])
{
    const int GS = PN_GS(fmt), SPB = PN_SPB(fmt);
    if (!next) nl = 0;
    const uint8_t *a = A + (size_t)b0 * PN_ABYTES(fmt) + PN_AHDR(fmt);
    for (int b = 0; b < nbc; b++) {
        const uint8_t *ab = a + (size_t)b * PN_ABYTES(fmt);
        if (fmt == PN_Q8_0) { /* its share spread over the group pairs (p2_tile1_sub) */
            const int s = b, l0 = s * nl / nbc;
            p2_tile1_sub(fmt, src, xs, nbc, ab, S, s, acc, nl ? next + 64 * (size_t)l0 : NULL, (s + 1) * nl / nbc - l0);
        } else if (fmt == PN_Q6_K) {
#pragma GCC unroll 16
            for (int sb = 0; sb < SPB; sb++) {
                pn_prefetch_share(next, nl, nbc * SPB, b * SPB + sb, 0);
                p2_tile1_sub(fmt, src, xs, nbc, ab + 4 * (size_t)(sb * GS), S, b * SPB + sb, acc, NULL, 0);
            }
        } else {
            for (int sb = 0; sb < SPB; sb++) {
                pn_prefetch_share(next, nl, nbc * SPB, b * SPB + sb, 0);
                p2_tile1_sub(fmt, src, xs, nbc, ab + 4 * (size_t)(sb * GS), S, b * SPB + sb, acc, NULL, 0);
            }
        }
    }
}

/* Lanes [lo, hi) of 8 as a maskload / maskstore mask. */
PN_INLINE __m256i p2_mask(int lo, int hi)
{
    const __m256i i = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(hi), i),
                            _mm256_cmpgt_epi32(i, _mm256_set1_epi32(lo - 1)));
}

/* Both halves of one stored panel chunk x tokens j0..j0+nt of S, accumulated into Y (first
 * chunk: stored): Y points at the panel's first row of token j0; rows [lo, hi) of 16 written. */
PN_INLINE void p2_panel_tokens(int fmt, int st, const uint8_t *src, const float *xs, const uint8_t *next,
                               int nbc, const uint8_t *A, size_t as, int64_t b0,
                               const struct pn_act *S, int j0, int nt, float *Y, int64_t ldy, int lo,
                               int hi, int first)
{
    __m256 acc[2][P2_NT16];
    int l[2], e[2];
    for (int h = 0; h < 2; h++) {
        l[h] = lo - P2_ROWS * h < 0 ? 0 : lo - P2_ROWS * h;
        e[h] = hi - P2_ROWS * h > P2_ROWS ? P2_ROWS : hi - P2_ROWS * h;
        for (int j = 0; j < nt; j++)
            acc[h][j] = first || l[h] >= e[h]           ? _mm256_setzero_ps()
                        : l[h] == 0 && e[h] == P2_ROWS ? _mm256_loadu_ps(Y + j * ldy + P2_ROWS * h)
                                                       : _mm256_maskload_ps(Y + j * ldy + P2_ROWS * h, p2_mask(l[h], e[h]));
    }
    p2_tile16(fmt, st, src, xs, next, nbc, A, as, b0, S, j0, nt, acc);
    for (int h = 0; h < 2; h++) {
        if (l[h] >= e[h]) continue;
        for (int j = 0; j < nt; j++) {
            if (l[h] == 0 && e[h] == P2_ROWS)
                _mm256_storeu_ps(Y + j * ldy + P2_ROWS * h, acc[h][j]);
            else
                _mm256_maskstore_ps(Y + j * ldy + P2_ROWS * h, p2_mask(l[h], e[h]), acc[h][j]);
        }
    }
}

/* One token, the whole panel (both halves) of one stored chunk, accumulated into Y (first chunk:
 * stored): Y points at the panel's first row; rows [lo, hi) of its 16 are written. */
PN_INLINE void p2_panel_1tok(int fmt, const uint8_t *src, const float *xs, const uint8_t *next,
                             int nl, int nbc, const uint8_t *A, int64_t b0, const struct pn_act *S,
                             float *Y, int lo, int hi, int first)
{
    __m256 acc[2];
    for (int h = 0; h < 2; h++) {
        const int l = lo - P2_ROWS * h < 0 ? 0 : lo - P2_ROWS * h, e = hi - P2_ROWS * h > P2_ROWS ? P2_ROWS : hi - P2_ROWS * h;
        acc[h] = first || l >= e ? _mm256_setzero_ps()
                 : l == 0 && e == P2_ROWS ? _mm256_loadu_ps(Y + P2_ROWS * h)
                                           : _mm256_maskload_ps(Y + P2_ROWS * h, p2_mask(l, e));
    }
    p2_tile1(fmt, src, xs, next, nl, nbc, A, b0, S, acc);
    for (int h = 0; h < 2; h++) {
        const int l = lo - P2_ROWS * h < 0 ? 0 : lo - P2_ROWS * h, e = hi - P2_ROWS * h > P2_ROWS ? P2_ROWS : hi - P2_ROWS * h;
        if (l >= e) continue;
        if (l == 0 && e == P2_ROWS)
            _mm256_storeu_ps(Y + P2_ROWS * h, acc[h]);
        else
            _mm256_maskstore_ps(Y + P2_ROWS * h, p2_mask(l, e), acc[h]);
    }
}

/* name##_run16: p2_panel_tokens for fmt, one copy per tile width. */
#define P2_DEFINE_RUN16(name, fmt, st)                                                          \
    static void name##_run16(const uint8_t *src, const float *xs, const uint8_t *next, int nbc, \
                             const uint8_t *A, size_t as, int64_t b0, const struct pn_act *S,   \
                             int j0, int nt, float *Y, int64_t ldy, int lo, int hi, int first)  \
    {                                                                                           \
        switch (nt) {                                                                           \
        case 4: p2_panel_tokens(fmt, st, src, xs, next, nbc, A, as, b0, S, j0, 4, Y, ldy, lo, hi, first); break; \
        case 3: p2_panel_tokens(fmt, st, src, xs, next, nbc, A, as, b0, S, j0, 3, Y, ldy, lo, hi, first); break; \
        case 2: p2_panel_tokens(fmt, st, src, xs, next, nbc, A, as, b0, S, j0, 2, Y, ldy, lo, hi, first); break; \
        default: p2_panel_tokens(fmt, st, src, xs, next, nbc, A, as, b0, S, j0, 1, Y, ldy, lo, hi, first); break; \
        }                                                                                       \
    }

/* ---------------------------------------------------------------- drivers
 * As kern_packed_avx512.c's, through p2_panel_step (16-row tiles of up to P2_NT16 tokens): up
 * to P2_FEW tokens the activations of a segment of P2_SEG chunks are prepared once and each
 * panel's chunks are read in memory order (a chunk's second tile reads it from L1), prefetching
 * P2_AHEAD chunks ahead (with one segment, k <= 8192, the whole copy is one stream and the
 * prefetch runs P2_AHEAD full chunks ahead of it); more tokens take row blocks of P2_MB panels
 * whose chunks stay in L2 while the token tiles take them. */
#ifndef P2_MB
#define P2_MB 32 /* panels per row block with many tokens (a 512-row block's chunk: 278 KB of Q8_0) */
#endif
#ifndef P2_SEG
#define P2_SEG 16 /* chunks per segment of the few-token driver (8192 elements of k: one
                   * segment, so one pass through the copy, for every matrix of the 0.5B-3B shapes;
                   * 8 made k = 4864 two strided passes: 1 token 12.6 ms per 256 MB) */
#endif
#ifndef P2_AHEAD
#define P2_AHEAD 2
#endif
#define P2_TILES ((P2_FEW + P2_TW - 1) / P2_TW)

/* name##_run1: p2_panel_1tok for fmt (one token over a stored chunk). */
#define P2_DEFINE_RUN1(name, fmt)                                                               \
    static void name##_run1(const uint8_t *src, const float *xs, const uint8_t *next, int nl,   \
                            int nbc, const uint8_t *A, int64_t b0, const struct pn_act *S,      \
                            float *Y, int lo, int hi, int first)                                \
    {                                                                                           \
        p2_panel_1tok(fmt, src, xs, next, nl, nbc, A, b0, S, Y, lo, hi, first);                 \
    }
P2_DEFINE_RUN1(p2_q8_0, PN_Q8_0)
P2_DEFINE_RUN1(p2_q4_0, PN_Q4_0)
P2_DEFINE_RUN1(p2_q4_1, PN_Q4_1)
P2_DEFINE_RUN1(p2_q5_0, PN_Q5_0)
P2_DEFINE_RUN1(p2_q6_K, PN_Q6_K)
P2_DEFINE_RUN1(p2_q4_K, PN_Q4_K)
P2_DEFINE_RUN16(p2_q8_0, PN_Q8_0, 1)
P2_DEFINE_RUN16(p2_q4_0, PN_Q4_0, 1)
P2_DEFINE_RUN16(p2_q4_1, PN_Q4_1, 1)
P2_DEFINE_RUN16(p2_q5_0, PN_Q5_0, 1)
P2_DEFINE_RUN16(p2_q6_K, PN_Q6_K, 1)
P2_DEFINE_RUN16(p2_q4_K, PN_Q4_K, 1)
PN_INLINE void p2_run16(int fmt, const uint8_t *src, const float *xs, const uint8_t *next, int nbc,
                        const uint8_t *A, size_t as, int64_t b0, const struct pn_act *S, int j0,
                        int nt, float *Y, int64_t ldy, int lo, int hi, int first)
{
    if (fmt == PN_Q8_0) p2_q8_0_run16(src, xs, next, nbc, A, as, b0, S, j0, nt, Y, ldy, lo, hi, first);
    if (fmt == PN_Q4_0) p2_q4_0_run16(src, xs, next, nbc, A, as, b0, S, j0, nt, Y, ldy, lo, hi, first);
    if (fmt == PN_Q4_1) p2_q4_1_run16(src, xs, next, nbc, A, as, b0, S, j0, nt, Y, ldy, lo, hi, first);
    if (fmt == PN_Q5_0) p2_q5_0_run16(src, xs, next, nbc, A, as, b0, S, j0, nt, Y, ldy, lo, hi, first);
    if (fmt == PN_Q6_K) p2_q6_K_run16(src, xs, next, nbc, A, as, b0, S, j0, nt, Y, ldy, lo, hi, first);
    if (fmt == PN_Q4_K) p2_q4_K_run16(src, xs, next, nbc, A, as, b0, S, j0, nt, Y, ldy, lo, hi, first);
}

/* One stored panel chunk src x the nt (<= P2_TW) tokens of the prepared tile S (activations
 * At, Y at the tile's first token), rows [r0, r1): 16-row tiles of P2_NT16 tokens. next is
 * prefetched by the first tile. */
PN_INLINE void p2_panel_step(int fmt, const uint8_t *src, const float *xs, const uint8_t *next,
                             int nbc, int64_t p, const uint8_t *At, size_t as, int64_t b0,
                             const struct pn_act *S, int nt, float *Y, int64_t ldy, int64_t r0,
                             int64_t r1, int first)
{
    const int lo = r0 > p * PN_ROWS ? (int)(r0 - p * PN_ROWS) : 0;
    const int hi = r1 - p * PN_ROWS < PN_ROWS ? (int)(r1 - p * PN_ROWS) : PN_ROWS;
    for (int j0 = 0; j0 < nt; j0 += P2_NT16)
        p2_run16(fmt, src, xs, j0 == 0 ? next : NULL, nbc, At + (size_t)j0 * as, as, b0, S, j0,
                 nt - j0 < P2_NT16 ? nt - j0 : P2_NT16, Y + (size_t)j0 * ldy + p * PN_ROWS, ldy, lo, hi, first);
}

PN_INLINE void p2_few(int fmt, const uint8_t *P, const uint8_t *A, size_t as, int n_tok, int64_t k,
                      int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    struct pn_act S[P2_SEG][P2_TILES];
    float xs[2 * PN_ST_NS * PN_ROWS] __attribute__((aligned(32))); /* Q4_K's scales of one chunk */
    const int bpc = PN_KC / PN_BLK(fmt);
    const int64_t nb = k / PN_BLK(fmt), nch = (nb + bpc - 1) / bpc;
    const size_t pbytes = pn_st_panel_bytes(fmt, k), cfull = pn_st_chunk_bytes(fmt, bpc);
    const int64_t p0 = r0 / PN_ROWS, p1 = (r1 + PN_ROWS - 1) / PN_ROWS;
    for (int64_t cs = 0; cs < nch; cs += P2_SEG) {
        const int nseg = nch - cs < P2_SEG ? (int)(nch - cs) : P2_SEG;
        for (int ci = 0; ci < nseg; ci++) {
            const int64_t b0 = (cs + ci) * bpc;
            const int nbc = nb - b0 < bpc ? (int)(nb - b0) : bpc;
            for (int t = 0, u = 0; t < n_tok; t += P2_TW, u++)
                pn_act_prepare(fmt, A + (size_t)t * as, as, n_tok - t < P2_TW ? n_tok - t : P2_TW, b0, nbc,
                               &S[ci][u]);
        }
        for (int64_t p = p0; p < p1; p++)
            for (int ci = 0; ci < nseg; ci++) {
                const int64_t c = cs + ci, b0 = c * bpc;
                const int nbc = nb - b0 < bpc ? (int)(nb - b0) : bpc;
                const uint8_t *src = P + (size_t)p * pbytes + (size_t)c * cfull;
                const int64_t ahead = (p - p0) * nseg + ci + P2_AHEAD;
                const uint8_t *next = P + (size_t)(p0 + ahead / nseg) * pbytes + (size_t)(cs + ahead % nseg) * cfull;
                if (fmt == PN_Q4_K) p2_st_scales(src, nbc, xs);
                /* one segment: the copy is read in memory order, so the prefetch runs a fixed
                 * distance ahead and takes as many lines as this chunk has (p2_tile16 too): a short
                 * last chunk (Gemma 3's k = 640: 512 + 128) fetched a whole chunk's lines in its
                 * few sub-blocks, in bursts again */
                const uint8_t *next1 = nseg == nch ? src + P2_AHEAD * cfull : next;
                if (n_tok == 1) {
                    const int nl1 = (int)((nseg == nch ? pn_st_chunk_bytes(fmt, nbc) : cfull) + 63) / 64;
                    const int lo = r0 > p * PN_ROWS ? (int)(r0 - p * PN_ROWS) : 0;
                    const int hi = r1 - p * PN_ROWS < PN_ROWS ? (int)(r1 - p * PN_ROWS) : PN_ROWS;
                    float *Yp = Y + p * PN_ROWS;
                    const float *xq = fmt == PN_Q4_K ? xs : NULL;
                    if (fmt == PN_Q8_0) p2_q8_0_run1(src, xq, next1, nl1, nbc, A, b0, &S[ci][0], Yp, lo, hi, c == 0);
                    if (fmt == PN_Q4_0) p2_q4_0_run1(src, xq, next1, nl1, nbc, A, b0, &S[ci][0], Yp, lo, hi, c == 0);
                    if (fmt == PN_Q4_1) p2_q4_1_run1(src, xq, next1, nl1, nbc, A, b0, &S[ci][0], Yp, lo, hi, c == 0);
                    if (fmt == PN_Q5_0) p2_q5_0_run1(src, xq, next1, nl1, nbc, A, b0, &S[ci][0], Yp, lo, hi, c == 0);
                    if (fmt == PN_Q6_K) p2_q6_K_run1(src, xq, next1, nl1, nbc, A, b0, &S[ci][0], Yp, lo, hi, c == 0);
                    if (fmt == PN_Q4_K) p2_q4_K_run1(src, xq, next1, nl1, nbc, A, b0, &S[ci][0], Yp, lo, hi, c == 0);
                    continue;
                }
                for (int t = 0, u = 0; t < n_tok; t += P2_TW, u++)
                    p2_panel_step(fmt, src, fmt == PN_Q4_K ? xs : NULL, t == 0 ? next1 : NULL, nbc, p, A + (size_t)t * as,
                                  as, b0, &S[ci][u], n_tok - t < P2_TW ? n_tok - t : P2_TW, Y + (size_t)t * ldy, ldy,
                                  r0, r1, c == 0);
            }
    }
}

PN_INLINE void p2_many(int fmt, const uint8_t *P, const uint8_t *A, size_t as, int n_tok, int64_t k,
                       int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    struct pn_act S;
    /* Q4_K's unpacked scales (64 KB, untouched for the other formats) */
    float xs[P2_MB][2 * PN_ST_NS * PN_ROWS] __attribute__((aligned(32)));
    const int bpc = PN_KC / PN_BLK(fmt);
    const int64_t nb = k / PN_BLK(fmt);
    const size_t pbytes = pn_st_panel_bytes(fmt, k), cfull = pn_st_chunk_bytes(fmt, bpc);
    const int expand = fmt == PN_Q4_K;
    const int64_t p0 = r0 / PN_ROWS, p1 = (r1 + PN_ROWS - 1) / PN_ROWS;
    for (int64_t pb = p0; pb < p1; pb += P2_MB) {
        const int64_t pe = pb + P2_MB < p1 ? pb + P2_MB : p1;
        int64_t c = 0;
        for (int64_t b0 = 0; b0 < nb; b0 += bpc, c++) {
            const int nbc = nb - b0 < bpc ? (int)(nb - b0) : bpc;
            if (expand)
                for (int64_t p = pb; p < pe; p++) p2_st_scales(P + (size_t)p * pbytes + (size_t)c * cfull, nbc, xs[p - pb]);
            for (int t = 0; t < n_tok; t += P2_TW) {
                const int nt = n_tok - t < P2_TW ? n_tok - t : P2_TW;
                const uint8_t *At = A + (size_t)t * as;
                pn_act_prepare(fmt, At, as, nt, b0, nbc, &S);
                for (int64_t p = pb; p < pe; p++) {
                    const uint8_t *src = P + (size_t)p * pbytes + (size_t)c * cfull;
                    /* the chunk P2_AHEAD steps on (panels, then the next chunk), fetched by the
                     * first tile: the later ones find the row block in L2 */
                    const int64_t ahead = (p - pb) + P2_AHEAD;
                    const uint8_t *next = P + (size_t)(pb + ahead % (pe - pb)) * pbytes + (size_t)(c + ahead / (pe - pb)) * cfull;
                    p2_panel_step(fmt, src, expand ? xs[p - pb] : NULL, t == 0 ? next : NULL, nbc, p, At, as, b0, &S,
                                  nt, Y + (size_t)t * ldy, ldy, r0, r1, b0 == 0);
                }
            }
        }
    }
}

/* ---------------------------------------------------------------- panels packed per call
 * Weights with no stored copy (Q5_1 and Q5_K, which have no stored layout, and the stored
 * formats loaded mmap-only): as kern_panel_avx512.c's driver, each k chunk of a row block
 * of P2_PMB panels is packed row by row into struct pn_panel (kern_panel_rows.h: the same bytes
 * and scales as on AVX-512), then every token tile runs the 16-row tile over it. The packing is
 * paid once per chunk for all the call's tokens, so kern_matmul routes here only from
 * p2_panel_min_tok tokens on. Rows start at r0 (a panel's row i is row r + i). */
#ifndef P2_PMB
#define P2_PMB 8 /* panels per row block: 96 KB of panels on the stack, kept in L2 */
#endif

#define P2_PANEL_RUN(name, fmt) P2_DEFINE_RUN16(name, fmt, 0)
#define P2_PANEL_STEP(name, P, At, nt, Yt, nrow, first)                                         \
    for (int j0 = 0; j0 < (nt); j0 += P2_NT16)                                                  \
        name##_run16((const uint8_t *)(P), NULL, NULL, nbc, (At) + (size_t)j0 * as, as, b0, &S, j0, \
                     (nt) - j0 < P2_NT16 ? (nt) - j0 : P2_NT16, (Yt) + (size_t)j0 * ldy, ldy, 0, (nrow), (first))

#define P2_DEFINE_PANEL(name, fmt, packer)                                                      \
    P2_PANEL_RUN(name, fmt)                                                                     \
    static void name##_pmatmul(const void *W, size_t ws, const void *A, size_t as, int n_tok,  \
                               int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)       \
    {                                                                                           \
        struct pn_panel panels[P2_PMB] __attribute__((aligned(64)));                           \
        struct pn_act S;                                                                        \
        const int bpc = PN_KC / PN_BLK(fmt);                                                    \
        const int64_t nb = k / PN_BLK(fmt);                                                     \
        for (int64_t rb = r0; rb < r1; rb += P2_PMB * PN_ROWS) {                                \
            const int64_t rb_end = rb + P2_PMB * PN_ROWS < r1 ? rb + P2_PMB * PN_ROWS : r1;     \
            const int np = (int)((rb_end - rb + PN_ROWS - 1) / PN_ROWS);                        \
            for (int64_t b0 = 0; b0 < nb; b0 += bpc) {                                          \
                const int nbc = nb - b0 < bpc ? (int)(nb - b0) : bpc;                           \
                for (int p = 0; p < np; p++) {                                                  \
                    const int64_t r = rb + (int64_t)p * PN_ROWS;                                \
                    pn_pack_rows(packer, fmt, &panels[p], (const uint8_t *)W, ws, r,            \
                                 rb_end - r < PN_ROWS ? (int)(rb_end - r) : PN_ROWS, b0, nbc);  \
                }                                                                               \
                for (int t = 0; t < n_tok; t += P2_TW) {                                        \
                    const int nt = n_tok - t < P2_TW ? n_tok - t : P2_TW;                       \
                    const uint8_t *At = (const uint8_t *)A + (size_t)t * as;                    \
                    pn_act_prepare(fmt, At, as, nt, b0, nbc, &S);                               \
                    for (int p = 0; p < np; p++) {                                              \
                        const int64_t r = rb + (int64_t)p * PN_ROWS;                            \
                        const int nrow = rb_end - r < PN_ROWS ? (int)(rb_end - r) : PN_ROWS;    \
                        P2_PANEL_STEP(name, &panels[p], At, nt, Y + (size_t)t * ldy + r, nrow, b0 == 0); \
                    }                                                                           \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }

/* the stored formats mmap-only (--no-repack) with VNNI only: each panel format is a dozen tile
 * copies, and without VNNI that made this file take minutes under clang's sanitizers (CI) */
#if P2_VNNI
P2_DEFINE_PANEL(p2_p_q8_0, PN_Q8_0, pn_pack_q8_0)
P2_DEFINE_PANEL(p2_p_q4_0, PN_Q4_0, pn_pack_q4_0)
P2_DEFINE_PANEL(p2_p_q4_K, PN_Q4_K, pn_pack_q4_K)
#endif
/* Q5_0 and Q6_K on both variants: mmap-only, and the tiles p2_many_unpacked runs over their
 * stored copies' unpacked chunks */
P2_DEFINE_PANEL(p2_p_q5_0, PN_Q5_0, pn_pack_q5_0)
P2_DEFINE_PANEL(p2_p_q5_1, PN_Q5_1, pn_pack_q5_1)
P2_DEFINE_PANEL(p2_p_q4_1, PN_Q4_1, pn_pack_q4_1) /* Q5_1's panel and tile, codes 0..15 */
P2_DEFINE_PANEL(p2_p_q5_K, PN_Q5_K, pn_pack_q5_K)
P2_DEFINE_PANEL(p2_p_q6_K, PN_Q6_K, pn_pack_q6_K)

/* Many tokens over a stored Q5_0, Q6_K or Q4_1 copy. Their codes cost six instructions a half panel
 * and group to put together (p2_w), which the 256-bit tiles would pay once per token tile:
 * Q5_0 prefill 896 x 4864 at 512 tokens, one thread, 293 GOP/s with VNNI against the per-call
 * panels' 359 (182 against 203 without). So each row block's chunk is first unpacked into
 * struct pn_panel (the bytes and scales the per-call packers make from the rows) and the
 * per-call panels' tile runs over it: the unpacking is paid once per chunk, as the per-call
 * packing is, without reading the rows (Q5_0: 364 and 208 GOP/s). Q4_1's codes are Q4_0's, but
 * its fp16 scales and mins cost as much per token tile (Sapphire Rapids: 242 and 146 GOP/s read in
 * place, 263-276 and 161-169 unpacked, the per-call panels 257-264 and 156-158). */
PN_INLINE void p2_unpack(int fmt, const uint8_t *src, int nbc, struct pn_panel *P)
{
    for (int s = 0; s < nbc * PN_SPB(fmt); s++) {
        for (int g = 0; g < PN_GS(fmt); g++)
            for (int h = 0; h < 2; h++)
                _mm256_store_si256((__m256i *)(P->q[PN_GS(fmt) * s + g] + 32 * h), p2_w(fmt, src, h, s, g));
        for (int h = 0; h < 2; h++) {
            _mm256_store_ps(P->d[s] + P2_ROWS * h, p2_ws(fmt, src, NULL, nbc, h, s, 0));
            if (PN_HAS_MIN(fmt)) _mm256_store_ps(P->m[s] + P2_ROWS * h, p2_ws(fmt, src, NULL, nbc, h, s, 1));
        }
    }
}

PN_INLINE void p2_many_unpacked(int fmt, const uint8_t *P, const uint8_t *A, size_t as, int n_tok, int64_t k,
                                int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    struct pn_panel panels[P2_PMB] __attribute__((aligned(64)));
    struct pn_act S;
    const int bpc = PN_KC / PN_BLK(fmt);
    const int64_t nb = k / PN_BLK(fmt);
    const size_t pbytes = pn_st_panel_bytes(fmt, k), cfull = pn_st_chunk_bytes(fmt, bpc);
    const int64_t p0 = r0 / PN_ROWS, p1 = (r1 + PN_ROWS - 1) / PN_ROWS;
    for (int64_t pb = p0; pb < p1; pb += P2_PMB) {
        const int64_t pe = pb + P2_PMB < p1 ? pb + P2_PMB : p1;
        int64_t c = 0;
        for (int64_t b0 = 0; b0 < nb; b0 += bpc, c++) {
            const int nbc = nb - b0 < bpc ? (int)(nb - b0) : bpc;
            for (int64_t p = pb; p < pe; p++) p2_unpack(fmt, P + (size_t)p * pbytes + (size_t)c * cfull, nbc, &panels[p - pb]);
            for (int t = 0; t < n_tok; t += P2_TW) {
                const int nt = n_tok - t < P2_TW ? n_tok - t : P2_TW;
                const uint8_t *At = A + (size_t)t * as;
                pn_act_prepare(fmt, At, as, nt, b0, nbc, &S);
                for (int64_t p = pb; p < pe; p++) {
                    const uint8_t *pp = (const uint8_t *)&panels[p - pb];
                    const int lo = r0 > p * PN_ROWS ? (int)(r0 - p * PN_ROWS) : 0;
                    const int hi = r1 - p * PN_ROWS < PN_ROWS ? (int)(r1 - p * PN_ROWS) : PN_ROWS;
                    for (int j0 = 0; j0 < nt; j0 += P2_NT16) {
                        const int n = nt - j0 < P2_NT16 ? nt - j0 : P2_NT16;
                        float *Yj = Y + (size_t)(t + j0) * ldy + p * PN_ROWS;
                        if (fmt == PN_Q4_1) p2_p_q4_1_run16(pp, NULL, NULL, nbc, At + (size_t)j0 * as, as, b0, &S, j0, n, Yj, ldy, lo, hi, b0 == 0);
                        if (fmt == PN_Q5_0) p2_p_q5_0_run16(pp, NULL, NULL, nbc, At + (size_t)j0 * as, as, b0, &S, j0, n, Yj, ldy, lo, hi, b0 == 0);
                        if (fmt == PN_Q6_K) p2_p_q6_K_run16(pp, NULL, NULL, nbc, At + (size_t)j0 * as, as, b0, &S, j0, n, Yj, ldy, lo, hi, b0 == 0);
                    }
                }
            }
        }
    }
}

/* Fewest tokens from which the per-call panels beat the 4 x 2 tiles of kern_avx2.c /
 * kern_q5_avx2.c (and, up to 4 tokens, the Q5 decode kernel), measured one thread, 896 x 4864,
 * CPU time, GOP/s tiles -> panels. With AVX-VNNI: Q5_0 at 3 tokens 60 -> 69; Q5_1 at 3 51 -> 63;
 * Q4_0 at 5, even at 4 (89); Q8_0 at 6 107 -> 115 (at 4 110 -> 87); Q6_K at 6 87 -> 104 (at 4
 * 87 -> 77); Q5_K at 8 101 -> 110; Q4_K, whose row-by-row packing is the dearest, at 8 124 ->
 * 109, so 12. With vpmaddubsw: Q5_0 at 6 66 -> 94, Q5_1 at 6 55 -> 86, Q4_0 at 6 85 -> 95,
 * Q5_K and Q8_0 at 12 (100 -> 110, 107 -> 117), Q4_K at 12 117 -> 112, so 16; at 64 tokens the
 * panels run 160-196 against 54-123. Q6_K's row-by-row packing is dear too: in cache the panels
 * won from 6-8 tokens (87 -> 101), but a real model's matrix comes from DRAM on every call, and
 * over 255 MB of Q6_K rows (Zen 3, `bench_smallm -k routed`, ms) the tiles take 105 at 8 tokens
 * against the panels' 158-164, 142 at 12 against 171-174, 182 at 16 against 188-197: a near tie
 * at 16, the highest threshold test_avx2_panels allows. (Q4_1, Q5_0, Q5_1 and Q5_K measured the
 * same way keep theirs: at 6 tokens 138 / 119 / 128 ms on the tiles against 117 / 92 / 94 on the
 * panels; Q5_K at 12 168 against 170.) */
PN_INLINE int p2_panel_min_tok(int wtype)
{
    switch (wtype) {
    case TERN_TYPE_Q5_0: case TERN_TYPE_Q5_1: case TERN_TYPE_Q4_1: return P2_VNNI ? 3 : 5;
    case TERN_TYPE_Q4_0: return P2_VNNI ? 5 : 6;
    case TERN_TYPE_Q8_0: return P2_VNNI ? 6 : 12;
    case TERN_TYPE_Q6_K: return P2_VNNI ? 6 : 16;
    case TERN_TYPE_Q5_K: return P2_VNNI ? 8 : 12;
    case TERN_TYPE_Q4_K: return P2_VNNI ? 12 : 16;
    default: return 1 << 30;
    }
}

PN_INLINE kern_matmul_fn p2_panel_matmul(int wtype)
{
    switch (wtype) {
#if P2_VNNI
    case TERN_TYPE_Q8_0: return p2_p_q8_0_pmatmul;
    case TERN_TYPE_Q4_0: return p2_p_q4_0_pmatmul;
    case TERN_TYPE_Q4_K: return p2_p_q4_K_pmatmul;
#endif
    case TERN_TYPE_Q5_0: return p2_p_q5_0_pmatmul;
    case TERN_TYPE_Q5_1: return p2_p_q5_1_pmatmul;
    case TERN_TYPE_Q4_1: return p2_p_q4_1_pmatmul;
    case TERN_TYPE_Q5_K: return p2_p_q5_K_pmatmul;
    case TERN_TYPE_Q6_K: return p2_p_q6_K_pmatmul;
    default: return NULL;
    }
}
/* The matmul over a stored copy P (kern_packed.h's contract for kern_matmul_packed) */
PN_INLINE void p2_matmul(int wtype, const void *P, const void *A, size_t as, int n_tok, int64_t k,
                         int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    TERN_ASSERT(r0 >= 0 && n_tok >= 1 && ((uintptr_t)P & 63) == 0,
                "the packed copy is 64-byte aligned (a range may cut a panel: its lanes are masked)");
    const int fmt = pn_st_fmt(wtype);
#define P2_CASE(f)                                                                              \
    case f:                                                                                     \
        if (n_tok <= P2_FEW)                                                                    \
            p2_few(f, P, A, as, n_tok, k, r0, r1, Y, ldy);                                      \
        else if (f == PN_Q4_1 || f == PN_Q5_0 || f == PN_Q6_K)                                 \
            p2_many_unpacked(f, P, A, as, n_tok, k, r0, r1, Y, ldy);                            \
        else                                                                                    \
            p2_many(f, P, A, as, n_tok, k, r0, r1, Y, ldy);                                     \
        break;
    switch (fmt) {
        P2_CASE(PN_Q8_0)
        P2_CASE(PN_Q4_0)
        P2_CASE(PN_Q4_1)
        P2_CASE(PN_Q5_0)
        P2_CASE(PN_Q6_K)
        P2_CASE(PN_Q4_K)
    default: break;
    }
#undef P2_CASE
}

#endif

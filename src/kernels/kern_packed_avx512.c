/* kern_packed_avx512.c — the matmul over Q8_0, Q4_0, Q4_1, Q5_0, Q4_K and Q6_K weights repacked
 * once (at model load, by kern_pack.c) into the layout the AVX-512 panels read. Compiled with the
 * AVX-512 flags; reached only through kern_dispatch.c (kern_packed.h) on the avx512 path.
 *
 * Read first: kern_panel_avx512.c (the panels, which repack on every call) and
 * kern_panel_layout.h (the stored layout, "stored layout", which kern_pack.c writes) and
 * kern_panel_avx512.h (the token tile both share).
 *
 * Why: a panel call repacks every weight row it reads, and that was paid on every prefill and
 * every batched decode step (perf, 22-token prefill, Qwen2.5-0.5B shape Q8_0: pn_pack16_q8_0 30 %
 * of the time beside 45 % in the tile). Here the rows are permuted once into 16-row panels;
 * the tile then reads 64-byte lines straight from the copy, one sequential stream per panel.
 * The copy keeps the format's bytes (codes, fp16 scales, Q4_K's packed six-bit scales), so it is
 * as large as the rows it came from, and the tile unpacks nibbles and scales per panel.
 *
 * The same tile as the on-the-fly panels (pn_tile with st = 1): per lane the same float
 * operations in the same order, so results are the panels' and the decode kernel's bits
 * (test_batch_invariance), whatever the number of tokens. That makes the copy the decode kernel
 * too: from 1 token on (PK_MIN_TOK), the original rows are not read after packing.
 *
 * A matrix of rows x k is stored panel after panel (panel p: rows 16p..16p+15; the last one
 * padded with copies of its first row, never stored), each panel chunk after chunk (PN_KC elements; pn_st_chunk_bytes). */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kern_packed.h"
#include "kernels/kern_panel_avx512.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include "tern.h"
#include "util/check.h"

/* ---------------------------------------------------------------- matmul over the copy */

#ifndef PK_MB
#define PK_MB 32 /* panels per row block with many tokens: a 512-row block's chunk, 278 KB of
                  * Q8_0, stays in L2 while the token tiles take it; 8 (as the on-the-fly panels)
                  * gave 531-569 GFLOP/s in bench_kernels where 32 gave 558-632 (same minutes) */
#endif
#ifndef PK_SEG
#define PK_SEG 16 /* chunks per segment of the few-token driver (8192 elements of k) */
#endif
#ifndef PK_AHEAD
#define PK_AHEAD 2
#endif

/* The rows of panel p inside [r0, r1), as a lane mask. */
static inline __mmask16 pk_rows(int64_t p, int64_t r0, int64_t r1)
{
    const int64_t lo = r0 > p * PN_ROWS ? r0 - p * PN_ROWS : 0;
    const int64_t hi = r1 - p * PN_ROWS < PN_ROWS ? r1 - p * PN_ROWS : PN_ROWS;
    return (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));
}

/* The driver. Up to 16 tokens (decode and the server's batched steps, where the copy streams
 * from DRAM once per call): k is cut into segments of PK_SEG chunks whose activations are
 * prepared once per call, and each panel's chunks of a segment are read in memory order, every
 * token tile on each chunk at once — for k up to PK_SEG chunks one sequential stream through
 * the copy. Prefetches run PK_AHEAD chunks ahead of the reads in that order (the hardware
 * prefetchers drop a stream at every 4 KB page). More tokens (prefill): row blocks of PK_MB
 * panels, whose chunks stay in L2 while the token tiles take them one after the other, as the
 * on-the-fly panels do, two panels at a time (pn_tile2: one register broadcast of a token's
 * bytes feeds both); Q4_K's scales are unpacked once per chunk there. */
#define PK_DEFINE_FEW(name, fmt)                                                               \
    PN_DEFINE_RUN(name, fmt, 1)                                                                \
    static void name##_few(const uint8_t *P, const void *A, size_t as, int n_tok, int64_t k,   \
                           int64_t r0, int64_t r1, float *Y, int64_t ldy)                      \
    {                                                                                          \
        struct pn_act S[PK_SEG][PN_FUSE_TILES];                                                \
        const int bpc = PN_KC / PN_BLK(fmt);                                                   \
        const int64_t nb = k / PN_BLK(fmt), nch = (nb + bpc - 1) / bpc;                        \
        const size_t pbytes = pn_st_panel_bytes(fmt, k), cfull = pn_st_chunk_bytes(fmt, bpc);     \
        const int64_t p0 = r0 / PN_ROWS, p1 = (r1 + PN_ROWS - 1) / PN_ROWS;                    \
        for (int64_t cs = 0; cs < nch; cs += PK_SEG) {                                         \
            const int nseg = nch - cs < PK_SEG ? (int)(nch - cs) : PK_SEG;                     \
            for (int ci = 0; ci < nseg; ci++) {                                                \
                const int64_t b0 = (cs + ci) * bpc;                                            \
                const int nbc = nb - b0 < bpc ? (int)(nb - b0) : bpc;                          \
                for (int t = 0, u = 0; t < n_tok; t += PN_NT, u++)                             \
                    pn_act_prepare(fmt, (const uint8_t *)A + (size_t)t * as, as,               \
                                   n_tok - t < PN_NT ? n_tok - t : PN_NT, b0, nbc, &S[ci][u]); \
            }                                                                                  \
            for (int64_t p = p0; p < p1; p++) {                                                \
                const int64_t lo = r0 > p * PN_ROWS ? r0 - p * PN_ROWS : 0;                     \
                const int64_t hi = r1 - p * PN_ROWS < PN_ROWS ? r1 - p * PN_ROWS : PN_ROWS;     \
                const __mmask16 m = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1));         \
                for (int ci = 0; ci < nseg; ci++) {                                            \
                    const int64_t c = cs + ci, b0 = c * bpc;                                   \
                    const int nbc = nb - b0 < bpc ? (int)(nb - b0) : bpc;                      \
                    const uint8_t *src = P + (size_t)p * pbytes + (size_t)c * cfull;           \
                    const int64_t ahead = (p - p0) * nseg + ci + PK_AHEAD;                     \
                    const uint8_t *next = P + (size_t)(p0 + ahead / nseg) * pbytes +           \
                                          (size_t)(cs + ahead % nseg) * cfull;                 \
                    /* one segment: the copy is read in memory order, so the prefetch runs a   \
                     * fixed distance ahead, as many lines as this chunk has (a short last     \
                     * chunk, Qwen2.5's k = 896 = 512 + 384, fetched a whole chunk's lines     \
                     * before, in bursts) */                                                   \
                    const uint8_t *next1 = nseg == nch ? src + PK_AHEAD * cfull : next;        \
                    for (int t = 0, u = 0; t < n_tok; t += PN_NT, u++)                         \
                        name##_run(src, NULL, t == 0 ? next1 : NULL, nbc,                      \
                                   (const uint8_t *)A + (size_t)t * as, as, b0, &S[ci][u],     \
                                   n_tok - t < PN_NT ? n_tok - t : PN_NT,                      \
                                   Y + (size_t)t * ldy + p * PN_ROWS, ldy, m, c == 0);         \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

#define PK_DEFINE(name, fmt)                                                                   \
    PK_DEFINE_FEW(name, fmt)                                                                   \
    PN_DEFINE_RUN2(name, fmt, 1)                                                               \
    static void name##_matmul(const uint8_t *P, const void *A, size_t as, int n_tok, int64_t k, \
                              int64_t r0, int64_t r1, float *Y, int64_t ldy)                   \
    {                                                                                          \
        if (n_tok <= PN_FUSE_TILES * PN_NT) {                                                  \
            name##_few(P, A, as, n_tok, k, r0, r1, Y, ldy);                                    \
            return;                                                                            \
        }                                                                                      \
        struct pn_act S;                                                                       \
        /* Q4_K's unpacked scales (64 KB); one row for the others */                           \
        float xs[fmt == PN_Q4_K ? PK_MB : 1][2 * PN_ST_NS * PN_ROWS] __attribute__((aligned(64))); \
        const int bpc = PN_KC / PN_BLK(fmt);                                                   \
        const int64_t nb = k / PN_BLK(fmt);                                                    \
        const size_t pbytes = pn_st_panel_bytes(fmt, k), cfull = pn_st_chunk_bytes(fmt, bpc);     \
        const int expand = fmt == PN_Q4_K;                                                     \
        const int64_t p0 = r0 / PN_ROWS, p1 = (r1 + PN_ROWS - 1) / PN_ROWS;                    \
        for (int64_t pb = p0; pb < p1; pb += PK_MB) {                                          \
            const int64_t pe = pb + PK_MB < p1 ? pb + PK_MB : p1;                              \
            int64_t c = 0;                                                                     \
            for (int64_t b0 = 0; b0 < nb; b0 += bpc, c++) {                                    \
                const int nbc = nb - b0 < bpc ? (int)(nb - b0) : bpc;                          \
                if (expand)                                                                    \
                    for (int64_t p = pb; p < pe; p++)                                          \
                        pn_st_scales(fmt, P + (size_t)p * pbytes + (size_t)c * cfull, nbc,     \
                                     xs[p - pb]);                                              \
                for (int t = 0; t < n_tok; t += PN_NT) {                                       \
                    const int nt = n_tok - t < PN_NT ? n_tok - t : PN_NT;                      \
                    const uint8_t *At = (const uint8_t *)A + (size_t)t * as;                   \
                    pn_act_prepare(fmt, At, as, nt, b0, nbc, &S);                              \
                    /* panels two at a time (pn_tile2), an odd last one alone */               \
                    for (int64_t p = pb; p < pe; p += 2) {                                     \
                        const uint8_t *src = P + (size_t)p * pbytes + (size_t)c * cfull;       \
                        /* the chunk PK_AHEAD steps on (panels, then the next chunk), fetched  \
                         * by the first tile: the later ones find the row block in L2 */       \
                        const int64_t ahead = (p - pb) + PK_AHEAD;                             \
                        const uint8_t *next = P + (size_t)(pb + ahead % (pe - pb)) * pbytes +  \
                                              (size_t)(c + ahead / (pe - pb)) * cfull;         \
                        float *Yp = Y + (size_t)t * ldy + p * PN_ROWS;                         \
                        if (p + 1 < pe) {                                                      \
                            const int64_t a1 = ahead + 1;                                      \
                            const uint8_t *next1 = P + (size_t)(pb + a1 % (pe - pb)) * pbytes + \
                                                   (size_t)(c + a1 / (pe - pb)) * cfull;       \
                            name##_run2(src, src + pbytes, expand ? xs[p - pb] : NULL,         \
                                        expand ? xs[p + 1 - pb] : NULL, t == 0 ? next : NULL,  \
                                        t == 0 ? next1 : NULL, nbc, At, as, b0, &S, nt, Yp,    \
                                        ldy, pk_rows(p, r0, r1), pk_rows(p + 1, r0, r1), b0 == 0); \
                        } else {                                                               \
                            name##_run(src, expand ? xs[p - pb] : NULL, t == 0 ? next : NULL,  \
                                       nbc, At, as, b0, &S, nt, Yp, ldy, pk_rows(p, r0, r1),   \
                                       b0 == 0);                                               \
                        }                                                                      \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

PK_DEFINE(pk_q8_0, PN_Q8_0)
PK_DEFINE(pk_q4_0, PN_Q4_0)
PK_DEFINE(pk_q4_K, PN_Q4_K)

/* Many tokens over a stored Q5_0, Q6_K or Q4_1 copy: their codes take five or six instructions a
 * panel and group to put together (pn_w), which the two-panel tile would pay once per 4-token
 * pass: bench_kernels prefill of Q5_0, 896 x 4864 at 512 tokens, one thread, 572 GOP/s against
 * Q4_0's ~730. So each row block's chunk is first unpacked into struct pn_panel (the bytes and
 * scales the on-the-fly panels' packers make) and the tile runs over that (st = 0): the
 * unpacking is paid once per chunk (Q5_0: 725 GOP/s). Row blocks of PK_MBU panels, whose
 * unpacked chunks (12 KB each) stay in L2: 192 KB on the stack, the largest frame of the kernels
 * (8 panels gave 656-670 GOP/s where 16 gave 670-704, same minutes). Q4_1 too: its scales and
 * mins, two fp16 conversions a panel and block, were paid per 4-token pass as well (Sapphire
 * Rapids, same bench: 361 GOP/s read in place, 410-423 unpacked, the per-call panels 352-377). */
#ifndef PK_MBU
#define PK_MBU 16
#endif

PN_INLINE void pk_unpack(int fmt, const uint8_t *src, int nbc, struct pn_panel *P)
{
    for (int s = 0; s < nbc * PN_SPB(fmt); s++) {
        for (int g = 0; g < PN_GS(fmt); g++)
            _mm512_store_si512((void *)P->q[PN_GS(fmt) * s + g], pn_w(fmt, 1, src, s, g));
        _mm512_store_ps(P->d[s], pn_ws(fmt, 1, src, NULL, nbc, s, 0));
        if (PN_HAS_MIN(fmt)) _mm512_store_ps(P->m[s], pn_ws(fmt, 1, src, NULL, nbc, s, 1));
    }
}

typedef void (*pk_run2_fn)(const uint8_t *, const uint8_t *, const float *, const float *, const uint8_t *,
                           const uint8_t *, int, const uint8_t *, size_t, int64_t, const struct pn_act *, int,
                           float *, int64_t, __mmask16, __mmask16, int);

PN_INLINE void pk_many_unpacked(int fmt, pk_run2_fn run2, const uint8_t *P, const void *A, size_t as,
                                int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    struct pn_panel panels[PK_MBU] __attribute__((aligned(64)));
    struct pn_act S;
    const int bpc = PN_KC / PN_BLK(fmt);
    const int64_t nb = k / PN_BLK(fmt);
    const size_t pbytes = pn_st_panel_bytes(fmt, k), cfull = pn_st_chunk_bytes(fmt, bpc);
    const int64_t p0 = r0 / PN_ROWS, p1 = (r1 + PN_ROWS - 1) / PN_ROWS;
    for (int64_t pb = p0; pb < p1; pb += PK_MBU) {
        const int64_t pe = pb + PK_MBU < p1 ? pb + PK_MBU : p1;
        int64_t c = 0;
        for (int64_t b0 = 0; b0 < nb; b0 += bpc, c++) {
            const int nbc = nb - b0 < bpc ? (int)(nb - b0) : bpc;
            for (int64_t p = pb; p < pe; p++)
                pk_unpack(fmt, P + (size_t)p * pbytes + (size_t)c * cfull, nbc, &panels[p - pb]);
            for (int t = 0; t < n_tok; t += PN_NT) {
                const int nt = n_tok - t < PN_NT ? n_tok - t : PN_NT;
                const uint8_t *At = (const uint8_t *)A + (size_t)t * as;
                pn_act_prepare(fmt, At, as, nt, b0, nbc, &S);
                for (int64_t p = pb; p < pe; p += 2) { /* an odd last panel pairs with itself, not stored */
                    const int64_t q = p + 1 < pe ? p + 1 : p;
                    run2((const uint8_t *)&panels[p - pb], (const uint8_t *)&panels[q - pb], NULL, NULL, NULL,
                         NULL, nbc, At, as, b0, &S, nt, Y + (size_t)t * ldy + p * PN_ROWS, ldy,
                         pk_rows(p, r0, r1), q > p ? pk_rows(q, r0, r1) : 0, b0 == 0);
                }
            }
        }
    }
}

#define PK_DEFINE_UNPACKED(name, fmt)                                                          \
    PK_DEFINE_FEW(name, fmt)                                                                   \
    PN_DEFINE_RUN2(name##_x, fmt, 0)                                                           \
    static void name##_matmul(const uint8_t *P, const void *A, size_t as, int n_tok, int64_t k, \
                              int64_t r0, int64_t r1, float *Y, int64_t ldy)                   \
    {                                                                                          \
        if (n_tok <= PN_FUSE_TILES * PN_NT)                                                    \
            name##_few(P, A, as, n_tok, k, r0, r1, Y, ldy);                                    \
        else                                                                                   \
            pk_many_unpacked(fmt, name##_x_run2, P, A, as, n_tok, k, r0, r1, Y, ldy);          \
    }

PK_DEFINE_UNPACKED(pk_q4_1, PN_Q4_1)
PK_DEFINE_UNPACKED(pk_q5_0, PN_Q5_0)
PK_DEFINE_UNPACKED(pk_q6_K, PN_Q6_K)

/* From 1 token: the copy is also the decode kernel (docs/results/kernels-2026-11.md has the
 * bench_smallm figures behind this). */
int kern_avx512_packed_min_tok(int wtype)
{
    (void)wtype;
    return 1;
}

void kern_avx512_packed_run(int wtype, const void *P, const void *A, size_t as, int n_tok,
                            int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    /* a range may cut a 16-row panel (pk_rows masks its lanes); the copy is 64-byte aligned */
    TERN_ASSERT(r0 >= 0 && n_tok >= 1 && ((uintptr_t)P & 63) == 0);
    switch (wtype) {
    case TERN_TYPE_Q8_0: pk_q8_0_matmul(P, A, as, n_tok, k, r0, r1, Y, ldy); break;
    case TERN_TYPE_Q4_0: pk_q4_0_matmul(P, A, as, n_tok, k, r0, r1, Y, ldy); break;
    case TERN_TYPE_Q4_1: pk_q4_1_matmul(P, A, as, n_tok, k, r0, r1, Y, ldy); break;
    case TERN_TYPE_Q5_0: pk_q5_0_matmul(P, A, as, n_tok, k, r0, r1, Y, ldy); break;
    case TERN_TYPE_Q6_K: pk_q6_K_matmul(P, A, as, n_tok, k, r0, r1, Y, ldy); break;
    case TERN_TYPE_Q4_K: pk_q4_K_matmul(P, A, as, n_tok, k, r0, r1, Y, ldy); break;
    default: TERN_ASSERT(0, "a packed copy exists only for the types kern_panel_packed_size sizes");
    }
}

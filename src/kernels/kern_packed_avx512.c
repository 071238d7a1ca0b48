/* kern_packed_avx512.c — Q8_0, Q4_0 and Q4_K weights repacked once (at model load) into the
 * layout the AVX-512 panels read, and the matmul over that stored copy. Compiled with the
 * AVX-512 flags; reached only through kern_dispatch.c (kern_packed.h) on the avx512 path.
 *
 * Read first: kern_panel_avx512.c (the panels, which repack on every call) and
 * kern_panel_avx512.h (the stored layout, "stored layout", and the token tile both share).
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

/* The stored formats: PN_* format, or -1. */
static int pk_fmt(int wtype)
{
    switch (wtype) {
    case TERN_TYPE_Q8_0: return PN_Q8_0;
    case TERN_TYPE_Q4_0: return PN_Q4_0;
    case TERN_TYPE_Q4_K: return PN_Q4_K;
    default: return -1;
    }
}

/* Bytes of one stored panel (16 rows x k). */
static size_t pk_panel_bytes(int fmt, int64_t k)
{
    const int bpc = PN_KC / PN_BLK(fmt);
    const int64_t nb = k / PN_BLK(fmt);
    return (size_t)(nb / bpc) * pn_st_chunk_bytes(fmt, bpc) + pn_st_chunk_bytes(fmt, (int)(nb % bpc));
}

size_t kern_avx512_packed_size(int wtype, int64_t rows, int64_t k)
{
    const int fmt = pk_fmt(wtype);
    if (fmt < 0 || rows < 1 || k < 1 || k % PN_BLK(fmt)) return 0;
    return (size_t)((rows + PN_ROWS - 1) / PN_ROWS) * pk_panel_bytes(fmt, k);
}

/* ---------------------------------------------------------------- packing (load time)
 * Plain 4-byte moves: this runs once per matrix, at a few GB/s; what matters is that the bytes
 * land where pn_w / pn_ws (kern_panel_avx512.h) read them. row[i]: the panel's 16 row pointers
 * (padding rows past the matrix). */

static inline uint32_t pk_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* One chunk (blocks [b0, b0 + nbc)) of one panel into out. */
static void pk_chunk(int fmt, const uint8_t *const row[PN_ROWS], int64_t b0, int nbc, uint8_t *out)
{
    memset(out, 0, pn_st_chunk_bytes(fmt, nbc));
    uint8_t *sc = out + (size_t)nbc * PN_ST_CODES(fmt);
    for (int b = 0; b < nbc; b++)
        for (int i = 0; i < PN_ROWS; i++) {
            if (fmt == PN_Q8_0) {
                const struct quant_block_q8_0 *x = (const struct quant_block_q8_0 *)row[i] + b0 + b;
                for (int g = 0; g < 8; g++) {
                    const uint32_t v = pk_u32((const uint8_t *)x->qs + 4 * g) ^ 0x80808080u; /* w + 128 */
                    memcpy(out + 64 * (8 * b + g) + 4 * i, &v, 4);
                }
                memcpy(sc + 32 * b + 2 * i, &x->d, 2);
            } else if (fmt == PN_Q4_0) {
                const struct quant_block_q4_0 *x = (const struct quant_block_q4_0 *)row[i] + b0 + b;
                for (int h = 0; h < 4; h++) memcpy(out + 64 * (4 * b + h) + 4 * i, x->qs + 4 * h, 4);
                memcpy(sc + 32 * b + 2 * i, &x->d, 2);
            } else {
                const uint8_t *x = row[i] + (size_t)(b0 + b) * sizeof(struct quant_block_q4_K);
                const uint8_t *qs = x + offsetof(struct quant_block_q4_K, qs);
                for (int c = 0; c < 4; c++)
                    for (int g = 0; g < 8; g++)
                        memcpy(out + 2048 * (size_t)b + 64 * (8 * c + g) + 4 * i, qs + 32 * c + 4 * g, 4);
                for (int q = 0; q < 4; q++) /* d | dmin << 16, then the 12 scale bytes */
                    memcpy(sc + 256 * (size_t)b + 64 * q + 4 * i, x + 4 * q, 4);
            }
        }
}

void kern_avx512_pack(int wtype, const void *W, size_t ws, int64_t rows, int64_t k, int64_t r0,
                      int64_t r1, void *P)
{
    const int fmt = pk_fmt(wtype);
    const int bpc = PN_KC / PN_BLK(fmt);
    const int64_t nb = k / PN_BLK(fmt);
    const size_t pbytes = pk_panel_bytes(fmt, k), cfull = pn_st_chunk_bytes(fmt, bpc);
    for (int64_t p = r0 / PN_ROWS; p < (r1 + PN_ROWS - 1) / PN_ROWS; p++) {
        /* rows past the matrix repeat the panel's first row: their lanes are never stored */
        const uint8_t *row[PN_ROWS];
        for (int i = 0; i < PN_ROWS; i++) {
            const int64_t r = p * PN_ROWS + i < rows ? p * PN_ROWS + i : p * PN_ROWS;
            row[i] = (const uint8_t *)W + (size_t)r * ws;
        }
        uint8_t *dst = (uint8_t *)P + (size_t)p * pbytes;
        for (int64_t b0 = 0; b0 < nb; b0 += bpc, dst += cfull)
            pk_chunk(fmt, row, b0, nb - b0 < bpc ? (int)(nb - b0) : bpc, dst);
    }
}

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

/* The driver. Up to 16 tokens (decode and the server's batched steps, where the copy streams
 * from DRAM once per call): k is cut into segments of PK_SEG chunks whose activations are
 * prepared once per call, and each panel's chunks of a segment are read in memory order, every
 * token tile on each chunk at once — for k up to PK_SEG chunks one sequential stream through
 * the copy. Prefetches run PK_AHEAD chunks ahead of the reads in that order (the hardware
 * prefetchers drop a stream at every 4 KB page). More tokens (prefill): row blocks of PK_MB
 * panels, whose chunks stay in L2 while the token tiles take them one after the other, as the
 * on-the-fly panels do; Q4_K's scales are unpacked once per chunk there. */
#define PK_DEFINE(name, fmt)                                                                   \
    PN_DEFINE_RUN(name, fmt, 1)                                                                \
    static void name##_few(const uint8_t *P, const void *A, size_t as, int n_tok, int64_t k,   \
                           int64_t r0, int64_t r1, float *Y, int64_t ldy)                      \
    {                                                                                          \
        struct pn_act S[PK_SEG][PN_FUSE_TILES];                                                \
        const int bpc = PN_KC / PN_BLK(fmt);                                                   \
        const int64_t nb = k / PN_BLK(fmt), nch = (nb + bpc - 1) / bpc;                        \
        const size_t pbytes = pk_panel_bytes(fmt, k), cfull = pn_st_chunk_bytes(fmt, bpc);     \
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
                    for (int t = 0, u = 0; t < n_tok; t += PN_NT, u++)                         \
                        name##_run(src, NULL, t == 0 ? next : NULL, nbc,                       \
                                   (const uint8_t *)A + (size_t)t * as, as, b0, &S[ci][u],     \
                                   n_tok - t < PN_NT ? n_tok - t : PN_NT,                      \
                                   Y + (size_t)t * ldy + p * PN_ROWS, ldy, m, c == 0);         \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
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
        const size_t pbytes = pk_panel_bytes(fmt, k), cfull = pn_st_chunk_bytes(fmt, bpc);     \
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
                    for (int64_t p = pb; p < pe; p++) {                                        \
                        const int64_t lo = r0 > p * PN_ROWS ? r0 - p * PN_ROWS : 0;             \
                        const int64_t hi = r1 - p * PN_ROWS < PN_ROWS ? r1 - p * PN_ROWS : PN_ROWS; \
                        const __mmask16 m = (__mmask16)(((1u << hi) - 1) & ~((1u << lo) - 1)); \
                        const uint8_t *src = P + (size_t)p * pbytes + (size_t)c * cfull;       \
                        /* the chunk PK_AHEAD steps on (panels, then the next chunk), fetched  \
                         * by the first tile: the later ones find the row block in L2 */       \
                        const int64_t ahead = (p - pb) + PK_AHEAD;                             \
                        const uint8_t *next = P + (size_t)(pb + ahead % (pe - pb)) * pbytes +  \
                                              (size_t)(c + ahead / (pe - pb)) * cfull;         \
                        name##_run(src, expand ? xs[p - pb] : NULL, t == 0 ? next : NULL, nbc, \
                                   At, as, b0, &S, nt, Y + (size_t)t * ldy + p * PN_ROWS, ldy, \
                                   m, b0 == 0);                                                \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }

PK_DEFINE(pk_q8_0, PN_Q8_0)
PK_DEFINE(pk_q4_0, PN_Q4_0)
PK_DEFINE(pk_q4_K, PN_Q4_K)

/* From 1 token: the copy is also the decode kernel (README "Tensor formats and kernels" has the
 * bench_smallm figures behind this). */
int kern_avx512_packed_min_tok(int wtype)
{
    (void)wtype;
    return 1;
}

void kern_avx512_packed_run(int wtype, const void *P, const void *A, size_t as, int n_tok,
                            int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    switch (wtype) {
    case TERN_TYPE_Q8_0: pk_q8_0_matmul(P, A, as, n_tok, k, r0, r1, Y, ldy); break;
    case TERN_TYPE_Q4_0: pk_q4_0_matmul(P, A, as, n_tok, k, r0, r1, Y, ldy); break;
    case TERN_TYPE_Q4_K: pk_q4_K_matmul(P, A, as, n_tok, k, r0, r1, Y, ldy); break;
    default: break;
    }
}

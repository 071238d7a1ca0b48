/* kern_pack.c — writes the stored panel layout (kern_panel_layout.h, "stored layout"): Q8_0,
 * Q4_0, Q4_1, Q5_0, Q4_K and Q6_K matrices permuted once, at model load, into 16-row panels that
 * both the AVX-512 tile (kern_packed_avx512.c) and the 256-bit one (kern_packed_avx2.c,
 * kern_packed_avxvnni.c) read. Compiled without SIMD flags: it runs on whatever x86-64 CPU packs, and the one layout
 * serves every path that has a panel tile, so a model packed under one path is read by another
 * forced later (kern_force_isa) without repacking.
 *
 * Read first: kern_packed.h (the contract of kern_pack) and kern_panel_layout.h (the layout). */
#include <string.h>

#include "kernels/kern_packed.h"
#include "kernels/kern_panel_layout.h"
#include "quant/quant.h"
#include "tern.h"
#include "util/check.h"

size_t kern_panel_packed_size(int wtype, int64_t rows, int64_t k)
{
    const int fmt = pn_st_fmt(wtype);
    if (fmt < 0 || rows < 1 || k < 1 || k % PN_BLK(fmt)) return 0;
    return (size_t)((rows + PN_ROWS - 1) / PN_ROWS) * pn_st_panel_bytes(fmt, k);
}

/* ---------------------------------------------------------------- packing (load time)
 * Plain 4-byte moves: this runs once per matrix, at a few GB/s; what matters is that the bytes
 * land where the tiles read them (pn_w / pn_ws of kern_panel_avx512.h, p2_w / p2_ws of
 * kern_panel_avx2.h). row[i]: the panel's 16 row pointers
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
    TERN_ASSERT(nbc >= 1 && nbc <= PN_KC / PN_BLK(fmt) && b0 >= 0, "a chunk holds at most PN_KC elements");
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
                memcpy(sc + pn_st_d_off(fmt, b) + 2 * i, &x->d, 2);
            } else if (fmt == PN_Q4_0) {
                const struct quant_block_q4_0 *x = (const struct quant_block_q4_0 *)row[i] + b0 + b;
                for (int h = 0; h < 4; h++) memcpy(out + 64 * (4 * b + h) + 4 * i, x->qs + 4 * h, 4);
                memcpy(sc + pn_st_d_off(fmt, b) + 2 * i, &x->d, 2);
            } else if (fmt == PN_Q4_1) { /* Q4_0's codes; d, then m, lane = row */
                const struct quant_block_q4_1 *x = (const struct quant_block_q4_1 *)row[i] + b0 + b;
                for (int h = 0; h < 4; h++) memcpy(out + 64 * (4 * b + h) + 4 * i, x->qs + 4 * h, 4);
                memcpy(sc + pn_st_d_off(fmt, b) + 2 * i, &x->d, 2);
                memcpy(sc + pn_st_d_off(fmt, b) + 32 + 2 * i, &x->m, 2);
            } else if (fmt == PN_Q5_0) {
                const struct quant_block_q5_0 *x = (const struct quant_block_q5_0 *)row[i] + b0 + b;
                uint8_t *codes = out + PN_ST_CODES(PN_Q5_0) * (size_t)b;
                const uint32_t qh = pk_u32(x->qh);
                for (int h = 0; h < 4; h++) memcpy(codes + 64 * h + 4 * i, x->qs + 4 * h, 4);
                for (int c = 0; c < 4; c++) { /* byte 4i + c, bit g: element 4g + c */
                    uint8_t v = 0;
                    for (int g = 0; g < 8; g++) v |= (uint8_t)(((qh >> (4 * g + c)) & 1u) << g);
                    codes[256 + 4 * i + c] = v;
                }
                memcpy(sc + pn_st_d_off(fmt, b) + 2 * i, &x->d, 2);
            } else if (fmt == PN_Q6_K) {
                const struct quant_block_q6_K *x = (const struct quant_block_q6_K *)row[i] + b0 + b;
                uint8_t *codes = out + PN_ST_CODES(PN_Q6_K) * (size_t)b;
                for (int m = 0; m < 32; m++) memcpy(codes + 64 * m + 4 * i, x->ql + 4 * m, 4);
                uint8_t hb[QUANT_QK_K]; /* element e = 128 h + 32 q + l: bits 2q, 2q + 1 of qh[32 h + l] */
                for (int h = 0; h < 2; h++)
                    for (int q = 0; q < 4; q++)
                        for (int l = 0; l < 32; l++) hb[128 * h + 32 * q + l] = (uint8_t)((x->qh[32 * h + l] >> (2 * q)) & 3u);
                for (int L = 0; L < 16; L++) /* byte 4i + c of line L: elements 4 (4L + j) + c at bits 2j */
                    for (int c = 0; c < 4; c++)
                        codes[2048 + 64 * L + 4 * i + c] =
                            (uint8_t)(hb[16 * L + c] | hb[16 * L + 4 + c] << 2 | hb[16 * L + 8 + c] << 4 | hb[16 * L + 12 + c] << 6);
                for (int j = 0; j < 16; j++) sc[pn_st_q6k_scale_off(16 * b + j) + i] = (uint8_t)x->scales[j];
                memcpy(sc + pn_st_q6k_d_off(16 * b) + 2 * i, &x->d, 2);
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

void kern_panel_pack(int wtype, const void *W, size_t ws, int64_t rows, int64_t k, int64_t r0,
                      int64_t r1, void *P)
{
    const int fmt = pn_st_fmt(wtype);
    TERN_ASSERT(fmt >= 0, "a format with a packed layout (kern_panel_packed_size said so)");
    const int bpc = PN_KC / PN_BLK(fmt);
    const int64_t nb = k / PN_BLK(fmt);
    TERN_ASSERT(k > 0 && k % PN_BLK(fmt) == 0 && bpc > 0 && r0 % PN_ROWS == 0 && r0 <= r1 && r1 <= rows);
    const size_t pbytes = pn_st_panel_bytes(fmt, k), cfull = pn_st_chunk_bytes(fmt, bpc);
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

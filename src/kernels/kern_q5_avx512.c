/* kern_q5_avx512.c — Q5_0 x Q8_0 (and Q5_1 / Q4_1 x Q8_1) on the AVX-512 path (compiled with the AVX-512 flags, called
 * only after kern_dispatch.c has checked the CPU). Prefill (many tokens) goes to the repacked
 * panel kernel of kern_panel_avx512.c; decode (a few tokens) to the streaming kernel below; what
 * that cannot hold (very long rows) to the 256-bit tiles of kern_simd_impl.h with vpdpbusd and
 * the Q5_0 block step of kern_q5_simd.h (4 x 4 tiles, as kern_avx512.c).
 *
 * Read first: kern_avx512.c (the same routing for Q4_0), kern_q5_simd.h.
 *
 * Decode reads every weight byte once per token, so its kernel streams each row once, two
 * blocks per zmm, and does once per call everything that depends only on the activations: per
 * token and pair of blocks, a 192-byte record with both blocks' activation bytes (one zmm), the
 * start value of the integer dot in each of the 16 lanes (-2*sum(a) of the lane's block: a
 * block's 8 lanes then sum to dot(code, a) - 16*sum(a), the offset of the codes removed exactly)
 * and the activation scale per lane. Per pair and token that leaves one vpdpbusd, one
 * conversion, one multiply and one FMA; the weights cost two nibble unpacks, a permute and one
 * masked move that turns the 64 fifth bits of both blocks (a k-mask) into 16s. */
#include "kernels/kernels.h"

#define KERN_VNNI 1
#define KERN_MR 4
#define KERN_MT 4
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#include "kernels/kern_simd_impl.h"
#include "kernels/kern_q5_simd.h"
#pragma GCC diagnostic pop
#include "kernels/kern_q5_layout.h"
#include "util/check.h"

/* ------------------------------------------------------------------ decode */

#define QD_MAX_TOK 4    /* tokens per pass over the rows */
#define QD_MAX_SLOTS 384 /* activation records (pairs x tokens) on the stack: 72 KB (+24 KB) */

struct qd_pair {
    int8_t qs[64];     /* blocks 2p and 2p+1 of the token, in element order */
    int32_t init[16];  /* -2*sum(a) of the lane's block (Q5_0; Q5_1 / Q4_1 codes carry no offset: 0) */
    float da[16];      /* the lane's block scale */
};

/* Q5_0, Q5_1 and Q4_1 share the kernel (fm, kern_q5_layout.h: a constant after inlining). Q5_1's
 * and Q4_1's activations are Q8_1 blocks, whose s (d * sum) times the row's min m is the min
 * term: per lane s/8 in SA, so one more FMA with the lanes' m adds it. */

static void qd_pack_act(struct qd_pair *P, float (*SA)[16], int npair, const uint8_t *A,
                        size_t as, int nt, int64_t nb, int fm)
{
    const struct q5_fmt *f = q5_fmt_get(fm);
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int j = 0; j < nt; j++) {
        const uint8_t *row = A + (size_t)j * as;
        for (int p = 0; p < npair; p++) {
            struct qd_pair *d = &P[(size_t)j * npair + p];
            for (int h = 0; h < 2; h++) {
                const int64_t b = 2 * (int64_t)p + h;
                int32_t init = 0;
                float da = 0, sa = 0;
                __m256i x = _mm256_setzero_si256(); /* odd block count: a zero block */
                if (b < nb) {
                    const uint8_t *ab = row + (size_t)b * f->abytes;
                    x = _mm256_loadu_si256((const __m256i *)(ab + f->aqs_off));
                    if (fm == Q5F_Q5_0) {
                        /* sum of the signed bytes: sad of the bytes + 128, minus 32 * 128 */
                        const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(x, flip), _mm256_setzero_si256());
                        const __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
                        init = -2 * ((int32_t)(_mm_cvtsi128_si64(t) + _mm_extract_epi64(t, 1)) - 32 * 128);
                    } else {
                        sa = 0.125f * _cvtsh_ss(q5_u16(ab + 2));
                    }
                    da = _cvtsh_ss(q5_u16(ab));
                }
                _mm256_storeu_si256((__m256i *)(d->qs + 32 * h), x);
                for (int l = 0; l < 8; l++) d->init[8 * h + l] = init, d->da[8 * h + l] = da;
                if (fm != Q5F_Q5_0)
                    for (int l = 0; l < 8; l++) SA[(size_t)j * npair + p][8 * h + l] = sa;
            }
        }
    }
}

/* Two fp16 values, each in the 8 lanes of its block. */
static inline __attribute__((always_inline)) __m512 qd_lanes(uint16_t v0, uint16_t v1)
{
    return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)v1), _mm_set1_epi16((short)v0)));
}

/* The codes 0..31 (Q4_1: 0..15) of the blocks at w and w + bbytes in element order (two == 0:
 * the first only, the rest zero), their scales and (Q5_1, Q4_1) mins, each in the 8 lanes of its
 * block. */
static inline __attribute__((always_inline)) __m512i qd_codes(const uint8_t *w, int two, int fm,
                                                             __m512 *dw, __m512 *mw)
{
    const struct q5_fmt *f = q5_fmt_get(fm);
    const uint8_t *w1 = w + f->bbytes;
    /* each block's 16 nibble bytes in two 128-bit lanes (broadcast loads), shifted by 0 in the
     * first and 4 in the second: lanes [lo_0, hi_0, lo_1, hi_1], low nibbles are elements 0-15,
     * high ones 16-31 (three instructions where a split and a permute took five) */
    const __m256i x0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(w + f->qs_off)));
    const __m256i x1 = two ? _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(w1 + f->qs_off)))
                           : _mm256_setzero_si256();
    const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(x0), x1, 1);
    const __m512i q = _mm512_and_si512(_mm512_srlv_epi64(x, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)),
                                       _mm512_set1_epi8(0x0F));
    *dw = qd_lanes(q5_u16(w), two ? q5_u16(w1) : 0);
    if (fm != Q5F_Q5_0) *mw = qd_lanes(q5_u16(w + f->m_off), two ? q5_u16(w1 + f->m_off) : 0);
    if (fm == Q5F_Q4_1) return q;
    uint32_t h0, h1 = 0;
    memcpy(&h0, w + f->qh_off, 4);
    if (two) memcpy(&h1, w1 + f->qh_off, 4);
    const __mmask64 fifth = (__mmask64)h0 | (__mmask64)h1 << 32;
    return _mm512_or_si512(q, _mm512_maskz_mov_epi8(fifth, _mm512_set1_epi8(0x10)));
}

static inline __attribute__((always_inline)) void qd_step(const uint8_t *w, int two, int fm,
                                                          const struct qd_pair *P,
                                                          const float (*SA)[16], int npair,
                                                          int p, int nt, __m512 *acc)
{
    __m512 dw, mw = _mm512_setzero_ps();
    const __m512i q = qd_codes(w + (size_t)(2 * p) * q5_fmt_get(fm)->bbytes, two, fm, &dw, &mw);
    for (int j = 0; j < nt; j++) {
        const struct qd_pair *d = &P[(size_t)j * npair + p];
        const __m512i s = _mm512_dpbusd_epi32(_mm512_load_si512(d->init), q, _mm512_load_si512(d->qs));
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw, _mm512_load_ps(d->da)), acc[j]);
        if (fm != Q5F_Q5_0) acc[j] = _mm512_fmadd_ps(mw, _mm512_load_ps(SA[(size_t)j * npair + p]), acc[j]);
    }
}

/* One row against nt tokens (nt, fm constants after inlining). */
static inline __attribute__((always_inline)) void qd_row(const uint8_t *w, int fm,
                                                         const struct qd_pair *P,
                                                         const float (*SA)[16], int npair,
                                                         int64_t nb, int nt, float *out)
{
    __m512 a0[QD_MAX_TOK], a1[QD_MAX_TOK]; /* two accumulator sets: FMA latency */
    for (int j = 0; j < nt; j++) a0[j] = a1[j] = _mm512_setzero_ps();
    const int full = (int)(nb / 2);
    int p = 0;
    for (; p + 2 <= full; p += 2) {
        qd_step(w, 1, fm, P, SA, npair, p, nt, a0);
        qd_step(w, 1, fm, P, SA, npair, p + 1, nt, a1);
    }
    if (p < full) qd_step(w, 1, fm, P, SA, npair, p++, nt, a0);
    if (p < npair) qd_step(w, 0, fm, P, SA, npair, p, nt, a1); /* odd block count */
    for (int j = 0; j < nt; j++) out[j] = _mm512_reduce_add_ps(_mm512_add_ps(a0[j], a1[j]));
}

#define QD_ROWS(name, fm)                                                                     \
    static void name(const void *W, size_t ws, const struct qd_pair *P, const float (*SA)[16], \
                     int npair, int64_t nb, int nt, int64_t r0, int64_t r1, float *Y,         \
                     int64_t ldy)                                                              \
    {                                                                                          \
        float out[QD_MAX_TOK];                                                                 \
        for (int64_t r = r0; r < r1; r++) {                                                    \
            const uint8_t *w = (const uint8_t *)W + (size_t)r * ws;                            \
            switch (nt) {                                                                      \
            case 1: qd_row(w, fm, P, SA, npair, nb, 1, out); break;                           \
            case 2: qd_row(w, fm, P, SA, npair, nb, 2, out); break;                           \
            case 3: qd_row(w, fm, P, SA, npair, nb, 3, out); break;                           \
            default: qd_row(w, fm, P, SA, npair, nb, 4, out); break;                          \
            }                                                                                  \
            for (int j = 0; j < nt; j++) Y[j * ldy + r] = out[j];                              \
        }                                                                                      \
    }
QD_ROWS(qd_rows_q5_0, Q5F_Q5_0)
QD_ROWS(qd_rows_q5_1, Q5F_Q5_1)
QD_ROWS(qd_rows_q4_1, Q5F_Q4_1)

/* false (nothing written) when one token's records do not fit the stack buffer */
static bool qd_decode(int fm, const void *W, size_t ws, const void *A, size_t as, int n_tok,
                      int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    struct qd_pair P[QD_MAX_SLOTS] __attribute__((aligned(64)));
    float SA[QD_MAX_SLOTS][16] __attribute__((aligned(64))); /* the mins' formats (untouched for Q5_0) */
    const int64_t nb = k / 32, npair = (nb + 1) / 2;
    TERN_ASSERT(k > 0 && k % 32 == 0 && n_tok >= 1, "rows are whole 32-element blocks");
    if (npair > QD_MAX_SLOTS) return false;
    int group = (int)(QD_MAX_SLOTS / npair);
    if (group > QD_MAX_TOK) group = QD_MAX_TOK;
    for (int t = 0; t < n_tok; t += group) {
        const int nt = n_tok - t < group ? n_tok - t : group;
        TERN_ASSERT(nt >= 1 && nt * npair <= QD_MAX_SLOTS, "a group's pairs fit P and SA");
        qd_pack_act(P, SA, (int)npair, (const uint8_t *)A + (size_t)t * as, as, nt, nb, fm);
        if (fm == Q5F_Q5_1)
            qd_rows_q5_1(W, ws, P, (const float (*)[16])SA, (int)npair, nb, nt, r0, r1,
                         Y + (size_t)t * ldy, ldy);
        else if (fm == Q5F_Q4_1)
            qd_rows_q4_1(W, ws, P, (const float (*)[16])SA, (int)npair, nb, nt, r0, r1,
                         Y + (size_t)t * ldy, ldy);
        else
            qd_rows_q5_0(W, ws, P, NULL, (int)npair, nb, nt, r0, r1, Y + (size_t)t * ldy, ldy);
    }
    return true;
}

/* ------------------------------------------------------------------ routing
 * As Q4_0 and Q4_K in kern_avx512.c, whose repacking and panels the Q5 formats share: Q5_0 and
 * Q5_1 from 6 tokens on, Q5_K from 12. */

/* qd_decode as the route calls it: the format a constant there, so the calls stay
 * qd_decode(Q5F_Q5_0, ...) etc., which gcc clones per format (with the format computed inside
 * qd_decode from wtype, the clones got other register choices in their loops: objdump). */
static inline __attribute__((always_inline)) bool qd_decode_any(int wtype, const void *W,
                                                                size_t ws, const void *A,
                                                                size_t as, int n_tok, int64_t k,
                                                                int64_t r0, int64_t r1, float *Y,
                                                                int64_t ldy)
{
    return qd_decode(wtype == TERN_TYPE_Q5_1   ? Q5F_Q5_1
                     : wtype == TERN_TYPE_Q4_1 ? Q5F_Q4_1
                                               : Q5F_Q5_0,
                     W, ws, A, as, n_tok, k, r0, r1, Y, ldy);
}

KS_ROUTE(q5_0, TERN_TYPE_Q5_0, 6, qd_decode_any)
KS_ROUTE(q5_1, TERN_TYPE_Q5_1, 6, qd_decode_any)
KS_ROUTE(q4_1, TERN_TYPE_Q4_1, 6, qd_decode_any)
KS_ROUTE(q5_K, TERN_TYPE_Q5_K, 12, NULL)

kern_quant_fn kern_q5_avx512_quant(int act_type)
{
    return act_type == TERN_TYPE_Q8_1 ? q8_1_quant : NULL;
}

kern_matmul_fn kern_q5_avx512_matmul(int wtype)
{
    switch (wtype) {
    case TERN_TYPE_Q5_0: return q5_0_route;
    case TERN_TYPE_Q5_1: return q5_1_route;
    case TERN_TYPE_Q4_1: return q4_1_route;
    case TERN_TYPE_Q5_K: return q5_K_route;
    default: return NULL;
    }
}

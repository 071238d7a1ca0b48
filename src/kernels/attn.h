/* attn.h — the inner loops of attention over the F16 KV cache, with SIMD paths.
 *
 * Per query (the definition of the numerics):
 *   attn_scores:       s[p] = scale * sum_j q[j] * K[p][j]      for p < n_keys
 *   attn_softmax:      s = F16(softmax(s)): max, vexp_f32 (vexp.h), sum in double in key order,
 *                      normalize, each weight rounded to F16 precision (as llama.cpp rounds
 *                      them); the same bits on every path
 *   attn_weighted_sum: out[j] = sum_p w[p] * V[p][j]
 * q and w hold values already rounded to F16 precision, K and V rows are head_dim halves,
 * contiguous. The scalar versions are the reference; the AVX2 / AVX-512 / NEON versions differ
 * only in summation order (tested in test_attn).
 *
 * Block versions (what forward.c runs): nq queries that share one KV head (the GQA group of
 * heads times a few consecutive tokens) are processed together, so each K and V row is loaded
 * and converted once per block instead of once per query. A block kernel gives every query
 * exactly the bits of the per-query kernel of the same ISA (same products, same summation
 * tree), whatever the block size or the other queries in it: a token's result never depends on
 * how a batch was cut into blocks (test_attn checks this bit for bit).
 *   attn_bscores: s[i*ss + p] = scale * q_i . K_p for i < nq, p < n_keys. The rows of s must have
 *                 room for n_keys rounded up to 16; `tile` is scratch of ATTN_TILE_KEYS * hd
 *                 floats.
 *   attn_bwsum:   out[i][j] = sum_{p < nk[i]} w[i*ws + p] * V[p][j] for i < nq; nk[i] <= the
 *                 n_keys the scores were computed for.
 *   attn_bsoftmax: attn_softmax of row i's n[i] scores at s + i*ss + off[i], for i < nq. The
 *                 double sums run in key order per row as attn_softmax's, but up to eight rows'
 *                 chains side by side (attn_sum_rows): one row's serial additions wait on each
 *                 other's latency, eight rows' do not. Same bits as attn_softmax per row.
 * The path follows the kernel ISA chosen at run time (kern_isa_name(), TERN_KERNELS). */
#ifndef TERN_KERNELS_ATTN_H
#define TERN_KERNELS_ATTN_H

#include <stddef.h>
#include <stdint.h>

typedef void (*attn_scores_fn)(const float *q, const uint16_t *k, int n_keys, int hd, float scale,
                               float *s);
typedef void (*attn_wsum_fn)(const float *w, const uint16_t *v, int n_keys, int hd, float *out);
typedef void (*attn_softmax_fn)(float *s, int n);
typedef void (*attn_bscores_fn)(const float *q, int nq, const uint16_t *k, int n_keys, int hd,
                                float scale, float *s, size_t ss, float *tile);
typedef void (*attn_bwsum_fn)(const float *w, size_t ws, const int *nk, int nq, const uint16_t *v,
                              int hd, float *const *out);
typedef void (*attn_bsoftmax_fn)(float *s, size_t ss, const int *off, const int *n, int nq);
/* y[i] = x[i] rounded to F16 precision (round to nearest even), as llama.cpp converts the query
 * to F16 for the Q.K product; the same bits on every path (F16C / the scalar oracle of fp16.h). */
typedef void (*attn_round_fn)(const float *x, float *y, int n);

struct attn_kernels {
    attn_scores_fn scores;
    attn_wsum_fn wsum;
    attn_softmax_fn softmax;
    attn_bscores_fn bscores;
    attn_bwsum_fn bwsum;
    attn_bsoftmax_fn bsoftmax;
    attn_round_fn round_f16;
    const char *name;
};

/* Most queries a block holds, and the per-thread score memory the context aims for: a block has
 * ATTN_BLOCK_MAX rows up to n_ctx 16384, fewer beyond (down to 1), so score rows take at most
 * 2 MiB per thread whenever n_ctx <= 512K (context.c). 32 rather than 16: each K and V row is
 * read and converted once per block (pp512 at depth 4096, Qwen2.5-0.5B: +3 %,
 * docs/results/kernels-2026-11.md "Attention"). */
enum { ATTN_BLOCK_MAX = 32, ATTN_SCORE_BYTES = 2 << 20 };
/* Keys per tile of the block scores (attn_bscores' scratch holds ATTN_TILE_KEYS * hd floats). */
enum { ATTN_TILE_KEYS = 32 };

/* The kernels for this CPU (and head_dim: SIMD paths need hd % 16 (AVX-512) or % 8 (AVX2)). */
struct attn_kernels attn_select(int hd);

/* The block softmax of every path (attn.c), from the path's own pieces: max of n floats,
 * s = vexp_f32(s - mx) in place (vexp.h), s = F16(s * inv) in place. The double sums in between
 * are the same code for all: each row's in index order, eight rows' additions interleaved. */
typedef float (*attn_max_fn)(const float *s, int n);
typedef void (*attn_norm_fn)(float *s, int n, float inv);
void attn_bsoftmax_with(float *s, size_t ss, const int *off, const int *n, int nq, attn_max_fn max,
                        void (*exp_sub)(float *s, int n, float mx), attn_norm_fn norm);

void attn_scores_scalar(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s);
void attn_wsum_scalar(const float *w, const uint16_t *v, int n_keys, int hd, float *out);
void attn_softmax_scalar(float *s, int n);
void attn_bscores_scalar(const float *q, int nq, const uint16_t *k, int n_keys, int hd,
                         float scale, float *s, size_t ss, float *tile);
void attn_bsoftmax_scalar(float *s, size_t ss, const int *off, const int *n, int nq);
void attn_round_f16_scalar(const float *x, float *y, int n);
void attn_bwsum_scalar(const float *w, size_t ws, const int *nk, int nq, const uint16_t *v, int hd,
                       float *const *out);

void attn_scores_avx2(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s);
void attn_wsum_avx2(const float *w, const uint16_t *v, int n_keys, int hd, float *out);
void attn_softmax_avx2(float *s, int n);
void attn_bscores_avx2(const float *q, int nq, const uint16_t *k, int n_keys, int hd, float scale,
                       float *s, size_t ss, float *tile);
void attn_bsoftmax_avx2(float *s, size_t ss, const int *off, const int *n, int nq);
void attn_round_f16_avx2(const float *x, float *y, int n);
void attn_bwsum_avx2(const float *w, size_t ws, const int *nk, int nq, const uint16_t *v, int hd,
                     float *const *out);

void attn_scores_avx512(const float *q, const uint16_t *k, int n_keys, int hd, float scale, float *s);
void attn_wsum_avx512(const float *w, const uint16_t *v, int n_keys, int hd, float *out);
void attn_softmax_avx512(float *s, int n);
void attn_bscores_avx512(const float *q, int nq, const uint16_t *k, int n_keys, int hd,
                         float scale, float *s, size_t ss, float *tile);
void attn_bsoftmax_avx512(float *s, size_t ss, const int *off, const int *n, int nq);
void attn_round_f16_avx512(const float *x, float *y, int n);
void attn_bwsum_avx512(const float *w, size_t ws, const int *nk, int nq, const uint16_t *v, int hd,
                       float *const *out);

#endif

/* train_ops.h — forward and backward of every op the trainer uses, on plain row-major arrays.
 *
 * Shapes are given as (rows, cols); a "row" is one token. Backward functions ACCUMULATE (+=)
 * into the gradients of their inputs and weights, because in a transformer every activation
 * gradient is a sum (residual stream, shared inputs of q/k/v) and weight gradients sum over
 * micro-batches. Numerics follow src/model/forward.c (RMSNorm sum of squares in double, the RoPE
 * angle table built by repeated float multiplication) so the trained model's forward equals
 * tern's inference forward on the exported file. tests/test_train_ops.c checks every backward
 * against central finite differences. */
#ifndef TERN_TRAIN_OPS_H
#define TERN_TRAIN_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/gemm_f32.h"

/* y (n, d) = x / rms(x) * w; rstd (n) saved for backward. */
void train_rmsnorm_fwd(const float *x, const float *w, float *y, float *rstd, int n, int d,
                       float eps);
/* dx (n, d) += ..., dw (d) += ... given dy (n, d). */
void train_rmsnorm_bwd(const float *x, const float *w, const float *rstd, const float *dy,
                       float *dx, float *dw, int n, int d);

/* The RoPE angle table: cs[(pos * half + i) * 2 + {0,1}] = cos, sin of pos * base^(-2i/n_rot),
 * for pos < n_pos, half = n_rot / 2. Caller frees. NULL if out of memory. */
float *train_rope_table(int n_pos, int n_rot, float base);
/* Rotate (in place) n rows of n_head heads of hd floats (row stride ld) by their positions;
 * NORM pairs (2i, 2i+1), NEOX pairs (i, i + hd/2). inverse = rotate back (the backward). */
void train_rope(float *x, int n, int ld, int n_head, int hd, const int32_t *pos, const float *cs,
                bool neox, bool inverse);

/* h = silu(g) * u over n floats. */
void train_swiglu_fwd(const float *g, const float *u, float *h, size_t n);
/* dg += dh * d/dg, du += dh * silu(g). */
void train_swiglu_bwd(const float *g, const float *u, const float *dh, float *dg, float *du,
                      size_t n);

/* Causal attention of one head over one packed sequence of T rows. Row i attends to rows
 * [start[i], i] (start[i] = first row of its document, so packed documents do not see each
 * other). q (T, ldq) and o (T, ldq) hold this head's hd columns at their pointers; k, v (T, ldk)
 * likewise for its KV head. lse (T, ldl) = log-sum-exp of each row's scaled scores. ws:
 * train_attn_ws_floats(T) floats + one GEMM workspace (kern_gemm_ws_floats()). */
struct train_attn {
    int T, hd;
    const int32_t *start;  /* (T) */
    float scale;           /* 1/sqrt(hd) */
    const float *q, *k, *v;
    int ldq, ldk;
    float *o;              /* (T, ldq) forward output */
    float *lse;            /* (T) with stride ldl */
    int ldl;
    enum kern_gemm_path path;
    bool f16_probs;        /* round probabilities to F16 before P.V, as tern's inference does
                              (the parity check only; training keeps them F32) */
};
size_t train_attn_ws_floats(int T);
void train_attn_fwd(const struct train_attn *a, float *ws);
/* Given o, lse from the forward and do_ (T, ldq): dq (T, ldq) = (written, not accumulated),
 * dk, dv (T, ldq: per query head, summed into the KV head by the caller) += . */
void train_attn_bwd(const struct train_attn *a, const float *do_, float *dq, float *dk, float *dv,
                    float *ws);

/* Masked cross-entropy over n rows of V logits: rows with weight w > 0 add
 * w * (logsumexp - logit[target]) to the returned sum; logits are replaced by the gradient of
 * scale * that sum (softmax - onehot) * w * scale; rows with w = 0 get zero gradient. */
double train_xent(float *logits, const int32_t *target, const float *weight, int n, int V,
                  double scale);

#endif

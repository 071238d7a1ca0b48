/* delta.h — the inner loops of one Gated DeltaNet value head for one token (qwen35's recurrent
 * layers; src/model/rec_state.c has the whole recurrence and where the numbers come from).
 *
 * With S0 the (hk, hv) state before the token (row c belongs to key component c; NULL: zeros),
 * S the state after it (may be S0), k and q the head's l2-normalized key and query (hk), v its
 * value (hv):
 *   v' = S0^T k, o = S0^T q                        (sums over c in order 0 .. hk-1)
 *   u  = v * beta - v' * bd                        (bd = beta * decay)
 *   out = u * attn + o * ds                        (attn = k.q / sqrt(hk), ds = decay / sqrt(hk))
 *   S  = clamp(S0 * decay + u k^T, -1e6, 1e6)
 * The scalar version is the reference; AVX2 / AVX-512 sum in the same order with fused
 * multiply-adds (rounding differs slightly; test_rec_state compares them). A context uses one
 * path for every pass and for rollback replay, so its results are exact among themselves. */
#ifndef TERN_KERNELS_DELTA_H
#define TERN_KERNELS_DELTA_H

typedef void (*delta_head_fn)(const float *S0, float *S, const float *q, const float *k,
                              const float *v, float beta, float bd, float decay, float attn,
                              float ds, float *out, int hk, int hv);

struct delta_kernels {
    delta_head_fn head;
    const char *name;
};

/* The path for this CPU (kern_isa_name(), TERN_KERNELS) and value head size hv (SIMD paths need
 * hv % 16 (AVX-512) or % 8 (AVX2)); hv <= 1024. */
struct delta_kernels delta_select(int hv);

void delta_head_scalar(const float *S0, float *S, const float *q, const float *k, const float *v,
                       float beta, float bd, float decay, float attn, float ds, float *out, int hk,
                       int hv);
#if defined(__x86_64__)
void delta_head_avx2(const float *S0, float *S, const float *q, const float *k, const float *v,
                     float beta, float bd, float decay, float attn, float ds, float *out, int hk,
                     int hv);
void delta_head_avx512(const float *S0, float *S, const float *q, const float *k, const float *v,
                       float beta, float bd, float decay, float attn, float ds, float *out, int hk,
                       int hv);
#endif

#endif

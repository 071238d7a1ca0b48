/* delta.h — the inner loops of one Gated DeltaNet value head over a run of tokens (qwen35's
 * recurrent layers; src/model/rec_state.c has the whole recurrence and where the numbers come
 * from).
 *
 * Per token, with S0 the (hk, hv) state before it (row c belongs to key component c; NULL:
 * zeros), S the state after it, k and q the head's l2-normalized key and query (hk), v its
 * value (hv):
 *   v' = S0^T k, o = S0^T q                        (sums over c in order 0 .. hk-1)
 *   u  = v * beta - v' * bd                        (bd = beta * decay)
 *   out = u * attn + o * ds                        (attn = k.q / sqrt(hk), ds = decay / sqrt(hk))
 *   S  = clamp(S0 * decay + u k^T, -1e6, 1e6)
 * Every value component j (a column of S) depends on its own column only, so a run takes a
 * block of columns through all its tokens while that slice of the state stays in L1, and
 * computes the next token's v' and o in the same pass that writes the state (one pass over
 * the state per token instead of three). Per element the operations and their order are those
 * of one token at a time, so a run gives the same bits as its tokens one by one, for any block
 * width.
 * The scalar version is the reference; AVX2 / AVX-512 sum in the same order with fused
 * multiply-adds (rounding differs slightly; test_rec_state compares them). A context uses one
 * path for every pass and for rollback replay, so its results are exact among themselves. */
#ifndef TERN_KERNELS_DELTA_H
#define TERN_KERNELS_DELTA_H

#include <stddef.h>

/* Token parameters, DELTA_PAR floats per (token, head): beta, bd, decay, attn, ds. */
enum { DELTA_PAR = 5 };

/* A run of m consecutive tokens of one sequence through one value head. Token i lives in row
 * rows[i] of the buffers: its q at qkv + row * qkv_stride + q_off (k_off, v_off likewise), its
 * parameters at par + row * par_stride, its output at out + row * out_stride. keep: NULL, or 2
 * per token, each NULL or a buffer whose head state (hk, hv) at keep_off gets a copy of the
 * state after the token. */
struct delta_run {
    const int *rows;
    int m, hk, hv;
    const float *qkv;
    size_t qkv_stride, q_off, k_off, v_off;
    const float *par;
    size_t par_stride;
    float *out;
    size_t out_stride;
    float *const *keep;
    size_t keep_off;
    float *work; /* NULL, or hk * DELTA_BLOCK floats, 64-byte aligned (below) */
};

/* A run of more than DELTA_WORK_MIN tokens with a work buffer keeps its block of at most
 * DELTA_BLOCK columns there, rows packed: in the state itself a block's rows lie a row of hv
 * floats apart, and a 128 x 64 block at that stride maps onto too few L1 sets to stay (measured:
 * the run got slower than three passes over the whole state per token). A shorter run works
 * on the state directly: copying in and out would cost more than it saves (a speculative
 * verify pass of qwen3.5-0.8b Q4_0: the DeltaNet steps of 3 tokens 25 % faster, of 4 tokens
 * 3-16 %, level at 6). */
enum { DELTA_BLOCK = 64, DELTA_WORK_MIN = 5 };

/* The run over value components [j0, j1) (a multiple of the path's vector width apart, and
 * from 0; at most DELTA_BLOCK when work is used), S0 the state before token 0 (NULL: zeros), S
 * where the state goes (may be S0). */
typedef void (*delta_run_fn)(const struct delta_run *run, const float *S0, float *S, int j0, int j1);

/* The causal conv's sums for one token over n channels: y[c] = x[0][c] w[c] + x[1][c] w[ws + c]
 * + ... + x[k-1][c] w[(k-1) ws + c], from 0 in tap order, each product rounded before it is
 * added (no fused multiply-add): the same bits on every path. */
typedef void (*delta_conv_fn)(const float *const *x, int k, const float *w, size_t ws, float *y, int n);

struct delta_kernels {
    delta_run_fn run;
    delta_conv_fn conv;
    const char *name;
};

/* The path for this CPU (kern_isa_name(), TERN_KERNELS) and value head size hv (SIMD paths need
 * hv % 16 (AVX-512) or % 8 (AVX2)). */
struct delta_kernels delta_select(int hv);

/* The paths' shared parts: the keep copies after token i of the nb columns from j0, whose rows
 * are at S + c * ld; a block into the work buffer (zeros for S0 NULL) and back. */
void delta_keep_cols(const struct delta_run *run, int i, const float *S, size_t ld, int j0, int nb);
void delta_work_in(const struct delta_run *run, const float *S0, int j0, int nb);
void delta_work_out(const struct delta_run *run, float *S, int j0, int nb);

void delta_run_scalar(const struct delta_run *run, const float *S0, float *S, int j0, int j1);
void delta_conv_scalar(const float *const *x, int k, const float *w, size_t ws, float *y, int n);
#if defined(__x86_64__)
void delta_run_avx2(const struct delta_run *run, const float *S0, float *S, int j0, int j1);
void delta_run_avx512(const struct delta_run *run, const float *S0, float *S, int j0, int j1);
void delta_conv_avx2(const float *const *x, int k, const float *w, size_t ws, float *y, int n);
void delta_conv_avx512(const float *const *x, int k, const float *w, size_t ws, float *y, int n);
#endif

#endif

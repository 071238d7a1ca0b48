/* kern_invariant.h — which matmuls give a token the same bits whatever batch it is in.
 *
 * Read first: kernels.h (kern_matmul) and kern_decode_avx512.c (the summation order the AVX-512
 * decode and prefill kernels share).
 *
 * "Batch-invariant" means: for a weight type on the active path, kern_matmul's output for one
 * (row, token) is a function of that row and that token's activations only — the same bits for
 * n_tok = 1 and for the same token inside a batch of 64, and for any row range [r0, r1). The
 * prompt cache uses it to decide how many tokens a hit may restore (a restored prefix is only
 * exact when the suffix is computed as in the cold run). */
#ifndef TERN_KERN_INVARIANT_H
#define TERN_KERN_INVARIANT_H

#include <stdbool.h>

/* True when kern_matmul of wtype is batch-invariant on the path chosen now (kern_isa_name):
 * scalar: every type (one reference dot per output); avx512: Q4_0, Q8_0 (decode and prefill
 * kernels share one float order). False otherwise — the AVX2/NEON tiles and the float formats
 * pick their accumulator count from the tile shape, which depends on n_tok; Q4_K/Q6_K decode on
 * AVX-512 still takes those tiles (see kern_avx512_decode_kquant in kernels.h for why). Weights
 * repacked at load (kern_packed.h) are read by one tile at every batch size, on avx512 and avx2:
 * model_weight_batch_invariant counts those, this query only answers for kern_matmul. */
bool kern_batch_invariant(int wtype);

#endif

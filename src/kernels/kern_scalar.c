/* kern_scalar.c — the portable path: every weight row against every activation row through
 * the reference dot product of src/quant. Slow, obviously right, and the oracle for the SIMD
 * paths. */
#include "kernels/kernels.h"

#include "quant/quant.h"
#include "util/check.h"

void kern_matmul_scalar(int wtype, const void *W, size_t w_stride, const void *A,
                        size_t a_stride, int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y,
                        int64_t ldy)
{
    const struct quant_traits *tr = quant_traits_get(wtype);
    /* the oracle the tests call directly: the same contract as kern_matmul */
    TERN_ASSERT(tr && k > 0 && k % tr->block_size == 0, "k is a multiple of the block size");
    TERN_ASSERT(n_tok >= 1 && r0 >= 0 && (n_tok == 1 || r1 <= r0 || ldy >= r1));
    /* rows outer: each weight row is read from memory once and stays in cache for all tokens */
    for (int64_t r = r0; r < r1; r++) {
        const char *w = (const char *)W + (size_t)r * w_stride;
        for (int t = 0; t < n_tok; t++)
            Y[t * ldy + r] = tr->vec_dot_ref(k, w, (const char *)A + (size_t)t * a_stride);
    }
}

void kern_quantize_act_scalar(int act_type, const float *x, void *y, int64_t k)
{
    const struct quant_traits *tr = quant_traits_get(act_type);
    TERN_ASSERT(tr && k % tr->block_size == 0);
    tr->from_float(x, y, k);
}

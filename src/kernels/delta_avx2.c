/* delta_avx2.c — the DeltaNet kernels of delta.h on AVX2 + FMA (delta_simd_impl.h has them). */
#include <immintrin.h>

#define DV __m256
#define DL 8
#define D(op) _mm256_##op
#define DELTA_DIRECT_NV 4
#define DELTA_NV 2
#define DELTA_FN(name) name##_avx2
#include "kernels/delta_simd_impl.h"

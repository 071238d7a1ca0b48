/* delta_avx512.c — the DeltaNet kernels of delta.h on AVX-512 (delta_simd_impl.h has them). */
#include <immintrin.h>

#define DV __m512
#define DL 16
#define D(op) _mm512_##op
#define DELTA_DIRECT_NV 8
#define DELTA_NV 4
#define DELTA_FN(name) name##_avx512
#include "kernels/delta_simd_impl.h"

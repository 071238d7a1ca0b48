/* quant.h — tern's tensor formats: block layouts, F32 <-> type conversion and the scalar
 * reference dot products (the oracle every SIMD kernel in src/kernels is tested against).
 *
 * Read first: the GGUF/ggml block layouts below (byte-exact with files written by llama.cpp),
 * then quant_types.c (the per-type table). Layouts and rounding follow llama.cpp's
 * ggml-quants.c; the activation formats (Q8_0 and Q8_K rows built from F32 activations right
 * before a matmul) follow ggml-cpu exactly, because tern's parity tests compare logits with
 * llama.cpp's, and one flipped rounding in an activation block shows up in the logits.
 *
 * Weight type -> activation ("vec_dot") type:
 *   F32 -> F32, F16 -> F16, BF16 -> BF16, Q4_0 -> Q8_0, Q4_1 -> Q8_1, Q5_0 -> Q8_0, Q5_1 -> Q8_1,
 *   Q8_0 -> Q8_0,
 *   Q4_K -> Q8_K, Q5_K -> Q8_K, Q6_K -> Q8_K.
 */
#ifndef TERN_QUANT_H
#define TERN_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tern_gguf.h"

#define QUANT_QK4_0 32
#define QUANT_QK5_0 32
#define QUANT_QK8_0 32
#define QUANT_QK_K 256

/* 32 weights: x[j] = d * ((qs[j] & 15) - 8), x[j+16] = d * ((qs[j] >> 4) - 8), j < 16. */
struct quant_block_q4_0 {
    uint16_t d;                   /* fp16 scale */
    uint8_t qs[QUANT_QK4_0 / 2];
};
/* Q4_0's nibbles with a min instead of the offset: x = d * q + m, q 0..15. */
struct quant_block_q4_1 {
    uint16_t d;                   /* fp16 scale */
    uint16_t m;                   /* fp16 min */
    uint8_t qs[QUANT_QK4_0 / 2];
};
/* 32 weights: code q[j] = (qs[j] & 15) | bit j of qh << 4 and q[j+16] = (qs[j] >> 4) | bit j+16
 * of qh << 4 (j < 16; qh read as a little-endian uint32); x = d * (q - 16). */
struct quant_block_q5_0 {
    uint16_t d;                   /* fp16 scale */
    uint8_t qh[4];                /* fifth bits of the 32 codes */
    uint8_t qs[QUANT_QK5_0 / 2];
};
/* Q5_0's codes with a min instead of the offset: x = d * q + m. */
struct quant_block_q5_1 {
    uint16_t d;                   /* fp16 scale */
    uint16_t m;                   /* fp16 min */
    uint8_t qh[4];
    uint8_t qs[QUANT_QK5_0 / 2];
};
/* Activation-only (Q4_1 and Q5_1 matmuls): Q8_0 plus s = d * sum(qs) in fp16, for the min term. */
struct quant_block_q8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[QUANT_QK8_0];
};
/* 32 values: x[j] = d * qs[j]. */
struct quant_block_q8_0 {
    uint16_t d;                   /* fp16 scale */
    int8_t qs[QUANT_QK8_0];
};
/* 256 weights in 8 sub-blocks of 32: x = d*sc[j]*q - dmin*m[j], with 6-bit sc/m packed in
 * scales[12] (see quant_q4k_scale_min) and 4-bit q: byte l of 32-byte chunk c holds element
 * 64c+l in its low nibble and 64c+32+l in its high nibble. */
struct quant_block_q4_K {
    uint16_t d;                   /* fp16 super-block scale for the sub-block scales */
    uint16_t dmin;                /* fp16 super-block scale for the sub-block mins */
    uint8_t scales[12];
    uint8_t qs[QUANT_QK_K / 2];
};
/* As Q4_K with 5-bit codes: the low 4 bits packed as in Q4_K, the fifth bit of element 64c+l
 * (low nibble) in bit 2c of qh[l] and of element 64c+32+l (high nibble) in bit 2c+1, l < 32;
 * i.e. sub-block j's fifth bits are bit j of the 32 bytes of qh. */
struct quant_block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[QUANT_QK_K / 8];
    uint8_t qs[QUANT_QK_K / 2];
};
/* 256 weights in 16 sub-blocks of 16: x = d * scales[i/16] * (q - 32), q 6 bits: low 4 in ql,
 * high 2 in qh (layout in quant_q6_k.c). */
struct quant_block_q6_K {
    uint8_t ql[QUANT_QK_K / 2];
    uint8_t qh[QUANT_QK_K / 4];
    int8_t scales[QUANT_QK_K / 16];
    uint16_t d;                   /* fp16 */
};
/* Activation-only: 256 values x = d * qs, plus bsums[i] = sum of qs[16i .. 16i+15]. */
struct quant_block_q8_K {
    float d;
    int8_t qs[QUANT_QK_K];
    int16_t bsums[QUANT_QK_K / 16];
};

_Static_assert(sizeof(struct quant_block_q4_0) == 18, "q4_0 layout");
_Static_assert(sizeof(struct quant_block_q4_1) == 20, "q4_1 layout");
_Static_assert(sizeof(struct quant_block_q5_0) == 22, "q5_0 layout");
_Static_assert(sizeof(struct quant_block_q5_1) == 24, "q5_1 layout");
_Static_assert(sizeof(struct quant_block_q8_1) == 36, "q8_1 layout");
_Static_assert(sizeof(struct quant_block_q8_0) == 34, "q8_0 layout");
_Static_assert(sizeof(struct quant_block_q4_K) == 144, "q4_K layout");
_Static_assert(sizeof(struct quant_block_q5_K) == 176, "q5_K layout");
_Static_assert(sizeof(struct quant_block_q6_K) == 210, "q6_K layout");
_Static_assert(sizeof(struct quant_block_q8_K) == 292, "q8_K layout");

struct quant_traits {
    int type;                 /* enum tern_type */
    const char *name;         /* "Q4_K" */
    int64_t block_size;       /* elements per block */
    int64_t block_bytes;
    int vec_dot_type;         /* activation format this weight type is multiplied with */
    /* F32 -> type as ggml-cpu does it at run time (for activations: bit-identical to
     * llama.cpp's quantization before a matmul). n % block_size == 0. */
    void (*from_float)(const float *x, void *y, int64_t n);
    void (*to_float)(const void *x, float *y, int64_t n);
    /* scalar reference dot product: weight row (type) . activation row (vec_dot_type) */
    float (*vec_dot_ref)(int64_t n, const void *w, const void *a);
    /* F32 -> type as llama.cpp's quantize_row_*_ref does it (what llama-quantize writes into
     * files). Same as from_float except Q8_0, whose run-time path rounds half to even and
     * scales by 127/amax where the reference uses roundf and 1/d. */
    void (*from_float_ref)(const float *x, void *y, int64_t n);
};

/* NULL for unknown or unsupported types. The table is static: pointers live forever. */
const struct quant_traits *quant_traits_get(int type);
/* bytes of a row of n elements (n % block_size == 0); 0 for unknown types. Works for every
 * known GGUF type, supported or not (the GGUF reader sizes tensors with it). */
size_t quant_row_bytes(int type, int64_t n);

/* ---- per-format functions (the table in quant_types.c points at these) ---- */

/* llama.cpp's nearest_int: round half to even through the float adder (|x| < 2^22). */
static inline int quant_nearest_int(float f)
{
    float v = f + 12582912.f; /* 1.5 * 2^23: the integer lands in the low mantissa bits */
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

void quant_f32_from_float(const float *x, void *y, int64_t n);
void quant_f32_to_float(const void *x, float *y, int64_t n);
float quant_f32_dot_ref(int64_t n, const void *w, const void *a);
void quant_f16_from_float(const float *x, void *y, int64_t n);
void quant_f16_to_float(const void *x, float *y, int64_t n);
float quant_f16_dot_ref(int64_t n, const void *w, const void *a);
void quant_bf16_from_float(const float *x, void *y, int64_t n);
void quant_bf16_to_float(const void *x, float *y, int64_t n);
float quant_bf16_dot_ref(int64_t n, const void *w, const void *a);

void quant_q8_0_from_float_ref(const float *x, void *y, int64_t n);
void quant_q8_0_from_float_act(const float *x, void *y, int64_t n);
void quant_q8_0_to_float(const void *x, float *y, int64_t n);
float quant_q8_0_dot_ref(int64_t n, const void *w, const void *a);

void quant_q4_0_from_float(const float *x, void *y, int64_t n);
void quant_q4_0_to_float(const void *x, float *y, int64_t n);
float quant_q4_0_dot_ref(int64_t n, const void *w, const void *a);

void quant_q4_1_from_float(const float *x, void *y, int64_t n);
void quant_q4_1_to_float(const void *x, float *y, int64_t n);
float quant_q4_1_dot_ref(int64_t n, const void *w, const void *a);

void quant_q5_0_from_float(const float *x, void *y, int64_t n);
void quant_q5_0_to_float(const void *x, float *y, int64_t n);
float quant_q5_0_dot_ref(int64_t n, const void *w, const void *a);

void quant_q5_1_from_float(const float *x, void *y, int64_t n);
void quant_q5_1_to_float(const void *x, float *y, int64_t n);
float quant_q5_1_dot_ref(int64_t n, const void *w, const void *a);
/* Q8_1 as ggml-cpu's x86 path quantizes activations (as quant_q8_0_from_float_act, plus s) */
void quant_q8_1_from_float_act(const float *x, void *y, int64_t n);
void quant_q8_1_to_float(const void *x, float *y, int64_t n);

void quant_q8_K_from_float(const float *x, void *y, int64_t n);
void quant_q8_K_to_float(const void *x, float *y, int64_t n);

void quant_q4_K_from_float(const float *x, void *y, int64_t n);
void quant_q4_K_to_float(const void *x, float *y, int64_t n);
float quant_q4_K_dot_ref(int64_t n, const void *w, const void *a);
/* 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes (Q4_K and Q5_K). */
void quant_q4k_scale_min(int j, const uint8_t *scales, uint8_t *sc, uint8_t *m);
/* llama.cpp's make_qkx2_quants (use_mad false): fit x ~ scale*L + min, min <= 0, L in 0..nmax,
 * by weighted least squares over nstep+1 candidate scales; returns scale, *neg_min = -min.
 * Laux: n bytes of scratch. Shared by the Q4_K and Q5_K quantizers. */
float quant_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L,
                          float *neg_min, uint8_t *Laux, float rmin, float rdelta, int nstep);
/* Q4_K / Q5_K: the 6-bit scales and mins of the 8 sub-blocks, quantized against the largest
 * of each and packed into scales[12]; *d and *dmin get the fp16 super-block scales. */
void quant_kquant_pack_scales(const float scales[8], const float mins[8], uint8_t packed[12],
                              uint16_t *d, uint16_t *dmin);
/* Q4_K / Q5_K: one super-block of 256 values x fitted as llama.cpp does (per sub-block of 32:
 * weights sqrt(mean x^2) + |x|, quant_fit_scale_min with nmax levels and the format's search
 * rmin/rdelta/nstep), scales and mins packed, then the codes L[256] (0..nmax) re-derived from
 * the rounded scales; a sub-block whose rounded scale is 0 keeps the fit's codes. */
void quant_kquant_fit_superblock(const float *x, int nmax, float rmin, float rdelta, int nstep,
                                 uint8_t packed[12], uint16_t *d, uint16_t *dmin, uint8_t *L);

void quant_q5_K_from_float(const float *x, void *y, int64_t n);
void quant_q5_K_to_float(const void *x, float *y, int64_t n);
float quant_q5_K_dot_ref(int64_t n, const void *w, const void *a);

void quant_q6_K_from_float(const float *x, void *y, int64_t n);
void quant_q6_K_to_float(const void *x, float *y, int64_t n);
float quant_q6_K_dot_ref(int64_t n, const void *w, const void *a);

#endif

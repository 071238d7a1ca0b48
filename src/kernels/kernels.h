/* kernels.h — the matmul and activation-quantization kernels the forward pass calls, with one
 * implementation per ISA (scalar, avx2, avx512) chosen once at run time.
 *
 * Read first: src/quant/quant.h (formats and the scalar reference dots every path must agree
 * with). The scalar path is the reference loop over quant_traits::vec_dot_ref; SIMD paths live
 * in kern_*_avx2.c / kern_*_avx512.c, compiled with those ISA flags and only called after CPU
 * detection. A path that lacks a kernel for some type falls back to scalar for that type. */
#ifndef TERN_KERNELS_H
#define TERN_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Y[t*ldy + r] = dot(W row r, A row t) for r in [r0, r1), t in [0, n_tok).
 * W: weight matrix in wtype, rows of k elements, w_stride bytes apart.
 * A: n_tok activation rows already quantized to quant_traits_get(wtype)->vec_dot_type,
 *    a_stride bytes apart. k is a multiple of the block size. Threads call this on disjoint
 *    row ranges [r0, r1) of the same matrix, concurrently: no shared mutable state. */
void kern_matmul(int wtype, const void *W, size_t w_stride, const void *A, size_t a_stride,
                 int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy);
/* Quantize one F32 activation row into act_type (a vec_dot_type: F32, F16, BF16, Q8_0, Q8_K)
 * — the fast path of quant_traits_get(act_type)->from_float, bit-identical to it. */
void kern_quantize_act(int act_type, const float *x, void *y, int64_t k);
/* Name of the ISA path chosen at run time for this CPU ("avx512", "avx2", "scalar"); the choice
 * is made once (kern_init, thread-safe, idempotent) by CPU feature detection
 * (__builtin_cpu_supports). TERN_KERNELS=scalar|avx2|avx512 in the environment forces a path
 * (for tests and comparisons; a path the CPU lacks falls back with a warning on stderr). */
const char *kern_isa_name(void);
void kern_init(void);
/* Force a path for tests: returns false if the CPU cannot run it (the path is then unchanged).
 * Not for use while other threads run kernels. */
bool kern_force_isa(const char *name);
/* Whether the avx2 path's panel tile (weights repacked at load, kern_packed.h) uses AVX-VNNI's
 * vpdpbusd: detected once (CPUID avxvnni), off with TERN_AVXVNNI=0 in the environment.
 * kern_force_avxvnni sets it for tests (false: the CPU lacks AVX-VNNI, nothing changed). */
bool kern_avx2_vnni(void);
bool kern_force_avxvnni(bool on);
/* Whether the CPU has AVX-VNNI (the VEX-encoded vpdpbusd), whatever TERN_AVXVNNI says. */
bool kern_cpu_has_avxvnni(void);
/* kern_isa_name, with "+avxvnni" on the avx2 path when its panel tile uses AVX-VNNI: what
 * tern_kernels_name reports (tern check, bench and serve). */
const char *kern_path_name(void);

/* ---- internal: what each ISA file provides (kern_dispatch.c assembles them) ---- */
typedef void (*kern_matmul_fn)(const void *W, size_t w_stride, const void *A, size_t a_stride,
                               int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y,
                               int64_t ldy);
typedef void (*kern_quant_fn)(const float *x, void *y, int64_t k);

/* Per-type kernel of a path, or NULL when it has none for that type (scalar is used). */
kern_matmul_fn kern_avx2_matmul(int wtype);
kern_quant_fn kern_avx2_quant(int act_type);
kern_matmul_fn kern_avx512_matmul(int wtype);
kern_quant_fn kern_avx512_quant(int act_type);
/* The Q5 formats' kernels and Q5_1's activation quantizer (kern_q5_avx2.c, kern_q5_avx512.c),
 * or NULL for other types;
 * kern_dispatch.c adds them to the AVX2 / AVX-512 paths. */
kern_matmul_fn kern_q5_avx2_matmul(int wtype);
kern_matmul_fn kern_q5_avx512_matmul(int wtype);
kern_quant_fn kern_q5_avx2_quant(int act_type);   /* Q8_1 */
kern_quant_fn kern_q5_avx512_quant(int act_type);
/* The AVX-512 prefill kernels of kern_panel_avx512.c (16-row repacked panels), or NULL for a
 * type without one; kern_avx512_matmul routes large n_tok to them. */
kern_matmul_fn kern_avx512_panel_matmul(int wtype);
/* avx2 with AVX-VNNI: kern_q5_decode_avx2.h's Q5_0 / Q5_1 decode kernel (kern_q5_avxvnni.c);
 * false, nothing written, when k is beyond its buffer. */
bool kern_avxvnni_q5_decode(int wtype, const void *W, size_t ws, const void *A, size_t as, int n_tok,
                            int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy);
/* The AVX-512 decode kernels of kern_decode_avx512.c (few tokens, two blocks per zmm): runs
 * kern_matmul's job and returns true, or returns false (nothing written) for a type or size it
 * does not cover. */
bool kern_avx512_decode_matmul(int wtype, const void *W, size_t w_stride, const void *A,
                               size_t a_stride, int n_tok, int64_t k, int64_t r0, int64_t r1,
                               float *Y, int64_t ldy);
/* The Q4_K / Q6_K decode kernels of the same design (same bits as the panels), not routed:
 * with DRAM-resident weights they reach only 0.6-0.85x the bandwidth of the 256-bit tiles
 * (bench_kernels, 1 thread), though 0.9-1.2x in cache. Kept, and tested against the panels,
 * until that is fixed. Same contract as kern_avx512_decode_matmul. */
bool kern_avx512_decode_kquant(int wtype, const void *W, size_t w_stride, const void *A,
                               size_t a_stride, int n_tok, int64_t k, int64_t r0, int64_t r1,
                               float *Y, int64_t ldy);

/* The scalar path, callable directly (tests compare SIMD paths with it). */
void kern_matmul_scalar(int wtype, const void *W, size_t w_stride, const void *A,
                        size_t a_stride, int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y,
                        int64_t ldy);
void kern_quantize_act_scalar(int act_type, const float *x, void *y, int64_t k);

#endif

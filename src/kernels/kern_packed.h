/* kern_packed.h — weight matrices repacked once, at model load, into the layout the kernels of
 * the active path read fastest, and the matmul that uses such a copy.
 *
 * Read first: kernels.h (kern_matmul's contract, which kern_matmul_packed keeps). The kernels
 * room owns the layout (kern_panel_layout.h, "stored layout"; kern_pack.c writes it); the model
 * room decides what to repack (src/model/model_repack.c). The avx512 and avx2 paths share one
 * layout, for Q8_0, Q4_0, Q4_1, Q5_0, Q4_K and Q6_K: a permutation of the rows' own bytes, so the
 * copy is as large as the matrix (plus up to 15 padding rows and 63 bytes per panel). avx512 reads it with its
 * 16-row tile (kern_packed_avx512.c), avx2 with a 256-bit one (kern_panel_avx2.h: AVX-VNNI's
 * vpdpbusd where the CPU has it, vpmaddubsw otherwise). On any other path, type or shape
 * kern_packed_size is 0 and the caller keeps using kern_matmul. */
#ifndef TERN_KERN_PACKED_H
#define TERN_KERN_PACKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes of the packed copy of a rows x k matrix of wtype on the active path, or 0 when the path
 * has no packed layout for it. */
size_t kern_packed_size(int wtype, int64_t rows, int64_t k);

/* Pack rows [r0, r1) of W (rows x k, rows ws bytes apart) into P, which holds
 * kern_packed_size(wtype, rows, k) bytes and is 64-byte aligned. r0 is a multiple of 16 and r1
 * one too or rows: threads may pack disjoint such ranges of one matrix at once. Only call when
 * kern_packed_size is not 0. */
void kern_pack(int wtype, const void *W, size_t ws, int64_t rows, int64_t k, int64_t r0,
               int64_t r1, void *P);

/* kern_matmul(wtype, W, ws, A, as, n_tok, k, r0, r1, Y, ldy), reading P (a packed copy of W, or
 * NULL) where the active path's route prefers it. W stays the fallback: a path without a panel
 * tile forced after packing (kern_force_isa: scalar) reads W, so keep it mapped. Same results,
 * bit for bit, as kern_matmul on the avx512 path (the same tile; docs/kernels.md "Integer sums and
 * batch invariance"), and the same bits on avx2 (the 256-bit tile runs the same float operations
 * per lane). */
void kern_matmul_packed(int wtype, const void *W, size_t ws, const void *P, const void *A,
                        size_t as, int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y,
                        int64_t ldy);

/* True when kern_matmul_packed with P never reads W on the active path (for every n_tok), so a
 * caller may let the kernel drop W's pages after packing. */
bool kern_packed_replaces(int wtype);

/* ---- internal: the implementations ---- */
/* The stored layout (kern_pack.c), whichever path reads it. */
size_t kern_panel_packed_size(int wtype, int64_t rows, int64_t k);
void kern_panel_pack(int wtype, const void *W, size_t ws, int64_t rows, int64_t k, int64_t r0,
                     int64_t r1, void *P);
/* The matmuls over P for any n_tok (no route): bench_smallm and the tests call them directly.
 * avx512: kern_packed_avx512.c; avx2 with AVX-VNNI: kern_packed_avxvnni.c; avx2 without:
 * kern_packed_avx2.c (runs on any AVX2 CPU, so tests can hold it against the others). */
void kern_avx512_packed_run(int wtype, const void *P, const void *A, size_t as, int n_tok,
                            int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy);
void kern_avxvnni_packed_run(int wtype, const void *P, const void *A, size_t as, int n_tok,
                             int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy);
/* the same 256-bit VNNI tile with EVEX-encoded vpdpbusd, on AVX-512 CPUs (kern_tune.h) */
void kern_ymm512_packed_run(int wtype, const void *P, const void *A, size_t as, int n_tok,
                            int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy);
void kern_avx2_packed_run(int wtype, const void *P, const void *A, size_t as, int n_tok,
                          int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy);
/* avx2 with AVX-VNNI, weights without a stored copy: the 16-row tile over panels packed per call
 * (kern_panel_avx2.h), which kern_matmul takes from kern_avxvnni_panel_min_tok(wtype) tokens on
 * (INT_MAX: no panel for wtype). */
void kern_avxvnni_panel_run(int wtype, const void *W, size_t ws, const void *A, size_t as, int n_tok,
                            int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy);
int kern_avxvnni_panel_min_tok(int wtype);
/* The same without AVX-VNNI (the vpmaddubsw tile, kern_packed_avx2.c). */
void kern_avx2_panel_run(int wtype, const void *W, size_t ws, const void *A, size_t as, int n_tok, int64_t k,
                         int64_t r0, int64_t r1, float *Y, int64_t ldy);
int kern_avx2_panel_min_tok(int wtype);
/* Fewest tokens from which kern_matmul_packed reads P for wtype on avx512. */
int kern_avx512_packed_min_tok(int wtype);

#endif

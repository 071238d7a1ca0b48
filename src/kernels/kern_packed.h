/* kern_packed.h — weight matrices repacked once, at model load, into the layout the kernels of
 * the active path read fastest, and the matmul that uses such a copy.
 *
 * Read first: kernels.h (kern_matmul's contract, which kern_matmul_packed keeps). The kernels
 * room owns the layout (kern_panel_avx512.h, "stored layout"); the model room decides what to
 * repack (src/model/model_repack.c). Today only the avx512 path has a layout, for Q8_0, Q4_0
 * and Q4_K: a permutation of the rows' own bytes, so the copy is as large as the matrix (plus
 * up to 15 padding rows and 63 bytes per panel). On any other path, type or shape
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
 * NULL) where the active path's route prefers it. W stays the fallback: another path forced
 * after packing (kern_force_isa, TERN_KERNELS) reads W, so keep it mapped. Same results, bit
 * for bit, as kern_matmul on the avx512 path (the same tile; README "Batch-invariant sums"). */
void kern_matmul_packed(int wtype, const void *W, size_t ws, const void *P, const void *A,
                        size_t as, int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y,
                        int64_t ldy);

/* True when kern_matmul_packed with P never reads W on the active path (for every n_tok), so a
 * caller may let the kernel drop W's pages after packing. */
bool kern_packed_replaces(int wtype);

/* ---- internal: the avx512 implementation (kern_packed_avx512.c) ---- */
size_t kern_avx512_packed_size(int wtype, int64_t rows, int64_t k);
void kern_avx512_pack(int wtype, const void *W, size_t ws, int64_t rows, int64_t k, int64_t r0,
                      int64_t r1, void *P);
/* The matmul over P for any n_tok (no route): bench_smallm and the tests call it directly. */
void kern_avx512_packed_run(int wtype, const void *P, const void *A, size_t as, int n_tok,
                            int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy);
/* Fewest tokens from which kern_matmul_packed reads P for wtype on avx512. */
int kern_avx512_packed_min_tok(int wtype);

#endif

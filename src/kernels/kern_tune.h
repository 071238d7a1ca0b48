/* kern_tune.h — which tile the one-token matmuls over packed weights use, chosen by measurement.
 *
 * A packed copy (kern_packed.h) is read by up to four tiles that give the same bits (the same
 * float operations lane for lane, exact integer dots): the 512-bit AVX-512 tile ("zmm"), the
 * 256-bit VNNI tile with EVEX-encoded vpdpbusd on AVX-512 CPUs ("ymm-evex"), the same with
 * AVX-VNNI's VEX encoding ("ymm-vnni") and the 256-bit vpmaddubsw tile ("ymm"). Which streams a
 * copy fastest for one token depends on the core, not only on its flags (Zen 4 runs 512-bit
 * instructions as two halves; cores differ in load ports and prefetchers), so instead of a table
 * of CPU names the model room times the candidates on the model's own matrices at load
 * (model_tune.c) and records the fastest here, per weight format and row length k; the choice
 * is cached per CPU on disk so later loads skip the timing. Batches of 2 or more tokens keep the
 * path's own tile (measured per width in docs/results/kernels-2026-11.md).
 *
 * TERN_DECODE_TILE=zmm|ymm-evex|ymm-vnni|ymm (or kern_tile_force) forces one tile everywhere it
 * can run; "auto" (the default) uses the recorded choices, and the path's default tile where
 * nothing was recorded. */
#ifndef TERN_KERN_TUNE_H
#define TERN_KERN_TUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum kern_tile {
    KERN_TILE_AUTO = 0, /* the recorded choice, else the path's default */
    KERN_TILE_ZMM,
    KERN_TILE_YMM_EVEX,
    KERN_TILE_YMM_VNNI,
    KERN_TILE_YMM,
    KERN_TILE_COUNT_
};

/* "auto", "zmm", "ymm-evex", "ymm-vnni", "ymm"; kern_tile_from_name returns -1 for others. */
const char *kern_tile_name(int tile);
int kern_tile_from_name(const char *name);
/* Whether the active kernel path can read a packed copy of wtype with this tile. */
bool kern_tile_runs(int tile, int wtype);
/* The tile the active path uses when nothing was recorded (zmm on avx512, ymm-vnni or ymm on
 * avx2), or AUTO when there are no packed copies on this path. */
int kern_tile_default(void);
/* The tiles that can read wtype's copies on this path, default first; returns the count. */
int kern_tile_candidates(int wtype, int out[KERN_TILE_COUNT_]);

/* Record the tile for one-token matmuls of (wtype, k); thread-safe, any number of models. */
void kern_tile_set(int wtype, int64_t k, int tile);
/* The tile a one-token matmul of (wtype, k) uses now: the forced one, else the recorded one,
 * else the default. */
int kern_tile_for(int wtype, int64_t k);
/* Force a tile (AUTO: back to the recorded choices); false, nothing changed, when the active
 * path cannot run it for any packed format. Overrides TERN_DECODE_TILE. */
bool kern_tile_force(int tile);
/* The forced tile (TERN_DECODE_TILE or kern_tile_force), or AUTO. */
int kern_tile_forced(void);

/* This CPU and path as a one-line key for cached choices: vendor, family/model/stepping, the
 * brand string and the kernel path ("GenuineIntel 6/143/8 Intel(R) Xeon(R) Processor avx512"). */
void kern_cpu_key(char *buf, size_t size);

/* One matmul of n_tok tokens over the packed copy P with the given tile (which must run:
 * kern_tile_runs); the timing loop of model_tune.c and the tests call it. */
void kern_matmul_packed_tile(int tile, int wtype, const void *P, const void *A, size_t as,
                             int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy);

#endif

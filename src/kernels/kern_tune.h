/* kern_tune.h — which tile the matmuls of 1-3 tokens over packed weights use, chosen by measurement.
 *
 * A packed copy (kern_packed.h) is read by up to four tiles that give the same bits (the same
 * float operations lane for lane, exact integer dots): the 512-bit AVX-512 tile ("zmm"), the
 * 256-bit VNNI tile with EVEX-encoded vpdpbusd on AVX-512 CPUs ("ymm-evex"), the same with
 * AVX-VNNI's VEX encoding ("ymm-vnni") and the 256-bit vpmaddubsw tile ("ymm"). Which streams a
 * copy fastest for one token depends on the core, not only on its flags (Zen 4 runs 512-bit
 * instructions as two halves; cores differ in load ports and prefetchers), so instead of a table
 * of CPU names the model room times the candidates on the model's own matrices at load
 * (model_tune.c) and records the fastest here, per weight format, row length k and call size
 * (one token: decode; 2-3 tokens: speculative verification, prompt lookup, the server's small
 * batched steps); the choice is cached per CPU on disk so later loads skip the timing. Calls of
 * 4 tokens and more keep the path's own tile (on Zen 4 the 512-bit one was ahead from 4 tokens on
 * for the K-quants and from 6 for every format: docs/results/decode-cpus-2026-12-06.md).
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

/* The calls whose tile is measured: class 0 is one token, class 1 two or three; -1 for more
 * (the path's own tile). */
enum { KERN_TILE_CLASSES = 2 };
int kern_tile_class(int n_tok);
/* "1" and "2-3": a class as the cache file and the reports name it; -1 for other names. */
const char *kern_tile_class_name(int cls);
int kern_tile_class_from_name(const char *name);

/* Record the tile for matmuls of class cls over (wtype, k); thread-safe, any number of models. */
void kern_tile_set(int wtype, int64_t k, int cls, int tile);
/* The tile a matmul of n_tok tokens over (wtype, k) uses now: for 1-3 tokens the forced one,
 * else the recorded one, else the default; for more, the default. */
int kern_tile_for(int wtype, int64_t k, int n_tok);
/* Force a tile (AUTO: back to the recorded choices); false, nothing changed, when the active
 * path cannot run it for any packed format. Overrides TERN_DECODE_TILE. */
bool kern_tile_force(int tile);
/* The forced tile (TERN_DECODE_TILE or kern_tile_force), or AUTO. */
int kern_tile_forced(void);

/* This CPU, path and generation of the tiles as a one-line key for cached choices: vendor,
 * family/model/stepping, the brand string, the kernel path and KERN_TILES_GEN
 * ("GenuineIntel 6/143/8 Intel(R) Xeon(R) Processor avx512 tiles-2"). */
void kern_cpu_key(char *buf, size_t size);
/* Raised whenever a tile's speed changes enough to turn a choice, or what is chosen changes (a
 * cache written by an older build then no longer matches, and the tiles are timed again): 2 = the
 * AVX-512 tile's prefetch a sub-block's share at a time, and calls of 2-3 tokens measured too
 * (Zen 4, 2026-12-07). */
#define KERN_TILES_GEN 2

/* One matmul of n_tok tokens over the packed copy P with the given tile (which must run:
 * kern_tile_runs); the timing loop of model_tune.c and the tests call it. */
void kern_matmul_packed_tile(int tile, int wtype, const void *P, const void *A, size_t as,
                             int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy);

#endif

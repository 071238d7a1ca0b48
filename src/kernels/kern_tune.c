/* kern_tune.c — the tile per (format, k, call size): candidates, the recorded choices, forcing.
 *
 * Read kern_tune.h first. The choices live in a small table of atomic words, one per (wtype, k,
 * class) recorded, so a model loading (and recording) while another model's threads decode
 * needs no lock on the hot path: a lookup is a scan of the few words in use (a model has 2-4
 * distinct (format, k) pairs among its packed matrices, two classes each). A full table simply
 * stops recording: the default tile then runs, which is correct, only perhaps slower. */
#include "kernels/kern_tune.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_packed.h"
#include "kernels/kernels.h"
#include "tern.h"
#include "util/check.h"
#if defined(__x86_64__)
#include <cpuid.h>
#endif

static const char *const tile_names[KERN_TILE_COUNT_] = {"auto", "zmm", "ymm-evex", "ymm-vnni",
                                                         "ymm"};

const char *kern_tile_name(int tile)
{
    return tile >= 0 && tile < KERN_TILE_COUNT_ ? tile_names[tile] : "?";
}

/* The index of name in names[0..n), or -1 (also for NULL). */
static int name_index(const char *const *names, int n, const char *name)
{
    for (int i = 0; name && i < n; i++)
        if (!strcmp(name, names[i])) return i;
    return -1;
}

int kern_tile_from_name(const char *name) { return name_index(tile_names, KERN_TILE_COUNT_, name); }

static bool path_is(const char *isa) { return !strcmp(kern_isa_name(), isa); }

bool kern_tile_runs(int tile, int wtype)
{
    if (kern_packed_size(wtype, 1, 256) == 0) return false; /* no copies of wtype on this path */
    const bool avx512 = path_is("avx512"), avx2 = path_is("avx2");
    switch (tile) {
    case KERN_TILE_ZMM: return avx512;
    case KERN_TILE_YMM_EVEX: return avx512;
    case KERN_TILE_YMM_VNNI: return (avx512 || avx2) && kern_cpu_has_avxvnni();
    case KERN_TILE_YMM: return avx512 || avx2;
    default: return false;
    }
}

int kern_tile_default(void)
{
    if (path_is("avx512")) return KERN_TILE_ZMM;
    if (path_is("avx2")) return kern_avx2_vnni() ? KERN_TILE_YMM_VNNI : KERN_TILE_YMM;
    return KERN_TILE_AUTO;
}

int kern_tile_candidates(int wtype, int out[KERN_TILE_COUNT_])
{
    int n = 0;
    const int def = kern_tile_default();
    if (def != KERN_TILE_AUTO && kern_tile_runs(def, wtype)) out[n++] = def;
    for (int t = KERN_TILE_ZMM; t < KERN_TILE_COUNT_; t++)
        if (t != def && kern_tile_runs(t, wtype)) out[n++] = t;
    return n;
}

int kern_tile_class(int n_tok) { return n_tok == 1 ? 0 : n_tok == 2 || n_tok == 3 ? 1 : -1; }

static const char *const class_names[KERN_TILE_CLASSES] = {"1", "2-3"};

const char *kern_tile_class_name(int cls)
{
    return cls >= 0 && cls < KERN_TILE_CLASSES ? class_names[cls] : "?";
}

int kern_tile_class_from_name(const char *name) { return name_index(class_names, KERN_TILE_CLASSES, name); }

/* ---------------------------------------------------------------- the recorded choices
 * A word: bits 0-3 the tile (never 0 once recorded), 4-11 the format, 12-13 the class, 14-63 k. */

#define TILE_SLOTS 64
static _Atomic uint64_t slots[TILE_SLOTS];
static _Atomic int forced = -1; /* -1: not read from the environment yet */

static uint64_t slot_key(int wtype, int64_t k, int cls)
{
    TERN_ASSERT(wtype >= 0 && wtype < 256 && k > 0 && k < ((int64_t)1 << 50) && cls >= 0 && cls < KERN_TILE_CLASSES,
                "the word's fields hold it");
    return ((uint64_t)k << 14) | ((uint64_t)cls << 12) | ((uint64_t)(wtype & 0xff) << 4);
}

void kern_tile_set(int wtype, int64_t k, int cls, int tile)
{
    TERN_ASSERT(tile > KERN_TILE_AUTO && tile < KERN_TILE_COUNT_ && k > 0 && wtype >= 0);
    const uint64_t key = slot_key(wtype, k, cls), word = key | (uint64_t)tile;
    for (int i = 0; i < TILE_SLOTS; i++) {
        uint64_t cur = atomic_load_explicit(&slots[i], memory_order_acquire);
        while (cur == 0) { /* an empty slot: claim it (or learn what a racing writer put there) */
            if (atomic_compare_exchange_weak_explicit(&slots[i], &cur, word, memory_order_acq_rel,
                                                      memory_order_acquire))
                return;
        }
        if ((cur & ~(uint64_t)15) == key) {
            atomic_store_explicit(&slots[i], word, memory_order_release);
            return;
        }
    }
}

static int forced_tile(void)
{
    int f = atomic_load_explicit(&forced, memory_order_relaxed);
    if (f >= 0) return f;
    const char *env = getenv("TERN_DECODE_TILE");
    f = env && *env ? kern_tile_from_name(env) : KERN_TILE_AUTO;
    if (f < 0) f = KERN_TILE_AUTO; /* an unknown name: ignored here (tern_model_params.decode_tile refuses it) */
    int expect = -1;
    atomic_compare_exchange_strong(&forced, &expect, f);
    return atomic_load_explicit(&forced, memory_order_relaxed);
}

int kern_tile_forced(void) { return forced_tile(); }

bool kern_tile_force(int tile)
{
    if (tile < 0 || tile >= KERN_TILE_COUNT_) return false;
    if (tile != KERN_TILE_AUTO) {
        bool any = false;
        for (int t = 0; t < TERN_TYPE_COUNT_ && !any; t++) any = kern_tile_runs(tile, t);
        if (!any) return false;
    }
    atomic_store(&forced, tile);
    return true;
}

int kern_tile_for(int wtype, int64_t k, int n_tok)
{
    const int cls = kern_tile_class(n_tok);
    if (cls < 0) return kern_tile_default();
    const int f = forced_tile();
    if (f != KERN_TILE_AUTO && kern_tile_runs(f, wtype)) return f;
    const uint64_t key = slot_key(wtype, k, cls);
    for (int i = 0; i < TILE_SLOTS; i++) {
        const uint64_t w = atomic_load_explicit(&slots[i], memory_order_acquire);
        if (w == 0) break; /* slots fill in order and are never emptied */
        TERN_ASSERT((w & 15) > KERN_TILE_AUTO && (w & 15) < KERN_TILE_COUNT_, "a recorded word names a tile");
        if ((w & ~(uint64_t)15) == key && kern_tile_runs((int)(w & 15), wtype)) return (int)(w & 15);
    }
    return kern_tile_default();
}

void kern_matmul_packed_tile(int tile, int wtype, const void *P, const void *A, size_t as,
                             int n_tok, int64_t k, int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    TERN_ASSERT(kern_tile_runs(tile, wtype), "a tile the active path can run for this format");
#if defined(__x86_64__)
    switch (tile) {
    case KERN_TILE_ZMM: kern_avx512_packed_run(wtype, P, A, as, n_tok, k, r0, r1, Y, ldy); return;
    case KERN_TILE_YMM_EVEX: kern_ymm512_packed_run(wtype, P, A, as, n_tok, k, r0, r1, Y, ldy); return;
    case KERN_TILE_YMM_VNNI: kern_avxvnni_packed_run(wtype, P, A, as, n_tok, k, r0, r1, Y, ldy); return;
    case KERN_TILE_YMM: kern_avx2_packed_run(wtype, P, A, as, n_tok, k, r0, r1, Y, ldy); return;
    default: break;
    }
#else
    (void)P, (void)A, (void)as, (void)n_tok, (void)k, (void)r0, (void)r1, (void)Y, (void)ldy;
#endif
    TERN_ASSERT(0, "kern_tile_runs admitted a tile without a kernel");
}

void kern_cpu_key(char *buf, size_t size)
{
    char vendor[13] = "unknown", brand[49] = "";
    unsigned fam = 0, model = 0, step = 0;
#if defined(__x86_64__)
    unsigned a, b, c, d;
    if (__get_cpuid(0, &a, &b, &c, &d)) {
        memcpy(vendor, &b, 4), memcpy(vendor + 4, &d, 4), memcpy(vendor + 8, &c, 4);
        vendor[12] = 0;
    }
    if (__get_cpuid(1, &a, &b, &c, &d)) {
        fam = (a >> 8) & 15, model = (a >> 4) & 15, step = a & 15;
        if (fam == 15) fam += (a >> 20) & 255;
        if (fam == 6 || fam >= 15) model |= ((a >> 16) & 15) << 4;
    }
    unsigned r[12] = {0};
    if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000004u)
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
    memcpy(brand, r, 48);
    brand[48] = 0;
#endif
    const char *bp = brand; /* the brand string is padded with spaces on the left on some CPUs */
    while (*bp == ' ') bp++;
    char clean[49];
    size_t n = 0;
    for (; *bp && n < sizeof clean - 1; bp++) clean[n++] = (*bp == '\t' || *bp == '\n') ? ' ' : *bp;
    while (n > 0 && clean[n - 1] == ' ') n--;
    clean[n] = 0;
    snprintf(buf, size, "%s %u/%u/%u %s %s tiles-%d", vendor, fam, model, step, n ? clean : "-", kern_path_name(),
             KERN_TILES_GEN);
}

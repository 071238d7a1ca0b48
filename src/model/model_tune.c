/* model_tune.c — at load, time the tiles that can read the model's packed matrices for calls of
 * one token and of 2-3 tokens, and record the fastest per (format, k, call size) (kern_tune.h),
 * caching the choice per CPU on disk.
 *
 * Read kern_tune.h first (what the candidates are and why the choice is measured, not looked up
 * by CPU name). The tiles give the same bits, so the choice changes speed only.
 *
 * How: per (format, k) among the packed matrices, a sweep runs one token through matrices of
 * that shape in model order until 192 MB are read (all of them in a smaller model, repeated to
 * 16 MB at least for the timer's sake), so the weights stream from memory as in decode rather
 * than from cache where the model is large enough for that to matter (for 2-3 tokens each
 * matrix takes a call of 2 tokens and one of 3); each candidate runs the sweep three times, the
 * order of candidates rotating, and its fastest sweep counts (thread CPU time, so a descheduled
 * moment on a busy machine is not counted). The default tile is kept unless another is at least
 * 3 % faster: noise does not flip the choice from one load to the next. About 0.8 s for a 0.5B
 * model (Zen 4), once per CPU: the choices go to TERN_CACHE_DIR (else $XDG_CACHE_HOME/tern, else
 * ~/.cache/tern) /decode-tiles.tsv, one line per CPU key, format, k and call size ("1" or
 * "2-3"), and later loads read them. TERN_TUNE=0 skips both (the default tiles run);
 * TERN_DECODE_TILE forces a tile (nothing is timed). */
#include "model/model.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/kern_tune.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include "util/clock.h"

#define TUNE_SWEEP_BYTES ((size_t)192 << 20) /* beyond the last-level caches of the CPUs measured */
#define TUNE_MIN_BYTES ((size_t)16 << 20) /* a smaller sweep is repeated: timer resolution */
#define TUNE_ROUNDS 3
#define TUNE_MARGIN 0.97 /* another tile must take at most this share of the default's time */
#define TUNE_SHAPES 8 /* distinct (format, k) pairs timed; a model has 2-4 */
#define TUNE_GROUPS (TUNE_SHAPES * KERN_TILE_CLASSES)

struct tune_group {
    int type;
    int64_t k;
    int cls;                      /* kern_tile_class: 0 one token, 1 two or three */
    int n;                        /* matrices in the sweep */
    int reps;                     /* times the sweep reads them (a small model's: to TUNE_MIN_BYTES) */
    struct model_weight *w[512];
    int tile;
    double ms[KERN_TILE_COUNT_];  /* best sweep per tile, 0 = not timed */
    bool cached;
};

/* The cache file's path into buf; false when no directory can be named. */
static bool cache_path(char *buf, size_t size, bool create_dir)
{
    const char *dir = getenv("TERN_CACHE_DIR");
    char tmp[1024];
    if (!dir || !*dir) {
        const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
        if (xdg && *xdg)
            snprintf(tmp, sizeof tmp, "%s/tern", xdg);
        else if (home && *home)
            snprintf(tmp, sizeof tmp, "%s/.cache/tern", home);
        else
            return false;
        dir = tmp;
    }
    if (create_dir) { /* the parent too (~/.cache may not exist on a fresh machine) */
        char parent[1024];
        snprintf(parent, sizeof parent, "%s", dir);
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent) *slash = 0, mkdir(parent, 0755);
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) return false;
    }
    return snprintf(buf, size, "%s/decode-tiles.tsv", dir) < (int)size;
}

/* The cached tile of each group for this cpu, read in one pass over the file: g[i].tile and
 * g[i].cached set where a line names a tile the active path runs. Lines that do not parse are
 * skipped. */
static void cache_lookup(const char *cpu, struct tune_group *g, int ng)
{
    char path[1100], line[512];
    if (!cache_path(path, sizeof path, false)) return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char *tab1 = strchr(line, '\t');
        if (!tab1) continue;
        *tab1 = 0;
        char tname[32], cname[16], tile[32];
        long long kk;
        int type;
        if (strcmp(line, cpu) || sscanf(tab1 + 1, "%31s %lld %15s %31s", tname, &kk, cname, tile) != 4 ||
            tern_type_from_name(tname, &type) != TERN_OK)
            continue;
        const int t = kern_tile_from_name(tile), cls = kern_tile_class_from_name(cname);
        for (int i = 0; i < ng; i++)
            if (g[i].type == type && g[i].k == kk && g[i].cls == cls && t > 0 && kern_tile_runs(t, type))
                g[i].tile = t, g[i].cached = true;
    }
    fclose(f);
}

/* Append (or replace) the lines of the measured groups, atomically (write, then rename). */
static void cache_store(const char *cpu, const struct tune_group *g, int ng)
{
    char path[1100], tmp[1200], line[512];
    if (!cache_path(path, sizeof path, true)) return;
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
    FILE *out = fopen(tmp, "w");
    if (!out) return;
    FILE *in = fopen(path, "r");
    while (in && fgets(line, sizeof line, in)) {
        bool replaced = false;
        char *tab1 = strchr(line, '\t');
        if (!tab1 || !strchr(line, '\n')) continue; /* a torn or foreign line: dropped */
        for (int i = 0; i < ng && !replaced; i++) {
            char head[400];
            snprintf(head, sizeof head, "%s\t%s\t%lld\t%s\t", cpu, tern_type_name(g[i].type), (long long)g[i].k,
                     kern_tile_class_name(g[i].cls));
            replaced = !g[i].cached && !strncmp(line, head, strlen(head));
        }
        if (!replaced) fputs(line, out);
    }
    if (in) fclose(in);
    for (int i = 0; i < ng; i++) {
        if (g[i].cached) continue;
        fprintf(out, "%s\t%s\t%lld\t%s\t%s\t", cpu, tern_type_name(g[i].type), (long long)g[i].k,
                kern_tile_class_name(g[i].cls), kern_tile_name(g[i].tile));
        for (int t = 1; t < KERN_TILE_COUNT_; t++)
            if (g[i].ms[t] > 0) fprintf(out, " %s=%.3fms", kern_tile_name(t), g[i].ms[t]);
        fputc('\n', out);
    }
    if (fclose(out) != 0 || rename(tmp, path) != 0) unlink(tmp);
}

/* Time the candidates of one group; record and return the chosen tile. */
static void measure(struct tune_group *g, const int *cand, int nc)
{
    const int vt = quant_traits_get(g->type)->vec_dot_type;
    int64_t rows_max = 0;
    for (int i = 0; i < g->n; i++) rows_max = g->w[i]->rows > rows_max ? g->w[i]->rows : rows_max;
    /* one token, or a call of 2 and one of 3 (the tokens' activations differ) */
    static const int calls[KERN_TILE_CLASSES][2] = {{1, 0}, {2, 3}};
    const size_t as = quant_row_bytes(vt, g->k);
    float *x = malloc((size_t)g->k * sizeof *x), *Y = malloc((size_t)rows_max * 3 * sizeof *Y);
    uint8_t *A = malloc(3 * as + 64);
    if (!x || !Y || !A) {
        free(x), free(Y), free(A);
        g->tile = cand[0];
        return;
    }
    for (int j = 0; j < 3; j++) {
        for (int64_t i = 0; i < g->k; i++) x[i] = (float)(((i + 11 * j) * 37 % 101) - 50) / 50.0f;
        kern_quantize_act(vt, x, A + (size_t)j * as, g->k);
    }
    for (int r = -1; r < TUNE_ROUNDS; r++) { /* r = -1: one untimed sweep per tile */
        for (int c = 0; c < nc; c++) {
            const int t = cand[(c + (r < 0 ? 0 : r)) % nc];
            const double t0 = util_thread_cpu_ms();
            for (int rep = 0; rep < g->reps; rep++)
                for (int i = 0; i < g->n; i++)
                    for (int c2 = 0; c2 < 2 && calls[g->cls][c2]; c2++)
                        kern_matmul_packed_tile(t, g->type, g->w[i]->packed, A, as, calls[g->cls][c2], g->k, 0,
                                                g->w[i]->rows, Y, g->w[i]->rows);
            const double ms = util_thread_cpu_ms() - t0;
            if (r >= 0 && (g->ms[t] == 0 || ms < g->ms[t])) g->ms[t] = ms;
        }
    }
    g->tile = cand[0];
    for (int c = 1; c < nc; c++)
        if (g->ms[cand[c]] < TUNE_MARGIN * g->ms[cand[0]] && g->ms[cand[c]] < g->ms[g->tile])
            g->tile = cand[c];
    free(x), free(Y), free(A);
}

/* The report line: "Q8_0 k=896 x1 zmm (zmm 4.90 ms, ymm-evex 4.95 ms, ...); Q8_0 k=896 x2-3 ..." */
static void report(struct tern_model *m, const struct tune_group *g, int ng, const char *how)
{
    char *p = m->tile_report;
    size_t left = sizeof m->tile_report;
    int w = snprintf(p, left, "%s", how);
    for (int i = 0; i < ng && w > 0 && (size_t)w < left; i++) {
        p += w, left -= (size_t)w;
        w = snprintf(p, left, "%s%s k=%lld x%s %s", i ? "; " : ": ", tern_type_name(g[i].type),
                     (long long)g[i].k, kern_tile_class_name(g[i].cls), kern_tile_name(g[i].tile));
        if (w <= 0 || (size_t)w >= left) break;
        p += w, left -= (size_t)w;
        if (g[i].cached) {
            w = snprintf(p, left, " (cached)");
            continue;
        }
        w = snprintf(p, left, " (");
        for (int t = 1; t < KERN_TILE_COUNT_ && w > 0 && (size_t)w < left; t++) {
            if (g[i].ms[t] <= 0) continue;
            p += w, left -= (size_t)w;
            w = snprintf(p, left, "%s%s %.2f ms", p[-1] == '(' ? "" : ", ", kern_tile_name(t), g[i].ms[t]);
        }
        if (w > 0 && (size_t)w < left) p += w, left -= (size_t)w, w = snprintf(p, left, ")");
    }
}

void model_tune_tiles(struct tern_model *m)
{
    m->tile_report[0] = 0;
    if (!m->packed_buf) return;
    const int forced = kern_tile_forced();
    if (forced != KERN_TILE_AUTO) {
        snprintf(m->tile_report, sizeof m->tile_report, "forced %s (TERN_DECODE_TILE or --decode-tile)",
                 kern_tile_name(forced));
        return;
    }
    const char *env = getenv("TERN_TUNE");
    if (env && !strcmp(env, "0")) {
        snprintf(m->tile_report, sizeof m->tile_report, "default %s (TERN_TUNE=0)",
                 kern_tile_name(kern_tile_default()));
        return;
    }
    static struct tune_group groups[TUNE_GROUPS]; /* ~66 KB: not on the stack */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock); /* two models loading at once take turns (and share the table) */
    int ng = 0;
    size_t bytes[TUNE_GROUPS] = {0};
    for (int l = 0; l <= m->info.n_layer; l++) {
        struct model_weight *w[MODEL_LAYER_MAX_MATRICES + 1];
        int n = 0;
        if (l < m->info.n_layer)
            n = model_layer_matrices(&m->layers[l], w);
        else
            w[n++] = &m->output;
        for (int i = 0; i < n; i++) {
            if (!w[i]->packed) continue;
            int gi = 0;
            while (gi < ng && (groups[gi].type != w[i]->type || groups[gi].k != w[i]->cols)) gi++;
            if (gi == ng) {
                if (ng == TUNE_SHAPES) continue;
                groups[ng++] = (struct tune_group){.type = w[i]->type, .k = w[i]->cols};
            }
            struct tune_group *g = &groups[gi];
            if (bytes[gi] >= TUNE_SWEEP_BYTES || g->n == (int)(sizeof g->w / sizeof g->w[0])) continue;
            g->w[g->n++] = w[i];
            bytes[gi] += w[i]->row_bytes * (size_t)w[i]->rows;
        }
    }
    for (int i = 0; i < ng; i++) {
        const size_t b = bytes[i] ? bytes[i] : 1;
        groups[i].reps = b >= TUNE_MIN_BYTES ? 1 : (int)((TUNE_MIN_BYTES + b - 1) / b);
        if (groups[i].reps > 4096) groups[i].reps = 4096;
    }
    /* each shape once per class: the same matrices, timed with calls of that size */
    for (int c = 1; c < KERN_TILE_CLASSES; c++)
        for (int i = 0; i < ng; i++) groups[c * ng + i] = groups[i], groups[c * ng + i].cls = c;
    ng *= KERN_TILE_CLASSES;
    char cpu[256];
    kern_cpu_key(cpu, sizeof cpu);
    cache_lookup(cpu, groups, ng);
    bool measured = false;
    for (int i = 0; i < ng; i++) {
        struct tune_group *g = &groups[i];
        int cand[KERN_TILE_COUNT_];
        const int nc = kern_tile_candidates(g->type, cand);
        if (nc == 0) continue;
        if (!g->cached) {
            measure(g, cand, nc);
            measured = true;
        }
        kern_tile_set(g->type, g->k, g->cls, g->tile);
    }
    if (measured) cache_store(cpu, groups, ng);
    report(m, groups, ng, measured ? "measured" : "cached");
    pthread_mutex_unlock(&lock);
}

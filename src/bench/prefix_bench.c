/* prefix_bench.c — tern_prompt_cache_bench: the prompt cache's three measured targets.
 *
 * Read prefix_cache.h first. What is timed, and what is not:
 * (1) TTFT = wall time from "prompt in hand" to "first token chosen" (argmax of the last
 *     prompt token's logits). Cold: tern_decode of the whole 1024+32-token prompt, no cache.
 *     Warm: tern_prefix_cache_prefill of the same prompt after another prompt with the same
 *     1024-token prefix but a different 32-token turn was prefilled (lookup, restore of 1024
 *     positions, decode of 32, store). Median of reps; warm logits are compared bitwise with cold.
 * (2) 200 requests, each one of 4 system prompts (1024..2047 tokens) + a user turn of 8..64
 *     tokens, served through one cache whose budget holds the system prompts plus 64 blocks
 *     (older user-turn blocks get evicted). hit_rate = sum(min(reused, system tokens)) / sum(system
 *     tokens): the first request of each system prompt is a cold miss and counts against it.
 *     Every request really prefills (the same work `tern run --prompt-cache` does).
 * (3) A 2048-token prefix is saved to a fresh directory. Load = create a cache on that
 *     directory (fingerprints, reading and checksumming every file) + prefill of prefix + 1
 *     token (restore 2048 positions, decode 1). Recompute = tern_decode of the same 2049 tokens.
 *     Before each load the files are dropped from the page cache (fdatasync +
 *     posix_fadvise(DONTNEED)) so the read is a disk read where the kernel honours it.
 * Token ids are pseudo-random (splitmix64, fixed seed): compute time does not depend on them. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tern_bench.h"

#include "kv/prefix_cache.h"
#include "util/error.h"
#include "util/clock.h"

struct tern_prompt_cache_bench_params tern_prompt_cache_bench_default_params(void)
{
    return (struct tern_prompt_cache_bench_params){0};
}

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void fill(int32_t *t, int n, uint64_t *s, int n_vocab)
{
    /* stay clear of the lowest and highest ids (byte/control tokens in synthetic vocabs) */
    const int span = n_vocab > 64 ? n_vocab - 32 : n_vocab;
    for (int i = 0; i < n; i++) t[i] = (int32_t)(rnd(s) % (uint64_t)span) + (n_vocab > 64 ? 16 : 0);
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void drop_page_cache(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    char path[4096 + 260];
    for (struct dirent *e; (e = readdir(d));) {
        if (!strstr(e->d_name, ".tkv")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        fdatasync(fd);
        posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        close(fd);
    }
    closedir(d);
}

struct bench {
    struct tern_model *m;
    struct tern_context *ctx;
    int n_vocab, n_threads, B, reps;
    float *ref;      /* (n_vocab) logits of a cold run, for bitwise comparison */
};

/* (1) */
static tern_status bench_ttft(struct bench *b, struct tern_prompt_cache_bench_report *r)
{
    const int P = r->prefix_tokens = 1024, U = r->turn_tokens = 32;
    int32_t *a = malloc((size_t)(P + U) * sizeof *a), *c = malloc((size_t)(P + U) * sizeof *c);
    double *cold = calloc((size_t)b->reps, sizeof *cold), *warm = calloc((size_t)b->reps, sizeof *warm);
    struct tern_prefix_cache *pc = NULL;
    tern_status st = TERN_OK;
    if (!a || !c || !cold || !warm) { st = tern_fail(TERN_ERR_NOMEM, "prompt cache bench: out of memory"); goto out; }
    uint64_t seed = 1;
    fill(a, P + U, &seed, b->n_vocab);
    memcpy(c, a, (size_t)P * sizeof *a);
    fill(c + P, U, &seed, b->n_vocab);
    int first = -1;
    for (int i = 0; i < b->reps && !st; i++) {
        if ((st = tern_kv_truncate(b->ctx, 0))) break;
        double t0 = util_now_ms();
        if ((st = tern_decode(b->ctx, c, P + U, 0, TERN_LOGITS_LAST))) break;
        const float *lg = tern_context_logits(b->ctx, P + U - 1);
        first = argmax(lg, b->n_vocab);
        cold[i] = util_now_ms() - t0;
        memcpy(b->ref, lg, (size_t)b->n_vocab * sizeof(float));
    }
    struct tern_prefix_cache_params pp = {.block_tokens = b->B, .budget_bytes = 1ull << 30};
    if (!st) st = tern_prefix_cache_create(b->m, &pp, &pc);
    int reused = 0;
    if (!st) st = tern_prefix_cache_prefill(pc, b->ctx, a, P + U, &reused); /* other turn */
    r->warm_identical = true;
    for (int i = 0; i < b->reps && !st; i++) {
        double t0 = util_now_ms();
        if ((st = tern_prefix_cache_prefill(pc, b->ctx, c, P + U, &reused))) break;
        const float *lg = tern_context_logits(b->ctx, P + U - 1 - reused);
        int tok = argmax(lg, b->n_vocab);
        warm[i] = util_now_ms() - t0;
        if (tok != first || memcmp(lg, b->ref, (size_t)b->n_vocab * sizeof(float)))
            r->warm_identical = false;
        if (reused != P) r->warm_identical = false; /* must have reused the whole prefix */
    }
    if (!st) {
        r->ttft_cold_ms = median(cold, b->reps);
        r->ttft_warm_ms = median(warm, b->reps);
        r->warm_ratio = r->ttft_warm_ms / r->ttft_cold_ms;
    }
out:
    tern_prefix_cache_free(pc);
    free(a);
    free(c);
    free(cold);
    free(warm);
    return st;
}

/* (2) */
static tern_status bench_hit_rate(struct bench *b, int n_ctx_max, struct tern_prompt_cache_bench_report *r)
{
    enum { N_SYS = 4, MAX_TURN = 64 };
    int len[N_SYS];
    int32_t *sys[N_SYS] = {0};
    int32_t *req = malloc((size_t)n_ctx_max * sizeof *req);
    struct tern_prefix_cache *pc = NULL;
    tern_status st = req ? TERN_OK : tern_fail(TERN_ERR_NOMEM, "prompt cache bench: out of memory");
    uint64_t seed = 2;
    uint64_t sys_blocks = 0;
    for (int i = 0; i < N_SYS && !st; i++) {
        len[i] = 1024 + i * 341;                             /* 1024, 1365, 1706, 2047 */
        if (len[i] > n_ctx_max - MAX_TURN) len[i] = n_ctx_max - MAX_TURN;
        sys[i] = malloc((size_t)len[i] * sizeof(int32_t));
        if (!sys[i]) st = tern_fail(TERN_ERR_NOMEM, "prompt cache bench: out of memory");
        else fill(sys[i], len[i], &seed, b->n_vocab);
        sys_blocks += (uint64_t)len[i] / b->B + 1;
    }
    const uint64_t block_bytes = tern_model_kv_bytes(b->m, b->B);
    struct tern_prefix_cache_params pp = {.block_tokens = b->B,
                                          .budget_bytes = (sys_blocks + 64) * block_bytes};
    if (!st) st = tern_prefix_cache_create(b->m, &pp, &pc);
    uint64_t hit = 0, total_sys = 0, reused_all = 0, total_all = 0;
    for (int q = 0; q < r->n_requests && !st; q++) {
        int s = (int)(rnd(&seed) % N_SYS);
        int u = 8 + (int)(rnd(&seed) % (MAX_TURN - 7));
        memcpy(req, sys[s], (size_t)len[s] * sizeof *req);
        fill(req + len[s], u, &seed, b->n_vocab);
        int reused = 0;
        if ((st = tern_prefix_cache_prefill(pc, b->ctx, req, len[s] + u, &reused))) break;
        hit += (uint64_t)(reused < len[s] ? reused : len[s]);
        total_sys += (uint64_t)len[s];
        reused_all += (uint64_t)reused;
        total_all += (uint64_t)(len[s] + u);
    }
    if (!st) {
        struct tern_prefix_cache_stats cs;
        tern_prefix_cache_get_stats(pc, &cs);
        r->hit_rate = total_sys ? (double)hit / (double)total_sys : 0;
        r->hit_rate_all = total_all ? (double)reused_all / (double)total_all : 0;
        r->budget_bytes = cs.budget_bytes;
        r->evicted_bytes = cs.evicted_bytes;
    }
    tern_prefix_cache_free(pc);
    for (int i = 0; i < N_SYS; i++) free(sys[i]);
    free(req);
    return st;
}

/* (3) */
static tern_status bench_disk(struct bench *b, int n_ctx_max, const char *tmp_root,
                              struct tern_prompt_cache_bench_report *r)
{
    const int room = n_ctx_max - KV_MIN_BATCHED_SUFFIX;
    const int D = r->disk_tokens = room < 2048 ? room / b->B * b->B : 2048;
    const int N = D + KV_MIN_BATCHED_SUFFIX; /* the prefix, then the tokens a hit always decodes */
    int32_t *t = malloc((size_t)N * sizeof *t);
    double *load = calloc((size_t)b->reps, sizeof *load), *rec = calloc((size_t)b->reps, sizeof *rec);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tern-kvbench-XXXXXX", tmp_root);
    struct tern_prefix_cache *pc = NULL;
    tern_status st = TERN_OK;
    if (!t || !load || !rec) { st = tern_fail(TERN_ERR_NOMEM, "prompt cache bench: out of memory"); goto out; }
    if (!mkdtemp(dir)) {
        st = tern_fail(TERN_ERR_IO, "prompt cache bench: cannot create a directory under %s", tmp_root);
        goto out;
    }
    uint64_t seed = 3;
    fill(t, N, &seed, b->n_vocab);
    for (int i = 0; i < b->reps && !st; i++) {
        if ((st = tern_kv_truncate(b->ctx, 0))) break;
        double t0 = util_now_ms();
        if ((st = tern_decode(b->ctx, t, N, 0, TERN_LOGITS_LAST))) break;
        rec[i] = util_now_ms() - t0;
        memcpy(b->ref, tern_context_logits(b->ctx, N - 1), (size_t)b->n_vocab * sizeof(float));
    }
    struct tern_prefix_cache_params pp = {.block_tokens = b->B, .budget_bytes = 1ull << 31, .dir = dir};
    int reused = 0;
    if (!st) st = tern_prefix_cache_create(b->m, &pp, &pc);
    if (!st) st = tern_prefix_cache_prefill(pc, b->ctx, t, N, &reused);
    if (!st) st = tern_prefix_cache_save(pc);
    tern_prefix_cache_free(pc);
    pc = NULL;
    r->disk_identical = true;
    for (int i = 0; i < b->reps && !st; i++) {
        drop_page_cache(dir);
        double t0 = util_now_ms();
        if ((st = tern_prefix_cache_create(b->m, &pp, &pc))) break;
        if ((st = tern_prefix_cache_prefill(pc, b->ctx, t, N, &reused))) break;
        load[i] = util_now_ms() - t0;
        if (reused != D || memcmp(tern_context_logits(b->ctx, N - 1 - reused), b->ref,
                                  (size_t)b->n_vocab * sizeof(float)))
            r->disk_identical = false;
        tern_prefix_cache_free(pc);
        pc = NULL;
    }
    if (!st) {
        r->disk_load_ms = median(load, b->reps);
        r->recompute_ms = median(rec, b->reps);
        r->disk_speedup = r->recompute_ms / r->disk_load_ms;
    }
    tern_status_ignore(tern_cache_dir_clear(dir, NULL)); /* best effort: a temporary folder */
    rmdir(dir);
out:
    tern_prefix_cache_free(pc);
    free(t);
    free(load);
    free(rec);
    return st;
}

tern_status tern_prompt_cache_bench(struct tern_model *m,
                                    const struct tern_prompt_cache_bench_params *p,
                                    struct tern_prompt_cache_bench_report *out)
{
    struct tern_prompt_cache_bench_params bp = p ? *p : tern_prompt_cache_bench_default_params();
    if (bp.n_requests < 0 || bp.block_tokens < 0 || bp.reps < 0 || bp.n_threads < 0)
        return tern_fail(TERN_ERR_ARG, "prompt cache bench: negative parameter");
    const struct tern_model_info *in = tern_model_get_info(m);
    if (in->n_ctx_train < 1024 + 32 + 1)
        return tern_fail(TERN_ERR_UNSUPPORTED, "prompt cache bench needs a model with a training "
                         "context of at least 1057 tokens (this one: %d)", in->n_ctx_train);
    struct tern_prompt_cache_bench_report r = {0};
    r.n_requests = bp.n_requests ? bp.n_requests : 200;
    struct bench b = {.m = m, .n_vocab = in->n_vocab, .n_threads = bp.n_threads,
                      .B = bp.block_tokens ? bp.block_tokens : 32, .reps = bp.reps ? bp.reps : 3};
    const int n_ctx = in->n_ctx_train < 2048 + 64 + 1 ? in->n_ctx_train : 2048 + 64 + 1;
    const char *tmp = bp.tmp_dir ? bp.tmp_dir : getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    b.ref = malloc((size_t)in->n_vocab * sizeof(float));
    if (!b.ref) return tern_fail(TERN_ERR_NOMEM, "prompt cache bench: out of memory");
    struct tern_context_params cp = {.n_ctx = n_ctx, .n_threads = bp.n_threads};
    tern_status st = tern_context_create(m, &cp, &b.ctx);
    if (!st) st = bench_ttft(&b, &r);
    if (!st) st = bench_disk(&b, n_ctx, tmp, &r);
    if (!st) st = bench_hit_rate(&b, n_ctx, &r);
    tern_context_free(b.ctx);
    free(b.ref);
    if (st) return st;
    *out = r;
    return TERN_OK;
}

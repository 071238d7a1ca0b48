/* bench_batch_policy.c — tern bench --batch-policy: should offline work decode several
 * sequences at once on this machine? For batch sizes 1..4 the batcher (src/gen/batcher.c, the
 * server's scheduler) decodes that many sequences of n_gen tokens each from distinct 64-token
 * prompts (prefilled first, untimed); timed are the decode steps: tokens/s = generated tokens /
 * decode time, and the p95 of the step time, which is the latency every sequence sees per token.
 * Repetitions run the sizes in interleaved order (1..4, then 4..1, ...) and medians are kept.
 * Interactive work is always batch 1; offline takes the batch of 2..4 with the most tokens/s
 * among those that raise tokens/s by >= min_tps_gain over batch 1 with a p95 step time less than
 * max_p95_penalty above batch 1's (the profile's thresholds, 10 % and 10 %), else 1. The result
 * can be written into the matched profile (bench_profile_set_offline). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "util/error.h"
#include "util/clock.h"

static void on_done(const struct tern_gen_stats *s, void *user)
{
    (void)s;
    (void)user;
}

/* One measurement of batch size nb: decode tokens/s and p95 step ms. */
static tern_status measure(struct tern_model *m, const struct tern_tokenizer *tok, int nb, int threads,
                           int n_gen, double *tps, double *p95)
{
    enum { PROMPT = 64 };
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = PROMPT + n_gen + 8;
    cp.n_threads = threads;
    cp.n_seq = nb;
    struct tern_context *ctx = NULL;
    struct tern_batcher *b = NULL;
    struct tern_sampler *smp[4] = {0};
    double *steps = malloc((size_t)(n_gen + 8) * sizeof *steps);
    tern_status st = steps ? tern_context_create(m, &cp, &ctx) : tern_fail(TERN_ERR_NOMEM, "out of memory");
    struct tern_batcher_params bp = tern_batcher_default_params();
    bp.share_prefix = false;
    if (!st) st = tern_batcher_create(ctx, tok, &bp, &b);
    const int n_vocab = tern_model_n_vocab(m);
    for (int s = 0; !st && s < nb; s++) {
        struct tern_sampler_params sp = tern_sampler_default_params();
        if ((st = tern_sampler_create(&sp, n_vocab, &smp[s]))) break;
        int32_t ids[PROMPT];
        for (int i = 0; i < PROMPT; i++) ids[i] = (int32_t)((uint64_t)(i + 1 + 97 * s) * 2654435761u % (uint64_t)(n_vocab - 300) + 259);
        struct tern_batch_request r = tern_batch_request_default();
        r.prompt = ids;
        r.n_prompt = PROMPT;
        r.sampler = smp[s];
        r.max_tokens = n_gen;
        r.ignore_eog = true;
        r.on_done = on_done;
        st = tern_batcher_add(b, &r, NULL);
    }
    int n_steps = 0, generated = 0;
    double decode_ms = 0;
    while (!st && tern_batcher_n_active(b) > 0) {
        struct tern_batcher_step_info info;
        double t0 = util_now_ms();
        if ((st = tern_batcher_step(b, &info))) break;
        double t = util_now_ms() - t0;
        /* prefill steps (and the step sampling each first token from them) are not decode */
        if (info.n_prefill > 0 || info.n_decode == 0) continue;
        decode_ms += t;
        generated += info.n_decode;
        if (n_steps < n_gen + 8) steps[n_steps++] = t;
    }
    if (!st && (n_steps == 0 || decode_ms <= 0)) st = tern_fail(TERN_ERR_RANGE, "batch %d: no decode steps measured", nb);
    if (!st) {
        *tps = generated / (decode_ms / 1e3);
        *p95 = bench_percentile(steps, n_steps, 95);
    }
    free(steps);
    tern_batcher_free(b);
    for (int s = 0; s < 4; s++) tern_sampler_free(smp[s]);
    tern_context_free(ctx);
    return st;
}

tern_status tern_bench_batch_policy(const char *model_path, const char *profiles_path, int n_threads,
                                    int n_gen, int reps, struct tern_bench_batch_policy *out)
{
    memset(out, 0, sizeof *out);
    if (reps < 1 || reps > 100 || n_gen < 4) return tern_fail(TERN_ERR_ARG, "batch policy: reps 1..100 and n_gen >= 4");
    struct bench_hw hw;
    struct bench_profile pr;
    bench_hw_detect(&hw, false);
    tern_status st = bench_profile_match(profiles_path, &hw, &pr);
    if (st) return st;
    snprintf(out->profile_name, sizeof out->profile_name, "%s", pr.name);
    snprintf(out->profile_source, sizeof out->profile_source, "%s", pr.source);
    out->min_tps_gain = pr.batch_min_tps_gain;
    out->max_p95_penalty = pr.batch_max_p95_penalty;
    out->n_threads = n_threads > 0 ? n_threads : hw.cpus_online;
    struct tern_model *m;
    if ((st = tern_model_load(model_path, &(struct tern_model_params){.prefault = true}, &m))) return st;
    struct tern_tokenizer *tok = NULL;
    st = tern_tokenizer_from_gguf(tern_model_gguf(m), &tok);
    double tps[4][100], p95[4][100];
    for (int r = 0; !st && r < reps; r++)
        for (int k = 0; !st && k < 4; k++) {
            int nb = r % 2 ? 4 - k : k + 1;
            st = measure(m, tok, nb, out->n_threads, n_gen, &tps[nb - 1][r], &p95[nb - 1][r]);
        }
    tern_tokenizer_free(tok);
    tern_model_free(m);
    if (st) return st;
    out->offline = 1;
    double best = 0;
    for (int k = 0; k < 4; k++) {
        struct tern_bench_batch_point *p = &out->points[k];
        p->batch = k + 1;
        p->tps = bench_median(tps[k], reps);
        p->p95_step_ms = bench_median(p95[k], reps);
        p->tps_gain = p->tps / out->points[0].tps - 1;
        p->p95_penalty = p->p95_step_ms / out->points[0].p95_step_ms - 1;
        p->qualifies = k > 0 && p->tps_gain >= out->min_tps_gain && p->p95_penalty < out->max_p95_penalty;
        if (p->qualifies && p->tps > best) {
            best = p->tps;
            out->offline = k + 1;
        }
    }
    return TERN_OK;
}

tern_status tern_bench_profile_set_offline(const char *source, int offline)
{
    /* source is FILE:LINE of the profile's entry; rewrite the first "offline: N" line of that
     * entry in place (comments and layout stay as they are), then re-read the whole file */
    char path[512];
    snprintf(path, sizeof path, "%s", source);
    char *colon = strrchr(path, ':');
    if (!colon || offline < 1 || offline > 4) return tern_fail(TERN_ERR_ARG, "profile source '%s' / offline %d", source, offline);
    *colon = '\0';
    const int line0 = atoi(colon + 1);
    FILE *f = fopen(path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *o = fopen(tmp, "wb");
    if (!o) {
        fclose(f);
        return tern_fail(TERN_ERR_IO, "cannot write %s: %s", tmp, strerror(errno));
    }
    char line[4096];
    int no = 0, done = 0, entry_indent = -1;
    while (fgets(line, sizeof line, f)) {
        no++;
        if (!done && no >= line0) {
            int ind = (int)strspn(line, " ");
            if (no == line0) entry_indent = ind;
            else if (line[ind] == '-' && ind <= entry_indent) done = -1; /* the next entry: none found */
            else if (!strncmp(line + ind, "offline:", 8)) {
                const char *rest = line + ind + 8;
                rest += strspn(rest, " ");
                rest += strspn(rest, "0123456789");
                fprintf(o, "%.*soffline: %d%s", ind, line, offline, rest);
                done = 1;
                continue;
            }
        }
        fputs(line, o);
    }
    fclose(f);
    bool ok = fclose(o) == 0;
    if (done != 1) {
        remove(tmp);
        return tern_fail(TERN_ERR_NOT_FOUND, "%s: the profile at line %d has no batch_policy.offline line to update", path, line0);
    }
    int n;
    if (!ok || bench_profiles_check(tmp, &n)) {
        remove(tmp);
        return tern_fail(TERN_ERR_FORMAT, "%s: the updated file does not parse; left unchanged", path);
    }
    if (rename(tmp, path)) {
        remove(tmp);
        return tern_fail(TERN_ERR_IO, "cannot replace %s: %s", path, strerror(errno));
    }
    return TERN_OK;
}

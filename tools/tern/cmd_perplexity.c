/* cmd_perplexity.c — `tern perplexity`: llama-perplexity's measurement of a model on a text, and
 * the KL divergence of a model from a base model's saved distribution.
 *
 * The computation is the library's (tern_perplexity, tern_kl_divergence in include/tern_bench.h
 * "perplexity"); this file reads flags and the text, and prints. Output follows llama-perplexity:
 * the running perplexity after each chunk as "[1]x.xxxx,[2]..." and "Final estimate: PPL = X +/-
 * Y" on stdout, or one JSON object with --json. When stderr is a terminal a progress line with
 * an ETA is kept there; when stdout is that terminal too, the running values are printed at the
 * end instead of as they come, so the two never overwrite each other. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_json.h"

struct ppl_opts {
    const char *model, *file, *base;
    long long n_ctx, chunks, threads, batch;
    bool json, kld, ctx_given;
    struct cli_lora_opts lora;
};

static void ppl_init(void *o)
{
    *(struct ppl_opts *)o = (struct ppl_opts){.n_ctx = 512};
}

#define P struct ppl_opts
static const struct cli_option ppl_table[] = {
    {"-m", "--model", CLI_PATH, "FILE", CLI_AT(P, model), .def = "tern's embedded model",
     .help = "GGUF model or installed name"},
    {"-f", "--file", CLI_PATH, "FILE", CLI_AT(P, file),
     .help = "the text (UTF-8; malformed bytes read as U+FFFD, as llama.cpp)"},
    {"-c", "--ctx-size", CLI_INT, "N", CLI_AT(P, n_ctx), CLI_RANGE(4, CLI_MAX_N_CTX), CLI_GIVEN(P, ctx_given),
     .help = "tokens per chunk; the text needs at least 2N"},
    {NULL, "--chunks", CLI_INT, "K", CLI_AT(P, chunks), CLI_RANGE(1, 1 << 30), .def = "all the text holds",
     .help = "evaluate at most K chunks"},
    {"-b", "--batch-size", CLI_INT, "N", CLI_AT(P, batch), CLI_RANGE(1, CLI_MAX_N_CTX), .def = "min(N, 512)",
     .help = "tokens per forward pass"},
    {"-t", "--threads", CLI_INT, "N", CLI_AT(P, threads), CLI_RANGE(1, 512), .def = "all CPUs", .help = "threads"},
    {.kind = CLI_INCLUDE, .sub = cli_lora_table, CLI_AT(P, lora),
     .notes = (const struct cli_note[]){{"--lora", NULL, "measure with a LoRA adapter attached (llama.cpp's "
             "GGUF, as llama-perplexity --lora / --lora-scaled)"}, {NULL}}},
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(P, json),
     .help = "print one JSON object: ppl, ppl_err, n_ctx, n_chunks, n_tokens, n_scored, chunks (running "
             "PPL), seconds; with KL: \"kld\""},
    {NULL, "--kl-divergence-base", CLI_PATH, "F", CLI_AT(P, base),
     .help = "also save the model's log-probabilities of the scored tokens to F (llama.cpp's format: it "
             "reads tern's files and vice versa)"},
    {NULL, "--kl-divergence", CLI_FLAG, NULL, CLI_AT(P, kld),
     .help = "instead, read F (with --kl-divergence-base F) and compare the model with it: KL "
             "divergence, PPL ratio, same top token, ...; the tokens and -c come from F, -f is not needed"},
    {0},
};
#undef P

const struct cli_command cli_spec_perplexity = {
    "perplexity", "[-m MODEL] -f TEXT [-c N] [--chunks K] [options]\n"
    "       tern perplexity [-m MODEL] --kl-divergence --kl-divergence-base FILE [options]",
    "Perplexity as llama.cpp's llama-perplexity computes it: the text is tokenized (BOS\n"
    "added as the model's tokenizer says, one final newline dropped), cut into chunks of\n"
    "N tokens, and each chunk is decoded alone (its first token replaced by BOS when the\n"
    "tokenizer adds one). Only the second half of each chunk is scored: tokens N/2+1 .. N-1,\n"
    "each from the logits one position earlier. Prints the running perplexity after each\n"
    "chunk ([1]x,[2]y,...) and \"Final estimate: PPL = X +/- Y\" (Y = PPL x the standard\n"
    "error of the mean negative log-likelihood).\n",
    ppl_table, CLI_OPTS(struct ppl_opts, ppl_init),
    "Exit status 0: done; 1: an error (an unreadable or too short text, a bad base file);\n"
    "2: a usage error.\n",
};

/* What the progress callback prints, and keeps for the end. */
struct ppl_out {
    bool json, kld;
    bool status;         /* stderr is a terminal: a progress line is kept there */
    bool live;           /* print the running values as they come (else at the end) */
    struct tern_ppl_report *hist; /* (n_chunks_total) the figures after each chunk */
    int n_hist;
    bool nomem;
    bool header_done;
};

static void fmt_duration(double s, char *buf, size_t cap)
{
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, cap, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, cap, "%lds", t);
}

static void print_kld_row(const struct tern_ppl_report *r, bool *header_done)
{
    const struct tern_kld_stats *k = &r->kld;
    if (!*header_done) {
        printf("chunk        PPL(Q)           ln(PPL(Q)/PPL(base))       KL divergence           "
               "RMS dp              same top\n");
        *header_done = true;
    }
    printf("%4d  %9.4f ± %9.4f  %10.5f ± %10.5f  %10.5f ± %10.5f  %6.3f ± %6.3f %%  %6.3f ± %6.3f %%\n",
           r->n_chunks, r->ppl, r->ppl_err, k->log_ppl_ratio, k->log_ppl_ratio_err, k->kld,
           k->kld_err, 100 * k->dp_rms, 100 * k->dp_rms_err, 100 * k->same_top,
           100 * k->same_top_err);
}

static void on_progress(const struct tern_ppl_report *r, void *user)
{
    struct ppl_out *o = user;
    if (!o->hist && !o->nomem && !(o->hist = malloc((size_t)r->n_chunks_total * sizeof *o->hist)))
        o->nomem = true;
    if (o->hist && o->n_hist < r->n_chunks_total) o->hist[o->n_hist++] = *r;
    if (o->status) fputs("\r\033[K", stderr);
    if (o->live && !o->json) {
        if (o->kld) print_kld_row(r, &o->header_done);
        else printf("[%d]%.4f,", r->n_chunks, r->ppl);
        fflush(stdout);
    }
    if (o->status && r->n_chunks < r->n_chunks_total) {
        char eta[32];
        const double per = r->seconds / r->n_chunks;
        fmt_duration(per * (r->n_chunks_total - r->n_chunks), eta, sizeof eta);
        fprintf(stderr, "perplexity: chunk %d/%d, PPL %.4f, %.2f s/chunk, ETA %s", r->n_chunks,
                r->n_chunks_total, r->ppl, per, eta);
        if (o->kld) fprintf(stderr, ", KLD %.5f", r->kld.kld);
        fflush(stderr);
    }
}

static void print_kld_summary(const struct tern_ppl_report *r)
{
    const struct tern_kld_stats *k = &r->kld;
    if (r->n_scored < 100)
        printf("(only %lld tokens scored: the statistics below are rough)\n", (long long)r->n_scored);
    printf("====== Perplexity statistics ======\n");
    printf("Mean PPL(Q)                   : %10.6f ± %10.6f\n", r->ppl, r->ppl_err);
    printf("Mean PPL(base)                : %10.6f ± %10.6f\n", k->ppl_base, k->ppl_base_err);
    printf("Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100 * k->log_ppl_cor);
    printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", k->log_ppl_ratio, k->log_ppl_ratio_err);
    printf("Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", k->ppl_ratio, k->ppl_ratio_err);
    printf("Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", k->ppl_diff, k->ppl_diff_err);
    printf("\n====== KL divergence statistics ======\n");
    printf("Mean    KLD: %10.6f ± %10.6f\n", k->kld, k->kld_err);
    const struct { const char *name; double v; } kq[] = {
        {"Maximum", k->kld_max}, {"99.9%  ", k->kld_p999}, {"99.0%  ", k->kld_p99},
        {"Median ", k->kld_median}, {"10.0%  ", k->kld_p10}, {" 5.0%  ", k->kld_p5},
        {" 1.0%  ", k->kld_p1}, {"Minimum", k->kld_min}};
    for (size_t i = 0; i < sizeof kq / sizeof kq[0]; i++) printf("%s KLD: %10.6f\n", kq[i].name, kq[i].v);
    printf("\n====== Token probability statistics ======\n");
    printf("Mean    Δp: %6.3f ± %5.3f %%\n", 100 * k->dp, 100 * k->dp_err);
    const struct { const char *name; double v; } dq[] = {
        {"Maximum", k->dp_max}, {"99.9%  ", k->dp_p999}, {"99.0%  ", k->dp_p99},
        {"95.0%  ", k->dp_p95}, {"90.0%  ", k->dp_p90}, {"75.0%  ", k->dp_p75},
        {"Median ", k->dp_median}, {"25.0%  ", k->dp_p25}, {"10.0%  ", k->dp_p10},
        {" 5.0%  ", k->dp_p5}, {" 1.0%  ", k->dp_p1}, {" 0.1%  ", k->dp_p01},
        {"Minimum", k->dp_min}};
    for (size_t i = 0; i < sizeof dq / sizeof dq[0]; i++) printf("%s Δp: %6.3f%%\n", dq[i].name, 100 * dq[i].v);
    printf("RMS Δp    : %6.3f ± %5.3f %%\n", 100 * k->dp_rms, 100 * k->dp_rms_err);
    printf("Same top p: %6.3f ± %5.3f %%\n", 100 * k->same_top, 100 * k->same_top_err);
}

static int print_json(const char *model, const char *text, const char *base, bool kld_mode,
                      int threads, const struct tern_ppl_report *r, const struct ppl_out *o)
{
    cJSON *j = cJSON_CreateObject();
    cli_json_str(j, "model", model ? model : "(embedded)");
    if (text) cli_json_str(j, "text", text);
    cli_json_num(j, "ppl", r->ppl);
    cli_json_num(j, "ppl_err", r->ppl_err);
    cli_json_int(j, "n_ctx", r->n_ctx);
    cli_json_int(j, "n_batch", r->n_batch);
    cli_json_int(j, "n_chunks", r->n_chunks);
    cli_json_int(j, "n_tokens", r->n_tokens);
    cli_json_int(j, "n_scored", r->n_scored);
    cli_json_bool(j, "add_bos", r->add_bos);
    cli_json_int(j, "threads", threads);
    cli_json_num(j, "seconds", r->seconds);
    cJSON *a = cli_json_arr(j, "chunks");
    for (int i = 0; i < o->n_hist; i++) cli_json_num(a, NULL, o->hist[i].ppl);
    if (base) cli_json_str(j, kld_mode ? "kl_base_read" : "kl_base_written", base);
    if (r->has_kld) {
        const struct tern_kld_stats *k = &r->kld;
        cJSON *d = cli_json_obj(j, "kld");
        const struct { const char *name; double v; } f[] = {
            {"mean", k->kld}, {"mean_err", k->kld_err}, {"max", k->kld_max},
            {"p99_9", k->kld_p999}, {"p99", k->kld_p99}, {"median", k->kld_median},
            {"p10", k->kld_p10}, {"p5", k->kld_p5}, {"p1", k->kld_p1}, {"min", k->kld_min},
            {"same_top", k->same_top}, {"same_top_err", k->same_top_err},
            {"ppl_base", k->ppl_base}, {"ppl_base_err", k->ppl_base_err},
            {"ppl_ratio", k->ppl_ratio}, {"ppl_ratio_err", k->ppl_ratio_err},
            {"ln_ppl_ratio", k->log_ppl_ratio}, {"ln_ppl_ratio_err", k->log_ppl_ratio_err},
            {"ppl_diff", k->ppl_diff}, {"ppl_diff_err", k->ppl_diff_err},
            {"ln_ppl_cor", k->log_ppl_cor},
            {"dp_mean", k->dp}, {"dp_mean_err", k->dp_err}, {"dp_rms", k->dp_rms},
            {"dp_rms_err", k->dp_rms_err}, {"dp_max", k->dp_max}, {"dp_p99_9", k->dp_p999},
            {"dp_p99", k->dp_p99}, {"dp_p95", k->dp_p95}, {"dp_p90", k->dp_p90},
            {"dp_p75", k->dp_p75}, {"dp_median", k->dp_median}, {"dp_p25", k->dp_p25},
            {"dp_p10", k->dp_p10}, {"dp_p5", k->dp_p5}, {"dp_p1", k->dp_p1},
            {"dp_p0_1", k->dp_p01}, {"dp_min", k->dp_min}};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) cli_json_num(d, f[i].name, f[i].v);
    }
    return cli_json_emit("perplexity", stdout, j, false, "", "\n");
}

/* n_ctx of a base file (its header), for the training-context warning; 0 if unreadable (the
 * library then says what is wrong with it). */
static int base_n_ctx(const char *path)
{
    FILE *f = fopen(path, "rb");
    char magic[8];
    int32_t n_ctx = 0;
    if (!f) return 0;
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "_logits_", 8) || fread(&n_ctx, 4, 1, f) != 1)
        n_ctx = 0;
    fclose(f);
    return n_ctx;
}

int cmd_perplexity(int argc, char **argv)
{
    const char *cmd = "perplexity";
    struct ppl_opts o;
    ppl_init(&o);
    const int pr = cli_parse(&cli_spec_perplexity, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *model = o.model, *file = o.file, *base = o.base;
    const long long n_ctx = o.n_ctx, chunks = o.chunks, threads = o.threads, batch = o.batch;
    const bool json = o.json, kld = o.kld, ctx_given = o.ctx_given;
    struct cli_lora_opts lora = o.lora;
    int rc;
    if ((rc = cli_need_model(cmd, model))) return rc;
    if (kld && !base)
        return cli_usage_error(cmd, "--kl-divergence compares with a base file: give "
                               "--kl-divergence-base FILE");
    if (!kld && !file) return cli_usage_error(cmd, "missing -f FILE (the text to evaluate)");
    if (kld && file)
        fprintf(stderr, "tern %s: note: with --kl-divergence the tokens come from %s; -f %s is "
                "not read\n", cmd, base, file);

    char *text = NULL;
    size_t text_len = 0;
    if (!kld) {
        text = cli_read_file(file, &text_len);
        if (!text) {
            fprintf(stderr, "tern %s: cannot read %s: %s\n", cmd, file, strerror(errno));
            return CLI_EXIT_FAIL;
        }
        if (text_len == 0 || (text_len == 1 && text[0] == '\n')) {
            fprintf(stderr, "tern %s: %s is empty: nothing to evaluate\n", cmd, file);
            free(text);
            return CLI_EXIT_FAIL;
        }
    }

    struct tern_model *m = NULL;
    struct tern_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0, n_bad = 0;
    struct ppl_out out = {.json = json, .kld = kld};
    tern_status st = cli_load_model(model, &m);
    if (!st) st = tern_tokenizer_from_gguf(tern_model_gguf(m), &tok);
    if (!st && !kld) st = tern_ppl_tokenize(tok, text, text_len, &ids, &n_ids, &n_bad);
    if (st) { rc = cli_report(cmd, st); goto done; }
    if ((rc = cli_lora_load(cmd, &lora, m, json ? NULL : stderr))) goto done;
    if (n_bad)
        fprintf(stderr, "tern %s: warning: %s holds %zu bytes that are not valid UTF-8; each is read "
                "as U+FFFD, as llama.cpp reads it\n", cmd, file, n_bad);
    if (!kld && n_ids < 2 * (size_t)n_ctx) {
        fprintf(stderr, "tern %s: %s tokenizes to %zu tokens, but a context of %lld (-c) needs at "
                "least %lld tokens (2 x %lld): give a longer text or a smaller -c\n", cmd, file,
                n_ids, n_ctx, 2 * n_ctx, n_ctx);
        rc = CLI_EXIT_FAIL;
        goto done;
    }
    const long long eff_ctx = kld ? base_n_ctx(base) : n_ctx;
    if (kld && ctx_given && eff_ctx > 0 && eff_ctx != n_ctx)
        fprintf(stderr, "tern %s: note: %s was written with chunks of %lld tokens; -c %lld is not "
                "used\n", cmd, base, eff_ctx, n_ctx);
    /* no generation here: only the chunk size can pass the training context */
    if (eff_ctx > 0) cli_warn_train_ctx(cmd, m, eff_ctx, 0);

    struct tern_ppl_params p = tern_ppl_default_params();
    p.n_ctx = (int)n_ctx;
    p.n_chunks = (int)chunks;
    p.n_batch = (int)batch;
    p.n_threads = (int)threads;
    p.kl_base_path = kld ? NULL : base;
    p.progress = on_progress;
    p.user = &out;
    p.lora = lora.ad;
    p.lora_scales = lora.scale;
    p.n_lora = lora.n;
    out.status = isatty(STDERR_FILENO);
    out.live = !(out.status && isatty(STDOUT_FILENO));
    if (!kld) {
        const long long fit = (long long)(n_ids / (size_t)n_ctx);
        const long long nc = chunks && chunks < fit ? chunks : fit;
        if (!json)
            fprintf(stderr, "tern %s: %zu tokens, %lld chunk%s of %lld, scoring the last %lld tokens "
                    "of each\n", cmd, n_ids, nc, nc == 1 ? "" : "s", n_ctx, n_ctx - 1 - n_ctx / 2);
        if (out.status) { /* something to see while the first chunk runs */
            fprintf(stderr, "perplexity: chunk 0/%lld", nc);
            fflush(stderr);
        }
    }
    struct tern_ppl_report r;
    st = kld ? tern_kl_divergence(m, tok, base, &p, &r) : tern_perplexity(m, tok, ids, n_ids, &p, &r);
    if (out.status) fputs("\r\033[K", stderr);
    if (st) {
        if (out.live && !json && out.n_hist && !kld) putchar('\n');
        rc = cli_report(cmd, st);
        goto done;
    }
    if (out.nomem) {
        fprintf(stderr, "tern %s: out of memory for the per-chunk figures\n", cmd);
        rc = CLI_EXIT_FAIL;
        goto done;
    }
    rc = CLI_EXIT_OK;
    if (json) {
        const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        rc = print_json(model, kld ? NULL : file, base, kld, threads ? (int)threads : cpus > 0 ? (int)cpus : 1,
                        &r, &out);
    } else if (kld) {
        /* kept back while the progress line ran */
        for (int i = 0; !out.live && i < out.n_hist; i++) print_kld_row(&out.hist[i], &out.header_done);
        printf("\n");
        print_kld_summary(&r);
    } else {
        if (!out.live)
            for (int i = 0; i < out.n_hist; i++) printf("[%d]%.4f,", i + 1, out.hist[i].ppl);
        printf("\n");
        if (r.ppl_err <= 0)
            fprintf(stderr, "tern %s: warning: the negative log-likelihoods have no positive "
                    "variance; no uncertainty\n", cmd);
        printf("Final estimate: PPL = %.4f +/- %.5f\n", r.ppl, r.ppl_err);
    }
    if (!json && base && !kld) fprintf(stderr, "tern %s: base log-probabilities written to %s\n", cmd, base);
done:
    free(out.hist);
    free(ids);
    free(text);
    if (tok) tern_tokenizer_free(tok);
    cli_lora_free(&lora);
    if (m) tern_model_free(m);
    return rc;
}

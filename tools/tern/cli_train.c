/* cli_train.c — the training loop of tern train and tern distill (read cli_train.h). One loop
 * for both, so a distillation run logs, validates, checkpoints, resumes and stops on NaN exactly
 * as a training run does; with a teacher signal each line adds the KL, CE and top-1 agreement
 * (and whether the step was a QAT step). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "tern_gguf.h"
#include "tern_train.h"
#include "util/error.h"
#include "cli_distill_length.h"
#include "cli_distill_speed.h"
#include "cli_gov.h"
#include "cli_train.h"

bool cli_ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

struct doc_lines {
    int64_t *v;
    size_t n, cap;
    bool oom;
};

static void add_doc_line(int64_t line, void *user)
{
    struct doc_lines *l = user;
    if (l->n == l->cap) {
        const size_t cap = l->cap ? 2 * l->cap : 1024;
        int64_t *v = realloc(l->v, cap * sizeof *v);
        if (!v) {
            l->oom = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = line;
}

/* The template: template_file's text when given (a config's chat_template_file), else the
 * tokenizer GGUF's own. */
static tern_status load_template(const struct tern_gguf *g, const char *template_file,
                                 struct tern_chat_template **out)
{
    if (!template_file || !template_file[0]) return tern_chat_template_from_gguf(g, out);
    size_t len;
    char *src = cli_read_file(template_file, &len);
    if (!src) return tern_fail(TERN_ERR_IO, "cannot read chat_template_file %s", template_file);
    tern_status st = tern_chat_template_create(src, len, out);
    free(src);
    if (st) tern_fail_prefix(st, "chat_template_file %s: ", template_file);
    return st;
}

tern_status cli_train_load_data_tmpl(const char *cmd, const char *path, const char *tokenizer,
                                     const char *template_file, int n_ctx, bool strict,
                                     bool loss_on_prompt, bool mark_tools, int64_t **doc_lines,
                                     struct tern_train_data **out)
{
    if (doc_lines) *doc_lines = NULL;
    if (!cli_ends_with(path, ".jsonl")) return tern_train_data_open(path, out);
    struct doc_lines lines = {0};
    struct tern_tokenizer *tok = NULL;
    struct tern_gguf *g = NULL;
    struct tern_chat_template *tmpl = NULL;
    struct tern_train_data_writer *w = NULL;
    struct tern_train_render_report rep;
    memset(&rep, 0, sizeof rep);
    struct tern_train_render_params rp = tern_train_render_default_params();
    rp.max_tokens = n_ctx;
    rp.strict = strict;
    rp.loss_on_prompt = loss_on_prompt;
    if (mark_tools) rp.call_valid = cli_eval_call_valid;
    if (doc_lines) {
        rp.on_doc = add_doc_line;
        rp.on_doc_user = &lines;
    }
    const double t0 = cli_now_s();
    tern_status st = tern_tokenizer_load(tokenizer, &tok);
    if (!st) st = tern_gguf_open(tokenizer, &g);
    if (!st) st = load_template(g, template_file, &tmpl);
    if (!st) st = tern_train_data_writer_create(&w);
    if (!st) st = tern_train_data_add_jsonl(w, tok, tmpl, path, &rp, &rep);
    if (!st && lines.oom) st = TERN_ERR_NOMEM;
    if (!st) st = tern_train_data_from_writer(w, out);
    if (!st) { /* stderr also with --json: stdout carries only the steps */
        fprintf(stderr, "tern %s: %s: %lld conversations -> %lld documents, %llu tokens (%.1f %% "
                "trained on) in %.1f s", cmd, path, (long long)rep.lines, (long long)rep.docs,
                (unsigned long long)rep.tokens, rep.tokens ? 100.0 * rep.loss_tokens / rep.tokens : 0.0,
                cli_now_s() - t0);
        if (mark_tools)
            fprintf(stderr, "; %lld answers with valid tool calls marked for the early tool-call loss",
                    (long long)rep.tool_turns);
        if (rep.malformed || rep.no_assistant || rep.too_long)
            fprintf(stderr, "; skipped %lld malformed, %lld without an assistant turn, %lld longer "
                    "than n_ctx %d (first: %s)", (long long)rep.malformed, (long long)rep.no_assistant,
                    (long long)rep.too_long, n_ctx, rep.first_problem);
        fputc('\n', stderr);
    }
    if (!st && doc_lines) *doc_lines = lines.v;
    else free(lines.v);
    tern_train_data_writer_free(w);
    tern_chat_template_free(tmpl);
    tern_gguf_close(g);
    tern_tokenizer_free(tok);
    return st;
}

static void fmt_eta(double s, char *buf, size_t n)
{
    if (!isfinite(s) || s < 0) s = 0;
    const long x = (long)(s + 0.5);
    if (x >= 3600) snprintf(buf, n, "%ldh%02ldm", x / 3600, x / 60 % 60);
    else snprintf(buf, n, "%ldm%02lds", x / 60, x % 60);
}

/* Validation per length bucket, and the drift across the buckets that hold
 * validation tokens (max - min of top-1 agreement and of CE). */
static tern_status validate_buckets(const struct cli_train_run *r, int step, bool tty)
{
    const struct tern_distill_recipe *rc = r->recipe;
    struct tern_distill_eval e[8];
    double lo = INFINITY, hi = -INFINITY, clo = INFINITY, chi = -INFINITY;
    for (int b = 0; b < rc->n_buckets; b++) {
        tern_status st = tern_trainer_eval_distill_bucket(r->t, r->vd, r->vkd, b, &e[b]);
        if (st) return st;
        if (!e[b].tokens) continue;
        lo = fmin(lo, e[b].agree), hi = fmax(hi, e[b].agree);
        clo = fmin(clo, e[b].ce), chi = fmax(chi, e[b].ce);
    }
    const double drift = hi >= lo ? hi - lo : 0.0, ce_drift = chi >= clo ? chi - clo : 0.0;
    if (r->json) {
        printf("{\"step\":%d,\"val_buckets\":[", step);
        for (int b = 0; b < rc->n_buckets; b++)
            printf("%s{\"len\":%d,\"val_tokens\":%lld,\"val_kl\":%.6f,\"val_ce\":%.6f,"
                   "\"val_agree\":%.6f}", b ? "," : "", rc->bucket_len[b], e[b].tokens, e[b].kl,
                   e[b].ce, e[b].agree);
        printf("],\"agree_drift\":%.6f,\"ce_drift\":%.6f}\n", drift, ce_drift);
    } else {
        fprintf(stderr, "%sstep %d  validation per length bucket:", tty ? "\r" : "", step);
        for (int b = 0; b < rc->n_buckets; b++)
            if (e[b].tokens)
                fprintf(stderr, "  <=%d: CE %.4f agree %.2f %% (%lld)", rc->bucket_len[b], e[b].ce,
                        100.0 * e[b].agree, e[b].tokens);
            else
                fprintf(stderr, "  <=%d: none", rc->bucket_len[b]);
        fprintf(stderr, "; drift: agreement %.2f points, CE %.4f\n", 100.0 * drift, ce_drift);
    }
    return TERN_OK;
}

static tern_status validate(const struct cli_train_run *r, int step, bool tty)
{
    if (r->kd) {
        struct tern_distill_eval e;
        tern_status st = tern_trainer_eval_distill(r->t, r->vd, r->vkd, &e);
        if (st) return st;
        if (r->json)
            printf("{\"step\":%d,\"val_loss\":%.6f,\"val_kl\":%.6f,\"val_ce\":%.6f,"
                   "\"val_agree\":%.6f,\"val_tokens\":%lld}\n", step, e.loss, e.kl, e.ce, e.agree,
                   e.tokens);
        else
            fprintf(stderr, "%sstep %d/%d  val loss %.4f  KL %.4f  CE %.4f  top-1 agreement %.2f %% "
                    "(%lld tokens)%s\n", tty ? "\r" : "", step, r->c->steps, e.loss, e.kl, e.ce,
                    100.0 * e.agree, e.tokens, tty ? "          " : "");
        if (r->recipe && r->recipe->n_buckets && (st = validate_buckets(r, step, tty))) return st;
        /* the safety rail: validation quality moves the latency weights */
        bool moved = false;
        const double scale = tern_trainer_latency_rail(r->t, e.ce, &moved);
        if (moved && r->latency) {
            if (r->json)
                printf("{\"step\":%d,\"rail\":{\"val_ce\":%.6f,\"latency_scale\":%g}}\n", step,
                       e.ce, scale);
            else
                fprintf(stderr, "step %d  safety rail: validation CE %.4f, the latency weights now "
                        "at %g of their excess over 1\n", step, e.ce, scale);
        }
    } else {
        double vl = 0;
        long long vn = 0;
        tern_status st = tern_trainer_eval(r->t, r->vd, &vl, &vn);
        if (st) return st;
        if (r->json)
            printf("{\"step\":%d,\"val_loss\":%.6f,\"val_tokens\":%lld}\n", step, vl, vn);
        else
            fprintf(stderr, "%sstep %d/%d  val loss %.4f (%lld tokens)%s\n", tty ? "\r" : "", step,
                    r->c->steps, vl, vn, tty ? "                    " : "");
    }
    if (r->json) fflush(stdout);
    return r->speed ? cli_distill_speed_step(r->speed, r->t, step) : TERN_OK;
}

int cli_train_loop(const struct cli_train_run *r)
{
    struct tern_trainer *t = r->t;
    const char *cmd = r->cmd;
    const int start = tern_trainer_step_index(t);
    const bool quiet = r->rank != 0; /* the other processes of a data-parallel run */
    const bool tty = !r->json && !quiet && isatty(STDERR_FILENO);
    const double t0 = cli_now_s();
    long long tokens = 0;
    int saved_step = start;
    tern_status st = TERN_OK;
    struct tern_train_step_info si;
    while (!st && tern_trainer_step_index(t) < r->last) {
        if (r->length && (st = cli_distill_length_step(r->length, t, r->d, tern_trainer_step_index(t))))
            break;
        st = r->kd ? tern_trainer_step_distill(t, r->d, r->kd, &si) : tern_trainer_step(t, r->d, &si);
        if (st) break;
        tokens += si.tokens;
        const double el = cli_now_s() - t0, tps = tokens / (el > 0 ? el : 1e-9);
        const double eta = (double)(r->last - si.step) * si.tokens / (tps > 0 ? tps : 1);
        if (quiet) {
        } else if (r->json) {
            printf("{\"step\":%d,\"loss\":%.6f,\"lr\":%.6g,\"grad_norm\":%.6g,\"tokens\":%lld,"
                   "\"loss_tokens\":%lld,\"tokens_per_s\":%.1f,\"eta_s\":%.1f",
                   si.step, si.loss, si.lr, si.grad_norm, si.tokens, si.loss_tokens, tps, eta);
            if (r->kd)
                printf(",\"kl\":%.6g,\"ce\":%.6g,\"agree\":%.6f,\"qat\":%s,\"early_tool_ramp\":%.4f",
                       si.kl, si.ce, si.agree, si.qat ? "true" : "false", si.early_tool_ramp);
            printf("}\n");
            fflush(stdout);
        } else {
            char e[32], kd[128] = "", ramp[32] = "";
            fmt_eta(eta, e, sizeof e);
            if (si.early_tool_ramp > 0) snprintf(ramp, sizeof ramp, " early-tool ramp %.2f", si.early_tool_ramp);
            if (r->kd)
                snprintf(kd, sizeof kd, " (KL %.4f CE %.4f agree %.0f %%%s%s)", si.kl, si.ce,
                         100.0 * si.agree, si.qat ? " QAT" : "", ramp);
            fprintf(stderr, "%sstep %d/%d  loss %.4f%s  lr %.2e  %.0f tok/s  ETA %s%s",
                    tty ? "\r" : "", si.step, r->c->steps, si.loss, kd, si.lr, tps, e,
                    tty ? "   " : "\n");
        }
        if (!quiet && r->vd && (si.step % r->val_every == 0 || si.step == r->last) &&
            (st = validate(r, si.step, tty)))
            break;
        if (!quiet && r->c->ckpt_every > 0 && si.step % r->c->ckpt_every == 0 && si.step < r->last) {
            st = tern_trainer_checkpoint_save(t, r->ckdir);
            if (!st) saved_step = si.step;
        }
    }
    if (tty) fputc('\n', stderr);
    if (st && quiet) return CLI_EXIT_FAIL;
    if (st) {
        if (saved_step > 0 || r->resumed)
            fprintf(stderr, "tern %s: stopped; the last good checkpoint (step %d) is in %s; "
                    "--resume %s continues from it\n", cmd, saved_step, r->ckdir, r->ckdir);
        else
            fprintf(stderr, "tern %s: stopped before the first checkpoint\n", cmd);
        return cli_report(cmd, st);
    }
    if (quiet) return CLI_EXIT_OK;
    st = tern_trainer_checkpoint_save(t, r->ckdir);
    if (!st) st = tern_trainer_export(t, r->out);
    if (!st && !r->json)
        fprintf(stderr, "tern %s: wrote %s (F32) and checkpoint %s (step %d)\n", cmd, r->out,
                r->ckdir, tern_trainer_step_index(t));
    return st ? cli_report(cmd, st) : CLI_EXIT_OK;
}

/* --lora-alpha: (0, 1e6], an open bound CLI_FRANGE cannot say. */
static int alpha_take(const char *cmd, const struct cli_option *opt, const char *val, void *opts)
{
    (void)opt;
    struct cli_lora_train_opts *o = opts;
    char *e;
    if (!*val || (o->alpha = strtod(val, &e), *e || !(o->alpha > 0) || o->alpha > 1e6))
        return cli_usage_error(cmd, "--lora-alpha '%s' is not a number in (0, 1e6]", val), -1;
    return 0;
}

/* --lora-dropout: [0, 1); given as 0 it is stored as -1, distinct from not given. */
static int dropout_take(const char *cmd, const struct cli_option *opt, const char *val, void *opts)
{
    (void)opt;
    struct cli_lora_train_opts *o = opts;
    char *e;
    if (!*val || (o->dropout = strtod(val, &e), *e || !(o->dropout >= 0) || !(o->dropout < 1)))
        return cli_usage_error(cmd, "--lora-dropout '%s' is not a number in [0, 1)", val), -1;
    if (o->dropout == 0) o->dropout = -1;
    return 0;
}

#define L struct cli_lora_train_opts
const struct cli_option cli_lora_train_table[] = {
    {NULL, "--lora-base", CLI_PATH, "MODEL", CLI_AT(L, base), CLI_GIVEN(L, given), .group = "LoRA",
     .help = "train LoRA adapters on this frozen model (a GGUF or an installed name; its shape and "
             "tokenizer; the config's model keys are not needed); -o then writes the adapter "
             "(llama.cpp's LoRA GGUF)"},
    {NULL, "--lora-rank", CLI_INT, "R", CLI_AT(L, rank), CLI_RANGE(1, 1024), CLI_GIVEN(L, given),
     .def = "16", .help = "adapter rank"},
    {NULL, "--lora-alpha", CLI_CALL, "A", .call = alpha_take, CLI_GIVEN(L, given),
     .def = "alpha = 2 x rank", .help = "scale alpha / rank, in (0, 1e6]"},
    {NULL, "--lora-dropout", CLI_CALL, "P", .call = dropout_take, CLI_GIVEN(L, given), .def = "0",
     .help = "dropout on the adapters' input while training, in [0, 1)"},
    {NULL, "--lora-targets", CLI_STRING, "LIST", CLI_AT(L, targets), CLI_GIVEN(L, given), .def = "all",
     .help = "matrices to adapt: q,k,v,o,gate,up,down or all"},
    {NULL, "--chat-template-file", CLI_PATH, "FILE", CLI_AT(L, template_file), CLI_GIVEN(L, given),
     .help = "render .jsonl data with this Jinja template instead of the tokenizer's own; a LoRA "
             "adapter carries it (tokenizer.chat_template)"},
    {0},
};
#undef L

tern_status cli_lora_train_base(const struct cli_lora_train_opts *o, struct tern_train_config *c)
{
    return o->base ? tern_train_config_set_lora(c, o->base) : TERN_OK;
}

tern_status cli_lora_train_apply(const struct cli_lora_train_opts *o, struct tern_train_config *c)
{
    tern_status st = TERN_OK;
    if (o->rank) c->lora_rank = (int)o->rank;
    if (o->alpha > 0) c->lora_alpha = (float)o->alpha;
    if (o->dropout) c->lora_dropout = o->dropout < 0 ? 0.0f : (float)o->dropout;
    if (o->targets && (st = tern_lora_targets_parse(o->targets, &c->lora_targets)))
        return tern_fail_prefix(st, "--lora-targets: ");
    if ((o->rank || o->alpha > 0 || o->dropout || o->targets) && !c->lora_base[0])
        return tern_fail(TERN_ERR_ARG, "--lora-rank, --lora-alpha, --lora-dropout and "
                         "--lora-targets need --lora-base (or \"lora\" in the config)");
    if (o->rank && !(o->alpha > 0)) c->lora_alpha = 2.0f * c->lora_rank;
    if (o->template_file) {
        if (strlen(o->template_file) >= sizeof c->chat_template_file)
            return tern_fail(TERN_ERR_ARG, "--chat-template-file: path too long");
        snprintf(c->chat_template_file, sizeof c->chat_template_file, "%s", o->template_file);
    }
    return TERN_OK;
}

void cli_lora_train_report(const char *cmd, struct tern_trainer *t, const struct tern_train_config *c)
{
    size_t n_trained;
    tern_trainer_weights(t, &n_trained);
    fprintf(stderr, "tern %s: LoRA rank %d, alpha %g, dropout %g on %s (frozen); %zu adapter parameters\n",
            cmd, c->lora_rank, c->lora_alpha, c->lora_dropout, c->lora_base, n_trained);
}

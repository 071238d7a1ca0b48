/* cli_draft.c — see cli_draft.h. */
#include "cli_draft.h"

#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_json.h"
#include "cli_options.h"

#define D struct cli_draft_opts
const struct cli_option cli_draft_table[] = {
    {NULL, "--draft", CLI_STRING, "SRC", CLI_AT(D, source), .group = "Speculative decoding",
     .help = "speculative decoding: 'ngram' (prompt lookup), 'mtp' (the model's own "
             "multi-token-prediction layer: Qwen3.5 files with one), 'self:q4_0' (a q4_0 copy of the "
             "model's weights made at load; any weight type), or a drafter GGUF with the same "
             "tokenizer. Output at --temp 0 is the model's own greedy output token for token; sampled "
             "output keeps the model's distribution"},
    {NULL, "--draft-max", CLI_INT, "K", CLI_AT(D, n_max), CLI_RANGE(1, 64), .def = "8",
     .help = "most tokens drafted per step"},
    {NULL, "--draft-min", CLI_INT, "K", CLI_AT(D, n_min), CLI_RANGE(1, 64), .def = "1",
     .help = "fewest tokens drafted per step; --draft-min = --draft-max fixes the length and keeps "
             "speculation on, for reproducible sampling"},
    {0},
};
#undef D

int cli_draft_check(const char *cmd, const struct cli_draft_opts *o)
{
    if (!o->source && (o->n_max || o->n_min))
        return cli_usage_error(cmd, "--draft-max / --draft-min need --draft SRC");
    if (o->n_max && o->n_min > o->n_max)
        return cli_usage_error(cmd, "--draft-min %lld exceeds --draft-max %lld", o->n_min, o->n_max);
    return 0;
}

int cli_draft_create(const char *cmd, const struct cli_draft_opts *o, const struct tern_model *target,
                     int n_ctx, int threads, FILE *log, struct tern_draft **out)
{
    const double t0 = cli_now_ms();
    struct tern_draft_params dp = tern_draft_default_params();
    dp.source = o->source;
    if (o->n_max) dp.n_max = (int)o->n_max;
    if (o->n_min) dp.n_min = (int)o->n_min;
    if (o->n_max && !o->n_min && dp.n_min > dp.n_max) dp.n_min = dp.n_max;
    if (o->n_min && !o->n_max && dp.n_max < dp.n_min) dp.n_max = dp.n_min;
    dp.n_ctx = n_ctx;
    dp.n_threads = threads;
    tern_status st = tern_draft_create(target, &dp, out);
    if (st) return cli_report(cmd, st);
    const struct tern_model *dm = tern_draft_model(*out);
    if (log && dm)
        fprintf(log, "tern %s: draft %s ready in %.0f ms (%s, %.1f MiB of weights%s)\n",
                cmd, o->source, cli_now_ms() - t0, tern_draft_kind(*out),
                tern_model_get_info(dm)->weight_bytes / 1048576.0,
                tern_model_get_info(dm)->repacked_bytes ? ", converted in memory" : "");
    return 0;
}

void cli_draft_print_stats(const char *cmd, FILE *f, const struct tern_draft *d,
                           const struct tern_gen_stats *gs)
{
    fprintf(f, "tern %s: speculative (%s): drafted %d, accepted %d (%.1f %%), %.2f accepted per "
            "round over %d rounds + %d plain steps; rollback per round p50 %.0f %% / p95 %.0f %%; "
            "drafting %.1f ms, verifying %.1f ms; %.2f tokens/s", cmd, tern_draft_kind(d),
            gs->spec_drafted, gs->spec_accepted, 100.0 * gs->spec_accept_rate,
            gs->spec_mean_accepted, gs->spec_rounds, gs->spec_plain_steps,
            100.0 * gs->spec_rollback_p50, 100.0 * gs->spec_rollback_p95, gs->spec_draft_ms,
            gs->spec_verify_ms, gs->gen_tps);
    if (gs->spec_plain_tps > 0) fprintf(f, " (plain steps %.2f tokens/s)", gs->spec_plain_tps);
    if (gs->spec_off_periods) fprintf(f, "; switched off %d times (did not pay)", gs->spec_off_periods);
    fprintf(f, "%s\n", gs->spec_exact ? "; greedy output exact" : "");
}

void cli_draft_json_stats(cJSON *obj, const struct tern_draft *d, const struct tern_gen_stats *gs)
{
    cJSON *s = cli_json_obj(obj, "spec");
    cli_json_str(s, "draft", tern_draft_kind(d));
    cli_json_int(s, "drafted", gs->spec_drafted);
    cli_json_int(s, "accepted", gs->spec_accepted);
    cli_json_num(s, "accept_rate", gs->spec_accept_rate);
    cli_json_num(s, "mean_accepted", gs->spec_mean_accepted);
    cli_json_int(s, "rounds", gs->spec_rounds);
    cli_json_int(s, "plain_steps", gs->spec_plain_steps);
    cli_json_num(s, "rollback_p50", gs->spec_rollback_p50);
    cli_json_num(s, "rollback_p95", gs->spec_rollback_p95);
    cli_json_num(s, "draft_ms", gs->spec_draft_ms);
    cli_json_num(s, "verify_ms", gs->spec_verify_ms);
    cli_json_num(s, "tps", gs->gen_tps);
    cli_json_num(s, "plain_tps", gs->spec_plain_tps);
    cli_json_int(s, "off_periods", gs->spec_off_periods);
    cli_json_bool(s, "exact", gs->spec_exact);
}

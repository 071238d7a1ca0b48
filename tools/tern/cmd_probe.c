/* cmd_probe.c — `tern probe`: logits of a model for given tokens, as JSON lines, and a
 * comparison against a llama.cpp reference dump (--ref). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_json.h"

enum { LOGITS_NONE = 0, LOGITS_FIRST = 1, LOGITS_LAST = 2, LOGITS_ALL = 4 };

struct probe_opts {
    const char *model, *tokens, *ref;
    int logits; /* LOGITS_* bits */
    long long top, threads;
    double tol;
    bool json;
    struct cli_lora_opts lora;
};

static void probe_init(void *p)
{
    *(struct probe_opts *)p = (struct probe_opts){.top = 10};
}

#define P struct probe_opts
static const struct cli_option probe_table[] = {
    {"-m", "--model", CLI_PATH, "FILE", CLI_AT(P, model), .flags = CLI_REQUIRED, .help = "GGUF model"},
    {NULL, "--tokens", CLI_STRING, "LIST", CLI_AT(P, tokens), .help = "comma-separated token ids"},
    {NULL, "--top", CLI_INT, "K", CLI_AT(P, top), CLI_RANGE(1, 1000), .help = "entries in each top list"},
    {NULL, "--logits", CLI_ENUM, "WHICH", CLI_AT(P, logits),
     .choices = (const struct cli_choice[]){{"none", LOGITS_NONE}, {"first", LOGITS_FIRST},
                                            {"last", LOGITS_LAST}, {"first,last", LOGITS_FIRST | LOGITS_LAST},
                                            {"last,first", LOGITS_FIRST | LOGITS_LAST}, {"all", LOGITS_ALL},
                                            {NULL}},
     .help = "also print full \"logits\" for these positions"},
    {"-t", "--threads", CLI_INT, "N", CLI_AT(P, threads), CLI_RANGE(1, 512), .def = "all CPUs", .help = "threads"},
    {NULL, "--ref", CLI_PATH, "FILE", CLI_AT(P, ref),
     .help = "compare with a llama.cpp reference (<model>.jsonl and the .logits.bin beside it, format "
             "of shared/fixtures/README.md); prints the figures and exits 1 beyond the tolerance"},
    {NULL, "--tol", CLI_DOUBLE, "X", CLI_AT(P, tol), CLI_FRANGE(1e-9, 1e3),
     .def = "5e-3 for F16 models, 0.03 quantized", .help = "tolerance for --ref"},
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(P, json), .help = "with --ref: print the report as one JSON object"},
    {.kind = CLI_INCLUDE, .sub = cli_lora_table, CLI_AT(P, lora),
     .notes = (const struct cli_note[]){{"--lora", NULL, "with --tokens: a LoRA adapter (llama.cpp's "
             "GGUF) at SCALE (default 1)"}, {NULL}}},
    {0},
};
#undef P

const struct cli_command cli_spec_probe = {
    "probe", "-m MODEL (--tokens 1,2,3 | --ref REF.jsonl) [options]",
    "Decodes the tokens in one batch and prints one JSON object per position:\n"
    "  {\"pos\": i, \"top\": [[id, logit], ...]}  (the distribution for position i+1)\n",
    probe_table, CLI_OPTS(struct probe_opts, probe_init), NULL,
};

static int run_ref(struct tern_model *m, const char *ref, int threads, double tol, bool json)
{
    struct tern_ref_report r;
    tern_status st = tern_ref_check(m, ref, threads, tol, json ? NULL : stderr, &r);
    if (st) return cli_report("probe", st);
    if (json) {
        cJSON *j = cJSON_CreateObject();
        cli_json_bool(j, "pass", r.pass);
        cli_json_num(j, "tol", r.tol);
        cli_json_int(j, "seqs", r.n_seqs);
        cli_json_int(j, "vectors", r.n_vectors);
        cli_json_int(j, "top_agree", r.top_agree);
        cli_json_int(j, "top_total", r.top_total);
        cli_json_num(j, "max_abs_top", r.max_abs_top);
        cli_json_num(j, "mean_abs_top", r.mean_abs_top);
        cli_json_bool(j, "full_vectors", r.has_full);
        cli_json_num(j, "max_abs_full", r.max_abs_full);
        cli_json_num(j, "mean_abs_full", r.mean_abs_full);
        cli_json_int(j, "greedy_checked", r.greedy_checked);
        cli_json_int(j, "greedy_match", r.greedy_match);
        if (cli_json_emit("probe", stdout, j, false, "", "\n")) return CLI_EXIT_FAIL;
    } else {
        printf("reference: %s\n", ref);
        printf("tolerance: %g\n", r.tol);
        printf("top-K entries within tolerance: %d / %d over %d logit vectors\n", r.top_agree,
               r.top_total, r.n_vectors);
        printf("max |dlogit| (top-K): %.3g   mean: %.3g\n", r.max_abs_top, r.mean_abs_top);
        if (r.has_full)
            printf("max |dlogit| (full vectors): %.3g   mean: %.3g\n", r.max_abs_full,
                   r.mean_abs_full);
        printf("greedy tokens where the reference margin > 2 x tol: %d / %d match\n",
               r.greedy_match, r.greedy_checked);
        printf("%s\n", r.pass ? "PASS" : "FAIL: beyond tolerance");
    }
    return r.pass ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

int cmd_probe(int argc, char **argv)
{
    struct probe_opts o;
    probe_init(&o);
    const int pr = cli_parse(&cli_spec_probe, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *model = o.model, *tokens_s = o.tokens, *ref = o.ref;
    const long long top = o.top, threads = o.threads;
    const double tol = o.tol;
    const bool json = o.json;
    struct cli_lora_opts lora = o.lora;
    if (!tokens_s && !ref) return cli_usage_error("probe", "give --tokens or --ref");
    if (lora.n && ref) return cli_usage_error("probe", "--lora applies to --tokens, not to --ref");
    const bool all = o.logits & LOGITS_ALL, first = o.logits & LOGITS_FIRST, last = o.logits & LOGITS_LAST;

    int32_t *ids = NULL;
    int n = 0, bad;
    if (tokens_s && !cli_parse_token_list(tokens_s, &ids, &n, &bad))
        return cli_usage_error("probe", "--tokens: entry %d is not a token id", bad);

    struct tern_model *m;
    tern_status st = tern_model_load(model, NULL, &m);
    if (st) { free(ids); return cli_report("probe", st); }
    int rc = CLI_EXIT_OK;
    if (ref) {
        rc = run_ref(m, ref, (int)threads, tol, json);
        if (!tokens_s) goto done;
    }
    {
        struct tern_context_params cp = {.n_ctx = n, .n_batch = n, .n_threads = (int)threads};
        struct tern_context *ctx = NULL;
        if ((st = tern_context_create(m, &cp, &ctx))) {
            rc = cli_report("probe", st);
            goto done;
        }
        if ((rc = cli_lora_load("probe", &lora, m, stderr)) || (rc = cli_lora_attach("probe", &lora, ctx))) {
            tern_context_free(ctx);
            goto done;
        }
        if ((st = tern_decode(ctx, ids, n, 0, TERN_LOGITS_ALL))) {
            /* a decode refusal (a token outside the vocabulary) comes after the context exists */
            tern_context_free(ctx);
            rc = cli_report("probe", st);
            goto done;
        }
        const int nv = tern_model_n_vocab(m);
        int k = (int)top < nv ? (int)top : nv;
        int *best = malloc((size_t)k * sizeof *best);
        int prc = CLI_EXIT_OK; /* rc may already hold --ref's verdict */
        if (!best) {
            fprintf(stderr, "tern probe: out of memory\n");
            prc = CLI_EXIT_FAIL;
        }
        for (int i = 0; i < n && best && prc == CLI_EXIT_OK; i++) {
            const float *lg = tern_context_logits(ctx, i);
            /* top-k by insertion (k is small); ties by lower id */
            int cnt = 0;
            for (int id = 0; id < nv; id++) {
                if (cnt == k && !(lg[id] > lg[best[k - 1]])) continue;
                int j = cnt < k ? cnt++ : k - 1;
                while (j > 0 && lg[id] > lg[best[j - 1]]) { best[j] = best[j - 1]; j--; }
                best[j] = id;
            }
            cJSON *line = cJSON_CreateObject();
            cli_json_int(line, "pos", i);
            cli_json_int(line, "token", ids[i]);
            cJSON *tl = cli_json_arr(line, "top");
            for (int j = 0; j < cnt; j++) {
                cJSON *pair = cli_json_arr(tl, NULL);
                cli_json_int(pair, NULL, best[j]);
                cli_json_f32(pair, NULL, lg[best[j]]);
            }
            if (all || (first && i == 0) || (last && i == n - 1)) {
                cJSON *full = cli_json_arr(line, "logits");
                for (int id = 0; id < nv; id++) cli_json_f32(full, NULL, lg[id]);
            }
            prc = cli_json_emit("probe", stdout, line, false, "", "\n");
        }
        if (prc) rc = prc;
        free(best);
        tern_context_free(ctx);
    }
done:
    free(ids);
    cli_lora_free(&lora);
    tern_model_free(m);
    return rc;
}

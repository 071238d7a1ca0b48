/* cmd_probe.c — `tern probe`: logits of a model for given tokens, as JSON lines, and a
 * comparison against a llama.cpp reference dump (--ref). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_json.h"

static void help(void)
{
    printf("usage: tern probe -m MODEL (--tokens 1,2,3 | --ref REF.jsonl) [options]\n"
           "\n"
           "Decodes the tokens in one batch and prints one JSON object per position:\n"
           "  {\"pos\": i, \"top\": [[id, logit], ...]}  (the distribution for position i+1)\n"
           "\n"
           "  -m, --model FILE     GGUF model\n"
           "  --tokens LIST        comma-separated token ids\n"
           "  --top K              entries in each top list (default 10)\n"
           "  --logits WHICH       also print full \"logits\" for: first,last | all | none (default)\n"
           "  -t, --threads N      threads (default: all CPUs)\n"
           "  --ref FILE           compare with a llama.cpp reference (<model>.jsonl and the\n"
           "                       .logits.bin beside it, format of shared/fixtures/README.md);\n"
           "                       prints the figures and exits 1 beyond the tolerance\n"
           "  --tol X              tolerance for --ref (default 5e-3 for F16 models, 0.03 quantized)\n"
           "  --json               with --ref: print the report as one JSON object\n"
           "  --lora FILE[:SCALE]  with --tokens: a LoRA adapter (llama.cpp's GGUF) at SCALE\n"
           "                       (default 1); repeatable\n");
}

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
    const char *model = NULL, *tokens_s = NULL, *logits_s = "none", *ref = NULL, *v;
    long long top = 10, threads = 0;
    double tol = 0;
    bool json = false;
    struct cli_lora_opts lora = {0};
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { help(); return 0; }
        if ((r = cli_lora_opt(argc, argv, &i, &lora))) { if (r < 0) return 2; continue; }
        if (!strcmp(argv[i], "--json")) { json = true; continue; }
        if ((r = cli_opt(argc, argv, &i, "-m", "--model", &v))) { if (r < 0) return 2; model = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--tokens", NULL, &v))) { if (r < 0) return 2; tokens_s = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--logits", NULL, &v))) { if (r < 0) return 2; logits_s = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--ref", NULL, &v))) { if (r < 0) return 2; ref = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--top", NULL, &v))) {
            if (r < 0) return 2;
            if (!cli_parse_int(v, 1, 1000, &top)) return cli_usage_error("probe", "--top '%s' must be 1..1000", v);
            continue;
        }
        if ((r = cli_opt(argc, argv, &i, "-t", "--threads", &v))) {
            if (r < 0) return 2;
            if (!cli_parse_int(v, 1, 512, &threads)) return cli_usage_error("probe", "-t '%s' must be 1..512", v);
            continue;
        }
        if ((r = cli_opt(argc, argv, &i, "--tol", NULL, &v))) {
            if (r < 0) return 2;
            if (!cli_parse_float(v, 1e-9, 1e3, &tol)) return cli_usage_error("probe", "--tol '%s' must be a positive number", v);
            continue;
        }
        return cli_usage_error("probe", "unknown option '%s'", argv[i]);
    }
    if (!model) return cli_usage_error("probe", "missing -m MODEL");
    if (!tokens_s && !ref) return cli_usage_error("probe", "give --tokens or --ref");
    if (lora.n && ref) return cli_usage_error("probe", "--lora applies to --tokens, not to --ref");
    bool first = false, last = false, all = false;
    if (!strcmp(logits_s, "all")) all = true;
    else if (!strcmp(logits_s, "first")) first = true;
    else if (!strcmp(logits_s, "last")) last = true;
    else if (!strcmp(logits_s, "first,last") || !strcmp(logits_s, "last,first")) first = last = true;
    else if (strcmp(logits_s, "none")) return cli_usage_error("probe", "--logits '%s': use first,last | all | none", logits_s);

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

/* cmd_bench_grammar.c — `tern bench --json-schema S` / `--grammar G`: constrained decoding
 * timed against unconstrained decoding of the same number of tokens, in one run.
 *
 * Each repetition generates greedily from the same short prompt twice, alternating the order:
 * constrained (tern_gen_params.grammar), then unconstrained with max_tokens set to what the
 * constrained run produced and end-of-generation ignored, so both decode the same count. Timed:
 * the generation phase of tern_generate (sampling, masks, forward passes), wall clock and this
 * process's CPU time; the prompt is excluded. The ratio compares tokens per second (and tokens
 * per CPU second, which holds on a busy machine). Forced tokens go through the model in batches,
 * so a grammar that forces much can be faster than unconstrained decoding: they are reported, and
 * so is the grammar's share of the CPU time: its cost where nothing is forced. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_grammar.h"

struct gb_acc {
    double gen_ms, cpu_ms, mask_ms, grammar_ms;
    long tokens, forced, masks;
};

static int count_pass(int32_t id, void *user)
{
    (void)id;
    (void)user;
    return 0;
}

static tern_status one(struct tern_generator *gen, struct tern_sampler *smp, const int32_t *prompt, int n,
                       const struct tern_grammar *g, int max_tokens, struct tern_gen_stats *st, double *cpu)
{
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = max_tokens;
    gp.grammar = g;
    gp.ignore_eog = g == NULL;
    gp.on_token = count_pass;
    tern_generator_reset(gen);
    double c0 = cli_clock_ms(CLOCK_PROCESS_CPUTIME_ID);
    tern_status rc = tern_generate(gen, smp, prompt, n, &gp, NULL, NULL, st);
    *cpu = cli_clock_ms(CLOCK_PROCESS_CPUTIME_ID) - c0; /* includes the prompt: subtracted below in proportion (small prompt) */
    return rc;
}

int cli_bench_grammar(const char *model, struct cli_grammar_opts *gro, int threads, int n_gen, int reps,
                      bool json)
{
    int rc = cli_grammar_read("bench", gro);
    if (rc) return rc;
    struct tern_model *m = NULL;
    struct tern_tokenizer *tok = NULL;
    struct tern_context *ctx = NULL;
    struct tern_generator *gen = NULL;
    struct tern_sampler *smp = NULL;
    struct tern_grammar_vocab *v = NULL;
    struct tern_grammar *g = NULL;
    rc = CLI_EXIT_FAIL;
    tern_status st = tern_model_load(model, &(struct tern_model_params){.prefault = true}, &m);
    if (!st) st = tern_tokenizer_from_gguf(tern_model_gguf(m), &tok);
    if (st) { rc = cli_report("bench", st); goto done; }
    if ((rc = cli_grammar_build("bench", gro, tok, &v, &g))) goto done;
    rc = CLI_EXIT_FAIL;
    const char *text = "Reply in JSON: ";
    int32_t prompt[64];
    size_t n_prompt = 0;
    if ((st = tern_tokenize(tok, text, strlen(text), TERN_TOK_ADD_SPECIAL, prompt, 64, &n_prompt))) {
        rc = cli_report("bench", st);
        goto done;
    }
    struct tern_context_params cp = {.n_ctx = (int)n_prompt + n_gen + 8, .n_threads = threads};
    struct tern_sampler_params sp = tern_sampler_default_params(); /* greedy */
    if ((st = tern_context_create(m, &cp, &ctx)) || (st = tern_generator_create(ctx, tok, &gen)) ||
        (st = tern_sampler_create(&sp, tern_model_n_vocab(m), &smp))) {
        rc = cli_report("bench", st);
        goto done;
    }
    struct gb_acc acc[2] = {{0}}; /* 0 unconstrained, 1 constrained */
    int n_doc = 0, n_incomplete = 0;
    /* one untimed round first: first visits of grammar positions and warm caches belong to the
     * grammar's first use, which `tern grammar bench` measures; greedy decoding makes the
     * constrained count the same every round */
    struct tern_gen_stats cs, us;
    double c_cpu, u_cpu;
    st = one(gen, smp, prompt, (int)n_prompt, g, n_gen, &cs, &c_cpu);
    const int n_c = cs.n_generated;
    if (!st) st = one(gen, smp, prompt, (int)n_prompt, NULL, n_c, &us, &u_cpu);
    for (int r = 0; r < reps && !st; r++) {
        if (r % 2 == 0) {
            if ((st = one(gen, smp, prompt, (int)n_prompt, g, n_gen, &cs, &c_cpu))) break;
            if ((st = one(gen, smp, prompt, (int)n_prompt, NULL, n_c, &us, &u_cpu))) break;
        } else {
            if ((st = one(gen, smp, prompt, (int)n_prompt, NULL, n_c, &us, &u_cpu))) break;
            if ((st = one(gen, smp, prompt, (int)n_prompt, g, n_gen, &cs, &c_cpu))) break;
        }
        struct tern_gen_stats *s2[2] = {&us, &cs};
        double cpu2[2] = {u_cpu, c_cpu};
        for (int k = 0; k < 2; k++) {
            acc[k].gen_ms += s2[k]->gen_ms;
            /* the prompt's share of the CPU time, scaled from its wall share */
            const double tot = s2[k]->prompt_ms + s2[k]->gen_ms;
            acc[k].cpu_ms += tot > 0 ? cpu2[k] * s2[k]->gen_ms / tot : cpu2[k];
            acc[k].tokens += s2[k]->n_generated;
            acc[k].forced += s2[k]->grammar_forced;
            acc[k].masks += s2[k]->grammar_masks;
            acc[k].mask_ms += s2[k]->grammar_mask_ms;
            acc[k].grammar_ms += s2[k]->grammar_ms;
        }
        n_doc += cs.stop == TERN_GEN_STOP_DONE || cs.stop == TERN_GEN_STOP_EOG;
        n_incomplete += cs.incomplete;
    }
    if (st) { rc = cli_report("bench", st); goto done; }
    const double u_tps = acc[0].tokens / (acc[0].gen_ms / 1e3), c_tps = acc[1].tokens / (acc[1].gen_ms / 1e3);
    const double u_cps = acc[0].tokens / (acc[0].cpu_ms / 1e3), c_cps = acc[1].tokens / (acc[1].cpu_ms / 1e3);
    /* what the grammar costs where it does not help: its share of the constrained run's CPU
     * time on the thread that samples (forced tokens aside, the rest is decoding as usual) */
    const double share = acc[1].cpu_ms > 0 ? acc[1].grammar_ms / acc[1].cpu_ms : 0;
    const double mask_us = acc[1].masks ? acc[1].mask_ms * 1e3 / (double)acc[1].masks : 0;
    if (json) {
        printf("{\"model\": \"%s\", \"threads\": %d, \"reps\": %d, \"n_tokens\": %ld, \"forced_tokens\": %ld, "
               "\"tps_unconstrained\": %.2f, \"tps_constrained\": %.2f, \"ratio\": %.4f, "
               "\"tps_cpu_unconstrained\": %.2f, \"tps_cpu_constrained\": %.2f, \"ratio_cpu\": %.4f, "
               "\"grammar_cpu_share\": %.5f, \"mask_us_per_mask\": %.2f, \"documents_complete\": %d, \"incomplete\": %d}\n",
               model, threads, reps, acc[1].tokens / reps, acc[1].forced / reps, u_tps, c_tps, c_tps / u_tps, u_cps,
               c_cps, c_cps / u_cps, share, mask_us, n_doc, n_incomplete);
    } else {
        printf("constrained vs unconstrained decoding: %s, %d threads, %d repetitions (alternating), "
               "greedy, %ld tokens per run (%ld forced by the grammar)\n", model, threads, reps,
               acc[1].tokens / reps, acc[1].forced / reps);
        printf("  unconstrained  %8.2f tokens/s   %8.2f tokens per CPU second\n", u_tps, u_cps);
        printf("  constrained    %8.2f tokens/s   %8.2f tokens per CPU second\n", c_tps, c_cps);
        printf("  ratio          %8.4f            %8.4f (CPU)\n", c_tps / u_tps, c_cps / u_cps);
        printf("  grammar work: %.3f%% of the constrained run's CPU time (its cost where nothing is forced)\n",
               100 * share);
        printf("  mask time: %.2f us per mask (CPU, mask + applying it to the logits), %ld masks\n", mask_us,
               acc[1].masks);
        printf("  documents completed %d of %d runs%s\n", n_doc, reps,
               n_incomplete ? " (the others ran out of -n inside the document)" : "");
    }
    rc = CLI_EXIT_OK;
done:
    tern_sampler_free(smp);
    tern_generator_free(gen);
    tern_context_free(ctx);
    tern_grammar_free(g);
    tern_grammar_vocab_free(v);
    tern_tokenizer_free(tok);
    tern_model_free(m);
    return rc;
}

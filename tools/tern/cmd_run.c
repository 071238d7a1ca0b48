/* cmd_run.c — `tern run`: generate from a prompt given as text or token ids.
 *
 * Generation is the library's (tern_generate, include/tern.h "generation"), the same loop
 * `tern chat` and the server use, so the stop rules (every end-of-generation token), the stats
 * and the prompt cache behave the same everywhere. This file only turns flags into a prompt and
 * parameters, and the generator's callbacks into output: streamed text (-p/-f), streamed ids
 * (--tokens), or one JSON object built with cJSON (--json). */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tern_gguf.h"
#include "cli_draft.h"
#include "cli_grammar.h"

struct run_opts {
    const char *model, *tokens, *prompt, *file;
    bool json, ignore_eos, parse_special;
    struct cli_gen_opts gen;
    struct cli_draft_opts draft;
    struct cli_grammar_opts grammar;
};

static void run_init(void *p)
{
    struct run_opts *o = p;
    *o = (struct run_opts){.gen = cli_gen_opts_default(32)};
    cli_grammar_opts_init(&o->grammar);
}

#define R struct run_opts
static const struct cli_note run_gen_notes[] = {{"--ctx-size", "prompt + N", NULL}, {NULL}};
static const struct cli_option run_table[] = {
    {"-m", "--model", CLI_PATH, "FILE", CLI_AT(R, model), .def = "tern's own embedded tool-calling model",
     .help = "GGUF model, or an installed model's name as tern models lists it"},
    {"-p", "--prompt", CLI_STRING, "TEXT", CLI_AT(R, prompt), .help = "prompt text"},
    {"-f", "--file", CLI_PATH, "FILE", CLI_AT(R, file), .help = "prompt text from a file (byte for byte)"},
    {NULL, "--parse-special", CLI_FLAG, NULL, CLI_AT(R, parse_special),
     .help = "recognize control tokens (<|im_start|> ...) in the prompt text"},
    {NULL, "--tokens", CLI_STRING, "LIST", CLI_AT(R, tokens), .help = "prompt as comma-separated token ids"},
    {NULL, "--ignore-eos", CLI_FLAG, NULL, CLI_AT(R, ignore_eos), .help = "do not stop at end-of-generation tokens"},
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(R, json),
     .help = "print one object: {\"model\", \"tokens\": [...], \"text\", \"n_prompt\", \"n_reused\", "
             "\"n_generated\", \"prompt_ms\", \"gen_ms\", \"stop\", ..}; NUL bytes of the text become "
             "U+FFFD; with --draft a \"spec\" object"},
    {.kind = CLI_INCLUDE, .sub = cli_gen_table, CLI_AT(R, gen), .notes = run_gen_notes},
    {.kind = CLI_INCLUDE, .sub = cli_draft_table, CLI_AT(R, draft)},
    {.kind = CLI_INCLUDE, .sub = cli_grammar_table, CLI_AT(R, grammar)},
    {0},
};
#undef R

const struct cli_command cli_spec_run = {
    "run", "[-m MODEL] (-p TEXT | -f FILE | --tokens 1,2,3) [-n N] [options]",
    "Generates up to N tokens after the prompt, stopping at an end-of-generation token (eos,\n"
    "eot, <|im_end|>, ...: tern_token_is_eog). With -p/-f the prompt is tokenized with the\n"
    "model's tokenizer (bos added as its metadata says) and the answer is streamed as text;\n"
    "with --tokens the generated ids are printed (comma-separated, the stopping token\n"
    "included).\n",
    run_table, CLI_OPTS(struct run_opts, run_init),
    "With a grammar, a \"grammar\" line on stderr (a \"grammar\" object with --json) gives the\n"
    "masks computed, their CPU time, the forced tokens and whether the output is incomplete.\n"
    "A warning goes to stderr when the context exceeds the model's training context. If\n"
    "stdout is closed by its reader (tern run ... | head -1), generation stops, the prompt\n"
    "cache is still saved and the exit status is 0. Exit status 1: an error (message on\n"
    "stderr); 2: a usage error.\n",
};

/* Where the generator's callbacks put the answer. */
struct run_out {
    bool json;          /* collect tokens and text for one JSON object at the end */
    bool ids;           /* --tokens without --json: stream the ids */
    int32_t *tokens;    /* (max_tokens) sampled ids, --json only */
    int n_tokens, cap_tokens;
    char *text;         /* (cap_text) the answer's text, --json only */
    size_t n_text, cap_text;
    int write_errno;    /* first failed write to stdout (EPIPE: the reader went away), or 0 */
    bool nomem;
};

/* Write to stdout and flush, so the text streams; false (and the error kept) on failure. */
static bool out_write(struct run_out *o, const char *p, size_t n)
{
    errno = 0;
    if (fwrite(p, 1, n, stdout) == n && fflush(stdout) == 0) return true;
    if (!o->write_errno) o->write_errno = errno ? errno : EIO;
    return false;
}

static int on_token(int32_t id, void *user)
{
    struct run_out *o = user;
    if (o->json) {
        if (o->n_tokens < o->cap_tokens) o->tokens[o->n_tokens++] = id;
        return 0;
    }
    if (!o->ids) return 0;
    char buf[16];
    int n = snprintf(buf, sizeof buf, "%s%d", o->n_tokens++ ? "," : "", id);
    return !out_write(o, buf, (size_t)n);
}

static int on_piece(const char *text, size_t len, void *user)
{
    struct run_out *o = user;
    if (!o->json) return o->ids ? 0 : !out_write(o, text, len);
    /* cJSON strings end at a NUL: keep the text whole by writing U+FFFD for each NUL byte */
    if (o->n_text + 3 * len + 1 > o->cap_text) {
        size_t cap = 2 * o->cap_text + 3 * len + 1;
        char *grown = realloc(o->text, cap);
        if (!grown) {
            o->nomem = true;
            return 1;
        }
        o->text = grown;
        o->cap_text = cap;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i]) o->text[o->n_text++] = text[i];
        else {
            memcpy(o->text + o->n_text, "\xEF\xBF\xBD", 3);
            o->n_text += 3;
        }
    }
    o->text[o->n_text] = '\0';
    return 0;
}

/* The --json object; false if it could not be built or written (o->write_errno says which). */
static bool print_json(struct run_out *o, const char *model, const struct tern_gen_stats *gs,
                       int n_ctx, const struct tern_draft *draft, bool grammar)
{
    cJSON *j = cJSON_CreateObject();
    cJSON *toks = cJSON_AddArrayToObject(j, "tokens");
    for (int i = 0; toks && i < o->n_tokens; i++) cJSON_AddItemToArray(toks, cJSON_CreateNumber(o->tokens[i]));
    cJSON_AddStringToObject(j, "model", model);
    cJSON_AddStringToObject(j, "text", o->text ? o->text : "");
    cJSON_AddNumberToObject(j, "n_prompt", gs->n_prompt);
    cJSON_AddNumberToObject(j, "n_reused", gs->n_reused);
    cJSON_AddNumberToObject(j, "n_prompt_decoded", gs->n_prompt_decoded);
    cJSON_AddNumberToObject(j, "n_generated", gs->n_generated);
    cJSON_AddNumberToObject(j, "n_ctx", n_ctx);
    cJSON_AddNumberToObject(j, "prompt_ms", gs->prompt_ms);
    cJSON_AddNumberToObject(j, "gen_ms", gs->gen_ms);
    cJSON_AddNumberToObject(j, "ttft_ms", gs->ttft_ms);
    cJSON_AddNumberToObject(j, "gen_tps", gs->gen_tps);
    cJSON_AddStringToObject(j, "stop", tern_gen_stop_name(gs->stop));
    if (draft) cli_draft_json_stats(j, draft, gs);
    if (grammar) {
        cJSON_AddBoolToObject(j, "incomplete", gs->incomplete);
        cli_grammar_json_stats(j, gs);
    }
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s) {
        o->nomem = true;
        return false;
    }
    bool ok = out_write(o, s, strlen(s)) && out_write(o, "\n", 1);
    free(s);
    return ok;
}

/* Text -> ids (malloc'ed into *ids), growing the buffer once if the first guess is too small. */
static tern_status tokenize_prompt(struct tern_tokenizer *tkz, const char *text, size_t len,
                                   unsigned flags, int32_t **ids, size_t *n)
{
    size_t cap = len + 8;
    tern_status st = TERN_OK;
    for (int attempt = 0; attempt < 2; attempt++) {
        free(*ids);
        *ids = malloc(cap * sizeof **ids);
        if (!*ids) return TERN_ERR_NOMEM;
        st = tern_tokenize(tkz, text, len, flags, *ids, cap, n);
        if (st != TERN_ERR_RANGE) break;
        cap = *n;
    }
    return st;
}

int cmd_run(int argc, char **argv)
{
    struct run_opts o;
    run_init(&o);
    const int pr = cli_parse(&cli_spec_run, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *model = o.model, *tokens_s = o.tokens, *prompt_text = o.prompt, *prompt_file = o.file;
    const bool json = o.json, ignore_eos = o.ignore_eos, parse_special = o.parse_special;
    struct cli_gen_opts g = o.gen;
    struct cli_draft_opts dro = o.draft;
    struct cli_grammar_opts gro = o.grammar;
    if (cli_need_model("run", model)) return CLI_EXIT_USAGE;
    if (cli_draft_check("run", &dro) || cli_grammar_check("run", &gro, false)) return CLI_EXIT_USAGE;
    if (!!tokens_s + !!prompt_text + !!prompt_file != 1)
        return cli_usage_error("run", "give exactly one prompt: -p TEXT, -f FILE or --tokens LIST");
    if (g.lora.n && g.cache_dir)
        return cli_usage_error("run", "--lora with --prompt-cache: the cache's KV would not be the "
                               "adapters'");
    cli_ignore_sigpipe();
    int32_t *prompt = NULL;
    int n_prompt = 0, bad;
    char *file_text = NULL;
    size_t text_len = 0;
    if (tokens_s && !cli_parse_token_list(tokens_s, &prompt, &n_prompt, &bad))
        return cli_usage_error("run", "--tokens: entry %d is not a token id", bad);
    if (prompt_file) {
        file_text = cli_read_file(prompt_file, &text_len);
        if (!file_text) {
            fprintf(stderr, "tern run: cannot read prompt file '%s': %s\n", prompt_file, strerror(errno));
            free(prompt);
            return CLI_EXIT_FAIL;
        }
        prompt_text = file_text;
    } else if (prompt_text) {
        text_len = strlen(prompt_text);
    }

    struct tern_model *m = NULL;
    struct tern_tokenizer *tkz = NULL;
    struct tern_context *ctx = NULL;
    struct tern_sampler *smp = NULL;
    struct tern_generator *gen = NULL;
    struct tern_prefix_cache *pc = NULL;
    struct tern_draft *draft = NULL;
    struct tern_grammar_vocab *gv = NULL;
    struct tern_grammar *gram = NULL;
    struct run_out out = {.json = json, .ids = tokens_s != NULL};
    int rc = CLI_EXIT_OK;
    if ((rc = cli_grammar_read("run", &gro))) goto done;
    tern_status st = cli_load_model(model, &m);
    /* the generator needs the tokenizer even for --tokens: it decides what ends generation */
    if (!st) st = tern_tokenizer_from_gguf(tern_model_gguf(m), &tkz);
    if (st) { rc = cli_report("run", st); goto done; }
    if (gro.src && (rc = cli_grammar_build("run", &gro, tkz, &gv, &gram))) goto done;
    if (prompt_text) {
        unsigned flags = TERN_TOK_ADD_SPECIAL | (parse_special ? TERN_TOK_PARSE_SPECIAL : 0);
        size_t need = 0;
        if ((st = tokenize_prompt(tkz, prompt_text, text_len, flags, &prompt, &need))) {
            rc = cli_report("run", st);
            goto done;
        }
        if (need == 0 || need > INT32_MAX) {
            rc = cli_usage_error("run", "the prompt is empty after tokenization");
            goto done;
        }
        n_prompt = (int)need;
    }
    long long n_predict = g.n_predict, n_ctx = g.n_ctx;
    if (n_ctx == 0) n_ctx = n_prompt + n_predict;
    if (n_prompt + n_predict > n_ctx) {
        rc = cli_usage_error("run", "prompt (%d) + -n (%lld) exceeds the context size -c %lld",
                             n_prompt, n_predict, n_ctx);
        goto done;
    }
    if (n_ctx > CLI_MAX_N_CTX) {
        rc = cli_usage_error("run", "prompt (%d) + -n (%lld) exceeds the largest context size, %d",
                             n_prompt, n_predict, CLI_MAX_N_CTX);
        goto done;
    }
    cli_warn_train_ctx("run", m, n_ctx, n_prompt + n_predict);

    struct tern_context_params cp = {.n_ctx = (int)n_ctx, .n_threads = (int)g.threads, .swa_full = g.swa_full};
    struct tern_sampler_params sp = g.sampler;
    if ((st = tern_context_create(m, &cp, &ctx)) ||
        (st = tern_sampler_create(&sp, tern_model_n_vocab(m), &smp)) ||
        (st = tern_generator_create(ctx, tkz, &gen))) {
        rc = cli_report("run", st);
        goto done;
    }
    if ((rc = cli_lora_load("run", &g.lora, m, json ? NULL : stderr)) ||
        (rc = cli_lora_attach("run", &g.lora, ctx)))
        goto done;
    if (g.cache_dir) {
        struct tern_prefix_cache_params pp = tern_prefix_cache_default_params();
        pp.budget_bytes = (uint64_t)g.cache_mb << 20;
        pp.dir = g.cache_dir;
        if ((st = tern_prefix_cache_create(m, &pp, &pc))) { rc = cli_report("run", st); goto done; }
        if (tern_prefix_cache_warning(pc)) fprintf(stderr, "tern run: prompt cache: %s\n", tern_prefix_cache_warning(pc));
        tern_generator_set_prefix_cache(gen, pc);
    }
    if (dro.source) {
        if ((rc = cli_draft_create("run", &dro, m, (int)n_ctx, (int)g.threads, json ? NULL : stderr, &draft))) goto done;
        if ((st = tern_generator_set_draft(gen, draft))) { rc = cli_report("run", st); goto done; }
    }
    if (json) {
        out.cap_tokens = (int)n_predict;
        out.tokens = malloc(((size_t)n_predict + 1) * sizeof *out.tokens);
        if (!out.tokens) {
            fprintf(stderr, "tern run: out of memory for %lld token ids\n", n_predict);
            rc = CLI_EXIT_FAIL;
            goto done;
        }
    }

    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = (int)n_predict;
    gp.ignore_eog = ignore_eos;
    gp.on_token = on_token;
    gp.grammar = gram;
    struct tern_gen_stats gs;
    st = tern_generate(gen, smp, prompt, n_prompt, &gp, on_piece, &out, &gs);
    if (st) { rc = cli_report("run", st); goto done; }
    if (out.nomem) {
        fprintf(stderr, "tern run: out of memory collecting the generated text\n");
        rc = CLI_EXIT_FAIL;
        goto done;
    }
    if (json) print_json(&out, model ? model : "(embedded) tern-tool", &gs, (int)n_ctx, draft, gram != NULL);
    else if (!out.write_errno) out_write(&out, "\n", 1);
    if (out.nomem) {
        fprintf(stderr, "tern run: out of memory printing the JSON result\n");
        rc = CLI_EXIT_FAIL;
    }
    if (!json) {
        fprintf(stderr, "tern run: prompt %d tokens in %.1f ms; generated %d tokens in %.1f ms "
                "(%.2f tokens/s); stop: %s\n", n_prompt, gs.prompt_ms, gs.n_generated, gs.gen_ms,
                gs.gen_tps, out.write_errno == EPIPE ? "output closed" : tern_gen_stop_name(gs.stop));
        if (draft) cli_draft_print_stats("run", stderr, draft, &gs);
        if (gram) cli_grammar_print_stats("run", stderr, &gs);
        const uint64_t state = tern_model_get_info(m)->state_bytes;
        fprintf(stderr, "tern run: RSS %.1f MiB (model file %.1f MiB mapped, KV cache %.1f MiB",
                cli_rss_bytes() / 1048576.0, tern_gguf_file_size(tern_model_gguf(m)) / 1048576.0,
                tern_model_kv_bytes(m, (int)n_ctx) / 1048576.0);
        if (state) /* two buffers per sequence: the rollback base (docs/models.md "Architectures") */
            fprintf(stderr, ", recurrent state 2 x %.1f MiB", state / 1048576.0);
        fprintf(stderr, ")\n");
    }
    /* A reader that went away (EPIPE) had what it wanted: not an error. Any other failed write
     * (disk full, I/O error) is. */
    if (out.write_errno && out.write_errno != EPIPE) {
        fprintf(stderr, "tern run: cannot write to stdout: %s\n", strerror(out.write_errno));
        rc = CLI_EXIT_FAIL;
    }
    if (pc) {
        if ((st = tern_prefix_cache_save(pc))) { rc = cli_report("run", st); goto done; }
        if (!json) fprintf(stderr, "tern run: prompt cache: reused %d of %d prompt tokens\n", gs.n_reused, n_prompt);
    }
done:
    tern_generator_free(gen);
    tern_grammar_free(gram);
    tern_grammar_vocab_free(gv);
    cli_grammar_opts_free(&gro);
    tern_draft_free(draft);
    tern_prefix_cache_free(pc);
    tern_sampler_free(smp);
    tern_context_free(ctx);
    cli_lora_free(&g.lora);
    tern_tokenizer_free(tkz);
    tern_model_free(m);
    free(file_text);
    free(prompt);
    free(out.tokens);
    free(out.text);
    return rc;
}

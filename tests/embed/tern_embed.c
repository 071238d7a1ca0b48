/* tern_embed.c — the smallest program embedding the runtime: it includes tern.h (and tern_gguf.h,
 * also libtern) and links libtern alone, so its link line and DT_NEEDED entries show what an
 * embedder pays for (scripts/check-lib-deps.sh: no HTTP server, no curl, no YAML).
 *
 *     tern_embed [MODEL.gguf [PROMPT]]
 *
 * Loads the model (without one: writes tern's tiny random-weight model to a temporary file),
 * renders nothing, tokenizes PROMPT, generates 16 tokens greedily past end-of-generation and
 * prints them; exits 1 unless all 16 came. ctest runs it as "embed_runtime". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tern.h"
#include "tern_gguf.h"

static int on_piece(const char *text, size_t len, void *user)
{
    (void)user;
    fwrite(text, 1, len, stdout);
    return 0;
}

static int fail(const char *what, tern_status st)
{
    fprintf(stderr, "tern_embed: %s: %s: %s\n", what, tern_status_name(st), tern_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    char tmp[] = "/tmp/tern_embed_XXXXXX";
    const char *path = argc > 1 ? argv[1] : NULL;
    const char *prompt = argc > 2 ? argv[2] : "Hello, tern";
    if (!path) {
        const int fd = mkstemp(tmp);
        if (fd < 0) { perror("tern_embed: mkstemp"); return 1; }
        close(fd);
        tern_status st = tern_synth_model_write("tiny", "q8_0", 1, tmp, NULL);
        if (st) return fail("writing the tiny model", st);
        path = tmp;
    }
    struct tern_model *m = NULL;
    struct tern_tokenizer *tok = NULL;
    struct tern_context *ctx = NULL;
    struct tern_sampler *s = NULL;
    struct tern_generator *g = NULL;
    int32_t ids[256];
    size_t n = 0;
    int rc = 1;
    tern_status st = tern_model_load(path, NULL, &m);
    if (st) { rc = fail(path, st); goto done; }
    if ((st = tern_tokenizer_from_gguf(tern_model_gguf(m), &tok))) { rc = fail("tokenizer", st); goto done; }
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = 256; cp.n_threads = 1;
    if ((st = tern_context_create(m, &cp, &ctx))) { rc = fail("context", st); goto done; }
    struct tern_sampler_params sp = tern_sampler_default_params(); /* temperature 0: greedy */
    if ((st = tern_sampler_create(&sp, tern_model_n_vocab(m), &s))) { rc = fail("sampler", st); goto done; }
    if ((st = tern_tokenize(tok, prompt, strlen(prompt), TERN_TOK_ADD_SPECIAL, ids, 256, &n))) {
        rc = fail("tokenize", st);
        goto done;
    }
    if ((st = tern_generator_create(ctx, tok, &g))) { rc = fail("generator", st); goto done; }
    struct tern_gen_params gp = tern_gen_default_params();
    gp.max_tokens = 16;
    gp.ignore_eog = true; /* a random-weight model may pick an end token at once */
    struct tern_gen_stats stats;
    if ((st = tern_generate(g, s, ids, (int)n, &gp, on_piece, NULL, &stats))) { rc = fail("generate", st); goto done; }
    printf("\n%d prompt tokens, %d generated (stop: %s)\n", stats.n_prompt, stats.n_generated,
           tern_gen_stop_name(stats.stop));
    rc = stats.n_prompt == (int)n && stats.n_generated == gp.max_tokens ? 0 : 1;
done:
    tern_generator_free(g);
    tern_sampler_free(s);
    tern_context_free(ctx);
    tern_tokenizer_free(tok);
    tern_model_free(m);
    if (path == tmp) unlink(tmp);
    return rc;
}

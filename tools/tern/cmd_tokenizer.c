/* cmd_tokenizer.c — `tern tokenizer train`: learn a byte-level BPE vocabulary from corpus .jsonl
 * files or plain text (tern_tokenizer_train; the trainer lives in src/train/bpe_train.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "tern_train.h"

#define TOK_MAX_FILES 4096
#define TOK_MAX_SPECIAL_ARGS 1024
struct tokenizer_opts {
    const char *files[TOK_MAX_FILES], *special[TOK_MAX_SPECIAL_ARGS], *out;
    int n_files, n_special;
    bool json;
    struct tern_bpe_train_params p;
};

static void tokenizer_init(void *o)
{
    struct tokenizer_opts *t = o;
    memset(t, 0, sizeof *t);
    t->p = tern_bpe_train_default_params();
}

/* --data FILE... has always taken every argument up to the next option, so the files after the
 * first are a positional list that shares the array */
#define K struct tokenizer_opts
static const struct cli_option tokenizer_table[] = {
    {NULL, "--data", CLI_LIST, "FILE", CLI_AT(K, files), CLI_COUNT(K, n_files, TOK_MAX_FILES),
     .help = "training files: .jsonl = corpus lines (tern corpus toolcalls; the prompt text: tool "
             "JSON, message contents, tool calls), anything else = plain text"},
    {.meta = "FILE...", .kind = CLI_LIST, CLI_AT(K, files), CLI_COUNT(K, n_files, TOK_MAX_FILES),
     .help = "more training files (--data a.jsonl b.txt)"},
    {"-o", "--output", CLI_PATH, "FILE", CLI_AT(K, out), .flags = CLI_REQUIRED,
     .help = "output GGUF (written atomically)"},
    {NULL, "--vocab-size", CLI_INT, "V", CLI_AT(K, p.vocab_size), CLI_RANGE(1, 1 << 20),
     .help = "all tokens, bytes and specials included"},
    {NULL, "--special", CLI_LIST, "TOKENS", CLI_AT(K, special), CLI_COUNT(K, n_special, TOK_MAX_SPECIAL_ARGS),
     .help = "more user-defined tokens, comma-separated"},
    {NULL, "--min-count", CLI_INT, "N", CLI_AT(K, p.min_pair_count), CLI_RANGE(1, 1000000000),
     .help = "do not merge pairs seen fewer than N times"},
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(K, json), .help = "print the report as JSON on stdout"},
    {0},
};
#undef K

const struct cli_command cli_spec_tokenizer_train = {
    "tokenizer train", "--data FILE... -o OUT.gguf [--vocab-size V] [--special TOKENS] [--min-count N] [--json]",
    "Learns a byte-level BPE vocabulary (GPT-2 byte map, qwen2 pre-tokenizer) and writes a\n"
    "vocab-only GGUF that tern's tokenizer loads: the 256 byte tokens, <|endoftext|>,\n"
    "<|im_start|>, <|im_end|> (control), <tool_call>, </tool_call>, <tool_response>,\n"
    "</tool_response> (user-defined, so tool-call syntax costs one token each), the merges,\n"
    "and unused padding up to V; eos <|im_end|>, bos/pad <|endoftext|>, no bos added; the\n"
    "chat template is Qwen2.5's (ChatML + Hermes tool calls).\n",
    tokenizer_table, CLI_OPTS(struct tokenizer_opts, tokenizer_init),
    "Example: tern tokenizer train --data corpus/train.jsonl --vocab-size 4096 -o tok.gguf\n",
};

static int train(int argc, char **argv)
{
    struct tokenizer_opts *o = malloc(sizeof *o);
    if (!o) {
        fprintf(stderr, "tern tokenizer: out of memory\n");
        return CLI_EXIT_FAIL;
    }
    tokenizer_init(o);
    int rc = cli_parse(&cli_spec_tokenizer_train, argc, argv, o);
    if (rc != CLI_PARSED) {
        free(o);
        return rc;
    }
    rc = CLI_EXIT_OK;
    struct tern_bpe_train_params p = o->p;
    const char **files = o->files, *out = o->out;
    const int n_files = o->n_files;
    const bool json = o->json;
    size_t cap = 1;
    for (int i = 0; i < o->n_special; i++)
        for (const char *c = o->special[i]; *c; c++) cap += *c == ',' ? 1 : 0;
    char **specials = calloc(cap + (size_t)o->n_special, sizeof *specials); /* owned copies */
    int n_specials = 0;
    if (!specials) {
        rc = cli_usage_error("tokenizer", "out of memory");
        goto done;
    }
    for (int i = 0; i < o->n_special; i++) {
        const char *v = o->special[i];
        for (const char *s = v; *s;) {
            const char *c = strchr(s, ',');
            size_t l = c ? (size_t)(c - s) : strlen(s);
            if (l == 0) { rc = cli_usage_error("tokenizer", "--special '%s' has an empty token", v); goto done; }
            if (!(specials[n_specials] = strndup(s, l))) { rc = cli_usage_error("tokenizer", "out of memory"); goto done; }
            n_specials++;
            s += l + (c ? 1 : 0);
        }
    }
    if (!n_files) { rc = cli_usage_error("tokenizer", "need --data FILE..."); goto done; }
    p.extra_special = (const char *const *)specials;
    p.n_extra_special = n_specials;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct tern_bpe_train_report rep;
    tern_status st = tern_tokenizer_train(files, n_files, &p, out, &rep);
    if (st) { rc = cli_report("tokenizer", st); goto done; }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    struct stat sb;
    long long size = stat(out, &sb) == 0 ? (long long)sb.st_size : -1;
    fprintf(stderr, "tern tokenizer: wrote %s (%d tokens: 256 bytes, %d special, %d merges, %d unused) "
                    "from %.1f MiB of text, %llu words (%llu distinct) in %.1f s\n",
            out, rep.n_vocab, rep.n_special, rep.n_merges, rep.n_padding, rep.text_bytes / 1048576.0,
            (unsigned long long)rep.n_words, (unsigned long long)rep.n_unique_words, secs);
    if (json)
        printf("{\"output\": \"%s\", \"bytes\": %lld, \"n_vocab\": %d, \"n_special\": %d, \"n_merges\": %d, "
               "\"n_unused\": %d, \"text_bytes\": %llu, \"words\": %llu, \"distinct_words\": %llu, "
               "\"seconds\": %.2f}\n",
               out, size, rep.n_vocab, rep.n_special, rep.n_merges, rep.n_padding,
               (unsigned long long)rep.text_bytes, (unsigned long long)rep.n_words,
               (unsigned long long)rep.n_unique_words, secs);
done:
    for (int i = 0; i < n_specials; i++) free(specials[i]);
    free(specials);
    free(o);
    return rc;
}

int cmd_tokenizer(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        cli_print_help(&cli_spec_tokenizer_train, argc < 2 ? stderr : stdout, 100);
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "train")) return train(argc - 1, argv + 1);
    return cli_usage_error("tokenizer", "unknown action '%s' (known: train)", argv[1]);
}

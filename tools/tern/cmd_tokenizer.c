/* cmd_tokenizer.c — `tern tokenizer train`: learn a byte-level BPE vocabulary from corpus .jsonl
 * files or plain text (tern_tokenizer_train; the trainer lives in src/train/bpe_train.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "tern_train.h"

static void help(void)
{
    printf("usage: tern tokenizer train --data FILE... -o OUT.gguf [--vocab-size V]\n"
           "                            [--special TOKENS] [--min-count N] [--json]\n"
           "\n"
           "Learns a byte-level BPE vocabulary (GPT-2 byte map, qwen2 pre-tokenizer) and writes a\n"
           "vocab-only GGUF that tern's tokenizer loads: the 256 byte tokens, <|endoftext|>,\n"
           "<|im_start|>, <|im_end|> (control), <tool_call>, </tool_call>, <tool_response>,\n"
           "</tool_response> (user-defined, so tool-call syntax costs one token each), the merges,\n"
           "and unused padding up to V; eos <|im_end|>, bos/pad <|endoftext|>, no bos added; the\n"
           "chat template is Qwen2.5's (ChatML + Hermes tool calls).\n"
           "\n"
           "  --data FILE...       training files: .jsonl = corpus lines (tern corpus toolcalls;\n"
           "                       the prompt text: tool JSON, message contents, tool calls),\n"
           "                       anything else = plain text. Repeatable.\n"
           "  -o, --output FILE    output GGUF (written atomically)\n"
           "  --vocab-size V       all tokens, bytes and specials included (default 4096)\n"
           "  --special TOKENS     more user-defined tokens, comma-separated (repeatable)\n"
           "  --min-count N        do not merge pairs seen fewer than N times (default 2)\n"
           "  --json               print the report as JSON on stdout\n"
           "\n"
           "Example: tern tokenizer train --data corpus/train.jsonl --vocab-size 4096 -o tok.gguf\n");
}

static int train(int argc, char **argv)
{
    struct tern_bpe_train_params p = tern_bpe_train_default_params();
    const char **files = calloc((size_t)argc, sizeof *files);
    char **specials = calloc((size_t)argc * 64 + 1, sizeof *specials); /* owned copies */
    int n_files = 0, n_specials = 0, rc = CLI_EXIT_OK;
    const char *out = NULL, *v;
    bool json = false;
    if (!files || !specials) {
        fprintf(stderr, "tern tokenizer: out of memory\n");
        free(files);
        free(specials);
        return CLI_EXIT_FAIL;
    }
    for (int i = 2; i < argc; i++) {
        int r;
        long long x;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            help();
            goto done;
        }
        if (!strcmp(argv[i], "--json")) { json = true; continue; }
        if (!strcmp(argv[i], "--data")) {
            int k = i + 1;
            while (k < argc && argv[k][0] != '-') files[n_files++] = argv[k++];
            if (k == i + 1) { rc = cli_usage_error("tokenizer", "--data needs at least one file"); goto done; }
            i = k - 1;
            continue;
        }
        if ((r = cli_opt(argc, argv, &i, "-o", "--output", &v))) { if (r < 0) { rc = CLI_EXIT_USAGE; goto done; } out = v; continue; }
        if ((r = cli_opt(argc, argv, &i, "--vocab-size", NULL, &v))) {
            if (r < 0) { rc = CLI_EXIT_USAGE; goto done; }
            if (!cli_parse_int(v, 1, 1 << 20, &x)) { rc = cli_usage_error("tokenizer", "--vocab-size '%s' is not a number in 1 .. 1048576", v); goto done; }
            p.vocab_size = (int)x;
            continue;
        }
        if ((r = cli_opt(argc, argv, &i, "--min-count", NULL, &v))) {
            if (r < 0) { rc = CLI_EXIT_USAGE; goto done; }
            if (!cli_parse_int(v, 1, 1000000000, &x)) { rc = cli_usage_error("tokenizer", "--min-count '%s' is not a number >= 1", v); goto done; }
            p.min_pair_count = (int)x;
            continue;
        }
        if ((r = cli_opt(argc, argv, &i, "--special", NULL, &v))) {
            if (r < 0) { rc = CLI_EXIT_USAGE; goto done; }
            for (const char *s = v; *s;) {
                const char *c = strchr(s, ',');
                size_t l = c ? (size_t)(c - s) : strlen(s);
                if (l == 0) { rc = cli_usage_error("tokenizer", "--special '%s' has an empty token", v); goto done; }
                if (n_specials >= argc * 64) { rc = cli_usage_error("tokenizer", "too many --special tokens"); goto done; }
                if (!(specials[n_specials] = strndup(s, l))) { rc = cli_usage_error("tokenizer", "out of memory"); goto done; }
                n_specials++;
                s += l + (c ? 1 : 0);
            }
            continue;
        }
        rc = cli_usage_error("tokenizer", "unknown option '%s'", argv[i]);
        goto done;
    }
    if (!n_files || !out) { rc = cli_usage_error("tokenizer", "need --data FILE... and -o OUT.gguf"); goto done; }
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
    free(files);
    return rc;
}

int cmd_tokenizer(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        help();
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "train")) return train(argc, argv);
    return cli_usage_error("tokenizer", "unknown action '%s' (known: train)", argv[1]);
}

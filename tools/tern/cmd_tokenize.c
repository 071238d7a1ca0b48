/* cmd_tokenize.c — `tern tokenize` and `tern detokenize`: text <-> token ids with a model's (or
 * a vocab-only GGUF's) tokenizer. Input is taken byte for byte: no newline is stripped and
 * nothing is normalized. --jsonl takes many documents at once (one JSON string per line, so a
 * document may hold newlines), which is how bench/peers compares ids with other tokenizers;
 * --time reports the speed of the tokenization itself, loading and printing excluded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_json.h"

struct tokenize_opts {
    const char *model, *prompt, *file;
    bool lines, no_bos, parse_special, json, jsonl, timed, cpu_clock;
    long long repeat;
};

static void tokenize_init(void *o)
{
    *(struct tokenize_opts *)o = (struct tokenize_opts){.repeat = 1};
}

#define T struct tokenize_opts
static const struct cli_option tokenize_table[] = {
    {"-m", "--model", CLI_PATH, "MODEL", CLI_AT(T, model), .flags = CLI_REQUIRED,
     .help = "GGUF model or vocab-only GGUF"},
    {"-p", "--prompt", CLI_STRING, "TEXT", CLI_AT(T, prompt), .help = "text to tokenize"},
    {"-f", "--file", CLI_PATH, "FILE", CLI_AT(T, file), .help = "read the text from FILE"},
    {NULL, "--lines", CLI_FLAG, NULL, CLI_AT(T, lines),
     .help = "tokenize each line (without its newline) on its own and print one JSON array per line"},
    {NULL, "--no-bos", CLI_FLAG, NULL, CLI_AT(T, no_bos),
     .help = "do not add bos/eos (default: as the model's metadata says)"},
    {NULL, "--parse-special", CLI_FLAG, NULL, CLI_AT(T, parse_special),
     .help = "recognize control tokens such as <|im_start|> in the text"},
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(T, json),
     .help = "print the ids as one JSON array (default: one line per token, 'id -> piece')"},
    {NULL, "--jsonl", CLI_FLAG, NULL, CLI_AT(T, jsonl),
     .help = "each input line is a JSON string (a whole document, newlines escaped); print one JSON "
             "array per line"},
    {NULL, "--time", CLI_FLAG, NULL, CLI_AT(T, timed),
     .help = "print to stderr the bytes, tokens and seconds of the tokenization alone (no loading, no "
             "printing), and MB/s"},
    {NULL, "--repeat", CLI_INT, "N", CLI_AT(T, repeat), CLI_RANGE(1, 1000),
     .help = "with --time: tokenize N times (the first run is 'cold': the word cache empty; also "
             "reported: the median of the others, 'warm')"},
    {NULL, "--cpu-clock", CLI_FLAG, NULL, CLI_AT(T, cpu_clock),
     .help = "with --time: this thread's CPU time instead of wall time (what other processes take of "
             "the machine is left out)"},
    {0},
};
#undef T

const struct cli_command cli_spec_tokenize = {
    "tokenize", "-m MODEL (-p TEXT | -f FILE) [options]",
    "Prints the token ids of TEXT (byte for byte: no newline stripped, no normalization).\n",
    tokenize_table, CLI_OPTS(struct tokenize_opts, tokenize_init), NULL,
};

static void print_piece(const struct tern_tokenizer *t, int32_t id)
{
    char buf[1024];
    size_t n;
    if (tern_token_to_piece(t, id, TERN_PIECE_SPECIAL, buf, sizeof buf, &n) != TERN_OK)
        n = 0;
    printf("%6d -> '", id);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c == '\\' || c == '\'') printf("\\%c", c);
        else if (c == '\n') printf("\\n");
        else if (c == '\t') printf("\\t");
        else if (c < 0x20 || c == 0x7F) printf("\\x%02x", c);
        else putchar(c);
    }
    printf("'\n");
}

/* One line "[1, 2, 3]": cJSON's formatted print keeps a flat array on one line. */
static int print_json(const int32_t *ids, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++) cli_json_int(a, NULL, ids[i]);
    return cli_json_emit("tokenize", stdout, a, true, "", "\n");
}

/* Tokenize s[0..len) into *ids (grown as needed). */
static tern_status encode(struct tern_tokenizer *t, const char *s, size_t len, unsigned flags,
                          int32_t **ids, size_t *cap, size_t *n)
{
    tern_status st = tern_tokenize(t, s, len, flags, *ids, *cap, n);
    if (st == TERN_ERR_RANGE) {
        int32_t *p = realloc(*ids, (*n + 1) * sizeof *p);
        if (!p) return TERN_ERR_NOMEM;
        *ids = p;
        *cap = *n + 1;
        st = tern_tokenize(t, s, len, flags, *ids, *cap, n);
    }
    return st;
}

/* An escaped NUL (\u0000) would end cJSON's C string early and the document would be cut in
 * silence: such lines are refused instead. Scans the raw line, skipping other escapes. */
static bool has_escaped_nul(const char *s, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] != '\\') continue;
        if (s[i + 1] == 'u' && i + 6 <= n && !memcmp(s + i + 2, "0000", 4)) return true;
        i++; /* the escaped character */
    }
    return false;
}

/* --jsonl: every non-empty line of s[0..len) is one JSON string; prints one array per line. */
static int tokenize_jsonl(struct tern_tokenizer *t, const char *file, const char *s, size_t len,
                          unsigned flags, int32_t **ids, size_t *cap)
{
    size_t a = 0, line = 0;
    while (a < len) {
        const char *nl = memchr(s + a, '\n', len - a);
        size_t b = nl ? (size_t)(nl - s) : len;
        line++;
        if (b > a) {
            cJSON *doc = cJSON_ParseWithLength(s + a, b - a);
            if (!cJSON_IsString(doc) || has_escaped_nul(s + a, b - a)) {
                cJSON_Delete(doc);
                fprintf(stderr, "tern tokenize: %s:%zu: %s\n", file, line,
                        cJSON_IsString(doc) ? "an escaped NUL (\\u0000) is not supported in a document"
                                            : "not a JSON string (--jsonl wants one per line)");
                return CLI_EXIT_FAIL;
            }
            size_t n = 0;
            tern_status st = encode(t, doc->valuestring, strlen(doc->valuestring), flags, ids, cap, &n);
            cJSON_Delete(doc);
            if (st) return cli_report("tokenize", st);
            int rc = print_json(*ids, n);
            if (rc) return rc;
        }
        a = b + 1;
    }
    return CLI_EXIT_OK;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* --time: `repeat` tokenizations of the whole text, timed one by one. */
static int time_tokenize(struct tern_tokenizer *t, const char *s, size_t len, unsigned flags,
                         int repeat, bool cpu_clock, int32_t **ids, size_t *cap)
{
    clockid_t clock = cpu_clock ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
    double *sec = malloc((size_t)repeat * sizeof *sec);
    if (!sec) return cli_report("tokenize", TERN_ERR_NOMEM);
    size_t n = 0;
    for (int r = 0; r < repeat; r++) {
        double t0 = cli_clock_ms(clock);
        tern_status st = encode(t, s, len, flags, ids, cap, &n);
        sec[r] = (cli_clock_ms(clock) - t0) / 1e3;
        if (st) {
            free(sec);
            return cli_report("tokenize", st);
        }
    }
    fprintf(stderr, "tern tokenize: %zu bytes -> %zu tokens (%s); cold %.4f s (%.2f MB/s)", len, n,
            cpu_clock ? "thread CPU time" : "wall time", sec[0], len / 1e6 / sec[0]);
    if (repeat > 1) {
        qsort(sec + 1, (size_t)repeat - 1, sizeof *sec, cmp_double);
        double med = sec[1 + (repeat - 1) / 2];
        fprintf(stderr, "; warm median of %d %.4f s (%.2f MB/s)", repeat - 1, med, len / 1e6 / med);
    }
    fputc('\n', stderr);
    free(sec);
    return CLI_EXIT_OK;
}

int cmd_tokenize(int argc, char **argv)
{
    struct tokenize_opts o;
    tokenize_init(&o);
    const int pr = cli_parse(&cli_spec_tokenize, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *model = o.model, *prompt = o.prompt, *file = o.file;
    const bool lines = o.lines, no_bos = o.no_bos, parse_special = o.parse_special, json = o.json,
               jsonl = o.jsonl, timed = o.timed, cpu_clock = o.cpu_clock;
    const int repeat = (int)o.repeat;
    if (!prompt == !file) return cli_usage_error("tokenize", "give exactly one of -p TEXT or -f FILE");
    if ((int)lines + (int)jsonl + (int)timed > 1)
        return cli_usage_error("tokenize", "--lines, --jsonl and --time go one at a time");
    if (jsonl && !file) return cli_usage_error("tokenize", "--jsonl reads -f FILE");
    if ((repeat > 1 || cpu_clock) && !timed)
        return cli_usage_error("tokenize", "%s goes with --time", cpu_clock ? "--cpu-clock" : "--repeat");

    size_t len;
    char *text = NULL;
    if (file) {
        text = cli_read_file(file, &len);
        if (!text) {
            fprintf(stderr, "tern tokenize: cannot read '%s'\n", file);
            return CLI_EXIT_FAIL;
        }
    } else {
        len = strlen(prompt);
    }
    const char *s = file ? text : prompt;

    struct tern_tokenizer *t;
    tern_status st = tern_tokenizer_load(model, &t);
    if (st) {
        free(text);
        return cli_report("tokenize", st);
    }
    unsigned flags = (no_bos ? 0 : TERN_TOK_ADD_SPECIAL) | (parse_special ? TERN_TOK_PARSE_SPECIAL : 0);
    size_t cap = 256, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    int rc = CLI_EXIT_OK;
    if (!ids) { st = TERN_ERR_NOMEM; goto fail; }
    if (jsonl) {
        rc = tokenize_jsonl(t, file, s, len, flags, &ids, &cap);
    } else if (timed) {
        rc = time_tokenize(t, s, len, flags, repeat, cpu_clock, &ids, &cap);
    } else if (lines) {
        size_t a = 0;
        while (a < len) {
            const char *nl = memchr(s + a, '\n', len - a);
            size_t b = nl ? (size_t)(nl - s) : len;
            if ((st = encode(t, s + a, b - a, flags, &ids, &cap, &n))) goto fail;
            if ((rc = print_json(ids, n))) goto done;
            a = b + 1;
        }
    } else {
        if ((st = encode(t, s, len, flags, &ids, &cap, &n))) goto fail;
        if (json) rc = print_json(ids, n);
        else
            for (size_t i = 0; i < n; i++) print_piece(t, ids[i]);
    }
    goto done;
fail:
    rc = cli_report("tokenize", st);
done:
    free(ids);
    free(text);
    tern_tokenizer_free(t);
    return rc;
}

struct detokenize_opts {
    const char *model, *tokens;
    bool special;
};

#define D struct detokenize_opts
static const struct cli_option detokenize_table[] = {
    {"-m", "--model", CLI_PATH, "MODEL", CLI_AT(D, model), .flags = CLI_REQUIRED,
     .help = "GGUF model or vocab-only GGUF"},
    {NULL, "--tokens", CLI_STRING, "LIST", CLI_AT(D, tokens), .flags = CLI_REQUIRED,
     .help = "comma-separated token ids"},
    {NULL, "--special", CLI_FLAG, NULL, CLI_AT(D, special),
     .help = "render control tokens (<|im_end|>, <s>) as their text"},
    {0},
};
#undef D

const struct cli_command cli_spec_detokenize = {
    "detokenize", "-m MODEL --tokens 1,2,3 [--special]",
    "Writes the text of the ids to stdout, byte for byte (no newline added).\n",
    detokenize_table, CLI_OPTS(struct detokenize_opts, NULL), NULL,
};

int cmd_detokenize(int argc, char **argv)
{
    struct detokenize_opts o = {0};
    const int pr = cli_parse(&cli_spec_detokenize, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *model = o.model, *tokens_s = o.tokens;
    const bool special = o.special;
    int32_t *ids;
    int n, bad;
    if (!cli_parse_token_list(tokens_s, &ids, &n, &bad))
        return cli_usage_error("detokenize", "--tokens: entry %d is not a token id", bad);
    struct tern_tokenizer *t;
    tern_status st = tern_tokenizer_load(model, &t);
    if (st) {
        free(ids);
        return cli_report("detokenize", st);
    }
    unsigned flags = special ? TERN_PIECE_SPECIAL : 0;
    size_t m = 0;
    st = tern_detokenize(t, ids, (size_t)n, flags, NULL, 0, &m);
    char *out = NULL;
    if (st == TERN_ERR_RANGE || st == TERN_OK) {
        out = malloc(m + 1);
        st = out ? tern_detokenize(t, ids, (size_t)n, flags, out, m + 1, &m) : TERN_ERR_NOMEM;
    }
    int rc = CLI_EXIT_OK;
    if (st) rc = cli_report("detokenize", st);
    else fwrite(out, 1, m, stdout);
    free(out);
    free(ids);
    tern_tokenizer_free(t);
    return rc;
}

/* cmd_grammar.c — `tern grammar check` and `tern grammar bench`: constrained decoding checked
 * and measured without a model forward pass (only the model's tokenizer is loaded).
 *
 * check: each input line is one candidate document; it is tokenized (no BOS, no special tokens
 * parsed) and walked token by token as generation would: the mask is filled, the token must be
 * in it, the matcher accepts it; at the end the document must be complete. One JSON line per
 * input. bench: compile time (repeated compiles, median), then mask time per token over walks
 * of valid documents (generated from the grammar, or given with --docs), one thread. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "cli_grammar.h"

struct gopts {
    const char *model, *tools, *choice, *docs, *input;
    struct cli_grammar_opts g;         /* --json-schema --grammar --root --ws ... (cli_grammar.h) */
    /* copied from g after parsing, for the code below */
    const char *schema, *gbnf;
    struct tern_grammar_params gp;
    bool have_ws;
    bool json, json_lines, cpu_clock;
    long long n_docs, seed, reps, profile;
    const char *masks;           /* check --masks FILE */
    struct cli_mask_at *at;      /* --mask-ids, malloc'ed; n_at 0 when absent */
    size_t n_at;
};

static void gopts_init(void *p)
{
    struct gopts *o = p;
    *o = (struct gopts){.n_docs = 64, .seed = 1, .reps = 20};
    cli_grammar_opts_init(&o->g);
}

#define G struct gopts
/* --mask-ids DOC:STEP[,...]: parsed into o->at (cli_grammar.h) */
static int take_mask_ids(const char *cmd, const struct cli_option *opt, const char *val, void *opts)
{
    (void)opt;
    struct gopts *o = opts;
    free(o->at);
    o->at = NULL;
    o->n_at = 0;
    return cli_masks_parse_at(cmd, val, &o->at, &o->n_at) ? -1 : 0;
}

static const struct cli_note grammar_notes[] = {
    {"--ws", "compact; one-line with --tools", "JSON whitespace: compact is \", \" and \": \"; one-line is "
                                               "\",\" or \", \""},
    {NULL},
};
/* What check and bench share: the model and the grammar (one of --json-schema, --grammar, --tools). */
static const struct cli_option grammar_common[] = {
    {"-m", "--model", CLI_PATH, "FILE", CLI_AT(G, model), .flags = CLI_REQUIRED,
     .help = "GGUF model or vocab-only GGUF (only the tokenizer is used)"},
    {NULL, "--tools", CLI_PATH, "FILE", CLI_AT(G, tools),
     .help = "an OpenAI tools array: the Hermes tool-call grammar (instead of --json-schema or --grammar)"},
    {NULL, "--tool-choice", CLI_STRING, "C", CLI_AT(G, choice), .def = "required",
     .help = "with --tools: auto | none | required | NAME"},
    {NULL, "--json-lines", CLI_FLAG, NULL, CLI_AT(G, json_lines),
     .help = "each input line is a JSON string holding the document (documents with newlines, e.g. tool calls)"},
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(G, json),
     .help = "check: accepted for symmetry (output is JSON lines already); bench: print one JSON object"},
    {.kind = CLI_INCLUDE, .sub = cli_grammar_table, CLI_AT(G, g), .notes = grammar_notes},
    {0},
};

static const struct cli_option grammar_check_table[] = {
    {.meta = "FILE", .kind = CLI_PATH, CLI_AT(G, input), .help = "the documents, one per line (- for stdin)"},
    {.kind = CLI_INCLUDE, .sub = grammar_common},
    {NULL, "--masks", CLI_PATH, "FILE", CLI_AT(G, masks), .group = "Comparing masks",
     .help = "write each step's allowed-token count, hash and mask time as JSON lines (one per "
             "document) to FILE (docs/tools.md \"Comparing masks\")"},
    {NULL, "--mask-ids", CLI_CALL, "DOC:STEP[,...]", .call = take_mask_ids,
     .help = "with --masks, also list the allowed ids at those steps (documents from 1, steps from 0)"},
    {NULL, "--cpu-clock", CLI_FLAG, NULL, CLI_AT(G, cpu_clock),
     .help = "time the masks with this thread's CPU clock (excludes time the scheduler gave to other "
             "processes: use on a busy machine)"},
    {0},
};

static const struct cli_option grammar_bench_table[] = {
    {.kind = CLI_INCLUDE, .sub = grammar_common},
    {NULL, "--docs", CLI_PATH, "FILE", CLI_AT(G, docs), .group = "Measuring",
     .help = "documents to walk, one per line"},
    {NULL, "--n-docs", CLI_INT, "N", CLI_AT(G, n_docs), CLI_RANGE(1, 1000000),
     .help = "documents to generate when --docs is absent"},
    {NULL, "--seed", CLI_INT, "N", CLI_AT(G, seed), CLI_RANGE(0, INT64_MAX), .help = "generator seed"},
    {NULL, "--reps", CLI_INT, "N", CLI_AT(G, reps), CLI_RANGE(1, 100000), .help = "compiles to time"},
    {NULL, "--cpu-clock", CLI_FLAG, NULL, CLI_AT(G, cpu_clock),
     .help = "time compiles and masks with this thread's CPU clock (excludes time the scheduler gave "
             "to other processes: use on a busy machine)"},
    {NULL, "--profile", CLI_INT, "N", CLI_AT(G, profile), CLI_RANGE(1, 1000000), .def = "",
     .help = "also print the N slowest masks (to stderr) with what each did: positions classified, "
             "uncertain tokens checked, state cache hit, and what the grammar expected there"},
    {0},
};
#undef G

const struct cli_command cli_spec_grammar_check = {
    "grammar check", "-m MODEL GRAMMAR [options] FILE|-",
    "GRAMMAR is --json-schema FILE (keywords: docs/tools.md \"Constrained decoding\"),\n"
    "--grammar FILE (GBNF) or --tools FILE. Each line of FILE (or stdin) is one document,\n"
    "tokenized with the model's tokenizer (no BOS, no special tokens) and walked token by\n"
    "token as generation would. One JSON object per line: {\"accept\": true} or {\"accept\":\n"
    "false, \"token\": i, \"offset\": byte, \"reason\": \"...\"} (the first refused token, or the\n"
    "end reached in an incomplete document: token = token count). A summary goes to stderr.\n",
    grammar_check_table, CLI_OPTS(struct gopts, gopts_init), NULL,
};

const struct cli_command cli_spec_grammar_bench = {
    "grammar bench", "-m MODEL GRAMMAR [--docs FILE] [options] [--json]",
    "GRAMMAR is --json-schema FILE, --grammar FILE or --tools FILE. Prints compile time\n"
    "(median of --reps compiles), mask time per token (p50/p90/p99/max in microseconds,\n"
    "first visits of grammar positions included) over walks of valid documents, and the\n"
    "grammar's memory.\n",
    grammar_bench_table, CLI_OPTS(struct gopts, gopts_init), NULL,
};

/* Parse check's or bench's options into o. CLI_PARSED, or the exit status. */
static int parse(const struct cli_command *spec, int argc, char **argv, struct gopts *o)
{
    const char *cmd = spec->name;
    gopts_init(o);
    const int pr = cli_parse(spec, argc, argv, o);
    if (pr != CLI_PARSED) return pr;
    o->schema = o->g.schema;
    o->gbnf = o->g.gbnf;
    o->gp = o->g.gp;
    o->have_ws = o->g.have_ws;
    if ((o->schema != NULL) + (o->gbnf != NULL) + (o->tools != NULL) != 1)
        return cli_usage_error(cmd, "give exactly one of --json-schema FILE, --grammar FILE, --tools FILE");
    if (o->choice && !o->tools) return cli_usage_error(cmd, "--tool-choice needs --tools");
    if (o->n_at && !o->masks) return cli_usage_error(cmd, "--mask-ids needs --masks FILE");
    return CLI_PARSED;
}

struct loaded {
    struct tern_tokenizer *tok;
    struct tern_grammar_vocab *v;
    char *src;
    size_t src_len;
    double vocab_ms;
};

static tern_status compile(const struct gopts *o, const struct loaded *l, struct tern_grammar **g)
{
    if (o->schema) return tern_grammar_from_json_schema(l->v, l->src, l->src_len, &o->gp, g);
    if (o->gbnf) return tern_grammar_from_gbnf(l->v, l->src, l->src_len, &o->gp, g);
    struct tern_tool_grammar_params tp = tern_tool_grammar_default_params();
    tp.schema = o->gp;
    tp.schema.strict_properties = true; /* declared parameters only, as tern serve */
    if (!o->have_ws) tp.schema.ws = TERN_GRAMMAR_WS_ONE_LINE;
    tp.choice = TERN_TOOL_CHOICE_REQUIRED;
    if (o->choice) {
        tern_status st = tern_tool_choice_parse(o->choice, &tp);
        if (st) return st;
    }
    return tern_grammar_from_tools(l->v, l->src, l->src_len, &tp, g);
}

/* Tokenizer, vocab and grammar source. Returns -1 on success, else an exit code. */
static int load(const char *cmd, const struct gopts *o, struct loaded *l)
{
    memset(l, 0, sizeof *l);
    const char *path = o->schema ? o->schema : o->gbnf ? o->gbnf : o->tools;
    l->src = cli_read_file(path, &l->src_len);
    if (!l->src) {
        fprintf(stderr, "tern %s: cannot read '%s'\n", cmd, path);
        return CLI_EXIT_FAIL;
    }
    tern_status st = tern_tokenizer_load(o->model, &l->tok);
    if (st) return cli_report(cmd, st);
    double t0 = cli_now_ms();
    st = tern_grammar_vocab_create(l->tok, &l->v);
    l->vocab_ms = cli_now_ms() - t0;
    if (st) return cli_report(cmd, st);
    return -1;
}

static void unload(struct loaded *l)
{
    tern_grammar_vocab_free(l->v);
    tern_tokenizer_free(l->tok);
    free(l->src);
}

/* How documents for g are tokenized: no BOS; control tokens parsed only when g produces some
 * (a tool grammar whose [TOOL_CALLS] is a control token: the document's "[TOOL_CALLS]" is that
 * token, as a preserving detokenizer shows it), else all text. */
static unsigned doc_flags(const struct tern_grammar *g)
{
    struct tern_grammar_info gi;
    tern_grammar_get_info(g, &gi);
    return gi.n_control_tokens ? TERN_TOK_PARSE_SPECIAL : 0;
}

/* Tokenize s into *ids (grown); flags: doc_flags. */
static tern_status encode(struct tern_tokenizer *t, const char *s, size_t len, unsigned flags, int32_t **ids,
                          size_t *cap, size_t *n)
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

/* The documents of a file: lines, or JSON strings per line with json_lines. Each document is
 * malloc'ed; *docs / *lens / *n owned by the caller. */
static int read_docs(const char *cmd, const char *path, bool json_lines, char ***docs, size_t **lens, size_t *n)
{
    size_t len;
    char *text;
    if (!strcmp(path, "-")) {
        size_t cap = 1 << 16;
        len = 0;
        text = malloc(cap + 1);
        for (size_t r; text && (r = fread(text + len, 1, cap - len, stdin)) > 0;) {
            len += r;
            if (len == cap) {
                char *nt = realloc(text, (cap *= 2) + 1);
                if (!nt) { free(text); text = NULL; }
                else text = nt;
            }
        }
        if (text) text[len] = 0;
    } else {
        text = cli_read_file(path, &len);
    }
    if (!text) {
        fprintf(stderr, "tern %s: cannot read '%s'\n", cmd, path);
        return CLI_EXIT_FAIL;
    }
    size_t cap = 64;
    *docs = malloc(cap * sizeof **docs);
    *lens = malloc(cap * sizeof **lens);
    *n = 0;
    int line = 0;
    for (size_t a = 0; a < len && *docs && *lens;) {
        const char *nl = memchr(text + a, '\n', len - a);
        size_t b = nl ? (size_t)(nl - text) : len;
        size_t e = b;
        if (e > a && text[e - 1] == '\r') e--;
        line++;
        char *d;
        size_t dl;
        if (json_lines) {
            cJSON *j = cJSON_ParseWithLength(text + a, e - a);
            if (!cJSON_IsString(j)) {
                cJSON_Delete(j);
                fprintf(stderr, "tern %s: %s line %d: --json-lines expects a JSON string per line\n", cmd, path, line);
                free(text);
                return CLI_EXIT_FAIL;
            }
            d = strdup(j->valuestring);
            dl = d ? strlen(d) : 0;
            cJSON_Delete(j);
        } else {
            d = malloc(e - a + 1);
            if (d) { memcpy(d, text + a, e - a); d[e - a] = 0; }
            dl = e - a;
        }
        if (!d) break;
        if (*n == cap) {
            cap *= 2;
            char **nd = realloc(*docs, cap * sizeof *nd);
            size_t *nl2 = realloc(*lens, cap * sizeof *nl2);
            if (nd) *docs = nd;
            if (nl2) *lens = nl2;
            if (!nd || !nl2) { free(d); break; }
        }
        (*docs)[*n] = d;
        (*lens)[*n] = dl;
        (*n)++;
        a = b + 1;
    }
    free(text);
    return -1;
}

static void free_docs(char **docs, size_t *lens, size_t n)
{
    for (size_t i = 0; i < n; i++) free(docs[i]);
    free(docs);
    free(lens);
}

static int32_t first_eog(const struct tern_tokenizer *t)
{
    for (int32_t i = 0; i < tern_tokenizer_n_vocab(t); i++)
        if (tern_token_is_eog(t, i)) return i;
    return -1;
}

/* The reason part of the last error ("grammar: " removed). */
static const char *reason(void)
{
    const char *e = tern_last_error();
    return strncmp(e, "grammar: ", 9) ? e : e + 9;
}

static void print_refusal(size_t tok, size_t off, const char *why)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddFalseToObject(o, "accept");
    cJSON_AddNumberToObject(o, "token", (double)tok);
    cJSON_AddNumberToObject(o, "offset", (double)off);
    cJSON_AddStringToObject(o, "reason", why);
    char *s = cJSON_PrintUnformatted(o);
    if (s) puts(s);
    free(s);
    cJSON_Delete(o);
}

static int grammar_check(int argc, char **argv)
{
    struct gopts o;
    int rc = parse(&cli_spec_grammar_check, argc, argv, &o);
    if (rc >= 0) { free(o.at); return rc; }
    struct loaded l;
    if (!o.input) rc = cli_usage_error("grammar check", "missing the input FILE (or - for stdin)");
    else if ((rc = load("grammar check", &o, &l)) >= 0) unload(&l);
    if (rc >= 0) { free(o.at); return rc; }
    struct tern_grammar *g = NULL;
    struct tern_grammar_matcher *m = NULL;
    struct cli_masks *mw = NULL;
    char **docs = NULL;
    size_t *lens = NULL, n_docs = 0, cap_ids = 256, n_ids;
    int32_t *ids = malloc(cap_ids * sizeof *ids);
    uint32_t *mask = malloc(tern_grammar_mask_words(l.v) * sizeof *mask);
    double (*clk)(void) = o.cpu_clock ? cli_thread_cpu_ms : cli_now_ms;
    tern_status st = compile(&o, &l, &g);
    if (st) { rc = cli_report("grammar check", st); goto done; }
    if (tern_grammar_warnings(g)) fprintf(stderr, "tern grammar check: warning: %s", tern_grammar_warnings(g));
    if ((st = tern_grammar_matcher_create(g, &m))) { rc = cli_report("grammar check", st); goto done; }
    if ((rc = read_docs("grammar check", o.input, o.json_lines, &docs, &lens, &n_docs)) >= 0) goto done;
    if (o.masks && (rc = cli_masks_open("grammar check", o.masks, o.at, o.n_at, l.tok, &mw)) >= 0) goto done;
    rc = CLI_EXIT_OK;
    int32_t eog = first_eog(l.tok);
    size_t n_ok = 0, n_bad = 0, n_internal = 0;
    for (size_t d = 0; d < n_docs; d++) {
        if ((st = encode(l.tok, docs[d], lens[d], doc_flags(g), &ids, &cap_ids, &n_ids))) { rc = cli_report("grammar check", st); goto done; }
        tern_grammar_matcher_reset(m);
        if (mw) cli_masks_begin(mw);
        size_t off = 0;
        bool refused = false;
        for (size_t i = 0; i < n_ids && !refused; i++) {
            double t0 = clk();
            tern_grammar_matcher_fill_mask(m, mask);
            if (mw) cli_masks_step(mw, mask, (clk() - t0) * 1000.0);
            bool in_mask = (mask[ids[i] >> 5] >> (ids[i] & 31)) & 1;
            size_t at;
            st = tern_grammar_matcher_accept(m, ids[i], &at);
            if ((st == TERN_OK) != in_mask) {
                n_internal++;
                fprintf(stderr, "tern grammar check: internal: line %zu token %zu: the mask %s it but accept %s it\n",
                        d + 1, i, in_mask ? "allows" : "refuses", st ? "refuses" : "takes");
            }
            if (st) {
                print_refusal(i, off + at, reason());
                refused = true;
            }
            char piece[512];
            size_t pl = 0;
            if (tern_token_to_piece(l.tok, ids[i], 0, piece, sizeof piece, &pl) == TERN_OK) off += pl;
        }
        if (!refused && !tern_grammar_matcher_is_complete(m)) {
            char exp[300], why[400];
            tern_grammar_matcher_expected(m, exp, sizeof exp);
            snprintf(why, sizeof why, "the document is not complete (expected %s)", exp);
            print_refusal(n_ids, off, why);
            refused = true;
        }
        if (!refused && (eog >= 0 || mw)) { /* as generation ends: the end-of-generation token must be allowed */
            double t0 = clk();
            tern_grammar_matcher_fill_mask(m, mask);
            if (mw) cli_masks_step(mw, mask, (clk() - t0) * 1000.0);
            if (eog >= 0 && !((mask[eog >> 5] >> (eog & 31)) & 1)) {
                n_internal++;
                fprintf(stderr, "tern grammar check: internal: line %zu: complete but end of generation not allowed\n", d + 1);
            }
        }
        if (refused) n_bad++;
        else { n_ok++; puts("{\"accept\": true}"); }
        if (mw) cli_masks_end(mw, ids, n_ids, !refused);
    }
    fprintf(stderr, "tern grammar check: %zu documents: %zu accepted, %zu refused\n", n_docs, n_ok, n_bad);
    if (n_internal) {
        fprintf(stderr, "tern grammar check: %zu internal disagreements between mask and matcher (a bug: please report)\n", n_internal);
        rc = CLI_EXIT_FAIL;
    }
    if (mw) {
        int mrc = cli_masks_close("grammar check", mw);
        mw = NULL;
        if (mrc != CLI_EXIT_OK) rc = mrc;
    }
done:
    cli_masks_abandon(mw);
    free(o.at);
    free_docs(docs, lens, n_docs);
    free(ids);
    free(mask);
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);
    unload(&l);
    return rc;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* nearest-rank percentile of sorted v[0..n) */
static double pct(const double *v, size_t n, double p)
{
    if (!n) return 0;
    size_t k = (size_t)(p * (double)n + 0.999999);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return v[k - 1];
}

/* One timed mask, for --profile: where it was and what it did. */
struct mprof {
    double us;
    uint32_t doc, tok;
    uint32_t classified; /* grammar positions classified by this mask (first visits) */
    uint32_t checked;    /* uncertain tokens run against the stack */
    bool hit;            /* the uncertain tokens' verdicts came from the state cache */
};

static int cmp_prof(const void *a, const void *b)
{
    double x = ((const struct mprof *)a)->us, y = ((const struct mprof *)b)->us;
    return x > y ? -1 : x < y;
}

/* --profile: the slowest masks, each with the state it was taken in (the document is replayed
 * up to that token, so the walk itself is timed without the description's cost), and how much
 * of the time went to masks that classified a position for the first time. */
static void print_profile(struct mprof *p, size_t n, long long top, struct tern_grammar_matcher *m,
                          struct tern_tokenizer *tok, unsigned flags, char **docs, const size_t *lens)
{
    double all = 0, first = 0;
    size_t n_first = 0, n_hit = 0;
    for (size_t i = 0; i < n; i++) {
        all += p[i].us;
        if (p[i].classified) { first += p[i].us; n_first++; }
        if (p[i].hit) n_hit++;
    }
    fprintf(stderr, "profile: %zu masks, %.0f us; %zu classified a position (%.0f us, %.0f%%), %zu state-cache hits\n", n,
            all, n_first, first, all > 0 ? 100.0 * first / all : 0.0, n_hit);
    qsort(p, n, sizeof *p, cmp_prof);
    int32_t *ids = NULL;
    size_t cap = 0, n_ids = 0;
    for (size_t k = 0; k < n && k < (size_t)top; k++) {
        char exp[160] = "?";
        if (!encode(tok, docs[p[k].doc], lens[p[k].doc], flags, &ids, &cap, &n_ids)) {
            tern_grammar_matcher_reset(m);
            for (uint32_t i = 0; i < p[k].tok && i < n_ids; i++)
                if (tern_grammar_matcher_accept(m, ids[i], NULL)) break;
            tern_grammar_matcher_expected(m, exp, sizeof exp);
        }
        fprintf(stderr, "  %9.2f us  doc %u token %u: %u classified, %u checked%s; expects %s\n", p[k].us,
                p[k].doc + 1, p[k].tok, p[k].classified, p[k].checked, p[k].hit ? ", cache hit" : "", exp);
    }
    free(ids);
}

static int grammar_bench(int argc, char **argv)
{
    struct gopts o;
    int rc = parse(&cli_spec_grammar_bench, argc, argv, &o);
    if (rc >= 0) { free(o.at); return rc; }
    struct loaded l;
    if ((rc = load("grammar bench", &o, &l)) >= 0) { unload(&l); return rc; }
    struct tern_grammar *g = NULL;
    struct tern_grammar_matcher *m = NULL;
    char **docs = NULL;
    size_t *lens = NULL, n_docs = 0, cap_ids = 256, n_ids;
    int32_t *ids = malloc(cap_ids * sizeof *ids);
    uint32_t *mask = malloc(tern_grammar_mask_words(l.v) * sizeof *mask);
    double *cms = malloc((size_t)o.reps * sizeof *cms), *t = NULL;
    size_t n_t = 0, cap_t = 4096;
    struct mprof *prof = NULL;
    tern_status st;
    double (*clk)(void) = o.cpu_clock ? cli_thread_cpu_ms : cli_now_ms;
    /* compile time: fresh compiles, median */
    for (long long r = 0; r < o.reps; r++) {
        struct tern_grammar *tg;
        double t0 = clk();
        st = compile(&o, &l, &tg);
        cms[r] = clk() - t0;
        if (st) { rc = cli_report("grammar bench", st); goto done; }
        tern_grammar_free(tg);
    }
    qsort(cms, (size_t)o.reps, sizeof *cms, cmp_d);
    if ((st = compile(&o, &l, &g))) { rc = cli_report("grammar bench", st); goto done; }
    if ((st = tern_grammar_matcher_create(g, &m))) { rc = cli_report("grammar bench", st); goto done; }
    struct tern_grammar_info info;
    tern_grammar_get_info(g, &info);
    /* documents */
    if (o.docs) {
        if ((rc = read_docs("grammar bench", o.docs, o.json_lines, &docs, &lens, &n_docs)) >= 0) goto done;
    } else {
        n_docs = (size_t)o.n_docs;
        docs = calloc(n_docs, sizeof *docs);
        lens = calloc(n_docs, sizeof *lens);
        if (!docs || !lens) { rc = cli_report("grammar bench", TERN_ERR_NOMEM); goto done; }
        size_t cap = 1 << 16;
        for (size_t d = 0; d < n_docs; d++) {
            size_t pre = info.lazy && info.trigger ? strlen(info.trigger) : 0;
            docs[d] = malloc(cap + pre + 1);
            if (!docs[d]) { rc = cli_report("grammar bench", TERN_ERR_NOMEM); goto done; }
            memcpy(docs[d], info.trigger ? info.trigger : "", pre);
            uint64_t seed = (uint64_t)o.seed * 1000003u + d;
            size_t target = 16 + (size_t)((seed * 2654435761u) % 400);
            if ((st = tern_grammar_generate(g, seed, target, docs[d] + pre, cap, &lens[d]))) {
                rc = cli_report("grammar bench", st);
                goto done;
            }
            lens[d] += pre;
            docs[d][lens[d]] = 0;
        }
    }
    rc = CLI_EXIT_OK;
    t = malloc(cap_t * sizeof *t);
    if (o.profile) prof = malloc(cap_t * sizeof *prof);
    if (!t || (o.profile && !prof)) { rc = cli_report("grammar bench", TERN_ERR_NOMEM); goto done; }
    size_t n_skipped = 0;
    for (size_t d = 0; d < n_docs; d++) {
        if ((st = encode(l.tok, docs[d], lens[d], doc_flags(g), &ids, &cap_ids, &n_ids))) { rc = cli_report("grammar bench", st); goto done; }
        tern_grammar_matcher_reset(m);
        for (size_t i = 0; i <= n_ids; i++) {
            struct tern_grammar_stats s0, s1;
            if (prof) tern_grammar_matcher_get_stats(m, &s0);
            double t0 = clk();
            tern_grammar_matcher_fill_mask(m, mask);
            double dt = clk() - t0;
            if (n_t == cap_t) {
                cap_t *= 2;
                double *nt = realloc(t, cap_t * sizeof *nt);
                if (nt) t = nt;
                struct mprof *np = prof ? realloc(prof, cap_t * sizeof *np) : NULL;
                if (np) prof = np;
                if (!nt || (prof && !np)) { rc = cli_report("grammar bench", TERN_ERR_NOMEM); goto done; }
            }
            if (prof) {
                tern_grammar_matcher_get_stats(m, &s1);
                prof[n_t] = (struct mprof){dt * 1000.0, (uint32_t)d, (uint32_t)i,
                                           (uint32_t)(s1.classified_nodes - s0.classified_nodes),
                                           (uint32_t)(s1.checked_tokens - s0.checked_tokens),
                                           s1.mask_cache_hits > s0.mask_cache_hits};
            }
            t[n_t++] = dt * 1000.0;
            if (i == n_ids) break;
            bool in_mask = (mask[ids[i] >> 5] >> (ids[i] & 31)) & 1;
            if (!in_mask || tern_grammar_matcher_accept(m, ids[i], NULL)) {
                fprintf(stderr, "tern grammar bench: document %zu is not valid for the grammar at token %zu: %s (skipped)\n",
                        d + 1, i, in_mask ? reason() : "not in the mask");
                n_skipped++;
                break;
            }
        }
    }
    double sum = 0;
    for (size_t i = 0; i < n_t; i++) sum += t[i];
    struct tern_grammar_stats gs;
    tern_grammar_matcher_get_stats(m, &gs);
    if (prof) print_profile(prof, n_t, o.profile, m, l.tok, doc_flags(g), docs, lens);
    qsort(t, n_t, sizeof *t, cmp_d);
    tern_grammar_get_info(g, &info);
    size_t gbytes = info.table_bytes + info.cls_bytes;
    if (o.json) {
        printf("{\"compile_ms\": %.3f, \"compile_ms_min\": %.3f, \"compile_reps\": %lld, \"vocab_ms\": %.1f, "
               "\"mask_us_p50\": %.2f, \"mask_us_p90\": %.2f, \"mask_us_p99\": %.2f, \"mask_us_max\": %.2f, "
               "\"mask_us_mean\": %.2f, \"n_tokens\": %zu, \"n_docs\": %zu, \"docs\": \"%s\", \"skipped_docs\": %zu, "
               "\"grammar_bytes\": %zu, \"table_bytes\": %zu, \"cls_bytes\": %zu, \"n_nodes\": %u, "
               "\"classified_nodes\": %u, \"derived_nodes\": %u, \"shared_nodes\": %u, \"mask_cache_hits\": %llu, \"checked_tokens\": %llu, \"clock\": \"%s\"}\n",
               pct(cms, (size_t)o.reps, 0.5), cms[0], o.reps, l.vocab_ms, pct(t, n_t, 0.5), pct(t, n_t, 0.9),
               pct(t, n_t, 0.99), n_t ? t[n_t - 1] : 0.0, n_t ? sum / (double)n_t : 0.0, n_t, n_docs,
               o.docs ? "file" : "generated", n_skipped, gbytes, info.table_bytes, info.cls_bytes, info.n_nodes,
               info.n_classified, info.n_derived, info.n_shared, (unsigned long long)gs.mask_cache_hits, (unsigned long long)gs.checked_tokens,
               o.cpu_clock ? "thread-cpu" : "wall");
    } else {
        printf("vocabulary:   %d tokens, prepared in %.1f ms (once per tokenizer)\n", tern_tokenizer_n_vocab(l.tok), l.vocab_ms);
        printf("compile:      %.3f ms median, %.3f ms min (%lld compiles)\n", pct(cms, (size_t)o.reps, 0.5), cms[0], o.reps);
        printf("grammar:      %u nodes, %zu bytes (tables %zu + token classes %zu for %u positions)\n", info.n_nodes,
               gbytes, info.table_bytes, info.cls_bytes, info.n_classified);
        printf("positions:    %u classified (%u from an alike position, only tokens past the horizon walked), "
               "%u shared with an equivalent one\n", info.n_classified, info.n_derived, info.n_shared);
        printf("mask/token:   p50 %.2f us  p90 %.2f us  p99 %.2f us  max %.2f us  (%zu masks, %zu %s documents%s, %s clock)\n",
               pct(t, n_t, 0.5), pct(t, n_t, 0.9), pct(t, n_t, 0.99), n_t ? t[n_t - 1] : 0.0, n_t, n_docs,
               o.docs ? "given" : "generated", n_skipped ? ", some skipped" : "", o.cpu_clock ? "thread CPU" : "wall");
        printf("fast paths:   %llu of %llu masks from the state cache, %llu uncertain tokens checked\n",
               (unsigned long long)gs.mask_cache_hits, (unsigned long long)gs.masks, (unsigned long long)gs.checked_tokens);
    }
done:
    free_docs(docs, lens, n_docs);
    free(ids);
    free(mask);
    free(cms);
    free(t);
    free(prof);
    tern_grammar_matcher_free(m);
    tern_grammar_free(g);
    unload(&l);
    return rc;
}

int cmd_grammar(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        FILE *f = argc < 2 ? stderr : stdout;
        cli_print_help(&cli_spec_grammar_check, f, 100);
        fputc('\n', f);
        cli_print_help(&cli_spec_grammar_bench, f, 100);
        return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "check")) return grammar_check(argc - 1, argv + 1);
    if (!strcmp(argv[1], "bench")) return grammar_bench(argc - 1, argv + 1);
    return cli_usage_error("grammar", "unknown subcommand '%s' (check or bench)", argv[1]);
}

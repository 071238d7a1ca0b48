/* cmd_chat.c — `tern chat`: a conversation with a model, interactive (a TTY on stdin) or
 * scripted (one user message per stdin line), optionally continuing a --messages file.
 *
 * Each turn re-renders the whole conversation with the model's own chat template (the same
 * call as `tern template`, so --show-prompt output can be checked against it), tokenizes it with
 * control tokens parsed, and hands it to tern_generate (include/tern.h "generation"), which
 * decodes only the part not already in the KV cache. The answer streams through the tool-call
 * parser: reasoning (<think>..., when the template shows such markup) goes apart to stderr,
 * content to stdout as it is decided, completed calls come out as JSON lines the moment their
 * closing markup arrives, and all end up in the assistant message appended to the history
 * (reasoning as "reasoning_content", which the reasoning templates read back).
 *
 * With --mcp the tools come from MCP servers (cli_mcp.h): an answer that calls them is followed
 * by the calls' results as tool messages and another answer, until the model answers in text
 * or --max-tool-rounds rounds of calls were run for the user's message. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

#include "cli.h"
#include "cli_draft.h"
#include "cli_grammar.h"
#include "cli_mcp.h"

struct chat_opts {
    const char *model, *system, *messages, *tools, *save, *tool_choice, *vars, *template_file;
    const char *mcp[16];
    int n_mcp;
    long long max_rounds;
    double mcp_timeout;
    bool json, show_prompt, yes;
    struct cli_gen_opts gen;
    struct cli_draft_opts draft;
    struct cli_grammar_opts grammar;
};

static void chat_init(void *p)
{
    struct chat_opts *o = p;
    *o = (struct chat_opts){.max_rounds = 8, .mcp_timeout = 60, .gen = cli_gen_opts_default(256)};
    cli_grammar_opts_init(&o->grammar);
}

#define C struct chat_opts
static const struct cli_note chat_gen_notes[] = {
    {"--n-predict", NULL, "tokens per answer at most"},
    {"--ctx-size", "min(training context, 4096)", NULL},
    {"--seed", NULL, "RNG seed; the sampler restarts from it each turn"},
    {"--prompt-cache", NULL, "reuse the KV of prompt prefixes seen before, across restarts (blocks "
                             "saved in DIR at exit)"},
    {"--cache-mb", NULL, "prompt cache memory budget in MiB; models with recurrent layers (qwen35) "
                         "always keep one (their states are saved with the blocks when DIR is given)"},
    {NULL},
};
static const struct cli_note chat_grammar_notes[] = {
    {"--schema-lenient", NULL, "ignore unsupported schema keywords (with a warning); also applies to "
                               "the tools' parameters"},
    {"--strict-properties", NULL, "objects without additionalProperties admit no other keys; also "
                                  "applies to the tools' parameters"},
    {"--ws", NULL, "JSON whitespace of the output and of the tools' arguments: separators with or "
                   "without one space"},
    {NULL},
};
static const struct cli_option chat_table[] = {
    {"-m", "--model", CLI_PATH, "FILE", CLI_AT(C, model), .def = "tern's own embedded tool-calling model",
     .help = "GGUF model, or an installed model's name as tern models lists it"},
    {NULL, "--system", CLI_STRING, "TEXT", CLI_AT(C, system), .help = "a system message at the start of the conversation"},
    {NULL, "--messages", CLI_PATH, "FILE", CLI_AT(C, messages),
     .help = "continue this conversation (array of OpenAI-style messages, or an object with "
             "\"messages\" and \"tools\"); if it ends with a user message or tool results, the model "
             "answers them first"},
    {NULL, "--tools", CLI_PATH, "FILE", CLI_AT(C, tools),
     .help = "an array of OpenAI function tools for the template; the calls the model makes are "
             "constrained (see --tool-choice); markup of the template's call format that is a control "
             "token of the vocabulary ([TOOL_CALLS], <|python_tag|>) is shown, so the calls are read "
             "(llama-server's preserved tokens)"},
    {NULL, "--chat-template-file", CLI_PATH, "FILE", CLI_AT(C, template_file),
     .help = "a Jinja chat template instead of the model's own (as `tern serve`; bos_token/eos_token "
             "are \"\")"},
    {NULL, "--template-vars", CLI_STRING, "JSON", CLI_AT(C, vars),
     .help = "extra chat-template variables, a JSON object, e.g. '{\"enable_thinking\": false}' "
             "(Qwen3, Qwen3.5, SmolLM3, Gemma 4)"},
    {NULL, "--tool-choice", CLI_STRING, "C", CLI_AT(C, tool_choice),
     .help = "auto (default with tools: free text stays free; once the model opens a call in its "
             "template's format, the call is constrained: a tool's name, arguments valid for its "
             "parameters), none (no call can be opened), required (a call from the first token; "
             "several where the format allows), or a tool's NAME"},
    {NULL, "--save-messages", CLI_PATH, "FILE", CLI_AT(C, save),
     .help = "write the final conversation (JSON) to FILE (atomically; a temporary file beside FILE "
             "is created first, so a path that cannot be written fails before any work)"},
    {NULL, "--show-prompt", CLI_FLAG, NULL, CLI_AT(C, show_prompt),
     .help = "also print the exact rendered prompt of each turn (stderr, or the \"prompt\" field with --json)"},
    {NULL, "--json", CLI_FLAG, NULL, CLI_AT(C, json),
     .help = "stdout gets JSON lines instead of text: {\"tool_call\": ..} as each call completes and one "
             "{\"turn\": .., \"content\": .., \"stats\": ..} per answer (\"reasoning_content\" too when "
             "the template has reasoning markup; with --draft, stats holds a \"spec\" object)"},
    {NULL, "--mcp", CLI_LIST, "\"COMMAND ARGS\"", CLI_AT(C, mcp), CLI_COUNT(C, n_mcp, 16),
     .group = "MCP tools (docs/mcp-and-reasoning.md)",
     .help = "start an MCP server (stdio transport) and offer its tools to the model, constrained as "
             "--tools are (a tool name two servers offer is refused). The model's calls are run on the "
             "server and their results fed back, until it answers in text"},
    {NULL, "--yes", CLI_FLAG, NULL, CLI_AT(C, yes),
     .help = "run the model's calls without asking (default: each call is shown and the terminal "
             "asked y/n; with no terminal it is declined)"},
    {NULL, "--max-tool-rounds", CLI_INT, "N", CLI_AT(C, max_rounds), CLI_RANGE(1, 1000),
     .help = "rounds of calls run per user message; with --tool-choice required or NAME only the first "
             "answer of a user message is forced to call, the ones after the results are auto"},
    {NULL, "--mcp-timeout", CLI_DOUBLE, "S", CLI_AT(C, mcp_timeout), CLI_FRANGE(0.1, 3600),
     .help = "seconds to wait for each answer of a server"},
    {.kind = CLI_INCLUDE, .sub = cli_gen_table, CLI_AT(C, gen), .notes = chat_gen_notes},
    {.kind = CLI_INCLUDE, .sub = cli_draft_table, CLI_AT(C, draft)},
    {.kind = CLI_INCLUDE, .sub = cli_grammar_table, CLI_AT(C, grammar), .notes = chat_grammar_notes},
    {0},
};
#undef C

const struct cli_command cli_spec_chat = {
    "chat", "[-m MODEL] [options] < messages.txt",
    "Chats with the model using its own chat template (ChatML with a warning if the GGUF has\n"
    "none). On a terminal it prompts with \"> \" (/exit or end-of-file quits); otherwise each\n"
    "stdin line is one user message. The answer streams to stdout; per-turn statistics go to\n"
    "stderr.\n",
    chat_table, CLI_OPTS(struct chat_opts, chat_init),
    "Tool calls (format detected from the template: hermes, qwen-xml, gemma4, llama3, mistral,\n"
    "granite) are printed as JSON lines on stderr (stdout with --json) and stored in the\n"
    "assistant message. Reasoning (<think>...</think>, Gemma 4's thought channel) is kept\n"
    "apart from the answer: streamed to stderr (\"reasoning_content\" with --json) and stored\n"
    "as the message's \"reasoning_content\"; a tool call inside it is not a call.\n"
    "\n"
    "If stdout is closed by its reader (tern chat ... | head -1), the answer stops there, the\n"
    "conversation ends, the prompt cache and --save-messages are still saved and the exit\n"
    "status is 0. Exit status 1: an error (message on stderr); 2: a usage error.\n",
};

struct chat {
    struct tern_model *model;
    struct tern_context *ctx;
    struct tern_sampler *smp;
    struct tern_tokenizer *tok;
    struct tern_chat_template *tmpl;
    struct tern_generator *gen;
    struct tern_draft *draft;   /* or NULL */
    struct tern_grammar *gram;  /* --json-schema / --grammar / the tools' calls, or NULL */
    struct tern_grammar *gram_auto; /* --mcp with --tool-choice required / NAME: the calls' grammar
                                   (auto) of the answers after tool results, or NULL */
    struct cli_mcp_set *mcp;    /* --mcp servers, or NULL */
    bool yes;                   /* --yes */
    int max_rounds;             /* --max-tool-rounds */
    struct tern_grammar_vocab *gvoc;
    struct tern_gen_params gp;
    int32_t preserve[4];  /* with tools: the format's control-token markup, shown to the parser */
    enum tern_toolcall_format fmt;
    enum tern_reasoning_format rfmt;
    const char *vars;   /* --template-vars JSON, or NULL */
    cJSON *messages;    /* the history (owned) */
    cJSON *tools;       /* or NULL (owned) */
    int32_t *ids;
    size_t cap_ids;
    bool json, show_prompt;
    int turn;
    /* per turn */
    struct tern_toolcall_parser *tp;
    size_t shown;       /* content bytes already written to stdout */
    size_t shown_r;     /* reasoning bytes already written to stderr */
    int reported;       /* tool calls already printed */
    int write_errno;    /* first failed write to stdout, or 0; EPIPE = the reader went away */
    bool closed;        /* stdout's reader went away: end the conversation (exit 0) */
};

/* --save-messages: the temporary file is created next to the target before any work, so a path
 * that cannot be written fails at once, not after the whole conversation was generated. */
struct save_target {
    const char *path;
    char *tmp;          /* path.XXXXXX, created and open until saved or dropped */
    FILE *f;
};

/* -1 if s[0..n) is valid UTF-8, else the byte offset of the first invalid sequence. */
static long long utf8_invalid_at(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) return (long long)i;
        i += (size_t)k;
    }
    return -1;
}

/* A tool call as the assistant message stores it (OpenAI shape, arguments as an object); id
 * (may be NULL) when the format gave none: tool messages answer calls by id. */
static cJSON *call_json(const struct tern_toolcall *c, const char *id)
{
    cJSON *fn = cJSON_CreateObject(), *call = cJSON_CreateObject();
    cJSON *args = cJSON_Parse(c->arguments);
    if (!args) args = cJSON_CreateString(c->arguments); /* the parser guarantees JSON; be safe */
    cJSON_AddStringToObject(fn, "name", c->name);
    cJSON_AddItemToObject(fn, "arguments", args);
    if (c->id || id) cJSON_AddStringToObject(call, "id", c->id ? c->id : id);
    cJSON_AddStringToObject(call, "type", "function");
    cJSON_AddItemToObject(call, "function", fn);
    return call;
}

/* With --mcp, call i of this answer gets the id "call_TURN_I" when its format writes none. */
static const char *call_id(const struct chat *c, int i, char *buf, size_t n)
{
    if (!c->mcp) return NULL;
    snprintf(buf, n, "call_%d_%d", c->turn, i);
    return buf;
}

/* Write to f and flush; a failure on stdout is kept in c->write_errno. */
static void put(struct chat *c, FILE *f, const char *s, size_t n)
{
    errno = 0;
    bool ok = fwrite(s, 1, n, f) == n;
    ok = fflush(f) == 0 && ok;
    if (!ok && f == stdout && !c->write_errno) c->write_errno = errno ? errno : EIO;
}

static void print_json_line(struct chat *c, FILE *f, cJSON *j)
{
    char *s = cJSON_PrintUnformatted(j);
    if (s) {
        put(c, f, s, strlen(s));
        put(c, f, "\n", 1);
    } else if (f == stdout && !c->write_errno) {
        c->write_errno = ENOMEM;
    }
    free(s);
}

/* Write content the parser has decided, and announce calls it has completed. */
static void drain(struct chat *c)
{
    size_t len;
    const char *text = tern_toolcall_text(c->tp, &len);
    size_t rlen;
    const char *r = tern_toolcall_reasoning(c->tp, &rlen);
    if (!c->json && rlen > c->shown_r) {
        if (c->shown_r == 0) fputs("tern chat: reasoning: ", stderr);
        fwrite(r + c->shown_r, 1, rlen - c->shown_r, stderr);
        fflush(stderr);
    }
    c->shown_r = rlen;
    if (!c->json && len > c->shown) put(c, stdout, text + c->shown, len - c->shown);
    c->shown = len;
    for (; c->reported < tern_toolcall_count(c->tp); c->reported++) {
        cJSON *line = cJSON_CreateObject();
        cJSON_AddNumberToObject(line, "turn", c->turn);
        char idb[48];
        cJSON_AddItemToObject(line, "tool_call", call_json(tern_toolcall_get(c->tp, c->reported),
                                                           call_id(c, c->reported, idb, sizeof idb)));
        print_json_line(c, c->json ? stdout : stderr, line);
        cJSON_Delete(line);
    }
}

static int on_piece(const char *text, size_t len, void *user)
{
    struct chat *c = user;
    if (tern_toolcall_feed(c->tp, text, len, NULL)) return 1;
    drain(c);
    return c->write_errno != 0; /* stdout closed or failing: stop generating */
}

/* Render the history, tokenize, generate, stream, append the answer. */
static int answer(struct chat *c)
{
    c->turn++;
    struct tern_chat_params p = tern_chat_default_params();
    char *msgs_txt = cJSON_PrintUnformatted(c->messages);
    char *tools_txt = c->tools ? cJSON_PrintUnformatted(c->tools) : NULL;
    char *prompt = NULL;
    size_t plen;
    p.messages_json = msgs_txt;
    p.tools_json = tools_txt;
    p.extra_vars_json = c->vars;
    if (!msgs_txt || (c->tools && !tools_txt)) {
        free(msgs_txt);
        free(tools_txt);
        fprintf(stderr, "tern chat: out of memory printing the conversation\n");
        return CLI_EXIT_FAIL;
    }
    struct tern_text_span *spans = NULL;
    size_t n_spans = 0;
    tern_status st = tern_chat_render_spans(c->tmpl, &p, &prompt, &plen, &spans, &n_spans);
    free(msgs_txt);
    if (st) {
        free(tools_txt);
        return cli_report("chat", st);
    }
    if (c->show_prompt && !c->json) {
        fprintf(stderr, "tern chat: prompt of turn %d (%zu bytes):\n", c->turn, plen);
        fwrite(prompt, 1, plen, stderr);
        fprintf(stderr, "\ntern chat: end of prompt\n");
    }
    size_t n = 0;
    /* what the user typed is text: control tokens come only from the template's markup */
    st = tern_chat_tokenize(c->tok, prompt, plen, spans, n_spans, &c->ids, &c->cap_ids, &n);
    free(spans);
    int rc = CLI_EXIT_OK;
    cJSON *turn_json = NULL;
    if (st) { rc = cli_report("chat", st); goto out; }
    if (n > (size_t)tern_context_n_ctx(c->ctx)) {
        fprintf(stderr, "tern chat: the conversation is %zu tokens but the context holds %d "
                "(use a larger -c)\n", n, tern_context_n_ctx(c->ctx));
        rc = CLI_EXIT_FAIL;
        goto out;
    }

    if ((st = tern_toolcall_parser_create(c->fmt, &c->tp)) ||
        (st = tern_toolcall_set_reasoning(c->tp, c->rfmt, tern_reasoning_open_at_end(c->rfmt, prompt, plen))) ||
        (tools_txt && (st = tern_toolcall_set_tools(c->tp, tools_txt, 0)))) {
        rc = cli_report("chat", st);
        goto out;
    }
    c->shown = 0;
    c->shown_r = 0;
    c->reported = 0;
    struct tern_gen_stats gs;
    st = tern_generate(c->gen, c->smp, c->ids, (int)n, &c->gp, on_piece, c, &gs);
    if (st) { rc = cli_report("chat", st); goto out; }
    if ((st = tern_toolcall_finish(c->tp, NULL))) { rc = cli_report("chat", st); goto out; }
    drain(c);
    if (!c->json && c->shown_r) fputs("\n", stderr);
    if (!c->json && !c->write_errno) put(c, stdout, "\n", 1);
    for (int i = 0; i < tern_toolcall_n_errors(c->tp); i++)
        fprintf(stderr, "tern chat: warning: malformed tool call kept as text: %s\n", tern_toolcall_error(c->tp, i));

    size_t clen, rlen;
    const char *content = tern_toolcall_text(c->tp, &clen);
    const char *reasoning = tern_toolcall_reasoning(c->tp, &rlen);
    cJSON *msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "role", "assistant");
    cJSON_AddStringToObject(msg, "content", content);
    if (rlen) cJSON_AddStringToObject(msg, "reasoning_content", reasoning);
    cJSON *calls = NULL;
    if (tern_toolcall_count(c->tp) > 0) {
        calls = cJSON_AddArrayToObject(msg, "tool_calls");
        for (int i = 0; i < tern_toolcall_count(c->tp); i++) {
            char idb[48];
            cJSON_AddItemToArray(calls, call_json(tern_toolcall_get(c->tp, i), call_id(c, i, idb, sizeof idb)));
        }
    }
    cJSON_AddItemToArray(c->messages, msg);

    if (c->json) {
        turn_json = cJSON_CreateObject();
        cJSON_AddNumberToObject(turn_json, "turn", c->turn);
        cJSON_AddStringToObject(turn_json, "content", content);
        if (c->rfmt != TERN_REASONING_NONE) cJSON_AddStringToObject(turn_json, "reasoning_content", reasoning);
        cJSON_AddItemToObject(turn_json, "tool_calls", calls ? cJSON_Duplicate(calls, true) : cJSON_CreateArray());
        if (c->show_prompt) cJSON_AddStringToObject(turn_json, "prompt", prompt);
        cJSON *sj = cJSON_AddObjectToObject(turn_json, "stats");
        cJSON_AddNumberToObject(sj, "n_prompt", gs.n_prompt);
        cJSON_AddNumberToObject(sj, "n_reused", gs.n_reused);
        cJSON_AddNumberToObject(sj, "n_prompt_decoded", gs.n_prompt_decoded);
        cJSON_AddNumberToObject(sj, "n_generated", gs.n_generated);
        cJSON_AddNumberToObject(sj, "prompt_ms", gs.prompt_ms);
        cJSON_AddNumberToObject(sj, "gen_ms", gs.gen_ms);
        cJSON_AddNumberToObject(sj, "ttft_ms", gs.ttft_ms);
        cJSON_AddNumberToObject(sj, "gen_tps", gs.gen_tps);
        cJSON_AddStringToObject(sj, "stop", tern_gen_stop_name(gs.stop));
        if (c->draft) cli_draft_json_stats(sj, c->draft, &gs);
        if (c->gram) {
            cJSON_AddBoolToObject(turn_json, "incomplete", gs.incomplete);
            cli_grammar_json_stats(sj, &gs);
        }
        if (!c->write_errno) print_json_line(c, stdout, turn_json);
    } else {
        fprintf(stderr, "tern chat: turn %d: prompt %d tokens (%d reused from the KV cache, %d decoded "
                "in %.1f ms); %d tokens generated in %.1f ms (%.2f tokens/s); first token after "
                "%.1f ms; stop: %s\n", c->turn, gs.n_prompt, gs.n_reused, gs.n_prompt_decoded,
                gs.prompt_ms, gs.n_generated, gs.gen_ms, gs.gen_tps, gs.ttft_ms,
                c->write_errno == EPIPE ? "output closed" : tern_gen_stop_name(gs.stop));
        if (c->draft) cli_draft_print_stats("chat", stderr, c->draft, &gs);
        if (c->gram) cli_grammar_print_stats("chat", stderr, &gs);
    }
    /* A reader that went away (`tern chat | head -1`) ends the conversation without an error:
     * it had what it wanted. Any other failed write does not. */
    if (c->write_errno == EPIPE) {
        c->closed = true;
    } else if (c->write_errno) {
        fprintf(stderr, "tern chat: cannot write to stdout: %s\n", strerror(c->write_errno));
        rc = CLI_EXIT_FAIL;
    }
out:
    cJSON_Delete(turn_json);
    tern_toolcall_parser_free(c->tp);
    c->tp = NULL;
    free(prompt);
    free(tools_txt);
    return rc;
}

/* A conversation the assistant should answer now: it ends with a user message, or with tool
 * results (the agent loop: the model answers from what its calls returned). */
static bool ends_with_user(const cJSON *messages)
{
    int n = cJSON_GetArraySize(messages);
    if (n == 0) return false;
    const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(messages, n - 1), "role"));
    return role && (!strcmp(role, "user") || !strcmp(role, "tool"));
}

/* Answer the conversation; with --mcp, run the answer's calls and answer again from their
 * results, at most max_rounds times. The first answer has --tool-choice's grammar, the ones
 * after results the auto grammar (a forced call each time would never let the model answer). */
static int converse(struct chat *c)
{
    c->gp.grammar = c->gram;
    int rc = answer(c);
    for (int round = 0; c->mcp && !rc && !c->closed; round++) {
        const cJSON *last = cJSON_GetArrayItem(c->messages, cJSON_GetArraySize(c->messages) - 1);
        if (!cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(last, "tool_calls"))) break;
        if (round == c->max_rounds) {
            fprintf(stderr, "tern chat: stopped after %d round%s of tool calls (--max-tool-rounds): the last "
                    "answer's calls were not run\n", round, round == 1 ? "" : "s");
            break;
        }
        struct cli_mcp_run_opts ro = {.yes = c->yes, .json = c->json, .turn = c->turn, .out = stdout};
        (void)cli_mcp_run_calls(c->mcp, last, c->messages, &ro); /* every call got a tool message */
        if (c->gram_auto) c->gp.grammar = c->gram_auto;
        rc = answer(c);
    }
    return rc;
}

/* Create path.XXXXXX beside path (the rename at the end stays within one file system). The
 * file gets the mode a plain fopen would give (0666 minus the umask), not mkstemp's 0600. */
static int save_open(struct save_target *s, const char *path)
{
    struct stat sb;
    s->path = path;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "tern chat: --save-messages %s: is a directory\n", path);
        return CLI_EXIT_FAIL;
    }
    size_t plen = strlen(path);
    s->tmp = malloc(plen + 8);
    if (!s->tmp) {
        fprintf(stderr, "tern chat: --save-messages %s: out of memory\n", path);
        return CLI_EXIT_FAIL;
    }
    memcpy(s->tmp, path, plen);
    memcpy(s->tmp + plen, ".XXXXXX", 8);
    int fd = mkstemp(s->tmp);
    if (fd < 0 || !(s->f = fdopen(fd, "wb"))) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            remove(s->tmp);
        }
        fprintf(stderr, "tern chat: cannot write --save-messages %s (creating %s beside it: %s)\n",
                path, s->tmp, strerror(e));
        free(s->tmp);
        s->tmp = NULL;
        return CLI_EXIT_FAIL;
    }
    mode_t um = umask(0);
    umask(um);
    fchmod(fd, 0666 & ~um);
    return CLI_EXIT_OK;
}

/* Give up on saving: remove the temporary file. */
static void save_drop(struct save_target *s)
{
    if (s->f) {
        fclose(s->f);
        remove(s->tmp);
    }
    s->f = NULL;
    free(s->tmp);
    s->tmp = NULL;
}

/* Write the conversation into the temporary file and rename it over the target. */
static int save_messages(const struct chat *c, struct save_target *sv)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemReferenceToObject(root, "messages", c->messages);
    if (c->tools) cJSON_AddItemReferenceToObject(root, "tools", c->tools);
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    int rc = CLI_EXIT_FAIL;
    errno = ENOMEM;
    if (s) {
        bool ok = fputs(s, sv->f) >= 0 && fputc('\n', sv->f) != EOF;
        ok = fclose(sv->f) == 0 && ok;
        sv->f = NULL;
        if (ok && rename(sv->tmp, sv->path) == 0) rc = CLI_EXIT_OK;
        else remove(sv->tmp);
    }
    if (rc) fprintf(stderr, "tern chat: cannot write %s: %s\n", sv->path, strerror(errno));
    free(s);
    save_drop(sv);
    return rc;
}

int cmd_chat(int argc, char **argv)
{
    struct chat_opts o;
    chat_init(&o);
    const int pr = cli_parse(&cli_spec_chat, argc, argv, &o);
    if (pr != CLI_PARSED) return pr;
    const char *model = o.model, *system = o.system, *msgs_path = o.messages, *tools_path = o.tools;
    const char *save_path = o.save, *tool_choice = o.tool_choice, *tmpl_path = o.template_file;
    struct cli_grammar_opts gro = o.grammar;
    struct cli_gen_opts go = o.gen;
    struct cli_draft_opts dro = o.draft;
    struct tern_prefix_cache *pc = NULL;
    struct save_target sv = {0};
    struct chat c = {.gp = tern_gen_default_params(), .max_rounds = (int)o.max_rounds, .json = o.json,
                     .show_prompt = o.show_prompt, .yes = o.yes, .vars = o.vars};
    const char *const *mcp_cmd = o.mcp;
    const int n_mcp = o.n_mcp;
    const double mcp_timeout = o.mcp_timeout;
    if (cli_need_model("chat", model)) return CLI_EXIT_USAGE;
    if (cli_draft_check("chat", &dro) || cli_grammar_check("chat", &gro, true)) return CLI_EXIT_USAGE;
    if (tool_choice && (gro.schema || gro.gbnf))
        return cli_usage_error("chat", "--tool-choice constrains the tools' calls; it cannot be combined with "
                               "--json-schema or --grammar");
    if (tool_choice && !*tool_choice) return cli_usage_error("chat", "--tool-choice: empty");
    if (n_mcp && tools_path)
        return cli_usage_error("chat", "--mcp with --tools: the model's calls of --tools tools could not be run; "
                               "offer tools from MCP servers or from a file, not both");
    if (n_mcp && (gro.schema || gro.gbnf))
        return cli_usage_error("chat", "--mcp with --json-schema or --grammar: the tools' calls are the constraint");
    if (go.lora.n && go.cache_dir)
        return cli_usage_error("chat", "--lora with --prompt-cache: the cache's KV would not be the "
                               "adapters'");
    if (c.vars && cli_check_template_vars("chat", c.vars)) return CLI_EXIT_USAGE;
    if (system && utf8_invalid_at(system, strlen(system)) >= 0)
        return cli_usage_error("chat", "--system: invalid UTF-8 at byte %lld", utf8_invalid_at(system, strlen(system)));
    c.gp.max_tokens = (int)go.n_predict;
    cli_ignore_sigpipe();

    /* Files first: a bad conversation or tools.json, or an unwritable --save-messages, should
     * not cost a model load, let alone a conversation. They are checked by the library itself
     * (tern_chat_validate: the same checks and messages as rendering), then kept as cJSON for
     * appending the answers. */
    int rc = CLI_EXIT_FAIL;
    char *line = NULL, *msgs_txt = NULL, *tools_txt = NULL;
    size_t msgs_len = 0, tools_len = 0;
    if (save_path && (rc = save_open(&sv, save_path))) return rc;
    rc = CLI_EXIT_FAIL;
    if (msgs_path && !(msgs_txt = cli_read_file(msgs_path, &msgs_len))) {
        fprintf(stderr, "tern chat: cannot read messages file %s: %s\n", msgs_path, strerror(errno));
        goto done;
    }
    if (tools_path && !(tools_txt = cli_read_file(tools_path, &tools_len))) {
        fprintf(stderr, "tern chat: cannot read tools file %s: %s\n", tools_path, strerror(errno));
        goto done;
    }
    struct tern_chat_params vp = tern_chat_default_params();
    vp.messages_json = msgs_txt ? msgs_txt : "[]";
    vp.messages_len = msgs_len;
    vp.tools_json = tools_txt;
    vp.tools_len = tools_len;
    tern_status vst = tern_chat_validate(&vp);
    if (vst) {
        rc = cli_report("chat", vst);
        goto done;
    }
    if (msgs_txt) {
        cJSON *conv = cJSON_ParseWithLength(msgs_txt, msgs_len);
        if (!conv) { /* valid JSON cJSON cannot hold (it stops at 1000 levels too) */
            fprintf(stderr, "tern chat: %s: cannot hold this conversation\n", msgs_path);
            goto done;
        }
        if (cJSON_IsObject(conv)) {
            c.messages = cJSON_DetachItemFromObjectCaseSensitive(conv, "messages");
            c.tools = cJSON_DetachItemFromObjectCaseSensitive(conv, "tools");
            cJSON_Delete(conv);
            if (cJSON_IsNull(c.tools)) {
                cJSON_Delete(c.tools);
                c.tools = NULL;
            }
        } else {
            c.messages = conv;
        }
    } else {
        c.messages = cJSON_CreateArray();
    }
    if (tools_txt && !(c.tools = cJSON_ParseWithLength(tools_txt, tools_len))) {
        fprintf(stderr, "tern chat: %s: cannot hold these tools\n", tools_path);
        goto done;
    }
    if (n_mcp) {
        /* the servers start before the model loads: one that cannot start costs nothing more */
        if (c.tools) {
            rc = cli_usage_error("chat", "--mcp with a --messages file that has \"tools\": the model's calls of "
                                 "those could not be run");
            goto done;
        }
        char err[1024];
        if (!cli_mcp_set_create(&c.mcp)) {
            fprintf(stderr, "tern chat: --mcp: out of memory\n");
            goto done;
        }
        for (int i = 0; i < n_mcp; i++)
            if (!cli_mcp_set_add(c.mcp, mcp_cmd[i], (int)(mcp_timeout * 1e3), err, sizeof err)) {
                fprintf(stderr, "tern chat: %s\n", err);
                goto done;
            }
        if (cli_mcp_set_tools(c.mcp)) c.tools = cJSON_Duplicate(cli_mcp_set_tools(c.mcp), true);
    }
    if (tool_choice && !c.tools) {
        rc = cli_usage_error("chat", "--tool-choice needs tools (--tools FILE, \"tools\" in --messages, or an "
                             "--mcp server that offers some)");
        goto done;
    }
    if ((rc = cli_grammar_read("chat", &gro))) goto done;
    rc = CLI_EXIT_FAIL;
    if (system) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", system);
        cJSON_InsertItemInArray(c.messages, 0, m);
    }

    tern_status st = cli_load_model(model, &c.model);
    if (st) { rc = cli_report("chat", st); goto done; }
    const struct tern_gguf *g = tern_model_gguf(c.model);
    if ((st = tern_tokenizer_from_gguf(g, &c.tok))) {
        rc = cli_report("chat", st);
        goto done;
    }
    if (tmpl_path) {
        size_t tl;
        char *src = cli_read_file(tmpl_path, &tl);
        if (!src) {
            fprintf(stderr, "tern chat: cannot read --chat-template-file %s: %s\n", tmpl_path, strerror(errno));
            goto done;
        }
        st = tern_chat_template_create(src, tl, &c.tmpl);
        free(src);
        if (st) {
            fprintf(stderr, "tern chat: --chat-template-file %s: %s\n", tmpl_path, tern_last_error());
            goto done;
        }
    } else if ((rc = cli_lora_load("chat", &go.lora, c.model, stderr))) {
        goto done;
    } else if (cli_lora_template(&go.lora)) { /* the template the adapter was trained with */
        const char *src = cli_lora_template(&go.lora);
        if ((st = tern_chat_template_create(src, strlen(src), &c.tmpl))) {
            rc = cli_report("chat", st);
            goto done;
        }
    } else if ((st = tern_chat_template_from_gguf(g, &c.tmpl))) {
        rc = cli_report("chat", st);
        goto done;
    }
    rc = CLI_EXIT_FAIL;
    if (tern_chat_template_warning(c.tmpl)) fprintf(stderr, "tern chat: warning: %s\n", tern_chat_template_warning(c.tmpl));
    c.fmt = tern_toolcall_detect(tern_chat_template_source(c.tmpl));
    c.rfmt = tern_reasoning_detect(tern_chat_template_source(c.tmpl));
    if (gro.src) {
        if ((rc = cli_grammar_build("chat", &gro, c.tok, &c.gvoc, &c.gram))) goto done;
        rc = CLI_EXIT_FAIL;
    } else if (c.tools) {
        /* the tools' calls in the template's format; without an explicit --tool-choice a format
         * with no grammar leaves the calls unconstrained (they are still parsed), with a warning */
        struct tern_tool_grammar_params tp = tern_tool_grammar_default_params();
        tp.schema = gro.gp;
        tp.schema.strict_properties = true; /* declared parameters only, as tern serve */
        if (!gro.have_ws) tp.schema.ws = TERN_GRAMMAR_WS_ONE_LINE; /* the model's own spacing */
        tp.format = c.fmt;
        if (tool_choice && (st = tern_tool_choice_parse(tool_choice, &tp))) {
            rc = cli_report("chat", st); /* a --tool-choice that names no mode and no tool */
            goto done;
        }
        char *ttxt = cJSON_PrintUnformatted(c.tools);
        st = ttxt ? tern_grammar_vocab_create(c.tok, &c.gvoc) : TERN_ERR_NOMEM;
        if (!st) st = tern_grammar_from_tools(c.gvoc, ttxt, strlen(ttxt), &tp, &c.gram);
        if (!st && c.mcp && (tp.choice == TERN_TOOL_CHOICE_REQUIRED || tp.choice == TERN_TOOL_CHOICE_NAMED)) {
            tp.choice = TERN_TOOL_CHOICE_AUTO; /* the answers after tool results (converse) */
            st = tern_grammar_from_tools(c.gvoc, ttxt, strlen(ttxt), &tp, &c.gram_auto);
            if (st == TERN_ERR_UNSUPPORTED) { /* a format whose free calls cannot be waited for: unconstrained */
                tern_status_ignore(st);
                st = TERN_OK;
            }
        }
        free(ttxt);
        if (st && (tool_choice || st != TERN_ERR_UNSUPPORTED)) {
            fprintf(stderr, "tern chat: %s%s: %s: %s\n", tools_path ? "--tools " : c.mcp ? "tools of the --mcp servers" : "tools of --messages ",
                    tools_path ? tools_path : c.mcp ? "" : msgs_path, tern_status_name(st), tern_last_error());
            goto done;
        }
        if (st) {
            fprintf(stderr, "tern chat: warning: tool calls are not constrained: %s\n", tern_last_error());
            if (c.fmt == TERN_TOOLCALL_NONE)
                fprintf(stderr, "tern chat: warning: the chat template shows no tool-call format\n");
        } else if (tern_grammar_warnings(c.gram)) {
            fprintf(stderr, "tern chat: tools: warning: %s\n", tern_grammar_warnings(c.gram));
        }
    }
    c.gp.grammar = c.gram;
    if (c.tools) { /* as llama-server: the calls' markup is shown although it is a control token */
        c.gp.n_preserve = tern_toolcall_preserved_tokens(c.tok, c.fmt, c.preserve, 4);
        c.gp.preserve = c.preserve;
    }
    struct tern_context_params cp = {.n_ctx = (int)go.n_ctx, .n_threads = (int)go.threads, .swa_full = go.swa_full};
    struct tern_sampler_params sp = go.sampler;
    if ((st = tern_context_create(c.model, &cp, &c.ctx)) ||
        (st = tern_sampler_create(&sp, tern_model_n_vocab(c.model), &c.smp)) ||
        (st = tern_generator_create(c.ctx, c.tok, &c.gen))) {
        rc = cli_report("chat", st);
        goto done;
    }
    if ((rc = cli_lora_load("chat", &go.lora, c.model, stderr)) ||
        (rc = cli_lora_attach("chat", &go.lora, c.ctx)))
        goto done;
    /* A recurrent model (qwen35) keeps its state only at the end of the history, so a turn whose
     * prompt leaves the history inside the last answer (Qwen3.5's template drops earlier
     * <think> blocks) would start from 0: an in-memory prompt cache gives it the state at the
     * previous prompt's last block boundary (and a cache directory keeps those states too). */
    const bool recurrent = tern_model_get_info(c.model)->n_layer_rec > 0;
    if (go.cache_dir || recurrent) {
        struct tern_prefix_cache_params pp = tern_prefix_cache_default_params();
        pp.budget_bytes = (uint64_t)go.cache_mb << 20;
        pp.dir = go.cache_dir;
        if ((st = tern_prefix_cache_create(c.model, &pp, &pc))) {
            rc = cli_report("chat", st);
            goto done;
        }
        if (tern_prefix_cache_warning(pc)) fprintf(stderr, "tern chat: prompt cache: %s\n", tern_prefix_cache_warning(pc));
        tern_generator_set_prefix_cache(c.gen, pc);
    }
    if (dro.source) {
        if ((rc = cli_draft_create("chat", &dro, c.model, tern_context_n_ctx(c.ctx), (int)go.threads, stderr, &c.draft)))
            goto done;
        if ((st = tern_generator_set_draft(c.gen, c.draft))) {
            rc = cli_report("chat", st);
            goto done;
        }
    }
    cli_warn_train_ctx("chat", c.model, tern_context_n_ctx(c.ctx), 0);

    rc = CLI_EXIT_OK;
    if (ends_with_user(c.messages) && ((rc = converse(&c)) || c.closed)) goto done;
    bool tty = isatty(STDIN_FILENO);
    size_t cap = 0;
    int lineno = 0;
    for (;;) {
        if (tty) {
            printf("> ");
            fflush(stdout);
        }
        ssize_t got = getline(&line, &cap, stdin);
        if (got < 0) break;
        lineno++;
        size_t len = (size_t)got;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        line[len] = '\0';
        if (memchr(line, '\0', len) || utf8_invalid_at(line, len) >= 0) {
            long long at = memchr(line, '\0', len) ? (long long)((char *)memchr(line, '\0', len) - line)
                                                  : utf8_invalid_at(line, len);
            fprintf(stderr, "tern chat: stdin line %d: %s at byte %lld; the message was not sent\n",
                    lineno, memchr(line, '\0', len) ? "NUL byte" : "invalid UTF-8", at);
            if (tty) continue;
            rc = CLI_EXIT_FAIL;
            break;
        }
        if (len == 0) continue;
        if (tty && (!strcmp(line, "/exit") || !strcmp(line, "/quit"))) break;
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", line);
        cJSON_AddItemToArray(c.messages, m);
        if ((rc = converse(&c)) || c.closed) break;
    }
    if (ferror(stdin)) {
        fprintf(stderr, "tern chat: reading stdin: %s\n", strerror(errno));
        rc = CLI_EXIT_FAIL;
    }
done:
    if (pc) {
        tern_status cst = go.cache_dir && !tern_model_get_info(c.model)->n_layer_rec ? tern_prefix_cache_save(pc) : TERN_OK;
        if (cst && !rc) rc = cli_report("chat", cst);
        tern_prefix_cache_free(pc);
    }
    if (sv.f && c.messages && c.model) {
        int src = save_messages(&c, &sv);
        if (!rc) rc = src;
    }
    save_drop(&sv);
    free(line);
    free(c.ids);
    tern_generator_free(c.gen);
    tern_grammar_free(c.gram);
    tern_grammar_free(c.gram_auto);
    cli_mcp_set_free(c.mcp);
    tern_grammar_vocab_free(c.gvoc);
    cli_grammar_opts_free(&gro);
    tern_draft_free(c.draft);
    tern_sampler_free(c.smp);
    tern_context_free(c.ctx);
    cli_lora_free(&go.lora);
    tern_chat_template_free(c.tmpl);
    tern_tokenizer_free(c.tok);
    tern_model_free(c.model);
    cJSON_Delete(c.messages);
    cJSON_Delete(c.tools);
    free(msgs_txt);
    free(tools_txt);
    return rc;
}

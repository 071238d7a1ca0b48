/* cmd_chat.c — `tern chat`: a conversation with a model, interactive (a TTY on stdin) or
 * scripted (one user message per stdin line), optionally continuing a --messages file.
 *
 * Each turn re-renders the whole conversation with the model's own chat template (the same
 * call as `tern template`, so --show-prompt output can be checked against it), tokenizes it with
 * control tokens parsed, and hands it to tern_generate (include/tern.h "generation"), which
 * decodes only the part not already in the KV cache. The answer streams through the tool-call
 * parser: content goes to stdout as it is decided, completed calls come out as JSON lines the
 * moment their closing markup arrives, and both end up in the assistant message appended to the
 * history. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <utf8proc.h>

#include "cli.h"

static void help(void)
{
    printf("usage: tern chat -m MODEL [options] < messages.txt\n"
           "\n"
           "Chats with the model using its own chat template (ChatML with a warning if the GGUF has\n"
           "none). On a terminal it prompts with \"> \" (/exit or end-of-file quits); otherwise each\n"
           "stdin line is one user message. The answer streams to stdout; per-turn statistics go to\n"
           "stderr.\n"
           "\n"
           "  -m, --model FILE       GGUF model\n"
           "  --system TEXT          a system message at the start of the conversation\n"
           "  --messages FILE        continue this conversation (array of OpenAI-style messages, or an\n"
           "                         object with \"messages\" and \"tools\"); if it ends with a user\n"
           "                         message, that message is answered first\n"
           "  --tools FILE           an array of OpenAI function tools for the template\n"
           "  --save-messages FILE   write the final conversation (JSON) to FILE (atomically)\n"
           "  -n, --n-predict N      tokens per answer at most (default 256)\n"
           "  -c, --ctx-size N       context size (default: min(training context, 4096))\n"
           "  -t, --threads N        threads (default: all CPUs)\n"
           "  --temp T               temperature (default 0 = greedy)\n"
           "  --top-k K, --top-p P, --min-p P, --repeat-penalty R, --repeat-last-n N\n"
           "  -s, --seed S           RNG seed (default 0); the sampler restarts from it each turn\n"
           "  --prompt-cache DIR     reuse the KV of prompt prefixes seen before, across restarts\n"
           "                         (blocks saved in DIR at exit)\n"
           "  --cache-mb N           prompt cache memory budget in MiB (default 256)\n"
           "  --show-prompt          also print the exact rendered prompt of each turn (stderr, or\n"
           "                         the \"prompt\" field with --json)\n"
           "  --json                 stdout gets JSON lines instead of text: {\"tool_call\": ..} as each\n"
           "                         call completes and one {\"turn\": .., \"content\": .., \"stats\": ..}\n"
           "                         per answer\n"
           "\n"
           "Tool calls (format detected from the template: hermes, llama3, mistral) are printed as\n"
           "JSON lines on stderr (stdout with --json) and stored in the assistant message.\n");
}

struct chat {
    struct tern_model *model;
    struct tern_context *ctx;
    struct tern_sampler *smp;
    struct tern_tokenizer *tok;
    struct tern_chat_template *tmpl;
    struct tern_generator *gen;
    struct tern_gen_params gp;
    enum tern_toolcall_format fmt;
    cJSON *messages;    /* the history (owned) */
    cJSON *tools;       /* or NULL (owned) */
    int32_t *ids;
    size_t cap_ids;
    bool json, show_prompt;
    int turn;
    /* per turn */
    struct tern_toolcall_parser *tp;
    size_t shown;       /* content bytes already written to stdout */
    int reported;       /* tool calls already printed */
    bool io_error;
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

/* A tool call as the assistant message stores it (OpenAI shape, arguments as an object). */
static cJSON *call_json(const struct tern_toolcall *c)
{
    cJSON *fn = cJSON_CreateObject(), *call = cJSON_CreateObject();
    cJSON *args = cJSON_Parse(c->arguments);
    if (!args) args = cJSON_CreateString(c->arguments); /* the parser guarantees JSON; be safe */
    cJSON_AddStringToObject(fn, "name", c->name);
    cJSON_AddItemToObject(fn, "arguments", args);
    if (c->id) cJSON_AddStringToObject(call, "id", c->id);
    cJSON_AddStringToObject(call, "type", "function");
    cJSON_AddItemToObject(call, "function", fn);
    return call;
}

static void print_json_line(FILE *f, cJSON *j)
{
    char *s = cJSON_PrintUnformatted(j);
    if (s) fprintf(f, "%s\n", s);
    free(s);
    fflush(f);
}

/* Write content the parser has decided, and announce calls it has completed. */
static void drain(struct chat *c)
{
    size_t len;
    const char *text = tern_toolcall_text(c->tp, &len);
    if (!c->json && len > c->shown) {
        if (fwrite(text + c->shown, 1, len - c->shown, stdout) != len - c->shown) c->io_error = true;
        fflush(stdout);
    }
    c->shown = len;
    for (; c->reported < tern_toolcall_count(c->tp); c->reported++) {
        cJSON *line = cJSON_CreateObject();
        cJSON_AddNumberToObject(line, "turn", c->turn);
        cJSON_AddItemToObject(line, "tool_call", call_json(tern_toolcall_get(c->tp, c->reported)));
        print_json_line(c->json ? stdout : stderr, line);
        cJSON_Delete(line);
    }
}

static int on_piece(const char *text, size_t len, void *user)
{
    struct chat *c = user;
    if (tern_toolcall_feed(c->tp, text, len, NULL)) return 1;
    drain(c);
    return c->io_error; /* stdout closed: stop generating */
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
    if (!msgs_txt || (c->tools && !tools_txt)) {
        free(msgs_txt);
        free(tools_txt);
        fprintf(stderr, "tern chat: out of memory printing the conversation\n");
        return CLI_EXIT_FAIL;
    }
    tern_status st = tern_chat_render(c->tmpl, &p, &prompt, &plen);
    free(msgs_txt);
    free(tools_txt);
    if (st) return cli_report("chat", st);
    if (c->show_prompt && !c->json) {
        fprintf(stderr, "tern chat: prompt of turn %d (%zu bytes):\n", c->turn, plen);
        fwrite(prompt, 1, plen, stderr);
        fprintf(stderr, "\ntern chat: end of prompt\n");
    }
    /* Templates usually write the bos token themselves; add it only if this one did not. */
    unsigned flags = TERN_TOK_PARSE_SPECIAL;
    int32_t bos = tern_token_bos(c->tok);
    size_t bos_len = 0;
    const char *bos_text = bos >= 0 ? tern_token_text(c->tok, bos, &bos_len) : NULL;
    if (!bos_text || bos_len == 0 || plen < bos_len || memcmp(prompt, bos_text, bos_len) != 0)
        flags |= TERN_TOK_ADD_SPECIAL;
    size_t n = 0;
    for (;;) {
        st = tern_tokenize(c->tok, prompt, plen, flags, c->ids, c->cap_ids, &n);
        if (st != TERN_ERR_RANGE || n <= c->cap_ids) break;
        int32_t *grown = realloc(c->ids, n * sizeof *grown);
        if (!grown) { st = TERN_ERR_NOMEM; break; }
        c->ids = grown;
        c->cap_ids = n;
    }
    int rc = CLI_EXIT_OK;
    cJSON *turn_json = NULL;
    if (st) { rc = cli_report("chat", st); goto out; }
    if (n > (size_t)tern_context_n_ctx(c->ctx)) {
        fprintf(stderr, "tern chat: the conversation is %zu tokens but the context holds %d "
                "(use a larger -c)\n", n, tern_context_n_ctx(c->ctx));
        rc = CLI_EXIT_FAIL;
        goto out;
    }

    if ((st = tern_toolcall_parser_create(c->fmt, &c->tp))) { rc = cli_report("chat", st); goto out; }
    c->shown = 0;
    c->reported = 0;
    struct tern_gen_stats gs;
    st = tern_generate(c->gen, c->smp, c->ids, (int)n, &c->gp, on_piece, c, &gs);
    if (st) { rc = cli_report("chat", st); goto out; }
    if ((st = tern_toolcall_finish(c->tp, NULL))) { rc = cli_report("chat", st); goto out; }
    drain(c);
    if (!c->json) {
        printf("\n");
        fflush(stdout);
    }
    for (int i = 0; i < tern_toolcall_n_errors(c->tp); i++)
        fprintf(stderr, "tern chat: warning: malformed tool call kept as text: %s\n", tern_toolcall_error(c->tp, i));

    size_t clen;
    const char *content = tern_toolcall_text(c->tp, &clen);
    cJSON *msg = cJSON_CreateObject();
    cJSON_AddStringToObject(msg, "role", "assistant");
    cJSON_AddStringToObject(msg, "content", content);
    cJSON *calls = NULL;
    if (tern_toolcall_count(c->tp) > 0) {
        calls = cJSON_AddArrayToObject(msg, "tool_calls");
        for (int i = 0; i < tern_toolcall_count(c->tp); i++)
            cJSON_AddItemToArray(calls, call_json(tern_toolcall_get(c->tp, i)));
    }
    cJSON_AddItemToArray(c->messages, msg);

    if (c->json) {
        turn_json = cJSON_CreateObject();
        cJSON_AddNumberToObject(turn_json, "turn", c->turn);
        cJSON_AddStringToObject(turn_json, "content", content);
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
        print_json_line(stdout, turn_json);
    } else {
        fprintf(stderr, "tern chat: turn %d: prompt %d tokens (%d reused from the KV cache, %d decoded "
                "in %.1f ms); %d tokens generated in %.1f ms (%.2f tokens/s); first token after "
                "%.1f ms; stop: %s\n", c->turn, gs.n_prompt, gs.n_reused, gs.n_prompt_decoded,
                gs.prompt_ms, gs.n_generated, gs.gen_ms, gs.gen_tps, gs.ttft_ms,
                tern_gen_stop_name(gs.stop));
    }
    if (c->io_error) {
        fprintf(stderr, "tern chat: cannot write to stdout\n");
        rc = CLI_EXIT_FAIL;
    }
out:
    cJSON_Delete(turn_json);
    tern_toolcall_parser_free(c->tp);
    c->tp = NULL;
    free(prompt);
    return rc;
}

static bool ends_with_user(const cJSON *messages)
{
    int n = cJSON_GetArraySize(messages);
    if (n == 0) return false;
    const char *role = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(messages, n - 1), "role"));
    return role && !strcmp(role, "user");
}

/* Write the conversation to path via path.tmp + rename. */
static int save_messages(const struct chat *c, const char *path)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemReferenceToObject(root, "messages", c->messages);
    if (c->tools) cJSON_AddItemReferenceToObject(root, "tools", c->tools);
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    int rc = CLI_EXIT_FAIL;
    if (!s || !tmp) goto out;
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) goto out;
    bool ok = fputs(s, f) >= 0 && fputc('\n', f) != EOF;
    ok = (fclose(f) == 0) && ok;
    if (ok && rename(tmp, path) == 0) rc = CLI_EXIT_OK;
    else remove(tmp);
out:
    if (rc) fprintf(stderr, "tern chat: cannot write %s: %s\n", path, strerror(errno));
    free(s);
    free(tmp);
    return rc;
}

int cmd_chat(int argc, char **argv)
{
    const char *model = NULL, *system = NULL, *msgs_path = NULL, *tools_path = NULL, *save_path = NULL, *v;
    struct cli_gen_opts go = cli_gen_opts_default(256);
    struct tern_prefix_cache *pc = NULL;
    struct chat c = {.gp = tern_gen_default_params()};
    for (int i = 1; i < argc; i++) {
        int r = 0;
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { help(); return 0; }
        if (!strcmp(argv[i], "--json")) { c.json = true; continue; }
        if (!strcmp(argv[i], "--show-prompt")) { c.show_prompt = true; continue; }
#define OPT(name, alt) ((r = cli_opt(argc, argv, &i, name, alt, &v)) != 0)
        if (OPT("-m", "--model")) { if (r < 0) return 2; model = v; }
        else if (OPT("--system", NULL)) { if (r < 0) return 2; system = v; }
        else if (OPT("--messages", NULL)) { if (r < 0) return 2; msgs_path = v; }
        else if (OPT("--tools", NULL)) { if (r < 0) return 2; tools_path = v; }
        else if (OPT("--save-messages", NULL)) { if (r < 0) return 2; save_path = v; }
        else if ((r = cli_gen_opt(argc, argv, &i, &go)) != 0) { if (r < 0) return CLI_EXIT_USAGE; }
        else return cli_usage_error("chat", "unknown option '%s'", argv[i]);
#undef OPT
    }
    if (!model) return cli_usage_error("chat", "missing -m MODEL");
    if (system && utf8_invalid_at(system, strlen(system)) >= 0)
        return cli_usage_error("chat", "--system: invalid UTF-8 at byte %lld", utf8_invalid_at(system, strlen(system)));
    c.gp.max_tokens = (int)go.n_predict;

    /* Files first: a bad conversation or tools.json should not cost a model load. They are
     * checked by the library itself (tern_chat_validate: the same checks and messages as
     * rendering), then kept as cJSON for appending the answers. */
    int rc = CLI_EXIT_FAIL;
    char *line = NULL, *msgs_txt = NULL, *tools_txt = NULL;
    size_t msgs_len = 0, tools_len = 0;
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
    if (system) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", system);
        cJSON_InsertItemInArray(c.messages, 0, m);
    }

    tern_status st = tern_model_load(model, &(struct tern_model_params){.prefault = true}, &c.model);
    if (st) { rc = cli_report("chat", st); goto done; }
    const struct tern_gguf *g = tern_model_gguf(c.model);
    if ((st = tern_tokenizer_from_gguf(g, &c.tok)) || (st = tern_chat_template_from_gguf(g, &c.tmpl))) {
        rc = cli_report("chat", st);
        goto done;
    }
    if (tern_chat_template_warning(c.tmpl)) fprintf(stderr, "tern chat: warning: %s\n", tern_chat_template_warning(c.tmpl));
    c.fmt = tern_toolcall_detect(tern_chat_template_source(c.tmpl));
    struct tern_context_params cp = {.n_ctx = (int)go.n_ctx, .n_threads = (int)go.threads};
    struct tern_sampler_params sp = go.sampler;
    if ((st = tern_context_create(c.model, &cp, &c.ctx)) ||
        (st = tern_sampler_create(&sp, tern_model_n_vocab(c.model), &c.smp)) ||
        (st = tern_generator_create(c.ctx, c.tok, &c.gen))) {
        rc = cli_report("chat", st);
        goto done;
    }
    if (go.cache_dir) {
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

    rc = CLI_EXIT_OK;
    if (ends_with_user(c.messages) && (rc = answer(&c))) goto done;
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
        if ((rc = answer(&c))) break;
    }
    if (ferror(stdin)) {
        fprintf(stderr, "tern chat: reading stdin: %s\n", strerror(errno));
        rc = CLI_EXIT_FAIL;
    }
done:
    if (pc) {
        tern_status cst = tern_prefix_cache_save(pc);
        if (cst && !rc) rc = cli_report("chat", cst);
        tern_prefix_cache_free(pc);
    }
    if (save_path && c.messages && c.model) {
        int src = save_messages(&c, save_path);
        if (!rc) rc = src;
    }
    free(line);
    free(c.ids);
    tern_generator_free(c.gen);
    tern_sampler_free(c.smp);
    tern_context_free(c.ctx);
    tern_chat_template_free(c.tmpl);
    tern_tokenizer_free(c.tok);
    tern_model_free(c.model);
    cJSON_Delete(c.messages);
    cJSON_Delete(c.tools);
    free(msgs_txt);
    free(tools_txt);
    return rc;
}

/* train_render.c — conversations (.jsonl, OpenAI chat format) -> the trainer's documents: each
 * line rendered with the model's chat template, tokenized with its tokenizer, with the loss mask
 * on the assistant's turns (tern_train_data_add_jsonl; contract in tern.h).
 *
 * Where a turn is: for assistant message i the template renders messages[0..i) with the
 * generation prompt (exactly the prompt inference would feed) and messages[0..i] without it;
 * the bytes between the two are the turn. Both must be prefixes of the whole conversation's
 * render, or the template rewrites history and no document can stand for what inference sees:
 * refused. The text is tokenized piece by piece (the prompt between turns, then each turn on its
 * own), as inference tokenizes a prompt and then generates, so a turn's first token never merges
 * with the prompt before it. Inside a turn the tokens up to and including the first
 * end-of-generation token are trained on; what a template adds after it (ChatML's newline) is
 * not, since generation stops at that token. With loss_on_prompt every prompt token is trained
 * on too (language modelling of the whole conversation: more signal per token, a pretraining
 * phase); a turn still stops at its end-of-generation token. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "train/train_internal.h"
#include "util/error.h"

struct tern_train_render_params tern_train_render_default_params(void)
{
    struct tern_train_render_params p = {.max_tokens = 0, .strict = false, .now_unix = 0,
                                         .call_valid = NULL, .call_valid_user = NULL};
    return p;
}

/* Per-call scratch, grown as needed. */
struct render_buf {
    int32_t *tok;
    uint8_t *mask;
    size_t n, cap;
    int n_tool;         /* turns of the last line marked as tool calls */
    size_t *span;       /* (2 * n_assistant) byte offsets: turn k is [span[2k], span[2k+1]) */
    bool *tool;         /* (n_assistant) turn k calls tools that validate: mask 2 + its token index */
    size_t span_cap;
};

static tern_status buf_reserve(struct render_buf *b, size_t need)
{
    if (need <= b->cap) return TERN_OK;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < need) cap *= 2;
    int32_t *t = realloc(b->tok, cap * sizeof *t);
    if (!t) return tern_fail(TERN_ERR_NOMEM, "train data: out of memory");
    b->tok = t;
    uint8_t *m = realloc(b->mask, cap);
    if (!m) return tern_fail(TERN_ERR_NOMEM, "train data: out of memory");
    b->mask = m;
    b->cap = cap;
    return TERN_OK;
}

/* Append the tokens of text[0..len) to b; a turn's tokens get mask 1 (tool: 2 + the token's
 * index in the turn, at most 255) up to and including the first end-of-generation token. */
static tern_status add_piece(struct render_buf *b, struct tern_tokenizer *tok, const char *text,
                             size_t len, bool first, bool turn, bool all, bool tool)
{
    if (len == 0) return TERN_OK;
    unsigned flags = TERN_TOK_PARSE_SPECIAL | (first ? TERN_TOK_ADD_SPECIAL : 0);
    size_t need = 0;
    tern_status st = buf_reserve(b, b->n + len + 8);
    if (st) return st;
    st = tern_tokenize(tok, text, len, flags, b->tok + b->n, b->cap - b->n, &need);
    if (st == TERN_ERR_RANGE) {
        if ((st = buf_reserve(b, b->n + need))) return st;
        st = tern_tokenize(tok, text, len, flags, b->tok + b->n, b->cap - b->n, &need);
    }
    if (st) return st;
    bool open = turn;
    for (size_t i = 0; i < need; i++) {
        b->mask[b->n + i] = open && tool ? (uint8_t)(i < 253 ? 2 + i : 255) : open || (all && !turn);
        if (open && tern_token_is_eog(tok, b->tok[b->n + i])) open = false;
    }
    b->n += need;
    return TERN_OK;
}

/* Render {"messages": messages[0..n), "tools": tools} (references, not copies). */
static tern_status render_prefix(const struct tern_chat_template *tmpl, const cJSON *messages,
                                 int n, const char *tools_json, bool gen_prompt, int64_t now,
                                 char **out, size_t *out_len)
{
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return tern_fail(TERN_ERR_NOMEM, "train data: out of memory");
    const cJSON *m = messages->child;
    for (int i = 0; i < n && m; i++, m = m->next)
        if (!cJSON_AddItemReferenceToArray(arr, (cJSON *)m)) {
            cJSON_Delete(arr);
            return tern_fail(TERN_ERR_NOMEM, "train data: out of memory");
        }
    char *text = cJSON_PrintUnformatted(arr);
    cJSON_Delete(arr);
    if (!text) return tern_fail(TERN_ERR_NOMEM, "train data: out of memory");
    struct tern_chat_params p = tern_chat_default_params();
    p.messages_json = text;
    p.tools_json = tools_json;
    p.add_generation_prompt = gen_prompt;
    p.now_unix = now;
    tern_status st = tern_chat_render(tmpl, &p, out, out_len);
    free(text);
    return st;
}

enum line_result { LINE_OK, LINE_MALFORMED, LINE_NO_ASSISTANT };

/* Does assistant message m call tools, every call validating (p->call_valid) against the
 * conversation's tools? The early tool-call loss trains only such answers. */
static bool valid_tool_turn(const cJSON *m, const char *tools_json, const struct tern_train_render_params *p)
{
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (!p->call_valid || !cJSON_IsArray(calls) || !calls->child) return false;
    const cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        if (!cJSON_IsString(name)) return false;
        char *printed = NULL;
        const char *a = cJSON_IsString(args) ? args->valuestring
                        : cJSON_IsObject(args) ? (printed = cJSON_PrintUnformatted(args)) : NULL;
        const bool ok = a && p->call_valid(tools_json ? tools_json : "[]", name->valuestring, a,
                                           p->call_valid_user);
        free(printed);
        if (!ok) return false;
    }
    return true;
}

/* One conversation into b (tokens and mask). LINE_MALFORMED leaves the reason in
 * tern_last_error; a template that is not prefix-stable is a hard error (TERN_ERR_UNSUPPORTED
 * returned through *hard). */
static enum line_result render_line(struct render_buf *b, struct tern_tokenizer *tok,
                                    const struct tern_chat_template *tmpl, const char *line,
                                    size_t len, const struct tern_train_render_params *p,
                                    tern_status *hard)
{
    const int64_t now = p->now_unix;
    const bool all = p->loss_on_prompt;
    *hard = TERN_OK;
    b->n = 0;
    b->n_tool = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(line, len, &end, false);
    if (!root) {
        tern_fail(TERN_ERR_FORMAT, "malformed JSON at byte %zu", end ? (size_t)(end - line) : (size_t)0);
        return LINE_MALFORMED;
    }
    enum line_result res = LINE_MALFORMED;
    char *tools_json = NULL, *full = NULL, *pre = NULL, *post = NULL;
    size_t full_len = 0, pre_len = 0, post_len = 0;
    const cJSON *messages = cJSON_GetObjectItemCaseSensitive(root, "messages");
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    if (!cJSON_IsObject(root) || !cJSON_IsArray(messages) || !messages->child) {
        tern_fail(TERN_ERR_FORMAT, "expected an object with a non-empty \"messages\" array");
        goto done;
    }
    if (tools && !cJSON_IsNull(tools)) {
        if (!cJSON_IsArray(tools)) {
            tern_fail(TERN_ERR_FORMAT, "\"tools\" must be an array");
            goto done;
        }
        if (!(tools_json = cJSON_PrintUnformatted(tools))) {
            tern_fail(TERN_ERR_NOMEM, "train data: out of memory");
            goto done;
        }
    }
    const int n_msg = cJSON_GetArraySize(messages);
    if (render_prefix(tmpl, messages, n_msg, tools_json, false, now, &full, &full_len)) goto done;
    /* the assistant turns' byte spans */
    int n_turns = 0;
    int i = 0;
    for (const cJSON *m = messages->child; m; m = m->next, i++) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role) || strcmp(role->valuestring, "assistant")) continue;
        if (render_prefix(tmpl, messages, i, tools_json, true, now, &pre, &pre_len) ||
            render_prefix(tmpl, messages, i + 1, tools_json, false, now, &post, &post_len))
            goto done;
        if (pre_len > post_len || memcmp(pre, post, pre_len) || post_len > full_len ||
            memcmp(post, full, post_len)) {
            *hard = tern_fail(TERN_ERR_UNSUPPORTED, "messages[%d]: the chat template renders the "
                              "conversation so far differently once later messages are added (its "
                              "prompt is not a prefix of the whole conversation); such templates "
                              "cannot be trained on", i);
            goto done;
        }
        if ((size_t)(n_turns + 1) * 2 > b->span_cap) {
            size_t cap = b->span_cap ? b->span_cap * 2 : 16;
            size_t *s = realloc(b->span, cap * sizeof *s);
            bool *tl = s ? realloc(b->tool, cap / 2 * sizeof *tl) : NULL;
            if (s) b->span = s;
            if (!tl) {
                *hard = tern_fail(TERN_ERR_NOMEM, "train data: out of memory");
                goto done;
            }
            b->tool = tl;
            b->span_cap = cap;
        }
        const size_t prev_end = n_turns ? b->span[2 * n_turns - 1] : 0;
        if (pre_len < prev_end) { /* cannot happen for a prefix-stable template */
            *hard = tern_fail(TERN_ERR_UNSUPPORTED, "messages[%d]: the template's prompt ends "
                              "inside the previous assistant turn", i);
            goto done;
        }
        b->span[2 * n_turns] = pre_len;
        b->span[2 * n_turns + 1] = post_len;
        b->tool[n_turns] = valid_tool_turn(m, tools_json, p);
        n_turns++;
        free(pre);
        free(post);
        pre = post = NULL;
    }
    if (n_turns == 0) {
        res = LINE_NO_ASSISTANT;
        goto done;
    }
    size_t at = 0;
    tern_status st = TERN_OK;
    for (int k = 0; k < n_turns && !st; k++) {
        st = add_piece(b, tok, full + at, b->span[2 * k] - at, at == 0, false, all, false);
        if (!st) st = add_piece(b, tok, full + b->span[2 * k], b->span[2 * k + 1] - b->span[2 * k],
                                b->span[2 * k] == 0, true, all, b->tool[k]);
        b->n_tool += b->tool[k];
        at = b->span[2 * k + 1];
    }
    if (!st) st = add_piece(b, tok, full + at, full_len - at, at == 0, false, all, false);
    if (st) {
        *hard = st;
        goto done;
    }
    res = LINE_OK;
done:
    free(pre);
    free(post);
    free(full);
    free(tools_json);
    cJSON_Delete(root);
    return res;
}

tern_status tern_train_data_add_jsonl(struct tern_train_data_writer *w, struct tern_tokenizer *tok,
                                      const struct tern_chat_template *tmpl, const char *path,
                                      const struct tern_train_render_params *p,
                                      struct tern_train_render_report *report)
{
    struct tern_train_render_report scratch;
    if (!report) {
        memset(&scratch, 0, sizeof scratch);
        report = &scratch;
    }
    const struct tern_train_render_params dp = tern_train_render_default_params();
    if (!p) p = &dp;
    FILE *f = fopen(path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct render_buf b = {0};
    const int64_t docs_before = report->docs; /* the report accumulates over files */
    char *line = NULL;
    size_t line_cap = 0;
    long long lineno = 0;
    tern_status st = TERN_OK;
    ssize_t n;
    while ((n = getline(&line, &line_cap, f)) >= 0) {
        lineno++;
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
        size_t lead = 0;
        while (lead < (size_t)n && (line[lead] == ' ' || line[lead] == '\t')) lead++;
        if (lead == (size_t)n) continue; /* blank line */
        report->lines++;
        tern_status hard = TERN_OK;
        enum line_result r = render_line(&b, tok, tmpl, line, (size_t)n, p, &hard);
        if (hard) {
            char msg[400];
            snprintf(msg, sizeof msg, "%s", tern_last_error());
            st = tern_fail(hard, "%s:%lld: %s", path, lineno, msg);
            break;
        }
        const char *why = NULL;
        char whybuf[400];
        if (r == LINE_MALFORMED) {
            report->malformed++;
            snprintf(whybuf, sizeof whybuf, "%s", tern_last_error());
            why = whybuf;
        } else if (r == LINE_NO_ASSISTANT) {
            report->no_assistant++;
            why = "no assistant message to train on";
        } else if (p->max_tokens > 0 && b.n > (size_t)p->max_tokens) {
            report->too_long++;
            snprintf(whybuf, sizeof whybuf, "%zu tokens, more than the limit of %d", b.n,
                     p->max_tokens);
            why = whybuf;
        }
        if (why) {
            if (p->strict && r == LINE_MALFORMED) {
                st = tern_fail(TERN_ERR_FORMAT, "%s:%lld: %s", path, lineno, why);
                break;
            }
            if (!report->first_problem[0])
                snprintf(report->first_problem, sizeof report->first_problem, "%s:%lld: %s", path,
                         lineno, why);
            continue;
        }
        if ((st = tern_train_data_add(w, b.tok, b.mask, (int)b.n))) break;
        report->docs++;
        if (p->on_doc) p->on_doc(lineno, p->on_doc_user);
        report->tokens += b.n;
        report->tool_turns += b.n_tool;
        for (size_t i = 0; i < b.n; i++) report->loss_tokens += b.mask[i] != 0;
    }
    if (!st && ferror(f)) st = tern_fail(TERN_ERR_IO, "%s: read failed: %s", path, strerror(errno));
    /* a file with nothing to train on is said here, with the reasons, rather than later as an
     * empty token stream */
    if (!st && report->docs == docs_before)
        st = tern_fail(TERN_ERR_FORMAT, "%s: no conversation could be trained on (%lld lines: %lld "
                       "malformed, %lld without an assistant message, %lld too long)%s%s",
                       path, (long long)report->lines, (long long)report->malformed,
                       (long long)report->no_assistant, (long long)report->too_long,
                       report->first_problem[0] ? "; first: " : "",
                       report->first_problem);
    fclose(f);
    free(line);
    free(b.tok);
    free(b.mask);
    free(b.span);
    free(b.tool);
    return st;
}

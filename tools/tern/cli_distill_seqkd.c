/* cli_distill_seqkd.c — sequence-level KD for tern distill (Kim & Rush 2016):
 * the student learns from what the teacher *says*, not only from its distribution over the
 * data's words.
 *
 * Every assistant message of the training conversations becomes a tern eval case (the messages
 * before it and the tools: tern_eval_cases_from_corpus). The teacher answers each one as tern
 * eval's local runner does (greedy, tool calls constrained by the conversation's tools), and each
 * answer becomes one training conversation: the case's messages followed by the teacher's answer
 * as an assistant message (its calls as tool_calls with ids call_<case>_<k>, text around a call
 * trimmed away as the corpus writes it). Answers the runner could not give (the prompt exceeds the
 * context), answers with a call that did not parse, and answers cut at max_tokens are left out
 * and counted. The file is then ordinary training data: rendered, marked, and given its top-k
 * teacher signal like any other.
 *
 * Cache: DIR/teacher-answers.jsonl with DIR/teacher-answers.key, the text "tern seqkd v1" plus
 * the teacher's model fingerprint, the data file's SHA-256 and the settings. A key that matches
 * reuses the file (restarts and --resume do not run the teacher again); any other key rebuilds
 * it. Both files are written to .tmp and renamed, the key last. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "cli_distill_seqkd.h"
#include "cli_gov.h"
#include "tern_bench.h"

static void hex(const uint8_t *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", b[i]);
}

static void progress(int done, int total, void *user)
{
    int *last = user;
    if (!isatty(STDERR_FILENO)) return; /* a log gets the summary line only */
    const int pct = total ? (int)(100LL * done / total) : 100;
    if (pct / 5 != *last / 5 || done == total) {
        fprintf(stderr, "\rtern distill: sequence-level KD: the teacher answered %d/%d", done, total);
        if (done == total) fputc('\n', stderr);
        *last = pct;
    }
}

/* The case's conversation followed by the teacher's answer (one line of outputs), or NULL when
 * the answer is left out (*why says which count it goes to: 0 error, 1 malformed, 2 cut). */
static cJSON *conversation(const char *request, const cJSON *ans, const char *case_id, int max_tokens, int *why)
{
    const cJSON *calls = cJSON_GetObjectItemCaseSensitive(ans, "tool_calls");
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(ans, "content");
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(ans, "tokens");
    const cJSON *malformed = cJSON_GetObjectItemCaseSensitive(ans, "malformed_calls");
    if (cJSON_GetObjectItemCaseSensitive(ans, "error") || !cJSON_IsString(content)) return *why = 0, NULL;
    if (cJSON_IsNumber(malformed) && malformed->valueint > 0) return *why = 1, NULL;
    if (!cJSON_IsNumber(tokens) || tokens->valueint >= max_tokens) return *why = 2, NULL;
    cJSON *conv = cJSON_Parse(request);
    cJSON *msgs = cJSON_GetObjectItemCaseSensitive(conv, "messages");
    if (!cJSON_IsArray(msgs)) {
        cJSON_Delete(conv);
        return *why = 0, NULL;
    }
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "assistant");
    const int n_calls = cJSON_GetArraySize(calls);
    /* text beside a call is the blank the call format leaves around it: the corpus writes none */
    const char *text = content->valuestring;
    size_t a = 0, b = strlen(text);
    while (n_calls && a < b && strchr(" \t\r\n", text[a])) a++;
    while (n_calls && b > a && strchr(" \t\r\n", text[b - 1])) b--;
    if (n_calls && a == b) cJSON_AddNullToObject(m, "content");
    else {
        char *t = strndup(text + a, b - a);
        cJSON_AddStringToObject(m, "content", t ? t : "");
        free(t);
    }
    if (n_calls) {
        cJSON *tc = cJSON_AddArrayToObject(m, "tool_calls");
        int k = 0;
        const cJSON *c;
        cJSON_ArrayForEach(c, calls) {
            cJSON *call = cJSON_CreateObject(), *fn = cJSON_CreateObject();
            char id[96];
            snprintf(id, sizeof id, "call_%s_%d", case_id, k++);
            cJSON_AddStringToObject(call, "id", id);
            cJSON_AddStringToObject(call, "type", "function");
            cJSON_AddItemToObject(fn, "name", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "name"), true));
            cJSON_AddItemToObject(fn, "arguments", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(c, "arguments"), true));
            cJSON_AddItemToObject(call, "function", fn);
            cJSON_AddItemToArray(tc, call);
        }
    }
    cJSON_AddItemToArray(msgs, m);
    return conv;
}

/* Turn the teacher's outputs into conversations, written to out. */
static tern_status compose(const struct tern_eval_set *set, const char *outputs, const char *out,
                           int max_tokens, double secs)
{
    FILE *in = fopen(outputs, "rb");
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", out);
    FILE *o = in ? fopen(tmp, "wb") : NULL;
    if (!in || !o) {
        if (in) fclose(in);
        fprintf(stderr, "tern distill: cannot write %s: %s\n", tmp, strerror(errno));
        return TERN_ERR_IO;
    }
    char *line = NULL;
    size_t cap = 0;
    long long kept = 0, left[3] = {0, 0, 0}, i = 0;
    tern_status st = TERN_OK;
    while (!st && getline(&line, &cap, in) >= 0 && i < tern_eval_set_count(set)) {
        cJSON *ans = cJSON_Parse(line);
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(ans, "id");
        if (!cJSON_IsString(id) || strcmp(id->valuestring, tern_eval_case_id(set, (int)i))) {
            fprintf(stderr, "tern distill: %s: answer %lld is not case %s's\n", outputs, i + 1,
                    tern_eval_case_id(set, (int)i));
            st = TERN_ERR_FORMAT;
        }
        int why = 0;
        cJSON *conv = st ? NULL : conversation(tern_eval_case_request(set, (int)i), ans,
                                               id->valuestring, max_tokens, &why);
        if (conv) {
            char *text = cJSON_PrintUnformatted(conv);
            if (!text || fputs(text, o) < 0 || fputc('\n', o) < 0) st = TERN_ERR_IO;
            free(text);
            kept++;
        } else if (!st) {
            left[why]++;
        }
        cJSON_Delete(conv);
        cJSON_Delete(ans);
        i++;
    }
    free(line);
    fclose(in);
    if (fclose(o) != 0 && !st) st = TERN_ERR_IO;
    if (!st && i != tern_eval_set_count(set)) st = TERN_ERR_FORMAT;
    if (!st && rename(tmp, out) != 0) st = TERN_ERR_IO;
    if (st) {
        remove(tmp);
        fprintf(stderr, "tern distill: writing the teacher's answers to %s failed\n", out);
        return st;
    }
    fprintf(stderr, "tern distill: sequence-level KD: %lld answers by the teacher -> %lld training "
            "conversations in %s (left out: %lld not answered, %lld with a call that did not parse, "
            "%lld cut at %d tokens) in %.0f s\n", i, kept, out, left[0], left[1], left[2],
            max_tokens, secs);
    return TERN_OK;
}

tern_status cli_seqkd_prepare(const struct cli_seqkd_params *p, char *out, size_t out_cap)
{
    char key[512], data_sha[65], fp_hex[65], key_path[4200], cases[4200], outputs[4200];
    uint8_t fp[32];
    tern_status st = tern_model_fingerprint(p->teacher, fp);
    if (!st) st = tern_sha256_file(p->data, data_sha);
    if (st) {
        fprintf(stderr, "tern distill: sequence-level KD: %s\n", tern_last_error());
        return st;
    }
    hex(fp, sizeof fp, fp_hex);
    /* the key file holds this and a newline (cli_write_atomic) */
    snprintf(key, sizeof key, "tern seqkd v1\nteacher %s\ndata %s\nmax_tokens %d\nn_ctx %d",
             fp_hex, data_sha, p->max_tokens, p->n_ctx);
    snprintf(out, out_cap, "%s/teacher-answers.jsonl", p->dir);
    snprintf(key_path, sizeof key_path, "%s/teacher-answers.key", p->dir);
    size_t have_len = 0;
    char *have = cli_read_file(key_path, &have_len);
    const size_t key_len = strlen(key);
    FILE *f = fopen(out, "rb");
    const bool reuse = have && f && have_len == key_len + 1 && !memcmp(have, key, key_len) &&
                       have[key_len] == '\n';
    if (f) fclose(f);
    free(have);
    if (reuse) {
        fprintf(stderr, "tern distill: sequence-level KD: the teacher's answers read from %s\n", out);
        return TERN_OK;
    }
    if (!p->may_build) {
        fprintf(stderr, "tern distill: --sequence-kd under mpirun needs the teacher's answers made "
                "first: run the same command in one process (it writes %s), then mpirun\n", out);
        return TERN_ERR_ARG;
    }
    remove(key_path); /* the answers file is about to change: no key may vouch for it */
    snprintf(cases, sizeof cases, "%s/teacher-answers-cases.jsonl", p->dir);
    snprintf(outputs, sizeof outputs, "%s/teacher-answers-raw.jsonl", p->dir);
    const double t0 = cli_now_s();
    struct tern_eval_set *set = NULL;
    struct tern_eval_run *run = NULL;
    st = tern_eval_cases_from_corpus(p->data, cases, NULL);
    if (!st) st = tern_eval_set_load(cases, &set);
    if (!st) st = tern_eval_run_create(set, &run);
    if (!st) {
        struct tern_eval_local_params lp = tern_eval_local_default_params();
        lp.constrained = true;
        lp.n_threads = p->threads;
        lp.n_ctx = p->n_ctx;
        lp.max_tokens = p->max_tokens;
        int last = -5;
        st = tern_eval_local(run, p->teacher_path, &lp, NULL, tern_eval_set_count(set), progress, &last);
    }
    if (!st) {
        FILE *o = fopen(outputs, "wb");
        st = o ? tern_eval_outputs_write(run, o) : TERN_ERR_IO;
        if (o && fclose(o) != 0 && !st) st = TERN_ERR_IO;
    }
    if (st) {
        fprintf(stderr, "tern distill: sequence-level KD: the teacher's answers failed: %s\n",
                tern_last_error());
    } else {
        st = compose(set, outputs, out, p->max_tokens, cli_now_s() - t0);
    }
    if (!st && cli_write_atomic("distill", key_path, key) != CLI_EXIT_OK) st = TERN_ERR_IO;
    remove(cases);
    remove(outputs);
    tern_eval_run_free(run);
    tern_eval_set_free(set);
    return st;
}

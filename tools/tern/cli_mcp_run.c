/* cli_mcp_run.c — running the tool calls of a model's answer on the MCP servers of `tern chat`:
 * asking the user, tools/call, and the tool messages that carry the results back to the model.
 *
 * Read cli_mcp.h (cli_mcp_run_calls) first. Nothing that goes wrong with one call ends the
 * chat: the model gets an "Error: ..." tool message saying what happened (so it can tell the
 * user or try something else), and stderr gets the same, naming the server. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_mcp.h"

/* Ask on the terminal whether to run the call; false = declined (why says so). */
static bool confirm(const char *name, const char *args, const char *server, const char **why)
{
    fprintf(stderr, "tern chat: the model calls %s %s (mcp server %s). Run it? [y/N] ", name, args, server);
    fflush(stderr);
    FILE *in = stdin, *tty = NULL;
    if (!isatty(STDIN_FILENO)) { /* stdin carries the user's messages: ask the terminal itself */
        tty = fopen("/dev/tty", "r");
        if (!tty) {
            fprintf(stderr, "\n");
            *why = "not run: there is no terminal to ask the user (tern chat --yes runs calls without asking)";
            return false;
        }
        in = tty;
    }
    char *line = NULL;
    size_t cap = 0;
    const bool got = getline(&line, &cap, in) > 0;
    const bool yes = got && (line[0] == 'y' || line[0] == 'Y');
    free(line);
    if (tty) fclose(tty);
    if (!got) fprintf(stderr, "\n");
    *why = "the user declined to run this tool call";
    return yes;
}

static void add_tool_message(cJSON *messages, const char *id, const char *name, const char *content)
{
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "tool");
    if (id) cJSON_AddStringToObject(m, "tool_call_id", id);
    cJSON_AddStringToObject(m, "name", name);
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(messages, m);
}

static void show(const struct cli_mcp_run_opts *o, const char *id, const char *name, const char *content, bool is_error)
{
    if (o->json) {
        cJSON *line = cJSON_CreateObject(), *r = cJSON_CreateObject();
        cJSON_AddNumberToObject(line, "turn", o->turn);
        if (id) cJSON_AddStringToObject(r, "tool_call_id", id);
        cJSON_AddStringToObject(r, "name", name);
        cJSON_AddStringToObject(r, "content", content);
        cJSON_AddBoolToObject(r, "is_error", is_error);
        cJSON_AddItemToObject(line, "tool_result", r);
        char *s = cJSON_PrintUnformatted(line);
        if (s) {
            fprintf(o->out, "%s\n", s);
            fflush(o->out);
        }
        free(s);
        cJSON_Delete(line);
    } else if (!is_error) { /* errors were reported already, naming the server */
        fprintf(stderr, "tern chat: %s -> %s\n", name, content);
    }
}

int cli_mcp_run_calls(const struct cli_mcp_set *s, const cJSON *assistant, cJSON *messages,
                      const struct cli_mcp_run_opts *o)
{
    int run = 0;
    const cJSON *call;
    cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(assistant, "tool_calls")) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
        const cJSON *jid = cJSON_GetObjectItemCaseSensitive(call, "id");
        const cJSON *jname = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        const char *id = cJSON_IsString(jid) ? jid->valuestring : NULL;
        const char *name = cJSON_IsString(jname) ? jname->valuestring : "";
        char *args_txt = args ? cJSON_PrintUnformatted(args) : strdup("{}");
        struct cli_mcp *m = cli_mcp_set_owner(s, name);
        char err[768];
        char *text = NULL, *content = NULL;
        bool is_error = true;
        const char *why = NULL;
        if (!m) {
            snprintf(err, sizeof err, "no MCP server offers a tool named \"%.80s\"", name);
            why = err;
        } else if (!cJSON_IsObject(args)) {
            snprintf(err, sizeof err, "the arguments of %s are not a JSON object", name);
            why = err;
        } else if (!o->yes && !confirm(name, args_txt ? args_txt : "{}", cli_mcp_name(m), &why)) {
            /* why: declined */
        } else if (!cli_mcp_call(m, name, args, &text, &is_error, err, sizeof err)) {
            why = err;
            is_error = true;
        } else {
            run++;
        }
        if (why) {
            fprintf(stderr, "tern chat: tool call %s: %s\n", name, why);
            if (asprintf(&content, "Error: %s", why) < 0) content = NULL;
        } else if (is_error) {
            fprintf(stderr, "tern chat: tool call %s: mcp server %s reported an error: %s\n", name, cli_mcp_name(m), text);
            if (asprintf(&content, "Error: %s", text) < 0) content = NULL;
        }
        const char *c = content ? content : text ? text : "Error: out of memory";
        add_tool_message(messages, id, name, c);
        show(o, id, name, c, is_error);
        free(content);
        free(text);
        free(args_txt);
    }
    return run;
}

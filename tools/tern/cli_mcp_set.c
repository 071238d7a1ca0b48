/* cli_mcp_set.c — the MCP servers of one `tern chat` and the tools they offer, as the model
 * sees them: an OpenAI-style tools array (what --tools takes), each tool remembering which
 * server to call.
 *
 * Read cli_mcp.h first. MCP's tool object ({name, title, description, inputSchema,
 * outputSchema, annotations}) becomes {"type": "function", "function": {name, description,
 * parameters: inputSchema}}; the name must pass the rule tern serve applies to request tools
 * (src/server/srv_request.c: ^[a-zA-Z0-9_-]{1,64}$), since it is written into and read back from
 * the template's call markup. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_mcp.h"

struct cli_mcp_set {
    struct cli_mcp **servers;
    int n;
    cJSON *tools;           /* OpenAI tools array, or NULL before the first tool */
    int *owner;             /* (tools' count) index of the server of each tool */
    int n_tools;
};

bool cli_mcp_set_create(struct cli_mcp_set **out)
{
    *out = calloc(1, sizeof **out);
    return *out != NULL;
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '_' || s[i] == '-'))
            return false;
    return true;
}

/* The index of tool name in s->tools, or -1. */
static int find(const struct cli_mcp_set *s, const char *name)
{
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, s->tools) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return i;
        i++;
    }
    return -1;
}

bool cli_mcp_set_add(struct cli_mcp_set *s, const char *cmdline, int timeout_ms, char *err, size_t errlen)
{
    struct cli_mcp *m;
    if (!cli_mcp_start(cmdline, timeout_ms, &m, err, errlen)) return false;
    struct cli_mcp **nv = realloc(s->servers, (size_t)(s->n + 1) * sizeof *nv);
    if (!nv) {
        cli_mcp_stop(m);
        snprintf(err, errlen, "--mcp: out of memory");
        return false;
    }
    s->servers = nv;
    s->servers[s->n++] = m; /* from here on freed with the set */
    cJSON *list;
    if (!cli_mcp_list_tools(m, &list, err, errlen)) return false;
    if (!s->tools) s->tools = cJSON_CreateArray();
    bool ok = true;
    int kept = 0, i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, list) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
        const cJSON *desc = cJSON_GetObjectItemCaseSensitive(t, "description");
        const cJSON *schema = cJSON_GetObjectItemCaseSensitive(t, "inputSchema");
        if (!cJSON_IsString(name)) {
            fprintf(stderr, "tern chat: warning: mcp server %s: tools[%d] has no string \"name\"; left out\n",
                    cli_mcp_name(m), i++);
            continue;
        }
        i++;
        if (!name_ok(name->valuestring)) {
            fprintf(stderr, "tern chat: warning: mcp server %s: tool \"%.80s\" left out: a tool name must match "
                    "^[a-zA-Z0-9_-]{1,64}$ to be written in a call and read back\n", cli_mcp_name(m), name->valuestring);
            continue;
        }
        const int at = find(s, name->valuestring);
        if (at >= 0) {
            snprintf(err, errlen, "tool \"%s\" is offered by mcp server %s and by mcp server %s: a call must reach "
                     "one server (leave one --mcp out, or rename the tool in one server)", name->valuestring,
                     cli_mcp_name(s->servers[s->owner[at]]), cli_mcp_name(m));
            ok = false;
            break;
        }
        cJSON *fn = cJSON_CreateObject(), *tool = cJSON_CreateObject();
        cJSON_AddStringToObject(fn, "name", name->valuestring);
        if (cJSON_IsString(desc)) cJSON_AddStringToObject(fn, "description", desc->valuestring);
        /* MCP requires an inputSchema of type object; a server leaving it out gets "no parameters" */
        cJSON_AddItemToObject(fn, "parameters", cJSON_IsObject(schema) ? cJSON_Duplicate(schema, true)
                                                                         : cJSON_Parse("{\"type\":\"object\",\"properties\":{}}"));
        cJSON_AddStringToObject(tool, "type", "function");
        cJSON_AddItemToObject(tool, "function", fn);
        int *no = realloc(s->owner, (size_t)(s->n_tools + 1) * sizeof *no);
        if (!no) {
            cJSON_Delete(tool);
            snprintf(err, errlen, "--mcp: out of memory");
            ok = false;
            break;
        }
        s->owner = no;
        s->owner[s->n_tools++] = s->n - 1;
        cJSON_AddItemToArray(s->tools, tool);
        kept++;
    }
    cJSON_Delete(list);
    if (ok && kept == 0)
        fprintf(stderr, "tern chat: warning: mcp server %s offers no tool tern can use\n", cli_mcp_name(m));
    return ok;
}

const cJSON *cli_mcp_set_tools(const struct cli_mcp_set *s)
{
    return s && s->n_tools > 0 ? s->tools : NULL;
}

struct cli_mcp *cli_mcp_set_owner(const struct cli_mcp_set *s, const char *name)
{
    const int at = s ? find(s, name) : -1;
    return at >= 0 ? s->servers[s->owner[at]] : NULL;
}

void cli_mcp_set_free(struct cli_mcp_set *s)
{
    if (!s) return;
    for (int i = 0; i < s->n; i++) cli_mcp_stop(s->servers[i]);
    free(s->servers);
    free(s->owner);
    cJSON_Delete(s->tools);
    free(s);
}

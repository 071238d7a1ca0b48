/* cli_mcp.h — a Model Context Protocol client for `tern chat --mcp`: MCP servers as child
 * processes over stdio, and the set of their tools offered to the model.
 *
 * The transport is MCP's stdio transport (spec 2025-11-25, "Transports"): the client starts the
 * server, writes JSON-RPC 2.0 messages to its stdin and reads them from its stdout, one per line
 * (no embedded newlines); the server's stderr is its log, passed through to tern's stderr with
 * the server's name in front. Every request has a deadline: a server that never answers, exits,
 * or writes something that is not JSON-RPC makes the call fail with a message naming the server
 * and what happened, never a hang. cli_mcp_stop (and cli_mcp_set_free) close the server's stdin,
 * give it time to exit, then SIGTERM, then SIGKILL, and always reap it.
 *
 *     struct cli_mcp_set *set;
 *     cli_mcp_set_create(&set);
 *     cli_mcp_set_add(set, "node server.mjs", 30000, err, sizeof err);   // start + initialize + tools/list
 *     cJSON *tools = cli_mcp_set_tools(set);                             // OpenAI-style, owned by set
 *     char *text; bool is_error;                                         // tools/call:
 *     cli_mcp_call(cli_mcp_set_owner(set, "get_weather"), "get_weather", args, &text, &is_error, err, sizeof err);
 *     cli_mcp_run_calls(set, assistant_msg, messages, &opts);            // or all calls of an answer
 *     cli_mcp_set_free(set);                                             // servers stopped, reaped */
#ifndef TERN_CLI_MCP_H
#define TERN_CLI_MCP_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The protocol version tern asks for, and the older ones it accepts when a server answers with
 * one of them (tern uses only initialize, tools/list and tools/call, alike in all of them). */
#define CLI_MCP_PROTOCOL_VERSION "2025-11-25"

/* ---- one server ---- */
struct cli_mcp;

/* Start the server: cmdline is split into words as the shell splits them (quotes, backslashes;
 * no command substitution, no pipes or redirections), the program looked up in PATH. Then the
 * initialize handshake (protocolVersion, clientInfo {"tern", version}, capabilities {}) and the
 * notifications/initialized notification. Every request waits at most timeout_ms. On failure
 * returns false with err naming the server and the cause, and leaves no process behind. *out is
 * freed by cli_mcp_stop. */
bool cli_mcp_start(const char *cmdline, int timeout_ms, struct cli_mcp **out, char *err, size_t errlen);
/* The server's name for messages: serverInfo.name from initialize, else the program's name. */
const char *cli_mcp_name(const struct cli_mcp *m);
/* tools/list, following nextCursor to the last page: *tools = a new array of the MCP tool
 * objects ({name, description, inputSchema, ...}; caller frees with cJSON_Delete). */
bool cli_mcp_list_tools(struct cli_mcp *m, cJSON **tools, char *err, size_t errlen);
/* tools/call {name, arguments}: *text (malloc'ed, caller frees) = the result's content as text
 * (text items joined by newlines; other items as a bracketed note; structuredContent as JSON
 * when there is no content), *is_error = the result's isError. A JSON-RPC error, a timeout or
 * a dead server returns false with err. */
bool cli_mcp_call(struct cli_mcp *m, const char *name, const cJSON *arguments, char **text, bool *is_error,
                  char *err, size_t errlen);
/* Close stdin, wait up to 2 s for the server to exit, then SIGTERM (1 s), then SIGKILL; reap it
 * and free m. NULL is a no-op. */
void cli_mcp_stop(struct cli_mcp *m);

/* ---- the set of servers of one chat, and their tools ---- */
struct cli_mcp_set;

bool cli_mcp_set_create(struct cli_mcp_set **out);
/* Start a server (cli_mcp_start) and add its tools. A tool whose name breaks the rule of tool
 * names (^[a-zA-Z0-9_-]{1,64}$, what every call format can write and read back) is left out
 * with a warning on stderr; a name another server already offers is refused (false, err names
 * both servers): a call must reach one server. */
bool cli_mcp_set_add(struct cli_mcp_set *s, const char *cmdline, int timeout_ms, char *err, size_t errlen);
/* All the servers' tools as an OpenAI tools array ({"type": "function", "function": {name,
 * description, parameters}}), owned by s; NULL when there are none. */
const cJSON *cli_mcp_set_tools(const struct cli_mcp_set *s);
/* The server offering tool name, or NULL (not an MCP tool). */
struct cli_mcp *cli_mcp_set_owner(const struct cli_mcp_set *s, const char *name);
/* Run the tool calls of an assistant message (OpenAI shape: tool_calls[].id, .function.name,
 * .function.arguments as an object) and append one tool message per call to messages, in order
 * ({"role": "tool", "tool_call_id", "name", "content"}). Unless opts->yes, each call is shown on
 * stderr and the user asked (y/n) on the terminal (stdin when it is one, else /dev/tty; with no
 * terminal the call is declined, saying --yes runs calls without asking). A declined call, a
 * tool the servers do not offer, a failed request (JSON-RPC error, timeout, dead server) or a
 * result with isError reaches the model as a tool message starting "Error: ", and is reported
 * on stderr naming the server. Results are shown on stderr, or as {"turn", "tool_result":
 * {tool_call_id, name, content, is_error}} lines on out with opts->json. Returns the calls run. */
struct cli_mcp_run_opts {
    bool yes;      /* --yes: run calls without asking */
    bool json;     /* results as JSON lines on out */
    int turn;      /* the answer that made the calls, for the JSON lines */
    FILE *out;     /* stdout */
};
int cli_mcp_run_calls(const struct cli_mcp_set *s, const cJSON *assistant, cJSON *messages,
                      const struct cli_mcp_run_opts *opts);
/* Stop every server (cli_mcp_stop) and free s. NULL is a no-op. */
void cli_mcp_set_free(struct cli_mcp_set *s);

#endif

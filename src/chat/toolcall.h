/* toolcall.h — internals of the streaming tool-call parser (public API: include/tern.h,
 * "tool calls in model output").
 *
 * Read toolcall.c's opening comment for the state machine. The parser keeps every byte it has
 * not yet classified in `pending` (a possible tag prefix, or a call being received); content
 * goes to `text`, finished calls to `calls`, malformed calls to `errors` (their raw bytes to
 * `text`). Nothing is ever dropped except the markup and JSON of valid calls: with no valid
 * call the content is the input byte for byte (tests/fuzz/fuzz_toolcall.c checks this). */
#ifndef TERN_CHAT_TOOLCALL_H
#define TERN_CHAT_TOOLCALL_H

#include <stdbool.h>
#include <stddef.h>

#include "tern.h"

/* calls and errors are capped so a runaway generation cannot grow them without bound */
#define TOOLCALL_MAX_CALLS 1024
#define TOOLCALL_MAX_BYTES (1u << 20) /* one call's JSON */
#define TOOLCALL_MAX_GROUP (4u << 20) /* one Mistral [TOOL_CALLS][...] list */
#define TOOLCALL_MAX_DEPTH 64         /* JSON nesting inside one call */

struct toolcall_buf {
    char *p;
    size_t n, cap;
};

/* a malformed entry of a Mistral list, pending[start..end) */
struct toolcall_seg {
    size_t start, end;
};

struct tern_toolcall_parser {
    enum tern_toolcall_format fmt;
    int state;
    bool finished;
    bool oom;
    struct toolcall_buf pending; /* undecided bytes; pending.p[0] is at stream offset pending_off */
    size_t pending_off;
    struct toolcall_buf text;    /* content */
    struct tern_toolcall *calls;
    int n_calls, cap_calls;
    char **errors;
    int n_errors, cap_errors;
    /* incremental JSON scan of pending[json_start ..] */
    size_t scan, json_start;
    char stack[TOOLCALL_MAX_DEPTH];
    int depth;
    bool in_str, esc;
    int json_owner; /* state that started the JSON scan (Llama 3 reply start is lenient) */
    int completed; /* calls completed during the current feed */
    size_t dropped; /* input bytes consumed without becoming content: the markup and JSON of
                       valid calls (content length + dropped = bytes fed, the fuzz target checks) */
    /* Llama 3: pending[0..markup) is the markup before the JSON being read (separators,
     * <|python_tag|>): dropped with a valid call, content otherwise */
    size_t markup;
    /* Mistral: a [TOOL_CALLS][...] list is held in pending until it ends; with no valid call
     * it is all content, else only its malformed entries (segs) are */
    int group_valid;
    struct toolcall_seg *segs;
    int n_segs, cap_segs;
};

/* The result of checking one call's JSON text. */
enum toolcall_verdict { TC_CALL, TC_NOT_A_CALL, TC_BAD };
/* Parse json[0..n) into *call (strings malloc'ed) or explain in why[why_n]. */
enum toolcall_verdict toolcall_decode(const char *json, size_t n, struct tern_toolcall *call,
                                      char *why, size_t why_n);

#endif

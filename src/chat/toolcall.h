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

/* The reasoning stage in front of the tool-call machine (toolcall_reason.c): it sees every
 * byte fed, keeps reasoning in `text` and passes the rest on as content. */
struct toolcall_reason {
    int fmt;                  /* enum tern_reasoning_format; NONE = the stage is off */
    int state;                /* RS_* in toolcall_reason.c */
    struct toolcall_buf hold; /* undecided bytes: a possible tag, whitespace, a split character */
    struct toolcall_buf text; /* the reasoning */
    bool join;                /* a later block opened: "\n" goes before its first text */
};

struct tern_toolcall_parser {
    enum tern_toolcall_format fmt;
    bool fed;                    /* a feed happened: options can no longer change */
    struct toolcall_reason rs;
    struct cJSON *tools;         /* tern_toolcall_set_tools, or NULL */
    int state;
    bool finished;
    bool cut;                    /* tern_toolcall_finish_cut: an open call at the end is dropped */
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
    bool group_cut;              /* the list being ended was left open by a cut: drop it */
    struct toolcall_seg *segs;
    int n_segs, cap_segs;
};

bool toolcall_buf_add(struct tern_toolcall_parser *p, struct toolcall_buf *b, const char *s, size_t n);
/* Reasoning stage: take piece[0..n) (eof: the end), append what is content to p->pending. */
void toolcall_reason_feed(struct tern_toolcall_parser *p, const char *piece, size_t n, bool eof);

/* The result of checking one call's JSON text. */
enum toolcall_verdict { TC_CALL, TC_NOT_A_CALL, TC_BAD };
/* Parse json[0..n) into *call (strings malloc'ed) or explain in why[why_n]. */
enum toolcall_verdict toolcall_decode(const char *json, size_t n, struct tern_toolcall *call,
                                      char *why, size_t why_n);

/* Bodies of the formats that are not JSON (toolcall_formats.c), same contract as
 * toolcall_decode: body[0..n) is what stands between the call's opening and closing markup.
 * tools (may be NULL) types Qwen XML parameter values. */
enum toolcall_verdict toolcall_decode_xml(const char *body, size_t n, const struct cJSON *tools,
                                          struct tern_toolcall *call, char *why, size_t why_n);
enum toolcall_verdict toolcall_decode_gemma4(const char *body, size_t n, struct tern_toolcall *call,
                                             char *why, size_t why_n);

/* What a streaming stage holds back at the end of s[0..n): the longest tail that is a proper
 * prefix of tag (it could grow into the tag), and the bytes of an unfinished UTF-8 character.
 * Shared by the tool-call machine (toolcall.c) and the reasoning stage (toolcall_reason.c). */
size_t toolcall_tag_prefix_tail(const char *s, size_t n, const char *tag);
size_t toolcall_utf8_tail(const char *s, size_t n);

#endif

/* toolcall_reason.c — reasoning ("thinking") taken apart from the answer, in front of the
 * tool-call machine of toolcall.c (include/tern.h "reasoning"; the parser struct: toolcall.h).
 *
 * Every fed byte passes through this stage first. States:
 *   RS_START  the reply's first non-blank bytes decide: the opening tag (<think>, or Gemma 4's
 *             <|channel>thought) starts reasoning, anything else makes the rest content;
 *   RS_IN     reasoning until the closing tag; leading blanks are dropped, trailing blanks held
 *             back until something other than the closing tag follows them;
 *   RS_AFTER  blanks after the closing tag are dropped (llama.cpp's deepseek format does so);
 *   RS_TEXT   content: passed on to the tool-call machine (p->pending). For Gemma 4 the opening
 *             tag is watched for here too (its tags are control tokens that never occur in
 *             text, and the model may open a thought block again later).
 * Bytes are decided as soon as they can be; a possible tag prefix or an unfinished UTF-8
 * character is held (streamed reasoning deltas stay whole characters). Tags and dropped blanks
 * count in p->dropped, so content + reasoning + dropped = bytes fed (fuzz_toolcall checks). */
#include <string.h>

#include "chat/toolcall.h"
#include "util/error.h"

enum { RS_START, RS_IN, RS_AFTER, RS_TEXT };

static const char *open_tag(int f) { return f == TERN_REASONING_GEMMA4 ? "<|channel>thought" : "<think>"; }
static const char *close_tag(int f) { return f == TERN_REASONING_GEMMA4 ? "<channel|>" : "</think>"; }

enum tern_reasoning_format tern_reasoning_detect(const char *src)
{
    if (!src) return TERN_REASONING_NONE;
    if (strstr(src, "<|channel>thought")) return TERN_REASONING_GEMMA4;
    if (strstr(src, "<think>") && strstr(src, "</think>")) return TERN_REASONING_THINK;
    return TERN_REASONING_NONE;
}

const char *tern_reasoning_format_name(enum tern_reasoning_format f)
{
    switch (f) {
    case TERN_REASONING_NONE: return "none";
    case TERN_REASONING_THINK: return "think";
    case TERN_REASONING_GEMMA4: return "gemma4";
    }
    return "unknown";
}

static bool blank(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

bool tern_reasoning_open_at_end(enum tern_reasoning_format f, const char *prompt, size_t len)
{
    if (f == TERN_REASONING_NONE || !prompt) return false;
    while (len > 0 && blank(prompt[len - 1])) len--;
    const char *t = open_tag(f);
    size_t tl = strlen(t);
    return len >= tl && !memcmp(prompt + len - tl, t, tl);
}

tern_status tern_toolcall_set_reasoning(struct tern_toolcall_parser *p, enum tern_reasoning_format f,
                                        bool starts_open)
{
    if (!p) return tern_fail(TERN_ERR_ARG, "tern_toolcall_set_reasoning: NULL parser");
    if ((int)f < TERN_REASONING_NONE || f > TERN_REASONING_GEMMA4)
        return tern_fail(TERN_ERR_ARG, "unknown reasoning format %d", (int)f);
    if (p->fed) return tern_fail(TERN_ERR_ARG, "tern_toolcall_set_reasoning: call it before the first feed");
    p->rs.fmt = f;
    p->rs.state = f != TERN_REASONING_NONE && starts_open ? RS_IN : RS_START;
    return TERN_OK;
}

const char *tern_toolcall_reasoning(const struct tern_toolcall_parser *p, size_t *len)
{
    if (len) *len = p->rs.text.n;
    return p->rs.text.p ? p->rs.text.p : "";
}

/* hold[0..k) leaves the window */
static void shift(struct toolcall_reason *r, size_t k)
{
    memmove(r->hold.p, r->hold.p + k, r->hold.n - k);
    r->hold.n -= k;
    r->hold.p[r->hold.n] = '\0';
}

static void to_content(struct tern_toolcall_parser *p, size_t k)
{
    toolcall_buf_add(p, &p->pending, p->rs.hold.p, k);
    shift(&p->rs, k);
}

static void drop(struct tern_toolcall_parser *p, size_t k)
{
    p->dropped += k;
    shift(&p->rs, k);
}

/* hold[0..k) is reasoning: blanks at its very start are dropped */
static void to_reasoning(struct tern_toolcall_parser *p, size_t k)
{
    size_t i = 0;
    if (p->rs.text.n == 0 || p->rs.join)
        while (i < k && blank(p->rs.hold.p[i])) i++;
    drop(p, i);
    if (p->rs.join && k > i) { /* a later block joins the first on a new line (not fed: not counted) */
        toolcall_buf_add(p, &p->rs.text, "\n", 1);
        p->dropped--;
        p->rs.join = false;
    }
    toolcall_buf_add(p, &p->rs.text, p->rs.hold.p, k - i);
    shift(&p->rs, k - i);
}

static const char *find(const char *h, size_t hn, const char *t)
{
    size_t tl = strlen(t);
    for (size_t i = 0; i + tl <= hn; i++)
        if (h[i] == t[0] && !memcmp(h + i, t, tl)) return h + i;
    return NULL;
}

static void run(struct tern_toolcall_parser *p, bool eof)
{
    struct toolcall_reason *r = &p->rs;
    const char *ot = open_tag(r->fmt), *ct = close_tag(r->fmt);
    for (int guard = 0; guard < 64 && !p->oom; guard++) {
        const char *s = r->hold.p;
        size_t n = r->hold.n;
        switch (r->state) {
        case RS_START: {
            size_t i = 0;
            while (i < n && blank(s[i])) i++;
            size_t rem = n - i, tl = strlen(ot);
            if (rem >= tl && !memcmp(s + i, ot, tl)) {
                drop(p, i + tl);
                r->state = RS_IN;
                continue;
            }
            if (!eof && (rem == 0 || (rem < tl && !memcmp(s + i, ot, rem)))) return; /* may still open */
            r->state = RS_TEXT;
            continue;
        }
        case RS_IN: {
            const char *hit = find(s, n, ct);
            if (hit) {
                size_t k = (size_t)(hit - s), e = k;
                while (e > 0 && blank(s[e - 1])) e--;
                to_reasoning(p, e);
                drop(p, k - e + strlen(ct));
                r->state = RS_AFTER;
                continue;
            }
            size_t keep = 0;
            if (!eof) {
                keep = toolcall_tag_prefix_tail(s, n, ct);
                size_t u = toolcall_utf8_tail(s, n);
                if (u > keep) keep = u;
            }
            size_t e = n - keep;
            while (e > 0 && blank(s[e - 1])) e--; /* may end the reasoning: held */
            to_reasoning(p, e);
            if (eof) drop(p, r->hold.n);
            return;
        }
        case RS_AFTER: {
            size_t i = 0;
            while (i < n && blank(s[i])) i++;
            drop(p, i);
            if (i < n || eof) {
                r->state = RS_TEXT;
                continue;
            }
            return;
        }
        case RS_TEXT: {
            if (r->fmt == TERN_REASONING_GEMMA4) {
                const char *hit = find(s, n, ot);
                if (hit) {
                    to_content(p, (size_t)(hit - s));
                    drop(p, strlen(ot));
                    r->join = r->text.n > 0;
                    r->state = RS_IN;
                    continue;
                }
                size_t keep = eof ? 0 : toolcall_tag_prefix_tail(s, n, ot);
                to_content(p, n - keep);
                return;
            }
            to_content(p, n);
            return;
        }
        }
        return;
    }
}

void toolcall_reason_feed(struct tern_toolcall_parser *p, const char *piece, size_t n, bool eof)
{
    if (p->rs.fmt == TERN_REASONING_NONE) {
        toolcall_buf_add(p, &p->pending, piece, n);
        return;
    }
    if (!toolcall_buf_add(p, &p->rs.hold, piece, n)) return;
    run(p, eof);
}

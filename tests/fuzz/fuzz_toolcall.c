/* fuzz_toolcall.c — fuzz target for the streaming tool-call parser (scripts/fuzz.sh; replayed by
 * ctest).
 *
 * Input: byte 0 picks the format (its low 3 bits: none, hermes, llama3, mistral, qwen-xml,
 * gemma4, granite, none) and the reasoning stage (bits 3-4: off, <think>, <think> opened by the
 * prompt, Gemma 4 channels) and seeds the split points; the rest is generated text. It is fed whole, one byte at a time (inputs up to
 * 4 KB), and cut at pseudo-random points, and each run must give the same content, calls and
 * errors (the parser promises any split gives the same result). Then the parser's promises on
 * the bytes themselves (toolcall.h): nothing is lost or duplicated (content + reasoning + the
 * markup and JSON of valid calls = the input, counted by the parser's own `dropped`), content
 * is the input with spans removed (a subsequence), with no valid call and no reasoning stage
 * the content is the input exactly, and
 * every call has a non-empty name and a JSON-object argument text. Any broken promise aborts.
 * Seeds: tests/fuzz/corpus/toolcall (the test_toolcall cases and rendered template calls). */
#include "chat/toolcall.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                             \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            fprintf(stderr, "fuzz_toolcall: broken promise: %s (line %d)\n", #cond, __LINE__); \
            abort();                                                                            \
        }                                                                                       \
    } while (0)

/* Feed text cut at cuts[0..n_cuts) and finish; NULL only on out-of-memory. */
static int g_reasoning; /* 0 off, 1 think, 2 think opened by the prompt, 3 gemma4 */

static struct tern_toolcall_parser *run(enum tern_toolcall_format f, const char *text, size_t n,
                                        const size_t *cuts, int n_cuts)
{
    struct tern_toolcall_parser *p;
    if (tern_toolcall_parser_create(f, &p) != TERN_OK) return NULL;
    static const enum tern_reasoning_format rf[] = {TERN_REASONING_NONE, TERN_REASONING_THINK,
                                                    TERN_REASONING_THINK, TERN_REASONING_GEMMA4};
    CHECK(tern_toolcall_set_reasoning(p, rf[g_reasoning], g_reasoning == 2) == TERN_OK);
    size_t prev = 0;
    int seen = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        int done;
        if (tern_toolcall_feed(p, text + prev, end - prev, &done) != TERN_OK) {
            tern_toolcall_parser_free(p);
            return NULL;
        }
        seen += done;
        CHECK(seen == tern_toolcall_count(p)); /* every completed call is announced once */
        prev = end;
    }
    int done;
    if (tern_toolcall_finish(p, &done) != TERN_OK) {
        tern_toolcall_parser_free(p);
        return NULL;
    }
    CHECK(seen + done == tern_toolcall_count(p));
    return p;
}

static bool same_str(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

static void check_same(const struct tern_toolcall_parser *a, const struct tern_toolcall_parser *b)
{
    size_t la, lb;
    const char *ta = tern_toolcall_text(a, &la), *tb = tern_toolcall_text(b, &lb);
    CHECK(la == lb && !memcmp(ta, tb, la));
    ta = tern_toolcall_reasoning(a, &la);
    tb = tern_toolcall_reasoning(b, &lb);
    CHECK(la == lb && !memcmp(ta, tb, la));
    CHECK(tern_toolcall_count(a) == tern_toolcall_count(b));
    for (int i = 0; i < tern_toolcall_count(a); i++) {
        const struct tern_toolcall *x = tern_toolcall_get(a, i), *y = tern_toolcall_get(b, i);
        CHECK(same_str(x->name, y->name) && same_str(x->arguments, y->arguments) && same_str(x->id, y->id));
    }
    CHECK(tern_toolcall_n_errors(a) == tern_toolcall_n_errors(b));
    for (int i = 0; i < tern_toolcall_n_errors(a); i++)
        CHECK(!strcmp(tern_toolcall_error(a, i), tern_toolcall_error(b, i)));
}

static void check_promises(const struct tern_toolcall_parser *p, const char *in, size_t n)
{
    size_t tl;
    const char *t = tern_toolcall_text(p, &tl);
    CHECK(t[tl] == '\0');
    size_t rl;
    const char *r = tern_toolcall_reasoning(p, &rl);
    CHECK(r[rl] == '\0');
    CHECK(g_reasoning || rl == 0);
    CHECK(tl + rl + p->dropped == n); /* conservation: no byte lost, none duplicated */
    size_t j = 0;                /* content is the input with spans removed */
    for (size_t i = 0; i < n && j < tl; i++)
        if (in[i] == t[j]) j++;
    CHECK(j == tl);
    if (tern_toolcall_count(p) == 0 && !g_reasoning) CHECK(tl == n && !memcmp(t, in, n));
    for (int i = 0; i < tern_toolcall_count(p); i++) {
        const struct tern_toolcall *c = tern_toolcall_get(p, i);
        CHECK(c->name && c->name[0] && c->arguments);
        cJSON *args = cJSON_Parse(c->arguments);
        CHECK(cJSON_IsObject(args));
        cJSON_Delete(args);
    }
    for (int i = 0; i < tern_toolcall_n_errors(p); i++) {
        const char *e = strstr(tern_toolcall_error(p, i), "at byte ");
        CHECK(e && strtoull(e + 8, NULL, 10) <= n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    enum tern_toolcall_format f = (enum tern_toolcall_format)((data[0] & 7) == 7 ? 0 : data[0] & 7);
    g_reasoning = (data[0] >> 3) & 3;
    uint64_t x = 0x9e3779b97f4a7c15ull ^ data[0];
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    struct tern_toolcall_parser *whole = run(f, text, n, NULL, 0);
    if (!whole) return 0;
    check_promises(whole, text, n);
    size_t cuts[64];
    for (int round = 0; round < 4 && n > 1; round++) {
        int k = 0;
        size_t last = 0;
        while (k < 64) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            size_t step = 1 + (size_t)((x >> 33) % (round < 2 ? 7 : 40));
            if (last + step >= n) break;
            last += step;
            cuts[k++] = last;
        }
        struct tern_toolcall_parser *p = run(f, text, n, cuts, k);
        if (p) check_same(whole, p);
        tern_toolcall_parser_free(p);
    }
    if (n > 1 && n <= 4096) {
        size_t *all = malloc(n * sizeof *all);
        if (all) {
            for (size_t i = 0; i + 1 < n; i++) all[i] = i + 1;
            struct tern_toolcall_parser *p = run(f, text, n, all, (int)n - 1);
            if (p) check_same(whole, p);
            tern_toolcall_parser_free(p);
            free(all);
        }
    }
    tern_toolcall_parser_free(whole);
    return 0;
}

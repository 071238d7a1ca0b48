/* corpus_util.c — small tools of the corpus generator (corpus.h): "a|b|c" alternatives, a
 * growable buffer, Python-style JSON printing, the civil calendar, numbers in words, and the
 * prompt text of a conversation (shared with the tokenizer trainer, bpe_train.c).
 *
 * corpus_json_py prints what json.dumps(ensure_ascii=False) prints, because that is what the chat
 * templates' tojson filter emits (src/chat/tmpl_value.c does the same for the renderer): the
 * tokenizer should learn the byte sequences a model will actually see. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corpus/corpus.h"
#include "util/error.h"

uint64_t corpus_hash(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* ------------------------------------------------------------------ alternatives */

int corpus_alt_count(const char *alts)
{
    int n = 1;
    for (const char *p = alts; *p; p++) n += *p == '|';
    return n;
}

const char *corpus_alt(const char *alts, int k, char *out, size_t cap)
{
    const char *p = alts;
    while (k > 0 && *p) {
        if (*p++ == '|') k--;
    }
    const char *e = strchr(p, '|');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n >= cap) n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

const char *corpus_pick(struct corpus_rng *r, const char *alts, char *out, size_t cap)
{
    return corpus_alt(alts, (int)corpus_below(r, (uint32_t)corpus_alt_count(alts)), out, cap);
}

int corpus_alt_find(const char *alts, const char *s)
{
    size_t n = strlen(s);
    int k = 0;
    for (const char *p = alts;; k++) {
        const char *e = strchr(p, '|');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == n && !memcmp(p, s, n)) return k;
        if (!e) return -1;
        p = e + 1;
    }
}

/* ------------------------------------------------------------------ buffer */

void corpus_buf_add(struct corpus_buf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

void corpus_buf_puts(struct corpus_buf *b, const char *s) { corpus_buf_add(b, s, strlen(s)); }

void corpus_buf_printf(struct corpus_buf *b, const char *fmt, ...)
{
    char tmp[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        corpus_buf_add(b, tmp, (size_t)n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) {
        b->oom = true;
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    corpus_buf_add(b, big, (size_t)n);
    free(big);
}

void corpus_buf_free(struct corpus_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
    b->oom = false;
}

void corpus_fmt(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
}

void corpus_capitalize(char *s)
{
    if (s[0] >= 'a' && s[0] <= 'z') s[0] = (char)(s[0] - 32);
}

/* ------------------------------------------------------------------ JSON, Python style */

static void json_py_str(const char *s, struct corpus_buf *b)
{
    corpus_buf_add(b, "\"", 1);
    size_t run = 0;
    const char *start = s;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        const char *esc = NULL;
        char u[8];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", c);
                esc = u;
            }
        }
        if (!esc) {
            run++;
            continue;
        }
        corpus_buf_add(b, start, run);
        corpus_buf_puts(b, esc);
        start = p + 1;
        run = 0;
    }
    corpus_buf_add(b, start, run);
    corpus_buf_add(b, "\"", 1);
}

static void json_py_num(double v, struct corpus_buf *b)
{
    char t[40];
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(t, sizeof t, "%.0f", v); /* an integral JSON number parses as a Python int */
    } else {
        snprintf(t, sizeof t, "%.15g", v); /* repr(): shortest text that reads back the same */
        if (strtod(t, NULL) != v) snprintf(t, sizeof t, "%.17g", v);
    }
    corpus_buf_puts(b, t);
}

void corpus_json_py(const cJSON *v, struct corpus_buf *b)
{
    if (!v) {
        corpus_buf_puts(b, "null");
        return;
    }
    if (cJSON_IsNull(v)) corpus_buf_puts(b, "null");
    else if (cJSON_IsTrue(v)) corpus_buf_puts(b, "true");
    else if (cJSON_IsFalse(v)) corpus_buf_puts(b, "false");
    else if (cJSON_IsNumber(v)) json_py_num(v->valuedouble, b);
    else if (cJSON_IsString(v)) json_py_str(v->valuestring, b);
    else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        bool obj = cJSON_IsObject(v);
        corpus_buf_add(b, obj ? "{" : "[", 1);
        int i = 0;
        for (const cJSON *e = v->child; e; e = e->next, i++) {
            if (i) corpus_buf_add(b, ", ", 2);
            if (obj) {
                json_py_str(e->string ? e->string : "", b);
                corpus_buf_add(b, ": ", 2);
            }
            corpus_json_py(e, b);
        }
        corpus_buf_add(b, obj ? "}" : "]", 1);
    }
}

/* ------------------------------------------------------------------ prompt text */

tern_status corpus_conv_text(const cJSON *conv, corpus_piece_fn piece, void *ctx, size_t *total)
{
    if (!cJSON_IsObject(conv)) return tern_fail(TERN_ERR_FORMAT, "$: expected an object");
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(conv, "messages");
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(conv, "tools");
    if (!cJSON_IsArray(msgs)) return tern_fail(TERN_ERR_FORMAT, "$.messages: expected an array");
    if (tools && !cJSON_IsArray(tools) && !cJSON_IsNull(tools))
        return tern_fail(TERN_ERR_FORMAT, "$.tools: expected an array");
    struct corpus_buf b = {0};
    size_t sum = 0;
    int i = 0;
    const cJSON *e;
    if (cJSON_GetArraySize(tools) > 0) {
        piece(ctx, CORPUS_QWEN_TOOLS_HEAD, sizeof CORPUS_QWEN_TOOLS_HEAD - 1);
        piece(ctx, CORPUS_QWEN_TOOLS_TAIL, sizeof CORPUS_QWEN_TOOLS_TAIL - 1);
        sum += sizeof CORPUS_QWEN_TOOLS_HEAD - 1 + sizeof CORPUS_QWEN_TOOLS_TAIL - 1;
        cJSON_ArrayForEach(e, tools) {
            b.n = 0;
            corpus_json_py(e, &b);
            if (b.oom) goto oom;
            piece(ctx, b.p, b.n);
            sum += b.n;
        }
    }
    cJSON_ArrayForEach(e, msgs) {
        if (!cJSON_IsObject(e)) {
            corpus_buf_free(&b);
            return tern_fail(TERN_ERR_FORMAT, "$.messages[%d]: expected an object", i);
        }
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (cJSON_IsString(content) && content->valuestring[0]) {
            size_t n = strlen(content->valuestring);
            piece(ctx, content->valuestring, n);
            sum += n;
        } else if (content && !cJSON_IsString(content) && !cJSON_IsNull(content)) {
            corpus_buf_free(&b);
            return tern_fail(TERN_ERR_FORMAT, "$.messages[%d].content: expected a string or null", i);
        }
        const cJSON *calls = cJSON_GetObjectItemCaseSensitive(e, "tool_calls");
        if (calls && !cJSON_IsArray(calls) && !cJSON_IsNull(calls)) {
            corpus_buf_free(&b);
            return tern_fail(TERN_ERR_FORMAT, "$.messages[%d].tool_calls: expected an array", i);
        }
        int j = 0;
        const cJSON *call;
        cJSON_ArrayForEach(call, calls) {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(call, "function");
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
            if (!cJSON_IsString(name)) {
                corpus_buf_free(&b);
                return tern_fail(TERN_ERR_FORMAT,
                                 "$.messages[%d].tool_calls[%d].function.name: expected a string", i, j);
            }
            cJSON *parsed = NULL;
            if (cJSON_IsString(args)) {
                parsed = cJSON_Parse(args->valuestring);
                if (!parsed) {
                    corpus_buf_free(&b);
                    return tern_fail(TERN_ERR_FORMAT,
                                     "$.messages[%d].tool_calls[%d].function.arguments: not JSON text",
                                     i, j);
                }
                args = parsed;
            }
            b.n = 0;
            corpus_buf_puts(&b, "{\"name\": ");
            corpus_json_py(name, &b);
            corpus_buf_puts(&b, ", \"arguments\": ");
            corpus_json_py(args ? args : NULL, &b);
            corpus_buf_puts(&b, "}");
            cJSON_Delete(parsed);
            if (b.oom) goto oom;
            piece(ctx, b.p, b.n);
            sum += b.n;
            j++;
        }
        i++;
    }
    corpus_buf_free(&b);
    if (total) *total = sum;
    return TERN_OK;
oom:
    corpus_buf_free(&b);
    return tern_fail(TERN_ERR_NOMEM, "corpus: conversation text");
}

/* ------------------------------------------------------------------ calendar */

const char *const corpus_month_names[12] = {"January", "February", "March", "April", "May", "June",
                                            "July", "August", "September", "October", "November",
                                            "December"};
const char *const corpus_weekday_names[7] = {"Monday", "Tuesday", "Wednesday", "Thursday",
                                             "Friday", "Saturday", "Sunday"};

/* Days since 1970-01-01 (Howard Hinnant's days_from_civil). */
int64_t corpus_days_from_civil(struct corpus_date dt)
{
    int64_t y = dt.y - (dt.m <= 2);
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t mp = (dt.m + 9) % 12;
    int64_t doy = (153 * mp + 2) / 5 + dt.d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

struct corpus_date corpus_civil_from_days(int64_t z)
{
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    int64_t doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    int64_t mp = (5 * doy + 2) / 153;
    struct corpus_date r;
    r.d = (int)(doy - (153 * mp + 2) / 5 + 1);
    r.m = (int)(mp < 10 ? mp + 3 : mp - 9);
    r.y = (int)(yoe + era * 400 + (r.m <= 2));
    return r;
}

int corpus_weekday(struct corpus_date dt)
{
    int64_t z = corpus_days_from_civil(dt); /* 1970-01-01 was a Thursday (3) */
    return (int)(((z % 7) + 7 + 3) % 7);
}

struct corpus_date corpus_date_add(struct corpus_date dt, int days)
{
    return corpus_civil_from_days(corpus_days_from_civil(dt) + days);
}

/* ------------------------------------------------------------------ numbers */

static const char *const ones[20] = {"zero", "one", "two", "three", "four", "five", "six",
                                     "seven", "eight", "nine", "ten", "eleven", "twelve",
                                     "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
                                     "eighteen", "nineteen"};
static const char *const tens[10] = {"", "", "twenty", "thirty", "forty", "fifty", "sixty",
                                     "seventy", "eighty", "ninety"};

static void words_below_1000(int n, struct corpus_buf *b)
{
    if (n >= 100) {
        corpus_buf_printf(b, "%s hundred", ones[n / 100]);
        n %= 100;
        if (!n) return;
        corpus_buf_puts(b, " ");
    }
    if (n < 20) corpus_buf_puts(b, ones[n]);
    else if (n % 10) corpus_buf_printf(b, "%s-%s", tens[n / 10], ones[n % 10]);
    else corpus_buf_puts(b, tens[n / 10]);
}

void corpus_number_words(int n, char *out, size_t cap)
{
    struct corpus_buf b = {0};
    if (n < 0 || n > 999999) n = 0;
    if (n >= 1000) {
        words_below_1000(n / 1000, &b);
        corpus_buf_puts(&b, " thousand");
        n %= 1000;
        if (n) {
            corpus_buf_puts(&b, " ");
            words_below_1000(n, &b);
        }
    } else {
        words_below_1000(n, &b);
    }
    corpus_fmt(out, cap, "%s", b.p ? b.p : "zero");
    corpus_buf_free(&b);
}

double corpus_round2(double v)
{
    return round(v * 100.0) / 100.0;
}

void corpus_money_text(double v, bool force_cents, char *out, size_t cap)
{
    long long cents = llround(fabs(v) * 100.0);
    long long whole = cents / 100;
    char digits[32], grouped[48];
    snprintf(digits, sizeof digits, "%lld", whole);
    size_t n = strlen(digits), k = 0;
    for (size_t i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0) grouped[k++] = ',';
        grouped[k++] = digits[i];
    }
    grouped[k] = '\0';
    if (cents % 100 || force_cents)
        corpus_fmt(out, cap, "%s%s.%02lld", v < 0 ? "-" : "", grouped, cents % 100);
    else
        corpus_fmt(out, cap, "%s%s", v < 0 ? "-" : "", grouped);
}

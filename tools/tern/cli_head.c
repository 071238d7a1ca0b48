/* cli_head.c — the token ids a drafter's pruned output head keeps (`tern quantize --head-ids`,
 * `--head-data`): read from a list, or chosen from conversations: the tokens the answers are
 * made of, most frequent first, then the other tokens of the conversations (a request's values,
 * which answers copy), most frequent first, up to the size asked.
 *
 * A drafter only earns its keep when a draft step costs a small part of a target step; with a
 * 150k-token vocabulary the output head alone can be a third of a small model's weights, so a
 * drafter that keeps the 16k tokens answers are made of reads a tenth of that head
 * (docs/speculative.md "Pruned heads"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_head.h"
#include "cli_train.h"
#include "tern_train.h"
#include "util/error.h"

static int cmp_i32(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

tern_status cli_head_ids_read(const char *path, int32_t **ids, int *n)
{
    *ids = NULL;
    *n = 0;
    size_t len;
    char *text = cli_read_file(path, &len);
    if (!text) return tern_fail(TERN_ERR_IO, "%s: cannot read the head's token ids", path);
    int32_t *v = NULL;
    int cnt = 0, cap = 0;
    tern_status st = TERN_OK;
    /* integers separated by white space or commas, optionally inside one JSON array */
    for (char *p = text; !st && *p;) {
        if (strchr(" \t\r\n,[]", *p)) {
            p++;
            continue;
        }
        char *end;
        errno = 0;
        const long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX) {
            st = tern_fail(TERN_ERR_FORMAT, "%s: byte %zu: expected a token id (an integer >= 0)",
                           path, (size_t)(p - text));
            break;
        }
        if (cnt == cap) {
            cap = cap ? 2 * cap : 1024;
            int32_t *nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv) {
                st = tern_fail(TERN_ERR_NOMEM, "%s: out of memory", path);
                break;
            }
            v = nv;
        }
        v[cnt++] = (int32_t)x;
        p = end;
    }
    free(text);
    if (!st && cnt == 0) st = tern_fail(TERN_ERR_FORMAT, "%s: holds no token id", path);
    if (st) {
        free(v);
        return st;
    }
    qsort(v, (size_t)cnt, sizeof *v, cmp_i32);
    int u = 0; /* a list may repeat an id: kept once */
    for (int i = 0; i < cnt; i++)
        if (u == 0 || v[i] != v[u - 1]) v[u++] = v[i];
    *ids = v;
    *n = u;
    return TERN_OK;
}

struct id_count {
    int32_t id;
    uint64_t count; /* at the positions trained on */
    uint64_t seen;  /* anywhere in the conversations */
};

/* Tokens of the answers first, the most frequent first; then the rest of the conversations'
 * tokens (values a request gives that an answer may copy), the most frequent first. */
static int by_count_desc(const void *a, const void *b)
{
    const struct id_count *x = a, *y = b;
    if (x->count != y->count) return x->count < y->count ? 1 : -1;
    if (x->seen != y->seen) return x->seen < y->seen ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id); /* ties: the lower id */
}

tern_status cli_head_ids_from_data(const char *model, const char *data, const char *template_file,
                                   int size, int32_t **ids, int *n, double *coverage)
{
    *ids = NULL;
    *n = 0;
    struct tern_train_data *d = NULL;
    tern_status st = cli_train_load_data_tmpl("quantize", data, model, template_file, 0, false,
                                              false, false, NULL, &d);
    if (st) return st;
    const uint8_t *mask;
    const int32_t *t = tern_train_data_tokens(d, &mask);
    const uint64_t nt = tern_train_data_n_tokens(d);
    int n_ids = 0; /* one counter per id up to the largest the data holds (the tokenizer's) */
    for (uint64_t i = 0; i < nt; i++)
        if (t[i] >= n_ids) n_ids = t[i] + 1;
    struct id_count *c = calloc((size_t)n_ids, sizeof *c);
    if (!c) {
        tern_train_data_free(d);
        return tern_fail(TERN_ERR_NOMEM, "out of memory counting %d tokens", n_ids);
    }
    for (int i = 0; i < n_ids; i++) c[i].id = i;
    uint64_t trained = 0;
    for (uint64_t i = 0; i < nt; i++) {
        c[t[i]].seen++;
        if (mask[i]) {
            c[t[i]].count++;
            trained++;
        }
    }
    tern_train_data_free(d);
    qsort(c, (size_t)n_ids, sizeof *c, by_count_desc);
    int keep = 0;
    uint64_t covered = 0;
    while (keep < size && keep < n_ids && c[keep].seen > 0) covered += c[keep++].count;
    int32_t *v = keep ? malloc((size_t)keep * sizeof *v) : NULL;
    if (!keep) st = tern_fail(TERN_ERR_FORMAT, "%s: no trained token to choose the head from", data);
    else if (!v) st = tern_fail(TERN_ERR_NOMEM, "out of memory");
    for (int i = 0; !st && i < keep; i++) v[i] = c[i].id;
    free(c);
    if (st) {
        free(v);
        return st;
    }
    qsort(v, (size_t)keep, sizeof *v, cmp_i32);
    *ids = v;
    *n = keep;
    *coverage = trained ? (double)covered / (double)trained : 0.0;
    return TERN_OK;
}

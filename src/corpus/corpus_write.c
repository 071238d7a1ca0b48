/* corpus_write.c — tern_corpus_toolcalls_write: the corpus files and their manifest.
 *
 * DIR/train.jsonl, val.jsonl, test.jsonl hold one conversation per line (corpus_convo.c), each
 * written to <name>.tmp and renamed when complete; DIR/manifest.json (also tmp + rename, last)
 * records the seed, size, split sizes, counts per kind and domain, tools used per split and the
 * SHA-256 of every file. Conversation i of a split depends only on (seed, split, i), so the
 * files are byte-identical for the same seed and size on every machine. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "corpus/corpus.h"
#include "util/error.h"

static const char *const split_names[3] = {"train", "val", "test"};

struct tern_corpus_params tern_corpus_default_params(void)
{
    struct tern_corpus_params p = {0};
    p.seed = 1;
    p.size = 60000;
    p.val_percent = 5;
    p.test_percent = 5;
    return p;
}

/* Distinct tool names seen in a split (a few thousand at most). */
struct name_count {
    uint64_t *h;
    size_t cap, n;
};
static bool name_count_add(struct name_count *s, const char *name)
{
    if (s->n * 2 >= s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1024;
        uint64_t *h = calloc(cap, sizeof *h);
        if (!h) return false;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->h[i]) continue;
            size_t j = (size_t)s->h[i] & (cap - 1);
            while (h[j]) j = (j + 1) & (cap - 1);
            h[j] = s->h[i];
        }
        free(s->h);
        s->h = h;
        s->cap = cap;
    }
    uint64_t v = corpus_hash(CORPUS_HASH0, name, strlen(name)) | 1;
    size_t j = (size_t)v & (s->cap - 1);
    while (s->h[j]) {
        if (s->h[j] == v) return true;
        j = (j + 1) & (s->cap - 1);
    }
    s->h[j] = v;
    s->n++;
    return true;
}

static void count_in(cJSON *obj, const char *key)
{
    cJSON *c = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (c) cJSON_SetNumberValue(c, c->valuedouble + 1);
    else cJSON_AddNumberToObject(obj, key, 1);
}

static void hex(const uint8_t *d, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

static tern_status write_split(const struct corpus_pool *pool, uint64_t seed, int split, int64_t n,
                               const char *dir, cJSON *manifest_files, cJSON *kinds, cJSON *domains,
                               cJSON *tools_used, struct tern_corpus_report *rep)
{
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/%s.jsonl", dir, split_names[split]);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return tern_fail(TERN_ERR_IO, "corpus: cannot create %s: %s", tmp, strerror(errno));
    struct sha256_ctx h;
    sha256_init(&h);
    struct name_count names = {0};
    cJSON *k_counts = cJSON_AddObjectToObject(kinds, split_names[split]);
    cJSON *d_counts = cJSON_AddObjectToObject(domains, split_names[split]);
    uint64_t bytes = 0;
    tern_status st = TERN_OK;
    for (int64_t i = 0; i < n && st == TERN_OK; i++) {
        cJSON *conv;
        if ((st = corpus_conversation(pool, seed, split, (uint64_t)i, &conv))) break;
        cJSON *meta = cJSON_GetObjectItemCaseSensitive(conv, "meta");
        count_in(k_counts, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "kind")));
        count_in(d_counts, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(meta, "domain")));
        const cJSON *t;
        cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(conv, "tools")) {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
            if (!name_count_add(&names, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(fn, "name"))))
                st = tern_fail(TERN_ERR_NOMEM, "corpus: tool name set");
        }
        char *line = cJSON_PrintUnformatted(conv);
        cJSON_Delete(conv);
        if (!line) {
            st = tern_fail(TERN_ERR_NOMEM, "corpus: printing conversation %lld", (long long)i);
            break;
        }
        size_t len = strlen(line);
        line[len] = '\n';
        if (fwrite(line, 1, len + 1, f) != len + 1)
            st = tern_fail(TERN_ERR_IO, "corpus: writing %s: %s", tmp, strerror(errno));
        sha256_update(&h, len + 1, (const uint8_t *)line);
        bytes += len + 1;
        free(line);
    }
    free(names.h);
    if (fflush(f) || fsync(fileno(f))) {
        if (!st) st = tern_fail(TERN_ERR_IO, "corpus: writing %s: %s", tmp, strerror(errno));
    }
    if (fclose(f) && !st) st = tern_fail(TERN_ERR_IO, "corpus: closing %s: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path)) st = tern_fail(TERN_ERR_IO, "corpus: renaming %s: %s", tmp, strerror(errno));
    if (st) {
        remove(tmp);
        return st;
    }
    uint8_t dg[SHA256_DIGEST_SIZE];
    char hx[2 * SHA256_DIGEST_SIZE + 1];
    sha256_digest(&h, sizeof dg, dg);
    hex(dg, sizeof dg, hx);
    cJSON *fo = cJSON_AddObjectToObject(manifest_files, split_names[split]);
    char name[32];
    snprintf(name, sizeof name, "%s.jsonl", split_names[split]);
    cJSON_AddStringToObject(fo, "file", name);
    cJSON_AddNumberToObject(fo, "conversations", (double)n);
    cJSON_AddNumberToObject(fo, "bytes", (double)bytes);
    cJSON_AddStringToObject(fo, "sha256", hx);
    cJSON_AddNumberToObject(tools_used, split_names[split], (double)names.n);
    rep->bytes[split] = bytes;
    rep->n_tools_used[split] = (int)names.n;
    return TERN_OK;
}

tern_status tern_corpus_toolcalls_write(const char *dir, const struct tern_corpus_params *params,
                                        struct tern_corpus_report *report)
{
    struct tern_corpus_params p = params ? *params : tern_corpus_default_params();
    if (!dir || !*dir) return tern_fail(TERN_ERR_ARG, "corpus: no output directory");
    if (p.size <= 0) p.size = 60000;
    if (p.val_percent <= 0) p.val_percent = 5;
    if (p.test_percent <= 0) p.test_percent = 5;
    if (p.size < 3 || p.size > 100000000)
        return tern_fail(TERN_ERR_ARG, "corpus: size %lld is outside 3 .. 100000000", (long long)p.size);
    if (p.val_percent + p.test_percent >= 100)
        return tern_fail(TERN_ERR_ARG, "corpus: val %d%% + test %d%% leave nothing to train on", p.val_percent,
                         p.test_percent);
    if (mkdir(dir, 0777) && errno != EEXIST)
        return tern_fail(TERN_ERR_IO, "corpus: cannot create directory %s: %s", dir, strerror(errno));
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) return tern_fail(TERN_ERR_IO, "corpus: %s is not a directory", dir);

    struct tern_corpus_report rep = {0};
    int64_t n_val = p.size * p.val_percent / 100, n_test = p.size * p.test_percent / 100;
    if (n_val < 1) n_val = 1;
    if (n_test < 1) n_test = 1;
    int64_t n[3] = {p.size - n_val - n_test, n_val, n_test};

    struct corpus_pool pool;
    tern_status st = corpus_pool_build(p.seed, &pool);
    if (st) return st;
    const char *doms[64];
    int nd = corpus_domains(doms, 64);

    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "generator", "tern corpus toolcalls");
    cJSON_AddNumberToObject(m, "format_version", 1);
    if (p.seed < (1ull << 53)) cJSON_AddNumberToObject(m, "seed", (double)p.seed);
    else {
        char s[32];
        snprintf(s, sizeof s, "%llu", (unsigned long long)p.seed);
        cJSON_AddStringToObject(m, "seed", s);
    }
    cJSON_AddNumberToObject(m, "size", (double)p.size);
    cJSON *sp = cJSON_AddObjectToObject(m, "split_percent");
    cJSON_AddNumberToObject(sp, "train", 100 - p.val_percent - p.test_percent);
    cJSON_AddNumberToObject(sp, "val", p.val_percent);
    cJSON_AddNumberToObject(sp, "test", p.test_percent);
    cJSON *tools = cJSON_AddObjectToObject(m, "tools");
    cJSON_AddNumberToObject(tools, "templates", corpus_n_tmpls());
    cJSON_AddNumberToObject(tools, "domains", nd);
    cJSON_AddNumberToObject(tools, "pool", pool.n);
    cJSON_AddNumberToObject(tools, "pool_train_val", pool.n - pool.n_test);
    cJSON_AddNumberToObject(tools, "pool_test", pool.n_test);
    cJSON *used = cJSON_AddObjectToObject(tools, "used");
    cJSON *files = cJSON_AddObjectToObject(m, "files");
    cJSON *kinds = cJSON_AddObjectToObject(m, "kinds");
    cJSON *domains = cJSON_AddObjectToObject(m, "domains");
    for (int s = 0; s < 3 && !st; s++) st = write_split(&pool, p.seed, s, n[s], dir, files, kinds, domains, used, &rep);
    rep.n_tools = pool.n;
    rep.n_tools_test = pool.n_test;
    rep.n_domains = nd;
    corpus_pool_free(&pool);
    char *text = st ? NULL : cJSON_Print(m);
    cJSON_Delete(m);
    if (st) return st;
    if (!text) return tern_fail(TERN_ERR_NOMEM, "corpus: manifest");

    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/manifest.json", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    size_t len = strlen(text);
    if (!f) st = tern_fail(TERN_ERR_IO, "corpus: cannot create %s: %s", tmp, strerror(errno));
    else {
        if (fwrite(text, 1, len, f) != len || fputc('\n', f) == EOF || fflush(f) || fsync(fileno(f)))
            st = tern_fail(TERN_ERR_IO, "corpus: writing %s: %s", tmp, strerror(errno));
        if (fclose(f) && !st) st = tern_fail(TERN_ERR_IO, "corpus: closing %s: %s", tmp, strerror(errno));
        if (!st && rename(tmp, path)) st = tern_fail(TERN_ERR_IO, "corpus: renaming %s: %s", tmp, strerror(errno));
        if (st) remove(tmp);
    }
    free(text);
    if (st) return st;
    rep.n_train = n[0];
    rep.n_val = n[1];
    rep.n_test = n[2];
    if (report) *report = rep;
    return TERN_OK;
}

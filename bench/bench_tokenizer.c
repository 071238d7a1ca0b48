/* bench_tokenizer.c — single-thread encoding speed of tern_tokenize per vocabulary and text
 * kind (src/tokenizer room).
 *
 * Text (generated deterministically, no downloads), about 1 MiB per kind by default:
 * - prose: /usr/share/common-licenses/(all) then /usr/share/doc/ * /copyright, concatenated;
 * - code:  /usr/include/ *.h concatenated;
 * - json:  synthesized records (keys, numbers, strings, nesting) from a fixed LCG;
 * - cjk:   synthesized Chinese/Japanese/Korean sentences from fixed character lists.
 * Missing source files are skipped (the kind is then smaller; its size is printed).
 *
 * What is timed: tern_tokenize over the whole text of one kind, flags 0 (no bos, no special
 * parsing), into a caller buffer sized beforehand. Not timed: loading the vocabulary, reading
 * or generating text. "cold" is the first call on a freshly loaded tokenizer (word cache
 * empty); "warm" is the median (with min..max) of the next reps calls, cache kept, which is
 * the steady state of a long-running process. MB = 10^6 bytes of input.
 *
 * Usage: bench_tokenizer [-d FIXTURE_DIR] [-n BYTES_PER_KIND] [-r REPS] [vocab ...]
 *   vocab names as in FIXTURE_DIR/ggml-vocab-<name>.gguf (default: gpt-2 qwen2-tiktoken
 *   llama3-tiktoken llama-spm). */
#include <dirent.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tern.h"
#include "bench_util.h"

struct buf {
    char *p;
    size_t n, cap;
};

static void put(struct buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        if (!b->p) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void puts_(struct buf *b, const char *s) { put(b, s, strlen(s)); }

static void add_files(struct buf *b, const char *pattern, size_t limit)
{
    glob_t g;
    if (glob(pattern, 0, NULL, &g) != 0) return;
    for (size_t i = 0; i < g.gl_pathc && b->n < limit; i++) {
        FILE *f = fopen(g.gl_pathv[i], "rb");
        if (!f) continue;
        char tmp[65536];
        size_t r;
        while ((r = fread(tmp, 1, sizeof tmp, f)) > 0 && b->n < limit)
            put(b, tmp, r < limit - b->n ? r : limit - b->n);
        fclose(f);
    }
    globfree(&g);
}

static uint64_t rng = 0x5eed;
static uint32_t next(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

static void gen_json(struct buf *b, size_t limit)
{
    static const char *const keys[] = {"id", "name", "email", "tags", "score", "active",
                                       "created_at", "items", "price", "description"};
    static const char *const words[] = {"alpha", "beta", "gamma", "delta", "tokenizer", "model",
                                        "weights", "cache", "server", "request", "value"};
    char tmp[256];
    while (b->n < limit) {
        puts_(b, "{\n");
        int nk = 3 + (int)(next() % 6);
        for (int k = 0; k < nk; k++) {
            snprintf(tmp, sizeof tmp, "  \"%s\": ", keys[next() % 10]);
            puts_(b, tmp);
            switch (next() % 4) {
            case 0: snprintf(tmp, sizeof tmp, "%u", next() % 100000); break;
            case 1: snprintf(tmp, sizeof tmp, "%u.%02u", next() % 1000, next() % 100); break;
            case 2:
                snprintf(tmp, sizeof tmp, "\"%s %s-%u\"", words[next() % 11], words[next() % 11],
                         next() % 1000);
                break;
            default:
                snprintf(tmp, sizeof tmp, "[\"%s\", %u, true, null]", words[next() % 11],
                         next() % 50);
            }
            puts_(b, tmp);
            puts_(b, k + 1 < nk ? ",\n" : "\n");
        }
        puts_(b, "}\n");
    }
}

static void gen_cjk(struct buf *b, size_t limit)
{
    static const char *const zh[] = {"我们", "今天", "模型", "语言", "计算", "数据", "的", "是",
                                     "在", "和", "一个", "问题", "学习", "中文", "文本", "处理"};
    static const char *const ja[] = {"これは", "日本語", "の", "テキスト", "です", "トークン",
                                     "東京", "に", "行きます", "ありがとう", "を", "学習"};
    static const char *const ko[] = {"안녕하세요", "한국어", "텍스트", "입니다", "모델", "을",
                                     "사용", "합니다", "데이터", "처리"};
    while (b->n < limit) {
        int lang = (int)(next() % 3), n = 4 + (int)(next() % 10);
        for (int i = 0; i < n; i++) {
            if (lang == 0) puts_(b, zh[next() % 16]);
            else if (lang == 1) puts_(b, ja[next() % 12]);
            else {
                puts_(b, ko[next() % 10]);
                puts_(b, " ");
            }
        }
        puts_(b, lang == 2 ? ". " : next() % 2 ? "。" : "，");
        if (next() % 5 == 0) puts_(b, "\n");
    }
}

int main(int argc, char **argv)
{
    const char *dir = "../shared/fixtures/tokenizer";
    size_t per_kind = 1u << 20;
    int reps = 5;
    const char *vocabs[16];
    int nv = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-d") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) per_kind = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: bench_tokenizer [-d DIR] [-n BYTES] [-r REPS] [vocab ...]\n");
            return 2;
        } else if (nv < 16) vocabs[nv++] = argv[i];
    }
    if (nv == 0) {
        vocabs[nv++] = "gpt-2";
        vocabs[nv++] = "qwen2-tiktoken";
        vocabs[nv++] = "llama3-tiktoken";
        vocabs[nv++] = "llama-spm";
    }
    if (reps < 1) reps = 1;

    struct buf kinds[4] = {{0}};
    const char *kind_names[4] = {"prose", "code", "json", "cjk"};
    add_files(&kinds[0], "/usr/share/common-licenses/*", per_kind);
    add_files(&kinds[0], "/usr/share/doc/*/copyright", per_kind);
    add_files(&kinds[1], "/usr/include/*.h", per_kind);
    gen_json(&kinds[2], per_kind);
    gen_cjk(&kinds[3], per_kind);

    printf("tern tokenizer benchmark: single thread, tern_tokenize flags 0, %d warm reps\n", reps);
    printf("%-16s %-6s %9s %9s %12s %22s %12s\n", "vocab", "text", "bytes", "tokens", "cold MB/s",
           "warm MB/s (min..max)", "warm Mtok/s");
    for (int v = 0; v < nv; v++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, vocabs[v]);
        struct tern_tokenizer *t;
        double t0 = now_s();
        if (tern_tokenizer_load(path, &t)) {
            fprintf(stderr, "%s: %s\n", path, tern_last_error());
            return 1;
        }
        double load_s = now_s() - t0;
        for (int k = 0; k < 4; k++) {
            struct buf *b = &kinds[k];
            if (!b->n) continue;
            size_t cap = b->n + 16, n;
            int32_t *ids = malloc(cap * sizeof *ids);
            t0 = now_s();
            if (tern_tokenize(t, b->p, b->n, 0, ids, cap, &n)) {
                fprintf(stderr, "%s: %s\n", vocabs[v], tern_last_error());
                return 1;
            }
            double cold = now_s() - t0;
            double *w = malloc(sizeof *w * (size_t)reps);
            for (int r = 0; r < reps; r++) {
                t0 = now_s();
                tern_status_ignore(tern_tokenize(t, b->p, b->n, 0, ids, cap, &n));
                w[r] = now_s() - t0;
            }
            qsort(w, (size_t)reps, sizeof *w, cmp_d);
            double med = w[reps / 2];
            char range[64];
            snprintf(range, sizeof range, "%.1f (%.1f..%.1f)", b->n / med / 1e6,
                     b->n / w[reps - 1] / 1e6, b->n / w[0] / 1e6);
            printf("%-16s %-6s %9zu %9zu %12.1f %22s %12.2f\n", vocabs[v], kind_names[k], b->n, n,
                   b->n / cold / 1e6, range, n / med / 1e6);
            free(w);
            free(ids);
        }
        struct tern_tokenizer_stats st;
        tern_tokenizer_get_stats(t, &st);
        printf("%-16s load %.0f ms; word cache: %llu hits, %llu misses, %llu resets\n", vocabs[v],
               load_s * 1e3, (unsigned long long)st.cache_hits,
               (unsigned long long)st.cache_misses, (unsigned long long)st.cache_resets);
        tern_tokenizer_free(t);
    }
    for (int k = 0; k < 4; k++) free(kinds[k].p);
    return 0;
}

/* distill_cache.c — the teacher's signal for tern distill: computed by tern's own inference over
 * the training documents exactly as the student sees them, written once, mapped on every later
 * run (read distill.h and tern.h "distillation" first).
 *
 * Building: each document is cut into n_ctx pieces as the trainer cuts it; a piece is decoded
 * from position 0 with logits only for the rows whose next token is trained on; for each such
 * row the teacher's distribution at temperature tau over the student's vocabulary is reduced to
 * its top-k (ids, log-probs, descending, ties to the lower id) and the remaining mass, summed
 * directly over the other ids in double so a tiny tail keeps its digits.
 *
 * Opening: every field is checked before it is used, and every refusal names the file and the
 * byte offset (the fuzz target tests/fuzz/fuzz_distill_cache.c holds the reader to it): header,
 * sizes (without overflow), document offsets, then every entry (ids in range and distinct,
 * log-probs finite, <= 0 and non-increasing, tail in [0, 1], the k + 1 masses summing to 1),
 * and last the SHA-256 of the body, which catches damage the value checks cannot see. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nettle/sha2.h>

#include "train/distill.h"
#include "train/train_internal.h"
#include "util/error.h"

/* ---------------------------------------------------------------- shared rule */

uint64_t train_kd_rows_before(const uint8_t *mask, uint64_t len, uint64_t before, int n_ctx)
{
    uint64_t n = 0;
    for (uint64_t j = 0; j < before && j + 1 < len; j++)
        n += (j + 1) % (uint64_t)n_ctx != 0 && mask[j + 1];
    return n;
}

struct tern_distill_cache_params tern_distill_cache_default_params(void)
{
    struct tern_distill_cache_params p;
    memset(&p, 0, sizeof p);
    p.top_k = 32;
    p.temperature = 1.0f;
    return p;
}

/* ---------------------------------------------------------------- data fingerprint */

struct tdat_view { /* the fields of struct tern_train_data this file reads (train_data.c) */
    uint64_t n_docs, n_tok;
    const uint64_t *off;
    const int32_t *tok;
    const uint8_t *mask;
};

static struct tdat_view view_of(const struct tern_train_data *d)
{
    struct tdat_view v;
    train_data_view(d, &v.n_docs, &v.n_tok, &v.off, &v.tok, &v.mask);
    return v;
}

void tern_train_data_fingerprint(const struct tern_train_data *d, uint8_t out[32])
{
    const struct tdat_view v = view_of(d);
    struct sha256_ctx h;
    sha256_init(&h);
    static const char tag[] = "tern train data v1";
    sha256_update(&h, sizeof tag, (const uint8_t *)tag);
    sha256_update(&h, 8, (const uint8_t *)&v.n_docs);
    sha256_update(&h, (v.n_docs + 1) * 8, (const uint8_t *)v.off);
    sha256_update(&h, v.n_tok * 4, (const uint8_t *)v.tok);
    sha256_update(&h, v.n_tok, v.mask);
    sha256_digest(&h, 32, out);
}

/* ---------------------------------------------------------------- build */

static void hex8(const uint8_t *d, char out[17])
{
    static const char x[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++) out[2 * i] = x[d[i] >> 4], out[2 * i + 1] = x[d[i] & 15];
    out[16] = 0;
}

struct writer {
    FILE *f;
    struct sha256_ctx h;
    const char *path;
    bool failed;
};

static void wr(struct writer *w, const void *p, size_t n)
{
    if (w->failed) return;
    sha256_update(&w->h, n, p);
    if (fwrite(p, 1, n, w->f) != n) w->failed = true;
}

/* Top-k of row l (V logits) at temperature tau into ids/logp (descending, ties to the lower id)
 * and the tail mass. false when a logit is not finite (*bad = its id). */
static bool topk_row(const float *l, int V, int k, float tau, int32_t *ids, float *val, float *logp,
                     float *tail, int *bad)
{
    float mx = -INFINITY;
    for (int j = 0; j < V; j++) {
        if (!isfinite(l[j])) {
            *bad = j;
            return false;
        }
        if (l[j] > mx) mx = l[j];
    }
    int n = 0;
    double sum = 0.0;
    for (int j = 0; j < V; j++) {
        sum += exp((double)(l[j] - mx) / tau);
        if (n == k && !(l[j] > val[k - 1])) continue;
        int at = n < k ? n : k - 1; /* a strictly larger value goes before equal ones */
        while (at > 0 && l[j] > val[at - 1]) {
            val[at] = val[at - 1];
            ids[at] = ids[at - 1];
            at--;
        }
        val[at] = l[j];
        ids[at] = j;
        if (n < k) n++;
    }
    const double lse = log(sum);
    double top = 0.0;
    for (int i = 0; i < k; i++) {
        const double z = (double)(val[i] - mx) / tau;
        logp[i] = (float)(z - lse);
        top += exp(z);
    }
    const double t = (sum - top) / sum;
    *tail = (float)(t > 0.0 ? t : 0.0);
    return true;
}

tern_status tern_distill_cache_build(struct tern_model *teacher, const struct tern_train_data *d,
                                     const struct tern_distill_cache_params *p, const char *path)
{
    const struct tdat_view v = view_of(d);
    const int T = p->n_ctx, k = p->top_k, V = p->n_vocab;
    if (k < 1 || k > KD_MAX_K || k > V || !(p->temperature > 0.0f) || !isfinite(p->temperature) ||
        T < 2 || V < 2)
        return tern_fail(TERN_ERR_ARG, "distill cache: top_k %d must be in 1..%d and at most the "
                         "vocabulary (%d), temperature %g > 0, n_ctx %d >= 2", k, KD_MAX_K, V,
                         p->temperature, T);
    const int Vt = tern_model_n_vocab(teacher);
    if (Vt < V)
        return tern_fail(TERN_ERR_ARG, "distill cache: the teacher's output has %d rows, fewer than "
                         "the student's vocabulary of %d tokens", Vt, V);
    for (uint64_t i = 0; i < v.n_tok; i++)
        if (v.tok[i] >= V)
            return tern_fail(TERN_ERR_FORMAT, "distill cache: data token %llu: id %d is outside the "
                             "vocabulary (%d tokens)", (unsigned long long)i, v.tok[i], V);
    uint8_t tfp[32], dfp[32];
    tern_status st = tern_model_fingerprint(teacher, tfp);
    if (st) return st;
    tern_train_data_fingerprint(d, dfp);

    uint64_t *first = malloc((v.n_docs + 1) * sizeof *first);
    int32_t *ids = malloc((size_t)k * sizeof *ids);
    float *val = malloc((size_t)k * sizeof *val), *logp = malloc(((size_t)k + 1) * sizeof *logp);
    bool *want = malloc((size_t)T * sizeof *want);
    if (!first || !ids || !val || !logp || !want) {
        free(first), free(ids), free(val), free(logp), free(want);
        return tern_fail(TERN_ERR_NOMEM, "distill cache: out of memory");
    }
    first[0] = 0;
    for (uint64_t doc = 0; doc < v.n_docs; doc++) {
        const uint64_t a = v.off[doc], len = v.off[doc + 1] - a;
        first[doc + 1] = first[doc] + train_kd_rows_before(v.mask + a, len, len, T);
    }
    const uint64_t n_entries = first[v.n_docs];

    struct tern_context *ctx = NULL;
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = T;
    cp.n_batch = T;
    cp.n_threads = p->n_threads;
    cp.no_warmup = true;
    st = tern_context_create(teacher, &cp, &ctx);
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    struct writer w = {.path = tmp};
    sha256_init(&w.h);
    if (!st && !(w.f = fopen(tmp, "wb")))
        st = tern_fail(TERN_ERR_IO, "distill cache: cannot create %s: %s", tmp, strerror(errno));
    /* the checksum covers the header's first 104 bytes (all known now) and the body */
    unsigned char head[KD_HEADER];
    memset(head, 0, sizeof head);
    memcpy(head, KD_MAGIC, 4);
    const uint32_t ver = KD_VERSION, uk = (uint32_t)k, uv = (uint32_t)V, ut = (uint32_t)T;
    memcpy(head + 4, &ver, 4);
    memcpy(head + 8, &uk, 4);
    memcpy(head + 12, &uv, 4);
    memcpy(head + 16, &p->temperature, 4);
    memcpy(head + 20, &ut, 4);
    memcpy(head + 24, &v.n_docs, 8);
    memcpy(head + 32, &n_entries, 8);
    memcpy(head + 40, tfp, 32);
    memcpy(head + 72, dfp, 32);
    sha256_update(&w.h, 104, head);
    if (!st && fwrite(head, 1, sizeof head, w.f) != sizeof head) w.failed = true;
    if (!st) wr(&w, first, (v.n_docs + 1) * sizeof *first);
    for (uint64_t doc = 0; !st && !w.failed && doc < v.n_docs; doc++) {
        const uint64_t a = v.off[doc], len = v.off[doc + 1] - a;
        for (uint64_t p0 = 0; !st && p0 < len; p0 += (uint64_t)T) {
            const int n = (int)(len - p0 < (uint64_t)T ? len - p0 : (uint64_t)T);
            int n_want = 0;
            for (int i = 0; i < n; i++) {
                want[i] = i + 1 < n && v.mask[a + p0 + i + 1];
                n_want += want[i];
            }
            if (!n_want) continue;
            struct tern_batch b = {.n = n, .tokens = v.tok + a + p0, .logits = want};
            if ((st = tern_kv_truncate(ctx, 0)) || (st = tern_decode_batch(ctx, &b))) {
                tern_fail_prefix(st, "distill cache: teacher on document %llu, position %llu: ",
                                 (unsigned long long)doc, (unsigned long long)p0);
                break;
            }
            for (int i = 0; i < n && !st; i++) {
                if (!want[i]) continue;
                const float *l = tern_context_logits(ctx, i);
                int bad = 0;
                if (!topk_row(l, V, k, p->temperature, ids, val, logp, &logp[k], &bad)) {
                    st = tern_fail(TERN_ERR_RANGE, "distill cache: the teacher's logit of token %d "
                                   "is not finite at document %llu, position %llu", bad,
                                   (unsigned long long)doc, (unsigned long long)(p0 + i));
                    break;
                }
                wr(&w, ids, (size_t)k * 4);
                wr(&w, logp, ((size_t)k + 1) * 4);
            }
        }
        if (p->progress) p->progress(p->user, doc + 1, v.n_docs);
    }
    tern_context_free(ctx);
    free(first), free(ids), free(val), free(logp), free(want);
    if (!st && w.failed)
        st = tern_fail(TERN_ERR_IO, "distill cache: write to %s failed: %s", tmp, strerror(errno));
    if (!st) sha256_digest(&w.h, 32, head + 104); /* the header last: it holds the checksum */
    if (!st) {
        if (fseek(w.f, 0, SEEK_SET) != 0 || fwrite(head, 1, sizeof head, w.f) != sizeof head ||
            fflush(w.f) != 0 || fsync(fileno(w.f)) != 0)
            st = tern_fail(TERN_ERR_IO, "distill cache: write to %s failed: %s", tmp, strerror(errno));
    }
    if (w.f && fclose(w.f) != 0 && !st)
        st = tern_fail(TERN_ERR_IO, "distill cache: close %s: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path) != 0)
        st = tern_fail(TERN_ERR_IO, "distill cache: rename to %s: %s", path, strerror(errno));
    if (st && w.f) unlink(tmp);
    return st;
}

/* ---------------------------------------------------------------- open */

#define BAD(off, ...) tern_fail_prefix(tern_fail(TERN_ERR_FORMAT, __VA_ARGS__), "%s: offset %llu: ", \
                                       c->name, (unsigned long long)(off))

static tern_status parse(struct tern_distill_cache *c)
{
    const unsigned char *b = c->buf;
    if (c->size < KD_HEADER)
        return BAD(0, "%zu bytes, shorter than the %d-byte header (truncated cache)", c->size,
                   KD_HEADER);
    if (memcmp(b, KD_MAGIC, 4))
        return BAD(0, "not a tern teacher-signal cache (magic is not 'TKDC')");
    uint32_t ver;
    memcpy(&ver, b + 4, 4);
    if (ver != KD_VERSION) return BAD(4, "version %u (this tern reads %u)", ver, KD_VERSION);
    memcpy(&c->k, b + 8, 4);
    memcpy(&c->V, b + 12, 4);
    memcpy(&c->tau, b + 16, 4);
    memcpy(&c->n_ctx, b + 20, 4);
    memcpy(&c->n_docs, b + 24, 8);
    memcpy(&c->n_entries, b + 32, 8);
    memcpy(c->teacher_fp, b + 40, 32);
    memcpy(c->data_fp, b + 72, 32);
    memcpy(c->sum, b + 104, 32);
    if (c->k < 1 || c->k > KD_MAX_K) return BAD(8, "top_k %u is outside 1..%d", c->k, KD_MAX_K);
    if (c->V < 2 || c->V > (1u << 24) || c->k > c->V)
        return BAD(12, "vocabulary %u is outside 2..2^24 or below top_k %u", c->V, c->k);
    if (!(c->tau > 0.0f) || !isfinite(c->tau)) return BAD(16, "temperature %g is not > 0", c->tau);
    if (c->n_ctx < 2) return BAD(20, "n_ctx %u is below 2", c->n_ctx);
    c->entry_bytes = 8 * (size_t)c->k + 4;
    const uint64_t rest = (uint64_t)c->size - KD_HEADER;
    if (c->n_docs >= rest / 8)
        return BAD(24, "%llu documents do not fit in the file's %zu bytes (truncated cache)",
                   (unsigned long long)c->n_docs, c->size);
    const uint64_t body = rest - (c->n_docs + 1) * 8;
    if (c->n_entries > body / c->entry_bytes || c->n_entries * c->entry_bytes != body)
        return BAD(32, "%llu entries of %zu bytes %s the %llu bytes after the document table "
                   "(truncated or damaged cache)", (unsigned long long)c->n_entries,
                   c->entry_bytes, c->n_entries > body / c->entry_bytes ? "do not fit in" : "do not fill",
                   (unsigned long long)body);
    c->doc_first = (const uint64_t *)(b + KD_HEADER);
    c->entries = b + KD_HEADER + (c->n_docs + 1) * 8;
    if (c->doc_first[0] != 0 || c->doc_first[c->n_docs] != c->n_entries)
        return BAD(KD_HEADER, "the document table must start at 0 and end at n_entries %llu",
                   (unsigned long long)c->n_entries);
    for (uint64_t i = 0; i < c->n_docs; i++)
        if (c->doc_first[i + 1] < c->doc_first[i])
            return BAD(KD_HEADER + (i + 1) * 8, "document %llu ends before it starts",
                       (unsigned long long)i);
    uint32_t *stamp = c->n_entries ? calloc(c->V, sizeof *stamp) : NULL;
    if (c->n_entries && !stamp) return tern_fail(TERN_ERR_NOMEM, "%s: out of memory", c->name);
    tern_status st = TERN_OK;
    for (uint64_t e = 0; !st && e < c->n_entries; e++) {
        const uint64_t at = (uint64_t)(c->entries - b) + e * c->entry_bytes;
        const int32_t *ids = kd_ids(c, e);
        const float *lp = kd_logp(c, e);
        const uint32_t mark = (uint32_t)(e % 0xffffffffu) + 1;
        double mass = 0.0;
        for (uint32_t i = 0; !st && i < c->k; i++) {
            if (ids[i] < 0 || (uint32_t)ids[i] >= c->V)
                st = BAD(at + 4 * i, "entry %llu: id %d is outside the vocabulary (%u)",
                         (unsigned long long)e, ids[i], c->V);
            else if (stamp[ids[i]] == mark)
                st = BAD(at + 4 * i, "entry %llu: id %d appears twice", (unsigned long long)e, ids[i]);
            else if (!isfinite(lp[i]) || lp[i] > 1e-5f || (i > 0 && lp[i] > lp[i - 1]))
                st = BAD(at + 4 * (c->k + i), "entry %llu: log-probability %g is not finite, above 0 "
                         "or above the one before it", (unsigned long long)e, lp[i]);
            else {
                stamp[ids[i]] = mark;
                mass += exp((double)lp[i]);
            }
        }
        if (st) break;
        const float tail = lp[c->k];
        if (!(tail >= 0.0f && tail <= 1.0f))
            st = BAD(at + 8 * c->k, "entry %llu: tail mass %g is outside [0, 1]",
                     (unsigned long long)e, tail);
        else if (fabs(mass + tail - 1.0) > 1e-3)
            st = BAD(at, "entry %llu: the top-k and tail masses sum to %.6f, not 1",
                     (unsigned long long)e, mass + tail);
    }
    free(stamp);
    if (st) return st;
    uint8_t sum[32];
    struct sha256_ctx h;
    sha256_init(&h);
    sha256_update(&h, 104, b);
    sha256_update(&h, c->size - KD_HEADER, b + KD_HEADER);
    sha256_digest(&h, 32, sum);
    if (memcmp(sum, c->sum, 32))
        return BAD(104, "checksum mismatch: the file does not hash to its header's SHA-256 (it is "
                   "damaged; delete it to rebuild)");
    return TERN_OK;
}

tern_status tern_distill_cache_open(const char *path, struct tern_distill_cache **out)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return tern_fail(TERN_ERR_IO, "distill cache: cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return tern_fail(TERN_ERR_IO, "distill cache: cannot stat %s: %s", path, strerror(errno));
    }
    struct tern_distill_cache *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return tern_fail(TERN_ERR_NOMEM, "distill cache: out of memory");
    }
    snprintf(c->name, sizeof c->name, "%s", path);
    c->size = (size_t)sb.st_size;
    if (c->size > 0) {
        void *m = mmap(NULL, c->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            free(c);
            return tern_fail(TERN_ERR_IO, "distill cache: cannot map %s: %s", path, strerror(errno));
        }
        c->buf = m;
        c->mapped = true;
    }
    close(fd);
    tern_status st = parse(c);
    if (st) {
        tern_distill_cache_free(c);
        return st;
    }
    *out = c;
    return TERN_OK;
}

tern_status tern_distill_cache_open_memory(const void *data, size_t size,
                                           struct tern_distill_cache **out)
{
    struct tern_distill_cache *c = calloc(1, sizeof *c);
    if (!c || !(c->buf = malloc(size ? size : 1))) {
        free(c);
        return tern_fail(TERN_ERR_NOMEM, "distill cache: out of memory for %zu bytes", size);
    }
    if (size) memcpy(c->buf, data, size);
    c->size = size;
    snprintf(c->name, sizeof c->name, "distill cache");
    tern_status st = parse(c);
    if (st) {
        tern_distill_cache_free(c);
        return st;
    }
    *out = c;
    return TERN_OK;
}

void tern_distill_cache_free(struct tern_distill_cache *c)
{
    if (!c) return;
    if (c->mapped) munmap(c->buf, c->size);
    else free(c->buf);
    free(c);
}

uint64_t tern_distill_cache_n_entries(const struct tern_distill_cache *c) { return c->n_entries; }

bool tern_distill_cache_entry(const struct tern_distill_cache *c, uint64_t i, const int32_t **ids,
                              const float **logp, float *tail)
{
    if (i >= c->n_entries) return false;
    if (ids) *ids = kd_ids(c, i);
    if (logp) *logp = kd_logp(c, i);
    if (tail) *tail = kd_tail(c, i);
    return true;
}

/* ---------------------------------------------------------------- match */

tern_status tern_distill_cache_check(const struct tern_distill_cache *c, const uint8_t teacher_fp[32],
                                     const struct tern_train_data *d,
                                     const struct tern_distill_cache_params *p)
{
    char a[17], b[17];
    if (teacher_fp && memcmp(c->teacher_fp, teacher_fp, 32)) {
        hex8(c->teacher_fp, a);
        hex8(teacher_fp, b);
        return tern_fail(TERN_ERR_ARG, "%s was computed by another teacher (fingerprint %s..., this "
                         "teacher %s...)", c->name, a, b);
    }
    uint8_t dfp[32];
    tern_train_data_fingerprint(d, dfp);
    if (memcmp(c->data_fp, dfp, 32)) {
        hex8(c->data_fp, a);
        hex8(dfp, b);
        return tern_fail(TERN_ERR_ARG, "%s was computed on other data (data fingerprint %s..., these "
                         "documents %s...)", c->name, a, b);
    }
    if ((int)c->k != p->top_k)
        return tern_fail(TERN_ERR_ARG, "%s holds top_k %u, the recipe asks for %d", c->name, c->k,
                         p->top_k);
    if (c->tau != p->temperature)
        return tern_fail(TERN_ERR_ARG, "%s holds temperature %g, the recipe asks for %g", c->name,
                         c->tau, p->temperature);
    if ((int)c->n_ctx != p->n_ctx)
        return tern_fail(TERN_ERR_ARG, "%s was cut at n_ctx %u, the student trains at %d", c->name,
                         c->n_ctx, p->n_ctx);
    if ((int)c->V != p->n_vocab)
        return tern_fail(TERN_ERR_ARG, "%s holds a vocabulary of %u, the student has %d", c->name,
                         c->V, p->n_vocab);
    /* the fingerprint says the counts match; a file made to pass it must still not send the
     * trainer past its entries */
    const struct tdat_view v = view_of(d);
    if (c->n_docs != v.n_docs)
        return tern_fail(TERN_ERR_ARG, "%s holds %llu documents, the data %llu", c->name,
                         (unsigned long long)c->n_docs, (unsigned long long)v.n_docs);
    for (uint64_t doc = 0; doc < v.n_docs; doc++) {
        const uint64_t s = v.off[doc], len = v.off[doc + 1] - s;
        const uint64_t n = train_kd_rows_before(v.mask + s, len, len, (int)c->n_ctx);
        if (c->doc_first[doc + 1] - c->doc_first[doc] != n)
            return tern_fail(TERN_ERR_ARG, "%s: document %llu has %llu entries, the data %llu "
                             "trained positions", c->name, (unsigned long long)doc,
                             (unsigned long long)(c->doc_first[doc + 1] - c->doc_first[doc]),
                             (unsigned long long)n);
    }
    return TERN_OK;
}

tern_status tern_distill_cache_ensure(struct tern_model *teacher, const struct tern_train_data *d,
                                      const struct tern_distill_cache_params *p, const char *path,
                                      bool rebuild, struct tern_distill_cache **out, bool *built)
{
    uint8_t tfp[32];
    tern_status st = tern_model_fingerprint(teacher, tfp);
    if (st) return st;
    if (built) *built = false;
    struct stat sb;
    if (stat(path, &sb) == 0) {
        struct tern_distill_cache *c = NULL;
        st = tern_distill_cache_open(path, &c);
        if (!st) st = tern_distill_cache_check(c, tfp, d, p);
        if (!st) {
            *out = c;
            return TERN_OK;
        }
        tern_distill_cache_free(c);
        if (!rebuild)
            return tern_fail_prefix(st, "teacher cache refused (delete it, or pass --rebuild-cache "
                                    "to recompute it): ");
    }
    if ((st = tern_distill_cache_build(teacher, d, p, path))) return st;
    if (built) *built = true;
    struct tern_distill_cache *c = NULL;
    if ((st = tern_distill_cache_open(path, &c))) return st;
    if ((st = tern_distill_cache_check(c, tfp, d, p))) {
        tern_distill_cache_free(c);
        return st;
    }
    *out = c;
    return TERN_OK;
}

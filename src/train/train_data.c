/* train_data.c — the trainer's input: the .tdat file of (token ids, loss mask) documents
 * (format in tern.h, "data file"), its writer, and the packing of documents into micro-batches
 * in a seeded order.
 *
 * Order: epoch e visits the documents in a Fisher-Yates permutation drawn from a generator
 * seeded with (seed, e), so the order is reproducible and a checkpoint need only hold
 * (epoch, cursor, piece). Packing: documents (or n_ctx pieces of longer ones) are laid one after
 * another into sequences of n_ctx rows; a piece that does not fit the rest of a sequence starts
 * the next one, and the rest is padding. Row r's target is the next token of its own piece,
 * trained on when that token's mask byte is set. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "train/distill.h"
#include "train/train_internal.h"
#include "util/error.h"

#define TDAT_MAGIC "TRND"
#define TDAT_VERSION 1u
#define TDAT_HEADER 24 /* magic, version, n_docs, n_tokens */

/* ---------------------------------------------------------------- writer */

struct tern_train_data_writer {
    uint64_t *off;     /* (n_docs + 1) */
    int32_t *tok;
    uint8_t *mask;
    uint64_t n_docs, n_tok, cap_docs, cap_tok;
};

tern_status tern_train_data_writer_create(struct tern_train_data_writer **out)
{
    struct tern_train_data_writer *w = calloc(1, sizeof *w);
    if (!w || !(w->off = calloc(1, sizeof *w->off))) {
        free(w);
        return tern_fail(TERN_ERR_NOMEM, "train data: out of memory");
    }
    w->cap_docs = 0;
    *out = w;
    return TERN_OK;
}

void tern_train_data_writer_free(struct tern_train_data_writer *w)
{
    if (!w) return;
    free(w->off);
    free(w->tok);
    free(w->mask);
    free(w);
}

tern_status tern_train_data_add(struct tern_train_data_writer *w, const int32_t *tokens,
                                const uint8_t *mask, int n)
{
    if (!w || !tokens || n < 1)
        return tern_fail(TERN_ERR_ARG, "train data: document %llu is empty",
                         (unsigned long long)(w ? w->n_docs : 0));
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0)
            return tern_fail(TERN_ERR_ARG, "train data: document %llu, token %d: id %d is negative",
                             (unsigned long long)w->n_docs, i, tokens[i]);
    if (w->n_docs + 1 >= w->cap_docs) {
        uint64_t cap = w->cap_docs ? w->cap_docs * 2 : 256;
        uint64_t *o = realloc(w->off, (cap + 1) * sizeof *o);
        if (!o) return tern_fail(TERN_ERR_NOMEM, "train data: out of memory");
        w->off = o;
        w->cap_docs = cap;
    }
    if (w->n_tok + (uint64_t)n > w->cap_tok) {
        uint64_t cap = w->cap_tok ? w->cap_tok : 4096;
        while (cap < w->n_tok + (uint64_t)n) cap *= 2;
        int32_t *t = realloc(w->tok, cap * sizeof *t);
        if (!t) return tern_fail(TERN_ERR_NOMEM, "train data: out of memory");
        w->tok = t;
        uint8_t *m = realloc(w->mask, cap);
        if (!m) return tern_fail(TERN_ERR_NOMEM, "train data: out of memory");
        w->mask = m;
        w->cap_tok = cap;
    }
    memcpy(w->tok + w->n_tok, tokens, (size_t)n * sizeof *tokens);
    for (int i = 0; i < n; i++) w->mask[w->n_tok + i] = mask ? mask[i] : 1; /* bytes as given: 2.. mark tool calls */
    w->n_tok += (uint64_t)n;
    w->off[++w->n_docs] = w->n_tok;
    return TERN_OK;
}

static tern_status write_all(int fd, const void *p, size_t n, const char *path)
{
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return tern_fail(TERN_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        c += k;
        n -= (size_t)k;
    }
    return TERN_OK;
}

tern_status tern_train_data_write(struct tern_train_data_writer *w, const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return tern_fail(TERN_ERR_ARG, "train data: path too long");
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return tern_fail(TERN_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    unsigned char hdr[TDAT_HEADER];
    const uint32_t ver = TDAT_VERSION;
    memcpy(hdr, TDAT_MAGIC, 4);
    memcpy(hdr + 4, &ver, 4);
    memcpy(hdr + 8, &w->n_docs, 8);
    memcpy(hdr + 16, &w->n_tok, 8);
    tern_status st = write_all(fd, hdr, sizeof hdr, tmp);
    if (!st) st = write_all(fd, w->off, (w->n_docs + 1) * sizeof *w->off, tmp);
    if (!st && w->n_tok) st = write_all(fd, w->tok, w->n_tok * sizeof *w->tok, tmp);
    if (!st && w->n_tok) st = write_all(fd, w->mask, w->n_tok, tmp);
    if (!st && fsync(fd) != 0) st = tern_fail(TERN_ERR_IO, "%s: fsync: %s", tmp, strerror(errno));
    if (close(fd) != 0 && !st) st = tern_fail(TERN_ERR_IO, "%s: close: %s", tmp, strerror(errno));
    if (!st && rename(tmp, path) != 0)
        st = tern_fail(TERN_ERR_IO, "%s: rename: %s", path, strerror(errno));
    if (st) unlink(tmp);
    return st;
}

/* ---------------------------------------------------------------- reader */

struct tern_train_data {
    unsigned char *buf;  /* the whole file */
    uint64_t n_docs, n_tok;
    const uint64_t *off;
    const int32_t *tok;
    const uint8_t *mask;
};

/* Validate d->buf (size bytes, read from `name`) and set the views into it. */
static tern_status data_parse(struct tern_train_data *d, const char *name, size_t size)
{
    if (size < TDAT_HEADER)
        return tern_fail(TERN_ERR_FORMAT, "%s: offset 0: %zu bytes, shorter than the %d-byte header", name,
                         size, TDAT_HEADER);
    if (memcmp(d->buf, TDAT_MAGIC, 4) != 0)
        return tern_fail(TERN_ERR_FORMAT, "%s: offset 0: not a tern training data file (magic is "
                         "not 'TRND')", name);
    uint32_t ver;
    memcpy(&ver, d->buf + 4, 4);
    memcpy(&d->n_docs, d->buf + 8, 8);
    memcpy(&d->n_tok, d->buf + 16, 8);
    if (ver != TDAT_VERSION)
        return tern_fail(TERN_ERR_FORMAT, "%s: offset 4: version %u (this tern reads %u)", name, ver,
                         TDAT_VERSION);
    /* sizes checked before multiplying: no overflow for any header */
    const uint64_t rest = (uint64_t)size - TDAT_HEADER;
    if (d->n_docs >= rest / 8 || d->n_tok > rest / 5 || (d->n_docs + 1) * 8 + d->n_tok * 5 != rest)
        return tern_fail(TERN_ERR_FORMAT, "%s: offset 8: header says %llu documents and %llu "
                         "tokens, which does not match the file size %zu", name,
                         (unsigned long long)d->n_docs, (unsigned long long)d->n_tok, size);
    /* the buffer is malloc'ed (aligned for any type): offsets start at byte 24 (8-aligned), the
     * tokens after them (4-aligned) */
    d->off = (const uint64_t *)(d->buf + TDAT_HEADER);
    d->tok = (const int32_t *)(d->buf + TDAT_HEADER + (d->n_docs + 1) * 8);
    d->mask = (const uint8_t *)(d->tok + d->n_tok);
    if (d->off[0] != 0 || d->off[d->n_docs] != d->n_tok)
        return tern_fail(TERN_ERR_FORMAT, "%s: offset 24: document offsets must start at 0 and end "
                         "at n_tokens %llu", name, (unsigned long long)d->n_tok);
    for (uint64_t i = 0; i < d->n_docs; i++)
        if (d->off[i + 1] < d->off[i])
            return tern_fail(TERN_ERR_FORMAT, "%s: offset %llu: document %llu ends before it starts",
                             name, (unsigned long long)(TDAT_HEADER + (i + 1) * 8),
                             (unsigned long long)i);
    for (uint64_t i = 0; i < d->n_tok; i++)
        if (d->tok[i] < 0)
            return tern_fail(TERN_ERR_FORMAT, "%s: offset %llu: token %llu: id %d is negative", name,
                             (unsigned long long)((const uint8_t *)(d->tok + i) - d->buf),
                             (unsigned long long)i, d->tok[i]);
    if (d->n_tok == 0) return tern_fail(TERN_ERR_FORMAT, "%s: offset 16: holds no tokens", name);
    return TERN_OK;
}

tern_status tern_train_data_open(const char *path, struct tern_train_data **out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct tern_train_data *d = calloc(1, sizeof *d);
    tern_status st = TERN_OK;
    long size = -1;
    if (!d) st = tern_fail(TERN_ERR_NOMEM, "%s: out of memory", path);
    if (!st && (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0))
        st = tern_fail(TERN_ERR_IO, "%s: cannot size the file", path);
    if (!st && !(d->buf = malloc((size_t)size + 8)))
        st = tern_fail(TERN_ERR_NOMEM, "%s: out of memory for %ld bytes", path, size);
    if (!st && fread(d->buf, 1, (size_t)size, f) != (size_t)size)
        st = tern_fail(TERN_ERR_IO, "%s: read failed", path);
    fclose(f);
    if (!st) st = data_parse(d, path, (size_t)size);
    if (st) {
        tern_train_data_free(d);
        return st;
    }
    *out = d;
    return TERN_OK;
}

tern_status tern_train_data_open_memory(const void *data, size_t size, struct tern_train_data **out)
{
    struct tern_train_data *d = calloc(1, sizeof *d);
    if (!d || !(d->buf = malloc(size + 8))) {
        free(d);
        return tern_fail(TERN_ERR_NOMEM, "train data: out of memory for %zu bytes", size);
    }
    if (size) memcpy(d->buf, data, size);
    tern_status st = data_parse(d, "train data", size);
    if (st) {
        tern_train_data_free(d);
        return st;
    }
    *out = d;
    return TERN_OK;
}

tern_status tern_train_data_from_writer(const struct tern_train_data_writer *w,
                                       struct tern_train_data **out)
{
    const size_t size = TDAT_HEADER + (w->n_docs + 1) * 8 + w->n_tok * 5;
    struct tern_train_data *d = calloc(1, sizeof *d);
    if (!d || !(d->buf = malloc(size + 8))) {
        free(d);
        return tern_fail(TERN_ERR_NOMEM, "train data: out of memory for %zu bytes", size);
    }
    const uint32_t ver = TDAT_VERSION;
    unsigned char *p = d->buf;
    memcpy(p, TDAT_MAGIC, 4);
    memcpy(p + 4, &ver, 4);
    memcpy(p + 8, &w->n_docs, 8);
    memcpy(p + 16, &w->n_tok, 8);
    p += TDAT_HEADER;
    memcpy(p, w->off, (w->n_docs + 1) * 8);
    p += (w->n_docs + 1) * 8;
    if (w->n_tok) {
        memcpy(p, w->tok, w->n_tok * 4);
        memcpy(p + w->n_tok * 4, w->mask, w->n_tok);
    }
    tern_status st = data_parse(d, "train data", size);
    if (st) {
        tern_train_data_free(d);
        return st;
    }
    *out = d;
    return TERN_OK;
}

void tern_train_data_free(struct tern_train_data *d)
{
    if (!d) return;
    free(d->buf);
    free(d);
}

uint64_t tern_train_data_n_docs(const struct tern_train_data *d) { return d->n_docs; }
uint64_t tern_train_data_n_tokens(const struct tern_train_data *d) { return d->n_tok; }
const int32_t *tern_train_data_tokens(const struct tern_train_data *d, const uint8_t **mask)
{
    if (mask) *mask = d->mask;
    return d->tok;
}

/* ---------------------------------------------------------------- batches */

tern_status train_batch_alloc(struct train_batch *b, int N)
{
    memset(b, 0, sizeof *b);
    b->tok = calloc((size_t)N, sizeof *b->tok);
    b->pos = calloc((size_t)N, sizeof *b->pos);
    b->start = calloc((size_t)N, sizeof *b->start);
    b->target = calloc((size_t)N, sizeof *b->target);
    b->weight = calloc((size_t)N, sizeof *b->weight);
    b->sig = calloc((size_t)N, sizeof *b->sig);
    if (!b->tok || !b->pos || !b->start || !b->target || !b->weight || !b->sig) {
        train_batch_free(b);
        return tern_fail(TERN_ERR_NOMEM, "train: out of memory for a batch of %d rows", N);
    }
    return TERN_OK;
}

void train_batch_free(struct train_batch *b)
{
    free(b->tok);
    free(b->pos);
    free(b->start);
    free(b->target);
    free(b->weight);
    free(b->sig);
    memset(b, 0, sizeof *b);
}

/* Lay one piece (n tokens) at rows [row, row + n) of the sequence starting at row s0. sig0: the
 * teacher-signal entry of the piece's first trained row (distillation), or -1. A trained row
 * (its target's mask byte set) weighs row_w[mask byte] * doc_w, or 1 when row_w is NULL. */
static void put_piece(struct train_batch *b, int s0, int row, const int32_t *tok,
                      const uint8_t *mask, int n, int64_t sig0, const float *row_w, float doc_w)
{
    for (int i = 0; i < n; i++) {
        const int r = s0 + row + i;
        b->tok[r] = tok[i];
        b->pos[r] = i;
        b->start[r] = row;
        const bool has = i + 1 < n;
        const bool trained = has && mask[i + 1];
        b->target[r] = has ? tok[i + 1] : 0;
        b->weight[r] = !trained ? 0.0f : row_w ? row_w[mask[i + 1]] * doc_w : 1.0f;
        b->sig[r] = sig0 >= 0 && trained ? sig0++ : -1;
        b->n_loss += trained;
    }
}

void train_pad_rows(struct train_batch *b, int s0, int row, int T)
{
    for (int r = row; r < T; r++) {
        b->tok[s0 + r] = 0;
        b->pos[s0 + r] = 0;
        b->start[s0 + r] = r;
        b->target[s0 + r] = 0;
        b->weight[s0 + r] = 0.0f;
        b->sig[s0 + r] = -1;
    }
}

void train_batch_from_docs(struct train_batch *b, int T, const int32_t *const *tok,
                           const uint8_t *const *mask, const int *len, int n_docs)
{
    int row = 0;
    b->n_loss = 0;
    for (int i = 0; i < n_docs && row < T; i++) {
        const int n = len[i] < T - row ? len[i] : T - row;
        put_piece(b, 0, row, tok[i], mask[i], n, -1, NULL, 1.0f);
        row += n;
    }
    train_pad_rows(b, 0, row, T);
}

/* The teacher-signal entry of the first trained row of document doc's piece at `first`, or -1
 * without a teacher signal (distill.h: entries follow the data order). */
static int64_t kd_first(const struct tern_trainer *t, const struct tern_train_data *d, uint64_t doc,
                        uint64_t first)
{
    if (!t->kd) return -1;
    const uint64_t a = d->off[doc], len = d->off[doc + 1] - a;
    return (int64_t)(t->kd->doc_first[doc] + train_kd_rows_before(d->mask + a, len, first, t->T));
}

tern_status train_lay_piece(const struct tern_trainer *t, const struct tern_train_data *d,
                            struct train_batch *b, int s0, int row, uint64_t doc, uint64_t first,
                            int n)
{
    const uint64_t a = d->off[doc];
    for (int i = 0; i < n; i++)
        if (d->tok[a + first + i] >= t->V)
            return tern_fail(TERN_ERR_FORMAT, "train data: document %llu, token %llu: id %d is "
                             "outside the vocabulary (%d tokens)", (unsigned long long)doc,
                             (unsigned long long)(first + i), d->tok[a + first + i], t->V);
    /* length-aware KD's document weight, its excess over 1 scaled by the safety rail */
    const float doc_w = t->doc_w && doc < t->doc_w_n
        ? (float)(1.0 + (t->doc_w[doc] - 1.0) * t->latency_scale) : 1.0f;
    put_piece(b, s0, row, d->tok + a + first, d->mask + a + first, n, kd_first(t, d, doc, first),
              t->row_w, doc_w);
    return TERN_OK;
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static uint64_t next_rand(uint64_t *s)
{
    uint64_t x = *s += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Epoch `epoch`'s document order (a seeded Fisher-Yates shuffle) into perm; returns the
 * generator's state at its start. */
static uint64_t epoch_order(uint64_t seed, uint64_t epoch, uint64_t n_docs, uint64_t *perm)
{
    const uint64_t rng = mix64(seed ^ mix64(epoch + 0x6f72646572ull)); /* "order" */
    uint64_t s = rng;
    for (uint64_t i = 0; i < n_docs; i++) perm[i] = i;
    for (uint64_t i = n_docs; i > 1; i--) {
        const uint64_t j = next_rand(&s) % i;
        const uint64_t x = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = x;
    }
    return rng;
}

/* This epoch's order into t->perm (recomputed only when the epoch changes). */
static tern_status ensure_order(struct tern_trainer *t, const struct tern_train_data *d)
{
    struct train_data_pos *p = &t->dpos;
    if (t->perm && t->perm_n == d->n_docs && t->perm_epoch == p->epoch) return TERN_OK;
    if (t->perm_n != d->n_docs) {
        free(t->perm);
        t->perm_n = 0;
        if (!(t->perm = malloc(d->n_docs * sizeof *t->perm)))
            return tern_fail(TERN_ERR_NOMEM, "train: out of memory for the order of %llu documents",
                             (unsigned long long)d->n_docs);
    }
    p->rng = epoch_order(t->c.seed, p->epoch, d->n_docs, t->perm);
    t->perm_n = d->n_docs;
    t->perm_epoch = p->epoch;
    return TERN_OK;
}

tern_status tern_trainer_upcoming_docs(struct tern_trainer *t, const struct tern_train_data *d,
                                       uint64_t n, uint64_t *out, uint64_t *n_out)
{
    *n_out = 0;
    if (!d->n_docs || !n) return TERN_OK;
    if (n > d->n_docs) n = d->n_docs;
    if (train_buckets_on(t)) return train_bucket_fill(t, d, NULL, out, n, n_out);
    tern_status st = ensure_order(t, d);
    if (st) return st;
    /* the document being cut into pieces counts: its rest comes first */
    uint64_t c = t->dpos.cursor;
    for (; c < d->n_docs && *n_out < n; c++) out[(*n_out)++] = t->perm[c];
    if (*n_out == n) return TERN_OK;
    uint64_t *next = malloc(d->n_docs * sizeof *next); /* the next epoch's order */
    if (!next)
        return tern_fail(TERN_ERR_NOMEM, "train: out of memory for the order of %llu documents",
                         (unsigned long long)d->n_docs);
    epoch_order(t->c.seed, t->dpos.epoch + 1, d->n_docs, next);
    for (uint64_t i = 0; i < d->n_docs && *n_out < n; i++) out[(*n_out)++] = next[i];
    free(next);
    return TERN_OK;
}

tern_status train_batch_fill(struct tern_trainer *t, const struct tern_train_data *d,
                             struct train_batch *b)
{
    if (train_buckets_on(t)) return train_bucket_fill(t, d, b, NULL, 0, NULL);
    const int T = t->T;
    struct train_data_pos *p = &t->dpos;
    b->n_loss = 0;
    for (int s = 0; s < t->n_seq; s++) {
        const int s0 = s * T;
        int row = 0;
        for (;;) {
            tern_status st = ensure_order(t, d);
            if (st) return st;
            if (p->cursor >= d->n_docs) {
                p->epoch++;
                p->cursor = 0;
                p->piece = 0;
                continue;
            }
            const uint64_t doc = t->perm[p->cursor];
            const uint64_t a = d->off[doc], len = d->off[doc + 1] - a;
            const uint64_t first = p->piece * (uint64_t)T;
            if (first >= len) { /* document done (or empty) */
                p->cursor++;
                p->piece = 0;
                continue;
            }
            const int n = (int)(len - first < (uint64_t)T ? len - first : (uint64_t)T);
            if (n > T - row) break; /* starts the next sequence */
            st = train_lay_piece(t, d, b, s0, row, doc, first, n);
            if (st) return st;
            row += n;
            p->piece++;
            if (row == T) break;
        }
        train_pad_rows(b, s0, row, T);
    }
    return TERN_OK;
}

tern_status train_data_check_vocab(const struct tern_train_data *d, int V)
{
    for (uint64_t i = 0; i < d->n_tok; i++)
        if (d->tok[i] >= V)
            return tern_fail(TERN_ERR_FORMAT, "train data: token %llu: id %d is outside the "
                             "vocabulary (%d tokens)", (unsigned long long)i, d->tok[i], V);
    return TERN_OK;
}

bool train_batch_fill_ordered(struct tern_trainer *t, const struct tern_train_data *d,
                              struct train_batch *b, uint64_t *doc, uint64_t *piece)
{
    const int T = t->T;
    bool any = false;
    b->n_loss = 0;
    for (int s = 0; s < t->n_seq; s++) {
        const int s0 = s * T;
        int row = 0;
        while (*doc < d->n_docs) {
            const uint64_t a = d->off[*doc], len = d->off[*doc + 1] - a;
            const uint64_t first = *piece * (uint64_t)T;
            if (first >= len || (t->eval_bucket >= 0 && train_bucket_of(t, len) != t->eval_bucket)) {
                ++*doc;
                *piece = 0;
                continue;
            }
            const int n = (int)(len - first < (uint64_t)T ? len - first : (uint64_t)T);
            if (n > T - row) break;
            put_piece(b, s0, row, d->tok + a + first, d->mask + a + first, n,
                      kd_first(t, d, *doc, first), NULL, 1.0f);
            row += n;
            ++*piece;
            any = true;
            if (row == T) break;
        }
        train_pad_rows(b, s0, row, T);
    }
    return any;
}

void train_data_view(const struct tern_train_data *d, uint64_t *n_docs, uint64_t *n_tok,
                     const uint64_t **off, const int32_t **tok, const uint8_t **mask)
{
    *n_docs = d->n_docs;
    *n_tok = d->n_tok;
    *off = d->off;
    *tok = d->tok;
    *mask = d->mask;
}

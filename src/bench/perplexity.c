/* perplexity.c — tern_perplexity and tern_kl_divergence: the measurement of llama.cpp's
 * llama-perplexity (commit c392e50, examples/perplexity: perplexity() and kl_divergence()),
 * written again on tern's public API.
 *
 * Read include/tern_bench.h "perplexity" first: how the text is chunked, which tokens are
 * scored, the base file's layout. The per-token arithmetic follows llama.cpp's operation by
 * operation (which quantities are float, which sums double), so the figures agree to the last
 * printed digit whenever the logits do. The one deliberate difference is the reduction order:
 * each scored row's values are kept and summed in row order, so results do not depend on how
 * many threads scored the rows (llama.cpp adds per-thread partial sums as threads finish). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tern_bench.h"

#include "util/error.h"
#include "util/threadpool.h"

#define PPL_MAGIC "_logits_"
#define PPL_MAX_CTX (1 << 22)

/* ------------------------------------------------------------------ text -> tokens */

/* Length of the UTF-8 sequence at s[0..n) as llama.cpp's decoder (unicode_cpt_from_utf8)
 * accepts it: lead byte and continuation bytes checked, overlong forms and surrogates not.
 * 0 = a byte llama.cpp turns into U+FFFD. A 4-byte form above U+10FFFF is 0 too: llama.cpp
 * decodes it but then fails to re-encode it and aborts; reading it as U+FFFD never crashes. */
static size_t llama_utf8_len(const unsigned char *s, size_t n)
{
    const unsigned c = s[0];
    size_t k;
    if (c < 0x80) return 1;
    if (!(c & 0x40)) return 0;
    k = !(c & 0x20) ? 2 : !(c & 0x10) ? 3 : !(c & 0x08) ? 4 : 0;
    if (k == 0 || n < k) return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (k == 4 && (((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12)) > 0x10FFFF) return 0;
    return k;
}

tern_status tern_ppl_tokenize(struct tern_tokenizer *tok, const char *text, size_t len,
                              int32_t **ids, size_t *n, size_t *n_invalid)
{
    if (!tok || (!text && len) || !ids || !n) return tern_fail(TERN_ERR_ARG, "perplexity: NULL argument");
    *ids = NULL;
    *n = 0;
    /* llama.cpp's -f drops one final newline */
    if (len && text[len - 1] == '\n') len--;
    /* byte-level BPE: llama.cpp's pre-tokenizer decodes the text to code points, so a malformed
     * byte becomes U+FFFD (3 bytes); SentencePiece keeps raw bytes (byte tokens), as tern does */
    const bool bpe = !strcmp(tern_tokenizer_model(tok), "gpt2");
    const unsigned char *u = (const unsigned char *)text;
    size_t bad = 0;
    for (size_t i = 0; bpe && i < len;) {
        size_t k = llama_utf8_len(u + i, len - i);
        bad += k == 0;
        i += k ? k : 1;
    }
    if (n_invalid) *n_invalid = bad;
    char *fixed = NULL;
    if (bad) {
        if (len > (SIZE_MAX - 1) / 3 || !(fixed = malloc(len + 2 * bad + 1)))
            return tern_fail(TERN_ERR_NOMEM, "perplexity: out of memory for %zu bytes of text", len);
        size_t o = 0;
        for (size_t i = 0; i < len;) {
            size_t k = llama_utf8_len(u + i, len - i);
            if (k) {
                memcpy(fixed + o, text + i, k);
                o += k;
                i += k;
            } else {
                memcpy(fixed + o, "\xEF\xBF\xBD", 3);
                o += 3;
                i++;
            }
        }
        text = fixed;
        len = o;
    }
    size_t cap = 0;
    tern_status st = tern_tokenize_grow(tok, text, len, TERN_TOK_ADD_SPECIAL, ids, &cap, n);
    free(fixed);
    if (st) {
        free(*ids);
        *ids = NULL;
        *n = 0;
    }
    return st;
}

/* Does tokenizing with TERN_TOK_ADD_SPECIAL put BOS in front / EOS behind? Asked of the
 * tokenizer itself ("a" with and without), so it is its metadata rule whatever the vocabulary. */
static tern_status special_rule(struct tern_tokenizer *tok, bool *add_bos, bool *add_eos)
{
    int32_t a[16], b[16];
    size_t na, nb;
    tern_status st;
    if ((st = tern_tokenize(tok, "a", 1, TERN_TOK_ADD_SPECIAL, a, 16, &na)) ||
        (st = tern_tokenize(tok, "a", 1, 0, b, 16, &nb)))
        return st;
    const int32_t bos = tern_token_bos(tok);
    *add_bos = bos >= 0 && na > nb && a[0] == bos && !memcmp(a + 1, b, nb * sizeof *b);
    *add_eos = na > nb + (*add_bos ? 1 : 0);
    return TERN_OK;
}

/* ------------------------------------------------------------------ one scored row */

/* What one scored row contributes; kept per row so the sums are made in row order. */
struct ppl_row {
    double nll;           /* perplexity: -log p(target) */
    float q_nll, b_nll;   /* KL: -log p(target) of the model and of the base (float, as llama.cpp) */
    double kld;           /* KL: sum_j p_base(j) (log p_base(j) - log p(j)) */
    float p_diff;         /* KL: p(target) - p_base(target) */
    bool same_top;        /* KL: argmax of the model = argmax of the base */
};

enum ppl_mode { MODE_PPL, MODE_SAVE, MODE_KLD };

/* llama.cpp's log-softmax for perplexity: max in float, sum of expf in double, the target's
 * log-probability as (float)(logit - max) - log(sum). */
static double row_nll(const float *l, int n, int tok)
{
    float max = l[0];
    for (int i = 1; i < n; i++) max = max < l[i] ? l[i] : max;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += expf(l[i] - max);
    return -((double)(l[tok] - max) - log(sum));
}

/* The same while saving the base row: the log-probabilities from max - 16 up, as 16-bit steps
 * above the row's floor (q[0..4) hold the float step and floor, q[4..4+n) the steps). The NLL
 * is then computed in float, as llama.cpp does on this path. */
static double row_save(const float *l, int n, int tok, uint16_t *q)
{
    float max = l[0], min = l[0];
    for (int i = 1; i < n; i++) {
        max = max < l[i] ? l[i] : max;
        min = l[i] < min ? l[i] : min;
    }
    if (min < max - 16) min = max - 16;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += expf(l[i] - max);
    const float lse = (float)log(sum);
    const float floor_lp = min - max - lse;
    const float scale = (max - min) / 65535.f;
    memcpy(q, &scale, sizeof scale);
    memcpy(q + 2, &floor_lp, sizeof floor_lp);
    uint16_t *v = q + 4;
    if (scale != 0) {
        const float inv = 1 / scale;
        /* lrintf rounds half to even, as llama.cpp's nearest_int does on [0, 65535] */
        for (int i = 0; i < n; i++) v[i] = l[i] > min ? (uint16_t)lrintf(inv * (l[i] - min)) : 0;
    } else {
        memset(v, 0, (size_t)n * sizeof *v);
    }
    return max + lse - l[tok];
}

/* KL divergence of the row's distribution from the base row q (row_save's layout). */
static void row_kld(const float *l, int n, int tok, const uint16_t *q, struct ppl_row *r)
{
    float max = l[0];
    int imax = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > max) {
            max = l[i];
            imax = i;
        }
    double sum = 0;
    for (int i = 0; i < n; i++) sum += expf(l[i] - max);
    const float lse = (float)log(sum);
    float scale, floor_lp;
    memcpy(&scale, q, sizeof scale);
    memcpy(&floor_lp, q + 2, sizeof floor_lp);
    const uint16_t *v = q + 4;
    r->q_nll = max + lse - l[tok];
    r->b_nll = -(scale * v[tok] + floor_lp);
    const float log_z = max + lse;
    double kld = 0;
    int ibase = 0;
    float bmax = 0;
    for (int i = 0; i < n; i++) {
        const float lb = scale * v[i] + floor_lp;
        if (i == 0 || lb > bmax) {
            bmax = lb;
            ibase = i;
        }
        /* the file holds nothing below max - 16: those terms are taken as 0 */
        if (lb > -16.f) kld += expf(lb) * (lb - l[i] + log_z);
    }
    r->kld = kld;
    r->same_top = imax == ibase;
    r->p_diff = expf(-r->q_nll) - expf(-r->b_nll);
}

/* ------------------------------------------------------------------ statistics */

/* Sums over the scored rows, added in row order. */
struct ppl_sums {
    int64_t count;
    double nll, nll2;                         /* perplexity */
    double q, q2, b, b2, qb;                  /* KL: NLL of the model (q) and base (b) */
    double kld, kld2, dp, dp2, dp4;
    int64_t same_top;
};

static void sums_add(struct ppl_sums *s, enum ppl_mode mode, const struct ppl_row *r)
{
    s->count++;
    if (mode != MODE_KLD) {
        s->nll += r->nll;
        s->nll2 += r->nll * r->nll;
        return;
    }
    /* products of floats stay float, as in llama.cpp's accumulation */
    s->q += r->q_nll;
    s->q2 += r->q_nll * r->q_nll;
    s->b += r->b_nll;
    s->b2 += r->b_nll * r->b_nll;
    s->qb += r->q_nll * r->b_nll;
    s->kld += r->kld;
    s->kld2 += r->kld * r->kld;
    s->same_top += r->same_top;
    s->dp += r->p_diff;
    const double d2 = r->p_diff * r->p_diff;
    s->dp2 += d2;
    s->dp4 += d2 * d2;
}

/* Mean and its uncertainty, as llama.cpp's mean_and_uncertainty (0 for <= 10 values). */
static void mean_unc(double sum, double sum2, int64_t count, double *mean, double *unc)
{
    *mean = *unc = 0;
    if (count < 1) return;
    const double f = sum / (double)count, var = sum2 / (double)count - f * f;
    *mean = f;
    *unc = var > 0 && count > 10 ? sqrt(var / (double)(count - 1)) : 0;
}

static double covariance(double sa, double sb, double sab, int64_t count)
{
    if (count < 10) return 0;
    const double c = (double)count;
    return (sab / c - (sa / c) * (sb / c)) / (c - 1);
}

/* Interpolated quantile of sorted v[0..n) (n >= 1), in float as llama.cpp computes it. */
static double quantile(const float *v, size_t n, float fraction)
{
    if (fraction <= 0) return v[0];
    if (fraction >= 1) return v[n - 1];
    float p = fraction * (float)(n - 1);
    size_t ip = (size_t)p;
    p -= (float)ip;
    return (1 - p) * v[ip] + p * v[ip + 1 < n ? ip + 1 : n - 1];
}

static double median(const float *v, size_t n)
{
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2] + v[n / 2 - 1]);
}

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The report's figures from the sums; with kv/dv (the per-row values, sorted here) the
 * quantiles too. */
static void fill_report(struct tern_ppl_report *r, enum ppl_mode mode, const struct ppl_sums *s,
                        float *kv, float *dv)
{
    r->n_scored = s->count;
    if (mode != MODE_KLD) {
        /* llama.cpp: PPL = exp(mean); uncertainty ppl x sqrt(var / (count - 1)) */
        r->ppl = r->ppl_err = 0;
        if (s->count < 1) return;
        const double mean = s->nll / (double)s->count;
        const double var = s->nll2 / (double)s->count - mean * mean;
        r->ppl = exp(mean);
        r->ppl_err = var > 0 && s->count > 1 ? sqrt(var / (double)(s->count - 1)) * r->ppl : 0;
        return;
    }
    struct tern_kld_stats *k = &r->kld;
    r->has_kld = true;
    double lq, lq_u, lb, lb_u;
    mean_unc(s->q, s->q2, s->count, &lq, &lq_u);
    mean_unc(s->b, s->b2, s->count, &lb, &lb_u);
    r->ppl = exp(lq);
    r->ppl_err = r->ppl * lq_u;
    k->ppl_base = exp(lb);
    k->ppl_base_err = k->ppl_base * lb_u;
    const double cov = covariance(s->q, s->b, s->qb, s->count);
    k->log_ppl_cor = lq_u > 0 && lb_u > 0 ? cov / (lq_u * lb_u) : 0;
    k->log_ppl_ratio = lq - lb;
    const double ratio_var = lq_u * lq_u + lb_u * lb_u - 2 * cov;
    k->log_ppl_ratio_err = ratio_var > 0 ? sqrt(ratio_var) : 0;
    k->ppl_ratio = exp(k->log_ppl_ratio);
    k->ppl_ratio_err = k->ppl_ratio * k->log_ppl_ratio_err;
    k->ppl_diff = r->ppl - k->ppl_base;
    const double diff_var = r->ppl_err * r->ppl_err + k->ppl_base_err * k->ppl_base_err -
                            2 * r->ppl * k->ppl_base * cov;
    k->ppl_diff_err = diff_var > 0 ? sqrt(diff_var) : 0;
    mean_unc(s->kld, s->kld2, s->count, &k->kld, &k->kld_err);
    mean_unc(s->dp, s->dp2, s->count, &k->dp, &k->dp_err);
    double mse, mse_u;
    mean_unc(s->dp2, s->dp4, s->count, &mse, &mse_u);
    k->dp_rms = sqrt(mse);
    k->dp_rms_err = k->dp_rms > 0 ? 0.5 / k->dp_rms * mse_u : 0;
    k->same_top = s->count ? (double)s->same_top / (double)s->count : 0;
    k->same_top_err = s->count > 1 ? sqrt(k->same_top * (1 - k->same_top) / (double)(s->count - 1)) : 0;
    if (!kv || s->count < 1) return;
    const size_t n = (size_t)s->count;
    qsort(kv, n, sizeof *kv, cmp_float);
    qsort(dv, n, sizeof *dv, cmp_float);
    k->kld_max = kv[n - 1];
    k->kld_p999 = quantile(kv, n, 0.999f);
    k->kld_p99 = quantile(kv, n, 0.990f);
    k->kld_median = median(kv, n);
    k->kld_p10 = quantile(kv, n, 0.100f);
    k->kld_p5 = quantile(kv, n, 0.050f);
    k->kld_p1 = quantile(kv, n, 0.010f);
    k->kld_min = kv[0];
    k->dp_max = dv[n - 1];
    k->dp_p999 = quantile(dv, n, 0.999f);
    k->dp_p99 = quantile(dv, n, 0.990f);
    k->dp_p95 = quantile(dv, n, 0.950f);
    k->dp_p90 = quantile(dv, n, 0.900f);
    k->dp_p75 = quantile(dv, n, 0.750f);
    k->dp_median = median(dv, n);
    k->dp_p25 = quantile(dv, n, 0.250f);
    k->dp_p10 = quantile(dv, n, 0.100f);
    k->dp_p5 = quantile(dv, n, 0.050f);
    k->dp_p1 = quantile(dv, n, 0.010f);
    k->dp_p01 = quantile(dv, n, 0.001f);
    k->dp_min = dv[0];
}

/* ------------------------------------------------------------------ the chunk loop */

struct ppl_run {
    enum ppl_mode mode;
    struct tern_context *ctx;
    struct tp *tp;
    int n_ctx, n_batch, first, rows, n_vocab;
    size_t nv;             /* uint16 per saved row: 2 floats + n_vocab rounded up to even */
    int32_t bos;
    bool add_bos;
    int32_t *chunk;        /* (n_ctx) the chunk being decoded, BOS in front */
    bool *want;            /* (n_batch) rows of a pass that want logits */
    const float **lrow;    /* (rows) logits of each scored row (valid during its pass) */
    struct ppl_row *row;   /* (rows) */
    uint16_t *q;           /* (rows, nv) base rows: written (save) or read (KL) */
};

/* Score rows [r0, r0 + n) of the current chunk, split into tp chunks of consecutive rows. */
struct score_job {
    struct ppl_run *run;
    int r0, n;
};

static void score_rows(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    const struct score_job *j = arg;
    struct ppl_run *run = j->run;
    long long lo, hi;
    tp_split(j->n, chunk, n_chunks, 1, &lo, &hi);
    for (int r = j->r0 + (int)lo; r < j->r0 + (int)hi; r++) {
        const float *l = run->lrow[r];
        const int tok = run->chunk[run->first + r + 1];
        struct ppl_row *o = &run->row[r];
        uint16_t *q = run->q ? run->q + (size_t)r * run->nv : NULL;
        switch (run->mode) {
        case MODE_PPL: o->nll = row_nll(l, run->n_vocab, tok); break;
        case MODE_SAVE: o->nll = row_save(l, run->n_vocab, tok, q); break;
        case MODE_KLD: row_kld(l, run->n_vocab, tok, q, o); break;
        }
    }
}

static void run_free(struct ppl_run *run)
{
    if (run->ctx) tern_context_free(run->ctx);
    if (run->tp) tp_free(run->tp);
    free(run->chunk);
    free(run->want);
    free(run->lrow);
    free(run->row);
    free(run->q);
    memset(run, 0, sizeof *run);
}

static int online_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Context, scoring pool and the per-chunk buffers for chunks of n_ctx. */
static tern_status run_init(struct ppl_run *run, struct tern_model *m, struct tern_tokenizer *tok,
                            enum ppl_mode mode, int n_ctx, const struct tern_ppl_params *p)
{
    memset(run, 0, sizeof *run);
    bool add_eos;
    tern_status st = special_rule(tok, &run->add_bos, &add_eos);
    if (st) return st;
    if (add_eos)
        return tern_fail(TERN_ERR_UNSUPPORTED, "perplexity: the tokenizer appends EOS to every "
                         "text (add_eos_token); llama-perplexity refuses such models too");
    run->mode = mode;
    run->bos = tern_token_bos(tok);
    run->n_ctx = n_ctx;
    run->n_batch = p->n_batch > 0 ? p->n_batch : 512;
    if (run->n_batch > n_ctx) run->n_batch = n_ctx;
    run->first = n_ctx / 2;
    run->rows = n_ctx - 1 - run->first;
    run->n_vocab = tern_model_n_vocab(m);
    run->nv = 2 * (((size_t)run->n_vocab + 1) / 2) + 4;
    const int threads = p->n_threads > 0 ? p->n_threads : online_cpus();
    struct tern_context_params cp = tern_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = run->n_batch;
    cp.n_threads = threads;
    if ((st = tern_context_create(m, &cp, &run->ctx)) || (st = tp_create(threads, &run->tp)) ||
        (p->n_lora && (st = tern_context_set_adapters(run->ctx, p->lora, p->lora_scales, p->n_lora)))) {
        run_free(run);
        return st;
    }
    run->chunk = malloc((size_t)n_ctx * sizeof *run->chunk);
    run->want = malloc((size_t)run->n_batch * sizeof *run->want);
    run->lrow = calloc((size_t)run->rows, sizeof *run->lrow);
    run->row = calloc((size_t)run->rows, sizeof *run->row);
    if (mode != MODE_PPL) run->q = calloc((size_t)run->rows * run->nv, sizeof *run->q);
    if (!run->chunk || !run->want || !run->lrow || !run->row || (mode != MODE_PPL && !run->q)) {
        run_free(run);
        return tern_fail(TERN_ERR_NOMEM, "perplexity: out of memory for chunks of %d tokens", n_ctx);
    }
    return TERN_OK;
}

/* Decode one chunk from an empty cache, in passes of at most n_batch tokens, and score its
 * rows into run->row (and run->q when saving). Logits are asked only for the scored rows. */
static tern_status run_chunk(struct ppl_run *run, const int32_t *tokens)
{
    memcpy(run->chunk, tokens, (size_t)run->n_ctx * sizeof *tokens);
    if (run->add_bos) run->chunk[0] = run->bos;
    tern_status st = tern_kv_truncate(run->ctx, 0);
    if (st) return st;
    /* equal passes (as tern_decode splits): a short last pass would take other kernels */
    const int n_pass = (run->n_ctx + run->n_batch - 1) / run->n_batch;
    const int per = (run->n_ctx + n_pass - 1) / n_pass;
    const int last_row_pos = run->n_ctx - 2; /* the last token is only predicted */
    for (int b0 = 0; b0 < run->n_ctx; b0 += per) {
        const int len = run->n_ctx - b0 < per ? run->n_ctx - b0 : per;
        const int lo = b0 > run->first ? b0 : run->first;
        const int hi = b0 + len - 1 < last_row_pos ? b0 + len - 1 : last_row_pos; /* inclusive */
        for (int i = 0; i < len; i++) run->want[i] = b0 + i >= lo && b0 + i <= hi;
        const struct tern_batch b = {.n = len, .tokens = run->chunk + b0,
                                     .logits = lo <= hi ? run->want : NULL};
        if ((st = tern_decode_batch(run->ctx, &b))) return st;
        if (lo > hi) continue;
        for (int pos = lo; pos <= hi; pos++) {
            run->lrow[pos - run->first] = tern_context_logits(run->ctx, pos - b0);
            if (!run->lrow[pos - run->first])
                return tern_fail(TERN_ERR_ARG, "perplexity: no logits for position %d", pos);
        }
        struct score_job job = {run, lo - run->first, hi - lo + 1};
        tp_run(run->tp, score_rows, &job, job.n < 1024 ? job.n : 1024);
    }
    return TERN_OK;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------ base file */

/* The base file being written: a temporary file beside the path, renamed when complete. */
struct base_out {
    const char *path;
    char *tmp;
    FILE *f;
};

static tern_status base_open(struct base_out *o, const char *path)
{
    struct stat sb;
    o->path = path;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return tern_fail(TERN_ERR_IO, "%s: is a directory", path);
    const size_t plen = strlen(path);
    if (!(o->tmp = malloc(plen + 8))) return tern_fail(TERN_ERR_NOMEM, "perplexity: out of memory");
    memcpy(o->tmp, path, plen);
    memcpy(o->tmp + plen, ".XXXXXX", 8);
    const int fd = mkstemp(o->tmp);
    if (fd < 0 || !(o->f = fdopen(fd, "wb"))) {
        const int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(o->tmp);
        }
        tern_status st = tern_fail(TERN_ERR_IO, "cannot write %s (creating %s beside it: %s)", path,
                                   o->tmp, strerror(e));
        free(o->tmp);
        o->tmp = NULL;
        return st;
    }
    /* the mode a plain fopen gives (mkstemp makes 0600) */
    const mode_t um = umask(0);
    umask(um);
    fchmod(fd, 0666 & ~um);
    return TERN_OK;
}

static tern_status base_write(struct base_out *o, const void *p, size_t size, size_t n)
{
    if (n && fwrite(p, size, n, o->f) != n)
        return tern_fail(TERN_ERR_IO, "%s: write failed: %s", o->tmp, strerror(errno));
    return TERN_OK;
}

/* Complete (st == TERN_OK: flush, sync, rename) or abandon (remove the temporary file). */
static tern_status base_close(struct base_out *o, tern_status st)
{
    if (!o->f) return st;
    if (!st && (fflush(o->f) != 0 || fsync(fileno(o->f)) != 0))
        st = tern_fail(TERN_ERR_IO, "%s: write failed: %s", o->tmp, strerror(errno));
    if (fclose(o->f) != 0 && !st) st = tern_fail(TERN_ERR_IO, "%s: close failed: %s", o->tmp, strerror(errno));
    o->f = NULL;
    if (!st && rename(o->tmp, o->path) != 0)
        st = tern_fail(TERN_ERR_IO, "cannot rename %s to %s: %s", o->tmp, o->path, strerror(errno));
    if (st) unlink(o->tmp);
    free(o->tmp);
    o->tmp = NULL;
    return st;
}

/* ------------------------------------------------------------------ perplexity */

struct tern_ppl_params tern_ppl_default_params(void)
{
    return (struct tern_ppl_params){.n_ctx = 512};
}

static tern_status check_params(const struct tern_ppl_params *p)
{
    if (p->n_ctx < 4 || p->n_ctx > PPL_MAX_CTX)
        return tern_fail(TERN_ERR_ARG, "perplexity: n_ctx %d is outside 4..%d", p->n_ctx, PPL_MAX_CTX);
    if (p->n_chunks < 0 || p->n_batch < 0 || p->n_threads < 0)
        return tern_fail(TERN_ERR_ARG, "perplexity: negative n_chunks, n_batch or n_threads");
    return TERN_OK;
}

tern_status tern_perplexity(struct tern_model *m, struct tern_tokenizer *tok, const int32_t *tokens,
                            size_t n, const struct tern_ppl_params *p, struct tern_ppl_report *out)
{
    if (!m || !tok || (!tokens && n) || !p || !out) return tern_fail(TERN_ERR_ARG, "perplexity: NULL argument");
    memset(out, 0, sizeof *out);
    tern_status st = check_params(p);
    if (st) return st;
    const int n_ctx = p->n_ctx;
    if (n < 2 * (size_t)n_ctx)
        return tern_fail(TERN_ERR_RANGE, "the text has %zu tokens; a context of %d (-c) needs at "
                         "least %d (2 x %d)", n, n_ctx, 2 * n_ctx, n_ctx);
    const int n_vocab = tern_model_n_vocab(m);
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return tern_fail(TERN_ERR_ARG, "perplexity: token %d at index %zu is outside the "
                             "vocabulary of %d", tokens[i], i, n_vocab);
    const size_t max_chunks = n / (size_t)n_ctx;
    const int n_chunks = p->n_chunks > 0 && (size_t)p->n_chunks < max_chunks ? p->n_chunks
                         : max_chunks > INT32_MAX ? INT32_MAX : (int)max_chunks;
    struct ppl_run run;
    if ((st = run_init(&run, m, tok, p->kl_base_path ? MODE_SAVE : MODE_PPL, n_ctx, p))) return st;
    struct base_out bo = {0};
    if (p->kl_base_path) {
        const int32_t hdr[3] = {n_ctx, n_vocab, n_chunks};
        if ((st = base_open(&bo, p->kl_base_path)) || (st = base_write(&bo, PPL_MAGIC, 1, 8)) ||
            (st = base_write(&bo, &hdr[0], sizeof hdr[0], 1)) ||
            (st = base_write(&bo, &hdr[1], sizeof hdr[1], 2)) ||
            (st = base_write(&bo, tokens, sizeof *tokens, (size_t)n_chunks * (size_t)n_ctx)))
            goto done;
    }
    out->n_ctx = n_ctx;
    out->n_batch = run.n_batch;
    out->n_chunks_total = n_chunks;
    out->n_tokens = (int64_t)n;
    out->add_bos = run.add_bos;
    struct ppl_sums sums = {0};
    const double t0 = now_s();
    for (int c = 0; c < n_chunks; c++) {
        if ((st = run_chunk(&run, tokens + (size_t)c * (size_t)n_ctx))) {
            tern_fail_prefix(st, "perplexity: chunk %d: ", c + 1);
            goto done;
        }
        for (int r = 0; r < run.rows; r++) sums_add(&sums, run.mode, &run.row[r]);
        if (bo.f && (st = base_write(&bo, run.q, sizeof *run.q, (size_t)run.rows * run.nv))) goto done;
        out->n_chunks = c + 1;
        out->seconds = now_s() - t0;
        fill_report(out, run.mode, &sums, NULL, NULL);
        if (p->progress) p->progress(out, p->user);
    }
done:
    if (bo.tmp) st = base_close(&bo, st);
    run_free(&run);
    return st;
}

/* ------------------------------------------------------------------ KL divergence */

tern_status tern_kl_divergence(struct tern_model *m, struct tern_tokenizer *tok,
                               const char *base_path, const struct tern_ppl_params *p,
                               struct tern_ppl_report *out)
{
    if (!m || !tok || !base_path || !p || !out) return tern_fail(TERN_ERR_ARG, "kl-divergence: NULL argument");
    memset(out, 0, sizeof *out);
    if (p->n_chunks < 0 || p->n_batch < 0 || p->n_threads < 0)
        return tern_fail(TERN_ERR_ARG, "kl-divergence: negative n_chunks, n_batch or n_threads");
    FILE *f = fopen(base_path, "rb");
    if (!f) return tern_fail(TERN_ERR_IO, "cannot open base file %s: %s", base_path, strerror(errno));
    tern_status st = TERN_OK;
    int32_t *tokens = NULL;
    float *kv = NULL, *dv = NULL;
    struct ppl_run run = {0};
    char magic[8];
    int32_t hdr[3];
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) {
        st = tern_fail(TERN_ERR_IO, "%s: not a regular file", base_path);
        goto done;
    }
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, PPL_MAGIC, 8) || fread(hdr, sizeof *hdr, 3, f) != 3) {
        st = tern_fail(TERN_ERR_FORMAT, "%s: not a base log-probability file (no \"%s\" header; "
                       "write one with tern perplexity --kl-divergence-base)", base_path, PPL_MAGIC);
        goto done;
    }
    const int n_ctx = hdr[0], n_vocab = hdr[1], n_chunk_file = hdr[2];
    if (n_ctx < 3 || n_ctx > PPL_MAX_CTX || n_chunk_file < 1) {
        st = tern_fail(TERN_ERR_FORMAT, "%s: header gives n_ctx %d and %d chunks (byte offset 8)",
                       base_path, n_ctx, n_chunk_file);
        goto done;
    }
    if (n_vocab != tern_model_n_vocab(m)) {
        st = tern_fail(TERN_ERR_ARG, "%s: written for a vocabulary of %d tokens, the model has %d "
                       "(the base must share the model's tokenizer)", base_path, n_vocab,
                       tern_model_n_vocab(m));
        goto done;
    }
    /* the whole size is known from the header: a file cut short (an interrupted run) or with
     * anything after its last chunk is refused before any decoding */
    const uint64_t rows = (uint64_t)(n_ctx - 1 - n_ctx / 2);
    const uint64_t nv = 2 * (((uint64_t)n_vocab + 1) / 2) + 4;
    uint64_t chunk_bytes = 0, tok_bytes = 0, want = 0;
    if (__builtin_mul_overflow(rows * nv * 2, (uint64_t)n_chunk_file, &chunk_bytes) ||
        __builtin_mul_overflow((uint64_t)n_ctx * 4, (uint64_t)n_chunk_file, &tok_bytes) ||
        __builtin_add_overflow(chunk_bytes, tok_bytes + 20, &want) || (uint64_t)sb.st_size != want) {
        st = tern_fail(TERN_ERR_FORMAT, "%s: %lld bytes, but n_ctx %d, n_vocab %d and %d chunks "
                       "make %llu (cut short, or not such a file)", base_path,
                       (long long)sb.st_size, n_ctx, n_vocab, n_chunk_file, (unsigned long long)want);
        goto done;
    }
    const size_t n_tok = (size_t)n_ctx * (size_t)n_chunk_file;
    if (!(tokens = malloc(n_tok * sizeof *tokens))) {
        st = tern_fail(TERN_ERR_NOMEM, "kl-divergence: out of memory for %zu tokens", n_tok);
        goto done;
    }
    if (fread(tokens, sizeof *tokens, n_tok, f) != n_tok) {
        st = tern_fail(TERN_ERR_IO, "%s: read failed in the tokens", base_path);
        goto done;
    }
    for (size_t i = 0; i < n_tok; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            st = tern_fail(TERN_ERR_FORMAT, "%s: token %d at index %zu (byte offset %zu) is outside "
                           "the vocabulary", base_path, tokens[i], i, 20 + 4 * i);
            goto done;
        }
    const int n_chunks = p->n_chunks > 0 && p->n_chunks < n_chunk_file ? p->n_chunks : n_chunk_file;
    if ((st = run_init(&run, m, tok, MODE_KLD, n_ctx, p))) goto done;
    const size_t n_rows = (size_t)n_chunks * (size_t)run.rows;
    kv = malloc(n_rows * sizeof *kv);
    dv = malloc(n_rows * sizeof *dv);
    if (!kv || !dv) {
        st = tern_fail(TERN_ERR_NOMEM, "kl-divergence: out of memory for %zu rows", n_rows);
        goto done;
    }
    out->n_ctx = n_ctx;
    out->n_batch = run.n_batch;
    out->n_chunks_total = n_chunks;
    out->n_tokens = (int64_t)n_tok;
    out->add_bos = run.add_bos;
    struct ppl_sums sums = {0};
    const double t0 = now_s();
    for (int c = 0; c < n_chunks; c++) {
        if (fread(run.q, sizeof *run.q, (size_t)run.rows * run.nv, f) != (size_t)run.rows * run.nv) {
            st = tern_fail(TERN_ERR_IO, "%s: read failed in chunk %d", base_path, c + 1);
            goto done;
        }
        if ((st = run_chunk(&run, tokens + (size_t)c * (size_t)n_ctx))) {
            tern_fail_prefix(st, "kl-divergence: chunk %d: ", c + 1);
            goto done;
        }
        for (int r = 0; r < run.rows; r++) {
            sums_add(&sums, MODE_KLD, &run.row[r]);
            kv[(size_t)c * run.rows + r] = (float)run.row[r].kld;
            dv[(size_t)c * run.rows + r] = run.row[r].p_diff;
        }
        out->n_chunks = c + 1;
        out->seconds = now_s() - t0;
        fill_report(out, MODE_KLD, &sums, NULL, NULL);
        if (p->progress) p->progress(out, p->user);
    }
    fill_report(out, MODE_KLD, &sums, kv, dv);
done:
    fclose(f);
    run_free(&run);
    free(tokens);
    free(kv);
    free(dv);
    return st;
}

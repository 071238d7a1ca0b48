/* lora_apply.c — adapters attached to a context: tern_context_set_adapters builds the per-slot
 * term table and the A x scratch (allocated there, so decoding never allocates), and the
 * forward pass calls lora_add / lora_add_embd where a slot has terms. Read lora.h first.
 *
 * y += scale * B (A x) in F32, A x first (r is small): step one computes every term's A x for
 * every token of the group of slots that share an input (a layer's q, k, v; gate, up), one
 * (token, rank row) dot per unit; step two splits the group's output rows over the threads
 * and adds scale * (A x)_k times row k of B^T (kept transposed at load) to them, k by k. Each
 * dot runs in a fixed order whatever the batch or the thread count, so a token gets the same
 * delta in any batch. Both steps are timed as F32 matmuls when the context profiles.
 *
 * Decoding (at most LORA_FUSED_TOKENS tokens) takes one step instead of two: every thread
 * computes the whole A x itself, into its own scratch, and goes on to its rows of B. The dots are
 * the same in the same order, so the delta is bit for bit the two-step one; what it saves is a
 * hand-off between the threads per group (eight per layer otherwise), which at one token costs
 * more than the duplicated dots (r x n_in each: a few microseconds). */
#include <stdlib.h>
#include <string.h>

#include "model/context.h"
#include "model/forward.h"
#include "model/lora.h"
#include "kernels/vec.h"
#include "util/error.h"

/* ---------------------------------------------------------------- attaching */

void lora_set_free(struct lora_set *ls)
{
    if (!ls) return;
    free(ls->first);
    free(ls->terms);
    free(ls->ax);
    free(ls->ax_thread);
    free(ls);
}

int tern_context_n_adapters(const struct tern_context *ctx)
{
    return ctx->lora ? ctx->lora->n_adapters : 0;
}

/* Sum of ranks of the terms of slots [s0, s0 + cnt). */
static int group_rank(const struct lora_set *ls, int s0, int cnt)
{
    int r = 0;
    for (int s = s0; s < s0 + cnt; s++)
        for (int k = ls->first[s]; k < ls->first[s + 1]; k++) r += ls->terms[k].rank;
    return r;
}

tern_status tern_context_set_adapters(struct tern_context *ctx, struct tern_lora *const *adapters,
                                      const float *scales, int n)
{
    if (!ctx || n < 0 || (n > 0 && !adapters))
        return tern_fail(TERN_ERR_ARG, "tern_context_set_adapters: bad arguments (n %d)", n);
    const struct tern_model *m = ctx->model;
    if (n == 0) {
        lora_set_free(ctx->lora);
        ctx->lora = NULL;
        return TERN_OK;
    }
    if (ctx->mtp)
        return tern_fail(TERN_ERR_UNSUPPORTED, "LoRA adapters: not in an MTP context");
    if (n > LORA_MAX_ADAPTERS)
        return tern_fail(TERN_ERR_RANGE, "LoRA adapters: %d attached at once, at most %d", n,
                         LORA_MAX_ADAPTERS);
    int n_terms = 0;
    for (int i = 0; i < n; i++) {
        const struct tern_lora *a = adapters[i];
        if (!a) return tern_fail(TERN_ERR_ARG, "tern_context_set_adapters: adapter %d is NULL", i);
        if (a->model != m && a->model->gguf != m->gguf)
            return tern_fail(TERN_ERR_ARG, "LoRA adapter %d was loaded for another model", i);
        const float sc = scales ? scales[i] : 1.0f;
        if (!(sc == sc) || sc > 1e30f || sc < -1e30f)
            return tern_fail(TERN_ERR_ARG, "LoRA adapter %d: scale is not a finite number", i);
        n_terms += a->n_targets;
    }
    const int n_slots = lora_n_slots(m);
    struct lora_set *ls = calloc(1, sizeof *ls);
    if (ls) {
        ls->first = calloc((size_t)n_slots + 1, sizeof *ls->first);
        ls->terms = calloc((size_t)(n_terms ? n_terms : 1), sizeof *ls->terms);
    }
    if (!ls || !ls->first || !ls->terms) {
        lora_set_free(ls);
        return tern_fail(TERN_ERR_NOMEM, "LoRA adapters: out of memory");
    }
    ls->n_adapters = n;
    ls->n_slots = n_slots;
    /* counting sort of the terms by slot, adapters in the order given */
    for (int i = 0; i < n; i++)
        for (int k = 0; k < adapters[i]->n_targets; k++) ls->first[adapters[i]->t[k].slot + 1]++;
    for (int s = 0; s < n_slots; s++) ls->first[s + 1] += ls->first[s];
    int32_t *fill = calloc((size_t)n_slots, sizeof *fill);
    if (!fill) {
        lora_set_free(ls);
        return tern_fail(TERN_ERR_NOMEM, "LoRA adapters: out of memory");
    }
    for (int i = 0; i < n; i++) {
        const struct tern_lora *a = adapters[i];
        const float sc = scales ? scales[i] : 1.0f;
        for (int k = 0; k < a->n_targets; k++) {
            const struct lora_target *t = &a->t[k];
            const struct model_weight *w = lora_slot_weight(m, t->slot);
            if (!w || w->cols != t->n_in || w->rows != t->n_out) {
                free(fill);
                lora_set_free(ls);
                return tern_fail(TERN_ERR_ARG, "LoRA adapter %d: '%s' does not fit this model", i,
                                 t->name);
            }
            ls->terms[ls->first[t->slot] + fill[t->slot]++] = (struct lora_term){
                .a = t->a, .bt = t->bt, .a16 = t->a16, .bt16 = t->bt16, .rank = t->rank, .n_in = t->n_in, .n_out = t->n_out,
                .scale = lora_scale(a, t, sc)};
        }
    }
    free(fill);
    /* the widest group one lora_add call sees (fwd_layer's groups, and the output alone) */
    int stride = group_rank(ls, lora_slot_output(m), 1);
    for (int il = 0; il < m->info.n_layer; il++) {
        const int b = il * LORA_KINDS;
        const int g[4] = {group_rank(ls, b + LORA_Q, 3), group_rank(ls, b + LORA_O, 1),
                          group_rank(ls, b + LORA_GATE, 2), group_rank(ls, b + LORA_DOWN, 1)};
        for (int j = 0; j < 4; j++) stride = g[j] > stride ? g[j] : stride;
    }
    ls->ax_stride = stride;
    ls->vec = kern_vec_select();
    ls->ax = malloc((size_t)ctx->n_batch * (size_t)(stride ? stride : 1) * sizeof(float));
    ls->ax_thread = malloc((size_t)ctx->n_threads * LORA_FUSED_TOKENS * (size_t)(stride ? stride : 1) *
                           sizeof(float));
    if (!ls->ax || !ls->ax_thread) {
        lora_set_free(ls);
        return tern_fail(TERN_ERR_NOMEM, "LoRA adapters: out of memory (A x scratch)");
    }
    lora_set_free(ctx->lora);
    ctx->lora = ls;
    return TERN_OK;
}

/* ---------------------------------------------------------------- the forward pass */

enum { LORA_GROUP_MAX = 3 };

struct lora_step {
    struct tern_context *ctx;
    const float *src;        /* input rows row0 .. n-1, cols wide */
    int cols, row0, n_tok;   /* n_tok = n - row0 */
    int nt;                  /* terms of the group */
    const struct lora_term *term[64];
    int off[64];             /* term's first column in an ax row */
    int rank_sum;
    int n_out_slots;
    float *out[LORA_GROUP_MAX];
    int64_t rows[LORA_GROUP_MAX];       /* n_out of each slot */
    int64_t row_base[LORA_GROUP_MAX + 1];/* slot j's rows are [row_base[j], row_base[j + 1]) */
    int t0[LORA_GROUP_MAX], t1[LORA_GROUP_MAX]; /* slot j's terms [t0, t1) */
};

/* ax[t][off + k] = A_k . src[t] for units (t, k) over every term. */
static void step_lora_a(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    struct lora_step *s = arg;
    const struct lora_set *ls = s->ctx->lora;
    long long lo, hi;
    tp_split((long long)s->n_tok * s->rank_sum, chunk, n_chunks, 1, &lo, &hi);
    for (long long u = lo; u < hi; u++) {
        const int t = (int)(u / s->rank_sum), k = (int)(u % s->rank_sum);
        int j = 0;
        while (k >= s->off[j] + s->term[j]->rank) j++;
        const struct lora_term *tm = s->term[j];
        const float *x = s->src + (size_t)(s->row0 + t) * s->cols;
        const size_t row = (size_t)(k - s->off[j]) * tm->n_in;
        ls->ax[(size_t)t * ls->ax_stride + k] = tm->a16 ? ls->vec.dot_f16(tm->a16 + row, x, tm->n_in)
                                                        : ls->vec.dot(tm->a + row, x, tm->n_in);
    }
}

/* out[j][t][r] += scale * sum_k ax[t][term k] * B^T[k][r] over slot j's terms, as axpys over the
 * chunk's contiguous rows (each element gets its terms' products added in one fixed order). */
static void lora_b_rows(const struct lora_step *s, const float *ax_base, int chunk, int n_chunks)
{
    const struct lora_set *ls = s->ctx->lora;
    long long lo, hi;
    tp_split(s->row_base[s->n_out_slots], chunk, n_chunks, 16, &lo, &hi);
    for (int j = 0; j < s->n_out_slots; j++) {
        const long long g0 = lo > s->row_base[j] ? lo : s->row_base[j];
        const long long g1 = hi < s->row_base[j + 1] ? hi : s->row_base[j + 1];
        if (g0 >= g1) continue;
        const int64_t r0 = g0 - s->row_base[j], nr = g1 - g0;
        for (int t = 0; t < s->n_tok; t++) {
            const float *ax = ax_base + (size_t)t * ls->ax_stride;
            float *o = s->out[j] + (size_t)t * s->rows[j] + r0;
            for (int q = s->t0[j]; q < s->t1[j]; q++) {
                const struct lora_term *tm = s->term[q];
                for (int k = 0; k < tm->rank; k++) {
                    const float c = tm->scale * ax[s->off[q] + k];
                    const size_t at = (size_t)k * tm->n_out + (size_t)r0;
                    if (tm->bt16) ls->vec.axpy_f16(c, tm->bt16 + at, o, nr);
                    else ls->vec.axpy(c, tm->bt + at, o, nr);
                }
            }
        }
    }
}

static void step_lora_b(void *arg, int chunk, int n_chunks, int tid)
{
    (void)tid;
    const struct lora_step *s = arg;
    lora_b_rows(s, s->ctx->lora->ax, chunk, n_chunks);
}

/* The one-step form for a few tokens: this chunk computes every (token, rank row) dot of A x
 * into its thread's scratch, exactly as step_lora_a would, then adds its rows of B as
 * step_lora_b does. A thread that runs two chunks computes A x twice: the same values. */
static void step_lora_fused(void *arg, int chunk, int n_chunks, int tid)
{
    struct lora_step *s = arg;
    const struct lora_set *ls = s->ctx->lora;
    float *ax = ls->ax_thread + (size_t)tid * LORA_FUSED_TOKENS * ls->ax_stride;
    TERN_ASSERT(tid < s->ctx->n_threads && s->n_tok <= LORA_FUSED_TOKENS);
    for (int t = 0; t < s->n_tok; t++) {
        const float *x = s->src + (size_t)(s->row0 + t) * s->cols;
        for (int q = 0; q < s->nt; q++) {
            const struct lora_term *tm = s->term[q];
            for (int k = 0; k < tm->rank; k++) {
                const size_t row = (size_t)k * tm->n_in;
                ax[(size_t)t * ls->ax_stride + s->off[q] + k] =
                    tm->a16 ? ls->vec.dot_f16(tm->a16 + row, x, tm->n_in) : ls->vec.dot(tm->a + row, x, tm->n_in);
            }
        }
    }
    lora_b_rows(s, ax, chunk, n_chunks);
}

void lora_add(struct tern_context *ctx, const int *slots, int cnt, const float *src, int cols,
              int n, int row0, float *const *out)
{
    const struct lora_set *ls = ctx->lora;
    struct lora_step s = {.ctx = ctx, .src = src, .cols = cols, .row0 = row0, .n_tok = n - row0};
    int nt = 0, off = 0;
    TERN_ASSERT(cnt <= LORA_GROUP_MAX);
    for (int i = 0; i < cnt; i++) {
        if (!lora_slot_used(ls, slots[i])) continue;
        const int j = s.n_out_slots++;
        s.out[j] = out[i];
        s.t0[j] = nt;
        for (int k = ls->first[slots[i]]; k < ls->first[slots[i] + 1]; k++) {
            TERN_ASSERT(nt < 64); /* at most LORA_MAX_ADAPTERS terms per slot, 3 slots */
            s.term[nt] = &ls->terms[k];
            s.off[nt] = off;
            off += ls->terms[k].rank;
            s.rows[j] = ls->terms[k].n_out;
            nt++;
        }
        s.t1[j] = nt;
        s.row_base[j + 1] = s.row_base[j] + s.rows[j];
    }
    if (!s.n_out_slots || s.n_tok <= 0) return;
    s.nt = nt;
    s.rank_sum = off;
    TERN_ASSERT(off <= ls->ax_stride);
    if (s.n_tok <= LORA_FUSED_TOKENS) {
        fwd_run_step(ctx, TERN_PROF_MATMUL_F32, step_lora_fused, &s,
                     fwd_chunks_for(ctx, (s.row_base[s.n_out_slots] + 15) / 16, 1));
        return;
    }
    fwd_run_step(ctx, TERN_PROF_MATMUL_F32, step_lora_a, &s,
                 fwd_chunks_for(ctx, (long long)s.n_tok * s.rank_sum, 4));
    fwd_run_step(ctx, TERN_PROF_MATMUL_F32, step_lora_b, &s,
                 fwd_chunks_for(ctx, (s.row_base[s.n_out_slots] + 15) / 16, 4));
}

void lora_add_embd(struct tern_context *ctx, const int32_t *tokens, int n, float *x)
{
    const struct lora_set *ls = ctx->lora;
    const int s = lora_slot_embd(ctx->model);
    for (int q = ls->first[s]; q < ls->first[s + 1]; q++) {
        const struct lora_term *tm = &ls->terms[q];
        /* n_in = n_embd (B's rows), n_out = n_vocab (A's rows) */
        for (int t = 0; t < n; t++) {
            const float *av = tm->a + (size_t)tokens[t] * tm->rank;
            float *xr = x + (size_t)t * tm->n_in;
            for (int k = 0; k < tm->rank; k++) {
                const float c = tm->scale * av[k];
                const float *bk = tm->bt + (size_t)k * tm->n_in;
                for (int64_t i = 0; i < tm->n_in; i++) xr[i] += c * bk[i];
            }
        }
    }
}

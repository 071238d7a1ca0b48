/* context.c — creating a context (KV cache, scratch, thread pool: all allocated here, once)
 * and the public decode entry points. The forward pass itself is in forward.c. */
#include "model/context.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "quant/quant.h"
#include "util/check.h"
#include "util/error.h"

struct tern_context_params tern_context_default_params(void)
{
    return (struct tern_context_params){.n_ctx = 0, .n_batch = 0, .n_threads = 0};
}

/* Zeroed floats starting on a cache line (calloc: pages of big buffers are only mapped when
 * touched). Steps split rows in multiples of 16 floats, so with 64-byte aligned rows two threads
 * never write the same cache line (no false sharing at slice edges). The raw block is kept in
 * ctx->raw for tern_context_free. */
static float *alloc_floats(struct tern_context *ctx, size_t n, tern_status *st)
{
    char *p = calloc(1, n * sizeof(float) + 64);
    if (!p) {
        if (!*st) *st = tern_fail(TERN_ERR_NOMEM, "context scratch: out of memory (%zu floats)", n);
        return NULL;
    }
    /* one slot per buffer: a new buffer in tern_context_create needs a bigger raw[] */
    TERN_ASSERT(ctx->n_raw < (int)(sizeof ctx->raw / sizeof ctx->raw[0]));
    ctx->raw[ctx->n_raw++] = p;
    return (float *)(p + (64 - (uintptr_t)p % 64) % 64);
}

tern_status tern_context_create(struct tern_model *m, const struct tern_context_params *p,
                                struct tern_context **out)
{
    const struct model_hparams *in = &m->info;
    struct tern_context_params cp = p ? *p : tern_context_default_params();
    if (cp.n_ctx < 0 || cp.n_batch < 0 || cp.n_threads < 0 || cp.n_ctx > (1 << 22) ||
        cp.n_threads > 512 || cp.n_seq < 0 || cp.n_seq > 256)
        return tern_fail(TERN_ERR_ARG, "context parameters out of range: n_ctx %d, n_batch %d, "
                         "n_threads %d, n_seq %d", cp.n_ctx, cp.n_batch, cp.n_threads, cp.n_seq);
    if (cp.n_seq == 0) cp.n_seq = 1;
    if (cp.mtp && m->mtp.il < 0)
        return tern_fail(TERN_ERR_UNSUPPORTED, "MTP context: %s", model_mtp_why_not(m));
    if (cp.mtp && cp.n_seq != 1)
        return tern_fail(TERN_ERR_ARG, "MTP context: one sequence only (n_seq %d)", cp.n_seq);
    if (cp.n_ctx == 0) cp.n_ctx = in->n_ctx_train < 4096 ? in->n_ctx_train : 4096;
    if (cp.n_batch == 0) cp.n_batch = 512;
    if (cp.n_batch > cp.n_ctx) cp.n_batch = cp.n_ctx;
    if (cp.n_threads == 0) {
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        cp.n_threads = ncpu > 0 ? (int)ncpu : 1;
    }

    struct tern_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return tern_fail(TERN_ERR_NOMEM, "context: out of memory");
    ctx->model = m;
    ctx->n_ctx = cp.n_ctx;
    ctx->n_batch = cp.n_batch;
    ctx->n_threads = cp.n_threads;
    ctx->n_seq = cp.n_seq;
    ctx->mtp = cp.mtp;
    /* An MTP context lays out the main layers without KV (as DeltaNet layers) and the MTP
     * layer after them with its own. */
    const int n_kvl = cp.mtp ? in->n_layer + 1 : in->n_layer;
    /* Per-layer shapes (gemma4's sliding and global layers differ): buffers take the widest,
     * the KV cache each layer's own (and none for a layer that reads another's, or for
     * qwen35's DeltaNet layers, kv_src -1, whose recurrent state is ctx->rec). */
    size_t qd = 0, kvd = 0;
    int max_hd = 0, hd_gcd = 0, min_group = 1 << 30;
    int *lay = malloc(3 * sizeof(int) * (size_t)n_kvl);
    bool *windowed = calloc((size_t)n_kvl, sizeof *windowed);
    tern_status st = lay && windowed ? TERN_OK : tern_fail(TERN_ERR_NOMEM, "context: out of memory");
    for (int il = 0; il < in->n_layer && windowed; il++) windowed[il] = m->layers[il].kv_windowed && !cp.swa_full;
    for (int il = 0; il < n_kvl && lay; il++) {
        const struct model_layer *L = &m->layers[il];
        const bool no_kv = cp.mtp && il < in->n_layer;
        lay[il] = no_kv ? 0 : L->n_kv;
        lay[n_kvl + il] = L->hd;
        lay[2 * n_kvl + il] = no_kv ? -1 : L->kv_src;
        if ((size_t)in->n_head * L->hd > qd) qd = (size_t)in->n_head * L->hd;
        if ((size_t)L->n_kv * L->hd > kvd) kvd = (size_t)L->n_kv * L->hd;
        if (L->hd > max_hd) max_hd = L->hd;
        int a = hd_gcd, b = L->hd;
        while (b) { const int t = a % b; a = b; b = t; }
        hd_gcd = a;
        if (in->n_head / L->n_kv < min_group) min_group = in->n_head / L->n_kv;
    }
    if (!st) st = tp_create(cp.n_threads, &ctx->pool);
    if (!st) {
        const struct kv_layout kl = {n_kvl, in->n_head_kv, in->head_dim, lay,
                                     lay + n_kvl, lay + 2 * n_kvl, windowed, in->n_swa};
        st = kv_init(&ctx->kv, &kl, cp.n_ctx, cp.n_seq);
    }
    free(lay);
    free(windowed);
    /* the recurrent state and what rollback replays (rec_state.h): REC_WINDOW tokens cover a
     * speculative verify batch of the longest draft (64) and its pending tokens */
    enum { REC_WINDOW = 72 };
    const bool recurrent = in->n_layer_rec && !cp.mtp;
    if (!st && recurrent)
        st = rec_init(&ctx->rec, in, cp.n_seq, cp.n_batch < REC_WINDOW ? cp.n_batch : REC_WINDOW);
    if (st) {
        tern_context_free(ctx);
        return st;
    }
    const size_t nb = (size_t)cp.n_batch, d = (size_t)in->n_embd;
    ctx->x = alloc_floats(ctx, nb * d, &st);
    ctx->xn = alloc_floats(ctx, nb * d, &st);
    ctx->q = alloc_floats(ctx, nb * qd, &st);
    ctx->k = alloc_floats(ctx, nb * kvd, &st);
    ctx->v = alloc_floats(ctx, nb * kvd, &st);
    ctx->attn = alloc_floats(ctx, nb * qd, &st);
    ctx->gate = alloc_floats(ctx, nb * (size_t)in->n_ff_max, &st);
    ctx->up = alloc_floats(ctx, nb * (size_t)in->n_ff_max, &st);
    ctx->proj = alloc_floats(ctx, nb * d, &st);
    ctx->rope_cs = alloc_floats(ctx, nb * (size_t)in->n_rot, &st);
    if (in->attn_gate) {
        ctx->qaux = alloc_floats(ctx, nb * 2 * qd, &st);
        ctx->agate = alloc_floats(ctx, nb * qd, &st);
    }
    if (recurrent) {
        const size_t cd = (size_t)ctx->rec.conv_dim, vd = (size_t)ctx->rec.n_v * ctx->rec.hv;
        const size_t nv = (size_t)ctx->rec.n_v;
        ctx->dn_in = alloc_floats(ctx, nb * cd, &st);
        ctx->dn_qkv = alloc_floats(ctx, nb * cd, &st);
        ctx->dn_z = alloc_floats(ctx, nb * vd, &st);
        ctx->dn_b = alloc_floats(ctx, nb * nv, &st);
        ctx->dn_a = alloc_floats(ctx, nb * nv, &st);
        ctx->dn_bg = alloc_floats(ctx, nb * 2 * nv, &st);
        ctx->dn_out = alloc_floats(ctx, nb * vd, &st);
        ctx->dn_par = alloc_floats(ctx, nb * nv * DELTA_PAR, &st);
        ctx->dn_pre = alloc_floats(ctx, (size_t)(ctx->rec.d_conv - 1) * cd + 1, &st);
        ctx->dn_taps = alloc_floats(ctx, (size_t)ctx->rec.n_layer * ctx->rec.d_conv * cd, &st);
        ctx->dn_work = alloc_floats(ctx, (size_t)ctx->n_threads * ctx->rec.hk * DELTA_BLOCK, &st);
        ctx->dn_keep = calloc(2 * nb, sizeof *ctx->dn_keep);
        ctx->rb_n = calloc((size_t)cp.n_seq, sizeof *ctx->rb_n);
        ctx->rb_p0 = calloc((size_t)cp.n_seq, sizeof *ctx->rb_p0);
        ctx->rb_base = calloc((size_t)cp.n_seq, sizeof *ctx->rb_base);
        ctx->rb_at = calloc((size_t)cp.n_seq, sizeof *ctx->rb_at);
        ctx->rb_rows = calloc(nb, sizeof *ctx->rb_rows);
        ctx->rb_seqs = calloc((size_t)cp.n_seq, sizeof *ctx->rb_seqs);
        ctx->rb_run = calloc((size_t)cp.n_seq, sizeof *ctx->rb_run);
        if ((!ctx->dn_keep || !ctx->rb_n || !ctx->rb_p0 || !ctx->rb_base ||
             !ctx->rb_at || !ctx->rb_rows || !ctx->rb_seqs || !ctx->rb_run) && !st)
            st = tern_fail(TERN_ERR_NOMEM, "context scratch: out of memory");
        for (int il = 0; il < in->n_layer && !st; il++)
            if (m->layers[il].recurrent)
                rec_conv_taps(&ctx->rec, m->layers[il].ssm_conv1d.data,
                              ctx->dn_taps + (size_t)m->layers[il].rec_index * ctx->rec.d_conv * cd);
    }
    if (m->rope_swa_own) ctx->rope_cs_swa = alloc_floats(ctx, nb * (size_t)in->n_rot_swa, &st);
    /* per-layer embeddings (gemma4): every layer's input of each token, and one layer's gate */
    if (in->n_embd_per_layer) {
        ctx->ple = alloc_floats(ctx, nb * (size_t)in->n_embd_per_layer * in->n_layer, &st);
        ctx->ple_gate = alloc_floats(ctx, nb * (size_t)in->n_embd_per_layer, &st);
        ctx->ple_tok = alloc_floats(ctx, (size_t)in->n_embd_per_layer * in->n_layer, &st);
    }
    /* Long-RoPE (phi3): the long factors when a sequence may outgrow the original context, as
     * llama.cpp chooses them (by the context size, not the current length). */
    if (in->has_rope_freqs)
        ctx->rope_ff = m->rope_freqs.data;
    else if (in->has_rope_long)
        ctx->rope_ff = cp.n_ctx > in->n_ctx_orig ? m->rope_long.data : m->rope_short.data;
    ctx->rope_ff_swa = m->rope_ff_global_only ? NULL : ctx->rope_ff;
    /* Attention blocks: a KV head's query heads (in subgroups of at most attn_rows), times as
     * many consecutive tokens as fit in attn_rows queries; attn_rows score rows of n_ctx floats
     * fit in ATTN_SCORE_BYTES (attn.h). Per-thread rows start on their own cache lines (no
     * false sharing). */
    ctx->score_stride = ((size_t)cp.n_ctx + 15) & ~(size_t)15;
    const size_t fit = ATTN_SCORE_BYTES / (ctx->score_stride * sizeof(float));
    ctx->attn_rows = fit >= ATTN_BLOCK_MAX ? ATTN_BLOCK_MAX : fit < 1 ? 1 : (int)fit;
    /* subgroups of query heads no larger than the smallest group of any layer, so a block's
     * tokens x subgroup fit attn_rows in every layer */
    ctx->attn_gsz = min_group < ctx->attn_rows ? min_group : ctx->attn_rows;
    ctx->attn_T = ctx->attn_rows / ctx->attn_gsz;
    ctx->scores = aligned_alloc(64, (size_t)cp.n_threads * ctx->attn_rows * ctx->score_stride *
                                        sizeof(float));
    ctx->qr_stride = ((size_t)(ctx->attn_rows + ATTN_TILE_KEYS) * max_hd + 15) & ~(size_t)15; /* queries, then the key tile */
    ctx->qr = aligned_alloc(64, (size_t)cp.n_threads * ctx->qr_stride * sizeof(float));
    if ((!ctx->scores || !ctx->qr) && !st)
        st = tern_fail(TERN_ERR_NOMEM, "context: out of memory for attention scratch (%d threads,"
                       " n_ctx %d)", cp.n_threads, cp.n_ctx);
    ctx->attn_k = attn_select(hd_gcd); /* a kernel that suits every layer's head size */
    ctx->vexp_k = vexp_select();
    /* Logits for every batch row are only touched when asked for (TERN_LOGITS_ALL), so the
     * untouched part of this buffer costs address space, not memory. */
    ctx->logits = alloc_floats(ctx, nb * (size_t)in->n_vocab, &st);
    if (m->head_ids) ctx->head_rows = alloc_floats(ctx, nb * (size_t)m->n_head_ids, &st);
    /* Quantized activations: the widest input row in the widest format (F32). */
    size_t widest = d > qd ? d : qd;
    if ((size_t)in->n_ff_max > widest) widest = (size_t)in->n_ff_max;
    if ((size_t)ctx->rec.n_v * ctx->rec.hv > widest) widest = (size_t)ctx->rec.n_v * ctx->rec.hv;
    if (cp.mtp) {
        if (2 * d > widest) widest = 2 * d; /* eh_proj's input */
        ctx->mtp_in = alloc_floats(ctx, nb * 2 * d, &st);
        if (!st) st = tern_context_keep_hidden(ctx, true);
    }
    ctx->act_stride = (widest * sizeof(float) + 63) & ~(size_t)63;
    ctx->act = aligned_alloc(64, nb * ctx->act_stride);
    ctx->bpos = calloc(nb, sizeof *ctx->bpos);
    ctx->bseq = calloc(nb, sizeof *ctx->bseq);
    ctx->out_list = calloc(nb, sizeof *ctx->out_list);
    ctx->out_row = calloc(nb, sizeof *ctx->out_row);
    ctx->next_pos = calloc((size_t)cp.n_seq, sizeof *ctx->next_pos);
    ctx->want = calloc(nb, sizeof *ctx->want);
    ctx->ablk = calloc(nb + 1, sizeof *ctx->ablk);
    if ((!ctx->ablk || !ctx->bpos || !ctx->bseq || !ctx->out_list || !ctx->out_row ||
         !ctx->next_pos || !ctx->want) && !st)
        st = tern_fail(TERN_ERR_NOMEM, "context scratch: out of memory");
    if (!ctx->act && !st) st = tern_fail(TERN_ERR_NOMEM, "context scratch: out of memory");
    if (st) {
        tern_context_free(ctx);
        return st;
    }
    if (!cp.no_warmup) {
        /* a full forward pass touches every weight page, scratch buffer and worker thread */
        const int32_t tok = 0;
        ctx->bpos[0] = 0;
        ctx->bseq[0] = 0;
        ctx->out_list[0] = 0;
        ctx->n_out = 1;
        if (cp.mtp) {
            memset(ctx->proj, 0, sizeof(float) * d); /* the hidden input: zeros, as at position 0 */
            st = forward_mtp_batch(ctx, &tok, ctx->proj, 1);
            ctx->hid_lo = ctx->hid_hi = 0;
        } else {
            st = forward_batch(ctx, &tok, 1);
        }
        ctx->n_logits = 0;
        ctx->n_out = 0;
        ctx->profile = false;
        if (ctx->rec.n_layer) ctx->rec.base[0] = -1; /* nothing to roll back to */
        if (st) {
            tern_context_free(ctx);
            return st;
        }
    }
    *out = ctx;
    return TERN_OK;
}

void tern_context_free(struct tern_context *ctx)
{
    if (!ctx) return;
    tp_free(ctx->pool);
    kv_free(&ctx->kv);
    rec_free(&ctx->rec);
    free(ctx->dn_keep);
    free(ctx->rb_n);
    free(ctx->rb_p0);
    free(ctx->rb_base);
    free(ctx->rb_at);
    free(ctx->rb_rows);
    free(ctx->rb_seqs);
    free(ctx->rb_run);
    for (int i = 0; i < ctx->n_raw; i++) free(ctx->raw[i]);
    free(ctx->scores);
    free(ctx->qr);
    free(ctx->act);
    free(ctx->bpos);
    free(ctx->bseq);
    free(ctx->out_list);
    free(ctx->out_row);
    free(ctx->next_pos);
    free(ctx->want);
    free(ctx->ablk);
    free(ctx->hid);
    lora_set_free(ctx->lora);
    free(ctx);
}

tern_status tern_context_keep_hidden(struct tern_context *ctx, bool on)
{
    if (!on) {
        if (ctx->mtp) return TERN_OK; /* an MTP context chains its drafts through them */
        free(ctx->hid);
        ctx->hid = NULL;
        return TERN_OK;
    }
    if (ctx->hid) return TERN_OK;
    /* a ring of the last CONTEXT_HID_ROWS positions: what a draft source catches up on (older
     * states are not needed: it starts afresh nearer the end) */
    ctx->hid_rows = ctx->n_ctx < CONTEXT_HID_ROWS ? ctx->n_ctx : CONTEXT_HID_ROWS;
    const size_t bytes = (size_t)ctx->hid_rows * (size_t)ctx->model->info.n_embd * sizeof(float);
    ctx->hid = aligned_alloc(64, (bytes + 63) & ~(size_t)63);
    if (!ctx->hid)
        return tern_fail(TERN_ERR_NOMEM, "context: out of memory for the hidden states (%zu bytes)", bytes);
    ctx->hid_lo = ctx->hid_hi = 0;
    return TERN_OK;
}

const float *tern_context_hidden(const struct tern_context *ctx, int pos)
{
    const int end = ctx->hid_hi < ctx->kv.seq_pos[0] ? ctx->hid_hi : ctx->kv.seq_pos[0];
    if (!ctx->hid || pos < ctx->hid_lo || pos < ctx->hid_hi - ctx->hid_rows || pos >= end) return NULL;
    return ctx->hid + (size_t)(pos % ctx->hid_rows) * ctx->model->info.n_embd;
}

void tern_context_set_exact_batches(struct tern_context *ctx, bool on) { ctx->exact_batches = on; }

int tern_context_n_ctx(const struct tern_context *ctx) { return ctx->n_ctx; }
const struct tern_model *tern_context_model(const struct tern_context *ctx) { return ctx->model; }
int tern_context_n_batch(const struct tern_context *ctx) { return ctx->n_batch; }
int tern_context_n_seq(const struct tern_context *ctx) { return ctx->n_seq; }
int tern_kv_n_pos(const struct tern_context *ctx) { return ctx->kv.seq_pos[0]; }

int tern_kv_seq_n_pos(const struct tern_context *ctx, int seq)
{
    return seq >= 0 && seq < ctx->n_seq ? ctx->kv.seq_pos[seq] : -1;
}

uint64_t tern_context_kv_resident_bytes(const struct tern_context *ctx)
{
    return kv_resident_bytes(&ctx->kv);
}

bool tern_kv_seq_can_truncate(const struct tern_context *ctx, int seq, int n_pos)
{
    if (seq < 0 || seq >= ctx->n_seq || n_pos < 0 || n_pos > ctx->kv.seq_pos[seq]) return false;
    if (!kv_win_holds(&ctx->kv, seq, n_pos)) return false;
    const struct rec_state *r = &ctx->rec;
    return !r->n_layer || n_pos == 0 || n_pos == ctx->kv.seq_pos[seq] ||
           (r->base[seq] >= 0 && n_pos >= r->base[seq]);
}

/* The recurrence of sequence s replayed from its rollback base over the inputs recorded for
 * positions base .. n-1 (base < n <= base + rec_cap <= n_batch), into the current buffer of
 * sequence dst (s itself, or another one being given s's state at n): the recorded inputs go to
 * the first rows of the batch buffers and run as the forward pass runs them, the same code on the
 * same numbers, so the same bits. */
static void rec_replay(struct tern_context *ctx, int s, int n, int dst_seq)
{
    struct rec_state *r = &ctx->rec;
    const int base = r->base[s], m = n - base;
    TERN_ASSERT(base >= 0 && n > base && m <= r->rec_cap && m <= ctx->n_batch);
    const struct tern_model *model = ctx->model;
    const size_t cd = (size_t)r->conv_dim, nbg = 2 * (size_t)r->n_v;
    for (int i = 0; i < m; i++) ctx->rb_rows[i] = i;
    for (int il = 0; il < model->info.n_layer; il++) {
        const struct model_layer *L = &model->layers[il];
        if (!L->recurrent) continue;
        const int l = L->rec_index;
        for (int i = 0; i < m; i++) {
            const float *rc = rec_record(r, s, i, l);
            memcpy(ctx->dn_in + i * cd, rc, sizeof(float) * cd);
            memcpy(ctx->dn_bg + i * nbg, rc + cd, sizeof(float) * nbg);
        }
        const struct rec_run run = {
            .rows = ctx->rb_rows, .m = m,
            .src = base == 0 ? NULL : rec_layer(r, s, r->cur[s] ^ 1, l),
            .dst = rec_layer(r, dst_seq, r->cur[dst_seq], l),
            .in = ctx->dn_in, .bg = ctx->dn_bg, .qkv = ctx->dn_qkv, .par = ctx->dn_par, .out = ctx->dn_out,
        };
        rec_conv_run(r, &run, ctx->dn_taps + (size_t)l * r->d_conv * cd, ctx->dn_pre, 0, r->conv_dim);
        for (int i = 0; i < m; i++)
            rec_token_params(r, ctx->dn_qkv + i * cd, ctx->dn_bg + i * nbg,
                             ctx->dn_par + (size_t)i * r->n_v * DELTA_PAR, model->info.rms_eps);
        for (int h = 0; h < r->n_v; h++) rec_delta_run(r, &run, h, 0, r->hv, ctx->dn_work);
    }
}

/* Bring sequence s's recurrent state back to position n (tern_kv_seq_can_truncate said yes). */
static void rec_rewind(struct tern_context *ctx, int s, int n)
{
    struct rec_state *r = &ctx->rec;
    const int end = ctx->kv.seq_pos[s];
    TERN_ASSERT(n >= 0 && n <= end, "a rewind goes back, never forward");
    if (n == end) return;
    if (n == 0) {
        r->base[s] = -1; /* a decode at position 0 reads zeros */
        return;
    }
    if (n == r->base[s]) {
        r->cur[s] ^= 1;
        r->base[s] = -1;
        return;
    }
    rec_replay(ctx, s, n, s);
}

tern_status tern_kv_seq_truncate(struct tern_context *ctx, int seq, int n_pos)
{
    if (seq < 0 || seq >= ctx->n_seq)
        return tern_fail(TERN_ERR_ARG, "sequence %d does not exist (the context has %d)", seq,
                         ctx->n_seq);
    if (n_pos < 0 || n_pos > ctx->kv.seq_pos[seq])
        return tern_fail(TERN_ERR_ARG, "cannot truncate sequence %d to %d positions: it holds %d",
                         seq, n_pos, ctx->kv.seq_pos[seq]);
    if (!kv_win_holds(&ctx->kv, seq, n_pos))
        return tern_fail(TERN_ERR_UNSUPPORTED, "cannot truncate sequence %d to %d positions: its "
                         "sliding-window layers (window %d) keep positions from %d on, and a query "
                         "at %d reads from %d; restore a snapshot or decode again from 0", seq, n_pos,
                         ctx->kv.win, ctx->kv.win_lo[seq], n_pos, kv_win_first_key(&ctx->kv, n_pos));
    if (!tern_kv_seq_can_truncate(ctx, seq, n_pos))
        return tern_fail(TERN_ERR_UNSUPPORTED, "cannot truncate sequence %d to %d positions: its "
                         "recurrent state (%s) goes back only to 0 or to %d..%d (the last decode "
                         "call); restore a snapshot or decode again from 0", seq, n_pos,
                         ctx->model->arch_name, ctx->rec.base[seq], ctx->kv.seq_pos[seq]);
    if (n_pos == 0) ctx->kv.win_lo[seq] = 0; /* rows are written again from 0 */
    if (ctx->rec.n_layer) {
        rec_rewind(ctx, seq, n_pos);
        if (ctx->rec.cap_pos[seq] > n_pos) ctx->rec.cap_done[seq] = false; /* states of the gone tokens */
    }
    ctx->kv.seq_pos[seq] = n_pos;
    TERN_ASSERT(ctx->kv.win_lo[seq] <= n_pos || n_pos == 0, "a kept position's window rows are held");
    ctx->n_logits = 0;
    return TERN_OK;
}

tern_status tern_kv_truncate(struct tern_context *ctx, int n_pos)
{
    return tern_kv_seq_truncate(ctx, 0, n_pos);
}

tern_status tern_kv_seq_copy(struct tern_context *ctx, int src, int dst, int n_pos)
{
    struct kv_cache *kv = &ctx->kv;
    if (src < 0 || src >= ctx->n_seq || dst < 0 || dst >= ctx->n_seq || src == dst)
        return tern_fail(TERN_ERR_ARG, "cannot copy sequence %d to %d (the context has %d)", src,
                         dst, ctx->n_seq);
    if (n_pos < 0 || n_pos > kv->seq_pos[src])
        return tern_fail(TERN_ERR_ARG, "cannot copy %d positions of sequence %d: it holds %d",
                         n_pos, src, kv->seq_pos[src]);
    if (!kv_win_holds(kv, src, n_pos))
        return tern_fail(TERN_ERR_UNSUPPORTED, "cannot copy %d positions of sequence %d: its "
                         "sliding-window layers (window %d) keep positions from %d on", n_pos, src,
                         kv->win, kv->win_lo[src]);
    struct rec_state *r = &ctx->rec;
    if (r->n_layer) {
        /* the state at n_pos: the current one, the base, replayed from the base, or zeros */
        if (!tern_kv_seq_can_truncate(ctx, src, n_pos))
            return tern_fail(TERN_ERR_UNSUPPORTED, "cannot copy %d positions of sequence %d: its "
                             "recurrent state goes back only to 0 or to %d..%d", n_pos, src,
                             r->base[src], kv->seq_pos[src]);
        int b = -1;
        if (n_pos == kv->seq_pos[src]) b = r->cur[src];
        else if (n_pos == r->base[src]) b = r->cur[src] ^ 1;
        if (b >= 0)
            memcpy(rec_layer(r, dst, r->cur[dst], 0), rec_layer(r, src, b, 0),
                   r->seq_floats * sizeof(float));
        else if (n_pos > 0)
            rec_replay(ctx, src, n_pos, dst);
        r->base[dst] = -1;
        r->cap_done[dst] = false;
    }
    /* windowed blocks: dst holds what src holds, from src's win_lo on */
    const int lo = n_pos ? kv->win_lo[src] : 0;
    kv_win_reset(kv, dst, lo);
    for (int il = 0; il < kv->n_layer; il++) {
        if (!kv->layer_own[il] || n_pos == 0) continue;
        const int p0 = kv->layer_win[il] ? lo : 0;
        if (p0 >= n_pos) continue;
        const size_t run = (size_t)(n_pos - p0) * kv->layer_hd[il] * sizeof(uint16_t);
        for (int h = 0; h < kv->layer_kvh[il]; h++) {
            memcpy(kv_k_row_seq(kv, il, dst, h, p0), kv_k_row_seq(kv, il, src, h, p0), run);
            memcpy(kv_v_row_seq(kv, il, dst, h, p0), kv_v_row_seq(kv, il, src, h, p0), run);
        }
    }
    TERN_ASSERT(n_pos <= kv->n_ctx);
    kv->seq_pos[dst] = n_pos;
    if (dst == 0) ctx->hid_lo = ctx->hid_hi = n_pos; /* positions below hold what src computed */
    return TERN_OK;
}

/* Every id in the vocabulary; the message names the first one that is not. */
static tern_status check_tokens(const struct tern_context *ctx, const int32_t *tokens, int n)
{
    const int n_vocab = ctx->model->info.n_vocab;
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= n_vocab)
            return tern_fail(TERN_ERR_ARG, "decode: token %d at index %d is outside the "
                             "vocabulary (0..%d)", tokens[i], i, n_vocab - 1);
    return TERN_OK;
}

/* Check one batch against the cache: ids in the vocabulary, sequences that exist, and for each
 * sequence positions that continue it without gaps. */
static tern_status check_batch(struct tern_context *ctx, const struct tern_batch *b)
{
    if (b->n <= 0 || !b->tokens) return tern_fail(TERN_ERR_ARG, "decode: empty batch");
    if (b->n > ctx->n_batch)
        return tern_fail(TERN_ERR_RANGE, "decode: batch of %d tokens exceeds the batch size %d",
                         b->n, ctx->n_batch);
    tern_status st = check_tokens(ctx, b->tokens, b->n);
    if (st) return st;
    memcpy(ctx->next_pos, ctx->kv.seq_pos, sizeof(int32_t) * (size_t)ctx->n_seq);
    for (int i = 0; i < b->n; i++) {
        const int seq = b->seq ? b->seq[i] : 0;
        if (seq < 0 || seq >= ctx->n_seq)
            return tern_fail(TERN_ERR_ARG, "decode: token %d names sequence %d; the context has "
                             "%d", i, seq, ctx->n_seq);
        const int pos = b->pos ? b->pos[i] : ctx->next_pos[seq];
        if (pos != ctx->next_pos[seq])
            return tern_fail(TERN_ERR_ARG, "decode: token %d is at position %d of sequence %d, "
                             "which continues at %d (truncate first to rewind)", i, pos, seq,
                             ctx->next_pos[seq]);
        if (pos >= ctx->n_ctx)
            return tern_fail(TERN_ERR_RANGE, "decode: token %d at position %d of sequence %d "
                             "exceeds the context size %d", i, pos, seq, ctx->n_ctx);
        ctx->next_pos[seq]++;
    }
    return TERN_OK;
}

/* Run one checked batch: positions/sequences into bpos/bseq, logits rows into out_list. */
static tern_status run_batch(struct tern_context *ctx, const struct tern_batch *b, int call_offset,
                             const float *hidden)
{
    ctx->n_out = 0;
    TERN_ASSERT(b->n > 0 && b->n <= ctx->n_batch); /* bseq, bpos, out_row, out_list hold n_batch */
    for (int i = 0; i < b->n; i++) {
        const int seq = b->seq ? b->seq[i] : 0;
        /* check_batch let only existing sequences with room through */
        TERN_ASSERT(seq >= 0 && seq < ctx->n_seq && ctx->kv.seq_pos[seq] < ctx->n_ctx);
        ctx->bseq[i] = seq;
        ctx->bpos[i] = ctx->kv.seq_pos[seq]++;
        /* positions grow by one per token of a sequence, in batch order */
        TERN_ASSERT(i == 0 || ctx->bseq[i - 1] != seq || ctx->bpos[i] == ctx->bpos[i - 1] + 1);
        ctx->out_row[i] = -1;
        if (b->logits && b->logits[i]) {
            ctx->out_row[i] = ctx->n_out;
            ctx->out_list[ctx->n_out++] = i;
        }
    }
    ctx->last_n = b->n;
    ctx->call_offset = call_offset;
    tern_status st = hidden ? forward_mtp_batch(ctx, b->tokens, hidden, b->n)
                            : forward_batch(ctx, b->tokens, b->n);
    if (!st && ctx->kv.win)
        for (int s = 0; s < ctx->n_seq; s++) kv_win_advance(&ctx->kv, s); /* windows moved on */
    if (st) {
        /* nothing half-done stays visible: the batch's positions are forgotten */
        for (int i = 0; i < b->n; i++) {
            TERN_ASSERT(ctx->kv.seq_pos[ctx->bseq[i]] > 0);
            ctx->kv.seq_pos[ctx->bseq[i]]--;
        }
        ctx->n_logits = 0;
    }
    return st;
}

tern_status tern_decode_batch(struct tern_context *ctx, const struct tern_batch *b)
{
    ctx->n_logits = 0;
    if (ctx->mtp) return tern_fail(TERN_ERR_ARG, "decode: an MTP context decodes with tern_decode_mtp");
    tern_status st = check_batch(ctx, b);
    return st ? st : run_batch(ctx, b, 0, NULL);
}

/* tern_decode and tern_decode_mtp (hidden: n rows of n_embd, or NULL). */
static tern_status decode_seq0(struct tern_context *ctx, const int32_t *tokens, const float *hidden,
                               int n, int pos0, enum tern_logits_mode mode)
{
    if (n <= 0 || !tokens) return tern_fail(TERN_ERR_ARG, "decode: empty batch");
    if (pos0 != ctx->kv.seq_pos[0])
        return tern_fail(TERN_ERR_ARG, "decode: batch starts at position %d but the KV cache "
                         "holds %d positions (truncate first to rewind)", pos0, ctx->kv.seq_pos[0]);
    if ((long long)pos0 + n > ctx->n_ctx)
        return tern_fail(TERN_ERR_RANGE, "decode: %d tokens at position %d exceed the context "
                         "size %d", n, pos0, ctx->n_ctx);
    if (mode == TERN_LOGITS_ALL && n > ctx->n_batch)
        return tern_fail(TERN_ERR_RANGE, "decode: logits for all %d tokens requested but the "
                         "batch size is %d", n, ctx->n_batch);
    tern_status st = check_tokens(ctx, tokens, n);
    if (st) return st;
    ctx->n_logits = 0;
    /* Equal sub-batches (515 tokens at n_batch 512 -> 258 + 257, not 512 + 3): a tiny last
     * sub-batch would take the small-batch kernels, whose float summation order differs from
     * the prefill kernels on some ISAs, and a prompt's bits would depend on n_batch. */
    const int n_sub = (n + ctx->n_batch - 1) / ctx->n_batch;
    const int per_sub = (n + n_sub - 1) / n_sub;
    const size_t d = (size_t)ctx->model->info.n_embd;
    for (int done = 0; done < n;) {
        const int chunk = n - done < per_sub ? n - done : per_sub;
        const bool last = done + chunk == n;
        for (int i = 0; i < chunk; i++)
            ctx->want[i] = last && (mode == TERN_LOGITS_ALL || (mode == TERN_LOGITS_LAST && i == chunk - 1));
        const struct tern_batch b = {.n = chunk, .tokens = tokens + done, .logits = ctx->want};
        st = run_batch(ctx, &b, done, hidden ? hidden + (size_t)done * d : NULL);
        if (st) return st;
        done += chunk;
    }
    return TERN_OK;
}

tern_status tern_decode(struct tern_context *ctx, const int32_t *tokens, int n, int pos0,
                        enum tern_logits_mode mode)
{
    if (ctx->mtp) return tern_fail(TERN_ERR_ARG, "decode: an MTP context decodes with tern_decode_mtp");
    return decode_seq0(ctx, tokens, NULL, n, pos0, mode);
}

tern_status tern_decode_mtp(struct tern_context *ctx, const int32_t *tokens, const float *hidden,
                            int n, int pos0, enum tern_logits_mode mode)
{
    if (!ctx->mtp)
        return tern_fail(TERN_ERR_ARG, "decode_mtp: the context was not created with params.mtp");
    if (!hidden) return tern_fail(TERN_ERR_ARG, "decode_mtp: no hidden states given");
    return decode_seq0(ctx, tokens, hidden, n, pos0, mode);
}

const float *tern_context_logits(const struct tern_context *ctx, int i)
{
    /* i counts tokens of the whole last call; the current batch starts at call_offset */
    const int r = i - ctx->call_offset;
    if (ctx->n_logits == 0 || r < 0 || r >= ctx->last_n || ctx->out_row[r] < 0) return NULL;
    return ctx->logits + (size_t)ctx->out_row[r] * ctx->model->info.n_vocab;
}

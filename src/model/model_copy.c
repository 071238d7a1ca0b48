/* model_copy.c — a second, lower-precision copy of a loaded model's weights, made in memory
 * (tern_model_quantized_copy), and the question whether a model's matmuls give a token the same
 * bits in any batch (tern_model_batch_invariant).
 *
 * Read model.h first. The copy is an ordinary struct tern_model whose 2-D weights point into
 * one buffer it owns (model->owned) instead of the file mapping; everything else (metadata,
 * tokenizer, 1-D tensors) is read through its own GGUF handle opened over the source's mapping,
 * so the source must outlive the copy. Speculative decoding drafts with such a copy
 * ("--draft self:q4_0"): the copy reads about a quarter of an F16 model's bytes per token. */
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_invariant.h"
#include "kernels/kern_packed.h"
#include "quant/quant.h"
#include "util/error.h"
#include "util/threadpool.h"

/* The 2-D weights of m, in a fixed order: per layer model_layer_matrices (a v that is k's
 * matrix is k's and fixed up after), then the per-layer-embedding matrices, tok_embd and (when
 * untied) output. Returns the count written to w (room for MODEL_LAYER_MAX_MATRICES * n_layer
 * + 4). */
static int model_matrices(struct tern_model *m, struct model_weight **w)
{
    int n = 0;
    for (int l = 0; l < m->info.n_layer; l++) n += model_layer_matrices(&m->layers[l], w + n);
    if (m->ple_model_proj.data) w[n++] = &m->ple_model_proj;
    if (m->ple_embd.data) w[n++] = &m->ple_embd;
    w[n++] = &m->tok_embd;
    if (!m->info.tied_output) w[n++] = &m->output;
    return n;
}

/* One matrix to convert: rows of src (stype) -> dst (dtype) through F32. */
struct copy_job {
    const struct model_weight *src;
    void *dst;
    int dtype;
    size_t dst_row_bytes;
    float *scratch;      /* (n_threads, max_cols) */
    int64_t max_cols;
};

static void copy_rows(void *arg, int chunk, int n_chunks, int tid)
{
    const struct copy_job *j = arg;
    const struct quant_traits *st = quant_traits_get(j->src->type);
    const struct quant_traits *dt = quant_traits_get(j->dtype);
    float *row = j->scratch + (size_t)tid * (size_t)j->max_cols;
    long long lo, hi;
    tp_split(j->src->rows, chunk, n_chunks, 1, &lo, &hi);
    for (long long r = lo; r < hi; r++) {
        st->to_float((const char *)j->src->data + (size_t)r * j->src->row_bytes, row, j->src->cols);
        dt->from_float_ref(row, (char *)j->dst + (size_t)r * j->dst_row_bytes, j->src->cols);
    }
}

/* Can w become dtype? Its rows must hold whole blocks (else it keeps its type, as
 * llama-quantize falls back). */
static bool convertible(const struct model_weight *w, int dtype)
{
    return w->type != dtype && w->cols % tern_type_block_size(dtype) == 0;
}

tern_status tern_model_quantized_copy(const struct tern_model *src, const char *type_name,
                                      int n_threads, struct tern_model **out)
{
    if (!src || !type_name || !out)
        return tern_fail(TERN_ERR_ARG, "model copy: source model, type and out are required");
    int dtype;
    if (tern_type_from_name(type_name, &dtype) != TERN_OK)
        return tern_fail(TERN_ERR_ARG, "model copy: unknown weight type '%s'", type_name);
    const struct quant_traits *dt = quant_traits_get(dtype);
    if (!dt || !dt->vec_dot_ref || !dt->from_float_ref)
        return tern_fail(TERN_ERR_ARG, "model copy: type %s cannot hold weights (supported: f32, "
                         "f16, bf16, q8_0, q4_0, q5_0, q5_1, q4_k, q5_k, q6_k)", tern_type_name(dtype));
    if (n_threads <= 0) n_threads = 1;
    if (n_threads > 64) n_threads = 64;

    struct tern_model *m = calloc(1, sizeof *m);
    if (!m) return tern_fail(TERN_ERR_NOMEM, "model copy: out of memory");
    tern_status st = tern_gguf_open_memory(tern_gguf_file_data(src->gguf),
                                           tern_gguf_file_size(src->gguf), &m->gguf);
    if (st) {
        free(m);
        return tern_fail_prefix(st, "model copy: ");
    }
    m->info = src->info;
    memcpy(m->arch_name, src->arch_name, sizeof m->arch_name);
    m->info.arch_name = m->arch_name;
    m->tok_embd = src->tok_embd;
    m->output_norm = src->output_norm;
    m->output = src->output;
    m->rope_freqs = src->rope_freqs;
    m->rope_long = src->rope_long;
    m->rope_short = src->rope_short;
    m->rope_scale_swa = src->rope_scale_swa;
    m->rope_swa_own = src->rope_swa_own;
    m->q_prescale = src->q_prescale;
    m->rope_ff_global_only = src->rope_ff_global_only;
    m->has_rope_still = src->has_rope_still;
    memcpy(m->rope_still, src->rope_still, sizeof m->rope_still);
    m->ple_embd = src->ple_embd;
    m->ple_model_proj = src->ple_model_proj;
    m->ple_proj_norm = src->ple_proj_norm;
    m->mtp.il = -1; /* a drafter itself: no MTP layer is carried over */
    m->info.mtp_bytes = m->info.mtp_layer_bytes = 0;
    snprintf(m->mtp.why_not, sizeof m->mtp.why_not, "a converted copy carries no MTP layer");
    m->layers = malloc((size_t)src->info.n_layer * sizeof *m->layers);
    const int max_w = MODEL_LAYER_MAX_MATRICES * src->info.n_layer + 4;
    struct model_weight **w = malloc((size_t)max_w * sizeof *w);
    struct tern_model *srcm = (struct tern_model *)src; /* model_matrices only reads it here */
    struct model_weight **sw = malloc((size_t)max_w * sizeof *sw);
    if (!m->layers || !w || !sw) {
        st = tern_fail(TERN_ERR_NOMEM, "model copy: out of memory");
        goto fail;
    }
    memcpy(m->layers, src->layers, (size_t)src->info.n_layer * sizeof *m->layers);
    if (src->head_ids) {
        m->head_ids = malloc((size_t)src->n_head_ids * sizeof *m->head_ids);
        if (!m->head_ids) {
            st = tern_fail(TERN_ERR_NOMEM, "model copy: out of memory");
            goto fail;
        }
        memcpy(m->head_ids, src->head_ids, (size_t)src->n_head_ids * sizeof *m->head_ids);
        m->n_head_ids = src->n_head_ids;
    }
    const int nw = model_matrices(m, w);
    model_matrices(srcm, sw);

    /* One buffer for every converted matrix, each starting on a 64-byte boundary. */
    size_t total = 0;
    int64_t max_cols = 1;
    for (int i = 0; i < nw; i++) {
        if (!convertible(sw[i], dtype)) continue;
        total += (quant_row_bytes(dtype, sw[i]->cols) * (size_t)sw[i]->rows + 63) & ~(size_t)63;
        if (sw[i]->cols > max_cols) max_cols = sw[i]->cols;
    }
    m->owned = total ? aligned_alloc(64, total) : NULL;
    float *scratch = malloc((size_t)n_threads * (size_t)max_cols * sizeof(float));
    struct tp *pool = NULL;
    if ((total && !m->owned) || !scratch) {
        free(scratch);
        st = tern_fail(TERN_ERR_NOMEM, "model copy: out of memory for %zu bytes of %s weights",
                       total, tern_type_name(dtype));
        goto fail;
    }
    if ((st = tp_create(n_threads, &pool))) {
        free(scratch);
        goto fail;
    }
    size_t off = 0;
    for (int i = 0; i < nw; i++) {
        if (!convertible(sw[i], dtype)) continue;
        struct copy_job job = {.src = sw[i], .dst = (char *)m->owned + off, .dtype = dtype,
                               .dst_row_bytes = quant_row_bytes(dtype, sw[i]->cols),
                               .scratch = scratch, .max_cols = max_cols};
        tp_run(pool, copy_rows, &job, (int)(sw[i]->rows < 4 * n_threads ? sw[i]->rows : 4 * n_threads));
        w[i]->data = job.dst;
        w[i]->packed = NULL; /* src's copy is of the unconverted rows */
        w[i]->type = dtype;
        w[i]->row_bytes = job.dst_row_bytes;
        off += (job.dst_row_bytes * (size_t)sw[i]->rows + 63) & ~(size_t)63;
    }
    tp_free(pool);
    free(scratch);
    if (m->info.tied_output) m->output = m->tok_embd;
    for (int l = 0; l < m->info.n_layer; l++)
        if (m->layers[l].v_is_k) m->layers[l].wv = m->layers[l].wk;
    /* What a token's forward pass reads now: the converted matrices plus every other tensor. */
    uint64_t before = 0, after = 0;
    for (int i = 0; i < nw; i++) {
        before += sw[i]->row_bytes * (uint64_t)sw[i]->rows;
        after += w[i]->row_bytes * (uint64_t)w[i]->rows;
    }
    m->info.weight_bytes = src->info.weight_bytes - before + after;
    m->info.repacked_bytes = total;
    m->info.released_bytes = 0; /* src's copies it shares are src's to report */
    free(w);
    free(sw);
    /* The converted matrices get packed copies as a loaded file's do (when the source has
     * them: a model loaded without repacking gets a copy without): the same kernels then run
     * on the copy and on a file quantized to the same type (the same bits), and the drafter
     * reads the layout decode is fastest on. */
    m->mmap_only = src->mmap_only;
    if (!m->mmap_only) {
        const uint64_t converted = m->info.repacked_bytes;
        if ((st = model_repack(m, false))) {
            w = sw = NULL; /* freed above */
            goto fail;
        }
        m->info.repacked_bytes += converted;
        model_tune_tiles(m);
    }
    model_publish_info(m);
    *out = m;
    return TERN_OK;
fail:
    free(w);
    free(sw);
    tern_model_free(m);
    return st;
}

bool model_weight_batch_invariant(const struct model_weight *w)
{
    return kern_batch_invariant(w->type) || (w->packed && kern_packed_replaces(w->type));
}

bool tern_model_batch_invariant(const struct tern_model *m)
{
    if (!model_weight_batch_invariant(&m->output)) return false;
    if (m->ple_model_proj.data && !model_weight_batch_invariant(&m->ple_model_proj)) return false;
    for (int l = 0; l < m->info.n_layer; l++) {
        struct model_weight *w[MODEL_LAYER_MAX_MATRICES];
        const int n = model_layer_matrices(&m->layers[l], w);
        for (int i = 0; i < n; i++)
            if (!model_weight_batch_invariant(w[i])) return false;
    }
    return true;
}

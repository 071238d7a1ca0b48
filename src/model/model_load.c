/* model_load.c — GGUF -> struct tern_model: hyperparameters from metadata, weights bound by
 * name and checked for shape and type before anything runs.
 *
 * Nothing here is specific to one model: every number comes from `<arch>.*` keys (llama.cpp's
 * names), so Llama-2/3.x, TinyLlama, SmolLM, Mistral (arch "llama"), Qwen2/2.5 ("qwen2"), Qwen3,
 * SmolLM3, Phi-3/Phi-4-mini ("phi3") and Gemma 3 load through the same path; read_arch_hparams
 * has what each architecture adds (and the few constants llama.cpp fixes in code). Anything unusable (unknown architecture, unsupported tensor type,
 * wrong shape) is refused here with the tensor or key named, never discovered mid-forward. */
#include "model/kv_cache.h"
#include "model/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "convert/convert.h"
#include "kernels/kernels.h"
#include "quant/quant.h"
#include "kernels/kern_tune.h"
#include "util/error.h"

static tern_status get_u32_req(const struct tern_gguf *g, const char *arch, const char *suffix,
                               uint32_t *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    tern_status st = tern_gguf_get_u32(g, key, out);
    if (st == TERN_ERR_NOT_FOUND) return tern_fail(st, "required key '%s' is missing", key);
    return st;
}

/* Optional key: leaves *out untouched when absent; errors only on a wrong type. */
static tern_status get_u32_opt(const struct tern_gguf *g, const char *arch, const char *suffix,
                               uint32_t *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    tern_status st = tern_gguf_get_u32(g, key, out);
    return st == TERN_ERR_NOT_FOUND ? TERN_OK : st;
}

static tern_status get_f32_opt(const struct tern_gguf *g, const char *arch, const char *suffix,
                               float *out)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    tern_status st = tern_gguf_get_f32(g, key, out);
    return st == TERN_ERR_NOT_FOUND ? TERN_OK : st;
}

/* `<arch>.<suffix>` given once for every layer or as an array of n_layer values (llama.cpp's
 * get_key_or_arr: UINT32, INT32 or BOOL elements); out[n_layer]. Absent: *present = false, out
 * untouched. */
static tern_status get_u32_layers(const struct tern_gguf *g, const char *arch, const char *suffix,
                                  int n_layer, uint32_t *out, bool *present)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    *present = false;
    const int64_t i = tern_gguf_find_key(g, key);
    if (i < 0) return TERN_OK;
    *present = true;
    if (tern_gguf_kv_type(g, i) != TERN_GGUF_ARRAY) {
        uint32_t v;
        tern_status st = tern_gguf_get_u32(g, key, &v);
        if (st) return st;
        for (int l = 0; l < n_layer; l++) out[l] = v;
        return TERN_OK;
    }
    const enum tern_gguf_type t = tern_gguf_arr_type(g, i);
    if (t != TERN_GGUF_UINT32 && t != TERN_GGUF_INT32 && t != TERN_GGUF_BOOL)
        return tern_fail(TERN_ERR_FORMAT, "key '%s': an array of %s; expected uint32, int32 or "
                         "bool values (one per layer)", key, t == TERN_GGUF_FLOAT32 ? "float32" : "another type");
    if (tern_gguf_arr_len(g, i) != (uint64_t)n_layer)
        return tern_fail(TERN_ERR_FORMAT, "key '%s' has %llu values; block_count is %d", key,
                         (unsigned long long)tern_gguf_arr_len(g, i), n_layer);
    const unsigned char *d = tern_gguf_arr_data(g, i);
    for (int l = 0; l < n_layer; l++) {
        if (t == TERN_GGUF_BOOL) {
            out[l] = d[l] != 0;
        } else {
            int32_t v;
            memcpy(&v, d + 4 * l, 4);
            if (t == TERN_GGUF_INT32 && v < 0)
                return tern_fail(TERN_ERR_FORMAT, "key '%s': value %d for layer %d is negative", key, v, l);
            out[l] = (uint32_t)v;
        }
    }
    return TERN_OK;
}

/* Bind tensor `name` with the expected shape (rows = 1 for vectors). Matrices must have a type
 * tern can multiply; vectors must be F32. optional: absent -> data NULL, TERN_OK. */
static tern_status bind(const struct tern_gguf *g, struct model_weight *w, const char *name,
                        int64_t cols, int64_t rows, bool optional)
{
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    const struct tern_gguf_tensor *t = tern_gguf_find_tensor(g, name);
    if (!t) {
        if (optional) return TERN_OK;
        return tern_fail(TERN_ERR_FORMAT, "tensor '%s' is missing", name);
    }
    int64_t t_rows = 1;
    for (int d = 1; d < t->n_dims; d++) t_rows *= t->ne[d];
    bool is_vector = rows == 1;
    if (t->ne[0] != cols || t_rows != rows || (is_vector && t->n_dims != 1) ||
        (!is_vector && t->n_dims != 2))
        return tern_fail(TERN_ERR_FORMAT,
                         "tensor '%s' has shape [%lld, %lld] (%d dims), expected [%lld, %lld]",
                         name, (long long)t->ne[0], (long long)t_rows, t->n_dims,
                         (long long)cols, (long long)rows);
    if (is_vector) {
        if (t->type != TERN_TYPE_F32)
            return tern_fail(TERN_ERR_UNSUPPORTED, "tensor '%s' has type %s; tern needs F32 here",
                             name, tern_type_name(t->type));
    } else {
        const struct quant_traits *tr = quant_traits_get(t->type);
        if (!tr || !tr->vec_dot_ref) /* unknown, or activation-only (Q8_1, Q8_K) */
            return tern_fail(TERN_ERR_UNSUPPORTED,
                             "tensor '%s' has type %s, which tern does not support "
                             "(supported: F32, F16, BF16, Q8_0, Q5_1, Q5_0, Q4_1, Q4_0, Q4_K, Q5_K, Q6_K)",
                             name, tern_type_name(t->type));
    }
    w->data = t->data;
    w->type = t->type;
    w->cols = cols;
    w->rows = rows;
    w->row_bytes = quant_row_bytes(t->type, cols);
    return TERN_OK;
}

/* Qwen3.5 (dense): Gated DeltaNet layers with every full_attention_interval-th layer a gated
 * full-attention one; multi-token-prediction layers (nextn_predict_layers) at the end of
 * block_count are not run. Interleaved M-RoPE (rope.dimension_sections, required as in
 * llama.cpp): for text every section gets the token's position except the 4th (position 0), so
 * it is NEOX RoPE with the pairs of the 4th section left unrotated. Norm weights come as 1 + w
 * from the converter except ssm_norm, so they are plain RMSNorm weights here. */
static tern_status qwen35_hparams(const struct tern_gguf *g, struct tern_model *m)
{
    struct model_hparams *in = &m->info;
    const char *a = m->arch_name;
    uint32_t d_conv, inner, d_state, dt_rank, n_group, interval = 4, nextn = 0;
    tern_status st;
    if ((st = get_u32_req(g, a, "ssm.conv_kernel", &d_conv)) ||
        (st = get_u32_req(g, a, "ssm.inner_size", &inner)) ||
        (st = get_u32_req(g, a, "ssm.state_size", &d_state)) ||
        (st = get_u32_req(g, a, "ssm.time_step_rank", &dt_rank)) ||
        (st = get_u32_req(g, a, "ssm.group_count", &n_group)) ||
        (st = get_u32_opt(g, a, "full_attention_interval", &interval)) ||
        (st = get_u32_opt(g, a, "nextn_predict_layers", &nextn)))
        return st;
    if (d_conv < 1 || d_conv > 64 || dt_rank == 0 || dt_rank > 4096 || n_group == 0 ||
        dt_rank % n_group || inner % dt_rank || d_state == 0 || d_state > 1024 ||
        inner / dt_rank == 0 || inner / dt_rank > 1024 || interval == 0)
        return tern_fail(TERN_ERR_FORMAT, "%s: implausible linear-attention hyperparameters: "
                         "ssm.conv_kernel %u, inner_size %u, state_size %u, time_step_rank %u, "
                         "group_count %u, full_attention_interval %u", a, d_conv, inner, d_state,
                         dt_rank, n_group, interval);
    if (d_state != inner / dt_rank)
        return tern_fail(TERN_ERR_UNSUPPORTED, "%s: key head size %u (ssm.state_size) differs "
                         "from the value head size %u: not supported", a, d_state, inner / dt_rank);
    if (nextn >= (uint32_t)in->n_layer)
        return tern_fail(TERN_ERR_FORMAT, "%s.nextn_predict_layers %u leaves no layer of %d", a,
                         nextn, in->n_layer);
    in->n_nextn = (int)nextn;
    in->n_layer -= (int)nextn;
    in->ssm_d_conv = (int)d_conv;
    in->ssm_n_k_heads = (int)n_group;
    in->ssm_n_v_heads = (int)dt_rank;
    in->ssm_head_k = (int)d_state;
    in->ssm_head_v = (int)(inner / dt_rank);
    in->full_attn_interval = (int)interval;
    in->attn_gate = true;
    in->has_qk_norm = true;
    for (int il = 0; il < in->n_layer; il++) in->n_layer_rec += (il + 1) % (int)interval != 0;
    in->n_layer_kv = in->n_layer - in->n_layer_rec;
    const uint64_t conv_dim = 2ull * n_group * d_state + inner;
    in->state_bytes = (uint64_t)in->n_layer_rec * sizeof(float) *
                      ((d_conv - 1) * conv_dim + (uint64_t)dt_rank * d_state * d_state);

    char key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", a);
    const int64_t ki = tern_gguf_find_key(g, key);
    if (ki < 0) return tern_fail(TERN_ERR_FORMAT, "required key '%s' is missing", key);
    const uint64_t ns = tern_gguf_kv_type(g, ki) == TERN_GGUF_ARRAY ? tern_gguf_arr_len(g, ki) : 0;
    const enum tern_gguf_type et = ns ? tern_gguf_arr_type(g, ki) : TERN_GGUF_ARRAY;
    if (ns < 1 || ns > 4 || (et != TERN_GGUF_INT32 && et != TERN_GGUF_UINT32))
        return tern_fail(TERN_ERR_FORMAT, "'%s' must be an array of 1 to 4 int32", key);
    int32_t sec[4] = {0, 0, 0, 0};
    memcpy(sec, tern_gguf_arr_data(g, ki), ns * sizeof(int32_t));
    long sum = 0;
    for (int i = 0; i < 4; i++) {
        if (sec[i] < 0 || sec[i] > 4096)
            return tern_fail(TERN_ERR_FORMAT, "'%s'[%d] = %d is out of range", key, i, sec[i]);
        sum += sec[i];
    }
    if (sum < 1 || sum > in->n_rot)
        return tern_fail(TERN_ERR_FORMAT, "'%s' sums to %ld; it must be 1..%d (rope.dimension_count)",
                         key, sum, in->n_rot);
    /* ggml's interleaved M-RoPE: pair i is in sector i % sum; sector j takes the temporal,
     * height or width position when j % 3 is 0, 1 or 2 and j < 3 * sections[j % 3], else the
     * 4th position */
    for (int i = 0; i < in->n_rot / 2; i++) {
        const int j = (int)(i % sum);
        const bool moving = j < 3 * sec[j % 3];
        m->rope_still[i] = !moving;
        m->has_rope_still |= !moving;
    }
    return TERN_OK;
}

/* Gemma 4 (dense text), as ik_llama.cpp reads it (llama-hparams.cpp, LLM_ARCH_GEMMA4) and its
 * converter writes it: sliding layers from attention.sliding_window_pattern (one bool per
 * layer), their own head size (key_length_swa), rotated size (rope.dimension_count_swa) and base
 * (rope.freq_base_swa, default rope.freq_base); KV heads and FFN width per layer (read by the
 * caller); the last attention.shared_kv_layers layers compute no K/V and read the cache of
 * layer n_kv - 2 (sliding) or n_kv - 1 (global), ik_llama.cpp's choice, accepted only where
 * that is the last own-KV layer of the same kind (what Hugging Face shares); q.k unscaled;
 * v RMS-normalized; final_logit_softcapping (default 30); per-layer embeddings when
 * embedding_length_per_layer_input > 0. Norms are stored as the weights themselves (this
 * converter adds no 1). */
static tern_status read_gemma4(const struct tern_gguf *g, struct tern_model *m)
{
    struct model_hparams *in = &m->info;
    const char *a = m->arch_name;
    uint32_t n_swa = 0, hd_swa = 0, vd_swa = 0, n_rot_swa = (uint32_t)in->n_rot, shared = 0,
             n_pl = 0, n_ff_exp = 0;
    bool have_pat, have_pl;
    uint32_t *pat = calloc((size_t)in->n_layer, sizeof *pat);
    if (!pat) return tern_fail(TERN_ERR_NOMEM, "out of memory");
    tern_status st = get_u32_layers(g, a, "attention.sliding_window_pattern", in->n_layer, pat, &have_pat);
    if (!st && !have_pat)
        st = tern_fail(TERN_ERR_NOT_FOUND, "required key '%s.attention.sliding_window_pattern' is missing", a);
    if (!st) st = get_u32_req(g, a, "attention.sliding_window", &n_swa);
    if (!st) st = get_u32_req(g, a, "attention.key_length_swa", &hd_swa);
    if (!st) st = get_u32_req(g, a, "attention.value_length_swa", &vd_swa);
    if (!st) st = get_u32_opt(g, a, "rope.dimension_count_swa", &n_rot_swa);
    if (!st) st = get_u32_opt(g, a, "attention.shared_kv_layers", &shared);
    if (!st) st = get_u32_opt(g, a, "expert_feed_forward_length", &n_ff_exp);
    if (!st) st = get_f32_opt(g, a, "rope.freq_base_swa", &in->rope_freq_base_swa);
    if (!st) {
        char key[128];
        snprintf(key, sizeof key, "%s.embedding_length_per_layer_input", a);
        have_pl = tern_gguf_find_key(g, key) >= 0;
        st = have_pl ? tern_gguf_get_u32(g, key, &n_pl)
                     : tern_fail(TERN_ERR_NOT_FOUND, "required key '%s' is missing", key);
    }
    in->final_softcap = 30.0f;
    if (!st) st = get_f32_opt(g, a, "final_logit_softcapping", &in->final_softcap);
    if (st) {
        free(pat);
        return st;
    }
    if (n_ff_exp > 0) {
        free(pat);
        return tern_fail(TERN_ERR_UNSUPPORTED, "%s.expert_feed_forward_length is %u: the Gemma 4 "
                         "mixture-of-experts variant (26B-A4B) is not supported", a, n_ff_exp);
    }
    if (n_swa == 0 || hd_swa == 0 || hd_swa % 2 || hd_swa > 1024 || vd_swa != hd_swa ||
        n_rot_swa == 0 || n_rot_swa > hd_swa || n_rot_swa % 2 || shared >= (uint32_t)in->n_layer ||
        n_pl > 65536 || !(in->rope_freq_base_swa > 0.0f) || !isfinite(in->rope_freq_base_swa) ||
        !(in->final_softcap >= 0.0f) || !isfinite(in->final_softcap)) {
        free(pat);
        return tern_fail(TERN_ERR_FORMAT, "%s: unusable hyperparameters: sliding_window %u, "
                         "key_length_swa %u, value_length_swa %u, rope.dimension_count_swa %u, "
                         "shared_kv_layers %u of %d, embedding_length_per_layer_input %u, "
                         "freq_base_swa %g, final_logit_softcapping %g", a, n_swa, hd_swa, vd_swa,
                         n_rot_swa, shared, in->n_layer, n_pl, (double)in->rope_freq_base_swa,
                         (double)in->final_softcap);
    }
    in->has_qk_norm = true;
    in->has_post_norms = true;
    in->ffn_gelu = true;
    in->v_norm = true;
    in->embd_scale = sqrtf((float)in->n_embd);
    in->attn_scale = 1.0f; /* Gemma 4: self.scaling = 1 (q and k are normalized) */
    in->n_swa = (int)(n_swa > (1u << 30) ? 1u << 30 : n_swa);
    in->head_dim_swa = (int)hd_swa;
    in->n_rot_swa = (int)n_rot_swa;
    in->n_embd_per_layer = (int)n_pl;
    in->n_layer_kv = in->n_layer - (int)shared;
    m->rope_ff_global_only = true;
    in->n_head_kv = in->n_head_kv_swa = 0;
    for (int il = 0; il < in->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        L->swa = pat[il] != 0;
        in->n_layer_swa += L->swa;
        if (L->swa) {
            L->hd = (int)hd_swa;
            L->n_rot = (int)n_rot_swa;
            if (!in->n_head_kv_swa) in->n_head_kv_swa = L->n_kv;
        } else if (!in->n_head_kv) {
            in->n_head_kv = L->n_kv;
        }
    }
    free(pat);
    if (!in->n_head_kv) in->n_head_kv = in->n_head_kv_swa;
    if (!in->n_head_kv_swa) in->n_head_kv_swa = in->n_head_kv;
    if (shared > 0) {
        const int nk = in->n_layer_kv;
        if (nk < 2 || !m->layers[nk - 2].swa || m->layers[nk - 1].swa)
            return tern_fail(TERN_ERR_UNSUPPORTED, "%s: %u shared-KV layers, but layers %d and %d "
                             "(the last with their own KV) are not sliding then global: "
                             "ik_llama.cpp's rule for which cache a shared layer reads does not "
                             "hold for this layout", a, shared, nk - 2, nk - 1);
        for (int il = nk; il < in->n_layer; il++) {
            struct model_layer *L = &m->layers[il];
            L->kv_src = L->swa ? nk - 2 : nk - 1;
            if (L->n_kv != m->layers[L->kv_src].n_kv)
                return tern_fail(TERN_ERR_FORMAT, "%s: layer %d shares the KV of layer %d but has "
                                 "%d KV heads, not %d", a, il, L->kv_src, L->n_kv,
                                 m->layers[L->kv_src].n_kv);
        }
    }
    return TERN_OK;
}

/* What the architectures beyond llama / qwen2 add, from their keys, and the refusals of variants
 * tern does not run (mixture of experts, unequal key / value head sizes). Where llama.cpp fixes a
 * value in code rather than reading a key (smollm3's NoPE step, gemma3's window pattern and the
 * 27B attention scale) tern fixes the same value: those are the files' meaning as the
 * converters write them. */
static tern_status read_arch_hparams(const struct tern_gguf *g, struct tern_model *m,
                                     uint32_t key_len)
{
    struct model_hparams *in = &m->info;
    const char *a = m->arch_name;
    uint32_t n_expert = 0, val_len = 0, n_swa = 0, n_ctx_orig = 0;
    tern_status st;
    if ((st = get_u32_opt(g, a, "expert_count", &n_expert)) ||
        (st = get_u32_opt(g, a, "attention.value_length", &val_len)))
        return st;
    if (n_expert > 0)
        return tern_fail(TERN_ERR_UNSUPPORTED, "%s.expert_count is %u: mixture-of-experts models "
                         "are not supported", a, n_expert);
    if (val_len && val_len != key_len)
        return tern_fail(TERN_ERR_UNSUPPORTED, "%s.attention.value_length %u differs from the "
                         "key length %u: not supported", a, val_len, key_len);
    in->embd_scale = 1.0f;
    in->attn_scale = 1.0f / sqrtf((float)key_len);
    in->rope_freq_base_swa = in->rope_freq_base;
    in->rope_attn_factor = 1.0f;
    switch (in->arch) {
    case TERN_ARCH_LLAMA:
    case TERN_ARCH_QWEN2:
        break;
    case TERN_ARCH_QWEN3:
        in->has_qk_norm = true;
        break;
    case TERN_ARCH_SMOLLM3:
        in->nope_every = 4; /* HF no_rope_layer_interval; llama.cpp: n_no_rope_layer_step = 4 */
        break;
    case TERN_ARCH_PHI3:
        /* Phi-3 applies its window (if any) on every layer, with the one RoPE base. */
        in->fused_qkv = true;
        if ((st = get_u32_opt(g, a, "attention.sliding_window", &n_swa)) ||
            (st = get_f32_opt(g, a, "rope.scaling.attn_factor", &in->rope_attn_factor)) ||
            (st = get_u32_opt(g, a, "rope.scaling.original_context_length", &n_ctx_orig)))
            return st;
        if (!(in->rope_attn_factor > 0.0f) || !isfinite(in->rope_attn_factor))
            return tern_fail(TERN_ERR_FORMAT, "%s.rope.scaling.attn_factor %g must be positive", a,
                             (double)in->rope_attn_factor);
        in->n_swa = (int)(n_swa > (1u << 30) ? 1u << 30 : n_swa);
        in->n_layer_swa = in->n_swa ? in->n_layer : 0;
        break;
    case TERN_ARCH_QWEN35:
        if ((st = qwen35_hparams(g, m))) return st;
        break;
    case TERN_ARCH_GEMMA3: {
        /* Five sliding-window layers, then one global one; the window layers rotate with base
         * 10000 unscaled (rope.freq_base and any linear scaling are the global layers'). The
         * converter stores the norms as 1 + w, so they are plain RMSNorm weights here. */
        in->has_qk_norm = true;
        in->has_post_norms = true;
        in->ffn_gelu = true;
        in->embd_scale = sqrtf((float)in->n_embd);
        if ((st = get_u32_req(g, a, "attention.sliding_window", &n_swa))) return st;
        if (n_swa == 0)
            return tern_fail(TERN_ERR_FORMAT, "%s.attention.sliding_window must be positive", a);
        in->n_swa = (int)(n_swa > (1u << 30) ? 1u << 30 : n_swa);
        in->rope_freq_base_swa = 10000.0f;
        if ((st = get_f32_opt(g, a, "rope.freq_base_swa", &in->rope_freq_base_swa))) return st;
        if (!(in->rope_freq_base_swa > 0.0f) || !isfinite(in->rope_freq_base_swa))
            return tern_fail(TERN_ERR_FORMAT, "%s.rope.freq_base_swa must be positive", a);
        for (int il = 0; il < in->n_layer; il++) in->n_layer_swa += (il + 1) % 6 != 0;
        /* Gemma-3-27B scales queries by 1/sqrt(n_embd / n_head), not 1/sqrt(head_dim) (HF
         * query_pre_attn_scalar); llama.cpp recognizes it by its 62 layers. */
        if (in->n_layer == 62) in->attn_scale = 1.0f / sqrtf((float)(in->n_embd / in->n_head));
        break;
    }
    case TERN_ARCH_GEMMA4:
        if ((st = read_gemma4(g, m))) return st;
        break;
    }
    in->n_ctx_orig = (int)(n_ctx_orig ? n_ctx_orig : (uint32_t)in->n_ctx_train);
    m->rope_scale_swa = in->arch == TERN_ARCH_GEMMA3 ? 1.0f : in->rope_freq_scale;
    if (in->arch != TERN_ARCH_GEMMA4) {
        in->n_head_kv_swa = in->n_head_kv;
        in->head_dim_swa = in->head_dim;
        in->n_rot_swa = in->n_rot;
        /* every layer stores its own KV, except qwen35's DeltaNet layers (qwen35_hparams) */
        if (!in->n_layer_rec) in->n_layer_kv = in->n_layer;
    }
    /* The SWA layers rotate from their own cos/sin table when anything of it differs (gemma4:
     * also the rotated size, and the frequency factors, which are the global layers' only). */
    m->rope_swa_own = in->n_layer_swa > 0 && (in->rope_freq_base_swa != in->rope_freq_base ||
                                              m->rope_scale_swa != in->rope_freq_scale ||
                                              in->n_rot_swa != in->n_rot || m->rope_ff_global_only);
    /* llama.cpp scales phi3's rotated queries before the F16 q.k product (then scale 1) */
    m->q_prescale = in->arch == TERN_ARCH_PHI3;
    return TERN_OK;
}

/* The architectures tern runs, with llama.cpp's RoPE convention for each (llama_model_rope_type:
 * NORM rotates pairs (2i, 2i+1), NEOX pairs (i, i + n_rot/2)). */
static const struct {
    const char *name;
    enum tern_arch arch;
    bool neox;
} archs[] = {
    {"llama", TERN_ARCH_LLAMA, false}, {"qwen2", TERN_ARCH_QWEN2, true},
    {"qwen3", TERN_ARCH_QWEN3, true},  {"smollm3", TERN_ARCH_SMOLLM3, false},
    {"phi3", TERN_ARCH_PHI3, true},    {"gemma3", TERN_ARCH_GEMMA3, true},
    {"gemma4", TERN_ARCH_GEMMA4, true},
    {"qwen35", TERN_ARCH_QWEN35, true}, /* IMROPE: for text, NEOX (qwen35_hparams) */
};

/* Architectures people will try that tern does not run, with what they are: the refusal names
 * the variant instead of a bare "unsupported". */
static const struct {
    const char *name, *what;
} refused[] = {
    {"qwen2moe", "the Qwen2 mixture-of-experts variant"},
    {"qwen3moe", "the Qwen3 mixture-of-experts variant (Qwen3-30B-A3B, ...)"},
    {"qwen3next", "Qwen3-Next (hybrid linear attention, mixture of experts)"},
    {"qwen35moe", "the Qwen3.5 mixture-of-experts variant (Qwen3.5-35B-A3B, ...)"},
    {"qwen2vl", "a Qwen2-VL vision-language model"},
    {"qwen3vl", "a Qwen3-VL vision-language model"},
    {"qwen3vlmoe", "a Qwen3-VL mixture-of-experts vision-language model"},
    {"gemma", "Gemma 1"},
    {"gemma2", "Gemma 2 (soft-capped attention)"},
    {"gemma3n", "Gemma 3n (per-layer embeddings, AltUp)"},
    {"gemma4_mtp", "a Gemma 4 multi-token-prediction draft model"},
    {"gemma4-assistant", "a Gemma 4 assistant (draft) model"},
    {"phimoe", "the Phi-3.5 mixture-of-experts variant"},
    {"phi2", "Phi-2"},
    {"clip", "a vision projector (mmproj) file, not a language model"},
};

static tern_status read_hparams(const struct tern_gguf *g, struct tern_model *m)
{
    struct model_hparams *in = &m->info;
    struct tern_str arch;
    tern_status st = tern_gguf_get_str(g, "general.architecture", &arch);
    if (st == TERN_ERR_NOT_FOUND)
        return tern_fail(st, "key 'general.architecture' is missing (is this a model file?)");
    if (st) return st;
    int ai = -1;
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (arch.len == strlen(archs[i].name) && !memcmp(arch.ptr, archs[i].name, arch.len))
            ai = (int)i;
    const int alen = (int)(arch.len > 64 ? 64 : arch.len);
    if (ai < 0) {
        for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
            if (arch.len == strlen(refused[i].name) && !memcmp(arch.ptr, refused[i].name, arch.len))
                return tern_fail(TERN_ERR_UNSUPPORTED,
                                 "architecture '%.*s' (%s) is not supported (supported: llama, "
                                 "qwen2, qwen3, smollm3, phi3, gemma3, gemma4, qwen35)", alen, arch.ptr,
                                 refused[i].what);
        return tern_fail(TERN_ERR_UNSUPPORTED,
                         "architecture '%.*s' is not supported (supported: llama, qwen2, qwen3, "
                         "smollm3, phi3, gemma3, gemma4, qwen35)", alen, arch.ptr);
    }
    in->arch = archs[ai].arch;
    in->rope_neox = archs[ai].neox;
    snprintf(m->arch_name, sizeof m->arch_name, "%.*s", (int)arch.len, arch.ptr);
    in->arch_name = m->arch_name;
    const char *a = m->arch_name;

    uint32_t n_embd, n_layer, n_head, n_ctx = 0, key_len = 0, n_rot = 0;
    if ((st = get_u32_req(g, a, "embedding_length", &n_embd)) ||
        (st = get_u32_req(g, a, "block_count", &n_layer)) ||
        (st = get_u32_req(g, a, "attention.head_count", &n_head)) ||
        (st = get_u32_opt(g, a, "context_length", &n_ctx)) ||
        (st = get_u32_opt(g, a, "attention.key_length", &key_len)) ||
        (st = get_u32_opt(g, a, "rope.dimension_count", &n_rot)))
        return st;
    if (n_embd == 0 || n_embd > 65536 || n_layer == 0 || n_layer > 1024 || n_head == 0 ||
        n_head > 1024)
        return tern_fail(TERN_ERR_FORMAT, "implausible hyperparameters: n_embd %u, n_layer %u, "
                         "n_head %u", n_embd, n_layer, n_head);
    /* FFN width and KV heads may differ per layer (one value or an array of n_layer) */
    m->layers = calloc(n_layer, sizeof *m->layers);
    uint32_t *n_ff = calloc(n_layer, sizeof *n_ff), *n_kv = calloc(n_layer, sizeof *n_kv);
    bool have_ff, have_kv;
    if (!m->layers || !n_ff || !n_kv) st = tern_fail(TERN_ERR_NOMEM, "out of memory for %u layers", n_layer);
    if (!st) st = get_u32_layers(g, a, "feed_forward_length", (int)n_layer, n_ff, &have_ff);
    if (!st) st = get_u32_layers(g, a, "attention.head_count_kv", (int)n_layer, n_kv, &have_kv);
    if (!st && !have_ff) st = tern_fail(TERN_ERR_NOT_FOUND, "required key '%s.feed_forward_length' is missing", a);
    for (uint32_t il = 0; il < n_layer && !st; il++) {
        if (!have_kv || n_kv[il] == 0) n_kv[il] = n_head;
        if (n_ff[il] == 0 || n_ff[il] > 1 << 20)
            st = tern_fail(TERN_ERR_FORMAT, "implausible feed_forward_length %u (layer %u)", n_ff[il], il);
        else if (n_head % n_kv[il])
            st = tern_fail(TERN_ERR_FORMAT, "head_count %u is not a multiple of head_count_kv %u "
                           "(layer %u)", n_head, n_kv[il], il);
        m->layers[il].n_ff = (int)n_ff[il];
        m->layers[il].n_kv = (int)n_kv[il];
        if (!st && (int)n_ff[il] > in->n_ff_max) in->n_ff_max = (int)n_ff[il];
    }
    free(n_ff);
    free(n_kv);
    if (st) return st;
    if (key_len == 0) {
        if (n_embd % n_head)
            return tern_fail(TERN_ERR_FORMAT, "embedding_length %u is not a multiple of "
                             "head_count %u", n_embd, n_head);
        key_len = n_embd / n_head;
    }
    if (key_len % 2 || key_len > 1024)
        return tern_fail(TERN_ERR_FORMAT, "head dimension %u must be even and <= 1024", key_len);
    if (n_rot == 0) n_rot = key_len;
    if (n_rot > key_len || n_rot % 2)
        return tern_fail(TERN_ERR_FORMAT, "rope.dimension_count %u must be even and <= head "
                         "dimension %u", n_rot, key_len);

    in->n_embd = (int)n_embd;
    in->n_layer = (int)n_layer;
    in->n_head = (int)n_head;
    in->n_head_kv = m->layers[0].n_kv;
    in->head_dim = (int)key_len;
    in->n_ff = m->layers[0].n_ff;
    for (int il = 0; il < in->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        L->hd = (int)key_len;
        L->n_rot = (int)n_rot;
        L->kv_src = il;
        L->out_scale = 1.0f;
    }
    in->n_ctx_train = (int)(n_ctx ? n_ctx : 2048);
    in->n_rot = (int)n_rot;
    in->rope_freq_base = 10000.0f;
    in->rope_freq_scale = 1.0f;
    in->rms_eps = 1e-5f;
    if ((st = get_f32_opt(g, a, "rope.freq_base", &in->rope_freq_base)) ||
        (st = get_f32_opt(g, a, "attention.layer_norm_rms_epsilon", &in->rms_eps)))
        return st;

    /* Linear RoPE scaling (rope.scaling.type = linear, factor f) divides positions by f.
     * Llama-3.x "llama3" scaling ships as the rope_freqs tensor instead (bound below). */
    struct tern_str stype;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    if (tern_gguf_get_str(g, key, &stype) == TERN_OK && stype.len == 6 &&
        !memcmp(stype.ptr, "linear", 6)) {
        float factor = 1.0f;
        if ((st = get_f32_opt(g, a, "rope.scaling.factor", &factor))) return st;
        if (!(factor > 0.0f) || !isfinite(factor))
            return tern_fail(TERN_ERR_FORMAT, "%s.rope.scaling.factor %g must be positive", a,
                             (double)factor);
        in->rope_freq_scale = 1.0f / factor;
    } else {
        float scale = 1.0f;
        if ((st = get_f32_opt(g, a, "rope.scale_linear", &scale))) return st;
        if (scale > 0.0f && isfinite(scale)) in->rope_freq_scale = 1.0f / scale;
    }
    if (!(in->rope_freq_base > 0.0f) || !isfinite(in->rope_freq_base) || !(in->rms_eps > 0.0f))
        return tern_fail(TERN_ERR_FORMAT, "rope.freq_base %g / rms epsilon %g must be positive",
                         (double)in->rope_freq_base, (double)in->rms_eps);
    return read_arch_hparams(g, m, key_len);
}

/* Rows [row0, row0 + rows) of a bound matrix as a matrix of its own (a part of a fused tensor). */
static void bind_rows(const struct model_weight *full, struct model_weight *w, int64_t row0,
                      int64_t rows, const char *part)
{
    *w = *full;
    w->data = (const char *)full->data + (size_t)row0 * full->row_bytes;
    w->rows = rows;
    snprintf(w->name, sizeof w->name, "%.38s[%s]", full->name, part);
}

/* Long-RoPE factors: n_rot/2 values (llama.cpp's converter) or head_dim/2 (what ik_llama.cpp's
 * phi3 loader asks for; only the first n_rot/2 are used, by it and by tern). */
static tern_status bind_factors(const struct tern_gguf *g, struct model_weight *w, const char *name,
                                const struct model_hparams *in)
{
    const struct tern_gguf_tensor *t = tern_gguf_find_tensor(g, name);
    int64_t n = in->n_rot / 2;
    if (t && t->n_dims == 1 && t->ne[0] == in->head_dim / 2) n = in->head_dim / 2;
    return bind(g, w, name, n, 1, true);
}

/* A qwen35 gated attention layer's tensors after attn_q: k, v, output and the q/k norms. */
static tern_status bind_qwen35_attn_rest(const struct tern_gguf *g, const struct model_hparams *in,
                                         int il, struct model_layer *L)
{
    const int64_t d = in->n_embd, hd = in->head_dim;
    char n[48];
#define N(suffix) (snprintf(n, sizeof n, "blk.%d.%s", il, suffix), n)
    tern_status st;
    return (st = bind(g, &L->wk, N("attn_k.weight"), d, in->n_head_kv * hd, false)) ||
           (st = bind(g, &L->wv, N("attn_v.weight"), d, in->n_head_kv * hd, false)) ||
           (st = bind(g, &L->wo, N("attn_output.weight"), in->n_head * hd, d, false)) ||
           (st = bind(g, &L->q_norm, N("attn_q_norm.weight"), hd, 1, false)) ||
           (st = bind(g, &L->k_norm, N("attn_k_norm.weight"), hd, 1, false)) ? st : TERN_OK;
#undef N
}

/* A qwen35 layer: attn_norm, post_attention_norm (the FFN's norm) and the SwiGLU FFN, then
 * either the Gated DeltaNet tensors or gated full attention (attn_q holds q and gate rows
 * interleaved per head: 2 * n_head * head_dim rows). */
static tern_status bind_qwen35_layer(const struct tern_gguf *g, const struct model_hparams *in,
                                     int il, struct model_layer *L)
{
    const int64_t d = in->n_embd, hd = in->head_dim;
    const int64_t key_dim = (int64_t)in->ssm_n_k_heads * in->ssm_head_k;
    const int64_t value_dim = (int64_t)in->ssm_n_v_heads * in->ssm_head_v;
    const int64_t conv_dim = 2 * key_dim + value_dim, nv = in->ssm_n_v_heads;
    char n[48];
#define N(suffix) (snprintf(n, sizeof n, "blk.%d.%s", il, suffix), n)
    tern_status st;
    if ((st = bind(g, &L->attn_norm, N("attn_norm.weight"), d, 1, false)) ||
        (st = bind(g, &L->ffn_norm, N("post_attention_norm.weight"), d, 1, false)) ||
        (st = bind(g, &L->ffn_gate, N("ffn_gate.weight"), d, in->n_ff, false)) ||
        (st = bind(g, &L->ffn_up, N("ffn_up.weight"), d, in->n_ff, false)) ||
        (st = bind(g, &L->ffn_down, N("ffn_down.weight"), in->n_ff, d, false)))
        return st;
    L->recurrent = (il + 1) % in->full_attn_interval != 0;
    if (!L->recurrent)
        return (st = bind(g, &L->wq, N("attn_q.weight"), d, 2 * in->n_head * hd, false)) ||
               (st = bind_qwen35_attn_rest(g, in, il, L)) ? st : TERN_OK;
    if (!tern_gguf_find_tensor(g, N("attn_qkv.weight")) && tern_gguf_find_tensor(g, N("ssm_in.weight")))
        return tern_fail(TERN_ERR_UNSUPPORTED, "layer %d: a fused ssm_in (qwen3next's layout) instead "
                         "of attn_qkv and attn_gate is not supported", il);
    if ((st = bind(g, &L->ssm_qkv, N("attn_qkv.weight"), d, conv_dim, false)) ||
        (st = bind(g, &L->ssm_z, N("attn_gate.weight"), d, value_dim, false)) ||
        (st = bind(g, &L->ssm_beta, N("ssm_beta.weight"), d, nv, false)) ||
        (st = bind(g, &L->ssm_alpha, N("ssm_alpha.weight"), d, nv, false)) ||
        (st = bind(g, &L->ssm_conv1d, N("ssm_conv1d.weight"), in->ssm_d_conv, conv_dim, false)) ||
        (st = bind(g, &L->ssm_dt, N("ssm_dt.bias"), nv, 1, false)) ||
        (st = bind(g, &L->ssm_a, N("ssm_a"), nv, 1, false)) ||
        (st = bind(g, &L->ssm_norm, N("ssm_norm.weight"), in->ssm_head_v, 1, false)) ||
        (st = bind(g, &L->ssm_out, N("ssm_out.weight"), value_dim, d, false)))
        return st;
#undef N
    if (L->ssm_conv1d.type != TERN_TYPE_F32)
        return tern_fail(TERN_ERR_UNSUPPORTED, "tensor '%s' has type %s; tern needs F32 here",
                         L->ssm_conv1d.name, tern_type_name(L->ssm_conv1d.type));
    return TERN_OK;
}

int model_layer_matrices(struct model_layer *L, struct model_weight **out)
{
    /* a v that is k's matrix (gemma4 31B) is k's: left out, callers fix it up after */
    struct model_weight *all[] = {&L->wq, &L->wk, L->v_is_k ? NULL : &L->wv, &L->wo,
                                  &L->ffn_gate, &L->ffn_up, &L->ffn_down, &L->ple_gate,
                                  &L->ple_proj, &L->ssm_qkv, &L->ssm_z, &L->ssm_beta,
                                  &L->ssm_alpha, &L->ssm_out};
    _Static_assert(sizeof all / sizeof all[0] == MODEL_LAYER_MAX_MATRICES, "list every matrix");
    int n = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (all[i] && all[i]->data) out[n++] = all[i];
    return n;
}

/* The multi-token-prediction layer of a qwen35 file (blk.<n_layer>, as ik_llama.cpp binds it): a
 * gated attention layer whose attn_q may be absent (the last main attention layer's is shared,
 * Qwen3.5-9B) and whose FFN may be absent (4B, 9B), the nextn.* tensors (eh_proj may be absent:
 * then the two normalized inputs are added), and the output head output_extra, or the model's.
 * The main model runs without it, so a file whose MTP tensors are missing or malformed still
 * loads: m->mtp.il stays -1 and why_not says what is wrong (--draft mtp reports it). */
static tern_status bind_qwen35_mtp(const struct tern_gguf *g, struct tern_model *m)
{
    const struct model_hparams *in = &m->info;
    const int il = in->n_layer;
    const int64_t d = in->n_embd, hd = in->head_dim;
    struct model_layer *L = &m->layers[il];
    struct model_mtp *t = &m->mtp;
    if (in->n_nextn != 1)
        return tern_fail(TERN_ERR_UNSUPPORTED, "%d multi-token-prediction layers: tern runs files "
                         "with exactly one", in->n_nextn);
    char n[48];
#define N(suffix) (snprintf(n, sizeof n, "blk.%d.%s", il, suffix), n)
    tern_status st;
    if ((st = bind(g, &L->attn_norm, N("attn_norm.weight"), d, 1, false)) ||
        (st = bind(g, &L->ffn_norm, N("post_attention_norm.weight"), d, 1, false)) ||
        (st = bind(g, &L->wq, N("attn_q.weight"), d, 2 * in->n_head * hd, true)) ||
        (st = bind_qwen35_attn_rest(g, in, il, L)) ||
        (st = bind(g, &L->ffn_gate, N("ffn_gate.weight"), d, L->n_ff, true)) ||
        (st = bind(g, &L->ffn_up, N("ffn_up.weight"), d, L->n_ff, true)) ||
        (st = bind(g, &L->ffn_down, N("ffn_down.weight"), L->n_ff, d, true)) ||
        (st = bind(g, &t->eh_proj, N("nextn.eh_proj.weight"), 2 * d, d, true)) ||
        (st = bind(g, &t->enorm, N("nextn.enorm.weight"), d, 1, false)) ||
        (st = bind(g, &t->hnorm, N("nextn.hnorm.weight"), d, 1, false)) ||
        (st = bind(g, &t->head_norm, N("nextn.shared_head_norm.weight"), d, 1, true)) ||
        (st = bind(g, &t->output, "output_extra.weight", d, in->n_vocab, true)))
        return st;
    const int ffn = !!L->ffn_gate.data + !!L->ffn_up.data + !!L->ffn_down.data;
    if (ffn != 0 && ffn != 3)
        return tern_fail(TERN_ERR_FORMAT, "layer %d: ffn_gate, ffn_up and ffn_down must be all "
                         "present or all absent", il);
#undef N
    t->q_from = -1;
    if (!L->wq.data) { /* shared with the last main attention layer */
        int last = il - 1;
        while (last >= 0 && m->layers[last].recurrent) last--;
        if (last < 0) return tern_fail(TERN_ERR_FORMAT, "layer %d has no attn_q and no main layer "
                                       "has one to share", il);
        t->q_from = last;
    }
    if (!t->output.data) t->output = m->output;
    L->recurrent = false;
    L->rope = true;
    L->rec_index = -1;
    L->kv_src = il;
    t->il = il;
    model_mtp_share(m);
    struct model_weight *w[MODEL_LAYER_MAX_MATRICES];
    const int nw = model_layer_matrices(L, w);
    uint64_t bytes = 0;
    for (int i = 0; i < nw; i++) bytes += w[i]->row_bytes * (uint64_t)w[i]->rows;
    if (t->eh_proj.data) bytes += t->eh_proj.row_bytes * (uint64_t)t->eh_proj.rows;
    m->info.mtp_layer_bytes = bytes;
    m->info.mtp_bytes = bytes + t->output.row_bytes * (uint64_t)t->output.rows;
    return TERN_OK;
}

void model_mtp_share(struct tern_model *m)
{
    struct model_mtp *t = &m->mtp;
    if (t->il < 0) return;
    if (t->q_from >= 0) m->layers[t->il].wq = m->layers[t->q_from].wq;
    /* output_extra absent: the head is the model's output (tied or not) */
    if (t->output.data == m->output.data) t->output = m->output;
}

/* tern.output_token_ids: the output head keeps only these tokens' rows (a drafter that only
 * proposes the tokens it was seen to need reads a fraction of a 150k-token head per token). The
 * ids must ascend strictly and lie in the vocabulary; output.weight must then hold exactly their
 * rows, so a tied or mismatched head is refused. */
static tern_status bind_head_ids(const struct tern_gguf *g, struct tern_model *m)
{
    const char *key = "tern.output_token_ids";
    const int64_t ki = tern_gguf_find_key(g, key);
    if (ki < 0) return TERN_OK;
    const enum tern_gguf_type et = tern_gguf_arr_type(g, ki);
    if (tern_gguf_kv_type(g, ki) != TERN_GGUF_ARRAY ||
        (et != TERN_GGUF_INT32 && et != TERN_GGUF_UINT32))
        return tern_fail(TERN_ERR_FORMAT, "%s must be an array of 32-bit integers", key);
    const uint64_t n = tern_gguf_arr_len(g, ki);
    if (n < 1 || n > (uint64_t)m->info.n_vocab)
        return tern_fail(TERN_ERR_FORMAT, "%s holds %llu ids; a pruned head keeps 1 to %d (the "
                         "vocabulary)", key, (unsigned long long)n, m->info.n_vocab);
    if (!tern_gguf_find_tensor(g, "output.weight"))
        return tern_fail(TERN_ERR_FORMAT, "%s is set but the file has no output.weight (a pruned "
                         "head cannot be the tied embeddings)", key);
    m->head_ids = malloc(n * sizeof *m->head_ids);
    if (!m->head_ids) return tern_fail(TERN_ERR_NOMEM, "%s: out of memory", key);
    memcpy(m->head_ids, tern_gguf_arr_data(g, ki), n * sizeof *m->head_ids);
    m->n_head_ids = (int)n;
    const int64_t bad = convert_head_ids_first_bad(m->head_ids, (int64_t)n, m->info.n_vocab);
    if (bad >= 0)
        return tern_fail(TERN_ERR_FORMAT, "%s[%lld] = %d: the ids must ascend strictly and lie in "
                         "[0, %d)", key, (long long)bad, m->head_ids[bad], m->info.n_vocab);
    return TERN_OK;
}

static tern_status bind_weights(const struct tern_gguf *g, struct tern_model *m)
{
    struct model_hparams *in = &m->info;
    const struct tern_gguf_tensor *te = tern_gguf_find_tensor(g, "token_embd.weight");
    if (!te) return tern_fail(TERN_ERR_FORMAT, "tensor 'token_embd.weight' is missing");
    if (te->n_dims != 2 || te->ne[1] < 1 || te->ne[1] > (1 << 24))
        return tern_fail(TERN_ERR_FORMAT, "tensor 'token_embd.weight' has an implausible shape");
    in->n_vocab = (int)te->ne[1];
    const int64_t d = in->n_embd, n_pl = in->n_embd_per_layer;
    const bool gemma4 = in->arch == TERN_ARCH_GEMMA4;
    tern_status st;
    if ((st = bind_head_ids(g, m))) return st;
    if ((st = bind(g, &m->tok_embd, "token_embd.weight", d, in->n_vocab, false)) ||
        (st = bind(g, &m->output_norm, "output_norm.weight", d, 1, false)) ||
        (st = bind(g, &m->output, "output.weight", d, m->head_ids ? m->n_head_ids : in->n_vocab,
                   !m->head_ids)))
        return st;
    /* gemma4: proportional RoPE of the global layers as factors, head_dim/2 of them (ik) */
    if (gemma4) st = bind_factors(g, &m->rope_freqs, "rope_freqs.weight", in);
    else st = bind(g, &m->rope_freqs, "rope_freqs.weight", in->n_rot / 2, 1, true);
    if (st) return st;
    in->tied_output = m->output.data == NULL;
    in->head_rows = m->head_ids ? m->n_head_ids : in->n_vocab;
    if (in->tied_output) m->output = m->tok_embd;
    in->has_rope_freqs = m->rope_freqs.data != NULL;
    if (in->arch == TERN_ARCH_PHI3) {
        if ((st = bind_factors(g, &m->rope_long, "rope_factors_long.weight", in)) ||
            (st = bind_factors(g, &m->rope_short, "rope_factors_short.weight", in)))
            return st;
        if ((m->rope_long.data != NULL) != (m->rope_short.data != NULL))
            return tern_fail(TERN_ERR_FORMAT, "rope_factors_long and rope_factors_short must be "
                             "both present or both absent");
        in->has_rope_long = m->rope_long.data != NULL;
        if (in->has_rope_freqs && in->has_rope_long)
            return tern_fail(TERN_ERR_FORMAT, "both rope_freqs and rope_factors_long/short are "
                             "present: which factors apply is ambiguous");
    }
    if (n_pl > 0 &&
        ((st = bind(g, &m->ple_embd, "per_layer_token_embd.weight", n_pl * in->n_layer, in->n_vocab, false)) ||
         (st = bind(g, &m->ple_model_proj, "per_layer_model_proj.weight", d, n_pl * in->n_layer, false)) ||
         (st = bind(g, &m->ple_proj_norm, "per_layer_proj_norm.weight", n_pl, 1, false))))
        return st;

    for (int il = 0, reci = 0; il < in->n_layer; il++) {
        struct model_layer *L = &m->layers[il];
        if (in->arch == TERN_ARCH_QWEN35) {
            if ((st = bind_qwen35_layer(g, in, il, L))) return st;
            L->rope = true;
            /* a DeltaNet layer stores and reads no KV (kv_cache.h): its state is in rec_state */
            if (L->recurrent) L->kv_src = -1;
            L->rec_index = L->recurrent ? reci++ : -1;
            continue;
        }
        L->rec_index = -1;
        const int64_t hd = L->hd, n_ff = L->n_ff;
        const int64_t q_dim = in->n_head * hd, kv_dim = L->n_kv * hd;
        const bool own_kv = L->kv_src == il;
        enum { ATTN_NORM, Q, K, V, O, BQ, BK, BV, FFN_NORM, GATE, UP, DOWN, QKV, Q_NORM, K_NORM,
               POST_ATTN, POST_FFW, OUT_SCALE, PLE_GATE, PLE_PROJ, PLE_NORM, GATE_INP, N_NAMES };
        static const char *suffix[N_NAMES] = {
            "attn_norm.weight", "attn_q.weight",  "attn_k.weight",  "attn_v.weight",
            "attn_output.weight", "attn_q.bias",  "attn_k.bias",    "attn_v.bias",
            "ffn_norm.weight",  "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
            "attn_qkv.weight", "attn_q_norm.weight", "attn_k_norm.weight",
            "post_attention_norm.weight", "post_ffw_norm.weight", "layer_output_scale.weight",
            "inp_gate.weight", "proj.weight", "post_norm.weight", "ffn_gate_inp.weight"};
        char n[N_NAMES][48];
        for (int i = 0; i < N_NAMES; i++) snprintf(n[i], sizeof n[i], "blk.%d.%s", il, suffix[i]);
        if (gemma4 && tern_gguf_find_tensor(g, n[GATE_INP]))
            return tern_fail(TERN_ERR_UNSUPPORTED, "tensor '%s': the Gemma 4 mixture-of-experts "
                             "variant (26B-A4B) is not supported", n[GATE_INP]);
        if ((st = bind(g, &L->attn_norm, n[ATTN_NORM], d, 1, false)) ||
            (st = bind(g, &L->wo, n[O], q_dim, d, false)) ||
            (st = bind(g, &L->ffn_norm, n[FFN_NORM], d, 1, false)) ||
            (st = bind(g, &L->ffn_down, n[DOWN], n_ff, d, false)))
            return st;
        if (in->fused_qkv) {
            /* attn_qkv holds q, k, v rows in that order; ffn_up holds gate rows, then up rows */
            struct model_weight qkv, gu;
            if ((st = bind(g, &qkv, n[QKV], d, q_dim + 2 * kv_dim, false)) ||
                (st = bind(g, &gu, n[UP], d, 2 * n_ff, false)))
                return st;
            bind_rows(&qkv, &L->wq, 0, q_dim, "q");
            bind_rows(&qkv, &L->wk, q_dim, kv_dim, "k");
            bind_rows(&qkv, &L->wv, q_dim + kv_dim, kv_dim, "v");
            bind_rows(&gu, &L->ffn_gate, 0, n_ff, "gate");
            bind_rows(&gu, &L->ffn_up, n_ff, n_ff, "up");
        } else if ((st = bind(g, &L->wq, n[Q], d, q_dim, false)) ||
                   (own_kv && (st = bind(g, &L->wk, n[K], d, kv_dim, false))) ||
                   /* gemma4: attn_v may be absent (v = k's projection); shared-KV layers need
                    * no k / v at all (a file may still carry them: unused) */
                   (own_kv && (st = bind(g, &L->wv, n[V], d, kv_dim, gemma4))) ||
                   (st = bind(g, &L->bq, n[BQ], q_dim, 1, true)) ||
                   (own_kv && (st = bind(g, &L->bk, n[BK], kv_dim, 1, true))) ||
                   (own_kv && (st = bind(g, &L->bv, n[BV], kv_dim, 1, true))) ||
                   (st = bind(g, &L->ffn_gate, n[GATE], d, n_ff, false)) ||
                   (st = bind(g, &L->ffn_up, n[UP], d, n_ff, false))) {
            return st;
        }
        if (own_kv && !L->wv.data) {
            L->v_is_k = true;
            L->wv = L->wk;
        }
        if (in->has_qk_norm && ((st = bind(g, &L->q_norm, n[Q_NORM], hd, 1, false)) ||
                                (own_kv && (st = bind(g, &L->k_norm, n[K_NORM], hd, 1, false)))))
            return st;
        if (in->has_post_norms && ((st = bind(g, &L->attn_post_norm, n[POST_ATTN], d, 1, false)) ||
                                   (st = bind(g, &L->ffn_post_norm, n[POST_FFW], d, 1, false))))
            return st;
        if (gemma4) {
            struct model_weight sc;
            if ((st = bind(g, &sc, n[OUT_SCALE], 1, 1, true))) return st;
            if (sc.data) memcpy(&L->out_scale, sc.data, sizeof L->out_scale);
            if (!isfinite(L->out_scale))
                return tern_fail(TERN_ERR_FORMAT, "tensor '%s' is not a finite number", n[OUT_SCALE]);
            if (n_pl > 0 && ((st = bind(g, &L->ple_gate, n[PLE_GATE], d, n_pl, false)) ||
                             (st = bind(g, &L->ple_proj, n[PLE_PROJ], n_pl, d, false)) ||
                             (st = bind(g, &L->ple_post_norm, n[PLE_NORM], d, 1, false))))
                return st;
        }
        if (il == 0) in->has_qkv_bias = L->bq.data != NULL;
        if ((L->bq.data != NULL) != in->has_qkv_bias ||
            (own_kv && ((L->bk.data != NULL) != in->has_qkv_bias ||
                        (L->bv.data != NULL) != in->has_qkv_bias)))
            return tern_fail(TERN_ERR_FORMAT, "layer %d: q/k/v biases must be all present or all "
                             "absent, as in layer 0", il);
        if (!gemma4) L->swa = in->n_swa > 0 && (in->arch != TERN_ARCH_GEMMA3 || (il + 1) % 6 != 0);
        L->rope = in->nope_every == 0 || (il + 1) % in->nope_every != 0;
    }
    if (in->arch == TERN_ARCH_QWEN35 && in->n_nextn > 0 && bind_qwen35_mtp(g, m)) {
        snprintf(m->mtp.why_not, sizeof m->mtp.why_not, "%s", tern_last_error());
        m->mtp.il = -1;
        tern_clear_error();
    }
    /* a KV block keeps only a window when every layer that reads it is a sliding-window layer */
    for (int il = 0; il < in->n_layer; il++) m->layers[il].kv_windowed = m->layers[il].swa && in->n_swa > 0;
    for (int il = 0; il < in->n_layer; il++)
        if (!m->layers[il].swa && m->layers[il].kv_src >= 0) m->layers[m->layers[il].kv_src].kv_windowed = false;
    for (int64_t i = 0; i < tern_gguf_n_tensors(g); i++)
        in->weight_bytes += tern_gguf_tensor(g, i)->nbytes;
    return TERN_OK;
}

/* params->decode_tile: force a tile (kern_tune.h) for the process, or back to the measured ones. */
static tern_status set_decode_tile(const char *name)
{
    const int t = kern_tile_from_name(name);
    if (t < 0)
        return tern_fail(TERN_ERR_ARG, "decode tile '%s' is not one of auto, zmm, ymm-evex, ymm-vnni, ymm",
                         name ? name : "(null)");
    if (!kern_tile_force(t))
        return tern_fail(TERN_ERR_UNSUPPORTED, "decode tile '%s' cannot run on this CPU's kernel path (%s)",
                         name, kern_path_name());
    return TERN_OK;
}

/* Bind a model to an opened GGUF (taking it over), warm its pages if asked, repack its matrices
 * unless asked not to. file_mapped: g is tern_gguf_open's mapping of a file. */
static tern_status model_from_gguf(struct tern_gguf *g, const char *name, bool file_mapped,
                                   const struct tern_model_params *params, struct tern_model **out)
{
    struct tern_model *m = calloc(1, sizeof *m);
    if (!m) {
        tern_gguf_close(g);
        return tern_fail(TERN_ERR_NOMEM, "out of memory");
    }
    m->gguf = g;
    m->mtp.il = -1;
    tern_status st = read_hparams(m->gguf, m);
    if (!st) st = bind_weights(m->gguf, m);
    if (st) {
        tern_fail_prefix(st, "%s: ", name);
        tern_model_free(m);
        return st;
    }
    if (params && params->prefault) {
        /* Ask the kernel to read the whole file ahead, then touch a byte per page so the first
         * request does not pay for page faults. */
        const volatile unsigned char *p = tern_gguf_file_data(m->gguf);
        size_t size = tern_gguf_file_size(m->gguf);
        madvise((void *)((uintptr_t)p & ~(uintptr_t)4095), size, MADV_WILLNEED);
        unsigned char sink = 0;
        for (size_t off = 0; off < size; off += 4096) sink ^= p[off];
        (void)sink;
    }
    if (params && params->decode_tile && (st = set_decode_tile(params->decode_tile))) {
        tern_model_free(m);
        return st;
    }
    const char *env = getenv("TERN_REPACK");
    const bool repack = !(params && params->no_repack) && !(env && !strcmp(env, "0"));
    m->mmap_only = !repack;
    if (repack && (st = model_repack(m, file_mapped))) {
        tern_fail_prefix(st, "%s: ", name);
        tern_model_free(m);
        return st;
    }
    if (repack) model_tune_tiles(m);
    model_publish_info(m);
    *out = m;
    return TERN_OK;
}

tern_status tern_model_load(const char *path, const struct tern_model_params *params,
                            struct tern_model **out)
{
    struct tern_gguf *g;
    tern_status st = tern_gguf_open(path, &g); /* its messages name the file already */
    return st ? st : model_from_gguf(g, path, true, params, out);
}

tern_status tern_model_load_memory(const void *data, size_t size,
                                   const struct tern_model_params *params, struct tern_model **out)
{
    struct tern_gguf *g;
    tern_status st = tern_gguf_open_memory(data, size, &g);
    return st ? st : model_from_gguf(g, "<memory>", false, params, out);
}

void tern_model_free(struct tern_model *m)
{
    if (!m) return;
    free(m->owned);
    free(m->packed_buf);
    free(m->head_ids);
    free(m->layers);
    tern_gguf_close(m->gguf);
    free(m);
}

const char *tern_kernels_name(void) { return kern_path_name(); }
int tern_model_n_vocab(const struct tern_model *m) { return m->info.n_vocab; }
const struct tern_gguf *tern_model_gguf(const struct tern_model *m) { return m->gguf; }

uint64_t tern_model_kv_bytes(const struct tern_model *m, int n_ctx)
{
    /* each layer that stores KV: its heads x its head size (gemma4's layers differ; qwen35's
     * DeltaNet layers store none) */
    uint64_t per_pos = 0;
    for (int il = 0; il < m->info.n_layer; il++) {
        const struct model_layer *L = &m->layers[il];
        if (L->kv_src == il) per_pos += (uint64_t)L->n_kv * (uint64_t)L->hd;
    }
    return 2ull * per_pos * (uint64_t)n_ctx * sizeof(uint16_t);
}

uint64_t tern_model_kv_bytes_windowed(const struct tern_model *m, int n_ctx, int n_batch)
{
    /* a windowed block holds the window (from its first key, a multiple of 8), KV_WIN_KEEP below
     * it, up to KV_WIN_STEP not yet released and the call's batch; plus a partly released page at
     * each end of each head's rows (counted at 4 KiB) */
    if (n_batch <= 0) n_batch = 512;
    const int n = m->info.n_swa + 7 + KV_WIN_KEEP + KV_WIN_STEP + n_batch;
    uint64_t bytes = 0;
    for (int il = 0; il < m->info.n_layer; il++) {
        const struct model_layer *L = &m->layers[il];
        if (L->kv_src != il) continue;
        const bool win = L->kv_windowed;
        const uint64_t rows = win && n < n_ctx ? (uint64_t)n : (uint64_t)n_ctx;
        bytes += 2ull * (uint64_t)L->n_kv * (rows * (uint64_t)L->hd * sizeof(uint16_t) + (win && n < n_ctx ? 2 * 4096 : 0));
    }
    return bytes;
}

bool tern_model_has_mtp(const struct tern_model *m, const char **why_not)
{
    if (m->mtp.il >= 0) return true;
    if (why_not) *why_not = model_mtp_why_not(m);
    return false;
}

const char *model_mtp_why_not(const struct tern_model *m)
{
    if (m->mtp.il >= 0) return "";
    if (m->mtp.why_not[0]) return m->mtp.why_not;
    return m->info.arch == TERN_ARCH_QWEN35 ? "the file has no multi-token-prediction layer "
           "(qwen35.nextn_predict_layers is 0 or absent)"
         : "only qwen35 files carry a multi-token-prediction layer tern runs";
}

/* model_hparams.c — the model's hyperparameters as the public API shows them: the stable core
 * of struct tern_model_info (copied once a load or copy is final) and every other field of the
 * internal struct model_hparams (model.h) by name, through one table. A field added to
 * model_hparams for a new architecture gets a row here and changes no public struct. */
#include <stddef.h>
#include <string.h>

#include "model/model.h"

enum hp_kind { HP_ARCH, HP_BOOL, HP_INT, HP_FLOAT, HP_U64 };

static const struct hp_row {
    const char *name;
    size_t off;
    enum hp_kind kind;
} HPARAMS[] = {
    {"arch", offsetof(struct model_hparams, arch), HP_ARCH},
    {"n_vocab", offsetof(struct model_hparams, n_vocab), HP_INT},
    {"n_embd", offsetof(struct model_hparams, n_embd), HP_INT},
    {"n_layer", offsetof(struct model_hparams, n_layer), HP_INT},
    {"n_head", offsetof(struct model_hparams, n_head), HP_INT},
    {"n_head_kv", offsetof(struct model_hparams, n_head_kv), HP_INT},
    {"head_dim", offsetof(struct model_hparams, head_dim), HP_INT},
    {"n_ff", offsetof(struct model_hparams, n_ff), HP_INT},
    {"n_ctx_train", offsetof(struct model_hparams, n_ctx_train), HP_INT},
    {"n_rot", offsetof(struct model_hparams, n_rot), HP_INT},
    {"rope_freq_base", offsetof(struct model_hparams, rope_freq_base), HP_FLOAT},
    {"rope_freq_scale", offsetof(struct model_hparams, rope_freq_scale), HP_FLOAT},
    {"rope_neox", offsetof(struct model_hparams, rope_neox), HP_BOOL},
    {"has_rope_freqs", offsetof(struct model_hparams, has_rope_freqs), HP_BOOL},
    {"rms_eps", offsetof(struct model_hparams, rms_eps), HP_FLOAT},
    {"tied_output", offsetof(struct model_hparams, tied_output), HP_BOOL},
    {"head_rows", offsetof(struct model_hparams, head_rows), HP_INT},
    {"has_qkv_bias", offsetof(struct model_hparams, has_qkv_bias), HP_BOOL},
    {"weight_bytes", offsetof(struct model_hparams, weight_bytes), HP_U64},
    {"repacked_bytes", offsetof(struct model_hparams, repacked_bytes), HP_U64},
    {"has_qk_norm", offsetof(struct model_hparams, has_qk_norm), HP_BOOL},
    {"has_post_norms", offsetof(struct model_hparams, has_post_norms), HP_BOOL},
    {"ffn_gelu", offsetof(struct model_hparams, ffn_gelu), HP_BOOL},
    {"fused_qkv", offsetof(struct model_hparams, fused_qkv), HP_BOOL},
    {"embd_scale", offsetof(struct model_hparams, embd_scale), HP_FLOAT},
    {"attn_scale", offsetof(struct model_hparams, attn_scale), HP_FLOAT},
    {"nope_every", offsetof(struct model_hparams, nope_every), HP_INT},
    {"n_swa", offsetof(struct model_hparams, n_swa), HP_INT},
    {"n_layer_swa", offsetof(struct model_hparams, n_layer_swa), HP_INT},
    {"rope_freq_base_swa", offsetof(struct model_hparams, rope_freq_base_swa), HP_FLOAT},
    {"rope_attn_factor", offsetof(struct model_hparams, rope_attn_factor), HP_FLOAT},
    {"has_rope_long", offsetof(struct model_hparams, has_rope_long), HP_BOOL},
    {"n_ctx_orig", offsetof(struct model_hparams, n_ctx_orig), HP_INT},
    {"released_bytes", offsetof(struct model_hparams, released_bytes), HP_U64},
    {"n_head_kv_swa", offsetof(struct model_hparams, n_head_kv_swa), HP_INT},
    {"head_dim_swa", offsetof(struct model_hparams, head_dim_swa), HP_INT},
    {"n_rot_swa", offsetof(struct model_hparams, n_rot_swa), HP_INT},
    {"n_ff_max", offsetof(struct model_hparams, n_ff_max), HP_INT},
    {"n_layer_kv", offsetof(struct model_hparams, n_layer_kv), HP_INT},
    {"n_embd_per_layer", offsetof(struct model_hparams, n_embd_per_layer), HP_INT},
    {"v_norm", offsetof(struct model_hparams, v_norm), HP_BOOL},
    {"final_softcap", offsetof(struct model_hparams, final_softcap), HP_FLOAT},
    {"n_layer_rec", offsetof(struct model_hparams, n_layer_rec), HP_INT},
    {"full_attn_interval", offsetof(struct model_hparams, full_attn_interval), HP_INT},
    {"ssm_d_conv", offsetof(struct model_hparams, ssm_d_conv), HP_INT},
    {"ssm_n_k_heads", offsetof(struct model_hparams, ssm_n_k_heads), HP_INT},
    {"ssm_n_v_heads", offsetof(struct model_hparams, ssm_n_v_heads), HP_INT},
    {"ssm_head_k", offsetof(struct model_hparams, ssm_head_k), HP_INT},
    {"ssm_head_v", offsetof(struct model_hparams, ssm_head_v), HP_INT},
    {"attn_gate", offsetof(struct model_hparams, attn_gate), HP_BOOL},
    {"n_nextn", offsetof(struct model_hparams, n_nextn), HP_INT},
    {"state_bytes", offsetof(struct model_hparams, state_bytes), HP_U64},
    {"mtp_bytes", offsetof(struct model_hparams, mtp_bytes), HP_U64},
    {"mtp_layer_bytes", offsetof(struct model_hparams, mtp_layer_bytes), HP_U64},
};

void model_publish_info(struct tern_model *m)
{
    const struct model_hparams *h = &m->info;
    m->pub = (struct tern_model_info){
        .struct_size = sizeof(struct tern_model_info),
        .arch = h->arch,
        .arch_name = h->arch_name,
        .n_vocab = h->n_vocab,
        .n_embd = h->n_embd,
        .n_layer = h->n_layer,
        .n_head = h->n_head,
        .n_head_kv = h->n_head_kv,
        .head_dim = h->head_dim,
        .n_ff = h->n_ff,
        .n_ctx_train = h->n_ctx_train,
        .n_layer_kv = h->n_layer_kv,
        .n_layer_rec = h->n_layer_rec,
        .weight_bytes = h->weight_bytes,
        .repacked_bytes = h->repacked_bytes,
        .released_bytes = h->released_bytes,
        .state_bytes = h->state_bytes,
        .decode_tiles = m->tile_report,
    };
}

const struct tern_model_info *tern_model_get_info(const struct tern_model *m) { return &m->pub; }

bool tern_model_hparam(const struct tern_model *m, const char *name, double *value)
{
    if (!m || !name || !value) return false;
    for (size_t i = 0; i < sizeof HPARAMS / sizeof HPARAMS[0]; i++) {
        if (strcmp(HPARAMS[i].name, name)) continue;
        const char *p = (const char *)&m->info + HPARAMS[i].off;
        switch (HPARAMS[i].kind) {
        case HP_ARCH: { enum tern_arch a; memcpy(&a, p, sizeof a); *value = (double)a; break; }
        case HP_BOOL: { bool b; memcpy(&b, p, sizeof b); *value = b ? 1.0 : 0.0; break; }
        case HP_INT: { int v; memcpy(&v, p, sizeof v); *value = (double)v; break; }
        case HP_FLOAT: { float v; memcpy(&v, p, sizeof v); *value = (double)v; break; }
        case HP_U64: { uint64_t v; memcpy(&v, p, sizeof v); *value = (double)v; break; }
        }
        return true;
    }
    return false;
}

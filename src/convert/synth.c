/* synth.c — random-weight models with the exact shapes of real ones, written with tern's own
 * GGUF writer and quantizer, so anyone can run and benchmark real shapes with no download.
 *
 * Weights are N(0, 0.02) (q/k 0.08, biases 0.2, norms 1 + 0.05 N), as in the fixture models:
 * speed does not depend on the values, and these keep activations in a realistic range.
 * The vocabulary is byte-level (GPT-2 style: the 256 byte tokens, no merges) plus ChatML control
 * tokens, padded with unused tokens to the real vocabulary size, so text goes in and out and
 * the embedding/output matrices have their real size. A ChatML template is included. The empty
 * merges array is there for llama.cpp, which refuses a BPE vocabulary without that key.
 *
 * With a vocabulary file (tern_synth_model_write_vocab), every tokenizer.* key of that file is
 * copied verbatim instead: the model then tokenizes exactly like the real one, and llama.cpp and
 * tern can load the same file for side-by-side benchmarks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "convert/type_plan.h"
#include "quant/quant.h"
#include "util/error.h"

/* One shape: the real model's configuration (HF config.json) as llama.cpp's converter writes it,
 * or a tiny one of the same architecture (the parity tests' models). */
struct synth_shape {
    const char *name;
    const char *arch;    /* general.architecture */
    const char *pre;     /* tokenizer.ggml.pre */
    int n_embd, n_layer, n_head, n_head_kv, n_ff, n_vocab, n_ctx;
    float rope_base, rms_eps;
    bool tied, qkv_bias;
    int head_dim;        /* attention.key_length = value_length; 0 = n_embd / n_head, no key */
    int n_rot;           /* rope.dimension_count; 0 = head_dim */
    int n_swa;           /* attention.sliding_window; 0 = no key */
    int n_ctx_orig;      /* phi3 long RoPE: original context; 0 = no factors */
    /* qwen35 (Gated DeltaNet hybrid): ssm.* keys, full_attention_interval, M-RoPE sections,
     * multi-token-prediction layers appended to block_count */
    int ssm_conv, ssm_state, ssm_k_heads, ssm_v_heads, full_interval, nextn;
    int sections[4];
    /* gemma4 (as its converter writes them): head_dim/n_head_kv above are the global layers' */
    const char *pattern; /* layer kinds, repeated: 'S' sliding, 'G' global */
    int hd_swa, n_head_kv_swa; /* the sliding layers' head size and KV heads */
    int n_shared;        /* the last n_shared layers read an earlier layer's KV */
    bool double_wide;    /* those layers' FFN is 2 x n_ff (use_double_wide_mlp) */
    int n_pl;            /* per-layer embedding width (hidden_size_per_layer_input) */
    float partial_rot;   /* share of the global head that rotates (proportional RoPE factors) */
    bool k_eq_v;         /* global layers have no attn_v (attention_k_eq_v) */
};

#define QWEN2(nm, e, l, h, kv, ff) \
    {.name = nm, .arch = "qwen2", .pre = "qwen2", .n_embd = e, .n_layer = l, .n_head = h, \
     .n_head_kv = kv, .n_ff = ff, .n_vocab = 151936, .n_ctx = 32768, .rope_base = 1e6f, \
     .rms_eps = 1e-6f, .tied = true, .qkv_bias = true}
#define LLAMA3(nm, e, l, h, kv, ff) \
    {.name = nm, .arch = "llama", .pre = "llama-bpe", .n_embd = e, .n_layer = l, .n_head = h, \
     .n_head_kv = kv, .n_ff = ff, .n_vocab = 128256, .n_ctx = 131072, .rope_base = 500000.0f, \
     .rms_eps = 1e-5f, .tied = true}

static const struct synth_shape shapes[] = {
    {.name = "tiny", .arch = "llama", .pre = "gpt-2", .n_embd = 256, .n_layer = 4, .n_head = 8,
     .n_head_kv = 4, .n_ff = 768, .n_vocab = 512, .n_ctx = 2048, .rope_base = 10000.0f,
     .rms_eps = 1e-5f},
    QWEN2("qwen2.5-0.5b", 896, 24, 14, 2, 4864),
    QWEN2("qwen2.5-1.5b", 1536, 28, 12, 2, 8960),
    QWEN2("qwen2.5-3b", 2048, 36, 16, 2, 11008),
    LLAMA3("llama-3.2-1b", 2048, 16, 32, 8, 8192),
    LLAMA3("llama-3.2-3b", 3072, 28, 24, 8, 8192),
    /* Qwen3-0.6B: head_dim 128 with 16 heads over 1024 (q is wider than the residual) */
    {.name = "qwen3-0.6b", .arch = "qwen3", .pre = "qwen2", .n_embd = 1024, .n_layer = 28,
     .n_head = 16, .n_head_kv = 8, .n_ff = 3072, .n_vocab = 151936, .n_ctx = 40960,
     .rope_base = 1e6f, .rms_eps = 1e-6f, .tied = true, .head_dim = 128},
    /* SmolLM3-3B: Llama-3 vocabulary, every 4th layer without RoPE (fixed by the architecture) */
    {.name = "smollm3-3b", .arch = "smollm3", .pre = "llama-bpe", .n_embd = 2048, .n_layer = 36,
     .n_head = 16, .n_head_kv = 4, .n_ff = 11008, .n_vocab = 128256, .n_ctx = 65536,
     .rope_base = 5e6f, .rms_eps = 1e-6f, .tied = true, .head_dim = 128},
    /* Phi-4-mini: partial rotary 0.75 (96 of 128 dims), long RoPE from 4096 to 131072, window
     * 262144 (never reached). The real model ties its output to the embeddings; ik_llama.cpp's
     * phi3 loader requires output.weight, so the synthetic file carries one (same shape). */
    {.name = "phi-4-mini", .arch = "phi3", .pre = "gpt-2", .n_embd = 3072, .n_layer = 32,
     .n_head = 24, .n_head_kv = 8, .n_ff = 8192, .n_vocab = 200064, .n_ctx = 131072,
     .rope_base = 10000.0f, .rms_eps = 1e-5f, .n_rot = 96, .n_swa = 262144, .n_ctx_orig = 4096},
    /* Gemma-3-1B: head_dim 256, 1 KV head, window 512 on 5 of every 6 layers */
    {.name = "gemma-3-1b", .arch = "gemma3", .pre = "gpt-2", .n_embd = 1152, .n_layer = 26,
     .n_head = 4, .n_head_kv = 1, .n_ff = 6912, .n_vocab = 262144, .n_ctx = 32768,
     .rope_base = 1e6f, .rms_eps = 1e-6f, .tied = true, .head_dim = 256, .n_swa = 512},
    /* Tiny shapes of the new architectures (the parity tests' models, under 1 MB in F16): each
     * takes its family's paths (a wider q than the residual, a NoPE layer, partial rotary with
     * long factors and a window reached by the test sequences, a global layer among windowed
     * ones). */
    {.name = "qwen3-tiny", .arch = "qwen3", .pre = "gpt-2", .n_embd = 128, .n_layer = 2,
     .n_head = 4, .n_head_kv = 2, .n_ff = 256, .n_vocab = 512, .n_ctx = 2048, .rope_base = 1e6f,
     .rms_eps = 1e-6f, .tied = true, .head_dim = 64},
    {.name = "smollm3-tiny", .arch = "smollm3", .pre = "gpt-2", .n_embd = 128, .n_layer = 4,
     .n_head = 4, .n_head_kv = 2, .n_ff = 256, .n_vocab = 512, .n_ctx = 2048,
     .rope_base = 5e6f, .rms_eps = 1e-6f},
    /* (not "phi3-..": llama.cpp gives models whose general.name says phi3 special tokens this
     * byte-level vocabulary does not have) */
    {.name = "phi4-tiny", .arch = "phi3", .pre = "gpt-2", .n_embd = 128, .n_layer = 2,
     .n_head = 4, .n_head_kv = 2, .n_ff = 256, .n_vocab = 512, .n_ctx = 1024,
     .rope_base = 10000.0f, .rms_eps = 1e-5f, .n_rot = 24, .n_swa = 96, .n_ctx_orig = 256},
    {.name = "gemma3-tiny", .arch = "gemma3", .pre = "gpt-2", .n_embd = 128, .n_layer = 6,
     .n_head = 4, .n_head_kv = 1, .n_ff = 256, .n_vocab = 512, .n_ctx = 2048, .rope_base = 1e6f,
     .rms_eps = 1e-6f, .tied = true, .head_dim = 64, .n_swa = 32},
    /* Gemma-4-E2B (text): 4 sliding layers then a global one, 35 layers; sliding heads 256,
     * global 512 rotating a quarter (proportional RoPE); the last 20 layers share the KV of
     * layers 13 / 14 and have a double-wide FFN; per-layer embeddings of 256. */
    {.name = "gemma-4-e2b", .arch = "gemma4", .pre = "gpt-2", .n_embd = 1536, .n_layer = 35,
     .n_head = 8, .n_head_kv = 1, .n_ff = 6144, .n_vocab = 262144, .n_ctx = 131072,
     .rope_base = 1e6f, .rms_eps = 1e-6f, .tied = true, .head_dim = 512, .n_swa = 512,
     .pattern = "SSSSG", .hd_swa = 256, .n_head_kv_swa = 1, .n_shared = 20, .double_wide = true,
     .n_pl = 256, .partial_rot = 0.25f},
    /* every Gemma 4 path at once: sliding and global layers of different head sizes and KV
     * heads, a window the test sequences pass, a global layer without attn_v (k = v, as the 31B
     * model), two shared-KV layers (one of each kind) with double-wide FFNs, per-layer
     * embeddings, proportional RoPE on the global layers, layer output scales */
    {.name = "gemma4-tiny", .arch = "gemma4", .pre = "gpt-2", .n_embd = 128, .n_layer = 6,
     .n_head = 4, .n_head_kv = 1, .n_ff = 256, .n_vocab = 512, .n_ctx = 2048, .rope_base = 1e6f,
     .rms_eps = 1e-6f, .tied = true, .head_dim = 64, .n_swa = 32, .pattern = "SSSGSG",
     .hd_swa = 32, .n_head_kv_swa = 2, .n_shared = 2, .double_wide = true, .n_pl = 32,
     .partial_rot = 0.25f, .k_eq_v = true},
    /* Qwen3.5-0.8B (text; HF text_config): 24 layers, every 4th full attention (8 heads of 256,
     * 2 KV heads, q and an output gate per head, partial rotary 64, interleaved M-RoPE
     * [11, 11, 10]), the others Gated DeltaNet (16 key and 16 value heads of 128, conv 4), and
     * the one multi-token-prediction layer llama.cpp's converter appends (block_count 25) */
    {.name = "qwen3.5-0.8b", .arch = "qwen35", .pre = "qwen35", .n_embd = 1024, .n_layer = 24,
     .n_head = 8, .n_head_kv = 2, .n_ff = 3584, .n_vocab = 248320, .n_ctx = 262144,
     .rope_base = 1e7f, .rms_eps = 1e-6f, .tied = true, .head_dim = 256, .n_rot = 64,
     .ssm_conv = 4, .ssm_state = 128, .ssm_k_heads = 16, .ssm_v_heads = 16, .full_interval = 4,
     .nextn = 1, .sections = {11, 11, 10, 0}},
    /* Tiny qwen35: 3 DeltaNet layers and 1 gated attention layer, 2 key heads shared by 4 value
     * heads (the tiled order of Qwen3.5-4B/9B), M-RoPE sections leaving one pair unrotated, and
     * an MTP layer both engines must skip */
    {.name = "qwen35-tiny", .arch = "qwen35", .pre = "gpt-2", .n_embd = 128, .n_layer = 4,
     .n_head = 4, .n_head_kv = 2, .n_ff = 256, .n_vocab = 512, .n_ctx = 2048, .rope_base = 1e7f,
     .rms_eps = 1e-6f, .tied = true, .head_dim = 64, .n_rot = 16, .ssm_conv = 4,
     .ssm_state = 64, .ssm_k_heads = 2, .ssm_v_heads = 4, .full_interval = 4, .nextn = 1,
     .sections = {2, 2, 1, 1}},
    /* Qwen3.5-0.8B's per-head shapes (DeltaNet heads of 128, attention heads of 256, M-RoPE
     * [11, 11, 10]) in 4 layers with a 512-token vocabulary: a real-shape parity run in seconds */
    {.name = "qwen35-mid", .arch = "qwen35", .pre = "gpt-2", .n_embd = 1024, .n_layer = 4,
     .n_head = 8, .n_head_kv = 2, .n_ff = 512, .n_vocab = 512, .n_ctx = 2048, .rope_base = 1e7f,
     .rms_eps = 1e-6f, .tied = true, .head_dim = 256, .n_rot = 64, .ssm_conv = 4,
     .ssm_state = 128, .ssm_k_heads = 16, .ssm_v_heads = 16, .full_interval = 4, .nextn = 0,
     .sections = {11, 11, 10, 0}},
};
#undef QWEN2
#undef LLAMA3

const char *tern_synth_shape_names(void)
{
    return "tiny, qwen2.5-0.5b, qwen2.5-1.5b, qwen2.5-3b, llama-3.2-1b, llama-3.2-3b, "
           "qwen3-0.6b, smollm3-3b, phi-4-mini, gemma-3-1b, gemma-4-e2b, qwen3.5-0.8b, qwen3-tiny, "
           "smollm3-tiny, phi4-tiny, gemma3-tiny, gemma4-tiny, qwen35-tiny, qwen35-mid";
}

/* ---------------------------------------------------------------- random numbers */

static uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Approximately normal (sum of four uniforms, variance matched): cheap, and the shape of the
 * distribution does not matter for what these models are for. */
static void fill_normal(uint64_t *s, float *x, int64_t n, float mean, float std)
{
    const float k = std * 1.7320508f / 4294967296.0f; /* a uniform sum of 4 has std 2^32/sqrt(3) */
    for (int64_t i = 0; i < n; i++) {
        uint64_t a = rng_next(s), b = rng_next(s);
        int64_t sum = (int64_t)(a & 0xffffffff) + (int64_t)(a >> 32) + (int64_t)(b & 0xffffffff) +
                      (int64_t)(b >> 32) - 2 * 4294967295ll;
        x[i] = mean + (float)sum * k;
    }
}

/* ---------------------------------------------------------------- writing */

struct synth_state {
    struct tern_gguf_writer *w;
    uint64_t rng;
    float *rowbuf;   /* (max cols) */
    void *qbuf;      /* quantized matrix */
    float *fbuf;     /* whole F32 matrix for 1-D/F32 tensors */
    int fallbacks;
};

static tern_status add_matrix(struct synth_state *st, const char *name, int type, int64_t cols,
                              int64_t rows, float std)
{
    const struct quant_traits *tr = quant_traits_get(type);
    if (!tr) return tern_fail(TERN_ERR_UNSUPPORTED, "synth: type %s", tern_type_name(type));
    size_t row_bytes = quant_row_bytes(type, cols);
    void *q = malloc(row_bytes * (size_t)rows);
    if (!q) return tern_fail(TERN_ERR_NOMEM, "synth: out of memory for %s", name);
    for (int64_t r = 0; r < rows; r++) {
        fill_normal(&st->rng, st->rowbuf, cols, 0.0f, std);
        tr->from_float_ref(st->rowbuf, (char *)q + (size_t)r * row_bytes, cols);
    }
    int64_t ne[2] = {cols, rows};
    tern_status s = tern_gguf_writer_add_tensor(st->w, name, type, 2, ne, q);
    free(q);
    return s;
}

static tern_status add_vector(struct synth_state *st, const char *name, int64_t n, float mean,
                              float std)
{
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) return tern_fail(TERN_ERR_NOMEM, "synth: out of memory");
    fill_normal(&st->rng, v, n, mean, std);
    int64_t ne[1] = {n};
    tern_status s = tern_gguf_writer_add_tensor(st->w, name, TERN_TYPE_F32, 1, ne, v);
    free(v);
    return s;
}

/* qwen35's ssm_a = -exp(A_log): negative decay rates, here -(0.02 .. ~1.2) so the state
 * remembers over tens of tokens (HF initializes A in [0, 16]; trained models spread too). */
static tern_status add_decay_rates(struct synth_state *st, const char *name, int64_t n)
{
    float v[4096];
    if (n > 4096) return tern_fail(TERN_ERR_ARG, "synth: %lld value heads", (long long)n);
    fill_normal(&st->rng, v, n, 0.0f, 0.4f);
    for (int64_t i = 0; i < n; i++) v[i] = -(0.02f + fabsf(v[i]));
    int64_t ne[1] = {n};
    return tern_gguf_writer_add_tensor(st->w, name, TERN_TYPE_F32, 1, ne, v);
}

/* The tensors of qwen35 layer il (name prefix blk.il) as llama.cpp's converter names them:
 * norms, SwiGLU FFN, then DeltaNet or gated attention; an MTP layer (il >= n_layer) is a gated
 * attention layer with the nextn.* tensors besides. */
static tern_status add_qwen35_layer(struct synth_state *st, const struct synth_shape *sh,
                                    const struct type_plan *plan, int il, int *fb)
{
    const int64_t d = sh->n_embd, hd = sh->head_dim, qd = sh->n_head * hd, kvd = sh->n_head_kv * hd;
    const int64_t kd = (int64_t)sh->ssm_k_heads * sh->ssm_state, vd = (int64_t)sh->ssm_v_heads * sh->ssm_state;
    const int64_t conv_dim = 2 * kd + vd, nv = sh->ssm_v_heads;
    const int n_all = sh->n_layer + sh->nextn;
    const bool mtp = il >= sh->n_layer, recurrent = !mtp && (il + 1) % sh->full_interval != 0;
    char nm[64];
    tern_status s;
#define T(suffix) (snprintf(nm, sizeof nm, "blk.%d.%s", il, suffix), nm)
#define WT(kind, cols) type_plan_pick(plan, kind, il, n_all, cols, fb)
    s = add_vector(st, T("attn_norm.weight"), d, 1.0f, 0.05f);
    if (recurrent) {
        if (!s) s = add_matrix(st, T("attn_qkv.weight"), WT("attn_qkv", d), d, conv_dim, 0.08f);
        if (!s) s = add_matrix(st, T("attn_gate.weight"), WT("attn_gate", d), d, vd, 0.08f);
        if (!s) {
            /* (conv_dim rows of ssm_conv taps) F32, as the converter squeezes it */
            const int64_t n = conv_dim * sh->ssm_conv;
            float *w = malloc((size_t)n * sizeof *w);
            if (!w) return tern_fail(TERN_ERR_NOMEM, "synth: out of memory");
            fill_normal(&st->rng, w, n, 0.0f, 0.3f);
            int64_t ne[2] = {sh->ssm_conv, conv_dim};
            s = tern_gguf_writer_add_tensor(st->w, T("ssm_conv1d.weight"), TERN_TYPE_F32, 2, ne, w);
            free(w);
        }
        if (!s) s = add_vector(st, T("ssm_dt.bias"), nv, 1.0f, 0.3f);
        if (!s) s = add_decay_rates(st, T("ssm_a"), nv);
        if (!s) s = add_matrix(st, T("ssm_beta.weight"), WT("ssm_beta", d), d, nv, 0.08f);
        if (!s) s = add_matrix(st, T("ssm_alpha.weight"), WT("ssm_alpha", d), d, nv, 0.08f);
        if (!s) s = add_vector(st, T("ssm_norm.weight"), sh->ssm_state, 1.0f, 0.05f);
        if (!s) s = add_matrix(st, T("ssm_out.weight"), WT("ssm_out", vd), vd, d, 0.02f);
    } else {
        if (!s) s = add_matrix(st, T("attn_q.weight"), WT("attn_q", d), d, 2 * qd, 0.08f);
        if (!s) s = add_matrix(st, T("attn_k.weight"), WT("attn_k", d), d, kvd, 0.08f);
        if (!s) s = add_matrix(st, T("attn_v.weight"), WT("attn_v", d), d, kvd, 0.02f);
        if (!s) s = add_vector(st, T("attn_q_norm.weight"), hd, 1.0f, 0.05f);
        if (!s) s = add_vector(st, T("attn_k_norm.weight"), hd, 1.0f, 0.05f);
        if (!s) s = add_matrix(st, T("attn_output.weight"), WT("attn_output", qd), qd, d, 0.02f);
    }
    if (!s) s = add_vector(st, T("post_attention_norm.weight"), d, 1.0f, 0.05f);
    if (!s) s = add_matrix(st, T("ffn_gate.weight"), WT("ffn_gate", d), d, sh->n_ff, 0.02f);
    if (!s) s = add_matrix(st, T("ffn_up.weight"), WT("ffn_up", d), d, sh->n_ff, 0.02f);
    if (!s) s = add_matrix(st, T("ffn_down.weight"), WT("ffn_down", sh->n_ff), sh->n_ff, d, 0.02f);
    if (mtp) {
        if (!s) s = add_matrix(st, T("nextn.eh_proj.weight"), WT("nextn", 2 * d), 2 * d, d, 0.02f);
        if (!s) s = add_vector(st, T("nextn.enorm.weight"), d, 1.0f, 0.05f);
        if (!s) s = add_vector(st, T("nextn.hnorm.weight"), d, 1.0f, 0.05f);
        if (!s) s = add_vector(st, T("nextn.shared_head_norm.weight"), d, 1.0f, 0.05f);
    }
#undef T
#undef WT
    return s;
}

/* GPT-2's byte <-> unicode map: printable bytes stand for themselves, the rest are shifted
 * to U+0100.. so every token is valid, visible UTF-8. */
static void byte_token(int b, char out[4])
{
    int cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) {
        cp = b;
    } else {
        int n = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

/* ChatML with Hermes tool calls: the same text as the chat room's fallback for models without a
 * template (src/chat/chat_gguf.c, chat_fallback_template; this room sits below src/chat and
 * cannot include it). Plain ChatML without tools; with tools, Qwen2.5's <tools> system block and
 * <tool_call> answers, so tool prompts render on synthetic models too. test_synth checks that
 * both texts stay equal. */
static const char chatml_template[] =
    "{%- if tools %}"
    "{{- '<|im_start|>system\\n' }}"
    "{%- if messages and messages[0].role == 'system' %}"
    "{{- (messages[0].content if messages[0].content is string else '') + '\\n\\n' }}"
    "{%- endif %}"
    "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + tool|tojson }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n"
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- set content = message.content if message.content is string else '' %}"
    "{%- if message.role == 'system' and loop.first and tools %}"
    "{%- elif message.role == 'assistant' and message.tool_calls %}"
    "{{- '<|im_start|>assistant' }}"
    "{%- if content %}{{- '\\n' + content }}{%- endif %}"
    "{%- for call in message.tool_calls %}"
    "{%- set fn = call.function if call.function is defined else call %}"
    "{{- '\\n<tool_call>\\n{\"name\": \"' + fn.name + '\", \"arguments\": ' }}"
    "{{- fn.arguments if fn.arguments is string else (fn.arguments|tojson if fn.arguments is defined else '{}') }}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message.role == 'tool' %}"
    "{%- if loop.first or loop.previtem.role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + content + '\\n</tool_response>' }}"
    "{%- if loop.last or loop.nextitem.role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";

static tern_status add_vocab(struct synth_state *st, const struct synth_shape *sh)
{
    const int n = sh->n_vocab;
    char **toks = calloc((size_t)n, sizeof *toks);
    int32_t *types = malloc((size_t)n * sizeof *types);
    float *scores = calloc((size_t)n, sizeof *scores);
    tern_status s = TERN_OK;
    if (!toks || !types || !scores) {
        s = tern_fail(TERN_ERR_NOMEM, "synth: out of memory for the vocabulary");
        goto out;
    }
    static const char *specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    for (int i = 0; i < n && !s; i++) {
        char buf[32];
        if (i < 256) {
            byte_token(i, buf);
            types[i] = 1; /* normal */
        } else if (i < 256 + 3) {
            snprintf(buf, sizeof buf, "%s", specials[i - 256]);
            types[i] = 3; /* control */
        } else {
            snprintf(buf, sizeof buf, "[PAD%d]", i);
            types[i] = 5; /* unused */
        }
        toks[i] = strdup(buf);
        if (!toks[i]) s = tern_fail(TERN_ERR_NOMEM, "synth: out of memory");
    }
    if (!s) s = tern_gguf_writer_set_str(st->w, "tokenizer.ggml.model", "gpt2");
    if (!s) s = tern_gguf_writer_set_str(st->w, "tokenizer.ggml.pre", sh->pre);
    if (!s) s = tern_gguf_writer_set_arr_str(st->w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)n);
    if (!s) s = tern_gguf_writer_set_arr(st->w, "tokenizer.ggml.token_type", TERN_GGUF_INT32, types, (uint64_t)n);
    if (!s) s = tern_gguf_writer_set_arr_str(st->w, "tokenizer.ggml.merges", NULL, 0);
    if (!s) s = tern_gguf_writer_set_u32(st->w, "tokenizer.ggml.bos_token_id", 256);
    if (!s) s = tern_gguf_writer_set_u32(st->w, "tokenizer.ggml.eos_token_id", 258);
    if (!s) s = tern_gguf_writer_set_u32(st->w, "tokenizer.ggml.padding_token_id", 256);
    if (!s) s = tern_gguf_writer_set_bool(st->w, "tokenizer.ggml.add_bos_token", false);
    if (!s) s = tern_gguf_writer_set_str(st->w, "tokenizer.chat_template", chatml_template);
out:
    if (toks)
        for (int i = 0; i < n; i++) free(toks[i]);
    free(toks);
    free(types);
    free(scores);
    return s;
}

/* Copy every tokenizer.* key of the GGUF at vocab_path (a vocab-only file is enough). Refuses a
 * vocabulary whose size is not the shape's n_vocab (the embedding rows would not match) and one
 * tern's tokenizer cannot load, so a bad file fails here and not at the first prompt. */
static tern_status add_vocab_file(struct synth_state *st, const struct synth_shape *sh,
                                  const char *vocab_path)
{
    struct tern_gguf *g;
    tern_status s = tern_gguf_open(vocab_path, &g);
    if (s) return tern_fail_prefix(s, "synth: vocabulary %s: ", vocab_path);
    int64_t ti = tern_gguf_find_key(g, "tokenizer.ggml.tokens");
    if (ti < 0 || tern_gguf_kv_type(g, ti) != TERN_GGUF_ARRAY ||
        tern_gguf_arr_type(g, ti) != TERN_GGUF_STRING) {
        s = tern_fail(TERN_ERR_FORMAT, "synth: vocabulary %s: no string array "
                      "'tokenizer.ggml.tokens'", vocab_path);
        goto out;
    }
    uint64_t n = tern_gguf_arr_len(g, ti);
    if (n != (uint64_t)sh->n_vocab) {
        s = tern_fail(TERN_ERR_ARG, "synth: vocabulary %s has %llu tokens (tokenizer.ggml.tokens) "
                      "but shape '%s' needs n_vocab = %d", vocab_path, (unsigned long long)n,
                      sh->name, sh->n_vocab);
        goto out;
    }
    struct tern_tokenizer *tok;
    s = tern_tokenizer_from_gguf(g, &tok);
    if (s) {
        s = tern_fail_prefix(s, "synth: vocabulary %s: ", vocab_path);
        goto out;
    }
    tern_tokenizer_free(tok);
    static const char prefix[] = "tokenizer.";
    for (int64_t i = 0; i < tern_gguf_n_kv(g) && !s; i++) {
        struct tern_str k = tern_gguf_key(g, i);
        if (k.len > sizeof prefix - 1 && !memcmp(k.ptr, prefix, sizeof prefix - 1))
            s = tern_gguf_writer_copy_kv(st->w, g, i);
    }
out:
    tern_gguf_close(g);
    return s;
}

tern_status tern_synth_model_write(const char *shape, const char *type_name, uint64_t seed,
                                   const char *path, int *n_fallbacks)
{
    return tern_synth_model_write_vocab(shape, type_name, seed, NULL, path, n_fallbacks);
}

tern_status tern_synth_model_write_vocab(const char *shape, const char *type_name, uint64_t seed,
                                         const char *vocab_path, const char *path,
                                         int *n_fallbacks)
{
    const struct synth_shape *sh = NULL;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        if (!strcmp(shapes[i].name, shape)) sh = &shapes[i];
    if (!sh)
        return tern_fail(TERN_ERR_ARG, "unknown model shape '%s' (known: %s)", shape,
                         tern_synth_shape_names());
    struct type_plan plan;
    tern_status ps = type_plan_parse(type_name, &plan);
    if (ps) return ps;
    struct synth_state st = {.rng = seed * 0x2545F4914F6CDD1Dull + 1};
    tern_status s = tern_gguf_writer_create(32, &st.w);
    if (s) return s;
    const int64_t d = sh->n_embd, hd = sh->head_dim ? sh->head_dim : d / sh->n_head;
    const int64_t qd = sh->n_head * hd, kvd = sh->n_head_kv * hd;
    const int64_t n_rot = sh->n_rot ? sh->n_rot : hd;
    const bool phi3 = !strcmp(sh->arch, "phi3"), gemma4 = !strcmp(sh->arch, "gemma4");
    const bool gemma3 = !strcmp(sh->arch, "gemma3") || gemma4; /* gemma4 has all of gemma3's */
    const bool qk_norm = gemma3 || !strcmp(sh->arch, "qwen3");
    int64_t maxc = d > 2 * sh->n_ff ? d : 2 * sh->n_ff;
    if (qd > maxc) maxc = qd;
    if (2 * d > maxc) maxc = 2 * d; /* qwen35's nextn.eh_proj */
    if ((int64_t)sh->ssm_state * sh->ssm_v_heads > maxc) maxc = (int64_t)sh->ssm_state * sh->ssm_v_heads;
    if ((int64_t)sh->n_pl * sh->n_layer > maxc) maxc = (int64_t)sh->n_pl * sh->n_layer;
    /* gemma4's per-layer shapes: layer kind, own KV, FFN width */
    int32_t lkv[64], lff[64];
    bool lswa[64];
    if (sh->n_layer > 64) return tern_fail(TERN_ERR_ARG, "synth: more than 64 layers");
    for (int il = 0; il < sh->n_layer; il++) {
        lswa[il] = gemma4 ? sh->pattern[il % strlen(sh->pattern)] == 'S' : false;
        lkv[il] = lswa[il] ? sh->n_head_kv_swa : sh->n_head_kv;
        lff[il] = sh->double_wide && il >= sh->n_layer - sh->n_shared ? 2 * sh->n_ff : sh->n_ff;
    }
    st.rowbuf = malloc((size_t)maxc * sizeof(float));
    if (!st.rowbuf) s = tern_fail(TERN_ERR_NOMEM, "synth: out of memory");
    char key[96];
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", sh->arch, suffix), key)
    if (!s) s = tern_gguf_writer_set_str(st.w, "general.architecture", sh->arch);
    if (!s) {
        char nm[96];
        snprintf(nm, sizeof nm, "tern synthetic %s (%s, random weights)", sh->name, type_name);
        s = tern_gguf_writer_set_str(st.w, "general.name", nm);
    }
    if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("context_length"), (uint32_t)sh->n_ctx);
    if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("embedding_length"), (uint32_t)d);
    if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("block_count"), (uint32_t)(sh->n_layer + sh->nextn));
    if (!s && sh->double_wide)
        s = tern_gguf_writer_set_arr(st.w, KEY("feed_forward_length"), TERN_GGUF_INT32, lff, (uint64_t)sh->n_layer);
    else if (!s)
        s = tern_gguf_writer_set_u32(st.w, KEY("feed_forward_length"), (uint32_t)sh->n_ff);
    if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("attention.head_count"), (uint32_t)sh->n_head);
    if (!s && gemma4)
        s = tern_gguf_writer_set_arr(st.w, KEY("attention.head_count_kv"), TERN_GGUF_INT32, lkv, (uint64_t)sh->n_layer);
    else if (!s)
        s = tern_gguf_writer_set_u32(st.w, KEY("attention.head_count_kv"), (uint32_t)sh->n_head_kv);
    if (!s && sh->head_dim) s = tern_gguf_writer_set_u32(st.w, KEY("attention.key_length"), (uint32_t)hd);
    if (!s && sh->head_dim) s = tern_gguf_writer_set_u32(st.w, KEY("attention.value_length"), (uint32_t)hd);
    if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("rope.dimension_count"), (uint32_t)n_rot);
    if (!s) s = tern_gguf_writer_set_f32(st.w, KEY("rope.freq_base"), sh->rope_base);
    if (!s) s = tern_gguf_writer_set_f32(st.w, KEY("attention.layer_norm_rms_epsilon"), sh->rms_eps);
    if (!s && sh->n_swa) s = tern_gguf_writer_set_u32(st.w, KEY("attention.sliding_window"), (uint32_t)sh->n_swa);
    if (!s && gemma4) {
        /* the keys Gemma4Model.set_gguf_parameters writes beyond the common ones */
        uint8_t pat[64];
        for (int il = 0; il < sh->n_layer; il++) pat[il] = lswa[il];
        s = tern_gguf_writer_set_arr(st.w, KEY("attention.sliding_window_pattern"), TERN_GGUF_BOOL, pat, (uint64_t)sh->n_layer);
        if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("attention.shared_kv_layers"), (uint32_t)sh->n_shared);
        if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("embedding_length_per_layer_input"), (uint32_t)sh->n_pl);
        if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("attention.key_length_swa"), (uint32_t)sh->hd_swa);
        if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("attention.value_length_swa"), (uint32_t)sh->hd_swa);
        if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("rope.dimension_count_swa"), (uint32_t)sh->hd_swa);
        if (!s) s = tern_gguf_writer_set_f32(st.w, KEY("rope.freq_base_swa"), 10000.0f);
    }
    if (!s && sh->n_ctx_orig) {
        /* llama.cpp's converter: attn_factor = sqrt(1 + ln(scale) / ln(original context)) */
        const double scale = (double)sh->n_ctx / sh->n_ctx_orig;
        s = tern_gguf_writer_set_u32(st.w, KEY("rope.scaling.original_context_length"),
                                     (uint32_t)sh->n_ctx_orig);
        if (!s) s = tern_gguf_writer_set_f32(st.w, KEY("rope.scaling.attn_factor"),
                                             (float)sqrt(1.0 + log(scale) / log((double)sh->n_ctx_orig)));
    }
    if (!s && sh->ssm_conv) {
        /* llama.cpp's Qwen3NextModel / Qwen3_5TextModel keys */
        s = tern_gguf_writer_set_u32(st.w, KEY("ssm.conv_kernel"), (uint32_t)sh->ssm_conv);
        if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("ssm.state_size"), (uint32_t)sh->ssm_state);
        if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("ssm.group_count"), (uint32_t)sh->ssm_k_heads);
        if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("ssm.time_step_rank"), (uint32_t)sh->ssm_v_heads);
        if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("ssm.inner_size"),
                                             (uint32_t)(sh->ssm_state * sh->ssm_v_heads));
        if (!s) s = tern_gguf_writer_set_u32(st.w, KEY("full_attention_interval"), (uint32_t)sh->full_interval);
        if (!s) s = tern_gguf_writer_set_arr(st.w, KEY("rope.dimension_sections"), TERN_GGUF_INT32,
                                             sh->sections, 4);
        if (!s && sh->nextn) s = tern_gguf_writer_set_u32(st.w, KEY("nextn_predict_layers"), (uint32_t)sh->nextn);
    }
#undef KEY
    if (!s) s = vocab_path ? add_vocab_file(&st, sh, vocab_path) : add_vocab(&st, sh);

    const int n_layer = sh->n_layer;
    int fb = 0;
    if (!s) s = add_matrix(&st, "token_embd.weight",
                           type_plan_pick(&plan, "token_embd", 0, n_layer, d, &fb), d, sh->n_vocab, 0.02f);
    if (!s && gemma4) {
        /* proportional RoPE (generate_extra_tensors): factor 1 on the rotated quarter, 1e30
         * (no rotation) on the rest of the global head */
        const int nf = (int)(hd / 2), n_rot_full = (int)((float)hd * sh->partial_rot / 2);
        float f[512];
        for (int i = 0; i < nf && i < 512; i++) f[i] = i < n_rot_full ? 1.0f : 1e30f;
        int64_t ne[1] = {nf};
        s = tern_gguf_writer_add_tensor(st.w, "rope_freqs.weight", TERN_TYPE_F32, 1, ne, f);
    }
    if (!s && gemma4 && sh->n_pl) {
        const int64_t pl = (int64_t)sh->n_pl * n_layer;
        s = add_matrix(&st, "per_layer_token_embd.weight",
                       type_plan_pick(&plan, "per_layer_token_embd", 0, n_layer, pl, &fb), pl, sh->n_vocab, 0.02f);
        if (!s) s = add_matrix(&st, "per_layer_model_proj.weight",
                               type_plan_pick(&plan, "per_layer_model_proj", 0, n_layer, d, &fb), d, pl, 0.02f);
        if (!s) s = add_vector(&st, "per_layer_proj_norm.weight", sh->n_pl, 1.0f, 0.05f);
    }
    if (!s && sh->n_ctx_orig) {
        /* Long / short factors, smooth like the real ones (short near 1, long growing to about
         * the context ratio). head_dim/2 of them, of which the first n_rot/2 are used:
         * ik_llama.cpp's phi3 loader asks for head_dim/2, tern accepts that and n_rot/2. */
        const int nf = (int)(hd / 2);
        float lf[512], sf[512];
        for (int i = 0; i < nf && i < 512; i++) {
            const double x = (double)i / (nf > 1 ? nf - 1 : 1);
            sf[i] = (float)(1.0 + 0.25 * x * x);
            lf[i] = (float)(1.0 + ((double)sh->n_ctx / sh->n_ctx_orig - 1.0) * x * x * x);
        }
        int64_t ne[1] = {nf};
        s = tern_gguf_writer_add_tensor(st.w, "rope_factors_long.weight", TERN_TYPE_F32, 1, ne, lf);
        if (!s) s = tern_gguf_writer_add_tensor(st.w, "rope_factors_short.weight", TERN_TYPE_F32, 1, ne, sf);
    }
    for (int il = 0; sh->ssm_conv && il < n_layer + sh->nextn && !s; il++)
        s = add_qwen35_layer(&st, sh, &plan, il, &fb);
    for (int il = 0; !sh->ssm_conv && il < n_layer && !s; il++) {
        char nm[64];
#define T(suffix) (snprintf(nm, sizeof nm, "blk.%d.%s", il, suffix), nm)
#define WT(kind, cols) type_plan_pick(&plan, kind, il, n_layer, cols, &fb)
        /* this layer's shape (gemma4's differ by kind; elsewhere the model's) */
        const int64_t lhd = gemma4 && lswa[il] ? sh->hd_swa : hd;
        const int64_t lqd = sh->n_head * lhd, lkvd = (gemma4 ? lkv[il] : sh->n_head_kv) * lhd;
        const bool own = !gemma4 || il < n_layer - sh->n_shared;
        s = add_vector(&st, T("attn_norm.weight"), d, 1.0f, 0.05f);
        if (phi3) {
            /* one q|k|v matrix, drawn as three: q and k rows at 0.08, v rows at 0.02 */
            const int type = WT("attn_qkv", d);
            const struct quant_traits *tr = quant_traits_get(type);
            const size_t rb = quant_row_bytes(type, d);
            void *q = malloc(rb * (size_t)(qd + 2 * kvd));
            if (!q || !tr) {
                free(q);
                s = tern_fail(TERN_ERR_NOMEM, "synth: out of memory for attn_qkv");
                break;
            }
            for (int64_t r = 0; r < qd + 2 * kvd; r++) {
                fill_normal(&st.rng, st.rowbuf, d, 0.0f, r < qd + kvd ? 0.08f : 0.02f);
                tr->from_float_ref(st.rowbuf, (char *)q + (size_t)r * rb, d);
            }
            int64_t ne[2] = {d, qd + 2 * kvd};
            s = tern_gguf_writer_add_tensor(st.w, T("attn_qkv.weight"), type, 2, ne, q);
            free(q);
        } else {
            if (!s) s = add_matrix(&st, T("attn_q.weight"), WT("attn_q", d), d, lqd, 0.08f);
            if (!s && sh->qkv_bias) s = add_vector(&st, T("attn_q.bias"), qd, 0.0f, 0.2f);
            if (!s && own) s = add_matrix(&st, T("attn_k.weight"), WT("attn_k", d), d, lkvd, 0.08f);
            if (!s && sh->qkv_bias) s = add_vector(&st, T("attn_k.bias"), kvd, 0.0f, 0.2f);
            if (!s && own && !(sh->k_eq_v && !lswa[il]))
                s = add_matrix(&st, T("attn_v.weight"), WT("attn_v", d), d, lkvd, 0.02f);
            if (!s && sh->qkv_bias) s = add_vector(&st, T("attn_v.bias"), kvd, 0.0f, 0.2f);
        }
        /* Gemma 4 scores q.k unscaled: its trained q/k norm weights carry the scale. Here they
         * are hd^-1/4 each, so a score has the spread 1/sqrt(hd) gives the other families. */
        const float qk_w = gemma4 ? powf((float)lhd, -0.25f) : 1.0f;
        if (!s && qk_norm) s = add_vector(&st, T("attn_q_norm.weight"), lhd, qk_w, 0.05f * qk_w);
        if (!s && qk_norm && own) s = add_vector(&st, T("attn_k_norm.weight"), lhd, qk_w, 0.05f * qk_w);
        if (!s) s = add_matrix(&st, T("attn_output.weight"), WT("attn_output", lqd), lqd, d, 0.02f);
        if (!s && gemma3) s = add_vector(&st, T("post_attention_norm.weight"), d, 1.0f, 0.05f);
        if (!s) s = add_vector(&st, T("ffn_norm.weight"), d, 1.0f, 0.05f);
        if (phi3) {
            /* gate rows then up rows in one ffn_up (llama.cpp's fused layout) */
            if (!s) s = add_matrix(&st, T("ffn_up.weight"), WT("ffn_up", d), d, 2 * sh->n_ff, 0.02f);
        } else {
            if (!s) s = add_matrix(&st, T("ffn_gate.weight"), WT("ffn_gate", d), d, lff[il], 0.02f);
            if (!s) s = add_matrix(&st, T("ffn_up.weight"), WT("ffn_up", d), d, lff[il], 0.02f);
        }
        if (!s) s = add_matrix(&st, T("ffn_down.weight"), WT("ffn_down", lff[il]), lff[il], d, 0.02f);
        if (!s && gemma3) s = add_vector(&st, T("post_ffw_norm.weight"), d, 1.0f, 0.05f);
        if (!s && gemma4) s = add_vector(&st, T("layer_output_scale.weight"), 1, 0.8f, 0.1f);
        if (!s && gemma4 && sh->n_pl) {
            s = add_matrix(&st, T("inp_gate.weight"), WT("inp_gate", d), d, sh->n_pl, 0.02f);
            if (!s) s = add_matrix(&st, T("proj.weight"), WT("proj", sh->n_pl), sh->n_pl, d, 0.02f);
            if (!s) s = add_vector(&st, T("post_norm.weight"), d, 1.0f, 0.05f);
        }
#undef T
#undef WT
    }
    if (!s) s = add_vector(&st, "output_norm.weight", d, 1.0f, 0.05f);
    if (!s && !sh->tied)
        s = add_matrix(&st, "output.weight", type_plan_pick(&plan, "output", 0, n_layer, d, &fb),
                       d, sh->n_vocab, 0.02f);
    if (!s) s = tern_gguf_writer_write(st.w, path);
    free(st.rowbuf);
    tern_gguf_writer_free(st.w);
    if (n_fallbacks) *n_fallbacks = fb;
    return s;
}

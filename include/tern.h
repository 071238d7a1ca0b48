/*
 * tern.h — the tern runtime (libtern): load a model, decode, sample, tokenize, render chat
 * templates, constrain with grammars, generate, keep KV and prompt caches.
 *
 * Quick tour (error handling omitted):
 *
 *     struct tern_model *model;
 *     tern_model_load("model.gguf", NULL, &model);          // weights are mmapped, not copied
 *     struct tern_context_params cp = tern_context_default_params();
 *     cp.n_ctx = 2048; cp.n_threads = 2;
 *     struct tern_context *ctx;
 *     tern_context_create(model, &cp, &ctx);                 // KV cache + scratch allocated here, once
 *     int32_t prompt[] = {1, 15043, 3186};
 *     tern_decode(ctx, prompt, 3, 0, TERN_LOGITS_LAST);      // prefill positions 0..2
 *     const float *logits = tern_context_logits(ctx, 2);     // distribution for position 3
 *     struct tern_sampler_params sp = tern_sampler_default_params();  // temperature 0: greedy
 *     struct tern_sampler *s;
 *     tern_sampler_create(&sp, tern_model_n_vocab(model), &s);
 *     int32_t next = tern_sampler_sample(s, logits);
 *     tern_decode(ctx, &next, 1, 3, TERN_LOGITS_LAST);       // decode one token at position 3
 *     ...
 *     tern_sampler_free(s); tern_context_free(ctx); tern_model_free(model);
 *
 * Rules that hold for every function here:
 * - Anything that can fail returns a tern_status; on failure tern_last_error() holds a message
 *   naming what was wrong and where (file offset, JSON path, token index). Nothing aborts or
 *   exits on bad input.
 * - Ownership: a function that allocates says who frees, in its comment. Out-pointers are only
 *   written on success.
 * - Enums that reach files are append-only.
 *
 * The other public headers (docs/architecture.md lists libraries and dependencies):
 *   tern_gguf.h    GGUF files and tensor formats: read, write, quantize, synthetic models,
 *                  LoRA adapter files (part of libtern)
 *   tern_train.h   training, distillation, the corpus and the tokenizer trainer (libtern_train)
 *   tern_server.h  the OpenAI-compatible HTTP server (libtern_server: libmicrohttpd)
 *   tern_bench.h   measurement: reference checks, perplexity, evaluation, speed suites and
 *                  gates (libtern_bench: libcurl, libyaml)
 * libtern itself needs only libc, libm, pthreads, cJSON, utf8proc and nettle.
 */
#ifndef TERN_H
#define TERN_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== errors */

enum tern_status {
    TERN_OK = 0,
    TERN_ERR_IO,          /* could not open/read/write/mmap a file */
    TERN_ERR_FORMAT,      /* malformed input: GGUF, JSON, template, cache file ... */
    TERN_ERR_UNSUPPORTED, /* valid input that tern does not handle (tensor type, architecture) */
    TERN_ERR_ARG,         /* invalid argument from the caller (bad flag value, id out of range) */
    TERN_ERR_NOMEM,       /* allocation failed */
    TERN_ERR_RANGE,       /* a buffer is too small or a context is full; see the message for sizes */
    TERN_ERR_NOT_FOUND,   /* a key, tensor or file that was asked for does not exist */
};
typedef enum tern_status tern_status;

/* Every function returning a tern_status is declared with this: dropping the result is a
 * warning (an error in tern's builds, -Werror), so no failure goes unnoticed; a call that
 * ignores a status on purpose says so with (void). */
#if defined(__GNUC__) || defined(__clang__)
#define TERN_NODISCARD __attribute__((warn_unused_result))
#else
#define TERN_NODISCARD
#endif
/* A status ignored on purpose (GCC does not accept a (void) cast for that): the call site says
 * why in a comment. */
static inline void tern_status_ignore(tern_status st) { (void)st; }

/* The message of the last failure on this thread (never NULL; "" if none). Valid until the
 * next failing call on the same thread. */
const char *tern_last_error(void);
/* A short fixed name for a status ("format error", ...). */
const char *tern_status_name(tern_status s);

const char *tern_version(void);

/* ===================================================================== tensor types */

/* Numbering is GGUF's (ggml_type). Only the types tern_type_is_supported() (tern_gguf.h) lists
 * can be loaded; any other id in a file is refused with its name. */
enum tern_type {
    TERN_TYPE_F32 = 0,
    TERN_TYPE_F16 = 1,
    TERN_TYPE_Q4_0 = 2,
    TERN_TYPE_Q4_1 = 3,
    TERN_TYPE_Q5_0 = 6,
    TERN_TYPE_Q5_1 = 7,
    TERN_TYPE_Q8_0 = 8,
    TERN_TYPE_Q8_1 = 9,
    TERN_TYPE_Q2_K = 10,
    TERN_TYPE_Q3_K = 11,
    TERN_TYPE_Q4_K = 12,
    TERN_TYPE_Q5_K = 13,
    TERN_TYPE_Q6_K = 14,
    TERN_TYPE_Q8_K = 15,
    TERN_TYPE_IQ2_XXS = 16,
    TERN_TYPE_IQ2_XS = 17,
    TERN_TYPE_IQ3_XXS = 18,
    TERN_TYPE_IQ1_S = 19,
    TERN_TYPE_IQ4_NL = 20,
    TERN_TYPE_IQ3_S = 21,
    TERN_TYPE_IQ2_S = 22,
    TERN_TYPE_IQ4_XS = 23,
    TERN_TYPE_I8 = 24,
    TERN_TYPE_I16 = 25,
    TERN_TYPE_I32 = 26,
    TERN_TYPE_I64 = 27,
    TERN_TYPE_F64 = 28,
    TERN_TYPE_IQ1_M = 29,
    TERN_TYPE_BF16 = 30,
    TERN_TYPE_TQ1_0 = 34,
    TERN_TYPE_TQ2_0 = 35,
    TERN_TYPE_COUNT_ = 39 /* ids >= this are unknown */
};

/* ===================================================================== model */

/* The architectures tern runs (docs/models.md "Architectures"): the general.architecture names of
 * llama.cpp's converters. Append-only. */
enum tern_arch {
    TERN_ARCH_LLAMA = 0,
    TERN_ARCH_QWEN2 = 1,
    TERN_ARCH_QWEN3 = 2,   /* per-head RMSNorm on q and k, no q/k/v biases */
    TERN_ARCH_SMOLLM3 = 3, /* llama with every 4th layer unrotated (NoPE) */
    TERN_ARCH_PHI3 = 4,    /* fused qkv and gate|up, partial rotary, long-RoPE factors */
    TERN_ARCH_GEMMA3 = 5,  /* scaled embeddings, GELU, post-norms, q/k norms, sliding window */
    TERN_ARCH_GEMMA4 = 6,  /* gemma3 plus per-layer-type head sizes, v norm, shared KV,
                              per-layer embeddings, layer scales, final soft-capping */
    TERN_ARCH_QWEN35 = 7,  /* Gated DeltaNet (recurrent) layers among gated full-attention ones */
};

/* The model's stable core: what every architecture has. Fields are only ever appended, never
 * removed or reordered; struct_size is the size of the struct the library filled, so a program
 * built against a later tern.h reads an appended field only when struct_size covers it
 * (offsetof(struct tern_model_info, field) + sizeof field <= struct_size). What an architecture
 * adds beyond it (RoPE variants, sliding windows, norms, recurrent layers, per-layer shapes, the
 * MTP layer) is read by name with tern_model_hparam, so a new architecture's parameters change
 * no struct. */
struct tern_model_info {
    size_t struct_size;      /* sizeof(struct tern_model_info) of the library */
    enum tern_arch arch;
    const char *arch_name;   /* "llama", "qwen2", "qwen3", "smollm3", "phi3", "gemma3", "gemma4",
                                "qwen35" */
    int n_vocab;
    int n_embd;
    int n_layer;
    int n_head;
    int n_head_kv;           /* of the global (full-attention) layers where layers differ */
    int head_dim;            /* likewise */
    int n_ff;
    int n_ctx_train;
    int n_layer_kv;          /* layers that store their own KV (n_layer, but for layers that share
                                an earlier layer's or keep a recurrent state instead) */
    int n_layer_rec;         /* layers that keep a recurrent state instead of KV (0: none) */
    uint64_t weight_bytes;   /* bytes of all tensors in the file */
    uint64_t repacked_bytes; /* extra bytes held by weights repacked at load (0 = none) */
    uint64_t released_bytes; /* bytes of the file's matrices whose pages were handed back after
                                repacking at load (the kernels read only the copies; 0 = none) */
    uint64_t state_bytes;    /* recurrent state of one sequence (0 without recurrent layers) */
    const char *decode_tiles; /* which tile matmuls of 1 and of 2-3 tokens over the repacked
                                 matrices use per format and row length, measured at load or read
                                 from the per-CPU cache ("measured: Q8_0 k=896 x1 zmm (zmm 4.90 ms,
                                 ...); ... x2-3 ..."); "" when nothing is repacked
                                 (docs/kernels.md "One-token tile") */
};

struct tern_model_params {
    bool prefault;           /* touch every weight page at load (warm start) */
    bool no_repack;          /* keep the weights mmap-only: no copy in the kernels' packed layout
                                (by default Q8_0, Q4_0, Q4_1, Q5_0, Q4_K and Q6_K matrices are
                                repacked once on AVX-512 and AVX2, and the file pages they
                                replace are released; docs/kernels.md "Weights repacked at load").
                                TERN_REPACK=0 in the environment
                                turns repacking off for every load as well. */
    const char *decode_tile; /* NULL or "auto": matmuls of 1-3 tokens over the repacked weights use
                                the tile measured fastest at load (cached per CPU); "zmm",
                                "ymm-evex", "ymm-vnni" or "ymm" forces that one for the whole
                                process, as TERN_DECODE_TILE does (the same bits with every tile;
                                docs/kernels.md "One-token tile"). An unknown name, or a tile this
                                CPU's kernel path cannot run, fails the load. */
};

struct tern_gguf; /* a GGUF file (tern_gguf.h) */
struct tern_model;

/* Load a GGUF model (weights stay mmapped; nothing is copied unless repacked, and then
 * reported in repacked_bytes). Caller frees with tern_model_free(). */
TERN_NODISCARD tern_status tern_model_load(const char *path, const struct tern_model_params *params,
                            struct tern_model **out);
/* The same from a GGUF image in memory (e.g. a model linked into the program). The memory is
 * used in place, not copied: it must stay valid and unchanged until tern_model_free, and be
 * aligned to the file's alignment (32 bytes by default) for the tensors to be. */
TERN_NODISCARD tern_status tern_model_load_memory(const void *data, size_t size,
                                   const struct tern_model_params *params, struct tern_model **out);
void tern_model_free(struct tern_model *m);
/* The stable core, owned by m. */
const struct tern_model_info *tern_model_get_info(const struct tern_model *m);
/* An architecture's hyperparameter beyond the core, by name: true and *value (bools 0 or 1) when
 * m's architecture has it, false when the name is unknown. Each is at its neutral value where an
 * architecture lacks it (n_swa 0, embd_scale 1, ...). The names: n_rot, rope_freq_base,
 * rope_freq_scale, rope_neox, has_rope_freqs, rms_eps, tied_output, head_rows (the output
 * head's rows: n_vocab unless a drafter's head is pruned), has_qkv_bias, has_qk_norm,
 * has_post_norms, ffn_gelu, fused_qkv, embd_scale, attn_scale, nope_every, n_swa, n_layer_swa,
 * rope_freq_base_swa, rope_attn_factor, has_rope_long, n_ctx_orig, n_head_kv_swa, head_dim_swa,
 * n_rot_swa, n_ff_max, n_embd_per_layer, v_norm, final_softcap, full_attn_interval, ssm_d_conv,
 * ssm_n_k_heads, ssm_n_v_heads, ssm_head_k, ssm_head_v, attn_gate, n_nextn, mtp_bytes,
 * mtp_layer_bytes (the bytes an MTP draft step reads, and of those its layer's); the core's
 * fields answer by name too. `tern check` prints them all. */
bool tern_model_hparam(const struct tern_model *m, const char *name, double *value);
/* The kernel path the matmuls run on this CPU ("avx512", "avx2+avxvnni", "avx2", "scalar",
 * "neon"; the environment variable TERN_KERNELS forces one, TERN_AVXVNNI=0 turns the avx2 path's
 * AVX-VNNI tile off), which decides what repacking does. */
const char *tern_kernels_name(void);
int tern_model_n_vocab(const struct tern_model *m);
/* The GGUF the model was loaded from (tokenizer metadata lives there); owned by the model. */
const struct tern_gguf *tern_model_gguf(const struct tern_model *m);
/* KV cache bytes for a context of n_ctx positions (F16 K and V, all layers). */
uint64_t tern_model_kv_bytes(const struct tern_model *m, int n_ctx);
/* The most a context of n_ctx positions and n_batch tokens per call keeps resident when its
 * sliding-window layers keep only their window (the default; tern_model_kv_bytes for a model
 * without them, or with swa_full). */
uint64_t tern_model_kv_bytes_windowed(const struct tern_model *m, int n_ctx, int n_batch);
/* A copy of src whose 2-D weights are converted to type_name ("q4_0", "q8_0", ...: any weight
 * type of tern_type_is_supported but Q8_1/Q8_K) in memory, n_threads at a time (0 = 1): the
 * draft model of speculative decoding's "self:TYPE" source. Matrices already of that type, or
 * whose rows do not hold whole blocks, are shared with src unconverted. The copy reports the
 * converted bytes in repacked_bytes and what its forward pass reads in weight_bytes. It reads
 * metadata and 1-D tensors through src's mapping: src must outlive it. Its fingerprint
 * (tern_model_fingerprint) is src's, so never give it src's prefix cache or snapshots. Caller
 * frees with tern_model_free(). */
TERN_NODISCARD tern_status tern_model_quantized_copy(const struct tern_model *src, const char *type_name,
                                      int n_threads, struct tern_model **out);
/* True when every matmul of m (layers and output) gives a token the same bits whatever batch it
 * is in, on the kernel path in use (docs/kernels.md "Integer sums and batch invariance": the scalar
 * path; AVX-512 with Q4_0 / Q8_0, and Q4_K matrices repacked at load). Then a batch's logits equal
 * one-token decoding's without exact batches. */
bool tern_model_batch_invariant(const struct tern_model *m);

/* ===================================================================== context */

struct tern_context_params {
    int n_ctx;       /* KV positions; 0 = min(model's training context, 4096) */
    int n_batch;     /* max tokens per tern_decode call; 0 = 512 */
    int n_threads;   /* 0 = number of online CPUs */
    bool no_warmup;  /* skip the warm-up pass at creation (see tern_context_create) */
    int n_seq;       /* independent sequences held at once, each up to n_ctx positions; 0 = 1 */
    bool swa_full;   /* sliding-window layers keep every position (default: only their window,
                      * plus 128 positions for rollback: tern_context_kv_resident_bytes) */
    bool mtp;        /* an MTP context: runs the model's multi-token-prediction layer alone
                      * (tern_decode_mtp), with that layer's KV and nothing else; one sequence */
};
struct tern_context_params tern_context_default_params(void);

struct tern_context;

/* Create a context: KV cache and all scratch are allocated here, once. Unless no_warmup is set,
 * one token is decoded and forgotten, so the threads, scratch pages and weight pages are warm
 * and the first request runs as fast as the tenth. Caller frees with tern_context_free(). The
 * model must outlive the context. */
TERN_NODISCARD tern_status tern_context_create(struct tern_model *m, const struct tern_context_params *p,
                                struct tern_context **out);
void tern_context_free(struct tern_context *ctx);
int tern_context_n_ctx(const struct tern_context *ctx);
int tern_context_n_batch(const struct tern_context *ctx);
const struct tern_model *tern_context_model(const struct tern_context *ctx);
/* Exact batches (off by default): while on, matmuls whose kernels are not batch-invariant on
 * this path (see tern_model_batch_invariant) run each token of a multi-token batch through the
 * one-token kernel, one cache-sized block of weight rows at a time, so every token gets the
 * bits it gets decoded alone while the weights are still read from memory once. Speculative
 * decoding verifies drafted tokens this way at temperature 0. Costs compute on long batches:
 * meant for short ones. */
void tern_context_set_exact_batches(struct tern_context *ctx, bool on);


enum tern_logits_mode {
    TERN_LOGITS_NONE = 0,  /* only fill the KV cache */
    TERN_LOGITS_LAST = 1,  /* logits for the last token of the batch */
    TERN_LOGITS_ALL = 2,   /* logits for every token of the batch */
};

/* Run the model on n tokens occupying positions pos0 .. pos0+n-1 (the KV cache must hold
 * exactly positions 0 .. pos0-1: call tern_kv_truncate first to rewind). n may exceed n_batch:
 * the batch is split. Decode (n == 1) performs no heap allocation. */
TERN_NODISCARD tern_status tern_decode(struct tern_context *ctx, const int32_t *tokens, int n, int pos0,
                        enum tern_logits_mode mode);
/* Several sequences in one context (n_seq > 1): a batch may mix tokens of different sequences,
 * each attending only to its own sequence's keys, so independent requests share one forward
 * pass (and one read of the weights). tern_decode and everything built on it (generation, the
 * prefix cache, snapshots) use sequence 0. */
struct tern_batch {
    int n;                  /* tokens, 1 .. n_batch */
    const int32_t *tokens;  /* (n) */
    const int32_t *seq;     /* (n) sequence of each token; NULL = all sequence 0 */
    const int32_t *pos;     /* (n) positions; NULL = each token continues its sequence. Given
                               positions must do exactly that (no gaps, no overwrites). */
    const bool *logits;     /* (n) which rows want logits; NULL = none */
};
/* Decode one batch; logits of row i via tern_context_logits(ctx, i). On failure nothing of the
 * batch stays in the cache. */
TERN_NODISCARD tern_status tern_decode_batch(struct tern_context *ctx, const struct tern_batch *b);
int tern_context_n_seq(const struct tern_context *ctx);
/* Positions held by sequence seq (-1 if it does not exist). */
int tern_kv_seq_n_pos(const struct tern_context *ctx, int seq);
/* Forget positions >= n_pos of sequence seq. A model with recurrent layers (qwen35) keeps one
 * state per sequence, not one per position: it can go back to 0, to where the last decode call
 * that held the sequence started, and to any position inside that call (replayed from what the
 * call recorded, bit for bit), but not further back (TERN_ERR_UNSUPPORTED; ask first with
 * tern_kv_seq_can_truncate). Models with sliding-window layers (gemma3, gemma4, phi3) keep
 * only the window of positions a next query reads, plus 128 below it (rollback), unless the
 * context has swa_full: they go back that far, not further (TERN_ERR_UNSUPPORTED). Other
 * attention-only models truncate anywhere. */
TERN_NODISCARD tern_status tern_kv_seq_truncate(struct tern_context *ctx, int seq, int n_pos);
/* Can sequence seq be truncated to n_pos (0 <= n_pos <= its positions)? */
bool tern_kv_seq_can_truncate(const struct tern_context *ctx, int seq, int n_pos);
/* Bytes of the context's KV cache resident in memory now (pages the process holds, mincore):
 * sliding-window layers give back the pages of positions no query reads any more, unless the
 * context was created with swa_full. The cache's address range is tern_model_kv_bytes. */
uint64_t tern_context_kv_resident_bytes(const struct tern_context *ctx);
/* Make sequence dst hold a copy of the first n_pos positions of src (a shared prompt, decoded
 * once, then continued differently). With recurrent layers, n_pos must be one src can be
 * truncated to (tern_kv_seq_can_truncate): the state at n_pos is copied with the KV. */
TERN_NODISCARD tern_status tern_kv_seq_copy(struct tern_context *ctx, int src, int dst, int n_pos);

/* Logits of batch row i of the last tern_decode (i = n-1 for TERN_LOGITS_LAST); n_vocab
 * floats owned by the context, valid until the next tern_decode. NULL if not computed. */
const float *tern_context_logits(const struct tern_context *ctx, int i);
/* Number of positions currently in the KV cache. */
int tern_kv_n_pos(const struct tern_context *ctx);
/* Forget positions >= n_pos (rollback). */
TERN_NODISCARD tern_status tern_kv_truncate(struct tern_context *ctx, int n_pos);

/* ------------------------------------------------------- LoRA adapters (src/model/lora*.c)
 *
 * llama.cpp's adapter GGUF (general.type "adapter", adapter.type "lora", adapter.lora.alpha,
 * general.architecture; tensors "<weight>.lora_a" ggml ne [n_in, r] and "<weight>.lora_b"
 * ne [r, n_out]; token_embd.weight's pair is flipped as llama.cpp's: lora_a ne [r, n_vocab],
 * lora_b ne [r, n_embd]). A matrix W with adapters computes y = W x + sum scale * B (A x), in
 * F32, scale = user scale * alpha / r (alpha 0: the user scale), as llama.cpp does.
 *
 *     struct tern_lora *ad;
 *     tern_lora_load(model, "adapter.gguf", &ad);         // checked against the model
 *     float scale = 1.0f;
 *     tern_context_set_adapters(ctx, &ad, &scale, 1);      // no reload of the base
 *     ... tern_decode ...
 *     tern_context_set_adapters(ctx, NULL, NULL, 0);       // the plain model again
 *     tern_lora_free(ad);
 */
struct tern_lora;

/* Load the adapter at path for model m: general.type "adapter", adapter.type "lora", the
 * architecture m's; every X.lora_a has its X.lora_b and the other way round, X is a 2-D weight
 * of m that tern's forward pass multiplies (attn_q/k/v/output, ffn_gate/up/down, output,
 * token_embd; not fused or DeltaNet matrices) and the shapes match it, with one rank r per pair;
 * tensor types any tern reads (llama.cpp's converter writes F32, F16, BF16, Q8_0). Tensors
 * named *_norm.weight are ignored, as llama.cpp ignores them (counted in n_ignored). A, B are
 * kept converted to F32 (the file is closed). Errors name the file and the tensor. m must
 * outlive the adapter. Caller frees with tern_lora_free(). */
TERN_NODISCARD tern_status tern_lora_load(const struct tern_model *m, const char *path, struct tern_lora **out);
/* Free an adapter (NULL is fine). No context may still have it attached. */
void tern_lora_free(struct tern_lora *a);

struct tern_lora_info {
    float alpha;            /* adapter.lora.alpha (0 when absent: scale = the user's) */
    int n_targets;          /* weights adapted */
    int rank_min, rank_max; /* ranks over the targets (0 with no targets) */
    int n_ignored;          /* *_norm.weight tensors skipped */
    int type_a, type_b;     /* tensor types in the file (of the first target; -1 none) */
    uint64_t bytes;         /* F32 bytes held for A and B */
};
void tern_lora_get_info(const struct tern_lora *a, struct tern_lora_info *out);
/* The chat template the adapter was trained with (its tokenizer.chat_template, which tern train
 * writes), or NULL: the commands use it instead of the base model's own unless a template is
 * given explicitly. */
const char *tern_lora_chat_template(const struct tern_lora *a);
/* Target i (0 <= i < n_targets): the base weight's name (owned by the adapter), its rank in
 * *rank (may be NULL). NULL when i is out of range. */
const char *tern_lora_target(const struct tern_lora *a, int i, int *rank);

/* Attach adapters[0..n) (n <= 16) with scales[0..n) (the user scale; NULL = all 1) to ctx,
 * replacing the set it had; n = 0 detaches all, and decoding is then exactly the plain model's
 * (same code path, same bits). The same adapter may be given twice (its deltas add). Each
 * adapter must have been loaded for ctx's model (or a copy of it sharing its file:
 * tern_model_quantized_copy) and stay alive while attached. The scratch the adapters need is
 * allocated here, so decoding still never allocates; switching costs building a small table,
 * no reload of the base. The KV cache is left as it is: positions decoded before keep the keys
 * and values of the set they were decoded with (truncate to recompute them). The prefix cache
 * and KV snapshots do not know the set: do not share them between contexts with different
 * adapters. Not in an MTP context. On failure the previous set stays attached. */
TERN_NODISCARD tern_status tern_context_set_adapters(struct tern_context *ctx, struct tern_lora *const *adapters,
                                      const float *scales, int n);
/* Adapters attached to ctx (0: the plain model). */
int tern_context_n_adapters(const struct tern_context *ctx);

/* ------------------------------------------------------- multi-token prediction (qwen35)
 *
 * A Qwen3.5 file may carry a multi-token-prediction (MTP) layer after its main layers
 * (nextn_predict_layers): from the model's last hidden state (which predicted the next token)
 * and the next token's embedding it predicts the token after next. It drafts for speculative decoding (tern_draft source "mtp"),
 * from the target's own hidden states, at the cost of one layer and the output head per draft.
 *
 *     tern_context_keep_hidden(ctx, true);            // the target keeps its hidden states
 *     tern_decode(ctx, toks, n, 0, TERN_LOGITS_LAST);
 *     cp.mtp = true; tern_context_create(model, &cp, &mctx);
 *     // token i with the hidden state of position i-1 (zeros at 0): MTP logits at i predict i+1
 *     tern_decode_mtp(mctx, toks, hid_rows, n, 0, TERN_LOGITS_LAST);
 *     // a draft step: the next token, with the MTP's own state at n-1 in place of the target's
 *     tern_decode_mtp(mctx, &next, tern_context_hidden(mctx, n - 1), 1, n, TERN_LOGITS_LAST);
 */
/* Does m have a usable MTP layer? If not and why_not is not NULL, *why_not says why (static
 * or owned by m). */
bool tern_model_has_mtp(const struct tern_model *m, const char **why_not);
/* Keep (on) or drop the final normalized hidden state of the positions of sequence 0, as each
 * decode computes it: the last min(n_ctx, 4096) positions' (that many x n_embd floats, allocated
 * here). An MTP context always keeps its own (the MTP's output state). */
TERN_NODISCARD tern_status tern_context_keep_hidden(struct tern_context *ctx, bool on);
/* The kept hidden state at position pos of sequence 0 (n_embd floats, owned by the context),
 * or NULL when not kept, or not computed for the current contents (positions restored from a
 * snapshot or the prefix cache have none; truncated ones neither), or older than the last 4096
 * computed. Consecutive positions are consecutive rows except where the ring of kept states
 * wraps. Valid until the next call that changes sequence 0. */
const float *tern_context_hidden(const struct tern_context *ctx, int pos);
/* tern_decode in an MTP context: token i at position pos0 + i with hidden row i (hidden:
 * n x n_embd floats, the target's state at the position before token i's, zeros at position
 * 0). Logits row i predict the token after token i, as the target's row i does, but from the
 * target's state one position earlier: a draft one token further ahead than the target. */
TERN_NODISCARD tern_status tern_decode_mtp(struct tern_context *ctx, const int32_t *tokens, const float *hidden,
                            int n, int pos0, enum tern_logits_mode mode);

/* ===================================================================== profiling */

/* Where forward time goes, per op class, and which kernel ran. Enable with
 * tern_context_set_profile(ctx, true); counters accumulate over tern_decode calls until reset.
 * A "fallback" is a matmul on a supported format that ran the scalar path although the CPU has a
 * SIMD path: it should never happen, and `tern bench --profile` reports any. */
enum tern_prof_op {
    TERN_PROF_EMBED = 0,     /* token embedding lookup */
    TERN_PROF_NORM_QUANT,    /* RMSNorm + activation quantization */
    TERN_PROF_QUANT,         /* activation quantization alone */
    TERN_PROF_ROPE_KV,       /* RoPE + appending K/V to the cache */
    TERN_PROF_ATTENTION,     /* Q.K, softmax, weighted V */
    TERN_PROF_FFN_ACT,       /* SiLU(gate) * up (fused into the gate/up matmul step) */
    TERN_PROF_MATMUL_F32, TERN_PROF_MATMUL_F16, TERN_PROF_MATMUL_BF16, TERN_PROF_MATMUL_Q8_0,
    TERN_PROF_MATMUL_Q4_0, TERN_PROF_MATMUL_Q4_K, TERN_PROF_MATMUL_Q6_K, TERN_PROF_MATMUL_Q5_0,
    TERN_PROF_MATMUL_Q5_K, TERN_PROF_MATMUL_Q5_1, TERN_PROF_MATMUL_Q4_1,
    TERN_PROF_COUNT
};
struct tern_profile_entry {
    const char *name;        /* "matmul Q8_0", "attention", ... */
    const char *kernel;      /* "avx512", "avx2", "scalar" */
    uint64_t ns;             /* wall time (matmuls: measured on thread 0's share) */
    uint64_t calls;
    uint64_t fallbacks;      /* calls that ran scalar although a SIMD path exists for the CPU */
};
void tern_context_set_profile(struct tern_context *ctx, bool on);
void tern_context_profile_reset(struct tern_context *ctx);
/* Fill out[TERN_PROF_COUNT]. */
void tern_context_profile(const struct tern_context *ctx, struct tern_profile_entry *out);

/* ===================================================================== sampling */

struct tern_sampler_params {
    float temperature;     /* 0 = greedy (argmax, lowest id on ties) */
    int top_k;             /* 0 = off */
    float top_p;           /* 1 (or 0) = off */
    float min_p;           /* 0 = off */
    float repeat_penalty;  /* 1 (or 0) = off; applied to the last repeat_last_n tokens */
    int repeat_last_n;     /* 0 = 64 */
    uint64_t seed;
};
struct tern_sampler_params tern_sampler_default_params(void);
/* The greedy choice over logits[0..n) (n >= 1): the highest, the lowest id on ties; NaN never
 * wins unless logits[0] is NaN (then 0). What tern_sampler_sample picks at temperature 0
 * without a repetition penalty. */
int32_t tern_logits_argmax(const float *logits, int n);

struct tern_sampler;
/* Allocates all scratch for up to n_vocab candidates up front. Caller frees with
 * tern_sampler_free(). */
TERN_NODISCARD tern_status tern_sampler_create(const struct tern_sampler_params *p, int n_vocab,
                                struct tern_sampler **out);
void tern_sampler_free(struct tern_sampler *s);
/* Pick a token from logits[n_vocab] (not modified). Remembers it for the repetition penalty. */
int32_t tern_sampler_sample(struct tern_sampler *s, const float *logits);
/* The same choice as tern_sampler_sample on logits where every token not in allow is -inf,
 * without writing them: allow is a bitset (token i allowed iff bit i % 32 of allow[i / 32]; the
 * grammar's mask, tern_grammar_matcher_fill_mask), ids >= n_allow are refused (padding rows).
 * Only the allowed tokens are read, so a narrow mask costs its words, not the vocabulary. If
 * nothing is allowed it samples logits unmasked (the caller's matcher then refuses the token). */
int32_t tern_sampler_sample_masked(struct tern_sampler *s, const float *logits, const uint32_t *allow,
                                   int n_allow);
/* Tell the sampler about tokens it did not pick (the prompt), for the repetition penalty. */
void tern_sampler_accept(struct tern_sampler *s, int32_t token);
void tern_sampler_reset(struct tern_sampler *s);
/* The distribution tern_sampler_sample would draw the next token from (after the repetition
 * penalty, temperature and filters): probs[n_vocab], 0 for filtered tokens, summing to 1;
 * temperature 0 puts 1 on the greedy choice. Draws nothing and remembers nothing. Speculative
 * decoding compares it with the draft's distribution. No allocation. */
void tern_sampler_probs(struct tern_sampler *s, const float *logits, float *probs);

/* ===================================================================== grammar */
/* Constrained decoding: every sampled token keeps the output a prefix of a document the
 * grammar admits, and end-of-generation tokens are allowed exactly when the document is
 * complete. Grammars come from a JSON Schema, from GBNF text (llama.cpp's format) or from an
 * OpenAI `tools` array (tool calls that always parse). docs/tools.md "Constrained decoding"
 * lists what is supported.
 *
 *     struct tern_grammar_vocab *v;
 *     tern_grammar_vocab_create(tok, &v);                    // once per tokenizer (~0.1-0.2 s)
 *     struct tern_grammar_params gp = tern_grammar_default_params();
 *     struct tern_grammar *g;
 *     tern_grammar_from_json_schema(v, schema, strlen(schema), &gp, &g);   // ~0.1-5 ms, immutable
 *     struct tern_grammar_matcher *m;
 *     tern_grammar_matcher_create(g, &m);                    // one per sequence
 *     uint32_t *mask = malloc(tern_grammar_mask_words(v) * 4);
 *     for (;;) {
 *         tern_grammar_matcher_fill_mask(m, mask);           // bit i set = token i allowed
 *         ... sample a token t among the allowed ones (or tern_grammar_matcher_apply(m, logits))
 *         if (tern_token_is_eog(tok, t)) break;             // only offered when complete
 *         tern_grammar_matcher_accept(m, t, NULL);
 *     }
 *     tern_grammar_matcher_free(m); tern_grammar_free(g); tern_grammar_vocab_free(v);
 *
 * Threads: a vocab and a grammar are immutable after creation and may be shared by any number
 * of threads and matchers (the per-node token classification a grammar fills in on first use
 * is published atomically). A matcher belongs to one sequence and one thread at a time.
 * Costs: the first time a matcher reaches a grammar position, the vocabulary is classified for
 * that position (microseconds for most, up to ~3 ms for a broad one) and kept in the grammar
 * for every later matcher; after that a mask is a copy of precomputed bits plus a check of the
 * few tokens whose acceptance depends on the stack, cached per parse state (~1 us).
 * Accepting tokens and filling masks do not allocate once the parse reaches depths and states
 * it has seen (the frame table and caches grow only on new ones). */
struct tern_grammar_vocab;
struct tern_grammar;
struct tern_grammar_matcher;
struct tern_tokenizer; /* declared in the tokenizer section below */

/* The vocabulary as grammars see it: every token's bytes (tern_token_to_piece without
 * TERN_PIECE_SPECIAL), a byte trie, the end-of-generation ids, the texts of the control tokens.
 * A control token is allowed only where a grammar names it as a token (tool grammars do, for a
 * format's markup that is one: tern_grammar_info.control_tokens), else never; text tokens
 * holding the byte 0xFF (byte tokens: never valid UTF-8) are never allowed either. tok may be
 * freed afterwards. Caller frees with tern_grammar_vocab_free(); grammars made from it must be
 * freed first. */
TERN_NODISCARD tern_status tern_grammar_vocab_create(const struct tern_tokenizer *tok,
                                      struct tern_grammar_vocab **out);
void tern_grammar_vocab_free(struct tern_grammar_vocab *v);
/* 32-bit words of a token mask: (n_vocab + 31) / 32. */
size_t tern_grammar_mask_words(const struct tern_grammar_vocab *v);

/* JSON whitespace the schema grammars admit between tokens (keys and values keep their own). */
enum tern_grammar_ws {
    TERN_GRAMMAR_WS_COMPACT = 0, /* one line, ", " and ": " separators, nothing else: the form
                                    Python's json.dumps and chat templates' tojson print */
    TERN_GRAMMAR_WS_MINIFIED,    /* no whitespace at all: {"a":1,"b":[1,2]} */
    TERN_GRAMMAR_WS_FLEXIBLE,    /* any JSON whitespace, at most 20 bytes per gap (pretty-printed
                                    output; bounded so a model cannot loop on newlines) */
    TERN_GRAMMAR_WS_ONE_LINE,    /* one line, each separator with or without one space ("," or
                                    ", ", ":" or ": "): both forms templates print (tojson's, or
                                    minified arguments passed through); tool calls' default */
};

struct tern_grammar_params {
    /* JSON Schema: a keyword or format tern does not enforce is an error naming it and its JSON
     * path ("$.properties.when: unsupported format \"duration\""); lenient ignores it instead
     * and records a warning (tern_grammar_warnings). */
    bool lenient;
    enum tern_grammar_ws ws;
    /* JSON Schema: an object without additionalProperties admits no other properties (JSON
     * Schema's default is to admit any; OpenAI's strict mode sets false everywhere). */
    bool strict_properties;
    /* Lazy grammar: free text until the output contains `trigger` (e.g. "<tool_call>"), then
     * the grammar, then free text again (the trigger re-arms, for parallel calls). NULL =
     * constrained from the first token. */
    const char *trigger;
    /* GBNF: the start rule; NULL = "root". */
    const char *root;
};
struct tern_grammar_params tern_grammar_default_params(void);

/* Compile a JSON Schema (schema[0..len), UTF-8 JSON) against v. Malformed JSON gives
 * TERN_ERR_FORMAT with line:col; an unsupported keyword TERN_ERR_UNSUPPORTED with its JSON
 * path (unless lenient); a schema no document satisfies, or that needs a byte no token can
 * produce, is refused; limits (nesting, enum sizes, repetition counts, automaton size) give
 * TERN_ERR_RANGE naming the limit. v may be NULL: the grammar then only works at the byte level
 * (tern_grammar_matcher_accept_bytes), e.g. to validate a schema without a model. Caller frees
 * with tern_grammar_free(); v must outlive the grammar. */
TERN_NODISCARD tern_status tern_grammar_from_json_schema(const struct tern_grammar_vocab *v, const char *schema,
                                          size_t len, const struct tern_grammar_params *p,
                                          struct tern_grammar **out);
/* Compile GBNF text (llama.cpp's grammar format). Syntax errors and undefined rules give
 * TERN_ERR_FORMAT with line:col; left recursion is refused with the rule cycle. Same ownership
 * as above. */
TERN_NODISCARD tern_status tern_grammar_from_gbnf(const struct tern_grammar_vocab *v, const char *gbnf, size_t len,
                                   const struct tern_grammar_params *p, struct tern_grammar **out);

/* Tool calls: a grammar for an OpenAI `tools` array ([{"type": "function", "function":
 * {"name", "parameters": {JSON Schema}}}, ...]) in a chat template's call format:
 * TERN_TOOLCALL_HERMES: <tool_call>\n{"name": "<one of the tools>", "arguments": <that tool's
 * parameters>}\n</tool_call>, calls separated by "\n" when parallel; TERN_TOOLCALL_MISTRAL:
 * [TOOL_CALLS][{"name": .., "arguments": ..}, ...]; TERN_TOOLCALL_GRANITE: the same list after
 * <|tool_call|>; TERN_TOOLCALL_QWEN_XML (docs/tools.md "Tool-call formats"); TERN_TOOLCALL_LLAMA3:
 * {"name": .., "parameters": ..} as the whole reply, for tool_choice required / NAME; auto and none
 * only where <|python_tag|> is a control token of the vocabulary (the call after that token; else
 * TERN_ERR_UNSUPPORTED: a call opening with a bare '{' is nothing a lazy grammar can wait for).
 * Markup that is a control token of v (tern_token_control_id: Mistral's [TOOL_CALLS] in tekken
 * vocabularies, Granite's <|tool_call|>, <|python_tag|>) is that token, never its spelling: a lazy
 * grammar arms when the model samples it, none masks it, required / named force it (one forced
 * token, as the model was trained), and tern_grammar_info.control_tokens lists it so the generator
 * shows its text to the tool-call parser. Where the markup is plain text (Qwen2.5's <tool_call>,
 * any vocabulary without the token), it is matched as text. */
enum tern_tool_choice {
    TERN_TOOL_CHOICE_AUTO = 0, /* free text; once the model opens a call, the call is constrained
                                  (lazy grammar armed by the opener); re-arms after each call */
    TERN_TOOL_CHOICE_NONE,     /* free text; the opener can never be produced */
    TERN_TOOL_CHOICE_REQUIRED, /* constrained from the first token: one call (or several when
                                  parallel), then end of generation */
    TERN_TOOL_CHOICE_NAMED,    /* like REQUIRED, the tool given by name */
};
struct tern_tool_grammar_params {
    int format;                        /* enum tern_toolcall_format (chat section below);
                                          default TERN_TOOLCALL_HERMES */
    enum tern_tool_choice choice;
    const char *name;                  /* the tool for TERN_TOOL_CHOICE_NAMED */
    bool parallel;                     /* several calls in one reply; default true */
    struct tern_grammar_params schema; /* lenient / ws / strict_properties for the parameters;
                                          default strict_properties (declared parameters only)
                                          and TERN_GRAMMAR_WS_ONE_LINE (the model's own spacing) */
};
struct tern_tool_grammar_params tern_tool_grammar_default_params(void);
/* Also parses "auto" | "none" | "required" | a tool name (CLI --tool-choice). */
TERN_NODISCARD tern_status tern_tool_choice_parse(const char *s, struct tern_tool_grammar_params *p);
/* tools[0..len) is the JSON array. Errors name the JSON path ("$[1].function.parameters
 * .properties.x: ..."). Same ownership as above. */
TERN_NODISCARD tern_status tern_grammar_from_tools(const struct tern_grammar_vocab *v, const char *tools, size_t len,
                                    const struct tern_tool_grammar_params *p,
                                    struct tern_grammar **out);

void tern_grammar_free(struct tern_grammar *g);
/* Warnings of a lenient compile ("$.x: ignored keyword \"not\""), newline-separated; NULL if
 * none. Owned by g. */
const char *tern_grammar_warnings(const struct tern_grammar *g);

struct tern_grammar_info {
    uint64_t serial;         /* this grammar's number, unique in the process (never reused, as an
                                address can be once the grammar is freed) */
    double compile_ms;       /* time spent in the compile call */
    size_t table_bytes;      /* automaton tables */
    size_t cls_bytes;        /* token classifications filled in so far (grows on first use) */
    uint32_t n_rules, n_nodes, n_classified;
    uint32_t n_derived;      /* of n_classified: started from a position alike up to h bytes,
                                only the longer tokens walked */
    uint32_t n_shared;       /* positions given an equivalent position's classification (no walk) */
    bool lazy;
    const char *trigger;     /* lazy grammars: the text that opens the constrained part (a
                                control token's text when trigger_token >= 0) */
    int32_t trigger_token;   /* the control token that opens it (arms on that token only), or -1 */
    /* Control tokens the grammar produces as tokens (a tool-call format's markup that is a
     * control token of the vocabulary): allowed exactly where the grammar names them, never
     * spelled out as text. Their text must be shown to whoever reads the output: tern_generate
     * and the batcher add them to the detokenizer's preserved tokens. Owned by the grammar. */
    const int32_t *control_tokens;
    int n_control_tokens;
    int32_t n_vocab;         /* the vocabulary it was compiled against; 0: none (bytes only) */
};
void tern_grammar_get_info(const struct tern_grammar *g, struct tern_grammar_info *out);
/* Classify the vocabulary at every grammar position now, so no mask ever pays for a first
 * visit (servers that want flat latency). Can take long for big grammars. */
TERN_NODISCARD tern_status tern_grammar_precompute(const struct tern_grammar *g);

/* A matcher: the parse state of one sequence. Small (its tables grow with the depths and states
 * the parse reaches). g must outlive it. Caller frees with tern_grammar_matcher_free(). */
TERN_NODISCARD tern_status tern_grammar_matcher_create(const struct tern_grammar *g,
                                        struct tern_grammar_matcher **out);
void tern_grammar_matcher_free(struct tern_grammar_matcher *m);
/* Back to the start (as created). */
void tern_grammar_matcher_reset(struct tern_grammar_matcher *m);
/* Advance by one token. A token the grammar does not allow here is refused with TERN_ERR_ARG,
 * the state unchanged, tern_last_error() naming the token, the byte and what was expected, and
 * *refused_at (may be NULL) = index of the first refused byte inside the token's bytes (0 for
 * an end-of-generation or control token). An end-of-generation token is allowed exactly when
 * the document is complete; after it nothing more is. */
TERN_NODISCARD tern_status tern_grammar_matcher_accept(struct tern_grammar_matcher *m, int32_t token,
                                        size_t *refused_at);
/* Advance by raw bytes (no tokenizer involved: tests, forced text). All or nothing: on refusal
 * *n_ok (may be NULL) = bytes that would have been accepted and the state is unchanged. Counts
 * as one step for rollback. */
TERN_NODISCARD tern_status tern_grammar_matcher_accept_bytes(struct tern_grammar_matcher *m, const char *s, size_t n,
                                              size_t *n_ok);
/* Write the allowed tokens to mask (tern_grammar_mask_words words; bit i of word i/32 = token
 * i). Returns how many tokens are allowed (0 only after an end-of-generation token). */
int tern_grammar_matcher_fill_mask(struct tern_grammar_matcher *m, uint32_t *mask);
/* Set logits[i] = -INFINITY for every token not allowed (n_vocab floats). Returns the allowed
 * count. Uses the matcher's own mask buffer. */
int tern_grammar_matcher_apply(struct tern_grammar_matcher *m, float *logits);
/* The document is complete: end-of-generation tokens are allowed now. In a lazy grammar: true
 * outside a call. */
bool tern_grammar_matcher_is_complete(const struct tern_grammar_matcher *m);
/* Nothing more can be added (complete, and no byte can follow), or an end-of-generation token
 * was accepted: generation must stop. */
bool tern_grammar_matcher_is_done(const struct tern_grammar_matcher *m);
/* Inside the constrained part (always true for a non-lazy grammar until done). */
bool tern_grammar_matcher_is_constrained(const struct tern_grammar_matcher *m);
/* The bytes the grammar forces next (the only continuation, e.g. `{"name": "` or a closing
 * `"}`), up to cap; stops where a choice appears or the document may end. A generator can
 * tokenize them and accept the tokens without sampling. Returns the count (0: no forced byte). */
size_t tern_grammar_matcher_forced_bytes(struct tern_grammar_matcher *m, char *buf, size_t cap);
/* What may come next, for messages: "'}', ',' or the end of the document" (NUL-terminated,
 * truncated to cap). Returns the length written. */
size_t tern_grammar_matcher_expected(const struct tern_grammar_matcher *m, char *buf, size_t cap);
/* The single allowed token, or -1 if zero or several are allowed (costs a mask fill). */
int32_t tern_grammar_matcher_forced_token(struct tern_grammar_matcher *m);
/* The tokens the grammar forces next, for a generator to append without sampling: the forced
 * bytes (above, up to 256) split into vocabulary tokens by longest match. The last of them is
 * left out unless the forced bytes close the document (or, lazy grammars, the call): the model
 * may want a longer token starting with it (an enum value after a forced prefix). Nothing is
 * accepted: the caller accepts the tokens it uses. Returns the count written to out (<= cap). */
int tern_grammar_matcher_forced_tokens(struct tern_grammar_matcher *m, int32_t *out, int cap);
/* Undo the last n accepted steps (tokens or accept_bytes calls), for speculative decoding.
 * TERN_ERR_ARG if n exceeds the steps taken. */
TERN_NODISCARD tern_status tern_grammar_matcher_rollback(struct tern_grammar_matcher *m, int n);
/* Steps accepted since the start (rollback can go back this many). */
int tern_grammar_matcher_n_steps(const struct tern_grammar_matcher *m);

/* A random document of the grammar (benchmarks, self-tests): bytes are drawn at random among
 * those the grammar allows (mostly printable ASCII where allowed), and once about target_len
 * bytes are written, the shortest way to a complete document is taken. Lazy grammars produce
 * the constrained part only. Writes up to cap bytes to buf; *n = length. TERN_ERR_RANGE if no
 * complete document fit in cap, or if the grammar is so ambiguous that finishing one would take
 * more than a fixed work budget (about 0.1 s). Deterministic for a seed. */
TERN_NODISCARD tern_status tern_grammar_generate(const struct tern_grammar *g, uint64_t seed, size_t target_len,
                                  char *buf, size_t cap, size_t *n);

/* What the fast paths did (docs/tools.md "Constrained decoding"). */
struct tern_grammar_stats {
    uint64_t masks;            /* fill_mask / apply calls */
    uint64_t mask_cache_hits;  /* states whose checked tokens came from the matcher's cache */
    uint64_t free_masks;       /* masks in free text (lazy grammars) */
    uint64_t checked_tokens;   /* uncertain tokens run against the stack */
    uint64_t classified_nodes; /* grammar positions this matcher classified (first visits) */
    uint64_t accepted_tokens, refused_tokens;
};
void tern_grammar_matcher_get_stats(const struct tern_grammar_matcher *m,
                                    struct tern_grammar_stats *out);

/* ===================================================================== KV cache and prompt cache */
/* Snapshots copy positions 0..n-1 of a context's KV cache (exact F16 bytes) and restore them
 * into another context of the same model. The prefix cache keeps such KV in blocks of
 * block_tokens tokens keyed by chained hashes (a block's key covers every token before it), so
 * any prompt sharing a cached prefix, block-aligned, skips computing it; results are bit-identical
 * to a cold run. Snapshots and the prefix cache work on sequence 0 of a context (for other
 * sequences use tern_kv_seq_copy / tern_kv_seq_truncate).
 *
 *     struct tern_prefix_cache_params pp = tern_prefix_cache_default_params();
 *     pp.budget_bytes = 512u << 20; pp.dir = "cache";         // dir: optional persistence
 *     struct tern_prefix_cache *pc;
 *     tern_prefix_cache_create(model, &pp, &pc);                // loads valid files from dir
 *     int n_reused;
 *     tern_prefix_cache_prefill(pc, ctx, prompt, n, &n_reused); // restore + decode the rest
 *     const float *logits = tern_context_logits(ctx, n - 1 - n_reused);
 *     tern_prefix_cache_save(pc);                              // write new blocks to dir
 *     tern_prefix_cache_free(pc);
 */

/* Bytes of an F16 K+V cache of this shape: 2 * layers * kv_heads * head_dim * ctx * 2. */
uint64_t tern_kv_bytes(int n_layer, int n_head_kv, int head_dim, int n_ctx);

/* SHA-256 identity of a model: GGUF header, metadata and tensor table bytes plus a sample of
 * every tensor's data (4 KiB at 8 spread offsets). Two files with equal fingerprints compute
 * the same KV. */
TERN_NODISCARD tern_status tern_model_fingerprint(const struct tern_model *m, uint8_t out[32]);
/* SHA-256 over the raw bytes of every tokenizer.ggml.* metadata entry, in file order. */
TERN_NODISCARD tern_status tern_tokenizer_fingerprint(const struct tern_model *m, uint8_t out[32]);

struct tern_kv_snapshot;
/* Copy positions 0..n-1 of ctx's KV cache (n <= tern_kv_n_pos(ctx)). Caller frees with
 * tern_kv_snapshot_free(). The snapshot does not reference ctx; its model
 * must outlive it. A model with recurrent layers (qwen35) also needs its state at n: n must be
 * 0, the end, or where the last decode call started (else TERN_ERR_UNSUPPORTED). */
TERN_NODISCARD tern_status tern_kv_snapshot_create(const struct tern_context *ctx, int n,
                                    struct tern_kv_snapshot **out);
/* Replace ctx's KV contents with the snapshot: afterwards tern_kv_n_pos(ctx) == its n and
 * decoding continues at position n. Refused (TERN_ERR_ARG) if ctx belongs to a model with a
 * different KV layout or fingerprint, or n exceeds ctx's n_ctx; ctx is unchanged then. */
TERN_NODISCARD tern_status tern_kv_snapshot_restore(struct tern_context *ctx, const struct tern_kv_snapshot *s);
int tern_kv_snapshot_n_pos(const struct tern_kv_snapshot *s);
uint64_t tern_kv_snapshot_bytes(const struct tern_kv_snapshot *s);
void tern_kv_snapshot_free(struct tern_kv_snapshot *s);

struct tern_prefix_cache_params {
    int block_tokens;       /* tokens per block; 0 = 32 */
    uint64_t budget_bytes;  /* KV bytes held in memory; 0 = 256 MiB. LRU blocks are evicted */
    const char *dir;        /* NULL = memory only; else load valid files at create, save there */
};
struct tern_prefix_cache_params tern_prefix_cache_default_params(void);

struct tern_prefix_cache_stats {
    uint64_t lookups;          /* prefill calls */
    uint64_t hits;             /* prefill calls that reused at least one block */
    uint64_t misses;           /* prefill calls that reused nothing */
    uint64_t hit_tokens;       /* prompt tokens restored from the cache */
    uint64_t miss_tokens;      /* prompt tokens computed */
    uint64_t stored_blocks;    /* blocks added after computing them */
    uint64_t evicted_blocks, evicted_bytes;
    uint64_t loaded_blocks;    /* blocks read from dir */
    uint64_t refused_files;    /* files in dir refused (other model, damaged, ...) */
    uint64_t saved_blocks;     /* files written by tern_prefix_cache_save */
    uint64_t n_blocks, bytes;  /* currently held */
    uint64_t budget_bytes;
    int block_tokens;
    uint64_t n_states;         /* blocks that also hold the recurrent state at their end (qwen35) */
};

struct tern_prefix_cache;
/* A cache bound to one model (which must outlive it). With params->dir set, the directory is
 * created if absent and every valid cache file in it is loaded (up to the budget); files made
 * by another model/tokenizer/KV layout/block size, or damaged, are refused, counted, and the
 * last such message is kept (tern_prefix_cache_warning). Caller frees with
 * tern_prefix_cache_free(). Not thread-safe: one caller at a time. */
TERN_NODISCARD tern_status tern_prefix_cache_create(const struct tern_model *m,
                                     const struct tern_prefix_cache_params *p,
                                     struct tern_prefix_cache **out);
void tern_prefix_cache_free(struct tern_prefix_cache *pc);
/* Fill ctx with tokens[0..n) as positions 0..n-1: the longest cached block-aligned prefix
 * (up to n-1 tokens when every layer matmul of the model is batch-invariant on this CPU's
 * kernel path — AVX-512 with Q4_0/Q8_0 layers, or the scalar path — else at most n-16,
 * so the rest is decoded as a batch the prefill kernels compute exactly as in a cold run; the
 * last token is always decoded) is restored, the rest decoded with
 * tern_decode(..., TERN_LOGITS_LAST), and every new full block stored. ctx's previous contents
 * are discarded. On success *n_reused (may be NULL) is the number of restored tokens, and the
 * last token's logits are tern_context_logits(ctx, n - 1 - *n_reused). */
TERN_NODISCARD tern_status tern_prefix_cache_prefill(struct tern_prefix_cache *pc, struct tern_context *ctx,
                                      const int32_t *tokens, int n, int *n_reused);
/* Models with recurrent layers (qwen35): a block may also hold the state after it; prefill keeps
 * the state at the prompt's deepest usable block boundary and stores it with that block, and a
 * restore stops at the deepest matching block that has one. A cache directory keeps the states
 * in the blocks' files (after the KV), so they survive restarts like the KV does. */
/* Tokens of the longest block-aligned cached prefix of tokens[0..n) in the shared group (no side
 * effects). */
int tern_prefix_cache_match(const struct tern_prefix_cache *pc, const int32_t *tokens, int n);
/* Write every block not yet on disk to dir (one file per block, tmp + fsync + rename).
 * TERN_ERR_ARG if the cache has no dir. */
TERN_NODISCARD tern_status tern_prefix_cache_save(struct tern_prefix_cache *pc);
/* Drop every block held in memory (files stay). */
void tern_prefix_cache_clear(struct tern_prefix_cache *pc);
void tern_prefix_cache_get_stats(const struct tern_prefix_cache *pc,
                                 struct tern_prefix_cache_stats *out);
/* The last refusal message from loading dir, or NULL. Owned by pc. */
const char *tern_prefix_cache_warning(const struct tern_prefix_cache *pc);

/* Cache directory inspection (no model needed): one entry per block file. */
struct tern_cache_file_info {
    char name[64];              /* file name inside dir */
    uint64_t file_bytes;
    int n_tokens;               /* tokens in the block */
    int depth;                  /* position of the block's first token / n_tokens */
    uint8_t model_fp[32], tok_fp[32];
    int n_layer, n_head_kv, head_dim;
    bool valid;                 /* header, checksum and key verified */
    bool usable;                /* a run on this machine can reach it: valid, computed by this
                                   machine's kernel path, and every block before it in its chain
                                   (same model, tokenizer, layout) usable too */
    char problem[160];          /* why not usable ("" if usable) */
};
/* List the cache files in dir (name *.tkv). A block is reached only through the chain of the
 * blocks before it, so a missing, damaged or refused block makes every later block of its chain
 * unusable; the model-specific checks of a run (model/tokenizer fingerprint, vocabulary) need a
 * model and are not made. *out is malloc'ed (caller frees with free()). */
TERN_NODISCARD tern_status tern_cache_dir_list(const char *dir, struct tern_cache_file_info **out, int *n);
/* Delete every cache file (*.tkv and leftover *.tkv.tmp) in dir; *n_removed may be NULL. */
TERN_NODISCARD tern_status tern_cache_dir_clear(const char *dir, int *n_removed);

/* ===================================================================== generation */
/* The sampling loop over a context: decode a prompt,
 * sample, stream detokenized UTF-8 through a callback, stop at an end-of-generation token.
 * A generator remembers which tokens fill its context's KV cache, so a chat that re-renders
 * the whole conversation each turn only decodes what changed: the new prompt is compared with
 * the cached tokens, the KV cache is truncated to the common prefix and the rest is decoded.
 *
 *     struct tern_generator *g;
 *     tern_generator_create(ctx, tok, &g);                   // history buffer allocated here
 *     struct tern_gen_params gp = tern_gen_default_params();
 *     gp.max_tokens = 128;
 *     struct tern_gen_stats st;
 *     tern_generate(g, sampler, ids, n, &gp, on_piece, user, &st);   // on_piece(text, len, user)
 *     ... next turn: tern_generate(g, sampler, ids2, n2, ...)       // decodes only the new suffix
 *     tern_generator_free(g);
 *
 * For a plain `run -p TEXT`: tokenize with TERN_TOK_ADD_SPECIAL, call tern_generate once. */
struct tern_generator;
struct tern_tokenizer; /* declared in the tokenizer section below */

/* Receives each piece of the answer as complete UTF-8 (never empty). The text is not
 * NUL-terminated and is valid only during the call. Return non-zero to stop generating. */
typedef int (*tern_piece_fn)(const char *text, size_t len, void *user);
/* Receives each sampled token id (the stopping end-of-generation token included), before its
 * text goes to on_piece. Return non-zero to stop generating. */
typedef int (*tern_token_fn)(int32_t id, void *user);

/* A generated token's log-probability (tern_batch_request.on_logprob): the natural log of its
 * probability under the model at its position, the log-softmax of the raw logits (temperature
 * 1, before grammar masks, repetition penalties and top-k / top-p / min-p), and the n_top most
 * likely tokens there with theirs, best first (equal logits: lower id first). This is the
 * model's own distribution whatever the sampler did with it; at temperature 0 the token is the
 * most likely one the grammar allows. */
#define TERN_MAX_TOP_LOGPROBS 20
struct tern_token_logprob {
    int32_t token;
    float logprob;
    int n_top;                               /* 0 .. TERN_MAX_TOP_LOGPROBS */
    int32_t top[TERN_MAX_TOP_LOGPROBS];      /* (n_top) */
    float top_logprob[TERN_MAX_TOP_LOGPROBS];
};
/* Receives one token's log-probabilities, before that token's on_token and text; valid only
 * during the call. Return non-zero to stop generating. */
typedef int (*tern_logprob_fn)(const struct tern_token_logprob *lp, void *user);

/* Reasoning control, for a model that thinks before it answers (<think>...</think>; see
 * "Reasoning" in the chat section and docs/mcp-and-reasoning.md). Off while `end` is NULL (the
 * default). With `open` (the prompt ended inside the reasoning, tern_reasoning_open_at_end; a
 * front end may open it itself by ending the prompt with the open tag) the reply starts as
 * reasoning and lasts until its text contains `end`:
 * - the grammar (tern_gen_params.grammar) waits until then, so a constrained tool call (or any
 *   constrained answer) starts after the reasoning, and a <tool_call> written while thinking
 *   does not arm a lazy grammar;
 * - with budget >= 0, once that many reasoning tokens were generated (0: at once) the tokens
 *   close[0..n_close) are appended without sampling (say the tokens of "\n</think>\n\n"); the
 *   reasoning ends with the last of them and the answer goes on from there;
 * - drafts are not taken while inside (speculation resumes after it).
 * `end` is at most 31 bytes; n_close 1..32 when budget >= 0; both are copied at the start. */
struct tern_reasoning_ctl {
    bool open;
    const char *end;        /* e.g. "</think>"; NULL = no reasoning control */
    int budget;             /* reasoning tokens at most; -1 = no limit */
    const int32_t *close;   /* (n_close) forced when the budget is spent */
    int n_close;
};

struct tern_gen_params {
    int max_tokens;       /* tokens to sample at most; default 256 */
    bool ignore_eog;      /* do not stop at end-of-generation tokens (they are still not shown) */
    bool show_special;    /* pass control tokens' text to on_piece (TERN_PIECE_SPECIAL) */
    /* Preserved tokens (llama-server's): control tokens whose text on_piece shows although
     * show_special is false, preserve[0..n_preserve); for tool calls, the format's markup
     * (tern_toolcall_preserved_tokens), so the parser sees [TOOL_CALLS] or <|python_tag|> where
     * the vocabulary makes it a control token. The grammar's control tokens
     * (tern_grammar_info.control_tokens) are shown as well, without being listed. At most
     * TERN_MAX_PRESERVED together; read during the call only. Default none: every control
     * token stays hidden. */
    const int32_t *preserve;
    int n_preserve;
    tern_token_fn on_token; /* or NULL (the default); called with tern_generate's user pointer */
    /* Constrained decoding (see "grammar" above), or NULL (the default). Every position is
     * masked before sampling (temperature 0: the best allowed token), so the output stays a
     * prefix of a document the grammar admits; end-of-generation tokens are allowed only where
     * the document is complete, and generation ends by itself once nothing can follow it (stop
     * TERN_GEN_STOP_DONE). Where the grammar admits exactly one continuation, its tokens are
     * appended without sampling (forced tokens: `{"name": "`, a closing `"}`; several go through
     * one forward pass) and counted in stats.grammar_forced. Works with a draft: drafted tokens
     * the grammar refuses are cut before the target's pass, and at temperature 0 the output is
     * the constrained output without a draft, token for token. The grammar must be compiled
     * against this model's tokenizer and outlive the call; the generator makes a matcher for it
     * each call (kept until the next call or tern_generator_free). Lazy grammars (tool calls) leave free text
     * free and constrain from their trigger on. */
    const struct tern_grammar *grammar;
    struct tern_reasoning_ctl reasoning; /* default: off */
};
struct tern_gen_params tern_gen_default_params(void);

enum tern_gen_stop {
    TERN_GEN_STOP_EOG = 0,      /* the model produced an end-of-generation token */
    TERN_GEN_STOP_MAX_TOKENS,   /* max_tokens were sampled */
    TERN_GEN_STOP_CALLBACK,     /* on_piece or on_token returned non-zero */
    TERN_GEN_STOP_CONTEXT_FULL, /* the KV cache has no room for another token */
    TERN_GEN_STOP_DONE,         /* a grammar's document is complete and nothing can follow it */
};

struct tern_gen_stats {
    int n_prompt;          /* tokens of the prompt passed in */
    int n_reused;          /* of those, already in the KV cache from an earlier call (not decoded) */
    int n_prompt_decoded;  /* n_prompt - n_reused: what this call had to compute */
    int n_generated;       /* tokens sampled, the stopping end-of-generation token included */
    double prompt_ms;      /* decoding the n_prompt_decoded tokens */
    double gen_ms;         /* from the end of the prompt decode to the end: sampling + decoding */
    double ttft_ms;        /* from the call to the first sampled token (prompt_ms + 1 sample) */
    double gen_tps;        /* generated tokens per second after the first: (n_generated - 1) /
                              (gen_ms - first sample); 0 when fewer than 2 tokens */
    enum tern_gen_stop stop;
    /* Speculative decoding (tern_generator_set_draft; all 0 without a draft). A round is one
     * target pass that verifies drafted tokens; a plain step is a target pass without any
     * (speculation switched off, re-measuring, or nothing proposed). */
    int spec_drafted;        /* drafted tokens the target checked */
    int spec_accepted;       /* of those, accepted */
    int spec_rounds;
    int spec_plain_steps;    /* (a batcher's request: steps it could have drafted in but the
                                controller held drafting off) */
    double spec_accept_rate; /* spec_accepted / spec_drafted (0 if none drafted) */
    double spec_mean_accepted; /* accepted drafted tokens per round (each round also yields the
                                  target's own next token) */
    double spec_rollback_p50, spec_rollback_p95; /* share of a round's drafted tokens rejected
                                  (and rolled back from the KV cache): percentiles over rounds */
    double spec_draft_ms;    /* time in the draft source (lookup, or the drafter's passes) */
    double spec_verify_ms;   /* time in rounds: the target's verify pass + accept/reject */
    double spec_plain_tps;   /* tokens/s of this call's plain steps (the target alone, the same
                                way gen_tps counts); 0 if none ran */
    int spec_off_periods;    /* times speculation switched itself off because it did not pay */
    bool spec_exact;         /* temperature 0 and every round verified with one-token bits (a
                                batch-invariant model, or exact batches): the output is the
                                target's greedy output token for token */
    /* Constrained decoding (tern_gen_params.grammar; all 0 / false without one). Times are CPU
     * time of the calling thread (where masks are computed), so they hold under load. */
    int grammar_masks;       /* token masks computed and applied (one per sampled position,
                                drafted positions included) */
    double grammar_mask_ms;  /* computing masks and applying them to the logits */
    double grammar_ms;       /* all grammar work: masks, accepting tokens, forced tokens, drafts */
    int grammar_forced;      /* tokens appended without sampling (included in n_generated) */
    int grammar_draft_refused; /* drafted tokens the grammar refused before the target's pass */
    bool incomplete;         /* generation stopped (max_tokens, context full, a callback) inside an
                                open document: the output is a prefix of one, not a document */
    int reasoning_tokens;    /* tokens generated inside the reasoning (tern_reasoning_ctl; its
                                forced close included); 0 without a reasoning control */
};

/* A generator over ctx (one sequence). The KV cache may already hold tokens: the generator
 * does not know them and starts by treating the cache as empty (they are overwritten).
 * tok must match the model. Both must outlive the generator. Allocates a record of n_ctx token
 * ids and a detokenizer, once. Caller frees with tern_generator_free(). */
TERN_NODISCARD tern_status tern_generator_create(struct tern_context *ctx, const struct tern_tokenizer *tok,
                                  struct tern_generator **out);
void tern_generator_free(struct tern_generator *g);
/* Decode prompt[0..n) (reusing the longest cached prefix; at least the last prompt token is
 * always decoded to get its logits) and generate. The sampler is reset and fed the prompt
 * (tern_sampler_accept), so the same prompt and seed give the same tokens whatever came
 * before. Sampled tokens are decoded into the KV cache and recorded, except the one that
 * stopped generation. stats may be NULL; on_piece may be NULL. Fails (TERN_ERR_RANGE) if the
 * prompt does not fit the context; a context that fills up during generation just stops
 * (stats->stop). No allocation per token. */
TERN_NODISCARD tern_status tern_generate(struct tern_generator *g, struct tern_sampler *s, const int32_t *prompt,
                          int n, const struct tern_gen_params *p, tern_piece_fn on_piece,
                          void *user, struct tern_gen_stats *stats);
/* The tokens whose KV the context holds, as the generator knows them (*n of them); owned by
 * g, valid until the next tern_generate. */
const int32_t *tern_generator_tokens(const struct tern_generator *g, int *n);
/* Forget the record and empty the KV cache. */
void tern_generator_reset(struct tern_generator *g);
/* Use a process-wide prefix cache (may be NULL to stop): when it holds more of a prompt than
 * the context does (a first turn, or a conversation seen before a restart), the prompt is
 * filled from it with tern_prefix_cache_prefill, which also stores the prompt's new blocks.
 * Not owned; must outlive its use. */
struct tern_prefix_cache;
void tern_generator_set_prefix_cache(struct tern_generator *g, struct tern_prefix_cache *pc);
/* "eog", "max_tokens", "callback", "context_full", "done". */
const char *tern_gen_stop_name(enum tern_gen_stop s);

/* --- speculative decoding (src/gen/spec_*.c; docs/speculative.md) ---
 * A draft proposes the next few tokens cheaply; the target checks k of them in ONE forward pass
 * over k + 1 positions (the pending token and the drafts, logits for every row), keeps the
 * longest accepted prefix plus one token of its own, and rolls the rest back out of its KV
 * cache. Decode reads all weights per pass, so an accepted token costs almost nothing.
 * Guarantees: at temperature 0 the output is the target's greedy output token for token (the
 * verify pass runs with exact batches where the kernels are not batch-invariant); when
 * sampling, the output distribution is exactly the target's (a drafted token is accepted with
 * probability min(1, p/q); on rejection the token is drawn from normalize(max(0, p - q))). The
 * draft length adapts to the measured acceptance and timings, and speculation switches itself
 * off (re-probing now and then) when it does not pay; with n_min == n_max the length is fixed
 * and speculation never switches off, so sampled output is reproducible for a seed (otherwise
 * the tokens drawn depend on timing-driven draft lengths; their distribution does not).
 *
 *     struct tern_draft_params dp = tern_draft_default_params();
 *     dp.source = "ngram";                  // or "self:q4_0", or "drafter.gguf"
 *     struct tern_draft *d;
 *     tern_draft_create(model, &dp, &d);    // refuses drafters with another tokenizer
 *     tern_generator_set_draft(g, d);
 *     tern_generate(g, ...);                // stats->spec_* say what speculation did
 *     tern_generator_set_draft(g, NULL); tern_draft_free(d);
 *
 * Sources: "ngram" (prompt lookup: the continuation of the most recent earlier occurrence of
 * the last 1..4 tokens; no second model: tool calls copy names and argument values from the
 * prompt), "mtp" (the target's own multi-token-prediction layer, Qwen3.5 files that carry one:
 * drafts from the target's hidden states, one layer and the output head per draft; a generator's
 * source only, not a batcher's), "self:TYPE" (the target's own weights converted to TYPE at load, e.g. q4_0:
 * tern_model_quantized_copy), or the path of a drafter GGUF with the same tokenizer
 * (compared by tokenizer fingerprint). */
struct tern_draft_params {
    const char *source;   /* required: "ngram", "mtp", "self:TYPE" or a GGUF path */
    int n_max;            /* most tokens drafted per round, 1..64; 0 = 8 */
    int n_min;            /* fewest: a shorter proposal is not verified; 1..n_max; 0 = 1 */
    int n_ctx;            /* model drafters: context positions (at least the target's); 0 = 4096 */
    int n_threads;        /* model drafters: threads (also for the self conversion); 0 = all CPUs */
    int ngram_min, ngram_max; /* ngram: lengths of the looked-up suffix; 0 = 1 and 4 */
    int n_seq;            /* model drafters: sequences of the drafter's context, 1..256; 0 = 1.
                             A generator drafts in one; a batcher needs one per slot (its
                             context's n_seq: tern_batcher_params.draft) */
};
struct tern_draft_params tern_draft_default_params(void);

struct tern_draft;
/* A draft for target (which must outlive it). A drafter file must share the target's tokenizer
 * (tokenizer fingerprint; else TERN_ERR_ARG naming both tokenizers) and an architecture tern
 * runs. Allocates everything drafting needs (drafter model and context, n_max distributions of
 * n_vocab floats), once. Caller frees with tern_draft_free(), after detaching it from every
 * generator. */
TERN_NODISCARD tern_status tern_draft_create(const struct tern_model *target, const struct tern_draft_params *p,
                              struct tern_draft **out);
void tern_draft_free(struct tern_draft *d);
/* "ngram", "self" or "model". */
const char *tern_draft_kind(const struct tern_draft *d);
/* The drafter model (self copy or file), or NULL for ngram; owned by d. */
const struct tern_model *tern_draft_model(const struct tern_draft *d);
/* Speculate in g's generations with d (NULL: stop). d must have been made for g's model
 * (TERN_ERR_ARG otherwise); one draft serves one generator (or batcher) at a time. Allocates g's verify
 * scratch (n_max + 1 tokens, one distribution) here, not per token. */
TERN_NODISCARD tern_status tern_generator_set_draft(struct tern_generator *g, struct tern_draft *d);

/* --- batched generation (src/gen/batcher.c; docs/serve.md "Scheduling") ---
 * Continuous batching over one multi-sequence context (tern_context_params.n_seq): each
 * sequence of the context is a slot; a request added to a free slot is prefilled in chunks and
 * then generates, and every tern_batcher_step runs ONE forward pass holding the next token of
 * every generating slot plus as many prompt tokens of prefilling slots as the step's budget
 * allows, so the weights are read once for all of them. Requests join and leave between steps.
 * A slot keeps the tokens of its last request after it finishes, and a new prompt goes to the
 * free slot sharing its longest prefix (or gets that prefix copied from another slot with
 * tern_kv_seq_copy), so a shared system prompt is computed once. All callbacks run inside
 * tern_batcher_step / tern_batcher_cancel on the caller's thread; the batcher is not
 * thread-safe (one driving thread).
 *
 *     struct tern_context_params cp = tern_context_default_params();
 *     cp.n_seq = 4;                                    // four slots
 *     tern_context_create(model, &cp, &ctx);
 *     tern_batcher_create(ctx, tok, NULL, &b);
 *     struct tern_batch_request r = tern_batch_request_default();
 *     r.prompt = ids; r.n_prompt = n; r.sampler = s; r.on_piece = fn; r.on_done = done; r.user = u;
 *     tern_batcher_add(b, &r, &slot);                  // TERN_ERR_RANGE when no slot is free
 *     while (tern_batcher_n_active(b) > 0) tern_batcher_step(b, NULL);   // done() per request
 */
struct tern_batcher;
struct tern_batcher_params {
    int n_prefill;   /* prompt tokens per step over all prefilling slots (chunked prefill: a
                        long prompt never stalls the generating slots for more than one such
                        chunk); 0 = 256; capped by the context's n_batch */
    bool share_prefix; /* reuse KV of other slots (default true; false: every prompt is decoded
                          from position 0, for measurements) */
    int n_draft;     /* speculative decoding by n-gram lookup (the "ngram" source of tern_draft:
                        the continuation of the most recent earlier occurrence of the last 1..4
                        tokens of the slot's own prompt and answer): up to n_draft tokens per
                        generating slot and step, checked in the same forward pass as everything
                        else (rows for the pending token and its drafts, logits for each), kept
                        while the target agrees (temperature 0: its own choice; sampling: with
                        probability p, the standard rule for a point-mass draft), the rest rolled
                        out of the slot's KV. 0 (default) = off; at most 64 and n_batch / n_seq - 1.
                        Not for requests with a grammar or on_logprob (they decode plainly).
                        Greedy output is the undrafted output token for token where the kernels
                        are batch-invariant (tern_model_batch_invariant), as every batched row is.
                        With draft set: the most tokens drafted per slot and step; 0 = the
                        draft's n_max (and never more than it) */
    struct tern_draft *draft; /* optional, not owned; the source of drafts instead of the built-in
                        lookup. An "ngram" draft is the lookup above. A drafter model ("self:TYPE"
                        or a GGUF; tern_draft_params.n_seq >= the context's n_seq, n_ctx >= its
                        n_ctx) keeps one sequence of its own context per slot, in step with the
                        slot's record: it is prefilled with the slot's prompt alongside the
                        target (reusing the prefix its sequence, or another slot's, shares with
                        the prompt, as the slot's KV does; a prompt restored from the prefix
                        cache is computed by the drafter), and each step, before the target's
                        pass, it drafts for every generating slot in batched passes of its own
                        (one per drafted position: the catch-up and first draft, then one token
                        per slot). The target keeps drafts as tern_generate's speculation does:
                        greedy, while they are its own choice; sampling, with probability
                        min(1, p/q) (q the drafter's distribution under the request's
                        temperature and filters), the first rejection drawn from
                        normalize(max(0, p - q)), so the output distribution is the target's.
                        Rejected drafts leave both KVs. Up to n_draft per step (cut by
                        draft_p_min); a request whose round gave nothing (no confident draft,
                        none kept) is left undrafted for 1, 2, 4 .. 64 steps (its sequence
                        catches up when drafting resumes). Marked in use until
                        tern_batcher_free; must outlive b.
                        A sampling request's q rows (n_draft x n_vocab floats) are allocated when
                        its slot first serves one, and kept */
    float draft_p_min;  /* drafter models: a slot stops drafting at the first position where the
                        drafter's largest probability is below this (greedy: its softmax at
                        temperature 1; sampling: q), so an unsure drafter costs fewer passes
                        (llama.cpp's --draft-p-min). Decided before the draw: the output stays
                        exact. 0..1; 0 (default) = always n_draft */
    int n_draft_min;    /* the draft length is chosen per step for the whole batch, from measured
                        cost (CPU time of the draft passes and of the target's pass by its rows)
                        and each request's acceptance, between n_draft_min and n_draft, or
                        drafting held off when it does not pay (re-probed now and then, losing
                        at most about 3 % against undrafted steps: tern_generate's controller,
                        src/gen/spec_ctl.c, over the batch); 0 = 1; n_draft_min >= n_draft
                        fixes the length at n_draft and never holds off (reproducible sampling:
                        otherwise which tokens are drawn depends on timing; their distribution
                        does not) */
};
struct tern_batcher_params tern_batcher_default_params(void);

/* Called once per request when it leaves its slot (any reason: stats->stop; a cancel gives
 * TERN_GEN_STOP_CALLBACK), after its last piece. stats->n_reused = prompt tokens whose KV was
 * already there (kept by the slot, or copied from another slot). */
typedef void (*tern_batch_done_fn)(const struct tern_gen_stats *stats, void *user);

struct tern_batch_request {
    const int32_t *prompt;   /* copied by tern_batcher_add */
    int n_prompt;            /* 1 .. n_ctx - 1 */
    struct tern_sampler *sampler; /* required, not owned; reset and fed the prompt at add; used
                                     only inside steps until done */
    const struct tern_grammar *grammar; /* optional, not owned: constrains the answer exactly as
                                     tern_gen_params.grammar does in tern_generate (masks, forced
                                     tokens decoded in the slot's next pass, stop "done", the
                                     grammar_* stats); compiled against this model's tokenizer
                                     (else TERN_ERR_ARG at add); must outlive the request. The
                                     slot's matcher is made at add and freed when it leaves */
    int max_tokens;          /* tokens to sample at most (the end-of-generation token counts) */
    bool ignore_eog;         /* end-of-generation tokens do not stop (nor show): fixed-length
                                runs for measurements (llama-server's ignore_eos) */
    const int32_t *preserve; /* preserved tokens, as tern_gen_params.preserve (the grammar's
                                control tokens are added); copied at add */
    int n_preserve;
    tern_piece_fn on_piece;  /* complete UTF-8 pieces of the answer; non-zero = stop now */
    tern_token_fn on_token;  /* each sampled id before its text; non-zero = stop now; may be NULL */
    tern_logprob_fn on_logprob; /* each sampled token's log-probabilities, before on_token; may
                                   be NULL. When set, the grammar's forced tokens are not taken
                                   several per pass: each is sampled through the mask in a pass of
                                   its own like any token, so every token of the answer comes with
                                   the model's distribution at its position */
    int n_top_logprobs;      /* 0 .. TERN_MAX_TOP_LOGPROBS alternatives for on_logprob */
    tern_batch_done_fn on_done; /* required */
    void *user;
    uint64_t cache_group;    /* isolation group: the prompt reuses KV only from slots whose last
                                request had the same group and from prefix-cache blocks stored
                                under it (the prefix cache's restore); 0 = the shared group */
    struct tern_reasoning_ctl reasoning; /* as tern_gen_params.reasoning; default: off */
};
struct tern_batch_request tern_batch_request_default(void);

/* b over ctx (every sequence of ctx becomes a slot; their contents are forgotten) and tok (the
 * model's tokenizer; read only). Both must outlive b. Allocates the slots' token records
 * (n_seq x n_ctx ids), detokenizers and the batch arrays once. Caller frees with
 * tern_batcher_free(), which finishes nothing: call tern_batcher_cancel on active requests
 * first if their on_done must run. */
TERN_NODISCARD tern_status tern_batcher_create(struct tern_context *ctx, const struct tern_tokenizer *tok,
                                const struct tern_batcher_params *p, struct tern_batcher **out);
void tern_batcher_free(struct tern_batcher *b);
/* Put a request into a free slot (*slot, may be NULL). TERN_ERR_RANGE when every slot is busy
 * (nothing changes), TERN_ERR_ARG for a bad request (empty prompt, one with no room to generate,
 * ids outside the vocabulary). No callback runs here. */
TERN_NODISCARD tern_status tern_batcher_add(struct tern_batcher *b, const struct tern_batch_request *r, int *slot);
/* End the request in slot now (on_done runs with TERN_GEN_STOP_CALLBACK); the slot is free on
 * return. No-op for a free slot. */
void tern_batcher_cancel(struct tern_batcher *b, int slot);

struct tern_batcher_step_info {
    int n_tokens;        /* tokens in the forward pass (0: nothing to do) */
    int n_decode;        /* of those, generating slots' next tokens (a sampled one and the
                            grammar's forced tokens after it) */
    int n_prefill;       /* prompt tokens */
    int n_finished;      /* requests that finished in this step */
    double forward_ms;   /* the forward pass */
    double sample_ms;    /* masking, sampling and the callbacks */
    double mask_ms;      /* of that, grammar masks (tern_grammar_matcher_apply) */
    int n_drafted;       /* drafted tokens checked in this pass (tern_batcher_params.n_draft) */
    int n_accepted;      /* of those, kept */
    double draft_ms;     /* a drafter model's passes before the target's (drafts, catch-up and
                            prefill of its sequences) */
    int n_draft_passes;  /* those passes */
    int n_draft_tokens;  /* tokens over those passes */
    int draft_k;         /* drafts per request the controller allowed in this step (0: none) */
    int n_draft_held;    /* requests that could have drafted but the controller held off */
    bool draft_off_period; /* the controller switched drafting off in this step (it did not pay) */
};
/* One forward pass and the sampling after it. On a forward failure every active request ends
 * (on_done with the status in stats->stop = TERN_GEN_STOP_CALLBACK) and the status is returned.
 * info may be NULL. */
TERN_NODISCARD tern_status tern_batcher_step(struct tern_batcher *b, struct tern_batcher_step_info *info);
int tern_batcher_n_active(const struct tern_batcher *b);
int tern_batcher_n_slots(const struct tern_batcher *b);
/* Share prompts across slots and time through a prefix cache made for the context's model
 * (NULL: stop). At add, a prompt is restored from it when it holds a
 * longer prefix than any slot; a prompt's blocks are stored when its prefill completes and the
 * whole record (prompt and answer) when the request leaves. stats->n_reused counts restored
 * tokens like slot-kept ones. Not owned; used only inside add / step / cancel (the batcher's
 * thread), and must outlive its use. */
void tern_batcher_set_prefix_cache(struct tern_batcher *b, struct tern_prefix_cache *pc);

/* ===================================================================== tokenizer */
/*
 *     struct tern_tokenizer *tok;
 *     tern_tokenizer_load("model.gguf", &tok);              // a vocab-only GGUF is enough
 *     int32_t ids[256]; size_t n;
 *     tern_tokenize(tok, text, len, TERN_TOK_ADD_SPECIAL, ids, 256, &n);   // bos per metadata
 *     struct tern_detokenizer *d;
 *     tern_detokenizer_create(tok, 0, &d);
 *     for (size_t i = 0; i < n; i++) {                       // streaming: whole UTF-8 only
 *         const char *s; size_t sn;
 *         tern_detokenizer_push(d, ids[i], &s, &sn); fwrite(s, 1, sn, stdout);
 *     }
 *     tern_detokenizer_flush(d, &s, &sn); ...
 *     tern_detokenizer_free(d); tern_tokenizer_free(tok);
 *
 * Models: byte-level BPE (tokenizer.ggml.model "gpt2") with the pre-tokenizers gpt-2,
 * llama-bpe (llama3), qwen2, deepseek-llm, deepseek-coder, starcoder, falcon and llama.cpp's
 * default (used when tokenizer.ggml.pre is absent, e.g. gpt-neox); SentencePiece ("llama").
 * Ids match llama.cpp's llama_tokenize. Invalid UTF-8 never fails: each invalid byte is kept
 * as a symbol of its own (byte-level BPE: its byte token; SentencePiece: its <0xNN> token),
 * so decoding gives the input bytes back (llama.cpp instead substitutes U+FFFD).
 * Threads: a tokenizer keeps scratch and a word cache, so calls that take a non-const
 * tokenizer must not run concurrently on the same one (use one tokenizer per thread). */
struct tern_tokenizer;
struct tern_detokenizer;

enum {
    TERN_TOK_ADD_SPECIAL = 1u << 0,   /* add bos/eos as the metadata says (add_bos_token ...) */
    TERN_TOK_PARSE_SPECIAL = 1u << 1, /* recognize control tokens (<|im_start|>) in text */
    TERN_TOK_CONTINUE = 1u << 2,      /* the text continues one already tokenized (a draft
                                         starting inside a word): no space prefix where the
                                         tokenizer puts one before a text (SPM's "▁") */
};
enum {
    TERN_PIECE_SPECIAL = 1u << 0,     /* render control tokens as their text (else empty) */
};

/* Build from a GGUF's tokenizer.ggml.* keys. Everything needed is copied: g may be closed
 * afterwards. Caller frees with tern_tokenizer_free(). */
TERN_NODISCARD tern_status tern_tokenizer_from_gguf(const struct tern_gguf *g, struct tern_tokenizer **out);
/* Open path (vocab-only GGUFs are fine), build, close. Caller frees with tern_tokenizer_free(). */
TERN_NODISCARD tern_status tern_tokenizer_load(const char *gguf_path, struct tern_tokenizer **out);
void tern_tokenizer_free(struct tern_tokenizer *t);

int tern_tokenizer_n_vocab(const struct tern_tokenizer *t);
/* "gpt2" or "llama" (tokenizer.ggml.model) and the pre-tokenizer name in effect ("gpt-2",
 * "llama-bpe", ..., "default"; "" for SentencePiece). Static strings owned by t. */
const char *tern_tokenizer_model(const struct tern_tokenizer *t);
const char *tern_tokenizer_pre(const struct tern_tokenizer *t);
int32_t tern_token_bos(const struct tern_tokenizer *t); /* -1 if none */
int32_t tern_token_eos(const struct tern_tokenizer *t); /* -1 if none */
/* End of generation, as llama.cpp's set: eos, eot/eom, FIM pad / repo / file separator (by key,
 * else by text: <|fim_pad|>, <|repo_name|>, <|file_sep|> ...) and tokens named <|eot_id|>,
 * <|im_end|>, <|end|>, <|endoftext|>, <end_of_turn>, <|eom_id|>, <EOT>. */
bool tern_token_is_eog(const struct tern_tokenizer *t, int32_t id);
/* Control token (never produced from plain text; rendered only with TERN_PIECE_SPECIAL). As in
 * llama.cpp, tokens named like a role (end of turn, FIM <|fim_prefix|> <PRE> ..., see
 * docs/tokenizers.md) are control whatever type the GGUF gives them, unless a key names that role. */
bool tern_token_is_control(const struct tern_tokenizer *t, int32_t id);
/* The token's text as stored in the GGUF (not NUL-terminated; NULL/0 if id is out of range). */
const char *tern_token_text(const struct tern_tokenizer *t, int32_t id, size_t *len);
/* Id of a token whose stored text is exactly text[0..len), or -1. */
int32_t tern_token_lookup(const struct tern_tokenizer *t, const char *text, size_t len);
/* The control token text[0..len) is: the id when tern_tokenize with TERN_TOK_PARSE_SPECIAL gives
 * exactly one token for it and that token is a control token ("[TOOL_CALLS]" in a tekken
 * vocabulary), else -1 (several tokens, or a normal / user-defined one, whose text is shown
 * anyway). No allocation; const. */
int32_t tern_token_control_id(const struct tern_tokenizer *t, const char *text, size_t len);

/* Text -> ids into out[0..cap). On success *n_out = count. If cap is too small: TERN_ERR_RANGE
 * with "needs N" in the message, *n_out = N and out holds the first cap ids. No allocation
 * once the tokenizer has seen an input at least as long (scratch is kept and reused). */
TERN_NODISCARD tern_status tern_tokenize(struct tern_tokenizer *t, const char *text, size_t len, unsigned flags,
                          int32_t *out, size_t cap, size_t *n_out);
/* tern_tokenize into the malloc'ed buffer *ids of *cap ids, grown with realloc when the text
 * needs more (*ids may start NULL with *cap 0). The caller frees *ids. */
TERN_NODISCARD tern_status tern_tokenize_grow(struct tern_tokenizer *t, const char *text, size_t len, unsigned flags,
                               int32_t **ids, size_t *cap, size_t *n_out);

/* Raw bytes of one token (SPM: ▁ -> space, <0xNN> -> the byte; BPE: GPT-2 byte map undone).
 * May be a partial UTF-8 sequence. flags: TERN_PIECE_SPECIAL (to show some control tokens
 * only, pass it for those ids: tern_detokenizer_preserve's rule). Same RANGE rule as above. */
TERN_NODISCARD tern_status tern_token_to_piece(const struct tern_tokenizer *t, int32_t id, unsigned flags,
                                char *buf, size_t cap, size_t *n_out);
/* All pieces of ids concatenated (raw bytes, not validated). SPM: the space the encoder put
 * in front of the text is removed from the first piece, so detokenize(tokenize(x)) == x. */
TERN_NODISCARD tern_status tern_detokenize(const struct tern_tokenizer *t, const int32_t *ids, size_t n,
                            unsigned flags, char *buf, size_t cap, size_t *n_out);

/* Streaming detokenizer: push ids one at a time, get back only complete UTF-8. An incomplete
 * multi-byte sequence at the end is held back until it completes; a byte that can never be
 * part of valid UTF-8 comes out as U+FFFD. SPM's leading space is removed as in
 * tern_detokenize. The tokenizer must outlive it. Caller frees with tern_detokenizer_free(). */
TERN_NODISCARD tern_status tern_detokenizer_create(const struct tern_tokenizer *t, unsigned flags,
                                    struct tern_detokenizer **out);
void tern_detokenizer_free(struct tern_detokenizer *d);
/* Preserved tokens (llama-server's "preserved_tokens"): the control tokens ids[0..n) are shown
 * as their text although d was created without TERN_PIECE_SPECIAL; other control tokens stay
 * empty. For a tool-call format whose markup is a control token of the vocabulary
 * (tern_toolcall_preserved_tokens: Mistral's [TOOL_CALLS], Llama 3.1's <|python_tag|>), so the
 * tool-call parser sees it. Replaces the previous set (n = 0 clears it); reset does not clear
 * it. At most TERN_MAX_PRESERVED ids (else TERN_ERR_RANGE), each inside the vocabulary (else
 * TERN_ERR_ARG; nothing changes on an error). Ids that are not control tokens are shown anyway.
 * Copied into d: no allocation here or per token. */
#define TERN_MAX_PRESERVED 16
TERN_NODISCARD tern_status tern_detokenizer_preserve(struct tern_detokenizer *d, const int32_t *ids, size_t n);
void tern_detokenizer_reset(struct tern_detokenizer *d);
/* *text points into d (valid until the next call on d); *len may be 0. No allocation. */
TERN_NODISCARD tern_status tern_detokenizer_push(struct tern_detokenizer *d, int32_t id, const char **text,
                                  size_t *len);
/* Whatever is held back (as U+FFFD per incomplete sequence), then reset. */
TERN_NODISCARD tern_status tern_detokenizer_flush(struct tern_detokenizer *d, const char **text, size_t *len);

/* What the fast paths did since load (word cache). */
struct tern_tokenizer_stats {
    uint64_t cache_hits, cache_misses, cache_resets;
};
void tern_tokenizer_get_stats(const struct tern_tokenizer *t, struct tern_tokenizer_stats *out);

/* ===================================================================== chat templates */
/* Chat templates are the Jinja programs models ship (GGUF key tokenizer.chat_template). tern
 * renders them byte for byte as Hugging Face transformers' apply_chat_template does (Jinja2 3.1,
 * trim_blocks + lstrip_blocks, json.dumps-style tojson); docs/tools.md "Chat templates and tool calls"
 * lists the supported Jinja subset. Conversations are passed as JSON text, read as Python's
 * json.loads reads them (1 stays an int, 1.0 a float). Errors name where the problem is: the
 * JSON path or byte offset ("messages[1].role: expected a string, got a number"), or the
 * template's line:col and Python exception kind ("line 3:5: TemplateError: System role not
 * supported").
 *
 *     struct tern_chat_template *t;
 *     tern_chat_template_create(src, strlen(src), &t);       // or tern_chat_template_from_gguf
 *     struct tern_chat_params p = tern_chat_default_params();
 *     p.messages_json = "[{\"role\": \"user\", \"content\": \"Hi\"}]";
 *     char *prompt; size_t len;
 *     if (tern_chat_render(t, &p, &prompt, &len) == TERN_OK) {  // free(prompt) when done
 *         ...
 *         free(prompt);
 *     } else fprintf(stderr, "%s\n", tern_last_error());
 *     tern_chat_template_free(t);
 */
struct tern_chat_template;

struct tern_chat_params {
    /* JSON text: an array of OpenAI-style messages {"role", "content", "tool_calls",
     * "tool_call_id", "name"}, or an object holding that array under "messages" (an OpenAI
     * request body: its "tools" are used too, its other keys ignored). Required. Each *_len is
     * the text's length in bytes; 0 = NUL-terminated. Not kept after the call.
     * - "content" is a string, null, or an array of OpenAI content parts. Text parts
     *   ({"type": "text", "text": ...}) reach templates that read parts as they are; for the
     *   others (most: they expect a string) their texts are concatenated into one string. Other
     *   part types (images, audio) are refused naming the part ("messages[2].content[1].type").
     * - tool_calls[].function.arguments may be an object or a string; templates differ in
     *   what they expect, so it is passed as given. */
    const char *messages_json;
    size_t messages_len;
    /* JSON array of OpenAI function tools ({"type": "function", "function": {"name", ...}}),
     * or NULL: then `tools` is undefined in the template (unless messages_json is an object
     * with "tools"). A template that never mentions `tools` refuses them (TERN_ERR_UNSUPPORTED)
     * rather than render a prompt that silently lacks them. */
    const char *tools_json;
    size_t tools_len;
    bool add_generation_prompt;      /* default true */
    /* NULL = the template's own (from the GGUF) or "" for templates made from text. */
    const char *bos_token;
    const char *eos_token;
    /* strftime_now(): TERN_CHAT_NOW_CLOCK (the default) = the clock (local time, as
     * transformers); any other value is that Unix time, formatted in UTC (reproducible tests;
     * 0 is 1970-01-01 00:00:00). */
#define TERN_CHAT_NOW_CLOCK INT64_MIN
    int64_t now_unix;
    /* JSON object of additional template variables ({"enable_thinking": false}), or NULL. */
    const char *extra_vars_json;
    size_t extra_vars_len;
};
struct tern_chat_params tern_chat_default_params(void);

/* Check p's JSON texts exactly as tern_chat_render does, without a template: syntax (byte offset
 * and line:col), then the shape of messages, tools and extra variables (JSON path). Returns
 * TERN_ERR_FORMAT with the message tern_chat_render would give; lets a front end refuse a bad
 * conversation before it loads a model. */
TERN_NODISCARD tern_status tern_chat_validate(const struct tern_chat_params *p);

/* Compile template source (len bytes). Syntax errors give TERN_ERR_FORMAT with line:col.
 * Caller frees with tern_chat_template_free(). */
TERN_NODISCARD tern_status tern_chat_template_create(const char *source, size_t len,
                                      struct tern_chat_template **out);
/* The model's own template (tokenizer.chat_template) with bos/eos text taken from
 * tokenizer.ggml.tokens[tokenizer.ggml.bos_token_id / eos_token_id]. A GGUF without a template
 * gets Qwen2.5's (ChatML, plus Hermes-style tool calls when tools are given) and a warning
 * (tern_chat_template_warning). The template does not keep g. */
TERN_NODISCARD tern_status tern_chat_template_from_gguf(const struct tern_gguf *g, struct tern_chat_template **out);
void tern_chat_template_free(struct tern_chat_template *t);
/* NUL-terminated template source, owned by t. */
const char *tern_chat_template_source(const struct tern_chat_template *t);
/* A note for the user (e.g. "no tokenizer.chat_template, using ChatML"), or NULL. Owned by t. */
const char *tern_chat_template_warning(const struct tern_chat_template *t);
/* Render. On success *out is a malloc'ed NUL-terminated string of *out_len bytes (a template
 * can emit NUL bytes itself: trust *out_len) that the caller frees with free(). Bad JSON or
 * malformed messages give TERN_ERR_FORMAT as tern_chat_validate describes; tools for a
 * template that has no use for them give TERN_ERR_UNSUPPORTED; template failures
 * (raise_exception, undefined attribute use, type errors, integers beyond 64 bits) give
 * TERN_ERR_FORMAT with line:col, and runaway templates (endless loops, runaway recursion or
 * output) are stopped with an error too. A template may be rendered from several threads at
 * once. */
TERN_NODISCARD tern_status tern_chat_render(const struct tern_chat_template *t, const struct tern_chat_params *p,
                             char **out, size_t *out_len);
/* Tokenizer flags for a prompt tern_chat_render wrote: control tokens parsed, and the BOS added
 * as the metadata says unless the template already wrote the BOS text itself (most do). */
unsigned tern_chat_prompt_flags(const struct tern_tokenizer *tok, const char *prompt, size_t len);
/* Markup and content. A prompt mixes the template's own markup (<|im_start|>, role headers)
 * with the caller's content (message text, tool results, tool calls' arguments, tool
 * definitions, extra variables). Tokenized as one text with TERN_TOK_PARSE_SPECIAL, content
 * that spells a control token would become that token and could forge a turn; so
 * tern_chat_render_spans also says which bytes are markup, and tern_chat_tokenize recognizes
 * control tokens only there. Markup is what the template wrote from its own source: literal
 * text and string literals, bos_token / eos_token, and strings joined from them with + or ~,
 * macro output and {% set %} blocks (keeping each part's origin); anything computed by a filter
 * or method is content, so a template that builds a control token that way gets its text.
 *
 * tern_chat_render, plus the markup of the prompt: *spans (malloc'ed, the caller frees; NULL
 * when *n_spans is 0) are sorted, disjoint byte ranges of *out. */
struct tern_text_span {
    size_t off, len; /* text[off .. off + len) */
};
TERN_NODISCARD tern_status tern_chat_render_spans(const struct tern_chat_template *t, const struct tern_chat_params *p,
                                   char **out, size_t *out_len, struct tern_text_span **spans,
                                   size_t *n_spans);
/* The ids of a prompt tern_chat_render_spans wrote: tern_chat_prompt_flags's flags, control
 * tokens recognized only inside spans; into *ids grown as
 * tern_tokenize_grow does. Where content holds no control token's text the ids are those of
 * tern_tokenize(prompt, tern_chat_prompt_flags(...)). */
TERN_NODISCARD tern_status tern_chat_tokenize(struct tern_tokenizer *tok, const char *prompt, size_t len,
                               const struct tern_text_span *spans, size_t n_spans, int32_t **ids,
                               size_t *cap, size_t *n_out);

/* --- tool calls in model output (src/chat/toolcall.c) ---
 * A streaming parser: feed generated text in pieces split anywhere (mid-tag, mid-UTF-8); it
 * separates ordinary content from tool calls and says, in the feed that completes one, that a
 * valid call is available. Any split gives the same result. Only the markup and JSON of valid
 * calls are removed from the content: a malformed call's raw text (its markup included) is
 * returned as content and an error is recorded, so output without a valid call comes back as
 * content byte for byte.
 *
 *     struct tern_toolcall_parser *tp;
 *     tern_toolcall_parser_create(tern_toolcall_detect(tern_chat_template_source(t)), &tp);
 *     for each generated piece: { int done; tern_toolcall_feed(tp, piece, n, &done); if (done) ... }
 *     tern_toolcall_finish(tp, &done);
 *     size_t len; const char *content = tern_toolcall_text(tp, &len);
 *     for (int i = 0; i < tern_toolcall_count(tp); i++) use tern_toolcall_get(tp, i)->name ...
 */
enum tern_toolcall_format {
    TERN_TOOLCALL_NONE = 0, /* no tool calls: everything is content */
    TERN_TOOLCALL_HERMES,   /* Hermes / Qwen: <tool_call>{"name": .., "arguments": {..}}</tool_call> (repeatable) */
    TERN_TOOLCALL_LLAMA3,   /* Llama 3.x: {"name": .., "parameters"|"arguments": {..}} at the start of the
                             * reply or after <|python_tag|>; several may follow separated by ';' */
    TERN_TOOLCALL_MISTRAL,  /* Mistral: [TOOL_CALLS][{"name": .., "arguments": {..}, "id": ..}, ...] */
    TERN_TOOLCALL_QWEN_XML, /* Qwen3.5 / Qwen3-Coder: <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE
                             * \n</parameter>\n ... </function>\n</tool_call>; VALUE is raw text for string
                             * parameters, JSON for the others (tern_toolcall_set_tools gives the types) */
    TERN_TOOLCALL_GEMMA4,   /* Gemma 4: <|tool_call>call:NAME{key:value,...}<tool_call|>, strings written
                             * <|"|>text<|"|>, keys bare, numbers/true/false/null/[..]/{..} as in JSON */
    TERN_TOOLCALL_GRANITE,  /* Granite 3.x: <|tool_call|>[{"name": .., "arguments": {..}}, ...] */
};
/* The control tokens a format's markup is made of in tok's vocabulary (llama-server's
 * "preserved tokens"): each tag the parser reads (HERMES / QWEN_XML <tool_call> </tool_call>,
 * LLAMA3 <|python_tag|>, MISTRAL [TOOL_CALLS], GEMMA4 <|tool_call> <tool_call|> <|"|>, GRANITE
 * <|tool_call|>) that tern_token_control_id finds as one control token. A detokenizer must
 * show them (tern_detokenizer_preserve, tern_gen_params.preserve) or the parser never sees
 * those calls. Writes up to cap ids and returns how many there are (at most 3); 0 when every
 * tag is plain text (Qwen2.5's <tool_call> is a user-defined token: shown already). */
int tern_toolcall_preserved_tokens(const struct tern_tokenizer *tok, enum tern_toolcall_format f,
                                   int32_t *ids, int cap);
/* Guess the format a template teaches its model (NONE if it shows no tool-call syntax). */
enum tern_toolcall_format tern_toolcall_detect(const char *template_source);
const char *tern_toolcall_format_name(enum tern_toolcall_format f); /* "hermes", ... */

/* Reasoning ("thinking") the model writes before its answer. The parser can take it apart from
 * the content (tern_toolcall_set_reasoning): it then comes back through tern_toolcall_reasoning,
 * with the surrounding whitespace and the tags removed, and the tool-call parser never sees it
 * (a <tool_call> inside the reasoning is not a call). A reply that ends inside the reasoning
 * (out of tokens) gives the reasoning and empty content. */
enum tern_reasoning_format {
    TERN_REASONING_NONE = 0, /* no reasoning markup: everything is content */
    TERN_REASONING_THINK,    /* <think>...</think> at the start of the reply (Qwen3, Qwen3.5, SmolLM3,
                              * DeepSeek R1, QwQ): llama.cpp's --reasoning-format deepseek */
    TERN_REASONING_GEMMA4,   /* Gemma 4: <|channel>thought\n...<channel|>, anywhere in the reply */
};
/* The reasoning markup a template shows (NONE if none). */
enum tern_reasoning_format tern_reasoning_detect(const char *template_source);
const char *tern_reasoning_format_name(enum tern_reasoning_format f); /* "none", "think", "gemma4" */
/* True when the rendered prompt[0..len) ends inside an opened reasoning block (Qwen3.5's and
 * DeepSeek R1's generation prompts end with "<think>\n"): the reply then starts as reasoning. */
bool tern_reasoning_open_at_end(enum tern_reasoning_format f, const char *prompt, size_t len);

struct tern_toolcall {
    const char *name;      /* NUL-terminated, owned by the parser */
    const char *arguments; /* compact JSON object text, e.g. {"city":"Paris"} */
    const char *id;        /* Mistral "id" when present, else NULL */
};

struct tern_toolcall_parser;
/* Caller frees with tern_toolcall_parser_free(). */
TERN_NODISCARD tern_status tern_toolcall_parser_create(enum tern_toolcall_format f, struct tern_toolcall_parser **out);
void tern_toolcall_parser_free(struct tern_toolcall_parser *p);
/* Before the first feed: take reasoning in format f apart from the content; starts_open = the
 * prompt left the block open (tern_reasoning_open_at_end). TERN_ERR_ARG after a feed. */
TERN_NODISCARD tern_status tern_toolcall_set_reasoning(struct tern_toolcall_parser *p, enum tern_reasoning_format f,
                                        bool starts_open);
/* Before the first feed, optional: the OpenAI tools array (JSON text) the calls are made against.
 * Formats that write parameter values without JSON types (TERN_TOOLCALL_QWEN_XML) use the
 * parameters' schemas to type them: "42" stays a string for a string parameter and becomes 42
 * for an integer one (without a schema a value that reads as JSON is JSON). Bad JSON gives
 * TERN_ERR_FORMAT; tools it cannot use are ignored. */
TERN_NODISCARD tern_status tern_toolcall_set_tools(struct tern_toolcall_parser *p, const char *tools_json, size_t len);
/* Feed n bytes. *n_completed (may be NULL) = calls completed by this piece. Fails only on
 * TERN_ERR_NOMEM or after finish. */
TERN_NODISCARD tern_status tern_toolcall_feed(struct tern_toolcall_parser *p, const char *piece, size_t n,
                               int *n_completed);
/* End of generation: held-back text is released; an unterminated call becomes content plus
 * an error (a Hermes call whose JSON is complete but lacks </tool_call> is accepted). */
TERN_NODISCARD tern_status tern_toolcall_finish(struct tern_toolcall_parser *p, int *n_completed);
/* End of a generation that was cut short (max_tokens, a full context, a time limit): like
 * tern_toolcall_finish, but a call the cut left open (its opener, its unterminated JSON, a
 * tail that could have been the start of its opener) is dropped, with an error recorded,
 * instead of becoming content: no call markup reaches the content. */
TERN_NODISCARD tern_status tern_toolcall_finish_cut(struct tern_toolcall_parser *p, int *n_completed);
/* All content (non-call text) so far, NUL-terminated; text that might still turn into a call
 * is held back until it is decided. Valid until the next feed/finish. */
const char *tern_toolcall_text(const struct tern_toolcall_parser *p, size_t *len);
/* The reasoning so far (tern_toolcall_set_reasoning), NUL-terminated, "" if none; grows as text
 * is decided (whitespace that may end it is held back). Valid until the next feed/finish. */
const char *tern_toolcall_reasoning(const struct tern_toolcall_parser *p, size_t *len);
int tern_toolcall_count(const struct tern_toolcall_parser *p);
const struct tern_toolcall *tern_toolcall_get(const struct tern_toolcall_parser *p, int i);
/* Malformed calls seen so far, each with a message naming the problem and its byte offset in
 * the generated text. */
int tern_toolcall_n_errors(const struct tern_toolcall_parser *p);
const char *tern_toolcall_error(const struct tern_toolcall_parser *p, int i);


#ifdef __cplusplus
}
#endif
#endif /* TERN_H */

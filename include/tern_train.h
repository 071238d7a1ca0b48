/*
 * tern_train.h — libtern_train: training models and LoRA adapters from scratch or from a GGUF,
 * distillation from a teacher, the synthetic tool-calling corpus and the byte-level BPE
 * tokenizer trainer (src/train, src/corpus). Built on libtern (tern.h); its tokenizer, chat
 * templates and models are the ones training reads and writes.
 */
#ifndef TERN_TRAIN_H
#define TERN_TRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== training */
/*
 * tern train: a Llama/Qwen2 model trained from scratch in F32 on the CPU, exported as GGUF.
 *
 *     struct tern_train_config c;
 *     tern_train_config_parse(json_text, len, &c);           // or tern_train_config_default()
 *     struct tern_train_data *d;
 *     tern_train_data_open("chats.tdat", &d);                // (token ids, loss mask) sequences
 *     struct tern_trainer *t;
 *     tern_trainer_create(&c, &t);                           // all memory allocated here, once
 *     tern_trainer_init(t);                                  // seeded weights (or _checkpoint_load)
 *     struct tern_train_step_info si;
 *     while (tern_trainer_step_index(t) < c.steps) {
 *         tern_trainer_step(t, d, &si);                      // accum micro-batches + one AdamW step
 *         if (si.step % c.ckpt_every == 0) tern_trainer_checkpoint_save(t, "ckpt");
 *     }
 *     tern_trainer_export(t, "model.gguf");                  // F32 GGUF + the tokenizer's keys
 *
 * Data: a document is a sequence of token ids with a loss mask (1 = train on predicting this
 * token: the assistant's tokens). Documents are packed into sequences of n_ctx tokens in a
 * seeded order (reshuffled every epoch); a document attends only to itself and its positions
 * start at 0; a document longer than n_ctx is cut into n_ctx pieces; the tail of a sequence
 * that no next document fits into is padding (masked). The loss of a step is the mean
 * cross-entropy over the masked tokens of all its micro-batches.
 *
 * Determinism: the same config (seed, threads) and data give bit-identical weights, and a run
 * resumed from a checkpoint continues exactly as the uninterrupted run would have.
 */

/* --- data file (.tdat, little-endian): "TRND", u32 version 1, u64 n_docs, u64 n_tokens,
 * u64 offsets[n_docs + 1] (token index of each document's start; offsets[0] = 0,
 * offsets[n_docs] = n_tokens, non-decreasing), i32 tokens[n_tokens], u8 mask[n_tokens]:
 * 0 = not trained on, 1 = trained on, 2..255 = trained on, token (mask - 2) of an answer that
 * calls tools which its tools' schemas validate (255: token 253 or later; set when rendering
 * with tern_train_render_params.call_valid; the early tool-call loss weighs them). --- */
struct tern_train_data_writer;
/* Collects documents in memory; caller ends with _finish (writes path atomically) or _free. */
TERN_NODISCARD tern_status tern_train_data_writer_create(struct tern_train_data_writer **out);
/* mask may be NULL (every token trained on). n >= 1. */
TERN_NODISCARD tern_status tern_train_data_add(struct tern_train_data_writer *w, const int32_t *tokens,
                                const uint8_t *mask, int n);
/* Write via path.tmp + fsync + rename. The writer stays valid (free it after). */
TERN_NODISCARD tern_status tern_train_data_write(struct tern_train_data_writer *w, const char *path);
void tern_train_data_writer_free(struct tern_train_data_writer *w);

struct tern_train_data;
/* Read and validate a .tdat file (messages name the byte offset or document that is wrong).
 * Caller frees with tern_train_data_free(). */
TERN_NODISCARD tern_status tern_train_data_open(const char *path, struct tern_train_data **out);
/* The same from size bytes at data (copied). */
TERN_NODISCARD tern_status tern_train_data_open_memory(const void *data, size_t size, struct tern_train_data **out);
void tern_train_data_free(struct tern_train_data *d);
/* The writer's documents as data, without a file (refused like a file when it holds none). */
TERN_NODISCARD tern_status tern_train_data_from_writer(const struct tern_train_data_writer *w,
                                       struct tern_train_data **out);

/* --- conversations -> documents (src/train/train_render.c) ---
 * Each line of a .jsonl file is one conversation ({"messages": [...], "tools": [...]}, OpenAI
 * format; other keys ignored) rendered with the model's chat template and tokenized with its
 * tokenizer, the loss mask set on the assistant's turns: a turn is what the template adds for
 * assistant message i beyond the prompt it renders for messages[0..i) with the generation
 * prompt, tokenized on its own as inference would generate it, trained on up to and including
 * its first end-of-generation token. A template that rewrites earlier turns when later ones
 * are added (so no prompt is a prefix of the conversation) is refused, naming the message. */
struct tern_train_render_params {
    int max_tokens;     /* conversations longer are skipped (counted in too_long); 0 = no limit */
    bool strict;        /* a malformed line fails the call (else it is skipped and counted) */
    int64_t now_unix;   /* strftime_now() for templates (default 0: reproducible documents) */
    bool loss_on_prompt;/* train on the prompt's tokens too (system, user, tool results: language
                           modelling of the whole conversation); default false: the turns only */
    /* When set: an assistant turn with "tool_calls", every one of which validates (this
     * function: e.g. tern_eval_call_valid, the validator of the scores), is marked in the mask
     * (bytes 2.., see the data file) so the early tool-call loss can find it. NULL: masks 0/1. */
    bool (*call_valid)(const char *tools_json, const char *name, const char *arguments, void *user);
    void *call_valid_user;
    /* When set: called with the file line (1-based, blank lines counted, as FILE:LINE messages
     * and tern_eval_cases_from_corpus's case ids count them) of each document added, in order,
     * so a caller can tie documents back to conversations (tern distill's length-aware KD). */
    void (*on_doc)(int64_t line, void *user);
    void *on_doc_user;
};
struct tern_train_render_params tern_train_render_default_params(void);
struct tern_train_render_report { /* accumulated over calls: zero it first */
    int64_t lines;              /* non-empty lines read */
    int64_t docs;               /* documents added */
    int64_t malformed;          /* skipped: bad JSON, bad messages, a render error */
    int64_t no_assistant;       /* skipped: nothing to train on */
    int64_t too_long;           /* skipped: more than max_tokens */
    uint64_t tokens, loss_tokens;
    int64_t tool_turns;         /* turns marked as validated tool calls (call_valid set) */
    char first_problem[512];    /* "FILE:LINE: what" of the first skipped line, or "" */
};
/* Add every conversation of path to w. Errors (I/O, a strict malformed line, a template that is
 * not prefix-stable) name FILE:LINE; so does a file none of whose lines gives a document (the
 * counts and the first skipped line said). report may be NULL. */
TERN_NODISCARD tern_status tern_train_data_add_jsonl(struct tern_train_data_writer *w, struct tern_tokenizer *tok,
                                      const struct tern_chat_template *tmpl, const char *path,
                                      const struct tern_train_render_params *p,
                                      struct tern_train_render_report *report);
uint64_t tern_train_data_n_docs(const struct tern_train_data *d);
uint64_t tern_train_data_n_tokens(const struct tern_train_data *d);
/* Every document's tokens, one after another (n_tokens of them), and their loss mask (the file
 * format's bytes, 0 = not trained on) into *mask when mask is not NULL; owned by d. */
const int32_t *tern_train_data_tokens(const struct tern_train_data *d, const uint8_t **mask);

/* --- configuration (JSON keys have the field names; tern_train_config_parse) --- */
struct tern_train_config {
    enum tern_arch arch;     /* "arch": "llama" (NORM RoPE) | "qwen2" (NEOX RoPE, q/k/v biases) */
    int n_embd, n_layer, n_head, n_head_kv, n_ff;
    int n_ctx;               /* sequence length of training */
    int n_vocab;             /* taken from "tokenizer" when that is given */
    float rope_base;         /* "rope_base" */
    float rms_eps;
    bool tied_output;        /* "tied_output": logits use token_embd */
    char tokenizer[1024];    /* "tokenizer": a GGUF whose tokenizer.* keys the export copies */
    float lr, lr_min;        /* peak and final learning rate (cosine from peak to lr_min) */
    int warmup;              /* linear warmup steps */
    int steps;               /* optimizer steps of the whole run */
    int batch_tokens;        /* tokens per micro-batch (a multiple of n_ctx) */
    int accum;               /* micro-batches per optimizer step (gradient accumulation) */
    float weight_decay;      /* AdamW, on matrices only (not norms, biases) */
    float beta1, beta2, adam_eps;
    float clip;              /* global gradient norm limit; 0 = off */
    float init_std;          /* weights ~ N(0, init_std) */
    float init_std_proj;     /* attn_output and ffn_down ~ N(0, init_std_proj); < 0 = init_std.
                              * GPT-2's init_std / sqrt(2 n_layer) delays copying (induction
                              * heads) by hundreds of steps on tool-call data:
                              * docs/train-and-distill.md */
    uint64_t seed;
    int threads;             /* 0 = online CPUs */
    int ckpt_every;          /* checkpoint every N steps (tern train); 0 = only at the end */
    bool matmul_bf16;        /* "matmul": "bf16": every matrix product (linear layers, attention)
                              * rounds its operands to BF16 and sums in F32 (vdpbf16ps, about 1.5x
                              * the F32 GEMM; needs AVX512-BF16); weights, gradients, optimizer,
                              * norms, softmax and loss stay F32. Default "f32".
                              * docs/train-and-distill.md */
    /* LoRA (the QLoRA recipe; "lora": {"base", "rank", "alpha", "dropout", "targets"}): with
     * lora_rank > 0 the model is lora_base (a GGUF: llama or qwen2 as the trainer models them),
     * frozen in its own tensor types (each matrix dequantized tile by tile inside the products,
     * never held whole in F32), and only adapters are trained: every targeted matrix W computes
     * W x + (alpha / rank) B A dropout(x) (PEFT's convention: A (rank, n_in) ~ U(+-1/sqrt(n_in)),
     * B (n_out, rank) = 0). The shape keys come from the base; tokenizer defaults to it. The
     * export writes an adapter GGUF in llama.cpp's format (tern_lora_write). */
    char lora_base[1024];
    int lora_rank;           /* 0 = full training */
    float lora_alpha;        /* default = 2 * rank */
    float lora_dropout;      /* on the adapters' input, training steps only; default 0 */
    unsigned lora_targets;   /* bit i = TERN_LORA_Q.. (default: all seven) */
    char chat_template_file[1024]; /* "chat_template_file": renders .jsonl data instead of the
                                      tokenizer GGUF's template; the adapter export carries it */
};
/* The matrices of a layer LoRA can adapt (bits of tern_train_config.lora_targets), in the order
 * of their names "q", "k", "v", "o", "gate", "up", "down". */
enum { TERN_LORA_Q, TERN_LORA_K, TERN_LORA_V, TERN_LORA_O, TERN_LORA_GATE, TERN_LORA_UP,
       TERN_LORA_DOWN, TERN_LORA_N_TARGETS };
/* "q,k,v,o,gate,up,down" (any subset, comma-separated, or "all") -> bits; unknown names fail
 * naming them. */
TERN_NODISCARD tern_status tern_lora_targets_parse(const char *list, unsigned *out);
/* Make c a LoRA run on the GGUF at base: the shape keys (arch .. tied_output) from it, the
 * tokenizer too unless c names another; rank 16, alpha 2 x rank and all seven targets unless c
 * sets them. A base the trainer cannot model is refused naming what differs. */
TERN_NODISCARD tern_status tern_train_config_set_lora(struct tern_train_config *c, const char *base);
struct tern_train_config tern_train_config_default(void);
/* Parse a JSON config over the defaults. Unknown keys, wrong types and bad values fail with a
 * message naming the key. The tokenizer GGUF (if given) is opened to read n_vocab. */
TERN_NODISCARD tern_status tern_train_config_parse(const char *json, size_t len, struct tern_train_config *out);
/* The same over the values of start instead of the defaults (e.g. a config made a LoRA run by
 * tern_train_config_set_lora first: the file then needs no shape or tokenizer keys). */
TERN_NODISCARD tern_status tern_train_config_parse_over(const char *json, size_t len,
                                         const struct tern_train_config *start,
                                         struct tern_train_config *out);

/* --- trainer --- */
struct tern_trainer;
struct tern_train_step_info {
    int step;                /* 1-based index of the step just taken */
    double loss;             /* mean masked cross-entropy of the step */
    double lr;               /* learning rate used */
    double grad_norm;        /* global norm before clipping */
    long long tokens;        /* tokens in the step (padding included) */
    long long loss_tokens;   /* tokens the loss was taken on */
    /* distillation steps (tern_trainer_step_distill) only; 0 otherwise: */
    double kl;               /* mean KL(teacher top-k at tau || student at tau) */
    double ce;               /* mean cross-entropy on the data */
    double agree;            /* share of trained tokens where the student's argmax is the teacher's top-1 */
    bool qat;                /* the forward pass fake-quantized the weights */
    double early_tool_ramp;  /* the early tool-call loss's ramp (0..1; 0 when it is off) */
};
/* Bytes the trainer will allocate for config c (weights, gradients, AdamW moments,
 * activations of one micro-batch, scratch). */
uint64_t tern_train_memory_bytes(const struct tern_train_config *c);
/* Allocates everything (refused with TERN_ERR_NOMEM, naming the bytes needed, when that
 * exceeds the machine's available memory). Caller frees with tern_trainer_free(). */
TERN_NODISCARD tern_status tern_trainer_create(const struct tern_train_config *c, struct tern_trainer **out);
void tern_trainer_free(struct tern_trainer *t);
/* Seeded initial weights; step 0; data position at the start. */
TERN_NODISCARD tern_status tern_trainer_init(struct tern_trainer *t);
/* One optimizer step on the next accum micro-batches of d. A NaN/Inf loss or gradient fails
 * with TERN_ERR_RANGE naming the step, leaving weights and optimizer state unchanged. */
TERN_NODISCARD tern_status tern_trainer_step(struct tern_trainer *t, const struct tern_train_data *d,
                              struct tern_train_step_info *info);
int tern_trainer_step_index(const struct tern_trainer *t);
/* Mean masked cross-entropy on every document of d in file order (forward only: weights,
 * optimizer state and the training data position are untouched). loss_tokens may be NULL. */
TERN_NODISCARD tern_status tern_trainer_eval(struct tern_trainer *t, const struct tern_train_data *d, double *loss,
                              long long *loss_tokens);
/* Learning rate of (1-based) step s: linear warmup, then cosine down to lr_min. */
double tern_train_lr(const struct tern_train_config *c, int step);
/* Save weights, AdamW moments, step, RNG and data position as dir/checkpoint.bin (dir created
 * if needed; written to a temporary name, fsynced, renamed). */
TERN_NODISCARD tern_status tern_trainer_checkpoint_save(const struct tern_trainer *t, const char *dir);
/* A LoRA run starts from an adapter file's A and B (tern train --lora-init: continue training
 * an adapter with fresh optimizer state); its alpha, rank and targets must be the run's. */
TERN_NODISCARD tern_status tern_trainer_load_adapter(struct tern_trainer *t, const char *path);
/* Restore a checkpoint of a run with the same model shape. */
TERN_NODISCARD tern_status tern_trainer_checkpoint_load(struct tern_trainer *t, const char *dir);
/* Write the weights as an F32 GGUF tern_model_load reads (with every tokenizer.* key of the
 * config's tokenizer GGUF, when it has one). */
TERN_NODISCARD tern_status tern_trainer_export(const struct tern_trainer *t, const char *path);
/* The weights as one flat F32 array (owned by the trainer) and its tensors in order: name,
 * offset (floats) and shape (ne0 = columns). i in [0, tern_trainer_n_tensors). */
float *tern_trainer_weights(struct tern_trainer *t, size_t *n_floats);
int tern_trainer_n_tensors(const struct tern_trainer *t);
const char *tern_trainer_tensor(const struct tern_trainer *t, int i, size_t *offset, int64_t ne[2]);
/* Data parallelism (tern train / tern distill under mpirun): `size` processes run the same
 * trainer on the same data; each fills every micro-batch of a step (the order is the same
 * everywhere) but runs forward and backward only on micro-batches i with i % size == rank.
 * allreduce must sum n values (float when is_double is false, else double) in place across all
 * processes and return false on failure; it is called with the gradient and with the step's
 * loss sums, so every process takes the same AdamW step a single process computing all
 * micro-batches would, up to the order of the float additions. accum should be a multiple of
 * size (otherwise some processes idle). */
typedef bool (*tern_allreduce_fn)(void *user, void *buf, size_t n, bool is_double);
TERN_NODISCARD tern_status tern_trainer_set_parallel(struct tern_trainer *t, int rank, int size,
                                      tern_allreduce_fn allreduce, void *user);
/* A string metadata entry the export writes (key and value copied; setting a key again replaces
 * it). tern distill records its run this way: "tern.distill.*" fingerprints and recipe. */
TERN_NODISCARD tern_status tern_trainer_set_export_str(struct tern_trainer *t, const char *key, const char *value);
/* Which GEMM microkernel the trainer runs ("avx512", "avx2", "scalar", "avx512-bf16"). */
const char *tern_trainer_kernel(const struct tern_trainer *t);

/* ===================================================================== distillation */
/*
 * tern distill: a student trained to match a teacher (any GGUF tern runs) on top of tern's
 * trainer. The teacher's signal is computed once by tern's own inference and cached on disk:
 *
 *     struct tern_distill_recipe r = tern_distill_recipe_default();   // or _parse(json, ...)
 *     struct tern_distill_cache_params cp = tern_distill_cache_default_params();
 *     cp.top_k = r.top_k; cp.temperature = r.temperature; cp.n_ctx = c.n_ctx; cp.n_vocab = c.n_vocab;
 *     struct tern_distill_cache *kd;
 *     tern_distill_cache_ensure(teacher, data, &cp, "train.kd", false, &kd, NULL);
 *     tern_trainer_set_distill(t, &r);
 *     tern_trainer_step_distill(t, data, kd, &si);      // KL to the teacher + CE on the data
 *
 * Teacher signal: for every position of the data whose next token is trained on (the loss mask,
 * after cutting documents into n_ctx pieces exactly as the trainer does), the teacher's
 * distribution at temperature tau over the student's vocabulary, kept as its top_k token ids
 * (by descending probability, ties to the lower id) with their log-probabilities and the mass
 * of all other tokens (the tail). Loss per trained token, averaged over the step's trained
 * tokens: kd_weight * tau^2 * KL(q || p_tau) + ce_weight * CE(target), where q is the teacher's
 * top-k distribution with the tail as one more outcome and p_tau the student's softmax at tau
 * bucketed the same way (its tail = its mass outside the teacher's top-k ids).
 *
 * Cache file (.kd, little-endian): "TKDC", u32 version 1, u32 top_k, u32 n_vocab, f32
 * temperature, u32 n_ctx, u64 n_docs, u64 n_entries, u8[32] teacher fingerprint
 * (tern_model_fingerprint), u8[32] data fingerprint (tern_train_data_fingerprint), u8[32]
 * SHA-256 of the rest of the file; then u64 doc_first[n_docs + 1] (first entry of each
 * document), then n_entries entries of {i32 id[top_k], f32 logp[top_k], f32 tail}.
 */
struct tern_distill_recipe {
    int top_k;              /* "top_k": teacher ids kept per position (default 32) */
    float temperature;      /* "temperature": tau of the KL term (default 1) */
    float kd_weight;        /* "kd_weight": weight of tau^2 * KL (default 1) */
    float ce_weight;        /* "ce_weight": weight of the data's cross-entropy (default 0.5) */
    float qat_start;        /* "qat_start": fraction of the steps after which the forward pass
                               fake-quantizes the weights (default 1 = no QAT) */
    char qat_type[16];      /* "qat_type": the export format the forward pass rounds to: "q8_0"
                               (default), "q4_0", or any type of tern quantize (per-tensor types
                               and fallbacks as tern quantize picks them) */
    float qat_lr_scale;     /* "qat_lr_scale": the learning rate is multiplied by this during QAT
                               (default 0.1) */
    /* The latency-aware losses (docs/train-and-distill.md "Distillation"): */
    float early_tool_weight;/* "early_tool_weight": the first early_tool_n tokens of an answer that
                               should call a tool (the data's answer is a call that validates
                               against its tools' schemas, marked in the mask, see the data file)
                               weigh 1 + this x ramp (default 0 = off) */
    int early_tool_n;       /* "early_tool_n": how many of an answer's first tokens (default 25) */
    float early_tool_warmup_epochs; /* "early_tool_warmup_epochs": the ramp grows linearly from 0
                               to 1 over this many passes over the data (default 1; 0 = at once) */
    /* Length-aware KD (tern distill mines it: the student answers training prompts, see
     * tern_length_kd_weight): a document whose answer came out longer than the teacher's by more
     * than the hinge while leaving a required argument out weighs more in KD + CE. */
    float length_kd_weight; /* "length_kd_weight": the penalty's weight (default 0 = off) */
    float length_kd_hinge;  /* "length_kd_hinge": excess length (relative) forgiven (default 0.15) */
    float length_kd_slope;  /* "length_kd_slope": weight per unit of excess past the hinge (1) */
    int length_kd_every;    /* "length_kd_every": steps between minings (default 100) */
    int length_kd_docs;     /* "length_kd_docs": at most this many answers per mining (default 0:
                               every tool-calling answer of the documents the next
                               length_kd_every steps will train on) */
    /* The safety rail: at a validation whose CE exceeds the best so far by more than this
     * fraction, the latency weights (early tool-call and length-aware) are halved; they double
     * back, up to full, once it is within again (default 0.05; 0 = no rail). */
    float rail_ce_rise;
    /* Length buckets (docs/train-and-distill.md "Distillation"; off when n_buckets is 0): each
     * micro-batch is drawn from one bucket of documents (a document belongs to the first bucket
     * whose length it does not exceed, the last one if it exceeds them all), the bucket chosen
     * with this step's weights, a draw from Dirichlet(bucket_alpha x bucket_weight) (fixed weights
     * when bucket_alpha is 0); documents are drawn uniformly within the bucket; validation is also
     * reported per bucket. */
    int n_buckets;          /* "shape_buckets": [512, 1024, 2048, 4096] (or true for these) */
    int bucket_len[8];      /* ascending */
    float bucket_weight[8]; /* "bucket_weights": default 0.4/0.4/0.15/0.05 for four buckets, else
                               equal; normalized */
    float bucket_alpha;     /* "bucket_alpha": the Dirichlet concentration (default 100) */
    int n_weights;          /* entries "bucket_weights" gave (0: the defaults); parsing only */
};
struct tern_distill_recipe tern_distill_recipe_default(void);
/* Parse a recipe: one flat JSON object with the keys above plus the training keys of
 * tern_train_config that are not the model's shape (lr, lr_min, warmup, steps, batch_tokens,
 * accum, weight_decay, beta1, beta2, adam_eps, clip, seed, threads, ckpt_every, n_ctx), which are
 * applied over *train (may be NULL: then training keys are refused). Unknown keys, wrong types
 * and bad values fail naming the key. */
TERN_NODISCARD tern_status tern_distill_recipe_parse(const char *json, size_t len, struct tern_distill_recipe *out,
                                      struct tern_train_config *train);

/* SHA-256 of the documents of d (their offsets, tokens and loss masks): what the teacher saw. */
void tern_train_data_fingerprint(const struct tern_train_data *d, uint8_t out[32]);

struct tern_distill_cache_params {
    int top_k;              /* 1 .. 1024 */
    float temperature;      /* > 0 */
    int n_ctx;              /* the student's n_ctx: documents are cut into pieces this long */
    int n_vocab;            /* the student's vocabulary: the teacher's distribution is taken over
                               ids < n_vocab (a teacher with a padded, larger output is fine) */
    int n_threads;          /* teacher inference threads (0 = online CPUs) */
    void (*progress)(void *user, uint64_t docs_done, uint64_t n_docs); /* may be NULL */
    void *user;
};
struct tern_distill_cache_params tern_distill_cache_default_params(void);

struct tern_distill_cache;
/* Run the teacher over every document of d (each n_ctx piece decoded from position 0, as the
 * student sees it) and write the cache to path (path.tmp, fsync, rename). A teacher logit that
 * is not finite fails naming the document and position. */
TERN_NODISCARD tern_status tern_distill_cache_build(struct tern_model *teacher, const struct tern_train_data *d,
                                     const struct tern_distill_cache_params *p, const char *path);
/* Map and validate a cache file: every refusal (truncated, damaged, out-of-range values,
 * checksum) is TERN_ERR_FORMAT naming the file and byte offset. Caller frees with
 * tern_distill_cache_free(). */
TERN_NODISCARD tern_status tern_distill_cache_open(const char *path, struct tern_distill_cache **out);
/* The same over size bytes at data (copied). */
TERN_NODISCARD tern_status tern_distill_cache_open_memory(const void *data, size_t size,
                                           struct tern_distill_cache **out);
void tern_distill_cache_free(struct tern_distill_cache *c);
/* Is c the teacher signal of (teacher_fp, d, p)? TERN_ERR_ARG naming what differs (teacher or
 * data fingerprint, top_k, temperature, n_ctx, n_vocab, a document's position count). */
TERN_NODISCARD tern_status tern_distill_cache_check(const struct tern_distill_cache *c, const uint8_t teacher_fp[32],
                                     const struct tern_train_data *d,
                                     const struct tern_distill_cache_params *p);
/* Open path when it holds this teacher's signal for d and p; build it when absent (or, with
 * rebuild, when it does not match); a mismatching cache without rebuild is refused naming what
 * differs. *built (may be NULL) says whether the teacher ran. */
TERN_NODISCARD tern_status tern_distill_cache_ensure(struct tern_model *teacher, const struct tern_train_data *d,
                                      const struct tern_distill_cache_params *p, const char *path,
                                      bool rebuild, struct tern_distill_cache **out, bool *built);
uint64_t tern_distill_cache_n_entries(const struct tern_distill_cache *c);
/* Entry i: top_k ids and log-probabilities (descending) and the tail mass. false if i is out of
 * range. Pointers into the cache. */
bool tern_distill_cache_entry(const struct tern_distill_cache *c, uint64_t i, const int32_t **ids,
                              const float **logp, float *tail);

/* Make t a distillation trainer with recipe r (loss weights, temperature, QAT). Allocates the
 * loss scratch. */
TERN_NODISCARD tern_status tern_trainer_set_distill(struct tern_trainer *t, const struct tern_distill_recipe *r);
/* Document weights for the training data (n = its documents; each >= 1, finite; w NULL = all 1
 * again): a trained row of document i weighs w[i] (times its early tool-call weight). Copied.
 * Validation is unweighted. The hook for the length-aware KD, whose weights come from
 * the student's own answers (1 + weight x slope x (excess length - hinge) where the student's
 * answer is longer than the teacher's and leaves a required argument out). */
TERN_NODISCARD tern_status tern_trainer_set_doc_weights(struct tern_trainer *t, const float *w, uint64_t n);
/* The next n documents of d (at most its count) the trainer's sampler will draw, in order, from
 * where it stands (the document it is cutting into pieces first; past the end of this epoch, the
 * next epoch's order). out holds n entries; *n_out = how many were written. */
TERN_NODISCARD tern_status tern_trainer_upcoming_docs(struct tern_trainer *t, const struct tern_train_data *d,
                                       uint64_t n, uint64_t *out, uint64_t *n_out);
/* Length-aware KD's weight for one answer: 1 when the student covered every required argument
 * (covered) or was not longer than the teacher by more than the hinge, else
 * 1 + length_kd_weight x length_kd_slope x ((n_student - n_teacher) / n_teacher - hinge).
 * The hinged excess is not differentiable in the weights, so it weighs the document's own KD
 * and CE terms: the student is pulled harder toward the teacher's shorter, complete answer. */
float tern_length_kd_weight(const struct tern_distill_recipe *r, int n_student, int n_teacher,
                            bool covered);
/* The safety rail (recipe rail_ce_rise), fed each validation's CE: returns the scale now applied
 * to the latency weights' excess over 1 (1, 0.5, 0.25, ...; halved when val_ce exceeds the best
 * seen by more than rail_ce_rise, doubled back up to 1 when it is within again); *changed says
 * whether this call moved it (may be NULL); a NaN val_ce only reads the scale. Not saved in
 * checkpoints: a resumed run's rail starts at 1. */
double tern_trainer_latency_rail(struct tern_trainer *t, double val_ce, bool *changed);
/* One optimizer step of the distillation loss on d with its teacher signal kd (checked against
 * d and the recipe the first time this (kd, d) pair is used: hashing d every step would cost
 * more than the step). info's kl/ce/agree are filled. QAT and its learning-rate scale apply
 * from step floor(qat_start * steps) + 1 on. Failure as tern_trainer_step. */
TERN_NODISCARD tern_status tern_trainer_step_distill(struct tern_trainer *t, const struct tern_train_data *d,
                                      const struct tern_distill_cache *kd,
                                      struct tern_train_step_info *info);
struct tern_distill_eval {
    double loss;             /* the recipe's loss */
    double kl;               /* mean KL(teacher top-k at tau || student at tau), nats */
    double ce;               /* mean cross-entropy on the data's next tokens */
    double agree;            /* share of tokens whose student argmax is the teacher's top-1 */
    long long tokens;
};
/* Forward only over every document of d in file order (weights, optimizer and data position
 * untouched); during QAT steps the forward is the fake-quantized one, as in training. */
TERN_NODISCARD tern_status tern_trainer_eval_distill(struct tern_trainer *t, const struct tern_train_data *d,
                                      const struct tern_distill_cache *kd,
                                      struct tern_distill_eval *out);
/* The same over the documents of one length bucket (recipe shape_buckets; bucket < n_buckets),
 * so quality can be compared across buckets; a bucket without documents gives tokens 0. */
TERN_NODISCARD tern_status tern_trainer_eval_distill_bucket(struct tern_trainer *t, const struct tern_train_data *d,
                                             const struct tern_distill_cache *kd, int bucket,
                                             struct tern_distill_eval *out);
/* Is step s (1-based) of t's run a QAT step? */
bool tern_trainer_qat_step(const struct tern_trainer *t, int s);

/* A student from a GGUF: *c gets the shape and hyperparameters of the llama/qwen2 model at path
 * (arch, n_embd, n_layer, heads, n_ff, n_vocab, rope_base, rms_eps, tied_output; n_ctx from
 * context_length, capped at 4096; tokenizer = path) over tern_train_config_default()'s training
 * keys. Architectures or tensors the trainer does not model are refused, naming them. */
TERN_NODISCARD tern_status tern_train_config_from_gguf(const char *path, struct tern_train_config *c);
/* Load the weights of the GGUF at path (any weight type tern reads; dequantized to F32) into t,
 * whose config came from tern_train_config_from_gguf; optimizer state zeroed, step 0. */
TERN_NODISCARD tern_status tern_trainer_load_gguf(struct tern_trainer *t, const char *path);
/* The same with a student that keeps n_layers of the file's blocks: its block j starts as the
 * file's block layers[j] (DistilBERT's start from every other teacher layer); the config's
 * n_layer must be n_layers, and the dropped blocks' tensors are skipped. */
TERN_NODISCARD tern_status tern_trainer_load_gguf_layers(struct tern_trainer *t, const char *path,
                                          const int *layers, int n_layers);

/* ===================================================================== training data */
/* (section owned by src/corpus/ and src/train/bpe_train*.c) A synthetic tool-calling corpus and a
 * byte-level BPE tokenizer trainer, the data side of `tern train`.
 *
 *     struct tern_corpus_params cp = tern_corpus_default_params();  // seed 1, 60000, 90/5/5
 *     tern_corpus_toolcalls_write("corpus", &cp, NULL);   // corpus/{train,val,test}.jsonl + manifest.json
 *     const char *files[] = {"corpus/train.jsonl"};
 *     struct tern_bpe_train_params tp = tern_bpe_train_default_params();   // 4096 tokens
 *     tern_tokenizer_train(files, 1, &tp, "tok.gguf", NULL);  // loads with tern_tokenizer_load
 */

/* The corpus: one OpenAI-format conversation per line ({"messages", "tools", "meta"}), drawn
 * from tern's own word lists and templates (docs/train-and-distill.md "Training data" lists the
 * kinds). The test split only uses tools whose names and parameter signatures never occur in train
 * or val. */
struct tern_corpus_params {
    uint64_t seed;        /* same seed and size -> byte-identical files */
    int64_t size;         /* conversations over all splits (3 .. 1e8); 0 = 60000 */
    int val_percent;      /* 0 = 5 */
    int test_percent;     /* 0 = 5 */
};
struct tern_corpus_params tern_corpus_default_params(void);
struct tern_corpus_report {
    int64_t n_train, n_val, n_test; /* conversations per split */
    uint64_t bytes[3];              /* file sizes: train, val, test */
    int n_tools_used[3];            /* distinct tools offered per split */
    int n_tools, n_tools_test;      /* tool pool: all, test-only */
    int n_domains;
};
/* Write dir/train.jsonl, val.jsonl, test.jsonl and manifest.json (seed, counts per kind and
 * domain, SHA-256 of each file); dir is created if absent. Each file is written to a .tmp name
 * and renamed. report may be NULL. */
TERN_NODISCARD tern_status tern_corpus_toolcalls_write(const char *dir, const struct tern_corpus_params *p,
                                        struct tern_corpus_report *report);

/* The tokenizer trainer: byte-level BPE (GPT-2 byte map, qwen2 pre-tokenizer) learned from
 * .jsonl corpus files (the prompt text of each conversation: tool definitions as JSON, message
 * contents, tool calls as {"name": .., "arguments": ..}) or plain text files. The vocabulary is
 * the 256 byte tokens, the special tokens <|endoftext|> <|im_start|> <|im_end|> (control) and
 * <tool_call> </tool_call> <tool_response> </tool_response> plus extra_special (user-defined,
 * matched in any text), then the merges, padded with unused tokens to vocab_size. eos =
 * <|im_end|>, bos = pad = <|endoftext|>, add_bos false; tokenizer.chat_template is Qwen2.5's
 * (ChatML with Hermes tool calls). Same inputs and parameters -> byte-identical file. */
struct tern_bpe_train_params {
    int vocab_size;                     /* all tokens, 300 .. 1048576; 0 = 4096 */
    const char *const *extra_special;   /* more user-defined tokens (copied), or NULL */
    int n_extra_special;
    int min_pair_count;                 /* pairs seen fewer times are not merged; 0 = 2 */
};
struct tern_bpe_train_params tern_bpe_train_default_params(void);
struct tern_bpe_train_report {
    uint64_t text_bytes;        /* training text after extraction */
    uint64_t n_words, n_unique_words;
    int n_merges, n_special, n_padding, n_vocab;
};
/* Train on files[0..n_files) (".jsonl" = corpus lines, anything else = plain text) and write a
 * vocab-only GGUF to out_path (tmp + rename). A malformed line names file:line and the JSON
 * path. report may be NULL. */
TERN_NODISCARD tern_status tern_tokenizer_train(const char *const *files, int n_files,
                                 const struct tern_bpe_train_params *p, const char *out_path,
                                 struct tern_bpe_train_report *report);

#ifdef __cplusplus
}
#endif
#endif /* TERN_TRAIN_H */

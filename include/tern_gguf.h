/*
 * tern_gguf.h — GGUF files and the tensor formats in them: reading and validating a file,
 * writing one atomically, the tensor types and their row conversions, and the model files tern
 * writes (quantized copies, random-weight models of real shapes, LoRA adapters). Part of libtern
 * (the gguf, quant and convert rooms); a program that only runs models needs tern.h alone.
 */
#ifndef TERN_GGUF_H
#define TERN_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== tensor types */

/* enum tern_type (the ids) is in tern.h, beside the model it describes. */

/* "Q4_K", "F16", ... or "unknown(N)" in a static buffer for ids tern does not know. */
const char *tern_type_name(int type);
/* true for the eleven weight types tern computes with: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
 * Q5_1, Q4_K, Q5_K, Q6_K (plus Q8_1 and Q8_K, which exist here only as activation formats). */
bool tern_type_is_supported(int type);
/* Elements per block (1 for float types) and bytes per block; 0 for unknown types. */
int64_t tern_type_block_size(int type);
int64_t tern_type_block_bytes(int type);
/* Parse "q8_0", "Q4_K", "f16", ... (case-insensitive). Returns TERN_ERR_ARG if unknown. */
TERN_NODISCARD tern_status tern_type_from_name(const char *name, int *type_out);

/* Row conversions for weight formats (n must be a multiple of the block size).
 * tern_quantize_row: F32 -> type; tern_dequantize_row: type -> F32. */
TERN_NODISCARD tern_status tern_quantize_row(int type, const float *src, void *dst, int64_t n);
TERN_NODISCARD tern_status tern_dequantize_row(int type, const void *src, float *dst, int64_t n);

/* ===================================================================== GGUF */

/* GGUF metadata value types (on disk; append-only). */
enum tern_gguf_type {
    TERN_GGUF_UINT8 = 0, TERN_GGUF_INT8 = 1, TERN_GGUF_UINT16 = 2, TERN_GGUF_INT16 = 3,
    TERN_GGUF_UINT32 = 4, TERN_GGUF_INT32 = 5, TERN_GGUF_FLOAT32 = 6, TERN_GGUF_BOOL = 7,
    TERN_GGUF_STRING = 8, TERN_GGUF_ARRAY = 9, TERN_GGUF_UINT64 = 10, TERN_GGUF_INT64 = 11,
    TERN_GGUF_FLOAT64 = 12,
};

#define TERN_MAX_DIMS 4

/* A string inside a mapped GGUF file: NOT NUL-terminated, valid while the file is open. */
struct tern_str {
    const char *ptr;
    uint64_t len;
};

struct tern_gguf_tensor {
    struct tern_str name;
    int type;                        /* enum tern_type */
    int n_dims;
    int64_t ne[TERN_MAX_DIMS];       /* ne[0] = elements per row (contiguous), unused dims = 1 */
    uint64_t offset;                 /* from the start of the data section */
    uint64_t nbytes;
    const void *data;                /* into the mapping */
};

struct tern_gguf;

/* Map and validate a GGUF file (v2 or v3). Every count, length, type, dimension and data range
 * is checked before use; a bad file gives TERN_ERR_FORMAT naming the field and byte offset.
 * The caller frees with tern_gguf_close(); all pointers handed out live until then. */
TERN_NODISCARD tern_status tern_gguf_open(const char *path, struct tern_gguf **out);
/* Same, over a caller-owned buffer (not copied; must outlive the handle). */
TERN_NODISCARD tern_status tern_gguf_open_memory(const void *data, size_t size, struct tern_gguf **out);
void tern_gguf_close(struct tern_gguf *g);

uint32_t tern_gguf_version(const struct tern_gguf *g);
uint64_t tern_gguf_alignment(const struct tern_gguf *g);
uint64_t tern_gguf_data_offset(const struct tern_gguf *g);
size_t tern_gguf_file_size(const struct tern_gguf *g);
const void *tern_gguf_file_data(const struct tern_gguf *g);

/* Metadata. Keys are looked up by exact name; index order is file order. */
int64_t tern_gguf_n_kv(const struct tern_gguf *g);
int64_t tern_gguf_find_key(const struct tern_gguf *g, const char *key); /* -1 if absent */
struct tern_str tern_gguf_key(const struct tern_gguf *g, int64_t i);
enum tern_gguf_type tern_gguf_kv_type(const struct tern_gguf *g, int64_t i);
/* For arrays: element type and count (nested arrays: element type ARRAY). */
enum tern_gguf_type tern_gguf_arr_type(const struct tern_gguf *g, int64_t i);
uint64_t tern_gguf_arr_len(const struct tern_gguf *g, int64_t i);
/* Pointer to the packed array data for fixed-size element types (unaligned: use memcpy). */
const void *tern_gguf_arr_data(const struct tern_gguf *g, int64_t i);
/* j-th string of a string array. */
struct tern_str tern_gguf_arr_str(const struct tern_gguf *g, int64_t i, uint64_t j);
/* Raw bytes of the value (for nested arrays and custom walking); offset into the file. */
uint64_t tern_gguf_kv_value_offset(const struct tern_gguf *g, int64_t i);

/* Typed getters: TERN_ERR_NOT_FOUND if absent, TERN_ERR_FORMAT if the type does not fit
 * (integer getters accept any integer type whose value fits; float getters accept f32/f64). */
TERN_NODISCARD tern_status tern_gguf_get_u32(const struct tern_gguf *g, const char *key, uint32_t *out);
TERN_NODISCARD tern_status tern_gguf_get_i64(const struct tern_gguf *g, const char *key, int64_t *out);
TERN_NODISCARD tern_status tern_gguf_get_f32(const struct tern_gguf *g, const char *key, float *out);
TERN_NODISCARD tern_status tern_gguf_get_bool(const struct tern_gguf *g, const char *key, bool *out);
TERN_NODISCARD tern_status tern_gguf_get_str(const struct tern_gguf *g, const char *key, struct tern_str *out);

int64_t tern_gguf_n_tensors(const struct tern_gguf *g);
const struct tern_gguf_tensor *tern_gguf_tensor(const struct tern_gguf *g, int64_t i);
const struct tern_gguf_tensor *tern_gguf_find_tensor(const struct tern_gguf *g, const char *name);

/* --- writer: builds a GGUF v3 file in memory and writes it atomically (tmp + rename). --- */
struct tern_gguf_writer;
/* Caller frees with tern_gguf_writer_free(). alignment 0 = 32. */
TERN_NODISCARD tern_status tern_gguf_writer_create(uint32_t alignment, struct tern_gguf_writer **out);
void tern_gguf_writer_free(struct tern_gguf_writer *w);
/* Values are copied. Setting an existing key replaces it. */
TERN_NODISCARD tern_status tern_gguf_writer_set_u32(struct tern_gguf_writer *w, const char *key, uint32_t v);
TERN_NODISCARD tern_status tern_gguf_writer_set_i32(struct tern_gguf_writer *w, const char *key, int32_t v);
TERN_NODISCARD tern_status tern_gguf_writer_set_u64(struct tern_gguf_writer *w, const char *key, uint64_t v);
TERN_NODISCARD tern_status tern_gguf_writer_set_f32(struct tern_gguf_writer *w, const char *key, float v);
TERN_NODISCARD tern_status tern_gguf_writer_set_bool(struct tern_gguf_writer *w, const char *key, bool v);
TERN_NODISCARD tern_status tern_gguf_writer_set_str(struct tern_gguf_writer *w, const char *key, const char *v);
/* Array of a fixed-size element type (not STRING/ARRAY): n elements packed at data. */
TERN_NODISCARD tern_status tern_gguf_writer_set_arr(struct tern_gguf_writer *w, const char *key,
                                     enum tern_gguf_type elem_type, const void *data, uint64_t n);
TERN_NODISCARD tern_status tern_gguf_writer_set_arr_str(struct tern_gguf_writer *w, const char *key,
                                         const char *const *strs, uint64_t n);
/* Copy key i of an open file verbatim (any type, nested arrays included). */
TERN_NODISCARD tern_status tern_gguf_writer_copy_kv(struct tern_gguf_writer *w, const struct tern_gguf *src,
                                     int64_t i);
/* Add a tensor; data (nbytes per its type and shape) is copied. */
TERN_NODISCARD tern_status tern_gguf_writer_add_tensor(struct tern_gguf_writer *w, const char *name, int type,
                                        int n_dims, const int64_t *ne, const void *data);
/* Write to path via path.tmp + rename; nothing is left half-written on failure. */
TERN_NODISCARD tern_status tern_gguf_writer_write(struct tern_gguf_writer *w, const char *path);

/* SHA-256 over the raw bytes of every tokenizer.ggml.* metadata entry of a GGUF, in file order
 * (a vocabulary-only tokenizer file too): tern_tokenizer_fingerprint of a file without loading
 * a model. */
TERN_NODISCARD tern_status tern_gguf_tokenizer_fingerprint(const struct tern_gguf *g, uint8_t out[32]);

/* ===================================================================== model files */

/* Write a random-weight model with the exact shape of a real one (shape names: see
 * tern_synth_shape_names(): "tiny", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b",
 * "llama-3.2-1b", "llama-3.2-3b", "qwen3-0.6b", "smollm3-3b", "phi-4-mini", "gemma-3-1b",
 * and the tiny parity-test shapes "qwen3-tiny", "smollm3-tiny", "phi4-tiny", "gemma3-tiny"),
 * with the keys and tensor names llama.cpp's converters write for its architecture, in
 * weight type `type_name`: a plain type (f32, f16, bf16,
 * q8_0, q4_0, q5_0, q5_1, q4_k, q5_k, q6_k: every 2-D weight gets it, as llama-quantize --pure)
 * or a mix (q4_k_m / q5_k_m: llama-quantize's per-tensor rule, Q6_K for the output matrix and
 * some attn_v / ffn_down layers). A tensor whose rows the type's block does not divide falls
 * back as llama-quantize does (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16); the count
 * goes to *n_fallbacks (may be NULL). The vocabulary is byte-level (256 byte tokens + ChatML
 * control tokens, padded to the real size) with a ChatML template. Written atomically
 * (tmp + rename). */
TERN_NODISCARD tern_status tern_synth_model_write(const char *shape, const char *type_name, uint64_t seed,
                                   const char *path, int *n_fallbacks);
/* Same, but the tokenizer is a real one: every tokenizer.* key of the GGUF at vocab_path (a
 * vocab-only file such as llama.cpp's ggml-vocab-*.gguf is enough: model, pre, tokens, token
 * types, merges, scores, special ids, add_bos/eos, the chat template if it has one) is copied
 * verbatim, so the file tokenizes like the real model and llama.cpp loads it too. A vocabulary
 * whose size differs from the shape's n_vocab is refused (TERN_ERR_ARG), as is one tern's
 * tokenizer cannot load. vocab_path NULL = the byte-level vocabulary above. */
TERN_NODISCARD tern_status tern_synth_model_write_vocab(const char *shape, const char *type_name, uint64_t seed,
                                         const char *vocab_path, const char *path,
                                         int *n_fallbacks);
const char *tern_synth_shape_names(void);

/* Rewrite a GGUF model with its 2-D weights in type `type_name` (same names and fallbacks as
 * above); 1-D tensors stay as they are, metadata is copied (general.file_type and
 * general.quantization_version updated), tensors are written in llama-quantize's order, so the
 * file is byte-identical to llama-quantize's for the same input and type. Atomic. */
TERN_NODISCARD tern_status tern_quantize_model(const char *in_path, const char *out_path, const char *type_name,
                                int *n_fallbacks);
/* tern_quantize_model for a drafter whose output head keeps only some tokens: OUT's
 * output.weight holds the rows of token ids[0 .. n_ids) (ascending, inside the vocabulary; taken
 * from the embeddings when IN's head is tied) and the key tern.output_token_ids lists them. A
 * model so pruned gives those tokens their logits and every other token -inf, and reads n_ids
 * instead of n_vocab rows of its head per token; tern's drafters use it (docs/speculative.md),
 * llama.cpp does not read it. IN already pruned is refused. Atomic. */
TERN_NODISCARD tern_status tern_quantize_model_head(const char *in_path, const char *out_path,
                                     const char *type_name, const int32_t *ids, int n_ids,
                                     int *n_fallbacks);
/* tern_quantize_model with adapters merged: every adapted 2-D weight is written as
 * W + sum scale * B A (dequantized, the deltas added in F32, then quantized to type_name; the
 * other tensors as tern_quantize_model writes them; the first adapter's chat template, when one
 * carries it, replaces IN's, so the merged model is prompted as base + adapter is). The adapters
 * must have been loaded for a model of the file at in_path (tern_lora_load). scales NULL = all 1.
 * Atomic. */
TERN_NODISCARD tern_status tern_quantize_model_lora(const char *in_path, const char *out_path,
                                     const char *type_name, struct tern_lora *const *adapters,
                                     const float *scales, int n, int *n_fallbacks);

/* One adapted weight for tern_lora_write: A and B as F32, row-major, in ggml's layout. */
struct tern_lora_tensor {
    const char *name;      /* base weight, e.g. "blk.0.attn_q.weight" */
    int rank;              /* r */
    int64_t n_in, n_out;   /* the base matrix's ne[0] (columns) and ne[1] (rows) */
    const float *a;        /* (r, n_in): lora_a, ne [n_in, r]; token_embd.weight: (n_out, r),
                              ne [r, n_vocab] (llama.cpp's flipped pair) */
    const float *b;        /* (n_out, r): lora_b, ne [r, n_out]; token_embd.weight: (n_in, r) */
};
/* Write a LoRA adapter GGUF in llama.cpp's format (general.architecture arch, general.type
 * "adapter", adapter.type "lora", adapter.lora.alpha) holding t[0..n) with A and B in
 * type_name (f32, f16, bf16, q8_0: what llama.cpp's converter writes; q8_0 needs n_in and r
 * multiples of 32). Atomic (tmp + rename). */
TERN_NODISCARD tern_status tern_lora_write(const char *path, const char *arch, float alpha,
                            const struct tern_lora_tensor *t, int n, const char *type_name);
/* The same with string metadata: kv holds n_kv (key, value) pairs (not general.* or
 * adapter.*), e.g. "tokenizer.chat_template": the template the adapter was trained with. */
TERN_NODISCARD tern_status tern_lora_write_kv(const char *path, const char *arch, float alpha,
                               const struct tern_lora_tensor *t, int n, const char *type_name,
                               const char *const *kv, int n_kv);

#ifdef __cplusplus
}
#endif
#endif /* TERN_GGUF_H */

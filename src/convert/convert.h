/* convert.h — what src/convert offers the rooms above it (not public): the model rewriter of
 * quantize_model.c with a hook that changes each weight row between dequantizing and
 * quantizing (src/model/lora_merge.c adds LoRA deltas through it) and a pruned output head. */
#ifndef TERN_CONVERT_CONVERT_H
#define TERN_CONVERT_CONVERT_H

#include "tern_gguf.h"

struct convert_row_hook {
    void *user;
    /* A handle (>= 0) when tensor `name` (cols x rows) has rows to change, else -1. */
    int (*find)(void *user, const char *name, int64_t cols, int64_t rows);
    /* Change row r (cols floats, dequantized) of the tensor found as h, in place. */
    void (*add_row)(void *user, int h, int64_t r, float *row);
};

struct convert_opts {
    const struct convert_row_hook *hook; /* applied to every 2-D weight rewritten, or NULL */
    const int32_t *head_ids;             /* tern_quantize_model_head's pruned head, or NULL */
    int n_head_ids;
    const char *chat_template;           /* replaces IN's tokenizer.chat_template, or NULL */
};

/* The first entry of ids[0 .. n) that is outside [0, n_vocab) or not above the one before it,
 * or -1 when the ids ascend strictly inside the vocabulary (a pruned head's token ids, checked
 * where they are written and where a model is loaded). */
int64_t convert_head_ids_first_bad(const int32_t *ids, int64_t n, int64_t n_vocab);

/* tern_quantize_model with these options (NULL: none). */
TERN_NODISCARD tern_status convert_quantize_model(const char *in_path, const char *out_path, const char *type_name,
                                   const struct convert_opts *opts, int *n_fallbacks);

#endif

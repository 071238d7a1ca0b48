/* cli_model_copy.c — modified copies of a model that `tern bench --draft` measures speculation on.
 *
 * Both are written once beside the input (a second run reuses the file) with tern's own GGUF
 * writer, every key and every other tensor copied verbatim:
 *   --scale-layers S  attn_output and ffn_down (and qwen35's ssm_out) scaled by S: with tied
 *                     embeddings a small S leaves the token's own embedding dominant, so a
 *                     random-weight model mostly repeats a token (a synthetic pair whose acceptance
 *                     S dials); a qwen35 MTP layer's eh_proj becomes [I | 0], so the MTP reads its
 *                     token's embedding alone and predicts it repeated too (--draft mtp's pair);
 *   --widen-ffn N     every layer's feed-forward block N times as wide, the new gate/up rows and
 *                     down columns zero: the same function (silu(0) * 0 = 0 adds exactly nothing,
 *                     and the original blocks keep their bytes), N times the FFN bytes to read per
 *                     token. A trained model too small to be bound by memory (tern-tool: 14 M
 *                     parameters, compute-bound at 0.22 ms a token) becomes one whose decode reads
 *                     weights as a 0.5B model's does, with its own outputs and drafter. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "tern_gguf.h"
#include "cli_draft.h"

/* out = <in without .gguf><suffix>.gguf; returns true when that file already exists. */
static bool copy_path(const char *in, const char *suffix, char *out, size_t cap)
{
    size_t len = strlen(in);
    if (len > 5 && !strcmp(in + len - 5, ".gguf")) len -= 5;
    snprintf(out, cap, "%.*s%s.gguf", (int)len, in, suffix);
    FILE *f = fopen(out, "rb");
    if (f) fclose(f);
    return f != NULL;
}

static void tensor_name(const struct tern_gguf_tensor *t, char *name, size_t cap)
{
    snprintf(name, cap, "%.*s", (int)(t->name.len < cap - 1 ? t->name.len : cap - 1), t->name.ptr);
}

int cli_model_scaled(const char *in, double scale, char *out, size_t cap)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, "-layers%g", scale);
    if (copy_path(in, suffix, out, cap)) return 0;
    fprintf(stderr, "tern bench: writing %s (attn_output, ffn_down, ssm_out x %g; an MTP eh_proj [I | 0]) ...\n",
            out, scale);
    struct tern_gguf *g = NULL;
    struct tern_gguf_writer *w = NULL;
    float *row = NULL;
    void *buf = NULL;
    tern_status st = tern_gguf_open(in, &g);
    if (!st) st = tern_gguf_writer_create(0, &w);
    for (int64_t i = 0; !st && i < tern_gguf_n_kv(g); i++) st = tern_gguf_writer_copy_kv(w, g, i);
    for (int64_t i = 0; !st && i < tern_gguf_n_tensors(g); i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
        char name[128];
        tensor_name(t, name, sizeof name);
        const bool scaled = t->n_dims == 2 && (strstr(name, "attn_output") || strstr(name, "ffn_down") ||
                                               strstr(name, "ssm_out"));
        const bool eh_identity = t->n_dims == 2 && strstr(name, "nextn.eh_proj") && t->ne[0] == 2 * t->ne[1];
        if (eh_identity) { /* [I | 0]: row r picks the embedding's component r */
            const int64_t cols = t->ne[0], rows = t->ne[1];
            const size_t rb = t->nbytes / (size_t)rows;
            free(row);
            free(buf);
            row = calloc((size_t)cols, sizeof(float));
            buf = malloc(t->nbytes);
            if (!row || !buf) st = TERN_ERR_NOMEM;
            for (int64_t r = 0; !st && r < rows; r++) {
                row[r] = 1.0f;
                st = tern_quantize_row(t->type, row, (char *)buf + (size_t)r * rb, cols);
                row[r] = 0.0f;
            }
            if (!st) st = tern_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, buf);
            continue;
        }
        if (!scaled) {
            st = tern_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data);
            continue;
        }
        const int64_t cols = t->ne[0], rows = t->ne[1];
        const size_t rb = t->nbytes / (size_t)rows;
        free(row);
        free(buf);
        row = malloc(sizeof(float) * (size_t)cols);
        buf = malloc(t->nbytes);
        if (!row || !buf) st = TERN_ERR_NOMEM;
        for (int64_t r = 0; !st && r < rows; r++) {
            st = tern_dequantize_row(t->type, (const char *)t->data + (size_t)r * rb, row, cols);
            for (int64_t j = 0; j < cols; j++) row[j] *= (float)scale;
            if (!st) st = tern_quantize_row(t->type, row, (char *)buf + (size_t)r * rb, cols);
        }
        if (!st) st = tern_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, buf);
    }
    if (!st) st = tern_gguf_writer_write(w, out);
    free(row);
    free(buf);
    tern_gguf_writer_free(w);
    tern_gguf_close(g);
    return st ? cli_report("bench", st) : 0;
}

/* The bytes of a row of n zeros in type (n a multiple of its block size), malloc'ed. */
static void *zero_row(int type, int64_t n, size_t *bytes)
{
    *bytes = (size_t)(n / tern_type_block_size(type) * tern_type_block_bytes(type));
    float *z = calloc((size_t)n, sizeof(float));
    void *q = malloc(*bytes ? *bytes : 1);
    if (!z || !q || tern_quantize_row(type, z, q, n)) {
        free(q);
        q = NULL;
    }
    free(z);
    return q;
}

/* One FFN matrix made `factor` times as wide along the feed-forward dimension: gate/up (ne[1] =
 * n_ff rows) gain zero rows; down (ne[0] = n_ff columns) gains zero blocks at the end of every row,
 * its original blocks copied byte for byte. False (said on stderr) when t is not such a matrix;
 * *st is the writer's status. */
static bool widen_tensor(struct tern_gguf_writer *w, const char *name, const struct tern_gguf_tensor *t,
                         int64_t n_ff, int factor, tern_status *st)
{
    const bool down = strstr(name, "ffn_down") != NULL;
    if (t->n_dims != 2 || (down ? t->ne[0] : t->ne[1]) != n_ff) {
        fprintf(stderr, "tern bench: --widen-ffn: %s of shape [%lld, %lld] is not a feed-forward matrix of width %lld\n",
                name, (long long)t->ne[0], (long long)t->ne[1], (long long)n_ff);
        return false;
    }
    if (n_ff % tern_type_block_size(t->type)) {
        fprintf(stderr, "tern bench: --widen-ffn: %s: width %lld is not whole blocks of %s\n", name, (long long)n_ff,
                tern_type_name(t->type));
        return false;
    }
    const int64_t ne[2] = {down ? t->ne[0] * factor : t->ne[0], down ? t->ne[1] : t->ne[1] * factor};
    const size_t row_in = t->nbytes / (size_t)t->ne[1];
    size_t zero_bytes = 0;
    void *zero = zero_row(t->type, down ? n_ff * (factor - 1) : t->ne[0], &zero_bytes);
    const size_t total = down ? (size_t)t->ne[1] * (row_in + zero_bytes) : t->nbytes + zero_bytes * (size_t)(ne[1] - t->ne[1]);
    char *buf = zero ? malloc(total) : NULL;
    if (!buf) {
        free(zero);
        *st = TERN_ERR_NOMEM;
        return true;
    }
    if (down) {
        for (int64_t r = 0; r < t->ne[1]; r++) {
            char *dst = buf + (size_t)r * (row_in + zero_bytes);
            memcpy(dst, (const char *)t->data + (size_t)r * row_in, row_in);
            memcpy(dst + row_in, zero, zero_bytes);
        }
    } else {
        memcpy(buf, t->data, t->nbytes);
        for (int64_t r = t->ne[1]; r < ne[1]; r++) memcpy(buf + t->nbytes + (size_t)(r - t->ne[1]) * zero_bytes, zero, zero_bytes);
    }
    *st = tern_gguf_writer_add_tensor(w, name, t->type, 2, ne, buf);
    free(buf);
    free(zero);
    return true;
}

int cli_model_widened(const char *in, int factor, char *out, size_t cap)
{
    char suffix[64];
    snprintf(suffix, sizeof suffix, "-ffnx%d", factor);
    if (copy_path(in, suffix, out, cap)) return 0;
    struct tern_gguf *g = NULL;
    struct tern_gguf_writer *w = NULL;
    struct tern_str arch = {0};
    char key[160];
    uint32_t n_ff = 0;
    tern_status st = tern_gguf_open(in, &g);
    if (!st) st = tern_gguf_get_str(g, "general.architecture", &arch);
    if (st) return cli_report("bench", st);
    snprintf(key, sizeof key, "%.*s.feed_forward_length", (int)arch.len, arch.ptr);
    if (tern_gguf_get_u32(g, key, &n_ff) || n_ff == 0 || (uint64_t)n_ff * (uint64_t)factor > UINT32_MAX) {
        fprintf(stderr, "tern bench: --widen-ffn: %s: %s is missing, not one width for every layer, or too wide x %d\n",
                in, key, factor);
        tern_gguf_close(g);
        return CLI_EXIT_FAIL;
    }
    fprintf(stderr, "tern bench: writing %s (feed-forward width %u -> %llu, the new rows zero) ...\n", out, n_ff,
            (unsigned long long)n_ff * (unsigned long long)factor);
    st = tern_gguf_writer_create(0, &w);
    for (int64_t i = 0; !st && i < tern_gguf_n_kv(g); i++) st = tern_gguf_writer_copy_kv(w, g, i);
    if (!st) st = tern_gguf_writer_set_u32(w, key, n_ff * (uint32_t)factor);
    int widened = 0;
    bool shape_ok = true;
    for (int64_t i = 0; !st && shape_ok && i < tern_gguf_n_tensors(g); i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
        char name[128];
        tensor_name(t, name, sizeof name);
        if (strstr(name, "ffn_gate.") || strstr(name, "ffn_up.") || strstr(name, "ffn_down.")) {
            shape_ok = widen_tensor(w, name, t, n_ff, factor, &st);
            widened++;
        } else {
            st = tern_gguf_writer_add_tensor(w, name, t->type, t->n_dims, t->ne, t->data);
        }
    }
    if (!st && shape_ok && !widened) {
        fprintf(stderr, "tern bench: --widen-ffn: %s has no ffn_gate / ffn_up / ffn_down tensors\n", in);
        shape_ok = false;
    }
    if (!st && shape_ok) st = tern_gguf_writer_write(w, out);
    tern_gguf_writer_free(w);
    tern_gguf_close(g);
    if (!shape_ok) return CLI_EXIT_FAIL;
    return st ? cli_report("bench", st) : 0;
}

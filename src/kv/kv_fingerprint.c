/* kv_fingerprint.c — identities of a model and of its tokenizer, for refusing KV from elsewhere.
 *
 * KV bytes are only reusable by the exact model that computed them. The model fingerprint hashes
 * the GGUF bytes before the tensor data (header, all metadata, tensor table: shapes, types and
 * offsets) plus a sample of every tensor's data, so a re-quantized or re-trained file with the
 * same metadata still differs. Hashing all weights would cost a full read of the file at every
 * start; the sample costs 8 x 512 bytes per tensor. */
#include <string.h>

#include <nettle/sha2.h>

#include "tern.h"
#include "tern_gguf.h"
#include "util/error.h"

#define FP_SAMPLES 8
#define FP_SAMPLE_BYTES 512

tern_status tern_model_fingerprint(const struct tern_model *m, uint8_t out[32])
{
    const struct tern_gguf *g = tern_model_gguf(m);
    if (!g) return tern_fail(TERN_ERR_ARG, "model fingerprint: the model has no GGUF file");
    const uint8_t *base = tern_gguf_file_data(g);
    uint64_t meta = tern_gguf_data_offset(g);
    if (meta > tern_gguf_file_size(g)) meta = tern_gguf_file_size(g);
    struct sha256_ctx h;
    sha256_init(&h);
    sha256_update(&h, meta, base);
    for (int64_t i = 0; i < tern_gguf_n_tensors(g); i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
        const uint8_t *d = t->data;
        if (t->nbytes <= FP_SAMPLES * FP_SAMPLE_BYTES) {
            sha256_update(&h, t->nbytes, d);
            continue;
        }
        const uint64_t stride = (t->nbytes - FP_SAMPLE_BYTES) / (FP_SAMPLES - 1);
        for (int s = 0; s < FP_SAMPLES; s++)
            sha256_update(&h, FP_SAMPLE_BYTES, d + (uint64_t)s * stride);
    }
    sha256_digest(&h, 32, out);
    return TERN_OK;
}

/* A metadata entry's bytes run from its key's length prefix (8 bytes before the key text) to
 * the next entry's, or to the tensor table after the last entry. */
static uint64_t kv_start(const struct tern_gguf *g, int64_t i)
{
    const char *base = tern_gguf_file_data(g);
    return (uint64_t)(tern_gguf_key(g, i).ptr - base) - 8;
}

tern_status tern_tokenizer_fingerprint(const struct tern_model *m, uint8_t out[32])
{
    const struct tern_gguf *g = tern_model_gguf(m);
    if (!g) return tern_fail(TERN_ERR_ARG, "tokenizer fingerprint: the model has no GGUF file");
    return tern_gguf_tokenizer_fingerprint(g, out);
}

tern_status tern_gguf_tokenizer_fingerprint(const struct tern_gguf *g, uint8_t out[32])
{
    const uint8_t *base = tern_gguf_file_data(g);
    const int64_t n = tern_gguf_n_kv(g);
    uint64_t table = tern_gguf_data_offset(g);
    if (tern_gguf_n_tensors(g) > 0)
        table = (uint64_t)(tern_gguf_tensor(g, 0)->name.ptr - (const char *)base) - 8;
    struct sha256_ctx h;
    sha256_init(&h);
    static const char prefix[] = "tokenizer.ggml.";
    for (int64_t i = 0; i < n; i++) {
        struct tern_str k = tern_gguf_key(g, i);
        if (k.len < sizeof prefix - 1 || memcmp(k.ptr, prefix, sizeof prefix - 1)) continue;
        uint64_t a = kv_start(g, i), b = i + 1 < n ? kv_start(g, i + 1) : table;
        if (b < a || b > tern_gguf_file_size(g))
            return tern_fail(TERN_ERR_FORMAT, "tokenizer fingerprint: metadata entry %lld "
                             "spans an impossible byte range %llu..%llu", (long long)i,
                             (unsigned long long)a, (unsigned long long)b);
        sha256_update(&h, b - a, base + a);
    }
    sha256_digest(&h, 32, out);
    return TERN_OK;
}

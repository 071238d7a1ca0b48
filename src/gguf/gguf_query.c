/* gguf_query.c — read-only accessors over an opened GGUF (tern.h "GGUF", metadata part).
 *
 * Everything here trusts the offsets gguf_read.c validated at open time, so the accessors are
 * O(1) and allocation-free. An out-of-range index is a caller bug: accessors then return an
 * empty value (0, NULL, {NULL, 0}, type (enum)-1) instead of reading out of bounds.
 * Typed getters convert between integer widths when the value fits and say which key and which
 * type in the message when it does not. */
#include "gguf/gguf_internal.h"
#include "util/check.h"
#include "util/error.h"

#include <inttypes.h>

uint32_t tern_gguf_version(const struct tern_gguf *g) { return g->version; }
uint64_t tern_gguf_alignment(const struct tern_gguf *g) { return g->alignment; }
uint64_t tern_gguf_data_offset(const struct tern_gguf *g) { return g->data_offset; }
size_t tern_gguf_file_size(const struct tern_gguf *g) { return g->size; }
const void *tern_gguf_file_data(const struct tern_gguf *g) { return g->data; }

int64_t tern_gguf_n_kv(const struct tern_gguf *g) { return g->n_kv; }

static struct tern_str kv_name(const void *ctx, int64_t id)
{
    return ((const struct tern_gguf *)ctx)->kv[id].key;
}

static struct tern_str tensor_name(const void *ctx, int64_t id)
{
    return ((const struct tern_gguf *)ctx)->tensors[id].name;
}

int64_t tern_gguf_find_key(const struct tern_gguf *g, const char *key)
{
    if (!g || !key) return -1;
    const int64_t i = gguf_index_find(&g->kv_index, key, strlen(key), kv_name, g);
    TERN_ASSERT(i < g->n_kv, "the index holds kv ids");
    return i;
}

static const struct gguf_kv *kv_at(const struct tern_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_kv ? &g->kv[i] : NULL;
}

struct tern_str tern_gguf_key(const struct tern_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? kv->key : (struct tern_str){NULL, 0};
}

enum tern_gguf_type tern_gguf_kv_type(const struct tern_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? kv->type : (enum tern_gguf_type)-1;
}

enum tern_gguf_type tern_gguf_arr_type(const struct tern_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv && kv->type == TERN_GGUF_ARRAY ? kv->arr_type : (enum tern_gguf_type)-1;
}

uint64_t tern_gguf_arr_len(const struct tern_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv && kv->type == TERN_GGUF_ARRAY ? kv->arr_len : 0;
}

const void *tern_gguf_arr_data(const struct tern_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    if (!kv || kv->type != TERN_GGUF_ARRAY || gguf_type_size(kv->arr_type) == 0) return NULL;
    TERN_ASSERT(kv->arr_data_offset <= g->size && kv->arr_len * gguf_type_size(kv->arr_type) <= g->size - kv->arr_data_offset);
    return g->data + kv->arr_data_offset;
}

struct tern_str tern_gguf_arr_str(const struct tern_gguf *g, int64_t i, uint64_t j)
{
    const struct gguf_kv *kv = kv_at(g, i);
    if (!kv || kv->type != TERN_GGUF_ARRAY || kv->arr_type != TERN_GGUF_STRING ||
        j >= kv->arr_len)
        return (struct tern_str){NULL, 0};
    uint64_t at = kv->str_offsets[j];
    /* the reader checked every element string lies in the file */
    TERN_ASSERT(at + 8 <= g->size && gguf_rd_u64(g->data + at) <= g->size - at - 8);
    return (struct tern_str){(const char *)g->data + at + 8, gguf_rd_u64(g->data + at)};
}

uint64_t tern_gguf_kv_value_offset(const struct tern_gguf *g, int64_t i)
{
    const struct gguf_kv *kv = kv_at(g, i);
    return kv ? kv->value_offset : 0;
}

/* The kv for key with its scalar value pointer, or a NOT_FOUND failure. */
static tern_status lookup(const struct tern_gguf *g, const char *key, const struct gguf_kv **out)
{
    if (!g || !key) return tern_fail(TERN_ERR_ARG, "gguf getter: NULL argument");
    int64_t i = tern_gguf_find_key(g, key);
    if (i < 0) return tern_fail(TERN_ERR_NOT_FOUND, "gguf: key '%s' not found", key);
    *out = &g->kv[i];
    return TERN_OK;
}

static tern_status wrong_type(const struct gguf_kv *kv, const char *key, const char *expected)
{
    return tern_fail(TERN_ERR_FORMAT, "gguf: key '%s' at offset %llu has type %s, expected %s",
                     key, (unsigned long long)kv->key_offset, gguf_type_name(kv->type),
                     expected);
}

/* An integer value of any width: signed ones in *sv, unsigned ones in *uv (*is_signed says which). */
static int read_int(const struct tern_gguf *g, const struct gguf_kv *kv, int64_t *sv,
                    uint64_t *uv, int *is_signed)
{
    const uint8_t *p = g->data + kv->value_offset;
    *is_signed = 1;
    switch (kv->type) {
    case TERN_GGUF_UINT8: *is_signed = 0; *uv = p[0]; return 1;
    case TERN_GGUF_INT8: *sv = (int8_t)p[0]; return 1;
    case TERN_GGUF_UINT16: { uint16_t v; memcpy(&v, p, 2); *is_signed = 0; *uv = v; return 1; }
    case TERN_GGUF_INT16: { int16_t v; memcpy(&v, p, 2); *sv = v; return 1; }
    case TERN_GGUF_UINT32: { uint32_t v; memcpy(&v, p, 4); *is_signed = 0; *uv = v; return 1; }
    case TERN_GGUF_INT32: { int32_t v; memcpy(&v, p, 4); *sv = v; return 1; }
    case TERN_GGUF_UINT64: { uint64_t v; memcpy(&v, p, 8); *is_signed = 0; *uv = v; return 1; }
    case TERN_GGUF_INT64: { int64_t v; memcpy(&v, p, 8); *sv = v; return 1; }
    default: return 0;
    }
}

tern_status tern_gguf_get_u32(const struct tern_gguf *g, const char *key, uint32_t *out)
{
    const struct gguf_kv *kv = NULL;
    tern_status st = lookup(g, key, &kv);
    if (st) return st;
    int64_t sv = 0;
    uint64_t uv = 0;
    int is_signed;
    if (!read_int(g, kv, &sv, &uv, &is_signed)) return wrong_type(kv, key, "an integer");
    if (is_signed ? (sv < 0 || sv > (int64_t)UINT32_MAX) : uv > UINT32_MAX)
        return tern_fail(TERN_ERR_FORMAT, "gguf: key '%s' at offset %llu: value %s%llu does not "
                         "fit in uint32", key, (unsigned long long)kv->key_offset,
                         is_signed && sv < 0 ? "-" : "",
                         is_signed ? (unsigned long long)(sv < 0 ? -(uint64_t)sv : (uint64_t)sv)
                                   : (unsigned long long)uv);
    *out = is_signed ? (uint32_t)sv : (uint32_t)uv;
    return TERN_OK;
}

tern_status tern_gguf_get_i64(const struct tern_gguf *g, const char *key, int64_t *out)
{
    const struct gguf_kv *kv = NULL;
    tern_status st = lookup(g, key, &kv);
    if (st) return st;
    int64_t sv = 0;
    uint64_t uv = 0;
    int is_signed;
    if (!read_int(g, kv, &sv, &uv, &is_signed)) return wrong_type(kv, key, "an integer");
    if (!is_signed && uv > (uint64_t)INT64_MAX)
        return tern_fail(TERN_ERR_FORMAT, "gguf: key '%s' at offset %llu: value %llu does not "
                         "fit in int64", key, (unsigned long long)kv->key_offset,
                         (unsigned long long)uv);
    *out = is_signed ? sv : (int64_t)uv;
    return TERN_OK;
}

tern_status tern_gguf_get_f32(const struct tern_gguf *g, const char *key, float *out)
{
    const struct gguf_kv *kv = NULL;
    tern_status st = lookup(g, key, &kv);
    if (st) return st;
    const uint8_t *p = g->data + kv->value_offset;
    if (kv->type == TERN_GGUF_FLOAT32) {
        memcpy(out, p, 4);
    } else if (kv->type == TERN_GGUF_FLOAT64) {
        double d;
        memcpy(&d, p, 8);
        *out = (float)d;
    } else {
        return wrong_type(kv, key, "float32 or float64");
    }
    return TERN_OK;
}

tern_status tern_gguf_get_bool(const struct tern_gguf *g, const char *key, bool *out)
{
    const struct gguf_kv *kv = NULL;
    tern_status st = lookup(g, key, &kv);
    if (st) return st;
    if (kv->type != TERN_GGUF_BOOL) return wrong_type(kv, key, "bool");
    *out = g->data[kv->value_offset] != 0;
    return TERN_OK;
}

tern_status tern_gguf_get_str(const struct tern_gguf *g, const char *key, struct tern_str *out)
{
    const struct gguf_kv *kv = NULL;
    tern_status st = lookup(g, key, &kv);
    if (st) return st;
    if (kv->type != TERN_GGUF_STRING) return wrong_type(kv, key, "string");
    out->len = gguf_rd_u64(g->data + kv->value_offset);
    out->ptr = (const char *)g->data + kv->value_offset + 8;
    return TERN_OK;
}

int64_t tern_gguf_n_tensors(const struct tern_gguf *g) { return g->n_tensors; }

const struct tern_gguf_tensor *tern_gguf_tensor(const struct tern_gguf *g, int64_t i)
{
    return g && i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const struct tern_gguf_tensor *tern_gguf_find_tensor(const struct tern_gguf *g, const char *name)
{
    if (!g || !name) return NULL;
    int64_t i = gguf_index_find(&g->tensor_index, name, strlen(name), tensor_name, g);
    TERN_ASSERT(i < g->n_tensors, "the index holds tensor ids");
    return i < 0 ? NULL : &g->tensors[i];
}

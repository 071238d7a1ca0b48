/* gguf_read.c — open a GGUF file (mmap or caller buffer) and validate all of it up front.
 *
 * Read gguf_internal.h first (file layout, struct tern_gguf). The parser walks the file once
 * with a bounds-checked cursor; every read first checks that the bytes exist, every count is
 * compared with the bytes left before anything is allocated for it, and every product/sum is
 * overflow-checked. After a successful open the accessors can trust every offset. Failures
 * return TERN_ERR_FORMAT (bad content) or TERN_ERR_IO (cannot open/map) with a message naming
 * the file, the item (kv index + key, tensor index + name) and the byte offset. */
#include "gguf/gguf_internal.h"
#include "util/check.h"
#include "util/error.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Smallest possible KV: key length u64 + 1 key byte + type u32 + 1 value byte. */
#define GGUF_MIN_KV_BYTES 14u
/* Smallest possible tensor info: name length + 1 byte + n_dims + one ne + type + offset. */
#define GGUF_MIN_INFO_BYTES 33u
/* Element counts must stay below 2^62 so that byte sizes and int64 maths cannot overflow. */
#define GGUF_MAX_ELEMENTS (1ull << 62)

typedef unsigned long long ull;

struct parser {
    const uint8_t *p;
    uint64_t size;
    uint64_t pos;
    const char *file;  /* for messages */
    char what[320];    /* current item, e.g. "kv 3 ('general.name')" */
};

uint64_t gguf_type_size(uint32_t type)
{
    switch (type) {
    case TERN_GGUF_UINT8: case TERN_GGUF_INT8: case TERN_GGUF_BOOL: return 1;
    case TERN_GGUF_UINT16: case TERN_GGUF_INT16: return 2;
    case TERN_GGUF_UINT32: case TERN_GGUF_INT32: case TERN_GGUF_FLOAT32: return 4;
    case TERN_GGUF_UINT64: case TERN_GGUF_INT64: case TERN_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

const char *gguf_type_name(uint32_t type)
{
    static const char *const names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32",
                                        "float32", "bool", "string", "array", "uint64",
                                        "int64", "float64"};
    return type < sizeof names / sizeof names[0] ? names[type] : "unknown";
}

/* Printable form of a name from the file for messages: bounded (cap >= 8), control bytes
 * escaped as \xNN, "..." when cut. */
static void quote_name(char *dst, size_t cap, const char *s, uint64_t len)
{
    const size_t limit = cap - 4; /* room kept for "..." and the NUL */
    size_t o = 0;
    for (uint64_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        size_t need = (c >= 0x20 && c != 0x7f) ? 1 : 4;
        if (o + need > limit) {
            memcpy(dst + o, "...", 3);
            o += 3;
            break;
        }
        if (need == 1) dst[o++] = (char)c;
        else o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", c);
    }
    dst[o] = '\0';
}

static tern_status fail_at(const struct parser *ps, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "<file>: <item>: <message> at offset N" — the one shape of every reader error. */
static tern_status fail_at(const struct parser *ps, uint64_t off, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ps->what[0])
        return tern_fail(TERN_ERR_FORMAT, "%s: %s: %s at offset %llu", ps->file, ps->what, msg,
                         (ull)off);
    return tern_fail(TERN_ERR_FORMAT, "%s: %s at offset %llu", ps->file, msg, (ull)off);
}

static tern_status need(const struct parser *ps, uint64_t n, const char *field)
{
    /* every read checks before it advances: the cursor never passes the end */
    TERN_ASSERT(ps->pos <= ps->size, "the parser stays inside the file");
    if (n > ps->size - ps->pos)
        return fail_at(ps, ps->pos, "%s needs %llu bytes but the file ends at %llu", field,
                       (ull)n, (ull)ps->size);
    return TERN_OK;
}

static tern_status rd_u32(struct parser *ps, const char *field, uint32_t *v)
{
    tern_status st = need(ps, 4, field);
    if (st) return st;
    *v = gguf_rd_u32(ps->p + ps->pos);
    ps->pos += 4;
    return TERN_OK;
}

static tern_status rd_u64(struct parser *ps, const char *field, uint64_t *v)
{
    tern_status st = need(ps, 8, field);
    if (st) return st;
    *v = gguf_rd_u64(ps->p + ps->pos);
    ps->pos += 8;
    return TERN_OK;
}

/* A GGUF string: u64 length then bytes, which must lie inside the file. */
static tern_status rd_str(struct parser *ps, const char *field, struct tern_str *out)
{
    uint64_t at = ps->pos;
    uint64_t len;
    tern_status st = rd_u64(ps, field, &len);
    if (st) return st;
    if (len > ps->size - ps->pos)
        return fail_at(ps, at, "%s length %llu runs past the end of the file (%llu bytes left)",
                       field, (ull)len, (ull)(ps->size - ps->pos));
    out->ptr = (const char *)ps->p + ps->pos;
    out->len = len;
    ps->pos += len;
    TERN_ASSERT(ps->pos <= ps->size);
    return TERN_OK;
}

/* A key or tensor name: non-empty, bounded, no NUL (looked up as C strings). */
static tern_status rd_name(struct parser *ps, const char *field, struct tern_str *out)
{
    uint64_t at = ps->pos;
    tern_status st = rd_str(ps, field, out);
    if (st) return st;
    if (out->len == 0) return fail_at(ps, at, "%s is empty", field);
    if (out->len > GGUF_MAX_NAME_LEN)
        return fail_at(ps, at, "%s length %llu exceeds %u", field, (ull)out->len,
                       GGUF_MAX_NAME_LEN);
    if (memchr(out->ptr, '\0', out->len))
        return fail_at(ps, at + 8, "%s contains a NUL byte", field);
    return TERN_OK;
}

static tern_status check_bools(const struct parser *ps, uint64_t at, uint64_t n)
{
    for (uint64_t j = 0; j < n; j++)
        if (ps->p[at + j] > 1)
            return fail_at(ps, at + j, "bool value %u is neither 0 nor 1", ps->p[at + j]);
    return TERN_OK;
}

/* Array body at ps->pos: u32 elem type, u64 count, elements. depth 1 = a top-level array.
 * If str_offsets is non-NULL and the elements are strings, *str_offsets receives a malloc'ed
 * table of each string's offset (caller frees). */
static tern_status parse_array(struct parser *ps, int depth, uint32_t *elem_type_out,
                               uint64_t *count_out, uint64_t **str_offsets)
{
    uint64_t type_at = ps->pos;
    uint32_t et;
    uint64_t n;
    tern_status st = rd_u32(ps, "array element type", &et);
    if (st) return st;
    if (et > TERN_GGUF_FLOAT64) return fail_at(ps, type_at, "unknown array element type %u", et);
    if (et == TERN_GGUF_ARRAY && depth >= GGUF_MAX_ARRAY_DEPTH)
        return fail_at(ps, type_at, "arrays nested deeper than %d levels", GGUF_MAX_ARRAY_DEPTH);
    uint64_t count_at = ps->pos;
    if ((st = rd_u64(ps, "array length", &n))) return st;

    /* Refuse counts that cannot fit before walking or allocating anything. */
    uint64_t min = et == TERN_GGUF_STRING ? 8 : et == TERN_GGUF_ARRAY ? 12 : gguf_type_size(et);
    uint64_t left = ps->size - ps->pos;
    if (n > left / min)
        return fail_at(ps, count_at,
                       "array of %llu %s elements cannot fit in the %llu bytes left", (ull)n,
                       gguf_type_name(et), (ull)left);
    *elem_type_out = et;
    *count_out = n;

    if (et == TERN_GGUF_STRING) {
        uint64_t *offs = NULL;
        if (str_offsets && n > 0) {
            offs = malloc(n * sizeof *offs);
            if (!offs)
                return tern_fail(TERN_ERR_NOMEM, "%s: %s: out of memory for %llu string offsets",
                                 ps->file, ps->what, (ull)n);
        }
        for (uint64_t j = 0; j < n; j++) {
            struct tern_str s;
            if (offs) offs[j] = ps->pos;
            if ((st = rd_str(ps, "array string", &s))) {
                free(offs);
                return st;
            }
        }
        if (str_offsets) *str_offsets = offs;
    } else if (et == TERN_GGUF_ARRAY) {
        for (uint64_t j = 0; j < n; j++) {
            uint32_t inner_t;
            uint64_t inner_n;
            if ((st = parse_array(ps, depth + 1, &inner_t, &inner_n, NULL))) return st;
        }
    } else {
        uint64_t bytes = n * min; /* n <= left / min: no overflow, inside the file */
        if (et == TERN_GGUF_BOOL && (st = check_bools(ps, ps->pos, n))) return st;
        ps->pos += bytes;
    }
    return TERN_OK;
}

static tern_status parse_value(struct parser *ps, struct gguf_kv *kv)
{
    tern_status st;
    kv->value_offset = ps->pos;
    if (kv->type == TERN_GGUF_STRING) {
        struct tern_str s;
        if ((st = rd_str(ps, "string value", &s))) return st;
    } else if (kv->type == TERN_GGUF_ARRAY) {
        uint32_t et;
        if ((st = parse_array(ps, 1, &et, &kv->arr_len, &kv->str_offsets))) return st;
        kv->arr_type = (enum tern_gguf_type)et;
        kv->arr_data_offset = kv->value_offset + 12;
    } else {
        uint64_t sz = gguf_type_size(kv->type);
        if ((st = need(ps, sz, gguf_type_name(kv->type)))) return st;
        if (kv->type == TERN_GGUF_BOOL && (st = check_bools(ps, ps->pos, 1))) return st;
        ps->pos += sz;
    }
    kv->value_size = ps->pos - kv->value_offset;
    return TERN_OK;
}

static struct tern_str kv_name(const void *ctx, int64_t id)
{
    return ((const struct tern_gguf *)ctx)->kv[id].key;
}

static struct tern_str tensor_name(const void *ctx, int64_t id)
{
    return ((const struct tern_gguf *)ctx)->tensors[id].name;
}

static void set_what(struct parser *ps, const char *kind, int64_t i, struct tern_str name)
{
    char q[200];
    quote_name(q, sizeof q, name.ptr, name.len);
    snprintf(ps->what, sizeof ps->what, "%s %lld ('%s')", kind, (long long)i, q);
}

static tern_status parse_kvs(struct parser *ps, struct tern_gguf *g)
{
    tern_status st;
    for (int64_t i = 0; i < g->n_kv; i++) {
        struct gguf_kv *kv = &g->kv[i];
        snprintf(ps->what, sizeof ps->what, "kv %lld", (long long)i);
        kv->key_offset = ps->pos;
        if ((st = rd_name(ps, "key", &kv->key))) return st;
        set_what(ps, "kv", i, kv->key);
        uint64_t type_at = ps->pos;
        uint32_t type;
        if ((st = rd_u32(ps, "value type", &type))) return st;
        if (type > TERN_GGUF_FLOAT64) return fail_at(ps, type_at, "unknown value type %u", type);
        kv->type = (enum tern_gguf_type)type;
        if ((st = parse_value(ps, kv))) return st;
        int64_t dup = gguf_index_insert(&g->kv_index, kv->key.ptr, kv->key.len, i, kv_name, g);
        if (dup >= 0)
            return fail_at(ps, kv->key_offset, "duplicate key (first defined by kv %lld at %llu)",
                           (long long)dup, (ull)g->kv[dup].key_offset);
    }
    return TERN_OK;
}

static tern_status read_alignment(struct parser *ps, struct tern_gguf *g)
{
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    int64_t i = gguf_index_find(&g->kv_index, "general.alignment", 17, kv_name, g);
    if (i < 0) return TERN_OK;
    const struct gguf_kv *kv = &g->kv[i];
    set_what(ps, "kv", i, kv->key);
    if (kv->type != TERN_GGUF_UINT32)
        return fail_at(ps, kv->value_offset, "type %s, expected uint32",
                       gguf_type_name(kv->type));
    uint32_t a = gguf_rd_u32(ps->p + kv->value_offset);
    if (a == 0 || (a & (a - 1)) != 0)
        return fail_at(ps, kv->value_offset, "alignment %u is not a power of two", a);
    g->alignment = a;
    TERN_ASSERT(g->alignment && (g->alignment & (g->alignment - 1)) == 0);
    return TERN_OK;
}

/* One tensor info at ps->pos; *offset_at receives where its offset field is (for messages). */
static tern_status parse_info(struct parser *ps, struct tern_gguf *g, int64_t i,
                              uint64_t *offset_at)
{
    struct tern_gguf_tensor *t = &g->tensors[i];
    tern_status st;
    uint64_t at = ps->pos;
    snprintf(ps->what, sizeof ps->what, "tensor info %lld", (long long)i);
    if ((st = rd_name(ps, "tensor name", &t->name))) return st;
    set_what(ps, "tensor info", i, t->name);
    int64_t dup = gguf_index_insert(&g->tensor_index, t->name.ptr, t->name.len, i, tensor_name, g);
    if (dup >= 0) return fail_at(ps, at, "duplicate tensor name (first used by tensor %lld)",
                                 (long long)dup);

    uint64_t dims_at = ps->pos;
    uint32_t n_dims;
    if ((st = rd_u32(ps, "n_dims", &n_dims))) return st;
    if (n_dims < 1 || n_dims > TERN_MAX_DIMS)
        return fail_at(ps, dims_at, "n_dims = %u, expected 1..%d", n_dims, TERN_MAX_DIMS);
    t->n_dims = (int)n_dims;
    uint64_t n_el = 1;
    for (int d = 0; d < TERN_MAX_DIMS; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t ne_at = ps->pos, ne;
        if ((st = rd_u64(ps, "dimension", &ne))) return st;
        if (ne == 0 || ne >= GGUF_MAX_ELEMENTS)
            return fail_at(ps, ne_at, "dimension %u = %llu", d, (ull)ne);
        if (n_el > (GGUF_MAX_ELEMENTS - 1) / ne)
            return fail_at(ps, ne_at, "element count overflows 2^62 at dimension %u = %llu", d,
                           (ull)ne);
        n_el *= ne;
        t->ne[d] = (int64_t)ne;
    }

    uint64_t type_at = ps->pos;
    uint32_t type;
    if ((st = rd_u32(ps, "tensor type", &type))) return st;
    int64_t bs = type < TERN_TYPE_COUNT_ ? tern_type_block_size((int)type) : 0;
    int64_t bb = type < TERN_TYPE_COUNT_ ? tern_type_block_bytes((int)type) : 0;
    if (bs <= 0 || bb <= 0) return fail_at(ps, type_at, "unknown tensor type id %u", type);
    t->type = (int)type;
    if (t->ne[0] % bs != 0)
        return fail_at(ps, dims_at + 4,
                       "dimension 0 = %lld is not a multiple of the block size %lld of type %s",
                       (long long)t->ne[0], (long long)bs, tern_type_name(t->type));
    uint64_t blocks = n_el / (uint64_t)bs;
    if (blocks > UINT64_MAX / (uint64_t)bb || blocks * (uint64_t)bb > (uint64_t)INT64_MAX)
        return fail_at(ps, dims_at, "byte size of %llu elements of type %s overflows",
                       (ull)n_el, tern_type_name(t->type));
    t->nbytes = blocks * (uint64_t)bb;
    /* the model reads rows of ne[0] elements: the size is whole rows of whole blocks */
    TERN_ASSERT(t->nbytes % (uint64_t)bb == 0 && t->nbytes / (uint64_t)bb * (uint64_t)bs == n_el,
                "tensor bytes are whole blocks of its elements");

    *offset_at = ps->pos;
    if ((st = rd_u64(ps, "data offset", &t->offset))) return st;
    if (t->offset % g->alignment != 0)
        return fail_at(ps, *offset_at, "data offset %llu is not a multiple of the alignment %llu",
                       (ull)t->offset, (ull)g->alignment);
    return TERN_OK;
}

/* (offset, index) pairs sorted by offset; self-contained so that opens on several threads
 * need no shared sort context. */
struct span {
    uint64_t offset;
    int64_t index;
};

static int by_offset(const void *a, const void *b)
{
    uint64_t x = ((const struct span *)a)->offset, y = ((const struct span *)b)->offset;
    return x < y ? -1 : x > y;
}

/* Every tensor's bytes inside the file, and no two tensors sharing a byte. */
static tern_status check_ranges(struct parser *ps, struct tern_gguf *g, const uint64_t *offset_at)
{
    uint64_t room = ps->size - g->data_offset;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        struct tern_gguf_tensor *t = &g->tensors[i];
        set_what(ps, "tensor info", i, t->name);
        if (t->offset > room || t->nbytes > room - t->offset)
            return fail_at(ps, offset_at[i],
                           "data [%llu, +%llu) past the end of the data section (%llu bytes "
                           "from offset %llu)",
                           (ull)t->offset, (ull)t->nbytes, (ull)room, (ull)g->data_offset);
        t->data = ps->p + g->data_offset + t->offset;
        /* inside the data section, aligned as the file says (offsets are multiples of it) */
        TERN_ASSERT((const uint8_t *)t->data >= ps->p + g->data_offset &&
                    (uint64_t)((const uint8_t *)t->data - ps->p) + t->nbytes <= ps->size);
        TERN_ASSERT((g->data_offset + t->offset) % g->alignment == 0 || g->data_offset == ps->size);
    }
    if (g->n_tensors < 2) return TERN_OK;
    struct span *order = malloc((size_t)g->n_tensors * sizeof *order);
    if (!order) return tern_fail(TERN_ERR_NOMEM, "%s: out of memory sorting tensors", ps->file);
    for (int64_t i = 0; i < g->n_tensors; i++) order[i] = (struct span){g->tensors[i].offset, i};
    qsort(order, (size_t)g->n_tensors, sizeof *order, by_offset);
    tern_status st = TERN_OK;
    for (int64_t k = 1; k < g->n_tensors && !st; k++) {
        const struct tern_gguf_tensor *a = &g->tensors[order[k - 1].index];
        const struct tern_gguf_tensor *b = &g->tensors[order[k].index];
        TERN_ASSERT(a->offset <= b->offset, "sorted by offset");
        if (a->offset + a->nbytes > b->offset) {
            char qa[200];
            quote_name(qa, sizeof qa, a->name.ptr, a->name.len);
            set_what(ps, "tensor info", order[k].index, b->name);
            st = fail_at(ps, offset_at[order[k].index],
                         "data [%llu, +%llu) overlaps tensor %lld ('%s') data [%llu, +%llu)",
                         (ull)b->offset, (ull)b->nbytes, (long long)order[k - 1].index, qa,
                         (ull)a->offset, (ull)a->nbytes);
        }
    }
    free(order);
    return st;
}

static tern_status parse_tensors(struct parser *ps, struct tern_gguf *g)
{
    uint64_t *offset_at = malloc((size_t)(g->n_tensors ? g->n_tensors : 1) * sizeof *offset_at);
    if (!offset_at) return tern_fail(TERN_ERR_NOMEM, "%s: out of memory", ps->file);
    tern_status st = TERN_OK;
    for (int64_t i = 0; i < g->n_tensors && !st; i++) st = parse_info(ps, g, i, &offset_at[i]);
    if (!st) {
        /* pos <= size < 2^63 and alignment <= 2^31: the round-up cannot overflow. */
        uint64_t end = ps->pos;
        g->data_offset = (end + g->alignment - 1) / g->alignment * g->alignment;
        ps->what[0] = '\0';
        if (g->data_offset > ps->size) {
            if (g->n_tensors > 0)
                st = fail_at(ps, end,
                             "data section would start at offset %llu, past the end of the "
                             "file (%llu bytes); tensor infos end",
                             (ull)g->data_offset, (ull)ps->size);
            g->data_offset = ps->size; /* vocab-only files may stop right after the metadata */
        }
        TERN_ASSERT(g->data_offset <= ps->size && (g->data_offset >= end || g->data_offset == ps->size));
    }
    if (!st) st = check_ranges(ps, g, offset_at);
    free(offset_at);
    return st;
}

static tern_status parse_header(struct parser *ps, struct tern_gguf *g)
{
    if (ps->size < 4)
        return fail_at(ps, 0, "file is %llu bytes, too short for the GGUF magic",
                       (ull)ps->size);
    if (memcmp(ps->p, GGUF_MAGIC, 4) != 0)
        return fail_at(ps, 0, "bad magic %02x %02x %02x %02x (expected \"GGUF\")", ps->p[0],
                       ps->p[1], ps->p[2], ps->p[3]);
    ps->pos = 4;
    tern_status st;
    uint32_t version;
    if ((st = rd_u32(ps, "version", &version))) return st;
    if (version == 1)
        return fail_at(ps, 4, "GGUF version 1 is not supported (only versions 2 and 3)");
    if (version == 0x02000000u || version == 0x03000000u)
        return fail_at(ps, 4, "big-endian GGUF files are not supported");
    if (version != 2 && version != 3)
        return fail_at(ps, 4, "unknown GGUF version %u (supported: 2 and 3)", version);
    g->version = version;

    uint64_t nt, nk;
    if ((st = rd_u64(ps, "tensor count", &nt))) return st;
    if ((st = rd_u64(ps, "kv count", &nk))) return st;
    uint64_t left = ps->size - ps->pos;
    if (nk > left / GGUF_MIN_KV_BYTES)
        return fail_at(ps, 16, "kv count %llu cannot fit in the %llu bytes left", (ull)nk,
                       (ull)left);
    if (nt > (left - nk * GGUF_MIN_KV_BYTES) / GGUF_MIN_INFO_BYTES)
        return fail_at(ps, 8, "tensor count %llu cannot fit in the %llu bytes left", (ull)nt,
                       (ull)left);
    g->n_kv = (int64_t)nk; /* both bounded by the file size */
    g->n_tensors = (int64_t)nt;
    TERN_ASSERT(g->n_kv >= 0 && g->n_tensors >= 0 && ps->pos == 24, "the header is 24 bytes");
    return TERN_OK;
}

static void free_contents(struct tern_gguf *g)
{
    if (g->kv)
        for (int64_t i = 0; i < g->n_kv; i++) free(g->kv[i].str_offsets);
    free(g->kv);
    free(g->tensors);
    gguf_index_free(&g->kv_index);
    gguf_index_free(&g->tensor_index);
}

static tern_status parse(struct tern_gguf *g, const char *file)
{
    struct parser ps = {.p = g->data, .size = g->size, .pos = 0, .file = file};
    ps.what[0] = '\0';
    tern_status st = parse_header(&ps, g);
    if (st) return st;
    /* calloc: entries not parsed yet hold NULL str_offsets, so cleanup may free them all. */
    g->kv = calloc((size_t)(g->n_kv ? g->n_kv : 1), sizeof *g->kv);
    g->tensors = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *g->tensors);
    if (!g->kv || !g->tensors)
        return tern_fail(TERN_ERR_NOMEM, "%s: out of memory for %lld kvs and %lld tensors",
                         file, (long long)g->n_kv, (long long)g->n_tensors);
    if ((st = gguf_index_init(&g->kv_index, (uint64_t)g->n_kv))) return st;
    if ((st = gguf_index_init(&g->tensor_index, (uint64_t)g->n_tensors))) return st;
    if ((st = parse_kvs(&ps, g))) return st;
    if ((st = read_alignment(&ps, g))) return st;
    return parse_tensors(&ps, g);
}

static tern_status open_common(const uint8_t *data, size_t size, int mapped, const char *file,
                               struct tern_gguf **out)
{
    struct tern_gguf *g = calloc(1, sizeof *g);
    if (!g) return tern_fail(TERN_ERR_NOMEM, "%s: out of memory", file);
    g->data = data;
    g->size = size;
    g->mapped = mapped;
    tern_status st = parse(g, file);
    if (st) {
        free_contents(g);
        free(g);
        return st;
    }
    *out = g;
    return TERN_OK;
}

tern_status tern_gguf_open_memory(const void *data, size_t size, struct tern_gguf **out)
{
    if (!out || (!data && size)) return tern_fail(TERN_ERR_ARG, "tern_gguf_open_memory: NULL");
    if (size == 0)
        return tern_fail(TERN_ERR_FORMAT, "<memory>: empty buffer, no GGUF magic at offset 0");
    return open_common(data, size, 0, "<memory>", out);
}

tern_status tern_gguf_open(const char *path, struct tern_gguf **out)
{
    if (!path || !out) return tern_fail(TERN_ERR_ARG, "tern_gguf_open: NULL argument");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tern_fail(TERN_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return tern_fail(TERN_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return tern_fail(TERN_ERR_IO, "%s: not a regular file", path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return tern_fail(TERN_ERR_FORMAT, "%s: file is empty, no GGUF magic at offset 0", path);
    }
    size_t size = (size_t)sb.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd); /* the mapping keeps the file alive */
    if (map == MAP_FAILED)
        return tern_fail(TERN_ERR_IO, "%s: cannot mmap %llu bytes: %s", path, (ull)size,
                         strerror(e));
    tern_status st = open_common(map, size, 1, path, out);
    if (st) munmap(map, size);
    return st;
}

void tern_gguf_close(struct tern_gguf *g)
{
    if (!g) return;
    free_contents(g);
    if (g->mapped) munmap((void *)g->data, g->size);
    free(g);
}

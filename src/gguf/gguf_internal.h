/* gguf_internal.h — the in-memory shape of an opened GGUF file, shared by the reader
 * (gguf_read.c: parse + validate), the accessors (gguf_query.c), the name index (gguf_index.c)
 * and the writer (gguf_write.c, which copies raw KV values out of an open file).
 *
 * Read include/tern.h ("GGUF") first. Layout of a GGUF file (little endian):
 *   "GGUF" u32 version  u64 n_tensors  u64 n_kv
 *   n_kv    x { str key, u32 value_type, value }
 *   n_tensors x { str name, u32 n_dims, u64 ne[n_dims], u32 type, u64 offset }
 *   padding to general.alignment (default 32), then the data section.
 *   str = u64 length + bytes (no NUL); array value = u32 elem_type, u64 count, elements.
 * Every offset kept below is a byte offset from the start of the file and has been checked
 * to lie inside it, so the accessors never re-validate. */
#ifndef TERN_GGUF_INTERNAL_H
#define TERN_GGUF_INTERNAL_H

#include "tern_gguf.h"

#include <stdint.h>
#include <string.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32u
/* Arrays inside arrays inside ... : deeper than this is refused (bounds recursion). */
#define GGUF_MAX_ARRAY_DEPTH 8
/* Keys and tensor names longer than this are refused (real ones are < 256 bytes). */
#define GGUF_MAX_NAME_LEN 65535u

struct gguf_kv {
    struct tern_str key;
    enum tern_gguf_type type;
    uint64_t key_offset;       /* where the key's length field starts (for messages) */
    uint64_t value_offset;     /* first byte after the u32 value type */
    uint64_t value_size;       /* bytes of the value (arrays: incl. elem type and count) */
    enum tern_gguf_type arr_type; /* arrays only */
    uint64_t arr_len;             /* arrays only */
    uint64_t arr_data_offset;     /* arrays only: first element */
    uint64_t *str_offsets;     /* string arrays only: arr_len offsets of each string's length
                                  field (O(1) tern_gguf_arr_str); owned, NULL otherwise */
};

/* Open-addressing hash from names to indices (keys, tensor names). */
struct gguf_index {
    int64_t *slots;            /* cap entries, -1 = empty */
    uint64_t cap;              /* power of two, >= 2 * count */
};

struct tern_gguf {
    const uint8_t *data;       /* whole file */
    size_t size;
    int mapped;                /* 1: data is our mmap (munmap on close); 0: caller's buffer */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;      /* start of the data section */
    int64_t n_kv;
    struct gguf_kv *kv;        /* [n_kv] */
    int64_t n_tensors;
    struct tern_gguf_tensor *tensors; /* [n_tensors] */
    struct gguf_index kv_index;
    struct gguf_index tensor_index;
};

/* Byte size of a fixed-size metadata value type; 0 for STRING, ARRAY and unknown ids. */
uint64_t gguf_type_size(uint32_t type);
/* Name of a metadata value type ("uint32", ...) or "unknown". */
const char *gguf_type_name(uint32_t type);

static inline uint64_t gguf_rd_u64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v; /* GGUF is little endian, as is every target tern builds for */
}
static inline uint32_t gguf_rd_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Name index sized for count names; TERN_ERR_NOMEM (with a message) if allocation fails. */
TERN_NODISCARD tern_status gguf_index_init(struct gguf_index *ix, uint64_t count);
void gguf_index_free(struct gguf_index *ix);
/* Insert name -> id; returns -1 if inserted, else the id of the existing equal name.
 * names(ctx, id) gives the name stored for an id. */
int64_t gguf_index_insert(struct gguf_index *ix, const char *name, uint64_t len, int64_t id,
                          struct tern_str (*names)(const void *ctx, int64_t id), const void *ctx);
int64_t gguf_index_find(const struct gguf_index *ix, const char *name, uint64_t len,
                        struct tern_str (*names)(const void *ctx, int64_t id), const void *ctx);

#endif

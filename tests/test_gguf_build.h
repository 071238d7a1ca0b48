/* test_gguf_build.h — a tiny byte builder for hand-made GGUF files in the gguf tests.
 *
 * The writer cannot produce everything the reader must handle (scalar u8/i16/f64 values,
 * nested arrays, broken files), so tests assemble bytes directly and remember where each
 * field landed (gb_pos) to corrupt it precisely later. Not part of libtern. */
#ifndef TEST_GGUF_BUILD_H
#define TEST_GGUF_BUILD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct gb {
    uint8_t *p;
    size_t len, cap;
};

static inline void gb_bytes(struct gb *b, const void *src, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) abort(); /* test helper: out of memory in a test is fatal */
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, src, n);
    b->len += n;
}
static inline size_t gb_pos(const struct gb *b) { return b->len; }
static inline void gb_u8(struct gb *b, uint8_t v) { gb_bytes(b, &v, 1); }
static inline void gb_u16(struct gb *b, uint16_t v) { gb_bytes(b, &v, 2); }
static inline void gb_u32(struct gb *b, uint32_t v) { gb_bytes(b, &v, 4); }
static inline void gb_u64(struct gb *b, uint64_t v) { gb_bytes(b, &v, 8); }
static inline void gb_f32(struct gb *b, float v) { gb_bytes(b, &v, 4); }
static inline void gb_f64(struct gb *b, double v) { gb_bytes(b, &v, 8); }
static inline void gb_str(struct gb *b, const char *s)
{
    gb_u64(b, strlen(s));
    gb_bytes(b, s, strlen(s));
}
/* A KV header: key then value type; the caller appends the value. */
static inline void gb_key(struct gb *b, const char *key, uint32_t type)
{
    gb_str(b, key);
    gb_u32(b, type);
}
static inline void gb_header(struct gb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    gb_bytes(b, "GGUF", 4);
    gb_u32(b, version);
    gb_u64(b, n_tensors);
    gb_u64(b, n_kv);
}
static inline void gb_pad(struct gb *b, size_t align)
{
    while (b->len % align) gb_u8(b, 0);
}
static inline void gb_set_u32(struct gb *b, size_t at, uint32_t v) { memcpy(b->p + at, &v, 4); }
static inline void gb_set_u64(struct gb *b, size_t at, uint64_t v) { memcpy(b->p + at, &v, 8); }

#endif

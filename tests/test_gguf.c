/* test_gguf.c — GGUF reader and writer against hand-built files, round trips and the real
 * fixture models and vocabularies (expected values from ../shared/fixtures/README.md).
 * Corruption and mutation robustness lives in test_gguf_robust.c. */
#include "test_support.h"
#include "test_gguf_build.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int str_eq(struct tern_str s, const char *c)
{
    return s.ptr && s.len == strlen(c) && memcmp(s.ptr, c, s.len) == 0;
}

/* ---- a hand-built file holding every value type, nested arrays included ---- */

#define N_ALL_KV 23
struct all_types {
    struct gb b;
    size_t val_off[N_ALL_KV]; /* value offset (after the type) of each kv, in order */
    size_t val_len[N_ALL_KV];
};

static void kv_begin(struct all_types *a, int *k, const char *key, uint32_t type)
{
    gb_key(&a->b, key, type);
    a->val_off[*k] = gb_pos(&a->b);
}
static void kv_end(struct all_types *a, int *k)
{
    a->val_len[*k] = gb_pos(&a->b) - a->val_off[*k];
    (*k)++;
}

static void build_all_types(struct all_types *a)
{
    memset(a, 0, sizeof *a);
    struct gb *b = &a->b;
    int k = 0;
    gb_header(b, 3, 0, N_ALL_KV);
    kv_begin(a, &k, "t.u8", TERN_GGUF_UINT8); gb_u8(b, 200); kv_end(a, &k);
    kv_begin(a, &k, "t.i8", TERN_GGUF_INT8); gb_u8(b, (uint8_t)-5); kv_end(a, &k);
    kv_begin(a, &k, "t.u16", TERN_GGUF_UINT16); gb_u16(b, 60000); kv_end(a, &k);
    kv_begin(a, &k, "t.i16", TERN_GGUF_INT16); gb_u16(b, (uint16_t)-30000); kv_end(a, &k);
    kv_begin(a, &k, "t.u32", TERN_GGUF_UINT32); gb_u32(b, 4000000000u); kv_end(a, &k);
    kv_begin(a, &k, "t.i32", TERN_GGUF_INT32); gb_u32(b, (uint32_t)-2000000000); kv_end(a, &k);
    kv_begin(a, &k, "t.f32", TERN_GGUF_FLOAT32); gb_f32(b, 1.5f); kv_end(a, &k);
    kv_begin(a, &k, "t.bool", TERN_GGUF_BOOL); gb_u8(b, 1); kv_end(a, &k);
    kv_begin(a, &k, "t.str", TERN_GGUF_STRING); gb_str(b, "h\xc3\xa9llo"); kv_end(a, &k);
    kv_begin(a, &k, "t.u64", TERN_GGUF_UINT64); gb_u64(b, (1ull << 40) + 3); kv_end(a, &k);
    kv_begin(a, &k, "t.i64", TERN_GGUF_INT64); gb_u64(b, (uint64_t)-(1ll << 40)); kv_end(a, &k);
    kv_begin(a, &k, "t.f64", TERN_GGUF_FLOAT64); gb_f64(b, 3.25); kv_end(a, &k);
    kv_begin(a, &k, "t.big_u64", TERN_GGUF_UINT64); gb_u64(b, UINT64_MAX); kv_end(a, &k);
    kv_begin(a, &k, "t.neg_i32", TERN_GGUF_INT32); gb_u32(b, (uint32_t)-1); kv_end(a, &k);
    /* arrays of fixed-size types */
    kv_begin(a, &k, "t.arr.u16", TERN_GGUF_ARRAY);
    gb_u32(b, TERN_GGUF_UINT16); gb_u64(b, 3); gb_u16(b, 1); gb_u16(b, 2); gb_u16(b, 65535);
    kv_end(a, &k);
    kv_begin(a, &k, "t.arr.f64", TERN_GGUF_ARRAY);
    gb_u32(b, TERN_GGUF_FLOAT64); gb_u64(b, 2); gb_f64(b, -1.0); gb_f64(b, 0.125);
    kv_end(a, &k);
    kv_begin(a, &k, "t.arr.bool", TERN_GGUF_ARRAY);
    gb_u32(b, TERN_GGUF_BOOL); gb_u64(b, 3); gb_u8(b, 1); gb_u8(b, 0); gb_u8(b, 1);
    kv_end(a, &k);
    kv_begin(a, &k, "t.arr.i8", TERN_GGUF_ARRAY);
    gb_u32(b, TERN_GGUF_INT8); gb_u64(b, 2); gb_u8(b, 0x80); gb_u8(b, 0x7f);
    kv_end(a, &k);
    kv_begin(a, &k, "t.arr.str", TERN_GGUF_ARRAY);
    gb_u32(b, TERN_GGUF_STRING); gb_u64(b, 3); gb_str(b, "a"); gb_str(b, ""); gb_str(b, "xyz");
    kv_end(a, &k);
    kv_begin(a, &k, "t.arr.empty", TERN_GGUF_ARRAY);
    gb_u32(b, TERN_GGUF_UINT32); gb_u64(b, 0);
    kv_end(a, &k);
    /* nested: [[1,2,3] (u16), ["p","q"], [[7] (i32)]] */
    kv_begin(a, &k, "t.arr.nested", TERN_GGUF_ARRAY);
    gb_u32(b, TERN_GGUF_ARRAY); gb_u64(b, 3);
    gb_u32(b, TERN_GGUF_UINT16); gb_u64(b, 3); gb_u16(b, 1); gb_u16(b, 2); gb_u16(b, 3);
    gb_u32(b, TERN_GGUF_STRING); gb_u64(b, 2); gb_str(b, "p"); gb_str(b, "q");
    gb_u32(b, TERN_GGUF_ARRAY); gb_u64(b, 1);
    gb_u32(b, TERN_GGUF_INT32); gb_u64(b, 1); gb_u32(b, 7);
    kv_end(a, &k);
    kv_begin(a, &k, "t.arr.nested_empty", TERN_GGUF_ARRAY);
    gb_u32(b, TERN_GGUF_ARRAY); gb_u64(b, 0);
    kv_end(a, &k);
    kv_begin(a, &k, "general.alignment", TERN_GGUF_UINT32); gb_u32(b, 16); kv_end(a, &k);
    assert_int_equal(k, N_ALL_KV);
}

static void check_all_types(const struct tern_gguf *g)
{
    uint32_t u32;
    int64_t i64;
    float f;
    bool bo;
    struct tern_str s;
    assert_int_equal(tern_gguf_n_tensors(g), 0);

    assert_tern_ok(tern_gguf_get_u32(g, "t.u8", &u32));
    assert_int_equal(u32, 200);
    assert_tern_ok(tern_gguf_get_i64(g, "t.i8", &i64));
    assert_int_equal(i64, -5);
    assert_tern_ok(tern_gguf_get_u32(g, "t.u16", &u32));
    assert_int_equal(u32, 60000);
    assert_tern_ok(tern_gguf_get_i64(g, "t.i16", &i64));
    assert_int_equal(i64, -30000);
    assert_tern_ok(tern_gguf_get_u32(g, "t.u32", &u32));
    assert_int_equal(u32, 4000000000u);
    assert_tern_ok(tern_gguf_get_i64(g, "t.i32", &i64));
    assert_int_equal(i64, -2000000000);
    assert_tern_ok(tern_gguf_get_f32(g, "t.f32", &f));
    assert_true(f == 1.5f);
    assert_tern_ok(tern_gguf_get_bool(g, "t.bool", &bo));
    assert_true(bo);
    assert_tern_ok(tern_gguf_get_str(g, "t.str", &s));
    assert_true(str_eq(s, "h\xc3\xa9llo"));
    assert_tern_ok(tern_gguf_get_i64(g, "t.u64", &i64));
    assert_int_equal(i64, (1ll << 40) + 3);
    assert_tern_ok(tern_gguf_get_i64(g, "t.i64", &i64));
    assert_int_equal(i64, -(1ll << 40));
    assert_tern_ok(tern_gguf_get_f32(g, "t.f64", &f));
    assert_true(f == 3.25f);

    /* Conversions that do not fit are refused with the key named; wrong types likewise. */
    assert_int_equal(tern_gguf_get_u32(g, "t.u64", &u32), TERN_ERR_FORMAT);
    assert_non_null(strstr(tern_last_error(), "t.u64"));
    assert_int_equal(tern_gguf_get_u32(g, "t.neg_i32", &u32), TERN_ERR_FORMAT);
    assert_int_equal(tern_gguf_get_i64(g, "t.big_u64", &i64), TERN_ERR_FORMAT);
    assert_int_equal(tern_gguf_get_u32(g, "t.str", &u32), TERN_ERR_FORMAT);
    assert_non_null(strstr(tern_last_error(), "string"));
    assert_int_equal(tern_gguf_get_f32(g, "t.u32", &f), TERN_ERR_FORMAT);
    assert_int_equal(tern_gguf_get_bool(g, "t.u8", &bo), TERN_ERR_FORMAT);
    assert_int_equal(tern_gguf_get_str(g, "t.arr.str", &s), TERN_ERR_FORMAT);
    assert_int_equal(tern_gguf_get_u32(g, "no.such.key", &u32), TERN_ERR_NOT_FOUND);
    assert_non_null(strstr(tern_last_error(), "no.such.key"));
    assert_int_equal(tern_gguf_find_key(g, "t.u"), -1);

    /* arrays */
    int64_t i = tern_gguf_find_key(g, "t.arr.u16");
    assert_true(i >= 0);
    assert_true(str_eq(tern_gguf_key(g, i), "t.arr.u16"));
    assert_int_equal(tern_gguf_kv_type(g, i), TERN_GGUF_ARRAY);
    assert_int_equal(tern_gguf_arr_type(g, i), TERN_GGUF_UINT16);
    assert_int_equal(tern_gguf_arr_len(g, i), 3);
    uint16_t u16[3];
    memcpy(u16, tern_gguf_arr_data(g, i), sizeof u16);
    assert_int_equal(u16[0], 1);
    assert_int_equal(u16[2], 65535);

    i = tern_gguf_find_key(g, "t.arr.f64");
    double d[2];
    memcpy(d, tern_gguf_arr_data(g, i), sizeof d);
    assert_true(d[0] == -1.0 && d[1] == 0.125);

    i = tern_gguf_find_key(g, "t.arr.bool");
    assert_memory_equal(tern_gguf_arr_data(g, i), "\1\0\1", 3);

    i = tern_gguf_find_key(g, "t.arr.str");
    assert_int_equal(tern_gguf_arr_type(g, i), TERN_GGUF_STRING);
    assert_int_equal(tern_gguf_arr_len(g, i), 3);
    assert_null(tern_gguf_arr_data(g, i)); /* not a fixed-size element type */
    assert_true(str_eq(tern_gguf_arr_str(g, i, 0), "a"));
    assert_int_equal(tern_gguf_arr_str(g, i, 1).len, 0);
    assert_non_null(tern_gguf_arr_str(g, i, 1).ptr);
    assert_true(str_eq(tern_gguf_arr_str(g, i, 2), "xyz"));
    assert_null(tern_gguf_arr_str(g, i, 3).ptr); /* out of range */

    i = tern_gguf_find_key(g, "t.arr.empty");
    assert_int_equal(tern_gguf_arr_len(g, i), 0);

    i = tern_gguf_find_key(g, "t.arr.nested");
    assert_int_equal(tern_gguf_arr_type(g, i), TERN_GGUF_ARRAY);
    assert_int_equal(tern_gguf_arr_len(g, i), 3);
    assert_null(tern_gguf_arr_data(g, i));
    /* walk it by hand from the raw value offset: elem type, count, then the first inner array */
    const uint8_t *raw = (const uint8_t *)tern_gguf_file_data(g) + tern_gguf_kv_value_offset(g, i);
    uint32_t et;
    memcpy(&et, raw, 4);
    assert_int_equal(et, TERN_GGUF_ARRAY);
    memcpy(&et, raw + 12, 4);
    assert_int_equal(et, TERN_GGUF_UINT16);

    /* out-of-range indices give empty answers, not crashes */
    assert_null(tern_gguf_key(g, -1).ptr);
    assert_null(tern_gguf_key(g, tern_gguf_n_kv(g)).ptr);
    assert_int_equal(tern_gguf_arr_len(g, 999), 0);
    assert_null(tern_gguf_tensor(g, 0));
    assert_null(tern_gguf_find_tensor(g, "x"));
}

static void test_all_value_types(void **state)
{
    (void)state;
    struct all_types a;
    build_all_types(&a);
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open_memory(a.b.p, a.b.len, &g));
    assert_int_equal(tern_gguf_version(g), 3);
    assert_int_equal(tern_gguf_alignment(g), 16);
    assert_int_equal(tern_gguf_n_kv(g), N_ALL_KV);
    /* no tensors: the data section starts at the end of the metadata (clamped to the size) */
    assert_true(tern_gguf_data_offset(g) <= a.b.len);
    check_all_types(g);
    for (int k = 0; k < N_ALL_KV; k++) assert_int_equal(tern_gguf_kv_value_offset(g, k), a.val_off[k]);
    tern_gguf_close(g);

    /* version 2 is read the same way */
    gb_set_u32(&a.b, 4, 2);
    assert_tern_ok(tern_gguf_open_memory(a.b.p, a.b.len, &g));
    assert_int_equal(tern_gguf_version(g), 2);
    check_all_types(g);
    tern_gguf_close(g);
    free(a.b.p);
}

/* ---- writer round trip ---- */

struct tensor_spec {
    const char *name;
    int type;
    int n_dims;
    int64_t ne[4];
    uint64_t nbytes; /* expected, computed by hand from ggml's block sizes */
};

static const struct tensor_spec specs[] = {
    {"a.f32", TERN_TYPE_F32, 2, {8, 3, 1, 1}, 8 * 3 * 4},
    {"b.f16", TERN_TYPE_F16, 1, {33, 1, 1, 1}, 66},
    {"c.q8_0", TERN_TYPE_Q8_0, 2, {64, 2, 1, 1}, 2 * 2 * 34},
    {"d.q4_k", TERN_TYPE_Q4_K, 2, {256, 3, 1, 1}, 3 * 144},
    {"e.q6_k", TERN_TYPE_Q6_K, 1, {512, 1, 1, 1}, 2 * 210},
    {"f.q4_0", TERN_TYPE_Q4_0, 3, {32, 2, 3, 1}, 6 * 18},
    {"g.bf16.4d", TERN_TYPE_BF16, 4, {2, 3, 4, 5}, 120 * 2},
};
#define N_SPECS (sizeof specs / sizeof specs[0])

static void fill_pattern(uint8_t *p, uint64_t n, unsigned seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (uint64_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        p[i] = (uint8_t)(x >> 24);
    }
}

static void roundtrip(uint32_t alignment)
{
    struct all_types a;
    build_all_types(&a);
    struct tern_gguf *src;
    assert_tern_ok(tern_gguf_open_memory(a.b.p, a.b.len, &src));

    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_writer_create(alignment, &w));
    /* keys set through the typed setters */
    assert_tern_ok(tern_gguf_writer_set_u32(w, "w.u32", 7));
    assert_tern_ok(tern_gguf_writer_set_i32(w, "w.i32", -7));
    assert_tern_ok(tern_gguf_writer_set_u64(w, "w.u64", 1ull << 50));
    assert_tern_ok(tern_gguf_writer_set_f32(w, "w.f32", 0.1f));
    assert_tern_ok(tern_gguf_writer_set_bool(w, "w.bool", false));
    assert_tern_ok(tern_gguf_writer_set_str(w, "w.str", "first"));
    assert_tern_ok(tern_gguf_writer_set_str(w, "w.str", "second")); /* replaces */
    const int32_t ints[4] = {1, -2, 3, -4};
    assert_tern_ok(tern_gguf_writer_set_arr(w, "w.arr.i32", TERN_GGUF_INT32, ints, 4));
    const uint64_t u64s[2] = {UINT64_MAX, 5};
    assert_tern_ok(tern_gguf_writer_set_arr(w, "w.arr.u64", TERN_GGUF_UINT64, u64s, 2));
    const char *strs[] = {"<s>", "", "\xe2\x96\x81hello"};
    assert_tern_ok(tern_gguf_writer_set_arr_str(w, "w.arr.str", strs, 3));
    assert_tern_ok(tern_gguf_writer_set_arr(w, "w.arr.empty", TERN_GGUF_FLOAT32, NULL, 0));
    const uint8_t bools[3] = {0, 1, 0xff}; /* any non-zero byte is written as 1 */
    assert_tern_ok(tern_gguf_writer_set_arr(w, "w.arr.bool", TERN_GGUF_BOOL, bools, 3));
    /* every kv of the hand-built file, nested arrays included, copied verbatim */
    for (int64_t i = 0; i < tern_gguf_n_kv(src); i++) assert_tern_ok(tern_gguf_writer_copy_kv(w, src, i));

    uint8_t *data[N_SPECS];
    for (size_t t = 0; t < N_SPECS; t++) {
        data[t] = malloc(specs[t].nbytes);
        fill_pattern(data[t], specs[t].nbytes, (unsigned)t);
        assert_tern_ok(tern_gguf_writer_add_tensor(w, specs[t].name, specs[t].type,
                                                   specs[t].n_dims, specs[t].ne, data[t]));
    }
    char path[512];
    snprintf(path, sizeof path, "%s/rt%u.gguf", test_tmpdir(), alignment);
    assert_tern_ok(tern_gguf_writer_write(w, path));
    tern_gguf_writer_free(w);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1); /* renamed away */

    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(path, &g));
    assert_int_equal(tern_gguf_version(g), 3);
    /* the writer's alignment wins over the copied general.alignment = 16 */
    assert_int_equal(tern_gguf_alignment(g), alignment);
    uint32_t u32;
    assert_tern_ok(tern_gguf_get_u32(g, "general.alignment", &u32));
    assert_int_equal(u32, alignment);
    assert_int_equal(tern_gguf_n_kv(g), 11 + N_ALL_KV);
    assert_true(str_eq(tern_gguf_key(g, 0), "w.u32")); /* insertion order kept */
    assert_true(str_eq(tern_gguf_key(g, 11), "t.u8"));

    int64_t i64;
    float f;
    bool bo = true;
    struct tern_str s;
    assert_tern_ok(tern_gguf_get_u32(g, "w.u32", &u32));
    assert_int_equal(u32, 7);
    assert_tern_ok(tern_gguf_get_i64(g, "w.i32", &i64));
    assert_int_equal(i64, -7);
    assert_int_equal(tern_gguf_kv_type(g, tern_gguf_find_key(g, "w.i32")), TERN_GGUF_INT32);
    assert_tern_ok(tern_gguf_get_i64(g, "w.u64", &i64));
    assert_int_equal(i64, 1ll << 50);
    assert_tern_ok(tern_gguf_get_f32(g, "w.f32", &f));
    assert_true(f == 0.1f);
    assert_tern_ok(tern_gguf_get_bool(g, "w.bool", &bo));
    assert_false(bo);
    assert_tern_ok(tern_gguf_get_str(g, "w.str", &s));
    assert_true(str_eq(s, "second"));
    int64_t i = tern_gguf_find_key(g, "w.arr.i32");
    assert_int_equal(tern_gguf_arr_type(g, i), TERN_GGUF_INT32);
    assert_int_equal(tern_gguf_arr_len(g, i), 4);
    assert_memory_equal(tern_gguf_arr_data(g, i), ints, sizeof ints);
    i = tern_gguf_find_key(g, "w.arr.u64");
    assert_memory_equal(tern_gguf_arr_data(g, i), u64s, sizeof u64s);
    i = tern_gguf_find_key(g, "w.arr.str");
    for (int j = 0; j < 3; j++) assert_true(str_eq(tern_gguf_arr_str(g, i, (uint64_t)j), strs[j]));
    i = tern_gguf_find_key(g, "w.arr.bool");
    assert_memory_equal(tern_gguf_arr_data(g, i), "\0\1\1", 3);
    i = tern_gguf_find_key(g, "w.arr.empty");
    assert_int_equal(tern_gguf_arr_type(g, i), TERN_GGUF_FLOAT32);
    assert_int_equal(tern_gguf_arr_len(g, i), 0);

    /* copied kvs: the same bytes as the source (general.alignment excepted, see above) */
    const uint8_t *base = tern_gguf_file_data(g);
    for (int k = 0; k < N_ALL_KV - 1; k++) {
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)tern_gguf_key(src, k).len, tern_gguf_key(src, k).ptr);
        int64_t j = tern_gguf_find_key(g, key);
        assert_true(j >= 0);
        assert_int_equal(tern_gguf_kv_type(g, j), tern_gguf_kv_type(src, k));
        assert_memory_equal(base + tern_gguf_kv_value_offset(g, j), a.b.p + a.val_off[k], a.val_len[k]);
    }
    check_all_types(src);

    /* tensors */
    assert_int_equal(tern_gguf_n_tensors(g), (int64_t)N_SPECS);
    uint64_t expect_off = 0;
    assert_int_equal(tern_gguf_data_offset(g) % alignment, 0);
    for (size_t t = 0; t < N_SPECS; t++) {
        const struct tern_gguf_tensor *ti = tern_gguf_tensor(g, (int64_t)t);
        assert_ptr_equal(ti, tern_gguf_find_tensor(g, specs[t].name));
        assert_true(str_eq(ti->name, specs[t].name));
        assert_int_equal(ti->type, specs[t].type);
        assert_int_equal(ti->n_dims, specs[t].n_dims);
        for (int d = 0; d < 4; d++) assert_int_equal(ti->ne[d], specs[t].ne[d]);
        assert_int_equal(ti->nbytes, specs[t].nbytes);
        assert_int_equal(ti->offset, expect_off);
        expect_off = (expect_off + ti->nbytes + alignment - 1) / alignment * alignment;
        assert_int_equal(((const uint8_t *)ti->data - base) % alignment, 0);
        assert_ptr_equal(ti->data, base + tern_gguf_data_offset(g) + ti->offset);
        assert_memory_equal(ti->data, data[t], specs[t].nbytes);
        free(data[t]);
    }
    /* the file ends right after the last tensor */
    const struct tern_gguf_tensor *last = tern_gguf_tensor(g, (int64_t)N_SPECS - 1);
    assert_int_equal(tern_gguf_file_size(g), tern_gguf_data_offset(g) + last->offset + last->nbytes);
    assert_null(tern_gguf_find_tensor(g, "a.f3"));
    tern_gguf_close(g);
    tern_gguf_close(src);
    free(a.b.p);
}

static void test_roundtrip_align32(void **state)
{
    (void)state;
    roundtrip(32);
}

static void test_roundtrip_align64(void **state)
{
    (void)state;
    roundtrip(64);
}

static void test_writer_default_alignment(void **state)
{
    (void)state;
    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_writer_create(0, &w));
    assert_tern_ok(tern_gguf_writer_set_str(w, "general.architecture", "llama"));
    float v[32] = {1};
    const int64_t ne[1] = {32};
    assert_tern_ok(tern_gguf_writer_add_tensor(w, "x", TERN_TYPE_F32, 1, ne, v));
    char path[512];
    snprintf(path, sizeof path, "%s/def.gguf", test_tmpdir());
    assert_tern_ok(tern_gguf_writer_write(w, path));
    tern_gguf_writer_free(w);
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(path, &g));
    assert_int_equal(tern_gguf_alignment(g), 32);
    assert_int_equal(tern_gguf_find_key(g, "general.alignment"), -1); /* 32 is implied */
    assert_int_equal(tern_gguf_n_kv(g), 1);
    tern_gguf_close(g);
}

static void test_writer_errors(void **state)
{
    (void)state;
    struct tern_gguf_writer *w;
    assert_int_equal(tern_gguf_writer_create(3, &w), TERN_ERR_ARG);
    assert_int_equal(tern_gguf_writer_create(48, &w), TERN_ERR_ARG);
    assert_tern_ok(tern_gguf_writer_create(32, &w));
    assert_int_equal(tern_gguf_writer_set_u32(w, "", 1), TERN_ERR_ARG);
    assert_int_equal(tern_gguf_writer_set_arr(w, "k", TERN_GGUF_STRING, "x", 1), TERN_ERR_ARG);
    assert_int_equal(tern_gguf_writer_set_arr(w, "k", TERN_GGUF_ARRAY, "x", 1), TERN_ERR_ARG);
    assert_int_equal(tern_gguf_writer_set_arr(w, "k", TERN_GGUF_UINT64, NULL, 1), TERN_ERR_ARG);
    assert_int_equal(tern_gguf_writer_set_arr(w, "k", TERN_GGUF_UINT64, "x", UINT64_MAX / 4), TERN_ERR_ARG);
    const char *strs[] = {"a", NULL};
    assert_int_equal(tern_gguf_writer_set_arr_str(w, "k", strs, 2), TERN_ERR_ARG);

    float v[64] = {0};
    int64_t ne[4] = {32, 2, 1, 1};
    assert_tern_ok(tern_gguf_writer_add_tensor(w, "t", TERN_TYPE_F32, 2, ne, v));
    assert_int_equal(tern_gguf_writer_add_tensor(w, "t", TERN_TYPE_F32, 2, ne, v), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "duplicate"));
    assert_int_equal(tern_gguf_writer_add_tensor(w, "u", 4, 2, ne, v), TERN_ERR_ARG); /* removed type id */
    assert_int_equal(tern_gguf_writer_add_tensor(w, "u", 39, 2, ne, v), TERN_ERR_ARG);
    assert_int_equal(tern_gguf_writer_add_tensor(w, "u", TERN_TYPE_F32, 0, ne, v), TERN_ERR_ARG);
    assert_int_equal(tern_gguf_writer_add_tensor(w, "u", TERN_TYPE_F32, 5, ne, v), TERN_ERR_ARG);
    assert_int_equal(tern_gguf_writer_add_tensor(w, "u", TERN_TYPE_Q4_K, 2, ne, v), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "block size"));
    int64_t bad[2] = {32, 0};
    assert_int_equal(tern_gguf_writer_add_tensor(w, "u", TERN_TYPE_F32, 2, bad, v), TERN_ERR_ARG);
    int64_t huge[3] = {1ll << 31, 1ll << 31, 4};
    assert_int_equal(tern_gguf_writer_add_tensor(w, "u", TERN_TYPE_F32, 3, huge, v), TERN_ERR_ARG);

    /* a write into a missing directory fails with IO and leaves nothing behind */
    char path[512];
    snprintf(path, sizeof path, "%s/no/such/dir/x.gguf", test_tmpdir());
    assert_int_equal(tern_gguf_writer_write(w, path), TERN_ERR_IO);
    assert_non_null(strstr(tern_last_error(), "x.gguf.tmp"));

    /* the tmp file is written but the rename fails (the target is a directory): the tmp file
     * is removed and the directory untouched */
    snprintf(path, sizeof path, "%s/isdir.gguf", test_tmpdir());
    assert_int_equal(mkdir(path, 0755), 0);
    assert_int_equal(tern_gguf_writer_write(w, path), TERN_ERR_IO);
    assert_non_null(strstr(tern_last_error(), "rename"));
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    assert_true(S_ISDIR(sb.st_mode));

    /* writing over an existing file replaces it whole */
    snprintf(path, sizeof path, "%s/over.gguf", test_tmpdir());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("old contents that are not a gguf file at all", f);
    fclose(f);
    assert_tern_ok(tern_gguf_writer_write(w, path));
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(path, &g));
    assert_int_equal(tern_gguf_n_tensors(g), 1);
    /* 24-byte header + 41-byte info ("t", 2 dims) padded to 96, then 32x2 f32 */
    assert_int_equal(tern_gguf_file_size(g), 96 + 256);
    tern_gguf_close(g);
    tern_gguf_writer_free(w);
}

static void test_open_errors(void **state)
{
    (void)state;
    struct tern_gguf *g = NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/missing.gguf", test_tmpdir());
    assert_int_equal(tern_gguf_open(path, &g), TERN_ERR_IO);
    assert_non_null(strstr(tern_last_error(), "missing.gguf"));
    assert_int_equal(tern_gguf_open(test_tmpdir(), &g), TERN_ERR_IO); /* a directory */
    snprintf(path, sizeof path, "%s/empty.gguf", test_tmpdir());
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(tern_gguf_open(path, &g), TERN_ERR_FORMAT);
    assert_non_null(strstr(tern_last_error(), "offset 0"));
    assert_null(g); /* out-pointer untouched on failure */
    assert_int_equal(tern_gguf_open_memory("GGUF", 0, &g), TERN_ERR_FORMAT);
}

/* ---- the fixtures ---- */

struct model_expect {
    const char *file;
    const char *arch;
    uint32_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
    float rope_base, rms_eps;
    uint64_t n_vocab;
    int64_t n_tensors;
    uint64_t bytes;
    int main_type;    /* type of blk.0.attn_q.weight */
    int output_type;  /* output.weight (or -1: tied, absent) */
};

static const struct model_expect models[] = {
    {"llama-spm-tiny-f16.gguf", "llama", 256, 2, 8, 4, 512, 2048, 10000.f, 1e-5f, 32000, 21, 35857600, TERN_TYPE_F16, TERN_TYPE_F16},
    {"llama-spm-tiny-q8_0.gguf", "llama", 256, 2, 8, 4, 512, 2048, 10000.f, 1e-5f, 32000, 21, 19391680, TERN_TYPE_Q8_0, TERN_TYPE_Q8_0},
    {"llama-spm-tiny-q6_k.gguf", "llama", 256, 2, 8, 4, 512, 2048, 10000.f, 1e-5f, 32000, 21, 15137984, TERN_TYPE_Q6_K, TERN_TYPE_Q6_K},
    {"llama-spm-tiny-q4_k_m.gguf", "llama", 256, 2, 8, 4, 512, 2048, 10000.f, 1e-5f, 32000, 21, 12764096, TERN_TYPE_Q4_K, TERN_TYPE_Q6_K},
    {"llama-spm-tiny-q4_0.gguf", "llama", 256, 2, 8, 4, 512, 2048, 10000.f, 1e-5f, 32000, 21, 12721856, TERN_TYPE_Q4_0, TERN_TYPE_Q6_K},
    {"qwen2-tiny-f16.gguf", "qwen2", 128, 2, 4, 2, 256, 2048, 1e6f, 1e-6f, 50257, 26, 15228640, TERN_TYPE_F16, -1},
    {"qwen2-tiny-q8_0.gguf", "qwen2", 128, 2, 4, 2, 256, 2048, 1e6f, 1e-6f, 50257, 26, 8921344, TERN_TYPE_Q8_0, -1},
    {"qwen2-tiny-q4_0.gguf", "qwen2", 128, 2, 4, 2, 256, 2048, 1e6f, 1e-6f, 50257, 26, 8773888, TERN_TYPE_Q4_0, -1},
};

static uint32_t arch_u32(const struct tern_gguf *g, const char *arch, const char *suffix)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v = 0;
    assert_tern_ok(tern_gguf_get_u32(g, key, &v));
    return v;
}

static float arch_f32(const struct tern_gguf *g, const char *arch, const char *suffix)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    float v = 0;
    assert_tern_ok(tern_gguf_get_f32(g, key, &v));
    return v;
}

static void test_fixture_models(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(dir, "fixtures/models");
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", dir);
    for (size_t m = 0; m < sizeof models / sizeof models[0]; m++) {
        const struct model_expect *e = &models[m];
        char path[4300];
        snprintf(path, sizeof path, "%s/%s", dirbuf, e->file);
        struct tern_gguf *g;
        assert_tern_ok(tern_gguf_open(path, &g));
        assert_int_equal(tern_gguf_version(g), 3);
        assert_int_equal(tern_gguf_alignment(g), 32);
        assert_int_equal(tern_gguf_file_size(g), e->bytes);
        struct tern_str s;
        assert_tern_ok(tern_gguf_get_str(g, "general.architecture", &s));
        assert_true(str_eq(s, e->arch));
        assert_int_equal(arch_u32(g, e->arch, "embedding_length"), e->n_embd);
        assert_int_equal(arch_u32(g, e->arch, "block_count"), e->n_layer);
        assert_int_equal(arch_u32(g, e->arch, "attention.head_count"), e->n_head);
        assert_int_equal(arch_u32(g, e->arch, "attention.head_count_kv"), e->n_head_kv);
        assert_int_equal(arch_u32(g, e->arch, "feed_forward_length"), e->n_ff);
        assert_int_equal(arch_u32(g, e->arch, "context_length"), e->n_ctx);
        assert_true(arch_f32(g, e->arch, "rope.freq_base") == e->rope_base);
        assert_true(arch_f32(g, e->arch, "attention.layer_norm_rms_epsilon") == e->rms_eps);
        int64_t k = tern_gguf_find_key(g, "tokenizer.ggml.tokens");
        assert_true(k >= 0);
        assert_int_equal(tern_gguf_arr_len(g, k), e->n_vocab);

        assert_int_equal(tern_gguf_n_tensors(g), e->n_tensors);
        const struct tern_gguf_tensor *t = tern_gguf_find_tensor(g, "token_embd.weight");
        assert_non_null(t);
        assert_int_equal(t->n_dims, 2);
        assert_int_equal(t->ne[0], e->n_embd);
        assert_int_equal(t->ne[1], (int64_t)e->n_vocab);
        t = tern_gguf_find_tensor(g, "blk.0.attn_q.weight");
        assert_non_null(t);
        assert_int_equal(t->type, e->main_type);
        assert_int_equal(t->ne[0], e->n_embd);
        assert_int_equal(t->ne[1], e->n_embd);
        t = tern_gguf_find_tensor(g, "output.weight");
        if (e->output_type < 0) {
            assert_null(t);
            assert_non_null(tern_gguf_find_tensor(g, "blk.1.attn_v.bias"));
        } else {
            assert_non_null(t);
            assert_int_equal(t->type, e->output_type);
        }
        /* 1-D tensors stay F32; every data range lies inside the file; the tensors tile the
         * data section up to alignment padding. */
        uint64_t total = 0;
        for (int64_t i = 0; i < tern_gguf_n_tensors(g); i++) {
            t = tern_gguf_tensor(g, i);
            if (t->n_dims == 1) assert_int_equal(t->type, TERN_TYPE_F32);
            assert_true(tern_gguf_data_offset(g) + t->offset + t->nbytes <= tern_gguf_file_size(g));
            total += (t->nbytes + 31) / 32 * 32;
        }
        assert_true(tern_gguf_data_offset(g) + total >= tern_gguf_file_size(g));
        tern_gguf_close(g);
    }
}

struct vocab_expect {
    const char *file;
    const char *model;
    uint64_t n_tokens;
    uint32_t bos, eos;
    uint64_t probe_id;
    const char *probe;
};

static const struct vocab_expect vocabs[] = {
    {"ggml-vocab-llama-spm.gguf", "llama", 32000, 1, 2, 1, "<s>"},
    {"ggml-vocab-gpt-2.gguf", "gpt2", 50257, 50256, 50256, 50256, "<|endoftext|>"},
    {"ggml-vocab-qwen2-tiktoken.gguf", "gpt2", 151936, 151643, 151643, 151935, "[PAD151935]"},
    {"ggml-vocab-llama3-tiktoken.gguf", "gpt2", 128256, 128000, 128001, 128009, "<|eot_id|>"},
    {"ggml-vocab-phi-3.gguf", NULL, 0, 0, 0, 0, NULL},
    {"ggml-vocab-deepseek-llm.gguf", NULL, 0, 0, 0, 0, NULL},
    {"ggml-vocab-starcoder.gguf", NULL, 0, 0, 0, 0, NULL},
    {"ggml-vocab-falcon.gguf", NULL, 0, 0, 0, 0, NULL},
    {"ggml-vocab-gpt-neox.gguf", NULL, 0, 0, 0, 0, NULL},
};

static void test_fixture_vocabs(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(dir, "fixtures/tokenizer");
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", dir);
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        const struct vocab_expect *e = &vocabs[v];
        char path[4300];
        snprintf(path, sizeof path, "%s/%s", dirbuf, e->file);
        struct tern_gguf *g;
        assert_tern_ok(tern_gguf_open(path, &g));
        assert_int_equal(tern_gguf_n_tensors(g), 0);
        int64_t k = tern_gguf_find_key(g, "tokenizer.ggml.tokens");
        assert_true(k >= 0);
        assert_int_equal(tern_gguf_arr_type(g, k), TERN_GGUF_STRING);
        uint64_t n = tern_gguf_arr_len(g, k);
        int64_t tt = tern_gguf_find_key(g, "tokenizer.ggml.token_type");
        assert_true(tt >= 0);
        assert_int_equal(tern_gguf_arr_len(g, tt), n); /* one type per token */
        /* every string lies inside the file and the strings are contiguous */
        const char *base = tern_gguf_file_data(g);
        for (uint64_t j = 0; j + 1 < n; j++) {
            struct tern_str a = tern_gguf_arr_str(g, k, j), b = tern_gguf_arr_str(g, k, j + 1);
            assert_ptr_equal(a.ptr + a.len + 8, b.ptr);
        }
        struct tern_str lastw = tern_gguf_arr_str(g, k, n - 1);
        assert_true(lastw.ptr + lastw.len <= base + tern_gguf_file_size(g));
        if (e->model) {
            struct tern_str s;
            assert_tern_ok(tern_gguf_get_str(g, "tokenizer.ggml.model", &s));
            assert_true(str_eq(s, e->model));
            assert_int_equal(n, e->n_tokens);
            uint32_t id;
            assert_tern_ok(tern_gguf_get_u32(g, "tokenizer.ggml.bos_token_id", &id));
            assert_int_equal(id, e->bos);
            assert_tern_ok(tern_gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &id));
            assert_int_equal(id, e->eos);
            assert_true(str_eq(tern_gguf_arr_str(g, k, e->probe_id), e->probe));
        }
        tern_gguf_close(g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_value_types),
        cmocka_unit_test(test_roundtrip_align32),
        cmocka_unit_test(test_roundtrip_align64),
        cmocka_unit_test(test_writer_default_alignment),
        cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_open_errors),
        cmocka_unit_test(test_fixture_models),
        cmocka_unit_test(test_fixture_vocabs),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}

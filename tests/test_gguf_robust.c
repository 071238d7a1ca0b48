/* test_gguf_robust.c — the GGUF reader on broken input: truncation at every byte of the
 * metadata, targeted absurd values in every field, and a seeded random-mutation loop.
 *
 * Every case is opened from a malloc'ed copy of exactly the bytes under test, so under ASan
 * (make test-asan) any read past the end, use after free or leak is caught. A case passes when
 * open succeeds and every accessor can be walked, or when it fails with TERN_ERR_FORMAT and a
 * message naming a byte offset ("at offset N"). */
#include "test_support.h"
#include "test_gguf_build.h"

#include <stdio.h>
#include <string.h>

/* ---- opening a copy, walking everything on success ---- */

static uint64_t walk(const struct tern_gguf *g)
{
    uint64_t sum = 0;
    for (int64_t i = 0; i < tern_gguf_n_kv(g); i++) {
        struct tern_str k = tern_gguf_key(g, i);
        char key[70000];
        snprintf(key, sizeof key, "%.*s", (int)k.len, k.ptr);
        assert_int_equal(tern_gguf_find_key(g, key), i);
        if (tern_gguf_kv_type(g, i) != TERN_GGUF_ARRAY) continue;
        uint64_t n = tern_gguf_arr_len(g, i);
        if (tern_gguf_arr_type(g, i) == TERN_GGUF_STRING) {
            for (uint64_t j = 0; j < n; j++) {
                struct tern_str s = tern_gguf_arr_str(g, i, j);
                for (uint64_t c = 0; c < s.len; c++) sum += (uint8_t)s.ptr[c];
            }
        } else if (tern_gguf_arr_data(g, i) && n > 0) {
            const uint8_t *p = tern_gguf_arr_data(g, i);
            sum += p[0];
        }
    }
    for (int64_t i = 0; i < tern_gguf_n_tensors(g); i++) {
        const struct tern_gguf_tensor *t = tern_gguf_tensor(g, i);
        const uint8_t *p = t->data;
        sum += p[0] + p[t->nbytes - 1];
        char name[70000];
        snprintf(name, sizeof name, "%.*s", (int)t->name.len, t->name.ptr);
        assert_ptr_equal(tern_gguf_find_tensor(g, name), t);
    }
    return sum;
}

/* Open bytes[0..len) from an exact-size copy. Failures must be FORMAT errors naming an offset. */
static tern_status open_copy(const uint8_t *bytes, size_t len)
{
    uint8_t *copy = malloc(len ? len : 1);
    assert_non_null(copy);
    memcpy(copy, bytes, len);
    struct tern_gguf *g = NULL;
    tern_status st = len ? tern_gguf_open_memory(copy, len, &g)
                         : tern_gguf_open_memory(NULL, 0, &g);
    if (st == TERN_OK) {
        (void)walk(g);
        tern_gguf_close(g);
    } else {
        if (st != TERN_ERR_FORMAT || !strstr(tern_last_error(), "offset"))
            fail_msg("len %zu: status %s, message '%s'", len, tern_status_name(st),
                     tern_last_error());
        assert_null(g);
    }
    free(copy);
    return st;
}

/* ---- a small file written by tern's own writer ---- */

static uint8_t *writer_file(size_t *len)
{
    /* a nested array can only come from copying it out of an existing file */
    struct gb nb = {0};
    gb_header(&nb, 3, 0, 1);
    gb_key(&nb, "x.nested", TERN_GGUF_ARRAY);
    gb_u32(&nb, TERN_GGUF_ARRAY); gb_u64(&nb, 2);
    gb_u32(&nb, TERN_GGUF_STRING); gb_u64(&nb, 2); gb_str(&nb, "ab"); gb_str(&nb, "c");
    gb_u32(&nb, TERN_GGUF_INT16); gb_u64(&nb, 3); gb_u16(&nb, 1); gb_u16(&nb, 2); gb_u16(&nb, 3);
    struct tern_gguf *src;
    assert_tern_ok(tern_gguf_open_memory(nb.p, nb.len, &src));

    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_writer_create(32, &w));
    assert_tern_ok(tern_gguf_writer_set_str(w, "general.architecture", "llama"));
    assert_tern_ok(tern_gguf_writer_set_u32(w, "llama.block_count", 2));
    assert_tern_ok(tern_gguf_writer_set_f32(w, "llama.rope.freq_base", 10000.f));
    assert_tern_ok(tern_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true));
    const char *toks[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81the", ""};
    assert_tern_ok(tern_gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 5));
    const uint8_t types[5] = {2, 3, 3, 1, 1};
    assert_tern_ok(tern_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", TERN_GGUF_UINT8, types, 5));
    assert_tern_ok(tern_gguf_writer_copy_kv(w, src, 0));
    uint8_t data[512];
    for (int i = 0; i < 512; i++) data[i] = (uint8_t)(i * 7);
    const int64_t ne_a[2] = {8, 2}, ne_b[1] = {64}, ne_c[1] = {256}, ne_d[1] = {16};
    assert_tern_ok(tern_gguf_writer_add_tensor(w, "a.f32", TERN_TYPE_F32, 2, ne_a, data));
    assert_tern_ok(tern_gguf_writer_add_tensor(w, "b.q8_0", TERN_TYPE_Q8_0, 1, ne_b, data));
    assert_tern_ok(tern_gguf_writer_add_tensor(w, "c.q4_k", TERN_TYPE_Q4_K, 1, ne_c, data));
    assert_tern_ok(tern_gguf_writer_add_tensor(w, "d.f16", TERN_TYPE_F16, 1, ne_d, data));
    char path[512];
    snprintf(path, sizeof path, "%s/small.gguf", test_tmpdir());
    assert_tern_ok(tern_gguf_writer_write(w, path));
    tern_gguf_writer_free(w);
    tern_gguf_close(src);
    free(nb.p);
    uint8_t *buf = (uint8_t *)test_read_file(path, len);
    assert_non_null(buf);
    return buf;
}

static void test_truncate_small(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = writer_file(&len);
    assert_int_equal(open_copy(buf, len), TERN_OK);
    /* The writer ends the file with the last tensor: every shorter prefix is invalid. */
    for (size_t l = 0; l < len; l++) assert_int_equal(open_copy(buf, l), TERN_ERR_FORMAT);
    free(buf);
}

static void test_truncate_fixture(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/llama-spm-tiny-q4_0.gguf");
    size_t len;
    uint8_t *buf = (uint8_t *)test_read_file(path, &len);
    assert_non_null(buf);
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open_memory(buf, len, &g));
    uint64_t data_off = tern_gguf_data_offset(g);
    /* cut points: the header and first kvs byte by byte, around every kv value, the tensor
     * infos and padding byte by byte, a stride through the vocabulary, then through the data */
    size_t n_cases = 0;
    for (size_t l = 0; l < 4096; l++, n_cases++) assert_int_equal(open_copy(buf, l), TERN_ERR_FORMAT);
    for (int64_t i = 0; i < tern_gguf_n_kv(g); i++) {
        uint64_t v = tern_gguf_kv_value_offset(g, i);
        for (uint64_t l = v - 16; l < v + 16; l++, n_cases++)
            assert_int_equal(open_copy(buf, l), TERN_ERR_FORMAT);
    }
    for (uint64_t l = data_off - 1536; l < data_off; l++, n_cases++)
        assert_int_equal(open_copy(buf, l), TERN_ERR_FORMAT);
    for (uint64_t l = 4096; l < data_off; l += 4093, n_cases++)
        assert_int_equal(open_copy(buf, l), TERN_ERR_FORMAT);
    for (uint64_t l = data_off; l < len; l += len / 48, n_cases++)
        assert_int_equal(open_copy(buf, l), TERN_ERR_FORMAT);
    assert_int_equal(open_copy(buf, len - 1), TERN_ERR_FORMAT);
    print_message("truncation cases on %s: %zu (data offset %llu)\n", path, n_cases,
                  (unsigned long long)data_off);
    tern_gguf_close(g);
    free(buf);
}

/* ---- a hand-built file whose field offsets are known, for targeted corruption ---- */

struct small {
    struct gb b;
    size_t arch_key, arch_type, arch_strlen;
    size_t align_type, align_val;
    size_t toks_elem_type, toks_count, toks_str0;
    size_t nested_count, nested_inner_count;
    size_t flag_key, flag_val;
    size_t t_name[3], t_dims[3], t_ne0[3], t_ne1, t_type[3], t_off[3];
};

static void build_small(struct small *s)
{
    memset(s, 0, sizeof *s);
    struct gb *b = &s->b;
    gb_header(b, 3, 3, 5);
    s->arch_key = gb_pos(b);
    gb_str(b, "general.architecture");
    s->arch_type = gb_pos(b);
    gb_u32(b, TERN_GGUF_STRING);
    s->arch_strlen = gb_pos(b);
    gb_str(b, "llama");
    gb_key(b, "general.alignment", TERN_GGUF_UINT32);
    s->align_type = gb_pos(b) - 4;
    s->align_val = gb_pos(b);
    gb_u32(b, 32);
    gb_key(b, "tok.tokens", TERN_GGUF_ARRAY);
    s->toks_elem_type = gb_pos(b);
    gb_u32(b, TERN_GGUF_STRING);
    s->toks_count = gb_pos(b);
    gb_u64(b, 3);
    s->toks_str0 = gb_pos(b);
    gb_str(b, "a"); gb_str(b, "bb"); gb_str(b, "ccc");
    gb_key(b, "x.nested", TERN_GGUF_ARRAY);
    gb_u32(b, TERN_GGUF_ARRAY);
    s->nested_count = gb_pos(b);
    gb_u64(b, 2);
    gb_u32(b, TERN_GGUF_UINT32);
    s->nested_inner_count = gb_pos(b);
    gb_u64(b, 1); gb_u32(b, 5);
    gb_u32(b, TERN_GGUF_STRING); gb_u64(b, 1); gb_str(b, "z");
    s->flag_key = gb_pos(b);
    gb_key(b, "x.flagxx", TERN_GGUF_BOOL); /* same length as "x.nested" */
    s->flag_val = gb_pos(b);
    gb_u8(b, 1);
    /* tensors: w0 F32 [8,2] @0 (64 B), w1 Q8_0 [64] @64 (68 B), w2 F16 [16] @160 (32 B) */
    const char *names[3] = {"w0", "w1", "w2"};
    const int types[3] = {TERN_TYPE_F32, TERN_TYPE_Q8_0, TERN_TYPE_F16};
    const uint64_t ne0[3] = {8, 64, 16}, offs[3] = {0, 64, 160};
    for (int t = 0; t < 3; t++) {
        s->t_name[t] = gb_pos(b);
        gb_str(b, names[t]);
        s->t_dims[t] = gb_pos(b);
        gb_u32(b, t == 0 ? 2 : 1);
        s->t_ne0[t] = gb_pos(b);
        gb_u64(b, ne0[t]);
        if (t == 0) {
            s->t_ne1 = gb_pos(b);
            gb_u64(b, 2);
        }
        s->t_type[t] = gb_pos(b);
        gb_u32(b, (uint32_t)types[t]);
        s->t_off[t] = gb_pos(b);
        gb_u64(b, offs[t]);
    }
    gb_pad(b, 32);
    for (int i = 0; i < 192; i++) gb_u8(b, (uint8_t)i);
}

enum mut_kind { SET_U32, SET_U64, SET_BYTES };

struct mutation {
    const char *label;
    enum mut_kind kind;
    size_t field;      /* offsetof into struct small of the size_t holding the field offset */
    int64_t delta;     /* added to that field offset */
    uint64_t value;
    const char *bytes; /* SET_BYTES */
    const char *expect;
    int64_t at;        /* expected "at offset" (-1: same as the field, -2: do not check) */
};

#define F(member) offsetof(struct small, member)
static const struct mutation mutations[] = {
    {"magic", SET_BYTES, 0, 0, 0, "GGUX", "bad magic", 0},
    {"version 1", SET_U32, 0, 4, 1, NULL, "version 1 is not supported", 4},
    {"version 4", SET_U32, 0, 4, 4, NULL, "unknown GGUF version 4", 4},
    {"big endian", SET_U32, 0, 4, 0x03000000u, NULL, "big-endian", 4},
    {"n_tensors 2^63", SET_U64, 0, 8, 1ull << 63, NULL, "tensor count", 8},
    {"n_tensors max", SET_U64, 0, 8, UINT64_MAX, NULL, "tensor count", 8},
    {"n_kv 2^63", SET_U64, 0, 16, 1ull << 63, NULL, "kv count", 16},
    {"n_kv max", SET_U64, 0, 16, UINT64_MAX, NULL, "kv count", 16},
    {"n_kv +1", SET_U64, 0, 16, 6, NULL, NULL, -2},
    {"n_kv 0", SET_U64, 0, 16, 0, NULL, NULL, -2},
    {"n_tensors +1", SET_U64, 0, 8, 4, NULL, NULL, -2},
    {"key length max", SET_U64, F(arch_key), 0, UINT64_MAX, NULL, "key length", -1},
    {"key length 2^63", SET_U64, F(arch_key), 0, 1ull << 63, NULL, "key length", -1},
    {"key length 0", SET_U64, F(arch_key), 0, 0, NULL, "key is empty", -1},
    {"key with NUL", SET_BYTES, F(arch_key), 8 + 3, 0, "\0", "NUL", -2},
    {"value type 13", SET_U32, F(arch_type), 0, 13, NULL, "unknown value type 13", -1},
    {"value type max", SET_U32, F(arch_type), 0, UINT32_MAX, NULL, "unknown value type", -1},
    {"string length max", SET_U64, F(arch_strlen), 0, UINT64_MAX, NULL, "string value length", -1},
    {"string length 2^63", SET_U64, F(arch_strlen), 0, 1ull << 63, NULL, "string value length", -1},
    {"alignment 0", SET_U32, F(align_val), 0, 0, NULL, "not a power of two", -1},
    {"alignment 3", SET_U32, F(align_val), 0, 3, NULL, "not a power of two", -1},
    {"alignment 64", SET_U32, F(align_val), 0, 64, NULL, "not a multiple of the alignment", -2},
    {"alignment 2^31", SET_U32, F(align_val), 0, 1u << 31, NULL, "not a multiple of the alignment", -2},
    {"alignment int32", SET_U32, F(align_type), 0, TERN_GGUF_INT32, NULL, "expected uint32", -2},
    {"array elem type 13", SET_U32, F(toks_elem_type), 0, 13, NULL, "unknown array element type", -1},
    {"array count 2^63", SET_U64, F(toks_count), 0, 1ull << 63, NULL, "cannot fit", -1},
    {"array count max", SET_U64, F(toks_count), 0, UINT64_MAX, NULL, "cannot fit", -1},
    {"array count +1", SET_U64, F(toks_count), 0, 4, NULL, NULL, -2},
    {"array string length max", SET_U64, F(toks_str0), 0, UINT64_MAX, NULL, "array string length", -1},
    {"nested count 2^62", SET_U64, F(nested_count), 0, 1ull << 62, NULL, "cannot fit", -1},
    {"nested inner count max", SET_U64, F(nested_inner_count), 0, UINT64_MAX, NULL, "cannot fit", -1},
    {"bool 2", SET_BYTES, F(flag_val), 0, 0, "\2", "bool value 2", -1},
    {"duplicate key", SET_BYTES, F(flag_key), 8, 0, "x.nested", "duplicate key", -2},
    {"duplicate tensor", SET_BYTES, F(t_name[1]), 8, 0, "w0", "duplicate tensor name", -2},
    {"tensor name length max", SET_U64, F(t_name[2]), 0, UINT64_MAX, NULL, "tensor name length", -1},
    {"n_dims 0", SET_U32, F(t_dims[1]), 0, 0, NULL, "n_dims = 0", -1},
    {"n_dims 5", SET_U32, F(t_dims[1]), 0, 5, NULL, "n_dims = 5", -1},
    {"n_dims max", SET_U32, F(t_dims[1]), 0, UINT32_MAX, NULL, "n_dims", -1},
    {"ne 0", SET_U64, F(t_ne1), 0, 0, NULL, "dimension 1 = 0", -1},
    {"ne 2^63", SET_U64, F(t_ne0[0]), 0, 1ull << 63, NULL, "dimension 0 = ", -1},
    {"ne max", SET_U64, F(t_ne0[2]), 0, UINT64_MAX, NULL, "dimension 0 = ", -1},
    {"ne product overflow", SET_U64, F(t_ne1), 0, 1ull << 60, NULL, "overflows 2^62", -1},
    {"type 39", SET_U32, F(t_type[1]), 0, 39, NULL, "unknown tensor type id 39", -1},
    {"type 4 (removed)", SET_U32, F(t_type[1]), 0, 4, NULL, "unknown tensor type id 4", -1},
    {"type max", SET_U32, F(t_type[0]), 0, UINT32_MAX, NULL, "unknown tensor type id", -1},
    {"ne0 not a block multiple", SET_U64, F(t_ne0[1]), 0, 33, NULL, "block size", -1},
    {"offset misaligned", SET_U64, F(t_off[1]), 0, 65, NULL, "not a multiple of the alignment", -1},
    {"offset past EOF", SET_U64, F(t_off[2]), 0, 1ull << 62, NULL, "past the end", -1},
    {"offset at end", SET_U64, F(t_off[2]), 0, 192, NULL, "past the end", -1},
    {"offset wraps", SET_U64, F(t_off[2]), 0, UINT64_MAX - 31, NULL, "past the end", -1},
    {"overlap", SET_U64, F(t_off[1]), 0, 32, NULL, "overlaps tensor 0", -1},
    {"overlap same", SET_U64, F(t_off[2]), 0, 64, NULL, "overlaps", -2},
};
#undef F

static void test_targeted_corruption(void **state)
{
    (void)state;
    struct small s;
    build_small(&s);
    assert_int_equal(open_copy(s.b.p, s.b.len), TERN_OK);
    for (size_t m = 0; m < sizeof mutations / sizeof mutations[0]; m++) {
        const struct mutation *mu = &mutations[m];
        uint8_t *buf = malloc(s.b.len);
        memcpy(buf, s.b.p, s.b.len);
        size_t field = 0;
        if (mu->field) memcpy(&field, (const char *)&s + mu->field, sizeof field);
        size_t at = field + (size_t)mu->delta;
        if (mu->kind == SET_U32) memcpy(buf + at, &(uint32_t){(uint32_t)mu->value}, 4);
        else if (mu->kind == SET_U64) memcpy(buf + at, &mu->value, 8);
        else memcpy(buf + at, mu->bytes, mu->bytes[0] ? strlen(mu->bytes) : 1);
        tern_status st = open_copy(buf, s.b.len);
        if (st != TERN_ERR_FORMAT) fail_msg("%s: expected a format error", mu->label);
        const char *msg = tern_last_error();
        if (mu->expect && !strstr(msg, mu->expect))
            fail_msg("%s: message '%s' lacks '%s'", mu->label, msg, mu->expect);
        if (mu->at != -2) {
            char want[64];
            snprintf(want, sizeof want, "at offset %llu",
                     (unsigned long long)(mu->at == -1 ? at : (size_t)mu->at));
            if (!strstr(msg, want)) fail_msg("%s: message '%s' lacks '%s'", mu->label, msg, want);
        }
        print_message("  %-26s %s\n", mu->label, msg);
        free(buf);
    }
    free(s.b.p);
}

static void test_nesting_depth(void **state)
{
    (void)state;
    /* An array nested 8 deep is accepted, 9 deep refused (recursion is bounded). */
    for (int depth = 8; depth <= 9; depth++) {
        struct gb b = {0};
        gb_header(&b, 3, 0, 1);
        gb_key(&b, "deep", TERN_GGUF_ARRAY);
        for (int d = 1; d < depth; d++) {
            gb_u32(&b, TERN_GGUF_ARRAY);
            gb_u64(&b, 1);
        }
        gb_u32(&b, TERN_GGUF_UINT8);
        gb_u64(&b, 1);
        gb_u8(&b, 42);
        tern_status st = open_copy(b.p, b.len);
        if (depth == 8) {
            assert_int_equal(st, TERN_OK);
        } else {
            assert_int_equal(st, TERN_ERR_FORMAT);
            assert_non_null(strstr(tern_last_error(), "nested deeper"));
        }
        free(b.p);
    }
}

static void test_names_in_messages(void **state)
{
    (void)state;
    /* Names are quoted into messages bounded and escaped (found by fuzzing: a long key of
     * control bytes once overran the quoting buffer). */
    for (int variant = 0; variant < 3; variant++) {
        struct gb b = {0};
        gb_header(&b, 3, 0, 1);
        size_t n = variant == 0 ? 250 : variant == 1 ? 1000 : 197;
        char *key = malloc(n + 1);
        for (size_t i = 0; i < n; i++) key[i] = variant == 1 ? 'a' : (i % 3 ? '\x01' : 'k');
        key[n] = '\0';
        gb_key(&b, key, 99);
        gb_u32(&b, 0);
        assert_int_equal(open_copy(b.p, b.len), TERN_ERR_FORMAT);
        const char *msg = tern_last_error();
        assert_non_null(strstr(msg, "unknown value type 99 at offset"));
        assert_non_null(strstr(msg, variant == 1 ? "aaaa..." : "k\\x01\\x01k"));
        free(key);
        free(b.p);
    }
}

static void test_unsupported_type_accepted(void **state)
{
    (void)state;
    /* Known-but-unsupported tensor types are the model loader's call, not the reader's. */
    struct tern_gguf_writer *w;
    assert_tern_ok(tern_gguf_writer_create(32, &w));
    uint8_t blk[74] = {0};
    const int64_t ne[1] = {256};
    assert_tern_ok(tern_gguf_writer_add_tensor(w, "iq", TERN_TYPE_IQ2_XS, 1, ne, blk));
    char path[512];
    snprintf(path, sizeof path, "%s/iq.gguf", test_tmpdir());
    assert_tern_ok(tern_gguf_writer_write(w, path));
    tern_gguf_writer_free(w);
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open(path, &g));
    assert_int_equal(tern_gguf_tensor(g, 0)->type, TERN_TYPE_IQ2_XS);
    assert_int_equal(tern_gguf_tensor(g, 0)->nbytes, 74);
    tern_gguf_close(g);
}

/* ---- seeded random mutations ---- */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void mutate_loop(const uint8_t *orig, size_t len, uint64_t meta_end, int iters,
                        uint64_t seed, int *n_ok, int *n_fail)
{
    static const uint64_t interesting[] = {0, 1, 2, 3, 4, 5, 7, 8, 12, 13, 16, 31, 32, 33, 64,
                                           255, 256, 0x7fffffff, 0x80000000u, 0xffffffffu,
                                           1ull << 32, 1ull << 62, 1ull << 63, UINT64_MAX};
    const size_t n_int = sizeof interesting / sizeof interesting[0];
    uint64_t rs = seed;
    uint8_t *buf = malloc(len);
    for (int it = 0; it < iters; it++) {
        memcpy(buf, orig, len);
        size_t cur = len;
        int n_mut = 1 + (int)(rng_next(&rs) % 3);
        for (int m = 0; m < n_mut; m++) {
            uint64_t r = rng_next(&rs);
            /* 7 in 8 mutations hit the metadata, where the parsing happens */
            uint64_t span = (r & 7) ? meta_end : cur;
            size_t at = (size_t)(rng_next(&rs) % (span ? span : 1));
            switch ((r >> 3) % 5) {
            case 0: buf[at] ^= (uint8_t)(1u << (rng_next(&rs) % 8)); break;
            case 1: buf[at] = (uint8_t)rng_next(&rs); break;
            case 2:
                if (at + 4 <= cur) {
                    uint32_t v = (uint32_t)interesting[rng_next(&rs) % n_int];
                    memcpy(buf + at, &v, 4);
                }
                break;
            case 3:
                if (at + 8 <= cur) {
                    uint64_t v = interesting[rng_next(&rs) % n_int];
                    if (rng_next(&rs) & 1) v = (uint64_t)cur - v; /* near the real size */
                    memcpy(buf + at, &v, 8);
                }
                break;
            default: cur = at; break; /* truncate */
            }
        }
        tern_status st = open_copy(buf, cur);
        if (st == TERN_OK) ++*n_ok;
        else ++*n_fail;
    }
    free(buf);
}

static void test_random_mutations_small(void **state)
{
    (void)state;
    size_t len;
    uint8_t *buf = writer_file(&len);
    struct tern_gguf *g;
    assert_tern_ok(tern_gguf_open_memory(buf, len, &g));
    uint64_t meta_end = tern_gguf_data_offset(g);
    tern_gguf_close(g);
    int ok = 0, bad = 0;
    mutate_loop(buf, len, meta_end, 20000, 0x9e3779b97f4a7c15ull, &ok, &bad);
    print_message("20000 mutations of a %zu-byte file: %d opened, %d refused\n", len, ok, bad);
    /* both outcomes must occur, or the loop is not exercising anything */
    assert_true(ok > 100);
    assert_true(bad > 10000);
    free(buf);
}

static void test_random_mutations_vocab(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/tokenizer/ggml-vocab-llama-spm.gguf");
    size_t len;
    uint8_t *buf = (uint8_t *)test_read_file(path, &len);
    assert_non_null(buf);
    int ok = 0, bad = 0;
    mutate_loop(buf, len, len, 300, 12345, &ok, &bad);
    print_message("300 mutations of %s: %d opened, %d refused\n", path, ok, bad);
    assert_true(bad > 0);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_truncate_small),
        cmocka_unit_test(test_truncate_fixture),
        cmocka_unit_test(test_targeted_corruption),
        cmocka_unit_test(test_nesting_depth),
        cmocka_unit_test(test_names_in_messages),
        cmocka_unit_test(test_unsupported_type_accepted),
        cmocka_unit_test(test_random_mutations_small),
        cmocka_unit_test(test_random_mutations_vocab),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}

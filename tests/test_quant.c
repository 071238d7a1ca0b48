/* test_quant.c — the tensor formats of src/quant: type table and messages, hand-computed blocks
 * for every format, quantize/dequantize error bounds, reference dot products against a plain
 * F32 dot of the dequantized rows, and the fixture models: each quantized tensor dequantizes to
 * within its format's error of the same tensor in the F16 file (same random weights).
 *
 * The fixture GGUFs are read with a minimal parser local to this test, so these checks do not
 * depend on src/gguf. */
#include "test_support.h"
#include "test_rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant.h"
#include "util/fp16.h"

/* ---------------------------------------------------------------- helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull; /* each test file draws its own sequence */
#define rnd_uniform() test_rand_uniform(&rng_state)
#define rnd_normal() test_rand_normal(&rng_state)

/* ---------------------------------------------------------------- type table */

static void test_type_table(void **state)
{
    (void)state;
    assert_string_equal(tern_type_name(TERN_TYPE_Q4_K), "Q4_K");
    assert_string_equal(tern_type_name(TERN_TYPE_IQ2_XS), "IQ2_XS");
    assert_string_equal(tern_type_name(TERN_TYPE_BF16), "BF16");
    assert_string_equal(tern_type_name(TERN_TYPE_TQ2_0), "TQ2_0");
    assert_string_equal(tern_type_name(4), "unknown(4)");
    assert_string_equal(tern_type_name(99), "unknown(99)");
    assert_string_equal(tern_type_name(-1), "unknown(-1)");

    const int supported[] = {TERN_TYPE_F32, TERN_TYPE_F16, TERN_TYPE_BF16, TERN_TYPE_Q8_0,
                             TERN_TYPE_Q4_0, TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_Q5_1,
                             TERN_TYPE_Q4_K, TERN_TYPE_Q5_K, TERN_TYPE_Q6_K, TERN_TYPE_Q8_1,
                             TERN_TYPE_Q8_K};
    int n_supported = 0;
    for (int t = -2; t < TERN_TYPE_COUNT_ + 3; t++) n_supported += tern_type_is_supported(t);
    assert_int_equal(n_supported, 13);
    for (size_t i = 0; i < sizeof supported / sizeof supported[0]; i++) {
        const struct quant_traits *tr = quant_traits_get(supported[i]);
        assert_non_null(tr);
        assert_int_equal(tr->block_size, tern_type_block_size(supported[i]));
        assert_int_equal(tr->block_bytes, tern_type_block_bytes(supported[i]));
        assert_string_equal(tr->name, tern_type_name(supported[i]));
    }
    assert_null(quant_traits_get(TERN_TYPE_Q2_K));
    assert_int_equal(tern_type_block_size(TERN_TYPE_Q4_K), 256);
    assert_int_equal(tern_type_block_bytes(TERN_TYPE_Q6_K), 210);
    assert_int_equal(tern_type_block_bytes(TERN_TYPE_Q2_K), 84); /* known even if unsupported */
    assert_int_equal(quant_traits_get(TERN_TYPE_Q4_1)->vec_dot_type, TERN_TYPE_Q8_1);
    assert_int_equal(quant_traits_get(TERN_TYPE_Q5_1)->vec_dot_type, TERN_TYPE_Q8_1);
    assert_int_equal(quant_traits_get(TERN_TYPE_Q5_0)->vec_dot_type, TERN_TYPE_Q8_0);
    assert_int_equal(tern_type_block_bytes(4), 0);
    assert_int_equal(quant_row_bytes(TERN_TYPE_Q4_0, 4864), 4864 / 32 * 18);
    assert_int_equal(quant_row_bytes(TERN_TYPE_F16, 896), 1792);

    assert_int_equal(quant_traits_get(TERN_TYPE_Q4_0)->vec_dot_type, TERN_TYPE_Q8_0);
    assert_int_equal(quant_traits_get(TERN_TYPE_Q8_0)->vec_dot_type, TERN_TYPE_Q8_0);
    assert_int_equal(quant_traits_get(TERN_TYPE_Q4_K)->vec_dot_type, TERN_TYPE_Q8_K);
    assert_int_equal(quant_traits_get(TERN_TYPE_Q6_K)->vec_dot_type, TERN_TYPE_Q8_K);
    assert_int_equal(quant_traits_get(TERN_TYPE_F16)->vec_dot_type, TERN_TYPE_F16);
    assert_int_equal(quant_traits_get(TERN_TYPE_BF16)->vec_dot_type, TERN_TYPE_BF16);

    int t = -1;
    assert_tern_ok(tern_type_from_name("q4_k", &t));
    assert_int_equal(t, TERN_TYPE_Q4_K);
    assert_tern_ok(tern_type_from_name("BF16", &t));
    assert_int_equal(t, TERN_TYPE_BF16);
    assert_tern_ok(tern_type_from_name("f16", &t));
    assert_int_equal(t, TERN_TYPE_F16);
    assert_int_equal(tern_type_from_name("q4_kk", &t), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "q4_kk"));
    assert_int_equal(tern_type_from_name("", &t), TERN_ERR_ARG);
}

static void test_errors(void **state)
{
    (void)state;
    float x[64] = {0};
    uint8_t buf[256];
    assert_int_equal(tern_quantize_row(TERN_TYPE_IQ2_XS, x, buf, 256), TERN_ERR_UNSUPPORTED);
    assert_non_null(strstr(tern_last_error(), "tensor type IQ2_XS (17) is not supported"));
    assert_int_equal(tern_dequantize_row(77, buf, x, 32), TERN_ERR_UNSUPPORTED);
    assert_non_null(strstr(tern_last_error(), "unknown(77)"));
    assert_int_equal(tern_quantize_row(TERN_TYPE_Q4_0, x, buf, 48), TERN_ERR_ARG);
    assert_non_null(strstr(tern_last_error(), "48"));
    assert_int_equal(tern_dequantize_row(TERN_TYPE_Q4_K, buf, x, 64), TERN_ERR_ARG);
}

/* ---------------------------------------------------------------- hand-computed blocks */

static void test_q4_0_known(void **state)
{
    (void)state;
    float x[32], y[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16);
    struct quant_block_q4_0 b;
    assert_tern_ok(tern_quantize_row(TERN_TYPE_Q4_0, x, &b, 32));
    /* max magnitude -16 -> d = -16 / -8 = 2; q = trunc(x/2 + 8.5) clamped to 15 */
    assert_int_equal(b.d, 0x4000);
    for (int j = 0; j < 16; j++) {
        int q0 = (int)((j - 16) / 2.0 + 8.5), q1 = (int)(j / 2.0 + 8.5);
        if (q1 > 15) q1 = 15;
        assert_int_equal(b.qs[j], q0 | (q1 << 4));
    }
    assert_int_equal(b.qs[0], 0x80);  /* -16 -> 0, 0 -> 8 */
    assert_int_equal(b.qs[15], 0xf8); /* -1 -> trunc(8.0) = 8, 15 -> 16 clamped to 15 */
    assert_tern_ok(tern_dequantize_row(TERN_TYPE_Q4_0, &b, y, 32));
    assert_true(y[0] == -16.f);
    assert_true(y[16] == 0.f);
    assert_true(y[31] == 14.f); /* 15 clamps to code 15 = +7 * 2 */
}

/* Q5_0, by hand from quantize_row_q5_0_ref: d = (signed value of largest magnitude) / -16,
 * code = min(31, trunc(x/d + 16.5)), low nibbles packed like Q4_0, fifth bits in qh.
 * x[j] = 0.5 * (j%7 - 3), except x[5] = 4 (the first largest magnitude, so d = 4/-16 = -0.25),
 * x[20] = -4 (same magnitude: -4/d + 16.5 = 32.5 clamps to 31), and x[30], x[31] = +-0.375
 * (x/d = -+1.5: ties round up, to 15 and 18). The other codes are 22 - 2*(j%7).
 * (Bytes written by llama.cpp's own quantizer: test_q5_0_llama_golden.) */
static const uint8_t golden_q5_0[22] = {
    0x00, 0xb4,                                     /* d = -0.25 */
    0x8f, 0xc7, 0xf3, 0xb1,                         /* qh: codes >= 16 */
    0x26, 0x04, 0xe2, 0xc0, 0xfe, 0x60, 0x4a, 0x26, /* qs */
    0x04, 0xe2, 0xc0, 0xae, 0x6c, 0x4a, 0xf6, 0x24,
};

static void test_q5_0_known(void **state)
{
    (void)state;
    float x[32], y[32];
    int code[32];
    for (int j = 0; j < 32; j++) {
        x[j] = 0.5f * (float)(j % 7 - 3);
        code[j] = 22 - 2 * (j % 7);
    }
    x[5] = 4.f, code[5] = 0;
    x[20] = -4.f, code[20] = 31;
    x[30] = 0.375f, code[30] = 15;
    x[31] = -0.375f, code[31] = 18;
    struct quant_block_q5_0 b;
    assert_tern_ok(tern_quantize_row(TERN_TYPE_Q5_0, x, &b, 32));
    assert_int_equal(b.d, 0xb400); /* -0.25 */
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        assert_int_equal(b.qs[j], (code[j] & 15) | (code[j + 16] & 15) << 4);
        qh |= (uint32_t)(code[j] >> 4) << j | (uint32_t)(code[j + 16] >> 4) << (j + 16);
    }
    assert_int_equal(b.qh[0] | b.qh[1] << 8 | b.qh[2] << 16 | (uint32_t)b.qh[3] << 24, qh);
    assert_memory_equal(&b, golden_q5_0, sizeof golden_q5_0);
    assert_tern_ok(tern_dequantize_row(TERN_TYPE_Q5_0, &b, y, 32));
    for (int j = 0; j < 32; j++) assert_true(y[j] == (float)(code[j] - 16) * -0.25f);
    assert_true(y[5] == 4.f && y[20] == -3.75f);

    /* an all-zero block: d = 0 / -16 = -0 (fp16 0x8000, as ggml writes it), every code 16
     * (fifth bit set), dequantizes to zeros */
    memset(x, 0, sizeof x);
    assert_tern_ok(tern_quantize_row(TERN_TYPE_Q5_0, x, &b, 32));
    assert_int_equal(b.d, 0x8000);
    for (int j = 0; j < 4; j++) assert_int_equal(b.qh[j], 0xff);
    for (int j = 0; j < 16; j++) assert_int_equal(b.qs[j], 0);
    assert_tern_ok(tern_dequantize_row(TERN_TYPE_Q5_0, &b, y, 32));
    for (int j = 0; j < 32; j++) assert_true(y[j] == 0.f);
}

static void test_q8_0_known(void **state)
{
    (void)state;
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16);
    struct quant_block_q8_0 b, a;
    assert_tern_ok(tern_quantize_row(TERN_TYPE_Q8_0, x, &b, 32));
    assert_int_equal(b.d, fp16_from_f32(16.f / 127.f));
    assert_int_equal(b.d, 0x3008); /* 0.12598 = 0.125 * (1 + 8/1024) rounded */
    assert_int_equal(b.qs[0], -127);
    assert_int_equal(b.qs[17], 8);   /* 1 * 127/16 = 7.94 */
    assert_int_equal(b.qs[31], 119); /* 15 * 7.9375 = 119.06 */

    /* ties: the reference rounds half away from zero, the activation path half to even */
    x[0] = 127.f;
    x[1] = 2.5f;
    x[2] = -3.5f;
    x[3] = 0.5f;
    quant_q8_0_from_float_ref(x, &b, 32);
    quant_q8_0_from_float_act(x, &a, 32);
    assert_int_equal(b.qs[1], 3);
    assert_int_equal(a.qs[1], 2);
    assert_int_equal(b.qs[2], -4);
    assert_int_equal(a.qs[2], -4);
    assert_int_equal(b.qs[3], 1);
    assert_int_equal(a.qs[3], 0);
    assert_int_equal(a.qs[0], 127);
    assert_int_equal(a.d, fp16_from_f32(1.0f));

    /* a zero block: d = 0, all codes 0 */
    memset(x, 0, sizeof x);
    quant_q8_0_from_float_act(x, &a, 32);
    assert_int_equal(a.d, 0);
    for (int j = 0; j < 32; j++) assert_int_equal(a.qs[j], 0);
}

static void test_q8_K_known(void **state)
{
    (void)state;
    float x[256];
    for (int j = 0; j < 256; j++) x[j] = (float)((j % 16) - 4) * 0.25f; /* -1 .. 2.75 */
    x[5] = -4.f;   /* largest magnitude, negative: iscale = -127 / -4 = 31.75 */
    x[6] = 3.f;    /* 95.25 -> 95 */
    x[7] = 2.f;    /* 63.5 -> 64 (half to even) */
    struct quant_block_q8_K b;
    assert_tern_ok(tern_quantize_row(TERN_TYPE_Q8_K, x, &b, 256));
    assert_true(b.d == 1.f / 31.75f);
    assert_int_equal(b.qs[5], -127);
    assert_int_equal(b.qs[6], 95);
    assert_int_equal(b.qs[7], 64);
    assert_int_equal(b.qs[16], -32); /* -1 * 31.75 = -31.75 */
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int j = 0; j < 16; j++) s += b.qs[16 * g + j];
        assert_int_equal(b.bsums[g], s);
    }
    /* group 1 (j = 16..31): codes of (-4..11)*0.25*31.75 */
    int s1 = 0;
    for (int j = 0; j < 16; j++) {
        float v = (float)(j - 4) * 0.25f * 31.75f;
        s1 += (int)nearbyintf(v);
    }
    assert_int_equal(b.bsums[1], s1);
}

static void test_q4_K_known(void **state)
{
    (void)state;
    /* Build a block by hand: d = 1, dmin = 0.5, sub-block j has scale j+1 and min 2j+40 (uses
     * the high bits of the 6-bit packing), codes q(i) = (i*7) % 16. */
    struct quant_block_q4_K b;
    memset(&b, 0, sizeof b);
    b.d = fp16_from_f32(1.0f);
    b.dmin = fp16_from_f32(0.5f);
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)(j + 1 + (j >= 6 ? 50 : 0));
        mn[j] = (uint8_t)(2 * j + 40);
    }
    for (int j = 0; j < 4; j++) {
        b.scales[j] = (uint8_t)((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        b.scales[j + 4] = (uint8_t)((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
        b.scales[j + 8] = (uint8_t)((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
    for (int i = 0; i < 256; i++) {
        int q = (i * 7) % 16;
        int chunk = i / 64, within = i % 64;
        if (within < 32) b.qs[32 * chunk + within] |= (uint8_t)q;
        else b.qs[32 * chunk + within - 32] |= (uint8_t)(q << 4);
    }
    for (int j = 0; j < 8; j++) {
        uint8_t s, m;
        quant_q4k_scale_min(j, b.scales, &s, &m);
        assert_int_equal(s, sc[j]);
        assert_int_equal(m, mn[j]);
    }
    float y[256];
    assert_tern_ok(tern_dequantize_row(TERN_TYPE_Q4_K, &b, y, 256));
    for (int i = 0; i < 256; i++) {
        float want = 1.0f * sc[i / 32] * ((i * 7) % 16) - 0.5f * mn[i / 32];
        assert_true(y[i] == want);
    }
}

static void test_q6_K_known(void **state)
{
    (void)state;
    struct quant_block_q6_K b;
    memset(&b, 0, sizeof b);
    b.d = fp16_from_f32(0.5f);
    for (int s = 0; s < 16; s++) b.scales[s] = (int8_t)(s - 8);
    /* code of element i: (i*5 + 3) % 64, placed per the layout in quant_q6_k.c */
    for (int i = 0; i < 256; i++) {
        int q = (i * 5 + 3) % 64;
        int h = i / 128, e = i % 128, l = e % 32, part = e / 32;
        uint8_t *ql = b.ql + 64 * h, *qh = b.qh + 32 * h;
        int lo_idx = (part == 1 || part == 3) ? l + 32 : l;
        int lo_shift = part >= 2 ? 4 : 0;
        ql[lo_idx] |= (uint8_t)((q & 15) << lo_shift);
        qh[l] |= (uint8_t)((q >> 4) << (2 * part));
    }
    float y[256];
    assert_tern_ok(tern_dequantize_row(TERN_TYPE_Q6_K, &b, y, 256));
    for (int i = 0; i < 256; i++) {
        float want = 0.5f * (float)(i / 16 - 8) * (float)((i * 5 + 3) % 64 - 32);
        assert_true(y[i] == want);
    }
    /* quantizing what we dequantized must give back the same codes wherever the scale is
     * non-zero (the search can only find this exact grid or an equally good one) */
}

static void test_float_known(void **state)
{
    (void)state;
    float x[4] = {1.0f, -2.5f, 65504.f, 1.0f + 1.0f / 4096};
    uint16_t h[4];
    float y[4];
    assert_tern_ok(tern_quantize_row(TERN_TYPE_F16, x, h, 4));
    assert_int_equal(h[0], 0x3c00);
    assert_int_equal(h[1], 0xc100);
    assert_int_equal(h[2], 0x7bff);
    assert_int_equal(h[3], 0x3c00); /* 1 + 2^-12 rounds to 1 */
    assert_tern_ok(tern_dequantize_row(TERN_TYPE_F16, h, y, 4));
    assert_true(y[1] == -2.5f && y[2] == 65504.f);
    assert_tern_ok(tern_quantize_row(TERN_TYPE_BF16, x, h, 4));
    assert_int_equal(h[0], 0x3f80);
    assert_int_equal(h[1], 0xc020);
    assert_tern_ok(tern_dequantize_row(TERN_TYPE_BF16, h, y, 4));
    assert_true(y[0] == 1.0f && y[1] == -2.5f);
    float z[4];
    assert_tern_ok(tern_quantize_row(TERN_TYPE_F32, x, z, 4));
    assert_memory_equal(x, z, sizeof x);
}

/* ---------------------------------------------------------------- round trips */

/* Error bounds of quantize -> dequantize on N(0,1) rows (per row of 1024): the 8-bit and
 * float formats are bounded per element by their step; the 4/6-bit K-quants by RMS error
 * relative to the row's RMS (measured ~0.115 / 0.026 / 0.12 for Q4_0 / Q6_K / Q4_K; bounds
 * leave margin). */
static void test_roundtrip(void **state)
{
    (void)state;
    enum { N = 1024, ROWS = 16 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint8_t *q = malloc(N * 4);
    for (int ti = 0; ti < TEST_N_WEIGHT_TYPES; ti++) {
        const int type = test_weight_types[ti];
        double max_rel_rms = 0;
        for (int r = 0; r < ROWS; r++) {
            for (int i = 0; i < N; i++) x[i] = rnd_normal() * (r + 1) * 0.01f;
            assert_tern_ok(tern_quantize_row(type, x, q, N));
            assert_tern_ok(tern_dequantize_row(type, q, y, N));
            double se = 0, sx = 0;
            for (int bs = 0; bs < N; bs += 32) {
                float amax = 0;
                for (int i = bs; i < bs + 32; i++) amax = fmaxf(amax, fabsf(x[i]));
                for (int i = bs; i < bs + 32; i++) {
                    const float err = fabsf(x[i] - y[i]);
                    switch (type) {
                    case TERN_TYPE_F32: assert_true(err == 0); break;
                    case TERN_TYPE_F16: assert_true(err <= fabsf(x[i]) * 0x1p-11f + 1e-7f); break;
                    case TERN_TYPE_BF16: assert_true(err <= fabsf(x[i]) * 0x1p-8f); break;
                    /* half a step, plus the fp16 rounding of d times up to 127 steps */
                    case TERN_TYPE_Q8_0: assert_true(err <= amax / 127 * 0.57f); break;
                    case TERN_TYPE_Q4_0: assert_true(err <= amax / 8 * 1.01f); break;
                    /* half of a step of range / 15 (range <= 2 amax), plus fp16 d and m */
                    case TERN_TYPE_Q4_1: assert_true(err <= amax / 15 * 1.1f); break;
                    case TERN_TYPE_Q5_0: assert_true(err <= amax / 16 * 1.01f); break;
                    default: break;
                    }
                    se += (double)err * err;
                    sx += (double)x[i] * x[i];
                }
            }
            const double rel = sqrt(se / sx);
            if (rel > max_rel_rms) max_rel_rms = rel;
        }
        const double bound = type == TERN_TYPE_Q4_0 ? 0.13 : type == TERN_TYPE_Q4_K ? 0.13
                             : type == TERN_TYPE_Q5_0 ? 0.065 : type == TERN_TYPE_Q5_K ? 0.065
                             : type == TERN_TYPE_Q5_1 ? 0.055 : type == TERN_TYPE_Q4_1 ? 0.115
                             : type == TERN_TYPE_Q6_K ? 0.035 : type == TERN_TYPE_Q8_0 ? 0.01
                             : 0.003;
        print_message("%-5s max relative RMS error %.4f (bound %.3f)\n", tern_type_name(type),
                      max_rel_rms, bound);
        assert_true(max_rel_rms <= bound);
    }
    free(x);
    free(y);
    free(q);
}

/* ---------------------------------------------------------------- reference dots */

/* dot_ref(w, a) must equal the F32 dot of the dequantized rows up to float rounding: both
 * compute the same sum of exact small-integer products, in a different order. */
static void test_dot_ref(void **state)
{
    (void)state;
    enum { N = 2048 };
    float *x = malloc(N * sizeof *x), *v = malloc(N * sizeof *v);
    float *wd = malloc(N * sizeof *wd), *ad = malloc(N * sizeof *ad);
    uint8_t *wq = malloc(N * 4), *aq = malloc(N * 4);
    for (int ti = 0; ti < TEST_N_WEIGHT_TYPES; ti++) {
        const struct quant_traits *tr = quant_traits_get(test_weight_types[ti]);
        const struct quant_traits *at = quant_traits_get(tr->vec_dot_type);
        for (int rep = 0; rep < 8; rep++) {
            for (int i = 0; i < N; i++) {
                x[i] = rnd_normal() * 0.02f;
                v[i] = rnd_normal() * (rep + 1);
            }
            if (rep == 7) v[100] = 1e3f; /* one outlier activation */
            tr->from_float_ref(x, wq, N);
            at->from_float(v, aq, N);
            tr->to_float(wq, wd, N);
            at->to_float(aq, ad, N);
            double want = 0, mag = 0;
            for (int i = 0; i < N; i++) {
                want += (double)wd[i] * ad[i];
                mag += fabs((double)wd[i] * ad[i]);
            }
            want += test_min_term_fix(tr->type, wq, aq, ad, N);
            const double got = tr->vec_dot_ref(N, wq, aq);
            if (fabs(got - want) > 1e-5 * mag + 1e-6)
                fail_msg("%s rep %d: dot_ref %.9g, dequantized dot %.9g (magnitude %.3g)",
                         tr->name, rep, got, want, mag);
        }
    }
    free(x);
    free(v);
    free(wd);
    free(ad);
    free(wq);
    free(aq);
}

/* ---------------------------------------------------------------- fixture models */

struct mini_tensor {
    char name[96];
    int type;
    int64_t ne0, nrows;
    const uint8_t *data;
};
struct mini_gguf {
    uint8_t *buf;
    size_t len;
    int n;
    struct mini_tensor t[64];
};

static bool rd(const uint8_t *b, size_t len, size_t *p, void *out, size_t n)
{
    if (*p + n > len) return false;
    memcpy(out, b + *p, n);
    *p += n;
    return true;
}

static bool skip_value(const uint8_t *b, size_t len, size_t *p, uint32_t type)
{
    static const size_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type > 12) return false;
    if (type == TERN_GGUF_STRING) {
        uint64_t n;
        if (!rd(b, len, p, &n, 8) || n > len - *p) return false;
        *p += n;
        return true;
    }
    if (type == TERN_GGUF_ARRAY) {
        uint32_t et;
        uint64_t n;
        if (!rd(b, len, p, &et, 4) || !rd(b, len, p, &n, 8)) return false;
        for (uint64_t i = 0; i < n; i++)
            if (!skip_value(b, len, p, et)) return false;
        return true;
    }
    if (*p + sz[type] > len) return false;
    *p += sz[type];
    return true;
}

static bool mini_gguf_load(const char *path, struct mini_gguf *g)
{
    memset(g, 0, sizeof *g);
    g->buf = (uint8_t *)test_read_file(path, &g->len);
    if (!g->buf) return false;
    const uint8_t *b = g->buf;
    size_t p = 4, len = g->len;
    uint32_t version;
    uint64_t n_tensors, n_kv;
    if (memcmp(b, "GGUF", 4) || !rd(b, len, &p, &version, 4) || !rd(b, len, &p, &n_tensors, 8) ||
        !rd(b, len, &p, &n_kv, 8) || n_tensors > 64)
        return false;
    uint32_t alignment = 32;
    for (uint64_t i = 0; i < n_kv; i++) {
        uint64_t kl;
        if (!rd(b, len, &p, &kl, 8) || kl > len - p) return false;
        const bool is_align = kl == 17 && memcmp(b + p, "general.alignment", 17) == 0;
        p += kl;
        uint32_t type;
        if (!rd(b, len, &p, &type, 4)) return false;
        if (is_align && type == TERN_GGUF_UINT32) {
            if (!rd(b, len, &p, &alignment, 4)) return false;
        } else if (!skip_value(b, len, &p, type)) {
            return false;
        }
    }
    uint64_t offs[64];
    for (uint64_t i = 0; i < n_tensors; i++) {
        struct mini_tensor *t = &g->t[i];
        uint64_t nl;
        uint32_t nd, type;
        if (!rd(b, len, &p, &nl, 8) || nl >= sizeof t->name || nl > len - p) return false;
        memcpy(t->name, b + p, nl);
        p += nl;
        if (!rd(b, len, &p, &nd, 4) || nd > 4) return false;
        int64_t ne[4] = {1, 1, 1, 1};
        for (uint32_t d = 0; d < nd; d++)
            if (!rd(b, len, &p, &ne[d], 8)) return false;
        if (!rd(b, len, &p, &type, 4) || !rd(b, len, &p, &offs[i], 8)) return false;
        t->type = (int)type;
        t->ne0 = ne[0];
        t->nrows = ne[1] * ne[2] * ne[3];
    }
    const size_t data = (p + alignment - 1) / alignment * alignment;
    for (uint64_t i = 0; i < n_tensors; i++) {
        struct mini_tensor *t = &g->t[i];
        const size_t bytes = quant_row_bytes(t->type, t->ne0) * (size_t)t->nrows;
        if (data + offs[i] + bytes > len) return false;
        t->data = b + data + offs[i];
    }
    g->n = (int)n_tensors;
    return true;
}

static const struct mini_tensor *mini_find(const struct mini_gguf *g, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->t[i].name, name) == 0) return &g->t[i];
    return NULL;
}

/* Every 2-D tensor of a quantized fixture, dequantized, lies within its format's error of the
 * F16 file's tensor: |q - f16| <= c * (block amax), c per format (Q8_0 0.5/127, Q4_0 1/8, K-quants
 * by RMS). And re-quantizing the F16 values with tern's quantizer lands close to the file's
 * blocks: not byte-identical (the file was quantized from the F32 values, which F16 rounded),
 * but their difference is a fraction of the quantization error. */
static void check_fixture(const char *f16_rel, const char *q_rel, int *types_seen)
{
    const char *p16 = test_shared_path(f16_rel);
    char f16_path[4096];
    snprintf(f16_path, sizeof f16_path, "%s", p16);
    const char *pq = test_shared_path(q_rel);
    assert_non_null(pq);
    struct mini_gguf g16, gq;
    assert_true(mini_gguf_load(f16_path, &g16));
    assert_true(mini_gguf_load(pq, &gq));
    int checked = 0;
    for (int i = 0; i < gq.n; i++) {
        const struct mini_tensor *tq = &gq.t[i];
        if (tq->nrows == 1) continue; /* 1-D norms and biases stay F32 */
        const struct mini_tensor *tf = mini_find(&g16, tq->name);
        assert_non_null(tf);
        assert_int_equal(tf->type, TERN_TYPE_F16);
        assert_true(tern_type_is_supported(tq->type));
        types_seen[tq->type] = 1;
        const int64_t n = tq->ne0;
        const size_t qrow = quant_row_bytes(tq->type, n);
        float *ref = malloc((size_t)n * sizeof *ref), *deq = malloc((size_t)n * sizeof *deq);
        float *deq2 = malloc((size_t)n * sizeof *deq2);
        double sd = 0;
        uint8_t *requant = malloc(qrow);
        double se = 0, sx = 0;
        int64_t blocks = 0, same_blocks = 0;
        const int64_t bs = tern_type_block_size(tq->type), bb = tern_type_block_bytes(tq->type);
        const int64_t rows = tq->nrows < 512 ? tq->nrows : 512; /* keep the test fast */
        for (int64_t r = 0; r < rows; r++) {
            assert_tern_ok(tern_dequantize_row(TERN_TYPE_F16, tf->data + (size_t)r * n * 2, ref, n));
            assert_tern_ok(tern_dequantize_row(tq->type, tq->data + (size_t)r * qrow, deq, n));
            for (int64_t b0 = 0; b0 < n; b0 += 32) {
                float amax = 0;
                for (int64_t j = b0; j < b0 + 32; j++) amax = fmaxf(amax, fabsf(ref[j]));
                for (int64_t j = b0; j < b0 + 32; j++) {
                    const float err = fabsf(ref[j] - deq[j]);
                    if (tq->type == TERN_TYPE_Q8_0) assert_true(err <= amax * (0.5f / 127 + 0.002f));
                    if (tq->type == TERN_TYPE_Q4_0) assert_true(err <= amax * (1.0f / 8 + 0.002f));
                    se += (double)err * err;
                    sx += (double)ref[j] * ref[j];
                }
            }
            assert_tern_ok(tern_quantize_row(tq->type, ref, requant, n));
            assert_tern_ok(tern_dequantize_row(tq->type, requant, deq2, n));
            for (int64_t j = 0; j < n; j++) sd += (double)(deq2[j] - deq[j]) * (deq2[j] - deq[j]);
            for (int64_t b = 0; b < n / bs; b++, blocks++)
                same_blocks += memcmp(requant + b * bb, tq->data + (size_t)r * qrow + b * bb,
                                      (size_t)bb) == 0;
        }
        const double rel = sqrt(se / sx), same = (double)same_blocks / (double)blocks;
        const double redo = sqrt(sd / se);
        const double bound = tq->type == TERN_TYPE_Q8_0 ? 0.01 : tq->type == TERN_TYPE_Q6_K
                             ? 0.035 : 0.13;
        print_message("%s %-24s %-5s rel RMS %.4f, re-quantized: identical blocks %.1f%%, "
                      "RMS diff / quant error %.3f\n", q_rel + 16, tq->name,
                      tern_type_name(tq->type), rel, 100 * same, redo);
        assert_true(rel <= bound);
        /* a quantizer that rounds or searches differently from llama.cpp's lands ~1 quant
         * error away; F16 input rounding alone gives 0.07 (Q4_0) .. 0.35 (Q8_0) */
        assert_true(redo <= 0.5);
        free(ref);
        free(deq);
        free(deq2);
        free(requant);
        checked++;
    }
    assert_true(checked >= 10);
    free(g16.buf);
    free(gq.buf);
}

/* The first two Q5_0 blocks of blk.0.attn_q.weight as llama-quantize (anchor commit c392e50,
 * /work/ext build) wrote them when quantizing fixtures/models/qwen2-tiny-f16.gguf to Q5_0
 * (--pure) on 2026-11-21; tern quantize wrote a byte-identical file then (qwen2-tiny and
 * llama-spm-tiny, every tensor; also for Q5_1 --pure and the Q4_K_M / Q5_K_M mixes). Here tern's quantizer must reproduce the blocks from the F16
 * row. */
static const uint8_t llama_q5_0_attn_q[44] = {
    0xae, 0xa2, 0x58, 0x1f, 0xa0, 0x0d, 0xce, 0xb9, 0xf4, 0xba, 0xe2,
    0x0a, 0x03, 0x0f, 0x94, 0xb4, 0x11, 0x52, 0xf7, 0xca, 0xe8, 0xff,
    0xe0, 0x21, 0x18, 0xbc, 0xd3, 0x17, 0x0e, 0x38, 0xdd, 0xe2, 0x32,
    0x50, 0xa3, 0xfe, 0x0e, 0x9d, 0x00, 0xb1, 0xf5, 0x97, 0xe9, 0x74,
};

/* Same file, quantized to Q5_1 (--pure): the first two blocks of blk.0.attn_q.weight. */
static const uint8_t llama_q5_1_attn_q[48] = {
    0xa4, 0x21, 0x40, 0xb0, 0x26, 0x60, 0x4b, 0x22, 0x1e, 0x24, 0xda, 0x10,
    0xfa, 0xb3, 0xf9, 0xce, 0x17, 0x18, 0xba, 0x79, 0xe4, 0x14, 0xe5, 0xdd,
    0xef, 0x21, 0xe0, 0xb1, 0x18, 0xb8, 0xd3, 0x16, 0x0e, 0x38, 0xdd, 0xe2,
    0x31, 0x50, 0x93, 0xfe, 0xfe, 0x9d, 0x0f, 0xb1, 0xe5, 0x97, 0xe9, 0x73,
};

/* Same file, quantized to Q4_1 (--pure) by llama-quantize c392e50 on 2026-12-06: the first two
 * blocks of blk.0.attn_q.weight (tern quantize's whole Q4_1 file was byte-identical to
 * llama-quantize's then, for qwen2-tiny and llama-spm-tiny). */
static const uint8_t llama_q4_1_attn_q[40] = {
    0xd4, 0x25, 0x40, 0xb0, 0x87, 0x9a, 0x6d, 0x80, 0x75, 0x69, 0xf4, 0x67, 0x03, 0x84,
    0x55, 0x34, 0x72, 0x8a, 0x7a, 0x66, 0x22, 0x26, 0xe0, 0xb1, 0x87, 0x94, 0x66, 0x79,
    0x98, 0x20, 0xc2, 0xf7, 0x77, 0xc6, 0x87, 0x58, 0xfa, 0x4b, 0x74, 0x39,
};

static void test_q5_0_llama_golden(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/qwen2-tiny-f16.gguf");
    struct mini_gguf g;
    assert_true(mini_gguf_load(path, &g));
    const struct mini_tensor *t = mini_find(&g, "blk.0.attn_q.weight");
    assert_non_null(t);
    assert_int_equal(t->type, TERN_TYPE_F16);
    float x[64];
    uint8_t q[44];
    assert_tern_ok(tern_dequantize_row(TERN_TYPE_F16, t->data, x, 64));
    assert_tern_ok(tern_quantize_row(TERN_TYPE_Q5_0, x, q, 64));
    assert_memory_equal(q, llama_q5_0_attn_q, sizeof q);
    uint8_t q1[48];
    assert_tern_ok(tern_quantize_row(TERN_TYPE_Q5_1, x, q1, 64));
    assert_memory_equal(q1, llama_q5_1_attn_q, sizeof q1);
    uint8_t q41[40];
    assert_tern_ok(tern_quantize_row(TERN_TYPE_Q4_1, x, q41, 64));
    assert_memory_equal(q41, llama_q4_1_attn_q, sizeof q41);
    free(g.buf);
}

/* The first Q5_K block of blk.0.attn_q.weight as llama-quantize (same build) wrote it when
 * quantizing fixtures/models/llama-spm-tiny-f16.gguf to Q5_K (--pure) on 2026-11-21; every
 * tensor of tern's Q5_K file was byte-identical to it then. */
static const uint8_t llama_q5_K_attn_q[176] = {
    0x58, 0x0b, 0x2d, 0x1c, 0xef, 0xb1, 0xa9, 0xad, 0xe3, 0xe2, 0xe4, 0xa2,
    0xff, 0x08, 0x8d, 0x39, 0x74, 0x80, 0xb8, 0xec, 0x6b, 0x4d, 0x3c, 0xd1,
    0x30, 0x78, 0x21, 0xfe, 0x36, 0x75, 0x71, 0x67, 0x20, 0x70, 0xf1, 0x96,
    0x84, 0x9e, 0xf4, 0x84, 0xee, 0x4d, 0x69, 0x74, 0x37, 0xf8, 0x41, 0xb8,
    0x6b, 0x78, 0x9d, 0xa8, 0x07, 0x77, 0xcb, 0xb4, 0x76, 0x9e, 0xef, 0x0e,
    0x1e, 0x52, 0xf1, 0x20, 0x6b, 0x71, 0x43, 0x47, 0x0b, 0x6b, 0x3a, 0xab,
    0x3e, 0xa2, 0xf7, 0xb8, 0xe3, 0xef, 0xa2, 0x5e, 0x24, 0xd7, 0x0d, 0xf6,
    0x8b, 0x53, 0x57, 0x6c, 0x87, 0x45, 0xa9, 0x54, 0xa2, 0x0a, 0x4e, 0xea,
    0x1e, 0xc9, 0x5a, 0xc4, 0x9f, 0x27, 0x8c, 0x27, 0x76, 0xb0, 0x6e, 0xf2,
    0x7c, 0x13, 0x8b, 0x10, 0xc5, 0x10, 0x96, 0x89, 0x5c, 0xb9, 0xcc, 0x60,
    0x5b, 0xa5, 0xef, 0xb3, 0xfc, 0x02, 0xcf, 0x88, 0x2d, 0x73, 0x1b, 0xa4,
    0xa8, 0x73, 0xe9, 0x9a, 0x08, 0x8e, 0x9f, 0x22, 0xf0, 0xe1, 0xed, 0xa4,
    0xa8, 0x6f, 0x4c, 0xaa, 0x07, 0xc5, 0xb9, 0x63, 0x7b, 0xf1, 0xfb, 0x81,
    0xdf, 0x87, 0xff, 0xd5, 0xe0, 0xd3, 0x14, 0x7b, 0x0c, 0x3e, 0xfd, 0x4d,
    0x5b, 0x37, 0xaa, 0x41, 0xbc, 0x20, 0xd2, 0x7a,
};

static void test_q5_K_llama_golden(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(path, "fixtures/models/llama-spm-tiny-f16.gguf");
    struct mini_gguf g;
    assert_true(mini_gguf_load(path, &g));
    const struct mini_tensor *t = mini_find(&g, "blk.0.attn_q.weight");
    assert_non_null(t);
    assert_int_equal(t->type, TERN_TYPE_F16);
    float x[256], y[256];
    struct quant_block_q5_K q;
    assert_tern_ok(tern_dequantize_row(TERN_TYPE_F16, t->data, x, 256));
    assert_tern_ok(tern_quantize_row(TERN_TYPE_Q5_K, x, &q, 256));
    assert_memory_equal(&q, llama_q5_K_attn_q, sizeof q);
    /* and it decodes to within the format's error: half a step of the sub-block's scale,
     * plus the dmin*m rounding */
    assert_tern_ok(tern_dequantize_row(TERN_TYPE_Q5_K, &q, y, 256));
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        quant_q4k_scale_min(j, q.scales, &sc, &m);
        const float step = fp16_to_f32(q.d) * sc;
        for (int l = 0; l < 32; l++) assert_true(fabsf(y[32 * j + l] - x[32 * j + l]) <= step);
    }
    free(g.buf);
}

static void test_fixtures(void **state)
{
    (void)state;
    TEST_SHARED_OR_SKIP(dir, "fixtures/models/llama-spm-tiny-f16.gguf");
    (void)dir;
    int seen[TERN_TYPE_COUNT_] = {0};
    check_fixture("fixtures/models/llama-spm-tiny-f16.gguf", "fixtures/models/llama-spm-tiny-q8_0.gguf", seen);
    check_fixture("fixtures/models/llama-spm-tiny-f16.gguf", "fixtures/models/llama-spm-tiny-q4_0.gguf", seen);
    check_fixture("fixtures/models/llama-spm-tiny-f16.gguf", "fixtures/models/llama-spm-tiny-q4_k_m.gguf", seen);
    check_fixture("fixtures/models/llama-spm-tiny-f16.gguf", "fixtures/models/llama-spm-tiny-q6_k.gguf", seen);
    check_fixture("fixtures/models/qwen2-tiny-f16.gguf", "fixtures/models/qwen2-tiny-q4_0.gguf", seen);
    assert_true(seen[TERN_TYPE_Q8_0] && seen[TERN_TYPE_Q4_0] && seen[TERN_TYPE_Q4_K] &&
                seen[TERN_TYPE_Q6_K]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_table),  cmocka_unit_test(test_errors),
        cmocka_unit_test(test_q4_0_known),  cmocka_unit_test(test_q5_0_known),
        cmocka_unit_test(test_q8_0_known),
        cmocka_unit_test(test_q8_K_known),  cmocka_unit_test(test_q4_K_known),
        cmocka_unit_test(test_q6_K_known),  cmocka_unit_test(test_float_known),
        cmocka_unit_test(test_roundtrip),   cmocka_unit_test(test_dot_ref),
        cmocka_unit_test(test_fixtures),    cmocka_unit_test(test_q5_0_llama_golden),
        cmocka_unit_test(test_q5_K_llama_golden),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}

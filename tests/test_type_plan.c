/* test_type_plan.c — the per-tensor type rules of src/model/type_plan.c against llama-quantize:
 * the Q4_K_M mix for the Qwen2.5-0.5B shape must give the exact tensor types and byte total of
 * the file llama.cpp (commit c392e50) wrote for that shape (shared/anchors/llamacpp.md: 391859712
 * tensor bytes; token_embd Q8_0, attn_q/k/output and ffn_gate/up Q5_0, attn_v Q8_0 in 12 layers
 * and Q5_0 in 12, ffn_down Q6_K in 12 and Q4_K in 12), computed here without writing the file. */
#include "test_support.h"

#include <string.h>

#include "convert/type_plan.h"
#include "quant/quant.h"

struct mat {
    const char *kind;
    int64_t cols, rows;
};

static void test_q4_k_m_qwen05(void **state)
{
    (void)state;
    struct type_plan plan;
    assert_tern_ok(type_plan_parse("q4_k_m", &plan));
    assert_false(plan.has_output); /* Qwen2.5-0.5B ties its output to token_embd */
    enum { N_LAYER = 24 };
    const struct mat layer[] = {{"attn_q", 896, 896},      {"attn_k", 896, 128},
                                {"attn_v", 896, 128},      {"attn_output", 896, 896},
                                {"ffn_gate", 896, 4864},   {"ffn_up", 896, 4864},
                                {"ffn_down", 4864, 896}};
    int64_t bytes = 286208; /* the F32 norms and q/k/v biases, as in the anchor file */
    int count[TERN_TYPE_COUNT_] = {0}, fb = 0;
    const int embd = type_plan_pick(&plan, "token_embd", 0, N_LAYER, 896, &fb);
    assert_int_equal(embd, TERN_TYPE_Q8_0); /* Q6_K's 256 does not divide 896 */
    bytes += (int64_t)quant_row_bytes(embd, 896) * 151936;
    int v_q8 = 0, down_q6 = 0;
    for (int il = 0; il < N_LAYER; il++)
        for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++) {
            const int t = type_plan_pick(&plan, layer[i].kind, il, N_LAYER, layer[i].cols, &fb);
            count[t]++;
            bytes += (int64_t)quant_row_bytes(t, layer[i].cols) * layer[i].rows;
            if (!strcmp(layer[i].kind, "attn_v")) {
                assert_true(t == TERN_TYPE_Q8_0 || t == TERN_TYPE_Q5_0);
                v_q8 += t == TERN_TYPE_Q8_0;
            } else if (!strcmp(layer[i].kind, "ffn_down")) {
                assert_true(t == TERN_TYPE_Q6_K || t == TERN_TYPE_Q4_K);
                down_q6 += t == TERN_TYPE_Q6_K;
            } else {
                assert_int_equal(t, TERN_TYPE_Q5_0);
            }
        }
    assert_int_equal(v_q8, 12);
    assert_int_equal(down_q6, 12);
    assert_int_equal(count[TERN_TYPE_Q5_0], 5 * N_LAYER + 12);
    assert_int_equal(bytes, 391859712);
    assert_int_equal(fb, 6 * N_LAYER); /* every 896-column layer matrix fell back (token_embd
                                          * was given Q8_0 by the output rule itself) */
}

/* The rules on shapes where everything fits, and the fallbacks. */
static void test_rules(void **state)
{
    (void)state;
    struct type_plan plan;
    assert_tern_ok(type_plan_parse("q4_k_m", &plan));
    int fb = 0;
    /* with an output matrix, token_embd is an ordinary Q4_K tensor and output is Q6_K */
    plan.has_output = true;
    assert_int_equal(type_plan_pick(&plan, "token_embd", 0, 32, 4096, &fb), TERN_TYPE_Q4_K);
    assert_int_equal(type_plan_pick(&plan, "output", 0, 32, 4096, &fb), TERN_TYPE_Q6_K);
    plan.has_output = false;
    assert_int_equal(type_plan_pick(&plan, "token_embd", 0, 32, 4096, &fb), TERN_TYPE_Q6_K);
    /* use_more_bits for 32 layers: the first 4, the last 4, and every third from layer 6 */
    for (int il = 0; il < 32; il++) {
        const bool more = il < 4 || il >= 28 || (il - 4) % 3 == 2;
        assert_int_equal(type_plan_pick(&plan, "attn_v", il, 32, 4096, &fb),
                         more ? TERN_TYPE_Q6_K : TERN_TYPE_Q4_K);
        assert_int_equal(type_plan_pick(&plan, "ffn_down", il, 32, 11008, &fb),
                         more ? TERN_TYPE_Q6_K : TERN_TYPE_Q4_K); /* 11008 = 43 * 256 */
    }
    assert_int_equal(fb, 0);
    /* plain types are pure; a block that does not divide the rows falls back */
    assert_tern_ok(type_plan_parse("q4_k", &plan));
    assert_int_equal(type_plan_pick(&plan, "attn_v", 0, 32, 4096, &fb), TERN_TYPE_Q4_K);
    assert_int_equal(type_plan_pick(&plan, "attn_q", 0, 32, 896, &fb), TERN_TYPE_Q5_0);
    assert_tern_ok(type_plan_parse("q6_k", &plan));
    assert_int_equal(type_plan_pick(&plan, "attn_q", 0, 32, 896, &fb), TERN_TYPE_Q8_0);
    assert_tern_ok(type_plan_parse("q5_0", &plan));
    assert_int_equal(type_plan_pick(&plan, "attn_q", 0, 32, 896, &fb), TERN_TYPE_Q5_0);
    assert_int_equal(type_plan_pick(&plan, "attn_q", 0, 32, 100, &fb), TERN_TYPE_F16);
    assert_int_equal(fb, 3);

    /* q5_k_m: the same rule on Q5_K, whose fallback is Q5_1 (fixture files made this way were
     * byte-identical to llama-quantize Q5_K_M's) */
    assert_tern_ok(type_plan_parse("q5_k_m", &plan));
    fb = 0;
    assert_int_equal(type_plan_pick(&plan, "token_embd", 0, 24, 896, &fb), TERN_TYPE_Q8_0);
    assert_int_equal(type_plan_pick(&plan, "attn_q", 5, 24, 896, &fb), TERN_TYPE_Q5_1);
    assert_int_equal(type_plan_pick(&plan, "attn_v", 0, 24, 896, &fb), TERN_TYPE_Q8_0);
    assert_int_equal(type_plan_pick(&plan, "attn_v", 4, 24, 896, &fb), TERN_TYPE_Q5_1);
    assert_int_equal(type_plan_pick(&plan, "ffn_down", 0, 24, 4864, &fb), TERN_TYPE_Q6_K);
    assert_int_equal(type_plan_pick(&plan, "ffn_down", 4, 24, 4864, &fb), TERN_TYPE_Q5_K);
    assert_int_equal(fb, 3);
    assert_int_equal(type_plan_parse("q8_1", &plan), TERN_ERR_ARG); /* activation-only */
    assert_int_equal(type_plan_parse("iq2_xs", &plan), TERN_ERR_ARG); /* not supported */
    assert_int_equal(type_plan_parse("q4_1", &plan), TERN_OK);
    assert_int_equal(plan.base, TERN_TYPE_Q4_1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_q4_k_m_qwen05),
        cmocka_unit_test(test_rules),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}

/* test_fp16.c — the scalar half/bfloat16 conversions are exact: every half round-trips, and
 * float -> half rounds to nearest-even. */
#include "test_support.h"
#include "util/fp16.h"

#include <math.h>

static void test_half_roundtrip(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        assert_int_equal(fp16_from_f32(f), h);
    }
}

static void test_half_rounding(void **state)
{
    (void)state;
    /* 1 + 2^-11 is exactly between 1 and the next half (1 + 2^-10): ties go to even (1). */
    assert_int_equal(fp16_from_f32(1.0f + ldexpf(1, -11)), 0x3c00);
    assert_int_equal(fp16_from_f32(1.0f + 3 * ldexpf(1, -11)), 0x3c02);
    assert_int_equal(fp16_from_f32(65520.0f), 0x7c00); /* overflow to inf */
    assert_int_equal(fp16_from_f32(-0.0f), 0x8000);
    assert_int_equal(fp16_from_f32(ldexpf(1, -24)), 0x0001); /* smallest subnormal */
}

static void test_bf16(void **state)
{
    (void)state;
    assert_int_equal(bf16_from_f32(1.0f), 0x3f80);
    assert_true(bf16_to_f32(bf16_from_f32(3.140625f)) == 3.140625f);
    /* ties to even: 1 + 2^-8 lies between 1 and 1 + 2^-7 */
    assert_int_equal(bf16_from_f32(1.0f + ldexpf(1, -8)), 0x3f80);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_half_roundtrip),
        cmocka_unit_test(test_half_rounding),
        cmocka_unit_test(test_bf16),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}

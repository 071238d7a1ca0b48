/* test_batch_invariance.c — kern_matmul gives a token the same bits whatever batch it is in.
 *
 * For every weight type kern_batch_invariant claims on a path (scalar: all; avx512: Q4_0,
 * Q8_0), a batch of 64 tokens is the reference and every sub-batch of n_tok = 1..20 tokens,
 * taken from several offsets inside it (so a token sits in another lane of another tile), must
 * reproduce its rows with memcmp — also over odd row ranges (another 16-row grouping) and for k
 * past one segment of the decode kernel (256 sub-blocks). The AVX-512 path switches from the
 * decode kernel to the panels at n_tok = 2 (Q8_0) and 3 (Q4_0), and the panels pack a full
 * 16-row panel by transposes but a partial one row by row, so this is what proves the three
 * sum in the same order. The AVX-512 Q4_K / Q6_K decode kernels (built, not routed: see
 * kern_avx512_decode_kquant) are held to the same bits against the panels directly, and so is
 * the matmul over weights repacked at load (kern_matmul_packed: Q8_0, Q4_0, Q4_1, Q5_0, Q4_K,
 * Q6_K). The types the query denies are not checked here (test_kernels holds them to a
 * tolerance). Also: the query's answers per path. */
#include "test_support.h"
#include "test_rng.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/kern_invariant.h"
#include "kernels/kern_packed.h"
#include "kernels/kernels.h"
#include "quant/quant.h"

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

#define BATCH 64

struct data {
    int wtype;
    int64_t rows, k;
    size_t ws, as;
    uint8_t *W, *A;
};

static void data_make(struct data *d, int wtype, int64_t rows, int64_t k)
{
    const struct quant_traits *tr = quant_traits_get(wtype);
    const struct quant_traits *at = quant_traits_get(tr->vec_dot_type);
    d->wtype = wtype;
    d->rows = rows;
    d->k = k;
    d->ws = quant_row_bytes(wtype, k) + 16;
    d->as = quant_row_bytes(at->type, k) + 32;
    d->W = calloc((size_t)rows, d->ws);
    d->A = calloc(BATCH, d->as);
    float *x = malloc((size_t)k * sizeof *x);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < k; i++) x[i] = test_rand_normal(&rng_state) * 0.05f;
        tr->from_float_ref(x, d->W + r * d->ws, k);
    }
    for (int t = 0; t < BATCH; t++) {
        for (int64_t i = 0; i < k; i++) x[i] = test_rand_normal(&rng_state) * (1 + t % 4);
        at->from_float(x, d->A + t * d->as, k);
    }
    free(x);
}

static void data_free(struct data *d)
{
    free(d->W);
    free(d->A);
}

static void kq_decode(const void *W, size_t ws, const void *A, size_t as, int n_tok, int64_t k,
                      int64_t r0, int64_t r1, float *Y, int64_t ldy);
static int kq_type; /* the type kq_decode runs */
static void kq_decode(const void *W, size_t ws, const void *A, size_t as, int n_tok, int64_t k,
                      int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    assert_true(kern_avx512_decode_kquant(kq_type, W, ws, A, as, n_tok, k, r0, r1, Y, ldy));
}

/* kern_matmul_packed over pk_P, a packed copy of the W check_type gives it (data_make draws
 * the same W again for the same type and shape: check_packed packs it first). */
static int pk_type;
static void *pk_P;
static void pk_sub(const void *W, size_t ws, const void *A, size_t as, int n_tok, int64_t k,
                   int64_t r0, int64_t r1, float *Y, int64_t ldy)
{
    kern_matmul_packed(pk_type, W, ws, pk_P, A, as, n_tok, k, r0, r1, Y, ldy);
}

/* The reference batch of check_type: kern_matmul, or (ref_packed) the packed matmul itself. */
static bool ref_packed;
/* NULL, or the path the sub-batches run on (the reference runs on the path active at the call;
 * the avx2 tile's AVX-VNNI setting is left as it is) */
static const char *cross_isa;

/* Sub-batches of the 64 (through `sub`, or kern_matmul when NULL) against the full batch
 * through kern_matmul (or `sub`, when ref_packed); returns the number of comparisons. */
static int check_type(const char *path, int wtype, int64_t rows, int64_t k, kern_matmul_fn sub)
{
    struct data d;
    data_make(&d, wtype, rows, k);
    if (sub == pk_sub) { /* pack this W */
        const size_t n = kern_packed_size(wtype, rows, k);
        assert_true(n > 0);
        pk_type = wtype;
        pk_P = aligned_alloc(64, (n + 63) & ~(size_t)63);
        assert_non_null(pk_P);
        kern_pack(wtype, d.W, d.ws, rows, k, 0, rows, pk_P);
    }
    const int64_t ldy = rows + 3;
    float *ref = malloc((size_t)(BATCH * ldy) * sizeof *ref);
    float *Y = malloc((size_t)(BATCH * ldy) * sizeof *Y);
    if (ref_packed)
        sub(d.W, d.ws, d.A, d.as, BATCH, k, 0, rows, ref, ldy);
    else
        kern_matmul(wtype, d.W, d.ws, d.A, d.as, BATCH, k, 0, rows, ref, ldy);
    int n_cmp = 0;
    if (cross_isa) assert_true(kern_force_isa(cross_isa));
    const int64_t ranges[][2] = {{0, rows}, {5, rows - 2}, {17, 18}};
    for (int n = 1; n <= 20; n++) {
        const int offsets[] = {0, 3, BATCH - n};
        for (int oi = 0; oi < 3; oi++) {
            const int t0 = offsets[oi];
            for (int ri = 0; ri < 3; ri++) {
                const int64_t r0 = ranges[ri][0], r1 = ranges[ri][1];
                memset(Y, 0, (size_t)(n * ldy) * sizeof *Y);
                if (sub)
                    sub(d.W, d.ws, d.A + (size_t)t0 * d.as, d.as, n, k, r0, r1, Y, ldy);
                else
                    kern_matmul(wtype, d.W, d.ws, d.A + (size_t)t0 * d.as, d.as, n, k, r0, r1, Y, ldy);
                for (int t = 0; t < n; t++) {
                    const float *want = ref + (size_t)(t0 + t) * ldy + r0;
                    const float *got = Y + (size_t)t * ldy + r0;
                    if (memcmp(want, got, (size_t)(r1 - r0) * sizeof *got) != 0) {
                        int64_t r = 0;
                        while (want[r] == got[r]) r++;
                        fail_msg("%s %s k=%lld: token %d computed in a batch of %d (rows %lld..%lld) "
                                 "differs from the batch of %d at row %lld: %.9g vs %.9g",
                                 path, tern_type_name(wtype), (long long)k, t0 + t, n,
                                 (long long)r0, (long long)r1, BATCH, (long long)(r0 + r),
                                 got[r], want[r]);
                    }
                    n_cmp++;
                }
            }
        }
    }
    free(ref);
    free(Y);
    data_free(&d);
    if (sub == pk_sub) {
        free(pk_P);
        pk_P = NULL;
    }
    return n_cmp;
}

/* The formats with a copy repacked at load (kern_panel_layout.h, "stored layout"). */
static const int pk[] = {TERN_TYPE_Q8_0, TERN_TYPE_Q4_0, TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_Q4_K,
                         TERN_TYPE_Q6_K};
#define N_PACKED ((int)(sizeof pk / sizeof pk[0]))

static void run_path(const char *path)
{
    if (!kern_force_isa(path)) {
        print_message("SKIP path %s: this CPU cannot run it\n", path);
        return;
    }
    int checked = 0;
    for (int ti = 0; ti < TEST_N_WEIGHT_TYPES; ti++) { /* every format a claim may cover */
        const int wtype = test_weight_types[ti];
        if (!kern_batch_invariant(wtype)) continue;
        const bool kq = quant_traits_get(wtype)->block_size == 256;
        /* one segment with an odd block count; then past one segment (256 sub-blocks) */
        const int64_t ks[2] = {kq ? 256 * 3 : 32 * 27, kq ? 256 * 33 : 32 * 301};
        int n = 0;
        for (int ki = 0; ki < 2; ki++) n += check_type(path, wtype, 37, ks[ki], NULL);
        print_message("%-6s %-5s %d (token, batch, rows) cases bit-identical to the batch of %d\n",
                      path, tern_type_name(wtype), n, BATCH);
        checked++;
    }
    assert_true(checked > 0);
}

static void test_scalar(void **state)
{
    (void)state;
    run_path("scalar");
}

static void test_avx512(void **state)
{
    (void)state;
    run_path("avx512");
    if (kern_force_isa("avx512")) {
        static const int kq[] = {TERN_TYPE_Q4_K, TERN_TYPE_Q6_K};
        for (int i = 0; i < 2; i++) {
            kq_type = kq[i];
            const int n = check_type("avx512-decode", kq[i], 37, 256 * 3, kq_decode) +
                          check_type("avx512-decode", kq[i], 37, 256 * 33, kq_decode);
            print_message("avx512 %s decode kernel: %d cases bit-identical to the panels' batch of %d\n",
                          tern_type_name(kq[i]), n, BATCH);
        }
        /* Weights repacked at load (kern_packed.h): every n_tok reads the copy, whose tile is
         * the panels' one; the batch of 64 runs the on-the-fly panels. Rows past one 128-row
         * block and ranges cut inside a panel (r0 = 5, 17; r1 = rows - 2). */
        for (int i = 0; i < N_PACKED; i++) {
            const bool kb = quant_traits_get(pk[i])->block_size == 256;
            const int n = check_type("avx512-packed", pk[i], 37, kb ? 256 * 3 : 32 * 27, pk_sub) +
                          check_type("avx512-packed", pk[i], 301, kb ? 256 * 5 : 32 * 51, pk_sub) +
                          check_type("avx512-packed", pk[i], 37, kb ? 256 * 33 : 32 * 301, pk_sub);
            print_message("avx512 %s packed copy: %d cases bit-identical to the panels' batch of %d\n",
                          tern_type_name(pk[i]), n, BATCH);
        }
    }
    assert_true(kern_force_isa("scalar"));
    assert_int_equal(kern_packed_size(TERN_TYPE_Q8_0, 37, 32 * 27), 0); /* no layout on scalar */
}

/* The avx2 path's 256-bit tile over weights repacked at load, with AVX-VNNI's vpdpbusd (where
 * the CPU has it) and with vpmaddubsw: every n_tok 1..20 gives a token the bits of the 64-token
 * batch through the same tile, and where this CPU also runs avx512, the bits of the AVX-512
 * panels' batch (the same float operations per lane): one result on every path. */
static void test_avx2_packed(void **state)
{
    (void)state;
    if (!kern_force_isa("avx2")) {
        print_message("SKIP: this CPU cannot run the avx2 path\n");
        return;
    }
    int variants = 0;
    for (int vnni = 1; vnni >= 0; vnni--) {
        assert_true(kern_force_isa("avx2"));
        if (!kern_force_avxvnni(vnni)) {
            print_message("SKIP avx2+avxvnni: this CPU has no AVX-VNNI\n");
            continue;
        }
        const char *name = vnni ? "avx2+avxvnni-packed" : "avx2-packed";
        variants++;
        for (int i = 0; i < N_PACKED; i++) {
            const bool kb = quant_traits_get(pk[i])->block_size == 256;
            const int64_t shapes[][2] = {{37, kb ? 256 * 3 : 32 * 27}, {301, kb ? 256 * 5 : 32 * 51},
                                         {37, kb ? 256 * 33 : 32 * 301}};
            int n = 0;
            ref_packed = true;
            for (int si = 0; si < 3; si++) n += check_type(name, pk[i], shapes[si][0], shapes[si][1], pk_sub);
            ref_packed = false;
            print_message("%s %s: %d cases bit-identical to its own batch of %d\n", name,
                          tern_type_name(pk[i]), n, BATCH);
            if (!kern_force_isa("avx512")) continue;
            /* the same sub-batches, on avx2, against the AVX-512 panels' batch */
            n = 0;
            for (int si = 0; si < 3; si++) {
                assert_true(kern_force_isa("avx512"));
                cross_isa = "avx2";
                n += check_type(name, pk[i], shapes[si][0], shapes[si][1], pk_sub);
                cross_isa = NULL;
            }
            print_message("%s %s: %d cases bit-identical to the avx512 panels' batch of %d\n", name,
                          tern_type_name(pk[i]), n, BATCH);
            assert_true(kern_force_isa("avx2"));
        }
    }
    assert_true(variants > 0);
    kern_force_avxvnni(true);
    assert_true(kern_force_isa("scalar"));
}

/* What the query says per path: the claims test_avx512 checks, and no claim for the tiles. */
static void test_query(void **state)
{
    (void)state;
    assert_true(kern_force_isa("scalar"));
    assert_true(kern_batch_invariant(TERN_TYPE_F16));
    assert_true(kern_batch_invariant(TERN_TYPE_Q4_K));
    if (kern_force_isa("avx2")) {
        assert_false(kern_batch_invariant(TERN_TYPE_Q4_0));
        assert_false(kern_batch_invariant(TERN_TYPE_F32));
    }
    if (kern_force_isa("avx512")) {
        assert_true(kern_batch_invariant(TERN_TYPE_Q4_0));
        assert_true(kern_batch_invariant(TERN_TYPE_Q8_0));
        assert_false(kern_batch_invariant(TERN_TYPE_Q4_K));
        assert_false(kern_batch_invariant(TERN_TYPE_Q6_K));
        assert_false(kern_batch_invariant(TERN_TYPE_F16));
    }
    assert_true(kern_force_isa("scalar"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query),
        cmocka_unit_test(test_scalar),
        cmocka_unit_test(test_avx512),
        cmocka_unit_test(test_avx2_packed),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}

/* test_kernels.c — src/kernels against the references of src/quant.
 *
 * 1. The scalar kern_matmul equals an F32 matmul of the dequantized weights and activations
 *    (row ranges, strides and ldy honoured; rows outside [r0, r1) untouched).
 * 2. Every SIMD path this CPU can run (avx2 with and without AVX-VNNI, avx512) against the scalar
 *    path on random data, odd row ranges and n_tok in {1,2,3,7,16,33} (Q5_0/Q5_1/Q4_1 also with rows
 *    past the decode kernels' buffers). Tolerance: integer formats compute the same
 *    exact integer block sums, so results differ only by float summation order:
 *    |simd - scalar| <= 1e-5 * sum|w_i*a_i| (+ 1e-6). The float formats (F32/F16/BF16) sum
 *    float products in a different order too: same bound.
 * 2b. The blocked prefill kernels (AVX-512 repacked 16-row panels, 128-row blocks, 512-element k
 *    chunks, 8-token tiles) on shapes that cut every blocking unevenly: rows > 128 and not a
 *    multiple of 16, k past one chunk and not a multiple of it, n_tok not a multiple of the
 *    tile; called through kern_matmul and directly (so small n_tok reach them too). Also the
 *    AVX-512 decode kernels (n_tok < 6): odd block counts, token groups, k past their buffer.
 * 2c. The matmul over weights repacked at load (kern_packed.h: Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K) on every
 *    path with a panel tile (avx512; avx2 with AVX-VNNI and without), same shapes and ranges as
 *    2b and the widest pair sums (one token and 16), against scalar: the few-token driver
 *    (n_tok <= 16) and the row-block one, partial panels.
 * 2d. The avx2 path's per-call panels (with and without AVX-VNNI), shapes of 2b and the widest
 *    pair sums, against scalar and bit for bit against the AVX-512 panels.
 * 3. kern_quantize_act is bit-identical to the scalar from_float on every path, including
 *    ties (values that land exactly on .5 steps), zero blocks and outliers. */
#include "test_support.h"
#include "test_rng.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/kern_packed.h"
#include "kernels/kernels.h"
#include "quant/quant.h"

static uint64_t rng_state = 0x243F6A8885A308D3ull; /* each test file draws its own sequence */
#define rnd_uniform() test_rand_uniform(&rng_state)
#define rnd_normal() test_rand_normal(&rng_state)

/* A random problem: W (rows x k) in wtype with some padding between rows, A (n_tok x k) in the
 * activation type, plus the dequantized F32 copies and sum|w*a| per output for tolerances. */
struct problem {
    int wtype, atype, n_tok;
    int64_t rows, k;
    size_t w_stride, a_stride;
    uint8_t *W, *A;
    float *Wf, *Af;
};

static void problem_make(struct problem *p, int wtype, int64_t rows, int64_t k, int n_tok)
{
    const struct quant_traits *tr = quant_traits_get(wtype);
    p->wtype = wtype;
    p->atype = tr->vec_dot_type;
    p->rows = rows;
    p->k = k;
    p->n_tok = n_tok;
    p->w_stride = quant_row_bytes(wtype, k) + 64; /* padding: strides are honoured */
    p->a_stride = quant_row_bytes(p->atype, k) + 32;
    /* guarded: a kernel reading past the last row or token faults (test_guarded_alloc) */
    p->W = test_guarded_alloc((size_t)rows * p->w_stride, 64);
    p->A = test_guarded_alloc((size_t)n_tok * p->a_stride, 64);
    p->Wf = malloc((size_t)(rows * k) * sizeof(float));
    p->Af = malloc((size_t)(n_tok * k) * sizeof(float));
    float *x = malloc((size_t)k * sizeof *x);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < k; i++) x[i] = rnd_normal() * 0.05f;
        tr->from_float_ref(x, p->W + r * p->w_stride, k);
        tr->to_float(p->W + r * p->w_stride, p->Wf + r * k, k);
    }
    const struct quant_traits *at = quant_traits_get(p->atype);
    for (int t = 0; t < n_tok; t++) {
        for (int64_t i = 0; i < k; i++) x[i] = rnd_normal() * (1 + t % 3);
        at->from_float(x, p->A + t * p->a_stride, k);
        at->to_float(p->A + t * p->a_stride, p->Af + t * k, k);
    }
    free(x);
}

static void problem_free(struct problem *p)
{
    test_guarded_free(p->W);
    test_guarded_free(p->A);
    free(p->Wf);
    free(p->Af);
}

static void check_close(const struct problem *p, const float *Y, const float *ref_or_null,
                        int64_t r0, int64_t r1, int64_t ldy, const char *what)
{
    for (int t = 0; t < p->n_tok; t++) {
        for (int64_t r = 0; r < p->rows; r++) {
            const float got = Y[t * ldy + r];
            if (r < r0 || r >= r1) {
                if (got != -7.0f) fail_msg("%s %s: wrote outside [r0,r1) at row %lld tok %d",
                                           what, tern_type_name(p->wtype), (long long)r, t);
                continue;
            }
            double want = 0, mag = 0;
            for (int64_t i = 0; i < p->k; i++) {
                const double v = (double)p->Wf[r * p->k + i] * p->Af[t * p->k + i];
                want += v;
                mag += fabs(v);
            }
            want += test_min_term_fix(p->wtype, p->W + r * p->w_stride, p->A + t * p->a_stride,
                                      p->Af + t * p->k, p->k);
            if (ref_or_null) want = ref_or_null[t * ldy + r];
            if (fabs(got - want) > 1e-5 * mag + 1e-6)
                fail_msg("%s %s k=%lld n_tok=%d: row %lld tok %d got %.9g want %.9g (mag %.3g)",
                         what, tern_type_name(p->wtype), (long long)p->k, p->n_tok,
                         (long long)r, t, got, want, mag);
        }
    }
}

static void test_scalar_matmul(void **state)
{
    (void)state;
    for (int ti = 0; ti < TEST_N_WEIGHT_TYPES; ti++) {
        struct problem p;
        const int64_t k = tern_type_block_size(test_weight_types[ti]) == 256
                              ? 512 : 96;
        problem_make(&p, test_weight_types[ti], 13, k, 5);
        const int64_t ldy = p.rows + 3;
        float *Y = malloc((size_t)(ldy * p.n_tok) * sizeof *Y);
        for (int64_t i = 0; i < ldy * p.n_tok; i++) Y[i] = -7.0f;
        kern_matmul_scalar(p.wtype, p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k, 2, 11, Y, ldy);
        check_close(&p, Y, NULL, 2, 11, ldy, "scalar");
        free(Y);
        problem_free(&p);
    }
}

/* avx2 twice: with AVX-VNNI where the CPU has it (its panels and Q5 decode kernel) and without */
static const char *const simd_paths[] = {"avx2", "avx2", "avx512"};

static void test_simd_matmul(void **state)
{
    (void)state;
    static const int n_toks[] = {1, 2, 3, 7, 16, 33};
    int paths_run = 0;
    for (size_t pi = 0; pi < sizeof simd_paths / sizeof simd_paths[0]; pi++) {
        if (!kern_force_isa(simd_paths[pi])) {
            print_message("SKIP path %s: this CPU cannot run it\n", simd_paths[pi]);
            continue;
        }
        if (pi < 2 && !kern_force_avxvnni(pi == 0)) {
            print_message("SKIP avx2+avxvnni: this CPU has no AVX-VNNI\n");
            continue;
        }
        paths_run++;
        for (int ti = 0; ti < TEST_N_WEIGHT_TYPES; ti++) {
            const int wtype = test_weight_types[ti];
            /* every weight type has a kernel of its own on each SIMD path (no silent scalar) */
            if (pi < 2)
                assert_true(kern_avx2_matmul(wtype) || kern_q5_avx2_matmul(wtype));
            else
                assert_true(kern_avx512_matmul(wtype) || kern_q5_avx512_matmul(wtype));
            double max_diff = 0;
            const bool kq = tern_type_block_size(wtype) == 256;
            for (size_t ni = 0; ni < sizeof n_toks / sizeof n_toks[0]; ni++) {
                struct problem p;
                const int64_t k = kq ? 256 * (1 + (int64_t)ni % 3) : 32 * (1 + (int64_t)ni * 5);
                problem_make(&p, wtype, 37, k, n_toks[ni]);
                const int64_t ldy = p.rows + 1;
                const size_t ny = (size_t)(ldy * p.n_tok);
                float *Y = malloc(ny * sizeof *Y), *R = malloc(ny * sizeof *R);
                /* a few ranges: all rows, odd start and end, a single row */
                const int64_t ranges[][2] = {{0, 37}, {3, 30}, {5, 6}, {1, 36}};
                for (int ri = 0; ri < 4; ri++) {
                    for (size_t i = 0; i < ny; i++) Y[i] = R[i] = -7.0f;
                    kern_matmul(wtype, p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k,
                                ranges[ri][0], ranges[ri][1], Y, ldy);
                    kern_matmul_scalar(wtype, p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k,
                                       ranges[ri][0], ranges[ri][1], R, ldy);
                    check_close(&p, Y, R, ranges[ri][0], ranges[ri][1], ldy, simd_paths[pi]);
                    for (size_t i = 0; i < ny; i++)
                        if (fabs((double)Y[i] - R[i]) > max_diff) max_diff = fabs((double)Y[i] - R[i]);
                }
                free(Y);
                free(R);
                problem_free(&p);
            }
            if (wtype == TERN_TYPE_Q5_0 || wtype == TERN_TYPE_Q5_1 || wtype == TERN_TYPE_Q4_1) {
                /* rows longer than the decode kernels' activation buffers (k > 24576): they
                 * decline and the tiles take the call */
                struct problem p;
                problem_make(&p, wtype, 5, 32 * 801, 2);
                float *Y = malloc(2 * 6 * sizeof *Y), *R = malloc(2 * 6 * sizeof *R);
                for (int i = 0; i < 12; i++) Y[i] = R[i] = -7.0f;
                kern_matmul(wtype, p.W, p.w_stride, p.A, p.a_stride, 2, p.k, 0, 5, Y, 6);
                kern_matmul_scalar(wtype, p.W, p.w_stride, p.A, p.a_stride, 2, p.k, 0, 5, R, 6);
                check_close(&p, Y, R, 0, 5, 6, simd_paths[pi]);
                free(Y);
                free(R);
                problem_free(&p);
            }
            print_message("%-12s %-5s max |simd - scalar| %.3g\n", kern_path_name(),
                          tern_type_name(wtype), max_diff);
        }
    }
    kern_force_avxvnni(true); /* back to the CPU's own setting where it has AVX-VNNI */
    assert_true(kern_force_isa("scalar"));
    print_message("SIMD paths compared with scalar: %d\n", paths_run);
}

static void test_blocked_prefill(void **state)
{
    (void)state;
    if (!kern_force_isa("avx512")) {
        print_message("SKIP: this CPU cannot run the avx512 path\n");
        return;
    }
    static const int shapes[][3] = {/* rows, k / 32, n_tok */
                                    {150, 37, 9}, {40, 17, 17}, {131, 16, 6}, {33, 3, 3},
                                    {16, 33, 1}, {272, 8, 8},
                                    /* decode kernels: odd block counts, token groups cut by
                                     * the activation buffer, k beyond it (tile fallback) */
                                    {37, 7, 4}, {37, 9, 5}, {40, 301, 5}, {20, 801, 4}};
    const int64_t ranges[][2] = {{0, -1}, {16, -16}, {7, -9}};
    int checked = 0;
    for (int ti = 0; ti < TEST_N_WEIGHT_TYPES; ti++) {
        const int wtype = test_weight_types[ti];
        const kern_matmul_fn direct = kern_avx512_panel_matmul(wtype);
        if (!direct) continue;
        const int64_t bs = quant_traits_get(wtype)->block_size;
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            struct problem p;
            const int64_t k = bs == 32 ? 32 * shapes[si][1] : 256 * (1 + shapes[si][1] % 5);
            problem_make(&p, wtype, shapes[si][0], k, shapes[si][2]);
            const int64_t ldy = p.rows + 5;
            const size_t ny = (size_t)(ldy * p.n_tok);
            float *Y = malloc(ny * sizeof *Y), *R = malloc(ny * sizeof *R);
            for (int ri = 0; ri < 3; ri++) {
                const int64_t r0 = ranges[ri][0], r1 = p.rows + 1 + ranges[ri][1];
                for (int via = 0; via < 2; via++) {
                    for (size_t i = 0; i < ny; i++) Y[i] = R[i] = -7.0f;
                    if (via == 0)
                        kern_matmul(wtype, p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k, r0, r1,
                                    Y, ldy);
                    else
                        direct(p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k, r0, r1, Y, ldy);
                    kern_matmul_scalar(wtype, p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k, r0,
                                       r1, R, ldy);
                    check_close(&p, Y, R, r0, r1, ldy, via == 0 ? "avx512" : "avx512-panel");
                    checked++;
                }
            }
            free(Y);
            free(R);
            problem_free(&p);
        }
    }
    assert_true(checked > 0);
    assert_true(kern_force_isa("scalar"));
    print_message("blocked prefill: %d (shape, range, entry) cases against scalar\n", checked);
}

/* Codes at their format's maximum against activations of +-127, the widest int16 pair sums of
 * the vpmaddubsw tiles: one -1 per 32 elements makes the scale, so the 0.98s land on the
 * format's largest code (Q4 15, Q5 31, Q6_K 63, Q8_0 127), against activations of +127 (tokens
 * of one sign) or -127. */
static void problem_fill_widest(struct problem *p)
{
    const int64_t k = p->k;
    float *wf = malloc((size_t)k * sizeof *wf);
    assert_non_null(wf);
    const struct quant_traits *tr = quant_traits_get(p->wtype);
    for (int64_t r = 0; r < p->rows; r++) {
        for (int64_t e = 0; e < k; e++) wf[e] = (e % 32 == 3 ? -1.0f : 0.98f) * (1.0f + 0.001f * (float)(r % 5));
        tr->from_float_ref(wf, (uint8_t *)p->W + (size_t)r * p->w_stride, k);
    }
    for (int t = 0; t < p->n_tok; t++) {
        for (int64_t e = 0; e < k; e++) wf[e] = t % 2 ? -1.0f : 1.0f;
        quant_traits_get(p->atype)->from_float_ref(wf, (uint8_t *)p->A + (size_t)t * p->a_stride, k);
    }
    free(wf);
}

/* 2d. The avx2 path's per-call panels (Q5_0, Q5_1, Q5_K and Q6_K, and the stored formats loaded
 * mmap-only), with AVX-VNNI's 16-row tile and with the vpmaddubsw one (whose int16 pair sums are
 * widened every 8, 4 or 2 groups for 4-, 5- and 6-bit codes), on the shapes of 2b, through
 * kern_matmul and directly: against scalar, and, where this CPU also runs avx512, bit for bit
 * against the AVX-512 panels (the same packed bytes and scales, the same float operations per
 * lane, exact integer dots). Codes at their format's maximum against activations of +-127 (the
 * largest pair sums) are one of the problems. */
static void test_avx2_panels(void **state)
{
    (void)state;
    if (!kern_force_isa("avx2")) {
        print_message("SKIP: this CPU cannot run the avx2 path\n");
        return;
    }
    static const int shapes[][3] = {/* rows, k / 32, n_tok */
                                    {150, 37, 9}, {40, 17, 17}, {131, 16, 8}, {33, 3, 3},
                                    {16, 33, 1}, {272, 8, 12}, {37, 9, 5}, {48, 16, 16}};
    const int n_shapes = (int)(sizeof shapes / sizeof shapes[0]);
    const int64_t ranges[][2] = {{0, -1}, {16, -16}, {7, -9}};
    int checked = 0, same_bits = 0;
    for (int vnni = 1; vnni >= 0; vnni--) {
        if (!kern_force_avxvnni(vnni)) {
            print_message("SKIP avx2+avxvnni: this CPU has no AVX-VNNI\n");
            continue;
        }
        for (int ti = 0; ti < TEST_N_WEIGHT_TYPES; ti++) {
            const int wtype = test_weight_types[ti];
            const int min_tok = vnni ? kern_avxvnni_panel_min_tok(wtype) : kern_avx2_panel_min_tok(wtype);
            if (min_tok == INT_MAX) continue;
            assert_true(min_tok > 1 && min_tok <= 16);
            const int64_t bs = quant_traits_get(wtype)->block_size;
            for (int si = 0; si < n_shapes; si++) {
                struct problem p;
                const int64_t k = bs == 32 ? 32 * shapes[si][1] : 256 * (1 + shapes[si][1] % 5);
                problem_make(&p, wtype, shapes[si][0], k, shapes[si][2]);
                if (si == n_shapes - 1) problem_fill_widest(&p);
                const int64_t ldy = p.rows + 5;
                const size_t ny = (size_t)(ldy * p.n_tok);
                float *Y = malloc(ny * sizeof *Y), *R = malloc(ny * sizeof *R), *Z = malloc(ny * sizeof *Z);
                for (int ri = 0; ri < 3; ri++) {
                    const int64_t r0 = ranges[ri][0], r1 = p.rows + 1 + ranges[ri][1];
                    for (int via = 0; via < 2; via++) {
                        for (size_t i = 0; i < ny; i++) Y[i] = R[i] = Z[i] = -7.0f;
                        assert_true(kern_force_isa("avx2"));
                        if (via == 0)
                            kern_matmul(wtype, p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k, r0, r1, Y, ldy);
                        else if (vnni)
                            kern_avxvnni_panel_run(wtype, p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k, r0, r1,
                                                   Y, ldy);
                        else
                            kern_avx2_panel_run(wtype, p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k, r0, r1, Y,
                                                ldy);
                        kern_matmul_scalar(wtype, p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k, r0, r1, R, ldy);
                        check_close(&p, Y, R, r0, r1, ldy, via == 0 ? kern_path_name() : "avx2-panel");
                        checked++;
                        if (via == 0 || !kern_force_isa("avx512")) continue;
                        kern_avx512_panel_matmul(wtype)(p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k, r0, r1,
                                                        Z, ldy);
                        for (int t = 0; t < p.n_tok; t++)
                            for (int64_t r = r0; r < r1; r++)
                                if (memcmp(&Y[t * ldy + r], &Z[t * ldy + r], sizeof *Y))
                                    fail_msg("avx2 panels (%s) %s k=%lld n_tok=%d row %lld tok %d: %.9g, the "
                                             "AVX-512 panels %.9g", vnni ? "VNNI" : "vpmaddubsw",
                                             tern_type_name(wtype), (long long)p.k, p.n_tok, (long long)r, t,
                                             Y[t * ldy + r], Z[t * ldy + r]);
                        same_bits++;
                    }
                }
                free(Y);
                free(R);
                free(Z);
                problem_free(&p);
            }
        }
    }
    assert_true(checked > 0);
    kern_force_avxvnni(true); /* back to the CPU's own setting where it has AVX-VNNI */
    assert_true(kern_force_isa("scalar"));
    print_message("avx2 per-call panels: %d (shape, range, entry) cases against scalar, %d bit-identical "
                  "to the AVX-512 panels\n", checked, same_bits);
}

static void test_packed_vs_scalar(void **state)
{
    (void)state;
    static const int shapes[][3] = {/* rows, k / 32, n_tok; the last two: the widest pair sums */
                                    {150, 37, 9}, {40, 17, 17}, {131, 16, 6}, {33, 3, 3},
                                    {16, 33, 1}, {272, 8, 8}, {37, 301, 5}, {20, 801, 2},
                                    {530, 20, 40}, {200, 20, 24}, {48, 16, 1}, {48, 16, 16}};
    const size_t n_shapes = sizeof shapes / sizeof shapes[0];
    static const int types[] = {TERN_TYPE_Q8_0, TERN_TYPE_Q4_0, TERN_TYPE_Q4_1, TERN_TYPE_Q5_0, TERN_TYPE_Q4_K,
                                TERN_TYPE_Q6_K};
    const int n_types = (int)(sizeof types / sizeof types[0]);
    const int64_t ranges[][2] = {{0, -1}, {16, -16}, {7, -9}};
    static const char *const variants[] = {"avx512", "avx2+avxvnni", "avx2"};
    int checked = 0;
    for (int vi = 0; vi < 3; vi++) {
        const bool avx2 = vi > 0;
        if (!kern_force_isa(avx2 ? "avx2" : "avx512") || (avx2 && !kern_force_avxvnni(vi == 1))) {
            print_message("SKIP %s: this CPU cannot run it\n", variants[vi]);
            continue;
        }
        for (int ti = 0; ti < n_types; ti++) {
            const int64_t bs = quant_traits_get(types[ti])->block_size;
            for (size_t si = 0; si < n_shapes; si++) {
                struct problem p;
                const int64_t k = bs == 32 ? 32 * shapes[si][1] : 256 * (1 + shapes[si][1] % 5);
                problem_make(&p, types[ti], shapes[si][0], k, shapes[si][2]);
                if (si >= n_shapes - 2) problem_fill_widest(&p);
                const size_t pn = kern_packed_size(p.wtype, p.rows, p.k);
                assert_true(pn > 0);
                void *P = test_guarded_alloc(pn, 64);
                kern_pack(p.wtype, p.W, p.w_stride, p.rows, p.k, 0, p.rows, P);
                const int64_t ldy = p.rows + 5;
                const size_t ny = (size_t)(ldy * p.n_tok);
                float *Y = malloc(ny * sizeof *Y), *R = malloc(ny * sizeof *R);
                for (int ri = 0; ri < 3; ri++) {
                    const int64_t r0 = ranges[ri][0], r1 = p.rows + 1 + ranges[ri][1];
                    for (size_t i = 0; i < ny; i++) Y[i] = R[i] = -7.0f;
                    kern_matmul_packed(p.wtype, p.W, p.w_stride, P, p.A, p.a_stride, p.n_tok, p.k, r0,
                                       r1, Y, ldy);
                    kern_matmul_scalar(p.wtype, p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k, r0, r1,
                                       R, ldy);
                    check_close(&p, Y, R, r0, r1, ldy, variants[vi]);
                    checked++;
                }
                free(Y);
                free(R);
                test_guarded_free(P);
                problem_free(&p);
            }
        }
    }
    kern_force_avxvnni(true);
    assert_true(kern_force_isa("scalar"));
    print_message("packed copies: %d (path, type, shape, range) cases against scalar\n", checked);
}

/* Float formats take any k: odd k reaches the masked tails of the SIMD float tiles. */
static void test_float_odd_k(void **state)
{
    (void)state;
    static const int64_t ks[] = {1, 5, 17, 31, 33, 100, 257};
    static const int n_toks[] = {1, 3, 5, 9};
    const int types[] = {TERN_TYPE_F32, TERN_TYPE_F16, TERN_TYPE_BF16};
    int checked = 0;
    for (size_t pi = 0; pi < sizeof simd_paths / sizeof simd_paths[0]; pi++) {
        if (!kern_force_isa(simd_paths[pi])) continue;
        for (int ti = 0; ti < 3; ti++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                struct problem p;
                problem_make(&p, types[ti], 11, ks[ki], n_toks[ki % 4]);
                const int64_t ldy = p.rows + 2;
                const size_t ny = (size_t)(ldy * p.n_tok);
                float *Y = malloc(ny * sizeof *Y), *R = malloc(ny * sizeof *R);
                for (size_t i = 0; i < ny; i++) Y[i] = R[i] = -7.0f;
                kern_matmul(p.wtype, p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k, 1, 10, Y, ldy);
                kern_matmul_scalar(p.wtype, p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k, 1, 10,
                                   R, ldy);
                check_close(&p, Y, R, 1, 10, ldy, simd_paths[pi]);
                checked++;
                free(Y);
                free(R);
                problem_free(&p);
            }
    }
    assert_true(kern_force_isa("scalar"));
    print_message("float formats, odd k: %d cases against scalar\n", checked);
}

static void fill_activation(float *x, int64_t k, int variant)
{
    for (int64_t i = 0; i < k; i++) x[i] = rnd_normal() * (variant + 1);
    if (variant == 1) { /* ties: multiples of amax/254 land on .5 in Q8_0 units */
        for (int64_t i = 0; i < k; i++) x[i] = (float)((int)(rnd_uniform() * 255) - 127) * 0.5f;
        for (int64_t b = 0; b < k; b += 32) x[b] = 127.f;
    }
    if (variant == 2) { /* a zero block and an outlier */
        for (int64_t i = 0; i < 32 && i < k; i++) x[i] = 0;
        x[k - 1] = -1e4f;
    }
    if (variant == 3) /* F16 overflow, subnormals */
        for (int64_t i = 0; i < k; i += 7) x[i] = (i % 2) ? 1e5f : 1e-7f;
}

static void test_quantize_act(void **state)
{
    (void)state;
    const int64_t k = 512 + 256; /* multiple of both 32 and 256, not of 512 */
    float *x = malloc(k * sizeof *x);
    uint8_t *want = malloc(k * 4 + 64), *got = malloc(k * 4 + 64);
    for (size_t pi = 0; pi < 3; pi++) {
        const char *path = pi == 0 ? "scalar" : simd_paths[pi - 1];
        if (!kern_force_isa(path)) continue;
        assert_string_equal(kern_isa_name(), path);
        for (int ai = 0; ai < TEST_N_ACT_TYPES; ai++) {
            const struct quant_traits *at = quant_traits_get(test_act_types[ai]);
            const size_t bytes = quant_row_bytes(test_act_types[ai], k);
            for (int variant = 0; variant < 4; variant++) {
                for (int rep = 0; rep < 4; rep++) {
                    fill_activation(x, k, variant);
                    memset(got, 0xAB, bytes + 64);
                    at->from_float(x, want, k);
                    kern_quantize_act(test_act_types[ai], x, got, k);
                    if (memcmp(want, got, bytes) != 0)
                        fail_msg("path %s: kern_quantize_act(%s) differs from from_float "
                                 "(variant %d)", path, at->name, variant);
                    assert_int_equal(got[bytes], 0xAB); /* nothing written past the row */
                }
            }
        }
    }
    assert_true(kern_force_isa("scalar"));
    free(x);
    free(want);
    free(got);
}

static void test_dispatch(void **state)
{
    (void)state;
    kern_init();
    kern_init(); /* idempotent */
    const char *name = kern_isa_name();
    assert_true(strcmp(name, "scalar") == 0 || strcmp(name, "avx2") == 0 ||
                strcmp(name, "avx512") == 0 || strcmp(name, "neon") == 0);
    assert_false(kern_force_isa("neon9"));
    assert_false(kern_force_isa(NULL));
    assert_string_equal(kern_isa_name(), name); /* a refused force changes nothing */
    assert_true(kern_force_isa("scalar"));
    assert_string_equal(kern_isa_name(), "scalar");
    print_message("detected path: %s\n", name);
}

/* The guard the problems' buffers carry (test_guarded_alloc) faults on the first byte past the
 * end, so an overrun of a SIMD kernel, which the sanitized build leaves uninstrumented, fails this
 * suite instead of passing unseen. */
static void test_guard_faults(void **state)
{
    (void)state;
    const size_t n = 1000;
    volatile unsigned char *p = test_guarded_alloc(n, 8);
    p[0] = 1;
    p[n - 1] = 2; /* the last byte: n is a multiple of the alignment, so the guard is right after */
    fflush(NULL);
    const pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        signal(SIGSEGV, SIG_DFL); /* not cmocka's handler, which would go on with the suite here */
        (void)p[n];               /* past the end: faults */
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
    test_guarded_free((void *)p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guard_faults),
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_scalar_matmul),
        cmocka_unit_test(test_quantize_act),
        cmocka_unit_test(test_simd_matmul),
        cmocka_unit_test(test_blocked_prefill),
        cmocka_unit_test(test_avx2_panels),
        cmocka_unit_test(test_packed_vs_scalar),
        cmocka_unit_test(test_float_odd_k),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}

/* test_kernels_neon.c — the AArch64 NEON path against the scalar reference, built and run by
 * scripts/test-neon.sh (cross-compiled, run under qemu-aarch64). Self-contained on purpose:
 * the cross toolchain has none of libtern's other dependencies (cmocka, cJSON, ...), so this
 * links only src/quant, src/kernels (matmul, attention, vexp) and src/util/error.c, and reports in
 * plain text: one line per check, then exactly "N passed, N failed"; exit status 1 on any
 * failure.
 *
 * What is checked (same bounds as tests/test_kernels.c and tests/test_attn.c):
 *  - dispatch: "neon" is chosen and can be forced, x86 paths are refused, the dot-product
 *    detection matches what the emulated CPU has (--expect-dotprod=yes|no);
 *  - matmul, every weight format, both integer variants (dotprod when the CPU has it, and the
 *    ARMv8.0 fallback) and the dispatched kern_matmul: odd row ranges, n_tok in
 *    {1,2,3,7,16,33}, strided rows, nothing written outside [r0, r1);
 *    |neon - scalar| <= 1e-5 * sum|w_i*a_i| + 1e-6 (only the float summation order differs);
 *  - activation quantizers: byte-identical to the scalar from_float, including ties, zero
 *    blocks, outliers, F16 overflow and subnormals, exact F16/BF16 conversion ties; nothing
 *    written past the row;
 *  - attention loops: scores and weighted sums for head sizes 8..128 and 1..78 keys; the block
 *    kernels bit-identical per query to the per-query NEON kernels (GQA groups 1, 4, 7, 8,
 *    ragged key counts), the NEON softmax bit-identical to the scalar one. */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kern_neon.h"
#include "kernels/kernels.h"
#include "kernels/attn.h"
#include "kernels/attn_neon.h"
#include "quant/quant.h"
#include "test_rng.h"
#include "util/fp16.h"

static int n_passed, n_failed;

static bool check(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool check(bool ok, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("%s ", ok ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (ok) n_passed++;
    else n_failed++;
    return ok;
}

/* ------------------------------------------------------------------ random data */
static uint64_t rng_state = 0x243F6A8885A308D3ull; /* each test file draws its own sequence */
#define rnd_uniform() test_rand_uniform(&rng_state)
#define rnd_normal() test_rand_normal(&rng_state)

static bool is_int_type(int t)
{
    return t == TERN_TYPE_Q8_0 || t == TERN_TYPE_Q4_0 || t == TERN_TYPE_Q5_0 || t == TERN_TYPE_Q5_1 ||
           t == TERN_TYPE_Q4_K ||
           t == TERN_TYPE_Q5_K || t == TERN_TYPE_Q6_K;
}

/* W (rows x k) in wtype with padding between rows, A (n_tok x k) in its activation type, and
 * mag[t*rows + r] = sum_i |w_ri * a_ti| of the dequantized values (the tolerance scale). */
struct problem {
    int wtype, n_tok;
    int64_t rows, k;
    size_t w_stride, a_stride;
    uint8_t *W, *A;
    double *mag;
};

static void problem_make(struct problem *p, int wtype, int64_t rows, int64_t k, int n_tok)
{
    const struct quant_traits *tr = quant_traits_get(wtype);
    const struct quant_traits *at = quant_traits_get(tr->vec_dot_type);
    p->wtype = wtype;
    p->rows = rows;
    p->k = k;
    p->n_tok = n_tok;
    p->w_stride = quant_row_bytes(wtype, k) + 64;
    p->a_stride = quant_row_bytes(tr->vec_dot_type, k) + 32;
    p->W = calloc((size_t)rows, p->w_stride);
    p->A = calloc((size_t)n_tok, p->a_stride);
    p->mag = calloc((size_t)(rows * n_tok), sizeof *p->mag);
    float *x = malloc((size_t)k * sizeof *x);
    float *Wf = malloc((size_t)(rows * k) * sizeof *Wf), *Af = malloc((size_t)(n_tok * k) * sizeof *Af);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t i = 0; i < k; i++) x[i] = rnd_normal() * 0.05f;
        tr->from_float_ref(x, p->W + r * p->w_stride, k);
        tr->to_float(p->W + r * p->w_stride, Wf + r * k, k);
    }
    for (int t = 0; t < n_tok; t++) {
        for (int64_t i = 0; i < k; i++) x[i] = rnd_normal() * (1 + t % 3);
        at->from_float(x, p->A + t * p->a_stride, k);
        at->to_float(p->A + t * p->a_stride, Af + t * k, k);
    }
    for (int t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < rows; r++) {
            double m = 0;
            for (int64_t i = 0; i < k; i++) m += fabs((double)Wf[r * k + i] * Af[t * k + i]);
            p->mag[t * rows + r] = m;
        }
    free(x);
    free(Wf);
    free(Af);
}

static void problem_free(struct problem *p)
{
    free(p->W);
    free(p->A);
    free(p->mag);
}

/* ------------------------------------------------------------------ dispatch */
static void test_dispatch(const char *expect_dotprod)
{
    kern_init();
    check(strcmp(kern_isa_name(), "neon") == 0, "dispatch: detected path is \"%s\" (want neon)",
          kern_isa_name());
    const bool dp = kern_neon_has_dotprod();
    if (!strcmp(expect_dotprod, "yes") || !strcmp(expect_dotprod, "no"))
        check(dp == !strcmp(expect_dotprod, "yes"),
              "dispatch: dot-product detection says %s (emulated CPU: %s)", dp ? "yes" : "no",
              expect_dotprod);
    else
        printf("info dot-product instruction: %s\n", dp ? "present" : "absent");
    check(!kern_force_isa("avx2") && !kern_force_isa("avx512") && !kern_force_isa("neon9"),
          "dispatch: x86 paths and unknown names are refused");
    check(kern_force_isa("scalar") && !strcmp(kern_isa_name(), "scalar"), "dispatch: scalar can be forced");
    check(kern_force_isa("neon") && !strcmp(kern_isa_name(), "neon"), "dispatch: neon can be forced");
    for (int ti = 0; ti < TEST_N_WEIGHT_TYPES; ti++) {
        const int t = test_weight_types[ti];
        const bool own = kern_neon_base_matmul(t) != NULL && kern_neon_matmul(t) != NULL &&
                         (!is_int_type(t) || kern_neon_dot_matmul(t) != NULL);
        check(own, "dispatch: %s has NEON kernels of its own (no silent scalar fallback)",
              tern_type_name(t));
    }
    check(kern_neon_matmul(TERN_TYPE_Q4_K) ==
              (dp ? kern_neon_dot_matmul(TERN_TYPE_Q4_K) : kern_neon_base_matmul(TERN_TYPE_Q4_K)),
          "dispatch: integer kernels follow the dot-product detection");
    const char *qname = kern_neon_matmul_name(TERN_TYPE_Q4_0), *fname = kern_neon_matmul_name(TERN_TYPE_F16);
    check(qname && fname && !strcmp(qname, dp ? "neon-dotprod" : "neon") && !strcmp(fname, "neon") &&
              kern_neon_matmul_name(TERN_TYPE_Q8_K) == NULL,
          "dispatch: kernel names for reports: Q4_0 \"%s\", F16 \"%s\"", qname ? qname : "(null)",
          fname ? fname : "(null)");
}

/* ------------------------------------------------------------------ matmul */
enum variant { V_DISPATCH, V_BASE, V_DOT };
static const char *const variant_names[] = {"kern_matmul(neon)", "armv8.0", "dotprod"};

static void run_variant(enum variant v, int wtype, const struct problem *p, int64_t r0, int64_t r1,
                        float *Y, int64_t ldy)
{
    if (v == V_DISPATCH) {
        kern_matmul(wtype, p->W, p->w_stride, p->A, p->a_stride, p->n_tok, p->k, r0, r1, Y, ldy);
        return;
    }
    kern_matmul_fn fn = v == V_BASE ? kern_neon_base_matmul(wtype) : kern_neon_dot_matmul(wtype);
    fn(p->W, p->w_stride, p->A, p->a_stride, p->n_tok, p->k, r0, r1, Y, ldy);
}

static void test_matmul(void)
{
    static const int n_toks[] = {1, 2, 3, 7, 16, 33};
    static const int64_t ranges[][2] = {{0, 37}, {3, 30}, {5, 6}, {1, 36}};
    kern_force_isa("neon");
    for (int vi = V_DISPATCH; vi <= V_DOT; vi++) {
        if (vi == V_DOT && !kern_neon_has_dotprod()) {
            printf("skip matmul %s: this CPU has no dot-product instruction\n", variant_names[vi]);
            continue;
        }
        for (int ti = 0; ti < TEST_N_WEIGHT_TYPES; ti++) {
            const int wtype = test_weight_types[ti];
            if (vi == V_DOT && !is_int_type(wtype)) continue;
            const bool kq = tern_type_block_size(wtype) == 256;
            const bool fl = !is_int_type(wtype);
            double max_diff = 0, max_rel = 0;
            int bad = 0, outside = 0, cases = 0;
            char first_bad[200] = "";
            for (size_t ni = 0; ni < sizeof n_toks / sizeof n_toks[0]; ni++) {
                /* float formats also get a k that is not a multiple of 4 (the scalar tail) */
                const int64_t k = kq ? 256 * (1 + (int64_t)ni % 3)
                                : fl && ni % 2 ? 37 + 64 * (int64_t)ni
                                               : 32 * (1 + (int64_t)ni * 5);
                struct problem p;
                problem_make(&p, wtype, 37, k, n_toks[ni]);
                const int64_t ldy = p.rows + 1;
                const size_t ny = (size_t)(ldy * p.n_tok);
                float *Y = malloc(ny * sizeof *Y), *R = malloc(ny * sizeof *R);
                for (int ri = 0; ri < 4; ri++) {
                    const int64_t r0 = ranges[ri][0], r1 = ranges[ri][1];
                    for (size_t i = 0; i < ny; i++) Y[i] = R[i] = -7.0f;
                    run_variant((enum variant)vi, wtype, &p, r0, r1, Y, ldy);
                    kern_matmul_scalar(wtype, p.W, p.w_stride, p.A, p.a_stride, p.n_tok, p.k, r0,
                                       r1, R, ldy);
                    cases++;
                    for (int t = 0; t < p.n_tok; t++)
                        for (int64_t r = 0; r < ldy; r++) {
                            const float got = Y[t * ldy + r], want = R[t * ldy + r];
                            if (r < r0 || r >= r1) {
                                outside += got != -7.0f;
                                continue;
                            }
                            const double d = fabs((double)got - want);
                            const double mag = p.mag[t * p.rows + r];
                            if (d > max_diff) max_diff = d;
                            if (d / (mag + 1e-30) > max_rel) max_rel = d / (mag + 1e-30);
                            if (d > 1e-5 * mag + 1e-6 && bad++ == 0)
                                snprintf(first_bad, sizeof first_bad,
                                         " (first: k=%lld n_tok=%d row %lld tok %d got %.9g want %.9g)",
                                         (long long)k, p.n_tok, (long long)r, t, got, want);
                        }
                }
                free(Y);
                free(R);
                problem_free(&p);
            }
            check(bad == 0 && outside == 0,
                  "matmul %-17s %-5s: %d cases, max |neon - scalar| %.3g (%.2g of sum|w*a|), "
                  "%d out of bound, %d writes outside [r0,r1)%s",
                  variant_names[vi], tern_type_name(wtype), cases, max_diff, max_rel, bad,
                  outside, first_bad);
        }
    }
}

/* ------------------------------------------------------------------ activation quantizers */
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
    if (variant == 4) /* the largest magnitude twice, with both signs (Q8_K takes the first) */
        for (int64_t b = 0; b + 255 < k; b += 256) {
            x[b + 3] = -50.f;
            x[b + 200] = 50.f;
        }
    if (variant == 5) /* exact rounding ties of the F16 and BF16 conversions */
        for (int64_t i = 0; i < k; i++) {
            const uint32_t r = (uint32_t)(rnd_uniform() * 65536);
            x[i] = i % 2 ? fp_bits_f32(((0x3c00u + (r & 0x3ffu)) << 16) | 0x8000u) /* bf16 */
                         : ldexpf(1.0f + (float)(2 * (r & 0x3ff) + 1) / 2048.0f, (int)(r >> 12) % 8 - 4);
        }
}

static void test_quantize_act(void)
{
    const int64_t k = 512 + 256; /* multiple of both 32 and 256, not of 512 */
    float *x = malloc(k * sizeof *x);
    uint8_t *want = malloc(k * 4 + 64), *got = malloc(k * 4 + 64);
    kern_force_isa("neon");
    for (int ai = 0; ai < TEST_N_ACT_TYPES; ai++) {
        const struct quant_traits *at = quant_traits_get(test_act_types[ai]);
        const size_t bytes = quant_row_bytes(test_act_types[ai], k);
        int diff = 0, overrun = 0, runs = 0;
        for (int variant = 0; variant < 6; variant++)
            for (int rep = 0; rep < 4; rep++) {
                fill_activation(x, k, variant);
                at->from_float(x, want, k);
                for (int direct = 0; direct < 2; direct++) {
                    kern_quant_fn fn = kern_neon_quant(test_act_types[ai]);
                    if (direct && !fn) continue;
                    memset(got, 0xAB, bytes + 64);
                    if (direct) fn(x, got, k);
                    else kern_quantize_act(test_act_types[ai], x, got, k);
                    runs++;
                    diff += memcmp(want, got, bytes) != 0;
                    overrun += got[bytes] != 0xAB;
                }
            }
        check(diff == 0 && overrun == 0,
              "quantize_act %-4s: %d runs byte-identical to scalar from_float (%d differ, %d "
              "overrun)%s",
              at->name, runs, diff, overrun,
              kern_neon_quant(test_act_types[ai]) ? "" : " [neon has no own quantizer: copy]");
    }
    free(x);
    free(want);
    free(got);
}

/* ------------------------------------------------------------------ attention */
static void test_attention(void)
{
    static const int sizes[] = {8, 16, 32, 64, 128};
    const int max_keys = 78;
    for (int si = 0; si < 5; si++) {
        const int hd = sizes[si];
        float *q = malloc(sizeof(float) * hd), *w = malloc(sizeof(float) * max_keys);
        uint16_t *kc = malloc(sizeof(uint16_t) * hd * max_keys);
        uint16_t *vc = malloc(sizeof(uint16_t) * hd * max_keys);
        float *s_ref = malloc(sizeof(float) * max_keys), *s = malloc(sizeof(float) * max_keys);
        float *o_ref = malloc(sizeof(float) * hd), *o = malloc(sizeof(float) * hd);
        for (int j = 0; j < hd; j++) q[j] = fp16_to_f32(fp16_from_f32(rnd_normal()));
        for (int i = 0; i < hd * max_keys; i++) {
            kc[i] = fp16_from_f32(rnd_normal());
            vc[i] = fp16_from_f32(rnd_normal() * 0.5f);
        }
        for (int p = 0; p < max_keys; p++)
            w[p] = fp16_to_f32(fp16_from_f32((float)rnd_uniform() * 2 / max_keys));
        double dmax_s = 0, dmax_o = 0;
        int bad = 0;
        for (int n_keys = 1; n_keys <= max_keys; n_keys += 7) {
            attn_scores_scalar(q, kc, n_keys, hd, 0.125f, s_ref);
            attn_scores_neon(q, kc, n_keys, hd, 0.125f, s);
            for (int p = 0; p < n_keys; p++) {
                const double d = fabs((double)s[p] - s_ref[p]);
                if (d > dmax_s) dmax_s = d;
                bad += d > 1e-5 * hd;
            }
            attn_wsum_scalar(w, vc, n_keys, hd, o_ref);
            attn_wsum_neon(w, vc, n_keys, hd, o);
            for (int j = 0; j < hd; j++) {
                const double d = fabs((double)o[j] - o_ref[j]);
                if (d > dmax_o) dmax_o = d;
                bad += d > 1e-6 * n_keys;
            }
        }
        check(bad == 0, "attention hd=%-3d: max |neon - scalar| scores %.3g, weighted sum %.3g",
              hd, dmax_s, dmax_o);
        free(q); free(w); free(kc); free(vc); free(s_ref); free(s); free(o_ref); free(o);
    }
    /* block kernels: same bits per query as the per-query kernels; softmax as the scalar one */
    static const int shapes[][2] = {{1, 1}, {16, 1}, {16, 4}, {14, 7}, {16, 8}, {13, 4}};
    static const int keys[] = {1, 3, 4, 5, 17, 78};
    for (int si = 0; si < 5; si++) {
        const int hd = sizes[si], max_keys = 78 + 15;
        const size_t ss = 96;
        float *q = malloc(sizeof(float) * hd * 16), *tile = malloc(sizeof(float) * 16 * hd);
        uint16_t *kc = malloc(sizeof(uint16_t) * hd * max_keys);
        uint16_t *vc = malloc(sizeof(uint16_t) * hd * max_keys);
        float *sb = malloc(sizeof(float) * ss * 16), *s1 = malloc(sizeof(float) * ss);
        float *ob = malloc(sizeof(float) * hd * 16), *o1 = malloc(sizeof(float) * hd);
        for (int i = 0; i < hd * 16; i++) q[i] = fp16_to_f32(fp16_from_f32(rnd_normal()));
        for (int i = 0; i < hd * max_keys; i++) {
            kc[i] = fp16_from_f32(rnd_normal());
            vc[i] = fp16_from_f32(rnd_normal() * 0.5f);
        }
        int bad = 0, cases = 0;
        for (int sh = 0; sh < 6; sh++)
            for (int ki = 0; ki < 6; ki++) {
                const int nq = shapes[sh][0], g = shapes[sh][1];
                int nk[16];
                float *outp[16];
                for (int i = 0; i < nq; i++) {
                    nk[i] = keys[ki] + i / g;
                    outp[i] = ob + (size_t)i * hd;
                }
                attn_bscores_neon(q, nq, kc, nk[nq - 1], hd, 0.125f, sb, ss, tile);
                for (int i = 0; i < nq; i++) {
                    attn_scores_neon(q + (size_t)i * hd, kc, nk[i], hd, 0.125f, s1);
                    bad += memcmp(sb + i * ss, s1, sizeof(float) * nk[i]) != 0;
                    attn_softmax_neon(sb + i * ss, nk[i]);
                    attn_softmax_scalar(s1, nk[i]);
                    bad += memcmp(sb + i * ss, s1, sizeof(float) * nk[i]) != 0;
                }
                attn_bwsum_neon(sb, ss, nk, nq, vc, hd, outp);
                for (int i = 0; i < nq; i++) {
                    attn_wsum_neon(sb + i * ss, vc, nk[i], hd, o1);
                    bad += memcmp(ob + (size_t)i * hd, o1, sizeof(float) * hd) != 0;
                }
                cases++;
            }
        check(bad == 0, "attention hd=%-3d: block kernels and softmax bit-identical per query in "
              "%d blocks (%d mismatches)", hd, cases, bad);
        free(q); free(tile); free(kc); free(vc); free(sb); free(s1); free(ob); free(o1);
    }
    kern_force_isa("neon");
    check(!strcmp(attn_select(64).name, "neon") && attn_select(64).scores == attn_scores_neon &&
              !strcmp(attn_select(6).name, "scalar"),
          "attention: attn_select picks neon for hd %% 8 == 0, scalar otherwise");
    kern_force_isa("scalar");
    check(!strcmp(attn_select(64).name, "scalar"), "attention: forced scalar kernels -> scalar loops");
    kern_force_isa("neon");
}

int main(int argc, char **argv)
{
    const char *expect = "any";
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "--expect-dotprod=", 17)) expect = argv[i] + 17;
        else {
            fprintf(stderr, "usage: %s [--expect-dotprod=yes|no|any]\n", argv[0]);
            return 2;
        }
    }
    test_dispatch(expect);
    test_quantize_act();
    test_attention();
    test_matmul();
    printf("%d passed, %d failed\n", n_passed, n_failed);
    return n_failed ? 1 : 0;
}

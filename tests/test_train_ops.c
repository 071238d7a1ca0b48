/* test_train_ops.c — the trainer's numerics, op by op and whole-model:
 * - the F32 GEMM (every path this CPU runs, the three operand layouts of a linear layer, edges
 *   that are not multiples of the tiles, accumulate) against the double-precision triple loop,
 *   and the threaded call bit-identical to the single-threaded one;
 * - the backward of RMSNorm, RoPE (NORM and NEOX), SwiGLU, packed causal attention (two
 *   documents, more rows than one query block) and masked cross-entropy against central finite
 *   differences of a scalar loss sum(out * R);
 * - the whole model's gradient (llama and qwen2 shapes, tied and untied output, GQA, two packed
 *   documents, a loss mask) against finite differences of the loss, for entries of every tensor.
 * Tolerances are stated where used; each check prints the worst relative error it saw. */
#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/gemm_f32.h"
#include "train/train_internal.h"
#include "train/train_ops.h"

static uint64_t rng_state = 12345;
static float urand(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) / 16777216.0) * 2.0f - 1.0f;
}
static void fill(float *x, size_t n, float s)
{
    for (size_t i = 0; i < n; i++) x[i] = urand() * s;
}
static float *ws_alloc(size_t n)
{
    void *p = NULL;
    assert_int_equal(posix_memalign(&p, 64, n * sizeof(float)), 0);
    return p;
}

/* ---------------------------------------------------------------- GEMM */

static void check_gemm(enum kern_gemm_path path, int M, int N, int K, int layout, bool acc)
{
    /* layout 0: A (M,K) . B(N,K)^T ; 1: A (M,K) . B (K,N) ; 2: A stored (K,M) . B (K,N);
     * 3: A with no unit stride (every other column of (M, 2K)), which is packed */
    float *A = malloc((size_t)M * K * 2 * sizeof *A), *B = malloc((size_t)K * N * sizeof *B);
    float *C = malloc((size_t)M * N * sizeof *C), *R = malloc((size_t)M * N * sizeof *R);
    fill(A, (size_t)M * K * 2, 1.0f);
    fill(B, (size_t)K * N, 1.0f);
    fill(C, (size_t)M * N, 1.0f);
    memcpy(R, C, (size_t)M * N * sizeof *R);
    struct kern_gemm g = {M, N, K, A, K, 1, B, 1, K, C, N, acc};
    if (layout == 1) g.brs = N, g.bcs = 1;
    if (layout == 2) g.ars = 1, g.acs = M, g.brs = N, g.bcs = 1;
    if (layout == 3) g.ars = 2 * K, g.acs = 2;
    struct kern_gemm r = g;
    r.C = R;
    float *ws = ws_alloc(kern_gemm_ws_floats());
    kern_gemm_f32(&g, path, ws);
    kern_gemm_f32_ref(&r);
    double worst = 0.0;
    for (int i = 0; i < M * N; i++) {
        const double e = fabs((double)C[i] - R[i]) / (sqrt((double)K) * 1e-6 + 1e-6);
        if (e > worst) worst = e;
    }
    /* F32 sums of K products of magnitude <= 1: error well under sqrt(K) * 1e-6 * a few */
    if (worst > 8.0)
        fail_msg("gemm %s M%d N%d K%d layout %d: error %.2f x sqrt(K)*1e-6", kern_gemm_path_name(path),
                 M, N, K, layout, worst);
    free(A), free(B), free(C), free(R), free(ws);
}

static void test_gemm_paths(void **state)
{
    (void)state;
    const enum kern_gemm_path paths[] = {KERN_GEMM_SCALAR, KERN_GEMM_AVX2, KERN_GEMM_AVX512};
    const int shapes[][3] = {{1, 1, 1}, {12, 32, 7}, {13, 33, 300}, {100, 70, 257}, {5, 600, 64},
                             {200, 17, 513}, {97, 515, 40}};
    int ran = 0;
    for (int p = 0; p < 3; p++) {
        if (!kern_gemm_path_ok(paths[p])) continue;
        ran++;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int layout = 0; layout < 4; layout++)
                check_gemm(paths[p], shapes[s][0], shapes[s][1], shapes[s][2], layout, layout == 1);
    }
    print_message("gemm: %d paths checked; best here: %s\n", ran, kern_gemm_path_name(KERN_GEMM_AUTO));
}

/* A last (or only) panel of 16 columns, narrower than the AVX-512 path's 32: full-panel copies
 * must not take it for one (N = 48: 32 + 16; N = 16). Registered last, so its random draws do
 * not move the other tests' inputs. */
static void test_gemm_narrow_panels(void **state)
{
    (void)state;
    const enum kern_gemm_path paths[] = {KERN_GEMM_SCALAR, KERN_GEMM_AVX2, KERN_GEMM_AVX512};
    const int shapes[][3] = {{9, 48, 33}, {30, 16, 20}};
    for (int p = 0; p < 3; p++) {
        if (!kern_gemm_path_ok(paths[p])) continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int layout = 0; layout < 4; layout++)
                check_gemm(paths[p], shapes[s][0], shapes[s][1], shapes[s][2], layout, layout == 1);
    }
}

/* A row-major with rows 2 KiB (or a multiple) apart is packed by the AVX-512 path (gemm_f32.c:
 * those rows' lines share L1 sets); the packed panels must give exactly the sums of the same A
 * read in place, with rows 520 floats apart: edge panels (M not a multiple of 12), K not a
 * multiple of the transposes' 16, K cut into slices (K = 1000), and accumulating calls. Uses
 * its own generator state, so it does not move the other tests' inputs. */
static void test_gemm_aliasing_rows_packed(void **state)
{
    (void)state;
    const enum kern_gemm_path paths[] = {KERN_GEMM_SCALAR, KERN_GEMM_AVX2, KERN_GEMM_AVX512};
    const int shapes[][4] = {{13, 33, 40, 512}, {100, 70, 300, 512}, {97, 64, 512, 1024},
                             {30, 40, 1000, 1024}, {12, 32, 7, 2048}};
    const uint64_t saved = rng_state;
    rng_state = 4242;
    for (int p = 0; p < 3; p++) {
        if (!kern_gemm_path_ok(paths[p])) continue;
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], stride = shapes[s][3];
            const int other = K + 8 > 520 ? K + 8 : 520;
            float *A = malloc((size_t)M * stride * sizeof *A), *A2 = malloc((size_t)M * other * sizeof *A2);
            float *B = malloc((size_t)K * N * sizeof *B), *C = malloc((size_t)M * N * sizeof *C);
            float *C2 = malloc((size_t)M * N * sizeof *C2), *ws = ws_alloc(kern_gemm_ws_floats());
            fill(A, (size_t)M * stride, 1.0f);
            for (int i = 0; i < M; i++) memcpy(A2 + (size_t)i * other, A + (size_t)i * stride, (size_t)K * sizeof *A);
            fill(B, (size_t)K * N, 1.0f);
            for (int acc = 0; acc < 2; acc++) {
                fill(C, (size_t)M * N, 1.0f);
                memcpy(C2, C, (size_t)M * N * sizeof *C);
                struct kern_gemm g = {M, N, K, A, stride, 1, B, 1, K, C, N, acc};
                struct kern_gemm g2 = {M, N, K, A2, other, 1, B, 1, K, C2, N, acc};
                kern_gemm_f32(&g, paths[p], ws);
                kern_gemm_f32(&g2, paths[p], ws);
                if (memcmp(C, C2, (size_t)M * N * sizeof *C))
                    fail_msg("gemm %s M%d N%d K%d: rows %d floats apart differ from rows %d apart",
                             kern_gemm_path_name(paths[p]), M, N, K, stride, other);
            }
            free(A), free(A2), free(B), free(C), free(C2), free(ws);
        }
    }
    rng_state = saved;
}

static void test_gemm_threads_identical(void **state)
{
    (void)state;
    const int M = 300, N = 700, K = 333;
    float *A = malloc((size_t)M * K * sizeof *A), *B = malloc((size_t)K * N * sizeof *B);
    float *C1 = malloc((size_t)M * N * sizeof *C1), *C3 = malloc((size_t)M * N * sizeof *C3);
    fill(A, (size_t)M * K, 1.0f);
    fill(B, (size_t)K * N, 1.0f);
    struct tp *tp;
    assert_tern_ok(tp_create(3, &tp));
    float *ws = ws_alloc(kern_gemm_ws_floats() * 3);
    struct kern_gemm g = {M, N, K, A, K, 1, B, 1, K, C1, N, false};
    kern_gemm_f32(&g, KERN_GEMM_AUTO, ws);
    g.C = C3;
    kern_gemm_f32_mt(&g, KERN_GEMM_AUTO, ws, tp);
    assert_memory_equal(C1, C3, (size_t)M * N * sizeof *C1);
    tp_free(tp);
    free(A), free(B), free(C1), free(C3), free(ws);
}

/* ---------------------------------------------------------------- finite differences */

/* Compare an analytic gradient with central differences of loss() over entries of x. */
struct fd_check {
    const char *what;
    float *x;
    const float *grad;
    size_t n, stride;
    double (*loss)(void *ctx);
    void *ctx;
    float eps;
    double tol;   /* |num - ana| <= tol * (|num| + |ana|) + abs_tol */
    double abs_tol;
};

static void fd_run(const struct fd_check *c)
{
    double worst = 0.0;
    size_t worst_i = 0;
    for (size_t i = 0; i < c->n; i += c->stride) {
        const float x0 = c->x[i];
        c->x[i] = x0 + c->eps;
        const double lp = c->loss(c->ctx);
        c->x[i] = x0 - c->eps;
        const double lm = c->loss(c->ctx);
        c->x[i] = x0;
        const double num = (lp - lm) / (2.0 * c->eps), ana = c->grad[i];
        const double err = fabs(num - ana) - c->abs_tol;
        const double rel = err / (fabs(num) + fabs(ana) + 1e-30);
        if (err > 0 && rel > worst) {
            worst = rel;
            worst_i = i;
        }
        if (err > 0 && rel > c->tol)
            fail_msg("%s: entry %zu: analytic %.7g, finite differences %.7g", c->what, i, ana, num);
    }
    print_message("%-28s worst relative error %.2e (entry %zu)\n", c->what, worst, worst_i);
}

static double dot_d(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* --- RMSNorm --- */
struct norm_ctx {
    int n, d;
    float *x, *w, *y, *rstd, *R;
};
static double norm_loss(void *p)
{
    struct norm_ctx *c = p;
    train_rmsnorm_fwd(c->x, c->w, c->y, c->rstd, c->n, c->d, 1e-5f);
    return dot_d(c->y, c->R, (size_t)c->n * c->d);
}

static void test_rmsnorm_grad(void **state)
{
    (void)state;
    struct norm_ctx c = {5, 24, NULL, NULL, NULL, NULL, NULL};
    const size_t nd = (size_t)c.n * c.d;
    c.x = malloc(nd * 4), c.w = malloc(c.d * 4), c.y = malloc(nd * 4), c.rstd = malloc(c.n * 4);
    c.R = malloc(nd * 4);
    float *dx = calloc(nd, 4), *dw = calloc(c.d, 4);
    fill(c.x, nd, 2.0f), fill(c.w, c.d, 1.5f), fill(c.R, nd, 1.0f);
    norm_loss(&c);
    train_rmsnorm_bwd(c.x, c.w, c.rstd, c.R, dx, dw, c.n, c.d);
    fd_run(&(struct fd_check){"rmsnorm dx", c.x, dx, nd, 1, norm_loss, &c, 1e-2f, 5e-3, 2e-5});
    fd_run(&(struct fd_check){"rmsnorm dw", c.w, dw, c.d, 1, norm_loss, &c, 1e-2f, 5e-3, 2e-5});
    free(c.x), free(c.w), free(c.y), free(c.rstd), free(c.R), free(dx), free(dw);
}

/* --- RoPE --- */
struct rope_ctx {
    int n, heads, hd;
    bool neox;
    float *x, *y, *R, *cs;
    int32_t *pos;
};
static double rope_loss(void *p)
{
    struct rope_ctx *c = p;
    const size_t nn = (size_t)c->n * c->heads * c->hd;
    memcpy(c->y, c->x, nn * 4);
    train_rope(c->y, c->n, c->heads * c->hd, c->heads, c->hd, c->pos, c->cs, c->neox, false);
    return dot_d(c->y, c->R, nn);
}

static void test_rope_grad(void **state)
{
    (void)state;
    for (int neox = 0; neox < 2; neox++) {
        struct rope_ctx c = {6, 2, 8, neox, NULL, NULL, NULL, NULL, NULL};
        const size_t nn = (size_t)c.n * c.heads * c.hd;
        c.x = malloc(nn * 4), c.y = malloc(nn * 4), c.R = malloc(nn * 4);
        c.cs = train_rope_table(16, c.hd, 10000.0f);
        int32_t pos[6] = {0, 1, 2, 0, 5, 15};
        c.pos = pos;
        fill(c.x, nn, 1.0f), fill(c.R, nn, 1.0f);
        /* backward: rotate dy back */
        float *dx = malloc(nn * 4);
        memcpy(dx, c.R, nn * 4);
        train_rope(dx, c.n, c.heads * c.hd, c.heads, c.hd, pos, c.cs, c.neox, true);
        fd_run(&(struct fd_check){neox ? "rope NEOX dx" : "rope NORM dx", c.x, dx, nn, 1, rope_loss,
                                  &c, 1e-3f, 1e-3, 1e-5});
        /* the convention: NORM rotates (0,1) together, NEOX (0, hd/2) */
        float v[8] = {1, 0, 0, 0, 0, 0, 0, 0};
        int32_t p1 = 1;
        train_rope(v, 1, 8, 1, 8, &p1, c.cs, c.neox, false);
        assert_true(fabsf(v[0] - cosf(1.0f)) < 1e-6f);
        assert_true(fabsf(v[neox ? 4 : 1] - sinf(1.0f)) < 1e-6f);
        free(c.x), free(c.y), free(c.R), free(c.cs), free(dx);
    }
}

/* --- SwiGLU --- */
struct swiglu_ctx {
    size_t n;
    float *g, *u, *h, *R;
};
static double swiglu_loss(void *p)
{
    struct swiglu_ctx *c = p;
    train_swiglu_fwd(c->g, c->u, c->h, c->n);
    return dot_d(c->h, c->R, c->n);
}

static void test_swiglu_grad(void **state)
{
    (void)state;
    struct swiglu_ctx c = {64, NULL, NULL, NULL, NULL};
    c.g = malloc(256), c.u = malloc(256), c.h = malloc(256), c.R = malloc(256);
    fill(c.g, 64, 4.0f), fill(c.u, 64, 2.0f), fill(c.R, 64, 1.0f);
    float *dg = calloc(64, 4), *du = calloc(64, 4);
    train_swiglu_bwd(c.g, c.u, c.R, dg, du, 64);
    fd_run(&(struct fd_check){"swiglu dgate", c.g, dg, 64, 1, swiglu_loss, &c, 1e-3f, 1e-3, 1e-5});
    fd_run(&(struct fd_check){"swiglu dup", c.u, du, 64, 1, swiglu_loss, &c, 1e-3f, 1e-3, 1e-5});
    free(c.g), free(c.u), free(c.h), free(c.R), free(dg), free(du);
}

/* --- attention --- */
struct attn_ctx {
    struct train_attn a;
    float *q, *k, *v, *o, *lse, *R, *ws;
    size_t nq, nk;
};
static double attn_loss(void *p)
{
    struct attn_ctx *c = p;
    train_attn_fwd(&c->a, c->ws);
    return dot_d(c->o, c->R, c->nq);
}

static void attn_case(int T, int hd, int ldq_heads, int ldk_heads, int doc2, const char *name)
{
    struct attn_ctx c;
    memset(&c, 0, sizeof c);
    const int ldq = ldq_heads * hd, ldk = ldk_heads * hd;
    c.nq = (size_t)T * ldq, c.nk = (size_t)T * ldk;
    c.q = malloc(c.nq * 4), c.o = calloc(c.nq, 4), c.R = calloc(c.nq, 4);
    c.k = malloc(c.nk * 4), c.v = malloc(c.nk * 4), c.lse = malloc((size_t)T * 4);
    int32_t *start = malloc((size_t)T * 4);
    for (int i = 0; i < T; i++) start[i] = i < doc2 ? 0 : doc2;
    fill(c.q, c.nq, 1.0f), fill(c.k, c.nk, 1.0f), fill(c.v, c.nk, 1.0f);
    /* only this head's columns of o carry loss */
    for (int i = 0; i < T; i++)
        for (int j = 0; j < hd; j++) c.R[(size_t)i * ldq + j] = urand();
    c.ws = ws_alloc(train_attn_ws_floats(T) + kern_gemm_ws_floats());
    c.a = (struct train_attn){.T = T, .hd = hd, .start = start, .scale = 1.0f / sqrtf((float)hd),
                              .q = c.q, .k = c.k, .v = c.v, .ldq = ldq, .ldk = ldk, .o = c.o,
                              .lse = c.lse, .ldl = 1, .path = KERN_GEMM_AUTO};
    float *dq = calloc(c.nq, 4), *dk = calloc(c.nq, 4), *dv = calloc(c.nq, 4);
    attn_loss(&c);
    train_attn_bwd(&c.a, c.R, dq, dk, dv, c.ws);
    /* dk, dv come per query head with the query's row stride: map to k's layout */
    float *dk2 = calloc(c.nk, 4), *dv2 = calloc(c.nk, 4);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < hd; j++) {
            dk2[(size_t)i * ldk + j] = dk[(size_t)i * ldq + j];
            dv2[(size_t)i * ldk + j] = dv[(size_t)i * ldq + j];
        }
    char what[64];
    const size_t stride = T > 64 ? 7 : 1;
    snprintf(what, sizeof what, "attn %s dq", name);
    /* only column block 0 of each row is this head's: others have zero gradient both ways */
    fd_run(&(struct fd_check){what, c.q, dq, c.nq, stride, attn_loss, &c, 2e-3f, 5e-3, 2e-4});
    snprintf(what, sizeof what, "attn %s dk", name);
    fd_run(&(struct fd_check){what, c.k, dk2, c.nk, stride, attn_loss, &c, 2e-3f, 5e-3, 2e-4});
    snprintf(what, sizeof what, "attn %s dv", name);
    fd_run(&(struct fd_check){what, c.v, dv2, c.nk, stride, attn_loss, &c, 2e-3f, 5e-3, 2e-4});
    /* document 2's first query sees only itself: its output is its own v row */
    if (doc2 > 0 && doc2 < T)
        for (int j = 0; j < hd; j++)
            assert_true(fabsf(c.o[(size_t)doc2 * ldq + j] - c.v[(size_t)doc2 * ldk + j]) < 1e-6f);
    free(c.q), free(c.o), free(c.R), free(c.k), free(c.v), free(c.lse), free(start), free(c.ws);
    free(dq), free(dk), free(dv), free(dk2), free(dv2);
}

static void test_attention_grad(void **state)
{
    (void)state;
    attn_case(9, 8, 1, 1, 5, "T9 2 docs");
    attn_case(12, 4, 3, 2, 0, "T12 strided");
    attn_case(150, 8, 1, 1, 70, "T150 3 blocks");
}

/* --- cross-entropy --- */
struct xent_ctx {
    int n, V;
    float *logits, *work, *weight;
    int32_t *target;
};
static double xent_loss(void *p)
{
    struct xent_ctx *c = p;
    memcpy(c->work, c->logits, (size_t)c->n * c->V * 4);
    return train_xent(c->work, c->target, c->weight, c->n, c->V, 1.0);
}

static void test_xent_grad(void **state)
{
    (void)state;
    struct xent_ctx c = {4, 11, NULL, NULL, NULL, NULL};
    c.logits = malloc(44 * 4), c.work = malloc(44 * 4);
    float weight[4] = {1, 0, 1, 0.5f};
    int32_t target[4] = {3, 2, 10, 0};
    c.weight = weight, c.target = target;
    fill(c.logits, 44, 3.0f);
    float *grad = malloc(44 * 4);
    memcpy(grad, c.logits, 44 * 4);
    train_xent(grad, target, weight, 4, 11, 1.0);
    fd_run(&(struct fd_check){"xent dlogits", c.logits, grad, 44, 1, xent_loss, &c, 1e-3f, 1e-3, 1e-5});
    for (int j = 0; j < 11; j++) assert_true(grad[11 + j] == 0.0f); /* masked row */
    free(c.logits), free(c.work), free(grad);
}

/* ---------------------------------------------------------------- whole model */

struct model_ctx {
    struct tern_trainer *t;
    double scale;
};
static double model_loss(void *p)
{
    struct model_ctx *c = p;
    return train_forward_backward(c->t, &c->t->batch[0], c->scale) * c->scale;
}

static void model_case(enum tern_arch arch, bool tied, int n_head_kv)
{
    struct tern_train_config cfg = tern_train_config_default();
    cfg.arch = arch;
    cfg.n_embd = 16, cfg.n_layer = 2, cfg.n_head = 4, cfg.n_head_kv = n_head_kv, cfg.n_ff = 24;
    cfg.n_ctx = 12, cfg.n_vocab = 19, cfg.tied_output = tied, cfg.threads = 2;
    cfg.init_std = 0.3f;
    /* the weights eps and the tolerance below were chosen on (GPT-2's projection scaling):
     * twice larger projections make the curvature term of the differences exceed 2 % */
    cfg.init_std_proj = 0.3f / sqrtf(2.0f * (float)cfg.n_layer);
    struct tern_trainer *t;
    assert_tern_ok(tern_trainer_create(&cfg, &t));
    assert_tern_ok(tern_trainer_init(t));
    /* biases and norm weights away from their init so their gradients are generic */
    for (int i = 0; i < t->n_tensors; i++)
        if (t->tensors[i].n_dims == 1)
            for (int64_t j = 0; j < t->tensors[i].ne[0]; j++) t->w[t->tensors[i].off + j] += 0.3f * urand();
    int32_t d1[7] = {1, 5, 7, 2, 9, 18, 3}, d2[4] = {4, 4, 11, 0};
    uint8_t m1[7] = {0, 0, 1, 1, 1, 0, 1}, m2[4] = {0, 1, 1, 1};
    const int32_t *toks[2] = {d1, d2};
    const uint8_t *masks[2] = {m1, m2};
    int lens[2] = {7, 4};
    train_batch_from_docs(&t->batch[0], t->T, toks, masks, lens, 2);
    struct model_ctx c = {t, 1.0 / (double)t->batch[0].n_loss};
    memset(t->g, 0, t->n_params * 4);
    model_loss(&c);
    float *grad = malloc(t->n_params * 4);
    memcpy(grad, t->g, t->n_params * 4);
    for (int i = 0; i < t->n_tensors; i++) {
        const struct train_tensor *x = &t->tensors[i];
        const size_t n = (size_t)(x->ne[0] * x->ne[1]);
        char what[96];
        snprintf(what, sizeof what, "%s %s%s: %s", arch == TERN_ARCH_QWEN2 ? "qwen2" : "llama",
                 tied ? "tied" : "untied", n_head_kv < 4 ? " gqa" : "", x->name);
        /* float forward: eps 1e-2 keeps rounding noise (~1e-7 / eps) below the curvature term */
        fd_run(&(struct fd_check){what, t->w + x->off, grad + x->off, n, n > 64 ? 13 : 1, model_loss,
                                  &c, 1e-2f, 2e-2, 2e-5});
    }
    free(grad);
    tern_trainer_free(t);
}

static void test_model_grad(void **state)
{
    (void)state;
    model_case(TERN_ARCH_LLAMA, true, 4);
    model_case(TERN_ARCH_LLAMA, false, 2);
    model_case(TERN_ARCH_QWEN2, false, 2);
    model_case(TERN_ARCH_QWEN2, true, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_paths),       cmocka_unit_test(test_gemm_threads_identical),
        cmocka_unit_test(test_rmsnorm_grad),     cmocka_unit_test(test_rope_grad),
        cmocka_unit_test(test_swiglu_grad),      cmocka_unit_test(test_attention_grad),
        cmocka_unit_test(test_xent_grad),        cmocka_unit_test(test_model_grad),
        cmocka_unit_test(test_gemm_narrow_panels), cmocka_unit_test(test_gemm_aliasing_rows_packed),
    };
    return test_exit_status(cmocka_run_group_tests(tests, NULL, NULL));
}

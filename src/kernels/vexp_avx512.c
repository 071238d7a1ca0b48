/* vexp_avx512.c — vexp_f32 (vexp.h) 16 lanes at a time: two halves of 8 doubles, the 32-entry
 * table read with two two-source permutes. Lanes with |x| >= 88 (rare: overflow, underflow,
 * inf, NaN) are redone by the scalar function, so every lane has its bits. */
#include <immintrin.h>

#include "kernels/vexp.h"

static inline __m512d exp8(__m512d xd, const __m512i *tab)
{
    const __m512d z = _mm512_fmadd_pd(_mm512_set1_pd(VEXP_INVLN2N), xd, _mm512_set1_pd(VEXP_SHIFT));
    const __m512i ki = _mm512_castpd_si512(z);
    const __m512d kd = _mm512_sub_pd(z, _mm512_set1_pd(VEXP_SHIFT));
    const __m512d r = _mm512_fmsub_pd(_mm512_set1_pd(VEXP_INVLN2N), xd, kd);
    /* table entry ki & 31: bit 4 picks the half, permutex2var reads bits 0..3 */
    const __m512i lo = _mm512_permutex2var_epi64(tab[0], ki, tab[1]);
    const __m512i hi = _mm512_permutex2var_epi64(tab[2], ki, tab[3]);
    const __mmask8 up = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
    const __m512i t = _mm512_add_epi64(_mm512_mask_blend_epi64(up, lo, hi), _mm512_slli_epi64(ki, 47));
    const __m512d p = _mm512_fmadd_pd(_mm512_set1_pd(VEXP_C0), r, _mm512_set1_pd(VEXP_C1));
    const __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(_mm512_set1_pd(VEXP_C2), r, _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(p, r2, y);
    return _mm512_mul_pd(y, _mm512_castsi512_pd(t));
}

static inline __m512 exp16(__m512 x, const __m512i *tab)
{
    const __m256 lo = _mm512_cvtpd_ps(exp8(_mm512_cvtps_pd(_mm512_castps512_ps256(x)), tab));
    const __m256 hi = _mm512_cvtpd_ps(exp8(_mm512_cvtps_pd(_mm512_extractf32x8_ps(x, 1)), tab));
    return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

static inline __mmask16 special16(__m512 x)
{
    const __m512i top = _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(x), 20),
                                         _mm512_set1_epi32(0x7ff));
    return _mm512_cmpge_epu32_mask(top, _mm512_set1_epi32(VEXP_TOP_SPECIAL));
}

static inline void load_tab(__m512i *tab)
{
    for (int i = 0; i < 4; i++) tab[i] = _mm512_loadu_si512(vexp_tab + 8 * i);
}

/* s[0..nl) = exp(s - mx) for one block of up to 16 lanes (vm = mx in every lane); lanes
 * outside the fast path's range are redone by the scalar vexp_f32. */
static inline void exp_sub16(float *s, int nl, __m512 vm, const __m512i *tab)
{
    const __mmask16 m = nl == 16 ? 0xffff : (__mmask16)((1u << nl) - 1);
    const __m512 v = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, s), vm);
    __mmask16 sp = special16(v) & m;
    _mm512_mask_storeu_ps(s, m, exp16(v, tab));
    if (sp) {
        float x[16];
        _mm512_storeu_ps(x, v);
        for (int l = 0; sp; l++, sp >>= 1)
            if (sp & 1) s[l] = vexp_f32(x[l]);
    }
}

double vexp_sum_avx512(float *s, int n, float mx)
{
    __m512i tab[4];
    load_tab(tab);
    const __m512 vm = _mm512_set1_ps(mx);
    double sum = 0.0;
    for (int i = 0; i < n; i += 16) {
        const int nl = n - i < 16 ? n - i : 16;
        exp_sub16(s + i, nl, vm, tab);
        for (int l = 0; l < nl; l++) sum += (double)s[i + l];
    }
    return sum;
}

void vexp_sub_avx512(float *s, int n, float mx)
{
    __m512i tab[4];
    load_tab(tab);
    const __m512 vm = _mm512_set1_ps(mx);
    for (int i = 0; i < n; i += 16) exp_sub16(s + i, n - i < 16 ? n - i : 16, vm, tab);
}

void vexp_silu_mul_avx512(float *g, const float *u, int n)
{
    __m512i tab[4];
    load_tab(tab);
    const __m512 one = _mm512_set1_ps(1.0f), sign = _mm512_set1_ps(-0.0f);
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        const __m512 nx = _mm512_xor_ps(x, sign);
        __m512 e = exp16(nx, tab);
        __mmask16 sp = special16(nx) & m;
        if (sp) {
            float tmp[16];
            _mm512_storeu_ps(tmp, e);
            for (int l = 0; l < 16; l++)
                if (sp >> l & 1) tmp[l] = vexp_f32(-g[i + l]);
            e = _mm512_loadu_ps(tmp);
        }
        const __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, e));
        _mm512_mask_storeu_ps(g + i, m, u ? _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)) : s);
    }
}

void vexp_gelu_mul_avx512(float *g, const float *u, int n)
{
    __m512i tab[4];
    load_tab(tab);
    const __m512 one = _mm512_set1_ps(1.0f), c1 = _mm512_set1_ps(VEXP_GELU_C1);
    const __m512 c2 = _mm512_set1_ps(VEXP_GELU_C2), cap = _mm512_set1_ps(30.0f);
    for (int i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
        const __m512 arg = _mm512_mul_ps(_mm512_fmadd_ps(x, _mm512_mul_ps(c1, x), one),
                                         _mm512_mul_ps(c2, x));
        __m512 e = exp16(arg, tab);
        __mmask16 sp = special16(arg) & m;
        if (sp) {
            float tmp[16], a[16];
            _mm512_storeu_ps(tmp, e);
            _mm512_storeu_ps(a, arg);
            for (int l = 0; l < 16; l++)
                if (sp >> l & 1) tmp[l] = vexp_f32(a[l]);
            e = _mm512_loadu_ps(tmp);
        }
        __m512 y = _mm512_mul_ps(x, _mm512_div_ps(e, _mm512_add_ps(e, one)));
        y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(arg, cap, _CMP_GT_OQ), y, x);
        _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(y, _mm512_maskz_loadu_ps(m, u + i)));
    }
}

/* vexp_avx2.c — vexp_f32 (vexp.h) 8 lanes at a time (two halves of 4 doubles, the table read
 * with a gather); compiled with -mavx2 -mfma. Lanes with |x| >= 88 are redone by the scalar
 * function, so every lane has its bits. */
#include <immintrin.h>

#include "kernels/vexp.h"

static inline __m256d exp4(__m256d xd)
{
    const __m256d z = _mm256_fmadd_pd(_mm256_set1_pd(VEXP_INVLN2N), xd, _mm256_set1_pd(VEXP_SHIFT));
    const __m256i ki = _mm256_castpd_si256(z);
    const __m256d kd = _mm256_sub_pd(z, _mm256_set1_pd(VEXP_SHIFT));
    const __m256d r = _mm256_fmsub_pd(_mm256_set1_pd(VEXP_INVLN2N), xd, kd);
    const __m256i idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
    const __m256i t = _mm256_add_epi64(_mm256_i64gather_epi64((const long long *)vexp_tab, idx, 8),
                                       _mm256_slli_epi64(ki, 47));
    const __m256d p = _mm256_fmadd_pd(_mm256_set1_pd(VEXP_C0), r, _mm256_set1_pd(VEXP_C1));
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(_mm256_set1_pd(VEXP_C2), r, _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(p, r2, y);
    return _mm256_mul_pd(y, _mm256_castsi256_pd(t));
}

static inline __m256 exp8(__m256 x)
{
    const __m128 lo = _mm256_cvtpd_ps(exp4(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
    const __m128 hi = _mm256_cvtpd_ps(exp4(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
    return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
}

/* lanes whose top 12 bits (sign cleared) are >= VEXP_TOP_SPECIAL, as a bit mask */
static inline int special8(__m256 x)
{
    const __m256i top = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(x), 20),
                                         _mm256_set1_epi32(0x7ff));
    const __m256i ge = _mm256_cmpgt_epi32(top, _mm256_set1_epi32((int)VEXP_TOP_SPECIAL - 1));
    return _mm256_movemask_ps(_mm256_castsi256_ps(ge));
}

/* s[0..8) = exp(s - mx) (vm = mx in every lane); lanes outside the fast path's range are
 * redone by the scalar vexp_f32. */
static inline void exp_sub8(float *s, __m256 vm)
{
    float v[8];
    _mm256_storeu_ps(v, _mm256_sub_ps(_mm256_loadu_ps(s), vm));
    const __m256 x = _mm256_loadu_ps(v);
    _mm256_storeu_ps(s, exp8(x));
    for (int sp = special8(x), l = 0; sp; l++, sp >>= 1)
        if (sp & 1) s[l] = vexp_f32(v[l]);
}

double vexp_sum_avx2(float *s, int n, float mx)
{
    const __m256 vm = _mm256_set1_ps(mx);
    double sum = 0.0;
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        exp_sub8(s + i, vm);
        for (int l = 0; l < 8; l++) sum += (double)s[i + l];
    }
    for (; i < n; i++) {
        s[i] = vexp_f32(s[i] - mx);
        sum += (double)s[i];
    }
    return sum;
}

void vexp_sub_avx2(float *s, int n, float mx)
{
    const __m256 vm = _mm256_set1_ps(mx);
    int i = 0;
    for (; i + 8 <= n; i += 8) exp_sub8(s + i, vm);
    for (; i < n; i++) s[i] = vexp_f32(s[i] - mx);
}

void vexp_silu_mul_avx2(float *g, const float *u, int n)
{
    const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 nx = _mm256_xor_ps(x, sign);
        __m256 e = exp8(nx);
        const int sp = special8(nx);
        if (sp) {
            float tmp[8];
            _mm256_storeu_ps(tmp, e);
            for (int l = 0; l < 8; l++)
                if (sp >> l & 1) tmp[l] = vexp_f32(-g[i + l]);
            e = _mm256_loadu_ps(tmp);
        }
        const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, e));
        _mm256_storeu_ps(g + i, u ? _mm256_mul_ps(s, _mm256_loadu_ps(u + i)) : s);
    }
    for (; i < n; i++) g[i] = g[i] / (1.0f + vexp_f32(-g[i])) * (u ? u[i] : 1.0f);
}

void vexp_gelu_mul_avx2(float *g, const float *u, int n)
{
    const __m256 one = _mm256_set1_ps(1.0f), c1 = _mm256_set1_ps(VEXP_GELU_C1);
    const __m256 c2 = _mm256_set1_ps(VEXP_GELU_C2), cap = _mm256_set1_ps(30.0f);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 x = _mm256_loadu_ps(g + i);
        const __m256 arg = _mm256_mul_ps(_mm256_fmadd_ps(x, _mm256_mul_ps(c1, x), one),
                                         _mm256_mul_ps(c2, x));
        __m256 e = exp8(arg);
        const int sp = special8(arg);
        if (sp) {
            float tmp[8], a[8];
            _mm256_storeu_ps(tmp, e);
            _mm256_storeu_ps(a, arg);
            for (int l = 0; l < 8; l++)
                if (sp >> l & 1) tmp[l] = vexp_f32(a[l]);
            e = _mm256_loadu_ps(tmp);
        }
        const __m256 y = _mm256_mul_ps(x, _mm256_div_ps(e, _mm256_add_ps(e, one)));
        const __m256 big = _mm256_cmp_ps(arg, cap, _CMP_GT_OQ);
        _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_blendv_ps(y, x, big), _mm256_loadu_ps(u + i)));
    }
    if (i < n) vexp_gelu_mul_scalar(g + i, u + i, n - i);
}

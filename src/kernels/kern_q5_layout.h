/* kern_q5_layout.h — where Q5_0 / Q5_1 / Q4_1 weight blocks and their Q8_0 / Q8_1 activation blocks keep
 * their fields, for the streaming decode kernels that read them at byte offsets (kern_q5_avx512.c,
 * kern_q5_decode_avx2.h): one kernel serves both formats, the format a constant after inlining.
 * Plain C (the layouts are src/quant/quant.h's). */
#ifndef TERN_KERN_Q5_LAYOUT_H
#define TERN_KERN_Q5_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant.h"

/* The formats the shared kernels take as a constant: Q4_1 is Q5_1 without fifth bits. */
enum { Q5F_Q5_0 = 0, Q5F_Q5_1 = 1, Q5F_Q4_1 = 2 };

struct q5_fmt {
    int bbytes, qs_off, qh_off, m_off; /* weight block layout (d at offset 0; m: Q5_1 and Q4_1;
                                          qh: Q5_0 and Q5_1) */
    int abytes, aqs_off;               /* activation block layout (d at offset 0, Q8_1 s at 2) */
};
static const struct q5_fmt q5_fmt_q5_0 = {
    sizeof(struct quant_block_q5_0), offsetof(struct quant_block_q5_0, qs),
    offsetof(struct quant_block_q5_0, qh), 0,
    sizeof(struct quant_block_q8_0), offsetof(struct quant_block_q8_0, qs)};
static const struct q5_fmt q5_fmt_q5_1 = {
    sizeof(struct quant_block_q5_1), offsetof(struct quant_block_q5_1, qs),
    offsetof(struct quant_block_q5_1, qh), offsetof(struct quant_block_q5_1, m),
    sizeof(struct quant_block_q8_1), offsetof(struct quant_block_q8_1, qs)};

static const struct q5_fmt q5_fmt_q4_1 = {
    sizeof(struct quant_block_q4_1), offsetof(struct quant_block_q4_1, qs), -1,
    offsetof(struct quant_block_q4_1, m),
    sizeof(struct quant_block_q8_1), offsetof(struct quant_block_q8_1, qs)};

/* fm: Q5F_Q5_0, Q5F_Q5_1 or Q5F_Q4_1 (a constant after inlining in the kernels) */
static inline __attribute__((always_inline)) const struct q5_fmt *q5_fmt_get(int fm)
{
    return fm == Q5F_Q5_0 ? &q5_fmt_q5_0 : fm == Q5F_Q5_1 ? &q5_fmt_q5_1 : &q5_fmt_q4_1;
}
/* The kernels' format code of a weight type (Q5_0, Q5_1 or Q4_1). */
static inline int q5_fmt_of(int wtype)
{
    return wtype == TERN_TYPE_Q5_1 ? Q5F_Q5_1 : wtype == TERN_TYPE_Q4_1 ? Q5F_Q4_1 : Q5F_Q5_0;
}

/* The fp16 bits at p (any alignment). */
static inline __attribute__((always_inline)) uint16_t q5_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

#endif

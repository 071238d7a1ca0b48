/* kern_q5_layout.h — where Q5_0 / Q5_1 weight blocks and their Q8_0 / Q8_1 activation blocks keep
 * their fields, for the streaming decode kernels that read them at byte offsets (kern_q5_avx512.c,
 * kern_q5_decode_avx2.h): one kernel serves both formats, the format a constant after inlining.
 * Plain C (the layouts are src/quant/quant.h's). */
#ifndef TERN_KERN_Q5_LAYOUT_H
#define TERN_KERN_Q5_LAYOUT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant.h"

struct q5_fmt {
    int bbytes, qs_off, qh_off, m_off; /* weight block layout (d at offset 0; m: Q5_1 only) */
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

/* The fp16 bits at p (any alignment). */
static inline __attribute__((always_inline)) uint16_t q5_u16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

#endif

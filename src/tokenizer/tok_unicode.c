/* tok_unicode.c — code point classes, UTF-8 decoding and GPT-2's byte <-> unicode map.
 *
 * Classes come from utf8proc's general categories (never hand-typed ranges); the BMP is
 * tabulated once on first use (64 KiB, built under pthread_once) because the pre-tokenizers
 * ask for the class of every code point of the input. White space is Unicode's White_Space
 * property: the separators Z* plus U+0009..U+000D and U+0085 — the same set llama.cpp uses.
 *
 * Decoding accepts what llama.cpp's decoder accepts (structure only: overlong forms and
 * surrogates pass) so that valid and "almost valid" text splits identically; anything else is
 * an invalid byte that the caller keeps as a byte of its own (see tok_internal.h). */
#include <pthread.h>
#include <utf8proc.h>

#include "tokenizer/tok_internal.h"
#include "util/utf8.h"

static uint8_t cls_bmp[65536];
static pthread_once_t cls_once = PTHREAD_ONCE_INIT;

static uint8_t class_of(uint32_t cpt)
{
    if ((cpt >= 0x09 && cpt <= 0x0D) || cpt == 0x85) return TOK_CLS_WS;
    switch (utf8proc_category((utf8proc_int32_t)cpt)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return TOK_CLS_L;
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
        return TOK_CLS_M;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return TOK_CLS_N;
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return TOK_CLS_P;
    case UTF8PROC_CATEGORY_SM: case UTF8PROC_CATEGORY_SC: case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO:
        return TOK_CLS_S;
    case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP:
        return TOK_CLS_WS;
    default:
        return TOK_CLS_OTHER;
    }
}

static void build_bmp(void)
{
    for (uint32_t c = 0; c < 65536; c++) cls_bmp[c] = class_of(c);
}

uint8_t tok_cpt_class(uint32_t cpt)
{
    if (cpt & TOK_CPT_INVALID) return TOK_CLS_S;
    pthread_once(&cls_once, build_bmp);
    if (cpt < 65536) return cls_bmp[cpt];
    if (cpt > 0x10FFFF) return TOK_CLS_OTHER;
    return class_of(cpt);
}

int tok_utf8_len(unsigned char c)
{
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

int tok_utf8_decode(const unsigned char *s, size_t n, uint32_t *cpt)
{
    unsigned c = s[0];
    if (c < 0x80) {
        *cpt = c;
        return 1;
    }
    int len;
    uint32_t v;
    if ((c & 0xE0) == 0xC0) {
        len = 2;
        v = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3;
        v = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4;
        v = c & 0x07;
    } else {
        goto invalid;
    }
    if ((size_t)len > n) goto invalid;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) goto invalid;
        v = (v << 6) | (s[i] & 0x3F);
    }
    *cpt = v;
    return len;
invalid:
    *cpt = TOK_CPT_INVALID | c;
    return 1;
}

/* GPT-2: printable Latin-1 bytes stand for themselves; the other 68 bytes are mapped, in byte
 * order, to U+0100, U+0101, ... */
static bool byte_is_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

/* The mapped bytes in order: 0x00..0x20 (33), 0x7F..0xA0 (34), 0xAD (1), so both directions
 * are a few comparisons (the loader converts every character of every token and merge). */
uint32_t tok_byte_to_cpt(uint8_t b)
{
    if (byte_is_printable(b)) return b;
    if (b <= 0x20) return 256u + b;
    if (b >= 0x7F && b <= 0xA0) return 256u + 33 + (b - 0x7Fu);
    return 256u + 67; /* 0xAD */
}

int tok_cpt_to_byte(uint32_t cpt)
{
    if (cpt < 256) return byte_is_printable(cpt) ? (int)cpt : -1;
    uint32_t n = cpt - 256;
    if (n <= 0x20) return (int)n;
    if (n < 33 + 34) return (int)(0x7F + (n - 33));
    if (n == 67) return 0xAD;
    return -1;
}

/* utf8.h — encoding one code point as UTF-8 (1-4 bytes), for every room that writes text from
 * code points: the tokenizer's byte-to-codepoint maps, JSON and template string escapes, grammar
 * character ranges. Callers pass code points <= 0x10FFFF (the decoders that feed them check). */
#ifndef TERN_UTIL_UTF8_H
#define TERN_UTIL_UTF8_H

#include <stdint.h>

/* Writes cp to out (room for 4 bytes) and returns the number of bytes written. */
static inline int util_utf8_encode(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | ((cp >> 18) & 0x07));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

#endif

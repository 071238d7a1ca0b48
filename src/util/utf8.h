/* utf8.h — encoding one code point as UTF-8 (1-4 bytes), for every room that writes text from
 * code points: the tokenizer's byte-to-codepoint maps, JSON and template string escapes, grammar
 * character ranges. Callers pass code points <= 0x10FFFF (the decoders that feed them check).
 * Also: where to cut valid UTF-8 text short without splitting a character (error messages that
 * quote a long key or value keep to a width and stay valid UTF-8). */
#ifndef TERN_UTIL_UTF8_H
#define TERN_UTIL_UTF8_H

#include <stddef.h>
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

/* The longest prefix of s[0..n) of at most max bytes that ends on a character boundary (s is
 * valid UTF-8: a cut backs up over continuation bytes to the start of the character). */
static inline size_t util_utf8_prefix(const char *s, size_t n, size_t max)
{
    if (n <= max) return n;
    size_t k = max;
    while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
    return k;
}

/* n, less a character left unfinished at the end of s[0..n) (text cut to a buffer by snprintf
 * may end inside one). */
static inline size_t util_utf8_whole(const char *s, size_t n)
{
    size_t i = n;
    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80) i--; /* continuation bytes */
    if (i == 0) return n;
    const unsigned char lead = (unsigned char)s[i - 1];
    const size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return n - (i - 1) < want ? i - 1 : n;
}

#endif

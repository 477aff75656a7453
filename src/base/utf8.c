/*
 * utf8.c - strict UTF-8 validation and encoding.
 */
#include "agentsched/base/utf8.h"

#include <string.h>

/* See utf8.h. */
size_t utf8_seq_len(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0];
    size_t n;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4;
    else
        return 0;
    if ((size_t)(end - p) < n)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0) || (c == 0xF0 && p[1] < 0x90) ||
        (c == 0xF4 && p[1] >= 0x90))
        return 0;
    return n;
}

/* See utf8.h. */
size_t utf8_prefix(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    const uint64_t high = 0x8080808080808080ull;
    for (;;) {
        /* ASCII eight bytes at a time, then byte by byte */
        while (end - p >= 8) {
            uint64_t x;
            memcpy(&x, p, 8);
            if (x & high)
                break;
            p += 8;
        }
        while (p < end && *p < 0x80)
            p++;
        if (p >= end)
            return len;
        size_t n = utf8_seq_len(p, end);
        if (!n)
            return (size_t)(p - (const unsigned char *)s);
        p += n;
    }
}

/* See utf8.h. */
size_t utf8_put(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

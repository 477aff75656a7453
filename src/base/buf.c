/* buf.c - capped growable buffer. */
#include "agentsched/base/buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF_DEFAULT_CAP ((size_t)64 << 20)

/* See buf.h. */
void buf_init(buf *b, size_t cap)
{
    memset(b, 0, sizeof *b);
    b->cap = cap ? cap : BUF_DEFAULT_CAP;
}

/* See buf.h. */
void buf_free(buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->alloc = 0;
}

/* See buf.h. */
void buf_reset(buf *b)
{
    b->len = 0;
    b->err = AS_OK;
    if (b->data)
        b->data[0] = '\0';
}

/* See buf.h. */
as_err buf_reserve(buf *b, size_t extra)
{
    if (b->err)
        return b->err;
    if (extra > b->cap - b->len)
        return b->err = AS_ETOOBIG;
    size_t need = b->len + extra + 1;
    if (need <= b->alloc)
        return AS_OK;
    size_t n = b->alloc ? b->alloc : 256;
    while (n < need)
        n *= 2;
    char *d = realloc(b->data, n);
    if (!d)
        return b->err = AS_ENOMEM;
    b->data = d;
    b->alloc = n;
    return AS_OK;
}

/* See buf.h. */
as_err buf_append(buf *b, const void *data, size_t n)
{
    as_err err = buf_reserve(b, n);
    if (err)
        return err;
    memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
    return AS_OK;
}

/* See buf.h. */
as_err buf_puts(buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

/* See buf.h. */
as_err buf_printf(buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return b->err = AS_EINVAL;
    if ((size_t)n < sizeof small)
        return buf_append(b, small, (size_t)n);
    as_err err = buf_reserve(b, (size_t)n);
    if (err)
        return err;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return AS_OK;
}

/* See buf.h. */
as_err buf_json_str(buf *b, const char *s, size_t n)
{
    /* worst case every byte becomes \u00XX */
    as_err err = buf_reserve(b, n * 6 + 2);
    if (err)
        return err;
    char *o = buf_json_quote(b->data + b->len, s, n);
    *o = '\0';
    b->len = (size_t)(o - b->data);
    return AS_OK;
}

/* See buf.h. */
char *buf_json_quote(char *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    *o++ = '"';
    size_t i = 0;
    /* Eight bytes at a time while none needs escaping: (x - k) sets a
     * byte's high bit when that byte is below k if all bytes are < 0x80,
     * and bytes >= 0x80 (copied as they are) send the word to the byte
     * loop; false positives only cost the slower path. */
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    for (; i + 8 <= n; i += 8) {
        uint64_t x;
        memcpy(&x, s + i, 8);
        uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
        if ((x | (x - ones * 0x20) | (q - ones) | (b - ones)) & high)
            break;
        memcpy(o, &x, 8);
        o += 8;
    }
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *o++ = (char)c;
        } else if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
        } else {
            *o++ = '\\';
            switch (c) {
            case '\n':
                *o++ = 'n';
                break;
            case '\r':
                *o++ = 'r';
                break;
            case '\t':
                *o++ = 't';
                break;
            default:
                *o++ = 'u';
                *o++ = '0';
                *o++ = '0';
                *o++ = hex[c >> 4];
                *o++ = hex[c & 15];
            }
        }
    }
    *o++ = '"';
    return o;
}

/* See buf.h. */
as_err buf_json_cstr(buf *b, const char *s)
{
    return s ? buf_json_str(b, s, strlen(s)) : buf_puts(b, "null");
}

/* See buf.h. */
as_err buf_take(buf *b, char **data, size_t *len)
{
    if (b->err)
        return b->err;
    if (!b->data) {
        as_err err = buf_reserve(b, 0);
        if (err)
            return err;
        b->data[0] = '\0';
    }
    *data = b->data;
    *len = b->len;
    b->data = NULL;
    b->len = b->alloc = 0;
    return AS_OK;
}

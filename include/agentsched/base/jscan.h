/*
 * jscan.h - a validating single-pass JSON scanner (RFC 8259), no DOM and
 * no allocation: what the request decoders read ExtenderArgs with, and
 * what every document the JSON layer (json.h) builds is validated by.
 *
 * A caller walks a value with jscan_next_key / jscan_next_elem, reads the
 * members it wants (jscan_string, jscan_literal) and hands every other
 * value to jscan_value, which validates it and steps over it. Every byte
 * is checked: strings (escapes, control characters, strict UTF-8 as
 * utf8.h), numbers, literals, structure and depth (JSCAN_MAX_DEPTH), so a
 * span the scanner passed may be echoed as it is. A failure is recorded
 * once in the scanner (err, diag) and every function returns 0 (or -1
 * where 0 means the end of a container) from then on up the stack.
 * Syntax errors are AS_EPARSE "malformed JSON near byte N: ...", nesting
 * deeper than the cap AS_ETOOBIG.
 */
#ifndef AGENTSCHED_JSCAN_H
#define AGENTSCHED_JSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "agentsched/base/error.h"

#define JSCAN_MAX_DEPTH 64

/* A scan in progress. Zero it, then set base, p (= base), end and diag. */
typedef struct jscan {
    const char *base; /* the document: offsets in messages count from here */
    const char *p;    /* the next byte to read */
    const char *end;
    as_diag *diag; /* the first failure's words; not NULL */
    as_err err;    /* the first failure; AS_OK until then */
    int depth;     /* containers open */
    /* true: a key holding NUL (an escaped zero code point) is not refused
     * here but left to the DOM builder the span goes to, which names its
     * path; false: AS_EINVAL with the key's byte offset */
    bool keys_nul_ok;
} jscan;

/* jscan_syntax records AS_EPARSE for the byte at s->p ("malformed JSON
 * near byte N: what ...") unless s has failed already; returns 0. */
int jscan_syntax(jscan *s, const char *what);

/* jscan_peek_type names the JSON type of the value at s->p ("an object",
 * "a string", ...), for messages about a wrongly-typed value. */
const char *jscan_peek_type(const jscan *s);

/* jscan_enter opens the container at s->p (its '{' or '['): 1, or 0 with
 * AS_ETOOBIG when it would nest deeper than JSCAN_MAX_DEPTH. */
int jscan_enter(jscan *s);

/* jscan_value validates the value at s->p (whitespace before it
 * allowed) and steps past it: 1, or 0 with s failed. */
int jscan_value(jscan *s);

/* jscan_literal reads the literal lit ("true", "false", "null") at s->p:
 * 1, or 0 with a syntax error. */
int jscan_literal(jscan *s, const char *lit);

/* jscan_next_key advances to the next member of the object being read
 * (opened by jscan_enter; *first true before the first member): 1 with
 * the key scanned (as jscan_string) and s->p at its value, 0 past the
 * closing brace, -1 with s failed. */
int jscan_next_key(jscan *s, bool *first, const char **k, size_t *klen, bool *kesc);

/* jscan_string_any is jscan_string for every string: escapes, control
 * characters, invalid UTF-8 and the errors they make. */
int jscan_string_any(jscan *s, const char **raw, size_t *len, bool *esc);

/* jscan_next_elem_slow is jscan_next_elem for whitespace, the first
 * element, the end of the array and every error. */
int jscan_next_elem_slow(jscan *s, bool *first);

/* jscan_unescape decodes the string text raw[0..n) that the scanner
 * validated into out, which has room for n bytes (decoding never grows a
 * string), and returns the decoded length. Lone surrogates become
 * U+FFFD, as Go's decoder makes them. */
size_t jscan_unescape(const char *raw, size_t n, char *out);

/* jscan_esc_has_nul reports whether the validated string text raw[0..len)
 * decodes to a NUL (holds a \u0000 escape). */
bool jscan_esc_has_nul(const char *raw, size_t len);

/* jscan_document reports whether body[0..len) is exactly one valid JSON
 * value (surrounding whitespace allowed). */
bool jscan_document(const char *body, size_t len);

/* jscan_count_values counts the values the JSON text p[0..n) would decode
 * to, about (every '{', '[' and ',' outside strings, plus one), without
 * validating it: what a server charges a body before it is decoded.
 * Linear, no memory; string contents sixteen bytes a step. */
size_t jscan_count_values(const char *p, size_t n);

/* The functions from here on are inline: the request decoders call them
 * once per name or token (500 NodeNames a request). */

/* JSON whitespace; every other byte the scanners stop at is above ' ', so
 * one compare settles the common case (runs before every token). */
static inline bool jscan_is_ws(char c)
{
    return (unsigned char)c <= ' ' && (c == ' ' || c == '\n' || c == '\r' || c == '\t');
}

/* jscan_ws steps s->p past whitespace. */
static inline void jscan_ws(jscan *s)
{
    while (s->p < s->end && jscan_is_ws(*s->p))
        s->p++;
}

/* jscan_is_digit: c is an ASCII digit. */
static inline bool jscan_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/*
 * jscan_plain_run returns the first byte at or after p that a string scan must
 * look at (a quote, a backslash, a control character or a non-ASCII byte),
 * or, when none comes first, where fewer than 8 bytes are left: every byte
 * before the result is plain, and the caller finishes byte by byte from
 * there. Sixteen bytes a step with SSE2 (baseline on x86-64), then eight.
 * quote_only: look for quotes and backslashes only (the walk over text the
 * scanner already validated).
 */
static inline const unsigned char *jscan_plain_run(const unsigned char *p, const unsigned char *end,
                                                   bool quote_only)
{
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20), none = _mm_setzero_si128();
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        /* signed compare: bytes >= 0x80 are negative, so "below 0x20" too */
        __m128i ctl = quote_only ? none : _mm_cmplt_epi8(v, space);
        __m128i hit =
            _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, bslash)), ctl);
        unsigned m = (unsigned)_mm_movemask_epi8(hit);
        if (m)
            return p + __builtin_ctz(m);
        p += 16;
    }
#endif
    /* Eight bytes at a time. With every byte below 0x80, (v - k) & ~v
     * flags the bytes below k; a borrow only flags bytes above a true hit,
     * so the lowest flag is exact; bytes >= 0x80 flag themselves (| x). */
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    while (end - p >= 8) {
        uint64_t x;
        memcpy(&x, p, 8);
        uint64_t q = x ^ (ones * '"'), b = x ^ (ones * '\\');
        uint64_t m = ((q - ones) & ~q) | ((b - ones) & ~b);
        if (!quote_only)
            m |= ((x - ones * 0x20) & ~x) | x;
        m &= high;
        if (m)
            return p + (__builtin_ctzll(m) >> 3);
        p += 8;
    }
    return p;
}

/* jscan_string scans the string at s->p (a quote): 1 with *raw and *len
 * the bytes between the quotes, *esc whether any escape occurs, and s->p
 * past the closing quote; 0 with s failed. Most strings (keys,
 * names) are printable ASCII: they are finished here by jscan_plain_run, and
 * everything else goes to jscan_string_any from the start. */
static inline int jscan_string(jscan *s, const char **raw, size_t *len, bool *esc)
{
    const unsigned char *start = (const unsigned char *)s->p + 1;
    const unsigned char *end = (const unsigned char *)s->end;
    /* every byte before p is plain: a quote at p closes the string */
    const unsigned char *p = jscan_plain_run(start, end, false);
    if (p >= end || *p != '"')
        return jscan_string_any(s, raw, len, esc);
    *raw = (const char *)start;
    *esc = false;
    *len = (size_t)(p - start);
    s->p = (const char *)p + 1;
    return 1;
}

/* jscan_next_elem steps to the next element of an array (1), past its ']'
 * (0), or fails (-1). Inline for the compact ",<value>" between elements
 * (what every client sends: kube-scheduler's NodeNames are 500 of them);
 * whitespace, the first element, the end and every error take the slow
 * path. */
static inline int jscan_next_elem(jscan *s, bool *first)
{
    if (!*first && s->end - s->p >= 2 && s->p[0] == ',' && (unsigned char)s->p[1] > ' ' &&
        s->p[1] != ']') {
        s->p++;
        return 1;
    }
    return jscan_next_elem_slow(s, first);
}

#endif

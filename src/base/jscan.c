/*
 * jscan.c - the validating JSON scanner.
 *
 * Hand-written rather than yajl events: most of what a request holds is
 * content nobody reads (a full-Nodes ExtenderArgs is mostly Node objects
 * whose only use is metadata.name and the span to echo), and validating
 * it with a tight loop is several times faster than tokenizing it (yajl
 * alone takes ~4 ms for 500 nodes / 900 KB).
 */
#include "agentsched/base/jscan.h"

#include <stdio.h>
#include <strings.h>

#include "agentsched/base/utf8.h"

/* See jscan.h. */
int jscan_syntax(jscan *s, const char *what)
{
    if (s->err == AS_OK) {
        s->err = AS_EPARSE;
        as_diag_set(s->diag, AS_EPARSE, "",
                    "malformed JSON near byte %zu: %s (send a complete, valid UTF-8 JSON "
                    "document)",
                    (size_t)(s->p - s->base), what);
    }
    return 0;
}

/* See jscan.h. */
const char *jscan_peek_type(const jscan *s)
{
    switch (s->p < s->end ? *s->p : 0) {
    case '{':
        return "an object";
    case '[':
        return "an array";
    case '"':
        return "a string";
    case 't':
    case 'f':
        return "a boolean";
    case 'n':
        return "null";
    default:
        return "a number";
    }
}

/* See jscan.h. */
int jscan_enter(jscan *s)
{
    if (++s->depth > JSCAN_MAX_DEPTH) {
        if (s->err == AS_OK) {
            s->err = AS_ETOOBIG;
            as_diag_set(s->diag, AS_ETOOBIG, "", "JSON nested deeper than 64 levels");
        }
        return 0;
    }
    s->p++;
    return 1;
}

static int hexval(unsigned c)
{
    if (c >= '0' && c <= '9')
        return (int)(c - '0');
    if (c >= 'a' && c <= 'f')
        return (int)(c - 'a' + 10);
    if (c >= 'A' && c <= 'F')
        return (int)(c - 'A' + 10);
    return -1;
}

/* See jscan.h. */
int jscan_string_any(jscan *s, const char **raw, size_t *len, bool *esc)
{
    const unsigned char *p = (const unsigned char *)s->p + 1;
    const unsigned char *end = (const unsigned char *)s->end;
    *raw = (const char *)p;
    *esc = false;
    for (;;) {
        p = jscan_plain_run(p, end, false);
        while (p < end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80)
            p++;
        if (p >= end) {
            s->p = (const char *)p;
            return jscan_syntax(s, "unterminated string");
        }
        unsigned c = *p;
        if (c == '"')
            break;
        if (c == '\\') {
            *esc = true;
            if (p + 1 >= end) {
                s->p = (const char *)p;
                return jscan_syntax(s, "unterminated string");
            }
            unsigned e = p[1];
            if (e == 'u') {
                if (end - p < 6 || hexval(p[2]) < 0 || hexval(p[3]) < 0 || hexval(p[4]) < 0 ||
                    hexval(p[5]) < 0) {
                    s->p = (const char *)p;
                    return jscan_syntax(s, "invalid \\u escape");
                }
                p += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                       e == 'r' || e == 't') {
                p += 2;
            } else {
                s->p = (const char *)p;
                return jscan_syntax(s, "invalid escape in string");
            }
            continue;
        }
        if (c < 0x20) {
            s->p = (const char *)p;
            return jscan_syntax(s, "control character in string");
        }
        size_t n = utf8_seq_len(p, end);
        if (!n) {
            s->p = (const char *)p;
            return jscan_syntax(s, "invalid UTF-8 in string");
        }
        p += n;
    }
    *len = (size_t)(p - (const unsigned char *)*raw);
    s->p = (const char *)p + 1;
    return 1;
}

static uint32_t hex4(const char *p)
{
    return (uint32_t)(hexval((unsigned char)p[0]) << 12 | hexval((unsigned char)p[1]) << 8 |
                      hexval((unsigned char)p[2]) << 4 | hexval((unsigned char)p[3]));
}

/* See jscan.h. */
size_t jscan_unescape(const char *raw, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (raw[i] != '\\') {
            out[o++] = raw[i++];
            continue;
        }
        char e = raw[i + 1];
        i += 2;
        switch (e) {
        case 'b':
            out[o++] = '\b';
            break;
        case 'f':
            out[o++] = '\f';
            break;
        case 'n':
            out[o++] = '\n';
            break;
        case 'r':
            out[o++] = '\r';
            break;
        case 't':
            out[o++] = '\t';
            break;
        case 'u': {
            uint32_t cp = hex4(raw + i);
            i += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && i + 6 <= n && raw[i] == '\\' && raw[i + 1] == 'u') {
                uint32_t lo = hex4(raw + i + 2);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    i += 6;
                }
            }
            if (cp >= 0xD800 && cp < 0xE000)
                cp = 0xFFFD;
            o += utf8_put(out + o, cp);
            break;
        }
        default:
            out[o++] = e;
            break; /* " \ / */
        }
    }
    return o;
}

/* number_end is JSON's number grammar from p: where the number ends;
 * *why NULL then, else what is wrong, the result pointing at the fault.
 * The one grammar of both scans (scan_number_text, skip_fast). */
static inline const char *number_end(const char *p, const char *end, const char **why)
{
    *why = NULL;
    if (p < end && *p == '-')
        p++;
    if (p < end && *p == '0') {
        p++;
    } else if (p < end && *p >= '1' && *p <= '9') {
        while (++p < end && jscan_is_digit(*p))
            ;
    } else {
        *why = "invalid value";
        return p;
    }
    if (p < end && *p == '.') {
        if (++p >= end || !jscan_is_digit(*p)) {
            *why = "invalid number";
            return p;
        }
        while (++p < end && jscan_is_digit(*p))
            ;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        if (++p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !jscan_is_digit(*p)) {
            *why = "invalid number";
            return p;
        }
        while (++p < end && jscan_is_digit(*p))
            ;
    }
    return p;
}

static int scan_number_text(jscan *s)
{
    const char *why;
    s->p = number_end(s->p, s->end, &why);
    return why ? jscan_syntax(s, why) : 1;
}

/* See jscan.h. */
int jscan_literal(jscan *s, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n) != 0)
        return jscan_syntax(s, "invalid literal");
    s->p += n;
    return 1;
}

/* See jscan.h. */
bool jscan_esc_has_nul(const char *raw, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (raw[i] != '\\')
            continue;
        if (raw[i + 1] == 'u' && hex4(raw + i + 2) == 0)
            return true;
        i++; /* past the escaped character (a backslash is never a start) */
    }
    return false;
}

/* key_nul fails the scan for a key holding NUL: a reader taking keys as
 * C strings would cut it short, and a span echoed to another JSON reader
 * should not hold one either. */
static int key_nul(jscan *s, const char *key)
{
    if (s->err == AS_OK) {
        s->err = AS_EINVAL;
        as_diag_set(s->diag, AS_EINVAL, "",
                    "the object key at byte %zu contains \\u0000 (a NUL character); object keys "
                    "may not contain NUL, remove it",
                    (size_t)(key - 1 - s->base));
    }
    return 0;
}

/* See jscan.h. */
int jscan_next_key(jscan *s, bool *first, const char **k, size_t *klen, bool *kesc)
{
    jscan_ws(s);
    if (s->p >= s->end)
        return jscan_syntax(s, "unexpected end of input in an object") - 1;
    if (*s->p == '}') {
        s->p++;
        s->depth--;
        return 0;
    }
    if (!*first) {
        if (*s->p != ',')
            return jscan_syntax(s, "expected ',' or '}'") - 1;
        s->p++;
        jscan_ws(s);
    }
    *first = false;
    if (s->p >= s->end || *s->p != '"')
        return jscan_syntax(s, "expected a string key") - 1;
    if (!jscan_string(s, k, klen, kesc))
        return -1;
    /* only an escape spells NUL; with keys_nul_ok the DOM builder the
     * span goes to refuses it, naming its path */
    if (*kesc && !s->keys_nul_ok && jscan_esc_has_nul(*k, *klen))
        return key_nul(s, *k) - 1;
    jscan_ws(s);
    if (s->p >= s->end || *s->p != ':')
        return jscan_syntax(s, "expected ':'") - 1;
    s->p++;
    jscan_ws(s);
    if (s->p >= s->end)
        return jscan_syntax(s, "unexpected end of input") - 1;
    return 1;
}

/* See jscan.h. */
int jscan_next_elem_slow(jscan *s, bool *first)
{
    jscan_ws(s);
    if (s->p >= s->end)
        return jscan_syntax(s, "unexpected end of input in an array") - 1;
    if (*s->p == ']') {
        s->p++;
        s->depth--;
        return 0;
    }
    if (!*first) {
        if (*s->p != ',')
            return jscan_syntax(s, "expected ',' or ']'") - 1;
        s->p++;
        jscan_ws(s);
        if (s->p >= s->end)
            return jscan_syntax(s, "unexpected end of input in an array") - 1;
        if (*s->p == ']')
            return jscan_syntax(s, "trailing comma in an array") - 1;
    }
    *first = false;
    return 1;
}

static int value_slow(jscan *s);

/* str_skip steps past the string whose opening quote is at p: the byte
 * after its closing quote, or NULL where the string is malformed (the
 * caller then rescans with the diagnosing path). *esc: an escape occurred.
 * str_skip_rest finishes it from p, every byte before p plain. */
static const unsigned char *str_skip_rest(const unsigned char *p, const unsigned char *end,
                                          bool *esc)
{
    for (;;) {
        while (p < end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80)
            p++;
        if (p >= end)
            return NULL;
        unsigned c = *p;
        if (c == '"')
            return p + 1;
        if (c == '\\') {
            *esc = true;
            if (end - p < 2)
                return NULL;
            unsigned e = p[1];
            if (e == 'u') {
                if (end - p < 6 || hexval(p[2]) < 0 || hexval(p[3]) < 0 || hexval(p[4]) < 0 ||
                    hexval(p[5]) < 0)
                    return NULL;
                p += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                       e == 'r' || e == 't') {
                p += 2;
            } else {
                return NULL;
            }
            p = jscan_plain_run(p, end, false);
            continue;
        }
        if (c < 0x20)
            return NULL;
        size_t n = utf8_seq_len(p, end);
        if (!n)
            return NULL;
        p = jscan_plain_run(p + n, end, false);
    }
}

/* Inline for the common string: plain ASCII up to its closing quote,
 * found from the masks of one 16-byte load without reading the byte
 * again (that reload is on the critical path of every token). */
static inline const unsigned char *str_skip(const unsigned char *p, const unsigned char *end,
                                            bool *esc)
{
    p++;
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), bslash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
        __m128i q = _mm_cmpeq_epi8(v, quote);
        /* signed compare: bytes >= 0x80 are negative, so "below 0x20" too */
        __m128i hit =
            _mm_or_si128(_mm_or_si128(q, _mm_cmpeq_epi8(v, bslash)), _mm_cmplt_epi8(v, space));
        unsigned m = (unsigned)_mm_movemask_epi8(hit);
        if (m) {
            unsigned at = (unsigned)__builtin_ctz(m);
            if ((unsigned)_mm_movemask_epi8(q) >> at & 1)
                return p + at + 1;
            return str_skip_rest(p + at, end, esc);
        }
        p += 16;
    }
#endif
    p = jscan_plain_run(p, end, false);
    if (p < end && *p == '"')
        return p + 1;
    return str_skip_rest(p, end, esc);
}

#define SKIP_WS(p, end)                                                                            \
    while ((p) < (end) && jscan_is_ws((char)*(p)))                                                 \
    (p)++

/* skip_fast validates the value at s->p (whitespace before it skipped)
 * and steps past it: true; false, with s untouched, at anything malformed
 * or nested too deep, for the recursive scan to find and name. Most of a
 * request's bytes are values nobody reads (a Node's status and images):
 * one loop with an explicit stack, one bit a level (1: object), and no
 * call a token, takes a kubelet's Node in about three quarters of the time
 * of the recursion that diagnoses (9.3 us against 12.8 for a 23 KB
 * predicate body). It accepts exactly what that recursion accepts. */
static bool skip_fast(jscan *s)
{
    const unsigned char *p = (const unsigned char *)s->p, *end = (const unsigned char *)s->end;
    int maxd = JSCAN_MAX_DEPTH - s->depth, d = 0;
    uint64_t objs = 0;
    bool esc;
value:
    SKIP_WS(p, end);
    if (p >= end)
        return false;
    switch (*p) {
    case '"':
        esc = false;
        if (!(p = str_skip(p, end, &esc)))
            return false;
        goto after;
    case '{':
        if (++d > maxd)
            return false;
        objs = objs << 1 | 1;
        p++;
        SKIP_WS(p, end);
        if (p < end && *p == '}') {
            p++;
            goto closed;
        }
        goto key;
    case '[':
        if (++d > maxd)
            return false;
        objs <<= 1;
        p++;
        SKIP_WS(p, end);
        if (p < end && *p == ']') {
            p++;
            goto closed;
        }
        goto value;
    case 't':
    case 'f':
    case 'n': {
        const char *lit = *p == 't' ? "true" : *p == 'f' ? "false" : "null";
        size_t n = *p == 'f' ? 5 : 4;
        if ((size_t)(end - p) < n || memcmp(p, lit, n) != 0)
            return false;
        p += n;
        goto after;
    }
    default: {
        const char *why;
        p = (const unsigned char *)number_end((const char *)p, (const char *)end, &why);
        if (why)
            return false;
        goto after;
    }
    }
key:
    if (p >= end || *p != '"')
        return false;
    {
        const unsigned char *k = p + 1;
        esc = false;
        if (!(p = str_skip(p, end, &esc)))
            return false;
        if (esc && !s->keys_nul_ok && jscan_esc_has_nul((const char *)k, (size_t)(p - 1 - k)))
            return false;
    }
    SKIP_WS(p, end);
    if (p >= end || *p != ':')
        return false;
    p++;
    goto value;
closed:
    d--;
    objs >>= 1;
after:
    if (d == 0) {
        s->p = (const char *)p;
        return true;
    }
    SKIP_WS(p, end);
    if (p >= end)
        return false;
    if (*p == ',') {
        p++;
        SKIP_WS(p, end);
        if (objs & 1)
            goto key;
        if (p < end && *p == ']')
            return false;
        goto value;
    }
    if (*p == ((objs & 1) ? '}' : ']')) {
        p++;
        goto closed;
    }
    return false;
}

/* See jscan.h. */
int jscan_value(jscan *s)
{
    if (s->err == AS_OK && skip_fast(s))
        return 1;
    return value_slow(s);
}

/* value_slow is jscan_value by recursion: what skip_fast refused is
 * scanned again here, which names the first fault. */
static int value_slow(jscan *s)
{
    jscan_ws(s);
    if (s->p >= s->end)
        return jscan_syntax(s, "unexpected end of input");
    switch (*s->p) {
    case '{': {
        if (!jscan_enter(s))
            return 0;
        bool first = true;
        const char *k;
        size_t kl;
        bool ke;
        int r;
        while ((r = jscan_next_key(s, &first, &k, &kl, &ke)) == 1)
            if (!value_slow(s))
                return 0;
        return r == 0;
    }
    case '[': {
        if (!jscan_enter(s))
            return 0;
        bool first = true;
        int r;
        while ((r = jscan_next_elem(s, &first)) == 1)
            if (!value_slow(s))
                return 0;
        return r == 0;
    }
    case '"': {
        const char *raw;
        size_t len;
        bool esc;
        return jscan_string(s, &raw, &len, &esc);
    }
    case 't':
        return jscan_literal(s, "true");
    case 'f':
        return jscan_literal(s, "false");
    case 'n':
        return jscan_literal(s, "null");
    default:
        return scan_number_text(s);
    }
}

/* See jscan.h. */
bool jscan_document(const char *body, size_t len)
{
    as_diag quiet;
    jscan s = {.base = body, .p = body, .end = body + len, .diag = &quiet};
    if (!jscan_value(&s))
        return false;
    jscan_ws(&s);
    return s.p == s.end;
}

/* See jscan.h. */
size_t jscan_count_values(const char *p, size_t n)
{
    size_t values = 1;
    bool in_str = false;
    const unsigned char *end = (const unsigned char *)p + n;
    for (size_t i = 0; i < n; i++) {
        if (in_str) {
            /* string contents: sixteen bytes a step to the next quote or
             * backslash (most of a Kubernetes object's bytes) */
            i = (size_t)(jscan_plain_run((const unsigned char *)p + i, end, true) -
                         (const unsigned char *)p);
            for (; i < n && p[i] != '"' && p[i] != '\\'; i++)
                ;
            if (i >= n)
                break;
            if (p[i] == '\\')
                i++;
            else
                in_str = false;
            continue;
        }
        char c = p[i];
        if (c == '"')
            in_str = true;
        else if (c == '{' || c == '[' || c == ',')
            values++;
    }
    return values;
}

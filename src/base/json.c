/*
 * json.c - the JSON -> jansson builder every document goes through, and
 * the readers of spans the scanner (jscan.h) validated.
 *
 * DOMs (an extender's Pod; whole documents: binding and preemption args,
 * watch events, list pages) come from one builder fed with events (bld_*,
 * dispatch): by a walk of text the scanner has validated (vw_*), or, for
 * what the scanner or the walk rejects, by yajl's callbacks, whose error
 * messages are the ones reported.
 */
#include "agentsched/base/json.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yajl/yajl_parse.h>

#include "agentsched/base/pool.h"
#include "agentsched/base/utf8.h"

typedef enum ev_kind {
    EV_NULL,
    EV_BOOL,
    EV_INT,
    EV_DBL,
    EV_STR,
    EV_MAP_START,
    EV_KEY,
    EV_MAP_END,
    EV_ARR_START,
    EV_ARR_END,
} ev_kind;

typedef struct ev {
    ev_kind kind;
    const char *s;
    size_t len;
    long long i;
    double d;
    int b;
} ev;

typedef enum st {
    ST_BUILD, /* assembling the document */
    ST_DONE,  /* the document is complete */
} st;

/* yajl -> jansson builder: a stack of open containers. */
typedef struct bld {
    json_t *stack[JSON_MAX_DEPTH + 2];
    /* skip rules (json_skip): per open container, the rule whose
     * parent it sits under, -1 for none */
    signed char rule[JSON_MAX_DEPTH + 2];
    int depth;
    json_t *root;
    char key[JSON_MAX_KEY_LEN];
    size_t keylen;
    int key_rule; /* the rule the last key is the parent of, or -1 */
    bool drop;    /* the next value is a member the rules leave out */
    int dropping; /* > 0: inside a left-out value, this many levels deep */
} bld;

/* An json_skip table with its names' lengths, built per document. */
#define SKIP_MAX_RULES 16

/* A number JSON's grammar allows but the DOM cannot hold (an integer
 * beyond long long, a real beyond double): valid JSON, refused all the
 * same, and said so. Arguments: the byte offset and the parser's word. */
#define NUMBER_RANGE                                                                               \
    "number out of range near byte %zu: %s (send integers within 64 bits and reals within "        \
    "a double's range)"
typedef struct skip_index {
    const json_skip *rules;
    int n;
    size_t plen[SKIP_MAX_RULES];
    uint64_t parent_lens;              /* bit (len & 63) of every parent */
    uint64_t key_lens[SKIP_MAX_RULES]; /* the same for each rule's keys */
    int root_rule;                     /* the rule with parent "" (the root object), or -1 */
} skip_index;

typedef struct ctx {
    yajl_handle h;
    const skip_index *skip; /* NULL: build everything */
    const char *body;
    size_t body_len;
    pool *p;
    as_diag *diag;
    as_err err;
    st state;
    int depth; /* nesting of the whole document */
    bld b;
    json_t **target; /* where BUILD stores its value */
} ctx;

static int fail(ctx *c, as_err err, const char *field, const char *fmt, const char *detail)
{
    if (c->err == AS_OK) {
        c->err = err;
        as_diag_set(c->diag, err, field, fmt, detail ? detail : "");
    }
    return 0;
}

/* ---- builder ---------------------------------------------------- */

/* bld_path writes the path of the innermost open container to out
 * ("spec.nodeSelector", "items[3].metadata", "" for the root), cut to n
 * bytes on a character boundary. For error messages only: it finds each
 * container among its parent's members by a search (a container being
 * built is its parent's last array element, or the value of some key). */
static void bld_path(const bld *b, char *out, size_t n)
{
    size_t o = 0;
    out[0] = '\0';
    for (int i = 0; i + 1 < b->depth; i++) {
        const json_t *parent = b->stack[i], *child = b->stack[i + 1];
        char seg[96];
        if (json_is_array(parent)) {
            snprintf(seg, sizeof seg, "[%zu]", json_array_size(parent) - 1);
        } else {
            const char *key, *k = "?";
            size_t klen, kl = 1;
            json_t *v;
            json_object_keylen_foreach((json_t *)parent, key, klen, v)
            {
                if (v == child) {
                    k = key;
                    kl = klen;
                    break;
                }
            }
            kl = as_utf8_excerpt(k, kl, 64);
            snprintf(seg, sizeof seg, "%s%.*s", o ? "." : "", (int)kl, k);
        }
        size_t sl = strlen(seg);
        if (o + sl >= n)
            break; /* the path's head is the useful part */
        memcpy(out + o, seg, sl + 1);
        o += sl;
    }
}

/* bld_key_nul fails the document for a key holding NUL (an escaped zero
 * code point): a reader taking keys as C strings would see another key
 * ("kubernetes.io/hostname\u0000x" as "kubernetes.io/hostname"). */
static int bld_key_nul(ctx *c, const char *key, const char *nul)
{
    if (c->err != AS_OK)
        return 0;
    char path[128];
    bld_path(&c->b, path, sizeof path);
    size_t pre = as_utf8_excerpt(key, (size_t)(nul - key), 48);
    c->err = AS_EINVAL;
    as_diag_set(c->diag, AS_EINVAL, path,
                "%s%sthe key \"%.*s\\u0000...\" contains \\u0000 (a NUL character); object "
                "keys may not contain NUL, remove it",
                path, path[0] ? ": " : "", (int)pre, key);
    return 0;
}

static void bld_reset(bld *b)
{
    /* open containers are owned by their parents, and those by root */
    if (b->root)
        json_decref(b->root);
    b->root = NULL;
    b->depth = 0;
    b->keylen = 0;
    b->key_rule = -1;
    b->drop = false;
    b->dropping = 0;
}

/* skip_rule_for is the index of the rule whose parent is key, or -1.
 * Every key of the document comes through here: a mask of the parents'
 * lengths turns most of them away before any comparison. */
static int skip_rule_for(const skip_index *x, const char *key, size_t len)
{
    if (!(x->parent_lens >> (len & 63) & 1))
        return -1;
    for (int r = 0; r < x->n; r++)
        if (len && x->plen[r] == len && !memcmp(x->rules[r].parent, key, len))
            return r;
    return -1;
}

static bool skip_key(const skip_index *x, int r, const char *key, size_t len)
{
    if (!(x->key_lens[r] >> (len & 63) & 1))
        return false;
    for (const char *const *k = x->rules[r].keys; *k; k++)
        if (strlen(*k) == len && !memcmp(*k, key, len))
            return true;
    return false;
}

/* skip_index_init indexes the first SKIP_MAX_RULES rules of sk (those
 * beyond are ignored: their members are built, which is always safe). */
static void skip_index_init(skip_index *x, const json_skip *sk)
{
    memset(x, 0, sizeof *x);
    x->rules = sk;
    x->root_rule = -1;
    for (; x->n < SKIP_MAX_RULES && sk[x->n].parent; x->n++) {
        size_t pl = strlen(sk[x->n].parent);
        x->plen[x->n] = pl;
        if (pl == 0) {
            /* parent "": the root object (a member named "" is never a
             * parent, skip_rule_for) */
            if (x->root_rule < 0)
                x->root_rule = x->n;
        } else {
            x->parent_lens |= 1ull << (pl & 63);
        }
        for (const char *const *k = sk[x->n].keys; k && *k; k++)
            x->key_lens[x->n] |= 1ull << (strlen(*k) & 63);
    }
}

/* bld_dropped consumes an event of a left-out member's value (yajl has
 * already validated it); returns false when the event is to be built. */
static bool bld_dropped(bld *b, const ev *e)
{
    if (b->dropping) {
        if (e->kind == EV_MAP_START || e->kind == EV_ARR_START)
            b->dropping++;
        else if (e->kind == EV_MAP_END || e->kind == EV_ARR_END)
            b->dropping--;
        return true;
    }
    if (!b->drop)
        return false;
    b->drop = false;
    if (e->kind == EV_MAP_START || e->kind == EV_ARR_START)
        b->dropping = 1;
    return true;
}

/* bld_add attaches v (stolen) to the open container or makes it the root. */
static int bld_add(ctx *c, json_t *v)
{
    bld *b = &c->b;
    if (!v)
        return fail(c, AS_ENOMEM, NULL, "out of memory while decoding the request%s", NULL);
    if (b->depth == 0) {
        b->root = v;
        return 1;
    }
    json_t *parent = b->stack[b->depth - 1];
    int rc = json_is_array(parent) ? json_array_append_new(parent, v)
                                   : json_object_setn_new_nocheck(parent, b->key, b->keylen, v);
    if (rc != 0)
        return fail(c, AS_ENOMEM, NULL, "out of memory while decoding the request%s", NULL);
    return 1;
}

/* bld_event feeds one event; sets *done when the value is complete. */
static int bld_event(ctx *c, const ev *e, int *done)
{
    bld *b = &c->b;
    json_t *v = NULL;
    *done = 0;
    if (c->skip && bld_dropped(b, e))
        return 1; /* a left-out value is never the root: not done */
    switch (e->kind) {
    case EV_NULL:
        v = json_null();
        break;
    case EV_BOOL:
        v = json_boolean(e->b);
        break;
    case EV_INT:
        v = json_integer((json_int_t)e->i);
        break;
    case EV_DBL:
        v = json_real(e->d);
        break;
    case EV_STR:
        v = json_stringn_nocheck(e->s, e->len);
        break;
    case EV_KEY: {
        if (e->len > sizeof b->key)
            return fail(c, AS_ETOOBIG, NULL, "an object key is longer than 4096 bytes%s", NULL);
        const char *nul = memchr(e->s, '\0', e->len);
        if (nul)
            return bld_key_nul(c, e->s, nul);
        memcpy(b->key, e->s, e->len);
        b->keylen = e->len;
        if (c->skip) {
            int r = b->rule[b->depth - 1]; /* keys only occur in an open object */
            b->drop = r >= 0 && skip_key(c->skip, r, e->s, e->len);
            b->key_rule = skip_rule_for(c->skip, e->s, e->len);
        }
        return 1;
    }
    case EV_MAP_START:
    case EV_ARR_START: {
        json_t *cont = e->kind == EV_MAP_START ? json_object() : json_array();
        if (!bld_add(c, cont))
            return 0;
        if (c->skip) {
            /* an object in an array sits under the array's member name */
            int r = c->skip->root_rule; /* the root object's own rule, if any */
            if (b->depth > 0)
                r = json_is_array(b->stack[b->depth - 1]) ? b->rule[b->depth - 1] : b->key_rule;
            else if (e->kind != EV_MAP_START)
                r = -1;
            b->rule[b->depth] = (signed char)r;
        }
        b->stack[b->depth++] = cont;
        return 1;
    }
    case EV_MAP_END:
    case EV_ARR_END:
        b->depth--;
        *done = b->depth == 0;
        return 1;
    }
    if (!bld_add(c, v))
        return 0;
    *done = b->depth == 0;
    return 1;
}

/* dispatch checks the depth cap and feeds the builder. */
static int dispatch(ctx *c, const ev *e)
{
    if (e->kind == EV_MAP_START || e->kind == EV_ARR_START) {
        if (++c->depth > JSON_MAX_DEPTH)
            return fail(c, AS_ETOOBIG, NULL, "JSON nested deeper than 64 levels%s", NULL);
    } else if (e->kind == EV_MAP_END || e->kind == EV_ARR_END) {
        c->depth--;
    }
    if (c->state != ST_BUILD)
        return fail(c, AS_EPARSE, NULL, "data after the end of the document%s", NULL);
    int done;
    if (!bld_event(c, e, &done))
        return 0;
    if (done) {
        *c->target = c->b.root;
        c->b.root = NULL;
        c->state = ST_DONE;
    }
    return 1;
}

/* ---- yajl callbacks ---------------------------------------------- */

static int cb_null(void *u)
{
    ev e = {.kind = EV_NULL};
    return dispatch(u, &e);
}
static int cb_bool(void *u, int b)
{
    ev e = {.kind = EV_BOOL, .b = b};
    return dispatch(u, &e);
}
static int cb_int(void *u, long long i)
{
    ev e = {.kind = EV_INT, .i = i};
    return dispatch(u, &e);
}
static int cb_dbl(void *u, double d)
{
    ev e = {.kind = EV_DBL, .d = d};
    return dispatch(u, &e);
}
/* cb_utf8 holds yajl's strings and keys to the scanner's strict UTF-8
 * (yajl checks the byte structure only: it takes overlong forms,
 * surrogates and code points past U+10FFFF), in the scanner's words. */
static int cb_utf8(ctx *c, const unsigned char *s, size_t len)
{
    as_err err = json_check_utf8(c->body, c->body_len, yajl_get_bytes_consumed(c->h),
                                 (const char *)s, len, c->err == AS_OK ? c->diag : NULL);
    if (err == AS_OK)
        return 1;
    if (c->err == AS_OK)
        c->err = err;
    return 0;
}
static int cb_str(void *u, const unsigned char *s, size_t len)
{
    if (!cb_utf8(u, s, len))
        return 0;
    ev e = {.kind = EV_STR, .s = (const char *)s, .len = len};
    return dispatch(u, &e);
}
static int cb_key(void *u, const unsigned char *s, size_t len)
{
    if (!cb_utf8(u, s, len))
        return 0;
    ev e = {.kind = EV_KEY, .s = (const char *)s, .len = len};
    return dispatch(u, &e);
}
static int cb_map_start(void *u)
{
    ev e = {.kind = EV_MAP_START};
    return dispatch(u, &e);
}
static int cb_map_end(void *u)
{
    ev e = {.kind = EV_MAP_END};
    return dispatch(u, &e);
}
static int cb_arr_start(void *u)
{
    ev e = {.kind = EV_ARR_START};
    return dispatch(u, &e);
}
static int cb_arr_end(void *u)
{
    ev e = {.kind = EV_ARR_END};
    return dispatch(u, &e);
}

static const yajl_callbacks callbacks = {
    .yajl_null = cb_null,
    .yajl_boolean = cb_bool,
    .yajl_integer = cb_int,
    .yajl_double = cb_dbl,
    .yajl_string = cb_str,
    .yajl_start_map = cb_map_start,
    .yajl_map_key = cb_key,
    .yajl_end_map = cb_map_end,
    .yajl_start_array = cb_arr_start,
    .yajl_end_array = cb_arr_end,
};

/* run parses body with c already set up; returns the first error. */
static as_err run(ctx *c, const char *body, size_t len)
{
    as_err err = AS_OK;
    c->body = body;
    c->body_len = len;
    c->h = yajl_alloc(&callbacks, NULL, c);
    if (!c->h)
        return as_diag_set(c->diag, AS_ENOMEM, NULL, "out of memory");
    yajl_status s = yajl_parse(c->h, (const unsigned char *)body, len);
    if (s == yajl_status_ok)
        s = yajl_complete_parse(c->h);
    if (s == yajl_status_ok)
        goto done;
    if (c->err != AS_OK) {
        err = c->err;
        goto done;
    }
    /* A syntax error: report yajl's message (first line) with the offset. */
    unsigned char *msg = yajl_get_error(c->h, 0, (const unsigned char *)body, len);
    size_t at = yajl_get_bytes_consumed(c->h);
    char text[160] = "invalid JSON";
    if (msg) {
        snprintf(text, sizeof text, "%s", (const char *)msg);
        text[strcspn(text, "\n")] = '\0';
        yajl_free_error(c->h, msg);
    }
    /* yajl refuses a number beyond long long or double as a parse error;
     * the document is valid JSON, so say what is wrong with it */
    if (strstr(text, "overflow"))
        err = as_diag_set(c->diag, AS_EPARSE, "", NUMBER_RANGE, at, text);
    else
        err = as_diag_set(
            c->diag, AS_EPARSE, "",
            "malformed JSON near byte %zu: %s (send a complete, valid UTF-8 JSON document)", at,
            text);
done:
    yajl_free(c->h);
    c->h = NULL;
    bld_reset(&c->b);
    return err;
}

static ctx *ctx_new(pool *p, as_diag *diag)
{
    /* The builder's key buffer makes ctx too big for small thread stacks.
     * Its arrays (4.7 KB, most of it the key buffer) are left unzeroed:
     * the builder writes an entry before reading it (stack and rule below
     * depth, key up to keylen), and a Pod's DOM is built per request. */
    ctx *c = pool_alloc_raw(p, sizeof *c);
    if (!c)
        return NULL;
    memset(c, 0, offsetof(ctx, b));
    c->b.depth = 0;
    c->b.root = NULL;
    c->b.keylen = 0;
    c->b.key_rule = 0;
    c->b.drop = false;
    c->b.dropping = 0;
    c->target = NULL;
    c->p = p;
    c->diag = diag;
    return c;
}

/* See json.h. */
as_err json_check_utf8(const char *body, size_t body_len, size_t consumed, const char *s, size_t n,
                       as_diag *diag)
{
    size_t ok = utf8_prefix(s, n);
    if (ok == n)
        return AS_OK;
    /* an unescaped string is passed in place, an escaped one decoded */
    size_t at = s >= body && s < body + body_len ? (size_t)(s - body) + ok : consumed;
    return as_diag_set(diag, AS_EPARSE, "",
                       "malformed JSON near byte %zu: invalid UTF-8 in string (send a complete, "
                       "valid UTF-8 JSON document)",
                       at);
}

/* ---- building a span the scanner has validated ---------------------- */

/*
 * The Pod of ExtenderArgs has been validated by jscan_value before anyone
 * asks for its DOM, so tokenizing it again with yajl (about 50
 * instructions a byte) only repeats work; any other document costs less
 * validated by jscan_value (about 11 a byte) and then walked than tokenized
 * by yajl. vw walks the validated text, without checking anything, and
 * feeds the same builder events yajl's callbacks would (dispatch): the
 * DOM, the depth cap and the skip rules are the yajl builder's. A member
 * the rules leave out is jumped over, never turned into events (its
 * numbers are still range-checked, as yajl's pass does). Strings decode as
 * the scanner's names do (jscan_unescape: lone surrogates become U+FFFD, as in
 * Go; yajl would write '?'), numbers as yajl's: an integer when there is
 * no fraction or exponent, out of range when its magnitude exceeds
 * LLONG_MAX; a real by strtod, out of range when it overflows.
 */
typedef struct vw {
    ctx *c;
    const char *base, *p, *end;
    char *scratch; /* unescaped strings (ctx pool, made at the first escape) */
} vw;

/* vw_string_end returns the closing quote of the validated string whose
 * content starts at p (end: the span's end, which the quote precedes);
 * *esc is set when the string has an escape. */
static const char *vw_string_end(const char *p, const char *end, bool *esc)
{
    for (;;) {
        p = (const char *)jscan_plain_run((const unsigned char *)p, (const unsigned char *)end,
                                          true);
        while (*p != '"' && *p != '\\')
            p++;
        if (*p == '"')
            return p;
        *esc = true;
        p += 2; /* an escape: its next byte is never the closing quote */
    }
}

static inline void vw_ws(vw *w)
{
    while (w->p < w->end && jscan_is_ws(*w->p))
        w->p++;
}

/* vw_str reads the string at w->p into *e (EV_STR or EV_KEY). */
static int vw_str(vw *w, ev *e)
{
    bool esc = false;
    const char *raw = w->p + 1, *q = vw_string_end(raw, w->end, &esc);
    e->s = raw;
    e->len = (size_t)(q - raw);
    w->p = q + 1;
    if (!esc)
        return 1;
    /* scratch is as long as the span, made at the first escape: an
     * unescaped string is shorter than its raw form, and strings never
     * overlap */
    if (!w->scratch && !(w->scratch = pool_alloc(w->c->p, (size_t)(w->end - w->base))))
        return fail(w->c, AS_ENOMEM, NULL, "out of memory while decoding the request%s", NULL);
    size_t off = (size_t)(raw - w->base);
    e->len = jscan_unescape(raw, e->len, w->scratch + off);
    e->s = w->scratch + off;
    return 1;
}

static int vw_overflow(vw *w, const char *at, const char *what)
{
    ctx *c = w->c;
    if (c->err == AS_OK) {
        c->err = AS_EPARSE;
        as_diag_set(c->diag, AS_EPARSE, "", NUMBER_RANGE, (size_t)(at - w->base), what);
    }
    return 0;
}

/* scan_number reads the validated number at p (its end in *next) into *e:
 * 0, or 1 for an integer beyond long long, 2 for a real beyond double (the
 * DOM builder refuses both, as yajl does), 3 when out of memory. */
static int scan_number(const char *p, const char *end, const char **next, ev *e)
{
    const char *start = p;
    bool neg = *p == '-', real = false;
    if (neg)
        p++;
    unsigned long long mag = 0;
    bool over = false;
    for (; p < end && jscan_is_digit(*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (mag > ((unsigned long long)LLONG_MAX - d) / 10)
            over = true;
        else
            mag = mag * 10 + d;
    }
    while (p < end &&
           (jscan_is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-')) {
        real = true;
        p++;
    }
    *next = p;
    if (!real) {
        if (over)
            return 1;
        e->kind = EV_INT;
        e->i = neg ? -(long long)mag : (long long)mag;
        return 0;
    }
    char num[64];
    size_t n = (size_t)(p - start);
    char *text = n < sizeof num ? num : malloc(n + 1);
    if (!text)
        return 3;
    memcpy(text, start, n);
    text[n] = '\0';
    errno = 0;
    double d = strtod(text, NULL);
    bool huge = (d == HUGE_VAL || d == -HUGE_VAL) && errno == ERANGE;
    if (text != num)
        free(text);
    if (huge)
        return 2;
    e->kind = EV_DBL;
    e->d = d;
    return 0;
}

/* vw_scan_failed reports scan_number's code why (nonzero) for the number
 * at at; 0. */
static int vw_scan_failed(vw *w, const char *at, int why)
{
    if (why == 1)
        return vw_overflow(w, at, "integer overflow");
    if (why == 2)
        return vw_overflow(w, at, "numeric (floating point) overflow");
    if (why == 3)
        return fail(w->c, AS_ENOMEM, NULL, "out of memory while decoding the request%s", NULL);
    return fail(w->c, AS_EINTERNAL, NULL, "decoder failed%s", NULL);
}

/* vw_number reads the number at w->p into *e. */
static int vw_number(vw *w, ev *e)
{
    const char *start = w->p;
    int r = scan_number(w->p, w->end, &w->p, e);
    return r ? vw_scan_failed(w, start, r) : 1;
}

/* skip_ws skips whitespace. */
static inline const char *skip_ws(const char *p, const char *end)
{
    while (p < end && jscan_is_ws(*p))
        p++;
    return p;
}

/* key_refused: the DOM builder refuses an object key with this raw text
 * (longer than its key buffer, or holding an escaped NUL); erring towards
 * refusing is fine for skip_validated's callers. */
static bool key_refused(const char *raw, size_t len, bool esc)
{
    return len > JSON_MAX_KEY_LEN || (esc && jscan_esc_has_nul(raw, len));
}

/* skip_validated returns the end of the validated value at p. Its numbers
 * are still read: one out of range fails (the DOM builder refuses it, as
 * yajl's pass does even inside a member the rules leave out), and with
 * keys so does an object key key_refused refuses. NULL then, with *bad at
 * the offending byte and *why scan_number's code, or 4 for a key (0: the
 * span ended first, which a validated one never does). */
static const char *skip_validated(const char *p, const char *end, bool keys, const char **bad,
                                  int *why)
{
    int depth = 0;
    do {
        *bad = p;
        if (p >= end) {
            *why = 0;
            return NULL;
        }
        char ch = *p;
        if (ch == '"') {
            bool esc = false;
            const char *q = vw_string_end(p + 1, end, &esc);
            if (keys) {
                const char *after = skip_ws(q + 1, end);
                if (after < end && *after == ':' && key_refused(p + 1, (size_t)(q - p - 1), esc)) {
                    *why = 4;
                    return NULL;
                }
            }
            p = q + 1;
        } else if (ch == '{' || ch == '[') {
            depth++;
            p++;
        } else if (ch == '}' || ch == ']') {
            depth--;
            p++;
        } else if (ch == '-' || jscan_is_digit(ch)) {
            ev e;
            if ((*why = scan_number(p, end, &p, &e)))
                return NULL;
        } else if (ch == 't' || ch == 'n') {
            p += 4;
        } else if (ch == 'f') {
            p += 5;
        } else {
            p++; /* whitespace, ',' and ':' */
        }
    } while (depth > 0);
    return p;
}

/* vw_skip jumps over the validated value at w->p (skip_validated, keys
 * not checked: the builder does not look at a left-out member's keys). */
static int vw_skip(vw *w)
{
    const char *bad;
    int why;
    const char *q = skip_validated(w->p, w->end, false, &bad, &why);
    if (!q)
        return vw_scan_failed(w, bad, why);
    w->p = q;
    return 1;
}

/* vw_value feeds the events of the value at w->p. */
static int vw_value(vw *w)
{
    ctx *c = w->c;
    ev e = {.kind = EV_NULL};
    vw_ws(w);
    switch (*w->p) {
    case '{':
    case '[': {
        bool obj = *w->p == '{';
        char close = obj ? '}' : ']';
        e.kind = obj ? EV_MAP_START : EV_ARR_START;
        if (!dispatch(c, &e))
            return 0;
        w->p++;
        vw_ws(w);
        while (*w->p != close) {
            if (*w->p == ',') {
                w->p++;
                vw_ws(w);
            }
            if (obj) {
                ev k = {.kind = EV_KEY};
                if (!vw_str(w, &k) || !dispatch(c, &k))
                    return 0;
                vw_ws(w);
                w->p++; /* ':' */
                vw_ws(w);
                if (c->b.drop) {
                    /* what bld_dropped would do with the value's events */
                    c->b.drop = false;
                    if (!vw_skip(w))
                        return 0;
                    vw_ws(w);
                    continue;
                }
            }
            if (!vw_value(w))
                return 0;
            vw_ws(w);
        }
        w->p++;
        e.kind = obj ? EV_MAP_END : EV_ARR_END;
        return dispatch(c, &e);
    }
    case '"':
        e.kind = EV_STR;
        if (!vw_str(w, &e))
            return 0;
        break;
    case 't':
        e.kind = EV_BOOL;
        e.b = 1;
        w->p += 4;
        break;
    case 'f':
        e.kind = EV_BOOL;
        e.b = 0;
        w->p += 5;
        break;
    case 'n':
        w->p += 4;
        break;
    default:
        if (!vw_number(w, &e))
            return 0;
        break;
    }
    return dispatch(c, &e);
}

/* build_doc builds body[0..len) into *out with the builder: by a walk
 * (walk: body is one JSON value, with surrounding whitespace, that jscan_value
 * has validated; errors: numbers out of range (AS_EPARSE), the builder's
 * caps and allocation) or through yajl's callbacks (run). */
static as_err build_doc(const char *body, size_t len, const json_skip *skip, bool walk,
                        json_t **out, as_diag *diag)
{
    *out = NULL;
    /* the ctx, and the walk's scratch as long as the document (which the
     * caller has capped) */
    pool *p = pool_new(len + ((size_t)1 << 20));
    if (!p)
        return as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
    as_err err = AS_ENOMEM;
    ctx *c = ctx_new(p, diag);
    if (!c) {
        as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    json_t *root = NULL;
    skip_index sx;
    if (skip && skip[0].parent) {
        skip_index_init(&sx, skip);
        c->skip = &sx;
    }
    c->b.key_rule = -1;
    c->state = ST_BUILD;
    c->target = &root;
    if (walk) {
        vw w = {c, body, body, body + len, NULL};
        err = AS_OK;
        if (!vw_value(&w))
            err =
                c->err != AS_OK ? c->err : as_diag_set(diag, AS_EINTERNAL, NULL, "builder failed");
        bld_reset(&c->b);
    } else {
        err = run(c, body, len);
    }
    if (err) {
        if (root)
            json_decref(root);
        goto done;
    }
    *out = root;
done:
    pool_free(p);
    return err;
}

/* ---- projecting a validated span through the skip rules ------------ */

/* A projection in progress: the output and the rules. */
typedef struct proj {
    const skip_index *x;
    const char *end;
    char *o;
    size_t n, cap;
} proj;

static bool proj_put(proj *j, const char *s, size_t len)
{
    if (len > j->cap - j->n)
        return false;
    memcpy(j->o + j->n, s, len);
    j->n += len;
    return true;
}

/* proj_value projects the validated value at *pp (whitespace before it
 * skipped), a container sitting under rule r as the builder places it
 * (bld_event: an object's keys are dropped by its rule; a member's
 * container takes its key's rule; an array's elements, the array's).
 * false when the output is full or the value holds what the builder
 * refuses, or what the projection does not follow (an escaped key, whose
 * rules compare its unescaped text). */
static bool proj_value(proj *j, const char **pp, int r, int depth)
{
    const char *p = skip_ws(*pp, j->end), *end = j->end;
    if (p >= end)
        return false;
    char ch = *p;
    if (ch == '{' || ch == '[') {
        if (depth >= JSON_MAX_DEPTH)
            return false;
        bool obj = ch == '{';
        char close = obj ? '}' : ']';
        if (!proj_put(j, &ch, 1))
            return false;
        p = skip_ws(p + 1, end);
        bool first = true;
        while (p < end && *p != close) {
            if (*p == ',')
                p = skip_ws(p + 1, end);
            int vr = r; /* an array's elements sit under its rule */
            const char *kstart = p;
            if (obj) {
                bool esc = false;
                const char *q = vw_string_end(p + 1, end, &esc);
                size_t klen = (size_t)(q - p - 1);
                if (esc || klen > JSON_MAX_KEY_LEN)
                    return false;
                p = skip_ws(q + 1, end);
                p = skip_ws(p + 1, end); /* past ':' */
                if (j->x && r >= 0 && skip_key(j->x, r, kstart + 1, klen)) {
                    const char *bad;
                    int why;
                    if (!(p = skip_validated(p, end, false, &bad, &why)))
                        return false;
                    p = skip_ws(p, end);
                    continue;
                }
                vr = j->x ? skip_rule_for(j->x, kstart + 1, klen) : -1;
                if ((!first && !proj_put(j, ",", 1)) || !proj_put(j, kstart, klen + 2) ||
                    !proj_put(j, ":", 1))
                    return false;
            } else if (!first && !proj_put(j, ",", 1)) {
                return false;
            }
            first = false;
            if (!proj_value(j, &p, vr, depth + 1))
                return false;
            p = skip_ws(p, end);
        }
        if (p >= end || !proj_put(j, &close, 1))
            return false;
        *pp = p + 1;
        return true;
    }
    const char *q;
    if (ch == '"') {
        bool esc = false;
        q = vw_string_end(p + 1, end, &esc) + 1;
    } else if (ch == '-' || jscan_is_digit(ch)) {
        ev e;
        if (scan_number(p, end, &q, &e))
            return false;
    } else {
        q = p + (ch == 'f' ? 5 : 4); /* true, null, false */
    }
    if (q > end || !proj_put(j, p, (size_t)(q - p)))
        return false;
    *pp = q;
    return true;
}

/* See json.h. */
bool json_project(const char *span, size_t len, const json_skip *skip, const char *parent,
                  char *out, size_t cap, size_t *outlen)
{
    skip_index sx;
    proj j = {NULL, span + len, out, 0, cap};
    int r = -1;
    if (skip && skip[0].parent) {
        skip_index_init(&sx, skip);
        j.x = &sx;
        r = parent && parent[0] ? skip_rule_for(&sx, parent, strlen(parent)) : sx.root_rule;
    }
    const char *p = skip_ws(span, span + len);
    if ((!parent || !parent[0]) && p < span + len && *p == '[')
        r = -1; /* the root's rule is an object's (bld_event) */
    if (!proj_value(&j, &p, r, 0) || skip_ws(p, span + len) != span + len)
        return false;
    *outlen = j.n;
    return true;
}

/* ---- iterating a validated object without a DOM -------------------- */

/* See json.h. */
bool json_iter_begin(json_iter *it, const char *span, size_t len)
{
    const char *end = span + len;
    const char *p = skip_ws(span, end);
    it->p = p + 1;
    it->end = end;
    it->known = NULL;
    it->known_end = NULL;
    return p < end && *p == '{';
}

/* See json.h. */
int json_iter_next(json_iter *it, const char **key, size_t *klen, bool *kesc, json_value *v)
{
    const char *p = skip_ws(it->p, it->end), *end = it->end;
    if (p < end && *p == ',')
        p = skip_ws(p + 1, end);
    if (p >= end || *p != '"')
        return 0; /* '}' */
    bool esc = false;
    const char *q = vw_string_end(p + 1, end, &esc);
    *key = p + 1;
    *klen = (size_t)(q - p - 1);
    *kesc = esc;
    if (key_refused(*key, *klen, esc))
        return -1;
    p = skip_ws(q + 1, end);
    p = skip_ws(p + 1, end); /* past ':' */
    v->type = p < end ? *p : '}';
    v->esc = false;
    if (v->type == '"') {
        q = vw_string_end(p + 1, end, &v->esc);
        v->s = p + 1;
        v->len = (size_t)(q - p - 1);
        it->p = q + 1;
        return 1;
    }
    if (v->type == '-' || jscan_is_digit(v->type))
        v->type = '0';
    /* a value whose end the caller knows (the Pod's spec) is not walked */
    const char *bad;
    int why;
    q = p == it->known ? it->known_end : skip_validated(p, end, true, &bad, &why);
    if (!q)
        return -1;
    v->s = p;
    v->len = (size_t)(q - p);
    it->p = q;
    return 1;
}

/*
 * parse_walk builds body (validated by the scanner unless `validated`
 * says it already was) by walking it: the scanner's validation plus the
 * walk cost about half of yajl's pass on a 5 KB pod (bench_extender), and
 * members the rules drop are jumped over. Whatever either of them rejects is
 * handed to yajl, so that errors keep yajl's words and offsets.
 */
static as_err parse_walk(const char *body, size_t len, const json_skip *skip, bool validated,
                         json_t **out, as_diag *diag)
{
    /* yajl's pass applies the scanner's strict UTF-8 (cb_utf8), so what
     * it builds here is never text the scanner refused for its bytes */
    if (!validated && !jscan_document(body, len))
        return build_doc(body, len, skip, false, out, diag);
    as_diag d;
    memset(&d, 0, sizeof d);
    as_err err = build_doc(body, len, skip, true, out, &d);
    if (err == AS_EPARSE)
        return build_doc(body, len, skip, false, out, diag);
    if (err)
        *diag = d;
    return err;
}

/* See json.h. */
as_err json_parse_skip(const char *body, size_t len, const json_skip *skip, json_t **out,
                       as_diag *diag)
{
    return parse_walk(body, len, skip, false, out, diag);
}

/* See json.h. */
as_err json_parse_validated(const char *body, size_t len, const json_skip *skip, json_t **out,
                            as_diag *diag)
{
    return parse_walk(body, len, skip, true, out, diag);
}

/* See json.h. */
as_err json_parse_ref(const char *body, size_t len, const json_skip *skip, json_t **out,
                      as_diag *diag)
{
    return build_doc(body, len, skip, false, out, diag);
}

/* See json.h. */
as_err json_parse(const char *body, size_t len, json_t **out, as_diag *diag)
{
    return json_parse_skip(body, len, NULL, out, diag);
}

/* See json.h. */
json_t *json_get(const json_t *obj, const char *key)
{
    if (!json_is_object(obj))
        return NULL;
    json_t *v = json_object_get(obj, key);
    if (v)
        return v;
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)obj, k, val)
    {
        if (strcasecmp(k, key) == 0)
            return val;
    }
    return NULL;
}

/*
 * extargs.c - streaming decoders of the extender request bodies, and the
 * JSON -> jansson builder every other document goes through.
 *
 * ExtenderArgs: a validating scanner (sc_*) copies NodeNames and notes
 * Node item and Pod spans without a DOM. DOMs (the Pod; whole documents:
 * binding and preemption args, watch events, list pages) come from one
 * builder fed with events (bld_*, dispatch): by a walk of text the scanner
 * has validated (vw_*), or, for what the scanner or the walk rejects, by
 * yajl's callbacks, whose error messages are the ones reported.
 */
#include "agentsched/api/extargs.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yajl/yajl_parse.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

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
    json_t *stack[EXTARGS_MAX_DEPTH + 2];
    /* skip rules (extargs_skip): per open container, the rule whose
     * parent it sits under, -1 for none */
    signed char rule[EXTARGS_MAX_DEPTH + 2];
    int depth;
    json_t *root;
    char key[EXTARGS_MAX_KEY_LEN];
    size_t keylen;
    int key_rule; /* the rule the last key is the parent of, or -1 */
    bool drop;    /* the next value is a member the rules leave out */
    int dropping; /* > 0: inside a left-out value, this many levels deep */
} bld;

/* An extargs_skip table with its names' lengths, built per document. */
#define SKIP_MAX_RULES 16
typedef struct skip_index {
    const extargs_skip *rules;
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
static void skip_index_init(skip_index *x, const extargs_skip *sk)
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
        if (++c->depth > EXTARGS_MAX_DEPTH)
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
    as_err err = extargs_string_utf8(c->body, c->body_len, yajl_get_bytes_consumed(c->h),
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
    err = as_diag_set(
        c->diag, AS_EPARSE, "",
        "malformed JSON near byte %zu: %s (send a complete, valid UTF-8 JSON document)", at, text);
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

/*
 * dedupe compacts n elements of `stride` bytes, each starting with a
 * sched_name, keeping the first occurrence of every name. Returns the new
 * count, or (size_t)-1 when out of memory. The table holds kept elements'
 * positions (+1; 4 bytes an entry, so the one cleared per request stays
 * small); a probe compares the kept element's stored hash before its name.
 */
static size_t dedupe(pool *p, void *base, size_t n, size_t stride)
{
    if (n < 2)
        return n;
    size_t size = 16;
    while (size < n * 2)
        size <<= 1;
    uint32_t *tab = pool_alloc(p, size * sizeof *tab); /* kept index + 1; 0 = empty */
    if (!tab)
        return (size_t)-1;
    char *b = base;
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        const sched_name *nm = (const sched_name *)(b + i * stride);
        uint64_t hv = sched_name_hash(nm);
        size_t h = (size_t)hv & (size - 1);
        bool dup = false;
        while (tab[h]) {
            const sched_name *o = (const sched_name *)(b + (tab[h] - 1) * stride);
            if (sched_name_hash(o) == hv && o->len == nm->len &&
                memcmp(o->s, nm->s, nm->len) == 0) {
                dup = true;
                break;
            }
            h = (h + 1) & (size - 1);
        }
        if (dup)
            continue;
        if (out != i)
            memmove(b + out * stride, b + i * stride, stride);
        tab[h] = (uint32_t)out + 1;
        out++;
    }
    return out;
}

/* ---- ExtenderArgs: a validating scanner ---------------------------- */

/*
 * ExtenderArgs is decoded by a hand-written scanner rather than through
 * yajl events: a full-Nodes request is mostly Node objects whose content
 * agentsched does not read (only metadata.name and the byte span to echo),
 * and skipping them with a tight validating loop is several times faster
 * than tokenizing them (yajl alone takes ~4 ms for 500 nodes / 900 KB).
 * Every byte is still validated as JSON (strings: escapes, control
 * characters, UTF-8; numbers; literals; structure; depth), so a span we
 * echo is always valid JSON. The Pod's span is then built into a DOM by
 * walking it again, unchecked, into the yajl builder's events
 * (build_doc, which extargs_parse_json uses for every document).
 */
typedef struct sc {
    const char *base;
    const char *p;
    const char *end;
    pool *pool;
    as_diag *diag;
    as_err err;
    int depth;
    size_t cap_names;
    size_t cap_nodes;
    char *arena;       /* node names are carved from here (one pool block per */
    size_t arena_left; /* many names) */
    size_t arena_next; /* size of the next arena block */
    unsigned flags;    /* EXTARGS_LAZY_POD */
    bool in_pod;       /* scanning the Pod: the builder checks its keys */
} sc;

static int sc_syntax(sc *s, const char *what)
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

static int sc_fail_at(sc *s, as_err err, const char *tmpl, size_t idx, const char *fmt,
                      const char *detail)
{
    if (s->err == AS_OK) {
        char field[96];
        snprintf(field, sizeof field, tmpl, idx);
        s->err = err;
        as_diag_set(s->diag, err, field, fmt, detail ? detail : "");
    }
    return 0;
}

/* JSON whitespace; every other byte the scanners stop at is above ' ', so
 * one compare settles the common case (runs before every token). */
static inline bool is_ws(char c)
{
    return (unsigned char)c <= ' ' && (c == ' ' || c == '\n' || c == '\r' || c == '\t');
}

static inline void sc_ws(sc *s)
{
    while (s->p < s->end && is_ws(*s->p))
        s->p++;
}

/* sc_peek_type names the JSON type of the value at s->p (for messages). */
static const char *sc_peek_type(const sc *s)
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

static int sc_enter(sc *s)
{
    if (++s->depth > EXTARGS_MAX_DEPTH) {
        if (s->err == AS_OK) {
            s->err = AS_ETOOBIG;
            as_diag_set(s->diag, AS_ETOOBIG, "", "JSON nested deeper than 64 levels");
        }
        return 0;
    }
    s->p++;
    return 1;
}

/* utf8_len validates the multi-byte sequence at p (p[0] >= 0x80) and
 * returns its length, 0 when invalid (overlong, surrogate, > U+10FFFF). */
static size_t utf8_len(const unsigned char *p, const unsigned char *end)
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

/* See extargs.h. */
size_t extargs_utf8_prefix(const char *s, size_t len)
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
        size_t n = utf8_len(p, end);
        if (!n)
            return (size_t)(p - (const unsigned char *)s);
        p += n;
    }
}

/* See extargs.h. */
as_err extargs_string_utf8(const char *body, size_t body_len, size_t consumed, const char *s,
                           size_t n, as_diag *diag)
{
    size_t ok = extargs_utf8_prefix(s, n);
    if (ok == n)
        return AS_OK;
    /* an unescaped string is passed in place, an escaped one decoded */
    size_t at = s >= body && s < body + body_len ? (size_t)(s - body) + ok : consumed;
    return as_diag_set(diag, AS_EPARSE, "",
                       "malformed JSON near byte %zu: invalid UTF-8 in string (send a complete, "
                       "valid UTF-8 JSON document)",
                       at);
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

/*
 * plain_run returns the first byte at or after p that a string scan must
 * look at (a quote, a backslash, a control character or a non-ASCII byte),
 * or, when none comes first, where fewer than 8 bytes are left: every byte
 * before the result is plain, and the caller finishes byte by byte from
 * there. Sixteen bytes a step with SSE2 (baseline on x86-64), then eight.
 * quote_only: look for quotes and backslashes only (the walk over text the
 * scanner already validated).
 */
static inline const unsigned char *plain_run(const unsigned char *p, const unsigned char *end,
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

/* sc_string_any is sc_string for every string (escapes, UTF-8, errors). */
static int sc_string_any(sc *s, const char **raw, size_t *len, bool *esc)
{
    const unsigned char *p = (const unsigned char *)s->p + 1;
    const unsigned char *end = (const unsigned char *)s->end;
    *raw = (const char *)p;
    *esc = false;
    for (;;) {
        p = plain_run(p, end, false);
        while (p < end && *p != '"' && *p != '\\' && *p >= 0x20 && *p < 0x80)
            p++;
        if (p >= end) {
            s->p = (const char *)p;
            return sc_syntax(s, "unterminated string");
        }
        unsigned c = *p;
        if (c == '"')
            break;
        if (c == '\\') {
            *esc = true;
            if (p + 1 >= end) {
                s->p = (const char *)p;
                return sc_syntax(s, "unterminated string");
            }
            unsigned e = p[1];
            if (e == 'u') {
                if (end - p < 6 || hexval(p[2]) < 0 || hexval(p[3]) < 0 || hexval(p[4]) < 0 ||
                    hexval(p[5]) < 0) {
                    s->p = (const char *)p;
                    return sc_syntax(s, "invalid \\u escape");
                }
                p += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' ||
                       e == 'r' || e == 't') {
                p += 2;
            } else {
                s->p = (const char *)p;
                return sc_syntax(s, "invalid escape in string");
            }
            continue;
        }
        if (c < 0x20) {
            s->p = (const char *)p;
            return sc_syntax(s, "control character in string");
        }
        size_t n = utf8_len(p, end);
        if (!n) {
            s->p = (const char *)p;
            return sc_syntax(s, "invalid UTF-8 in string");
        }
        p += n;
    }
    *len = (size_t)(p - (const unsigned char *)*raw);
    s->p = (const char *)p + 1;
    return 1;
}

/* sc_string scans the string at s->p (a quote): *raw and *len get the bytes
 * between the quotes, *esc whether any escape occurs. Most strings (keys,
 * names) are printable ASCII: they are finished here by plain_run, and
 * everything else goes to sc_string_any from the start. */
static inline int sc_string(sc *s, const char **raw, size_t *len, bool *esc)
{
    const unsigned char *start = (const unsigned char *)s->p + 1;
    const unsigned char *end = (const unsigned char *)s->end;
    /* every byte before p is plain: a quote at p closes the string */
    const unsigned char *p = plain_run(start, end, false);
    if (p >= end || *p != '"')
        return sc_string_any(s, raw, len, esc);
    *raw = (const char *)start;
    *esc = false;
    *len = (size_t)(p - start);
    s->p = (const char *)p + 1;
    return 1;
}

static size_t put_utf8(char *o, uint32_t cp)
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

static uint32_t hex4(const char *p)
{
    return (uint32_t)(hexval((unsigned char)p[0]) << 12 | hexval((unsigned char)p[1]) << 8 |
                      hexval((unsigned char)p[2]) << 4 | hexval((unsigned char)p[3]));
}

/* unescape decodes raw[0..n) (already validated by sc_string) into out,
 * which has room for n bytes (decoding never grows a string). Lone
 * surrogates become U+FFFD, as Go's decoder does. */
static size_t unescape(const char *raw, size_t n, char *out)
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
            o += put_utf8(out + o, cp);
            break;
        }
        default:
            out[o++] = e;
            break; /* " \ / */
        }
    }
    return o;
}

static bool sc_key_is(const char *raw, size_t len, bool esc, const char *name)
{
    size_t n = strlen(name);
    if (esc) {
        char buf[32];
        if (len > sizeof buf)
            return false;
        len = unescape(raw, len, buf);
        return len == n && strncasecmp(buf, name, n) == 0;
    }
    return len == n && strncasecmp(raw, name, n) == 0;
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int sc_number(sc *s)
{
    const char *p = s->p, *end = s->end;
    if (p < end && *p == '-')
        p++;
    if (p < end && *p == '0') {
        p++;
    } else if (p < end && *p >= '1' && *p <= '9') {
        while (p < end && is_digit(*p))
            p++;
    } else {
        s->p = p;
        return sc_syntax(s, "invalid value");
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p)) {
            s->p = p;
            return sc_syntax(s, "invalid number");
        }
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !is_digit(*p)) {
            s->p = p;
            return sc_syntax(s, "invalid number");
        }
        while (p < end && is_digit(*p))
            p++;
    }
    s->p = p;
    return 1;
}

static int sc_literal(sc *s, const char *lit)
{
    size_t n = strlen(lit);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, lit, n) != 0)
        return sc_syntax(s, "invalid literal");
    s->p += n;
    return 1;
}

static int sc_value(sc *s);

/* esc_has_nul reports whether the validated string text raw[0..len)
 * decodes to a NUL (a \u0000 escape). */
static bool esc_has_nul(const char *raw, size_t len)
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

/* sc_key_nul fails the scan for a key holding NUL outside the Pod: no
 * reader of ExtenderArgs takes one (a C string would cut it short), and no
 * JSON reader of the node items echoed back need take one either. */
static int sc_key_nul(sc *s, const char *key)
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

/* sc_next_key advances to the next member of the object being read:
 * 1 with the key scanned and s->p at its value, 0 at the closing brace
 * (consumed), -1 on error. */
static int sc_next_key(sc *s, bool *first, const char **k, size_t *klen, bool *kesc)
{
    sc_ws(s);
    if (s->p >= s->end)
        return sc_syntax(s, "unexpected end of input in an object") - 1;
    if (*s->p == '}') {
        s->p++;
        s->depth--;
        return 0;
    }
    if (!*first) {
        if (*s->p != ',')
            return sc_syntax(s, "expected ',' or '}'") - 1;
        s->p++;
        sc_ws(s);
    }
    *first = false;
    if (s->p >= s->end || *s->p != '"')
        return sc_syntax(s, "expected a string key") - 1;
    if (!sc_string(s, k, klen, kesc))
        return -1;
    /* only an escape spells NUL; the Pod's keys are the builder's to
     * refuse, with their paths (bld_key_nul) */
    if (*kesc && !s->in_pod && esc_has_nul(*k, *klen))
        return sc_key_nul(s, *k) - 1;
    sc_ws(s);
    if (s->p >= s->end || *s->p != ':')
        return sc_syntax(s, "expected ':'") - 1;
    s->p++;
    sc_ws(s);
    if (s->p >= s->end)
        return sc_syntax(s, "unexpected end of input") - 1;
    return 1;
}

/* sc_next_elem: 1 with s->p at the next element, 0 at ']' (consumed), -1. */
static int sc_next_elem_slow(sc *s, bool *first)
{
    sc_ws(s);
    if (s->p >= s->end)
        return sc_syntax(s, "unexpected end of input in an array") - 1;
    if (*s->p == ']') {
        s->p++;
        s->depth--;
        return 0;
    }
    if (!*first) {
        if (*s->p != ',')
            return sc_syntax(s, "expected ',' or ']'") - 1;
        s->p++;
        sc_ws(s);
        if (s->p >= s->end)
            return sc_syntax(s, "unexpected end of input in an array") - 1;
        if (*s->p == ']')
            return sc_syntax(s, "trailing comma in an array") - 1;
    }
    *first = false;
    return 1;
}

/* sc_next_elem steps to the next element of an array (1), past its ']'
 * (0), or fails (-1). Inline for the compact ",<value>" between elements
 * (what every client sends: kube-scheduler's NodeNames are 500 of them);
 * whitespace, the first element, the end and every error take the slow
 * path. */
static inline int sc_next_elem(sc *s, bool *first)
{
    if (!*first && s->end - s->p >= 2 && s->p[0] == ',' && (unsigned char)s->p[1] > ' ' &&
        s->p[1] != ']') {
        s->p++;
        return 1;
    }
    return sc_next_elem_slow(s, first);
}

static int sc_value(sc *s)
{
    sc_ws(s);
    if (s->p >= s->end)
        return sc_syntax(s, "unexpected end of input");
    switch (*s->p) {
    case '{': {
        if (!sc_enter(s))
            return 0;
        bool first = true;
        const char *k;
        size_t kl;
        bool ke;
        int r;
        while ((r = sc_next_key(s, &first, &k, &kl, &ke)) == 1)
            if (!sc_value(s))
                return 0;
        return r == 0;
    }
    case '[': {
        if (!sc_enter(s))
            return 0;
        bool first = true;
        int r;
        while ((r = sc_next_elem(s, &first)) == 1)
            if (!sc_value(s))
                return 0;
        return r == 0;
    }
    case '"': {
        const char *raw;
        size_t len;
        bool esc;
        return sc_string(s, &raw, &len, &esc);
    }
    case 't':
        return sc_literal(s, "true");
    case 'f':
        return sc_literal(s, "false");
    case 'n':
        return sc_literal(s, "null");
    default:
        return sc_number(s);
    }
}

/* ---- building a span the scanner has validated ---------------------- */

/*
 * The Pod of ExtenderArgs has been validated by sc_value before anyone
 * asks for its DOM, so tokenizing it again with yajl (about 50
 * instructions a byte) only repeats work; any other document costs less
 * validated by sc_value (about 11 a byte) and then walked than tokenized
 * by yajl. vw walks the validated text, without checking anything, and
 * feeds the same builder events yajl's callbacks would (dispatch): the
 * DOM, the depth cap and the skip rules are the yajl builder's. A member
 * the rules leave out is jumped over, never turned into events (its
 * numbers are still range-checked, as yajl's pass does). Strings decode as
 * the scanner's names do (unescape: lone surrogates become U+FFFD, as in
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
        p = (const char *)plain_run((const unsigned char *)p, (const unsigned char *)end, true);
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
    while (w->p < w->end && is_ws(*w->p))
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
    e->len = unescape(raw, e->len, w->scratch + off);
    e->s = w->scratch + off;
    return 1;
}

static int vw_overflow(vw *w, const char *at, const char *what)
{
    ctx *c = w->c;
    if (c->err == AS_OK) {
        c->err = AS_EPARSE;
        as_diag_set(c->diag, AS_EPARSE, "",
                    "malformed JSON near byte %zu: %s (send a complete, valid UTF-8 JSON "
                    "document)",
                    (size_t)(at - w->base), what);
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
    for (; p < end && is_digit(*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (mag > ((unsigned long long)LLONG_MAX - d) / 10)
            over = true;
        else
            mag = mag * 10 + d;
    }
    while (p < end &&
           (is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' || *p == '-')) {
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
    while (p < end && is_ws(*p))
        p++;
    return p;
}

/* key_refused: the DOM builder refuses an object key with this raw text
 * (longer than its key buffer, or holding an escaped NUL); erring towards
 * refusing is fine for skip_validated's callers. */
static bool key_refused(const char *raw, size_t len, bool esc)
{
    return len > EXTARGS_MAX_KEY_LEN || (esc && esc_has_nul(raw, len));
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
        } else if (ch == '-' || is_digit(ch)) {
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
 * (walk: body is one JSON value, with surrounding whitespace, that sc_value
 * has validated; errors: numbers out of range (AS_EPARSE), the builder's
 * caps and allocation) or through yajl's callbacks (run). */
static as_err build_doc(const char *body, size_t len, const extargs_skip *skip, bool walk,
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

static int sc_grow_slow(sc *s, void **arr, size_t *cap, size_t n, size_t elem, const char *tmpl)
{
    if (n >= EXTARGS_MAX_NAMES)
        return sc_fail_at(s, AS_ETOOBIG, tmpl, n, "more than 65536 nodes in one request%s", NULL);
    size_t ncap = *cap ? *cap * 2 : 64;
    void *na = pool_alloc_raw(s->pool, ncap * elem); /* filled as it grows */
    if (!na)
        return sc_fail_at(s, AS_ENOMEM, tmpl, n, "request too large for its memory budget%s", NULL);
    if (n)
        memcpy(na, *arr, n * elem);
    *arr = na;
    *cap = ncap;
    return 1;
}

/* sc_grow makes room for element n of *arr (capacity *cap, elements of
 * elem bytes), doubling it in the pool when full; 0 with s failed. Inline:
 * the check runs once per element, the growth a handful of times. */
static inline int sc_grow(sc *s, void **arr, size_t *cap, size_t n, size_t elem, const char *tmpl)
{
    return n < *cap || sc_grow_slow(s, arr, cap, n, elem, tmpl);
}

/* sc_name_alloc returns n bytes for a name that had escapes (the others
 * stay in the body): from the arena, which grows in blocks of 256 doubling
 * to 4096 bytes, so 500 such names cost a handful of pool allocations; an
 * exact allocation when a block does not fit the pool's budget. */
static char *sc_name_alloc(sc *s, size_t n)
{
    if (n > s->arena_left) {
        size_t want = s->arena_next ? s->arena_next : 256;
        char *blk = n <= want / 4 ? pool_alloc_raw(s->pool, want) : NULL;
        if (!blk)
            return pool_alloc_raw(s->pool, n);
        s->arena = blk;
        s->arena_left = want;
        s->arena_next = want < 4096 ? want * 2 : 4096;
    }
    char *out = s->arena;
    s->arena += n;
    s->arena_left -= n;
    return out;
}

/* sc_name_escaped unescapes a name that had escapes (raw[0..*len)) into
 * the pool: *name and *len get the result. The rare path of sc_name. */
static int sc_name_escaped(sc *s, const char *raw, const char **name, size_t *len, const char *tmpl,
                           size_t idx)
{
    char *out = sc_name_alloc(s, *len + 1);
    if (!out)
        return sc_fail_at(s, AS_ENOMEM, tmpl, idx, "request too large for its memory budget%s",
                          NULL);
    *len = unescape(raw, *len, out);
    if (memchr(out, '\0', *len))
        return sc_fail_at(s, AS_EINVAL, tmpl, idx, "a node name cannot contain NUL characters%s",
                          NULL);
    out[*len] = '\0';
    *name = out;
    return 1;
}

/* sc_name reads a string value (s->p at '"') as a node name: pointing into
 * the body when it has no escapes (the body outlives the args), else
 * unescaped into the pool. Inline: it runs once per name of the request. */
static inline int sc_name(sc *s, sched_name *dst, const char *tmpl, size_t idx)
{
    const char *raw;
    size_t len;
    bool esc;
    if (!sc_string(s, &raw, &len, &esc))
        return 0;
    const char *name = raw;
    if (esc && !sc_name_escaped(s, raw, &name, &len, tmpl, idx))
        return 0;
    if (len > EXTARGS_MAX_NAME_LEN)
        return sc_fail_at(s, AS_EINVAL, tmpl, idx,
                          "a node name is at most 253 bytes (a DNS subdomain)%s", NULL);
    dst->s = name;
    dst->len = len;
    /* once, while the bytes are in cache: the dedupe, the node lookup and
     * the extender's memo all key on it */
    dst->hash = cache_name_hash(name, len);
    return 1;
}

static as_err parse_walk(const char *body, size_t len, const extargs_skip *skip, bool validated,
                         json_t **out, as_diag *diag);

/* pod_field puts "Pod" before the field of an error inside the Pod's DOM
 * ("spec.nodeSelector" -> "Pod.spec.nodeSelector"; a key of the Pod's own
 * object, field "", -> "Pod"); errors of the whole span (syntax, caps:
 * not AS_EINVAL) keep theirs. */
static void pod_field(as_err err, as_diag *diag)
{
    if (diag && (err == AS_EINVAL || diag->field[0]))
        as_diag_prefix_field(diag, "Pod");
}

static int sc_pod(sc *s, extargs_args *a)
{
    if (a->pod) {
        json_decref(a->pod);
        a->pod = NULL;
    }
    a->pod_raw = NULL;
    a->pod_raw_len = 0;
    a->pod_spec_raw = NULL;
    a->pod_spec_len = 0;
    if (*s->p == 'n')
        return sc_literal(s, "null");
    if (*s->p != '{')
        return sc_fail_at(s, AS_EINVAL, "Pod", 0, "Pod must be a v1.Pod object, not %s",
                          sc_peek_type(s));
    const char *start = s->p;
    int depth = s->depth;
    s->in_pod = true;
    /* sc_value's object loop, noting the top-level spec's span on the way */
    if (!sc_enter(s))
        return 0;
    bool first = true, plain = true;
    const char *k;
    size_t kl;
    bool ke;
    int r;
    while ((r = sc_next_key(s, &first, &k, &kl, &ke)) == 1) {
        const char *v = s->p;
        if (!sc_value(s))
            return 0;
        plain = plain && !ke;
        if (!ke && kl == 4 && memcmp(k, "spec", 4) == 0) {
            a->pod_spec_raw = *v == '{' ? v : NULL;
            a->pod_spec_len = *v == '{' ? (size_t)(s->p - v) : 0;
        }
    }
    if (r != 0)
        return 0;
    if (!plain) {
        /* an escaped key may spell "spec" too: no span to trust */
        a->pod_spec_raw = NULL;
        a->pod_spec_len = 0;
    }
    s->in_pod = false;
    s->depth = depth;
    a->pod_raw = start;
    a->pod_raw_len = (size_t)(s->p - start);
    if (s->flags & EXTARGS_LAZY_POD)
        return 1; /* validated JSON; the DOM is built on demand */
    as_err err = parse_walk(start, (size_t)(s->p - start), NULL, true, &a->pod, s->diag);
    if (err) {
        pod_field(err, s->diag);
        s->err = err;
        return 0;
    }
    return 1;
}

static int sc_node_names(sc *s, extargs_args *a)
{
    a->nnames = 0;
    a->has_node_names = false;
    if (*s->p == 'n')
        return sc_literal(s, "null");
    if (*s->p != '[')
        return sc_fail_at(s, AS_EINVAL, "NodeNames", 0,
                          "NodeNames must be an array of node names, not %s", sc_peek_type(s));
    a->has_node_names = true;
    if (!sc_enter(s))
        return 0;
    if (!a->names) {
        /* Sized once for what the rest of the body can hold at 12 bytes a
         * name (kube-scheduler's node names are longer), up to 8192,
         * instead of doubling from 64 and copying at every step; a denser
         * or longer list grows on from there. */
        size_t guess = (size_t)(s->end - s->p) / 12;
        guess = guess < 64 ? 64 : guess > 8192 ? 8192 : guess;
        a->names = pool_alloc_raw(s->pool, guess * sizeof *a->names);
        s->cap_names = a->names ? guess : 0;
    }
    bool first = true;
    int r;
    while ((r = sc_next_elem(s, &first)) == 1) {
        if (*s->p != '"')
            return sc_fail_at(s, AS_EINVAL, "NodeNames[%zu]", a->nnames,
                              "every NodeNames entry must be a string, not %s", sc_peek_type(s));
        /* The compact run every client sends, "a","b",...: plain names
         * (sc_string's fast case) one comma apart are read here with the
         * scan position in a register. Anything else (escapes, a name too
         * long, whitespace, the end of the array, a full names array) goes
         * back to the general reader below, which reports what is wrong. */
        const char *p = s->p, *end = s->end;
        size_t n = a->nnames;
        bool at_elem = true; /* p is at an element's opening quote */
        while (n < s->cap_names) {
            const unsigned char *q =
                plain_run((const unsigned char *)p + 1, (const unsigned char *)end, false);
            size_t len = (size_t)((const char *)q - p - 1);
            if (q >= (const unsigned char *)end || *q != '"' || len > EXTARGS_MAX_NAME_LEN)
                break;
            a->names[n++] = (sched_name){p + 1, len, cache_name_hash(p + 1, len)};
            p = (const char *)q + 1;
            at_elem = end - p >= 2 && p[0] == ',' && p[1] == '"';
            if (!at_elem)
                break;
            p++;
        }
        s->p = p;
        a->nnames = n;
        if (!at_elem)
            continue; /* the run ended after a name: sc_next_elem goes on */
        if (!sc_grow(s, (void **)&a->names, &s->cap_names, a->nnames, sizeof *a->names,
                     "NodeNames[%zu]"))
            return 0;
        if (!sc_name(s, &a->names[a->nnames], "NodeNames[%zu]", a->nnames))
            return 0;
        a->nnames++;
    }
    return r == 0;
}

/* sc_node reads one Nodes item (s->p at '{'): its span and metadata.name. */
static int sc_node(sc *s, extargs_args *a)
{
    size_t i = a->nnodes;
    extargs_node *n = &a->nodes[i];
    memset(n, 0, sizeof *n);
    n->raw = s->p;
    if (!sc_enter(s))
        return 0;
    bool first = true;
    const char *k;
    size_t kl;
    bool ke;
    int r;
    while ((r = sc_next_key(s, &first, &k, &kl, &ke)) == 1) {
        if (!sc_key_is(k, kl, ke, "metadata")) {
            if (!sc_value(s))
                return 0;
            continue;
        }
        if (*s->p == 'n') {
            if (!sc_literal(s, "null"))
                return 0;
            continue;
        }
        if (*s->p != '{')
            return sc_fail_at(s, AS_EINVAL, "Nodes.items[%zu].metadata", i,
                              "metadata must be an object, not %s", sc_peek_type(s));
        if (!sc_enter(s))
            return 0;
        bool mfirst = true;
        int mr;
        while ((mr = sc_next_key(s, &mfirst, &k, &kl, &ke)) == 1) {
            if (!sc_key_is(k, kl, ke, "name")) {
                if (!sc_value(s))
                    return 0;
            } else if (*s->p == 'n') {
                if (!sc_literal(s, "null"))
                    return 0;
                n->name.s = NULL;
                n->name.len = 0;
            } else if (*s->p != '"') {
                return sc_fail_at(s, AS_EINVAL, "Nodes.items[%zu].metadata.name", i,
                                  "metadata.name must be a string, not %s", sc_peek_type(s));
            } else if (!sc_name(s, &n->name, "Nodes.items[%zu].metadata.name", i)) {
                return 0;
            }
        }
        if (mr < 0)
            return 0;
    }
    if (r < 0)
        return 0;
    if (!n->name.s || n->name.len == 0)
        return sc_fail_at(s, AS_EINVAL, "Nodes.items[%zu].metadata.name", i,
                          "every node needs a metadata.name%s", NULL);
    n->raw_len = (size_t)(s->p - n->raw);
    a->nnodes++;
    return 1;
}

static int sc_nodes(sc *s, extargs_args *a)
{
    a->nnodes = 0;
    a->has_nodes = false;
    if (*s->p == 'n')
        return sc_literal(s, "null");
    if (*s->p != '{')
        return sc_fail_at(s, AS_EINVAL, "Nodes", 0, "Nodes must be a v1.NodeList object, not %s",
                          sc_peek_type(s));
    a->has_nodes = true;
    if (!sc_enter(s))
        return 0;
    bool first = true;
    const char *k;
    size_t kl;
    bool ke;
    int r;
    while ((r = sc_next_key(s, &first, &k, &kl, &ke)) == 1) {
        if (!sc_key_is(k, kl, ke, "items")) {
            if (!sc_value(s))
                return 0;
            continue;
        }
        a->nnodes = 0;
        if (*s->p == 'n') {
            if (!sc_literal(s, "null"))
                return 0;
            continue;
        }
        if (*s->p != '[')
            return sc_fail_at(s, AS_EINVAL, "Nodes.items", 0,
                              "Nodes.items must be an array of v1.Node, not %s", sc_peek_type(s));
        if (!sc_enter(s))
            return 0;
        bool ifirst = true;
        int ir;
        while ((ir = sc_next_elem(s, &ifirst)) == 1) {
            if (*s->p != '{')
                return sc_fail_at(s, AS_EINVAL, "Nodes.items[%zu]", a->nnodes,
                                  "every Nodes.items entry must be a v1.Node object, not %s",
                                  sc_peek_type(s));
            if (!sc_grow(s, (void **)&a->nodes, &s->cap_nodes, a->nnodes, sizeof *a->nodes,
                         "Nodes.items[%zu]"))
                return 0;
            if (!sc_node(s, a))
                return 0;
        }
        if (ir < 0)
            return 0;
    }
    return r == 0;
}

static int sc_args(sc *s, extargs_args *a)
{
    sc_ws(s);
    if (s->p >= s->end)
        return sc_syntax(s, "empty body");
    if (*s->p != '{') {
        if (strchr("[\"tfn-0123456789", *s->p) && *s->p)
            return sc_fail_at(s, AS_EINVAL, "", 0,
                              "the request body must be a JSON object (ExtenderArgs), not %s",
                              sc_peek_type(s));
        return sc_syntax(s, "invalid value");
    }
    if (!sc_enter(s))
        return 0;
    bool first = true;
    const char *k;
    size_t kl;
    bool ke;
    int r;
    while ((r = sc_next_key(s, &first, &k, &kl, &ke)) == 1) {
        int ok;
        if (sc_key_is(k, kl, ke, "Pod"))
            ok = sc_pod(s, a);
        else if (sc_key_is(k, kl, ke, "NodeNames"))
            ok = sc_node_names(s, a);
        else if (sc_key_is(k, kl, ke, "Nodes"))
            ok = sc_nodes(s, a);
        else
            ok = sc_value(s);
        if (!ok)
            return 0;
    }
    if (r < 0)
        return 0;
    sc_ws(s);
    if (s->p != s->end)
        return sc_syntax(s, "data after the end of the request");
    return 1;
}

/* See extargs.h. */
as_err extargs_decode_args(pool *p, const char *body, size_t len, extargs_args *out, as_diag *diag)
{
    return extargs_decode_args_ex(p, body, len, 0, out, diag);
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
        if (depth >= EXTARGS_MAX_DEPTH)
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
                if (esc || klen > EXTARGS_MAX_KEY_LEN)
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
    } else if (ch == '-' || is_digit(ch)) {
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

/* See extargs.h. */
bool extargs_project(const char *span, size_t len, const extargs_skip *skip, const char *parent,
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

/* See extargs.h. */
bool extargs_iter_begin(extargs_iter *it, const char *span, size_t len)
{
    const char *end = span + len;
    const char *p = skip_ws(span, end);
    it->p = p + 1;
    it->end = end;
    it->known = NULL;
    it->known_end = NULL;
    return p < end && *p == '{';
}

/* See extargs.h. */
int extargs_iter_next(extargs_iter *it, const char **key, size_t *klen, bool *kesc,
                      extargs_value *v)
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
    if (v->type == '-' || is_digit(v->type))
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

/* ---- a Pod's fields without its DOM ---------------------------------- */

/* pod_str takes a string member's value into *out (null: absent); false
 * for another type or a string with escapes (the DOM path decides). */
static bool pod_str(const extargs_value *v, model_span *out)
{
    if (v->type == 'n') {
        *out = (model_span){NULL, 0};
        return true;
    }
    if (v->type != '"' || v->esc)
        return false;
    *out = (model_span){v->s, v->len};
    return true;
}

static bool key_is(const char *k, size_t kl, const char *name)
{
    size_t n = strlen(name);
    return kl == n && memcmp(k, name, n) == 0;
}

/* One member of an object being read (key and value). */
typedef struct member {
    const char *k;
    size_t kl;
    bool kesc;
    extargs_value v;
} member;

/* obj_begin starts it on v, a member's value: 1 an object, 0 null (an
 * absent object), -1 another type. */
static int obj_begin(const extargs_value *v, extargs_iter *it)
{
    if (v->type == 'n')
        return 0;
    return v->type == '{' && extargs_iter_begin(it, v->s, v->len) ? 1 : -1;
}

/* next_member is extargs_iter_next into m. */
static int next_member(extargs_iter *it, member *m)
{
    return extargs_iter_next(it, &m->k, &m->kl, &m->kesc, &m->v);
}

/* pod_labels reads metadata.labels into f (a repeated "labels" starts
 * over, as the DOM keeps the last one). */
static bool pod_labels(const extargs_value *v, model_pod_fields *f, model_span *keys,
                       model_span *values, size_t cap)
{
    f->nlabels = 0;
    extargs_iter it;
    int b = obj_begin(v, &it);
    if (b <= 0)
        return b == 0;
    member m;
    int r;
    while ((r = next_member(&it, &m)) == 1) {
        if (m.kesc || f->nlabels == cap || m.v.type != '"' || m.v.esc)
            return false;
        keys[f->nlabels] = (model_span){m.k, m.kl};
        values[f->nlabels++] = (model_span){m.v.s, m.v.len};
    }
    return r == 0;
}

/* pod_metadata_fields reads metadata's members into f (a repeated
 * "metadata" starts over). */
static bool pod_metadata_fields(const extargs_value *v, model_pod_fields *f, model_span *keys,
                                model_span *values, size_t cap)
{
    f->name = f->ns = f->uid = f->resource_version = f->creation_timestamp = (model_span){NULL, 0};
    f->deletion_timestamp = false;
    f->nlabels = 0;
    extargs_iter it;
    int b = obj_begin(v, &it);
    if (b <= 0)
        return b == 0;
    member m;
    int r;
    while ((r = next_member(&it, &m)) == 1) {
        if (m.kesc)
            return false; /* an escaped key may spell one of ours */
        bool ok = true;
        if (key_is(m.k, m.kl, "name")) {
            ok = pod_str(&m.v, &f->name);
        } else if (key_is(m.k, m.kl, "namespace")) {
            ok = pod_str(&m.v, &f->ns);
        } else if (key_is(m.k, m.kl, "uid")) {
            ok = pod_str(&m.v, &f->uid);
        } else if (key_is(m.k, m.kl, "resourceVersion")) {
            ok = pod_str(&m.v, &f->resource_version);
        } else if (key_is(m.k, m.kl, "creationTimestamp")) {
            ok = pod_str(&m.v, &f->creation_timestamp);
        } else if (key_is(m.k, m.kl, "deletionTimestamp")) {
            model_span ts = {NULL, 0};
            ok = pod_str(&m.v, &ts);
            f->deletion_timestamp = ts.s != NULL;
        } else if (key_is(m.k, m.kl, "labels")) {
            ok = pod_labels(&m.v, f, keys, values, cap);
        }
        if (!ok)
            return false;
    }
    return r == 0;
}

/* pod_status_fields reads status.phase into f. */
static bool pod_status_fields(const extargs_value *v, model_pod_fields *f)
{
    f->phase = (model_span){NULL, 0};
    extargs_iter it;
    int b = obj_begin(v, &it);
    if (b <= 0)
        return b == 0;
    member m;
    int r;
    while ((r = next_member(&it, &m)) == 1)
        if (m.kesc || (key_is(m.k, m.kl, "phase") && !pod_str(&m.v, &f->phase)))
            return false;
    return r == 0;
}

/* See extargs.h. */
bool extargs_pod_fields(const extargs_args *a, model_pod_fields *f, model_span *keys,
                        model_span *values, size_t cap)
{
    memset(f, 0, sizeof *f);
    f->label_keys = keys;
    f->label_values = values;
    extargs_iter it;
    if (!a->pod_raw || !extargs_iter_begin(&it, a->pod_raw, a->pod_raw_len))
        return false;
    if (a->pod_spec_raw) {
        it.known = a->pod_spec_raw;
        it.known_end = a->pod_spec_raw + a->pod_spec_len;
    }
    member m;
    int r;
    while ((r = next_member(&it, &m)) == 1) {
        if (m.kesc)
            return false;
        bool ok = true;
        if (key_is(m.k, m.kl, "kind"))
            ok = pod_str(&m.v, &f->kind);
        else if (key_is(m.k, m.kl, "metadata"))
            ok = pod_metadata_fields(&m.v, f, keys, values, cap);
        else if (key_is(m.k, m.kl, "status"))
            ok = pod_status_fields(&m.v, f);
        if (!ok)
            return false;
    }
    return r == 0;
}

/* See extargs.h. */
as_err extargs_parse_pod(extargs_args *a, const extargs_skip *skip, as_diag *diag)
{
    if (a->pod || !a->pod_raw)
        return AS_OK;
    /* pod_raw is a span sc_pod validated */
    as_err err = parse_walk(a->pod_raw, a->pod_raw_len, skip, true, &a->pod, diag);
    if (err)
        pod_field(err, diag);
    return err;
}

/* See extargs.h. */
as_err extargs_decode_args_ex(pool *p, const char *body, size_t len, unsigned flags,
                              extargs_args *out, as_diag *diag)
{
    as_err err = AS_OK;
    memset(out, 0, sizeof *out);
    sc s = {.base = body, .p = body, .end = body + len, .pool = p, .diag = diag, .flags = flags};
    if (!sc_args(&s, out)) {
        err = s.err ? s.err : as_diag_set(diag, AS_EINTERNAL, NULL, "decoder failed");
        goto done;
    }
    size_t k = dedupe(p, out->names, out->nnames, sizeof *out->names);
    size_t m = dedupe(p, out->nodes, out->nnodes, sizeof *out->nodes);
    if (k == (size_t)-1 || m == (size_t)-1) {
        err = as_diag_set(diag, AS_ENOMEM, NULL, "request too large for its memory budget");
        goto done;
    }
    out->dup_names = out->nnames - k;
    out->nnames = k;
    out->dup_nodes = out->nnodes - m;
    out->nnodes = m;
done:
    if (err)
        extargs_args_release(out);
    return err;
}

/* See extargs.h. */
void extargs_args_release(extargs_args *a)
{
    if (a->pod)
        json_decref(a->pod);
    memset(a, 0, sizeof *a);
}

/* sc_document validates body[0..len) as one JSON value with the request
 * scanner (no allocation). */
static bool sc_document(const char *body, size_t len)
{
    as_diag quiet;
    sc s = {.base = body, .p = body, .end = body + len, .diag = &quiet};
    if (!sc_value(&s))
        return false;
    sc_ws(&s);
    return s.p == s.end;
}

/*
 * parse_walk builds body (validated by the scanner unless `validated`
 * says it already was) by walking it: the scanner's validation plus the
 * walk cost about half of yajl's pass on a 5 KB pod (bench_extender), and
 * members the rules drop are jumped over. Whatever either of them rejects is
 * handed to yajl, so that errors keep yajl's words and offsets.
 */
static as_err parse_walk(const char *body, size_t len, const extargs_skip *skip, bool validated,
                         json_t **out, as_diag *diag)
{
    /* yajl's pass applies the scanner's strict UTF-8 (cb_utf8), so what
     * it builds here is never text the scanner refused for its bytes */
    if (!validated && !sc_document(body, len))
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

/* See extargs.h. */
as_err extargs_parse_json_skip(const char *body, size_t len, const extargs_skip *skip, json_t **out,
                               as_diag *diag)
{
    return parse_walk(body, len, skip, false, out, diag);
}

/* See extargs.h. */
as_err extargs_parse_json_ref(const char *body, size_t len, const extargs_skip *skip, json_t **out,
                              as_diag *diag)
{
    return build_doc(body, len, skip, false, out, diag);
}

/* See extargs.h. */
as_err extargs_parse_json(const char *body, size_t len, json_t **out, as_diag *diag)
{
    return extargs_parse_json_skip(body, len, NULL, out, diag);
}

/* See extargs.h. */
json_t *extargs_get(const json_t *obj, const char *key)
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

/* ---- binding and preemption args (DOM-based) ---------------------- */

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

/* dup_str copies the string v into the pool as a C string; a NUL inside
 * (which would cut it short: "cpu-small-01\u0000garbage" as
 * "cpu-small-01") is AS_EINVAL naming field. */
static as_err dup_str(pool *p, const json_t *v, const char *field, const char **out, as_diag *diag)
{
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (memchr(s, '\0', len))
        return as_diag_set(diag, AS_EINVAL, field,
                           "%s contains \\u0000 (a NUL character); remove it", field);
    *out = pool_strndup(p, s, len);
    if (!*out)
        return as_diag_set(diag, AS_ENOMEM, field, "out of memory");
    return AS_OK;
}

/* get_str reads an optional string member of at most max bytes into the
 * pool ("" when absent or null). */
static as_err get_str(pool *p, const json_t *obj, const char *key, size_t max, const char **out,
                      as_diag *diag)
{
    const json_t *v = extargs_get(obj, key);
    *out = "";
    if (!v || json_is_null(v))
        return AS_OK;
    if (!json_is_string(v))
        return as_diag_set(diag, AS_EINVAL, key, "%s must be a string, not %s", key,
                           json_type_name(v));
    if (json_string_length(v) > max)
        return as_diag_set(diag, AS_EINVAL, key, "%s is longer than %zu bytes", key, max);
    return dup_str(p, v, key, out, diag);
}

/* See extargs.h. */
as_err extargs_decode_binding(pool *p, const char *body, size_t len, extargs_binding *out,
                              as_diag *diag)
{
    json_t *doc = NULL;
    memset(out, 0, sizeof *out);
    as_err err = extargs_parse_json(body, len, &doc, diag);
    if (err)
        return err;
    if (!json_is_object(doc)) {
        err = as_diag_set(diag, AS_EINVAL, "",
                          "the request body must be a JSON object (ExtenderBindingArgs), not %s",
                          json_type_name(doc));
        goto done;
    }
    if ((err = get_str(p, doc, "PodName", MODEL_POD_NAME_MAX, &out->pod_name, diag)) ||
        (err = get_str(p, doc, "PodNamespace", MODEL_NAMESPACE_MAX, &out->pod_namespace, diag)) ||
        (err = get_str(p, doc, "PodUID", EXTARGS_MAX_KEY_LEN, &out->pod_uid, diag)) ||
        (err = get_str(p, doc, "Node", EXTARGS_MAX_KEY_LEN, &out->node, diag)))
        goto done;
    if (!out->pod_name[0]) {
        err = as_diag_set(diag, AS_EINVAL, "PodName", "PodName is required");
        goto done;
    }
    if (!out->node[0]) {
        err = as_diag_set(diag, AS_EINVAL, "Node", "Node is required (the node to bind to)");
        goto done;
    }
    if (strlen(out->node) > EXTARGS_MAX_NAME_LEN) {
        err = as_diag_set(diag, AS_EINVAL, "Node", "a node name is at most 253 bytes");
        goto done;
    }
    if (!out->pod_namespace[0])
        out->pod_namespace = "default";
done:
    json_decref(doc);
    return err;
}

/* decode_victims fills e from one map value (Victims or MetaVictims). */
static as_err decode_victims(pool *p, const char *mapname, const char *node, const json_t *v,
                             bool meta, extargs_victims *e, as_diag *diag)
{
    char field[384];
    e->node = node;
    if (!v || json_is_null(v))
        return AS_OK;
    snprintf(field, sizeof field, "%s.%s", mapname, node);
    if (!json_is_object(v))
        return as_diag_set(diag, AS_EINVAL, field, "%s entries must be objects, not %s", mapname,
                           json_type_name(v));
    const json_t *pdb = extargs_get(v, "NumPDBViolations");
    if (pdb && !json_is_null(pdb)) {
        if (!json_is_integer(pdb)) {
            snprintf(field, sizeof field, "%s.%s.NumPDBViolations", mapname, node);
            return as_diag_set(diag, AS_EINVAL, field,
                               "NumPDBViolations must be an integer, not %s", json_type_name(pdb));
        }
        e->num_pdb_violations = json_integer_value(pdb);
        if (e->num_pdb_violations < 0) {
            snprintf(field, sizeof field, "%s.%s.NumPDBViolations", mapname, node);
            return as_diag_set(diag, AS_EINVAL, field,
                               "NumPDBViolations is %lld; it counts violated budgets and must "
                               "be 0 or more",
                               (long long)e->num_pdb_violations);
        }
    }
    const json_t *pods = extargs_get(v, "Pods");
    if (!pods || json_is_null(pods))
        return AS_OK;
    if (!json_is_array(pods)) {
        snprintf(field, sizeof field, "%s.%s.Pods", mapname, node);
        return as_diag_set(diag, AS_EINVAL, field, "Pods must be an array, not %s",
                           json_type_name(pods));
    }
    size_t n = json_array_size(pods);
    if (n > EXTARGS_MAX_NAMES) {
        snprintf(field, sizeof field, "%s.%s.Pods", mapname, node);
        return as_diag_set(diag, AS_ETOOBIG, field, "more than 65536 victims on one node");
    }
    e->uids = pool_alloc(p, (n ? n : 1) * sizeof *e->uids);
    if (!meta)
        e->pods = pool_alloc(p, (n ? n : 1) * sizeof *e->pods);
    if (!e->uids || (!meta && !e->pods))
        return as_diag_set(diag, AS_ENOMEM, field, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *it = json_array_get(pods, i);
        snprintf(field, sizeof field, "%s.%s.Pods[%zu]", mapname, node, i);
        if (!json_is_object(it))
            return as_diag_set(diag, AS_EINVAL, field, "%s must be an object, not %s",
                               meta ? "a MetaPod" : "a victim Pod", json_type_name(it));
        const json_t *holder = it;
        const char *uidkey = meta ? "UID" : "uid";
        if (!meta) {
            holder = extargs_get(it, "metadata");
            if (holder && !json_is_null(holder) && !json_is_object(holder)) {
                snprintf(field, sizeof field, "%s.%s.Pods[%zu].metadata", mapname, node, i);
                return as_diag_set(diag, AS_EINVAL, field, "metadata must be an object");
            }
            e->pods[i] = it;
        }
        const char *uid = "";
        const json_t *u = holder ? extargs_get(holder, uidkey) : NULL;
        if (u && !json_is_null(u)) {
            if (!json_is_string(u)) {
                snprintf(field, sizeof field, "%s.%s.Pods[%zu].%s", mapname, node, i,
                         meta ? "UID" : "metadata.uid");
                return as_diag_set(diag, AS_EINVAL, field, "a pod UID must be a string, not %s",
                                   json_type_name(u));
            }
            snprintf(field, sizeof field, "%s.%s.Pods[%zu].%s", mapname, node, i,
                     meta ? "UID" : "metadata.uid");
            as_err err = dup_str(p, u, field, &uid, diag);
            if (err)
                return err;
        }
        e->uids[i] = uid;
    }
    e->npods = n;
    return AS_OK;
}

/* See extargs.h. */
as_err extargs_decode_preemption(pool *p, const char *body, size_t len, extargs_preemption *out,
                                 as_diag *diag)
{
    memset(out, 0, sizeof *out);
    as_err err = extargs_parse_json(body, len, &out->doc, diag);
    if (err)
        return err;
    json_t *doc = out->doc;
    if (!json_is_object(doc)) {
        err = as_diag_set(diag, AS_EINVAL, "",
                          "the request body must be a JSON object (ExtenderPreemptionArgs), not %s",
                          json_type_name(doc));
        goto done;
    }
    const json_t *pod = extargs_get(doc, "Pod");
    if (pod && !json_is_null(pod)) {
        if (!json_is_object(pod)) {
            err = as_diag_set(diag, AS_EINVAL, "Pod", "Pod must be a v1.Pod object, not %s",
                              json_type_name(pod));
            goto done;
        }
        out->pod = pod;
    }
    const char *mapname = "NodeNameToMetaVictims";
    json_t *map = extargs_get(doc, mapname);
    out->meta = true;
    if (!map || json_is_null(map)) {
        mapname = "NodeNameToVictims";
        map = extargs_get(doc, mapname);
        out->meta = false;
    }
    if (!map || json_is_null(map))
        goto done;
    if (!json_is_object(map)) {
        err =
            as_diag_set(diag, AS_EINVAL, mapname, "%s must be an object keyed by node name, not %s",
                        mapname, json_type_name(map));
        goto done;
    }
    size_t n = json_object_size(map);
    if (n > EXTARGS_MAX_NAMES) {
        err = as_diag_set(diag, AS_ETOOBIG, mapname, "more than 65536 nodes in one request");
        goto done;
    }
    out->entries = pool_alloc(p, (n ? n : 1) * sizeof *out->entries);
    if (!out->entries) {
        err = as_diag_set(diag, AS_ENOMEM, mapname, "out of memory");
        goto done;
    }
    const char *key;
    size_t klen;
    json_t *val;
    json_object_keylen_foreach(map, key, klen, val)
    {
        char field[300];
        snprintf(field, sizeof field, "%s.%.*s", mapname, (int)(klen > 256 ? 256 : klen), key);
        if (klen == 0 || klen > EXTARGS_MAX_NAME_LEN || memchr(key, '\0', klen)) {
            err = as_diag_set(diag, AS_EINVAL, field,
                              "node names must be 1 to 253 bytes without NUL characters");
            goto done;
        }
        const char *node = pool_strndup(p, key, klen);
        if (!node) {
            err = as_diag_set(diag, AS_ENOMEM, field, "out of memory");
            goto done;
        }
        err = decode_victims(p, mapname, node, val, out->meta, &out->entries[out->nentries], diag);
        if (err)
            goto done;
        out->nentries++;
    }
done:
    if (err)
        extargs_preemption_release(out);
    return err;
}

/* See extargs.h. */
void extargs_preemption_release(extargs_preemption *a)
{
    if (a->doc)
        json_decref(a->doc);
    memset(a, 0, sizeof *a);
}

/* See extargs.h. */
as_err extargs_eval_names(pool *p, const extargs_args *a, sched_name **names, size_t *n,
                          size_t **item_index)
{
    *item_index = NULL;
    if (a->nnodes == 0) {
        *names = a->names;
        *n = a->nnames;
        return AS_OK;
    }
    size_t total = a->nnames + a->nnodes;
    sched_name *all = pool_alloc(p, total * sizeof *all);
    size_t *idx = pool_alloc(p, a->nnodes * sizeof *idx);
    size_t size = 16;
    while (size < total * 2)
        size <<= 1;
    uint32_t *tab = a->nnames ? pool_alloc(p, size * sizeof *tab) : NULL;
    if (!all || !idx || (a->nnames && !tab))
        return AS_ENOMEM;
    if (a->nnames)
        memcpy(all, a->names, a->nnames * sizeof *all);
    size_t count = a->nnames;
    if (!tab) {
        /* items are already unique among themselves */
        for (size_t j = 0; j < a->nnodes; j++) {
            all[j] = a->nodes[j].name;
            idx[j] = j;
        }
        count = a->nnodes;
    } else {
        for (size_t i = 0; i < a->nnames; i++) {
            size_t h = (size_t)sched_name_hash(&all[i]) & (size - 1);
            while (tab[h])
                h = (h + 1) & (size - 1);
            tab[h] = (uint32_t)i + 1;
        }
        for (size_t j = 0; j < a->nnodes; j++) {
            const sched_name *nm = &a->nodes[j].name;
            size_t h = (size_t)sched_name_hash(nm) & (size - 1);
            size_t found = (size_t)-1;
            while (tab[h]) {
                const sched_name *o = &all[tab[h] - 1];
                if (o->len == nm->len && memcmp(o->s, nm->s, nm->len) == 0) {
                    found = tab[h] - 1;
                    break;
                }
                h = (h + 1) & (size - 1);
            }
            if (found == (size_t)-1) {
                found = count;
                all[count++] = *nm;
                tab[h] = (uint32_t)found + 1;
            }
            idx[j] = found;
        }
    }
    *names = all;
    *n = count;
    *item_index = idx;
    return AS_OK;
}

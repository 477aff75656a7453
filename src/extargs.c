/*
 * extargs.c - streaming decoders of the extender request bodies.
 *
 * One yajl pass drives a small state machine. Three sub-modes handle the
 * value under a key: SKIP (unknown keys, counted by depth), BUILD (the yajl
 * events of one value are assembled into a jansson DOM: the Pod, or the
 * whole body for the binding/preemption args) and the ExtenderArgs states
 * proper, which copy NodeNames and note Node item spans without a DOM.
 */
#include "agentsched/extargs.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <yajl/yajl_parse.h>

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
    ST_TOP,       /* expecting the top-level object */
    ST_TOP_KEY,   /* inside it, expecting a key or its end */
    ST_POD,       /* value of Pod */
    ST_NAMES_VAL, /* value of NodeNames */
    ST_NAMES,     /* inside NodeNames */
    ST_NODES_VAL, /* value of Nodes */
    ST_NODES_KEY, /* inside the NodeList */
    ST_ITEMS_VAL, /* value of Nodes.items */
    ST_ITEMS,     /* inside Nodes.items */
    ST_NODE_KEY,  /* inside one Node */
    ST_META_VAL,  /* value of metadata */
    ST_META_KEY,  /* inside metadata */
    ST_NAME_VAL,  /* value of metadata.name */
    ST_SKIP,
    ST_BUILD,
    ST_DONE,
} st;

/* yajl -> jansson builder: a stack of open containers. */
typedef struct bld {
    json_t *stack[EXTARGS_MAX_DEPTH + 2];
    int depth;
    json_t *root;
    char key[EXTARGS_MAX_KEY_LEN];
    size_t keylen;
} bld;

typedef struct ctx {
    yajl_handle h;
    const char *body;
    pool *p;
    as_diag *diag;
    as_err err;
    st state;
    st ret;    /* state to resume after SKIP / BUILD */
    int depth; /* nesting of the whole document */
    int skip;  /* open containers inside a skipped value */
    bld b;
    json_t **target; /* where BUILD stores its value */
    extargs_args *out;
    size_t cap_names;
    size_t cap_nodes;
} ctx;

static int fail(ctx *c, as_err err, const char *field, const char *fmt, const char *detail)
{
    if (c->err == AS_OK) {
        c->err = err;
        as_diag_set(c->diag, err, field, fmt, detail ? detail : "");
    }
    return 0;
}

/* fail_at is fail() with the field formatted from tmpl and idx, only on
 * the error path (formatting per item was the decoder's hottest cost). */
static int fail_at(ctx *c, as_err err, const char *tmpl, size_t idx, const char *fmt,
                   const char *detail)
{
    char field[96];
    snprintf(field, sizeof field, tmpl, idx);
    return fail(c, err, field, fmt, detail);
}

static const char *ev_type_name(ev_kind k)
{
    switch (k) {
    case EV_NULL:
        return "null";
    case EV_BOOL:
        return "a boolean";
    case EV_INT:
    case EV_DBL:
        return "a number";
    case EV_STR:
        return "a string";
    case EV_MAP_START:
        return "an object";
    case EV_ARR_START:
        return "an array";
    default:
        return "a token";
    }
}

/* ---- builder ---------------------------------------------------- */

static void bld_reset(bld *b)
{
    /* open containers are owned by their parents, and those by root */
    if (b->root)
        json_decref(b->root);
    b->root = NULL;
    b->depth = 0;
    b->keylen = 0;
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
    case EV_KEY:
        if (e->len > sizeof b->key)
            return fail(c, AS_ETOOBIG, NULL, "an object key is longer than 4096 bytes%s", NULL);
        memcpy(b->key, e->s, e->len);
        b->keylen = e->len;
        return 1;
    case EV_MAP_START:
    case EV_ARR_START: {
        json_t *cont = e->kind == EV_MAP_START ? json_object() : json_array();
        if (!bld_add(c, cont))
            return 0;
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

/* ---- helpers ---------------------------------------------------- */

static bool key_is(const ev *e, const char *name)
{
    size_t n = strlen(name);
    return e->len == n && strncasecmp(e->s, name, n) == 0;
}

static bool is_start(const ev *e)
{
    return e->kind == EV_MAP_START || e->kind == EV_ARR_START;
}

/* build_value builds the value starting with e into *target, then `ret`. */
static int build_value(ctx *c, const ev *e, json_t **target, st ret)
{
    bld_reset(&c->b);
    c->target = target;
    c->ret = ret;
    c->state = ST_BUILD;
    int done;
    if (!bld_event(c, e, &done))
        return 0;
    if (done) {
        *c->target = c->b.root;
        c->b.root = NULL;
        c->state = ret;
    }
    return 1;
}

static int grow(ctx *c, void **arr, size_t *cap, size_t n, size_t elem, const char *tmpl)
{
    if (n < *cap)
        return 1;
    if (n >= EXTARGS_MAX_NAMES)
        return fail_at(c, AS_ETOOBIG, tmpl, n, "more than 65536 nodes in one request%s", NULL);
    size_t ncap = *cap ? *cap * 2 : 64;
    void *na = pool_alloc(c->p, ncap * elem);
    if (!na)
        return fail_at(c, AS_ENOMEM, tmpl, n, "request too large for its memory budget%s", NULL);
    if (n)
        memcpy(na, *arr, n * elem);
    *arr = na;
    *cap = ncap;
    return 1;
}

static int copy_name(ctx *c, const ev *e, sched_name *dst, const char *tmpl, size_t idx)
{
    if (e->len > EXTARGS_MAX_NAME_LEN)
        return fail_at(c, AS_EINVAL, tmpl, idx,
                       "a node name is at most 253 bytes (a DNS subdomain)%s", NULL);
    if (memchr(e->s, '\0', e->len))
        return fail_at(c, AS_EINVAL, tmpl, idx, "a node name cannot contain NUL characters%s",
                       NULL);
    char *s = pool_strndup(c->p, e->s, e->len);
    if (!s)
        return fail_at(c, AS_ENOMEM, tmpl, idx, "request too large for its memory budget%s", NULL);
    dst->s = s;
    dst->len = e->len;
    return 1;
}

/* ---- the ExtenderArgs state machine ------------------------------ */

static int on_args_event(ctx *c, const ev *e)
{
    extargs_args *a = c->out;
    char field[96];

    switch (c->state) {
    case ST_TOP:
        if (e->kind != EV_MAP_START)
            return fail(c, AS_EINVAL, "",
                        "the request body must be a JSON object (ExtenderArgs), not %s",
                        ev_type_name(e->kind));
        c->state = ST_TOP_KEY;
        return 1;
    case ST_TOP_KEY:
        if (e->kind == EV_MAP_END) {
            c->state = ST_DONE;
            return 1;
        }
        if (key_is(e, "Pod"))
            c->state = ST_POD;
        else if (key_is(e, "NodeNames"))
            c->state = ST_NAMES_VAL;
        else if (key_is(e, "Nodes"))
            c->state = ST_NODES_VAL;
        else
            c->state = ST_SKIP, c->skip = 0, c->ret = ST_TOP_KEY;
        return 1;
    case ST_POD:
        if (a->pod) {
            json_decref(a->pod);
            a->pod = NULL;
        }
        if (e->kind == EV_NULL) {
            c->state = ST_TOP_KEY;
            return 1;
        }
        if (e->kind != EV_MAP_START)
            return fail(c, AS_EINVAL, "Pod", "Pod must be a v1.Pod object, not %s",
                        ev_type_name(e->kind));
        return build_value(c, e, &a->pod, ST_TOP_KEY);
    case ST_NAMES_VAL:
        a->nnames = 0;
        a->has_node_names = false;
        if (e->kind == EV_NULL) {
            c->state = ST_TOP_KEY;
            return 1;
        }
        if (e->kind != EV_ARR_START)
            return fail(c, AS_EINVAL, "NodeNames",
                        "NodeNames must be an array of node names, not %s", ev_type_name(e->kind));
        a->has_node_names = true;
        c->state = ST_NAMES;
        return 1;
    case ST_NAMES:
        if (e->kind == EV_ARR_END) {
            c->state = ST_TOP_KEY;
            return 1;
        }
        if (e->kind != EV_STR)
            return fail_at(c, AS_EINVAL, "NodeNames[%zu]", a->nnames,
                           "every NodeNames entry must be a string, not %s", ev_type_name(e->kind));
        if (!grow(c, (void **)&a->names, &c->cap_names, a->nnames, sizeof *a->names,
                  "NodeNames[%zu]"))
            return 0;
        if (!copy_name(c, e, &a->names[a->nnames], "NodeNames[%zu]", a->nnames))
            return 0;
        a->nnames++;
        return 1;
    case ST_NODES_VAL:
        a->nnodes = 0;
        a->has_nodes = false;
        if (e->kind == EV_NULL) {
            c->state = ST_TOP_KEY;
            return 1;
        }
        if (e->kind != EV_MAP_START)
            return fail(c, AS_EINVAL, "Nodes", "Nodes must be a v1.NodeList object, not %s",
                        ev_type_name(e->kind));
        a->has_nodes = true;
        c->state = ST_NODES_KEY;
        return 1;
    case ST_NODES_KEY:
        if (e->kind == EV_MAP_END) {
            c->state = ST_TOP_KEY;
            return 1;
        }
        if (key_is(e, "items"))
            c->state = ST_ITEMS_VAL;
        else
            c->state = ST_SKIP, c->skip = 0, c->ret = ST_NODES_KEY;
        return 1;
    case ST_ITEMS_VAL:
        a->nnodes = 0;
        if (e->kind == EV_NULL) {
            c->state = ST_NODES_KEY;
            return 1;
        }
        if (e->kind != EV_ARR_START)
            return fail(c, AS_EINVAL, "Nodes.items",
                        "Nodes.items must be an array of v1.Node, not %s", ev_type_name(e->kind));
        c->state = ST_ITEMS;
        return 1;
    case ST_ITEMS:
        if (e->kind == EV_ARR_END) {
            c->state = ST_NODES_KEY;
            return 1;
        }
        if (e->kind != EV_MAP_START)
            return fail_at(c, AS_EINVAL, "Nodes.items[%zu]", a->nnodes,
                           "every Nodes.items entry must be a v1.Node object, not %s",
                           ev_type_name(e->kind));
        if (!grow(c, (void **)&a->nodes, &c->cap_nodes, a->nnodes, sizeof *a->nodes,
                  "Nodes.items[%zu]"))
            return 0;
        memset(&a->nodes[a->nnodes], 0, sizeof a->nodes[0]);
        /* bytes consumed is just past the '{' that started this item */
        a->nodes[a->nnodes].raw = c->body + yajl_get_bytes_consumed(c->h) - 1;
        c->state = ST_NODE_KEY;
        return 1;
    case ST_NODE_KEY:
        if (e->kind == EV_MAP_END) {
            extargs_node *n = &a->nodes[a->nnodes];
            if (!n->name.s || n->name.len == 0) {
                snprintf(field, sizeof field, "Nodes.items[%zu].metadata.name", a->nnodes);
                return fail(c, AS_EINVAL, field, "every node needs a metadata.name%s", NULL);
            }
            n->raw_len = (size_t)(c->body + yajl_get_bytes_consumed(c->h) - n->raw);
            a->nnodes++;
            c->state = ST_ITEMS;
            return 1;
        }
        if (key_is(e, "metadata"))
            c->state = ST_META_VAL;
        else
            c->state = ST_SKIP, c->skip = 0, c->ret = ST_NODE_KEY;
        return 1;
    case ST_META_VAL:
        if (e->kind == EV_NULL) {
            c->state = ST_NODE_KEY;
            return 1;
        }
        if (e->kind != EV_MAP_START) {
            snprintf(field, sizeof field, "Nodes.items[%zu].metadata", a->nnodes);
            return fail(c, AS_EINVAL, field, "metadata must be an object, not %s",
                        ev_type_name(e->kind));
        }
        c->state = ST_META_KEY;
        return 1;
    case ST_META_KEY:
        if (e->kind == EV_MAP_END) {
            c->state = ST_NODE_KEY;
            return 1;
        }
        if (key_is(e, "name"))
            c->state = ST_NAME_VAL;
        else
            c->state = ST_SKIP, c->skip = 0, c->ret = ST_META_KEY;
        return 1;
    case ST_NAME_VAL: {
        extargs_node *n = &a->nodes[a->nnodes];
        if (e->kind == EV_NULL) {
            n->name.s = NULL;
            n->name.len = 0;
            c->state = ST_META_KEY;
            return 1;
        }
        if (e->kind != EV_STR)
            return fail_at(c, AS_EINVAL, "Nodes.items[%zu].metadata.name", a->nnodes,
                           "metadata.name must be a string, not %s", ev_type_name(e->kind));
        if (!copy_name(c, e, &n->name, "Nodes.items[%zu].metadata.name", a->nnodes))
            return 0;
        c->state = ST_META_KEY;
        return 1;
    }
    default:
        return fail(c, AS_EINTERNAL, NULL, "extender decoder in an impossible state%s", NULL);
    }
}

/* dispatch handles depth, SKIP and BUILD, then the mode's own states. */
static int dispatch(ctx *c, const ev *e)
{
    if (e->kind == EV_MAP_START || e->kind == EV_ARR_START) {
        if (++c->depth > EXTARGS_MAX_DEPTH)
            return fail(c, AS_ETOOBIG, NULL, "JSON nested deeper than 64 levels%s", NULL);
    } else if (e->kind == EV_MAP_END || e->kind == EV_ARR_END) {
        c->depth--;
    }
    if (c->state == ST_SKIP) {
        if (is_start(e))
            c->skip++;
        else if (e->kind == EV_MAP_END || e->kind == EV_ARR_END)
            c->skip--;
        if (c->skip == 0 && e->kind != EV_KEY)
            c->state = c->ret;
        return 1;
    }
    if (c->state == ST_BUILD) {
        int done;
        if (!bld_event(c, e, &done))
            return 0;
        if (done) {
            *c->target = c->b.root;
            c->b.root = NULL;
            c->state = c->ret;
        }
        return 1;
    }
    if (c->state == ST_DONE)
        return fail(c, AS_EINTERNAL, NULL, "data after the end of the request%s", NULL);
    return on_args_event(c, e);
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
static int cb_str(void *u, const unsigned char *s, size_t len)
{
    ev e = {.kind = EV_STR, .s = (const char *)s, .len = len};
    return dispatch(u, &e);
}
static int cb_key(void *u, const unsigned char *s, size_t len)
{
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
    /* The builder's key buffer makes ctx too big for small thread stacks. */
    ctx *c = pool_alloc(p, sizeof *c);
    if (!c)
        return NULL;
    c->p = p;
    c->diag = diag;
    return c;
}

static uint64_t name_hash(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

/*
 * dedupe compacts n elements of `stride` bytes, each starting with a
 * sched_name, keeping the first occurrence of every name. Returns the new
 * count, or (size_t)-1 when out of memory.
 */
static size_t dedupe(pool *p, void *base, size_t n, size_t stride)
{
    if (n < 2)
        return n;
    size_t size = 16;
    while (size < n * 2)
        size <<= 1;
    uint32_t *tab = pool_alloc(p, size * sizeof *tab);
    if (!tab)
        return (size_t)-1;
    char *b = base;
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        const sched_name *nm = (const sched_name *)(b + i * stride);
        size_t h = (size_t)name_hash(nm->s, nm->len) & (size - 1);
        bool dup = false;
        while (tab[h]) {
            const sched_name *o = (const sched_name *)(b + (tab[h] - 1) * stride);
            if (o->len == nm->len && memcmp(o->s, nm->s, nm->len) == 0) {
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

/* See extargs.h. */
as_err extargs_decode_args(pool *p, const char *body, size_t len, extargs_args *out, as_diag *diag)
{
    as_err err = AS_OK;
    memset(out, 0, sizeof *out);
    ctx *c = ctx_new(p, diag);
    if (!c)
        return as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
    c->out = out;
    c->state = ST_TOP;
    err = run(c, body, len);
    if (err)
        goto done;
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

/* See extargs.h. */
as_err extargs_parse_json(const char *body, size_t len, json_t **out, as_diag *diag)
{
    *out = NULL;
    pool *p = pool_new(0);
    if (!p)
        return as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
    ctx *c = ctx_new(p, diag);
    as_err err = AS_ENOMEM;
    if (!c)
        goto done;
    json_t *root = NULL;
    c->state = ST_BUILD;
    c->ret = ST_DONE;
    c->target = &root;
    err = run(c, body, len);
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

/* get_str reads an optional string member into the pool ("" when absent
 * or null). */
static as_err get_str(pool *p, const json_t *obj, const char *key, const char **out, as_diag *diag)
{
    const json_t *v = extargs_get(obj, key);
    *out = "";
    if (!v || json_is_null(v))
        return AS_OK;
    if (!json_is_string(v))
        return as_diag_set(diag, AS_EINVAL, key, "%s must be a string, not %s", key,
                           json_type_name(v));
    if (json_string_length(v) > EXTARGS_MAX_KEY_LEN)
        return as_diag_set(diag, AS_EINVAL, key, "%s is longer than 4096 bytes", key);
    *out = pool_strndup(p, json_string_value(v), json_string_length(v));
    if (!*out)
        return as_diag_set(diag, AS_ENOMEM, key, "out of memory");
    return AS_OK;
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
    if ((err = get_str(p, doc, "PodName", &out->pod_name, diag)) ||
        (err = get_str(p, doc, "PodNamespace", &out->pod_namespace, diag)) ||
        (err = get_str(p, doc, "PodUID", &out->pod_uid, diag)) ||
        (err = get_str(p, doc, "Node", &out->node, diag)))
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
            uid = pool_strndup(p, json_string_value(u), json_string_length(u));
            if (!uid)
                return as_diag_set(diag, AS_ENOMEM, field, "out of memory");
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
            size_t h = (size_t)name_hash(all[i].s, all[i].len) & (size - 1);
            while (tab[h])
                h = (h + 1) & (size - 1);
            tab[h] = (uint32_t)i + 1;
        }
        for (size_t j = 0; j < a->nnodes; j++) {
            const sched_name *nm = &a->nodes[j].name;
            size_t h = (size_t)name_hash(nm->s, nm->len) & (size - 1);
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

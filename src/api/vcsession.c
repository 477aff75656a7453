/*
 * vcsession.c - see vcsession.h.
 */
#include "agentsched/api/vcsession.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "agentsched/base/jscan.h"
#include "agentsched/base/json.h"
#include "agentsched/base/utf8.h"

enum { TOP_OTHER = 0, TOP_JOBS, TOP_NODES };

typedef struct scan {
    yajl_handle h;
    const char *body;
    size_t len;
    cache *c;
    vcsession_stats *st;
    as_diag *d;
    as_err err;
    int depth;
    bool started;
    int top; /* which top-level member the parser is in */
} scan;

static int scan_fail(scan *s, as_err err, const char *msg)
{
    if (s->err == AS_OK)
        s->err = as_diag_set(s->d, err, "", "%s", msg);
    return 0;
}

/* scan_value is called for every value start; scalars at the top level
 * mean the body is not an object. */
static int scan_scalar(scan *s)
{
    if (s->depth == 0)
        return scan_fail(s, AS_EINVAL,
                         "the body must be a JSON object (Volcano's OnSessionOpenRequest)");
    return 1;
}

static int cb_null(void *ctx)
{
    return scan_scalar(ctx);
}
static int cb_bool(void *ctx, int b)
{
    (void)b;
    return scan_scalar(ctx);
}
static int cb_number(void *ctx, const char *s, size_t n)
{
    (void)s;
    (void)n;
    return scan_scalar(ctx);
}
/* scan_utf8 holds a string or key to strict UTF-8 (yajl checks the byte
 * structure only), as every other verb's decoder does. */
static int scan_utf8(scan *s, const unsigned char *str, size_t n)
{
    as_err err = json_check_utf8(s->body, s->len, yajl_get_bytes_consumed(s->h), (const char *)str,
                                 n, s->err == AS_OK ? s->d : NULL);
    if (err == AS_OK)
        return 1;
    if (s->err == AS_OK)
        s->err = err;
    return 0;
}

static int cb_string(void *ctx, const unsigned char *str, size_t n)
{
    return scan_utf8(ctx, str, n) && scan_scalar(ctx);
}

static int open_container(scan *s, bool map)
{
    if (s->depth == 0 && (!map || s->started))
        return scan_fail(s, AS_EINVAL,
                         "the body must be one JSON object (Volcano's OnSessionOpenRequest)");
    s->started = true;
    if (++s->depth > JSON_MAX_DEPTH)
        return scan_fail(s, AS_ETOOBIG, "the body nests deeper than 64 levels");
    return 1;
}

static int cb_start_map(void *ctx)
{
    return open_container(ctx, true);
}
static int cb_start_array(void *ctx)
{
    return open_container(ctx, false);
}
static int cb_end(void *ctx)
{
    scan *s = ctx;
    s->depth--;
    return 1;
}

/* scan_count counts the key k[0..n) (decoded, valid UTF-8, no NUL) met at
 * s->depth: a top-level member picks what its keys count; a key of the
 * object under "Jobs" is a job, under "Nodes" a node, looked up in the
 * cache. */
static void scan_count(scan *s, const char *k, size_t n)
{
    if (s->depth == 1) {
        s->top = (n == 4 && strncasecmp(k, "Jobs", 4) == 0)    ? TOP_JOBS
                 : (n == 5 && strncasecmp(k, "Nodes", 5) == 0) ? TOP_NODES
                                                               : TOP_OTHER;
        return;
    }
    if (s->depth != 2)
        return;
    if (s->top == TOP_JOBS) {
        s->st->jobs++;
    } else if (s->top == TOP_NODES) {
        s->st->nodes++;
        bool known = false;
        if (s->c) {
            /* one short read-lock bracket per name: a session can be large,
             * and holding the lock through the parse would stall writers */
            cache_read_lock(s->c);
            known = cache_node_find(s->c, k, n) != NULL;
            cache_read_unlock(s->c);
        }
        if (!known && s->st->unknown_nodes++ == 0) {
            size_t m = n < sizeof s->st->first_unknown - 1 ? n : sizeof s->st->first_unknown - 1;
            /* it goes into a log line: no spaces, quotes or control bytes */
            for (size_t i = 0; i < m; i++) {
                unsigned char ch = (unsigned char)k[i];
                s->st->first_unknown[i] = ch > ' ' && ch < 0x7f && ch != '"' ? (char)ch : '?';
            }
            s->st->first_unknown[m] = '\0';
        }
    }
}

static int cb_key(void *ctx, const unsigned char *key, size_t n)
{
    scan *s = ctx;
    const char *k = (const char *)key;
    if (!scan_utf8(s, key, n))
        return 0;
    if (memchr(k, '\0', n))
        return scan_fail(s, AS_EINVAL,
                         "an object key contains \\u0000 (a NUL character); keys may not "
                         "contain NUL, remove it");
    scan_count(s, k, n);
    return 1;
}

static const yajl_callbacks scan_callbacks = {
    .yajl_null = cb_null,
    .yajl_boolean = cb_bool,
    .yajl_number = cb_number,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_key,
    .yajl_end_map = cb_end,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_end,
};

/* surrogate_escape: the validated string text raw[0..n) holds a \u
 * escape of a surrogate half, which yajl decodes its own way (a lone one
 * into bytes its UTF-8 check then refuses). */
static bool surrogate_escape(const char *raw, size_t n)
{
    for (size_t i = 0; i + 1 < n; i++) {
        if (raw[i] != '\\')
            continue;
        if (raw[i + 1] == 'u' && (raw[i + 2] == 'd' || raw[i + 2] == 'D') &&
            strchr("89abcdefABCDEF", raw[i + 3]))
            return true;
        i++; /* past the escaped character */
    }
    return false;
}

/* walk_value reads the value at j->p as yajl's pass would, counting the
 * keys (scan_count): 1, or 0 when the scanner fails, a key has escapes or
 * a string a surrogate escape (yajl's pass then decides and words the
 * answer). */
static int walk_value(scan *s, jscan *j)
{
    jscan_ws(j);
    if (j->p >= j->end)
        return jscan_syntax(j, "unexpected end of input");
    bool first = true;
    int r;
    if (*j->p == '{') {
        if (!jscan_enter(j))
            return 0;
        const char *k;
        size_t kl;
        bool ke;
        while ((r = jscan_next_key(j, &first, &k, &kl, &ke)) == 1) {
            if (ke)
                return 0; /* decoded by yajl: lone surrogates as it makes them */
            s->depth = j->depth;
            scan_count(s, k, kl);
            if (!walk_value(s, j))
                return 0;
        }
        return r == 0;
    }
    if (*j->p == '[') {
        if (!jscan_enter(j))
            return 0;
        while ((r = jscan_next_elem(j, &first)) == 1)
            if (!walk_value(s, j))
                return 0;
        return r == 0;
    }
    if (*j->p == '"') {
        const char *raw;
        size_t len;
        bool esc;
        return jscan_string(j, &raw, &len, &esc) && !(esc && surrogate_escape(raw, len));
    }
    return jscan_value(j);
}

/*
 * session_walk is yajl's pass over a body the scanner takes, at the
 * scanner's speed (a session names every job and node of the cluster):
 * true with s->st filled, or s->err set for a body that is not one
 * object, as the callbacks set it; false when yajl's pass must run: the
 * scanner refused something (yajl's words and offsets are the answer), a
 * key has escapes or a string a surrogate escape. Keys without escapes are the text yajl would
 * decode, and a valid document meets the callbacks' checks in the same order.
 */
static bool session_walk(scan *s, const char *body, size_t len)
{
    as_diag quiet;
    jscan j = {.base = body, .p = body, .end = body + len, .diag = &quiet, .keys_nul_ok = true};
    jscan_ws(&j);
    if (j.p >= j.end)
        return false;
    if (*j.p == '[') {
        scan_fail(s, AS_EINVAL,
                  "the body must be one JSON object (Volcano's OnSessionOpenRequest)");
        return true;
    }
    if (*j.p != '{') {
        if (!walk_value(s, &j))
            return false;
        scan_fail(s, AS_EINVAL, "the body must be a JSON object (Volcano's OnSessionOpenRequest)");
        return true;
    }
    if (!walk_value(s, &j))
        return false;
    jscan_ws(&j);
    return j.p == j.end;
}

/* See vcsession.h. */
as_err vcsession_scan(cache *c, const char *body, size_t len, vcsession_stats *out, as_diag *d)
{
    memset(out, 0, sizeof *out);
    scan s = {.body = body, .len = len, .c = c, .st = out, .d = d};
    if (session_walk(&s, body, len))
        return s.err;
    memset(out, 0, sizeof *out);
    s = (scan){.body = body, .len = len, .c = c, .st = out, .d = d};
    yajl_handle h = yajl_alloc(&scan_callbacks, NULL, &s);
    if (!h)
        return as_diag_set(d, AS_ENOMEM, NULL, "out of memory");
    s.h = h;
    as_err err = AS_OK;
    yajl_status ys = yajl_parse(h, (const unsigned char *)body, len);
    if (ys == yajl_status_ok)
        ys = yajl_complete_parse(h);
    if (ys == yajl_status_ok) {
        if (!s.started)
            err = as_diag_set(d, AS_EINVAL, "",
                              "the body must be a JSON object (Volcano's OnSessionOpenRequest)");
        goto done;
    }
    if (s.err) {
        err = s.err;
        goto done;
    }
    unsigned char *msg = yajl_get_error(h, 0, (const unsigned char *)body, len);
    char text[160] = "invalid JSON";
    if (msg) {
        snprintf(text, sizeof text, "%s", (const char *)msg);
        text[strcspn(text, "\n")] = '\0';
        yajl_free_error(h, msg);
    }
    err = as_diag_set(d, AS_EPARSE, "",
                      "malformed JSON near byte %zu: %s (send a complete, valid UTF-8 JSON "
                      "document)",
                      yajl_get_bytes_consumed(h), text);
done:
    yajl_free(h);
    return err;
}

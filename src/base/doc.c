/*
 * doc.c - YAML / JSON documents into a jansson DOM.
 *
 * JSON (first non-blank character '{' or '[') goes to jansson with
 * duplicate keys rejected. Everything else goes through libyaml's event
 * API, building the DOM with an explicit stack (no recursion, depth capped
 * at DOC_MAX_DEPTH). Plain scalars are typed by the YAML 1.2 core schema:
 *   null: "" ~ null Null NULL        bool: true True TRUE false False FALSE
 *   int:  [-+]?[0-9]+, 0o[0-7]+, 0x[0-9a-fA-F]+
 *   float: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
 * Quoted, literal and folded scalars, and scalars tagged "!" or !!str, stay
 * strings. Values JSON cannot hold (.inf, .nan, integers beyond int64,
 * floats that overflow) stay strings with their original text, so e.g. a
 * huge quantity still reaches the quantity parser and gets a precise error.
 * Anchors and aliases are rejected, duplicate keys and non-scalar keys too.
 */
#include "agentsched/base/doc.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#define DOC_JSON_FLAGS JSON_REJECT_DUPLICATES

typedef struct doc_frame {
    json_t *node; /* object or array, borrowed from its parent (or the root) */
    char *key;    /* pending mapping key (malloc'ed), NULL when expecting a key */
    size_t keylen;
} doc_frame;

typedef struct doc_builder {
    doc_frame stack[DOC_MAX_DEPTH];
    int depth;
    json_t *root; /* current document's root (owned) */
    bool have_root;
    as_diag *diag;
} doc_builder;

static as_err doc_err_at(as_diag *diag, const yaml_mark_t *m, const char *fmt, const char *arg)
{
    char body[256];
    snprintf(body, sizeof body, fmt, arg);
    return as_diag_set(diag, AS_EPARSE, NULL, "line %zu column %zu: %s", m->line + 1, m->column + 1,
                       body);
}

static bool all_in(const char *s, size_t n, const char *set)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (!strchr(set, s[i]) || s[i] == '\0')
            return false;
    }
    return true;
}

static bool is_null_text(const char *s, size_t n)
{
    return n == 0 || (n == 1 && s[0] == '~') ||
           (n == 4 && (!memcmp(s, "null", 4) || !memcmp(s, "Null", 4) || !memcmp(s, "NULL", 4)));
}

static int bool_text(const char *s, size_t n)
{
    if (n == 4 && (!memcmp(s, "true", 4) || !memcmp(s, "True", 4) || !memcmp(s, "TRUE", 4)))
        return 1;
    if (n == 5 && (!memcmp(s, "false", 5) || !memcmp(s, "False", 5) || !memcmp(s, "FALSE", 5)))
        return 0;
    return -1;
}

/* Integer per the core schema: 1 with *out set, 0 when the text is an
 * integer that does not fit int64, -1 when it is not an integer at all. */
static int int_text(const char *s, size_t n, json_int_t *out)
{
    char buf[80];
    if (n == 0)
        return -1;
    if (n >= sizeof buf) {
        size_t i = (s[0] == '+' || s[0] == '-') ? 1 : 0;
        return all_in(s + i, n - i, "0123456789") ? 0 : -1;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    int base = 10;
    const char *digits = buf;
    if (n > 2 && buf[0] == '0' && buf[1] == 'o') {
        base = 8;
        digits = buf + 2;
        if (!all_in(digits, n - 2, "01234567"))
            return -1;
    } else if (n > 2 && buf[0] == '0' && buf[1] == 'x') {
        base = 16;
        digits = buf + 2;
        if (!all_in(digits, n - 2, "0123456789abcdefABCDEF"))
            return -1;
    } else {
        size_t i = (buf[0] == '+' || buf[0] == '-') ? 1 : 0;
        if (!all_in(buf + i, n - i, "0123456789"))
            return -1;
    }
    errno = 0;
    char *end;
    long long v = base == 10 ? strtoll(digits, &end, 10) : (long long)0;
    if (base != 10) {
        unsigned long long u = strtoull(digits, &end, base);
        if (errno || u > (unsigned long long)LLONG_MAX)
            return 0;
        v = (long long)u;
    }
    if (errno || *end)
        return 0;
    *out = (json_int_t)v;
    return 1;
}

static bool float_text(const char *s, size_t n, double *out)
{
    char buf[128];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    size_t i = (buf[0] == '+' || buf[0] == '-') ? 1 : 0;
    size_t mant = 0;
    bool dot = false;
    for (; buf[i] && (buf[i] == '.' || (buf[i] >= '0' && buf[i] <= '9')); i++) {
        if (buf[i] == '.') {
            if (dot)
                return false;
            dot = true;
        } else {
            mant++;
        }
    }
    if (mant == 0)
        return false;
    /* "5." is a float, but ".": no digits; a leading dot needs digits after */
    if (buf[i] == 'e' || buf[i] == 'E') {
        i++;
        if (buf[i] == '+' || buf[i] == '-')
            i++;
        if (!(buf[i] >= '0' && buf[i] <= '9'))
            return false;
        while (buf[i] >= '0' && buf[i] <= '9')
            i++;
    }
    if (buf[i])
        return false;
    errno = 0;
    double d = strtod(buf, NULL);
    if (!isfinite(d))
        return false;
    *out = d;
    return true;
}

#define TAG_PREFIX "tag:yaml.org,2002:"

/* Types a scalar event into a new JSON value (NULL + diag on error). */
static json_t *doc_scalar(const yaml_event_t *ev, as_diag *diag, as_err *err)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    const char *tag = (const char *)ev->data.scalar.tag;
    bool plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
    const char *want = NULL; /* explicitly requested core type */
    if (tag) {
        if (strcmp(tag, "!") == 0 || strcmp(tag, TAG_PREFIX "str") == 0)
            plain = false;
        else if (!strncmp(tag, TAG_PREFIX, strlen(TAG_PREFIX)))
            want = tag + strlen(TAG_PREFIX);
        /* other (application) tags are ignored: the value is typed as if
         * untagged */
    }
    if (memchr(s, '\0', n)) {
        *err = doc_err_at(diag, &ev->start_mark, "%s", "a string contains a NUL character");
        return NULL;
    }
    json_t *v = NULL;
    if (plain || want) {
        json_int_t i;
        double d;
        int b, ik = -1;
        if ((!want || !strcmp(want, "null")) && is_null_text(s, n))
            v = json_null();
        else if ((!want || !strcmp(want, "bool")) && (b = bool_text(s, n)) >= 0)
            v = json_boolean(b);
        else if ((!want || !strcmp(want, "int") || !strcmp(want, "float")) &&
                 (ik = int_text(s, n, &i)) == 1)
            v = want && !strcmp(want, "float") ? json_real((double)i) : json_integer(i);
        else if (ik == 0 && !want)
            v = NULL; /* an integer beyond int64: keep its text */
        else if ((!want || !strcmp(want, "float")) && float_text(s, n, &d))
            v = json_real(d);
        else if (want && strcmp(want, "str") != 0) {
            *err = doc_err_at(diag, &ev->start_mark, "value tagged !!%.20s does not look like one",
                              want);
            return NULL;
        }
        if (v)
            return v;
    }
    v = json_stringn(s, n);
    if (!v)
        *err = doc_err_at(diag, &ev->start_mark, "%s", "a string is not valid UTF-8");
    return v;
}

/* Places a finished value into the current container (or as the root).
 * Steals `v`. */
static as_err doc_place(doc_builder *b, json_t *v, const yaml_mark_t *m)
{
    if (b->depth == 0) {
        b->root = v;
        b->have_root = true;
        return AS_OK;
    }
    doc_frame *f = &b->stack[b->depth - 1];
    if (json_is_array(f->node)) {
        if (json_array_append_new(f->node, v))
            return as_diag_set(b->diag, AS_ENOMEM, NULL, "out of memory");
        return AS_OK;
    }
    /* scalar keys are taken by the caller before a value is placed */
    assert(f->key);
    if (json_object_getn(f->node, f->key, f->keylen)) {
        as_err e = as_diag_set(b->diag, AS_EPARSE, NULL,
                               "line %zu column %zu: duplicate key \"%.60s\" in a mapping; keep "
                               "only one",
                               m->line + 1, m->column + 1, f->key);
        json_decref(v);
        return e;
    }
    int rc = json_object_setn_new(f->node, f->key, f->keylen, v);
    free(f->key);
    f->key = NULL;
    if (rc)
        return as_diag_set(b->diag, AS_ENOMEM, NULL, "out of memory");
    return AS_OK;
}

static bool expecting_key(const doc_builder *b)
{
    return b->depth > 0 && json_is_object(b->stack[b->depth - 1].node) &&
           !b->stack[b->depth - 1].key;
}

static void doc_builder_reset(doc_builder *b)
{
    for (int i = 0; i < b->depth; i++) {
        free(b->stack[i].key);
        b->stack[i].key = NULL;
    }
    b->depth = 0;
    json_decref(b->root);
    b->root = NULL;
    b->have_root = false;
}

static as_err doc_parse_yaml(const char *buf, size_t len, bool multi, json_t **out, as_diag *diag)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    doc_builder b;
    memset(&b, 0, sizeof b);
    b.diag = diag;
    json_t *docs = json_array();
    if (!docs)
        return as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
    if (!yaml_parser_initialize(&parser)) {
        json_decref(docs);
        return as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    as_err err = AS_OK;
    bool done = false;
    while (!done) {
        if (!yaml_parser_parse(&parser, &ev)) {
            const char *ctx = parser.context ? parser.context : "";
            if (parser.error == YAML_READER_ERROR) {
                /* the reader reports a byte offset, not a line */
                err = as_diag_set(diag, AS_EPARSE, NULL,
                                  "byte offset %zu: %s (the input must be "
                                  "UTF-8 text)",
                                  parser.problem_offset,
                                  parser.problem ? parser.problem : "invalid input");
                goto done;
            }
            err =
                as_diag_set(diag, AS_EPARSE, NULL, "line %zu column %zu: %s%s%s",
                            parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                            parser.problem ? parser.problem : "invalid YAML", *ctx ? " " : "", ctx);
            goto done;
        }
        const yaml_mark_t *m = &ev.start_mark;
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            if (!multi && json_array_size(docs) > 0) {
                err = doc_err_at(diag, m, "%s",
                                 "more than one YAML document (---) where one is expected; "
                                 "keep a single document");
                goto ev_done;
            }
            break;
        case YAML_DOCUMENT_END_EVENT: {
            json_t *root = b.have_root ? b.root : json_null();
            b.root = NULL;
            b.have_root = false;
            if (json_array_append_new(docs, root)) {
                err = as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
                goto ev_done;
            }
            break;
        }
        case YAML_ALIAS_EVENT:
            err = doc_err_at(diag, m,
                             "YAML aliases (*%.60s) are not supported; write the value out in "
                             "full",
                             (const char *)ev.data.alias.anchor);
            goto ev_done;
        case YAML_SCALAR_EVENT:
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT: {
            const unsigned char *anchor = ev.type == YAML_SCALAR_EVENT ? ev.data.scalar.anchor
                                          : ev.type == YAML_SEQUENCE_START_EVENT
                                              ? ev.data.sequence_start.anchor
                                              : ev.data.mapping_start.anchor;
            if (anchor) {
                err = doc_err_at(diag, m,
                                 "YAML anchors (&%.60s) are not supported; write every value "
                                 "out in full",
                                 (const char *)anchor);
                goto ev_done;
            }
            if (ev.type == YAML_SCALAR_EVENT && expecting_key(&b)) {
                doc_frame *f = &b.stack[b.depth - 1];
                if (memchr(ev.data.scalar.value, '\0', ev.data.scalar.length)) {
                    err = doc_err_at(diag, m, "%s", "a key contains a NUL character");
                    goto ev_done;
                }
                f->key = strndup((const char *)ev.data.scalar.value, ev.data.scalar.length);
                f->keylen = ev.data.scalar.length;
                if (!f->key) {
                    err = as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
                    goto ev_done;
                }
                break;
            }
            if (ev.type != YAML_SCALAR_EVENT && expecting_key(&b)) {
                err = doc_err_at(diag, m, "%s",
                                 "mapping keys must be scalars (complex keys are not supported)");
                goto ev_done;
            }
            json_t *v;
            if (ev.type == YAML_SCALAR_EVENT) {
                v = doc_scalar(&ev, diag, &err);
                if (!v) {
                    if (!err)
                        err = as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
                    goto ev_done;
                }
            } else {
                if (b.depth >= DOC_MAX_DEPTH) {
                    err = as_diag_set(diag, AS_EPARSE, NULL,
                                      "line %zu column %zu: nesting deeper than %d levels; "
                                      "flatten the document",
                                      m->line + 1, m->column + 1, DOC_MAX_DEPTH);
                    goto ev_done;
                }
                v = ev.type == YAML_MAPPING_START_EVENT ? json_object() : json_array();
                if (!v) {
                    err = as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
                    goto ev_done;
                }
            }
            /* keep a borrowed pointer before doc_place steals the reference */
            json_t *node = v;
            if ((err = doc_place(&b, v, m)))
                goto ev_done;
            if (ev.type != YAML_SCALAR_EVENT) {
                b.stack[b.depth].node = node;
                b.stack[b.depth].key = NULL;
                b.depth++;
            }
            break;
        }
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            if (b.depth > 0)
                b.depth--;
            break;
        default:
            break;
        }
    ev_done:
        yaml_event_delete(&ev);
        if (err)
            goto done;
    }
done:
    yaml_parser_delete(&parser);
    doc_builder_reset(&b);
    if (err) {
        json_decref(docs);
        return err;
    }
    if (multi) {
        *out = docs;
    } else {
        *out = json_array_size(docs) ? json_incref(json_array_get(docs, 0)) : json_null();
        json_decref(docs);
    }
    return AS_OK;
}

/* Depth of a jansson tree, stopping once it exceeds the cap. */
static bool json_depth_ok(const json_t *v, int depth)
{
    if (!json_is_object(v) && !json_is_array(v))
        return true;
    if (depth >= DOC_MAX_DEPTH)
        return false;
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (!json_depth_ok(json_array_get(v, i), depth + 1))
                return false;
        }
        return true;
    }
    const char *k;
    const json_t *x;
    json_object_foreach((json_t *)v, k, x)
    {
        if (!json_depth_ok(x, depth + 1))
            return false;
    }
    return true;
}

/* See doc.h. */
as_err doc_parse(const char *buf, size_t len, bool multi, json_t **out, as_diag *diag)
{
    *out = NULL;
    size_t i = 0;
    /* a UTF-8 byte order mark is allowed in front of either format */
    if (len >= 3 && (unsigned char)buf[0] == 0xEF && (unsigned char)buf[1] == 0xBB &&
        (unsigned char)buf[2] == 0xBF)
        i = 3;
    size_t start = i;
    while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n'))
        i++;
    if (i < len && (buf[i] == '{' || buf[i] == '[')) {
        json_error_t je;
        json_t *v = json_loadb(buf + start, len - start, DOC_JSON_FLAGS, &je);
        if (!v)
            return as_diag_set(diag, AS_EPARSE, NULL, "line %d column %d: %s", je.line, je.column,
                               je.text);
        if (!json_depth_ok(v, 0)) {
            json_decref(v);
            return as_diag_set(diag, AS_EPARSE, NULL,
                               "nesting deeper than %d levels; flatten the document",
                               DOC_MAX_DEPTH);
        }
        if (multi) {
            json_t *arr = json_array();
            if (!arr || json_array_append_new(arr, v)) {
                json_decref(arr);
                return as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
            }
            v = arr;
        }
        *out = v;
        return AS_OK;
    }
    return doc_parse_yaml(buf, len, multi, out, diag);
}

/* See doc.h. */
as_err doc_read_file(const char *path, size_t cap, char **data, size_t *len, as_diag *diag)
{
    *data = NULL;
    *len = 0;
    if (cap == 0)
        cap = DOC_DEFAULT_FILE_CAP;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return as_diag_set(diag, AS_EIO, NULL, "%s: cannot open: %s", path, strerror(errno));
    as_err err = AS_OK;
    char *b = NULL;
    size_t n = 0, alloc = 0;
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size > cap) {
        err = as_diag_set(diag, AS_ETOOBIG, NULL,
                          "%s: file is %lld bytes, more than the limit of %zu bytes", path,
                          (long long)st.st_size, cap);
        goto done;
    }
    for (;;) {
        if (alloc - n < 2) {
            size_t na = alloc ? alloc * 2 : 64 * 1024;
            if (na > cap + 2)
                na = cap + 2;
            if (na <= alloc) {
                err = as_diag_set(diag, AS_ETOOBIG, NULL,
                                  "%s: file is larger than the limit of %zu bytes", path, cap);
                goto done;
            }
            char *nb = realloc(b, na);
            if (!nb) {
                err = as_diag_set(diag, AS_ENOMEM, NULL, "%s: out of memory", path);
                goto done;
            }
            b = nb;
            alloc = na;
        }
        ssize_t r = read(fd, b + n, alloc - n - 1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            err = as_diag_set(diag, AS_EIO, NULL, "%s: cannot read: %s", path, strerror(errno));
            goto done;
        }
        if (r == 0)
            break;
        n += (size_t)r;
        if (n > cap) {
            err = as_diag_set(diag, AS_ETOOBIG, NULL,
                              "%s: file is larger than the limit of %zu bytes", path, cap);
            goto done;
        }
    }
    if (!b && !(b = malloc(1))) {
        err = as_diag_set(diag, AS_ENOMEM, NULL, "%s: out of memory", path);
        goto done;
    }
    b[n] = '\0';
    *data = b;
    *len = n;
    b = NULL;
done:
    free(b);
    close(fd);
    return err;
}

/* See doc.h. */
as_err doc_load_file(const char *path, size_t cap, bool multi, json_t **out, as_diag *diag)
{
    *out = NULL;
    char *data;
    size_t len;
    as_err err = doc_read_file(path, cap, &data, &len, diag);
    if (err)
        return err;
    err = doc_parse(data, len, multi, out, diag);
    free(data);
    if (err && diag) {
        char tmp[sizeof diag->msg];
        snprintf(tmp, sizeof tmp, "%s: %s", path, diag->msg);
        memcpy(diag->msg, tmp, sizeof tmp);
    }
    return err;
}

/*
 * trace.c - see trace.h: the strict CSV reader of openb traces.
 */
#include "agentsched/cmd/trace.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agentsched/base/doc.h"
#include "agentsched/base/table.h"
#include "agentsched/model/node.h"
#include "agentsched/model/pod.h"

/* ------------------------------------------------------------------ */
/* CSV                                                                 */
/* ------------------------------------------------------------------ */

#define CSV_MAX_COLS 32

typedef struct csv {
    const char *name; /* file name for messages */
    const char *p, *end;
    size_t line;
    char buf[TRACE_MAX_LINE + 1];
    char *col[CSV_MAX_COLS];
    size_t ncol;
} csv;

/* csv_cut ends the value at s in place: unquoted, at the next comma; quoted
 * as RFC 4180 has it ("" inside stands for "), at its closing quote, which
 * must be on the line. *next is the value after it, NULL at the line's end.
 * Returns NULL, or what is wrong with the value. */
static const char *csv_cut(char *s, char **next)
{
    if (*s != '"') {
        char *comma = strchr(s, ',');
        size_t vlen = comma ? (size_t)(comma - s) : strlen(s);
        if (memchr(s, '"', vlen))
            return "a quote inside an unquoted value";
        *next = comma ? comma + 1 : NULL;
        if (comma)
            *comma = '\0';
        return NULL;
    }
    char *w = s, *r = s + 1;
    for (;; r++) {
        if (!*r)
            return "a quoted value does not end on its line";
        if (*r == '"' && r[1] != '"')
            break;
        *w++ = *r;
        if (*r == '"')
            r++; /* "" is one quote */
    }
    r++; /* past the closing quote */
    if (*r && *r != ',')
        return "text after a quoted value's closing quote";
    *next = *r ? r + 1 : NULL;
    *w = '\0';
    return NULL;
}

/* Reads the next non-empty line into c->col. Returns 1 on a row, 0 at end,
 * or an as_err (negated) on error. */
static int csv_next(csv *c, as_diag *diag, as_err *err)
{
    for (;;) {
        if (c->p >= c->end)
            return 0;
        const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
        const char *le = nl ? nl : c->end;
        size_t len = (size_t)(le - c->p);
        c->line++;
        if (len && c->p[len - 1] == '\r')
            len--;
        if (len > TRACE_MAX_LINE) {
            *err = as_diag_set(diag, AS_ETOOBIG, NULL,
                               "%s:%zu: line longer than %d bytes; is this an openb CSV file?",
                               c->name, c->line, TRACE_MAX_LINE);
            return -1;
        }
        memcpy(c->buf, c->p, len);
        c->buf[len] = '\0';
        c->p = nl ? nl + 1 : c->end;
        if (len == 0)
            continue;
        if (memchr(c->buf, '\0', len)) {
            *err = as_diag_set(diag, AS_EPARSE, NULL,
                               "%s:%zu: NUL bytes are not supported in trace CSV files", c->name,
                               c->line);
            return -1;
        }
        /* Split in place; a value may be quoted (a writer that quotes
         * every value). */
        c->ncol = 0;
        char *s = c->buf;
        for (;;) {
            if (c->ncol == CSV_MAX_COLS) {
                *err = as_diag_set(diag, AS_EPARSE, NULL, "%s:%zu: more than %d columns", c->name,
                                   c->line, CSV_MAX_COLS);
                return -1;
            }
            char *next;
            const char *why = csv_cut(s, &next);
            if (why) {
                *err = as_diag_set(diag, AS_EPARSE, NULL, "%s:%zu: column %zu: %s", c->name,
                                   c->line, c->ncol + 1, why);
                return -1;
            }
            c->col[c->ncol++] = s;
            if (!next)
                break;
            s = next;
        }
        return 1;
    }
}

/* A value that is not there: empty, or "nan", as the trace's own README
 * writes an absent model or gpu_spec (pandas' rendering of a missing
 * value). */
static bool csv_absent(const char *v)
{
    return !*v || strcasecmp(v, "nan") == 0;
}

static int csv_find(const char *const *hdr, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(hdr[i], name) == 0)
            return (int)i;
    return -1;
}

static as_err csv_int(const csv *c, const char *colname, const char *s, int64_t lo, int64_t hi,
                      int64_t *out, as_diag *diag)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno)
        return as_diag_set(diag, AS_EPARSE, colname, "%s:%zu: column %s: \"%s\" is not an integer",
                           c->name, c->line, colname, s);
    if (v < lo || v > hi)
        return as_diag_set(diag, AS_ERANGE, colname,
                           "%s:%zu: column %s: %lld is out of range (%lld..%lld)", c->name, c->line,
                           colname, v, (long long)lo, (long long)hi);
    *out = v;
    return AS_OK;
}

/* Header handling shared by both files: copies the header names and maps
 * the wanted columns (required ones must exist). */
typedef struct csv_hdr {
    char names[CSV_MAX_COLS][64];
    const char *ptr[CSV_MAX_COLS];
    size_t n;
} csv_hdr;

static as_err csv_header(csv *c, csv_hdr *h, as_diag *diag)
{
    as_err err = AS_OK;
    int r = csv_next(c, diag, &err);
    if (r < 0)
        return err;
    if (r == 0)
        return as_diag_set(diag, AS_EPARSE, NULL, "%s: empty file; expected a header line",
                           c->name);
    h->n = c->ncol;
    for (size_t i = 0; i < c->ncol; i++) {
        snprintf(h->names[i], sizeof h->names[i], "%s", c->col[i]);
        h->ptr[i] = h->names[i];
    }
    return AS_OK;
}

static as_err need_col(const csv *c, const csv_hdr *h, const char *name, int *idx, as_diag *diag)
{
    *idx = csv_find(h->ptr, h->n, name);
    if (*idx < 0)
        return as_diag_set(
            diag, AS_EINVAL, name, "%s:1: missing column %s (the openb header is needed, e.g. %s)",
            c->name, name,
            strcmp(name, "sn") == 0 || strcmp(name, "gpu") == 0 || strcmp(name, "model") == 0
                ? "sn,cpu_milli,memory_mib,gpu,model"
                : "name,cpu_milli,memory_mib,num_gpu,gpu_milli");
    return AS_OK;
}

static as_err row_width(const csv *c, const csv_hdr *h, as_diag *diag)
{
    if (c->ncol != h->n)
        return as_diag_set(diag, AS_EPARSE, NULL, "%s:%zu: %zu columns, the header has %zu",
                           c->name, c->line, c->ncol, h->n);
    return AS_OK;
}

static as_err grow(pool *pl, void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return AS_OK;
    size_t nc = *cap ? *cap * 2 : 1024;
    void *na = pool_alloc(pl, nc * elem);
    if (!na)
        return AS_ENOMEM;
    if (*arr)
        memcpy(na, *arr, *cap * elem);
    *arr = na;
    *cap = nc;
    return AS_OK;
}

/* Reads the next row into c->col and makes room for it in *arr (n rows of
 * elem bytes so far, grown in pl). Returns 1 on a row, 0 at the end, or a
 * negative number with *err set; what names the rows in messages. */
static int csv_row(csv *c, const csv_hdr *h, pool *pl, void **arr, size_t *cap, size_t n,
                   size_t elem, const char *what, as_diag *diag, as_err *err)
{
    int r = csv_next(c, diag, err);
    if (r <= 0)
        return r;
    if ((*err = row_width(c, h, diag)))
        return -1;
    if (n >= TRACE_MAX_ROWS) {
        *err = as_diag_set(diag, AS_ETOOBIG, NULL, "%s:%zu: more than %d %s", c->name, c->line,
                           TRACE_MAX_ROWS, what);
        return -1;
    }
    if (grow(pl, arr, cap, n, elem)) {
        *err = as_diag_set(diag, AS_ENOMEM, NULL, "%s: out of memory", c->name);
        return -1;
    }
    return 1;
}

static as_err parse_nodes(trace *t, const char *name, const char *text, size_t len, as_diag *diag)
{
    csv c = {.name = name, .p = text, .end = text + len};
    csv_hdr h;
    as_err err = csv_header(&c, &h, diag);
    int isn, icpu, imem, igpu, imodel;
    if (err || (err = need_col(&c, &h, "sn", &isn, diag)) ||
        (err = need_col(&c, &h, "cpu_milli", &icpu, diag)) ||
        (err = need_col(&c, &h, "memory_mib", &imem, diag)) ||
        (err = need_col(&c, &h, "gpu", &igpu, diag)))
        return err;
    imodel = csv_find(h.ptr, h.n, "model");
    size_t cap = 0;
    table names = {0}; /* sn -> its line, to refuse a node listed twice */
    for (;;) {
        int r = csv_row(&c, &h, t->pool, (void **)&t->nodes, &cap, t->nnodes, sizeof *t->nodes,
                        "nodes", diag, &err);
        if (r < 0)
            goto done;
        if (r == 0)
            break;
        trace_node *n = &t->nodes[t->nnodes];
        const char *sn = c.col[isn];
        if (!*sn || strlen(sn) > 253) {
            err = as_diag_set(diag, AS_EINVAL, "sn",
                              "%s:%zu: column sn: a node name of 1 to 253 characters is needed",
                              name, c.line);
            goto done;
        }
        if ((err = csv_int(&c, "cpu_milli", c.col[icpu], 1, INT64_C(1) << 40, &n->cpu, diag)) ||
            (err =
                 csv_int(&c, "memory_mib", c.col[imem], 1, INT64_C(1) << 30, &n->mem_mib, diag)) ||
            (err = csv_int(&c, "gpu", c.col[igpu], 0, MODEL_MAX_GPUS, &n->gpus, diag)))
            goto done;
        const char *model = imodel >= 0 && !csv_absent(c.col[imodel]) ? c.col[imodel] : "";
        if (strlen(model) > 63) {
            err = as_diag_set(diag, AS_EINVAL, "model",
                              "%s:%zu: column model: a label value is at most 63 characters", name,
                              c.line);
            goto done;
        }
        n->name = pool_strdup(t->pool, sn);
        n->model = *model ? pool_strdup(t->pool, model) : NULL;
        if (!n->name || (*model && !n->model)) {
            err = as_diag_set(diag, AS_ENOMEM, NULL, "%s: out of memory", name);
            goto done;
        }
        /* One node a name: a name listed twice would be one node in the
         * cluster but count twice in its capacity. */
        size_t snlen = strlen(n->name);
        uintptr_t first = (uintptr_t)table_get(&names, n->name, snlen);
        if (first) {
            err = as_diag_set(
                diag, AS_EINVAL, "sn",
                "%s:%zu: column sn: node %s is listed already, on line %zu; list each node once",
                name, c.line, n->name, (size_t)first);
            goto done;
        }
        if (table_put(&names, n->name, snlen, (void *)(uintptr_t)c.line) != AS_OK) {
            err = as_diag_set(diag, AS_ENOMEM, NULL, "%s: out of memory", name);
            goto done;
        }
        t->gpu_cap += n->gpus * MODEL_GPU_MILLI;
        t->cpu_cap += n->cpu;
        t->mem_cap += n->mem_mib;
        t->nnodes++;
    }
    if (t->nnodes == 0)
        err = as_diag_set(diag, AS_EINVAL, NULL, "%s: no nodes", name);
done:
    table_free(&names);
    return err;
}

static int pod_cmp(const void *a, const void *b)
{
    const trace_pod *x = a, *y = b;
    if (x->created != y->created)
        return x->created < y->created ? -1 : 1;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return x->line < y->line ? -1 : x->line > y->line;
}

static as_err parse_pods(trace *t, const char *name, const char *text, size_t len, as_diag *diag)
{
    csv c = {.name = name, .p = text, .end = text + len};
    csv_hdr h;
    as_err err = csv_header(&c, &h, diag);
    int iname, icpu, imem, ingpu, imilli;
    if (err || (err = need_col(&c, &h, "name", &iname, diag)) ||
        (err = need_col(&c, &h, "cpu_milli", &icpu, diag)) ||
        (err = need_col(&c, &h, "memory_mib", &imem, diag)) ||
        (err = need_col(&c, &h, "num_gpu", &ingpu, diag)) ||
        (err = need_col(&c, &h, "gpu_milli", &imilli, diag)))
        return err;
    int ispec = csv_find(h.ptr, h.n, "gpu_spec");
    int ict = csv_find(h.ptr, h.n, "creation_time");
    int idt = csv_find(h.ptr, h.n, "deletion_time");
    size_t cap = 0;
    for (;;) {
        int r = csv_row(&c, &h, t->pool, (void **)&t->pods, &cap, t->npods, sizeof *t->pods, "pods",
                        diag, &err);
        if (r < 0)
            return err;
        if (r == 0)
            break;
        trace_pod *p = &t->pods[t->npods];
        const char *pn = c.col[iname];
        if (!*pn || strlen(pn) > 200)
            return as_diag_set(diag, AS_EINVAL, "name",
                               "%s:%zu: column name: a pod name of 1 to 200 characters is "
                               "needed",
                               name, c.line);
        if ((err = csv_int(&c, "cpu_milli", c.col[icpu], 0, INT64_C(1) << 40, &p->cpu, diag)) ||
            (err =
                 csv_int(&c, "memory_mib", c.col[imem], 0, INT64_C(1) << 30, &p->mem_mib, diag)) ||
            (err = csv_int(&c, "num_gpu", c.col[ingpu], 0, MODEL_MAX_GPUS, &p->num_gpu, diag)) ||
            (err =
                 csv_int(&c, "gpu_milli", c.col[imilli], 0, MODEL_GPU_MILLI, &p->gpu_milli, diag)))
            return err;
        if (p->num_gpu == 0) {
            p->gpu_milli = 0;
        } else if (p->gpu_milli == 0) {
            p->gpu_milli = MODEL_GPU_MILLI; /* whole GPUs */
        } else if (p->num_gpu > 1 && p->gpu_milli != MODEL_GPU_MILLI) {
            return as_diag_set(diag, AS_EINVAL, "gpu_milli",
                               "%s:%zu: column gpu_milli: a GPU share (%lld) is part of one "
                               "GPU, but num_gpu is %lld",
                               name, c.line, (long long)p->gpu_milli, (long long)p->num_gpu);
        }
        p->created = 0;
        if (ict >= 0 && (err = csv_int(&c, "creation_time", c.col[ict], INT64_MIN + 1, INT64_MAX,
                                       &p->created, diag)))
            return err;
        p->deleted = -1;
        if (idt >= 0 && !csv_absent(c.col[idt])) {
            if ((err = csv_int(&c, "deletion_time", c.col[idt], INT64_MIN + 1, INT64_MAX,
                               &p->deleted, diag)))
                return err;
            if (p->deleted <= p->created)
                p->deleted = -1;
            else
                t->has_lifetimes = true;
        }
        p->gpu_spec = NULL;
        if (ispec >= 0 && !csv_absent(c.col[ispec])) {
            if (strlen(c.col[ispec]) > 1000)
                return as_diag_set(diag, AS_EINVAL, "gpu_spec", "%s:%zu: column gpu_spec: too long",
                                   name, c.line);
            if (!(p->gpu_spec = pool_strdup(t->pool, c.col[ispec])))
                return as_diag_set(diag, AS_ENOMEM, NULL, "%s: out of memory", name);
        }
        if (!(p->name = pool_strdup(t->pool, pn)))
            return as_diag_set(diag, AS_ENOMEM, NULL, "%s: out of memory", name);
        p->line = c.line;
        t->gpu_demand += p->num_gpu * p->gpu_milli;
        t->npods++;
    }
    if (t->npods == 0)
        return as_diag_set(diag, AS_EINVAL, NULL, "%s: no pods", name);
    /* Trace order: creation time, then name; file order without times. */
    if (ict >= 0)
        qsort(t->pods, t->npods, sizeof *t->pods, pod_cmp);
    return AS_OK;
}

/* See trace.h. */
as_err trace_parse(const char *nodes_name, const char *nodes_text, size_t nodes_len,
                   const char *pods_name, const char *pods_text, size_t pods_len, trace **out,
                   as_diag *diag)
{
    *out = NULL;
    trace *t = calloc(1, sizeof *t);
    if (!t)
        return as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
    as_err err = AS_OK;
    if (!(t->pool = pool_new((size_t)512 << 20))) {
        err = as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    if ((err = parse_nodes(t, nodes_name, nodes_text, nodes_len, diag)) ||
        (err = parse_pods(t, pods_name, pods_text, pods_len, diag)))
        goto done;
    *out = t;
done:
    if (err)
        trace_free(t);
    return err;
}

/* See trace.h. */
as_err trace_load(const char *nodes_csv, const char *pods_csv, trace **out, as_diag *diag)
{
    char *nt = NULL, *pt = NULL;
    size_t nl = 0, pl = 0;
    as_err err;
    *out = NULL;
    if ((err = doc_read_file(nodes_csv, TRACE_FILE_CAP, &nt, &nl, diag)) ||
        (err = doc_read_file(pods_csv, TRACE_FILE_CAP, &pt, &pl, diag)))
        goto done;
    err = trace_parse(nodes_csv, nt, nl, pods_csv, pt, pl, out, diag);
done:
    free(nt);
    free(pt);
    return err;
}

/* See trace.h. */
void trace_free(trace *t)
{
    if (!t)
        return;
    pool_free(t->pool);
    free(t);
}

/*
 * cluster.c - a cluster snapshot from a Kubernetes List (embedded mode).
 *
 * Accepts exactly what `kubectl get nodes,pods -A -o yaml|json` prints (a
 * List whose items carry their own kind), NodeList / PodList as the API
 * server returns them (items without kind take the list's), single Node or
 * Pod objects, and several such documents in one YAML stream. Items of
 * other kinds (Services, ...) are skipped.
 */
#include "agentsched/base/doc.h"
#include "agentsched/base/log.h"
#include "agentsched/model/cluster.h"
#include "model_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cl_where {
    char s[48]; /* "items[3]" or "[1].items[3]" */
} cl_where;

typedef struct cl_dec {
    model_registry *reg;
    model_cluster *c;
    size_t node_alloc, pod_alloc, where_alloc;
    cl_where *node_where; /* where each node came from, for duplicate messages */
    as_diag *diag;
} cl_dec;

/* Prepends "<prefix>: " to diag->msg and "<prefix>" to diag->field. */
static void cl_prefix(as_diag *diag, const char *prefix)
{
    if (!diag || !*prefix)
        return;
    as_diag_prefix_field(diag, prefix);
    char tmp[sizeof diag->msg];
    snprintf(tmp, sizeof tmp, "%s: %s", prefix, diag->msg);
    memcpy(diag->msg, tmp, sizeof tmp);
}

static as_err cl_grow(void **arr, size_t *alloc, size_t need, size_t elem)
{
    if (need <= *alloc)
        return AS_OK;
    size_t n = *alloc ? *alloc * 2 : 64;
    while (n < need)
        n *= 2;
    void *p = realloc(*arr, n * elem);
    if (!p)
        return AS_ENOMEM;
    *arr = p;
    *alloc = n;
    return AS_OK;
}

static as_err cl_item(cl_dec *d, const json_t *item, const char *kind, const char *where)
{
    as_err err;
    if (strcmp(kind, "Node") == 0) {
        model_node *n;
        if ((err = model_node_from_json(d->reg, item, &n, d->diag))) {
            cl_prefix(d->diag, where);
            return err;
        }
        if (cl_grow((void **)&d->c->nodes, &d->node_alloc, d->c->nnodes + 1, sizeof(void *)) ||
            cl_grow((void **)&d->node_where, &d->where_alloc, d->c->nnodes + 1, sizeof(cl_where))) {
            model_node_free(n);
            return as_diag_set(d->diag, AS_ENOMEM, where, "out of memory");
        }
        snprintf(d->node_where[d->c->nnodes].s, sizeof d->node_where[0].s, "%s",
                 *where ? where : "document");
        d->c->nodes[d->c->nnodes++] = n;
        return AS_OK;
    }
    if (strcmp(kind, "Pod") == 0) {
        model_pod *p;
        if ((err = model_pod_from_json(d->reg, item, &p, d->diag))) {
            cl_prefix(d->diag, where);
            return err;
        }
        if (cl_grow((void **)&d->c->pods, &d->pod_alloc, d->c->npods + 1, sizeof(void *))) {
            model_pod_free(p);
            return as_diag_set(d->diag, AS_ENOMEM, where, "out of memory");
        }
        d->c->pods[d->c->npods++] = p;
        return AS_OK;
    }
    log_debug("msg=\"cluster item skipped\" item=%s kind=%s", where, kind);
    return AS_OK;
}

static const char *const cl_expect =
    "expected a Kubernetes List of Nodes and Pods (as `kubectl get nodes,pods -A -o yaml` "
    "prints), a NodeList, a PodList, a Node or a Pod";

/* One document; `doc_prefix` is "" for a single document or "[i]" for
 * document i of a multi-document stream. */
static as_err cl_doc(cl_dec *d, const json_t *doc, const char *doc_prefix)
{
    char where[64];
    if (json_is_null(doc))
        return AS_OK; /* an empty YAML document */
    if (!json_is_object(doc))
        return as_diag_set(d->diag, AS_EINVAL, doc_prefix, "%s%sthe document is %s; %s", doc_prefix,
                           *doc_prefix ? ": " : "", model_priv_type_name(doc), cl_expect);
    const json_t *kind = json_object_get(doc, "kind");
    if (!json_is_string(kind)) {
        snprintf(where, sizeof where, "%s%skind", doc_prefix, *doc_prefix ? "." : "");
        return as_diag_set(d->diag, AS_EINVAL, where, "%s: %s; %s", where,
                           kind ? "must be a string" : "is missing", cl_expect);
    }
    const char *k = json_string_value(kind);
    bool is_list = !strcmp(k, "List") || !strcmp(k, "NodeList") || !strcmp(k, "PodList");
    if (!is_list) {
        if (strcmp(k, "Node") != 0 && strcmp(k, "Pod") != 0) {
            /* in a stream of manifests other kinds are skipped like list
             * items; a lone document of another kind is a mistake */
            if (*doc_prefix) {
                log_debug("msg=\"cluster document skipped\" document=%s kind=%s", doc_prefix, k);
                return AS_OK;
            }
            snprintf(where, sizeof where, "%s%skind", doc_prefix, *doc_prefix ? "." : "");
            return as_diag_set(d->diag, AS_EINVAL, where, "%s: unexpected kind \"%.40s\"; %s",
                               where, k, cl_expect);
        }
        snprintf(where, sizeof where, "%s", doc_prefix);
        return cl_item(d, doc, k, where);
    }
    const json_t *items = json_object_get(doc, "items");
    if (items && !json_is_null(items) && !json_is_array(items)) {
        snprintf(where, sizeof where, "%s%sitems", doc_prefix, *doc_prefix ? "." : "");
        return as_diag_set(d->diag, AS_EINVAL, where, "%s: must be a list, not %s", where,
                           model_priv_type_name(items));
    }
    const char *dflt = !strcmp(k, "NodeList") ? "Node" : !strcmp(k, "PodList") ? "Pod" : NULL;
    for (size_t i = 0; i < json_array_size(items); i++) {
        const json_t *it = json_array_get(items, i);
        snprintf(where, sizeof where, "%s%sitems[%zu]", doc_prefix, *doc_prefix ? "." : "", i);
        if (!json_is_object(it))
            return as_diag_set(d->diag, AS_EINVAL, where,
                               "%s: must be an object (a Node or a Pod), not %s", where,
                               model_priv_type_name(it));
        const json_t *ik = json_object_get(it, "kind");
        const char *ks = dflt;
        if (ik && !json_is_null(ik)) {
            if (!json_is_string(ik)) {
                char fp[80];
                snprintf(fp, sizeof fp, "%s.kind", where);
                return as_diag_set(d->diag, AS_EINVAL, fp, "%s: must be a string, not %s", fp,
                                   model_priv_type_name(ik));
            }
            ks = json_string_value(ik);
        }
        if (!ks) {
            char fp[80];
            snprintf(fp, sizeof fp, "%s.kind", where);
            return as_diag_set(d->diag, AS_EINVAL, fp,
                               "%s: is missing; every item of a List needs kind: Node or kind: "
                               "Pod",
                               fp);
        }
        as_err err = cl_item(d, it, ks, where);
        if (err)
            return err;
    }
    return AS_OK;
}

typedef struct cl_name {
    const char *name;
    size_t node;
} cl_name;

static int cl_name_cmp(const void *a, const void *b)
{
    const cl_name *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return x->node < y->node ? -1 : x->node > y->node;
}

static as_err cl_check_dups(cl_dec *d)
{
    size_t n = d->c->nnodes;
    if (n < 2)
        return AS_OK;
    cl_name *v = malloc(n * sizeof *v);
    if (!v)
        return as_diag_set(d->diag, AS_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        v[i].name = d->c->nodes[i]->name;
        v[i].node = i;
    }
    qsort(v, n, sizeof *v, cl_name_cmp);
    as_err err = AS_OK;
    for (size_t i = 1; i < n; i++) {
        if (strcmp(v[i].name, v[i - 1].name) == 0) {
            /* report the later occurrence (the sort is stable by position) */
            const char *first = d->node_where[v[i - 1].node].s;
            const char *second = d->node_where[v[i].node].s;
            char fp[80];
            snprintf(fp, sizeof fp, "%s.metadata.name", second);
            err = as_diag_set(d->diag, AS_EEXIST, fp,
                              "%s: node %.100s appears twice (%s and %s); node names must be "
                              "unique, remove one",
                              second, v[i].name, first, second);
            break;
        }
    }
    free(v);
    return err;
}

/* See cluster.h. */
as_err model_cluster_from_json(model_registry *reg, const json_t *doc, model_cluster **out,
                               as_diag *diag)
{
    *out = NULL;
    cl_dec d = {.reg = reg, .diag = diag};
    d.c = calloc(1, sizeof *d.c);
    if (!d.c)
        return as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
    as_err err = AS_OK;
    if (json_is_array(doc)) {
        size_t n = json_array_size(doc);
        char pfx[32];
        for (size_t i = 0; i < n && !err; i++) {
            /* one document needs no "[0]" in front of every path */
            if (n == 1)
                pfx[0] = '\0';
            else
                snprintf(pfx, sizeof pfx, "[%zu]", i);
            err = cl_doc(&d, json_array_get(doc, i), pfx);
        }
    } else if (doc) {
        err = cl_doc(&d, doc, "");
    } else {
        err = as_diag_set(diag, AS_EINVAL, NULL, "no document; %s", cl_expect);
    }
    if (!err)
        err = cl_check_dups(&d);
    free(d.node_where);
    if (err) {
        model_cluster_free(d.c);
        return err;
    }
    *out = d.c;
    return AS_OK;
}

/* See cluster.h. */
as_err model_cluster_load(model_registry *reg, const char *path, model_cluster **out, as_diag *diag)
{
    *out = NULL;
    json_t *doc;
    as_err err = doc_load_file(path, 0, true, &doc, diag);
    if (err)
        return err;
    err = model_cluster_from_json(reg, doc, out, diag);
    json_decref(doc);
    if (err && diag) {
        char tmp[sizeof diag->msg];
        snprintf(tmp, sizeof tmp, "%s: %s", path, diag->msg);
        memcpy(diag->msg, tmp, sizeof tmp);
    }
    return err;
}

/* See cluster.h. */
void model_cluster_free(model_cluster *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->nnodes; i++)
        model_node_free(c->nodes[i]);
    for (size_t i = 0; i < c->npods; i++)
        model_pod_free(c->pods[i]);
    free(c->nodes);
    free(c->pods);
    free(c);
}

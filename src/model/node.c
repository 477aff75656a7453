/* node.c - v1 Node decoder. */
#include "agentsched/base/log.h"
#include "agentsched/model/node.h"
#include "model_priv.h"

#include <stdio.h>
#include <string.h>

/*
 * Decodes a ResourceList (status.allocatable / status.capacity). Extended
 * names are interned when the node has a non-zero amount of them: a zero
 * entry (hugepages-1Gi: "0", as every kubelet reports) cannot satisfy any
 * request, so it must not use up one of the MODEL_MAX_RES slots. A full
 * registry (AS_ELIMIT) or an over-long name only drops that resource, with
 * a warning: the node is still usable for everything else, and pods that
 * ask for the dropped resource get unknown_res and fit nowhere.
 * The GPU share resource (reg->gpu_share_name) is never a vector entry.
 */
static as_err node_resources(model_priv_ctx *c, model_registry *reg, const json_t *map,
                             const char *path, model_resvec *out)
{
    const char *key;
    size_t klen;
    json_t *val;
    char fp[MODEL_PRIV_PATH_MAX];
    json_object_keylen_foreach((json_t *)map, key, klen, val)
    {
        as_err err = model_priv_key(c, key, klen, path);
        if (err)
            return err;
        model_priv_path_key(fp, sizeof fp, path, key);
        int64_t q;
        err = model_priv_quantity(c, val, strcmp(key, "cpu") == 0, fp, &q);
        if (err)
            return err;
        if (strcmp(key, reg->gpu_share_name) == 0)
            continue;
        int idx = model_registry_lookup(reg, key, klen);
        if (idx < 0) {
            if (q == 0)
                continue;
            err = model_registry_intern(reg, key, klen, &idx);
            if (err == AS_ELIMIT || err == AS_EINVAL) {
                log_warn("msg=\"resource ignored\" object=\"%s\" field=%s reason=\"%s\"", c->what,
                         fp,
                         err == AS_ELIMIT ? "resource registry full (MODEL_MAX_RES names)"
                                          : "resource name too long");
                continue;
            }
            if (err)
                return model_priv_fail(c, err, fp, "cannot register resource: %s",
                                       as_strerror(err));
        }
        out->v[idx] = q;
    }
    return AS_OK;
}

static as_err node_taints(model_priv_ctx *c, const json_t *arr, model_node *n)
{
    size_t cnt = json_array_size(arr);
    if (cnt == 0)
        return AS_OK;
    model_taint *t = pool_alloc(c->pool, cnt * sizeof *t);
    if (!t)
        return model_priv_oom(c, "spec.taints");
    char base[MODEL_PRIV_PATH_MAX], fp[MODEL_PRIV_PATH_MAX];
    for (size_t i = 0; i < cnt; i++) {
        const json_t *it = json_array_get(arr, i);
        snprintf(base, sizeof base, "spec.taints[%zu]", i);
        if (!json_is_object(it))
            return model_priv_fail(c, AS_EINVAL, base,
                                   "must be an object with key and effect, not %s",
                                   model_priv_type_name(it));
        as_err err;
        snprintf(fp, sizeof fp, "%s.key", base);
        if ((err = model_priv_get_str(c, it, "key", fp, "", &t[i].key)))
            return err;
        if (!t[i].key[0])
            return model_priv_fail(c, AS_EINVAL, fp, "a taint needs a non-empty key");
        snprintf(fp, sizeof fp, "%s.value", base);
        if ((err = model_priv_get_str(c, it, "value", fp, "", &t[i].value)))
            return err;
        snprintf(fp, sizeof fp, "%s.effect", base);
        const char *eff;
        if ((err = model_priv_get_str(c, it, "effect", fp, "", &eff)))
            return err;
        if (!model_priv_effect_parse(eff, &t[i].effect))
            return model_priv_fail(c, AS_EINVAL, fp,
                                   "unknown taint effect \"%.40s\"; use NoSchedule, "
                                   "PreferNoSchedule or NoExecute",
                                   eff);
    }
    n->taints = t;
    n->ntaints = (uint32_t)cnt;
    return AS_OK;
}

static as_err node_ready(model_priv_ctx *c, const json_t *status, model_node *n)
{
    const json_t *conds;
    as_err err = model_priv_get(c, status, "conditions", "status.conditions", JSON_ARRAY, &conds);
    if (err)
        return err;
    /* No Ready condition at all (a hand-written node) counts as ready; the
     * kubelet always reports one on real nodes. */
    n->ready = true;
    char fp[MODEL_PRIV_PATH_MAX];
    for (size_t i = 0; i < json_array_size(conds); i++) {
        const json_t *it = json_array_get(conds, i);
        snprintf(fp, sizeof fp, "status.conditions[%zu]", i);
        if (!json_is_object(it))
            return model_priv_fail(c, AS_EINVAL, fp, "must be an object, not %s",
                                   model_priv_type_name(it));
        const json_t *type, *st;
        char tp[MODEL_PRIV_PATH_MAX];
        snprintf(tp, sizeof tp, "%s.type", fp);
        if ((err = model_priv_get(c, it, "type", tp, JSON_STRING, &type)))
            return err;
        if (!type || !model_priv_str_is(type, "Ready"))
            continue;
        snprintf(tp, sizeof tp, "%s.status", fp);
        if ((err = model_priv_get(c, it, "status", tp, JSON_STRING, &st)))
            return err;
        n->ready = st && model_priv_str_is(st, "True");
    }
    return AS_OK;
}

/* See node.h. */
as_err model_node_from_json(model_registry *reg, const json_t *obj, model_node **out, as_diag *diag)
{
    *out = NULL;
    model_priv_ctx c = {.diag = diag};
    snprintf(c.what, sizeof c.what, "node");
    if (!json_is_object(obj))
        return model_priv_fail(&c, AS_EINVAL, "", "a Node must be an object, not %s",
                               obj ? model_priv_type_name(obj) : "nothing");
    c.pool = pool_new(0);
    if (!c.pool)
        return model_priv_oom(&c, "");
    model_node *n = pool_alloc(c.pool, sizeof *n);
    as_err err = AS_OK;
    if (!n) {
        err = model_priv_oom(&c, "");
        goto done;
    }
    n->pool = c.pool;

    const json_t *kind, *meta, *spec, *status, *v;
    if ((err = model_priv_get(&c, obj, "kind", "kind", JSON_STRING, &kind)))
        goto done;
    if (kind && !model_priv_str_is(kind, "Node")) {
        err = model_priv_fail(&c, AS_EINVAL, "kind", "expected kind Node, got \"%.40s\"",
                              json_string_value(kind));
        goto done;
    }
    if ((err = model_priv_get(&c, obj, "metadata", "metadata", JSON_OBJECT, &meta)))
        goto done;
    if ((err = model_priv_get_str(&c, meta, "name", "metadata.name", "", &n->name)))
        goto done;
    if (!n->name[0]) {
        err = model_priv_fail(&c, AS_EINVAL, "metadata.name",
                              "a Node needs a non-empty metadata.name");
        goto done;
    }
    snprintf(c.what, sizeof c.what, "node %.180s", n->name);
    if ((err = model_priv_get_str(&c, meta, "uid", "metadata.uid", "", &n->uid)))
        goto done;
    if ((err = model_priv_get_str(&c, meta, "resourceVersion", "metadata.resourceVersion", "",
                                  &n->resource_version)))
        goto done;
    if ((err = model_priv_get(&c, meta, "labels", "metadata.labels", JSON_OBJECT, &v)))
        goto done;
    if ((err = model_priv_labels(&c, v, "metadata.labels", &n->labels)))
        goto done;

    if ((err = model_priv_get(&c, obj, "spec", "spec", JSON_OBJECT, &spec)))
        goto done;
    if ((err = model_priv_get(&c, spec, "unschedulable", "spec.unschedulable", JSON_TRUE, &v)))
        goto done;
    n->unschedulable = v && json_is_true(v);
    if ((err = model_priv_get(&c, spec, "taints", "spec.taints", JSON_ARRAY, &v)))
        goto done;
    if (v && (err = node_taints(&c, v, n)))
        goto done;

    if ((err = model_priv_get(&c, obj, "status", "status", JSON_OBJECT, &status)))
        goto done;
    const json_t *alloc, *cap;
    if ((err =
             model_priv_get(&c, status, "allocatable", "status.allocatable", JSON_OBJECT, &alloc)))
        goto done;
    if ((err = model_priv_get(&c, status, "capacity", "status.capacity", JSON_OBJECT, &cap)))
        goto done;
    if (!alloc && !cap) {
        err = model_priv_fail(&c, AS_EINVAL, "status.allocatable",
                              "the node reports neither status.allocatable nor "
                              "status.capacity; add status.allocatable (e.g. cpu, memory, pods)");
        goto done;
    }
    if (cap && (err = node_resources(&c, reg, cap, "status.capacity", &n->capacity)))
        goto done;
    /* SetDefaults_NodeStatus: a missing allocatable means capacity */
    if (alloc) {
        if ((err = node_resources(&c, reg, alloc, "status.allocatable", &n->alloc)))
            goto done;
    } else {
        n->alloc = n->capacity;
    }
    if ((err = node_ready(&c, status, n)))
        goto done;

    int gpu = __atomic_load_n(&reg->gpu_res, __ATOMIC_ACQUIRE);
    if (gpu >= 0 && n->alloc.v[gpu] > 0) {
        int64_t g = n->alloc.v[gpu];
        if (g > MODEL_MAX_GPUS) {
            /* device bookkeeping is a fixed array; the vector keeps the real
             * count, devices beyond the cap are simply never handed out */
            log_warn("msg=\"GPU count capped\" node=%s %s=%lld cap=%d", n->name, reg->gpu_name,
                     (long long)g, MODEL_MAX_GPUS);
            g = MODEL_MAX_GPUS;
        }
        n->ngpus = (uint32_t)g;
    }
    n->gpu_model = model_labels_get(&n->labels, reg->gpu_model_label);

done:
    if (err) {
        pool_free(c.pool);
        return err;
    }
    *out = n;
    return AS_OK;
}

/* See node.h. */
void model_node_free(model_node *n)
{
    if (n)
        pool_free(n->pool);
}

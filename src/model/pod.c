/*
 * pod.c - v1 Pod decoder and the effective pod request.
 *
 * The request is computed the way kube-scheduler's NodeResourcesFit does
 * (k8s.io/component-helpers/resource PodRequests with default options), on
 * the object as the API server stores it:
 *   1. per container, requests; a resource with a limit but no request
 *      gets the limit (SetDefaults_Pod does this in the API server, so a
 *      pod read back from it always carries those requests);
 *   2. sum over spec.containers;
 *   3. init containers in order: a sidecar (restartPolicy: Always) is added
 *      to the sum and to a running sidecar total; a regular init container
 *      needs itself + the sidecars started before it; the pod needs the max
 *      of the sum and every init container's need, per resource;
 *   4. pod-level spec.resources (PodLevelResources): requests for cpu /
 *      memory replace the container aggregate; pod-level limits without a
 *      request stand in for it when no container asked for that resource
 *      (the API server's defaultPodRequests);
 *   5. plus spec.overhead;
 *   6. pods = 1.
 * GPUs: whole GPUs (reg->gpu_name) stay in the vector AND set gpu_count=k,
 * gpu_milli=1000, so the vector accounting still counts whole devices; the
 * share resource (reg->gpu_share_name, milli-GPU of one device) is not a
 * vector entry, it only sets gpu_count=1, gpu_milli=value (1..1000). The
 * share and whole GPUs are aggregated with the same sum/max rules. Whole
 * GPUs leave the vector only while no node has the resource (nothing to
 * index it by yet); a GPU pod is never unknown_res.
 */
#include "agentsched/model/pod.h"
#include "agentsched/model/gpuannot.h"
#include "agentsched/model/node.h"
#include "model_priv.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#define ACC_SHARE MODEL_MAX_RES       /* reg->gpu_share_name */
#define ACC_WHOLE (MODEL_MAX_RES + 1) /* reg->gpu_name, even when not interned */
#define ACC_N     (MODEL_MAX_RES + 2)

typedef struct acc {
    int64_t v[ACC_N];
    uint32_t present; /* bit per slot: the resource was named (even with 0) */
} acc;

typedef struct pod_dec {
    model_priv_ctx c;
    const model_registry *reg;
    model_pod *pod;
    char share_path[MODEL_PRIV_PATH_MAX]; /* first field asking for a GPU share */
    char whole_path[MODEL_PRIV_PATH_MAX]; /* first field asking for whole GPUs */
} pod_dec;

_Static_assert(ACC_N <= 32, "acc.present is 32 bits");

static as_err acc_add(pod_dec *d, acc *dst, const acc *src, const char *path)
{
    for (int i = 0; i < ACC_N; i++) {
        if (__builtin_add_overflow(dst->v[i], src->v[i], &dst->v[i]))
            return model_priv_fail(&d->c, AS_ERANGE, path,
                                   "the summed requests of a resource overflow a 64-bit "
                                   "integer; use realistic quantities");
    }
    dst->present |= src->present;
    return AS_OK;
}

static void acc_max(acc *dst, const acc *src)
{
    for (int i = 0; i < ACC_N; i++) {
        if (src->v[i] > dst->v[i])
            dst->v[i] = src->v[i];
    }
    dst->present |= src->present;
}

/*
 * Adds one ResourceList into *a (slots are set, not added: the keys of one
 * list are unique). Keys also present in `skip` are ignored (used for
 * limits defaulting into requests).
 */
static as_err pod_reslist(pod_dec *d, const json_t *map, const json_t *skip, const char *path,
                          acc *a)
{
    const char *key;
    size_t klen;
    json_t *val;
    char fp[MODEL_PRIV_PATH_MAX];
    const model_registry *reg = d->reg;
    json_object_keylen_foreach((json_t *)map, key, klen, val)
    {
        as_err err = model_priv_key(&d->c, key, klen, path);
        if (err)
            return err;
        if (klen == 0)
            return model_priv_fail(&d->c, AS_EINVAL, path,
                                   "a resource name is empty; name every resource (e.g. cpu, "
                                   "nvidia.com/gpu)");
        if (skip && json_object_get(skip, key))
            continue;
        model_priv_path_key(fp, sizeof fp, path, key);
        int64_t q;
        err = model_priv_quantity(&d->c, val, strcmp(key, "cpu") == 0, fp, &q);
        if (err)
            return err;
        if (strcmp(key, reg->gpu_share_name) == 0) {
            a->v[ACC_SHARE] = q;
            a->present |= 1u << ACC_SHARE;
            if (q && !d->share_path[0])
                snprintf(d->share_path, sizeof d->share_path, "%s", fp);
            continue;
        }
        bool whole = strcmp(key, reg->gpu_name) == 0;
        if (whole) {
            a->v[ACC_WHOLE] = q;
            a->present |= 1u << ACC_WHOLE;
            if (q && !d->whole_path[0])
                snprintf(d->whole_path, sizeof d->whole_path, "%s", fp);
        }
        int idx = model_registry_lookup(reg, key, klen);
        if (idx < 0 && whole)
            continue; /* gpu_count carries it; see the share below */
        if (idx < 0) {
            /* no node has it: remember, but never intern on behalf of a pod */
            if (q && !d->pod->unknown_res) {
                d->pod->unknown_res = pool_strdup(d->c.pool, key);
                if (!d->pod->unknown_res)
                    return model_priv_oom(&d->c, fp);
            }
            continue;
        }
        a->v[idx] = q;
        a->present |= 1u << idx;
    }
    return AS_OK;
}

/* Requests of one container, with limits defaulting missing requests. */
static as_err pod_container(pod_dec *d, const json_t *ctr, const char *base, acc *a, bool *sidecar)
{
    memset(a, 0, sizeof *a);
    if (sidecar)
        *sidecar = false;
    if (!json_is_object(ctr))
        return model_priv_fail(&d->c, AS_EINVAL, base, "a container must be an object, not %s",
                               model_priv_type_name(ctr));
    char fp[MODEL_PRIV_PATH_MAX];
    const json_t *res, *req, *lim, *rp;
    as_err err;
    model_priv_path(fp, sizeof fp, base, ".resources");
    if ((err = model_priv_get(&d->c, ctr, "resources", fp, JSON_OBJECT, &res)))
        return err;
    model_priv_path(fp, sizeof fp, base, ".resources.requests");
    if ((err = model_priv_get(&d->c, res, "requests", fp, JSON_OBJECT, &req)))
        return err;
    if (req && (err = pod_reslist(d, req, NULL, fp, a)))
        return err;
    model_priv_path(fp, sizeof fp, base, ".resources.limits");
    if ((err = model_priv_get(&d->c, res, "limits", fp, JSON_OBJECT, &lim)))
        return err;
    if (lim && (err = pod_reslist(d, lim, req, fp, a)))
        return err;
    if (sidecar) {
        model_priv_path(fp, sizeof fp, base, ".restartPolicy");
        if ((err = model_priv_get(&d->c, ctr, "restartPolicy", fp, JSON_STRING, &rp)))
            return err;
        *sidecar = rp && model_priv_str_is(rp, "Always");
    }
    return AS_OK;
}

static as_err pod_requests(pod_dec *d, const json_t *spec)
{
    const json_t *ctrs, *inits, *over, *pres;
    as_err err;
    if ((err = model_priv_get(&d->c, spec, "containers", "spec.containers", JSON_ARRAY, &ctrs)))
        return err;
    if ((err = model_priv_get(&d->c, spec, "initContainers", "spec.initContainers", JSON_ARRAY,
                              &inits)))
        return err;

    acc total = {{0}, 0}, one, sidecars = {{0}, 0}, initmax = {{0}, 0};
    char base[MODEL_PRIV_PATH_MAX];
    for (size_t i = 0; i < json_array_size(ctrs); i++) {
        model_priv_path_idx(base, sizeof base, "spec.containers", i);
        if ((err = pod_container(d, json_array_get(ctrs, i), base, &one, NULL)))
            return err;
        if ((err = acc_add(d, &total, &one, base)))
            return err;
    }
    int64_t containers_cpu = total.v[MODEL_RES_CPU];
    for (size_t i = 0; i < json_array_size(inits); i++) {
        bool sidecar;
        model_priv_path_idx(base, sizeof base, "spec.initContainers", i);
        if ((err = pod_container(d, json_array_get(inits, i), base, &one, &sidecar)))
            return err;
        if (sidecar) {
            if ((err = acc_add(d, &total, &one, base)) || (err = acc_add(d, &sidecars, &one, base)))
                return err;
            acc_max(&initmax, &sidecars);
        } else {
            if ((err = acc_add(d, &one, &sidecars, base)))
                return err;
            acc_max(&initmax, &one);
        }
    }
    acc_max(&total, &initmax);

    /* pod-level resources: only cpu and memory are honoured here */
    if ((err = model_priv_get(&d->c, spec, "resources", "spec.resources", JSON_OBJECT, &pres)))
        return err;
    if (pres) {
        const json_t *preq, *plim;
        if ((err = model_priv_get(&d->c, pres, "requests", "spec.resources.requests", JSON_OBJECT,
                                  &preq)) ||
            (err = model_priv_get(&d->c, pres, "limits", "spec.resources.limits", JSON_OBJECT,
                                  &plim)))
            return err;
        static const struct {
            const char *name;
            int idx;
        } lvl[] = {{"cpu", MODEL_RES_CPU}, {"memory", MODEL_RES_MEMORY}};
        for (size_t k = 0; k < sizeof lvl / sizeof lvl[0]; k++) {
            const json_t *q = preq ? json_object_get(preq, lvl[k].name) : NULL;
            const char *what = "spec.resources.requests";
            if (!q && plim && !(total.present & (1u << lvl[k].idx))) {
                q = json_object_get(plim, lvl[k].name);
                what = "spec.resources.limits";
            }
            if (!q)
                continue;
            char fp[MODEL_PRIV_PATH_MAX];
            model_priv_path_key(fp, sizeof fp, what, lvl[k].name);
            if ((err = model_priv_quantity(&d->c, q, lvl[k].idx == MODEL_RES_CPU, fp,
                                           &total.v[lvl[k].idx])))
                return err;
            total.present |= 1u << lvl[k].idx;
        }
    }

    if ((err = model_priv_get(&d->c, spec, "overhead", "spec.overhead", JSON_OBJECT, &over)))
        return err;
    if (over) {
        memset(&one, 0, sizeof one);
        if ((err = pod_reslist(d, over, NULL, "spec.overhead", &one)) ||
            (err = acc_add(d, &total, &one, "spec.overhead")))
            return err;
    }

    model_pod *p = d->pod;
    for (int i = 0; i < MODEL_MAX_RES; i++)
        p->req.v[i] = total.v[i];
    p->req.v[MODEL_RES_PODS] = 1;
    p->containers_cpu = containers_cpu;
    p->req_mask = 0;
    for (int i = 0; i < MODEL_MAX_RES; i++) {
        if (p->req.v[i])
            p->req_mask |= 1u << i;
    }

    int64_t whole = total.v[ACC_WHOLE], share = total.v[ACC_SHARE];
    if (share && whole)
        return model_priv_fail(&d->c, AS_EINVAL, d->share_path,
                               "a pod asks for a share of one GPU (%s) or for whole GPUs "
                               "(%s), not both; remove one of them",
                               d->reg->gpu_share_name, d->reg->gpu_name);
    if (whole) {
        p->gpu_count = whole > UINT32_MAX ? UINT32_MAX : (uint32_t)whole;
        p->gpu_milli = MODEL_GPU_MILLI;
    } else if (share) {
        if (share > MODEL_GPU_MILLI)
            return model_priv_fail(&d->c, AS_EINVAL, d->share_path,
                                   "a GPU share of %lld milli-GPU is more than one GPU (1000); "
                                   "ask for whole GPUs with %s instead",
                                   (long long)share, d->reg->gpu_name);
        p->gpu_count = 1;
        p->gpu_milli = (uint32_t)share;
    }
    /* A GPU pod decoded while no node has GPUs is not unknown_res: that
     * would stay with the decoded pod (pods are decoded once per version),
     * and the pod would fit nowhere after a GPU node joins, or when its
     * list came before the nodes' at start-up. gpu_count alone already
     * fits it on no node without devices (pred's device check). */
    return AS_OK;
}

static as_err parse_sel_op(const char *s, bool fields, model_sel_op *op)
{
    static const struct {
        const char *name;
        model_sel_op op;
    } ops[] = {{"In", MODEL_SEL_IN},         {"NotIn", MODEL_SEL_NOT_IN},
               {"Exists", MODEL_SEL_EXISTS}, {"DoesNotExist", MODEL_SEL_DOES_NOT_EXIST},
               {"Gt", MODEL_SEL_GT},         {"Lt", MODEL_SEL_LT}};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        if (fields && i >= 2)
            break;
        if (strcmp(s, ops[i].name) == 0) {
            *op = ops[i].op;
            return AS_OK;
        }
    }
    return AS_EINVAL;
}

static as_err pod_sel_reqs(pod_dec *d, const json_t *arr, const char *base, bool fields,
                           const model_selector_req **out, uint32_t *nout)
{
    size_t n = json_array_size(arr);
    *out = NULL;
    *nout = 0;
    if (n == 0)
        return AS_OK;
    model_selector_req *r = pool_alloc(d->c.pool, n * sizeof *r);
    if (!r)
        return model_priv_oom(&d->c, base);
    char ip[MODEL_PRIV_PATH_MAX], fp[MODEL_PRIV_PATH_MAX];
    as_err err;
    for (size_t i = 0; i < n; i++) {
        const json_t *it = json_array_get(arr, i), *vals;
        model_priv_path_idx(ip, sizeof ip, base, i);
        if (!json_is_object(it))
            return model_priv_fail(&d->c, AS_EINVAL, ip,
                                   "must be an object with key, operator and values, not %s",
                                   model_priv_type_name(it));
        model_priv_path(fp, sizeof fp, ip, ".key");
        if ((err = model_priv_get_str(&d->c, it, "key", fp, "", &r[i].key)))
            return err;
        if (!r[i].key[0])
            return model_priv_fail(&d->c, AS_EINVAL, fp, "a requirement needs a non-empty key");
        if (fields && strcmp(r[i].key, "metadata.name") != 0)
            return model_priv_fail(&d->c, AS_EINVAL, fp,
                                   "matchFields supports only the key metadata.name, not "
                                   "\"%.60s\"",
                                   r[i].key);
        const char *ops;
        model_priv_path(fp, sizeof fp, ip, ".operator");
        if ((err = model_priv_get_str(&d->c, it, "operator", fp, "", &ops)))
            return err;
        if (parse_sel_op(ops, fields, &r[i].op))
            return model_priv_fail(&d->c, AS_EINVAL, fp, "unknown operator \"%.40s\"; use %s", ops,
                                   fields ? "In or NotIn"
                                          : "In, NotIn, Exists, DoesNotExist, Gt or Lt");
        model_priv_path(fp, sizeof fp, ip, ".values");
        if ((err = model_priv_get(&d->c, it, "values", fp, JSON_ARRAY, &vals)))
            return err;
        size_t nv = json_array_size(vals);
        if (nv > UINT32_MAX)
            return model_priv_fail(&d->c, AS_ERANGE, fp, "has too many values");
        switch (r[i].op) {
        case MODEL_SEL_IN:
        case MODEL_SEL_NOT_IN:
            if (nv == 0)
                return model_priv_fail(&d->c, AS_EINVAL, fp, "operator %s needs at least one value",
                                       ops);
            if (fields && nv != 1)
                return model_priv_fail(&d->c, AS_EINVAL, fp,
                                       "matchFields with %s takes exactly one value", ops);
            break;
        case MODEL_SEL_EXISTS:
        case MODEL_SEL_DOES_NOT_EXIST:
            if (nv != 0)
                return model_priv_fail(&d->c, AS_EINVAL, fp,
                                       "operator %s takes no values; remove them", ops);
            break;
        case MODEL_SEL_GT:
        case MODEL_SEL_LT:
            if (nv != 1)
                return model_priv_fail(&d->c, AS_EINVAL, fp,
                                       "operator %s takes exactly one integer value", ops);
            break;
        }
        if (nv) {
            const char **vs = pool_alloc(d->c.pool, nv * sizeof *vs);
            if (!vs)
                return model_priv_oom(&d->c, fp);
            for (size_t k = 0; k < nv; k++) {
                char vp[MODEL_PRIV_PATH_MAX];
                model_priv_path_idx(vp, sizeof vp, fp, k);
                if ((err = model_priv_str(&d->c, json_array_get(vals, k), vp, &vs[k])))
                    return err;
            }
            r[i].values = vs;
            r[i].nvalues = (uint32_t)nv;
        }
        if ((r[i].op == MODEL_SEL_GT || r[i].op == MODEL_SEL_LT) &&
            !model_labels_parse_int64(r[i].values[0], &r[i].num))
            return model_priv_fail(&d->c, AS_EINVAL, fp,
                                   "operator %s needs an integer value, not \"%.40s\"", ops,
                                   r[i].values[0]);
    }
    *out = r;
    *nout = (uint32_t)n;
    return AS_OK;
}

static as_err pod_affinity(pod_dec *d, const json_t *spec)
{
    const char *rp = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
    const json_t *aff, *na, *req, *terms;
    as_err err;
    if ((err = model_priv_get(&d->c, spec, "affinity", "spec.affinity", JSON_OBJECT, &aff)) ||
        (err = model_priv_get(&d->c, aff, "nodeAffinity", "spec.affinity.nodeAffinity", JSON_OBJECT,
                              &na)) ||
        (err = model_priv_get(&d->c, na, "requiredDuringSchedulingIgnoredDuringExecution", rp,
                              JSON_OBJECT, &req)))
        return err;
    if (!req)
        return AS_OK;
    char tp[MODEL_PRIV_PATH_MAX];
    model_priv_path(tp, sizeof tp, rp, ".nodeSelectorTerms");
    if ((err = model_priv_get(&d->c, req, "nodeSelectorTerms", tp, JSON_ARRAY, &terms)))
        return err;
    model_affinity *a = &d->pod->affinity;
    a->present = true;
    size_t n = json_array_size(terms);
    if (n == 0)
        return AS_OK;
    model_selector_term *t = pool_alloc(d->c.pool, n * sizeof *t);
    if (!t)
        return model_priv_oom(&d->c, tp);
    for (size_t i = 0; i < n; i++) {
        const json_t *it = json_array_get(terms, i), *ex, *fl;
        char ip[MODEL_PRIV_PATH_MAX], fp[MODEL_PRIV_PATH_MAX];
        model_priv_path_idx(ip, sizeof ip, tp, i);
        if (!json_is_object(it))
            return model_priv_fail(&d->c, AS_EINVAL, ip, "must be an object, not %s",
                                   model_priv_type_name(it));
        model_priv_path(fp, sizeof fp, ip, ".matchExpressions");
        if ((err = model_priv_get(&d->c, it, "matchExpressions", fp, JSON_ARRAY, &ex)) ||
            (ex && (err = pod_sel_reqs(d, ex, fp, false, &t[i].exprs, &t[i].nexprs))))
            return err;
        model_priv_path(fp, sizeof fp, ip, ".matchFields");
        if ((err = model_priv_get(&d->c, it, "matchFields", fp, JSON_ARRAY, &fl)) ||
            (fl && (err = pod_sel_reqs(d, fl, fp, true, &t[i].fields, &t[i].nfields))))
            return err;
    }
    a->terms = t;
    a->nterms = (uint32_t)n;
    return AS_OK;
}

static as_err pod_tolerations(pod_dec *d, const json_t *arr)
{
    size_t n = json_array_size(arr);
    if (n == 0)
        return AS_OK;
    model_toleration *t = pool_alloc(d->c.pool, n * sizeof *t);
    if (!t)
        return model_priv_oom(&d->c, "spec.tolerations");
    as_err err;
    for (size_t i = 0; i < n; i++) {
        const json_t *it = json_array_get(arr, i);
        char ip[MODEL_PRIV_PATH_MAX], fp[MODEL_PRIV_PATH_MAX];
        model_priv_path_idx(ip, sizeof ip, "spec.tolerations", i);
        if (!json_is_object(it))
            return model_priv_fail(&d->c, AS_EINVAL, ip, "must be an object, not %s",
                                   model_priv_type_name(it));
        const char *op, *eff;
        model_priv_path(fp, sizeof fp, ip, ".key");
        if ((err = model_priv_get_str(&d->c, it, "key", fp, "", &t[i].key)))
            return err;
        model_priv_path(fp, sizeof fp, ip, ".value");
        if ((err = model_priv_get_str(&d->c, it, "value", fp, "", &t[i].value)))
            return err;
        model_priv_path(fp, sizeof fp, ip, ".operator");
        if ((err = model_priv_get_str(&d->c, it, "operator", fp, "", &op)))
            return err;
        if (!op[0] || strcmp(op, "Equal") == 0) {
            t[i].op = MODEL_TOL_EQUAL;
            if (!t[i].key[0])
                return model_priv_fail(&d->c, AS_EINVAL, fp,
                                       "a toleration without a key must use operator Exists "
                                       "(it then tolerates every taint)");
        } else if (strcmp(op, "Exists") == 0) {
            t[i].op = MODEL_TOL_EXISTS;
            if (t[i].value[0]) {
                model_priv_path(fp, sizeof fp, ip, ".value");
                return model_priv_fail(&d->c, AS_EINVAL, fp,
                                       "must be empty with operator Exists; remove the value "
                                       "or use operator Equal");
            }
        } else if (strcmp(op, "Lt") == 0 || strcmp(op, "Gt") == 0) {
            t[i].op = op[0] == 'L' ? MODEL_TOL_LT : MODEL_TOL_GT;
            int64_t num;
            if (!t[i].key[0] || !model_labels_parse_int64(t[i].value, &num)) {
                model_priv_path(fp, sizeof fp, ip, t[i].key[0] ? ".value" : ".key");
                return model_priv_fail(&d->c, AS_EINVAL, fp,
                                       "operator %s needs a key and an integer value", op);
            }
        } else {
            return model_priv_fail(&d->c, AS_EINVAL, fp,
                                   "unknown toleration operator \"%.40s\"; use Equal, Exists, Lt "
                                   "or Gt",
                                   op);
        }
        model_priv_path(fp, sizeof fp, ip, ".effect");
        if ((err = model_priv_get_str(&d->c, it, "effect", fp, "", &eff)))
            return err;
        if (!eff[0])
            t[i].effect = MODEL_EFFECT_ALL;
        else if (!model_priv_effect_parse(eff, &t[i].effect))
            return model_priv_fail(&d->c, AS_EINVAL, fp,
                                   "unknown effect \"%.40s\"; use NoSchedule, PreferNoSchedule, "
                                   "NoExecute or leave it empty for all effects",
                                   eff);
    }
    d->pod->tolerations = t;
    d->pod->ntolerations = (uint32_t)n;
    return AS_OK;
}

static as_err pod_phase(pod_dec *d, const json_t *status)
{
    const char *ph;
    as_err err = model_priv_get_str(&d->c, status, "phase", "status.phase", "", &ph);
    if (err)
        return err;
    if (model_priv_phase_of(ph, strlen(ph), &d->pod->phase))
        return AS_OK;
    return model_priv_fail(&d->c, AS_EINVAL, "status.phase",
                           "unknown phase \"%.40s\"; use Pending, Running, Succeeded, Failed or "
                           "Unknown",
                           ph);
}

/* annot_str: annotations[key] as a string without NUL, or NULL. */
static const char *annot_str(const json_t *annots, const char *key, size_t *len)
{
    const json_t *v = json_object_get(annots, key);
    const char *s = json_string_value(v);
    if (!s || strlen(s) != json_string_length(v))
        return NULL;
    *len = json_string_length(v);
    return s;
}

/* pod_gpu_annotations reads agentsched's device annotations (gpuannot.h)
 * into annot_gpu_*: all three well formed, or none. Anything else in
 * metadata.annotations is not read. */
static as_err pod_gpu_annotations(pod_dec *d, const json_t *annots)
{
    model_pod *p = d->pod;
    size_t ld = 0, lm = 0, ln = 0;
    if (!json_is_object(annots))
        return AS_OK;
    const char *devs = annot_str(annots, GPUANNOT_DEVICES, &ld);
    const char *milli = annot_str(annots, GPUANNOT_MILLI, &lm);
    const char *node = annot_str(annots, GPUANNOT_NODE, &ln);
    uint32_t mask, m;
    if (!devs || !milli || !node || !ln ||
        !gpuannot_parse_devices(devs, ld, MODEL_MAX_GPUS, &mask) ||
        !gpuannot_parse_milli(milli, lm, &m))
        return AS_OK;
    if (!(p->annot_gpu_node = pool_strdup(d->c.pool, node)))
        return model_priv_oom(&d->c, "metadata.annotations");
    p->annot_gpu_devices = mask;
    p->annot_gpu_milli = m;
    return AS_OK;
}

static as_err pod_metadata(pod_dec *d, const json_t *obj)
{
    model_pod *p = d->pod;
    const json_t *meta, *v;
    as_err err;
    if ((err = model_priv_get(&d->c, obj, "metadata", "metadata", JSON_OBJECT, &meta)))
        return err;
    if ((err = model_priv_get_str(&d->c, meta, "name", "metadata.name", "", &p->name)))
        return err;
    if ((err = model_priv_get_str(&d->c, meta, "namespace", "metadata.namespace", "", &p->ns)))
        return err;
    if (!p->ns[0])
        p->ns = "default";
    if (!p->name[0])
        return model_priv_fail(&d->c, AS_EINVAL, "metadata.name",
                               "a Pod needs a non-empty metadata.name");
    /* Kubernetes' limits; the answers that quote the name stay small */
    size_t nl = strlen(p->name), sl = strlen(p->ns);
    if (nl > MODEL_POD_NAME_MAX)
        return model_priv_fail(&d->c, AS_EINVAL, "metadata.name",
                               "is %zu bytes; a pod name is at most %d (a DNS subdomain)", nl,
                               MODEL_POD_NAME_MAX);
    if (sl > MODEL_NAMESPACE_MAX)
        return model_priv_fail(&d->c, AS_EINVAL, "metadata.namespace",
                               "is %zu bytes; a namespace is at most %d (a DNS label)", sl,
                               MODEL_NAMESPACE_MAX);
    {
        /* "pod ns/name", each cut at a character boundary (no printf: once
         * per decoded pod) */
        size_t e1 = as_utf8_excerpt(p->ns, sl, 90), e2 = as_utf8_excerpt(p->name, nl, 100);
        char *w = d->c.what;
        memcpy(w, "pod ", 4);
        memcpy(w + 4, p->ns, e1);
        w[4 + e1] = '/';
        memcpy(w + 5 + e1, p->name, e2);
        w[5 + e1 + e2] = 0;
    }
    if ((err = model_priv_get_str(&d->c, meta, "uid", "metadata.uid", "", &p->uid)) ||
        (err = model_priv_get_str(&d->c, meta, "resourceVersion", "metadata.resourceVersion", "",
                                  &p->resource_version)))
        return err;
    if ((err = model_priv_get(&d->c, meta, "labels", "metadata.labels", JSON_OBJECT, &v)) ||
        (err = model_priv_labels(&d->c, v, "metadata.labels", &p->labels)))
        return err;
    if ((err = model_priv_get(&d->c, meta, "deletionTimestamp", "metadata.deletionTimestamp",
                              JSON_STRING, &v)))
        return err;
    p->terminating = v != NULL;
    const json_t *annots = json_object_get(meta, "annotations");
    p->mirror = json_is_object(annots) && json_object_get(annots, MODEL_MIRROR_ANNOTATION);
    if ((err = pod_gpu_annotations(d, annots)))
        return err;
    if ((err = model_priv_get(&d->c, meta, "creationTimestamp", "metadata.creationTimestamp",
                              JSON_STRING, &v)))
        return err;
    if (v && (strlen(json_string_value(v)) != json_string_length(v) ||
              !model_priv_rfc3339_ms(json_string_value(v), &p->created_ms)))
        return model_priv_fail(&d->c, AS_EINVAL, "metadata.creationTimestamp",
                               "\"%.40s\" is not an RFC 3339 time; use e.g. "
                               "\"2026-01-02T15:04:05Z\"",
                               json_string_value(v));
    return AS_OK;
}

static as_err pod_spec(pod_dec *d, const json_t *spec)
{
    model_pod *p = d->pod;
    const json_t *v;
    as_err err;
    if ((err = model_priv_get_str(&d->c, spec, "nodeName", "spec.nodeName", "", &p->node_name)))
        return err;
    if (!p->node_name[0])
        p->node_name = NULL;
    if ((err = model_priv_get_str(&d->c, spec, "schedulerName", "spec.schedulerName", "",
                                  &p->scheduler_name)))
        return err;
    if (!p->scheduler_name[0])
        p->scheduler_name = "default-scheduler";
    if ((err = model_priv_get(&d->c, spec, "priority", "spec.priority", JSON_INTEGER, &v)))
        return err;
    if (v) {
        json_int_t pr = json_integer_value(v);
        if (pr < INT32_MIN || pr > INT32_MAX)
            return model_priv_fail(&d->c, AS_ERANGE, "spec.priority",
                                   "%lld does not fit a 32-bit priority", (long long)pr);
        p->priority = (int32_t)pr;
    }
    if ((err = model_priv_get(&d->c, spec, "nodeSelector", "spec.nodeSelector", JSON_OBJECT, &v)) ||
        (err = model_priv_labels(&d->c, v, "spec.nodeSelector", &p->node_selector)))
        return err;
    if ((err = pod_affinity(d, spec)))
        return err;
    if ((err = model_priv_get(&d->c, spec, "tolerations", "spec.tolerations", JSON_ARRAY, &v)) ||
        (v && (err = pod_tolerations(d, v))))
        return err;
    return pod_requests(d, spec);
}

struct model_pod_spec {
    int refs; /* atomic */
    int generation;
    model_pod fields; /* the spec-derived fields; its pool owns them */
};

/* spec_copy points p's spec-derived fields at src's (pod_spec's outputs). */
static void spec_copy(model_pod *p, const model_pod *src)
{
    p->node_name = src->node_name;
    p->scheduler_name = src->scheduler_name;
    p->priority = src->priority;
    p->node_selector = src->node_selector;
    p->affinity = src->affinity;
    p->tolerations = src->tolerations;
    p->ntolerations = src->ntolerations;
    p->req = src->req;
    p->req_mask = src->req_mask;
    p->containers_cpu = src->containers_cpu;
    p->unknown_res = src->unknown_res;
    p->gpu_count = src->gpu_count;
    p->gpu_milli = src->gpu_milli;
}

/* See pod.h. */
as_err model_pod_spec_from_json(const model_registry *reg, const json_t *spec, model_pod_spec **out,
                                as_diag *diag)
{
    *out = NULL;
    pod_dec d;
    memset(&d, 0, sizeof d);
    d.c.diag = diag;
    d.reg = reg;
    model_priv_path(d.c.what, sizeof d.c.what, "pod spec", "");
    if (!json_is_object(spec))
        return model_priv_fail(&d.c, AS_EINVAL, "spec", "a PodSpec must be an object, not %s",
                               spec ? model_priv_type_name(spec) : "nothing");
    /* Read before decoding: a resource interned meanwhile makes the spec
     * look older than it is (a later miss), never newer. */
    int gen = model_registry_count(reg);
    d.c.pool = pool_new(0);
    if (!d.c.pool)
        return model_priv_oom(&d.c, "");
    as_err err = AS_OK;
    model_pod_spec *ps = pool_alloc(d.c.pool, sizeof *ps);
    if (!ps) {
        err = model_priv_oom(&d.c, "");
        goto done;
    }
    ps->fields.pool = d.c.pool;
    d.pod = &ps->fields;
    if ((err = pod_spec(&d, spec)))
        goto done;
    ps->refs = 1;
    ps->generation = gen;
done:
    if (err) {
        pool_free(d.c.pool);
        return err;
    }
    *out = ps;
    return AS_OK;
}

/* See pod.h. */
int model_pod_spec_generation(const model_pod_spec *spec)
{
    return spec->generation;
}

/* See pod.h. */
model_pod_spec *model_pod_spec_ref(model_pod_spec *spec)
{
    __atomic_add_fetch(&spec->refs, 1, __ATOMIC_RELAXED);
    return spec;
}

/* See pod.h. */
void model_pod_spec_unref(model_pod_spec *spec)
{
    if (spec && __atomic_sub_fetch(&spec->refs, 1, __ATOMIC_ACQ_REL) == 0)
        pool_free(spec->fields.pool);
}

/* pod_decode decodes obj into a new pod: kind, metadata, then the spec
 * (from obj, or shared's when given), then status, in that order, so the
 * first error reported is the same either way. */
static as_err pod_decode(const model_registry *reg, const json_t *obj, model_pod_spec *shared,
                         model_pod **out, as_diag *diag)
{
    *out = NULL;
    pod_dec d;
    memset(&d, 0, sizeof d);
    d.c.diag = diag;
    d.reg = reg;
    model_priv_path(d.c.what, sizeof d.c.what, "pod", "");
    if (!json_is_object(obj))
        return model_priv_fail(&d.c, AS_EINVAL, "", "a Pod must be an object, not %s",
                               obj ? model_priv_type_name(obj) : "nothing");
    /* A pod is mostly its struct and a few names (an agent pod's spec is
     * shared): small chunks, as the binder's memo may hold thousands. */
    d.c.pool = pool_new_small(0);
    if (!d.c.pool)
        return model_priv_oom(&d.c, "");
    as_err err = AS_OK;
    model_pod *p = pool_alloc(d.c.pool, sizeof *p);
    if (!p) {
        err = model_priv_oom(&d.c, "");
        goto done;
    }
    p->pool = d.c.pool;
    d.pod = p;

    const json_t *kind, *spec, *status;
    if ((err = model_priv_get(&d.c, obj, "kind", "kind", JSON_STRING, &kind)))
        goto done;
    if (kind && !model_priv_str_is(kind, "Pod")) {
        err = model_priv_fail(&d.c, AS_EINVAL, "kind", "expected kind Pod, got \"%.40s\"",
                              json_string_value(kind));
        goto done;
    }
    if ((err = pod_metadata(&d, obj)))
        goto done;
    if (shared) {
        spec_copy(p, &shared->fields);
        p->spec = model_pod_spec_ref(shared);
    } else if ((err = model_priv_get(&d.c, obj, "spec", "spec", JSON_OBJECT, &spec)) ||
               (err = pod_spec(&d, spec))) {
        goto done;
    }
    if ((err = model_priv_get(&d.c, obj, "status", "status", JSON_OBJECT, &status)) ||
        (err = pod_phase(&d, status)))
        goto done;
done:
    if (err) {
        if (p)
            model_pod_spec_unref(p->spec);
        pool_free(d.c.pool);
        return err;
    }
    *out = p;
    return AS_OK;
}

/* See pod.h. */
as_err model_pod_from_json(const model_registry *reg, const json_t *obj, model_pod **out,
                           as_diag *diag)
{
    return pod_decode(reg, obj, NULL, out, diag);
}

/* See pod.h. */
as_err model_pod_from_json_spec(const model_registry *reg, const json_t *obj, model_pod_spec *spec,
                                model_pod **out, as_diag *diag)
{
    assert(spec);
    return pod_decode(reg, obj, spec, out, diag);
}

/* field_str copies f into the pool as a C string, dflt when absent; false
 * when it holds NUL (which the JSON decode refuses) or memory is short. */
static bool field_str(pool *p, model_span f, const char *dflt, const char **out)
{
    if (!f.s) {
        *out = dflt;
        return true;
    }
    if (memchr(f.s, '\0', f.len))
        return false;
    char *d = pool_strndup(p, f.s, f.len);
    *out = d;
    return d != NULL;
}

static int span_kv_cmp(const void *a, const void *b)
{
    return strcmp(((const model_kv *)a)->key, ((const model_kv *)b)->key);
}

/* See pod.h. Every condition under which pod_decode fails, or builds
 * something else, sends the caller back to it (AS_EUNSUPPORTED); the
 * differential test holds the two to the same pods. */
as_err model_pod_from_fields(const model_registry *reg, const model_pod_fields *f,
                             model_pod_spec *spec, model_pod **out)
{
    (void)reg;
    *out = NULL;
    if ((f->kind.s && !(f->kind.len == 3 && memcmp(f->kind.s, "Pod", 3) == 0)) || f->annotated)
        return AS_EUNSUPPORTED;
    pool *pl = pool_new_small(0);
    if (!pl)
        return AS_EUNSUPPORTED;
    model_pod *p = pool_alloc(pl, sizeof *p);
    const char *node = NULL;
    if (!p)
        goto refuse;
    p->pool = pl;
    if (!field_str(pl, f->name, "", &p->name) || !field_str(pl, f->ns, "", &p->ns))
        goto refuse;
    if (!p->ns[0])
        p->ns = "default";
    if (!p->name[0] || f->name.len > MODEL_POD_NAME_MAX || strlen(p->ns) > MODEL_NAMESPACE_MAX)
        goto refuse;
    if (!field_str(pl, f->uid, "", &p->uid) ||
        !field_str(pl, f->resource_version, "", &p->resource_version))
        goto refuse;
    if (f->nlabels) {
        model_kv *kv = pool_alloc(pl, f->nlabels * sizeof *kv);
        if (!kv)
            goto refuse;
        for (uint32_t i = 0; i < f->nlabels; i++) {
            if (!f->label_keys[i].s || !f->label_values[i].s ||
                memchr(f->label_keys[i].s, '\0', f->label_keys[i].len) ||
                !field_str(pl, f->label_values[i], "", &kv[i].value) ||
                !(kv[i].key = pool_strndup(pl, f->label_keys[i].s, f->label_keys[i].len)))
                goto refuse;
        }
        qsort(kv, f->nlabels, sizeof *kv, span_kv_cmp);
        for (uint32_t i = 1; i < f->nlabels; i++)
            if (strcmp(kv[i - 1].key, kv[i].key) == 0)
                goto refuse; /* the DOM keeps the last: let it */
        p->labels.items = kv;
        p->labels.n = f->nlabels;
    }
    p->terminating = f->deletion_timestamp;
    if (f->creation_timestamp.s) {
        char ts[64];
        if (f->creation_timestamp.len >= sizeof ts ||
            memchr(f->creation_timestamp.s, '\0', f->creation_timestamp.len))
            goto refuse;
        memcpy(ts, f->creation_timestamp.s, f->creation_timestamp.len);
        ts[f->creation_timestamp.len] = '\0';
        if (!model_priv_rfc3339_ms(ts, &p->created_ms))
            goto refuse;
    }
    if (f->node_name && f->node_name->s && f->node_name->len &&
        !field_str(pl, *f->node_name, NULL, &node))
        goto refuse;
    spec_copy(p, &spec->fields);
    if (f->node_name)
        p->node_name = node;
    p->spec = model_pod_spec_ref(spec);
    if (!model_priv_phase_of(f->phase.s, f->phase.len, &p->phase)) {
        model_pod_spec_unref(p->spec);
        goto refuse;
    }
    *out = p;
    return AS_OK;
refuse:
    pool_free(pl);
    return AS_EUNSUPPORTED;
}

/* See pod.h. */
void model_pod_free(model_pod *p)
{
    if (p) {
        model_pod_spec_unref(p->spec);
        pool_free(p->pool);
    }
}

/* See pod.h. */
bool model_pod_is_terminal(const model_pod *p)
{
    return p->phase == MODEL_PHASE_SUCCEEDED || p->phase == MODEL_PHASE_FAILED;
}

/* See pod.h. */
const char *model_pod_key(const model_pod *pod, char *tmp, size_t cap, size_t *len)
{
    if (pod->uid && pod->uid[0]) {
        if (len)
            *len = strlen(pod->uid);
        return pod->uid;
    }
    const char *ns = pod->ns ? pod->ns : "default", *name = pod->name ? pod->name : "";
    size_t i = 0;
    if (cap) {
        for (; *ns && i + 1 < cap; ns++)
            tmp[i++] = *ns;
        if (i + 1 < cap)
            tmp[i++] = '/';
        for (; *name && i + 1 < cap; name++)
            tmp[i++] = *name;
        tmp[i] = 0;
    }
    if (len)
        *len = i;
    return tmp;
}

/* See pod.h. */
void model_pod_key_json(const json_t *obj, char *out, size_t len)
{
    const json_t *md = json_object_get(obj, "metadata");
    const char *uid = json_string_value(json_object_get(md, "uid"));
    if (uid && *uid) {
        snprintf(out, len, "%s", uid);
        return;
    }
    const char *ns = json_string_value(json_object_get(md, "namespace"));
    const char *name = json_string_value(json_object_get(md, "name"));
    snprintf(out, len, "%s/%s", ns && *ns ? ns : "default", name ? name : "");
}

/*
 * test_skip.c - the skip rules (skip.h) leave the model unchanged: a full
 * Pod and Node decoded whole and without the skipped members give equal
 * models, and a Pod's spec decoded once and shared gives the same pod.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/api/extargs.h"
#include "agentsched/base/doc.h"
#include "agentsched/model/labels.h"
#include "agentsched/model/node.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"
#include "agentsched/model/skip.h"
#include "json_count.h"

/* read_fixture reads test/unit/data/k8s/name whole (NUL-terminated). */
static char *read_fixture(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof path, "%s/k8s/%s", TEST_DATA_DIR, name);
    char *data = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(doc_read_file(path, 0, &data, len, &d), AS_OK, "%s: %s", path, d.msg);
    return data;
}

static void same_str(const char *a, const char *b, const char *what)
{
    if (!a || !b)
        cr_assert_eq(a, b, "%s: one is NULL", what);
    else
        cr_assert_str_eq(a, b, "%s", what);
}

static void same_labels(const model_labels *a, const model_labels *b, const char *what)
{
    cr_assert_eq(a->n, b->n, "%s count", what);
    for (uint32_t i = 0; i < a->n; i++) {
        same_str(a->items[i].key, b->items[i].key, what);
        same_str(a->items[i].value, b->items[i].value, what);
    }
}

static void same_selector_reqs(const model_selector_req *a, const model_selector_req *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        same_str(a[i].key, b[i].key, "selector key");
        cr_assert_eq(a[i].op, b[i].op);
        cr_assert_eq(a[i].nvalues, b[i].nvalues);
        cr_assert_eq(a[i].num, b[i].num);
        for (uint32_t v = 0; v < a[i].nvalues; v++)
            same_str(a[i].values[v], b[i].values[v], "selector value");
    }
}

static void same_pod(const model_pod *a, const model_pod *b)
{
    same_str(a->ns, b->ns, "ns");
    same_str(a->name, b->name, "name");
    same_str(a->uid, b->uid, "uid");
    same_str(a->resource_version, b->resource_version, "resourceVersion");
    same_str(a->node_name, b->node_name, "nodeName");
    same_str(a->scheduler_name, b->scheduler_name, "schedulerName");
    cr_assert_arr_eq(a->req.v, b->req.v, sizeof a->req.v, "requests");
    cr_assert_eq(a->req_mask, b->req_mask);
    same_str(a->unknown_res, b->unknown_res, "unknown resource");
    cr_assert_eq(a->gpu_count, b->gpu_count);
    cr_assert_eq(a->gpu_milli, b->gpu_milli);
    same_labels(&a->labels, &b->labels, "labels");
    same_labels(&a->node_selector, &b->node_selector, "nodeSelector");
    cr_assert_eq(a->affinity.present, b->affinity.present);
    cr_assert_eq(a->affinity.nterms, b->affinity.nterms);
    for (uint32_t t = 0; t < a->affinity.nterms; t++) {
        const model_selector_term *x = &a->affinity.terms[t], *y = &b->affinity.terms[t];
        cr_assert_eq(x->nexprs, y->nexprs);
        cr_assert_eq(x->nfields, y->nfields);
        same_selector_reqs(x->exprs, y->exprs, x->nexprs);
        same_selector_reqs(x->fields, y->fields, x->nfields);
    }
    cr_assert_eq(a->ntolerations, b->ntolerations);
    for (uint32_t i = 0; i < a->ntolerations; i++) {
        same_str(a->tolerations[i].key, b->tolerations[i].key, "toleration key");
        same_str(a->tolerations[i].value, b->tolerations[i].value, "toleration value");
        cr_assert_eq(a->tolerations[i].op, b->tolerations[i].op);
        cr_assert_eq(a->tolerations[i].effect, b->tolerations[i].effect);
    }
    cr_assert_eq(a->priority, b->priority);
    cr_assert_eq(a->phase, b->phase);
    cr_assert_eq(a->terminating, b->terminating);
    cr_assert_eq(a->created_ms, b->created_ms);
}

static void same_node(const model_node *a, const model_node *b)
{
    same_str(a->name, b->name, "name");
    same_str(a->uid, b->uid, "uid");
    same_str(a->resource_version, b->resource_version, "resourceVersion");
    same_labels(&a->labels, &b->labels, "labels");
    cr_assert_eq(a->ntaints, b->ntaints);
    for (uint32_t i = 0; i < a->ntaints; i++) {
        same_str(a->taints[i].key, b->taints[i].key, "taint key");
        same_str(a->taints[i].value, b->taints[i].value, "taint value");
        cr_assert_eq(a->taints[i].effect, b->taints[i].effect);
    }
    cr_assert_arr_eq(a->alloc.v, b->alloc.v, sizeof a->alloc.v, "allocatable");
    cr_assert_arr_eq(a->capacity.v, b->capacity.v, sizeof a->capacity.v, "capacity");
    cr_assert_eq(a->unschedulable, b->unschedulable);
    cr_assert_eq(a->ready, b->ready);
    cr_assert_eq(a->ngpus, b->ngpus);
    same_str(a->gpu_model, b->gpu_model, "gpu model");
}

/* parse_both decodes a fixture whole and with the skip rules. */
static void parse_both(const char *fixture, const json_skip *rules, json_t **whole,
                       json_t **skipped)
{
    size_t len;
    char *body = read_fixture(fixture, &len);
    as_diag d = {{0}, {0}};
    cr_assert_eq(json_parse(body, len, whole, &d), AS_OK, "%s", d.msg);
    cr_assert_not_null(rules);
    cr_assert_eq(json_parse_skip(body, len, rules, skipped, &d), AS_OK, "%s", d.msg);
    free(body);
    /* the rules must leave a real API server object much smaller */
    size_t a = json_count_values(*whole), b = json_count_values(*skipped);
    cr_assert_lt(b * 2, a, "%s: %zu of %zu values kept", fixture, b, a);
}

/* A spec decoded once (model_pod_spec) and the rest of the Pod built
 * without it give the pod model_pod_from_json gives on the whole Pod: the
 * extender's memo of decoded specs (extender.c) relies on it. */
Test(model_skip, a_shared_spec_gives_the_same_pod)
{
    static const char *const spec_keys[] = {"spec", NULL};
    json_skip no_spec[24];
    const json_skip *pod_rules = model_skip_pod();
    size_t n = 0;
    for (; pod_rules[n].parent; n++)
        no_spec[n] = pod_rules[n];
    no_spec[n++] = (json_skip){"", spec_keys};
    no_spec[n] = (json_skip){NULL, NULL};

    static const char *const fixtures[] = {"full_pod.json", "gpu_share_pod.json"};
    for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
        model_registry reg;
        model_registry_init(&reg);
        size_t len;
        char *body = read_fixture(fixtures[f], &len);
        json_t *whole = NULL, *rest = NULL;
        as_diag d = {{0}, {0}};
        cr_assert_eq(json_parse(body, len, &whole, &d), AS_OK, "%s", d.msg);
        cr_assert_eq(json_parse_skip(body, len, no_spec, &rest, &d), AS_OK, "%s", d.msg);
        cr_assert_null(json_object_get(rest, "spec"));
        model_pod *a = NULL, *b = NULL;
        model_pod_spec *spec = NULL;
        cr_assert_eq(model_pod_from_json(&reg, whole, &a, &d), AS_OK, "%s", d.msg);
        cr_assert_eq(model_pod_spec_from_json(&reg, json_object_get(whole, "spec"), &spec, &d),
                     AS_OK, "%s", d.msg);
        cr_assert_eq(model_pod_spec_generation(spec), model_registry_count(&reg));
        cr_assert_eq(model_pod_from_json_spec(&reg, rest, spec, &b, &d), AS_OK, "%s", d.msg);
        model_pod_spec_unref(spec); /* b keeps its own reference */
        same_pod(a, b);
        model_pod_free(a);
        model_pod_free(b);
        /* errors outside the spec are model_pod_from_json's */
        json_object_set_new(json_object_get(rest, "status"), "phase", json_string("Lost"));
        cr_assert_eq(model_pod_spec_from_json(&reg, json_object_get(whole, "spec"), &spec, &d),
                     AS_OK);
        cr_assert_eq(model_pod_from_json_spec(&reg, rest, spec, &b, &d), AS_EINVAL);
        cr_assert_str_eq(d.field, "status.phase");
        cr_assert_null(b);
        /* a resource interned later is a new generation */
        int idx, gen = model_pod_spec_generation(spec);
        model_pod_spec_unref(spec);
        cr_assert_eq(model_registry_intern(&reg, "example.com/later", 17, &idx), AS_OK);
        cr_assert_gt(model_registry_count(&reg), gen);
        json_decref(whole);
        json_decref(rest);
        free(body);
        model_registry_destroy(&reg);
    }
}

Test(model_skip, skip_rules_keep_the_pod_model)
{
    model_registry reg;
    model_registry_init(&reg);
    json_t *whole, *skipped;
    parse_both("full_pod.json", model_skip_pod(), &whole, &skipped);
    model_pod *a = NULL, *b = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(model_pod_from_json(&reg, whole, &a, &d), AS_OK, "%s: %s", d.field, d.msg);
    cr_assert_eq(model_pod_from_json(&reg, skipped, &b, &d), AS_OK, "%s: %s", d.field, d.msg);
    same_pod(a, b);
    /* the extender's table leaves the device annotations out (its pods
     * are pending), the watch's keeps them */
    cr_assert_eq(a->annot_gpu_devices, 0xa);
    cr_assert_eq(a->annot_gpu_milli, 1000);
    cr_assert_str_eq(a->annot_gpu_node, "n1");
    cr_assert_eq(b->annot_gpu_devices, 0);
    cr_assert_null(b->annot_gpu_node);
    model_pod_free(b);
    json_decref(skipped);
    b = NULL;
    json_t *w;
    parse_both("full_pod.json", model_skip_pod_watch(), &w, &skipped);
    json_decref(w);
    cr_assert_null(
        json_object_get(json_object_get(json_object_get(skipped, "metadata"), "annotations"),
                        "kubectl.kubernetes.io/last-applied-configuration"));
    cr_assert_eq(model_pod_from_json(&reg, skipped, &b, &d), AS_OK, "%s: %s", d.field, d.msg);
    same_pod(a, b);
    cr_assert_eq(b->annot_gpu_devices, a->annot_gpu_devices);
    cr_assert_eq(b->annot_gpu_milli, a->annot_gpu_milli);
    cr_assert_str_eq(b->annot_gpu_node, a->annot_gpu_node);
    /* the fixture exercises what the model reads */
    cr_assert_eq(a->phase, MODEL_PHASE_RUNNING);
    cr_assert_eq(a->ntolerations, 2);
    cr_assert(a->affinity.present);
    cr_assert_eq(a->labels.n, 4);
    cr_assert_gt(a->req.v[MODEL_RES_CPU], 400, "init sidecar and overhead counted: %lld",
                 (long long)a->req.v[MODEL_RES_CPU]);
    model_pod_free(a);
    model_pod_free(b);
    json_decref(whole);
    json_decref(skipped);
    model_registry_destroy(&reg);
}

Test(model_skip, skip_rules_keep_the_node_model)
{
    model_registry reg;
    model_registry_init(&reg);
    json_t *whole, *skipped;
    parse_both("full_node.json", model_skip_node(), &whole, &skipped);
    model_node *a = NULL, *b = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(model_node_from_json(&reg, whole, &a, &d), AS_OK, "%s: %s", d.field, d.msg);
    cr_assert_eq(model_node_from_json(&reg, skipped, &b, &d), AS_OK, "%s: %s", d.field, d.msg);
    same_node(a, b);
    cr_assert(a->ready);
    cr_assert_eq(a->ntaints, 1);
    cr_assert_eq(a->ngpus, 8);
    model_node_free(a);
    model_node_free(b);
    json_decref(whole);
    json_decref(skipped);
    model_registry_destroy(&reg);
}

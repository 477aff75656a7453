/*
 * test_podscan.c - the pod scanner (podscan.h): its brief agrees with the
 * decoder on a full Pod, its digest ignores exactly the members the
 * decoder does not read (and nodeName, resourceVersion) and moves with
 * every member it reads, and a brief the pod hooks cannot trust says so
 * (plain false).
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/doc.h"
#include "agentsched/base/jscan.h"
#include "agentsched/base/json.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/podscan.h"
#include "agentsched/model/skip.h"
#include "agentsched/model/registry.h"

static json_t *fixture(void)
{
    char path[512];
    snprintf(path, sizeof path, "%s/k8s/full_pod.json", TEST_DATA_DIR);
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    cr_assert_not_null(o, "%s: %s", path, je.text);
    return o;
}

/* scan_text scans text (owned by the caller) into *b: 1 or 0. */
static int scan_text(const char *text, model_pod_brief *b)
{
    as_diag d = {{0}, {0}};
    jscan s = {.base = text, .p = text, .end = text + strlen(text), .diag = &d};
    return model_podscan(&s, b);
}

/* digest_of dumps o compactly and scans it. */
static model_pod_brief brief_of(const json_t *o)
{
    char *text = json_dumps(o, JSON_COMPACT);
    cr_assert_not_null(text);
    model_pod_brief b;
    cr_assert_eq(scan_text(text, &b), 1, "%s", text);
    free(text);
    /* spans point into the freed text: callers use digest and flags only */
    bool terminating = b.terminating, plain = b.plain;
    memset(&b.uid, 0, sizeof b - offsetof(model_pod_brief, uid));
    b.terminating = terminating;
    b.plain = plain;
    return b;
}

static bool span_is(model_span s, const char *want)
{
    if (!want)
        return s.s == NULL;
    return s.s && s.len == strlen(want) && memcmp(s.s, want, s.len) == 0;
}

Test(podscan, brief_agrees_with_decoder)
{
    json_t *o = fixture();
    char *text = json_dumps(o, JSON_COMPACT);
    model_pod_brief b;
    cr_assert_eq(scan_text(text, &b), 1);
    cr_assert(b.plain);
    model_registry reg;
    model_registry_init(&reg);
    model_pod *p = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(model_pod_from_json(&reg, o, &p, &d), AS_OK, "%s", d.msg);
    cr_assert(span_is(b.ns, p->ns));
    cr_assert(span_is(b.name, p->name));
    cr_assert(span_is(b.uid, p->uid));
    cr_assert(span_is(b.resource_version, p->resource_version));
    cr_assert(span_is(b.node_name, p->node_name));
    cr_assert(span_is(b.scheduler_name, p->scheduler_name));
    cr_assert_eq(b.terminating, p->terminating);
    model_pod *q = NULL;
    cr_assert_eq(model_pod_from_brief(&b, &q), AS_OK);
    cr_assert_str_eq(q->ns, p->ns);
    cr_assert_str_eq(q->name, p->name);
    cr_assert_str_eq(q->uid, p->uid);
    cr_assert_str_eq(q->node_name, p->node_name);
    cr_assert_str_eq(q->scheduler_name, p->scheduler_name);
    cr_assert_eq(q->phase, p->phase);
    cr_assert_eq(q->terminating, p->terminating);
    char key[600], tmp[600];
    cr_assert(model_pod_brief_key(&b, key, sizeof key));
    cr_assert_str_eq(key, model_pod_key(p, tmp, sizeof tmp, NULL));
    model_pod_free(p);
    model_pod_free(q);
    free(text);
    json_decref(o);
    model_registry_destroy(&reg);
}

/* One change to the fixture: parent member path ("" top level), key, and
 * the new value as JSON (NULL deletes the member). */
typedef struct change {
    const char *parent, *key, *value;
    bool same; /* the digest stays */
} change;

static const change changes[] = {
    /* not read by the decoder (or carried apart): the digest stays */
    {"metadata", "resourceVersion", "\"99999\"", true},
    {"metadata", "managedFields", "[{\"manager\":\"other\"}]", true},
    {"metadata", "managedFields", NULL, true},
    {"metadata", "generation", "7", true},
    {"spec", "nodeName", "\"n9\"", true},
    {"metadata", "deletionTimestamp", "\"2026-12-03T00:00:00Z\"", true}, /* terminating */
    {"metadata", "deletionGracePeriodSeconds", "0", true},
    {"spec", "nodeName", NULL, true},
    {"status", "conditions", "[]", true},
    {"status", "podIP", "\"10.9.9.9\"", true},
    {"status", "containerStatuses", NULL, true},
    {"status", "startTime", "\"2026-12-03T00:00:00Z\"", true},
    /* read by the decoder: the digest moves */
    {"", "kind", "\"Pox\"", false},
    {"metadata", "name", "\"other\"", false},
    {"metadata", "namespace", "\"other\"", false},
    {"metadata", "uid", "\"u2\"", false},
    {"metadata", "labels", "{\"app\":\"x\"}", false},
    {"metadata", "annotations", "{}", false},
    {"metadata", "creationTimestamp", "\"2026-12-03T00:00:00Z\"", false},
    {"spec", "schedulerName", "\"other\"", false},
    {"spec", "priority", "5", false},
    {"spec", "nodeSelector", "{}", false},
    {"spec", "tolerations", "[]", false},
    {"spec", "overhead", NULL, false},
    {"spec", "containers", "[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"3\"}}}]",
     false},
    {"status", "phase", "\"Succeeded\"", false},
    {"status", "phase", NULL, false},
};

Test(podscan, digest_follows_what_the_decoder_reads)
{
    json_t *o = fixture();
    model_pod_brief base = brief_of(o);
    cr_assert_neq(base.digest, 0);
    for (size_t i = 0; i < sizeof changes / sizeof changes[0]; i++) {
        const change *c = &changes[i];
        json_t *m = json_deep_copy(o);
        json_t *parent = c->parent[0] ? json_object_get(m, c->parent) : m;
        cr_assert_not_null(parent);
        if (c->value) {
            json_error_t je;
            json_t *v = json_loads(c->value, JSON_DECODE_ANY, &je);
            cr_assert_not_null(v, "%s", je.text);
            json_object_set_new(parent, c->key, v);
        } else {
            json_object_del(parent, c->key);
        }
        model_pod_brief b = brief_of(m);
        cr_assert_eq(b.terminating, !strcmp(c->key, "deletionTimestamp"), "%s.%s: terminating",
                     c->parent, c->key);
        if (c->same)
            cr_assert_eq(b.digest, base.digest, "%s.%s: digest moved", c->parent, c->key);
        else
            cr_assert_neq(b.digest, base.digest, "%s.%s: digest stayed", c->parent, c->key);
        json_decref(m);
    }
    json_decref(o);
}

/* The registry's size is part of a decoded pod's digest. */
Test(podscan, digest_tied_to_registry)
{
    json_t *o = fixture();
    model_pod_brief b = brief_of(o);
    model_registry reg;
    model_registry_init(&reg);
    uint64_t d0 = model_pod_digest(&reg, &b);
    cr_assert_neq(d0, 0);
    cr_assert_eq(model_pod_digest(&reg, &b), d0);
    int idx;
    cr_assert_eq(model_registry_intern(&reg, "example.com/widget", 18, &idx), AS_OK);
    cr_assert_neq(model_pod_digest(&reg, &b), d0);
    model_registry_destroy(&reg);
    json_decref(o);
}

typedef struct text_case {
    const char *text;
    int scanned; /* model_podscan's result */
    bool plain;
} text_case;

static const text_case texts[] = {
    {"{\"metadata\":{\"name\":\"a\",\"uid\":\"u\"},\"spec\":{\"nodeName\":\"n\"}}", 1, true},
    {"{\"metadata\":{\"name\":\"a\\u0062\"}}", 1, false},      /* an escape */
    {"{\"metadata\":{\"n\\u0061me\":\"a\"}}", 1, false},       /* an escaped key */
    {"{\"metadata\":{\"name\":7}}", 1, false},                 /* a wrong type */
    {"{\"metadata\":[]}", 1, false},                           /* metadata not an object */
    {"{\"metadata\":{\"deletionTimestamp\":null}}", 1, false}, /* null */
    {"{\"spec\":{\"nodeName\":null}}", 1, false},
    {"{\"status\":{\"phase\":\"Running\"}}", 1, true},
    {"[]", 1, false},                             /* not an object */
    {"{\"metadata\":{\"name\":\"a\"}", 0, false}, /* not JSON */
    {"{\"metadata\":{\"name\":\"a\",}}", 0, false},
};

Test(podscan, plain_only_when_the_hooks_can_trust_it)
{
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        model_pod_brief b;
        int r = scan_text(texts[i].text, &b);
        cr_assert_eq(r, texts[i].scanned, "case %zu: %s", i, texts[i].text);
        if (r)
            cr_assert_eq(b.plain, texts[i].plain, "case %zu: %s", i, texts[i].text);
    }
}

Test(podscan, key_without_uid)
{
    model_pod_brief b;
    cr_assert_eq(scan_text("{\"metadata\":{\"name\":\"a\"}}", &b), 1);
    char key[64];
    cr_assert(model_pod_brief_key(&b, key, sizeof key));
    cr_assert_str_eq(key, "default/a");
    cr_assert_not(model_pod_brief_key(&b, key, 5), "too small");
    model_pod *p = NULL;
    cr_assert_eq(model_pod_from_brief(&b, &p), AS_OK);
    cr_assert_str_eq(p->ns, "default");
    cr_assert_str_eq(p->scheduler_name, "default-scheduler");
    cr_assert_null(p->node_name);
    cr_assert_eq(p->phase, MODEL_PHASE_PENDING);
    model_pod_free(p);
    cr_assert_eq(scan_text("{\"metadata\":{\"name\":\"a\"},\"status\":{\"phase\":\"Bogus\"}}", &b),
                 1);
    cr_assert_eq(model_pod_from_brief(&b, &p), AS_EINVAL, "a phase the decoder refuses");
}

/* fields_vs_watch_decode builds the Pod text pod (spec SPEC_ON(node)) as
 * the watch does on a spec memo hit, around a spec remembered from
 * another node's pod, and as the watch decodes it: when the fields path
 * builds a pod, it is the decoded one; plain: it must build it. */
#define SPEC_ON(node)                                                                              \
    "\"spec\":{" node "\"schedulerName\":\"agent-scheduler\",\"containers\":[{\"name\":\"c\","     \
    "\"resources\":{\"requests\":{\"cpu\":\"500m\"}}}]}"
static void fields_vs_watch_decode(model_registry *reg, const char *pod, bool plain)
{
    model_pod_brief b;
    cr_assert_eq(scan_text(pod, &b), 1, "%s", pod);
    cr_assert_not_null(b.spec.s, "%s", pod);
    json_error_t je;
    json_t *other = json_loads("{" SPEC_ON("\"nodeName\":\"elsewhere\",") "}", 0, &je);
    model_pod_spec *spec = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(model_pod_spec_from_json(reg, json_object_get(other, "spec"), &spec, &d), AS_OK);
    json_decref(other);

    model_pod_fields f;
    model_span keys[8], values[8];
    model_pod *fast = NULL, *dom = NULL;
    as_err fe = AS_EUNSUPPORTED;
    /* as the watch: the brief's spans are taken only when plain */
    if (b.plain && model_pod_fields_read(pod, strlen(pod), b.spec.s, b.spec.s + b.spec.len, &f,
                                         keys, values, 8)) {
        f.node_name = &b.node_name;
        fe = model_pod_from_fields(reg, &f, spec, &fast);
    }
    json_t *o = NULL;
    cr_assert_eq(json_parse_skip(pod, strlen(pod), model_skip_pod_watch(), &o, &d), AS_OK);
    cr_assert_eq(model_pod_from_json(reg, o, &dom, &d), AS_OK, "%s: %s", pod, d.msg);
    json_decref(o);
    cr_assert(fe == AS_OK || fe == AS_EUNSUPPORTED, "%s", pod);
    cr_assert_eq(fe == AS_OK, plain, "%s: fields path %s", pod, fe ? "refused" : "took it");
    if (fast) {
        cr_assert_str_eq(fast->name, dom->name, "%s", pod);
        cr_assert_eq(!fast->node_name, !dom->node_name, "%s", pod);
        if (dom->node_name)
            cr_assert_str_eq(fast->node_name, dom->node_name, "%s", pod);
        cr_assert_str_eq(fast->scheduler_name, dom->scheduler_name, "%s", pod);
        cr_assert_eq(fast->labels.n, dom->labels.n, "%s", pod);
        for (uint32_t i = 0; i < dom->labels.n; i++) {
            cr_assert_str_eq(fast->labels.items[i].key, dom->labels.items[i].key);
            cr_assert_str_eq(fast->labels.items[i].value, dom->labels.items[i].value);
        }
        cr_assert_eq(fast->mirror, dom->mirror, "%s", pod);
        cr_assert_eq(fast->annot_gpu_devices, dom->annot_gpu_devices, "%s", pod);
        cr_assert_eq(!fast->annot_gpu_node, !dom->annot_gpu_node, "%s", pod);
        cr_assert_eq(fast->phase, dom->phase, "%s", pod);
        cr_assert_eq(fast->terminating, dom->terminating, "%s", pod);
        cr_assert(memcmp(&fast->req, &dom->req, sizeof fast->req) == 0, "%s", pod);
    }
    model_pod_free(fast);
    model_pod_free(dom);
    model_pod_spec_unref(spec);
}

Test(podscan, fields_build_what_the_watch_decodes)
{
    model_registry reg;
    model_registry_init(&reg);
    static const struct {
        const char *meta; /* metadata's members after the name */
        const char *node; /* spec.nodeName, with its comma */
        bool plain;
    } cases[] = {
        {"", "", true},
        {",\"labels\":{\"app\":\"agent\",\"b\":\"2\"}", "\"nodeName\":\"n1\",", true},
        {"", "\"nodeName\":\"\",", true},
        /* annotations the decoder does not read */
        {",\"annotations\":{\"team\":\"a\",\"n\":null}", "\"nodeName\":\"n1\",", true},
        {",\"annotations\":null", "", true},
        /* annotations it reads: the DOM carries them */
        {",\"annotations\":{\"kubernetes.io/config.mirror\":\"x\"}", "\"nodeName\":\"n1\",", false},
        {",\"annotations\":{\"agentsched.io/gpu-devices\":\"0\",\"agentsched.io/gpu-milli\":"
         "\"500\",\"agentsched.io/gpu-node\":\"n1\"}",
         "\"nodeName\":\"n1\",", false},
        {",\"annotations\":{\"agentsched.io/gpu-node\":\"n1\"}", "", false},
        {",\"annotations\":{\"k\\u0065y\":\"v\"}", "", false},
        {",\"annotations\":\"odd\"", "", false},
        /* a nodeName the brief cannot carry */
        {"", "\"nodeName\":\"n\\u0031\",", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char pod[1024];
        snprintf(pod, sizeof pod,
                 "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"uid\":"
                 "\"u\"%s},\"spec\":{%s\"schedulerName\":\"agent-scheduler\",\"containers\":[{"
                 "\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"500m\"}}}]},\"status\":{"
                 "\"phase\":\"Pending\"}}",
                 cases[i].meta, cases[i].node);
        fields_vs_watch_decode(&reg, pod, cases[i].plain);
    }
    model_registry_destroy(&reg);
}

/* test_pod.c - v1 Pod decoding, effective requests, selectors, tolerations. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/doc.h"
#include "agentsched/base/log.h"
#include "agentsched/model/labels.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"

static model_registry reg;
static int gpu_idx, foo_idx;

static void setup(void)
{
    log_set_level(LOG_ERROR);
    model_registry_init(&reg);
    cr_assert_eq(model_registry_intern(&reg, "example.com/foo", 15, &foo_idx), AS_OK);
}
static void teardown(void)
{
    model_registry_destroy(&reg);
}
static void with_gpu(void)
{
    cr_assert_eq(model_registry_intern(&reg, "nvidia.com/gpu", 14, &gpu_idx), AS_OK);
}

TestSuite(pod, .init = setup, .fini = teardown);
TestSuite(match, .init = setup, .fini = teardown);

static json_t *Y(const char *yaml)
{
    json_t *v = NULL;
    as_diag d = {{0}, {0}};
    as_err err = doc_parse(yaml, strlen(yaml), false, &v, &d);
    cr_assert_eq(err, AS_OK, "test YAML does not parse: %s", d.msg);
    return v;
}

static model_pod *P(const char *yaml)
{
    json_t *v = Y(yaml);
    model_pod *p = NULL;
    as_diag d = {{0}, {0}};
    as_err err = model_pod_from_json(&reg, v, &p, &d);
    json_decref(v);
    cr_assert_eq(err, AS_OK, "decode failed: %s (field %s)", d.msg, d.field);
    return p;
}

static void bad(const char *yaml, as_err want, const char *field, const char *frag1,
                const char *frag2)
{
    json_t *v = Y(yaml);
    model_pod *p = (model_pod *)0x1;
    as_diag d = {{0}, {0}};
    as_err err = model_pod_from_json(&reg, v, &p, &d);
    json_decref(v);
    cr_expect_eq(err, want, "err %d want %d: %s", err, want, d.msg);
    cr_expect_null(p);
    cr_expect_str_eq(d.field, field, "field \"%s\" want \"%s\" (%s)", d.field, field, d.msg);
    if (frag1)
        cr_expect(strstr(d.msg, frag1) != NULL, "msg lacks \"%s\": %s", frag1, d.msg);
    if (frag2)
        cr_expect(strstr(d.msg, frag2) != NULL, "msg lacks \"%s\": %s", frag2, d.msg);
}

#define HDR "kind: Pod\nmetadata: {name: web-1, namespace: default}\n"

/* ---- requests ---------------------------------------------------- */

Test(pod, containers_are_summed)
{
    model_pod *p = P(HDR "spec:\n  containers:\n"
                         "  - {name: a, resources: {requests: {cpu: 100m, memory: 64Mi}}}\n"
                         "  - {name: b, resources: {requests: {cpu: \"1.5\", memory: 1Gi, "
                         "ephemeral-storage: 1G}}}\n"
                         "  - {name: c}\n");
    cr_assert_eq(p->req.v[MODEL_RES_CPU], 1600);
    cr_assert_eq(p->req.v[MODEL_RES_MEMORY], (64LL << 20) + (1LL << 30));
    cr_assert_eq(p->req.v[MODEL_RES_EPHEMERAL], 1000000000);
    cr_assert_eq(p->req.v[MODEL_RES_PODS], 1);
    cr_assert_eq(p->req_mask, (1u << MODEL_RES_CPU) | (1u << MODEL_RES_MEMORY) |
                                  (1u << MODEL_RES_EPHEMERAL) | (1u << MODEL_RES_PODS));
    cr_assert_null(p->unknown_res);
    cr_assert_eq(p->gpu_count, 0);
    model_pod_free(p);
}

Test(pod, no_containers_requests_one_pod)
{
    model_pod *p = P(HDR);
    cr_assert_eq(p->req.v[MODEL_RES_CPU], 0);
    cr_assert_eq(p->req.v[MODEL_RES_PODS], 1);
    cr_assert_eq(p->req_mask, 1u << MODEL_RES_PODS);
    model_pod_free(p);
}

Test(pod, limits_default_missing_requests)
{
    /* SetDefaults_Pod: per resource, a limit without a request becomes the
     * request; an explicit request (even 0) wins */
    model_pod *p = P(HDR "spec:\n  containers:\n"
                         "  - resources:\n      limits: {cpu: \"2\", memory: 1Gi}\n"
                         "  - resources:\n      requests: {cpu: 250m}\n"
                         "      limits: {cpu: \"1\", memory: 512Mi}\n"
                         "  - resources:\n      requests: {example.com/foo: 0}\n"
                         "      limits: {example.com/foo: 3}\n");
    cr_assert_eq(p->req.v[MODEL_RES_CPU], 2250);
    cr_assert_eq(p->req.v[MODEL_RES_MEMORY], (1LL << 30) + (512LL << 20));
    cr_assert_eq(p->req.v[foo_idx], 0);
    model_pod_free(p);
}

Test(pod, init_containers_take_the_max)
{
    model_pod *p = P(HDR "spec:\n"
                         "  initContainers:\n"
                         "  - resources: {requests: {cpu: \"2\", memory: 100Mi}}\n"
                         "  - resources: {limits: {memory: 1Gi}}\n"
                         "  containers:\n"
                         "  - resources: {requests: {cpu: \"1\", memory: 200Mi}}\n"
                         "  - resources: {requests: {cpu: 500m, memory: 200Mi}}\n");
    cr_assert_eq(p->req.v[MODEL_RES_CPU], 2000, "max(1.5, 2)");
    cr_assert_eq(p->req.v[MODEL_RES_MEMORY], 1LL << 30, "max(400Mi, 100Mi, 1Gi)");
    model_pod_free(p);
}

Test(pod, sidecars_add_and_accumulate)
{
    /* init[0] regular 2 cpu: runs alone -> 2
     * init[1] sidecar 500m: added to the sum, running from now on
     * init[2] regular 2 cpu: needs 2 + 0.5 = 2.5
     * init[3] sidecar 250m: added
     * containers 1 cpu: sum = 1 + 0.5 + 0.25 = 1.75
     * result max(1.75, 2, 0.5, 2.5, 0.75) = 2.5 */
    model_pod *p = P(HDR "spec:\n"
                         "  initContainers:\n"
                         "  - resources: {requests: {cpu: \"2\"}}\n"
                         "  - restartPolicy: Always\n"
                         "    resources: {requests: {cpu: 500m, memory: 1Gi}}\n"
                         "  - resources: {requests: {cpu: \"2\"}}\n"
                         "  - restartPolicy: Always\n"
                         "    resources: {requests: {cpu: 250m}}\n"
                         "  containers:\n"
                         "  - resources: {requests: {cpu: \"1\", memory: 1Gi}}\n");
    cr_assert_eq(p->req.v[MODEL_RES_CPU], 2500);
    cr_assert_eq(p->req.v[MODEL_RES_MEMORY], 2LL << 30, "container + sidecar");
    model_pod_free(p);

    /* sidecars dominate when the main containers are large */
    p = P(HDR "spec:\n"
              "  initContainers:\n"
              "  - {restartPolicy: Always, resources: {requests: {cpu: \"1\"}}}\n"
              "  - {restartPolicy: OnFailure, resources: {requests: {cpu: \"3\"}}}\n"
              "  containers:\n"
              "  - resources: {requests: {cpu: \"4\"}}\n");
    cr_assert_eq(p->req.v[MODEL_RES_CPU], 5000, "max(4+1, 3+1)");
    model_pod_free(p);
}

Test(pod, overhead_is_added)
{
    model_pod *p = P(HDR "spec:\n"
                         "  overhead: {cpu: 250m, memory: 120Mi}\n"
                         "  initContainers:\n"
                         "  - resources: {requests: {cpu: \"3\"}}\n"
                         "  containers:\n"
                         "  - resources: {requests: {cpu: \"1\", memory: 1Gi}}\n");
    cr_assert_eq(p->req.v[MODEL_RES_CPU], 3250, "max(1, 3) + 0.25");
    cr_assert_eq(p->req.v[MODEL_RES_MEMORY], (1LL << 30) + (120LL << 20));
    model_pod_free(p);
}

Test(pod, pod_level_resources)
{
    model_pod *p = P(HDR "spec:\n"
                         "  resources:\n    requests: {cpu: \"4\"}\n    limits: {memory: 8Gi}\n"
                         "  overhead: {cpu: 100m}\n"
                         "  containers:\n"
                         "  - resources: {requests: {cpu: \"1\", memory: 1Gi}}\n");
    cr_assert_eq(p->req.v[MODEL_RES_CPU], 4100, "pod-level request replaces, plus overhead");
    cr_assert_eq(p->req.v[MODEL_RES_MEMORY], 1LL << 30,
                 "a pod-level limit does not replace a container request");
    model_pod_free(p);
    p = P(HDR "spec:\n"
              "  resources:\n    limits: {cpu: \"2\", memory: 8Gi}\n"
              "  containers:\n"
              "  - resources: {requests: {cpu: \"1\"}}\n");
    cr_assert_eq(p->req.v[MODEL_RES_CPU], 1000);
    cr_assert_eq(p->req.v[MODEL_RES_MEMORY], 8LL << 30, "no container asked: limit stands in");
    model_pod_free(p);
}

Test(pod, unknown_resources_are_not_interned)
{
    int before = model_registry_count(&reg);
    model_pod *p = P(HDR "spec:\n  containers:\n"
                         "  - resources: {requests: {cpu: 1, example.com/bar: \"0\"}}\n"
                         "  - resources: {limits: {example.com/baz: \"2\", example.com/foo: 1}}\n");
    cr_assert_str_eq(p->unknown_res, "example.com/baz");
    cr_assert_eq(p->req.v[foo_idx], 1);
    cr_assert_eq(model_registry_count(&reg), before);
    cr_assert_eq(model_registry_lookup(&reg, "example.com/baz", 15), -1);
    model_pod_free(p);
}

Test(pod, whole_gpus_stay_in_the_vector)
{
    with_gpu();
    model_pod *p = P(HDR "spec:\n  containers:\n"
                         "  - resources: {limits: {nvidia.com/gpu: 2}}\n");
    cr_assert_eq(p->gpu_count, 2);
    cr_assert_eq(p->gpu_milli, MODEL_GPU_MILLI);
    cr_assert_eq(p->req.v[gpu_idx], 2);
    cr_assert(p->req_mask & (1u << gpu_idx));
    cr_assert_null(p->unknown_res);
    model_pod_free(p);
}

Test(pod, whole_gpus_without_gpu_nodes_wait_for_devices)
{
    /* Not unknown_res: the decoded pod must fit once a GPU node joins. */
    model_pod *p = P(HDR "spec:\n  containers:\n"
                         "  - resources: {requests: {nvidia.com/gpu: 1}}\n");
    cr_assert_null(p->unknown_res);
    cr_assert_eq(p->gpu_count, 1);
    cr_assert_eq(p->gpu_milli, MODEL_GPU_MILLI);
    model_pod_free(p);
}

Test(pod, gpu_share)
{
    with_gpu();
    model_pod *p = P(HDR "spec:\n  containers:\n"
                         "  - resources: {requests: {agentsched.io/gpu-milli: 300, cpu: 1}}\n"
                         "  - resources: {requests: {agentsched.io/gpu-milli: 200}}\n");
    cr_assert_eq(p->gpu_count, 1);
    cr_assert_eq(p->gpu_milli, 500);
    cr_assert_eq(p->req.v[gpu_idx], 0, "a share is not a vector entry");
    cr_assert_null(p->unknown_res);
    model_pod_free(p);
}

Test(pod, gpu_share_without_gpu_nodes_waits_for_devices)
{
    model_pod *p = P(HDR "spec:\n  containers:\n"
                         "  - resources: {requests: {agentsched.io/gpu-milli: 300}}\n");
    cr_assert_null(p->unknown_res);
    cr_assert_eq(p->gpu_count, 1);
    cr_assert_eq(p->gpu_milli, 300);
    model_pod_free(p);
}

Test(pod, gpu_share_errors)
{
    with_gpu();
    bad(HDR "spec:\n  containers:\n"
            "  - resources: {requests: {agentsched.io/gpu-milli: 1500}}\n",
        AS_EINVAL, "spec.containers[0].resources.requests[agentsched.io/gpu-milli]",
        "pod default/web-1", "more than one GPU");
    bad(HDR "spec:\n  containers:\n"
            "  - resources: {requests: {nvidia.com/gpu: 1}}\n"
            "  - resources: {requests: {agentsched.io/gpu-milli: 500}}\n",
        AS_EINVAL, "spec.containers[1].resources.requests[agentsched.io/gpu-milli]", "not both",
        NULL);
}

Test(pod, bad_requests)
{
    bad(HDR "spec:\n  containers:\n  - {name: a}\n"
            "  - resources: {requests: {cpu: 12x}}\n",
        AS_EPARSE, "spec.containers[1].resources.requests.cpu",
        "pod default/web-1: spec.containers[1].resources.requests.cpu: invalid quantity \"12x\"",
        "Ki Mi Gi");
    bad(HDR "spec:\n  initContainers:\n  - resources: {limits: {memory: 1Gb}}\n", AS_EPARSE,
        "spec.initContainers[0].resources.limits.memory", "\"1Gb\"", NULL);
    bad(HDR "spec:\n  overhead: {cpu: \"-1\"}\n", AS_EINVAL, "spec.overhead.cpu", "negative", NULL);
    bad(HDR "spec:\n  containers:\n  - resources: {requests: {memory: 8Ei}}\n"
            "  - resources: {requests: {memory: 8Ei}}\n",
        AS_ERANGE, "spec.containers[0].resources.requests.memory", "too large", NULL);
    bad(HDR "spec:\n  containers:\n  - resources: {requests: {memory: 6Ei}}\n"
            "  - resources: {requests: {memory: 6Ei}}\n",
        AS_ERANGE, "spec.containers[1]", "overflow", NULL);
}

/* bad_dom is bad() on a DOM the test built (keys YAML cannot spell). */
static void bad_dom(json_t *v, as_err want, const char *field, const char *frag)
{
    model_pod *p = (model_pod *)0x1;
    as_diag d = {{0}, {0}};
    as_err err = model_pod_from_json(&reg, v, &p, &d);
    json_decref(v);
    cr_expect_eq(err, want, "err %d want %d: %s", err, want, d.msg);
    cr_expect_null(p);
    cr_expect_str_eq(d.field, field, "field \"%s\" want \"%s\" (%s)", d.field, field, d.msg);
    if (frag)
        cr_expect(strstr(d.msg, frag) != NULL, "msg lacks \"%s\": %s", frag, d.msg);
}

/* with_key returns the pod of yaml with member key[0..len) = val (stolen)
 * added to the object at path (member names, NULL-terminated). */
static json_t *with_key(const char *yaml, const char *const *path, const char *key, size_t len,
                        json_t *val)
{
    json_t *v = Y(yaml), *o = v;
    for (; *path; path++) {
        o = json_is_array(o) ? json_array_get(o, 0) : json_object_get(o, *path);
        cr_assert(o, "no %s", *path);
    }
    cr_assert_eq(json_object_setn_new(o, key, len, val), 0);
    return v;
}

/* A key holding NUL is refused, wherever the DOM came from: as a C string
 * "cpu\0x" would be cpu and "kubernetes.io/hostname\0x" the hostname. */
Test(pod, nul_in_keys)
{
    static const char *const sel[] = {"spec", "nodeSelector", NULL};
    static const char *const req[] = {"spec", "containers", "0", "resources", "requests", NULL};
    static const char *const lab[] = {"metadata", "labels", NULL};
    bad_dom(with_key(HDR "spec: {nodeSelector: {a: b}}\n", sel, "kubernetes.io/hostname\0x", 24,
                     json_string("n1")),
            AS_EINVAL, "spec.nodeSelector", "\\u0000");
    bad_dom(with_key(HDR "spec:\n  containers:\n  - resources: {requests: {memory: 1Gi}}\n", req,
                     "cpu\0x", 5, json_string("1")),
            AS_EINVAL, "spec.containers[0].resources.requests", "\\u0000");
    bad_dom(with_key("kind: Pod\nmetadata: {name: web-1, labels: {a: b}}\n", lab, "a\0", 2,
                     json_string("c")),
            AS_EINVAL, "metadata.labels", "\\u0000");
}

/* Strings compared or parsed as C strings are read whole: "Pod\0x" is
 * not kind Pod, "Always\0x" no sidecar, a timestamp with NUL is no time. */
Test(pod, nul_in_compared_values)
{
    json_t *v = Y(HDR "spec: {}\n");
    json_object_set_new(v, "kind", json_stringn("Pod\0x", 5));
    bad_dom(v, AS_EINVAL, "kind", "expected kind Pod");
    v = Y("kind: Pod\nmetadata: {name: web-1}\n");
    json_object_set_new(json_object_get(v, "metadata"), "creationTimestamp",
                        json_stringn("2026-01-02T15:04:05Z\0junk", 25));
    bad_dom(v, AS_EINVAL, "metadata.creationTimestamp", "RFC 3339");
    v = Y(HDR "spec:\n  containers:\n  - resources: {requests: {cpu: 1}}\n"
              "  initContainers:\n  - resources: {requests: {cpu: 1}}\n");
    json_t *ic = json_array_get(json_object_get(json_object_get(v, "spec"), "initContainers"), 0);
    json_object_set_new(ic, "restartPolicy", json_stringn("Always\0x", 8));
    model_pod *p = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(model_pod_from_json(&reg, v, &p, &d), AS_OK, "%s", d.msg);
    json_decref(v);
    /* a sidecar would add up to 2000 */
    cr_expect_eq(p->req.v[MODEL_RES_CPU], 1000, "a regular init container, not a sidecar");
    model_pod_free(p);
}

Test(pod, empty_resource_name)
{
    static const char *const req[] = {"spec", "containers", "0", "resources", "requests", NULL};
    bad_dom(with_key(HDR "spec:\n  containers:\n  - resources: {requests: {cpu: 1}}\n", req, "", 0,
                     json_string("1")),
            AS_EINVAL, "spec.containers[0].resources.requests", "empty");
    bad(HDR "spec:\n  overhead: {\"\": 1}\n", AS_EINVAL, "spec.overhead", "empty", NULL);
}

/* Kubernetes' limits: a name is a DNS subdomain (253), a namespace a DNS
 * label (63). */
Test(pod, name_and_namespace_lengths)
{
    char yaml[2048], name[300], ns[80];
    memset(name, 'a', sizeof name);
    memset(ns, 'b', sizeof ns);
    snprintf(yaml, sizeof yaml, "metadata: {name: %.253s, namespace: %.63s}\n", name, ns);
    model_pod *p = P(yaml);
    cr_expect_eq(strlen(p->name), 253);
    cr_expect_eq(strlen(p->ns), 63);
    model_pod_free(p);
    snprintf(yaml, sizeof yaml, "metadata: {name: %.254s}\n", name);
    bad(yaml, AS_EINVAL, "metadata.name", "254 bytes", "at most 253");
    snprintf(yaml, sizeof yaml, "metadata: {name: x, namespace: %.64s}\n", ns);
    bad(yaml, AS_EINVAL, "metadata.namespace", "64 bytes", "at most 63");
    /* a 1 MB name is refused without being quoted */
    char *big = malloc(1 << 20);
    memset(big, 'c', 1 << 20);
    json_t *v = json_pack("{s:{s:s#}}", "metadata", "name", big, (int)(1 << 20));
    free(big);
    cr_assert(v);
    bad_dom(v, AS_EINVAL, "metadata.name", "1048576 bytes");
    /* a multi-byte name, cut where messages quote it, stays valid UTF-8 */
    char mb[256] = "a"; /* odd: byte 100 is inside a character */
    for (int i = 0; i < 75; i++)
        strcat(mb, "\xc3\xa9");
    v = json_pack("{s:{s:s},s:{s:s}}", "metadata", "name", mb, "spec", "priority", "x");
    cr_assert(v);
    model_pod *q = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(model_pod_from_json(&reg, v, &q, &d), AS_EINVAL);
    json_decref(v);
    json_t *msg = json_string(d.msg);
    cr_expect_not_null(msg, "not UTF-8: %s", d.msg);
    json_decref(msg);
}

/* ---- scalar fields ------------------------------------------------ */

Test(pod, metadata_and_status)
{
    model_pod *p = P("kind: Pod\n"
                     "metadata:\n  name: agent-7\n  namespace: agents\n  uid: u-7\n"
                     "  resourceVersion: \"99\"\n"
                     "  labels: {app: agent, tier: \"1\"}\n"
                     "  creationTimestamp: \"2026-11-30T05:12:00Z\"\n"
                     "  deletionTimestamp: \"2026-11-30T06:00:00Z\"\n"
                     "spec:\n  nodeName: cpu-1\n  schedulerName: agent-scheduler\n"
                     "  priority: 1000\n"
                     "status: {phase: Running}\n");
    cr_assert_str_eq(p->ns, "agents");
    cr_assert_str_eq(p->name, "agent-7");
    cr_assert_str_eq(p->uid, "u-7");
    cr_assert_str_eq(p->resource_version, "99");
    cr_assert_str_eq(p->node_name, "cpu-1");
    cr_assert_str_eq(p->scheduler_name, "agent-scheduler");
    cr_assert_eq(p->priority, 1000);
    cr_assert_eq(p->phase, MODEL_PHASE_RUNNING);
    cr_assert(p->terminating);
    cr_assert_eq(p->created_ms, 1796015520000LL);
    cr_assert_str_eq(model_labels_get(&p->labels, "tier"), "1");
    cr_assert_not(model_pod_is_terminal(p));
    model_pod_free(p);
}

Test(pod, defaults)
{
    model_pod *p = P("metadata: {name: x}\n");
    cr_assert_str_eq(p->ns, "default");
    cr_assert_str_eq(p->uid, "");
    cr_assert_str_eq(p->resource_version, "");
    cr_assert_null(p->node_name);
    cr_assert_str_eq(p->scheduler_name, "default-scheduler");
    cr_assert_eq(p->priority, 0);
    cr_assert_eq(p->phase, MODEL_PHASE_PENDING);
    cr_assert_not(p->terminating);
    cr_assert_eq(p->created_ms, 0);
    cr_assert_not(p->affinity.present);
    cr_assert_eq(p->ntolerations, 0);
    cr_assert_eq(p->node_selector.n, 0);
    model_pod_free(p);
    p = P("metadata: {name: x, namespace: \"\"}\nspec: {nodeName: \"\", schedulerName: \"\"}\n");
    cr_assert_str_eq(p->ns, "default");
    cr_assert_null(p->node_name);
    cr_assert_str_eq(p->scheduler_name, "default-scheduler");
    model_pod_free(p);
}

Test(pod, phases_and_timestamps)
{
    static const struct {
        const char *phase;
        model_phase want;
        bool terminal;
    } ph[] = {{"Pending", MODEL_PHASE_PENDING, false},
              {"Running", MODEL_PHASE_RUNNING, false},
              {"Succeeded", MODEL_PHASE_SUCCEEDED, true},
              {"Failed", MODEL_PHASE_FAILED, true},
              {"Unknown", MODEL_PHASE_UNKNOWN, false}};
    for (size_t i = 0; i < sizeof ph / sizeof ph[0]; i++) {
        char y[128];
        snprintf(y, sizeof y, "metadata: {name: x}\nstatus: {phase: %s}\n", ph[i].phase);
        model_pod *p = P(y);
        cr_expect_eq(p->phase, ph[i].want, "%s", ph[i].phase);
        cr_expect_eq(model_pod_is_terminal(p), ph[i].terminal, "%s", ph[i].phase);
        model_pod_free(p);
    }
    static const struct {
        const char *ts;
        long long ms;
    } ts[] = {{"1970-01-01T00:00:00Z", 0},
              {"2000-02-29T12:00:00.5Z", 951825600500LL},
              {"2026-11-30T07:12:00+02:00", 1796015520000LL},
              {"2026-11-30T05:12:00.123456789Z", 1796015520123LL}};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        char y[128];
        snprintf(y, sizeof y, "metadata: {name: x, creationTimestamp: \"%s\"}\n", ts[i].ts);
        model_pod *p = P(y);
        cr_expect_eq(p->created_ms, ts[i].ms, "%s: %lld", ts[i].ts, (long long)p->created_ms);
        model_pod_free(p);
    }
}

Test(pod, wrong_types_and_values)
{
    bad("[]", AS_EINVAL, "", "must be an object", NULL);
    bad("kind: Node\nmetadata: {name: x}\n", AS_EINVAL, "kind", "expected kind Pod", NULL);
    bad("metadata: {namespace: a}\n", AS_EINVAL, "metadata.name", "non-empty", NULL);
    bad(HDR "spec: {containers: {name: a}}\n", AS_EINVAL, "spec.containers", "pod default/web-1",
        "must be a list");
    bad(HDR "spec: {containers: [web]}\n", AS_EINVAL, "spec.containers[0]",
        "container must be an object", NULL);
    bad(HDR "spec:\n  containers:\n  - resources: {requests: [cpu]}\n", AS_EINVAL,
        "spec.containers[0].resources.requests", "must be an object", NULL);
    bad(HDR "spec:\n  containers:\n  - resources: {requests: {cpu: true}}\n", AS_EINVAL,
        "spec.containers[0].resources.requests.cpu", "a boolean", NULL);
    bad(HDR "spec: {priority: high}\n", AS_EINVAL, "spec.priority", "must be an integer", NULL);
    bad(HDR "spec: {priority: 3000000000}\n", AS_ERANGE, "spec.priority", "32-bit", NULL);
    bad(HDR "spec: {nodeName: 5}\n", AS_EINVAL, "spec.nodeName", "must be a string", NULL);
    bad(HDR "spec: {nodeSelector: {disk: true}}\n", AS_EINVAL, "spec.nodeSelector.disk", "quote it",
        NULL);
    bad(HDR "status: {phase: Sleeping}\n", AS_EINVAL, "status.phase", "unknown phase", "Running");
    bad("metadata: {name: x, creationTimestamp: yesterday}\n", AS_EINVAL,
        "metadata.creationTimestamp", "RFC 3339", NULL);
    bad("metadata: {name: x, creationTimestamp: \"2026-02-30T00:00:00Z\"}\n", AS_EINVAL,
        "metadata.creationTimestamp", NULL, NULL);
    bad("metadata: {name: x, deletionTimestamp: 5}\n", AS_EINVAL, "metadata.deletionTimestamp",
        NULL, NULL);
    bad("metadata: {name: x, labels: {a: [1]}}\n", AS_EINVAL, "metadata.labels.a", "a list", NULL);
}

/* ---- node selector and affinity ------------------------------------ */

#define AFF                                                                                        \
    HDR "spec:\n  affinity:\n    nodeAffinity:\n"                                                  \
        "      requiredDuringSchedulingIgnoredDuringExecution:\n"                                  \
        "        nodeSelectorTerms:\n"

static model_labels L(model_kv *kv, uint32_t n)
{
    model_labels l = {kv, n};
    return l;
}

Test(match, node_selector_decoded_sorted)
{
    model_pod *p = P(HDR "spec: {nodeSelector: {zone: a, disk: ssd}}\n");
    cr_assert_eq(p->node_selector.n, 2);
    cr_assert_str_eq(p->node_selector.items[0].key, "disk");
    cr_assert_str_eq(model_labels_get(&p->node_selector, "zone"), "a");
    model_pod_free(p);
}

Test(match, affinity_operators)
{
    model_pod *p = P(AFF "        - matchExpressions:\n"
                         "          - {key: zone, operator: In, values: [a, b]}\n"
                         "          - {key: gpu, operator: NotIn, values: [V100]}\n"
                         "          - {key: ssd, operator: Exists}\n"
                         "          - {key: spot, operator: DoesNotExist}\n"
                         "          - {key: cores, operator: Gt, values: [\"8\"]}\n"
                         "          - {key: cores, operator: Lt, values: [\"64\"]}\n");
    cr_assert(p->affinity.present);
    cr_assert_eq(p->affinity.nterms, 1);
    const model_selector_term *t = &p->affinity.terms[0];
    cr_assert_eq(t->nexprs, 6);
    cr_assert_eq(t->exprs[0].op, MODEL_SEL_IN);
    cr_assert_eq(t->exprs[0].nvalues, 2);
    cr_assert_str_eq(t->exprs[0].values[1], "b");
    cr_assert_eq(t->exprs[4].op, MODEL_SEL_GT);
    cr_assert_eq(t->exprs[4].num, 8);
    cr_assert_eq(t->exprs[5].num, 64);

    model_kv ok[] = {{"cores", "16"}, {"gpu", "A100"}, {"ssd", ""}, {"zone", "b"}};
    model_labels l = L(ok, 4);
    cr_assert(model_affinity_matches(&p->affinity, "n1", &l));

    model_kv v100[] = {{"cores", "16"}, {"gpu", "V100"}, {"ssd", "1"}, {"zone", "a"}};
    l = L(v100, 4);
    cr_assert_not(model_affinity_matches(&p->affinity, "n1", &l), "NotIn");
    model_kv nogpu[] = {{"cores", "16"}, {"ssd", "1"}, {"zone", "a"}};
    l = L(nogpu, 3);
    cr_assert(model_affinity_matches(&p->affinity, "n1", &l), "NotIn matches an absent label");
    model_kv zonec[] = {{"cores", "16"}, {"ssd", "1"}, {"zone", "c"}};
    l = L(zonec, 3);
    cr_assert_not(model_affinity_matches(&p->affinity, "n1", &l), "In");
    model_kv nossd[] = {{"cores", "16"}, {"zone", "a"}};
    l = L(nossd, 2);
    cr_assert_not(model_affinity_matches(&p->affinity, "n1", &l), "Exists");
    model_kv spot[] = {{"cores", "16"}, {"spot", "true"}, {"ssd", "1"}, {"zone", "a"}};
    l = L(spot, 4);
    cr_assert_not(model_affinity_matches(&p->affinity, "n1", &l), "DoesNotExist");
    model_kv few[] = {{"cores", "8"}, {"ssd", "1"}, {"zone", "a"}};
    l = L(few, 3);
    cr_assert_not(model_affinity_matches(&p->affinity, "n1", &l), "Gt is strict");
    model_kv many[] = {{"cores", "64"}, {"ssd", "1"}, {"zone", "a"}};
    l = L(many, 3);
    cr_assert_not(model_affinity_matches(&p->affinity, "n1", &l), "Lt is strict");
    model_kv nonint[] = {{"cores", "lots"}, {"ssd", "1"}, {"zone", "a"}};
    l = L(nonint, 3);
    cr_assert_not(model_affinity_matches(&p->affinity, "n1", &l), "non-integer label");
    l = L(NULL, 0);
    cr_assert_not(model_affinity_matches(&p->affinity, "n1", &l));
    model_pod_free(p);
}

Test(match, affinity_terms_are_ored_and_fields)
{
    model_pod *p = P(AFF "        - matchExpressions:\n"
                         "          - {key: zone, operator: In, values: [a]}\n"
                         "        - matchFields:\n"
                         "          - {key: metadata.name, operator: In, values: [special]}\n"
                         "        - matchFields:\n"
                         "          - {key: metadata.name, operator: NotIn, values: [bad]}\n"
                         "          matchExpressions:\n"
                         "          - {key: zone, operator: In, values: [b]}\n");
    cr_assert_eq(p->affinity.nterms, 3);
    cr_assert_eq(p->affinity.terms[1].nfields, 1);
    model_kv za[] = {{"zone", "a"}}, zb[] = {{"zone", "b"}}, zc[] = {{"zone", "c"}};
    model_labels la = L(za, 1), lb = L(zb, 1), lc = L(zc, 1);
    cr_assert(model_affinity_matches(&p->affinity, "x", &la));
    cr_assert(model_affinity_matches(&p->affinity, "special", &lc), "matchFields In");
    cr_assert_not(model_affinity_matches(&p->affinity, "x", &lc));
    cr_assert(model_affinity_matches(&p->affinity, "good", &lb));
    cr_assert_not(model_affinity_matches(&p->affinity, "bad", &lb), "matchFields NotIn");
    model_pod_free(p);
}

Test(match, affinity_empty_cases)
{
    model_kv za[] = {{"zone", "a"}};
    model_labels la = L(za, 1);
    model_pod *p = P(HDR);
    cr_assert(model_affinity_matches(&p->affinity, "n", &la), "no affinity matches all");
    cr_assert(model_affinity_matches(NULL, "n", &la));
    model_pod_free(p);
    p = P(AFF "          []\n");
    cr_assert(p->affinity.present);
    cr_assert_eq(p->affinity.nterms, 0);
    cr_assert_not(model_affinity_matches(&p->affinity, "n", &la), "no terms matches nothing");
    model_pod_free(p);
    p = P(AFF "        - {}\n        - matchExpressions: []\n");
    cr_assert_eq(p->affinity.nterms, 2);
    cr_assert_not(model_affinity_matches(&p->affinity, "n", &la), "empty terms match nothing");
    model_pod_free(p);
    /* preferred affinity only: no hard constraint */
    p = P(HDR "spec:\n  affinity:\n    nodeAffinity:\n"
              "      preferredDuringSchedulingIgnoredDuringExecution: []\n");
    cr_assert_not(p->affinity.present);
    model_pod_free(p);
}

Test(match, affinity_errors)
{
    const char *tp = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution."
                     "nodeSelectorTerms";
    char f[256];
    snprintf(f, sizeof f, "%s[0].matchExpressions[0].operator", tp);
    bad(AFF "        - matchExpressions: [{key: a, operator: Like, values: [x]}]\n", AS_EINVAL, f,
        "unknown operator \"Like\"", "DoesNotExist");
    snprintf(f, sizeof f, "%s[0].matchExpressions[0].values", tp);
    bad(AFF "        - matchExpressions: [{key: a, operator: In}]\n", AS_EINVAL, f,
        "at least one value", NULL);
    bad(AFF "        - matchExpressions: [{key: a, operator: Exists, values: [x]}]\n", AS_EINVAL, f,
        "takes no values", NULL);
    bad(AFF "        - matchExpressions: [{key: a, operator: Gt, values: [\"1\", \"2\"]}]\n",
        AS_EINVAL, f, "exactly one", NULL);
    bad(AFF "        - matchExpressions: [{key: a, operator: Lt, values: [ten]}]\n", AS_EINVAL, f,
        "integer value", NULL);
    bad(AFF "        - matchExpressions: [{key: a, operator: In, values: x}]\n", AS_EINVAL, f,
        "must be a list", NULL);
    snprintf(f, sizeof f, "%s[0].matchExpressions[0].values[0]", tp);
    bad(AFF "        - matchExpressions: [{key: a, operator: In, values: [1]}]\n", AS_EINVAL, f,
        "must be a string", NULL);
    snprintf(f, sizeof f, "%s[0].matchExpressions[0].key", tp);
    bad(AFF "        - matchExpressions: [{operator: Exists}]\n", AS_EINVAL, f, "non-empty key",
        NULL);
    snprintf(f, sizeof f, "%s[1].matchFields[0].key", tp);
    bad(AFF "        - {}\n        - matchFields: [{key: metadata.uid, operator: In, values: "
            "[x]}]\n",
        AS_EINVAL, f, "only the key metadata.name", NULL);
    snprintf(f, sizeof f, "%s[0].matchFields[0].operator", tp);
    bad(AFF "        - matchFields: [{key: metadata.name, operator: Exists}]\n", AS_EINVAL, f,
        "In or NotIn", NULL);
    snprintf(f, sizeof f, "%s[0].matchFields[0].values", tp);
    bad(AFF "        - matchFields: [{key: metadata.name, operator: In, values: [a, b]}]\n",
        AS_EINVAL, f, "exactly one value", NULL);
    snprintf(f, sizeof f, "%s[0]", tp);
    bad(AFF "        - zone\n", AS_EINVAL, f, "must be an object", NULL);
    bad(HDR "spec: {affinity: {nodeAffinity: []}}\n", AS_EINVAL, "spec.affinity.nodeAffinity",
        "must be an object", NULL);
}

/* ---- tolerations ---------------------------------------------------- */

Test(match, tolerations_decoded)
{
    model_pod *p = P(HDR "spec:\n  tolerations:\n"
                         "  - {key: dedicated, operator: Equal, value: batch, effect: NoSchedule}\n"
                         "  - {key: gpu, operator: Exists}\n"
                         "  - {operator: Exists}\n"
                         "  - {key: k, value: v, effect: NoExecute, tolerationSeconds: 300}\n"
                         "  - {key: slo, operator: Lt, value: \"100\"}\n");
    cr_assert_eq(p->ntolerations, 5);
    cr_assert_eq(p->tolerations[4].op, MODEL_TOL_LT);
    cr_assert_eq(p->tolerations[0].op, MODEL_TOL_EQUAL);
    cr_assert_eq(p->tolerations[0].effect, MODEL_EFFECT_NO_SCHEDULE);
    cr_assert_eq(p->tolerations[1].op, MODEL_TOL_EXISTS);
    cr_assert_eq(p->tolerations[1].effect, MODEL_EFFECT_ALL);
    cr_assert_str_eq(p->tolerations[2].key, "");
    cr_assert_eq(p->tolerations[3].op, MODEL_TOL_EQUAL, "empty operator means Equal");
    cr_assert_eq(p->tolerations[3].effect, MODEL_EFFECT_NO_EXECUTE);
    model_pod_free(p);
}

Test(match, toleration_semantics)
{
    static const struct {
        model_toleration t;
        model_taint taint;
        bool want;
        const char *why;
    } tc[] = {
        {{"k", "v", MODEL_TOL_EQUAL, MODEL_EFFECT_NO_SCHEDULE},
         {"k", "v", MODEL_EFFECT_NO_SCHEDULE},
         true,
         "exact"},
        {{"k", "v", MODEL_TOL_EQUAL, MODEL_EFFECT_NO_SCHEDULE},
         {"k", "w", MODEL_EFFECT_NO_SCHEDULE},
         false,
         "value differs"},
        {{"k", "v", MODEL_TOL_EQUAL, MODEL_EFFECT_NO_SCHEDULE},
         {"k", "v", MODEL_EFFECT_NO_EXECUTE},
         false,
         "effect differs"},
        {{"k", "v", MODEL_TOL_EQUAL, MODEL_EFFECT_ALL},
         {"k", "v", MODEL_EFFECT_NO_EXECUTE},
         true,
         "empty effect matches all"},
        {{"k", "", MODEL_TOL_EXISTS, MODEL_EFFECT_ALL},
         {"k", "anything", MODEL_EFFECT_PREFER_NO_SCHEDULE},
         true,
         "Exists ignores value"},
        {{"k", "", MODEL_TOL_EXISTS, MODEL_EFFECT_ALL},
         {"other", "", MODEL_EFFECT_NO_SCHEDULE},
         false,
         "key differs"},
        {{"", "", MODEL_TOL_EXISTS, MODEL_EFFECT_ALL},
         {"any", "x", MODEL_EFFECT_NO_EXECUTE},
         true,
         "empty key + Exists tolerates everything"},
        {{"", "", MODEL_TOL_EXISTS, MODEL_EFFECT_NO_SCHEDULE},
         {"any", "x", MODEL_EFFECT_NO_EXECUTE},
         false,
         "empty key + Exists still filters on effect"},
        {{"k", "", MODEL_TOL_EQUAL, MODEL_EFFECT_ALL},
         {"k", "", MODEL_EFFECT_NO_SCHEDULE},
         true,
         "Equal with empty values"},
        {{"", "x", MODEL_TOL_EQUAL, MODEL_EFFECT_ALL},
         {"any", "x", MODEL_EFFECT_NO_SCHEDULE},
         true,
         "ToleratesTaint: empty key with Equal compares only the value"},
        {{"slo", "100", MODEL_TOL_LT, MODEL_EFFECT_ALL},
         {"slo", "50", MODEL_EFFECT_NO_SCHEDULE},
         true,
         "Lt: taint value below the toleration's"},
        {{"slo", "100", MODEL_TOL_LT, MODEL_EFFECT_ALL},
         {"slo", "100", MODEL_EFFECT_NO_SCHEDULE},
         false,
         "Lt is strict"},
        {{"slo", "100", MODEL_TOL_GT, MODEL_EFFECT_ALL},
         {"slo", "101", MODEL_EFFECT_NO_SCHEDULE},
         true,
         "Gt"},
        {{"slo", "100", MODEL_TOL_GT, MODEL_EFFECT_ALL},
         {"slo", "high", MODEL_EFFECT_NO_SCHEDULE},
         false,
         "Gt with a non-integer taint value"},
    };
    for (size_t i = 0; i < sizeof tc / sizeof tc[0]; i++)
        cr_expect_eq(model_toleration_matches(&tc[i].t, &tc[i].taint), tc[i].want, "%s", tc[i].why);
}

Test(match, toleration_errors)
{
    bad(HDR "spec: {tolerations: [{key: a, operator: Maybe}]}\n", AS_EINVAL,
        "spec.tolerations[0].operator", "unknown toleration operator \"Maybe\"", "Exists");
    bad(HDR "spec: {tolerations: [{key: a, operator: Gt, value: x}]}\n", AS_EINVAL,
        "spec.tolerations[0].value", "integer value", NULL);
    bad(HDR "spec: {tolerations: [{operator: Lt, value: \"5\"}]}\n", AS_EINVAL,
        "spec.tolerations[0].key", "needs a key", NULL);
    bad(HDR "spec: {tolerations: [{key: a, effect: Never}]}\n", AS_EINVAL,
        "spec.tolerations[0].effect", "unknown effect", NULL);
    bad(HDR "spec: {tolerations: [{key: a, operator: Exists, value: b}]}\n", AS_EINVAL,
        "spec.tolerations[0].value", "must be empty", NULL);
    bad(HDR "spec: {tolerations: [{value: b}]}\n", AS_EINVAL, "spec.tolerations[0].operator",
        "must use operator Exists", NULL);
    bad(HDR "spec: {tolerations: [{key: a}, 7]}\n", AS_EINVAL, "spec.tolerations[1]",
        "must be an object", NULL);
    bad(HDR "spec: {tolerations: {key: a}}\n", AS_EINVAL, "spec.tolerations", "must be a list",
        NULL);
}

/* ---- identity key ------------------------------------------------- */

Test(pod, key_is_the_uid_else_namespace_and_name)
{
    model_pod *p = P("kind: Pod\nmetadata: {name: web-1, namespace: prod, uid: u-42}\n");
    char tmp[64];
    size_t len = 0;
    const char *k = model_pod_key(p, tmp, sizeof tmp, &len);
    cr_expect_eq(k, p->uid);
    cr_expect_eq(len, 4);
    model_pod_free(p);

    p = P("kind: Pod\nmetadata: {name: web-1}\n");
    k = model_pod_key(p, tmp, sizeof tmp, &len);
    cr_expect_str_eq(k, "default/web-1");
    cr_expect_eq(len, strlen("default/web-1"));
    /* A short buffer truncates and reports what it kept. */
    char small[8];
    k = model_pod_key(p, small, sizeof small, &len);
    cr_expect_str_eq(k, "default");
    cr_expect_eq(len, 7);
    model_pod_free(p);
}

Test(pod, json_key_matches_the_decoded_key)
{
    static const char *const docs[] = {
        "kind: Pod\nmetadata: {name: a, namespace: prod, uid: u-1}\n",
        "kind: Pod\nmetadata: {name: a, namespace: prod}\n",
        "kind: Pod\nmetadata: {name: a, namespace: \"\"}\n",
        "kind: Pod\nmetadata: {name: a}\n",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        json_t *v = Y(docs[i]);
        model_pod *p = P(docs[i]);
        char a[128], b[128];
        model_pod_key_json(v, a, sizeof a);
        cr_expect_str_eq(a, model_pod_key(p, b, sizeof b, NULL), "doc %zu", i);
        model_pod_free(p);
        json_decref(v);
    }
}

/* test_node.c - v1 Node decoding. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "agentsched/base/doc.h"
#include "agentsched/base/log.h"
#include "agentsched/model/labels.h"
#include "agentsched/model/node.h"
#include "agentsched/model/registry.h"

static model_registry reg;

static void setup(void)
{
    log_set_level(LOG_ERROR);
    model_registry_init(&reg);
}
static void teardown(void)
{
    model_registry_destroy(&reg);
}

TestSuite(node, .init = setup, .fini = teardown);

static json_t *Y(const char *yaml)
{
    json_t *v = NULL;
    as_diag d = {{0}, {0}};
    as_err err = doc_parse(yaml, strlen(yaml), false, &v, &d);
    cr_assert_eq(err, AS_OK, "test YAML does not parse: %s", d.msg);
    return v;
}

/* Decodes and expects success. */
static model_node *N(const char *yaml)
{
    json_t *v = Y(yaml);
    model_node *n = NULL;
    as_diag d = {{0}, {0}};
    as_err err = model_node_from_json(&reg, v, &n, &d);
    json_decref(v);
    cr_assert_eq(err, AS_OK, "decode failed: %s (field %s)", d.msg, d.field);
    cr_assert_not_null(n);
    return n;
}

/* Decodes and expects err with the given field and message fragments. */
static void bad(const char *yaml, as_err want, const char *field, const char *frag1,
                const char *frag2)
{
    json_t *v = Y(yaml);
    model_node *n = (model_node *)0x1;
    as_diag d = {{0}, {0}};
    as_err err = model_node_from_json(&reg, v, &n, &d);
    json_decref(v);
    cr_expect_eq(err, want, "err %d want %d: %s", err, want, d.msg);
    cr_expect_null(n);
    cr_expect_str_eq(d.field, field, "field \"%s\" want \"%s\" (%s)", d.field, field, d.msg);
    if (frag1)
        cr_expect(strstr(d.msg, frag1) != NULL, "msg lacks \"%s\": %s", frag1, d.msg);
    if (frag2)
        cr_expect(strstr(d.msg, frag2) != NULL, "msg lacks \"%s\": %s", frag2, d.msg);
}

static const char *full_node = "apiVersion: v1\n"
                               "kind: Node\n"
                               "metadata:\n"
                               "  name: gpu-a100-1\n"
                               "  uid: 1b4e28ba-2fa1-11d2-883f-0016d3cca427\n"
                               "  resourceVersion: \"4711\"\n"
                               "  labels:\n"
                               "    topology.kubernetes.io/zone: zone-b\n"
                               "    kubernetes.io/hostname: gpu-a100-1\n"
                               "    agentsched.io/gpu-model: A100\n"
                               "    alpha: \"1\"\n"
                               "spec:\n"
                               "  taints:\n"
                               "  - key: dedicated\n"
                               "    value: batch\n"
                               "    effect: NoSchedule\n"
                               "  - key: nvidia.com/gpu\n"
                               "    effect: PreferNoSchedule\n"
                               "  - key: node.kubernetes.io/unreachable\n"
                               "    effect: NoExecute\n"
                               "    timeAdded: \"2026-01-01T00:00:00Z\"\n"
                               "status:\n"
                               "  capacity:\n"
                               "    cpu: \"96\"\n"
                               "    memory: 1056762580Ki\n"
                               "    pods: \"110\"\n"
                               "    nvidia.com/gpu: \"8\"\n"
                               "    ephemeral-storage: 1Ti\n"
                               "    hugepages-1Gi: \"0\"\n"
                               "  allocatable:\n"
                               "    cpu: 95500m\n"
                               "    memory: 1056000000Ki\n"
                               "    pods: \"110\"\n"
                               "    nvidia.com/gpu: \"8\"\n"
                               "    ephemeral-storage: \"1000000000000\"\n"
                               "    hugepages-1Gi: \"0\"\n"
                               "  conditions:\n"
                               "  - type: MemoryPressure\n"
                               "    status: \"False\"\n"
                               "  - type: Ready\n"
                               "    status: \"True\"\n";

Test(node, full)
{
    model_node *n = N(full_node);
    cr_assert_str_eq(n->name, "gpu-a100-1");
    cr_assert_str_eq(n->uid, "1b4e28ba-2fa1-11d2-883f-0016d3cca427");
    cr_assert_str_eq(n->resource_version, "4711");
    cr_assert_eq(n->labels.n, 4);
    for (uint32_t i = 1; i < n->labels.n; i++)
        cr_assert(strcmp(n->labels.items[i - 1].key, n->labels.items[i].key) < 0, "sorted");
    cr_assert_str_eq(model_labels_get(&n->labels, "topology.kubernetes.io/zone"), "zone-b");
    cr_assert_str_eq(model_labels_get(&n->labels, "alpha"), "1");
    cr_assert_null(model_labels_get(&n->labels, "missing"));
    cr_assert_null(model_labels_get(&n->labels, "agentsched.io/gpu-mode"));
    cr_assert_eq(n->ntaints, 3);
    cr_assert_str_eq(n->taints[0].key, "dedicated");
    cr_assert_str_eq(n->taints[0].value, "batch");
    cr_assert_eq(n->taints[0].effect, MODEL_EFFECT_NO_SCHEDULE);
    cr_assert_str_eq(n->taints[1].value, "");
    cr_assert_eq(n->taints[1].effect, MODEL_EFFECT_PREFER_NO_SCHEDULE);
    cr_assert_eq(n->taints[2].effect, MODEL_EFFECT_NO_EXECUTE);
    cr_assert_not(n->unschedulable);
    cr_assert(n->ready);
    cr_assert_eq(n->alloc.v[MODEL_RES_CPU], 95500);
    cr_assert_eq(n->capacity.v[MODEL_RES_CPU], 96000);
    cr_assert_eq(n->alloc.v[MODEL_RES_MEMORY], 1056000000LL * 1024);
    cr_assert_eq(n->alloc.v[MODEL_RES_PODS], 110);
    cr_assert_eq(n->alloc.v[MODEL_RES_EPHEMERAL], 1000000000000LL);
    cr_assert_eq(n->capacity.v[MODEL_RES_EPHEMERAL], 1LL << 40);
    int gpu = model_registry_lookup(&reg, "nvidia.com/gpu", 14);
    cr_assert_geq(gpu, MODEL_RES_FIRST_EXTENDED);
    cr_assert_eq(reg.gpu_res, gpu);
    cr_assert_eq(n->alloc.v[gpu], 8);
    cr_assert_eq(n->ngpus, 8);
    cr_assert_str_eq(n->gpu_model, "A100");
    /* zero-valued extended resources do not use up registry slots */
    cr_assert_eq(model_registry_lookup(&reg, "hugepages-1Gi", 13), -1);
    model_node_free(n);
}

Test(node, minimal_defaults)
{
    model_node *n = N("kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: 4}}\n");
    cr_assert_str_eq(n->uid, "");
    cr_assert_str_eq(n->resource_version, "");
    cr_assert_eq(n->labels.n, 0);
    cr_assert_null(model_labels_get(&n->labels, "x"));
    cr_assert_eq(n->ntaints, 0);
    cr_assert(n->ready, "no conditions counts as ready");
    cr_assert_eq(n->alloc.v[MODEL_RES_CPU], 4000, "YAML integer cpu");
    cr_assert_eq(n->capacity.v[MODEL_RES_CPU], 0);
    cr_assert_eq(n->ngpus, 0);
    cr_assert_null(n->gpu_model);
    model_node_free(n);
}

Test(node, allocatable_falls_back_to_capacity)
{
    model_node *n = N("kind: Node\nmetadata: {name: n1}\n"
                      "status: {capacity: {cpu: \"8\", memory: 32Gi, pods: \"110\"}}\n");
    cr_assert_eq(n->alloc.v[MODEL_RES_CPU], 8000);
    cr_assert_eq(n->alloc.v[MODEL_RES_MEMORY], 32LL << 30);
    cr_assert_eq(n->alloc.v[MODEL_RES_PODS], 110);
    cr_assert_eq(n->capacity.v[MODEL_RES_MEMORY], 32LL << 30);
    model_node_free(n);
}

Test(node, unschedulable_and_not_ready)
{
    model_node *n = N("kind: Node\nmetadata: {name: n1}\nspec: {unschedulable: true}\n"
                      "status:\n  allocatable: {cpu: 1}\n  conditions:\n"
                      "  - {type: Ready, status: \"False\"}\n");
    cr_assert(n->unschedulable);
    cr_assert_not(n->ready);
    model_node_free(n);
    n = N("kind: Node\nmetadata: {name: n1}\n"
          "status:\n  allocatable: {cpu: 1}\n  conditions:\n"
          "  - {type: Ready, status: Unknown}\n");
    cr_assert_not(n->ready);
    model_node_free(n);
    n = N("kind: Node\nmetadata: {name: n1}\n"
          "status:\n  allocatable: {cpu: 1}\n  conditions:\n"
          "  - {type: DiskPressure, status: \"True\"}\n");
    cr_assert(n->ready, "no Ready condition");
    model_node_free(n);
}

Test(node, gpu_count_capped)
{
    model_node *n = N("kind: Node\nmetadata: {name: big}\n"
                      "status: {allocatable: {nvidia.com/gpu: \"32\"}}\n");
    cr_assert_eq(n->ngpus, MODEL_MAX_GPUS);
    cr_assert_eq(n->alloc.v[reg.gpu_res], 32, "the vector keeps the real count");
    model_node_free(n);
}

Test(node, gpu_share_resource_is_not_interned)
{
    model_node *n = N("kind: Node\nmetadata: {name: n}\n"
                      "status: {allocatable: {agentsched.io/gpu-milli: \"4000\", cpu: 1}}\n");
    cr_assert_eq(model_registry_lookup(&reg, "agentsched.io/gpu-milli", 23), -1);
    model_node_free(n);
}

Test(node, extended_resources_interned_and_full_registry_warns)
{
    for (int i = MODEL_RES_FIRST_EXTENDED; i < MODEL_MAX_RES; i++) {
        char y[256];
        snprintf(y, sizeof y,
                 "kind: Node\nmetadata: {name: n%d}\nstatus: {allocatable: {example.com/r%d: 1}}\n",
                 i, i);
        model_node *n = N(y);
        char name[32];
        int len = snprintf(name, sizeof name, "example.com/r%d", i);
        int idx = model_registry_lookup(&reg, name, (size_t)len);
        cr_assert_eq(idx, i);
        cr_assert_eq(n->alloc.v[idx], 1);
        model_node_free(n);
    }
    /* registry full: the resource is dropped with a warning, the node kept */
    model_node *n = N("kind: Node\nmetadata: {name: late}\n"
                      "status: {allocatable: {cpu: 2, example.com/late: 5}}\n");
    cr_assert_eq(n->alloc.v[MODEL_RES_CPU], 2000);
    cr_assert_eq(model_registry_lookup(&reg, "example.com/late", 16), -1);
    cr_assert_eq(model_registry_count(&reg), MODEL_MAX_RES);
    model_node_free(n);
}

Test(node, no_allocatable_nor_capacity)
{
    bad("kind: Node\nmetadata: {name: n1}\nstatus: {conditions: []}\n", AS_EINVAL,
        "status.allocatable", "node n1", "status.allocatable");
    bad("kind: Node\nmetadata: {name: n1}\n", AS_EINVAL, "status.allocatable",
        "node n1: ", "add status.allocatable");
}

Test(node, bad_quantities)
{
    bad("kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: 12x}}\n", AS_EPARSE,
        "status.allocatable.cpu", "node n1: status.allocatable.cpu: invalid quantity \"12x\"",
        "Ki Mi Gi");
    bad("kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {memory: 16GB}}\n", AS_EPARSE,
        "status.allocatable.memory", "unknown suffix \"GB\"", NULL);
    bad("kind: Node\nmetadata: {name: n1}\nstatus: {capacity: {nvidia.com/gpu: 1Qi}}\n", AS_EPARSE,
        "status.capacity[nvidia.com/gpu]", "\"1Qi\"", NULL);
    bad("kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: \"-1\"}}\n", AS_EINVAL,
        "status.allocatable.cpu", "negative", NULL);
    bad("kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: 10E}}\n", AS_ERANGE,
        "status.allocatable.cpu", "too large", NULL);
}

Test(node, wrong_types)
{
    bad("[1, 2]", AS_EINVAL, "", "must be an object", NULL);
    bad("kind: Pod\nmetadata: {name: n1}\n", AS_EINVAL, "kind", "expected kind Node", NULL);
    bad("kind: Node\nmetadata: {}\nstatus: {allocatable: {cpu: 1}}\n", AS_EINVAL, "metadata.name",
        "non-empty metadata.name", NULL);
    bad("kind: Node\nmetadata: [a]\n", AS_EINVAL, "metadata", "must be an object", "a list");
    bad("kind: Node\nmetadata: {name: 7}\n", AS_EINVAL, "metadata.name", "must be a string", NULL);
    bad("kind: Node\nmetadata: {name: n1, labels: [a, b]}\n", AS_EINVAL, "metadata.labels",
        "node n1", "must be an object");
    bad("kind: Node\nmetadata: {name: n1, labels: {zone: 1.5}}\n", AS_EINVAL,
        "metadata.labels.zone", "quote it", NULL);
    bad("kind: Node\nmetadata: {name: n1, labels: {a.b/c: true}}\n", AS_EINVAL,
        "metadata.labels[a.b/c]", "a boolean", NULL);
    bad("kind: Node\nmetadata: {name: n1}\nspec: {unschedulable: \"yes\"}\n", AS_EINVAL,
        "spec.unschedulable", "boolean", NULL);
    bad("kind: Node\nmetadata: {name: n1}\nspec: {taints: {key: a}}\n", AS_EINVAL, "spec.taints",
        "must be a list", NULL);
    bad("kind: Node\nmetadata: {name: n1}\nspec: {taints: [x]}\n", AS_EINVAL, "spec.taints[0]",
        "must be an object", NULL);
    bad("kind: Node\nmetadata: {name: n1}\nspec: {taints: [{key: a, effect: Sometimes}]}\n",
        AS_EINVAL, "spec.taints[0].effect", "unknown taint effect \"Sometimes\"", "NoExecute");
    bad("kind: Node\nmetadata: {name: n1}\nspec: {taints: [{effect: NoSchedule}]}\n", AS_EINVAL,
        "spec.taints[0].key", "non-empty key", NULL);
    bad("kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: \"8 cpus\"}\n", AS_EINVAL,
        "status.allocatable", "must be an object", NULL);
    bad("kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: [1]}}\n", AS_EINVAL,
        "status.allocatable.cpu", "quantity must be a string", NULL);
    bad("kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: 1}, conditions: {}}\n",
        AS_EINVAL, "status.conditions", "must be a list", NULL);
    bad("kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: 1}, conditions: [{type: "
        "Ready, status: true}]}\n",
        AS_EINVAL, "status.conditions[0].status", "must be a string", NULL);
}

Test(node, null_fields_are_absent)
{
    model_node *n = N("kind: Node\nmetadata: {name: n1, labels: null}\nspec: null\n"
                      "status: {allocatable: {cpu: 1}, conditions: null}\n");
    cr_assert_eq(n->labels.n, 0);
    model_node_free(n);
}

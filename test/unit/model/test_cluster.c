/* test_cluster.c - cluster snapshots: the sample cluster, list kinds, bad files. */
#include <criterion/criterion.h>
#include <string.h>

#include "agentsched/base/doc.h"
#include "agentsched/base/log.h"
#include "agentsched/model/cluster.h"
#include "agentsched/model/labels.h"
#include "agentsched/model/node.h"
#include "agentsched/model/pod.h"
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

TestSuite(cluster, .init = setup, .fini = teardown);

static model_cluster *load(const char *path)
{
    model_cluster *c = NULL;
    as_diag d = {{0}, {0}};
    as_err err = model_cluster_load(&reg, path, &c, &d);
    cr_assert_eq(err, AS_OK, "%s: %s (field %s)", path, d.msg, d.field);
    cr_assert_not_null(c);
    return c;
}

static const model_node *find_node(const model_cluster *c, const char *name)
{
    for (size_t i = 0; i < c->nnodes; i++) {
        if (strcmp(c->nodes[i]->name, name) == 0)
            return c->nodes[i];
    }
    return NULL;
}

Test(cluster, sample_cluster)
{
    model_cluster *c = load(AGENTSCHED_SOURCE_DIR "/deploy/examples/cluster.yaml");
    cr_assert_eq(c->nnodes, 40);
    cr_assert_eq(c->npods, 60);

    int gpu = model_registry_lookup(&reg, "nvidia.com/gpu", 14);
    cr_assert_geq(gpu, 0);
    cr_assert_eq(reg.gpu_res, gpu);
    /* zero hugepages do not take registry slots */
    cr_assert_eq(model_registry_lookup(&reg, "hugepages-2Mi", 13), -1);

    size_t gpu_nodes = 0, a100 = 0, tainted_batch = 0, unsched = 0, not_ready = 0;
    for (size_t i = 0; i < c->nnodes; i++) {
        const model_node *n = c->nodes[i];
        cr_assert_gt(n->alloc.v[MODEL_RES_CPU], 0, "%s", n->name);
        cr_assert_gt(n->alloc.v[MODEL_RES_MEMORY], 0, "%s", n->name);
        cr_assert_eq(n->alloc.v[MODEL_RES_PODS], 110, "%s", n->name);
        cr_assert_leq(n->alloc.v[MODEL_RES_CPU], n->capacity.v[MODEL_RES_CPU]);
        cr_assert_not_null(model_labels_get(&n->labels, "topology.kubernetes.io/zone"));
        cr_assert_str_eq(model_labels_get(&n->labels, "kubernetes.io/hostname"), n->name);
        if (n->ngpus) {
            gpu_nodes++;
            cr_assert_not_null(n->gpu_model, "%s", n->name);
            cr_assert(n->ngpus == 4 || n->ngpus == 8);
            if (strcmp(n->gpu_model, "A100") == 0) {
                a100++;
                cr_assert_eq(n->ngpus, 8);
            }
        }
        for (uint32_t t = 0; t < n->ntaints; t++) {
            if (strcmp(n->taints[t].key, "dedicated") == 0 &&
                strcmp(n->taints[t].value, "batch") == 0 &&
                n->taints[t].effect == MODEL_EFFECT_NO_SCHEDULE)
                tainted_batch++;
        }
        unsched += n->unschedulable;
        not_ready += !n->ready;
    }
    cr_assert_eq(gpu_nodes, 8);
    cr_assert_eq(a100, 4);
    cr_assert_geq(tainted_batch, 3);
    cr_assert_eq(unsched, 1);
    cr_assert_eq(not_ready, 1);
    cr_assert(find_node(c, "cpu-medium-12")->unschedulable);
    cr_assert_not(find_node(c, "cpu-small-14")->ready);

    /* every pod is running on a known, ready node, and nodes are not overcommitted */
    int64_t used[64][MODEL_MAX_RES];
    memset(used, 0, sizeof used);
    size_t agent = 0, shares = 0, whole = 0, namespaces_agents = 0;
    for (size_t i = 0; i < c->npods; i++) {
        const model_pod *p = c->pods[i];
        cr_assert_eq(p->phase, MODEL_PHASE_RUNNING, "%s", p->name);
        cr_assert_not_null(p->node_name, "%s", p->name);
        cr_assert_null(p->unknown_res, "%s: %s", p->name, p->unknown_res);
        cr_assert_neq(p->uid[0], '\0');
        cr_assert_gt(p->created_ms, 0);
        const model_node *n = find_node(c, p->node_name);
        cr_assert_not_null(n, "pod %s on unknown node %s", p->name, p->node_name);
        cr_assert(n->ready, "%s", p->name);
        size_t ni = 0;
        while (c->nodes[ni] != n)
            ni++;
        for (int r = 0; r < MODEL_MAX_RES; r++)
            used[ni][r] += p->req.v[r];
        agent += strcmp(p->scheduler_name, "agent-scheduler") == 0;
        namespaces_agents += strcmp(p->ns, "agents") == 0;
        if (p->gpu_count && p->gpu_milli < MODEL_GPU_MILLI)
            shares++;
        if (p->gpu_milli == MODEL_GPU_MILLI)
            whole += p->gpu_count;
    }
    for (size_t i = 0; i < c->nnodes; i++) {
        for (int r = 0; r < MODEL_MAX_RES; r++)
            cr_assert_leq(used[i][r], c->nodes[i]->alloc.v[r], "node %s resource %s",
                          c->nodes[i]->name, model_registry_name(&reg, r));
    }
    cr_assert_geq(agent, 10);
    cr_assert_eq(agent, namespaces_agents);
    cr_assert_eq(shares, 3);
    cr_assert_eq(whole, 11);
    model_cluster_free(c);
}

Test(cluster, nodelist_without_item_kinds)
{
    model_cluster *c = load(TEST_DATA_DIR "/model/nodelist.json");
    cr_assert_eq(c->nnodes, 2);
    cr_assert_eq(c->npods, 0);
    cr_assert_eq(c->nodes[1]->alloc.v[MODEL_RES_CPU], 8000, "capacity fallback");
    int foo = model_registry_lookup(&reg, "example.com/foo", 15);
    cr_assert_geq(foo, MODEL_RES_FIRST_EXTENDED);
    cr_assert_eq(c->nodes[1]->alloc.v[foo], 2);
    model_cluster_free(c);
}

Test(cluster, podlist)
{
    model_cluster *c = load(TEST_DATA_DIR "/model/podlist.yaml");
    cr_assert_eq(c->nnodes, 0);
    cr_assert_eq(c->npods, 2);
    cr_assert_str_eq(c->pods[0]->node_name, "n1");
    cr_assert_eq(c->pods[0]->req.v[MODEL_RES_CPU], 500);
    cr_assert_null(c->pods[1]->node_name);
    model_cluster_free(c);
}

Test(cluster, multi_document_and_skipped_kinds)
{
    model_cluster *c = load(TEST_DATA_DIR "/model/mixed_multi.yaml");
    cr_assert_eq(c->nnodes, 1);
    cr_assert_eq(c->npods, 1);
    cr_assert_str_eq(c->nodes[0]->name, "solo");
    cr_assert_str_eq(c->pods[0]->name, "p1");
    model_cluster_free(c);
}

Test(cluster, from_json_single_objects)
{
    json_t *doc = json_pack("{s:s, s:{s:s}, s:{s:{s:s}}}", "kind", "Node", "metadata", "name", "x",
                            "status", "allocatable", "cpu", "1");
    model_cluster *c = NULL;
    cr_assert_eq(model_cluster_from_json(&reg, doc, &c, NULL), AS_OK);
    cr_assert_eq(c->nnodes, 1);
    model_cluster_free(c);
    json_decref(doc);
    doc = json_pack("{s:s, s:{s:s}}", "kind", "Pod", "metadata", "name", "p");
    cr_assert_eq(model_cluster_from_json(&reg, doc, &c, NULL), AS_OK);
    cr_assert_eq(c->npods, 1);
    model_cluster_free(c);
    json_decref(doc);
    doc = json_pack("{s:s, s:[]}", "kind", "List", "items");
    cr_assert_eq(model_cluster_from_json(&reg, doc, &c, NULL), AS_OK);
    cr_assert_eq(c->nnodes + c->npods, 0);
    model_cluster_free(c);
    json_decref(doc);
    model_cluster_free(NULL);
}

/* Loads a bad file and checks error, field and message fragments. The
 * message always starts with the file path. */
static void bad(const char *file, as_err want, const char *field, const char *frag1,
                const char *frag2)
{
    char path[512];
    snprintf(path, sizeof path, "%s/cluster/%s", TEST_DATA_DIR, file);
    model_cluster *c = (model_cluster *)0x1;
    as_diag d = {{0}, {0}};
    as_err err = model_cluster_load(&reg, path, &c, &d);
    cr_expect_eq(err, want, "%s: err %d want %d: %s", file, err, want, d.msg);
    cr_expect_null(c, "%s", file);
    cr_expect_str_eq(d.field, field, "%s: field \"%s\" want \"%s\" (%s)", file, d.field, field,
                     d.msg);
    cr_expect(strncmp(d.msg, path, strlen(path)) == 0, "%s: msg does not name the file: %s", file,
              d.msg);
    if (frag1)
        cr_expect(strstr(d.msg, frag1) != NULL, "%s: msg lacks \"%s\": %s", file, frag1, d.msg);
    if (frag2)
        cr_expect(strstr(d.msg, frag2) != NULL, "%s: msg lacks \"%s\": %s", file, frag2, d.msg);
}

Test(cluster, malformed_yaml)
{
    bad("malformed.yaml", AS_EPARSE, "", "line 10 column 1", NULL);
}

Test(cluster, malformed_json)
{
    bad("bad_json.json", AS_EPARSE, "", "line 5", NULL);
}

Test(cluster, unknown_unit)
{
    bad("unknown_unit.yaml", AS_EPARSE, "items[1].status.allocatable.memory",
        "items[1]: node n2: status.allocatable.memory: invalid quantity \"16GB\"",
        "unknown suffix \"GB\"");
    bad("bad_gpu_quantity.yaml", AS_EPARSE, "items[1].status.allocatable[nvidia.com/gpu]",
        "\"1.5.1\"", NULL);
}

Test(cluster, node_without_allocatable)
{
    bad("no_allocatable.yaml", AS_EINVAL, "items[0].status.allocatable",
        "items[0]: node bare-node: status.allocatable", "add status.allocatable");
}

Test(cluster, duplicate_node)
{
    bad("duplicate_node.yaml", AS_EEXIST, "items[3].metadata.name", "node n1 appears twice",
        "items[0] and items[3]");
}

Test(cluster, wrong_types)
{
    bad("items_not_list.yaml", AS_EINVAL, "items", "must be a list", NULL);
    bad("wrong_type_pod.yaml", AS_EINVAL, "items[1].spec.containers[1].resources.requests",
        "pod shop/web-1", "must be an object");
    bad("not_a_list.json", AS_EINVAL, "", "the document is a list", "kubectl get nodes,pods");
}

Test(cluster, kinds)
{
    bad("missing_kind.yaml", AS_EINVAL, "items[1].kind", "kind: Node or kind: Pod", NULL);
    bad("wrong_kind.yaml", AS_EINVAL, "kind", "unexpected kind \"Deployment\"", "NodeList");
}

Test(cluster, anchors_rejected)
{
    bad("anchors.yaml", AS_EPARSE, "", "line 8", "anchors (&res)");
}

Test(cluster, missing_file)
{
    bad("does_not_exist.yaml", AS_EIO, "", "cannot open", NULL);
}

Test(cluster, empty_document)
{
    json_t *doc = json_null();
    model_cluster *c = NULL;
    as_diag d = {{0}, {0}};
    /* a single null document is an empty cluster (an empty file) */
    json_t *arr = json_array();
    json_array_append(arr, doc);
    cr_assert_eq(model_cluster_from_json(&reg, arr, &c, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(c->nnodes + c->npods, 0);
    model_cluster_free(c);
    json_decref(arr);
    cr_assert_eq(model_cluster_from_json(&reg, NULL, &c, &d), AS_EINVAL);
    cr_assert_null(c);
    json_decref(doc);
}

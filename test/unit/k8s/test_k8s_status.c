/*
 * test_k8s_status.c - the pod condition the fast path writes for a pod it
 * cannot place (k8s_pod_set_condition) against the stub API server: the
 * strategic merge patch of pods/NAME/status sets PodScheduled=False with
 * its reason and message, a second one replaces it (conditions merge by
 * type) and leaves the others, a large pod's answer does not fail it, and
 * 404, 403 and 500 are told apart.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/log.h"
#include "agentsched/core/cache.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/k8s/status.h"
#include "agentsched/model/registry.h"
#include "k8s_stub.c"

typedef struct sfx {
    k8s_stub *stub;
    model_registry reg;
    cache *c;
    k8s_client *k;
} sfx;

static void sfx_init(sfx *f)
{
    memset(f, 0, sizeof *f);
    log_set_level(LOG_ERROR);
    f->stub = stub_new();
    model_registry_init(&f->reg);
    cr_assert_eq(cache_new(&f->reg, &f->c), AS_OK);
    k8s_conn conn = {0};
    conn.server = (char *)stub_url(f->stub);
    k8s_config cfg;
    k8s_config_defaults(&cfg);
    cfg.conn = &conn;
    cfg.watch_shards = false;
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_client_new(&cfg, f->c, &f->k, &d), AS_OK, "%s", d.msg);
}

static void sfx_fini(sfx *f)
{
    k8s_client_free(f->k);
    stub_free(f->stub);
    cache_free(f->c);
    model_registry_destroy(&f->reg);
}

/* condition is pod uid's condition of type at the stub (new reference),
 * NULL when it has none; *n gets how many conditions the pod has. */
static json_t *condition(sfx *f, const char *uid, const char *type, size_t *n)
{
    json_t *p = stub_object(f->stub, STUB_POD, uid);
    json_t *conds = json_object_get(json_object_get(p, "status"), "conditions");
    json_t *out = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c) if (!strcmp(json_string_value(json_object_get(c, "type")),
                                                type)) out = json_incref(c);
    *n = json_array_size(conds);
    json_decref(p);
    return out;
}

Test(k8s_status, sets_and_replaces_pod_scheduled)
{
    sfx f;
    sfx_init(&f);
    json_t *p = stub_make_pod("default", "a", "uid-a", NULL, "1", "1Gi");
    json_object_set_new(json_object_get(p, "status"), "conditions",
                        json_pack("[{s:s,s:s}]", "type", "Initialized", "status", "True"));
    stub_put(f.stub, STUB_POD, p);
    json_decref(p);
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_pod_set_condition(f.k, "default", "a", "PodScheduled", "False",
                                       "Unschedulable", "0/3 nodes are available", &d),
                 AS_OK, "%s", d.msg);
    size_t n = 0;
    json_t *c = condition(&f, "uid-a", "PodScheduled", &n);
    cr_assert_not_null(c);
    cr_expect_str_eq(json_string_value(json_object_get(c, "status")), "False");
    cr_expect_str_eq(json_string_value(json_object_get(c, "reason")), "Unschedulable");
    cr_expect_str_eq(json_string_value(json_object_get(c, "message")), "0/3 nodes are available");
    cr_expect(json_is_string(json_object_get(c, "lastTransitionTime")));
    cr_expect_eq(n, 2, "Initialized kept beside it");
    json_decref(c);

    /* again with another message: the same condition, replaced */
    cr_assert_eq(k8s_pod_set_condition(f.k, "default", "a", "PodScheduled", "False",
                                       "Unschedulable", "0/4 nodes are available", &d),
                 AS_OK, "%s", d.msg);
    c = condition(&f, "uid-a", "PodScheduled", &n);
    cr_assert_not_null(c);
    cr_expect_str_eq(json_string_value(json_object_get(c, "message")), "0/4 nodes are available");
    cr_expect_eq(n, 2);
    json_decref(c);
    sfx_fini(&f);
}

/* The API server answers with the whole pod; one far larger than the
 * answer's buffer (a 200 KiB annotation and a 1 MiB environment
 * variable) still has its condition set and reported set. */
Test(k8s_status, a_large_pod_gets_its_condition)
{
    sfx f;
    sfx_init(&f);
    json_t *p = stub_make_pod("default", "big", "uid-big", NULL, "1", "1Gi");
    char *pad = stub_filler(1 << 20);
    cr_assert_not_null(pad);
    json_object_set_new(json_object_get(p, "metadata"), "annotations",
                        json_pack("{s:s%}", "example.com/pad", pad, (size_t)200 << 10));
    json_t *ctr = json_array_get(json_object_get(json_object_get(p, "spec"), "containers"), 0);
    json_object_set_new(ctr, "env", json_pack("[{s:s,s:s}]", "name", "PAD", "value", pad));
    free(pad);
    stub_put(f.stub, STUB_POD, p);
    json_decref(p);
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_pod_set_condition(f.k, "default", "big", "PodScheduled", "False",
                                       "Unschedulable", "no node fits", &d),
                 AS_OK, "%s", d.msg);
    size_t n = 0;
    json_t *c = condition(&f, "uid-big", "PodScheduled", &n);
    cr_expect_not_null(c);
    json_decref(c);
    sfx_fini(&f);
}

Test(k8s_status, refusals_are_told_apart)
{
    sfx f;
    sfx_init(&f);
    json_t *p = stub_make_pod("default", "a", "uid-a", NULL, "1", "1Gi");
    stub_put(f.stub, STUB_POD, p);
    json_decref(p);
    as_diag d = {{0}, {0}};
    cr_expect_eq(
        k8s_pod_set_condition(f.k, "default", "gone", "PodScheduled", "False", NULL, NULL, &d),
        AS_ENOTFOUND, "%s", d.msg);
    stub_fault(f.stub, "/api/v1/namespaces/default/pods/a/status", STUB_PATCH, STUB_F_STATUS, 403);
    cr_expect_eq(
        k8s_pod_set_condition(f.k, "default", "a", "PodScheduled", "False", NULL, NULL, &d),
        AS_EAUTH, "%s", d.msg);
    cr_expect(strstr(d.msg, "pods/status"), "%s", d.msg);
    stub_fault(f.stub, "/api/v1/namespaces/default/pods/a/status", STUB_PATCH, STUB_F_STATUS, 500);
    cr_expect_eq(
        k8s_pod_set_condition(f.k, "default", "a", "PodScheduled", "False", NULL, NULL, &d),
        AS_EHTTP, "%s", d.msg);
    cr_expect_eq(k8s_pod_set_condition(NULL, "default", "a", NULL, "False", NULL, NULL, &d),
                 AS_EINVAL);
    sfx_fini(&f);
}

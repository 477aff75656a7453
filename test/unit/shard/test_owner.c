/* test_owner.c - one writer of the NodeShards: the managers read from
 * managedFields, the Lease liveness rule and the stand-down / take-over
 * decisions of shard_owner_step, as a table of rounds. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <string.h>

#include "agentsched/k8s/lease.h"
#include "agentsched/k8s/watch.h"
#include "agentsched/shard/owner.h"

/* managedFields as the apiserver writes them: vc-controller-manager created
 * the object (Update by its client's default manager), a scheduler owns the
 * status through the subresource, agentsched later changed nodesDesired. */
static const char managed_json[] =
    "[{\"manager\":\"vc-controller-manager\",\"operation\":\"Update\","
    "\"apiVersion\":\"shard.volcano.sh/v1alpha1\",\"time\":\"2026-12-03T10:00:00Z\","
    "\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:spec\":{\".\":{},\"f:nodesDesired\":{}}}},"
    "{\"manager\":\"vc-agent-scheduler\",\"operation\":\"Update\",\"apiVersion\":"
    "\"shard.volcano.sh/v1alpha1\",\"time\":\"2026-12-03T10:00:05Z\",\"fieldsType\":\"FieldsV1\","
    "\"fieldsV1\":{\"f:status\":{\".\":{},\"f:nodesInUse\":{}}},\"subresource\":\"status\"},"
    "{\"manager\":\"agentsched\",\"operation\":\"Update\",\"apiVersion\":"
    "\"shard.volcano.sh/v1alpha1\",\"time\":\"2026-12-03T10:00:09Z\",\"fieldsType\":\"FieldsV1\","
    "\"fieldsV1\":{\"f:status\":{\"f:lastUpdateTime\":{}}},\"subresource\":\"status\"}]";

Test(shard_owner, managers_from_managed_fields)
{
    json_t *mf = json_loads(managed_json, 0, NULL);
    cr_assert_not_null(mf);
    k8s_shard s = {.name = "agentsched"};
    k8s_shard_managers(mf, &s);
    cr_assert_str_eq(s.desired_manager, "vc-controller-manager");
    cr_assert_str_eq(s.desired_time, "2026-12-03T10:00:00Z");
    cr_assert_str_eq(s.status_manager, "agentsched", "the newest status entry");
    cr_assert_str_eq(s.status_time, "2026-12-03T10:00:09Z");
    k8s_shard_managers(NULL, &s);
    cr_assert_str_eq(s.desired_manager, "");
    cr_assert_str_eq(s.status_manager, "");
    json_decref(mf);
}

Test(shard_owner, lease_live)
{
    k8s_lease_obs obs;
    memset(&obs, 0, sizeof obs);
    json_t *l = json_pack("{s:{s:s},s:{s:s,s:s,s:i}}", "metadata", "resourceVersion", "1", "spec",
                          "holderIdentity", "vc-cm_1", "renewTime", "2026-12-03T10:00:00.000000Z",
                          "leaseDurationSeconds", 15);
    k8s_lease_observe(&obs, l, 1000);
    cr_assert(shard_owner_lease_live(&obs, 1000));
    cr_assert(shard_owner_lease_live(&obs, 16000), "exactly the duration: still live");
    cr_assert_not(shard_owner_lease_live(&obs, 16001), "unchanged for longer than 15 s");
    /* A renewal resets our clock. */
    json_object_set_new(json_object_get(l, "spec"), "renewTime",
                        json_string("2026-12-03T10:00:10.000000Z"));
    k8s_lease_observe(&obs, l, 16001);
    cr_assert(shard_owner_lease_live(&obs, 30000));
    /* Released (empty holder) or absent: not live. */
    json_object_set_new(json_object_get(l, "spec"), "holderIdentity", json_string(""));
    k8s_lease_observe(&obs, l, 30001);
    cr_assert_not(shard_owner_lease_live(&obs, 30001));
    k8s_lease_observe(&obs, NULL, 30002);
    cr_assert_not(shard_owner_lease_live(&obs, 30002));
    json_decref(l);
}

/* One round: the Lease, up to three NodeShards as "name=manager@time"
 * (manager of nodesDesired), and the expected decision. */
typedef struct owner_round {
    const char *what;
    bool lease_live;
    const char *acquire; /* the Lease's acquireTime; NULL: unknown */
    const char *shards[3];
    bool foreign;
} owner_round;

static void run_rounds(const owner_round *r, size_t n)
{
    shard_owner o;
    shard_owner_init(&o, "vc-controller-manager");
    for (size_t i = 0; i < n; i++) {
        k8s_shard sh[3];
        char names[3][64];
        size_t ns = 0;
        memset(sh, 0, sizeof sh);
        for (size_t j = 0; j < 3 && r[i].shards[j]; j++, ns++) {
            const char *spec = r[i].shards[j], *eq = strchr(spec, '='), *at = strchr(spec, '@');
            snprintf(names[j], sizeof names[j], "%.*s", (int)(eq - spec), spec);
            sh[j].name = names[j];
            snprintf(sh[j].desired_manager, sizeof sh[j].desired_manager, "%.*s",
                     (int)(at - eq - 1), eq + 1);
            snprintf(sh[j].desired_time, sizeof sh[j].desired_time, "%s", at + 1);
        }
        bool f = !r[i].foreign;
        cr_assert_eq(shard_owner_step(&o, r[i].lease_live, r[i].acquire, sh, ns, &f), AS_OK);
        cr_assert_eq(f, r[i].foreign, "round %zu (%s): foreign=%d, want %d (%s)", i, r[i].what, f,
                     r[i].foreign, o.why);
        cr_assert_eq(o.foreign, f);
    }
    shard_owner_free(&o);
}

Test(shard_owner, stand_down_and_take_over)
{
    static const owner_round r[] = {
        {"Volcano's controller runs the shards",
         true,
         NULL,
         {"a=vc-controller-manager@t1", "b=vc-controller-manager@t1"},
         true},
        {"it renews and rewrites one",
         true,
         NULL,
         {"a=vc-controller-manager@t2", "b=vc-controller-manager@t1"},
         true},
        {"vc-controller-manager stopped: its Lease expired",
         false,
         NULL,
         {"a=vc-controller-manager@t2", "b=vc-controller-manager@t1"},
         false},
        {"we rewrote a; b unchanged keeps its old entry",
         false,
         NULL,
         {"a=agentsched@t3", "b=vc-controller-manager@t1"},
         false},
        {"it restarts without its sharding-controller: old entries do not count",
         true,
         NULL,
         {"a=agentsched@t3", "b=vc-controller-manager@t1"},
         false},
        {"its sharding-controller writes again",
         true,
         NULL,
         {"a=agentsched@t3", "b=vc-controller-manager@t4"},
         true},
        {"it also creates a NodeShard",
         true,
         NULL,
         {"a=agentsched@t3", "b=vc-controller-manager@t4", "c=vc-controller-manager@t4"},
         true},
        {"stopped again",
         false,
         NULL,
         {"a=agentsched@t3", "b=vc-controller-manager@t4", "c=vc-controller-manager@t4"},
         false},
    };
    run_rounds(r, sizeof r / sizeof r[0]);
}

Test(shard_owner, lease_without_sharding_controller)
{
    /* vc-controller-manager with pg/queue controllers only: the Lease is
     * live but no NodeShard is its: we write. */
    static const owner_round r[] = {
        {"no NodeShards yet", true, NULL, {NULL}, false},
        {"ours only", true, NULL, {"a=agentsched@t1", "b=agentsched@t1"}, false},
        {"another manager (not the one watched) wrote", true, NULL, {"a=kubectl-edit@t2"}, false},
    };
    run_rounds(r, sizeof r / sizeof r[0]);
}

Test(shard_owner, first_round_counts_every_entry)
{
    /* Started while Volcano's controller owns the shards: stand down at
     * once, before any write. Its Lease not live: take them. */
    static const owner_round live[] = {{"start", true, NULL, {"a=vc-controller-manager@t1"}, true}};
    run_rounds(live, 1);
    static const owner_round dead[] = {
        {"start", false, NULL, {"a=vc-controller-manager@t1"}, false},
        {"a live Lease with the same entry", true, NULL, {"a=vc-controller-manager@t1"}, false}};
    run_rounds(dead, 2);
}

Test(shard_owner, entries_before_the_holder_acquired_do_not_count)
{
    /* vc-controller-manager's sharding-controller wrote at 10:00; it was
     * restarted with only its other controllers and re-acquired its Lease
     * at 10:05 (the hand-over to agentsched's controller): the old entries
     * are an earlier process's. Its sharding-controller back at 10:20 wrote
     * within the skew of acquiring: counts. */
    static const owner_round r[] = {
        {"written by the current holder",
         true,
         "2026-12-03T09:59:00.123456Z",
         {"a=vc-controller-manager@2026-12-03T10:00:00Z"},
         true},
        {"a new holder without sharding-controller",
         true,
         "2026-12-03T10:05:00.000000Z",
         {"a=vc-controller-manager@2026-12-03T10:00:00Z"},
         false},
        {"a new holder with it, first write 3 s before acquireTime (skew)",
         true,
         "2026-12-03T10:20:03.000000Z",
         {"a=vc-controller-manager@2026-12-03T10:20:00Z"},
         true},
    };
    run_rounds(r, sizeof r / sizeof r[0]);
    cr_assert_eq(shard_owner_parse_time("2026-12-03T10:00:00Z"), 1796292000);
    cr_assert_eq(shard_owner_parse_time("2026-12-03T10:00:00.5Z"), 1796292000);
    cr_assert_eq(shard_owner_parse_time("yesterday"), -1);
    cr_assert_eq(shard_owner_parse_time(NULL), -1);
}

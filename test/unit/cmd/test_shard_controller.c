/*
 * test_shard_controller.c - `agentsched shard-controller` run whole against
 * the stub API server: it takes the Lease, creates each scheduler's
 * NodeShard with the nodes of its CPU-utilisation band, moves a node when
 * its pods change, writes a NodeShard of thousands of nodes, keeps the
 * config it has when an edit (of the file or of the ConfigMap) is invalid
 * and takes a valid one, stands down while Volcano's controller manages
 * the NodeShards, writes nothing and takes no Lease with --dry-run,
 * answers /healthz and /metrics on --listen, and gives the Lease up on
 * SIGTERM (status 0).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agentsched/base/buf.h"
#include "agentsched/base/clock.h"
#include "agentsched/cmd/shard_controller.h"
#include "k8s_stub.c"
#include "controller_fixtures.h"

/* Two bands: nodes at 70% CPU or more go to agentsched, the rest to
 * agent-scheduler. */
static const char CONFIG[] = "schedulerConfigs:\n"
                             "  - name: agentsched\n"
                             "    type: agent\n"
                             "    cpuUtilizationMin: 0.7\n"
                             "    cpuUtilizationMax: 1.0\n"
                             "    minNodes: 0\n"
                             "    maxNodes: %d\n"
                             "  - name: agent-scheduler\n"
                             "    type: agent\n"
                             "    cpuUtilizationMin: 0.0\n"
                             "    cpuUtilizationMax: 0.69\n"
                             "    minNodes: 0\n"
                             "    maxNodes: 100\n"
                             "shardSyncPeriod: \"60s\"\n"
                             "enableNodeEventTrigger: true\n";

typedef struct run {
    ctlfx x;
    char config[128];
} run;

/* write_config writes the two-band config with agentsched's maxNodes, or
 * text as it is when text is not NULL; the file's mtime moves a second on
 * each write so the reload sees a change even within one second. */
static void write_config(run *r, int max_nodes, const char *text)
{
    static time_t stamp = 1700000000;
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.tmp", r->config);
    FILE *fp = fopen(tmp, "w");
    cr_assert_not_null(fp);
    if (text)
        fputs(text, fp);
    else
        fprintf(fp, CONFIG, max_nodes);
    fclose(fp);
    struct timespec ts[2] = {{.tv_sec = stamp}, {.tv_sec = stamp}};
    stamp++;
    cr_assert_eq(utimensat(AT_FDCWD, tmp, ts, 0), 0);
    cr_assert_eq(rename(tmp, r->config), 0);
}

/* desired is a NodeShard's spec.nodesDesired joined by ',' ("absent" when
 * there is no such NodeShard). */
static void desired(k8s_stub *s, const char *shard, char *out, size_t len)
{
    json_t *o = stub_object(s, STUB_SHARD, shard);
    buf b;
    buf_init(&b, 4096);
    size_t j;
    json_t *n;
    json_array_foreach(json_object_get(json_object_get(o, "spec"), "nodesDesired"), j, n)
        buf_printf(&b, "%s%s", j ? "," : "", json_string_value(n));
    snprintf(out, len, "%s", !o ? "absent" : b.data ? b.data : "");
    buf_free(&b);
    json_decref(o);
}

/* wait_desired waits up to 10 s for shard's nodesDesired to read want. */
static void wait_desired(k8s_stub *s, const char *shard, const char *want)
{
    char got[512];
    int64_t end = clock_mono_ms() + 10000;
    for (;;) {
        desired(s, shard, got, sizeof got);
        if (!strcmp(got, want) || clock_mono_ms() >= end)
            break;
        usleep(20000);
    }
    cr_assert_str_eq(got, want, "NodeShard %s: nodesDesired %s, want %s", shard, got, want);
}

/* holder is the Lease's holderIdentity ("" when none, "absent" without a
 * Lease). */
static void holder(k8s_stub *s, char *out, size_t len)
{
    json_t *l = stub_lease(s, "default", "shardctl-test");
    const char *h =
        json_string_value(json_object_get(json_object_get(l, "spec"), "holderIdentity"));
    snprintf(out, len, "%s", !l ? "absent" : h ? h : "");
    json_decref(l);
}

/* put_pod binds a pod asking cpu to node. */
static void put_pod(k8s_stub *s, const char *name, const char *node, const char *cpu)
{
    json_t *p = stub_make_pod("default", name, name, node, cpu, "1Gi");
    stub_put(s, STUB_POD, p);
    json_decref(p);
}

/* put_node adds a Ready node of 10 CPUs (capacity as well: Volcano's
 * utilisation is over capacity). */
static void put_node(k8s_stub *s, const char *name)
{
    json_t *n = stub_make_node(name, "10", "64Gi", 110);
    json_t *st = json_object_get(n, "status");
    json_object_set_new(st, "capacity", json_deep_copy(json_object_get(st, "allocatable")));
    stub_put(s, STUB_NODE, n);
    json_decref(n);
}

/* cluster: n1 and n2 at 80% CPU, n3 and n4 idle. */
static k8s_stub *cluster(void)
{
    k8s_stub *s = stub_new();
    stub_set_shards_installed(s, true);
    const char *names[] = {"n1", "n2", "n3", "n4"};
    for (int i = 0; i < 4; i++)
        put_node(s, names[i]);
    put_pod(s, "p1", "n1", "8");
    put_pod(s, "p2", "n2", "8");
    return s;
}

/* start runs the controller on the stub with the two-band config
 * (agentsched's maxNodes max_nodes; none when max_nodes < 0, and then no
 * --config), the Lease default/shardctl-test as ctl-a (3 s) plus extra
 * (NULL-terminated). */
static void start(run *r, k8s_stub *stub, int max_nodes, const char *extra[])
{
    ctlfx_init(&r->x, stub, "shardctl", "shard-controller", shard_controller_cli_main);
    snprintf(r->config, sizeof r->config, "%s/sharding.yaml", r->x.dir);
    if (max_nodes >= 0) {
        write_config(r, max_nodes, NULL);
        ctlfx_arg(&r->x, "--config");
        ctlfx_arg(&r->x, r->config);
    }
    const char *args[] = {"--lease-namespace", "default", "--lease-name",     "shardctl-test",
                          "--identity",        "ctl-a",   "--lease-duration", "3"};
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++)
        ctlfx_arg(&r->x, args[i]);
    for (size_t i = 0; extra && extra[i]; i++)
        ctlfx_arg(&r->x, extra[i]);
    ctlfx_start(&r->x);
}

static void stop(run *r)
{
    unlink(r->config);
    ctlfx_stop(&r->x);
}

static void wait_metric(run *r, const char *series, double want)
{
    ctlfx_wait_metric(&r->x, series, want, 10000);
}

static double metric(run *r, const char *series)
{
    return ctlfx_metric(&r->x, series);
}

Test(shard_controller, leads_writes_and_follows_the_cluster, .init = ctlfx_quiet)
{
    k8s_stub *s = cluster();
    run r;
    start(&r, s, 100, NULL);
    wait_desired(s, "agentsched", "n1,n2");
    wait_desired(s, "agent-scheduler", "n3,n4");
    char h[128];
    holder(s, h, sizeof h);
    cr_expect_str_eq(h, "ctl-a");
    wait_metric(&r, "agentsched_shardctl_leader", 1);
    cr_expect_eq(metric(&r, "agentsched_shardctl_nodes"), 4);

    /* n3 fills up: it moves to agentsched on the node event, before the
     * next full resync (60 s away) */
    put_pod(s, "p3", "n3", "9");
    wait_desired(s, "agentsched", "n1,n2,n3");
    wait_desired(s, "agent-scheduler", "n4");
    cr_expect_geq(metric(&r, "agentsched_shardctl_recomputes_total{kind=\"incremental\"}"), 1);

    /* a new node, idle */
    put_node(s, "n5");
    wait_desired(s, "agent-scheduler", "n4,n5");
    cr_expect_eq(metric(&r, "agentsched_shardctl_nodeshard_writes_total{result=\"failed\"}"), 0);

    buf b;
    buf_init(&b, 1 << 16);
    cr_expect_eq(ctlfx_get(&r.x, "/healthz", &b), 200);
    buf_free(&b);
    /* the shipped dashboard and alert rules query only what it serves */
    ctlfx_shipped_series_served(&r.x, "agentsched_shardctl_");
    stop(&r);
    /* the Lease is given up on the way out, for the next replica */
    holder(s, h, sizeof h);
    cr_expect_str_eq(h, "");
    stub_free(s);
}

Test(shard_controller, an_invalid_edit_keeps_the_config_it_has, .init = ctlfx_quiet)
{
    k8s_stub *s = cluster();
    run r;
    start(&r, s, 100, NULL);
    wait_desired(s, "agentsched", "n1,n2");
    write_config(&r, 0, "schedulerConfigs:\n  - name: agentsched\n    cpuUtilizationMin: two\n");
    wait_metric(&r, "agentsched_shardctl_config_reloads_total{result=\"rejected\"}", 1);
    usleep(300000);
    wait_desired(s, "agentsched", "n1,n2");
    wait_desired(s, "agent-scheduler", "n3,n4");

    /* a valid edit is taken: agentsched, capped at one node, keeps n1; n2
     * (at 80%) is in no other scheduler's band and is left out, capped */
    write_config(&r, 1, NULL);
    wait_metric(&r, "agentsched_shardctl_config_reloads_total{result=\"ok\"}", 1);
    wait_desired(s, "agentsched", "n1");
    wait_desired(s, "agent-scheduler", "n3,n4");
    wait_metric(&r, "agentsched_shardctl_nodes_unassigned{reason=\"capped\"}", 1);
    stop(&r);
    stub_free(s);
}

Test(shard_controller, dry_run_writes_nothing_and_takes_no_lease, .init = ctlfx_quiet)
{
    k8s_stub *s = cluster();
    run r;
    const char *extra[] = {"--dry-run", NULL};
    start(&r, s, 100, extra);
    wait_metric(&r, "agentsched_shardctl_recomputes_total{kind=\"full\"}", 1);
    usleep(500000);
    char got[512];
    desired(s, "agentsched", got, sizeof got);
    cr_expect_str_eq(got, "absent");
    holder(s, got, sizeof got);
    cr_expect_str_eq(got, "absent");
    cr_expect_eq(stub_count(s, "/apis/shard.volcano.sh", STUB_POST), 0);
    cr_expect_eq(stub_count(s, "/apis/shard.volcano.sh", STUB_PATCH), 0);
    cr_expect_eq(metric(&r, "agentsched_shardctl_leader"), 0);
    stop(&r);
    stub_free(s);
}

/* A NodeShard of 3000 nodes with long names is over 100 KB: the API
 * server's answer to its create and patch (the whole object) is larger
 * than a Status, and the write still counts as written. */
Test(shard_controller, a_large_nodeshard_is_written, .init = ctlfx_quiet)
{
    k8s_stub *s = stub_new();
    stub_set_shards_installed(s, true);
    char name[64];
    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof name, "gpu-node-pool-a-zone-1-%05d", i);
        put_node(s, name);
    }
    run r;
    start(&r, s, 100000, NULL);
    wait_metric(&r, "agentsched_shardctl_nodeshard_writes_total{result=\"ok\"}", 2);
    cr_expect_eq(metric(&r, "agentsched_shardctl_nodeshard_writes_total{result=\"failed\"}"), 0);
    json_t *all = stub_objects(s, STUB_SHARD);
    size_t i;
    json_t *o;
    size_t members = 0;
    json_array_foreach(all, i, o) members +=
        json_array_size(json_object_get(json_object_get(o, "spec"), "nodesDesired"));
    json_decref(all);
    cr_expect_eq(members, 3000);
    stop(&r);
    stub_free(s);
}

/* rfc3339 formats now + delta_s on the wall clock, with microseconds
 * (a Lease's MicroTime) or without (managedFields' Time). */
static void rfc3339(int delta_s, bool micro, char *out, size_t len)
{
    time_t t = time(NULL) + delta_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, len, micro ? "%Y-%m-%dT%H:%M:%S.000000Z" : "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* volcano_lease writes Volcano's controller's Lease, held by holder ("":
 * released) since a minute ago and renewed now, for 30 s. */
static void volcano_lease(k8s_stub *s, const char *holder)
{
    char acquired[64], renewed[64];
    rfc3339(-60, true, acquired, sizeof acquired);
    rfc3339(0, true, renewed, sizeof renewed);
    json_t *lease = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:i,s:s,s:s}}", "apiVersion",
                              "coordination.k8s.io/v1", "kind", "Lease", "metadata", "name",
                              "vc-controller-manager", "namespace", "volcano-system", "spec",
                              "holderIdentity", holder, "leaseDurationSeconds", 30, "acquireTime",
                              acquired, "renewTime", renewed);
    stub_put_lease(s, "volcano-system", "vc-controller-manager", lease);
    json_decref(lease);
}

/* Volcano's controller holds its Lease and has written a NodeShard since it
 * acquired it: the controller stands down, writing nothing. Once that Lease
 * is released, it takes over. */
Test(shard_controller, stands_down_while_volcano_manages_the_shards, .init = ctlfx_quiet)
{
    k8s_stub *s = cluster();
    char wrote[64];
    rfc3339(0, false, wrote, sizeof wrote);
    volcano_lease(s, "vc-1");
    json_t *shard =
        json_pack("{s:s,s:s,s:{s:s,s:[{s:s,s:s,s:s,s:s,s:{s:{s:{}}}}]},s:{s:[s]}}", "apiVersion",
                  "shard.volcano.sh/v1alpha1", "kind", "NodeShard", "metadata", "name",
                  "agentsched", "managedFields", "manager", "vc-controller-manager", "operation",
                  "Update", "time", wrote, "fieldsType", "FieldsV1", "fieldsV1", "f:spec",
                  "f:nodesDesired", "spec", "nodesDesired", "n4");
    stub_put(s, STUB_SHARD, shard);
    json_decref(shard);

    run r;
    start(&r, s, 100, NULL);
    wait_metric(&r, "agentsched_shardctl_foreign_owner", 1);
    cr_expect_eq(metric(&r, "agentsched_shardctl_stand_downs_total"), 1);
    wait_metric(&r, "agentsched_shardctl_leader", 1);
    /* it leads its own Lease, yet writes nothing while Volcano's is live */
    char got[512];
    desired(s, "agentsched", got, sizeof got);
    cr_expect_str_eq(got, "n4");
    cr_expect_eq(stub_count(s, "/apis/shard.volcano.sh", STUB_POST), 0);
    cr_expect_eq(stub_count(s, "/apis/shard.volcano.sh", STUB_PATCH), 0);

    /* Volcano's controller gives its Lease up: it takes over */
    volcano_lease(s, "");
    wait_desired(s, "agentsched", "n1,n2");
    wait_desired(s, "agent-scheduler", "n3,n4");
    cr_expect_eq(metric(&r, "agentsched_shardctl_foreign_owner"), 0);
    stop(&r);
    stub_free(s);
}

/* put_sharding_configmap stores Volcano's sharding ConfigMap with the
 * two-band config (agentsched's maxNodes max_nodes), or text as it is. */
static void put_sharding_configmap(k8s_stub *s, int max_nodes, const char *text)
{
    char cfg[2048];
    if (text)
        snprintf(cfg, sizeof cfg, "%s", text);
    else
        snprintf(cfg, sizeof cfg, CONFIG, max_nodes);
    json_t *cm = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                           "metadata", "name", "volcano-sharding-configmap", "namespace",
                           "volcano-system", "data", "sharding.yaml", cfg);
    stub_put_configmap(s, "volcano-system", "volcano-sharding-configmap", cm);
    json_decref(cm);
}

/* --configmap: nothing is written before the ConfigMap exists; its config
 * is taken once it does, an edit is taken, an invalid edit is kept out.
 * SIGHUP asks for the ConfigMap at once rather than at the next 5 s poll. */
Test(shard_controller, follows_the_sharding_configmap, .init = ctlfx_quiet)
{
    k8s_stub *s = cluster();
    run r;
    const char *extra[] = {"--configmap", "volcano-system/volcano-sharding-configmap", NULL};
    start(&r, s, -1, extra);
    int64_t end = clock_mono_ms() + 10000;
    while (stub_count(s, "/api/v1/namespaces/volcano-system/configmaps/", STUB_LIST) < 1 &&
           clock_mono_ms() < end)
        usleep(20000);
    usleep(300000);
    char got[512];
    desired(s, "agentsched", got, sizeof got);
    cr_expect_str_eq(got, "absent", "no config yet, nothing written");
    cr_expect_eq(metric(&r, "agentsched_shardctl_leader"), 0, "nor a Lease taken");

    put_sharding_configmap(s, 100, NULL);
    cr_assert_eq(pthread_kill(r.x.th, SIGHUP), 0);
    wait_desired(s, "agentsched", "n1,n2");
    wait_desired(s, "agent-scheduler", "n3,n4");
    cr_expect_eq(metric(&r, "agentsched_shardctl_config_reloads_total{result=\"ok\"}"), 1);

    put_sharding_configmap(s, 0, "schedulerConfigs: [{name: agentsched, minNodes: many}]\n");
    cr_assert_eq(pthread_kill(r.x.th, SIGHUP), 0);
    wait_metric(&r, "agentsched_shardctl_config_reloads_total{result=\"rejected\"}", 1);
    wait_desired(s, "agentsched", "n1,n2");

    put_sharding_configmap(s, 1, NULL);
    cr_assert_eq(pthread_kill(r.x.th, SIGHUP), 0);
    wait_desired(s, "agentsched", "n1");
    cr_expect_eq(metric(&r, "agentsched_shardctl_config_reloads_total{result=\"ok\"}"), 2);
    stop(&r);
    stub_free(s);
}

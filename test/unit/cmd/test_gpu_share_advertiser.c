/*
 * test_gpu_share_advertiser.c - `agentsched gpu-share-advertiser` run
 * whole against the stub API server: the first list writes the share
 * resource on every GPU node and removes it where there are no devices,
 * the watch follows new nodes and changed device counts, a failed patch is
 * sent again after the relist a 410 Gone forces, it stands down for
 * another writer, --dry-run sends nothing, and /healthz and /metrics answer
 * on --listen. SIGTERM to its thread ends it with status 0.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agentsched/base/buf.h"
#include "agentsched/base/clock.h"
#include "agentsched/cmd/gpu_share_advertiser.h"
#include "k8s_stub.c"
#include "controller_fixtures.h"
#include "sanitizer_fixtures.h"

#define SHARE "agentsched.io/gpu-milli"

/* gpu_node is a Ready node with devices GPUs (none when devices < 0) and,
 * when share is not NULL, the share resource at that value. */
static json_t *gpu_node(const char *name, int devices, const char *share)
{
    json_t *n = stub_make_node(name, "32", "128Gi", 110);
    json_t *st = json_object_get(n, "status");
    json_t *alloc = json_object_get(st, "allocatable");
    json_t *cap = json_deep_copy(alloc);
    json_object_set_new(st, "capacity", cap);
    if (devices >= 0) {
        char d[16];
        snprintf(d, sizeof d, "%d", devices);
        json_object_set_new(alloc, "nvidia.com/gpu", json_string(d));
        json_object_set_new(cap, "nvidia.com/gpu", json_string(d));
    }
    if (share) {
        json_object_set_new(alloc, SHARE, json_string(share));
        json_object_set_new(cap, SHARE, json_string(share));
    }
    return n;
}

/* share_of is the share resource in node's capacity and allocatable when
 * both carry the same value, "-" when neither does, "mismatch" else. */
static void share_of(k8s_stub *s, const char *node, char *out, size_t len)
{
    json_t *n = stub_object(s, STUB_NODE, node);
    json_t *st = json_object_get(n, "status");
    const char *c = json_string_value(json_object_get(json_object_get(st, "capacity"), SHARE));
    const char *a = json_string_value(json_object_get(json_object_get(st, "allocatable"), SHARE));
    if (!n)
        snprintf(out, len, "no node");
    else if (!c && !a)
        snprintf(out, len, "-");
    else if (c && a && !strcmp(c, a))
        snprintf(out, len, "%s", c);
    else
        snprintf(out, len, "mismatch");
    json_decref(n);
}

static bool share_is(k8s_stub *s, const char *node, const char *want)
{
    char got[64];
    share_of(s, node, got, sizeof got);
    return strcmp(got, want) == 0;
}

/* wait_share waits up to 10 s for node's share resource to read want. */
static void wait_share(k8s_stub *s, const char *node, const char *want)
{
    int64_t end = clock_mono_ms() + 10000;
    while (!share_is(s, node, want) && clock_mono_ms() < end)
        usleep(20000);
    char got[64];
    share_of(s, node, got, sizeof got);
    cr_assert_str_eq(got, want, "node %s: share resource %s, want %s", node, got, want);
}

/* start runs the advertiser on the stub with --resync 5 plus extra
 * (NULL-terminated). */
static void start(ctlfx *r, k8s_stub *stub, const char *extra[])
{
    ctlfx_init(r, stub, "adv", "gpu-share-advertiser", gpu_share_advertiser_cli_main);
    ctlfx_arg(r, "--resync");
    ctlfx_arg(r, "5");
    for (size_t i = 0; extra && extra[i]; i++)
        ctlfx_arg(r, extra[i]);
    ctlfx_start(r);
}

static void wait_metric(ctlfx *r, const char *series, double want)
{
    ctlfx_wait_metric(r, series, want, 10000);
}

Test(gpu_share_advertiser, writes_follows_and_removes, .init = ctlfx_quiet)
{
    k8s_stub *s = stub_new();
    json_t *n;
    stub_put(s, STUB_NODE, n = gpu_node("g1", 4, NULL)), json_decref(n);
    stub_put(s, STUB_NODE, n = gpu_node("g2", 8, "1000")), json_decref(n);
    stub_put(s, STUB_NODE, n = gpu_node("cpu1", -1, "2000")), json_decref(n);
    json_t *off = gpu_node("off1", 2, NULL);
    json_object_set_new(json_object_get(off, "metadata"), "annotations",
                        json_pack("{s:s}", "agentsched.io/gpu-share-advertiser", "off"));
    stub_put(s, STUB_NODE, off), json_decref(off);
    ctlfx r;
    start(&r, s, NULL);
    wait_share(s, "g1", "4000");
    wait_share(s, "g2", "8000");
    wait_share(s, "cpu1", "-");
    wait_metric(&r, "agentsched_gpushare_synced", 1);

    /* the watch: a new node, a device count that changes, a node that goes */
    stub_put(s, STUB_NODE, n = gpu_node("g3", 2, NULL)), json_decref(n);
    wait_share(s, "g3", "2000");
    stub_put(s, STUB_NODE, n = gpu_node("g1", 3, "4000")), json_decref(n);
    wait_share(s, "g1", "3000");
    cr_assert(stub_delete(s, STUB_NODE, "g2"));
    stub_put(s, STUB_NODE, n = gpu_node("g4", 1, NULL)), json_decref(n);
    wait_share(s, "g4", "1000");
    /* g3 took g2's place in the table: its entry follows it there */
    stub_put(s, STUB_NODE, n = gpu_node("g3", 5, "2000")), json_decref(n);
    wait_share(s, "g3", "5000");

    /* the opted-out node was never written */
    cr_expect(share_is(s, "off1", "-"));
    cr_expect_eq(stub_count(s, "/api/v1/nodes/off1", STUB_PATCH), 0);
    /* g1 twice, g2, cpu1, g3 twice, g4: seven patches, none repeated */
    wait_metric(&r, "agentsched_gpushare_patches_total{result=\"ok\"}", 7);
    cr_expect_eq(stub_count(s, "/api/v1/nodes/", STUB_PATCH), 7);
    cr_expect_eq(ctlfx_metric(&r, "agentsched_gpushare_patches_total{result=\"failed\"}"), 0);
    cr_expect_eq(ctlfx_metric(&r, "agentsched_gpushare_nodes_stood_down"), 0);
    /* g1, cpu1, off1, g3, g4 seen; g1, g3, g4 carry the share */
    cr_expect_eq(ctlfx_metric(&r, "agentsched_gpushare_nodes"), 5);
    cr_expect_eq(ctlfx_metric(&r, "agentsched_gpushare_nodes_advertised"), 3);

    buf b;
    buf_init(&b, 1 << 16);
    cr_expect_eq(ctlfx_get(&r, "/healthz", &b), 200);
    cr_expect_str_eq(b.data ? b.data : "", "ok\n");
    cr_expect_eq(ctlfx_get(&r, "/", &b), 404);
    buf_free(&b);
    /* the shipped dashboard and alert rules query only what it serves */
    ctlfx_shipped_series_served(&r, "agentsched_gpushare_");
    ctlfx_stop(&r);
    stub_free(s);
}

Test(gpu_share_advertiser, failed_patch_is_sent_again_after_a_relist, .init = ctlfx_quiet)
{
    k8s_stub *s = stub_new();
    json_t *n;
    stub_put(s, STUB_NODE, n = gpu_node("g1", 2, NULL)), json_decref(n);
    stub_put(s, STUB_NODE, n = gpu_node("g2", 4, NULL)), json_decref(n);
    stub_fault(s, "/api/v1/nodes/g1/status", STUB_PATCH, STUB_F_STATUS, 500);
    ctlfx r;
    start(&r, s, NULL);
    wait_share(s, "g2", "4000");
    wait_metric(&r, "agentsched_gpushare_patches_total{result=\"failed\"}", 1);
    cr_expect(share_is(s, "g1", "-"));
    double lists = ctlfx_metric(&r, "agentsched_gpushare_lists_total");
    cr_expect_eq(lists, 1);

    /* the next watch ends in 410 Gone: a relist, and g1 is decided (and
     * written) again */
    stub_fault(s, "/api/v1/nodes", STUB_WATCH, STUB_F_ERROR_410, 0);
    stub_drop_watches(s);
    wait_share(s, "g1", "2000");
    wait_metric(&r, "agentsched_gpushare_lists_total", 2);
    cr_expect_eq(stub_count(s, "/api/v1/nodes/g2", STUB_PATCH), 1, "g2 was right: not rewritten");
    cr_expect_eq(ctlfx_metric(&r, "agentsched_gpushare_nodes"), 2);

    /* g2 deleted while no watch is open (its DELETED event is lost with the
     * stream, and the watch after it is refused with 410): the relist does
     * not hold it, and it is forgotten */
    stub_pause_watches(s, true);
    cr_assert(stub_delete(s, STUB_NODE, "g2"));
    stub_compact(s);
    stub_drop_watches(s);
    stub_pause_watches(s, false);
    wait_metric(&r, "agentsched_gpushare_lists_total", 3);
    wait_metric(&r, "agentsched_gpushare_nodes", 1);
    cr_expect_eq(ctlfx_metric(&r, "agentsched_gpushare_nodes_advertised"), 1);
    ctlfx_stop(&r);
    stub_free(s);
}

Test(gpu_share_advertiser, stands_down_for_another_writer, .init = ctlfx_quiet)
{
    k8s_stub *s = stub_new();
    json_t *n;
    stub_put(s, STUB_NODE, n = gpu_node("g1", 4, NULL)), json_decref(n);
    ctlfx r;
    start(&r, s, NULL);
    wait_share(s, "g1", "4000");
    /* a device plugin registering the same name writes its own value back
     * on every sync: replaced twice, the advertiser writes again; the
     * third time it leaves the node to the other writer */
    for (int i = 0; i < 3; i++) {
        stub_put(s, STUB_NODE, n = gpu_node("g1", 4, "1000")), json_decref(n);
        if (i < 2)
            wait_share(s, "g1", "4000");
    }
    wait_metric(&r, "agentsched_gpushare_nodes_stood_down", 1);
    usleep(300000);
    cr_expect(share_is(s, "g1", "1000"));
    cr_expect_eq(ctlfx_metric(&r, "agentsched_gpushare_nodes_advertised"), 0);
    cr_expect_eq(stub_count(s, "/api/v1/nodes/g1", STUB_PATCH), 3);

    /* the device count moves: the node is the advertiser's again */
    stub_put(s, STUB_NODE, n = gpu_node("g1", 8, "1000")), json_decref(n);
    wait_share(s, "g1", "8000");
    wait_metric(&r, "agentsched_gpushare_patches_total{result=\"ok\"}", 4);
    cr_expect_eq(ctlfx_metric(&r, "agentsched_gpushare_nodes_stood_down"), 0);
    cr_expect_eq(ctlfx_metric(&r, "agentsched_gpushare_nodes_advertised"), 1);
    ctlfx_stop(&r);
    stub_free(s);
}

Test(gpu_share_advertiser, dry_run_sends_nothing, .init = ctlfx_quiet)
{
    k8s_stub *s = stub_new();
    json_t *n;
    stub_put(s, STUB_NODE, n = gpu_node("g1", 4, NULL)), json_decref(n);
    stub_put(s, STUB_NODE, n = gpu_node("cpu1", -1, "1000")), json_decref(n);
    ctlfx r;
    const char *extra[] = {"--dry-run", NULL};
    start(&r, s, extra);
    wait_metric(&r, "agentsched_gpushare_synced", 1);
    stub_put(s, STUB_NODE, n = gpu_node("g2", 2, NULL)), json_decref(n);
    usleep(300000);
    cr_expect_eq(stub_count(s, "/api/v1/nodes/", STUB_PATCH), 0);
    cr_expect(share_is(s, "g1", "-"));
    cr_expect(share_is(s, "cpu1", "1000"));
    ctlfx_stop(&r);
    stub_free(s);
}

/* Paging, not threads: under TSan its 150 MB through the instrumented stub
 * take most of a minute, so the TSan build leaves it out. */
Test(gpu_share_advertiser, a_page_over_its_cap_is_asked_again_smaller, .init = ctlfx_quiet,
     .disabled = UNDER_TSAN)
{
    /* 30 nodes of 1 MiB each (an annotation as large as etcd lets a node
     * be, near enough): a page of 500 is 30 MiB, over the 24 MiB cap, so
     * the advertiser halves the page until one fits and lists them all */
    k8s_stub *s = stub_new();
    char *big = stub_filler(1 << 20);
    cr_assert_not_null(big);
    for (int i = 0; i < 30; i++) {
        char name[16];
        snprintf(name, sizeof name, "g%02d", i);
        json_t *n = gpu_node(name, 1, NULL);
        json_object_set_new(json_object_get(n, "metadata"), "annotations",
                            json_pack("{s:s}", "example.com/large", big));
        stub_put(s, STUB_NODE, n);
        json_decref(n);
    }
    free(big);
    ctlfx r;
    start(&r, s, NULL);
    /* about 150 MB go over loopback first: slow under ASan */
    ctlfx_wait_metric(&r, "agentsched_gpushare_synced", 1, 60000);
    for (int i = 0; i < 30; i++) {
        char name[16];
        snprintf(name, sizeof name, "g%02d", i);
        wait_share(s, name, "1000");
    }
    cr_expect_eq(ctlfx_metric(&r, "agentsched_gpushare_lists_total"), 1);
    cr_expect_eq(ctlfx_metric(&r, "agentsched_gpushare_patches_total{result=\"failed\"}"), 0);
    ctlfx_stop(&r);
    stub_free(s);
}

/*
 * bench_watch.c - replay a recorded watch stream into the cache.
 *
 *   bench_watch [NODES [PODS]]        (default 5000 nodes, 100000 pods)
 *
 * Records a stream like the API server's (Node ADDED events with their
 * image lists, bound Pod ADDED events with realistic specs, both with the
 * managedFields every event carries, then status MODIFIED and DELETED
 * churn) into a temporary file, then replays it through k8s_stream_feed in
 * 64 KiB reads, as the reflector does from the socket. Prints events/s
 * for decode+apply, a parse-only baseline over the same bytes (jansson
 * only, measured in the same run), their ratio, and the RSS of the process
 * holding the filled cache (target: < 256 MB for 5000 nodes + 100000 pods).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agentsched/core/cache.h"
#include "agentsched/k8s/watch.h"
#include "agentsched/base/log.h"
#include "bench_clock.h"

/* Times are CPU time of this (single) thread (bench_clock_s with
 * CLOCK_THREAD_CPUTIME_ID): the machine is shared, wall time is not a
 * measurement. */

static long rss_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, n))
            v = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

/* status.images: kubelet reports up to 50 (nodeStatusMaxImages); 16 here,
 * each with its digest and tag names. */
static char node_images[16 * 256];

static void make_node_images(void)
{
    size_t n = 0;
    n += (size_t)snprintf(node_images + n, sizeof node_images - n, "[");
    for (int k = 0; k < 16; k++)
        n += (size_t)snprintf(node_images + n, sizeof node_images - n,
                              "%s{\"names\":[\"registry.example.com/team/image-%02d@sha256:"
                              "%064d\",\"registry.example.com/team/image-%02d:v1.%d\"],"
                              "\"sizeBytes\":%d}",
                              k ? "," : "", k, k, k, k, 120000000 + k * 7919);
    snprintf(node_images + n, sizeof node_images - n, "]");
}

static void write_node(FILE *f, int i, int rv)
{
    bool gpu = i % 4 == 0;
    fprintf(
        f,
        "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{"
        "\"name\":\"node-%05d\",\"uid\":\"6b1f%08x-0000-4000-8000-00000000%04x\","
        "\"resourceVersion\":\"%d\",\"creationTimestamp\":\"2026-11-01T00:00:00Z\","
        "\"labels\":{\"beta.kubernetes.io/arch\":\"amd64\",\"beta.kubernetes.io/os\":"
        "\"linux\",\"kubernetes.io/arch\":\"amd64\",\"kubernetes.io/hostname\":\"node-%05d\","
        "\"kubernetes.io/os\":\"linux\",\"node.kubernetes.io/instance-type\":\"%s\","
        "\"topology.kubernetes.io/region\":\"r1\",\"topology.kubernetes.io/zone\":\"r1-%c\"%s},"
        "\"annotations\":{\"node.alpha.kubernetes.io/ttl\":\"0\","
        "\"volumes.kubernetes.io/controller-managed-attach-detach\":\"true\"},"
        "\"managedFields\":[{\"manager\":\"kubelet\",\"operation\":\"Update\",\"apiVersion\":"
        "\"v1\",\"time\":\"2026-11-01T00:00:00Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{"
        "\"f:metadata\":{\"f:annotations\":{\".\":{},\"f:volumes.kubernetes.io/"
        "controller-managed-attach-detach\":{}},\"f:labels\":{\".\":{},\"f:kubernetes.io/arch\":{},"
        "\"f:kubernetes.io/hostname\":{},\"f:kubernetes.io/os\":{}}},\"f:spec\":{"
        "\"f:providerID\":{}}}},{\"manager\":\"kubelet\",\"operation\":\"Update\",\"apiVersion\":"
        "\"v1\",\"time\":\"2026-11-30T00:00:00Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{"
        "\"f:status\":{\"f:allocatable\":{},\"f:capacity\":{},\"f:conditions\":{},"
        "\"f:images\":{},\"f:nodeInfo\":{}}},\"subresource\":\"status\"}]},"
        "\"spec\":{\"podCIDR\":\"10.%d.%d.0/24\",\"providerID\":\"aws:///r1/i-%08x\"%s},"
        "\"status\":{\"capacity\":{\"cpu\":\"%d\",\"memory\":\"%dGi\",\"pods\":\"110\","
        "\"ephemeral-storage\":\"100Gi\"%s},\"allocatable\":{\"cpu\":\"%dm\",\"memory\":"
        "\"%dMi\",\"pods\":\"110\",\"ephemeral-storage\":\"95Gi\"%s},\"conditions\":["
        "{\"type\":\"MemoryPressure\",\"status\":\"False\"},{\"type\":\"DiskPressure\","
        "\"status\":\"False\"},{\"type\":\"PIDPressure\",\"status\":\"False\"},{\"type\":"
        "\"Ready\",\"status\":\"True\",\"reason\":\"KubeletReady\"}],\"addresses\":[{\"type\":"
        "\"InternalIP\",\"address\":\"10.0.%d.%d\"},{\"type\":\"Hostname\",\"address\":"
        "\"node-%05d\"}],\"nodeInfo\":{\"kubeletVersion\":\"v1.31.0\",\"osImage\":"
        "\"Ubuntu 22.04\",\"containerRuntimeVersion\":\"containerd://1.7.0\"},\"images\":%s}}}\n",
        i, (unsigned)i, (unsigned)i, rv, i, gpu ? "p4d.24xlarge" : "m5.8xlarge", 'a' + i % 3,
        gpu ? ",\"nvidia.com/gpu.present\":\"true\",\"agentsched.io/gpu-model\":\"A100\"" : "",
        i / 256, i % 256, (unsigned)i,
        gpu ? ",\"taints\":[{\"key\":\"nvidia.com/gpu\",\"value\":\"present\",\"effect\":"
              "\"NoSchedule\"}]"
            : "",
        gpu ? 96 : 32, gpu ? 1152 : 128, gpu ? ",\"nvidia.com/gpu\":\"8\"" : "",
        gpu ? 95000 : 31500, gpu ? 1150000 : 126000, gpu ? ",\"nvidia.com/gpu\":\"8\"" : "",
        i / 256, i % 256, i, node_images);
}

/* metadata.managedFields as the API server sends them in every event (the
 * ReplicaSet controller's create, the scheduler's binding, kubelet's
 * status): a third of a real pod event's bytes. */
static const char pod_managed[] =
    "[{\"manager\":\"kube-controller-manager\",\"operation\":\"Update\",\"apiVersion\":\"v1\","
    "\"time\":\"2026-11-30T01:02:03Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{\"f:metadata\":{"
    "\"f:generateName\":{},\"f:labels\":{\".\":{},\"f:app\":{},\"f:pod-template-hash\":{},"
    "\"f:team\":{}},\"f:ownerReferences\":{\".\":{},\"k:{\\\"uid\\\":\\\"ffff\\\"}\":{}}},"
    "\"f:spec\":{\"f:containers\":{\"k:{\\\"name\\\":\\\"agent\\\"}\":{\".\":{},\"f:env\":{"
    "\".\":{},\"k:{\\\"name\\\":\\\"AGENT_ID\\\"}\":{\".\":{},\"f:name\":{},\"f:value\":{}}},"
    "\"f:image\":{},\"f:imagePullPolicy\":{},\"f:name\":{},\"f:resources\":{\".\":{},"
    "\"f:limits\":{\".\":{},\"f:cpu\":{},\"f:memory\":{}},\"f:requests\":{\".\":{},\"f:cpu\":{},"
    "\"f:memory\":{}}},\"f:terminationMessagePath\":{}},\"k:{\\\"name\\\":\\\"sidecar\\\"}\":{"
    "\".\":{},\"f:image\":{},\"f:name\":{},\"f:resources\":{\".\":{},\"f:requests\":{\".\":{},"
    "\"f:cpu\":{},\"f:memory\":{}}}}},\"f:dnsPolicy\":{},\"f:restartPolicy\":{},"
    "\"f:schedulerName\":{},\"f:serviceAccountName\":{},\"f:terminationGracePeriodSeconds\":{},"
    "\"f:tolerations\":{}}}},{\"manager\":\"kubelet\",\"operation\":\"Update\",\"apiVersion\":"
    "\"v1\",\"time\":\"2026-11-30T01:02:09Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{"
    "\"f:status\":{\"f:conditions\":{\"k:{\\\"type\\\":\\\"Ready\\\"}\":{\".\":{},"
    "\"f:lastProbeTime\":{},\"f:lastTransitionTime\":{},\"f:status\":{},\"f:type\":{}}},"
    "\"f:hostIP\":{},\"f:phase\":{},\"f:podIP\":{},\"f:startTime\":{}}},\"subresource\":\"status\"}"
    "]";

static void write_pod(FILE *f, const char *type, int i, int node, int rv, const char *phase)
{
    fprintf(
        f,
        "{\"type\":\"%s\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"
        "\"name\":\"agent-%06d-7d9f8\",\"generateName\":\"agent-%06d-\",\"namespace\":"
        "\"team-%d\",\"uid\":\"0a1b%08x-1111-4222-8333-%012x\",\"resourceVersion\":\"%d\","
        "\"creationTimestamp\":\"2026-11-30T01:02:03Z\",\"labels\":{\"app\":\"agent\","
        "\"pod-template-hash\":\"7d9f8\",\"team\":\"t%d\"},\"ownerReferences\":[{"
        "\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"agent-%06d\","
        "\"uid\":\"ffff%08x-0000-4000-8000-000000000000\",\"controller\":true,"
        "\"blockOwnerDeletion\":true}],\"managedFields\":%s},\"spec\":{\"containers\":[{\"name\":"
        "\"agent\","
        "\"image\":\"registry.example.com/agents/runner:1.4.2\",\"resources\":{\"requests\":"
        "{\"cpu\":\"%dm\",\"memory\":\"%dMi\"},\"limits\":{\"cpu\":\"2\",\"memory\":\"4Gi\"}},"
        "\"env\":[{\"name\":\"AGENT_ID\",\"value\":\"%d\"}],\"terminationMessagePath\":"
        "\"/dev/termination-log\",\"imagePullPolicy\":\"IfNotPresent\"},{\"name\":\"sidecar\","
        "\"image\":\"registry.example.com/proxy:2.0\",\"resources\":{\"requests\":{\"cpu\":"
        "\"50m\",\"memory\":\"64Mi\"}}}],\"restartPolicy\":\"Always\","
        "\"terminationGracePeriodSeconds\":30,\"dnsPolicy\":\"ClusterFirst\","
        "\"serviceAccountName\":\"default\",\"nodeName\":\"node-%05d\",\"schedulerName\":"
        "\"agent-scheduler\",\"priority\":0,\"tolerations\":[{\"key\":"
        "\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\","
        "\"tolerationSeconds\":300},{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":"
        "\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":300}]},\"status\":{"
        "\"phase\":\"%s\",\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"True\"},"
        "{\"type\":\"Ready\",\"status\":\"True\"}],\"hostIP\":\"10.0.%d.%d\",\"podIP\":"
        "\"10.%d.%d.%d\",\"qosClass\":\"Burstable\",\"startTime\":\"2026-11-30T01:02:04Z\"}}}\n",
        type, i, i, i % 50, (unsigned)i, (unsigned)i, rv, i % 50, i, (unsigned)i, pod_managed,
        100 + (i % 8) * 50, 128 + (i % 4) * 128, i, node, phase, node / 256, node % 256, node / 256,
        node % 256, i % 250);
}

int main(int argc, char **argv)
{
    int nnodes = argc > 1 ? atoi(argv[1]) : 5000;
    int npods = argc > 2 ? atoi(argv[2]) : 100000;
    if (nnodes < 1 || npods < 0) {
        fprintf(stderr, "usage: bench_watch [NODES [PODS]]\n");
        return 2;
    }
    log_set_level(LOG_ERROR);
    char npath[] = "/tmp/bench_watch_nodesXXXXXX", ppath[] = "/tmp/bench_watch_podsXXXXXX";
    int nfd = mkstemp(npath), pfd = mkstemp(ppath);
    FILE *nf = fdopen(nfd, "w"), *pf = fdopen(pfd, "w");
    if (!nf || !pf)
        return 1;
    int rv = 1000;
    make_node_images();
    for (int i = 0; i < nnodes; i++)
        write_node(nf, i, ++rv);
    for (int i = 0; i < npods; i++)
        write_pod(pf, "ADDED", i, i % nnodes, ++rv, "Running");
    /* churn: a tenth modified (status), a twentieth deleted, then re-added */
    for (int i = 0; i < npods / 10; i++)
        write_pod(pf, "MODIFIED", i * 10 % npods, (i * 10 % npods) % nnodes, ++rv, "Running");
    for (int i = 0; i < npods / 20; i++)
        write_pod(pf, "DELETED", i * 20 % npods, (i * 20 % npods) % nnodes, ++rv, "Running");
    for (int i = 0; i < npods / 20; i++)
        write_pod(pf, "ADDED", i * 20 % npods, (i * 20 + 1) % nnodes, ++rv, "Running");
    long nbytes = ftell(nf), pbytes = ftell(pf);
    fclose(nf);
    fclose(pf);
    long events = nnodes + npods + npods / 10 + npods / 20 * 2;

    long rss0 = rss_kb("VmRSS");
    model_registry reg;
    model_registry_init(&reg);
    cache *c;
    if (cache_new(&reg, &c) != AS_OK)
        return 1;
    k8s_stream *ns, *ps;
    if (k8s_stream_new(K8S_KIND_NODE, c, NULL, 0, &ns) ||
        k8s_stream_new(K8S_KIND_POD, c, NULL, 0, &ps))
        return 1;
    static char chunk[64 * 1024];
    double t0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
    const char *paths[2] = {npath, ppath};
    k8s_stream *streams[2] = {ns, ps};
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(paths[k], "rb");
        size_t n;
        while (f && (n = fread(chunk, 1, sizeof chunk, f)) > 0)
            if (k8s_stream_feed(streams[k], chunk, n) != AS_OK) {
                fprintf(stderr, "replay failed\n");
                return 1;
            }
        if (f)
            fclose(f);
    }
    double apply_s = bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;
    long rss1 = rss_kb("VmRSS"), hwm = rss_kb("VmHWM");

    /* Baseline: the same bytes through jansson only. */
    t0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
    long parsed = 0;
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(paths[k], "rb");
        static char line[1 << 16];
        while (f && fgets(line, sizeof line, f)) {
            json_t *j = json_loads(line, 0, NULL);
            parsed += j != NULL;
            json_decref(j);
        }
        if (f)
            fclose(f);
    }
    double parse_s = bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - t0;

    cache_stats st;
    cache_get_stats(c, &st);
    as_diag d;
    as_err inv = cache_check_invariants(c, &d);
    printf("bench_watch: %d nodes, %d pods, %ld events, %.1f MB of stream\n", nnodes, npods, events,
           (double)(nbytes + pbytes) / 1e6);
    printf("  cache: %zu nodes, %zu pods bound, invariants %s\n", st.nodes, st.pods_bound,
           inv == AS_OK ? "ok" : d.msg);
    printf("  decode+apply: %.3f s CPU, %.0f events/s, %.2f us/event\n", apply_s,
           (double)events / apply_s, apply_s * 1e6 / (double)events);
    printf("  baseline parse-only (jansson, same run): %.3f s CPU, %.0f events/s\n", parse_s,
           (double)parsed / parse_s);
    printf("  ratio decode+apply / parse-only: %.2fx\n", apply_s / parse_s);
    printf("  RSS: %.1f MB before, %.1f MB with the cache (peak %.1f MB); cache ~%.1f MB\n",
           (double)rss0 / 1024, (double)rss1 / 1024, (double)hwm / 1024,
           (double)(rss1 - rss0) / 1024);
    printf("  target RSS < 256 MB: %s\n", rss1 / 1024 < 256 ? "PASS" : "FAIL");
    k8s_stream_free(ns);
    k8s_stream_free(ps);
    cache_free(c);
    model_registry_destroy(&reg);
    unlink(npath);
    unlink(ppath);
    return inv == AS_OK && rss1 / 1024 < 256 ? 0 : 1;
}

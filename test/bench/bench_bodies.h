/*
 * bench_bodies.h - the ExtenderArgs bodies the extender benchmarks send
 * (bench_extender over HTTP, bench_extender_cpu in process) and the
 * cluster they run against, so both measure the same requests: a small
 * agent Pod and 500 NodeNames (or 500 full Nodes) over a 5000-node cache;
 * and the Pod as kube-scheduler sends it from a real cluster (5 KB).
 */
#ifndef AGENTSCHED_BENCH_BODIES_H
#define AGENTSCHED_BENCH_BODIES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "agentsched/base/buf.h"
#include "agentsched/core/cache.h"
#include "agentsched/base/http.h"
#include "agentsched/model/node.h"
#include "agentsched/serve/svc.h"
#include "bench_clock.h"

#define BENCH_NODES 5000
#define BENCH_NAMES 500

/* The Pod of agent number id: its own name and uid (every scheduling
 * cycle brings another pod), the same shape for all. */
#define BENCH_POD_FMT                                                                              \
    "{\"metadata\":{\"name\":\"agent-%llu\",\"namespace\":\"agents\",\"uid\":\"u-agent-%llu\","    \
    "\"labels\":{\"app\":\"agent\"}},\"spec\":{\"schedulerName\":\"agent-scheduler\","             \
    "\"containers\":[{\"name\":\"agent\",\"image\":\"agent:1\",\"resources\":{\"requests\":{"      \
    "\"cpu\":\"500m\",\"memory\":\"1Gi\"},\"limits\":{\"memory\":\"2Gi\"}}}]},"                    \
    "\"status\":{\"phase\":\"Pending\"}}"

/* bench_pod_json writes the Pod of agent id into out[cap]. */
static inline void bench_pod_json(char *out, size_t cap, uint64_t id)
{
    snprintf(out, cap, BENCH_POD_FMT, (unsigned long long)id, (unsigned long long)id);
}

/* bench_k8s_pod_json appends the Pod of agent id as kube-scheduler sends
 * it in a real cluster: its informer's copy (managedFields stripped) of a
 * Deployment's pending agent pod that failed one cycle (status condition),
 * with a sidecar, env, volumes, probes and the service-account volume the
 * API server adds. Same requests as BENCH_POD_FMT's agent plus the sidecar.
 * Each agent carries its own values in env (its session), so no two Pods'
 * spec texts are equal; their projections through the Pod skip rules are. */
static inline void bench_k8s_pod_json(buf *b, uint64_t id)
{
    unsigned long long u = (unsigned long long)id;
    buf_printf(
        b,
        "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"agent-7d9f8-%llu\","
        "\"generateName\":\"agent-7d9f8-\",\"namespace\":\"agents\",\"uid\":"
        "\"6f1c2a4e-0000-4000-8000-%012llu\",\"resourceVersion\":\"%llu\","
        "\"creationTimestamp\":\"2026-11-30T01:02:03Z\",\"labels\":{\"app\":\"agent\","
        "\"pod-template-hash\":\"7d9f8\",\"team\":\"research\"},\"annotations\":{"
        "\"agentsched.io/session\":\"s-%llu\",\"kubectl.kubernetes.io/restartedAt\":"
        "\"2026-11-29T22:10:00Z\"},\"ownerReferences\":[{\"apiVersion\":\"apps/v1\","
        "\"kind\":\"ReplicaSet\",\"name\":\"agent-7d9f8\",\"uid\":"
        "\"0b5c0000-1111-4222-8333-444455556666\",\"controller\":true,"
        "\"blockOwnerDeletion\":true}]},",
        u, u, 100000 + u, u);
    buf_puts(b, "\"spec\":{\"volumes\":[{\"name\":\"kube-api-access-x7k2p\",\"projected\":{"
                "\"sources\":[{\"serviceAccountToken\":{\"expirationSeconds\":3607,\"path\":"
                "\"token\"}},{\"configMap\":{\"name\":\"kube-root-ca.crt\",\"items\":[{\"key\":"
                "\"ca.crt\",\"path\":\"ca.crt\"}]}},{\"downwardAPI\":{\"items\":[{\"path\":"
                "\"namespace\",\"fieldRef\":{\"apiVersion\":\"v1\",\"fieldPath\":"
                "\"metadata.namespace\"}}]}}],\"defaultMode\":420}},{\"name\":\"work\","
                "\"emptyDir\":{\"sizeLimit\":\"1Gi\"}},{\"name\":\"tools\",\"configMap\":{\"name\":"
                "\"agent-tools\",\"defaultMode\":420}}],\"containers\":[");
    static const char *const ctr[] = {"agent", "proxy"};
    static const char *const req[] = {"\"cpu\":\"500m\",\"memory\":\"1Gi\"",
                                      "\"cpu\":\"50m\",\"memory\":\"64Mi\""};
    for (int c = 0; c < 2; c++) {
        buf_printf(b,
                   "%s{\"name\":\"%s\",\"image\":\"registry.example.com/agents/%s:1.4.2\","
                   "\"command\":[\"/bin/%s\"],\"args\":[\"--port=%d\",\"--session=$(SESSION)\"],"
                   "\"ports\":[{\"name\":\"http\",\"containerPort\":%d,\"protocol\":\"TCP\"}],"
                   "\"envFrom\":[{\"configMapRef\":{\"name\":\"agent-config\"}}],\"env\":[",
                   c ? "," : "", ctr[c], ctr[c], ctr[c], 8080 + c, 8080 + c);
        static const char *const env[] = {
            "SESSION",  "MODEL", "TOOLS_DIR", "LOG_LEVEL", "OTEL_EXPORTER_OTLP_ENDPOINT",
            "MAX_STEPS"};
        for (int e = 0; e < 6; e++)
            buf_printf(b, "{\"name\":\"%s\",\"value\":\"value-%d-%llu\"},", env[e], e, u);
        buf_puts(b, "{\"name\":\"POD_IP\",\"valueFrom\":{\"fieldRef\":{\"apiVersion\":\"v1\","
                    "\"fieldPath\":\"status.podIP\"}}},{\"name\":\"NODE_NAME\",\"valueFrom\":{"
                    "\"fieldRef\":{\"apiVersion\":\"v1\",\"fieldPath\":\"spec.nodeName\"}}}],");
        buf_printf(b, "\"resources\":{\"requests\":{%s},\"limits\":{\"memory\":\"2Gi\"}},", req[c]);
        buf_puts(b, "\"volumeMounts\":[{\"name\":\"work\",\"mountPath\":\"/work\"},{\"name\":"
                    "\"tools\",\"mountPath\":\"/tools\",\"readOnly\":true},{\"name\":"
                    "\"kube-api-access-x7k2p\",\"readOnly\":true,\"mountPath\":"
                    "\"/var/run/secrets/kubernetes.io/serviceaccount\"}],");
        static const char *const probe[] = {"livenessProbe", "readinessProbe"};
        for (int k = 0; k < 2; k++)
            buf_printf(b,
                       "\"%s\":{\"httpGet\":{\"path\":\"/healthz\",\"port\":%d,\"scheme\":"
                       "\"HTTP\"},\"initialDelaySeconds\":5,\"timeoutSeconds\":1,"
                       "\"periodSeconds\":10,\"successThreshold\":1,\"failureThreshold\":3},",
                       probe[k], 8080 + c);
        buf_puts(b, "\"terminationMessagePath\":\"/dev/termination-log\","
                    "\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfNotPresent\","
                    "\"securityContext\":{\"capabilities\":{\"drop\":[\"ALL\"]},"
                    "\"runAsNonRoot\":true,\"allowPrivilegeEscalation\":false}}");
    }
    buf_puts(b, "],\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,"
                "\"dnsPolicy\":\"ClusterFirst\",\"serviceAccountName\":\"agent\","
                "\"serviceAccount\":\"agent\",\"securityContext\":{\"fsGroup\":2000},"
                "\"schedulerName\":\"agent-scheduler\",\"tolerations\":[{\"key\":"
                "\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":"
                "\"NoExecute\",\"tolerationSeconds\":300},{\"key\":"
                "\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":"
                "\"NoExecute\",\"tolerationSeconds\":300}],\"priority\":0,"
                "\"enableServiceLinks\":true,\"preemptionPolicy\":\"PreemptLowerPriority\"},"
                "\"status\":{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\","
                "\"status\":\"False\",\"lastProbeTime\":null,\"lastTransitionTime\":"
                "\"2026-11-30T01:02:04Z\",\"reason\":\"Unschedulable\",\"message\":"
                "\"0/5000 nodes are available: 5000 Insufficient cpu. preemption: 0/5000 nodes "
                "are available: 5000 No preemption victims found for incoming pod.\"}],"
                "\"qosClass\":\"Burstable\"}}");
}

/* bench_names_tail returns (malloc'd) what follows the Pod in a NodeNames
 * body: ,"Nodes":null,"NodeNames":[500 names]} */
static inline char *bench_names_tail(void)
{
    buf b;
    buf_init(&b, 0);
    buf_puts(&b, ",\"Nodes\":null,\"NodeNames\":[");
    for (int i = 0; i < BENCH_NAMES; i++)
        buf_printf(&b, "%s\"node-%05d\"", i ? "," : "", (i * 7919) % BENCH_NODES);
    buf_puts(&b, "]}");
    char *out;
    size_t len;
    buf_take(&b, &out, &len);
    return out;
}

/* bench_pod_args writes {"Pod":<pod id><tail> into out; returns its length
 * (0 when it does not fit). */
static inline size_t bench_pod_args(char *out, size_t cap, uint64_t id, const char *tail)
{
    int n = snprintf(out, cap, "{\"Pod\":" BENCH_POD_FMT "%s", (unsigned long long)id,
                     (unsigned long long)id, tail);
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

/* bench_k8s_pod_args writes {"Pod":<bench_k8s_pod_json id><tail> into
 * out; returns its length (0 when it does not fit). */
static inline size_t bench_k8s_pod_args(char *out, size_t cap, uint64_t id, const char *tail)
{
    buf b;
    buf_init(&b, 0);
    buf_puts(&b, "{\"Pod\":");
    bench_k8s_pod_json(&b, id);
    buf_puts(&b, tail);
    size_t n = b.err || b.len >= cap ? 0 : b.len;
    if (n)
        memcpy(out, b.data, n + 1);
    buf_free(&b);
    return n;
}

/* bench_body_with returns (malloc'd) the NodeNames body of pod id as
 * args_fn (bench_pod_args or bench_k8s_pod_args) writes it; NULL on
 * failure. */
static inline char *bench_body_with(size_t (*args_fn)(char *, size_t, uint64_t, const char *),
                                    uint64_t id)
{
    char *tail = bench_names_tail();
    size_t cap = strlen(tail) + 16384;
    char *out = malloc(cap);
    if (out && !args_fn(out, cap, id, tail)) {
        free(out);
        out = NULL;
    }
    free(tail);
    return out;
}

/* bench_pod_body returns (malloc'd) the NodeNames body of pod id. */
static inline char *bench_pod_body(uint64_t id)
{
    return bench_body_with(bench_pod_args, id);
}

/* bench_k8s_pod_body is bench_pod_body with bench_k8s_pod_json's Pod. */
static inline char *bench_k8s_pod_body(uint64_t id)
{
    return bench_body_with(bench_k8s_pod_args, id);
}

/* bench_node_json appends node i as a v1.Node (every 10th tainted); full
 * adds what a real NodeList item also carries (conditions, addresses,
 * nodeInfo), as kube-scheduler sends with nodeCacheCapable: false. */
static inline void bench_node_json(buf *b, int i, bool full)
{
    buf_printf(b,
               "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"node-%05d\","
               "\"uid\":\"0000-%05d\",\"resourceVersion\":\"%d\",\"labels\":{"
               "\"kubernetes.io/hostname\":\"node-%05d\",\"kubernetes.io/arch\":\"amd64\","
               "\"kubernetes.io/os\":\"linux\",\"topology.kubernetes.io/zone\":\"zone-%d\","
               "\"node.kubernetes.io/instance-type\":\"m5.8xlarge\",\"pool\":\"agents\"}},"
               "\"spec\":{%s},\"status\":{\"capacity\":{\"cpu\":\"32\",\"memory\":\"128Gi\","
               "\"pods\":\"110\",\"ephemeral-storage\":\"200Gi\"},\"allocatable\":{\"cpu\":"
               "\"31500m\",\"memory\":\"125Gi\",\"pods\":\"110\",\"ephemeral-storage\":\"190Gi\"},"
               "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}",
               i, i, 1000 + i, i, i % 3,
               i % 10 == 0 ? "\"taints\":[{\"key\":\"dedicated\",\"value\":\"infra\","
                             "\"effect\":\"NoSchedule\"}]"
                           : "");
    if (full) {
        /* what a real NodeList item also carries */
        static const char *conds[] = {"MemoryPressure", "DiskPressure", "PIDPressure",
                                      "NetworkUnavailable"};
        for (int c = 0; c < 4; c++)
            buf_printf(b,
                       ",{\"type\":\"%s\",\"status\":\"False\",\"lastHeartbeatTime\":"
                       "\"2026-11-30T05:00:00Z\",\"lastTransitionTime\":\"2026-11-01T00:00:00Z\","
                       "\"reason\":\"KubeletHasSufficient\",\"message\":\"kubelet is fine\"}",
                       conds[c]);
        buf_printf(b,
                   "],\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.%d.%d\"},"
                   "{\"type\":\"Hostname\",\"address\":\"node-%05d\"}],\"daemonEndpoints\":{"
                   "\"kubeletEndpoint\":{\"Port\":10250}},\"nodeInfo\":{\"machineID\":"
                   "\"ec2b3f0c6a8e4d0f9b1f8f4c3a2d1e0f\",\"systemUUID\":"
                   "\"ec2b3f0c-6a8e-4d0f-9b1f-8f4c3a2d1e0f\",\"bootID\":"
                   "\"5d1c7a2b-9e3f-4b8a-8c6d-2f1e0a9b8c7d\",\"kernelVersion\":\"6.1.0-18\","
                   "\"osImage\":\"Debian GNU/Linux 12\",\"containerRuntimeVersion\":"
                   "\"containerd://1.7.13\",\"kubeletVersion\":\"v1.30.4\",\"kubeProxyVersion\":"
                   "\"v1.30.4\",\"operatingSystem\":\"linux\",\"architecture\":\"amd64\"}}}",
                   i / 256, i % 256, i);
    } else {
        buf_puts(b, "]}}");
    }
}

/* bench_node_upsert decodes one v1.Node JSON text into s's cache; exits
 * on failure, naming node i (a benchmark has nothing to recover). */
static inline void bench_node_upsert(svc *s, const char *json, size_t len, int i)
{
    json_t *j = json_loadb(json, len, 0, NULL);
    model_node *n = NULL;
    as_diag d = {{0}, {0}};
    if (!j || model_node_from_json(&s->core->reg, j, &n, &d) != AS_OK ||
        cache_node_upsert(s->core->cache, n) != AS_OK) {
        fprintf(stderr, "cannot build node %d: %s\n", i, d.msg);
        exit(1);
    }
    json_decref(j);
}

/* bench_load_cluster fills s's cache with BENCH_NODES nodes and marks it
 * ready; exits on failure. */
static inline void bench_load_cluster(svc *s)
{
    buf b;
    buf_init(&b, 0);
    for (int i = 0; i < BENCH_NODES; i++) {
        buf_reset(&b);
        bench_node_json(&b, i, false);
        bench_node_upsert(s, b.data, b.len, i);
    }
    buf_free(&b);
    __atomic_store_n(&s->core->ready, 1, __ATOMIC_RELEASE);
}

/* bench_nodes_body returns (malloc'd) a full-Nodes body: pod 7 and
 * BENCH_NAMES full Node objects (nodeCacheCapable: false). */
static inline char *bench_nodes_body(void)
{
    buf b;
    buf_init(&b, 0);
    char pod[1024];
    bench_pod_json(pod, sizeof pod, 7);
    buf_printf(&b, "{\"Pod\":%s,\"Nodes\":{\"metadata\":{},\"items\":[", pod);
    for (int i = 0; i < BENCH_NAMES; i++) {
        if (i)
            buf_puts(&b, ",");
        bench_node_json(&b, (i * 7919) % BENCH_NODES, true);
    }
    buf_puts(&b, "]},\"NodeNames\":null}");
    char *out;
    size_t len;
    buf_take(&b, &out, &len);
    return out;
}

/* bench_handler_cpu_ns runs fn iters times on body (NULL: GET without body) and
 * returns the CPU ns per call; the request pool and response buffer are
 * created per call, as the server does. */
static inline double bench_handler_cpu_ns(svc *s, http_handler_fn fn, const char *body, int iters)
{
    size_t len = body ? strlen(body) : 0;
    double t0 = bench_clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (int i = 0; i < iters; i++) {
        http_request req = {.method = body ? "POST" : "GET",
                            .path = "/",
                            .body = body ? body : "",
                            .body_len = len,
                            .pool = pool_new(0)};
        http_response resp = {.status = 200};
        buf_init(&resp.body, 0);
        fn(svc_handler_ctx(s, fn), &req, &resp);
        if (resp.status != 200) {
            fprintf(stderr, "handler answered %d: %.200s\n", resp.status, resp.body.data);
            exit(1);
        }
        buf_free(&resp.body);
        pool_free(req.pool);
    }
    return (bench_clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0) / iters;
}

#endif

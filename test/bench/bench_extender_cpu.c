/*
 * bench_extender_cpu.c - CPU cost of the extender verbs, in process, no
 * HTTP: the handler functions are called directly N times and the thread
 * CPU time per call is printed next to the server's own /healthz handler
 * measured in the same run (robust on a loaded machine; for exact,
 * repeatable figures run it under callgrind, e.g.
 *   valgrind --tool=callgrind --toggle-collect=extender_handle_filter \
 *       ./bench_extender_cpu 20 filter
 * and read the instruction count).
 *
 * Workload as bench_extender: 5000 nodes in the cache (every 10th tainted),
 * 500 NodeNames (filter, prioritize) or 500 full Node objects (filter).
 *
 * "cycle" runs what kube-scheduler sends per pod: filter, then prioritize
 * of the same Pod (answered from the filter's memo), a new pod each cycle.
 *
 * Usage: bench_extender_cpu [iterations] [all|filter|prioritize|cycle|nodes|healthz]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agentsched/buf.h"
#include "agentsched/cache.h"
#include "agentsched/extender.h"
#include "agentsched/log.h"
#include "agentsched/model.h"
#include "agentsched/pool.h"
#include "agentsched/svc.h"
#include "bench_bodies.h"

#define NODES BENCH_NODES
#define NAMES BENCH_NAMES

static void node_json(buf *b, int i, bool full)
{
    buf_printf(b,
               "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"node-%05d\","
               "\"uid\":\"0000-%05d\",\"labels\":{\"kubernetes.io/hostname\":\"node-%05d\","
               "\"topology.kubernetes.io/zone\":\"zone-%d\",\"pool\":\"agents\"}},"
               "\"spec\":{%s},\"status\":{\"allocatable\":{\"cpu\":\"31500m\",\"memory\":"
               "\"125Gi\",\"pods\":\"110\",\"ephemeral-storage\":\"190Gi\"},"
               "\"conditions\":[{\"type\":\"Ready\",\"status\":\"True\"}",
               i, i, i, i % 3,
               i % 10 == 0 ? "\"taints\":[{\"key\":\"dedicated\",\"value\":\"infra\","
                             "\"effect\":\"NoSchedule\"}]"
                           : "");
    if (full)
        buf_printf(b,
                   ",{\"type\":\"MemoryPressure\",\"status\":\"False\",\"lastHeartbeatTime\":"
                   "\"2026-11-30T05:00:00Z\",\"reason\":\"KubeletHasSufficientMemory\"}],"
                   "\"addresses\":[{\"type\":\"InternalIP\",\"address\":\"10.0.%d.%d\"}],"
                   "\"nodeInfo\":{\"kubeletVersion\":\"v1.30.4\",\"osImage\":\"Debian 12\"}}}",
                   i / 256, i % 256);
    else
        buf_puts(b, "]}}");
}

static void load_cluster(svc *s)
{
    buf b;
    buf_init(&b, 0);
    for (int i = 0; i < NODES; i++) {
        buf_reset(&b);
        node_json(&b, i, false);
        json_t *j = json_loadb(b.data, b.len, 0, NULL);
        model_node *n = NULL;
        as_diag d = {{0}, {0}};
        if (!j || model_node_from_json(&s->reg, j, &n, &d) != AS_OK ||
            cache_node_upsert(s->cache, n) != AS_OK) {
            fprintf(stderr, "cannot build node %d: %s\n", i, d.msg);
            exit(1);
        }
        json_decref(j);
    }
    buf_free(&b);
    __atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
}

static char *make_body(bool full)
{
    buf b;
    buf_init(&b, 0);
    if (full) {
        char pod[1024];
        bench_pod_json(pod, sizeof pod, 7);
        buf_printf(&b, "{\"Pod\":%s,\"Nodes\":{\"metadata\":{},\"items\":[", pod);
        for (int i = 0; i < NAMES; i++) {
            if (i)
                buf_puts(&b, ",");
            node_json(&b, (i * 7919) % NODES, true);
        }
        buf_puts(&b, "]},\"NodeNames\":null}");
    } else {
        buf_free(&b);
        return bench_pod_body(7);
    }
    char *out;
    size_t len;
    buf_take(&b, &out, &len);
    return out;
}

static double cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* per_call_ns runs fn iters times on body (NULL: GET without body) and
 * returns the CPU ns per call; the request pool and response buffer are
 * created per call, as the server does. */
static double per_call_ns(svc *s, http_handler_fn fn, const char *body, int iters)
{
    size_t len = body ? strlen(body) : 0;
    double t0 = cpu_ns();
    for (int i = 0; i < iters; i++) {
        http_request req = {.method = body ? "POST" : "GET",
                            .path = "/",
                            .body = body ? body : "",
                            .body_len = len,
                            .pool = pool_new(0)};
        http_response resp = {.status = 200};
        buf_init(&resp.body, 0);
        fn(s, &req, &resp);
        if (resp.status != 200) {
            fprintf(stderr, "handler answered %d: %.200s\n", resp.status, resp.body.data);
            exit(1);
        }
        buf_free(&resp.body);
        pool_free(req.pool);
    }
    return (cpu_ns() - t0) / iters;
}

/* per_cycle_ns runs kube-scheduler's cycle iters times: filter, then
 * prioritize with the same body, a different pod each cycle; returns the
 * CPU ns per cycle (two calls). */
static double per_cycle_ns(svc *s, char **bodies, int nbodies, int iters)
{
    double t = 0;
    for (int i = 0; i < iters; i++) {
        const char *b = bodies[i % nbodies];
        t += per_call_ns(s, extender_handle_filter, b, 1);
        t += per_call_ns(s, extender_handle_prioritize, b, 1);
    }
    return t / iters;
}

static http_handler_fn healthz_handler(void)
{
    size_t n = 0;
    const http_route *r = svc_routes(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(r[i].path, "/healthz") == 0)
            return r[i].fn;
    fprintf(stderr, "no /healthz route\n");
    exit(1);
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    const char *which = argc > 2 ? argv[2] : "all";
    if (iters <= 0)
        iters = 2000;
    log_set_level(LOG_ERROR);
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.log_level = 0;
    svc *s = NULL;
    as_diag d = {{0}, {0}};
    if (svc_new(&cfg, &s, &d) != AS_OK) {
        fprintf(stderr, "svc_new: %s\n", d.msg);
        return 1;
    }
    load_cluster(s);
    char *names = make_body(false);
    char *nodes = make_body(true);
    http_handler_fn hz = healthz_handler();
    bool all = strcmp(which, "all") == 0;

    /* warm up (caches, policy tables, allocator) */
    per_call_ns(s, extender_handle_filter, names, 5);
    per_call_ns(s, extender_handle_prioritize, names, 5);

    double base = per_call_ns(s, hz, NULL, all ? iters * 10 : iters);
    printf("%d nodes, %d names, %d iterations (CPU time per call)\n", NODES, NAMES, iters);
    printf("%-34s %10.0f ns\n", "/healthz handler (baseline)", base);
    if (all || strcmp(which, "filter") == 0) {
        double t = per_call_ns(s, extender_handle_filter, names, iters);
        printf("%-34s %10.0f ns  %.1fx baseline\n", "filter (500 NodeNames)", t, t / base);
    }
    if (all || strcmp(which, "prioritize") == 0) {
        double t = per_call_ns(s, extender_handle_prioritize, names, iters);
        printf("%-34s %10.0f ns  %.1fx baseline\n", "prioritize (500 NodeNames)", t, t / base);
    }
    if (all || strcmp(which, "cycle") == 0) {
        enum { NB = 64 };
        char *bodies[NB];
        for (int i = 0; i < NB; i++)
            bodies[i] = bench_pod_body((uint64_t)i);
        double t = per_cycle_ns(s, bodies, NB, iters);
        printf("%-34s %10.0f ns  %.1fx baseline (%.0f ns per call; the prioritize answered "
               "from the filter's memo)\n",
               "cycle: filter + prioritize", t, t / base, t / 2);
        for (int i = 0; i < NB; i++)
            free(bodies[i]);
    }
    if (all || strcmp(which, "nodes") == 0) {
        int it = all ? iters / 10 + 1 : iters;
        double t = per_call_ns(s, extender_handle_filter, nodes, it);
        printf("%-34s %10.0f ns  %.1fx baseline (%zu KB body)\n", "filter (500 Nodes)", t, t / base,
               strlen(nodes) / 1024);
    }
    free(names);
    free(nodes);
    svc_free(s);
    return 0;
}

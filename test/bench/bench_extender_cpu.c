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
 * "k8spod" is the filter with the Pod as kube-scheduler sends it from a real
 * cluster (bench_k8s_pod_json: env, volumes, probes, status; 4 KB).
 *
 * Usage: bench_extender_cpu [iterations] [all|filter|prioritize|cycle|k8spod|nodes|healthz]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agentsched/base/buf.h"
#include "agentsched/core/cache.h"
#include "agentsched/api/extender.h"
#include "agentsched/base/log.h"
#include "agentsched/base/pool.h"
#include "agentsched/serve/svc.h"
#include "bench_clock.h"
#include "bench_bodies.h"

#define NODES BENCH_NODES
#define NAMES BENCH_NAMES

/* per_cycle_ns runs kube-scheduler's cycle iters times: filter, then
 * prioritize with the same body, a different pod each cycle; returns the
 * CPU ns per cycle (two calls). */
static double per_cycle_ns(svc *s, char **bodies, int nbodies, int iters)
{
    double t = 0;
    for (int i = 0; i < iters; i++) {
        const char *b = bodies[i % nbodies];
        t += bench_handler_cpu_ns(s, extender_handle_filter, b, 1);
        t += bench_handler_cpu_ns(s, extender_handle_prioritize, b, 1);
    }
    return t / iters;
}

static http_handler_fn healthz_handler(svc *s)
{
    size_t n = 0;
    const http_route *r = svc_routes(s, &n);
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
    bench_load_cluster(s);
    char *names = bench_pod_body(7);
    char *nodes = bench_nodes_body();
    http_handler_fn hz = healthz_handler(s);
    bool all = strcmp(which, "all") == 0;

    /* warm up (caches, policy tables, allocator) */
    bench_handler_cpu_ns(s, extender_handle_filter, names, 5);
    bench_handler_cpu_ns(s, extender_handle_prioritize, names, 5);

    double base = bench_handler_cpu_ns(s, hz, NULL, all ? iters * 10 : iters);
    printf("%d nodes, %d names, %d iterations (CPU time per call)\n", NODES, NAMES, iters);
    printf("%-34s %10.0f ns\n", "/healthz handler (baseline)", base);
    if (all || strcmp(which, "filter") == 0) {
        double t = bench_handler_cpu_ns(s, extender_handle_filter, names, iters);
        printf("%-34s %10.0f ns  %.1fx baseline\n", "filter (500 NodeNames)", t, t / base);
    }
    if (all || strcmp(which, "prioritize") == 0) {
        double t = bench_handler_cpu_ns(s, extender_handle_prioritize, names, iters);
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
    if (all || strcmp(which, "k8spod") == 0) {
        char *body = bench_k8s_pod_body(7);
        buf pod;
        buf_init(&pod, 0);
        bench_k8s_pod_json(&pod, 7);
        double t = bench_handler_cpu_ns(s, extender_handle_filter, body, iters);
        printf("%-34s %10.0f ns  %.1fx baseline (the Pod as kube-scheduler sends it, %zu B)\n",
               "filter (500 NodeNames, real Pod)", t, t / base, pod.len);
        buf_free(&pod);
        free(body);
    }
    if (all || strcmp(which, "nodes") == 0) {
        int it = all ? iters / 10 + 1 : iters;
        double t = bench_handler_cpu_ns(s, extender_handle_filter, nodes, it);
        printf("%-34s %10.0f ns  %.1fx baseline (%zu KB body)\n", "filter (500 Nodes)", t, t / base,
               strlen(nodes) / 1024);
    }
    free(names);
    free(nodes);
    svc_free(s);
    return 0;
}

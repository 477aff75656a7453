/*
 * bench_placement.c - cost of a dry-run placement relative to plain
 * decisions, measured in one run, in one process.
 *
 * A generated cache of NODES nodes (mixed sizes, a few with GPUs, some
 * tainted) and PODS pods of mixed shapes. Baseline: sched_evaluate of every
 * pod against the unchanged cache (what the extender does per pod). Then
 * placement_run of the same pods in one request (each pod sees the earlier
 * ones through the private overlay), and placement_eval of the same request
 * as a JSON body (adds parsing and decoding). Prints per-pod times and the
 * ratios to the baseline; the overlay should stay a small constant factor.
 *
 * Usage: bench_placement [nodes] [pods]   (default 5000 nodes, 500 pods)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agentsched/base/buf.h"
#include "agentsched/core/cache.h"
#include "agentsched/base/log.h"
#include "agentsched/api/placement.h"
#include "agentsched/core/sched.h"
#include "agentsched/serve/svc.h"
#include "bench_bodies.h"
#include "bench_clock.h"

static void add_nodes(svc *s, int n)
{
    static const int cpus[] = {8, 16, 32, 64};
    static const int mems[] = {32, 64, 128, 256};
    for (int i = 0; i < n; i++) {
        char js[1024];
        bool gpu = i % 10 == 0;
        snprintf(js, sizeof js,
                 "{\"metadata\":{\"name\":\"node-%05d\",\"labels\":{\"zone\":\"z%d\"}},"
                 "\"spec\":{%s},\"status\":{\"allocatable\":{\"cpu\":\"%d\",\"memory\":\"%dGi\","
                 "\"pods\":\"110\"%s}}}",
                 i, i % 3,
                 i % 17 == 0 ? "\"taints\":[{\"key\":\"dedicated\",\"value\":\"x\","
                               "\"effect\":\"NoSchedule\"}]"
                             : "",
                 cpus[i % 4], mems[(i / 4) % 4], gpu ? ",\"nvidia.com/gpu\":\"8\"" : "");
        bench_node_upsert(s, js, strlen(js), i);
    }
}

static void pods_body(buf *b, int n)
{
    buf_puts(b, "{\"candidates\":3,\"pods\":[");
    for (int i = 0; i < n; i++) {
        int shape = i % 5;
        buf_printf(b,
                   "%s{\"metadata\":{\"name\":\"agent-%d\",\"namespace\":\"bench\"},\"spec\":{"
                   "%s\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"%s\","
                   "\"memory\":\"%s\"}%s}}]}}",
                   i ? "," : "", i, shape == 4 ? "\"nodeSelector\":{\"zone\":\"z1\"}," : "",
                   shape == 0   ? "500m"
                   : shape == 1 ? "2"
                                : "1",
                   shape == 2 ? "8Gi" : "1Gi",
                   shape == 3 ? ",\"limits\":{\"nvidia.com/gpu\":\"1\"}" : "");
    }
    buf_puts(b, "]}");
}

int main(int argc, char **argv)
{
    int nnodes = argc > 1 ? atoi(argv[1]) : 5000;
    int npods = argc > 2 ? atoi(argv[2]) : 500;
    if (nnodes <= 0 || npods <= 0 || npods > PLACEMENT_MAX_PODS) {
        fprintf(stderr, "usage: bench_placement [nodes] [pods<=%d]\n", PLACEMENT_MAX_PODS);
        return 2;
    }
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.log_level = 0;
    svc *s = NULL;
    as_diag d = {{0}, {0}};
    if (svc_new(&cfg, &s, &d) != AS_OK) {
        fprintf(stderr, "bench_placement: %s\n", d.msg);
        return 1;
    }
    log_set_level(LOG_ERROR);
    add_nodes(s, nnodes);

    buf body;
    buf_init(&body, 0);
    pods_body(&body, npods);
    json_t *req = json_loadb(body.data, body.len, 0, NULL);
    model_pod **pods = NULL;
    size_t n = 0;
    uint32_t k = 0;
    if (!req || placement_request_decode(&s->core->reg, req, 3, &pods, &n, &k, &d) != AS_OK) {
        fprintf(stderr, "bench_placement: request: %s: %s\n", d.field, d.msg);
        return 1;
    }
    score_policy *pol = core_policy_get(s->core);

    /* Baseline: one plain decision per pod, nothing carried over. */
    double t0 = bench_now_s();
    for (size_t i = 0; i < n; i++) {
        sched_request r = {.pod = pods[i], .policy = pol, .k = k};
        sched_result res;
        sched_evaluate(s->core->cache, &r, &res);
        sched_result_free(&res);
    }
    double base = bench_now_s() - t0;

    buf out;
    buf_init(&out, 0);
    t0 = bench_now_s();
    as_err err = placement_run(s->core->cache, pol, (const model_pod *const *)pods, n, k, &out);
    double run = bench_now_s() - t0;
    size_t placed = n;
    for (const char *p = out.data; p && (p = strstr(p, "\"node\":null")); p++)
        placed--;

    buf_reset(&out);
    t0 = bench_now_s();
    as_err err2 = placement_eval(s->core, body.data, body.len, &out, &d);
    double eval = bench_now_s() - t0;
    if (err || err2) {
        fprintf(stderr, "bench_placement: %s / %s\n", as_strerror(err), as_strerror(err2));
        return 1;
    }

    printf("bench_placement: %d nodes, %zu pods (%zu placed)\n", nnodes, n, placed);
    printf("  sched_evaluate per pod (baseline): %8.3f ms\n", base * 1e3 / (double)n);
    printf("  placement_run per pod (overlay):   %8.3f ms  ratio %.2fx\n", run * 1e3 / (double)n,
           run / base);
    printf("  placement_eval per pod (+JSON):    %8.3f ms  ratio %.2fx\n", eval * 1e3 / (double)n,
           eval / base);

    buf_free(&out);
    buf_free(&body);
    score_policy_unref(pol);
    placement_pods_free(pods, n);
    json_decref(req);
    svc_free(s);
    return 0;
}

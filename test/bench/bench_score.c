/*
 * bench_score.c - decisions/s of each scoring strategy on one GPU cluster,
 * in the same run: does packing quality cost decision speed?
 *
 * The cluster (deterministic): N nodes (default 5000), three in five with
 * GPUs (8, 4 or 2 devices of two models, 96/64/32 cpu), the rest CPU-only;
 * filled by least-allocated with a pod mix until about 60% of the GPUs are
 * allocated, so devices are partly used. The decided pods: 256 of the same
 * mix (CPU-only 30%, GPU shares of 100..900 milli 40%, one whole GPU 25%,
 * 2, 4 or 8 GPUs 5%), each policy having observed the fill pods (fgd's
 * and fragment's learned tables). Each decision is sched_evaluate over
 * every node (K = 1, no early stop), nothing committed, so every strategy
 * decides the same pods on the same state; strategies take turns in
 * short rounds so machine noise hits all alike.
 *
 *   bench_score [nodes] [seconds-per-strategy] [POLICY.yaml]   (defaults 5000, 2)
 *
 * A policy file adds a row "candidate" (e.g. fragment with other weights),
 * measured in the same rounds, so its cost is compared in one run.
 *
 * Prints decisions/s per strategy and fragment's as a ratio of
 * least-allocated's (the target: at least 0.8). Only ratios measured in
 * one run are meaningful; the machine is shared.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/core/binder.h"
#include "agentsched/core/cache.h"
#include "agentsched/core/policy.h"
#include "agentsched/core/sched.h"
#include "agentsched/core/score.h"
#include "agentsched/model/node.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"
#include "bench_clock.h"

#define NPODS   256
#define ROUND_S 0.05

static const char *const strategies[] = {
    "least-allocated", "most-allocated", "best-fit", "balanced-allocation", "fgd", "fragment"};
#define NSTRAT (sizeof strategies / sizeof strategies[0])
#define FRAG   5
#define LEAST  0

static model_node *node_json(model_registry *reg, int i, unsigned *seed)
{
    char name[32], cpu[16], mem[16], gpus[8];
    int kind = rand_r(seed) % 5, ngpu = 0, ncpu = 32;
    if (kind < 3) {
        static const int g[] = {8, 4, 2}, c[] = {96, 64, 32};
        int k = rand_r(seed) % 3;
        ngpu = g[k];
        ncpu = c[k];
    }
    snprintf(name, sizeof name, "node-%05d", i);
    snprintf(cpu, sizeof cpu, "%d", ncpu);
    snprintf(mem, sizeof mem, "%dGi", ncpu * 8);
    snprintf(gpus, sizeof gpus, "%d", ngpu);
    json_t *alloc = json_pack("{s:s, s:s, s:s}", "cpu", cpu, "memory", mem, "pods", "110");
    if (ngpu)
        json_object_set_new(alloc, reg->gpu_name, json_string(gpus));
    json_t *labels = json_object();
    if (ngpu)
        json_object_set_new(labels, reg->gpu_model_label, json_string(i % 2 ? "A100" : "V100"));
    json_t *obj =
        json_pack("{s:s, s:s, s:{s:s, s:o}, s:{s:o}}", "apiVersion", "v1", "kind", "Node",
                  "metadata", "name", name, "labels", labels, "status", "allocatable", alloc);
    model_node *n = NULL;
    as_diag d = {{0}, {0}};
    if (!obj || model_node_from_json(reg, obj, &n, &d)) {
        fprintf(stderr, "bench_score: node %s: %s\n", name, d.msg);
        exit(1);
    }
    json_decref(obj);
    return n;
}

/* One pod of the mix; uid and name from i. */
static model_pod *pod_json(model_registry *reg, int i, unsigned *seed)
{
    char name[32], cpu[16], mem[16], gpu[16];
    int r = rand_r(seed) % 100;
    snprintf(name, sizeof name, "pod-%07d", i);
    snprintf(cpu, sizeof cpu, "%dm", 500 + rand_r(seed) % 7500);
    snprintf(mem, sizeof mem, "%dMi", 1024 + rand_r(seed) % 31744);
    json_t *req = json_pack("{s:s, s:s}", "cpu", cpu, "memory", mem);
    if (r >= 30 && r < 70) {
        snprintf(gpu, sizeof gpu, "%d", 100 + 100 * (rand_r(seed) % 9));
        json_object_set_new(req, reg->gpu_share_name, json_string(gpu));
    } else if (r >= 70) {
        static const int multi[] = {2, 4, 8};
        snprintf(gpu, sizeof gpu, "%d", r < 95 ? 1 : multi[rand_r(seed) % 3]);
        json_object_set_new(req, reg->gpu_name, json_string(gpu));
    }
    json_t *obj = json_pack(
        "{s:s, s:s, s:{s:s, s:s, s:s}, s:{s:s, s:[{s:s, s:{s:o}}]}}", "apiVersion", "v1", "kind",
        "Pod", "metadata", "name", name, "namespace", "bench", "uid", name, "spec", "schedulerName",
        "agent-scheduler", "containers", "name", "main", "resources", "requests", req);
    model_pod *p = NULL;
    as_diag d = {{0}, {0}};
    if (!obj || model_pod_from_json(reg, obj, &p, &d)) {
        fprintf(stderr, "bench_score: pod %s: %s\n", name, d.msg);
        exit(1);
    }
    json_decref(obj);
    return p;
}

int main(int argc, char **argv)
{
    int nnodes = argc > 1 ? atoi(argv[1]) : 5000;
    double secs = argc > 2 ? atof(argv[2]) : 2.0;
    const char *cand = argc > 3 ? argv[3] : NULL;
    if (nnodes < 10 || nnodes > 100000 || !(secs > 0) || argc > 4) {
        fprintf(stderr,
                "usage: bench_score [nodes 10..100000] [seconds-per-strategy] [POLICY.yaml]\n");
        return 2;
    }
    size_t nstrat = NSTRAT + (cand != NULL);
    const char *names[NSTRAT + 1];
    unsigned seed = 42;
    model_registry reg;
    model_registry_init(&reg);
    cache *c = NULL;
    binder *b = NULL;
    score_policy *pol[NSTRAT + 1];
    if (cache_new(&reg, &c) || binder_new(c, NULL, &b))
        return 1;
    for (size_t s = 0; s < NSTRAT; s++) {
        score_strategy st;
        names[s] = strategies[s];
        if (score_strategy_parse(strategies[s], &st) ||
            score_policy_new_strategy(&reg, st, &pol[s]) ||
            score_policy_apply_gpu_names(pol[s], &reg))
            return 1;
    }
    if (cand) {
        as_diag d = {{0}, {0}};
        names[NSTRAT] = "candidate";
        if (score_policy_load(&reg, cand, &pol[NSTRAT], &d) ||
            score_policy_apply_gpu_names(pol[NSTRAT], &reg)) {
            fprintf(stderr, "bench_score: %s: %s\n", cand, d.msg);
            return 2;
        }
    }
    int64_t gpus = 0;
    for (int i = 0; i < nnodes; i++) {
        model_node *n = node_json(&reg, i, &seed);
        gpus += n->ngpus;
        if (cache_node_upsert(c, n))
            return 1;
    }
    /* Fill to about 60% of the GPUs with least-allocated (spreading, so
     * devices end up partly used across the cluster). */
    int64_t galloc = 0, filled = 0;
    sched_result res;
    sched_result_init(&res);
    for (int i = 0; galloc < gpus * 600 && i < nnodes * 40; i++) {
        model_pod *p = pod_json(&reg, i, &seed);
        for (size_t s = 0; s < nstrat; s++)
            score_observe_pod(pol[s], p);
        sched_request rq = {.pod = p, .policy = pol[LEAST], .k = 1};
        sched_result_free(&res);
        sched_result_init(&res);
        binder_outcome bo;
        if (!sched_evaluate(c, &rq, &res) && res.ncand &&
            binder_commit(b, p, res.cand, res.ncand, &bo) == AS_OK && bo.chosen >= 0) {
            galloc += (int64_t)p->gpu_count * p->gpu_milli;
            filled++;
        }
        model_pod_free(p);
    }
    model_pod *pods[NPODS];
    for (int i = 0; i < NPODS; i++)
        pods[i] = pod_json(&reg, 10000000 + i, &seed);
    printf("bench_score: %d nodes, %lld GPUs, %lld pods placed, GPU allocation %.2f; "
           "%d pods decided over every node (K = 1), %.1f s per strategy\n",
           nnodes, (long long)gpus, (long long)filled, (double)galloc / (double)(gpus * 1000),
           NPODS, secs);

    double cpu_s[NSTRAT + 1] = {0};
    uint64_t decisions[NSTRAT + 1] = {0};
    int next[NSTRAT + 1] = {0};
    for (double done = 0; done < secs; done += ROUND_S)
        for (size_t s = 0; s < nstrat; s++) {
            double t0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID), t = t0;
            while (t - t0 < ROUND_S) {
                for (int k = 0; k < 8; k++) {
                    sched_request rq = {.pod = pods[next[s]], .policy = pol[s], .k = 1};
                    sched_result_free(&res);
                    sched_result_init(&res);
                    if (sched_evaluate(c, &rq, &res))
                        return 1;
                    next[s] = (next[s] + 1) % NPODS;
                    decisions[s]++;
                }
                t = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
            }
            cpu_s[s] += t - t0;
        }
    printf("%-20s %12s %14s %8s\n", "strategy", "decisions/s", "us/decision", "ratio");
    double base = (double)decisions[LEAST] / cpu_s[LEAST];
    for (size_t s = 0; s < nstrat; s++) {
        double dps = (double)decisions[s] / cpu_s[s];
        printf("%-20s %12.0f %14.1f %8.3f\n", names[s], dps, 1e6 / dps, dps / base);
    }
    double ratio = ((double)decisions[FRAG] / cpu_s[FRAG]) / base;
    printf("target: fragment's decisions/s at least 0.8 x least-allocated's (CPU time): %.3f, "
           "%s\n",
           ratio, ratio >= 0.8 ? "met" : "MISSED");
    sched_result_free(&res);
    for (int i = 0; i < NPODS; i++)
        model_pod_free(pods[i]);
    for (size_t s = 0; s < nstrat; s++)
        score_policy_unref(pol[s]);
    binder_free(b);
    cache_free(c);
    model_registry_destroy(&reg);
    return 0;
}

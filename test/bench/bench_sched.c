/*
 * bench_sched.c - decisions/s of sched_evaluate (in place, top-K) at 500,
 * 5000 and 50000 nodes with 1, 2 and 4 worker threads, against a naive
 * single-thread full scan measured in the same run: per decision it copies
 * the cluster's node state (as snapshot-based schedulers do), filters and
 * scores every node and sorts all feasible nodes.
 *
 * "kube-pct" is one worker with the early stop at kube-scheduler's default
 * number of feasible nodes (sched_request.max_feasible).
 *
 * Also reports a full decision cycle (evaluate + binder_commit +
 * binder_release) on one thread, and the RSS of the cache.
 *
 *   bench_sched [seconds-per-run]   (default 0.3)
 *
 * Only ratios measured in one run are meaningful; the machine is shared.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agentsched/core/binder.h"
#include "agentsched/core/cache.h"
#include "agentsched/core/pred.h"
#include "agentsched/core/sched.h"
#include "agentsched/core/score.h"
#include "bench_clock.h"

#define GI    ((int64_t)1 << 30)
#define NPODS 256

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

static model_node *make_node(int i, unsigned *seed)
{
    pool *p = pool_new(0);
    model_node *n = pool_alloc(p, sizeof *n);
    n->pool = p;
    char name[64];
    snprintf(name, sizeof name, "node-%06d", i);
    n->name = pool_strdup(p, name);
    n->uid = n->resource_version = "";
    static const int64_t cpus[] = {8000, 16000, 32000, 64000};
    int sz = rand_r(seed) % 4;
    n->alloc.v[MODEL_RES_CPU] = cpus[sz];
    n->alloc.v[MODEL_RES_MEMORY] = cpus[sz] / 1000 * 4 * GI;
    n->alloc.v[MODEL_RES_EPHEMERAL] = 100 * GI;
    n->alloc.v[MODEL_RES_PODS] = 110;
    n->capacity = n->alloc;
    n->ready = true;
    model_kv *kv = pool_alloc(p, 2 * sizeof *kv);
    kv[0] = (model_kv){"kubernetes.io/os", "linux"};
    kv[1] = (model_kv){"topology.kubernetes.io/zone", (i % 3) ? "zone-a" : "zone-b"};
    n->labels = (model_labels){kv, 2};
    if (rand_r(seed) % 10 == 0) {
        model_taint *t = pool_alloc(p, sizeof *t);
        *t = (model_taint){"dedicated", "batch", MODEL_EFFECT_NO_SCHEDULE};
        n->taints = t;
        n->ntaints = 1;
    }
    return n;
}

static model_pod *make_pod(int i, unsigned *seed, int64_t cpu, int64_t mem)
{
    pool *p = pool_new(0);
    model_pod *pod = pool_alloc(p, sizeof *pod);
    pod->pool = p;
    char name[64];
    snprintf(name, sizeof name, "agent-%d", i);
    pod->ns = "default";
    pod->name = pool_strdup(p, name);
    pod->uid = pool_strdup(p, name);
    pod->resource_version = "";
    pod->scheduler_name = "agent-scheduler";
    pod->req.v[MODEL_RES_CPU] = cpu;
    pod->req.v[MODEL_RES_MEMORY] = mem;
    pod->req.v[MODEL_RES_PODS] = 1;
    pod->req_mask = 1u << MODEL_RES_CPU | 1u << MODEL_RES_MEMORY | 1u << MODEL_RES_PODS;
    if (rand_r(seed) % 4 == 0) {
        model_kv *kv = pool_alloc(p, sizeof *kv);
        *kv = (model_kv){"topology.kubernetes.io/zone", "zone-a"};
        pod->node_selector = (model_labels){kv, 1};
    }
    return pod;
}

typedef struct world {
    model_registry reg;
    cache *c;
    score_policy *pol;
    model_pod *pods[NPODS];
} world;

static void world_build(world *w, int nnodes)
{
    unsigned seed = 42;
    model_registry_init(&w->reg);
    cache_new(&w->reg, &w->c);
    score_policy_new_default(&w->reg, &w->pol);
    for (int i = 0; i < nnodes; i++)
        cache_node_upsert(w->c, make_node(i, &seed));
    /* ~half full: running pods on every node */
    for (int i = 0; i < nnodes * 4; i++) {
        model_pod *p =
            make_pod(1000000 + i, &seed, 500 + rand_r(&seed) % 3000, (1 + rand_r(&seed) % 8) * GI);
        char node[64];
        snprintf(node, sizeof node, "node-%06d", i % nnodes);
        p->node_name = node;
        cache_pod_upsert(w->c, p);
        p->node_name = NULL;
        model_pod_free(p);
    }
    for (int i = 0; i < NPODS; i++)
        w->pods[i] =
            make_pod(i, &seed, 100 + rand_r(&seed) % 1900, (128 + rand_r(&seed) % 4096) << 20);
}

static void world_free(world *w)
{
    for (int i = 0; i < NPODS; i++)
        model_pod_free(w->pods[i]);
    score_policy_unref(w->pol);
    cache_free(w->c);
    model_registry_destroy(&w->reg);
}

/* ---- naive baseline ---------------------------------------------- */

typedef struct snap_node {
    cache_node copy; /* deep copy of the node's live state */
    double score;
} snap_node;

static int cmp_snap(const void *a, const void *b)
{
    const snap_node *x = *(snap_node *const *)a, *y = *(snap_node *const *)b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return strcmp(x->copy.spec->name, y->copy.spec->name);
}

static size_t naive_decide(world *w, const model_pod *pod, snap_node *snap, snap_node **feas)
{
    cache_read_lock(w->c);
    size_t n = cache_node_count(w->c);
    for (size_t i = 0; i < n; i++) {
        const cache_node *src = cache_node_at(w->c, i);
        snap[i].copy = *src;
        for (int r = 0; r < MODEL_MAX_RES; r++)
            snap[i].copy.requested[r] = cache_node_requested(src, r);
    }
    cache_read_unlock(w->c);
    size_t nf = 0;
    for (size_t i = 0; i < n; i++) {
        if (pred_check(&w->reg, CACHE_SHARD_NONE, pod, &snap[i].copy).code != PRED_OK)
            continue;
        snap[i].score = score_node(w->pol, pod, &snap[i].copy);
        feas[nf++] = &snap[i];
    }
    qsort(feas, nf, sizeof feas[0], cmp_snap);
    return nf;
}

/* kube_feasible mirrors kube-scheduler's numFeasibleNodesToFind with the
 * adaptive default percentage (50% - nodes/125, at least 5%; min 100). */
static uint32_t kube_feasible(int n)
{
    if (n < 100)
        return 0;
    int pct = 50 - n / 125;
    if (pct < 5)
        pct = 5;
    int k = n * pct / 100;
    return (uint32_t)(k < 100 ? 100 : k);
}

/* ---- threaded runs ----------------------------------------------- */

typedef struct run_arg {
    world *w;
    double secs;
    int tid;
    uint64_t decisions;
    uint64_t feasible;
    double cpu; /* thread CPU seconds used */
    uint32_t max_feasible;
} run_arg;

static void *run_evaluate(void *argp)
{
    run_arg *a = argp;
    double c0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
    double end = bench_now_s() + a->secs;
    uint64_t k = (uint64_t)a->tid * 7;
    while (bench_now_s() < end) {
        for (int i = 0; i < 16; i++) {
            sched_request req = {.pod = a->w->pods[k++ % NPODS],
                                 .policy = a->w->pol,
                                 .k = 3,
                                 .max_feasible = a->max_feasible,
                                 .start = (uint32_t)(k * 2654435761u)};
            sched_result r;
            sched_evaluate(a->w->c, &req, &r);
            a->feasible += r.ncand > 0;
            sched_result_free(&r);
            a->decisions++;
        }
    }
    a->cpu = bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    return NULL;
}

/* rate_threads returns wall-clock decisions/s of all threads together;
 * *per_cpu receives decisions per CPU-second of one worker (what one core
 * sustains when it is not shared). */
static double rate_threads(world *w, int threads, double secs, double *per_cpu,
                           uint32_t max_feasible)
{
    pthread_t th[8];
    run_arg args[8];
    double t0 = bench_now_s();
    for (int t = 0; t < threads; t++) {
        args[t] = (run_arg){w, secs, t, 0, 0, 0, max_feasible};
        pthread_create(&th[t], NULL, run_evaluate, &args[t]);
    }
    uint64_t total = 0;
    double cpu = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(th[t], NULL);
        total += args[t].decisions;
        cpu += args[t].cpu;
    }
    if (per_cpu)
        *per_cpu = cpu > 0 ? (double)total / cpu : 0;
    return (double)total / (bench_now_s() - t0);
}

static double rate_naive(world *w, double secs, double *per_cpu)
{
    size_t n = cache_node_count(w->c);
    snap_node *snap = malloc(n * sizeof *snap);
    snap_node **feas = malloc(n * sizeof *feas);
    uint64_t count = 0, k = 0;
    double c0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
    double t0 = bench_now_s(), end = t0 + secs;
    while (bench_now_s() < end) {
        naive_decide(w, w->pods[k++ % NPODS], snap, feas);
        count++;
    }
    double rate = (double)count / (bench_now_s() - t0);
    *per_cpu = (double)count / (bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - c0);
    free(snap);
    free(feas);
    return rate;
}

static double rate_cycle(world *w, double secs)
{
    double c0 = bench_clock_s(CLOCK_THREAD_CPUTIME_ID);
    binder *b;
    binder_new(w->c, NULL, &b);
    uint64_t count = 0, k = 0;
    double t0 = bench_now_s(), end = t0 + secs;
    while (bench_now_s() < end) {
        const model_pod *pod = w->pods[k++ % NPODS];
        sched_request req = {.pod = pod, .policy = w->pol, .k = 3};
        sched_result r;
        sched_evaluate(w->c, &req, &r);
        binder_outcome o;
        if (binder_commit(b, pod, r.cand, r.ncand, &o) == AS_OK)
            binder_release(b, pod->uid);
        sched_result_free(&r);
        count++;
    }
    (void)t0;
    double rate = (double)count / (bench_clock_s(CLOCK_THREAD_CPUTIME_ID) - c0);
    binder_free(b);
    return rate;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 0.3;
    if (secs <= 0)
        secs = 0.3;
    static const int sizes[] = {500, 5000, 50000};
    printf("bench_sched: sched_evaluate decisions (K=3, full scan) vs a naive snapshot+scan+sort,"
           " %.2fs per run, %ld online CPUs\n",
           secs, sysconf(_SC_NPROCESSORS_ONLN));
    printf("per CPU-second of one worker (robust on a shared machine), then wall-clock with 1/2/4 "
           "workers\n");
    printf("%7s %11s %11s %8s %11s %11s | %10s %10s %10s %7s %7s | %9s\n", "nodes", "naive/cpu",
           "eval/cpu", "x naive", "eval+bind", "kube-pct", "1w wall", "2w wall", "4w wall", "2w/1w",
           "4w/1w", "cache MiB");
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        world w;
        long rss0 = rss_kb();
        world_build(&w, sizes[s]);
        long rss1 = rss_kb();
        double naive_cpu, r1_cpu;
        rate_naive(&w, secs, &naive_cpu);
        double r1 = rate_threads(&w, 1, secs, &r1_cpu, 0);
        double r2 = rate_threads(&w, 2, secs, NULL, 0);
        double r4 = rate_threads(&w, 4, secs, NULL, 0);
        double sampled_cpu;
        rate_threads(&w, 1, secs, &sampled_cpu, kube_feasible(sizes[s]));
        double cyc = rate_cycle(&w, secs);
        printf("%7d %11.0f %11.0f %7.2fx %11.0f %11.0f | %10.0f %10.0f %10.0f %6.2fx %6.2fx | "
               "%9.1f\n",
               sizes[s], naive_cpu, r1_cpu, r1_cpu / naive_cpu, cyc, sampled_cpu, r1, r2, r4,
               r2 / r1, r4 / r1, (rss1 - rss0) / 1024.0);
        fflush(stdout);
        world_free(&w);
    }
    return 0;
}

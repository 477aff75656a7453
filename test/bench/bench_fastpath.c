/*
 * bench_fastpath.c - the standalone fast path in process (no API server):
 *
 * 1. Throughput: decisions/s through the whole fast path (queue pop,
 *    evaluation, binder_commit, the bind stage with an instant fake API
 *    bind that then releases the pod so the cluster stays as full as it
 *    started) at 500, 5000 and 50000 nodes with 1, 2 and 4 workers (the
 *    eq path's: the median of ROUNDS interleaved runs of each), for
 *    the equivalence-cache path (eqcache.h, the default) and the previous
 *    path (sched_evaluate per decision, early stop above 5000 nodes),
 *    against a naive single-thread full scan measured in the same run
 *    (per decision: copy every node's state, filter and score all nodes,
 *    sort the feasible ones, assume the best, release it). Pods come from
 *    SHAPES templates (agent pods are stamped from a few manifests); a last
 *    table repeats 5000 nodes with every pod a distinct shape (the worst
 *    case: no class is ever reused). Each run first decides 512 pods
 *    unmeasured (warm-up: classes built, learned tables settled); the
 *    measured pods are built before the clock starts.
 * 2. Conflicts: a cluster at 90% cpu utilisation receives a burst of pods;
 *    for workers 1..8 and K 1..5 prints the share of decisions requeued
 *    because the binder refused every candidate, and asserts that no node
 *    is overcommitted (exit status 1 otherwise).
 *
 *   bench_fastpath [seconds-per-run [nodes [workers]]]
 *       default 0.4 s; with nodes, only that row of table 1; with workers
 *       too, only one eq run at that worker count (for profilers)
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
#include "agentsched/fastpath/fastpath.h"
#include "agentsched/base/log.h"
#include "agentsched/core/pred.h"
#include "agentsched/core/sched.h"
#include "agentsched/core/score.h"
#include "agentsched/serve/svc.h"
#include "bench_clock.h"

#define GI ((int64_t)1 << 30)

static model_node *make_node(int i, int64_t cpu, unsigned *seed, bool taints)
{
    pool *p = pool_new(0);
    model_node *n = pool_alloc(p, sizeof *n);
    n->pool = p;
    char name[64];
    snprintf(name, sizeof name, "node-%06d", i);
    n->name = pool_strdup(p, name);
    n->uid = n->resource_version = "";
    n->alloc.v[MODEL_RES_CPU] = cpu;
    n->alloc.v[MODEL_RES_MEMORY] = cpu / 1000 * 4 * GI;
    n->alloc.v[MODEL_RES_EPHEMERAL] = 100 * GI;
    n->alloc.v[MODEL_RES_PODS] = 110;
    n->capacity = n->alloc;
    n->ready = true;
    model_kv *kv = pool_alloc(p, 2 * sizeof *kv);
    kv[0] = (model_kv){"kubernetes.io/os", "linux"};
    kv[1] = (model_kv){"topology.kubernetes.io/zone", (i % 3) ? "zone-a" : "zone-b"};
    n->labels = (model_labels){kv, 2};
    if (taints && rand_r(seed) % 10 == 0) {
        model_taint *t = pool_alloc(p, sizeof *t);
        *t = (model_taint){"dedicated", "batch", MODEL_EFFECT_NO_SCHEDULE};
        n->taints = t;
        n->ntaints = 1;
    }
    return n;
}

static model_pod *make_pod(const char *prefix, long i, int64_t cpu, int64_t mem, bool selector)
{
    pool *p = pool_new(0);
    model_pod *pod = pool_alloc(p, sizeof *pod);
    pod->pool = p;
    char name[64];
    snprintf(name, sizeof name, "%s-%ld", prefix, i);
    pod->ns = "default";
    pod->name = pool_strdup(p, name);
    pod->uid = pool_strdup(p, name);
    pod->resource_version = "";
    pod->scheduler_name = "agent-scheduler";
    pod->req.v[MODEL_RES_CPU] = cpu;
    pod->req.v[MODEL_RES_MEMORY] = mem;
    pod->req.v[MODEL_RES_PODS] = 1;
    pod->req_mask = 1u << MODEL_RES_CPU | 1u << MODEL_RES_MEMORY | 1u << MODEL_RES_PODS;
    if (selector) {
        model_kv *kv = pool_alloc(p, sizeof *kv);
        *kv = (model_kv){"topology.kubernetes.io/zone", "zone-a"};
        pod->node_selector = (model_labels){kv, 1};
    }
    return pod;
}

static svc *new_svc(void)
{
    svc_config cfg;
    svc_config_defaults(&cfg);
    svc *s = NULL;
    as_diag d = {{0}, {0}};
    if (svc_new(&cfg, &s, &d)) {
        fprintf(stderr, "svc_new: %s\n", d.msg);
        exit(2);
    }
    return s;
}

/* Nodes of 8..64 cores, about half full of running pods. */
static void fill_half(svc *s, int nnodes)
{
    static const int64_t cpus[] = {8000, 16000, 32000, 64000};
    unsigned seed = 42;
    for (int i = 0; i < nnodes; i++)
        cache_node_upsert(s->core->cache, make_node(i, cpus[rand_r(&seed) % 4], &seed, true));
    for (long i = 0; i < (long)nnodes * 4; i++) {
        model_pod *p =
            make_pod("run", i, 500 + rand_r(&seed) % 3000, (1 + rand_r(&seed) % 8) * GI, false);
        char node[64];
        snprintf(node, sizeof node, "node-%06ld", i % nnodes);
        p->node_name = node;
        cache_pod_upsert(s->core->cache, p);
        p->node_name = NULL;
        model_pod_free(p);
    }
}

/* ---- throughput ------------------------------------------------------ */

#define SHAPES 16

/* shaped_pod: pod number i of the arrival stream; with shapes > 0 its
 * request is one of `shapes` templates, else random (all distinct). */
static model_pod *shaped_pod(const char *prefix, long i, unsigned *seed, int shapes)
{
    if (shapes <= 0)
        return make_pod(prefix, i, 100 + rand_r(seed) % 1900, (128 + rand_r(seed) % 4096) << 20,
                        rand_r(seed) % 4 == 0);
    unsigned t = (unsigned)rand_r(seed) % (unsigned)shapes;
    unsigned h = t * 2654435761u;
    return make_pod(prefix, i, 100 + h % 1900, (int64_t)(128 + (h >> 11) % 4096) << 20, t % 4 == 0);
}

static as_err bind_and_release(void *arg, const model_pod *pod, const char *node, as_diag *diag)
{
    svc *s = arg;
    binder_release(s->core->binder, pod->uid); /* keep the cluster as full as it started */
    return AS_OK;
}

typedef struct rate {
    double wall;     /* decisions per wall second */
    double per_cpu;  /* per process CPU second (feeder and bind threads included) */
    double per_busy; /* per worker CPU second: what one worker sustains */
    double util;     /* worker busy share */
    double hit_pct;  /* decisions answered incrementally by the eq cache */
    double cores;    /* process CPU seconds per wall second during the run */
} rate;

static rate fast_rate(svc *s, unsigned workers, double secs, bool eq, int shapes)
{
    fastpath_config fc;
    fastpath_config_defaults(&fc);
    fc.workers = workers;
    fc.no_eqcache = !eq;
    fc.candidates = 3;
    fc.bind_threads = 2;
    fastpath_ops ops = {bind_and_release, NULL, NULL, s, NULL, NULL, NULL, NULL};
    fastpath *fp = NULL;
    as_diag d = {{0}, {0}};
    if (fastpath_new(s->core, &fc, &ops, &fp, &d)) {
        fprintf(stderr, "fastpath_new: %s\n", d.msg);
        exit(2);
    }
    unsigned seed = 7;
    long offered = 0;
    fastpath_start(fp);
    queue *q = fastpath_queue(fp);
    /* Warm-up, not measured: every shape's first sightings (a full scan,
     * then the class build) and the learned tables settling. Steady state
     * is what a long-running scheduler sees. */
    for (int i = 0; i < 512; i++, offered++)
        fastpath_offer(fp, shaped_pod("w", offered, &seed, shapes));
    fastpath_wait_idle(fp, 120000);
    /* The arriving pods are built before the clock starts (in a real
     * cluster the watch decoder makes them, not the scheduler), so a
     * single feeder thread keeps up with fast workers. */
    size_t npre = (size_t)(secs * 250000) + 4096, used = 0;
    model_pod **pre = malloc(npre * sizeof *pre);
    for (size_t i = 0; pre && i < npre; i++, offered++)
        pre[i] = shaped_pod("p", offered, &seed, shapes);
    fastpath_stats st0;
    fastpath_get_stats(fp, &st0);
    double t0 = bench_now_s(), c0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    while (bench_now_s() - t0 < secs) {
        queue_stats qs;
        queue_get_stats(q, &qs);
        if (qs.active < 2048) {
            for (int i = 0; i < 2048; i++, offered++)
                fastpath_offer(fp, pre && used < npre ? pre[used++]
                                                      : shaped_pod("p", offered, &seed, shapes));
        } else {
            usleep(50);
        }
    }
    fastpath_wait_idle(fp, 60000);
    double el = bench_now_s() - t0;
    fastpath_stop(fp); /* workers publish their final CPU time */
    double cpu = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    for (size_t i = used; pre && i < npre; i++)
        model_pod_free(pre[i]);
    free(pre);
    fastpath_stats st;
    fastpath_get_stats(fp, &st);
    double n = (double)(st.attempts - st0.attempts);
    double wcpu = (double)(st.worker_cpu_ns - st0.worker_cpu_ns) / 1e9;
    rate r;
    r.util = (double)(st.busy_ns - st0.busy_ns) / 1e9 / (el * workers);
    r.per_cpu = n / cpu;
    r.cores = cpu / el;
    r.per_busy = wcpu > 0 ? n / wcpu : 0;
    r.wall = n / el;
    r.hit_pct = n > 0 ? 100.0 * (double)(st.eq_hits - st0.eq_hits) / n : 0;
    fastpath_free(fp);
    return r;
}

#define ROUNDS 3

static int cmp_wall(const void *a, const void *b)
{
    double x = ((const rate *)a)->wall, y = ((const rate *)b)->wall;
    return (x > y) - (x < y);
}

/* median_rate: the run with the median wall rate of ROUNDS (sorts r). */
static rate median_rate(rate *r)
{
    qsort(r, ROUNDS, sizeof *r, cmp_wall);
    return r[ROUNDS / 2];
}

typedef struct snap {
    cache_node copy;
    double score;
} snap;

static int cmp_snap(const void *a, const void *b)
{
    const snap *x = *(snap *const *)a, *y = *(snap *const *)b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return strcmp(x->copy.spec->name, y->copy.spec->name);
}

/* The naive scheduler: snapshot, scan everything, sort, assume, release. */
static double naive_rate(svc *s, double secs, double *per_cpu, int shapes)
{
    score_policy *pol = core_policy_get(s->core);
    cache_read_lock(s->core->cache);
    size_t n = cache_node_count(s->core->cache);
    cache_read_unlock(s->core->cache);
    snap *sn = malloc(n * sizeof *sn);
    snap **feas = malloc(n * sizeof *feas);
    unsigned seed = 7;
    long done = 0;
    double t0 = bench_now_s(), c0 = bench_clock_s(CLOCK_PROCESS_CPUTIME_ID);
    while (bench_now_s() - t0 < secs) {
        model_pod *pod = shaped_pod("naive", done, &seed, shapes);
        cache_read_lock(s->core->cache);
        for (size_t i = 0; i < n; i++) {
            const cache_node *src = cache_node_at(s->core->cache, i);
            sn[i].copy = *src;
            for (int r = 0; r < MODEL_MAX_RES; r++)
                sn[i].copy.requested[r] = cache_node_requested(src, r);
        }
        size_t nf = 0;
        for (size_t i = 0; i < n; i++) {
            if (pred_check(&s->core->reg, CACHE_SHARD_NONE, pod, &sn[i].copy).code != PRED_OK)
                continue;
            sn[i].score = score_node(pol, pod, &sn[i].copy);
            feas[nf++] = &sn[i];
        }
        qsort(feas, nf, sizeof feas[0], cmp_snap);
        uint32_t slot = nf ? feas[0]->copy.slot : 0;
        uint64_t id = nf ? feas[0]->copy.id : 0;
        cache_read_unlock(s->core->cache);
        if (nf) {
            cache_assume_result ar;
            cache_assume_if(s->core->cache, pod, slot, id, 0, NULL, NULL, &ar, NULL);
            cache_forget(s->core->cache, pod->uid);
        }
        model_pod_free(pod);
        done++;
    }
    double el = bench_now_s() - t0;
    *per_cpu = (double)done / (bench_clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0);
    free(sn);
    free(feas);
    score_policy_unref(pol);
    return (double)done / el;
}

/* ---- conflicts at 90% ------------------------------------------------ */

static as_err bind_ok(void *arg, const model_pod *pod, const char *node, as_diag *diag)
{
    return AS_OK;
}

static int overcommitted(svc *s)
{
    int bad = 0;
    cache_read_lock(s->core->cache);
    for (size_t i = 0; i < cache_node_count(s->core->cache); i++) {
        const cache_node *n = cache_node_at(s->core->cache, i);
        for (int r = 0; r < MODEL_MAX_RES; r++)
            if (n->alloc.v[r] && cache_node_requested(n, r) > n->alloc.v[r])
                bad++;
    }
    cache_read_unlock(s->core->cache);
    return bad;
}

#define CNODES 1000
#define CPODS  2000

/* Returns the requeue percentage; *over gets the overcommitted nodes. */
static double conflict_run(unsigned workers, unsigned k, int *over, double *util_pct)
{
    svc *s = new_svc();
    unsigned seed = 11;
    int64_t used = 0, cap = 0;
    for (int i = 0; i < CNODES; i++) {
        cache_node_upsert(s->core->cache, make_node(i, 16000, &seed, false));
        /* running pods up to 90% of the node's cpu */
        int64_t fill = 0;
        for (long j = 0; fill < 14400; j++) {
            int64_t c = 200 + rand_r(&seed) % 1800;
            if (fill + c > 14400)
                c = 14400 - fill;
            model_pod *p = make_pod("run", (long)i * 1000 + j, c, 1 * GI, false);
            char node[64];
            snprintf(node, sizeof node, "node-%06d", i);
            p->node_name = node;
            cache_pod_upsert(s->core->cache, p);
            p->node_name = NULL;
            model_pod_free(p);
            fill += c;
        }
        used += fill;
        cap += 16000;
    }
    fastpath_config fc;
    fastpath_config_defaults(&fc);
    fc.workers = workers;
    fc.candidates = k;
    fc.bind_threads = 2;
    fastpath_ops ops = {bind_ok, NULL, NULL, s, NULL, NULL, NULL, NULL};
    fastpath *fp = NULL;
    as_diag d = {{0}, {0}};
    fastpath_new(s->core, &fc, &ops, &fp, &d);
    /* Seven agent shapes: workers of one shape share an equivalence class
     * and see the same top nodes, the worst case for conflicts. */
    for (long i = 0; i < CPODS; i++)
        fastpath_offer(fp, make_pod("burst", i, 100 + 100 * (rand_r(&seed) % 7), 256 << 20, false));
    fastpath_start(fp);
    fastpath_wait_idle(fp, 120000);
    fastpath_stats st;
    fastpath_get_stats(fp, &st);
    fastpath_stop(fp);
    *over = overcommitted(s);
    if (cache_check_invariants(s->core->cache, &d) != AS_OK) {
        fprintf(stderr, "invariants: %s\n", d.msg);
        (*over)++;
    }
    cache_stats cs;
    cache_get_stats(s->core->cache, &cs);
    *util_pct = 100.0 * (double)used / (double)cap;
    double pct = st.attempts ? 100.0 * (double)st.conflicts / (double)st.attempts : 0;
    fastpath_free(fp);
    svc_free(s);
    return pct;
}

int main(int argc, char **argv)
{
    double secs = argc > 1 ? atof(argv[1]) : 0.4;
    if (secs <= 0)
        secs = 0.4;
    log_set_level(LOG_ERROR);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    printf("bench_fastpath: %.2f s per run, %ld online CPUs (ratios only; shared machine)\n\n",
           secs, cores);
    printf(
        "1. decisions/s through the fast path (queue -> evaluate -> binder -> bind stage),\n"
        "   pods from %d shapes. per CPU-second: whole process (feeder and bind threads\n"
        "   included); per worker-second: decisions / worker thread CPU time (one worker's rate);\n"
        "   old = sched_evaluate per decision (early stop above 5000 nodes); eq = eqcache\n"
        "   (a shape's first sighting as old, then full-scan quality from its class);\n"
        "   cores1/2: CPUs the process got with 1 / 2 eq workers (other load shares them);\n"
        "   eq 1w/2w/4w: median of %d interleaved runs each (1, 2, 4, 1, 2, 4, ...)\n",
        SHAPES, ROUNDS);
    printf("%6s %9s %9s %9s %8s %8s | %9s %9s %6s | %9s %9s %9s %6s %6s %6s %9s\n", "nodes",
           "naive/cpu", "old/cpu", "eq/cpu", "eq/naive", "eq/old", "old/wkr-s", "eq/wkr-s", "hit%",
           "eq 1w/s", "eq 2w/s", "eq 4w/s", "2w/1w", "4w/1w", "old2/1", "cores1/2");
    static const int sizes[] = {500, 5000, 50000};
    int only = argc > 2 ? atoi(argv[2]) : 0;   /* one size, table 1 only (profiling) */
    int only_w = argc > 3 ? atoi(argv[3]) : 0; /* one eq run at that many workers */
    if (only && only_w > 0) {
        svc *s = new_svc();
        fill_half(s, only);
        rate r = fast_rate(s, (unsigned)only_w, secs, true, SHAPES);
        printf("%d nodes, %d eq workers: %.0f decisions/s, %.0f per process CPU-s, %.0f per "
               "worker CPU-s, worker busy %.0f%%, %.2f cores\n",
               only, only_w, r.wall, r.per_cpu, r.per_busy, 100 * r.util, r.cores);
        svc_free(s);
        return 0;
    }
    for (size_t i = 0; i < 3; i++) {
        if (only && sizes[i] != only)
            continue;
        svc *s = new_svc();
        fill_half(s, sizes[i]);
        double ncpu;
        naive_rate(s, secs, &ncpu, SHAPES);
        rate o1 = fast_rate(s, 1, secs, false, SHAPES);
        rate o2 = fast_rate(s, 2, secs, false, SHAPES);
        /* The worker counts take turns, ROUNDS times, and each column is
         * the median: one run apiece, in a fixed order, let a slow moment
         * of the shared machine decide a ratio (2w/1w read 0.98 in one
         * such run and 1.16 in the next). */
        rate e1r[ROUNDS], e2r[ROUNDS], e4r[ROUNDS];
        for (int r = 0; r < ROUNDS; r++) {
            e1r[r] = fast_rate(s, 1, secs, true, SHAPES);
            e2r[r] = fast_rate(s, 2, secs, true, SHAPES);
            e4r[r] = fast_rate(s, 4, secs, true, SHAPES);
        }
        rate e1 = median_rate(e1r), e2 = median_rate(e2r), e4 = median_rate(e4r);
        printf("%6d %9.0f %9.0f %9.0f %7.1fx %7.1fx | %9.0f %9.0f %5.1f%% | %9.0f %9.0f %9.0f "
               "%5.2fx %5.2fx %5.2fx %4.2f/%4.2f\n",
               sizes[i], ncpu, o1.per_cpu, e1.per_cpu, e1.per_cpu / ncpu, e1.per_cpu / o1.per_cpu,
               o1.per_busy, e1.per_busy, e1.hit_pct, e1.wall, e2.wall, e4.wall, e2.wall / e1.wall,
               e4.wall / e1.wall, o2.wall / o1.wall, e1.cores, e2.cores);
        fflush(stdout);
        if (sizes[i] == 5000) {
            /* Worst case for the eq cache: every pod a distinct shape. */
            double ucpu;
            naive_rate(s, secs, &ucpu, 0);
            rate uo = fast_rate(s, 1, secs, false, 0);
            rate ue = fast_rate(s, 1, secs, true, 0);
            printf("%6s %9.0f %9.0f %9.0f %7.1fx %7.1fx | %9.0f %9.0f %5.1f%%   (5000 nodes, "
                   "every pod a distinct shape)\n",
                   "uniq", ucpu, uo.per_cpu, ue.per_cpu, ue.per_cpu / ucpu, ue.per_cpu / uo.per_cpu,
                   uo.per_busy, ue.per_busy, ue.hit_pct);
            fflush(stdout);
        }
        svc_free(s);
    }
    printf("\n");

    if (only)
        return 0;
    printf("2. requeues (binder refused every candidate) at 90%% cpu utilisation: %d nodes,\n"
           "   burst of %d pods; %% of decisions requeued\n",
           CNODES, CPODS);
    printf("%8s", "workers");
    for (unsigned k = 1; k <= 5; k++)
        printf("   K=%u  ", k);
    printf("\n");
    int failures = 0;
    static const unsigned ws[] = {1, 2, 4, 8};
    for (size_t wi = 0; wi < 4; wi++) {
        printf("%8u", ws[wi]);
        for (unsigned k = 1; k <= 5; k++) {
            int over = 0;
            double util = 0;
            double pct = conflict_run(ws[wi], k, &over, &util);
            printf(" %6.2f%%", pct);
            if (over) {
                printf("!");
                failures++;
            }
            fflush(stdout);
        }
        printf("\n");
    }
    if (failures) {
        printf("OVERCOMMIT in %d run(s)\n", failures);
        return 1;
    }
    printf("zero overcommit in every run\n");
    return 0;
}

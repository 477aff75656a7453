/*
 * test_binder_stress.c - many threads racing for few nodes through
 * sched_evaluate + binder_commit, with releases, deletes, confirmations
 * and node spec replacements interleaved. The node must never be
 * overcommitted: checked by cache_check_invariants (during and after) and
 * by summing what every thread believes it placed.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/core/binder.h"
#include "agentsched/core/cache.h"
#include "agentsched/core/sched.h"
#include "core_fixtures.h"

#define NODES           4
#define THREADS         8
#define PODS_PER_THREAD 1500
#define NODE_CPU        4000
#define NODE_MEM        (16 * FX_GI)
#define NODE_GPUS       2

static model_registry reg;
static cache *c;
static score_policy *pol;
static binder *b;
static int stop;                                /* atomic */
static int64_t tally_cpu[NODES];                /* atomic: cpu of pods placed per node */
static int64_t tally_pods[NODES];               /* atomic */
static int64_t tally_gpu[NODES];                /* atomic: gpu milli */
static uint64_t placed, refused, unschedulable; /* atomic */

static model_node *make_node(int i)
{
    char name[16];
    snprintf(name, sizeof name, "n%d", i);
    model_node *n = fx_node(name, NODE_CPU, NODE_MEM, 60);
    if (i < 2)
        fx_node_gpus(&reg, n, NODE_GPUS);
    return n;
}

static int node_index(const char *name)
{
    return name[0] == 'n' ? atoi(name + 1) : -1;
}

static void add_tally(int node, const model_pod *p, int sign)
{
    __atomic_add_fetch(&tally_cpu[node], sign * p->req.v[MODEL_RES_CPU], __ATOMIC_RELAXED);
    __atomic_add_fetch(&tally_pods[node], sign, __ATOMIC_RELAXED);
    if (p->gpu_count)
        __atomic_add_fetch(&tally_gpu[node], sign * (int64_t)p->gpu_milli, __ATOMIC_RELAXED);
}

/* Criterion's asserts must stay on the test's own thread; worker threads
 * abort loudly instead (the test then fails as crashed). */
#define T_ASSERT(cond)                                                                             \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

typedef struct placed_pod {
    model_pod *pod;
    int node;
} placed_pod;

static pthread_barrier_t start;

static void *worker(void *arg)
{
    pthread_barrier_wait(&start);
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
    int tid = (int)(uintptr_t)arg;
    placed_pod *mine = calloc(PODS_PER_THREAD, sizeof *mine);
    size_t nmine = 0;
    for (int i = 0; i < PODS_PER_THREAD; i++) {
        char uid[32];
        snprintf(uid, sizeof uid, "t%d-p%d", tid, i);
        model_pod *p = fx_pod(uid, uid, 20 + rand_r(&seed) % 200, (rand_r(&seed) % 256) << 20);
        if (rand_r(&seed) % 8 == 0)
            fx_pod_gpu(&reg, p, 0, 100 + rand_r(&seed) % 600);
        bool done = false;
        for (int attempt = 0; attempt < 4 && !done; attempt++) {
            sched_request req = {.pod = p, .policy = pol, .k = 3};
            sched_result r;
            T_ASSERT(sched_evaluate(c, &req, &r) == AS_OK);
            if (r.ncand == 0) {
                sched_result_free(&r);
                __atomic_add_fetch(&unschedulable, 1, __ATOMIC_RELAXED);
                break;
            }
            /* widen the window between decision and commit so other
             * threads' binds land in it */
            if (rand_r(&seed) % 2)
                sched_yield();
            binder_outcome o;
            as_err err = binder_commit(b, p, r.cand, r.ncand, &o);
            sched_result_free(&r);
            if (err == AS_OK) {
                T_ASSERT(o.how != BINDER_IDEMPOTENT);
                int n = node_index(o.node);
                T_ASSERT(n >= 0 && n < NODES);
                add_tally(n, p, +1);
                mine[nmine++] = (placed_pod){p, n};
                __atomic_add_fetch(&placed, 1, __ATOMIC_RELAXED);
                done = true;
            } else {
                T_ASSERT(err == AS_ECONFLICT);
                __atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED);
            }
        }
        if (!done) {
            model_pod_free(p);
        }
        /* Churn: free capacity so the race continues past the first fill. */
        if (nmine > 12 || (nmine && rand_r(&seed) % 4 == 0)) {
            size_t k = rand_r(&seed) % nmine;
            placed_pod v = mine[k];
            int op = rand_r(&seed) % 3;
            if (op == 0) {
                T_ASSERT(binder_release(b, v.pod->uid) == AS_OK);
            } else if (op == 1) {
                /* confirmed by the API server, then deleted */
                char node[16];
                snprintf(node, sizeof node, "n%d", v.node);
                fx_pod_bind(v.pod, node);
                T_ASSERT(cache_pod_upsert(c, v.pod) == AS_OK);
                T_ASSERT(cache_pod_delete(c, v.pod->uid) == AS_OK);
            } else {
                /* finished: seen terminal */
                char node[16];
                snprintf(node, sizeof node, "n%d", v.node);
                fx_pod_bind(v.pod, node);
                v.pod->phase = MODEL_PHASE_SUCCEEDED;
                T_ASSERT(cache_pod_upsert(c, v.pod) == AS_OK);
            }
            add_tally(v.node, v.pod, -1);
            model_pod_free(v.pod);
            mine[k] = mine[--nmine];
        }
    }
    for (size_t k = 0; k < nmine; k++)
        model_pod_free(mine[k].pod);
    free(mine);
    return NULL;
}

/* churner: replaces node specs (bumps versions, takes the write lock),
 * sometimes removes and re-adds a node, and checks invariants while the
 * workers run. */
static void *churner(void *arg)
{
    int i = 0;
    while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
        int k = i++ % NODES;
        if (i % 8 == 0) {
            /* the node object is recreated: slots move, candidates of the
             * old incarnation are refused, its pods detach and re-attach */
            char name[16];
            snprintf(name, sizeof name, "n%d", k);
            T_ASSERT(cache_node_remove(c, name) == AS_OK);
            sched_yield();
        }
        T_ASSERT(cache_node_upsert(c, make_node(k)) == AS_OK);
        as_diag d = {0};
        if (cache_check_invariants(c, &d) != AS_OK) {
            fprintf(stderr, "invariant broken during the race: %s\n", d.msg);
            abort();
        }
        sched_yield();
    }
    return NULL;
}

/* stress_run is the whole test, with plain checks (they are also safe
 * in the helper threads). */
static void stress_run(void)
{
    model_registry_init(&reg);
    T_ASSERT(cache_new(&reg, &c) == AS_OK);
    T_ASSERT(score_policy_new_strategy(&reg, SCORE_MOST_ALLOCATED, &pol) == AS_OK);
    T_ASSERT(binder_new(c, NULL, &b) == AS_OK);
    for (int i = 0; i < NODES; i++)
        T_ASSERT(cache_node_upsert(c, make_node(i)) == AS_OK);

    pthread_t th[THREADS], ch;
    pthread_barrier_init(&start, NULL, THREADS);
    T_ASSERT(pthread_create(&ch, NULL, churner, NULL) == 0);
    for (uintptr_t t = 0; t < THREADS; t++)
        T_ASSERT(pthread_create(&th[t], NULL, worker, (void *)t) == 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    pthread_join(ch, NULL);
    pthread_barrier_destroy(&start);

    as_diag d = {0};
    if (cache_check_invariants(c, &d) != AS_OK) {
        fprintf(stderr, "invariant broken: %s\n", d.msg);
        abort();
    }
    cache_read_lock(c);
    for (int i = 0; i < NODES; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        const cache_node *n = cache_node_find(c, name, strlen(name));
        T_ASSERT(n);
        int64_t cpu = cache_node_requested(n, MODEL_RES_CPU);
        T_ASSERT(cpu == tally_cpu[i]);
        T_ASSERT(cache_node_requested(n, MODEL_RES_PODS) == tally_pods[i]);
        T_ASSERT(cpu <= NODE_CPU);
        T_ASSERT(cache_node_requested(n, MODEL_RES_MEMORY) <= NODE_MEM);
        T_ASSERT(cache_node_requested(n, MODEL_RES_PODS) <= 60);
        int64_t gpu = 0;
        for (int g = 0; g < MODEL_MAX_GPUS; g++) {
            T_ASSERT(cache_node_gpu_used(n, g) <= MODEL_GPU_MILLI);
            gpu += cache_node_gpu_used(n, g);
        }
        T_ASSERT(gpu == tally_gpu[i]);
    }
    cache_read_unlock(c);
    binder_stats st;
    binder_get_stats(b, &st);
    T_ASSERT(st.accepted_fast + st.accepted_rechecked == placed);
    T_ASSERT(placed > 0);
    T_ASSERT(st.conflicts + unschedulable > 0); /* the nodes filled up */
    fprintf(stderr,
            "binder stress: placed=%llu fast=%llu rechecked=%llu conflicts=%llu "
            "exhausted=%llu unschedulable=%llu\n",
            (unsigned long long)placed, (unsigned long long)st.accepted_fast,
            (unsigned long long)st.accepted_rechecked, (unsigned long long)st.conflicts,
            (unsigned long long)st.exhausted, (unsigned long long)unschedulable);

    binder_free(b);
    score_policy_unref(pol);
    cache_free(c);
    model_registry_destroy(&reg);
}

Test(binder_stress, never_overcommits, .timeout = 240)
{
    stress_run();
}

/*
 * test_fastpath_stress.c - many fast-path workers racing for few nodes,
 * K = 1..5, with API binds that sometimes fail (release + backoff), binds
 * confirmed by a fake watch, bound pods deleted meanwhile (moving the
 * unschedulable pool back) and node heartbeats (bumping bind versions so
 * the binder must re-check). Zero overcommit is checked during the run and
 * at the end; every pod ends bound, deleted or waiting, never lost. Runs
 * under ThreadSanitizer in deploy/test.sh's TSan stage (smaller sizes).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentsched/fastpath/fastpath.h"
#include "agentsched/base/log.h"
#include "agentsched/serve/svc.h"
#include "core_fixtures.h"

#if UNDER_TSAN
#define PODS 90
#else
#define PODS 400
#endif
#define NODES    3
#define NODE_CPU 4000
#define WORKERS  8

typedef struct world {
    svc *s;
    fastpath *fp;
    pthread_mutex_t mu;
    char bound[PODS];   /* 1 once the fake API bound it */
    char deleted[PODS]; /* 1 once the churn thread deleted it */
    unsigned seed;      /* under mu */
    int fails;          /* scripted API failures so far */
    int stop;           /* atomic */
    int overcommits;    /* atomic: seen by the checker during the run */
} world;

static int pod_index(const char *name)
{
    return atoi(name + 1);
}

static as_err flaky_bind(void *arg, const model_pod *pod, const char *node, as_diag *diag)
{
    world *w = arg;
    pthread_mutex_lock(&w->mu);
    bool fail = rand_r(&w->seed) % 20 == 0; /* 5% */
    bool confirm = rand_r(&w->seed) % 2 == 0;
    if (fail) {
        w->fails++;
    } else {
        w->bound[pod_index(pod->name)] = 1;
        if (confirm) {
            /* The watch shows it bound: ASSUMED -> BOUND. Under w->mu, as
             * the churn thread deletes under it too: a real watch delivers
             * a pod's events in order, so a confirmation never arrives
             * after the pod's deletion (doing that would resurrect a
             * deleted pod onto a node whose room was already reused, and
             * the checker would blame the binder). */
            model_pod tmp = *pod;
            tmp.node_name = node;
            cache_pod_upsert(w->s->core->cache, &tmp);
        }
    }
    pthread_mutex_unlock(&w->mu);
    if (fail)
        return as_diag_set(diag, AS_EHTTP, NULL, "scripted 500");
    return AS_OK;
}

/* Checks every node's usage against its allocatable. */
static int overcommitted(svc *s)
{
    int bad = 0;
    cache_read_lock(s->core->cache);
    for (size_t i = 0; i < cache_node_count(s->core->cache); i++) {
        const cache_node *n = cache_node_at(s->core->cache, i);
        if (cache_node_requested(n, MODEL_RES_CPU) > n->alloc.v[MODEL_RES_CPU] ||
            cache_node_requested(n, MODEL_RES_PODS) > n->alloc.v[MODEL_RES_PODS])
            bad++;
    }
    cache_read_unlock(s->core->cache);
    return bad;
}

/* Deletes bound pods now and then (as the watch would report), sends node
 * heartbeats, and checks for overcommit all along. */
static void *churn(void *arg)
{
    world *w = arg;
    unsigned seed = 7;
    int round = 0;
    while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
        usleep(500);
        round++;
        if (overcommitted(w->s))
            __atomic_add_fetch(&w->overcommits, 1, __ATOMIC_RELAXED);
        if (round % 4 == 0) {
            char name[16];
            snprintf(name, sizeof name, "n%d", rand_r(&seed) % NODES);
            cache_node_upsert(w->s->core->cache, fx_node(name, NODE_CPU, 64 * FX_GI, 30));
        }
        for (int tries = 0; tries < 8; tries++) {
            int i = rand_r(&seed) % PODS;
            char uid[16];
            snprintf(uid, sizeof uid, "p%d", i);
            pthread_mutex_lock(&w->mu);
            bool go = w->bound[i] && !w->deleted[i];
            if (go) {
                w->deleted[i] = 1;
                cache_pod_delete(w->s->core->cache, uid);
            }
            pthread_mutex_unlock(&w->mu);
            if (go) {
                model_pod *p = fx_pod(uid, uid, 1, 1);
                fx_pod_bind(p, "n0");
                if (!fastpath_pod_event(w->fp, K8S_EV_DELETED, p))
                    model_pod_free(p);
                break;
            }
        }
    }
    return NULL;
}

static void run(unsigned k)
{
    world w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.mu, NULL);
    w.seed = 1000 + k;
    log_set_level(LOG_ERROR);
    svc_config cfg;
    svc_config_defaults(&cfg);
    as_diag d = {{0}, {0}};
    cr_assert_eq(svc_new(&cfg, &w.s, &d), AS_OK, "%s", d.msg);
    for (int i = 0; i < NODES; i++) {
        char name[16];
        snprintf(name, sizeof name, "n%d", i);
        cr_assert_eq(cache_node_upsert(w.s->core->cache, fx_node(name, NODE_CPU, 64 * FX_GI, 30)),
                     AS_OK);
    }
    fastpath_config fc;
    fastpath_config_defaults(&fc);
    fc.workers = WORKERS;
    fc.candidates = k;
    fc.bind_threads = 8;
    fc.poll_ms = 2;
    fc.queue.backoff_initial_ms = 2;
    fc.queue.backoff_max_ms = 20;
    fastpath_ops ops = {flaky_bind, NULL, NULL, &w, NULL, NULL, NULL, NULL};
    cr_assert_eq(fastpath_new(w.s->core, &fc, &ops, &w.fp, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(fastpath_start(w.fp), AS_OK);
    pthread_t ct;
    pthread_create(&ct, NULL, churn, &w);
    unsigned seed = 99 + k;
    for (int i = 0; i < PODS; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        cr_assert_eq(fastpath_offer(w.fp, fx_pod(name, name, 100 + rand_r(&seed) % 800, FX_GI)),
                     AS_OK);
        if (i % 16 == 0)
            usleep(200);
    }
    /* Run until most pods got a turn (the churn keeps freeing room). */
    for (int t = 0; t < 1000; t++) {
        int n = 0;
        pthread_mutex_lock(&w.mu);
        for (int i = 0; i < PODS; i++)
            n += w.bound[i];
        pthread_mutex_unlock(&w.mu);
        if (n >= PODS / 2)
            break;
        usleep(10000);
    }
    __atomic_store_n(&w.stop, 1, __ATOMIC_RELEASE);
    pthread_join(ct, NULL);
    cr_assert(fastpath_wait_idle(w.fp, 10000), "K=%u: fast path never settled", k);
    fastpath_stop(w.fp);

    cr_assert_eq(__atomic_load_n(&w.overcommits, __ATOMIC_RELAXED), 0,
                 "K=%u: overcommit observed during the run", k);
    cr_assert_eq(overcommitted(w.s), 0, "K=%u: overcommit at the end", k);
    cr_assert_eq(cache_check_invariants(w.s->core->cache, &d), AS_OK, "K=%u: %s", k, d.msg);

    /* Every pod is accounted for: bound (in the cache unless deleted), or
     * still queued waiting for room. */
    queue_stats qs;
    queue_get_stats(fastpath_queue(w.fp), &qs);
    int bound = 0, live = 0;
    for (int i = 0; i < PODS; i++) {
        char uid[16];
        snprintf(uid, sizeof uid, "p%d", i);
        cache_pod_info info;
        cache_pod_lookup(w.s->core->cache, uid, &info);
        queue_where where = queue_where_is(fastpath_queue(w.fp), uid, NULL);
        if (w.bound[i]) {
            bound++;
            cr_assert_eq(where, QUEUE_ABSENT, "K=%u: %s bound and still queued", k, uid);
            if (!w.deleted[i]) {
                live++;
                cr_assert_neq(info.state, CACHE_POD_ABSENT, "K=%u: %s bound but forgotten", k, uid);
            }
        } else {
            cr_assert_eq(info.state, CACHE_POD_ABSENT, "K=%u: %s holds capacity unbound", k, uid);
            cr_assert(where == QUEUE_UNSCHED || where == QUEUE_BACKOFF || where == QUEUE_ACTIVE,
                      "K=%u: %s neither bound nor waiting (%s)", k, uid, queue_where_name(where));
        }
    }
    fastpath_stats st;
    fastpath_get_stats(w.fp, &st);
    cr_log_info("K=%u: %d bound (%d live), %zu waiting, attempts %llu, fast %llu, rechecked "
                "%llu, conflicts %llu, api failures %d",
                k, bound, live, qs.unsched + qs.backoff, (unsigned long long)st.attempts,
                (unsigned long long)st.accepted_fast, (unsigned long long)st.accepted_rechecked,
                (unsigned long long)st.conflicts, w.fails);
    cr_assert_gt(bound, PODS / 4);
    fastpath_free(w.fp);
    svc_free(w.s);
    pthread_mutex_destroy(&w.mu);
}

Test(fastpath_stress, many_workers_few_nodes_k1)
{
    run(1);
}
Test(fastpath_stress, many_workers_few_nodes_k2)
{
    run(2);
}
Test(fastpath_stress, many_workers_few_nodes_k3)
{
    run(3);
}
Test(fastpath_stress, many_workers_few_nodes_k4)
{
    run(4);
}
Test(fastpath_stress, many_workers_few_nodes_k5)
{
    run(5);
}

/*
 * test_fastpath.c - the fast path in process: a real svc (cache, binder,
 * policy, metrics) with a fake API bind. Pods bound, unschedulable pods
 * reported and then bound promptly when a node is added, API bind
 * failures released and retried, deletions during the bind, the k8s pod
 * hook's filtering, metrics.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agentsched/fastpath/fastpath.h"
#include "agentsched/base/log.h"
#include "agentsched/serve/svc.h"
#include "core_fixtures.h"

#define MAXREC 256

/* What the fake API server saw. Guarded by mu. */
typedef struct fake_api {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    svc *s;
    char bound_pod[MAXREC][64];
    char bound_node[MAXREC][64];
    int nbound;
    int nscheduled_events;
    char last_unsched[1024];
    int nunsched;
    int fail_next;    /* fail this many binds ... */
    as_err fail_with; /* ... with this error */
    bool block;       /* hold binds until released */
    int blocked;      /* binds waiting */
    bool confirm;     /* feed the bind back to the cache as the watch would */
} fake_api;

static as_err fake_bind(void *arg, const model_pod *pod, const char *node, as_diag *diag)
{
    fake_api *f = arg;
    pthread_mutex_lock(&f->mu);
    f->blocked++;
    pthread_cond_broadcast(&f->cond);
    while (f->block)
        pthread_cond_wait(&f->cond, &f->mu);
    f->blocked--;
    as_err err = AS_OK;
    if (f->fail_next > 0) {
        f->fail_next--;
        err = f->fail_with;
        as_diag_set(diag, err, NULL, "scripted failure");
    } else if (f->nbound < MAXREC) {
        snprintf(f->bound_pod[f->nbound], 64, "%s", pod->name);
        snprintf(f->bound_node[f->nbound], 64, "%s", node);
        f->nbound++;
    }
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
    if (!err && f->confirm) {
        model_pod tmp = *pod;
        tmp.node_name = node;
        cache_pod_upsert(f->s->core->cache, &tmp);
    }
    return err;
}

static void fake_unsched(void *arg, const model_pod *pod, const char *message)
{
    fake_api *f = arg;
    pthread_mutex_lock(&f->mu);
    snprintf(f->last_unsched, sizeof f->last_unsched, "%s", message);
    f->nunsched++;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->mu);
}

static void fake_scheduled(void *arg, const model_pod *pod, const char *node)
{
    fake_api *f = arg;
    pthread_mutex_lock(&f->mu);
    f->nscheduled_events++;
    pthread_mutex_unlock(&f->mu);
}

static svc *s;
static fake_api api;
static fastpath *fp;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void setup(unsigned workers, unsigned k)
{
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.log_level = 0;
    log_set_level(LOG_WARN);
    as_diag d = {{0}, {0}};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "%s", d.msg);
    memset(&api, 0, sizeof api);
    pthread_mutex_init(&api.mu, NULL);
    pthread_cond_init(&api.cond, NULL);
    api.s = s;
    fastpath_config fc;
    fastpath_config_defaults(&fc);
    fc.workers = workers;
    fc.candidates = k;
    fc.bind_threads = 4;
    fc.poll_ms = 5;
    fc.queue.backoff_initial_ms = 20;
    fc.queue.backoff_max_ms = 100;
    fastpath_ops ops = {fake_bind, fake_unsched, fake_scheduled, &api, NULL, NULL, NULL, NULL};
    cr_assert_eq(fastpath_new(s->core, &fc, &ops, &fp, &d), AS_OK, "%s", d.msg);
}

static void teardown(void)
{
    pthread_mutex_lock(&api.mu);
    api.block = false;
    pthread_cond_broadcast(&api.cond);
    pthread_mutex_unlock(&api.mu);
    fastpath_free(fp);
    as_diag d = {{0}, {0}};
    cr_assert_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);
    svc_free(s);
    pthread_mutex_destroy(&api.mu);
    pthread_cond_destroy(&api.cond);
}

static void add_node(const char *name, int64_t cpu)
{
    cr_assert_eq(cache_node_upsert(s->core->cache, fx_node(name, cpu, 64 * FX_GI, 110)), AS_OK);
}

static model_pod *agent(const char *name, int64_t cpu)
{
    return fx_pod(name, name, cpu, FX_GI);
}

static int nbound(void)
{
    pthread_mutex_lock(&api.mu);
    int n = api.nbound;
    pthread_mutex_unlock(&api.mu);
    return n;
}

static int nunsched(void)
{
    pthread_mutex_lock(&api.mu);
    int n = api.nunsched;
    pthread_mutex_unlock(&api.mu);
    return n;
}

/* Waits (bounded) until the fake API has seen n binds. */
static bool wait_bound(int n, int64_t ms)
{
    int64_t end = mono_ms() + ms;
    while (nbound() < n) {
        if (mono_ms() > end)
            return false;
        usleep(1000);
    }
    return true;
}

static const char *bound_node_of(const char *pod)
{
    static char out[64];
    out[0] = '\0';
    pthread_mutex_lock(&api.mu);
    for (int i = 0; i < api.nbound; i++)
        if (strcmp(api.bound_pod[i], pod) == 0)
            snprintf(out, sizeof out, "%s", api.bound_node[i]);
    pthread_mutex_unlock(&api.mu);
    return out;
}

Test(fastpath, binds_every_pending_pod_once)
{
    setup(2, 3);
    add_node("n1", 4000);
    add_node("n2", 4000);
    add_node("n3", 4000);
    cr_assert_eq(fastpath_start(fp), AS_OK);
    char name[32];
    for (int i = 0; i < 30; i++) {
        snprintf(name, sizeof name, "p%02d", i);
        cr_assert_eq(fastpath_offer(fp, agent(name, 300)), AS_OK);
    }
    cr_assert(wait_bound(30, 5000 * FX_SLOW), "bound %d of 30", nbound());
    cr_assert(fastpath_wait_idle(fp, 2000 * FX_SLOW));
    /* every pod exactly once, and the cache holds them as assumed */
    for (int i = 0; i < 30; i++) {
        snprintf(name, sizeof name, "p%02d", i);
        int seen = 0;
        for (int j = 0; j < api.nbound; j++)
            seen += strcmp(api.bound_pod[j], name) == 0;
        cr_assert_eq(seen, 1, "%s bound %d times", name, seen);
        cache_pod_info info;
        cache_pod_lookup(s->core->cache, name, &info);
        cr_assert_eq(info.state, CACHE_POD_ASSUMED);
        cr_assert_str_eq(info.node, bound_node_of(name));
    }
    fastpath_stats st;
    fastpath_get_stats(fp, &st);
    cr_assert_eq(st.scheduled, 30);
    cr_assert_eq(st.accepted_fast + st.accepted_rechecked, 30);
    cr_assert_eq(api.nscheduled_events, 30);
    queue_stats qs;
    queue_get_stats(fastpath_queue(fp), &qs);
    cr_assert_eq(qs.total, 0);
    teardown();
}

Test(fastpath, unschedulable_pod_is_reported_then_bound_when_a_node_is_added)
{
    setup(2, 3);
    add_node("small-1", 1000);
    add_node("small-2", 1000);
    cr_assert_eq(fastpath_start(fp), AS_OK);
    cr_assert_eq(fastpath_offer(fp, agent("big", 3000)), AS_OK);
    int64_t end = mono_ms() + 3000 * FX_SLOW;
    while (queue_where_is(fastpath_queue(fp), "big", NULL) != QUEUE_UNSCHED && mono_ms() < end)
        usleep(1000);
    cr_assert_eq(queue_where_is(fastpath_queue(fp), "big", NULL), QUEUE_UNSCHED);
    end = mono_ms() + 3000 * FX_SLOW;
    while (nunsched() < 1 && mono_ms() < end)
        usleep(1000);
    pthread_mutex_lock(&api.mu);
    cr_assert_eq(api.nunsched, 1);
    cr_assert_str_eq(api.last_unsched, "0/2 nodes are available: 2 Insufficient cpu.");
    pthread_mutex_unlock(&api.mu);
    cr_assert_eq(nbound(), 0);

    /* No explicit nudge: the watcher notices the new node by itself. The
     * pod's backoff (20 ms here) is long over, so it goes straight back. */
    usleep(30000);
    int64_t t0 = mono_ms();
    add_node("big-node", 8000);
    cr_assert(wait_bound(1, 1000 * FX_SLOW), "not bound within a second of the node's arrival");
    int64_t took = mono_ms() - t0;
    cr_assert_str_eq(bound_node_of("big"), "big-node");
    cr_log_info("bound %lld ms after the node was added", (long long)took);
    teardown();
}

Test(fastpath, heartbeat_does_not_retry_but_capacity_does)
{
    setup(1, 3);
    add_node("n1", 1000);
    cr_assert_eq(fastpath_start(fp), AS_OK);
    cr_assert_eq(fastpath_offer(fp, agent("p", 1500)), AS_OK);
    int64_t end = mono_ms() + 3000 * FX_SLOW;
    while (queue_where_is(fastpath_queue(fp), "p", NULL) != QUEUE_UNSCHED && mono_ms() < end)
        usleep(1000);
    cr_assert_eq(queue_where_is(fastpath_queue(fp), "p", NULL), QUEUE_UNSCHED);
    /* The same node spec again (a status heartbeat): nothing that could
     * make the pod fit changed. */
    add_node("n1", 1000);
    usleep(50000);
    cr_assert_eq(queue_where_is(fastpath_queue(fp), "p", NULL), QUEUE_UNSCHED);
    /* More allocatable: moved back and bound. */
    add_node("n1", 2000);
    cr_assert(wait_bound(1, 1000 * FX_SLOW));
    teardown();
}

Test(fastpath, api_bind_failure_releases_and_retries_with_backoff)
{
    setup(1, 3);
    add_node("n1", 1000);
    api.fail_next = 2;
    api.fail_with = AS_EHTTP;
    cr_assert_eq(fastpath_start(fp), AS_OK);
    cr_assert_eq(fastpath_offer(fp, agent("p", 800)), AS_OK);
    cr_assert(wait_bound(1, 3000 * FX_SLOW));
    /* The fake API records the bind before the bind stage counts it. */
    cr_assert(fastpath_wait_idle(fp, 2000 * FX_SLOW));
    fastpath_stats st;
    fastpath_get_stats(fp, &st);
    cr_assert_eq(st.bind_failed, 2);
    cr_assert_eq(st.scheduled, 1);
    binder_stats bs;
    binder_get_stats(s->core->binder, &bs);
    cr_assert_eq(bs.released, 2);
    cache_pod_info info;
    cache_pod_lookup(s->core->cache, "p", &info);
    cr_assert_eq(info.state, CACHE_POD_ASSUMED);
    teardown();
}

/* A 409 that the watch never backs up (the pod is not bound after all)
 * must not strand the pod: it is retried with backoff and bound. */
Test(fastpath, conflict_not_confirmed_by_the_watch_is_retried)
{
    setup(1, 3);
    add_node("n1", 1000);
    api.fail_next = 1;
    api.fail_with = AS_ECONFLICT;
    cr_assert_eq(fastpath_start(fp), AS_OK);
    cr_assert_eq(fastpath_offer(fp, agent("c", 800)), AS_OK);
    cr_assert(wait_bound(1, 3000 * FX_SLOW), "the pod was dropped after a 409");
    cr_assert(fastpath_wait_idle(fp, 2000 * FX_SLOW));
    fastpath_stats st;
    fastpath_get_stats(fp, &st);
    cr_assert_eq(st.bind_failed, 1);
    cr_assert_eq(st.dropped, 0);
    cr_assert_eq(st.scheduled, 1);
    teardown();
}

Test(fastpath, released_capacity_goes_to_the_waiting_pod)
{
    /* n1 fits one pod. "a" is accepted but its bind finds the pod deleted:
     * released, and "b" (unschedulable meanwhile) takes the node. */
    setup(1, 3);
    add_node("n1", 1000);
    api.block = true;
    api.fail_next = 1;
    api.fail_with = AS_ENOTFOUND;
    cr_assert_eq(fastpath_start(fp), AS_OK);
    cr_assert_eq(fastpath_offer(fp, agent("a", 800)), AS_OK);
    pthread_mutex_lock(&api.mu);
    while (!api.blocked)
        pthread_cond_wait(&api.cond, &api.mu);
    pthread_mutex_unlock(&api.mu);
    cr_assert_eq(fastpath_offer(fp, agent("b", 800)), AS_OK);
    int64_t end = mono_ms() + 3000 * FX_SLOW;
    while (queue_where_is(fastpath_queue(fp), "b", NULL) != QUEUE_UNSCHED && mono_ms() < end)
        usleep(1000);
    cr_assert_eq(queue_where_is(fastpath_queue(fp), "b", NULL), QUEUE_UNSCHED);
    pthread_mutex_lock(&api.mu);
    api.block = false;
    pthread_cond_broadcast(&api.cond);
    pthread_mutex_unlock(&api.mu);
    cr_assert(wait_bound(1, 2000 * FX_SLOW));
    cr_assert_str_eq(bound_node_of("b"), "n1");
    cr_assert(fastpath_wait_idle(fp, 2000 * FX_SLOW));
    cache_pod_info info;
    cache_pod_lookup(s->core->cache, "a", &info);
    cr_assert_eq(info.state, CACHE_POD_ABSENT);
    cr_assert_eq(queue_where_is(fastpath_queue(fp), "a", NULL), QUEUE_ABSENT);
    teardown();
}

Test(fastpath, two_pods_one_slot_many_workers)
{
    /* Races between workers: exactly one of two pods gets the only slot,
     * the other is unschedulable, whatever the interleaving. */
    for (int round = 0; round < 10; round++) {
        setup(4, 2);
        add_node("n1", 1000);
        cr_assert_eq(fastpath_offer(fp, agent("x", 700)), AS_OK);
        cr_assert_eq(fastpath_offer(fp, agent("y", 700)), AS_OK);
        cr_assert_eq(fastpath_start(fp), AS_OK);
        cr_assert(wait_bound(1, 2000 * FX_SLOW));
        cr_assert(fastpath_wait_idle(fp, 2000 * FX_SLOW));
        cr_assert_eq(nbound(), 1);
        queue_stats qs;
        queue_get_stats(fastpath_queue(fp), &qs);
        cr_assert_eq(qs.unsched + qs.backoff, 1, "round %d", round);
        teardown();
    }
}

Test(fastpath, deleted_during_bind_leaves_nothing_behind)
{
    setup(1, 3);
    add_node("n1", 4000);
    api.block = true;
    api.fail_next = 1;
    api.fail_with = AS_ENOTFOUND;
    cr_assert_eq(fastpath_start(fp), AS_OK);
    model_pod *p = agent("gone", 500);
    cr_assert_eq(fastpath_offer(fp, p), AS_OK);
    pthread_mutex_lock(&api.mu);
    while (!api.blocked)
        pthread_cond_wait(&api.cond, &api.mu);
    pthread_mutex_unlock(&api.mu);
    /* the watch reports the deletion while the bind is on the wire */
    model_pod *del = agent("gone", 500);
    cr_assert_not(fastpath_pod_event(fp, K8S_EV_DELETED, del));
    model_pod_free(del);
    cr_assert_eq(queue_where_is(fastpath_queue(fp), "gone", NULL), QUEUE_ABSENT);
    pthread_mutex_lock(&api.mu);
    api.block = false;
    pthread_cond_broadcast(&api.cond);
    pthread_mutex_unlock(&api.mu);
    cr_assert(fastpath_wait_idle(fp, 2000 * FX_SLOW));
    queue_stats qs;
    queue_get_stats(fastpath_queue(fp), &qs);
    cr_assert_eq(qs.total, 0);
    cache_pod_info info;
    cache_pod_lookup(s->core->cache, "gone", &info);
    cr_assert_eq(info.state, CACHE_POD_ABSENT);
    teardown();
}

/* The watch can deliver an unbound version of a pod (its PreBind
 * annotation patch) after the bind succeeded and the queue let the pod
 * go: the queue takes it as new, yet the pod is placed and must not be
 * decided again (counted twice by the learned score tables, bound twice). */
Test(fastpath, late_unbound_event_of_a_placed_pod_is_not_decided_again)
{
    setup(1, 3);
    add_node("n1", 4000);
    cr_assert_eq(fastpath_start(fp), AS_OK);
    cr_assert_eq(fastpath_offer(fp, agent("p", 800)), AS_OK);
    cr_assert(wait_bound(1, 3000 * FX_SLOW));
    cr_assert(fastpath_wait_idle(fp, 2000 * FX_SLOW));
    cr_assert_eq(queue_where_is(fastpath_queue(fp), "p", NULL), QUEUE_ABSENT);
    /* the late event: the same pod, still unbound */
    cr_assert(fastpath_pod_event(fp, K8S_EV_MODIFIED, agent("p", 800)));
    cr_assert(fastpath_wait_idle(fp, 2000 * FX_SLOW));
    fastpath_stats st;
    fastpath_get_stats(fp, &st);
    cr_assert_eq(st.attempts, 1, "decided %llu times", (unsigned long long)st.attempts);
    cr_assert_eq(st.dropped, 1);
    cr_assert_eq(nbound(), 1, "bound %d times", nbound());
    queue_stats qs;
    queue_get_stats(fastpath_queue(fp), &qs);
    cr_assert_eq(qs.total, 0);
    cache_pod_info info;
    cache_pod_lookup(s->core->cache, "p", &info);
    cr_assert_eq(info.state, CACHE_POD_ASSUMED);
    cr_assert_str_eq(info.node, "n1");
    teardown();
}

Test(fastpath, pod_hook_takes_only_our_pending_pods)
{
    setup(1, 3);
    queue *q = fastpath_queue(fp);
    model_pod *other = agent("other", 100);
    other->scheduler_name = "default-scheduler";
    cr_assert_not(fastpath_pod_event(fp, K8S_EV_ADDED, other));
    model_pod_free(other);
    model_pod *bound = agent("bound", 100);
    fx_pod_bind(bound, "n1");
    cr_assert_not(fastpath_pod_event(fp, K8S_EV_ADDED, bound));
    model_pod_free(bound);
    model_pod *term = agent("term", 100);
    term->terminating = true;
    cr_assert_not(fastpath_pod_event(fp, K8S_EV_ADDED, term));
    model_pod_free(term);
    cr_assert(fastpath_pod_event(fp, K8S_EV_ADDED, agent("mine", 100)));
    cr_assert_eq(queue_where_is(q, "mine", NULL), QUEUE_ACTIVE);
    /* bound by someone else while queued */
    model_pod *b2 = agent("mine", 100);
    fx_pod_bind(b2, "n9");
    cr_assert_not(fastpath_pod_event(fp, K8S_EV_MODIFIED, b2));
    model_pod_free(b2);
    cr_assert_eq(queue_where_is(q, "mine", NULL), QUEUE_ABSENT);
    /* a relist that does not list a queued pod drops it */
    cr_assert(fastpath_pod_event(fp, K8S_EV_ADDED, agent("stale", 100)));
    cr_assert(fastpath_pod_event(fp, K8S_EV_ADDED, agent("kept", 100)));
    cr_assert_not(fastpath_pod_event(fp, K8S_EV_SYNC_BEGIN, NULL));
    cr_assert(fastpath_pod_event(fp, K8S_EV_ADDED, agent("kept", 100)));
    cr_assert_not(fastpath_pod_event(fp, K8S_EV_SYNC_END, NULL));
    cr_assert_eq(queue_where_is(q, "stale", NULL), QUEUE_ABSENT);
    cr_assert_eq(queue_where_is(q, "kept", NULL), QUEUE_ACTIVE);
    teardown();
}

Test(fastpath, metrics_are_exported)
{
    setup(1, 3);
    add_node("n1", 1000);
    cr_assert_eq(fastpath_start(fp), AS_OK);
    cr_assert_eq(fastpath_offer(fp, agent("a", 500)), AS_OK);
    cr_assert_eq(fastpath_offer(fp, agent("b", 5000)), AS_OK);
    cr_assert(wait_bound(1, 2000 * FX_SLOW));
    cr_assert(fastpath_wait_idle(fp, 2000 * FX_SLOW));
    usleep(30000); /* one watcher period publishes the depths */
    buf out;
    buf_init(&out, 0);
    cr_assert_eq(metrics_render(s->core->metrics, &out), AS_OK);
    static const char *const want[] = {
        "agentsched_queue_pods{queue=\"unschedulable\"} 1",
        "agentsched_queue_pods{queue=\"active\"} 0",
        "agentsched_schedule_attempts_total{result=\"scheduled\"} 1",
        "agentsched_schedule_attempts_total{result=\"unschedulable\"}",
        "agentsched_fastpath_binder_total{result=\"fast\"} 1",
        "agentsched_pod_scheduling_e2e_seconds_bucket",
        "agentsched_fastpath_stage_seconds_bucket{stage=\"evaluate\"",
        "agentsched_fastpath_stage_seconds_count{stage=\"api_bind\"} 1",
        "agentsched_fastpath_worker_utilization_percent",
        "agentsched_queue_full 0",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_expect(strstr(out.data, want[i]), "missing %s in\n%s", want[i], out.data);
    buf_free(&out);
    teardown();
}

Test(fastpath, every_unschedulable_pod_is_reported_once)
{
    setup(4, 3);
    add_node("n1", 1000);
    cr_assert_eq(fastpath_start(fp), AS_OK);
    char name[32];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "u%02d", i);
        cr_assert_eq(fastpath_offer(fp, agent(name, 2000)), AS_OK);
    }
    int64_t end = mono_ms() + 5000 * FX_SLOW;
    while (nunsched() < 40 && mono_ms() < end)
        usleep(1000);
    usleep(20000);
    cr_assert_eq(nunsched(), 40, "%d of 40 unschedulable pods reported", nunsched());
    queue_stats qs;
    queue_get_stats(fastpath_queue(fp), &qs);
    cr_assert_eq(qs.unsched, 40);
    teardown();
}

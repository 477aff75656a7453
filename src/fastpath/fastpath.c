/*
 * fastpath.c - workers, the asynchronous API-bind stage, the reporter of
 * unschedulable pods and the cluster watcher of the standalone fast path.
 */
#include "agentsched/fastpath/fastpath.h"

#include <assert.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agentsched/core/binder.h"
#include "agentsched/core/cache.h"
#include "agentsched/core/eqcache.h"
#include "agentsched/base/clock.h"
#include "agentsched/base/hash.h"
#include "agentsched/base/log.h"
#include "agentsched/base/metrics.h"
#include "agentsched/k8s/bind.h"
#include "agentsched/k8s/events.h"
#include "agentsched/k8s/status.h"
#include "agentsched/core/sched.h"
#include "agentsched/core/score.h"
#include "agentsched/base/sync.h"

typedef struct fp_worker {
    struct fastpath *fp;
    pthread_t t;
    uint32_t start;    /* rotating scan start for early-stop decisions */
    uint64_t busy_ns;  /* (atomic) */
    uint64_t cpu_ns;   /* (atomic) thread CPU time, refreshed every 64 decisions */
    size_t nodes;      /* node count seen by this worker's last decision */
    score_policy *pol; /* own reference, refreshed every POLICY_REFRESH pops */
    unsigned since_pol;
} fp_worker;

#define POLICY_REFRESH 64

/* A reserved decision waiting for its API bind; the decision's pod is
 * borrowed from the in-flight queue entry, and its gate (shard.h gating)
 * is held until the bind is done. */
typedef struct bind_job {
    struct queue_entry *e;
    uint64_t added_ns;
    decision dc;
} bind_job;

typedef struct report_job {
    char *ns, *name, *uid, *message; /* owned */
} report_job;

#define REPORT_SLOTS 4096 /* lossy per-pod rate table */
#define REPORT_QUEUE 1024

typedef struct fp_metrics {
    metrics_counter *depth_active, *depth_backoff, *depth_unsched, *depth_inflight;
    metrics_counter *queue_full, *queue_rejected, *queue_moves, *queue_flushes;
    metrics_counter *att_scheduled, *att_unsched, *att_conflict, *att_error;
    metrics_histogram *e2e, *st_wait, *st_eval, *st_binder, *st_api;
    metrics_counter *b_fast, *b_rechecked, *b_idempotent, *b_conflict, *b_requeue;
    metrics_counter *bind_failures, *busy_total, *util, *nworkers, *watch_decisions, *watch_binds;
    metrics_counter *eq_hit, *eq_rebuild, *eq_bypass, *eq_classes;
} fp_metrics;

/* The most Bindings of the pod watch's out at once (past them, pods go
 * to the bind threads). */
#define INLINE_BINDS_MAX 64

/* One Binding of the pod watch's whose answer is still to be read. */
typedef struct inline_bind {
    bind_job j;  /* its job, still reserved */
    void *sent;  /* the transport's handle for bind_recv */
    uint64_t t0; /* clock_mono_ns() when it was sent */
} inline_bind;

struct fastpath {
    decision_ports dports; /* the core's gate, fp_bind_port */
    core *core;            /* borrowed */
    fastpath_config cfg;
    fastpath_ops ops;
    bool live;
    queue *q;
    eqcache *eq; /* NULL with cfg.no_eqcache */
    fp_metrics m;

    fp_worker *workers;
    size_t nworkers_started;
    /* The pod watch's own decisions (fastpath_pod_event): a new pod that
     * finds activeQ empty is decided on the watch thread, as a worker
     * would a wake-up later; inline_active counts those under way. */
    fp_worker inline_w;
    int inline_active;           /* (atomic) */
    uint64_t inline_win_ns;      /* pod watch thread only: the budget's window start */
    uint64_t inline_used_ns;     /* ... and the decisions' time in it */
    uint64_t inline_bind_off_ns; /* (atomic) ... and binds its pods too from this clock_mono_ns() */
    /* The pod watch's Bindings whose answers are still to be read
     * (ops.bind_send), oldest first: the watch reads each at a later
     * event once it has come, the watcher when no event brings it. */
    pthread_mutex_t ipmu;
    inline_bind ip[INLINE_BINDS_MAX]; /* a ring (ipmu) */
    unsigned ip_head;                 /* (ipmu) */
    unsigned ip_len;                  /* (ipmu; atomic, also read without it) */

    /* bind stage */
    pthread_mutex_t bmu;
    pthread_cond_t bnotempty, bnotfull;
    bind_job *bq;
    size_t bq_head, bq_len;
    size_t binds_active; /* popped, API call running */
    size_t bidle;        /* bind threads waiting for a job */
    size_t bwoken;       /* signals sent that no woken thread has answered yet */
    size_t bdeferred;    /* jobs queued while every bind thread slept, unsignalled */
    uint64_t bdefer_ns;  /* when the first of them was queued */
    bool bstop;
    pthread_t *binders;
    size_t nbinders_started;

    /* reporter */
    pthread_mutex_t rmu;
    pthread_cond_t rcond;
    report_job rq[REPORT_QUEUE];
    size_t rq_head, rq_len;
    bool rstop;
    pthread_t reporter;
    bool reporter_started;
    uint64_t rate_key[REPORT_SLOTS]; /* reporter thread only */
    uint64_t rate_msg[REPORT_SLOTS];
    int64_t rate_ms[REPORT_SLOTS];

    /* watcher */
    pthread_mutex_t wmu;
    pthread_cond_t wcond; /* CLOCK_MONOTONIC */
    bool wstop;
    int wlong; /* (atomic) the watcher sleeps WATCH_IDLE_MS: the queue held no pod */
    pthread_t watcher;
    bool watcher_started;
    uint64_t seen_node_events, seen_shard_rev, node_sig;

    bool started, stopped;
    int stopping;      /* (atomic) */
    int full_logged;   /* (atomic) "queue full" logged; reset when it has room */
    fastpath_stats st; /* atomics */
};

static void inc(uint64_t *v)
{
    __atomic_add_fetch(v, 1, __ATOMIC_RELAXED);
}

static uint64_t load(const uint64_t *v)
{
    return __atomic_load_n(v, __ATOMIC_RELAXED);
}

/* The chained hashes of report keys and node signatures: each piece folded
 * into the running value with base/hash's mixer. */
static uint64_t chain_bytes(uint64_t h, const void *p, size_t n)
{
    return hash_mix(h ^ hash_bytes(p, n), 0x9E3779B97F4A7C15ull);
}

static uint64_t chain_str(uint64_t h, const char *s)
{
    return s ? chain_bytes(h, s, strlen(s)) : h;
}

/* ---- live-mode ops --------------------------------------------------- */

static as_err live_bind(void *arg, const model_pod *pod, const char *node, as_diag *diag)
{
    core *c = arg;
    if (!core_live(c))
        return as_diag_set(diag, AS_EUNSUPPORTED, NULL, "no API server (embedded mode)");
    return c->ports.bind(c->ports.arg, pod->ns, pod->name, pod->uid, node, diag);
}

static as_err live_bind_try(void *arg, const model_pod *pod, const char *node, as_diag *diag)
{
    core *c = arg;
    if (!core_live(c) || !c->ports.bind_try)
        return AS_EAGAIN; /* the bind thread's live_bind says why */
    return c->ports.bind_try(c->ports.arg, pod->ns, pod->name, pod->uid, node, diag);
}

static as_err live_bind_send(void *arg, const model_pod *pod, const char *node, void **sent,
                             as_diag *diag)
{
    core *c = arg;
    *sent = NULL;
    if (!core_live(c) || !c->ports.bind_send)
        return AS_EUNSUPPORTED;
    return c->ports.bind_send(c->ports.arg, pod->ns, pod->name, pod->uid, node, sent, diag);
}

static as_err live_bind_recv(void *arg, void *sent, const model_pod *pod, const char *node,
                             as_diag *diag)
{
    core *c = arg;
    return c->ports.bind_recv(c->ports.arg, sent, pod->ns, pod->name, pod->uid, node, diag);
}

static bool live_bind_answered(void *arg, void *sent)
{
    core *c = arg;
    return c->ports.bind_answered(c->ports.arg, sent);
}

static void live_unschedulable(void *arg, const model_pod *pod, const char *message)
{
    core *c = arg;
    if (c->ports.unschedulable)
        c->ports.unschedulable(c->ports.arg, pod, message);
}

static void live_scheduled(void *arg, const model_pod *pod, const char *node)
{
    core *c = arg;
    if (c->ports.scheduled)
        c->ports.scheduled(c->ports.arg, pod, node);
}

/* ---- config / metrics ------------------------------------------------ */

/* See fastpath.h. */
void fastpath_config_defaults(fastpath_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->workers = 2;
    cfg->candidates = 3;
    cfg->bind_threads = 32;
    cfg->bind_queue = 4096;
    cfg->full_scan_nodes = 5000;
    cfg->feasible_pct = 0;
    cfg->poll_ms = 20;
    cfg->report_interval_ms = 30000;
    queue_config_defaults(&cfg->queue);
}

static void declare_metrics(fastpath *fp)
{
    metrics *m = fp->core->metrics;
    fp_metrics *x = &fp->m;
    const char *depth = "Pods in the fast-path scheduling queue, by sub-queue.";
    x->depth_active = metrics_new_gauge(m, "agentsched_queue_pods{queue=\"active\"}", depth);
    x->depth_backoff = metrics_new_gauge(m, "agentsched_queue_pods{queue=\"backoff\"}", depth);
    x->depth_unsched =
        metrics_new_gauge(m, "agentsched_queue_pods{queue=\"unschedulable\"}", depth);
    x->depth_inflight = metrics_new_gauge(m, "agentsched_queue_pods{queue=\"inflight\"}", depth);
    x->queue_full = metrics_new_gauge(m, "agentsched_queue_full",
                                      "1 while the queue holds its cap of pods (new pods are "
                                      "refused until a relist offers them again).");
    x->queue_rejected = metrics_new_counter(m, "agentsched_queue_rejected_total",
                                            "Pending pods refused because the queue was full.");
    x->queue_moves = metrics_new_counter(
        m, "agentsched_queue_moves_total",
        "Unschedulable pods moved back by cluster events (node added/changed, pod deleted).");
    x->queue_flushes =
        metrics_new_counter(m, "agentsched_queue_flushes_total",
                            "Unschedulable pods moved back because they waited the maximum time.");
    const char *att = "Fast-path scheduling attempts, by result.";
    x->att_scheduled =
        metrics_new_counter(m, "agentsched_schedule_attempts_total{result=\"scheduled\"}", att);
    x->att_unsched =
        metrics_new_counter(m, "agentsched_schedule_attempts_total{result=\"unschedulable\"}", att);
    x->att_conflict =
        metrics_new_counter(m, "agentsched_schedule_attempts_total{result=\"conflict\"}", att);
    x->att_error =
        metrics_new_counter(m, "agentsched_schedule_attempts_total{result=\"error\"}", att);
    const double *b = metrics_latency_buckets;
    size_t nb = metrics_latency_nbuckets;
    x->e2e =
        metrics_new_histogram(m, "agentsched_pod_scheduling_e2e_seconds",
                              "Pod arrival in the queue (watch ADDED) to API bind done.", b, nb);
    const char *st = "Fast-path latency per stage.";
    x->st_wait = metrics_new_histogram(m, "agentsched_fastpath_stage_seconds{stage=\"queue_wait\"}",
                                       st, b, nb);
    x->st_eval = metrics_new_histogram(m, "agentsched_fastpath_stage_seconds{stage=\"evaluate\"}",
                                       st, b, nb);
    x->st_binder =
        metrics_new_histogram(m, "agentsched_fastpath_stage_seconds{stage=\"binder\"}", st, b, nb);
    x->st_api = metrics_new_histogram(m, "agentsched_fastpath_stage_seconds{stage=\"api_bind\"}",
                                      st, b, nb);
    const char *bh = "Fast-path versioned binder outcomes: accepted fast (version unchanged), "
                     "rechecked (version changed but still fits), idempotent, conflict (a "
                     "candidate refused), requeue (every candidate refused: urgent retry).";
    x->b_fast = metrics_new_counter(m, "agentsched_fastpath_binder_total{result=\"fast\"}", bh);
    x->b_rechecked =
        metrics_new_counter(m, "agentsched_fastpath_binder_total{result=\"rechecked\"}", bh);
    x->b_idempotent =
        metrics_new_counter(m, "agentsched_fastpath_binder_total{result=\"idempotent\"}", bh);
    x->b_conflict =
        metrics_new_counter(m, "agentsched_fastpath_binder_total{result=\"conflict\"}", bh);
    x->b_requeue =
        metrics_new_counter(m, "agentsched_fastpath_binder_total{result=\"requeue\"}", bh);
    x->bind_failures = metrics_new_counter(
        m, "agentsched_fastpath_bind_failures_total",
        "API binds that failed: the pod was released and requeued with backoff (or dropped).");
    x->busy_total = metrics_new_counter(m, "agentsched_fastpath_worker_busy_seconds_total",
                                        "Seconds fast-path workers spent on pods, summed.");
    x->util = metrics_new_gauge(m, "agentsched_fastpath_worker_utilization_percent",
                                "Share of worker time spent on pods over the last second.");
    x->nworkers = metrics_new_gauge(m, "agentsched_fastpath_workers", "Fast-path worker threads.");
    x->watch_decisions = metrics_new_counter(
        m, "agentsched_fastpath_watch_decisions_total",
        "Pods the pod watch decided itself (activeQ was empty) instead of waking a worker.");
    x->watch_binds = metrics_new_counter(m, "agentsched_fastpath_watch_binds_total",
                                         "Pods the pod watch bound itself instead of waking a "
                                         "bind thread.");
    const char *eq = "Fast-path decisions by how the equivalence cache made them: hit (only "
                     "nodes changed since the shape's last decision re-evaluated), rebuild (every "
                     "node evaluated), bypass (a shape seen once: plain full scan).";
    x->eq_hit = metrics_new_counter(m, "agentsched_fastpath_eqcache_total{result=\"hit\"}", eq);
    x->eq_rebuild =
        metrics_new_counter(m, "agentsched_fastpath_eqcache_total{result=\"rebuild\"}", eq);
    x->eq_bypass =
        metrics_new_counter(m, "agentsched_fastpath_eqcache_total{result=\"bypass\"}", eq);
    x->eq_classes = metrics_new_gauge(m, "agentsched_fastpath_eqcache_classes",
                                      "Pod-shape equivalence classes held.");
}

/* ---- reporter -------------------------------------------------------- */

static void report_job_free(report_job *j)
{
    free(j->ns);
    free(j->name);
    free(j->uid);
    free(j->message);
    memset(j, 0, sizeof *j);
}

/* Copies what a report needs (the pod may be gone once settled). */
static report_job report_make(fastpath *fp, const model_pod *pod, const char *message)
{
    report_job j = {0};
    if (!fp->ops.unschedulable)
        return j;
    j = (report_job){strdup(pod->ns), strdup(pod->name), strdup(pod->uid ? pod->uid : ""),
                     strdup(message)};
    if (!j.ns || !j.name || !j.uid || !j.message)
        report_job_free(&j);
    return j;
}

/* Queues an unschedulable report (taking j); dropped when the reporter is
 * behind. Call after the pod was settled in the queue: the reporter skips
 * pods that are not waiting. */
static void report_push(fastpath *fp, report_job j)
{
    if (!j.ns)
        return;
    pthread_mutex_lock(&fp->rmu);
    if (fp->rq_len < REPORT_QUEUE && !fp->rstop) {
        fp->rq[(fp->rq_head + fp->rq_len++) % REPORT_QUEUE] = j;
        pthread_cond_signal(&fp->rcond);
        j.ns = NULL;
    }
    pthread_mutex_unlock(&fp->rmu);
    if (j.ns)
        report_job_free(&j);
}

static void *reporter_main(void *arg)
{
    fastpath *fp = arg;
    pthread_setname_np(pthread_self(), "as-fp-report");
    for (;;) {
        pthread_mutex_lock(&fp->rmu);
        while (!fp->rq_len && !fp->rstop)
            pthread_cond_wait(&fp->rcond, &fp->rmu);
        if (!fp->rq_len) {
            pthread_mutex_unlock(&fp->rmu);
            return NULL;
        }
        report_job j = fp->rq[fp->rq_head];
        fp->rq_head = (fp->rq_head + 1) % REPORT_QUEUE;
        fp->rq_len--;
        pthread_mutex_unlock(&fp->rmu);

        /* Same pod, same message within the interval: already said. */
        uint64_t key = chain_str(chain_str(1469598103934665603ULL, j.ns), j.name);
        key = chain_str(key, j.uid) | 1;
        uint64_t msg = chain_str(1469598103934665603ULL, j.message);
        size_t slot = key % REPORT_SLOTS;
        int64_t t = clock_mono_ms();
        /* Bound, deleted or being retried meanwhile: a late "unschedulable"
         * would be wrong or stale. */
        char qkey[600];
        if (j.uid[0])
            snprintf(qkey, sizeof qkey, "%s", j.uid);
        else
            snprintf(qkey, sizeof qkey, "%s/%s", j.ns, j.name);
        queue_where where = queue_where_is(fp->q, qkey, NULL);
        bool waiting = where == QUEUE_UNSCHED || where == QUEUE_BACKOFF;
        if (waiting && !(fp->rate_key[slot] == key && fp->rate_msg[slot] == msg &&
                         t - fp->rate_ms[slot] < fp->cfg.report_interval_ms)) {
            fp->rate_key[slot] = key;
            fp->rate_msg[slot] = msg;
            fp->rate_ms[slot] = t;
            model_pod view;
            memset(&view, 0, sizeof view);
            view.ns = j.ns;
            view.name = j.name;
            view.uid = j.uid;
            fp->ops.unschedulable(fp->ops.arg, &view, j.message);
        }
        report_job_free(&j);
    }
}

/* ---- bind stage ------------------------------------------------------ */

/* Waking a sleeping bind thread costs the worker a futex call, the largest
 * cost of a fast decision. So a job that no awake thread will get to wakes
 * a sleeper only once BIND_BATCH of them wait or the oldest has waited
 * BIND_DEFER_NS; a worker about to go idle and the watcher (every poll_ms)
 * flush what is left (bind_flush). Every bind thread looks at the queue
 * before sleeping, so awake threads drain it without any wake. */
#define BIND_BATCH    32
#define BIND_DEFER_NS 200000u

/* bind_wake_locked decides (bmu held) whether to wake a sleeper now; the
 * caller signals after unlocking (so the woken thread does not block on
 * the mutex we still hold). */
static bool bind_wake_locked(fastpath *fp, uint64_t now, bool flush)
{
    if (fp->bidle <= fp->bwoken || !fp->bq_len)
        return false; /* nobody left to wake, or nothing to do */
    /* Threads that will look at the queue soon: between two jobs, or woken
     * and not yet running. One inside an API call may be there for long. */
    size_t busy = fp->bidle + fp->binds_active;
    size_t looking = (fp->nbinders_started > busy ? fp->nbinders_started - busy : 0) + fp->bwoken;
    bool wake;
    if (looking) /* a backlog they will not drain soon */
        wake = fp->bq_len > looking * BIND_BATCH;
    else
        wake = flush || fp->bdeferred >= BIND_BATCH || now - fp->bdefer_ns >= BIND_DEFER_NS;
    if (wake) {
        fp->bwoken++;
        fp->bdeferred = 0;
    }
    return wake;
}

/* fp_bind_port is the decisions' bind: the ops' API bind of the reserved
 * pod on its node. */
static as_err fp_bind_port(void *arg, const decision *dc, as_diag *d)
{
    fastpath *fp = arg;
    /* PreBind: the devices go on the pod first (a GPU pod only), with
     * the pod's uid and resourceVersion as preconditions; a conflict is
     * a failed bind like any other (unreserved, requeued with backoff). */
    const model_pod *p = dc->pod;
    as_err err = core_gpu_prebind(fp->core, p->ns, p->name, p->uid, p->resource_version,
                                  dc->out.node, dc->out.gpu_devices, dc->out.gpu_milli, d);
    if (err)
        return err;
    return fp->ops.bind(fp->ops.arg, p, dc->out.node, d);
}

/* fp_bind_port_try: fp_bind_port's one attempt that never waits, or
 * AS_EAGAIN (a GPU pod's devices go on the pod first: a second call). */
static as_err fp_bind_port_try(void *arg, const decision *dc, as_diag *d)
{
    fastpath *fp = arg;
    if (dc->out.gpu_devices || !fp->ops.bind_try)
        return AS_EAGAIN;
    return fp->ops.bind_try(fp->ops.arg, dc->pod, dc->out.node, d);
}

static void bind_push(fastpath *fp, const bind_job *j)
{
    uint64_t now = clock_mono_ns();
    pthread_mutex_lock(&fp->bmu);
    while (fp->bq_len == fp->cfg.bind_queue)
        pthread_cond_wait(&fp->bnotfull, &fp->bmu);
    fp->bq[(fp->bq_head + fp->bq_len++) % fp->cfg.bind_queue] = *j;
    if (!fp->bdeferred++)
        fp->bdefer_ns = now;
    bool wake = bind_wake_locked(fp, now, false);
    pthread_mutex_unlock(&fp->bmu);
    if (wake)
        pthread_cond_signal(&fp->bnotempty);
}

/* bind_room: the bind queue is less than half full, so a bind_push now
 * will not wait for a bind to finish (the pod watch must never wait on
 * the API server's binds). */
static bool bind_room(fastpath *fp)
{
    pthread_mutex_lock(&fp->bmu);
    bool room = fp->bq_len < fp->cfg.bind_queue / 2;
    pthread_mutex_unlock(&fp->bmu);
    return room;
}

/* bind_flush wakes a sleeper for jobs no awake bind thread will take. */
static void bind_flush(fastpath *fp)
{
    pthread_mutex_lock(&fp->bmu);
    bool wake = bind_wake_locked(fp, clock_mono_ns(), true);
    pthread_mutex_unlock(&fp->bmu);
    if (wake)
        pthread_cond_signal(&fp->bnotempty);
}

static void bind_ended(fastpath *fp, bind_job *j, as_err err, const as_diag *d, uint64_t t0);

/* bind_run binds one reserved pod on the API server and ends its
 * decision: the pod leaves the queue when bound (or deleted), else it
 * backs off; the bind's result. With try (the pod watch's own): one
 * attempt that never waits; not settled (AS_EAGAIN), the job goes to the
 * bind threads, still reserved. */
static as_err bind_run(fastpath *fp, const bind_job *jp, bool try)
{
    bind_job j = *jp;
    as_diag d = {{0}, {0}};
    uint64_t t0 = clock_mono_ns();
    /* a failed bind unreserves inside the decision, before its gate ends */
    as_err err = try ? decision_try_bind(&j.dc, &d) : decision_bind(&j.dc, &d);
    if (try && err == AS_EAGAIN) {
        log_debug("msg=\"bind passed to the bind threads\" pod=%s/%s reason=\"%s\"", j.dc.pod->ns,
                  j.dc.pod->name, d.msg[0] ? d.msg : "not tried");
        bind_push(fp, &j);
        return err;
    }
    bind_ended(fp, &j, err, &d, t0);
    return err;
}

/* bind_ended ends job j's decision, whose bind (begun at t0) gave err:
 * the pod leaves the queue when bound (or deleted), else it backs off. */
static void bind_ended(fastpath *fp, bind_job *j, as_err err, const as_diag *d, uint64_t t0)
{
    decision_end(&j->dc);
    const model_pod *pod = j->dc.pod;
    const char *node = j->dc.out.node;
    uint64_t t1 = clock_mono_ns();
    metrics_observe(fp->m.st_api, (double)(t1 - t0) / 1e9);
    if (err == AS_OK) {
        inc(&fp->st.scheduled);
        metrics_inc(fp->m.att_scheduled);
        metrics_observe(fp->m.e2e, (double)(t1 - j->added_ns) / 1e9);
        if (fp->ops.scheduled)
            fp->ops.scheduled(fp->ops.arg, pod, node);
        log_debug("msg=\"bound\" pod=%s/%s node=%s api_us=%llu", pod->ns, pod->name, node,
                  (unsigned long long)((t1 - t0) / 1000));
        queue_done(fp->q, j->e);
    } else {
        metrics_inc(fp->m.bind_failures);
        log_info("msg=\"API bind failed; pod released\" pod=%s/%s node=%s err=\"%s\"", pod->ns,
                 pod->name, node, d->msg[0] ? d->msg : as_strerror(err));
        if (err == AS_ENOTFOUND) {
            inc(&fp->st.dropped); /* deleted: the watch tells */
            queue_done(fp->q, j->e);
        } else {
            /* Bound elsewhere (AS_ECONFLICT) included: the watch removes
             * the pod once it shows the binding; should it never (the
             * conflict was not what it said), the pod is tried again
             * instead of being stranded. */
            inc(&fp->st.bind_failed);
            queue_backoff(fp->q, j->e);
        }
        /* The released capacity may fit pods that failed meanwhile. */
        queue_move_all(fp->q);
    }
}

static void *binder_main(void *arg)
{
    fastpath *fp = arg;
    pthread_setname_np(pthread_self(), "as-fp-bind");
    bool had_job = false;
    for (;;) {
        pthread_mutex_lock(&fp->bmu);
        /* The previous job ends here, under the lock taken for the next
         * one anyway (one bind-queue lock round trip per job, not two). */
        if (had_job)
            fp->binds_active--;
        had_job = false;
        while (!fp->bq_len && !fp->bstop) {
            fp->bidle++;
            pthread_cond_wait(&fp->bnotempty, &fp->bmu);
            fp->bidle--;
            if (fp->bwoken)
                fp->bwoken--;
        }
        if (!fp->bq_len) {
            pthread_mutex_unlock(&fp->bmu);
            return NULL;
        }
        had_job = true;
        bind_job j = fp->bq[fp->bq_head];
        fp->bq_head = (fp->bq_head + 1) % fp->cfg.bind_queue;
        if (!--fp->bq_len)
            fp->bdeferred = 0;
        fp->binds_active++;
        pthread_cond_signal(&fp->bnotfull);
        pthread_mutex_unlock(&fp->bmu);

        bind_run(fp, &j, false);
    }
}

/* The pod watch's binds (bind_inline) pause this long after a try that
 * was not settled, or one it waited for that took this long. */
#define INLINE_BIND_SLOW_NS  50000000u
#define INLINE_BIND_PAUSE_NS 1000000000u

/* inline_pause turns the pod watch's binds off for INLINE_BIND_PAUSE_NS
 * after a try at t1 that was not settled, or, when slow counts (a try
 * the watch waited for), slower than INLINE_BIND_SLOW_NS since t0. */
static void inline_pause(fastpath *fp, as_err err, bool slow, uint64_t t0, uint64_t t1)
{
    if (err == AS_EAGAIN || (slow && t1 - t0 > INLINE_BIND_SLOW_NS))
        __atomic_store_n(&fp->inline_bind_off_ns, t1 + INLINE_BIND_PAUSE_NS, __ATOMIC_RELAXED);
}

/* watch_bound counts a bind of the pod watch's own that succeeded. */
static void watch_bound(fastpath *fp, as_err err)
{
    if (err == AS_OK) {
        inc(&fp->st.watch_binds);
        metrics_inc(fp->m.watch_binds);
    }
}

/* An answer of the pod watch's Bindings not read this long after the send
 * is waited for (by the watcher, 250 ms at most, then the bind threads
 * settle it). */
#define INLINE_ANSWER_LATE_NS 200000000u

/* inline_settle reads the answers to the pod watch's Bindings that are
 * out, oldest first, as long as they have come; with wait, or once the
 * oldest is late (INLINE_ANSWER_LATE_NS), it waits for that one (250 ms
 * at most). Not settled, a job goes to the bind threads, still reserved;
 * settled, its decision ends as a bind thread's would. Any thread. */
static void inline_settle(fastpath *fp, bool wait)
{
    while (__atomic_load_n(&fp->ip_len, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&fp->ipmu);
        if (!fp->ip_len) {
            pthread_mutex_unlock(&fp->ipmu);
            return;
        }
        const inline_bind *o = &fp->ip[fp->ip_head];
        if (!wait && clock_mono_ns() - o->t0 <= INLINE_ANSWER_LATE_NS &&
            !fp->ops.bind_answered(fp->ops.arg, o->sent)) {
            pthread_mutex_unlock(&fp->ipmu);
            return;
        }
        inline_bind b = *o;
        fp->ip_head = (fp->ip_head + 1) % INLINE_BINDS_MAX;
        __atomic_store_n(&fp->ip_len, fp->ip_len - 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&fp->ipmu);
        wait = false; /* one waited for at most */
        as_diag d = {{0}, {0}};
        as_err err = fp->ops.bind_recv(fp->ops.arg, b.sent, b.j.dc.pod, b.j.dc.out.node, &d);
        inline_pause(fp, err, false, b.t0, clock_mono_ns());
        if (err == AS_EAGAIN) {
            log_debug("msg=\"bind passed to the bind threads\" pod=%s/%s reason=\"%s\"",
                      b.j.dc.pod->ns, b.j.dc.pod->name, d.msg);
            bind_push(fp, &b.j);
            continue;
        }
        decision_bind_settled(&b.j.dc, err);
        bind_ended(fp, &b.j, err, &d, b.t0);
        watch_bound(fp, err);
    }
}

/* bind_inline: the pod watch binds the pod it decided itself, saving a
 * bind thread's wake-up and hand-off (the largest cost of a pod that
 * comes alone), in one attempt that never waits (k8s_bind_try, 250 ms at
 * most). Where the transport can, the Binding is sent and its answer read
 * later (inline_settle at a later event of the watch's, once it has
 * come), so the watch sleeps for no answer and, under load, reads several
 * answers in the wake-ups its events cost anyway; up to INLINE_BINDS_MAX
 * are out at once, past them the pod goes to the bind threads. A try not
 * settled, or one the watch waited for (the transport cannot split it)
 * slower than INLINE_BIND_SLOW_NS (a slow or refusing API server, every
 * handle busy), turns this off for INLINE_BIND_PAUSE_NS: the bind
 * threads bind meanwhile. */
static void bind_inline(fastpath *fp, const bind_job *j)
{
    uint64_t t0 = clock_mono_ns();
    inline_settle(fp, false);
    if (clock_mono_ns() < __atomic_load_n(&fp->inline_bind_off_ns, __ATOMIC_RELAXED) ||
        __atomic_load_n(&fp->ip_len, __ATOMIC_ACQUIRE) >= INLINE_BINDS_MAX) {
        bind_push(fp, j);
        return;
    }
    as_err err = AS_EUNSUPPORTED;
    as_diag d = {{0}, {0}};
    void *sent = NULL;
    if (fp->ops.bind_send && !j->dc.out.gpu_devices)
        err = fp->ops.bind_send(fp->ops.arg, j->dc.pod, j->dc.out.node, &sent, &d);
    if (err == AS_OK) {
        pthread_mutex_lock(&fp->ipmu);
        /* only this thread adds, and the room was checked above */
        assert(fp->ip_len < INLINE_BINDS_MAX);
        fp->ip[(fp->ip_head + fp->ip_len) % INLINE_BINDS_MAX] = (inline_bind){*j, sent, t0};
        __atomic_store_n(&fp->ip_len, fp->ip_len + 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&fp->ipmu);
        return;
    }
    if (err == AS_EAGAIN) {
        inline_pause(fp, err, false, t0, clock_mono_ns());
        bind_push(fp, j);
        return;
    }
    if (err != AS_EUNSUPPORTED) {
        bind_job jj = *j;
        decision_bind_settled(&jj.dc, err);
        bind_ended(fp, &jj, err, &d, t0);
        return;
    }
    err = bind_run(fp, j, true);
    watch_bound(fp, err);
    inline_pause(fp, err, true, t0, clock_mono_ns());
}

/* With no pod in the queue there is nothing for the watcher to move back,
 * flush or apply, so it wakes this seldom (metrics and the node signature
 * keep up); a pod found unschedulable wakes it at once (watcher_wake), and
 * it returns to poll_ms while the queue holds pods. */
#define WATCH_IDLE_MS 1000

/* watcher_wake ends the watcher's idle sleep: a pod joined the
 * unschedulable pool, which node changes must now move back within
 * poll_ms. */
static void watcher_wake(fastpath *fp)
{
    if (!__atomic_load_n(&fp->wlong, __ATOMIC_SEQ_CST))
        return;
    pthread_mutex_lock(&fp->wmu);
    pthread_cond_signal(&fp->wcond);
    pthread_mutex_unlock(&fp->wmu);
}

/* ---- workers --------------------------------------------------------- */

/* kube-scheduler's numFeasibleNodesToFind, above full_scan_nodes only. */
static uint32_t max_feasible(const fastpath *fp, size_t n)
{
    if (n <= fp->cfg.full_scan_nodes)
        return 0;
    size_t pct = fp->cfg.feasible_pct;
    if (!pct) {
        pct = n / 125 >= 45 ? 5 : 50 - n / 125;
    }
    size_t k = n * pct / 100;
    if (k < 100)
        k = 100;
    return k >= n ? 0 : (uint32_t)k;
}

/* held_by_cache: does the cache already charge pod to a node (assumed by
 * a bind of ours, or bound)? */
static bool held_by_cache(cache *c, const model_pod *pod)
{
    char tmp[600];
    cache_pod_info info;
    cache_pod_lookup(c, model_pod_key(pod, tmp, sizeof tmp, NULL), &info);
    return info.state != CACHE_POD_ABSENT;
}

static void decide(fp_worker *w, const queue_item *it)
{
    fastpath *fp = w->fp;
    core *co = fp->core;
    const model_pod *pod = it->pod;
    /* A pod seen for the first time that the cache already holds is not
     * pending: the watch delivered an unbound version of it (the PreBind
     * annotation patch) after our bind had succeeded and the queue had let
     * it go, so the queue took it as new. Deciding it again would count it
     * twice in the learned score tables (placements would drift from the
     * replay's) and bind it twice. A retried pod was released by the
     * cache and needs no look-up. */
    if (!it->attempts && !it->urgent && held_by_cache(co->cache, pod)) {
        inc(&fp->st.dropped);
        log_debug("msg=\"already placed; dropped from the queue\" pod=%s/%s", pod->ns, pod->name);
        queue_done(fp->q, it->e);
        return;
    }
    uint64_t t0 = clock_mono_ns();
    /* Its gate is held from evaluation until the pod is bound on the API
     * server, or the decision is dropped (shard.h gating). */
    decision dc;
    decision_begin(&dc, co->binder, &fp->dports);
    bool held = true;
    metrics_observe(fp->m.st_wait, (double)(t0 - it->active_ns) / 1e9);
    if (!w->pol || ++w->since_pol >= POLICY_REFRESH) {
        if (w->pol)
            score_policy_unref(w->pol);
        w->pol = core_policy_get(co);
        w->since_pol = 0;
    }
    if (!it->attempts && !it->urgent)
        score_observe_pod(w->pol, pod);
    inc(&fp->st.attempts);

    sched_result res;
    as_err err;
    size_t nnodes;
    if (fp->eq) {
        /* Only a first sighting's early stop needs the size: the last
         * decision's count does (no extra lock round trip per decision). */
        nnodes = w->nodes;
    } else {
        cache_read_lock(co->cache);
        nnodes = cache_node_count(co->cache);
        cache_read_unlock(co->cache);
    }
    sched_request req;
    memset(&req, 0, sizeof req);
    req.pod = pod;
    req.policy = w->pol;
    req.k = fp->cfg.candidates;
    req.max_feasible = max_feasible(fp, nnodes);
    req.start = w->start;
    w->start += 7919; /* a prime: successive samples start elsewhere */
    if (fp->eq) {
        /* Full-scan quality from the pod shape's class; a shape seen for
         * the first time is decided as before (req: early stop above
         * full_scan_nodes). */
        eqcache_how how = EQCACHE_HIT;
        err = eqcache_evaluate_ex(fp->eq, w->pol, pod, fp->cfg.candidates, &req, &res, &how);
        /* A class or a full scan counts every node; an early stop fewer. */
        if (how != EQCACHE_BYPASS || !req.max_feasible || res.evaluated > nnodes)
            nnodes = w->nodes = res.evaluated;
    } else {
        err = sched_evaluate(co->cache, &req, &res);
    }
    uint64_t t1 = clock_mono_ns();
    metrics_observe(fp->m.st_eval, (double)(t1 - t0) / 1e9);
    if (err) {
        metrics_inc(fp->m.att_error);
        log_warn("msg=\"evaluation failed\" pod=%s/%s err=%s", pod->ns, pod->name,
                 as_strerror(err));
        queue_backoff(fp->q, it->e);
        goto done;
    }
    /* The policy's floor for standalone candidates. */
    double floor = score_policy_min_score(w->pol);
    uint32_t nc = 0;
    for (uint32_t i = 0; i < res.ncand; i++)
        if (res.cand[i].score >= floor)
            res.cand[nc++] = res.cand[i];
    if (!nc) {
        char msg[2048];
        if (res.ncand) {
            snprintf(msg, sizeof msg,
                     "0/%zu nodes are available: %zu node(s) scored below the policy's "
                     "minimum score.",
                     nnodes, res.feasible);
        } else {
            sched_format_unschedulable(&res, res.evaluated > nnodes ? res.evaluated : nnodes, msg,
                                       sizeof msg);
        }
        inc(&fp->st.unschedulable);
        metrics_inc(fp->m.att_unsched);
        log_debug("msg=\"unschedulable\" pod=%s/%s reason=\"%s\"", pod->ns, pod->name, msg);
        report_job j = report_make(fp, pod, msg);
        queue_unschedulable(fp->q, it->e);
        watcher_wake(fp);
        report_push(fp, j);
        goto done;
    }
    err = decision_reserve(&dc, pod, res.cand, nc);
    const binder_outcome oc = dc.out;
    uint64_t t2 = clock_mono_ns();
    metrics_observe(fp->m.st_binder, (double)(t2 - t1) / 1e9);
    /* Every candidate tried before the chosen one was refused. */
    uint32_t refused = err == AS_OK ? (uint32_t)oc.chosen : nc;
    if (refused)
        metrics_add(fp->m.b_conflict, refused);
    if (err == AS_OK) {
        if (oc.how == BINDER_FAST) {
            inc(&fp->st.accepted_fast);
            metrics_inc(fp->m.b_fast);
        } else if (oc.how == BINDER_RECHECKED) {
            inc(&fp->st.accepted_rechecked);
            metrics_inc(fp->m.b_rechecked);
        } else {
            inc(&fp->st.accepted_idempotent);
            metrics_inc(fp->m.b_idempotent);
        }
        bind_job j = {it->e, it->added_ns, dc};
        held = false; /* the bind ends the decision */
        if (w == &fp->inline_w &&
            t2 >= __atomic_load_n(&fp->inline_bind_off_ns, __ATOMIC_RELAXED) && !oc.gpu_devices)
            bind_inline(fp, &j);
        else
            bind_push(fp, &j);
    } else if (err == AS_ECONFLICT) {
        char tmp[600];
        const char *uid = model_pod_key(pod, tmp, sizeof tmp, NULL);
        cache_pod_info info;
        cache_pod_lookup(co->cache, uid, &info);
        if (info.state != CACHE_POD_ABSENT) {
            /* bound (or being bound) by someone else: not ours any more */
            inc(&fp->st.dropped);
            queue_done(fp->q, it->e);
        } else {
            inc(&fp->st.conflicts);
            metrics_inc(fp->m.att_conflict);
            metrics_inc(fp->m.b_requeue);
            log_debug("msg=\"binder conflict; urgent retry\" pod=%s/%s reason=\"%s\"", pod->ns,
                      pod->name, oc.reason);
            queue_urgent(fp->q, it->e);
        }
    } else {
        metrics_inc(fp->m.att_error);
        log_warn("msg=\"binder failed\" pod=%s/%s err=%s", pod->ns, pod->name, as_strerror(err));
        queue_backoff(fp->q, it->e);
    }
done:
    if (held)
        decision_end(&dc);
    sched_result_free(&res);
    __atomic_add_fetch(&w->busy_ns, clock_mono_ns() - t0, __ATOMIC_RELAXED);
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *worker_main(void *arg)
{
    fp_worker *w = arg;
    fastpath *fp = w->fp;
    pthread_setname_np(pthread_self(), "as-fp-worker");
    /* Live mode: no decision before the first full sync of nodes and pods,
     * or a node's running pods might not be counted yet. */
    while (fp->live && !core_ready(fp->core) && !__atomic_load_n(&fp->stopping, __ATOMIC_ACQUIRE)) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    queue_item it;
    unsigned n = 0;
    for (;;) {
        as_err err = queue_pop(w->fp->q, 0, &it);
        if (err == AS_ETIMEOUT) {
            bind_flush(fp); /* going idle: nothing may wait for a wake */
            err = queue_pop(w->fp->q, -1, &it);
        }
        if (err != AS_OK)
            break;
        decide(w, &it);
        if (++n % 64 == 0)
            __atomic_store_n(&w->cpu_ns, thread_cpu_ns(), __ATOMIC_RELAXED);
    }
    __atomic_store_n(&w->cpu_ns, thread_cpu_ns(), __ATOMIC_RELAXED);
    return NULL;
}

/* ---- watcher --------------------------------------------------------- */

/* Hash of what can make a pod fit on any node, apart from usage: the set
 * of node incarnations, allocatable, readiness, schedulability, taints,
 * labels, shard membership. Node status heartbeats leave it unchanged. */
static uint64_t node_signature(cache *c)
{
    uint64_t h = 1469598103934665603ULL;
    cache_read_lock(c);
    size_t n = cache_node_count(c);
    for (size_t i = 0; i < n; i++) {
        const cache_node *node = cache_node_at(c, i);
        const model_node *sp = node->spec;
        h = chain_bytes(h, &node->id, sizeof node->id);
        h = chain_bytes(h, &node->alloc, sizeof node->alloc);
        unsigned char flags[3] = {node->ready, node->unschedulable, cache_node_in_shard(node)};
        h = chain_bytes(h, flags, sizeof flags);
        for (uint32_t t = 0; t < sp->ntaints; t++) {
            h = chain_str(h, sp->taints[t].key);
            h = chain_str(h, sp->taints[t].value);
            h = chain_bytes(h, &sp->taints[t].effect, sizeof sp->taints[t].effect);
        }
        for (uint32_t l = 0; l < sp->labels.n; l++) {
            h = chain_str(h, sp->labels.items[l].key);
            h = chain_str(h, sp->labels.items[l].value);
        }
    }
    cache_read_unlock(c);
    return h;
}

/* publish_metrics returns how many pods the queue holds. */
static size_t publish_metrics(fastpath *fp)
{
    queue_stats qs;
    queue_get_stats(fp->q, &qs);
    metrics_set(fp->m.depth_active, (int64_t)qs.active);
    metrics_set(fp->m.depth_backoff, (int64_t)qs.backoff);
    metrics_set(fp->m.depth_unsched, (int64_t)qs.unsched);
    metrics_set(fp->m.depth_inflight, (int64_t)qs.inflight);
    metrics_set(fp->m.queue_full, qs.full);
    if (!qs.full)
        __atomic_store_n(&fp->full_logged, 0, __ATOMIC_RELAXED);
    metrics_set(fp->m.queue_rejected, (int64_t)qs.rejected_full);
    metrics_set(fp->m.queue_moves, (int64_t)qs.moved);
    metrics_set(fp->m.queue_flushes, (int64_t)qs.flushed);
    if (fp->eq) {
        eqcache_stats es;
        eqcache_get_stats(fp->eq, &es);
        metrics_set(fp->m.eq_hit, (int64_t)es.hits);
        metrics_set(fp->m.eq_rebuild, (int64_t)es.rebuilds);
        metrics_set(fp->m.eq_bypass, (int64_t)es.bypass);
        metrics_set(fp->m.eq_classes, (int64_t)es.classes);
    }
    return qs.total;
}

static void *watcher_main(void *arg)
{
    fastpath *fp = arg;
    pthread_setname_np(pthread_self(), "as-fp-watch");
    cache *c = fp->core->cache;
    uint64_t win_start = clock_mono_ns(), win_busy = 0;
    fp->node_sig = node_signature(c);
    bool idle = false;
    for (;;) {
        pthread_mutex_lock(&fp->wmu);
        if (!fp->wstop) {
            int64_t ms = (int64_t)fp->cfg.poll_ms;
            if (idle) {
                /* Announced first, then checked again: a pod queued after
                 * this check finds wlong set, and its watcher_wake waits
                 * for wmu, which the wait below releases. */
                __atomic_store_n(&fp->wlong, 1, __ATOMIC_SEQ_CST);
                queue_stats qs;
                queue_get_stats(fp->q, &qs);
                if (qs.total == 0 && ms < WATCH_IDLE_MS)
                    ms = WATCH_IDLE_MS;
            }
            struct timespec ts = clock_deadline_ms(ms);
            pthread_cond_timedwait(&fp->wcond, &fp->wmu, &ts);
            __atomic_store_n(&fp->wlong, 0, __ATOMIC_RELEASE);
        }
        bool stop = fp->wstop;
        pthread_mutex_unlock(&fp->wmu);
        if (stop)
            return NULL;
        /* a Binding of the pod watch's whose answer no event brought */
        inline_settle(fp, false);

        cache_stats cs;
        cache_get_stats(c, &cs);
        uint64_t rev = cache_shard_revision(c);
        if (cs.node_events != fp->seen_node_events || rev != fp->seen_shard_rev) {
            fp->seen_node_events = cs.node_events;
            fp->seen_shard_rev = rev;
            uint64_t sig = node_signature(c);
            if (sig != fp->node_sig) {
                fp->node_sig = sig;
                size_t n = queue_move_all(fp->q);
                if (n)
                    log_debug("msg=\"nodes changed; unschedulable pods moved back\" pods=%zu", n);
            }
        }
        idle = publish_metrics(fp) == 0;
        bind_flush(fp); /* bounds the deferral whatever the workers do */
        uint64_t t = clock_mono_ns();
        if (t - win_start >= 1000000000u) {
            uint64_t busy = 0;
            size_t nw = __atomic_load_n(&fp->nworkers_started, __ATOMIC_ACQUIRE);
            for (size_t i = 0; i < nw; i++)
                busy += __atomic_load_n(&fp->workers[i].busy_ns, __ATOMIC_RELAXED);
            double cap = (double)(t - win_start) * (double)(fp->cfg.workers ? fp->cfg.workers : 1);
            metrics_set(fp->m.util, (int64_t)(100.0 * (double)(busy - win_busy) / cap + 0.5));
            metrics_set(fp->m.busy_total, (int64_t)(busy / 1000000000u));
            win_busy = busy;
            win_start = t;
        }
    }
}

/* ---- lifecycle -------------------------------------------------------- */

/* See fastpath.h. */
as_err fastpath_new(core *c, const fastpath_config *cfg, const fastpath_ops *ops, fastpath **out,
                    as_diag *diag)
{
    *out = NULL;
    fastpath *fp = calloc(1, sizeof *fp);
    if (!fp)
        return AS_ENOMEM;
    fp->core = c;
    fastpath_config_defaults(&fp->cfg);
    if (cfg) {
        queue_config qc = fp->cfg.queue;
        fp->cfg = *cfg;
        if (!fp->cfg.workers)
            fp->cfg.workers = 2;
        if (!fp->cfg.candidates)
            fp->cfg.candidates = c->cfg.candidates ? c->cfg.candidates : 3;
        if (!fp->cfg.bind_threads)
            fp->cfg.bind_threads = 32;
        if (!fp->cfg.bind_queue)
            fp->cfg.bind_queue = 4096;
        if (!fp->cfg.full_scan_nodes)
            fp->cfg.full_scan_nodes = 5000;
        if (fp->cfg.poll_ms <= 0)
            fp->cfg.poll_ms = 20;
        if (fp->cfg.report_interval_ms <= 0)
            fp->cfg.report_interval_ms = 30000;
        if (!fp->cfg.queue.clock) {
            fp->cfg.queue.clock = qc.clock;
            fp->cfg.queue.clock_arg = NULL;
        }
    } else {
        fp->cfg.workers = 2;
        fp->cfg.candidates = c->cfg.candidates ? c->cfg.candidates : 3;
    }
    if (fp->cfg.candidates > SCHED_MAX_K)
        fp->cfg.candidates = SCHED_MAX_K;
    if (fp->cfg.workers > 256)
        fp->cfg.workers = 256;
    if (!fp->cfg.scheduler_name)
        fp->cfg.scheduler_name = FASTPATH_DEFAULT_SCHEDULER_NAME;
    if (ops) {
        fp->ops = *ops;
    } else {
        fp->live = true;
        fp->ops =
            (fastpath_ops){live_bind,     live_unschedulable, live_scheduled, c,
                           live_bind_try, live_bind_send,     live_bind_recv, live_bind_answered};
    }
    fp->dports = core_decision_ports(c, fp_bind_port, NULL, fp);
    fp->dports.try_bind = fp_bind_port_try;
    if (!fp->ops.bind) {
        free(fp);
        return as_diag_set(diag, AS_EINVAL, NULL, "fast path: no bind function");
    }
    as_err err = queue_new(&fp->cfg.queue, &fp->q);
    if (!err && !fp->cfg.no_eqcache) {
        eqcache_config ec;
        eqcache_config_defaults(&ec);
        if (fp->cfg.eq_max_classes)
            ec.max_classes = fp->cfg.eq_max_classes;
        err = eqcache_new(c->cache, &ec, &fp->eq);
    }
    if (!err) {
        fp->bq = calloc(fp->cfg.bind_queue, sizeof *fp->bq);
        fp->workers = calloc(fp->cfg.workers, sizeof *fp->workers);
        fp->binders = calloc(fp->cfg.bind_threads, sizeof *fp->binders);
        if (!fp->bq || !fp->workers || !fp->binders)
            err = AS_ENOMEM;
    }
    if (err) {
        queue_free(fp->q);
        eqcache_free(fp->eq);
        free(fp->bq);
        free(fp->workers);
        free(fp->binders);
        free(fp);
        return as_diag_set(diag, err, NULL, "fast path: out of memory");
    }
    sync_mutex_init_hot(&fp->bmu);
    pthread_mutex_init(&fp->ipmu, NULL);
    pthread_cond_init(&fp->bnotempty, NULL);
    pthread_cond_init(&fp->bnotfull, NULL);
    pthread_mutex_init(&fp->rmu, NULL);
    pthread_cond_init(&fp->rcond, NULL);
    pthread_mutex_init(&fp->wmu, NULL);
    clock_cond_init(&fp->wcond);
    fp->inline_w.fp = fp;
    fp->inline_w.start = 0x9e3779b9u;
    declare_metrics(fp);
    metrics_set(fp->m.nworkers, fp->cfg.workers);
    *out = fp;
    return AS_OK;
}

/* See fastpath.h. */
as_err fastpath_start(fastpath *fp)
{
    if (fp->started)
        return AS_OK;
    fp->started = true;
    for (size_t i = 0; i < fp->cfg.bind_threads; i++) {
        if (pthread_create(&fp->binders[i], NULL, binder_main, fp))
            goto fail;
        fp->nbinders_started++;
    }
    if (pthread_create(&fp->reporter, NULL, reporter_main, fp))
        goto fail;
    fp->reporter_started = true;
    for (size_t i = 0; i < fp->cfg.workers; i++) {
        fp->workers[i].fp = fp;
        fp->workers[i].start = (uint32_t)(i * 2654435761u);
        if (pthread_create(&fp->workers[i].t, NULL, worker_main, &fp->workers[i]))
            goto fail;
        /* The reporter (started above) and fastpath_get_stats read the
         * count while it grows: publish each started worker. */
        __atomic_store_n(&fp->nworkers_started, i + 1, __ATOMIC_RELEASE);
    }
    if (pthread_create(&fp->watcher, NULL, watcher_main, fp))
        goto fail;
    fp->watcher_started = true;
    log_info("msg=\"fast path started\" scheduler_name=%s workers=%u candidates=%u "
             "bind_threads=%u",
             fp->cfg.scheduler_name, fp->cfg.workers, fp->cfg.candidates, fp->cfg.bind_threads);
    return AS_OK;
fail:
    fastpath_stop(fp);
    return AS_ENOMEM;
}

/* See fastpath.h. */
void fastpath_stop(fastpath *fp)
{
    if (!fp || !fp->started || fp->stopped)
        return;
    fp->stopped = true;
    __atomic_store_n(&fp->stopping, 1, __ATOMIC_RELEASE);
    queue_shutdown(fp->q);
    for (size_t i = 0; i < fp->nworkers_started; i++)
        pthread_join(fp->workers[i].t, NULL);
    /* A decision the pod watch took before the shutdown ends like a
     * worker's: before the bind threads are told to stop. */
    while (__atomic_load_n(&fp->inline_active, __ATOMIC_SEQ_CST)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    while (__atomic_load_n(&fp->ip_len, __ATOMIC_ACQUIRE))
        inline_settle(fp, true);
    /* Workers are gone: the bind queue only drains now. */
    pthread_mutex_lock(&fp->bmu);
    fp->bstop = true;
    pthread_cond_broadcast(&fp->bnotempty);
    pthread_mutex_unlock(&fp->bmu);
    for (size_t i = 0; i < fp->nbinders_started; i++)
        pthread_join(fp->binders[i], NULL);
    pthread_mutex_lock(&fp->rmu);
    fp->rstop = true;
    pthread_cond_broadcast(&fp->rcond);
    pthread_mutex_unlock(&fp->rmu);
    if (fp->reporter_started)
        pthread_join(fp->reporter, NULL);
    pthread_mutex_lock(&fp->wmu);
    fp->wstop = true;
    pthread_cond_broadcast(&fp->wcond);
    pthread_mutex_unlock(&fp->wmu);
    if (fp->watcher_started)
        pthread_join(fp->watcher, NULL);
    for (size_t i = 0; i < fp->nworkers_started; i++)
        if (fp->workers[i].pol) {
            score_policy_unref(fp->workers[i].pol);
            fp->workers[i].pol = NULL;
        }
    if (fp->inline_w.pol) {
        score_policy_unref(fp->inline_w.pol);
        fp->inline_w.pol = NULL;
    }
    log_info("msg=\"fast path stopped\"");
}

/* See fastpath.h. */
void fastpath_free(fastpath *fp)
{
    if (!fp)
        return;
    fastpath_stop(fp);
    while (fp->rq_len) {
        report_job_free(&fp->rq[fp->rq_head]);
        fp->rq_head = (fp->rq_head + 1) % REPORT_QUEUE;
        fp->rq_len--;
    }
    queue_free(fp->q);
    eqcache_free(fp->eq);
    free(fp->bq);
    free(fp->workers);
    free(fp->binders);
    pthread_mutex_destroy(&fp->bmu);
    pthread_mutex_destroy(&fp->ipmu);
    pthread_cond_destroy(&fp->bnotempty);
    pthread_cond_destroy(&fp->bnotfull);
    pthread_mutex_destroy(&fp->rmu);
    pthread_cond_destroy(&fp->rcond);
    pthread_mutex_destroy(&fp->wmu);
    pthread_cond_destroy(&fp->wcond);
    free(fp);
}

/* See fastpath.h. */
queue *fastpath_queue(fastpath *fp)
{
    return fp->q;
}

/* See fastpath.h. */
void fastpath_set_leading(void *arg, bool leading)
{
    fastpath *fp = arg;
    queue_hold(fp->q, !leading);
    log_info("msg=\"%s\" scheduler_name=%s",
             leading ? "fast path scheduling" : "fast path on standby",
             fp->cfg.scheduler_name ? fp->cfg.scheduler_name : "-");
}

/* offered passes on a queue_add's result, warning once per full spell
 * when the queue refused the pod. */
static as_err offered(fastpath *fp, as_err err)
{
    if (err == AS_ELIMIT && !__atomic_exchange_n(&fp->full_logged, 1, __ATOMIC_RELAXED))
        log_warn("msg=\"scheduling queue full; pod not queued (a relist offers it again)\" "
                 "cap=%zu",
                 fp->cfg.queue.max_pods);
    return err;
}

/* See fastpath.h. */
as_err fastpath_offer(fastpath *fp, model_pod *pod)
{
    return offered(fp, queue_add(fp->q, pod));
}

/* The pod watch's own decisions and binds may take at most
 * INLINE_BUDGET_NS of every INLINE_WINDOW_NS (half of its time); past
 * that, pods go to the workers until the next window. */
#define INLINE_WINDOW_NS 100000000u
#define INLINE_BUDGET_NS 50000000u

/* See fastpath.h. */
bool fastpath_pod_event(void *arg, k8s_event_type ev, model_pod *pod)
{
    fastpath *fp = arg;
    if (ev == K8S_EV_SYNC_BEGIN) {
        queue_sync_begin(fp->q);
        return false;
    }
    if (ev == K8S_EV_SYNC_END) {
        size_t gone = queue_sync_end(fp->q);
        if (gone)
            log_info("msg=\"relist: pods gone from the queue\" pods=%zu", gone);
        queue_move_all(fp->q); /* anything may have changed while the watch was down */
        return false;
    }
    if (!pod || (ev != K8S_EV_ADDED && ev != K8S_EV_MODIFIED && ev != K8S_EV_DELETED))
        return false;
    char tmp[600];
    const char *uid = model_pod_key(pod, tmp, sizeof tmp, NULL);
    /* the answer to the watch's last Binding first, when it has come (as
     * a rule before the pod's own event: not waited for even then, as the
     * answer that follows that event by a fraction of a millisecond would
     * cost a sleep, and the next event or the watcher reads it) */
    inline_settle(fp, false);
    if (ev == K8S_EV_DELETED) {
        queue_remove(fp->q, uid);
        if (pod->node_name)
            queue_move_all(fp->q); /* its capacity is free now */
        return false;
    }
    if (pod->node_name) {
        queue_remove(fp->q, uid); /* bound: by us (confirmed) or by someone else */
        if (model_pod_is_terminal(pod))
            queue_move_all(fp->q);
        return false;
    }
    if (pod->terminating || model_pod_is_terminal(pod) || !pod->scheduler_name ||
        strcmp(pod->scheduler_name, fp->cfg.scheduler_name) != 0) {
        queue_remove(fp->q, uid);
        return false;
    }
    /* The watch thread decides a pod the workers are not behind on
     * itself (activeQ empty): this saves waking a worker, a futex wake
     * here and a context switch there, a tenth of the CPU a pod. Within
     * a budget of its time, so that with slow decisions (large clusters)
     * or many pods the watch keeps reading and the workers decide. */
    uint64_t now = clock_mono_ns();
    if (now - fp->inline_win_ns >= INLINE_WINDOW_NS) {
        fp->inline_win_ns = now;
        fp->inline_used_ns = 0;
    }
    if (!fp->live || fp->inline_used_ns >= INLINE_BUDGET_NS || !core_ready(fp->core) ||
        !bind_room(fp)) {
        fastpath_offer(fp, pod); /* takes the pod in every case */
        return true;
    }
    __atomic_add_fetch(&fp->inline_active, 1, __ATOMIC_SEQ_CST);
    queue_item it;
    offered(fp, queue_add_take(fp->q, pod, &it));
    if (it.e) {
        inc(&fp->st.watch_decisions);
        metrics_inc(fp->m.watch_decisions);
        decide(&fp->inline_w, &it);
        bind_flush(fp); /* as a worker going idle: the job must not wait */
        fp->inline_used_ns += clock_mono_ns() - now;
    }
    __atomic_sub_fetch(&fp->inline_active, 1, __ATOMIC_SEQ_CST);
    return true;
}

/* See fastpath.h. */
void fastpath_get_stats(fastpath *fp, fastpath_stats *out)
{
    out->scheduled = load(&fp->st.scheduled);
    out->unschedulable = load(&fp->st.unschedulable);
    out->conflicts = load(&fp->st.conflicts);
    out->bind_failed = load(&fp->st.bind_failed);
    out->dropped = load(&fp->st.dropped);
    out->accepted_fast = load(&fp->st.accepted_fast);
    out->accepted_rechecked = load(&fp->st.accepted_rechecked);
    out->accepted_idempotent = load(&fp->st.accepted_idempotent);
    out->attempts = load(&fp->st.attempts);
    out->watch_decisions = load(&fp->st.watch_decisions);
    out->watch_binds = load(&fp->st.watch_binds);
    uint64_t busy = 0;
    size_t nw = __atomic_load_n(&fp->nworkers_started, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i < nw; i++)
        busy += __atomic_load_n(&fp->workers[i].busy_ns, __ATOMIC_RELAXED);
    out->busy_ns = busy;
    uint64_t cpu = 0;
    for (size_t i = 0; i < nw; i++)
        cpu += __atomic_load_n(&fp->workers[i].cpu_ns, __ATOMIC_RELAXED);
    out->worker_cpu_ns = cpu;
    out->eq_hits = out->eq_rebuilds = out->eq_bypass = 0;
    if (fp->eq) {
        eqcache_stats es;
        eqcache_get_stats(fp->eq, &es);
        out->eq_hits = es.hits;
        out->eq_rebuilds = es.rebuilds;
        out->eq_bypass = es.bypass;
    }
}

/* See fastpath.h. */
bool fastpath_wait_idle(fastpath *fp, int64_t timeout_ms)
{
    int64_t end = clock_mono_ms() + timeout_ms;
    for (;;) {
        queue_stats qs;
        queue_get_stats(fp->q, &qs);
        pthread_mutex_lock(&fp->bmu);
        bool binds = fp->bq_len || fp->binds_active;
        pthread_mutex_unlock(&fp->bmu);
        if (!qs.active && !qs.inflight && !binds)
            return true;
        if (clock_mono_ms() >= end)
            return false;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

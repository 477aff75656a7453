/*
 * fastpath.h - the standalone fast path: agentsched is the scheduler for
 * pods whose spec.schedulerName is its own (--scheduler-name).
 *
 *   pod hook / fastpath_offer -> queue (queue.h)
 *   N workers: pop -> eqcache_evaluate (full-scan quality, re-evaluating
 *              only the nodes changed since the pod shape's last decision;
 *              eqcache.h) over every (shard-filtered) node in place, top K
 *              candidates with bind versions -> binder_commit
 *              (FAST / RECHECKED / next candidate; none left -> urgent
 *              requeue). Accepting marks the pod ASSUMED in the cache.
 *   bind stage: bind_threads threads run the API bind (ops.bind; live mode
 *              k8s_bind) off the workers, so at most bind_threads binds are
 *              in flight; failure -> binder_release + requeue with backoff.
 *   reporter:  unschedulable pods get PodScheduled=False (Unschedulable,
 *              kube-scheduler's "0/N nodes are available: ..." message) and
 *              a FailedScheduling event, rate-limited per pod; bound pods a
 *              Scheduled event (ops.unschedulable / ops.scheduled).
 *   watcher:   every poll_ms (each second while the queue holds no pod),
 *              moves the unschedulable pool back when the
 *              nodes changed in a way that can make pods fit (added,
 *              allocatable, readiness, schedulability, taints, labels,
 *              shard membership), applies due backoffs and publishes the
 *              queue and worker metrics.
 *
 * The binder's serialisation point is the cache's writer mutex
 * (cache_assume_if), so workers commit directly: a separate binder thread
 * would only add a hand-off. Only the API call is asynchronous.
 *
 * In live mode workers make no decision before the first full sync of
 * nodes and pods (s->ready), as kube-scheduler waits for its informers.
 *
 * Not started in embedded (--cluster) mode: there is no API server to bind
 * through and no pending pods arrive.
 *
 * Metrics (in s->metrics): agentsched_queue_pods{queue=...},
 * agentsched_queue_full, agentsched_queue_rejected_total,
 * agentsched_queue_moves_total, agentsched_queue_flushes_total,
 * agentsched_schedule_attempts_total{result=...},
 * agentsched_pod_scheduling_e2e_seconds (queue arrival -> API bind done),
 * agentsched_fastpath_stage_seconds{stage=queue_wait|evaluate|binder|api_bind},
 * agentsched_fastpath_binder_total{result=fast|rechecked|idempotent|
 * conflict|requeue}, agentsched_fastpath_bind_failures_total,
 * agentsched_fastpath_worker_busy_seconds_total,
 * agentsched_fastpath_worker_utilization_percent, agentsched_fastpath_workers,
 * agentsched_fastpath_eqcache_total{result=hit|rebuild|bypass},
 * agentsched_fastpath_eqcache_classes.
 */
#ifndef AGENTSCHED_FASTPATH_H
#define AGENTSCHED_FASTPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/core/context.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/model/pod.h"
#include "agentsched/fastpath/queue.h"

/*
 * The outside world. Live mode (ops NULL in fastpath_new) uses the core's
 * ports (context.h): bind, unschedulable, scheduled.
 * Called from fast-path threads; must be thread-safe.
 */
typedef struct fastpath_ops {
    /* Blocking API bind. AS_OK: bound. AS_ENOTFOUND (pod gone) drops the
     * pod; anything else, AS_ECONFLICT (bound elsewhere) included, requeues
     * it with backoff, and the watch removes it once it shows a binding.
     * Either way the assumed pod is released first. */
    as_err (*bind)(void *arg, const model_pod *pod, const char *node, as_diag *diag);
    /* The pod fits nowhere (rate-limited per pod and message). May be NULL. */
    void (*unschedulable)(void *arg, const model_pod *pod, const char *message);
    /* The pod was bound to node. May be NULL. */
    void (*scheduled)(void *arg, const model_pod *pod, const char *node);
    void *arg;
    /* The pod watch's bind: one attempt that never waits (k8s_bind_try);
     * AS_EAGAIN sends the pod to a bind thread's bind. May be NULL. */
    as_err (*bind_try)(void *arg, const model_pod *pod, const char *node, as_diag *diag);
    /* bind_try in two steps (k8s_bind_try_send / _recv / _answered): the
     * pod watch sends the Binding and reads the answer at its next event,
     * when it has come, instead of sleeping for it. bind_send AS_OK: sent,
     * *sent for exactly one bind_recv; AS_EAGAIN: as bind_try's;
     * AS_EUNSUPPORTED: use bind_try. May be NULL (bind_try then). */
    as_err (*bind_send)(void *arg, const model_pod *pod, const char *node, void **sent,
                        as_diag *diag);
    as_err (*bind_recv)(void *arg, void *sent, const model_pod *pod, const char *node,
                        as_diag *diag);
    bool (*bind_answered)(void *arg, void *sent);
} fastpath_ops;

/* The scheduler name served when the config names none. */
#define FASTPATH_DEFAULT_SCHEDULER_NAME "agent-scheduler"

typedef struct fastpath_config {
    unsigned workers;           /* default 2 */
    unsigned candidates;        /* K, 1..SCHED_MAX_K, default the core's (3) */
    unsigned bind_threads;      /* API binds in flight at most; default 32 */
    size_t bind_queue;          /* accepted pods waiting for a bind thread (workers
                                   block beyond); default 4096 */
    uint32_t full_scan_nodes;   /* clusters up to this size are scanned fully;
                                   default 5000 */
    uint32_t feasible_pct;      /* larger clusters: stop after this % of nodes were
                                   found feasible (at least 100); 0 = kube-scheduler's
                                   adaptive 50 - nodes/125, at least 5 */
    int64_t poll_ms;            /* watcher period; default 20 */
    int64_t report_interval_ms; /* same pod + message reported again after;
                                   default 30000 */
    const char *scheduler_name; /* pods served; NULL = FASTPATH_DEFAULT_SCHEDULER_NAME */
    queue_config queue;         /* zero fields take queue defaults */
    /* Decisions go through an equivalence cache (eqcache.h): full-scan
     * quality at O(nodes changed) per decision; full_scan_nodes and
     * feasible_pct then apply only to a pod shape's first sighting (no
     * class yet). true = the previous path: sched_evaluate per decision
     * with the early stop above (for comparison benches). */
    bool no_eqcache;
    uint32_t eq_max_classes; /* 0 = eqcache default (256) */
} fastpath_config;

/* fastpath_config_defaults fills cfg (queue part included). */
void fastpath_config_defaults(fastpath_config *cfg);

typedef struct fastpath fastpath;

/*
 * fastpath_new prepares the fast path over c's cache, binder, policy and
 * metrics (c borrowed: must outlive the fast path). ops NULL = live mode
 * through c's ports, waiting for the core to be ready before deciding.
 * Nothing starts yet. Caller owns *out.
 */
as_err fastpath_new(core *c, const fastpath_config *cfg, const fastpath_ops *ops, fastpath **out,
                    as_diag *diag);

/* fastpath_start starts the workers, bind threads, reporter and watcher. */
as_err fastpath_start(fastpath *fp);

/* fastpath_stop shuts the queue down and joins every thread (binds in
 * flight finish first). Idempotent. The queue stays usable for hooks. */
void fastpath_stop(fastpath *fp);

/* fastpath_free stops and frees; touches nothing of the core. NULL ok. */
void fastpath_free(fastpath *fp);

/*
 * fastpath_set_leading (k8s_leader_fn; arg = the fast path) starts and
 * stops scheduling for leader election: false holds the queue (queue_hold)
 * so workers make no new decision, while the queue keeps following the
 * pods (a standby is ready the moment it leads); true resumes. Decisions
 * already made finish their bind: the lease's renew deadline leaves
 * lease_duration - renew_deadline (5 s by default) before another replica
 * may lead. Call before fastpath_start to start on standby.
 */
void fastpath_set_leading(void *fp, bool leading);

/* fastpath_queue returns the queue (borrowed), for tests and hooks. */
queue *fastpath_queue(fastpath *fp);

/*
 * fastpath_pod_event is the k8s pod hook (k8s_pod_fn; arg = the fast
 * path): pending pods of our scheduler name (no nodeName, not terminating,
 * not terminal) are offered to the queue (the hook takes them: returns
 * true); bound, terminating and deleted pods leave the queue; a deleted or
 * finished bound pod frees capacity and moves the unschedulable pool back;
 * SYNC_BEGIN / SYNC_END drop queued pods that vanished during a relist.
 * In live mode a new pod that finds activeQ empty is decided on the
 * calling thread (as a worker would, without waking one), within a
 * quarter of that thread's time and while the bind queue is under half
 * full (so it never waits for a bind). Called from one thread (the pod
 * watch).
 */
bool fastpath_pod_event(void *fp, k8s_event_type ev, model_pod *pod);

/* fastpath_offer queues a pending pod directly (takes ownership); AS_ELIMIT
 * when the queue is full. For tests and embedded callers. */
as_err fastpath_offer(fastpath *fp, model_pod *pod);

typedef struct fastpath_stats {
    uint64_t scheduled;     /* API bind succeeded */
    uint64_t unschedulable; /* attempts that found no node */
    uint64_t conflicts;     /* binder refused every candidate: urgent requeue */
    uint64_t bind_failed;   /* API bind failed: released + backoff */
    uint64_t dropped;       /* deleted during the attempt, or bound per the cache */
    uint64_t accepted_fast, accepted_rechecked, accepted_idempotent;
    uint64_t attempts;        /* decisions made */
    uint64_t watch_decisions; /* ... of them by the pod watch thread itself */
    uint64_t watch_binds;     /* ... bound by the pod watch thread itself */
    uint64_t busy_ns;         /* summed worker busy time */
    /* Equivalence cache (eqcache_stats): decisions answered incrementally,
     * full class evaluations, decisions made by a plain full scan. */
    uint64_t eq_hits, eq_rebuilds, eq_bypass;
    /* Summed worker thread CPU time (refreshed every 64 decisions and when
     * a worker exits): decisions / this = one worker's rate, robust to the
     * workers being descheduled. */
    uint64_t worker_cpu_ns;
} fastpath_stats;

/* fastpath_get_stats copies the counters (relaxed atomic loads; busy_ns and
 * worker_cpu_ns summed over the started workers, eq_* from the fast path's
 * own eqcache). No lock needed; any thread, also while fastpath_start
 * runs (the workers started so far are counted). */
void fastpath_get_stats(fastpath *fp, fastpath_stats *out);

/* fastpath_wait_idle waits up to timeout_ms until the queue has nothing
 * active or in flight and no bind is pending; true if idle. For tests. */
bool fastpath_wait_idle(fastpath *fp, int64_t timeout_ms);

#endif

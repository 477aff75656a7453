/*
 * queue.h - the fast path's scheduling queue (kube-scheduler's three-part
 * queue, plus urgent retry for binder conflicts).
 *
 *   activeQ        ready now; a heap ordered by urgency (urgent retries
 *                  first), then pod priority (higher first), then arrival
 *                  (the order the pod entered activeQ)
 *   backoffQ       waiting out a per-pod exponential backoff
 *                  (initial * 2^(attempts-1), capped at backoff_max_ms)
 *   unschedulable  failed; moved back by queue_move_all (a cluster event
 *                  that could make them fit), or after unsched_max_ms
 *
 * A popped pod is IN FLIGHT: it stays indexed by uid (so an update or a
 * deletion arriving meanwhile is not lost) until the caller settles it with
 * exactly one of queue_done / queue_unschedulable / queue_backoff /
 * queue_urgent. Updates to an in-flight pod are kept and swapped in when it
 * is requeued; a removal marks it gone and it is dropped when settled.
 *
 * Moving back: a pod whose backoff has not expired goes to backoffQ,
 * otherwise to activeQ. A pod that fails while a move happened after it was
 * popped goes to backoffQ instead of the pool (the event may already have
 * made it fit, and no later event may come).
 *
 * Thread-safe (one mutex + condvar). queue_pop blocks until a pod is ready,
 * the timeout passes or queue_shutdown. Time comes from cfg.clock
 * (injectable for tests; default CLOCK_MONOTONIC ms). Due backoffs and pool
 * flushes are applied lazily by queue_pop and queue_get_stats.
 */
#ifndef AGENTSCHED_QUEUE_H
#define AGENTSCHED_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/model/pod.h"

/* Clock: monotonic milliseconds. */
typedef int64_t (*queue_clock_fn)(void *arg);

typedef struct queue_config {
    int64_t backoff_initial_ms; /* default 1000 */
    int64_t backoff_max_ms;     /* default 10000 */
    int64_t unsched_max_ms;     /* pool flush; default 300000 (5 min) */
    size_t max_pods;            /* every pod the queue holds, in flight included;
                                   default 100000 */
    queue_clock_fn clock;       /* NULL = CLOCK_MONOTONIC */
    void *clock_arg;
} queue_config;

/* queue_config_defaults fills every field with its default. */
void queue_config_defaults(queue_config *cfg);

typedef struct queue queue;

/* queue_new: cfg may be NULL (defaults; zero fields take defaults too).
 * Caller owns *out (queue_free). */
as_err queue_new(const queue_config *cfg, queue **out);

/* queue_free frees the queue and every pod it holds. No thread may be
 * inside queue_pop (call queue_shutdown and join first). NULL ok. */
void queue_free(queue *q);

/* Where a pod is. */
typedef enum queue_where {
    QUEUE_ABSENT = 0,
    QUEUE_ACTIVE,
    QUEUE_BACKOFF,
    QUEUE_UNSCHED,
    QUEUE_INFLIGHT,
} queue_where;

/* queue_where_name returns a static name for w ("absent", "active", ...;
 * "?" when out of range): never NULL, never freed. Thread-safe. */
const char *queue_where_name(queue_where w);

/*
 * queue_add offers a pending pod (takes ownership in every case). Keyed by
 * uid ("namespace/name" when the uid is empty). A new pod goes to activeQ.
 * An update of a queued pod replaces its object; when the update changes
 * what scheduling looks at (requests, GPUs, priority, selectors, affinity,
 * tolerations) an unschedulable/backoff pod is moved back as by
 * queue_move_all, otherwise it keeps its place (status-only updates, such
 * as our own PodScheduled condition, must not cause retries).
 * AS_ELIMIT when the queue holds max_pods already (the pod is freed and
 * counted in stats.rejected_full).
 */
as_err queue_add(queue *q, model_pod *pod);

/* queue_remove drops the pod (deleted, bound by anyone, terminating).
 * In flight: marked gone, dropped when settled. False when unknown. */
bool queue_remove(queue *q, const char *uid);

/* A popped pod. `pod` is borrowed from the queue until settled. */
typedef struct queue_item {
    struct queue_entry *e; /* handle for the settle calls */
    const model_pod *pod;
    unsigned attempts;  /* failed attempts so far */
    bool urgent;        /* popped from an urgent retry */
    int64_t queued_ms;  /* time it waited in activeQ (clock ms) */
    uint64_t added_ns;  /* first queue_add (CLOCK_MONOTONIC ns, never the injected
                           clock): arrival -> bound latency */
    uint64_t active_ns; /* entered activeQ (CLOCK_MONOTONIC ns): queue wait */
} queue_item;

/*
 * queue_pop waits up to timeout_ms (0: do not wait; <0: forever) for a pod
 * in activeQ, first moving due backoffs and pool flushes. AS_OK with *out
 * filled; AS_ETIMEOUT; AS_EGONE after queue_shutdown.
 */
as_err queue_pop(queue *q, int64_t timeout_ms, queue_item *out);

/*
 * queue_add_take is queue_add, except that a new pod finding activeQ empty
 * (and the queue neither held nor shut down) is popped for the caller at
 * once: out->e is set and the pod is in flight, to be settled like a
 * queue_pop's, and no popper is woken. Otherwise out->e is NULL and the
 * pod was queued (or refused) as by queue_add. The caller decides at once
 * what a woken worker would have decided a context switch later.
 */
as_err queue_add_take(queue *q, model_pod *pod, queue_item *out);

/* Settling an in-flight pod (exactly one per pop): */
/* queue_done: bound; forget the pod. */
void queue_done(queue *q, struct queue_entry *e);
/* queue_unschedulable: fits nowhere; attempts+1, to the pool (or backoffQ
 * if a move happened since the pop). */
void queue_unschedulable(queue *q, struct queue_entry *e);
/* queue_backoff: a transient failure (API bind failed); attempts+1, to
 * backoffQ. */
void queue_backoff(queue *q, struct queue_entry *e);
/* queue_urgent: refused by the binder for a conflict; to the head of
 * activeQ, skipping backoff (attempts unchanged). */
void queue_urgent(queue *q, struct queue_entry *e);

/*
 * queue_move_all moves every pod of the unschedulable pool back (activeQ,
 * or backoffQ while its backoff runs) and records the move for in-flight
 * pods. Call on cluster events that could make pods fit: node added or
 * changed, a pod deleted or finished, a relist. Returns the count moved.
 */
size_t queue_move_all(queue *q);

/* Relist bookkeeping: pods not offered (queue_add) between
 * queue_sync_begin and queue_sync_end are removed as by queue_remove (they
 * vanished while the watch was down). Returns the count removed. */
void queue_sync_begin(queue *q);
size_t queue_sync_end(queue *q);

/* queue_where_is reports where uid is, and its attempts (may be NULL). */
queue_where queue_where_is(queue *q, const char *uid, unsigned *attempts);

/*
 * queue_hold(true) stops handing pods out: queue_pop waits (its timeout
 * still applies) while adds, removals, settles, moves and backoffs go on
 * as usual. queue_hold(false) resumes and wakes the waiting poppers. For a
 * standby replica (leader election): its queue stays current, ready for the
 * moment it leads. Pods already popped are not recalled.
 */
void queue_hold(queue *q, bool hold);
bool queue_held(queue *q);

/* queue_shutdown wakes every queue_pop (they return AS_EGONE from now on). */
void queue_shutdown(queue *q);

typedef struct queue_stats {
    size_t active, backoff, unsched, inflight; /* current depths */
    size_t total;                              /* every pod held */
    uint64_t added, updated, removed, rejected_full;
    uint64_t moved, flushed, urgent; /* moves, 5-min flushes, urgent requeues */
    bool full;                       /* total >= max_pods */
} queue_stats;

/* queue_get_stats applies due transitions and copies the counters. */
void queue_get_stats(queue *q, queue_stats *out);

/* queue_backoff_ms: backoff after `attempts` failures (0 for 0). */
int64_t queue_backoff_ms(const queue *q, unsigned attempts);

#endif

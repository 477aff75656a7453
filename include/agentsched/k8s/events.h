/*
 * events.h - v1 Events about pods, posted by one thread from a bounded
 * queue, rate-limited per pod and reason and overall; dropped, never
 * waited for, when over either limit.
 */
#ifndef AGENTSCHED_K8S_EVENTS_H
#define AGENTSCHED_K8S_EVENTS_H

#include <stdbool.h>

#include "agentsched/base/error.h"
#include "agentsched/k8s/transport.h"

/*
 * k8s_event_post queues a v1 Event about pod ns/name (uid may be NULL):
 * type "Normal" or "Warning", reason ("Scheduled", "FailedScheduling"),
 * message. At most one event per pod and reason per
 * cfg.event_pod_interval_ms; beyond that, or when the queue is full, the
 * event is dropped (counted). Never blocks on the network.
 */
void k8s_event_post(k8s_client *k, const char *ns, const char *name, const char *uid,
                    const char *type, const char *reason, const char *message);

/*
 * k8s_event_post_now is k8s_event_post sending from the calling thread, at
 * once, on the callers' Events' own kept connection, instead of handing
 * the Event to the poster thread: one thread hand-off and wake-up less
 * per Event. It does not wait for the answer: the next caller reads it
 * first (k8s_events_settle, every housekeeping tick, reads it when no
 * caller came), so the caller is not woken again for it. One caller at a
 * time posts so, reading the previous answer first; while one does, the
 * others' Events are queued as by k8s_event_post (the API server serves
 * Events one after the other, not one per bind thread). The same limits
 * drop it (per pod and reason, then --event-qps); it blocks for at most
 * the previous Event's answer and its own send (the client's timeouts), is
 * never retried, and counts as posted or dropped, as queued ones do, once
 * its answer is read.
 */
void k8s_event_post_now(k8s_client *k, const char *ns, const char *name, const char *uid,
                        const char *type, const char *reason, const char *message);

/*
 * k8s_events_settle reads the answer to the Event k8s_event_post_now left
 * on the wire and counts it: when it has arrived, or with wait when it
 * arrives (the client's request timeout). Nothing when no answer is due
 * or a caller is posting meanwhile. The housekeeping thread calls it
 * without wait every tick; tests with wait, to read the counters.
 */
void k8s_events_settle(k8s_client *k, bool wait);

/* k8s_events_init allocates the event queue and per-pod rate table (the
 * poster thread starts on the first event); k8s_client_new calls it.
 * AS_ENOMEM. */
as_err k8s_events_init(k8s_client *k);

/* k8s_events_shutdown (stop flag up) joins the poster thread, drops queued
 * events unposted and frees the queue; k8s_client_stop calls it. */
void k8s_events_shutdown(k8s_client *k);

#endif

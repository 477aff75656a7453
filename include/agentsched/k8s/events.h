/*
 * events.h - v1 Events about pods, posted by one thread from a bounded
 * queue, rate-limited per pod and reason and overall; dropped, never
 * waited for, when over either limit.
 */
#ifndef AGENTSCHED_K8S_EVENTS_H
#define AGENTSCHED_K8S_EVENTS_H

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
 * k8s_event_post_now is k8s_event_post posting from the calling thread, at
 * once, on a connection of the bind pool (k8s_bind_handle_get: right
 * after the caller's own Binding, that Binding's connection), instead of
 * handing the Event to the poster thread: one thread hand-off and wake-up
 * less per Event. One caller at a time posts so; while one does, the
 * others' Events are queued as by k8s_event_post (the API server serves
 * Events one after the other as before, not one per bind thread). The
 * same limits drop it (per pod and reason, then --event-qps); it blocks
 * for one request (the client's timeouts), is never retried, and counts
 * as posted or dropped as queued ones do.
 */
void k8s_event_post_now(k8s_client *k, const char *ns, const char *name, const char *uid,
                        const char *type, const char *reason, const char *message);

/* k8s_events_init allocates the event queue and per-pod rate table (the
 * poster thread starts on the first event); k8s_client_new calls it.
 * AS_ENOMEM. */
as_err k8s_events_init(k8s_client *k);

/* k8s_events_shutdown (stop flag up) joins the poster thread, drops queued
 * events unposted and frees the queue; k8s_client_stop calls it. */
void k8s_events_shutdown(k8s_client *k);

#endif

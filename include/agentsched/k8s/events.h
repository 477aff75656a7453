/*
 * events.h - v1 Events about pods, posted by one thread from a bounded
 * queue, rate-limited per pod and reason and overall; dropped, never
 * waited for, when over either limit. While Events come the poster wakes
 * on a tick (50 ms): the Events queued since the last one go out in one
 * write on its keep-alive connection (HTTP/1.1 pipelining) and their
 * answers are read at the next tick, so that neither the poster nor the
 * threads that queue Events are woken for each one.
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
 * event is dropped (counted). Never blocks on the network; wakes the
 * poster only when it is idle (no tick running). An Event counts as
 * posted or dropped once its answer is read.
 */
void k8s_event_post(k8s_client *k, const char *ns, const char *name, const char *uid,
                    const char *type, const char *reason, const char *message);

/* k8s_events_init allocates the event queue and per-pod rate table (the
 * poster thread starts on the first event); k8s_client_new calls it.
 * AS_ENOMEM. */
as_err k8s_events_init(k8s_client *k);

/* k8s_events_shutdown (stop flag up) joins the poster thread, drops queued
 * events unposted and frees the queue; k8s_client_stop calls it. */
void k8s_events_shutdown(k8s_client *k);

#endif

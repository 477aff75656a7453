/*
 * events.h - v1 Events about pods, posted asynchronously on the client's
 * call loop (mux.h), two on the wire and at most cfg.event_queue queued,
 * rate-limited per pod and reason and overall; dropped, never waited for,
 * when over either limit.
 */
#ifndef AGENTSCHED_K8S_EVENTS_H
#define AGENTSCHED_K8S_EVENTS_H

#include "agentsched/base/error.h"
#include "agentsched/k8s/transport.h"

/*
 * k8s_event_post sends a v1 Event about pod ns/name (uid may be NULL):
 * type "Normal" or "Warning", reason ("Scheduled", "FailedScheduling"),
 * message (its first 1023 bytes). The body is built on the calling
 * thread and handed to the call loop. At most one event per pod and
 * reason per cfg.event_pod_interval_ms; beyond that, past --event-qps, or
 * with cfg.event_queue Events queued or sent, the event is dropped
 * (counted).
 * Never blocks on the network.
 */
void k8s_event_post(k8s_client *k, const char *ns, const char *name, const char *uid,
                    const char *type, const char *reason, const char *message);

/* k8s_events_init allocates the per-pod rate table; k8s_client_new calls
 * it. AS_ENOMEM. */
as_err k8s_events_init(k8s_client *k);

/* k8s_events_shutdown (stop flag up, call loop stopped: Events in flight
 * were dropped) frees the rate table; k8s_client_stop calls it. */
void k8s_events_shutdown(k8s_client *k);

#endif

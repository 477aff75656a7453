/*
 * k8s.h - the live-cluster client: its configuration and lifecycle, and
 * its readiness.
 *
 * Written on libcurl + jansson (no kubernetes-client/c). The wing's
 * modules, bottom up:
 *   kubeconfig.h   connection settings from a kubeconfig or the service
 *                  account
 *   transport.h    requests: auth, TLS, the token-bucket rate limiter shared
 *                  by all requests, backoff, the stop flag, status counters
 *   watch.h        one reflector thread per watched resource (Nodes, Pods,
 *                  NodeShards) and the incremental watch-event decoder
 *   mux.h          the call loop: one thread, one multi handle, HTTP/2
 *                  streams (pod patches)
 *   bind.h         a bounded pool of keep-alive handles for bindings
 *   events.h       the v1 Event poster
 *   lease.h        leader election on a coordination.k8s.io/v1 Lease
 *   status.h       pod status conditions
 *   shard_status.h NodeShard writes
 *   k8s.h          this: k8s_client_new wires the modules above together,
 *                  with a housekeeping thread expiring assumed pods and
 *                  (with cfg.lease_name) an elector thread.
 * k8s_config, its hooks and k8s_status are declared in transport.h, the
 * lowest header that needs them, and reach every includer of this one.
 *
 * THREADS AND OWNERSHIP
 *   k8s_client_start spawns the threads; k8s_client_stop wakes and joins
 *   them (in-flight transfers notice within about a second). Everything the
 *   threads touch hangs off the client; the cache is borrowed and must
 *   outlive it. k8s_bind and k8s_event_post are safe from any thread.
 *   The client knows nothing of who embeds it: what the embedder must
 *   hear of (pods, shards, leadership, the first sync) reaches it through
 *   the hooks in k8s_config.
 */
#ifndef AGENTSCHED_K8S_H
#define AGENTSCHED_K8S_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/base/metrics.h"
#include "agentsched/core/cache.h"
#include "agentsched/k8s/transport.h"

/* k8s_config_defaults fills every field with its default (no source). */
void k8s_config_defaults(k8s_config *cfg);

/*
 * k8s_client_new resolves the connection (cfg->conn, else in_cluster, else
 * kubeconfig), validates cfg and prepares the client; no thread starts and
 * nothing is contacted yet. c is borrowed (must outlive the client).
 * Errors as k8s_conn_*; AS_EINVAL when no source is configured.
 */
as_err k8s_client_new(const k8s_config *cfg, cache *c, k8s_client **out, as_diag *diag);

/* k8s_client_start starts the reflectors, housekeeping, event and bind
 * workers. Call once. */
as_err k8s_client_start(k8s_client *k);

/* k8s_client_stop wakes and joins every thread. Idempotent. */
void k8s_client_stop(k8s_client *k);

/* k8s_client_free stops (if needed) and frees. NULL ok. */
void k8s_client_free(k8s_client *k);

/* k8s_get_status copies the client's readiness, stream and bind/event
 * counters and leader state into *out as one snapshot (under the client's
 * status mutex). Thread-safe; k not NULL. */
void k8s_get_status(k8s_client *k, k8s_status *out);

/*
 * k8s_ready: true when the first sync is done and neither the node nor the
 * pod stream has been down longer than cfg.watch_down_ms at now_ms. On
 * false, why (may be NULL) gets a sentence for /readyz.
 */
bool k8s_ready(k8s_client *k, int64_t now_ms, char *why, size_t whylen);

/* k8s_wait_synced blocks until the first sync or timeout; true if synced. */
bool k8s_wait_synced(k8s_client *k, int64_t timeout_ms);

/*
 * k8s_metrics_update sets the client's counters and gauges in m
 * (agentsched_k8s_*: watch events, relists, reconnects, watch downtime,
 * binds, events, expired assumed pods, synced; agentsched_leader*). Call
 * before rendering /metrics. No-op when k or m is NULL.
 */
void k8s_metrics_update(k8s_client *k, metrics *m);

#endif

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
 *   bind.h         a bounded pool of keep-alive handles for bindings
 *   events.h       the v1 Event poster
 *   lease.h        leader election on a coordination.k8s.io/v1 Lease
 *   status.h       pod status conditions
 *   shard_status.h NodeShard writes
 *   k8s.h          this: k8s_client_new wires the modules above together,
 *                  with a housekeeping thread expiring assumed pods and
 *                  (with cfg.lease_name) an elector thread.
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
#include "agentsched/k8s/kubeconfig.h"
#include "agentsched/k8s/transport.h"
#include "agentsched/k8s/watch.h"

/*
 * Leader hook: called from the elector thread when this instance starts or
 * stops leading (see k8s_config.lease_name). Must not block for long.
 */
typedef void (*k8s_leader_fn)(void *arg, bool leading);

/*
 * Synced hook: called once, from the reflector thread that completes the
 * first full list of nodes and pods, before k8s_wait_synced's waiters
 * wake. Must not block for long.
 */
typedef void (*k8s_synced_fn)(void *arg);

typedef struct k8s_config {
    const char *kubeconfig; /* path; NULL with in_cluster */
    const char *context;    /* NULL = current-context */
    bool in_cluster;
    const char *sa_dir;             /* in-cluster secrets dir; NULL = default */
    const k8s_conn *conn;           /* tests: use this instead (borrowed, copied) */
    const char *scheduler_name;     /* events' source.component; default "agent-scheduler" */
    double qps;                     /* client-side rate limit; default 1000 */
    unsigned burst;                 /* default 2000 */
    unsigned list_limit;            /* page size; default 500 */
    size_t max_line;                /* watch event cap; default 8 MiB */
    size_t max_list_body;           /* list page cap; default 512 MiB */
    int64_t watch_timeout_ms;       /* dead stream: no byte (bookmarks count) for
                                       this long -> reconnect; default 120000 */
    int64_t backoff_initial_ms;     /* reconnect backoff; default 200 */
    int64_t backoff_max_ms;         /* cap; default 30000 */
    int64_t connect_timeout_ms;     /* default 10000 */
    int64_t request_timeout_ms;     /* list/bind/event requests; default 60000 */
    int64_t watch_down_ms;          /* readiness bound; default 60000 */
    int64_t assumed_ttl_ms;         /* forget assumed pods unconfirmed this long,
                                       once the pods watch has been up this
                                       long too; default 30000 */
    int64_t expire_period_ms;       /* housekeeping period; default 1000 */
    int64_t trim_period_ms;         /* hand free heap pages back to the kernel
                                       (glibc malloc_trim) this often; default
                                       60000, < 0 never */
    int64_t shard_retry_ms;         /* re-probe an absent NodeShard CRD; default 60000 */
    unsigned bind_concurrency;      /* keep-alive handles; default 96 */
    unsigned bind_retries;          /* retries on 429/5xx/network; default 5
                                       (more while an outcome is unknown:
                                       see k8s_bind) */
    int64_t bind_backoff_ms;        /* first retry delay; default 50 */
    int64_t event_pod_interval_ms;  /* per pod+reason; default 30000 */
    unsigned event_queue;           /* pending events; default 4096 */
    double event_qps;               /* Events posted per second, burst the
                                       same (at least 1); over it they are
                                       dropped and counted; 0 = no limit
                                       (default) */
    const char *pod_field_selector; /* default: non-terminal pods ("" = none) */
    bool watch_shards;              /* default true (zero-init false: use
                                       k8s_config_defaults) */
    k8s_pod_fn pod_hook;
    void *pod_hook_arg;
    k8s_shard_fn shard_hook;
    void *shard_hook_arg;
    /* Leader election (lease.c): with lease_name set, an elector thread
     * competes for the Lease every lease_retry_ms and calls leader_hook on
     * every change of leadership (first call: false, before any round);
     * k8s_client_stop releases a held lease. Without it there is no
     * election and the hook is never called. */
    const char *lease_namespace; /* default kube-system */
    const char *lease_name;      /* NULL or "" = no leader election */
    const char *lease_identity;  /* NULL = k8s_lease_default_identity() */
    int64_t lease_duration_ms;   /* default 15000; renew deadline 2/3 of it */
    int64_t lease_retry_ms;      /* default 2000 (capped at duration/3) */
    k8s_leader_fn leader_hook;
    void *leader_hook_arg;
    k8s_synced_fn synced_hook; /* NULL: none */
    void *synced_hook_arg;
} k8s_config;

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

typedef struct k8s_status {
    bool synced;                            /* first full list of nodes and pods applied */
    int64_t synced_at_ms;                   /* wall clock; 0 before */
    int64_t down_since_ms[K8S_KIND__COUNT]; /* wall clock; 0 while up */
    int64_t up_since_ms[K8S_KIND__COUNT];   /* wall clock of the last recovery
                                               from down; 0: never down */
    bool shards_present;                    /* NodeShard CRD answered */
    uint64_t events[K8S_KIND__COUNT];       /* watch events applied */
    uint64_t relists[K8S_KIND__COUNT];      /* lists after the first */
    uint64_t reconnects[K8S_KIND__COUNT];
    uint64_t binds_ok, binds_failed, bind_retries;
    uint64_t bind_unknown; /* binds retried because an attempt may have been applied */
    uint64_t events_posted, events_dropped;
    uint64_t assumed_expired;
    bool leader_elect;           /* an elector runs (lease_name set) */
    bool leader;                 /* leading now (always true without election) */
    uint64_t leader_transitions; /* times this instance started or stopped leading */
    char leader_holder[256];     /* holderIdentity last observed ("" = none) */
} k8s_status;

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

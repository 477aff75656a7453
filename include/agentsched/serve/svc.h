/*
 * svc.h - the service context: the one place that holds agentsched's
 * mutable state (no globals elsewhere), and its configuration.
 *
 * Configuration is parsed into svc_config first (flags, files), validated,
 * and only then turned into a running svc (h2o style: parsing separate from
 * runtime). Entry points (extender, placement, volcano, fast path) receive
 * the svc as their handler context and reach the core through it.
 */
#ifndef AGENTSCHED_SVC_H
#define AGENTSCHED_SVC_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/core/binder.h"
#include "agentsched/core/cache.h"
#include "agentsched/base/error.h"
#include "agentsched/base/http.h"
#include "agentsched/base/metrics.h"
#include "agentsched/model/model.h"
#include "agentsched/core/score.h"

/* Offload threads in live mode: the extender's bind verb waits for an API
 * round trip there, its connection suspended, never on an HTTP pool thread
 * (see svc_http_start). Bounds the extender binds in flight at once: with
 * the API server answering a bind in ~180 ms under a create storm
 * (bench_e2e), 16 capped kube-scheduler at ~90 binds/s, below its own rate
 * without an extender. */
#define SVC_LIVE_BIND_THREADS 64

/* Pod shapes the extender verbs keep evaluations of (eqcache.h): about
 * 48 bytes per node per shape, so 64 shapes cost ~25 MB at 5000 nodes. */
#define SVC_EXTENDER_SHAPES 64

typedef struct svc_config {
    const char *listen;          /* default "127.0.0.1:8888" */
    const char *cluster_path;    /* embedded mode: Kubernetes List file */
    const char *kubeconfig;      /* live mode */
    bool in_cluster;             /* live mode from the service account */
    const char *policy_path;     /* NULL = built-in default */
    const char *scheduler_name;  /* default "agent-scheduler" */
    const char *shard_name;      /* default = scheduler_name */
    cache_shard_mode shard_mode; /* default none */
    unsigned http_threads;       /* 0 = the usable CPUs (sync_usable_cpus) */
    size_t max_body;             /* default 16 MiB */
    unsigned workers;            /* fast path workers, default 2 */
    unsigned candidates;         /* K, default 3 */
    double kube_api_qps;         /* default 1000 */
    unsigned kube_api_burst;     /* default 2000 */
    int64_t watch_down_ms;       /* readyz fails after watches down this long */
    int log_level;               /* 0 error .. 3 debug; default 2 */
    int64_t watch_timeout_ms;    /* live mode: reconnect a silent watch; 0 = default */
    double event_qps;            /* live mode: Events a second; 0 = no limit */
    /* Leader election of the fast path (live mode; `serve` wires it into
     * k8s_config): only the holder of the Lease schedules. */
    bool leader_elect;
    char lease_namespace[254];  /* "" = kube-system */
    char lease_name[254];       /* "" = "agentsched-" + scheduler_name */
    const char *lease_identity; /* NULL = $POD_NAME, else HOSTNAME-PID */
    int64_t lease_duration_ms;  /* 0 = 15000 */
    /* HTTPS: PEM files of the serving certificate and its key, both or
     * neither (NULL = plain HTTP); read by svc_http_start. */
    const char *tls_cert_path;
    const char *tls_key_path;
} svc_config;

/* svc_config_defaults fills every field with its default. */
void svc_config_defaults(svc_config *cfg);

/* Metric handles the entry points update (declared by svc_new). */
typedef struct svc_metrics {
    metrics_counter *requests_total;
    metrics_counter *request_errors_total;
    metrics_histogram *filter_seconds;
    metrics_histogram *prioritize_seconds;
    metrics_histogram *bind_seconds;
    metrics_histogram *preempt_seconds;
    metrics_histogram *placement_seconds;
    metrics_counter *binds_fast;
    metrics_counter *binds_rechecked;
    metrics_counter *binds_idempotent;
    metrics_counter *bind_conflicts;
    metrics_counter *memo_hits;        /* prioritize answered from the filter's memo */
    metrics_counter *memo_misses;      /* prioritize evaluated afresh */
    metrics_counter *spec_memo_hits;   /* a Pod's spec reused (extender.c) */
    metrics_counter *spec_memo_misses; /* a Pod's spec decoded */
} svc_metrics;

typedef struct svc {
    svc_config cfg;
    model_registry reg;
    cache *cache;
    binder *binder;
    score_policy *policy; /* guarded by policy_mu; use svc_policy_get/set */
    pthread_mutex_t policy_mu;
    metrics *metrics;
    svc_metrics m;
    http_server *http;
    int64_t started_ms;
    int ready; /* (atomic) 1 once the cache is synced */
    volatile sig_atomic_t stop;
    void *k8s;                      /* live-mode API client (k8s module), NULL embedded */
    struct shard_coord *shard;      /* NodeShard coordinator (shard.h), NULL when
                                       --shard-mode none; added by the shards helper */
    struct extender_memo *ext_memo; /* filter -> prioritize memo (extender.h) */
    struct eqcache *eq;             /* the extender verbs' equivalence cache (eqcache.h) */
} svc;

/* svc_new builds the runtime from a validated config: registry, cache,
 * binder, policy, metrics. Does not load clusters or start servers. */
as_err svc_new(const svc_config *cfg, svc **out, as_diag *diag);
void svc_free(svc *s);

/* svc_load_cluster loads an embedded cluster file into the cache and marks
 * the service ready. */
as_err svc_load_cluster(svc *s, const char *path, as_diag *diag);

/* svc_policy_get returns a reference to the current policy (caller unrefs);
 * svc_policy_set swaps in a new one (takes the reference). */
score_policy *svc_policy_get(svc *s);
void svc_policy_set(svc *s, score_policy *p);

/* svc_routes returns the static route table of every HTTP endpoint. */
const http_route *svc_routes(size_t *n);

/* svc_http_start starts s->http on cfg.listen with svc_routes(), the
 * configured threads and body cap, counting every request in s->m
 * (requests_total; request_errors_total for status >= 400). svc_http_stop stops it
 * (waits for in-flight requests); NULL-safe and idempotent. Errors as
 * http_server_start. (Added by the service helper.) */
as_err svc_http_start(svc *s, as_diag *diag);
void svc_http_stop(svc *s);

/* svc_reload_policy re-reads cfg.policy_path (SIGHUP): on success swaps the
 * policy in; on failure keeps the old one and fills diag. AS_ENOTFOUND when
 * no policy file is configured. (Added by the service helper.) */
as_err svc_reload_policy(svc *s, as_diag *diag);

/*
 * svc_k8s_start builds a live-mode API client (k8s.h) for the service's
 * cache from cfg (the service's scheduler name, qps/burst and watch
 * bounds fill unset fields; its synced hook is the service's, which sets
 * s->ready after the first sync), starts it and stores it in s->k8s.
 * Errors as k8s_client_new, or those of k8s_client_start with diag saying
 * the threads did not start. svc_k8s_stop stops and frees it; NULL-safe
 * and a no-op on embedded services.
 */
struct k8s_config;
as_err svc_k8s_start(svc *s, const struct k8s_config *cfg, as_diag *diag);
void svc_k8s_stop(svc *s);

/* svc_now_ms: wall clock in ms (CLOCK_REALTIME); svc_mono_ns: monotonic. */
int64_t svc_now_ms(void);
uint64_t svc_mono_ns(void);

#endif

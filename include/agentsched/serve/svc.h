/*
 * svc.h - the server: owns the decision core (core/context.h), the HTTP
 * server and its route table, the API client, the NodeShard coordinator
 * and the fast path, and is the one owner of their lifecycle.
 *
 * Configuration is parsed into svc_config first (flags, files), validated,
 * and only then turned into a svc (h2o style: parsing separate from
 * runtime). Entry points (extender, placement, volcano, fast path) receive
 * the core and the ports the server wires to the API client and the shard
 * coordinator; each lists its own routes, which svc_routes gathers.
 */
#ifndef AGENTSCHED_SVC_H
#define AGENTSCHED_SVC_H

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/error.h"
#include "agentsched/base/http.h"
#include "agentsched/core/cache.h"
#include "agentsched/core/context.h"
#include "agentsched/k8s/k8s.h"

/* Offload threads in live mode: the extender's bind verb waits for an API
 * round trip there, its connection suspended, never on an HTTP pool thread
 * (see svc_http_start). Bounds the extender binds in flight at once: with
 * the API server answering a bind in ~180 ms under a create storm
 * (bench_e2e), 16 capped kube-scheduler at ~90 binds/s, below its own rate
 * without an extender. */
#define SVC_LIVE_BIND_THREADS 64

typedef struct svc_config {
    const char *listen; /* default "127.0.0.1:8888" */
    /* A second, plain-HTTP address serving only GET /healthz, /readyz and
     * /metrics, never with a client certificate: for the kubelet's probes
     * and Prometheus where listen is loopback. NULL = none. */
    const char *metrics_listen;
    const char *cluster_path;   /* embedded mode: Kubernetes List file */
    const char *kubeconfig;     /* live mode */
    bool in_cluster;            /* live mode from the service account */
    const char *policy_path;    /* NULL = built-in default */
    const char *scheduler_name; /* default "agent-scheduler" */
    const char *shard_name;     /* default SHARD_DEFAULT_NAME ("agentsched") */
    /* schedulerNames the extender's bind verb serves (comma list; NULL =
     * scheduler_name) and Volcano's allocate/deallocate verbs act on
     * (NULL = "volcano"): core_config's extender_names, volcano_names. */
    const char *extender_scheduler_names;
    const char *volcano_scheduler_names;
    int64_t volcano_assumed_ttl_ms; /* 0 = VOLCANO_DEFAULT_TTL_MS (volcano.h) */
    cache_shard_mode shard_mode;    /* default none */
    unsigned http_threads;          /* 0 = the usable CPUs (sync_usable_cpus) */
    size_t max_body;                /* default 16 MiB */
    unsigned http_timeout_s;        /* idle timeout; bodies get 2x (0 = 120 s) */
    unsigned placement_qps;         /* dry runs a second per caller; 0 = no limit */
    unsigned workers;               /* fast path workers, default 2 */
    unsigned candidates;            /* K, default 3 */
    double kube_api_qps;            /* default 1000 */
    unsigned kube_api_burst;        /* default 2000 */
    int64_t watch_down_ms;          /* readyz fails after watches down this long */
    int log_level;                  /* 0 error .. 3 debug; default 2 */
    int64_t watch_timeout_ms;       /* live mode: reconnect a silent watch; 0 = default */
    double event_qps;               /* live mode: Events a second; 0 = no limit */
    unsigned bind_warm;             /* live mode: bind connections kept open while
                                       leading, 0 = none; default SVC_BIND_WARM_AUTO */
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
    /* Client authentication (needs HTTPS): a PEM file of the CA(s) whose
     * client certificates may call every endpoint but /healthz, /readyz
     * and (unless metrics_auth) /metrics; NULL = none. tls_client_exempt:
     * comma-separated path prefixes also served without one (callers that
     * cannot present a certificate), NULL = none. The three TLS files are
     * re-read by svc_reload_tls. */
    const char *tls_client_ca_path;
    const char *tls_client_exempt;
    bool metrics_auth;
} svc_config;

/* svc_config's bind_warm by default: K8S_BIND_CONCURRENCY with the fast
 * path (only its leader binds), else 0 (the extender's bind verb: every
 * replica beside a kube-scheduler would warm a pool its standby never
 * uses). */
#define SVC_BIND_WARM_AUTO UINT_MAX

/* svc_config_defaults fills every field with its default. */
void svc_config_defaults(svc_config *cfg);

typedef struct svc {
    svc_config cfg;
    core *core;
    struct extender *ext; /* the extender verbs' state (extender.h) */
    struct volcano *vol;  /* the Volcano verbs' state (volcano.h) */
    http_server *http;
    http_server *http_metrics; /* on cfg.metrics_listen, NULL without one */
    volatile sig_atomic_t stop;
    struct k8s_client *k8s;    /* live-mode API client, NULL embedded */
    struct shard_coord *shard; /* NodeShard coordinator, NULL when --shard-mode none */
    struct fastpath *fp;       /* live mode with workers: the fast path */
    double load_ms;            /* svc_start: time to load or connect */
} svc;

/* svc_new builds the core and the entry points' state from a validated
 * config and wires the core's ports to this server. Starts nothing. */
as_err svc_new(const svc_config *cfg, svc **out, as_diag *diag);

/* svc_free stops whatever runs (svc_stop) and frees. NULL ok. */
void svc_free(svc *s);

/* svc_load_cluster loads an embedded cluster file into the core's cache
 * and marks it ready (core_load_cluster). */
as_err svc_load_cluster(svc *s, const char *path, as_diag *diag);

/*
 * svc_start runs the server in order: the shard coordinator, then the
 * cluster file (embedded) or the fast path and the API client (live), then
 * HTTP. On failure *stage names the step for the message ("cannot start
 * shard coordination", "cannot load the cluster", "cannot connect",
 * "cannot serve HTTP"), and what did start runs on until svc_stop or
 * svc_free, so the caller reports before anything shuts down.
 *
 * svc_stop stops in the reverse order, the one place that knows it: HTTP,
 * the fast path's threads, the API client (its hooks call the fast path
 * and the coordinator), then frees the fast path and the coordinator.
 * Idempotent; the core stays until svc_free.
 */
as_err svc_start(svc *s, const char **stage, as_diag *diag);
void svc_stop(svc *s);

/* svc_k8s_start connects the API client to the core's cache with kc
 * (fields left zero take the svc config's scheduler name, QPS, burst and
 * watch bounds; the shard hook is pointed at s->shard); the core becomes
 * ready after the first sync. svc_k8s_stop stops and frees it (NULL-safe,
 * idempotent). */
as_err svc_k8s_start(svc *s, const k8s_config *kc, as_diag *diag);
void svc_k8s_stop(svc *s);

/* svc_routes returns s's route table: the server's own endpoints
 * (/healthz, /readyz, /version, /metrics), then placement's, the
 * extender's and Volcano's, each with the context its handler runs with
 * (route.ctx). */
const http_route *svc_routes(svc *s, size_t *n);

/* svc_handler_ctx returns the context s runs handler fn with (its route's
 * ctx), for callers that run a handler without the HTTP server; NULL when
 * no route of s has fn. */
void *svc_handler_ctx(svc *s, http_handler_fn fn);

/* svc_http_start starts s->http on cfg.listen with svc_routes(), the
 * configured threads and body cap, counting every request in the core's
 * metrics (requests_total; request_errors_total for status >= 400), and
 * with cfg.metrics_listen s->http_metrics there, serving only GET
 * /healthz, /readyz and /metrics (plain HTTP, one thread).
 * svc_http_stop stops both (waits for in-flight requests); NULL-safe and
 * idempotent. Errors as http_server_start (the field --metrics-listen
 * when the second one fails). */
as_err svc_http_start(svc *s, as_diag *diag);
void svc_http_stop(svc *s);

/* svc_reload_tls re-reads the TLS certificate, key and client CA files
 * when force (SIGHUP) or when one of them changed (modification time,
 * size or inode; looked at most once a second) and hands them to the
 * server for the connections that follow (http_server_set_tls); open
 * connections are kept. *reloaded (may be NULL) says whether it did. On an
 * error (a file unreadable or refused) the running credentials stay and
 * diag names the flag; the same files are not tried again until they
 * change or force. AS_OK without doing anything for plain HTTP. */
as_err svc_reload_tls(svc *s, bool force, bool *reloaded, as_diag *diag);

/* svc_reload_policy re-reads cfg.policy_path (SIGHUP): on success swaps the
 * policy in; on failure keeps the old one and fills diag. AS_ENOTFOUND when
 * no policy file is configured. */
as_err svc_reload_policy(svc *s, as_diag *diag);

#endif

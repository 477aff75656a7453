/*
 * k8s.h - the live-cluster client: kubeconfig / in-cluster auth, list+watch
 * reflectors that keep the cache in step with the API server, binding, and
 * v1 Events.
 *
 * Written on libcurl + jansson (no kubernetes-client/c). Layers:
 *   k8s_conn    connection settings from a kubeconfig or the service account
 *   k8s_client  the running client: one thread per watched resource (Nodes,
 *               Pods, NodeShards), a bounded pool of keep-alive handles for
 *               bindings, an event poster, a housekeeping thread expiring
 *               assumed pods, a token-bucket rate limiter shared by all
 *               requests, and (with cfg.lease_name) an elector thread.
 *   k8s_lease   leader election on a coordination.k8s.io/v1 Lease (the
 *               elector's rounds; the shard controller drives one itself).
 *   k8s_stream  the incremental watch-event decoder (bounded line buffer),
 *               exposed for the fuzz target and the benchmark.
 *
 * THREADS AND OWNERSHIP
 *   k8s_client_start spawns the threads; k8s_client_stop wakes and joins
 *   them (in-flight transfers notice within about a second). Everything the
 *   threads touch hangs off the client; the cache is borrowed and must
 *   outlive it. k8s_bind and k8s_event_post are safe from any thread.
 *
 * CONSISTENCY
 *   Each reflector lists (limit/continue) inside a cache sync epoch, then
 *   watches from the list's resourceVersion with bookmarks. A dropped or
 *   corrupt stream resumes from the last applied resourceVersion; 410 Gone,
 *   an expired resourceVersion or an event too large for the line cap
 *   relists and reconciles (cache_sync_end_* removes what vanished).
 */
#ifndef AGENTSCHED_K8S_H
#define AGENTSCHED_K8S_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/buf.h"
#include "agentsched/core/cache.h"
#include "agentsched/base/error.h"
#include "agentsched/base/metrics.h"
#include "agentsched/model/model.h"

/* ------------------------------------------------------------------ */
/* Connection settings (kubeconfig.c)                                  */
/* ------------------------------------------------------------------ */

typedef struct k8s_blob {
    unsigned char *data; /* owned, NULL when absent */
    size_t len;
} k8s_blob;

/*
 * Everything needed to reach one API server. Paths are absolute (relative
 * kubeconfig paths are resolved against the kubeconfig's directory).
 * *_data blobs are decoded PEM and handed to libcurl as memory blobs.
 * All strings owned (NULL when absent); k8s_conn_free releases them.
 */
typedef struct k8s_conn {
    char *server;  /* "https://host:port", no trailing slash */
    char *context; /* context name used (for messages); NULL in-cluster */
    char *ca_file;
    k8s_blob ca_data;
    bool insecure; /* insecure-skip-tls-verify */
    char *tls_server_name;
    char *token;      /* static bearer token */
    char *token_file; /* bearer token re-read when the file changes */
    char *cert_file;
    k8s_blob cert_data;
    char *key_file;
    k8s_blob key_data;
    char *username; /* basic auth (rare) */
    char *password;
} k8s_conn;

/*
 * k8s_conn_from_kubeconfig reads a kubeconfig (YAML or JSON, via doc.h)
 * and resolves `context` (NULL = current-context) to its cluster and user.
 * Errors, each with diag naming the file and field and saying what to do:
 * AS_EIO missing/unreadable file; AS_EPARSE bad YAML; AS_ENOTFOUND unknown
 * or missing context / cluster / user; AS_EINVAL missing server, bad
 * base64; AS_EAUTH unreadable credential files (token, cert, key, CA);
 * AS_EUNSUPPORTED exec/auth-provider plugins without a usable credential.
 * Caller owns *out (k8s_conn_free).
 */
as_err k8s_conn_from_kubeconfig(const char *path, const char *context, k8s_conn **out,
                                as_diag *diag);

/*
 * k8s_conn_from_kubeconfig_json is the same on an already parsed document
 * (borrowed). path names the file in messages, and relative credential
 * paths resolve against its directory (NULL: "kubeconfig", the cwd).
 */
as_err k8s_conn_from_kubeconfig_json(json_t *root, const char *path, const char *context,
                                     k8s_conn **out, as_diag *diag);

/*
 * k8s_conn_in_cluster builds the in-cluster settings from
 * KUBERNETES_SERVICE_HOST / KUBERNETES_SERVICE_PORT and the service
 * account directory sa_dir (NULL = /var/run/secrets/kubernetes.io/
 * serviceaccount): token file (re-read when it rotates) and ca.crt.
 * AS_ENOTFOUND when the variables are unset, AS_EAUTH when the token is
 * unreadable. Caller owns *out.
 */
as_err k8s_conn_in_cluster(const char *sa_dir, k8s_conn **out, as_diag *diag);

/* k8s_conn_free releases conn and every string/blob in it. NULL ok. */
void k8s_conn_free(k8s_conn *conn);

/*
 * k8s_conn_route applies tls-server-name the way client-go does (the name
 * the server's certificate is checked against and sent as SNI, while the
 * connection still goes to the server's address). For an https server
 * with tls_server_name set, *url_base is the server URL with its host
 * replaced by that name and *connect_to the libcurl CURLOPT_CONNECT_TO
 * entry "NAME:PORT:HOST:PORT" sending those requests to the real address;
 * otherwise *url_base is a copy of server and *connect_to NULL. Both owned
 * by the caller (free). AS_EINVAL (diag names "server") when the server
 * URL has no host or a bad port; AS_ENOMEM.
 */
as_err k8s_conn_route(const k8s_conn *conn, char **url_base, char **connect_to, as_diag *diag);

/*
 * k8s_base64_decode decodes standard base64 (padding optional, whitespace
 * ignored) into a malloc'ed blob. AS_EINVAL on bad input.
 */
as_err k8s_base64_decode(const char *s, size_t len, k8s_blob *out);

/* ------------------------------------------------------------------ */
/* Client configuration                                                */
/* ------------------------------------------------------------------ */

typedef enum k8s_kind {
    K8S_KIND_NODE = 0,
    K8S_KIND_POD = 1,
    K8S_KIND_NODESHARD = 2,
    K8S_KIND__COUNT
} k8s_kind;

typedef enum k8s_event_type {
    K8S_EV_ADDED = 0,
    K8S_EV_MODIFIED,
    K8S_EV_DELETED,
    K8S_EV_BOOKMARK,
    K8S_EV_ERROR,
    K8S_EV_SYNC_BEGIN, /* a relist starts (hooks only; pod NULL) */
    K8S_EV_SYNC_END,   /* a relist finished (hooks only; pod NULL) */
} k8s_event_type;

typedef struct k8s_client k8s_client;

/*
 * Pod hook: called from the pod reflector thread after the cache applied
 * each pod event (ADDED/MODIFIED/DELETED, and SYNC_BEGIN/SYNC_END around a
 * relist with pod NULL). Return true to take ownership of pod (then free it
 * with model_pod_free), false to leave it to the client. For the fast-path
 * queue (pending pods of our scheduler). Must not block for long.
 */
typedef bool (*k8s_pod_fn)(void *arg, k8s_event_type ev, model_pod *pod);

/* One NodeShard (shard.volcano.sh/v1alpha1). Strings owned by the table
 * or by the copy returned from k8s_shards_copy. */
typedef struct k8s_shard {
    char *name;
    char *resource_version;
    char **nodes_desired;
    size_t n_desired;
    char **nodes_in_use;
    size_t n_in_use;
    char **nodes_to_remove;
    size_t n_to_remove;
    char **nodes_to_add;
    size_t n_to_add;
    char *last_update_time; /* NULL when absent */
} k8s_shard;

/*
 * Shard hook: called from the shard reflector thread after the shard table
 * changed (any event or relist). Read the table with k8s_shards_copy.
 */
typedef void (*k8s_shard_fn)(void *arg, k8s_client *k);

/*
 * Leader hook: called from the elector thread when this instance starts or
 * stops leading (see k8s_config.lease_name). Must not block for long.
 */
typedef void (*k8s_leader_fn)(void *arg, bool leading);

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
} k8s_config;

/* k8s_config_defaults fills every field with its default (no source). */
void k8s_config_defaults(k8s_config *cfg);

/* ------------------------------------------------------------------ */
/* Client (client.c)                                                   */
/* ------------------------------------------------------------------ */

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

/*
 * k8s_request performs one request on the calling thread with a private
 * connection (no keep-alive across calls), honouring auth, TLS and the
 * rate limiter. path starts with "/" and may carry a query. body may be
 * NULL. The response body goes into resp (its cap applies). *status gets
 * the HTTP status (0 on transport failure). Returns AS_OK whenever an HTTP
 * response arrived (check *status), AS_EIO / AS_ETIMEOUT on transport
 * failure (diag says why). For occasional calls (NodeShard status updates).
 */
as_err k8s_request(k8s_client *k, const char *method, const char *path, const char *body,
                   size_t body_len, buf *resp, long *status, as_diag *diag);

/* ------------------------------------------------------------------ */
/* Readiness                                                           */
/* ------------------------------------------------------------------ */

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

/* ------------------------------------------------------------------ */
/* Leader election (lease.c)                                           */
/* ------------------------------------------------------------------ */

/* What a candidate last observed of the Lease. */
typedef struct k8s_lease_obs {
    bool exists;
    char holder[256];    /* spec.holderIdentity ("" = free) */
    char renew_time[64]; /* spec.renewTime as written */
    char resource_version[64];
    int64_t duration_ms; /* spec.leaseDurationSeconds */
    int64_t transitions; /* spec.leaseTransitions */
    int64_t observed_ms; /* local monotonic time the record last changed */
} k8s_lease_obs;

typedef enum k8s_lease_action {
    K8S_LEASE_CREATE = 0, /* no Lease: create it holding it */
    K8S_LEASE_RENEW,      /* we hold it: renew */
    K8S_LEASE_ACQUIRE,    /* free or expired: take it over */
    K8S_LEASE_FOLLOW,     /* someone else holds a live lease */
} k8s_lease_action;

/*
 * k8s_lease_decide: expiry is judged as client-go does, on the local
 * clock: a lease whose record has not changed for its duration since we
 * first saw that record is expired (no trust in the holder's clock).
 */
k8s_lease_action k8s_lease_decide(const k8s_lease_obs *obs, const char *me, int64_t now_ms);

/* k8s_lease_observe folds a freshly read Lease object (borrowed JSON, NULL
 * when 404) into obs, resetting observed_ms to now_ms when the record
 * changed. */
void k8s_lease_observe(k8s_lease_obs *obs, const json_t *lease, int64_t now_ms);

/* k8s_lease_default_identity: $POD_NAME, else "HOSTNAME-PID". */
void k8s_lease_default_identity(char *out, size_t len);

typedef struct k8s_lease_config {
    const char *ns;            /* default kube-system */
    const char *name;          /* required */
    const char *identity;      /* required; 1..255 characters */
    int64_t duration_ms;       /* default 15000, at least 1000 */
    int64_t renew_deadline_ms; /* default 2/3 of the duration */
} k8s_lease_config;

typedef struct k8s_lease k8s_lease;

/* k8s_lease_new prepares a candidate (strings copied; k borrowed, must
 * outlive it). AS_EINVAL naming the flag for a bad config. Caller owns
 * *out (k8s_lease_free). Not thread-safe: one thread drives it. */
as_err k8s_lease_new(k8s_client *k, const k8s_lease_config *cfg, k8s_lease **out, as_diag *diag);
void k8s_lease_free(k8s_lease *l);

/*
 * k8s_lease_step runs one round on the calling thread (now_ms: monotonic
 * ms): reads the Lease, then creates, renews or takes it over as
 * k8s_lease_decide says, with the read resourceVersion as the lock (a 409
 * means another candidate won). Requests bypass the client's rate limiter
 * and time out after a quarter of (duration - renew deadline) each. A
 * holder that cannot renew keeps the lease until the renew deadline after
 * its last successful round, then steps down (a round begun before the
 * deadline ends by half the gap after it): before any other candidate can
 * see the lease expire. Returns true while held.
 */
bool k8s_lease_step(k8s_lease *l, int64_t now_ms);

/* k8s_lease_held: the result of the last round. */
bool k8s_lease_held(const k8s_lease *l);

/* k8s_lease_deadline: while held, the monotonic ms at which the holder
 * steps down unless a round renews first (INT64_MAX when not held); the
 * elector wakes for it. */
int64_t k8s_lease_deadline(const k8s_lease *l);

/* k8s_lease_identity: our holder identity (borrowed). */
const char *k8s_lease_identity(const k8s_lease *l);

/* k8s_lease_observed: the Lease as last read or written (borrowed). */
const k8s_lease_obs *k8s_lease_observed(const k8s_lease *l);

/* k8s_lease_release gives a held lease up (empty holder, 1 s duration, as
 * client-go's ReleaseOnCancel), so a standby takes over at its next round
 * instead of after the whole duration. No-op when not held. */
void k8s_lease_release(k8s_lease *l, int64_t now_ms);

/* ------------------------------------------------------------------ */
/* Shards                                                              */
/* ------------------------------------------------------------------ */

/* k8s_shards_copy copies the current NodeShard table (sorted by name).
 * Caller frees with k8s_shards_free. *n = 0 when the CRD is absent. */
as_err k8s_shards_copy(k8s_client *k, k8s_shard **out, size_t *n);
void k8s_shards_free(k8s_shard *shards, size_t n);

/* ------------------------------------------------------------------ */
/* Binding (bind.c)                                                    */
/* ------------------------------------------------------------------ */

/*
 * k8s_bind posts a Binding of pod ns/name (uid may be NULL or "") to node,
 * on one of cfg.bind_concurrency keep-alive connections (blocking while
 * all are busy). 201/200, or 409 "already assigned to node X" with X ==
 * node: AS_OK. 409 with another node: AS_ECONFLICT. 404: AS_ENOTFOUND.
 * 429/5xx/transport errors, and a 409 naming no node (etcd failed
 * mid-write), are retried (cfg.bind_retries times, with backoff) and then
 * AS_EHTTP / AS_EIO. When an attempt may have been applied unheard (the
 * connection broke after the request was sent, 504, or that 409), the
 * same binding is retried beyond that budget until an answer
 * settles it or cfg.assumed_ttl_ms / 2 has passed since the call began
 * (counted in bind_unknown). 401/403: AS_EAUTH. Other: AS_EHTTP. The
 * caller releases the assumed pod on failure. diag says what happened.
 */
as_err k8s_bind(k8s_client *k, const char *ns, const char *name, const char *uid, const char *node,
                as_diag *diag);

/* Completion of an asynchronous bind (called on a bind worker thread). */
typedef void (*k8s_bind_done_fn)(void *arg, as_err err, const as_diag *diag);

/*
 * k8s_bind_async queues a bind (strings copied) for the bind workers;
 * done (may be NULL) gets the k8s_bind result. AS_ELIMIT when the queue is
 * full (the caller releases the pod), AS_EINVAL after stop.
 */
as_err k8s_bind_async(k8s_client *k, const char *ns, const char *name, const char *uid,
                      const char *node, k8s_bind_done_fn done, void *arg);

/*
 * k8s_get_pod fetches pod ns/name and decodes it with reg (borrowed).
 * AS_ENOTFOUND on 404, AS_EAUTH on 401/403, AS_EHTTP otherwise, transport
 * errors as k8s_request. Caller owns *out (model_pod_free). For the
 * extender bind of a pod whose filter note is gone.
 */
as_err k8s_get_pod(k8s_client *k, const char *ns, const char *name, const model_registry *reg,
                   model_pod **out, as_diag *diag);

/* k8s_conflict_node extracts X from a 409 body/message "... is already
 * assigned to node \"X\"" into out; false when absent. */
bool k8s_conflict_node(const char *body, size_t len, char *out, size_t outlen);

/* ------------------------------------------------------------------ */
/* Events (events.c)                                                   */
/* ------------------------------------------------------------------ */

/*
 * k8s_event_post queues a v1 Event about pod ns/name (uid may be NULL):
 * type "Normal" or "Warning", reason ("Scheduled", "FailedScheduling"),
 * message. At most one event per pod and reason per
 * cfg.event_pod_interval_ms; beyond that, or when the queue is full, the
 * event is dropped (counted). Never blocks on the network.
 */
void k8s_event_post(k8s_client *k, const char *ns, const char *name, const char *uid,
                    const char *type, const char *reason, const char *message);

/* ------------------------------------------------------------------ */
/* Watch stream decoding (watch.c)                                     */
/* ------------------------------------------------------------------ */

typedef struct k8s_stream k8s_stream;

/*
 * k8s_stream_new makes a decoder for newline-delimited watch events of
 * kind, applying them to c (borrowed) with reg from the cache. max_line 0
 * = default. client may be NULL (no hooks, no shard table). Caller owns.
 */
as_err k8s_stream_new(k8s_kind kind, cache *c, k8s_client *client, size_t max_line,
                      k8s_stream **out);
void k8s_stream_free(k8s_stream *s);

/*
 * k8s_stream_feed consumes data[0..len) (any split), applying each
 * complete event. Returns AS_OK to continue; AS_EGONE on an ERROR event
 * with code 410 (relist); AS_ETOOBIG when a line exceeds max_line (relist:
 * an event is lost); AS_EPARSE on a line that is not a watch event
 * (reconnect from the last resourceVersion); AS_EHTTP on another ERROR
 * event. After an error the stream must be reset before reuse.
 */
as_err k8s_stream_feed(k8s_stream *s, const char *data, size_t len);

/* k8s_stream_reset drops any partial line and sets the resume
 * resourceVersion (NULL keeps it). */
void k8s_stream_reset(k8s_stream *s, const char *rv);

/*
 * k8s_stream_skip returns the rule table (extargs_skip, extargs.h) the
 * stream and the list decode objects of kind with: the members the model
 * never reads, left out of the tree. NULL: everything is built. Static.
 * The extender builds the Pod of filter and prioritize with the
 * K8S_KIND_POD table too (extargs_parse_pod).
 */
const struct extargs_skip *k8s_stream_skip(k8s_kind kind);

/* k8s_stream_rv returns the last applied resourceVersion ("" if none). */
const char *k8s_stream_rv(const k8s_stream *s);

/* k8s_stream_events returns the number of events applied so far. */
uint64_t k8s_stream_events(const k8s_stream *s);

/* ------------------------------------------------------------------ */
/* Service wiring                                                      */
/* ------------------------------------------------------------------ */

/*
 * k8s_start builds a client for cache c from cfg (k8s_client_new) and
 * starts it (k8s_client_start); after the first sync of nodes and pods it
 * stores 1 in *synced (atomically; synced may be NULL). Caller owns *out
 * (k8s_client_free). Errors as k8s_client_new; a failed start is freed.
 */
as_err k8s_start(const k8s_config *cfg, cache *c, int *synced, k8s_client **out, as_diag *diag);

/*
 * k8s_metrics_update sets the client's counters and gauges in m
 * (agentsched_k8s_*: watch events, relists, reconnects, watch downtime,
 * binds, events, expired assumed pods, synced). Call before rendering
 * /metrics; no-op when k or m is NULL.
 */
void k8s_metrics_update(k8s_client *k, metrics *m);

/* ------------------------------------------------------------------ */
/* Pod status (status.c, added by the fast path)                       */
/* ------------------------------------------------------------------ */

/*
 * k8s_pod_set_condition sets one condition on pod ns/name with a strategic
 * merge patch of pods/{name}/status (conditions merge by type), as
 * kube-scheduler does for PodScheduled=False/Unschedulable. reason and
 * message may be NULL. Synchronous, rate-limited, private connection.
 * AS_OK on 2xx; AS_ENOTFOUND on 404; AS_EAUTH on 401/403; AS_EHTTP other
 * statuses; AS_EIO transport. diag says what happened.
 */
as_err k8s_pod_set_condition(k8s_client *k, const char *ns, const char *name, const char *type,
                             const char *status, const char *reason, const char *message,
                             as_diag *diag);

/* ------------------------------------------------------------------ */
/* NodeShard writes and leases (shard_status.c, added by the shards    */
/* helper)                                                             */
/* ------------------------------------------------------------------ */

/*
 * k8s_patch sends PATCH path with the given Content-Type (e.g.
 * "application/merge-patch+json") on a private connection, rate-limited,
 * like k8s_request (same return contract: AS_OK whenever a response
 * arrived; check *status).
 */
as_err k8s_patch(k8s_client *k, const char *path, const char *content_type, const char *body,
                 size_t body_len, buf *resp, long *status, as_diag *diag);

/*
 * k8s_shard_patch_status merge-patches nodeshards/{name}/status with
 * status (borrowed JSON object: nodesInUse, nodesToRemove, nodesToAdd,
 * lastUpdateTime). AS_OK on 2xx; AS_ENOTFOUND on 404 (no such NodeShard or
 * CRD); AS_EAUTH on 401/403; AS_EHTTP otherwise; transport errors as
 * k8s_request.
 */
as_err k8s_shard_patch_status(k8s_client *k, const char *name, const json_t *status, as_diag *diag);

/*
 * k8s_shard_put_desired sets spec.nodesDesired of NodeShard name to
 * nodes[0..n) (a merge patch; the object is created with POST when it is
 * absent). Errors as k8s_shard_patch_status.
 */
as_err k8s_shard_put_desired(k8s_client *k, const char *name, const char *const *nodes, size_t n,
                             as_diag *diag);

#endif

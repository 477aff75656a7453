/*
 * transport.h - the floor of the k8s client that every request goes
 * through: the connection (kubeconfig or in-cluster settings, TLS, bearer
 * token rotation), the client-side token bucket, request execution on
 * libcurl easy handles with the stop flag aborting transfers, capped
 * backoff, and the readiness and traffic counters the reflectors, binds
 * and events keep.
 *
 * bind, events, lease, watch, status and shard_status call these; the
 * lifecycle (k8s.h) sets the transport up with k8s_transport_init and
 * tears it down with k8s_transport_fini. Nothing here calls back into
 * them: the one upward signal, the first sync, leaves through the
 * configured synced hook.
 *
 * Every function takes a client whose transport was initialised and is
 * safe from any thread unless its comment says otherwise.
 *
 * The client's configuration (k8s_config, with the hooks through which
 * the client reaches its embedder) and its status snapshot (k8s_status)
 * are declared here too: the transport reads the one and keeps the other,
 * and every module above needs them.
 */
#ifndef AGENTSCHED_K8S_TRANSPORT_H
#define AGENTSCHED_K8S_TRANSPORT_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agentsched/base/buf.h"
#include "agentsched/base/error.h"
#include "agentsched/k8s/kubeconfig.h"
#include "agentsched/k8s/wire.h"
#include "agentsched/model/pod.h"

typedef struct k8s_client k8s_client;

/* The resources the client watches; indexes the per-kind status arrays. */
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

/*
 * Pod hook: called from the pod reflector thread after the cache applied
 * each pod event (ADDED/MODIFIED/DELETED, and SYNC_BEGIN/SYNC_END around a
 * relist with pod NULL). Return true to take ownership of pod (then free it
 * with model_pod_free), false to leave it to the client. For the fast-path
 * queue (pending pods of our scheduler). Must not block for long.
 */
typedef bool (*k8s_pod_fn)(void *arg, k8s_event_type ev, model_pod *pod);

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

/*
 * Synced hook: called once, from the reflector thread that completes the
 * first full list of nodes and pods, before k8s_wait_synced's waiters
 * wake. Must not block for long.
 */
typedef void (*k8s_synced_fn)(void *arg);

/* The bind pool's keep-alive handles by default (k8s_config's
 * bind_concurrency): the fast path's 32 bind threads and the extender's
 * 64. */
#define K8S_BIND_CONCURRENCY 96

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
    size_t max_list_body;           /* list page cap; default 32 MiB (pages past it: fewer items) */
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
    unsigned bind_concurrency;      /* keep-alive handles; default K8S_BIND_CONCURRENCY */
    unsigned bind_warm;             /* of them kept open while leading, ahead
                                       of use (k8s_bind_keep_warm); default 0 */
    int64_t bind_warm_idle_ms;      /* a free warm connection idle this long is
                                       sent a GET; default 45000 */
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

typedef struct k8s_status {
    bool synced;                            /* first full list of nodes and pods applied */
    int64_t synced_at_ms;                   /* wall clock; 0 before */
    int64_t down_since_ms[K8S_KIND__COUNT]; /* wall clock; 0 while up */
    int64_t up_since_ms[K8S_KIND__COUNT];   /* wall clock of the last recovery
                                               from down; 0: never down */
    bool shards_present;                    /* NodeShard CRD answered */
    uint64_t events[K8S_KIND__COUNT];       /* watch events applied */
    uint64_t pod_events_undecoded;          /* of the pods', applied without a decode
                                               (k8s_stream_briefs) */
    uint64_t pod_events_spec_reused;        /* built from a remembered spec, no DOM
                                               (k8s_stream_fields) */
    uint64_t relists[K8S_KIND__COUNT];      /* lists after the first */
    uint64_t reconnects[K8S_KIND__COUNT];
    uint64_t binds_ok, binds_failed, bind_retries;
    uint64_t bind_unknown; /* binds retried because an attempt may have been applied */
    /* bind connections k8s_bind_keep_warm opened, kept from the idle
     * timeout, and failed to */
    uint64_t bind_warm_opened, bind_warm_refreshed, bind_warm_failed;
    uint64_t events_posted, events_dropped;
    uint64_t assumed_expired;
    bool leader_elect;           /* an elector runs (lease_name set) */
    bool leader;                 /* leading now (always true without election) */
    uint64_t leader_transitions; /* times this instance started or stopped leading */
    char leader_holder[256];     /* holderIdentity last observed ("" = none) */
} k8s_status;

/* k8s_kind_name: "nodes", "pods" or "nodeshards" (logs, metric labels).
 * kind must be a valid k8s_kind. */
const char *k8s_kind_name(k8s_kind kind);

/* Token bucket; reservation style (a caller may drive tokens negative and
 * then sleeps for its share), so waiting callers are served in order. */
typedef struct k8s_ratelimit {
    pthread_mutex_t mu;
    double tokens;
    double qps; /* <= 0: unlimited */
    double burst;
    uint64_t last_ns;
} k8s_ratelimit;

/*
 * k8s_transport_init sets up the transport half of k (whose cfg already
 * holds its defaults): the stop flag with its mutex and monotonic
 * condition, the status mutex, the request rate limiter, libcurl's global
 * state, and the connection (cfg.conn copied, else in-cluster, else the
 * kubeconfig) with its tls-server-name route and static token. The
 * synchronisation objects are made before anything can fail, so
 * k8s_transport_fini is safe after any error. Errors as k8s_conn_*
 * (kubeconfig.h); AS_EINVAL when no source is configured; AS_ENOMEM.
 */
as_err k8s_transport_init(k8s_client *k, as_diag *diag);

/* k8s_transport_fini releases what k8s_transport_init made. Call once,
 * after every thread using the transport has been joined. */
void k8s_transport_fini(k8s_client *k);

/* k8s_transport_stop raises the stop flag and wakes every k8s_sleep_ms
 * sleeper; transfers in flight abort within about a second. Returns true
 * the first time, false when the flag was already up. */
bool k8s_transport_stop(k8s_client *k);

/* k8s_stopping: true once the stop flag is up. */
bool k8s_stopping(k8s_client *k);

/* k8s_sleep_ms sleeps up to ms on the monotonic clock, waking early on
 * stop. Returns false when stopping. */
bool k8s_sleep_ms(k8s_client *k, int64_t ms);

/* k8s_backoff_ms: capped exponential backoff with jitter in [d/2, d] for
 * attempt (0-based); *rng is the caller's xorshift state (0 seeds it). */
int64_t k8s_backoff_ms(int64_t initial, int64_t max, unsigned attempt, uint64_t *rng);

/* k8s_rl_init sets rl up full (burst tokens); qps <= 0: unlimited.
 * k8s_rl_take takes one token if one is there now, never waiting (true
 * when unlimited). The caller destroys rl->mu with pthread_mutex_destroy. */
void k8s_rl_init(k8s_ratelimit *rl, double qps, double burst);
bool k8s_rl_take(k8s_ratelimit *rl);

/* k8s_rl_debit_ns takes one token of rl now, going into debt when there
 * is none, and returns the nanoseconds until that token would have been
 * earned (0: it was there): the wait of a caller that does not block. */
int64_t k8s_rl_debit_ns(k8s_ratelimit *rl);

/* k8s_rl_wait blocks for one token of the client's request limiter.
 * Returns false when stopping. */
bool k8s_rl_wait(k8s_client *k);

/* k8s_path_segment appends s to b as one URL path segment: RFC 3986's
 * unreserved characters as they are, every other byte %XX (what
 * curl_easy_escape does, without its allocation). Returns b->err. */
as_err k8s_path_segment(buf *b, const char *s);

/* k8s_url builds server + path into a malloc'ed URL (NULL: no memory). */
char *k8s_url(k8s_client *k, const char *path);

/*
 * k8s_easy_prepare prepares easy handle h for url: TLS, auth, timeouts,
 * headers (*hdrs is created; the caller frees it with curl_slist_free_all
 * after the transfer). json_body adds Content-Type: application/json.
 * AS_ENOMEM.
 */
as_err k8s_easy_prepare(k8s_client *k, CURL *h, const char *url, bool json_body,
                        struct curl_slist **hdrs);

/* k8s_token_invalidate forces the next token read to reload the token
 * file (after a 401). */
void k8s_token_invalidate(k8s_client *k);

/*
 * k8s_do runs a whole request on handle h (keep-alive across calls): rate
 * limit, prepare, perform, collect the body into resp (its cap applies).
 * Return contract as k8s_request.
 */
as_err k8s_do(k8s_client *k, CURL *h, const char *method, const char *path, const char *body,
              size_t body_len, buf *resp, long *status, as_diag *diag);

/* k8s_do_ex is k8s_do also reporting a 429/503 Retry-After (seconds form)
 * in ms (0: none) and, when sends is not NULL, how many times the request
 * went out: libcurl silently sends a request again on a fresh connection
 * when the reused one died before any answer, so 2 means an earlier copy
 * may have been applied unheard. */
as_err k8s_do_ex(k8s_client *k, CURL *h, const char *method, const char *path, const char *body,
                 size_t body_len, buf *resp, long *status, int64_t *retry_after_ms, unsigned *sends,
                 as_diag *diag);

/*
 * A keep-alive handle whose options (TLS, credentials, timeouts, headers)
 * stay set across requests, for the paths that send the same kind of
 * request again and again (the bind pool's Bindings and Events): no
 * curl_easy_reset and full setup per call. The headers are rebuilt when
 * the bearer token changes. Used by one thread at a time.
 */
typedef struct k8s_kept {
    CURL *h;                 /* libcurl's request, and the wire's connection options */
    struct curl_slist *hdrs; /* the handle's headers; NULL until first use */
    uint64_t tok_gen;        /* the token generation hdrs and head were built for */
    bool set;                /* the client's options are set on h */
    /* Requests go on the wire (wire.h) unless via_curl is set or the
     * connection needs what only libcurl's requests do (basic auth). */
    bool via_curl;
    k8s_wire wire;
    buf head;        /* the wire's headers after the request line (token included) */
    buf out;         /* the wire's requests as sent */
    unsigned queued; /* requests added to out and not yet flushed */
    /* bytes of the last request that reached the connection (0: it was
     * never sent, so it cannot have been applied) */
    size_t sent;
    /* Scratch for the holder's request (path, body, answer): reset, not
     * freed, between calls, so a request allocates nothing of its own. */
    buf path, body, resp;
} k8s_kept;

/* k8s_kept_init makes an unused kept handle, its answer buffer capped at
 * resp_cap (AS_ENOMEM); k8s_kept_fini closes its connection and frees
 * it. */
as_err k8s_kept_init(k8s_kept *kh, size_t resp_cap);
void k8s_kept_fini(k8s_kept *kh);

/* k8s_do_kept is k8s_do_ex for a JSON POST (body not NULL) on kept
 * handle kh. k8s_do_kept_try is the same without waiting: within
 * timeout_ms instead of cfg.request_timeout_ms, and AS_EAGAIN (nothing
 * sent) when the client's rate limiter has no token now. */
as_err k8s_do_kept(k8s_client *k, k8s_kept *kh, const char *path, const char *body, size_t body_len,
                   buf *resp, long *status, int64_t *retry_after_ms, unsigned *sends,
                   as_diag *diag);
as_err k8s_do_kept_try(k8s_client *k, k8s_kept *kh, const char *path, const char *body,
                       size_t body_len, buf *resp, long *status, int64_t *retry_after_ms,
                       unsigned *sends, int64_t timeout_ms, as_diag *diag);

/*
 * k8s_kept_post_add, k8s_kept_post_flush and k8s_kept_post_recv are
 * k8s_do_kept in steps, for POSTs whose answers the caller reads later,
 * several in one write (HTTP/1.1 pipelining; k8s_wire_send,
 * k8s_wire_recv). add frames one behind those added since the last flush
 * (AS_ETOOBIG, nothing added, when it would pass kh's request buffer:
 * flush, then add it again; AS_EUNSUPPORTED when kh's requests go through
 * libcurl: then use k8s_do_kept). flush takes a token of the client's
 * rate limiter for each, with wait as it comes, else only if one is there
 * now (AS_EAGAIN: nothing sent, the requests still added), and writes them
 * all, never twice. recv reads the next answer due (kh->wire.pending
 * counts them) into resp (kh->resp when NULL), *status its HTTP status (0
 * on failure), within timeout_ms from the call (0: the client's request
 * timeout). More flushes may come before the recvs. After an error every
 * answer due is lost. Nothing else may use kh while answers are due.
 */
/* k8s_kept_get sends a GET of path on kh's wire (connecting when it has
 * no connection) and reads the answer into kh->resp (its cap applies),
 * *status its HTTP status (0 on failure), within timeout_ms; outside the
 * rate limiter (the bind pool's keep-alive: a few small reads a second).
 * AS_EUNSUPPORTED when kh's requests go through libcurl; else errors as
 * k8s_wire_do's, after which the connection is closed. Not while answers
 * are due on kh. */
as_err k8s_kept_get(k8s_client *k, k8s_kept *kh, const char *path, long *status, int64_t timeout_ms,
                    as_diag *diag);

/* k8s_pod_key_hash keys a pod (by uid, else name, and namespace) with
 * one more string (an Event's reason, a Binding's node) for the client's
 * in-memory tables; never 0. Not stable across processes. */
uint64_t k8s_pod_key_hash(const char *ns, const char *name, const char *uid, const char *what);

/*
 * k8s_get_stream_open and k8s_get_stream_read are a GET whose answer is a
 * stream (a watch) on w, a wire of the caller's, framed here and read as
 * it comes, with none of libcurl's transfer machinery on the way: open
 * takes a rate-limiter token (waiting), frames the GET of path with the
 * client's current bearer token, connects a new connection from proto's
 * options (a handle the client's options were set on, k8s_easy_prepare;
 * borrowed) and reads the head, as k8s_wire_stream_open (a 401 is the
 * caller's to act on: k8s_token_invalidate). AS_EUNSUPPORTED: the client's requests need
 * libcurl; use curl_easy_perform. read is k8s_wire_stream_read, waiting
 * up to timeout_ms and stopping when the client stops.
 */
as_err k8s_get_stream_open(k8s_client *k, k8s_wire *w, CURL *proto, const char *path, long *status,
                           buf *errbody, as_diag *diag);
as_err k8s_get_stream_read(k8s_client *k, k8s_wire *w, int64_t timeout_ms, k8s_wire_sink sink,
                           void *arg, bool *end, as_diag *diag);

as_err k8s_kept_post_add(k8s_client *k, k8s_kept *kh, const char *path, const char *body,
                         size_t body_len, as_diag *diag);
as_err k8s_kept_post_flush(k8s_client *k, k8s_kept *kh, bool wait, as_diag *diag);
as_err k8s_kept_post_recv(k8s_client *k, k8s_kept *kh, buf *resp, long *status, int64_t timeout_ms,
                          as_diag *diag);

/* k8s_do_priority: as k8s_do, but outside the rate limiter and with its
 * own timeout (connect included), for leader election: a renewal must not
 * queue behind a burst of binds, nor outlive the renew deadline. */
as_err k8s_do_priority(k8s_client *k, CURL *h, const char *method, const char *path,
                       const char *body, size_t body_len, buf *resp, long *status,
                       int64_t timeout_ms, as_diag *diag);

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

/* k8s_mark_up / k8s_mark_down record a watch stream of kind coming back
 * or going down (wall clock; for readiness and housekeeping). */
void k8s_mark_up(k8s_client *k, k8s_kind kind);
void k8s_mark_down(k8s_client *k, k8s_kind kind);

/* k8s_mark_listed records a full list of kind; when nodes and pods have
 * both been listed the first time, the client is synced: the synced hook
 * runs (on the calling thread, once) and sleepers wake. */
void k8s_mark_listed(k8s_client *k, k8s_kind kind);

/* k8s_count adds n to a counter of the client's status (field points into
 * it) under the status mutex. */
void k8s_count(k8s_client *k, uint64_t *field, uint64_t n);

#endif

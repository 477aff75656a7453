/*
 * internal.h - what the k8s module's files share (not a public header).
 */
#ifndef AGENTSCHED_K8S_INTERNAL_H
#define AGENTSCHED_K8S_INTERNAL_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "agentsched/k8s/k8s.h"

/* Token bucket; reservation style (a caller may drive tokens negative and
 * then sleeps for its share), so waiting callers are served in order. */
typedef struct k8s_ratelimit {
    pthread_mutex_t mu;
    double tokens;
    double qps; /* <= 0: unlimited */
    double burst;
    uint64_t last_ns;
} k8s_ratelimit;

typedef struct k8s_reflector k8s_reflector;

typedef struct k8s_bind_job {
    char *ns, *name, *uid, *node;
    k8s_bind_done_fn done;
    void *arg;
} k8s_bind_job;

typedef struct k8s_event_job {
    char *ns, *name, *uid, *type, *reason, *message;
    int64_t at_ms;
} k8s_event_job;

struct k8s_client {
    k8s_config cfg; /* strings below replace the borrowed ones */
    char *scheduler_name;
    char *pod_field_selector;
    k8s_conn *conn;
    char *url_base;                /* conn->server, host replaced by tls-server-name */
    struct curl_slist *connect_to; /* routes url_base's host to the server; or NULL */
    cache *cache;
    int *synced_flag; /* from k8s_start: set to 1 after the first sync; NULL = none */

    pthread_mutex_t mu;  /* guards stop/started and the fields below */
    pthread_cond_t cond; /* CLOCK_MONOTONIC; stop and sync wake-ups */
    int stop;            /* (atomic) */
    bool started, stopped;

    pthread_mutex_t tok_mu;
    char *token; /* current bearer token (file-backed ones rotate) */
    struct timespec tok_mtime;
    off_t tok_size;
    ino_t tok_ino;
    uint64_t tok_checked_ns;

    k8s_ratelimit rl;

    /* reflectors */
    k8s_reflector *refl[K8S_KIND__COUNT];
    pthread_t refl_thread[K8S_KIND__COUNT];
    bool refl_running[K8S_KIND__COUNT];

    pthread_mutex_t st_mu;
    k8s_status st;
    bool listed[K8S_KIND__COUNT];

    pthread_mutex_t shard_mu;
    k8s_shard *shards;
    size_t nshards;

    /* housekeeping */
    pthread_t hk_thread;
    bool hk_running;

    /* leader election (NULL lease: none) */
    k8s_lease *lease;
    pthread_t lease_thread;
    bool lease_running;

    /* bind: pool of keep-alive handles + async workers */
    pthread_mutex_t bmu;
    pthread_cond_t bcond;  /* a handle was returned */
    pthread_cond_t bqcond; /* a job was queued / stop */
    CURL **bhandles;
    size_t nbfree;
    k8s_bind_job *bq;
    size_t bq_cap, bq_head, bq_len;
    pthread_t *bworkers;
    size_t nbworkers;

    /* events */
    pthread_mutex_t emu;
    pthread_cond_t econd;
    k8s_event_job *eq;
    size_t eq_cap, eq_head, eq_len;
    uint64_t *erate_key; /* per pod+reason rate table (hash, last ms) */
    int64_t *erate_ms;
    size_t erate_n;
    k8s_ratelimit erl; /* event_qps, taken with k8s_rl_take under emu */
    pthread_t ethread;
    bool erunning;
};

/* ---- client.c ---- */

/* True once stop was requested. */
bool k8s_stopping(k8s_client *k);

/* Sleeps up to ms (monotonic), waking early on stop. False if stopping. */
bool k8s_sleep_ms(k8s_client *k, int64_t ms);

/* Blocks for one rate-limiter token. False if stopping. */
bool k8s_rl_wait(k8s_client *k);

/* k8s_rl_init sets rl up full (burst tokens); qps <= 0: unlimited.
 * k8s_rl_take takes one token if one is there now, never waiting (true
 * when unlimited). Destroy rl->mu with pthread_mutex_destroy. */
void k8s_rl_init(k8s_ratelimit *rl, double qps, double burst);
bool k8s_rl_take(k8s_ratelimit *rl);

/* Prepares easy handle h for url: TLS, auth, timeouts, headers (*hdrs is
 * created; caller frees with curl_slist_free_all after the transfer).
 * json_body adds Content-Type: application/json. */
as_err k8s_easy_prepare(k8s_client *k, CURL *h, const char *url, bool json_body,
                        struct curl_slist **hdrs);

/* Builds server + path into a malloc'ed URL. */
char *k8s_url(k8s_client *k, const char *path);

/* k8s_do runs a whole request on handle h (keep-alive across calls):
 * rate limit, prepare, perform, collect the body into resp. As k8s_request. */
as_err k8s_do(k8s_client *k, CURL *h, const char *method, const char *path, const char *body,
              size_t body_len, buf *resp, long *status, as_diag *diag);

/* k8s_do_ex also reports a 429/503 Retry-After (seconds form) in ms (0: none)
 * and, when sends is not NULL, how many times the request went out: libcurl
 * silently sends a request again on a fresh connection when the reused one
 * died before any answer, so 2 means an earlier copy may have been applied
 * unheard. */
as_err k8s_do_ex(k8s_client *k, CURL *h, const char *method, const char *path, const char *body,
                 size_t body_len, buf *resp, long *status, int64_t *retry_after_ms, unsigned *sends,
                 as_diag *diag);

/* k8s_do_priority: as k8s_do, but outside the rate limiter and with its
 * own timeout (connect included), for leader election: a renewal must not
 * queue behind a burst of binds, nor outlive the renew deadline. */
as_err k8s_do_priority(k8s_client *k, CURL *h, const char *method, const char *path,
                       const char *body, size_t body_len, buf *resp, long *status,
                       int64_t timeout_ms, as_diag *diag);

/* Forces the next token read to reload the file (after a 401). */
void k8s_token_invalidate(k8s_client *k);

/* Monotonic and wall clocks. */
uint64_t k8s_mono_ns(void);
int64_t k8s_mono_ms(void); /* k8s_mono_ns in ms: the lease's clock */
int64_t k8s_now_ms(void);

/* Readiness bookkeeping from the reflectors. */
/* k8s_kind_name: "nodes", "pods" or "nodeshards" (logs, metric labels). */
const char *k8s_kind_name(k8s_kind kind);
void k8s_mark_up(k8s_client *k, k8s_kind kind);
void k8s_mark_down(k8s_client *k, k8s_kind kind);
void k8s_mark_listed(k8s_client *k, k8s_kind kind);
void k8s_count(k8s_client *k, uint64_t *field, uint64_t n);

/* Capped exponential backoff with jitter for attempt (0-based). */
int64_t k8s_backoff_ms(int64_t initial, int64_t max, unsigned attempt, uint64_t *rng);

/* ---- watch.c ---- */
/* k8s_reflectors_start starts one reflector thread per kind (NodeShards only
 * with cfg.watch_shards). AS_ENOMEM; what started is left for _join. */
as_err k8s_reflectors_start(k8s_client *k);
/* k8s_reflectors_join joins and frees the reflectors; set k->stop first (it
 * does not signal them). */
void k8s_reflectors_join(k8s_client *k);
/* k8s_shard_free_fields frees every field of *s and zeroes it; s not freed. */
void k8s_shard_free_fields(k8s_shard *s);

/* ---- bind.c ---- */
/* k8s_bind_init allocates the bind queue and cfg.bind_concurrency curl
 * handles (workers start on the first async bind). AS_ENOMEM. */
as_err k8s_bind_init(k8s_client *k);
/* k8s_bind_shutdown (k->stop set) wakes and joins the workers, fails queued
 * jobs with AS_EIO through their callbacks, waits for synchronous binds to
 * return their handles and frees everything. */
void k8s_bind_shutdown(k8s_client *k);

/* ---- events.c ---- */
/* k8s_events_init allocates the event queue and per-pod rate table
 * (the poster thread starts on the first event). AS_ENOMEM. */
as_err k8s_events_init(k8s_client *k);
/* k8s_events_shutdown (k->stop set) joins the poster thread, drops queued
 * events unposted and frees the queue. */
void k8s_events_shutdown(k8s_client *k);

#endif

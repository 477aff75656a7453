/*
 * internal.h - the layout of struct k8s_client, which the k8s wing's files
 * share (not a public header: outside the wing the client is opaque).
 * Functions are declared in the header named after the file that defines
 * them.
 */
#ifndef AGENTSCHED_K8S_INTERNAL_H
#define AGENTSCHED_K8S_INTERNAL_H

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "agentsched/core/cache.h"
#include "agentsched/k8s/kubeconfig.h"
#include "agentsched/k8s/transport.h"

/* Bindings whose answer was lost, remembered at once (bind.c). */
#define K8S_UNHEARD_MAX 1024

/* The modules above the transport keep their own types to themselves: the
 * client holds them by pointer only, so this layout (and the transport,
 * which reads it) depends on nothing above transport.h. */
typedef struct k8s_reflector k8s_reflector; /* watch.c */
typedef struct k8s_shard k8s_shard;         /* watch.h */
typedef struct k8s_lease k8s_lease;         /* lease.h */
typedef struct k8s_bind_job k8s_bind_job;   /* bind.c */
typedef struct k8s_event_job k8s_event_job; /* events.c */
typedef struct k8s_mux k8s_mux;             /* mux.h */

struct k8s_client {
    k8s_config cfg; /* strings below replace the borrowed ones */
    char *scheduler_name;
    char *pod_field_selector;
    k8s_conn *conn;
    char *url_base;                /* conn->server, host replaced by tls-server-name */
    struct curl_slist *connect_to; /* routes url_base's host to the server; or NULL */
    char *wire_host;               /* url_base's host[:port] for the wire's Host; or NULL */
    char *wire_prefix;             /* url_base's path, before every request's */
    cache *cache;

    pthread_mutex_t mu;  /* guards stop/started/stopped */
    pthread_cond_t cond; /* CLOCK_MONOTONIC; stop and sync wake-ups */
    int stop;            /* (atomic) */
    bool started, stopped;

    pthread_mutex_t tok_mu;
    char *token; /* current bearer token (file-backed ones rotate) */
    struct timespec tok_mtime;
    off_t tok_size;
    ino_t tok_ino;
    uint64_t tok_checked_ns;
    uint64_t tok_gen; /* bumped whenever token changes (kept handles' headers) */

    k8s_ratelimit rl;

    /* the call loop (pod patches) */
    k8s_mux *mux;

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
    k8s_kept *bkept;       /* cfg.bind_concurrency handles */
    k8s_kept **bhandles;   /* the free ones, a stack */
    size_t nbfree;
    k8s_bind_job *bq;
    size_t bq_cap, bq_head, bq_len;
    pthread_t *bworkers;
    size_t nbworkers;
    /* k8s_bind_keep_warm's last GET failed (its caller's only) */
    bool bwarm_failing;
    /* Bindings a try sent whose answer was lost, so may have been applied:
     * each one's key and the end of its unknown window, for the k8s_bind
     * that settles it (under bmu; nunheard also read atomically without) */
    uint64_t unheard_key[K8S_UNHEARD_MAX];
    uint64_t unheard_until[K8S_UNHEARD_MAX];
    size_t nunheard;

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
    bool eidle; /* the poster waits for an Event (emu held to read) */
};

#endif

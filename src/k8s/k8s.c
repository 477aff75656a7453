/* k8s.c - the k8s client's lifecycle: configuration, wiring the
 * transport, reflectors, binder, events and elector together, the
 * housekeeping and elector threads, readiness and metrics. */
#include <stdio.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/clock.h"
#include "agentsched/base/log.h"
#include "agentsched/base/metrics.h"
#include "agentsched/k8s/bind.h"
#include "agentsched/k8s/events.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/k8s/lease.h"
#include "agentsched/k8s/mux.h"
#include "agentsched/k8s/transport.h"
#include "agentsched/k8s/watch.h"
#include "internal.h"

#define DEFAULT_POD_SELECTOR "status.phase!=Succeeded,status.phase!=Failed"

/* See k8s.h. */
void k8s_config_defaults(k8s_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->scheduler_name = "agent-scheduler";
    cfg->qps = 1000;
    cfg->burst = 2000;
    cfg->list_limit = 500;
    cfg->max_line = (size_t)8 << 20;
    cfg->max_list_body = (size_t)32 << 20;
    cfg->watch_timeout_ms = 120000;
    cfg->backoff_initial_ms = 200;
    cfg->backoff_max_ms = 30000;
    cfg->connect_timeout_ms = 10000;
    cfg->request_timeout_ms = 60000;
    cfg->watch_down_ms = 60000;
    cfg->assumed_ttl_ms = 30000;
    cfg->expire_period_ms = 1000;
    cfg->trim_period_ms = 60000;
    cfg->shard_retry_ms = 60000;
    cfg->bind_concurrency = K8S_BIND_CONCURRENCY;
    /* under the API server's idle timeout (90 s) and the 60 s of many
     * load balancers */
    cfg->bind_warm_idle_ms = 45000;
    cfg->bind_retries = 5;
    cfg->bind_backoff_ms = 50;
    cfg->event_pod_interval_ms = 30000;
    cfg->event_queue = 4096;
    cfg->lease_duration_ms = 15000;
    cfg->lease_retry_ms = 2000;
    cfg->pod_field_selector = NULL; /* NULL = the default selector */
    cfg->watch_shards = true;
}

/* See k8s.h. */
void k8s_get_status(k8s_client *k, k8s_status *out)
{
    pthread_mutex_lock(&k->st_mu);
    *out = k->st;
    pthread_mutex_unlock(&k->st_mu);
}

/* See k8s.h. */
bool k8s_ready(k8s_client *k, int64_t now_ms, char *why, size_t whylen)
{
    k8s_status st;
    k8s_get_status(k, &st);
    if (!st.synced) {
        if (why)
            snprintf(why, whylen, "waiting for the first sync of nodes and pods from %s",
                     k->conn->server);
        return false;
    }
    static const char *const names[] = {"nodes", "pods", "nodeshards"};
    for (int i = 0; i <= K8S_KIND_POD; i++) {
        int64_t d = st.down_since_ms[i];
        if (d && now_ms - d > k->cfg.watch_down_ms) {
            if (why)
                snprintf(why, whylen, "%s watch down for %lld ms (bound %lld ms)", names[i],
                         (long long)(now_ms - d), (long long)k->cfg.watch_down_ms);
            return false;
        }
    }
    return true;
}

/* See k8s.h. */
bool k8s_wait_synced(k8s_client *k, int64_t timeout_ms)
{
    uint64_t deadline = clock_mono_ns() + (uint64_t)timeout_ms * 1000000ull;
    for (;;) {
        k8s_status st;
        k8s_get_status(k, &st);
        if (st.synced)
            return true;
        uint64_t now = clock_mono_ns();
        if (now >= deadline || k8s_stopping(k))
            return false;
        int64_t left = (int64_t)((deadline - now) / 1000000ull);
        k8s_sleep_ms(k, left < 20 ? left : 20);
    }
}

/* ---- lifecycle ------------------------------------------------------- */

static void housekeeping_once(k8s_client *k)
{
    /* Assumed pods are forgotten only once the pods watch has been up for
     * a whole TTL. After an outage, a binding the API server applied may
     * not have been delivered yet (the stream down, or back for less time
     * than the TTL); forgetting its pod then would free capacity the pod
     * holds, and the next decision could double-book it. */
    int64_t now = clock_now_ms();
    pthread_mutex_lock(&k->st_mu);
    bool steady = !k->st.down_since_ms[K8S_KIND_POD] &&
                  now - k->st.up_since_ms[K8S_KIND_POD] >= k->cfg.assumed_ttl_ms;
    bool leading = k->st.leader;
    pthread_mutex_unlock(&k->st_mu);
    size_t n = 0;
    if (steady && cache_expire_assumed(k->cache, now, k->cfg.assumed_ttl_ms, &n) == AS_OK && n) {
        log_warn("msg=\"forgot assumed pods never confirmed by the API server\" count=%zu "
                 "ttl_ms=%lld",
                 n, (long long)k->cfg.assumed_ttl_ms);
        k8s_count(k, &k->st.assumed_expired, n);
    }
    /* Only a leader binds; a standby's connections close idle. Last, as
     * its GETs may wait for a slow API server. */
    if (leading)
        k8s_bind_keep_warm(k);
}

/* trim_heap hands the heap's free pages back to the kernel. Pod churn
 * frees as much as it allocates, but glibc's per-thread arenas keep the
 * freed pages: RSS crept ~0.2 MB per 3000 pods created and deleted on the
 * dev-cluster with a flat live heap, and one malloc_trim returned 2.7 MB. */
static void trim_heap(void)
{
#ifdef __GLIBC__
    uint64_t t0 = clock_mono_ns();
    int released = malloc_trim(0);
    log_debug("msg=\"heap trimmed\" released=%d ms=%.2f", released,
              (double)(clock_mono_ns() - t0) / 1e6);
#endif
}

static void *housekeeping_main(void *arg)
{
    k8s_client *k = arg;
    pthread_setname_np(pthread_self(), "as-k8s-hk");
    uint64_t last_trim = clock_mono_ns();
    while (k8s_sleep_ms(k, k->cfg.expire_period_ms)) {
        housekeeping_once(k);
        uint64_t now = clock_mono_ns();
        if (k->cfg.trim_period_ms > 0 &&
            now - last_trim >= (uint64_t)k->cfg.trim_period_ms * 1000000ull) {
            trim_heap();
            last_trim = now;
        }
    }
    return NULL;
}

static void *elector_main(void *arg)
{
    k8s_client *k = arg;
    pthread_setname_np(pthread_self(), "as-k8s-lease");
    bool leading = false;
    for (;;) {
        bool now = k8s_lease_step(k->lease, clock_mono_ms());
        pthread_mutex_lock(&k->st_mu);
        k->st.leader = now;
        if (now != leading)
            k->st.leader_transitions++;
        snprintf(k->st.leader_holder, sizeof k->st.leader_holder, "%s",
                 k8s_lease_observed(k->lease)->holder);
        pthread_mutex_unlock(&k->st_mu);
        if (now != leading && k->cfg.leader_hook)
            k->cfg.leader_hook(k->cfg.leader_hook_arg, now);
        leading = now;
        /* A leader also wakes at its renew deadline, to stop in time when
         * the rounds in between could not renew. */
        int64_t sleep_ms = k->cfg.lease_retry_ms;
        int64_t until = k8s_lease_deadline(k->lease) - clock_mono_ms() + 1;
        if (until < sleep_ms)
            sleep_ms = until > 1 ? until : 1;
        if (!k8s_sleep_ms(k, sleep_ms))
            break;
    }
    /* Stopping: whoever we gate (the fast path) has stopped before the
     * client does, so nothing decides under this lease any more. */
    if (leading) {
        k8s_lease_release(k->lease, clock_mono_ms());
        pthread_mutex_lock(&k->st_mu);
        k->st.leader = false;
        k->st.leader_transitions++;
        pthread_mutex_unlock(&k->st_mu);
    }
    return NULL;
}

/* See k8s.h. */
as_err k8s_client_new(const k8s_config *cfg, cache *c, k8s_client **out, as_diag *diag)
{
    *out = NULL;
    as_err err;
    if (!cfg || !c)
        return as_diag_set(diag, AS_EINVAL, NULL, "k8s client needs a config and a cache");
    if (cfg->qps < 0 || (cfg->qps > 0 && cfg->burst < 1))
        return as_diag_set(diag, AS_EINVAL, "kube-api-burst",
                           "--kube-api-burst must be at least 1 when --kube-api-qps > 0");
    if (cfg->watch_timeout_ms < 0 || cfg->backoff_initial_ms < 0 || cfg->backoff_max_ms < 0)
        return as_diag_set(diag, AS_EINVAL, "watch-timeout", "timeouts must not be negative");
    k8s_client *k = calloc(1, sizeof *k);
    if (!k)
        return AS_ENOMEM;
    k->cfg = *cfg;
    k->cache = c;
    k8s_config d;
    k8s_config_defaults(&d);
    /* Zero means "default" for every numeric knob. */
#define DEF(f)                                                                                     \
    if (!k->cfg.f)                                                                                 \
    k->cfg.f = d.f
    DEF(list_limit);
    DEF(max_line);
    DEF(max_list_body);
    DEF(watch_timeout_ms);
    DEF(backoff_initial_ms);
    DEF(backoff_max_ms);
    DEF(connect_timeout_ms);
    DEF(request_timeout_ms);
    DEF(watch_down_ms);
    DEF(assumed_ttl_ms);
    DEF(expire_period_ms);
    DEF(trim_period_ms);
    DEF(shard_retry_ms);
    DEF(bind_concurrency);
    DEF(bind_warm_idle_ms);
    DEF(bind_backoff_ms);
    DEF(event_pod_interval_ms);
    DEF(event_queue);
    DEF(lease_duration_ms);
    DEF(lease_retry_ms);
#undef DEF
    if (k->cfg.backoff_max_ms < k->cfg.backoff_initial_ms)
        k->cfg.backoff_max_ms = k->cfg.backoff_initial_ms;
    k->scheduler_name = strdup(cfg->scheduler_name ? cfg->scheduler_name : d.scheduler_name);
    k->pod_field_selector =
        strdup(cfg->pod_field_selector ? cfg->pod_field_selector : DEFAULT_POD_SELECTOR);
    clock_cond_init(&k->bcond);
    clock_cond_init(&k->bqcond);
    clock_cond_init(&k->econd);
    pthread_mutex_init(&k->shard_mu, NULL);
    pthread_mutex_init(&k->bmu, NULL);
    pthread_mutex_init(&k->emu, NULL);
    /* Events: a bucket of one second's worth (at least one Event) */
    k8s_rl_init(&k->erl, k->cfg.event_qps, k->cfg.event_qps < 1 ? 1 : k->cfg.event_qps);
    if ((err = k8s_transport_init(k, diag)))
        goto fail;
    if (!k->scheduler_name || !k->pod_field_selector) {
        err = AS_ENOMEM;
        goto fail;
    }
    if ((err = k8s_mux_new(k, &k->mux)) || (err = k8s_bind_init(k)) || (err = k8s_events_init(k)))
        goto fail;
    if (cfg->lease_name && *cfg->lease_name) {
        char ident[256];
        if (cfg->lease_identity)
            snprintf(ident, sizeof ident, "%s", cfg->lease_identity);
        else
            k8s_lease_default_identity(ident, sizeof ident);
        k8s_lease_config lc = {.ns = cfg->lease_namespace,
                               .name = cfg->lease_name,
                               .identity = ident,
                               .duration_ms = k->cfg.lease_duration_ms};
        if ((err = k8s_lease_new(k, &lc, &k->lease, diag)))
            goto fail;
        if (k->cfg.lease_retry_ms > k->cfg.lease_duration_ms / 3)
            k->cfg.lease_retry_ms = k->cfg.lease_duration_ms / 3;
        k->st.leader_elect = true;
    } else {
        k->st.leader = true;
    }
    *out = k;
    return AS_OK;
fail:
    k8s_client_free(k);
    return err;
}

/* See k8s.h. */
as_err k8s_client_start(k8s_client *k)
{
    pthread_mutex_lock(&k->mu);
    bool already = k->started;
    k->started = true;
    pthread_mutex_unlock(&k->mu);
    if (already)
        return AS_EINVAL;
    log_info("msg=\"connecting to the API server\" server=%s context=%s qps=%.0f burst=%u",
             k->conn->server, k->conn->context ? k->conn->context : "in-cluster", k->cfg.qps,
             k->cfg.burst);
    if (pthread_create(&k->hk_thread, NULL, housekeeping_main, k) != 0)
        return AS_ENOMEM;
    k->hk_running = true;
    if (k->lease) {
        log_info("msg=\"leader election\" lease=%s/%s identity=%s duration_ms=%lld",
                 k->cfg.lease_namespace ? k->cfg.lease_namespace : "kube-system", k->cfg.lease_name,
                 k8s_lease_identity(k->lease), (long long)k->cfg.lease_duration_ms);
        if (k->cfg.leader_hook)
            k->cfg.leader_hook(k->cfg.leader_hook_arg, false);
        if (pthread_create(&k->lease_thread, NULL, elector_main, k) != 0)
            return AS_ENOMEM;
        k->lease_running = true;
    }
    return k8s_reflectors_start(k);
}

/* See k8s.h. */
void k8s_client_stop(k8s_client *k)
{
    if (!k)
        return;
    /* The stop flag may be up already (a command aborting its own transfer
     * with k8s_transport_stop): the joins and frees below still run, and
     * each of them is a no-op the second time. */
    k8s_transport_stop(k);
    /* Fails the calls in flight, so patches waiting for them return. */
    k8s_mux_stop(k->mux);
    k8s_reflectors_join(k);
    if (k->hk_running) {
        pthread_join(k->hk_thread, NULL);
        k->hk_running = false;
    }
    if (k->lease_running) {
        pthread_join(k->lease_thread, NULL);
        k->lease_running = false;
    }
    k8s_bind_shutdown(k);
    k8s_events_shutdown(k);
}

/* See k8s.h. */
void k8s_client_free(k8s_client *k)
{
    if (!k)
        return;
    k8s_client_stop(k);
    k8s_shards_free(k->shards, k->nshards);
    k8s_lease_free(k->lease);
    k8s_mux_free(k->mux);
    free(k->scheduler_name);
    free(k->pod_field_selector);
    pthread_cond_destroy(&k->bcond);
    pthread_cond_destroy(&k->bqcond);
    pthread_cond_destroy(&k->econd);
    pthread_mutex_destroy(&k->erl.mu);
    pthread_mutex_destroy(&k->shard_mu);
    pthread_mutex_destroy(&k->bmu);
    pthread_mutex_destroy(&k->emu);
    k8s_transport_fini(k);
    free(k);
}

static void set_metric(metrics *m, bool gauge, const char *name, const char *help, int64_t v)
{
    metrics_counter *c =
        gauge ? metrics_new_gauge(m, name, help) : metrics_new_counter(m, name, help);
    metrics_set(c, v);
}

/* See k8s.h. */
void k8s_metrics_update(k8s_client *k, metrics *m)
{
    if (!k || !m)
        return;
    k8s_status st;
    k8s_get_status(k, &st);
    int64_t now = clock_now_ms();
    char name[160];
    for (int i = 0; i < K8S_KIND__COUNT; i++) {
        snprintf(name, sizeof name, "agentsched_k8s_watch_events_total{kind=\"%s\"}",
                 k8s_kind_name((k8s_kind)i));
        set_metric(m, false, name, "Watch events applied, by resource.", (int64_t)st.events[i]);
        snprintf(name, sizeof name, "agentsched_k8s_relists_total{kind=\"%s\"}",
                 k8s_kind_name((k8s_kind)i));
        set_metric(m, false, name,
                   "Relists after the first list (410 Gone, expired or oversized events).",
                   (int64_t)st.relists[i]);
        snprintf(name, sizeof name, "agentsched_k8s_reconnects_total{kind=\"%s\"}",
                 k8s_kind_name((k8s_kind)i));
        set_metric(m, false, name, "Failed lists and broken watch connections.",
                   (int64_t)st.reconnects[i]);
        snprintf(name, sizeof name, "agentsched_k8s_watch_down_seconds{kind=\"%s\"}",
                 k8s_kind_name((k8s_kind)i));
        set_metric(m, true, name, "Seconds the stream has been down (0 while up).",
                   st.down_since_ms[i] ? (now - st.down_since_ms[i]) / 1000 : 0);
    }
    set_metric(m, false, "agentsched_k8s_pod_events_undecoded_total",
               "Pod watch events applied without decoding the pod: deletions, and updates "
               "that change nothing the cache holds of a bound pod.",
               (int64_t)st.pod_events_undecoded);
    set_metric(m, false, "agentsched_k8s_pod_events_spec_reused_total",
               "Pod watch events built without a DOM: the spec was decoded before for another "
               "pod of the same template; only the pod's metadata and status were read.",
               (int64_t)st.pod_events_spec_reused);
    const char *bh = "Bindings posted to the API server, by result.";
    set_metric(m, false, "agentsched_k8s_binds_total{result=\"ok\"}", bh, (int64_t)st.binds_ok);
    set_metric(m, false, "agentsched_k8s_binds_total{result=\"failed\"}", bh,
               (int64_t)st.binds_failed);
    set_metric(m, false, "agentsched_k8s_bind_retries_total",
               "Binding attempts retried after 429, 5xx or a transport error.",
               (int64_t)st.bind_retries);
    set_metric(m, false, "agentsched_k8s_bind_unknown_total",
               "Binds whose outcome was unknown (connection lost after sending, or 504), "
               "retried to the same node until answered.",
               (int64_t)st.bind_unknown);
    const char *wh = "Bind connections opened ahead of use (--bind-warm), kept open by a GET "
                     "before the API server's idle timeout, or failed to.";
    set_metric(m, false, "agentsched_k8s_bind_connections_warmed_total{how=\"opened\"}", wh,
               (int64_t)st.bind_warm_opened);
    set_metric(m, false, "agentsched_k8s_bind_connections_warmed_total{how=\"refreshed\"}", wh,
               (int64_t)st.bind_warm_refreshed);
    set_metric(m, false, "agentsched_k8s_bind_connections_warmed_total{how=\"failed\"}", wh,
               (int64_t)st.bind_warm_failed);
    const char *eh = "v1 Events, by outcome once answered (dropped: rate-limited, queue full or "
                     "refused).";
    set_metric(m, false, "agentsched_k8s_events_total{result=\"posted\"}", eh,
               (int64_t)st.events_posted);
    set_metric(m, false, "agentsched_k8s_events_total{result=\"dropped\"}", eh,
               (int64_t)st.events_dropped);
    set_metric(m, false, "agentsched_k8s_assumed_expired_total",
               "Assumed pods forgotten because the API server never confirmed them.",
               (int64_t)st.assumed_expired);
    set_metric(m, true, "agentsched_k8s_synced", "1 after the first full list of nodes and pods.",
               st.synced);
    set_metric(m, true, "agentsched_k8s_shards_present", "1 when the NodeShard CRD answers.",
               st.shards_present);
    set_metric(m, true, "agentsched_leader",
               "1 while this instance leads (holds the --leader-elect Lease; always 1 without "
               "leader election): only the leader runs the fast path.",
               st.leader);
    set_metric(m, false, "agentsched_leader_transitions_total",
               "Times this instance started or stopped leading.", (int64_t)st.leader_transitions);
}

/* svc.c - the service context, its core endpoints and the route table. */
#include "agentsched/serve/svc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agentsched/base/doc.h"
#include "agentsched/core/eqcache.h"
#include "agentsched/core/policy.h"
#include "agentsched/api/extender.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/base/log.h"
#include "agentsched/api/placement.h"
#include "agentsched/base/pool.h"
#include "agentsched/api/volcano.h"

#ifndef AGENTSCHED_GIT_COMMIT
#define AGENTSCHED_GIT_COMMIT "unknown"
#endif
#ifndef AGENTSCHED_BUILD_TYPE
#define AGENTSCHED_BUILD_TYPE "unknown"
#endif

#define SVC_DEFAULT_MAX_BODY ((size_t)16 << 20)

/* The public svc plus what only this file needs: the copies of the config
 * strings, so the caller's argv/config may go away after svc_new. */
typedef struct svc_impl {
    svc pub; /* first: svc* and svc_impl* convert both ways */
    pool *strings;
} svc_impl;

/* See svc.h. */
void svc_config_defaults(svc_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->listen = "127.0.0.1:8888";
    cfg->scheduler_name = "agent-scheduler";
    cfg->shard_name = NULL; /* = scheduler_name */
    cfg->shard_mode = CACHE_SHARD_NONE;
    cfg->http_threads = 0;
    cfg->max_body = SVC_DEFAULT_MAX_BODY;
    cfg->workers = 2;
    cfg->candidates = 3;
    cfg->kube_api_qps = 1000;
    cfg->kube_api_burst = 2000;
    cfg->watch_down_ms = 60000;
    cfg->log_level = LOG_INFO;
}

/* See svc.h. */
int64_t svc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* See svc.h. */
uint64_t svc_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static as_err svc_dup(pool *p, const char **field)
{
    if (!*field)
        return AS_OK;
    const char *c = pool_strdup(p, *field);
    if (!c)
        return AS_ENOMEM;
    *field = c;
    return AS_OK;
}

static void svc_declare_metrics(svc *s)
{
    metrics *m = s->metrics;
    const double *b = metrics_latency_buckets;
    size_t nb = metrics_latency_nbuckets;
    s->m.requests_total =
        metrics_new_counter(m, "agentsched_http_requests_total", "HTTP requests answered.");
    s->m.request_errors_total = metrics_new_counter(m, "agentsched_http_request_errors_total",
                                                    "HTTP requests answered with status >= 400.");
    const char *lat = "Time to answer a scheduling request, by verb.";
    s->m.filter_seconds = metrics_new_histogram(
        m, "agentsched_request_duration_seconds{verb=\"filter\"}", lat, b, nb);
    s->m.prioritize_seconds = metrics_new_histogram(
        m, "agentsched_request_duration_seconds{verb=\"prioritize\"}", lat, b, nb);
    s->m.bind_seconds =
        metrics_new_histogram(m, "agentsched_request_duration_seconds{verb=\"bind\"}", lat, b, nb);
    s->m.preempt_seconds = metrics_new_histogram(
        m, "agentsched_request_duration_seconds{verb=\"preempt\"}", lat, b, nb);
    s->m.placement_seconds = metrics_new_histogram(
        m, "agentsched_request_duration_seconds{verb=\"placement\"}", lat, b, nb);
    const char *binds = "Binds accepted by the versioned binder, by how.";
    s->m.binds_fast = metrics_new_counter(m, "agentsched_binds_total{result=\"fast\"}", binds);
    s->m.binds_rechecked =
        metrics_new_counter(m, "agentsched_binds_total{result=\"rechecked\"}", binds);
    s->m.binds_idempotent =
        metrics_new_counter(m, "agentsched_binds_total{result=\"idempotent\"}", binds);
    s->m.bind_conflicts = metrics_new_counter(m, "agentsched_bind_conflicts_total",
                                              "Binds refused because the node changed and the "
                                              "pod no longer fits, or it is bound elsewhere.");
    const char *memo = "Prioritize calls answered from the same cycle's filter evaluation (hit) "
                       "or evaluated afresh (miss).";
    s->m.memo_hits =
        metrics_new_counter(m, "agentsched_prioritize_memo_total{result=\"hit\"}", memo);
    s->m.memo_misses =
        metrics_new_counter(m, "agentsched_prioritize_memo_total{result=\"miss\"}", memo);
    const char *spec = "Pods whose spec the extender decoded (miss) or reused from a Pod with the "
                       "same spec text (hit).";
    s->m.spec_memo_hits =
        metrics_new_counter(m, "agentsched_extender_pod_spec_memo_total{result=\"hit\"}", spec);
    s->m.spec_memo_misses =
        metrics_new_counter(m, "agentsched_extender_pod_spec_memo_total{result=\"miss\"}", spec);
}

/* See svc.h. */
as_err svc_new(const svc_config *cfg, svc **out, as_diag *diag)
{
    *out = NULL;
    svc_impl *impl = calloc(1, sizeof *impl);
    if (!impl)
        return AS_ENOMEM;
    svc *s = &impl->pub;
    as_err err = AS_OK;
    s->cfg = *cfg;
    impl->strings = pool_new(1 << 20);
    pthread_mutex_init(&s->policy_mu, NULL);
    model_registry_init(&s->reg);
    if (!impl->strings) {
        err = AS_ENOMEM;
        goto done;
    }
    if ((err = svc_dup(impl->strings, &s->cfg.listen)) ||
        (err = svc_dup(impl->strings, &s->cfg.cluster_path)) ||
        (err = svc_dup(impl->strings, &s->cfg.kubeconfig)) ||
        (err = svc_dup(impl->strings, &s->cfg.policy_path)) ||
        (err = svc_dup(impl->strings, &s->cfg.scheduler_name)) ||
        (err = svc_dup(impl->strings, &s->cfg.shard_name)))
        goto done;
    if (!s->cfg.shard_name)
        s->cfg.shard_name = s->cfg.scheduler_name;
    if (!s->cfg.max_body)
        s->cfg.max_body = SVC_DEFAULT_MAX_BODY;

    if ((err = cache_new(&s->reg, &s->cache)))
        goto done;
    cache_set_shard_mode(s->cache, s->cfg.shard_mode);
    if ((err = binder_new(s->cache, NULL, &s->binder)))
        goto done;
    if ((err = extender_memo_new(&s->ext_memo)))
        goto done;
    eqcache_config ec;
    eqcache_config_defaults(&ec);
    ec.max_classes = SVC_EXTENDER_SHAPES;
    if ((err = eqcache_new(s->cache, &ec, &s->eq)))
        goto done;
    if (s->cfg.policy_path) {
        if ((err = score_policy_load(&s->reg, s->cfg.policy_path, &s->policy, diag)))
            goto done;
    } else if ((err = score_policy_new_default(&s->reg, &s->policy))) {
        as_diag_set(diag, err, NULL, "cannot build the default scoring policy: %s",
                    as_strerror(err));
        goto done;
    }
    if ((err = metrics_new(&s->metrics)))
        goto done;
    svc_declare_metrics(s);
    s->started_ms = svc_now_ms();
    *out = s;
done:
    if (err) {
        if (err == AS_ENOMEM && diag && !diag->msg[0])
            as_diag_set(diag, err, NULL, "out of memory while building the service");
        svc_free(s);
    }
    return err;
}

/* See svc.h. */
void svc_free(svc *s)
{
    if (!s)
        return;
    svc_http_stop(s);
    k8s_stop(s); /* its reflectors write the cache: stop them first */
    if (s->binder)
        binder_free(s->binder);
    extender_memo_free(s->ext_memo);
    eqcache_free(s->eq); /* before the cache it reads */
    cache_free(s->cache);
    if (s->policy)
        score_policy_unref(s->policy);
    metrics_free(s->metrics);
    model_registry_destroy(&s->reg);
    pthread_mutex_destroy(&s->policy_mu);
    svc_impl *impl = (svc_impl *)s;
    pool_free(impl->strings);
    free(impl);
}

/* See svc.h. */
as_err svc_load_cluster(svc *s, const char *path, as_diag *diag)
{
    model_cluster *cl = NULL;
    as_err err = model_cluster_load(&s->reg, path, &cl, diag);
    if (err)
        return err;
    for (size_t i = 0; i < cl->nnodes; i++) {
        model_node *n = cl->nodes[i];
        cl->nodes[i] = NULL; /* the cache owns it from here, even on error */
        char name[256];
        snprintf(name, sizeof name, "%s", n->name);
        if ((err = cache_node_upsert(s->cache, n))) {
            as_diag_set(diag, err, NULL, "%s: cannot add node %s to the cache: %s", path, name,
                        as_strerror(err));
            goto done;
        }
    }
    for (size_t i = 0; i < cl->npods; i++) {
        const model_pod *p = cl->pods[i];
        if ((err = cache_pod_upsert(s->cache, p))) {
            as_diag_set(diag, err, NULL, "%s: cannot add pod %s/%s to the cache: %s", path, p->ns,
                        p->name, as_strerror(err));
            goto done;
        }
    }
    __atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
done:
    model_cluster_free(cl);
    return err;
}

/* See svc.h. */
score_policy *svc_policy_get(svc *s)
{
    pthread_mutex_lock(&s->policy_mu);
    score_policy *p = score_policy_ref(s->policy);
    pthread_mutex_unlock(&s->policy_mu);
    return p;
}

/* See svc.h. */
void svc_policy_set(svc *s, score_policy *p)
{
    pthread_mutex_lock(&s->policy_mu);
    score_policy *old = s->policy;
    s->policy = p;
    pthread_mutex_unlock(&s->policy_mu);
    /* In-flight decisions hold their own reference; the last one frees it. */
    if (old)
        score_policy_unref(old);
}

/* See svc.h. */
as_err svc_reload_policy(svc *s, as_diag *diag)
{
    if (!s->cfg.policy_path)
        return as_diag_set(diag, AS_ENOTFOUND, NULL,
                           "no policy file configured (start with --policy FILE to reload it)");
    score_policy *p = NULL;
    as_err err = score_policy_load(&s->reg, s->cfg.policy_path, &p, diag);
    if (err)
        return err;
    svc_policy_set(s, p);
    return AS_OK;
}

/* ------------------------------------------------------------------ */
/* Core endpoints                                                     */
/* ------------------------------------------------------------------ */

static void svc_healthz(void *ctx, const http_request *req, http_response *resp)
{
    resp->content_type = "text/plain; charset=utf-8";
    buf_puts(&resp->body, "ok\n");
}

static void svc_readyz(void *ctx, const http_request *req, http_response *resp)
{
    svc *s = ctx;
    if (s->k8s) {
        /* Live mode: synced once, and the watches not down past the bound. */
        char why[256];
        if (k8s_svc_ready(s, why, sizeof why)) {
            resp->content_type = "text/plain; charset=utf-8";
            buf_puts(&resp->body, "ok\n");
        } else {
            http_error(resp, 503, NULL, "%s", why);
        }
        return;
    }
    if (__atomic_load_n(&s->ready, __ATOMIC_ACQUIRE)) {
        resp->content_type = "text/plain; charset=utf-8";
        buf_puts(&resp->body, "ok\n");
        return;
    }
    http_error(resp, 503, NULL, "%s",
               s->cfg.cluster_path ? "cluster file not loaded yet"
                                   : "node cache not synced with the API server yet");
}

static void svc_version(void *ctx, const http_request *req, http_response *resp)
{
    svc *s = ctx;
    buf *b = &resp->body;
    buf_puts(b, "{\"version\": ");
    buf_json_cstr(b, AGENTSCHED_VERSION);
    buf_puts(b, ", \"commit\": ");
    buf_json_cstr(b, AGENTSCHED_GIT_COMMIT);
    buf_puts(b, ", \"build\": ");
    buf_json_cstr(b, AGENTSCHED_BUILD_TYPE);
    buf_puts(b, ", \"scheduler_name\": ");
    buf_json_cstr(b, s->cfg.scheduler_name);
    buf_printf(b, ", \"started_ms\": %lld}\n", (long long)s->started_ms);
}

/* Sets a scrape-time gauge; declared on first use (declaration finds the
 * existing series afterwards, so this needs no handle in the svc). */
static void svc_gauge(svc *s, const char *name, const char *help, int64_t v)
{
    metrics_set(metrics_new_gauge(s->metrics, name, help), v);
}

static void svc_counter_set(svc *s, const char *name, const char *help, uint64_t v)
{
    /* Counters mirrored from the binder's own totals: monotonic already. */
    metrics_counter *c = metrics_new_counter(s->metrics, name, help);
    metrics_set(c, (int64_t)v);
}

static void svc_metrics_endpoint(void *ctx, const http_request *req, http_response *resp)
{
    svc *s = ctx;
    cache_stats cs;
    cache_get_stats(s->cache, &cs);
    const char *nodes = "Nodes in the cache.";
    svc_gauge(s, "agentsched_cache_nodes", nodes, (int64_t)cs.nodes);
    svc_gauge(s, "agentsched_cache_nodes_in_shard", "Nodes in this scheduler's shard.",
              (int64_t)cs.nodes_in_shard);
    const char *pods = "Pods occupying capacity in the cache, by state.";
    svc_gauge(s, "agentsched_cache_pods{state=\"bound\"}", pods, (int64_t)cs.pods_bound);
    svc_gauge(s, "agentsched_cache_pods{state=\"assumed\"}", pods, (int64_t)cs.pods_assumed);
    svc_gauge(s, "agentsched_cache_pods{state=\"detached\"}", pods, (int64_t)cs.pods_detached);
    const char *ev = "Cache mutations applied, by object kind.";
    svc_counter_set(s, "agentsched_cache_events_total{kind=\"node\"}", ev, cs.node_events);
    svc_counter_set(s, "agentsched_cache_events_total{kind=\"pod\"}", ev, cs.pod_events);
    binder_stats bs;
    binder_get_stats(s->binder, &bs);
    const char *bh = "Versioned binder outcomes since start.";
    svc_counter_set(s, "agentsched_binder_events_total{event=\"accepted_fast\"}", bh,
                    bs.accepted_fast);
    svc_counter_set(s, "agentsched_binder_events_total{event=\"accepted_rechecked\"}", bh,
                    bs.accepted_rechecked);
    svc_counter_set(s, "agentsched_binder_events_total{event=\"idempotent\"}", bh, bs.idempotent);
    svc_counter_set(s, "agentsched_binder_events_total{event=\"conflict\"}", bh, bs.conflicts);
    svc_counter_set(s, "agentsched_binder_events_total{event=\"exhausted\"}", bh, bs.exhausted);
    svc_counter_set(s, "agentsched_binder_events_total{event=\"released\"}", bh, bs.released);
    svc_gauge(s, "agentsched_ready", "1 when the node cache is loaded or synced.",
              __atomic_load_n(&s->ready, __ATOMIC_ACQUIRE));
    svc_gauge(s, "agentsched_start_time_seconds", "Start time since the Unix epoch.",
              s->started_ms / 1000);
    k8s_metrics_update(s); /* live mode: agentsched_k8s_* */
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    as_err err = metrics_render(s->metrics, &resp->body);
    if (err)
        http_error(resp, http_status_for_err(err), NULL, "cannot render metrics: %s",
                   as_strerror(err));
}

/*
 * The route table of every HTTP endpoint. Entry points add their routes
 * here, one line each, once their handler exists:
 *   extender:  POST /scheduler/filter, /scheduler/prioritize,
 *              /scheduler/bind, /scheduler/preempt
 *   placement: POST /v1/placements
 *   volcano:   /volcano/...
 * Paths match exactly; a path listed with one method answers 405 (with
 * Allow) to the others.
 */
static const http_route svc_route_table[] = {
    /* core (service helper) */
    {"GET", "/healthz", svc_healthz, false},
    {"GET", "/readyz", svc_readyz, false},
    {"GET", "/version", svc_version, false},
    {"GET", "/metrics", svc_metrics_endpoint, false},
    /* placement */
    {"POST", PLACEMENT_PATH, placement_handle, false},
    /* extender */
    {"POST", EXTENDER_PATH_FILTER, extender_handle_filter, false},
    {"POST", EXTENDER_PATH_PRIORITIZE, extender_handle_prioritize, false},
    {"POST", EXTENDER_PATH_BIND, extender_handle_bind, true},
    {"POST", EXTENDER_PATH_PREEMPT, extender_handle_preempt, false},
    /* volcano */
    {"POST", VOLCANO_PATH_ON_SESSION_OPEN, volcano_handle_on_session_open, false},
    {"POST", VOLCANO_PATH_ON_SESSION_CLOSE, volcano_handle_on_session_close, false},
    {"POST", VOLCANO_PATH_PREDICATE, volcano_handle_predicate, false},
    {"POST", VOLCANO_PATH_PRIORITIZE, volcano_handle_prioritize, false},
    {"POST", VOLCANO_PATH_PREEMPTABLE, volcano_handle_preemptable, false},
    {"POST", VOLCANO_PATH_RECLAIMABLE, volcano_handle_reclaimable, false},
    {"POST", VOLCANO_PATH_JOB_ENQUEUEABLE, volcano_handle_job_enqueueable, false},
    {"POST", VOLCANO_PATH_JOB_ENQUEUED, volcano_handle_job_enqueued, false},
    {"POST", VOLCANO_PATH_QUEUE_OVERUSED, volcano_handle_queue_overused, false},
    {"POST", VOLCANO_PATH_JOB_READY, volcano_handle_job_ready, false},
    {"POST", VOLCANO_PATH_ALLOCATE, volcano_handle_allocate, false},
    {"POST", VOLCANO_PATH_DEALLOCATE, volcano_handle_deallocate, false},
};

/* See svc.h. */
const http_route *svc_routes(size_t *n)
{
    *n = sizeof svc_route_table / sizeof svc_route_table[0];
    return svc_route_table;
}

static void svc_observe(void *ctx, const char *method, const char *path, int status,
                        uint64_t elapsed_ns)
{
    svc *s = ctx;
    metrics_inc(s->m.requests_total);
    if (status >= 400)
        metrics_inc(s->m.request_errors_total);
    log_debug("msg=\"request\" method=%s path=%s status=%d us=%llu", method, path, status,
              (unsigned long long)(elapsed_ns / 1000));
}

/* Certificates and keys are small; a cap keeps a wrong path (a disk
 * image, /dev/zero) from being read whole. */
#define SVC_TLS_FILE_CAP ((size_t)1 << 20)

/* svc_read_pem reads a PEM file named by a serve flag into *out (malloc'ed,
 * caller frees); diag names the flag and the file. */
static as_err svc_read_pem(const char *flag, const char *path, char **out, as_diag *diag)
{
    size_t len = 0;
    as_diag d = {0};
    as_err err = doc_read_file(path, SVC_TLS_FILE_CAP, out, &len, &d);
    if (err)
        return as_diag_set(diag, err, flag, "%s", d.msg);
    if (!strstr(*out, "-----BEGIN ")) {
        free(*out);
        *out = NULL;
        return as_diag_set(diag, AS_EINVAL, flag,
                           "%s: not PEM (no '-----BEGIN' line); give the PEM file, e.g. "
                           "tls.crt / tls.key of a kubernetes.io/tls Secret",
                           path);
    }
    return AS_OK;
}

/* See svc.h. */
as_err svc_http_start(svc *s, as_diag *diag)
{
    if (s->http)
        return AS_OK;
    size_t n = 0;
    const http_route *routes = svc_routes(&n);
    char *cert = NULL, *key = NULL;
    as_err err = AS_OK;
    if (!s->cfg.tls_cert_path != !s->cfg.tls_key_path) {
        err = as_diag_set(diag, AS_EINVAL, s->cfg.tls_cert_path ? "--tls-key" : "--tls-cert",
                          "HTTPS needs both --tls-cert and --tls-key");
        goto done;
    }
    if (s->cfg.tls_cert_path &&
        ((err = svc_read_pem("--tls-cert", s->cfg.tls_cert_path, &cert, diag)) ||
         (err = svc_read_pem("--tls-key", s->cfg.tls_key_path, &key, diag))))
        goto done;
    /* In live mode the extender's bind verb waits for an API round trip;
     * on a pool thread it would stall every connection that thread serves
     * (kube-scheduler's filter and prioritize calls behind its parallel
     * binds), so blocking routes run on offload threads instead. */
    bool live = s->cfg.kubeconfig || s->cfg.in_cluster;
    http_server_config hc = {
        .listen = s->cfg.listen,
        .threads = s->cfg.http_threads,
        .offload_threads = live ? SVC_LIVE_BIND_THREADS : 0,
        .max_body = s->cfg.max_body,
        .routes = routes,
        .nroutes = n,
        .ctx = s,
        .observe = svc_observe,
        .tls_cert_pem = cert,
        .tls_key_pem = key,
    };
    err = http_server_start(&hc, &s->http, diag);
    if (err == AS_EINVAL && diag && strcmp(diag->field, "tls-cert") == 0)
        snprintf(diag->field, sizeof diag->field, "--tls-cert/--tls-key");
done:
    /* The key is a secret: do not leave it in freed heap memory. */
    if (key)
        explicit_bzero(key, strlen(key));
    free(key);
    free(cert);
    return err;
}

/* See svc.h. */
void svc_http_stop(svc *s)
{
    if (!s || !s->http)
        return;
    http_server_stop(s->http);
    s->http = NULL;
}

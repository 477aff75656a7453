/* svc.c - the server: its own endpoints, the route table, the ports to the
 * API client and the shard coordinator, and the lifecycle. */
#include "agentsched/serve/svc.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agentsched/base/doc.h"
#include "agentsched/core/eqcache.h"
#include "agentsched/core/policy.h"
#include "agentsched/api/extender.h"
#include "agentsched/api/placement.h"
#include "agentsched/api/volcano.h"
#include "agentsched/base/clock.h"
#include "agentsched/base/doc.h"
#include "agentsched/base/listen.h"
#include "agentsched/base/log.h"
#include "agentsched/base/pool.h"
#include "agentsched/fastpath/fastpath.h"
#include "agentsched/k8s/bind.h"
#include "agentsched/k8s/events.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/k8s/status.h"
#include "agentsched/shard/shard.h"

#include "agentsched_commit.h" /* generated at build time: AGENTSCHED_GIT_COMMIT */
#ifndef AGENTSCHED_BUILD_TYPE
#define AGENTSCHED_BUILD_TYPE "unknown"
#endif

#define SVC_DEFAULT_MAX_BODY ((size_t)16 << 20)

/* The server's own endpoints plus placement's, the extender's and
 * Volcano's routes. */
#define SVC_MAX_ROUTES 32

/* The public svc plus what only this file needs: the copies of the config
 * strings, so the caller's argv/config may go away after svc_new, and the
 * route table with each route's context. */
typedef struct svc_impl {
    svc pub; /* first: svc* and svc_impl* convert both ways */
    pool *strings;
    http_route routes[SVC_MAX_ROUTES];
    size_t nroutes;
    /* The TLS files as last read (certificate, key, client CA), to see
     * when one changed, and when they were last looked at. */
    struct stat tls_seen[3];
    uint64_t tls_checked_ns;
} svc_impl;

/* See svc.h. */
void svc_config_defaults(svc_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->listen = "127.0.0.1:8888";
    cfg->scheduler_name = "agent-scheduler";
    cfg->shard_name = NULL; /* = SHARD_DEFAULT_NAME */
    cfg->shard_mode = CACHE_SHARD_NONE;
    cfg->http_threads = 0;
    cfg->max_body = SVC_DEFAULT_MAX_BODY;
    cfg->placement_qps = PLACEMENT_DEFAULT_QPS;
    cfg->workers = 2;
    cfg->candidates = 3;
    cfg->kube_api_qps = 1000;
    cfg->kube_api_burst = 2000;
    cfg->watch_down_ms = 60000;
    cfg->bind_warm = SVC_BIND_WARM_AUTO;
    cfg->log_level = LOG_INFO;
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

/* ---- ports: what the entry points reach above the core ---------------- */

static k8s_client *svc_k8s(svc *s)
{
    return __atomic_load_n(&s->k8s, __ATOMIC_ACQUIRE);
}

static bool svc_port_live(void *arg)
{
    return svc_k8s(arg) != NULL;
}

static bool svc_port_synced(void *arg)
{
    k8s_client *k = svc_k8s(arg);
    return !k || k8s_wait_synced(k, 0);
}

static as_err svc_port_bind(void *arg, const char *ns, const char *name, const char *uid,
                            const char *node, as_diag *diag)
{
    return k8s_bind(svc_k8s(arg), ns, name, uid, node, diag); /* NULL: AS_EUNSUPPORTED */
}

static as_err svc_port_bind_try(void *arg, const char *ns, const char *name, const char *uid,
                                const char *node, as_diag *diag)
{
    return k8s_bind_try(svc_k8s(arg), ns, name, uid, node, diag);
}

static as_err svc_port_bind_send(void *arg, const char *ns, const char *name, const char *uid,
                                 const char *node, void **sent, as_diag *diag)
{
    k8s_kept *h = NULL;
    as_err err = k8s_bind_try_send(svc_k8s(arg), ns, name, uid, node, &h, diag);
    *sent = h;
    return err;
}

static as_err svc_port_bind_recv(void *arg, void *sent, const char *ns, const char *name,
                                 const char *uid, const char *node, as_diag *diag)
{
    return k8s_bind_try_recv(svc_k8s(arg), sent, ns, name, uid, node, diag);
}

static bool svc_port_bind_answered(void *arg, void *sent)
{
    (void)arg;
    return k8s_bind_try_answered(sent);
}

static as_err svc_port_patch_pod(void *arg, const char *ns, const char *name, const char *body,
                                 size_t len, as_diag *diag)
{
    k8s_client *k = svc_k8s(arg);
    if (!k)
        return as_diag_set(diag, AS_EUNSUPPORTED, NULL, "not connected to an API server");
    return k8s_patch_pod(k, ns, name, body, len, diag);
}

static uint64_t svc_port_decision_begin(void *arg)
{
    svc *s = arg;
    return shard_decision_begin(s->shard);
}

static void svc_port_decision_end(void *arg, uint64_t revision)
{
    svc *s = arg;
    shard_decision_end(s->shard, revision);
}

static void svc_port_unschedulable(void *arg, const model_pod *pod, const char *message)
{
    k8s_client *k = svc_k8s(arg);
    if (!k)
        return;
    as_diag d = {{0}, {0}};
    as_err err = k8s_pod_set_condition(k, pod->ns, pod->name, "PodScheduled", "False",
                                       "Unschedulable", message, &d);
    if (err && err != AS_ENOTFOUND)
        log_warn("msg=\"cannot set PodScheduled=False\" pod=%s/%s err=\"%s\"", pod->ns, pod->name,
                 d.msg[0] ? d.msg : as_strerror(err));
    k8s_event_post(k, pod->ns, pod->name, pod->uid, "Warning", "FailedScheduling", message);
}

static void svc_port_scheduled(void *arg, const model_pod *pod, const char *node)
{
    k8s_client *k = svc_k8s(arg);
    if (!k)
        return;
    /* kube-scheduler's message, put together without printf (every pod
     * bound comes here); cut, as a format would, past msg's size */
    char msg[600];
    const char *part[] = {
        "Successfully assigned ", pod->ns ? pod->ns : "", "/", pod->name ? pod->name : "", " to ",
        node ? node : ""};
    size_t n = 0;
    for (size_t i = 0; i < sizeof part / sizeof part[0]; i++) {
        size_t l = strnlen(part[i], sizeof msg - 1 - n);
        memcpy(msg + n, part[i], l);
        n += l;
    }
    msg[n] = '\0';
    /* queued: the poster sends a tick's Events in one write */
    k8s_event_post(k, pod->ns, pod->name, pod->uid, "Normal", "Scheduled", msg);
}

/* ---- routes ------------------------------------------------------------- */

static void svc_healthz(void *ctx, const http_request *req, http_response *resp);
static void svc_probe_healthz(void *ctx, const http_request *req, http_response *resp);
static void svc_readyz(void *ctx, const http_request *req, http_response *resp);
static void svc_version(void *ctx, const http_request *req, http_response *resp);
static void svc_metrics_endpoint(void *ctx, const http_request *req, http_response *resp);

/* The server's own endpoints; their context is the svc. */
static const http_route svc_own_routes[] = {
    {"GET", "/healthz", svc_healthz, false, NULL, true, false},
    {"GET", "/readyz", svc_readyz, false, NULL, true, false},
    {"GET", "/version", svc_version, false, NULL, false, false},
    {"GET", "/metrics", svc_metrics_endpoint, false, NULL, true, false},
};

/* What the metrics listener (cfg.metrics_listen) serves, and nothing else;
 * its /healthz asks the main listener's. Their context is the svc. */
static const http_route svc_probe_routes[] = {
    {"GET", "/healthz", svc_probe_healthz, false, NULL, true, false},
    {"GET", "/readyz", svc_readyz, false, NULL, true, false},
    {"GET", "/metrics", svc_metrics_endpoint, false, NULL, true, false},
};

/* svc_add_routes appends an entry point's routes, each to run with ctx.
 * Paths match exactly; a path listed with one method answers 405 (with
 * Allow) to the others. */
static as_err svc_add_routes(svc_impl *impl, const http_route *r, size_t n, void *ctx)
{
    if (n > SVC_MAX_ROUTES - impl->nroutes)
        return AS_ETOOBIG;
    for (size_t i = 0; i < n; i++) {
        impl->routes[impl->nroutes] = r[i];
        impl->routes[impl->nroutes++].ctx = ctx;
    }
    return AS_OK;
}

static as_err svc_build_routes(svc_impl *impl)
{
    svc *s = &impl->pub;
    size_t n = 0;
    as_err err =
        svc_add_routes(impl, svc_own_routes, sizeof svc_own_routes / sizeof svc_own_routes[0], s);
    const http_route *r = placement_routes(&n);
    if (!err)
        err = svc_add_routes(impl, r, n, s->core);
    r = extender_routes(&n);
    if (!err)
        err = svc_add_routes(impl, r, n, s->ext);
    r = volcano_routes(&n);
    if (!err)
        err = svc_add_routes(impl, r, n, s->vol);
    for (size_t i = 0; i < impl->nroutes; i++)
        if (s->cfg.metrics_auth && strcmp(impl->routes[i].path, "/metrics") == 0)
            impl->routes[i].anonymous = false;
    return err;
}

/* See svc.h. */
const http_route *svc_routes(svc *s, size_t *n)
{
    svc_impl *impl = (svc_impl *)s;
    *n = impl->nroutes;
    return impl->routes;
}

/* See svc.h. */
void *svc_handler_ctx(svc *s, http_handler_fn fn)
{
    svc_impl *impl = (svc_impl *)s;
    for (size_t i = 0; i < impl->nroutes; i++)
        if (impl->routes[i].fn == fn)
            return impl->routes[i].ctx;
    return NULL;
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
    if (!impl->strings) {
        err = AS_ENOMEM;
        goto done;
    }
    if ((err = svc_dup(impl->strings, &s->cfg.listen)) ||
        (err = svc_dup(impl->strings, &s->cfg.metrics_listen)) ||
        (err = svc_dup(impl->strings, &s->cfg.cluster_path)) ||
        (err = svc_dup(impl->strings, &s->cfg.kubeconfig)) ||
        (err = svc_dup(impl->strings, &s->cfg.policy_path)) ||
        (err = svc_dup(impl->strings, &s->cfg.scheduler_name)) ||
        (err = svc_dup(impl->strings, &s->cfg.shard_name)) ||
        (err = svc_dup(impl->strings, &s->cfg.tls_cert_path)) ||
        (err = svc_dup(impl->strings, &s->cfg.tls_key_path)) ||
        (err = svc_dup(impl->strings, &s->cfg.tls_client_ca_path)) ||
        (err = svc_dup(impl->strings, &s->cfg.tls_client_exempt)) ||
        (err = svc_dup(impl->strings, &s->cfg.extender_scheduler_names)) ||
        (err = svc_dup(impl->strings, &s->cfg.volcano_scheduler_names)))
        goto done;
    if (!s->cfg.shard_name)
        s->cfg.shard_name = SHARD_DEFAULT_NAME;
    if (!s->cfg.max_body)
        s->cfg.max_body = SVC_DEFAULT_MAX_BODY;

    core_config cc;
    core_config_defaults(&cc);
    cc.policy_path = s->cfg.policy_path;
    cc.shard_mode = s->cfg.shard_mode;
    cc.candidates = s->cfg.candidates;
    cc.extender_names =
        s->cfg.extender_scheduler_names ? s->cfg.extender_scheduler_names : s->cfg.scheduler_name;
    cc.volcano_names = s->cfg.volcano_scheduler_names;
    if ((err = core_new(&cc, &s->core, diag)))
        goto done;
    s->core->ports = (core_ports){
        .arg = s,
        .live = svc_port_live,
        .synced = svc_port_synced,
        .bind = svc_port_bind,
        .bind_try = svc_port_bind_try,
        .bind_send = svc_port_bind_send,
        .bind_recv = svc_port_bind_recv,
        .bind_answered = svc_port_bind_answered,
        .patch_pod = svc_port_patch_pod,
        .decision_begin = svc_port_decision_begin,
        .decision_end = svc_port_decision_end,
        .unschedulable = svc_port_unschedulable,
        .scheduled = svc_port_scheduled,
    };
    if ((err = extender_new(s->core, &s->ext)))
        goto done;
    volcano_config vc = {.assumed_ttl_ms = s->cfg.volcano_assumed_ttl_ms};
    if ((err = volcano_new(s->core, &vc, &s->vol)))
        goto done;
    if ((err = svc_build_routes(impl))) {
        as_diag_set(diag, err, NULL, "more than %d routes: raise SVC_MAX_ROUTES", SVC_MAX_ROUTES);
        goto done;
    }
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
    svc_stop(s);
    extender_free(s->ext);
    volcano_free(s->vol);
    core_free(s->core);
    svc_impl *impl = (svc_impl *)s;
    pool_free(impl->strings);
    free(impl);
}

/* svc_cluster_pod shows Volcano's verbs a pod of the cluster file. */
static void svc_cluster_pod(void *arg, const model_pod *pod)
{
    volcano_pod_seen(arg, pod, false);
}

/* See svc.h. */
as_err svc_load_cluster(svc *s, const char *path, as_diag *diag)
{
    return core_load_cluster_each(s->core, path, svc_cluster_pod, s->vol, diag);
}

/* See svc.h. */
as_err svc_reload_policy(svc *s, as_diag *diag)
{
    if (!s->cfg.policy_path)
        return as_diag_set(diag, AS_ENOTFOUND, NULL,
                           "no policy file configured (start with --policy FILE to reload it)");
    score_policy *p = NULL;
    as_err err = score_policy_load(&s->core->reg, s->cfg.policy_path, &p, diag);
    if (err)
        return err;
    core_policy_set(s->core, p);
    return AS_OK;
}

/* ---- the API client and the shard coordinator ------------------------- */

/* A shard_publish_fn (arg = svc): through the API client once it runs. */
static as_err svc_shard_publish(void *arg, const char *name, const shard_view *st, as_diag *diag)
{
    k8s_client *k = svc_k8s(arg);
    if (!k)
        return as_diag_set(diag, AS_EUNSUPPORTED, NULL, "not connected to an API server yet");
    return shard_publish_k8s(k, name, st, diag);
}

/* svc_shard_start creates and starts the coordinator when cfg.shard_mode
 * is not none (no-op otherwise, or when it runs already). */
static as_err svc_shard_start(svc *s, as_diag *diag)
{
    if (s->cfg.shard_mode == CACHE_SHARD_NONE || s->shard)
        return AS_OK;
    shard_coord_config cc = {
        .name = s->cfg.shard_name ? s->cfg.shard_name : SHARD_DEFAULT_NAME,
        .mode = s->cfg.shard_mode,
        .cache = s->core->cache,
        .publish = svc_shard_publish,
        .publish_arg = s,
    };
    shard_coord *c = NULL;
    as_err err = shard_coord_new(&cc, &c, diag);
    if (err)
        return err;
    if ((err = shard_coord_start(c))) {
        shard_coord_free(c);
        return as_diag_set(diag, err, NULL, "cannot start the shard publisher thread");
    }
    s->shard = c;
    log_info("msg=\"shard coordination on\" shard=%s mode=%s", cc.name,
             cache_shard_mode_name(cc.mode));
    return AS_OK;
}

/* svc_k8s_synced is the client's synced hook: the core turns ready once
 * the first full list of nodes and pods is in the cache. */
static void svc_k8s_synced(void *arg)
{
    core *co = arg;
    __atomic_store_n(&co->ready, 1, __ATOMIC_RELEASE);
}

/* See svc.h. */
as_err svc_k8s_start(svc *s, const k8s_config *kc, as_diag *diag)
{
    k8s_config c = *kc;
    if (!c.scheduler_name)
        c.scheduler_name = s->cfg.scheduler_name;
    if (!c.qps && s->cfg.kube_api_qps > 0)
        c.qps = s->cfg.kube_api_qps;
    if (!c.burst && s->cfg.kube_api_burst)
        c.burst = s->cfg.kube_api_burst;
    if (!c.watch_down_ms && s->cfg.watch_down_ms > 0)
        c.watch_down_ms = s->cfg.watch_down_ms;
    if (!c.watch_timeout_ms && s->cfg.watch_timeout_ms > 0)
        c.watch_timeout_ms = s->cfg.watch_timeout_ms;
    if (s->shard) {
        c.watch_shards = true;
        c.shard_hook = shard_k8s_hook;
        c.shard_hook_arg = s->shard;
    }
    c.synced_hook = svc_k8s_synced;
    c.synced_hook_arg = s->core;
    k8s_client *k = NULL;
    as_err err = k8s_client_new(&c, s->core->cache, &k, diag);
    if (err)
        return err;
    if ((err = k8s_client_start(k))) {
        k8s_client_free(k);
        return as_diag_set(diag, err, NULL, "cannot start the API client threads");
    }
    __atomic_store_n(&s->k8s, k, __ATOMIC_RELEASE);
    return AS_OK;
}

/* See svc.h. */
void svc_k8s_stop(svc *s)
{
    if (!s || !s->k8s)
        return;
    k8s_client *k = s->k8s;
    k8s_client_stop(k); /* its threads read s->k8s through the ports until joined */
    __atomic_store_n(&s->k8s, NULL, __ATOMIC_RELEASE);
    k8s_client_free(k);
}

/* svc_pod_hook is the API client's pod hook: Volcano's verbs see every
 * pod event, then the fast path (if any) may take the pod. */
static bool svc_pod_hook(void *arg, k8s_event_type ev, model_pod *pod)
{
    svc *s = arg;
    if (ev == K8S_EV_SYNC_BEGIN)
        volcano_resync_begin(s->vol);
    else if (ev == K8S_EV_SYNC_END)
        volcano_resync_end(s->vol);
    else if (pod && (ev == K8S_EV_ADDED || ev == K8S_EV_MODIFIED || ev == K8S_EV_DELETED))
        volcano_pod_seen(s->vol, pod, ev == K8S_EV_DELETED);
    return s->fp ? fastpath_pod_event(s->fp, ev, pod) : false;
}

/* ---- lifecycle ---------------------------------------------------------- */

/* svc_connect starts the live mode: the fast path (unless --workers 0),
 * then the API client whose pod hook feeds it and whose lease hook starts
 * it, then the fast path's threads. */
static as_err svc_connect(svc *s, as_diag *diag)
{
    const svc_config *cfg = &s->cfg;
    as_err err = AS_OK;
    if (cfg->workers) {
        fastpath_config fc;
        fastpath_config_defaults(&fc);
        fc.workers = cfg->workers;
        fc.candidates = cfg->candidates ? cfg->candidates : 3;
        fc.scheduler_name = cfg->scheduler_name;
        if ((err = fastpath_new(s->core, &fc, NULL, &s->fp, diag)))
            return err;
    }
    /* The reflectors fill the cache; /readyz says when. */
    k8s_config kc;
    k8s_config_defaults(&kc);
    kc.kubeconfig = cfg->kubeconfig;
    kc.in_cluster = cfg->in_cluster;
    kc.scheduler_name = cfg->scheduler_name;
    kc.qps = cfg->kube_api_qps;
    kc.burst = cfg->kube_api_burst;
    kc.watch_down_ms = cfg->watch_down_ms;
    kc.watch_timeout_ms = cfg->watch_timeout_ms;
    kc.event_qps = cfg->event_qps;
    kc.bind_warm = cfg->bind_warm != SVC_BIND_WARM_AUTO ? cfg->bind_warm
                   : s->fp                              ? K8S_BIND_CONCURRENCY
                                                        : 0;
    /* every pod: Volcano's verbs learn which exist; the fast path takes
     * the pending pods of our scheduler name */
    kc.pod_hook = svc_pod_hook;
    kc.pod_hook_arg = s;
    char lease_name[300];
    if (cfg->leader_elect && s->fp) {
        if (cfg->lease_name[0])
            snprintf(lease_name, sizeof lease_name, "%s", cfg->lease_name);
        else
            snprintf(lease_name, sizeof lease_name, "agentsched-%s", cfg->scheduler_name);
        kc.lease_namespace = cfg->lease_namespace[0] ? cfg->lease_namespace : NULL;
        kc.lease_name = lease_name;
        kc.lease_identity = cfg->lease_identity;
        kc.lease_duration_ms = cfg->lease_duration_ms;
        kc.leader_hook = fastpath_set_leading; /* called false before any decision */
        kc.leader_hook_arg = s->fp;
    } else if (cfg->leader_elect) {
        log_warn("msg=\"--leader-elect ignored: --workers 0 runs no fast path\"");
    }
    if ((err = svc_k8s_start(s, &kc, diag)))
        return err;
    if (s->fp && (err = fastpath_start(s->fp)))
        as_diag_set(diag, err, NULL, "cannot start the fast-path threads");
    return err;
}

/* See svc.h. */
as_err svc_start(svc *s, const char **stage, as_diag *diag)
{
    *stage = NULL;
    as_err err = svc_shard_start(s, diag);
    if (err) {
        *stage = "cannot start shard coordination";
        goto done;
    }
    uint64_t t0 = clock_mono_ns();
    /* Embedded clusters have no pending pods: the fast path is live only. */
    if (s->cfg.cluster_path)
        err = svc_load_cluster(s, s->cfg.cluster_path, diag);
    else
        err = svc_connect(s, diag);
    if (err) {
        *stage = s->cfg.cluster_path ? "cannot load the cluster" : "cannot connect";
        goto done;
    }
    s->load_ms = (double)(clock_mono_ns() - t0) / 1e6;
    if ((err = svc_http_start(s, diag)))
        *stage = "cannot serve HTTP";
done:
    return err;
}

/* See svc.h. */
void svc_stop(svc *s)
{
    if (!s)
        return;
    svc_http_stop(s);
    /* Workers and binds first, then the reflectors (their pod hook feeds
     * the fast path's queue, their shard hook calls the coordinator), then
     * the memory. */
    fastpath_stop(s->fp);
    svc_k8s_stop(s);
    fastpath_free(s->fp);
    s->fp = NULL;
    shard_coord_free(s->shard);
    s->shard = NULL;
}

/* ------------------------------------------------------------------ */
/* Core endpoints                                                     */
/* ------------------------------------------------------------------ */

static void svc_healthz(void *ctx, const http_request *req, http_response *resp)
{
    resp->content_type = "text/plain; charset=utf-8";
    buf_puts(&resp->body, "ok\n");
}

static size_t svc_discard(char *ptr, size_t size, size_t nmemb, void *ud)
{
    (void)ptr;
    (void)ud;
    return size * nmemb;
}

/* The metrics listener's /healthz asks the main listener's /healthz over
 * loopback (2 s), so that a liveness probe on the pod's address restarts a
 * process whose extender port stopped answering, not only one whose
 * metrics listener did. */
static void svc_probe_healthz(void *ctx, const http_request *req, http_response *resp)
{
    (void)req;
    svc *s = ctx;
    resp->content_type = "text/plain; charset=utf-8";
    unsigned port = s->http ? (unsigned)http_server_port(s->http) : 0;
    if (!port) {
        http_error(resp, 503, NULL, "%s", "the main listener is not serving");
        return;
    }
    char host[256];
    listen_host(s->cfg.listen, host, sizeof host);
    /* a wildcard address is reached on loopback */
    const char *to = !host[0] || !strcmp(host, "0.0.0.0")           ? "127.0.0.1"
                     : !strcmp(host, "::") || !strcmp(host, "[::]") ? "[::1]"
                                                                    : host;
    char url[320];
    snprintf(url, sizeof url, "%s://%s:%u/healthz", s->cfg.tls_cert_path ? "https" : "http", to,
             port);
    CURL *h = curl_easy_init();
    if (!h) {
        http_error(resp, 503, NULL, "%s", "out of memory");
        return;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 2000L);
    /* our own certificate, on our own address: the answer is what counts */
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, svc_discard);
    CURLcode cc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    if (cc != CURLE_OK || code != 200) {
        http_error(resp, 503, NULL, "the main listener (%s) does not answer: %s", url,
                   cc != CURLE_OK ? curl_easy_strerror(cc) : "status not 200");
        return;
    }
    buf_puts(&resp->body, "ok\n");
}

static void svc_readyz(void *ctx, const http_request *req, http_response *resp)
{
    svc *s = ctx;
    if (s->k8s) {
        /* Live mode: synced once, and the watches not down past the bound. */
        char why[256];
        if (k8s_ready(s->k8s, clock_now_ms(), why, sizeof why)) {
            resp->content_type = "text/plain; charset=utf-8";
            buf_puts(&resp->body, "ok\n");
        } else {
            http_error(resp, 503, NULL, "%s", why);
        }
        return;
    }
    if (core_ready(s->core)) {
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
    buf_printf(b, ", \"started_ms\": %lld}\n", (long long)s->core->started_ms);
}

/* Sets a scrape-time gauge; declared on first use (declaration finds the
 * existing series afterwards, so this needs no handle in the svc). */
static void svc_gauge(svc *s, const char *name, const char *help, int64_t v)
{
    metrics_set(metrics_new_gauge(s->core->metrics, name, help), v);
}

static void svc_counter_set(svc *s, const char *name, const char *help, uint64_t v)
{
    /* Counters mirrored from the binder's own totals: monotonic already. */
    metrics_counter *c = metrics_new_counter(s->core->metrics, name, help);
    metrics_set(c, (int64_t)v);
}

/* The device gauges per GPU model, one pair per model the cache has seen
 * (a model whose nodes are gone stays at 0). */
static void svc_gpu_model_gauges(svc *s)
{
    const char *help = "GPU devices agentsched may place on per GPU model (the node's model "
                       "label; with hard shards, its shard's): all, and wholly free ones.";
    const cache_gpu_model *m = NULL;
    size_t n = cache_gpu_models(s->core->cache, &m);
    for (size_t i = 0; i < n; i++) {
        char label[2 * sizeof m[i].name], name[256];
        if (!metrics_label_value(m[i].name, label, sizeof label))
            continue;
        snprintf(name, sizeof name,
                 "agentsched_cache_gpu_model_devices{model=\"%s\",state=\"all\"}", label);
        svc_gauge(s, name, help, (int64_t)__atomic_load_n(&m[i].devices, __ATOMIC_RELAXED));
        snprintf(name, sizeof name,
                 "agentsched_cache_gpu_model_devices{model=\"%s\",state=\"free\"}", label);
        svc_gauge(s, name, help, (int64_t)__atomic_load_n(&m[i].free_devices, __ATOMIC_RELAXED));
    }
}

static void svc_metrics_endpoint(void *ctx, const http_request *req, http_response *resp)
{
    svc *s = ctx;
    cache_stats cs;
    cache_get_stats(s->core->cache, &cs);
    const char *nodes = "Nodes in the cache.";
    svc_gauge(s, "agentsched_cache_nodes", nodes, (int64_t)cs.nodes);
    svc_gauge(s, "agentsched_cache_nodes_in_shard", "Nodes in this scheduler's shard.",
              (int64_t)cs.nodes_in_shard);
    const char *pods = "Pods occupying capacity in the cache, by state.";
    svc_gauge(s, "agentsched_cache_pods{state=\"bound\"}", pods, (int64_t)cs.pods_bound);
    svc_gauge(s, "agentsched_cache_pods{state=\"assumed\"}", pods, (int64_t)cs.pods_assumed);
    svc_gauge(s, "agentsched_cache_pods{state=\"detached\"}", pods, (int64_t)cs.pods_detached);
    uint64_t ndev = 0, nfree = 0;
    cache_gpu_devices(s->core->cache, &ndev, &nfree);
    const char *gd = "GPU devices agentsched may place on (with hard shards, its shard's): all, "
                     "and wholly free ones.";
    svc_gauge(s, "agentsched_cache_gpu_devices{state=\"all\"}", gd, (int64_t)ndev);
    svc_gauge(s, "agentsched_cache_gpu_devices{state=\"free\"}", gd, (int64_t)nfree);
    svc_gpu_model_gauges(s);
    score_policy *pol = core_policy_get(s->core);
    svc_gauge(s, "agentsched_policy_free_devices_short",
              "1 while the policy keeps the last wholly free GPU devices from shares "
              "(fragment.keepFree, keepFreeFragmented).",
              pol && score_policy_devices_short(pol, s->core->cache));
    if (pol)
        score_policy_unref(pol);
    const char *ev = "Cache mutations applied, by object kind.";
    svc_counter_set(s, "agentsched_cache_events_total{kind=\"node\"}", ev, cs.node_events);
    svc_counter_set(s, "agentsched_cache_events_total{kind=\"pod\"}", ev, cs.pod_events);
    const char *fo = "Pods bound by another scheduler that pushed a node past its allocatable, "
                     "by whether pods of ours were still in flight (assumed) there.";
    svc_counter_set(s, "agentsched_cache_foreign_overcommits_total{ours_in_flight=\"true\"}", fo,
                    cs.foreign_overcommits_assumed);
    svc_counter_set(s, "agentsched_cache_foreign_overcommits_total{ours_in_flight=\"false\"}", fo,
                    cs.foreign_overcommits - cs.foreign_overcommits_assumed);
    binder_stats bs;
    binder_get_stats(s->core->binder, &bs);
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
              core_ready(s->core));
    svc_gauge(s, "agentsched_start_time_seconds", "Start time since the Unix epoch.",
              s->core->started_ms / 1000);
    k8s_metrics_update(s->k8s, s->core->metrics); /* live mode: agentsched_k8s_* */
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    as_err err = metrics_render(s->core->metrics, &resp->body);
    if (err)
        http_error(resp, http_status_for_err(err), NULL, "cannot render metrics: %s",
                   as_strerror(err));
}

static void svc_observe(void *ctx, const char *method, const char *path, const char *caller,
                        int status, uint64_t elapsed_ns)
{
    svc *s = ctx;
    metrics_inc(s->core->m.requests_total);
    if (status >= 400)
        metrics_inc(s->core->m.request_errors_total);
    log_debug("msg=\"request\" method=%s path=%s caller=%s status=%d us=%llu", method, path, caller,
              status, (unsigned long long)(elapsed_ns / 1000));
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

/* svc_tls_stat notes the identity of the TLS files in impl->tls_seen. */
static void svc_tls_stat(svc_impl *impl)
{
    const char *paths[3] = {impl->pub.cfg.tls_cert_path, impl->pub.cfg.tls_key_path,
                            impl->pub.cfg.tls_client_ca_path};
    for (int i = 0; i < 3; i++)
        if (!paths[i] || stat(paths[i], &impl->tls_seen[i]) != 0)
            memset(&impl->tls_seen[i], 0, sizeof impl->tls_seen[i]);
}

/* svc_tls_read reads the configured TLS files (the CA only when client
 * authentication is on); the caller frees the three (the key wiped). */
static as_err svc_tls_read(svc *s, char **cert, char **key, char **ca, as_diag *diag)
{
    *cert = *key = *ca = NULL;
    as_err err;
    if ((err = svc_read_pem("--tls-cert", s->cfg.tls_cert_path, cert, diag)) ||
        (err = svc_read_pem("--tls-key", s->cfg.tls_key_path, key, diag)) ||
        (s->cfg.tls_client_ca_path &&
         (err = svc_read_pem("--tls-client-ca", s->cfg.tls_client_ca_path, ca, diag))))
        return err;
    return AS_OK;
}

static void svc_tls_free(char *cert, char *key, char *ca)
{
    /* The key is a secret: do not leave it in freed heap memory. */
    if (key)
        explicit_bzero(key, strlen(key));
    free(key);
    free(cert);
    free(ca);
}

/* svc_tls_field turns http's field names for TLS errors into the flags. */
static void svc_tls_field(as_diag *diag)
{
    if (!diag)
        return;
    if (strcmp(diag->field, "tls-cert") == 0)
        snprintf(diag->field, sizeof diag->field, "--tls-cert/--tls-key");
    else if (strcmp(diag->field, "tls-key") == 0)
        snprintf(diag->field, sizeof diag->field, "--tls-key");
    else if (strcmp(diag->field, "tls-client-ca") == 0)
        snprintf(diag->field, sizeof diag->field, "--tls-client-ca");
}

/* See svc.h. */
as_err svc_http_start(svc *s, as_diag *diag)
{
    if (s->http)
        return AS_OK;
    size_t n = 0;
    const http_route *routes = svc_routes(s, &n);
    char *cert = NULL, *key = NULL, *ca = NULL;
    as_err err = AS_OK;
    if (!s->cfg.tls_cert_path != !s->cfg.tls_key_path) {
        err = as_diag_set(diag, AS_EINVAL, s->cfg.tls_cert_path ? "--tls-key" : "--tls-cert",
                          "HTTPS needs both --tls-cert and --tls-key");
        goto done;
    }
    if (s->cfg.tls_client_ca_path && !s->cfg.tls_cert_path) {
        err = as_diag_set(diag, AS_EINVAL, "--tls-client-ca",
                          "client certificates need HTTPS: give --tls-cert and --tls-key too");
        goto done;
    }
    svc_tls_stat((svc_impl *)s);
    if (s->cfg.tls_cert_path && (err = svc_tls_read(s, &cert, &key, &ca, diag)))
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
        .timeout_s = s->cfg.http_timeout_s,
        .routes = routes,
        .nroutes = n,
        .ctx = s,
        .observe = svc_observe,
        .tls_cert_pem = cert,
        .tls_key_pem = key,
        .tls_client_ca_pem = ca,
        .tls_client_exempt = s->cfg.tls_client_exempt,
    };
    if ((err = placement_limit_configure(s->cfg.placement_qps)))
        goto done;
    err = http_server_start(&hc, &s->http, diag);
    if (err == AS_EINVAL)
        svc_tls_field(diag);
    if (!err && s->cfg.metrics_listen) {
        /* bodyless GETs from a prober and a scraper: one thread, no TLS */
        http_server_config mc = {
            .listen = s->cfg.metrics_listen,
            .threads = 1,
            .max_body = 4096,
            .body_budget = 4096,
            .conn_limit = 64,
            .timeout_s = s->cfg.http_timeout_s,
            .routes = svc_probe_routes,
            .nroutes = sizeof svc_probe_routes / sizeof svc_probe_routes[0],
            .ctx = s,
            .observe = svc_observe,
        };
        /* its /healthz uses libcurl from a pool thread: initialise it here,
         * on the starting thread (paired with the cleanup in svc_http_stop) */
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            err = as_diag_set(diag, AS_ENOMEM, "--metrics-listen", "cannot initialise libcurl");
            goto done;
        }
        if ((err = http_server_start(&mc, &s->http_metrics, diag))) {
            curl_global_cleanup();
            if (!diag->field[0])
                snprintf(diag->field, sizeof diag->field, "--metrics-listen");
        }
    }
done:
    svc_tls_free(cert, key, ca);
    return err;
}

/* See svc.h. */
as_err svc_reload_tls(svc *s, bool force, bool *reloaded, as_diag *diag)
{
    svc_impl *impl = (svc_impl *)s;
    if (reloaded)
        *reloaded = false;
    if (!s->http || !s->cfg.tls_cert_path)
        return AS_OK;
    uint64_t now = clock_mono_ns();
    if (!force && now - impl->tls_checked_ns < 1000000000u)
        return AS_OK;
    impl->tls_checked_ns = now;
    struct stat before[3];
    memcpy(before, impl->tls_seen, sizeof before);
    svc_tls_stat(impl);
    bool changed = false;
    for (int i = 0; i < 3; i++) {
        const struct stat *a = &before[i], *b = &impl->tls_seen[i];
        changed |= a->st_ino != b->st_ino || a->st_dev != b->st_dev || a->st_size != b->st_size ||
                   a->st_mtim.tv_sec != b->st_mtim.tv_sec ||
                   a->st_mtim.tv_nsec != b->st_mtim.tv_nsec;
    }
    if (!force && !changed)
        return AS_OK;
    char *cert, *key, *ca;
    as_err err = svc_tls_read(s, &cert, &key, &ca, diag);
    if (!err) {
        err = http_server_set_tls(s->http, cert, key, ca, diag);
        if (err == AS_EINVAL)
            svc_tls_field(diag);
    }
    svc_tls_free(cert, key, ca);
    if (!err && reloaded)
        *reloaded = true;
    return err;
}

/* See svc.h. */
void svc_http_stop(svc *s)
{
    if (!s)
        return;
    if (s->http_metrics) {
        http_server_stop(s->http_metrics);
        curl_global_cleanup();
    }
    s->http_metrics = NULL;
    if (s->http)
        http_server_stop(s->http);
    s->http = NULL;
}

/* context.c - the decision core's state and the metrics it declares. */
#include "agentsched/core/context.h"
#include "agentsched/core/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/clock.h"
#include "agentsched/base/buf.h"
#include "agentsched/core/eqcache.h"
#include "agentsched/model/gpuannot.h"
#include "agentsched/model/cluster.h"

/* See context.h. */
void core_config_defaults(core_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->shard_mode = CACHE_SHARD_NONE;
    cfg->candidates = 3;
}

/* See context.h. */
bool core_names_valid(const char *list)
{
    if (!list || !list[0] || strlen(list) >= CORE_NAMES_MAX)
        return false;
    size_t run = 0;
    for (const char *p = list;; p++) {
        if (*p == ',' || !*p) {
            if (!run)
                return false; /* empty name: ",x", "x,,y", "x," */
            if (!*p)
                return true;
            run = 0;
        } else if (*p == ' ' || *p == '\t' || (unsigned char)*p < 0x20) {
            return false;
        } else {
            run++;
        }
    }
}

/* See context.h. */
bool core_name_listed(const char *list, const char *name)
{
    if (!list || !name || !name[0])
        return false;
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0)
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

/* The declaration order is the order /metrics lists the series in. */
static void core_declare_metrics(core *c)
{
    metrics *m = c->metrics;
    const double *b = metrics_latency_buckets;
    size_t nb = metrics_latency_nbuckets;
    c->m.requests_total =
        metrics_new_counter(m, "agentsched_http_requests_total", "HTTP requests answered.");
    c->m.request_errors_total = metrics_new_counter(m, "agentsched_http_request_errors_total",
                                                    "HTTP requests answered with status >= 400.");
    const char *lat = "Time to answer a scheduling request, by verb.";
    c->m.filter_seconds = metrics_new_histogram(
        m, "agentsched_request_duration_seconds{verb=\"filter\"}", lat, b, nb);
    c->m.prioritize_seconds = metrics_new_histogram(
        m, "agentsched_request_duration_seconds{verb=\"prioritize\"}", lat, b, nb);
    c->m.bind_seconds =
        metrics_new_histogram(m, "agentsched_request_duration_seconds{verb=\"bind\"}", lat, b, nb);
    c->m.preempt_seconds = metrics_new_histogram(
        m, "agentsched_request_duration_seconds{verb=\"preempt\"}", lat, b, nb);
    c->m.placement_seconds = metrics_new_histogram(
        m, "agentsched_request_duration_seconds{verb=\"placement\"}", lat, b, nb);
    const char *binds = "Binds accepted by the versioned binder, by how.";
    c->m.binds_fast = metrics_new_counter(m, "agentsched_binds_total{result=\"fast\"}", binds);
    c->m.binds_rechecked =
        metrics_new_counter(m, "agentsched_binds_total{result=\"rechecked\"}", binds);
    c->m.binds_idempotent =
        metrics_new_counter(m, "agentsched_binds_total{result=\"idempotent\"}", binds);
    c->m.bind_conflicts = metrics_new_counter(m, "agentsched_bind_conflicts_total",
                                              "Binds refused because the node changed and the "
                                              "pod no longer fits, or it is bound elsewhere.");
    const char *memo = "Prioritize calls answered from the same cycle's filter evaluation (hit) "
                       "or evaluated afresh (miss).";
    c->m.memo_hits =
        metrics_new_counter(m, "agentsched_prioritize_memo_total{result=\"hit\"}", memo);
    c->m.memo_misses =
        metrics_new_counter(m, "agentsched_prioritize_memo_total{result=\"miss\"}", memo);
    const char *spec = "Pods whose spec the extender decoded (miss) or reused from a Pod with the "
                       "same spec text (hit).";
    c->m.spec_memo_hits =
        metrics_new_counter(m, "agentsched_extender_pod_spec_memo_total{result=\"hit\"}", spec);
    c->m.spec_memo_misses =
        metrics_new_counter(m, "agentsched_extender_pod_spec_memo_total{result=\"miss\"}", spec);
    const char *ga = "GPU device annotations patched onto pods before their Binding: written, "
                     "refused by a precondition (conflict), or failed otherwise (error).";
    c->m.gpu_annot_written =
        metrics_new_counter(m, "agentsched_gpu_annotations_total{result=\"written\"}", ga);
    c->m.gpu_annot_conflicts =
        metrics_new_counter(m, "agentsched_gpu_annotations_total{result=\"conflict\"}", ga);
    c->m.gpu_annot_errors =
        metrics_new_counter(m, "agentsched_gpu_annotations_total{result=\"error\"}", ga);
}

/* See context.h. */
as_err core_new(const core_config *cfg, core **out, as_diag *diag)
{
    *out = NULL;
    core *c = calloc(1, sizeof *c);
    if (!c)
        return AS_ENOMEM;
    as_err err = AS_OK;
    c->cfg = *cfg;
    c->cfg.policy_path = NULL; /* borrowed: read here only */
    const char *en = cfg->extender_names ? cfg->extender_names : CORE_DEFAULT_EXTENDER_NAMES;
    const char *vn = cfg->volcano_names ? cfg->volcano_names : CORE_DEFAULT_VOLCANO_NAMES;
    c->cfg.extender_names = c->cfg.volcano_names = NULL; /* borrowed: copied below */
    pthread_mutex_init(&c->policy_mu, NULL);
    if (!core_names_valid(en) || !core_names_valid(vn)) {
        err =
            as_diag_set(diag, AS_EINVAL, core_names_valid(en) ? "volcano_names" : "extender_names",
                        "a scheduler name list is NAME[,NAME...]: non-empty names without "
                        "spaces, under %d bytes in all",
                        CORE_NAMES_MAX);
        model_registry_init(&c->reg);
        goto done;
    }
    snprintf(c->extender_names, sizeof c->extender_names, "%s", en);
    snprintf(c->volcano_names, sizeof c->volcano_names, "%s", vn);
    model_registry_init(&c->reg);
    if ((err = cache_new(&c->reg, &c->cache)))
        goto done;
    cache_set_shard_mode(c->cache, cfg->shard_mode);
    if ((err = binder_new(c->cache, NULL, &c->binder)))
        goto done;
    eqcache_config ec;
    eqcache_config_defaults(&ec);
    ec.max_classes = CORE_EXTENDER_SHAPES;
    if ((err = eqcache_new(c->cache, &ec, &c->eq)))
        goto done;
    if (cfg->policy_path) {
        if ((err = score_policy_load(&c->reg, cfg->policy_path, &c->policy, diag)))
            goto done;
    } else if ((err = score_policy_new_default(&c->reg, &c->policy))) {
        as_diag_set(diag, err, NULL, "cannot build the default scoring policy: %s",
                    as_strerror(err));
        goto done;
    }
    if ((err = metrics_new(&c->metrics)))
        goto done;
    core_declare_metrics(c);
    c->started_ms = clock_now_ms();
    *out = c;
done:
    if (err)
        core_free(c);
    return err;
}

/* See context.h. */
void core_free(core *c)
{
    if (!c)
        return;
    if (c->binder)
        binder_free(c->binder);
    eqcache_free(c->eq); /* before the cache it reads */
    cache_free(c->cache);
    if (c->policy)
        score_policy_unref(c->policy);
    metrics_free(c->metrics);
    model_registry_destroy(&c->reg);
    pthread_mutex_destroy(&c->policy_mu);
    free(c);
}

/* See context.h. */
as_err core_load_cluster(core *c, const char *path, as_diag *diag)
{
    return core_load_cluster_each(c, path, NULL, NULL, diag);
}

/* See context.h. */
as_err core_load_cluster_each(core *c, const char *path,
                              void (*each)(void *arg, const model_pod *pod), void *arg,
                              as_diag *diag)
{
    model_cluster *cl = NULL;
    as_err err = model_cluster_load(&c->reg, path, &cl, diag);
    if (err)
        return err;
    for (size_t i = 0; i < cl->nnodes; i++) {
        model_node *n = cl->nodes[i];
        cl->nodes[i] = NULL; /* the cache owns it from here, even on error */
        char name[256];
        snprintf(name, sizeof name, "%s", n->name);
        if ((err = cache_node_upsert(c->cache, n))) {
            as_diag_set(diag, err, NULL, "%s: cannot add node %s to the cache: %s", path, name,
                        as_strerror(err));
            goto done;
        }
    }
    for (size_t i = 0; i < cl->npods; i++) {
        const model_pod *p = cl->pods[i];
        if ((err = cache_pod_upsert(c->cache, p))) {
            as_diag_set(diag, err, NULL, "%s: cannot add pod %s/%s to the cache: %s", path, p->ns,
                        p->name, as_strerror(err));
            goto done;
        }
        if (each)
            each(arg, p);
    }
    core_set_ready(c);
done:
    model_cluster_free(cl);
    return err;
}

/* See context.h. */
bool core_ready(const core *c)
{
    return __atomic_load_n(&c->ready, __ATOMIC_ACQUIRE) != 0;
}

/* See context.h. */
void core_set_ready(core *c)
{
    __atomic_store_n(&c->ready, 1, __ATOMIC_RELEASE);
}

/* See context.h. */
score_policy *core_policy_get(core *c)
{
    pthread_mutex_lock(&c->policy_mu);
    score_policy *p = score_policy_ref(c->policy);
    pthread_mutex_unlock(&c->policy_mu);
    return p;
}

/* See context.h. */
void core_policy_set(core *c, score_policy *p)
{
    pthread_mutex_lock(&c->policy_mu);
    score_policy *old = c->policy;
    c->policy = p;
    pthread_mutex_unlock(&c->policy_mu);
    /* In-flight decisions hold their own reference; the last one frees it. */
    if (old)
        score_policy_unref(old);
}

/* See context.h. */
bool core_live(const core *c)
{
    return c->ports.live && c->ports.live(c->ports.arg);
}

/* See context.h. */
bool core_synced(const core *c)
{
    return !c->ports.synced || c->ports.synced(c->ports.arg);
}

/* See context.h. */
uint64_t core_decision_begin(const core *c)
{
    return c->ports.decision_begin ? c->ports.decision_begin(c->ports.arg) : 0;
}

/* See context.h. */
void core_decision_end(const core *c, uint64_t revision)
{
    if (c->ports.decision_end)
        c->ports.decision_end(c->ports.arg, revision);
}

/* See context.h. */
as_err core_gpu_prebind(core *c, const char *ns, const char *name, const char *uid,
                        const char *resource_version, const char *node, uint32_t devices,
                        uint32_t milli, as_diag *diag)
{
    if (!devices || !c->ports.patch_pod || !core_live(c))
        return AS_OK;
    score_policy *p = core_policy_get(c);
    uint32_t contracts = score_policy_gpu_annotations(p);
    score_policy_unref(p);
    if (!contracts)
        return AS_OK;
    gpuannot_patch gp = {uid,       resource_version,     node, devices, milli,
                         contracts, clock_now_us() * 1000};
    buf body;
    buf_init(&body, 8192);
    as_err err = gpuannot_patch_body(&gp, &body);
    if (err) {
        as_diag_set(diag, err, NULL, "GPU device annotation of pod %s/%s: %s", ns, name,
                    as_strerror(err));
    } else {
        err = c->ports.patch_pod(c->ports.arg, ns, name, body.data, body.len, diag);
    }
    buf_free(&body);
    metrics_inc(err == AS_OK          ? c->m.gpu_annot_written
                : err == AS_ECONFLICT ? c->m.gpu_annot_conflicts
                                      : c->m.gpu_annot_errors);
    return err;
}

/* See context.h. */
decision_ports core_decision_ports(const core *c,
                                   as_err (*bind)(void *arg, const decision *d, as_diag *diag),
                                   void (*report)(void *arg, const decision *d), void *arg)
{
    decision_ports p = {.gate_begin = c->ports.decision_begin,
                        .gate_end = c->ports.decision_end,
                        .gate_arg = c->ports.arg,
                        .bind = bind,
                        .report = report,
                        .arg = arg};
    return p;
}

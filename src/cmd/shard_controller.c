/*
 * shard_controller.c - `agentsched shard-controller`: follows Nodes, Pods and
 * NodeShards through the k8s client, keeps the assignment engine current
 * (incrementally on node/pod changes, from scratch every shardSyncPeriod),
 * hot-reloads the config file, and, while it holds the Lease, writes each
 * scheduler's NodeShard.spec.nodesDesired. `--cluster FILE --once` computes
 * the shards of a cluster file offline and prints them.
 */
#include "agentsched/cmd/shard_controller.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agentsched/base/buf.h"
#include "agentsched/base/clock.h"
#include "agentsched/core/cache.h"
#include "agentsched/base/cli.h"
#include "agentsched/base/http.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/k8s/lease.h"
#include "agentsched/k8s/shard_status.h"
#include "agentsched/k8s/watch.h"
#include "agentsched/base/log.h"
#include "agentsched/base/sync.h"
#include "agentsched/base/metrics.h"
#include "agentsched/model/cluster.h"
#include "agentsched/model/registry.h"
#include "agentsched/shard/owner.h"
#include "agentsched/shard/shardctl.h"

typedef struct ctl_metrics {
    metrics_counter *nodes, *unfit, *capped, *leader, *recompute_incr, *recompute_full, *reload_ok,
        *reload_failed, *writes_ok, *writes_failed, *foreign, *stand_downs;
} ctl_metrics;

typedef struct ctl {
    /* flags */
    const char *config_path, *kubeconfig, *context, *cluster_path, *listen;
    const char *lease_ns, *lease_name;
    char cm_ns[254], cm_name[254]; /* --configmap NS/NAME ("" = file) */
    const char *cm_key;
    char cm_rv[64];
    bool cm_absent_logged;
    int64_t next_cm_ms;
    char identity[256];
    bool in_cluster, once, dry_run;
    int64_t lease_ms, renew_deadline_ms, retry_ms;
    /* state */
    shardcfg_config *cfg;
    shardcfg_file_stamp stamp;
    shardctl_engine *eng;
    model_registry reg;
    cache *cache;
    k8s_client *k;
    metrics *m;
    ctl_metrics cm;
    http_server *http;
    k8s_lease *lease;
    bool leader;
    int64_t next_lease_ms, last_full_ms, next_reload_ms, next_write_ms;
    uint64_t epoch, seen_node_ev, seen_pod_ev;
    uint64_t written[SHARDCFG_MAX_SCHEDULERS];
    bool written_ok[SHARDCFG_MAX_SCHEDULERS];
    int leader_gauge; /* (atomic) for /healthz */
    int64_t loop_ms;  /* (atomic) when the main loop last went round, for /healthz */
    /* another sharding controller (owner.h); foreign_ns "" = not watched */
    char foreign_ns[254], foreign_name[254];
    const char *foreign_manager;
    k8s_lease_obs foreign_obs;
    shard_owner owner;
    bool foreign, foreign_decided, foreign_lease_denied;
    int64_t next_foreign_ms;
} ctl;

/* ---- engine feeding --------------------------------------------------- */

static shardctl_node_info node_info(const cache_node *n)
{
    return (shardctl_node_info){
        .name = n->spec->name,
        /* Volcano's numerator and denominator: the containers' CPU
         * requests of the node's pods (not the scheduler's effective
         * request) over status.capacity (not allocatable). */
        .cpu_requested = cache_node_containers_cpu(n),
        .cpu_capacity = n->spec->capacity.v[MODEL_RES_CPU],
        .labels = &n->spec->labels,
        /* generation changes with every usage or spec change; the id with
         * every incarnation. */
        .tag = cache_node_generation(n) * 0x9E3779B97F4A7C15ULL ^ n->id,
    };
}

/* Full recompute from the cache. */
static as_err full_resync(ctl *x)
{
    as_err err = AS_OK;
    cache_read_lock(x->cache);
    size_t n = cache_node_count(x->cache);
    shardctl_node_info *v = calloc(n ? n : 1, sizeof *v);
    if (!v) {
        cache_read_unlock(x->cache);
        return AS_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = node_info(cache_node_at(x->cache, i));
    err = shardctl_engine_resync(x->eng, v, n, ++x->epoch);
    cache_read_unlock(x->cache);
    free(v);
    metrics_inc(x->cm.recompute_full);
    return err;
}

/* Incremental: only nodes whose tag moved are re-evaluated; vanished
 * nodes are swept. The tag check is a load per node. */
static as_err incremental(ctl *x, size_t *changed)
{
    as_err err = AS_OK;
    size_t k = 0;
    uint64_t epoch = ++x->epoch;
    cache_read_lock(x->cache);
    size_t n = cache_node_count(x->cache);
    for (size_t i = 0; i < n && !err; i++) {
        const cache_node *cn = cache_node_at(x->cache, i);
        shardctl_node_info info = node_info(cn);
        uint64_t tag = 0;
        if (shardctl_engine_seen(x->eng, info.name, epoch, &tag) && tag == info.tag)
            continue;
        err = shardctl_engine_set_node(x->eng, &info, epoch);
        k++;
    }
    cache_read_unlock(x->cache);
    size_t removed = 0;
    if (!err)
        err = shardctl_engine_sweep(x->eng, epoch, &removed);
    *changed = k + removed;
    if (*changed)
        metrics_inc(x->cm.recompute_incr);
    return err;
}

static void update_gauges(ctl *x)
{
    shardctl_engine_stats st;
    shardctl_engine_get_stats(x->eng, &st);
    metrics_set(x->cm.nodes, (int64_t)st.nodes);
    metrics_set(x->cm.unfit, (int64_t)st.unfit);
    metrics_set(x->cm.capped, (int64_t)st.capped);
}

/* ---- writing NodeShards ----------------------------------------------- */

/* Writes every scheduler's nodesDesired that Volcano's controller would
 * rewrite (shardctl_needs_write), comparing with the object. */
static void write_shards(ctl *x, bool force)
{
    /* Only look at the objects when some membership moved. */
    bool any = force;
    for (size_t s = 0; s < x->cfg->n && !any; s++)
        any = !x->written_ok[s] || x->written[s] != shardctl_engine_version(x->eng, s);
    if (!any)
        return;
    k8s_shard *cur = NULL;
    size_t ncur = 0;
    if (x->k && k8s_shards_copy(x->k, &cur, &ncur) != AS_OK)
        return;
    bool failed = false;
    for (size_t s = 0; s < x->cfg->n; s++) {
        const char **names = NULL;
        size_t n = 0;
        uint64_t version = 0;
        if (shardctl_engine_members(x->eng, s, &names, &n, &version))
            continue;
        if (!force && x->written_ok[s] && x->written[s] == version) {
            free(names);
            continue;
        }
        const char *sname = x->cfg->sched[s].name;
        const k8s_shard *obj = NULL;
        for (size_t i = 0; i < ncur; i++)
            if (strcmp(cur[i].name, sname) == 0)
                obj = &cur[i];
        as_err err = AS_OK;
        as_diag d = {0};
        if (!obj || shardctl_needs_write((const char *const *)obj->nodes_desired, obj->n_desired,
                                         names, n)) {
            err = k8s_shard_put_desired(x->k, sname, names, n, &d);
            if (err) {
                failed = true;
                metrics_inc(x->cm.writes_failed);
                log_warn("msg=\"NodeShard write failed; will retry\" shard=%s error=\"%s\"", sname,
                         d.msg[0] ? d.msg : as_strerror(err));
            } else {
                metrics_inc(x->cm.writes_ok);
                log_info("msg=\"NodeShard written\" shard=%s nodes_desired=%zu", sname, n);
            }
        } else if (obj && obj->n_desired == n) {
            log_debug("msg=\"NodeShard kept: too few new nodes for a rewrite (Volcano's "
                      "rule)\" shard=%s nodes_desired=%zu",
                      sname, n);
        }
        x->written_ok[s] = err == AS_OK;
        x->written[s] = version;
        free(names);
    }
    k8s_shards_free(cur, ncur);
    /* Back off after a failure rather than retrying every tick. */
    x->next_write_ms = failed ? clock_mono_ms() + x->retry_ms : 0;
}

/* --dry-run: log what would be written when a membership moves. */
static void report_dry_run(ctl *x)
{
    for (size_t s = 0; s < x->cfg->n; s++) {
        if (x->written_ok[s] && x->written[s] == shardctl_engine_version(x->eng, s))
            continue;
        const char **names = NULL;
        size_t n = 0;
        uint64_t version = 0;
        if (shardctl_engine_members(x->eng, s, &names, &n, &version))
            continue;
        {
            log_info("msg=\"dry run: would write NodeShard\" shard=%s nodes_desired=%zu first=%s",
                     x->cfg->sched[s].name, n, n ? names[0] : "-");
            x->written_ok[s] = true;
            x->written[s] = version;
        }
        free(names);
    }
}

/* ---- another controller ------------------------------------------------- */

/* Reads the other controller's Lease and decides whether it owns the
 * NodeShards; logs and counts each change. Without a readable Lease (403,
 * network) the last observation ages out: after its duration we write. */
static void foreign_step(ctl *x, int64_t now)
{
    if (!x->foreign_ns[0] || !x->k)
        return;
    char path[700];
    snprintf(path, sizeof path, "/apis/coordination.k8s.io/v1/namespaces/%s/leases/%s",
             x->foreign_ns, x->foreign_name);
    buf resp;
    buf_init(&resp, 16 << 10);
    long code = 0;
    as_diag d = {0};
    json_t *obj = NULL;
    k8s_shard *cur = NULL;
    size_t ncur = 0;
    as_err err = k8s_request(x->k, "GET", path, NULL, 0, &resp, &code, &d);
    if (!err && code == 200 && (obj = json_loadb(resp.data ? resp.data : "", resp.len, 0, NULL)))
        k8s_lease_observe(&x->foreign_obs, obj, now);
    else if (!err && code == 404)
        k8s_lease_observe(&x->foreign_obs, NULL, now);
    else if (!x->foreign_lease_denied) {
        x->foreign_lease_denied = true;
        log_warn("msg=\"cannot read the other sharding controller's Lease\" lease=%s/%s "
                 "status=%ld error=\"%s\"",
                 x->foreign_ns, x->foreign_name, code,
                 err ? (d.msg[0] ? d.msg : as_strerror(err)) : "-");
    }
    if (!err && (code == 200 || code == 404))
        x->foreign_lease_denied = false;
    if (k8s_shards_copy(x->k, &cur, &ncur) != AS_OK)
        goto done;
    bool was = x->foreign, now_foreign = false;
    if (shard_owner_step(&x->owner, shard_owner_lease_live(&x->foreign_obs, now),
                         x->foreign_obs.acquire_time, cur, ncur, &now_foreign))
        goto done;
    x->foreign = now_foreign;
    metrics_set(x->cm.foreign, now_foreign);
    if (now_foreign && (!was || !x->foreign_decided)) {
        metrics_inc(x->cm.stand_downs);
        log_warn("msg=\"another sharding controller manages the NodeShards; standing down "
                 "(no NodeShard written, created or deleted)\" lease=%s/%s holder=%s "
                 "why=\"%s\"",
                 x->foreign_ns, x->foreign_name, x->foreign_obs.holder, x->owner.why);
    } else if (!now_foreign && was) {
        log_info("msg=\"the other sharding controller stopped; taking over the NodeShards\" "
                 "lease=%s/%s why=\"%s\"",
                 x->foreign_ns, x->foreign_name, x->owner.why);
        memset(x->written_ok, 0, sizeof x->written_ok); /* re-check (and re-create) each */
    }
    x->foreign_decided = true;
done:
    k8s_shards_free(cur, ncur);
    json_decref(obj);
    buf_free(&resp);
}

/* ---- leader election ---------------------------------------------------- */

static void set_leader(ctl *x, bool on)
{
    if (x->leader == on)
        return;
    x->leader = on;
    __atomic_store_n(&x->leader_gauge, on ? 1 : 0, __ATOMIC_RELAXED);
    metrics_set(x->cm.leader, on);
    if (on)
        memset(x->written_ok, 0, sizeof x->written_ok); /* re-check every shard */
}

static void lease_step(ctl *x)
{
    set_leader(x, k8s_lease_step(x->lease, clock_mono_ms()));
}

static void lease_release(ctl *x)
{
    if (!x->lease)
        return;
    k8s_lease_release(x->lease, clock_mono_ms());
    set_leader(x, false);
}

/* ---- HTTP: /metrics, /healthz ------------------------------------------ */

static void h_metrics(void *ctx, const http_request *req, http_response *resp)
{
    (void)req;
    ctl *x = ctx;
    resp->content_type = "text/plain; version=0.0.4";
    if (metrics_render(x->m, &resp->body))
        resp->status = 500;
}

/* A main loop that has not gone round for this long is stuck (its longest
 * legitimate wait is a few API requests of at most a minute each): /healthz
 * fails, so a liveness probe restarts the process. */
#define CTL_STALL_MS 300000

static void h_healthz(void *ctx, const http_request *req, http_response *resp)
{
    (void)req;
    ctl *x = ctx;
    resp->content_type = "text/plain";
    if (http_stalled(resp, __atomic_load_n(&x->loop_ms, __ATOMIC_RELAXED), CTL_STALL_MS,
                     "the main loop"))
        return;
    buf_printf(&resp->body, "ok leader=%d\n", __atomic_load_n(&x->leader_gauge, __ATOMIC_RELAXED));
}

static const http_route ctl_routes[] = {
    {"GET", "/metrics", h_metrics, false, NULL, false, false},
    {"GET", "/healthz", h_healthz, false, NULL, false, false},
};

/* ---- flags -------------------------------------------------------------- */

enum {
    CTL_CONFIG,
    CTL_CONFIGMAP,
    CTL_CONFIGMAP_KEY,
    CTL_KUBECONFIG,
    CTL_CONTEXT,
    CTL_IN_CLUSTER,
    CTL_CLUSTER,
    CTL_ONCE,
    CTL_DRY_RUN,
    CTL_IDENTITY,
    CTL_LEASE_NAMESPACE,
    CTL_LEASE_NAME,
    CTL_LEASE_DURATION,
    CTL_LISTEN,
    CTL_LOG_LEVEL,
    CTL_FOREIGN_LEASE,
    CTL_FOREIGN_MANAGER,
    CTL_HELP,
};

static const cli_flag ctl_flags[] = {
    {CTL_CONFIG, "--config", 0, "FILE", "sharding config (YAML or JSON), re-read when it changes"},
    {CTL_CONFIGMAP, "--configmap", 0, "NS/NAME", "or: read it from a ConfigMap (polled every 5 s)"},
    {CTL_CONFIGMAP_KEY, "--configmap-key", 0, "KEY",
     "the ConfigMap's data key (default sharding.yaml)"},
    {CTL_KUBECONFIG, "--kubeconfig", 0, "FILE", "follow a cluster through this kubeconfig"},
    {CTL_CONTEXT, "--context", 0, "NAME", "kubeconfig context (default: current-context)"},
    {CTL_IN_CLUSTER, "--in-cluster", 0, NULL, "use the pod's service account"},
    {CTL_CLUSTER, "--cluster", 0, "FILE", "offline: a Kubernetes List of Nodes and Pods"},
    {CTL_ONCE, "--once", 0, NULL, "with --cluster: print the shards as JSON and exit"},
    {CTL_DRY_RUN, "--dry-run", 0, NULL, "live, but never write NodeShards nor take the lease"},
    {CTL_IDENTITY, "--identity", 0, "ID", "lease holder (default: $POD_NAME, else host-pid)"},
    {CTL_LEASE_NAMESPACE, "--lease-namespace", 0, "NS", "default kube-system"},
    {CTL_LEASE_NAME, "--lease-name", 0, "NAME", "default agentsched-shard-controller"},
    {CTL_LEASE_DURATION, "--lease-duration", 0, "SEC",
     "2..3600 (default 15; renew deadline 2/3 of it)"},
    {CTL_LISTEN, "--listen", 0, "HOST:PORT",
     "/metrics and /healthz (default 127.0.0.1:8889; none: off)"},
    {CTL_LOG_LEVEL, "--log-level", 0, "LEVEL",
     "error | warn | info | debug, or 0..3 (default info)"},
    {CTL_FOREIGN_LEASE, "--foreign-lease", 0, "NS/NAME",
     "another sharding controller's Lease; stand down while it is live\n"
     "and its field manager writes nodesDesired\n"
     "(default volcano-system/vc-controller-manager; none: off)"},
    {CTL_FOREIGN_MANAGER, "--foreign-field-manager", 0, "NAME",
     "that controller's field manager (default vc-controller-manager)"},
    {CTL_HELP, "--help", 'h', NULL, "show this help"},
};

static const cli_spec ctl_cli = {
    .command = "shard-controller",
    .synopsis =
        "Usage: agentsched shard-controller (--config FILE | --configmap NS/NAME)\n"
        "                                   (--kubeconfig FILE | --in-cluster)\n"
        "       agentsched shard-controller --config FILE --cluster FILE --once\n"
        "\n"
        "Computes each scheduler's NodeShard (shard.volcano.sh/v1alpha1) nodesDesired from a\n"
        "sharding config in Volcano's format (see policy/sharding.yaml) and writes them while\n"
        "holding a coordination.k8s.io/v1 Lease. The config file is re-read when it changes;\n"
        "a bad edit is logged and the previous config kept.\n"
        "\n",
    .flags = ctl_flags,
    .nflags = sizeof ctl_flags / sizeof ctl_flags[0],
};

/* --log-level: error|warn|info|debug, or 0..3 as earlier releases took. */
static int parse_log_level(const char *val)
{
    log_level lvl;
    if (log_level_parse(val, &lvl))
        return (int)lvl;
    if (val[0] >= '0' + LOG_ERROR && val[0] <= '0' + LOG_DEBUG && !val[1])
        return val[0] - '0';
    return -1;
}

static int parse_flags(ctl *x, int argc, char **argv)
{
    cli_parser p;
    cli_parser_init(&p, &ctl_cli, argc, argv);
    const cli_flag *fl = NULL;
    const char *val = NULL;
    int r;
    while ((r = cli_step(&p, &fl, &val)) == CLI_FLAG) {
        switch (fl->id) {
        case CTL_IN_CLUSTER:
            x->in_cluster = true;
            break;
        case CTL_ONCE:
            x->once = true;
            break;
        case CTL_DRY_RUN:
            x->dry_run = true;
            break;
        case CTL_CONFIG:
            x->config_path = val;
            break;
        case CTL_KUBECONFIG:
            x->kubeconfig = val;
            break;
        case CTL_CONFIGMAP: {
            const char *slash = strchr(val, '/');
            if (!slash || slash == val || !slash[1] || (size_t)(slash - val) >= sizeof x->cm_ns ||
                strlen(slash + 1) >= sizeof x->cm_name) {
                fprintf(stderr, "agentsched shard-controller: --configmap wants NAMESPACE/NAME\n");
                return CLI_EXIT_USAGE;
            }
            snprintf(x->cm_ns, sizeof x->cm_ns, "%.*s", (int)(slash - val), val);
            snprintf(x->cm_name, sizeof x->cm_name, "%s", slash + 1);
            break;
        }
        case CTL_CONFIGMAP_KEY:
            x->cm_key = val;
            break;
        case CTL_FOREIGN_LEASE: {
            if (strcmp(val, "none") == 0) {
                x->foreign_ns[0] = x->foreign_name[0] = 0;
                break;
            }
            const char *slash = strchr(val, '/');
            if (!slash || slash == val || !slash[1] ||
                (size_t)(slash - val) >= sizeof x->foreign_ns ||
                strlen(slash + 1) >= sizeof x->foreign_name || strchr(slash + 1, '/')) {
                fprintf(stderr, "agentsched shard-controller: --foreign-lease wants "
                                "NAMESPACE/NAME or none\n");
                return CLI_EXIT_USAGE;
            }
            snprintf(x->foreign_ns, sizeof x->foreign_ns, "%.*s", (int)(slash - val), val);
            snprintf(x->foreign_name, sizeof x->foreign_name, "%s", slash + 1);
            break;
        }
        case CTL_FOREIGN_MANAGER:
            if (!*val || strlen(val) >= sizeof x->owner.manager) {
                fprintf(stderr, "agentsched shard-controller: --foreign-field-manager: 1..63 "
                                "characters\n");
                return CLI_EXIT_USAGE;
            }
            x->foreign_manager = val;
            break;
        case CTL_CONTEXT:
            x->context = val;
            break;
        case CTL_CLUSTER:
            x->cluster_path = val;
            break;
        case CTL_IDENTITY:
            snprintf(x->identity, sizeof x->identity, "%s", val);
            break;
        case CTL_LEASE_NAMESPACE:
            x->lease_ns = val;
            break;
        case CTL_LEASE_NAME:
            x->lease_name = val;
            break;
        case CTL_LISTEN:
            x->listen = strcmp(val, "none") == 0 ? NULL : val;
            break;
        case CTL_LOG_LEVEL: {
            int lvl = parse_log_level(val);
            if (lvl < 0) {
                fprintf(stderr,
                        "agentsched shard-controller: --log-level: '%s' is not one of error, "
                        "warn, info, debug (or 0..3)\n",
                        val);
                return CLI_EXIT_USAGE;
            }
            log_set_level((log_level)lvl);
            break;
        }
        case CTL_LEASE_DURATION: {
            char *end = NULL;
            errno = 0;
            long v = strtol(val, &end, 10);
            if (!*val || errno || *end || v < 2 || v > 3600) {
                fprintf(stderr,
                        "agentsched shard-controller: --lease-duration: '%s' is not a whole "
                        "number of seconds in 2..3600\n",
                        val);
                return CLI_EXIT_USAGE;
            }
            x->lease_ms = v * 1000;
            break;
        }
        }
    }
    if (r != CLI_END)
        return r == CLI_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (!x->config_path == !x->cm_name[0]) {
        fprintf(stderr, "agentsched shard-controller: give one of --config FILE (e.g. "
                        "policy/sharding.yaml) or --configmap NAMESPACE/NAME\n");
        return CLI_EXIT_USAGE;
    }
    if (x->cm_name[0] && x->cluster_path) {
        fprintf(stderr, "agentsched shard-controller: --configmap needs a live cluster; use "
                        "--config with --cluster\n");
        return CLI_EXIT_USAGE;
    }
    int sources = !!x->kubeconfig + !!x->in_cluster + !!x->cluster_path;
    if (sources != 1) {
        fprintf(stderr, "agentsched shard-controller: give exactly one of --kubeconfig, "
                        "--in-cluster, --cluster\n");
        return CLI_EXIT_USAGE;
    }
    if (x->once != !!x->cluster_path) {
        fprintf(stderr, "agentsched shard-controller: --once goes with --cluster (offline)\n");
        return CLI_EXIT_USAGE;
    }
    return -1;
}

/* ---- offline ------------------------------------------------------------ */

static int run_once(ctl *x)
{
    model_cluster *mc = NULL;
    as_diag d = {0};
    as_err err = model_cluster_load(&x->reg, x->cluster_path, &mc, &d);
    if (err) {
        fprintf(stderr, "agentsched shard-controller: %s\n", d.msg[0] ? d.msg : as_strerror(err));
        return CLI_EXIT_FAIL;
    }
    for (size_t i = 0; i < mc->nnodes && !err; i++) {
        err = cache_node_upsert(x->cache, mc->nodes[i]);
        mc->nodes[i] = NULL; /* the cache owns it now, even on error */
    }
    for (size_t i = 0; i < mc->npods && !err; i++)
        err = cache_pod_upsert(x->cache, mc->pods[i]);
    model_cluster_free(mc);
    if (!err)
        err = full_resync(x);
    if (err) {
        fprintf(stderr, "agentsched shard-controller: %s\n", as_strerror(err));
        return CLI_EXIT_FAIL;
    }
    json_t *out = json_object(), *arr = json_array(), *unfit = json_array();
    cache_read_lock(x->cache);
    for (size_t i = 0; i < cache_node_count(x->cache); i++) {
        const char *nm = cache_node_at(x->cache, i)->spec->name;
        if (shardctl_engine_owner(x->eng, nm) < 0)
            json_array_append_new(unfit, json_string(nm));
    }
    cache_read_unlock(x->cache);
    for (size_t s = 0; s < x->cfg->n; s++) {
        const char **names = NULL;
        size_t n = 0;
        if (shardctl_engine_members(x->eng, s, &names, &n, NULL))
            continue;
        json_t *nd = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(nd, json_string(names[i]));
        free(names);
        json_array_append_new(
            arr, json_pack("{s:s,s:o}", "name", x->cfg->sched[s].name, "nodesDesired", nd));
    }
    shardctl_engine_stats st;
    shardctl_engine_get_stats(x->eng, &st);
    json_object_set_new(out, "shards", arr);
    json_object_set_new(out, "unassigned", unfit);
    json_object_set_new(out, "unfit", json_integer((json_int_t)st.unfit));
    json_object_set_new(out, "capped", json_integer((json_int_t)st.capped));
    char *s = json_dumps(out, JSON_INDENT(2));
    if (s)
        printf("%s\n", s);
    free(s);
    json_decref(out);
    return CLI_EXIT_OK;
}

/* ---- live --------------------------------------------------------------- */

static void config_rejected(ctl *x, as_err err, const as_diag *d)
{
    metrics_inc(x->cm.reload_failed);
    log_error("msg=\"sharding config rejected; keeping the current one\" error=\"%s\" "
              "field=%s",
              d->msg[0] ? d->msg : as_strerror(err), d->field[0] ? d->field : "-");
}

/* Swaps in a new config (takes it) with a fresh engine. */
static void config_apply(ctl *x, shardcfg_config *next, const char *source)
{
    shardctl_engine *eng = NULL;
    if (shardctl_engine_new(next, &eng)) {
        shardcfg_free(next);
        return;
    }
    shardctl_engine_free(x->eng);
    shardcfg_free(x->cfg);
    x->eng = eng;
    x->cfg = next;
    memset(x->written_ok, 0, sizeof x->written_ok);
    metrics_inc(x->cm.reload_ok);
    log_info("msg=\"sharding config loaded\" source=%s schedulers=%zu sync_period_ms=%lld", source,
             x->cfg->n, (long long)x->cfg->sync_period_ms);
    if (x->cfg->unknown[0])
        log_warn("msg=\"sharding config: unknown fields ignored (as Volcano ignores them)\" "
                 "source=%s fields=\"%s\"",
                 source, x->cfg->unknown);
    x->last_full_ms = 0; /* recompute from scratch now */
}

static void maybe_reload(ctl *x)
{
    shardcfg_config *next = NULL;
    as_diag d = {0};
    as_err err = shardcfg_reload(x->config_path, &x->stamp, &next, &d);
    if (err)
        config_rejected(x, err, &d);
    else if (next)
        config_apply(x, next, x->config_path);
}

/* --configmap: poll the object; re-parse when its resourceVersion moves. */
static void configmap_poll(ctl *x)
{
    char path[700], origin[600];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/configmaps/%s", x->cm_ns, x->cm_name);
    snprintf(origin, sizeof origin, "ConfigMap %s/%s", x->cm_ns, x->cm_name);
    buf resp;
    buf_init(&resp, SHARDCFG_CONFIG_MAX * 2);
    long code = 0;
    as_diag d = {0};
    as_err err = k8s_request(x->k, "GET", path, NULL, 0, &resp, &code, &d);
    json_t *cm = NULL;
    if (err || code != 200) {
        if (!x->cm_absent_logged)
            log_warn("msg=\"cannot read the sharding ConfigMap; keeping the current config\" "
                     "configmap=%s/%s status=%ld error=\"%s\"",
                     x->cm_ns, x->cm_name, code, err ? (d.msg[0] ? d.msg : as_strerror(err)) : "-");
        x->cm_absent_logged = true;
        goto done;
    }
    x->cm_absent_logged = false;
    if (!(cm = json_loadb(resp.data ? resp.data : "", resp.len, 0, NULL)))
        goto done;
    const char *rv =
        json_string_value(json_object_get(json_object_get(cm, "metadata"), "resourceVersion"));
    if (rv && strcmp(rv, x->cm_rv) == 0)
        goto done;
    snprintf(x->cm_rv, sizeof x->cm_rv, "%s", rv ? rv : "");
    shardcfg_config *next = NULL;
    if ((err = shardcfg_from_configmap(cm, x->cm_key, origin, &next, &d)))
        config_rejected(x, err, &d);
    else
        config_apply(x, next, origin);
done:
    json_decref(cm);
    buf_free(&resp);
}

static int run_live(ctl *x, sigset_t *sigs)
{
    k8s_config kc;
    k8s_config_defaults(&kc);
    kc.kubeconfig = x->kubeconfig;
    kc.context = x->context;
    kc.in_cluster = x->in_cluster;
    kc.scheduler_name = "agentsched-shard-controller";
    kc.watch_shards = true;
    as_diag d = {0};
    as_err err = k8s_client_new(&kc, x->cache, &x->k, &d);
    if (!err)
        err = k8s_client_start(x->k);
    if (!err && !x->dry_run) {
        k8s_lease_config lc = {.ns = x->lease_ns,
                               .name = x->lease_name,
                               .identity = x->identity,
                               .duration_ms = x->lease_ms,
                               .renew_deadline_ms = x->renew_deadline_ms};
        err = k8s_lease_new(x->k, &lc, &x->lease, &d);
    }
    if (err) {
        fprintf(stderr, "agentsched shard-controller: cannot connect: %s\n",
                d.msg[0] ? d.msg : as_strerror(err));
        return CLI_EXIT_FAIL;
    }
    if (x->listen) {
        http_server_config hc = {.listen = x->listen,
                                 .threads = 1,
                                 .routes = ctl_routes,
                                 .nroutes = sizeof ctl_routes / sizeof ctl_routes[0],
                                 .ctx = x};
        if ((err = http_server_start(&hc, &x->http, &d))) {
            fprintf(stderr, "agentsched shard-controller: cannot listen on %s: %s\n", x->listen,
                    d.msg[0] ? d.msg : as_strerror(err));
            return CLI_EXIT_FAIL;
        }
    }
    log_info("msg=\"shard controller started\" identity=%s lease=%s/%s dry_run=%d", x->identity,
             x->lease_ns, x->lease_name, x->dry_run);
    bool synced = false;
    int rc = CLI_EXIT_OK;
    for (;;) {
        __atomic_store_n(&x->loop_ms, clock_mono_ms(), __ATOMIC_RELAXED);
        struct timespec tick = {.tv_sec = 0, .tv_nsec = 200 * 1000 * 1000};
        int sig = sigtimedwait(sigs, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM) {
            log_info("msg=\"shutting down\"");
            break;
        }
        int64_t now = clock_mono_ms();
        if (x->config_path && (sig == SIGHUP || now >= x->next_reload_ms)) {
            maybe_reload(x);
            x->next_reload_ms = now + 1000;
        }
        if (x->cm_name[0] && (sig == SIGHUP || now >= x->next_cm_ms)) {
            configmap_poll(x);
            x->next_cm_ms = now + 5000;
        }
        if (!x->cfg)
            continue; /* no valid config yet */
        if (!synced) {
            if (!k8s_wait_synced(x->k, 0))
                continue;
            synced = true;
        }
        cache_stats cs;
        cache_get_stats(x->cache, &cs);
        bool full = !x->last_full_ms || now - x->last_full_ms >= x->cfg->sync_period_ms;
        if (full) {
            if ((err = full_resync(x)))
                log_error("msg=\"recompute failed\" error=%s", as_strerror(err));
            x->last_full_ms = now;
        } else if (x->cfg->node_event_trigger &&
                   (cs.node_events != x->seen_node_ev || cs.pod_events != x->seen_pod_ev)) {
            size_t changed = 0;
            if ((err = incremental(x, &changed)))
                log_error("msg=\"incremental recompute failed\" error=%s", as_strerror(err));
            if (changed)
                log_debug("msg=\"incremental recompute\" nodes_changed=%zu", changed);
        }
        x->seen_node_ev = cs.node_events;
        x->seen_pod_ev = cs.pod_events;
        update_gauges(x);
        /* Also at the renew deadline, to stop writing in time when the
         * rounds in between could not renew. */
        if (!x->dry_run && (now >= x->next_lease_ms || now > k8s_lease_deadline(x->lease))) {
            lease_step(x);
            x->next_lease_ms = now + x->retry_ms;
        }
        if (now >= x->next_foreign_ms) {
            foreign_step(x, now);
            x->next_foreign_ms = now + x->retry_ms;
        }
        if (x->foreign_ns[0] && !x->foreign_decided)
            continue; /* never write before knowing who owns the NodeShards */
        if (x->foreign)
            ; /* standing down: another controller writes them */
        else if (x->leader && !x->dry_run && now >= x->next_write_ms)
            write_shards(x, full);
        else if (x->dry_run)
            report_dry_run(x);
    }
    lease_release(x);
    return rc;
}

/* See shard_controller.h. */
int shard_controller_cli_main(int argc, char **argv)
{
    ctl x;
    memset(&x, 0, sizeof x);
    x.listen = "127.0.0.1:8889";
    x.lease_ns = "kube-system";
    x.lease_name = "agentsched-shard-controller";
    x.lease_ms = 15000;
    snprintf(x.foreign_ns, sizeof x.foreign_ns, "%s", SHARD_OWNER_VOLCANO_LEASE_NS);
    snprintf(x.foreign_name, sizeof x.foreign_name, "%s", SHARD_OWNER_VOLCANO_LEASE_NAME);
    x.foreign_manager = SHARD_OWNER_VOLCANO_MANAGER;
    int rc = parse_flags(&x, argc, argv);
    if (rc >= 0)
        return rc;
    shard_owner_init(&x.owner, x.foreign_manager);
    x.renew_deadline_ms = x.lease_ms * 2 / 3;
    x.retry_ms = x.lease_ms / 7 > 500 ? x.lease_ms / 7 : 500;
    if (!x.identity[0])
        k8s_lease_default_identity(x.identity, sizeof x.identity);

    sigset_t sigs;
    sync_block_signals(&sigs);

    as_diag d = {0};
    if (x.config_path) {
        as_err err = shardcfg_reload(x.config_path, &x.stamp, &x.cfg, &d);
        if (err || !x.cfg) {
            fprintf(stderr, "agentsched shard-controller: %s\n",
                    d.msg[0] ? d.msg : as_strerror(err));
            return CLI_EXIT_FAIL;
        }
        if (x.cfg->unknown[0])
            log_warn("msg=\"sharding config: unknown fields ignored (as Volcano ignores them)\" "
                     "source=%s fields=\"%s\"",
                     x.config_path, x.cfg->unknown);
    }
    model_registry_init(&x.reg);
    rc = CLI_EXIT_FAIL;
    if ((x.cfg && shardctl_engine_new(x.cfg, &x.eng)) || cache_new(&x.reg, &x.cache) ||
        metrics_new(&x.m))
        goto done;
    x.cm.nodes = metrics_new_gauge(x.m, "agentsched_shardctl_nodes", "Nodes the controller sees.");
    /* One HELP line per family (metrics_render takes the first series'), so
     * both series carry the family text, which says what each reason means. */
    static const char unassigned_help[] =
        "Nodes in no shard, by reason: no_fit = no scheduler's filter accepts them; "
        "capped = a filter accepts them but every such scheduler is at maxNodes.";
    x.cm.unfit = metrics_new_gauge(x.m, "agentsched_shardctl_nodes_unassigned{reason=\"no_fit\"}",
                                   unassigned_help);
    x.cm.capped = metrics_new_gauge(x.m, "agentsched_shardctl_nodes_unassigned{reason=\"capped\"}",
                                    unassigned_help);
    x.cm.leader = metrics_new_gauge(x.m, "agentsched_shardctl_leader",
                                    "1 while this replica holds the lease.");
    x.cm.recompute_incr = metrics_new_counter(
        x.m, "agentsched_shardctl_recomputes_total{kind=\"incremental\"}", "Shard recomputes.");
    x.cm.recompute_full = metrics_new_counter(
        x.m, "agentsched_shardctl_recomputes_total{kind=\"full\"}", "Shard recomputes.");
    x.cm.reload_ok = metrics_new_counter(
        x.m, "agentsched_shardctl_config_reloads_total{result=\"ok\"}", "Config reloads.");
    x.cm.reload_failed = metrics_new_counter(
        x.m, "agentsched_shardctl_config_reloads_total{result=\"rejected\"}", "Config reloads.");
    x.cm.writes_ok = metrics_new_counter(
        x.m, "agentsched_shardctl_nodeshard_writes_total{result=\"ok\"}", "NodeShard writes.");
    x.cm.writes_failed = metrics_new_counter(
        x.m, "agentsched_shardctl_nodeshard_writes_total{result=\"failed\"}", "NodeShard writes.");
    x.cm.foreign = metrics_new_gauge(
        x.m, "agentsched_shardctl_foreign_owner",
        "1 while another sharding controller (--foreign-lease) manages the NodeShards and this "
        "one writes none.");
    x.cm.stand_downs =
        metrics_new_counter(x.m, "agentsched_shardctl_stand_downs_total",
                            "Times this controller stood down for another sharding controller.");
    rc = x.once ? run_once(&x) : run_live(&x, &sigs);
done:
    if (x.http)
        http_server_stop(x.http);
    k8s_lease_free(x.lease);
    k8s_client_free(x.k);
    shardctl_engine_free(x.eng);
    shardcfg_free(x.cfg);
    shard_owner_free(&x.owner);
    cache_free(x.cache);
    metrics_free(x.m);
    model_registry_destroy(&x.reg);
    return rc;
}

/*
 * gpu_share_advertiser.c - `agentsched gpu-share-advertiser`: one worker
 * thread lists Nodes (paged), then watches them from the list's
 * resourceVersion, and for every node seen applies gpushare_decide and
 * sends the merge patch of nodes/NAME/status it asks for. A watch that
 * ends resumes from the last resourceVersion; 410 Gone, an ERROR event or
 * the resync period relists (every node is decided again). The main
 * thread waits for SIGINT/SIGTERM and stops the transport, which aborts
 * the transfer in flight.
 *
 * Writes are idempotent (the same node state always yields the same
 * patch), so two replicas only repeat each other's writes: one replica is
 * the shipped setting and there is no leader election.
 */
#include "agentsched/cmd/gpu_share_advertiser.h"

#include <assert.h>
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agentsched/base/buf.h"
#include "agentsched/base/cli.h"
#include "agentsched/base/clock.h"
#include "agentsched/base/http.h"
#include "agentsched/base/log.h"
#include "agentsched/base/metrics.h"
#include "agentsched/base/sync.h"
#include "agentsched/base/table.h"
#include "agentsched/core/cache.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/k8s/mux.h"
#include "agentsched/model/gpushare.h"
#include "agentsched/model/registry.h"

/* Memory, within the Deployment's 256 MiB limit: a list page's body (at
 * most LIST_BODY_CAP) and its jansson tree (about 4.6 times the body,
 * measured on 14 KB nodes with 50 images), or one watch line (LINE_CAP)
 * and its tree, never both; and the node table (ADV_MAX_NODES names and
 * their state). A page over the cap is asked again with half as many
 * nodes, down to one: a node is at most 1.5 MiB (etcd's request limit). */
#define LIST_BODY_CAP ((size_t)24 << 20)
#define LIST_PAGE_MAX 500
#define LINE_CAP      ((size_t)8 << 20)
#define ADV_MAX_NODES 65536

typedef struct adv_node {
    char *name;
    gpushare_state st;
    bool carries;    /* its status holds the share at devices x 1000, as last seen or written */
    uint32_t listed; /* the list (adv.list_gen) that held it last, or the watch after it */
} adv_node;

typedef struct adv {
    /* flags */
    const char *kubeconfig, *context, *listen, *gpu_name, *share_name;
    bool in_cluster, dry_run;
    int64_t resync_ms;
    /* state (the worker thread's, but for the metrics) */
    k8s_client *k;
    adv_node *nodes;
    size_t nnodes, cap;
    table index;       /* name -> index into nodes, plus one */
    uint32_t list_gen; /* lists begun */
    char rv[128];
    bool table_full_logged;
    buf line;
    bool relist;
    metrics *m;
    metrics_counter *patch_ok, *patch_failed, *relists, *stood_down, *synced, *seen, *carrying;
    http_server *http;
    int64_t beat_ms; /* (atomic) the worker's last sign of life, for /healthz */
} adv;

/* A worker without a sign of life for this long is stuck: libcurl calls
 * the watch's progress function about once a second even on a quiet
 * stream, and a list or a backoff lasts at most a minute or so. */
#define ADV_STALL_MS 300000

static void beat(adv *a)
{
    __atomic_store_n(&a->beat_ms, clock_mono_ms(), __ATOMIC_RELAXED);
}

/* ---- node table --------------------------------------------------------- */

/* The table maps a name to its node's index plus one (the array moves when
 * it grows; the names, allocated apart, do not): a relist of n nodes is n
 * probes, not n*n/2 compares. */
static adv_node *node_get(adv *a, const char *name, bool create)
{
    size_t len = strlen(name);
    uintptr_t at = (uintptr_t)table_get(&a->index, name, len);
    if (at)
        return &a->nodes[at - 1];
    if (!create)
        return NULL;
    if (a->nnodes >= ADV_MAX_NODES) {
        if (!a->table_full_logged)
            log_error("msg=\"node table full: nodes past it are not written\" nodes=%zu "
                      "node=%s",
                      a->nnodes, name);
        a->table_full_logged = true;
        return NULL;
    }
    if (a->nnodes == a->cap) {
        size_t ncap = a->cap ? a->cap * 2 : 64;
        adv_node *v = realloc(a->nodes, ncap * sizeof *v);
        if (!v)
            return NULL;
        a->nodes = v;
        a->cap = ncap;
    }
    adv_node *n = &a->nodes[a->nnodes];
    memset(n, 0, sizeof *n);
    if (!(n->name = strdup(name)))
        return NULL;
    if (table_put(&a->index, n->name, len, (void *)(uintptr_t)(a->nnodes + 1)) != AS_OK) {
        free(n->name);
        return NULL;
    }
    a->nnodes++;
    return n;
}

static void node_forget(adv *a, const char *name)
{
    uintptr_t at = (uintptr_t)table_del(&a->index, name, strlen(name));
    if (!at)
        return;
    adv_node *n = &a->nodes[at - 1];
    free(n->name);
    *n = a->nodes[--a->nnodes];
    a->table_full_logged = false; /* room again: a full table is news once more */
    if (n != &a->nodes[a->nnodes]) {
        /* The last node moved into the hole: point its entry there. */
        size_t len = strlen(n->name);
        void *was = table_del(&a->index, n->name, len);
        assert(was == (void *)(uintptr_t)(a->nnodes + 1));
        (void)was;
        /* Cannot fail: the table just had room for this entry. */
        as_err e = table_put(&a->index, n->name, len, (void *)(uintptr_t)at);
        assert(e == AS_OK);
        (void)e;
    }
}

static void update_gauges(adv *a)
{
    int64_t down = 0, carrying = 0;
    for (size_t i = 0; i < a->nnodes; i++) {
        down += a->nodes[i].st.stood_down;
        carrying += a->nodes[i].carries;
    }
    metrics_set(a->stood_down, down);
    metrics_set(a->carrying, carrying);
    metrics_set(a->seen, (int64_t)a->nnodes);
}

/* forget_unseen drops the nodes a whole list did not hold: deleted while no
 * watch was open (a 410 Gone, a dropped stream), so no DELETED event came.
 * Backwards, so the node moved into a freed slot was already kept. */
static void forget_unseen(adv *a)
{
    size_t gone = 0;
    for (size_t i = a->nnodes; i-- > 0;) {
        if (a->nodes[i].listed == a->list_gen)
            continue;
        if (gone++ < 5)
            log_info("msg=\"node gone while no watch was open; forgotten\" node=%s",
                     a->nodes[i].name);
        node_forget(a, a->nodes[i].name);
    }
    if (gone)
        log_info("msg=\"nodes missing from the list forgotten\" nodes=%zu", gone);
}

/* ---- one node ----------------------------------------------------------- */

static void patch_node(adv *a, adv_node *n, const gpushare_decision *d)
{
    const char *name = n->name;
    char *body = gpushare_patch_body(a->share_name, d);
    if (!body)
        return;
    if (a->dry_run) {
        log_info("msg=\"dry run: would patch node status\" node=%s patch=%s", name, body);
        free(body);
        return;
    }
    char *ename = curl_easy_escape(NULL, name, 0);
    char path[1024];
    snprintf(path, sizeof path, "/api/v1/nodes/%s/status", ename ? ename : name);
    curl_free(ename);
    buf resp;
    buf_init(&resp, 64 << 10);
    long code = 0;
    as_diag diag = {0};
    as_err err = k8s_mux_patch(a->k, path, "application/merge-patch+json", body, strlen(body),
                               &resp, &code, NULL, &diag);
    if (!err && code == 200) {
        gpushare_wrote(&n->st, d);
        n->carries = d->action == GPUSHARE_SET;
        metrics_inc(a->patch_ok);
        log_info("msg=\"node status patched\" node=%s devices=%lld %s=%s", name,
                 (long long)d->devices, a->share_name,
                 d->action == GPUSHARE_SET ? "set" : "removed");
    } else {
        metrics_inc(a->patch_failed);
        log_warn("msg=\"node status patch failed; retried on the next event or resync\" node=%s "
                 "status=%ld error=\"%s\" body=\"%.200s\"",
                 name, code, err ? (diag.msg[0] ? diag.msg : as_strerror(err)) : "-",
                 resp.data ? resp.data : "");
    }
    buf_free(&resp);
    free(body);
}

static void handle_node(adv *a, const json_t *obj, bool deleted)
{
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    if (!name)
        return;
    if (deleted) {
        node_forget(a, name);
        return;
    }
    adv_node *n = node_get(a, name, true);
    if (!n)
        return;
    n->listed = a->list_gen;
    gpushare_decision d;
    gpushare_decide(obj, a->gpu_name, a->share_name, &n->st, clock_mono_ms(), &d);
    /* a write that succeeds sets it again (patch_node) */
    n->carries = d.action == GPUSHARE_NOOP && d.devices > 0;
    if (d.newly_stood_down)
        log_warn("msg=\"standing down for this node: the value written was replaced %d times; "
                 "another writer (a device plugin registering %s?) owns it\" node=%s devices=%lld "
                 "found=%lld",
                 GPUSHARE_FIGHT_LIMIT, a->share_name, name, (long long)d.devices, (long long)d.cap);
    if (d.action == GPUSHARE_SET || d.action == GPUSHARE_REMOVE)
        patch_node(a, n, &d);
}

/* ---- list --------------------------------------------------------------- */

static as_err list_nodes(adv *a)
{
    char cont[1024] = "";
    as_err err = AS_OK;
    int page_limit = LIST_PAGE_MAX; /* halved for the rest of this list past the cap */
    buf resp;
    buf_init(&resp, LIST_BODY_CAP);
    metrics_inc(a->relists);
    a->list_gen++;
    bool whole = false;
    while (!k8s_stopping(a->k)) {
        char path[1400];
        snprintf(path, sizeof path, "/api/v1/nodes?limit=%d%s%s", page_limit,
                 cont[0] ? "&continue=" : "", cont);
        buf_reset(&resp);
        long code = 0;
        as_diag d = {0};
        err = k8s_request(a->k, "GET", path, NULL, 0, &resp, &code, &d);
        if (err == AS_ETOOBIG && page_limit > 1) {
            /* the same page again (same continue token), fewer nodes */
            page_limit /= 2;
            log_warn("msg=\"node list page over its cap; asking for fewer nodes a page\" "
                     "cap_bytes=%zu limit=%d",
                     (size_t)LIST_BODY_CAP, page_limit);
            continue;
        }
        if (err) {
            log_warn("msg=\"node list failed\" error=\"%s\"", d.msg[0] ? d.msg : as_strerror(err));
            break;
        }
        if (code != 200) {
            log_warn("msg=\"node list failed\" status=%ld body=\"%.200s\"", code,
                     resp.data ? resp.data : "");
            err = AS_EHTTP;
            break;
        }
        json_t *list = json_loadb(resp.data ? resp.data : "", resp.len, 0, NULL);
        if (!list) {
            err = AS_EPARSE;
            break;
        }
        const json_t *meta = json_object_get(list, "metadata");
        const char *rv = json_string_value(json_object_get(meta, "resourceVersion"));
        const char *c = json_string_value(json_object_get(meta, "continue"));
        snprintf(a->rv, sizeof a->rv, "%s", rv ? rv : "");
        char *ec = c && *c ? curl_easy_escape(NULL, c, 0) : NULL;
        snprintf(cont, sizeof cont, "%s", ec ? ec : "");
        curl_free(ec);
        size_t i;
        const json_t *item;
        json_array_foreach(json_object_get(list, "items"), i, item) handle_node(a, item, false);
        json_decref(list);
        update_gauges(a); /* once a page: a pass over the table */
        if (!cont[0]) {
            whole = true;
            break;
        }
    }
    if (whole) {
        forget_unseen(a);
        update_gauges(a);
    }
    buf_free(&resp);
    return err;
}

/* ---- watch -------------------------------------------------------------- */

static void watch_line(adv *a, const char *line, size_t len)
{
    json_t *ev = json_loadb(line, len, 0, NULL);
    if (!ev) {
        a->relist = true;
        return;
    }
    const char *type = json_string_value(json_object_get(ev, "type"));
    const json_t *obj = json_object_get(ev, "object");
    const char *rv =
        json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    if (!type || strcmp(type, "ERROR") == 0) {
        a->relist = true; /* 410 Gone and the rest: start from a list */
    } else {
        if (strcmp(type, "BOOKMARK") != 0) {
            handle_node(a, obj, strcmp(type, "DELETED") == 0);
            update_gauges(a);
        }
        if (rv)
            snprintf(a->rv, sizeof a->rv, "%s", rv);
    }
    json_decref(ev);
}

static size_t watch_write(char *ptr, size_t size, size_t nmemb, void *ud)
{
    adv *a = ud;
    size_t n = size * nmemb;
    for (size_t i = 0; i < n; i++) {
        if (ptr[i] != '\n') {
            if (buf_append(&a->line, &ptr[i], 1))
                return 0; /* too long: abort and relist */
            continue;
        }
        if (a->line.len)
            watch_line(a, a->line.data, a->line.len);
        buf_reset(&a->line);
    }
    return a->relist ? 0 : n;
}

static int watch_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    adv *a = ud;
    beat(a);
    return k8s_stopping(a->k) ? 1 : 0;
}

/* One watch from a->rv until the server ends it (timeoutSeconds). */
static as_err watch_nodes(adv *a, long timeout_s)
{
    char path[400];
    snprintf(path, sizeof path,
             "/api/v1/nodes?watch=true&allowWatchBookmarks=true&resourceVersion=%s"
             "&timeoutSeconds=%ld",
             a->rv, timeout_s);
    char *url = k8s_url(a->k, path);
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = NULL;
    as_err err = AS_ENOMEM;
    if (!url || !h)
        goto done;
    if (!k8s_rl_wait(a->k)) {
        err = AS_EIO;
        goto done;
    }
    if ((err = k8s_easy_prepare(a->k, h, url, false, &hdrs)))
        goto done;
    /* the prepared request timeout would cut a long watch short */
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_s + 30) * 1000L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, watch_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, watch_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, a);
    buf_reset(&a->line);
    CURLcode cc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    if (code == 401)
        k8s_token_invalidate(a->k);
    if (code != 200)
        a->relist = true;
    err = cc == CURLE_OK && code == 200 ? AS_OK : AS_EIO;
done:
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    free(url);
    return err;
}

static void *worker_main(void *arg)
{
    adv *a = arg;
    uint64_t rng = 0;
    unsigned attempt = 0;
    int64_t next_list = 0;
    while (!k8s_stopping(a->k)) {
        beat(a);
        int64_t now = clock_mono_ms();
        if (a->relist || !a->rv[0] || now >= next_list) {
            a->relist = false;
            if (list_nodes(a)) {
                a->rv[0] = 0;
                if (!k8s_sleep_ms(a->k, k8s_backoff_ms(500, 30000, attempt++, &rng)))
                    break;
                continue;
            }
            attempt = 0;
            metrics_set(a->synced, 1);
            next_list = clock_mono_ms() + a->resync_ms;
        }
        long left_s = (long)((next_list - clock_mono_ms()) / 1000);
        if (left_s < 1)
            left_s = 1;
        if (watch_nodes(a, left_s) && !k8s_stopping(a->k)) {
            if (!k8s_sleep_ms(a->k, k8s_backoff_ms(500, 30000, attempt++, &rng)))
                break;
        } else {
            attempt = 0;
        }
    }
    return NULL;
}

/* ---- HTTP: /metrics, /healthz ------------------------------------------ */

static void h_metrics(void *ctx, const http_request *req, http_response *resp)
{
    (void)req;
    adv *a = ctx;
    resp->content_type = "text/plain; version=0.0.4";
    if (metrics_render(a->m, &resp->body))
        resp->status = 500;
}

static void h_healthz(void *ctx, const http_request *req, http_response *resp)
{
    (void)req;
    adv *a = ctx;
    resp->content_type = "text/plain";
    if (http_stalled(resp, __atomic_load_n(&a->beat_ms, __ATOMIC_RELAXED), ADV_STALL_MS,
                     "the node watch"))
        return;
    buf_puts(&resp->body, "ok\n");
}

static const http_route adv_routes[] = {
    {"GET", "/metrics", h_metrics, false, NULL, false, false},
    {"GET", "/healthz", h_healthz, false, NULL, false, false},
};

/* ---- flags -------------------------------------------------------------- */

enum {
    ADV_KUBECONFIG,
    ADV_CONTEXT,
    ADV_IN_CLUSTER,
    ADV_GPU_RESOURCE,
    ADV_SHARE_RESOURCE,
    ADV_RESYNC,
    ADV_DRY_RUN,
    ADV_LISTEN,
    ADV_LOG_LEVEL,
    ADV_HELP,
};

static const cli_flag adv_flags[] = {
    {ADV_KUBECONFIG, "--kubeconfig", 0, "FILE", "follow a cluster through this kubeconfig"},
    {ADV_CONTEXT, "--context", 0, "NAME", "kubeconfig context (default: current-context)"},
    {ADV_IN_CLUSTER, "--in-cluster", 0, NULL, "use the pod's service account"},
    {ADV_GPU_RESOURCE, "--gpu-resource", 0, "NAME",
     "the device resource counted (default nvidia.com/gpu)"},
    {ADV_SHARE_RESOURCE, "--share-resource", 0, "NAME",
     "the share resource written (default agentsched.io/gpu-milli)"},
    {ADV_RESYNC, "--resync", 0, "SEC", "relist and decide every node again (default 300)"},
    {ADV_DRY_RUN, "--dry-run", 0, NULL, "log the patches instead of sending them"},
    {ADV_LISTEN, "--listen", 0, "HOST:PORT",
     "/metrics and /healthz (default 127.0.0.1:8890; none: off)"},
    {ADV_LOG_LEVEL, "--log-level", 0, "LEVEL", "error | warn | info | debug (default info)"},
    {ADV_HELP, "--help", 'h', NULL, "show this help"},
};

static const cli_spec adv_cli = {
    .command = "gpu-share-advertiser",
    .synopsis =
        "Usage: agentsched gpu-share-advertiser (--kubeconfig FILE | --in-cluster)\n"
        "\n"
        "Lists and watches Nodes and keeps the share resource (agentsched.io/gpu-milli) in\n"
        "every GPU node's status.capacity and status.allocatable equal to its devices\n"
        "(allocatable nvidia.com/gpu) x 1000, removing it from nodes without devices, with\n"
        "merge patches of nodes/NAME/status. A node annotated\n"
        "agentsched.io/gpu-share-advertiser=off is never written; on a node where another\n"
        "writer (a device plugin registering the same name) replaces the value 3 times in\n"
        "10 minutes it stands down until the node's device count changes. Needs nodes\n"
        "get/list/watch and nodes/status patch. Writes are idempotent: run one replica.\n"
        "\n",
    .flags = adv_flags,
    .nflags = sizeof adv_flags / sizeof adv_flags[0],
};

static int parse_flags(adv *a, int argc, char **argv)
{
    cli_parser p;
    cli_parser_init(&p, &adv_cli, argc, argv);
    const cli_flag *fl = NULL;
    const char *val = NULL;
    int r;
    while ((r = cli_step(&p, &fl, &val)) == CLI_FLAG) {
        switch (fl->id) {
        case ADV_KUBECONFIG:
            a->kubeconfig = val;
            break;
        case ADV_CONTEXT:
            a->context = val;
            break;
        case ADV_IN_CLUSTER:
            a->in_cluster = true;
            break;
        case ADV_GPU_RESOURCE:
            a->gpu_name = val;
            break;
        case ADV_SHARE_RESOURCE:
            a->share_name = val;
            break;
        case ADV_DRY_RUN:
            a->dry_run = true;
            break;
        case ADV_LISTEN:
            a->listen = strcmp(val, "none") == 0 ? NULL : val;
            break;
        case ADV_LOG_LEVEL: {
            log_level lvl;
            if (!log_level_parse(val, &lvl)) {
                fprintf(stderr,
                        "agentsched gpu-share-advertiser: --log-level: '%s' is not one "
                        "of error, warn, info, debug\n",
                        val);
                return CLI_EXIT_USAGE;
            }
            log_set_level(lvl);
            break;
        }
        case ADV_RESYNC: {
            char *end = NULL;
            errno = 0;
            long v = strtol(val, &end, 10);
            if (!*val || errno || *end || v < 5 || v > 86400) {
                fprintf(stderr,
                        "agentsched gpu-share-advertiser: --resync: '%s' is not a whole "
                        "number of seconds in 5..86400\n",
                        val);
                return CLI_EXIT_USAGE;
            }
            a->resync_ms = v * 1000;
            break;
        }
        }
    }
    if (r != CLI_END)
        return r == CLI_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (!!a->kubeconfig + !!a->in_cluster != 1) {
        fprintf(
            stderr,
            "agentsched gpu-share-advertiser: give exactly one of --kubeconfig, --in-cluster\n");
        return CLI_EXIT_USAGE;
    }
    if (strcmp(a->gpu_name, a->share_name) == 0) {
        fprintf(stderr, "agentsched gpu-share-advertiser: --gpu-resource and --share-resource "
                        "must differ\n");
        return CLI_EXIT_USAGE;
    }
    return -1;
}

/* See gpu_share_advertiser.h. */
int gpu_share_advertiser_cli_main(int argc, char **argv)
{
    adv a;
    memset(&a, 0, sizeof a);
    a.listen = "127.0.0.1:8890";
    a.gpu_name = "nvidia.com/gpu";
    a.share_name = "agentsched.io/gpu-milli";
    a.resync_ms = 300 * 1000;
    int rc = parse_flags(&a, argc, argv);
    if (rc >= 0)
        return rc;
    sigset_t sigs;
    sync_block_signals(&sigs);
    model_registry reg;
    model_registry_init(&reg);
    cache *c = NULL;
    pthread_t worker;
    bool started = false;
    rc = CLI_EXIT_FAIL;
    buf_init(&a.line, LINE_CAP);
    if (cache_new(&reg, &c) || metrics_new(&a.m))
        goto done;
    a.patch_ok = metrics_new_counter(a.m, "agentsched_gpushare_patches_total{result=\"ok\"}",
                                     "Node status patches sent.");
    a.patch_failed = metrics_new_counter(
        a.m, "agentsched_gpushare_patches_total{result=\"failed\"}", "Node status patches sent.");
    a.relists = metrics_new_counter(a.m, "agentsched_gpushare_lists_total", "Full node lists.");
    a.stood_down = metrics_new_gauge(a.m, "agentsched_gpushare_nodes_stood_down",
                                     "Nodes where another writer owns the share resource.");
    a.synced = metrics_new_gauge(a.m, "agentsched_gpushare_synced", "1 after the first list.");
    a.seen = metrics_new_gauge(a.m, "agentsched_gpushare_nodes", "Nodes seen.");
    a.carrying =
        metrics_new_gauge(a.m, "agentsched_gpushare_nodes_advertised",
                          "Nodes whose status carries the share resource at their devices x 1000 "
                          "(not counting nodes opted out or stood down for).");
    k8s_config kc;
    k8s_config_defaults(&kc);
    kc.kubeconfig = a.kubeconfig;
    kc.context = a.context;
    kc.in_cluster = a.in_cluster;
    kc.scheduler_name = "agentsched-gpu-share-advertiser";
    kc.watch_shards = false;
    kc.qps = 20;
    kc.burst = 40;
    as_diag d = {0};
    if (k8s_client_new(&kc, c, &a.k, &d)) {
        fprintf(stderr, "agentsched gpu-share-advertiser: cannot connect: %s\n",
                d.msg[0] ? d.msg : "error");
        goto done;
    }
    if (a.listen) {
        http_server_config hc = {.listen = a.listen,
                                 .threads = 1,
                                 .routes = adv_routes,
                                 .nroutes = sizeof adv_routes / sizeof adv_routes[0],
                                 .ctx = &a};
        if (http_server_start(&hc, &a.http, &d)) {
            fprintf(stderr, "agentsched gpu-share-advertiser: cannot listen on %s: %s\n", a.listen,
                    d.msg[0] ? d.msg : "error");
            goto done;
        }
    }
    if (pthread_create(&worker, NULL, worker_main, &a) != 0)
        goto done;
    started = true;
    log_info("msg=\"gpu share advertiser started\" gpu_resource=%s share_resource=%s dry_run=%d",
             a.gpu_name, a.share_name, a.dry_run);
    for (;;) {
        int sig = sigwaitinfo(&sigs, NULL);
        if (sig == SIGINT || sig == SIGTERM)
            break;
    }
    log_info("msg=\"shutting down\"");
    rc = CLI_EXIT_OK;
done:
    if (a.k)
        k8s_transport_stop(a.k);
    if (started)
        pthread_join(worker, NULL);
    if (a.http)
        http_server_stop(a.http);
    k8s_client_free(a.k);
    for (size_t i = 0; i < a.nnodes; i++)
        free(a.nodes[i].name);
    free(a.nodes);
    table_free(&a.index);
    buf_free(&a.line);
    cache_free(c);
    metrics_free(a.m);
    model_registry_destroy(&reg);
    return rc;
}

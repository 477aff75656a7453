/*
 * volcano.c - the Volcano extender verbs. The wire contract (bodies,
 * answers, status codes) is written down in volcano.h.
 */
#include "agentsched/api/volcano.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "agentsched/api/vcsession.h"
#include "agentsched/api/vctask.h"
#include "agentsched/core/binder.h"
#include "agentsched/core/cache.h"
#include "agentsched/base/clock.h"
#include "agentsched/base/hash.h"
#include "agentsched/base/table.h"
#include "agentsched/base/json.h"
#include "agentsched/base/utf8.h"
#include "agentsched/base/log.h"
#include "agentsched/core/pred.h"
#include "agentsched/core/sched.h"
#include "agentsched/core/score.h"

/* nodes one predicate or prioritize may name: the extender's cap
 * (MAX_NODES), for the same scheduling work per request */
#define MAX_NODES 65536

/* ------------------------------------------------------------------ */
/* Replies                                                             */
/* ------------------------------------------------------------------ */

/* The verb's own error field, added to the 4xx/5xx body. */
typedef enum errf {
    ERRF_NONE = 0,
    ERRF_STATUS, /* predicate: "status" (+ "code": 1) */
    ERRF_ERRMSG, /* prioritize, allocateFunc, deallocateFunc: "errorMessage" */
} errf;

static void reply_error(http_response *resp, int status, errf kind, const as_diag *d, as_err err)
{
    const char *msg = http_error_begin(resp, status, d, err);
    buf *o = &resp->body;
    if (kind == ERRF_STATUS) {
        buf_puts(o, ",\"status\":");
        buf_json_cstr(o, msg);
        buf_printf(o, ",\"code\":%d", VOLCANO_CODE_ERROR);
    } else if (kind == ERRF_ERRMSG) {
        buf_puts(o, ",\"errorMessage\":");
        buf_json_cstr(o, msg);
    }
    buf_puts(o, "}");
}

/* reply_json answers 200 with a fixed body (or 500 if even that fails). */
static void reply_json(http_response *resp, errf kind, const char *body)
{
    buf_reset(&resp->body);
    buf_puts(&resp->body, body);
    if (resp->body.err) {
        as_diag d;
        as_diag_set(&d, resp->body.err, NULL, "the response does not fit its buffer");
        reply_error(resp, 500, kind, &d, resp->body.err);
        return;
    }
    resp->status = 200;
    resp->content_type = "application/json";
}

/* finish checks a response built in resp->body and turns buffer overflow
 * into a 500. */
static void finish(http_response *resp, errf kind)
{
    if (resp->body.err) {
        as_err err = resp->body.err;
        as_diag d;
        as_diag_set(&d, err, NULL, "the response does not fit its buffer (%s)", as_strerror(err));
        reply_error(resp, 500, kind, &d, err);
        return;
    }
    resp->status = 200;
    resp->content_type = "application/json";
}

/* ------------------------------------------------------------------ */
/* State: the pods the verbs may act on, the verb's own allocations     */
/* ------------------------------------------------------------------ */

/* The refusal rules of volcano.h AUTHORIZATION, one counter per verb. */
typedef enum vrule {
    VRULE_UNKNOWN_POD = 0,
    VRULE_SCHEDULER_NAME,
    VRULE_NOT_ALLOCATED,
    VRULE_COUNT,
} vrule;

static const char *const vrule_names[VRULE_COUNT] = {"unknown_pod", "scheduler_name",
                                                     "not_allocated"};

/* What the verbs answered, one counter each (refusals with 403 are
 * counted by rule above). */
typedef enum vout {
    VOUT_PRED_FIT = 0,
    VOUT_PRED_UNSCHEDULABLE,
    VOUT_PRED_UNRESOLVABLE,
    VOUT_PRIORITIZE_SCORED,
    VOUT_ALLOC_ASSUMED,
    VOUT_ALLOC_REFUSED,
    VOUT_ALLOC_PIPELINED,
    VOUT_DEALLOC_FORGOTTEN,
    VOUT_DEALLOC_NOOP,
    VOUT_COUNT,
} vout;

static const char *const vout_series[VOUT_COUNT][2] = {
    {"predicate", "fit"},          {"predicate", "unschedulable"},  {"predicate", "unresolvable"},
    {"prioritize", "scored"},      {"allocateFunc", "assumed"},     {"allocateFunc", "refused"},
    {"allocateFunc", "pipelined"}, {"deallocateFunc", "forgotten"}, {"deallocateFunc", "noop"},
};

/* The verbs, for the request-size counters. */
typedef enum vverb {
    VV_ON_SESSION_OPEN = 0,
    VV_ON_SESSION_CLOSE,
    VV_PREDICATE,
    VV_PRIORITIZE,
    VV_PREEMPTABLE,
    VV_RECLAIMABLE,
    VV_JOB_ENQUEUEABLE,
    VV_JOB_ENQUEUED,
    VV_QUEUE_OVERUSED,
    VV_JOB_READY,
    VV_ALLOCATE,
    VV_DEALLOCATE,
    VV_COUNT,
} vverb;

static const char *const vverb_names[VV_COUNT] = {
    "onSessionOpen", "onSessionClose", "predicate",      "prioritize",
    "preemptable",   "reclaimable",    "jobEnqueueable", "jobEnqueued",
    "queueOverused", "jobReady",       "allocateFunc",   "deallocateFunc",
};

/* A pod the watch or the cluster file knows; its key (uid, else
 * namespace/name) is stored inline. */
typedef struct vpod {
    uint64_t epoch; /* the relist that saw it last */
    bool volcano;   /* its schedulerName is one of Volcano's */
    char key[];
} vpod;

/* An allocation made through allocateFunc. */
typedef struct vgrant {
    int64_t at_ms;
    char key[];
} vgrant;

struct volcano {
    core *core; /* borrowed */
    volcano_config cfg;
    pthread_mutex_t mu; /* guards everything below */
    table pods;         /* key -> vpod */
    table allocated;    /* key -> vgrant */
    int64_t oldest_ms;  /* at most the oldest grant's at_ms: no sweep before it expires */
    uint64_t epoch;
    bool pods_full_logged;
    metrics_counter *refused[2][VRULE_COUNT]; /* [0] allocateFunc, [1] deallocateFunc */
    metrics_counter *answered[VOUT_COUNT];
    metrics_counter *req_bytes[VV_COUNT]; /* request body bytes received, by verb */
    vctask_memo *memo;                    /* predicate / prioritize: decoded task Pods */
    metrics_counter *pod_memo[3];         /* hit, miss, dom */
    metrics_counter *node_memo[2];        /* NodeInfos stepped over, scanned */
};

/* See volcano.h. */
as_err volcano_new(core *c, const volcano_config *cfg, volcano **out)
{
    *out = NULL;
    volcano *v = calloc(1, sizeof *v);
    if (!v)
        return AS_ENOMEM;
    v->core = c;
    if (cfg)
        v->cfg = *cfg;
    if (v->cfg.assumed_ttl_ms <= 0)
        v->cfg.assumed_ttl_ms = VOLCANO_DEFAULT_TTL_MS;
    if (!v->cfg.max_pods)
        v->cfg.max_pods = VOLCANO_MAX_PODS;
    if (!v->cfg.max_allocated)
        v->cfg.max_allocated = VOLCANO_MAX_ALLOCATED;
    pthread_mutex_init(&v->mu, NULL);
    static const char *const verbs[2] = {"allocateFunc", "deallocateFunc"};
    for (int i = 0; i < 2; i++)
        for (int r = 0; r < VRULE_COUNT; r++) {
            char name[128];
            snprintf(name, sizeof name, "agentsched_volcano_refused_total{verb=\"%s\",rule=\"%s\"}",
                     verbs[i], vrule_names[r]);
            v->refused[i][r] = metrics_new_counter(
                c->metrics, name,
                "Volcano allocate/deallocate events refused (HTTP 403), by rule.");
        }
    for (int o = 0; o < VOUT_COUNT; o++) {
        char name[128];
        snprintf(name, sizeof name, "agentsched_volcano_answers_total{verb=\"%s\",result=\"%s\"}",
                 vout_series[o][0], vout_series[o][1]);
        v->answered[o] = metrics_new_counter(
            c->metrics, name, "Volcano verbs answered with 200, by verb and verdict.");
    }
    metrics_new_counters(c->metrics, "agentsched_volcano_request_bytes_total", "verb", vverb_names,
                         VV_COUNT, "Request body bytes received on the Volcano verbs, by verb.",
                         v->req_bytes);
    static const char *const memo_res[3] = {"hit", "miss", "dom"};
    metrics_new_counters(
        c->metrics, "agentsched_volcano_pod_memo_total", "result", memo_res, 3,
        "Task Pods of Volcano's predicate and prioritize: from the memo (hit), decoded from "
        "the scanned body (miss), or from the whole body's DOM (dom).",
        v->pod_memo);
    static const char *const node_res[2] = {"stepped", "scanned"};
    metrics_new_counters(
        c->metrics, "agentsched_volcano_node_memo_total", "result", node_res, 2,
        "NodeInfos in Volcano's predicate and prioritize bodies: stepped over as seen before "
        "(stepped) or scanned.",
        v->node_memo);
    if (vctask_memo_new(&v->memo) != AS_OK) {
        volcano_free(v);
        return AS_ENOMEM;
    }
    *out = v;
    return AS_OK;
}

/* count_nodes counts how a body's scan took its NodeInfos. */
static void count_nodes(volcano *v, const vctask_seen *seen)
{
    metrics_add(v->node_memo[0], seen->stepped);
    metrics_add(v->node_memo[1], seen->scanned);
}

/* count_request adds the request's body size to its verb's counter. */
static void count_request(volcano *v, vverb verb, const http_request *req)
{
    if (v)
        metrics_add(v->req_bytes[verb], req->body_len);
}

static void free_values(table *t)
{
    for (size_t i = 0; i < t->cap; i++)
        if (t->t[i].k)
            free(t->t[i].v);
    table_free(t);
}

/* See volcano.h. */
void volcano_free(volcano *v)
{
    if (!v)
        return;
    free_values(&v->pods);
    free_values(&v->allocated);
    vctask_memo_free(v->memo);
    pthread_mutex_destroy(&v->mu);
    free(v);
}

/* See volcano.h. */
void volcano_pod_seen(volcano *v, const model_pod *pod, bool deleted)
{
    char tmp[600];
    size_t len = 0;
    const char *key = model_pod_key(pod, tmp, sizeof tmp, &len);
    bool is_volcano = core_name_listed(v->core->volcano_names, pod->scheduler_name);
    pthread_mutex_lock(&v->mu);
    vpod *e = table_get(&v->pods, key, len);
    if (deleted) {
        if (e)
            free(table_del(&v->pods, key, len));
        free(table_del(&v->allocated, key, len)); /* the cache released it */
    } else if (e) {
        e->epoch = v->epoch;
        e->volcano = is_volcano;
    } else if (v->pods.n >= v->cfg.max_pods) {
        if (!v->pods_full_logged)
            log_warn("msg=\"volcano pod index full: further pods are unknown to allocateFunc\" "
                     "max=%zu",
                     v->cfg.max_pods);
        v->pods_full_logged = true;
    } else if ((e = malloc(sizeof *e + len + 1))) {
        e->epoch = v->epoch;
        e->volcano = is_volcano;
        memcpy(e->key, key, len);
        e->key[len] = '\0';
        if (table_put(&v->pods, e->key, len, e) != AS_OK)
            free(e);
    }
    pthread_mutex_unlock(&v->mu);
}

/* See volcano.h. */
void volcano_resync_begin(volcano *v)
{
    pthread_mutex_lock(&v->mu);
    v->epoch++;
    pthread_mutex_unlock(&v->mu);
}

/* See volcano.h. */
void volcano_resync_end(volcano *v)
{
    pthread_mutex_lock(&v->mu);
    /* deleting shifts entries back into visited slots: rescan the slot */
    for (size_t i = 0; i < v->pods.cap;) {
        vpod *e = v->pods.t[i].k ? v->pods.t[i].v : NULL;
        if (e && e->epoch != v->epoch) {
            table_del(&v->pods, e->key, strlen(e->key));
            free(e);
            continue;
        }
        i++;
    }
    pthread_mutex_unlock(&v->mu);
}

/* See volcano.h. */
size_t volcano_expire(volcano *v, int64_t now_ms)
{
    size_t n = 0;
    bool live = core_live(v->core);
    pthread_mutex_lock(&v->mu);
    /* every verb calls this: the table is walked only when a grant is due */
    if (!v->allocated.n || v->oldest_ms > now_ms - v->cfg.assumed_ttl_ms) {
        pthread_mutex_unlock(&v->mu);
        return 0;
    }
    int64_t oldest = INT64_MAX;
    for (size_t i = 0; i < v->allocated.cap;) {
        vgrant *a = v->allocated.t[i].k ? v->allocated.t[i].v : NULL;
        if (a && a->at_ms <= now_ms - v->cfg.assumed_ttl_ms) {
            /* embedded mode has no watch to confirm or expire it; a BOUND
             * pod (the cluster file's) is left alone by cache_forget */
            if (!live)
                cache_forget(v->core->cache, a->key);
            table_del(&v->allocated, a->key, strlen(a->key));
            free(a);
            n++;
            continue;
        }
        if (a && a->at_ms < oldest)
            oldest = a->at_ms;
        i++;
    }
    v->oldest_ms = oldest;
    pthread_mutex_unlock(&v->mu);
    if (n)
        log_info("msg=\"volcano allocations expired\" n=%zu ttl_ms=%lld", n,
                 (long long)v->cfg.assumed_ttl_ms);
    return n;
}

/* pod_rule: which rule refuses the verb for key, or VRULE_COUNT when the
 * pod is known and Volcano's. */
static vrule pod_rule(volcano *v, const char *key)
{
    pthread_mutex_lock(&v->mu);
    vpod *e = table_get(&v->pods, key, strlen(key));
    vrule r = !e ? VRULE_UNKNOWN_POD : e->volcano ? VRULE_COUNT : VRULE_SCHEDULER_NAME;
    pthread_mutex_unlock(&v->mu);
    return r;
}

/* allocated_has: true when key was allocated through the verb. */
static bool allocated_has(volcano *v, const char *key)
{
    pthread_mutex_lock(&v->mu);
    bool has = table_get(&v->allocated, key, strlen(key)) != NULL;
    pthread_mutex_unlock(&v->mu);
    return has;
}

/* allocated_put records (or refreshes) key; AS_ELIMIT when the set is full. */
static as_err allocated_put(volcano *v, const char *key)
{
    size_t len = strlen(key);
    as_err err = AS_OK;
    pthread_mutex_lock(&v->mu);
    vgrant *a = table_get(&v->allocated, key, len);
    if (a) {
        a->at_ms = clock_mono_ms();
    } else if (v->allocated.n >= v->cfg.max_allocated) {
        err = AS_ELIMIT;
    } else if (!(a = malloc(sizeof *a + len + 1))) {
        err = AS_ENOMEM;
    } else {
        a->at_ms = clock_mono_ms();
        memcpy(a->key, key, len + 1);
        /* a grant is never older than those it joins */
        if (!v->allocated.n)
            v->oldest_ms = a->at_ms;
        if ((err = table_put(&v->allocated, a->key, len, a)))
            free(a);
    }
    pthread_mutex_unlock(&v->mu);
    return err;
}

static void allocated_del(volcano *v, const char *key)
{
    pthread_mutex_lock(&v->mu);
    free(table_del(&v->allocated, key, strlen(key)));
    pthread_mutex_unlock(&v->mu);
}

/* refuse answers a refused event: 403 {"error", "field", "errorMessage"}
 * (Volcano fails the event unless ignorable), counted and logged with the
 * caller. verb 0 = allocateFunc, 1 = deallocateFunc. */
static void refuse(volcano *v, const http_request *req, http_response *resp, int verb, vrule r,
                   const model_pod *pod, const char *what)
{
    as_diag d;
    as_diag_set(&d, AS_EAUTH, "task", "agentsched refused to %s pod %s/%s: %s",
                verb ? "deallocate" : "allocate", pod->ns, pod->name, what);
    reply_error(resp, 403, ERRF_ERRMSG, &d, AS_EAUTH);
    metrics_inc(v->refused[verb][r]);
    log_warn("msg=\"volcano %s refused\" rule=%s pod=%s/%s uid=%s caller=%s",
             verb ? "deallocateFunc" : "allocateFunc", vrule_names[r], pod->ns, pod->name,
             pod->uid ? pod->uid : "", req->remote && req->remote[0] ? req->remote : "-");
}

/* authorize applies the pod rules to an event's pod: false when refused
 * (answered). */
static bool authorize(volcano *v, const http_request *req, http_response *resp, int verb,
                      const model_pod *pod, const char *key)
{
    vrule r = pod_rule(v, key);
    if (r == VRULE_UNKNOWN_POD) {
        refuse(v, req, resp, verb, r, pod,
               core_live(v->core)
                   ? "agentsched's pod watch does not know it (it does not exist, or the watch "
                     "has not delivered it yet: Volcano retries in its next session)"
                   : "the cluster file has no such pod");
        return false;
    }
    if (r == VRULE_SCHEDULER_NAME) {
        char what[1200];
        snprintf(what, sizeof what,
                 "its schedulerName is not one of Volcano's (--volcano-scheduler-names %s)",
                 v->core->volcano_names);
        refuse(v, req, resp, verb, r, pod, what);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------------ */
/* Decoding                                                            */
/* ------------------------------------------------------------------ */

/* parse_object builds the body into a DOM that must be a JSON object. */
static as_err parse_object(const http_request *req, const char *what, json_t **out, as_diag *d)
{
    *out = NULL;
    as_err err = json_parse(req->body, req->body_len, out, d);
    if (err)
        return err;
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return as_diag_set(d, AS_EINVAL, "", "the body must be a JSON object (Volcano's %s)", what);
    }
    return AS_OK;
}

/* get_object returns member key of root; required: absent or null is an
 * error; a non-object is always one. *out NULL when absent and optional. */
static as_err get_object(const json_t *root, const char *key, bool required, const char *what,
                         const json_t **out, as_diag *d)
{
    const json_t *v = json_get(root, key);
    *out = NULL;
    if (!v || json_is_null(v)) {
        if (required)
            return as_diag_set(d, AS_EINVAL, key, "%s is required: send Volcano's %s", key, what);
        return AS_OK;
    }
    if (!json_is_object(v))
        return as_diag_set(d, AS_EINVAL, key, "%s must be an object (Volcano's %s)", key, what);
    *out = v;
    return AS_OK;
}

/* pod_key is the cache's key of pod: its uid, else "namespace/name". */
static const char *pod_key(const model_pod *pod, char *tmp, size_t len)
{
    if (pod->uid && pod->uid[0])
        return pod->uid;
    snprintf(tmp, len, "%s/%s", pod->ns, pod->name);
    return tmp;
}

/* ------------------------------------------------------------------ */
/* onSessionOpen / onSessionClose                                      */
/* ------------------------------------------------------------------ */

/* See volcano.h. */
void volcano_handle_on_session_open(void *ctx, const http_request *req, http_response *resp)
{
    volcano *v = ctx;
    count_request(v, VV_ON_SESSION_OPEN, req);
    core *co = v->core;
    volcano_expire(v, clock_mono_ms());
    as_diag d;
    memset(&d, 0, sizeof d);
    vcsession_stats st;
    as_err err = vcsession_scan(co->cache, req->body, req->body_len, &st, &d);
    if (err) {
        reply_error(resp, http_status_for_decode_err(err), ERRF_NONE, &d, err);
        return;
    }
    if (st.unknown_nodes)
        log_warn("msg=\"volcano session has nodes agentsched does not know\" nodes=%zu "
                 "unknown=%zu first=%s",
                 st.nodes, st.unknown_nodes, st.first_unknown);
    else
        log_debug("msg=\"volcano session open\" jobs=%zu nodes=%zu", st.jobs, st.nodes);
    buf_reset(&resp->body);
    buf_printf(&resp->body, "{\"jobs\":%zu,\"nodes\":%zu,\"unknownNodes\":%zu}", st.jobs, st.nodes,
               st.unknown_nodes);
    finish(resp, ERRF_NONE);
}

/* check_body answers 400 unless the body is a JSON object whose `key` (if
 * any) is an object; returns true when it answered. */
static bool check_body(const http_request *req, http_response *resp, const char *what,
                       const char *key)
{
    as_diag d;
    memset(&d, 0, sizeof d);
    json_t *root = NULL;
    const json_t *v;
    as_err err = parse_object(req, what, &root, &d);
    if (!err && key)
        err = get_object(root, key, true, what, &v, &d);
    json_decref(root);
    if (err)
        reply_error(resp, http_status_for_decode_err(err), ERRF_NONE, &d, err);
    return err != AS_OK;
}

/* See volcano.h. */
void volcano_handle_on_session_close(void *ctx, const http_request *req, http_response *resp)
{
    count_request(ctx, VV_ON_SESSION_CLOSE, req);
    if (!check_body(req, resp, "OnSessionCloseRequest", NULL))
        reply_json(resp, ERRF_NONE, "{}");
}

/* ------------------------------------------------------------------ */
/* predicate / prioritize                                              */
/* ------------------------------------------------------------------ */

/* task_pod is the model pod a fast scan found (vctask_pod), counted;
 * false when the caller must take the DOM path. */
static bool task_pod(volcano *v, const vctask_pod_span *sp, const model_pod **pod, vctask_ent **ent)
{
    bool hit;
    if (vctask_pod(v->memo, &v->core->reg, sp, pod, ent, &hit) != AS_OK)
        return false;
    metrics_inc(v->pod_memo[hit ? 0 : 1]);
    return true;
}

/* The task a predicate or prioritize call asks about: its Pod lent by
 * the memo (ent) or decoded from the body's DOM (root, owned). */
typedef struct task_call {
    volcano *v;
    json_t *root;
    model_pod *owned;
    const model_pod *pod; /* ent's or owned */
    vctask_ent *ent;
} task_call;

/* task_call_begin counts the call's bytes and expires stale allocations:
 * what every task verb does first. */
static task_call task_call_begin(volcano *v, vverb verb, const http_request *req)
{
    count_request(v, verb, req);
    volcano_expire(v, clock_mono_ms());
    return (task_call){.v = v};
}

/* task_call_end gives back what the call held. */
static void task_call_end(task_call *t)
{
    vctask_put(t->v->memo, t->ent);
    model_pod_free(t->owned);
    json_decref(t->root);
}

/* volcano_pred_code is the code a predicate failure is answered with.
 * A request above what the node has at all (PRED_EXCEEDS, _GPU: a GPU
 * share on a CPU-only node) is upstream's Unresolvable and goes to
 * kube-scheduler so, but Volcano gets code 2: its preempt and reclaim stop
 * asking once they hold enough nodes that are not code 3 (vc-scheduler's
 * nodes to find: 428 of 1,000), so code 3 on every CPU-only node made them
 * ask about every node, every session (measured at 1,000 nodes: 30,120
 * predicate calls a session instead of 13,153, agentsched 2.76 CPU-s a
 * session instead of 1.85, vc-scheduler 14.1 instead of 9.5). Volcano's
 * own victim check then turns those nodes away for want of the resource. */
static int volcano_pred_code(pred_code c)
{
    if (c == PRED_EXCEEDS || c == PRED_EXCEEDS_GPU)
        return VOLCANO_CODE_UNSCHEDULABLE;
    return pred_unresolvable(c) ? VOLCANO_CODE_UNRESOLVABLE : VOLCANO_CODE_UNSCHEDULABLE;
}

/* See volcano.h. */
void volcano_handle_predicate(void *ctx, const http_request *req, http_response *resp)
{
    volcano *v = ctx;
    core *co = v->core;
    task_call t = task_call_begin(v, VV_PREDICATE, req);
    as_diag d;
    memset(&d, 0, sizeof d);
    const json_t *task, *node;
    const char *name = NULL;
    vctask_pod_span sp;
    size_t nlen;
    /* the plain case: one scan of the body, the Pod from the memo */
    vctask_seen seen;
    bool plain = vctask_scan_predicate(v->memo, req->body, req->body_len, &sp, &name, &nlen, &seen);
    count_nodes(v, &seen);
    if (!plain || !task_pod(v, &sp, &t.pod, &t.ent)) {
        /* not the plain case: the whole body's DOM, charged as any */
        metrics_inc(v->pod_memo[2]);
        if (http_request_charge_dom(req, resp) != AS_OK)
            goto done;
        as_err err = parse_object(req, "PredicateRequest", &t.root, &d);
        if (!err)
            err = get_object(t.root, "task", true, "PredicateRequest {\"task\", \"node\"}", &task,
                             &d);
        if (!err)
            err = vctask_task_pod(&co->reg, task, "task", &t.owned, &d);
        if (!err)
            err = get_object(t.root, "node", true, "PredicateRequest {\"task\", \"node\"}", &node,
                             &d);
        if (!err)
            err = vctask_node_name(node, "node", &name, &d);
        if (!err)
            nlen = strlen(name);
        if (err) {
            reply_error(resp, http_status_for_decode_err(err), ERRF_STATUS, &d, err);
            goto done;
        }
        t.pod = t.owned;
    }

    char why[256] = "";
    int code = VOLCANO_CODE_SUCCESS;
    score_policy *policy = core_policy_get(co);
    cache_read_lock(co->cache);
    /* name: nlen bytes in the body or the DOM, not terminated */
    const cache_node *cn = cache_node_find(co->cache, name, nlen);
    pred_result r = {PRED_NOT_FOUND, 0};
    if (cn)
        r = pred_check(&co->reg, CACHE_SHARD_NONE, t.pod, cn);
    /* the policy may keep a node from the pod (a GPU node's CPU for its
     * GPUs, the last free devices), as the fast path's and kube-scheduler's
     * filters do */
    if (r.code == PRED_OK && policy && score_keeps(policy, t.pod, cn))
        r = (pred_result){PRED_KEPT, 0};
    if (r.code != PRED_OK) {
        pred_reason(&co->reg, cn, t.pod, r, why, sizeof why);
        if (!why[0])
            snprintf(why, sizeof why, "node(s) were not found in agentsched's node cache");
        code = volcano_pred_code(r.code);
    }
    cache_read_unlock(co->cache);
    if (policy)
        score_policy_unref(policy);

    buf *o = &resp->body;
    buf_reset(o);
    buf_puts(o, "{\"status\":");
    buf_json_cstr(o, why);
    buf_printf(o, ",\"code\":%d}", code);
    finish(resp, ERRF_STATUS);
    if (resp->status == 200)
        metrics_inc(v->answered[code == VOLCANO_CODE_SUCCESS        ? VOUT_PRED_FIT
                                : code == VOLCANO_CODE_UNRESOLVABLE ? VOUT_PRED_UNRESOLVABLE
                                                                    : VOUT_PRED_UNSCHEDULABLE]);
    log_debug("msg=\"volcano predicate\" pod=%s/%s node=%.*s code=%d", t.pod->ns, t.pod->name,
              (int)nlen, name, code);
done:
    task_call_end(&t);
}

/* A small open-addressing set of names for de-duplication. */
typedef struct nameset {
    const char **slot;
    size_t cap; /* power of two */
} nameset;

/* nameset_add returns true when name was new. */
static bool nameset_add(nameset *ns, const char *name)
{
    size_t i = (size_t)hash_str(name) & (ns->cap - 1);
    while (ns->slot[i]) {
        if (strcmp(ns->slot[i], name) == 0)
            return false;
        i = (i + 1) & (ns->cap - 1);
    }
    ns->slot[i] = name;
    return true;
}

/* prioritize_dom decodes a PrioritizeRequest through its DOM (*root,
 * the caller decrefs it) into *pod (caller frees) and the nodes' names
 * (de-duplicated, into the request pool); false when it answered an
 * error. */
static bool prioritize_dom(core *co, const http_request *req, http_response *resp, json_t **root,
                           model_pod **pod, sched_name **out, size_t *nout)
{
    as_diag d;
    memset(&d, 0, sizeof d);
    const json_t *task;
    const char *what = "PrioritizeRequest {\"task\", \"nodes\"}";
    as_err err = parse_object(req, "PrioritizeRequest", root, &d);
    if (!err)
        err = get_object(*root, "task", true, what, &task, &d);
    if (!err)
        err = vctask_task_pod(&co->reg, task, "task", pod, &d);
    if (err) {
        reply_error(resp, http_status_for_decode_err(err), ERRF_ERRMSG, &d, err);
        return false;
    }
    const json_t *nodes = json_get(*root, "nodes");
    size_t total = 0;
    if (nodes && !json_is_null(nodes)) {
        if (!json_is_array(nodes)) {
            err = as_diag_set(&d, AS_EINVAL, "nodes", "nodes must be an array of NodeInfo");
            reply_error(resp, 400, ERRF_ERRMSG, &d, err);
            return false;
        }
        total = json_array_size(nodes);
    }
    if (total > MAX_NODES) {
        err = as_diag_set(&d, AS_ETOOBIG, "nodes", "at most %d nodes per request", MAX_NODES);
        reply_error(resp, 400, ERRF_ERRMSG, &d, err);
        return false;
    }
    sched_name *names = pool_alloc(req->pool, (total ? total : 1) * sizeof *names);
    nameset set = {NULL, 4};
    while (set.cap < 2 * total)
        set.cap <<= 1;
    set.slot = pool_alloc(req->pool, set.cap * sizeof(char *));
    if (!names || !set.slot) {
        err = as_diag_set(&d, AS_ENOMEM, NULL, "request too large for its memory budget");
        reply_error(resp, 413, ERRF_ERRMSG, &d, err);
        return false;
    }
    size_t n = 0;
    for (size_t i = 0; i < total; i++) {
        char f[48];
        snprintf(f, sizeof f, "nodes[%zu]", i);
        const char *name;
        err = vctask_node_name(json_array_get(nodes, i), f, &name, &d);
        if (err) {
            reply_error(resp, http_status_for_decode_err(err), ERRF_ERRMSG, &d, err);
            return false;
        }
        if (nameset_add(&set, name)) {
            size_t len = strlen(name);
            names[n++] = (sched_name){name, len, cache_name_hash(name, len)};
        }
    }
    *out = names;
    *nout = n;
    return true;
}

/* See volcano.h. */
void volcano_handle_prioritize(void *ctx, const http_request *req, http_response *resp)
{
    volcano *v = ctx;
    core *co = v->core;
    task_call t = task_call_begin(v, VV_PRIORITIZE, req);
    as_diag d;
    memset(&d, 0, sizeof d);
    score_policy *policy = NULL;
    sched_name *names = NULL;
    size_t n = 0;
    vctask_pod_span sp;
    as_err err;
    /* the plain case: the nodes' names taken out in one scan, the rest of
     * each NodeInfo validated and skipped; the Pod from the memo */
    vctask_seen seen;
    bool plain = vctask_scan_prioritize(v->memo, req->pool, req->body, req->body_len, &sp, &names,
                                        &n, &seen);
    count_nodes(v, &seen);
    if (!plain || !task_pod(v, &sp, &t.pod, &t.ent)) {
        metrics_inc(v->pod_memo[2]);
        if (http_request_charge_dom(req, resp) != AS_OK ||
            !prioritize_dom(co, req, resp, &t.root, &t.owned, &names, &n))
            goto done;
        t.pod = t.owned;
    }

    /* Scored here rather than through sched_evaluate, which applies
     * agentsched's own shard (hard filter, soft bonus): Volcano's tasks
     * live in Volcano's shard, which Volcano enforces itself. */
    double *score = pool_alloc(req->pool, (n ? n : 1) * sizeof *score);
    if (!score) {
        err = as_diag_set(&d, AS_ENOMEM, NULL, "request too large for its memory budget");
        reply_error(resp, 413, ERRF_ERRMSG, &d, err);
        goto done;
    }
    policy = core_policy_get(co);
    size_t feasible = 0;
    cache_read_lock(co->cache);
    for (size_t i = 0; i < n; i++) {
        const cache_node *cn = cache_node_find(co->cache, names[i].s, names[i].len);
        score[i] = 0;
        if (cn && pred_check(&co->reg, CACHE_SHARD_NONE, t.pod, cn).code == PRED_OK) {
            double sc = score_node(policy, t.pod, cn);
            score[i] = sc > 0 ? sc : 0;
            feasible += sc != SCORE_KEPT;
        }
    }
    cache_read_unlock(co->cache);
    buf *o = &resp->body;
    buf_reset(o);
    buf_puts(o, "{\"nodeScore\":{");
    for (size_t i = 0; i < n; i++) {
        if (i)
            buf_puts(o, ",");
        buf_json_str(o, names[i].s, names[i].len);
        buf_printf(o, ":%.6g", score[i]);
    }
    buf_puts(o, "},\"errorMessage\":\"\"}");
    finish(resp, ERRF_ERRMSG);
    if (resp->status == 200)
        metrics_inc(v->answered[VOUT_PRIORITIZE_SCORED]);
    log_debug("msg=\"volcano prioritize\" pod=%s/%s nodes=%zu feasible=%zu", t.pod->ns, t.pod->name,
              n, feasible);
done:
    if (policy)
        score_policy_unref(policy);
    task_call_end(&t);
}

/* ------------------------------------------------------------------ */
/* allocateFunc / deallocateFunc                                       */
/* ------------------------------------------------------------------ */

static void reply_errmsg(http_response *resp, const char *msg)
{
    buf *o = &resp->body;
    buf_reset(o);
    buf_puts(o, "{\"errorMessage\":");
    buf_json_cstr(o, msg);
    buf_puts(o, "}");
    finish(resp, ERRF_ERRMSG);
}

/* decode_event decodes an EventHandlerRequest {"task"}; *task is borrowed
 * from *root (caller decrefs root). */
static as_err decode_event(core *co, const http_request *req, json_t **root, const json_t **task,
                           model_pod **pod, as_diag *d)
{
    const char *what = "EventHandlerRequest {\"task\"}";
    as_err err = parse_object(req, "EventHandlerRequest", root, d);
    if (!err)
        err = get_object(*root, "task", true, what, task, d);
    if (!err)
        err = vctask_task_pod(&co->reg, *task, "task", pod, d);
    return err;
}

/* commit_allocation assumes pod on node_name through the binder; msg gets
 * the refusal ("" when accepted). */
static as_err commit_allocation(volcano *v, const model_pod *pod, const char *key,
                                const char *node_name, char *msg, size_t len)
{
    core *co = v->core;
    msg[0] = '\0';
    cache_pod_info info;
    cache_pod_lookup(co->cache, key, &info);
    if (info.state != CACHE_POD_ABSENT) {
        if (strcmp(info.node, node_name) == 0)
            return AS_OK; /* already there: Volcano repeats callbacks */
        if (info.state == CACHE_POD_BOUND) {
            snprintf(msg, len,
                     "agentsched refused to allocate pod %s/%s to node %s: it is bound to "
                     "node %s",
                     pod->ns, pod->name, node_name, info.node);
            return AS_OK;
        }
        /* assumed elsewhere through this verb: Volcano re-decided within
         * its session (or a deallocate was lost); its latest decision
         * wins. Anyone else's assumption stands. */
        if (!allocated_has(v, key)) {
            snprintf(msg, len,
                     "agentsched refused to allocate pod %s/%s to node %s: agentsched assumed "
                     "it on node %s",
                     pod->ns, pod->name, node_name, info.node);
            return AS_OK;
        }
        cache_forget(co->cache, key);
        allocated_del(v, key);
    }
    sched_candidate cand;
    memset(&cand, 0, sizeof cand);
    bool found = false;
    char why[256] = "";
    cache_read_lock(co->cache);
    const cache_node *cn = cache_node_find(co->cache, node_name, strlen(node_name));
    if (cn) {
        /* judge the fit here for a clear reason; the version loaded before
         * the usage lets the binder commit at once if nothing changed */
        found = true;
        cand.slot = cn->slot;
        cand.node_id = cn->id;
        cand.bind_version = cache_node_bind_version(cn);
        cand.name = node_name;
        pred_result r = pred_check(&co->reg, CACHE_SHARD_NONE, pod, cn);
        if (r.code != PRED_OK)
            pred_reason(&co->reg, cn, pod, r, why, sizeof why);
    }
    cache_read_unlock(co->cache);
    if (!found) {
        snprintf(msg, len,
                 "agentsched cannot allocate pod %s/%s to node %s: node(s) were not found in "
                 "agentsched's node cache",
                 pod->ns, pod->name, node_name);
        return AS_OK;
    }
    if (why[0]) {
        snprintf(msg, len, "agentsched refused to allocate pod %s/%s to node %s: %s", pod->ns,
                 pod->name, node_name, why);
        return AS_OK;
    }
    /* Reserve only: Volcano binds the task itself, so the decision has no
     * bind port and the assumption stays until the watch sees the binding
     * or deallocateFunc undoes it. */
    decision_ports ports = core_decision_ports(co, NULL, NULL, NULL);
    decision dc;
    decision_begin(&dc, co->binder, &ports);
    as_err err = decision_reserve(&dc, pod, &cand, 1);
    if (err == AS_ECONFLICT)
        snprintf(msg, len, "agentsched refused to allocate pod %s/%s to node %s: %s", pod->ns,
                 pod->name, node_name, dc.out.reason[0] ? dc.out.reason : "it does not fit");
    if (!err && dc.out.gpu_devices) {
        /* PreBind before Volcano's own: the devices go on the pod now,
         * with the uid and resourceVersion of Volcano's copy of it as
         * preconditions. Volcano binds only allocations whose callbacks
         * succeeded, so a refusal here rolls this one back and the pod is
         * never bound without its devices; a later allocation writes them
         * again (docs/gpu.md). */
        as_diag pd = {{0}, {0}};
        as_err perr = core_gpu_prebind(co, pod->ns, pod->name, pod->uid, pod->resource_version,
                                       node_name, dc.out.gpu_devices, dc.out.gpu_milli, &pd);
        if (perr) {
            decision_unreserve(&dc);
            snprintf(msg, len,
                     "agentsched could not write the GPU devices of pod %s/%s on node %s: %s",
                     pod->ns, pod->name, node_name, pd.msg);
        }
    }
    decision_end(&dc);
    return err == AS_ECONFLICT ? AS_OK : err;
}

/* See volcano.h. */
void volcano_handle_allocate(void *ctx, const http_request *req, http_response *resp)
{
    volcano *v = ctx;
    count_request(v, VV_ALLOCATE, req);
    core *co = v->core;
    volcano_expire(v, clock_mono_ms());
    as_diag d;
    memset(&d, 0, sizeof d);
    json_t *root = NULL;
    model_pod *pod = NULL;
    const json_t *task = NULL;
    as_err err = decode_event(co, req, &root, &task, &pod, &d);
    const char *node_name = "";
    if (!err)
        err = vctask_opt_string(task, "NodeName", "task.NodeName", &node_name, &d);
    if (!err && !node_name[0])
        node_name = pod->node_name ? pod->node_name : "";
    if (!err && !node_name[0])
        err = as_diag_set(&d, AS_EINVAL, "task.NodeName",
                          "allocateFunc needs the task's NodeName (or Pod.spec.nodeName): the "
                          "node Volcano allocated it to");
    if (err) {
        reply_error(resp, http_status_for_decode_err(err), ERRF_ERRMSG, &d, err);
        goto done;
    }
    const json_t *st = json_get(task, "Status");
    if (json_is_integer(st) && json_integer_value(st) == VOLCANO_TASK_PIPELINED) {
        /* pipelined: waits for resources still held by releasing pods,
         * which the cache counts as used; assuming it would overcommit */
        log_debug("msg=\"volcano pipelined task not assumed\" pod=%s/%s node=%s", pod->ns,
                  pod->name, node_name);
        reply_errmsg(resp, "");
        metrics_inc(v->answered[VOUT_ALLOC_PIPELINED]);
        goto done;
    }
    char tmp[600], msg[600];
    const char *key = pod_key(pod, tmp, sizeof tmp);
    if (!authorize(v, req, resp, 0, pod, key))
        goto done;
    if (!allocated_has(v, key) && (err = allocated_put(v, key))) {
        as_diag_set(&d, err, NULL,
                    "agentsched holds %zu allocations made through allocateFunc already; retry "
                    "once some are confirmed or expire",
                    v->cfg.max_allocated);
        reply_error(resp, 503, ERRF_ERRMSG, &d, err);
        goto done;
    }
    err = commit_allocation(v, pod, key, node_name, msg, sizeof msg);
    cache_pod_info after;
    cache_pod_lookup(co->cache, key, &after);
    if (after.state != CACHE_POD_ASSUMED)
        allocated_del(v, key); /* refused, or bound already: nothing of ours to expire */
    else
        allocated_put(v, key); /* refresh: the assumption's age */
    if (err) {
        as_diag_set(&d, err, NULL, "allocation failed: %s", as_strerror(err));
        reply_error(resp, 500, ERRF_ERRMSG, &d, err);
        goto done;
    }
    if (msg[0])
        log_info("msg=\"volcano allocation refused\" pod=%s/%s node=%s reason=\"%s\"", pod->ns,
                 pod->name, node_name, msg);
    else
        log_debug("msg=\"volcano allocation assumed\" pod=%s/%s node=%s", pod->ns, pod->name,
                  node_name);
    reply_errmsg(resp, msg);
    metrics_inc(v->answered[msg[0] ? VOUT_ALLOC_REFUSED : VOUT_ALLOC_ASSUMED]);
done:
    model_pod_free(pod);
    json_decref(root);
}

/* See volcano.h. */
void volcano_handle_deallocate(void *ctx, const http_request *req, http_response *resp)
{
    volcano *v = ctx;
    count_request(v, VV_DEALLOCATE, req);
    core *co = v->core;
    volcano_expire(v, clock_mono_ms());
    as_diag d;
    memset(&d, 0, sizeof d);
    json_t *root = NULL;
    model_pod *pod = NULL;
    const json_t *task = NULL;
    as_err err = decode_event(co, req, &root, &task, &pod, &d);
    if (err) {
        reply_error(resp, http_status_for_decode_err(err), ERRF_ERRMSG, &d, err);
        goto done;
    }
    char tmp[600];
    const char *key = pod_key(pod, tmp, sizeof tmp);
    if (!allocated_has(v, key)) {
        /* Not an allocation of this verb: a pod agentsched does not know
         * as Volcano's, or an assumption made by the fast path or the
         * extender's bind, is refused; anything else is already done
         * (expired, or BOUND: an eviction is freed when the API server
         * deletes the pod). */
        if (!authorize(v, req, resp, 1, pod, key))
            goto done;
        cache_pod_info info;
        cache_pod_lookup(co->cache, key, &info);
        if (info.state == CACHE_POD_ASSUMED) {
            refuse(v, req, resp, 1, VRULE_NOT_ALLOCATED, pod,
                   "agentsched did not assume it through allocateFunc; only Volcano's own "
                   "allocations can be deallocated");
            goto done;
        }
        reply_errmsg(resp, "");
        metrics_inc(v->answered[VOUT_DEALLOC_NOOP]);
        goto done;
    }
    allocated_del(v, key);
    /* Only an ASSUMED pod is ours to drop; a BOUND pod (an eviction) is
     * freed when the API server deletes it. */
    err = cache_forget(co->cache, key);
    if (err == AS_OK)
        log_debug("msg=\"volcano allocation forgotten\" pod=%s/%s", pod->ns, pod->name);
    else if (err != AS_ENOTFOUND && err != AS_ECONFLICT) {
        as_diag_set(&d, err, NULL, "deallocation failed: %s", as_strerror(err));
        reply_error(resp, 500, ERRF_ERRMSG, &d, err);
        goto done;
    }
    reply_errmsg(resp, "");
    metrics_inc(v->answered[err == AS_OK ? VOUT_DEALLOC_FORGOTTEN : VOUT_DEALLOC_NOOP]);
done:
    model_pod_free(pod);
    json_decref(root);
}

/* ------------------------------------------------------------------ */
/* The verbs agentsched abstains from                                  */
/* ------------------------------------------------------------------ */

/* check_evict validates {"evictor": TaskInfo, "evictees": [TaskInfo]}. */
static bool check_evict(const http_request *req, http_response *resp, const char *what)
{
    as_diag d;
    memset(&d, 0, sizeof d);
    json_t *root = NULL;
    const json_t *ev;
    as_err err = parse_object(req, what, &root, &d);
    if (!err)
        err = get_object(root, "evictor", true, what, &ev, &d);
    if (!err) {
        const json_t *es = json_get(root, "evictees");
        if (es && !json_is_null(es) && !json_is_array(es))
            err = as_diag_set(&d, AS_EINVAL, "evictees", "evictees must be an array of TaskInfo");
        for (size_t i = 0; !err && json_is_array(es) && i < json_array_size(es); i++)
            if (!json_is_object(json_array_get(es, i))) {
                char f[48];
                snprintf(f, sizeof f, "evictees[%zu]", i);
                err = as_diag_set(&d, AS_EINVAL, f, "%s must be a TaskInfo object", f);
            }
    }
    json_decref(root);
    if (err)
        reply_error(resp, http_status_for_decode_err(err), ERRF_NONE, &d, err);
    return err != AS_OK;
}

/* See volcano.h. */
void volcano_handle_preemptable(void *ctx, const http_request *req, http_response *resp)
{
    count_request(ctx, VV_PREEMPTABLE, req);
    if (!check_evict(req, resp, "PreemptableRequest {\"evictor\", \"evictees\"}"))
        reply_json(resp, ERRF_NONE, "{\"status\":0,\"victims\":[]}");
}

/* See volcano.h. */
void volcano_handle_reclaimable(void *ctx, const http_request *req, http_response *resp)
{
    count_request(ctx, VV_RECLAIMABLE, req);
    if (!check_evict(req, resp, "ReclaimableRequest {\"evictor\", \"evictees\"}"))
        reply_json(resp, ERRF_NONE, "{\"status\":0,\"victims\":[]}");
}

/* See volcano.h. */
void volcano_handle_job_enqueueable(void *ctx, const http_request *req, http_response *resp)
{
    count_request(ctx, VV_JOB_ENQUEUEABLE, req);
    if (!check_body(req, resp, "JobEnqueueableRequest {\"job\"}", "job"))
        reply_json(resp, ERRF_NONE, "{\"status\":0}");
}

/* See volcano.h. */
void volcano_handle_job_enqueued(void *ctx, const http_request *req, http_response *resp)
{
    count_request(ctx, VV_JOB_ENQUEUED, req);
    if (!check_body(req, resp, "JobEnqueuedRequest {\"job\"}", "job"))
        reply_json(resp, ERRF_NONE, "{}");
}

/* See volcano.h. */
void volcano_handle_queue_overused(void *ctx, const http_request *req, http_response *resp)
{
    count_request(ctx, VV_QUEUE_OVERUSED, req);
    if (!check_body(req, resp, "QueueOverusedRequest {\"queue\"}", "queue"))
        reply_json(resp, ERRF_NONE, "{\"overused\":false}");
}

/* See volcano.h. */
void volcano_handle_job_ready(void *ctx, const http_request *req, http_response *resp)
{
    count_request(ctx, VV_JOB_READY, req);
    if (!check_body(req, resp, "JobReadyRequest {\"job\"}", "job"))
        reply_json(resp, ERRF_NONE, "{\"status\":true}");
}

static const http_route volcano_route_table[] = {
    {"POST", VOLCANO_PATH_ON_SESSION_OPEN, volcano_handle_on_session_open, false, NULL, false,
     false},
    {"POST", VOLCANO_PATH_ON_SESSION_CLOSE, volcano_handle_on_session_close, false, NULL, false,
     false},
    {"POST", VOLCANO_PATH_PREDICATE, volcano_handle_predicate, false, NULL, false, true},
    {"POST", VOLCANO_PATH_PRIORITIZE, volcano_handle_prioritize, false, NULL, false, true},
    {"POST", VOLCANO_PATH_PREEMPTABLE, volcano_handle_preemptable, false, NULL, false, false},
    {"POST", VOLCANO_PATH_RECLAIMABLE, volcano_handle_reclaimable, false, NULL, false, false},
    {"POST", VOLCANO_PATH_JOB_ENQUEUEABLE, volcano_handle_job_enqueueable, false, NULL, false,
     false},
    {"POST", VOLCANO_PATH_JOB_ENQUEUED, volcano_handle_job_enqueued, false, NULL, false, false},
    {"POST", VOLCANO_PATH_QUEUE_OVERUSED, volcano_handle_queue_overused, false, NULL, false, false},
    {"POST", VOLCANO_PATH_JOB_READY, volcano_handle_job_ready, false, NULL, false, false},
    {"POST", VOLCANO_PATH_ALLOCATE, volcano_handle_allocate, false, NULL, false, false},
    {"POST", VOLCANO_PATH_DEALLOCATE, volcano_handle_deallocate, false, NULL, false, false},
};

/* See volcano.h. */
const http_route *volcano_routes(size_t *n)
{
    *n = sizeof volcano_route_table / sizeof volcano_route_table[0];
    return volcano_route_table;
}

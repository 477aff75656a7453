/*
 * test_k8s_watch_brief.c - which pod watch events the stream applies from
 * the scanner's brief instead of a full decode (k8s_stream_briefs), as a
 * table: each row is one event fed in order, whether it may skip the
 * decode, and the pod's state and node in the cache afterwards. A second
 * cache fed the same events with every event decoded (a stream per event,
 * so no digest is ever held) must end equal.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "agentsched/base/jscan.h"
#include "agentsched/base/log.h"
#include "agentsched/core/cache.h"
#include "agentsched/k8s/watch.h"
#include "agentsched/model/podscan.h"

#define NODE(n)                                                                                    \
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Node\",\"apiVersion\":\"v1\",\"metadata\":{"       \
    "\"name\":\"" n "\",\"uid\":\"u-" n "\",\"resourceVersion\":\"1\"},\"spec\":{},\"status\":{"   \
    "\"allocatable\":{\"cpu\":\"8\",\"memory\":\"32Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":"      \
    "\"4\"}}}}\n"

/* A pod event: type, uid, resourceVersion, extra metadata members,
 * container resources, nodeName member (with its comma) and status. */
#define POD(type, uid, rv, meta, res, node, status)                                                \
    "{\"type\":\"" type "\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"     \
    "\"name\":\"" uid "\",\"namespace\":\"ns\",\"uid\":\"" uid "\",\"resourceVersion\":\"" rv      \
    "\"" meta ",\"managedFields\":[{\"manager\":\"m" rv "\"}]},\"spec\":{" node                    \
    "\"schedulerName\":\"agent-scheduler\",\"containers\":[{\"name\":\"c\",\"image\":\"x\","       \
    "\"resources\":" res "}]},\"status\":" status "}}\n"

#define RES     "{\"requests\":{\"cpu\":\"500m\"}}"
#define RES2    "{\"requests\":{\"cpu\":\"700m\"}}"
#define RESGPU  "{\"limits\":{\"nvidia.com/gpu\":\"1\"}}"
#define ON(n)   "\"nodeName\":\"" n "\","
#define PENDING "{\"phase\":\"Pending\"}"
#define BOUND                                                                                      \
    "{\"phase\":\"Pending\",\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"True\"}]}"
#define RUNNING                                                                                    \
    "{\"phase\":\"Running\",\"podIP\":\"10.0.0.1\",\"startTime\":\"2026-12-03T00:00:00Z\"}"

typedef struct row {
    const char *event;
    bool brief; /* applied without a decode */
    const char *uid;
    cache_pod_state state; /* of uid afterwards */
    const char *node;      /* of uid afterwards, when not ABSENT */
} row;

static const row rows[] = {
    /* pending: nothing in the cache, a decode */
    {POD("ADDED", "a", "10", "", RES, "", PENDING), false, "a", CACHE_POD_ABSENT, NULL},
    /* the binding: nodeName and a condition set; the cache never held it */
    {POD("MODIFIED", "a", "11", "", RES, ON("n1"), BOUND), false, "a", CACHE_POD_BOUND, "n1"},
    /* the same pod again: only resourceVersion, managedFields and status
     * past the phase differ */
    {POD("MODIFIED", "a", "12", "", RES, ON("n1"), BOUND), true, "a", CACHE_POD_BOUND, "n1"},
    {POD("MODIFIED", "a", "13", "", RES, ON("n1"), RUNNING), false, "a", CACHE_POD_BOUND, "n1"},
    {POD("MODIFIED", "a", "14", "", RES, ON("n1"),
         "{\"phase\":\"Running\",\"podIP\":\"10.0.0.2\"}"),
     true, "a", CACHE_POD_BOUND, "n1"},
    /* a label: the decoder reads labels */
    {POD("MODIFIED", "a", "15", ",\"labels\":{\"x\":\"y\"}", RES, ON("n1"), RUNNING), false, "a",
     CACHE_POD_BOUND, "n1"},
    {POD("MODIFIED", "a", "16", ",\"labels\":{\"x\":\"y\"},\"generation\":3", RES, ON("n1"),
         RUNNING),
     true, "a", CACHE_POD_BOUND, "n1"},
    /* an annotation, a resize, another node: decoded */
    {POD("MODIFIED", "a", "17", ",\"labels\":{\"x\":\"y\"},\"annotations\":{\"k\":\"v\"}", RES,
         ON("n1"), RUNNING),
     false, "a", CACHE_POD_BOUND, "n1"},
    {POD("MODIFIED", "a", "18", ",\"labels\":{\"x\":\"y\"},\"annotations\":{\"k\":\"v\"}", RES2,
         ON("n1"), RUNNING),
     false, "a", CACHE_POD_BOUND, "n1"},
    {POD("MODIFIED", "a", "19", ",\"labels\":{\"x\":\"y\"},\"annotations\":{\"k\":\"v\"}", RES2,
         ON("n2"), RUNNING),
     false, "a", CACHE_POD_BOUND, "n2"},
    /* the deletion's MODIFIED: deletionTimestamp is carried by the brief
     * (terminating), deletionGracePeriodSeconds read by no decoder */
    {POD("MODIFIED", "a", "20",
         ",\"labels\":{\"x\":\"y\"},\"annotations\":{\"k\":\"v\"},\"deletionTimestamp\":"
         "\"2026-12-03T00:00:01Z\",\"deletionGracePeriodSeconds\":30",
         RES2, ON("n2"), RUNNING),
     true, "a", CACHE_POD_BOUND, "n2"},
    /* the phase: terminal releases */
    {POD("MODIFIED", "a", "21",
         ",\"labels\":{\"x\":\"y\"},\"annotations\":{\"k\":\"v\"},\"deletionTimestamp\":"
         "\"2026-12-03T00:00:01Z\"",
         RES2, ON("n2"), "{\"phase\":\"Succeeded\"}"),
     false, "a", CACHE_POD_ABSENT, NULL},
    /* DELETED: always from the brief */
    {POD("DELETED", "a", "22", "", RES2, ON("n2"), "{\"phase\":\"Succeeded\"}"), true, "a",
     CACHE_POD_ABSENT, NULL},
    /* a pod first seen bound, then deleted while it holds capacity */
    {POD("ADDED", "b", "30", "", RES, ON("n1"), RUNNING), false, "b", CACHE_POD_BOUND, "n1"},
    {POD("MODIFIED", "b", "31", "", RES, ON("n1"), RUNNING), true, "b", CACHE_POD_BOUND, "n1"},
    /* a member the brief cannot carry (an escape): decoded */
    {POD("MODIFIED", "b", "32", ",\"labels\":{\"x\":\"\\u0079\"}", RES, ON("n1"), RUNNING), false,
     "b", CACHE_POD_BOUND, "n1"},
    {POD("DELETED", "b", "33", "", RES, ON("n1"), RUNNING), true, "b", CACHE_POD_ABSENT, NULL},
    /* GPU pods always decode: their devices may be pinned by annotation */
    {POD("ADDED", "g", "40", "", RESGPU, ON("n1"), RUNNING), false, "g", CACHE_POD_BOUND, "n1"},
    {POD("MODIFIED", "g", "41", "", RESGPU, ON("n1"), RUNNING), false, "g", CACHE_POD_BOUND, "n1"},
    /* unbound MODIFIED: decoded (the fast path may take it) */
    {POD("ADDED", "c", "50", "", RES, "", PENDING), false, "c", CACHE_POD_ABSENT, NULL},
    {POD("MODIFIED", "c", "51", "", RES, "", PENDING), false, "c", CACHE_POD_ABSENT, NULL},
    {POD("DELETED", "c", "52", "", RES, "", PENDING), true, "c", CACHE_POD_ABSENT, NULL},
};

static void add_nodes(cache *c)
{
    k8s_stream *ns;
    const char *nodes = NODE("n1") NODE("n2");
    cr_assert_eq(k8s_stream_new(K8S_KIND_NODE, c, NULL, 0, &ns), AS_OK);
    cr_assert_eq(k8s_stream_feed(ns, nodes, strlen(nodes)), AS_OK);
    k8s_stream_free(ns);
}

static void expect_pod(cache *c, const row *r, size_t i, const char *who)
{
    cache_pod_info pi;
    cache_pod_lookup(c, r->uid, &pi);
    cr_assert_eq(pi.state, r->state, "%s row %zu: state %d, want %d", who, i, pi.state, r->state);
    if (r->node)
        cr_assert_str_eq(pi.node, r->node, "%s row %zu", who, i);
}

/* Two caches with the same nodes: c fed by one pod stream s (memos,
 * digests), full fed each event by a fresh stream (every event decoded). */
typedef struct twin {
    model_registry reg, reg2;
    cache *c, *full;
    k8s_stream *s;
} twin;

static void twin_init(twin *t)
{
    log_set_level(LOG_ERROR);
    model_registry_init(&t->reg);
    model_registry_init(&t->reg2);
    cr_assert_eq(cache_new(&t->reg, &t->c), AS_OK);
    cr_assert_eq(cache_new(&t->reg2, &t->full), AS_OK);
    add_nodes(t->c);
    add_nodes(t->full);
    cr_assert_eq(k8s_stream_new(K8S_KIND_POD, t->c, NULL, 0, &t->s), AS_OK);
}

static void twin_free(twin *t)
{
    k8s_stream_free(t->s);
    cache_free(t->c);
    cache_free(t->full);
    model_registry_destroy(&t->reg);
    model_registry_destroy(&t->reg2);
}

/* same_caches: c holds as many pods bound and assumed as full, and each
 * node requests as much; c's invariants hold (after event i). */
static void same_caches(cache *c, cache *full, size_t i)
{
    cache_stats a, b;
    cache_get_stats(c, &a);
    cache_get_stats(full, &b);
    cr_assert_eq(a.pods_bound, b.pods_bound, "event %zu", i);
    cr_assert_eq(a.pods_assumed, b.pods_assumed, "event %zu", i);
    for (size_t n = 0; n < cache_node_count(c); n++) {
        const cache_node *x = cache_node_at(c, n);
        const cache_node *y = cache_node_find(full, x->spec->name, strlen(x->spec->name));
        cr_assert_not_null(y);
        for (int res = 0; res < MODEL_MAX_RES; res++)
            cr_assert_eq(cache_node_requested(x, res), cache_node_requested(y, res),
                         "event %zu node %s res %d", i, x->spec->name, res);
    }
    as_diag d = {{0}, {0}};
    cr_assert_eq(cache_check_invariants(c, &d), AS_OK, "event %zu: %s", i, d.msg);
}

Test(k8s_stream_brief, decision_table)
{
    twin t;
    twin_init(&t);
    cache *c = t.c, *full = t.full;
    k8s_stream *s = t.s;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const row *r = &rows[i];
        uint64_t before = k8s_stream_briefs(s), ev = k8s_stream_events(s);
        cr_assert_eq(k8s_stream_feed(s, r->event, strlen(r->event)), AS_OK, "row %zu", i);
        cr_assert_eq(k8s_stream_events(s), ev + 1, "row %zu applied", i);
        cr_assert_eq(k8s_stream_briefs(s) - before, r->brief ? 1u : 0u,
                     "row %zu: brief %d, want %d", i, (int)(k8s_stream_briefs(s) - before),
                     r->brief);
        expect_pod(c, r, i, "brief");
        /* the resourceVersion is the event's either way */
        const char *rv = strstr(r->event, "\"resourceVersion\":\"") + 19;
        cr_assert_eq(strncmp(k8s_stream_rv(s), rv, strlen(k8s_stream_rv(s))), 0, "row %zu", i);
        /* a fresh stream per event holds no digest: every event decoded */
        k8s_stream *fs;
        cr_assert_eq(k8s_stream_new(K8S_KIND_POD, full, NULL, 0, &fs), AS_OK);
        cr_assert_eq(k8s_stream_feed(fs, r->event, strlen(r->event)), AS_OK);
        expect_pod(full, r, i, "full");
        k8s_stream_free(fs);
        same_caches(c, full, i);
    }
    twin_free(&t);
}

/* decode_with_digest decodes an event's object as the watch does and
 * gives the pod the digest the stream computes for it. */
static model_pod *decode_with_digest(const model_registry *reg, const char *event)
{
    const char *obj = strstr(event, "\"object\":") + 9;
    size_t len = strlen(obj) - 2; /* less the event's closing brace and newline */
    as_diag d = {{0}, {0}};
    jscan sc = {.base = obj, .p = obj, .end = obj + len, .diag = &d};
    model_pod_brief b;
    cr_assert_eq(model_podscan(&sc, &b), 1, "%s", d.msg);
    cr_assert(b.plain);
    json_error_t je;
    json_t *o = json_loadb(obj, len, 0, &je);
    cr_assert_not_null(o, "%s", je.text);
    model_pod *p = NULL;
    cr_assert_eq(model_pod_from_json(reg, o, &p, &d), AS_OK, "%s", d.msg);
    json_decref(o);
    p->digest = model_pod_digest(reg, &b);
    return p;
}

/* The fast path's own pod: assumed from the pending pod it decoded, then
 * confirmed by the binding's MODIFIED without a decode; on another node
 * the binding's event is decoded and moves it. */
Test(k8s_stream_brief, assumed_pod_confirmed_from_brief)
{
    log_set_level(LOG_ERROR);
    model_registry reg;
    model_registry_init(&reg);
    cache *c;
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
    add_nodes(c);
    k8s_stream *s;
    cr_assert_eq(k8s_stream_new(K8S_KIND_POD, c, NULL, 0, &s), AS_OK);
    const char *names[] = {"f", "h"};
    const char *added[] = {POD("ADDED", "f", "60", "", RES, "", PENDING),
                           POD("ADDED", "h", "70", "", RES, "", PENDING)};
    const char *bound[] = {POD("MODIFIED", "f", "61", "", RES, ON("n1"), BOUND),
                           POD("MODIFIED", "h", "71", "", RES, ON("n2"), BOUND)};
    const cache_node *n1 = cache_node_find(c, "n1", 2);
    cr_assert_not_null(n1);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(k8s_stream_feed(s, added[i], strlen(added[i])), AS_OK);
        model_pod *p = decode_with_digest(&reg, added[i]);
        cache_assume_result res;
        cr_assert_eq(cache_assume_if(c, p, n1->slot, n1->id, cache_node_bind_version(n1), NULL,
                                     NULL, &res, NULL),
                     AS_OK);
        model_pod_free(p);
        cache_pod_info pi;
        cache_pod_lookup(c, names[i], &pi);
        cr_assert_eq(pi.state, CACHE_POD_ASSUMED);
        uint64_t before = k8s_stream_briefs(s);
        cr_assert_eq(k8s_stream_feed(s, bound[i], strlen(bound[i])), AS_OK);
        cache_pod_lookup(c, names[i], &pi);
        cr_assert_eq(pi.state, CACHE_POD_BOUND);
        cr_assert_str_eq(pi.node, i == 0 ? "n1" : "n2");
        cr_assert_eq(k8s_stream_briefs(s) - before, i == 0 ? 1u : 0u, "pod %s", names[i]);
    }
    as_diag d = {{0}, {0}};
    cr_assert_eq(cache_check_invariants(c, &d), AS_OK, "%s", d.msg);
    k8s_stream_free(s);
    cache_free(c);
    model_registry_destroy(&reg);
}

/* A template's pod: uid, node member, a per-pod env value and service
 * account volume (what the model never reads), the request. */
#define TPOD(type, uid, node, id, res)                                                             \
    "{\"type\":\"" type "\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{"     \
    "\"name\":\"" uid "\",\"namespace\":\"ns\",\"uid\":\"" uid "\",\"resourceVersion\":\"9\","     \
    "\"labels\":{\"app\":\"agent\"}},\"spec\":{\"volumes\":[{\"name\":\"kube-api-access-" id       \
    "\"}]," node "\"schedulerName\":\"agent-scheduler\",\"containers\":[{\"name\":\"c\","          \
    "\"env\":[{\"name\":\"ID\",\"value\":\"" id "\"}],\"volumeMounts\":[{\"name\":"                \
    "\"kube-api-access-" id "\"}],\"resources\":" res "}]},\"status\":{\"phase\":\"Running\"}}}\n"

/* Pods of one template after the first two are built from their fields
 * and the remembered spec, whatever their node, env or volumes: the cache
 * ends as one fed every event decoded. */
Test(k8s_stream_brief, template_pods_built_without_a_dom)
{
    log_set_level(LOG_ERROR);
    static const struct {
        const char *event;
        bool fields;
    } ev[] = {
        {TPOD("ADDED", "t0", ON("n1"), "aaaaa", RES), false}, /* a first miss */
        {TPOD("ADDED", "t1", ON("n2"), "bbbbb", RES), false}, /* remembered */
        {TPOD("ADDED", "t2", ON("n1"), "ccccc", RES), true},
        {TPOD("ADDED", "t3", ON("n2"), "ddddd", RES), true},
        {TPOD("ADDED", "t4", "", "eeeee", RES), true},
        {TPOD("ADDED", "u0", ON("n1"), "fffff", RES2), false},
        {TPOD("ADDED", "u1", ON("n1"), "ggggg", RES2), false},
        {TPOD("ADDED", "u2", ON("n2"), "hhhhh", RES2), true},
        /* the same pod moved: MODIFIED on another node, from its fields */
        {TPOD("MODIFIED", "t2", ON("n2"), "ccccc", RES), true},
        /* a GPU pod's annotations are the DOM's */
        {POD("ADDED", "g", "40",
             ",\"annotations\":{\"agentsched.io/gpu-node\":\"n1\",\"agentsched.io/gpu-devices\":"
             "\"0\",\"agentsched.io/gpu-milli\":\"1000\"}",
             RESGPU, ON("n1"), RUNNING),
         false},
    };
    twin t;
    twin_init(&t);
    cache *c = t.c, *full = t.full;
    k8s_stream *s = t.s;
    for (size_t i = 0; i < sizeof ev / sizeof ev[0]; i++) {
        uint64_t before = k8s_stream_fields(s);
        cr_assert_eq(k8s_stream_feed(s, ev[i].event, strlen(ev[i].event)), AS_OK, "event %zu", i);
        cr_assert_eq(k8s_stream_fields(s) - before, ev[i].fields ? 1u : 0u, "event %zu", i);
        k8s_stream *fs;
        cr_assert_eq(k8s_stream_new(K8S_KIND_POD, full, NULL, 0, &fs), AS_OK);
        cr_assert_eq(k8s_stream_feed(fs, ev[i].event, strlen(ev[i].event)), AS_OK);
        k8s_stream_free(fs);
    }
    cr_assert_str_eq(k8s_stream_rv(s), "40");
    cache_stats a;
    cache_get_stats(c, &a);
    cr_assert_eq(a.pods_bound, 8); /* all but t4, pending */
    same_caches(c, full, sizeof ev / sizeof ev[0]);
    const char *uids[] = {"t0", "t1", "t2", "t3", "t4", "u0", "u1", "u2", "g"};
    for (size_t i = 0; i < sizeof uids / sizeof uids[0]; i++) {
        cache_pod_info x, y;
        cache_pod_lookup(c, uids[i], &x);
        cache_pod_lookup(full, uids[i], &y);
        cr_assert_eq(x.state, y.state, "%s", uids[i]);
        if (x.state != CACHE_POD_ABSENT)
            cr_assert_str_eq(x.node, y.node, "%s", uids[i]);
    }
    twin_free(&t);
}

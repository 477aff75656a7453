/*
 * test_k8s_bind.c - pods/binding through the stub: success, 409 same/other
 * node, 404, bounded retries on 429/5xx/transport, binds whose outcome is
 * unknown (answer lost) retried to the same node, bounded concurrency on
 * keep-alive connections, assumed-pod confirmation and expiry, and Events.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agentsched/core/cache.h"
#include "agentsched/k8s/bind.h"
#include "agentsched/k8s/events.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/model/gpuannot.h"
#include "agentsched/base/clock.h"
#include "agentsched/base/log.h"
#include "k8s_stub.c"

typedef struct bfx {
    k8s_stub *stub;
    model_registry reg;
    cache *c;
    k8s_client *k;
} bfx;

typedef void (*btweak)(k8s_config *cfg);

static void msleep(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void put_pod(bfx *f, const char *name, const char *node)
{
    char uid[128];
    snprintf(uid, sizeof uid, "uid-%s", name);
    json_t *p = stub_make_pod("default", name, uid, node, "1", "1Gi");
    stub_put(f->stub, STUB_POD, p);
    json_decref(p);
}

/* bind_faults queues n faults (kind, arg) on pod name's binding; the stub
 * keeps at most STUB_MAX_FAULTS. */
static void bind_faults(bfx *f, const char *name, stub_fault_kind kind, int arg, int n)
{
    char path[128];
    snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s/binding", name);
    for (int i = 0; i < n; i++)
        stub_fault(f->stub, path, STUB_POST, kind, arg);
}

static void bfx_init(bfx *f, btweak tweak, bool start)
{
    memset(f, 0, sizeof *f);
    log_set_level(LOG_ERROR);
    f->stub = stub_new();
    model_registry_init(&f->reg);
    cr_assert_eq(cache_new(&f->reg, &f->c), AS_OK);
    for (int i = 0; i < 3; i++) {
        char name[32];
        snprintf(name, sizeof name, "n%d", i);
        json_t *n = stub_make_node(name, "4", "16Gi", 110);
        stub_put(f->stub, STUB_NODE, n);
        json_decref(n);
    }
    k8s_conn conn = {0};
    conn.server = (char *)stub_url(f->stub);
    k8s_config cfg;
    k8s_config_defaults(&cfg);
    cfg.conn = &conn;
    cfg.bind_backoff_ms = 5;
    cfg.backoff_initial_ms = 10;
    cfg.backoff_max_ms = 50;
    cfg.assumed_ttl_ms = 300;
    cfg.expire_period_ms = 50;
    cfg.watch_shards = false;
    cfg.event_pod_interval_ms = 60000;
    if (tweak)
        tweak(&cfg);
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_client_new(&cfg, f->c, &f->k, &d), AS_OK, "%s", d.msg);
    if (start) {
        cr_assert_eq(k8s_client_start(f->k), AS_OK);
        cr_assert(k8s_wait_synced(f->k, 5000));
    }
}

static void bfx_fini(bfx *f)
{
    k8s_client_free(f->k);
    stub_free(f->stub);
    cache_free(f->c);
    model_registry_destroy(&f->reg);
}

static const char *stub_pod_node(bfx *f, const char *uid)
{
    static char out[128];
    out[0] = 0;
    json_t *pods = stub_objects(f->stub, STUB_POD);
    size_t i;
    json_t *v;
    json_array_foreach(pods, i, v)
    {
        if (!strcmp(json_string_value(json_object_get(json_object_get(v, "metadata"), "uid")),
                    uid)) {
            const char *n =
                json_string_value(json_object_get(json_object_get(v, "spec"), "nodeName"));
            snprintf(out, sizeof out, "%s", n ? n : "");
        }
    }
    json_decref(pods);
    return out;
}

/* bind_ok binds pod name (uid "uid-" + name) to node and checks that the
 * bind succeeded and the API server holds that binding. */
static void bind_ok(bfx *f, const char *name, const char *node)
{
    char uid[128];
    snprintf(uid, sizeof uid, "uid-%s", name);
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_bind(f->k, "default", name, uid, node, &d), AS_OK, "%s", d.msg);
    cr_assert_str_eq(stub_pod_node(f, uid), node);
}

Test(k8s_bind, success_and_idempotent_409)
{
    bfx f;
    bfx_init(&f, NULL, false);
    put_pod(&f, "a", NULL);
    as_diag d = {{0}, {0}};
    bind_ok(&f, "a", "n1");
    /* A retry after a lost response: 409 naming the same node is success. */
    cr_assert_eq(k8s_bind(f.k, "default", "a", "uid-a", "n1", &d), AS_OK, "%s", d.msg);
    k8s_status st;
    k8s_get_status(f.k, &st);
    cr_assert_eq(st.binds_ok, 2);
    bfx_fini(&f);
}

Test(k8s_bind, conflict_other_node_and_not_found)
{
    bfx f;
    bfx_init(&f, NULL, false);
    put_pod(&f, "b", "n2");
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_bind(f.k, "default", "b", "uid-b", "n0", &d), AS_ECONFLICT);
    cr_assert(strstr(d.msg, "n2") != NULL, "%s", d.msg);
    cr_assert_eq(k8s_bind(f.k, "default", "ghost", NULL, "n0", &d), AS_ENOTFOUND);
    cr_assert(strstr(d.msg, "ghost") != NULL, "%s", d.msg);
    cr_assert_eq(k8s_bind(f.k, "default", "", NULL, "n0", &d), AS_EINVAL);
    k8s_status st;
    k8s_get_status(f.k, &st);
    cr_assert_eq(st.binds_failed, 2);
    bfx_fini(&f);
}

Test(k8s_bind, retries_429_5xx_and_transport)
{
    bfx f;
    bfx_init(&f, NULL, false);
    put_pod(&f, "c", NULL);
    bind_faults(&f, "c", STUB_F_STATUS, 429, 1);
    bind_faults(&f, "c", STUB_F_STATUS, 500, 1);
    bind_faults(&f, "c", STUB_F_CLOSE, 0, 1);
    bind_faults(&f, "c", STUB_F_STATUS, 503, 1);
    bind_ok(&f, "c", "n0");
    cr_assert_eq(stub_faults_pending(f.stub), 0);
    k8s_status st;
    k8s_get_status(f.k, &st);
    /* curl itself retries once when a reused connection dies silently. */
    cr_assert(st.bind_retries == 3 || st.bind_retries == 4, "retries %llu",
              (unsigned long long)st.bind_retries);
    bfx_fini(&f);
}

/* Refusals that retrying cannot change end at once and say what to do; a
 * 409 that names no node (etcd failed mid-write) is retried, and refused
 * only when the budget is spent. */
Test(k8s_bind, refusals_name_the_cause)
{
    bfx f;
    bfx_init(&f, NULL, false);
    put_pod(&f, "r", NULL);
    as_diag d = {{0}, {0}};
    bind_faults(&f, "r", STUB_F_STATUS, 403, 1);
    cr_assert_eq(k8s_bind(f.k, "default", "r", "uid-r", "n0", &d), AS_EAUTH, "%s", d.msg);
    cr_assert(strstr(d.msg, "create on pods/binding"), "%s", d.msg);
    bind_faults(&f, "r", STUB_F_STATUS, 401, 1);
    cr_assert_eq(k8s_bind(f.k, "default", "r", "uid-r", "n0", &d), AS_EAUTH, "%s", d.msg);
    bind_faults(&f, "r", STUB_F_STATUS, 400, 1);
    cr_assert_eq(k8s_bind(f.k, "default", "r", "uid-r", "n0", &d), AS_EHTTP, "%s", d.msg);
    cr_assert(strstr(d.msg, "refused (400)") && strstr(d.msg, "default/r"), "%s", d.msg);
    cr_assert_eq(stub_faults_pending(f.stub), 0);
    cr_assert_str_eq(stub_pod_node(&f, "uid-r"), "");
    k8s_status st;
    k8s_get_status(f.k, &st);
    cr_assert_eq(st.binds_failed, 3);
    cr_assert_eq(st.bind_retries, 0);

    /* 409 without a node: retried like a lost answer, then bound. */
    bind_faults(&f, "r", STUB_F_STATUS, 409, 2);
    bind_ok(&f, "r", "n0");
    k8s_get_status(f.k, &st);
    cr_assert_eq(st.bind_retries, 2);
    bfx_fini(&f);
}

/* k8s_bind_try: one attempt that never sleeps; what k8s_bind would retry
 * is AS_EAGAIN (not counted as a failed bind), and k8s_bind settles it,
 * also when the attempt went through unheard or past the try's 250 ms. */
Test(k8s_bind, try_is_one_attempt_that_never_waits)
{
    bfx f;
    bfx_init(&f, NULL, false);
    put_pod(&f, "t", NULL);
    put_pod(&f, "u", "n2");
    as_diag d = {{0}, {0}};
    bind_faults(&f, "t", STUB_F_STATUS, 503, 1);
    uint64_t t0 = clock_mono_ns();
    cr_assert_eq(k8s_bind_try(f.k, "default", "t", "uid-t", "n1", &d), AS_EAGAIN, "%s", d.msg);
    cr_expect(strstr(d.msg, "not settled"), "%s", d.msg);
    bind_faults(&f, "t", STUB_F_STATUS, 429, 1);
    cr_assert_eq(k8s_bind_try(f.k, "default", "t", "uid-t", "n1", &d), AS_EAGAIN, "%s", d.msg);
    cr_assert_lt(clock_mono_ns() - t0, 2000000000ull, "a try waited");
    /* applied, then the connection closed unanswered: the connection's
     * own resend hears 409 naming this node, which settles it */
    bind_faults(&f, "t", STUB_F_APPLY_CLOSE, 0, 1);
    cr_assert_eq(k8s_bind_try(f.k, "default", "t", "uid-t", "n1", &d), AS_OK, "%s", d.msg);
    cr_assert_str_eq(stub_pod_node(&f, "uid-t"), "n1");
    /* settled answers are k8s_bind's */
    cr_assert_eq(k8s_bind_try(f.k, "default", "t", "uid-t", "n1", &d), AS_OK, "%s", d.msg);
    cr_assert_eq(k8s_bind_try(f.k, "default", "u", "uid-u", "n0", &d), AS_ECONFLICT);
    cr_assert_eq(k8s_bind_try(f.k, "default", "ghost", NULL, "n0", &d), AS_ENOTFOUND);
    /* slower than the try's wait: not settled, the pod is bound all the same */
    put_pod(&f, "v", NULL);
    bind_faults(&f, "v", STUB_F_SLOW, 600, 1);
    cr_assert_eq(k8s_bind_try(f.k, "default", "v", "uid-v", "n1", &d), AS_EAGAIN, "%s", d.msg);
    cr_assert_eq(k8s_bind(f.k, "default", "v", "uid-v", "n1", &d), AS_OK, "%s", d.msg);
    k8s_status st;
    k8s_get_status(f.k, &st);
    cr_assert_eq(st.bind_retries, 0, "a try never retries");
    cr_assert_eq(st.binds_failed, 2, "the conflict and the 404 only");
    cr_assert_eq(st.binds_ok, 3);
    cr_assert_eq(stub_faults_pending(f.stub), 0);
    bfx_fini(&f);
}

/* try_split is k8s_bind_try as the pod watch makes it: the Binding sent,
 * its answer read once it has come. */
static as_err try_split(bfx *f, const char *name, const char *uid, const char *node, as_diag *d)
{
    k8s_kept *sent = NULL;
    as_err err = k8s_bind_try_send(f->k, "default", name, uid, node, &sent, d);
    if (err) {
        cr_assert_null(sent);
        return err;
    }
    cr_assert_not_null(sent);
    for (int t = 0; t < 2000 && !k8s_bind_try_answered(sent); t++)
        usleep(1000);
    return k8s_bind_try_recv(f->k, sent, "default", name, uid, node, d);
}

/* k8s_bind_try in two steps answers as k8s_bind_try does, and gives its
 * handle back either way. */
Test(k8s_bind, try_sent_then_answered)
{
    bfx f;
    bfx_init(&f, NULL, false);
    as_diag d = {{0}, {0}};
    cr_assert_eq(try_split(&f, "ghost", NULL, "n0", &d), AS_ENOTFOUND);
    put_pod(&f, "u", "n2");
    cr_assert_eq(try_split(&f, "u", "uid-u", "n0", &d), AS_ECONFLICT);
    put_pod(&f, "t", NULL);
    bind_faults(&f, "t", STUB_F_STATUS, 503, 1);
    cr_assert_eq(try_split(&f, "t", "uid-t", "n1", &d), AS_EAGAIN, "%s", d.msg);
    cr_expect(strstr(d.msg, "not settled"), "%s", d.msg);
    cr_assert_eq(try_split(&f, "t", "uid-t", "n1", &d), AS_OK, "%s", d.msg);
    cr_assert_str_eq(stub_pod_node(&f, "uid-t"), "n1");
    cr_assert_eq(try_split(&f, "t", "uid-t", "n1", &d), AS_OK, "409 naming this node: %s", d.msg);
    /* slower than the try's wait: not settled, k8s_bind settles it */
    put_pod(&f, "v", NULL);
    bind_faults(&f, "v", STUB_F_SLOW, 600, 1);
    k8s_kept *sent = NULL;
    cr_assert_eq(k8s_bind_try_send(f.k, "default", "v", "uid-v", "n1", &sent, &d), AS_OK);
    cr_assert_not(k8s_bind_try_answered(sent));
    cr_assert_eq(k8s_bind_try_recv(f.k, sent, "default", "v", "uid-v", "n1", &d), AS_EAGAIN, "%s",
                 d.msg);
    cr_assert_eq(k8s_bind(f.k, "default", "v", "uid-v", "n1", &d), AS_OK, "%s", d.msg);
    /* every handle is back: as many sends as the pool has, then none */
    put_pod(&f, "w", NULL);
    k8s_kept *held[128];
    int n = 0;
    while (n < 128 && k8s_bind_try_send(f.k, "default", "w", "uid-w", "n1", &held[n], &d) == AS_OK)
        n++;
    cr_assert_gt(n, 0);
    cr_assert_lt(n, 128);
    cr_expect(strstr(d.msg, "every handle busy"), "%s", d.msg);
    for (int i = 0; i < n; i++)
        cr_assert_eq(k8s_bind_try_recv(f.k, held[i], "default", "w", "uid-w", "n1", &d), AS_OK,
                     "%s", d.msg);
    k8s_status st;
    k8s_get_status(f.k, &st);
    cr_assert_eq(st.bind_retries, 0, "a try never retries");
    cr_assert_eq(stub_faults_pending(f.stub), 0);
    bfx_fini(&f);
}

static void slow_qps(k8s_config *cfg)
{
    cfg->qps = 1;
    cfg->burst = 1;
}

/* Past the client's rate limit the try sends nothing and says so, where
 * k8s_bind would wait for a token. */
Test(k8s_bind, try_does_not_wait_for_the_rate_limiter)
{
    bfx f;
    bfx_init(&f, slow_qps, false);
    put_pod(&f, "q", NULL);
    as_diag d = {{0}, {0}};
    as_err first = k8s_bind_try(f.k, "default", "q", "uid-q", "n1", &d);
    uint64_t t0 = clock_mono_ns();
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(k8s_bind_try(f.k, "default", "q", "uid-q", "n1", &d), AS_EAGAIN, "%s", d.msg);
        cr_expect(strstr(d.msg, "--kube-api-qps"), "%s", d.msg);
    }
    cr_assert_lt(clock_mono_ns() - t0, 500000000ull, "a try waited for a token");
    /* the first took the burst's token (or found none left by the sync) */
    if (first == AS_OK)
        cr_assert_str_eq(stub_pod_node(&f, "uid-q"), "n1");
    bind_ok(&f, "q", "n1");
    bfx_fini(&f);
}

static void two_retries(k8s_config *cfg)
{
    cfg->bind_retries = 2;
}

Test(k8s_bind, retries_are_bounded)
{
    bfx f;
    bfx_init(&f, two_retries, false);
    put_pod(&f, "d", NULL);
    bind_faults(&f, "d", STUB_F_STATUS, 500, 5);
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_bind(f.k, "default", "d", "uid-d", "n0", &d), AS_EHTTP);
    cr_assert(strstr(d.msg, "3 attempts") != NULL, "%s", d.msg);
    cr_assert_eq(stub_faults_pending(f.stub), 2);
    cr_assert_str_eq(stub_pod_node(&f, "uid-d"), "");
    bfx_fini(&f);
}

static void long_ttl(k8s_config *cfg)
{
    cfg->bind_retries = 2;
    cfg->assumed_ttl_ms = 4000; /* an unknown outcome is retried for 2 s */
}

/* The API server applies the binding but the answer is lost, then the
 * connection keeps breaking for longer than the retry budget: the bind is
 * retried to the same node until 409 names that node, and succeeds. A 504
 * (the API server timed out; etcd may still commit) and a 409 naming no
 * node (etcd failed mid-write) are unknown too; refusals that follow a lost
 * answer do not settle it. */
Test(k8s_bind, lost_answer_and_504_retried_to_the_same_node)
{
    bfx f;
    bfx_init(&f, long_ttl, false);
    put_pod(&f, "e", NULL);
    bind_faults(&f, "e", STUB_F_APPLY_CLOSE, 0, 1);
    bind_faults(&f, "e", STUB_F_CLOSE, 0, 6);
    as_diag d = {{0}, {0}};
    bind_ok(&f, "e", "n1");
    cr_assert_eq(stub_faults_pending(f.stub), 0);
    k8s_status st;
    k8s_get_status(f.k, &st);
    cr_assert_eq(st.bind_unknown, 1);
    cr_assert_eq(st.binds_ok, 1);
    cr_assert_eq(st.binds_failed, 0);

    put_pod(&f, "g", NULL);
    bind_faults(&f, "g", STUB_F_STATUS, 504, 5);
    bind_ok(&f, "g", "n2");
    k8s_get_status(f.k, &st);
    cr_assert_eq(st.bind_unknown, 2);

    /* After a lost answer, a refusal (403: a restarted API server before
     * its RBAC caches are filled; 400) does not settle whether the lost
     * attempt was applied: retried until 409 names the node. */
    put_pod(&f, "m", NULL);
    bind_faults(&f, "m", STUB_F_APPLY_CLOSE, 0, 1);
    /* libcurl itself re-sends a request whose reused connection died
     * unanswered, once, on a fresh connection: that one breaks too. */
    bind_faults(&f, "m", STUB_F_CLOSE, 0, 1);
    bind_faults(&f, "m", STUB_F_STATUS, 403, 3);
    bind_faults(&f, "m", STUB_F_STATUS, 400, 1);
    bind_ok(&f, "m", "n2");
    cr_assert_eq(stub_faults_pending(f.stub), 0);
    k8s_get_status(f.k, &st);
    cr_assert_eq(st.bind_unknown, 3);
    cr_assert_eq(st.binds_failed, 0);
    /* Without a lost answer, a 403 is final at once (RBAC). */
    put_pod(&f, "r", NULL);
    bind_faults(&f, "r", STUB_F_STATUS, 403, 1);
    cr_assert_eq(k8s_bind(f.k, "default", "r", "uid-r", "n2", &d), AS_EAUTH);
    cr_assert(strstr(d.msg, "pods/binding") != NULL, "%s", d.msg);

    /* A 409 naming no node (what the API server answers when etcd fails
     * mid-write) is not "bound elsewhere": retried like a 504. */
    put_pod(&f, "k", NULL);
    bind_faults(&f, "k", STUB_F_STATUS, 409, 5);
    bind_ok(&f, "k", "n0");
    k8s_get_status(f.k, &st);
    cr_assert_eq(st.bind_unknown, 4);
    bfx_fini(&f);
}

/* An outcome that stays unknown is given up at half the assumed TTL (150 ms
 * here), with an error that says so. */
/* The transport sends a request again, once, on a fresh connection when
 * the reused one died before any answer (as libcurl's requests do). Here the first copy was applied
 * and the second answered 500: the bind is unknown (not "failed after the budget", which would
 * release a pod etcd holds) and is retried until 409 names the node. Fails with a plain 500 budget.
 */
Test(k8s_bind, resent_on_a_new_connection_is_unknown)
{
    bfx f;
    bfx_init(&f, long_ttl, false);
    put_pod(&f, "w", NULL);
    put_pod(&f, "x", NULL);
    as_diag d = {{0}, {0}};
    /* A first bind leaves a keep-alive connection for the next to reuse. */
    cr_assert_eq(k8s_bind(f.k, "default", "w", "uid-w", "n1", &d), AS_OK, "%s", d.msg);
    bind_faults(&f, "x", STUB_F_APPLY_CLOSE, 0, 1);
    bind_faults(&f, "x", STUB_F_STATUS, 500, 8);
    bind_ok(&f, "x", "n2");
    k8s_status st;
    k8s_get_status(f.k, &st);
    cr_assert_eq(st.bind_unknown, 1);
    cr_assert_eq(st.binds_failed, 0);
    bfx_fini(&f);
}

/* A try whose answer was lost (the API server applied the binding, then
 * went away) hands the bind to k8s_bind, which the API server then refuses
 * longer than the retry budget: k8s_bind keeps to the same binding for the
 * try's unknown window and succeeds when 409 names the node, instead of
 * failing, which would release a pod etcd holds. Both ways of trying. */
Test(k8s_bind, a_tries_lost_answer_keeps_k8s_bind_retrying)
{
    bfx f;
    bfx_init(&f, long_ttl, false);
    as_diag d = {{0}, {0}};
    const char *pods[] = {"split", "whole"};
    for (int i = 0; i < 2; i++) {
        char uid[64];
        snprintf(uid, sizeof uid, "uid-%s", pods[i]);
        put_pod(&f, pods[i], NULL);
        bind_faults(&f, pods[i], STUB_F_APPLY_CLOSE, 0, 1);
        if (i == 0) {
            cr_assert_eq(try_split(&f, pods[i], uid, "n1", &d), AS_EAGAIN, "%s", d.msg);
        } else {
            /* the connection's own resend breaks too: nothing answered */
            bind_faults(&f, pods[i], STUB_F_CLOSE, 0, 1);
            cr_assert_eq(k8s_bind_try(f.k, "default", pods[i], uid, "n1", &d), AS_EAGAIN, "%s",
                         d.msg);
        }
        cr_assert_str_eq(stub_pod_node(&f, uid), "n1", "the lost attempt was applied");
        bind_faults(&f, pods[i], STUB_F_STATUS, 503, 6);
        cr_assert_eq(k8s_bind(f.k, "default", pods[i], uid, "n1", &d), AS_OK, "%s", d.msg);
        cr_assert_eq(stub_faults_pending(f.stub), 0);
    }
    k8s_status st;
    k8s_get_status(f.k, &st);
    cr_assert_eq(st.bind_unknown, 2, "one each, counted when the answer was lost");
    cr_assert_eq(st.binds_ok, 2);
    cr_assert_eq(st.binds_failed, 0);
    /* settled, forgotten: another bind of the same pod has the usual budget */
    bind_faults(&f, "whole", STUB_F_STATUS, 503, 5);
    cr_assert_eq(k8s_bind(f.k, "default", "whole", "uid-whole", "n1", &d), AS_EHTTP, "%s", d.msg);
    cr_assert_eq(stub_faults_pending(f.stub), 2);
    bfx_fini(&f);
}

Test(k8s_bind, unknown_outcome_gives_up_after_half_the_ttl)
{
    bfx f;
    bfx_init(&f, two_retries, false);
    put_pod(&f, "h", NULL);
    bind_faults(&f, "h", STUB_F_CLOSE, 0, STUB_MAX_FAULTS);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_bind(f.k, "default", "h", "uid-h", "n0", &d), AS_EIO);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    cr_assert(strstr(d.msg, "outcome unknown") != NULL, "%s", d.msg);
    cr_assert(ms >= 150, "gave up after %.0f ms, before the window closed", ms);
    cr_assert(stub_faults_pending(f.stub) > 0);
    cr_assert_str_eq(stub_pod_node(&f, "uid-h"), "");
    bfx_fini(&f);
}

/* No connection, no request: the usual budget applies and nothing is
 * unknown. */
Test(k8s_bind, refused_connection_is_not_unknown)
{
    bfx f;
    bfx_init(&f, long_ttl, false);
    /* The client keeps the first stub's address; its port is now closed. */
    stub_free(f.stub);
    f.stub = stub_new();
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_bind(f.k, "default", "x", "uid-x", "n0", &d), AS_EIO);
    cr_assert(strstr(d.msg, "outcome unknown") == NULL, "%s", d.msg);
    k8s_status st;
    k8s_get_status(f.k, &st);
    cr_assert_eq(st.bind_unknown, 0);
    cr_assert_eq(st.bind_retries, 2);
    bfx_fini(&f);
}

static void four_conns(k8s_config *cfg)
{
    cfg->bind_concurrency = 4;
}

typedef struct done_count {
    pthread_mutex_t mu;
    int ok, failed;
} done_count;

static void on_done(void *arg, as_err err, const as_diag *diag)
{
    done_count *dc = arg;
    pthread_mutex_lock(&dc->mu);
    if (err == AS_OK)
        dc->ok++;
    else
        dc->failed++;
    pthread_mutex_unlock(&dc->mu);
}

Test(k8s_bind, bounded_concurrency_keepalive)
{
    bfx f;
    bfx_init(&f, four_conns, false);
    char name[32];
    for (int i = 0; i < 24; i++) {
        snprintf(name, sizeof name, "p%d", i);
        put_pod(&f, name, NULL);
    }
    stub_set_bind_delay(f.stub, 30);
    done_count dc = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
    for (int i = 0; i < 24; i++) {
        snprintf(name, sizeof name, "p%d", i);
        cr_assert_eq(k8s_bind_async(f.k, "default", name, NULL, i % 2 ? "n1" : "n2", on_done, &dc),
                     AS_OK);
    }
    for (int t = 0; t < 5000; t += 10) {
        pthread_mutex_lock(&dc.mu);
        int n = dc.ok + dc.failed;
        pthread_mutex_unlock(&dc.mu);
        if (n == 24)
            break;
        msleep(10);
    }
    cr_assert_eq(dc.ok, 24);
    cr_assert_leq(stub_max_inflight_binds(f.stub), 4);
    cr_assert_geq(stub_max_inflight_binds(f.stub), 2, "binds ran concurrently");
    cr_assert_leq(stub_connections(f.stub), 4, "keep-alive connections reused");
    bfx_fini(&f);
}

static void warm_three_of_four(k8s_config *cfg)
{
    cfg->bind_concurrency = 4;
    cfg->bind_warm = 3;
    cfg->bind_warm_idle_ms = 100;
}

static uint64_t warm_count(bfx *f, int how)
{
    k8s_status st;
    k8s_get_status(f->k, &st);
    return how == 0 ? st.bind_warm_opened : how == 1 ? st.bind_warm_refreshed : st.bind_warm_failed;
}

Test(k8s_bind, keep_warm_opens_ahead_and_refreshes_idle_connections)
{
    bfx f;
    bfx_init(&f, warm_three_of_four, false);
    cr_assert_eq(k8s_bind_keep_warm(f.k), 3);
    cr_assert_eq(stub_connections(f.stub), 3, "one connection per warmed handle");
    cr_assert_eq(stub_count(f.stub, "/version", STUB_LIST), 3);
    cr_assert_eq(warm_count(&f, 0), 3);
    /* within the idle window there is nothing to do */
    cr_assert_eq(k8s_bind_keep_warm(f.k), 0);
    /* a bind goes out on a warm connection */
    put_pod(&f, "w1", NULL);
    bind_ok(&f, "w1", "n1");
    cr_assert_eq(stub_connections(f.stub), 3, "the bind opened no connection");
    /* idle past the window: each open one is sent a GET on its connection */
    msleep(150);
    cr_assert_eq(k8s_bind_keep_warm(f.k), 3);
    cr_assert_eq(warm_count(&f, 1), 3);
    cr_assert_eq(stub_connections(f.stub), 3, "refreshed, not reopened");
    cr_assert_eq(stub_count(f.stub, "/version", STUB_LIST), 6);
    bfx_fini(&f);
}

Test(k8s_bind, keep_warm_stops_at_the_first_failure)
{
    bfx f;
    bfx_init(&f, warm_three_of_four, false);
    stub_fault(f.stub, "/version", STUB_LIST, STUB_F_STATUS, 500);
    cr_assert_eq(k8s_bind_keep_warm(f.k), 0);
    cr_assert_eq(stub_count(f.stub, "/version", STUB_LIST), 1, "one try a call");
    cr_assert_eq(warm_count(&f, 2), 1);
    /* the next call opens them; binds were never held up */
    cr_assert_eq(k8s_bind_keep_warm(f.k), 3);
    put_pod(&f, "w2", NULL);
    bind_ok(&f, "w2", "n2");
    bfx_fini(&f);
}

static void warm_two_housekept(k8s_config *cfg)
{
    cfg->bind_concurrency = 4;
    cfg->bind_warm = 2;
}

Test(k8s_bind, housekeeping_keeps_the_leaders_connections_warm)
{
    bfx f;
    bfx_init(&f, warm_two_housekept, true);
    for (int t = 0; t < 5000 && warm_count(&f, 0) < 2; t += 10)
        msleep(10);
    cr_assert_eq(warm_count(&f, 0), 2);
    msleep(200); /* several housekeeping rounds: still two */
    cr_assert_eq(warm_count(&f, 0), 2);
    cr_assert_eq(stub_count(f.stub, "/version", STUB_LIST), 2);
    bfx_fini(&f);
}

static bool fit_any(void *arg, const model_pod *pod, const cache_node *node, uint32_t *gpu)
{
    *gpu = 0;
    return true;
}

static model_pod *decode_pod(bfx *f, const char *name)
{
    char uid[128];
    snprintf(uid, sizeof uid, "uid-%s", name);
    json_t *j = stub_make_pod("default", name, uid, NULL, "1", "1Gi");
    model_pod *p = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(model_pod_from_json(&f->reg, j, &p, &d), AS_OK, "%s", d.msg);
    json_decref(j);
    return p;
}

static void assume(bfx *f, const model_pod *p, const char *node)
{
    cache_read_lock(f->c);
    cache_node *n = cache_node_find(f->c, node, strlen(node));
    cr_assert_not_null(n);
    uint32_t slot = n->slot;
    uint64_t id = n->id, bv = cache_node_bind_version(n);
    cache_read_unlock(f->c);
    cache_assume_result res;
    uint32_t gpu = 0;
    cr_assert_eq(cache_assume_if(f->c, p, slot, id, bv, fit_any, NULL, &res, &gpu), AS_OK);
    cr_assert(res == CACHE_ASSUME_FAST || res == CACHE_ASSUME_RECHECKED);
}

Test(k8s_bind, assumed_pod_confirmed_by_watch)
{
    bfx f;
    bfx_init(&f, NULL, true);
    put_pod(&f, "e", NULL);
    model_pod *p = decode_pod(&f, "e");
    assume(&f, p, "n1");
    cache_pod_info pi;
    cache_pod_lookup(f.c, "uid-e", &pi);
    cr_assert_eq(pi.state, CACHE_POD_ASSUMED);
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_bind(f.k, "default", "e", "uid-e", "n1", &d), AS_OK, "%s", d.msg);
    for (int t = 0; t < 3000; t += 10) {
        cache_pod_lookup(f.c, "uid-e", &pi);
        if (pi.state == CACHE_POD_BOUND)
            break;
        msleep(10);
    }
    cr_assert_eq(pi.state, CACHE_POD_BOUND, "the watch confirms our bind");
    cr_assert_str_eq(pi.node, "n1");
    cr_assert_eq(cache_check_invariants(f.c, &d), AS_OK, "%s", d.msg);
    model_pod_free(p);
    bfx_fini(&f);
}

Test(k8s_bind, failed_bind_released_and_unconfirmed_expires)
{
    bfx f;
    bfx_init(&f, NULL, true);
    /* Failure: the pod was deleted; the caller forgets the assumed pod. */
    model_pod *gone = decode_pod(&f, "gone");
    assume(&f, gone, "n0");
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_bind(f.k, "default", "gone", "uid-gone", "n0", &d), AS_ENOTFOUND);
    cr_assert_eq(cache_forget(f.c, "uid-gone"), AS_OK);
    cache_pod_info pi;
    cache_pod_lookup(f.c, "uid-gone", &pi);
    cr_assert_eq(pi.state, CACHE_POD_ABSENT);
    /* Never confirmed: housekeeping forgets it after the TTL. */
    put_pod(&f, "lost", NULL);
    model_pod *lost = decode_pod(&f, "lost");
    assume(&f, lost, "n2");
    for (int t = 0; t < 3000; t += 20) {
        cache_pod_lookup(f.c, "uid-lost", &pi);
        if (pi.state == CACHE_POD_ABSENT)
            break;
        msleep(20);
    }
    cr_assert_eq(pi.state, CACHE_POD_ABSENT, "expired after the assumed TTL");
    k8s_status st;
    k8s_get_status(f.k, &st);
    cr_assert_geq(st.assumed_expired, 1);
    cr_assert_eq(cache_check_invariants(f.c, &d), AS_OK, "%s", d.msg);
    model_pod_free(gone);
    model_pod_free(lost);
    bfx_fini(&f);
}

/* While the pods watch is down, and for a TTL after it is back, an
 * assumed pod is kept: its binding may be applied and not yet delivered. */
Test(k8s_bind, assumed_pod_kept_while_the_pods_watch_is_down)
{
    bfx f;
    bfx_init(&f, NULL, true);
    put_pod(&f, "held", NULL);
    model_pod *held = decode_pod(&f, "held");
    assume(&f, held, "n1");
    /* Synced means listed; the watches may still be on their way, and one
     * the stub takes after the drop below would stay up. */
    for (int t = 0; t < 5000 && stub_watchers(f.stub) < 2; t += 10)
        msleep(10);
    cr_assert_geq(stub_watchers(f.stub), 2, "the nodes and pods watches never opened");
    for (int i = 0; i < 40; i++)
        stub_fault(f.stub, "/api/v1/pods", STUB_ANY, STUB_F_STATUS, 500);
    stub_drop_watches(f.stub);
    k8s_status st;
    for (int t = 0; t < 3000; t += 10) {
        k8s_get_status(f.k, &st);
        if (st.down_since_ms[K8S_KIND_POD])
            break;
        msleep(10);
    }
    cr_assert_neq(st.down_since_ms[K8S_KIND_POD], 0, "the pods watch never went down");
    msleep(600); /* twice the TTL */
    cr_assert_gt(stub_faults_pending(f.stub), 0, "the outage ended too soon for this test");
    cache_pod_info pi;
    cache_pod_lookup(f.c, "uid-held", &pi);
    cr_assert_eq(pi.state, CACHE_POD_ASSUMED, "forgotten while the pods watch was down");
    /* Back up, and never bound: forgotten a TTL later. */
    for (int t = 0; t < 10000; t += 20) {
        cache_pod_lookup(f.c, "uid-held", &pi);
        if (pi.state == CACHE_POD_ABSENT)
            break;
        msleep(20);
    }
    cr_assert_eq(pi.state, CACHE_POD_ABSENT);
    k8s_get_status(f.k, &st);
    cr_assert_eq(st.down_since_ms[K8S_KIND_POD], 0);
    cr_assert_geq(st.assumed_expired, 1);
    model_pod_free(held);
    bfx_fini(&f);
}

Test(k8s_bind, events_posted_and_rate_limited)
{
    bfx f;
    bfx_init(&f, NULL, false);
    k8s_event_post(f.k, "default", "a", "uid-a", "Normal", "Scheduled",
                   "Successfully assigned default/a to n1");
    k8s_event_post(f.k, "default", "a", "uid-a", "Normal", "Scheduled",
                   "Successfully assigned default/a to n1");
    k8s_event_post(f.k, "default", "b", "uid-b", "Warning", "FailedScheduling",
                   "0/3 nodes are available: 3 Insufficient cpu.");
    for (int t = 0; t < 3000 && stub_events_posted(f.stub) < 2; t += 10)
        msleep(10);
    msleep(50);
    cr_assert_eq(stub_events_posted(f.stub), 2, "the duplicate was rate-limited");
    json_t *e = stub_last_event(f.stub);
    cr_assert_not_null(e);
    cr_assert_str_eq(json_string_value(json_object_get(e, "reason")), "FailedScheduling");
    cr_assert_str_eq(json_string_value(json_object_get(e, "type")), "Warning");
    json_t *io = json_object_get(e, "involvedObject");
    cr_assert_str_eq(json_string_value(json_object_get(io, "kind")), "Pod");
    cr_assert_str_eq(json_string_value(json_object_get(io, "name")), "b");
    cr_assert_str_eq(json_string_value(json_object_get(io, "uid")), "uid-b");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(e, "source"), "component")),
                     "agent-scheduler");
    cr_assert_str_eq(
        json_string_value(json_object_get(json_object_get(e, "metadata"), "namespace")), "default");
    json_decref(e);
    /* The stub counts an Event when it arrives; the poster counts it when
     * the answer is read, a moment later (longer on a loaded machine). */
    k8s_status st;
    k8s_get_status(f.k, &st);
    for (int t = 0; t < 3000 && st.events_posted < 2; t += 10) {
        msleep(10);
        k8s_get_status(f.k, &st);
    }
    cr_assert_eq(st.events_posted, 2);
    cr_assert_eq(st.events_dropped, 1);
    bfx_fini(&f);
}

static void tweak_event_qps(k8s_config *cfg)
{
    cfg->event_qps = 20;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Posts n Scheduled events of distinct pods named PREFIXi. */
static void post_events(k8s_client *k, const char *prefix, int n)
{
    char name[32];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%s%d", prefix, i);
        k8s_event_post(k, "default", name, name, "Normal", "Scheduled", "assigned");
    }
}

/* --event-qps: a burst of distinct pods' events is cut at the bucket's
 * size (the rate, 20), the rest dropped and counted; the bucket refills at
 * the rate. */
Test(k8s_bind, events_over_event_qps_are_dropped)
{
    bfx f;
    bfx_init(&f, tweak_event_qps, false);
    int64_t t0 = now_ms();
    post_events(f.k, "p", 50);
    int64_t t1 = now_ms();
    k8s_status st;
    k8s_get_status(f.k, &st);
    uint64_t first = 50 - st.events_dropped;
    /* 20 in the bucket, and what refilled while posting (1 per 50 ms) */
    cr_assert(first >= 20 && first <= 21 + (uint64_t)(t1 - t0) / 50, "%llu of 50 accepted",
              (unsigned long long)first);
    msleep(300);
    int64_t t2 = now_ms();
    post_events(f.k, "q", 50);
    int64_t t3 = now_ms();
    k8s_get_status(f.k, &st);
    uint64_t second = 100 - st.events_dropped - first;
    cr_assert(second >= 5 && second <= 2 + (uint64_t)(t3 - t1) / 50, "%llu accepted %lld ms later",
              (unsigned long long)second, (long long)(t2 - t1));
    /* the poster reads the answers a tick after it sent the Events */
    for (int t = 0; t < 5000 && (uint64_t)stub_events_posted(f.stub) < first + second; t += 10)
        msleep(10);
    for (int t = 0; t < 5000 && st.events_posted < first + second; t += 10) {
        msleep(10);
        k8s_get_status(f.k, &st);
    }
    cr_assert_eq(st.events_posted, first + second);
    cr_assert_eq((uint64_t)stub_events_posted(f.stub), first + second);
    bfx_fini(&f);
}

/* Events queued together go out in one tick, pipelined on the poster's
 * one connection; each counts as posted once its answer is read (the
 * tick after), under the same per-pod limit and --event-qps bucket. */
Test(k8s_bind, events_of_a_tick_pipelined)
{
    bfx f;
    bfx_init(&f, tweak_event_qps, false);
    char name[32];
    int64_t t0 = now_ms();
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "e%d", i);
        k8s_event_post(f.k, "default", name, name, "Normal", "Scheduled", "assigned");
    }
    k8s_event_post(f.k, "default", "e0", "e0", "Normal", "Scheduled", "again");
    int64_t t1 = now_ms();
    k8s_status st;
    k8s_get_status(f.k, &st);
    for (int t = 0; t < 5000 && st.events_posted + st.events_dropped < 41; t += 10) {
        msleep(10);
        k8s_get_status(f.k, &st);
    }
    /* the bucket (20) and what refilled while posting (1 per 50 ms) */
    cr_assert(st.events_posted >= 20 && st.events_posted <= 21 + (uint64_t)(t1 - t0) / 50,
              "%llu of 40 posted", (unsigned long long)st.events_posted);
    cr_assert_eq(st.events_dropped, 41 - st.events_posted, "the duplicate and the excess dropped");
    cr_assert_eq((uint64_t)stub_events_posted(f.stub), st.events_posted);
    json_t *e = stub_last_event(f.stub);
    cr_assert_not_null(e);
    cr_assert_str_eq(json_string_value(json_object_get(e, "reason")), "Scheduled");
    json_decref(e);
    /* idle again: a queued Event wakes the poster */
    msleep(300);
    int before = stub_events_posted(f.stub);
    k8s_event_post(f.k, "default", "late", "late", "Normal", "Scheduled", "assigned");
    for (int t = 0; t < 3000 && stub_events_posted(f.stub) == before; t += 1)
        usleep(1000);
    cr_assert_eq(stub_events_posted(f.stub), before + 1);
    bfx_fini(&f);
}

Test(k8s_bind, conflict_message_parsing)
{
    char out[64];
    const char *b1 = "{\"kind\":\"Status\",\"message\":\"Operation cannot be fulfilled on "
                     "pods/binding \\\"p\\\": pod p is already assigned to node \\\"node-7\\\"\"}";
    cr_assert(k8s_conflict_node(b1, strlen(b1), out, sizeof out));
    cr_assert_str_eq(out, "node-7");
    const char *b2 = "pod p is already assigned to node \"n1\"";
    cr_assert(k8s_conflict_node(b2, strlen(b2), out, sizeof out));
    cr_assert_str_eq(out, "n1");
    const char *b3 = "pod p is being deleted, cannot be assigned to a host";
    cr_assert_not(k8s_conflict_node(b3, strlen(b3), out, sizeof out));
    const char *b4 = "already assigned to node ";
    cr_assert_not(k8s_conflict_node(b4, strlen(b4), out, sizeof out));
    cr_assert_not(k8s_conflict_node("", 0, out, sizeof out));
}

Test(k8s_bind, after_stop)
{
    bfx f;
    bfx_init(&f, NULL, false);
    k8s_client_stop(f.k);
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_bind_async(f.k, "default", "x", NULL, "n0", NULL, NULL), AS_EINVAL);
    cr_assert_eq(k8s_bind(f.k, "default", "x", NULL, "n0", &d), AS_EIO);
    k8s_event_post(f.k, "default", "x", NULL, "Normal", "Scheduled", "m");
    bfx_fini(&f);
}

/* ---- the device annotation's patch (k8s_patch_pod) ---------------- */

static as_err err_named(const char *s)
{
    static const struct {
        const char *name;
        as_err err;
    } t[] = {{"OK", AS_OK},
             {"ECONFLICT", AS_ECONFLICT},
             {"EHTTP", AS_EHTTP},
             {"EAUTH", AS_EAUTH},
             {"ENOTFOUND", AS_ENOTFOUND}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(t[i].name, s))
            return t[i].err;
    cr_assert_fail("unknown error name %s", s);
    return AS_EINTERNAL;
}

Test(k8s_bind, patch_statuses_as_data)
{
    json_error_t je;
    json_t *cases = json_load_file(TEST_DATA_DIR "/k8s/patch_status.json", 0, &je);
    cr_assert_not_null(cases, "%s", je.text);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c)
    {
        long status = (long)json_integer_value(json_object_get(c, "status"));
        const char *body = json_string_value(json_object_get(c, "body"));
        bool retry = true;
        as_diag d = {{0}, {0}};
        as_err err = k8s_patch_status(status, body, strlen(body), "ns", "p", &retry, &d);
        cr_expect_eq(err, err_named(json_string_value(json_object_get(c, "err"))),
                     "case %zu (%ld): %s", i, status, d.msg);
        cr_expect_eq(retry, json_is_true(json_object_get(c, "retry")), "case %zu (%ld)", i, status);
        if (err)
            cr_expect(strstr(d.msg, "ns/p"), "case %zu names the pod: %s", i, d.msg);
    }
    json_decref(cases);
}

/* stub_pod_annotation: the annotation key of pod uid at the stub, "" when
 * absent. */
static const char *stub_pod_annotation(bfx *f, const char *uid, const char *key)
{
    static char out[256];
    out[0] = 0;
    json_t *pods = stub_objects(f->stub, STUB_POD);
    size_t i;
    json_t *v;
    json_array_foreach(pods, i, v)
    {
        json_t *md = json_object_get(v, "metadata");
        if (!strcmp(json_string_value(json_object_get(md, "uid")), uid)) {
            const char *a =
                json_string_value(json_object_get(json_object_get(md, "annotations"), key));
            snprintf(out, sizeof out, "%s", a ? a : "");
        }
    }
    json_decref(pods);
    return out;
}

static const char *stub_pod_rv(bfx *f, const char *uid)
{
    static char out[64];
    out[0] = 0;
    json_t *pods = stub_objects(f->stub, STUB_POD);
    size_t i;
    json_t *v;
    json_array_foreach(pods, i, v)
    {
        json_t *md = json_object_get(v, "metadata");
        if (!strcmp(json_string_value(json_object_get(md, "uid")), uid))
            snprintf(out, sizeof out, "%s",
                     json_string_value(json_object_get(md, "resourceVersion")));
    }
    json_decref(pods);
    return out;
}

static void patch_body(const char *uid, const char *rv, buf *b)
{
    gpuannot_patch p = {uid, rv, "n1", 0x5, 600, GPUANNOT_ALL, 1700000000000000000};
    buf_reset(b);
    cr_assert_eq(gpuannot_patch_body(&p, b), AS_OK);
}

Test(k8s_bind, patch_with_preconditions)
{
    bfx f;
    bfx_init(&f, NULL, true);
    put_pod(&f, "g", NULL);
    buf b;
    buf_init(&b, 1 << 16);
    as_diag d = {{0}, {0}};
    char rv[64];
    snprintf(rv, sizeof rv, "%s", stub_pod_rv(&f, "uid-g"));
    cr_assert(rv[0]);

    /* a resourceVersion that is not the pod's: 409, nothing written */
    patch_body("uid-g", "1", &b);
    cr_assert_eq(k8s_patch_pod(f.k, "default", "g", b.data, b.len, &d), AS_ECONFLICT, "%s", d.msg);
    cr_expect(strstr(d.msg, "409"), "%s", d.msg);
    cr_expect_str_eq(stub_pod_annotation(&f, "uid-g", GPUANNOT_DEVICES), "");
    /* a uid that is not the pod's (created again under its name): a conflict too */
    patch_body("uid-other", rv, &b);
    cr_assert_eq(k8s_patch_pod(f.k, "default", "g", b.data, b.len, &d), AS_ECONFLICT, "%s", d.msg);
    cr_expect_str_eq(stub_pod_annotation(&f, "uid-g", GPUANNOT_DEVICES), "");
    /* the pod as read: written, with both contracts */
    patch_body("uid-g", rv, &b);
    cr_assert_eq(k8s_patch_pod(f.k, "default", "g", b.data, b.len, &d), AS_OK, "%s", d.msg);
    cr_expect_str_eq(stub_pod_annotation(&f, "uid-g", GPUANNOT_DEVICES), "0,2");
    cr_expect_str_eq(stub_pod_annotation(&f, "uid-g", GPUANNOT_MILLI), "600");
    cr_expect_str_eq(stub_pod_annotation(&f, "uid-g", GPUANNOT_NODE), "n1");
    cr_expect_str_eq(stub_pod_annotation(&f, "uid-g", GPUANNOT_VOLCANO_INDEX), "0,2");
    cr_expect_str_eq(stub_pod_annotation(&f, "uid-g", GPUANNOT_VOLCANO_TIME),
                     "1700000000000000000");
    /* the same patch again: the resourceVersion moved, so a conflict */
    cr_assert_eq(k8s_patch_pod(f.k, "default", "g", b.data, b.len, &d), AS_ECONFLICT, "%s", d.msg);
    /* gone: 404 */
    cr_assert_eq(k8s_patch_pod(f.k, "default", "nope", b.data, b.len, &d), AS_ENOTFOUND, "%s",
                 d.msg);
    /* 5xx is retried, then written */
    snprintf(rv, sizeof rv, "%s", stub_pod_rv(&f, "uid-g"));
    patch_body("uid-g", rv, &b);
    stub_fault(f.stub, "/api/v1/namespaces/default/pods/g", STUB_PATCH, STUB_F_STATUS, 503);
    int before = stub_count(f.stub, "/api/v1/namespaces/default/pods/g", STUB_PATCH);
    cr_assert_eq(k8s_patch_pod(f.k, "default", "g", b.data, b.len, &d), AS_OK, "%s", d.msg);
    cr_expect_eq(stub_count(f.stub, "/api/v1/namespaces/default/pods/g", STUB_PATCH), before + 2);
    /* 403: no retry, the message says which permission */
    snprintf(rv, sizeof rv, "%s", stub_pod_rv(&f, "uid-g"));
    patch_body("uid-g", rv, &b);
    stub_fault(f.stub, "/api/v1/namespaces/default/pods/g", STUB_PATCH, STUB_F_STATUS, 403);
    cr_assert_eq(k8s_patch_pod(f.k, "default", "g", b.data, b.len, &d), AS_EAUTH, "%s", d.msg);
    cr_expect(strstr(d.msg, "patch on pods"), "%s", d.msg);
    cr_assert_eq(k8s_patch_pod(NULL, "default", "g", b.data, b.len, &d), AS_EUNSUPPORTED);
    buf_free(&b);
    bfx_fini(&f);
}

/* The API server answers a patch with the whole pod; one larger than the
 * answer's buffer (a pod with a 1 MiB annotation) is still written and
 * reported written, not failed as a response too large. */
Test(k8s_bind, a_patch_of_a_large_pod_succeeds)
{
    bfx f;
    bfx_init(&f, NULL, true);
    json_t *p = stub_make_pod("default", "big", "uid-big", NULL, "1", "1Gi");
    char *large = stub_filler(1 << 20);
    cr_assert_not_null(large);
    json_object_set_new(json_object_get(p, "metadata"), "annotations",
                        json_pack("{s:s}", "example.com/large", large));
    free(large);
    stub_put(f.stub, STUB_POD, p);
    json_decref(p);
    buf b;
    buf_init(&b, 1 << 16);
    as_diag d = {{0}, {0}};
    char rv[64];
    snprintf(rv, sizeof rv, "%s", stub_pod_rv(&f, "uid-big"));
    patch_body("uid-big", rv, &b);
    cr_assert_eq(k8s_patch_pod(f.k, "default", "big", b.data, b.len, &d), AS_OK, "%s", d.msg);
    cr_expect_str_eq(stub_pod_annotation(&f, "uid-big", GPUANNOT_DEVICES), "0,2");
    cr_expect_eq(stub_count(f.stub, "/api/v1/namespaces/default/pods/big", STUB_PATCH), 1,
                 "written once, not retried");
    buf_free(&b);
    bfx_fini(&f);
}

static void qps_4(k8s_config *cfg)
{
    cfg->qps = 4;
    cfg->burst = 1;
}

/* Pod patches go through the call loop under the client's rate limit:
 * past the burst the loop holds each one until its token is due, so five
 * patches at 4 a second take about a second, and all are written. */
Test(k8s_bind, patches_keep_the_client_qps)
{
    bfx f;
    bfx_init(&f, qps_4, false);
    put_pod(&f, "q", NULL);
    buf b;
    buf_init(&b, 4096);
    as_diag d = {{0}, {0}};
    char rv[64];
    uint64_t t0 = clock_mono_ns();
    for (int i = 0; i < 5; i++) {
        snprintf(rv, sizeof rv, "%s", stub_pod_rv(&f, "uid-q"));
        patch_body("uid-q", rv, &b);
        cr_assert_eq(k8s_patch_pod(f.k, "default", "q", b.data, b.len, &d), AS_OK, "%s", d.msg);
    }
    uint64_t took = (clock_mono_ns() - t0) / 1000000u;
    cr_assert_geq(took, 900, "5 patches at 4/s took %llu ms", (unsigned long long)took);
    cr_assert_eq(stub_count(f.stub, "/api/v1/namespaces/default/pods/q", STUB_PATCH), 5);
    buf_free(&b);
    bfx_fini(&f);
}

/* A 429 with Retry-After (API Priority and Fairness sends one) is waited
 * out before the retry, by a bind and by a pod patch alike, rather than
 * retried after the few milliseconds of the usual backoff. */
Test(k8s_bind, retry_after_is_honoured)
{
    bfx f;
    bfx_init(&f, NULL, true);
    put_pod(&f, "w", NULL);
    as_diag d = {{0}, {0}};
    bind_faults(&f, "w", STUB_F_RETRY_AFTER, 1, 1);
    uint64_t t0 = clock_mono_ns();
    bind_ok(&f, "w", "n1");
    uint64_t waited = (clock_mono_ns() - t0) / 1000000u;
    cr_assert_geq(waited, 950, "bind retried after %llu ms", (unsigned long long)waited);
    cr_assert_eq(stub_faults_pending(f.stub), 0);

    char rv[64];
    buf b;
    buf_init(&b, 4096);
    snprintf(rv, sizeof rv, "%s", stub_pod_rv(&f, "uid-w"));
    patch_body("uid-w", rv, &b);
    stub_fault(f.stub, "/api/v1/namespaces/default/pods/w", STUB_PATCH, STUB_F_RETRY_AFTER, 1);
    int before = stub_count(f.stub, "/api/v1/namespaces/default/pods/w", STUB_PATCH);
    t0 = clock_mono_ns();
    cr_assert_eq(k8s_patch_pod(f.k, "default", "w", b.data, b.len, &d), AS_OK, "%s", d.msg);
    waited = (clock_mono_ns() - t0) / 1000000u;
    cr_assert_geq(waited, 950, "patch retried after %llu ms", (unsigned long long)waited);
    cr_expect_eq(stub_count(f.stub, "/api/v1/namespaces/default/pods/w", STUB_PATCH), before + 2);
    cr_assert_str_eq(stub_pod_annotation(&f, "uid-w", GPUANNOT_NODE), "n1");
    buf_free(&b);
    bfx_fini(&f);
}

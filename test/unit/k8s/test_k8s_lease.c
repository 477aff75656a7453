/*
 * test_k8s_lease.c - leader election on a coordination.k8s.io/v1 Lease
 * (src/k8s/lease.c) against the stub's Leases: the decision table, create /
 * renew / follow / release / take-over-after-expiry, exactly one winner
 * when candidates race for a free lease, stepping down at the renew
 * deadline, and the client's elector thread calling the leader hook.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "agentsched/core/cache.h"
#include "agentsched/k8s/k8s.h"
#include "agentsched/k8s/lease.h"
#include "agentsched/base/log.h"
#include "k8s_stub.c"

#define LNS   "kube-system"
#define LNAME "agentsched-test"

static void msleep(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static json_t *lease_obj(const char *holder, const char *renew, int dur)
{
    return json_pack("{s:{s:s},s:{s:s,s:s,s:i,s:i}}", "metadata", "resourceVersion", "10", "spec",
                     "holderIdentity", holder, "renewTime", renew, "leaseDurationSeconds", dur,
                     "leaseTransitions", 3);
}

Test(k8s_lease, decide)
{
    k8s_lease_obs obs = {0};
    k8s_lease_observe(&obs, NULL, 1000);
    cr_assert_eq(k8s_lease_decide(&obs, "me", 1000), K8S_LEASE_CREATE);

    json_t *l = lease_obj("other", "2026-11-30T06:00:00.000000Z", 15);
    k8s_lease_observe(&obs, l, 1000);
    cr_assert_str_eq(obs.resource_version, "10");
    cr_assert_eq(obs.transitions, 3);
    cr_assert_eq(k8s_lease_decide(&obs, "me", 2000), K8S_LEASE_FOLLOW);
    /* the same record seen again does not restart the clock */
    k8s_lease_observe(&obs, l, 10000);
    cr_assert_eq(k8s_lease_decide(&obs, "me", 15000), K8S_LEASE_FOLLOW);
    cr_assert_eq(k8s_lease_decide(&obs, "me", 16001), K8S_LEASE_ACQUIRE);
    json_decref(l);
    /* the holder renewed: live again */
    l = lease_obj("other", "2026-11-30T06:00:10.000000Z", 15);
    k8s_lease_observe(&obs, l, 16001);
    cr_assert_eq(k8s_lease_decide(&obs, "me", 17000), K8S_LEASE_FOLLOW);
    json_decref(l);
    l = lease_obj("me", "2026-11-30T06:00:10.000000Z", 15);
    k8s_lease_observe(&obs, l, 17000);
    cr_assert_eq(k8s_lease_decide(&obs, "me", 17001), K8S_LEASE_RENEW);
    json_decref(l);
    l = lease_obj("", "2026-11-30T06:00:10.000000Z", 1); /* released */
    k8s_lease_observe(&obs, l, 18000);
    cr_assert_eq(k8s_lease_decide(&obs, "other", 18000), K8S_LEASE_ACQUIRE);
    json_decref(l);
}

/* ---- candidates against the stub --------------------------------------- */

/* stub_config: a client config with default knobs talking to stub through
 * conn (both filled here; conn must outlive the client's creation). */
static void stub_config(k8s_stub *stub, k8s_conn *conn, k8s_config *cfg)
{
    memset(conn, 0, sizeof *conn);
    conn->server = (char *)stub_url(stub);
    k8s_config_defaults(cfg);
    cfg->conn = conn;
    cfg->watch_shards = false;
}

typedef struct lfx {
    k8s_stub *stub;
    model_registry reg;
    cache *c;
    k8s_client *k;
} lfx;

static void lfx_init(lfx *f)
{
    memset(f, 0, sizeof *f);
    log_set_level(LOG_ERROR);
    f->stub = stub_new();
    model_registry_init(&f->reg);
    cr_assert_eq(cache_new(&f->reg, &f->c), AS_OK);
    k8s_conn conn;
    k8s_config cfg;
    stub_config(f->stub, &conn, &cfg);
    as_diag d = {{0}, {0}};
    /* Not started: a candidate only needs the client's connection. */
    cr_assert_eq(k8s_client_new(&cfg, f->c, &f->k, &d), AS_OK, "%s", d.msg);
}

static void lfx_fini(lfx *f)
{
    k8s_client_free(f->k);
    stub_free(f->stub);
    cache_free(f->c);
    model_registry_destroy(&f->reg);
}

static k8s_lease *candidate(lfx *f, const char *id, int64_t duration_ms)
{
    k8s_lease_config lc = {.ns = LNS, .name = LNAME, .identity = id, .duration_ms = duration_ms};
    k8s_lease *l = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_lease_new(f->k, &lc, &l, &d), AS_OK, "%s", d.msg);
    return l;
}

/* The stub's lease: holder (out) and leaseTransitions. */
static int64_t stub_holder(lfx *f, char *out, size_t len)
{
    json_t *l = stub_lease(f->stub, LNS, LNAME);
    cr_assert(l, "no Lease in the stub");
    json_t *spec = json_object_get(l, "spec");
    snprintf(out, len, "%s", json_string_value(json_object_get(spec, "holderIdentity")));
    int64_t t = (int64_t)json_integer_value(json_object_get(spec, "leaseTransitions"));
    json_decref(l);
    return t;
}

Test(k8s_lease, create_renew_follow_release_and_take_over)
{
    lfx f;
    lfx_init(&f);
    k8s_lease *a = candidate(&f, "a", 15000), *b = candidate(&f, "b", 15000);
    char h[64];

    cr_assert(k8s_lease_step(a, 1000), "the first candidate creates the lease holding it");
    cr_assert_eq(stub_holder(&f, h, sizeof h), 0);
    cr_assert_str_eq(h, "a");
    cr_assert_not(k8s_lease_step(b, 1000), "a live lease held by a: b follows");
    cr_assert_str_eq(k8s_lease_observed(b)->holder, "a");

    json_t *before = stub_lease(f.stub, LNS, LNAME);
    cr_assert(k8s_lease_step(a, 3000), "a renews");
    json_t *after = stub_lease(f.stub, LNS, LNAME);
    const char *rv0 =
        json_string_value(json_object_get(json_object_get(before, "metadata"), "resourceVersion"));
    const char *rv1 =
        json_string_value(json_object_get(json_object_get(after, "metadata"), "resourceVersion"));
    cr_assert_str_neq(rv0, rv1, "a renewal is a write");
    json_decref(before);
    json_decref(after);

    /* Released: b takes it at its next round, a transition. */
    k8s_lease_release(a, 4000);
    cr_assert_not(k8s_lease_held(a));
    stub_holder(&f, h, sizeof h);
    cr_assert_str_eq(h, "");
    cr_assert(k8s_lease_step(b, 4100));
    cr_assert_eq(stub_holder(&f, h, sizeof h), 1);
    cr_assert_str_eq(h, "b");

    /* b stops renewing: a takes over only once the record has been
     * unchanged for the whole duration on a's own clock. */
    cr_assert_not(k8s_lease_step(a, 5000));
    cr_assert_not(k8s_lease_step(a, 5000 + 15000), "not expired yet at exactly the duration");
    cr_assert(k8s_lease_step(a, 5000 + 15001));
    cr_assert_eq(stub_holder(&f, h, sizeof h), 2);
    cr_assert_str_eq(h, "a");
    /* b comes back: it sees a's lease and follows (never both). */
    cr_assert_not(k8s_lease_step(b, 30000));
    k8s_lease_free(a);
    k8s_lease_free(b);
    lfx_fini(&f);
}

Test(k8s_lease, leader_steps_down_at_the_renew_deadline)
{
    lfx f;
    lfx_init(&f);
    k8s_lease *a = candidate(&f, "a", 3000); /* renew deadline 2000 */
    cr_assert(k8s_lease_step(a, 1000));
    /* The API server answers 500 to every lease request from now on. */
    for (int i = 0; i < 6; i++)
        stub_fault(f.stub, "/apis/coordination.k8s.io/", STUB_ANY, STUB_F_STATUS, 500);
    cr_assert(k8s_lease_step(a, 2000), "within the deadline: still leading");
    cr_assert(k8s_lease_step(a, 2900), "before the deadline: still leading");
    cr_assert_eq(k8s_lease_deadline(a), 3000);
    cr_assert_not(k8s_lease_step(a, 3001), "past the deadline: stepped down");
    cr_assert_eq(k8s_lease_deadline(a), INT64_MAX);
    /* The deadline (2 s after the last renewal) comes before anyone may take
     * over (3 s without a change). */
    k8s_lease_free(a);
    lfx_fini(&f);
}

typedef struct racer {
    k8s_lease *l;
    pthread_barrier_t *go;
    int64_t now;
    bool won;
} racer;

static void *race_main(void *arg)
{
    racer *r = arg;
    pthread_barrier_wait(r->go);
    r->won = k8s_lease_step(r->l, r->now);
    return NULL;
}

Test(k8s_lease, candidates_racing_for_a_free_lease_elect_exactly_one)
{
    lfx f;
    lfx_init(&f);
    enum { N = 8, ROUNDS = 15 };
    racer r[N];
    char id[N][8];
    for (int i = 0; i < N; i++) {
        snprintf(id[i], sizeof id[i], "c%d", i);
        r[i] = (racer){.l = candidate(&f, id[i], 15000)};
    }
    for (int round = 0; round < ROUNDS; round++) {
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, N);
        pthread_t th[N];
        for (int i = 0; i < N; i++) {
            r[i].go = &go;
            r[i].now = 1000 + round * 100;
            pthread_create(&th[i], NULL, race_main, &r[i]);
        }
        int winners = 0, w = -1;
        for (int i = 0; i < N; i++) {
            pthread_join(th[i], NULL);
            if (r[i].won)
                winners++, w = i;
        }
        pthread_barrier_destroy(&go);
        cr_assert_eq(winners, 1, "round %d: %d candidates believe they lead", round, winners);
        char h[64];
        stub_holder(&f, h, sizeof h);
        cr_assert_str_eq(h, id[w], "round %d: the stub names %s, the winner is %s", round, h,
                         id[w]);
        k8s_lease_release(r[w].l, r[w].now);
    }
    for (int i = 0; i < N; i++)
        k8s_lease_free(r[i].l);
    lfx_fini(&f);
}

/* ---- the client's elector thread ------------------------------------- */

typedef struct hook_log {
    pthread_mutex_t mu;
    int calls;
    bool last;
    bool first_false; /* the first call said false */
} hook_log;

static void on_leader(void *arg, bool leading)
{
    hook_log *h = arg;
    pthread_mutex_lock(&h->mu);
    if (h->calls++ == 0)
        h->first_false = !leading;
    h->last = leading;
    pthread_mutex_unlock(&h->mu);
}

static bool hook_last(hook_log *h, int *calls)
{
    pthread_mutex_lock(&h->mu);
    bool v = h->last;
    if (calls)
        *calls = h->calls;
    pthread_mutex_unlock(&h->mu);
    return v;
}

static k8s_client *elector_client(k8s_stub *stub, cache *c, const char *id, hook_log *h)
{
    k8s_conn conn;
    k8s_config cfg;
    stub_config(stub, &conn, &cfg);
    cfg.lease_namespace = LNS;
    cfg.lease_name = LNAME;
    cfg.lease_identity = id;
    cfg.lease_duration_ms = 3000;
    cfg.lease_retry_ms = 50;
    cfg.leader_hook = on_leader;
    cfg.leader_hook_arg = h;
    /* the leader's bind connections are kept open, a standby's not */
    cfg.bind_concurrency = 4;
    cfg.bind_warm = 2;
    cfg.expire_period_ms = 50;
    k8s_client *k = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(k8s_client_new(&cfg, c, &k, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(k8s_client_start(k), AS_OK);
    return k;
}

static bool wait_for(hook_log *h, bool want, int ms)
{
    for (int i = 0; i < ms / 10; i++) {
        if (hook_last(h, NULL) == want)
            return true;
        msleep(10);
    }
    return hook_last(h, NULL) == want;
}

/* warm_opened: k's bind connections opened ahead of use, once there are
 * want of them or 3 s passed. */
static uint64_t warm_opened(k8s_client *k, uint64_t want)
{
    k8s_status st;
    for (int t = 0;; t += 10) {
        k8s_get_status(k, &st);
        if (st.bind_warm_opened >= want || t >= 3000)
            return st.bind_warm_opened;
        msleep(10);
    }
}

Test(k8s_lease, elector_thread_leads_hands_over_on_stop_and_reports_it)
{
    log_set_level(LOG_ERROR);
    k8s_stub *stub = stub_new();
    model_registry reg;
    model_registry_init(&reg);
    cache *c1, *c2;
    cr_assert_eq(cache_new(&reg, &c1), AS_OK);
    cr_assert_eq(cache_new(&reg, &c2), AS_OK);
    hook_log h1 = {.mu = PTHREAD_MUTEX_INITIALIZER}, h2 = {.mu = PTHREAD_MUTEX_INITIALIZER};

    k8s_client *k1 = elector_client(stub, c1, "one", &h1);
    cr_assert(wait_for(&h1, true, 3000), "the only candidate leads");
    cr_assert(h1.first_false, "the hook hears false before any round");
    k8s_client *k2 = elector_client(stub, c2, "two", &h2);
    msleep(300); /* six rounds of the second candidate */
    int calls = 0;
    cr_assert_not(hook_last(&h2, &calls));
    cr_assert_eq(calls, 1, "a follower hears false once (at start), nothing else");
    k8s_status st;
    k8s_get_status(k1, &st);
    cr_assert(st.leader_elect && st.leader);
    cr_assert_eq(st.leader_transitions, 1);
    cr_assert_str_eq(st.leader_holder, "one");
    k8s_get_status(k2, &st);
    cr_assert(st.leader_elect && !st.leader);
    cr_assert_str_eq(st.leader_holder, "one");
    cr_assert_eq(st.bind_warm_opened, 0, "a standby opens no bind connections");
    cr_assert_eq(warm_opened(k1, 2), 2, "the leader keeps its bind connections open");

    /* Stopping the leader releases the lease: the standby leads within a
     * few rounds, not after the 3 s duration. */
    k8s_client_stop(k1);
    json_t *l = stub_lease(stub, LNS, LNAME);
    const char *holder =
        json_string_value(json_object_get(json_object_get(l, "spec"), "holderIdentity"));
    cr_assert(holder && (!strcmp(holder, "") || !strcmp(holder, "two")),
              "stopping did not release the lease (holder %s)", holder);
    json_decref(l);
    cr_assert(wait_for(&h2, true, 2500), "the standby took over");
    cr_assert_eq(warm_opened(k2, 2), 2, "the new leader opens its bind connections");
    k8s_get_status(k1, &st);
    cr_assert_not(st.leader);
    k8s_client_free(k1);
    k8s_client_free(k2);
    cache_free(c1);
    cache_free(c2);
    model_registry_destroy(&reg);
    stub_free(stub);
}

Test(k8s_lease, no_election_means_always_leader)
{
    lfx f;
    lfx_init(&f);
    k8s_status st;
    k8s_get_status(f.k, &st);
    cr_assert(st.leader && !st.leader_elect);
    lfx_fini(&f);
}

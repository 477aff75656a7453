/* test_shard.c - NodeShard coordination: usable-set arithmetic, revision
 * gating of the status publish, hard/soft behaviour through sched_evaluate. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agentsched/core/cache.h"
#include "agentsched/core/sched.h"
#include "agentsched/core/score.h"
#include "agentsched/shard/shard.h"
#include "core_fixtures.h"

/* ---- shard table builders ------------------------------------------ */

static char **strv(const char *const *src, size_t n)
{
    char **v = calloc(n ? n : 1, sizeof *v);
    for (size_t i = 0; i < n; i++)
        v[i] = strdup(src[i]);
    return v;
}

#define NS(...)  ((const char *const[]){__VA_ARGS__})
#define CNT(...) (sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *))

static void mk(k8s_shard *s, const char *name, const char *const *desired, size_t nd,
               const char *const *in_use, size_t nu)
{
    memset(s, 0, sizeof *s);
    s->name = strdup(name);
    s->resource_version = strdup("1");
    s->nodes_desired = strv(desired, nd);
    s->n_desired = nd;
    s->nodes_in_use = strv(in_use, nu);
    s->n_in_use = nu;
}

static void free_table(k8s_shard *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        k8s_shard *s = &t[i];
        free(s->name);
        free(s->resource_version);
        for (size_t j = 0; j < s->n_desired; j++)
            free(s->nodes_desired[j]);
        free(s->nodes_desired);
        for (size_t j = 0; j < s->n_in_use; j++)
            free(s->nodes_in_use[j]);
        free(s->nodes_in_use);
    }
}

static void expect_names(const shard_names *got, const char *const *want, size_t n)
{
    cr_assert_eq(got->n, n, "got %zu names, want %zu", got->n, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_str_eq(got->v[i], want[i]);
}

/* ---- usable-set arithmetic ------------------------------------------ */

Test(shard_compute, usable_is_desired_minus_others_in_use)
{
    k8s_shard t[3];
    mk(&t[0], "agent", NS("n3", "n1", "n2", "n4", "n1"), 5, NS("n1", "n9"), 2);
    mk(&t[1], "volcano", NS("n5"), 1, NS("n2", "n5"), 2);
    mk(&t[2], "other", NS(""), 0, NS("n4"), 1);
    shard_view v;
    cr_assert_eq(shard_compute(t, 3, "agent", &v), AS_OK);
    cr_assert(v.own_present);
    expect_names(&v.desired, NS("n1", "n2", "n3", "n4"), 4);
    expect_names(&v.usable, NS("n1", "n3"), 2);
    expect_names(&v.to_add, NS("n2", "n4"), 2);
    expect_names(&v.to_remove, NS("n9"), 1); /* in use, no longer desired */
    cr_assert_not(v.status_current);
    cr_assert_str_eq(v.resource_version, "1");
    shard_view_free(&v);
    free_table(t, 3);
}

Test(shard_compute, own_in_use_does_not_block_itself_and_status_current)
{
    k8s_shard t[2];
    mk(&t[0], "agent", NS("a", "b"), 2, NS("a", "b"), 2);
    mk(&t[1], "volcano", NS("c"), 1, NS("c"), 1);
    shard_view v;
    cr_assert_eq(shard_compute(t, 2, "agent", &v), AS_OK);
    expect_names(&v.usable, NS("a", "b"), 2);
    cr_assert_eq(v.to_add.n, 0);
    cr_assert_eq(v.to_remove.n, 0);
    cr_assert(v.status_current);
    shard_view_free(&v);
    free_table(t, 2);
}

Test(shard_compute, status_current_compares_to_add_too)
{
    k8s_shard t[2];
    mk(&t[0], "agent", NS("a", "b"), 2, NS("a"), 1);
    mk(&t[1], "volcano", NS("b"), 1, NS("b"), 1);
    shard_view v;
    cr_assert_eq(shard_compute(t, 2, "agent", &v), AS_OK);
    expect_names(&v.to_add, NS("b"), 1);
    cr_assert_not(v.status_current, "the object does not say b is to be added yet");
    shard_view_free(&v);
    t[0].nodes_to_add = strv(NS("b"), 1);
    t[0].n_to_add = 1;
    cr_assert_eq(shard_compute(t, 2, "agent", &v), AS_OK);
    cr_assert(v.status_current);
    shard_view_free(&v);
    free(t[0].nodes_to_add[0]);
    free(t[0].nodes_to_add);
    t[0].nodes_to_add = NULL;
    free_table(t, 2);
}

Test(shard_compute, absent_own_shard_is_empty)
{
    k8s_shard t[1];
    mk(&t[0], "volcano", NS("c"), 1, NS("c"), 1);
    shard_view v;
    cr_assert_eq(shard_compute(t, 1, "agent", &v), AS_OK);
    cr_assert_not(v.own_present);
    cr_assert_eq(v.usable.n + v.desired.n + v.to_add.n, 0);
    shard_view_free(&v);
    cr_assert_eq(shard_compute(NULL, 0, "agent", &v), AS_OK);
    cr_assert_not(v.own_present);
    shard_view_free(&v);
    free_table(t, 1);
}

/* ---- coordinator over a real cache ----------------------------------- */

static model_registry reg;
static cache *c;
static score_policy *pol;
static int publishes;
static shard_names last_in_use;
static as_err publish_result;

static as_err fake_publish(void *arg, const char *name, const shard_view *st, as_diag *diag)
{
    (void)arg;
    (void)diag;
    cr_assert_str_eq(name, "agent");
    if (publish_result)
        return publish_result;
    __atomic_add_fetch(&publishes, 1, __ATOMIC_SEQ_CST); /* read by the test thread */
    shard_names_free(&last_in_use);
    last_in_use.v = calloc(st->usable.n + 1, sizeof(char *));
    for (size_t i = 0; i < st->usable.n; i++)
        last_in_use.v[i] = strdup(st->usable.v[i]);
    last_in_use.n = st->usable.n;
    return AS_OK;
}

static void setup(void)
{
    model_registry_init(&reg);
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
    cr_assert_eq(score_policy_new_default(&reg, &pol), AS_OK);
    publishes = 0;
    publish_result = AS_OK;
    memset(&last_in_use, 0, sizeof last_in_use);
    const char *names[] = {"n1", "n2", "n3", "n4"};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(cache_node_upsert(c, fx_node(names[i], 4000, 8 * FX_GI, 110)), AS_OK);
}

static void teardown(void)
{
    shard_names_free(&last_in_use);
    score_policy_unref(pol);
    cache_free(c);
    model_registry_destroy(&reg);
}

TestSuite(shard_coord, .init = setup, .fini = teardown);

static shard_coord *coord(cache_shard_mode mode)
{
    shard_coord_config cfg = {.name = "agent", .mode = mode, .cache = c, .publish = fake_publish};
    shard_coord *sc = NULL;
    as_diag d = {0};
    cr_assert_eq(shard_coord_new(&cfg, &sc, &d), AS_OK);
    return sc;
}

static bool in_shard(const char *name)
{
    cache_read_lock(c);
    cache_node *n = cache_node_find(c, name, strlen(name));
    bool r = n && cache_node_in_shard(n);
    cache_read_unlock(c);
    return r;
}

static void update(shard_coord *sc, const char *const *mine, size_t nm, const char *const *mine_use,
                   size_t nmu, const char *const *theirs_use, size_t ntu)
{
    k8s_shard t[2];
    mk(&t[0], "agent", mine, nm, mine_use, nmu);
    mk(&t[1], "volcano", NS("x"), 0, theirs_use, ntu);
    cr_assert_eq(shard_coord_update(sc, t, 2), AS_OK);
    free_table(t, 2);
}

Test(shard_coord, applies_usable_set_to_cache)
{
    shard_coord *sc = coord(CACHE_SHARD_HARD);
    update(sc, NS("n1", "n2", "n3"), 3, NS("n1"), 0, NS("n3"), 1);
    cr_assert(in_shard("n1"));
    cr_assert(in_shard("n2"));
    cr_assert_not(in_shard("n3")); /* the other shard still uses it */
    cr_assert_not(in_shard("n4"));
    /* the other side releases n3: it becomes usable without a restart */
    update(sc, NS("n1", "n2", "n3"), 3, NS("n1"), 0, NS("x"), 0);
    cr_assert(in_shard("n3"));
    shard_coord_stats st;
    shard_coord_get_stats(sc, &st);
    cr_assert_eq(st.applies, 2);
    cr_assert_eq(st.usable, 3);
    shard_coord_free(sc);
}

Test(shard_coord, publish_waits_for_in_flight_decisions_on_older_revision)
{
    shard_coord *sc = coord(CACHE_SHARD_HARD);
    bool pub = false;
    as_diag d = {0};
    update(sc, NS("n1", "n2"), 2, NS("n1"), 0, NS("x"), 0);
    cr_assert_eq(shard_coord_publish_now(sc, &pub, &d), AS_OK);
    cr_assert(pub);
    cr_assert_eq(publishes, 1);
    expect_names(&last_in_use, NS("n1", "n2"), 2);

    /* A decision starts against the usable set {n1, n2}... */
    uint64_t r1 = shard_decision_begin(sc);
    /* ...the controller moves n2 away: usable shrinks to {n1}. */
    update(sc, NS("n1"), 1, NS("n1", "n2"), 2, NS("x"), 0);
    cr_assert_not(in_shard("n2"));
    /* A decision started after the change does not block the publish. */
    uint64_t r2 = shard_decision_begin(sc);
    cr_assert_gt(r2, r1);
    cr_assert_eq(shard_coord_inflight(sc, r2), 1);
    /* Publishing "n2 no longer in use" now would let the other scheduler
     * take n2 while the first decision may still place a pod there. */
    cr_assert_eq(shard_coord_publish_now(sc, &pub, &d), AS_OK);
    cr_assert_not(pub);
    cr_assert_eq(publishes, 1);
    shard_decision_end(sc, r2);
    cr_assert_eq(shard_coord_publish_now(sc, &pub, &d), AS_OK);
    cr_assert_not(pub);
    shard_decision_end(sc, r1);
    cr_assert_eq(shard_coord_publish_now(sc, &pub, &d), AS_OK);
    cr_assert(pub);
    cr_assert_eq(publishes, 2);
    expect_names(&last_in_use, NS("n1"), 1);
    shard_coord_stats st;
    shard_coord_get_stats(sc, &st);
    cr_assert_geq(st.gated, 2);
    cr_assert_eq(st.pending_revision, 0);
    shard_coord_free(sc);
}

Test(shard_coord, failed_publish_is_retried_with_the_same_status)
{
    shard_coord *sc = coord(CACHE_SHARD_SOFT);
    bool pub = false;
    as_diag d = {0};
    update(sc, NS("n1"), 1, NS("n1"), 0, NS("x"), 0);
    publish_result = AS_EHTTP;
    cr_assert_eq(shard_coord_publish_now(sc, &pub, &d), AS_EHTTP);
    cr_assert_not(pub);
    publish_result = AS_OK;
    cr_assert_eq(shard_coord_publish_now(sc, &pub, &d), AS_OK);
    cr_assert(pub);
    expect_names(&last_in_use, NS("n1"), 1);
    /* our own status event comes back: nothing new to publish */
    update(sc, NS("n1"), 1, NS("n1"), 1, NS("x"), 0);
    cr_assert_eq(shard_coord_publish_now(sc, &pub, &d), AS_OK);
    cr_assert_not(pub);
    shard_coord_free(sc);
}

Test(shard_coord, publisher_thread_publishes_once_gate_opens)
{
    shard_coord *sc = coord(CACHE_SHARD_HARD);
    uint64_t r = shard_decision_begin(sc);
    cr_assert_eq(shard_coord_start(sc), AS_OK);
    update(sc, NS("n1"), 1, NS("n1"), 0, NS("x"), 0);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    cr_assert_eq(__atomic_load_n(&publishes, __ATOMIC_SEQ_CST), 0);
    shard_decision_end(sc, r);
    for (int i = 0; i < 200 * FX_SLOW && !__atomic_load_n(&publishes, __ATOMIC_SEQ_CST); i++)
        nanosleep(&ts, NULL);
    shard_coord_free(sc); /* joins the thread before we read */
    cr_assert_eq(publishes, 1);
}

Test(shard_coord, null_coordinator_is_a_no_op)
{
    cr_assert_eq(shard_decision_begin(NULL), 0);
    shard_decision_end(NULL, 0);
}

/* ---- hard / soft through sched_evaluate ------------------------------ */

static sched_result eval_pod(int64_t cpu)
{
    model_pod *pod = fx_pod("p", "u", cpu, FX_GI);
    sched_request rq = {.pod = pod, .policy = pol, .k = 4};
    sched_result r;
    cr_assert_eq(sched_evaluate(c, &rq, &r), AS_OK);
    model_pod_free(pod);
    return r;
}

Test(shard_coord, hard_mode_never_offers_nodes_outside_the_usable_set)
{
    shard_coord *sc = coord(CACHE_SHARD_HARD);
    update(sc, NS("n1", "n2"), 2, NS("n1"), 0, NS("n2"), 1); /* usable {n1} */
    sched_result r = eval_pod(1000);
    cr_assert_eq(r.ncand, 1);
    cr_assert_str_eq(r.cand[0].name, "n1");
    cr_assert_eq(r.shard_revision, cache_shard_revision(c));
    sched_result_free(&r);
    /* a pod that fits only outside the shard: unschedulable in hard mode */
    cache_node_upsert(c, fx_node("big", 64000, 64 * FX_GI, 110));
    r = eval_pod(32000);
    cr_assert_eq(r.ncand, 0);
    sched_result_free(&r);
    shard_coord_free(sc);
}

Test(shard_coord, soft_mode_prefers_shard_and_falls_back)
{
    shard_coord *sc = coord(CACHE_SHARD_SOFT);
    update(sc, NS("n1"), 1, NS("n1"), 0, NS("x"), 0);
    sched_result r = eval_pod(1000);
    cr_assert_eq(r.ncand, 1, "only in-shard candidates while one fits");
    cr_assert_str_eq(r.cand[0].name, "n1");
    sched_result_free(&r);
    cache_node_upsert(c, fx_node("big", 64000, 64 * FX_GI, 110));
    r = eval_pod(32000); /* fits only on the out-of-shard node */
    cr_assert_eq(r.ncand, 1);
    cr_assert_str_eq(r.cand[0].name, "big");
    sched_result_free(&r);
    shard_coord_free(sc);
}

/* ---- concurrency: the gate under load --------------------------------- */

typedef struct stress {
    shard_coord *sc;
    int stop;
    int violations;
    int published;
} stress;

static stress S;

static as_err checking_publish(void *arg, const char *name, const shard_view *st, as_diag *diag)
{
    (void)name;
    (void)st;
    (void)diag;
    stress *x = arg;
    shard_coord_stats cs;
    shard_coord_get_stats(x->sc, &cs);
    /* No decision older than the revision of the status being written may
     * be in flight while it is written. (Not the pending revision: an
     * update may land meanwhile, and decisions between the two revisions
     * are allowed; checking against it failed now and then under TSan.) */
    if (!cs.publishing_revision || shard_coord_inflight(x->sc, cs.publishing_revision) != 0)
        __atomic_add_fetch(&x->violations, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&x->published, 1, __ATOMIC_SEQ_CST);
    return AS_OK;
}

static void *decider(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&S.stop, __ATOMIC_SEQ_CST)) {
        uint64_t r = shard_decision_begin(S.sc);
        sched_result res = eval_pod(100);
        cr_assert_geq(res.shard_revision, r);
        sched_result_free(&res);
        shard_decision_end(S.sc, r);
    }
    return NULL;
}

Test(shard_coord, gate_holds_under_concurrent_decisions)
{
    memset(&S, 0, sizeof S);
    shard_coord_config cfg = {.name = "agent",
                              .mode = CACHE_SHARD_HARD,
                              .cache = c,
                              .publish = checking_publish,
                              .publish_arg = &S};
    as_diag d = {0};
    cr_assert_eq(shard_coord_new(&cfg, &S.sc, &d), AS_OK);
    cr_assert_eq(shard_coord_start(S.sc), AS_OK);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, decider, NULL);
    for (int i = 0; i < 60; i++) {
        if (i % 2)
            update(S.sc, NS("n1", "n2", "n3"), 3, NS("n1"), 0, NS("x"), 0);
        else
            update(S.sc, NS("n1"), 1, NS("n1"), 0, NS("x"), 0);
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    __atomic_store_n(&S.stop, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    /* With the deciders gone the last status goes out. */
    shard_coord_stats st;
    for (int i = 0; i < 200 * FX_SLOW; i++) {
        shard_coord_get_stats(S.sc, &st);
        if (!st.pending_revision)
            break;
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    shard_coord_free(S.sc);
    cr_assert_eq(st.pending_revision, 0);
    cr_assert_eq(S.violations, 0);
    cr_assert_gt(S.published, 0);
}

/* ---- own NodeShard absent: the last nodesDesired stays -------------- */

Test(shard_coord, absent_own_shard_keeps_the_last_desired_set)
{
    shard_coord *sc = coord(CACHE_SHARD_HARD);
    /* Never seen: nothing usable (as Volcano's agent scheduler starts). */
    k8s_shard other[1];
    mk(&other[0], "volcano", NS("x"), 0, NS("n9"), 1);
    cr_assert_eq(shard_coord_update(sc, other, 1), AS_OK);
    cr_assert_not(in_shard("n1"));
    free_table(other, 1);
    update(sc, NS("n1", "n2", "n3"), 3, NS("x"), 0, NS("x"), 0);
    cr_assert(in_shard("n1") && in_shard("n2") && in_shard("n3"));
    /* Deleted: n1..n3 stay usable, but a node another shard now uses is
     * given up (the one difference from Volcano, which freezes its set). */
    mk(&other[0], "volcano", NS("x"), 0, NS("n3"), 1);
    cr_assert_eq(shard_coord_update(sc, other, 1), AS_OK);
    free_table(other, 1);
    cr_assert(in_shard("n1") && in_shard("n2"));
    cr_assert_not(in_shard("n3"));
    shard_coord_stats st;
    shard_coord_get_stats(sc, &st);
    cr_assert_not(st.own_present);
    cr_assert(st.kept_last);
    cr_assert_eq(st.usable, 2);
    /* Back: its nodesDesired rules again. */
    update(sc, NS("n4"), 1, NS("x"), 0, NS("x"), 0);
    cr_assert(in_shard("n4"));
    cr_assert_not(in_shard("n1"));
    shard_coord_get_stats(sc, &st);
    cr_assert(st.own_present);
    cr_assert_not(st.kept_last);
    shard_coord_free(sc);
}

/* ---- another scheduler's status on our NodeShard --------------------- */

Test(shard_foreign_status, table)
{
    /* now = 2026-12-03T10:00:00Z */
    const int64_t now = 1796292000;
    static const struct {
        const char *manager, *time;
        bool want;
        int64_t age;
    } rows[] = {
        {"", "", false, -1},                               /* no status entry */
        {"agentsched", "2026-12-03T09:59:59Z", false, -1}, /* ours */
        {"vc-agent-scheduler", "2026-12-03T09:59:00Z", true, 60},
        {"vc-agent-scheduler", "2026-12-03T09:55:00Z", true, 300},  /* the window's edge */
        {"vc-agent-scheduler", "2026-12-03T09:54:59Z", false, 301}, /* stale: not live */
        {"vc-agent-scheduler", "garbage", true, -1},                /* unknown age: warn */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        k8s_shard s;
        memset(&s, 0, sizeof s);
        s.name = "agentsched";
        snprintf(s.status_manager, sizeof s.status_manager, "%s", rows[i].manager);
        snprintf(s.status_time, sizeof s.status_time, "%s", rows[i].time);
        int64_t age = 0;
        cr_assert_eq(shard_foreign_status(&s, SHARD_OWN_MANAGER, now, 300, &age), rows[i].want,
                     "row %zu", i);
        cr_assert_eq(age, rows[i].age, "row %zu: age %lld", i, (long long)age);
    }
    cr_assert_str_eq(SHARD_DEFAULT_NAME, "agentsched");
    cr_assert_str_neq(SHARD_DEFAULT_NAME, "agent-scheduler", "vc-agent-scheduler's default");
}

/*
 * test_eqcache.c - the equivalence cache answers exactly what a full-scan
 * sched_evaluate answers: randomized mutations of every kind (pods bound /
 * deleted, assume / forget, nodes added / removed / re-specced, shard
 * membership and mode, learned score tables), change-log wrap, class
 * eviction, admission, infeasible reasons, and concurrent deciders racing
 * writers (run under TSan / ASan too).
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/core/cache.h"
#include "agentsched/core/eqcache.h"
#include "agentsched/core/policy.h"
#include "agentsched/core/pred.h"
#include "agentsched/core/sched.h"
#include "agentsched/core/score.h"
#include "core_fixtures.h"

static model_registry reg;
static cache *c;

static void setup(void)
{
    model_registry_init(&reg);
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
    fx_res(&reg, reg.gpu_name); /* GPU nodes come and go: keep the index fixed */
}

static void teardown(void)
{
    cache_free(c);
    model_registry_destroy(&reg);
}

TestSuite(eqcache, .init = setup, .fini = teardown);

/* ---- random cluster ---------------------------------------------------- */

#define MAXPODS 4096

typedef struct world {
    unsigned seed;
    int next_node, next_pod;
    char uids[MAXPODS][32];
    bool assumed[MAXPODS];
    int npods;
} world;

static model_node *rand_node(world *w, const char *name)
{
    static const int64_t cpus[] = {4000, 8000, 8000, 16000};
    unsigned *sd = &w->seed;
    model_node *n = fx_node(name, cpus[rand_r(sd) % 4], (int64_t)(8 << (rand_r(sd) % 3)) * FX_GI,
                            8 + rand_r(sd) % 16);
    static const char *const zones[] = {"a", "b", "c"};
    fx_node_label(n, "zone", zones[rand_r(sd) % 3]);
    if (rand_r(sd) % 6 == 0)
        fx_node_taint(n, "dedicated", "gpu", MODEL_EFFECT_NO_SCHEDULE);
    if (rand_r(sd) % 4 == 0)
        fx_node_gpus(&reg, n, rand_r(sd) % 2 ? 4 : 8);
    if (rand_r(sd) % 25 == 0)
        n->ready = false;
    if (rand_r(sd) % 25 == 0)
        n->unschedulable = true;
    return n;
}

static void add_node(world *w)
{
    char name[32];
    snprintf(name, sizeof name, "n-%04d", w->next_node++);
    cr_assert_eq(cache_node_upsert(c, rand_node(w, name)), AS_OK);
}

/* a random existing node's name (copied), or false when there are none */
static bool rand_node_name(world *w, char *out, size_t len)
{
    cache_read_lock(c);
    size_t n = cache_node_count(c);
    if (n)
        snprintf(out, len, "%s", cache_node_at(c, (size_t)rand_r(&w->seed) % n)->spec->name);
    cache_read_unlock(c);
    return n != 0;
}

/* The pod shapes decisions are asked for. */
#define NSHAPES 7
static model_pod *shape(int i, const char *uid)
{
    model_pod *p;
    switch (i) {
    case 0:
        return fx_pod(uid, uid, 500, FX_GI);
    case 1:
        p = fx_pod(uid, uid, 1000, 2 * FX_GI);
        fx_pod_selector(p, "zone", "a");
        return p;
    case 2:
        p = fx_pod(uid, uid, 2000, 4 * FX_GI);
        fx_pod_tol(p, "dedicated", MODEL_TOL_EQUAL, "gpu", MODEL_EFFECT_NO_SCHEDULE);
        return p;
    case 3:
        p = fx_pod(uid, uid, 2000, 8 * FX_GI);
        fx_pod_gpu(&reg, p, 1, 0);
        fx_pod_tol(p, "dedicated", MODEL_TOL_EXISTS, "", MODEL_EFFECT_ALL);
        return p;
    case 4:
        p = fx_pod(uid, uid, 250, FX_GI / 2);
        fx_pod_gpu(&reg, p, 1, 250);
        return p;
    case 5:
        p = fx_pod(uid, uid, 250, FX_GI / 2);
        fx_pod_affinity_in(p, "zone", "b");
        return p;
    default:
        return fx_pod(uid, uid, 0, 0); /* best-effort: every usable node fits */
    }
}

static bool fit(void *arg, const model_pod *pod, const cache_node *node, uint32_t *dev)
{
    (void)arg;
    if (pred_check(&reg, cache_get_shard_mode(c), pod, node).code != PRED_OK)
        return false;
    return pred_gpu_choose(pod, node, dev);
}

static void bind_pod(world *w, bool assume)
{
    if (w->npods == MAXPODS)
        return;
    char node[32], uid[32];
    if (!rand_node_name(w, node, sizeof node))
        return;
    snprintf(uid, sizeof uid, "u-%d", w->next_pod++);
    model_pod *p = shape(rand_r(&w->seed) % NSHAPES, uid);
    p->req.v[MODEL_RES_CPU] += rand_r(&w->seed) % 3 * 100;
    p->req_mask |= p->req.v[MODEL_RES_CPU] ? 1u << MODEL_RES_CPU : 0;
    bool kept = true;
    if (assume) {
        cache_read_lock(c);
        const cache_node *n = cache_node_find(c, node, strlen(node));
        uint32_t slot = n->slot;
        uint64_t id = n->id;
        cache_read_unlock(c);
        cache_assume_result ar;
        cr_assert_eq(cache_assume_if(c, p, slot, id, 0, fit, NULL, &ar, NULL), AS_OK);
        kept = ar == CACHE_ASSUME_RECHECKED;
    } else {
        fx_pod_bind(p, node);
        cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
    }
    if (kept) {
        snprintf(w->uids[w->npods], sizeof w->uids[0], "%s", uid);
        w->assumed[w->npods++] = assume;
    }
    model_pod_free(p);
}

static void drop_pod(world *w)
{
    if (!w->npods)
        return;
    int i = rand_r(&w->seed) % w->npods;
    if (w->assumed[i])
        cr_assert_eq(cache_forget(c, w->uids[i]), AS_OK);
    else
        cr_assert_eq(cache_pod_delete(c, w->uids[i]), AS_OK);
    w->npods--;
    memcpy(w->uids[i], w->uids[w->npods], sizeof w->uids[0]);
    w->assumed[i] = w->assumed[w->npods];
}

static void shard_apply(world *w)
{
    const char *names[256];
    char buf[256][32];
    size_t n = 0;
    cache_read_lock(c);
    for (size_t i = 0; i < cache_node_count(c) && n < 256; i++)
        if (rand_r(&w->seed) % 2) {
            snprintf(buf[n], sizeof buf[n], "%s", cache_node_at(c, i)->spec->name);
            names[n] = buf[n];
            n++;
        }
    cache_read_unlock(c);
    cr_assert_eq(cache_shard_apply(c, names, n, NULL), AS_OK);
}

static void mutate(world *w)
{
    char name[32];
    switch (rand_r(&w->seed) % 16) {
    case 0:
    case 1:
    case 2:
    case 3:
        bind_pod(w, false);
        break;
    case 4:
    case 5:
        bind_pod(w, true);
        break;
    case 6:
    case 7:
    case 8:
        drop_pod(w);
        break;
    case 9:
        add_node(w);
        break;
    case 10:
        if (rand_node_name(w, name, sizeof name))
            cr_assert_eq(cache_node_remove(c, name), AS_OK);
        break;
    case 11:
    case 12:
        /* same name, new spec (allocatable, taints, labels, GPUs) */
        if (rand_node_name(w, name, sizeof name))
            cr_assert_eq(cache_node_upsert(c, rand_node(w, name)), AS_OK);
        break;
    case 13:
        shard_apply(w);
        break;
    default:
        break; /* nothing: the next decision consumes an empty log */
    }
}

/* ---- comparison ------------------------------------------------------ */

/* Full scans that failed a node for fragment's reserve (PRED_KEPT). */
static int kept_seen;

static void check_same(eqcache *e, score_policy *pol, const model_pod *pod, uint32_t k,
                       const char *what)
{
    sched_result a, b;
    cr_assert_eq(eqcache_evaluate(e, pol, pod, k, &a, NULL), AS_OK);
    sched_request req;
    memset(&req, 0, sizeof req);
    req.pod = pod;
    req.policy = pol;
    req.k = k;
    cr_assert_eq(sched_evaluate(c, &req, &b), AS_OK);
    for (uint32_t i = 0; i < b.nreasons; i++)
        kept_seen += b.reasons[i].reason.code == PRED_KEPT;
    cr_assert_eq(a.ncand, b.ncand, "%s: %u candidates, full scan %u", what, a.ncand, b.ncand);
    for (uint32_t i = 0; i < a.ncand; i++) {
        cr_assert_eq(a.cand[i].slot, b.cand[i].slot, "%s: cand %u slot %u vs %u (%s vs %s)", what,
                     i, a.cand[i].slot, b.cand[i].slot, a.cand[i].name, b.cand[i].name);
        cr_assert_eq(a.cand[i].node_id, b.cand[i].node_id, "%s: cand %u id", what, i);
        cr_assert_eq(a.cand[i].bind_version, b.cand[i].bind_version, "%s: cand %u version", what,
                     i);
        cr_assert(a.cand[i].score == b.cand[i].score, "%s: cand %u score %f vs %f", what, i,
                  a.cand[i].score, b.cand[i].score);
        cr_assert_str_eq(a.cand[i].name, b.cand[i].name, "%s: cand %u name", what, i);
    }
    cr_assert_eq(a.feasible, b.feasible, "%s: feasible %zu vs %zu", what, a.feasible, b.feasible);
    cr_assert_eq(a.shard_revision, b.shard_revision);
    /* Reasons are part of the answer only for an infeasible pod (eqcache.h). */
    cr_assert(a.ncand || a.nreasons == b.nreasons, "%s: reasons", what);
    for (uint32_t i = 0; !a.ncand && i < a.nreasons; i++) {
        cr_assert_eq(a.reasons[i].count, b.reasons[i].count);
        cr_assert_str_eq(a.reasons[i].text, b.reasons[i].text);
    }
    sched_result_free(&a);
    sched_result_free(&b);
}

/* check_same_names: eqcache_evaluate_names gives exactly sched_evaluate's
 * answer for a request naming some nodes (plus an unknown name and a
 * duplicate), per name (code, score) and overall (candidates, reasons). */
static void check_same_names(eqcache *e, score_policy *pol, const model_pod *pod, uint32_t k,
                             unsigned *seed, const char *what)
{
    char names[16][64];
    sched_name sn[18];
    size_t n = 0;
    cache_read_lock(c);
    size_t nodes = cache_node_count(c);
    for (size_t i = 0; i < 16 && nodes; i++) {
        snprintf(names[n], sizeof names[n], "%s",
                 cache_node_at(c, (size_t)rand_r(seed) % nodes)->spec->name);
        sn[n] = (sched_name){names[n], strlen(names[n]), 0};
        n++;
    }
    cache_read_unlock(c);
    sn[n++] = (sched_name){"no-such-node", 12, 0};
    if (n > 1)
        sn[n++] = sn[0];
    sched_request req;
    memset(&req, 0, sizeof req);
    req.pod = pod;
    req.policy = pol;
    req.k = k;
    req.names = sn;
    req.nnames = n;
    req.score_all = true;
    sched_result a, b;
    cr_assert_eq(eqcache_evaluate_names(e, pol, &req, &a, NULL), AS_OK);
    cr_assert_eq(sched_evaluate(c, &req, &b), AS_OK);
    for (size_t i = 0; i < n; i++) {
        cr_assert_eq(a.per_name[i].code, b.per_name[i].code, "%s: name %zu (%.*s) code %d vs %d",
                     what, i, (int)sn[i].len, sn[i].s, a.per_name[i].code, b.per_name[i].code);
        cr_assert_eq(a.per_name[i].arg, b.per_name[i].arg, "%s: name %zu arg", what, i);
        cr_assert(a.score[i] == b.score[i], "%s: name %zu score %f vs %f", what, i, a.score[i],
                  b.score[i]);
    }
    cr_assert_eq(a.ncand, b.ncand, "%s: names: %u candidates vs %u", what, a.ncand, b.ncand);
    for (uint32_t i = 0; i < a.ncand; i++) {
        cr_assert_eq(a.cand[i].slot, b.cand[i].slot, "%s: names: cand %u", what, i);
        cr_assert_eq(a.cand[i].bind_version, b.cand[i].bind_version, "%s: names: version", what);
        cr_assert(a.cand[i].score == b.cand[i].score, "%s: names: cand score", what);
    }
    cr_assert_eq(a.feasible, b.feasible, "%s: names: feasible", what);
    cr_assert_eq(a.nreasons, b.nreasons, "%s: names: reasons", what);
    for (uint32_t i = 0; i < a.nreasons; i++) {
        cr_assert_eq(a.reasons[i].count, b.reasons[i].count);
        cr_assert_str_eq(a.reasons[i].text, b.reasons[i].text);
    }
    sched_result_free(&a);
    sched_result_free(&b);
}

static void run_random(score_strategy strat, cache_shard_mode mode, unsigned seed, int steps,
                       bool learn)
{
    score_policy *pol;
    cr_assert_eq(score_policy_new_strategy(&reg, strat, &pol), AS_OK);
    eqcache_config ec;
    eqcache_config_defaults(&ec);
    ec.admit_first = true;
    eqcache *e;
    cr_assert_eq(eqcache_new(c, &ec, &e), AS_OK);
    world w;
    memset(&w, 0, sizeof w);
    w.seed = seed;
    cache_set_shard_mode(c, mode);
    for (int i = 0; i < 40; i++)
        add_node(&w);
    /* pairs of identical nodes make score ties that only the name breaks */
    for (int i = 0; i < 6; i++) {
        char name[32];
        snprintf(name, sizeof name, "tie-%d", i);
        model_node *n = fx_node(name, 8000, 16 * FX_GI, 16);
        fx_node_label(n, "zone", "a");
        cr_assert_eq(cache_node_upsert(c, n), AS_OK);
    }
    for (int i = 0; i < 150; i++)
        bind_pod(&w, false);
    if (mode != CACHE_SHARD_NONE)
        shard_apply(&w);
    model_pod *pods[NSHAPES];
    for (int i = 0; i < NSHAPES; i++) {
        char uid[32];
        snprintf(uid, sizeof uid, "probe-%d", i);
        pods[i] = shape(i, uid);
    }
    for (int step = 0; step < steps; step++) {
        int nm = rand_r(&w.seed) % 4;
        for (int m = 0; m < nm; m++)
            mutate(&w);
        if (learn && step % 3 == 0)
            score_observe_pod(pol, pods[rand_r(&w.seed) % NSHAPES]);
        if (step % 97 == 50) /* mode flips log every slot */
            cache_set_shard_mode(c, mode == CACHE_SHARD_SOFT ? CACHE_SHARD_HARD : CACHE_SHARD_SOFT);
        if (step % 97 == 60)
            cache_set_shard_mode(c, mode);
        int s = rand_r(&w.seed) % NSHAPES;
        uint32_t k = 1 + rand_r(&w.seed) % 5;
        char what[96];
        snprintf(what, sizeof what, "%s/%s seed %u step %d shape %d k %u",
                 score_strategy_name(strat), cache_shard_mode_name(mode), seed, step, s, k);
        /* names first on odd steps: its class is then behind the log (the
         * shared attempt gives way to the exclusive catch-up); after a
         * full decision it is current (answered under the shared lock) */
        if (step % 2)
            check_same_names(e, pol, pods[s], k, &w.seed, what);
        check_same(e, pol, pods[s], k, what);
        check_same_names(e, pol, pods[s], k, &w.seed, what);
    }
    eqcache_stats st;
    eqcache_get_stats(e, &st);
    cr_assert_gt(st.hits, 0);
    cr_assert_gt(st.reevaluated, 0);
    for (int i = 0; i < NSHAPES; i++)
        model_pod_free(pods[i]);
    eqcache_free(e);
    score_policy_unref(pol);
}

Test(eqcache, random_fragment_no_shards)
{
    kept_seen = 0;
    run_random(SCORE_FRAGMENT, CACHE_SHARD_NONE, 1, 600, true);
    cr_assert_gt(kept_seen, 0, "the run should meet nodes kept for their GPUs");
}

Test(eqcache, random_least_allocated_soft_shards)
{
    /* integer scores: many ties broken by name */
    run_random(SCORE_LEAST_ALLOCATED, CACHE_SHARD_SOFT, 2, 600, false);
}

Test(eqcache, random_fgd_learning_hard_shards)
{
    run_random(SCORE_FGD, CACHE_SHARD_HARD, 3, 500, true);
}

Test(eqcache, random_most_allocated_soft_shards)
{
    run_random(SCORE_MOST_ALLOCATED, CACHE_SHARD_SOFT, 4, 500, false);
}

Test(eqcache, random_best_fit_and_balanced)
{
    run_random(SCORE_BEST_FIT, CACHE_SHARD_NONE, 5, 300, false);
    cache_free(c);
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
    run_random(SCORE_BALANCED_ALLOCATION, CACHE_SHARD_NONE, 6, 300, false);
}

/* ---- targeted paths ---------------------------------------------------- */

static eqcache *new_eq(uint32_t max_classes, bool admit_first)
{
    eqcache_config ec;
    eqcache_config_defaults(&ec);
    ec.max_classes = max_classes;
    ec.admit_first = admit_first;
    eqcache *e;
    cr_assert_eq(eqcache_new(c, &ec, &e), AS_OK);
    return e;
}

Test(eqcache, log_wrap_forces_a_rebuild)
{
    score_policy *pol;
    cr_assert_eq(score_policy_new_default(&reg, &pol), AS_OK);
    world w = {.seed = 9};
    for (int i = 0; i < 20; i++)
        add_node(&w);
    eqcache *e = new_eq(0, true);
    model_pod *p = shape(0, "probe");
    eqcache_how how;
    sched_result r;
    cr_assert_eq(eqcache_evaluate(e, pol, p, 3, &r, &how), AS_OK);
    cr_assert_eq(how, EQCACHE_REBUILT);
    sched_result_free(&r);
    cr_assert_eq(eqcache_evaluate(e, pol, p, 3, &r, &how), AS_OK);
    cr_assert_eq(how, EQCACHE_HIT);
    sched_result_free(&r);
    /* more changes than the ring holds */
    uint64_t h0 = cache_log_head(c);
    for (int i = 0; cache_log_head(c) - h0 <= CACHE_LOG_CAP; i++) {
        bind_pod(&w, false);
        drop_pod(&w);
    }
    uint32_t tmp[4];
    cr_assert_not(cache_log_read(c, h0, 4, tmp), "entries behind the ring must read as lost");
    check_same(e, pol, p, 3, "after wrap");
    eqcache_stats st;
    eqcache_get_stats(e, &st);
    cr_assert_eq(st.rebuild_wrap, 1);
    cr_assert_eq(st.rebuilds, 2);
    check_same(e, pol, p, 3, "after wrap, incremental");
    model_pod_free(p);
    eqcache_free(e);
    score_policy_unref(pol);
}

Test(eqcache, change_log_records_slots)
{
    world w = {.seed = 3};
    uint64_t h0 = cache_log_head(c);
    add_node(&w); /* slot 0 */
    add_node(&w); /* slot 1 */
    add_node(&w); /* slot 2 */
    uint32_t s[8];
    cr_assert_eq(cache_log_head(c) - h0, 3);
    cr_assert(cache_log_read(c, h0, 3, s));
    cr_assert(s[0] == 0 && s[1] == 1 && s[2] == 2);
    uint64_t h1 = cache_log_head(c);
    cr_assert_eq(cache_node_remove(c, "n-0000"), AS_OK); /* n-0002 moves into slot 0 */
    cr_assert_eq(cache_log_head(c) - h1, 2);
    cr_assert(cache_log_read(c, h1, 2, s));
    cr_assert(s[0] == 0 && s[1] == 2, "hole and old last slot: %u %u", s[0], s[1]);
    uint64_t h2 = cache_log_head(c);
    model_pod *p = fx_pod("x", "x", 100, 0);
    fx_pod_bind(p, "n-0001");
    cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
    cr_assert_eq(cache_pod_delete(c, "x"), AS_OK);
    cr_assert_eq(cache_log_head(c) - h2, 2);
    cr_assert(cache_log_read(c, h2, 2, s));
    cr_assert(s[0] == 1 && s[1] == 1);
    model_pod_free(p);
}

Test(eqcache, eviction_keeps_answers_exact)
{
    score_policy *pol;
    cr_assert_eq(score_policy_new_default(&reg, &pol), AS_OK);
    world w = {.seed = 11};
    for (int i = 0; i < 30; i++)
        add_node(&w);
    eqcache *e = new_eq(2, true);
    model_pod *pods[4];
    for (int i = 0; i < 4; i++)
        pods[i] = shape(i, "probe");
    for (int round = 0; round < 20; round++) {
        mutate(&w);
        check_same(e, pol, pods[round % 4], 3, "evicting");
    }
    eqcache_stats st;
    eqcache_get_stats(e, &st);
    cr_assert_leq(st.classes, 2);
    cr_assert_gt(st.evictions, 0);
    cr_assert_gt(st.bytes, 0);
    for (int i = 0; i < 4; i++)
        model_pod_free(pods[i]);
    eqcache_free(e);
    score_policy_unref(pol);
}

Test(eqcache, second_sighting_admits)
{
    score_policy *pol;
    cr_assert_eq(score_policy_new_default(&reg, &pol), AS_OK);
    world w = {.seed = 12};
    for (int i = 0; i < 10; i++)
        add_node(&w);
    eqcache *e = new_eq(0, false);
    model_pod *p = shape(0, "probe");
    eqcache_how how;
    sched_result r;
    eqcache_how want[] = {EQCACHE_BYPASS, EQCACHE_REBUILT, EQCACHE_HIT};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(eqcache_evaluate(e, pol, p, 3, &r, &how), AS_OK);
        cr_assert_eq(how, want[i], "decision %d", i);
        cr_assert_gt(r.ncand, 0);
        sched_result_free(&r);
    }
    /* A first sighting runs the caller's own request (early stop here). */
    model_pod *q = shape(1, "probe-ex");
    sched_request req;
    memset(&req, 0, sizeof req);
    req.pod = q;
    req.policy = pol;
    req.k = 3;
    req.max_feasible = 1;
    cr_assert_eq(eqcache_evaluate_ex(e, pol, q, 3, &req, &r, &how), AS_OK);
    cr_assert_eq(how, EQCACHE_BYPASS);
    cr_assert_leq(r.ncand, 1);
    sched_result_free(&r);
    cr_assert_eq(eqcache_evaluate_ex(e, pol, q, 3, &req, &r, &how), AS_OK);
    cr_assert_eq(how, EQCACHE_REBUILT, "the second sighting is a full evaluation");
    sched_result_free(&r);
    model_pod_free(q);
    /* A different policy object (reload) rebuilds the class. */
    score_policy *pol2;
    cr_assert_eq(score_policy_new_strategy(&reg, SCORE_LEAST_ALLOCATED, &pol2), AS_OK);
    cr_assert_eq(eqcache_evaluate(e, pol2, p, 3, &r, &how), AS_OK);
    cr_assert_eq(how, EQCACHE_REBUILT);
    sched_result_free(&r);
    check_same(e, pol2, p, 3, "new policy");
    score_policy_unref(pol); /* the class no longer needs the old one */
    model_pod_free(p);
    eqcache_free(e);
    score_policy_unref(pol2);
}

Test(eqcache, infeasible_pod_gets_full_reasons)
{
    score_policy *pol;
    cr_assert_eq(score_policy_new_default(&reg, &pol), AS_OK);
    world w = {.seed = 13};
    for (int i = 0; i < 25; i++)
        add_node(&w);
    eqcache *e = new_eq(0, true);
    model_pod *p = fx_pod("big", "big", 64000, FX_GI);
    for (int i = 0; i < 3; i++)
        check_same(e, pol, p, 3, "infeasible");
    sched_result r;
    cr_assert_eq(eqcache_evaluate(e, pol, p, 3, &r, NULL), AS_OK);
    cr_assert_eq(r.ncand, 0);
    cr_assert_gt(r.nreasons, 0);
    char msg[1024];
    sched_format_unschedulable(&r, r.evaluated, msg, sizeof msg);
    cr_assert(strstr(msg, "0/25 nodes are available:") && strstr(msg, "Insufficient cpu"), "%s",
              msg);
    sched_result_free(&r);
    model_pod_free(p);
    eqcache_free(e);
    score_policy_unref(pol);
}

Test(eqcache, table_generation_moves_only_on_real_change)
{
    score_policy *la;
    cr_assert_eq(score_policy_new_strategy(&reg, SCORE_LEAST_ALLOCATED, &la), AS_OK);
    model_pod *p = shape(3, "g");
    uint64_t g0 = score_policy_generation(la);
    for (int i = 0; i < 200; i++)
        score_observe_pod(la, p);
    cr_assert_eq(score_policy_generation(la), g0, "least-allocated never reads the tables");
    score_policy *fr;
    cr_assert_eq(score_policy_new_default(&reg, &fr), AS_OK);
    uint64_t f0 = score_policy_generation(fr);
    score_observe_pod(fr, p);
    cr_assert_neq(score_policy_generation(fr), f0, "fragment learns from a GPU pod");
    /* CPU-only pods at steady state: the share of GPU pods is 0 and stays */
    score_policy *fr2;
    cr_assert_eq(score_policy_new_default(&reg, &fr2), AS_OK);
    model_pod *q = shape(0, "c");
    for (int i = 0; i < 256; i++)
        score_observe_pod(fr2, q);
    uint64_t f2 = score_policy_generation(fr2);
    for (int i = 0; i < 256; i++)
        score_observe_pod(fr2, q);
    cr_assert_eq(score_policy_generation(fr2), f2);
    model_pod_free(p);
    model_pod_free(q);
    score_policy_unref(la);
    score_policy_unref(fr);
    score_policy_unref(fr2);
}

/* keep_setup: four 2-GPU nodes g0-g3 in c, and the fragment policy of yaml
 * after 20 shares of 810 milli like *big, so what an 810 leaves of a free
 * device fits none of the shares seen (the caller frees *big and unrefs
 * the policy). */
static score_policy *keep_setup(const char *yaml, model_pod **big)
{
    score_policy *pol = fx_policy(&reg, yaml);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(cache_node_upsert(c, fx_gpu_node(&reg, i, 2)), AS_OK);
    *big = fx_pod("big", "big", 3000, 4 * FX_GI);
    fx_pod_gpu(&reg, *big, 1, 810);
    for (int i = 0; i < 20; i++)
        score_observe_pod(pol, *big);
    return pol;
}

/* fragment's keepFree depends on how many devices are free in the whole
 * cluster, which changes no node the class has not seen change: a class
 * built while free devices were plenty must not answer from its old
 * evaluations once they are short, nor the other way round. */
Test(eqcache, free_devices_short_rebuilds_the_class)
{
    model_pod *big = NULL;
    score_policy *pol = keep_setup("strategy: fragment\nfragment:\n  keepFree: 0.5\n", &big);
    eqcache *e = new_eq(8, true);
    kept_seen = 0;
    check_same(e, pol, big, 3, "8 of 8 devices free");
    cr_assert_eq(kept_seen, 0);
    /* whole GPUs fill g0 and g1: 4 of 8 free, short at keepFree 0.5 */
    for (int i = 0; i < 2; i++) {
        char uid[8], node[8];
        snprintf(uid, sizeof uid, "w%d", i);
        snprintf(node, sizeof node, "g%d", i);
        model_pod *w = fx_pod(uid, uid, 1000, FX_GI);
        fx_pod_gpu(&reg, w, 2, 0);
        fx_pod_bind(w, node);
        cr_assert_eq(cache_pod_upsert(c, w), AS_OK);
        model_pod_free(w);
    }
    cr_assert(score_policy_devices_short(pol, c));
    check_same(e, pol, big, 3, "4 of 8 free: short");
    cr_assert_gt(kept_seen, 0, "g2 and g3 keep their free devices from the 810 share");
    cr_assert_eq(cache_pod_delete(c, "w0"), AS_OK);
    cr_assert_not(score_policy_devices_short(pol, c));
    kept_seen = 0;
    check_same(e, pol, big, 3, "6 of 8 free again");
    cr_assert_eq(kept_seen, 0);
    eqcache_free(e);
    model_pod_free(big);
    score_policy_unref(pol);
}

/* keepFreeFragmented makes free devices short by what is free in pieces,
 * which a share bound on another node changes: 2 of 8 devices free (on
 * g3; keepFree 0.125 keeps at 1, keepFreeFragmented 0.25 at 2) are short
 * while the 2700 milli free on g0-g2's partly used devices make them at
 * most half the 4700 free, and not once an 800 share on g0 leaves 3900. */
Test(eqcache, free_capacity_in_pieces_rebuilds_the_class)
{
    model_pod *big = NULL;
    score_policy *pol = keep_setup(
        "strategy: fragment\nfragment:\n  keepFree: 0.125\n  keepFreeFragmented: 0.25\n", &big);
    eqcache *e = new_eq(8, true);
    fx_bind_pieces(&reg, c, 3);
    cr_assert(score_policy_devices_short(pol, c));
    kept_seen = 0;
    check_same(e, pol, big, 3, "2 of 8 free, 2700 milli in pieces: short");
    cr_assert_gt(kept_seen, 0, "g3 keeps its free devices from the 810 share");
    fx_bind_gpu(&reg, c, "f0", "g0", 1, 800);
    cr_assert_not(score_policy_devices_short(pol, c));
    kept_seen = 0;
    check_same(e, pol, big, 3, "1900 milli in pieces: the free devices hold more than half");
    cr_assert_eq(kept_seen, 0);
    eqcache_free(e);
    model_pod_free(big);
    score_policy_unref(pol);
}

/* fragment's modelPressure reads its model's device count and the
 * cluster's, which a node joining or leaving changes for every node of
 * the model: a class must not keep the other nodes' old scores. 8 of 16
 * devices are T4 and all the pinned demand is T4's (r = 2); a T4 node
 * joining makes it 10 of 18 (r = 1.8), then a G2 node 10 of 22 (r = 2.2),
 * the T4 node leaving 8 of 20 (r = 2.5). It reads free-capacity levels
 * too, which pods elsewhere move: whole GPUs on two G2 nodes. */
Test(eqcache, model_device_counts_rebuild_the_class)
{
    static const uint32_t gpus[] = {2, 3, 3, 4, 4};
    score_policy *pol = NULL;
    cr_assert_eq(score_policy_new_default(&reg, &pol), AS_OK);
    for (int i = 0; i < 5; i++) {
        model_node *n = fx_gpu_node(&reg, i, gpus[i]);
        n->gpu_model = i < 3 ? "T4" : "G2";
        cr_assert_eq(cache_node_upsert(c, n), AS_OK);
    }
    model_pod *pinned = fx_pod("p", "p", 1000, FX_GI);
    fx_pod_gpu(&reg, pinned, 1, 0);
    fx_pod_selector(pinned, "agentsched.io/gpu-model", "T4");
    model_pod *any = fx_pod("a", "a", 1000, FX_GI);
    fx_pod_gpu(&reg, any, 1, 0);
    for (int i = 0; i < 40; i++)
        score_observe_pod(pol, pinned);
    eqcache *e = new_eq(8, true);
    check_same(e, pol, any, 6, "8 of 16 devices T4");
    model_node *n = fx_gpu_node(&reg, 6, 2);
    n->gpu_model = "T4";
    cr_assert_eq(cache_node_upsert(c, n), AS_OK);
    check_same(e, pol, any, 6, "a T4 node joined");
    n = fx_gpu_node(&reg, 7, 4);
    n->gpu_model = "G2";
    cr_assert_eq(cache_node_upsert(c, n), AS_OK);
    check_same(e, pol, any, 6, "a G2 node joined");
    cr_assert_eq(cache_node_remove(c, "g6"), AS_OK);
    check_same(e, pol, any, 6, "the T4 node left");
    /* Pods on the G2 nodes only: the cluster's free level falls while
     * T4's stays, so T4's share of the free capacity rises and with it the
     * pressure on every T4 node, though none of them changed. */
    for (int i = 0; i < 2; i++) {
        char uid[8], node[8];
        snprintf(uid, sizeof uid, "w%d", i);
        snprintf(node, sizeof node, "g%d", 3 + i);
        model_pod *w = fx_pod(uid, uid, 1000, FX_GI);
        fx_pod_gpu(&reg, w, 2, 0);
        fx_pod_bind(w, node);
        uint64_t v = cache_gpu_devices_version(c);
        cr_assert_eq(cache_pod_upsert(c, w), AS_OK);
        cr_assert_neq(cache_gpu_devices_version(c), v, "the cluster's free level moved");
        model_pod_free(w);
        check_same(e, pol, any, 6, "two G2 devices taken");
    }
    eqcache_free(e);
    model_pod_free(pinned);
    model_pod_free(any);
    score_policy_unref(pol);
}

/* ---- concurrency ------------------------------------------------------- */

typedef struct race {
    eqcache *e;
    score_policy *pol;
    int stop; /* atomic */
    unsigned seed;
    int decisions; /* atomic */
} race;

/* names_decision decides pod over up to 24 named nodes (copied from the
 * cache under its read lock, so some may be gone by the decision) with
 * eqcache_evaluate_names and checks what holds whatever the writers do. */
static void names_decision(race *r, const model_pod *pod, uint32_t k, unsigned *seed)
{
    char names[24][64];
    sched_name sn[24];
    size_t n = 0;
    cache_read_lock(c);
    size_t nodes = cache_node_count(c);
    for (; n < 24 && nodes; n++) {
        snprintf(names[n], sizeof names[n], "%s",
                 cache_node_at(c, (size_t)rand_r(seed) % nodes)->spec->name);
        sn[n] = (sched_name){names[n], strlen(names[n]), 0};
    }
    cache_read_unlock(c);
    sched_request req;
    memset(&req, 0, sizeof req);
    req.pod = pod;
    req.policy = r->pol;
    req.k = k;
    req.names = sn;
    req.nnames = n;
    req.score_all = true;
    sched_result res;
    cr_assert_eq(eqcache_evaluate_names(r->e, r->pol, &req, &res, NULL), AS_OK);
    size_t fits = 0;
    for (size_t i = 0; i < n; i++) {
        bool ok = res.per_name[i].code == PRED_OK;
        fits += ok;
        cr_assert(ok ? res.score[i] >= 0 : res.score[i] < 0, "name %zu: code %d score %f", i,
                  res.per_name[i].code, res.score[i]);
    }
    cr_assert_eq(res.feasible, fits);
    cr_assert_leq(res.ncand, k);
    for (uint32_t i = 1; i < res.ncand; i++)
        cr_assert(res.cand[i].score <= res.cand[i - 1].score);
    sched_result_free(&res);
}

static void *decider(void *arg)
{
    race *r = arg;
    unsigned seed = __atomic_add_fetch(&r->seed, 1, __ATOMIC_RELAXED);
    /* Every other decider names its nodes, as the extenders do: those
     * share their class's lock while the cluster holds still. */
    bool names = seed % 2 == 0;
    model_pod *pods[NSHAPES];
    for (int i = 0; i < NSHAPES; i++)
        pods[i] = shape(i, "probe");
    while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        uint32_t k = 1 + rand_r(&seed) % 4;
        if (names) {
            names_decision(r, pods[rand_r(&seed) % NSHAPES], k, &seed);
            __atomic_add_fetch(&r->decisions, 1, __ATOMIC_RELAXED);
            continue;
        }
        sched_result res;
        cr_assert_eq(eqcache_evaluate(r->e, r->pol, pods[rand_r(&seed) % NSHAPES], k, &res, NULL),
                     AS_OK);
        cr_assert_leq(res.ncand, k);
        for (uint32_t i = 1; i < res.ncand; i++)
            cr_assert(res.cand[i].score <= res.cand[i - 1].score);
        sched_result_free(&res);
        __atomic_add_fetch(&r->decisions, 1, __ATOMIC_RELAXED);
    }
    for (int i = 0; i < NSHAPES; i++)
        model_pod_free(pods[i]);
    return NULL;
}

Test(eqcache, concurrent_deciders_and_writers)
{
    score_policy *pol;
    cr_assert_eq(score_policy_new_default(&reg, &pol), AS_OK);
    world w = {.seed = 21};
    for (int i = 0; i < 40; i++)
        add_node(&w);
    for (int i = 0; i < 100; i++)
        bind_pod(&w, false);
    race r = {new_eq(3, false), pol, 0, 100, 0};
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, decider, &r), 0);
    model_pod *gpu = shape(3, "g");
    while (!__atomic_load_n(&r.decisions, __ATOMIC_RELAXED))
        sched_yield(); /* the deciders are running */
    for (int i = 0;
         i < 1500 || (i < 20000 && __atomic_load_n(&r.decisions, __ATOMIC_RELAXED) < 300); i++) {
        mutate(&w);
        if (i % 100 == 0) /* learned tables change under the deciders */
            score_observe_pod(pol, gpu);
    }
    model_pod_free(gpu);
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    cr_assert_gt(__atomic_load_n(&r.decisions, __ATOMIC_RELAXED), 0);
    /* Quiescent again: every class catches up to exactly the full scan. */
    model_pod *pods[NSHAPES];
    for (int i = 0; i < NSHAPES; i++) {
        pods[i] = shape(i, "probe");
        check_same(r.e, pol, pods[i], 3, "after the race");
        check_same(r.e, pol, pods[i], 3, "after the race, again");
        unsigned seed = 7u + (unsigned)i;
        check_same_names(r.e, pol, pods[i], 3, &seed, "names after the race");
        model_pod_free(pods[i]);
    }
    eqcache_free(r.e);
    score_policy_unref(pol);
}

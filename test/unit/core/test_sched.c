/* test_sched.c - sched_evaluate: top-K, reasons, names, shards, message. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/core/cache.h"
#include "agentsched/core/sched.h"
#include "agentsched/core/score.h"
#include "core_fixtures.h"

static model_registry reg;
static cache *c;
static score_policy *pol;

static void setup(void)
{
    model_registry_init(&reg);
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
    cr_assert_eq(score_policy_new_strategy(&reg, SCORE_MOST_ALLOCATED, &pol), AS_OK);
}

static void teardown(void)
{
    score_policy_unref(pol);
    cache_free(c);
    model_registry_destroy(&reg);
}

TestSuite(sched, .init = setup, .fini = teardown);

static void add(model_node *n)
{
    cr_assert_eq(cache_node_upsert(c, n), AS_OK);
}

static void occupy(const char *node, const char *uid, int64_t cpu, int64_t mem)
{
    model_pod *p = fx_pod(uid, uid, cpu, mem);
    fx_pod_bind(p, node);
    cr_assert_eq(cache_pod_upsert(c, p), AS_OK);
    model_pod_free(p);
}

static double score_of(const model_pod *pod, const char *node)
{
    cache_read_lock(c);
    double s = score_node(pol, pod, cache_node_find(c, node, strlen(node)));
    cache_read_unlock(c);
    return s;
}

Test(sched, top_k_sorted_by_score_then_name)
{
    /* identical nodes tie and are ordered by name; a fuller node scores
     * higher with most-allocated */
    add(fx_node("c", 4000, 8 * FX_GI, 110));
    add(fx_node("a", 4000, 8 * FX_GI, 110));
    add(fx_node("b", 4000, 8 * FX_GI, 110));
    add(fx_node("full", 4000, 8 * FX_GI, 110));
    occupy("full", "o1", 2000, 4 * FX_GI);
    model_pod *pod = fx_pod("p", "u", 1000, FX_GI);
    sched_request req = {.pod = pod, .policy = pol, .k = 3};
    sched_result r;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.evaluated, 4);
    cr_assert_eq(r.feasible, 4);
    cr_assert_eq(r.ncand, 3);
    cr_assert_str_eq(r.cand[0].name, "full");
    cr_assert_str_eq(r.cand[1].name, "a");
    cr_assert_str_eq(r.cand[2].name, "b");
    cr_assert_gt(r.cand[0].score, r.cand[1].score);
    cr_assert_float_eq(r.cand[0].score, score_of(pod, "full"), 1e-9);
    cr_assert_eq(r.nreasons, 0);
    cr_assert_null(r.per_name);

    /* candidates carry slot, incarnation and the bind version seen */
    cache_read_lock(c);
    cache_node *full = cache_node_find(c, "full", 4);
    cr_assert_eq(r.cand[0].slot, full->slot);
    cr_assert_eq(r.cand[0].node_id, full->id);
    cr_assert_eq(r.cand[0].bind_version, cache_node_bind_version(full));
    cache_read_unlock(c);
    sched_result_free(&r);

    req.k = 100; /* clamped to SCHED_MAX_K */
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.ncand, 4);
    cr_assert_str_eq(r.cand[3].name, "c");
    sched_result_free(&r);
    model_pod_free(pod);
}

Test(sched, reasons_histogram_and_message)
{
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof name, "small%d", i);
        add(fx_node(name, 500, 8 * FX_GI, 110));
    }
    for (int i = 0; i < 2; i++) {
        char name[8];
        snprintf(name, sizeof name, "taint%d", i);
        model_node *n = fx_node(name, 4000, 8 * FX_GI, 110);
        if (i == 1) /* same taint at another index: same bucket */
            fx_node_taint(n, "x", "y", MODEL_EFFECT_PREFER_NO_SCHEDULE);
        fx_node_taint(n, "a", "b", MODEL_EFFECT_NO_SCHEDULE);
        add(n);
    }
    model_node *other = fx_node("taint-other", 4000, 8 * FX_GI, 110);
    fx_node_taint(other, "a", "c", MODEL_EFFECT_NO_SCHEDULE);
    add(other);

    model_pod *pod = fx_pod("p", "u", 1000, FX_GI);
    sched_request req = {.pod = pod, .policy = pol, .k = 3};
    sched_result r;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.ncand, 0);
    cr_assert_eq(r.feasible, 0);
    cr_assert_eq(r.evaluated, 6);
    cr_assert_eq(r.nreasons, 3);
    cr_assert_eq(r.reasons[0].count, 3);
    cr_assert_str_eq(r.reasons[0].text, "Insufficient cpu");
    cr_assert_eq(r.reasons[1].count, 2);
    cr_assert_str_eq(r.reasons[1].text, "node(s) had untolerated taint {a: b}");
    cr_assert_eq(r.reasons[2].count, 1);
    cr_assert_str_eq(r.reasons[2].text, "node(s) had untolerated taint {a: c}");
    char msg[512];
    sched_format_unschedulable(&r, 6, msg, sizeof msg);
    /* upstream sorts the "<count> <reason>" strings as strings */
    cr_assert_str_eq(msg, "0/6 nodes are available: 1 node(s) had untolerated taint {a: c}, 2 "
                          "node(s) had untolerated taint {a: b}, 3 Insufficient cpu.");
    sched_result_free(&r);
    model_pod_free(pod);
}

/* reason_of names each failed name's bucket, whose text is pred_reason's
 * for that name, after the buckets were sorted by count; fitted names have
 * none. */
Test(sched, reason_of_each_name_follows_the_sorted_buckets)
{
    add(fx_node("ok", 4000, 8 * FX_GI, 110));
    model_node *t1 = fx_node("t1", 4000, 8 * FX_GI, 110);
    fx_node_taint(t1, "a", "c", MODEL_EFFECT_NO_SCHEDULE);
    add(t1);
    for (int i = 0; i < 2; i++) {
        char name[8];
        snprintf(name, sizeof name, "tb%d", i);
        model_node *n = fx_node(name, 4000, 8 * FX_GI, 110);
        if (i == 1) /* the same taint at another index */
            fx_node_taint(n, "x", "y", MODEL_EFFECT_PREFER_NO_SCHEDULE);
        fx_node_taint(n, "a", "b", MODEL_EFFECT_NO_SCHEDULE);
        add(n);
    }
    for (int i = 0; i < 3; i++) {
        char name[8];
        snprintf(name, sizeof name, "small%d", i);
        add(fx_node(name, 500, 8 * FX_GI, 110));
    }
    model_pod *pod = fx_pod("p", "u", 1000, FX_GI);
    /* the first failure seen (t1) ends up last after sorting by count */
    const char *list[] = {"t1", "ok", "tb0", "ghost", "small0", "tb1", "small1", "small2"};
    const char *want[] = {"node(s) had untolerated taint {a: c}",
                          NULL,
                          "node(s) had untolerated taint {a: b}",
                          "node(s) were not found in agentsched's node cache",
                          "Insufficient cpu",
                          "node(s) had untolerated taint {a: b}",
                          "Insufficient cpu",
                          "Insufficient cpu"};
    enum { N = sizeof list / sizeof list[0] };
    sched_name names[N];
    for (int i = 0; i < N; i++)
        names[i] = (sched_name){list[i], strlen(list[i]), 0};
    sched_request req = {.pod = pod, .policy = pol, .names = names, .nnames = N, .k = 2};
    sched_result r;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_not_null(r.reason_of);
    cr_assert_eq(r.nreasons, 4);
    cr_assert_str_eq(r.reasons[0].text, "Insufficient cpu");
    for (int i = 0; i < N; i++) {
        if (!want[i]) {
            cr_assert_eq(r.per_name[i].code, PRED_OK);
            cr_assert_eq(r.reason_of[i], SCHED_NO_REASON);
            continue;
        }
        cr_assert_lt(r.reason_of[i], r.nreasons, "%s", list[i]);
        cr_assert_str_eq(r.reasons[r.reason_of[i]].text, want[i], "%s", list[i]);
    }
    sched_result_free(&r);
    model_pod_free(pod);
}

/* Taints whose key and value hash alike share a bucket (counted together),
 * but the second's name gets no bucket text: its text is not the bucket's. */
Test(sched, a_taint_hashing_like_another_has_no_bucket_text)
{
    model_node *a = fx_node("a", 4000, 8 * FX_GI, 110);
    fx_node_taint(a, "k", "v6855", MODEL_EFFECT_NO_SCHEDULE);
    add(a);
    model_node *b = fx_node("b", 4000, 8 * FX_GI, 110);
    fx_node_taint(b, "k", "v684550", MODEL_EFFECT_NO_SCHEDULE); /* same reason_key */
    add(b);
    model_pod *pod = fx_pod("p", "u", 1000, FX_GI);
    sched_name names[] = {{"a", 1, 0}, {"b", 1, 0}};
    sched_request req = {.pod = pod, .policy = pol, .names = names, .nnames = 2, .k = 2};
    sched_result r;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.nreasons, 1);
    cr_assert_eq(r.reasons[0].count, 2);
    cr_assert_eq(r.reason_of[0], 0);
    cr_assert_str_eq(r.reasons[0].text, "node(s) had untolerated taint {k: v6855}");
    cr_assert_eq(r.reason_of[1], SCHED_NO_REASON);
    sched_result_free(&r);
    model_pod_free(pod);
}

Test(sched, message_format_edge_cases)
{
    sched_result r;
    sched_result_init(&r);
    char msg[256];
    sched_format_unschedulable(&r, 0, msg, sizeof msg);
    cr_assert_str_eq(msg, "0/0 nodes are available:");
    r.nreasons = 2;
    r.reasons[0].count = 10;
    strcpy(r.reasons[0].text, "Insufficient memory");
    r.reasons[1].count = 9;
    strcpy(r.reasons[1].text, "Insufficient cpu");
    sched_format_unschedulable(&r, 19, msg, sizeof msg);
    cr_assert_str_eq(msg, "0/19 nodes are available: 10 Insufficient memory, 9 Insufficient cpu.");
    char tiny[10];
    sched_format_unschedulable(&r, 19, tiny, sizeof tiny);
    cr_assert_eq(strlen(tiny), 9);
}

Test(sched, named_nodes_per_name_and_scores)
{
    add(fx_node("n1", 4000, 8 * FX_GI, 110));
    add(fx_node("n2", 500, 8 * FX_GI, 110));
    add(fx_node("n3", 4000, 8 * FX_GI, 110));
    occupy("n3", "o", 1000, 0);
    model_pod *pod = fx_pod("p", "u", 1000, FX_GI);
    const char *buf = "n3 n2 ghost n1";
    sched_name names[] = {{buf, 2, 0}, {buf + 3, 2, 0}, {buf + 6, 5, 0}, {buf + 12, 2, 0}};
    sched_request req = {
        .pod = pod, .policy = pol, .names = names, .nnames = 4, .k = 2, .score_all = true};
    sched_result r;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.nnames, 4);
    cr_assert_eq(r.per_name[0].code, PRED_OK);
    cr_assert_eq(r.per_name[1].code, PRED_EXCEEDS); /* 1000m above n2's 500m */
    cr_assert_eq(r.per_name[2].code, PRED_NOT_FOUND);
    cr_assert_eq(r.per_name[3].code, PRED_OK);
    cr_assert_float_eq(r.score[1], -1.0, 1e-9);
    cr_assert_float_eq(r.score[2], -1.0, 1e-9);
    cr_assert_float_eq(r.score[0], score_of(pod, "n3"), 1e-9);
    cr_assert_float_eq(r.score[3], score_of(pod, "n1"), 1e-9);
    cr_assert_eq(r.evaluated, 3, "unknown names are not evaluated");
    cr_assert_eq(r.feasible, 2);
    cr_assert_eq(r.ncand, 2);
    cr_assert_str_eq(r.cand[0].name, "n3");
    cr_assert_str_eq(r.cand[1].name, "n1");
    bool saw_missing = false;
    for (uint32_t i = 0; i < r.nreasons; i++)
        if (r.reasons[i].reason.code == PRED_NOT_FOUND) {
            saw_missing = true;
            cr_assert_str_eq(r.reasons[i].text,
                             "node(s) were not found in agentsched's node cache");
        }
    cr_assert(saw_missing);
    sched_result_free(&r);

    /* prioritize after upstream filtering: score every existing name */
    req.skip_filter = true;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.per_name[1].code, PRED_OK);
    cr_assert_geq(r.score[1], 0.0);
    cr_assert_eq(r.per_name[2].code, PRED_NOT_FOUND);
    cr_assert_float_eq(r.score[2], -1.0, 1e-9);
    sched_result_free(&r);

    /* an empty name list is valid: nothing evaluated */
    req.nnames = 0;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.evaluated, 0);
    cr_assert_eq(r.ncand, 0);
    sched_result_free(&r);
    model_pod_free(pod);
}

/* fragment's reserve is a filter: a GPU node whose free GPUs need the CPU
 * a CPU-only pod would take fails with its own reason, in a scan and by
 * name; prioritize (names filtered upstream) scores it 0. */
Test(sched, a_kept_node_fails_with_its_reason)
{
    model_node *g = fx_node("gpu", 32000, 128 * FX_GI, 110);
    fx_node_gpus(&reg, g, 4);
    add(g);
    add(fx_node("small", 8000, 128 * FX_GI, 110));
    score_policy *frag = NULL;
    cr_assert_eq(score_policy_new_default(&reg, &frag), AS_OK);
    model_pod *gp = fx_pod("g", "g", 4000, 16 * FX_GI);
    fx_pod_gpu(&reg, gp, 1, 0);
    for (int k = 0; k < 20; k++) /* 4 cores per GPU: 16 kept for 4 free GPUs */
        score_observe_pod(frag, gp);
    model_pod *pod = fx_pod("p", "u", 20000, FX_GI);
    sched_request req = {.pod = pod, .policy = frag, .k = 2};
    sched_result r;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.ncand, 0);
    cr_assert_eq(r.nreasons, 2);
    char msg[512];
    sched_format_unschedulable(&r, 2, msg, sizeof msg);
    cr_assert_str_eq(msg, "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) kept their cpu "
                          "and memory for their free GPUs.");
    sched_result_free(&r);

    const char *buf = "gpu";
    sched_name names[] = {{buf, 3, 0}};
    req.names = names;
    req.nnames = 1;
    req.score_all = true;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.per_name[0].code, PRED_KEPT);
    cr_assert_float_eq(r.score[0], -1.0, 1e-9);
    sched_result_free(&r);
    req.skip_filter = true;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_float_eq(r.score[0], 0.0, 1e-9);
    sched_result_free(&r);

    model_pod *small = fx_pod("q", "q", 4000, FX_GI); /* leaves 28 cores */
    req = (sched_request){.pod = small, .policy = frag, .k = 2};
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.ncand, 2);
    sched_result_free(&r);
    model_pod_free(small);
    model_pod_free(pod);
    model_pod_free(gp);
    score_policy_unref(frag);
}

Test(sched, bad_requests)
{
    sched_result r;
    cr_assert_eq(sched_evaluate(c, NULL, &r), AS_EINVAL);
    sched_request req = {.pod = NULL, .policy = pol, .k = 1};
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_EINVAL);
    model_pod *pod = fx_pod("p", "u", 1, 0);
    sched_request req2 = {.pod = pod, .policy = pol, .nnames = 3, .k = 1};
    cr_assert_eq(sched_evaluate(c, &req2, &r), AS_EINVAL);
    sched_result_free(&r);
    model_pod_free(pod);
}

Test(sched, soft_shard_prefers_in_shard_and_falls_back)
{
    cache_set_shard_mode(c, CACHE_SHARD_SOFT);
    add(fx_node("in-small", 2000, 8 * FX_GI, 110));
    add(fx_node("out-busy", 4000, 8 * FX_GI, 110));
    occupy("out-busy", "o", 1500, 4 * FX_GI); /* would score higher */
    const char *names[] = {"in-small"};
    uint64_t rev = 0;
    cr_assert_eq(cache_shard_apply(c, names, 1, &rev), AS_OK);

    model_pod *pod = fx_pod("p", "u", 1000, FX_GI);
    sched_request req = {.pod = pod, .policy = pol, .k = 3};
    sched_result r;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.shard_revision, rev);
    cr_assert_eq(r.ncand, 1, "out-of-shard nodes only when no in-shard node fits");
    cr_assert_str_eq(r.cand[0].name, "in-small");
    double bonus = score_policy_soft_shard_bonus(pol);
    cr_assert_float_eq(r.cand[0].score, score_of(pod, "in-small") + bonus, 1e-9);
    sched_result_free(&r);

    model_pod *big = fx_pod("big", "ub", 2001, FX_GI);
    req.pod = big;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.ncand, 1);
    cr_assert_str_eq(r.cand[0].name, "out-busy");
    cr_assert_float_eq(r.cand[0].score, score_of(big, "out-busy"), 1e-9);
    sched_result_free(&r);

    /* with names, every feasible name is a candidate; in-shard gets the bonus */
    sched_name nm[] = {{"out-busy", 8, 0}, {"in-small", 8, 0}};
    req.pod = pod;
    req.names = nm;
    req.nnames = 2;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.ncand, 2);
    cr_assert_str_eq(r.cand[0].name, "in-small");
    sched_result_free(&r);
    model_pod_free(pod);
    model_pod_free(big);
}

Test(sched, hard_shard_filters)
{
    cache_set_shard_mode(c, CACHE_SHARD_HARD);
    add(fx_node("in", 2000, 8 * FX_GI, 110));
    add(fx_node("out", 4000, 8 * FX_GI, 110));
    const char *names[] = {"in"};
    cr_assert_eq(cache_shard_apply(c, names, 1, NULL), AS_OK);
    model_pod *pod = fx_pod("p", "u", 3000, FX_GI);
    sched_request req = {.pod = pod, .policy = pol, .k = 3};
    sched_result r;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.ncand, 0);
    char msg[256];
    sched_format_unschedulable(&r, 2, msg, sizeof msg);
    cr_assert_str_eq(msg, "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) were not in "
                          "this scheduler's shard.");
    sched_result_free(&r);
    model_pod_free(pod);
}

Test(sched, early_stop_and_rotating_start)
{
    for (int i = 0; i < 10; i++) {
        char name[8];
        snprintf(name, sizeof name, "n%d", i);
        add(fx_node(name, i < 5 ? 500 : 4000, 8 * FX_GI, 110)); /* n0..n4 too small */
    }
    model_pod *pod = fx_pod("p", "u", 1000, FX_GI);
    sched_request req = {.pod = pod, .policy = pol, .k = 3, .max_feasible = 2};
    sched_result r;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.feasible, 2);
    cr_assert_eq(r.evaluated, 7, "five infeasible, then two feasible");
    cr_assert_eq(r.ncand, 2);
    cr_assert_eq(r.reasons[0].count, 5);
    sched_result_free(&r);

    req.start = 8; /* n8, n9 are feasible: stop there */
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.evaluated, 2);
    cr_assert_eq(r.nreasons, 0);
    sched_result_free(&r);

    req.start = 9 + 10 * 3; /* wraps: n9, n0..n4, n5 */
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.evaluated, 7);
    cr_assert_eq(r.feasible, 2);
    sched_result_free(&r);

    req.max_feasible = 0; /* default: full scan */
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.evaluated, 10);
    cr_assert_eq(r.feasible, 5);
    sched_result_free(&r);
    model_pod_free(pod);
}

Test(sched, duplicate_names_are_one_candidate)
{
    add(fx_node("n1", 4000, 8 * FX_GI, 110));
    add(fx_node("n2", 4000, 8 * FX_GI, 110));
    model_pod *pod = fx_pod("p", "u", 1000, FX_GI);
    sched_name names[] = {{"n1", 2, 0}, {"n1", 2, 0}, {"n2", 2, 0}};
    sched_request req = {.pod = pod, .policy = pol, .names = names, .nnames = 3, .k = 3};
    sched_result r;
    cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
    cr_assert_eq(r.ncand, 2);
    cr_assert_str_eq(r.cand[0].name, "n1");
    cr_assert_str_eq(r.cand[1].name, "n2");
    cr_assert_eq(r.per_name[1].code, PRED_OK);
    sched_result_free(&r);
    model_pod_free(pod);
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Many identical nodes tie on score: the top-K are the K smallest names in
 * strcmp order, whether the caller lists names (compared by their first
 * word at the bar) or the whole cache is scanned, with names sharing long
 * prefixes, shorter than a word, and prefixes of one another. */
Test(sched, ties_keep_the_smallest_names_on_both_paths)
{
    enum { N = 120, K = 16 };
    static const char *const stem[] = {"node-", "ip-10-0-1-", "n", "gke-pool-a-", "node-0"};
    char names[N][40];
    const char *sorted[N];
    for (int i = 0; i < N; i++) {
        int j = (i * 37) % N; /* not in name order */
        snprintf(names[i], sizeof names[i], "%s%d", stem[j % 5], j / 5);
        add(fx_node(names[i], 4000, 8 * FX_GI, 110));
        sorted[i] = names[i];
    }
    qsort(sorted, N, sizeof sorted[0], cmp_cstr);
    model_pod *pod = fx_pod("p", "u", 1000, FX_GI);
    sched_name sn[N];
    for (int i = 0; i < N; i++)
        sn[i] = (sched_name){names[i], strlen(names[i]), 0};
    for (int path = 0; path < 2; path++) {
        sched_request req = {.pod = pod, .policy = pol, .k = K};
        if (path == 0) {
            req.names = sn;
            req.nnames = N;
        }
        sched_result r;
        cr_assert_eq(sched_evaluate(c, &req, &r), AS_OK);
        cr_assert_eq(r.ncand, K);
        for (int i = 0; i < K; i++)
            cr_assert_str_eq(r.cand[i].name, sorted[i], "path %d, rank %d", path, i);
        sched_result_free(&r);
    }
    model_pod_free(pod);
}

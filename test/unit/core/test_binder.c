/* test_binder.c - versioned binder paths and the extender bind memo. */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include "agentsched/core/binder.h"
#include "agentsched/core/cache.h"
#include "agentsched/core/sched.h"
#include "core_fixtures.h"

static model_registry reg;
static cache *c;
static score_policy *pol;
static binder *b;

static void setup(void)
{
    model_registry_init(&reg);
    cr_assert_eq(cache_new(&reg, &c), AS_OK);
    cr_assert_eq(score_policy_new_strategy(&reg, SCORE_MOST_ALLOCATED, &pol), AS_OK);
    cr_assert_eq(binder_new(c, NULL, &b), AS_OK);
}

static void teardown(void)
{
    binder_free(b);
    score_policy_unref(pol);
    cache_free(c);
    model_registry_destroy(&reg);
}

TestSuite(binder, .init = setup, .fini = teardown);

static void add(const char *name, int64_t cpu)
{
    cr_assert_eq(cache_node_upsert(c, fx_node(name, cpu, 64 * FX_GI, 110)), AS_OK);
}

static void evaluate(const model_pod *pod, uint32_t k, sched_result *r)
{
    sched_request req = {.pod = pod, .policy = pol, .k = k};
    cr_assert_eq(sched_evaluate(c, &req, r), AS_OK);
}

static void check_invariants(void)
{
    as_diag d = {0};
    cr_assert_eq(cache_check_invariants(c, &d), AS_OK, "%s", d.msg);
}

static int64_t used_cpu(const char *node)
{
    cache_read_lock(c);
    int64_t v = cache_node_requested(cache_node_find(c, node, strlen(node)), MODEL_RES_CPU);
    cache_read_unlock(c);
    return v;
}

Test(binder, fast_path_marks_assumed)
{
    add("n1", 4000);
    model_pod *p = fx_pod("a", "ua", 1000, 0);
    sched_result r;
    evaluate(p, 3, &r);
    cr_assert_eq(r.ncand, 1);
    binder_outcome o;
    cr_assert_eq(binder_commit(b, p, r.cand, r.ncand, &o), AS_OK);
    cr_assert_eq(o.chosen, 0);
    cr_assert_eq(o.how, BINDER_FAST);
    cr_assert_str_eq(o.node, "n1");
    cache_pod_info info;
    cache_pod_lookup(c, "ua", &info);
    cr_assert_eq(info.state, CACHE_POD_ASSUMED);
    cr_assert_eq(used_cpu("n1"), 1000);
    binder_stats st;
    binder_get_stats(b, &st);
    cr_assert_eq(st.accepted_fast, 1);
    sched_result_free(&r);
    model_pod_free(p);
}

Test(binder, version_moved_but_fits_is_rechecked)
{
    add("n1", 4000);
    model_pod *a = fx_pod("a", "ua", 1000, 0), *bb = fx_pod("b", "ub", 1000, 0);
    sched_result ra, rb;
    evaluate(a, 1, &ra);
    evaluate(bb, 1, &rb); /* same bind version as a */
    cr_assert_eq(ra.cand[0].bind_version, rb.cand[0].bind_version);
    binder_outcome o;
    cr_assert_eq(binder_commit(b, a, ra.cand, ra.ncand, &o), AS_OK);
    cr_assert_eq(o.how, BINDER_FAST);
    cr_assert_eq(binder_commit(b, bb, rb.cand, rb.ncand, &o), AS_OK);
    cr_assert_eq(o.how, BINDER_RECHECKED, "a pure version check would refuse this");
    cr_assert_eq(used_cpu("n1"), 2000);
    binder_stats st;
    binder_get_stats(b, &st);
    cr_assert_eq(st.accepted_rechecked, 1);
    cr_assert_eq(st.conflicts, 0);
    check_invariants();
    sched_result_free(&ra);
    sched_result_free(&rb);
    model_pod_free(a);
    model_pod_free(bb);
}

Test(binder, two_pods_racing_for_the_last_slot)
{
    add("n1", 1000);
    model_pod *a = fx_pod("a", "ua", 600, 0), *bb = fx_pod("b", "ub", 600, 0);
    sched_result ra, rb;
    evaluate(a, 3, &ra);
    evaluate(bb, 3, &rb);
    cr_assert_eq(ra.ncand, 1);
    cr_assert_eq(rb.ncand, 1);
    binder_outcome oa, ob;
    cr_assert_eq(binder_commit(b, a, ra.cand, ra.ncand, &oa), AS_OK);
    cr_assert_eq(binder_commit(b, bb, rb.cand, rb.ncand, &ob), AS_ECONFLICT);
    cr_assert_eq(ob.chosen, -1);
    cr_assert(strstr(ob.reason, "n1") && strstr(ob.reason, "Insufficient cpu"), "%s", ob.reason);
    cr_assert_eq(used_cpu("n1"), 600, "never overcommitted");
    cache_pod_info info;
    cache_pod_lookup(c, "ub", &info);
    cr_assert_eq(info.state, CACHE_POD_ABSENT);
    binder_stats st;
    binder_get_stats(b, &st);
    cr_assert_eq(st.conflicts, 1);
    cr_assert_eq(st.exhausted, 1);
    check_invariants();
    sched_result_free(&ra);
    sched_result_free(&rb);
    model_pod_free(a);
    model_pod_free(bb);
}

Test(binder, refused_candidate_falls_through_to_the_next)
{
    add("n1", 1000);
    add("n2", 8000);
    model_pod *a = fx_pod("a", "ua", 600, 0), *bb = fx_pod("b", "ub", 600, 0);
    sched_result ra, rb;
    evaluate(a, 3, &ra);
    evaluate(bb, 3, &rb);
    cr_assert_eq(rb.ncand, 2);
    cr_assert_str_eq(rb.cand[0].name, "n1", "most-allocated ranks the small node first");
    binder_outcome o;
    cr_assert_eq(binder_commit(b, a, ra.cand, 1, &o), AS_OK);
    cr_assert_str_eq(o.node, "n1");
    cr_assert_eq(binder_commit(b, bb, rb.cand, rb.ncand, &o), AS_OK);
    cr_assert_eq(o.chosen, 1);
    cr_assert_eq(o.how, BINDER_FAST);
    cr_assert_str_eq(o.node, "n2");
    binder_stats st;
    binder_get_stats(b, &st);
    cr_assert_eq(st.conflicts, 1);
    cr_assert_eq(st.exhausted, 0);
    check_invariants();
    sched_result_free(&ra);
    sched_result_free(&rb);
    model_pod_free(a);
    model_pod_free(bb);
}

Test(binder, removed_node_is_refused)
{
    add("n1", 1000);
    model_pod *a = fx_pod("a", "ua", 100, 0);
    sched_result r;
    evaluate(a, 3, &r);
    cr_assert_eq(cache_node_remove(c, "n1"), AS_OK);
    add("n1", 1000); /* same name, new incarnation */
    binder_outcome o;
    cr_assert_eq(binder_commit(b, a, r.cand, r.ncand, &o), AS_ECONFLICT);
    cr_assert(strstr(o.reason, "no longer exists"), "%s", o.reason);
    cr_assert_eq(binder_commit(b, a, r.cand, 0, &o), AS_ECONFLICT);
    cr_assert_str_eq(o.reason, "no candidate nodes");
    sched_result_free(&r);
    model_pod_free(a);
}

Test(binder, idempotent_same_node_conflict_other_node)
{
    add("n1", 4000);
    add("n2", 4000);
    model_pod *a = fx_pod("a", "ua", 100, 0);
    sched_result r;
    evaluate(a, 3, &r);
    cr_assert_eq(r.ncand, 2);
    binder_outcome o;
    cr_assert_eq(binder_commit(b, a, r.cand, 1, &o), AS_OK);
    char first[256];
    strcpy(first, o.node);
    cr_assert_eq(binder_commit(b, a, r.cand, 1, &o), AS_OK);
    cr_assert_eq(o.how, BINDER_IDEMPOTENT);
    cr_assert_str_eq(o.node, first);
    cr_assert_eq(binder_commit(b, a, &r.cand[1], 1, &o), AS_ECONFLICT);
    cr_assert(strstr(o.reason, "already assumed on node"), "%s", o.reason);
    cr_assert_eq(used_cpu("n1") + used_cpu("n2"), 100);
    binder_stats st;
    binder_get_stats(b, &st);
    cr_assert_eq(st.idempotent, 1);

    cr_assert_eq(binder_release(b, "ua"), AS_OK);
    cr_assert_eq(used_cpu("n1") + used_cpu("n2"), 0);
    cr_assert_eq(binder_release(b, "ua"), AS_ENOTFOUND);
    binder_get_stats(b, &st);
    cr_assert_eq(st.released, 2);
    sched_result_free(&r);
    model_pod_free(a);
}

Test(binder, shard_leave_after_evaluation_is_refused_in_hard_mode)
{
    cache_set_shard_mode(c, CACHE_SHARD_HARD);
    add("n1", 4000);
    const char *in[] = {"n1"};
    cr_assert_eq(cache_shard_apply(c, in, 1, NULL), AS_OK);
    model_pod *a = fx_pod("a", "ua", 100, 0);
    sched_result r;
    evaluate(a, 3, &r);
    cr_assert_eq(r.ncand, 1);
    cr_assert_eq(cache_shard_apply(c, NULL, 0, NULL), AS_OK);
    binder_outcome o;
    cr_assert_eq(binder_commit(b, a, r.cand, r.ncand, &o), AS_ECONFLICT);
    cr_assert(strstr(o.reason, "shard"), "%s", o.reason);
    sched_result_free(&r);
    model_pod_free(a);
}

Test(binder, gpu_devices_reported)
{
    model_node *n = fx_node("g", 8000, 64 * FX_GI, 110);
    fx_node_gpus(&reg, n, 2);
    cr_assert_eq(cache_node_upsert(c, n), AS_OK);
    model_pod *a = fx_pod("a", "ua", 100, 0), *bb = fx_pod("b", "ub", 100, 0);
    fx_pod_gpu(&reg, a, 0, 700);
    fx_pod_gpu(&reg, bb, 0, 700);
    sched_result ra, rb;
    evaluate(a, 1, &ra);
    evaluate(bb, 1, &rb);
    binder_outcome o;
    cr_assert_eq(binder_commit(b, a, ra.cand, 1, &o), AS_OK);
    cr_assert_eq(o.gpu_devices, 1u);
    cr_assert_eq(binder_commit(b, bb, rb.cand, 1, &o), AS_OK);
    cr_assert_eq(o.how, BINDER_RECHECKED);
    cr_assert_eq(o.gpu_devices, 2u, "a 700 share cannot join the first device");
    model_pod *third = fx_pod("c", "uc", 100, 0);
    fx_pod_gpu(&reg, third, 0, 700);
    cr_assert_eq(binder_commit(b, third, ra.cand, 1, &o), AS_ECONFLICT);
    cr_assert(strstr(o.reason, "Insufficient nvidia.com/gpu"), "%s", o.reason);
    check_invariants();
    sched_result_free(&ra);
    sched_result_free(&rb);
    model_pod_free(a);
    model_pod_free(bb);
    model_pod_free(third);
}

/* ---- memo --------------------------------------------------------- */

static void note(const char *uid, int64_t cpu, uint32_t k)
{
    model_pod *p = fx_pod(uid, uid, cpu, 0);
    sched_result r;
    evaluate(p, k, &r);
    cr_assert_eq(binder_note(b, p, r.cand, r.ncand), AS_OK);
    sched_result_free(&r);
}

Test(binder, bind_noted_then_retry_is_idempotent)
{
    add("n1", 4000);
    add("n2", 4000);
    note("u1", 1000, 3);
    char key[64];
    cr_assert(binder_noted_key(b, "u1", key, sizeof key));
    cr_assert_str_eq(key, "default/u1");
    cr_assert(!binder_noted_key(b, "nope", key, sizeof key));

    binder_outcome o;
    cr_assert_eq(binder_bind_noted(b, "u1", "n2", &o), AS_OK);
    cr_assert_eq(o.how, BINDER_FAST);
    cr_assert_str_eq(o.node, "n2");
    cr_assert(!binder_noted_key(b, "u1", key, sizeof key), "note dropped on success");
    /* kube-scheduler retries after a lost reply */
    cr_assert_eq(binder_bind_noted(b, "u1", "n2", &o), AS_OK);
    cr_assert_eq(o.how, BINDER_IDEMPOTENT);
    cr_assert_eq(binder_bind_noted(b, "u1", "n1", &o), AS_ECONFLICT);
    cr_assert(strstr(o.reason, "n2"), "%s", o.reason);
    cr_assert_eq(binder_bind_noted(b, "never-filtered", "n1", &o), AS_ENOTFOUND);
    cr_assert_eq(used_cpu("n2"), 1000);
    check_invariants();
}

Test(binder, bind_noted_outside_candidates_always_rechecks)
{
    add("n1", 4000);
    add("n2", 4000);
    note("u1", 1000, 1); /* only one candidate noted */
    binder_outcome o;
    cr_assert_eq(binder_bind_noted(b, "u1", "n2", &o), AS_OK);
    cr_assert_eq(o.how, BINDER_RECHECKED);
    cr_assert_str_eq(o.node, "n2");
    note("u2", 1000, 3);
    cr_assert_eq(binder_bind_noted(b, "u2", "ghost", &o), AS_ECONFLICT);
    cr_assert(strstr(o.reason, "ghost"), "%s", o.reason);
    cr_assert(binder_noted_key(b, "u2", NULL, 0), "failed bind keeps the note for a retry");
    cr_assert_eq(binder_bind_noted(b, "u2", "n1", &o), AS_OK);
}

Test(binder, bind_noted_to_a_recreated_node_rechecks)
{
    /* The note names no node: it holds incarnations. A node removed and
     * added again under the same name since the filter is a new one, so
     * its noted version does not apply and the pod is re-checked. */
    add("n1", 4000);
    note("u1", 1000, 3);
    cr_assert_eq(cache_node_remove(c, "n1"), AS_OK);
    add("n1", 4000);
    binder_outcome o;
    cr_assert_eq(binder_bind_noted(b, "u1", "n1", &o), AS_OK);
    cr_assert_eq(o.how, BINDER_RECHECKED);
    cr_assert_str_eq(o.node, "n1");
    cr_assert_eq(used_cpu("n1"), 1000);
    check_invariants();
}

Test(binder, bind_noted_conflict_keeps_note)
{
    add("n1", 1000);
    note("u1", 600, 3);
    note("u2", 600, 3);
    binder_outcome o;
    cr_assert_eq(binder_bind_noted(b, "u1", "n1", &o), AS_OK);
    cr_assert_eq(binder_bind_noted(b, "u2", "n1", &o), AS_ECONFLICT);
    cr_assert(strstr(o.reason, "Insufficient cpu"), "%s", o.reason);
    cr_assert(binder_noted_key(b, "u2", NULL, 0));
    cr_assert_eq(used_cpu("n1"), 600);
    check_invariants();
}

Test(binder, memo_is_capped_by_count_and_age)
{
    binder_free(b);
    binder_config cfg = {.memo_max_pods = 2, .memo_ttl_ms = 60000};
    cr_assert_eq(binder_new(c, &cfg, &b), AS_OK);
    add("n1", 4000);
    note("u1", 1, 1);
    note("u2", 1, 1);
    note("u1", 1, 1); /* replacing refreshes u1 */
    note("u3", 1, 1); /* evicts the oldest: u2 */
    cr_assert(binder_noted_key(b, "u1", NULL, 0));
    cr_assert(!binder_noted_key(b, "u2", NULL, 0));
    cr_assert(binder_noted_key(b, "u3", NULL, 0));

    binder_free(b);
    cfg = (binder_config){.memo_max_pods = 10, .memo_ttl_ms = 1};
    cr_assert_eq(binder_new(c, &cfg, &b), AS_OK);
    note("u4", 1, 1);
    usleep(20 * 1000);
    cr_assert(!binder_noted_key(b, "u4", NULL, 0));
    binder_outcome o;
    cr_assert_eq(binder_bind_noted(b, "u4", "n1", &o), AS_ENOTFOUND);
}

Test(binder, memo_is_capped_by_bytes)
{
    /* Each note of a small pod costs under a kilobyte (its pool's
     * footprint, its uid and candidates); a 16 KB cap holds a few dozen, a
     * pod with 20 KB of labels not at all. */
    binder_free(b);
    binder_config cfg = {.memo_max_pods = 1000, .memo_max_bytes = 16 * 1024};
    cr_assert_eq(binder_new(c, &cfg, &b), AS_OK);
    add("n1", 400000);
    char uid[32];
    for (int i = 0; i < 200; i++) {
        snprintf(uid, sizeof uid, "u%d", i);
        note(uid, 1, 1);
    }
    cr_assert(binder_noted_key(b, "u199", NULL, 0), "the newest note is kept");
    cr_assert(!binder_noted_key(b, "u0", NULL, 0), "the oldest was evicted for bytes");
    int kept = 0;
    for (int i = 0; i < 200; i++) {
        snprintf(uid, sizeof uid, "u%d", i);
        kept += binder_noted_key(b, uid, NULL, 0);
    }
    cr_assert(kept > 2 && kept < 200, "kept %d", kept);

    model_pod *big = fx_pod("big", "big", 1, 0);
    char *blob = pool_alloc(big->pool, 20 * 1024); /* a pod carrying 20 KB */
    cr_assert_not_null(blob);
    sched_result r;
    evaluate(big, 1, &r);
    cr_assert_eq(binder_note(b, big, r.cand, r.ncand), AS_ETOOBIG);
    sched_result_free(&r);
    cr_assert(!binder_noted_key(b, "big", NULL, 0));
    cr_assert(binder_noted_key(b, "u199", NULL, 0), "a refused note evicts nothing");
}

/* ---- deterministic interleavings between evaluation and commit ---- */

Test(binder, node_shrinks_after_evaluation)
{
    add("n1", 4000);
    model_pod *a = fx_pod("a", "ua", 3000, 0);
    sched_result r;
    evaluate(a, 1, &r);
    add("n1", 2000); /* spec replaced: allocatable shrinks */
    binder_outcome o;
    cr_assert_eq(binder_commit(b, a, r.cand, 1, &o), AS_ECONFLICT);
    cr_assert(strstr(o.reason, "node n1 changed") && strstr(o.reason, "Insufficient cpu"), "%s",
              o.reason);
    sched_result_free(&r);
    model_pod_free(a);
}

Test(binder, taint_added_after_evaluation)
{
    add("n1", 4000);
    model_pod *a = fx_pod("a", "ua", 100, 0);
    sched_result r;
    evaluate(a, 1, &r);
    model_node *n = fx_node("n1", 4000, 64 * FX_GI, 110);
    fx_node_taint(n, "maintenance", "true", MODEL_EFFECT_NO_SCHEDULE);
    cr_assert_eq(cache_node_upsert(c, n), AS_OK);
    binder_outcome o;
    cr_assert_eq(binder_commit(b, a, r.cand, 1, &o), AS_ECONFLICT);
    cr_assert(strstr(o.reason, "untolerated taint {maintenance: true}"), "%s", o.reason);
    sched_result_free(&r);
    model_pod_free(a);
}

Test(binder, usage_decrease_keeps_the_fast_path)
{
    add("n1", 1000);
    model_pod *a = fx_pod("a", "ua", 600, 0), *bb = fx_pod("b", "ub", 300, 0);
    sched_result ra;
    evaluate(a, 1, &ra);
    binder_outcome o;
    cr_assert_eq(binder_commit(b, a, ra.cand, 1, &o), AS_OK);
    sched_result rb;
    evaluate(bb, 1, &rb);                         /* sees a's usage */
    cr_assert_eq(binder_release(b, "ua"), AS_OK); /* frees capacity: no version bump */
    cr_assert_eq(binder_commit(b, bb, rb.cand, 1, &o), AS_OK);
    cr_assert_eq(o.how, BINDER_FAST, "a decrease cannot invalidate a fit decision");
    check_invariants();
    sched_result_free(&ra);
    sched_result_free(&rb);
    model_pod_free(a);
    model_pod_free(bb);
}

Test(binder, pod_bound_by_someone_else_meanwhile)
{
    add("n1", 4000);
    add("n2", 4000);
    model_pod *a = fx_pod("a", "ua", 100, 0);
    sched_result r;
    evaluate(a, 2, &r);
    model_pod *seen = fx_pod("a", "ua", 100, 0);
    fx_pod_bind(seen, r.cand[1].name);
    cr_assert_eq(cache_pod_upsert(c, seen), AS_OK); /* the watch: bound elsewhere */
    binder_outcome o;
    cr_assert_eq(binder_commit(b, a, r.cand, 1, &o), AS_ECONFLICT);
    cr_assert(strstr(o.reason, "already bound"), "%s", o.reason);
    check_invariants();
    sched_result_free(&r);
    model_pod_free(a);
    model_pod_free(seen);
}

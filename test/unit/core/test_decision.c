/* test_decision.c - the decision cycle: gate, reserve, bind, unreserve and
 * report, each step alone and in the orders the entry points use. */

#include "agentsched/core/binder.h"
#include "agentsched/core/cache.h"
#include "agentsched/core/decision.h"
#include "agentsched/core/sched.h"
#include "core_fixtures.h"

static model_registry reg;
static cache *c;
static score_policy *pol;
static binder *b;

/* A recording port: what the cycle called, in order. */
typedef struct rec {
    char log[256];
    uint64_t next_ticket;
    as_err bind_result;
    decision_state reported;
} rec;

static void say(rec *r, const char *what)
{
    size_t n = strlen(r->log);
    snprintf(r->log + n, sizeof r->log - n, "%s%s", n ? " " : "", what);
}

static uint64_t gate_begin(void *arg)
{
    rec *r = arg;
    say(r, "gate");
    return ++r->next_ticket;
}

static void gate_end(void *arg, uint64_t ticket)
{
    rec *r = arg;
    char s[32];
    snprintf(s, sizeof s, "ungate:%llu", (unsigned long long)ticket);
    say(r, s);
}

static as_err bind(void *arg, const decision *d, as_diag *diag)
{
    rec *r = arg;
    char s[64];
    snprintf(s, sizeof s, "bind:%s", d->out.node);
    say(r, s);
    if (r->bind_result)
        as_diag_set(diag, r->bind_result, NULL, "refused by the test");
    return r->bind_result;
}

static void report(void *arg, const decision *d)
{
    rec *r = arg;
    r->reported = d->final;
    char s[64];
    snprintf(s, sizeof s, "report:%s", decision_state_name(d->final));
    say(r, s);
}

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

TestSuite(decision, .init = setup, .fini = teardown);

static void add(const char *name, int64_t cpu)
{
    cr_assert_eq(cache_node_upsert(c, fx_node(name, cpu, 64 * FX_GI, 110)), AS_OK);
}

static void evaluate(const model_pod *pod, sched_result *r)
{
    sched_request req = {.pod = pod, .policy = pol, .k = 3};
    cr_assert_eq(sched_evaluate(c, &req, r), AS_OK);
}

static cache_pod_state state_of(const char *uid)
{
    cache_pod_info info;
    cache_pod_lookup(c, uid, &info);
    return info.state;
}

Test(decision, reserve_bind_report_in_order)
{
    add("n1", 4000);
    rec r = {0};
    decision_ports ports = {gate_begin, gate_end, &r, bind, report, &r, NULL};
    model_pod *p = fx_pod("a", "ua", 1000, 0);
    sched_result res;
    evaluate(p, &res);
    decision d;
    decision_begin(&d, b, &ports);
    cr_assert_eq(decision_reserve(&d, p, res.cand, res.ncand), AS_OK);
    cr_assert_eq(state_of("ua"), CACHE_POD_ASSUMED);
    as_diag diag = {0};
    cr_assert_eq(decision_bind(&d, &diag), AS_OK);
    decision_end(&d);
    cr_assert_str_eq(r.log, "gate bind:n1 report:bound ungate:1");
    cr_assert_eq(state_of("ua"), CACHE_POD_ASSUMED);
    sched_result_free(&res);
    model_pod_free(p);
}

Test(decision, failed_bind_unreserves_once)
{
    add("n1", 1000);
    rec r = {.bind_result = AS_ECONFLICT};
    decision_ports ports = {gate_begin, gate_end, &r, bind, report, &r, NULL};
    model_pod *p = fx_pod("a", "ua", 1000, 0);
    sched_result res;
    evaluate(p, &res);
    decision d;
    decision_begin(&d, b, &ports);
    cr_assert_eq(decision_reserve(&d, p, res.cand, res.ncand), AS_OK);
    as_diag diag = {0};
    cr_assert_eq(decision_bind(&d, &diag), AS_ECONFLICT);
    cr_assert_str_eq(diag.msg, "refused by the test");
    cr_assert_eq(state_of("ua"), CACHE_POD_ABSENT);
    decision_unreserve(&d); /* already released: a no-op */
    decision_end(&d);
    cr_assert_eq(r.reported, DECISION_RELEASED);
    binder_stats st;
    binder_get_stats(b, &st);
    cr_assert_eq(st.released, 1);
    /* the node's capacity is free again for the next pod */
    model_pod *q = fx_pod("b", "ub", 1000, 0);
    sched_result res2;
    evaluate(q, &res2);
    decision_begin(&d, b, &ports);
    cr_assert_eq(decision_reserve(&d, q, res2.cand, res2.ncand), AS_OK);
    decision_end(&d);
    cr_assert_eq(r.reported, DECISION_RESERVED);
    sched_result_free(&res);
    sched_result_free(&res2);
    model_pod_free(p);
    model_pod_free(q);
}

Test(decision, refused_reserve_binds_nothing_and_still_leaves_the_gate)
{
    add("n1", 1000);
    rec r = {0};
    decision_ports ports = {gate_begin, gate_end, &r, bind, report, &r, NULL};
    model_pod *p = fx_pod("a", "ua", 1000, 0);
    model_pod *q = fx_pod("b", "ub", 1000, 0);
    sched_result rp, rq;
    evaluate(p, &rp);
    evaluate(q, &rq); /* both saw the one free slot */
    decision d;
    decision_begin(&d, b, &ports);
    cr_assert_eq(decision_reserve(&d, p, rp.cand, rp.ncand), AS_OK);
    decision_end(&d);
    decision_begin(&d, b, &ports);
    cr_assert_eq(decision_reserve(&d, q, rq.cand, rq.ncand), AS_ECONFLICT);
    decision_end(&d);
    cr_assert_str_eq(r.log, "gate report:reserved ungate:1 gate report:refused ungate:2");
    cr_assert_eq(state_of("ub"), CACHE_POD_ABSENT);
    sched_result_free(&rp);
    sched_result_free(&rq);
    model_pod_free(p);
    model_pod_free(q);
}

Test(decision, abandoned_reservation_is_released)
{
    add("n1", 4000);
    model_pod *p = fx_pod("a", "ua", 1000, 0);
    sched_result res;
    evaluate(p, &res);
    decision d;
    decision_begin(&d, b, NULL);
    cr_assert_eq(decision_reserve(&d, p, res.cand, res.ncand), AS_OK);
    decision_unreserve(&d);
    decision_end(&d);
    cr_assert_eq(d.final, DECISION_RELEASED);
    cr_assert_eq(state_of("ua"), CACHE_POD_ABSENT);
    sched_result_free(&res);
    model_pod_free(p);
}

Test(decision, noted_reserve_needs_a_note)
{
    add("n1", 4000);
    rec r = {0};
    decision_ports ports = {gate_begin, gate_end, &r, bind, report, &r, NULL};
    decision d;
    decision_begin(&d, b, &ports);
    cr_assert_eq(decision_reserve_noted(&d, "nobody", "n1"), AS_ENOTFOUND);
    decision_end(&d);
    cr_assert_eq(r.reported, DECISION_REFUSED);

    model_pod *p = fx_pod("a", "ua", 1000, 0);
    sched_result res;
    evaluate(p, &res);
    cr_assert_eq(binder_note(b, p, res.cand, res.ncand), AS_OK); /* takes p */
    decision_begin(&d, b, &ports);
    cr_assert_eq(decision_reserve_noted(&d, "ua", "n1"), AS_OK);
    as_diag diag = {0};
    cr_assert_eq(decision_bind(&d, &diag), AS_OK);
    decision_end(&d);
    cr_assert_eq(r.reported, DECISION_BOUND);
    cr_assert_eq(state_of("ua"), CACHE_POD_ASSUMED);
    sched_result_free(&res);
}

Test(decision, no_bind_port_keeps_the_reservation)
{
    add("n1", 4000);
    rec r = {0};
    decision_ports ports = {gate_begin, gate_end, &r, NULL, report, &r, NULL};
    model_pod *p = fx_pod("a", "ua", 1000, 0);
    sched_result res;
    evaluate(p, &res);
    decision d;
    decision_begin(&d, b, &ports);
    cr_assert_eq(decision_reserve(&d, p, res.cand, res.ncand), AS_OK);
    as_diag diag = {0};
    cr_assert_eq(decision_bind(&d, &diag), AS_OK);
    decision_end(&d);
    cr_assert_str_eq(r.log, "gate report:bound ungate:1");
    cr_assert_eq(state_of("ua"), CACHE_POD_ASSUMED);
    sched_result_free(&res);
    model_pod_free(p);
}

/* try_bind: AS_EAGAIN (and no try_bind at all) leaves the decision
 * reserved for a decision_bind later; its AS_OK binds; any other error
 * unreserves as a failed bind does. */
static as_err try_bind(void *arg, const decision *d, as_diag *diag)
{
    rec *r = arg;
    char s[64];
    snprintf(s, sizeof s, "try:%s", d->out.node);
    say(r, s);
    return r->bind_result;
}

Test(decision, try_bind_keeps_the_reservation_when_not_settled)
{
    add("n1", 1000);
    model_pod *p = fx_pod("a", "ua", 1000, 0);
    sched_result res;
    evaluate(p, &res);
    as_diag diag = {0};
    /* no try_bind: not tried, still reserved, bound by decision_bind */
    rec r0 = {0};
    decision_ports none = {gate_begin, gate_end, &r0, bind, report, &r0, NULL};
    decision d;
    decision_begin(&d, b, &none);
    cr_assert_eq(decision_reserve(&d, p, res.cand, res.ncand), AS_OK);
    cr_assert_eq(decision_try_bind(&d, &diag), AS_EAGAIN);
    cr_assert_eq(d.state, DECISION_RESERVED);
    cr_assert_eq(decision_bind(&d, &diag), AS_OK);
    decision_end(&d);
    cr_assert_str_eq(r0.log, "gate bind:n1 report:bound ungate:1");
    cr_assert_eq(binder_release(b, "ua"), AS_OK);
    /* AS_EAGAIN: tried, still reserved; the next bind settles it */
    rec r1 = {.bind_result = AS_EAGAIN};
    decision_ports ports = {gate_begin, gate_end, &r1, bind, report, &r1, try_bind};
    decision_begin(&d, b, &ports);
    cr_assert_eq(decision_reserve(&d, p, res.cand, res.ncand), AS_OK);
    cr_assert_eq(decision_try_bind(&d, &diag), AS_EAGAIN);
    cr_assert_eq(d.state, DECISION_RESERVED);
    cr_assert_eq(state_of("ua"), CACHE_POD_ASSUMED);
    r1.bind_result = AS_OK;
    cr_assert_eq(decision_bind(&d, &diag), AS_OK);
    decision_end(&d);
    cr_assert_str_eq(r1.log, "gate try:n1 bind:n1 report:bound ungate:1");
    cr_assert_eq(binder_release(b, "ua"), AS_OK);
    /* a refusal: unreserved at once */
    rec r2 = {.bind_result = AS_ECONFLICT};
    ports.gate_arg = ports.arg = &r2;
    decision_begin(&d, b, &ports);
    cr_assert_eq(decision_reserve(&d, p, res.cand, res.ncand), AS_OK);
    cr_assert_eq(decision_try_bind(&d, &diag), AS_ECONFLICT);
    cr_assert_eq(d.state, DECISION_RELEASED);
    cr_assert_eq(state_of("ua"), CACHE_POD_ABSENT);
    decision_end(&d);
    cr_assert_str_eq(r2.log, "gate try:n1 report:released ungate:1");
    /* AS_OK: bound by the try alone */
    rec r3 = {.bind_result = AS_OK};
    ports.gate_arg = ports.arg = &r3;
    decision_begin(&d, b, &ports);
    cr_assert_eq(decision_reserve(&d, p, res.cand, res.ncand), AS_OK);
    cr_assert_eq(decision_try_bind(&d, &diag), AS_OK);
    decision_end(&d);
    cr_assert_str_eq(r3.log, "gate try:n1 report:bound ungate:1");
    sched_result_free(&res);
    model_pod_free(p);
}

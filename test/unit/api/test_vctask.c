/* test_vctask.c - the fast decoders of Volcano's predicate and prioritize
 * bodies (what they take as the plain case and what they leave to the DOM
 * path), the memo of task Pods (hits only for the same bytes, uid and
 * resourceVersion; eviction), the NodeInfos seen before (alone and shared
 * by threads), and the handlers answering alike either way. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/api/vctask.h"
#include "agentsched/api/volcano.h"
#include "agentsched/base/doc.h"
#include "agentsched/base/log.h"
#include "agentsched/serve/svc.h"

#define DATA TEST_DATA_DIR "/volcano"

#include "handler_fixtures.h"

#define POD(uid, rv, cpu)                                                                          \
    "{\"metadata\":{\"name\":\"t1\",\"namespace\":\"default\",\"uid\":\"" uid                      \
    "\",\"resourceVersion\":\"" rv "\"},\"spec\":{\"schedulerName\":\"volcano\",\"containers\":["  \
    "{\"name\":\"main\",\"resources\":{\"requests\":{\"cpu\":\"" cpu "\"}}}]}}"

#define PRED(pod, node)                                                                            \
    "{\"task\":{\"UID\":\"u\",\"Name\":\"t1\",\"Pod\":" pod "},\"node\":" node "}"

static bool scan_pred(const char *body, const char **name, size_t *len, vctask_pod_span *sp)
{
    vctask_seen seen;
    return vctask_scan_predicate(NULL, body, strlen(body), sp, name, len, &seen);
}

Test(vctask, predicate_plain_case)
{
    const char *body = PRED(POD("uid-1", "7", "1"), "{\"Name\":\"node-a\",\"Node\":{\"x\":[1,2]}}");
    vctask_pod_span sp;
    const char *name;
    size_t len;
    cr_assert(scan_pred(body, &name, &len, &sp));
    cr_expect_eq(len, 6);
    cr_expect(memcmp(name, "node-a", 6) == 0);
    cr_expect(sp.pod[0] == '{' && sp.pod[sp.pod_len - 1] == '}');
    cr_expect(sp.uid_len == 5 && memcmp(sp.uid, "uid-1", 5) == 0);
    cr_expect(sp.rv_len == 1 && sp.rv[0] == '7');
}

Test(vctask, predicate_not_plain)
{
    static const char *const bodies[] = {
        /* the DOM path decides each of these */
        "",
        "[]",
        "{\"task\":{\"Pod\":{}},\"node\":{\"Name\":\"a\"}} x",
        "{\"task\":{\"Pod\":{}},\"task\":{\"Pod\":{}},\"node\":{\"Name\":\"a\"}}",
        "{\"Task\":{\"Pod\":{}},\"node\":{\"Name\":\"a\"}}",
        "{\"t\\u0061sk\":{\"Pod\":{}},\"node\":{\"Name\":\"a\"}}",
        "{\"task\":{\"Pod\":null,\"Resreq\":{}},\"node\":{\"Name\":\"a\"}}",
        "{\"task\":{\"pod\":{}},\"node\":{\"Name\":\"a\"}}",
        "{\"task\":{\"Pod\":{}},\"node\":{\"Name\":\"\"}}",
        "{\"task\":{\"Pod\":{}},\"node\":{\"name\":\"a\"}}",
        "{\"task\":{\"Pod\":{}},\"node\":{\"Name\":\"a\\u0062\"}}",
        "{\"task\":{\"Pod\":{}},\"node\":{\"Name\":\"a\",\"Name\":\"b\"}}",
        "{\"task\":{\"Pod\":{}},\"node\":{\"Name\":7}}",
        "{\"task\":{\"Pod\":{}},\"node\":{\"Name\":\"a\",\"Node\":{\"x\":tru}}}",
        "{\"task\":{\"Pod\":{}}}",
        "{\"task\":{\"Pod\":{}},\"node\":{\"Name\":\"a\"}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        vctask_pod_span sp;
        const char *name;
        size_t len;
        cr_expect(!scan_pred(bodies[i], &name, &len, &sp), "taken as plain: %s", bodies[i]);
    }
    /* an exact key beside a case variant is what Go and json_get read */
    vctask_pod_span sp;
    const char *name;
    size_t len;
    cr_expect(scan_pred("{\"Task\":1,\"task\":{\"Pod\":{},\"POD\":2},\"node\":{\"NAME\":3,"
                        "\"Name\":\"a\"}}",
                        &name, &len, &sp));
}

Test(vctask, prioritize_names)
{
    pool *p = pool_new(0);
    const char *body =
        "{\"task\":{\"Pod\":" POD("u", "1", "1") "},\"nodes\":[{\"Name\":\"b\"},"
                                                 "{\"Name\":\"a\"},{\"Name\":\"b\"}]}";
    vctask_pod_span sp;
    sched_name *names;
    size_t n;
    vctask_seen seen;
    cr_assert(vctask_scan_prioritize(NULL, p, body, strlen(body), &sp, &names, &n, &seen));
    cr_assert_eq(n, 2);
    cr_expect(seen.scanned == 3 && seen.stepped == 0);
    cr_expect(names[0].len == 1 && names[0].s[0] == 'b');
    cr_expect(names[1].len == 1 && names[1].s[0] == 'a');
    const char *none = "{\"task\":{\"Pod\":{}},\"nodes\":null}";
    cr_expect(vctask_scan_prioritize(NULL, p, none, strlen(none), &sp, &names, &n, &seen) &&
              n == 0);
    const char *absent = "{\"task\":{\"Pod\":{}}}";
    cr_expect(vctask_scan_prioritize(NULL, p, absent, strlen(absent), &sp, &names, &n, &seen) &&
              n == 0);
    const char *other_case = "{\"task\":{\"Pod\":{}},\"Nodes\":[{\"Name\":\"a\"}]}";
    cr_expect(
        !vctask_scan_prioritize(NULL, p, other_case, strlen(other_case), &sp, &names, &n, &seen));
    const char *not_obj = "{\"task\":{\"Pod\":{}},\"nodes\":[\"a\"]}";
    cr_expect(!vctask_scan_prioritize(NULL, p, not_obj, strlen(not_obj), &sp, &names, &n, &seen));
    pool_free(p);
}

/* pred_seen scans body as predicate with memo m: true when plain, how
 * the node was taken in *seen. */
static bool pred_seen(vctask_memo *m, const char *body, vctask_seen *seen)
{
    vctask_pod_span sp;
    const char *name;
    size_t len;
    bool ok = vctask_scan_predicate(m, body, strlen(body), &sp, &name, &len, seen);
    cr_expect(!ok || (len == 6 && memcmp(name, "node-a", 6) == 0));
    return ok;
}

Test(vctask, nodeinfo_seen_before)
{
    vctask_memo *m;
    cr_assert_eq(vctask_memo_new(&m), AS_OK);
    vctask_seen seen;
    const char *a = PRED(POD("uid-1", "7", "1"), "{\"Name\":\"node-a\",\"Node\":{\"x\":[1,2]}}");
    cr_assert(pred_seen(m, a, &seen));
    cr_expect(seen.scanned == 1 && seen.stepped == 0);
    /* the same NodeInfo again, beside another task: stepped over */
    const char *a2 = PRED(POD("uid-2", "9", "2"), "{\"Name\":\"node-a\",\"Node\":{\"x\":[1,2]}}");
    cr_assert(pred_seen(m, a2, &seen));
    cr_expect(seen.scanned == 0 && seen.stepped == 1);
    /* the same Name and length, other bytes: scanned, and malformed is
     * refused */
    const char *bad = PRED(POD("uid-1", "7", "1"), "{\"Name\":\"node-a\",\"Node\":{\"x\":[1,2}}}");
    cr_expect(!pred_seen(m, bad, &seen));
    cr_expect(seen.stepped == 0);
    const char *b = PRED(POD("uid-1", "7", "1"), "{\"Name\":\"node-a\",\"Node\":{\"x\":[1,3]}}");
    cr_assert(pred_seen(m, b, &seen));
    cr_expect(seen.scanned == 1);
    cr_assert(pred_seen(m, b, &seen));
    cr_expect(seen.stepped == 1);
    /* a longer NodeInfo that begins with the one seen: the memo's length
     * and hash do not match it; it takes the Name's entry (a node's
     * latest NodeInfo is the one remembered) */
    const char *longer =
        PRED(POD("uid-1", "7", "1"), "{\"Name\":\"node-a\",\"Node\":{\"x\":[1,3]},\"y\":1}");
    cr_assert(pred_seen(m, longer, &seen));
    cr_expect(seen.scanned == 1);
    cr_assert(pred_seen(m, longer, &seen));
    cr_expect(seen.stepped == 1);
    cr_assert(pred_seen(m, b, &seen));
    cr_expect(seen.scanned == 1);
    /* Name not first: never stepped over */
    const char *late = PRED(POD("uid-1", "7", "1"), "{\"Node\":{},\"Name\":\"node-a\"}");
    cr_assert(pred_seen(m, late, &seen));
    cr_assert(pred_seen(m, late, &seen));
    cr_expect(seen.scanned == 1 && seen.stepped == 0);
    /* prioritize: its NodeInfos are one level deeper, so one seen in a
     * predicate is scanned there once, then stepped over; the entry, now
     * good at either depth, serves predicate too (b's NodeInfo is known
     * at predicate's depth here) */
    pool *p = pool_new(0);
    const char *prio = "{\"task\":{\"Pod\":" POD(
        "u", "1", "1") "},\"nodes\":["
                       "{\"Name\":\"node-a\",\"Node\":{\"x\":[1,3]}},{\"Name\":\"node-b\"}]}";
    vctask_pod_span sp;
    sched_name *names;
    size_t n;
    cr_assert(vctask_scan_prioritize(m, p, prio, strlen(prio), &sp, &names, &n, &seen));
    cr_expect(n == 2 && seen.scanned == 2 && seen.stepped == 0);
    cr_assert(vctask_scan_prioritize(m, p, prio, strlen(prio), &sp, &names, &n, &seen));
    cr_expect(n == 2 && seen.scanned == 0 && seen.stepped == 2);
    cr_expect(names[1].len == 6 && memcmp(names[1].s, "node-b", 6) == 0);
    for (int i = 0; i < 2; i++) {
        cr_assert(pred_seen(m, b, &seen));
        cr_expect(seen.stepped == 1, "predicate after prioritize, call %d", i);
        cr_assert(vctask_scan_prioritize(m, p, prio, strlen(prio), &sp, &names, &n, &seen));
        cr_expect(seen.stepped == 2, "prioritize after predicate, call %d", i);
    }
    pool_free(p);
    vctask_memo_free(m);
}

/* Threads sharing one memo (the server's two or more HTTP threads): every
 * scan takes its own node's Name whatever the others write meanwhile
 * (under TSan: the NodeInfo table's words are only touched atomically). */
#define SEEN_THREADS 4
#define SEEN_NODES   48
#define SEEN_ROUNDS  300

typedef struct seen_arg {
    vctask_memo *m;
    int id;
    size_t stepped;
    bool ok;
} seen_arg;

static void *seen_worker(void *p)
{
    seen_arg *a = p;
    a->ok = true;
    for (int r = 0; r < SEEN_ROUNDS; r++) {
        /* each thread asks about every node twice in a row, a different
         * one first, and with NodeInfo bytes that differ between threads
         * and rounds: entries are overwritten under the others' reads */
        int node = (r / 2 + a->id * 7) % SEEN_NODES;
        int v = (r / 2 / SEEN_NODES + a->id) % 2;
        char body[512], want[32];
        snprintf(want, sizeof want, "node-%02d", node);
        static const char fmt[] = "{\"task\":{\"UID\":\"u\",\"Pod\":" POD(
            "uid-1", "7", "1") "},\"node\":{\"Name\":\"%s\",\"Node\":{\"v\":%d,\"x\":[1,2]}}}";
        snprintf(body, sizeof body, fmt, want, v);
        vctask_pod_span sp;
        const char *name;
        size_t len;
        vctask_seen seen;
        if (!vctask_scan_predicate(a->m, body, strlen(body), &sp, &name, &len, &seen) ||
            len != strlen(want) || memcmp(name, want, len) != 0 || seen.stepped + seen.scanned != 1)
            a->ok = false;
        a->stepped += seen.stepped;
    }
    return NULL;
}

Test(vctask, nodeinfo_memo_shared_by_threads)
{
    vctask_memo *m;
    cr_assert_eq(vctask_memo_new(&m), AS_OK);
    pthread_t th[SEEN_THREADS];
    seen_arg args[SEEN_THREADS];
    for (int i = 0; i < SEEN_THREADS; i++) {
        args[i] = (seen_arg){.m = m, .id = i};
        cr_assert_eq(pthread_create(&th[i], NULL, seen_worker, &args[i]), 0);
    }
    size_t stepped = 0;
    for (int i = 0; i < SEEN_THREADS; i++) {
        pthread_join(th[i], NULL);
        cr_expect(args[i].ok, "thread %d took a wrong answer", i);
        stepped += args[i].stepped;
    }
    /* alone, a thread would step over every second call; the others'
     * writes in between take a few of those */
    cr_expect_gt(stepped, SEEN_THREADS * SEEN_ROUNDS / 4);
    vctask_memo_free(m);
}

static svc *new_svc(void)
{
    return new_svc_from(DATA "/cluster.yaml");
}

static const model_pod *pod_of(vctask_memo *m, svc *s, const char *body, vctask_ent **e, bool *hit)
{
    vctask_pod_span sp;
    const char *name;
    size_t len;
    cr_assert(scan_pred(body, &name, &len, &sp), "%s", body);
    const model_pod *p = NULL;
    cr_assert_eq(vctask_pod(m, &s->core->reg, &sp, &p, e, hit), AS_OK);
    return p;
}

Test(vctask, memo_same_bytes_uid_and_version_only)
{
    svc *s = new_svc();
    vctask_memo *m;
    cr_assert_eq(vctask_memo_new(&m), AS_OK);
    vctask_ent *e1, *e2, *e3, *e4;
    bool hit;
    const model_pod *p1 = pod_of(m, s, PRED(POD("u1", "5", "1"), "{\"Name\":\"a\"}"), &e1, &hit);
    cr_expect(!hit);
    cr_expect_eq(p1->req.v[MODEL_RES_CPU], 1000);
    /* the same Pod on another node: the memo */
    const model_pod *p2 = pod_of(m, s, PRED(POD("u1", "5", "1"), "{\"Name\":\"b\"}"), &e2, &hit);
    cr_expect(hit);
    cr_expect_eq(p1, p2);
    /* a new resourceVersion (and spec): decoded afresh */
    const model_pod *p3 = pod_of(m, s, PRED(POD("u1", "6", "2"), "{\"Name\":\"a\"}"), &e3, &hit);
    cr_expect(!hit);
    cr_expect_eq(p3->req.v[MODEL_RES_CPU], 2000);
    /* p1 was evicted from its slot or not: either way it stays valid while
     * lent, and a Pod without a resourceVersion is never remembered */
    cr_expect_eq(p1->req.v[MODEL_RES_CPU], 1000);
    const char *norv = "{\"task\":{\"Pod\":{\"metadata\":{\"name\":\"t\",\"uid\":\"u9\"},\"spec\":{"
                       "\"containers\":[]}}},\"node\":{\"Name\":\"a\"}}";
    pod_of(m, s, norv, &e4, &hit);
    cr_expect(!hit);
    vctask_put(m, e4);
    pod_of(m, s, norv, &e4, &hit);
    cr_expect(!hit);
    vctask_put(m, e4);
    vctask_put(m, e1);
    vctask_put(m, e2);
    vctask_put(m, e3);
    vctask_memo_free(m);
    svc_free(s);
}

Test(vctask, memo_evicts_within_its_cap)
{
    svc *s = new_svc();
    vctask_memo *m;
    cr_assert_eq(vctask_memo_new(&m), AS_OK);
    char body[1024];
    for (int i = 0; i < 4 * VCTASK_MEMO_SLOTS; i++) {
        snprintf(body, sizeof body,
                 "{\"task\":{\"Pod\":{\"metadata\":{\"name\":\"t%d\",\"uid\":\"u%d\","
                 "\"resourceVersion\":\"1\"},\"spec\":{\"containers\":[]}}},\"node\":{\"Name\":"
                 "\"a\"}}",
                 i, i);
        vctask_ent *e;
        bool hit;
        const model_pod *p = pod_of(m, s, body, &e, &hit);
        cr_expect(!hit);
        char want[16];
        snprintf(want, sizeof want, "u%d", i);
        cr_expect_str_eq(p->uid, want);
        vctask_put(m, e);
    }
    vctask_memo_free(m); /* ASan: nothing leaks beyond the slots */
    svc_free(s);
}

/* Volcano asks about its pending tasks in turn, session after session: a
 * quarter of the memo's capacity in turn all hits from the second round
 * on (a direct-mapped memo left tasks whose hashes collide missing on
 * every call). */
Test(vctask, memo_keeps_tasks_asked_in_turn)
{
    svc *s = new_svc();
    vctask_memo *m;
    cr_assert_eq(vctask_memo_new(&m), AS_OK);
    char body[1024];
    int hits = 0;
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < VCTASK_MEMO_SLOTS / 4; i++) {
            snprintf(body, sizeof body,
                     "{\"task\":{\"Pod\":{\"metadata\":{\"name\":\"agent-%d\",\"uid\":"
                     "\"6f1c2a4e-%08d\",\"resourceVersion\":\"%d\"},\"spec\":{\"containers\":[]"
                     "}}},\"node\":{\"Name\":\"a\"}}",
                     i, i, 1000 + i);
            vctask_ent *e;
            bool hit;
            pod_of(m, s, body, &e, &hit);
            cr_expect_eq(hit, round > 0, "round %d task %d", round, i);
            hits += hit;
            vctask_put(m, e);
        }
    cr_expect_eq(hits, 2 * VCTASK_MEMO_SLOTS / 4);
    vctask_memo_free(m);
    svc_free(s);
}

static uint64_t memo_count(svc *s, const char *result)
{
    buf b;
    buf_init(&b, 1 << 20);
    cr_assert_eq(metrics_render(s->core->metrics, &b), AS_OK);
    char want[128];
    snprintf(want, sizeof want, "agentsched_volcano_pod_memo_total{result=\"%s\"} ", result);
    const char *p = strstr(b.data, want);
    cr_assert(p, "no series %s", want);
    uint64_t v = strtoull(p + strlen(want), NULL, 10);
    buf_free(&b);
    return v;
}

Test(vctask, handlers_answer_alike_either_path)
{
    svc *s = new_svc();
    /* the same request, plain and with a case-variant key the DOM path
     * reads (Go's rules): the same answer */
    const char *plain = PRED(POD("uid-x", "3", "1"), "{\"Name\":\"node-a\"}");
    const char *dom = "{\"task\":{\"UID\":\"u\",\"Name\":\"t1\",\"pod\":" POD(
        "uid-x", "3", "1") "},\"node\":{\"Name\":\"node-a\"}}";
    reply a = call(s, volcano_handle_predicate, plain);
    reply b = call(s, volcano_handle_predicate, plain);
    reply c = call(s, volcano_handle_predicate, dom);
    cr_expect_eq(a.status, 200);
    cr_expect_str_eq(a.raw, b.raw);
    cr_expect_str_eq(a.raw, c.raw);
    cr_expect_eq(memo_count(s, "miss"), 1);
    cr_expect_eq(memo_count(s, "hit"), 1);
    cr_expect_eq(memo_count(s, "dom"), 1);
    reply_free(&a);
    reply_free(&b);
    reply_free(&c);
    const char *pp =
        "{\"task\":{\"Pod\":" POD("uid-x", "3", "1") "},\"nodes\":[{\"Name\":"
                                                     "\"node-a\"},{\"Name\":\"nope\"}]}";
    const char *pd =
        "{\"task\":{\"Pod\":" POD("uid-x", "3", "1") "},\"nodes\":[{\"Name\":"
                                                     "\"node-a\"},{\"name\":\"nope\"}]}";
    a = call(s, volcano_handle_prioritize, pp);
    c = call(s, volcano_handle_prioritize, pd);
    cr_expect_eq(a.status, 200);
    cr_expect_str_eq(a.raw, c.raw);
    cr_expect_eq(memo_count(s, "hit"), 2);
    cr_expect_eq(memo_count(s, "dom"), 2);
    reply_free(&a);
    reply_free(&c);
    svc_free(s);
}

Test(vctask, fixtures_answered_as_expected)
{
    /* the fixtures whose bodies are the plain case (every one with a Pod
     * object and a plain node Name) go through the scanner and the memo;
     * their expected answers were written for the DOM path */
    cr_expect_geq(run_handler_fixtures(DATA, "predicate", volcano_handle_predicate, true), 20);
    cr_expect_geq(run_handler_fixtures(DATA, "prioritize", volcano_handle_prioritize, true), 6);
}

/*
 * fuzz_vctask.c - libFuzzer target for the fast decoders of Volcano's
 * predicate and prioritize bodies (vctask.h), held to the DOM path.
 *
 * The first input byte picks predicate (even) or prioritize (odd), the rest
 * is the body. Whenever the scanner takes a body as the plain case, the DOM
 * path must read the same thing from it: json_parse of the body (when the
 * builder takes it: outside the Pod the scanner lets numbers out of range
 * and over-long keys through, on purpose), the task's Pod decoded by
 * vctask_task_pod with the same identity and requests as vctask_pod's,
 * and the same node name(s) in the same order, de-duplicated alike. A
 * second vctask_pod of the same span must answer from the memo with the
 * same pod. The memo's NodeInfos seen before (the scan runs with it) must
 * not change an answer: a scan without the memo says the same. Seeds: the
 * predicate and prioritize requests of test/unit/data/volcano with
 * 0x00 / 0x01 prepended.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/api/vctask.h"
#include "agentsched/api/volcano.h"
#include "agentsched/base/json.h"
#include "agentsched/base/log.h"
#include "agentsched/serve/svc.h"
#include "fuzz_svc.h"

static svc *fuzz_svc;
static vctask_memo *memo;

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_vctask: %s\n", what);
        abort();
    }
}

static bool same_pod(const model_pod *a, const model_pod *b)
{
    return strcmp(a->uid, b->uid) == 0 && strcmp(a->ns, b->ns) == 0 &&
           strcmp(a->name, b->name) == 0 && a->req_mask == b->req_mask &&
           memcmp(&a->req, &b->req, sizeof a->req) == 0 && a->gpu_count == b->gpu_count &&
           a->gpu_milli == b->gpu_milli && a->ntolerations == b->ntolerations &&
           a->priority == b->priority;
}

/* dom_names: the node names the DOM path reads, de-duplicated. */
static size_t dom_names(const json_t *root, bool prio, const char **out, size_t cap, bool *ok)
{
    as_diag d = {{0}, {0}};
    *ok = true;
    if (!prio) {
        const char *name;
        *ok = vctask_node_name(json_get(root, "node"), "node", &name, &d) == AS_OK;
        out[0] = *ok ? name : NULL;
        return *ok;
    }
    const json_t *nodes = json_get(root, "nodes");
    size_t n = 0;
    for (size_t i = 0; json_is_array(nodes) && i < json_array_size(nodes); i++) {
        const char *name;
        if (vctask_node_name(json_array_get(nodes, i), "nodes[]", &name, &d) != AS_OK) {
            *ok = false;
            return 0;
        }
        bool dup = false;
        for (size_t j = 0; j < n && !dup; j++)
            dup = strcmp(out[j], name) == 0;
        if (!dup && n < cap)
            out[n++] = name;
    }
    return n;
}

/* scan runs the verb's scanner (prioritize or predicate) with memo m
 * (NULL: none): its names in *names (predicate's one in *one), n of them
 * when plain. */
static bool scan(vctask_memo *m, pool *p, bool prio, const char *body, size_t len,
                 vctask_pod_span *sp, sched_name **names, sched_name *one, size_t *n,
                 vctask_seen *seen)
{
    if (prio)
        return vctask_scan_prioritize(m, p, body, len, sp, names, n, seen);
    const char *name;
    size_t nlen;
    bool plain = vctask_scan_predicate(m, body, len, sp, &name, &nlen, seen);
    *one = (sched_name){name, nlen, 0};
    *names = one;
    *n = plain;
    return plain;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_svc_once(&fuzz_svc, AGENTSCHED_SOURCE_DIR "/test/unit/data/volcano/cluster.yaml",
                  "fuzz_vctask");
    if (!memo && vctask_memo_new(&memo) != AS_OK)
        abort();
    if (size < 1)
        return 0;
    bool prio = data[0] & 1;
    size_t len = size - 1;
    char *body = malloc(len + 1);
    memcpy(body, data + 1, len);
    body[len] = '\0';
    pool *p = pool_new((size_t)16 << 20);
    vctask_pod_span sp, sp2;
    sched_name *names = NULL, *names2 = NULL, one, one2;
    size_t n = 0, n2 = 0;
    vctask_seen seen, seen2;
    bool plain = scan(memo, p, prio, body, len, &sp, &names, &one, &n, &seen);
    /* the same body without the memo: the same answer and names */
    bool plain2 = scan(NULL, p, prio, body, len, &sp2, &names2, &one2, &n2, &seen2);
    check(plain2 == plain, "the memo changed whether the body is plain");
    check(!plain || n2 == n, "the memo changed the node count");
    for (size_t i = 0; plain && i < n; i++)
        check(names2[i].s == names[i].s && names2[i].len == names[i].len,
              "the memo changed a node's name");
    check(seen2.stepped == 0, "stepped over without a memo");
    json_t *root = NULL;
    as_diag d = {{0}, {0}};
    if (plain && json_parse(body, len, &root, &d) == AS_OK) {
        check(json_is_object(root), "plain body is not an object");
        const model_registry *reg = &fuzz_svc->core->reg;
        const json_t *task = json_get(root, "task");
        check(json_is_object(json_get(task, "Pod")), "plain task without a Pod object");
        check(sp.pod && sp.pod_len > 0, "no Pod span");
        const char *dn[64];
        bool ok;
        size_t m = dom_names(root, prio, dn, 64, &ok);
        check(ok, "the DOM path refuses a node the scanner took");
        if (m < 64) {
            check(m == n, "node count differs");
            for (size_t i = 0; i < n; i++)
                check(strlen(dn[i]) == names[i].len && memcmp(dn[i], names[i].s, names[i].len) == 0,
                      "node name differs");
        }
        const model_pod *fast = NULL;
        vctask_ent *ent = NULL;
        bool hit;
        as_err ferr = vctask_pod(memo, reg, &sp, &fast, &ent, &hit);
        model_pod *slow = NULL;
        as_err serr = vctask_task_pod(reg, task, "task", &slow, &d);
        if (ferr == AS_OK) {
            check(serr == AS_OK, "the DOM path refuses a Pod the fast path decoded");
            check(same_pod(fast, slow), "the pods differ");
            const model_pod *again = NULL;
            vctask_ent *ent2 = NULL;
            check(vctask_pod(memo, reg, &sp, &again, &ent2, &hit) == AS_OK, "second decode");
            check(same_pod(fast, again), "the memo's pod differs");
            check(!hit || (sp.uid && sp.rv), "a memo hit for a Pod without uid/resourceVersion");
            vctask_put(memo, ent2);
        }
        vctask_put(memo, ent);
        model_pod_free(slow);
    }
    json_decref(root);
    pool_free(p);
    free(body);
    return 0;
}

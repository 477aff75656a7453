/* test_volcano.c - the Volcano extender verbs, driven by fixtures
 * (test/unit/data/volcano/<verb>/<case>/{request.json,expected.json[,status]}
 * with payloads shaped like Volcano's TaskInfo / NodeInfo / JobInfo), a
 * table of hostile requests, and the cross-entry-point test: an allocation
 * reported by allocateFunc blocks the same capacity for a following
 * kube-scheduler-extender filter, and deallocateFunc frees it again. */
#include <criterion/criterion.h>
#include <curl/curl.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentsched/base/doc.h"
#include "agentsched/api/extender.h"
#include "agentsched/base/clock.h"
#include "agentsched/base/log.h"
#include "agentsched/core/binder.h"
#include "agentsched/serve/svc.h"
#include "agentsched/api/vcsession.h"
#include "agentsched/api/volcano.h"

#define DATA TEST_DATA_DIR "/volcano"

#include "handler_fixtures.h"

static svc *new_svc(void)
{
    return new_svc_from(DATA "/cluster.yaml");
}

static size_t run_fixtures(const char *verb, http_handler_fn fn)
{
    return run_handler_fixtures(DATA, verb, fn, true);
}

Test(volcano, fixtures_predicate)
{
    cr_assert_geq(run_fixtures("predicate", volcano_handle_predicate), 20);
}

Test(volcano, fixtures_prioritize)
{
    cr_assert_geq(run_fixtures("prioritize", volcano_handle_prioritize), 6);
}

Test(volcano, fixtures_allocate)
{
    cr_assert_geq(run_fixtures("allocateFunc", volcano_handle_allocate), 6);
}

Test(volcano, fixtures_deallocate)
{
    cr_assert_geq(run_fixtures("deallocateFunc", volcano_handle_deallocate), 3);
}

Test(volcano, fixtures_session)
{
    cr_assert_geq(run_fixtures("onSessionOpen", volcano_handle_on_session_open), 5);
    cr_assert_geq(run_fixtures("onSessionClose", volcano_handle_on_session_close), 2);
}

Test(volcano, fixtures_abstaining_verbs)
{
    cr_assert_geq(run_fixtures("preemptable", volcano_handle_preemptable), 4);
    cr_assert_geq(run_fixtures("reclaimable", volcano_handle_reclaimable), 4);
    cr_assert_geq(run_fixtures("jobEnqueueable", volcano_handle_job_enqueueable), 2);
    cr_assert_geq(run_fixtures("jobEnqueued", volcano_handle_job_enqueued), 2);
    cr_assert_geq(run_fixtures("queueOverused", volcano_handle_queue_overused), 2);
    cr_assert_geq(run_fixtures("jobReady", volcano_handle_job_ready), 2);
}

Test(volcano, routes)
{
    /* The service's one route table serves the twelve verbs, POST only. */
    size_t ns = 0, nvolcano = 0;
    svc *s = new_svc();
    const http_route *all = svc_routes(s, &ns);
    for (size_t i = 0; i < ns; i++) {
        if (strncmp(all[i].path, "/volcano/", 9) != 0)
            continue;
        cr_assert_str_eq(all[i].method, "POST", "%s", all[i].path);
        cr_assert(all[i].fn, "%s", all[i].path);
        nvolcano++;
    }
    cr_assert_eq(nvolcano, 12);
    svc_free(s);
}

/* ------------------------------------------------------------------ */
/* allocateFunc -> kube-scheduler extender filter                      */
/* ------------------------------------------------------------------ */

/* A Volcano EventHandlerRequest for a task of `cpu` on `node`. */
static char *event_body(const char *name, const char *cpu, const char *node, int status)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    fprintf(f,
            "{\"task\": {\"UID\": \"uid-%s\", \"Job\": \"default/job-1\", \"Name\": \"%s\", "
            "\"Namespace\": \"default\", \"Resreq\": {\"MilliCPU\": 1000, \"Memory\": 1073741824, "
            "\"ScalarResources\": null, \"MaxTaskNum\": 0}, \"NodeName\": \"%s\", \"Status\": %d, "
            "\"Pod\": {\"metadata\": {\"name\": \"%s\", \"namespace\": \"default\", \"uid\": "
            "\"uid-%s\"}, \"spec\": {\"schedulerName\": \"volcano\", \"nodeName\": \"%s\", "
            "\"containers\": [{\"name\": \"main\", \"resources\": {\"requests\": {\"cpu\": "
            "\"%s\", \"memory\": \"1Gi\"}}}]}}}}",
            name, name, node, status, name, name, node, cpu);
    fclose(f);
    return out;
}

/* filter asks the kube-scheduler extender about a 500m pod on `node`;
 * returns true when the node passes. */
static bool filter_passes(svc *s, const char *node)
{
    char body[1024];
    snprintf(body, sizeof body,
             "{\"Pod\": {\"metadata\": {\"name\": \"k8s-pod\", \"namespace\": \"default\", "
             "\"uid\": \"uid-k8s-pod\"}, \"spec\": {\"containers\": [{\"name\": \"c\", "
             "\"resources\": {\"requests\": {\"cpu\": \"500m\"}}}]}}, \"Nodes\": null, "
             "\"NodeNames\": [\"%s\"]}",
             node);
    reply r = call(s, extender_handle_filter, body);
    cr_assert_eq(r.status, 200, "%s", r.raw);
    const json_t *names = json_object_get(r.json, "NodeNames");
    bool pass = json_array_size(names) == 1;
    if (!pass)
        cr_expect_str_eq(
            json_string_value(json_object_get(json_object_get(r.json, "FailedNodes"), node)),
            "Insufficient cpu", "%s", r.raw);
    reply_free(&r);
    return pass;
}

/* fragment's reserve in Volcano's predicate, as in kube-scheduler's
 * filter: once 20 GPU pods of 4 cores a GPU were seen, gpu-1 (32 cores, 4
 * free GPUs) keeps 16 cores; a CPU-only task of 20 cores gets code 2 with
 * the kept reason, one of 8 cores fits. */
Test(volcano, predicate_keeps_a_gpu_nodes_cpu_for_its_gpus)
{
    svc *s = new_svc();
    teach_gpu_pods(s, 20);
    reply r = call(s, volcano_handle_predicate,
                   "{\"task\": {\"Name\": \"big\", \"Namespace\": \"default\", \"Resreq\": "
                   "{\"MilliCPU\": 20000, \"Memory\": 0}}, \"node\": {\"Name\": \"gpu-1\"}}");
    cr_assert_eq(json_integer_value(json_object_get(r.json, "code")), 2, "%s", r.raw);
    cr_assert_str_eq(json_string_value(json_object_get(r.json, "status")),
                     "node(s) kept their cpu and memory for their free GPUs");
    reply_free(&r);
    r = call(s, volcano_handle_predicate,
             "{\"task\": {\"Name\": \"small\", \"Namespace\": \"default\", \"Resreq\": "
             "{\"MilliCPU\": 8000, \"Memory\": 0}}, \"node\": {\"Name\": \"gpu-1\"}}");
    cr_assert_eq(json_integer_value(json_object_get(r.json, "code")), 0, "%s", r.raw);
    reply_free(&r);
    svc_free(s);
}

static void expect_errmsg(reply *r, const char *want)
{
    cr_expect_eq(r->status, 200, "%s", r->raw);
    cr_expect_str_eq(json_string_value(json_object_get(r->json, "errorMessage")), want, "%s",
                     r->raw);
    reply_free(r);
}

Test(volcano, allocation_blocks_extender_filter_until_deallocated)
{
    svc *s = new_svc();
    /* tiny has 1 cpu: free at first */
    cr_assert(filter_passes(s, "tiny"));

    /* Volcano allocates a 1-cpu task to tiny inside its session */
    char *alloc = event_body("vt1", "1", "tiny", 2);
    reply r = call(s, volcano_handle_allocate, alloc);
    expect_errmsg(&r, "");
    cache_pod_info info;
    cache_pod_lookup(s->core->cache, "uid-vt1", &info);
    cr_assert_eq(info.state, CACHE_POD_ASSUMED);
    cr_assert_str_eq(info.node, "tiny");

    /* kube-scheduler's extender filter now sees tiny as full */
    cr_assert_not(filter_passes(s, "tiny"));
    /* and Volcano's own predicate agrees */
    r = call(s, volcano_handle_predicate,
             "{\"task\": {\"Name\": \"vt2\", \"Namespace\": \"default\", \"Resreq\": "
             "{\"MilliCPU\": 500, \"Memory\": 0}}, \"node\": {\"Name\": \"tiny\"}}");
    cr_expect_eq(json_integer_value(json_object_get(r.json, "code")), 2, "%s", r.raw);
    reply_free(&r);

    /* Volcano repeats the callback: idempotent, still one pod's worth */
    r = call(s, volcano_handle_allocate, alloc);
    expect_errmsg(&r, "");
    as_diag d = {{0}, {0}};
    cr_expect_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);

    /* a second task does not fit on top: refused, Volcano rolls it back */
    char *alloc2 = event_body("vt3", "500m", "tiny", 2);
    r = call(s, volcano_handle_allocate, alloc2);
    expect_errmsg(&r,
                  "agentsched refused to allocate pod default/vt3 to node tiny: Insufficient cpu");
    cache_pod_lookup(s->core->cache, "uid-vt3", &info);
    cr_expect_eq(info.state, CACHE_POD_ABSENT);

    /* deallocate frees tiny again, for both schedulers; twice is fine */
    r = call(s, volcano_handle_deallocate, alloc);
    expect_errmsg(&r, "");
    cache_pod_lookup(s->core->cache, "uid-vt1", &info);
    cr_expect_eq(info.state, CACHE_POD_ABSENT);
    cr_assert(filter_passes(s, "tiny"));
    r = call(s, volcano_handle_deallocate, alloc);
    expect_errmsg(&r, "");

    /* now vt3 fits */
    r = call(s, volcano_handle_allocate, alloc2);
    expect_errmsg(&r, "");
    cr_expect_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);
    free(alloc);
    free(alloc2);
    svc_free(s);
}

Test(volcano, allocation_moves_when_volcano_redecides)
{
    svc *s = new_svc();
    char *a = event_body("mv", "1", "tiny", 2);
    reply r = call(s, volcano_handle_allocate, a);
    expect_errmsg(&r, "");
    char *b = event_body("mv", "1", "node-b", 2);
    r = call(s, volcano_handle_allocate, b);
    expect_errmsg(&r, "");
    cache_pod_info info;
    cache_pod_lookup(s->core->cache, "uid-mv", &info);
    cr_expect_eq(info.state, CACHE_POD_ASSUMED);
    cr_expect_str_eq(info.node, "node-b");
    cr_expect(filter_passes(s, "tiny"), "the old node is freed");
    as_diag d = {{0}, {0}};
    cr_expect_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);
    free(a);
    free(b);
    svc_free(s);
}

Test(volcano, bound_pod_is_not_moved_or_forgotten)
{
    svc *s = new_svc();
    /* a pod the API server reports bound to node-a */
    json_t *pj = json_pack("{s:{s:s,s:s,s:s},s:{s:s,s:[{s:s,s:{s:{s:s}}}]},s:{s:s}}", "metadata",
                           "name", "bp", "namespace", "default", "uid", "uid-bp", "spec",
                           "nodeName", "node-a", "containers", "name", "c", "resources", "requests",
                           "cpu", "1", "status", "phase", "Running");
    model_pod *p = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(model_pod_from_json(&s->core->reg, pj, &p, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(cache_pod_upsert(s->core->cache, p), AS_OK);
    model_pod_free(p);
    json_decref(pj);

    char *b = event_body("bp", "1", "node-b", 2);
    reply r = call(s, volcano_handle_allocate, b);
    expect_errmsg(&r, "agentsched refused to allocate pod default/bp to node node-b: it is bound "
                      "to node node-a");
    /* Volcano evicting the running task: deallocate leaves it to the API */
    r = call(s, volcano_handle_deallocate, b);
    expect_errmsg(&r, "");
    cache_pod_info info;
    cache_pod_lookup(s->core->cache, "uid-bp", &info);
    cr_expect_eq(info.state, CACHE_POD_BOUND);
    free(b);
    svc_free(s);
}

/* ------------------------------------------------------------------ */
/* Hostile requests                                                    */
/* ------------------------------------------------------------------ */

typedef struct bad_case {
    const char *name;
    http_handler_fn fn;
    const char *body;
    size_t len; /* 0 = strlen */
    int status;
    const char *field;      /* expected "field", NULL = any */
    const char *verb_field; /* the verb's own error field, NULL = none */
} bad_case;

#define NAME64 "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
#define NAME254                                                                                    \
    NAME64 NAME64 NAME64 "nnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnnn"
#define DEEP64  "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
#define CLOSE64 "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"

static const bad_case bad_cases[] = {
    {"empty body", volcano_handle_predicate, "", 0, 400, "", "status"},
    {"whitespace", volcano_handle_prioritize, "  \n ", 0, 400, "", "errorMessage"},
    {"null body", volcano_handle_allocate, "null", 0, 400, "", "errorMessage"},
    {"number body", volcano_handle_deallocate, "42", 0, 400, "", "errorMessage"},
    {"string body", volcano_handle_job_ready, "\"job\"", 0, 400, "", NULL},
    {"trailing garbage", volcano_handle_on_session_close, "{} x", 0, 400, "", NULL},
    {"NUL byte", volcano_handle_predicate, "{\"task\"\0: {}}", 13, 400, "", "status"},
    {"invalid UTF-8", volcano_handle_on_session_open, "{\"Nodes\": {\"\xff\xfe\": {}}}", 0, 400, "",
     NULL},
    {"nesting 130 deep (predicate)", volcano_handle_predicate,
     "{\"task\": " DEEP64 DEEP64 "[]" CLOSE64 CLOSE64 "}", 0, 400, NULL, "status"},
    {"nesting 130 deep (session)", volcano_handle_on_session_open,
     "{\"Jobs\": " DEEP64 DEEP64 "[]" CLOSE64 CLOSE64 "}", 0, 400, "", NULL},
    {"task array", volcano_handle_predicate, "{\"task\": [], \"node\": {\"Name\": \"node-a\"}}", 0,
     400, "task", "status"},
    {"Pod string", volcano_handle_predicate,
     "{\"task\": {\"Pod\": \"p\"}, \"node\": {\"Name\": \"node-a\"}}", 0, 400, "task.Pod",
     "status"},
    {"Resreq string", volcano_handle_allocate, "{\"task\": {\"Name\": \"x\", \"Resreq\": \"1\"}}",
     0, 400, "task.Resreq", "errorMessage"},
    {"MilliCPU string", volcano_handle_predicate,
     "{\"task\": {\"Name\": \"x\", \"Resreq\": {\"MilliCPU\": \"1000\"}}, \"node\": {\"Name\": "
     "\"node-a\"}}",
     0, 400, "task.Resreq.MilliCPU", "status"},
    {"Memory huge", volcano_handle_predicate,
     "{\"task\": {\"Name\": \"x\", \"Resreq\": {\"Memory\": 1e300}}, \"node\": {\"Name\": "
     "\"node-a\"}}",
     0, 400, "task.Resreq.Memory", "status"},
    {"Scalar value bool", volcano_handle_prioritize,
     "{\"task\": {\"Name\": \"x\", \"Resreq\": {\"ScalarResources\": {\"nvidia.com/gpu\": true}}}, "
     "\"nodes\": []}",
     0, 400, "task.Resreq.ScalarResources.nvidia.com/gpu", "errorMessage"},
    {"Scalar map array", volcano_handle_prioritize,
     "{\"task\": {\"Name\": \"x\", \"Resreq\": {\"ScalarResources\": [1]}}, \"nodes\": []}", 0, 400,
     "task.Resreq.ScalarResources", "errorMessage"},
    {"Resreq without Name", volcano_handle_predicate,
     "{\"task\": {\"Resreq\": {\"MilliCPU\": 1}}, \"node\": {\"Name\": \"node-a\"}}", 0, 400,
     "task.Name", "status"},
    {"UID number", volcano_handle_deallocate,
     "{\"task\": {\"UID\": 5, \"Name\": \"x\", \"Resreq\": {}}}", 0, 400, "task.UID",
     "errorMessage"},
    {"NodeName number", volcano_handle_allocate,
     "{\"task\": {\"Name\": \"x\", \"Resreq\": {}, \"NodeName\": 3}}", 0, 400, "task.NodeName",
     "errorMessage"},
    {"Node metadata string", volcano_handle_predicate,
     "{\"task\": {\"Name\": \"x\", \"Resreq\": {}}, \"node\": {\"Node\": {\"metadata\": \"m\"}}}",
     0, 400, "node.Node.metadata", "status"},
    {"node null in nodes", volcano_handle_prioritize,
     "{\"task\": {\"Name\": \"x\", \"Resreq\": {}}, \"nodes\": [null]}", 0, 400, "nodes[0]",
     "errorMessage"},
    {"node name with NUL", volcano_handle_predicate,
     "{\"task\": {\"Name\": \"x\", \"Resreq\": {}}, \"node\": {\"Name\": \"node-a\\u0000x\"}}", 0,
     400, "node.Name", "status"},
    {"evictees object", volcano_handle_preemptable, "{\"evictor\": {}, \"evictees\": {}}", 0, 400,
     "evictees", NULL},
    {"evictor string", volcano_handle_reclaimable, "{\"evictor\": \"t\"}", 0, 400, "evictor", NULL},
    {"queue array", volcano_handle_queue_overused, "{\"queue\": []}", 0, 400, "queue", NULL},
    {"job number", volcano_handle_job_enqueueable, "{\"job\": 1}", 0, 400, "job", NULL},
    /* a key holding NUL would count as another resource */
    {"Scalar key with NUL", volcano_handle_predicate,
     "{\"task\": {\"Name\": \"x\", \"Resreq\": {\"ScalarResources\": {\"nvidia.com/gpu\\u0000x\": "
     "1000}}}, \"node\": {\"Name\": \"node-a\"}}",
     0, 400, "task.Resreq.ScalarResources", "status"},
    {"Scalar key empty", volcano_handle_predicate,
     "{\"task\": {\"Name\": \"x\", \"Resreq\": {\"ScalarResources\": {\"\": 1000}}}, \"node\": "
     "{\"Name\": \"node-a\"}}",
     0, 400, "task.Resreq.ScalarResources", "status"},
    {"Pod nodeSelector key with NUL", volcano_handle_predicate,
     "{\"task\": {\"Pod\": {\"metadata\": {\"name\": \"p\"}, \"spec\": {\"nodeSelector\": "
     "{\"kubernetes.io/hostname\\u0000x\": \"node-a\"}}}}, \"node\": {\"Name\": \"node-a\"}}",
     0, 400, "task.Pod.spec.nodeSelector", "status"},
    {"Pod name of 254 bytes", volcano_handle_allocate,
     "{\"task\": {\"NodeName\": \"node-a\", \"Pod\": {\"metadata\": {\"name\": \"" NAME254 "\"}}}}",
     0, 400, "task.Pod.metadata.name", "errorMessage"},
    /* strict UTF-8: 400, never "out of memory" (413) from the pod builder */
    {"Name overlong UTF-8", volcano_handle_allocate,
     "{\"task\": {\"Name\": \"\xc0\xaf\", \"NodeName\": \"node-a\", \"Resreq\": {}}}", 0, 400, "",
     "errorMessage"},
    {"Scalar key surrogate", volcano_handle_predicate,
     "{\"task\": {\"Name\": \"x\", \"Resreq\": {\"ScalarResources\": {\"\xed\xa0\x80\": 1000}}}, "
     "\"node\": {\"Name\": \"node-a\"}}",
     0, 400, "", "status"},
    {"Namespace past U+10FFFF", volcano_handle_prioritize,
     "{\"task\": {\"Name\": \"x\", \"Namespace\": \"\xf4\x90\x80\x80\", \"Resreq\": {}}, "
     "\"nodes\": []}",
     0, 400, "", "errorMessage"},
    {"session overlong UTF-8 key", volcano_handle_on_session_open,
     "{\"Nodes\": {\"\xc0\xaf\": {}}}", 0, 400, "", NULL},
    {"session surrogate string", volcano_handle_on_session_open,
     "{\"Jobs\": {\"j\": {\"Name\": \"\xed\xa0\x80\"}}}", 0, 400, "", NULL},
    {"session NUL key", volcano_handle_on_session_open, "{\"Nodes\": {\"node-a\\u0000x\": {}}}", 0,
     400, "", NULL},
    {"huge key", volcano_handle_job_enqueued, NULL, 0, 400, NULL, NULL}, /* built below */
};

Test(volcano, hostile_requests)
{
    svc *s = new_svc();
    size_t n = sizeof bad_cases / sizeof bad_cases[0];
    cr_assert_geq(n, 15);
    for (size_t i = 0; i < n; i++) {
        const bad_case *c = &bad_cases[i];
        char *body = NULL;
        size_t len = c->len;
        if (!c->body) {
            /* an object key longer than the builder's 4096-byte cap */
            len = 10000;
            body = malloc(len + 1);
            memset(body, 'k', len);
            memcpy(body, "{\"", 2);
            memcpy(body + len - 5, "\":1}", 4);
            len -= 1;
            body[len] = '\0';
        } else {
            body = malloc((len ? len : strlen(c->body)) + 1);
            if (!len)
                len = strlen(c->body);
            memcpy(body, c->body, len);
            body[len] = '\0';
        }
        reply r = call_n(s, c->fn, body, len);
        cr_expect_eq(r.status, c->status, "%s: status %d: %.300s", c->name, r.status, r.raw);
        const json_t *e = json_object_get(r.json, "error");
        cr_expect(json_is_string(e) && json_string_length(e) > 0, "%s: no error: %.300s", c->name,
                  r.raw);
        const json_t *f = json_object_get(r.json, "field");
        cr_expect(json_is_string(f), "%s: no field: %.300s", c->name, r.raw);
        if (c->field && json_is_string(f))
            cr_expect_str_eq(json_string_value(f), c->field, "%s: %.300s", c->name, r.raw);
        if (c->verb_field)
            cr_expect(json_is_string(json_object_get(r.json, c->verb_field)), "%s: no %s: %.300s",
                      c->name, c->verb_field, r.raw);
        if (c->verb_field && strcmp(c->verb_field, "status") == 0)
            cr_expect_eq(json_integer_value(json_object_get(r.json, "code")), 1, "%s", c->name);
        reply_free(&r);
        free(body);
    }
    as_diag d = {{0}, {0}};
    cr_expect_eq(cache_check_invariants(s->core->cache, &d), AS_OK, "%s", d.msg);
    svc_free(s);
}

/* ------------------------------------------------------------------ */
/* Decoders                                                            */
/* ------------------------------------------------------------------ */

Test(volcano, resreq_units)
{
    svc *s = new_svc();
    json_t *t = json_loads(
        "{\"Name\": \"u\", \"Namespace\": \"ns1\", \"UID\": \"uid-u\", \"Resreq\": {\"MilliCPU\": "
        "1500.2, \"Memory\": 2147483648, \"ScalarResources\": {\"nvidia.com/gpu\": 2000, \"pods\": "
        "1, \"ephemeral-storage\": 1024000}}}",
        0, NULL);
    cr_assert(t);
    model_pod *p = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(vctask_task_pod(&s->core->reg, t, "task", &p, &d), AS_OK, "%s: %s", d.field,
                 d.msg);
    cr_expect_str_eq(p->name, "u");
    cr_expect_str_eq(p->ns, "ns1");
    cr_expect_str_eq(p->uid, "uid-u");
    cr_expect_eq(p->req.v[MODEL_RES_CPU], 1501); /* millicores, rounded up */
    cr_expect_eq(p->req.v[MODEL_RES_MEMORY], 2147483648LL);
    cr_expect_eq(p->req.v[MODEL_RES_EPHEMERAL], 1024); /* milli-bytes -> bytes */
    cr_expect_eq(p->req.v[MODEL_RES_PODS], 1);
    cr_expect_eq(p->gpu_count, 2); /* 2000 milli-GPU = 2 GPUs */
    model_pod_free(p);
    json_decref(t);

    /* the Pod wins over Resreq, and the task UID fills a uid-less Pod */
    t = json_loads("{\"UID\": \"tu\", \"Resreq\": {\"MilliCPU\": 9}, \"Pod\": {\"metadata\": "
                   "{\"name\": \"pp\"}, \"spec\": {\"containers\": [{\"name\": \"c\", "
                   "\"resources\": {\"requests\": {\"cpu\": \"250m\"}}}]}}}",
                   0, NULL);
    cr_assert_eq(vctask_task_pod(&s->core->reg, t, "task", &p, &d), AS_OK, "%s", d.msg);
    cr_expect_eq(p->req.v[MODEL_RES_CPU], 250);
    cr_expect_str_eq(p->uid, "tu");
    model_pod_free(p);
    json_decref(t);

    /* node names */
    const char *name = NULL;
    t = json_loads("{\"Name\": \"\", \"Node\": {\"metadata\": {\"name\": \"from-node\"}}}", 0,
                   NULL);
    cr_assert_eq(vctask_node_name(t, "node", &name, &d), AS_OK);
    cr_expect_str_eq(name, "from-node");
    json_decref(t);
    svc_free(s);
}

/* vctask_task_pod on a DOM from elsewhere (the decoder refuses these
 * keys first): a ScalarResources key with NUL or an empty one is refused
 * naming the map, never counted as another resource. */
Test(volcano, resreq_scalar_keys_checked)
{
    svc *s = new_svc();
    static const struct {
        const char *key;
        size_t len;
    } keys[] = {{"nvidia.com/gpu\0x", 16}, {"", 0}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *t = json_loads("{\"Name\": \"x\", \"Resreq\": {\"ScalarResources\": {}}}", 0, NULL);
        json_t *sc = json_object_get(json_object_get(t, "Resreq"), "ScalarResources");
        cr_assert_eq(json_object_setn_new(sc, keys[i].key, keys[i].len, json_integer(1000)), 0);
        model_pod *p = NULL;
        as_diag d = {{0}, {0}};
        cr_expect_eq(vctask_task_pod(&s->core->reg, t, "task", &p, &d), AS_EINVAL, "key %zu: %s", i,
                     d.msg);
        cr_expect_str_eq(d.field, "task.Resreq.ScalarResources", "key %zu: %s", i, d.msg);
        cr_expect_null(p);
        json_decref(t);
    }
    svc_free(s);
}

Test(volcano, session_scan_counts)
{
    svc *s = new_svc();
    const char *body = "{\"Jobs\": {\"a/j1\": {\"Tasks\": {\"x\": {\"Name\": \"Nodes\"}}}, "
                       "\"a/j2\": null}, \"nodes\": {\"node-a\": {}, \"ghost\": {\"Nodes\": "
                       "{\"inner\": 1}}}, \"Queues\": {}, \"NodeList\": [\"node-a\"]}";
    vcsession_stats st;
    as_diag d = {{0}, {0}};
    cr_assert_eq(vcsession_scan(s->core->cache, body, strlen(body), &st, &d), AS_OK, "%s", d.msg);
    cr_expect_eq(st.jobs, 2);
    cr_expect_eq(st.nodes, 2);
    cr_expect_eq(st.unknown_nodes, 1);
    cr_expect_str_eq(st.first_unknown, "ghost");
    svc_free(s);
}

/* ------------------------------------------------------------------ */
/* Through the HTTP server                                             */
/* ------------------------------------------------------------------ */

static size_t sink(char *p, size_t sz, size_t n, void *ud)
{
    buf *b = ud;
    buf_append(b, p, sz * n);
    return sz * n;
}

Test(volcano, served_under_volcano_prefix)
{
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.listen = "127.0.0.1:0";
    cfg.http_threads = 2;
    cfg.log_level = 0;
    log_set_level(LOG_ERROR);
    svc *s = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(svc_load_cluster(s, DATA "/cluster.yaml", &d), AS_OK, "%s", d.msg);
    cr_assert_eq(svc_http_start(s, &d), AS_OK, "%s", d.msg);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/volcano/predicate",
             (unsigned)http_server_port(s->http));
    CURL *h = curl_easy_init();
    buf out;
    buf_init(&out, 1 << 20);
    struct curl_slist *hdr = curl_slist_append(NULL, "Content-Type: application/json");
    const char *body = "{\"task\": {\"Name\": \"h\", \"Resreq\": {\"MilliCPU\": 100}}, \"node\": "
                       "{\"Name\": \"node-a\"}}";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 10L);
    cr_assert_eq(curl_easy_perform(h), CURLE_OK);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    cr_expect_eq(code, 200);
    cr_expect_str_eq(out.data, "{\"status\":\"\",\"code\":0}");
    /* wrong method */
    buf_reset(&out);
    curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    cr_assert_eq(curl_easy_perform(h), CURLE_OK);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    cr_expect_eq(code, 405);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    buf_free(&out);
    svc_http_stop(s);
    svc_free(s);
}

/* Volcano's tasks live in Volcano's shard, which Volcano enforces itself:
 * agentsched's own --shard-mode must not reject or down-score them. */
Test(volcano, shard_neutral)
{
    svc *s = new_svc();
    cache_set_shard_mode(s->core->cache, CACHE_SHARD_HARD); /* no node in our shard */
    reply r = call(s, volcano_handle_predicate,
                   "{\"task\": {\"Name\": \"sh\", \"Resreq\": {\"MilliCPU\": 100}}, \"node\": "
                   "{\"Name\": \"node-a\"}}");
    cr_expect_eq(json_integer_value(json_object_get(r.json, "code")), 0, "%s", r.raw);
    reply_free(&r);
    r = call(s, volcano_handle_prioritize,
             "{\"task\": {\"Name\": \"sh\", \"Resreq\": {\"MilliCPU\": 100}}, \"nodes\": "
             "[{\"Name\": \"node-a\"}]}");
    cr_expect_gt(json_number_value(json_object_get(json_object_get(r.json, "nodeScore"), "node-a")),
                 0, "%s", r.raw);
    reply_free(&r);
    char *a = event_body("sh", "100m", "node-a", 2);
    r = call(s, volcano_handle_allocate, a);
    expect_errmsg(&r, "");
    free(a);
    svc_free(s);
}

/* ---- authorization ---------------------------------------------------- */

static int64_t node_cpu(svc *s, const char *node)
{
    cache_read_lock(s->core->cache);
    const cache_node *n = cache_node_find(s->core->cache, node, strlen(node));
    int64_t v = n ? cache_node_requested(n, MODEL_RES_CPU) : -1;
    cache_read_unlock(s->core->cache);
    return v;
}

static void expect_refused(reply *r, const char *says)
{
    cr_expect_eq(r->status, 403, "%s", r->raw);
    const char *m = json_string_value(json_object_get(r->json, "errorMessage"));
    cr_expect(m && strstr(m, says), "want '%s' in %s", says, r->raw);
    cr_expect_str_eq(json_string_value(json_object_get(r->json, "field")), "task", "%s", r->raw);
    reply_free(r);
}

static uint64_t vrefused(svc *s, const char *verb, const char *rule)
{
    buf m;
    buf_init(&m, 1 << 20);
    cr_assert_eq(metrics_render(s->core->metrics, &m), AS_OK);
    char want[200];
    snprintf(want, sizeof want, "agentsched_volcano_refused_total{verb=\"%s\",rule=\"%s\"} ", verb,
             rule);
    const char *p = strstr(m.data, want);
    uint64_t v = p ? strtoull(p + strlen(want), NULL, 10) : 0;
    buf_free(&m);
    return v;
}

Test(volcano, allocate_refuses_unknown_and_foreign_pods)
{
    svc *s = new_svc();
    /* no such pod in the cluster */
    char *a = event_body("ghost", "1", "node-a", 2);
    reply r = call(s, volcano_handle_allocate, a);
    expect_refused(&r, "the cluster file has no such pod");
    free(a);
    cr_expect_eq(vrefused(s, "allocateFunc", "unknown_pod"), 1);
    /* a pod of another scheduler: the request's own schedulerName (volcano
     * in event_body) is not believed */
    a = event_body("other", "1", "node-a", 2);
    r = call(s, volcano_handle_allocate, a);
    expect_refused(&r, "its schedulerName is not one of Volcano's");
    free(a);
    cr_expect_eq(vrefused(s, "allocateFunc", "scheduler_name"), 1);
    cr_expect_eq(node_cpu(s, "node-a"), 0, "nothing assumed");
    svc_free(s);
}

Test(volcano, deallocate_only_drops_its_own_allocations)
{
    svc *s = new_svc();
    /* the extender (kube-scheduler's path) assumes pod agent on node-a */
    reply r = call(s, extender_handle_filter,
                   "{\"Pod\": {\"metadata\": {\"name\": \"agent\", \"namespace\": \"default\", "
                   "\"uid\": \"uid-agent\"}, \"spec\": {\"schedulerName\": \"agent-scheduler\", "
                   "\"containers\": [{\"name\": \"c\", \"resources\": {\"requests\": {\"cpu\": "
                   "\"1\"}}}]}}, \"NodeNames\": [\"node-a\"]}");
    cr_assert_eq(r.status, 200, "%s", r.raw);
    reply_free(&r);
    r = call(s, extender_handle_bind,
             "{\"PodName\": \"agent\", \"PodNamespace\": \"default\", \"PodUID\": \"uid-agent\", "
             "\"Node\": \"node-a\"}");
    cr_assert_eq(r.status, 200, "%s", r.raw);
    reply_free(&r);
    cr_assert_eq(node_cpu(s, "node-a"), 1000);
    /* deallocateFunc for it is refused: the capacity stays held */
    char *a = event_body("agent", "1", "node-a", 2);
    r = call(s, volcano_handle_deallocate, a);
    expect_refused(&r, "agent");
    free(a);
    cr_expect_eq(node_cpu(s, "node-a"), 1000);
    cache_pod_info info;
    cache_pod_lookup(s->core->cache, "uid-agent", &info);
    cr_expect_eq(info.state, CACHE_POD_ASSUMED);
    /* a Volcano pod assumed by someone else than allocateFunc: not_allocated */
    model_pod *p = NULL;
    as_diag d = {{0}, {0}};
    json_t *pj =
        json_pack("{s:{s:s,s:s,s:s},s:{s:s,s:[{s:s,s:{s:{s:s}}}]}}", "metadata", "name", "vt3",
                  "namespace", "default", "uid", "uid-vt3", "spec", "schedulerName", "volcano",
                  "containers", "name", "c", "resources", "requests", "cpu", "1");
    cr_assert_eq(model_pod_from_json(&s->core->reg, pj, &p, &d), AS_OK, "%s", d.msg);
    json_decref(pj);
    cache_read_lock(s->core->cache);
    const cache_node *cn = cache_node_find(s->core->cache, "node-b", 6);
    sched_candidate cand = {.slot = cn->slot, .node_id = cn->id, .name = "node-b"};
    cache_read_unlock(s->core->cache);
    binder_outcome out;
    cr_assert_eq(binder_commit(s->core->binder, p, &cand, 1, &out), AS_OK);
    a = event_body("vt3", "1", "node-b", 2);
    r = call(s, volcano_handle_deallocate, a);
    expect_refused(&r, "did not assume it through allocateFunc");
    cr_expect_eq(vrefused(s, "deallocateFunc", "not_allocated"), 1);
    cr_expect_eq(node_cpu(s, "node-b"), 1000);
    free(a);
    model_pod_free(p);
    /* allocate then deallocate through the verbs: ok, capacity back */
    a = event_body("vt1", "1", "tiny", 2);
    r = call(s, volcano_handle_allocate, a);
    expect_errmsg(&r, "");
    cr_expect_eq(node_cpu(s, "tiny"), 1000);
    r = call(s, volcano_handle_deallocate, a);
    expect_errmsg(&r, "");
    cr_expect_eq(node_cpu(s, "tiny"), 0);
    /* and again: nothing of ours left, nothing assumed: a no-op */
    r = call(s, volcano_handle_deallocate, a);
    expect_errmsg(&r, "");
    free(a);
    svc_free(s);
}

Test(volcano, embedded_allocations_expire)
{
    svc_config cfg;
    svc_config_defaults(&cfg);
    cfg.volcano_assumed_ttl_ms = 50;
    log_set_level(LOG_ERROR);
    svc *s = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(svc_new(&cfg, &s, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(svc_load_cluster(s, DATA "/cluster.yaml", &d), AS_OK, "%s", d.msg);
    char *a = event_body("vt1", "1", "tiny", 2);
    reply r = call(s, volcano_handle_allocate, a);
    expect_errmsg(&r, "");
    cr_expect_eq(node_cpu(s, "tiny"), 1000);
    /* Volcano never binds it: past the TTL the next Volcano request
     * forgets it */
    usleep(120 * 1000);
    r = call(s, volcano_handle_predicate,
             "{\"task\": {\"Name\": \"vt2\", \"Namespace\": \"default\", \"Resreq\": "
             "{\"MilliCPU\": 500, \"Memory\": 0}}, \"node\": {\"Name\": \"tiny\"}}");
    cr_expect_eq(json_integer_value(json_object_get(r.json, "code")), 0, "%s", r.raw);
    reply_free(&r);
    cr_expect_eq(volcano_expire(s->vol, clock_mono_ms()), 0, "already expired by the request");
    cr_expect_eq(node_cpu(s, "tiny"), 0);
    /* a fresh allocation is held until its own TTL */
    r = call(s, volcano_handle_allocate, a);
    expect_errmsg(&r, "");
    cr_expect_eq(volcano_expire(s->vol, clock_mono_ms()), 0);
    cr_expect_eq(node_cpu(s, "tiny"), 1000);
    cr_expect_eq(volcano_expire(s->vol, clock_mono_ms() + 1000), 1);
    cr_expect_eq(node_cpu(s, "tiny"), 0);
    free(a);
    as_diag inv = {{0}, {0}};
    cr_expect_eq(cache_check_invariants(s->core->cache, &inv), AS_OK, "%s", inv.msg);
    svc_free(s);
}

static uint64_t vanswers(svc *s, const char *verb, const char *result)
{
    buf m;
    buf_init(&m, 1 << 20);
    cr_assert_eq(metrics_render(s->core->metrics, &m), AS_OK);
    char want[200];
    snprintf(want, sizeof want, "agentsched_volcano_answers_total{verb=\"%s\",result=\"%s\"} ",
             verb, result);
    const char *p = strstr(m.data, want);
    cr_assert(p, "no series %s", want);
    uint64_t v = strtoull(p + strlen(want), NULL, 10);
    buf_free(&m);
    return v;
}

static uint64_t vbytes(svc *s, const char *verb)
{
    buf m;
    buf_init(&m, 1 << 20);
    cr_assert_eq(metrics_render(s->core->metrics, &m), AS_OK);
    char want[200];
    snprintf(want, sizeof want, "agentsched_volcano_request_bytes_total{verb=\"%s\"} ", verb);
    const char *p = strstr(m.data, want);
    cr_assert(p, "no series %s", want);
    uint64_t v = strtoull(p + strlen(want), NULL, 10);
    buf_free(&m);
    return v;
}

Test(volcano, request_bytes_counted_by_verb)
{
    svc *s = new_svc();
    const char *pred = "{\"task\": {\"Name\": \"vt2\", \"Namespace\": \"default\", \"Resreq\": "
                       "{\"MilliCPU\": 500, \"Memory\": 0}}, \"node\": {\"Name\": \"tiny\"}}";
    reply r = call(s, volcano_handle_predicate, pred);
    reply_free(&r);
    r = call(s, volcano_handle_predicate, "{}"); /* a 400 counts too */
    reply_free(&r);
    r = call(s, volcano_handle_job_ready, "{\"job\": {}}");
    reply_free(&r);
    cr_expect_eq(vbytes(s, "predicate"), strlen(pred) + 2);
    cr_expect_eq(vbytes(s, "jobReady"), strlen("{\"job\": {}}"));
    cr_expect_eq(vbytes(s, "prioritize"), 0);
    svc_free(s);
}

Test(volcano, answers_counted_by_verdict)
{
    svc *s = new_svc();
    const char *pred = "{\"task\": {\"Name\": \"vt2\", \"Namespace\": \"default\", \"Resreq\": "
                       "{\"MilliCPU\": 500, \"Memory\": 0}}, \"node\": {\"Name\": \"tiny\"}}";
    reply r = call(s, volcano_handle_predicate, pred);
    reply_free(&r);
    char *alloc = event_body("vt1", "1", "tiny", 2);
    r = call(s, volcano_handle_allocate, alloc);
    expect_errmsg(&r, "");
    r = call(s, volcano_handle_predicate, pred); /* tiny is full now */
    reply_free(&r);
    char *alloc2 = event_body("vt3", "500m", "tiny", 2);
    r = call(s, volcano_handle_allocate, alloc2);
    expect_errmsg(&r,
                  "agentsched refused to allocate pod default/vt3 to node tiny: Insufficient cpu");
    r = call(s, volcano_handle_deallocate, alloc);
    expect_errmsg(&r, "");
    r = call(s, volcano_handle_deallocate, alloc); /* already done */
    expect_errmsg(&r, "");
    cr_expect_eq(vanswers(s, "predicate", "fit"), 1);
    cr_expect_eq(vanswers(s, "predicate", "unschedulable"), 1);
    cr_expect_eq(vanswers(s, "predicate", "unresolvable"), 0);
    cr_expect_eq(vanswers(s, "allocateFunc", "assumed"), 1);
    cr_expect_eq(vanswers(s, "allocateFunc", "refused"), 1);
    cr_expect_eq(vanswers(s, "deallocateFunc", "forgotten"), 1);
    cr_expect_eq(vanswers(s, "deallocateFunc", "noop"), 1);
    free(alloc);
    free(alloc2);
    svc_free(s);
}

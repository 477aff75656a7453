/*
 * replay.c - trace replay engine and the `agentsched replay` command.
 *
 * Each run builds its own registry, cache, binder and
 * policy, decodes nodes and pods with the model decoders (so the GPU
 * accounting is the service's), and schedules every pod through
 * sched_evaluate + binder_commit.
 */
#include "agentsched/cmd/replay.h"

#include <assert.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agentsched/core/binder.h"
#include "agentsched/base/buf.h"
#include "agentsched/core/cache.h"
#include "agentsched/base/clock.h"
#include "agentsched/base/cli.h"
#include "agentsched/base/doc.h"
#include "agentsched/model/node.h"
#include "agentsched/model/pod.h"
#include "agentsched/model/registry.h"
#include "agentsched/base/pool.h"
#include "agentsched/core/sched.h"
#include "agentsched/core/policy.h"
#include "agentsched/core/score.h"

#define MIB               (1024LL * 1024)
#define MAX_SUBMISSIONS   20000000ULL
#define REPLAY_MAX_POLICY 16
#define CURVE_STEP        0.005 /* record the curve every 0.5% of the x axis */

/* ------------------------------------------------------------------ */
/* Building the cluster                                                */
/* ------------------------------------------------------------------ */

static json_t *qty(const char *fmt, long long v)
{
    char s[64];
    snprintf(s, sizeof s, fmt, v);
    return json_string(s);
}

static as_err build_node(model_registry *reg, const trace_node *n, model_node **out, as_diag *diag)
{
    json_t *alloc = json_object();
    json_t *labels = json_object();
    json_t *obj = NULL;
    as_err err = AS_ENOMEM;
    if (!alloc || !labels)
        goto done;
    json_object_set_new(alloc, "cpu", qty("%lldm", (long long)n->cpu));
    json_object_set_new(alloc, "memory", qty("%lldMi", (long long)n->mem_mib));
    json_object_set_new(alloc, "pods", qty("%lld", 1000000));
    if (n->gpus)
        json_object_set_new(alloc, reg->gpu_name, qty("%lld", (long long)n->gpus));
    if (n->model)
        json_object_set_new(labels, reg->gpu_model_label, json_string(n->model));
    obj = json_pack("{s:s, s:s, s:{s:s, s:O}, s:{s:O}}", "apiVersion", "v1", "kind", "Node",
                    "metadata", "name", n->name, "labels", labels, "status", "allocatable", alloc);
    if (!obj)
        goto done;
    err = model_node_from_json(reg, obj, out, diag);
done:
    json_decref(obj);
    json_decref(alloc);
    json_decref(labels);
    return err;
}

static as_err build_pod(const model_registry *reg, const trace_pod *p, model_pod **out,
                        as_diag *diag)
{
    json_t *req = json_object();
    json_t *spec = NULL, *obj = NULL;
    as_err err = AS_ENOMEM;
    if (!req)
        goto done;
    json_object_set_new(req, "cpu", qty("%lldm", (long long)p->cpu));
    json_object_set_new(req, "memory", qty("%lldMi", (long long)p->mem_mib));
    if (p->num_gpu && p->gpu_milli >= MODEL_GPU_MILLI)
        json_object_set_new(req, reg->gpu_name, qty("%lld", (long long)p->num_gpu));
    else if (p->num_gpu)
        json_object_set_new(req, reg->gpu_share_name, qty("%lld", (long long)p->gpu_milli));
    spec = json_pack("{s:s, s:[{s:s, s:{s:O}}]}", "schedulerName", "agent-scheduler", "containers",
                     "name", "main", "resources", "requests", req);
    if (!spec)
        goto done;
    if (p->gpu_spec) {
        /* Allowed models become required node affinity on the model label. */
        json_t *vals = json_array();
        if (!vals)
            goto done;
        const char *s = p->gpu_spec;
        while (*s) {
            const char *bar = strchr(s, '|');
            size_t len = bar ? (size_t)(bar - s) : strlen(s);
            if (len)
                json_array_append_new(vals, json_stringn(s, len));
            s += len + (bar ? 1 : 0);
        }
        json_t *aff = json_pack("{s:{s:{s:[{s:[{s:s, s:s, s:o}]}]}}}", "nodeAffinity",
                                "requiredDuringSchedulingIgnoredDuringExecution",
                                "nodeSelectorTerms", "matchExpressions", "key",
                                reg->gpu_model_label, "operator", "In", "values", vals);
        if (!aff)
            goto done;
        json_object_set_new(spec, "affinity", aff);
    }
    obj =
        json_pack("{s:s, s:s, s:{s:s, s:s, s:s}, s:O}", "apiVersion", "v1", "kind", "Pod",
                  "metadata", "name", p->name, "namespace", "trace", "uid", p->name, "spec", spec);
    if (!obj)
        goto done;
    err = model_pod_from_json(reg, obj, out, diag);
done:
    json_decref(obj);
    json_decref(spec);
    json_decref(req);
    return err;
}

/* ------------------------------------------------------------------ */
/* Running                                                             */
/* ------------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static bool policy_is_file(const char *s)
{
    size_t n = strlen(s);
    return strchr(s, '/') || (n > 5 && strcmp(s + n - 5, ".yaml") == 0) ||
           (n > 4 && strcmp(s + n - 4, ".yml") == 0);
}

/* The classic baselines by their published definitions (the FGD paper's
 * simulator, kube-scheduler's NodeResourcesFit): least- and most-allocated
 * over cpu and the GPU, best-fit as the smallest mean leftover fraction of
 * cpu and GPU after placement. The `-cmg` and `-units` names are the
 * strategies as `serve` builds them without a policy file (cpu, memory and
 * GPU weighted 1; best-fit in units of a core, 4Gi and a GPU). */
static const struct {
    const char *name;
    const char *yaml;
} baselines[] = {
    {"least-allocated", "strategy: least-allocated\nresources:\n  cpu: 1\n  nvidia.com/gpu: 1\n"},
    {"most-allocated", "strategy: most-allocated\nresources:\n  cpu: 1\n  nvidia.com/gpu: 1\n"},
    {"best-fit", "strategy: best-fit\nresources:\n  cpu: 1\n  nvidia.com/gpu: 1\n"
                 "bestFit:\n  measure: fraction\n"},
    {"least-allocated-cmg", "strategy: least-allocated\n"},
    {"most-allocated-cmg", "strategy: most-allocated\n"},
    {"best-fit-units", "strategy: best-fit\n"},
};

static as_err make_policy(model_registry *reg, const char *spec, score_policy **out, as_diag *diag)
{
    if (policy_is_file(spec))
        return score_policy_load(reg, spec, out, diag);
    for (size_t i = 0; i < sizeof baselines / sizeof baselines[0]; i++)
        if (strcmp(spec, baselines[i].name) == 0)
            return score_policy_parse(reg, spec, baselines[i].yaml, strlen(baselines[i].yaml), out,
                                      diag);
    score_strategy s;
    if (score_strategy_parse(spec, &s))
        return as_diag_set(diag, AS_EINVAL, "policy",
                           "unknown policy \"%s\": use least-allocated, most-allocated, "
                           "best-fit (the published baselines), least-allocated-cmg, "
                           "most-allocated-cmg, best-fit-units, balanced-allocation, fgd, "
                           "fragment or a policy YAML file",
                           spec);
    as_err err = score_policy_new_strategy(reg, s, out);
    if (err)
        return as_diag_set(diag, err, NULL, "cannot build policy %s", spec);
    return AS_OK;
}

/* Task shapes of the whole list with their share of pods: the FGD
 * fragmentation measure's workload. Caller frees *out. */
static as_err trace_shapes(const trace *t, score_task_shape **out, size_t *n)
{
    score_task_shape *s = calloc(t->npods, sizeof *s);
    if (!s)
        return AS_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < t->npods; i++) {
        const trace_pod *p = &t->pods[i];
        score_task_shape x = {p->cpu, p->mem_mib * MIB, (uint32_t)p->num_gpu,
                              (uint32_t)p->gpu_milli, 1};
        size_t j;
        /* Shapes are few (about 150 in openb); a linear scan is fine. */
        for (j = 0; j < k; j++)
            if (s[j].cpu == x.cpu && s[j].mem == x.mem && s[j].gpu_count == x.gpu_count &&
                s[j].gpu_milli == x.gpu_milli)
                break;
        if (j == k)
            s[k++] = x;
        else
            s[j].pop += 1;
    }
    for (size_t j = 0; j < k; j++)
        s[j].pop /= (double)t->npods;
    *out = s;
    *n = k;
    return AS_OK;
}

/* See replay.h. */
void replay_result_free(replay_result *r)
{
    if (!r)
        return;
    free(r->curve);
    r->curve = NULL;
    r->ncurve = 0;
}

/* One policy's run: its registry, policy, cache and binder, the decoded
 * pods, and the scheduling time spent so far. */
typedef struct run {
    model_registry reg;
    score_policy *pol;
    cache *c;
    binder *b;
    model_pod **pods; /* one per trace pod */
    size_t *order;    /* the list's submission order: trace pod indexes */
    score_task_shape *shapes;
    size_t nshapes;
    sched_result res;
    double busy; /* seconds in decisions and commits */
    /* allocated now: GPU milli, millicores, MiB */
    int64_t galloc, calloc_, malloc_;
} run;

static as_err run_setup(run *r, const trace *t, const char *policy, as_diag *diag)
{
    as_err err;
    if ((err = make_policy(&r->reg, policy, &r->pol, diag)))
        return err;
    if ((err = score_policy_apply_gpu_names(r->pol, &r->reg)))
        return as_diag_set(diag, err, NULL, "%s: cannot apply its GPU resource names", policy);
    if ((err = cache_new(&r->reg, &r->c)) || (err = binder_new(r->c, NULL, &r->b)))
        return as_diag_set(diag, err, NULL, "cannot create the cache: %s", as_strerror(err));
    for (size_t i = 0; i < t->nnodes; i++) {
        model_node *n = NULL;
        if ((err = build_node(&r->reg, &t->nodes[i], &n, diag)))
            return err;
        if ((err = cache_node_upsert(r->c, n)))
            return as_diag_set(diag, err, NULL, "node %s: %s", t->nodes[i].name, as_strerror(err));
    }
    if (!(r->pods = calloc(t->npods, sizeof *r->pods)))
        return as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < t->npods; i++)
        if ((err = build_pod(&r->reg, &t->pods[i], &r->pods[i], diag)))
            return err;
    if ((err = trace_shapes(t, &r->shapes, &r->nshapes)))
        return as_diag_set(diag, err, NULL, "out of memory");
    return AS_OK;
}

static void run_teardown(run *r, const trace *t)
{
    sched_result_free(&r->res);
    if (r->pods)
        for (size_t i = 0; i < t->npods; i++)
            model_pod_free(r->pods[i]);
    free(r->pods);
    free(r->order);
    free(r->shapes);
    binder_free(r->b);
    cache_free(r->c);
    if (r->pol)
        score_policy_unref(r->pol);
    model_registry_destroy(&r->reg);
}

typedef struct named {
    const char *name;
    size_t idx;
} named;

static int named_cmp(const void *a, const void *b)
{
    const named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

/* The list's submission order into r->order: the trace's own, or with
 * o->shuffle the pods sorted by name and shuffled (Fisher-Yates) with a
 * stream of the seed apart from the sampling's, as the paper's experiments
 * submit them. The same for every policy. */
static as_err run_order(run *r, const trace *t, const replay_options *o, as_diag *diag)
{
    named *v = NULL;
    if (!(r->order = malloc((t->npods ? t->npods : 1) * sizeof *r->order)) ||
        (o->shuffle && !(v = malloc((t->npods ? t->npods : 1) * sizeof *v)))) {
        free(v);
        return as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; i < t->npods; i++)
        r->order[i] = i;
    if (!o->shuffle)
        return AS_OK;
    for (size_t i = 0; i < t->npods; i++)
        v[i] = (named){t->pods[i].name, i};
    qsort(v, t->npods, sizeof *v, named_cmp);
    uint64_t rng = o->seed ^ 0x2545f4914f6cdd1dull;
    for (size_t i = t->npods; i > 1; i--) {
        size_t j = (size_t)(splitmix(&rng) % i);
        named x = v[i - 1];
        v[i - 1] = v[j];
        v[j] = x;
    }
    for (size_t i = 0; i < t->npods; i++)
        r->order[i] = v[i].idx;
    free(v);
    return AS_OK;
}

/* Schedules trace pod idx as submission seq (a distinct pod) through the decision
 * core, as the service does; *ok when it was placed (then counted in the
 * allocation). */
static as_err run_place(run *r, const trace *t, size_t idx, uint64_t seq, bool *ok,
                        FILE *placements, as_diag *diag)
{
    char uid[300];
    snprintf(uid, sizeof uid, "%s#%llu", t->pods[idx].name, (unsigned long long)seq);
    model_pod *pod = r->pods[idx];
    const trace_pod *tp = &t->pods[idx];
    const char *saved_uid = pod->uid;
    pod->uid = uid;
    uint64_t t0 = clock_mono_ns();
    score_observe_pod(r->pol, pod);
    sched_request rq = {.pod = pod, .policy = r->pol, .k = 1};
    sched_result_free(&r->res);
    sched_result_init(&r->res);
    as_err err = sched_evaluate(r->c, &rq, &r->res);
    *ok = false;
    if (!err && r->res.ncand) {
        binder_outcome bo;
        as_err berr = binder_commit(r->b, pod, r->res.cand, r->res.ncand, &bo);
        *ok = berr == AS_OK && bo.chosen >= 0;
        if (berr && berr != AS_ECONFLICT)
            err = berr;
        /* the candidate's name is the node's own: nodes never leave here */
        if (*ok && placements)
            fprintf(placements, "%llu,%s,%s\n", (unsigned long long)seq, t->pods[idx].name,
                    r->res.cand[bo.chosen].name);
    }
    if (!err && !*ok && placements)
        fprintf(placements, "%llu,%s,\n", (unsigned long long)seq, t->pods[idx].name);
    r->busy += (double)(clock_mono_ns() - t0) * 1e-9;
    pod->uid = saved_uid;
    if (err)
        return as_diag_set(diag, err, NULL, "scheduling pod %s failed: %s", tp->name,
                           as_strerror(err));
    if (*ok) {
        r->galloc += tp->num_gpu * tp->gpu_milli;
        r->calloc_ += tp->cpu;
        r->malloc_ += tp->mem_mib;
    }
    return AS_OK;
}

static as_err curve_add(replay_result *out, size_t *cap, double x, double y, as_diag *diag)
{
    if (out->ncurve == *cap) {
        size_t nc = *cap ? *cap * 2 : 512;
        replay_point *np = realloc(out->curve, nc * sizeof *np);
        if (!np)
            return as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
        out->curve = np;
        *cap = nc;
    }
    out->curve[out->ncurve++] = (replay_point){x, y};
    return AS_OK;
}

static void count(replay_result *out, const trace_pod *tp, bool ok)
{
    out->submitted++;
    if (ok) {
        out->placed++;
        if (!tp->num_gpu)
            out->cpu_pods_placed++;
    } else {
        out->failed++;
        if (!tp->num_gpu)
            out->cpu_pods_failed++;
    }
}

/* Fill: pods arrive and never leave (the paper's method, replay.h). */
static as_err run_fill(run *r, const trace *t, const replay_options *o, replay_result *out,
                       as_diag *diag)
{
    /* Without GPU capacity or GPU demand the inflation target is
     * meaningless: submit the list once. */
    bool sample = !o->once && t->gpu_cap > 0 && t->gpu_demand > 0;
    double target = sample ? o->inflate * (double)t->gpu_cap : 0;
    uint64_t rng = o->seed;
    int64_t arrived = 0;
    bool at100 = false;
    double next_curve = 0;
    size_t curve_cap = 0;
    as_err err;
    for (uint64_t seq = 0;; seq++) {
        if (sample ? (double)arrived >= target || seq >= MAX_SUBMISSIONS : seq >= t->npods)
            break;
        size_t idx = seq < t->npods ? r->order[seq] : (size_t)(splitmix(&rng) % t->npods);
        const trace_pod *tp = &t->pods[idx];
        int64_t demand = tp->num_gpu * tp->gpu_milli;
        arrived += demand;
        bool ok;
        if ((err = run_place(r, t, idx, seq, &ok, o->placements, diag)))
            return err;
        count(out, tp, ok);
        if (!at100 && sample && arrived >= t->gpu_cap) {
            at100 = true;
            out->gpu_alloc_ratio_at_100 = (double)r->galloc / (double)t->gpu_cap;
            out->cpu_alloc_ratio_at_100 = (double)r->calloc_ / (double)t->cpu_cap;
            out->mem_alloc_ratio_at_100 = (double)r->malloc_ / (double)t->mem_cap;
        }
        if (o->curve && sample && demand && (double)arrived / (double)t->gpu_cap >= next_curve) {
            double x = (double)arrived / (double)t->gpu_cap;
            if ((err = curve_add(out, &curve_cap, x, (double)r->galloc / (double)t->gpu_cap, diag)))
                return err;
            next_curve = x + CURVE_STEP;
        }
    }
    if (!at100) {
        out->gpu_alloc_ratio_at_100 = t->gpu_cap > 0 ? (double)r->galloc / (double)t->gpu_cap : 0;
        out->cpu_alloc_ratio_at_100 = (double)r->calloc_ / (double)t->cpu_cap;
        out->mem_alloc_ratio_at_100 = (double)r->malloc_ / (double)t->mem_cap;
    }
    return AS_OK;
}

/* A placed pod's departure: trace pod idx submitted as number seq. */
typedef struct departure {
    double when;
    uint64_t seq;
    size_t idx;
} departure;

typedef struct dheap {
    departure *v;
    size_t n, cap;
} dheap;

static bool dheap_push(dheap *h, departure d)
{
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 1024;
        if (nc > REPLAY_MAX_ARRIVALS)
            nc = REPLAY_MAX_ARRIVALS;
        departure *nv = nc > h->n ? realloc(h->v, nc * sizeof *nv) : NULL;
        if (!nv)
            return false;
        h->v = nv;
        h->cap = nc;
    }
    size_t i = h->n++;
    while (i && h->v[(i - 1) / 2].when > d.when) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = d;
    return true;
}

static departure dheap_pop(dheap *h)
{
    assert(h->n > 0);
    departure top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->v[c + 1].when < h->v[c].when)
            c++;
        if (h->v[c].when >= last.when)
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n)
        h->v[i] = last;
    return top;
}

static double unit_draw(uint64_t *rng)
{
    /* 53 random bits in (0, 1]: never 0, so log() is finite */
    return ((double)(splitmix(rng) >> 11) + 1.0) / 9007199254740992.0;
}

/* The demand a pod adds to the load measure: GPU milli when the trace has
 * GPUs and GPU demand, else millicores. */
static int64_t load_demand(const trace *t, const trace_pod *p)
{
    return t->gpu_cap > 0 && t->gpu_demand > 0 ? p->num_gpu * p->gpu_milli : p->cpu;
}

/* What is allocated now, in the load measure's unit. */
static double level(const run *r, bool gpu)
{
    return gpu ? (double)r->galloc : (double)r->calloc_;
}

/* The part of [from, to] after win. */
static double in_window(double from, double to, double win)
{
    double a = from > win ? from : win;
    return to > a ? to - a : 0;
}

/* Churn: pods arrive as a Poisson process and leave after their lifetime
 * (replay.h); judged over the second half of the simulated time. */
static as_err run_churn(run *r, const trace *t, const replay_options *o, replay_result *out,
                        as_diag *diag)
{
    size_t narr = o->arrivals ? o->arrivals : 3 * t->npods;
    if (narr > REPLAY_MAX_ARRIVALS)
        return as_diag_set(diag, AS_EINVAL, "arrivals", "at most %d arrivals", REPLAY_MAX_ARRIVALS);
    bool gpu = t->gpu_cap > 0 && t->gpu_demand > 0;
    double cap = gpu ? (double)t->gpu_cap : (double)t->cpu_cap;
    double *lives = calloc(t->npods, sizeof *lives), *arr = calloc(narr, sizeof *arr);
    dheap h = {0};
    as_err err = AS_OK;
    if (!lives || !arr) {
        err = as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    /* The trace's own lifetimes; pods without one draw from them (or,
     * when no pod has one, from an exponential of mean 1). */
    size_t nlives = 0;
    double life_sum = 0;
    for (size_t i = 0; i < t->npods; i++)
        if (t->pods[i].deleted > t->pods[i].created) {
            lives[nlives] = (double)(t->pods[i].deleted - t->pods[i].created);
            life_sum += lives[nlives++];
        }
    double mean_life = nlives ? life_sum / (double)nlives : 1.0;
    /* The arrival rate makes the load offered in the middle of the judged
     * window (the second half of the time) inflate x capacity: rate x the
     * mean over the list of demand x lifetime, lifetimes cut at three
     * quarters of the span (older arrivals have left or are still there,
     * so a longer life adds nothing then). The span is arrivals / rate:
     * solve for the rate by bisection. */
    double target = o->inflate * cap, lo = 1e-12, hi = 1e12, lambda = 1;
    for (int it = 0; it < 200; it++) {
        lambda = sqrt(lo * hi);
        double mid = 0.75 * (double)narr / lambda, work = 0;
        for (size_t i = 0; i < t->npods; i++) {
            const trace_pod *p = &t->pods[i];
            double l = p->deleted > p->created ? (double)(p->deleted - p->created) : mean_life;
            work += (double)load_demand(t, p) * (l < mid ? l : mid);
        }
        double offered = lambda * work / (double)t->npods;
        if (!(offered > 0)) {
            err = as_diag_set(diag, AS_EINVAL, "pods", "churn needs pods with GPU or CPU demand");
            goto done;
        }
        if (offered < target)
            lo = lambda;
        else
            hi = lambda;
        if (hi / lo < 1.000001)
            break;
    }
    uint64_t rng_arr = o->seed ^ 0xA5A5A5A5DEADBEEFull, rng_pick = o->seed,
             rng_life = o->seed ^ 0x5bd1e9955bd1e995ull;
    double now = 0;
    for (size_t k = 0; k < narr; k++) {
        now += -log(unit_draw(&rng_arr)) / lambda;
        arr[k] = now;
    }
    double t_end = arr[narr - 1], win = t_end / 2, last = 0, area = 0;
    double arrived_win = 0, refused_win = 0, next_curve = 0;
    size_t curve_cap = 0;
    char uid[300];
    for (size_t seq = 0; seq < narr; seq++) {
        double ta = arr[seq];
        /* departures first, each a pod deletion as the service sees it */
        while (h.n && h.v[0].when <= ta) {
            departure d = dheap_pop(&h);
            const trace_pod *tp = &t->pods[d.idx];
            area += level(r, gpu) * in_window(last, d.when, win);
            last = d.when;
            snprintf(uid, sizeof uid, "%s#%llu", tp->name, (unsigned long long)d.seq);
            if ((err = cache_pod_delete(r->c, uid))) {
                as_diag_set(diag, err, NULL, "pod %s could not leave: %s", uid, as_strerror(err));
                goto done;
            }
            r->galloc -= tp->num_gpu * tp->gpu_milli;
            r->calloc_ -= tp->cpu;
            r->malloc_ -= tp->mem_mib;
        }
        area += level(r, gpu) * in_window(last, ta, win);
        last = ta;
        size_t idx = seq < t->npods ? r->order[seq] : (size_t)(splitmix(&rng_pick) % t->npods);
        const trace_pod *tp = &t->pods[idx];
        double life = tp->deleted > tp->created ? (double)(tp->deleted - tp->created)
                      : nlives                  ? lives[splitmix(&rng_life) % nlives]
                                                : -log(unit_draw(&rng_life));
        bool ok;
        if ((err = run_place(r, t, idx, seq, &ok, o->placements, diag)))
            goto done;
        count(out, tp, ok);
        if (ta > win) {
            arrived_win += (double)load_demand(t, tp);
            if (!ok)
                refused_win += (double)load_demand(t, tp);
        }
        if (ok && !dheap_push(&h, (departure){ta + life, seq, idx})) {
            err = as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
            goto done;
        }
        if (o->curve && ta / t_end >= next_curve) {
            if ((err = curve_add(out, &curve_cap, ta / t_end, level(r, gpu) / cap, diag)))
                goto done;
            next_curve = ta / t_end + CURVE_STEP;
        }
    }
    out->churn_alloc_mean = win > 0 ? area / ((t_end - win) * cap) : 0;
    out->churn_refused = arrived_win > 0 ? refused_win / arrived_win : 0;
    out->churn_live_end = h.n;
done:
    free(h.v);
    free(lives);
    free(arr);
    return err;
}

/* See replay.h. */
as_err replay_run(const trace *t, const char *policy, const replay_options *o, replay_result *out,
                  as_diag *diag)
{
    replay_options def = {.inflate = 1.3, .seed = 42};
    if (!o)
        o = &def;
    memset(out, 0, sizeof *out);
    snprintf(out->policy, sizeof out->policy, "%s", policy);
    if (!(o->inflate > 0) || o->inflate > 100)
        return as_diag_set(diag, AS_EINVAL, "inflate", "inflate must be in (0, 100]");
    run r;
    memset(&r, 0, sizeof r);
    model_registry_init(&r.reg);
    sched_result_init(&r.res);
    as_err err;
    if ((err = run_setup(&r, t, policy, diag)) || (err = run_order(&r, t, o, diag)) ||
        (err = o->churn ? run_churn(&r, t, o, out, diag) : run_fill(&r, t, o, out, diag)))
        goto done;
    double gcap = t->gpu_cap > 0 ? (double)t->gpu_cap : 1;
    out->gpu_alloc_ratio_end = t->gpu_cap > 0 ? (double)r.galloc / gcap : 0;
    out->cpu_alloc_ratio_end = (double)r.calloc_ / (double)t->cpu_cap;
    out->mem_alloc_ratio_end = (double)r.malloc_ / (double)t->mem_cap;
    out->unallocated_gpus_end = (double)(t->gpu_cap - r.galloc) / MODEL_GPU_MILLI;
    double frag = 0;
    cache_read_lock(r.c);
    for (size_t i = 0; i < cache_node_count(r.c); i++)
        frag += score_fgd_fragment(cache_node_at(r.c, i), r.shapes, r.nshapes);
    cache_read_unlock(r.c);
    out->fragmentation_end = frag / MODEL_GPU_MILLI;
    out->seconds = r.busy;
    out->decisions_per_sec = r.busy > 0 ? (double)out->submitted / r.busy : 0;
done:
    run_teardown(&r, t);
    if (err)
        replay_result_free(out);
    return err;
}

/* ------------------------------------------------------------------ */
/* CLI                                                                 */
/* ------------------------------------------------------------------ */

enum {
    REPLAY_NODES,
    REPLAY_PODS,
    REPLAY_POLICY,
    REPLAY_INFLATE,
    REPLAY_SEED,
    REPLAY_FORMAT,
    REPLAY_PLOT,
    REPLAY_CHURN,
    REPLAY_ARRIVALS,
    REPLAY_ONCE,
    REPLAY_ORDER,
    REPLAY_PLACEMENTS,
    REPLAY_HELP,
};

static const cli_flag replay_flags[] = {
    {REPLAY_NODES, "--nodes", 0, "FILE", "node list: sn,cpu_milli,memory_mib,gpu,model"},
    {REPLAY_PODS, "--pods", 0, "FILE",
     "pod list: name,cpu_milli,memory_mib,num_gpu,gpu_milli[,...]"},
    {REPLAY_POLICY, "--policy", 0, "LIST",
     "comma-separated policies or policy files (default fragment):\n"
     "least-allocated, most-allocated, best-fit (published baselines over\n"
     "cpu and GPU), least-allocated-cmg, most-allocated-cmg, best-fit-units\n"
     "(the strategies' built-in weights), balanced-allocation, fgd, fragment"},
    {REPLAY_INFLATE, "--inflate", 0, "X",
     "arrived GPU demand to reach, x capacity, 1..100 (default 1.3);\n"
     "with --churn the offered load, x capacity"},
    {REPLAY_SEED, "--seed", 0, "S", "sampling seed (default 42)"},
    {REPLAY_FORMAT, "--format", 0, "F", "table (default), json or csv"},
    {REPLAY_PLOT, "--plot", 0, "FILE.png",
     "draw GPU allocation against arrived demand, or against\n"
     "time with --churn (needs gnuplot)"},
    {REPLAY_CHURN, "--churn", 0, NULL,
     "pods also leave: Poisson arrivals at an offered load of\n"
     "inflate x capacity, each placed pod deleted after its trace\n"
     "lifetime; judged over the second half of the time"},
    {REPLAY_ARRIVALS, "--arrivals", 0, "N", "with --churn: pods submitted (default 3 x the list)"},
    {REPLAY_ONCE, "--once", 0, NULL, "submit the list once (no sampling)"},
    {REPLAY_ORDER, "--order", 0, "O",
     "the list's submission order: trace (creation time, then\n"
     "name; file order without it; the default) or shuffle (by\n"
     "name, shuffled with the seed: the FGD paper's experiments)"},
    {REPLAY_PLACEMENTS, "--placements", 0, "FILE",
     "with one policy: write submission,pod,node per pod (node\n"
     "empty when refused) to FILE (- for standard output)"},
    {REPLAY_HELP, "--help", 'h', NULL, "show this help"},
};

static const cli_spec replay_cli = {
    .command = "replay",
    .synopsis = "Usage: agentsched replay --nodes NODES.csv --pods PODS.csv [--policy a,b,c]\n"
                "                         [--inflate 1.3] [--seed S] [--format table|json|csv]\n"
                "                         [--plot FILE.png] [--churn [--arrivals N] | --once]\n"
                "                         [--order trace|shuffle] [--placements FILE]\n\n"
                "Replays an openb GPU trace (Alibaba cluster-trace-gpu-v2023) through the\n"
                "scheduling core with each policy and compares placement quality. Pods arrive\n"
                "in trace order (or shuffled) and are never deleted; then pods are sampled\n"
                "from the list (with the seed) until the arrived GPU demand reaches inflate x\n"
                "capacity. With --churn the same pods arrive over time and leave after their\n"
                "lifetimes (docs/scoring.md, \"Churn\").\n\n",
    .flags = replay_flags,
    .nflags = sizeof replay_flags / sizeof replay_flags[0],
    /* Scripts may abbreviate long names (--inf): getopt_long, which parsed
     * this command line before, allowed it. */
    .abbrev = true,
};

static void print_churn_table(FILE *f, const trace *t, const replay_options *o,
                              const replay_result *r, size_t n)
{
    fprintf(f,
            "trace: %zu nodes, %zu pods, %.0f GPUs; churn: offered load %.2f x capacity, "
            "%llu arrivals%s, seed %llu; over the second half of the time:\n",
            t->nnodes, t->npods, (double)t->gpu_cap / MODEL_GPU_MILLI, o->inflate,
            (unsigned long long)r[0].submitted, o->shuffle ? " (the list shuffled)" : "",
            (unsigned long long)o->seed);
    fprintf(f, "%-20s %7s %7s %9s %9s %9s %9s %11s\n", "policy", "placed", "failed", "alloc",
            "refused", "live_end", "frag_end", "decisions/s");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%-20s %7llu %7llu %9.4f %9.4f %9zu %9.1f %11.0f\n", r[i].policy,
                (unsigned long long)r[i].placed, (unsigned long long)r[i].failed,
                r[i].churn_alloc_mean, r[i].churn_refused, r[i].churn_live_end,
                r[i].fragmentation_end, r[i].decisions_per_sec);
}

static void print_table(FILE *f, const trace *t, const replay_options *o, const replay_result *r,
                        size_t n)
{
    if (o->churn) {
        print_churn_table(f, t, o, r, n);
        return;
    }
    const char *order = o->shuffle ? "shuffled" : "in trace order";
    if (o->once)
        fprintf(f, "trace: %zu nodes, %zu pods, %.0f GPUs; the list once, %s\n", t->nnodes,
                t->npods, (double)t->gpu_cap / MODEL_GPU_MILLI, order);
    else
        fprintf(f, "trace: %zu nodes, %zu pods, %.0f GPUs; the list %s, inflate %.2f, seed %llu\n",
                t->nnodes, t->npods, (double)t->gpu_cap / MODEL_GPU_MILLI, order, o->inflate,
                (unsigned long long)o->seed);
    fprintf(f, "%-20s %7s %7s %8s %8s %8s %8s %8s %9s %9s %11s\n", "policy", "placed", "failed",
            "cpu-pods", "gpu@100", "gpu_end", "cpu_end", "mem_end", "unalloc", "frag",
            "decisions/s");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%-20s %7llu %7llu %8llu %8.4f %8.4f %8.4f %8.4f %9.1f %9.1f %11.0f\n",
                r[i].policy, (unsigned long long)r[i].placed, (unsigned long long)r[i].failed,
                (unsigned long long)r[i].cpu_pods_placed, r[i].gpu_alloc_ratio_at_100,
                r[i].gpu_alloc_ratio_end, r[i].cpu_alloc_ratio_end, r[i].mem_alloc_ratio_end,
                r[i].unallocated_gpus_end, r[i].fragmentation_end, r[i].decisions_per_sec);
}

static as_err render_json(buf *b, const replay_result *r, size_t n, bool churn)
{
    buf_puts(b, "{\"policies\": [");
    for (size_t i = 0; i < n; i++) {
        buf_puts(b, i ? ", {\"policy\": " : "{\"policy\": ");
        buf_json_cstr(b, r[i].policy);
        buf_printf(b, ", \"placed\": %llu, \"failed\": %llu, \"gpu_alloc_ratio_at_100\": ",
                   (unsigned long long)r[i].placed, (unsigned long long)r[i].failed);
        /* pods that leave never add up to 100% arrived: no such point */
        if (churn)
            buf_puts(b, "null");
        else
            buf_printf(b, "%.6f", r[i].gpu_alloc_ratio_at_100);
        buf_printf(b,
                   ", \"gpu_alloc_ratio_end\": %.6f, \"cpu_alloc_ratio_end\": %.6f, "
                   "\"mem_alloc_ratio_end\": %.6f, \"unallocated_gpus_end\": %.3f, "
                   "\"fragmentation_end\": %.3f, \"decisions_per_sec\": %.1f",
                   r[i].gpu_alloc_ratio_end, r[i].cpu_alloc_ratio_end, r[i].mem_alloc_ratio_end,
                   r[i].unallocated_gpus_end, r[i].fragmentation_end, r[i].decisions_per_sec);
        if (churn)
            buf_printf(b, ", \"churn_alloc_mean\": %.6f, \"churn_refused\": %.6f",
                       r[i].churn_alloc_mean, r[i].churn_refused);
        buf_puts(b, "}");
    }
    buf_puts(b, "]}\n");
    return b->err;
}

static void print_csv(FILE *f, const replay_result *r, size_t n, bool churn)
{
    fprintf(f,
            "policy,placed,failed,gpu_alloc_ratio_at_100,gpu_alloc_ratio_end,"
            "cpu_alloc_ratio_end,mem_alloc_ratio_end,unallocated_gpus_end,"
            "fragmentation_end,decisions_per_sec%s\n",
            churn ? ",churn_alloc_mean,churn_refused" : "");
    for (size_t i = 0; i < n; i++) {
        fprintf(f, "%s,%llu,%llu,", r[i].policy, (unsigned long long)r[i].placed,
                (unsigned long long)r[i].failed);
        if (!churn) /* empty under churn, as JSON's null */
            fprintf(f, "%.6f", r[i].gpu_alloc_ratio_at_100);
        fprintf(f, ",%.6f,%.6f,%.6f,%.3f,%.3f,%.1f", r[i].gpu_alloc_ratio_end,
                r[i].cpu_alloc_ratio_end, r[i].mem_alloc_ratio_end, r[i].unallocated_gpus_end,
                r[i].fragmentation_end, r[i].decisions_per_sec);
        if (churn)
            fprintf(f, ",%.6f,%.6f", r[i].churn_alloc_mean, r[i].churn_refused);
        fputc('\n', f);
    }
}

static bool in_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (!path)
        return false;
    char dir[4096];
    while (*path) {
        size_t n = strcspn(path, ":");
        if (n && n < sizeof dir - 64) {
            snprintf(dir, sizeof dir, "%.*s/%s", (int)n, path, prog);
            if (access(dir, X_OK) == 0)
                return true;
        }
        path += n + (path[n] == ':');
    }
    return false;
}

static bool plain_path(const char *s)
{
    for (; *s; s++)
        if (*s == '\'' || *s == '\n' || *s == '\r' || *s == '"' || *s == '\\')
            return false;
    return true;
}

/* Draws every policy's curve into png with gnuplot (data in a temp file). */
static int plot(const char *png, const replay_result *r, size_t n, bool churn)
{
    if (!plain_path(png)) {
        fprintf(stderr,
                "agentsched replay: --plot %s: quotes, backslashes and newlines are "
                "not allowed in the file name\n",
                png);
        return CLI_EXIT_USAGE;
    }
    if (!in_path("gnuplot")) {
        fprintf(stderr, "agentsched replay: --plot needs gnuplot, which is not in PATH; "
                        "install it (Debian: apt-get install gnuplot-nox) or drop --plot\n");
        return CLI_EXIT_FAIL;
    }
    const char *tmp = getenv("TMPDIR");
    char data[4096];
    snprintf(data, sizeof data, "%s/agentsched-replay-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    int fd = mkstemp(data);
    if (fd < 0 || !plain_path(data)) {
        fprintf(stderr, "agentsched replay: cannot create a temporary file: %s\n", strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(data);
        }
        return CLI_EXIT_FAIL;
    }
    FILE *df = fdopen(fd, "w");
    if (!df) {
        close(fd);
        unlink(data);
        return CLI_EXIT_FAIL;
    }
    for (size_t i = 0; i < n; i++) {
        fprintf(df, "# %s\n", r[i].policy);
        for (size_t j = 0; j < r[i].ncurve; j++)
            fprintf(df, "%.5f %.5f\n", r[i].curve[j].arrived, r[i].curve[j].gpu_alloc);
        fprintf(df, "\n\n");
    }
    int rc = 0;
    if (fclose(df) != 0)
        rc = CLI_EXIT_FAIL;
    FILE *gp = rc ? NULL : popen("gnuplot", "w");
    if (!gp) {
        fprintf(stderr, "agentsched replay: cannot run gnuplot\n");
        unlink(data);
        return CLI_EXIT_FAIL;
    }
    fprintf(gp,
            "set terminal pngcairo size 960,600 font ',11'\n"
            "set output '%s'\n"
            "set title '%s'\n"
            "set xlabel '%s'\n"
            "set ylabel 'GPU allocation ratio'\n"
            "set key bottom right\nset grid\nset xrange [0:*]\nset yrange [0:1]\n"
            "plot ",
            png,
            churn ? "GPU allocation ratio over time, pods arriving and leaving"
                  : "GPU allocation ratio against arrived GPU demand",
            churn ? "time / last arrival" : "arrived GPU demand / GPU capacity");
    for (size_t i = 0; i < n; i++) {
        char title[128];
        size_t k = 0;
        for (const char *s = r[i].policy; *s && k < sizeof title - 1; s++)
            if (*s != '\'' && *s != '\n' && *s != '\\')
                title[k++] = *s;
        title[k] = '\0';
        fprintf(gp, "%s'%s' index %zu with lines lw 2 title '%s'", i ? ", " : "", data, i, title);
    }
    fprintf(gp, "\n");
    int st = pclose(gp);
    unlink(data);
    if (st != 0) {
        fprintf(stderr, "agentsched replay: gnuplot failed (status %d) writing %s\n", st, png);
        return CLI_EXIT_FAIL;
    }
    return rc;
}

/* See replay.h. */
int replay_cli_main(int argc, char **argv)
{
    const char *nodes = NULL, *pods = NULL, *policies = "fragment", *format = "table", *png = NULL,
               *placements = NULL;
    replay_options o = {.inflate = 1.3, .seed = 42};
    cli_parser p;
    cli_parser_init(&p, &replay_cli, argc, argv);
    const cli_flag *fl = NULL;
    const char *v = NULL;
    int r;
    while ((r = cli_step(&p, &fl, &v)) == CLI_FLAG) {
        char *end;
        switch (fl->id) {
        case REPLAY_NODES:
            nodes = v;
            break;
        case REPLAY_PODS:
            pods = v;
            break;
        case REPLAY_POLICY:
            policies = v;
            break;
        case REPLAY_INFLATE:
            errno = 0;
            o.inflate = strtod(v, &end);
            if (*end || errno || !(o.inflate >= 1.0) || o.inflate > 100) {
                fprintf(stderr,
                        "agentsched replay: --inflate %s: use a number from 1 to 100 "
                        "(1.3 = until 130%% of the GPU capacity has arrived)\n",
                        v);
                return CLI_EXIT_USAGE;
            }
            break;
        case REPLAY_SEED:
            errno = 0;
            o.seed = strtoull(v, &end, 10);
            if (*end || errno || *v == '-' || !*v) {
                fprintf(stderr, "agentsched replay: --seed %s: use a non-negative integer\n", v);
                return CLI_EXIT_USAGE;
            }
            break;
        case REPLAY_FORMAT:
            format = v;
            if (strcmp(format, "table") && strcmp(format, "json") && strcmp(format, "csv")) {
                fprintf(stderr, "agentsched replay: --format %s: use table, json or csv\n", v);
                return CLI_EXIT_USAGE;
            }
            break;
        case REPLAY_PLOT:
            png = v;
            o.curve = true;
            break;
        case REPLAY_CHURN:
            o.churn = true;
            break;
        case REPLAY_ARRIVALS:
            errno = 0;
            unsigned long long na = strtoull(v, &end, 10);
            if (*end || errno || *v == '-' || !*v || na < 1 || na > REPLAY_MAX_ARRIVALS) {
                fprintf(stderr, "agentsched replay: --arrivals %s: use an integer from 1 to %d\n",
                        v, REPLAY_MAX_ARRIVALS);
                return CLI_EXIT_USAGE;
            }
            o.arrivals = (size_t)na;
            break;
        case REPLAY_ONCE:
            o.once = true;
            break;
        case REPLAY_ORDER:
            if (strcmp(v, "trace") && strcmp(v, "shuffle")) {
                fprintf(stderr, "agentsched replay: --order %s: use trace or shuffle\n", v);
                return CLI_EXIT_USAGE;
            }
            o.shuffle = strcmp(v, "shuffle") == 0;
            break;
        case REPLAY_PLACEMENTS:
            placements = v;
            break;
        }
    }
    if (r != CLI_END)
        return r == CLI_HELP ? CLI_EXIT_OK : CLI_EXIT_USAGE;
    if (o.arrivals && !o.churn) {
        fprintf(stderr, "agentsched replay: --arrivals needs --churn\n");
        return CLI_EXIT_USAGE;
    }
    if (o.once && o.churn) {
        fprintf(stderr, "agentsched replay: --once and --churn exclude each other\n");
        return CLI_EXIT_USAGE;
    }
    if (!nodes || !pods) {
        fprintf(stderr, "agentsched replay: --nodes and --pods are required\n\n");
        cli_usage(stderr, &replay_cli);
        return CLI_EXIT_USAGE;
    }
    /* Split the policy list. */
    char list[4096];
    if (strlen(policies) >= sizeof list) {
        fprintf(stderr, "agentsched replay: --policy list too long\n");
        return CLI_EXIT_USAGE;
    }
    snprintf(list, sizeof list, "%s", policies);
    const char *names[REPLAY_MAX_POLICY];
    size_t n = 0;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == REPLAY_MAX_POLICY) {
            fprintf(stderr, "agentsched replay: at most %d policies\n", REPLAY_MAX_POLICY);
            return CLI_EXIT_USAGE;
        }
        names[n++] = tok;
    }
    if (!n) {
        fprintf(stderr, "agentsched replay: --policy needs at least one policy\n");
        return CLI_EXIT_USAGE;
    }
    if (placements && n != 1) {
        fprintf(stderr, "agentsched replay: --placements needs exactly one --policy\n");
        return CLI_EXIT_USAGE;
    }

    as_diag diag = {{0}, {0}};
    trace *t = NULL;
    replay_result res[REPLAY_MAX_POLICY];
    memset(res, 0, sizeof res);
    size_t done_n = 0;
    int rc = 0;
    if (trace_load(nodes, pods, &t, &diag)) {
        fprintf(stderr, "agentsched replay: %s\n", diag.msg);
        return CLI_EXIT_FAIL;
    }
    if (placements) {
        o.placements = strcmp(placements, "-") ? fopen(placements, "w") : stdout;
        if (!o.placements) {
            fprintf(stderr, "agentsched replay: --placements %s: %s\n", placements,
                    strerror(errno));
            trace_free(t);
            return CLI_EXIT_FAIL;
        }
        fprintf(o.placements, "submission,pod,node\n");
    }
    for (size_t i = 0; i < n; i++) {
        if (replay_run(t, names[i], &o, &res[i], &diag)) {
            fprintf(stderr, "agentsched replay: policy %s: %s\n", names[i], diag.msg);
            rc = CLI_EXIT_FAIL;
            goto out;
        }
        done_n++;
    }
    if (strcmp(format, "json") == 0) {
        buf b;
        buf_init(&b, 0);
        if (render_json(&b, res, n, o.churn) == AS_OK)
            fputs(b.data, stdout);
        else
            rc = CLI_EXIT_FAIL;
        buf_free(&b);
    } else if (strcmp(format, "csv") == 0) {
        print_csv(stdout, res, n, o.churn);
    } else {
        print_table(stdout, t, &o, res, n);
    }
    if (png && !rc) {
        rc = plot(png, res, n, o.churn);
        if (!rc && strcmp(format, "table") == 0)
            printf("plot: %s\n", png);
    }
out:
    if (o.placements && o.placements != stdout && fclose(o.placements) != 0) {
        fprintf(stderr, "agentsched replay: --placements %s: %s\n", placements, strerror(errno));
        rc = CLI_EXIT_FAIL;
    }
    for (size_t i = 0; i < done_n; i++)
        replay_result_free(&res[i]);
    trace_free(t);
    return rc;
}

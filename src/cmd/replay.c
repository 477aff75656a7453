/*
 * replay.c - trace replay engine and the `agentsched replay` command.
 *
 * Each run builds its own registry, cache, binder and
 * policy, decodes nodes and pods with the model decoders (so the GPU
 * accounting is the service's), and schedules every pod through
 * sched_evaluate + binder_commit.
 */
#include "agentsched/cmd/replay.h"

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
#define CURVE_STEP        0.005 /* record the curve every 0.5% of arrived demand */

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

/* See replay.h. */
as_err replay_run(const trace *t, const char *policy, const replay_options *o, replay_result *out,
                  as_diag *diag)
{
    replay_options def = {1.3, 42, false};
    if (!o)
        o = &def;
    memset(out, 0, sizeof *out);
    snprintf(out->policy, sizeof out->policy, "%s", policy);
    if (!(o->inflate > 0) || o->inflate > 100)
        return as_diag_set(diag, AS_EINVAL, "inflate", "inflate must be in (0, 100]");

    model_registry reg;
    model_registry_init(&reg);
    score_policy *pol = NULL;
    cache *c = NULL;
    binder *b = NULL;
    model_pod **pods = NULL;
    score_task_shape *shapes = NULL;
    size_t nshapes = 0, curve_cap = 0;
    as_err err;
    sched_result res;
    sched_result_init(&res);

    if ((err = make_policy(&reg, policy, &pol, diag)))
        goto done;
    if ((err = score_policy_apply_gpu_names(pol, &reg))) {
        as_diag_set(diag, err, NULL, "%s: cannot apply its GPU resource names", policy);
        goto done;
    }
    if ((err = cache_new(&reg, &c)) || (err = binder_new(c, NULL, &b))) {
        as_diag_set(diag, err, NULL, "cannot create the cache: %s", as_strerror(err));
        goto done;
    }
    for (size_t i = 0; i < t->nnodes; i++) {
        model_node *n = NULL;
        if ((err = build_node(&reg, &t->nodes[i], &n, diag)))
            goto done;
        if ((err = cache_node_upsert(c, n))) {
            as_diag_set(diag, err, NULL, "node %s: %s", t->nodes[i].name, as_strerror(err));
            goto done;
        }
    }
    if (!(pods = calloc(t->npods, sizeof *pods))) {
        err = as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < t->npods; i++)
        if ((err = build_pod(&reg, &t->pods[i], &pods[i], diag)))
            goto done;
    if ((err = trace_shapes(t, &shapes, &nshapes))) {
        as_diag_set(diag, err, NULL, "out of memory");
        goto done;
    }

    /* Without GPU capacity or GPU demand the inflation target is
     * meaningless: submit the list once. */
    bool sample = t->gpu_cap > 0 && t->gpu_demand > 0;
    double target = sample ? o->inflate * (double)t->gpu_cap : 0;
    uint64_t rng = o->seed;
    int64_t arrived = 0, galloc = 0, calloc_ = 0, malloc_ = 0;
    bool at100 = false;
    double next_curve = 0, busy = 0;
    char uid[300];
    for (uint64_t seq = 0;; seq++) {
        if (sample ? (double)arrived >= target || seq >= MAX_SUBMISSIONS : seq >= t->npods)
            break;
        size_t idx = seq < t->npods ? (size_t)seq : (size_t)(splitmix(&rng) % t->npods);
        model_pod *pod = pods[idx];
        const trace_pod *rp = &t->pods[idx];
        snprintf(uid, sizeof uid, "%s#%llu", rp->name, (unsigned long long)seq);
        const char *saved_uid = pod->uid;
        pod->uid = uid; /* every submission is a distinct pod */
        int64_t demand = rp->num_gpu * rp->gpu_milli;
        arrived += demand;
        out->submitted++;

        uint64_t t0 = clock_mono_ns();
        score_observe_pod(pol, pod);
        sched_request rq = {.pod = pod, .policy = pol, .k = 1};
        sched_result_free(&res);
        sched_result_init(&res);
        err = sched_evaluate(c, &rq, &res);
        bool ok = false;
        if (!err && res.ncand) {
            binder_outcome bo;
            as_err berr = binder_commit(b, pod, res.cand, res.ncand, &bo);
            ok = berr == AS_OK && bo.chosen >= 0;
            if (berr && berr != AS_ECONFLICT)
                err = berr;
        }
        busy += (double)(clock_mono_ns() - t0) * 1e-9;
        pod->uid = saved_uid;
        if (err) {
            as_diag_set(diag, err, NULL, "scheduling pod %s failed: %s", rp->name,
                        as_strerror(err));
            goto done;
        }
        if (ok) {
            out->placed++;
            galloc += demand;
            calloc_ += rp->cpu;
            malloc_ += rp->mem_mib;
            if (!rp->num_gpu)
                out->cpu_pods_placed++;
        } else {
            out->failed++;
            if (!rp->num_gpu)
                out->cpu_pods_failed++;
        }
        if (!at100 && sample && arrived >= t->gpu_cap) {
            at100 = true;
            out->gpu_alloc_ratio_at_100 = (double)galloc / (double)t->gpu_cap;
            out->cpu_alloc_ratio_at_100 = (double)calloc_ / (double)t->cpu_cap;
            out->mem_alloc_ratio_at_100 = (double)malloc_ / (double)t->mem_cap;
        }
        if (o->curve && sample && demand && (double)arrived / (double)t->gpu_cap >= next_curve) {
            if (out->ncurve == curve_cap) {
                size_t nc = curve_cap ? curve_cap * 2 : 512;
                replay_point *np = realloc(out->curve, nc * sizeof *np);
                if (!np) {
                    err = as_diag_set(diag, AS_ENOMEM, NULL, "out of memory");
                    goto done;
                }
                out->curve = np;
                curve_cap = nc;
            }
            double x = (double)arrived / (double)t->gpu_cap;
            out->curve[out->ncurve++] = (replay_point){x, (double)galloc / (double)t->gpu_cap};
            next_curve = x + CURVE_STEP;
        }
    }
    double gcap = t->gpu_cap > 0 ? (double)t->gpu_cap : 1;
    out->gpu_alloc_ratio_end = t->gpu_cap > 0 ? (double)galloc / gcap : 0;
    out->cpu_alloc_ratio_end = (double)calloc_ / (double)t->cpu_cap;
    out->mem_alloc_ratio_end = (double)malloc_ / (double)t->mem_cap;
    if (!at100) {
        out->gpu_alloc_ratio_at_100 = out->gpu_alloc_ratio_end;
        out->cpu_alloc_ratio_at_100 = out->cpu_alloc_ratio_end;
        out->mem_alloc_ratio_at_100 = out->mem_alloc_ratio_end;
    }
    out->unallocated_gpus_end = (double)(t->gpu_cap - galloc) / MODEL_GPU_MILLI;
    double frag = 0;
    cache_read_lock(c);
    for (size_t i = 0; i < cache_node_count(c); i++)
        frag += score_fgd_fragment(cache_node_at(c, i), shapes, nshapes);
    cache_read_unlock(c);
    out->fragmentation_end = frag / MODEL_GPU_MILLI;
    out->seconds = busy;
    out->decisions_per_sec = busy > 0 ? (double)out->submitted / busy : 0;
    err = AS_OK;
done:
    sched_result_free(&res);
    if (pods)
        for (size_t i = 0; i < t->npods; i++)
            model_pod_free(pods[i]);
    free(pods);
    free(shapes);
    binder_free(b);
    cache_free(c);
    if (pol)
        score_policy_unref(pol);
    model_registry_destroy(&reg);
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
     "arrived GPU demand to reach, x capacity, 1..100 (default 1.3)"},
    {REPLAY_SEED, "--seed", 0, "S", "sampling seed (default 42)"},
    {REPLAY_FORMAT, "--format", 0, "F", "table (default), json or csv"},
    {REPLAY_PLOT, "--plot", 0, "FILE.png",
     "draw GPU allocation against arrived demand (needs gnuplot)"},
    {REPLAY_HELP, "--help", 'h', NULL, "show this help"},
};

static const cli_spec replay_cli = {
    .command = "replay",
    .synopsis = "Usage: agentsched replay --nodes NODES.csv --pods PODS.csv [--policy a,b,c]\n"
                "                         [--inflate 1.3] [--seed S] [--format table|json|csv]\n"
                "                         [--plot FILE.png]\n\n"
                "Replays an openb GPU trace (Alibaba cluster-trace-gpu-v2023) through the\n"
                "scheduling core with each policy and compares placement quality. Pods arrive\n"
                "in trace order and are never deleted; then pods are sampled from the list\n"
                "(with the seed) until the arrived GPU demand reaches inflate x capacity.\n\n",
    .flags = replay_flags,
    .nflags = sizeof replay_flags / sizeof replay_flags[0],
    /* Scripts may abbreviate long names (--inf): getopt_long, which parsed
     * this command line before, allowed it. */
    .abbrev = true,
};

static void print_table(FILE *f, const trace *t, const replay_options *o, const replay_result *r,
                        size_t n)
{
    fprintf(f, "trace: %zu nodes, %zu pods, %.0f GPUs; inflate %.2f, seed %llu\n", t->nnodes,
            t->npods, (double)t->gpu_cap / MODEL_GPU_MILLI, o->inflate,
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

static as_err render_json(buf *b, const replay_result *r, size_t n)
{
    buf_puts(b, "{\"policies\": [");
    for (size_t i = 0; i < n; i++) {
        buf_puts(b, i ? ", {\"policy\": " : "{\"policy\": ");
        buf_json_cstr(b, r[i].policy);
        buf_printf(b,
                   ", \"placed\": %llu, \"failed\": %llu, \"gpu_alloc_ratio_at_100\": %.6f, "
                   "\"gpu_alloc_ratio_end\": %.6f, \"cpu_alloc_ratio_end\": %.6f, "
                   "\"mem_alloc_ratio_end\": %.6f, \"unallocated_gpus_end\": %.3f, "
                   "\"fragmentation_end\": %.3f, \"decisions_per_sec\": %.1f}",
                   (unsigned long long)r[i].placed, (unsigned long long)r[i].failed,
                   r[i].gpu_alloc_ratio_at_100, r[i].gpu_alloc_ratio_end, r[i].cpu_alloc_ratio_end,
                   r[i].mem_alloc_ratio_end, r[i].unallocated_gpus_end, r[i].fragmentation_end,
                   r[i].decisions_per_sec);
    }
    buf_puts(b, "]}\n");
    return b->err;
}

static void print_csv(FILE *f, const replay_result *r, size_t n)
{
    fprintf(f, "policy,placed,failed,gpu_alloc_ratio_at_100,gpu_alloc_ratio_end,"
               "cpu_alloc_ratio_end,mem_alloc_ratio_end,unallocated_gpus_end,"
               "fragmentation_end,decisions_per_sec\n");
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%s,%llu,%llu,%.6f,%.6f,%.6f,%.6f,%.3f,%.3f,%.1f\n", r[i].policy,
                (unsigned long long)r[i].placed, (unsigned long long)r[i].failed,
                r[i].gpu_alloc_ratio_at_100, r[i].gpu_alloc_ratio_end, r[i].cpu_alloc_ratio_end,
                r[i].mem_alloc_ratio_end, r[i].unallocated_gpus_end, r[i].fragmentation_end,
                r[i].decisions_per_sec);
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
static int plot(const char *png, const replay_result *r, size_t n)
{
    if (!plain_path(png)) {
        fprintf(stderr,
                "agentsched replay: --plot %s: quotes, backslashes and newlines are "
                "not allowed in the file name\n",
                png);
        return 2;
    }
    if (!in_path("gnuplot")) {
        fprintf(stderr, "agentsched replay: --plot needs gnuplot, which is not in PATH; "
                        "install it (Debian: apt-get install gnuplot-nox) or drop --plot\n");
        return 1;
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
        return 1;
    }
    FILE *df = fdopen(fd, "w");
    if (!df) {
        close(fd);
        unlink(data);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        fprintf(df, "# %s\n", r[i].policy);
        for (size_t j = 0; j < r[i].ncurve; j++)
            fprintf(df, "%.5f %.5f\n", r[i].curve[j].arrived, r[i].curve[j].gpu_alloc);
        fprintf(df, "\n\n");
    }
    int rc = 0;
    if (fclose(df) != 0)
        rc = 1;
    FILE *gp = rc ? NULL : popen("gnuplot", "w");
    if (!gp) {
        fprintf(stderr, "agentsched replay: cannot run gnuplot\n");
        unlink(data);
        return 1;
    }
    fprintf(gp,
            "set terminal pngcairo size 960,600 font ',11'\n"
            "set output '%s'\n"
            "set title 'GPU allocation ratio against arrived GPU demand'\n"
            "set xlabel 'arrived GPU demand / GPU capacity'\n"
            "set ylabel 'GPU allocation ratio'\n"
            "set key bottom right\nset grid\nset xrange [0:*]\nset yrange [0:1]\n"
            "plot ",
            png);
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
        return 1;
    }
    return rc;
}

/* See replay.h. */
int replay_cli_main(int argc, char **argv)
{
    const char *nodes = NULL, *pods = NULL, *policies = "fragment", *format = "table", *png = NULL;
    replay_options o = {1.3, 42, false};
    cli_parser p;
    cli_parser_init(&p, &replay_cli, argc, argv);
    for (;;) {
        const cli_flag *fl = NULL;
        const char *v = NULL;
        int r = cli_step(&p, &fl, &v);
        if (r < 0)
            return 2;
        if (r == 0)
            break;
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
                return 2;
            }
            break;
        case REPLAY_SEED:
            errno = 0;
            o.seed = strtoull(v, &end, 10);
            if (*end || errno || *v == '-' || !*v) {
                fprintf(stderr, "agentsched replay: --seed %s: use a non-negative integer\n", v);
                return 2;
            }
            break;
        case REPLAY_FORMAT:
            format = v;
            if (strcmp(format, "table") && strcmp(format, "json") && strcmp(format, "csv")) {
                fprintf(stderr, "agentsched replay: --format %s: use table, json or csv\n", v);
                return 2;
            }
            break;
        case REPLAY_PLOT:
            png = v;
            o.curve = true;
            break;
        case REPLAY_HELP:
            cli_usage(stdout, &replay_cli);
            return 0;
        }
    }
    if (!nodes || !pods) {
        fprintf(stderr, "agentsched replay: --nodes and --pods are required\n\n");
        cli_usage(stderr, &replay_cli);
        return 2;
    }
    /* Split the policy list. */
    char list[4096];
    if (strlen(policies) >= sizeof list) {
        fprintf(stderr, "agentsched replay: --policy list too long\n");
        return 2;
    }
    snprintf(list, sizeof list, "%s", policies);
    const char *names[REPLAY_MAX_POLICY];
    size_t n = 0;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == REPLAY_MAX_POLICY) {
            fprintf(stderr, "agentsched replay: at most %d policies\n", REPLAY_MAX_POLICY);
            return 2;
        }
        names[n++] = tok;
    }
    if (!n) {
        fprintf(stderr, "agentsched replay: --policy needs at least one policy\n");
        return 2;
    }

    as_diag diag = {{0}, {0}};
    trace *t = NULL;
    replay_result res[REPLAY_MAX_POLICY];
    memset(res, 0, sizeof res);
    size_t done_n = 0;
    int rc = 0;
    if (trace_load(nodes, pods, &t, &diag)) {
        fprintf(stderr, "agentsched replay: %s\n", diag.msg);
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (replay_run(t, names[i], &o, &res[i], &diag)) {
            fprintf(stderr, "agentsched replay: policy %s: %s\n", names[i], diag.msg);
            rc = 1;
            goto out;
        }
        done_n++;
    }
    if (strcmp(format, "json") == 0) {
        buf b;
        buf_init(&b, 0);
        if (render_json(&b, res, n) == AS_OK)
            fputs(b.data, stdout);
        else
            rc = 1;
        buf_free(&b);
    } else if (strcmp(format, "csv") == 0) {
        print_csv(stdout, res, n);
    } else {
        print_table(stdout, t, &o, res, n);
    }
    if (png && !rc) {
        rc = plot(png, res, n);
        if (!rc && strcmp(format, "table") == 0)
            printf("plot: %s\n", png);
    }
out:
    for (size_t i = 0; i < done_n; i++)
        replay_result_free(&res[i]);
    trace_free(t);
    return rc;
}

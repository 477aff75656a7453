/*
 * bench_replay.c - placement quality on the full openb traces, against the
 * placement-quality targets (docs/scoring.md).
 *
 * Reads ../shared/data/openb (next to the repository; override with
 * AGENTSCHED_OPENB_DIR) and replays the default, cpu050, gpushare40 and
 * multigpu20 pod lists on the 1523-node cluster with least-allocated,
 * most-allocated, best-fit, fgd and fragment (inflation 1.3, seed 42).
 * Prints each table, then the target ratios:
 *   - fragment's GPU allocation / fgd's, at 100% arrived and at the end (>= 1);
 *   - fragment's unallocated GPUs at the end / the best of least-allocated,
 *     most-allocated, best-fit (<= 0.8);
 *   - fragment's placed CPU-only pods / the best baseline's (>= 1);
 *   - the wall time of the default trace's five replays (< 10 s; on a
 *     shared machine compare the CPU time too).
 * Plus a CPU-only agent scenario: the default trace's CPU-only pods,
 * repeated in file order until their CPU demand is 1.3 x the cluster's CPU,
 * replayed once: fragment must place at least as many as the best baseline.
 * Exits 0 when every target holds, 1 when one misses or a pod list of
 * the folder cannot be read, 0 with a note when the folder has no node
 * list (so it can run anywhere).
 *
 * Also the cost of score_node alone per strategy (5000 synthetic nodes).
 *
 * With --pods FILE (repeatable; e.g. the pod-mix variants of
 * stress_variants.py) it replays those pod lists on the same cluster
 * instead, prints the same tables and target lines per file, and then a
 * summary table of the goal ratios, one row per file. Its exit status is
 * then that table's: the GPU goals (at 100%, at the end, unallocated
 * GPUs). The CPU-only pods line is printed but not judged there: where
 * CPU-only pods outnumber the GPU pods, fragment refuses some of them on
 * GPU nodes (reserve) to keep the GPUs usable, by design.
 *
 * --candidate POLICY (a strategy or policy file, as `agentsched replay
 * --policy` takes) is judged in place of fragment, to try a policy change
 * on every trace before making it the default.
 *
 * --no-time prints the time but does not judge it: ctest runs the quality
 * goals that way (quality/openb_goals), as a speed claim belongs to a
 * benchmark run, not to a test on a shared machine.
 *
 * Usage: bench_replay [--trace NAME|cpu-only|score-cost]... [--pods FILE]...
 *                     [--candidate POLICY] [--inflate X] [--seed S] [--no-time]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "agentsched/cmd/replay.h"
#include "agentsched/core/score.h"

static const char *const traces[] = {"default", "cpu050", "gpushare40", "multigpu20"};
/* The last one is the policy judged ("fragment"; --candidate replaces it). */
static const char *policies[] = {"least-allocated", "most-allocated", "best-fit", "fgd",
                                 "fragment"};
#define NPOL 5
#define FRAG 4
#define FGD  3

static const replay_options o_default = {.inflate = 1.3, .seed = 42};

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_time(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* Builds a pod list of the CPU-only rows of pods_path, repeated until
 * their CPU demand reaches `factor` x cpu_cap millicores. Caller frees. */
static char *cpu_only_pods(const char *pods_path, double factor, double cpu_cap, size_t *len)
{
    FILE *f = fopen(pods_path, "r");
    if (!f)
        return NULL;
    char line[4096];
    size_t cap = 1 << 20, n = 0, nrows = 0;
    char *rows = malloc(cap);
    double row_cpu = 0;
    if (!rows || !fgets(line, sizeof line, f)) {
        fclose(f);
        free(rows);
        return NULL;
    }
    while (fgets(line, sizeof line, f)) {
        char name[256];
        long long cpu, mem, ngpu, milli;
        if (sscanf(line, "%255[^,],%lld,%lld,%lld,%lld", name, &cpu, &mem, &ngpu, &milli) != 5 ||
            ngpu != 0)
            continue;
        int k = snprintf(rows + n, cap - n, "%lld,%lld", cpu, mem);
        if (k < 0 || (size_t)k + 64 >= cap - n)
            break;
        n += (size_t)k + 1;
        row_cpu += (double)cpu;
        nrows++;
    }
    fclose(f);
    if (!nrows || row_cpu <= 0) {
        free(rows);
        return NULL;
    }
    size_t reps = (size_t)(factor * cpu_cap / row_cpu) + 1;
    size_t ocap = (reps * nrows + 1) * 64, o = 0;
    char *out = malloc(ocap);
    if (!out) {
        free(rows);
        return NULL;
    }
    o += (size_t)snprintf(out, ocap, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n");
    for (size_t r = 0; r < reps; r++) {
        const char *p = rows;
        for (size_t i = 0; i < nrows; i++) {
            o += (size_t)snprintf(out + o, ocap - o, "cpu-%zu-%zu,%s,0,0\n", r, i, p);
            p += strlen(p) + 1;
        }
    }
    free(rows);
    *len = o;
    return out;
}

static int cpu_only_scenario(const char *dir, const char *nodes)
{
    char pods[4200];
    snprintf(pods, sizeof pods, "%s/openb_pod_list_default.csv", dir);
    char *ntext = NULL;
    size_t nlen = 0;
    FILE *f = fopen(nodes, "r");
    if (!f)
        return 0;
    ntext = malloc(1 << 20);
    nlen = ntext ? fread(ntext, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    double cpu_cap = 0;
    if (ntext) {
        ntext[nlen] = '\0';
        for (char *l = strchr(ntext, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
            char *c = strchr(l + 1, ',');
            if (c)
                cpu_cap += atof(c + 1);
        }
    }
    size_t plen = 0;
    char *ptext = cpu_only_pods(pods, 1.3, cpu_cap, &plen);
    if (!ntext || !ptext) {
        free(ntext);
        free(ptext);
        printf("cpu-only scenario: skipped\n");
        return 0;
    }
    trace *t = NULL;
    as_diag d = {{0}, {0}};
    int miss = 0;
    if (trace_parse(nodes, ntext, nlen, "cpu-only pods", ptext, plen, &t, &d)) {
        printf("cpu-only scenario: %s\n", d.msg);
        miss = 1;
    } else {
        printf("\n== cpu-only agent pods: %zu CPU-only pods from the default trace (CPU demand "
               "1.3 x the cluster's CPU), replayed once ==\n",
               t->npods);
        uint64_t placed[NPOL], best = 0;
        for (int i = 0; i < NPOL; i++) {
            replay_result r;
            if (replay_run(t, policies[i], &o_default, &r, &d)) {
                printf("%s: %s\n", policies[i], d.msg);
                miss = 1;
                break;
            }
            placed[i] = r.placed;
            printf("%-16s placed %7llu  cpu_end %.4f  mem_end %.4f\n", policies[i],
                   (unsigned long long)r.placed, r.cpu_alloc_ratio_end, r.mem_alloc_ratio_end);
            if (i != FRAG && r.placed > best)
                best = r.placed;
            replay_result_free(&r);
        }
        if (!miss) {
            double ratio = best ? (double)placed[FRAG] / (double)best : 1;
            printf("target: fragment / best baseline placed %.4f (>= 1 %s)\n", ratio,
                   ratio >= 1 ? "ok" : "MISS");
            miss = ratio < 1;
        }
        trace_free(t);
    }
    free(ntext);
    free(ptext);
    return miss;
}

/* Cost of score_node alone per strategy: 5000 synthetic nodes (openb-like
 * shapes, random usage), 200 pods, ns per node scored. The scan around it
 * (predicates, top-K) is the sched module's. */
static void score_cost(void)
{
    enum { NN = 5000, NP = 200 };
    model_registry reg;
    model_registry_init(&reg);
    int gi;
    model_registry_intern(&reg, reg.gpu_name, strlen(reg.gpu_name), &gi);
    model_node *specs = calloc(NN, sizeof *specs);
    cache_node *nodes = calloc(NN, sizeof *nodes);
    model_pod *pods = calloc(NP, sizeof *pods);
    if (!specs || !nodes || !pods)
        goto out;
    uint64_t rng = 7;
    static const int64_t shape[][3] = {
        {96000, 384, 8}, {104000, 512, 2}, {32000, 256, 0}, {128000, 768, 8}, {32000, 128, 4}};
    for (int i = 0; i < NN; i++) {
        const int64_t *sh = shape[i % 5];
        specs[i].name = "n";
        specs[i].alloc.v[MODEL_RES_CPU] = sh[0];
        specs[i].alloc.v[MODEL_RES_MEMORY] = sh[1] << 30;
        specs[i].alloc.v[MODEL_RES_PODS] = 110;
        specs[i].alloc.v[gi] = sh[2];
        specs[i].ngpus = (uint32_t)sh[2];
        specs[i].ready = true;
        nodes[i].spec = &specs[i];
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        nodes[i].requested[MODEL_RES_CPU] = (int64_t)((rng >> 33) % (uint64_t)sh[0]) / 2;
        nodes[i].requested[MODEL_RES_MEMORY] = (int64_t)((rng >> 20) % (uint64_t)(sh[1] << 29));
        for (int d = 0; d < sh[2]; d++)
            nodes[i].gpu_used[d] = (int32_t)((rng >> (d * 4)) % 3) * 400;
    }
    for (int i = 0; i < NP; i++) {
        pods[i].req.v[MODEL_RES_CPU] = 4000 + (i % 7) * 1000;
        pods[i].req.v[MODEL_RES_MEMORY] = (int64_t)(8 + i % 5) << 30;
        pods[i].req.v[MODEL_RES_PODS] = 1;
        pods[i].gpu_count = i % 4 ? 1 : 0;
        pods[i].gpu_milli = i % 4 == 1 ? 1000 : i % 4 ? 200 + (uint32_t)(i % 8) * 100 : 0;
    }
    printf("\n== score_node cost: %d nodes x %d pods ==\n", NN, NP);
    for (int s = 0; s < SCORE__COUNT; s++) {
        score_policy *p = NULL;
        if (score_policy_new_strategy(&reg, (score_strategy)s, &p))
            continue;
        for (int i = 0; i < NP; i++)
            score_observe_pod(p, &pods[i]);
        double sink = 0, t0 = cpu_time();
        for (int i = 0; i < NP; i++)
            for (int n = 0; n < NN; n++)
                sink += score_node(p, &pods[i], &nodes[n]);
        double secs = cpu_time() - t0;
        printf("%-20s %6.1f ns/node (CPU time; checksum %.0f)\n",
               score_strategy_name((score_strategy)s), secs * 1e9 / ((double)NN * NP), sink);
        score_policy_unref(p);
    }
out:
    free(specs);
    free(nodes);
    free(pods);
    model_registry_destroy(&reg);
}

/* A trace's goal figures, for the summary of --pods runs. */
typedef struct goal_row {
    char label[64];
    double a100, aend, un, cpu;
    double frag_unalloc, best_unalloc;
} goal_row;

/* Which targets besides the GPU goals a run judges. */
typedef struct judged {
    bool time; /* the default trace's five replays under 10 s of CPU */
    bool cpu;  /* CPU-only pods placed, at least the best baseline's */
} judged;

/* Replays pods_path on nodes with every policy, prints the table and the
 * target ratios, fills *g. Returns the number of targets missed (the time
 * target only for the default trace; time and CPU-only pods only where j
 * says), -1 when the trace cannot be loaded. */
static int run_trace(const char *label, const char *nodes, const char *pods,
                     const replay_options *po, judged j, goal_row *g)
{
    replay_options o = *po;
    trace *t = NULL;
    as_diag d = {{0}, {0}};
    if (trace_load(nodes, pods, &t, &d)) {
        printf("bench_replay: %s: %s; skipping\n", label, d.msg);
        return -1;
    }
    replay_result r[NPOL];
    double w0 = wall(), c0 = cpu_time();
    for (int i = 0; i < NPOL; i++) {
        if (replay_run(t, policies[i], &o, &r[i], &d)) {
            fprintf(stderr, "bench_replay: %s %s: %s\n", label, policies[i], d.msg);
            exit(1);
        }
    }
    double w = wall() - w0, c = cpu_time() - c0;
    printf("\n== %s: %zu nodes, %zu pods, %.0f GPUs, inflate %.2f, seed %llu ==\n", label,
           t->nnodes, t->npods, (double)t->gpu_cap / 1000, o.inflate, (unsigned long long)o.seed);
    printf("%-16s %7s %7s %9s %8s %8s %8s %8s %8s %8s %11s\n", "policy", "placed", "failed",
           "cpu-pods", "gpu@100", "gpu_end", "cpu_end", "mem_end", "unalloc", "frag",
           "decisions/s");
    for (int i = 0; i < NPOL; i++)
        printf("%-16s %7llu %7llu %9llu %8.4f %8.4f %8.4f %8.4f %8.1f %8.1f %11.0f\n", r[i].policy,
               (unsigned long long)r[i].placed, (unsigned long long)r[i].failed,
               (unsigned long long)r[i].cpu_pods_placed, r[i].gpu_alloc_ratio_at_100,
               r[i].gpu_alloc_ratio_end, r[i].cpu_alloc_ratio_end, r[i].mem_alloc_ratio_end,
               r[i].unallocated_gpus_end, r[i].fragmentation_end, r[i].decisions_per_sec);
    double best_unalloc = 1e18;
    uint64_t best_cpu = 0;
    for (int i = 0; i < 3; i++) {
        if (r[i].unallocated_gpus_end < best_unalloc)
            best_unalloc = r[i].unallocated_gpus_end;
    }
    for (int i = 0; i < FRAG; i++)
        if (r[i].cpu_pods_placed > best_cpu)
            best_cpu = r[i].cpu_pods_placed;
    double a100 = r[FRAG].gpu_alloc_ratio_at_100 / r[FGD].gpu_alloc_ratio_at_100;
    double aend = r[FRAG].gpu_alloc_ratio_end / r[FGD].gpu_alloc_ratio_end;
    double un = r[FRAG].unallocated_gpus_end / best_unalloc;
    double cpu = best_cpu ? (double)r[FRAG].cpu_pods_placed / (double)best_cpu : 1;
    bool ok100 = a100 >= 1, okend = aend >= 1, okun = un <= 0.8, okcpu = cpu >= 1;
    printf("targets: fragment/fgd gpu@100 %.4f (>= 1 %s)  gpu_end %.4f (>= 1 %s)  "
           "unalloc vs best baseline %.3f (<= 0.8 %s)  cpu-only pods vs best %.3f "
           "(%s)\n",
           a100, ok100 ? "ok" : "MISS", aend, okend ? "ok" : "MISS", un, okun ? "ok" : "MISS", cpu,
           !j.cpu  ? "not judged"
           : okcpu ? ">= 1 ok"
                   : ">= 1 MISS");
    int misses = !ok100 + !okend + !okun + (j.cpu && !okcpu);
    printf("time: five replays %.2f s wall, %.2f s CPU", w, c);
    if (strcmp(label, "default") == 0 && j.time) {
        printf(" (target < 10 s: %s)", w < 10 ? "ok" : c < 10 ? "CPU ok, machine loaded" : "MISS");
        misses += c >= 10;
    }
    printf("\n");
    snprintf(g->label, sizeof g->label, "%s", label);
    g->a100 = a100;
    g->aend = aend;
    g->un = un;
    g->cpu = cpu;
    g->frag_unalloc = r[FRAG].unallocated_gpus_end;
    g->best_unalloc = best_unalloc;
    for (int i = 0; i < NPOL; i++)
        replay_result_free(&r[i]);
    trace_free(t);
    return misses;
}

int main(int argc, char **argv)
{
    const char *dir = getenv("AGENTSCHED_OPENB_DIR");
    char dflt[4096];
    if (!dir || !*dir) {
        snprintf(dflt, sizeof dflt, "%s/../shared/data/openb", AGENTSCHED_SOURCE_DIR);
        dir = dflt;
    }
    replay_options o = {.inflate = 1.3, .seed = 42};
    const char *only[8];
    size_t nonly = 0;
    judged j = {.time = true, .cpu = true};
    const char *podfiles[64];
    size_t npods = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--trace") == 0 && i + 1 < argc && nonly < 8)
            only[nonly++] = argv[++i];
        else if (strcmp(argv[i], "--no-time") == 0)
            j.time = false;
        else if (strcmp(argv[i], "--pods") == 0 && i + 1 < argc && npods < 64)
            podfiles[npods++] = argv[++i];
        else if (strcmp(argv[i], "--candidate") == 0 && i + 1 < argc)
            policies[FRAG] = argv[++i];
        else if (strcmp(argv[i], "--inflate") == 0 && i + 1 < argc)
            o.inflate = atof(argv[++i]);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            o.seed = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr,
                    "usage: %s [--trace NAME]... [--pods FILE]... [--candidate POLICY] "
                    "[--inflate X] [--seed S] [--no-time]\n",
                    argv[0]);
            return 2;
        }
    }
    bool cost = !nonly && !npods;
    for (size_t k = 0; k < nonly; k++)
        cost |= strcmp(only[k], "score-cost") == 0;
    if (cost)
        score_cost();
    char nodes[4200];
    snprintf(nodes, sizeof nodes, "%s/openb_node_list_all_node.csv", dir);
    if (access(nodes, R_OK) != 0) {
        printf("bench_replay: %s not found; skipping (set AGENTSCHED_OPENB_DIR to the openb "
               "trace folder)\n",
               nodes);
        return 0;
    }
    int misses = 0;
    for (size_t ti = 0; ti < sizeof traces / sizeof traces[0] && !npods; ti++) {
        if (nonly) {
            bool want = false;
            for (size_t k = 0; k < nonly; k++)
                want |= strcmp(only[k], traces[ti]) == 0;
            if (!want)
                continue;
        }
        char pods[4200];
        snprintf(pods, sizeof pods, "%s/openb_pod_list_%s.csv", dir, traces[ti]);
        goal_row g;
        int m = run_trace(traces[ti], nodes, pods, &o, j, &g);
        misses += m < 0 ? 1 : m; /* a trace that cannot be read judges nothing */
    }
    if (npods) {
        goal_row *rows = calloc(npods, sizeof *rows);
        if (!rows) {
            fprintf(stderr, "bench_replay: out of memory\n");
            return 1;
        }
        size_t nrows = 0;
        judged jp = {.time = j.time, .cpu = false};
        for (size_t k = 0; k < npods; k++) {
            const char *base = strrchr(podfiles[k], '/');
            base = base ? base + 1 : podfiles[k];
            char label[64];
            snprintf(label, sizeof label, "%.*s", (int)strcspn(base, "."), base);
            if (run_trace(label, nodes, podfiles[k], &o, jp, &rows[nrows]) >= 0)
                nrows++;
            else
                misses++; /* a list that cannot be read judges nothing */
        }
        printf("\n| variant | fragment/fgd GPU alloc @100%% | ... at the end | unallocated GPUs "
               "vs best classic | goal |\n| --- | ---: | ---: | ---: | --- |\n");
        for (size_t k = 0; k < nrows; k++) {
            const goal_row *g = &rows[k];
            bool ok = g->a100 >= 1 && g->aend >= 1 && g->un <= 0.8;
            misses += !ok;
            printf("| %s | %.3f | %.3f | %.3f (%.1f vs %.1f) | %s%s%s%s |\n", g->label, g->a100,
                   g->aend, g->un, g->frag_unalloc, g->best_unalloc,
                   ok ? "met" : "missed:", g->a100 < 1 ? " @100" : "", g->aend < 1 ? " end" : "",
                   g->un > 0.8 ? " unalloc" : "");
        }
        free(rows);
    }
    bool cpu_only = !nonly && !npods;
    for (size_t k = 0; k < nonly; k++)
        cpu_only |= strcmp(only[k], "cpu-only") == 0;
    if (cpu_only)
        misses += cpu_only_scenario(dir, nodes);
    printf("\n%s\n",
           misses ? "bench_replay: some targets missed" : "bench_replay: all targets met");
    return misses ? 1 : 0;
}

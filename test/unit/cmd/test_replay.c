/*
 * test_replay.c - the trace replay: exact results on the shipped openb
 * sample, the method's details (order, sampling, GPU model constraints),
 * CSV errors naming file, line and column, and the CLI's JSON output.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentsched/cmd/replay.h"
#include "cli_fixtures.h"

#define DATA TEST_DATA_DIR "/replay"

static trace *parse(const char *nodes, const char *pods)
{
    trace *t = NULL;
    as_diag d = {{0}, {0}};
    as_err err =
        trace_parse("nodes.csv", nodes, strlen(nodes), "pods.csv", pods, strlen(pods), &t, &d);
    cr_assert_eq(err, AS_OK, "%s", d.msg);
    return t;
}

static void parse_bad(const char *nodes, const char *pods, as_err want, const char *text)
{
    trace *t = (trace *)0x1;
    as_diag d = {{0}, {0}};
    as_err err =
        trace_parse("nodes.csv", nodes, strlen(nodes), "pods.csv", pods, strlen(pods), &t, &d);
    cr_assert_eq(err, want, "got %d: %s", err, d.msg);
    cr_assert_null(t);
    cr_assert(strstr(d.msg, text), "message \"%s\" lacks \"%s\"", d.msg, text);
}

static replay_result run(const trace *t, const char *policy, double inflate)
{
    replay_options o = {.inflate = inflate, .seed = 42};
    replay_result r;
    as_diag d = {{0}, {0}};
    cr_assert_eq(replay_run(t, policy, &o, &r, &d), AS_OK, "%s: %s", policy, d.msg);
    return r;
}

static const char nodes_hdr[] = "sn,cpu_milli,memory_mib,gpu,model\n";
static const char pods_hdr[] = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,"
                               "pod_phase,creation_time,deletion_time,scheduled_time\n";

/* The shipped sample replays to exactly the recorded results. */
Test(replay, shipped_sample_exact)
{
    trace *t = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(trace_load(DATA "/nodes.csv", DATA "/pods.csv", &t, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(t->nnodes, 41);
    cr_assert_eq(t->npods, 227);
    json_error_t je;
    json_t *exp = json_load_file(DATA "/expected.json", 0, &je);
    cr_assert(exp, "%s", je.text);
    double inflate = json_real_value(json_object_get(exp, "inflate"));
    json_t *pols = json_object_get(exp, "policies");
    cr_assert_eq(json_array_size(pols), 6);
    for (size_t i = 0; i < json_array_size(pols); i++) {
        json_t *e = json_array_get(pols, i);
        const char *name = json_string_value(json_object_get(e, "policy"));
        replay_options o = {.inflate = inflate,
                            .seed = (uint64_t)json_integer_value(json_object_get(exp, "seed"))};
        replay_result r;
        cr_assert_eq(replay_run(t, name, &o, &r, &d), AS_OK, "%s: %s", name, d.msg);
        cr_assert_eq(r.placed, (uint64_t)json_integer_value(json_object_get(e, "placed")), "%s",
                     name);
        cr_assert_eq(r.failed, (uint64_t)json_integer_value(json_object_get(e, "failed")), "%s",
                     name);
        struct {
            const char *key;
            double got, tol;
        } f[] = {
            {"gpu_alloc_ratio_at_100", r.gpu_alloc_ratio_at_100, 5e-7},
            {"gpu_alloc_ratio_end", r.gpu_alloc_ratio_end, 5e-7},
            {"cpu_alloc_ratio_end", r.cpu_alloc_ratio_end, 5e-7},
            {"mem_alloc_ratio_end", r.mem_alloc_ratio_end, 5e-7},
            {"unallocated_gpus_end", r.unallocated_gpus_end, 5e-4},
            {"fragmentation_end", r.fragmentation_end, 5e-4},
        };
        for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
            double want = json_number_value(json_object_get(e, f[k].key));
            cr_assert(fabs(f[k].got - want) <= f[k].tol, "%s %s: got %.6f want %.6f", name,
                      f[k].key, f[k].got, want);
        }
        cr_assert_eq(r.submitted, r.placed + r.failed);
        replay_result_free(&r);
    }
    json_decref(exp);
    trace_free(t);
}

/* fragment beats fgd and the kube-scheduler baselines on the sample too. */
Test(replay, sample_fragment_leads)
{
    trace *t = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(trace_load(DATA "/nodes.csv", DATA "/pods.csv", &t, &d), AS_OK);
    replay_result fr = run(t, "fragment", 1.3), fg = run(t, "fgd", 1.3),
                  la = run(t, "least-allocated", 1.3);
    cr_assert_geq(fr.gpu_alloc_ratio_end, fg.gpu_alloc_ratio_end);
    cr_assert_lt(fr.unallocated_gpus_end, la.unallocated_gpus_end);
    trace_free(t);
}

/* Trace order is creation_time then name, not file order: the share
 * (time 5) arrives before the whole GPU (time 10) and takes the only GPU
 * half; the whole-GPU pod then fails. Arrived demand 1500 >= 1.3 x 1000
 * ends the run without sampling. */
Test(replay, creation_time_order)
{
    char nodes[256], pods[1024];
    snprintf(nodes, sizeof nodes, "%sn1,8000,32768,1,T4\n", nodes_hdr);
    snprintf(pods, sizeof pods,
             "%sbig,1000,1024,1,1000,,LS,Running,10,0,0\n"
             "small,1000,1024,1,500,,LS,Running,5,0,0\n",
             pods_hdr);
    trace *t = parse(nodes, pods);
    replay_result r = run(t, "fragment", 1.3);
    cr_assert_eq(r.submitted, 2);
    cr_assert_eq(r.placed, 1);
    cr_assert_float_eq(r.gpu_alloc_ratio_end, 0.5, 1e-12);
    cr_assert_float_eq(r.unallocated_gpus_end, 0.5, 1e-12);
    /* at 100%: reached by the second pod */
    cr_assert_float_eq(r.gpu_alloc_ratio_at_100, 0.5, 1e-12);
    trace_free(t);

    /* Without a creation_time column: file order (big first). */
    snprintf(pods, sizeof pods,
             "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
             "big,1000,1024,1,1000\nsmall,1000,1024,1,500\n");
    t = parse(nodes, pods);
    r = run(t, "fragment", 1.3);
    cr_assert_float_eq(r.gpu_alloc_ratio_end, 1.0, 1e-12);
    trace_free(t);
}

/* Sampling continues until inflate x capacity has arrived, deterministic
 * for a seed. */
Test(replay, sampling_until_inflated)
{
    char nodes[256], pods[512];
    snprintf(nodes, sizeof nodes, "%sn1,64000,262144,8,G2\nn2,32000,131072,0,\n", nodes_hdr);
    snprintf(pods, sizeof pods,
             "%sa,1000,1024,1,250,,LS,Running,1,0,0\n"
             "b,100,128,0,0,,LS,Running,2,0,0\n",
             pods_hdr);
    trace *t = parse(nodes, pods);
    cr_assert_eq(t->gpu_cap, 8000);
    replay_result r1 = run(t, "least-allocated", 2.0);
    replay_result r2 = run(t, "least-allocated", 2.0);
    cr_assert_eq(r1.submitted, r2.submitted);
    /* 16000 milli must arrive in 250-milli pods: 64 GPU pods plus CPU pods. */
    cr_assert_gt(r1.submitted, 64);
    /* The GPU fills exactly: 32 shares of 250. */
    cr_assert_float_eq(r1.gpu_alloc_ratio_end, 1.0, 1e-12);
    cr_assert_float_eq(r1.gpu_alloc_ratio_at_100, 1.0, 1e-12);
    trace_free(t);
}

/* The pod names of a run's placements file, in submission order, joined. */
static void submitted_names(const trace *t, bool shuffle, uint64_t seed, char *out, size_t cap)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    replay_options o = {
        .inflate = 1.3, .seed = seed, .once = true, .shuffle = shuffle, .placements = f};
    replay_result r;
    as_diag d = {{0}, {0}};
    cr_assert_eq(replay_run(t, "least-allocated", &o, &r, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(r.submitted, t->npods);
    fclose(f);
    size_t n = 0;
    out[0] = 0;
    /* lines "submission,pod,node": keep the pod */
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        const char *pod = strchr(line, ',') + 1;
        n += (size_t)snprintf(out + n, cap - n, "%.*s ", (int)strcspn(pod, ","), pod);
        cr_assert_lt(n, cap);
    }
    free(text);
}

/* --order shuffle submits the list as the paper's experiments do: sorted by
 * name, then shuffled with the seed; every pod once, the same order for the
 * same seed whatever the file's order, another for another seed. */
Test(replay, shuffled_order)
{
    char nodes[256], pods[4096];
    snprintf(nodes, sizeof nodes, "%sn1,64000,262144,8,G2\n", nodes_hdr);
    size_t n = (size_t)snprintf(pods, sizeof pods, "%s", pods_hdr);
    for (int i = 0; i < 24; i++) /* creation times in reverse name order */
        n += (size_t)snprintf(pods + n, sizeof pods - n, "p%02d,100,128,0,0,,LS,Running,%d,0,0\n",
                              i, 100 - i);
    trace *t = parse(nodes, pods);
    char trace_order[512], a[512], b[512], c[512];
    submitted_names(t, false, 42, trace_order, sizeof trace_order);
    cr_assert(strncmp(trace_order, "p23 p22 ", 8) == 0, "%s", trace_order);
    submitted_names(t, true, 42, a, sizeof a);
    submitted_names(t, true, 42, b, sizeof b);
    submitted_names(t, true, 43, c, sizeof c);
    cr_assert_str_eq(a, b);
    cr_assert_str_neq(a, c);
    cr_assert_str_neq(a, trace_order);
    for (int i = 0; i < 24; i++) {
        char name[8];
        snprintf(name, sizeof name, "p%02d ", i);
        const char *at = strstr(a, name);
        cr_assert(at && !strstr(at + 1, name), "%s once in %s", name, a);
    }
    trace_free(t);
    /* The same pods in another trace order: the same shuffle (by name first). */
    n = (size_t)snprintf(pods, sizeof pods, "%s", pods_hdr);
    for (int i = 0; i < 24; i++)
        n += (size_t)snprintf(pods + n, sizeof pods - n, "p%02d,100,128,0,0,,LS,Running,%d,0,0\n",
                              (i * 7) % 24, i);
    t = parse(nodes, pods);
    submitted_names(t, true, 42, b, sizeof b);
    cr_assert_str_eq(a, b);
    trace_free(t);
}

/* gpu_spec restricts pods to the listed models (node affinity). */
Test(replay, gpu_spec_is_affinity)
{
    char nodes[256], pods[512];
    snprintf(nodes, sizeof nodes, "%sn1,64000,262144,2,G2\n", nodes_hdr);
    snprintf(pods, sizeof pods,
             "%sa,1000,1024,1,1000,T4,LS,Running,1,0,0\n"
             "b,1000,1024,1,1000,T4|G2,LS,Running,2,0,0\n",
             pods_hdr);
    trace *t = parse(nodes, pods);
    replay_result r = run(t, "fgd", 1.0);
    cr_assert_eq(r.submitted, 2);
    cr_assert_eq(r.placed, 1);
    cr_assert_eq(r.failed, 1);
    trace_free(t);
}

/* "nan", as the trace's README writes a missing value, is no value: no
 * model pinned, no node model, no deletion time. */
Test(replay, nan_is_absent)
{
    char nodes[256], pods[512];
    snprintf(nodes, sizeof nodes, "%sn1,64000,262144,2,G2\nc1,8000,8192,0,nan\n", nodes_hdr);
    snprintf(pods, sizeof pods,
             "%sa,1000,1024,1,1000,nan,LS,Running,1,NaN,0\n"
             "b,1000,1024,1,500,G2,LS,Running,2,9,0\n",
             pods_hdr);
    trace *t = parse(nodes, pods);
    cr_assert_null(t->pods[0].gpu_spec);
    cr_assert_eq(t->pods[0].deleted, -1);
    cr_assert_str_eq(t->pods[1].gpu_spec, "G2");
    cr_assert_eq(t->pods[1].deleted, 9);
    cr_assert_null(t->nodes[1].model);
    cr_assert_str_eq(t->nodes[0].model, "G2");
    replay_result r = run(t, "fragment", 1.0);
    cr_assert_eq(r.failed, 0);
    cr_assert_eq(r.placed, r.submitted);
    trace_free(t);
}

/* A cluster without GPUs replays the list once. */
Test(replay, cpu_only_cluster)
{
    char nodes[256], pods[512];
    snprintf(nodes, sizeof nodes, "%sc1,4000,8192,0,\n", nodes_hdr);
    snprintf(pods, sizeof pods,
             "%sa,3000,1024,0,0,,LS,Running,1,0,0\n"
             "b,3000,1024,0,0,,LS,Running,2,0,0\n",
             pods_hdr);
    trace *t = parse(nodes, pods);
    replay_result r = run(t, "fragment", 1.3);
    cr_assert_eq(r.submitted, 2);
    cr_assert_eq(r.placed, 1);
    cr_assert_eq(r.cpu_pods_placed, 1);
    cr_assert_eq(r.cpu_pods_failed, 1);
    cr_assert_float_eq(r.cpu_alloc_ratio_end, 0.75, 1e-12);
    trace_free(t);
}

Test(replay, policy_file_and_unknown_policy)
{
    char nodes[256], pods[512];
    snprintf(nodes, sizeof nodes, "%sn1,8000,32768,1,T4\n", nodes_hdr);
    snprintf(pods, sizeof pods, "%sa,1000,1024,1,500,,LS,Running,1,0,0\n", pods_hdr);
    trace *t = parse(nodes, pods);
    replay_result r = run(t, AGENTSCHED_SOURCE_DIR "/policy/default.yaml", 1.3);
    cr_assert_eq(r.placed, 2);
    replay_options o = {.inflate = 1.3, .seed = 1};
    as_diag d = {{0}, {0}};
    cr_assert_eq(replay_run(t, "spread", &o, &r, &d), AS_EINVAL);
    cr_assert(strstr(d.msg, "unknown policy"), "%s", d.msg);
    cr_assert_eq(replay_run(t, "/nonexistent.yaml", &o, &r, &d), AS_EIO);
    trace_free(t);
}

Test(replay, csv_errors)
{
    char pods[512];
    snprintf(pods, sizeof pods, "%sa,1000,1024,1,500,,LS,Running,1,0,0\n", pods_hdr);
    parse_bad("sn,cpu_milli,memory_mib,model\nn1,1,1,T4\n", pods, AS_EINVAL,
              "nodes.csv:1: missing column gpu");
    parse_bad("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,2,T4\nn2,x,1,2,T4\n", pods, AS_EPARSE,
              "nodes.csv:3: column cpu_milli: \"x\" is not an integer");
    parse_bad("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,17,T4\n", pods, AS_ERANGE,
              "nodes.csv:2: column gpu: 17 is out of range");
    parse_bad("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,2\n", pods, AS_EPARSE,
              "nodes.csv:2: 4 columns, the header has 5");
    parse_bad("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,1,T4\nn2,1,1,1,T4\nn1,1,1,1,T4\n", pods,
              AS_EINVAL, "nodes.csv:4: column sn: node n1 is listed already, on line 2");
    parse_bad("", pods, AS_EPARSE, "nodes.csv: empty file");
    parse_bad("sn,cpu_milli,memory_mib,gpu,model\n", pods, AS_EINVAL, "nodes.csv: no nodes");
    parse_bad("sn,cpu_milli,memory_mib,gpu,model\n\"n1,1,1,1,T4\n", pods, AS_EPARSE,
              "nodes.csv:2: column 1: a quoted value does not end on its line");
    parse_bad("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,1,\"T4\"x\n", pods, AS_EPARSE,
              "nodes.csv:2: column 5: text after a quoted value's closing quote");
    parse_bad("sn,cpu_milli,memory_mib,gpu,model\nn1,1,1,1,T\"4\n", pods, AS_EPARSE,
              "nodes.csv:2: column 5: a quote inside an unquoted value");
    const char *n = "sn,cpu_milli,memory_mib,gpu,model\nn1,8000,1024,2,T4\n";
    parse_bad(n, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,2,500\n", AS_EINVAL,
              "pods.csv:2: column gpu_milli");
    parse_bad(n, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1001\n", AS_ERANGE,
              "pods.csv:2: column gpu_milli: 1001 is out of range");
    parse_bad(n, "name,cpu_milli,memory_mib,num_gpu\np,1,1,1\n", AS_EINVAL,
              "pods.csv:1: missing column gpu_milli");
    parse_bad(n, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,-1,1,0,0\n", AS_ERANGE,
              "pods.csv:2: column cpu_milli");
    parse_bad(n, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", AS_EINVAL, "pods.csv: no pods");
    /* A line over the cap. */
    size_t big = TRACE_MAX_LINE + 100;
    char *longp = malloc(big + 64);
    cr_assert(longp);
    strcpy(longp, "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n");
    size_t off = strlen(longp);
    memset(longp + off, 'a', big);
    strcpy(longp + off + big, ",1,1,0,0\n");
    parse_bad(n, longp, AS_ETOOBIG, "pods.csv:2: line longer than");
    free(longp);
}

Test(replay, missing_files)
{
    trace *t = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(trace_load("/nonexistent/nodes.csv", DATA "/pods.csv", &t, &d), AS_EIO);
    cr_assert(strstr(d.msg, "/nonexistent/nodes.csv"), "%s", d.msg);
    cr_assert_null(t);
}

/* A writer that quotes every value (RFC 4180; "" inside a quoted value
 * is one quote) reads as one that quotes none. */
Test(replay, quoted_values)
{
    trace *t = parse("\"sn\",\"cpu_milli\",\"memory_mib\",\"gpu\",\"model\"\n"
                     "\"n1\",\"8000\",\"1024\",\"1\",\"T4\"\n"
                     "\"n,2\",\"8000\",\"1024\",\"1\",\"A\"\"B\"\n",
                     "\"name\",cpu_milli,memory_mib,num_gpu,gpu_milli,\"gpu_spec\"\n"
                     "\"p\",1000,512,1,1000,\"T4|G2\"\n"
                     "q,1000,512,1,1000,\"\"\n");
    cr_assert_eq(t->nnodes, 2);
    cr_assert_str_eq(t->nodes[0].name, "n1");
    cr_assert_eq(t->nodes[0].cpu, 8000);
    cr_assert_str_eq(t->nodes[0].model, "T4");
    cr_assert_str_eq(t->nodes[1].name, "n,2");
    cr_assert_str_eq(t->nodes[1].model, "A\"B");
    cr_assert_eq(t->npods, 2);
    cr_assert_str_eq(t->pods[0].gpu_spec, "T4|G2");
    cr_assert_null(t->pods[1].gpu_spec);
    trace_free(t);
}

/* Windows line endings and blank lines are accepted. */
Test(replay, crlf_and_blank_lines)
{
    trace *t = parse("sn,cpu_milli,memory_mib,gpu,model\r\n\r\nn1,8000,1024,1,T4\r\n",
                     "name,cpu_milli,memory_mib,num_gpu,gpu_milli\r\np,1000,512,1,1000\r\n\r\n");
    cr_assert_eq(t->nnodes, 1);
    cr_assert_eq(t->npods, 1);
    trace_free(t);
}

/* The CLI's JSON has exactly the documented keys. */
Test(replay, cli_json_schema)
{
    int st;
    char *out = cli_run(
        &st,
        "replay --nodes %s/nodes.csv --pods %s/pods.csv --policy fgd,fragment --format json 2>&1",
        DATA, DATA);
    cr_assert_eq(st, 0, "%s", out);
    json_error_t je;
    json_t *doc = json_loads(out, 0, &je);
    cr_assert(doc, "%s: %s", je.text, out);
    cr_assert_eq(json_object_size(doc), 1);
    json_t *pols = json_object_get(doc, "policies");
    cr_assert_eq(json_array_size(pols), 2);
    static const char *const keys[] = {"policy",
                                       "placed",
                                       "failed",
                                       "gpu_alloc_ratio_at_100",
                                       "gpu_alloc_ratio_end",
                                       "cpu_alloc_ratio_end",
                                       "mem_alloc_ratio_end",
                                       "unallocated_gpus_end",
                                       "fragmentation_end",
                                       "decisions_per_sec"};
    for (size_t i = 0; i < 2; i++) {
        json_t *p = json_array_get(pols, i);
        cr_assert_eq(json_object_size(p), sizeof keys / sizeof keys[0]);
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            cr_assert(json_object_get(p, keys[k]), "missing %s", keys[k]);
    }
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(pols, 1), "policy")),
                     "fragment");
    json_decref(doc);
    free(out);
}

Test(replay, cli_usage_errors)
{
    int st;
    char *out = cli_run(&st, "replay --pods x.csv 2>&1");
    cr_assert_eq(WEXITSTATUS(st), 2, "%s", out);
    cr_assert(strstr(out, "--nodes"), "%s", out);
    free(out);
    out = cli_run(&st, "replay --nodes a --pods b --format xml 2>&1");
    cr_assert_eq(WEXITSTATUS(st), 2);
    cr_assert(strstr(out, "table, json or csv"), "%s", out);
    free(out);
    out = cli_run(&st, "replay --nodes a --pods b --arrivals 10 2>&1");
    cr_assert_eq(WEXITSTATUS(st), 2);
    cr_assert(strstr(out, "--arrivals needs --churn"), "%s", out);
    free(out);
    out = cli_run(&st, "replay --nodes a --pods b --inflate 0.5 2>&1");
    cr_assert_eq(WEXITSTATUS(st), 2);
    free(out);
    out = cli_run(&st, "replay --nodes a --pods b --order random 2>&1");
    cr_assert_eq(WEXITSTATUS(st), 2);
    cr_assert(strstr(out, "--order random: use trace or shuffle"), "%s", out);
    free(out);
    out = cli_run(&st, "replay --nodes %s/nodes.csv --pods %s/pods.csv --policy nope 2>&1", DATA,
                  DATA);
    cr_assert_eq(WEXITSTATUS(st), 1);
    cr_assert(strstr(out, "unknown policy"), "%s", out);
    free(out);
    out = cli_run(&st,
                  "replay --nodes %s/nodes.csv --pods %s/pods.csv --policy fgd --format csv 2>&1",
                  DATA, DATA);
    cr_assert_eq(st, 0);
    cr_assert(strncmp(out, "policy,placed,failed,", 21) == 0, "%s", out);
    free(out);
}

/* The table, the churn outputs and --plot: what a user reads and draws. */
Test(replay, cli_table_churn_and_plot)
{
    int st;
    char *out = cli_run(&st, "replay --nodes %s/nodes.csv --pods %s/pods.csv --policy fgd,fragment",
                        DATA, DATA);
    cr_assert_eq(st, 0, "%s", out);
    cr_assert(strstr(out, "trace: 41 nodes, 227 pods, 192 GPUs; the list in trace order"), "%s",
              out);
    cr_assert(strstr(out, "policy ") && strstr(out, "gpu@100") && strstr(out, "decisions/s"), "%s",
              out);
    cr_assert(strstr(out, "\nfgd ") && strstr(out, "\nfragment "), "%s", out);
    free(out);

    /* churn: the JSON adds its two figures; the table is the churn one */
    out = cli_run(&st,
                  "replay --nodes %s/nodes.csv --pods %s/pods.csv --churn --arrivals 1000 "
                  "--format json",
                  DATA, DATA);
    cr_assert_eq(st, 0, "%s", out);
    json_error_t je;
    json_t *doc = json_loads(out, 0, &je);
    cr_assert(doc, "%s: %s", je.text, out);
    json_t *p0 = json_array_get(json_object_get(doc, "policies"), 0);
    double alloc = json_real_value(json_object_get(p0, "churn_alloc_mean"));
    cr_assert(alloc > 0 && alloc <= 1, "%s", out);
    cr_assert(json_is_real(json_object_get(p0, "churn_refused")), "%s", out);
    cr_assert(json_is_null(json_object_get(p0, "gpu_alloc_ratio_at_100")),
              "no 100%% point when pods leave: %s", out);
    cr_assert_eq(json_integer_value(json_object_get(p0, "placed")) +
                     json_integer_value(json_object_get(p0, "failed")),
                 1000);
    json_decref(doc);
    free(out);
    out = cli_run(&st, "replay --nodes %s/nodes.csv --pods %s/pods.csv --churn --arrivals 1000",
                  DATA, DATA);
    cr_assert_eq(st, 0, "%s", out);
    cr_assert(strstr(out, "churn: offered load 1.30 x capacity, 1000 arrivals"), "%s", out);
    cr_assert(strstr(out, "live_end"), "%s", out);
    free(out);
    out = cli_run(&st,
                  "replay --nodes %s/nodes.csv --pods %s/pods.csv --churn --arrivals 1000 "
                  "--format csv",
                  DATA, DATA);
    cr_assert_eq(st, 0, "%s", out);
    cr_assert(strstr(out, ",churn_alloc_mean,churn_refused\n"), "%s", out);
    const char *row = strstr(out, "\nfragment,");
    cr_assert_not_null(row);
    /* policy,placed,failed,<empty at_100>,... */
    const char *c3 = strchr(strchr(strchr(row + 1, ',') + 1, ',') + 1, ',');
    cr_assert(c3 && c3[1] == ',', "gpu_alloc_ratio_at_100 empty under churn: %s", out);
    free(out);

    /* --plot: a PNG, or a message saying what is missing */
    char png[] = "/tmp/agentsched-test-plot-XXXXXX";
    int fd = mkstemp(png);
    cr_assert_geq(fd, 0);
    close(fd);
    out = cli_run(&st, "replay --nodes %s/nodes.csv --pods %s/pods.csv --plot %s 2>&1", DATA, DATA,
                  png);
    if (system("command -v gnuplot >/dev/null 2>&1") == 0) {
        cr_assert_eq(st, 0, "%s", out);
        cr_assert(strstr(out, "plot: "), "%s", out);
        unsigned char magic[8] = {0};
        FILE *f = fopen(png, "rb");
        cr_assert_not_null(f);
        cr_assert_eq(fread(magic, 1, 8, f), 8);
        fclose(f);
        cr_assert(!memcmp(magic, "\x89PNG\r\n\x1a\n", 8), "a PNG was written");
    } else {
        cr_assert_eq(WEXITSTATUS(st), 1, "%s", out);
        cr_assert(strstr(out, "--plot needs gnuplot"), "%s", out);
    }
    unlink(png);
    free(out);
    out =
        cli_run(&st, "replay --nodes %s/nodes.csv --pods %s/pods.csv --plot \"/tmp/a'b.png\" 2>&1",
                DATA, DATA);
    cr_assert_eq(WEXITSTATUS(st), 2, "%s", out);
    cr_assert(strstr(out, "quotes, backslashes and newlines are not allowed"), "%s", out);
    free(out);
}

/* Churn: pods leave after their trace lifetimes; the run is the same for
 * the same seed, never holds more than the cluster fits, and an offered
 * load below capacity is mostly placed. */
Test(replay, churn_pods_leave)
{
    char nodes[256], pods[1024];
    snprintf(nodes, sizeof nodes, "%sn1,64000,262144,2,T4\nn2,64000,262144,2,T4\n", nodes_hdr);
    /* lifetimes 10 and 30 s; one pod without a deletion time draws one */
    snprintf(pods, sizeof pods,
             "%sa,1000,1024,1,1000,,LS,Running,0,10,0\nb,1000,1024,2,1000,,LS,Running,5,35,5\n"
             "c,1000,1024,1,500,,LS,Running,7,,7\n",
             pods_hdr);
    trace *t = parse(nodes, pods);
    cr_assert(t->has_lifetimes);
    cr_assert_eq(t->pods[2].deleted, -1, "an empty deletion_time is no lifetime");
    replay_options o = {.inflate = 0.5, .seed = 7, .churn = true, .arrivals = 4000};
    replay_result r1, r2;
    as_diag d = {{0}, {0}};
    cr_assert_eq(replay_run(t, "fragment", &o, &r1, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(replay_run(t, "fragment", &o, &r2, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(r1.submitted, 4000);
    cr_assert_eq(r1.placed + r1.failed, 4000);
    cr_assert_eq(r1.placed, r2.placed, "the same seed, the same run");
    cr_assert_float_eq(r1.churn_alloc_mean, r2.churn_alloc_mean, 1e-12);
    cr_assert_leq(r1.churn_live_end, 4, "at most the 4 GPUs' worth of pods stay");
    cr_assert_lt(r1.churn_live_end, r1.placed, "pods left");
    /* offered 0.5 x capacity: about half the GPUs in use, most placed */
    cr_assert(r1.churn_alloc_mean > 0.3 && r1.churn_alloc_mean < 0.65, "alloc %f",
              r1.churn_alloc_mean);
    cr_assert_lt(r1.churn_refused, 0.35, "refused %f", r1.churn_refused);
    /* twice the capacity offered: much is refused, the GPUs stay busy */
    o.inflate = 2.0;
    replay_result r3;
    cr_assert_eq(replay_run(t, "fragment", &o, &r3, &d), AS_OK, "%s", d.msg);
    cr_assert_gt(r3.churn_refused, r1.churn_refused);
    cr_assert_gt(r3.churn_alloc_mean, r1.churn_alloc_mean);
    trace_free(t);

    /* No times at all (the multi-GPU files): exponential lifetimes. */
    snprintf(pods, sizeof pods,
             "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1000,1024,1,1000\nb,1000,1024,0,0\n");
    t = parse(nodes, pods);
    cr_assert(!t->has_lifetimes);
    o.inflate = 0.5;
    cr_assert_eq(replay_run(t, "least-allocated", &o, &r1, &d), AS_OK, "%s", d.msg);
    cr_assert_eq(r1.placed + r1.failed, 4000);
    cr_assert(r1.churn_alloc_mean > 0.3 && r1.churn_alloc_mean < 0.65, "alloc %f",
              r1.churn_alloc_mean);
    trace_free(t);
}

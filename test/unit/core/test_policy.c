/*
 * test_policy.c - the policy YAML loader: shipped policies load, values
 * apply, and every kind of bad input is rejected with the field named.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "agentsched/core/policy.h"
#include "agentsched/core/score.h"
#include "agentsched/model/gpuannot.h"

static model_registry reg;

static void setup(void)
{
    model_registry_init(&reg);
}

static void teardown(void)
{
    model_registry_destroy(&reg);
}

TestSuite(policy, .init = setup, .fini = teardown);

static score_policy *parse_ok(const char *yaml)
{
    score_policy *p = NULL;
    as_diag d = {{0}, {0}};
    as_err err = score_policy_parse(&reg, "test.yaml", yaml, strlen(yaml), &p, &d);
    cr_assert_eq(err, AS_OK, "%s (field %s)", d.msg, d.field);
    cr_assert(p);
    return p;
}

/* Parses yaml expecting failure: checks the error code, that the field is
 * `field`, and that the message names the file and contains `text`. */
static void parse_bad(const char *yaml, as_err want, const char *field, const char *text)
{
    score_policy *p = (score_policy *)0x1;
    as_diag d = {{0}, {0}};
    as_err err = score_policy_parse(&reg, "test.yaml", yaml, strlen(yaml), &p, &d);
    cr_assert_eq(err, want, "%s: got %d (%s)", yaml, err, d.msg);
    cr_assert_null(p);
    cr_assert_str_eq(d.field, field, "%s: field %s (%s)", yaml, d.field, d.msg);
    cr_assert(strstr(d.msg, "test.yaml"), "%s", d.msg);
    if (text)
        cr_assert(strstr(d.msg, text), "%s", d.msg);
}

Test(policy, shipped_policies_load)
{
    const char *dir = AGENTSCHED_SOURCE_DIR "/policy";
    DIR *dd = opendir(dir);
    cr_assert(dd, "%s", dir);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(dd))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".yaml") != 0)
            continue;
        if (strcmp(e->d_name, "sharding.yaml") == 0)
            continue; /* the shard-controller's config (shardctl.h), not a policy */
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        score_policy *p = NULL;
        as_diag d = {{0}, {0}};
        cr_assert_eq(score_policy_load(&reg, path, &p, &d), AS_OK, "%s: %s", path, d.msg);
        /* The file is named after its strategy (default.yaml: fragment). */
        char want[64];
        snprintf(want, sizeof want, "%.*s", (int)(len - 5), e->d_name);
        const char *got = score_strategy_name(score_policy_strategy(p));
        if (strcmp(want, "default") == 0)
            cr_assert_str_eq(got, "fragment");
        else
            cr_assert_str_eq(got, want);
        score_policy_unref(p);
        n++;
    }
    closedir(dd);
    cr_assert_geq(n, 6);
}

Test(policy, empty_file_is_default)
{
    score_policy *p = parse_ok("");
    cr_assert_eq(score_policy_strategy(p), SCORE_FRAGMENT);
    cr_assert_eq(score_policy_extender_shortlist(p), 0);
    score_policy_unref(p);
    p = parse_ok("# only a comment\n");
    cr_assert_eq(score_policy_strategy(p), SCORE_FRAGMENT);
    score_policy_unref(p);
}

Test(policy, values_apply)
{
    score_policy *p = parse_ok("apiVersion: agentsched.io/v1alpha1\n"
                               "kind: SchedulingPolicy\n"
                               "strategy: best-fit\n"
                               "resources: {cpu: 2, memory: 1, example.com/foo: 0.5}\n"
                               "bestFit: {units: {cpu: 500m, memory: 1Gi}}\n"
                               "standalone: {candidates: 5, minScore: 12.5}\n"
                               "softShardBonus: 20\n"
                               "extender: {shortlist: 8}\n"
                               "gpu: {resourceName: example.com/gpu, shareResourceName: "
                               "example.com/gpu-milli, modelLabel: gpu.example.com/model}\n");
    cr_assert_eq(score_policy_strategy(p), SCORE_BEST_FIT);
    cr_assert_eq(score_policy_candidates(p), 5);
    cr_assert_float_eq(score_policy_min_score(p), 12.5, 1e-9);
    cr_assert_float_eq(score_policy_soft_shard_bonus(p), 20, 1e-9);
    cr_assert_eq(score_policy_extender_shortlist(p), 8);
    const char *g, *s, *l;
    score_policy_gpu_names(p, &g, &s, &l);
    cr_assert_str_eq(g, "example.com/gpu");
    cr_assert_str_eq(s, "example.com/gpu-milli");
    cr_assert_str_eq(l, "gpu.example.com/model");
    /* Applying the names to a registry without GPU nodes works... */
    cr_assert_eq(score_policy_apply_gpu_names(p, &reg), AS_OK);
    cr_assert_str_eq(reg.gpu_name, "example.com/gpu");
    score_policy_unref(p);
}

Test(policy, loading_does_not_touch_the_registry)
{
    score_policy *p = parse_ok("gpu: {resourceName: example.com/gpu}\n");
    cr_assert_str_eq(reg.gpu_name, "nvidia.com/gpu");
    score_policy_unref(p);
}

Test(policy, gpu_names_fixed_once_gpus_are_known)
{
    int idx;
    cr_assert_eq(model_registry_intern(&reg, "nvidia.com/gpu", 14, &idx), AS_OK);
    cr_assert_geq(reg.gpu_res, 0);
    parse_bad("gpu: {resourceName: example.com/gpu}\n", AS_EINVAL, "gpu", "restart");
    score_policy *p = parse_ok("gpu: {resourceName: nvidia.com/gpu}\n");
    score_policy_unref(p);
}

Test(policy, unknown_keys)
{
    parse_bad("strategy: fragment\nstrategi: fgd\n", AS_EINVAL, "strategi", "unknown field");
    parse_bad("fragment: {strand: 1, strnad: 2}\n", AS_EINVAL, "fragment.strnad", "unknown field");
    parse_bad("extender: {max: 10}\n", AS_EINVAL, "extender.max", "maxScore");
    parse_bad("shapes: {given: [{cpu: \"1\", gpus: 1}]}\n", AS_EINVAL, "shapes.given[0].gpus",
              "unknown field");
    parse_bad("agentPods: {names: [a]}\n", AS_EINVAL, "agentPods.names", "schedulerNames");
}

Test(policy, bad_strategy)
{
    parse_bad("strategy: spread\n", AS_EINVAL, "strategy", "least-allocated");
    parse_bad("strategy: 3\n", AS_EINVAL, "strategy", "unknown strategy");
}

Test(policy, negative_or_bad_weights)
{
    parse_bad("resources: {cpu: -1}\n", AS_ERANGE, "resources[cpu]", "out of range");
    parse_bad("resources: {cpu: 0, memory: 0}\n", AS_EINVAL, "resources", "greater than zero");
    parse_bad("resources: {}\n", AS_EINVAL, "resources", "at least one");
    parse_bad("resources: [cpu]\n", AS_EINVAL, "resources", "mapping");
    parse_bad("bestFit: {units: {gpu: 1}}\n", AS_EINVAL, "bestFit.units[gpu]", "no weight");
    parse_bad("bestFit: {units: {cpu: \"-2\"}}\n", AS_ERANGE, "bestFit.units[cpu]",
              "greater than zero");
    parse_bad("bestFit: {units: {cpu: 2x}}\n", AS_EINVAL, "bestFit.units[cpu]", "quantity");
    parse_bad("bestFit: {measure: leftover}\n", AS_EINVAL, "bestFit.measure", "units or fraction");
}

Test(policy, wrong_types)
{
    parse_bad("resources: {cpu: \"1\"}\n", AS_EINVAL, "resources[cpu]", "number");
    parse_bad("softShardBonus: high\n", AS_EINVAL, "softShardBonus", "number");
    parse_bad("softShardBonus: 101\n", AS_ERANGE, "softShardBonus", "out of range");
    parse_bad("standalone: {candidates: 2.5}\n", AS_EINVAL, "standalone.candidates", "integer");
    parse_bad("standalone: {candidates: 17}\n", AS_ERANGE, "standalone.candidates", "out of range");
    parse_bad("shapes: {learn: yes-please}\n", AS_EINVAL, "shapes.learn", "true or false");
    parse_bad("agentPods: {schedulerNames: agent}\n", AS_EINVAL, "agentPods.schedulerNames",
              "list");
    parse_bad("agentPods: {schedulerNames: [1]}\n", AS_EINVAL, "agentPods.schedulerNames[0]",
              "scheduler name");
    parse_bad("agentPods: {labels: {a: 1}}\n", AS_EINVAL, "agentPods.labels[a]", "strings");
    parse_bad("gpu: {resourceName: 5}\n", AS_EINVAL, "gpu.resourceName", "string");
    parse_bad("extender: {rounding: up}\n", AS_EINVAL, "extender.rounding", "nearest");
    parse_bad("extender: {scoreMin: 50, scoreMax: 50}\n", AS_EINVAL, "extender.scoreMax",
              "greater");
    parse_bad("extender: {shortlist: 101}\n", AS_ERANGE, "extender.shortlist", "0 to 100");
    parse_bad("extender: {shortlist: -1}\n", AS_ERANGE, "extender.shortlist", "out of range");
    parse_bad("extender: {shortlist: all}\n", AS_EINVAL, "extender.shortlist", "integer");
    parse_bad("fragment: {spread: -0.1}\n", AS_ERANGE, "fragment.spread", "out of range");
    parse_bad("fragment: {strandMix: 1.5}\n", AS_ERANGE, "fragment.strandMix", "out of range");
    parse_bad("fragment: {spreadGpu: -1}\n", AS_ERANGE, "fragment.spreadGpu", "out of range");
    parse_bad("fragment: {spreadCpu: -1}\n", AS_ERANGE, "fragment.spreadCpu", "out of range");
    parse_bad("fragment: {reserve: -1}\n", AS_ERANGE, "fragment.reserve", "out of range");
    parse_bad("fragment: {reserve: all}\n", AS_EINVAL, "fragment.reserve", "number");
    parse_bad("fragment: {keepFree: 1.5}\n", AS_ERANGE, "fragment.keepFree", "out of range");
    parse_bad("fragment: {keepFreeFragmented: 2}\n", AS_ERANGE, "fragment.keepFreeFragmented",
              "out of range");
    parse_bad("fragment: {fillable: -0.1}\n", AS_ERANGE, "fragment.fillable", "out of range");
    parse_bad("fragment: {keepFree: few}\n", AS_EINVAL, "fragment.keepFree", "number");
    parse_bad("fragment: {spreadSurplus: 1}\n", AS_EINVAL, "fragment.spreadSurplus",
              "true or false");
    parse_bad("fragment: {cpuPerGpu: 0}\n", AS_ERANGE, "fragment.cpuPerGpu", "greater than zero");
    parse_bad("apiVersion: v1\n", AS_EINVAL, "apiVersion", "agentsched.io/v1alpha1");
    parse_bad("kind: Pod\n", AS_EINVAL, "kind", "SchedulingPolicy");
    parse_bad("- strategy: fgd\n", AS_EINVAL, "", "mapping");
}

Test(policy, shapes_validation)
{
    parse_bad("shapes: {learn: false}\n", AS_EINVAL, "shapes.given", "at least one shape");
    parse_bad("shapes: {given: [{gpu: 2, gpuMilli: 500}]}\n", AS_EINVAL, "shapes.given[0].gpuMilli",
              "one GPU");
    parse_bad("shapes: {given: [{gpu: 17}]}\n", AS_ERANGE, "shapes.given[0].gpu", "out of range");
    parse_bad("shapes: {coverage: 0}\n", AS_ERANGE, "shapes.coverage", "greater than 0");
    score_policy *p = parse_ok("strategy: fgd\nshapes: {learn: false, given: [{cpu: \"2\", "
                               "memory: 4Gi, gpu: 1, gpuMilli: 250, popularity: 3}]}\n");
    score_policy_unref(p);
}

Test(policy, syntax_error_names_file)
{
    score_policy *p = NULL;
    as_diag d = {{0}, {0}};
    const char *bad = "strategy: [fgd\n";
    cr_assert_neq(score_policy_parse(&reg, "broken.yaml", bad, strlen(bad), &p, &d), AS_OK);
    cr_assert_null(p);
    cr_assert(strstr(d.msg, "broken.yaml"), "%s", d.msg);
}

Test(policy, missing_file)
{
    score_policy *p = NULL;
    as_diag d = {{0}, {0}};
    cr_assert_eq(score_policy_load(&reg, "/nonexistent/policy.yaml", &p, &d), AS_EIO);
    cr_assert_null(p);
    cr_assert(strstr(d.msg, "/nonexistent/policy.yaml"), "%s", d.msg);
}

Test(policy, gpu_annotations)
{
    score_policy *p = parse_ok("strategy: fragment\n");
    cr_assert_eq(score_policy_gpu_annotations(p), GPUANNOT_AGENTSCHED, "default: agentsched's");
    score_policy_unref(p);
    p = parse_ok("gpu: {annotations: [agentsched, volcano]}\n");
    cr_assert_eq(score_policy_gpu_annotations(p), GPUANNOT_AGENTSCHED | GPUANNOT_VOLCANO);
    score_policy_unref(p);
    p = parse_ok("gpu: {annotations: [volcano]}\n");
    cr_assert_eq(score_policy_gpu_annotations(p), GPUANNOT_VOLCANO);
    score_policy_unref(p);
    p = parse_ok("gpu: {annotations: []}\n");
    cr_assert_eq(score_policy_gpu_annotations(p), 0, "[] writes nothing");
    score_policy_unref(p);
    parse_bad("gpu: {annotations: agentsched}\n", AS_EINVAL, "gpu.annotations", "list");
    parse_bad("gpu: {annotations: [aliyun]}\n", AS_EINVAL, "gpu.annotations[0]",
              "agentsched or volcano");
    parse_bad("gpu: {annotations: [volcano, 3]}\n", AS_EINVAL, "gpu.annotations[1]", "unknown");
    parse_bad("gpu: {annotations: [volcano, volcano]}\n", AS_EINVAL, "gpu.annotations[1]", "twice");
}

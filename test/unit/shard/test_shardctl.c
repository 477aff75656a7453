/* test_shardctl.c - the sharding controller: config parsing and
 * validation, hot reload keeping the old config, the policies, maxNodes per
 * batch of 50, config order, unfit nodes, Volcano's rewrite rule,
 * incremental == from-scratch (the lease it leads by: test_k8s_lease.c). */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agentsched/shard/shardctl.h"
#include "cli_fixtures.h"
#include "core_fixtures.h"

static shardcfg_config *parse_ok(const char *yaml)
{
    shardcfg_config *c = NULL;
    as_diag d = {0};
    as_err err = shardcfg_parse(yaml, strlen(yaml), "test.yaml", &c, &d);
    cr_assert_eq(err, AS_OK, "%s (field %s)", d.msg, d.field);
    return c;
}

static void parse_bad(const char *yaml, const char *field, const char *text)
{
    shardcfg_config *c = NULL;
    as_diag d = {0};
    as_err err = shardcfg_parse(yaml, strlen(yaml), "test.yaml", &c, &d);
    cr_assert_neq(err, AS_OK, "accepted: %s", yaml);
    cr_assert_null(c);
    if (field)
        cr_assert_str_eq(d.field, field, "%s: field %s (%s)", yaml, d.field, d.msg);
    cr_assert(strstr(d.msg, "test.yaml"), "%s", d.msg);
    if (text)
        cr_assert(strstr(d.msg, text), "%s", d.msg);
}

/* ---- config ----------------------------------------------------------- */

Test(shardcfg_config, shipped_sample_loads)
{
    shardcfg_config *c = NULL;
    as_diag d = {0};
    cr_assert_eq(shardcfg_load(AGENTSCHED_SOURCE_DIR "/policy/sharding.yaml", &c, &d), AS_OK, "%s",
                 d.msg);
    cr_assert_eq(c->n, 2);
    cr_assert_str_eq(c->sched[0].name, "agentsched");
    cr_assert_str_eq(c->sched[0].type, "agent");
    cr_assert_eq(c->sched[0].npol, 3);
    cr_assert_eq(c->sched[0].pol[0].kind, SHARDCFG_POL_ALLOCATION_RATE);
    cr_assert_float_eq(c->sched[0].pol[0].min_util, 0.7, 1e-9);
    cr_assert_eq(c->sched[0].pol[1].kind, SHARDCFG_POL_WARMUP);
    cr_assert_float_eq(c->sched[0].pol[1].weight, 5, 1e-9);
    cr_assert_eq(c->sched[0].max_nodes, 100);
    cr_assert_eq(c->sched[0].min_nodes, 1);
    cr_assert_eq(c->sync_period_ms, 60000);
    cr_assert(c->node_event_trigger);
    shardcfg_free(c);
}

Test(shardcfg_config, unknown_fields_are_listed_not_rejected)
{
    /* Volcano's controller ignores them; ours names them for a warning. */
    shardcfg_config *c = parse_ok("foo: 1\n"
                                  "schedulerConfigs:\n"
                                  "- name: a\n"
                                  "  colour: red\n"
                                  "  policies:\n"
                                  "  - name: node-limit\n"
                                  "    arguments: {maxNode: 3}\n");
    cr_assert_str_eq(
        c->unknown,
        "foo, schedulerConfigs[0].colour, schedulerConfigs[0].policies[0].arguments.maxNode");
    cr_assert_eq(c->sched[0].max_nodes, 0, "the misspelt cap is not applied");
    shardcfg_free(c);
    c = parse_ok("schedulerConfigs: [{name: a}]\n");
    cr_assert_str_eq(c->unknown, "");
    shardcfg_free(c);
}

Test(shardcfg_config, volcano_configmap_as_a_whole_or_its_key)
{
    /* A ConfigMap in Volcano's shape, and the data excerpt. */
    shardcfg_config *c = NULL;
    as_diag d = {0};
    cr_assert_eq(
        shardcfg_load(AGENTSCHED_SOURCE_DIR "/test/unit/shard/data/volcano-configmap.yaml", &c, &d),
        AS_OK, "%s", d.msg);
    cr_assert_eq(c->n, 2);
    cr_assert_str_eq(c->sched[0].name, "agentsched");
    cr_assert_str_eq(c->sched[1].name, "agent-scheduler");
    cr_assert_eq(c->sched[1].max_nodes, 100);
    shardcfg_free(c);
    c = parse_ok("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n"
                 "  sharding.yaml: |\n    schedulerConfigs: [{name: a}, {name: b}]\n"
                 "    shardSyncPeriod: 30s\n");
    cr_assert_eq(c->n, 2);
    cr_assert_eq(c->sync_period_ms, 30000);
    shardcfg_free(c);
    c = parse_ok("sharding.yaml: |\n  schedulerConfigs: [{name: only}]\n");
    cr_assert_str_eq(c->sched[0].name, "only");
    shardcfg_free(c);
    parse_bad("apiVersion: v1\nkind: ConfigMap\ndata: {other.yaml: x}\n", "data.sharding.yaml",
              "without data.sharding.yaml");
}

/* Policies mixed with the flat fields, and scheduler-level arguments, as
 * Volcano fills them in: one row per scheduler config, the policy chain
 * expected (kind:min-max or kind:cap) and what is listed as ignored. */
Test(shardcfg_config, flat_fields_as_volcano_fills_them_in)
{
    static const struct {
        const char *sched, *chain, *unknown;
    } rows[] = {
        {"{name: a, maxNodes: 3, policies: [{name: warmup}]}", "warmup node-limit:3", ""},
        {"{name: a, maxNodes: 3, policies: [{name: node-limit, arguments: {maxNodes: 5}}]}",
         "node-limit:5", ""},
        {"{name: a, cpuUtilizationMin: 0.5, cpuUtilizationMax: 0.9, preferWarmupNodes: true, "
         "policies: [{name: warmup}]}",
         "warmup",
         "schedulerConfigs[0].cpuUtilizationMin, schedulerConfigs[0].cpuUtilizationMax, "
         "schedulerConfigs[0].preferWarmupNodes"},
        {"{name: a, arguments: {minCPUUtil: 0.2, maxCPUUtil: 0.4}, cpuUtilizationMin: 0.9, "
         "cpuUtilizationMax: 1.0}",
         "allocation-rate:0.20-0.40", ""},
        /* Neither policies nor limits: Volcano's default band is [0, 0]
         * (idle nodes only); an omitted maxCPUUtil is 0 too. */
        {"{name: a}", "allocation-rate:0.00-0.00", ""},
        {"{name: a, policies: []}", "allocation-rate:0.00-0.00", ""},
        {"{name: a, maxNodes: 3}", "allocation-rate:0.00-0.00 node-limit:3", ""},
        {"{name: a, arguments: {minCPUUtil: 0.0}}", "allocation-rate:0.00-0.00", ""},
        {"{name: a, policies: [{name: allocation-rate}]}", "allocation-rate:0.00-0.00", ""},
        {"{name: a, cpuUtilizationMin: 0.1, cpuUtilizationMax: 0.3, preferWarmupNodes: true, "
         "minNodes: 1, maxNodes: 7}",
         "allocation-rate:0.10-0.30 warmup node-limit:7", ""},
        {"{name: a, cpuUtilizationMax: 0.5}", "allocation-rate:0.00-0.50", ""},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char yaml[400], chain[200] = "";
        snprintf(yaml, sizeof yaml, "schedulerConfigs: [%s]\n", rows[i].sched);
        shardcfg_config *c = parse_ok(yaml);
        for (size_t j = 0; j < c->sched[0].npol; j++) {
            const shardcfg_policy *p = &c->sched[0].pol[j];
            size_t used = strlen(chain);
            if (p->kind == SHARDCFG_POL_ALLOCATION_RATE)
                snprintf(chain + used, sizeof chain - used, "%sallocation-rate:%.2f-%.2f",
                         used ? " " : "", p->min_util, p->max_util);
            else if (p->kind == SHARDCFG_POL_WARMUP)
                snprintf(chain + used, sizeof chain - used, "%swarmup", used ? " " : "");
            else
                snprintf(chain + used, sizeof chain - used, "%snode-limit:%ld", used ? " " : "",
                         p->max_nodes);
        }
        cr_assert_str_eq(chain, rows[i].chain, "row %zu: %s", i, rows[i].sched);
        cr_assert_str_eq(c->unknown, rows[i].unknown, "row %zu", i);
        shardcfg_free(c);
    }
}

Test(shardcfg_config, weight_zero_means_one)
{
    /* Volcano reads an omitted weight as 0 and makes it 1; so does an
     * explicit 0. */
    static const struct {
        const char *weight;
        double want;
    } rows[] = {{"0", 1}, {"1", 1}, {"3", 3}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        char yaml[200];
        snprintf(yaml, sizeof yaml,
                 "schedulerConfigs: [{name: a, policies: [{name: warmup, weight: %s}]}]\n",
                 rows[i].weight);
        shardcfg_config *c = parse_ok(yaml);
        cr_assert_float_eq(c->sched[0].pol[0].weight, rows[i].want, 1e-9, "weight %s",
                           rows[i].weight);
        shardcfg_free(c);
    }
}

Test(shardcfg_config, defaults_and_warmup_label)
{
    shardcfg_config *c = parse_ok("schedulerConfigs:\n"
                                  "- name: a\n"
                                  "  policies:\n"
                                  "  - name: warmup\n"
                                  "  - name: allocation-rate\n"
                                  "shardSyncPeriod: 1m30s\n"
                                  "enableNodeEventTrigger: false\n");
    cr_assert_str_eq(c->sched[0].pol[0].label, "node.volcano.sh/warmup");
    cr_assert_str_eq(c->sched[0].pol[0].label_value, "true");
    cr_assert_float_eq(c->sched[0].pol[0].weight, 1, 1e-9);
    cr_assert_float_eq(c->sched[0].pol[1].max_util, 0, 1e-9, "as Volcano: omitted is 0");
    cr_assert_eq(c->sched[0].max_nodes, 0); /* no node-limit: no cap */
    cr_assert_eq(c->sync_period_ms, 90000);
    cr_assert_not(c->node_event_trigger);
    shardcfg_free(c);
}

Test(shardcfg_config, deprecated_flat_fields_become_policies)
{
    shardcfg_config *c = parse_ok("{\"schedulerConfigs\":[{\"name\":\"agent-scheduler\","
                                  "\"type\":\"agent\",\"cpuUtilizationMin\":0.7,"
                                  "\"cpuUtilizationMax\":1.0,\"preferWarmupNodes\":true,"
                                  "\"minNodes\":1,\"maxNodes\":100}],"
                                  "\"shardSyncPeriod\":\"60s\"}");
    cr_assert_eq(c->sched[0].npol, 3);
    cr_assert_float_eq(c->sched[0].pol[0].min_util, 0.7, 1e-9);
    cr_assert_eq(c->sched[0].pol[1].kind, SHARDCFG_POL_WARMUP);
    cr_assert_eq(c->sched[0].max_nodes, 100);
    shardcfg_free(c);
}

Test(shardcfg_config, validation_errors_name_the_field)
{
    parse_bad("schedulerConfigs: []\n", "schedulerConfigs", "at least one");

    parse_bad("schedulerConfigs: [{name: A_b}]\n", "schedulerConfigs[0].name", "DNS");
    parse_bad("schedulerConfigs: [{name: a}, {name: a}]\n", "schedulerConfigs[1]", "twice");
    parse_bad("schedulerConfigs: [{name: a, policies: [{name: binpack}]}]\n",
              "schedulerConfigs[0].policies[0].name", "unknown policy");
    parse_bad("schedulerConfigs: [{name: a, policies: [{name: allocation-rate, arguments: "
              "{minCPUUtil: 0.8, maxCPUUtil: 0.2}}]}]\n",
              "schedulerConfigs[0].policies[0].arguments", "above maxCPUUtil");
    parse_bad("schedulerConfigs: [{name: a, policies: [{name: allocation-rate, arguments: "
              "{maxCPUUtil: 1.5}}]}]\n",
              "schedulerConfigs[0].policies[0].arguments.maxCPUUtil", "outside");
    parse_bad("schedulerConfigs: [{name: a, policies: [{name: node-limit, arguments: "
              "{minNodes: 5, maxNodes: 2}}]}]\n",
              "schedulerConfigs[0].policies[0].arguments", "below minNodes");
    /* What Volcano's config parsing or its policies' Initialize rejects
     * (omitted limits being 0), whether or not policies are given. */
    parse_bad("schedulerConfigs: [{name: a, policies: [{name: allocation-rate, arguments: "
              "{minCPUUtil: 0.5}}]}]\n",
              "schedulerConfigs[0].policies[0].arguments", "omitted, it is 0");
    parse_bad("schedulerConfigs: [{name: a, arguments: {minCPUUtil: 0.5}}]\n",
              "schedulerConfigs[0].arguments", "omitted, it is 0");
    parse_bad("schedulerConfigs: [{name: a, cpuUtilizationMin: 0.3}]\n", "schedulerConfigs[0]",
              "cpuUtilizationMin 0.3 is above cpuUtilizationMax 0");
    parse_bad("schedulerConfigs: [{name: a, cpuUtilizationMin: 0.3, policies: [{name: warmup}]}]\n",
              "schedulerConfigs[0]", "Volcano rejects");
    parse_bad("schedulerConfigs: [{name: a, minNodes: 2}]\n", "schedulerConfigs[0]",
              "maxNodes 0 is below minNodes 2");
    parse_bad("schedulerConfigs: [{name: a, minNodes: 2, policies: [{name: warmup}]}]\n",
              "schedulerConfigs[0]", "maxNodes 0 is below minNodes 2");
    parse_bad("schedulerConfigs: [{name: a, policies: [{name: warmup, arguments: {maxNodes: "
              "3}}]}]\n",
              "schedulerConfigs[0].policies[0].arguments", "only supported by the node-limit");
    parse_bad("schedulerConfigs: [{name: a, policies: [{name: warmup, weight: 0.5}]}]\n",
              "schedulerConfigs[0].policies[0].weight", "integer");
    parse_bad("schedulerConfigs: [{name: a, policies: [{name: warmup, weight: -1}]}]\n",
              "schedulerConfigs[0].policies[0].weight", "outside");
    parse_bad("schedulerConfigs: [{name: a, policies: [{name: warmup}, {name: warmup}]}]\n",
              "schedulerConfigs[0].policies[1]", "twice");
    parse_bad("schedulerConfigs: [{name: a}]\nshardSyncPeriod: soon\n", "shardSyncPeriod",
              "duration");
    parse_bad("schedulerConfigs: [{name: a}]\nshardSyncPeriod: 10ms\n", "shardSyncPeriod", NULL);
    parse_bad("- just\n- a list\n", "", "mapping");
    parse_bad("schedulerConfigs: [{name: a}\n", NULL, NULL); /* syntax */
}

Test(shardcfg_config, duration_parse)
{
    int64_t ms = 0;
    cr_assert_eq(shardcfg_duration_parse("60s", &ms), AS_OK);
    cr_assert_eq(ms, 60000);
    cr_assert_eq(shardcfg_duration_parse("1h2m3s", &ms), AS_OK);
    cr_assert_eq(ms, 3723000);
    cr_assert_eq(shardcfg_duration_parse("250ms", &ms), AS_OK);
    cr_assert_eq(ms, 250);
    cr_assert_eq(shardcfg_duration_parse("45", &ms), AS_OK);
    cr_assert_eq(ms, 45000);
    cr_assert_eq(shardcfg_duration_parse("", &ms), AS_EINVAL);
    cr_assert_eq(shardcfg_duration_parse("5x", &ms), AS_EINVAL);
    cr_assert_eq(shardcfg_duration_parse("-5s", &ms), AS_EINVAL);
    cr_assert_eq(shardcfg_duration_parse("s", &ms), AS_EINVAL);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

Test(shardcfg_config, bad_update_is_rejected_and_the_old_config_kept)
{
    char path[] = "/tmp/shardctl-test-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    write_file(path, "schedulerConfigs: [{name: a}]\n");
    shardcfg_file_stamp stamp = {0};
    shardcfg_config *cur = NULL, *next = NULL;
    as_diag d = {0};
    cr_assert_eq(shardcfg_reload(path, &stamp, &cur, &d), AS_OK);
    cr_assert_not_null(cur);
    /* unchanged file: nothing */
    cr_assert_eq(shardcfg_reload(path, &stamp, &next, &d), AS_OK);
    cr_assert_null(next);
    /* a bad edit: error, no new config; the caller keeps `cur` */
    write_file(path, "schedulerConfigs: [{name: a, policies: [{name: nope}]}]\n# longer\n");
    cr_assert_eq(shardcfg_reload(path, &stamp, &next, &d), AS_EINVAL);
    cr_assert_null(next);
    cr_assert(strstr(d.msg, "unknown policy"), "%s", d.msg);
    cr_assert_str_eq(cur->sched[0].name, "a");
    /* the same bad content is not reported again */
    cr_assert_eq(shardcfg_reload(path, &stamp, &next, &d), AS_OK);
    cr_assert_null(next);
    /* a good edit replaces it */
    write_file(path, "schedulerConfigs: [{name: b}, {name: c}]\n");
    cr_assert_eq(shardcfg_reload(path, &stamp, &next, &d), AS_OK);
    cr_assert_not_null(next);
    cr_assert_eq(next->n, 2);
    shardcfg_free(cur);
    shardcfg_free(next);
    unlink(path);
    cr_assert_eq(shardcfg_reload(path, &stamp, &next, &d), AS_EIO);
}

/* ---- engine ----------------------------------------------------------- */

static model_labels warm_labels;
static model_kv warm_kv = {"node.volcano.sh/warmup", "true"};

static shardctl_node_info ni(const char *name, int64_t req, int64_t cap, bool warm)
{
    warm_labels.items = &warm_kv;
    warm_labels.n = 1;
    return (shardctl_node_info){name, req, cap, warm ? &warm_labels : NULL, 0};
}

static const char *band_cfg = "schedulerConfigs:\n"
                              "- name: agent\n"
                              "  policies:\n"
                              "  - {name: allocation-rate, arguments: {minCPUUtil: 0.7, "
                              "maxCPUUtil: 1.0}}\n"
                              "  - {name: warmup, weight: 5}\n"
                              "- name: batch\n"
                              "  policies:\n"
                              "  - {name: allocation-rate, arguments: {minCPUUtil: 0.0, "
                              "maxCPUUtil: 0.5}}\n";

Test(shardctl_engine, allocation_rate_band_and_unfit_nodes)
{
    shardcfg_config *c = parse_ok(band_cfg);
    shardctl_engine *e = NULL;
    cr_assert_eq(shardctl_engine_new(c, &e), AS_OK);
    shardctl_node_info v[] = {
        ni("busy", 800, 1000, false), ni("idle", 100, 1000, false),
        ni("mid", 600, 1000, false), /* in neither band */
        ni("noalloc", 0, 0, false),  /* no capacity: utilisation 0, as in Volcano */
    };
    cr_assert_eq(shardctl_engine_resync(e, v, 4, 1), AS_OK);
    cr_assert_eq(shardctl_engine_owner(e, "busy"), 0);
    cr_assert_eq(shardctl_engine_owner(e, "idle"), 1);
    cr_assert_eq(shardctl_engine_owner(e, "mid"), -1);
    cr_assert_eq(shardctl_engine_owner(e, "noalloc"), 1);
    shardctl_engine_stats st;
    shardctl_engine_get_stats(e, &st);
    cr_assert_eq(st.unfit, 1);
    cr_assert_eq(st.capped, 0);
    /* utilisation crosses the band: the node moves on a single event */
    shardctl_node_info up = ni("idle", 900, 1000, false);
    cr_assert_eq(shardctl_engine_set_node(e, &up, 2), AS_OK);
    cr_assert_eq(shardctl_engine_owner(e, "idle"), 0);
    shardctl_node_info fit = ni("mid", 400, 1000, false);
    cr_assert_eq(shardctl_engine_set_node(e, &fit, 2), AS_OK);
    shardctl_engine_get_stats(e, &st);
    cr_assert_eq(st.unfit, 0);
    cr_assert_geq(st.fast_updates, 2, "unsaturated events reassign one node");
    cr_assert_eq(st.passes, 1, "only the resync ran a selection pass");
    shardctl_engine_free(e);
    shardcfg_free(c);
}

/* Volcano's example bands, [0.7, 1] and [0, 0.69]: utilisation and limits
 * in hundredths, so a node between 0.69 and 0.7 still has a shard. */
static const char *volcano_example_cfg = "schedulerConfigs:\n"
                                         "- {name: agent-scheduler, type: agent, "
                                         "cpuUtilizationMin: 0.7, cpuUtilizationMax: 1.0}\n"
                                         "- {name: volcano, type: volcano, "
                                         "cpuUtilizationMin: 0.0, cpuUtilizationMax: 0.69}\n";

Test(shardctl_engine, utilisation_rounded_to_hundredths_as_volcano)
{
    shardctl_node_info a = ni("a", 11150, 16000, false); /* 0.696875 -> 0.70 */
    shardctl_node_info b = ni("b", 11100, 16000, false); /* 0.69375 -> 0.69 */
    shardctl_node_info over = ni("over", 20000, 16000, false);
    shardctl_node_info none = ni("none", 100, 0, false);
    cr_assert_float_eq(shardctl_node_util(&a), 0.70, 1e-9);
    cr_assert_float_eq(shardctl_node_util(&b), 0.69, 1e-9);
    cr_assert_float_eq(shardctl_node_util(&over), 1.0, 1e-9, "capped at 1");
    cr_assert_float_eq(shardctl_node_util(&none), 0, 1e-9, "no capacity: 0, as in Volcano");
    shardcfg_config *c = parse_ok(volcano_example_cfg);
    shardctl_engine *e = NULL;
    cr_assert_eq(shardctl_engine_new(c, &e), AS_OK);
    shardctl_node_info v[] = {a, b, over, none};
    cr_assert_eq(shardctl_engine_resync(e, v, 4, 1), AS_OK);
    cr_assert_eq(shardctl_engine_owner(e, "a"), 0);
    cr_assert_eq(shardctl_engine_owner(e, "b"), 1);
    cr_assert_eq(shardctl_engine_owner(e, "over"), 0, "over capacity counts as full");
    cr_assert_eq(shardctl_engine_owner(e, "none"), 1, "utilisation 0: the idle band");
    shardctl_engine_stats st;
    shardctl_engine_get_stats(e, &st);
    cr_assert_eq(st.unfit, 0);
    shardctl_engine_free(e);
    shardcfg_free(c);
}

static const char *limit_cfg = "schedulerConfigs:\n"
                               "- name: agent\n"
                               "  policies:\n"
                               "  - {name: allocation-rate, arguments: {minCPUUtil: 0.5, "
                               "maxCPUUtil: 1.0}}\n"
                               "  - {name: warmup, weight: 5}\n"
                               "  - {name: node-limit, arguments: {minNodes: 1, maxNodes: 20}}\n"
                               "- name: batch\n"
                               "  policies:\n"
                               "  - {name: node-limit, arguments: {minNodes: 200}}\n";

Test(shardctl_engine, max_nodes_caps_each_batch_of_50_and_order_matters)
{
    shardcfg_config *c = parse_ok(limit_cfg);
    shardctl_engine *e = NULL;
    cr_assert_eq(shardctl_engine_new(c, &e), AS_OK);
    /* 150 busy nodes: batches of 50 by name (n000-n049, n050-n099,
     * n100-n149), each 0.50 to 0.99 busy, every tenth warm. agent (first)
     * takes at most 20 per batch: the 5 warm ones, then the 15 busiest
     * (offsets 49 down to 34 but 40, which is warm). */
    shardctl_node_info v[150];
    char names[150][16];
    for (int i = 0; i < 150; i++) {
        snprintf(names[i], sizeof names[i], "n%03d", i);
        v[i] = ni(names[i], 500 + (i % 50) * 10, 1000, i % 10 == 0);
    }
    cr_assert_eq(shardctl_engine_resync(e, v, 150, 1), AS_OK);
    for (int i = 0; i < 150; i++) {
        int off = i % 50;
        int want = off % 10 == 0 || off >= 34 ? 0 : 1;
        cr_assert_eq(shardctl_engine_owner(e, names[i]), want, "%s", names[i]);
    }
    shardctl_engine_stats st;
    shardctl_engine_get_stats(e, &st);
    cr_assert_eq(st.members[0], 60);
    cr_assert_eq(st.members[1], 90);
    cr_assert(st.below_min[1], "batch wants 200: reported, nothing more");
    cr_assert_not(st.below_min[0]);
    cr_assert_eq(st.unfit + st.capped, 0);
    /* One node's change reselects its batch only, as a resync would. */
    shardctl_node_info idle = ni("n049", 500, 1000, false);
    cr_assert_eq(shardctl_engine_set_node(e, &idle, 2), AS_OK);
    cr_assert_eq(shardctl_engine_owner(e, "n049"), 1);
    cr_assert_eq(shardctl_engine_owner(e, "n033"), 0, "the next busiest of batch 0 moves up");
    cr_assert_eq(shardctl_engine_owner(e, "n083"), 1, "batch 1 is untouched");
    shardctl_engine_free(e);
    shardcfg_free(c);
}

/* Batches as Volcano's controller cuts them (of 50, here in name order):
 * node-limit caps each, and minNodes only reports. One row per case:
 * the node count, maxNodes, and how many nodes the shard desires. */
Test(shardctl_engine, batches_of_50_as_volcano)
{
    static const struct {
        int nodes, max_nodes, want;
    } rows[] = {
        {50, 30, 30},    /* one batch: the cap holds */
        {51, 30, 31},    /* 30 of the first 50, the 51st alone */
        {120, 100, 120}, /* no batch exceeds 50 */
        {120, 40, 100},  /* 40 + 40 + 20 */
        {120, 0, 120},   /* no cap: batches change nothing */
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        char cfg[300];
        snprintf(cfg, sizeof cfg,
                 "schedulerConfigs:\n"
                 "- name: a\n"
                 "  policies:\n"
                 "  - {name: allocation-rate, arguments: {minCPUUtil: 0.5, maxCPUUtil: 1.0}}\n"
                 "  - {name: node-limit, arguments: {minNodes: 1, maxNodes: %d}}\n",
                 rows[r].max_nodes);
        shardcfg_config *c = parse_ok(cfg);
        shardctl_engine *e = NULL;
        cr_assert_eq(shardctl_engine_new(c, &e), AS_OK);
        shardctl_node_info v[120];
        char names[120][16];
        for (int i = 0; i < rows[r].nodes; i++) {
            snprintf(names[i], sizeof names[i], "n%03d", i);
            v[i] = ni(names[i], 900, 1000, false);
        }
        cr_assert_eq(shardctl_engine_resync(e, v, (size_t)rows[r].nodes, 1), AS_OK);
        shardctl_engine_stats st;
        shardctl_engine_get_stats(e, &st);
        cr_assert_eq((int)st.members[0], rows[r].want, "row %zu: %zu desired", r, st.members[0]);
        /* equal scores: each batch's first ones by name */
        if (rows[r].max_nodes == 40)
            cr_assert(shardctl_engine_owner(e, "n039") == 0 &&
                          shardctl_engine_owner(e, "n040") < 0 &&
                          shardctl_engine_owner(e, "n050") == 0,
                      "row %zu", r);
        shardctl_engine_free(e);
        shardcfg_free(c);
    }
}

/* Volcano's rewrite rule: the count changed, or at least max(1, n/10)
 * (integer division) of the new names are not in the object. */
Test(shardctl_engine, rewrite_threshold_as_volcano)
{
    static const struct {
        int cur, next, swapped;
        bool write;
    } rows[] = {
        {0, 0, 0, false},      {0, 1, 0, true},      {5, 4, 0, true},     {5, 5, 0, false},
        {5, 5, 1, true},       {19, 19, 1, true},    {20, 20, 1, false},  {20, 20, 2, true},
        {120, 120, 11, false}, {120, 120, 12, true}, {120, 121, 0, true},
    };
    char names[260][16];
    const char *cur[130], *next[130];
    for (int i = 0; i < 260; i++)
        snprintf(names[i], sizeof names[i], "n%03d", i);
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        for (int i = 0; i < rows[r].cur; i++)
            cur[i] = names[rows[r].cur - 1 - i]; /* any order */
        for (int i = 0; i < rows[r].next; i++)
            next[i] = names[i < rows[r].swapped ? 130 + i : i];
        cr_assert_eq(shardctl_needs_write(cur, (size_t)rows[r].cur, next, (size_t)rows[r].next),
                     rows[r].write, "row %zu", r);
    }
    cr_assert(shardctl_needs_write(NULL, 0, NULL, 0), "no object: created");
}

/* Deterministic PRNG. */
static uint64_t rng = 88172645463325252ULL;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void expect_same(shardctl_engine *a, shardctl_engine *b, size_t ns)
{
    for (size_t s = 0; s < ns; s++) {
        const char **ma, **mb;
        size_t na, nb;
        cr_assert_eq(shardctl_engine_members(a, s, &ma, &na, NULL), AS_OK);
        cr_assert_eq(shardctl_engine_members(b, s, &mb, &nb, NULL), AS_OK);
        cr_assert_eq(na, nb, "scheduler %zu: %zu vs %zu members", s, na, nb);
        for (size_t i = 0; i < na; i++)
            cr_assert_str_eq(ma[i], mb[i]);
        free(ma);
        free(mb);
    }
    shardctl_engine_stats sa, sb;
    shardctl_engine_get_stats(a, &sa);
    shardctl_engine_get_stats(b, &sb);
    cr_assert_eq(sa.unfit, sb.unfit);
    cr_assert_eq(sa.capped, sb.capped);
    cr_assert_eq(sa.nodes, sb.nodes);
}

/* Random node events on up to n nodes (at most 120); a removal in
 * remove_in events (so the count wanders across 50 when n is near it);
 * compared with a from-scratch engine every check_every events (the
 * events between are a burst the engine may settle at once). */
static void incremental_equals_scratch_n(const char *cfg_text, int n, int remove_in,
                                         int check_every)
{
    shardcfg_config *c = parse_ok(cfg_text);
    shardctl_engine *inc = NULL;
    cr_assert_eq(shardctl_engine_new(c, &inc), AS_OK);
    enum { NMAX = 120 };
    const int N = n;
    char names[NMAX][16];
    int64_t req[NMAX];
    bool warm[NMAX], present[NMAX];
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "node-%03d", i);
        req[i] = (int64_t)(next_rand() % 1001);
        warm[i] = next_rand() % 4 == 0;
        present[i] = true;
    }
    shardctl_node_info all[NMAX];
    for (int i = 0; i < N; i++)
        all[i] = ni(names[i], req[i], 1000, warm[i]);
    cr_assert_eq(shardctl_engine_resync(inc, all, N, 1), AS_OK);
    for (int step = 0; step < 1500; step++) {
        int i = (int)(next_rand() % N);
        uint64_t r = next_rand() % (uint64_t)remove_in;
        if (r == 0 && present[i]) {
            cr_assert_eq(shardctl_engine_remove_node(inc, names[i]), AS_OK);
            present[i] = false;
        } else {
            req[i] = (int64_t)(next_rand() % 1001);
            if (r == 1)
                warm[i] = !warm[i];
            present[i] = true;
            shardctl_node_info one = ni(names[i], req[i], 1000, warm[i]);
            cr_assert_eq(shardctl_engine_set_node(inc, &one, 1), AS_OK);
        }
        if (step % check_every)
            continue;
        shardctl_node_info cur[NMAX];
        size_t k = 0;
        for (int j = 0; j < N; j++)
            if (present[j])
                cur[k++] = ni(names[j], req[j], 1000, warm[j]);
        shardctl_engine *ref = NULL;
        cr_assert_eq(shardctl_engine_new(c, &ref), AS_OK);
        cr_assert_eq(shardctl_engine_resync(ref, cur, k, 1), AS_OK);
        expect_same(inc, ref, c->n);
        shardctl_engine_free(ref);
    }
    shardctl_engine_free(inc);
    shardcfg_free(c);
}

static void incremental_equals_scratch(const char *cfg_text)
{
    incremental_equals_scratch_n(cfg_text, 120, 10, 1);
}

Test(shardctl_engine, incremental_matches_from_scratch_across_50_nodes)
{
    /* Around 50 live nodes: in and out of batched mode. */
    incremental_equals_scratch_n("schedulerConfigs:\n"
                                 "- name: a\n"
                                 "  policies:\n"
                                 "  - {name: allocation-rate, arguments: {minCPUUtil: 0.3, "
                                 "maxCPUUtil: 1.0}}\n"
                                 "  - {name: warmup, weight: 2}\n"
                                 "  - {name: node-limit, arguments: {maxNodes: 12}}\n"
                                 "- name: b\n"
                                 "  policies:\n"
                                 "  - {name: allocation-rate, arguments: {maxCPUUtil: 0.8}}\n"
                                 "  - {name: node-limit, arguments: {maxNodes: 9}}\n",
                                 58, 3, 1);
}

Test(shardctl_engine, incremental_matches_from_scratch_after_bursts)
{
    /* Joins, departures and changes between two reads, in batched mode. */
    incremental_equals_scratch_n("schedulerConfigs:\n"
                                 "- name: a\n"
                                 "  policies:\n"
                                 "  - {name: allocation-rate, arguments: {minCPUUtil: 0.2, "
                                 "maxCPUUtil: 1.0}}\n"
                                 "  - {name: warmup, weight: 3}\n"
                                 "  - {name: node-limit, arguments: {maxNodes: 17}}\n"
                                 "- name: b\n"
                                 "  policies:\n"
                                 "  - {name: allocation-rate, arguments: {maxCPUUtil: 0.9}}\n",
                                 120, 4, 7);
}

Test(shardctl_engine, incremental_matches_from_scratch_unsaturated)
{
    incremental_equals_scratch(band_cfg);
}

Test(shardctl_engine, incremental_matches_from_scratch_with_binding_caps)
{
    incremental_equals_scratch("schedulerConfigs:\n"
                               "- name: a\n"
                               "  policies:\n"
                               "  - {name: allocation-rate, arguments: {minCPUUtil: 0.3, "
                               "maxCPUUtil: 1.0}}\n"
                               "  - {name: warmup, weight: 2}\n"
                               "  - {name: node-limit, arguments: {maxNodes: 25}}\n"
                               "- name: b\n"
                               "  policies:\n"
                               "  - {name: allocation-rate, arguments: {maxCPUUtil: 0.8}}\n"
                               "  - {name: node-limit, arguments: {maxNodes: 40}}\n"
                               "- name: c\n"
                               "  policies:\n"
                               "  - {name: allocation-rate, arguments: {minCPUUtil: 0.1, "
                               "maxCPUUtil: 0.9}}\n");
}

Test(shardctl_engine, incremental_matches_from_scratch_all_capped)
{
    incremental_equals_scratch("schedulerConfigs:\n"
                               "- name: a\n"
                               "  policies:\n"
                               "  - {name: warmup, weight: 2}\n"
                               "  - {name: allocation-rate, weight: 1, arguments: "
                               "{minCPUUtil: 0.2, maxCPUUtil: 1.0}}\n"
                               "  - {name: node-limit, arguments: {maxNodes: 10}}\n"
                               "- name: b\n"
                               "  policies:\n"
                               "  - {name: node-limit, arguments: {maxNodes: 30}}\n"
                               "- name: c\n"
                               "  policies:\n"
                               "  - {name: allocation-rate, arguments: {maxCPUUtil: 0.6}}\n"
                               "  - {name: node-limit, arguments: {maxNodes: 1}}\n");
}

Test(shardctl_engine, seen_and_sweep_drop_vanished_nodes)
{
    shardcfg_config *c = parse_ok(band_cfg);
    shardctl_engine *e = NULL;
    cr_assert_eq(shardctl_engine_new(c, &e), AS_OK);
    shardctl_node_info a = ni("a", 900, 1000, false), b = ni("b", 100, 1000, false);
    a.tag = 7;
    cr_assert_eq(shardctl_engine_set_node(e, &a, 1), AS_OK);
    cr_assert_eq(shardctl_engine_set_node(e, &b, 1), AS_OK);
    uint64_t tag = 0;
    cr_assert(shardctl_engine_seen(e, "a", 2, &tag));
    cr_assert_eq(tag, 7);
    cr_assert_not(shardctl_engine_seen(e, "zzz", 2, NULL));
    size_t removed = 0;
    cr_assert_eq(shardctl_engine_sweep(e, 2, &removed), AS_OK);
    cr_assert_eq(removed, 1);
    cr_assert_eq(shardctl_engine_owner(e, "b"), -1);
    cr_assert_eq(shardctl_engine_remove_node(e, "b"), AS_ENOTFOUND);
    /* the slot is reused */
    cr_assert_eq(shardctl_engine_set_node(e, &b, 3), AS_OK);
    cr_assert_eq(shardctl_engine_owner(e, "b"), 1);
    shardctl_engine_free(e);
    shardcfg_free(c);
}

/* ---- CLI, offline ------------------------------------------------------- */

Test(shardctl_cli, once_prints_the_shards_of_a_cluster_file)
{
    int st;
    char *out = cli_run(&st,
                        "shard-controller --config %s/policy/sharding.yaml --cluster "
                        "%s/deploy/examples/cluster.yaml --once --log-level 0",
                        AGENTSCHED_SOURCE_DIR, AGENTSCHED_SOURCE_DIR);
    cr_assert_eq(st, 0, "%s", out);
    json_error_t je;
    json_t *doc = json_loads(out, 0, &je);
    cr_assert_not_null(doc, "%s", out);
    json_t *shards = json_object_get(doc, "shards");
    cr_assert_eq(json_array_size(shards), 2);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(shards, 0), "name")),
                     "agentsched");
    json_decref(doc);
    free(out);

    out = cli_run(&st, "shard-controller --cluster x --once 2>/dev/null");
    cr_assert_eq(WEXITSTATUS(st), 2, "--config is required");
    free(out);
}

/* Utilisation counts what Volcano's controller counts: the containers'
 * CPU requests of the node's bound pods, not Succeeded/Failed, not mirror
 * pods, over status.capacity; init containers (sidecars too), overhead
 * and pod-level resources are left out (data/volcano-util-cluster.yaml). */
Test(shardctl_cli, utilisation_counts_what_volcano_counts)
{
    int st;
    char *out = cli_run(&st,
                        "shard-controller --config %s/test/unit/shard/data/volcano-util-bands.yaml "
                        "--cluster %s/test/unit/shard/data/volcano-util-cluster.yaml --once "
                        "--log-level 0",
                        AGENTSCHED_SOURCE_DIR, AGENTSCHED_SOURCE_DIR);
    cr_assert_eq(st, 0, "%s", out);
    json_error_t je;
    json_t *doc = json_loads(out, 0, &je);
    cr_assert_not_null(doc, "%s", out);
    json_t *shards = json_object_get(doc, "shards");
    size_t busy = 0, idle = 0, i;
    json_t *sh;
    json_array_foreach(shards, i, sh)
    {
        const char *name = json_string_value(json_object_get(sh, "name"));
        size_t k;
        json_t *nd;
        json_array_foreach(json_object_get(sh, "nodesDesired"), k, nd)
        {
            const char *node = json_string_value(nd);
            bool is_busy = strncmp(node, "busy-", 5) == 0;
            cr_assert_str_eq(name, is_busy ? "busy" : "idle", "%s", node);
            if (is_busy)
                busy++;
            else
                idle++;
        }
    }
    cr_assert_eq(busy, 2, "%s", out);
    cr_assert_eq(idle, 7, "%s", out);
    json_decref(doc);
    free(out);
}

Test(shardcfg_config, from_configmap)
{
    json_t *cm = json_pack("{s:{s:s},s:{s:s}}", "metadata", "resourceVersion", "7", "data",
                           "sharding.yaml", "schedulerConfigs: [{name: agent}]\n");
    shardcfg_config *c = NULL;
    as_diag d = {0};
    cr_assert_eq(shardcfg_from_configmap(cm, NULL, "ConfigMap ns/cm", &c, &d), AS_OK, "%s", d.msg);
    cr_assert_str_eq(c->sched[0].name, "agent");
    shardcfg_free(c);
    cr_assert_eq(shardcfg_from_configmap(cm, "other.yaml", "ConfigMap ns/cm", &c, &d),
                 AS_ENOTFOUND);
    cr_assert_str_eq(d.field, "data.other.yaml");
    json_object_set_new(json_object_get(cm, "data"), "sharding.yaml",
                        json_string("schedulerConfigs: [{name: agent, type: [1]}]\n"));
    cr_assert_eq(shardcfg_from_configmap(cm, NULL, "ConfigMap ns/cm", &c, &d), AS_EINVAL);
    cr_assert(strstr(d.msg, "ConfigMap ns/cm"), "%s", d.msg);
    cr_assert_null(c);
    json_decref(cm);
}

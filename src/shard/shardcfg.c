/*
 * shardcfg.c - the sharding config in Volcano's format (see shardcfg.h).
 */
#include "agentsched/shard/shardcfg.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agentsched/base/doc.h"
#include "agentsched/base/log.h"
#include "agentsched/base/table.h"

/* ------------------------------------------------------------------ */
/* Config                                                              */
/* ------------------------------------------------------------------ */

/* See shardcfg.h. */
void shardcfg_free(shardcfg_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->n; i++) {
        shardcfg_sched *s = &cfg->sched[i];
        for (size_t j = 0; j < s->npol; j++) {
            free(s->pol[j].label);
            free(s->pol[j].label_value);
        }
        free(s->pol);
        free(s->name);
        free(s->type);
    }
    free(cfg->sched);
    free(cfg);
}

/* See shardcfg.h. */
as_err shardcfg_duration_parse(const char *s, int64_t *ms)
{
    if (!s || !*s)
        return AS_EINVAL;
    char *end = NULL;
    /* A bare number: seconds. */
    double plain = strtod(s, &end);
    if (end && *end == '\0' && end != s) {
        if (!(plain >= 0) || plain > 1e9)
            return AS_EINVAL;
        *ms = (int64_t)(plain * 1000.0);
        return AS_OK;
    }
    double total = 0;
    const char *p = s;
    while (*p) {
        if (!isdigit((unsigned char)*p) && *p != '.')
            return AS_EINVAL;
        double v = strtod(p, &end);
        if (end == p || !(v >= 0))
            return AS_EINVAL;
        p = end;
        double unit;
        if (strncmp(p, "ms", 2) == 0) {
            unit = 1;
            p += 2;
        } else if (*p == 'h') {
            unit = 3600e3;
            p++;
        } else if (*p == 'm') {
            unit = 60e3;
            p++;
        } else if (*p == 's') {
            unit = 1e3;
            p++;
        } else {
            return AS_EINVAL; /* a unit is required after the first number */
        }
        total += v * unit;
        if (total > 1e12)
            return AS_EINVAL;
    }
    *ms = (int64_t)total;
    return AS_OK;
}

static bool key_in(const char *k, const char *const *allowed)
{
    for (; *allowed; allowed++)
        if (strcmp(k, *allowed) == 0)
            return true;
    return false;
}

/* The config being parsed on this thread: where check_keys lists the
 * unknown fields (NULL outside shardcfg_parse). */
static __thread shardcfg_config *parsing;

/* Lists keys of obj outside allowed in parsing->unknown (Volcano ignores
 * them; the caller warns); field is obj's path. Never fails. */
static as_err check_keys(const json_t *obj, const char *const *allowed, const char *field,
                         const char *origin, as_diag *diag)
{
    (void)origin;
    (void)diag;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        (void)v;
        if (!key_in(k, allowed) && parsing) {
            size_t used = strlen(parsing->unknown);
            snprintf(parsing->unknown + used, sizeof parsing->unknown - used, "%s%s%s%s",
                     used ? ", " : "", field, *field ? "." : "", k);
        }
    }
    return AS_OK;
}

static as_err get_num(const json_t *obj, const char *key, double lo, double hi, double *out,
                      const char *field, const char *origin, as_diag *diag)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return AS_OK;
    char f[192];
    snprintf(f, sizeof f, "%s.%s", field, key);
    if (!json_is_number(v))
        return as_diag_set(diag, AS_EINVAL, f, "%s: %s must be a number", origin, f);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi))
        return as_diag_set(diag, AS_ERANGE, f, "%s: %s = %g is outside [%g, %g]", origin, f, d, lo,
                           hi);
    *out = d;
    return AS_OK;
}

static as_err get_int(const json_t *obj, const char *key, long lo, long hi, long *out,
                      const char *field, const char *origin, as_diag *diag)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return AS_OK;
    char f[192];
    snprintf(f, sizeof f, "%s.%s", field, key);
    if (!json_is_integer(v))
        return as_diag_set(diag, AS_EINVAL, f, "%s: %s must be an integer", origin, f);
    json_int_t d = json_integer_value(v);
    if (d < lo || d > hi)
        return as_diag_set(diag, AS_ERANGE, f, "%s: %s = %lld is outside [%ld, %ld]", origin, f,
                           (long long)d, lo, hi);
    *out = (long)d;
    return AS_OK;
}

static as_err get_str(const json_t *obj, const char *key, char **out, const char *field,
                      const char *origin, as_diag *diag)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return AS_OK;
    char f[192];
    snprintf(f, sizeof f, "%s.%s", field, key);
    if (!json_is_string(v))
        return as_diag_set(diag, AS_EINVAL, f, "%s: %s must be a string", origin, f);
    char *d = strdup(json_string_value(v));
    if (!d)
        return AS_ENOMEM;
    free(*out);
    *out = d;
    return AS_OK;
}

static bool dns_name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
            return false;
    }
    return isalnum((unsigned char)s[0]) && isalnum((unsigned char)s[n - 1]);
}

static const char *const policy_names[] = {"allocation-rate", "warmup", "node-limit"};

/* Volcano rejects minNodes/maxNodes in the arguments of any policy but
 * node-limit (its validatePolicies). */
static as_err node_limit_args_elsewhere(const json_t *args, const char *field, const char *origin,
                                        as_diag *diag)
{
    static const char *const nk[] = {"minNodes", "maxNodes"};
    for (size_t i = 0; i < 2; i++)
        if (json_object_get(args, nk[i]))
            return as_diag_set(diag, AS_EINVAL, field,
                               "%s: %s: %s is only supported by the node-limit policy", origin,
                               field, nk[i]);
    return AS_OK;
}

static as_err parse_policy(const json_t *pj, shardcfg_policy *p, const char *field,
                           const char *origin, as_diag *diag)
{
    static const char *const keys[] = {"name", "weight", "arguments", NULL};
    as_err err;
    if (!json_is_object(pj))
        return as_diag_set(diag, AS_EINVAL, field, "%s: %s must be an object", origin, field);
    if ((err = check_keys(pj, keys, field, origin, diag)))
        return err;
    const char *name = json_string_value(json_object_get(pj, "name"));
    char f[192];
    snprintf(f, sizeof f, "%s.name", field);
    if (!name)
        return as_diag_set(diag, AS_EINVAL, f,
                           "%s: %s is required (allocation-rate, warmup or node-limit)", origin, f);
    int kind = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(name, policy_names[i]) == 0)
            kind = i;
    if (kind < 0)
        return as_diag_set(diag, AS_EINVAL, f,
                           "%s: unknown policy \"%s\" (built-ins: allocation-rate, warmup, "
                           "node-limit)",
                           origin, name);
    memset(p, 0, sizeof *p);
    p->kind = (shardcfg_policy_kind)kind;
    p->weight = 1;
    /* Volcano's allocation-rate reads both limits into zeroes: an omitted
     * maxCPUUtil is 0, not 1. */
    p->min_util = 0;
    p->max_util = 0;
    /* Volcano's weights are integers: its config decoding fails on 0.5. */
    long w = 1;
    if ((err = get_int(pj, "weight", 0, 1000000, &w, field, origin, diag)))
        return err;
    p->weight = (double)w;
    /* As Volcano's controller: 0 is "omitted", the default 1 (a policy
     * cannot be switched off by its weight). */
    if (p->weight == 0)
        p->weight = 1;
    json_t *args = json_object_get(pj, "arguments");
    snprintf(f, sizeof f, "%s.arguments", field);
    if (args && !json_is_object(args) && !json_is_null(args))
        return as_diag_set(diag, AS_EINVAL, f, "%s: %s must be an object", origin, f);
    json_t *empty = json_object();
    if (!empty)
        return AS_ENOMEM;
    if (!json_is_object(args))
        args = empty;
    switch (p->kind) {
    case SHARDCFG_POL_ALLOCATION_RATE: {
        static const char *const ak[] = {"minCPUUtil", "maxCPUUtil", NULL};
        if ((err = node_limit_args_elsewhere(args, f, origin, diag)) ||
            (err = check_keys(args, ak, f, origin, diag)) ||
            (err = get_num(args, "minCPUUtil", 0, 1, &p->min_util, f, origin, diag)) ||
            (err = get_num(args, "maxCPUUtil", 0, 1, &p->max_util, f, origin, diag)))
            break;
        if (p->min_util > p->max_util)
            err = as_diag_set(diag, AS_ERANGE, f, "%s: %s: minCPUUtil %g is above maxCPUUtil %g%s",
                              origin, f, p->min_util, p->max_util,
                              json_object_get(args, "maxCPUUtil")
                                  ? ""
                                  : " (omitted, it is 0 as in Volcano: set maxCPUUtil: 1.0)");
        break;
    }
    case SHARDCFG_POL_WARMUP: {
        static const char *const ak[] = {"warmupLabel", "warmupLabelValue", NULL};
        err = node_limit_args_elsewhere(args, f, origin, diag);
        if (err)
            break;
        if ((err = check_keys(args, ak, f, origin, diag)) ||
            (err = get_str(args, "warmupLabel", &p->label, f, origin, diag)) ||
            (err = get_str(args, "warmupLabelValue", &p->label_value, f, origin, diag)))
            break;
        if (!p->label && !(p->label = strdup(SHARDCFG_DEFAULT_WARMUP_LABEL)))
            err = AS_ENOMEM;
        else if (!p->label_value && !(p->label_value = strdup("true")))
            err = AS_ENOMEM;
        else if (!*p->label)
            err = as_diag_set(diag, AS_EINVAL, f, "%s: %s.warmupLabel is empty", origin, f);
        break;
    }
    case SHARDCFG_POL_NODE_LIMIT: {
        static const char *const ak[] = {"minNodes", "maxNodes", NULL};
        if ((err = check_keys(args, ak, f, origin, diag)) ||
            (err = get_int(args, "minNodes", 0, 1000000, &p->min_nodes, f, origin, diag)) ||
            (err = get_int(args, "maxNodes", -1, 1000000, &p->max_nodes, f, origin, diag)))
            break;
        if (p->max_nodes > 0 && p->max_nodes < p->min_nodes)
            err = as_diag_set(diag, AS_ERANGE, f, "%s: %s: maxNodes %ld is below minNodes %ld",
                              origin, f, p->max_nodes, p->min_nodes);
        break;
    }
    }
    json_decref(empty);
    return err;
}

/* Appends a node-limit policy from the scheduler-level minNodes/maxNodes. */
static as_err flat_node_limit(const json_t *sj, shardcfg_sched *s, const char *field,
                              const char *origin, as_diag *diag)
{
    shardcfg_policy nl = {.kind = SHARDCFG_POL_NODE_LIMIT};
    as_err err;
    if ((err = get_int(sj, "minNodes", 0, 1000000, &nl.min_nodes, field, origin, diag)) ||
        (err = get_int(sj, "maxNodes", -1, 1000000, &nl.max_nodes, field, origin, diag)))
        return err;
    if (nl.max_nodes > 0 && nl.max_nodes < nl.min_nodes)
        return as_diag_set(diag, AS_ERANGE, field, "%s: %s: maxNodes is below minNodes", origin,
                           field);
    if (nl.min_nodes > 0 || nl.max_nodes > 0)
        s->pol[s->npol++] = nl;
    return AS_OK;
}

/*
 * Deprecated flat fields -> policies, as Volcano's controller fills them in
 * (its applyPolicyDefaults): without policies, an allocation-rate from the
 * scheduler-level arguments (minCPUUtil/maxCPUUtil) when given, else from
 * cpuUtilizationMin/Max, plus a warmup of weight 1 for preferWarmupNodes;
 * with policies those three are ignored (listed as unknown, for the
 * warning). Either way minNodes/maxNodes become a node-limit when the chain
 * has none. s->pol has room for three more.
 */
static as_err legacy_policies(const json_t *sj, shardcfg_sched *s, const char *field,
                              const char *origin, as_diag *diag)
{
    bool any = false;
    static const char *const legacy[] = {"cpuUtilizationMin",
                                         "cpuUtilizationMax",
                                         "preferWarmupNodes",
                                         "minNodes",
                                         "maxNodes",
                                         "arguments",
                                         NULL};
    for (const char *const *k = legacy; *k; k++)
        any |= json_object_get(sj, *k) != NULL;
    as_err err;
    if (s->npol) {
        static const char *const ignored[] = {"cpuUtilizationMin", "cpuUtilizationMax",
                                              "preferWarmupNodes", "arguments", NULL};
        for (const char *const *k = ignored; *k; k++)
            if (json_object_get(sj, *k) && parsing) {
                size_t used = strlen(parsing->unknown);
                snprintf(parsing->unknown + used, sizeof parsing->unknown - used, "%s%s.%s",
                         used ? ", " : "", field, *k);
            }
        for (size_t j = 0; j < s->npol; j++)
            if (s->pol[j].kind == SHARDCFG_POL_NODE_LIMIT)
                return AS_OK;
        return flat_node_limit(sj, s, field, origin, diag);
    }
    json_t *args = json_object_get(sj, "arguments");
    if (json_is_object(args) && json_object_size(args)) {
        json_t *pj = json_pack("{s:s,s:O}", "name", "allocation-rate", "arguments", args);
        char f[192];
        snprintf(f, sizeof f, "%s", field);
        if (!pj)
            return AS_ENOMEM;
        err = parse_policy(pj, &s->pol[s->npol], f, origin, diag);
        json_decref(pj);
        if (err)
            return err;
        s->npol++;
    } else {
        /* Omitted limits are 0 (checked by volcano_sched_checks): a
         * scheduler with neither policies nor limits takes idle nodes only. */
        shardcfg_policy *ar = &s->pol[s->npol++];
        ar->kind = SHARDCFG_POL_ALLOCATION_RATE;
        ar->weight = 1;
        if ((err = get_num(sj, "cpuUtilizationMin", 0, 1, &ar->min_util, field, origin, diag)) ||
            (err = get_num(sj, "cpuUtilizationMax", 0, 1, &ar->max_util, field, origin, diag)))
            return err;
    }
    json_t *w = json_object_get(sj, "preferWarmupNodes");
    if (w && !json_is_boolean(w))
        return as_diag_set(diag, AS_EINVAL, field, "%s: %s.preferWarmupNodes must be a boolean",
                           origin, field);
    if (json_is_true(w)) {
        shardcfg_policy *wp = &s->pol[s->npol++];
        wp->kind = SHARDCFG_POL_WARMUP;
        wp->weight = 1;
        if (!(wp->label = strdup(SHARDCFG_DEFAULT_WARMUP_LABEL)) ||
            !(wp->label_value = strdup("true")))
            return AS_ENOMEM;
    }
    if ((err = flat_node_limit(sj, s, field, origin, diag)))
        return err;
    if (any)
        log_warn("msg=\"deprecated flat scheduler fields; use policies\" scheduler=%s", s->name);
    return AS_OK;
}

/* Volcano checks the scheduler-level fields whether or not policies are
 * given (its ParseShardingConfig), an omitted one being 0: both limits in
 * [0, 1] with cpuUtilizationMin <= cpuUtilizationMax, and 0 <= minNodes <=
 * maxNodes. */
static as_err volcano_sched_checks(const json_t *sj, const char *field, const char *origin,
                                   as_diag *diag)
{
    double cmin = 0, cmax = 0;
    long nmin = 0, nmax = 0;
    as_err err;
    if ((err = get_num(sj, "cpuUtilizationMin", 0, 1, &cmin, field, origin, diag)) ||
        (err = get_num(sj, "cpuUtilizationMax", 0, 1, &cmax, field, origin, diag)) ||
        (err = get_int(sj, "minNodes", 0, 1000000, &nmin, field, origin, diag)) ||
        (err = get_int(sj, "maxNodes", 0, 1000000, &nmax, field, origin, diag)))
        return err;
    if (cmin > cmax)
        return as_diag_set(diag, AS_ERANGE, field,
                           "%s: %s: cpuUtilizationMin %g is above cpuUtilizationMax %g (an "
                           "omitted one is 0; Volcano rejects this config too)",
                           origin, field, cmin, cmax);
    if (nmax < nmin)
        return as_diag_set(diag, AS_ERANGE, field,
                           "%s: %s: maxNodes %ld is below minNodes %ld (an omitted one is 0; "
                           "Volcano rejects this config too)",
                           origin, field, nmax, nmin);
    return AS_OK;
}

static as_err parse_sched(const json_t *sj, shardcfg_sched *s, const char *field,
                          const char *origin, as_diag *diag)
{
    static const char *const keys[] = {"name",
                                       "type",
                                       "policies",
                                       "cpuUtilizationMin",
                                       "cpuUtilizationMax",
                                       "preferWarmupNodes",
                                       "minNodes",
                                       "maxNodes",
                                       "arguments",
                                       NULL};
    as_err err;
    if (!json_is_object(sj))
        return as_diag_set(diag, AS_EINVAL, field, "%s: %s must be an object", origin, field);
    if ((err = check_keys(sj, keys, field, origin, diag)))
        return err;
    char f[192];
    snprintf(f, sizeof f, "%s.name", field);
    const char *name = json_string_value(json_object_get(sj, "name"));
    if (!name || !dns_name_ok(name))
        return as_diag_set(diag, AS_EINVAL, f,
                           "%s: %s must be the scheduler's name, a lowercase DNS name (it "
                           "names the NodeShard)",
                           origin, f);
    if (!(s->name = strdup(name)))
        return AS_ENOMEM;
    if ((err = get_str(sj, "type", &s->type, field, origin, diag)))
        return err;
    if (!s->type && !(s->type = strdup("")))
        return AS_ENOMEM;
    json_t *pols = json_object_get(sj, "policies");
    snprintf(f, sizeof f, "%s.policies", field);
    if (pols && !json_is_array(pols))
        return as_diag_set(diag, AS_EINVAL, f, "%s: %s must be a list", origin, f);
    size_t np = json_array_size(pols);
    if (np > 16)
        return as_diag_set(diag, AS_ELIMIT, f, "%s: %s: at most 16 policies", origin, f);
    /* + 3: what the flat fields may add (legacy_policies). */
    if (!(s->pol = calloc(np + 3, sizeof *s->pol)))
        return AS_ENOMEM;
    for (size_t j = 0; j < np; j++) {
        char pf[192];
        snprintf(pf, sizeof pf, "%s[%zu]", f, j);
        if ((err = parse_policy(json_array_get(pols, j), &s->pol[j], pf, origin, diag))) {
            s->npol = j + 1; /* free what it set */
            return err;
        }
        s->npol = j + 1;
        for (size_t k = 0; k < j; k++)
            if (s->pol[k].kind == s->pol[j].kind)
                return as_diag_set(diag, AS_EINVAL, pf, "%s: %s: policy %s given twice", origin, pf,
                                   policy_names[s->pol[j].kind]);
    }
    if ((err = volcano_sched_checks(sj, field, origin, diag)) ||
        (err = legacy_policies(sj, s, field, origin, diag)))
        return err;
    for (size_t j = 0; j < s->npol; j++)
        if (s->pol[j].kind == SHARDCFG_POL_NODE_LIMIT) {
            s->min_nodes = s->pol[j].min_nodes;
            s->max_nodes = s->pol[j].max_nodes;
        }
    return AS_OK;
}

/* See shardcfg.h. */
as_err shardcfg_parse(const char *data, size_t len, const char *origin, shardcfg_config **out,
                      as_diag *diag)
{
    *out = NULL;
    if (!origin)
        origin = "sharding config";
    json_t *doc = NULL;
    as_err err = doc_parse(data, len, false, &doc, diag);
    if (err) {
        if (diag) {
            char msg[sizeof diag->msg], field[sizeof diag->field];
            snprintf(msg, sizeof msg, "%s", diag->msg);
            snprintf(field, sizeof field, "%s", diag->field);
            as_diag_set(diag, err, field, "%s: %s", origin, msg);
        }
        return err;
    }
    /* Volcano's ConfigMap as a whole, or its data excerpt: the text under
     * sharding.yaml is the config. */
    const json_t *cm_data = NULL;
    bool wrapped = false;
    if (json_is_object(doc)) {
        const char *kind = json_string_value(json_object_get(doc, "kind"));
        if (kind && strcmp(kind, "ConfigMap") == 0) {
            cm_data = json_object_get(doc, "data");
            wrapped = true;
        } else if (json_object_size(doc) == 1 &&
                   json_is_string(json_object_get(doc, "sharding.yaml"))) {
            cm_data = doc;
            wrapped = true;
        }
    }
    if (wrapped) {
        const char *text = json_string_value(json_object_get(cm_data, "sharding.yaml"));
        char inner[256];
        snprintf(inner, sizeof inner, "%s (sharding.yaml)", origin);
        err = text ? shardcfg_parse(text, strlen(text), inner, out, diag)
                   : as_diag_set(diag, AS_ENOTFOUND, "data.sharding.yaml",
                                 "%s: a ConfigMap without data.sharding.yaml", origin);
        json_decref(doc);
        return err;
    }
    shardcfg_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) {
        json_decref(doc);
        return AS_ENOMEM;
    }
    parsing = cfg;
    cfg->sync_period_ms = 60000;
    cfg->node_event_trigger = true;
    static const char *const keys[] = {"schedulerConfigs", "shardSyncPeriod",
                                       "enableNodeEventTrigger", NULL};
    if (!json_is_object(doc)) {
        err = as_diag_set(diag, AS_EINVAL, "",
                          "%s: the document must be a mapping with "
                          "schedulerConfigs",
                          origin);
        goto done;
    }
    if ((err = check_keys(doc, keys, "", origin, diag)))
        goto done;
    json_t *sc = json_object_get(doc, "schedulerConfigs");
    size_t n = json_array_size(sc);
    if (!json_is_array(sc) || n == 0) {
        err = as_diag_set(diag, AS_EINVAL, "schedulerConfigs",
                          "%s: schedulerConfigs must list at least one scheduler", origin);
        goto done;
    }
    if (n > SHARDCFG_MAX_SCHEDULERS) {
        err = as_diag_set(diag, AS_ELIMIT, "schedulerConfigs", "%s: at most %d schedulers", origin,
                          SHARDCFG_MAX_SCHEDULERS);
        goto done;
    }
    if (!(cfg->sched = calloc(n, sizeof *cfg->sched))) {
        err = AS_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        char f[64];
        snprintf(f, sizeof f, "schedulerConfigs[%zu]", i);
        cfg->n = i + 1;
        if ((err = parse_sched(json_array_get(sc, i), &cfg->sched[i], f, origin, diag)))
            goto done;
        for (size_t k = 0; k < i; k++)
            if (strcmp(cfg->sched[k].name, cfg->sched[i].name) == 0) {
                err = as_diag_set(diag, AS_EINVAL, f, "%s: scheduler %s is listed twice", origin,
                                  cfg->sched[i].name);
                goto done;
            }
    }
    json_t *sp = json_object_get(doc, "shardSyncPeriod");
    if (sp) {
        int64_t ms = 0;
        if (json_is_string(sp))
            err = shardcfg_duration_parse(json_string_value(sp), &ms);
        else if (json_is_number(sp) && json_number_value(sp) >= 0 && json_number_value(sp) <= 1e6)
            ms = (int64_t)(json_number_value(sp) * 1000);
        else
            err = AS_EINVAL;
        if (err || ms < 1000 || ms > 86400000) {
            err = as_diag_set(diag, err ? err : AS_ERANGE, "shardSyncPeriod",
                              "%s: shardSyncPeriod must be a duration between 1s and 24h, "
                              "e.g. \"60s\"",
                              origin);
            goto done;
        }
        cfg->sync_period_ms = ms;
    }
    json_t *et = json_object_get(doc, "enableNodeEventTrigger");
    if (et) {
        if (!json_is_boolean(et)) {
            err = as_diag_set(diag, AS_EINVAL, "enableNodeEventTrigger",
                              "%s: enableNodeEventTrigger must be true or false", origin);
            goto done;
        }
        cfg->node_event_trigger = json_is_true(et);
    }
done:
    parsing = NULL;
    json_decref(doc);
    if (err) {
        shardcfg_free(cfg);
        return err;
    }
    *out = cfg;
    return AS_OK;
}

/* See shardcfg.h. */
as_err shardcfg_load(const char *path, shardcfg_config **out, as_diag *diag)
{
    char *data = NULL;
    size_t len = 0;
    *out = NULL;
    as_err err = doc_read_file(path, SHARDCFG_CONFIG_MAX, &data, &len, diag);
    if (err)
        return err;
    err = shardcfg_parse(data, len, path, out, diag);
    free(data);
    return err;
}

/* See shardcfg.h. */
as_err shardcfg_from_configmap(const json_t *cm, const char *key, const char *origin,
                               shardcfg_config **out, as_diag *diag)
{
    *out = NULL;
    if (!key)
        key = "sharding.yaml";
    const char *text = json_string_value(json_object_get(json_object_get(cm, "data"), key));
    if (!text) {
        char f[128];
        snprintf(f, sizeof f, "data.%s", key);
        return as_diag_set(diag, AS_ENOTFOUND, f, "%s: no key %s in the ConfigMap's data",
                           origin ? origin : "ConfigMap", key);
    }
    return shardcfg_parse(text, strlen(text), origin, out, diag);
}

/* ------------------------------------------------------------------ */
/* Config reload                                                       */
/* ------------------------------------------------------------------ */

/* See shardcfg.h. */
as_err shardcfg_reload(const char *path, shardcfg_file_stamp *stamp, shardcfg_config **next,
                       as_diag *diag)
{
    *next = NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return as_diag_set(diag, AS_EIO, NULL, "%s: cannot stat: %s (keeping the current config)",
                           path, strerror(errno));
    shardcfg_file_stamp now = {
        .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
        .size = (int64_t)st.st_size,
        .ino = (uint64_t)st.st_ino,
        .valid = true,
    };
    if (stamp->valid && stamp->mtime_ns == now.mtime_ns && stamp->size == now.size &&
        stamp->ino == now.ino)
        return AS_OK;
    *stamp = now;
    return shardcfg_load(path, next, diag);
}

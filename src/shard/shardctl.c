/*
 * shardctl.c - the sharding controller's config, assignment engine and
 * lease decision (see shardctl.h), and the command.
 */
#include "agentsched/shard/shardctl.h"

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

/* See shardctl.h. */
void shardctl_config_free(shardctl_config *cfg)
{
    if (!cfg)
        return;
    for (size_t i = 0; i < cfg->n; i++) {
        shardctl_sched *s = &cfg->sched[i];
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

/* See shardctl.h. */
as_err shardctl_duration_parse(const char *s, int64_t *ms)
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
 * unknown fields (NULL outside shardctl_config_parse). */
static __thread shardctl_config *parsing;

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

static as_err parse_policy(const json_t *pj, shardctl_policy *p, const char *field,
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
    p->kind = (shardctl_policy_kind)kind;
    p->weight = 1;
    p->min_util = 0;
    p->max_util = 1;
    if ((err = get_num(pj, "weight", 0, 1e6, &p->weight, field, origin, diag)))
        return err;
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
    case SHARDCTL_POL_ALLOCATION_RATE: {
        static const char *const ak[] = {"minCPUUtil", "maxCPUUtil", NULL};
        if ((err = check_keys(args, ak, f, origin, diag)) ||
            (err = get_num(args, "minCPUUtil", 0, 1, &p->min_util, f, origin, diag)) ||
            (err = get_num(args, "maxCPUUtil", 0, 1, &p->max_util, f, origin, diag)))
            break;
        if (p->min_util > p->max_util)
            err = as_diag_set(diag, AS_ERANGE, f, "%s: %s: minCPUUtil %g is above maxCPUUtil %g",
                              origin, f, p->min_util, p->max_util);
        break;
    }
    case SHARDCTL_POL_WARMUP: {
        static const char *const ak[] = {"warmupLabel", "warmupLabelValue", NULL};
        if ((err = check_keys(args, ak, f, origin, diag)) ||
            (err = get_str(args, "warmupLabel", &p->label, f, origin, diag)) ||
            (err = get_str(args, "warmupLabelValue", &p->label_value, f, origin, diag)))
            break;
        if (!p->label && !(p->label = strdup(SHARDCTL_DEFAULT_WARMUP_LABEL)))
            err = AS_ENOMEM;
        else if (!p->label_value && !(p->label_value = strdup("true")))
            err = AS_ENOMEM;
        else if (!*p->label)
            err = as_diag_set(diag, AS_EINVAL, f, "%s: %s.warmupLabel is empty", origin, f);
        break;
    }
    case SHARDCTL_POL_NODE_LIMIT: {
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
static as_err flat_node_limit(const json_t *sj, shardctl_sched *s, const char *field,
                              const char *origin, as_diag *diag)
{
    shardctl_policy nl = {.kind = SHARDCTL_POL_NODE_LIMIT};
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
static as_err legacy_policies(const json_t *sj, shardctl_sched *s, const char *field,
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
    if (!any)
        return AS_OK;
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
            if (s->pol[j].kind == SHARDCTL_POL_NODE_LIMIT)
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
        shardctl_policy *ar = &s->pol[s->npol++];
        ar->kind = SHARDCTL_POL_ALLOCATION_RATE;
        ar->weight = 1;
        ar->max_util = 1;
        if ((err = get_num(sj, "cpuUtilizationMin", 0, 1, &ar->min_util, field, origin, diag)) ||
            (err = get_num(sj, "cpuUtilizationMax", 0, 1, &ar->max_util, field, origin, diag)))
            return err;
        if (ar->min_util > ar->max_util)
            return as_diag_set(diag, AS_ERANGE, field,
                               "%s: %s: cpuUtilizationMin is above cpuUtilizationMax", origin,
                               field);
    }
    json_t *w = json_object_get(sj, "preferWarmupNodes");
    if (w && !json_is_boolean(w))
        return as_diag_set(diag, AS_EINVAL, field, "%s: %s.preferWarmupNodes must be a boolean",
                           origin, field);
    if (json_is_true(w)) {
        shardctl_policy *wp = &s->pol[s->npol++];
        wp->kind = SHARDCTL_POL_WARMUP;
        wp->weight = 1;
        if (!(wp->label = strdup(SHARDCTL_DEFAULT_WARMUP_LABEL)) ||
            !(wp->label_value = strdup("true")))
            return AS_ENOMEM;
    }
    if ((err = flat_node_limit(sj, s, field, origin, diag)))
        return err;
    log_warn("msg=\"deprecated flat scheduler fields; use policies\" scheduler=%s", s->name);
    return AS_OK;
}

static as_err parse_sched(const json_t *sj, shardctl_sched *s, const char *field,
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
    if ((err = legacy_policies(sj, s, field, origin, diag)))
        return err;
    for (size_t j = 0; j < s->npol; j++)
        if (s->pol[j].kind == SHARDCTL_POL_NODE_LIMIT) {
            s->min_nodes = s->pol[j].min_nodes;
            s->max_nodes = s->pol[j].max_nodes;
        }
    return AS_OK;
}

/* See shardctl.h. */
as_err shardctl_config_parse(const char *data, size_t len, const char *origin,
                             shardctl_config **out, as_diag *diag)
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
        err = text ? shardctl_config_parse(text, strlen(text), inner, out, diag)
                   : as_diag_set(diag, AS_ENOTFOUND, "data.sharding.yaml",
                                 "%s: a ConfigMap without data.sharding.yaml", origin);
        json_decref(doc);
        return err;
    }
    shardctl_config *cfg = calloc(1, sizeof *cfg);
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
    if (n > SHARDCTL_MAX_SCHEDULERS) {
        err = as_diag_set(diag, AS_ELIMIT, "schedulerConfigs", "%s: at most %d schedulers", origin,
                          SHARDCTL_MAX_SCHEDULERS);
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
            err = shardctl_duration_parse(json_string_value(sp), &ms);
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
        shardctl_config_free(cfg);
        return err;
    }
    *out = cfg;
    return AS_OK;
}

/* See shardctl.h. */
as_err shardctl_config_load(const char *path, shardctl_config **out, as_diag *diag)
{
    char *data = NULL;
    size_t len = 0;
    *out = NULL;
    as_err err = doc_read_file(path, SHARDCTL_CONFIG_MAX, &data, &len, diag);
    if (err)
        return err;
    err = shardctl_config_parse(data, len, path, out, diag);
    free(data);
    return err;
}

/* ------------------------------------------------------------------ */
/* Engine                                                              */
/* ------------------------------------------------------------------ */

typedef struct enode {
    char *name;
    uint64_t tag, epoch;
    uint32_t elig;  /* bit s: scheduler s's filter accepts it */
    int owner;      /* scheduler index, -1 none */
    int pass_owner; /* scratch of a selection pass */
    uint64_t dmark; /* == engine dgen while in the dirty list */
    double *score;  /* per scheduler (valid where elig) */
    bool live;
} enode;

typedef struct eent {
    double score;
    uint32_t node;
} eent;

typedef struct esched {
    eent *v;
    size_t n, cap;
    size_t members;
    uint64_t version;
    /* With a cap and members == cap: the last member in array order
     * (node and its score when it became the boundary). */
    bool bvalid;
    uint32_t bnode;
    double bscore;
} esched;

struct shardctl_engine {
    const shardctl_config *cfg;
    size_t ns;
    enode *nodes;
    size_t nnodes, cap_nodes;
    uint32_t *free_ids; /* recycled node slots */
    size_t nfree, cap_free;
    table map; /* live node name (key owned by the enode) -> index + 1 */
    esched s[SHARDCTL_MAX_SCHEDULERS];
    size_t live, unfit, capped;
    uint64_t fast_updates, passes, resyncs;
    /* Nodes whose owner a cascade touched (deduplicated by dmark). */
    uint32_t *dirty;
    size_t ndirty, cap_dirty;
    uint64_t dgen;
};

/* Index of name, or -1. */
static long map_find(const shardctl_engine *e, const char *name)
{
    void *v = table_get(&e->map, name, strlen(name));
    return v ? (long)((uintptr_t)v - 1) : -1;
}

static void map_del(shardctl_engine *e, const char *name)
{
    table_del(&e->map, name, strlen(name));
}

/* map_add indexes node idx, whose name must not be indexed yet. */
static as_err map_add(shardctl_engine *e, uint32_t idx)
{
    const char *name = e->nodes[idx].name;
    return table_put(&e->map, name, strlen(name), (void *)((uintptr_t)idx + 1));
}

/* See shardctl.h. */
as_err shardctl_engine_new(const shardctl_config *cfg, shardctl_engine **out)
{
    if (!cfg || cfg->n == 0 || cfg->n > SHARDCTL_MAX_SCHEDULERS)
        return AS_EINVAL;
    shardctl_engine *e = calloc(1, sizeof *e);
    if (!e)
        return AS_ENOMEM;
    e->cfg = cfg;
    e->ns = cfg->n;
    *out = e;
    return AS_OK;
}

/* See shardctl.h. */
void shardctl_engine_free(shardctl_engine *e)
{
    if (!e)
        return;
    for (size_t i = 0; i < e->nnodes; i++) {
        free(e->nodes[i].name);
        free(e->nodes[i].score);
    }
    free(e->nodes);
    free(e->free_ids);
    table_free(&e->map);
    free(e->dirty);
    for (size_t s = 0; s < e->ns; s++)
        free(e->s[s].v);
    free(e);
}

/* Volcano's allocation-rate compares utilisation and band in hundredths:
 * 0.695 is 0.70, so the bands [0, 0.69] and [0.7, 1] leave no gap. */
static double util_round(double u)
{
    return round(u * 100) / 100;
}

/* See shardctl.h. */
double shardctl_node_util(const shardctl_node_info *n)
{
    if (n->cpu_capacity <= 0)
        return -1;
    double u = (double)n->cpu_requested / (double)n->cpu_capacity;
    return util_round(u > 1 ? 1 : u);
}

/* Filter and score node n for scheduler sc; false when filtered out. */
static bool eval_sched(const shardctl_sched *sc, const shardctl_node_info *n, double *score)
{
    double util = shardctl_node_util(n);
    double sum = 0;
    for (size_t j = 0; j < sc->npol; j++) {
        const shardctl_policy *p = &sc->pol[j];
        switch (p->kind) {
        case SHARDCTL_POL_ALLOCATION_RATE: {
            /* Missing metrics or outside the band: not this scheduler's. */
            double lo = util_round(p->min_util), hi = util_round(p->max_util);
            if (util < 0 || util < lo || util > hi)
                return false;
            double span = hi - lo;
            double v = span > 0 ? (util - lo) / span : 1.0;
            sum += p->weight * (v < 0 ? 0 : v > 1 ? 1 : v);
            break;
        }
        case SHARDCTL_POL_WARMUP: {
            const char *v = n->labels ? model_labels_get(n->labels, p->label) : NULL;
            if (v && strcmp(v, p->label_value) == 0)
                sum += p->weight;
            break;
        }
        case SHARDCTL_POL_NODE_LIMIT:
            break;
        }
    }
    *score = sum;
    return true;
}

/* Order of a scheduler's sorted array: score desc, then name asc. */
static int ent_cmp(const shardctl_engine *e, double sa, uint32_t a, double sb, uint32_t b)
{
    if (sa > sb)
        return -1;
    if (sa < sb)
        return 1;
    return strcmp(e->nodes[a].name, e->nodes[b].name);
}

/* First position whose entry is not before (score, node). */
static size_t ent_lower(const shardctl_engine *e, const esched *s, double score, uint32_t node)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ent_cmp(e, s->v[mid].score, s->v[mid].node, score, node) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static as_err ent_insert(shardctl_engine *e, esched *s, double score, uint32_t node)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        eent *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return AS_ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    size_t at = ent_lower(e, s, score, node);
    memmove(&s->v[at + 1], &s->v[at], (s->n - at) * sizeof *s->v);
    s->v[at] = (eent){score, node};
    s->n++;
    return AS_OK;
}

static void ent_remove(shardctl_engine *e, esched *s, double score, uint32_t node)
{
    size_t at = ent_lower(e, s, score, node);
    if (at >= s->n || s->v[at].node != node) {
        log_error("msg=\"shardctl engine: sorted entry missing\" node=%s", e->nodes[node].name);
        return;
    }
    memmove(&s->v[at], &s->v[at + 1], (s->n - at - 1) * sizeof *s->v);
    s->n--;
}

/* Moves node i to owner o, keeping counts and versions. */
static void set_owner(shardctl_engine *e, uint32_t i, int o)
{
    enode *n = &e->nodes[i];
    if (n->owner == o)
        return;
    if (n->owner >= 0) {
        e->s[n->owner].members--;
        e->s[n->owner].version++;
    }
    if (o >= 0) {
        e->s[o].members++;
        e->s[o].version++;
    }
    n->owner = o;
}

static void count_unassigned(shardctl_engine *e, uint32_t i, int delta)
{
    const enode *n = &e->nodes[i];
    if (n->owner >= 0)
        return;
    if (!n->elig)
        e->unfit = (size_t)((long)e->unfit + delta);
    else
        e->capped = (size_t)((long)e->capped + delta);
}

/* Recomputes scheduler s's boundary by scanning back from position top
 * (every member is at or before it). */
static void fix_boundary(shardctl_engine *e, size_t s, size_t top)
{
    esched *es = &e->s[s];
    long cap = e->cfg->sched[s].max_nodes;
    es->bvalid = false;
    if (cap <= 0 || es->members < (size_t)cap || es->n == 0)
        return;
    if (top >= es->n)
        top = es->n - 1;
    for (size_t k = top + 1; k-- > 0;)
        if (e->nodes[es->v[k].node].owner == (int)s) {
            es->bvalid = true;
            es->bnode = es->v[k].node;
            es->bscore = es->v[k].score;
            return;
        }
}

/* The linear selection pass: schedulers in order each take the first
 * max_nodes entries of their sorted array not taken by an earlier one. */
static void select_pass(shardctl_engine *e)
{
    e->passes++;
    for (size_t i = 0; i < e->nnodes; i++)
        e->nodes[i].pass_owner = -1;
    for (size_t s = 0; s < e->ns; s++) {
        long max = e->cfg->sched[s].max_nodes;
        size_t taken = 0;
        for (size_t k = 0; k < e->s[s].n && (max <= 0 || taken < (size_t)max); k++) {
            enode *n = &e->nodes[e->s[s].v[k].node];
            if (n->pass_owner >= 0)
                continue;
            n->pass_owner = (int)s;
            taken++;
        }
    }
    e->unfit = e->capped = 0;
    for (size_t i = 0; i < e->nnodes; i++) {
        if (!e->nodes[i].live)
            continue;
        set_owner(e, (uint32_t)i, e->nodes[i].pass_owner);
        count_unassigned(e, (uint32_t)i, +1);
    }
    for (size_t s = 0; s < e->ns; s++)
        fix_boundary(e, s, e->s[s].n ? e->s[s].n - 1 : 0);
}

static bool avail(const shardctl_engine *e, uint32_t y, size_t s)
{
    const enode *n = &e->nodes[y];
    return ((n->elig >> s) & 1) && !(n->owner >= 0 && n->owner < (int)s);
}

/* Puts y on the dirty list (once per cascade), taking it out of the
 * unassigned counts while its old state is still in place. */
static as_err dirty_add(shardctl_engine *e, uint32_t y, bool count)
{
    enode *n = &e->nodes[y];
    if (n->dmark == e->dgen)
        return AS_OK;
    if (e->ndirty == e->cap_dirty) {
        size_t cap = e->cap_dirty ? e->cap_dirty * 2 : 64;
        uint32_t *v = realloc(e->dirty, cap * sizeof *v);
        if (!v)
            return AS_ENOMEM;
        e->dirty = v;
        e->cap_dirty = cap;
    }
    n->dmark = e->dgen;
    e->dirty[e->ndirty++] = y;
    if (count)
        count_unassigned(e, y, -1);
    return AS_OK;
}

static as_err move(shardctl_engine *e, uint32_t y, int o)
{
    as_err err = dirty_add(e, y, true);
    if (err)
        return err;
    set_owner(e, y, o);
    return AS_OK;
}

/*
 * cascade brings the owners up to date after node x's sorted entries
 * changed (x already out of the unassigned counts). Schedulers in order:
 * without a cap, a scheduler owns exactly its available nodes, so only
 * dirty nodes can change; with a cap, the members are the first `cap`
 * available entries, and a change can only (a) drop a dirty member, (b)
 * admit a dirty node ahead of the boundary, evicting the last member, or
 * (c) refill freed slots from the old boundary on. Every owner change is
 * itself dirty for the later schedulers. Cost: dirty nodes times
 * schedulers, plus the entries skipped while walking from a boundary
 * (those owned by earlier schedulers).
 */
static as_err cascade(shardctl_engine *e, uint32_t x)
{
    e->dgen++;
    e->ndirty = 0;
    as_err err = dirty_add(e, x, false);
    for (size_t s = 0; s < e->ns && !err; s++) {
        esched *es = &e->s[s];
        long cap = e->cfg->sched[s].max_nodes;
        size_t nd = e->ndirty;
        if (cap <= 0) {
            for (size_t k = 0; k < nd && !err; k++) {
                uint32_t y = e->dirty[k];
                bool av = avail(e, y, s);
                if (av && e->nodes[y].owner != (int)s)
                    err = move(e, y, (int)s);
                else if (!av && e->nodes[y].owner == (int)s)
                    err = move(e, y, -1);
            }
            continue;
        }
        bool had_b = es->bvalid;
        size_t bpos = had_b ? ent_lower(e, es, es->bscore, es->bnode) : 0;
        /* Every member sits at or before `top`. */
        size_t top = had_b ? bpos : (es->n ? es->n - 1 : 0);
        for (size_t k = 0; k < nd && !err; k++) {
            uint32_t y = e->dirty[k];
            if (e->nodes[y].owner == (int)s && (y == x || !avail(e, y, s)))
                err = move(e, y, -1);
        }
        for (size_t k = 0; k < nd && !err; k++) {
            uint32_t y = e->dirty[k];
            if (e->nodes[y].owner == (int)s || !avail(e, y, s))
                continue;
            size_t pos = ent_lower(e, es, e->nodes[y].score[s], y);
            if (had_b && pos > bpos)
                continue; /* behind the boundary: the refill meets it in order */
            err = move(e, y, (int)s);
            if (pos > top)
                top = pos;
        }
        for (size_t k = top + 1; es->members > (size_t)cap && k-- > 0 && !err;)
            if (k < es->n && e->nodes[es->v[k].node].owner == (int)s)
                err = move(e, es->v[k].node, -1);
        if (had_b)
            for (size_t k = bpos; k < es->n && es->members < (size_t)cap && !err; k++) {
                uint32_t z = es->v[k].node;
                if (e->nodes[z].owner != (int)s && avail(e, z, s)) {
                    err = move(e, z, (int)s);
                    if (k > top)
                        top = k;
                }
            }
        fix_boundary(e, s, top);
    }
    for (size_t k = 0; k < e->ndirty; k++)
        count_unassigned(e, e->dirty[k], +1);
    return err;
}

static void log_unfit_transition(const enode *n, uint32_t old_elig, bool was_live)
{
    if (!n->elig && (old_elig || !was_live))
        log_warn("msg=\"node fits no scheduler's shard filter\" node=%s", n->name);
    else if (n->elig && !old_elig && was_live)
        log_info("msg=\"node fits a shard again\" node=%s", n->name);
}

/* Re-evaluates node i against every scheduler; keeps the sorted arrays. */
static as_err rescore(shardctl_engine *e, uint32_t i, const shardctl_node_info *info, bool *moved)
{
    enode *n = &e->nodes[i];
    *moved = false;
    for (size_t s = 0; s < e->ns; s++) {
        double sc = 0;
        bool ok = eval_sched(&e->cfg->sched[s], info, &sc);
        bool was = (n->elig >> s) & 1;
        if (was != ok || (ok && sc != n->score[s]))
            *moved = true;
        if (was && (!ok || sc != n->score[s]))
            ent_remove(e, &e->s[s], n->score[s], i);
        if (ok && (!was || sc != n->score[s])) {
            n->score[s] = sc;
            as_err err = ent_insert(e, &e->s[s], sc, i);
            if (err) {
                n->elig &= ~(1u << s);
                return err;
            }
        }
        if (ok)
            n->elig |= 1u << s;
        else
            n->elig &= ~(1u << s);
    }
    return AS_OK;
}

static as_err node_slot(shardctl_engine *e, const char *name, uint32_t *out)
{
    uint32_t i;
    if (e->nfree) {
        i = e->free_ids[--e->nfree];
    } else {
        if (e->nnodes >= SHARDCTL_MAX_NODES)
            return AS_ELIMIT;
        if (e->nnodes == e->cap_nodes) {
            size_t cap = e->cap_nodes ? e->cap_nodes * 2 : 256;
            enode *v = realloc(e->nodes, cap * sizeof *v);
            if (!v)
                return AS_ENOMEM;
            e->nodes = v;
            e->cap_nodes = cap;
        }
        i = (uint32_t)e->nnodes;
        memset(&e->nodes[i], 0, sizeof e->nodes[i]);
        if (!(e->nodes[i].score = calloc(e->ns, sizeof(double))))
            return AS_ENOMEM;
        e->nnodes++;
    }
    if (e->cap_free < e->nnodes) {
        /* Every slot may end up free at once. */
        size_t cap = e->nnodes * 2;
        uint32_t *f = realloc(e->free_ids, cap * sizeof *f);
        if (!f)
            return AS_ENOMEM;
        e->free_ids = f;
        e->cap_free = cap;
    }
    enode *n = &e->nodes[i];
    if (!(n->name = strdup(name))) {
        e->free_ids[e->nfree++] = i;
        return AS_ENOMEM;
    }
    n->owner = -1;
    n->elig = 0;
    as_err err = map_add(e, i);
    if (err) {
        free(n->name);
        n->name = NULL;
        e->free_ids[e->nfree++] = i;
        return err;
    }
    n->live = true;
    e->live++;
    *out = i;
    return AS_OK;
}

/* See shardctl.h. */
as_err shardctl_engine_set_node(shardctl_engine *e, const shardctl_node_info *info, uint64_t epoch)
{
    if (!info || !info->name || !*info->name)
        return AS_EINVAL;
    long found = map_find(e, info->name);
    bool was_live = found >= 0;
    uint32_t i;
    as_err err;
    if (found >= 0) {
        i = (uint32_t)found;
    } else if ((err = node_slot(e, info->name, &i))) {
        return err;
    }
    enode *n = &e->nodes[i];
    n->tag = info->tag;
    n->epoch = epoch;
    uint32_t old_elig = n->elig;
    if (was_live)
        count_unassigned(e, i, -1);
    bool moved = false;
    err = rescore(e, i, info, &moved);
    log_unfit_transition(n, old_elig, was_live);
    e->fast_updates++;
    if (was_live && !moved) {
        /* No sorted array changed: neither did any owner. */
        count_unassigned(e, i, +1);
        return err;
    }
    as_err cerr = cascade(e, i);
    if (cerr) {
        select_pass(e); /* out of memory mid-cascade: recompute in place */
        return cerr;
    }
    return err;
}

static void drop_node(shardctl_engine *e, uint32_t i)
{
    enode *n = &e->nodes[i];
    count_unassigned(e, i, -1);
    for (size_t s = 0; s < e->ns; s++)
        if ((n->elig >> s) & 1)
            ent_remove(e, &e->s[s], n->score[s], i);
    n->elig = 0;
    /* Its slots go to the next in line (the name is still valid here). */
    if (cascade(e, i))
        select_pass(e);
    count_unassigned(e, i, -1);
    set_owner(e, i, -1);
    map_del(e, n->name);
    free(n->name);
    n->name = NULL;
    n->elig = 0;
    n->live = false;
    e->live--;
    e->free_ids[e->nfree++] = i;
}

/* See shardctl.h. */
as_err shardctl_engine_remove_node(shardctl_engine *e, const char *name)
{
    long i = map_find(e, name);
    if (i < 0)
        return AS_ENOTFOUND;
    drop_node(e, (uint32_t)i);
    return AS_OK;
}

/* See shardctl.h. */
bool shardctl_engine_seen(shardctl_engine *e, const char *name, uint64_t epoch, uint64_t *tag)
{
    long i = map_find(e, name);
    if (i < 0)
        return false;
    e->nodes[i].epoch = epoch;
    if (tag)
        *tag = e->nodes[i].tag;
    return true;
}

/* See shardctl.h. */
as_err shardctl_engine_sweep(shardctl_engine *e, uint64_t epoch, size_t *removed)
{
    size_t k = 0;
    for (size_t i = 0; i < e->nnodes; i++)
        if (e->nodes[i].live && e->nodes[i].epoch != epoch) {
            drop_node(e, (uint32_t)i);
            k++;
        }
    if (removed)
        *removed = k;
    return AS_OK;
}

typedef struct sort_ctx_ent {
    double score;
    uint32_t node;
    const char *name;
} sort_ctx_ent;

static int sort_ent_cmp(const void *a, const void *b)
{
    const sort_ctx_ent *x = a, *y = b;
    if (x->score > y->score)
        return -1;
    if (x->score < y->score)
        return 1;
    return strcmp(x->name, y->name);
}

/* See shardctl.h. */
as_err shardctl_engine_resync(shardctl_engine *e, const shardctl_node_info *nodes, size_t n,
                              uint64_t epoch)
{
    /* From scratch: forget everything, then score, sort and select. */
    for (size_t i = 0; i < e->nnodes; i++) {
        free(e->nodes[i].name);
        free(e->nodes[i].score);
    }
    e->nnodes = e->nfree = e->live = 0;
    table_free(&e->map);
    for (size_t s = 0; s < e->ns; s++) {
        e->s[s].n = 0;
        e->s[s].members = 0;
        e->s[s].version++;
    }
    e->unfit = e->capped = 0;
    e->resyncs++;
    as_err err = AS_OK;
    sort_ctx_ent *tmp = calloc(n ? n : 1, sizeof *tmp);
    if (!tmp)
        return AS_ENOMEM;
    for (size_t k = 0; k < n; k++) {
        if (!nodes[k].name || !*nodes[k].name || map_find(e, nodes[k].name) >= 0)
            continue;
        uint32_t i;
        if ((err = node_slot(e, nodes[k].name, &i)))
            goto done;
        e->nodes[i].tag = nodes[k].tag;
        e->nodes[i].epoch = epoch;
    }
    for (size_t s = 0; s < e->ns; s++) {
        size_t m = 0;
        for (size_t k = 0; k < n; k++) {
            long i = nodes[k].name ? map_find(e, nodes[k].name) : -1;
            if (i < 0)
                continue;
            double sc;
            if (!eval_sched(&e->cfg->sched[s], &nodes[k], &sc))
                continue;
            enode *nd = &e->nodes[i];
            if ((nd->elig >> s) & 1)
                continue; /* duplicate name in the input */
            nd->elig |= 1u << s;
            nd->score[s] = sc;
            tmp[m++] = (sort_ctx_ent){sc, (uint32_t)i, nd->name};
        }
        qsort(tmp, m, sizeof *tmp, sort_ent_cmp);
        esched *es = &e->s[s];
        if (es->cap < m) {
            eent *v = realloc(es->v, m * sizeof *v);
            if (!v) {
                err = AS_ENOMEM;
                goto done;
            }
            es->v = v;
            es->cap = m;
        }
        for (size_t k = 0; k < m; k++)
            es->v[k] = (eent){tmp[k].score, tmp[k].node};
        es->n = m;
    }
    select_pass(e);
    if (e->unfit) {
        /* One line per resync (they recur every shardSyncPeriod); node
         * events log each transition. */
        char sample[512] = "";
        size_t used = 0, shown = 0;
        for (size_t i = 0; i < e->nnodes && shown < 5; i++)
            if (e->nodes[i].live && !e->nodes[i].elig) {
                int w = snprintf(sample + used, sizeof sample - used, "%s%s", shown ? "," : "",
                                 e->nodes[i].name);
                if (w < 0 || (size_t)w >= sizeof sample - used)
                    break;
                used += (size_t)w;
                shown++;
            }
        log_warn("msg=\"nodes fit no scheduler's shard filter\" count=%zu sample=%s", e->unfit,
                 sample);
    }
done:
    free(tmp);
    return err;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* See shardctl.h. */
as_err shardctl_engine_members(shardctl_engine *e, size_t s, const char ***names, size_t *n,
                               uint64_t *version)
{
    *names = NULL;
    *n = 0;
    if (s >= e->ns)
        return AS_EINVAL;
    const char **v = calloc(e->s[s].members + 1, sizeof *v);
    if (!v)
        return AS_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < e->nnodes && k < e->s[s].members; i++)
        if (e->nodes[i].live && e->nodes[i].owner == (int)s)
            v[k++] = e->nodes[i].name;
    qsort(v, k, sizeof *v, cmp_cstr);
    *names = v;
    *n = k;
    if (version)
        *version = e->s[s].version;
    return AS_OK;
}

/* See shardctl.h. */
uint64_t shardctl_engine_version(const shardctl_engine *e, size_t i)
{
    return i < e->ns ? e->s[i].version : 0;
}

/* See shardctl.h. */
int shardctl_engine_owner(shardctl_engine *e, const char *name)
{
    long i = map_find(e, name);
    return i < 0 ? -1 : e->nodes[i].owner;
}

/* See shardctl.h. */
void shardctl_engine_get_stats(const shardctl_engine *e, shardctl_engine_stats *out)
{
    memset(out, 0, sizeof *out);
    out->nodes = e->live;
    out->unfit = e->unfit;
    out->capped = e->capped;
    for (size_t s = 0; s < e->ns; s++) {
        out->members[s] = e->s[s].members;
        out->below_min[s] = (long)e->s[s].members < e->cfg->sched[s].min_nodes;
    }
    out->fast_updates = e->fast_updates;
    out->passes = e->passes;
    out->resyncs = e->resyncs;
}

/* See shardctl.h. */
as_err shardctl_config_from_configmap(const json_t *cm, const char *key, const char *origin,
                                      shardctl_config **out, as_diag *diag)
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
    return shardctl_config_parse(text, strlen(text), origin, out, diag);
}

/* ------------------------------------------------------------------ */
/* Config reload                                                       */
/* ------------------------------------------------------------------ */

/* See shardctl.h. */
as_err shardctl_config_reload(const char *path, shardctl_file_stamp *stamp, shardctl_config **next,
                              as_diag *diag)
{
    *next = NULL;
    struct stat st;
    if (stat(path, &st) != 0)
        return as_diag_set(diag, AS_EIO, NULL, "%s: cannot stat: %s (keeping the current config)",
                           path, strerror(errno));
    shardctl_file_stamp now = {
        .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
        .size = (int64_t)st.st_size,
        .ino = (uint64_t)st.st_ino,
        .valid = true,
    };
    if (stamp->valid && stamp->mtime_ns == now.mtime_ns && stamp->size == now.size &&
        stamp->ino == now.ino)
        return AS_OK;
    *stamp = now;
    return shardctl_config_load(path, next, diag);
}

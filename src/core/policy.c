/*
 * policy.c - the scoring policy YAML loader (score_policy_load).
 *
 * The file is read with doc_load_file into a DOM and walked field by
 * field; every key must be known and every value is checked for type and
 * range, so a typo is an error naming the file and the field path, never a
 * silently ignored setting. Loading has no side effects: the registry is
 * only read (see score_policy_apply_gpu_names), so a rejected reload leaves
 * the running policy untouched. Format: policy/default.yaml documents it.
 */
#include "agentsched/core/policy.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agentsched/base/doc.h"
#include "agentsched/model/gpuannot.h"
#include "agentsched/model/quantity.h"
#include "score_int.h"

#define POLICY_FILE_CAP ((size_t)1 << 20)

typedef struct ld_ctx {
    const char *path;
    as_diag *diag;
    score_policy *p;
} ld_ctx;

static as_err fail(ld_ctx *c, as_err err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static as_err fail(ld_ctx *c, as_err err, const char *field, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!*field)
        return as_diag_set(c->diag, err, field, "%s: %s", c->path, msg);
    return as_diag_set(c->diag, err, field, "%s: %s: %s", c->path, field, msg);
}

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "a mapping";
    case JSON_ARRAY:
        return "a list";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "a number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    }
    return "a value";
}

/* Checks that obj is a mapping whose keys are all in allowed (NULL-ended). */
static as_err check_keys(ld_ctx *c, const json_t *obj, const char *path, const char *const *allowed)
{
    if (!json_is_object(obj))
        return fail(c, AS_EINVAL, path, "%s must be a mapping, not %s",
                    *path ? "this field" : "the policy", type_name(obj));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i] && !ok; i++)
            ok = strcmp(key, allowed[i]) == 0;
        if (!ok) {
            char f[192];
            snprintf(f, sizeof f, "%s%s%s", path, *path ? "." : "", key);
            char list[160] = "";
            for (size_t i = 0; allowed[i]; i++) {
                size_t n = strlen(list);
                snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", allowed[i]);
            }
            return fail(c, AS_EINVAL, f, "unknown field; known fields here: %s", list);
        }
    }
    return AS_OK;
}

static void join(char *dst, size_t n, const char *a, const char *b)
{
    snprintf(dst, n, "%s%s%s", a, *a ? "." : "", b);
}

/* A finite number in [lo, hi]. */
static as_err get_num(ld_ctx *c, const json_t *v, const char *field, double lo, double hi,
                      double *out)
{
    if (!json_is_number(v))
        return fail(c, AS_EINVAL, field, "must be a number, not %s", type_name(v));
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return fail(c, AS_ERANGE, field, "%g is out of range; use a number from %g to %g", x, lo,
                    hi);
    *out = x;
    return AS_OK;
}

static as_err get_int(ld_ctx *c, const json_t *v, const char *field, long lo, long hi, long *out)
{
    if (!json_is_integer(v))
        return fail(c, AS_EINVAL, field, "must be an integer, not %s", type_name(v));
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return fail(c, AS_ERANGE, field, "%lld is out of range; use an integer from %ld to %ld",
                    (long long)x, lo, hi);
    *out = (long)x;
    return AS_OK;
}

static as_err get_bool(ld_ctx *c, const json_t *v, const char *field, bool *out)
{
    if (!json_is_boolean(v))
        return fail(c, AS_EINVAL, field, "must be true or false, not %s", type_name(v));
    *out = json_is_true(v);
    return AS_OK;
}

static as_err get_name(ld_ctx *c, const json_t *v, const char *field, char *out, size_t n)
{
    if (!json_is_string(v))
        return fail(c, AS_EINVAL, field, "must be a string, not %s", type_name(v));
    const char *s = json_string_value(v);
    size_t len = json_string_length(v);
    if (len == 0 || len >= n || len >= MODEL_RES_NAME_MAX || strlen(s) != len)
        return fail(c, AS_EINVAL, field, "must be a non-empty name shorter than %d characters",
                    MODEL_RES_NAME_MAX);
    memcpy(out, s, len + 1);
    return AS_OK;
}

/* A quantity (string or number) of resource `res`, > 0. */
static as_err get_quantity(ld_ctx *c, const json_t *v, const char *field, bool milli, int64_t *out)
{
    as_diag qd = {{0}, {0}};
    if (model_quantity_from_json(v, milli, out, &qd) != AS_OK)
        return fail(c, AS_EINVAL, field, "not a quantity (%s)", qd.msg);
    if (*out <= 0)
        return fail(c, AS_ERANGE, field, "must be greater than zero");
    return AS_OK;
}

static bool is_cpu(const char *name)
{
    return strcmp(name, "cpu") == 0;
}

static as_err load_resources(ld_ctx *c, const json_t *obj)
{
    score_policy *p = c->p;
    if (!json_is_object(obj))
        return fail(c, AS_EINVAL, "resources",
                    "must be a mapping of resource name to weight, not %s", type_name(obj));
    if (json_object_size(obj) == 0)
        return fail(c, AS_EINVAL, "resources", "name at least one resource with a weight");
    if (json_object_size(obj) > SCORE_MAX_WEIGHTS)
        return fail(c, AS_ELIMIT, "resources", "at most %d resources", SCORE_MAX_WEIGHTS);
    p->nw = 0;
    const char *key;
    json_t *v;
    double total = 0;
    json_object_foreach((json_t *)obj, key, v)
    {
        char f[192];
        snprintf(f, sizeof f, "resources[%s]", key);
        double w;
        as_err err = get_num(c, v, f, 0, 1e6, &w);
        if (err)
            return err;
        if (strlen(key) == 0 || strlen(key) >= MODEL_RES_NAME_MAX)
            return fail(c, AS_EINVAL, f, "resource names are 1 to %d characters",
                        MODEL_RES_NAME_MAX - 1);
        if (score_policy_set_weight(p, key, w, 1) != AS_OK)
            return fail(c, AS_ELIMIT, f, "too many resources");
        total += w;
    }
    if (total <= 0)
        return fail(c, AS_EINVAL, "resources", "at least one weight must be greater than zero");
    return AS_OK;
}

static as_err load_best_fit(ld_ctx *c, const json_t *obj)
{
    static const char *const keys[] = {"units", "measure", NULL};
    as_err err = check_keys(c, obj, "bestFit", keys);
    if (err)
        return err;
    const json_t *measure = json_object_get(obj, "measure");
    if (measure) {
        const char *m = json_is_string(measure) ? json_string_value(measure) : "";
        if (strcmp(m, "units") == 0)
            c->p->bf_fraction = false;
        else if (strcmp(m, "fraction") == 0)
            c->p->bf_fraction = true;
        else
            return fail(c, AS_EINVAL, "bestFit.measure", "must be units or fraction");
    }
    const json_t *units = json_object_get(obj, "units");
    if (!units)
        return AS_OK;
    if (!json_is_object(units))
        return fail(c, AS_EINVAL, "bestFit.units", "must be a mapping of resource to quantity");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)units, key, v)
    {
        char f[192];
        snprintf(f, sizeof f, "bestFit.units[%s]", key);
        int i;
        for (i = 0; i < c->p->nw; i++)
            if (strcmp(c->p->w[i].name, key) == 0)
                break;
        if (i == c->p->nw)
            return fail(c, AS_EINVAL, f, "no weight for this resource; add it under resources");
        int64_t q;
        if ((err = get_quantity(c, v, f, is_cpu(key), &q)))
            return err;
        /* GPUs are measured in milli-GPU. */
        c->p->w[i].unit =
            strcmp(key, c->p->gpu_name) == 0 ? (double)q * MODEL_GPU_MILLI : (double)q;
    }
    return AS_OK;
}

/* load_gpu_annotations reads gpu.annotations: a list of device annotation
 * contracts (gpuannot.h), each named once; [] writes none. */
static as_err load_gpu_annotations(ld_ctx *c, const json_t *v)
{
    if (!json_is_array(v))
        return fail(c, AS_EINVAL, "gpu.annotations",
                    "must be a list of annotation contracts (agentsched, volcano), not %s",
                    type_name(v));
    uint32_t set = 0;
    for (size_t i = 0; i < json_array_size(v); i++) {
        char f[64];
        snprintf(f, sizeof f, "gpu.annotations[%zu]", i);
        const json_t *s = json_array_get(v, i);
        uint32_t bit = 0;
        if (!json_is_string(s) || gpuannot_contract_parse(json_string_value(s), &bit) != AS_OK)
            return fail(c, AS_EINVAL, f, "unknown annotation contract; use agentsched or volcano");
        if (set & bit)
            return fail(c, AS_EINVAL, f, "%s is listed twice", gpuannot_contract_name(bit));
        set |= bit;
    }
    c->p->gpu_annotations = set;
    return AS_OK;
}

static as_err load_gpu(ld_ctx *c, const json_t *obj)
{
    static const char *const keys[] = {"resourceName", "shareResourceName", "modelLabel",
                                       "annotations", NULL};
    as_err err = check_keys(c, obj, "gpu", keys);
    if (err)
        return err;
    score_policy *p = c->p;
    const json_t *v;
    if ((v = json_object_get(obj, "resourceName")) &&
        (err = get_name(c, v, "gpu.resourceName", p->gpu_name, sizeof p->gpu_name)))
        return err;
    if ((v = json_object_get(obj, "shareResourceName")) &&
        (err =
             get_name(c, v, "gpu.shareResourceName", p->gpu_share_name, sizeof p->gpu_share_name)))
        return err;
    if ((v = json_object_get(obj, "modelLabel")) &&
        (err = get_name(c, v, "gpu.modelLabel", p->gpu_model_label, sizeof p->gpu_model_label)))
        return err;
    if (strcmp(p->gpu_name, p->gpu_share_name) == 0)
        return fail(c, AS_EINVAL, "gpu.shareResourceName", "must differ from gpu.resourceName");
    if ((v = json_object_get(obj, "annotations")))
        return load_gpu_annotations(c, v);
    return AS_OK;
}

static as_err load_agent_pods(ld_ctx *c, const json_t *obj)
{
    static const char *const keys[] = {"schedulerNames", "labels", NULL};
    as_err err = check_keys(c, obj, "agentPods", keys);
    if (err)
        return err;
    score_policy *p = c->p;
    const json_t *names = json_object_get(obj, "schedulerNames");
    if (names) {
        if (!json_is_array(names))
            return fail(c, AS_EINVAL, "agentPods.schedulerNames",
                        "must be a list of scheduler names, not %s", type_name(names));
        size_t n = json_array_size(names);
        if (n > 64)
            return fail(c, AS_ELIMIT, "agentPods.schedulerNames", "at most 64 names");
        const char **arr = n ? pool_alloc(p->pool, n * sizeof *arr) : NULL;
        if (n && !arr)
            return fail(c, AS_ENOMEM, "agentPods.schedulerNames", "out of memory");
        for (size_t i = 0; i < n; i++) {
            char f[192];
            snprintf(f, sizeof f, "agentPods.schedulerNames[%zu]", i);
            const json_t *s = json_array_get(names, i);
            if (!json_is_string(s) || json_string_length(s) == 0 || json_string_length(s) > 253)
                return fail(c, AS_EINVAL, f, "must be a scheduler name (1 to 253 characters)");
            if (!(arr[i] = pool_strdup(p->pool, json_string_value(s))))
                return fail(c, AS_ENOMEM, f, "out of memory");
        }
        p->agent_sched = arr;
        p->nagent_sched = n;
    }
    const json_t *labels = json_object_get(obj, "labels");
    if (labels) {
        if (!json_is_object(labels))
            return fail(c, AS_EINVAL, "agentPods.labels",
                        "must be a mapping of label key to value, not %s", type_name(labels));
        size_t n = json_object_size(labels);
        if (n > 64)
            return fail(c, AS_ELIMIT, "agentPods.labels", "at most 64 labels");
        model_kv *kv = n ? pool_alloc(p->pool, n * sizeof *kv) : NULL;
        if (n && !kv)
            return fail(c, AS_ENOMEM, "agentPods.labels", "out of memory");
        size_t i = 0;
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)labels, key, v)
        {
            char f[192];
            snprintf(f, sizeof f, "agentPods.labels[%s]", key);
            if (!json_is_string(v))
                return fail(c, AS_EINVAL, f, "label values are strings (quote them), not %s",
                            type_name(v));
            kv[i].key = pool_strdup(p->pool, key);
            kv[i].value = pool_strdup(p->pool, json_string_value(v));
            if (!kv[i].key || !kv[i].value)
                return fail(c, AS_ENOMEM, f, "out of memory");
            i++;
        }
        p->agent_labels = kv;
        p->nagent_labels = n;
    }
    return AS_OK;
}

static as_err load_extender(ld_ctx *c, const json_t *obj)
{
    static const char *const keys[] = {"maxScore", "scoreMin",  "scoreMax",
                                       "rounding", "shortlist", NULL};
    as_err err = check_keys(c, obj, "extender", keys);
    if (err)
        return err;
    score_policy *p = c->p;
    const json_t *v;
    long l;
    if ((v = json_object_get(obj, "maxScore"))) {
        if ((err = get_int(c, v, "extender.maxScore", 1, 100, &l)))
            return err;
        p->ext_max = (int)l;
    }
    if ((v = json_object_get(obj, "scoreMin")) &&
        (err = get_num(c, v, "extender.scoreMin", 0, 100, &p->ext_lo)))
        return err;
    if ((v = json_object_get(obj, "scoreMax")) &&
        (err = get_num(c, v, "extender.scoreMax", 0, 100, &p->ext_hi)))
        return err;
    if (p->ext_hi <= p->ext_lo)
        return fail(c, AS_EINVAL, "extender.scoreMax", "must be greater than extender.scoreMin");
    if ((v = json_object_get(obj, "rounding"))) {
        const char *s = json_string_value(v);
        if (s && strcmp(s, "nearest") == 0)
            p->ext_floor = false;
        else if (s && strcmp(s, "floor") == 0)
            p->ext_floor = true;
        else
            return fail(c, AS_EINVAL, "extender.rounding", "must be \"nearest\" or \"floor\"");
    }
    if ((v = json_object_get(obj, "shortlist"))) {
        if ((err = get_int(c, v, "extender.shortlist", 0, SCORE_MAX_SHORTLIST, &l)))
            return err;
        p->ext_shortlist = (uint32_t)l;
    }
    return AS_OK;
}

static as_err load_standalone(ld_ctx *c, const json_t *obj)
{
    static const char *const keys[] = {"candidates", "minScore", NULL};
    as_err err = check_keys(c, obj, "standalone", keys);
    if (err)
        return err;
    const json_t *v;
    long l;
    if ((v = json_object_get(obj, "candidates"))) {
        if ((err = get_int(c, v, "standalone.candidates", 1, 16, &l)))
            return err;
        c->p->candidates = (uint32_t)l;
    }
    if ((v = json_object_get(obj, "minScore")) &&
        (err = get_num(c, v, "standalone.minScore", 0, 100, &c->p->min_score)))
        return err;
    return AS_OK;
}

static as_err load_shape(ld_ctx *c, const json_t *obj, const char *path)
{
    static const char *const keys[] = {"cpu", "memory", "gpu", "gpuMilli", "popularity", NULL};
    as_err err = check_keys(c, obj, path, keys);
    if (err)
        return err;
    score_shape s = {0, 0, 0, 0};
    double pop = 1;
    char f[192];
    const json_t *v;
    if ((v = json_object_get(obj, "cpu"))) {
        join(f, sizeof f, path, "cpu");
        if ((err = get_quantity(c, v, f, true, &s.cpu)))
            return err;
    }
    if ((v = json_object_get(obj, "memory"))) {
        join(f, sizeof f, path, "memory");
        if ((err = get_quantity(c, v, f, false, &s.mem)))
            return err;
    }
    long l;
    if ((v = json_object_get(obj, "gpu"))) {
        join(f, sizeof f, path, "gpu");
        if ((err = get_int(c, v, f, 0, MODEL_MAX_GPUS, &l)))
            return err;
        s.gpu_count = (uint32_t)l;
        s.gpu_milli = l ? MODEL_GPU_MILLI : 0;
    }
    if ((v = json_object_get(obj, "gpuMilli"))) {
        join(f, sizeof f, path, "gpuMilli");
        if ((err = get_int(c, v, f, 1, MODEL_GPU_MILLI, &l)))
            return err;
        if (l < MODEL_GPU_MILLI && s.gpu_count > 1)
            return fail(c, AS_EINVAL, f, "a GPU share is part of one GPU; set gpu: 1");
        if (s.gpu_count == 0)
            s.gpu_count = 1;
        s.gpu_milli = (uint32_t)l;
    }
    if ((v = json_object_get(obj, "popularity"))) {
        join(f, sizeof f, path, "popularity");
        if ((err = get_num(c, v, f, 0, 1e9, &pop)))
            return err;
    }
    if (score_policy_add_shape(c->p, &s, pop) != AS_OK)
        return fail(c, AS_ELIMIT, path, "too many shapes (at most %d)", SCORE_MAX_SHAPES);
    return AS_OK;
}

static as_err load_shapes(ld_ctx *c, const json_t *obj)
{
    static const char *const keys[] = {"learn", "coverage", "given", NULL};
    as_err err = check_keys(c, obj, "shapes", keys);
    if (err)
        return err;
    const json_t *v;
    if ((v = json_object_get(obj, "learn")) && (err = get_bool(c, v, "shapes.learn", &c->p->learn)))
        return err;
    if ((v = json_object_get(obj, "coverage"))) {
        if ((err = get_num(c, v, "shapes.coverage", 0, 1, &c->p->pop_threshold)))
            return err;
        if (c->p->pop_threshold <= 0)
            return fail(c, AS_ERANGE, "shapes.coverage", "must be greater than 0");
    }
    const json_t *given = json_object_get(obj, "given");
    if (given) {
        if (!json_is_array(given))
            return fail(c, AS_EINVAL, "shapes.given", "must be a list of shapes, not %s",
                        type_name(given));
        for (size_t i = 0; i < json_array_size(given); i++) {
            char f[192];
            snprintf(f, sizeof f, "shapes.given[%zu]", i);
            if ((err = load_shape(c, json_array_get(given, i), f)))
                return err;
        }
    }
    if (!c->p->learn && (!given || json_array_size(given) == 0))
        return fail(c, AS_EINVAL, "shapes.given",
                    "with learn: false, give at least one shape (fgd needs popularity)");
    return AS_OK;
}

static as_err load_fragment(ld_ctx *c, const json_t *obj)
{
    static const char *const keys[] = {
        "strand",   "strandMix",          "partial",      "multiGpu",      "spread",    "spreadGpu",
        "pack",     "cpuPerGpu",          "memoryPerGpu", "spreadSurplus", "spreadCpu", "reserve",
        "keepFree", "keepFreeFragmented", "fillable",     "modelPressure", NULL};
    as_err err = check_keys(c, obj, "fragment", keys);
    if (err)
        return err;
    score_policy *p = c->p;
    static const struct {
        const char *key;
        size_t off;
        double max; /* weights 0..100; shares of a whole 0..1 */
    } nums[] = {
        {"strand", offsetof(score_policy, f_strand), 100},
        {"partial", offsetof(score_policy, f_frag), 100},
        {"multiGpu", offsetof(score_policy, f_multi), 100},
        {"spread", offsetof(score_policy, f_spread), 100},
        {"spreadGpu", offsetof(score_policy, f_spread_gpu), 100},
        {"pack", offsetof(score_policy, f_pack), 100},
        {"spreadCpu", offsetof(score_policy, f_spread_cpu), 100},
        {"reserve", offsetof(score_policy, f_reserve), 100},
        {"strandMix", offsetof(score_policy, f_mix), 1},
        {"keepFree", offsetof(score_policy, f_keep_free), 1},
        {"keepFreeFragmented", offsetof(score_policy, f_keep_frag), 1},
        {"fillable", offsetof(score_policy, f_fillable), 1},
        {"modelPressure", offsetof(score_policy, f_model), 100},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        const json_t *v = json_object_get(obj, nums[i].key);
        char f[192];
        join(f, sizeof f, "fragment", nums[i].key);
        if (v && (err = get_num(c, v, f, 0, nums[i].max, (double *)((char *)p + nums[i].off))))
            return err;
    }
    const json_t *v;
    if ((v = json_object_get(obj, "spreadSurplus")) &&
        (err = get_bool(c, v, "fragment.spreadSurplus", &p->f_surplus)))
        return err;
    int64_t q;
    if ((v = json_object_get(obj, "cpuPerGpu"))) {
        if ((err = get_quantity(c, v, "fragment.cpuPerGpu", true, &q)))
            return err;
        p->f_cpu_gpu = (double)q;
    }
    if ((v = json_object_get(obj, "memoryPerGpu"))) {
        if ((err = get_quantity(c, v, "fragment.memoryPerGpu", false, &q)))
            return err;
        p->f_mem_gpu = (double)q / (1024.0 * 1024.0);
    }
    return AS_OK;
}

static as_err load_doc(ld_ctx *c, const json_t *doc, const model_registry *reg)
{
    static const char *const keys[] = {
        "apiVersion", "kind",       "strategy", "resources",      "bestFit",  "gpu", "agentPods",
        "extender",   "standalone", "shapes",   "softShardBonus", "fragment", NULL};
    as_err err = check_keys(c, doc, "", keys);
    if (err)
        return err;
    const json_t *v;
    if ((v = json_object_get(doc, "apiVersion")) &&
        (!json_is_string(v) || strcmp(json_string_value(v), "agentsched.io/v1alpha1") != 0))
        return fail(c, AS_EINVAL, "apiVersion", "must be \"agentsched.io/v1alpha1\"");
    if ((v = json_object_get(doc, "kind")) &&
        (!json_is_string(v) || strcmp(json_string_value(v), "SchedulingPolicy") != 0))
        return fail(c, AS_EINVAL, "kind", "must be \"SchedulingPolicy\"");
    if ((v = json_object_get(doc, "strategy"))) {
        if (!json_is_string(v) || score_strategy_parse(json_string_value(v), &c->p->strategy))
            return fail(c, AS_EINVAL, "strategy",
                        "unknown strategy; use one of least-allocated, most-allocated, "
                        "balanced-allocation, best-fit, fgd, fragment");
    }
    /* gpu first: the GPU resource name decides which weight is per device. */
    if ((v = json_object_get(doc, "gpu")) && (err = load_gpu(c, v)))
        return err;
    if ((v = json_object_get(doc, "resources")) && (err = load_resources(c, v)))
        return err;
    /* Default best-fit units for every weight, then the given ones. */
    for (int i = 0; i < c->p->nw; i++) {
        score_weight *w = &c->p->w[i];
        w->unit = strcmp(w->name, "cpu") == 0            ? 1000
                  : strcmp(w->name, "memory") == 0       ? 4.0 * 1024 * 1024 * 1024
                  : strcmp(w->name, c->p->gpu_name) == 0 ? MODEL_GPU_MILLI
                                                         : 1;
    }
    if (!json_object_get(doc, "resources")) {
        /* The default GPU weight follows a renamed GPU resource. */
        for (int i = 0; i < c->p->nw; i++)
            if (strcmp(c->p->w[i].name, "nvidia.com/gpu") == 0)
                snprintf(c->p->w[i].name, sizeof c->p->w[i].name, "%s", c->p->gpu_name);
    }
    if ((v = json_object_get(doc, "bestFit")) && (err = load_best_fit(c, v)))
        return err;
    if ((v = json_object_get(doc, "agentPods")) && (err = load_agent_pods(c, v)))
        return err;
    if ((v = json_object_get(doc, "extender")) && (err = load_extender(c, v)))
        return err;
    if ((v = json_object_get(doc, "standalone")) && (err = load_standalone(c, v)))
        return err;
    if ((v = json_object_get(doc, "shapes")) && (err = load_shapes(c, v)))
        return err;
    if ((v = json_object_get(doc, "softShardBonus")) &&
        (err = get_num(c, v, "softShardBonus", 0, 100, &c->p->soft_bonus)))
        return err;
    if ((v = json_object_get(doc, "fragment")) && (err = load_fragment(c, v)))
        return err;

    /* Once nodes with GPUs are known, the GPU resource names are fixed. */
    if (reg && __atomic_load_n(&reg->gpu_res, __ATOMIC_ACQUIRE) >= 0 &&
        (strcmp(reg->gpu_name, c->p->gpu_name) != 0 ||
         strcmp(reg->gpu_share_name, c->p->gpu_share_name) != 0 ||
         strcmp(reg->gpu_model_label, c->p->gpu_model_label) != 0))
        return fail(c, AS_EINVAL, "gpu",
                    "the running scheduler uses %s / %s / %s; changing GPU resource names "
                    "needs a restart",
                    reg->gpu_name, reg->gpu_share_name, reg->gpu_model_label);
    return AS_OK;
}

/* See policy.h. */
as_err score_policy_parse(model_registry *reg, const char *name, const char *text, size_t len,
                          score_policy **out, as_diag *diag)
{
    *out = NULL;
    json_t *doc = NULL;
    as_err err = doc_parse(text, len, false, &doc, diag);
    if (err) {
        char msg[sizeof diag->msg];
        if (diag) {
            snprintf(msg, sizeof msg, "%s: %s", name, diag->msg);
            memcpy(diag->msg, msg, sizeof msg);
        }
        return err;
    }
    score_policy *p = score_policy_alloc(SCORE_FRAGMENT);
    if (!p) {
        json_decref(doc);
        return as_diag_set(diag, AS_ENOMEM, NULL, "%s: out of memory", name);
    }
    p->reg = reg;
    ld_ctx c = {name, diag, p};
    if (json_is_null(doc))
        err = AS_OK; /* an empty file is the default policy */
    else
        err = load_doc(&c, doc, reg);
    json_decref(doc);
    if (err) {
        score_policy_unref(p);
        return err;
    }
    score_policy_finish(p);
    *out = p;
    return AS_OK;
}

/* See policy.h. */
as_err score_policy_load(model_registry *reg, const char *path, score_policy **out, as_diag *diag)
{
    *out = NULL;
    char *text = NULL;
    size_t len = 0;
    as_err err = doc_read_file(path, POLICY_FILE_CAP, &text, &len, diag);
    if (err)
        return err;
    err = score_policy_parse(reg, path, text, len, out, diag);
    free(text);
    return err;
}

/* See policy.h. */
as_err score_policy_apply_gpu_names(const score_policy *p, model_registry *reg)
{
    if (strcmp(reg->gpu_name, p->gpu_name) == 0 &&
        strcmp(reg->gpu_share_name, p->gpu_share_name) == 0 &&
        strcmp(reg->gpu_model_label, p->gpu_model_label) == 0)
        return AS_OK;
    if (__atomic_load_n(&reg->gpu_res, __ATOMIC_ACQUIRE) >= 0)
        return AS_ECONFLICT;
    snprintf(reg->gpu_name, sizeof reg->gpu_name, "%s", p->gpu_name);
    snprintf(reg->gpu_share_name, sizeof reg->gpu_share_name, "%s", p->gpu_share_name);
    snprintf(reg->gpu_model_label, sizeof reg->gpu_model_label, "%s", p->gpu_model_label);
    return AS_OK;
}
